"""A file's header: the safetensors framing and the full checks into a ``Layout``.

This stage turns a header's bytes into tensor entries and metadata strings, every check
on them made before anything sized by them is allocated: the usual headers by the fast
readers of ``_layout_fast``, anything else by ``parse_header``'s full checks, which
say what is wrong. It reads no array data. The format's names (``DTYPES``, ``Tensor``,
``Layout``) live in ``_layout_types``. Split from ``_format``.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np

from containers._errors import FormatError, LimitError, short_repr
from containers._serialize._layout_fast import (
    _column_layout,
    _scanned_ascii,
    _scanned_layout,
    _tree_span,
    _usual_layout,
)
from containers._serialize._layout_types import (
    _MAX_INT,
    _OTHER_SAFETENSORS_DTYPES,
    DTYPES,
    Layout,
    Tensor,
)
from containers._serialize._limits import Limits
from containers._serialize._strictjson import PARSE_FACTOR, _shown, bound_json, strict_json

__all__ = ["layout_of_bytes", "parse_header", "read_layout"]

_ENTRY_KEYS = frozenset({"dtype", "shape", "data_offsets"})


def parse_header(raw: bytes | memoryview, file_size: int, limits: Limits) -> Layout:
    """Validate a header (the bytes after the 8-byte length) against the file size.

    Checks, in order: UTF-8 and an object starting with ``{``; no duplicate keys;
    ``__metadata__`` maps strings to strings; every entry has exactly ``dtype``,
    ``shape`` and ``data_offsets``, a known dtype, non-negative integer dimensions and
    offsets with ``prod(shape) * itemsize == end - begin``; the entries cover the data
    section exactly (no gap, overlap or trailing byte).

    Raises:
        FormatError: the header is not valid (the message names the tensor).
        LimitError: more tensors or dimensions than ``limits`` allow.
    """
    data_start = 8 + len(raw)
    raw = bytes(raw)
    if raw[:1] != b"{":
        raise FormatError("the header does not start with '{': this is not a safetensors file.")
    usual = _scanned_ascii(raw, data_start, file_size, limits)
    if usual is not None:
        return usual
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FormatError(f"the header is not UTF-8 ({err.reason} at byte {err.start}).") from None
    bound_json(text, "the header", PARSE_FACTOR * len(raw), skip=_tree_span(text))
    usual = _scanned_layout(text, data_start, file_size, limits)
    if usual is None:
        usual = _column_layout(text, data_start, file_size, limits)
    if usual is None:
        usual = _usual_layout(text, data_start, file_size, limits)
    if usual is not None:
        return usual
    header = strict_json(text, "the header")
    if type(header) is not dict:
        raise FormatError("the header is not a JSON object.")
    metadata = header.pop("__metadata__", {})
    if type(metadata) is not dict or not all(type(v) is str for v in metadata.values()):
        raise FormatError("__metadata__ must map strings to strings.")
    if len(header) > limits.max_tensors:
        raise LimitError(
            f"the file has {len(header)} tensors, more than max_tensors="
            f"{limits.max_tensors}. Pass limits=Limits(max_tensors=...) to accept it."
        )
    tensors: list[Tensor] = []
    append = tensors.append
    new = tuple.__new__
    dtypes = DTYPES
    max_ndim = limits.max_ndim
    # The common entry (exact keys, known dtype, one small dimension) is checked inline
    # and made with tuple.__new__; anything else goes through _tensor, which checks it
    # fully and says what is wrong (benchmarks/serialization.py, "many": 100,000 entries).
    fast_1d = max_ndim >= 1
    for name, entry in header.items():
        if fast_1d and type(entry) is dict and len(entry) == 3:
            code = entry.get("dtype")
            shape = entry.get("shape")
            offsets = entry.get("data_offsets")
            dtype = dtypes.get(code) if type(code) is str else None
            if (
                dtype is not None
                and type(shape) is list
                and len(shape) == 1
                and type(shape[0]) is int
                and 0 <= shape[0] < 2**40
                and type(offsets) is list
                and len(offsets) == 2
            ):
                begin, end = offsets
                if (
                    type(begin) is int
                    and type(end) is int
                    and 0 <= begin <= end < _MAX_INT
                    and end - begin == dtype.itemsize * shape[0]
                ):
                    append(new(Tensor, (begin, end, name, code, (shape[0],), dtype)))
                    continue
        append(_tensor(name, entry, limits))
    tensors.sort()  # by (begin, end, name): names are unique
    pos = 0
    for t in tensors:
        if t.begin != pos:
            what = "overlaps the previous tensor" if t.begin < pos else "leaves a gap"
            raise FormatError(
                f"tensor {_shown(t.name)} starts at data offset {t.begin}, expected {pos}: it {what}. "
                f"Tensors must cover the data section contiguously."
            )
        pos = t.end
    have = file_size - data_start
    if pos < have:
        raise FormatError(
            f"trailing {have - pos} bytes after the last tensor (the data section has "
            f"{have} bytes, the tensors cover {pos})."
        )
    if pos > have:
        raise FormatError(f"truncated: need {pos} bytes of tensor data, have {have}.")
    return Layout({t.name: t for t in tensors}, metadata, data_start, file_size)


def _tensor(name: str, entry: Any, limits: Limits) -> Tensor:
    # Runs once per tensor of a header (100,000 in benchmarks/serialization.py, "many"),
    # so the checks are written out rather than built from helpers.
    if type(entry) is not dict or len(entry) != 3 or not _ENTRY_KEYS.issuperset(entry):
        keys: Any = type(entry).__name__
        if type(entry) is dict:  # at most 10 of them: a file may hold millions
            keys = sorted(entry)[:10] + (
                [f"and {len(entry) - 10} more"] if len(entry) > 10 else []
            )
        raise FormatError(
            f"tensor {_shown(name)}: an entry must have exactly 'dtype', 'shape' and "
            f"'data_offsets', got {keys}."
        )
    code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    # Every field's JSON type is checked before the field is used as a key or a number:
    # a list or an object as a dtype made the set lookup raise "unhashable type".
    dtype = DTYPES.get(code) if type(code) is str else None
    if dtype is None:
        if type(code) is str and code in _OTHER_SAFETENSORS_DTYPES:
            raise FormatError(
                f"tensor {_shown(name)}: unsupported dtype {_shown(code)}, a safetensors dtype that "
                f"containers does not read (it reads {', '.join(DTYPES)}). Open the file "
                f"with safetensors.safe_open instead."
            )
        raise FormatError(
            f"tensor {name!r}: unsupported dtype {short_repr(code)}. Supported: "
            f"{', '.join(DTYPES)}."
        )
    if type(shape) is not list:
        raise FormatError(
            f"tensor {_shown(name)}: the shape must be a list of non-negative integers."
        )
    if len(shape) > limits.max_ndim:
        raise LimitError(
            f"tensor {_shown(name)} has {len(shape)} dimensions, more than max_ndim="
            f"{limits.max_ndim}. Pass limits=Limits(max_ndim=...) to accept it."
        )
    size = dtype.itemsize
    for d in shape:
        if type(d) is not int or not 0 <= d < _MAX_INT:
            raise FormatError(
                f"tensor {_shown(name)}: the shape must be a list of non-negative integers."
            )
        size *= d  # exact integers: no overflow
    if size == 0 and _addressed(dtype, shape) > sys.maxsize:
        # numpy multiplies the non-zero dimensions even of an empty array, and refuses
        # more bytes than a pointer can address (its "array is too big" ValueError).
        raise FormatError(
            f"tensor {_shown(name)}: {code}{shape} is empty, but its other dimensions describe "
            f"{_addressed(dtype, shape)} bytes, more than an array can address. The file "
            f"is corrupt."
        )
    if (
        type(offsets) is not list
        or len(offsets) != 2
        or type(offsets[0]) is not int
        or type(offsets[1]) is not int
        or not 0 <= offsets[0] < _MAX_INT
        or not 0 <= offsets[1] < _MAX_INT
    ):
        raise FormatError(
            f"tensor {_shown(name)}: data_offsets must be two non-negative integers."
        )
    begin, end = offsets
    if begin > end:
        raise FormatError(f"tensor {_shown(name)}: data_offsets begin {begin} is after end {end}.")
    if size != end - begin:
        raise FormatError(
            f"tensor {_shown(name)}: {code}{shape} needs {size} bytes but its data_offsets span "
            f"{end - begin}."
        )
    return Tensor(begin, end, name, code, tuple(shape), dtype)


def _addressed(dtype: np.dtype[Any], shape: list[int]) -> int:
    """The bytes an array of ``shape`` would span if its zero dimensions were one."""
    return dtype.itemsize * math.prod(d for d in shape if d)


def read_layout(f: BinaryIO, limits: Limits) -> Layout:
    """Read and validate the header of an open file, reading nothing else.

    Raises:
        FormatError: the file is too small, the length runs past the end, or the header
            is invalid.
        LimitError: the header is longer than ``limits.max_header_bytes``.
    """
    size = os.fstat(f.fileno()).st_size
    return _layout_from(f.read(8), size, f.read, limits)


def layout_of_bytes(data: memoryview, limits: Limits) -> Layout:
    """``read_layout`` for a bytes-like object."""
    return _layout_from(bytes(data[:8]), len(data), lambda n: data[8 : 8 + n], limits)


def _layout_from(
    head: bytes, size: int, read: Callable[[int], bytes | memoryview], limits: Limits
) -> Layout:
    if size < 8:
        raise FormatError(
            f"file too small: {size} bytes (a safetensors file starts with an 8-byte header length)."
        )
    n = int.from_bytes(head, "little")
    # The file size first: any other file (npz, pickle, text) gives a length that no
    # limit can make valid.
    if n > size - 8:
        raise FormatError(
            f"this is not a safetensors file: its first 8 bytes give a header length of "
            f"{n} bytes, but only {size - 8} bytes follow them (or the file is truncated)."
        )
    if n > limits.max_header_bytes:
        raise LimitError(
            f"the header claims {n} bytes, more than max_header_bytes="
            f"{limits.max_header_bytes}. Pass limits=Limits(max_header_bytes=...) to accept it."
        )
    raw = read(n)
    if len(raw) != n:  # the file shrank while we read it
        raise FormatError(f"truncated header: expected {n} bytes, read {len(raw)}.")
    return parse_header(raw, size, limits)
