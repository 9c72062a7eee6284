"""Executor maps (issue 32): fmap(f, tree, executor=...) against the serial fmap and the
hand-written flatten + ex.map + unflatten, on 2 threads, 2 processes and a 2-worker
dask LocalCluster.

Workloads:

- ``heavy-numpy``: 64 float64 arrays of 256k elements, ``f`` a numpy computation of
  about 20 ms per leaf that releases the GIL (calibrated at start);
- ``heavy-python``: 64 int leaves, ``f`` a pure-Python loop of about 20 ms per leaf;
- ``light``: 100,000 distinct float leaves (1,000 lists of 100), ``f = x + 1``, 2
  threads: what an executor map adds to the executor's own cost (flatten's walk, which
  also finds that nothing is shared, and the rebuild, against the hand-written
  flatten and unflatten);
- ``light-shared``: the same tree with one of its lists at a second key: the map takes
  the identity cache's road (two walks of fmap's engine, one recording the calls, one
  placing the results), which keeps the list shared; the hand-written versions
  compute it twice and unshare it.
- ``light-kept``: the same 100,000 floats in 1,000 instances of a container with a
  kept field (a dict): the map takes flatten's one walk too, its rebuild keeping each
  kept dict as the same object (as the serial fmap does).

Contenders: ``serial`` (``ct.fmap(f, tree)``), ``containers`` (``executor=``, automatic
chunksize), ``hand`` (``ct.flatten``, ``list(ex.map(f, leaves, chunksize=...))``,
``ct.unflatten``: for a thread pool ``chunksize`` is ignored by ``Executor.map``, so
``hand`` submits one task per leaf there) and ``hand-chunked`` (the same with chunks of
leaves run by one task each, as ``containers`` sends them: the best hand-written
equivalent). For dask, ``hand`` is ``client.map`` over the chunks and ``gather``.
Every result is checked against the serial one before timing; each round runs every
contender once, in a shuffled order; cells are medians over rounds, in ms.

    python benchmarks/parallel.py             # 3 rounds
    python benchmarks/parallel.py --quick     # small workloads, 1 round (smoke run)
    python benchmarks/parallel.py --no-dask   # without the LocalCluster

Targets (issue 32, on 2 cores): heavy >= 1.8x serial with 2 threads (numpy) and 2
processes (pure Python), >= 1.6x with the 2-worker LocalCluster, and not slower than
hand-chunked; light: containers <= 1.2x hand. Benchmarks are not tests: the exit code
is 0 whatever the numbers (1 only when a result differs from the serial one).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import gc
import math
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import containers as ct

#: Work units of the heavy f's, set by ``calibrate`` (module globals, so that worker
#: processes, which import this module, see the values passed with each leaf).
WORKERS = 2


def numpy_work(a: np.ndarray, rounds: int = 8) -> np.ndarray:
    """About ``rounds`` passes of ufuncs over ``a``: they release the GIL."""
    out = a
    for _ in range(rounds):
        out = np.sqrt(np.abs(np.sin(out)) + 1.0)
    return out


def python_work(n: int) -> int:
    """A pure-Python loop of ``n`` steps: it holds the GIL."""
    total = 0
    for i in range(n):
        total = (total + i * i) % 1_000_003
    return total


def plus_one(x: float) -> float:
    return x + 1


def run_list(f: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """One task of hand-chunked: f over a chunk of leaves."""
    return [f(x) for x in items]


def calibrate(seconds: float, size: int) -> tuple[int, int]:
    """Rounds of ``numpy_work`` and steps of ``python_work`` taking about ``seconds``."""
    a = np.random.default_rng(0).standard_normal(size)
    t = time.perf_counter()
    numpy_work(a, 4)
    per_round = (time.perf_counter() - t) / 4
    t = time.perf_counter()
    python_work(200_000)
    per_step = (time.perf_counter() - t) / 200_000
    return max(1, round(seconds / per_round)), max(1, round(seconds / per_step))


class NumpyF:
    """A picklable f of fixed cost: ``numpy_work`` with calibrated rounds."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds

    def __call__(self, a: np.ndarray) -> np.ndarray:
        return numpy_work(a, self.rounds)


class PythonF:
    """A picklable f of fixed cost: ``python_work`` with calibrated steps (the leaf
    shifts the result so that each leaf's result differs)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def __call__(self, v: int) -> int:
        return python_work(self.steps) + v


def chunks(items: list[Any], n: int) -> list[list[Any]]:
    size = math.ceil(len(items) / n) if items else 1
    return [items[i : i + size] for i in range(0, len(items), size)]


def contenders(
    tree: Any, f: Callable[[Any], Any], ex: Any, dask_client: bool
) -> dict[str, Callable[[], Any]]:
    """The timed calls for one workload on one executor."""
    n_chunks = 4 * WORKERS

    def containers_map() -> Any:
        return ct.fmap(f, tree, executor=ex)

    if dask_client:

        def hand() -> Any:
            leaves, st = ct.flatten(tree)
            futures = ex.map(run_list, [f] * n_chunks, chunks(leaves, n_chunks), pure=False)
            return ct.unflatten(st, [y for part in ex.gather(futures) for y in part])

        return {"containers": containers_map, "hand-chunked": hand}

    def hand_map() -> Any:
        leaves, st = ct.flatten(tree)
        size = math.ceil(len(leaves) / n_chunks)
        return ct.unflatten(st, list(ex.map(f, leaves, chunksize=size)))

    def hand_chunked() -> Any:
        leaves, st = ct.flatten(tree)
        parts = ex.map(run_list, [f] * n_chunks, chunks(leaves, n_chunks))
        return ct.unflatten(st, [y for part in parts for y in part])

    return {"containers": containers_map, "hand": hand_map, "hand-chunked": hand_chunked}


@ct.container(children=["values"])
class Tagged:
    """``light-kept``'s node: 100 floats and a kept (mutable) dict."""

    values: list[float]
    meta: dict[str, int]


