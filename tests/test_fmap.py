"""The fmap family: fmap, fmapstructure, fcollect, fmap_with_path, and the walk objects
(SPEC.md section 4)."""

from __future__ import annotations

import collections
import re
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import containers as ct

# Every test runs with the compiled child loop and with its Python twin.
pytestmark = pytest.mark.usefixtures("engine")


def exact(message: str) -> str:
    """A `match=` pattern for exactly this message."""
    return f"^{re.escape(message)}$"


def trees_differ(where: str, what: str, op: str = "fmap") -> str:
    """The exact message of a multi-tree mismatch."""
    return exact(
        f"{op}: trees differ at {where}: {what}. Every other tree must have the first "
        "tree's nodes and keys."
    )


@ct.container
class Frozen:
    a: Any
    b: Any = None


@ct.container(frozen=False)
class Mutable:
    a: Any
    b: Any = None


@ct.container(children=["w"], keep=["name"])
class Layer:
    w: Any
    name: str = "layer"
    step: int = 0


Named = collections.namedtuple("Named", ["x", "y"])


class Recorder:
    """f for fmap that records its arguments."""

    def __init__(self, fn=lambda *args: args[0]):
        self.calls: list[Any] = []
        self.fn = fn

    def __call__(self, *args):
        self.calls.append(args[0] if len(args) == 1 else args)
        return self.fn(*args)


# --- structure and types are preserved ------------------------------------------------


@pytest.mark.parametrize(
    ("tree", "expected"),
    [
        ((1, 2), (2, 3)),
        ([1, [2]], [2, [3]]),
        ({"b": 1, "a": 2}, {"b": 2, "a": 3}),
        (OrderedDict(b=1, a=2), OrderedDict(b=2, a=3)),
        (Named(1, 2), Named(2, 3)),
        (deque([1, 2], maxlen=3), deque([2, 3], maxlen=3)),
        (Frozen(1, (2,)), Frozen(2, (3,))),
        (Mutable(1, [2]), Mutable(2, [3])),
    ],
    ids=["tuple", "list", "dict", "OrderedDict", "namedtuple", "deque", "frozen", "mutable"],
)
def test_fmap_keeps_structure_and_types(tree, expected):
    """fmap maps leaves and rebuilds every node as its own type."""
    out = ct.fmap(lambda v: v + 1, tree)
    assert out == expected
    assert type(out) is type(tree)


def test_fmap_keeps_dict_insertion_order():
    """A mapped dict has the original's insertion order."""
    out = ct.fmap(lambda v: v * 2, {"z": 1, "a": 2, "m": 3})
    assert list(out) == ["z", "a", "m"]


def test_fmap_keeps_defaultdict_factory():
    """A mapped defaultdict keeps its default_factory."""
    out = ct.fmap(lambda v: v * 2, defaultdict(list, a=1))
    assert type(out) is defaultdict
    assert out.default_factory is list
    assert out == {"a": 2}


def test_fmap_on_a_leaf_applies_f():
    """fmap on a leaf is f(leaf)."""
    assert ct.fmap(lambda v: v + 1, 3) == 4


def test_fmap_treats_arrays_as_leaves():
    """Numpy arrays are leaves: f receives the whole array."""
    out = ct.fmap(lambda a: a.sum(), {"w": np.ones((2, 3))})
    assert out == {"w": 6.0}


@pytest.mark.parametrize("tree", [None, (), [], {}, [None, ()], {"a": [], "b": None}])
def test_fmap_never_calls_f_on_none_or_empty_nodes(tree):
    """None and empty containers are nodes without children: f is not called on them."""
    f = Recorder()
    out = ct.fmap(f, tree)
    assert out == tree
    assert f.calls == []


def test_fmap_copies_kept_fields_and_resets_reset_fields():
    """Kept fields are copied, reset fields get their defaults."""
    assert ct.fmap(lambda v: v * 2, Layer(3, "fc", step=9)) == Layer(6, "fc", 0)


# --- exclude ---------------------------------------------------------------------------


def test_exclude_replaces_isleaf():
    """With exclude=, f runs only where exclude is true; other leaves are kept unchanged."""
    out = ct.fmap(str, [1, (2, 3), "s"], exclude=lambda v: isinstance(v, tuple))
    assert out == [1, "(2, 3)", "s"]


def test_exclude_stops_the_descent():
    """An excluded node is passed to f whole; its children are not visited."""
    f = Recorder(len)
    out = ct.fmap(f, {"a": [1, 2], "b": [3]}, exclude=lambda v: isinstance(v, list))
    assert out == {"a": 2, "b": 1}
    assert f.calls == [[1, 2], [3]]


def test_exclude_can_select_leaves_by_type():
    """exclude can pick some leaves only: the others stay as they are."""
    out = ct.fmap(lambda a: a * 0, [np.ones(2), 5], exclude=lambda v: isinstance(v, np.ndarray))
    assert out[1] == 5
    np.testing.assert_array_equal(out[0], np.zeros(2))


def test_exclude_with_several_trees():
    """Excluded nodes receive the aligned values of the other trees."""
    out = ct.fmap(
        lambda a, b: (a, b), {"k": [1, 2]}, {"k": [3]}, exclude=lambda v: isinstance(v, list)
    )
    assert out == {"k": ([1, 2], [3])}


# --- several trees -----------------------------------------------------------------------


def test_several_trees_give_aligned_leaves():
    """f receives the leaves of every tree at the same place."""
    out = ct.fmap(lambda a, b, c: a + b + c, {"x": [1, 2]}, {"x": [10, 20]}, {"x": [100, 200]})
    assert out == {"x": [111, 222]}


def test_first_tree_decides_output_types():
    """The first tree decides the node types of the result."""
    assert ct.fmap(lambda a, b: a + b, (1, 2), [10, 20]) == (11, 22)
    assert ct.fmap(lambda a, b: a + b, [1, 2], (10, 20)) == [11, 22]


def test_extra_keys_in_other_trees_are_ignored():
    """Keys of other trees that the first tree lacks are ignored."""
    assert ct.fmap(lambda a, b: a + b, {"a": 1}, {"a": 2, "z": 3}) == {"a": 3}


def test_trailing_elements_in_other_trees_are_ignored():
    """Elements of other sequences past the first tree's length are ignored."""
    assert ct.fmap(lambda a, b: a * b, [1, 2], [10, 20, 30]) == [10, 40]


def test_other_trees_are_read_by_key_not_order():
    """Dicts of other trees are read by key whatever their insertion order."""
    assert ct.fmap(lambda a, b: a - b, {"a": 10, "b": 20}, {"b": 2, "a": 1}) == {"a": 9, "b": 18}


