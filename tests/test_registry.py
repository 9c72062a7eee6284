"""The registry (`containers._registry`): node kinds, thread-safe registration,
superseded classes, observers, key order and the value/object rule of the cache."""

from __future__ import annotations

import dataclasses
import gc
import linecache
import pickle
import re
import sys
import threading
import weakref
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import containers as ct
from containers._registry import REGISTRY, NodeKind, class_by_name, name_of, sort_keys


def exact(message: str) -> str:
    """A `match=` pattern for exactly this message."""
    return f"^{re.escape(message)}$"


# --- registration is atomic for concurrent readers -------------------------------------


def test_registering_while_another_thread_traverses_never_gives_a_wrong_result():
    """At a 1 us switch interval, a thread traversing lists and dicts while the main
    thread registers classes always sees them as nodes, during and after."""
    wrong: list[Any] = []
    stop = threading.Event()

    def traverse() -> None:
        tree = [[1], {"a": 2}, (3, None)]
        while not stop.is_set():
            got = ct.leaves(tree)
            if got != [1, 2, 3]:
                wrong.append(got)
            mapped = ct.fmap(lambda v: v, tree)
            if mapped != tree or type(mapped[1]) is not dict:
                wrong.append(mapped)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    reader = threading.Thread(target=traverse)
    reader.start()
    try:
        for i in range(300):
            cls = type(f"Node{i}", (), {})
            ct.register_node(cls, lambda x: ((), None), lambda aux, ch, cls=cls: cls())
    finally:
        stop.set()
        reader.join()
        sys.setswitchinterval(interval)
    assert wrong == []
    assert ct.leaves([[1]]) == [1]
    assert ct.leaves({"a": [2]}) == [2]


def test_a_type_seen_as_a_leaf_becomes_a_node_when_registered():
    """A classification cached on first sight is redone after a registration."""

    class Late:
        def __init__(self, v: Any) -> None:
            self.v = v

    value = Late(1)
    assert ct.leaves([value]) == [value]
    ct.register_node(Late, lambda x: ((x.v,), None), lambda aux, ch: Late(*ch))
    assert ct.leaves([value]) == [1]


# --- superseded classes ------------------------------------------------------------------


def _define(i: int) -> type:
    @ct.container(children=["w"])
    class Redefined:
        w: Any
        tag: int = i

    return Redefined


def test_redefined_classes_are_freed_with_their_generated_source():
    """1,000 redefinitions of one module.qualname do not keep 1,000 classes alive, and
    their generated code leaves linecache with them."""
    refs = []
    for i in range(1000):
        cls = _define(i)
        refs.append(weakref.ref(cls))
        ct.leaves([cls(np.zeros(1))])
        ct.fmap(lambda a: a, cls(1.0))
    newest = cls
    del cls
    gc.collect()
    alive = [r for r in refs if r() is not None]
    assert alive == [refs[-1]]
    assert class_by_name(name_of(newest) or "") is newest
    generated = [k for k in linecache.cache if "test_registry.Redefined #" in k]
    assert len(generated) == 1


def test_an_instance_of_a_superseded_class_still_traverses_as_declared():
    """While an old class lives, its instances keep its declaration (kept fields and
    all); the name now belongs to the newest class."""
    old = _define(7)(np.ones(2))
    new_cls = _define(8)
    out = ct.fmap(lambda a: a * 2, old)
    assert type(out) is type(old) and out.tag == 7
    np.testing.assert_array_equal(out.w, [2.0, 2.0])
    assert ct.structure(old) != ct.structure(new_cls(np.ones(2)))
    assert class_by_name(ct.spec(new_cls).name) is new_cls
    assert ct.spec(type(old)).name == ct.spec(new_cls).name


# --- observers ---------------------------------------------------------------------------


