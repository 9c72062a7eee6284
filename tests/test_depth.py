"""Unlimited depth and reference cycles (SPEC.md section 1): a list nested 100,000 deep
goes through every operation without RecursionError, and a cycle is a StructureError that
names its place, never a crash or a hang."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
import textwrap
from typing import Any

import pytest

import containers as ct
from containers import AttrKey, DictKey, IndexKey, composite

# Every test runs with the compiled child loop and with its Python twin.
pytestmark = pytest.mark.usefixtures("engine")

DEPTH = 100_000


def nest(depth: int, leaf: Any) -> Any:
    """[[...[leaf]...]] with `depth` lists."""
    tree = leaf
    for _ in range(depth):
        tree = [tree]
    return tree


def unnest(tree: Any) -> tuple[int, Any]:
    """The number of nested lists around the innermost value, and that value."""
    depth = 0
    while type(tree) is list:
        assert len(tree) == 1
        tree = tree[0]
        depth += 1
    return depth, tree


@pytest.fixture(scope="module")
def deep():
    """A list nested DEPTH deep around the leaf 0."""
    return nest(DEPTH, 0)


@pytest.fixture(scope="module")
def deep_flat(deep):
    """flatten(deep), computed once."""
    return ct.flatten(deep)


# --- 100,000 deep -----------------------------------------------------------------------------


def test_deep_list_flattens(deep_flat):
    """flatten handles 100,000 levels: one leaf, DEPTH nodes."""
    leaves, s = deep_flat
    assert leaves == [0]
    assert (s.num_leaves, s.num_nodes) == (1, DEPTH + 1)


def test_deep_list_unflattens(deep_flat):
    """unflatten rebuilds all 100,000 levels."""
    _, s = deep_flat
    assert unnest(s.unflatten(["x"])) == (DEPTH, "x")


def test_deep_list_maps(deep):
    """fmap maps a 100,000-deep list."""
    assert unnest(ct.fmap(lambda v: v + 1, deep)) == (DEPTH, 1)


def test_deep_lists_map_together(deep):
    """fmap over two 100,000-deep lists reads the second by key all the way down."""
    assert unnest(ct.fmap(lambda a, b: a + b, deep, nest(DEPTH, 5))) == (DEPTH, 5)


def test_deep_list_fmapstructure(deep):
    """fmapstructure handles 100,000 levels."""
    assert unnest(ct.fmapstructure(lambda v: v - 1, deep)) == (DEPTH, -1)


def test_deep_list_leaves(deep):
    """leaves handles 100,000 levels."""
    assert ct.leaves(deep) == [0]


def test_deep_list_fcollect(deep):
    """fcollect lists all 100,000 levels, outermost first, then the leaf."""
    out = ct.fcollect(deep)
    assert len(out) == DEPTH + 1
    assert out[0] is deep and out[-1] == 0
    assert unnest(out[-2]) == (1, 0)


def test_deep_list_maps_with_the_stock_walks(deep):
    """fmap(walk=...) and execute run the stock walks and their compositions on the
    engine's loop: 100,000 levels, two trees included."""
    assert unnest(ct.fmap(lambda v: v + 1, deep, walk=ct.DefaultWalk())) == (DEPTH, 1)
    assert unnest(ct.fmap(str, deep, walk=ct.StructuralWalk(), cache=False)) == (DEPTH, "0")
    two = ct.fmap(lambda a, b: a + b, deep, nest(DEPTH, 5), walk=ct.DefaultWalk())
    assert unnest(two) == (DEPTH, 5)
    composed = ct.CachedWalk(ct.ExcludeWalk(ct.DefaultWalk(), lambda v: v - 1, ct.isleaf))
    assert unnest(ct.execute(composed, deep)) == (DEPTH, -1)
    assert unnest(ct.execute(ct.DefaultWalk(), deep)) == (DEPTH, 0)
    collected = ct.CollectWalk()
    ct.execute(collected, deep)
    assert len(collected.items) == DEPTH + 1 and collected.items[0] is deep


def test_deep_mismatch_under_a_walk_names_its_path():
    """A second tree that differs 100,000 levels down, under walk=, raises fmap's
    mismatch error with the full path."""
    with pytest.raises(ct.StructureError, match=r"^fmap: trees differ at ") as info:
        ct.fmap(lambda a, b: a, nest(DEPTH, [1]), nest(DEPTH, 2), walk=ct.DefaultWalk())
    assert info.value.path == (IndexKey(0),) * DEPTH


