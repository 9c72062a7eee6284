"""Compare two saved files from their headers and mapped tensors (``containers diff``).

This stage reads files through ``inspect`` (the header, validated) and a read-only map
of each file's data; it rebuilds no object, so classes need not be importable.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from containers._serialize._common import PathLike, _in_file
from containers._serialize._decode import RowPaths
from containers._serialize._format import map_file, open_for_reading, read_layout, view_arrays
from containers._serialize._inspect import FileInfo, inspect
from containers._serialize._limits import DEFAULT_LIMITS, Limits
from containers._serialize._shards import ShardedArrays, is_sharded, open_sharded

__all__ = ["diff_entries", "diff_files"]

_CHUNK = 1 << 20


def _ids(info: FileInfo, table: dict[tuple[int, str, int], int]) -> list[int]:
    """An id per row: equal ids in two files mean the same path (no path strings built).

    A row is named by its parent, its key's text and how many earlier siblings have
    that text: distinct keys that print alike (two NaN keys) are matched by position,
    never merged into one row."""
    ids: list[int] = []
    seen: dict[tuple[int, str], int] = {}
    for r in info.rows:
        parent = ids[r.parent] if r.parent >= 0 else -1
        nth = seen.get((r.parent, r.key), 0)
        seen[(r.parent, r.key)] = nth + 1
        ids.append(table.setdefault((parent, r.key, nth), len(table)))
    return ids


def _arrays(path: str, limits: Limits) -> Mapping[str, np.ndarray[Any, Any]]:
    # Errors name the file, as inspect's do: diff reads data (BOOL bytes) that inspect does not.
    if is_sharded(path):
        return ShardedArrays(open_sharded(path, limits))  # each tensor read when compared
    with _in_file(path), open_for_reading(path) as f:
        layout = read_layout(f, limits)
        if layout.file_size == layout.data_start:
            return view_arrays(b"\0" * layout.data_start, layout, None, copy=False)
        return view_arrays(map_file(f), layout, None, copy=False)


def _array_text(text: str) -> str:
    return text.split("  ", 1)[0]  # "float32[2,3]" without size and CRC


def _max_abs_diff(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float | None:
    """The largest |a - b| (None when equal), read in chunks; NaN where one side is NaN."""
    fa, fb = a.reshape(-1), b.reshape(-1)
    worst: float | None = None
    for start in range(0, fa.size, _CHUNK):
        x, y = fa[start : start + _CHUNK], fb[start : start + _CHUNK]
        if x.tobytes() == y.tobytes():
            continue
        if x.dtype == np.bool_:
            d = np.not_equal(x, y).astype(np.float64)
        elif x.dtype.kind in "iu":
            # Exact: float64 would round int64 values past 2**53 (2**62 and 2**62 + 1
            # compared equal). hi - lo as uint64 is exact modulo 2**64 and fits it.
            hi, lo = np.maximum(x, y), np.minimum(x, y)
            worst = max(worst or 0.0, float((hi.astype(np.uint64) - lo.astype(np.uint64)).max()))
            continue
        else:
            wide = np.complex128 if x.dtype.kind == "c" else np.float64
            xw, yw = x.astype(wide), y.astype(wide)
            with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, max - -max
                d = np.abs(xw - yw)
            # inf - inf is NaN: equal values (infinities too) and NaN against NaN differ by 0.
            same = (xw == yw) | (np.isnan(xw) & np.isnan(yw))
            d = np.where(same, 0.0, d)
        m = float("nan") if np.isnan(d).any() else float(np.max(d))
        if m == 0.0:
            continue
        worst = m if worst is None or math.isnan(m) or m > worst else worst
    return worst


def diff_files(
    a: PathLike,
    b: PathLike,
    *,
    limits: Limits | None = None,
    rtol: float = 0.0,
    atol: float = 0.0,
    progress: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Every difference between two files, one line each: ``-`` only in A, ``+`` only in
    B, ``~`` changed (node type, version, kept value, scalar, dtype/shape, or array values
    with the largest absolute difference). An empty list means the trees are equal.

    With ``rtol``/``atol``, arrays and float scalars whose values are all within
    ``|a - b| <= atol + rtol * |b|`` (``np.isclose``, NaN equal to NaN) count as equal.

    Raises:
        SerializationError: a file is not valid (as ``inspect`` reports it).
        OSError: a file cannot be read.
    """
    return [
        f"{op} {path}: {text}"
        for op, path, text in diff_entries(
            a, b, limits=limits, rtol=rtol, atol=atol, progress=progress
        )
    ]