def test_observers_see_every_registration_once_present_and_future():
    """on_register replays the registered kinds, then reports each new one once."""

    @ct.container
    class Before:
        a: int

    seen: list[NodeKind] = []
    observer = REGISTRY.on_register(seen.append)
    try:
        assert [k.type for k in seen].count(Before) == 1
        assert all(isinstance(k, NodeKind) and k.name for k in seen)
        count = len(seen)

        @ct.container
        class After:
            a: int

        class Custom:
            pass

        ct.register_node(Custom, lambda x: ((), None), lambda aux, ch: Custom(), name="custom-x")
        assert [k.type for k in seen[count:]] == [After, Custom]
        assert seen[-1].name == "custom-x"
        assert seen[-2].spec is not None and seen[-2].spec.children == ("a",)
    finally:
        REGISTRY.remove_observer(observer)
    count = len(seen)

    @ct.container
    class Later:
        a: int

    assert len(seen) == count  # removed observers hear of nothing more


# --- dict keys ---------------------------------------------------------------------------


def test_partially_ordered_keys_sort_the_same_whatever_the_insertion_order():
    """frozenset keys (``<`` is a subset test) fall back to (type name, repr) order."""
    a = {frozenset({2}): "two", frozenset({1}): "one", frozenset({1, 2}): "both"}
    b = dict(reversed(list(a.items())))
    assert ct.leaves(a) == ct.leaves(b) == ["both", "one", "two"]  # by repr
    assert ct.structure(a) == ct.structure(b)
    assert ct.fmap(str.upper, a) == {k: v.upper() for k, v in a.items()}
    assert list(ct.fmap(str.upper, b)) == list(b)  # insertion order kept


def test_keys_whose_comparison_raises_any_error_still_sort():
    """A key whose ``<`` raises ValueError sorts by (type name, repr), never an error."""

    @dataclasses.dataclass(frozen=True)
    class Key:
        n: int

        def __lt__(self, other: object) -> bool:
            raise ValueError("not comparable")

    tree = {Key(2): "b", Key(1): "a"}
    assert ct.leaves(tree) == ["a", "b"]
    assert sort_keys([Key(2), Key(1)]) == [Key(1), Key(2)]
    assert ct.fmap(str.upper, tree) == {Key(2): "B", Key(1): "A"}


def test_nan_keys_sort_the_same_whatever_the_insertion_order():
    """A NaN among float keys breaks ``<``'s total order: the fallback order applies."""
    nan = float("nan")
    assert sort_keys([2.0, nan, 1.0]) == sort_keys([nan, 1.0, 2.0])


def test_keys_holding_ints_too_long_to_print_sort_by_the_fallback_order():
    """A mix of str keys and ints past the int-to-str limit sorts without printing them."""
    huge = 10**5000
    assert sort_keys(["a", huge]) == sort_keys([huge, "a"]) == [huge, "a"]
    assert ct.leaves({"a": 1, huge: 2}) == [2, 1]


# --- kept values -------------------------------------------------------------------------


@ct.container(children=["w"])
class Scaled:
    w: Any
    scale: float = 1.0


def test_a_structure_with_a_nan_kept_value_equals_its_pickle_round_trip():
    """NaN kept values (and arrays with NaN) compare equal in structures; diff is empty."""
    tree = [Scaled(1.0, float("nan")), Scaled(2.0, np.array([np.nan, 1.0]))]
    s = ct.structure(tree)
    assert s == pickle.loads(pickle.dumps(s))
    assert hash(s) == hash(pickle.loads(pickle.dumps(s)))
    assert ct.diff(tree, [Scaled(5.0, float("nan")), Scaled(6.0, np.array([np.nan, 1.0]))]) == []
    assert ct.structure(Scaled(1.0, float("nan"))) != ct.structure(Scaled(1.0, 2.0))


# --- which leaves the identity cache treats as values ----------------------------------


@pytest.mark.parametrize(
    "value",
    [Decimal("1.5"), Fraction(1, 3), np.float32(2.0), np.int64(3), frozenset({1}), range(3)],
    ids=["Decimal", "Fraction", "float32", "int64", "frozenset", "range"],
)
def test_numbers_and_other_values_are_not_cached_by_identity(value):
    """Every numbers.Number (Decimal, Fraction, numpy scalars), frozenset and range is
    a value: f runs at each occurrence."""
    calls: list[Any] = []

    def count(v: Any) -> int:
        calls.append(v)
        return len(calls) - 1

    assert ct.fmap(count, [value, value, value]) == [0, 1, 2]


