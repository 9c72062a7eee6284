"""split / merge / state (Flax NNX), partition / combine (equinox), and the where= option
of fmap and leaves: grouping rules, errors, round trips, sharing, depth and cycles."""

from __future__ import annotations

import dataclasses
import itertools
import pickle
import re
from collections import OrderedDict, defaultdict, namedtuple
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import containers as ct
from containers.filters import All, FilterError, Not, OfType, PathContains, to_predicate

Point = namedtuple("Point", ["x", "y"])


@ct.container(children=["w", "b", "count"], keep=["name"])
class Layer:
    w: Any = ct.field(tags=("param",))
    b: Any = ct.field(tags=("param",))
    count: Any = ct.field(default=0, tags=("batch_stats",))
    name: str = "layer"
    calls: int = 0  # reset: rebuilt objects get 0


@ct.container(children=["layers", "extra"])
class Model:
    layers: list[Any]
    extra: Any = None
    scale: float = 1.0  # kept


def model() -> Model:
    layers = [
        Layer(np.full(2, i, "float32"), np.ones(2, "float32"), np.zeros(1), f"l{i}", calls=5)
        for i in range(3)
    ]
    return Model(layers, extra={"z": 1, "a": (2, None, [])}, scale=0.5)


def keystrs(part: dict[Any, Any]) -> list[str]:
    return [ct.keystr(p) for p in part]


def same(a: Any, b: Any) -> bool:
    """Equal structures and equal leaves (arrays by content and dtype, others by type)."""
    la, sa = ct.flatten(a)
    lb, sb = ct.flatten(b)
    if sa != sb:
        return False
    for x, y in zip(la, lb):
        if isinstance(x, np.ndarray):
            if not (isinstance(y, np.ndarray) and x.dtype == y.dtype and np.array_equal(x, y)):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


# --- split --------------------------------------------------------------------------------


def test_split_groups_leaves_by_tag_keyed_by_flatten_with_path_paths():
    """Each part maps the paths flatten_with_path gives to the leaves, in flatten order."""
    m = model()
    s, params, stats, rest = ct.split(m, "param", "batch_stats", ...)
    pairs, structure = ct.flatten_with_path(m)
    assert s == structure
    assert keystrs(params) == [f".layers[{i}].{f}" for i in range(3) for f in ("w", "b")]
    assert keystrs(stats) == [f".layers[{i}].count" for i in range(3)]
    assert keystrs(rest) == [".extra['a'][0]", ".extra['z']"]
    assert {**params, **stats, **rest} == dict(pairs)
    assert params[ct.AttrKey("layers"), ct.IndexKey(1), ct.AttrKey("w")] is m.layers[1].w


def test_first_matching_filter_wins():
    """Order matters: a leaf goes to the first filter that matches (NNX's SpecialParam)."""
    tree = {"a": 1, "b": True}
    _, ints, bools = ct.split(tree, int, bool)
    assert (keystrs(ints), bools) == (["['a']", "['b']"], {})
    _, bools, ints = ct.split(tree, bool, int)
    assert (keystrs(bools), keystrs(ints)) == (["['b']"], ["['a']"])


def test_unmatched_leaves_are_named_with_the_fix():
    """A leaf no filter matches is an error naming its path and saying to end with `...`."""
    with pytest.raises(
        ct.StructureError,
        match=r"^split: no filter matches the leaf at '\.layers\[0\]\.count'\. Every leaf "
        r"must go to a part: add a filter for it, or use `\.\.\.` last to match the rest\.$",
    ):
        ct.split(Model([model().layers[0]]), "param")


def test_many_unmatched_leaves_are_counted_and_the_first_five_named():
    """With many unmatched leaves the message counts them and names the first five."""
    with pytest.raises(
        ct.StructureError, match=r"no filter matches 8 leaves: '\[0\]', '\[1\]'"
    ) as e:
        ct.split(list(range(8)), str)
    assert "'[4]' and 3 more. Every leaf must go to a part: add a filter for them" in str(e.value)
    assert e.value.path == (ct.IndexKey(0),)


@pytest.mark.parametrize("catch_all", [..., True])
@pytest.mark.parametrize("op", [ct.split, ct.state])
def test_catch_all_only_last(op, catch_all):
    """`...` or True anywhere but last is refused, naming its position."""
    with pytest.raises(
        ct.StructureError,
        match=rf"^{op.__name__}: `{catch_all!r}` matches every leaf, so it can only be the last "
        r"filter, but it is filter 0 of 2: the filters after it would get nothing\. Move it",
    ):
        op([1], catch_all, int)


def test_only_the_real_true_counts():
    """1 is not True: it is refused as a filter, last or not."""
    with pytest.raises(FilterError, match=r"^1 \(an int\) is not a filter"):
        ct.split([1], int, 1)
    with pytest.raises(FilterError, match=r"^1 \(an int\) is not a filter"):
        ct.split([1], 1, int)
    _, ones, rest = ct.split([1, "a"], int, True)
    assert (list(ones.values()), list(rest.values())) == ([1], ["a"])


def test_split_without_filters_gives_one_part_with_every_leaf():
    """No filters: one part holding every leaf."""
    s, everything = ct.split({"a": [1, 2]})
    assert list(everything.values()) == [1, 2]
    assert ct.merge(s, everything) == {"a": [1, 2]}


def test_a_leaf_is_split_at_the_empty_path():
    """A tree that is a leaf has one part entry at the root path ()."""
    s, part = ct.split(42, ...)
    assert part == {(): 42}
    assert ct.merge(s, {(): 43}) == 43


def test_trees_without_leaves_split_into_empty_parts():
    """Empty containers and None have no leaves: every part is empty, merge rebuilds them."""
    tree = {"a": [], "b": None, "c": ()}
    s, p, rest = ct.split(tree, "param", ...)
    assert (p, rest) == ({}, {})
    assert ct.merge(s, p, rest) == tree


# --- merge --------------------------------------------------------------------------------


