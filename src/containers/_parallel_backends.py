"""The executors an executor map runs on: ``concurrent.futures`` pools and dask's
``Client``, behind one small adapter each (submit, send, as_completed, cancel).

A stage below ``_parallel``, which alone uses it. It walks no tree and schedules
nothing itself, and imports dask only when the caller's ``Client`` shows it is loaded.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import pickle
import sys
from collections.abc import Callable, Iterable
from typing import Any

from containers._errors import short_repr

__all__ = ["Dask", "Futures", "backend_for", "outcome"]


class Futures:
    """A ``concurrent.futures.Executor``: thread or process pool, or any other."""

    def __init__(self, executor: cf.Executor) -> None:
        self.executor = executor
        self.remote = isinstance(executor, cf.ProcessPoolExecutor)

    def workers(self) -> int:
        n = getattr(self.executor, "_max_workers", None)
        return n if isinstance(n, int) and n > 0 else os.cpu_count() or 1

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.executor.submit(fn, *args)

    def send(self, chunks: list[list[Any]]) -> list[Any]:
        return chunks  # pickled with each task, by the pool

    def as_completed(self, futures: list[Any]) -> Iterable[tuple[Any, Callable[[], Any]]]:
        """Each future as it finishes, with the function that returns its result or
        raises its exception."""
        return ((fut, fut.result) for fut in cf.as_completed(futures))

    def cancel(self, futures: Iterable[Any]) -> None:
        for fut in futures:
            fut.cancel()

    def broken(self, err: BaseException) -> bool:
        return isinstance(err, cf.BrokenExecutor)

    def dumps(self, value: Any) -> None:
        pickle.dumps(value)


class Dask:
    """A ``dask.distributed.Client``: its ``submit``, ``as_completed`` and ``cancel``."""

    def __init__(self, client: Any) -> None:
        import distributed

        self.client = client
        self.distributed = distributed
        self.remote = True

    def workers(self) -> int:
        return max(1, int(sum(self.client.nthreads().values())))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.client.submit(fn, *args, pure=False)

    def send(self, chunks: list[list[Any]]) -> list[Any]:
        # Leaves go to the workers as data, not in the task graph, which dask warns
        # about from 10 MB on ("Sending large graph"); each task runs where its chunk is.
        return self.client.scatter(chunks, hash=False)  # type: ignore[no-any-return]

    def as_completed(self, futures: list[Any]) -> Iterable[tuple[Any, Callable[[], Any]]]:
        # with_results: the client fetches each result as its task finishes, in its
        # event loop, instead of one blocking round trip per future here.
        done = self.distributed.as_completed(futures, with_results=True, raise_errors=False)  # type: ignore[no-untyped-call, unused-ignore]
        for fut, result in done:
            yield fut, outcome(fut.status == "error", result)

    def cancel(self, futures: Iterable[Any]) -> None:
        self.client.cancel(list(futures))

    def broken(self, err: BaseException) -> bool:
        return type(err).__name__ == "KilledWorker"

    def dumps(self, value: Any) -> None:
        from distributed.protocol import pickle as dask_pickle

        dask_pickle.dumps(value)  # type: ignore[no-untyped-call, unused-ignore]


def outcome(failed: bool, result: Any) -> Callable[[], Any]:
    """A function returning ``result``, or raising the exception of a failed dask task
    (``result`` is then dask's ``(type, exception, traceback)``)."""
    if failed:
        _, exc, tb = result

        def fail() -> Any:
            raise exc.with_traceback(tb)

        return fail
    if isinstance(result, BaseException):  # a cancelled task: its CancelledError
        exc = result

        def cancelled() -> Any:
            raise exc

        return cancelled
    return lambda: result


def backend_for(op: str, executor: Any) -> Futures | Dask:
    """The adapter for ``executor``; dask is imported only if the caller has it loaded
    (a ``Client`` cannot exist otherwise)."""
    if isinstance(executor, cf.Executor):
        return Futures(executor)
    distributed = sys.modules.get("distributed")
    if distributed is not None and isinstance(executor, distributed.Client):
        return Dask(executor)
    raise TypeError(
        f"{op}: executor= must be a concurrent.futures.Executor (ThreadPoolExecutor, "
        f"ProcessPoolExecutor) or a dask.distributed.Client, got {short_repr(executor)}."
    )
