"""What both halves of the public API share: the paused collector, errors naming
their file, the ``expect=`` check. Split from ``_api`` (saving) and ``_load`` (loading).
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Iterator
from typing import Any

from containers._errors import SerializationError, short_repr

__all__ = ["PathLike", "_check_expect", "_gc_paused", "_in_file"]

PathLike = str | os.PathLike[str]


#: Guards ``_gc_depth`` and ``_gc_restore``: encodes and decodes run at once on the
#: caller's threads and the background writer, and the collector is process-wide.
_gc_lock = threading.Lock()
_gc_depth = 0  # how many _gc_paused blocks are running, in all threads
_gc_restore = False  # whether the first of them found the collector enabled


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a file is encoded or decoded.

    Parsing a header makes a few objects per tensor and record, none of them cyclic;
    every collection the allocations trigger would walk all of them again. Pausing it
    halves the load of benchmarks/serialization.py's "many" tree (100,000 tensors).

    Blocks may overlap in several threads (a background save and a load): a depth
    counter under a lock makes the first block to start record whether the collector
    was enabled and the last to end restore it, so no interleaving leaves it disabled
    when the caller had it enabled.
    """
    global _gc_depth, _gc_restore  # noqa: PLW0603 - the collector is process-wide
    with _gc_lock:
        if _gc_depth == 0:
            _gc_restore = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_restore:
                gc.enable()


@contextlib.contextmanager
def _in_file(path: str) -> Iterator[None]:
    """Start the message of a ``SerializationError`` raised inside with ``path``, so that
    an error met while loading many files (or in ``containers diff A B``) says which."""
    try:
        yield
    except SerializationError as err:
        if err.args and type(err.args[0]) is str:
            err.args = (f"{path}: {err.args[0]}", *err.args[1:])
        raise


def _check_expect(expect: Any, op: str) -> None:
    if expect is not None and not isinstance(expect, type):
        raise TypeError(
            f"{op}: expect must be a class or None, got {type(expect).__qualname__} "
            f"{short_repr(expect)}. Pass the class itself, e.g. expect=list or expect=MyModel."
        )
