"""The typing case files, checked by mypy (with and without the plugin) and pyright.

Each checker configuration runs once per session, in a subprocess started together with
the others on first use, with its cache under pytest's temporary directory; then each
case function is one test that reads its own lines out of the shared output. The
package itself (plugin included) gets ``mypy --strict`` with the project's settings, and
a cold/warm/edited sequence of runs checks the plugin through mypy's cache.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent
CASES = HERE / "cases"
REPO = HERE.parents[1]

#: Which case files each checker configuration checks.
CHECKED_FILES: dict[str, tuple[str, ...]] = {
    "mypy": ("common_cases.py", "plain_cases.py", "controls_cases.py"),
    "mypy-plugin": (
        "common_cases.py",
        "plugin_cases.py",
        "agreement_cases.py",
        "controls_cases.py",
    ),
    "pyright": ("common_cases.py", "plain_cases.py", "controls_cases.py"),
}


@dataclass(frozen=True)
class Diagnostic:
    """One error reported by a checker."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path.name}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Case:
    """A function in a case file: the lines whose diagnostics belong to it."""

    file: str
    name: str
    first: int
    last: int


def case_functions(file: str) -> list[Case]:
    """The top-level functions of a case file, plus ``<module>`` for everything else."""
    source = (CASES / file).read_text()
    cases = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith(("case_", "control_")):
            first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            assert node.end_lineno is not None
            cases.append(Case(file, node.name, first, node.end_lineno))
    return cases


def module_lines(file: str) -> set[int]:
    """The lines of a case file outside its case functions."""
    total = len((CASES / file).read_text().splitlines())
    inside = {n for c in case_functions(file) for n in range(c.first, c.last + 1)}
    return set(range(1, total + 1)) - inside


class CheckerRun:
    """A type checker running in a subprocess; ``result()`` waits for it and parses."""

    def __init__(self, name: str, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.name = name
        self.argv = argv
        self.process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self._result: tuple[list[Diagnostic], str] | None = None

    def close(self) -> None:
        """Stop the checker if no test read it (a -k selection), and close its pipes."""
        if self.process.returncode is None:
            self.process.kill()
        self.process.communicate()

    def result(self) -> tuple[list[Diagnostic], str]:
        """(diagnostics, raw output); fails the test if the checker itself broke."""
        if self._result is None:
            out, err = self.process.communicate(timeout=600)
            if self.name == "pyright":
                diagnostics = _parse_pyright(out, err, self.process.returncode)
            else:
                diagnostics = _parse_mypy(out, err, self.process.returncode)
            self._result = (diagnostics, out + err)
        return self._result


_MYPY_LINE = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): (?P<level>error|note): (?P<msg>.*)$")


def _parse_mypy(out: str, err: str, returncode: int) -> list[Diagnostic]:
    if returncode not in (0, 1) or "INTERNAL ERROR" in out + err or "Traceback" in err:
        pytest.fail(f"mypy crashed (exit {returncode}):\n{out}\n{err}")
    diagnostics = []
    for raw in out.splitlines():
        match = _MYPY_LINE.match(raw)
        if match and match["level"] == "error":
            path = Path(match["path"]).resolve()
            diagnostics.append(Diagnostic(path, int(match["line"]), match["msg"]))
    return diagnostics


def _parse_pyright(out: str, err: str, returncode: int) -> list[Diagnostic]:
    try:
        report = json.loads(out)
    except json.JSONDecodeError:
        pytest.fail(f"pyright did not report (exit {returncode}):\n{out}\n{err}")
    return [
        Diagnostic(
            Path(d["file"]).resolve(),
            d["range"]["start"]["line"] + 1,
            f"{d['message']} ({d.get('rule', '')})",
        )
        for d in report["generalDiagnostics"]
        if d["severity"] == "error"
    ]


def _mypy_argv(config: str, cache: Path, *targets: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(HERE / config),
        "--cache-dir",
        str(cache),
        "--no-error-summary",
        "--hide-error-context",
        "--no-pretty",
        "--show-absolute-path",
        *targets,
    ]


def pyright_argv() -> list[str] | None:
    """How to run pyright here, or None when it is not installed."""
    if shutil.which("pyright"):
        return ["pyright"]
    try:
        import pyright  # noqa: F401 - the PyPI wrapper that fetches pyright from npm
    except ImportError:
        return None
    return [sys.executable, "-m", "pyright"]


@pytest.fixture(scope="session")
def typing_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's cache directory for the checkers."""
    return tmp_path_factory.mktemp("typing-cache")


