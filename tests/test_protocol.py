"""The Container protocol and the one-level operations: traverse, reduce, functor,
children, isleaf, and the recursive `containers.composite` (SPEC.md sections 3 and 4)."""

from __future__ import annotations

import collections
import dataclasses
import re
from collections import OrderedDict, deque
from typing import Any

import numpy as np
import pytest

import containers as ct
from containers import composite


def exact(message: str) -> str:
    """A `match=` pattern for exactly this message."""
    return f"^{re.escape(message)}$"


@ct.container(children=["w", "b"], keep=["name"])
class Linear:
    w: Any
    b: Any
    name: str = "linear"
    calls: int = 0


class Pair:
    """A hand-written Container: two children and one metadata value."""

    def __init__(self, a, b, tag="t"):
        self.a, self.b, self.tag = a, b, tag

    def __container_traverse__(self, acc, fun, /):
        a, acc = fun(self.a, acc)
        b, acc = fun(self.b, acc)
        return Pair(a, b, self.tag), acc

    def __container_reduce__(self, acc, fun, /):
        return fun(self.b, fun(self.a, acc))

    def __container_serialize__(self):
        return "test_protocol.Pair", [("a", self.a), ("b", self.b)], {"tag": self.tag}

    @classmethod
    def __container_deserialize__(cls, children, metadata, /):
        kids = dict(children)
        return cls(kids["a"], kids["b"], metadata["tag"])

    def __eq__(self, other):
        return type(other) is Pair and (self.a, self.b, self.tag) == (other.a, other.b, other.tag)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self):
        return f"Pair({self.a!r}, {self.b!r}, {self.tag!r})"


Named = collections.namedtuple("Named", ["x", "y"])


# --- the Container protocol ---------------------------------------------------------------


def test_declared_container_is_a_container_instance():
    """isinstance(x, ct.Container) holds for a @container instance."""
    assert isinstance(Linear(1, 2), ct.Container)


def test_hand_written_class_is_a_container_instance():
    """A class implementing the four methods by hand is a Container."""
    assert isinstance(Pair(1, 2), ct.Container)


@pytest.mark.parametrize("value", [1, "s", None, [1], (1,), {"a": 1}, np.zeros(2), Named(1, 2)])
def test_builtins_are_not_container_instances(value):
    """Builtin nodes and leaves do not implement the protocol."""
    assert not isinstance(value, ct.Container)


def test_generated_traverse_maps_children_and_threads_acc():
    """__container_traverse__ maps the children in order, threading acc; kept fields stay."""
    out, acc = Linear(1, 2, "fc", 7).__container_traverse__([], lambda c, a: (c * 10, [*a, c]))
    assert out == Linear(10, 20, "fc", 0)
    assert acc == [1, 2]


def test_generated_reduce_folds_children_in_order():
    """__container_reduce__ folds the children only, in visit order."""
    assert Linear([1], 2, "fc").__container_reduce__([], lambda c, a: [*a, c]) == [[1], 2]


def test_generated_serialize_gives_name_pairs_and_kept_fields():
    """__container_serialize__ gives (name, [(key, child)], {kept field: value})."""
    name, pairs, meta = Linear(1, 2, "fc", 7).__container_serialize__()
    assert name == ct.spec(Linear).name
    assert pairs == [("w", 1), ("b", 2)]
    assert meta == {"name": "fc"}


def test_generated_deserialize_rebuilds_from_serialize():
    """__container_deserialize__ inverts __container_serialize__ (reset fields get defaults)."""
    _, pairs, meta = Linear(1, 2, "fc", 7).__container_serialize__()
    assert Linear.__container_deserialize__(pairs, meta) == Linear(1, 2, "fc", 0)


def test_generated_deserialize_reports_a_missing_child():
    """A missing child in the data raises SchemaError naming Class.field."""
    with pytest.raises(
        ct.SchemaError,
        match=exact(
            "Linear.__container_deserialize__: the data has no value for child Linear.b. "
            "Pass every child as (key, child) pairs and every kept field in metadata, as "
            "__container_serialize__ gives them."
        ),
    ):
        Linear.__container_deserialize__([("w", 1)], {"name": "fc"})


