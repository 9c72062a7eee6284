"""The benchmark's smoke run (`benchmarks/run.py --quick`), as CI runs it, and the
instruction counter (`benchmarks/instructions.py`) where valgrind is installed.

Not a timed test: it checks that the harness runs end to end and that containers'
result equals the hand-written one on every workload, at every size.
"""

from __future__ import annotations

import gc
import json
import shutil
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``benchmarks/name`` with ``args`` from the project root, capturing output."""
    command = [sys.executable, str(ROOT / "benchmarks" / name), *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=600, check=False, cwd=ROOT
    )


def test_quick_benchmark_runs_and_containers_agrees_with_hand(tmp_path: Path) -> None:
    """--quick finishes, prints the targets, and containers matches hand everywhere."""
    out = tmp_path / "quick.json"
    result = run_script("run.py", "--quick", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "### Targets" in result.stdout
    assert "overhead above f-only <= 1/5 of torch-py's" in result.stdout
    cells = json.loads(out.read_text())["cells"]
    ours = [c for c in cells if c["lib"].startswith("containers")]
    workloads = {c["workload"] for c in ours}
    expected = {"W1", "W2", "W3", "W3id", "W3-held", "W3id-held", "W4", "W5", "W6id"}
    assert expected | {"deep-fmap"} <= workloads
    bad = {(c["workload"], c["n"], c["lib"]): c["status"] for c in ours if c["status"] != "ok"}
    assert bad == {}
    floors = {c["workload"] for c in cells if c["lib"] == "f-only" and c["status"] == "ok"}
    assert floors == {
        *("W2", "W3", "W3id", "W3-held", "W3id-held", "W4", "W4c", "W4d", "W6id"),
        *("fmapstructure", "deep-fmap"),
    }


def test_f_only_makes_the_workloads_f_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The f-only floor calls f once per leaf the workload maps, on the same leaves."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import workloads

    case = workloads.Case(40)
    for workload in workloads.WORKLOADS:
        if workload.f_only is not None and not workload.deep:
            assert len(workload.f_only(case)()) == workload.units(40), workload.name
    (w2,) = [w for w in workloads.WORKLOADS if w.name == "W2"]
    assert w2.f_only is not None
    mapped = workloads.hand_map(workloads.inc, case.w1())
    assert w2.f_only(case)() == workloads.hand_leaves(mapped)


def test_report_targets_read_overhead_and_growth_as_defined(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Overhead is time above the f-only floor; growth counts only where hand's is small."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import report

    def cell(workload: str, n: int, lib: str, ns: float) -> report.Cell:
        return report.Cell(workload, n, lib, 1, "ok", 1, [ns])

    run = report.Run(
        meta={},
        workloads={"A": {"title": "a", "unit": "leaf"}, "B": {"title": "b", "unit": "leaf"}},
        libs={},
        notes=[],
        cells=[
            cell("A", 1_000, "f-only", 100),
            cell("A", 1_000, "containers", 150),
            cell("A", 1_000, "torch-py", 400),
            # B: containers grows 2x, but so does hand: not counted against growth
            cell("B", 1_000, "hand", 10),
            cell("B", 100_000, "hand", 20),
            cell("B", 1_000, "containers", 10),
            cell("B", 100_000, "containers", 20),
            cell("A", 1_000, "hand", 10),
            cell("A", 100_000, "hand", 11),
            cell("A", 100_000, "containers", 210),
        ],
    )
    assert report.median_overhead_ratio([run], "A", 1_000, "containers", "torch-py") == 50 / 300
    table = report.targets_table([run])
    overhead = next(line for line in table.splitlines() if "overhead above f-only" in line)
    assert "0.17 (A)" in overhead and "PASS" in overhead
    growth = next(line for line in table.splitlines() if "per-leaf cost at 100k" in line)
    assert "1.40 (A)" in growth and "MISS" in growth


def test_w3_arrays_are_the_trees_own_unless_held(monkeypatch: pytest.MonkeyPatch) -> None:
    """W3 trees hold arrays nothing else refers to, equal across libraries; the held
    trees of two libraries share one list of arrays that the Case keeps."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import adapters
    import workloads

    case = workloads.Case(8)
    models = [workloads.HAND_MODEL, adapters.frozen_dataclasses()]
    own = [[layer.w for mlp in case.w3(model) for layer in mlp.layers] for model in models]
    held = [[layer.w for mlp in case.w3(m, held=True) for layer in mlp.layers] for m in models]
    assert len(own[0]) == 8
    assert all(a is not b and (a == b).all() for a, b in zip(*own, strict=True))
    assert all(a is b for a, b in zip(*held, strict=True))
    assert [(a == b).all() for a, b in zip(own[0], held[0], strict=True)] == [True] * 8
    # on a fresh Case: an own array dies with its tree (the Case's cache of built trees
    # dropped); a held one also sits in the Case's list and outlives the tree
    fresh = workloads.Case(8)
    for held_too in (False, True):
        refs = [weakref.ref(y.w) for x in fresh.w3(models[0], held=held_too) for y in x.layers]
        fresh._w3.clear()
        gc.collect()
        assert [r() is not None for r in refs] == [held_too] * 8


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_instruction_counts_run_and_compare_to_hand() -> None:
    """instructions.py counts W5 under callgrind for hand and containers: positive
    counts, and a ratio that is their quotient."""
    result = run_script("instructions.py", "--only", "W5", "--libs", "containers", "--n", "200")
    assert result.returncode == 0, result.stderr[-3000:]
    row = next(line for line in result.stdout.splitlines() if line.startswith("| W5 |"))
    hand, ours, ratio = (float(cell.replace(",", "")) for cell in row.strip("| ").split(" | ")[1:])
    assert hand > 0
    assert ours > 0
    assert ratio == pytest.approx(ours / hand, rel=0.01)  # the cells are rounded


