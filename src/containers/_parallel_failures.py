"""What an executor map says when a chunk fails: the path of the leaf ``f`` raised on,
of a leaf or an ``f`` that cannot be pickled, of the leaves of a dead worker's chunk.

A stage below ``_parallel``: it finds paths with the operation's own plain walk (a
probe that counts calls), never walks a tree itself, and runs nothing on an executor.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from containers._engine._relocate import Locate, add_note, path_note
from containers._errors import counted, short_repr
from containers._parallel_backends import Dask, Futures
from containers._paths import KeyPath, where

__all__ = ["CALL", "call_path", "is_pickling_error", "located", "unpicklable"]

#: The attribute a chunk puts on the exception ``f`` raised: the index of the failed call.
CALL = "_containers_call"


def call_path(serial: Callable[[Callable[..., Any], bool], Any], k: int) -> KeyPath | None:
    """The key path of the ``k``-th call of ``f``, found by the operation's plain walk
    with a probe that calls nothing: it counts calls, as the recorder did, and raises
    ``Locate`` at the ``k``-th, which the walk fills with its path."""
    count = 0

    def probe(*args: Any, **kwargs: Any) -> None:
        nonlocal count
        if count == k:
            raise Locate
        count += 1

    try:
        serial(probe, True)
    except Locate as found:
        return found.path
    return None  # the tree changed since it was recorded


def located(
    op: str,
    backend: Futures | Dask,
    err: BaseException,
    f: Callable[..., Any],
    calls: list[Any],
    start: int,
    size: int,
    finished: set[int],
    serial: Callable[[Callable[..., Any], bool], Any],
) -> BaseException:
    """``err``, raised by a chunk's future, with the path it concerns: the leaf ``f``
    raised it on (a note), a leaf or an ``f`` that cannot be pickled (a TypeError that
    says so), or the leaves of a chunk whose worker died (a note)."""
    k = err.__dict__.pop(CALL, None) if isinstance(err, Exception) else None
    if k is not None:
        path = call_path(serial, k)
        add_note(
            err,
            path_note(op, path)
            if path is not None
            else f"{op}: raised by f (the tree has changed since, so its path is unknown)",
        )
        return err
    if not isinstance(err, Exception):
        return err  # KeyboardInterrupt, SystemExit: as they are
    if backend.broken(err):
        if isinstance(backend, Futures):
            # A broken pool fails every pending future: the first unfinished chunk
            # is the first that may have run when the worker died.
            start = min(s for s in range(0, len(calls), size) if s not in finished)
        last = min(start + size, len(calls)) - 1
        first_path = call_path(serial, start)
        span = where(first_path) if first_path is not None else "?"
        if last > start:
            last_path = call_path(serial, last)
            span += f" to {where(last_path) if last_path is not None else '?'}"
        which = "the first unfinished chunk" if isinstance(backend, Futures) else "a chunk"
        add_note(
            err,
            f"{op}: a worker died while f ran on the leaves at {span} ({which}, "
            f"{counted(last - start + 1, 'leaf', 'leaves')}): killed, out of memory, or "
            f"crashed in native code. Rerun with a ThreadPoolExecutor, or serially, to "
            f"see the error.",
        )
        return err
    first = where(call_path(serial, start) or ())
    if backend.remote:
        bad = unpicklable(op, backend, f, calls, start, size, serial)
        if bad is not None:
            return bad
        if is_pickling_error(err):  # f and the leaves pickle: the results did not
            add_note(
                err,
                f"{op}: f's results for the chunk of leaves that starts at {first} "
                f"could not be pickled to be sent back from the worker process. Make f "
                f"return picklable values (arrays, numbers, containers of them), or "
                f"use a ThreadPoolExecutor, whose threads share the objects.",
            )
            return err
    add_note(err, f"{op}: the executor raised this for the chunk of leaves that starts at {first}")
    return err


def is_pickling_error(err: BaseException) -> bool:
    """``err`` is what pickle raises for an object it cannot pickle."""
    return isinstance(err, pickle.PicklingError) or (
        isinstance(err, (TypeError, AttributeError)) and "pickle" in str(err)
    )


def unpicklable(
    op: str,
    backend: Futures | Dask,
    f: Callable[..., Any],
    calls: list[Any],
    start: int,
    size: int,
    serial: Callable[[Callable[..., Any], bool], Any],
) -> TypeError | None:
    """A TypeError naming ``f`` or the leaf that cannot be pickled, if one cannot."""
    how = (
        "Define it at a module's top level (not a lambda or a local function), or use "
        "a ThreadPoolExecutor, whose threads share the objects."
    )
    try:
        backend.dumps(f)
    except Exception as bad:
        return TypeError(
            f"{op}: f ({short_repr(f)}) cannot be pickled, so it cannot be sent to a "
            f"worker process: {type(bad).__name__}: {bad}. {how}"
        )
    for k in range(start, min(start + size, len(calls))):
        try:
            backend.dumps(calls[k])
        except Exception as bad:
            path = call_path(serial, k)
            return TypeError(
                f"{op}: the leaf at {where(path or ())} cannot be pickled, so it cannot "
                f"be sent to a worker process: {type(bad).__name__}: {bad}. Exclude it "
                f"from the map (where=, exclude=), make it picklable, or use a "
                f"ThreadPoolExecutor."
            )
    return None