@pytest.mark.parametrize("route", ["loop", "engine", "with_path"])
def test_a_repeat_in_the_first_tree_reuses_its_result_without_reading_the_others(
    route: str,
) -> None:
    """The cache is keyed by the first tree's objects (Functors.jl): at a repeat, the
    first occurrence's result is reused and the other trees are not read, for a leaf
    (an array) and for a node (a list); ``cache=False`` maps each position with its
    own values. Through the fast loops, the iterative engine (a custom exclude) and
    fmap_with_path."""
    w, xs = np.zeros(2), [0.0]
    first = {"a": w, "b": w, "c": xs, "d": xs}  # visited in sorted key order
    other = {"a": np.ones(2), "b": np.full(2, 5.0), "c": [1.0], "d": [100.0]}
    calls: list[Any] = []

    def step(p: Any, g: Any) -> Any:
        calls.append(g)
        return p - g

    def run(**kw: Any) -> Any:
        if route == "with_path":
            return ct.fmap_with_path(lambda _, p, g: step(p, g), first, other, **kw)
        if route == "engine":  # an exclude of its own: the iterative engine
            return ct.fmap(step, first, other, exclude=lambda v: ct.isleaf(v), **kw)  # noqa: PLW0108
        return ct.fmap(step, first, other, **kw)

    out = run()
    assert out["a"] is out["b"] and out["c"] is out["d"]
    assert (out["a"].tolist(), out["c"]) == ([-1.0, -1.0], [-1.0])
    assert len(calls) == 2  # one array, one float: "b" and "d" were not read
    calls.clear()
    out = run(cache=False)
    assert (out["a"].tolist(), out["b"].tolist(), out["c"], out["d"]) == (
        [-1.0, -1.0],
        [-5.0, -5.0],
        [-1.0],
        [-100.0],
    )
    assert len(calls) == 4


def test_other_tree_may_hold_a_node_where_the_first_has_a_leaf():
    """Where the first tree has a leaf, f receives whatever the other tree has there."""
    assert ct.fmap(lambda a, b: (a, b), [1], [[2, 3]]) == [(1, [2, 3])]


def test_missing_key_raises_with_its_path():
    """A key of the first tree that another tree lacks raises StructureError naming the path."""
    with pytest.raises(
        ct.StructureError, match=trees_differ("\"['a']\"", "the second has no key 'b' there")
    ) as info:
        ct.fmap(lambda a, b: a, {"a": {"b": 1}}, {"a": {"c": 1}})
    assert info.value.path == (ct.DictKey("a"),)


def test_missing_key_is_reported_with_exclude_too():
    """The iterative engine (a custom exclude) reports the same error."""
    with pytest.raises(
        ct.StructureError, match=trees_differ("\"['a']\"", "the second has no key 'b' there")
    ):
        ct.fmap(
            lambda a, b: a, {"a": {"b": 1}}, {"a": {"c": 1}}, exclude=lambda v: isinstance(v, int)
        )


def test_shorter_sequence_raises_with_its_path():
    """A shorter sequence in another tree is a mismatch at its path."""
    with pytest.raises(
        ct.StructureError,
        match=trees_differ(
            "'.a'",
            "the first tree has a sequence of length 2 there, the second has one of length 1",
        ),
    ) as info:
        ct.fmap(lambda a, b: a, Frozen([1, 2]), Frozen([1]))
    assert info.value.path == (ct.AttrKey("a"),)


def test_leaf_where_the_first_tree_has_a_node_raises():
    """A leaf in another tree where the first has a node is a mismatch."""
    with pytest.raises(
        ct.StructureError,
        match=trees_differ(
            "'[1]'",
            "the first tree has a sequence of length 2 there, the second has a leaf of type int",
        ),
    ):
        ct.fmap(lambda a, b: a, [1, (2, 3)], [1, 2])


def test_different_container_type_raises():
    """A different node type in another tree is a mismatch naming both."""
    with pytest.raises(
        ct.StructureError,
        match=trees_differ(
            "the root", "the first tree has a 'Frozen' there, the second has a tuple"
        ),
    ) as info:
        ct.fmap(lambda a, b: a, Frozen(1, 2), (1, 2))
    assert info.value.path == ()


def test_mismatch_in_the_third_tree_names_it():
    """The message says which tree does not fit."""
    with pytest.raises(
        ct.StructureError,
        match=trees_differ(
            "the root",
            "the first tree has a sequence of length 2 there, the third has one of length 1",
        ),
    ):
        ct.fmap(lambda a, b, c: a, [1, 2], [1, 2], [1])


def test_mismatch_error_does_not_call_f_again():
    """Locating a mismatch does not re-run f on the leaves before it."""
    f = Recorder(lambda a, b: a)
    with pytest.raises(ct.StructureError, match=re.escape("trees differ at '[1]'")):
        ct.fmap(f, [1, [2, 3]], [1, [2]])
    assert f.calls == [(1, 1)]


# --- the identity cache -----------------------------------------------------------------


# --- errors raised by f, and the engine's own ---------------------------------------------


@pytest.mark.parametrize("op", ["fmap", "fmapstructure", "fmap_with_path"])
@pytest.mark.parametrize(
    ("args", "got"),
    [((3, [1]), "int 3"), (([1], abs), "list [1]"), ((3, []), "int 3")],
    ids=["not-a-function", "swapped", "empty-tree"],
)
def test_f_that_is_not_callable_is_refused_up_front(op: str, args: Any, got: str) -> None:
    """A non-callable f (swapped arguments, say) is a TypeError naming the function and
    the order of its arguments, even on an empty tree where f would never be called."""
    with pytest.raises(
        TypeError,
        match=exact(
            f"{op}: f must be a function, got {got}. Pass the function first, then the "
            f"tree: {op}(f, tree, *more_trees)."
        ),
    ):
        getattr(ct, op)(*args)


def test_f_that_is_not_callable_is_refused_with_where() -> None:
    """fmap(..., where=) checks f before it hands over to the filtered map."""
    with pytest.raises(TypeError, match=r"^fmap: f must be a function, got int 3\. Pass"):
        ct.fmap(3, [1], where=int)


def test_same_named_classes_in_two_trees_are_told_apart(twin_classes: Any) -> None:
    """fmap over two trees shows the modules of two classes named alike."""
    one, two = twin_classes("pkg.one", "pkg.two")
    with pytest.raises(
        ct.StructureError,
        match=trees_differ(
            "the root",
            "the first tree has a 'pkg.one.Twin' there, the second has a 'pkg.two.Twin'",
        ),
    ):
        ct.fmap(lambda a, b: a, one(1), two(2))


def test_child_count_mismatch_of_a_registered_type_says_child() -> None:
    """Two trees whose register_node nodes differ in child count read "1 child"."""

    class Bag:
        def __init__(self, *items: Any) -> None:
            self.items = items

    ct.register_node(Bag, lambda b: (b.items, None), lambda aux, ch: Bag(*ch))
    with pytest.raises(
        ct.StructureError,
        match=trees_differ(
            "the root", "the first tree has a 'Bag' with 1 child there, the second has one with 2"
        ),
    ):
        ct.fmap(lambda a, b: a, Bag(1), Bag(1, 2))


def nested_mismatch(v: Any) -> Any:
    """f that calls fmap on two trees that do not fit: the inner fmap raises."""
    return ct.fmap(lambda a, b: a + b, {"a": v}, {"b": v})


@pytest.mark.parametrize(
    "operation",
    [ct.fmap, ct.fmapstructure, lambda f, t: ct.fmap(lambda a, b: f(a), t, t)],
    ids=["fmap", "fmapstructure", "fmap-two-trees"],
)
def test_structure_error_raised_by_f_propagates_unchanged(operation: Any) -> None:
    """A StructureError raised inside f (here by an fmap that f calls) reaches the caller
    as f raised it: not swallowed, not replaced by the outer call's re-run."""
    with pytest.raises(
        ct.StructureError, match=trees_differ("the root", "the second has no key 'a' there")
    ):
        operation(nested_mismatch, [1, [2, 3]])


