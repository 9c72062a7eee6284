"""Checkpoints as opened sources of tensors: one file, or the hub's sharded layout.

This stage opens a single safetensors file or a directory of shards with its
``model.safetensors.index.json`` (validating the index as untrusted input: no name
leads outside the directory, every tensor is in exactly one shard, sizes add up) and
writes a sharded directory atomically. It knows nothing of trees: the tree's records
travel in the index's metadata as an opaque string for ``_decode``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from containers._errors import FormatError, LimitError, SerializationError, short_repr
from containers._serialize._format import (
    Tensor,
    _umask,
    build_header,
    open_regular,
    read_layout,
    strict_json,
    write_all,
)
from containers._serialize._lazy import Progress, Source
from containers._serialize._limits import Limits
from containers._serialize._pario import run_tasks

__all__ = [
    "INDEX_NAME",
    "Opened",
    "ShardedArrays",
    "is_sharded",
    "not_a_checkpoint",
    "not_a_file",
    "open_file",
    "open_sharded",
    "shard_name",
    "write_sharded",
]

#: The index file of a sharded checkpoint, as the hub's tools name it.
INDEX_NAME = "model.safetensors.index.json"
#: Metadata that every shard carries, as the hub's PyTorch writers give it.
_SHARD_METADATA = {"format": "pt"}


def shard_name(i: int, n: int) -> str:
    """The hub's name of shard ``i`` (from 1) of ``n``: ``model-00001-of-00004.safetensors``."""
    return f"model-{i:05d}-of-{n:05d}.safetensors"


@dataclass(frozen=True)
class Opened:
    """A checkpoint opened for reading: its string metadata (the file's ``__metadata__``,
    or the string values of the index's ``metadata``), and every tensor with the
    source it is read from, in the index's (or the file's) order."""

    path: str
    metadata: dict[str, str]
    tensors: dict[str, tuple[Source, Tensor]]
    shards: list[str]


def is_sharded(path: str) -> bool:
    """Whether ``path`` names a sharded checkpoint: an index file, or a directory
    holding one (another directory is left to ``open``, which refuses it)."""
    return path.endswith(".index.json") or (
        os.path.isdir(path) and os.path.lexists(os.path.join(path, INDEX_NAME))
    )


def not_a_checkpoint(path: str) -> IsADirectoryError:
    """What ``load`` and ``inspect`` raise for a directory that is no checkpoint: what
    ``open`` says, with a note (shown under the traceback) saying what to give."""
    err = IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    err.add_note(
        f"{path} is not a sharded checkpoint (it has no {INDEX_NAME}): give a "
        f".safetensors file in it, or a directory that ct.save wrote with max_shard_size=."
    )
    return err


def not_a_file(path: str) -> IsADirectoryError:
    """What ``save`` without ``max_shard_size=`` raises for a directory at ``path``."""
    if is_sharded(path):
        return IsADirectoryError(
            errno.EISDIR,
            "Is a directory: a sharded checkpoint. Pass max_shard_size= to replace it "
            "with a sharded checkpoint, or save to another name",
            path,
        )
    return IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)  # as open()


def open_file(path: str, limits: Limits, *, follow: bool = True) -> Source:
    """Open one safetensors file and validate its header (nothing else is read)."""
    fd = open_regular(path, follow=follow)
    try:
        with os.fdopen(os.dup(fd), "rb", buffering=0) as f:
            layout = read_layout(f, limits)
    except BaseException:
        os.close(fd)
        raise
    return Source(path, fd, layout)


def open_single(path: str, limits: Limits) -> Opened:
    """A single file as an ``Opened`` checkpoint."""
    source = open_file(path, limits)
    tensors = {name: (source, t) for name, t in source.layout.tensors.items()}
    return Opened(path, source.layout.metadata, tensors, [path])


def _bad(index: str, what: str) -> FormatError:
    return FormatError(f"{index}: {what}. The sharded checkpoint is corrupt or not one.")