def same(a: Any, b: Any) -> bool:
    la, sa = ct.flatten(a)
    lb, sb = ct.flatten(b)
    return sa == sb and all(
        np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y for x, y in zip(la, lb)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small workloads, 1 round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-dask", action="store_true", help="skip the LocalCluster")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    n_heavy, size, seconds, n_light = (
        (8, 16_384, 0.002, 10_000)
        if args.quick
        else (
            64,
            262_144,
            0.020,
            100_000,
        )
    )
    rounds_np, steps_py = calibrate(seconds, size)
    rng = np.random.default_rng(args.seed)
    heavy_np = {f"a{i}": rng.standard_normal(size) for i in range(n_heavy)}
    heavy_py = {f"p{i}": i for i in range(n_heavy)}
    light = {f"k{i}": [float(j) for j in range(100)] for i in range(n_light // 100)}
    light_shared = {**light, "tied": light["k0"]}
    light_kept = [Tagged([float(j) for j in range(100)], {"i": i}) for i in range(n_light // 100)]
    numpy_f, python_f = NumpyF(rounds_np), PythonF(steps_py)

    threads = cf.ThreadPoolExecutor(WORKERS)
    processes = cf.ProcessPoolExecutor(WORKERS)
    client = cluster = None
    if not args.no_dask:
        from dask.distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=WORKERS, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
        client = Client(cluster)
    cases: dict[tuple[str, str], dict[str, Callable[[], Any]]] = {}
    workloads = {"heavy-numpy": (heavy_np, numpy_f), "heavy-python": (heavy_py, python_f)}
    for name, (tree, f) in workloads.items():
        cases[(name, "serial")] = {"serial": lambda tree=tree, f=f: ct.fmap(f, tree)}
        cases[(name, "threads")] = contenders(tree, f, threads, False)
        cases[(name, "processes")] = contenders(tree, f, processes, False)
        if client is not None:
            cases[(name, "dask")] = contenders(tree, f, client, True)
    cases[("light", "serial")] = {"serial": lambda: ct.fmap(plus_one, light)}
    cases[("light", "threads")] = contenders(light, plus_one, threads, False)
    cases[("light-shared", "serial")] = {"serial": lambda: ct.fmap(plus_one, light_shared)}
    cases[("light-shared", "threads")] = contenders(light_shared, plus_one, threads, False)
    cases[("light-kept", "serial")] = {"serial": lambda: ct.fmap(plus_one, light_kept)}
    cases[("light-kept", "threads")] = contenders(light_kept, plus_one, threads, False)

    bad = []
    expected = {name: ct.fmap(f, tree) for name, (tree, f) in workloads.items()}
    expected["light"] = ct.fmap(plus_one, light)
    expected["light-shared"] = ct.fmap(plus_one, light_shared)
    expected["light-kept"] = ct.fmap(plus_one, light_kept)
    for (name, ex_name), calls in cases.items():
        for lib, call in calls.items():
            if not same(call(), expected[name]):
                bad.append(f"{name}/{ex_name}/{lib}")
    if bad:
        print("results differ from the serial fmap: " + ", ".join(bad), file=sys.stderr)
        return 1
    print("all results agree with the serial fmap", file=sys.stderr)

    times: dict[tuple[str, str, str], list[float]] = {}
    order = [(name, ex, lib) for (name, ex), calls in cases.items() for lib in calls]
    shuffle = random.Random(args.seed)
    for r in range(rounds):
        shuffle.shuffle(order)
        for name, ex, lib in order:
            gc.collect()
            gc.disable()
            t = time.perf_counter()
            cases[(name, ex)][lib]()
            times.setdefault((name, ex, lib), []).append(time.perf_counter() - t)
            gc.enable()
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)

    threads.shutdown()
    processes.shutdown()
    if client is not None and cluster is not None:
        client.close()
        cluster.close()

    ms = {key: statistics.median(v) * 1000 for key, v in times.items()}
    print(f"executor maps, ms (median of {rounds} rounds); speedup = serial / containers\n")
    print(
        "| workload | executor | containers | hand | hand-chunked | serial | speedup | vs hand-chunked |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name in ("heavy-numpy", "heavy-python", "light", "light-shared", "light-kept"):
        serial = ms[(name, "serial", "serial")]
        for ex in ("threads", "processes", "dask"):
            if (name, ex, "containers") not in ms:
                continue
            ours = ms[(name, ex, "containers")]
            hand = ms.get((name, ex, "hand"))
            chunked = ms[(name, ex, "hand-chunked")]
            print(
                f"| {name} | {ex} | {ours:.1f} | {'-' if hand is None else f'{hand:.1f}'} "
                f"| {chunked:.1f} | {serial:.1f} | {serial / ours:.2f}x | {ours / chunked:.2f}x |"
            )
    print(
        "\ntargets: heavy-numpy/threads and heavy-python/processes >= 1.8x, dask >= 1.6x,"
        " containers <= 1.0x hand-chunked; light: containers <= 1.2x hand"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