def test_generated_deserialize_reports_a_missing_kept_field():
    """A missing kept field in the metadata raises SchemaError naming Class.field."""
    with pytest.raises(
        ct.SchemaError, match=re.escape("the data has no value for kept field Linear.name.")
    ):
        Linear.__container_deserialize__([("w", 1), ("b", 2)], {})


def test_hand_written_class_is_a_node_in_fmap():
    """fmap looks inside a hand-written Container and rebuilds it with its own method."""
    assert ct.fmap(lambda v: v * 10, Pair(1, [2, 3], "x")) == Pair(10, [20, 30], "x")


def test_hand_written_class_is_a_node_in_flatten():
    """flatten/unflatten go through the hand-written protocol methods."""
    leaves, s = ct.flatten(Pair(1, [2, 3], "x"))
    assert leaves == [1, 2, 3]
    assert s.unflatten([7, 8, 9]) == Pair(7, [8, 9], "x")
    assert repr(s) == "Structure(Pair(a=*, b=[*, *]))"


def test_hand_written_class_is_a_node_in_leaves_and_paths():
    """Paths of a hand-written Container come from its serialize keys."""
    assert ct.leaves([Pair(1, 2), 3]) == [1, 2, 3]
    assert [ct.keystr(p) for p, _ in ct.leaves_with_path(Pair(1, {"k": 2}))] == [".a", ".b['k']"]


def test_hand_written_class_metadata_is_structure():
    """Two hand-written Containers with different metadata have different structures."""
    assert ct.structure(Pair(1, 2, "x")) == ct.structure(Pair(5, 6, "x"))
    assert ct.structure(Pair(1, 2, "x")) != ct.structure(Pair(1, 2, "y"))


def test_hand_written_class_in_fmapstructure_becomes_a_dict():
    """fmapstructure turns a hand-written Container into a dict keyed by its keys."""
    assert ct.fmapstructure(lambda v: v + 1, Pair(1, (2,))) == {"a": 2, "b": (3,)}


def test_hand_written_class_in_multi_tree_fmap():
    """fmap reads a second hand-written Container child by child."""
    assert ct.fmap(lambda a, b: a + b, Pair(1, 2), Pair(10, 20)) == Pair(11, 22)


# --- traverse and reduce: one level ----------------------------------------------------------


def test_traverse_is_one_level():
    """traverse calls fun on the immediate children only; nested nodes are passed whole."""
    seen = []
    out, acc = ct.traverse((1, [2, 3]), 0, lambda c, n: (seen.append(c) or c, n + 1))
    assert seen == [1, [2, 3]]
    assert (out, acc) == ((1, [2, 3]), 2)


def test_traverse_rebuilds_with_new_children():
    """traverse rebuilds the node from fun's new children."""
    assert ct.traverse([1, 2], 0, lambda c, n: (c * 2, n + c)) == ([2, 4], 3)


def test_traverse_on_a_leaf_calls_fun_on_it():
    """On a leaf, traverse is fun(x, acc) (Nx)."""
    assert ct.traverse(5, [], lambda v, seen: (v + 1, [*seen, v])) == (6, [5])


def test_traverse_dict_visits_sorted_and_rebuilds_in_insertion_order():
    """Dict children are visited in sorted key order; the rebuilt dict keeps insertion order."""
    out, order = ct.traverse({"b": 2, "a": 1}, [], lambda v, seen: (v * 10, [*seen, v]))
    assert order == [1, 2]
    assert list(out.items()) == [("b", 20), ("a", 10)]


@pytest.mark.parametrize("empty", [None, (), [], {}])
def test_traverse_never_calls_fun_on_empty_nodes(empty):
    """None and empty containers have no children: fun is not called."""
    out, acc = ct.traverse(empty, 0, lambda c, n: (c, n + 1))
    assert out == empty and type(out) is type(empty)
    assert acc == 0


