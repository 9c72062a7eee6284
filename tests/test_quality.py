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


def _module_imports() -> dict[str, set[str]]:
    """For each module of the package (``containers.x.y``), the package's modules it
    imports, at its top or inside a function (the mypy plugin and the package faces,
    ``__init__.py``, which only hand names on, are left out)."""
    import ast

    src = ROOT / "src"
    names = {
        ".".join(p.relative_to(src).with_suffix("").parts)
        for p in (src / "containers").rglob("*.py")
        if p.name != "__init__.py" and "mypy" not in p.parts
    }
    graph: dict[str, set[str]] = {}
    for name in names:
        tree = ast.parse((src / (name.replace(".", "/") + ".py")).read_text())
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                found.update(t for t in targets if t in names)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in names)
        graph[name] = found - {name}
    return graph


def test_no_module_imports_back_into_a_loop() -> None:
    """The package's modules import each other without a loop (issue #31): the engine
    and code generation, _flatten and _split, each stage and a later one."""
    graph = _module_imports()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    loops: list[list[str]] = []

    def visit(start: str) -> None:
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                loops.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert loops == []