def test_merge_rebuilds_the_exact_tree():
    """Types, kept fields, reset defaults, dict insertion order and leaves come back."""
    m = model()
    s, params, rest = ct.split(m, "param", ...)
    out = ct.merge(s, params, rest)
    assert same(out, m)
    assert type(out) is Model and out.scale == 0.5
    assert [layer.name for layer in out.layers] == ["l0", "l1", "l2"]
    assert [layer.calls for layer in out.layers] == [0, 0, 0]  # reset fields get defaults
    assert list(out.extra) == ["z", "a"]
    assert all(a is b for a, b in zip(ct.leaves(out), ct.leaves(m)))


def test_merge_accepts_parts_in_any_order_and_edited_values():
    """Parts can come in any order, with new values (an optimizer step)."""
    m = model()
    s, params, rest = ct.split(m, "param", ...)
    stepped = {p: v - 1 for p, v in params.items()}
    out = ct.merge(s, rest, stepped)
    assert np.array_equal(out.layers[2].w, m.layers[2].w - 1)
    assert out.layers[2].count is m.layers[2].count


def test_merge_takes_a_fresh_structure_and_hand_built_parts():
    """Any Structure and any mappings from path to leaf work, not only split's objects."""
    tree = {"a": [1, 2], "b": Point(3, 4)}
    parts = [dict(reversed(ct.leaves_with_path(tree)[:2])), dict(ct.leaves_with_path(tree)[2:])]
    assert ct.merge(ct.structure(tree), *parts) == tree
    assert ct.merge(ct.structure(tree), OrderedDict(ct.leaves_with_path(tree))) == tree


def test_merge_names_a_missing_path():
    """A path of the structure that no part holds is named."""
    s, evens, _ = ct.split([0, 1, 2], lambda p, v: v % 2 == 0, ...)
    with pytest.raises(
        ct.StructureError,
        match=r"^merge: no part holds the leaf at '\[1\]'\. The parts must hold one leaf for "
        r"every path of the structure; pass every part split returned\.$",
    ) as e:
        ct.merge(s, evens)
    assert e.value.path == (ct.IndexKey(1),)


def test_merge_names_an_extra_path():
    """A path that the structure does not have is named."""
    s, part = ct.split([0, 1])
    with pytest.raises(
        ct.StructureError,
        match=r"^merge: the parts hold a leaf at '\[5\]', which the structure does not have\.",
    ):
        ct.merge(s, {**part, (ct.IndexKey(5),): 9})


def test_merge_names_a_path_held_by_two_parts():
    """Two parts holding one path is an error naming it."""
    s, a, _ = ct.split([0, 1], int, ...)
    with pytest.raises(
        ct.StructureError,
        match=r"^merge: parts 0 and 1 both hold the leaf at '\[0\]'\. Each path must be in",
    ):
        ct.merge(s, a, {(ct.IndexKey(0),): 5})


@pytest.mark.parametrize("n_parts", [1, 2])
def test_merge_refuses_keystr_keys_and_shows_the_key_path(n_parts):
    """A part keyed by keystr strings is refused naming the key and the key path it
    renders, not reported as a missing leaf."""
    s = ct.structure({"a": 7, "b": 8})
    keyed_by_text = {"['a']": 7, "['b']": 8}
    parts = [keyed_by_text] if n_parts == 1 else [{}, keyed_by_text]
    with pytest.raises(
        ct.StructureError,
        match=re.escape(
            f"merge: part {n_parts - 1} has the key \"['a']\", which is not a key path. "
            "Parts are keyed by tuples of AttrKey, IndexKey and DictKey, as split returns "
            "them: \"['a']\" is the keystr of the path (DictKey('a'),)."
        ),
    ):
        ct.merge(s, *parts)


@pytest.mark.parametrize("bogus", [3, (3,), "x", ("a", ct.IndexKey(0))])
@pytest.mark.parametrize("extra_part", [False, True])
def test_merge_names_itself_for_a_key_that_is_not_a_key_path(bogus, extra_part):
    """A key that is not a tuple of keys is an error of merge's showing the key, whether
    it makes a leaf extra (one part) or a path held twice is looked for (two parts)."""
    s, part = ct.split({"a": 7}, ...)
    parts = [part, {bogus: 1}] if extra_part else [{**part, bogus: 1}]
    with pytest.raises(
        ct.StructureError,
        match="^"
        + re.escape(
            f"merge: part {int(extra_part)} has the key {bogus!r}, which is not a key path. "
            "Parts are keyed by tuples of AttrKey, IndexKey and DictKey, as split returns "
            "them, such as (DictKey('a'),)."
        )
        + "$",
    ):
        ct.merge(s, *parts)


@pytest.mark.parametrize(
    ("part", "what", "unpack"),
    [
        ([((ct.DictKey("a"),), 7)], "list", ""),
        (None, "NoneType", ""),
        (
            ({(ct.DictKey("a"),): 7},),
            "tuple",
            " To pass a list of parts, unpack it: merge(structure, *parts).",
        ),
    ],
)
def test_merge_refuses_a_part_that_is_not_a_mapping(part, what, unpack):
    """A part that is not a mapping is a TypeError naming merge, the part's position and
    its type (a tuple of parts passed whole is told to be unpacked)."""
    s = ct.structure({"a": 7})
    with pytest.raises(
        TypeError,
        match="^"
        + re.escape(
            f"merge: part 1 is a {what}, not a dict from key path to leaf. Pass the parts "
            f"split returned, after the structure: merge(structure, part, ...).{unpack}"
        )
        + "$",
    ):
        ct.merge(s, {}, part)


def test_merge_refuses_a_non_structure():
    """The first argument must be a Structure."""
    with pytest.raises(
        ct.StructureError, match=r"^merge: the first argument must be the Structure"
    ):
        ct.merge({"a": 1}, {})  # type: ignore[arg-type]


def test_merge_fast_path_checks_the_keys():
    """Parts with split's keys but one key changed still go through the checked lookup."""
    s, a, b = ct.split([0, 1, 2], int, ...)
    renamed = {((ct.IndexKey(7),) if p == (ct.IndexKey(2),) else p): v for p, v in a.items()}
    with pytest.raises(ct.StructureError, match=r"no part holds the leaf at '\[2\]'"):
        ct.merge(s, renamed, b)


