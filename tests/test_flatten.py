"""flatten, unflatten and Structure; broadcast, transpose, diff, assert_same_structure
(SPEC.md sections 1 and 5)."""

from __future__ import annotations

import collections
import pickle
import re
from collections import OrderedDict, defaultdict, deque
from typing import Any

import numpy as np
import pytest

import containers as ct


def exact(message: str) -> str:
    """A `match=` pattern for exactly this message."""
    return f"^{re.escape(message)}$"


@ct.container(children=["w", "b"], keep=["name"])
class Layer:
    w: Any
    b: Any = None
    name: str = "layer"
    step: int = 0


Named = collections.namedtuple("Named", ["x", "y"])


# --- builtin nodes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tree", "leaves"),
    [
        ((1, 2), [1, 2]),
        ([1, [2, (3,)]], [1, 2, 3]),
        ({"b": 1, "a": 2}, [2, 1]),
        (OrderedDict(b=1, a=2), [1, 2]),
        (defaultdict(list, b=1, a=2), [2, 1]),
        (deque([1, 2], maxlen=5), [1, 2]),
        (Named(1, 2), [1, 2]),
        (Layer(1, 2, "fc"), [1, 2]),
        (None, []),
        ((), []),
        ([], []),
        ({}, []),
        ([None, (), [], {}], []),
    ],
    ids=[
        "tuple",
        "list",
        "dict",
        "OrderedDict",
        "defaultdict",
        "deque",
        "namedtuple",
        "container",
        "None",
        "empty-tuple",
        "empty-list",
        "empty-dict",
        "empties",
    ],
)
def test_flatten_unflatten_round_trip(tree, leaves):
    """flatten gives the leaves in order; unflatten rebuilds an equal tree of the same types."""
    got, s = ct.flatten(tree)
    assert got == leaves
    out = ct.unflatten(s, got)
    assert out == tree
    assert type(out) is type(tree)


@pytest.mark.parametrize(
    "tree",
    [
        [(1, 2), (3, 4), (5, 6)],
        ((1, 2), (3, 4)),
        {"a": [[1, 2, 3], [4, 5, 6]], "b": [(7,), (8,)]},
        [(), ()],
        [[], []],
        [(1, 2), (3,)],
        [(1, 2), [3, 4]],
        [Named(1, 2), Named(3, 4)],
        Layer([(1, 2), (3, 4)], ((5,), (6,)), "fc"),
        [[(1, 2), (3, 4)], [(5, 6)]],
    ],
    ids=[
        "list-of-pairs",
        "tuple-of-pairs",
        "dict-of-lists",
        "empty-tuples",
        "empty-lists",
        "different-lengths",
        "tuple-and-list",
        "namedtuples",
        "container",
        "nested",
    ],
)
def test_nodes_of_equal_leaf_sequences_round_trip(tree):
    """unflatten cuts runs of equal all-leaf tuples or lists in one step; every shape
    of such a run (and the near misses) comes back equal, with the same types and fresh
    lists."""
    leaves, s = ct.flatten(tree)
    out = ct.unflatten(s, [leaf * 10 for leaf in leaves])
    assert out == ct.fmap(lambda v: v * 10, tree)
    assert ct.structure(out) == s
    again = ct.unflatten(s, leaves)
    assert again == tree
    for node in ct.fcollect(again):
        if type(node) is list:
            assert all(node is not other for other in ct.fcollect(tree))


def test_leaves_are_flatten_order():
    """leaves(x) is flatten(x)[0]."""
    tree = {"b": [1, 2], "a": 0, "c": None}
    assert ct.leaves(tree) == ct.flatten(tree)[0] == [0, 1, 2]


def test_structure_is_the_second_half_of_flatten():
    """structure(x) equals flatten(x)[1], and Structure.unflatten is unflatten."""
    tree = [1, {"a": (2, 3)}]
    s = ct.structure(tree)
    assert s == ct.flatten(tree)[1]
    assert s.unflatten([4, 5, 6]) == ct.unflatten(s, [4, 5, 6]) == [4, {"a": (5, 6)}]


def test_unflatten_accepts_any_iterable():
    """unflatten takes an iterable of leaves, not only a list."""
    s = ct.structure([0, (0, 0)])
    assert ct.unflatten(s, iter([1, 2, 3])) == [1, (2, 3)]