def test_split_benchmark_quick_runs_and_agrees_with_hand(tmp_path: Path) -> None:
    """benchmarks/split.py --quick finishes, and containers' split/merge/state results
    equal the hand-written loops' (the script checks them before timing)."""
    out = tmp_path / "split.json"
    result = run_script("split.py", "--quick", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "check: containers agrees with the hand-written loops: ok" in result.stdout
    (run,) = json.loads(out.read_text())
    assert run["problems"] == []
    ops = ("split", "merge", "state", "partition", "combine")
    assert {f"containers|{op}" for op in ops} <= set(run["ns"])


def test_treelize_benchmark_quick_runs_and_agrees_with_hand() -> None:
    """benchmarks/treelize.py --quick finishes, and every library's strict and outer
    results equal the hand-written dict zip's (the script checks them before timing)."""
    result = run_script("treelize.py", "--quick")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "all results agree with the hand-written baseline" in result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| strict 1k |")]
    rows += [line for line in result.stdout.splitlines() if line.startswith("| outer 1k |")]
    assert len(rows) == 2


def test_interop_benchmark_quick_runs_and_agrees_with_hand(tmp_path: Path) -> None:
    """benchmarks/interop.py --quick finishes, and through every registry containers'
    leaves are the hand registration's arrays and its rebuilt trees equal hand's."""
    for peer in ("jax", "optree", "torch"):
        pytest.importorskip(peer)
    out = tmp_path / "interop.json"
    result = run_script("interop.py", "--quick", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    cells = json.loads(out.read_text())["cells"]
    ours = {(c["library"], c["op"]): c["status"] for c in cells if c["variant"] == "containers"}
    assert ours == {
        ("jax", "tree_flatten"): "ok",
        ("jax", "tree_unflatten"): "ok",
        ("jax", "jit"): "ok",
        ("optree", "tree_flatten"): "ok",
        ("optree", "tree_unflatten"): "ok",
        ("torch", "tree_flatten"): "ok",
        ("torch", "tree_unflatten"): "ok",
    }
    assert all(c["status"] == "ok" for c in cells)
    assert "| jax | tree_flatten | 1k |" in result.stdout


def test_serialization_benchmark_quick_runs_and_every_contender_agrees(tmp_path: Path) -> None:
    """benchmarks/serialization.py --quick finishes; every contender's loaded tree (and the
    raw baseline's bytes) equals the original, checked by the script before timing."""
    for peer in ("safetensors", "torch"):  # flax's row is left out without flax
        pytest.importorskip(peer)
    out = tmp_path / "serialization.json"
    result = run_script("serialization.py", "--quick", "--rounds", "1", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "all contenders agree with the original trees" in result.stdout
    cells = json.loads(out.read_text())
    assert set(cells) == {"big", "many", "classes"}
    assert len(cells["classes"]["containers load"]) == 1
    for name in (
        "containers",
        "safetensors + tree",
        "raw write+fsync / readinto",
        "pickle 5 dump+fsync / load",
        "containers serialize / deserialize (memory)",
        "pickle 5 dumps / loads (memory)",
    ):
        assert len(cells["many"][f"{name} load"]) == 1
    assert "containers save / pickle 5 dump+fsync / load save" in result.stdout


def test_display_benchmark_quick_runs_and_renders_what_it_must() -> None:
    """benchmarks/display.py --quick finishes, times html and pformat on both trees at
    each size, and its renderings show the totals and the count of what is cut."""
    result = run_script("display.py", "--quick")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "PROBLEM" not in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("| html model |")]
    assert len(rows) == 2


def test_parallel_benchmark_quick_runs_and_agrees_with_serial() -> None:
    """benchmarks/parallel.py --quick starts its pools and LocalCluster, finishes, and
    every executor map's result equals the serial fmap's (checked before timing)."""
    pytest.importorskip("distributed")
    result = run_script("parallel.py", "--quick")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "all results agree with the serial fmap" in result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| heavy-")]
    assert len(rows) == 6