def test_objects_are_cached_by_identity():
    """A leaf that is not a value (an arbitrary object) is mapped once per object."""
    obj = object()
    calls: list[Any] = []
    out = ct.fmap(lambda v: calls.append(v) or len(calls), [obj, obj])
    assert out == [1, 1] and calls == [obj]


# --- keys that disagree with the children -----------------------------------------------


class Pair:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


def test_register_node_keys_must_match_the_children():
    """Too few or duplicate keys raise, naming the type and the counts."""

    class Short(Pair):
        pass

    class Twice(Pair):
        pass

    ct.register_node(
        Short, lambda p: ((p.a, p.b), None), lambda aux, ch: Short(*ch), keys=lambda p: ["a"]
    )
    ct.register_node(
        Twice, lambda p: ((p.a, p.b), None), lambda aux, ch: Twice(*ch), keys=lambda p: "aa"
    )
    for op in (ct.leaves_with_path, lambda t: ct.fmapstructure(str, t), ct.structure):
        with pytest.raises(
            ct.ContainerDefinitionError,
            match=exact(
                "register_node on 'Short': keys(x) returned 1 key for 2 children. Every "
                "child needs exactly "
                "one key, distinct from its siblings', in the order of the children."
            ),
        ):
            op(Short(1, 2))
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=r"keys\(x\) returned the same key twice: \.a\. Every child",
    ):
        ct.leaves_with_path(Twice(1, 2))


def test_register_node_key_count_reads_right_for_one_child():
    """keys(x) that gives 2 keys for 1 child says "2 keys for 1 child"."""

    class One:
        def __init__(self, v: Any) -> None:
            self.v = v

    ct.register_node(One, lambda o: ((o.v,), None), lambda aux, ch: One(*ch), keys=lambda o: "ab")
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "register_node on 'One': keys(x) returned 2 keys for 1 child. Every child needs "
            "exactly one key, distinct from its siblings', in the order of the children."
        ),
    ):
        ct.leaves_with_path(One(1))


def test_register_node_flatten_must_return_a_pair():
    """A flatten that returns something else than (children, aux) is reported as such."""

    class Bad(Pair):
        pass

    ct.register_node(Bad, lambda p: [p.a, p.b], lambda aux, ch: Bad(*ch))
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=r"^register_node on '.*Bad': flatten must return a pair \(children, aux\), got \[1, 2\]\.$",
    ):
        ct.leaves(Bad(1, 2))


def test_a_hand_written_container_whose_serialize_keys_disagree_is_refused():
    """__container_serialize__ keys must be one per child: paths would lose leaves."""

    class Hand:
        def __init__(self, a: Any, b: Any) -> None:
            self.a, self.b = a, b

        def __container_traverse__(self, acc: Any, fun: Any, /) -> Any:
            a, acc = fun(self.a, acc)
            b, acc = fun(self.b, acc)
            return Hand(a, b), acc

        def __container_reduce__(self, acc: Any, fun: Any, /) -> Any:
            return fun(self.b, fun(self.a, acc))

        def __container_serialize__(self) -> Any:
            return "hand", [("a", self.a)], {}

    with pytest.raises(
        ct.ContainerDefinitionError,
        match=r"Hand\.__container_serialize__ gave 1 key for 2 children\.",
    ):
        ct.leaves_with_path(Hand(1, 2))


def test_a_class_with_only_container_traverse_is_refused():
    """Part of the protocol is not a node: the error names the missing methods."""

    class Partial:
        def __container_traverse__(self, acc: Any, fun: Any, /) -> Any:
            return self, acc

    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "leaves: at '[0]': 'Partial' defines __container_traverse__ but not __container_reduce__ or "
            "__container_serialize__: a hand-written container implements all of "
            "__container_traverse__, __container_reduce__, __container_serialize__ "
            "(see containers.Container)."
        ),
    ):
        ct.leaves([Partial()])


