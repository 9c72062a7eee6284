"""A file's header: the safetensors framing, the dtype table and the validated ``Layout``.

This stage turns a header's bytes into tensor entries and metadata strings, every check
on them made before anything sized by them is allocated: the usual headers by fast
paths (``_column_layout``, ``_usual_layout``) that accept a subset of what the full
checks accept and build the same ``Layout``. Split from ``_format``.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from containers._errors import FormatError, LimitError, short_repr
from containers._serialize._limits import Limits
from containers._serialize._strictjson import (
    _MAX_DIGITS,
    PARSE_FACTOR,
    _constant,
    _decoder,
    _int,
    _shown,
    bound_json,
    counts_fit,
    load_extension,
    strict_json,
)

__all__ = [
    "CODES",
    "DTYPES",
    "FORMAT_KEY",
    "FORMAT_VERSION",
    "TREE_KEY",
    "Layout",
    "Tensor",
    "layout_of_bytes",
    "parse_header",
    "read_layout",
]

FORMAT_KEY = "containers.format"
TREE_KEY = "containers.tree"
FORMAT_VERSION = "1"
_ALIGN = 64  # the data section starts on a cache line
_MAX_INT = 2**63

#: The safetensors dtype codes this library reads and writes, and their numpy dtypes
#: (little-endian). Dtype strings from a file are looked up here, never given to
#: ``np.dtype``.
DTYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype("?"),
    "U8": np.dtype("u1"),
    "I8": np.dtype("i1"),
    "U16": np.dtype("<u2"),
    "I16": np.dtype("<i2"),
    "U32": np.dtype("<u4"),
    "I32": np.dtype("<i4"),
    "U64": np.dtype("<u8"),
    "I64": np.dtype("<i8"),
    "F16": np.dtype("<f2"),
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "C64": np.dtype("<c8"),
}
try:  # bfloat16 exists only with ml_dtypes
    import ml_dtypes

    DTYPES["BF16"] = np.dtype(ml_dtypes.bfloat16)
    # float8, as safetensors names them (torch.float8_e4m3fn, float8_e5m2, float8_e8m0fnu)
    DTYPES["F8_E4M3"] = np.dtype(ml_dtypes.float8_e4m3fn)
    DTYPES["F8_E5M2"] = np.dtype(ml_dtypes.float8_e5m2)
    DTYPES["F8_E8M0"] = np.dtype(ml_dtypes.float8_e8m0fnu)
except ImportError:  # pragma: no cover - ml_dtypes is installed in the test environment
    pass

#: The safetensors dtypes (safetensors 0.8) that may be missing from DTYPES (BF16 is
#: there when ml_dtypes is installed): refused like any unknown dtype, with a message
#: that says where to read them.
_OTHER_SAFETENSORS_DTYPES = frozenset(
    {"F8_E5M2", "F8_E4M3", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "BF16"}
)

#: numpy scalar type -> code (byte order is normalized separately).
CODES: dict[type, str] = {dt.type: code for code, dt in DTYPES.items()}


class Tensor(NamedTuple):
    """One validated tensor entry: ``begin``/``end`` relative to the data section.

    A tuple, so that sorting by position is a C comparison (benchmarks/serialization.py,
    "many": 100,000 entries).
    """

    begin: int
    end: int
    name: str
    code: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]


@dataclass(frozen=True, slots=True)
class Layout:
    """A validated header: tensors in file order, metadata strings, where data starts."""

    tensors: dict[str, Tensor]
    metadata: dict[str, str]
    data_start: int
    file_size: int


_ENTRY_KEYS = frozenset({"dtype", "shape", "data_offsets"})

#: ``containers._scan`` (the header and tree parsed in C), or None. Read at each call
#: (tests switch it off).
_scan = load_extension("_scan")


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


_META = "__metadata__"
_TREE_AT = f'"{TREE_KEY}":"'


def _tree_span(text: str) -> tuple[int, int]:
    """``_tree_span_plain``'s answer, from ``containers._scan.tree_span`` (one pass in
    C: the three ``str.count`` of its plain twin search for two- and three-character
    strings, 30 ms over the "many" header of benchmarks/serialization.py) when it is
    built and the text is ASCII."""
    scan = _scan
    if scan is not None:
        span: tuple[int, int] | None = scan.tree_span(text)
        if span is not None:
            return span
    return _tree_span_plain(text)


def _tree_span_plain(text: str) -> tuple[int, int]:
    """Where the tree string of a header written by containers lies (its content), or
    ``(0, 0)``: the span between ``"containers.tree":"`` and the first ``]"`` after it,
    kept only when every quote in it is escaped and no backslash is escaped before a
    quote, so that it is one string's content (it holds brackets and commas that
    ``bound_json`` must not count as the header's)."""
    at = text.find(_TREE_AT)
    if at < 0:
        return 0, 0
    a = at + len(_TREE_AT)
    b = text.find(']"', a)
    if b < 0:
        return 0, 0
    b += 1
    if text.count('"', a, b) != text.count('\\"', a, b) or text.count('\\\\"', a, b):
        return 0, 0
    return a, b


