"""Property tests over random container classes and random trees.

The laws every operation must keep (functor identity and composition, round trips,
kept fields, folds), and the agreement of each fast path with its plain statement:
generated code with its getattr twin, fmap's fast path with the iterative engine and
with the composed walk objects.
"""

from __future__ import annotations

import dataclasses
import itertools
import pickle
from collections import OrderedDict, namedtuple
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import containers as ct
from containers import _codegen
from containers._engine import _fast
from containers._engine._fast import fast_collect
from containers._registry import kind_of
from containers._engine._core import UNSET, Memo, collect, map_tree

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
    reset fields in random order."""
    n = draw(st.integers(0, 4))
    names = [f"f{i}" for i in range(n)]
    roles = [draw(st.sampled_from(["child", "keep", "reset"])) for _ in names]
    use_keep = "reset" in roles or draw(st.booleans())
    children = [nm for nm, r in zip(names, roles) if r == "child"]
    children = draw(st.permutations(children)) if children else []
    keep = [nm for nm, r in zip(names, roles) if r == "keep"]
    flavor = draw(st.sampled_from(["dataclass", "dataclass-mutable", "attrs", "attrs-slots"]))
    defaults = {nm: f"default-{nm}" for nm, r in zip(names, roles) if r == "reset"}
    cls_name = f"Random{next(_serial)}"
    if flavor.startswith("dataclass"):
        fields = [
            (nm, Any, dataclasses.field(default=defaults[nm])) if nm in defaults else (nm, Any)
            for nm in names
        ]
        # Fields without defaults must come first in a dataclass.
        fields.sort(key=lambda f: len(f) == 3)
        cls = dataclasses.make_dataclass(cls_name, fields, frozen=flavor == "dataclass")
    else:
        attributes = {
            nm: attrs.field(default=defaults[nm]) if nm in defaults else attrs.field()
            for nm in sorted(names, key=lambda nm: nm in defaults)
        }
        cls = attrs.make_class(
            cls_name, attributes, slots=flavor == "attrs-slots", frozen=flavor == "attrs-slots"
        )
    # Make the class importable by pickle, as a class defined in a module would be.
    cls.__module__ = __name__
    globals()[cls_name] = cls
    return ct.container(children=list(children), keep=keep if use_keep else None)(cls)


def _instance(cls: type, draw: st.DrawFn, child: st.SearchStrategy[Any]) -> Any:
    spec = ct.spec(cls)
    values = {nm: draw(child) for nm in spec.children}
    values.update({nm: draw(st.one_of(st.integers(), st.text(max_size=3))) for nm in spec.keep})
    values.update({nm: f"custom-{nm}" for nm in spec.reset})
    return cls(**values)


leaves_st = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=False, width=32),
    st.text(max_size=3),
    st.builds(lambda n: np.arange(n, dtype="float32"), st.integers(0, 3)),
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
    """Every kept field of every container is copied unchanged (by identity) by fmap."""
    out = ct.fmap(bump, tree, cache=False)
    before = [n for n in ct.fcollect(tree) if _spec_or_none(n) is not None]
    after = [n for n in ct.fcollect(out) if _spec_or_none(n) is not None]
    assert len(before) == len(after)
    for old, new in zip(before, after):
        assert type(old) is type(new)
        spec = ct.spec(old)
        for name in spec.keep:
            assert getattr(new, name) is getattr(old, name)
        for name in spec.reset:
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
        assert all(getattr(built, f) is getattr(plain, f) for f in spec.fields)

    def step(child: Any, acc: Any) -> Any:
        return ("t", child), [*acc, child]

    got, acc = x.__container_traverse__([], step)
    want, want_acc = _codegen.plain_traverse(spec, x, [], step)
    assert all(getattr(got, f) == getattr(want, f) for f in spec.children)
    assert all(getattr(got, f) is getattr(want, f) for f in spec.fields if f not in spec.children)
    assert acc == want_acc
    assert x.__container_reduce__([], lambda c, a: [*a, c]) == _codegen.plain_reduce(
        spec, x, [], lambda c, a: [*a, c]
    )
    serialized = x.__container_serialize__()
    assert serialized == _codegen.plain_serialize(spec, x)
    back = cls.__container_deserialize__(serialized[1], serialized[2])
    plain_back = _codegen.plain_deserialize(spec, serialized[1], serialized[2])
    assert all(getattr(back, f) is getattr(plain_back, f) for f in spec.fields)


# --- fmap's compiled child loop and its twin ------------------------------------------


@contextmanager
def python_loop() -> Iterator[None]:
    """fmap with the generated Python loop, in fresh modes; the compiled one after."""
    saved = _fast._speedups, _fast._idle
    _fast._speedups, _fast._idle = None, {}
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


@pytest.mark.skipif(_fast._speedups is None, reason="containers._engine._speedups is not built")
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
        calls, out = _calls_and_result(trees_, **options)
        with python_loop():
            twin_calls, twin_out = _calls_and_result(trees_, **options)
        assert len(calls) == len(twin_calls)
        assert all(a is b for call, twin in zip(calls, twin_calls) for a, b in zip(call, twin))
        assert same(out, twin_out)
        assert _sharing(out) == _sharing(twin_out)
