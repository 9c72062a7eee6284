"""Executor maps (fmap, fmap_with_path, treelize over concurrent.futures or dask) and
``compute``/``persist`` for trees with dask leaves.

A stage below the operations it serves (``_fmap``, ``_treelize``), which hand it their
own serial map: each runs it with ``f`` replaced by a recorder (``record``), so that
the engine's one walk, with its identity cache, ``exclude=`` and ``where=``, decides
what is submitted exactly as it decides what ``f`` is called on; the recorded calls go
to the executor in chunks; a second map over the recorded tree (the engine's) puts the
results in place. It never walks a tree itself, imports no operation module and
schedules nothing: the executor does.
"""

from __future__ import annotations

import concurrent.futures as cf
import enum
import itertools
import math
import operator
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from containers._engine._core import UNSET, Locate, Memo, add_note, map_tree, path_note
from containers._engine._fast import fast_map
from containers._errors import counted, short_repr
from containers._paths import KeyPath, where

__all__ = [
    "ONE",
    "PRUNED",
    "STAR",
    "WITH_KEYWORDS",
    "check_options",
    "compute",
    "executor_map",
    "fill",
    "fmap_with_path_on_executor",
    "persist",
]

#: How a recorded call is made again: ``f(x)``, ``f(*args)`` or ``f(*args, **kwargs)``.
ONE, STAR, WITH_KEYWORDS = 0, 1, 2

#: Chunks per worker when ``chunksize`` is not given: enough to keep every worker busy
#: while chunks of unequal cost finish, few enough that a chunk's overhead (a task, a
#: pickled call) is paid over many leaves (benchmarks/parallel.py).
CHUNKS_PER_WORKER = 4

#: The attribute a chunk puts on the exception ``f`` raised: the index of the failed call.
_CALL = "_containers_call"


class _Slot(int):
    """A leaf standing for the result of the ``index``-th recorded call (an ``int``
    subclass: made in C, and no other leaf has its type)."""

    __slots__ = ()

    @property
    def index(self) -> int:
        return int(self)


class _Pruned(enum.Enum):
    PRUNED = "PRUNED"

    def __repr__(self) -> str:
        return "<pruned>"


#: What the recording map puts where the identity cache puts ``prune``: the fill puts
#: the real ``prune`` object back, so that it is not copied as a node would be.
PRUNED = _Pruned.PRUNED


def record(shape: int, slots: bool) -> tuple[list[Any], Callable[..., Any]]:
    """A list of calls and the recorder that appends to it and returns the call's
    index: a ``_Slot``, or with ``slots=False`` a plain int, for maps whose every leaf
    is a result (nothing kept), which the fill reads with ``results.__getitem__``.
    (One-tree maps of every leaf record with ``list.append``: ``_replayed``.)"""
    calls: list[Any] = []
    append = calls.append
    index: Callable[[int], Any] = _Slot if slots else int

    def one(x: Any) -> Any:
        append(x)
        return index(len(calls) - 1)

    def star(*args: Any) -> Any:
        append(args)
        return index(len(calls) - 1)

    def with_keywords(*args: Any, **kwargs: Any) -> Any:
        append((args, kwargs))
        return index(len(calls) - 1)

    recorder: Callable[..., Any]
    if shape == ONE:
        recorder = one
    else:
        recorder = star if shape == STAR else with_keywords
    return calls, recorder


def run_chunk(f: Callable[..., Any], shape: int, start: int, items: Sequence[Any]) -> list[Any]:
    """Make the recorded calls ``items`` (the ``start``-th and after): run by a worker.

    The exception ``f`` raises carries the index of its call, so that the caller names
    the leaf's path; it is otherwise raised as ``f`` raised it.
    """
    out: list[Any] = []
    try:
        if shape == ONE:
            out.extend(map(f, items))  # extend keeps what came before an exception
        elif shape == STAR:
            out.extend(itertools.starmap(f, items))
        else:
            for args, kwargs in items:
                out.append(f(*args, **kwargs))
    except Exception as err:
        setattr(err, _CALL, start + len(out))
        raise
    return out


class _Futures:
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


class _Dask:
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
            yield fut, _outcome(fut.status == "error", result)

    def cancel(self, futures: Iterable[Any]) -> None:
        self.client.cancel(list(futures))

    def broken(self, err: BaseException) -> bool:
        return type(err).__name__ == "KilledWorker"

    def dumps(self, value: Any) -> None:
        from distributed.protocol import pickle as dask_pickle

        dask_pickle.dumps(value)  # type: ignore[no-untyped-call, unused-ignore]


