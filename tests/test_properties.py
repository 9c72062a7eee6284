"""Property tests over random container classes and random trees.

The laws every operation must keep (functor identity and composition, round trips,
kept fields, folds), and the agreement of each fast path with its plain statement:
generated code with its getattr twin, fmap's fast path with the iterative engine and
with the composed walk objects, each acceleration with its twin on trees with shared
objects (by result, calls of f and sharing), and the identity cache's contract.
"""

from __future__ import annotations

import dataclasses
import itertools
import pickle
import warnings
from collections import OrderedDict, deque, namedtuple
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from operator import is_
from types import ModuleType
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import containers as ct
from containers import _codegen, _parallel
from containers._engine import _fast
from containers._engine._collect import collect, fast_collect
from containers._engine._core import UNSET, Memo, map_tree
from containers._engine._flat import flatten_records
from containers._registry import cacheable, kind_of

settings.register_profile(
    "containers", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("containers")

Point = namedtuple("Point", ["x", "y"])
_serial = itertools.count()


# --- random container classes ------------------------------------------------------------


@st.composite
def container_classes(draw: st.DrawFn) -> type:
    """A freshly declared container class: dataclass or attrs, with children, kept and
    reset fields (a default value or a factory) in random order."""
    n = draw(st.integers(0, 4))
    names = [f"f{i}" for i in range(n)]
    roles = [draw(st.sampled_from(["child", "keep", "reset"])) for _ in names]
    use_keep = "reset" in roles or draw(st.booleans())
    children = [nm for nm, r in zip(names, roles) if r == "child"]
    children = draw(st.permutations(children)) if children else []
    keep = [nm for nm, r in zip(names, roles) if r == "keep"]
    flavor = draw(st.sampled_from(["dataclass", "dataclass-mutable", "attrs", "attrs-slots"]))
    # a reset field's default: a value, or a factory called for each rebuilt instance
    defaults = {
        nm: draw(st.sampled_from([f"default-{nm}", list]))
        for nm, r in zip(names, roles)
        if r == "reset"
    }
    cls_name = f"Random{next(_serial)}"
    if flavor.startswith("dataclass"):
        fields = [
            (nm, Any, _dataclass_default(defaults[nm])) if nm in defaults else (nm, Any)
            for nm in names
        ]
        # Fields without defaults must come first in a dataclass.
        fields.sort(key=lambda f: len(f) == 3)
        cls = dataclasses.make_dataclass(cls_name, fields, frozen=flavor == "dataclass")
    else:
        attributes = {
            nm: attrs.field(default=_attrs_default(defaults[nm]))
            if nm in defaults
            else attrs.field()
            for nm in sorted(names, key=lambda nm: nm in defaults)
        }
        cls = attrs.make_class(
            cls_name, attributes, slots=flavor == "attrs-slots", frozen=flavor == "attrs-slots"
        )
    # Make the class importable by pickle, as a class defined in a module would be.
    cls.__module__ = __name__
    globals()[cls_name] = cls
    return ct.container(children=list(children), keep=keep if use_keep else None)(cls)


def _dataclass_default(default: Any) -> Any:
    if default is list:
        return dataclasses.field(default_factory=list)
    return dataclasses.field(default=default)


def _attrs_default(default: Any) -> Any:
    return attrs.Factory(list) if default is list else default


def _instance(cls: type, draw: st.DrawFn, child: st.SearchStrategy[Any]) -> Any:
    spec = ct.spec(cls)
    values = {nm: draw(child) for nm in spec.children}
    values.update({nm: draw(st.one_of(st.integers(), st.text(max_size=3))) for nm in spec.keep})
    values.update({nm: f"custom-{nm}" for nm in spec.reset})
    return cls(**values)


arrays_st = st.builds(lambda n: np.arange(n, dtype="float32"), st.integers(0, 3))
leaves_st = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=False, width=32),
    st.text(max_size=3),
    arrays_st,
)


@st.composite
def trees(draw: st.DrawFn) -> Any:
    """A random tree of builtins, namedtuples and instances of random containers."""
    classes = draw(st.lists(container_classes(), min_size=1, max_size=3))

    def extend(child: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.lists(child, max_size=3),
            st.lists(child, max_size=3).map(tuple),
            st.dictionaries(st.text(max_size=2), child, max_size=3),
            st.dictionaries(st.integers(0, 5), child, max_size=3).map(
                lambda d: OrderedDict(sorted(d.items(), reverse=True))
            ),
            st.builds(Point, child, child),
            st.just(None),
            st.sampled_from(classes).flatmap(
                lambda cls: st.composite(lambda d: _instance(cls, d, child))()
            ),
        )

    return draw(st.recursive(leaves_st, extend, max_leaves=12))


class Opaque:
    """An unregistered object: a leaf that fmap maps once by identity, as an array."""


#: The most positions (nodes and leaves, repeats included) of a shared tree's pool
#: member, so that reuse does not grow trees exponentially.
MAX_POSITIONS = 40