def test_a_leaf_flattens_to_itself():
    """A leaf's structure has one leaf and no node records."""
    arr = np.zeros(3)
    got, s = ct.flatten(arr)
    assert got[0] is arr
    assert (s.num_leaves, s.num_nodes) == (1, 1)
    assert s.unflatten(["x"]) == "x"


def test_dict_is_visited_in_sorted_order_and_rebuilt_in_insertion_order():
    """Dict children are visited by sorted key; rebuilt dicts keep the insertion order."""
    leaves, s = ct.flatten({"z": 1, "a": 2, "m": 3})
    assert leaves == [2, 3, 1]
    assert list(s.unflatten(["A", "M", "Z"]).items()) == [("z", "Z"), ("a", "A"), ("m", "M")]


def test_unsortable_keys_sort_by_type_name_then_repr():
    """Keys that cannot be compared sort by (type name, repr); never an error."""
    tree = {"b": "str-b", 2: "int-2", (1,): "tuple", "a": "str-a", 1: "int-1"}
    assert ct.leaves(tree) == ["int-1", "int-2", "str-a", "str-b", "tuple"]
    assert ct.unflatten(ct.structure(tree), [1, 2, 3, 4, 5]) == {
        "b": 4,
        2: 2,
        (1,): 5,
        "a": 3,
        1: 1,
    }


def test_dict_structure_ignores_insertion_order():
    """Two dicts with the same keys in different orders have equal structures."""
    a, b = ct.structure({"a": 1, "b": 2}), ct.structure({"b": 3, "a": 4})
    assert a == b
    assert hash(a) == hash(b)


def test_ordered_dict_order_is_structure():
    """An OrderedDict is visited in insertion order, and its order is part of its structure."""
    assert ct.leaves(OrderedDict(b=1, a=2)) == [1, 2]
    assert ct.structure(OrderedDict(a=1, b=2)) != ct.structure(OrderedDict(b=1, a=2))
    assert ct.structure(OrderedDict(a=1)) != ct.structure({"a": 1})


def test_defaultdict_factory_is_structure():
    """A defaultdict is rebuilt with its factory, which is part of its structure."""
    s = ct.structure(defaultdict(list, a=1))
    out = s.unflatten([5])
    assert type(out) is defaultdict and out.default_factory is list
    assert s != ct.structure(defaultdict(int, a=1))
    assert s != ct.structure({"a": 1})


def test_deque_maxlen_is_structure():
    """A deque is rebuilt with its maxlen, which is part of its structure."""
    s = ct.structure(deque([1], maxlen=2))
    assert s.unflatten([9]).maxlen == 2
    assert s != ct.structure(deque([1], maxlen=3))


def test_list_and_tuple_are_different_nodes():
    """A list and a tuple with the same leaves have different structures."""
    assert ct.structure([1, 2]) != ct.structure((1, 2))


def test_namedtuple_is_rebuilt_as_its_class():
    """A namedtuple is its own node kind, rebuilt as its class."""
    s = ct.structure(Named(1, 2))
    assert type(s.unflatten([3, 4])) is Named
    assert s != ct.structure((1, 2))


def test_none_is_a_node_without_children():
    """None is a node: it has no leaves and is rebuilt as None."""
    leaves, s = ct.flatten([None, 1])
    assert leaves == [1]
    assert s.unflatten([2]) == [None, 2]
    assert (s.num_leaves, s.num_nodes) == (1, 3)


def test_none_is_leaf_makes_none_a_leaf():
    """none_is_leaf=True makes None a leaf in flatten and leaves."""
    leaves, s = ct.flatten([None, 1], none_is_leaf=True)
    assert leaves == [None, 1]
    assert s.unflatten([3, 4]) == [3, 4]
    assert ct.leaves({"a": None}, none_is_leaf=True) == [None]


def test_is_leaf_is_or_ed_with_the_natural_test():
    """is_leaf makes more leaves; it cannot make a leaf a node."""
    leaves, s = ct.flatten([1, (2, 3)], is_leaf=lambda v: isinstance(v, tuple))
    assert leaves == [1, (2, 3)]
    assert s.unflatten(["a", "b"]) == ["a", "b"]
    assert ct.leaves([1, 2], is_leaf=lambda v: False) == [1, 2]