def _outcome(failed: bool, result: Any) -> Callable[[], Any]:
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


def _backend(op: str, executor: Any) -> _Futures | _Dask:
    """The adapter for ``executor``; dask is imported only if the caller has it loaded
    (a ``Client`` cannot exist otherwise)."""
    if isinstance(executor, cf.Executor):
        return _Futures(executor)
    distributed = sys.modules.get("distributed")
    if distributed is not None and isinstance(executor, distributed.Client):
        return _Dask(executor)
    raise TypeError(
        f"{op}: executor= must be a concurrent.futures.Executor (ThreadPoolExecutor, "
        f"ProcessPoolExecutor) or a dask.distributed.Client, got {short_repr(executor)}."
    )


class _Bar:
    """``progress=``: a callback ``(done, total)``, or True for a bar on stderr."""

    def __init__(self, op: str, progress: Any, total: int) -> None:
        self.close: Callable[[], None] = _nothing
        if progress is None or progress is False:
            self.update: Callable[[int], None] = _ignore
            return
        if progress is True:
            self.update, self.close = _stderr_bar(op, total)
            return
        if not callable(progress):
            raise TypeError(
                f"{op}: progress= must be True (a bar on stderr), a function called as "
                f"progress(done, total), or None, got {short_repr(progress)}."
            )

        def update(done: int) -> None:
            try:
                progress(done, total)
            except Exception as err:  # not f's: say whose, or it reads as f's error
                add_note(
                    err,
                    f"{op}: raised by the progress= function, called as progress({done}, {total})",
                )
                raise

        self.update = update


def _nothing() -> None:
    return


def _ignore(done: int) -> None:
    return


