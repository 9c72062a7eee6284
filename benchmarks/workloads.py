"""Workloads: the input trees, the hand-written baseline and what each library runs.

The trees and workloads are the ones benchmarks/README.md lists. This module builds
callables; it never times them (measure.py) nor prints (report.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from adapters import Fn, Lib, Model, frozen_dataclasses

Op = Callable[[], object]

TUPLES_PER_KEY = 5  # W1: {key: [(f, f, f, f) x 5]}, 20 leaves per key
LAYERS_PER_MLP = 4  # W3: MLP(layers=(Linear(w, b),) * 4, name)


def inc(x: Any) -> Any:
    return x + 1


def identity(x: Any) -> Any:
    return x


def add(a: Any, b: Any) -> Any:
    return a + b


# --- hand-written baseline: code that knows the exact structure, no dispatch ---------


Linear, MLP = HAND_MODEL = frozen_dataclasses()  # frozen dataclasses, registered nowhere
HAND = Lib(name="hand", model=HAND_MODEL, note="structure-specific comprehensions")
F_ONLY = Lib(
    name="f-only",
    note="the bare f calls: list(map(f, leaves)) over the leaves, listed beforehand; "
    "a library's overhead is its time minus this",
)


def hand_flatten(tree: dict[str, list[tuple[float, ...]]]) -> tuple[list[float], list[str]]:
    return [x for v in tree.values() for t in v for x in t], list(tree)


def hand_unflatten(keys: list[str], leaves: list[float]) -> dict[str, list[tuple[float, ...]]]:
    it = iter(leaves)
    return {
        k: [(next(it), next(it), next(it), next(it)) for _ in range(TUPLES_PER_KEY)] for k in keys
    }


def hand_leaves(tree: dict[str, list[tuple[float, ...]]]) -> list[float]:
    return [x for v in tree.values() for t in v for x in t]


def hand_map(f: Fn, tree: dict[str, list[tuple[float, ...]]]) -> dict[str, Any]:
    return {k: [(f(a), f(b), f(c), f(d)) for a, b, c, d in v] for k, v in tree.items()}


def hand_map2(f: Fn, tree: dict[str, list[Any]], other: dict[str, list[Any]]) -> dict[str, Any]:
    return {
        k: [
            (f(a, e), f(b, g), f(c, h), f(d, i))
            for (a, b, c, d), (e, g, h, i) in zip(v, other[k], strict=True)
        ]
        for k, v in tree.items()
    }


def hand_flatten_with_path(tree: dict[str, list[Any]]) -> tuple[list[Any], list[str]]:
    pairs = [
        ((k, i, j), x) for k, v in tree.items() for i, t in enumerate(v) for j, x in enumerate(t)
    ]
    return pairs, list(tree)


def hand_map_params(f: Fn, params: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {k: {"bias": f(v["bias"]), "kernel": f(v["kernel"])} for k, v in params.items()}


def hand_map2_params(
    f: Fn, params: dict[str, dict[str, Any]], other: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    return {
        k: {"bias": f(v["bias"], w["bias"]), "kernel": f(v["kernel"], w["kernel"])}
        for (k, v), w in zip(params.items(), other.values())
    }


def hand_map_mlps(f: Fn, mlps: list[Any]) -> list[Any]:
    return [MLP(tuple([Linear(f(x.w), f(x.b)) for x in m.layers]), m.name) for m in mlps]


def hand_map2_mlps(f: Fn, mlps: list[Any], others: list[Any]) -> list[Any]:
    out = []
    for m, o in zip(mlps, others, strict=True):
        layers = zip(m.layers, o.layers, strict=True)
        out.append(MLP(tuple([Linear(f(x.w, y.w), f(x.b, y.b)) for x, y in layers]), m.name))
    return out


def hand_fmapstructure_mlps(f: Fn, mlps: list[Any]) -> list[dict[str, Any]]:
    return [{"layers": tuple([{"w": f(x.w), "b": f(x.b)} for x in m.layers])} for m in mlps]


def mlp_arrays(mlps: list[Any]) -> list[Any]:
    """The arrays of hand-model W3 trees, in tree order: the leaves f is called on."""
    return [a for m in mlps for x in m.layers for a in (x.w, x.b)]


def f_calls(f: Fn, *leaf_lists: list[Any]) -> Op:
    """The f-only call: f over leaves listed beforehand, as a tree_map calls it."""

    def op() -> object:
        return list(map(f, *leaf_lists))

    return op


def hand_fcollect_mlps(mlps: list[Any]) -> list[Any]:
    out: list[Any] = [mlps]
    append = out.append
    for m in mlps:
        append(m)
        append(m.layers)
        for x in m.layers:
            append(x)
            append(x.w)
            append(x.b)
    return out


def hand_deep_flatten(tree: Any) -> tuple[list[Any], int]:
    depth = 0
    while type(tree) is list:
        tree = tree[0]
        depth += 1
    return [tree], depth


def hand_deep_unflatten(depth: int, leaves: list[Any]) -> Any:
    tree = leaves[0]
    for _ in range(depth):
        tree = [tree]
    return tree


def hand_deep_map(f: Fn, tree: Any) -> Any:
    leaves, depth = hand_deep_flatten(tree)
    return hand_deep_unflatten(depth, [f(leaves[0])])


# --- inputs --------------------------------------------------------------------------


class Case:
    """The inputs of one workload at one size N, built once and shared by every library
    (run.py makes a new Case for each workload, and drops it once measured).

    W3 trees hold arrays nothing else refers to, as a model holds its parameters: each
    library's trees get arrays of their own, drawn from the same seed (equal values).
    The held W3 trees (the `-held` workloads) are built over one list of arrays that
    this Case keeps, so every array is also referenced from outside the tree.
    """

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n = n
        self._seed = seed
        self._w1: dict[int, dict[str, list[tuple[float, ...]]]] = {}
        self._held: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._w3: dict[tuple[Model, int, bool], list[Any]] = {}
        self._params: dict[int, dict[str, dict[str, np.ndarray]]] = {}
        self._deep: list[Any] | None = None

    def w1(self, which: int = 0) -> dict[str, list[tuple[float, ...]]]:
        """`{key: [(f, f, f, f) x 5]}` with N distinct floats; keys inserted in sorted order."""
        if which not in self._w1:
            base = which * self.n
            self._w1[which] = {
                f"k{i:06d}": [
                    tuple((base + 20 * i + 4 * j + k) * 0.25 + 0.125 for k in range(4))
                    for j in range(TUPLES_PER_KEY)
                ]
                for i in range(self.n // (4 * TUPLES_PER_KEY))
            }
        return self._w1[which]

    def _arrays(self, which: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """N pairs (w 4x4, b 4), the same values on every call with this `which`."""
        rng = np.random.default_rng(self._seed + which)
        return [(rng.standard_normal((4, 4)), rng.standard_normal(4)) for _ in range(self.n)]

    def w3(self, model: Model, which: int = 0, held: bool = False) -> list[Any]:
        """`[MLP((Linear(w, b),) * 4, name)]` with N Linear nodes: 2N small arrays.

        The arrays are the tree's own unless `held`: then they also sit in a list this
        Case keeps (and in the held trees of every other library).
        """
        key = (model, which, held)
        if key not in self._w3:
            if held and which not in self._held:
                self._held[which] = self._arrays(which)
            arrays = self._held[which] if held else self._arrays(which)
            linear, mlp = model
            self._w3[key] = [
                mlp(
                    tuple([linear(w, b) for w, b in arrays[i : i + LAYERS_PER_MLP]]),
                    f"mlp{i // LAYERS_PER_MLP}",
                )
                for i in range(0, self.n, LAYERS_PER_MLP)
            ]
        return self._w3[key]

    def params(self, which: int = 0) -> dict[str, dict[str, np.ndarray]]:
        """`{"layer00000": {"bias": b, "kernel": w}, ...}`: N arrays, N/2 layers, held
        by the tree alone; the same arrays' values as the W3 trees'."""
        if which not in self._params:
            self._params[which] = {
                f"layer{i:05d}": {"bias": b, "kernel": w}
                for i, (w, b) in enumerate(self._arrays(which)[: self.n // 2])
            }
        return self._params[which]

    def deep(self) -> list[Any]:
        """A list nested N deep with one float at the bottom: `[[[...[0.5]...]]]`."""
        if self._deep is None:
            tree: Any = 0.5
            for _ in range(self.n):
                tree = [tree]
            self._deep = tree
        return self._deep


# --- how a workload turns functions and inputs into one timed call ---------------------


def call(fns: tuple[Fn, ...], args: tuple[Any, ...]) -> Op:
    return partial(fns[0], *args)


def round_trip(fns: tuple[Fn, ...], args: tuple[Any, ...]) -> Op:
    flatten, unflatten = fns
    (tree,) = args

    def op() -> object:
        leaves, structure = flatten(tree)
        return unflatten(structure, leaves)

    return op


def unflatten_only(fns: tuple[Fn, ...], args: tuple[Any, ...]) -> Op:
    flatten, unflatten = fns
    leaves, structure = flatten(*args)
    return partial(unflatten, structure, leaves)


def whole(lib: Lib, result: Any) -> Any:
    return result


def first(lib: Lib, result: Any) -> Any:
    return result[0]


def path_pairs(lib: Lib, result: Any) -> Any:
    return lib.path_pairs(result)


@dataclasses.dataclass(frozen=True)
class Workload:
    """One benchmark: what runs, on which input, and what "per leaf" counts."""

    name: str
    title: str
    uses: tuple[str, ...]  # the Lib functions it needs
    hand: tuple[Fn, ...]  # the hand-written functions in their place
    args: Callable[[Case, Lib], tuple[Any, ...]]
    compose: Callable[[tuple[Fn, ...], tuple[Any, ...]], Op] = call
    view: Callable[[Lib, Any], Any] = whole  # the part of a result that is compared
    unit: str = "leaf"
    units_per_n: int = 1
    deep: bool = False  # N is a depth; checked in a child process (a crash is reported)
    on_classes: bool = False  # runs on the W3 trees, in each library's own classes
    # The same f calls on the same leaves, without a tree (F_ONLY), for workloads with f.
    f_only: Callable[[Case], Op] | None = None

    def supports(self, lib: Lib) -> bool:
        """Whether `lib` has the functions (and the W3 classes) this workload needs."""
        if lib is HAND:
            return True
        if lib.only is not None and self.name not in lib.only:
            return False
        if self.on_classes and lib.model is None:
            return False
        return all(getattr(lib, name) is not None for name in self.uses)

    def bind(self, lib: Lib, case: Case) -> Op:
        """The zero-argument call to time for a `lib` that `supports` this workload."""
        fns = self.hand if lib is HAND else tuple(getattr(lib, name) for name in self.uses)
        return self.compose(fns, self.args(case, lib))

    def units(self, n: int) -> int:
        return n * self.units_per_n


def _w3_args(
    f: Fn | None, trees: int = 1, held: bool = False
) -> Callable[[Case, Lib], tuple[Any, ...]]:
    """Arguments `(f, *W3 trees)` in `lib`'s classes; no `f` when it is None."""

    def args(case: Case, lib: Lib) -> tuple[Any, ...]:
        assert lib.model is not None, "Workload.supports checks it"
        fs = () if f is None else (lib.array_fn(f),)
        return (*fs, *(case.w3(lib.model, which, held) for which in range(trees)))

    return args


