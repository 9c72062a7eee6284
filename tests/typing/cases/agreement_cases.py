"""Runtime/static agreement table: what the plugin infers is what the runtime returns.

Each ``case_*`` returns ``assert_type(<call>, <type>)``. tests/typing/test_checkers.py
checks this file with mypy and the plugin (so the plugin infers exactly ``<type>``), and
tests/typing/test_agreement.py runs each case and checks that the value it returns
conforms to the same ``<type>`` expression, evaluated at runtime. So this file must also
run: no deliberate errors here.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Generic, NamedTuple, TypedDict, TypeVar

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import containers as ct

T = TypeVar("T")
Array = npt.NDArray[np.float64]
AnyArray = npt.NDArray[Any]  # what numpy's ufuncs return (its shape type varies by version)


@ct.container
class Pair(Generic[T]):
    a: T
    b: T


@ct.container(children=["w", "b"], keep=["name"])
class Linear:
    w: Array
    b: Array
    name: str = "linear"
    calls: int = 0


@ct.container
class MLP:
    layers: list[Linear]
    scale: Pair[float]


class Point(NamedTuple):
    x: int
    y: int


class PairDict(TypedDict):
    a: str
    b: str


class PointDict(TypedDict):
    x: float
    y: float


class LinearDict(TypedDict):
    w: AnyArray
    b: AnyArray


def ints() -> Pair[int]:
    return Pair(1, 2)


def maybe(present: bool) -> Pair[int] | None:
    return ints() if present else None


def layer() -> Linear:
    return Linear(np.zeros(2), np.ones(2), "fc", calls=3)


def case_fmap_str() -> object:
    return assert_type(ct.fmap(str, ints()), Pair[str])


def case_fmap_float() -> object:
    return assert_type(ct.fmap(float, ints()), Pair[float])


def case_fmap_lambda() -> object:
    return assert_type(ct.fmap(lambda x: x / 2, ints()), Pair[float])


def case_fmap_nested() -> object:
    return assert_type(ct.fmap(str, Pair(ints(), ints())), Pair[Pair[str]])


def case_fmap_builtins() -> object:
    tree: dict[str, list[Pair[int]]] = {"b": [ints()], "a": []}
    return assert_type(ct.fmap(str, tree), dict[str, list[Pair[str]]])


def case_fmap_tuple_with_none() -> object:
    return assert_type(ct.fmap(str, (1, 2.5, None)), tuple[str, str, None])


def case_fmap_optional() -> object:
    return assert_type(ct.fmap(str, maybe(True)), Pair[str] | None)


def case_fmap_optional_none() -> object:
    return assert_type(ct.fmap(str, maybe(False)), Pair[str] | None)


def case_fmap_deque() -> object:
    return assert_type(ct.fmap(str, deque([1, 2])), deque[str])


def case_fmap_kept_and_reset_fields() -> object:
    return assert_type(ct.fmap(np.tanh, layer()), Linear)


def case_fmap_model() -> object:
    mlp = MLP([layer(), layer()], Pair(0.5, 2.0))
    return assert_type(ct.fmap(lambda v: v * 2, mlp), MLP)


def case_fmap_namedtuple() -> object:
    return assert_type(ct.fmap(lambda v: v + 1, Point(1, 2)), Point)


def case_fmap_two_trees() -> object:
    return assert_type(ct.fmap(lambda a, b: a + b, ints(), Pair(0.5, 1.5)), Pair[float])


def case_fmap_with_path() -> object:
    return assert_type(ct.fmap_with_path(lambda p, v: ct.keystr(p), ints()), Pair[str])


def case_fmapstructure() -> object:
    return assert_type(ct.fmapstructure(str, ints()), PairDict)


def case_fmapstructure_namedtuple() -> object:
    return assert_type(ct.fmapstructure(lambda v: v / 2, Point(1, 2)), PointDict)


def case_fmapstructure_drops_kept_fields() -> object:
    return assert_type(ct.fmapstructure(np.exp, [layer()]), list[LinearDict])


def case_flatten_leaves() -> object:
    return assert_type(ct.flatten(Pair(ints(), ints()))[0], list[int])


def case_flatten_structure() -> object:
    return assert_type(ct.flatten(ints())[1], ct.Structure[Pair[int]])


def case_leaves_of_mixed_tree() -> object:
    tree: list[Pair[int] | tuple[str, None]] = [ints(), ("x", None)]
    return assert_type(ct.leaves(tree), list[int | str])


def case_leaves_none_is_leaf() -> object:
    tree: list[float | None] = [None, 1.5]
    return assert_type(ct.leaves(tree, none_is_leaf=True), list[float | None])


def case_unflatten() -> object:
    _, s = ct.flatten(ints())
    return assert_type(ct.unflatten(s, ["a", "b"]), Pair[str])


def case_structure_unflatten() -> object:
    s = ct.structure(Pair(ints(), ints()))
    return assert_type(s.unflatten([0.5, 1.5, 2.5, 3.5]), Pair[Pair[float]])


def case_unflatten_round_trip() -> object:
    leaves, s = ct.flatten(MLP([layer()], Pair(1.0, 2.0)))
    return assert_type(ct.unflatten(s, leaves), MLP)


def case_fallback_is_any() -> object:
    anything: Any = ints()
    return assert_type(ct.fmap(str, anything), Any)