def test_is_leaf_on_the_root():
    """is_leaf is also asked about the root."""
    tree = [1, 2]
    leaves, s = ct.flatten(tree, is_leaf=lambda v: isinstance(v, list))
    assert leaves[0] is tree
    assert s.num_leaves == 1


def test_flatten_does_not_deduplicate():
    """A shared object appears once per place."""
    shared = [1]
    assert ct.leaves([shared, shared]) == [1, 1]
    arr = np.ones(1)
    leaves = ct.leaves({"a": arr, "b": arr})
    assert leaves[0] is arr and leaves[1] is arr


def test_container_leaves_are_its_children():
    """A container's leaves are its children; kept and reset fields are not leaves."""
    assert ct.leaves(Layer([1, 2], 3, "fc", 7)) == [1, 2, 3]


def test_kept_fields_are_structure_and_reset_fields_are_not():
    """Kept values are compared by ==; reset fields are ignored."""
    s = ct.structure(Layer(1, 2, "fc", 1))
    assert s == ct.structure(Layer(3, 4, "fc", 99))
    assert s != ct.structure(Layer(1, 2, "other", 1))
    assert s.unflatten([5, 6]) == Layer(5, 6, "fc", 0)


def test_kept_arrays_compare_by_content():
    """Kept numpy arrays are compared by value, shape and dtype."""

    @ct.container(children=["w"])
    class Masked:
        w: Any
        mask: Any

    s = ct.structure(Masked(1, np.arange(3)))
    assert s == ct.structure(Masked(2, np.arange(3)))
    assert s != ct.structure(Masked(1, np.arange(4)))
    assert s != ct.structure(Masked(1, np.arange(3.0)))
    assert isinstance(hash(s), int)


def test_unhashable_kept_values_still_hash():
    """A structure with an unhashable kept value is hashable, consistent with ==."""

    @ct.container(children=["w"])
    class Tagged:
        w: Any
        tags: list

    a, b = ct.structure(Tagged(1, ["x"])), ct.structure(Tagged(2, ["x"]))
    assert a == b
    assert hash(a) == hash(b)


# --- Structure ----------------------------------------------------------------------------


def test_structure_counts():
    """num_leaves counts leaves; num_nodes counts nodes and leaves (as JAX does)."""
    s = ct.structure({"a": 1, "b": [2, 3]})
    assert (s.num_leaves, s.num_nodes) == (3, 5)
    s = ct.structure([None, (), Layer(1, 2)])
    assert (s.num_leaves, s.num_nodes) == (2, 6)


def test_structure_children():
    """children() gives the structures of the root's children; a leaf's is the leaf structure."""
    s = ct.structure({"a": [1, (2, 3)], "b": None, "c": 4})
    kids = s.children()
    assert kids == [ct.structure([0, (0, 0)]), ct.structure(None), ct.structure(0)]
    assert [k.num_leaves for k in kids] == [3, 0, 1]
    assert ct.structure(5).children() == []


def test_structure_paths():
    """paths() gives the key path of every leaf in flatten order."""
    s = ct.structure({"a": [1, (2, 3)], "b": Layer(4, 5)})
    assert [ct.keystr(p) for p in s.paths()] == [
        "['a'][0]",
        "['a'][1][0]",
        "['a'][1][1]",
        "['b'].w",
        "['b'].b",
    ]
    assert ct.structure(5).paths() == [()]
    assert ct.structure([]).paths() == []


def test_flatten_up_to_cuts_at_the_structure_leaves():
    """flatten_up_to returns the subtrees at the structure's leaves (prefix semantics)."""
    s = ct.structure((0, {"k": 0}))
    assert s.flatten_up_to(([1, 2], {"k": (3, 4)})) == [[1, 2], (3, 4)]
    assert ct.structure(0).flatten_up_to({"any": "tree"}) == [{"any": "tree"}]


def test_flatten_up_to_reports_a_different_node_type():
    """A different node type at a node of the structure is named with its path."""
    s = ct.structure({"a": [1, (2, 3)]})
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "flatten_up_to: the tree does not match the structure at \"['a'][1]\": "
            "expected a tuple there, found a list."
        ),
    ) as info:
        s.flatten_up_to({"a": [1, [2, 3]]})
    assert info.value.path == (ct.DictKey("a"), ct.IndexKey(1))


