"""Background saves: one writer thread per process, and the snapshot rule.

This stage owns the thread that ``save(..., background=True)`` hands its writes to and
nothing else: the caller encodes and copies the arrays first (the snapshot), so the
thread never reads an object the caller may still change.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = ["pending", "submit", "wait_for"]

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pending: set[Future[Any]] = set()
_by_path: dict[str, list[Future[Any]]] = {}  # the pending saves to each real path

#: Set when the interpreter starts to exit, before it waits for the writer thread: from
#: then on no one can ask a save for its result(). threading's hook for this is the one
#: concurrent.futures itself uses; registered after its own, it runs before it.
_exiting = threading.Event()
_register_atexit = getattr(threading, "_register_atexit", None)
if _register_atexit is not None:
    _register_atexit(_exiting.set)


def submit(write: Callable[[], None], path: str) -> Future[None]:
    """Run ``write()`` on the writer thread; saves run one after another, in order.

    The pool's thread is joined when the interpreter exits (``concurrent.futures``
    waits for its queued work), so a pending save completes before the process ends;
    one that fails then, when no one can ask for its ``result()``, says so on stderr.
    """
    global _pool  # noqa: PLW0603 - one pool per process, made on first use
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="containers-bg-save")
        future = _pool.submit(write)
        _pending.add(future)
        key = os.path.realpath(path)
        _by_path.setdefault(key, []).append(future)

    def done(f: Future[Any]) -> None:
        err = None if f.cancelled() else f.exception()
        if err is not None and (_exiting.is_set() or not threading.main_thread().is_alive()):
            # The program has ended, so no one can call result(): say it, or the
            # checkpoint would be lost without a word.
            print(
                f"containers: a background save to {path} failed at interpreter exit, "
                f"the file was not written: {type(err).__name__}: {err}",
                file=sys.stderr,
                flush=True,
            )
        with _lock:
            _pending.discard(f)
            waiting = _by_path.get(key, [])
            if f in waiting:
                waiting.remove(f)
            if not waiting:
                _by_path.pop(key, None)

    future.add_done_callback(done)
    return future


def wait_for(path: str) -> None:
    """Wait until the background saves to ``path`` submitted so far are done (their
    errors stay theirs, for their ``result()``), so that a save made after them in the
    caller's order lands after them on disk."""
    if threading.current_thread().name.startswith("containers-bg-save"):
        return  # a save made by a background save's own callback: it would wait on itself
    with _lock:
        waiting = list(_by_path.get(os.path.realpath(path), []))
    for f in waiting:
        with contextlib.suppress(BaseException):
            f.exception()


def pending() -> list[Future[Any]]:
    """The background saves not finished yet."""
    with _lock:
        return list(_pending)
