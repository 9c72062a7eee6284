"""The byte layout: safetensors framing, the dtype table, strict JSON, CRC32, atomic writes.

This stage turns bytes into a validated ``Layout`` (tensor entries and metadata strings)
and back, and owns every file operation. It knows nothing of trees: records are the
business of ``_encode``/``_decode``. Every check on untrusted bytes runs before
anything sized by those bytes is allocated.

The read side lives in modules of its own, re-exported here: ``_strictjson`` (strict,
bounded JSON), ``_layout`` (the header and its ``Layout``; its fast readers in
``_layout_fast``, its names in ``_layout_types``), ``_arrays`` (reading, views, CRC32)
and ``_files`` (opening regular files). This module keeps the write side.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from containers._serialize._arrays import (
    _CHUNK,
    _OWN,
    Wants,
    _crc,
    _groups,
    _groups_plain,
    _load_crc32,
    _mismatch,
    _views,
    crc32,
    map_file,
    read_arrays,
    view_arrays,
)
from containers._serialize._files import _file_kind, open_for_reading, open_regular
from containers._serialize._layout import layout_of_bytes, parse_header, read_layout
from containers._serialize._layout_fast import _column_layout, _usual_layout
from containers._serialize._layout_types import (
    _ALIGN,
    CODES,
    DTYPES,
    FORMAT_KEY,
    FORMAT_VERSION,
    TREE_KEY,
    Layout,
    Tensor,
)
from containers._serialize._strictjson import (
    PARSE_FACTOR,
    bound_json,
    json_array_chunks,
    strict_json,
)

__all__ = [
    "CODES",
    "DTYPES",
    "FORMAT_KEY",
    "FORMAT_VERSION",
    "PARSE_FACTOR",
    "TREE_KEY",
    "_CHUNK",
    "_OWN",
    "Layout",
    "Tensor",
    "Wants",
    "_column_layout",
    "_crc",
    "_groups",
    "_groups_plain",
    "_load_crc32",
    "_mismatch",
    "_usual_layout",
    "_views",
    "atomic_write",
    "bound_json",
    "build_header",
    "crc32",
    "json_array_chunks",
    "layout_of_bytes",
    "map_file",
    "open_for_reading",
    "open_regular",
    "parse_header",
    "read_arrays",
    "read_layout",
    "strict_json",
    "view_arrays",
    "write_all",
]


def build_header(entries: str, metadata: dict[str, str], tree: str | None = None) -> bytes:
    """The 8-byte length and the JSON header, padded with spaces to a 64-byte boundary.

    ``entries`` is the tensor entries, rendered as JSON members (``"name":{...},...``);
    ``tree``, if given, the tree as a JSON str (``json.dumps`` of its text), the last
    member of ``__metadata__`` (``TREE_KEY``).
    """
    meta = json.dumps(metadata, separators=(",", ":"))
    if tree is not None:
        key = json.dumps(TREE_KEY)
        meta = f"{meta[:-1]},{key}:{tree}}}" if metadata else f"{{{key}:{tree}}}"
    # Each part encoded once and joined once (13.5 MB for the "many" tree of
    # benchmarks/serialization.py): no str of the whole body is made.
    parts = [b'{"__metadata__":', meta.encode(), b"," if entries else b"", entries.encode(), b"}"]
    size = sum(map(len, parts))
    pad = -(8 + size) % _ALIGN
    return b"".join([(size + pad).to_bytes(8, "little"), *parts, b" " * pad])


# --- writing ---------------------------------------------------------------------------


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # not thread-safe, hence the /proc read first
    os.umask(mask)
    return mask


def write_all(fd: int, chunks: Sequence[Any]) -> None:
    """Write every chunk (C-contiguous arrays or bytes) to ``fd``.

    Small chunks are joined into one write (``bytes.join`` reads any buffer, bfloat16
    included); big ones are written from their own memory.
    """
    batch: list[Any] = []
    size = 0
    for c in chunks:
        n = c.nbytes if isinstance(c, np.ndarray) else len(c)
        if n >= _OWN:
            if batch:
                _write(fd, b"".join(batch))
                batch, size = [], 0
            _write(fd, c.reshape(-1).view(np.uint8) if isinstance(c, np.ndarray) else c)
            continue
        batch.append(c)
        size += n
        if size >= _OWN:
            _write(fd, b"".join(batch))
            batch, size = [], 0
    if batch:
        _write(fd, b"".join(batch))


def _write(fd: int, data: Any) -> None:
    view = memoryview(data)
    n = len(view)
    while view:
        view = view[os.write(fd, view) :]
    if n >= _OWN:
        start_writeback(fd)


_sync_file_range: Any = None  # libc's, once looked up; False where there is none


def start_writeback(fd: int) -> None:
    """Start writing ``fd``'s dirty pages to the disk without waiting for them
    (Linux's ``sync_file_range(SYNC_FILE_RANGE_WRITE)``; elsewhere nothing).

    Called after each big piece of a save: the disk then works while the next pieces
    are copied, and the final ``fsync`` waits for the rest instead of a gigabyte of
    dirty pages at once, whose writeback stalls made a 1 GiB save take 0.7-2.9 s from
    run to run (docs/performance.md, big checkpoints). Durability is still the
    ``fsync``'s: this only starts early what it would do.
    """
    global _sync_file_range  # noqa: PLW0603 - looked up once
    if _sync_file_range is None:
        _sync_file_range = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                f = libc.sync_file_range
                f.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
                f.restype = ctypes.c_int
                _sync_file_range = f
    if _sync_file_range is not False:
        _sync_file_range(fd, 0, 0, 2)  # SYNC_FILE_RANGE_WRITE; 0, 0: the whole file


def _check_writable(path: str, given: str) -> None:
    """Refuse what ``open(path, "wb")`` would refuse of an existing file: one that is
    write-protected for this user (the rename would ignore its mode), and anything that
    is not a regular file (a FIFO or a device, which the rename would replace)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise OSError(
            errno.EINVAL,
            f"not a regular file ({_file_kind(st.st_mode)}): save writes files",
            given,
        )
    try:  # opened for writing as open() would, without truncating it
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)))
    except OSError as err:
        raise OSError(err.errno, err.strerror, given) from None


