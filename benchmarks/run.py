"""Time containers against a hand-written baseline and the installed pytree peers.

    python benchmarks/run.py --quick                     # smoke run, under a minute
    python benchmarks/run.py --out benchmarks/results/NAME.json
    python benchmarks/run.py --report benchmarks/results/NAME.json [MORE.json ...]
    python benchmarks/run.py --profile --only W2,W3id,W1 --sizes 10000

See benchmarks/README.md for the workloads and how to read the output.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import datetime
import gc
import os
import platform
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import adapters
from adapters import Lib
from measure import check, check_isolated, first_difference, interleave
from report import Cell, Run, render, size_label
from workloads import F_ONLY, HAND, WORKLOADS, Case, Op, Workload

FULL_SIZES = (100, 1_000, 10_000, 100_000)
QUICK_SIZES = (100, 1_000)
DEPTH = 100_000
# glibc returns big freed blocks to the kernel unless these are pinned, which makes the
# C++ peers' per-call buffers fault in again on every call (perf.md, "Scaling").
PINNED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(64 << 20)}


@dataclasses.dataclass(frozen=True)
class Settings:
    sizes: tuple[int, ...]
    depth: int
    repeats: int
    min_time_s: float
    workloads: tuple[Workload, ...]
    lib_names: tuple[str, ...]
    seed: int


def parse_sizes(text: str) -> tuple[int, ...]:
    """'100,1k,10_000' -> (100, 1000, 10000)."""
    sizes = []
    for part in text.lower().replace("_", "").split(","):
        size = part.strip()
        sizes.append(int(size[:-1]) * 1000 if size.endswith("k") else int(size))
    return tuple(sizes)


def pick(text: str | None, known: Sequence[str], what: str) -> list[str]:
    """The comma-separated names in `text` (all of `known` when None), case-insensitive."""
    if text is None:
        return list(known)
    by_lower = {name.lower(): name for name in known}
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name.lower() not in by_lower]
    if unknown:
        sys.exit(f"unknown {what}: {', '.join(unknown)}; choose from {', '.join(known)}")
    return [by_lower[name.lower()] for name in names]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 100, 1k; 3 short rounds")
    parser.add_argument("--sizes", help="comma-separated N, e.g. 100,1k,10k (default: 100..100k)")
    parser.add_argument("--depth", type=int, help=f"depth of the deep-* list (default {DEPTH})")
    parser.add_argument("--repeats", type=int, help="interleaved rounds (default 5, quick 3)")
    parser.add_argument(
        "--min-time", type=float, help="seconds per sample (default 0.2, quick 0.01)"
    )
    parser.add_argument("--only", help="comma-separated workloads, e.g. W1,W2,deep-fmap")
    parser.add_argument("--libs", help="comma-separated libraries (hand always runs)")
    parser.add_argument("--seed", type=int, default=0, help="input data and round order")
    parser.add_argument("--out", type=Path, help="save the raw results as JSON here")
    parser.add_argument(
        "--report", type=Path, nargs="+", metavar="JSON", help="print saved run(s), no timing"
    )
    parser.add_argument(
        "--malloc",
        choices=("pinned", "default"),
        default="pinned",
        help="pin glibc's malloc thresholds by re-executing (default) or keep glibc's",
    )
    parser.add_argument(
        "--profile", action="store_true", help="cProfile containers on the workloads, no timing"
    )
    return parser.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    return Settings(
        sizes=parse_sizes(args.sizes) if args.sizes else QUICK_SIZES if args.quick else FULL_SIZES,
        depth=args.depth or DEPTH,
        repeats=args.repeats or (3 if args.quick else 5),
        min_time_s=args.min_time or (0.01 if args.quick else 0.2),
        workloads=tuple(
            w
            for name in pick(args.only, [w.name for w in WORKLOADS], "workload")
            for w in WORKLOADS
            if w.name == name
        ),
        lib_names=tuple(pick(args.libs, list(adapters.LOADERS), "library")),
        seed=args.seed,
    )


def pin_malloc() -> None:
    """Re-execute this process with the thresholds set, unless the environment sets them."""
    if all(name in os.environ for name in PINNED_MALLOC):
        return
    env = {**PINNED_MALLOC, **os.environ}
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def machine() -> str:
    model = platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, {platform.system()}"


def source_revision() -> str:
    """The git commit of the working tree measured, '+dirty' when src/ has changes."""
    repo = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + ("+dirty" if dirty else "")


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def checked_ops(workload: Workload, libs: Sequence[Lib], case: Case, run: Run) -> dict[str, Op]:
    """Each library's call, once its result equals hand's; the others are recorded as such."""
    hand_op = workload.bind(HAND, case)
    expected = workload.view(HAND, hand_op())
    ops = {HAND.name: hand_op}
    if workload.f_only is not None:
        ops[F_ONLY.name] = workload.f_only(case)  # a floor, not a tree: never compared
    for lib in libs:
        if not workload.supports(lib):
            continue

        def task(lib: Lib = lib) -> str | None:
            return first_difference(workload.view(lib, workload.bind(lib, case)()), expected)

        status = check_isolated(task) if workload.deep else check(task)
        if status == "ok":
            ops[lib.name] = workload.bind(lib, case)
        else:
            run.add(Cell(workload.name, case.n, lib.name, workload.units(case.n), status))
    return ops


def measure_cell(
    workload: Workload, libs: Sequence[Lib], case: Case, run: Run, settings: Settings
) -> None:
    started = time.perf_counter()
    ops = checked_ops(workload, libs, case, run)
    gc.collect()
    rng = random.Random(f"{settings.seed}-{workload.name}-{case.n}")
    timings = interleave(ops, settings.repeats, settings.min_time_s * 1e9, rng)
    units = workload.units(case.n)
    for name, timing in timings.items():
        samples = [round(ns, 1) for ns in timing.samples_ns]
        run.add(Cell(workload.name, case.n, name, units, "ok", timing.number, samples))
    cells = [run.cell(workload.name, case.n, lib) for lib in run.libs]
    summary = "  ".join(
        f"{c.lib} {c.per_unit:.1f}" if c.per_unit is not None else f"{c.lib} {c.status[:40]}"
        for c in cells
        if c is not None
    )
    elapsed = time.perf_counter() - started
    log(f"{workload.name:>17} N={size_label(case.n):>4} {elapsed:5.1f}s  {summary}")


def benchmark(settings: Settings) -> Run:
    started = time.time()
    libs, notes = adapters.load(settings.lib_names)
    run = Run(
        meta={
            "started": datetime.datetime.now().isoformat(timespec="seconds"),
            "machine": machine(),
            "revision": source_revision(),
            "python": f"{platform.python_implementation()} {platform.python_version()}",
            "malloc": ", ".join(f"{k}={os.environ[k]}" for k in PINNED_MALLOC if k in os.environ)
            or "glibc default",
            "repeats": settings.repeats,
            "min_time_s": settings.min_time_s,
            "sizes": list(settings.sizes),
            "depth": settings.depth,
            "seed": settings.seed,
            "argv": sys.argv[1:],
            "load": load_average(),
        },
        workloads={
            w.name: {"title": w.title, "unit": w.unit, "deep": w.deep} for w in settings.workloads
        },
        libs={
            lib.name: {"version": lib.version, "note": lib.note} for lib in [HAND, F_ONLY, *libs]
        },
        notes=notes,
        cells=[],
    )
    for note in notes:
        log(f"note: {note}")
    # Each workload gets inputs of its own, freed before the next one is measured, so
    # that a cell does not depend on which workloads ran before it (with every input
    # kept, the 100k cells ran with every library's earlier trees alive, over 1 GB).
    for n in settings.sizes:
        for workload in settings.workloads:
            if not workload.deep:
                measure_cell(workload, libs, Case(n, settings.seed), run, settings)
    for workload in settings.workloads:
        if workload.deep:
            measure_cell(workload, libs, Case(settings.depth, settings.seed), run, settings)
    run.meta["load"] += f" -> {load_average()}"
    run.meta["duration_s"] = round(time.time() - started, 1)
    return run


def call_repeatedly(op: Op, calls: int) -> None:
    for _ in range(calls):
        op()


def profile(settings: Settings, top: int = 10) -> None:
    """Print where containers spends its time on each workload (cProfile, by own time)."""
    libs, notes = adapters.load(["containers"])
    if not libs:
        sys.exit(f"cannot profile: {notes[0]}")
    (lib,) = libs
    for workload in settings.workloads:
        for n in (settings.depth,) if workload.deep else settings.sizes:
            if not workload.supports(lib):
                continue
            op = workload.bind(lib, Case(n, settings.seed))
            calls = max(1, 1_000_000 // workload.units(n))
            profiler = cProfile.Profile()
            profiler.runcall(call_repeatedly, op, calls)
            entries = sorted(profiler.getstats(), key=lambda entry: -entry.inlinetime)
            total = sum(entry.inlinetime for entry in entries) or 1.0
            print(f"\n{workload.name} N={size_label(n)}: {calls} calls, by own time")
            for entry in entries[:top]:
                code = entry.code
                where = (
                    code
                    if isinstance(code, str)
                    else f"{Path(code.co_filename).name}:{code.co_firstlineno}({code.co_name})"
                )
                print(
                    f"  {100 * entry.inlinetime / total:5.1f}% own"
                    f" {100 * entry.totaltime / total:6.1f}% cum"
                    f"  {entry.callcount:>9} calls  {where}"
                )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        print(render([Run.load(path) for path in args.report]), end="")
        return 0
    settings = settings_from(args)
    if args.malloc == "pinned":
        pin_malloc()
    if args.profile:
        profile(settings)
        return 0
    run = benchmark(settings)
    if args.out:
        run.save(args.out)
        log(f"saved {args.out}")
    print(render([run]), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