@pytest.mark.parametrize(
    "error",
    [ct.ContainerDefinitionError("raised by f"), ct.StructureError("raised by f")],
    ids=["ContainerDefinitionError", "StructureError"],
)
@pytest.mark.parametrize("operation", [ct.fmap, ct.fmapstructure], ids=["fmap", "fmapstructure"])
def test_errors_raised_by_f_are_the_same_object_and_f_is_not_rerun(
    operation: Any, error: Exception
) -> None:
    """f's own exception object propagates, after f was called for the leaves before it
    only, once each: fmap does not re-run anything to 'locate' an error it did not raise."""
    calls: list[Any] = []

    def f(v: Any) -> Any:
        calls.append(v)
        if v == 3:
            raise error
        return v

    with pytest.raises(type(error), match=exact("raised by f")) as info:
        operation(f, [1, [2, 3], 4])
    assert info.value is error
    assert calls == [1, 2, 3]


def test_errors_raised_by_a_node_types_own_functions_propagate_unchanged() -> None:
    """A register_node flatten that raises StructureError is not taken for the engine's
    error either: it reaches the caller with its own message."""

    class Box:
        def __init__(self, v: Any) -> None:
            self.v = v

    def flatten(b: Box) -> Any:
        if b.v == "bad":
            raise ct.StructureError("Box.flatten refused")
        return (b.v,), None

    ct.register_node(Box, flatten, lambda aux, kids: Box(*kids))
    for operation in (ct.fmap, ct.fmapstructure):
        with pytest.raises(ct.StructureError, match=exact("Box.flatten refused")):
            operation(lambda v: v, [1, [Box("bad")]])


@pytest.mark.parametrize("operation", [ct.fmap, ct.fmapstructure], ids=["fmap", "fmapstructure"])
def test_engine_errors_found_by_the_fast_path_get_their_path(operation: Any) -> None:
    """The errors the engine itself finds (a cycle past the fast path's depth, an
    undeclared subclass) are still raised with their full path, and f is not called
    again to find them."""

    class Sub(Frozen):
        pass

    calls: list[Any] = []
    name = operation.__name__
    with pytest.raises(
        ct.ContainerDefinitionError, match=re.escape(f"{name}: at '[1][0]': 'Sub'")
    ):
        operation(calls.append, [1, [Sub(2)]])
    assert calls == [1]
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    calls.clear()
    with pytest.raises(
        ct.StructureError,
        match=re.escape(
            f"{name}: the tree has a reference cycle: the object at \"['b'][0]\" is the "
            "same object as its ancestor at \"['b']\""
        ),
    ):
        operation(calls.append, {"a": 1, "b": cyclic})
    assert calls == [1]


def test_mismatch_found_by_the_fast_path_gets_its_path() -> None:
    """Two-tree fmap's own mismatch is raised with its path."""
    with pytest.raises(
        ct.StructureError,
        match=trees_differ(
            "'[1]'", "the first tree has a sequence of length 1 there, the second has a dict"
        ),
    ):
        ct.fmap(lambda a, b: a, [1, [2]], [1, {"a": 2}])


def test_shared_list_is_mapped_once_and_stays_shared():
    """A list reachable twice is mapped once; both places hold the same result."""
    shared = [1, 2]
    f = Recorder(lambda v: v * 2)
    out = ct.fmap(f, {"x": shared, "y": shared})
    assert out == {"x": [2, 4], "y": [2, 4]}
    assert out["x"] is out["y"]
    assert f.calls == [1, 2]


def test_shared_array_leaf_is_mapped_once():
    """f runs once on an array that appears twice, and the result is shared."""
    arr = np.arange(3)
    f = Recorder(lambda a: a + 1)
    out = ct.fmap(f, [arr, arr])
    assert len(f.calls) == 1
    assert out[0] is out[1]


def test_shared_mutable_container_stays_shared():
    """A non-frozen container reachable twice is mapped once."""
    m = Mutable(1)
    f = Recorder(lambda v: v + 1)
    out = ct.fmap(f, [m, m])
    assert out[0] is out[1]
    assert f.calls == [1]


def test_immutable_values_are_not_cached():
    """Numbers and strings are values: f runs on every occurrence."""
    big = 10**6
    f = Recorder(lambda v: v)
    ct.fmap(f, [big, big, "s", "s"])
    assert f.calls == [big, big, "s", "s"]


_TRACED = """
import sys

def tracer(frame, event, arg):
    frame.f_locals  # what debuggers (debugpy, pydevd) and some profilers do
    return tracer

sys.settrace(tracer)
import containers as ct
import numpy as np
sys.settrace(None if sys.argv[1] == "import" else tracer)

@ct.container
class Pair:
    a: object
    b: object

calls = []

def f(v):
    calls.append(v)
    return [v]

l = [1.0]
tree = [l, l]
del l
out = ct.fmap(f, tree)
a = np.zeros(2)
pair = Pair(a, {"k": a})
del a
out2 = ct.fmap(f, [pair, (pair,)])
sys.settrace(None)
print(len(calls), out[0] is out[1], out2[0].a is out2[0].b["k"] is out2[1][0].a)
"""


@pytest.mark.parametrize("traced", ["import", "call"], ids=["import", "import-and-call"])
def test_sharing_holds_under_a_tracer_that_reads_locals(engine: str, traced: str) -> None:
    """A tracer reading frame.f_locals while containers is imported (and while fmap
    runs) changes reference counts; sharing must not depend on them: each shared
    object is mapped once. Run in a child interpreter, which imports containers anew."""
    import os
    import subprocess
    import sys

    if sys.version_info[:2] == (3, 12):  # PEP 709 inlined comprehensions, before PEP 667
        pytest.skip("CPython 3.12: such a tracer breaks comprehensions in the stdlib and attrs")
    env = {k: v for k, v in os.environ.items() if k != "CONTAINERS_PURE_PYTHON"}
    if engine == "python":
        env["CONTAINERS_PURE_PYTHON"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _TRACED, traced],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.split() == ["2", "True", "True"]


def test_frozen_container_is_not_cached_but_its_mutable_children_are():
    """A frozen container is rebuilt at each place; a mutable child inside it is shared."""
    fz = Frozen([1, 2])
    f = Recorder(lambda v: v * 10)
    out = ct.fmap(f, [fz, fz])
    assert out[0] is not out[1]
    assert out[0].a is out[1].a
    assert f.calls == [1, 2]


def test_tuple_is_not_cached_but_its_list_is():
    """A repeated tuple is rebuilt each time, while its shared list child stays shared."""
    t = ([1],)
    out = ct.fmap(lambda v: v, [t, t])
    assert out[0] is not out[1]
    assert out[0][0] is out[1][0]


