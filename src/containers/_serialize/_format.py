"""The byte layout: safetensors framing, the dtype table, strict JSON, CRC32, atomic writes.

This stage turns bytes into a validated ``Layout`` (tensor entries and metadata strings)
and back, and owns every file operation. It knows nothing of trees: records are the
business of ``_encode``/``_decode``. Every check on untrusted bytes runs here before
anything sized by those bytes is allocated.
"""

from __future__ import annotations

import contextlib
import errno
import io
import itertools
import json
import math
import mmap
import operator
import os
import stat
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from json.scanner import make_scanner
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from containers._errors import FormatError, LimitError, short_repr
from containers._serialize._limits import Limits

__all__ = [
    "CODES",
    "DTYPES",
    "FORMAT_KEY",
    "FORMAT_VERSION",
    "TREE_KEY",
    "Layout",
    "Tensor",
    "Wants",
    "atomic_write",
    "build_header",
    "crc32",
    "json_array_chunks",
    "parse_header",
    "read_arrays",
    "read_layout",
    "strict_json",
    "view_arrays",
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


def _shown(value: Any) -> str:
    """A value from a file in a message: its repr, cut to 200 characters (a name or a
    field may be megabytes long)."""
    return short_repr(value, 200)


class _Duplicate(FormatError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)  # in C; the loop below runs only when there is a duplicate
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _Duplicate(f"duplicate key {_shown(k)}")
            seen.add(k)
    return out


def _constant(name: str) -> Any:
    raise FormatError(f"{name} is not JSON (only finite numbers are allowed)")


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e999: json would make it inf
        shown = text if len(text) <= 20 else f"{text[:20]}..."
        raise FormatError(
            f"the number {shown} is out of the range of a float (only finite numbers are allowed)"
        )
    return value


def _int(text: str) -> int:
    if len(text) > _MAX_DIGITS:
        raise FormatError(f"integer literal of {len(text)} digits (at most {_MAX_DIGITS})")
    return int(text)


_MAX_DIGITS = 4300  # Python's default bound on int(str) (quadratic time above it)


def _decoder() -> json.JSONDecoder:
    """The decoder of ``strict_json``: duplicate keys, NaN/Infinity, ``1e999`` and
    over-long integer literals raise ``FormatError``."""
    bounded = 0 < sys.get_int_max_str_digits() <= _MAX_DIGITS
    return json.JSONDecoder(
        object_pairs_hook=_pairs,
        parse_constant=_constant,
        parse_float=_float,
        parse_int=None if bounded else _int,
    )


@contextlib.contextmanager
def _json_errors(what: str) -> Iterator[None]:
    """Translate what parsing raises into a ``FormatError`` naming ``what``."""
    try:
        yield
    except FormatError as err:
        raise FormatError(
            f"{what}: {err}. The file is corrupt or not a containers file."
        ) from None
    except RecursionError:
        raise FormatError(f"{what}: JSON nested too deeply. The file is corrupt.") from None
    except (ValueError, TypeError) as err:  # JSONDecodeError, UnicodeDecodeError
        raise FormatError(f"{what}: not valid JSON ({err}). The file is corrupt.") from None


def strict_json(text: str | bytes, what: str) -> Any:
    """Parse JSON refusing duplicate keys and NaN/Infinity, also as a number too large
    for a float (``1e999``).

    Integer literals are bounded to 4300 digits: by Python's own limit when it is set
    (its ValueError becomes a FormatError), else by a check of ours.

    Raises:
        FormatError: naming ``what`` (the header, the tree) and the problem.
    """
    with _json_errors(what):
        if not isinstance(text, str):  # as json.loads reads bytes
            text = text.decode(json.detect_encoding(text), "surrogatepass")
        return _decoder().decode(text)


_WS = " \t\n\r"  # JSON's whitespace

#: Characters of a JSON array parsed at a time by ``json_array_chunks``.
_JSON_CHUNK = 1 << 16


def json_array_chunks(text: str, what: str) -> Iterator[list[Any]]:
    """The items of ``text``, a JSON array, parsed as ``strict_json`` parses them, a
    chunk of about ``_JSON_CHUNK`` characters at a time, so that the items of a big array
    (a tree of a million tiny records: a list object of 64 bytes for each 6
    characters) are never all built at once.

    A chunk is cut at a ``],[`` (as containers writes arrays of arrays) and parsed whole,
    in C; it parses as an array only when the cut falls between two items (a cut inside
    a string leaves a quote open, one inside an item leaves a bracket open), and then
    its items are those of the whole text. Where no cut is found nearby, or a chunk does
    not parse, the items are scanned one at a time with the decoder's own scanner, which
    reports the first error of the text exactly as ``strict_json`` does (the error is
    raised when its chunk is reached).

    ``text`` must start with ``[`` (after whitespace).

    Raises:
        FormatError: naming ``what``, as ``strict_json``.
    """
    decoder = _decoder()
    decode, scan = decoder.decode, make_scanner(decoder)  # type: ignore[arg-type]
    n = len(text)
    i = _skip(text, 0) + 1  # after the [
    with _json_errors(what):
        j = _skip(text, i)
        if j < n and text[j] == "]":
            decode(text)  # [] and maybe extra data: its result or error
            return
    while True:
        chunk = None
        if n - i <= 2 * _JSON_CHUNK:
            with contextlib.suppress(ValueError, FormatError, RecursionError):
                chunk = decode("[" + text[i:])
            if chunk:  # not [], which a trailing comma would leave
                yield chunk
                return
        else:
            b = text.find("],[", i + _JSON_CHUNK, i + 2 * _JSON_CHUNK)
            if b >= 0:
                with contextlib.suppress(ValueError, FormatError, RecursionError):
                    chunk = decode("[" + text[i : b + 1] + "]")
                if chunk:
                    yield chunk
                    i = b + 2
                    continue
        with _json_errors(what):
            chunk, i = _scan_items(text, i, i + _JSON_CHUNK, scan)
        yield chunk
        if i < 0:
            return


def _skip(text: str, i: int) -> int:
    """The index of the first character at or after ``i`` that is not whitespace."""
    n = len(text)
    while i < n and text[i] in _WS:
        i += 1
    return i


def _scan_items(
    text: str, i: int, stop: int, scan: Callable[[str, int], tuple[Any, int]]
) -> tuple[list[Any], int]:
    """Items of the array ``text`` from ``i`` (after its ``[`` or a comma) until one
    ends at or after ``stop``, one at a time, with the errors ``json.loads`` raises at
    the same places (CPython's ``_json`` array parser); the index after the next comma,
    or -1 at the end of the text."""
    n = len(text)
    items: list[Any] = []
    while True:
        i = _skip(text, i)
        try:
            item, i = scan(text, i)
        except StopIteration as err:
            raise json.JSONDecodeError("Expecting value", text, err.value) from None
        items.append(item)
        i = _skip(text, i)
        if i < n and text[i] == "]":
            i = _skip(text, i + 1)
            if i != n:
                raise json.JSONDecodeError("Extra data", text, i)
            return items, -1
        if i >= n or text[i] != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
        i += 1
        if i >= stop:
            return items, i


#: What parsing a JSON text may cost at most, in bytes per byte of the text.
PARSE_FACTOR = 10


def bound_json(text: str, what: str, budget: int, *, skip: tuple[int, int] = (0, 0)) -> None:
    """Refuse ``text`` before ``json.loads`` builds it when the Python objects it would
    make could take more than ``budget`` bytes.

    A JSON text is cheap to write and dear to build: ``[]`` is 2 bytes and a list of
    56, ``"ab"`` 4 bytes and a str of 51. The objects are bounded from token counts
    (``_cost``): first counts over the whole text (C loops, no copy), leaving out
    ``skip``, the span of one string known to hold no quote (the tree inside a header),
    which any usual file meets; past that bound, the counts are made exactly, outside
    strings (``_outside_strings``). A one-character string is one of Python's cached
    singletons: the record tags (``"N"``, ``"S"``...) cost nothing.

    Raises:
        LimitError: the objects would exceed ``budget`` (junk nested in unknown fields,
            thousands of empty records: a valid file cannot cost that much).
    """
    a, b = skip
    n = len(text)

    def count(sub: str) -> int:
        return text.count(sub, 0, a) + text.count(sub, b, n)

    opens = count("[") + count("{")
    commas, colons, strings = count(","), count(":"), count('"') // 2
    if _cost(opens, commas, colons, strings, n) <= budget:
        return
    singles = _singles(text)
    if _cost(opens, commas, colons, strings - singles, n) <= budget:
        return
    opens, commas, colons, strings, chars = _outside_strings(text)
    cost = _cost(opens, commas, colons, strings - singles, chars)
    if cost > budget:
        raise LimitError(
            f"{what}: its JSON would take about {cost:,} bytes of memory to parse, more "
            f"than {budget:,} ({budget // max(n, 1)} times its size): it holds {opens:,} "
            f"arrays and objects and {strings:,} strings, far more than a valid file of "
            f"that size needs. The file is corrupt or hostile."
        )


#: The one-character strings most frequent in trees (record tags, the float form).
_SINGLE = ('"S"', '"A"', '"N"', '"L"', '"T"', '"D"', '"O"', '"Q"', '"C"', '"R"', '"@"', '"f"')


def _singles(text: str) -> int:
    """How many strings of ``text`` are one of ``_SINGLE`` (in JSON, ``"N"`` cannot be
    a part of a longer string: a quote inside one is escaped)."""
    return sum(map(text.count, _SINGLE))


#: Bytes of a text scanned at a time by ``_outside_strings`` (its temporaries: a few
#: times this, whatever the size of the text).
_SCAN = 1 << 16


def _outside_strings(text: str) -> tuple[int, int, int, int, int]:
    """Exact counts of ``[`` and ``{``, ``,`` and ``:`` outside strings, of strings and
    of the characters inside them, in memory of the order of the text.

    Escapes are blanked first (``\\\\`` then ``\\"`` become ``__``), so every quote
    left opens or closes a string; a byte is inside a string when the quotes before it
    are odd in number: a running sum, ``_SCAN`` bytes at a time, in numpy (no object per
    string, as a regular expression's substitution would make).
    """
    data = text.encode("utf-8", "surrogatepass").replace(b"\\\\", b"__")
    data = data.replace(b'\\"', b"__")
    opens = commas = colons = quotes = inside = 0
    carry = 0
    for start in range(0, len(data), _SCAN):
        b = np.frombuffer(data, np.uint8, min(_SCAN, len(data) - start), start)
        is_quote = b == 34
        parity = np.cumsum(is_quote, dtype=np.uint8)
        parity += carry
        parity &= 1  # 1 inside a string (from its opening quote on)
        carry = int(parity[-1])
        out = parity == 0
        opens += int(np.count_nonzero(((b == 91) | (b == 123)) & out))
        commas += int(np.count_nonzero((b == 44) & out))
        colons += int(np.count_nonzero((b == 58) & out))
        quotes += int(np.count_nonzero(is_quote))
        inside += len(b) - int(np.count_nonzero(out))
    return opens, commas, colons, quotes // 2, inside


def _cost(opens: int, commas: int, colons: int, strings: int, chars: int) -> int:
    """Bytes of the objects json builds: a list and its first slot (64), a slot and its
    share of a list's growth per comma (10), a pair tuple and dict entry per colon
    (104), a str per string (49) and its characters (CPython 3.11-3.13, 64-bit). A
    constant 64 KiB covers the small objects of any text."""
    return 64 * opens + 10 * commas + 104 * colons + 49 * strings + chars - (1 << 16)


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
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FormatError(f"the header is not UTF-8 ({err.reason} at byte {err.start}).") from None
    bound_json(text, "the header", PARSE_FACTOR * len(raw), skip=_tree_span(text))
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


def build_header(entries: str, metadata: dict[str, str]) -> bytes:
    """The 8-byte length and the JSON header, padded with spaces to a 64-byte boundary.

    ``entries`` is the tensor entries, rendered as JSON members (``"name":{...},...``).
    """
    meta = json.dumps(metadata, separators=(",", ":"))
    body = (
        f'{{"__metadata__":{meta},{entries}}}' if entries else f'{{"__metadata__":{meta}}}'
    ).encode()
    pad = -(8 + len(body)) % _ALIGN
    body += b" " * pad
    return len(body).to_bytes(8, "little") + body


def _load_crc32() -> Callable[..., int]:
    """The CRC-32 function: ``containers._crc32.crc32`` (carry-less multiplication,
    about ten times zlib's speed) when it was built and this CPU has the instructions,
    else ``zlib.crc32``, its plain twin; also zlib when ``CONTAINERS_PURE_PYTHON`` is
    set. Both compute CRC-32/ISO-HDLC and agree on every input (tests/test_crc32.py)."""
    if os.environ.get("CONTAINERS_PURE_PYTHON"):
        return zlib.crc32
    try:
        from containers import _crc32
    except ImportError:
        return zlib.crc32
    return _crc32.crc32 if _crc32.ACCELERATED else zlib.crc32


#: ``crc32(buffer, value=0) -> int``, as ``zlib.crc32``. Read at each call (tests switch it).
_crc = _load_crc32()


def crc32(a: np.ndarray[Any, Any]) -> int:
    """The CRC32 of a C-contiguous array's bytes (both implementations release the GIL
    on large inputs)."""
    return _crc(a)


# --- reading arrays ------------------------------------------------------------------

#: Tensors of at least this many bytes get an allocation of their own; smaller ones
#: share chunk buffers of about this size (one read for many small tensors).
_OWN = 1 << 20


def _groups(tensors: list[Tensor]) -> Iterator[tuple[int, int]]:
    """Tensors (in file order) grouped, as index ranges: a big one alone, small
    neighbours together."""
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
        arrays = _views(buf, group, first.begin, out)
        if wants is None:
            continue
        if alone:
            want = wants[i]
            if want is not None and value != want:
                raise _mismatch(first, want, value)
        else:
            _check_all(group, arrays, wants[i:j])
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
    arrays = _views(buffer, tensors, -start, out)
    if wants is not None:
        _check_all(tensors, arrays, wants)
    return out


_RUN_KEY = operator.itemgetter(3, 4)  # Tensor.code, Tensor.shape


def _views(
    buffer: Any, tensors: list[Tensor], base: int, out: dict[str, np.ndarray[Any, Any]]
) -> list[np.ndarray[Any, Any]]:
    """Put an array over ``buffer`` for each tensor (in file order) into ``out``; return
    them in that order.

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
    out.update(zip(map(_NAME, tensors), arrays))
    return arrays


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


_NAME = operator.itemgetter(2)  # Tensor.name


def map_file(f: BinaryIO) -> mmap.mmap:
    """A read-only mapping of an open, non-empty file."""
    return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


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


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_for_reading(path: str) -> io.BufferedReader:
    """Open a regular file for reading; refuse anything else before reading a byte
    (``open_regular``, as a buffered file).

    Raises:
        FormatError: ``path`` is a FIFO, a device or a socket.
        IsADirectoryError: ``path`` is a directory, as ``open`` says.
        OSError: as ``open(path, "rb")`` raises it.
    """
    fd = open_regular(path)
    try:
        return open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_regular(path: str, *, follow: bool = True) -> int:
    """Open a regular file for reading and return its descriptor.

    The path is checked before it is opened (a FIFO's open blocks until a writer
    comes; a device's may act), then opened without blocking and checked again on its
    descriptor, in case another file was swapped in meanwhile. ``follow=False`` refuses
    a symbolic link as the last component (a shard whose link was checked and resolved
    already).

    Raises:
        FormatError: ``path`` is a FIFO, a device or a socket, or became a link.
        IsADirectoryError: ``path`` is a directory, as ``open`` says.
        OSError: as ``open(path, "rb")`` raises it.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if follow:
        _check_regular(os.stat(path).st_mode, path)  # before open: opening a device acts
    else:
        flags |= getattr(os, "O_NOFOLLOW", 0)
        _check_regular(os.lstat(path).st_mode, path)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        raise FormatError("the file became a symbolic link while it was opened.") from None
    try:
        _check_regular(os.fstat(fd).st_mode, path)  # what was opened, if it was swapped
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_regular(mode: int, path: str) -> None:
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if not stat.S_ISREG(mode):
        raise FormatError(f"not a regular file ({_file_kind(mode)}): only regular files are read.")


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
