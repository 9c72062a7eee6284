"""Parallel reads and writes of one file's arrays, with progress.

This stage cuts a file's data into pieces (a big array alone, small neighbours
together, as ``_format.read_arrays`` groups them) and reads or writes the pieces on a
small thread pool with ``preadv``/``pwrite``: the copies, the system calls and the
CRC32 release the GIL, so two threads keep a disk and a core busy at once. Progress is
reported from the calling thread as pieces complete. It knows nothing of trees: it
reads a validated ``Layout`` and writes arrays at offsets it is given.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from queue import SimpleQueue
from typing import Any

import numpy as np

from containers._errors import FormatError, SerializationError
from containers._serialize import _format
from containers._serialize._arrays import _check_group
from containers._serialize._format import Layout, Tensor, Wants, _mismatch, _views
from containers._serialize._lazy import Progress, default_workers

__all__ = ["read_parallel", "run_tasks", "write_parallel"]

#: The largest piece one task reads or writes: a big array is cut into pieces this big
#: (its CRC32 still runs over it whole, chunk by chunk, in one task), so progress moves
#: and both threads stay busy on a file of a few big arrays.
_PIECE = 1 << 23


#: Below this many bytes the tasks run in the calling thread: starting threads costs
#: more than they save (benchmarks/serialization.py --checkpoints --quick: a 4 MiB load).
_PARALLEL_BYTES = 1 << 23


def run_tasks(
    tasks: Sequence[Callable[[], int]], workers: int | None, progress: Progress | None, total: int
) -> None:
    """Run ``tasks`` (each returns the bytes it moved, ``total`` in all), ``workers`` at
    a time (in this thread below ``_PARALLEL_BYTES``), calling ``progress(done, total)``
    from this thread as they complete. The first error is
    raised once the tasks already running end; the others are not started.

    Plain threads, not a ``ThreadPoolExecutor``: a background save still pending when
    the interpreter exits runs while ``concurrent.futures`` refuses new work, and it
    must still be written (tests/test_serialize_manager.py, sharded and single-file).
    """
    done = 0
    if progress is not None:
        progress(0, total)
    n = default_workers() if workers is None else workers
    if n <= 1 or len(tasks) <= 1 or total < _PARALLEL_BYTES:
        for task in tasks:
            done += task()
            if progress is not None:
                progress(done, total)
        return
    lock = threading.Lock()
    queue: SimpleQueue[tuple[int, BaseException | None]] = SimpleQueue()
    todo = iter(tasks)
    stop = [False]

    def work() -> None:
        while True:
            with lock:
                task = None if stop[0] else next(todo, None)
            if task is None:
                return
            try:
                queue.put((task(), None))
            except BaseException as err:
                with lock:
                    stop[0] = True
                queue.put((0, err))

    threads = [
        threading.Thread(target=work, name=f"containers-io-{i}") for i in range(min(n, len(tasks)))
    ]
    for t in threads:
        t.start()
    try:
        for _ in range(len(tasks)):
            moved, err = queue.get()
            if err is not None:
                raise err
            done += moved
            if progress is not None:
                progress(done, total)
    finally:
        with lock:
            stop[0] = True
        for t in threads:
            t.join()


# --- reading ---------------------------------------------------------------------------


def read_parallel(
    sources: Sequence[tuple[str | None, int, Layout, Wants | None]],
    *,
    workers: int | None,
    progress: Progress | None,
) -> dict[str, np.ndarray[Any, Any]]:
    """Read every tensor of the files ``(path, fd, layout, wants)`` into owned,
    writeable arrays, checking BOOL bytes and (with ``wants``) CRC32s as
    ``read_arrays`` does; a ``SerializationError`` starts with the file's path (unless
    it is None: the caller names the file)."""
    tasks: list[Callable[[], int]] = []
    results: list[list[list[np.ndarray[Any, Any]]]] = []  # per file, each group's arrays
    total = 0
    for path, fd, layout, wants in sources:
        tensors = list(layout.tensors.values())
        results.append([])
        for i, j in _format._groups(tensors):
            out: list[np.ndarray[Any, Any]] = []
            results[-1].append(out)
            group = tensors[i:j]
            total += group[-1].end - group[0].begin
            w = None if wants is None else wants[i:j]
            tasks.append(_reader(path, fd, layout.data_start, group, w, out))
    run_tasks(tasks, workers, progress, total)
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    for (_, _, layout, _), outs in zip(sources, results, strict=True):
        # in file order, whoever read: each file's names and arrays zipped once
        arrays.update(zip(layout.tensors, itertools.chain.from_iterable(outs)))
    return arrays


def _reader(
    path: str | None,
    fd: int,
    data_start: int,
    group: list[Tensor],
    wants: Wants | None,
    out: list[np.ndarray[Any, Any]],
) -> Callable[[], int]:
    def read() -> int:
        try:
            return _read_group(fd, data_start, group, wants, out)
        except SerializationError as err:
            if path is not None and err.args and type(err.args[0]) is str:
                err.args = (f"{path}: {err.args[0]}", *err.args[1:])
            raise

    return read


def _read_group(
    fd: int,
    data_start: int,
    group: list[Tensor],
    wants: Wants | None,
    out: list[np.ndarray[Any, Any]],
) -> int:
    """Read tensors stored back to back into one buffer (a big one's CRC32 computed a
    chunk at a time as it is read, while the chunk is in the CPU cache)."""
    first = group[0]
    n = group[-1].end - first.begin
    buf = np.empty(n, np.uint8)
    view = buf.data
    alone = wants is not None and len(group) == 1
    crc = _format._crc
    value = 0
    got = 0
    offset = data_start + first.begin
    while got < n:
        chunk = view[got : got + _format._CHUNK]
        k = os.preadv(fd, [chunk], offset + got)
        if not k:
            raise FormatError(f"truncated: the file ended while reading tensor {first.name!r}.")
        if alone:
            value = crc(chunk[:k], value)
        got += k
    arrays = _views(buf, group, first.begin)
    out.extend(arrays)
    if wants is not None:
        if alone:
            want = wants[0]
            if want is not None and value != want:
                raise _mismatch(first, want, value)
        else:
            _check_group(buf, first.begin, group, arrays, wants)
    return n


# --- writing ---------------------------------------------------------------------------


def write_parallel(
    fd: int,
    start: int,
    arrays: Sequence[np.ndarray[Any, Any]],
    *,
    checksum: Callable[[list[int]], None] | None,
    workers: int | None,
    progress: Progress | None,
) -> None:
    """Write ``arrays`` (C-contiguous, in file order) back to back from offset ``start``
    of ``fd`` with ``pwrite``, ``workers`` pieces at a time; ``checksum(indices)``
    computes the CRC32s of those arrays (by position in ``arrays``) on the pool too."""
    tasks: list[Callable[[], int]] = []
    total = 0
    pos = start
    batch: list[int] = []
    batch_pos = pos
    for k, a in enumerate(arrays):
        n = a.nbytes
        if n >= _format._OWN:
            if batch:
                tasks.extend(_batch_tasks(fd, batch_pos, arrays, batch, checksum))
                batch = []
            data = a.reshape(-1).view(np.uint8)
            if checksum is not None:
                tasks.append(_checker(checksum, [k]))
            for lo in range(0, n, _PIECE):
                tasks.append(_writer(fd, pos + lo, data[lo : lo + _PIECE]))
            pos += n
            batch_pos = pos
            continue
        batch.append(k)
        pos += n
        if pos - batch_pos >= _format._OWN:
            tasks.extend(_batch_tasks(fd, batch_pos, arrays, batch, checksum))
            batch = []
            batch_pos = pos
    if batch:
        tasks.extend(_batch_tasks(fd, batch_pos, arrays, batch, checksum))
    total = pos - start
    run_tasks(tasks, workers, progress, total)


def _batch_tasks(
    fd: int,
    pos: int,
    arrays: Sequence[np.ndarray[Any, Any]],
    batch: list[int],
    checksum: Callable[[list[int]], None] | None,
) -> list[Callable[[], int]]:
    """A run of small arrays: written in one ``pwrite`` of their bytes joined, and
    checksummed in the same task."""
    picked: list[Any] = [arrays[k] for k in batch]

    def write() -> int:
        if checksum is not None:
            checksum(batch)
        return _pwrite(fd, pos, b"".join(picked))  # bytes.join reads any buffer

    return [write]


def _checker(checksum: Callable[[list[int]], None], indices: list[int]) -> Callable[[], int]:
    def check() -> int:
        checksum(indices)
        return 0

    return check


def _writer(fd: int, pos: int, data: Any) -> Callable[[], int]:
    return lambda: _pwrite(fd, pos, data)


def _pwrite(fd: int, pos: int, data: Any) -> int:
    view = memoryview(data)
    n = len(view)
    done = 0
    while done < n:
        done += os.pwrite(fd, view[done:], pos + done)
    if n >= _format._OWN:
        _format.start_writeback(fd)  # the disk starts on it while the next piece is copied
    return n
