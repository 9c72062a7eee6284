"""treelize, subside and rise (SPEC.md section 6): the four modes over every node kind,
inherit, missing, the warnings, the seed article's examples, depth and cycles, and the
fast path against its twin, the engine."""

from __future__ import annotations

import collections
import functools
import inspect
import re
import sys
from collections import OrderedDict, defaultdict, deque
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import containers as ct
from containers import _treelize


@pytest.fixture(params=["fast", "engine"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the two-dict fast path allowed, and with the engine alone."""
    monkeypatch.setattr(_treelize, "_FAST", request.param == "fast")
    return str(request.param)


def exact(message: str) -> str:
    """A `match=` pattern for exactly this message."""
    return f"^{re.escape(message)}$"


def add(a: Any, b: Any) -> Any:
    return a + b


@ct.container
class Pair:
    a: Any
    b: Any


@ct.container
class Other:
    a: Any
    b: Any


@ct.container(children=["w"], keep=["name"])
class Layer:
    w: Any
    name: str = "layer"
    step: int = 0


Named = collections.namedtuple("Named", ["x", "y"])


class Interval:  # noqa: PLW1641 - compared in tests, never hashed
    def __init__(self, lo: Any, hi: Any) -> None:
        self.lo, self.hi = lo, hi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Interval) and (self.lo, self.hi) == (other.lo, other.hi)

    def __repr__(self) -> str:
        return f"Interval({self.lo!r}, {self.hi!r})"


ct.register_node(
    Interval,
    lambda iv: ((iv.lo, iv.hi), None),
    lambda aux, ch: Interval(*ch),
    keys=lambda iv: ("lo", "hi"),
)


class Bag:  # noqa: PLW1641 - compared in tests, never hashed
    """A register_node type whose keys vary per instance."""

    def __init__(self, **items: Any) -> None:
        self.items = items

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Bag) and self.items == other.items


ct.register_node(
    Bag,
    lambda b: (tuple(b.items.values()), tuple(b.items)),
    lambda aux, ch: Bag(**dict(zip(aux, ch))),
    keys=lambda b: tuple(b.items),
)


def strict_keys(where: str, what: str) -> str:
    return exact(
        f"treelize: the tree arguments have different keys at {where} (mode='strict'): "
        f"{what}. In strict mode every tree argument must have the same keys; use "
        "mode='inner', 'outer' (with missing=) or 'left' to align different keys."
    )


def no_value(arg: str, key: str, where: str, mode: str) -> str:
    return exact(
        f"treelize: {arg} has no value at {key} of {where} (mode={mode!r}) and missing= "
        "is not set. Pass missing= (a value, or a zero-argument factory called once per "
        "absent leaf), or use mode='inner'."
    )


# --- strict ------------------------------------------------------------------------------


def test_strict_maps_aligned_dicts(path):
    """Strict mode calls f once per aligned leaf and keeps the structure."""
    out = ct.treelize()(add)({"a": 1, "x": {"c": 2}}, {"a": 10, "x": {"c": 20}})
    assert out == {"a": 11, "x": {"c": 22}}


def test_strict_key_mismatch_is_a_structure_error_and_a_key_error(path):
    """Different key sets in strict mode raise a StructureError that is also a KeyError,
    naming the path and the keys."""
    f = ct.treelize()(add)
    what = (
        "argument 0 has keys 'c', argument 1 has 'c', 'd' (only in argument 0: no keys; "
        "only in argument 1: 'd')"
    )
    with pytest.raises(ct.StructureError, match=strict_keys("\"['x']\"", what)) as info:
        f({"a": 1, "x": {"c": 2}}, {"a": 1, "x": {"c": 2, "d": 3}})
    assert isinstance(info.value, KeyError)
    assert info.value.path == (ct.DictKey("x"),)
    with pytest.raises(KeyError):
        f({"a": 1}, {"b": 1})


def test_strict_key_mismatch_with_an_empty_mapping_reads_as_a_sentence(path):
    """An argument without keys 'has no keys', not 'has keys no keys'."""
    what = "argument 0 has no keys, argument 1 has 'a' (only in argument 0: no keys; only in argument 1: 'a')"
    with pytest.raises(ct.StructureKeyError, match=strict_keys("the root", what)):
        ct.treelize()(add)({}, {"a": 1})


def test_strict_sequences_must_have_equal_lengths(path):
    """Strict mode over lists and tuples: equal lengths, else a StructureError."""
    f = ct.treelize()(add)
    assert f([1, (2, 3)], [10, (20, 30)]) == [11, (22, 33)]
    what = "argument 0 has a sequence of length 2, argument 1 one of length 3"
    with pytest.raises(KeyError, match=strict_keys("'[1]'", what)):
        f([1, (2, 3)], [10, (20, 30, 40)])


def test_mode_names_are_case_insensitive(path):
    """'STRICT', 'Outer' are accepted; the result matches the lower-case mode."""
    assert ct.treelize("STRICT")(add)({"a": 1}, {"a": 2}) == {"a": 3}
    assert ct.treelize("Inner")(add)({"a": 1, "b": 1}, {"a": 2}) == {"a": 3}


def test_unknown_mode_is_a_value_error():
    """An unknown mode name raises ValueError listing the modes; a non-string, TypeError."""
    with pytest.raises(
        ValueError,
        match=exact(
            "treelize: unknown mode 'weird'. Modes are 'strict', 'inner', 'outer', "
            "'left' (in any letter case)."
        ),
    ):
        ct.treelize("weird")
    with pytest.raises(TypeError, match=r"^treelize: mode must be a string.*got int\.$"):
        ct.treelize(3)  # type: ignore[arg-type]


def test_treelize_without_parentheses_or_on_a_non_function():
    """@treelize without parentheses says to add them; a non-callable to decorate is a
    TypeError when decorating, not when the result is called."""
    with pytest.raises(
        TypeError,
        match=exact(
            "treelize: mode must be a string, one of 'strict', 'inner', 'outer', 'left'; "
            "got function. treelize takes options and returns the decorator: write "
            "@ct.treelize() with parentheses."
        ),
    ):
        ct.treelize(add)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError,
        match=exact(
            "treelize: the decorated value must be a function, got int 3. Decorate a def, "
            "or call treelize(mode)(f)."
        ),
    ):
        ct.treelize()(3)  # type: ignore[arg-type]


# --- inner / outer / left over dicts ------------------------------------------------------


def test_inner_keeps_the_common_keys(path):
    """Inner mode keeps keys every tree argument has, in the first tree's order."""
    f = ct.treelize("inner")(add)
    out = f({"b": 1, "a": 2, "x": {"c": 3, "d": 4}}, {"a": 20, "x": {"d": 40, "e": 1}})
    assert out == {"a": 22, "x": {"d": 44}}
    assert list(out) == ["a", "x"]


def test_outer_fills_absent_values_from_missing(path):
    """Outer mode takes every key; absent values come from missing."""
    f = ct.treelize("outer", missing=0)(add)
    out = f({"a": 1, "x": {"c": 2}}, {"b": 3, "x": {"d": 4}})
    assert out == {"a": 1, "x": {"c": 2, "d": 4}, "b": 3}


def test_outer_result_order_is_first_appearance(path):
    """Keys come in the first tree's insertion order, then new keys in later trees."""
    f = ct.treelize("outer", missing=0)(add)
    out = f({"z": 1, "b": 2}, {"a": 1, "z": 1, "c": 1})
    assert list(out) == ["z", "b", "a", "c"]


def test_outer_without_missing_raises_where_a_key_is_absent(path):
    """Outer mode without missing= raises a KeyError naming the argument and key."""
    with pytest.warns(RuntimeWarning, match="mode='outer' without missing="):
        f = ct.treelize("outer")(add)
    assert f({"a": 1}, {"a": 2}) == {"a": 3}
    with pytest.raises(KeyError, match=no_value("argument 0", "'b'", "the root", "outer")):
        f({"a": 1}, {"a": 2, "b": 3})


def test_left_follows_the_first_tree(path):
    """Left mode takes the first tree argument's keys; absent ones come from missing."""
    f = ct.treelize("left", missing=1)(add)
    assert f({"a": 1, "b": 2}, {"a": 10, "c": 5}) == {"a": 11, "b": 3}
    assert f({"a": 10, "c": 5}, {"a": 1, "b": 2}) == {"a": 11, "c": 6}
    g = ct.treelize("left")(add)
    with pytest.raises(KeyError, match=no_value("argument 1", "'b'", "the root", "left")):
        g({"a": 1, "b": 2}, {"a": 10})


def test_left_with_keywords_follows_positional_then_sorted_keywords():
    """Argument order is positional first, then keywords sorted by name."""

    @ct.treelize("left", missing=0)
    def sub(x, y):
        return x - y

    assert sub(y={"a": 1}, x={"a": 5, "b": 7}) == {"a": 4, "b": 7}
    assert sub({"a": 5}, y={"a": 1, "b": 2}) == {"a": 4}


def test_mapping_types_are_kept():
    """OrderedDict and defaultdict results keep the first tree's type and factory."""
    f = ct.treelize("outer", missing=0)(add)
    od = f(OrderedDict(b=1, a=2), OrderedDict(c=3))
    assert type(od) is OrderedDict and list(od.items()) == [("b", 1), ("a", 2), ("c", 3)]
    dd = f(defaultdict(list, a=1), defaultdict(int, b=2))
    assert type(dd) is defaultdict and dd.default_factory is list and dd == {"a": 1, "b": 2}


def test_different_node_kinds_raise_naming_the_path(path):
    """A dict facing a list (or a dict facing an OrderedDict) is a StructureError."""
    f = ct.treelize("outer", missing=0)(add)
    msg = exact(
        "treelize: the tree arguments differ at \"['x']\": argument 0 has a dict there, "
        "argument 1 has a list. Aligned nodes must be of the same kind: convert one of "
        "them, or pass a leaf there to broadcast it."
    )
    with pytest.raises(ct.StructureError, match=msg) as info:
        f({"x": {"a": 1}}, {"x": [1]})
    assert not isinstance(info.value, KeyError)
    with pytest.raises(ct.StructureError, match="argument 1 has an OrderedDict"):
        f({"a": 1}, OrderedDict(a=1))


# --- sequences, namedtuples, containers, register_node ------------------------------------


def test_sequences_align_by_position():
    """inner keeps the shortest prefix, outer the longest (missing), left the first's."""
    a, b = [1, 2, 3], [10, 20]
    assert ct.treelize("inner")(add)(a, b) == [11, 22]
    assert ct.treelize("outer", missing=100)(add)(a, b) == [11, 22, 103]
    assert ct.treelize("left", missing=100)(add)(b, a) == [11, 22]
    assert ct.treelize("left", missing=100)(add)(a, b) == [11, 22, 103]
    assert ct.treelize("outer", missing=0)(add)((1,), (1, 2)) == (2, 2)
    out = ct.treelize("outer", missing=0)(add)(deque([1], maxlen=5), deque([1, 2]))
    assert type(out) is deque and list(out) == [2, 2] and out.maxlen == 5
    with pytest.raises(KeyError, match=no_value("argument 1", "position 2", "the root", "left")):
        ct.treelize("left")(add)(a, b)


def test_namedtuples_align_by_field_and_keep_their_class(path):
    """Namedtuples align field by field and are rebuilt as their own class."""
    out = ct.treelize("inner")(add)(Named(1, {"a": 1, "b": 2}), Named(10, {"a": 5}))
    assert out == Named(11, {"a": 6}) and type(out) is Named


def test_containers_keep_kept_fields_and_reset_fields(path):
    """Declared containers: the first tree's kept fields, reset fields at defaults."""
    out = ct.treelize()(add)(Layer(1, "fc", step=3), Layer(10, "other", step=4))
    assert out == Layer(11, "fc", 0)
    assert ct.treelize("outer", missing=0)(add)(Pair(1, {"a": 1}), Pair(2, {"b": 1})) == Pair(
        3, {"a": 1, "b": 1}
    )


def test_same_named_classes_are_told_apart_by_module(twin_classes):
    """Two different classes named alike are shown with their modules, not as 'Twin'
    and 'Twin'."""
    one, two = twin_classes("pkg.one", "pkg.two")
    with pytest.raises(
        ct.StructureError,
        match=exact(
            "treelize: the tree arguments differ at the root: argument 0 has a "
            "'pkg.one.Twin' there, argument 1 has a 'pkg.two.Twin'. Aligned nodes must be of "
            "the same kind: convert one of them, or pass a leaf there to broadcast it."
        ),
    ):
        ct.treelize()(add)(one(1), two(2))


def test_differing_container_classes_raise_naming_the_path(path):
    """Containers of different classes cannot align in any mode."""
    msg = exact(
        "treelize: the tree arguments differ at \"['p']\": argument 0 has a 'Pair' there, "
        "argument 1 has a 'Other'. Aligned nodes must be of the same kind: convert one of "
        "them, or pass a leaf there to broadcast it."
    )
    with pytest.raises(ct.StructureError, match=msg):
        ct.treelize("outer", missing=0)(add)({"p": Pair(1, 2)}, {"p": Other(1, 2)})


def test_register_node_types_align_with_equal_keys():
    """register_node types align child by child; differing keys raise in every mode."""
    assert ct.treelize()(add)(Interval(1, 2), Interval(10, 20)) == Interval(11, 22)
    assert ct.treelize("outer", missing=0)(add)(Bag(a=1), Bag(a=2)) == Bag(a=3)
    msg = exact(
        "treelize: the tree arguments have different keys at the root (mode='outer'): "
        "argument 0 has keys 'a', argument 1 has 'b' (only in argument 0: 'a'; only in "
        "argument 1: 'b'). a 'Bag' has a fixed set of children, so its keys must be equal "
        "in every mode; give both the same keys."
    )
    with pytest.raises(KeyError, match=msg):
        ct.treelize("outer", missing=0)(add)(Bag(a=1), Bag(b=2))


def test_none_and_empty_nodes_never_call_f(path):
    """None and empty containers are nodes with no children: f never runs on them."""
    calls: list[Any] = []

    @ct.treelize("outer", missing=0)
    def f(a, b):
        calls.append((a, b))
        return a

    assert f({"n": None, "e": {}, "t": ()}, {"n": None, "e": {}, "t": ()}) == {
        "n": None,
        "e": {},
        "t": (),
    }
    assert calls == []


# --- inherit -------------------------------------------------------------------------------


def test_inherit_passes_leaves_down(path):
    """A leaf argument, or a leaf facing a subtree, goes to every position below it."""
    f = ct.treelize()(add)
    assert f({"a": 1, "x": {"c": 2, "d": 3}}, {"a": 10, "x": 100}) == {
        "a": 11,
        "x": {"c": 102, "d": 103},
    }
    assert f(100, {"a": 1}) == {"a": 101}
    assert f(1, 2) == 3


def test_inherit_false_raises_a_type_error_naming_the_argument(path):
    """With inherit=False a leaf facing a node is a TypeError naming the argument."""
    f = ct.treelize(inherit=False)(add)
    assert f({"a": 1}, {"a": 2}) == {"a": 3}
    msg = exact(
        "treelize: argument 1 is a leaf of type int at \"['x']\", where argument 0 has a "
        "dict, and inherit=False. Pass inherit=True to give the leaf to every position "
        "below, or give argument 1 the same structure."
    )
    with pytest.raises(TypeError, match=msg) as info:
        f({"x": {"c": 1}}, {"x": 6})
    assert isinstance(info.value, ct.StructureError)
    with pytest.raises(TypeError, match=r"^treelize: argument 'b' is a leaf of type int at"):
        ct.treelize(inherit=False)(add)({"a": 1}, b=2)


def test_keyword_arguments_are_tree_arguments():
    """Keyword arguments that are nodes are aligned like positional ones."""

    @ct.treelize()
    def lin(x, *, w, b=0):
        return x * w + b

    assert lin({"a": 1, "b": 2}, w={"a": 10, "b": 20}, b=5) == {"a": 15, "b": 45}


# --- missing ---------------------------------------------------------------------------------


def test_missing_factory_is_called_once_per_absent_leaf(path):
    """A factory is called for every absent leaf, so its values are never shared."""
    made: list[list[Any]] = []

    def fresh() -> list[Any]:
        made.append([])
        return made[-1]

    @ct.treelize("outer", missing=fresh)
    def append(arr, item):
        arr.append(item)
        return arr

    out = append({"x": {}}, {"a": 1, "b": 2, "x": {"c": 3, "d": 4}})
    assert out == {"x": {"c": [3], "d": [4]}, "a": [1], "b": [2]}
    assert len(made) == 4
    assert len({id(v) for v in ct.leaves(out, is_leaf=lambda v: isinstance(v, list))}) == 4


def test_missing_value_is_used_as_is():
    """A missing value that is not callable is passed unchanged at each absent leaf."""
    sentinel = object()
    out = ct.treelize("outer", missing=sentinel)(lambda a, b: (a, b))({"a": 1}, {"b": 2})
    assert out == {"a": (1, sentinel), "b": (sentinel, 2)}


def test_missing_in_strict_mode_warns():
    """missing= with mode='strict' warns (treevalue's warning): it is never used."""
    with pytest.warns(RuntimeWarning, match="missing= is set, but mode='strict' never uses it"):
        f = ct.treelize(missing=0)(add)
    with pytest.raises(KeyError):
        f({"a": 1}, {"b": 1})


# --- subside and rise ---------------------------------------------------------------------


def test_subside_and_rise_functions_are_inverse():
    """subside pushes a list of trees into the leaves; rise lifts it back."""
    trees = [{"a": 1, "x": {"c": 2}}, {"a": 3, "x": {"c": 4}}]
    sub = ct.subside(trees)
    assert sub == {"a": [1, 3], "x": {"c": [2, 4]}}
    assert ct.rise(sub) == trees
    assert ct.subside(5) == 5 and ct.subside([1, 2]) == [1, 2]
    assert ct.rise({"a": 1}) == {"a": 1}
    assert ct.rise({"a": (1, 2), "b": (1,)}) == {"a": (1, 2), "b": (1,)}
    assert ct.rise({"a": (1, 2), "e": {}}) == ({"a": 1, "e": {}}, {"a": 2, "e": {}})
    assert ct.rise({"a": {"p": 1, "q": 2}, "b": {"q": 4, "p": 3}}) == {
        "p": {"a": 1, "b": 3},
        "q": {"a": 2, "b": 4},
    }


def test_subside_raises_on_elements_of_different_structure():
    """subside aligns its elements strictly: different keys raise a KeyError whose fix
    is treelize's modes (subside itself has none), and that fix works."""
    with pytest.raises(
        KeyError,
        match=exact(
            "subside: the elements have different keys at the root: element [0] has keys "
            "'a', 'c', element [1] has 'a', 'b' (only in element [0]: 'c'; only in element "
            "[1]: 'b'). subside aligns the elements strictly, so they must have the same "
            "keys; to align different keys, put @treelize(mode='inner', subside=True) (or "
            "mode 'outer' with missing=, or 'left') on the function that takes them."
        ),
    ):
        ct.subside([{"a": 1, "c": 3}, {"a": 2, "b": 2}])
    assert ct.treelize("inner", subside=True)(sum)([{"a": 1, "c": 3}, {"a": 2, "b": 2}]) == {
        "a": 3
    }


def test_subside_and_rise_options():
    """subside=True packs list arguments at each leaf; rise=True lifts tuple results."""

    @ct.treelize(subside=True, rise=True)
    def stats(xs):
        return min(xs), max(xs)

    lo, hi = stats([{"a": 3, "b": [1]}, {"a": 1, "b": [5]}, {"a": 2, "b": [0]}])
    assert lo == {"a": 1, "b": [0]}
    assert hi == {"a": 3, "b": [5]}


def test_rise_option_leaves_unliftable_results_alone(path):
    """rise=True keeps the tree when results are not nodes of one shape."""
    f = ct.treelize(rise=True)(lambda a, b: (a,) * a)
    assert f({"a": 1, "b": 2}, 0) == {"a": (1,), "b": (2, 2)}
    assert ct.treelize(rise=True)(add)({"a": 1}, {"a": 1}) == {"a": 2}


def test_subside_option_packs_keyword_and_tuple_bundles():
    """subside=True turns tuple and dict arguments of trees (keywords too) into bundles
    packed again at each leaf, in their own type."""

    @ct.treelize(subside=True)
    def f(pair, *, named):
        return pair[0] * pair[1] + named["k"]

    out = f(({"a": 1, "b": 2}, {"a": 10, "b": 20}), named={"k": {"a": 100, "b": 200}})
    assert out == {"a": 110, "b": 240}


def test_rise_option_lifts_dict_results():
    """rise=True lifts results that are dicts with one key set into a dict of trees."""
    f = ct.treelize(rise=True)(lambda a, b: {"sum": a + b, "diff": a - b})
    assert f({"x": 3, "y": (5,)}, {"x": 1, "y": (1,)}) == {
        "sum": {"x": 4, "y": (6,)},
        "diff": {"x": 2, "y": (4,)},
    }


def test_undeclared_subclass_is_reported_with_its_path(path):
    """An undeclared subclass of a container met inside an argument names the path."""

    class Sub(Pair):
        pass

    with pytest.raises(
        ct.ContainerDefinitionError, match="^" + re.escape("treelize: at \"['p']\": 'Sub'")
    ):
        ct.treelize()(add)({"p": Sub(1, 2)}, {"p": Sub(1, 2)})


# --- the seed article's examples ------------------------------------------------------------


def test_seed_gcd_prints_each_call(capsys):
    """The article's first example: gcd on numbers and on two trees."""

    @ct.treelize()
    def gcd(a, b):  # GCD calculation
        print("gcd", a, b)
        while True:
            r = a % b
            a, b = b, r
            if r == 0:
                break
        return a

    assert gcd(9, 12) == 3
    assert capsys.readouterr().out == "gcd 9 12\n"
    t1 = {"a": 2, "b": 30, "x": {"c": 4, "d": 9}}
    t2 = {"a": 4, "b": 48, "x": {"c": 6, "d": 54}}
    assert gcd(t1, t2) == {"a": 2, "b": 6, "x": {"c": 2, "d": 9}}
    assert capsys.readouterr().out.splitlines() == [
        "gcd 2 4",
        "gcd 30 48",
        "gcd 4 6",
        "gcd 9 54",
    ]


def _gcd(a, b):
    while True:
        r = a % b
        a, b = b, r
        if r == 0:
            break
    return a


# Figure 2 of the article: t1 lacks b and x.c.
FIG2_T1 = {"a": 2, "x": {"d": 9}}
FIG2_T2 = {"a": 4, "b": 48, "x": {"c": 6, "d": 54}}


def test_seed_modes_on_figure_two(path):
    """The article's strict, inner, outer and left examples on the trees of figure 2."""
    with pytest.raises(KeyError):
        ct.treelize(mode="strict")(_gcd)(FIG2_T1, FIG2_T2)
    assert ct.treelize(mode="inner")(_gcd)(FIG2_T1, FIG2_T2) == {"a": 2, "x": {"d": 9}}
    outer = ct.treelize(mode="outer", missing=1)(_gcd)
    assert outer(FIG2_T1, FIG2_T2) == {"a": 2, "x": {"d": 9, "c": 1}, "b": 1}
    left = ct.treelize(mode="left", missing=1)(_gcd)
    assert left(FIG2_T1, FIG2_T2) == {"a": 2, "x": {"d": 9}}
    assert left(FIG2_T2, FIG2_T1) == {"a": 2, "b": 1, "x": {"c": 1, "d": 9}}


def test_seed_inherit_examples(path):
    """Figures 7 and 8: a value inherited below a subtree, and a plain value broadcast."""
    gcd = ct.treelize(inherit=True)(_gcd)
    t1 = {"a": 2, "b": 30, "x": {"c": 4, "d": 9}}
    t2 = {"a": 4, "b": 48, "x": 6}
    assert gcd(t1, t2) == {"a": 2, "b": 6, "x": {"c": 2, "d": 3}}
    assert gcd(100, t1) == {"a": 2, "b": 10, "x": {"c": 4, "d": 1}}
    with pytest.raises(TypeError):
        ct.treelize(inherit=False)(_gcd)(t1, t2)
    with pytest.raises(TypeError):
        ct.treelize(inherit=False)(_gcd)(100, t1)


def test_seed_total_and_append():
    """Figures 9 and 10: total with missing=0, append with a list factory."""

    @ct.treelize(mode="outer", missing=0)
    def total(*args):
        return sum(args)

    t1 = {"a": 1, "x": {"c": 3}}
    t2 = {"a": 10, "b": 20}
    t3 = {"b": 200, "x": {"c": 300, "d": 400}}
    assert total(t1, t2, t3) == {"a": 11, "x": {"c": 303, "d": 400}, "b": 220}

    @ct.treelize(mode="outer", missing=lambda: [])  # noqa: PIE807 - the article's spelling
    def append(arr: list, *args):
        for item in args:
            if item:
                arr.append(item)
        return arr

    # A list inside a tree is a node here, so the accumulators all come from missing.
    t0: dict[str, Any] = {}
    out = append(t0, t1, t2, t3)
    assert out == {"a": [1, 10], "x": {"c": [3, 300], "d": [400]}, "b": [20, 200]}
    assert out["x"]["d"] is not out["b"]


def test_seed_check_with_subside_and_rise():
    """The article's check example, verbatim but for the tree type."""

    @ct.treelize(subside=True, rise=True)
    def check(arr: list, target):
        position = None
        cnt = 0
        for i, item in enumerate(arr):
            if target(item):
                if position is None:
                    position = i
                cnt += 1
        return position, cnt

    t1 = {"a": 2, "b": 4, "x": {"c": 7, "d": 9}}
    t2 = {"a": 4, "b": 48, "x": {"c": 2, "d": 53}}
    t3 = {"a": 9, "b": -12, "x": {"c": 3, "d": 7}}
    tr1, tr2 = check([t1, t2, t3], lambda x: x % 2 == 0)
    assert tr1 == {"a": 0, "b": 0, "x": {"c": 1, "d": None}}
    assert tr2 == {"a": 2, "b": 3, "x": {"c": 1, "d": 0}}


def test_seed_torch_stack_and_split():
    """torch.stack with subside and torch.split with rise round-trip ten trees; the
    article's list of split sizes is a tree argument here, so it is bound first."""
    torch = pytest.importorskip("torch")
    stack = ct.treelize(subside=True)(torch.stack)
    split = ct.treelize(rise=True)(torch.split)
    trees = [
        {"a": torch.randn(2, 4), "b": torch.randn(3, 4), "x": {"c": torch.randn(2, 1, 3)}}
        for _ in range(10)
    ]
    st_ = stack(trees)
    assert st_["a"].shape == (10, 2, 4) and st_["x"]["c"].shape == (10, 2, 1, 3)
    with pytest.raises(
        ct.StructureError, match="argument 0 has a dict there, argument 1 has a list"
    ):
        split(st_, [1] * 10)
    splitted = ct.treelize(rise=True)(
        functools.partial(torch.split, split_size_or_sections=[1] * 10)
    )(st_)
    assert len(splitted) == 10
    for got, want in zip(splitted, trees):
        assert torch.equal(got["a"][0], want["a"]) and torch.equal(
            got["x"]["c"][0], want["x"]["c"]
        )


# --- wraps, depth, cycles -----------------------------------------------------------------------


def test_wraps_keeps_name_doc_and_signature():
    """The decorated function keeps the original's name, docstring and signature."""

    def scale(x: float, factor: float = 2.0) -> float:
        """Scale x."""
        return x * factor

    lifted = ct.treelize()(scale)
    assert lifted.__name__ == "scale" and lifted.__doc__ == "Scale x."
    assert str(inspect.signature(lifted)) == str(inspect.signature(scale))
    assert lifted({"a": 1.0}, factor={"a": 3.0}) == {"a": 3.0}


def nest_dict(depth: int, leaf: Any) -> Any:
    tree = leaf
    for _ in range(depth):
        tree = {"k": tree}
    return tree


def test_depth_100_000(path):
    """Dicts and lists nested 100,000 deep are treelized without RecursionError."""
    depth = 100_000
    out = ct.treelize()(add)(nest_dict(depth, 1), nest_dict(depth, 2))
    for _ in range(depth):
        out = out["k"]
    assert out == 3
    lists = ct.treelize("outer", missing=0)(add)
    a: Any = 1
    for _ in range(depth):
        a = [a]
    out = lists(a, 10)
    for _ in range(depth):
        out = out[0]
    assert out == 11
    assert sys.getrecursionlimit() < depth


def test_cycle_is_reported_with_its_path(path):
    """A tree argument that contains itself raises StructureError naming the path."""
    a: dict[str, Any] = {"x": {"y": 1}}
    a["x"]["z"] = a
    msg = exact(
        "treelize: the tree has a reference cycle: the object at \"['x']['z']\" is the "
        "same object as its ancestor at the root. Trees must be acyclic; break the cycle, "
        "or make the object a leaf (exclude=/is_leaf=, where the operation takes them)."
    )
    with pytest.raises(ct.StructureError, match=msg):
        ct.treelize()(add)(a, 1)
    with pytest.raises(ct.StructureError, match="reference cycle"):
        ct.treelize("outer", missing=0)(add)({"x": 1}, a)


def test_numpy_leaves(path):
    """numpy arrays are leaves passed to f whole."""
    out = ct.treelize()(np.add)({"w": np.ones(3)}, {"w": np.arange(3.0)})
    assert np.array_equal(out["w"], [1.0, 2.0, 3.0])


# --- properties ------------------------------------------------------------------------------

leaf_st = st.integers(-5, 5)


def _trees(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaf,
        lambda child: st.one_of(
            st.dictionaries(st.sampled_from("abcde"), child, max_size=4),
            st.lists(child, max_size=3),
            st.lists(child, max_size=3).map(tuple),
            st.builds(Named, child, child),
            st.builds(Layer, child, st.sampled_from(["p", "q"])),
            st.just(None),
        ),
        max_leaves=15,
    )


@settings(max_examples=150, deadline=None)
@given(_trees(leaf_st), st.integers(-5, 5))
def test_strict_treelize_equals_fmap(tree, shift):
    """For two trees of the same structure, strict treelize(f) equals fmap(f, a, b)."""
    other = ct.fmap(lambda v: v + shift, tree)
    f = lambda a, b: (a, b)  # noqa: E731
    assert ct.treelize()(f)(tree, other) == ct.fmap(f, tree, other)
    assert ct.treelize()(lambda a: a * 3)(tree) == ct.fmap(lambda a: a * 3, tree)


def _dict_trees() -> st.SearchStrategy[Any]:
    return st.recursive(
        st.integers(0, 9),
        lambda child: st.dictionaries(st.sampled_from("abcdef"), child, max_size=5),
        max_leaves=25,
    )


@settings(max_examples=200, deadline=None)
@given(_dict_trees(), _dict_trees(), st.sampled_from(_treelize.MODES), st.booleans())
def test_fast_path_agrees_with_the_engine(a, b, mode, with_missing):
    """The two-dict fast path and the engine give the same result, or the same error."""
    kwargs: dict[str, Any] = {"missing": 0} if with_missing and mode != "strict" else {}

    def run(fast: bool) -> Any:
        saved = _treelize._FAST
        _treelize._FAST = fast
        try:
            with __import__("warnings").catch_warnings():
                __import__("warnings").simplefilter("ignore", RuntimeWarning)
                f = ct.treelize(mode, **kwargs)(lambda x, y: (x, y))
            out = f(a, b)
            return "ok", out, [list(x) for x in ct.fcollect(out) if isinstance(x, dict)]
        except ct.StructureError as err:
            return type(err), str(err)
        finally:
            _treelize._FAST = saved

    assert run(True) == run(False)
