"""Interop benchmark: containers through JAX's, optree's and torch's own registries.

Every jitted call flattens its arguments, so a container's flatten/unflatten inside
another library's registry is on the user's hot path. The model is the W3 model of
benchmarks/run.py: a list of `MLP(layers=(Linear(w, b),) * 4, name)`, N arrays in
all (N/2 Linear nodes, N/8 MLPs whose `name` is kept, i.e. static aux data). Each
library's variant declares the same two classes its own way (`containers` twice: as
declared by default, frozen, rebuilt by `_speedups.Rebuild` where the accelerator is
built and through a class switch where not, and with `frozen=False`, rebuilt by plain
attribute stores; see src/containers/interop/_generated.py):

- jax: `containers` (`register_jax()`), `equinox` (`eqx.Module`, `name` static),
  `register_dataclass` (`jax.tree_util.register_dataclass`, JAX's C++ dataclass
  path: it rebuilds with `cls(**fields)`), and `hand` (`register_pytree_node` with
  lambdas over a plain class). Timed: `tree_flatten`, `tree_unflatten`, and one call
  of a trivial `jax.jit` function of the tree (`t[0].layers[0].b`) whose arguments
  are jax arrays: its dispatch flattens the tree and matches the treedef in the cache.
- optree: `containers` (`register_optree("bench")`), `optree.dataclasses`
  (`name` a `pytree_node=False` field) and `hand` (`optree.register_pytree_node`),
  all in the namespace "bench". Timed: `tree_flatten`, `tree_unflatten`.
- torch: `containers` (`register_torch()`) and `hand` (`register_pytree_node`).
  Timed: `tree_flatten`, `tree_unflatten`.

Before timing, every variant's leaves are checked to be the very same arrays in the
same order as `hand`'s, and its unflattened tree equal field by field. Cells are ns
per array: in one run the fastest of several interleaved rounds (gc off), as in
benchmarks/run.py; `--report` takes the median of each cell over the runs given, and
of each run's ratio of containers over each peer. `--out` writes the cells as JSON; `--report A.json B.json C.json` prints
the table of the medians of several runs.

    python benchmarks/interop.py --quick            # 1k arrays only, seconds
    python benchmarks/interop.py --out run1.json    # 1k and 100k arrays (minutes)
    python benchmarks/interop.py --report run1.json run2.json run3.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import containers as ct
from containers.interop import register_jax, register_optree, register_torch
from measure import first_difference, interleave

LAYERS = 4
Model = tuple[Callable[..., Any], Callable[..., Any]]  # (Linear, MLP) constructors


@ct.container
class Linear:
    w: Any
    b: Any


@ct.container(children=["layers"])
class MLP:
    layers: tuple[Any, ...]
    name: str = "mlp"


@ct.container(frozen=False)
class MutableLinear:
    """The same classes declared ``frozen=False``: rebuilt by plain attribute stores."""

    w: Any
    b: Any


@ct.container(children=["layers"], frozen=False)
class MutableMLP:
    layers: tuple[Any, ...]
    name: str = "mlp"


MutableLinear.__name__, MutableMLP.__name__ = "Linear", "MLP"


class HandLinear:
    """A plain class, as hand-registered pytrees usually are."""

    def __init__(self, w: Any, b: Any) -> None:
        self.w = w
        self.b = b


class HandMLP:
    def __init__(self, layers: tuple[Any, ...], name: str) -> None:
        self.layers = layers
        self.name = name


# measure.first_difference compares these by field, whatever library declared them.
HandLinear.__name__, HandMLP.__name__ = "Linear", "MLP"


def build(model: Model, arrays: Sequence[Any]) -> list[Any]:
    """The W3 tree over `arrays`: len(arrays) / 8 MLPs of 4 Linear layers."""
    linear, mlp = model
    it = iter(arrays)
    return [
        mlp(tuple(linear(next(it), next(it)) for _ in range(LAYERS)), f"mlp{i}")
        for i in range(len(arrays) // (2 * LAYERS))
    ]


# --- the variants, one set per library -------------------------------------------------


def jax_models() -> dict[str, Model]:
    import jax.tree_util as tu

    register_jax()
    models: dict[str, Model] = {"containers": (Linear, MLP), MUTABLE: (MutableLinear, MutableMLP)}
    try:
        import equinox as eqx
    except ImportError:
        pass
    else:

        class EqxLinear(eqx.Module):
            w: Any
            b: Any

        class EqxMLP(eqx.Module):
            layers: tuple[Any, ...]
            name: str = eqx.field(static=True)

        EqxLinear.__name__, EqxMLP.__name__ = "Linear", "MLP"
        models["equinox"] = (EqxLinear, EqxMLP)

    @dataclasses.dataclass(frozen=True)
    class DcLinear:
        w: Any
        b: Any

    @dataclasses.dataclass(frozen=True)
    class DcMLP:
        layers: tuple[Any, ...]
        name: str

    DcLinear.__name__, DcMLP.__name__ = "Linear", "MLP"
    tu.register_dataclass(DcLinear, data_fields=["w", "b"], meta_fields=[])
    tu.register_dataclass(DcMLP, data_fields=["layers"], meta_fields=["name"])
    models["register_dataclass"] = (DcLinear, DcMLP)

    lin, mlp = _hand_classes()
    tu.register_pytree_node(lin, lambda x: ((x.w, x.b), None), lambda _, c: lin(*c))
    tu.register_pytree_node(mlp, lambda x: ((x.layers,), x.name), lambda n, c: mlp(c[0], n))
    models["hand"] = (lin, mlp)
    return models


def optree_models() -> dict[str, Model]:
    import optree

    register_optree("bench")
    models: dict[str, Model] = {"containers": (Linear, MLP), MUTABLE: (MutableLinear, MutableMLP)}

    @optree.dataclasses.dataclass(namespace="bench")
    class OdLinear:
        w: Any
        b: Any

    @optree.dataclasses.dataclass(namespace="bench")
    class OdMLP:
        layers: tuple[Any, ...]
        name: str = optree.dataclasses.field(pytree_node=False)

    OdLinear.__name__, OdMLP.__name__ = "Linear", "MLP"
    models["optree.dataclasses"] = (OdLinear, OdMLP)
    lin, mlp = _hand_classes()
    optree.register_pytree_node(
        lin, lambda x: ((x.w, x.b), None), lambda _, c: lin(*c), namespace="bench"
    )
    optree.register_pytree_node(
        mlp, lambda x: ((x.layers,), x.name), lambda n, c: mlp(c[0], n), namespace="bench"
    )
    models["hand"] = (lin, mlp)
    return models


def torch_models() -> dict[str, Model]:
    import torch.utils._pytree as pytree

    register_torch()
    lin, mlp = _hand_classes()
    pytree.register_pytree_node(lin, lambda x: ([x.w, x.b], None), lambda c, _: lin(*c))
    pytree.register_pytree_node(mlp, lambda x: ([x.layers], x.name), lambda c, n: mlp(c[0], n))
    return {
        "containers": (Linear, MLP),
        MUTABLE: (MutableLinear, MutableMLP),
        "hand": (lin, mlp),
    }


def _hand_classes() -> Model:
    """Fresh hand classes: each registry gets its own (a type registers once)."""

    class Lin(HandLinear):
        pass

    class Mlp(HandMLP):
        pass

    Lin.__name__, Mlp.__name__ = "Linear", "MLP"
    return Lin, Mlp


# --- operations --------------------------------------------------------------------------


@dataclasses.dataclass
class Op:
    library: str  # jax, optree, torch
    name: str  # tree_flatten, tree_unflatten, jit
    n: int
    calls: dict[str, Callable[[], object]]  # variant -> zero-argument call
    checks: dict[str, str]  # variant -> "ok" or what differs


def _check(leaves: list[Any], want: list[Any], rebuilt: Any, want_tree: Any) -> str:
    if len(leaves) != len(want) or any(a is not b for a, b in zip(leaves, want)):
        return "differs: the leaves are not the hand variant's arrays, in order"
    return first_difference(rebuilt, want_tree) or "ok"


def jax_ops(n: int, arrays: list[Any], with_jit: bool) -> list[Op]:
    import jax
    import jax.tree_util as tu

    models = jax_models()
    trees = {v: build(m, arrays) for v, m in models.items()}
    flat = {v: tu.tree_flatten(t) for v, t in trees.items()}
    want = flat["hand"][0]
    checks = {
        v: _check(flat[v][0], want, tu.tree_unflatten(flat[v][1], flat[v][0]), trees["hand"])
        for v in models
    }
    ops = [
        Op(
            "jax",
            "tree_flatten",
            n,
            {v: _bind(tu.tree_flatten, t) for v, t in trees.items()},
            checks,
        ),
        Op(
            "jax",
            "tree_unflatten",
            n,
            {v: _bind(tu.tree_unflatten, td, leaves) for v, (leaves, td) in flat.items()},
            checks,
        ),
    ]
    if with_jit:
        device = jax.device_put(arrays)
        jtrees = {v: build(m, device) for v, m in models.items()}
        calls = {}
        jit_checks = {}
        for v, t in jtrees.items():
            f = jax.jit(lambda tree: tree[0].layers[0].b)
            out = f(t)
            out.block_until_ready()
            jit_checks[v] = "ok" if np.array_equal(out, arrays[1]) else "differs: result"
            calls[v] = _bind(f, t)
        ops.append(Op("jax", "jit", n, calls, jit_checks))
    return ops


def optree_ops(n: int, arrays: list[Any]) -> list[Op]:
    import optree

    models = optree_models()
    trees = {v: build(m, arrays) for v, m in models.items()}
    flat = {v: optree.tree_flatten(t, namespace="bench") for v, t in trees.items()}
    want = flat["hand"][0]
    checks = {
        v: _check(flat[v][0], want, optree.tree_unflatten(flat[v][1], flat[v][0]), trees["hand"])
        for v in models
    }

    def flatten(tree: Any) -> Any:
        return optree.tree_flatten(tree, namespace="bench")

    return [
        Op("optree", "tree_flatten", n, {v: _bind(flatten, t) for v, t in trees.items()}, checks),
        Op(
            "optree",
            "tree_unflatten",
            n,
            {v: _bind(optree.tree_unflatten, spec, lv) for v, (lv, spec) in flat.items()},
            checks,
        ),
    ]


def torch_ops(n: int, arrays: list[Any]) -> list[Op]:
    import torch.utils._pytree as pytree

    models = torch_models()
    trees = {v: build(m, arrays) for v, m in models.items()}
    flat = {v: pytree.tree_flatten(t) for v, t in trees.items()}
    want = flat["hand"][0]
    checks = {
        v: _check(flat[v][0], want, pytree.tree_unflatten(flat[v][0], flat[v][1]), trees["hand"])
        for v in models
    }
    return [
        Op(
            "torch",
            "tree_flatten",
            n,
            {v: _bind(pytree.tree_flatten, t) for v, t in trees.items()},
            checks,
        ),
        Op(
            "torch",
            "tree_unflatten",
            n,
            {v: _bind(pytree.tree_unflatten, lv, spec) for v, (lv, spec) in flat.items()},
            checks,
        ),
    ]


def _bind(f: Callable[..., Any], *args: Any) -> Callable[[], object]:
    return lambda: f(*args)


# --- running and reporting -----------------------------------------------------------------

#: containers' own variants, each compared with every peer
OURS = ("containers", "containers frozen=False")
MUTABLE = OURS[1]
PEERS = {
    "jax": ("equinox", "hand", "register_dataclass"),
    "optree": ("optree.dataclasses", "hand"),
    "torch": ("hand",),
}


def run(
    sizes: Sequence[int], repeats: int, min_time_ns: float, seed: int, jit_sizes: Sequence[int]
) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    cells: list[dict[str, Any]] = []
    for n in sizes:
        arrays = [np.full((2,), i, np.float32) for i in range(n)]
        ops: list[Op] = []
        for library in PEERS:
            try:
                if library == "jax":
                    ops += jax_ops(n, arrays, with_jit=n in jit_sizes)
                elif library == "optree":
                    ops += optree_ops(n, arrays)
                else:
                    ops += torch_ops(n, arrays)
            except ImportError as e:
                print(f"# {library}: skipped ({e})", file=sys.stderr)
        for op in ops:
            ok = {v: c for v, c in op.calls.items() if op.checks[v] == "ok"}
            timings = interleave(ok, repeats, min_time_ns, rng)
            for variant in op.calls:
                t = timings.get(variant)
                cells.append(
                    {
                        "library": op.library,
                        "op": op.name,
                        "n": n,
                        "variant": variant,
                        "status": op.checks[variant],
                        # the fastest round: on a shared machine the others carry the
                        # neighbours' load (as benchmarks/run.py does)
                        "ns_per_array": None if t is None else min(t.samples_ns) / n,
                        "median_ns_per_array": (
                            None if t is None else statistics.median(t.samples_ns) / n
                        ),
                    }
                )
            print(f"# done {op.library} {op.name} n={n}", file=sys.stderr)
    return cells


def table(runs: Sequence[Sequence[dict[str, Any]]]) -> str:
    """Markdown: per (library, op, n), ns per array of each variant (the median over
    `runs`) and containers' ratios to each peer: the median over `runs` of each run's
    ratio, since a run interleaves its variants and shares their noise."""
    values: dict[tuple[str, str, int, str], list[float]] = {}
    per_run: list[dict[tuple[str, str, int, str], float]] = []
    for cells in runs:
        run_cells = {}
        for c in cells:
            if c["ns_per_array"] is not None:
                key = (c["library"], c["op"], c["n"], c["variant"])
                values.setdefault(key, []).append(c["ns_per_array"])
                run_cells[key] = c["ns_per_array"]
        per_run.append(run_cells)
    med = {k: statistics.median(v) for k, v in values.items()}
    rows = sorted({k[:3] for k in med}, key=lambda k: (list(PEERS).index(k[0]), k[1], k[2]))
    lines = [
        "| library | operation | arrays | containers | peers (ns per array) | containers / peer |",
        "|---|---|---:|---:|---|---|",
    ]

    def ratio(row: tuple[str, str, int], ours: str, peer: str) -> str:
        got = [
            r[(*row, ours)] / r[(*row, peer)]
            for r in per_run
            if (*row, ours) in r and (*row, peer) in r
        ]
        return f"{peer} {statistics.median(got):.2f}" if got else f"{peer} -"

    for row in rows:
        peers = [(p, med.get((*row, p))) for p in PEERS[row[0]]]
        peers = [(p, v) for p, v in peers if v is not None]
        for variant in OURS:
            ours = med.get((*row, variant))
            if ours is None:
                continue
            lines.append(
                f"| {row[0]} | {row[1]} | {_size(row[2])} | {variant} {_fmt(ours)} | "
                + ", ".join(f"{p} {_fmt(v)}" for p, v in peers)
                + " | "
                + ", ".join(ratio(row, variant, p) for p, _ in peers)
                + " |"
            )
    return "\n".join(lines)


def _fmt(v: float | None) -> str:
    return "-" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}")


def _size(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k arrays, few rounds (smoke run)")
    parser.add_argument("--sizes", default="1000,100000", help="numbers of arrays")
    parser.add_argument("--jit-sizes", default="1000,100000", help="sizes that time jax.jit")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the cells here as JSON")
    parser.add_argument("--report", type=Path, nargs="+", help="tabulate saved runs")
    args = parser.parse_args(argv)
    if args.report:
        runs = [json.loads(p.read_text())["cells"] for p in args.report]
        print(table(runs))
        return 0
    if args.quick:
        sizes, jit_sizes, repeats, min_time = [1000], [1000], 3, 2e6
    else:
        sizes = [int(s) for s in args.sizes.split(",")]
        jit_sizes = [int(s) for s in args.jit_sizes.split(",") if s]
        repeats, min_time = args.repeats, 2e7
    cells = run(sizes, repeats, min_time, args.seed, jit_sizes)
    bad = [c for c in cells if c["status"] != "ok"]
    for c in bad:
        print(f"# {c['library']} {c['op']} {c['variant']}: {c['status']}", file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps({"cells": cells}, indent=1))
    print(table([cells]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