@pytest.fixture(scope="session")
def checker_runs(typing_cache: Path) -> Iterator[dict[str, CheckerRun]]:
    """Start every checker configuration at once; the tests wait for the ones they read."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    cases = [str(CASES / f) for f in CHECKED_FILES["mypy-plugin"]]
    runs = {
        "mypy": CheckerRun(
            "mypy",
            _mypy_argv(
                "mypy_plain.ini",
                typing_cache / "mypy",
                *[str(CASES / f) for f in CHECKED_FILES["mypy"]],
            ),
            HERE,
            env,
        ),
        "mypy-plugin": CheckerRun(
            "mypy-plugin",
            _mypy_argv("mypy_plugin.ini", typing_cache / "plugin", *cases),
            HERE,
            env,
        ),
        # The package itself, plugin included, with the project's own settings.
        "mypy-package": CheckerRun(
            "mypy-package",
            [sys.executable, "-m", "mypy", "--cache-dir", str(typing_cache / "package")],
            REPO,
            env,
        ),
    }
    pyright = pyright_argv()
    if pyright is not None:
        runs["pyright"] = CheckerRun(
            "pyright",
            [*pyright, "-p", str(HERE / "pyrightconfig.json"), "--outputjson"],
            HERE,
            env,
        )
    yield runs
    for run in runs.values():
        run.close()


def diagnostics_in(run: CheckerRun, file: str, lines: set[int]) -> list[Diagnostic]:
    """The errors of ``run`` on ``lines`` of case file ``file``."""
    path = (CASES / file).resolve()
    return [d for d in run.result()[0] if d.path == path and d.line in lines]


def iter_cases() -> Iterator[tuple[str, Case]]:
    """Every (checker, case) pair, for parametrizing."""
    for checker, files in CHECKED_FILES.items():
        for file in files:
            for case in case_functions(file):
                yield checker, case


def _case_id(param: tuple[str, Case]) -> str:
    checker, case = param
    return f"{checker}:{case.file}::{case.name}"


@pytest.mark.parametrize("checked", list(iter_cases()), ids=_case_id)
def test_case(checked: tuple[str, Case], checker_runs: dict[str, CheckerRun]) -> None:
    """A case function type-checks cleanly (a control function must fail)."""
    checker, case = checked
    if checker not in checker_runs:
        pytest.skip("pyright is not installed (pip install pyright)")
    found = diagnostics_in(checker_runs[checker], case.file, set(range(case.first, case.last + 1)))
    if case.name.startswith("control_"):
        assert found, f"{checker} accepted {case.name}, which must fail"
    else:
        assert not found, "\n".join(map(str, found))


@pytest.mark.parametrize(
    ("checker", "file"),
    [(checker, file) for checker, files in CHECKED_FILES.items() for file in files],
)
def test_module_level(checker: str, file: str, checker_runs: dict[str, CheckerRun]) -> None:
    """Class declarations and imports of a case file type-check cleanly."""
    if checker not in checker_runs:
        pytest.skip("pyright is not installed (pip install pyright)")
    found = diagnostics_in(checker_runs[checker], file, module_lines(file))
    assert not found, "\n".join(map(str, found))


def test_package_is_strict_clean(checker_runs: dict[str, CheckerRun]) -> None:
    """``mypy --strict`` (the project's [tool.mypy]) passes on the package and the plugin."""
    diagnostics, output = checker_runs["mypy-package"].result()
    assert not diagnostics, output


CACHED_MODELS = """\
from __future__ import annotations
from typing import Generic, TypeVar
import containers as ct

T = TypeVar("T")

@ct.container
class Pair(Generic[T]):
    a: T
    b: Later  # a forward reference: the class hook has to wait for it

@ct.container(children=[])
class Later:
    name: str = ""

@ct.container(keep=["nmae"])
class Typo:
    name: str = ""
"""

CACHED_USE = """\
import containers as ct
from models import Pair, Later

reveal_type(ct.fmap(str, Pair(1, Later())))
reveal_type(ct.flatten(Pair(1.5, Later()))[0])
"""


def test_plugin_through_the_cache(
    tmp_path: Path, typing_cache: Path, checker_runs: dict[str, CheckerRun]
) -> None:
    """Cold, warm and partly re-checked runs report the same; classes come from the cache."""
    (tmp_path / "models.py").write_text(CACHED_MODELS)
    (tmp_path / "use.py").write_text(CACHED_USE)
    cache = tmp_path / "cache"
    checker_runs["mypy-plugin"].result()  # its cache holds numpy and containers: copy it
    shutil.copytree(typing_cache / "plugin", cache)
    argv = [*_mypy_argv("mypy_plugin.ini", cache, "models.py", "use.py")]
    argv[argv.index("--show-absolute-path")] = "--show-column-numbers"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}

    def run() -> str:
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False
        )
        assert "INTERNAL ERROR" not in done.stdout + done.stderr, done.stdout + done.stderr
        return done.stdout

    expected = [
        "models.py:16:21: error: @container on 'Typo': 'nmae' in keep= is not a field of "
        "'Typo'. Fields are: 'name'. Did you mean 'name'?  [containers-field]",
        'use.py:4:13: note: Revealed type is "models.Pair[str]"',
        'use.py:5:13: note: Revealed type is "list[float]"',
    ]
    cold = run()
    assert cold.splitlines() == expected
    assert run() == cold  # everything from the cache
    (tmp_path / "use.py").write_text(CACHED_USE + "\n")  # only use.py is checked again
    assert run() == cold
