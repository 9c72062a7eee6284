"""Quality gates that run with the tests: ruff's lint rules and formatting.

``mypy --strict`` on the package runs in tests/typing (test_package_is_strict_clean).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE = ["src", "tests", "benchmarks"]


@pytest.mark.parametrize(
    "command",
    [["check", *CODE], ["format", "--check", *CODE]],
    ids=["lint", "format"],
)
def test_ruff_is_clean(command: list[str]) -> None:
    """ruff (pyproject.toml's rule set) finds nothing to report in the code."""
    result = subprocess.run(
        [sys.executable, "-m", "ruff", *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