def test_traverse_uses_the_container_method():
    """traverse on a declared container keeps kept fields and resets reset fields."""
    out, acc = ct.traverse(Linear(1, 2, "fc", 9), 0, lambda c, n: (-c, n + 1))
    assert (out, acc) == (Linear(-1, -2, "fc", 0), 2)


def test_traverse_uses_a_hand_written_method():
    """traverse on a hand-written Container calls its own __container_traverse__."""
    assert ct.traverse(Pair(1, 2, "z"), 0, lambda c, n: (c + 1, n + c)) == (Pair(2, 3, "z"), 3)


def test_traverse_rebuilds_a_namedtuple_as_its_class():
    """Namedtuples are rebuilt as their own class."""
    assert ct.traverse(Named(1, 2), 0, lambda c, n: (c * 3, n + 1)) == (Named(3, 6), 2)


def test_reduce_is_one_level():
    """reduce folds the immediate children only."""
    assert ct.reduce((1, [2, 3], 4), [], lambda c, acc: [*acc, c]) == [1, [2, 3], 4]


def test_reduce_on_a_leaf_calls_fun_on_it():
    """On a leaf, reduce is fun(x, acc) (Nx)."""
    assert ct.reduce(5, 10, lambda v, acc: acc + v) == 15


def test_reduce_on_containers_and_dicts():
    """reduce visits container children in visit order and dict values by sorted key."""
    assert ct.reduce(Linear(1, 2, "fc"), [], lambda c, acc: [*acc, c]) == [1, 2]
    assert ct.reduce({"b": 1, "a": 2}, [], lambda c, acc: [*acc, c]) == [2, 1]
    assert ct.reduce(Pair(1, 2), [], lambda c, acc: [*acc, c]) == [1, 2]
    assert ct.reduce(None, 0, lambda c, acc: acc + 1) == 0


@pytest.mark.parametrize(
    ("op", "fn"),
    [
        ("traverse", ct.traverse),
        ("reduce", ct.reduce),
        ("composite.traverse", composite.traverse),
        ("composite.reduce", composite.reduce),
    ],
)
@pytest.mark.parametrize("tree", [[1], []])
def test_fun_that_is_not_callable_is_refused_up_front(op, fn, tree):
    """A non-callable fun (arguments in fmap's order, say) is a TypeError naming the
    function and its argument order, even on a node whose fun would never be called."""
    with pytest.raises(
        TypeError,
        match=exact(
            f"{op}: fun must be a function, got int 0. Pass the tree, the accumulator, "
            f"then the function: {op}(x, acc, fun)."
        ),
    ):
        fn(tree, lambda v, acc: (v, acc), 0)


# --- functor, children, isleaf ------------------------------------------------------------


def test_functor_of_a_container_gives_a_dict_of_children():
    """functor(container) gives its children by field name and a rebuild function."""
    kids, rebuild = ct.functor(Linear(1, 2, "fc", 5))
    assert kids == {"w": 1, "b": 2}
    assert rebuild({"w": 10, "b": 20}) == Linear(10, 20, "fc", 0)
    assert rebuild([30, 40]) == Linear(30, 40, "fc", 0)


def test_functor_of_sequences_gives_a_tuple():
    """functor on tuples, lists and deques gives a tuple of children; rebuild keeps the type."""
    kids, rebuild = ct.functor([1, 2])
    assert kids == (1, 2)
    assert rebuild((3, 4)) == [3, 4]
    kids, rebuild = ct.functor((1, 2))
    assert (kids, rebuild([5, 6])) == ((1, 2), (5, 6))
    kids, rebuild = ct.functor(deque([1], maxlen=4))
    assert kids == (1,)
    assert rebuild([2]) == deque([2], maxlen=4)


def test_functor_of_a_mapping_gives_a_dict():
    """functor on a dict gives a dict; rebuild takes a mapping or values in sorted-key order."""
    kids, rebuild = ct.functor({"b": 1, "a": 2})
    assert kids == {"b": 1, "a": 2}
    assert list(rebuild({"a": 5, "b": 6}).items()) == [("b", 6), ("a", 5)]
    assert rebuild([5, 6]) == {"a": 5, "b": 6}
    kids, rebuild = ct.functor(OrderedDict(b=1, a=2))
    assert kids == {"b": 1, "a": 2}
    assert rebuild([7, 8]) == OrderedDict(b=7, a=8)