def test_cache_false_maps_every_occurrence():
    """cache=False runs f at every place and loses sharing."""
    shared = [1]
    f = Recorder(lambda v: v)
    out = ct.fmap(f, [shared, shared], cache=False)
    assert f.calls == [1, 1]
    assert out[0] is not out[1]


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5])
def test_small_tuples_of_values_and_arrays(length: int) -> None:
    """Tuples of each length map their values (the unrolled branch) and share an array
    that also sits elsewhere in the tree or outside it (the loop, with the cache)."""
    calls: list[Any] = []

    def f(v: Any) -> Any:
        calls.append(v)
        return v * 2

    values = tuple(range(1, length + 1))
    assert ct.fmap(f, values) == tuple(2 * v for v in values)
    array = np.arange(3)
    mixed = (*values[:-1], array)
    out = ct.fmap(f, {"t": mixed, "again": (array,), "list": [array]})
    assert out["t"][: length - 1] == tuple(2 * v for v in values[:-1])
    assert out["t"][-1] is out["again"][0] is out["list"][0]
    assert sum(c is array for c in calls) == 1
    nested = (*values[:-1], (values[-1], [values[-1]]))
    assert ct.fmap(f, nested, cache=False)[-1] == (2 * values[-1], [2 * values[-1]])
    calls.clear()
    listed = ct.fmap(f, [values, mixed, nested, mixed])  # in a list: the loop's branches
    assert listed[0] == tuple(2 * v for v in values)
    assert listed[1][-1] is listed[3][-1]
    assert listed[1][-1].tolist() == [0, 2, 4]
    assert sum(c is array for c in calls) == 1
    assert listed[2] == ct.fmap(f, nested)


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5])
def test_two_tree_small_tuples(length: int) -> None:
    """Two trees of tuples of each length: values paired (the unrolled branch), a longer
    second tuple's extra elements ignored, a nested node or an array mapped in the loop,
    a list read by position, and a short second tuple reported with its path."""
    xs = tuple(range(length))
    ys = tuple(range(10, 10 + length))
    add = lambda a, b: a + b  # noqa: E731
    assert ct.fmap(add, [xs], [ys]) == [tuple(a + b for a, b in zip(xs, ys, strict=True))]
    assert ct.fmap(add, xs, (*ys, 99)) == tuple(a + b for a, b in zip(xs, ys, strict=True))
    array = np.arange(2)
    nested = ct.fmap(add, [(*xs[:-1], (array,))], [(*ys[:-1], (array,))])
    assert nested[0][: length - 1] == tuple(a + b for a, b in zip(xs, ys, strict=False))[:-1]
    assert nested[0][-1][0].tolist() == [0, 2]
    assert ct.fmap(add, [xs], [list(ys)]) == ct.fmap(add, [xs], [ys])  # read by position
    longer = ct.fmap(add, [xs, xs], [(*ys, 99), ys])  # extra elements ignored, in the loop
    assert longer == [tuple(a + b for a, b in zip(xs, ys, strict=True))] * 2
    what = (
        f"the first tree has a sequence of length {length} there, the second has one of "
        f"length {length - 1}"
    )
    with pytest.raises(ct.StructureError, match=trees_differ("'[0]'", what)):
        ct.fmap(add, [xs], [ys[:-1]])


def test_fmapstructure_keeps_small_tuples() -> None:
    """Tuples stay tuples in fmapstructure, on the unrolled branch and off it."""
    assert ct.fmapstructure(str, [(1, 2), (1, [2]), Frozen((3,))]) == [
        ("1", "2"),
        ("1", ["2"]),
        {"a": ("3",), "b": None},
    ]


@pytest.mark.parametrize(
    ("tree", "label", "source"),
    [
        ((1, 2), "tuple mapper", "f(_a0),  # child 0"),
        ([(1, 2)], "loop", "f(_a0),  # child 0"),
    ],
)
def test_generated_tuple_code_is_shown_in_tracebacks(
    tree: Any, label: str, source: str, engine: str
) -> None:
    """The generated tuple mapper and loop are registered in linecache, like a class's
    code: a root tuple goes to the tuple mapper, a tuple in a list is mapped in the loop,
    one element per line, marked with its index (the compiled loop, when it runs, maps
    both itself and shows no frame of its own)."""
    import linecache
    import traceback

    def boom(v: Any) -> Any:
        raise KeyError(v)

    with pytest.raises(KeyError) as info:
        ct.fmap(boom, tree)
    frames = traceback.extract_tb(info.value.__traceback__)
    generated = [fr for fr in frames if fr.filename.startswith(f"<containers generated {label} #")]
    if engine == "compiled":
        assert generated == []
        assert frames[-1].name == "boom"
        return
    assert generated, [fr.filename for fr in frames]
    line = linecache.getline(generated[-1].filename, generated[-1].lineno)
    assert line.strip() == source


def test_a_class_pair_mapper_is_shown_in_tracebacks() -> None:
    """Two-tree fmap maps a declared class with its generated pair mapper, registered in
    linecache with the class's code: f's error shows the line that called it."""
    import linecache
    import traceback

    def boom(a: Any, b: Any) -> Any:
        raise KeyError(a)

    with pytest.raises(KeyError) as info:
        ct.fmap(boom, [Layer(1)], [Layer(2)])
    frames = traceback.extract_tb(info.value.__traceback__)
    generated = [fr for fr in frames if fr.filename.startswith("<containers generated ")]
    assert generated, [fr.filename for fr in frames]
    assert generated[-1].name == "map_pair_node"
    assert ".Layer #" in generated[-1].filename
    line = linecache.getline(generated[-1].filename, generated[-1].lineno)
    assert line.strip() == "_c0 = f(_x0, _y0)  # child 0"


def test_results_are_freed_when_fmap_returns() -> None:
    """fmap keeps nothing alive after it returns, even with the cyclic GC off: the
    identity cache is emptied and flatten frees its records."""
    import gc
    import weakref

    array = np.arange(3)
    gc.disable()
    try:
        out = ct.fmap(lambda v: v + 1, {"a": [array, array], "b": (array,)})
        freed = weakref.ref(out["a"][0])
        del out
        assert freed() is None
        out = ct.fmapstructure(lambda v: v + 1, [Frozen(array)])
        freed = weakref.ref(out[0]["a"])
        del out
        assert freed() is None
        key = type("Key", (), {})()  # a dict key lives in the structure's records
        freed = weakref.ref(key)
        structure = ct.flatten([{key: (1, 2)}, [3]])[1]
        del key, structure
        assert freed() is None
    finally:
        gc.enable()


@pytest.mark.parametrize("walk", [ct.DefaultWalk(), ct.StructuralWalk()], ids=repr)
def test_tree_and_results_are_freed_when_fmap_with_a_walk_returns(walk: Any) -> None:
    """fmap(..., walk=...) frees the tree it was given and its results on return, with
    the cyclic GC off: the call's cache is emptied and execute's recursion closure does
    not outlive it (it used to refer to itself), on success and on error."""
    import gc
    import weakref

    gc.disable()
    try:
        array = np.arange(3)
        tree_freed = weakref.ref(array)
        out = ct.fmap(lambda v: v + 1, {"a": [array, array]}, walk=walk)
        assert out["a"][0] is out["a"][1]
        result_freed = weakref.ref(out["a"][0])
        del array, out
        assert tree_freed() is None
        assert result_freed() is None
        array = np.arange(3)
        tree_freed = weakref.ref(array)
        with pytest.raises(ct.StructureError, match="trees differ at \"\\['b'\\]\""):
            ct.fmap(lambda a, b: a, {"a": [array], "b": [1]}, {"a": [array], "b": 2}, walk=walk)
        del array
        assert tree_freed() is None
    finally:
        gc.enable()


