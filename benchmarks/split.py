"""split / merge / state against flax.nnx, equinox and hand-written loops (issue 14).

The model: L layers, each with parameters ``w`` float32[8,8] and ``b`` float32[8] and a
batch statistic ``count`` float32[8] (3 leaves per layer; 1k leaves: L = 333, 100k:
L = 33,333). Each library declares it its own way:

- containers: ``@ct.container`` classes, ``count`` declared ``ct.field(tags=
  ("batch_stats",))``, ``w``/``b`` ``tags=("param",)``; ``ct.split(m, "param",
  "batch_stats")``, ``ct.merge(s, params, stats)``, ``ct.state(m, "param")``;
- flax.nnx: ``nnx.Module``s holding ``nnx.Param`` / ``nnx.BatchStat``;
  ``nnx.split(m, nnx.Param, nnx.BatchStat)``, ``nnx.merge``, ``nnx.state(m, nnx.Param)``;
- equinox: ``eqx.Module``s; ``eqx.partition(m, spec)`` with a prefix tree of bools
  (the nearest thing to split), ``eqx.combine`` (merge), ``eqx.filter`` (state);
- hand: a loop over the layers filling two flat dicts (split, state) or rebuilding the
  model from them (merge). "hand" keys the dicts by the same paths containers gives
  (tuples of ``AttrKey``/``IndexKey``: the same output, checked equal before timing);
  "hand-str" keys them by tuples of ``str``/``int`` (``params[("layers", i, "w")] =
  layer.w``), the cheapest dict a user could fill and the floor of issue #33 (hashing
  a str tuple runs in C; hashing a key object calls Python). For partition and
  combine both are the same loop: two models with ``ct.MISSING`` in the other's
  places, and the model put back together from them;
- keys-only: the part of "hand" that builds the key tuples, without the dicts (split
  and state): what the key objects the API promises cost, whoever builds them.

containers also runs ``ct.partition(m, "param")`` and ``ct.combine(params, rest)``
(equinox's partition/combine, whose own numbers are its split and merge rows).

Each round times every (library, operation) once, in a shuffled order; the table gives
the median over rounds of ns per leaf, and the ratios.

    python benchmarks/split.py             # 1k and 100k leaves, 3 rounds
    python benchmarks/split.py --quick     # 1k only, short rounds (smoke run)
    python benchmarks/split.py --sizes 10,100,1k   # the fixed cost of a call
    CONTAINERS_PURE_PYTHON=1 python benchmarks/split.py

Benchmarks are not tests: the exit code is 0 whatever the numbers (1 only when
containers' result differs from the hand-written one).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import containers as ct
from containers._paths import AttrKey, index_key
from measure import interleave

SIZES = {"10": 3, "100": 33, "1k": 333, "100k": 33_333}
#: The sizes run by default; 10 and 100 leaves (``--sizes 10,100,1k``) show the fixed
#: cost of a call, which the per-leaf cost hides at 1k.
DEFAULT_SIZES = ("1k", "100k")
OPS = ("split", "merge", "state", "partition", "combine")


def arrays(i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    w = np.full((8, 8), i, np.float32)
    return w, np.full(8, i, np.float32), np.zeros(8, np.float32)


# --- containers -----------------------------------------------------------------------------


@ct.container
class Layer:
    w: np.ndarray = ct.field(tags=("param",))
    b: np.ndarray = ct.field(tags=("param",))
    count: np.ndarray = ct.field(tags=("batch_stats",))


@ct.container
class Model:
    layers: list[Layer]


def containers_ops(n_layers: int) -> tuple[Model, dict[str, Callable[[], object]]]:
    m = Model([Layer(*arrays(i)) for i in range(n_layers)])
    s, params, stats = ct.split(m, "param", "batch_stats")
    ops = {
        "split": lambda: ct.split(m, "param", "batch_stats"),
        "merge": lambda: ct.merge(s, params, stats),
        "state": lambda: ct.state(m, "param"),
    }
    left, right = ct.partition(m, "param")
    ops["partition"] = lambda: ct.partition(m, "param")
    ops["combine"] = lambda: ct.combine(left, right)
    return m, ops


# --- hand-written loops ---------------------------------------------------------------------

K_LAYERS, K_W, K_B, K_COUNT = AttrKey("layers"), AttrKey("w"), AttrKey("b"), AttrKey("count")


def hand_split(m: Model) -> tuple[dict[Any, Any], dict[Any, Any]]:
    params: dict[Any, Any] = {}
    stats: dict[Any, Any] = {}
    for i, layer in enumerate(m.layers):
        ki = index_key(i)
        params[K_LAYERS, ki, K_W] = layer.w
        params[K_LAYERS, ki, K_B] = layer.b
        stats[K_LAYERS, ki, K_COUNT] = layer.count
    return params, stats


def hand_state(m: Model) -> dict[Any, Any]:
    params: dict[Any, Any] = {}
    for i, layer in enumerate(m.layers):
        ki = index_key(i)
        params[K_LAYERS, ki, K_W] = layer.w
        params[K_LAYERS, ki, K_B] = layer.b
    return params


def hand_merge(n_layers: int, params: dict[Any, Any], stats: dict[Any, Any]) -> Model:
    layers = []
    for i in range(n_layers):
        ki = index_key(i)
        layers.append(
            Layer(
                params[K_LAYERS, ki, K_W], params[K_LAYERS, ki, K_B], stats[K_LAYERS, ki, K_COUNT]
            )
        )
    return Model(layers)


def hand_str_split(m: Model) -> tuple[dict[Any, Any], dict[Any, Any]]:
    params: dict[Any, Any] = {}
    stats: dict[Any, Any] = {}
    for i, layer in enumerate(m.layers):
        params["layers", i, "w"] = layer.w
        params["layers", i, "b"] = layer.b
        stats["layers", i, "count"] = layer.count
    return params, stats


def hand_str_state(m: Model) -> dict[Any, Any]:
    params: dict[Any, Any] = {}
    for i, layer in enumerate(m.layers):
        params["layers", i, "w"] = layer.w
        params["layers", i, "b"] = layer.b
    return params


def hand_str_merge(n_layers: int, params: dict[Any, Any], stats: dict[Any, Any]) -> Model:
    return Model(
        [
            Layer(params["layers", i, "w"], params["layers", i, "b"], stats["layers", i, "count"])
            for i in range(n_layers)
        ]
    )


def hand_partition(m: Model) -> tuple[Model, Model]:
    missing = ct.MISSING
    left, right = [], []
    for layer in m.layers:
        left.append(Layer(layer.w, layer.b, missing))
        right.append(Layer(missing, missing, layer.count))
    return Model(left), Model(right)


def hand_combine(a: Model, b: Model) -> Model:
    missing = ct.MISSING
    return Model(
        [
            Layer(
                x.w if x.w is not missing else y.w,
                x.b if x.b is not missing else y.b,
                x.count if x.count is not missing else y.count,
            )
            for x, y in zip(a.layers, b.layers)
        ]
    )


def keys_split(m: Model) -> list[Any]:
    keys = []
    for i in range(len(m.layers)):
        ki = index_key(i)
        keys.append((K_LAYERS, ki, K_W))
        keys.append((K_LAYERS, ki, K_B))
        keys.append((K_LAYERS, ki, K_COUNT))
    return keys


def keys_state(m: Model) -> list[Any]:
    keys = []
    for i in range(len(m.layers)):
        ki = index_key(i)
        keys.append((K_LAYERS, ki, K_W))
        keys.append((K_LAYERS, ki, K_B))
    return keys


def hand_ops(m: Model, n_layers: int) -> dict[str, dict[str, Callable[[], object]]]:
    params, stats = hand_split(m)
    sparams, sstats = hand_str_split(m)
    left, right = hand_partition(m)
    return {
        "hand": {
            "split": lambda: hand_split(m),
            "merge": lambda: hand_merge(n_layers, params, stats),
            "state": lambda: hand_state(m),
            "partition": lambda: hand_partition(m),
            "combine": lambda: hand_combine(left, right),
        },
        "hand-str": {
            "split": lambda: hand_str_split(m),
            "merge": lambda: hand_str_merge(n_layers, sparams, sstats),
            "state": lambda: hand_str_state(m),
            "partition": lambda: hand_partition(m),
            "combine": lambda: hand_combine(left, right),
        },
        "keys-only": {"split": lambda: keys_split(m), "state": lambda: keys_state(m)},
    }


# --- peers ----------------------------------------------------------------------------------


def nnx_ops(n_layers: int) -> dict[str, Callable[[], object]] | None:
    try:
        from flax import nnx
    except ImportError:
        return None

    class NLayer(nnx.Module):
        def __init__(self, i: int) -> None:
            w, b, count = arrays(i)
            self.w = nnx.Param(w)
            self.b = nnx.Param(b)
            self.count = nnx.BatchStat(count)

    class NModel(nnx.Module):
        def __init__(self) -> None:
            self.layers = nnx.List([NLayer(i) for i in range(n_layers)])

    m = NModel()
    graphdef, params, stats = nnx.split(m, nnx.Param, nnx.BatchStat)
    return {
        "split": lambda: nnx.split(m, nnx.Param, nnx.BatchStat),
        "merge": lambda: nnx.merge(graphdef, params, stats),
        "state": lambda: nnx.state(m, nnx.Param),
    }


def equinox_ops(n_layers: int) -> dict[str, Callable[[], object]] | None:
    try:
        import equinox as eqx
    except ImportError:
        return None

    class ELayer(eqx.Module):
        w: Any
        b: Any
        count: Any

    class EModel(eqx.Module):
        layers: list[Any]

    m = EModel([ELayer(*arrays(i)) for i in range(n_layers)])
    spec = EModel([ELayer(True, True, False) for _ in range(n_layers)])
    params, rest = eqx.partition(m, spec)
    return {
        "split": lambda: eqx.partition(m, spec),
        "merge": lambda: eqx.combine(params, rest),
        "state": lambda: eqx.filter(m, spec),
    }


# --- checks and the table -------------------------------------------------------------------


def same_model(a: Model, b: Model) -> bool:
    return len(a.layers) == len(b.layers) and all(
        x.w is y.w and x.b is y.b and x.count is y.count for x, y in zip(a.layers, b.layers)
    )


def check(m: Model, n_layers: int) -> list[str]:
    """Where containers' results differ from the hand-written ones (empty: none)."""
    problems = []
    s, params, stats = ct.split(m, "param", "batch_stats")
    want_params, want_stats = hand_split(m)
    for name, got, want in (("params", params, want_params), ("stats", stats, want_stats)):
        if list(got) != list(want) or any(got[k] is not want[k] for k in want):
            problems.append(f"split: the {name} part differs from the hand-written one")
    state = ct.state(m, "param")
    if list(state) != list(want_params) or any(state[k] is not want_params[k] for k in state):
        problems.append("state: differs from the hand-written one")
    if not same_model(ct.merge(s, params, stats), hand_merge(n_layers, want_params, want_stats)):
        problems.append("merge: differs from the hand-written one")
    if not same_model(ct.merge(ct.structure(m), dict(want_params), dict(want_stats)), m):
        problems.append("merge (checked lookup): differs from the model")
    left, right = ct.partition(m, "param")
    want_left, want_right = hand_partition(m)
    for name, got_tree, want_tree in (("left", left, want_left), ("right", right, want_right)):
        if not same_model(got_tree, want_tree):
            problems.append(f"partition: the {name} tree differs from the hand-written one")
    if not same_model(ct.combine(left, right), m):
        problems.append("combine: differs from the model")
    return problems