def test_functor_of_a_leaf_gives_no_children():
    """functor(leaf) gives () and a rebuild returning the leaf itself."""
    arr = np.zeros(2)
    kids, rebuild = ct.functor(arr)
    assert kids == ()
    assert rebuild(()) is arr


def test_functor_of_none_gives_no_children():
    """functor(None) gives () and rebuilds None."""
    kids, rebuild = ct.functor(None)
    assert kids == ()
    assert rebuild(()) is None


def test_functor_rebuild_with_a_missing_child():
    """rebuild with a mapping that lacks a child names it."""
    _, rebuild = ct.functor(Linear(1, 2))
    with pytest.raises(
        ValueError,
        match=exact(
            "functor rebuild of a 'Linear': the new children lack 'b'. "
            "Give every child: ['w', 'b']."
        ),
    ):
        rebuild({"w": 1})


def test_functor_rebuild_with_the_wrong_count():
    """rebuild with a sequence of the wrong length says how many children it needs."""
    _, rebuild = ct.functor([1, 2, 3])
    with pytest.raises(
        ValueError,
        match=exact(
            "functor rebuild of a list: expected 3 children, got 2. Pass them in child "
            "order, or as tuple."
        ),
    ):
        rebuild([1, 2])


def test_functor_rebuild_of_one_child_says_child():
    """rebuild of a node with one child says "1 child", not "1 children"."""
    _, rebuild = ct.functor([1])
    with pytest.raises(
        ValueError,
        match=exact(
            "functor rebuild of a list: expected 1 child, got 2. Pass them in child order, "
            "or as tuple."
        ),
    ):
        rebuild([1, 2])


def test_functor_of_a_hand_written_container_gives_a_dict():
    """functor(hand-written Container) gives its children keyed like serialize's pairs."""
    assert ct.functor(Pair(1, 2))[0] == {"a": 1, "b": 2}


def test_functor_of_a_namedtuple_gives_a_tuple():
    """functor(namedtuple) gives its children as a tuple (it is a tuple), and rebuilds it."""
    children, rebuild = ct.functor(Named(1, 2))
    assert children == (1, 2)
    assert rebuild((3, 4)) == Named(3, 4)
    assert type(rebuild((3, 4))) is Named


def test_children_is_the_first_half_of_functor():
    """children(x) is functor(x)[0]."""
    assert ct.children(Linear(1, 2)) == {"w": 1, "b": 2}
    assert ct.children({"b": 1, "a": 2}) == {"b": 1, "a": 2}
    assert ct.children([1, 2]) == (1, 2)
    assert ct.children(3.0) == ()


@pytest.mark.parametrize(
    "value", [1, 1.5, "s", b"b", np.zeros(3), np.float32(1), object(), {1, 2}, frozenset()]
)
def test_isleaf_true_for_values_that_are_not_nodes(value):
    """Numbers, strings, arrays, sets and unregistered objects are leaves."""
    assert ct.isleaf(value) is True


@pytest.mark.parametrize(
    "value",
    [None, (), [], {}, (1,), [1], {"a": 1}, Named(1, 2), Linear(1, 2), Pair(1, 2), deque()],
)
def test_isleaf_false_for_nodes(value):
    """None, empty containers, namedtuples, containers and protocol classes are nodes."""
    assert ct.isleaf(value) is False


def test_isleaf_for_an_empty_declared_container():
    """A declared container with no children is a node."""

    @ct.container(children=[])
    @dataclasses.dataclass(frozen=True)
    class NoChildren:
        label: str = "x"

    assert ct.isleaf(NoChildren()) is False
    assert ct.fmap(lambda v: 1 / 0, NoChildren("y")) == NoChildren("y")


# --- composite: recursive, fun on leaves only -------------------------------------------


