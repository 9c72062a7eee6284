"""Reading a file's arrays: grouped reads, views over one buffer, CRC32 checks.

Split from ``_format``: the arrays of a validated ``Layout`` (``_layout``), read into
owned buffers or viewed over a map, BOOL bytes and CRC32s checked.
"""

from __future__ import annotations

import io
import itertools
import mmap
import operator
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import numpy as np

from containers._errors import FormatError
from containers._serialize._layout_types import Layout, Tensor
from containers._serialize._strictjson import _shown, load_extension

__all__ = ["Wants", "crc32", "map_file", "read_arrays", "view_arrays"]


def _load_crc32() -> Callable[..., int]:
    """The CRC-32 function: ``containers._crc32.crc32`` (carry-less multiplication,
    about ten times zlib's speed) when it was built and this CPU has the instructions,
    else ``zlib.crc32``, its plain twin; also zlib when ``CONTAINERS_PURE_PYTHON`` is
    set. Both compute CRC-32/ISO-HDLC and agree on every input (tests/test_crc32.py)."""
    crc32 = load_extension("_crc32")
    return crc32.crc32 if crc32 is not None and crc32.ACCELERATED else zlib.crc32


#: ``crc32(buffer, value=0) -> int``, as ``zlib.crc32``. Read at each call (tests switch it).
_crc = _load_crc32()


def _load_first_mismatch() -> Callable[..., int] | None:
    """``containers._crc32.first_mismatch`` when ``_load_crc32`` takes that module's
    ``crc32``, else None (``_check_all``, its plain twin, decides)."""
    crc32 = load_extension("_crc32")
    return crc32.first_mismatch if crc32 is not None and crc32.ACCELERATED else None


#: ``first_mismatch(data, tensors, base, wants) -> int``, or None. Read at each call.
_first_mismatch = _load_first_mismatch()


def crc32(a: np.ndarray[Any, Any]) -> int:
    """The CRC32 of a C-contiguous array's bytes (both implementations release the GIL
    on large inputs)."""
    return _crc(a)


# --- reading arrays ------------------------------------------------------------------

#: Tensors of at least this many bytes get an allocation of their own; smaller ones
#: share chunk buffers of about this size (one read for many small tensors).
_OWN = 1 << 20


def _groups(tensors: list[Tensor]) -> Iterator[tuple[int, int]]:
    """Tensors (in file order, back to back) grouped, as index ranges: a big one alone,
    small neighbours together until they reach ``_OWN`` bytes.

    The ranges of ``_groups_plain``, found with a binary search per range over the
    running total of the sizes rather than a step per tensor (100,000 tensors of 16
    bytes make two ranges; tests/test_serialize_fuzz.py holds the two to each other).
    """
    n = len(tensors)
    if n < 64:
        yield from _groups_plain(tensors)
        return
    ends = np.fromiter(map(_END, tensors), np.int64, n)
    total = ends - tensors[0].begin  # bytes up to the end of each tensor
    sizes = np.diff(ends, prepend=tensors[0].begin)
    bigs = np.flatnonzero(sizes >= _OWN).tolist()
    bigs.append(n)
    nb = 0  # the next big tensor, an index into bigs
    start = 0
    while start < n:
        while bigs[nb] < start:
            nb += 1
        big = bigs[nb]
        base = int(total[start - 1]) if start else 0
        full = int(np.searchsorted(total, base + _OWN))  # the first reaching _OWN
        if big <= full:
            if big > start:
                yield start, big
            if big < n:
                yield big, big + 1
            start = big + 1
        else:
            yield start, full + 1
            start = full + 1


_END = operator.itemgetter(1)  # Tensor.end


def _groups_plain(tensors: list[Tensor]) -> Iterator[tuple[int, int]]:
    """The plain twin of ``_groups``: a step per tensor."""
    start = 0
    size = 0
    for i, t in enumerate(tensors):
        n = t.end - t.begin
        if n >= _OWN:
            if i > start:
                yield start, i
            yield i, i + 1
            start, size = i + 1, 0
            continue
        size += n
        if size >= _OWN:
            yield start, i + 1
            start, size = i + 1, 0
    if start < len(tensors):
        yield start, len(tensors)


#: CRC32s to check, one per tensor of a layout in file order (None: not checked).
Wants = list[int | None]


def read_arrays(
    f: io.BufferedIOBase, layout: Layout, wants: Wants | None
) -> dict[str, np.ndarray[Any, Any]]:
    """Read every tensor of an open file: owned, writeable arrays.

    Big tensors get their own buffer, small ones share a chunk; each buffer is filled
    with ``readinto``. With ``wants``, each tensor's CRC32 is checked as it is read: a
    big tensor's ``_CHUNK`` bytes at a time, just after they are read, while they are
    still in the CPU cache, so the check costs no second pass over memory
    (benchmarks/serialization.py, "big": load with verify=True).
    """
    out: dict[str, np.ndarray[Any, Any]] = {}
    f.seek(layout.data_start)
    crc = _crc
    tensors = list(layout.tensors.values())
    for i, j in _groups(tensors):
        group = tensors[i:j]
        first, last = group[0], group[-1]
        buf = np.empty(last.end - first.begin, np.uint8)
        view = buf.data
        alone = wants is not None and j == i + 1
        value = 0
        got = 0
        while got < len(view):
            n = f.readinto(view[got : got + _CHUNK])
            if not n:
                raise FormatError(
                    f"truncated: the file ended while reading tensor {_shown(first.name)}."
                )
            if alone:
                value = crc(view[got : got + n], value)
            got += n
        arrays = _views(buf, group, first.begin)
        named(out, group, arrays)
        if wants is None:
            continue
        if alone:
            want = wants[i]
            if want is not None and value != want:
                raise _mismatch(first, want, value)
        else:
            _check_group(buf, first.begin, group, arrays, wants[i:j])
    return out