def test_flatten_up_to_reports_a_cycle_the_structure_reaches_into():
    """A node of the tree met again inside itself at a node position of the structure is
    the cycle error, with both paths; a cycle below a leaf position is just a subtree."""
    loop: list[Any] = [0]
    loop[0] = loop
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "flatten_up_to: the tree has a reference cycle: the object at '[0]' is the same "
            "object as its ancestor at the root. Trees must be acyclic; break the cycle, or "
            "make the object a leaf (exclude=/is_leaf=, where the operation takes them)."
        ),
    ):
        ct.structure([[1]]).flatten_up_to(loop)
    assert ct.structure([1]).flatten_up_to(loop)[0] is loop


def test_flatten_up_to_reports_a_leaf_where_a_node_is_expected():
    """A leaf where the structure has a node is named."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "flatten_up_to: the tree does not match the structure at '[1]': "
            "expected a tuple there, found a leaf of type int."
        ),
    ):
        ct.structure([0, (0,)]).flatten_up_to([1, 2])


def test_flatten_up_to_reports_different_keys_and_lengths():
    """Different dict keys and sequence lengths are described."""
    s = ct.structure({"a": 0, "b": 0})
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "flatten_up_to: the tree does not match the structure at the root: a dict with "
            "different keys: only in the expected one: 'b'; only in the other: 'c'."
        ),
    ):
        s.flatten_up_to({"a": 1, "c": 2})
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "flatten_up_to: the tree does not match the structure at '.w': a tuple with "
            "2 children in one and 3 in the other."
        ),
    ):
        ct.structure(Layer((0, 0))).flatten_up_to(Layer((1, 2, 3)))


def test_flatten_up_to_reports_a_different_kept_field():
    """A different kept value is named as Class.field."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "flatten_up_to: the tree does not match the structure at the root: kept field "
            "Layer.name is 'a' in one and 'b' in the other."
        ),
    ):
        ct.structure(Layer(0, 0, "a")).flatten_up_to(Layer(1, 2, "b"))


def test_structure_equality_and_hash():
    """Equal structures are == and hash alike; Structure is not equal to other types."""
    a = ct.structure([1, {"k": (2, None)}])
    b = ct.structure(["x", {"k": ("y", None)}])
    assert a == b and hash(a) == hash(b)
    assert a != ct.structure([1, {"k": (2, 3)}])
    assert a != "not a structure"
    assert len({a, b}) == 1


def test_structure_is_immutable():
    """Structure's public attributes cannot be set."""
    s = ct.structure([1])
    with pytest.raises(AttributeError, match="num_leaves"):
        s.num_leaves = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "tree",
    [
        {"a": [1, (2, 3)], "b": None},
        OrderedDict(b=1, a=2),
        defaultdict(list, a=1),
        deque([1], maxlen=3),
        [Named(1, 2), Layer(np.zeros(2), 1, "fc")],
        5,
    ],
    ids=["builtins", "OrderedDict", "defaultdict", "deque", "containers", "leaf"],
)
def test_structure_pickles(tree):
    """A Structure survives pickling, equal and with the same hash."""
    s = ct.structure(tree)
    back = pickle.loads(pickle.dumps(s))
    assert back == s
    assert hash(back) == hash(s)
    leaves = ct.leaves(tree)
    out = back.unflatten(leaves)
    assert type(out) is type(tree)


@pytest.mark.parametrize(
    ("tree", "text"),
    [
        ({"a": 1, "b": [2, 3]}, "Structure({'a': *, 'b': [*, *]})"),
        ((1,), "Structure((*,))"),
        ((1, None), "Structure((*, None))"),
        (Named(1, 2), "Structure(Named(x=*, y=*))"),
        (Layer(1, 2, "fc"), "Structure(Layer(w=*, b=*, name='fc'))"),
        (5, "Structure(*)"),
    ],
)
def test_structure_repr(tree, text):
    """Structure's repr looks like the tree with * for leaves and kept values shown."""
    assert repr(ct.structure(tree)) == text