def _read_index(index: str, limits: Limits) -> Any:
    try:
        fd = open_regular(index)
    except FormatError as err:
        raise FormatError(f"{index}: {err}") from None
    try:
        size = os.fstat(fd).st_size
        if size > limits.max_header_bytes:
            raise LimitError(
                f"{index}: the index has {size} bytes, more than max_header_bytes="
                f"{limits.max_header_bytes}. Pass limits=Limits(max_header_bytes=...) to "
                f"accept it."
            )
        with os.fdopen(os.dup(fd), "rb", buffering=0) as f:
            raw = f.read(size + 1)
    finally:
        os.close(fd)
    try:
        return strict_json(raw, "the index")
    except FormatError as err:
        raise FormatError(f"{index}: {err}") from None


def _inside(directory: str, name: Any, index: str, *, follow_links: bool = False) -> str:
    """The path of shard ``name`` in ``directory``, refusing any name that could lead
    out of it: separators, ``.``/``..``, NUL, and (unless ``follow_links``) symbolic
    links pointing outside. With ``follow_links`` a link may point anywhere, but the
    name is still a plain name and the target is opened only if it is a regular file
    (the hub cache's ``snapshots/<rev>/x.safetensors -> ../../blobs/<hash>``)."""
    if (
        type(name) is not str
        or not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or "\0" in name
        or (os.altsep is not None and os.altsep in name)
    ):
        if type(name) is not str:
            raise _bad(
                index,
                f"the weight_map names a shard by the JSON value {short_repr(name)} (a "
                f"{type(name).__name__}); a shard is named by a string, its file name in "
                f"the checkpoint's directory",
            )
        raise _bad(
            index,
            f"the weight_map names the shard {short_repr(name)}, which is not a file name "
            f"in the checkpoint's directory (shards are plain names, without directories)",
        )
    path = os.path.join(directory, name)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise _bad(index, f"the shard {name!r} that the weight_map names is missing") from None
    if stat.S_ISLNK(st.st_mode):
        real = os.path.realpath(path)
        root = os.path.realpath(directory)
        if not follow_links and os.path.commonpath([real, root]) != root:
            raise _bad(
                index,
                f"the shard {name!r} is a symbolic link to {real!r}, outside the "
                f"checkpoint's directory; nothing outside it is read. If you trust the "
                f"links (a Hugging Face hub cache snapshot links its files to "
                f"../../blobs), pass follow_links=True (containers inspect --follow-links)",
            )
        if not os.path.isfile(real):  # open_file checks it again on the descriptor
            what = "is not a regular file" if os.path.lexists(real) else "is missing"
            raise _bad(index, f"the shard {name!r} is a symbolic link to {real!r}, which {what}")
        path = real
    return path