def _w3_map(name: str, title: str, f: Fn, held: bool) -> Workload:
    """One tree_map of `f` over the W3 trees (held: their arrays also held outside)."""
    return Workload(
        name,
        title,
        uses=("tree_map",),
        hand=(hand_map_mlps,),
        args=_w3_args(f, held=held),
        unit="array",
        units_per_n=2,
        on_classes=True,
        f_only=lambda case: f_calls(f, mlp_arrays(case.w3(HAND_MODEL, 0, held))),
    )


W3_TREE = "[MLP((Linear(w, b),) * 4, name)] (N Linear, 2N arrays)"
W1_TREE = "{key: [(f, f, f, f) x 5]}"
PARAMS_TREE = '{layer: {"bias": b, "kernel": w}} (N/2 layers, N arrays)'

WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "W1",
        f"flatten + unflatten of {W1_TREE}",
        uses=("flatten", "unflatten"),
        hand=(hand_flatten, hand_unflatten),
        args=lambda case, lib: (case.w1(),),
        compose=round_trip,
    ),
    Workload(
        "W1f",
        f"flatten of {W1_TREE} (leaves and structure)",
        uses=("flatten",),
        hand=(hand_flatten,),
        args=lambda case, lib: (case.w1(),),
        view=first,
    ),
    Workload(
        "W1u",
        f"unflatten to {W1_TREE}",
        uses=("flatten", "unflatten"),
        hand=(hand_flatten, hand_unflatten),
        args=lambda case, lib: (case.w1(),),
        compose=unflatten_only,
    ),
    Workload(
        "W2",
        f"map x + 1 over {W1_TREE}",
        uses=("tree_map",),
        hand=(hand_map,),
        args=lambda case, lib: (inc, case.w1()),
        f_only=lambda case: f_calls(inc, hand_leaves(case.w1())),
    ),
    *(
        _w3_map(name + held_suffix, f"{what} over {W3_TREE}{held_title}", f, held)
        for held, held_suffix, held_title in (
            (False, "", ""),
            (True, "-held", ", the arrays also held outside the tree"),
        )
        for name, what, f in (("W3", "map x + 1", inc), ("W3id", "map identity", identity))
    ),
    Workload(
        "W4",
        f"two-tree map a + b over {W1_TREE}",
        uses=("tree_map",),
        hand=(hand_map2,),
        args=lambda case, lib: (add, case.w1(0), case.w1(1)),
        f_only=lambda case: f_calls(add, hand_leaves(case.w1(0)), hand_leaves(case.w1(1))),
    ),
    Workload(
        "W4c",
        f"two-tree map a + b over {W3_TREE}",
        uses=("tree_map",),
        hand=(hand_map2_mlps,),
        args=_w3_args(add, trees=2),
        unit="array",
        units_per_n=2,
        on_classes=True,
        f_only=lambda case: f_calls(
            add, *(mlp_arrays(case.w3(HAND_MODEL, which)) for which in range(2))
        ),
    ),
    Workload(
        "W6id",
        f"map identity over {PARAMS_TREE}",
        uses=("tree_map",),
        hand=(hand_map_params,),
        args=lambda case, lib: (lib.array_fn(identity), case.params()),
        unit="array",
        f_only=lambda case: f_calls(
            identity, [a for v in case.params().values() for a in (v["bias"], v["kernel"])]
        ),
    ),
    Workload(
        "W4d",
        f"two-tree map a + b over {PARAMS_TREE}",
        uses=("tree_map",),
        hand=(hand_map2_params,),
        args=lambda case, lib: (lib.array_fn(add), case.params(0), case.params(1)),
        unit="array",
        f_only=lambda case: f_calls(
            add,
            *(
                [a for v in case.params(which).values() for a in (v["bias"], v["kernel"])]
                for which in range(2)
            ),
        ),
    ),
    Workload(
        "W5",
        f"leaves of {W1_TREE}",
        uses=("leaves",),
        hand=(hand_leaves,),
        args=lambda case, lib: (case.w1(),),
    ),
    Workload(
        "fmapstructure",
        f"fmapstructure identity over {W3_TREE}",
        uses=("fmapstructure",),
        hand=(hand_fmapstructure_mlps,),
        args=_w3_args(identity),
        unit="array",
        units_per_n=2,
        on_classes=True,
        f_only=lambda case: f_calls(identity, mlp_arrays(case.w3(HAND_MODEL))),
    ),
    Workload(
        "fcollect",
        f"fcollect of {W3_TREE}",
        uses=("fcollect",),
        hand=(hand_fcollect_mlps,),
        args=_w3_args(None),
        unit="array",
        units_per_n=2,
        on_classes=True,
    ),
    Workload(
        "flatten_with_path",
        f"flatten_with_path of {W1_TREE}",
        uses=("flatten_with_path",),
        hand=(hand_flatten_with_path,),
        args=lambda case, lib: (case.w1(),),
        view=path_pairs,
    ),
    Workload(
        "deep-flatten",
        "flatten of a list nested N deep",
        uses=("flatten",),
        hand=(hand_deep_flatten,),
        args=lambda case, lib: (case.deep(),),
        view=first,
        unit="level",
        deep=True,
    ),
    Workload(
        "deep-unflatten",
        "unflatten to a list nested N deep",
        uses=("flatten", "unflatten"),
        hand=(hand_deep_flatten, hand_deep_unflatten),
        args=lambda case, lib: (case.deep(),),
        compose=unflatten_only,
        unit="level",
        deep=True,
    ),
    Workload(
        "deep-fmap",
        "map x + 1 over a list nested N deep",
        uses=("tree_map",),
        hand=(hand_deep_map,),
        args=lambda case, lib: (inc, case.deep()),
        unit="level",
        deep=True,
        f_only=lambda case: f_calls(inc, hand_deep_flatten(case.deep())[0]),
    ),
)