#: Bytes read, then checked, at a time: well inside a core's L2 cache.
_CHUNK = 1 << 19


def view_arrays(
    buffer: Any, layout: Layout, wants: Wants | None, *, copy: bool
) -> dict[str, np.ndarray[Any, Any]]:
    """Arrays over ``buffer`` (bytes, memoryview or mmap): views, or copies with ``copy``."""
    out: dict[str, np.ndarray[Any, Any]] = {}
    start = layout.data_start
    if copy:
        buffer = np.frombuffer(buffer, np.uint8, offset=start).copy()
        start = 0
    tensors = list(layout.tensors.values())
    arrays = _views(buffer, tensors, -start)
    named(out, tensors, arrays)
    if wants is not None:
        _check_group(buffer, -start, tensors, arrays, wants)
    return out


_RUN_KEY = operator.itemgetter(3, 4)  # Tensor.code, Tensor.shape


def _views(buffer: Any, tensors: list[Tensor], base: int) -> list[np.ndarray[Any, Any]]:
    """An array over ``buffer`` for each tensor, in file order (``named`` puts them in a
    dict by name).

    A run of tensors with one dtype and shape (back to back, as the file's tensors
    cover its data contiguously) is cut from a single array by iterating it, and the
    runs are found by ``groupby``, in C (benchmarks/serialization.py, "many": 100,000
    float32[4] tensors).
    """
    arrays: list[np.ndarray[Any, Any]] = []
    for (code, shape), run_iter in itertools.groupby(tensors, _RUN_KEY):
        run = list(run_iter)
        t = run[0]
        if code == "BOOL":
            _check_bools(buffer, run, base)
        if len(run) > 2 and shape and t.end > t.begin:  # iterating gives 0-d scalars
            arrays.extend(np.ndarray((len(run), *shape), t.dtype, buffer, t.begin - base))
        else:
            arrays.extend([np.ndarray(shape, u.dtype, buffer, u.begin - base) for u in run])
    return arrays


def named(
    out: dict[str, np.ndarray[Any, Any]],
    tensors: list[Tensor],
    arrays: list[np.ndarray[Any, Any]],
) -> None:
    """Put each tensor's array (``_views``' result for them) into ``out`` by name, once:
    a dict of 100,000 names costs about a twentieth of their load
    (benchmarks/serialization.py, "many")."""
    out.update(zip(map(_NAME, tensors), arrays))


def _check_bools(buffer: Any, run: list[Tensor], base: int) -> None:
    """Refuse BOOL tensors (back to back in ``buffer``) holding a byte other than 0
    or 1, which numpy would keep as a bool that is neither True nor False: one
    vectorised pass over their bytes."""
    first, last = run[0], run[-1]
    if last.end == first.begin:
        return
    raw: np.ndarray[Any, Any] = np.ndarray(
        last.end - first.begin, np.uint8, buffer, first.begin - base
    )
    if raw.max() <= 1:
        return
    at = first.begin + int(np.argmax(raw > 1))
    t = next(u for u in run if u.begin <= at < u.end)
    raise FormatError(
        f"tensor {_shown(t.name)}: BOOL data holds the byte {raw[at - first.begin]} at element "
        f"{at - t.begin}; a bool is stored as 0 or 1. The file is corrupt."
    )


def _mismatch(t: Tensor, want: int, value: int) -> Exception:
    from containers._errors import IntegrityError

    return IntegrityError(
        f"tensor {_shown(t.name)}: CRC32 mismatch (the file says {want:08x}, the data gives "
        f"{value:08x}): the file is corrupted. Restore it from a good copy, or pass "
        f"verify=False to load the damaged values anyway."
    )


def _check_all(tensors: list[Tensor], arrays: list[np.ndarray[Any, Any]], wants: Wants) -> None:
    """Check each tensor's CRC32 against ``wants`` (the same order; None: unchecked).

    The common case (all match) is one ``map`` in C and one list comparison
    (benchmarks/serialization.py, "many": 100,000 tensors)."""
    values = list(map(_crc, arrays))
    if values == wants:
        return
    for t, want, value in zip(tensors, wants, values):
        if want is not None and value != want:
            raise _mismatch(t, want, value)


def _check_group(
    buffer: Any,
    base: int,
    tensors: list[Tensor],
    arrays: list[np.ndarray[Any, Any]],
    wants: Wants,
) -> None:
    """``_check_all`` for tensors lying in ``buffer`` at their offsets minus ``base``,
    in one C loop over the buffer (``containers._crc32.first_mismatch``) rather than a
    call per array (benchmarks/serialization.py, "many": 100,000 tensors of 16 bytes);
    the plain twin ``_check_all`` where it is not built (tests/test_crc32.py holds the
    two to each other)."""
    first = _first_mismatch
    if first is None:
        _check_all(tensors, arrays, wants)
        return
    k = first(buffer, tensors, base, wants)
    if k >= 0:
        want = wants[k]
        assert want is not None
        raise _mismatch(tensors[k], want, _crc(arrays[k]))


_NAME = operator.itemgetter(2)  # Tensor.name


def map_file(f: BinaryIO) -> mmap.mmap:
    """A read-only mapping of an open, non-empty file."""
    return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