def _usual_layout(text: str, data_start: int, file_size: int, limits: Limits) -> Layout | None:
    """``parse_header``'s result for a usual header, or None to let it decide.

    Usual: ``__metadata__`` (if any) comes first, every entry lists ``dtype``,
    ``shape`` and ``data_offsets`` in that order (as containers and safetensors write
    them), and every check of ``parse_header`` passes. This accepts a subset of what
    ``parse_header`` accepts and builds the same ``Layout``; anything else, valid or
    not, and so every error and its message, is left to ``parse_header``
    (tests/test_serialize_fuzz.py compares the two on mutated files).

    It is faster because JSON objects are parsed into tuples of pairs (``tuple``, a C
    call, instead of ``_pairs`` for each of 100,000 entries) and an entry's three
    pairs are unpacked rather than looked up (benchmarks/serialization.py, "many").
    An object is then a tuple and an array a list, and duplicate keys show as a dict
    shorter than its pairs.
    """
    try:
        top = json.loads(
            text,
            object_pairs_hook=tuple,
            parse_constant=_constant,
            parse_int=None if 0 < sys.get_int_max_str_digits() <= _MAX_DIGITS else _int,
        )
    except (ValueError, TypeError, RecursionError):  # FormatError is a ValueError
        return None
    if type(top) is not tuple or not top:
        return None
    metadata: dict[str, Any] = {}
    if top[0][0] == _META:
        pairs = top[0][1]
        if type(pairs) is not tuple:
            return None
        metadata = dict(pairs)
        if len(metadata) != len(pairs) or not all(type(v) is str for v in metadata.values()):
            return None
        top = top[1:]
    if len(top) > limits.max_tensors:
        return None
    tensors: list[Tensor] = []
    append = tensors.append
    new = tuple.__new__
    dtypes = DTYPES
    max_ndim = limits.max_ndim
    for name, entry in top:
        if type(entry) is not tuple or len(entry) != 3:
            return None
        (k1, code), (k2, shape), (k3, offsets) = entry
        if k1 != "dtype" or k2 != "shape" or k3 != "data_offsets" or type(code) is not str:
            return None
        dtype = dtypes.get(code)
        if dtype is None or type(shape) is not list or len(shape) > max_ndim:
            return None
        size = dtype.itemsize
        for d in shape:
            if type(d) is not int or not 0 <= d < _MAX_INT:
                return None
            size *= d
        if size == 0 and len(shape) > 1:  # _tensor checks its other dimensions
            return None
        if type(offsets) is not list or len(offsets) != 2:
            return None
        begin, end = offsets
        if (
            type(begin) is not int
            or type(end) is not int
            or not 0 <= begin <= end < _MAX_INT
            or end - begin != size
        ):
            return None
        append(new(Tensor, (begin, end, name, code, tuple(shape), dtype)))
    tensors.sort()  # by (begin, end, name)
    pos = 0
    for t in tensors:
        if t.begin != pos:
            return None
        pos = t.end
    if pos != file_size - data_start:
        return None
    by_name = {t.name: t for t in tensors}
    if len(by_name) != len(tensors) or _META in by_name:  # a duplicate key
        return None
    return Layout(by_name, metadata, data_start, file_size)


#: One tensor entry as containers and safetensors write it (no whitespace, keys in
#: this order), and a comma unless it is the last: its name (no escape, quote or control character), its
#: dtype and shape as one string (few distinct ones), and its offsets (integers of at
#: most 18 digits, without leading zeros: below 2**63, as JSON writes them).
_ENTRY = re.compile(
    r'"([^"\\\x00-\x1f]*)":\{"dtype":"([A-Z0-9_]+","shape":\[[0-9,]*)\],'
    r'"data_offsets":\[(0|[1-9][0-9]{0,17}),(0|[1-9][0-9]{0,17})\]\}(?:,|$)'
)
#: The fixed characters of an ``_ENTRY`` match, around its four groups.
_ENTRY_FIXED = len('"":{"dtype":"],"data_offsets":[,]},')
_DIMS = re.compile(r"(?:(?:0|[1-9][0-9]{0,17})(?:,(?:0|[1-9][0-9]{0,17}))*)?").fullmatch
_META_AT = '{"__metadata__":'


