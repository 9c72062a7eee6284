"""Typing cases every checker agrees on: mypy without and with the plugin, and pyright.

Never executed; tests/typing/test_checkers.py checks it. An expected error is written as
``# type: ignore[code]``, so a checker that stops reporting it fails on the unused ignore.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import containers as ct

T = TypeVar("T")


@ct.container
class Pair(Generic[T]):
    a: T
    b: T


@ct.container(children=["w", "b"], keep=["name"])
class Linear:
    w: npt.NDArray[Any]
    b: npt.NDArray[Any]
    name: str = "linear"
    calls: int = 0


@ct.container(frozen=False)
class Box(Generic[T]):
    value: T


def case_synthesized_init() -> None:
    assert_type(Pair(1, 2), Pair[int])
    assert_type(Pair("a", "b").a, str)
    assert_type(Linear(np.zeros(2), np.zeros(2)).name, str)
    Pair(1, 2, 3)  # type: ignore[call-arg]
    Linear(np.zeros(2))  # type: ignore[call-arg]


def case_frozen_by_default() -> None:
    p = Pair(1, 2)
    p.a = 3  # type: ignore[misc]
    box = Box(1)
    assert_type(box.value, int)
    box.value = 2


def case_field_specifier() -> None:
    @ct.container
    class Tagged:
        w: float = ct.field(default=0.0, tags=("param",))

    assert_type(Tagged().w, float)
    assert_type(Tagged(1.5).w, float)


def case_structure_remembers_the_tree() -> None:
    p = Pair(1, 2)
    assert_type(ct.flatten(p)[1], ct.Structure[Pair[int]])
    assert_type(ct.structure(p), ct.Structure[Pair[int]])


Part = dict[tuple[ct.AttrKey | ct.IndexKey | ct.DictKey, ...], Any]


def case_split_merge_state() -> None:
    p = Pair(1.0, 2.0)
    s, params, rest = ct.split(p, "param", ...)
    assert_type(s, ct.Structure[Pair[float]])
    assert_type(params, Part)
    assert_type(ct.merge(s, params, rest), Pair[float])
    assert_type(ct.merge(s, {k: v * 0.5 for k, v in params.items()}, rest), Pair[float])
    s1, everything = ct.split(p)
    assert_type(ct.merge(s1, everything), Pair[float])
    assert_type(ct.split(p, float, int, str, bytes, ...), tuple[Any, ...])
    assert_type(ct.state(p, "param"), Part)
    assert_type(ct.state(p, float, ...), tuple[Part, ...])
    ct.split(p, 1)  # type: ignore[call-overload]


def case_filters() -> None:
    from containers.filters import All, Not, OfType, PathContains, to_predicate

    pred = to_predicate([float, "param", ..., None, lambda path, v: len(path) > 1])
    assert_type(pred((ct.AttrKey("a"),), 1.0), bool)
    ct.state(Pair(1, 2), All(OfType(int), Not(PathContains("a"))), (str, "tag"))
    tagged: list[Any] = ct.leaves(Pair(1, 2), where=int)
    assert_type(tagged, list[Any])


def case_partition_combine() -> None:
    p = Pair(1.0, 2.0)
    matching, others = ct.partition(p, float)
    assert_type(matching, Pair[float])
    assert_type(ct.combine(matching, others), Pair[float])


def case_treelize() -> None:
    @ct.treelize("outer", missing=0)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    assert_type(add({"a": 1}, {"b": 2}), Any)
    assert_type(add(1, b=[2, 3]), Any)
    assert_type(ct.subside([{"a": 1}, {"a": 2}]), Any)
    assert_type(ct.rise({"a": (1, 2)}), Any)
    ct.treelize(inherit=1.5)  # type: ignore[arg-type]


def case_serialization(data: bytes) -> None:
    assert_type(ct.deserialize(data, expect=Linear), Linear)
    assert_type(ct.load("m.safetensors", expect=Linear, mmap=True), Linear)
    assert_type(ct.deserialize(data), Any)
    assert_type(ct.load("m.safetensors"), Any)
    ct.save("m.safetensors", Linear(np.zeros(1), np.zeros(1)))
    ct.load("m.safetensors", limits=ct.Limits(max_depth=10)).anything  # Any: no error
    ct.deserialize(data, expect=Linear).missing  # type: ignore[attr-defined]
