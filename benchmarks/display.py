"""Time the views: ct.html (the HTML view) and ct.pformat on trees of N leaves.

Two trees per N: a model (`{"layers": [Dense(w, b) x N/2]}`, `w` 4x4 and `b` 4 float32
arrays held by the tree alone) and a plain one (`{"xs": [float x N]}`). `html` renders
at most `max_nodes` rows (2,000 by default), with statistics for the arrays shown; its
cost beyond that is the walk that totals every subtree. The target of issue 34: 100,000
leaves in under a second (on a quiet machine; this script makes no claim itself).

    python benchmarks/display.py --quick          # N = 1k and 10k, a smoke run
    python benchmarks/display.py                  # N = 1k, 10k, 100k

Prints milliseconds per call and microseconds per leaf, as Markdown. Exits 1 if a
rendering lacks what it must show (the totals, the cut count), 0 otherwise.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import containers as ct
from measure import interleave


@ct.container(children=["w", "b"])
class Dense:
    w: np.ndarray
    b: np.ndarray


def model(n: int) -> dict[str, Any]:
    """N leaves as N/2 Dense layers of a 4x4 and a 4 float32 array."""
    rng = np.random.default_rng(0)
    return {
        "layers": [
            Dense(rng.standard_normal((4, 4)).astype("float32"), np.zeros(4, "float32"))
            for _ in range(n // 2)
        ]
    }


def plain(n: int) -> dict[str, Any]:
    """N leaves as a list of floats."""
    return {"xs": [float(i) for i in range(n)]}


def check(n: int) -> list[str]:
    """What each rendering must show, as problems (none when all is there)."""
    problems = []
    page = ct.html(model(n))
    if f"{n // 2 * 20:,} params" not in page:
        problems.append(f"html of the {n}-leaf model lacks its total")
    if n > 2000 and "more not shown" not in page:
        problems.append(f"html of the {n}-leaf model does not count what it cuts")
    if f"{n // 2 * 20:,} params" not in ct.pformat(model(n)).split("\n", 1)[0]:
        problems.append(f"pformat of the {n}-leaf model lacks its total")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 1k and 10k, 3 rounds")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.2)
    args = parser.parse_args()
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    repeats = 3 if args.quick else args.repeats
    min_time = 0.01 if args.quick else args.min_time
    rng = random.Random(0)
    problems: list[str] = []
    rows = []
    for n in sizes:
        problems += check(n)
        trees = {"model": model(n), "plain": plain(n)}
        ops: dict[str, Callable[[], object]] = {}
        for name, tree in trees.items():
            ops[f"html {name}"] = lambda t=tree: ct.html(t)
            ops[f"pformat {name}"] = lambda t=tree: ct.pformat(t)
        timings = interleave(ops, repeats, min_time * 1e9, rng)
        for op, timing in timings.items():
            best = min(timing.samples_ns)
            rows.append(f"| {op} | {n:,} | {best / 1e6:,.1f} | {best / 1e3 / n:.2f} |")
        print(f"N = {n:,} done", file=sys.stderr)
    print("| workload | leaves | ms per call (best) | us per leaf |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