@st.composite
def shared_trees(draw: st.DrawFn) -> Any:
    """A random tree in which the same objects sit at several positions.

    A pool of leaves (arrays, opaque objects, numbers, strings) grows by nodes of every
    kind (lists, tuples, dicts, namedtuples, deques, instances of random containers,
    frozen and not, and runs of one repeated child) whose children are earlier
    members: so members are shared as siblings, at different depths and under other
    shared members, and no member contains itself. The root is one more such node.
    """
    with_children = container_classes().filter(lambda cls: ct.spec(cls).children)
    classes = draw(st.lists(with_children, min_size=1, max_size=3))
    leaves = st.one_of(leaves_st, st.builds(Opaque), st.just(None))
    pool = [draw(arrays_st), Opaque(), *draw(st.lists(leaves, max_size=3))]

    def node(child: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        kids = st.lists(child, min_size=2, max_size=4)
        instances = st.sampled_from(classes).flatmap(
            lambda cls: st.composite(lambda d: _instance(cls, d, child))()
        )
        return st.one_of(
            instances,
            kids,
            kids.map(tuple),
            kids.map(deque),
            # str keys (the compiled loop maps these dicts itself) and mixed keys (which
            # it leaves to map_dict: sort_keys' fallback order)
            st.dictionaries(st.text(max_size=2), child, min_size=2, max_size=4),
            st.dictionaries(
                st.one_of(st.text(max_size=1), st.integers(0, 3)), child, min_size=2, max_size=4
            ),
            st.dictionaries(st.integers(0, 5), child, min_size=2, max_size=4).map(
                lambda d: OrderedDict(sorted(d.items(), reverse=True))
            ),
            st.builds(Point, child, child),
            instances,  # twice as likely as each other kind
            # siblings: a run of one child, long enough for flatten's runs (MIN_RUN)
            st.tuples(child, st.integers(2, 9)).map(lambda c: [c[0]] * c[1]),
        )

    def child() -> st.SearchStrategy[Any]:
        # the latest member often (chains of members, nested and shared), and the
        # members the cache maps once (arrays, opaque objects, lists, dicts...) too
        mutables = tuple(v for v in pool if _mutable(v))
        return st.one_of(
            st.just(pool[-1]), st.sampled_from(tuple(pool)), st.sampled_from(mutables)
        )

    for _ in range(draw(st.integers(2, 8))):
        member = draw(node(child()))
        if len(_positions(member)) <= MAX_POSITIONS:
            pool.append(member)
    return draw(node(child()))


def _positions(tree: Any) -> list[Any]:
    """Every node and leaf of ``tree`` in pre-order, at every position it sits."""
    out = []
    stack = [tree]
    while stack:
        value = stack.pop()
        out.append(value)
        kind = kind_of(value)
        if kind is not None:
            stack.extend(reversed(kind.flatten(value)[0]))
    return out


def same(a: Any, b: Any) -> bool:
    """Equal structures and equal leaves (arrays by content and dtype)."""
    la, sa = ct.flatten(a)
    lb, sb = ct.flatten(b)
    if sa != sb or len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if isinstance(x, np.ndarray):
            if not (isinstance(y, np.ndarray) and x.dtype == y.dtype and np.array_equal(x, y)):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def bump(v: Any) -> Any:
    return v * 2 if not isinstance(v, str) else v + "!"


# --- laws ------------------------------------------------------------------------------


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@given(trees())
def test_fmap_identity_law(tree: Any) -> None:
    """fmap(identity, t) equals t."""
    assert same(ct.fmap(lambda v: v, tree), tree)


class Box:
    """An unregistered wrapper, so it is a leaf wherever f puts it."""

    def __init__(self, v: Any) -> None:
        self.v = v


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@given(trees())
def test_fmap_composition_law(tree: Any) -> None:
    """fmap(g, fmap(f, t)) equals fmap(g . f, t)."""

    def f(v: Any) -> Box:
        return Box(bump(v))

    def g(box: Box) -> Any:
        return box.v

    assert same(ct.fmap(g, ct.fmap(f, tree)), ct.fmap(lambda v: g(f(v)), tree))


@given(trees())
def test_flatten_unflatten_round_trip(tree: Any) -> None:
    """unflatten(structure, leaves) rebuilds the tree, leaves in place by identity."""
    leaves, s = ct.flatten(tree)
    rebuilt = ct.unflatten(s, leaves)
    assert same(rebuilt, tree)
    assert all(x is y for x, y in zip(ct.leaves(rebuilt), leaves))
    assert s.num_leaves == len(leaves) == len(s.paths())


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@given(trees())
def test_kept_fields_are_the_same_objects_after_fmap(tree: Any) -> None:
    """Every kept field of every container is copied unchanged (by identity) by fmap;
    every reset field gets its default, or a new value of its factory per instance."""
    out = ct.fmap(bump, tree, cache=False)
    before = [n for n in ct.fcollect(tree) if _spec_or_none(n) is not None]
    after = [n for n in ct.fcollect(out) if _spec_or_none(n) is not None]
    assert len(before) == len(after)
    factory_made: dict[str, Any] = {}  # the last value of each factory field
    for old, new in zip(before, after):
        assert type(old) is type(new)
        spec = ct.spec(old)
        for name in spec.keep:
            assert getattr(new, name) is getattr(old, name)
        for name in spec.reset:
            default = spec.defaults[name]
            if default.how == "factory":
                made = getattr(new, name)
                assert made == [] and made is not factory_made.get(name)
                factory_made[name] = made
            else:
                assert getattr(new, name) == f"default-{name}"


def _spec_or_none(x: Any) -> Any:
    kind = kind_of(x)
    return None if kind is None else kind.spec


@given(trees())
def test_reduce_equals_fold_over_leaves(tree: Any) -> None:
    """composite.reduce folds over exactly the leaves, in flatten order."""
    folded = ct.composite.reduce(tree, [], lambda v, acc: [*acc, v])
    assert len(folded) == ct.composite.count(tree)
    assert all(x is y for x, y in zip(folded, ct.leaves(tree)))


@given(trees())
def test_structure_equality_hash_and_pickle(tree: Any) -> None:
    """A structure equals the structure of a mapped tree, hashes alike and pickles."""
    s = ct.structure(tree)
    mapped = ct.structure(ct.fmap(bump, tree))
    assert s == mapped
    assert hash(s) == hash(mapped)
    assert pickle.loads(pickle.dumps(s)) == s
    assert ct.diff(tree, ct.fmap(bump, tree)) == []


@given(trees())
def test_paths_lead_to_their_leaves(tree: Any) -> None:
    """getpath(tree, path) is the leaf flatten_with_path paired with that path."""
    for path, leaf in ct.leaves_with_path(tree):
        assert ct.getpath(tree, path) is leaf
        assert ct.getpath(tree, ct.keystr(path)) is leaf if path else True


@given(trees())
def test_structure_paths_match_the_iterative_engine(tree: Any) -> None:
    """Structure.paths (from the records) gives the paths fmap_with_path's iterative
    engine passes to f, in the same order."""
    seen: list[Any] = []
    ct.fmap_with_path(lambda path, leaf: seen.append(path), tree, cache=False)
    assert ct.structure(tree).paths() == seen


def _stack_ends(records: Any) -> list[int]:
    """The subtree ends of records by a stack of counters: the record cursor's twin."""
    ends = [0] * len(records)
    stack: list[list[int]] = []
    for j, (_, _, n, mask) in enumerate(records):
        stack.append([j, 0 if mask is None else n if mask is True else sum(mask)])
        while stack and stack[-1][1] == 0:
            ends[stack.pop()[0]] = j + 1
            if stack:
                stack[-1][1] -= 1
    return ends


@given(trees())
def test_record_cursor_walks_the_records_in_pre_order(tree: Any) -> None:
    """The record cursor opens every record in order, gives each leaf the path
    Structure.paths gives it, closes each node past its subtree (the stack twin's
    ends), and skipping a node's subtree passes over its records and leaves."""
    from containers._records import CLOSE, LEAF, OPEN, RecordCursor, ends

    structure = ct.structure(tree)
    records = structure._records
    cursor = RecordCursor(records)
    opened, leaf_paths = [], []
    while (event := cursor.step()) is not None:
        if event == OPEN:
            opened.append(cursor.index)
            assert cursor.record is records[cursor.index]
        elif event == LEAF:
            assert cursor.index == len(leaf_paths)
            leaf_paths.append(cursor.path())
        else:
            assert event == CLOSE and cursor.record is records[cursor.index]
    assert opened == list(range(len(records)))
    assert leaf_paths == structure.paths()
    assert ends(records) == _stack_ends(records)
    if records:
        cursor = RecordCursor(records)
        assert cursor.step() == OPEN
        cursor.skip()
        assert (cursor.next_record, cursor.next_leaf) == (len(records), structure.num_leaves)
        assert cursor.step() is None


@given(trees(), trees())
def test_structures_equal_exactly_when_diff_is_empty(a: Any, b: Any) -> None:
    """diff(a, b) is empty exactly when their structures are equal."""
    assert (ct.diff(a, b) == []) == (ct.structure(a) == ct.structure(b))


# --- fast paths agree with their plain statements -----------------------------------------


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@given(trees(), st.booleans())
def test_fast_fmap_agrees_with_engine_and_walks(tree: Any, cache: bool) -> None:
    """fmap's fast path, the iterative engine and the composed walks give one result."""
    fast = ct.fmap(bump, tree, cache=cache)
    engine = map_tree(bump, tree, exclude=ct.isleaf, cache=Memo() if cache else None, prune=UNSET)
    walk: ct.Walk = ct.ExcludeWalk(ct.DefaultWalk(), bump, ct.isleaf)
    if cache:
        walk = ct.CachedWalk(walk)
    walked = ct.execute(walk, tree)
    assert same(fast, engine)
    assert same(fast, walked)


class Both:
    """An unregistered pair, so it is a leaf of the mapped tree."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@given(trees())
def test_multi_tree_fmap_agrees_with_engine(tree: Any) -> None:
    """Two-tree fmap pairs leaves by position; fast path and engine agree."""
    other = ct.fmap(bump, tree)
    fast = ct.fmap(Both, tree, other)
    engine = map_tree(Both, tree, (other,), exclude=ct.isleaf, cache=Memo())
    assert ct.structure(fast) == ct.structure(engine) == ct.structure(tree)
    pairs = ct.leaves(fast)
    assert len(pairs) == ct.composite.count(tree)
    for pair, leaf in zip(pairs, ct.leaves(tree)):
        assert pair.a is leaf
        assert same([pair.b], [bump(leaf)])


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
def _mapped_or_error(run: Any) -> Any:
    """``run()``'s result, or its error by type, message and path."""
    try:
        return run()
    except ct.StructureError as err:
        return (type(err), str(err), err.path)


@given(shared_trees(), st.booleans(), st.booleans())
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_walks_agree_with_fmap_on_shared_trees_and_cycles(
    tree: Any, cyclic: bool, structural: bool
) -> None:
    """fmap(walk=DefaultWalk()/StructuralWalk()) runs on the engine: on trees with
    shared objects it gives fmap's (fmapstructure's) result, sharing included, and on
    a tree with a cycle fmap's error, message and path."""
    if cyclic:
        loop: list[Any] = [tree]
        loop.append(loop)
        tree = {"t": loop}
    walk = ct.StructuralWalk() if structural else ct.DefaultWalk()
    plain = ct.fmapstructure if structural else ct.fmap
    calls: dict[str, list[int]] = {"walk": [], "plain": []}

    def boxer(name: str) -> Any:
        def box(v: Any) -> Any:
            calls[name].append(id(v))
            return ("mapped", v)

        return box

    walked = _mapped_or_error(lambda: ct.fmap(boxer("walk"), tree, walk=walk))
    want = _mapped_or_error(lambda: plain(boxer("plain"), tree))
    if cyclic:  # f's calls differ: fmap's fast path maps until it runs past its depth
        kind, message, path = want  # fmap(walk=...) names fmap, fmapstructure itself
        assert walked == (kind, message.replace("fmapstructure:", "fmap:", 1), path)
    else:
        assert calls["walk"] == calls["plain"]  # mapped once per object, in one order
        assert same(walked, want)


@given(trees())
def test_fmapstructure_matches_structural_walk(tree: Any) -> None:
    """fmapstructure equals executing StructuralWalk wrapped in the exclude walk."""
    walked = ct.execute(ct.CachedWalk(ct.ExcludeWalk(ct.StructuralWalk(), bump, ct.isleaf)), tree)
    assert same(ct.fmapstructure(bump, tree), walked)


@given(trees())
def test_fcollect_matches_collect_walk(tree: Any) -> None:
    """fcollect and CollectWalk collect the same objects in the same order."""
    walk = ct.CollectWalk()
    ct.execute(walk, tree)
    assert [id(v) for v in ct.fcollect(tree)] == [id(v) for v in walk.items]


@given(trees())
def test_fast_fcollect_matches_iterative_collect(tree: Any) -> None:
    """fcollect's recursive fast path and the iterative engine agree, object for object."""
    fast = fast_collect(tree)
    assert [id(v) for v in fast] == [id(v) for v in collect(tree, lambda v: False)]


def _same_fields(spec: Any, a: Any, b: Any, names: Any = None) -> bool:
    """The fields ``names`` (all) of ``a`` and ``b`` are the same objects, but for those a
    reset factory made: equal and not shared."""
    for name in spec.fields if names is None else names:
        x, y = getattr(a, name), getattr(b, name)
        factory = name in spec.reset and spec.defaults[name].how == "factory"
        if not (x == y and x is not y if factory else x is y):
            return False
    return True


@given(container_classes(), st.data())
def test_generated_code_agrees_with_plain_twin(cls: type, data: st.DataObject) -> None:
    """Each generated function gives what its getattr-loop twin gives."""
    spec = ct.spec(cls)
    gen = _codegen.compile_spec(spec)
    x = _instance(cls, data.draw, leaves_st)
    assert gen.flatten(x) == _codegen.plain_flatten(spec, x)
    kids, kept = gen.flatten(x)
    new_kids = tuple(("new", i) for i in range(len(kids)))
    for built, plain in [
        (gen.unflatten(kept, new_kids), _codegen.plain_unflatten(spec, kept, new_kids)),
        (gen.rebuild(x, new_kids), _codegen.plain_rebuild(spec, x, new_kids)),
    ]:
        assert type(built) is type(plain) is cls
        assert _same_fields(spec, built, plain)

    def step(child: Any, acc: Any) -> Any:
        return ("t", child), [*acc, child]

    got, acc = x.__container_traverse__([], step)
    want, want_acc = _codegen.plain_traverse(spec, x, [], step)
    assert all(getattr(got, f) == getattr(want, f) for f in spec.children)
    assert _same_fields(spec, got, want, [f for f in spec.fields if f not in spec.children])
    assert acc == want_acc
    assert x.__container_reduce__([], lambda c, a: [*a, c]) == _codegen.plain_reduce(
        spec, x, [], lambda c, a: [*a, c]
    )
    serialized = x.__container_serialize__()
    assert serialized == _codegen.plain_serialize(spec, x)
    back = cls.__container_deserialize__(serialized[1], serialized[2])
    plain_back = _codegen.plain_deserialize(spec, serialized[1], serialized[2])
    assert _same_fields(spec, back, plain_back)


mutable_kept_st = st.one_of(
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    arrays_st,
    st.integers(),
    st.text(max_size=3),
    st.tuples(st.integers()),
)


@given(container_classes().filter(lambda cls: ct.spec(cls).keep), st.data())
def test_generated_kept_snapshot_agrees_with_plain_twin(cls: type, data: st.DataObject) -> None:
    """With mutable kept values (lists, dicts, arrays), generated flatten_snapshot and
    unflatten_fresh snapshot and copy what their plain twins do (an unhashable value
    equal yet never the same object, a hashable one itself), while flatten, unflatten
    and rebuild, generated and plain, keep every kept value as the same object."""
    spec = ct.spec(cls)
    gen = _codegen.compile_spec(spec)
    x = _instance(cls, data.draw, leaves_st)
    for name in spec.keep:
        object.__setattr__(x, name, data.draw(mutable_kept_st))
    originals = [getattr(x, n) for n in spec.keep]

    def fresh(got: Any, given: Any) -> bool:
        try:
            hash(given)
        except TypeError:
            same = np.array_equal(got, given) if type(given) is np.ndarray else got == given
            return got is not given and type(got) is type(given) and bool(same)
        return got is given

    for kids, kept in (gen.flatten_snapshot(x), _codegen.plain_flatten_snapshot(spec, x)):
        assert kids == tuple(getattr(x, n) for n in spec.children)
        assert all(map(fresh, kept, originals))
        new_kids = tuple(("new", i) for i in range(len(kids)))
        for built in (
            gen.unflatten_fresh(kept, new_kids),
            _codegen.plain_unflatten_fresh(spec, kept, new_kids),
        ):
            assert all(fresh(getattr(built, n), v) for n, v in zip(spec.keep, kept))
    for kids, kept in (gen.flatten(x), _codegen.plain_flatten(spec, x)):
        assert all(map(is_, kept, originals))
        new_kids = tuple(("new", i) for i in range(len(kids)))
        for built in (
            gen.unflatten(kept, new_kids),
            _codegen.plain_unflatten(spec, kept, new_kids),
            gen.rebuild(x, new_kids),
            _codegen.plain_rebuild(spec, x, new_kids),
        ):
            assert all(getattr(built, n) is v for n, v in zip(spec.keep, originals))


@pytest.mark.usefixtures("engine")
@given(shared_trees(), st.sampled_from([int, np.ndarray, "param", ct.filters.WithTag("x")]))
def test_partition_and_combine_agree_with_their_plain_statements(tree: Any, f: Any) -> None:
    """partition (leaves ranked from the structure for a tag, chosen in C) and combine
    give what a loop over flatten_with_path gives, on trees with shared objects."""
    pred = ct.filters.to_predicate(f)
    pairs, s = ct.flatten_with_path(tree)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ct.filters.NoMatchWarning)
        left, right = ct.partition(tree, f)
    hits = [bool(pred(p, v)) for p, v in pairs]
    want_left = [v if h else ct.MISSING for (_, v), h in zip(pairs, hits)]
    want_right = [ct.MISSING if h else v for (_, v), h in zip(pairs, hits)]
    assert [id(v) for v in ct.leaves(left)] == [id(v) for v in want_left]
    assert [id(v) for v in ct.leaves(right)] == [id(v) for v in want_right]
    assert ct.structure(left) == ct.structure(right) == s
    combined = ct.leaves(ct.combine(left, right))
    assert [id(v) for v in combined] == [id(v) for _, v in pairs]