def run(size: str, rounds: int, min_time_ns: float, rng: random.Random) -> dict[str, Any]:
    n_layers = SIZES[size]
    leaves = 3 * n_layers
    m, ours = containers_ops(n_layers)
    problems = check(m, n_layers)
    libs: dict[str, dict[str, Callable[[], object]]] = {
        "containers": ours,
        **hand_ops(m, n_layers),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, make in (("flax.nnx", nnx_ops), ("equinox", equinox_ops)):
            ops = make(n_layers)
            if ops is not None:
                libs[name] = ops
        flat = {f"{lib}|{op}": fn for lib, table in libs.items() for op, fn in table.items()}
        timings = interleave(flat, rounds, min_time_ns, rng)
    ns = {
        key: statistics.median(t.samples_ns) / leaves for key, t in timings.items()
    }  # ns per leaf
    return {"size": size, "leaves": leaves, "libs": list(libs), "ns": ns, "problems": problems}


def table(results: list[dict[str, Any]]) -> str:
    libs = results[0]["libs"]
    peers = [lib for lib in libs if lib not in ("containers", "hand", "hand-str", "keys-only")]
    head = ["size", "op", *(f"{lib} ns/leaf" for lib in libs), "containers / hand"]
    head += ["containers / hand-str", *(f"{p} / containers" for p in peers)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def ratio(a: float | None, b: float | None, digits: int) -> str:
        return "-" if a is None or b is None else f"{a / b:.{digits}f}x"

    for r in results:
        for op in OPS:
            cell = {lib: r["ns"].get(f"{lib}|{op}") for lib in libs}
            ours = cell["containers"]
            row = [
                r["size"],
                op,
                *("-" if cell[lib] is None else f"{cell[lib]:,.0f}" for lib in libs),
            ]
            row += [ratio(ours, cell["hand"], 2), ratio(ours, cell["hand-str"], 2)]
            row += [ratio(cell[p], ours, 1) for p in peers]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k leaves, short rounds")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument(
        "--sizes", help=f"comma-separated, of {', '.join(SIZES)} (default: 1k,100k)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the ns per leaf of every cell to this JSON file")
    args = parser.parse_args(argv)
    sizes = args.sizes.split(",") if args.sizes else ["1k"] if args.quick else DEFAULT_SIZES
    unknown = [size for size in sizes if size not in SIZES]
    if unknown:
        parser.error(f"unknown size {unknown[0]!r}; the sizes are {', '.join(SIZES)}")
    rounds = args.rounds or 3
    min_time_ns = 2e6 if args.quick else 2e8
    rng = random.Random(args.seed)
    results = [run(size, rounds, min_time_ns, rng) for size in sizes]
    print(f"python {sys.version.split()[0]}, containers {ct.__version__}, rounds {rounds}")
    print(table(results))
    problems = [f"{r['size']}: {p}" for r in results for p in r["problems"]]
    for p in problems:
        print("DIFFERS", p)
    print("check: containers agrees with the hand-written loops:", "no" if problems else "ok")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