def test_split_structures_are_structures():
    """split's structure equals, hashes and pickles like the tree's Structure, and merges
    any number of times, in any order of calls."""
    results = [ct.split([i, i + 1], int, ...) for i in range(20)]
    s = results[0][0]
    assert isinstance(s, ct.Structure)
    assert s == ct.structure([5, 6]) and hash(s) == hash(ct.structure([5, 6]))
    assert repr(s) == "Structure([*, *])"
    assert pickle.loads(pickle.dumps(s)) == s
    assert [ct.merge(*r) for r in results] == [[i, i + 1] for i in range(20)]
    assert [ct.merge(*r) for r in results[::-1]] == [[i, i + 1] for i in range(20)][::-1]


def test_shared_leaves_stay_shared_and_shared_nodes_do_not():
    """A leaf at two paths is one object again; a node at two paths comes back as two
    (flatten records no node identity, as in JAX)."""
    arr = np.zeros(3)
    inner = [arr]
    tree = {"a": inner, "b": inner}
    s, part = ct.split(tree, ...)
    assert keystrs(part) == ["['a'][0]", "['b'][0]"]
    out = ct.merge(s, part)
    assert out["a"][0] is out["b"][0] is arr
    assert out["a"] is not out["b"]


def _called(pred: Any) -> Any:
    def call(path: Any, value: Any) -> bool:
        return bool(pred(path, value))

    return call


class Tag:
    """A leaf with its own tag."""

    def __init__(self, tag: Any) -> None:
        self.tag = tag


@pytest.mark.filterwarnings("ignore::containers.filters.NoMatchWarning")  # random filters
@pytest.mark.parametrize(
    "tags", [("param",), ("batch_stats", "param"), ("x", "param", "x"), ("nope",)]
)
@pytest.mark.parametrize("catch_all", [True, False])
def test_tag_filters_route_as_the_predicates_do(tags, catch_all):
    """split and state with tag filters only give what calling each WithTag gives."""
    tree = {"m": model(), "own": [Tag("x"), Tag("param"), Tag(np.ones(2)), Tag(None)]}
    plain = [_called(to_predicate(t)) for t in tags]  # not WithTag: the generic loop
    ends = (...,) if catch_all else ()
    assert ct.state(tree, *tags, *ends) == ct.state(tree, *plain, *ends)
    if catch_all:
        s1, *fast = ct.split(tree, *tags, ...)
        _, *slow = ct.split(tree, *plain, ...)
        assert fast == slow
        assert all(a is b for a, b in zip(ct.leaves(ct.merge(s1, *fast)), ct.leaves(tree)))


# --- state --------------------------------------------------------------------------------


def test_state_drops_unmatched_leaves():
    """state needs no catch-all: leaves no filter matches are left out."""
    m = model()
    params = ct.state(m, "param")
    assert keystrs(params) == [f".layers[{i}].{f}" for i in range(3) for f in ("w", "b")]
    params2, stats = ct.state(m, "param", "batch_stats")
    assert params2 == params
    assert keystrs(stats) == [f".layers[{i}].count" for i in range(3)]
    assert len(ct.state(m)) == 11


def test_state_parts_merge_with_split_structures():
    """state's parts are split's parts: they merge with the structure."""
    m = model()
    s = ct.structure(m)
    assert same(ct.merge(s, *ct.state(m, "param", ...)), m)


# --- partition and combine ----------------------------------------------------------------


def test_partition_and_combine_round_trip_with_missing():
    """partition puts ct.MISSING in the other tree's places; combine restores the tree."""
    m = model()
    params, rest = ct.partition(m, "param")
    assert params.layers[0].count is ct.MISSING and rest.layers[0].w is ct.MISSING
    assert params.extra == {"z": ct.MISSING, "a": (ct.MISSING, None, [])}
    assert params.layers[0].name == "l0" and params.scale == 0.5
    assert same(ct.combine(params, rest), m)


def test_combine_takes_the_first_value_that_is_not_missing():
    """Each place takes its value from the first tree that has one."""
    a = [1, ct.MISSING, ct.MISSING]
    b = [ct.MISSING, 2, ct.MISSING]
    c = [9, 9, 9]
    assert ct.combine(a, b, c) == [1, 2, 9]
    assert ct.combine(a, b) == [1, 2, ct.MISSING]


def test_combine_names_where_structures_differ():
    """Trees of other structures are refused with the first difference named."""
    with pytest.raises(ct.StructureError, match=r"^combine: tree 1: the tree does not match"):
        ct.combine({"a": [1]}, {"a": (2,)})
    with pytest.raises(ct.StructureError, match=r"^combine: tree 1 has more nodes than tree 0"):
        ct.combine({"a": ct.MISSING}, {"a": [1]})
    with pytest.raises(ct.StructureError, match=r"^combine: no trees given"):
        ct.combine()


def test_missing_is_a_one_member_enum_with_a_clear_repr():
    """ct.MISSING is the only member of its enum, prints as ct.MISSING and is a leaf."""
    assert list(type(ct.MISSING)) == [ct.MISSING]
    assert repr(ct.MISSING) == "ct.MISSING"
    assert ct.isleaf(ct.MISSING)


# --- where= -------------------------------------------------------------------------------


def test_fmap_where_maps_only_matching_leaves():
    """Leaves the filter does not match stay as they are (the same objects)."""
    m = model()
    out = ct.fmap(lambda v: v * 10, m, where="param")
    assert np.array_equal(out.layers[1].w, m.layers[1].w * 10)
    assert out.layers[1].count is m.layers[1].count
    assert out.extra == m.extra and out.scale == 0.5


def test_fmap_where_keeps_sharing():
    """A shared array is mapped once and stays shared (fmap's identity cache)."""
    arr = np.ones(2)
    calls = []

    def double(v):
        calls.append(v)
        return v * 2

    out = ct.fmap(double, {"a": arr, "b": arr, "c": 1}, where=np.ndarray)
    assert out["a"] is out["b"]
    assert len(calls) == 1 and out["c"] == 1


