"""stubs/ is the local stub path: documented, and every stub in it matches its module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

STUBS = Path(__file__).parents[2] / "stubs"


def stub_modules() -> list[str]:
    """The top-level modules stubbed in stubs/ (``foo.pyi`` or ``foo/__init__.pyi``)."""
    modules = [p.stem for p in STUBS.glob("*.pyi")]
    modules += [p.parent.name for p in STUBS.glob("*/__init__.pyi")]
    return sorted(modules)


def test_stub_path_is_documented() -> None:
    """stubs/README.md says what the folder is and how a stub is checked."""
    readme = (STUBS / "README.md").read_text()
    assert "mypy_path" in readme
    assert "stubPath" in readme
    assert "stubtest" in readme


@pytest.mark.parametrize(
    "module",
    stub_modules() or [pytest.param(None, marks=pytest.mark.skip(reason="stubs/ has no stubs"))],
)
def test_stub_matches_the_installed_module(module: str) -> None:
    """``mypy.stubtest`` finds no difference between the stub and the runtime module."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", module],
        env={**os.environ, "MYPYPATH": str(STUBS)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
