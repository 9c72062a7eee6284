"""Lazy arrays: a tensor of an open checkpoint file that is read only when asked for.

This stage sits after ``_format`` (it reads one validated tensor at a time with the
same views, BOOL and CRC32 checks as ``read_arrays``) and before ``_decode``: a
``LazyArray`` is a leaf like any array, so the decoder's record pass builds a lazy tree
unchanged. It knows nothing of trees and never reads outside the tensor it stands for.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from containers._errors import FormatError, SerializationError, short_repr
from containers._serialize import _format
from containers._serialize._format import Layout, Tensor, _mismatch, _views

__all__ = ["LazyArray", "Source", "check_io", "default_workers", "read_many"]

#: A progress callback: ``progress(bytes_done, bytes_total)``.
Progress = Callable[[int, int], None]


def default_workers() -> int:
    """Threads for parallel reads and writes: two, or one on a one-core machine (the
    copies, preadv/pwrite and the CRC32 release the GIL; more threads than that only
    add seeks on one disk)."""
    return max(1, min(2, os.cpu_count() or 1))


def check_io(workers: Any, progress: Any, op: str) -> None:
    """Refuse a ``workers=`` that is not None or a positive int, and a ``progress=``
    that is not None or callable, before anything is read or written."""
    if workers is not None and (type(workers) is not int or workers < 1):
        raise TypeError(
            f"{op}: workers must be a positive int or None (the default, "
            f"{default_workers()}), got {short_repr(workers)}. workers=1 reads and writes "
            f"in the calling thread."
        )
    if progress is not None and not callable(progress):
        raise TypeError(
            f"{op}: progress must be a function called as progress(bytes_done, "
            f"bytes_total), or None, got {short_repr(progress)}."
        )


class Source:
    """One checkpoint file opened for lazy reads: its path, its validated layout and
    a file descriptor kept open until the last lazy array of it is gone.

    The descriptor keeps the file that was loaded: a later ``save`` over the same path
    replaces the name, not the bytes a lazy array reads (atomic writes never write a
    file in place).
    """

    __slots__ = ("__weakref__", "_lock", "close", "fd", "layout", "path")

    def __init__(self, path: str, fd: int, layout: Layout) -> None:
        self.path = path
        self.fd = fd
        self.layout = layout
        self._lock = threading.Lock()  # for lseek+readv where preadv is missing
        #: Close the descriptor now (else when the last lazy array of the file is gone).
        self.close = weakref.finalize(self, os.close, fd)

    def read(self, t: Tensor, want: int | None) -> np.ndarray[Any, Any]:
        """Read tensor ``t`` into a fresh writeable array, checking BOOL bytes and, with
        ``want``, its CRC32."""
        if not self.close.alive:
            # never read a closed descriptor: its number may be another file's by now
            raise ValueError(
                f"{self.path}: the file was closed, so tensor {t.name!r} cannot be read. "
                f"Load the checkpoint again."
            )
        try:
            return self._read(t, want)
        except SerializationError as err:
            if err.args and type(err.args[0]) is str:
                err.args = (f"{self.path}: {err.args[0]}", *err.args[1:])
            raise

    def _read(self, t: Tensor, want: int | None) -> np.ndarray[Any, Any]:
        n = t.end - t.begin
        buf = np.empty(n, np.uint8)
        view = buf.data
        offset = self.layout.data_start + t.begin
        got = 0
        while got < n:
            chunk = view[got : got + _CHUNK]
            if hasattr(os, "preadv"):
                k = os.preadv(self.fd, [chunk], offset + got)
            else:  # pragma: no cover - every POSIX system this runs on has preadv
                with self._lock:
                    os.lseek(self.fd, offset + got, os.SEEK_SET)
                    k = os.readv(self.fd, [chunk])
            if not k:
                raise FormatError(
                    f"truncated: the file ended while reading tensor {t.name!r} (it was "
                    f"shortened after it was opened)."
                )
            got += k
        (array,) = _views(buf, [t], t.begin)
        if want is not None:
            value = _format._crc(array)
            if value != want:
                raise _mismatch(t, want, value)
        return array


#: Bytes read by one system call: the GIL is released for each, so other threads run.
_CHUNK = 1 << 24


class LazyArray:
    """An array of a checkpoint file, read only when asked for: a leaf of a lazy tree.

    ``ct.load(path, lazy=True)`` puts one wherever the file holds an array. It knows
    its tensor's name (the ``keystr`` path it was saved under), shape, dtype and byte
    size without reading any data; ``load()``, ``np.asarray`` or ``ct.materialize``
    read it (checking its CRC32 unless the tree was loaded with ``verify=False``) into
    a fresh writeable ``ndarray``. Each call reads again: keep the result. The other
    attributes and methods of ``ndarray`` (``.T``, ``.sum()``) read it too.

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> import containers as ct
        >>> path = os.path.join(tempfile.mkdtemp(), "m.safetensors")
        >>> ct.save(path, {"w": np.ones((2, 3), np.float32)})
        >>> w = ct.load(path, lazy=True)["w"]
        >>> w
        LazyArray('m.safetensors', "['w']", float32[2,3])
        >>> w.shape, w.dtype, w.nbytes, w.name
        ((2, 3), dtype('float32'), 24, "['w']")
        >>> np.asarray(w).sum()
        np.float32(6.0)

    Attributes:
        name: The tensor's name in the file.
        shape: Its shape (a tuple of ints).
        dtype: Its numpy dtype.
        file: The file it is read from.
    """

    __slots__ = ("_source", "_tensor", "_want", "dtype", "name", "shape")

    #: Marks lazy leaves for ``pformat`` and ``save`` without importing this module.
    __containers_lazy__ = True

    def __init__(self, source: Source, tensor: Tensor, want: int | None) -> None:
        self._source = source
        self._tensor = tensor
        self._want = want
        self.name = tensor.name
        self.shape = tensor.shape
        self.dtype = tensor.dtype

    @property
    def file(self) -> str:
        """The path of the file the tensor is read from."""
        return self._source.path

    @property
    def nbytes(self) -> int:
        """The tensor's size in bytes."""
        return self._tensor.end - self._tensor.begin

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    def load(self) -> np.ndarray[Any, Any]:
        """Read the tensor into a fresh writeable ``ndarray``.

        Raises:
            IntegrityError: its CRC32 does not match (unless loaded with verify=False).
            FormatError: its data is not valid (a BOOL byte other than 0 or 1), or the
                file was shortened since it was opened.
        """
        return self._source.read(self._tensor, self._want)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        a = self.load()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __getattr__(self, name: str) -> Any:
        # ndarray's other public attributes and methods (.T, .sum(), .astype(...)) read
        # the array, so code written for arrays (a class's migration) works on a lazy
        # one; nothing else is forwarded, so a filter's getattr(x, "tag", None) reads
        # nothing.
        if name.startswith("_") or not hasattr(np.ndarray, name):
            raise AttributeError(f"'LazyArray' object has no attribute {name!r}")
        return getattr(self.load(), name)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d LazyArray")
        return self.shape[0]

    def __repr__(self) -> str:
        name = getattr(self.dtype, "name", str(self.dtype))
        dims = ",".join(map(str, self.shape))
        return f"LazyArray({os.path.basename(self.file)!r}, {self.name!r}, {name}[{dims}])"