def test_fmap_where_with_several_trees():
    """Other trees are read in parallel, as in fmap."""
    out = ct.fmap(lambda a, b: a + b, {"x": 1.0, "n": 2}, {"x": 0.5, "n": 100}, where=float)
    assert out == {"x": 1.5, "n": 2}


def test_fmap_where_none_maps_nothing():
    """where=None is the filter Nothing: no leaf is mapped."""
    assert ct.fmap(lambda v: v + 1, [1, 2], where=None) == [1, 2]


def test_fmap_where_refuses_exclude_and_walk():
    """where= cannot be combined with exclude= or walk=."""
    with pytest.raises(FilterError, match=r"^fmap: where= cannot be combined with exclude="):
        ct.fmap(str, [1], where=int, exclude=lambda v: True)
    with pytest.raises(FilterError, match=r"^fmap: where= cannot be combined"):
        ct.fmap(str, [1], where=int, walk=ct.DefaultWalk())


def test_leaves_where():
    """leaves(where=) returns the matching leaves in flatten order."""
    m = model()
    assert ct.leaves(m, where="batch_stats") == [layer.count for layer in m.layers]
    assert ct.leaves([1, None, 2], where=..., none_is_leaf=True) == [1, None, 2]


def test_a_bad_filter_is_refused_by_every_operation():
    """split, state, partition, fmap and leaves all refuse a value that is not a filter."""
    for call in (
        lambda: ct.split([1], 2.5),
        lambda: ct.state([1], 2.5),
        lambda: ct.partition([1], 2.5),
        lambda: ct.fmap(str, [1], where=2.5),
        lambda: ct.leaves([1], where=2.5),
    ):
        with pytest.raises(FilterError, match=r"^2\.5 \(a float\) is not a filter"):
            call()


# --- depth and cycles ---------------------------------------------------------------------

DEPTH = 100_000


def nest(depth: int, leaf: Any) -> Any:
    tree = leaf
    for _ in range(depth):
        tree = [tree]
    return tree


def unnest(tree: Any) -> tuple[int, Any]:
    depth = 0
    while isinstance(tree, list):
        tree, depth = tree[0], depth + 1
    return depth, tree


def test_depth_100_000():
    """split, merge, state, partition, combine and where= handle 100,000 levels."""
    deep = nest(DEPTH, 1)
    s, ints, rest = ct.split(deep, int, ...)
    ((path, leaf),) = ints.items()
    assert (len(path), leaf, rest) == (DEPTH, 1, {})
    assert unnest(ct.merge(s, {path: 2})) == (DEPTH, 2)
    assert list(ct.state(deep, PathContains(0)).values()) == [1]
    left, right = ct.partition(deep, str)
    assert unnest(ct.combine(right, left)) == (DEPTH, 1)
    assert unnest(ct.fmap(lambda v: v + 1, deep, where=int)) == (DEPTH, 2)
    assert ct.leaves(deep, where=int) == [1]


@pytest.mark.parametrize(
    "op",
    [
        lambda t: ct.split(t, ...),
        lambda t: ct.state(t, int),
        lambda t: ct.partition(t, int),
        lambda t: ct.fmap(str, t, where=int),
        lambda t: ct.leaves(t, where=int),
    ],
    ids=["split", "state", "partition", "fmap_where", "leaves_where"],
)
def test_a_cycle_is_a_structure_error_naming_its_place(op):
    """A list that contains itself is reported with both places, never a hang."""
    cyclic: list[Any] = [1, {"k": []}]
    cyclic[1]["k"].append(cyclic)
    with pytest.raises(
        ct.StructureError,
        match=r"^(split|state|partition|fmap|leaves): the tree has a reference cycle: the object "
        r"at \"\[1\]\['k'\]\[0\]\" is the same object as its ancestor at the root\.",
    ):
        op(cyclic)


# --- properties ---------------------------------------------------------------------------

_serial = itertools.count()
TAGS = ("a", "b")


@st.composite
def tagged_classes(draw: st.DrawFn) -> type:
    """A fresh container class whose fields carry random tags (some kept, some reset)."""
    n = draw(st.integers(1, 3))
    fields = []
    for i in range(n):
        tags = tuple(draw(st.lists(st.sampled_from(TAGS), max_size=2, unique=True)))
        fields.append((f"f{i}", Any, ct.field(default=None, tags=tags)))
    fields.append(("kept", Any, dataclasses.field(default="k")))
    fields.append(("reset", Any, dataclasses.field(default="r")))
    cls = dataclasses.make_dataclass(f"Tagged{next(_serial)}", fields, frozen=draw(st.booleans()))
    return ct.container(children=[f"f{i}" for i in range(n)], keep=["kept"])(cls)


leaf_values = st.one_of(
    st.integers(-3, 3),
    st.floats(allow_nan=False, width=32),
    st.text(max_size=2),
    st.builds(lambda n: np.arange(n, dtype="float32"), st.integers(0, 2)),
)


@st.composite
def tagged_trees(draw: st.DrawFn) -> Any:
    classes = draw(st.lists(tagged_classes(), min_size=1, max_size=2))

    def instance(cls: type, d: st.DrawFn, child: st.SearchStrategy[Any]) -> Any:
        spec = ct.spec(cls)
        return cls(**{f: d(child) for f in spec.children}, kept=d(st.integers()))

    def extend(child: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.lists(child, max_size=3),
            st.lists(child, max_size=3).map(tuple),
            st.dictionaries(st.text(max_size=2), child, max_size=3),
            st.builds(Point, child, child),
            st.sampled_from(classes).flatmap(
                lambda cls: st.composite(lambda d: instance(cls, d, child))()
            ),
        )

    return draw(st.recursive(leaf_values, extend, max_leaves=12))