# --- fmap's compiled child loop and its twin ------------------------------------------


#: fmap's compiled loops as imported, or None where they are not built. Tests that
#: compare them with their twin set them themselves: the module-scoped ``engine``
#: fixture leaves the generated Python loops in place once its "python" run started.
COMPILED = _fast._speedups


@contextmanager
def fmap_loops(speedups: ModuleType | None) -> Iterator[None]:
    """fmap with the compiled loops ``speedups``, or with the generated Python loops if
    None, in fresh modes; the loops in place before after."""
    saved = _fast._speedups, _fast._idle
    _fast._speedups, _fast._idle = speedups, {}
    try:
        yield
    finally:
        _fast._speedups, _fast._idle = saved


def _calls_and_result(trees: tuple[Any, ...], **options: Any) -> tuple[list[Any], Any]:
    """The arguments of every call of f (the first tree's leaf, or all trees' leaves)
    and fmap's result."""
    calls: list[Any] = []

    def record(*leaves: Any) -> Any:
        calls.append(leaves)
        return leaves[0]

    return calls, ct.fmap(record, *trees, **options)


def _sharing(tree: Any) -> list[int]:
    """Which earlier leaf or node each one is (by first position), a fingerprint of the
    tree's sharing."""
    first: dict[int, int] = {}
    out = []
    for i, node in enumerate(ct.fcollect(tree)):
        out.append(first.setdefault(id(node), i))
    return out


