"""Count CPU instructions per leaf with valgrind's callgrind: a cost that does not move.

    python benchmarks/instructions.py                       # W1..W5, W3id-held, N = 2,000
    python benchmarks/instructions.py --only W2,W3id --n 10k --libs containers

Timings on a shared 2-core machine move by 10-50 % from run to run; the number of
instructions an operation executes does not (same interpreter, same input, hash seed
fixed). For each workload and library this runs a child process under callgrind twice,
making 1 and then 6 calls after a warm-up call, and reports the difference / 5 per leaf
(per array on the W3 trees), next to the hand-written baseline. Instructions ignore
cache misses, so they complement the timings of run.py; they do not replace them.
Needs valgrind; exits with 2 and says so without it.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import adapters
from run import parse_sizes, pick
from workloads import HAND, WORKLOADS, Case

DEFAULT_WORKLOADS = ("W1", "W1f", "W1u", "W2", "W3id", "W3id-held", "W4", "W5")
DEFAULT_LIBS = ("containers", "containers-nocache")
CALLS = (1, 6)  # the difference of the two runs is 5 calls: start-up cancels out


def child(workload_name: str, lib_name: str, n: int, calls: int) -> None:
    """Build the input, warm up with one call, then make ``calls`` calls (gc off)."""
    workload = next(w for w in WORKLOADS if w.name == workload_name)
    lib = HAND if lib_name == "hand" else adapters.LOADERS[lib_name]()
    case = Case(n)  # kept alive, as in run.py: it holds the -held workloads' arrays
    op = workload.bind(lib, case)
    op()
    gc.disable()
    for _ in range(calls):
        op()


def count(workload_name: str, lib_name: str, n: int) -> float:
    """Instructions per unit of one call, from two callgrind runs."""
    totals = []
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        for calls in CALLS:
            command = [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={Path(tmp) / 'out'}",
                sys.executable,
                __file__,
                "--child",
                workload_name,
                lib_name,
                str(n),
                str(calls),
            ]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            found = re.search(r"Collected : (\d+)", done.stderr)
            if done.returncode != 0 or found is None:
                raise RuntimeError(f"{workload_name} {lib_name}: {done.stderr[-2000:]}")
            totals.append(int(found.group(1)))
    workload = next(w for w in WORKLOADS if w.name == workload_name)
    return (totals[1] - totals[0]) / (CALLS[1] - CALLS[0]) / workload.units(n)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="2k", help="leaves (Linear nodes on W3), e.g. 2k")
    parser.add_argument("--only", help="comma-separated workloads (default W1..W5, W3id-held)")
    parser.add_argument("--libs", help="comma-separated libraries (hand always runs)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        workload_name, lib_name, n, calls = args.child
        child(workload_name, lib_name, int(n), int(calls))
        return 0
    if shutil.which("valgrind") is None:
        print("instructions.py needs valgrind (apt install valgrind)", file=sys.stderr)
        return 2
    (n,) = parse_sizes(args.n)
    names = pick(args.only or ",".join(DEFAULT_WORKLOADS), [w.name for w in WORKLOADS], "workload")
    libs = pick(args.libs or ",".join(DEFAULT_LIBS), list(adapters.LOADERS), "library")
    print(f"instructions per leaf (per array on W3 trees), N = {n}, {sys.version.split()[0]}")
    print()
    header = ["workload", "hand", *libs, *(f"{lib} / hand" for lib in libs)]
    print("| " + " | ".join(header) + " |")
    print("|---|" + "--:|" * (len(header) - 1))
    for name in names:
        workload = next(w for w in WORKLOADS if w.name == name)
        hand = count(name, "hand", n)
        row = []
        for lib_name in libs:
            lib = adapters.LOADERS[lib_name]()
            row.append(count(name, lib_name, n) if workload.supports(lib) else None)
        cells = [f"{v:,.0f}" if v is not None else "-" for v in row]
        ratios = [f"{v / hand:.2f}" if v is not None else "-" for v in row]
        print(f"| {name} | {hand:,.0f} | " + " | ".join(cells + ratios) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
