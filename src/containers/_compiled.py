"""Whether the compiled extension is used, and how generated source is run.

The foundation the code generators stand on (``_codegen`` for a class's protocol,
``_engine`` for its mappers and loops): ``SPEEDUPS``, the compiled engine's module or
None, and ``exec_source``/``source_filename``, which run generated code and register
it with ``linecache`` so tracebacks and ``inspect.getsource`` show it. It imports
nothing from the package but the extension itself.
"""

from __future__ import annotations

import itertools
import linecache
import os
from types import ModuleType
from typing import Any

__all__ = ["SPEEDUPS", "exec_source", "source_filename"]


def _load_speedups() -> ModuleType | None:
    """The compiled engine (``_speedups*.c``), unless it was not built (no compiler,
    another interpreter) or ``CONTAINERS_PURE_PYTHON`` is set: then the generated
    Python code, its plain twin, runs. Both pass the same tests."""
    if os.environ.get("CONTAINERS_PURE_PYTHON"):
        return None
    try:
        from containers._engine import _speedups
    except ImportError:
        return None
    return _speedups


#: The module of the compiled engine, or None (read by ``_engine`` and ``_codegen``).
SPEEDUPS = _load_speedups()

_counter = itertools.count()


def source_filename(label: str) -> str:
    """A unique linecache filename for generated code: ``<containers generated label #n>``."""
    return f"<containers generated {label} #{next(_counter)}>"


def exec_source(source: str, g: dict[str, Any], filename: str) -> None:
    """Run generated ``source`` in ``g`` and register it in linecache (tracebacks)."""
    exec(compile(source, filename, "exec"), g)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