def _column_layout(text: str, data_start: int, file_size: int, limits: Limits) -> Layout | None:
    """``parse_header``'s result for a header as containers writes it, or None to let
    ``_usual_layout`` (then ``parse_header``) decide: the fast path for many small
    tensors (benchmarks/serialization.py, "many": 100,000 entries).

    The header must be ``{"__metadata__":{...},`` then entries exactly as ``_ENTRY``
    matches them, then ``}`` and spaces. ``__metadata__`` is parsed by the strict
    decoder (``raw_decode``); the entries by one ``re.findall`` (strings only, in C),
    whose matches must cover them exactly (their lengths add up to the text's); the
    checks are then made per column with numpy (sizes from the few distinct dtype and
    shape strings, offsets contiguous) rather than per entry. It accepts a subset of
    what ``_usual_layout`` accepts and builds the same ``Layout``
    (tests/test_serialize_fuzz.py holds the three tiers to each other).
    """
    if not text.startswith(_META_AT):
        return None
    try:
        metadata, end = _decoder().raw_decode(text, len(_META_AT))
    except (ValueError, TypeError, RecursionError):  # FormatError is a ValueError
        return None
    if type(metadata) is not dict or not all(type(v) is str for v in metadata.values()):
        return None
    # the closing brace, then the padding (at most 63 spaces as containers writes it)
    close = len(text) - len(text[-_ALIGN:]) + len(text[-_ALIGN:].rstrip(" "))
    if text[end : end + 1] != "," or text[close - 1 : close] != "}":
        return None
    start, stop = end + 1, close - 1  # the entries, searched in place (no copy)
    found = _ENTRY.findall(text, start, stop)
    n = len(found)
    if not n or n > limits.max_tensors:
        return None
    names, specs, begins, ends = map(list, zip(*found))
    del found
    covered = (
        _ENTRY_FIXED * n
        - 1  # the last entry has no comma
        + sum(map(len, names))
        + sum(map(len, specs))
        + sum(map(len, begins))
        + sum(map(len, ends))
    )
    if covered != stop - start:  # something between or around the entries
        return None
    # Contiguous in the header's order: each entry ends where the next begins, the same
    # digits (no leading zeros: one text per number), compared as lists of strings in C.
    if begins[0] != "0" or ends[:-1] != begins[1:]:
        return None  # another order (safetensors writes them by name), or gaps
    kinds: dict[str, tuple[str, tuple[int, ...], np.dtype[Any], int]] = {}
    for spec in set(specs):
        code, _, dims = spec.partition('","shape":[')
        dtype = DTYPES.get(code)
        if dtype is None or not _DIMS(dims):
            return None
        shape = tuple(map(int, dims.split(","))) if dims else ()
        size = dtype.itemsize * math.prod(shape)
        # empty tensors share an offset, ordered by name: left to _usual_layout
        if len(shape) > limits.max_ndim or not 0 < size < 2**62:
            return None
        kinds[spec] = (code, shape, dtype, size)
    b_list = list(map(int, begins))
    e_list = [*b_list[1:], int(ends[-1])]
    del begins, ends
    if e_list[-1] != file_size - data_start:
        return None
    b = np.array(b_list, np.int64)
    e = np.array(e_list, np.int64)
    rows = list(map(kinds.__getitem__, specs))
    if not np.array_equal(e - b, np.fromiter(map(_SIZE, rows), np.int64, n)):
        return None
    tensors = list(
        map(
            functools.partial(tuple.__new__, Tensor),
            zip(
                b_list,
                e_list,
                names,
                map(_CODE, rows),
                map(_SHAPE, rows),
                map(_DTYPE, rows),
            ),
        )
    )
    by_name = dict(zip(names, tensors))
    if len(by_name) != n or _META in by_name:  # a duplicate key
        return None
    return Layout(by_name, metadata, data_start, file_size)


def _scanned_layout(
    text: str | bytes, data_start: int, file_size: int, limits: Limits
) -> Layout | None:
    """``_column_layout``'s result, parsed in C (``containers._scan.header``: one pass
    over the header, the entries made as ``Tensor`` tuples, every number bounded to 18
    digits before it is read), or None to let ``_column_layout`` decide: the fast path
    of a header as containers writes it (benchmarks/serialization.py, "many": 100,000
    entries). It accepts a subset of what ``_column_layout`` accepts (ASCII text, no
    whitespace in ``__metadata__``, only ASCII escapes in its strings) and builds the
    same ``Layout`` (tests/test_serialize_fuzz.py holds the tiers to each other)."""
    scan = _scan
    if scan is None:
        return None
    got = scan.header(
        text,
        file_size - data_start,
        min(limits.max_tensors, sys.maxsize),
        min(limits.max_ndim, sys.maxsize),
        DTYPES,
        Tensor,
    )
    if got is None:
        return None
    metadata, tensors = got
    return Layout(tensors, metadata, data_start, file_size)


def _scanned_ascii(raw: bytes, data_start: int, file_size: int, limits: Limits) -> Layout | None:
    """``parse_header``'s result for an ASCII header that ``_scanned_layout`` reads,
    from its bytes (``containers._scan`` reads ASCII bytes as their str), or None to
    let ``parse_header`` decode it and decide: a header as containers writes it is
    never copied into a str (13 MB for the "many" file of benchmarks/serialization.py,
    a page fault per 4 KB). The same steps in the same order: the tree's span, the
    counts' bound that ``bound_json`` checks first (``counts_fit``; past it,
    ``bound_json`` decides on the str), then the C header scan."""
    scan = _scan
    if scan is None or not raw.isascii():
        return None
    span: tuple[int, int] | None = scan.tree_span(raw)
    if span is None or not counts_fit(raw, PARSE_FACTOR * len(raw), span):
        return None
    return _scanned_layout(raw, data_start, file_size, limits)


_CODE = operator.itemgetter(0)
_SHAPE = operator.itemgetter(1)
_DTYPE = operator.itemgetter(2)
_SIZE = operator.itemgetter(3)


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
