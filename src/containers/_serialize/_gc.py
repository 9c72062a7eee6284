"""Pausing the cyclic garbage collector around an encode or a decode, in any thread."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["gc_paused"]

#: Guards ``_gc_depth`` and ``_gc_restore``: encodes and decodes run at once on the
#: caller's threads and the background writer, and the collector is process-wide.
_gc_lock = threading.Lock()
_gc_depth = 0  # how many _gc_paused blocks are running, in all threads
_gc_restore = False  # whether the first of them found the collector enabled


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
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