def test_a_walk_of_ones_own_past_the_recursion_limit_names_its_path():
    """A walk class defining __call__ nests Python calls per level: past the recursion
    limit it raises StructureError with the path reached, not RecursionError."""

    class Mine(ct.Walk):
        def __call__(self, recurse, x, *ys):
            return ct.DefaultWalk()(recurse, x, *ys)

    with pytest.raises(ct.StructureError, match=r"^fmap: the tree is too deep, at .*\[0\]"):
        ct.fmap(lambda v: v, nest(5000, 0), walk=Mine())
    assert unnest(ct.fmap(lambda v: v + 1, nest(50, 0), walk=Mine())) == (50, 1)


def test_deep_list_diff(deep):
    """diff compares two 100,000-deep lists and finds no difference."""
    assert ct.diff(deep, nest(DEPTH, "other leaf")) == []


def test_deep_structure_pickles(deep_flat):
    """A 100,000-deep Structure pickles, compares and hashes."""
    _, s = deep_flat
    back = pickle.loads(pickle.dumps(s))
    assert back == s
    assert hash(back) == hash(s)


def test_deep_structure_paths(deep_flat):
    """paths() of a 100,000-deep structure gives the one leaf's full path."""
    _, s = deep_flat
    assert s.paths() == [(IndexKey(0),) * DEPTH]


def test_deep_leaves_with_path(deep):
    """leaves_with_path handles 100,000 levels."""
    [(path, leaf)] = ct.leaves_with_path(deep)
    assert (len(path), leaf) == (DEPTH, 0)
    assert set(path) == {IndexKey(0)}


def test_deep_structure_repr_is_summarized(deep_flat):
    """The repr of a huge structure is a summary, not 100,000 brackets."""
    _, s = deep_flat
    assert repr(s) == f"Structure(<{DEPTH} nodes; root: a list>)"


