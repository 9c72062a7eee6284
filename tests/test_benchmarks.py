"""The benchmark's smoke run (`benchmarks/run.py --quick`), as CI runs it.

Not a timed test: it checks that the harness runs end to end and that containers'
result equals the hand-written one on every workload, at every size.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_quick_benchmark_runs_and_containers_agrees_with_hand(tmp_path: Path) -> None:
    """--quick finishes, prints the targets, and containers matches hand everywhere."""
    out = tmp_path / "quick.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "### Targets (issue 4)" in result.stdout
    cells = json.loads(out.read_text())["cells"]
    ours = [c for c in cells if c["lib"].startswith("containers")]
    workloads = {c["workload"] for c in ours}
    assert {"W1", "W2", "W3", "W3id", "W4", "W5", "deep-fmap"} <= workloads
    bad = {(c["workload"], c["n"], c["lib"]): c["status"] for c in ours if c["status"] != "ok"}
    assert bad == {}