def _held_by_the_tree_only(kind: str) -> Any:
    """A tree of the given mapping or deque kind whose arrays only the tree holds: one
    array twice in the node, one also in a list elsewhere, one once."""
    twice, elsewhere, once = np.arange(2), np.arange(3), np.arange(4)
    items = [("b", twice), ("a", twice), ("c", elsewhere), ("d", once)]  # "b" first: unsorted
    node: Any = {
        "dict": lambda: dict(items),
        "OrderedDict": lambda: OrderedDict(items),
        "defaultdict": lambda: defaultdict(list, items),
        "deque": lambda: deque(v for _, v in items),
    }[kind]()
    return [node, [elsewhere]]


@pytest.mark.parametrize("kind", ["dict", "OrderedDict", "defaultdict", "deque"])
def test_sharing_through_dict_and_deque_values_with_the_tree_as_only_holder(kind: str) -> None:
    """A value held twice by a dict (or deque), or once more elsewhere in the tree, is
    mapped once and stays shared, though the tree is its only holder."""
    f = Recorder(lambda v: v * 10)
    node, rest = ct.fmap(f, _held_by_the_tree_only(kind))
    values = list(node.values()) if kind != "deque" else list(node)
    twice_a, twice_b, elsewhere, once = values
    assert twice_a is twice_b
    assert elsewhere is rest[0]
    assert [v.tolist() for v in (twice_a, elsewhere, once)] == [
        [0, 10],
        [0, 10, 20],
        [0, 10, 20, 30],
    ]
    assert [len(v) for v in f.calls] == [2, 3, 4]  # each array mapped once
    if kind != "deque":
        assert list(node) == ["b", "a", "c", "d"]


@pytest.mark.parametrize("mapper", [ct.fmap, ct.fmapstructure])
def test_dict_values_are_mapped_in_flatten_order_into_insertion_order(mapper: Any) -> None:
    """f sees a dict's values in sorted key order (flatten's, with the fallback for keys
    that do not compare); the result keeps the dict's own key order."""
    tree = {"b": "str-b", 2: "int-2", (1,): "tuple", "a": "str-a", 1: "int-1"}
    f = Recorder(str.upper)
    out = mapper(f, {"outer": tree, "sorted": {"x": "x", "y": "y"}})
    assert f.calls == ["int-1", "int-2", "str-a", "str-b", "tuple", "x", "y"]
    assert f.calls[:5] == ct.leaves(tree)
    assert list(out["outer"].items()) == [(k, v.upper()) for k, v in tree.items()]
    assert list(out) == ["outer", "sorted"]


def test_f_that_resizes_a_dict_being_mapped_gets_pythons_error() -> None:
    """Children are read as they are mapped (the docstring says so): a dict that loses
    a key to f while it is mapped raises as a comprehension over it would; a
    defaultdict never gets a removed key back from its default_factory."""
    tree: dict[str, int] = {"a": 1, "b": 2, "c": 3}
    unsorted: dict[str, int] = {"c": 3, "a": 1, "b": 2}
    counts: defaultdict[str, int] = defaultdict(int, {"b": 1, "a": 2, "c": 3})

    def removing_c_from(d: dict[str, int]) -> Callable[[int], int]:
        def f(v: int) -> int:
            d.pop("c", None)
            return v

        return f

    with pytest.raises(RuntimeError, match="dictionary changed size during iteration"):
        ct.fmap(removing_c_from(tree), tree)
    with pytest.raises(KeyError, match="'c'"):
        ct.fmap(removing_c_from(unsorted), unsorted)
    out = ct.fmap(removing_c_from(counts), counts)
    assert out == {"b": 1, "a": 2, "c": 3}  # the values as they were
    assert counts == {"b": 1, "a": 2}


def test_nodes_held_twice_by_a_dict_stay_shared() -> None:
    """A list, a dict and a frozen container each held twice by one dict and by nothing
    else: each mutable one is mapped once and stays shared, and the frozen one's array
    (it is rebuilt, not cached: SPEC) too; the dicts keep their key order."""
    f = Recorder(lambda v: v * 10)
    arrays = [np.arange(n) for n in (2, 3, 4, 5)]
    items = [arrays.pop() for _ in range(4)]  # the list empties: the tree alone holds them
    lst, inner, frozen = [items[0]], {"z": items[1], "y": items[2]}, Frozen(items[3])
    del items
    tree = {"b": lst, "a": lst, "f": inner, "e": inner, "d": frozen, "c": frozen}
    del lst, inner, frozen
    out = ct.fmap(f, tree)
    assert out["a"] is out["b"]
    assert out["e"] is out["f"]
    assert out["c"].a is out["d"].a
    assert sorted(len(v) for v in f.calls) == [2, 3, 4, 5]  # each array mapped once
    assert list(out) == ["b", "a", "f", "e", "d", "c"]
    assert list(out["e"]) == ["z", "y"]
    assert out["b"][0].tolist() == [0, 10, 20, 30, 40]


# --- fmap's closures are reused from call to call (_engine._fast._Mode) ---------------------------


def test_fmap_called_inside_f_gets_its_own_closures() -> None:
    """f may call fmap (one tree or several) while the outer call is running."""

    def inner(v: Any) -> Any:
        return ct.fmap(lambda a: a * 10, [v, (v,), Frozen(v)])

    def inner2(a: Any, b: Any) -> Any:
        return ct.fmap(lambda x, y: x - y, [a, (a,)], [b, (b,)])

    tree = [Frozen(1, [2]), (3, 4), {"k": Layer(5)}]
    out = ct.fmap(inner, tree)
    assert out == ct.fmap(lambda v: [v * 10, (v * 10,), Frozen(v * 10)], tree)
    assert out[0] == Frozen([10, (10,), Frozen(10)], [[20, (20,), Frozen(20)]])
    out = ct.fmap(inner2, tree, ct.fmap(lambda v: v * 2, tree))
    assert out == ct.fmap(lambda v: [-v, (-v,)], tree)
    assert ct.fmap(lambda v: -v, tree) == [Frozen(-1, [-2]), (-3, -4), {"k": Layer(-5)}]


def test_a_call_after_an_error_in_f_sees_only_its_own_f() -> None:
    def boom(*vs: Any) -> Any:
        raise ValueError(f"no {vs[0]}")

    tree = [Layer(Frozen(1, (2, [3]))), {"a": 4}]
    noted = "no 1\nfmap: raised while mapping the value at '[0].w.a'"
    with pytest.raises(ValueError, match=exact(noted)):
        ct.fmap(boom, tree)
    with pytest.raises(ValueError, match=exact(noted)):
        ct.fmap(boom, tree, tree)
    assert ct.fmap(str, tree) == [Layer(Frozen("1", ("2", ["3"]))), {"a": "4"}]
    assert ct.fmap(lambda a, b: a + b, tree, tree) == [Layer(Frozen(2, (4, [6]))), {"a": 8}]
    assert ct.fmapstructure(str, tree) == [{"w": {"a": "1", "b": ("2", ["3"])}}, {"a": "4"}]