# fmap_with_path builds its paths as tuples, one per frame; run it in a child process
# with a memory cap so that quadratic memory fails fast instead of exhausting the machine.
_WITH_PATH_SCRIPT = textwrap.dedent(
    """
    import resource
    import containers as ct

    depth = {depth}
    tree = 0
    for _ in range(depth):
        tree = [tree]
    with open("/proc/self/status") as status:
        vm_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize"))
    cap = (vm_kb + 512 * 1024) * 1024  # what the process uses now, plus 512 MiB
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    out = ct.fmap_with_path(lambda p, v: len(p), tree)
    for _ in range(depth):
        out = out[0]
    print(out)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and RLIMIT_AS")
def test_deep_list_fmap_with_path():
    """fmap_with_path maps a 100,000-deep list in bounded memory."""
    result = subprocess.run(
        [sys.executable, "-c", _WITH_PATH_SCRIPT.format(depth=DEPTH)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str(DEPTH)


# --- reference cycles ----------------------------------------------------------------------


def cyclic() -> dict[str, Any]:
    """{'a': [1, 2, <the dict itself>]}: the cycle closes at ['a'][2]."""
    tree: dict[str, Any] = {"a": [1, 2]}
    tree["a"].append(tree)
    return tree


CYCLE_PATH = (DictKey("a"), IndexKey(2))


def cycle_message(op: str | None, where: str = "\"['a'][2]\"", first: str = "the root") -> str:
    """The exact message of a cycle error; op=None accepts any operation name in front."""
    head = r"[\w.]+" if op is None else re.escape(op)
    return (
        f"^{head}: the tree has a reference cycle: the object at {re.escape(where)} "
        f"is the same object as its ancestor at {re.escape(first)}. Trees must be acyclic; "
        r"break the cycle, or make the object a leaf \(exclude=/is_leaf=, where the "
        r"operation takes them\)\.$"
    )


# The operation name that starts the message, where it is the function called. Functions
# built on another one (structure on flatten, composite on leaves) may name either.
CYCLE_OPERATIONS = {
    "flatten": ("flatten", ct.flatten),
    "flatten-is_leaf": ("flatten", lambda t: ct.flatten(t, is_leaf=lambda v: False)),
    "structure": (None, ct.structure),
    "flatten_with_path": (None, ct.flatten_with_path),
    "leaves": ("leaves", ct.leaves),
    "leaves_with_path": (None, ct.leaves_with_path),
    "fmap": ("fmap", lambda t: ct.fmap(lambda v: v, t)),
    "fmap-no-cache": ("fmap", lambda t: ct.fmap(lambda v: v, t, cache=False)),
    "fmap-two-trees": ("fmap", lambda t: ct.fmap(lambda a, b: a, t, t)),
    "fmap-exclude": ("fmap", lambda t: ct.fmap(lambda v: v, t, exclude=lambda v: False)),
    "fmapstructure": ("fmapstructure", lambda t: ct.fmapstructure(lambda v: v, t)),
    "fmap_with_path": (None, lambda t: ct.fmap_with_path(lambda p, v: v, t)),
    "fcollect": ("fcollect", ct.fcollect),
    "fmap-walk": ("fmap", lambda t: ct.fmap(lambda v: v, t, walk=ct.DefaultWalk())),
    "fmap-structural-walk": ("fmap", lambda t: ct.fmap(str, t, walk=ct.StructuralWalk())),
    "fmap-walk-no-cache": (
        "fmap",
        lambda t: ct.fmap(lambda v: v, t, walk=ct.DefaultWalk(), cache=False),
    ),
    "execute": ("execute", lambda t: ct.execute(ct.DefaultWalk(), t)),
    "execute-collect": ("execute", lambda t: ct.execute(ct.CollectWalk(), t)),
    "execute-composed": (
        "execute",
        lambda t: ct.execute(ct.CachedWalk(ct.ExcludeWalk(ct.DefaultWalk(), str, ct.isleaf)), t),
    ),
    "fcollect-exclude": ("fcollect", lambda t: ct.fcollect(t, exclude=lambda v: False)),
    "diff": ("diff", lambda t: ct.diff(t, cyclic())),
    "assert_same_structure": (None, lambda t: ct.assert_same_structure(t, cyclic())),
    "broadcast": (None, lambda t: ct.broadcast(0, t)),
    "composite.traverse": (None, lambda t: composite.traverse(t, 0, lambda v, a: (v, a))),
    "composite.reduce": (None, lambda t: composite.reduce(t, 0, lambda v, a: a)),
    "composite.count": (None, composite.count),
    "composite.flatten_list": (None, lambda t: composite.flatten_list([t])),
}


@pytest.mark.parametrize(
    ("op", "operation"), list(CYCLE_OPERATIONS.values()), ids=list(CYCLE_OPERATIONS)
)
def test_cycle_is_a_structure_error_naming_its_place(op, operation):
    """Each operation reports a reference cycle with the path where it closes."""
    with pytest.raises(ct.StructureError, match=cycle_message(op)) as info:
        operation(cyclic())
    assert info.value.path == CYCLE_PATH


def test_cycle_through_a_mutable_container():
    """A non-frozen container that contains itself is a cycle at its field's path."""

    @ct.container(frozen=False)
    class Node:
        value: Any
        next: Any = None

    node = Node(1)
    node.next = [node]
    with pytest.raises(ct.StructureError, match=cycle_message("fmap", "'.next[0]'")) as info:
        ct.fmap(lambda v: v, node)
    assert info.value.path == (AttrKey("next"), IndexKey(0))
    with pytest.raises(ct.StructureError, match=cycle_message("flatten", "'.next[0]'")):
        ct.flatten(node)
    with pytest.raises(ct.StructureError, match=cycle_message("fcollect", "'.next[0]'")):
        ct.fcollect(node)


def test_list_containing_itself():
    """The smallest cycle: a list that is its own element."""
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ct.StructureError, match=cycle_message("leaves", "'[0]'")) as info:
        ct.leaves(loop)
    assert info.value.path == (IndexKey(0),)


def test_cycle_deeper_than_the_fast_path():
    """A cycle that closes 300 levels down (past the recursive fast paths) has its full path."""
    top: list[Any] = [0]
    bottom = top
    for _ in range(299):
        bottom[0] = [0]
        bottom = bottom[0]
    bottom[0] = top
    expected = (IndexKey(0),) * 300
    for operation in (ct.flatten, ct.leaves, lambda t: ct.fmap(lambda v: v, t), ct.fcollect):
        with pytest.raises(ct.StructureError, match="reference cycle") as info:
            operation(top)
        assert info.value.path == expected
        assert "(depth 300)" in str(info.value)


