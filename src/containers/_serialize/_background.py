"""Background saves: one writer thread per process, and the snapshot rule.

This stage owns the thread that ``save(..., background=True)`` hands its writes to and
nothing else: the caller encodes and copies the arrays first (the snapshot), so the
thread never reads an object the caller may still change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = ["pending", "submit"]

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pending: set[Future[Any]] = set()


def submit(write: Callable[[], None]) -> Future[None]:
    """Run ``write()`` on the writer thread; saves run one after another, in order.

    The pool's thread is joined when the interpreter exits (``concurrent.futures``
    waits for its queued work), so a pending save completes before the process ends.
    """
    global _pool  # noqa: PLW0603 - one pool per process, made on first use
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="containers-bg-save")
        future = _pool.submit(write)
        _pending.add(future)
    future.add_done_callback(_pending.discard)
    return future


def pending() -> list[Future[Any]]:
    """The background saves not finished yet."""
    with _lock:
        return list(_pending)
