"""containers.filters: every filter form of SPEC section 7, the conversions of
to_predicate, and the predicates' equality, hashing, reprs and pickling."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

import containers as ct
from containers.filters import (
    All,
    Everything,
    FilterError,
    Not,
    Nothing,
    OfType,
    PathContains,
    WithTag,
    to_predicate,
)
from containers.filters import Any as AnyOf


@ct.container(children=["w", "b", "count"])
class Layer:
    w: Any = ct.field(tags=("param",))
    b: Any = ct.field(tags=("param", "bias"))
    count: Any = ct.field(default=0, tags=("batch_stats",))
    name: str = "layer"


@ct.container(children=["layers", "head"])
class Model:
    layers: list[Any] = ct.field(tags=("trainable",))
    head: Any = None


class Tagged:
    """A leaf that carries its own tag (as NNX's RngKey does)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag


def matching(filter_: Any, tree: Any) -> list[str]:
    """The keystr paths of the leaves of ``tree`` that ``filter_`` matches."""
    pred = to_predicate(filter_)
    return [ct.keystr(p) for p, v in ct.leaves_with_path(tree) if pred(p, v)]


def model() -> Model:
    return Model([Layer(1.0, 2.0, 3), Layer(4.0, 5.0, 6)], head={"out": 7.0})


# --- to_predicate ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filter_", "expected"),
    [
        (int, OfType(int)),
        ("param", WithTag("param")),
        (..., Everything()),
        (True, Everything()),
        (None, Nothing()),
        (False, Nothing()),
        ([int, "param"], AnyOf(OfType(int), WithTag("param"))),
        ((int, "param"), AnyOf(OfType(int), WithTag("param"))),
        ([], AnyOf()),
        ((float, [str, ...]), AnyOf(OfType(float), AnyOf(OfType(str), Everything()))),
    ],
)
def test_to_predicate_converts_each_literal(filter_, expected):
    """Types, strings, ..., True, None, False, lists and tuples become their predicates."""
    assert to_predicate(filter_) == expected


def test_to_predicate_returns_other_callables_as_they_are():
    """A callable that is not a type is the predicate itself."""

    def positive(path, value):
        return value > 0

    assert to_predicate(positive) is positive
    assert to_predicate(WithTag("x")) == WithTag("x")


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (1, "1 (an int)"),
        (0, "0 (an int)"),
        (1.5, "1.5 (a float)"),
        ({"a": 1}, "{'a': 1} (a dict)"),
    ],
)
def test_to_predicate_refuses_what_is_not_a_filter(value, shown):
    """Ints (even 1 and 0), floats and dicts are refused with a FilterError, a TypeError."""
    with pytest.raises(TypeError, match=rf"^{__import__('re').escape(shown)} is not a filter\. "):
        to_predicate(value)
    with pytest.raises(FilterError, match="a callable \\(path, value\\) -> bool"):
        to_predicate(value)


def test_a_bad_element_of_a_list_is_refused():
    """The elements of a list filter are converted too, so a bad one is refused."""
    with pytest.raises(FilterError, match=r"^2 \(an int\) is not a filter"):
        to_predicate(["param", 2])


def test_filter_error_is_a_containers_error():
    """FilterError is a ContainersError and a TypeError."""
    assert issubclass(FilterError, ct.ContainersError)
    assert issubclass(FilterError, TypeError)


# --- each predicate ------------------------------------------------------------------------


def test_of_type_matches_instances_of_subclasses_too():
    """OfType is isinstance: bools are ints, arrays are ndarrays."""
    tree = [1, True, 1.5, np.zeros(2), "s"]
    assert matching(int, tree) == ["[0]", "[1]"]
    assert matching(np.ndarray, tree) == ["[3]"]


def test_of_type_refuses_what_is_not_a_class():
    """OfType takes a class."""
    with pytest.raises(FilterError, match=r"^OfType takes a class, got 3\."):
        OfType(3)  # type: ignore[arg-type]


