"""Compare two saved files from their headers and mapped tensors (``containers diff``).

This stage reads files through ``inspect`` (the header, validated) and a read-only map
of each file's data; it rebuilds no object, so classes need not be importable.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from containers._serialize._api import FileInfo, PathLike, _in_file, inspect
from containers._serialize._decode import RowPaths
from containers._serialize._format import map_file, open_for_reading, read_layout, view_arrays
from containers._serialize._limits import DEFAULT_LIMITS, Limits

__all__ = ["diff_files"]

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


def _arrays(path: str, limits: Limits) -> dict[str, np.ndarray[Any, Any]]:
    # Errors name the file, as inspect's do: diff reads data (BOOL bytes) that inspect does not.
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


def diff_files(a: PathLike, b: PathLike, *, limits: Limits | None = None) -> list[str]:
    """Every difference between two files, one line each: ``-`` only in A, ``+`` only in
    B, ``~`` changed (node type, version, kept value, scalar, dtype/shape, or array values
    with the largest absolute difference). An empty list means the trees are equal.

    Raises:
        SerializationError: a file is not valid (as ``inspect`` reports it).
        OSError: a file cannot be read.
    """
    limits = DEFAULT_LIMITS if limits is None else limits
    pa, pb = os.fspath(a), os.fspath(b)
    ia, ib = inspect(pa, limits=limits), inspect(pb, limits=limits)
    table: dict[tuple[int, str, int], int] = {}
    ids_a, ids_b = _ids(ia, table), _ids(ib, table)
    where_b = {i: j for j, i in enumerate(ids_b)}
    where_a = {i: j for j, i in enumerate(ids_a)}
    arrays_a: dict[str, np.ndarray[Any, Any]] | None = None
    arrays_b: dict[str, np.ndarray[Any, Any]] | None = None
    path_a, path_b = RowPaths(ia.rows), RowPaths(ib.rows)
    out: list[str] = []
    for j, (rid, row) in enumerate(zip(ids_a, ia.rows)):
        k = where_b.get(rid)
        if k is None:
            if row.parent < 0 or ids_a[row.parent] in where_b:
                out.append(f"- {path_a[j]}: {row.text}")
            continue
        other = ib.rows[k]
        if row.tensor is not None and other.tensor is not None:
            ta, tb = _array_text(row.text), _array_text(other.text)
            if ta != tb:
                out.append(f"~ {path_a[j]}: {ta} -> {tb}")
                continue
            if arrays_a is None or arrays_b is None:
                arrays_a, arrays_b = _arrays(pa, limits), _arrays(pb, limits)
            worst = _max_abs_diff(arrays_a[row.tensor], arrays_b[other.tensor])
            if worst is not None:
                out.append(f"~ {path_a[j]}: {ta} values differ, max abs diff {worst:.6g}")
        elif row.text != other.text:
            out.append(f"~ {path_a[j]}: {row.text} -> {other.text}")
    for k, (rid, row) in enumerate(zip(ids_b, ib.rows)):
        if rid not in where_a and (row.parent < 0 or ids_b[row.parent] in where_a):
            out.append(f"+ {path_b[k]}: {row.text}")
    return out
