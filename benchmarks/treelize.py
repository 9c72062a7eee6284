"""treelize against treevalue's func_treelize, jax.tree_util.tree_map and a hand-written
recursive dict zip (issue 15).

Two nested dict trees with fan-out 10 and int leaves (1k leaves: depth 3; 100k: depth
5), ``f = lambda a, b: a + b``:

- ``strict``: both trees have every key;
- ``outer``: about 10% of the leaf keys are missing from each tree (different ones),
  ``mode="outer", missing=0``. jax has no outer mode, so it runs strict only.

``engine`` is containers with its two-dict fast path switched off: the plain engine,
which every other node kind takes. Every library's result is checked against the hand-written one before timing. Each
round times every (library, case) once, in a shuffled order; the table gives the median
over rounds of ns per leaf, and the ratios of containers to the others.

    python benchmarks/treelize.py             # 1k and 100k, 7 rounds
    python benchmarks/treelize.py --quick     # 1k only, 3 short rounds (smoke run)
    CONTAINERS_PURE_PYTHON=1 python benchmarks/treelize.py

Benchmarks are not tests: the exit code is 0 whatever the numbers (1 only when a
library's result differs from the hand-written one).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import containers as ct
from containers import _treelize

FANOUT = 10
KEYS = [f"k{i}" for i in range(FANOUT)]


def f(a: Any, b: Any) -> Any:
    return a + b


def build(depth: int, start: int = 0) -> tuple[dict[str, Any], int]:
    """A full dict tree of the given depth; leaves are consecutive ints from ``start``."""
    if depth == 1:
        return {k: start + i for i, k in enumerate(KEYS)}, start + FANOUT
    out = {}
    for k in KEYS:
        out[k], start = build(depth - 1, start)
    return out, start


def drop_leaves(tree: dict[str, Any], rng: random.Random, share: float, avoid: set[int]) -> Any:
    """A copy of ``tree`` without about ``share`` of its leaf keys (never those whose
    leaf value is in ``avoid``); returns the copy and the dropped leaf values."""
    dropped: set[int] = set()

    def rec(node: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in node.items():
            if isinstance(v, dict):
                out[k] = rec(v)
            elif v in avoid or rng.random() >= share:
                out[k] = v
            else:
                dropped.add(v)
        return out

    return rec(tree), dropped


# --- the hand-written baselines -----------------------------------------------------------


def hand_strict(a: Any, b: Any) -> Any:
    return {k: hand_strict(v, b[k]) if type(v) is dict else f(v, b[k]) for k, v in a.items()}


def hand_outer(a: Any, b: Any) -> Any:
    out = {}
    for k, v in a.items():
        w = b.get(k, 0)
        out[k] = hand_outer(v, w) if type(v) is dict else f(v, w)
    for k, w in b.items():
        if k not in a:
            out[k] = hand_outer(0, w) if type(w) is dict else f(0, w)
    return out


# --- the libraries ------------------------------------------------------------------------


def make_ops(
    a: Any, b: Any, mode: str
) -> dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]]:
    """Zero-argument calls per library, each with a converter of its result to a dict."""
    ops: dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]] = {}
    plain: Callable[[Any], Any] = lambda r: r  # noqa: E731
    hand = hand_strict if mode == "strict" else hand_outer
    ops["hand"] = (lambda: hand(a, b), plain)
    lifted = ct.treelize()(f) if mode == "strict" else ct.treelize("outer", missing=0)(f)
    ops["containers"] = (lambda: lifted(a, b), plain)

    def engine_only() -> Any:  # the same call with the two-dict fast path switched off
        _treelize._FAST = False
        try:
            return lifted(a, b)
        finally:
            _treelize._FAST = True

    ops["engine"] = (engine_only, plain)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from treevalue import FastTreeValue, func_treelize, jsonify
    except ImportError:
        pass
    else:
        ta, tb = FastTreeValue(a), FastTreeValue(b)
        kw: dict[str, Any] = (
            {"mode": "strict"} if mode == "strict" else {"mode": "outer", "missing": 0}
        )
        tv = func_treelize(**kw)(f)
        ops["treevalue"] = (lambda: tv(ta, tb), jsonify)
    if mode == "strict":
        try:
            import jax
        except ImportError:
            pass
        else:
            tree_map = jax.tree_util.tree_map
            ops["jax"] = (lambda: tree_map(f, a, b), plain)
    return ops


def time_once(op: Callable[[], Any], min_time: float) -> float:
    """Seconds per call: back-to-back calls for at least ``min_time``, gc off."""
    number = 1
    while True:
        gc.disable()
        try:
            start = time.perf_counter()
            for _ in range(number):
                op()
            elapsed = time.perf_counter() - start
        finally:
            gc.enable()
        if elapsed >= min_time:
            return elapsed / number
        number *= 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k only, 3 short rounds")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    depths = {"1k": 3} if args.quick else {"1k": 3, "100k": 5}
    rounds = 3 if args.quick else args.rounds
    min_time = 0.01 if args.quick else args.min_time
    rng = random.Random(args.seed)

    cases: dict[tuple[str, str], dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]]] = {}
    leaves: dict[str, int] = {}
    for size, depth in depths.items():
        full_a, n = build(depth)
        full_b, _ = build(depth, start=n)  # distinct values, same keys
        leaves[size] = n
        cases[(size, "strict")] = make_ops(full_a, full_b, "strict")
        # ~10% of each side's leaf keys missing, different ones on each side: a key
        # absent from a is kept in b (matched by position through the leaf's value).
        a_out, gone = drop_leaves(full_a, rng, 0.1, set())
        keep_b = {v + n for v in gone}
        b_out, _ = drop_leaves(full_b, rng, 0.1 / 0.9, keep_b)
        cases[(size, "outer")] = make_ops(a_out, b_out, "outer")

    bad = []
    for (size, mode), ops in cases.items():
        want = ops["hand"][1](ops["hand"][0]())
        for lib, (op, convert) in ops.items():
            if convert(op()) != want:
                bad.append(f"{lib} {mode} {size}")
    if bad:
        print("results differ from the hand-written ones: " + ", ".join(bad), file=sys.stderr)
        return 1
    print("all results agree with the hand-written baseline", file=sys.stderr)

    samples: dict[tuple[str, str, str], list[float]] = {}
    jobs = [(key, lib) for key, ops in cases.items() for lib in ops]
    for r in range(rounds):
        rng.shuffle(jobs)
        for (size, mode), lib in jobs:
            secs = time_once(cases[(size, mode)][lib][0], min_time)
            samples.setdefault((size, mode, lib), []).append(secs * 1e9 / leaves[size])
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)

    libs = ["containers", "engine", "hand", "treevalue", "jax"]
    med = {k: statistics.median(v) for k, v in samples.items()}
    print(f"treelize, ns per leaf (median of {rounds} rounds)\n")
    print("| case | " + " | ".join(libs) + " | vs hand | vs treevalue | vs jax |")
    print("|---|" + "---:|" * (len(libs) + 3))
    for size, mode in cases:
        row = [f"{mode} {size}"]
        for lib in libs:
            v = med.get((size, mode, lib))
            row.append("-" if v is None else f"{v:.0f}")
        ours = med[(size, mode, "containers")]
        for lib in ("hand", "treevalue", "jax"):
            v = med.get((size, mode, lib))
            row.append("-" if v is None else f"{ours / v:.2f}x")
        print("| " + " | ".join(row) + " |")
    print("\ntargets: <= 2.0x hand, <= 0.5x treevalue")
    return 0


if __name__ == "__main__":
    sys.exit(main())
