"""The writing half of the public functions: ``serialize`` and ``save``.

It wires ``_encode`` (tree -> plan), ``_format`` (header, atomic writes), ``_pario``
(parallel writes and CRC32s), ``_shards`` (sharded directories) and ``_background``
(``background=True``) together, and adds no encoding of its own. ``_api`` re-exports
both names.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import Future
from typing import Any

from containers._errors import short_repr
from containers._serialize._background import submit, wait_for
from containers._serialize._common import PathLike, _gc_paused
from containers._serialize._encode import Plan, encode
from containers._serialize._format import (
    FORMAT_KEY,
    FORMAT_VERSION,
    TREE_KEY,
    atomic_write,
    write_all,
)
from containers._serialize._lazy import Progress, check_io
from containers._serialize._pario import write_parallel
from containers._serialize._shards import not_a_file, write_sharded

__all__ = ["save", "serialize"]


def serialize(
    tree: Any, /, *, names: str = "keystr", metadata: dict[str, str] | None = None
) -> bytes:
    """Encode a tree as the bytes of a safetensors file (what ``save`` writes).

    Arrays become tensors named by their ``keystr`` path; the tree (registered type
    names, versions, keys, kept values, scalars, CRC32s) goes into ``__metadata__``.

    Examples:
        >>> import numpy as np
        >>> import containers as ct
        >>> data = ct.serialize({"w": np.arange(3.0), "step": 7})
        >>> (int.from_bytes(data[:8], "little") + 8) % 64, data[8:9]
        (0, b'{')
        >>> ct.deserialize(data)
        {'w': array([0., 1., 2.]), 'step': 7}

    Args:
        tree: Any tree whose leaves are arrays (numpy, jax, torch) or scalars, and
            whose nodes are builtin collections or registered classes.
        names: How tensors are named: ``"keystr"`` (``.layers[0].w``) or ``"dotted"``
            (``layers.0.w``, as torch state_dicts and hub files name them).
        metadata: Your own ``str -> str`` entries for ``__metadata__`` (as safetensors'
            ``metadata=``); ``inspect`` returns them.

    Returns:
        The file's bytes.

    Raises:
        SerializationError: something in the tree cannot be stored (the message names
            the path and how to fix it).
    """
    with _gc_paused():
        plan = encode(tree, op="serialize", names=names, metadata=metadata)
        plan.fill_crcs()
        entries, order = plan.layout()
        arrays: list[Any] = plan.arrays  # bytes.join reads any buffer (bfloat16 too)
        return b"".join([plan.header(entries), *[arrays[i] for i in order]])


def save(
    path: PathLike,
    tree: Any,
    /,
    *,
    names: str = "keystr",
    metadata: dict[str, str] | None = None,
    max_shard_size: int | None = None,
    background: bool = False,
    workers: int | None = None,
    progress: Progress | None = None,
) -> Future[None] | None:
    """Write a tree to a safetensors file, atomically.

    The whole tree is validated first: a tree that cannot be stored raises and leaves
    no file. The bytes go to a temp file in the same directory, which is fsynced and
    renamed over ``path``; a crash leaves the old file or the new one, and arrays still
    mapped from the old file (``load(mmap=True)``) keep their values. A symbolic link
    at ``path`` is followed: the file it points to is replaced, and the link stays.

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> import containers as ct
        >>> path = os.path.join(tempfile.mkdtemp(), "state.safetensors")
        >>> ct.save(path, {"w": np.ones(2, np.float32), "step": 3})
        >>> ct.load(path)
        {'w': array([1., 1.], dtype=float32), 'step': 3}

    With ``max_shard_size=`` (bytes) ``path`` is a directory in the hub's sharded
    layout (docs/checkpoints.md); with ``background=True`` the arrays are copied, the
    call returns a ``concurrent.futures.Future`` and the file is written by a
    background thread (errors come from ``.result()``; the interpreter waits for it at
    exit).

    Args:
        path: Where to write (``str`` or ``os.PathLike``).
        tree: The tree, as for ``serialize``.
        names: ``"keystr"`` (default) or ``"dotted"``, as for ``serialize``.
        metadata: ``str -> str`` entries kept in the header, as for ``serialize``.
        max_shard_size: Write a sharded checkpoint directory, shards at most this many
            bytes (an array larger than it gets a shard alone).
        background: Snapshot the arrays and write in a background thread.
        workers: Threads writing at once (default ``min(2, cpu_count)``; 1: the
            calling thread only).
        progress: ``progress(bytes_done, bytes_total)``, called from the calling
            thread as data is written, and with ``(total, total)`` once it is in place.

    Returns:
        None, or with ``background=True`` a ``Future`` whose ``result()`` is None
        once the file is complete.

    Raises:
        SerializationError: something in the tree cannot be stored (path named).
        OSError: the file cannot be written.
    """
    path = os.fspath(path)
    check_io(workers, progress, "save")
    if max_shard_size is None and os.path.isdir(path):  # before the tree is encoded
        raise not_a_file(path)
    if max_shard_size is not None and (type(max_shard_size) is not int or max_shard_size < 1):
        raise TypeError(
            f"save: max_shard_size must be a positive int (bytes), got "
            f"{short_repr(max_shard_size)}. E.g. max_shard_size=5 * 2**30 for 5 GiB shards."
        )
    with _gc_paused():
        plan = encode(tree, names=names, metadata=metadata)
    if background:
        # The snapshot: the writer thread reads only these copies, so the caller may
        # change its arrays (in place, an optimizer step) as soon as save returns.
        plan.arrays = [a.copy() for a in plan.arrays]
        return submit(lambda: _write_plan(path, plan, max_shard_size, workers, progress), path)
    wait_for(path)  # the caller's order: an earlier background save to path lands first
    _write_plan(path, plan, max_shard_size, workers, progress)
    return None


def _write_plan(
    path: str,
    plan: Plan,
    max_shard_size: int | None,
    workers: int | None,
    progress: Progress | None,
) -> None:
    """Write an encoded tree: one file, or a sharded directory."""
    total = sum(a.nbytes for a in plan.arrays)
    if max_shard_size is not None:

        def entries_of(names: list[str], arrays: list[Any]) -> tuple[str, list[int]]:
            return Plan(names=names, arrays=arrays).layout()

        def index_metadata() -> dict[str, str]:
            tree = json.dumps(plan.records, separators=(",", ":"))
            return {**plan.metadata, FORMAT_KEY: FORMAT_VERSION, TREE_KEY: tree}

        write_sharded(
            path,
            plan.names,
            plan.arrays,
            entries_of,
            index_metadata,
            max_shard_size=max_shard_size,
            workers=workers,
            progress=progress,
            checksum=plan.fill_crcs,
        )
        return
    with _gc_paused():
        entries, order = plan.layout()
        overlap = total >= _OVERLAP_BYTES
        if not overlap:
            # The CRC32s cost little next to the header, so it is rendered once,
            # complete (benchmarks/serialization.py, "many": 1.6 MB of arrays, a
            # 13.5 MB header).
            plan.fill_crcs()
        first = plan.header(entries)
    chunks = [first, *[plan.arrays[i] for i in order]]

    if progress is not None:
        progress(0, total)

    def written(done: int, total: int) -> None:
        if progress is not None and 0 < done < total:  # the end: once the file is in place
            progress(done, total)

    def write(fd: int) -> None:
        if not overlap:
            write_all(fd, chunks)
            return
        # The arrays are written with pwrite, a piece per task, and their CRC32s
        # computed, ``workers`` tasks at a time (the copies, pwrite, the CRC32 and fsync
        # release the GIL); the CRC32 slots are fixed-width, so the header is written
        # first with the slots empty and again, in place, once they are known, and
        # atomic_write's fsync then has one page to flush (benchmarks/serialization.py,
        # "big": save vs raw write+fsync).
        write_all(fd, [first])
        write_parallel(
            fd,
            len(first),
            [plan.arrays[i] for i in order],
            checksum=lambda ks: plan.fill_crcs([order[k] for k in ks]),
            workers=workers,
            progress=written,
        )
        os.fsync(fd)
        header = memoryview(plan.header(entries))
        assert len(header) == len(first)
        done = 0
        while done < len(header):
            done += os.pwrite(fd, header[done:], done)

    atomic_write(path, write)
    if progress is not None:
        progress(total, total)


#: Below this many bytes of arrays, save computes the CRC32s before writing (a few
#: milliseconds at most); from it on, a second thread computes them while the data is
#: written and flushed, and the header is written again once they are known.
_OVERLAP_BYTES = 1 << 24