filter_pool = st.sampled_from(
    [
        int,
        float,
        str,
        np.ndarray,
        "a",
        "b",
        None,
        False,
        PathContains(0),
        PathContains("f1"),
        Not("a"),
        All("b", float),
        (str, "a"),
        lambda p, v: len(p) > 2,
    ]
)
filter_sets = st.lists(filter_pool, max_size=4)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.filterwarnings("ignore::containers.filters.NoMatchWarning")  # random filters
@SETTINGS
@given(tagged_trees(), filter_sets, st.booleans())
def test_split_then_merge_is_the_identity(tree, filters, fresh_structure):
    """For every filter set ending in `...`, merge(split(tree)) rebuilds the tree, with
    split's structure or a fresh one, and the parts partition flatten_with_path."""
    s, *parts = ct.split(tree, *filters, ...)
    assert len(parts) == len(filters) + 1
    pairs = ct.leaves_with_path(tree)
    assert sum(map(len, parts)) == len(pairs)
    preds = [to_predicate(f) for f in filters]
    for path, leaf in pairs:
        first = next((i for i, p in enumerate(preds) if p(path, leaf)), len(preds))
        assert parts[first][path] is leaf
    structure = ct.structure(tree) if fresh_structure else s
    out = ct.merge(structure, *parts[::-1] if fresh_structure else parts)
    assert same(out, tree)
    assert ct.flatten(out)[1] == ct.flatten(tree)[1]


@SETTINGS
@given(tagged_trees(), filter_pool)
def test_where_equals_filtering_flatten_with_path_by_hand(tree, filter_):
    """leaves(where=) and fmap(where=) agree with a loop over flatten_with_path."""
    pred = to_predicate(filter_)
    pairs, s = ct.flatten_with_path(tree)
    assert [id(v) for v in ct.leaves(tree, where=filter_)] == [
        id(v) for p, v in pairs if pred(p, v)
    ]
    mapped = ct.fmap(lambda v: ("mapped", v), tree, where=filter_, cache=False)
    expected = s.unflatten([("mapped", v) if pred(p, v) else v for p, v in pairs])
    assert ct.flatten(mapped)[1] == ct.flatten(expected)[1]
    assert all(
        (a is b) or (type(a) is tuple and a[0] == "mapped" and a[1] is b[1])
        for a, b in zip(ct.leaves(mapped), ct.leaves(expected))
    )


@pytest.mark.filterwarnings("ignore::containers.filters.NoMatchWarning")  # random filters
@SETTINGS
@given(tagged_trees(), filter_pool)
def test_partition_then_combine_is_the_identity(tree, filter_):
    """combine(*partition(tree, f)) rebuilds the tree and each side holds its leaves."""
    left, right = ct.partition(tree, filter_)
    pred = to_predicate(filter_)
    pairs = ct.leaves_with_path(tree)
    assert [v is not ct.MISSING for v in ct.leaves(left)] == [pred(p, v) for p, v in pairs]
    assert same(ct.combine(left, right), tree)


def test_defaultdict_and_ordereddict_survive_split_and_merge():
    """Node types with their own aux (default factory, key order) are rebuilt."""
    tree = {"d": defaultdict(list, {"b": 1, "a": 2}), "o": OrderedDict([("z", 1), ("y", 2)])}
    s, ints = ct.split(tree, int)
    out = ct.merge(s, ints)
    assert type(out["d"]) is defaultdict and out["d"].default_factory is list
    assert list(out["o"]) == ["z", "y"] and out == tree


def test_of_type_filters_split_arrays_from_scalars():
    """A type filter sends arrays one way and scalars the other."""
    _, arrays, scalars = ct.split(model(), OfType(np.ndarray), ...)
    assert len(arrays) == 9 and list(scalars.values()) == [2, 1]


# --- the fast paths for lists of layers agree with their plain statements ----------------


class Own:
    """A leaf with its own tag (a heap type: WithTag must look at each instance)."""

    def __init__(self, tag: Any) -> None:
        self.tag = tag

    def __repr__(self) -> str:
        return f"Own({self.tag!r})"


own_leaves = st.one_of(leaf_values, st.sampled_from(["a", "b", "c", 1]).map(Own))


@st.composite
def run_classes(draw: st.DrawFn) -> type:
    """A fresh container class with 1 to 3 tagged children and 0 to 2 kept fields."""
    fields = []
    for i in range(draw(st.integers(1, 3))):
        tags = tuple(draw(st.lists(st.sampled_from(TAGS), max_size=2, unique=True)))
        fields.append((f"f{i}", Any, ct.field(default=None, tags=tags)))
    keep = [f"k{i}" for i in range(draw(st.integers(0, 2)))]
    fields += [(k, Any, dataclasses.field(default="k")) for k in keep]
    cls = dataclasses.make_dataclass(f"Run{next(_serial)}", fields, frozen=draw(st.booleans()))
    return ct.container(children=[f[0] for f in fields if f[0] not in keep], keep=keep)(cls)


@st.composite
def layer_lists(draw: st.DrawFn) -> Any:
    """Trees made of runs: lists (or classes) holding 7-9 instances of one tagged class,
    mostly with leaf children only, sometimes one holding a node (no longer a run) or
    a kept field, which gives each instance its own aux."""
    cls = draw(run_classes())
    spec = ct.spec(cls)
    leaf = draw(st.sampled_from([leaf_values, own_leaves]))  # own: no fast flatten

    def one(d: st.DrawFn) -> Any:
        kids = {f: d(leaf) for f in spec.children}
        if d(st.integers(0, 9)) == 0:
            kids[spec.children[0]] = d(st.sampled_from([None, [1, 2], (Own("a"),)]))
        return cls(**kids, **{f: d(st.sampled_from(["k", 0, 1.5])) for f in spec.keep})

    element = st.sampled_from(
        [
            st.composite(one)(),
            st.builds(Point, own_leaves, own_leaves),
            st.tuples(own_leaves, own_leaves),
        ]
    )
    run = element.flatmap(lambda e: st.lists(e, min_size=7, max_size=9))
    run_element = element.flatmap(lambda e: e)
    return draw(
        st.recursive(
            run | run.map(tuple),
            lambda inner: st.one_of(
                st.lists(inner, max_size=3),
                st.dictionaries(st.sampled_from("xyz"), inner, max_size=3),
                st.builds(Point, inner, inner),
                st.builds(lambda v: cls(**dict.fromkeys(spec.children, v)), inner),
                # a run under fields of different tags
                st.builds(lambda v: cls(**dict.fromkeys(spec.children, v)), run_element),
            ),
            max_leaves=4,
        )
    )