def test_cycle_between_inner_nodes_names_both_places():
    """The message names the repeated object's place and its ancestor's place."""
    inner: list[Any] = [1]
    tree = {"x": [inner]}
    inner.append(tree["x"])
    with pytest.raises(
        ct.StructureError, match=cycle_message("flatten", "\"['x'][0][1]\"", "\"['x']\"")
    ):
        ct.flatten(tree)


def test_shared_objects_are_not_cycles():
    """An object reached twice but not inside itself is fine."""
    shared = [1]
    assert ct.leaves([shared, [shared]]) == [1, 1]
    assert ct.diff([shared, shared], [[1], [2]]) == []


def test_cycle_through_a_tuple():
    """A tuple inside a list inside that tuple: the cycle closes at the tuple's place."""
    inner: list[Any] = [1]
    loop = (inner,)
    inner.append(loop)
    for op, operation in [("fcollect", ct.fcollect), ("fmap", lambda t: ct.fmap(str, t))]:
        with pytest.raises(ct.StructureError, match=cycle_message(op, "'[0][1]'")) as info:
            operation(loop)
        assert info.value.path == (IndexKey(0), IndexKey(1))


def test_fmap_with_a_walk_reports_a_cycle():
    """fmap(walk=...) reports a reference cycle as StructureError, not RecursionError."""
    with pytest.raises(ct.StructureError, match="reference cycle"):
        ct.fmap(lambda v: v, cyclic(), walk=ct.DefaultWalk())


def test_values_equal_and_value_hash_take_any_depth_and_cycles():
    """values_equal and value_hash (kept values, Structure ==/hash) compare and hash
    100,000-deep nests without RecursionError, and values_equal ends on cycles."""
    from containers._registry import value_hash, values_equal

    assert values_equal(nest(DEPTH, 1), nest(DEPTH, 1))
    assert not values_equal(nest(DEPTH, 1), nest(DEPTH, 2))
    a: list[Any] = [1.0, float("nan")]
    a.append(a)
    b: list[Any] = [1.0, float("nan")]
    b.append(b)
    assert values_equal(a, b)
    b[0] = 2.0
    assert not values_equal(a, b)
    deep_tuple: Any = 0
    for _ in range(DEPTH):
        deep_tuple = (deep_tuple,)
    assert value_hash(deep_tuple) == value_hash(deep_tuple)
    assert value_hash((1, (2, float("nan")))) == value_hash((1, (2, float("nan"))))


def test_safe_repr_takes_any_depth_and_cycles():
    """safe_repr shows a 100,000-deep list by its first levels and a cycle holding an
    int too long to print as [...], where repr alone would fail."""
    from containers._errors import safe_repr

    shown = safe_repr(nest(DEPTH, 1))
    assert shown.startswith("[[[") and "..." in shown and len(shown) < 200
    cyclic_list: list[Any] = [10**5000]
    cyclic_list.append(cyclic_list)
    assert safe_repr(cyclic_list) == "[int(16610 bits, crc32 c6d23d8d), [...]]"
    assert safe_repr({"k": (10**5000,), "e": set()}) == (
        "{'k': (int(16610 bits, crc32 c6d23d8d),), 'e': set()}"
    )


def test_safe_repr_shows_a_deep_nest_of_another_type():
    """safe_repr of a 100,000-deep deque (whose repr raises RecursionError), alone or
    inside a list, says it is nested too deep instead of raising."""
    from collections import deque

    from containers._errors import safe_repr

    deep_deque: Any = deque([1])
    for _ in range(DEPTH):
        deep_deque = deque([deep_deque])
    assert safe_repr(deep_deque) == "<deque nested too deep to show>"
    assert safe_repr([deep_deque, 10**5000]) == (
        "[<deque nested too deep to show>, int(16610 bits, crc32 c6d23d8d)]"
    )


def test_value_hash_and_values_equal_take_self_containing_values():
    """value_hash hashes a list or dict that contains itself (by type, as any unhashable
    value), and values_equal compares two such dicts and a list holding itself twice."""
    from containers._registry import value_hash, values_equal

    a: dict[str, Any] = {"x": 1}
    a["self"] = a
    b: dict[str, Any] = {"x": 1}
    b["self"] = b
    assert values_equal(a, b)
    assert value_hash(a) == value_hash(b)
    twice: list[Any] = []
    twice.extend([twice, twice])
    other: list[Any] = []
    other.extend([other, other])
    assert values_equal(twice, other)
    assert value_hash((twice, a)) == value_hash((other, b))