@pytest.mark.skipif(COMPILED is None, reason="containers._engine._speedups is not built")
@given(trees())
def test_agrees_with_its_twin_call_for_call(tree: Any) -> None:
    """Same calls of f in the same order, equal results, the same sharing, with the cache
    on and off, with prune, and with a second tree."""
    tree = [tree, tree, [tree]]  # every value of the tree shared
    for trees_, options in [
        ((tree,), {}),
        ((tree,), {"cache": False}),
        ((tree,), {"prune": "pruned"}),
        ((tree, ct.fmap(bump, tree)), {}),
        ((tree, tree), {"cache": False}),
    ]:
        with fmap_loops(COMPILED):
            calls, out = _calls_and_result(trees_, **options)
        with fmap_loops(None):
            twin_calls, twin_out = _calls_and_result(trees_, **options)
        assert len(calls) == len(twin_calls)
        assert all(a is b for call, twin in zip(calls, twin_calls) for a, b in zip(call, twin))
        assert same(out, twin_out)
        assert _sharing(out) == _sharing(twin_out)


# --- shared objects: every acceleration keeps its twin's sharing ------------------------


class _Recorder:
    """An f that records the arguments of each call and returns a fresh Box per call,
    so that an output shows which call made each of its leaves."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.boxes: list[Box] = []

    def __call__(self, *args: Any) -> Box:
        self.calls.append(args)
        self.boxes.append(Box(args))
        return self.boxes[-1]


def _fingerprint(out: Any, boxes: list[Box]) -> list[Any]:
    """Each node and leaf of ``out`` at every position: the number of the call of f
    that returned it, or else its type and the first position of the same object."""
    made = {id(box): k for k, box in enumerate(boxes)}
    first: dict[int, int] = {}
    return [
        ("f", made[id(v)]) if id(v) in made else (type(v), first.setdefault(id(v), i))
        for i, v in enumerate(_positions(out))
    ]


#: ``_calling``'s default: the loops the ``engine`` fixture put in place.
_CURRENT = object()


def _calling(fn: Any, *args: Any, loops: Any = _CURRENT, **options: Any) -> Any:
    """``f -> fn(f, *args, **options)``, with fmap's ``loops`` if given (``fmap_loops``)."""

    def run(f: Any) -> Any:
        with nullcontext() if loops is _CURRENT else fmap_loops(loops):
            return fn(f, *args, **options)

    return run


