"""Strict, bounded JSON: what a file's header and tree are parsed with.

Duplicate keys, NaN/Infinity (also as ``1e999``) and over-long integer literals are
refused; ``bound_json`` bounds the objects a text would build before it is parsed;
``json_array_chunks`` parses a big array a chunk at a time. Split from ``_format``
(the header's layout is ``_layout``'s business).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from json.scanner import make_scanner
from typing import Any

import numpy as np

from containers._errors import FormatError, LimitError, short_repr

__all__ = ["PARSE_FACTOR", "bound_json", "json_array_chunks", "load_extension", "strict_json"]


def load_extension(name: str) -> Any:
    """The optional C extension ``containers.<name>`` (``_scan``: a header's counts,
    layout and tree parsed in C; ``_encoder``: save's walk and text; ``_crc32``) when it
    was built, else None, and then its plain twins run; also None when
    ``CONTAINERS_PURE_PYTHON`` is set."""
    if os.environ.get("CONTAINERS_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(f"containers.{name}")
    except ImportError:  # pragma: no cover - built in the test environment
        return None


#: ``containers._scan``, or None. Read at each call (tests switch it off).
_scan = load_extension("_scan")


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
    counted = None if _scan is None else _scan.counts(text, a, b)  # one pass, in C
    if counted is not None:
        opens, commas, colons, quotes = counted
        strings = quotes // 2
    else:
        opens, commas, colons, strings = _counts_plain(text, a, b)
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


def counts_fit(text: str | bytes, budget: int, skip: tuple[int, int]) -> bool:
    """Whether ``bound_json``'s first bound, from counts made in C
    (``containers._scan.counts``, one pass), keeps ``text`` within ``budget``: then
    ``bound_json`` returns at once. False when the extension is not built or the text
    is a str outside ASCII; ASCII bytes are counted as their str would be (a header
    read by ``_layout_fast._scanned_ascii`` before it is decoded)."""
    counted = None if _scan is None else _scan.counts(text, *skip)
    if counted is None:
        return False
    opens, commas, colons, quotes = counted
    return _cost(opens, commas, colons, quotes // 2, len(text)) <= budget


def _counts_plain(text: str, a: int, b: int) -> tuple[int, int, int, int]:
    """``[`` and ``{``, ``,``, ``:`` and strings (quotes halved) outside ``[a, b)``:
    the plain twin of ``containers._scan.counts``."""
    n = len(text)

    def count(sub: str) -> int:
        return text.count(sub, 0, a) + text.count(sub, b, n)

    return count("[") + count("{"), count(","), count(":"), count('"') // 2


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