def _close(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], rtol: float, atol: float) -> bool:
    """Whether every value of ``a`` is within tolerance of ``b``, read in chunks."""
    fa, fb = a.reshape(-1), b.reshape(-1)
    for start in range(0, fa.size, _CHUNK):
        x, y = fa[start : start + _CHUNK], fb[start : start + _CHUNK]
        wide = np.complex128 if x.dtype.kind == "c" else np.float64
        if not np.isclose(
            x.astype(wide), y.astype(wide), rtol=rtol, atol=atol, equal_nan=True
        ).all():
            return False
    return True


def _close_scalars(ta: str, tb: str, rtol: float, atol: float) -> bool:
    """Whether two scalar rows are floats within tolerance (their texts are reprs)."""
    try:
        x, y = float(ta), float(tb)
    except ValueError:
        return False
    return bool(np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True))


def diff_entries(
    a: PathLike,
    b: PathLike,
    *,
    limits: Limits | None = None,
    rtol: float = 0.0,
    atol: float = 0.0,
    progress: Callable[[int, int], None] | None = None,
) -> list[tuple[str, str, str]]:
    """``diff_files``'s differences as ``(op, path, text)``: op ``-``, ``+`` or ``~``;
    ``progress(bytes of A compared, bytes of A)`` after each compared array."""
    tolerant = rtol > 0 or atol > 0
    limits = DEFAULT_LIMITS if limits is None else limits
    pa, pb = os.fspath(a), os.fspath(b)
    ia, ib = inspect(pa, limits=limits), inspect(pb, limits=limits)
    table: dict[tuple[int, str, int], int] = {}
    ids_a, ids_b = _ids(ia, table), _ids(ib, table)
    where_b = {i: j for j, i in enumerate(ids_b)}
    where_a = {i: j for j, i in enumerate(ids_a)}
    arrays_a: Mapping[str, np.ndarray[Any, Any]] | None = None
    arrays_b: Mapping[str, np.ndarray[Any, Any]] | None = None
    path_a, path_b = RowPaths(ia.rows), RowPaths(ib.rows)
    out: list[tuple[str, str, str]] = []
    compared = 0
    for j, (rid, row) in enumerate(zip(ids_a, ia.rows)):
        k = where_b.get(rid)
        if k is None:
            if row.parent < 0 or ids_a[row.parent] in where_b:
                out.append(("-", path_a[j], row.text))
            continue
        other = ib.rows[k]
        if row.tensor is not None and other.tensor is not None:
            ta, tb = _array_text(row.text), _array_text(other.text)
            if ta != tb:
                out.append(("~", path_a[j], f"{ta} -> {tb}"))
                continue
            if arrays_a is None or arrays_b is None:
                arrays_a, arrays_b = _arrays(pa, limits), _arrays(pb, limits)
            worst = _max_abs_diff(arrays_a[row.tensor], arrays_b[other.tensor])
            if progress is not None:  # bytes of A compared so far, of all of A's
                compared += ia.tensors[row.tensor][2]
                progress(compared, ia.data_bytes)
            if worst is not None and not (
                tolerant and _close(arrays_a[row.tensor], arrays_b[other.tensor], rtol, atol)
            ):
                out.append(("~", path_a[j], f"{ta} values differ, max abs diff {worst:.6g}"))
        elif row.text != other.text and not (
            tolerant and _close_scalars(row.text, other.text, rtol, atol)
        ):
            out.append(("~", path_a[j], f"{row.text} -> {other.text}"))
    for k, (rid, row) in enumerate(zip(ids_b, ib.rows)):
        if rid not in where_a and (row.parent < 0 or ids_b[row.parent] in where_a):
            out.append(("+", path_b[k], row.text))
    return out