def open_sharded(path: str, limits: Limits, *, follow_links: bool = False) -> Opened:
    """Open a sharded checkpoint (its directory or its index file) and validate it;
    ``follow_links`` lets shards be symbolic links to regular files anywhere.

    Raises:
        FormatError: the index or a shard is invalid (the message names the file).
        LimitError: the index is larger than ``limits.max_header_bytes``, or lists
            more tensors than ``limits.max_tensors``.
    """
    if os.path.isdir(path):
        directory, index = path, os.path.join(path, INDEX_NAME)
        if not os.path.lexists(index):
            raise FormatError(
                f"{path} is a directory without {INDEX_NAME}: it is not a sharded "
                f"checkpoint. Load a file inside it, or the directory ct.save wrote with "
                f"max_shard_size=."
            )
    else:
        directory, index = os.path.dirname(path) or ".", path
    top = _read_index(index, limits)
    if (
        type(top) is not dict
        or "weight_map" not in top
        or not set(top) <= {"metadata", "weight_map"}
    ):
        keys = sorted(top) if type(top) is dict else type(top).__name__
        raise _bad(
            index, f"the index must be an object with 'weight_map' and 'metadata', got {keys}"
        )
    weight_map = top["weight_map"]
    meta = top.get("metadata", {})
    if type(weight_map) is not dict or type(meta) is not dict:
        raise _bad(index, "'weight_map' and 'metadata' must be objects")
    if len(weight_map) > limits.max_tensors:
        raise LimitError(
            f"{index}: the index lists {len(weight_map)} tensors, more than max_tensors="
            f"{limits.max_tensors}. Pass limits=Limits(max_tensors=...) to accept it."
        )
    total = meta.get("total_size")
    if total is not None and (type(total) is not int or total < 0):
        raise _bad(index, f"metadata.total_size {short_repr(total)} is not a non-negative integer")
    strings = {k: v for k, v in meta.items() if type(v) is str}
    shard_of: dict[str, str] = {}
    names: list[str] = []
    for shard in weight_map.values():
        if type(shard) is not str or shard not in shard_of:
            shard_of[shard] = _inside(directory, shard, index, follow_links=follow_links)
            names.append(shard)
    sources: dict[str, Source] = {}
    seen: dict[tuple[int, int], str] = {}
    tensors: dict[str, tuple[Source, Tensor]] = {}
    try:
        for name in names:
            try:
                source = open_file(shard_of[name], limits, follow=False)
            except SerializationError as err:
                raise type(err)(f"{index}: shard {name!r}: {err}") from None
            except OSError as err:
                if err.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
                raise LimitError(
                    f"{index}: the weight_map names {len(names)} shards, more files than "
                    f"this process may open at once ({len(sources)} are open). Raise the "
                    f"limit on open files (ulimit -n), or merge the shards."
                ) from None
            st = os.fstat(source.fd)
            twin = seen.get((st.st_dev, st.st_ino))
            if twin is not None:
                raise _bad(index, f"the shards {twin!r} and {name!r} are the same file")
            seen[(st.st_dev, st.st_ino)] = name
            sources[name] = source
            for t in source.layout.tensors.values():
                listed = weight_map.get(t.name)
                if listed != name:
                    where = "does not list it" if listed is None else f"maps it to {listed!r}"
                    raise _bad(
                        index,
                        f"the shard {name!r} holds the tensor {t.name!r}, but the weight_map "
                        f"{where} (a tensor is stored in exactly one shard)",
                    )
                tensors[t.name] = (source, t)
        ordered: dict[str, tuple[Source, Tensor]] = {}
        for tensor, shard in weight_map.items():
            if tensor not in tensors:
                raise _bad(
                    index,
                    f"the weight_map maps the tensor {short_repr(tensor)} to {shard!r}, which does "
                    f"not hold it",
                )
            ordered[tensor] = tensors[tensor]
        have = sum(t.end - t.begin for _, t in ordered.values())
        if total is not None and total != have:
            raise _bad(
                index,
                f"metadata.total_size is {total} bytes, but the shards' tensors hold {have}",
            )
    except BaseException:
        for source in sources.values():
            source.close()
        raise
    return Opened(index, strings, ordered, [shard_of[n] for n in names])


class ShardedArrays(Mapping[str, "np.ndarray[Any, Any]"]):
    """The tensors of an opened checkpoint as a read-only mapping that reads each
    tensor when it is looked up (unverified, as ``containers diff`` reads data)."""

    def __init__(self, opened: Opened) -> None:
        self._tensors = opened.tensors

    def __getitem__(self, name: str) -> np.ndarray[Any, Any]:
        source, t = self._tensors[name]
        return source.read(t, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)


# --- writing ---------------------------------------------------------------------------


def _split(sizes: list[int], max_shard_size: int) -> list[list[int]]:
    """Indices of the arrays in each shard: in order, a new shard when the next array
    would pass ``max_shard_size`` (an array larger than it gets a shard alone)."""
    shards: list[list[int]] = [[]]
    size = 0
    for i, n in enumerate(sizes):
        if shards[-1] and size + n > max_shard_size:
            shards.append([])
            size = 0
        shards[-1].append(i)
        size += n
    return shards