def _hand_written(traverse=None, reduce=None, serialize=None):
    """A Pair-like hand-written container whose methods can be replaced by wrong ones."""

    class Wrong:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def __container_traverse__(self, acc, fun, /):
            if traverse is not None:
                return traverse(self, acc, fun)
            a, acc = fun(self.a, acc)
            b, acc = fun(self.b, acc)
            return Wrong(a, b), acc

        def __container_reduce__(self, acc, fun, /):
            if reduce is not None:
                return reduce(self, acc, fun)
            return fun(self.b, fun(self.a, acc))

        def __container_serialize__(self):
            if serialize is not None:
                return serialize(self)
            return "Wrong", [("a", self.a), ("b", self.b)], {}

        @classmethod
        def __container_deserialize__(cls, children, metadata, /):
            return cls(*(v for _, v in children))

    return Wrong


def _only_first(self, acc, fun):
    a, acc = fun(self.a, acc)
    return type(self)(a, self.b), acc


def _three(self, acc, fun):
    a, acc = fun(self.a, acc)
    b, acc = fun(self.b, acc)
    _, acc = fun(self.b, acc)
    return type(self)(a, b), acc


@pytest.mark.parametrize(
    ("methods", "message"),
    [
        (
            {"traverse": lambda self, acc, fun: 1},
            "Wrong.__container_traverse__ returned 1; it must return a pair (new_self, acc): "
            "the rebuilt object and the accumulator the last call of fun returned.",
        ),
        (
            {"traverse": _only_first},
            "Wrong.__container_traverse__ called fun on 1 child, but __container_reduce__ "
            "gave 2: the two methods must visit the same children in the same order (a "
            "child's new value was lost).",
        ),
        (
            {"traverse": _three},
            "Wrong.__container_traverse__ called fun on more children than the 2 that "
            "__container_reduce__ gave: the two methods must visit the same children in "
            "the same order.",
        ),
        (
            {"reduce": lambda self, acc, fun: acc},
            "Wrong.__container_traverse__ called fun on more children than the 0 that "
            "__container_reduce__ gave: the two methods must visit the same children in "
            "the same order.",
        ),
    ],
)
def test_a_hand_written_traverse_that_disagrees_with_reduce_is_named(methods, message):
    """A hand-written container whose traverse returns no pair, or visits other children
    than its reduce, is a ContainerDefinitionError naming the class and the method: it
    was a bare TypeError or StopIteration from inside fmap, or a mapped child silently
    dropped."""
    wrong = _hand_written(**methods)
    with pytest.raises(ct.ContainerDefinitionError, match=exact(message)):
        ct.fmap(lambda v: v * 10, [wrong(1, 2)])
    leaves, structure = ct.flatten([wrong(1, 2)])
    with pytest.raises(ct.ContainerDefinitionError, match=exact(message)):
        ct.unflatten(structure, leaves)


def test_a_hand_written_serialize_that_returns_no_triple_is_named():
    """__container_serialize__ must return (type_name, [(key, child)], metadata): another
    value is a ContainerDefinitionError naming it, where paths are built (it was a bare
    "'int' object is not subscriptable")."""
    wrong = _hand_written(serialize=lambda self: 3)
    with pytest.raises(
        ct.ContainerDefinitionError,
        match=exact(
            "Wrong.__container_serialize__ returned 3; it must return a triple (type_name, "
            "[(key, child), ...], metadata_dict)."
        ),
    ):
        ct.leaves_with_path([wrong(1, 2)])


class _Keyed:
    """A register_node class with keys, for the pickle test below."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


def test_a_keyed_register_node_structure_pickles_under_the_registry_module_name():
    """A Structure of a register_node type with keys pickles its aux as
    containers._registry._KeyedAux (its name before _kinds existed), and loads back."""
    ct.register_node(
        _Keyed,
        lambda k: ((k.a, k.b), None),
        lambda aux, ch: _Keyed(*ch),
        keys=lambda k: ["a", "b"],
    )
    s = ct.structure(_Keyed(1, 2))
    data = pickle.dumps(s)
    assert b"containers._registry" in data and b"containers._kinds" not in data
    assert pickle.loads(data) == s