def _plain_rank(path: Any, first: dict[str, int], none: int) -> int:
    tags = [t for k in path if type(k) is ct.AttrKey for t in k.tags]
    return min([first.get(t, none) for t in tags], default=none)


@SETTINGS
@given(st.one_of(layer_lists(), tagged_trees()), st.lists(st.sampled_from("abc"), max_size=3))
def test_runs_of_layers_agree_with_the_plain_walks(tree, tags):
    """flatten's loop over a list of layers gives the iterative walk's records and
    leaves; ranked_paths gives the engine's paths and the ranks read key by key."""
    from containers._flatten import ranked_paths

    leaves, s = ct.flatten(tree)
    slow_leaves, slow = ct.flatten(tree, is_leaf=lambda v: False)  # the iterative walk
    assert [id(v) for v in leaves] == [id(v) for v in slow_leaves]
    assert s._records == slow._records
    seen: list[Any] = []
    ct.fmap_with_path(lambda path, leaf: seen.append(path), tree, cache=False)
    first: dict[str, int] = {}
    for j, tag in enumerate(tags):
        first.setdefault(tag, j)
    paths, ranks = ranked_paths(s._records, first, len(tags))
    assert paths == seen == s.paths()
    assert ranks == [_plain_rank(p, first, len(tags)) for p in paths]


@pytest.mark.filterwarnings("ignore::containers.filters.NoMatchWarning")  # random filters
@SETTINGS
@given(
    st.one_of(layer_lists(), tagged_trees()),
    st.lists(st.sampled_from("abc"), min_size=1, max_size=3),
    st.booleans(),
)
def test_tag_routing_agrees_with_calling_each_filter(tree, tags, catch_all):
    """split and state with tags only (routed by ranks, leaves' own tags looked up only
    where their type allows one) give what calling each WithTag in turn gives."""
    plain = [_called(to_predicate(t)) for t in tags]  # not WithTag: the generic loop
    ends = (...,) if catch_all else ()
    assert ct.state(tree, *tags, *ends) == ct.state(tree, *plain, *ends)
    fast = slow = None
    try:
        _, *fast = ct.split(tree, *tags, *ends)
    except ct.StructureError as err:
        fast = str(err)
    try:
        _, *slow = ct.split(tree, *plain, *ends)
    except ct.StructureError as err:
        slow = str(err)
    assert fast == slow


@pytest.mark.parametrize("n", [1, 5])
def test_an_unset_field_in_a_list_of_layers_is_named(n):
    """A field never assigned is named by flatten and split, in a list of layers as alone."""

    @ct.container
    @dataclasses.dataclass
    class Late:
        w: Any
        b: Any = dataclasses.field(init=False)

    layers = [Late(i) for i in range(n)]
    for layer in layers[:-1]:
        layer.b = 0
    for op in (ct.flatten, ct.leaves, lambda t: ct.split(t, ...)):
        with pytest.raises(ct.StructureError, match=r"Late\.b is not set on this Late"):
            op(layers)


@pytest.mark.filterwarnings("ignore::containers.filters.NoMatchWarning")  # random filters
@pytest.mark.parametrize("n_keep", [0, 1, 2])
@pytest.mark.parametrize("n_kids", [1, 2, 3])
def test_a_list_of_layers_flattens_as_node_by_node(n_kids, n_keep):
    """A list of layers (flattened and given paths in loops in C) gives the records,
    leaves and paths of the iterative walk, kept fields included, and splits back."""
    kids = [f"f{i}" for i in range(n_kids)]
    keep = [f"k{i}" for i in range(n_keep)]
    fields = [
        (f, Any, ct.field(default=None, tags=("a",) if i else ())) for i, f in enumerate(kids)
    ]
    fields += [(k, Any, dataclasses.field(default="k")) for k in keep]
    cls = ct.container(children=kids, keep=keep)(dataclasses.make_dataclass("L", fields))
    tree = {"layers": [cls(*range(i, i + n_kids), *[f"kept{i}"] * n_keep) for i in range(9)]}
    leaves, s = ct.flatten(tree)
    slow_leaves, slow = ct.flatten(tree, is_leaf=lambda v: False)
    assert leaves == slow_leaves and s._records == slow._records
    seen: list[Any] = []
    ct.fmap_with_path(lambda path, leaf: seen.append(path), tree, cache=False)
    assert s.paths() == seen
    st_, tagged, rest = ct.split(tree, "a", ...)
    assert [ct.keystr(p) for p in tagged] == [
        f"['layers'][{i}].{f}" for i in range(9) for f in kids[1:]
    ]
    assert ct.merge(st_, tagged, rest) == tree


def test_runs_at_every_depth_and_under_fields_of_different_tags():
    """A run of layers at depth 0, 1 and 3, and under the 8 fields of a class tagged
    differently, gets the engine's paths and each leaf the first tag its fields match."""
    from containers._flatten import ranked_paths

    names = [f"f{i}" for i in range(8)]
    fields = [(n, Any, ct.field(tags=(("a",), ("b",), ())[i % 3])) for i, n in enumerate(names)]
    wide = ct.container(dataclasses.make_dataclass("Wide", fields))
    run = [Point(i, -i) for i in range(9)]
    trees = [
        run,
        {"x": run},
        {"x": [(run, 0)]},
        wide(*[Point(i, -i) for i in range(8)]),
        {"w": [wide(*[Point(i, -i) for i in range(8)])]},
    ]
    for tree in trees:
        seen = [p for p, _ in _engine_pairs(tree)]
        first = {"b": 0, "a": 1}
        paths, ranks = ranked_paths(ct.structure(tree)._records, first, 2)
        assert paths == seen
        assert ranks == [_plain_rank(p, first, 2) for p in paths]


def _engine_pairs(tree: Any) -> list[Any]:
    """The (path, leaf) pairs fmap_with_path's engine passes to f, in order."""
    seen: list[Any] = []
    ct.fmap_with_path(lambda path, leaf: seen.append((path, leaf)), tree, cache=False)
    return seen


# --- kept plans (a tree of the same records splits from the plan of the last call) -------