def test_fmap_on_several_threads_at_once() -> None:
    """Each call takes its own closures: threads switching every few bytecodes never see
    another call's f."""
    import sys
    import threading

    trees = [[Layer(Frozen(i, [i, (i, i)])) for _ in range(200)] for i in range(4)]
    failures: list[Any] = []

    def work(i: int) -> None:
        for _ in range(20):
            out = ct.fmap(lambda v, i=i: v * 100 + i, trees[i])
            pair = ct.fmap(lambda a, b, i=i: a + b + i, trees[i], trees[i])
            j = i * 100 + i
            if (
                out != [Layer(Frozen(j, [j, (j, j)]))] * 200
                or pair != [Layer(Frozen(3 * i, [3 * i, (3 * i, 3 * i)]))] * 200
            ):
                failures.append(i)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []


def test_the_pool_of_idle_closures_is_bounded() -> None:
    """64 calls running at once (each nested in the previous one's f) leave at most
    MAX_IDLE idle closure sets per kind of call, not one per call."""
    from containers._engine import _fast

    def nest(v: Any, depth: int = 0) -> Any:
        if depth == 64:
            return v
        if depth % 2:  # alternate the one-tree and two-tree modes
            return ct.fmap(lambda a, b: nest(a, depth + 1), [v], [v])[0]
        return ct.fmap(lambda a: nest(a, depth + 1), [v])[0]

    assert ct.fmap(nest, [1]) == [1]
    assert ct.fmapstructure(nest, [1]) == [1]
    pooled = {key: len(modes) for key, modes in _fast._idle.items()}
    assert pooled
    assert all(1 <= n <= _fast.MAX_IDLE for n in pooled.values()), pooled


def test_pooled_closures_do_not_keep_superseded_classes_alive() -> None:
    """A class redefined under the same name (a notebook cell run twice) is freed once
    its instances are: fmap's pooled closures drop the mappers they hold for it when a
    class is registered."""
    import gc
    import weakref

    def define() -> type:
        @ct.container  # frozen: fmap maps it with its generated mapper
        class Redefined:
            a: Any

        return Redefined

    first = define()
    assert ct.fmap(lambda v: v + 1, [first(1)]) == [first(2)]
    assert ct.fmapstructure(lambda v: v, [first(1)]) == [{"a": 1}]
    assert ct.fmap(lambda a, b: a + b, [first(1)], [first(2)]) == [first(3)]
    freed = weakref.ref(first)
    del first
    second = define()
    gc.collect()
    assert freed() is None
    assert ct.fmap(lambda v: v + 1, [second(1)]) == [second(2)]


def test_a_leaf_type_that_f_registers_is_a_node_for_the_rest_of_the_call() -> None:
    """fmap reads a type as a leaf until f registers it, then as a node, in the compiled
    loop (which records leaf types it meets) as in the Python loop."""

    class Late:
        def __init__(self, v: Any) -> None:
            self.v = v

    seen: list[Any] = []

    def f(x: Any) -> Any:
        seen.append(x)
        if len(seen) == 2:
            ct.register_node(Late, lambda x: ((x.v,), None), lambda aux, ch: Late(*ch))
        return x

    items = [Late(1), Late(2), Late(3), [Late(4)]]
    out = ct.fmap(f, items)
    assert seen == [items[0], items[1], 3, 4]
    assert out[:2] == items[:2]
    assert [type(out[2]), out[2].v, type(out[3][0]), out[3][0].v] == [Late, 3, Late, 4]


def test_idle_closures_hold_nothing_of_the_last_call() -> None:
    """After fmap returns, its reused closures keep neither the tree nor f (gc off)."""
    import gc
    import weakref

    gc.disable()
    try:
        for args in ((), (np.arange(2),)):
            root = np.arange(2)
            f = lambda *vs: vs[0] + 1  # noqa: E731 - a function object to watch
            ct.fmap(f, root, *args)
            ct.fmap(f, [Layer(root), (root,)], *([[Layer(a), (a,)] for a in args]))
            gone = weakref.ref(root), weakref.ref(f)
            del root, f
            assert [ref() for ref in gone] == [None, None]
    finally:
        gc.enable()


def test_prune_replaces_repeats_of_cached_objects():
    """prune=v replaces every repeat of a cached object after its first occurrence."""
    shared = [1]
    assert ct.fmap(lambda v: v, [shared, shared, shared], prune="P") == [[1], "P", "P"]


def test_prune_applies_to_leaves_and_accepts_none():
    """prune=None is a real value: a repeated array becomes None."""
    arr = np.ones(2)
    out = ct.fmap(lambda a: a * 2, {"a": arr, "b": arr}, prune=None)
    assert out["b"] is None
    np.testing.assert_array_equal(out["a"], 2 * np.ones(2))


def test_prune_leaves_immutable_repeats_alone():
    """Repeated values (numbers, strings, tuples) are not pruned."""
    assert ct.fmap(lambda v: v, [7, 7, (1,), (1,)], prune=0) == [7, 7, (1,), (1,)]


def test_prune_with_exclude():
    """prune works in the iterative engine (custom exclude) too."""
    arr = np.ones(2)
    out = ct.fmap(lambda a: 1, [arr, arr], exclude=lambda v: isinstance(v, np.ndarray), prune=-1)
    assert out == [1, -1]


# --- walk= -------------------------------------------------------------------------------------


def test_default_walk_agrees_with_fmap():
    """fmap with walk=DefaultWalk() gives the same result as without."""
    tree = {"a": [1, (2, 3)], "b": Frozen(4, Named(5, 6)), "c": None}
    assert ct.fmap(lambda v: v * 2, tree, walk=ct.DefaultWalk()) == ct.fmap(lambda v: v * 2, tree)


def test_structural_walk_gives_plain_dicts():
    """walk=StructuralWalk() turns containers into dicts."""
    out = ct.fmap(lambda v: v + 1, Frozen(1, (2, 3)), walk=ct.StructuralWalk())
    assert out == {"a": 2, "b": (3, 4)}


def test_custom_walk_is_called_on_nodes():
    """A custom walk gets every node (leaves are handled by the exclude walk around it)."""

    class Counting(ct.Walk):
        def __init__(self):
            self.seen = []

        def __call__(self, recurse, x, *ys):
            self.seen.append(x)
            return ct.DefaultWalk()(recurse, x, *ys)

    walk = Counting()
    assert ct.fmap(lambda v: v + 1, [1, [2]], walk=walk) == [2, [3]]
    assert walk.seen == [[1, [2]], [2]]


def test_a_stock_walk_subclass_with_its_own_call_can_call_the_stock_one():
    """A subclass of a stock walk whose __call__ calls super().__call__ maps as the
    stock walk does (its own __call__ is its step; the stock one runs the engine)."""

    class Logged(ct.StructuralWalk):
        def __init__(self):
            self.seen = []

        def __call__(self, recurse, x, *ys):
            self.seen.append(type(x).__name__)
            return super().__call__(recurse, x, *ys)

    walk = Logged()
    assert ct.fmap(lambda v: v + 1, [1, (2, [3])], walk=walk) == [2, (3, [4])]
    assert walk.seen == ["list", "tuple", "list"]


def test_walk_keeps_the_cache():
    """fmap wraps a walk in the cache walk: shared objects map once and stay shared."""
    shared = [1]
    f = Recorder(lambda v: v + 1)
    out = ct.fmap(f, {"a": shared, "b": shared}, walk=ct.DefaultWalk())
    assert out["a"] is out["b"]
    assert f.calls == [1]