def _stderr_bar(op: str, total: int) -> tuple[Callable[[int], None], Callable[[], None]]:
    """A bar drawn by tqdm, or else rich; an ImportError says to install one."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        pass
    else:
        bar = tqdm(total=total, desc=op, file=sys.stderr)

        def update(done: int) -> None:
            bar.update(done - bar.n)

        return update, bar.close
    try:
        from rich.progress import Progress
    except ImportError:
        raise ImportError(
            f"{op}: progress=True draws a bar with tqdm or rich, and neither is installed. "
            f"Install one (pip install tqdm), or pass progress=a function (done, total)."
        ) from None
    rich_bar = Progress(transient=True)
    task = rich_bar.add_task(op, total=total)
    rich_bar.start()
    return (lambda done: rich_bar.update(task, completed=done)), rich_bar.stop


def _is_integer(value: Any) -> bool:
    """An int or an integer type that says so (``__index__``: numpy's integers)."""
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def check_options(op: str, executor: Any, chunksize: Any, progress: Any) -> bool:
    """True when an executor map is asked for; the options alone are an error."""
    if executor is None:
        if chunksize is not None or progress is not None:
            raise TypeError(
                f"{op}: chunksize= and progress= apply to maps over an executor: pass "
                f"executor= too (a concurrent.futures.Executor or a dask Client)."
            )
        return False
    if chunksize is not None and (
        isinstance(chunksize, bool) or not _is_integer(chunksize) or chunksize < 1
    ):
        raise ValueError(
            f"{op}: chunksize= must be a positive int (leaves per task), or None for an "
            f"automatic size, got {short_repr(chunksize)}."
        )
    return True


def executor_map(
    op: str,
    f: Callable[..., Any],
    executor: Any,
    chunksize: int | None,
    progress: Any,
    shape: int,
    serial: Callable[[Callable[..., Any], bool], Any],
    *,
    slots: bool = True,
    prune: Any = UNSET,
    rebuild: Callable[[Any, list[Any]], Any] | None = None,
) -> Any:
    """``op`` with ``f`` run by ``executor``.

    ``serial(g, plain)`` runs ``op``'s own map with ``g`` in place of ``f`` (on the
    plain engine with ``plain``, where errors are located); it is run once with a
    recorder, whose calls go to the executor in chunks, and again with a probe only if
    a call fails, to find its path. ``rebuild(recorded_tree, results)`` puts the
    results in place (by default an ``fmap`` over the recorded tree, which keeps its
    sharing); ``prune`` is the caller's, stood for by ``PRUNED`` while recording.
    ``slots=False``: every leaf of the recorded tree is a call's index (see ``record``).
    """
    backend = _backend(op, executor)
    if shape == ONE and not slots and prune is UNSET and rebuild is None:
        return _replayed(op, backend, f, chunksize, progress, serial)
    calls, recorder = record(shape, slots or prune is not UNSET)
    recorded = serial(recorder, False)
    results = _run(op, backend, f, shape, calls, chunksize, progress, serial)
    if rebuild is not None:
        return rebuild(recorded, results)
    if not slots and prune is UNSET:
        return _map(results.__getitem__, recorded)
    return fill(recorded, results, prune)


#: The value after the last result in ``_replayed``'s iterator: the fill's call that
#: gets it is one more than the recording made.
_END = object()


def _replayed(
    op: str,
    backend: _Futures | _Dask,
    f: Callable[..., Any],
    chunksize: int | None,
    progress: Any,
    serial: Callable[[Callable[..., Any], bool], Any],
) -> Any:
    """A one-tree map whose calls are exactly the leaves (fmap's default), made with no
    Python frame per leaf (benchmarks/parallel.py, light): the operation's own map
    records the calls with ``list.append`` (the identity cache decides them, as for
    ``f``); the executor runs them; the same map again, with ``next`` over the
    results in place of ``f``, puts each where its call was, keeping sharing. The walk
    is deterministic, so the k-th call of both maps is at the same place; a tree
    changed in between (by ``f``, which must not) gives a different count: an error."""
    calls: list[Any] = []
    serial(calls.append, False)
    results = _run(op, backend, f, ONE, calls, chunksize, progress, serial)
    results.append(_END)
    rest = iter(results)
    out = serial(partial(next, rest), False)
    if next(rest, None) is not _END:
        raise RuntimeError(
            f"{op}: the tree changed while the executor ran f (it has a different "
            f"number of leaves now), so the results cannot be put back in place. f must "
            f"not add or remove children of the tree it maps: return new values instead."
        )
    return out


def fill(recorded: Any, results: list[Any], prune: Any = UNSET) -> Any:
    """``recorded`` with each ``_Slot`` replaced by its result (and ``PRUNED`` by
    ``prune``): a map whose identity cache keeps the recorded tree's sharing."""

    def put(value: Any) -> Any:
        if type(value) is _Slot:
            return results[value]
        if value is PRUNED:
            return prune
        return value

    return _map(put, recorded)


def _map(f: Callable[[Any], Any], tree: Any) -> Any:
    """``fmap(f, tree)``: the engine's map with the default exclude and the identity
    cache, as ``fmap`` runs it."""
    memo = Memo()
    try:
        return fast_map(f, tree, memo, UNSET)
    finally:
        memo.clear()


def _run(
    op: str,
    backend: _Futures | _Dask,
    f: Callable[..., Any],
    shape: int,
    calls: list[Any],
    chunksize: int | None,
    progress: Any,
    serial: Callable[[Callable[..., Any], bool], Any],
) -> list[Any]:
    """The results of ``calls``, made by the executor in chunks, in order."""
    n = len(calls)
    bar = _Bar(op, progress, n)
    try:
        if not n:
            return []
        size = (
            operator.index(chunksize)
            if chunksize
            else math.ceil(n / (CHUNKS_PER_WORKER * backend.workers()))
        )
        results: list[Any] = [None] * n
        starts: dict[Any, int] = {}
        try:
            firsts = range(0, n, size)
            try:  # dask pickles the leaves as it sends them, and f as it submits
                sent = backend.send([calls[start : start + size] for start in firsts])
                for start, chunk in zip(firsts, sent):
                    starts[backend.submit(run_chunk, f, shape, start, chunk)] = start
            except Exception as err:
                if not backend.remote:  # threads pickle nothing: the executor's error
                    raise
                bad = _unpicklable(op, backend, f, calls, 0, n, serial)
                if bad is None:
                    raise
                raise bad from err
            bar.update(0)
            done = 0
            finished: set[int] = set()
            for fut, outcome in backend.as_completed(list(starts)):
                start = starts[fut]
                try:
                    out = outcome()
                except BaseException as err:
                    located = _located(op, backend, err, f, calls, start, size, finished, serial)
                    if located is err:
                        raise
                    raise located from err
                results[start : start + len(out)] = out
                finished.add(start)
                done += len(out)
                bar.update(done)
        except BaseException:
            backend.cancel(fut for fut, start in starts.items() if not fut.done())
            raise
        return results
    finally:
        bar.close()


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


def _located(
    op: str,
    backend: _Futures | _Dask,
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
    k = err.__dict__.pop(_CALL, None) if isinstance(err, Exception) else None
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
        if isinstance(backend, _Futures):
            # A broken pool fails every pending future: the first unfinished chunk
            # is the first that may have run when the worker died.
            start = min(s for s in range(0, len(calls), size) if s not in finished)
        last = min(start + size, len(calls)) - 1
        first_path = call_path(serial, start)
        span = where(first_path) if first_path is not None else "?"
        if last > start:
            last_path = call_path(serial, last)
            span += f" to {where(last_path) if last_path is not None else '?'}"
        which = "the first unfinished chunk" if isinstance(backend, _Futures) else "a chunk"
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
        unpicklable = _unpicklable(op, backend, f, calls, start, size, serial)
        if unpicklable is not None:
            return unpicklable
        if _is_pickling_error(err):  # f and the leaves pickle: the results did not
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


def _is_pickling_error(err: BaseException) -> bool:
    """``err`` is what pickle raises for an object it cannot pickle."""
    return isinstance(err, pickle.PicklingError) or (
        isinstance(err, (TypeError, AttributeError)) and "pickle" in str(err)
    )


def _unpicklable(
    op: str,
    backend: _Futures | _Dask,
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


# --- dask collections as leaves ----------------------------------------------------------


def _dask(op: str) -> Any:
    try:
        import dask
    except ImportError:
        raise ImportError(
            f"{op} needs dask, which is not installed: pip install dask (or "
            f"'dask[distributed]' for a cluster)."
        ) from None
    return dask


def _over_dask_leaves(op: str, tree: Any, run: Callable[..., tuple[Any, ...]]) -> Any:
    """``tree`` with its dask collections replaced by ``run(*collections)``'s results:
    one call for them all, each shared collection passed once."""

    is_collection = _dask(op).is_dask_collection
    calls, recorder = record(ONE, True)
    recorded = _map(lambda v: recorder(v) if is_collection(v) else v, tree)
    return fill(recorded, list(run(*calls)) if calls else [])


def compute(tree: Any, /, **kwargs: Any) -> Any:
    """Compute every dask collection in ``tree`` in one ``dask.compute`` call.

    Dask arrays, delayed objects and other dask collections among the leaves are
    computed together, so graph parts they share run once; the same tree comes back
    with concrete leaves (a shared collection gives one shared result). Other leaves
    are kept. dask is imported only when this runs.

    Examples:
        >>> import containers as ct
        >>> import dask
        >>> x = dask.delayed(sum)([1, 2, 3])
        >>> ct.compute({"a": x, "b": (x, 10)}, scheduler="sync")
        {'a': 6, 'b': (6, 10)}

    Args:
        tree: A tree whose leaves may be dask collections.
        **kwargs: Passed to ``dask.compute`` (``scheduler=``, ...).

    Returns:
        The tree with every dask collection replaced by its value.

    Raises:
        ImportError: dask is not installed.
    """
    dask = _dask("compute")
    return _over_dask_leaves("compute", tree, lambda *c: dask.compute(*c, **kwargs))


def persist(tree: Any, /, **kwargs: Any) -> Any:
    """Persist every dask collection in ``tree`` in one ``dask.persist`` call.

    As ``compute``, but each collection is replaced by a persisted one (computed in
    memory, or on a cluster with a distributed client, and still a dask collection),
    so that later computations start from its results.

    Examples:
        >>> import containers as ct
        >>> import dask
        >>> x = dask.delayed(sum)([1, 2, 3])
        >>> out = ct.persist({"a": x, "b": 10}, scheduler="sync")
        >>> out["a"].compute(), out["b"]
        (6, 10)

    Args:
        tree: A tree whose leaves may be dask collections.
        **kwargs: Passed to ``dask.persist`` (``scheduler=``, ...).

    Returns:
        The tree with every dask collection replaced by its persisted twin.

    Raises:
        ImportError: dask is not installed.
    """
    dask = _dask("persist")
    return _over_dask_leaves("persist", tree, lambda *c: dask.persist(*c, **kwargs))


# --- the entry points' executor branches -------------------------------------------------


def fmap_with_path_on_executor(
    f: Callable[..., Any],
    tree: Any,
    rest: tuple[Any, ...],
    exclude: Any,
    cache: bool,
    prune: Any,
    executor: Any,
    chunksize: Any,
    progress: Any,
) -> Any:
    """``fmap_with_path(f, tree, *rest, ..., executor=executor)``."""

    check_options("fmap_with_path", executor, chunksize, progress)

    def serial(g: Callable[..., Any], plain: bool) -> Any:
        return map_tree(
            g,
            tree,
            rest,
            exclude=exclude,
            cache=Memo() if cache else None,
            prune=PRUNED if prune is not UNSET and not plain else UNSET,
            with_path=True,
            op="fmap_with_path",
        )

    return executor_map(
        "fmap_with_path",
        f,
        executor,
        chunksize,
        progress,
        STAR,
        serial,
        slots=exclude is not None,
        prune=prune,
    )