def test_with_tag_matches_every_leaf_under_a_tagged_field_at_any_depth():
    """A field's tag reaches the leaves below it, through lists, dicts and containers."""
    m = model()
    assert matching("param", m) == [".layers[0].w", ".layers[0].b", ".layers[1].w", ".layers[1].b"]
    assert matching("bias", m) == [".layers[0].b", ".layers[1].b"]
    assert matching("trainable", m) == [
        f".layers[{i}].{f}" for i in range(2) for f in ("w", "b", "count")
    ]
    assert matching("nothing-tagged-so", m) == []


def test_with_tag_matches_a_value_whose_tag_attribute_equals_it():
    """A value with ``tag == t`` matches WithTag(t), wherever it is."""
    rng = Tagged("dropout")
    tree = {"rng": rng, "other": Tagged("params"), "x": 1}
    assert matching("dropout", tree) == ["['rng']"]
    assert WithTag("dropout")((), rng)


def test_with_tag_ignores_tag_attributes_that_are_not_strings():
    """A ``tag`` attribute that is not a str (an array, say) matches no tag, never raises."""
    odd = Tagged("x")
    odd.tag = np.array([1, 2])  # type: ignore[assignment]
    assert not WithTag("x")((), odd)


def test_with_tag_needs_a_string():
    """WithTag takes a str."""
    with pytest.raises(FilterError, match=r"^WithTag takes a str, got 1\."):
        WithTag(1)  # type: ignore[arg-type]


def test_tags_do_not_change_what_paths_are():
    """Keys carrying tags are equal to, hash like and print like keys without them."""
    (path, _), *_ = ct.leaves_with_path(model())
    assert path == (ct.AttrKey("layers"), ct.IndexKey(0), ct.AttrKey("w"))
    assert hash(path) == hash((ct.AttrKey("layers"), ct.IndexKey(0), ct.AttrKey("w")))
    assert repr(path[2]) == "AttrKey('w')"
    assert path[2].tags == ("param",)
    assert pickle.loads(pickle.dumps(path[2])).tags == ("param",)


def test_path_contains_matches_raw_field_names_indexes_and_dict_keys():
    """PathContains takes a raw key: a field name, a position or a mapping key."""
    m = model()
    assert matching(PathContains("w"), m) == [".layers[0].w", ".layers[1].w"]
    assert matching(PathContains(1), m) == [".layers[1].w", ".layers[1].b", ".layers[1].count"]
    assert matching(PathContains("out"), m) == [".head['out']"]


def test_path_contains_compares_raw_keys_by_type_too():
    """0 does not match the position False, nor 0.0: the raw key's type must agree."""
    tree = {0: "int", "0": "str", (0,): "tuple"}
    assert matching(PathContains(0), tree) == ["[0]"]
    assert matching(PathContains("0"), tree) == ["['0']"]
    assert matching(PathContains(False), [1, 2]) == []


def test_path_contains_accepts_key_objects():
    """A key object is compared as a key: AttrKey('w') is not DictKey('w')."""
    tree = {"w": 1, "x": Layer(2, 3)}
    assert matching(PathContains(ct.AttrKey("w")), tree) == ["['x'].w"]
    assert matching(PathContains(ct.DictKey("w")), tree) == ["['w']"]


def test_path_contains_needs_a_hashable_key():
    """An unhashable key is refused at once, as a FilterError saying what a key is."""
    with pytest.raises(
        FilterError,
        match=r"PathContains takes a key \(a field name, an index or a dict key\), got "
        r"\[1\] of type list, which is not hashable, so no path can contain it\.",
    ):
        PathContains([1])