def test_walk_with_cache_false_and_prune():
    """cache=False and prune= apply to walks too."""
    shared = [1]
    out = ct.fmap(lambda v: v, {"a": shared, "b": shared}, walk=ct.DefaultWalk(), cache=False)
    assert out["a"] is not out["b"]
    pruned = ct.fmap(lambda v: v, {"a": shared, "b": shared}, walk=ct.DefaultWalk(), prune=0)
    assert pruned == {"a": [1], "b": 0}


def test_walk_with_several_trees():
    """A walk reads the other trees like fmap does."""
    assert ct.fmap(lambda a, b: a + b, [1, 2], [10, 20, 30], walk=ct.DefaultWalk()) == [11, 22]


def test_walk_mismatch_names_the_path():
    """A mismatch found by a walk names the path where the trees differ."""
    with pytest.raises(ct.StructureError, match=re.escape("trees differ at \"['x']\"")) as info:
        ct.fmap(lambda a, b: a, {"x": {"a": 1}}, {"x": {"b": 2}}, walk=ct.DefaultWalk())
    assert info.value.path == (ct.DictKey("x"),)


# --- fmapstructure ---------------------------------------------------------------------------


def test_fmapstructure_turns_containers_into_dicts():
    """Containers become dicts of their children; kept fields are dropped."""
    assert ct.fmapstructure(lambda v: v * 2, [Layer(1.0, "fc")]) == [{"w": 2.0}]


def test_fmapstructure_maps_shared_arrays_in_frozen_containers_once():
    """A frozen container's generated mapper builds its dict with the cache on: an array
    in two containers is mapped once, both dicts hold the result, prune replaces the
    repeat; a nested container becomes a nested dict."""
    array = np.arange(3.0)
    tree = [Frozen(array, Layer(array, "fc")), Frozen(array)]
    calls = Recorder(lambda a: a * 2)
    out = ct.fmapstructure(calls, tree)
    assert len(calls.calls) == 1 and calls.calls[0] is array
    assert out[0]["a"] is out[0]["b"]["w"] is out[1]["a"]
    np.testing.assert_array_equal(out[1]["a"], [0.0, 2.0, 4.0])
    assert out[1]["b"] is None
    pruned = ct.fmapstructure(lambda a: a, tree, prune="seen")
    assert pruned[0]["b"] == {"w": "seen"} and pruned[1] == {"a": "seen", "b": None}


def test_fmapstructure_turns_namedtuples_into_dicts():
    """Namedtuples become dicts keyed by field name."""
    assert ct.fmapstructure(lambda v: v + 1, Named(1, 2)) == {"x": 2, "y": 3}


def test_fmapstructure_keeps_builtin_collections():
    """Tuples, lists and dicts stay tuples, lists and dicts."""
    out = ct.fmapstructure(lambda v: -v, ((1,), [2], {"k": 3}, None))
    assert out == ((-1,), [-2], {"k": -3}, None)
    assert type(out[0]) is tuple and type(out[1]) is list


def test_fmapstructure_with_exclude_and_several_trees():
    """fmapstructure takes exclude= (non-excluded leaves stay) and several trees like fmap."""
    out = ct.fmapstructure(
        lambda a, b: (a, b), Frozen([1], 2), Frozen([3], 4), exclude=lambda v: isinstance(v, list)
    )
    assert out == {"a": ([1], [3]), "b": 2}


def test_fmapstructure_mismatch_names_itself_and_the_path():
    """fmapstructure mismatches name the operation and the path."""
    with pytest.raises(
        ct.StructureError,
        match=trees_differ(
            "\"['x']\"",
            "the first tree has a sequence of length 2 there, the second has one of length 1",
            op="fmapstructure",
        ),
    ):
        ct.fmapstructure(lambda a, b: a, {"x": [1, 2]}, {"x": [1]})


def test_fmapstructure_keeps_sharing_and_prunes():
    """Sharing and prune work in fmapstructure as in fmap."""
    shared = [1]
    out = ct.fmapstructure(lambda v: v, {"a": shared, "b": shared})
    assert out["a"] is out["b"]
    assert ct.fmapstructure(lambda v: v, {"a": shared, "b": shared}, prune=None) == {
        "a": [1],
        "b": None,
    }


# --- fcollect -----------------------------------------------------------------------------


def test_fcollect_is_pre_order():
    """fcollect lists every node and leaf, parents before children."""
    tree = {"a": [1, 2], "b": 3}
    assert ct.fcollect(tree) == [tree, [1, 2], 1, 2, 3]


def test_fcollect_includes_containers_and_none():
    """Containers and None appear in fcollect's output."""
    tree = Frozen([1], None)
    assert ct.fcollect(tree) == [tree, [1], 1, None]


def test_fcollect_deduplicates_mutable_objects():
    """A mutable object appears once; repeated values appear every time."""
    shared = [1]
    tree = [shared, shared, (5, 5)]
    out = ct.fcollect(tree)
    assert out == [tree, [1], 1, (5, 5), 5, 5]
    assert out[1] is shared


def test_fcollect_keeps_sharing_rules_across_node_kinds():
    """Shared arrays, lists and mutable containers appear once wherever they recur;
    tuples, frozen containers and numbers appear at every place they occur."""
    array = np.zeros(2)
    shared_list = [array]
    pair = (shared_list, 7)
    box = Mutable(array)
    tree = [Frozen(array, array), pair, pair, box, {"k": box}, Named(shared_list, 7)]
    expected = [
        tree,
        tree[0],
        array,
        pair,
        shared_list,
        7,
        pair,
        7,
        box,
        None,  # Mutable.b: None is a node
        tree[4],
        tree[5],
        7,
    ]
    out = ct.fcollect(tree)
    assert [id(v) for v in out] == [id(v) for v in expected]
    with_exclude = ct.fcollect(tree, exclude=lambda v: False)  # the iterative engine
    assert [id(v) for v in with_exclude] == [id(v) for v in expected]


def test_fcollect_of_a_leaf_is_the_leaf():
    """A leaf alone is collected as itself."""
    array = np.ones(3)
    assert ct.fcollect(5) == [5]
    out = ct.fcollect(array)
    assert len(out) == 1 and out[0] is array


def test_fcollect_exclude_drops_the_subtree():
    """An excluded value and its subtree are left out."""
    assert ct.fcollect({"a": [1, 2], "b": 3}, exclude=lambda v: isinstance(v, list)) == [
        {"a": [1, 2], "b": 3},
        3,
    ]


# --- fmap_with_path ---------------------------------------------------------------------------


def test_fmap_with_path_passes_paths():
    """f receives the key path of each leaf."""
    out = ct.fmap_with_path(lambda p, v: ct.keystr(p), {"a": [1, Named(2, 3)], "b": Frozen(4)})
    assert out == {"a": ["['a'][0]", Named("['a'][1].x", "['a'][1].y")], "b": Frozen("['b'].a")}


def test_fmap_with_path_on_a_leaf_passes_the_empty_path():
    """The root's path is ()."""
    assert ct.fmap_with_path(lambda p, v: (p, v), 5) == ((), 5)


def test_fmap_with_path_several_trees():
    """f(path, leaf, *leaves_of_other_trees)."""
    out = ct.fmap_with_path(lambda p, a, b: (ct.keystr(p), a + b), [1, 2], [10, 20])
    assert out == [("[0]", 11), ("[1]", 22)]