#: Below this many bytes, reads run in the calling thread: starting threads costs more
#: than they save (benchmarks/serialization.py --checkpoints --quick, partial load).
_PARALLEL_BYTES = 1 << 23


def is_lazy(x: Any) -> bool:
    """Whether ``x`` is a lazy leaf (a ``LazyArray`` or any object marked as one)."""
    return getattr(type(x), "__containers_lazy__", False) is True


def read_many(
    lazies: Iterable[Any],
    *,
    workers: int | None = None,
    progress: Progress | None = None,
) -> dict[int, np.ndarray[Any, Any]]:
    """Read each distinct lazy leaf once, ``workers`` at a time; ``id(leaf) -> array``.

    ``progress(bytes_done, bytes_total)`` is called after each array (from the calling
    thread) and once at the start with zero done.
    """
    unique = list({id(x): x for x in lazies}.values())
    total = sum(int(x.nbytes) for x in unique)
    done = 0
    if progress is not None:
        progress(0, total)
    out: dict[int, np.ndarray[Any, Any]] = {}
    n = default_workers() if workers is None else workers
    if n <= 1 or len(unique) <= 1 or total < _PARALLEL_BYTES:
        for x in unique:
            out[id(x)] = x.load()
            done += int(x.nbytes)
            if progress is not None:
                progress(done, total)
        return out
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="containers-read") as pool:
        for x, a in zip(unique, pool.map(lambda x: x.load(), unique)):
            out[id(x)] = a
            done += int(x.nbytes)
            if progress is not None:
                progress(done, total)
    return out


def materialize(
    tree: Any,
    /,
    where: Any = ...,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
) -> Any:
    """Read the lazy leaves of ``tree`` that ``where`` selects; the others stay lazy.

    The tree is rebuilt by ``fmap`` with each selected ``LazyArray`` replaced by its
    array; a lazy leaf shared by several paths is read once and stays shared (it is
    read if any of its paths is selected). Reads run ``workers`` at a time. Values that
    are not lazy are left as they are.

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> import containers as ct
        >>> from containers.filters import PathContains
        >>> path = os.path.join(tempfile.mkdtemp(), "m.safetensors")
        >>> ct.save(path, {"enc": np.zeros(2), "dec": np.ones(2), "step": 3})
        >>> lazy = ct.load(path, lazy=True)
        >>> ct.materialize(lazy, PathContains("dec"))
        {'enc': LazyArray('m.safetensors', "['enc']", float64[2]), 'dec': array([1., 1.]), 'step': 3}

    Args:
        tree: A tree with lazy leaves (from ``load(..., lazy=True)``), or any tree.
        where: A filter (``containers.filters``) called with each leaf's path and the
            lazy leaf itself: ``PathContains``, ``WithTag`` and key-path predicates
            select by place; ``...`` (the default) reads every lazy leaf.
        workers: Threads reading at once (default: ``min(2, cpu_count)``).
        progress: ``progress(bytes_done, bytes_total)``, called as arrays are read.

    Returns:
        The tree with the selected lazy leaves read.

    Raises:
        IntegrityError, FormatError: a selected tensor's data is bad.
    """
    check_io(workers, progress, "materialize")
    return materialize_converted(tree, where, workers=workers, progress=progress)


def materialize_converted(
    tree: Any,
    where: Any = ...,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
    convert: Callable[[np.ndarray[Any, Any]], Any] | None = None,
) -> Any:
    """``materialize``, each array read passed through ``convert`` (``load(to=...,
    where=...)``: the arrays read go to the framework, the others stay lazy)."""
    from containers._flatten import leaves
    from containers._fmap import fmap

    selected = [x for x in leaves(tree, where=where) if is_lazy(x)]
    if not selected:
        return tree
    got = read_many(selected, workers=workers, progress=progress)
    if convert is not None:
        got = {k: convert(a) for k, a in got.items()}
    return fmap(lambda x: got.get(id(x), x), tree)
