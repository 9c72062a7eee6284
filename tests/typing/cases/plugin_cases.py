"""Typing cases for mypy with the ``containers.mypy`` plugin.

Never executed; tests/typing/test_checkers.py checks it with mypy and the plugin. Expected
errors are ``# type: ignore[code]`` (mypy reports an ignore that is no longer needed), and
tests/typing/test_plugin.yml pins their exact wording.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, deque
from typing import Any, Generic, NamedTuple, TypedDict, TypeVar

import attrs
import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import containers as ct

T = TypeVar("T")
Array = npt.NDArray[np.float64]


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


@ct.container(children=["x"])
class Tagged(Generic[T]):
    x: T
    tag: T  # kept: a rebuilt Tagged keeps its T


@ct.container
class Mixed(Generic[T]):
    w: Array
    extra: T


@ct.container(children=["xs", "n"])
class Many(Generic[T]):
    xs: list[T]
    n: int
    label: str = ""


class Point(NamedTuple):
    x: int
    y: int


@ct.container(children=["x"])
class Labelled(NamedTuple):
    x: int
    label: str


class Row(TypedDict):
    k: int
    v: float


@ct.container
@dataclasses.dataclass
class Existing:
    x: int


@ct.container(children=["x"])
@attrs.define
class WithAttrs:
    x: int
    _secret: str = "s"


def to_str(x: int) -> str:
    return str(x)


def ints() -> Pair[int]:
    return Pair(1, 2)


def case_fmap_reparameterizes() -> None:
    p = ints()
    assert_type(ct.fmap(str, p), Pair[str])
    assert_type(ct.fmap(to_str, p), Pair[str])
    assert_type(ct.fmap(float, p), Pair[float])
    assert_type(ct.fmap(np.asarray, p), Pair[npt.NDArray[Any]])


def case_fmap_lambdas_get_the_leaf_type() -> None:
    p = ints()
    assert_type(ct.fmap(lambda x: x + 1, p), Pair[int])
    assert_type(ct.fmap(lambda x: x / 2, p), Pair[float])
    assert_type(ct.fmap(lambda x: f"{x:03d}", p), Pair[str])
    ct.fmap(lambda x: x.upper(), p)  # type: ignore[attr-defined]


def case_fmap_result_context() -> None:
    out: Pair[float] = ct.fmap(lambda x: x * 2, ints())
    assert_type(out, Pair[float])


def case_fmap_through_builtins() -> None:
    p = ints()
    assert_type(ct.fmap(str, [p, p]), list[Pair[str]])
    assert_type(ct.fmap(str, (p, 1)), tuple[Pair[str], str])
    assert_type(ct.fmap(str, {"a": p}), dict[str, Pair[str]])
    assert_type(ct.fmap(str, Pair(p, p)), Pair[Pair[str]])
    assert_type(ct.fmap(str, Pair([p], [p])), Pair[list[Pair[str]]])
    optional: Pair[int] | None = None
    assert_type(ct.fmap(str, optional), Pair[str] | None)
    mixed: list[Pair[int] | tuple[Pair[int], int]] = []
    assert_type(ct.fmap(str, mixed), list[Pair[str] | tuple[Pair[str], str]])
    assert_type(ct.fmap(str, deque([1])), deque[str])
    assert_type(ct.fmap(str, OrderedDict(a=1)), OrderedDict[str, str])


def case_fmap_concrete_fields() -> None:
    layer = Linear(np.zeros(2), np.zeros(2))
    assert_type(ct.fmap(np.tanh, layer), Linear)
    assert_type(ct.fmap(lambda w: w * 2, layer), Linear)
    ct.fmap(str, layer)  # type: ignore[containers-leaf]
    assert_type(
        ct.fmap(np.tanh, Mixed(np.zeros(2), 1.0)),
        Mixed[npt.NDArray[Any]],
    )


def case_fmap_each_field_checked_with_its_leaves() -> None:
    mlp = MLP([Linear(np.zeros(2), np.zeros(2))], Pair(1.0, 2.0))
    assert_type(ct.fmap(lambda v: v, mlp), MLP)
    assert_type(ct.leaves(mlp), list[Array | float])
    ct.fmap(lambda v: f"{v}", mlp)  # type: ignore[containers-leaf]


def case_fmap_kept_type_parameter_is_frozen() -> None:
    assert_type(ct.fmap(lambda x: x + 1, Tagged(1, 2)), Tagged[int])
    ct.fmap(str, Tagged(1, 2))  # type: ignore[containers-leaf]


def case_fmap_concrete_child_inside_generic() -> None:
    many = Many([1, 2], 3)
    assert_type(ct.fmap(lambda v: v * 2, many), Many[int])
    ct.fmap(float, many)  # type: ignore[containers-leaf]


def case_fmap_f_must_take_the_leaves() -> None:
    words = Pair("a", "b")
    ct.fmap(to_str, words)  # type: ignore[arg-type]
    ct.fmap(to_str, (1, "a"))  # type: ignore[arg-type]


def case_fmap_result_is_checked_downstream() -> None:
    ct.fmap(str, ints()).a + 1  # type: ignore[operator]


def case_fmap_several_trees() -> None:
    assert_type(ct.fmap(lambda a, b: a + b, ints(), Pair(0.5, 1.5)), Pair[float])
    assert_type(ct.fmap(lambda a, b: b, ints(), Pair("x", "y")), Pair[str])


def case_fmap_namedtuple_and_typeddict() -> None:
    assert_type(ct.fmap(lambda v: v + 1, Point(1, 2)), Point)
    ct.fmap(str, Point(1, 2))  # type: ignore[containers-leaf]
    row: Row = {"k": 1, "v": 2.0}
    assert_type(ct.fmap(lambda v: v, row)["v"], float | int)


def case_fmap_unknown_structure_falls_back() -> None:
    def generic(p: Pair[T]) -> None:
        assert_type(ct.fmap(str, p), Any)

    anything: object = 1
    assert_type(ct.fmap(str, anything), Any)
    assert_type(ct.fmap(str, Pair(1, "x")), Any)  # mypy joins the fields to object
    untyped: Any = None
    assert_type(ct.fmap(str, untyped), Any)
    assert_type(ct.fmap(str, ints(), exclude=lambda v: True), Any)


def case_declared_namedtuple_with_kept_field_falls_back() -> None:
    assert_type(ct.fmap(str, Labelled(1, "a")), Any)


def case_fmapstructure() -> None:
    class PairDict(TypedDict):
        a: str
        b: str

    class LinearDict(TypedDict):
        w: str
        b: str

    class PointDict(TypedDict):
        x: str
        y: str

    assert_type(ct.fmapstructure(str, ints()), PairDict)
    assert_type(ct.fmapstructure(str, [Linear(np.zeros(1), np.zeros(1))]), list[LinearDict])
    assert_type(ct.fmapstructure(str, Point(1, 2)), PointDict)
    assert_type(ct.fmapstructure(str, {"k": (1, 2)}), dict[str, tuple[str, str]])


def case_flatten_leaves() -> None:
    leaves, s = ct.flatten(Pair(ints(), ints()))
    assert_type(leaves, list[int])
    assert_type(s, ct.Structure[Pair[Pair[int]]])
    assert_type(ct.leaves({"a": (1, "x"), "b": None}), list[int | str])
    assert_type(ct.leaves([None, 1.5], none_is_leaf=True), list[float | None])
    assert_type(ct.flatten(ints(), is_leaf=lambda v: False)[0], list[Any])


def case_unflatten_rebuilds() -> None:
    leaves, s = ct.flatten(ints())
    assert_type(ct.unflatten(s, leaves), Pair[int])
    assert_type(ct.unflatten(s, ["a", "b"]), Pair[str])
    assert_type(s.unflatten([1.5, 2.5]), Pair[float])
    layer_leaves, layer_s = ct.flatten(Linear(np.zeros(1), np.zeros(1)))
    assert_type(ct.unflatten(layer_s, layer_leaves), Linear)
    ct.unflatten(layer_s, ["a", "b"])  # type: ignore[containers-leaf]


def case_unflatten_after_custom_leaves_falls_back() -> None:
    _, s = ct.flatten(Pair(ints(), ints()), is_leaf=lambda v: isinstance(v, Pair))
    assert_type(s, ct.Structure[Any])
    assert_type(ct.unflatten(s, [1, 2]), Any)


def case_existing_classes_keep_their_settings() -> None:
    e = Existing(1)
    e.x = 2
    w = WithAttrs(1, "s")
    w.x = 2
    assert_type(ct.fmap(lambda v: v + 1, w), WithAttrs)


def case_tree_accepts_containers() -> None:
    def total(t: ct.Tree[int]) -> int:
        return 0

    total(ints())
    total([ints(), (3, {"k": Pair(Pair(1, 2), Pair(3, 4))})])
    total(Many([1], 2))
    total(Pair("a", "b"))  # type: ignore[arg-type]


def case_declarations_are_checked() -> None:
    @ct.container(children=["w", "bais"])  # type: ignore[containers-field]
    class Typo:
        w: int
        b: int

    @ct.container(children=["x"], keep=["x"])  # type: ignore[containers-field]
    class Both:
        x: int

    @ct.container(children=["x"], keep=["y"])  # type: ignore[containers-field]
    class NoDefault:
        x: int
        y: int
        z: int

    names = ["x"]

    @ct.container(children=names)  # not a literal: only the runtime checks it
    class Dynamic:
        x: int

    assert_type(Dynamic(1).x, int)


def case_fmap_where_keeps_the_declared_signature() -> None:
    # where= maps some leaves only, so (like exclude=) the plugin keeps fmap's signature.
    assert_type(ct.fmap(str, ints(), where=int), Any)
    assert_type(ct.fmap(lambda v: v + 1, ints(), where="param"), Any)
    # A subset of the leaves has the leaves' type.
    assert_type(ct.leaves(ints(), where="param"), list[int])