def _agree(run: Any, twin: Any) -> None:
    """``run`` and ``twin`` (each ``f -> output``) call f alike, argument by argument
    by identity and in order, and give outputs alike in structure and sharing."""
    f, g = _Recorder(), _Recorder()
    out, twin_out = run(f), twin(g)
    assert [tuple(map(id, call)) for call in f.calls] == [tuple(map(id, c)) for c in g.calls]
    assert ct.structure(out) == ct.structure(twin_out)
    assert _fingerprint(out, f.boxes) == _fingerprint(twin_out, g.boxes)


#: (cache, prune) of each run: the cache on, off, and on with prune.
_CACHES = [(True, UNSET), (False, UNSET), (True, "pruned")]


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@given(shared_trees())
def test_fast_map_agrees_with_map_tree_on_shared_trees(tree: Any) -> None:
    """fast_map calls f as map_tree does and gives its output and sharing, with the
    cache on and off, with prune, for fmap and fmapstructure."""
    for (cached, prune), structural in itertools.product(_CACHES, [False, True]):
        _agree(
            _calling(_fast.fast_map, tree, Memo() if cached else None, prune, structural),
            _calling(
                map_tree,
                tree,
                exclude=None,
                cache=Memo() if cached else None,
                prune=prune,
                structural=structural,
            ),
        )


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@given(shared_trees(), st.booleans())
def test_fast_map_many_agrees_with_map_tree_on_shared_trees(tree: Any, shared: bool) -> None:
    """fast_map(ys=...) (``_Mode`` with several trees) calls f as map_tree(ys=...) does and gives its output and sharing,
    with the cache on and off and with prune, over one or two other trees."""
    other = ct.fmap(Box, tree, cache=shared)
    for (cached, prune), ys in itertools.product(_CACHES, [(other,), (other, tree)]):
        _agree(
            _calling(_fast.fast_map, tree, Memo() if cached else None, prune, ys=ys),
            _calling(
                map_tree, tree, ys, exclude=None, cache=Memo() if cached else None, prune=prune
            ),
        )


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@given(shared_trees(), st.integers(0, 3), st.integers(0, 2))
def test_fast_map_reports_a_cycle_as_map_tree_does(tree: Any, where: int, extra: int) -> None:
    """On a tree with a reference cycle (the fast walk has no cycle check of its own:
    the cycle runs it past MAX_FAST_DEPTH), fast_map over one tree (fmap, fmapstructure)
    or several raises map_tree's error, message and path (with the cache: shared
    subtrees mapped anew at each of the cycle's levels would grow exponentially)."""
    loop: list[Any] = [tree] * where
    loop.append(loop)
    tree = {"t": loop, "u": tree}
    ys = (tree,) * extra

    def error(run: Any, *args: Any, **options: Any) -> Any:
        with pytest.raises(ct.StructureError, match="reference cycle") as info:
            run(lambda *vs: vs[0], tree, *args, **options)
        return str(info.value), info.value.path

    for structural in {False, not extra}:
        fast = error(_fast.fast_map, Memo(), UNSET, structural, ys=ys)
        plain = error(map_tree, ys, exclude=None, cache=Memo(), structural=structural)
        assert fast == plain


@pytest.mark.skipif(COMPILED is None, reason="containers._engine._speedups is not built")
@given(shared_trees())
def test_compiled_loop_agrees_with_its_twin_on_shared_trees(tree: Any) -> None:
    """fmap and fmapstructure call f alike and give the same output and sharing with
    the compiled loop and with the generated Python loop, cache on and off, with prune
    and with several trees."""
    other = ct.fmap(Box, tree)
    for fn, trees_, options in [
        (ct.fmap, (tree,), {}),
        (ct.fmap, (tree,), {"cache": False}),
        (ct.fmap, (tree,), {"prune": "pruned"}),
        (ct.fmapstructure, (tree,), {}),
        (ct.fmapstructure, (tree,), {"cache": False}),
        (ct.fmap, (tree, other), {}),
        (ct.fmap, (tree, other), {"cache": False}),
        (ct.fmap, (tree, other, tree), {"prune": "pruned"}),
    ]:
        _agree(
            _calling(fn, *trees_, loops=COMPILED, **options),
            _calling(fn, *trees_, loops=None, **options),
        )


def _mutable(value: Any) -> bool:
    """Whether fmap's contract maps ``value`` once by identity: anything but None, a
    number, a string, a tuple (namedtuples too) or a frozen container."""
    if value is None or isinstance(value, int | float | str | tuple):
        return False
    container = dataclasses.is_dataclass(value) or attrs.has(type(value))
    return not (container and ct.spec(value).frozen)


#: ``_first_visits``'s default: a repeat of a mutable object is left out.
_SKIP = object()


def _first_visits(tree: Any, repeat: Any = _SKIP) -> list[Any]:
    """The nodes and leaves of ``tree`` in pre-order, a mutable object only at its first
    position: a repeat and what is under it are left out, or replaced by ``repeat``."""
    out = []
    seen: set[int] = set()
    stack = [tree]
    while stack:
        value = stack.pop()
        if _mutable(value):
            if id(value) in seen:
                if repeat is not _SKIP:
                    out.append(repeat)
                continue
            seen.add(id(value))
        out.append(value)
        kind = kind_of(value)
        if kind is not None:
            stack.extend(reversed(kind.flatten(value)[0]))
    return out


@given(shared_trees())
def test_fast_collect_agrees_with_collect_on_shared_trees(tree: Any) -> None:
    """fast_collect and collect give the same objects in the same order: every node and
    leaf in pre-order, each mutable object once, at its first position."""
    fast = fast_collect(tree)
    assert list(map(id, fast)) == list(map(id, collect(tree, None)))
    assert list(map(id, fast)) == list(map(id, _first_visits(tree)))