def _records_pairs(tree: Any) -> list[tuple[Any, Any]]:
    """Records of tree against: itself flattened again, and a copy with every leaf and
    every kept value changed (unpicklable values aside)."""
    _, a = ct.flatten(tree)
    _, b = ct.flatten(tree)
    pairs = [(a._records, b._records), (a._records, a._records)]
    try:
        other = pickle.loads(pickle.dumps(tree))
    except Exception:
        return pairs
    _, c = ct.flatten(other)
    return [*pairs, (a._records, c._records)]


@SETTINGS
@given(st.one_of(layer_lists(), tagged_trees()))
def test_same_records_compiled_and_plain_agree(tree):
    """same_records in C and its plain twin agree on records of one tree flattened twice
    and of a copy."""
    from containers._engine import _fast
    from containers._structure import same_records_plain

    for a, b in _records_pairs(tree):
        plain = same_records_plain(a, b)
        if _fast._speedups is not None:
            assert _fast._speedups.same_records(a, b) == plain


def test_same_records_trusts_only_scalar_auxes_made_of_the_same_objects():
    """Records with a kept list (which could change in place), or a kept value replaced,
    are not the same; kept strs and ints that are the same objects are."""
    from containers._structure import same_records

    tree = Model([Layer(1, 2, 3)], extra=[1], scale=0.5)
    _, a = ct.flatten(tree)
    _, b = ct.flatten(tree)
    assert same_records(a._records, b._records)
    _, c = ct.flatten(Model([Layer(1, 2, 3)], extra=[1], scale=0.25))
    assert not same_records(a._records, c._records)
    dict_tree = {"k": [1], 2: (3, None)}
    _, d = ct.flatten(dict_tree)
    _, e = ct.flatten(dict_tree)
    assert same_records(d._records, e._records)  # a dict's keys: the same strs and ints
    dict_tree = {"k": Layer(1, 2, 3, name=["mutable"])}
    _, d = ct.flatten(dict_tree)
    _, e = ct.flatten(dict_tree)
    assert not same_records(d._records, e._records)
    with pytest.raises(TypeError, match="same_records: records must be tuples"):
        same_records(list(a._records), b._records)  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore::containers.filters.NoMatchWarning")  # random filters
@SETTINGS
@given(
    st.one_of(layer_lists(), tagged_trees()),
    st.lists(st.sampled_from("abc"), min_size=1, max_size=3),
    st.data(),
)
def test_kept_plans_agree_with_fresh_ones(tree, tags, data):
    """tag_plan (a plan reused for a tree of the same records) gives the paths and ranks
    computed afresh, before and after a leaf of the tree is swapped for one with its
    own tag or a shared one; split's parts from the plan equal the generic loop's."""
    from containers._tags import tag_plan, tag_ranks_plain

    def check() -> None:
        leaves, s = ct.flatten(tree)
        paths, ranks, _ = tag_plan(s._records, leaves, tags)
        assert (paths, ranks) == tag_ranks_plain(s._records, leaves, tags)
        plain = [_called(to_predicate(t)) for t in tags]
        assert ct.state(tree, *tags, ...) == ct.state(tree, *plain, ...)

    check()
    check()  # from the kept plan
    leaves, s = ct.flatten(tree)
    if leaves:
        i = data.draw(st.integers(0, len(leaves) - 1))
        new = data.draw(st.sampled_from([Own("a"), Own("c"), leaves[0], 7]))
        tree = s.unflatten([new if j == i else v for j, v in enumerate(leaves)])
        check()


def test_a_kept_plan_sees_a_leaf_given_its_own_tag():
    """A leaf replaced by one whose own tag is listed moves to that tag's part on the
    next split of a tree of the same records (the plan's ranks are not reused then)."""
    layers = [Layer(np.zeros(1), np.zeros(1), np.zeros(1)) for _ in range(9)]
    m = Model(layers)
    _, params, stats, _ = ct.split(m, "param", "batch_stats", ...)
    assert len(params) == 18 and len(stats) == 9
    own = Own("param")
    layers[4] = Layer(np.zeros(1), np.zeros(1), own)
    _, params, stats, _ = ct.split(m, "param", "batch_stats", ...)
    assert len(params) == 19 and len(stats) == 8
    assert params[(ct.AttrKey("layers"), ct.IndexKey(4), ct.AttrKey("count"))] is own


def test_key_hashes_are_computed_once_and_equal_to_the_plain_twins():
    """AttrKey and IndexKey hash as hash((type, raw)), the compiled base as its plain twin,
    and a path built afresh finds a part's entry."""
    from containers._paths import _PlainHashedKey, index_keys

    for key in (ct.AttrKey("w"), ct.AttrKey("w", tags=("param",)), ct.IndexKey(3)):
        assert hash(key) == hash((type(key), key.raw)) == key._hash
        assert _PlainHashedKey.__hash__(key) == hash(key)
    assert [hash(k) for k in index_keys(300)[250:]] == [
        hash((ct.IndexKey, i)) for i in range(250, 300)
    ]
    _, params, _ = ct.split(model(), "param", ...)
    path = (ct.AttrKey("layers"), ct.IndexKey(1), ct.AttrKey("b"))
    assert params[path] is model().layers[1].b or np.array_equal(params[path], np.ones(2))


@pytest.mark.filterwarnings("ignore::containers.filters.NoMatchWarning")  # random filters
@SETTINGS
@given(st.one_of(layer_lists(), tagged_trees()), st.lists(st.sampled_from("abc"), max_size=3))
def test_fill_part_compiled_and_plain_agree(tree, tags):
    """A plan's parts filled in C (keys inserted with their kept hashes) equal the plain
    twin's dicts, in order, their keys found by paths built afresh."""
    from containers._engine import _fast
    from containers._tags import TagPlan, fill_part_plain

    leaves, s = ct.flatten(tree)
    plan = TagPlan(s._records, tuple(tags), {}, s.paths(), [0] * len(leaves))
    for keys, hashes, picks in plan.layout(1):
        plain = fill_part_plain(keys, hashes, leaves, picks)
        assert list(plain) == s.paths()
        if _fast._speedups is not None:
            fast = _fast._speedups.fill_part(keys, hashes, leaves, picks)
            assert list(fast.items()) == list(plain.items())
            fresh = ct.flatten_with_path(tree)[0]
            assert all(fast[p] is v for p, v in fresh)