def atomic_write(path: str, write: Callable[[int], None], *, fsync: bool = True) -> None:
    """Write a file through ``write(fd)`` so that ``path`` holds the old or the new file.

    A temp file in the same directory is written, fsynced, given the mode a plain
    ``open`` would give (or the old file's), renamed over ``path`` with ``os.replace``
    and the directory fsynced. On any error the temp file is removed. The old file is
    never written in place, so arrays still mapped from it keep their values. A
    symbolic link at ``path`` is followed, as ``open`` follows it: its target is
    replaced and the link stays.
    """
    given = path
    # What open(path, "wb") refuses: realpath would drop the separator and make a file.
    if not path or path.endswith((os.sep, os.altsep or os.sep)):
        code = errno.EISDIR if path else errno.ENOENT
        raise OSError(code, os.strerror(code), given)
    path = os.path.realpath(path)
    if os.path.isdir(path):
        raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), given)
    _check_writable(path, given)
    directory = os.path.dirname(path)
    name = os.path.basename(path)
    # The temp name adds 14 bytes: a name that open() accepts (up to 255 bytes) must
    # not make it too long, so a long one is cut (25 characters are at most 100 bytes).
    if len(os.fsencode(name)) > 100:
        name = name[:25]
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    except OSError as err:  # name the file the caller gave, as open() would
        raise OSError(err.errno, err.strerror, given) from None
    try:
        try:
            write(fd)
            try:
                mode = os.stat(path).st_mode & 0o7777
            except FileNotFoundError:
                mode = 0o666 & ~_umask()
            os.fchmod(fd, mode)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync and hasattr(os, "O_DIRECTORY"):
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