@given(shared_trees(), st.integers(0, 3))
def test_fast_collect_reports_a_cycle_as_collect_does(tree: Any, where: int) -> None:
    """On a tree with a reference cycle (fast_collect has no cycle check of its own: the
    cycle runs it past its depth limit), fast_collect raises collect's error, message
    and path."""
    loop: list[Any] = [tree] * where
    loop.append(loop)
    tree = {"t": loop, "u": tree}

    def error(run: Any) -> Any:
        with pytest.raises(ct.StructureError, match="reference cycle") as info:
            run()
        return str(info.value), info.value.path

    assert error(lambda: fast_collect(tree)) == error(lambda: collect(tree, None))


class _Stop(Exception):
    """Raised by ``f`` at its k-th call."""


def _leaf(v: Any) -> bool:
    """``ct.isleaf`` as another function: fmap then runs its plain walk."""
    return ct.isleaf(v)


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@given(shared_trees(), st.integers(0, 40), st.booleans(), st.booleans())
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_f_errors_get_the_plain_walks_note_from_the_fast_tiers(
    tree: Any, k: int, cache: bool, two: bool
) -> None:
    """An error f raises at its k-th call carries the note the plain walk gives it (the
    same path, once), whether fmap's fast tiers (the Python walker, the generated
    mappers, the compiled loops) or the plain walk ran, for one tree and two."""
    rest = (tree,) if two else ()

    def raising() -> Any:
        calls = itertools.count()

        def f(v: Any, *ys: Any) -> Any:
            if next(calls) == k:
                raise _Stop
            return v

        return f

    def notes(**kwargs: Any) -> Any:
        try:
            ct.fmap(raising(), tree, *rest, cache=cache, **kwargs)
        except _Stop as err:
            return getattr(err, "__notes__", [])
        return None  # fewer than k + 1 calls

    assert notes() == notes(exclude=_leaf)  # not ct.isleaf itself: the plain walk


@given(shared_trees())
def test_flatten_fast_agrees_with_flatten_plain_on_shared_trees(tree: Any) -> None:
    """flatten_fast and flatten_plain give the same leaves by identity, a shared one at
    each of its positions, and the same records."""
    for none_is_leaf in (False, True):
        records: list[Any] = []
        plain_records: list[Any] = []
        fast = flatten_records(tree, None, none_is_leaf, "flatten", records)
        plain = flatten_records(tree, lambda v: False, none_is_leaf, "flatten", plain_records)
        assert list(map(id, fast)) == list(map(id, plain))
        assert records == plain_records
        leaves_only = flatten_records(tree, None, none_is_leaf, "leaves", None)
        assert list(map(id, leaves_only)) == list(map(id, plain))
    positions = [v for v in _positions(tree) if kind_of(v) is None]
    assert list(map(id, ct.leaves(tree))) == list(map(id, positions))


@pytest.mark.usefixtures("engine")  # the compiled flatten and its twin, flatten_once
@settings(deadline=None)
@given(shared_trees(), st.booleans(), st.booleans())
def test_the_executor_maps_one_walk_agrees_with_serial_fmap(
    tree: Any, cache: bool, mutable_kept: bool
) -> None:
    """The executor map's one walk (flatten, which says whether it met a value the
    identity cache keeps twice) is taken exactly for trees without sharing, or any tree
    with cache=False, classes with kept fields (mutable ones too) included, and
    rebuilds there what the serial fmap returns, sharing and kept values (the same
    objects, not a Structure's copies) included."""
    if mutable_kept:  # each kept value in a list of its own, which fmap keeps as is
        for v in _positions(tree):
            kind = kind_of(v)
            for name in () if kind is None or kind.spec is None else kind.spec.keep:
                object.__setattr__(v, name, [getattr(v, name)])
    split = _parallel._one_walk(tree, cache)
    cached = [id(v) for v in _positions(tree) if cacheable(v)]
    unshared = not cache or len(set(cached)) == len(cached)
    assert (split is not None) is unshared
    if split is None:
        return
    leaves, records = split
    out = _parallel._build(records, [[v] for v in leaves])
    expected = ct.fmap(lambda v: [v], tree, cache=cache)
    assert same(out, expected)
    assert _same_as(out) == _same_as(expected)
    assert _kept_ids(out) == _kept_ids(expected) == _kept_ids(tree)


def _kept_ids(tree: Any) -> list[int]:
    """The ids of the kept values of every container of ``tree``, in pre-order."""
    return [
        id(getattr(v, name))
        for v in _positions(tree)
        if (kind := kind_of(v)) is not None and kind.spec is not None
        for name in kind.spec.keep
    ]


def _same_as(tree: Any) -> list[int]:
    """For each position of ``tree`` in pre-order, the first position of the same object."""
    first: dict[int, int] = {}
    return [first.setdefault(id(v), i) for i, v in enumerate(_positions(tree))]


def _mapped_same_as(tree: Any, cached: bool) -> list[int]:
    """``_same_as`` of fmap's output on ``tree``, as the contract makes it: only None (the
    one None) and, with the cache, a repeat of a mutable object and everything under it
    are objects met before; every other position is mapped apart."""
    out: list[int] = []
    spans: dict[int, tuple[int, int]] = {}  # a mutable object's first positions
    nones: list[int] = []

    def visit(value: Any) -> None:
        if cached and _mutable(value) and id(value) in spans:
            start, stop = spans[id(value)]
            out.extend(out[start:stop])
            return
        start = len(out)
        if value is None:
            nones.append(start)
        out.append(nones[0] if value is None else start)
        kind = kind_of(value)
        for child in [] if kind is None else kind.flatten(value)[0]:
            visit(child)
        if cached and _mutable(value):
            spans[id(value)] = start, len(out)

    visit(tree)
    return out


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@given(shared_trees())
def test_fmap_shares_outputs_exactly_where_inputs_share_mutable_objects(tree: Any) -> None:
    """fmap calls f once per mutable object met (not under a repeat of a mutable node)
    and per position of a value, and two positions of its output hold one object
    exactly where the input repeats one mutable object (or below such a repeat):
    shared values, tuples and frozen containers are mapped apart; prune replaces
    exactly those repeats."""
    f = _Recorder()
    out = ct.fmap(f, tree)
    called = [v for v in _first_visits(tree) if kind_of(v) is None]
    assert [id(call[0]) for call in f.calls] == list(map(id, called))
    assert _same_as(out) == _mapped_same_as(tree, cached=True)
    pruned = _positions(ct.fmap(_Recorder(), tree, prune=_PRUNED))
    assert [_PRUNED if v is _PRUNED else _kind_or_f(v, Box) for v in pruned] == [
        _PRUNED if v is _PRUNED else _kind_or_f(v, object)
        for v in _first_visits(tree, repeat=_PRUNED)
    ]