def test_unflatten_wrong_number_of_leaves():
    """unflatten with the wrong number of leaves says how many it needs."""
    s = ct.structure([1, (2, 3)])
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "unflatten: the structure has 3 leaves but 2 were given. Pass exactly one value "
            "per leaf, in the order flatten returned them."
        ),
    ):
        ct.unflatten(s, [1, 2])


@pytest.mark.parametrize(
    ("tree", "given", "text"),
    [([1], [1, 2], "1 leaf but 2 were given"), ([1, 2], [1], "2 leaves but 1 was given")],
)
def test_unflatten_wrong_number_of_leaves_in_the_right_number(tree, given, text):
    """The count of leaves and of values given read right when one of them is 1."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            f"unflatten: the structure has {text}. Pass exactly one value per leaf, in the "
            f"order flatten returned them."
        ),
    ):
        ct.unflatten(ct.structure(tree), given)


@pytest.mark.parametrize(
    ("leaves", "shown", "hint"),
    [
        (5, "int 5", ""),
        (None, "NoneType None", ""),
        (
            {"a": 1, "b": 2},
            "dict {'a': 1, 'b': 2}",
            " To rebuild from a dict of path: leaf, use ct.merge(structure, part).",
        ),
    ],
)
def test_unflatten_leaves_that_are_not_a_sequence(leaves, shown, hint):
    """Leaves that are not a sequence are named: a non-iterable raised Python's "'int'
    object is not iterable", and a dict was rebuilt from its keys, losing its values."""
    with pytest.raises(
        TypeError,
        match=exact(
            f"unflatten: leaves must be a sequence of values, one per leaf in flatten "
            f"order (a list, as flatten returns them), got {shown}.{hint}"
        ),
    ):
        ct.unflatten(ct.structure([0, 0]), leaves)


def test_unflatten_with_swapped_arguments():
    """unflatten(leaves, structure) says the argument order."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "unflatten: the first argument must be a Structure (from flatten or structure), "
            "got list. The order is unflatten(structure, leaves)."
        ),
    ):
        ct.unflatten([1], ct.structure([0]))  # type: ignore[arg-type]


# --- broadcast ------------------------------------------------------------------------------


def test_broadcast_repeats_prefix_leaves():
    """Each prefix leaf is repeated over the subtree of full below it (the SPEC example)."""
    assert ct.broadcast(("x", 0), (1.0, {"k1": 2.0, "k2": 3.0})) == ("x", {"k1": 0, "k2": 0})


def test_broadcast_none_is_leaf():
    """With none_is_leaf=True, vmap-style (None, 0) broadcasts None as a leaf."""
    assert ct.broadcast((None, 0), ([1, 2], 3), none_is_leaf=True) == ([None, None], 0)


def test_broadcast_a_leaf_over_a_whole_tree():
    """A leaf prefix fills every leaf of full; None and empty nodes stay."""
    assert ct.broadcast(0, {"a": [1, 2], "b": None, "c": Layer(1, 2, "x")}) == {
        "a": [0, 0],
        "b": None,
        "c": Layer(0, 0, "x"),
    }


def test_broadcast_equal_structures():
    """A prefix with full's own structure gives the prefix back."""
    assert ct.broadcast({"a": 1, "b": 2}, {"b": [1, 2], "a": (3,)}) == {"a": (1,), "b": [2, 2]}


def test_broadcast_mismatch_names_the_path():
    """A prefix that is not a prefix of full raises StructureError naming the path."""
    with pytest.raises(
        ct.StructureError,
        match=re.escape("the tree does not match the structure at '[0]': expected None there"),
    ) as info:
        ct.broadcast((None, 0), ([1, 2], 3))
    assert info.value.path == (ct.IndexKey(0),)


def test_broadcast_errors_name_broadcast():
    """broadcast's mismatch error starts with 'broadcast:'."""
    with pytest.raises(ct.StructureError, match=r"^broadcast: "):
        ct.broadcast({"a": 0}, {"b": 1})


# --- transpose ---------------------------------------------------------------------------------