def write_sharded(
    directory: str,
    names: list[str],
    arrays: list[np.ndarray[Any, Any]],
    entries_of: Callable[[list[str], list[np.ndarray[Any, Any]]], tuple[str, list[int]]],
    index_metadata: Callable[[], dict[str, str]],
    *,
    max_shard_size: int,
    workers: int | None,
    progress: Progress | None,
    checksum: Callable[[list[int]], None] | None = None,
) -> None:
    """Write ``arrays`` (tensors ``names``) as shards plus an index, atomically.

    ``entries_of(names, arrays)`` renders a shard's header entries and file order (the
    encoder's ``Plan.layout``); ``index_metadata()`` gives the index's string metadata,
    called once every shard is written; ``checksum(indices)`` computes the CRC32s of
    a shard's arrays, on the thread that writes it. The directory is written under a temporary
    name next to ``directory`` and renamed into place once every file is fsynced.
    """
    given = directory
    directory = os.path.realpath(directory)
    parent, base = os.path.split(directory)
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise FileExistsError(
            errno.EEXIST,
            f"{given} exists and is not a directory; a sharded checkpoint is a directory. "
            f"Remove it or choose another name",
            given,
        )
    if (
        os.path.isdir(directory)
        and os.listdir(directory)
        and not os.path.exists(os.path.join(directory, INDEX_NAME))
    ):
        raise FileExistsError(
            errno.EEXIST,
            f"{given} exists and is not a sharded checkpoint (it has no {INDEX_NAME}); "
            f"save replaces only a checkpoint. Remove it or choose another name",
            given,
        )
    if not os.path.isdir(parent):  # name the path given, as open() would
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), given)
    groups = _split([a.nbytes for a in arrays], max_shard_size)
    n = len(groups)
    files = [shard_name(i + 1, n) for i in range(n)]
    total = sum(a.nbytes for a in arrays)
    tmp = tempfile.mkdtemp(dir=parent, prefix=f".{base[:25]}.", suffix=".tmp")

    def write_shard(k: int) -> int:
        group = groups[k]
        sub_names = [names[i] for i in group]
        sub = [arrays[i] for i in group]
        if checksum is not None:
            checksum(group)  # the CRC32 releases the GIL: shards checksum in parallel
        entries, order = entries_of(sub_names, sub)
        chunks = [build_header(entries, _SHARD_METADATA), *[sub[i] for i in order]]
        fd = os.open(os.path.join(tmp, files[k]), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            write_all(fd, chunks)
            os.fsync(fd)
        finally:
            os.close(fd)
        return sum(a.nbytes for a in sub)

    def written(done: int, total: int) -> None:
        if progress is not None and done < total:  # the end: once the directory is in place
            progress(done, total)

    try:
        weight_map: dict[str, str] = {}
        for k, group in enumerate(groups):
            for i in group:
                weight_map[names[i]] = files[k]
        # plain threads: a background save pending at interpreter exit still runs
        run_tasks(
            [functools.partial(write_shard, k) for k in range(n)],
            workers,
            written,
            total,
        )
        meta: dict[str, Any] = {"total_size": total, **index_metadata()}
        text = json.dumps({"metadata": meta, "weight_map": weight_map}, indent=2, sort_keys=True)
        fd = os.open(os.path.join(tmp, INDEX_NAME), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            os.write(fd, (text + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o777 & ~_umask())
        _fsync_dir(tmp)
        _install(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(parent)
    if progress is not None:
        progress(total, total)


def _fsync_dir(path: str) -> None:
    if hasattr(os, "O_DIRECTORY"):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


_RENAME_EXCHANGE = 2


def _exchange(a: str, b: str) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where the
    system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if rc != 0:
        code = ctypes.get_errno()
        if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            return False
        raise OSError(code, os.strerror(code), b)
    return True


def _install(tmp: str, directory: str) -> None:
    """Move the finished ``tmp`` to ``directory``: a rename when there is nothing
    there, else an exchange with the old checkpoint (removed after), so that a reader
    sees the old directory or the new one, never a mix and never none."""
    if not os.path.lexists(directory):
        os.rename(tmp, directory)
        return
    if _exchange(tmp, directory):
        shutil.rmtree(tmp, ignore_errors=True)  # now the old checkpoint
        return
    old = tmp + ".old"  # pragma: no cover - systems without renameat2
    os.rename(directory, old)  # pragma: no cover
    os.rename(tmp, directory)  # pragma: no cover
    with contextlib.suppress(OSError):  # pragma: no cover
        shutil.rmtree(old)