def test_fill_part_refuses_what_is_not_a_plan():
    """fill_part checks its arrays' type and lengths and its indices (it is internal, but
    must not read past a list)."""
    from array import array

    from containers._engine import _fast

    if _fast._speedups is None:
        pytest.skip("the compiled engine is not built")
    fill = _fast._speedups.fill_part
    key = (ct.AttrKey("w"),)
    one = array("q", [hash(key)])
    with pytest.raises(ValueError, match="differ in length"):
        fill([key], array("q"), [1], array("q", [0]))
    with pytest.raises(IndexError, match="not a leaf's index"):
        fill([key], one, [1], array("q", [1]))
    with pytest.raises(TypeError, match="must be array"):
        fill([key], array("i", [0]), [1], array("q", [0]))
    with pytest.raises(TypeError, match="must be lists"):
        fill((key,), one, [1], array("q", [0]))
    assert fill([key], one, ["leaf"], array("q", [0])) == {key: "leaf"}


_FILL_ITEMS = st.sampled_from([ct.MISSING, None, 0, 1.5, "leaf", (), ct.MISSING])


@SETTINGS
@given(st.lists(st.tuples(_FILL_ITEMS, _FILL_ITEMS), max_size=40))
def test_fill_missing_compiled_and_plain_agree(pairs):
    """combine's choice of leaves in C and its plain twin agree: each MISSING of the
    first list, and only those, takes the second list's item at its index (the same
    object), in place; a MISSING facing a MISSING stays."""
    from containers._engine import _fast
    from containers._split import fill_missing_plain

    first, second = [a for a, _ in pairs], [b for _, b in pairs]
    shared = [object() for _ in pairs]  # objects only identity tells apart
    second = [s if b is ct.MISSING else o for b, s, o in zip(second, second, shared)]
    plain = list(first)
    fill_missing_plain(plain, second)
    assert all(p is (b if a is ct.MISSING else a) for p, a, b in zip(plain, first, second))
    if _fast._speedups is not None:
        fast = list(first)
        assert _fast._speedups.fill_missing(fast, second, ct.MISSING) is None
        assert len(fast) == len(plain) and all(f is p for f, p in zip(fast, plain))


def test_fill_missing_refuses_lists_that_do_not_match():
    """Both twins refuse lists of different lengths, naming them; the compiled one also
    what is not a list (it is internal, but must not read past a list)."""
    from containers._engine import _fast
    from containers._split import fill_missing_plain

    with pytest.raises(ValueError, match=r"^fill_missing: lists of 2 and 1 items$"):
        fill_missing_plain([ct.MISSING, 1], [2])
    if _fast._speedups is None:
        return
    fill = _fast._speedups.fill_missing
    with pytest.raises(ValueError, match=r"^fill_missing: lists of 2 and 1 items$"):
        fill([ct.MISSING, 1], [2], ct.MISSING)
    with pytest.raises(TypeError, match="takes two lists and the missing marker"):
        fill((ct.MISSING,), [2], ct.MISSING)
    with pytest.raises(TypeError, match="takes two lists and the missing marker"):
        fill([ct.MISSING], [2])


def _both_flattens(tree: Any) -> None:
    """The compiled flatten and its Python twin (flatten_fast, whose run reads a list of
    layers in _flatten_run) give the same leaves (by identity) and records, with and
    without snapshot, and without records."""
    from containers._engine import _fast, _flat
    from containers._registry import LEAF_TYPES, kind_of

    kind = kind_of(tree)
    if kind is None or _fast._speedups is None:
        return
    for snapshot, context in ((False, _flat.C_CONTEXT), (True, _flat.C_SNAPSHOT_CONTEXT)):
        c_records: list[Any] = []
        p_records: list[Any] = []
        c_leaves = _fast._speedups.flatten(tree, kind, LEAF_TYPES, c_records, context)
        p_leaves = _flat.flatten_fast(tree, kind, LEAF_TYPES, p_records, None, snapshot)
        assert list(map(id, c_leaves)) == list(map(id, p_leaves))
        assert c_records == p_records
        c_only = _fast._speedups.flatten(tree, kind, LEAF_TYPES, None, context)
        assert list(map(id, c_only)) == list(map(id, p_leaves))


@SETTINGS
@given(layer_lists())
def test_compiled_flatten_reads_lists_of_layers_as_the_python_run(tree):
    """flatten in C reads a list of layers by their fields as _flat._flatten_run does:
    the same leaves and records, kept fields and own-tagged leaves included."""
    _both_flattens(tree)


@ct.container
@dataclasses.dataclass
class _Prop:
    """A layer whose field ``b`` cannot be read when ``a`` is "boom" (a KeyError)."""

    a: Any
    b: Any = 2.0

    def __getattribute__(self, name: str) -> Any:
        if name == "b" and object.__getattribute__(self, "a") == "boom":
            raise KeyError("b is not ready")
        return object.__getattribute__(self, name)


def test_a_list_of_layers_shared_cyclic_or_with_failing_fields_flattens_as_before():
    """A layer shared nine times, a layer class with its own attribute lookup, a field
    whose read raises (propagated) and a cycle through a list of layers: the compiled
    flatten agrees with its twin or raises as it did (an unset field: see
    test_an_unset_field_in_a_list_of_layers_is_named)."""
    layer = Layer(1.0, 2.0, 3.0)
    _both_flattens([layer] * 9)
    _both_flattens([_Prop(1.0) for _ in range(9)])
    leaves, _ = ct.flatten([layer] * 9)
    assert leaves == [1.0, 2.0, 3.0] * 9
    with pytest.raises(KeyError, match="b is not ready"):
        ct.flatten([_Prop(1.0)] * 8 + [_Prop("boom")])
    cyclic: list[Any] = [Layer(1.0, 2.0, 3.0) for _ in range(8)]
    cyclic.append(Layer(1.0, cyclic, 3.0))
    with pytest.raises(ct.StructureError, match="cycle"):
        ct.split(cyclic, ...)