def test_fmap_with_path_exclude_gets_the_path():
    """exclude(path, value) decides where f is called."""
    out = ct.fmap_with_path(
        lambda p, v: ct.keystr(p), {"x": [1, (2, 3)]}, exclude=lambda p, v: isinstance(v, tuple)
    )
    assert out == {"x": [1, "['x'][1]"]}


def test_fmap_with_path_mismatch_has_the_path():
    """A mismatch in fmap_with_path names the path."""
    with pytest.raises(ct.StructureError, match=re.escape("trees differ at \"['x']\"")) as info:
        ct.fmap_with_path(lambda p, a, b: a, {"x": [1, 2]}, {"x": [1]})
    assert info.value.path == (ct.DictKey("x"),)


def test_fmap_with_path_errors_name_fmap_with_path():
    """fmap_with_path's errors start with its own name."""
    with pytest.raises(ct.StructureError, match=r"^fmap_with_path: trees differ"):
        ct.fmap_with_path(lambda p, a, b: a, {"x": [1, 2]}, {"x": [1]})


# --- walk objects and execute -------------------------------------------------------------


def test_execute_default_walk_rebuilds_the_tree():
    """execute(DefaultWalk(), x) rebuilds x unchanged."""
    tree = [1, (2, {"a": 3})]
    assert ct.execute(ct.DefaultWalk(), tree) == tree


def test_execute_exclude_walk_maps_leaves():
    """ExcludeWalk calls fn where exclude is true and defers to its walk elsewhere."""
    walk = ct.ExcludeWalk(ct.DefaultWalk(), lambda v: v * 2, ct.isleaf)
    assert ct.execute(walk, [1, (2, 3)]) == [2, (4, 6)]


def test_execute_with_several_trees():
    """execute passes the other trees to the walk."""
    walk = ct.ExcludeWalk(ct.DefaultWalk(), lambda a, b: a * b, ct.isleaf)
    assert ct.execute(walk, [1, 2], [3, 4]) == [3, 8]


def test_structural_walk_with_exclude():
    """ExcludeWalk over StructuralWalk is fmapstructure."""
    walk = ct.ExcludeWalk(ct.StructuralWalk(), str, ct.isleaf)
    assert ct.execute(walk, (1, [2], Named(3, 4))) == ("1", ["2"], {"x": "3", "y": "4"})


def test_cached_walk_shares_results_and_prunes():
    """CachedWalk maps a shared object once; with prune= repeats are replaced."""
    shared = [1.0]
    walk = ct.CachedWalk(ct.ExcludeWalk(ct.DefaultWalk(), lambda v: v + 1, ct.isleaf))
    out = ct.execute(walk, {"a": shared, "b": shared})
    assert out == {"a": [2.0], "b": [2.0]}
    assert out["a"] is out["b"]
    assert walk.cache.results[id(shared)] is out["a"]
    assert shared in walk.cache.keep
    pruned = ct.CachedWalk(ct.ExcludeWalk(ct.DefaultWalk(), lambda v: v, ct.isleaf), prune="P")
    assert ct.execute(pruned, [shared, shared]) == [[1.0], "P"]


def test_collect_walk_gathers_pre_order():
    """CollectWalk appends every value in pre-order, skipping excluded subtrees."""
    walk = ct.CollectWalk(exclude=lambda v: isinstance(v, tuple))
    ct.execute(walk, [1, (2, 3), [4]])
    assert walk.items == [[1, (2, 3), [4]], 1, [4], 4]


def test_walk_base_class_must_be_subclassed():
    """Calling the Walk base class says what to define."""
    with pytest.raises(NotImplementedError, match=exact("Walk must define __call__")):
        ct.Walk()(lambda v: v, 1)


def test_walk_reprs():
    """Walks have readable reprs."""
    assert repr(ct.DefaultWalk()) == "DefaultWalk()"
    assert (
        repr(ct.CachedWalk(ct.StructuralWalk())) == "CachedWalk(StructuralWalk(), prune=<unset>)"
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: ct.fmap(str, [1], exclude=3),
            "fmap: exclude must be a function, got int 3. Pass exclude=a predicate value -> bool",
        ),
        (
            lambda: ct.fmap(str, [], exclude="leaf"),
            "fmap: exclude must be a function, got str 'leaf'",
        ),
        (
            lambda: ct.fmapstructure(str, [1], exclude=[]),
            r"fmapstructure: exclude must be a function, got list \[\]",
        ),
        (
            lambda: ct.fmap_with_path(str, [1], exclude=True),
            r"fmap_with_path: exclude must be a function, got bool True. Pass exclude=a "
            r"predicate \(path, value\) -> bool",
        ),
        (
            lambda: ct.fcollect([1], exclude=3),
            "fcollect: exclude must be a function, got int 3",
        ),
        (
            lambda: ct.fmap(str, [1], walk=3),
            r"fmap: walk must be a function, got int 3. Pass walk=a walk object, called as "
            r"walk\(recurse, x, \*ys\)",
        ),
    ],
)
def test_options_that_are_not_functions_are_named(call, message):
    """A non-callable exclude= or walk= is a TypeError naming the operation and the
    option, raised before the traversal (it was Python's "'int' object is not callable"
    from deep inside, and nothing at all on an empty tree)."""
    with pytest.raises(TypeError, match=message):
        call()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: ct.execute([1], ct.DefaultWalk()),
            r"execute: walk must be a function, got list \[1\]. Pass the walk first, then "
            r"the tree: execute\(walk, x, \*ys\)",
        ),
        (
            lambda: ct.ExcludeWalk(ct.DefaultWalk(), 3, ct.isleaf),
            r"ExcludeWalk: fn must be a function, got int 3. Pass ExcludeWalk\(walk, fn, "
            r"exclude\)",
        ),
        (
            lambda: ct.ExcludeWalk(ct.DefaultWalk(), str, "leaf"),
            "ExcludeWalk: exclude must be a function, got str 'leaf'",
        ),
        (
            lambda: ct.CachedWalk(None),
            r"CachedWalk: walk must be a function, got NoneType None. Pass CachedWalk\(walk\)",
        ),
    ],
)
def test_walks_given_a_non_function_say_which_argument(call, message):
    """execute and the walk constructors name a non-callable argument when called (it was
    Python's "'int' object is not callable" at the first node, or later)."""
    with pytest.raises(TypeError, match=message):
        call()


@pytest.mark.parametrize("op", [ct.fmap, ct.fmapstructure, ct.fmap_with_path])
def test_cache_must_be_a_bool_and_prune_needs_the_cache(op):
    """cache= takes True or False (a string such as "no" would read as true), and prune=
    with cache=False, which finds no repeats to replace, is refused instead of ignored."""
    f = (lambda p, v: v) if op is ct.fmap_with_path else (lambda v: v)
    name = op.__name__
    with pytest.raises(TypeError, match=rf"^{name}: cache= must be True or False, got 'no'\.$"):
        op(f, [1], cache="no")
    with pytest.raises(
        TypeError,
        match=rf"^{name}: prune= replaces the repeats the identity cache finds, and with "
        r"cache=False it finds none\. Keep cache=True, or drop prune=\.$",
    ):
        op(f, [1], cache=False, prune=None)
    shared = [1.0]
    assert op(f, [shared, shared], cache=1, prune=None)[1] is None
    assert op(f, [shared, shared], cache=0) == [[1.0], [1.0]]