def test_any_all_not_everything_nothing():
    """The combinators combine converted filters; empty Any matches nothing, All everything."""
    m = model()
    assert matching(AnyOf("bias", PathContains("count")), m) == [
        ".layers[0].b",
        ".layers[0].count",
        ".layers[1].b",
        ".layers[1].count",
    ]
    assert matching(All("param", PathContains(0)), m) == [".layers[0].w", ".layers[0].b"]
    assert matching(Not("trainable"), m) == [".head['out']"]
    assert len(matching(Everything(), m)) == 7
    assert matching(Nothing(), m) == []
    assert matching(AnyOf(), m) == []
    assert len(matching(All(), m)) == 7


def test_callables_get_the_path_and_the_value():
    """A plain function receives (path, value)."""
    seen = []

    def record(path, value):
        seen.append((ct.keystr(path), value))
        return value == 2.0

    assert matching(record, model()) == [".layers[0].b"]
    assert seen[0] == (".layers[0].w", 1.0)


# --- equality, hashing, reprs --------------------------------------------------------------


@pytest.mark.parametrize(
    ("predicate", "shown"),
    [
        (OfType(int), "OfType(int)"),
        (OfType(np.ndarray), "OfType(numpy.ndarray)"),
        (WithTag("param"), "WithTag('param')"),
        (PathContains("w"), "PathContains('w')"),
        (PathContains(0), "PathContains(0)"),
        (AnyOf(int, "b"), "Any(OfType(int), WithTag('b'))"),
        (All(), "All()"),
        (Not(Not(...)), "Not(Not(Everything()))"),
        (Everything(), "Everything()"),
        (Nothing(), "Nothing()"),
    ],
)
def test_reprs_read_like_the_construction(predicate, shown):
    """Each predicate's repr shows its converted arguments."""
    assert repr(predicate) == shown


def test_predicates_compare_and_hash_by_value():
    """Equal arguments make equal predicates with equal hashes; different ones differ."""
    pairs = [
        (OfType(int), OfType(int)),
        (WithTag("a"), WithTag("a")),
        (PathContains(1), PathContains(1)),
        (AnyOf(int, "a"), AnyOf(OfType(int), WithTag("a"))),
        (All("a"), All(WithTag("a"))),
        (Not(None), Not(Nothing())),
        (Everything(), Everything()),
        (Nothing(), Nothing()),
    ]
    for a, b in pairs:
        assert a == b
        assert hash(a) == hash(b)
    assert len({a for a, _ in pairs}) == len(pairs)
    assert OfType(int) != OfType(float)
    assert AnyOf(int) != All(int)
    assert WithTag("a") != PathContains("a")
    assert Everything() != Nothing()
    assert {WithTag("a"): 1}[WithTag("a")] == 1


def test_predicates_are_immutable_and_pickle():
    """Predicates refuse attribute assignment and survive pickling."""
    p = AnyOf(OfType(int), Not(WithTag("a")), PathContains(("x", 1)))
    with pytest.raises(AttributeError, match="Any is immutable"):
        p.x = 1  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(p)) == p


def test_predicate_properties_give_their_arguments():
    """Each predicate exposes what it was built from."""
    assert OfType(int).type is int
    assert WithTag("a").tag == "a"
    assert PathContains(3).key == 3
    assert AnyOf(int, "a").filters == (OfType(int), WithTag("a"))
    assert All(int).filters == (OfType(int),)
    assert Not("a").filter == WithTag("a")


def test_tags_of_registered_dataclasses_and_attrs_classes():
    """Tags reach paths through register() on a dataclass and through attrs metadata."""
    import dataclasses

    import attrs

    @dataclasses.dataclass
    class Plain:
        w: Any = ct.field(tags=("param",))  # noqa: RUF009 - field() wraps dataclasses.field
        n: int = 0

    ct.register(Plain)

    @ct.container
    @attrs.define
    class Attrs:
        w: Any = attrs.field(metadata={"containers.tags": ("param",)})
        n: int = 0

    assert matching("param", [Plain([1.0, 2.0]), Attrs(3.0)]) == ["[0].w[0]", "[0].w[1]", "[1].w"]