def test_composite_traverse_maps_leaves_threading_acc():
    """composite.traverse maps every leaf in flatten order and rebuilds the tree."""
    tree = {"a": 1, "b": (2, [3]), "c": None}
    out, acc = composite.traverse(tree, [], lambda v, seen: (v * 10, [*seen, v]))
    assert out == {"a": 10, "b": (20, [30]), "c": None}
    assert acc == [1, 2, 3]


def test_composite_traverse_keeps_kept_fields_and_resets_reset_fields():
    """composite.traverse never visits kept or reset fields."""
    out, acc = composite.traverse([Linear(1, 2, "fc", 3)], 0, lambda v, n: (v + 1, n + 1))
    assert (out, acc) == ([Linear(2, 3, "fc", 0)], 2)


def test_composite_reduce_folds_leaves():
    """composite.reduce folds every leaf in flatten order."""
    assert composite.reduce([1, [2, Pair(3, 4)]], [], lambda v, acc: [*acc, v]) == [1, 2, 3, 4]


def test_composite_count_counts_leaves():
    """composite.count counts leaves; None and empty containers have none."""
    assert composite.count({"a": 1, "b": (2, None), "c": [], "d": Linear(np.zeros(3), 4)}) == 4
    assert composite.count(5) == 1
    assert composite.count(None) == 0


def test_composite_flatten_list_concatenates_leaves_and_tail():
    """composite.flatten_list gives the leaves of each tree in order, then tail."""
    assert composite.flatten_list([(1, 2), {"k": 3}], tail=[4]) == [1, 2, 3, 4]
    assert composite.flatten_list([5, [6]]) == [5, 6]
    assert composite.flatten_list([], tail=(7,)) == [7]


def test_children_of_a_childless_container_is_an_empty_dict():
    """children() of a container declared with children=[] is {}, not (): a container's
    children are always a dict keyed by field name (SPEC section 4)."""

    @ct.container(children=[])
    class Config:
        lr: float = 0.1

    kids, rebuild = ct.functor(Config(0.5))
    assert ct.children(Config(0.5)) == {}
    assert type(kids) is dict
    assert rebuild({}) == Config(0.5)


@pytest.mark.parametrize(
    ("op", "fn", "tree", "where"),
    [
        ("traverse", ct.traverse, [1, 2], ""),
        ("traverse", ct.traverse, Linear(1, 2), ""),
        ("traverse", ct.traverse, Pair(1, 2), ""),
        ("composite.traverse", composite.traverse, {"a": [1, 2]}, " at \"['a'][0]\""),
    ],
)
def test_fun_that_returns_no_pair_is_named(op, fn, tree, where):
    """traverse's fun returns (new_child, acc); a fun that returns one value (reduce's
    kind of fun) is a TypeError saying so, not "cannot unpack non-iterable int object"."""
    with pytest.raises(
        TypeError,
        match=exact(
            f"{op}: fun must return a pair (new_child, acc), got 1{where}. A fun that "
            f"returns only the accumulator belongs to {op.replace('traverse', 'reduce')}."
        ),
    ):
        fn(tree, 0, lambda v, acc: acc + 1)


@pytest.mark.parametrize(
    ("value", "new", "label", "extra", "raws"),
    [
        (Linear(1, 2), {"w": 1, "b": 2, "name": "fc2"}, "a 'Linear'", "'name'", "['w', 'b']"),
        ({"a": 1}, {"a": 5, "b": 6}, "a dict", "'b'", "['a']"),
    ],
)
def test_functor_rebuild_with_an_extra_child(value, new, label, extra, raws):
    """rebuild with a mapping holding a key that is not a child names it: a kept field
    given there (`name`) or a new dict key was silently dropped."""
    _, rebuild = ct.functor(value)
    with pytest.raises(
        ValueError,
        match=exact(
            f"functor rebuild of {label}: the new children hold {extra}, which is not one "
            f"of its children {raws}. A rebuild takes exactly the children functor gave; "
            f"kept and reset fields come from the original object."
        ),
    ):
        rebuild(new)
