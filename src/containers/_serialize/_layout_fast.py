"""The fast readers of a usual header (as containers and safetensors write it).

Each reader (``_scanned_ascii`` and ``_scanned_layout`` in C through
``containers._scan``, ``_column_layout``, ``_usual_layout``) accepts a subset of what
``_layout.parse_header``'s full checks accept and builds the same ``Layout``, or
returns None to leave the header, and every error and its message, to them
(tests/test_serialize_fuzz.py holds the tiers to each other); ``_tree_span`` finds the
tree string that ``bound_json`` skips. ``_scan`` is the handle on ``containers._scan`` that the
header, record and ``like=`` readers share (``_recparse`` and ``_positional`` read it here). It raises nothing
of its own and imports nothing from ``_layout``. Split from ``_layout``.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import re
import sys
from typing import Any

import numpy as np

from containers._serialize._layout_types import _ALIGN, _MAX_INT, DTYPES, TREE_KEY, Layout, Tensor
from containers._serialize._limits import Limits
from containers._serialize._strictjson import (
    _MAX_DIGITS,
    PARSE_FACTOR,
    _constant,
    _decoder,
    _int,
    counts_fit,
    load_extension,
)

#: ``containers._scan`` (the header and tree parsed in C), or None. Read at each call,
#: here and by ``_recparse`` and ``_positional`` (tests switch it off).
_scan = load_extension("_scan")

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