#: fmap's ``prune`` value in the contract test: an object nothing else is.
_PRUNED = object()


def _kind_or_f(value: Any, leaf: type) -> Any:
    """``"f"`` for a leaf (an instance of ``leaf``), else the node's type."""
    return "f" if kind_of(value) is None and isinstance(value, leaf) else type(value)


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@given(shared_trees())
def test_fmap_without_cache_maps_every_position_apart(tree: Any) -> None:
    """With cache=False, fmap calls f once per leaf position, shared or not, and no two
    positions of its output hold one object (but None)."""
    f = _Recorder()
    out = ct.fmap(f, tree, cache=False)
    positions = [v for v in _positions(tree) if kind_of(v) is None]
    assert [id(call[0]) for call in f.calls] == list(map(id, positions))
    assert _same_as(out) == _mapped_same_as(tree, cached=False)


# --- flatten's compiled walk and its twin ---------------------------------------------


#: flatten's compiled walk as imported, or None where it is not built (the ``engine``
#: fixture may have switched ``_fast._speedups`` off when this runs).
COMPILED_FLATTEN = None if _fast._speedups is None else _fast._speedups.flatten


@pytest.mark.skipif(COMPILED_FLATTEN is None, reason="containers._engine._speedups is not built")
@given(st.one_of(trees(), shared_trees()))
def test_compiled_flatten_agrees_with_flatten_fast(tree: Any) -> None:
    """_speedups.flatten gives flatten_fast's leaves (the same objects, in order) and
    records, and the same leaves without records, with None a node and a leaf."""
    # imported here: this section is appended to a file others edit at its top
    from containers._engine._flat import C_CONTEXT, flatten_fast
    from containers._registry import LEAF_TYPES, LEAF_TYPES_NONE

    assert COMPILED_FLATTEN is not None
    for leaf_types in (LEAF_TYPES, LEAF_TYPES_NONE):
        kind = kind_of(tree)
        if type(tree) in leaf_types or kind is None:
            continue
        records: list[Any] = []
        twin_records: list[Any] = []
        leaves = COMPILED_FLATTEN(tree, kind, leaf_types, records, C_CONTEXT)
        twin = flatten_fast(tree, kind, leaf_types, twin_records)
        assert list(map(id, leaves)) == list(map(id, twin))
        assert [r[0] for r in records] == [r[0] for r in twin_records]
        assert [r[1:] for r in records] == [r[1:] for r in twin_records]
        alone = COMPILED_FLATTEN(tree, kind, leaf_types, None, C_CONTEXT)
        assert list(map(id, alone)) == list(map(id, twin))


@pytest.mark.skipif(COMPILED_FLATTEN is None, reason="containers._engine._speedups is not built")
@given(st.one_of(trees(), shared_trees()), st.booleans())
def test_compiled_leaf_paths_agree_with_ranked_paths(tree: Any, none_is_leaf: bool) -> None:
    """_speedups.leaf_paths gives ranked_paths' key paths for a Structure's records."""
    from containers._flatten import PATHS_CONTEXT, ranked_paths

    assert _fast._speedups is not None
    records = ct.structure(tree, none_is_leaf=none_is_leaf)._records
    compiled = _fast._speedups.leaf_paths(records, PATHS_CONTEXT)
    assert compiled == ranked_paths(records, None, 0)[0]
    assert len(compiled) == len(ct.leaves(tree, none_is_leaf=none_is_leaf))


# --- two-tree fmap's generated pair mappers and their plain twin -----------------------


@contextmanager
def pair_mappers(on: bool) -> Iterator[None]:
    """Two-tree fmap with the classes' generated pair mappers (``on``) or with the
    generic path of ``_Mode``'s several-tree walk (``many_node``), their plain twin, in fresh modes."""
    saved = _fast._pair_mappers, _fast._idle
    _fast._pair_mappers, _fast._idle = on, {}
    try:
        yield
    finally:
        _fast._pair_mappers, _fast._idle = saved


def _fmap_with_pair_mappers(on: bool, *trees_: Any, **options: Any) -> Any:
    """``f -> ct.fmap(f, *trees_, **options)`` with the pair mappers on or off."""

    def run(f: Any) -> Any:
        with pair_mappers(on):
            return ct.fmap(f, *trees_, **options)

    return run


#: fmap's options for each run: the cache on, off, and on with prune.
_FMAP_OPTIONS: list[dict[str, Any]] = [{}, {"cache": False}, {"prune": "pruned"}]


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@given(shared_trees(), st.booleans())
def test_pair_mappers_agree_with_the_generic_path_on_shared_trees(tree: Any, shared: bool) -> None:
    """Two-tree fmap calls f alike (arguments by identity, in order) and gives the same
    output, made by the same calls and sharing alike, with the generated pair mappers
    and with node's generic path, with the cache on and off and with prune."""
    other = ct.fmap(Box, tree, cache=shared)
    for options in _FMAP_OPTIONS:
        _agree(
            _fmap_with_pair_mappers(True, tree, other, **options),
            _fmap_with_pair_mappers(False, tree, other, **options),
        )


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@given(trees())
def test_pair_mappers_agree_with_the_generic_path_call_for_call(tree: Any) -> None:
    """Same calls of f in the same order, equal results and the same sharing with the
    pair mappers and without, the tree's every value shared, and each mutable node of
    the output the same object wherever its input node is."""
    tree = [tree, tree, [tree]]
    for other in (ct.fmap(bump, tree), tree):
        for options in _FMAP_OPTIONS:
            with pair_mappers(True):
                calls, out = _calls_and_result((tree, other), **options)
            with pair_mappers(False):
                twin_calls, twin_out = _calls_and_result((tree, other), **options)
            assert len(calls) == len(twin_calls)
            assert all(a is b for c, t in zip(calls, twin_calls) for a, b in zip(c, t))
            assert same(out, twin_out)
            assert _sharing(out) == _sharing(twin_out)
            assert _same_as(out) == _same_as(twin_out)


@ct.container(children=["w", "b"], keep=["name"], frozen=False)
class PairLayer:
    """A mutable class with a kept field: mapped once by identity."""

    w: Any
    b: Any = None
    name: str = "layer"


@ct.container
class PairFrozen:
    """A frozen class: mapped at each position."""

    a: Any
    b: Any = None


@ct.container(frozen=False)
class PairLazy:
    """A class whose child ``b`` may be left unset."""

    a: Any
    b: Any = dataclasses.field(init=False)


