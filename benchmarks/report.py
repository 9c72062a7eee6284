"""Results: the JSON record of a run, the Markdown tables and the speed targets.

Reads and renders recorded numbers only; it never runs a workload.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

SUBJECT = "containers"  # the library whose ratios the tables and targets give
REFERENCE = "hand"
FLOOR = "f-only"  # the bare f calls: what any tree_map must at least spend
TARGET_SIZES = (1_000, 100_000)  # the targets hold at 1,000 and 100,000 leaves


@dataclasses.dataclass
class Cell:
    """One library on one workload at one size."""

    workload: str
    n: int
    lib: str
    units: int  # leaves (or arrays, or levels) per call
    status: str  # "ok", "differs: ...", "fails: ..."
    number: int = 0
    samples_ns: list[float] = dataclasses.field(default_factory=list)

    @property
    def per_unit(self) -> float | None:
        """Best ns per leaf over the rounds, or None when the library did not run."""
        if self.status != "ok" or not self.samples_ns:
            return None
        return min(self.samples_ns) / self.units


@dataclasses.dataclass
class Run:
    """Everything one invocation measured, as saved by --out."""

    meta: dict[str, Any]
    workloads: dict[str, dict[str, Any]]  # name -> {"title", "unit", "deep"}
    libs: dict[str, dict[str, str]]  # name -> {"version": ..., "note": ...}
    notes: list[str]
    cells: list[Cell]

    def __post_init__(self) -> None:
        self._index = {(c.workload, c.n, c.lib): c for c in self.cells}

    def add(self, cell: Cell) -> None:
        self.cells.append(cell)
        self._index[cell.workload, cell.n, cell.lib] = cell

    def cell(self, workload: str, n: int, lib: str) -> Cell | None:
        return self._index.get((workload, n, lib))

    def per_unit(self, workload: str, n: int, lib: str) -> float | None:
        cell = self.cell(workload, n, lib)
        return None if cell is None else cell.per_unit

    def ratio(self, workload: str, n: int, lib: str, versus: str) -> float | None:
        a, b = self.per_unit(workload, n, lib), self.per_unit(workload, n, versus)
        return None if a is None or b is None else a / b

    def sizes(self, workload: str) -> list[int]:
        return sorted({c.n for c in self.cells if c.workload == workload})

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = dataclasses.asdict(self)
        path.write_text(json.dumps(data, indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> Run:
        data = json.loads(path.read_text())
        cells = [Cell(**cell) for cell in data.pop("cells")]
        return cls(cells=cells, **data)


# --- several runs: medians ---------------------------------------------------------------


def median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def median_per_unit(runs: Sequence[Run], workload: str, n: int, lib: str) -> float | None:
    return median(run.per_unit(workload, n, lib) for run in runs)


def median_ratio(runs: Sequence[Run], workload: str, n: int, lib: str, vs: str) -> float | None:
    """The median over runs of the ratio within each run (each run's own ratio, so drift between runs cancels)."""
    return median(run.ratio(workload, n, lib, vs) for run in runs)


def median_growth(
    runs: Sequence[Run], workload: str, small: int, large: int, lib: str = SUBJECT
) -> float | None:
    """Median over runs of `lib`'s per-leaf cost at `large` over the one at `small`."""
    growths = []
    for run in runs:
        a, b = run.per_unit(workload, large, lib), run.per_unit(workload, small, lib)
        growths.append(None if a is None or b is None else a / b)
    return median(growths)


def median_overhead_ratio(
    runs: Sequence[Run], workload: str, n: int, lib: str, vs: str
) -> float | None:
    """Median over runs of `lib`'s time above the bare f calls (FLOOR) over `vs`'s."""
    ratios = []
    for run in runs:
        a, b = run.per_unit(workload, n, lib), run.per_unit(workload, n, vs)
        floor = run.per_unit(workload, n, FLOOR)
        if a is None or b is None or floor is None or b <= floor:
            ratios.append(None)
        else:
            ratios.append((a - floor) / (b - floor))
    return median(ratios)


# --- Markdown ----------------------------------------------------------------------------


def size_label(n: int) -> str:
    for factor, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{suffix}"
    return str(n)


def fmt_ns(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 1000 else f"{value:.0f}"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table padded to aligned columns, so it reads in a terminal too."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (w + 1) + (":" if i else "-") for i, w in enumerate(widths))
    return "\n".join([line(header), rule + "|", *(line(row) for row in rows)])


def workload_table(runs: Sequence[Run], workload: str) -> str:
    first = runs[0]
    info = first.workloads[workload]
    sizes = first.sizes(workload)
    libs = [lib for lib in first.libs if any(first.cell(workload, n, lib) for n in sizes)]
    n_name = "depth" if info.get("deep") else "N"
    rows: list[list[str]] = []
    failures: list[str] = []
    for lib in libs:
        row = [lib]
        for n in sizes:
            value = median_per_unit(runs, workload, n, lib)
            cell = first.cell(workload, n, lib)
            if value is None and cell is not None:
                row.append(cell.status.split(":")[0])
                failures.append(f"- {lib} at {n_name}={size_label(n)}: {cell.status}")
            else:
                row.append(fmt_ns(value))
        rows.append(row)
    for versus in libs:
        if versus != SUBJECT and SUBJECT in libs:
            ratios = [median_ratio(runs, workload, n, SUBJECT, versus) for n in sizes]
            if any(r is not None for r in ratios):
                rows.append([f"{SUBJECT} / {versus}", *map(fmt_ratio, ratios)])
    header = ["lib", *(f"{n_name}={size_label(n)}" for n in sizes)]
    title = f"### {workload}: {info['title']} (ns per {info['unit']})"
    return "\n".join([title, "", markdown_table(header, rows), *failures])


@dataclasses.dataclass(frozen=True)
class Target:
    """SUBJECT / versus <= limit on the workloads (all of them when empty).

    `versus=GROWTH` means SUBJECT's per-leaf cost at 100k over its cost at 1k, on the
    workloads where the hand-written code's own growth is within the limit;
    `overhead=True` compares the time above the bare f calls (FLOOR) instead of the
    whole time, on the workloads that have that row.
    """

    text: str
    workloads: tuple[str, ...]
    versus: str
    limit: float
    overhead: bool = False


GROWTH = "growth"
TARGETS = (
    Target("every workload <= 1.0x jax", (), "jax", 1.0),
    Target("every workload <= 1.0x optree", (), "optree", 1.0),
    *(
        Target(f"{w}{held} <= {limit}x hand", (w + held,), "hand", limit)
        for w, limit in (("W3", 1.2), ("W3id", 1.4))
        for held in ("", "-held")
    ),
    Target("cache on <= 1.1x cache off", (), "containers-nocache", 1.1),
    Target("per-leaf cost at 100k <= 1.3x the 1k one (where hand's is)", (), GROWTH, 1.3),
    Target("overhead above f-only <= 1/5 of torch-py's", (), "torch-py", 0.2, overhead=True),
)


def _worst(runs: Sequence[Run], target: Target, names: Sequence[str], n: int) -> str | None:
    """The target's ratio at size n, worst over its workloads, as 'value (workload)'."""

    def measure(workload: str) -> float | None:
        if target.versus == GROWTH:
            small, large = TARGET_SIZES
            hand = median_growth(runs, workload, small, large, REFERENCE)
            if n != large or hand is None or hand > target.limit:
                return None
            return median_growth(runs, workload, small, large)
        if target.overhead:
            return median_overhead_ratio(runs, workload, n, SUBJECT, target.versus)
        return median_ratio(runs, workload, n, SUBJECT, target.versus)

    found = [(value, w) for w in names if (value := measure(w)) is not None]
    if not found:
        return None
    value, where = max(found)
    return fmt_ratio(value) + (f" ({where})" if len(names) > 1 else "")


def targets_table(runs: Sequence[Run]) -> str:
    first = runs[0]
    sized = [w for w in first.workloads if not first.workloads[w].get("deep")]
    header = ["target", *(f"N={size_label(n)}" for n in TARGET_SIZES), "result"]
    rows = []
    for target in TARGETS:
        names = target.workloads or tuple(sized)
        cells = [_worst(runs, target, names, n) for n in TARGET_SIZES]
        values = [float(cell.split()[0]) for cell in cells if cell is not None]
        verdict = "n/a" if not values else "PASS" if max(values) <= target.limit else "MISS"
        rows.append([target.text, *(cell or "-" for cell in cells), verdict])
    note = (
        f"Ratios of {SUBJECT} (median over {len(runs)} run(s)); for the targets over several "
        "workloads the worst one is shown. Informative only: the exit code is 0 regardless."
    )
    return "\n".join(["### Targets", "", markdown_table(header, rows), "", note])


def render(runs: Sequence[Run]) -> str:
    """The whole report: setup, one table per workload, the targets."""
    first = runs[0]
    meta = first.meta
    lines = [
        f"## Benchmark: {SUBJECT} vs {REFERENCE}-written code and peers",
        "",
        f"- {len(runs)} run(s); first started {meta.get('started', '?')} on "
        f"{meta.get('machine', '?')}, Python {meta.get('python', '?')}, "
        f"revision {meta.get('revision', '?')}",
        f"- method: {meta.get('repeats', '?')} interleaved rounds, shuffled order, >= "
        f"{meta.get('min_time_s', '?')} s per sample, min over rounds, gc off while timing; "
        f"malloc: {meta.get('malloc', '?')}; load average {meta.get('load', '?')}",
        "- versions: "
        + ", ".join(
            f"{name} {info['version']}" for name, info in first.libs.items() if info["version"]
        ),
    ]
    lines += [f"- {name}: {info['note']}" for name, info in first.libs.items() if info["note"]]
    lines += [f"- note: {note}" for note in first.notes]
    sections = ["\n".join(lines)]
    sections += [workload_table(runs, w) for w in first.workloads]
    sections.append(targets_table(runs))
    return "\n\n".join(sections) + "\n"
