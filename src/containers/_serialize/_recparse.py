"""A file's tree string parsed into validated records, in one pass.

Every record of an untrusted tree is checked here (tags, counts, names, keys, aliases,
CRC32 strings), a chunk of the JSON at a time; the usual records by a fast path
(``_records_usual``) held to its plain twin (``_records_strict``). Split from
``_decode``, which builds trees from these records; ``_rows`` shows them.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections import OrderedDict, defaultdict, deque
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np

from containers._errors import (
    FormatError,
    LimitError,
    SerializationError,
    VersionError,
    short_repr,
)
from containers._paths import AttrKey, DictKey, IndexKey, Key
from containers._registry import DICT, LIST, NONE, TUPLE
from containers._serialize import _layout_fast
from containers._serialize._arrays import Wants
from containers._serialize._encode import FACTORIES
from containers._serialize._evolve import exact_kind
from containers._serialize._layout_types import FORMAT_KEY, FORMAT_VERSION, TREE_KEY, Layout
from containers._serialize._limits import Limits
from containers._serialize._strictjson import bound_json, json_array_chunks, strict_json
from containers._serialize._values import decode_key, decode_scalar

__all__ = ["Rec", "Records", "key_of", "parse_records", "printable"]

_LEAF_TAGS = frozenset({"S", "A", "@"})
_TYPES = {
    "T": tuple,
    "L": list,
    "N": type(None),
    "Q": deque,
    "D": dict,
    "O": OrderedDict,
    "DD": defaultdict,
    "A": np.ndarray,
}


class Rec(NamedTuple):
    """One validated record: its tag, how many values follow it, and its payload.

    A tuple: one is made per record (benchmarks/serialization.py, "many")."""

    tag: str
    n: int
    data: Any


def _shown(value: Any) -> str:
    """A value from a file in a message: its repr, cut to 200 characters (a name or a
    field may be megabytes long)."""
    return short_repr(value, 200)


def _bad(j: int, what: str) -> FormatError:
    return FormatError(f"the tree's record #{j} {what}. The file is corrupt.")


def _count(x: Any, j: int) -> int:
    if type(x) is not int or x < 0:
        raise _bad(j, f"has a count {_shown(x)} that is not a non-negative integer")
    return x


def _keys(x: Any, j: int) -> list[Any]:
    if type(x) is not list:
        raise _bad(j, "has keys that are not a list")
    if set(map(type, x)) <= _PLAIN_KEYS:  # their own values (decode_key's answer), in C
        keys = x
    else:
        try:
            keys = [decode_key(k) for k in x]
        except FormatError as err:
            raise _bad(j, f"has a bad key: {err}") from None
    if len(keys) > _FEW_KEYS and len(keys) - len(set(map(hash, keys))) > _FEW_KEYS:
        # Distinct keys with one hash (ints that are multiples of 2**61 - 1) make every
        # set and dict of them quadratic: refused before one is built. The hashes
        # themselves are distinct ints, which a set holds in linear time.
        raise LimitError(
            f"the tree's record #{j} has {len(keys)} dict keys whose hashes collide "
            f"({len(keys) - len(set(map(hash, keys)))} share a hash with another): "
            f"building the dict would take time quadratic in their number. The file "
            f"is corrupt or hostile."
        )
    if len(set(keys)) != len(keys):
        raise _bad(j, "has duplicate keys")
    return keys


#: Key forms that ``decode_key`` returns as they are (str keys: most dicts).
_PLAIN_KEYS = frozenset({str, int, bool, float, type(None)})

#: How many dict keys of one record may share a hash with another (a few do in real
#: data: -1 and -2 hash alike): quadratic work on this many is nothing.
_FEW_KEYS = 256


def _order(x: Any, n: int, j: int) -> list[int] | None:
    if x is None:
        return None
    # Every index an int before sorting: a str or None among them made sorted() raise
    # TypeError.
    if type(x) is not list or not all(type(i) is int for i in x) or sorted(x) != list(range(n)):
        raise _bad(j, "has an insertion order that is not a permutation of its keys")
    return x


def _names(x: Any, j: int) -> list[str]:
    if type(x) is not list or not all(type(n) is str for n in x):
        raise _bad(j, "has field names that are not a list of strings")
    return x


def _key_forms(x: Any, n: int, j: int) -> tuple[Key, ...] | None:
    if x is None:
        return None
    if type(x) is not list or len(x) != n:
        raise _bad(j, "has keys that do not match its children")
    out: list[Key] = []
    for form in x:
        if type(form) is not list or len(form) != 2 or form[0] not in ("a", "i", "d"):
            raise _bad(j, f"has a bad key form {_shown(form)}")
        if form[0] == "a" and type(form[1]) is str:
            out.append(AttrKey(form[1]))
        elif form[0] == "i" and type(form[1]) is int:
            out.append(IndexKey(form[1]))
        elif form[0] == "d":
            try:
                out.append(DictKey(decode_key(form[1])))
            except FormatError as err:
                raise _bad(j, f"has a bad key: {err}") from None
        else:
            raise _bad(j, f"has a bad key form {_shown(form)}")
    return tuple(out)


def _parse(r: Any, j: int) -> Rec:
    if type(r) is not list or not r or type(r[0]) is not str:
        raise _bad(j, "is not a list starting with a tag")
    tag = r[0]
    n = len(r)
    if tag == "S" and n == 2:
        try:
            return Rec("S", 0, decode_scalar(r[1]))
        except FormatError as err:
            raise _bad(j, f"has a bad scalar: {err}") from None
    if tag == "A" and n == 3:
        name, crc = r[1], r[2]
        if type(name) is not str or type(crc) is not str or len(crc) != 8:
            raise _bad(j, "is not ['A', name, crc32]")
        if not _HEX8(crc):
            raise _bad(j, f"has a CRC32 {_shown(crc)} that is not 8 hex digits")
        return Rec("A", 0, name)
    if tag == "@" and n == 2:
        if type(r[1]) is not int or not 0 <= r[1] < j:
            raise _bad(j, f"is an alias to {_shown(r[1])}, which is not an earlier record")
        return Rec("@", 0, r[1])
    if tag == "N" and n == 1:
        return _NONE_REC
    if tag in ("T", "L") and n == 2:
        count = _count(r[1], j)
        return _SEQ_RECS.get((tag, count)) or Rec(tag, count, None)
    if tag == "Q" and n == 3:
        count = _count(r[1], j)
        if r[2] is not None and (type(r[2]) is not int or not count <= r[2] <= sys.maxsize):
            raise _bad(j, f"is a deque of {count} items with maxlen {_shown(r[2])}")
        return Rec("Q", count, r[2])
    if tag in ("D", "O") and n in ((2, 3) if tag == "D" else (2,)):
        if tag == "D" and r[1] == [] and (n == 2 or r[2] is None):
            return _EMPTY_DICT_REC
        keys = _keys(r[1], j)
        order = _order(r[2], len(keys), j) if n == 3 else None
        return Rec(tag, len(keys), (keys, order))
    if tag == "DD" and n == 4:
        keys = _keys(r[1], j)
        order = _order(r[2], len(keys), j)
        if r[3] is not None and (type(r[3]) is not str or r[3] not in FACTORIES):
            raise _bad(j, f"names a default_factory {_shown(r[3])} that is not a builtin one")
        return Rec("DD", len(keys), (keys, order, None if r[3] is None else FACTORIES[r[3]]))
    if tag == "C" and n == 5:
        name, version = r[1], r[2]
        if type(name) is not str or type(version) is not int or version < 1:
            raise _bad(j, "is not ['C', name, version, children, kept]")
        kids, kept = _names(r[3], j), _names(r[4], j)
        if len(set(kids) | set(kept)) != len(kids) + len(kept):
            raise _bad(j, f"names a field of {_shown(name)} twice")
        return Rec("C", len(kids) + len(kept), (name, version, kids, kept))
    if tag == "R" and n == 4:
        if type(r[1]) is not str:
            raise _bad(j, "is not ['R', name, count, keys]")
        count = _count(r[2], j)
        return Rec("R", count + 1, (r[1], count, _key_forms(r[3], count, j)))
    raise _bad(j, f"is not a known record (tag {_shown(tag)} with {n - 1} fields)")


#: Records without data, shared (immutable tuples): a tree of many small lists or
#: Nones costs no record object per node.
_NONE_REC = Rec("N", 0, None)
_SEQ_RECS = {(tag, n): Rec(tag, n, None) for tag in "TL" for n in range(16)}
_EMPTY_DICT_REC = Rec("D", 0, ([], None))  # never changed: its keys are only read


class Records(NamedTuple):
    """A file's validated records, and what ``build`` and the CRC32 checks need from
    them, collected in the same pass (benchmarks/serialization.py, "many": 100,000
    array records): the tensor name and CRC32 of each array record, in record order,
    and the indices of the records that aliases point to; ``columns``, for a tree of
    dicts, lists, tuples, Nones, arrays and scalars parsed by ``containers._scan``, is
    its ``Structure`` records, its leaves (a tensor's name where an array goes) and the
    positions of the arrays among them, which ``_decode.build`` hands to the compiled
    rebuild, once (None: ``build`` reads the records one by one)."""

    recs: list[Rec]
    names: list[str]
    crcs: list[int]
    targets: set[int]
    columns: list[Any] | None = None


_TREE_FACTOR = 18

#: What ``containers._scan.records`` shares with the Python tiers: the record type, the
#: shared records without data, and how many dict keys' hashes may collide.
_SCAN_CONTEXT = (Rec, _NONE_REC, _SEQ_RECS, _EMPTY_DICT_REC, _FEW_KEYS, DICT, LIST, TUPLE, NONE)


def parse_records(
    text: str, limits: Limits, *, columns: bool = False, known: dict[str, Any] | None = None
) -> Records:
    """Parse and validate the tree string of a file into records.

    The records are parsed a chunk at a time (``_format.json_array_chunks``) and each is
    let go of once validated: the parsed JSON of a tree of a million tiny records (a
    list per record, 10 times the text) is never held whole. Errors come in the order
    of parsing the whole text first: a JSON error anywhere, then too many records, then
    the first bad record. With ``columns``, the records of a plain tree also come as a
    ``Structure``'s, for ``build`` (``Records.columns``). ``known``: the file's tensors
    by name, in file order, whose name objects the C tier reuses (``_scanned_records``).

    Raises:
        FormatError: the string is not a list of valid records.
        LimitError: more records than ``limits.max_nodes``.
    """
    # Junk (nested empty arrays in one record, which is parsed whole) is refused before
    # it is built.
    bound_json(text, "the tree", _TREE_FACTOR * len(text))
    if not _ARRAY(text):
        strict_json(text, "the tree")  # its JSON error, or not a list
        raise FormatError(_NOT_A_LIST)
    records = _scanned_records(text, limits, columns, known)
    if records is None:
        items = itertools.chain.from_iterable(json_array_chunks(text, "the tree"))
        records = _records_usual(items, limits)
    if records is None:  # a bad CRC32 string: _records_strict says which is first
        items = itertools.chain.from_iterable(json_array_chunks(text, "the tree"))
        records = _records_strict(items)
    _check_expansion(records, limits)
    return records


_ARRAY = re.compile(r"[ \t\n\r]*\[").match  # JSON whitespace, then [
_NOT_A_LIST = "the tree is not a non-empty list of records. The file is corrupt."


def _check_count(count: int, limits: Limits) -> None:
    if not count:
        raise FormatError(_NOT_A_LIST)
    if count > limits.max_nodes:
        raise LimitError(
            f"the tree has {count} records, more than max_nodes={limits.max_nodes}. "
            f"Pass limits=Limits(max_nodes=...) to accept it."
        )


def _check_expansion(records: Records, limits: Limits) -> None:
    """Refuse a tree whose aliases to nodes expand it past ``limits.max_nodes`` values.

    Sharing is legitimate, but a walk that does not respect it (flatten, structure,
    the expanded view of a DAG) visits every path: 60 lists each holding the next one
    twice are 122 records and 2**61 paths. One pass in linear time: each node's
    expanded size is summed from its children's, an alias counting its target's.
    """
    recs = records.recs
    if all(recs[k].tag == "A" for k in records.targets):
        return  # shared arrays are leaves: the expansion is the record count
    limit = limits.max_nodes
    sizes: dict[int, int] = {}
    targets = records.targets
    stack: list[list[int]] = []  # [record index, values left, expanded size so far]
    for j, rec in enumerate(recs):
        tag = rec.tag
        if tag == "@":
            size = sizes.get(rec.data, 1)
        elif tag in _LEAF_TAGS or not rec.n:
            size = 1
        else:
            stack.append([j, rec.n, 1])
            continue
        while True:
            if not stack:
                return  # the end of the tree (build and rows check what follows)
            top = stack[-1]
            top[2] += size
            if top[2] > limit:
                raise LimitError(
                    f"the tree expands to more than max_nodes={limit} values through its "
                    f"aliases at record #{top[0]} (shared objects, each counted once "
                    f"per path that reaches it). Pass limits=Limits(max_nodes=...) to "
                    f"accept it."
                )
            top[1] -= 1
            if top[1]:
                break
            stack.pop()
            k, _, size = top
            if k in targets:
                sizes[k] = size


def _scanned_records(
    text: str, limits: Limits, columns: bool = True, known: dict[str, Any] | None = None
) -> Records | None:
    """``_records_usual``'s result, parsed in C (``containers._scan.records``: one pass
    over the text, no JSON object per record), or None to let the Python tiers decide:
    the fast path of a tree as containers writes it (benchmarks/serialization.py,
    "many": 110,000 records). It reads the records A, S (a plain JSON value), N, L, T,
    D (string keys), C and @, without whitespace, and gives up on anything else, valid
    or not, and on any record the Python tiers would refuse (so they say why); the
    records it builds are theirs (tests/test_serialize_fuzz.py compares them). An array
    record naming the next of the ``known`` tensors (the file's, in file order) as it
    stands gets that name's str object, equal to the one it would make: the tree's
    names are then compared with the file's (``_wants``, ``build``) by identity, and
    hashed once (benchmarks/serialization.py, "many": 100,000 names). With
    ``columns``, a tree that holds declared containers at today's fields
    (``_evolve.exact_kind``, asked once per class name) is given as a ``Structure``'s
    records too (benchmarks/serialization.py, "classes": 10,000 containers), unless
    ``class_columns`` is False."""
    scan = _layout_fast._scan
    if scan is None:
        return None
    got = scan.records(
        text,
        min(limits.max_nodes, sys.maxsize),
        (*_SCAN_CONTEXT, min(limits.max_depth, sys.maxsize), columns),
        known,
        exact_kind if columns and class_columns else None,
    )
    return None if got is None else Records(*got)


#: Whether ``_scanned_records`` gives a tree of declared containers as columns too; False
#: in the tests that compare it with the record by record rebuild.
class_columns = True


def _records_usual(items: Iterator[Any], limits: Limits) -> Records | None:
    """``_records_strict``'s result, with the CRC32 strings checked and converted all at
    once after the loop (one regular expression over their concatenation, one
    ``bytes.fromhex``), or None when one of them is bad.

    Array and plain-scalar records, most of a file, are checked inline and made with
    tuple.__new__ (benchmarks/serialization.py, "many": 110,000 records); anything else
    goes through _parse. Records are checked in order, so the first error raised here
    (by ``_parse`` or the alias check) is that of the first bad record, as
    ``_records_strict`` reports it, unless an earlier CRC32 string is bad: then None,
    and ``parse_records`` runs ``_records_strict``, which reports that one. Before a
    record's error, the rest of ``items`` is parsed (a JSON error comes first) and
    counted (then too many records).
    """
    out: list[Rec] = []
    names: list[str] = []
    hexes: list[str] = []
    targets: set[int] = set()
    append = out.append
    add_name = names.append
    add_hex = hexes.append
    new = tuple.__new__
    # The previous plain scalar and its record, shared by the next ones holding the
    # same object: a list of a million zeros costs a slot per record, not a tuple.
    last: Any = _NONE_REC
    last_rec = _NONE_REC
    j = -1
    for j, r in enumerate(items):
        if type(r) is list and len(r) == 3 and r[0] == "A":
            name, crc = r[1], r[2]
            if type(name) is str and type(crc) is str and len(crc) == 8:
                append(new(Rec, ("A", 0, name)))
                add_name(name)
                add_hex(crc)
                continue
        elif type(r) is list and len(r) == 2 and r[0] == "S":
            v = r[1]
            if v is last:  # the same object (a small int, a bool): the same record
                append(last_rec)
                continue
            tv = type(v)
            if tv is float or tv is str or tv is int or tv is bool:
                last_rec = new(Rec, ("S", 0, v))
                last = v
                append(last_rec)
                continue
        try:
            rec = _parse(r, j)
            if rec.tag == "@":
                _check_alias(out, rec.data, j)
        except SerializationError:
            _check_count(j + 1 + sum(1 for _ in items), limits)
            if not _HEX("".join(hexes)):
                return None  # an earlier record's CRC32 is bad: that is the first error
            raise  # the first bad record: the error _records_strict would raise
        append(rec)
        if rec.tag == "A":
            add_name(rec.data)
            add_hex(r[2])
        elif rec.tag == "@":
            targets.add(rec.data)
    _check_count(j + 1, limits)
    joined = "".join(hexes)
    if not _HEX(joined):  # each is 8 characters long: all are 8 hex digits
        return None
    crcs: list[int] = np.frombuffer(bytes.fromhex(joined), ">u4").tolist()
    return Records(out, names, crcs, targets)


def _records_strict(raw: Iterable[Any]) -> Records:
    """Validate records one by one (the plain twin of ``_records_usual``; its caller has
    parsed and counted them)."""
    out: list[Rec] = []
    names: list[str] = []
    crcs: list[int] = []
    targets: set[int] = set()
    for j, r in enumerate(raw):
        rec = _parse(r, j)
        out.append(rec)
        if rec.tag == "A":
            names.append(rec.data)
            crcs.append(int(r[2], 16))
        elif rec.tag == "@":
            _check_alias(out, rec.data, j)
            targets.add(rec.data)
    return Records(out, names, crcs, targets)


#: What an alias may point at: an array or a node that can be shared.
_UNSHARABLE = {"S": "a scalar", "T": "a tuple", "N": "None", "@": "an alias"}


def _check_alias(out: list[Rec], k: int, j: int) -> None:
    """Refuse an alias to a record whose value is not shared by identity: the one check
    of alias targets, made while parsing, so that load, inspect and diff agree."""
    what = _UNSHARABLE.get(out[k].tag)
    if what is not None:
        raise _bad(j, f"is an alias to record #{k}, {what} record, which cannot be shared")


_HEX8 = re.compile(r"[0-9a-f]{8}").fullmatch
_HEX = re.compile(r"[0-9a-f]*").fullmatch


def printable(text: str) -> str:
    """A name from a file, to be shown: as it is, or as its repr when it holds a
    character that is not printable (a newline or an ANSI escape must not reach a
    terminal), as keystr shows dict keys."""
    return text if text.isprintable() else repr(text)


def key_of(rec: Rec, i: int) -> str:
    """The key of a record's i-th value, rendered as in keystr (names printable)."""
    tag = rec.tag
    if tag in ("T", "L", "Q"):
        return f"[{i}]"
    if tag in ("D", "O", "DD"):
        return str(DictKey(rec.data[0][i]))
    if tag == "C":
        kids, kept = rec.data[2], rec.data[3]
        return f".{printable(kids[i] if i < len(kids) else kept[i - len(kids)])}"
    _, n, keys = rec.data
    if i == n:
        return "<aux>"
    if keys is None:
        return f"[{i}]"
    key = keys[i]
    return f".{printable(key.name)}" if type(key) is AttrKey else str(key)


# --- a file's records, from its metadata ----------------------------------------------


def _records(layout: Layout, limits: Limits, *, columns: bool = False) -> Records:
    return _records_of(layout.metadata, limits, columns=columns, known=layout.tensors)


def _records_of(
    meta: dict[str, str],
    limits: Limits,
    *,
    columns: bool = False,
    known: dict[str, Any] | None = None,
) -> Records:
    """The validated records of a file's (or a sharded checkpoint's index's) metadata
    (with ``columns``, for ``build``: the ``Structure`` records too, where ``_scan``
    makes them)."""
    fmt = meta.get(FORMAT_KEY)
    if TREE_KEY not in meta or fmt is None:
        raise FormatError(
            "this safetensors file was not written by containers (its __metadata__ has no "
            f"{TREE_KEY!r}): load it with safetensors, or look at it with ct.inspect."
        )
    if fmt != FORMAT_VERSION:
        # isascii: "²" and other Unicode digits are isdigit() but not int()'s.
        if fmt.isascii() and fmt.isdigit() and len(fmt) < 10 and int(fmt) > int(FORMAT_VERSION):
            raise VersionError(
                f"the file is in containers format {fmt}, newer than this version reads "
                f"(format {FORMAT_VERSION}). Upgrade containers to load it."
            )
        raise FormatError(f"unknown containers format {fmt[:20]!r}. The file is corrupt.")
    return parse_records(meta[TREE_KEY], limits, columns=columns, known=known)


def _wants(records: Records, layout: Layout) -> Wants:
    """Each tensor's CRC32 from the tree, in file order (None where the tree has none).

    When the tree lists the tensors in file order (it does when the file's order, by
    item size then name, is the tree's), the tree's list is that list
    (benchmarks/serialization.py, "many": 100,000 tensors)."""
    in_file = list(layout.tensors)
    if records.names == in_file:
        return list(records.crcs)
    return list(map(dict(zip(records.names, records.crcs)).get, in_file))