def _deep(levels: int, leaf: Any, cls: type = PairLayer) -> Any:
    """``levels`` nested instances of ``cls`` around ``leaf``, each in a list."""
    tree = leaf
    for _ in range(levels):
        tree = cls([tree])
    return tree


def _cyclic() -> Any:
    layer = PairLayer(1)
    layer.b = [layer]
    return layer


def _unset() -> Any:
    return PairLazy(1)


def _outcome(on: bool, trees_: tuple[Any, ...], options: dict[str, Any]) -> Any:
    """The calls of f (arguments by identity), and fmap's output (its structure and
    which call or earlier object each position is) or its error (type, message, path)."""
    f = _Recorder()
    with pair_mappers(on):
        try:
            out = ct.fmap(f, *trees_, **options)
        except Exception as err:  # compared, not swallowed
            error = (type(err), str(err), getattr(err, "path", None))
            return [tuple(map(id, c)) for c in f.calls], error
    return [tuple(map(id, c)) for c in f.calls], (ct.structure(out), _fingerprint(out, f.boxes))


_PAIR_CASES = {
    "other-class": ([PairLayer(1, 2)], [PairFrozen(1, 2)]),
    "other-class-deep": (
        {"k": PairFrozen(PairLayer([1, 2]))},
        {"k": PairFrozen(PairFrozen([1, 2]))},
    ),
    "leaf-for-instance": ([PairFrozen(1), PairLayer(1)], [PairFrozen(1), 2]),
    "other-kept-field": ([PairLayer(1, 2, "a")], [PairLayer(3, 4, "b")]),
    "missing-key": (PairLayer({"x": 1, "y": 2}), PairLayer({"x": 1})),
    "shorter-child": (PairFrozen([1, 2], (3, 4)), PairFrozen([1], (3, 4))),
    "unset-child": ([PairLazy(1)], [_unset()]),
    "unset-child-first": ([_unset()], [PairLazy(1)]),
    "cycle": ([_cyclic()], [_cyclic()]),
    "deep": (_deep(150, 1.0), _deep(150, 2.0)),
    "deep-frozen": (_deep(150, 1.0, PairFrozen), _deep(150, 2.0, PairFrozen)),
    "deep-mismatch": (_deep(150, [1, 2]), _deep(150, [1])),
    "deep-shared": ([_deep(120, np.ones(2))] * 2, [_deep(120, np.zeros(2))] * 2),
}


#: The cases in which fmap raises (StructureError).
_PAIR_ERRORS = {
    "other-class",
    "other-class-deep",
    "leaf-for-instance",
    "missing-key",
    "shorter-child",
    "unset-child",
    "unset-child-first",
    "cycle",
    "deep-mismatch",
}


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
@pytest.mark.parametrize("case", list(_PAIR_CASES))
@pytest.mark.parametrize("options", _FMAP_OPTIONS, ids=["cache", "no-cache", "prune"])
def test_pair_mappers_agree_with_the_generic_path_on_edge_cases(
    case: str, options: dict[str, Any]
) -> None:
    """Mismatches (another class, a leaf for an instance, a missing key, a shorter or
    unset child), a kept field that differs (the first tree's is kept), a cycle and
    trees deeper than MAX_FAST_DEPTH: the pair mappers give node's generic path's
    calls of f and result, or its error by type, message and path."""
    trees_ = _PAIR_CASES[case]
    calls, out = _outcome(True, trees_, options)
    assert (calls, out) == _outcome(False, trees_, options)
    assert (out[0] is ct.StructureError) == (case in _PAIR_ERRORS)


# --- unflatten's compiled rebuild and its twin ------------------------------------------


#: unflatten's compiled rebuild as imported, or None where it is not built.
COMPILED_BUILD = None if _fast._speedups is None else _fast._speedups.build


def _types_and_orders(tree: Any) -> list[Any]:
    """Each value's type in pre-order, with a dict's keys in its order."""
    return [(type(v), list(v) if isinstance(v, dict) else None) for v in ct.fcollect(tree)]


@pytest.mark.skipif(COMPILED_BUILD is None, reason="containers._engine._speedups is not built")
@given(st.one_of(trees(), shared_trees()))
def test_compiled_build_agrees_with_build(tree: Any) -> None:
    """_speedups.build rebuilds what _build rebuilds from a structure's records: one
    structure, the same leaf objects in order, the same types and dict orders, with
    None a node and a leaf, and the tree itself."""
    # imported here: this section is appended to a file others edit at its top
    from containers._flatten import C_BUILD_CONTEXT, _build

    assert COMPILED_BUILD is not None
    for none_is_leaf in (False, True):
        leaves, structure = ct.flatten(tree, none_is_leaf=none_is_leaf)
        records = structure._records
        out = COMPILED_BUILD(records, leaves, C_BUILD_CONTEXT)
        twin = _build(records, leaves)
        out_leaves, out_structure = ct.flatten(out, none_is_leaf=none_is_leaf)
        twin_leaves, twin_structure = ct.flatten(twin, none_is_leaf=none_is_leaf)
        assert out_structure == twin_structure == structure
        assert list(map(id, out_leaves)) == list(map(id, twin_leaves)) == list(map(id, leaves))
        assert _types_and_orders(out) == _types_and_orders(twin)
        assert same(out, tree)


@pytest.mark.skipif(COMPILED_BUILD is None, reason="containers._engine._speedups is not built")
@given(st.one_of(trees(), shared_trees()))
def test_compiled_live_build_agrees_with_live_build(tree: Any) -> None:
    """With the live context (the executor maps' one walk), _speedups.build and
    build(fresh=False) rebuild the same tree from flatten's records, each kept value
    (mutable ones too) the same object as in the tree, never a copy."""
    from containers._records import C_LIVE_BUILD_CONTEXT, build

    assert COMPILED_BUILD is not None
    for v in _positions(tree):  # each kept value in a list of its own
        kind = kind_of(v)
        for name in () if kind is None or kind.spec is None else kind.spec.keep:
            object.__setattr__(v, name, [getattr(v, name)])
    records: list[Any] = []
    leaves = flatten_records(tree, None, False, "flatten", records)
    out = COMPILED_BUILD(tuple(records), leaves, C_LIVE_BUILD_CONTEXT)
    twin = build(records, leaves, fresh=False)
    out_leaves, out_structure = ct.flatten(out)
    twin_leaves, twin_structure = ct.flatten(twin)
    assert out_structure == twin_structure == ct.structure(tree)
    assert list(map(id, out_leaves)) == list(map(id, twin_leaves)) == list(map(id, leaves))
    assert _types_and_orders(out) == _types_and_orders(twin)
    assert _kept_ids(out) == _kept_ids(twin) == _kept_ids(tree)