def test_transpose_swaps_outer_and_inner():
    """transpose turns a list of dicts into a dict of lists (the JAX example)."""
    outer, inner = ct.structure([0, 0]), ct.structure({"a": 0, "b": 0})
    tree = [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    out = ct.transpose(outer, inner, tree)
    assert out == {"a": [1, 3], "b": [2, 4]}
    assert ct.transpose(inner, outer, out) == tree


def test_transpose_with_empty_outer():
    """An outer structure without leaves gives inner filled with empty outers."""
    inner = ct.structure({"a": 0, "b": 0})
    assert ct.transpose(ct.structure(()), inner, ()) == {"a": (), "b": ()}


def test_transpose_reports_a_subtree_without_the_inner_structure():
    """A subtree that lacks the inner structure is named by its outer path."""
    outer, inner = ct.structure([0, 0]), ct.structure({"a": 0, "b": 0})
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "transpose: the tree does not match the structure at '[1]': a dict with "
            "different keys: only in the expected one: 'b'; only in the other: none."
        ),
    ) as info:
        ct.transpose(outer, inner, [{"a": 1, "b": 2}, {"a": 3}])
    assert info.value.path == (ct.IndexKey(1),)


def test_transpose_needs_structures():
    """transpose's first two arguments must be Structures."""
    with pytest.raises(
        ct.StructureError,
        match=exact("transpose: inner must be a Structure (from ct.structure), got dict."),
    ):
        ct.transpose(ct.structure([0]), {"a": 0}, [{"a": 1}])  # type: ignore[arg-type]


# --- diff and assert_same_structure ----------------------------------------------------------


def test_diff_lists_every_difference():
    """diff gives (path, description) for every structural difference (the SPEC example)."""
    found = ct.diff({"a": [1, 2], "b": 0}, {"a": [1], "c": 0})
    assert found == [
        ((ct.DictKey("a"),), "a list with 2 children in one and 1 in the other"),
        ((ct.DictKey("b"),), "present only in the first tree"),
        ((ct.DictKey("c"),), "present only in the second tree"),
    ]


def test_diff_is_empty_exactly_when_structures_are_equal():
    """diff ignores leaves and dict order: it is empty when the structures are equal."""
    pairs = [
        ([1, (2, 3)], ["a", ("b", "c")]),
        ({"a": 1, "b": 2}, {"b": 1, "a": 2}),
        (None, None),
        (Layer(1, 2, "fc", 1), Layer(3, 4, "fc", 2)),
    ]
    for a, b in pairs:
        assert ct.diff(a, b) == []
        assert ct.structure(a) == ct.structure(b)


def test_diff_node_kinds_and_leaves():
    """diff names node kinds and leaf types that differ."""
    assert ct.diff((1, 2), [1, 2]) == [((), "a tuple vs a list")]
    assert ct.diff([1, 2], [1, [2]]) == [((ct.IndexKey(1),), "a leaf of type int vs a list")]


def test_same_named_classes_are_told_apart(twin_classes):
    """diff and flatten_up_to show the modules of two classes named alike, and call a
    redefined class (same module and name) another class."""
    one, two = twin_classes("pkg.one", "pkg.two")
    assert ct.diff(one(1), two(1)) == [((), "a 'pkg.one.Twin' vs a 'pkg.two.Twin'")]
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "flatten_up_to: the tree does not match the structure at the root: expected a "
            "'pkg.one.Twin' there, found a 'pkg.two.Twin'."
        ),
    ):
        ct.structure(one(1)).flatten_up_to(two(1))
    old, new = twin_classes("pkg", "pkg")
    assert ct.diff(old(1), new(1)) == [
        ((), "a 'pkg.Twin' vs an instance of another class also named 'pkg.Twin'")
    ]


def test_diff_kept_fields_and_nested_differences():
    """diff reports a kept-field difference and keeps comparing children."""
    assert ct.diff(Layer([1], 0, "x"), Layer([1, 2], 0, "y")) == [
        ((), "kept field Layer.name is 'x' in one and 'y' in the other"),
        ((ct.AttrKey("w"),), "a list with 1 child in one and 2 in the other"),
    ]


def test_diff_ordered_dict_order():
    """Two OrderedDicts with the same keys in different orders differ."""
    assert ct.diff(OrderedDict(a=1, b=2), OrderedDict(b=1, a=2)) == [
        ((), "an OrderedDict whose static data differ: ('a', 'b') vs ('b', 'a')")
    ]


def test_assert_same_structure_passes_silently():
    """assert_same_structure returns None for equal structures."""
    assert ct.assert_same_structure([1, {"a": None}], [2, {"a": None}]) is None


