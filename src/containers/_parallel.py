"""Executor maps: fmap, fmap_with_path and treelize with ``f`` run by a
``concurrent.futures`` pool or a dask ``Client``.

A stage below the operations it serves (``_fmap``, ``_treelize``), which hand it their
own serial map: each runs it with ``f`` replaced by a recorder (``record``), so that
the engine's one walk, with its identity cache, ``exclude=`` and ``where=``, decides
what is submitted exactly as it decides what ``f`` is called on; the recorded calls go
to the executor in chunks; a second map over the recorded tree (the engine's) puts the
results in place. fmap's default map of one tree takes one walk instead, flatten's,
when that walk proves that no value the identity cache keeps is met twice
(``_one_walk``). It never walks a tree itself, imports no operation module and
schedules nothing: the executor does. Its parts: the adapters (``_parallel_backends``),
``progress=`` and the options (``_parallel_progress``), the errors with paths
(``_parallel_failures``); ``compute``/``persist`` (``_parallel_dask``) sit above it.
"""

from __future__ import annotations

import enum
import itertools
import math
import operator
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from containers._engine import _fast
from containers._engine._core import UNSET, Memo, map_tree
from containers._engine._fast import fast_map
from containers._engine._flat import C_CONTEXT, flatten_fast, flatten_once
from containers._errors import ContainerDefinitionError, StructureError
from containers._parallel_backends import Dask, Futures, backend_for
from containers._parallel_failures import CALL, located, unpicklable
from containers._parallel_progress import Bar, check_options
from containers._records import C_LIVE_BUILD_CONTEXT, build
from containers._registry import IMMUTABLE_LEAVES, LEAF_TYPES, kind_of

__all__ = [
    "ONE",
    "PRUNED",
    "STAR",
    "WITH_KEYWORDS",
    "cached_map",
    "check_options",
    "executor_map",
    "fill",
    "fmap_with_path_on_executor",
    "record",
]

#: How a recorded call is made again: ``f(x)``, ``f(*args)`` or ``f(*args, **kwargs)``.
ONE, STAR, WITH_KEYWORDS = 0, 1, 2

#: Chunks per worker when ``chunksize`` is not given: enough to keep every worker busy
#: while chunks of unequal cost finish, few enough that a chunk's overhead (a task, a
#: pickled call) is paid over many leaves (benchmarks/parallel.py).
CHUNKS_PER_WORKER = 4


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
        setattr(err, CALL, start + len(out))
        raise
    return out


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
    tree: Any = UNSET,
    cache: bool = True,
) -> Any:
    """``op`` with ``f`` run by ``executor``.

    ``serial(g, plain)`` runs ``op``'s own map with ``g`` in place of ``f`` (on the
    plain engine with ``plain``, where errors are located); it is run once with a
    recorder, whose calls go to the executor in chunks, and again with a probe only if
    a call fails, to find its path. ``rebuild(recorded_tree, results)`` puts the
    results in place (by default an ``fmap`` over the recorded tree, which keeps its
    sharing); ``prune`` is the caller's, stood for by ``PRUNED`` while recording.
    ``slots=False``: every leaf of the recorded tree is a call's index (see ``record``).
    ``tree`` (fmap's one tree, with ``cache=``) allows the one walk of ``_one_walk``.
    """
    backend = backend_for(op, executor)
    if shape == ONE and not slots and prune is UNSET and rebuild is None:
        split = None if tree is UNSET else _one_walk(tree, cache)
        if split is not None:
            leaves, records = split
            results = _run(op, backend, f, ONE, leaves, chunksize, progress, serial)
            return _build(records, results)
        return _replayed(op, backend, f, chunksize, progress, serial)
    calls, recorder = record(shape, slots or prune is not UNSET)
    recorded = serial(recorder, False)
    results = _run(op, backend, f, shape, calls, chunksize, progress, serial)
    if rebuild is not None:
        return rebuild(recorded, results)
    if not slots and prune is UNSET:
        return cached_map(results.__getitem__, recorded)
    return fill(recorded, results, prune)


def _one_walk(tree: Any, cache: bool) -> tuple[list[Any], list[Any]] | None:
    """The leaves and records of ``tree`` when rebuilding its records with ``f`` of
    each leaf is ``fmap(f, tree, cache=cache)``, else None (``_replayed`` runs).

    Flatten's one walk replaces fmap's two (benchmarks/parallel.py, light) where the
    identity cache would find nothing twice: without a cache, or where the walk itself
    (``_speedups.flatten`` with ``IMMUTABLE_LEAVES``, twin ``_flat.flatten_once``) met
    no value the cache keeps (a mutable node or leaf) twice. Sharing holds by
    construction: a tree with sharing takes the cached map. An error (a cycle, an
    undeclared subclass) is left to that map, which raises it with fmap's path.
    """
    if type(tree) in LEAF_TYPES:
        return [tree], []
    try:
        kind = kind_of(tree)
        if kind is None:
            return [tree], []
        records: list[Any] = []
        speedups = _fast._speedups  # read per call: tests switch it
        if not cache:
            if speedups is not None:
                leaves = speedups.flatten(tree, kind, LEAF_TYPES, records, C_CONTEXT)
            else:
                leaves = flatten_fast(tree, kind, LEAF_TYPES, records)
            once = True
        elif speedups is not None:
            leaves, once = speedups.flatten(
                tree, kind, LEAF_TYPES, records, C_CONTEXT, IMMUTABLE_LEAVES
            )
        else:
            leaves, once = flatten_once(tree, kind, LEAF_TYPES, records, IMMUTABLE_LEAVES)
    except (StructureError, ContainerDefinitionError):
        return None
    if not once:
        return None
    return leaves, records


def _build(records: list[Any], leaves: list[Any]) -> Any:
    """The tree of ``records`` with ``leaves``, each node made by its kind's live
    ``unflatten``, which keeps kept values as the same objects, as fmap does (a
    Structure's rebuild copies the mutable ones)."""
    speedups = _fast._speedups
    if speedups is not None:
        return speedups.build(tuple(records), leaves, C_LIVE_BUILD_CONTEXT)
    return build(records, leaves, fresh=False)


#: The value after the last result in ``_replayed``'s iterator: the fill's call that
#: gets it is one more than the recording made.
_END = object()


def _replayed(
    op: str,
    backend: Futures | Dask,
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

    return cached_map(put, recorded)


def cached_map(f: Callable[[Any], Any], tree: Any) -> Any:
    """``fmap(f, tree)``: the engine's map with the default exclude and the identity
    cache, as ``fmap`` runs it."""
    memo = Memo()
    try:
        return fast_map(f, tree, memo, UNSET)
    finally:
        memo.clear()


def _run(
    op: str,
    backend: Futures | Dask,
    f: Callable[..., Any],
    shape: int,
    calls: list[Any],
    chunksize: int | None,
    progress: Any,
    serial: Callable[[Callable[..., Any], bool], Any],
) -> list[Any]:
    """The results of ``calls``, made by the executor in chunks, in order."""
    n = len(calls)
    bar = Bar(op, progress, n)
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
                bad = unpicklable(op, backend, f, calls, 0, n, serial)
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
                    found = located(op, backend, err, f, calls, start, size, finished, serial)
                    if found is err:
                        raise
                    raise found from err
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