def test_assert_same_structure_lists_the_differences():
    """assert_same_structure raises StructureError listing every difference."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "assert_same_structure: the trees differ in 3 places: at ['a']: a list with 2 "
            "children in one and 1 in the other; at ['b']: present only in the first tree; "
            "at ['c']: present only in the second tree."
        ),
    ) as info:
        ct.assert_same_structure({"a": [1, 2], "b": 0}, {"a": [1], "c": 0})
    assert info.value.path == (ct.DictKey("a"),)


def test_assert_same_structure_one_difference_at_the_root():
    """A single difference is worded in the singular and the root is named."""
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "assert_same_structure: the trees differ in 1 place: at the root: a tuple vs a list."
        ),
    ):
        ct.assert_same_structure((1,), [1])


def test_assert_same_structure_summarizes_many_differences():
    """Past ten differences the message counts the rest."""
    with pytest.raises(
        ct.StructureError, match=re.escape("the trees differ in 12 places: at [0]:")
    ) as info:
        ct.assert_same_structure(list(range(12)), [[i] for i in range(12)])
    assert str(info.value).endswith("at [9]: a leaf of type int vs a list (and 2 more).")


@pytest.mark.parametrize(
    ("call", "op"),
    [
        (lambda: ct.flatten([1], is_leaf=3), "flatten"),
        (lambda: ct.flatten(5, is_leaf=3), "flatten"),
        (lambda: ct.leaves([[1]], is_leaf="list"), "leaves"),
        (lambda: ct.leaves_with_path([[1]], is_leaf=True), "flatten"),
        (lambda: ct.broadcast(0, [1], is_leaf=1), "flatten"),
    ],
)
def test_is_leaf_that_is_not_a_function_is_named(call, op):
    """A non-callable is_leaf= is a TypeError naming the operation and the option (it was
    Python's "'int' object is not callable" from inside the walk, or nothing at all)."""
    with pytest.raises(TypeError, match=f"{op}: is_leaf must be a function, got .*Pass is_leaf="):
        call()


def test_the_record_cursor_reads_records_of_another_format():
    """The record cursor walks records of the file's kind (one per node or leaf, its
    children counted) with the shape and keys given, paths and skips included."""
    from containers._records import CLOSE, OPEN, RecordCursor

    # {"a": [1, 2], "b": 3} as pre-order records: (children, rendered keys)
    records = [(2, ["['a']", "['b']"]), (2, ["[0]", "[1]"]), (0, []), (0, []), (0, [])]
    cursor = RecordCursor(
        records, shape=lambda r: (r[0], True if r[0] else None), keys=lambda r: r[1]
    )
    opened, closed = [], []
    while (event := cursor.step()) is not None:
        if event == OPEN:
            opened.append((cursor.index, "".join(cursor.path())))
        elif event == CLOSE:
            closed.append(cursor.index)
    assert opened == [(0, ""), (1, "['a']"), (2, "['a'][0]"), (3, "['a'][1]"), (4, "['b']")]
    assert closed == [2, 3, 1, 4, 0]
    cursor = RecordCursor(
        records, shape=lambda r: (r[0], True if r[0] else None), keys=lambda r: r[1]
    )
    assert (cursor.step(), cursor.step()) == (OPEN, OPEN)
    cursor.skip()  # the list under 'a'
    assert (cursor.step(), cursor.index, cursor.path()) == (OPEN, 4, ("['b']",))
    assert cursor.shown_path() == "['b']"


def test_the_record_cursor_shows_a_deep_path_by_its_ends():
    """shown_path gives a path deeper than 40 keys by its first and last 12 and the
    depth, as where() shows a key path."""
    from containers._records import LEAF, RecordCursor

    structure = ct.structure(nest_lists(100))
    cursor = RecordCursor(structure._records)
    while cursor.step() != LEAF:
        pass
    path = ct.structure(nest_lists(100)).paths()[0]
    assert cursor.path() == path
    assert cursor.shown_path(str) == ct.keystr(path[:12]) + "..." + ct.keystr(path[-12:]) + (
        f" (depth {len(path)})"
    )


def nest_lists(depth: int) -> list[Any]:
    """[[...[0]...]], ``depth`` lists deep."""
    tree: Any = 0
    for _ in range(depth):
        tree = [tree]
    return tree
