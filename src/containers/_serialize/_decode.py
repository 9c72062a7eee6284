"""Decode flat records back into a tree, applying schema evolution; describe them.

This stage validates every record of an untrusted tree (tags, counts, names, aliases,
tensor references) and rebuilds it with an explicit stack, the pattern of
``_flatten._build``; types come from the registry by name and nothing else. It never
reads bytes itself: ``_format`` hands it the parsed metadata and the arrays.
"""

from __future__ import annotations

import functools
import itertools
import re
import sys
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np

from containers._errors import (
    FormatError,
    LimitError,
    SchemaError,
    SerializationError,
    UnknownTypeError,
    VersionError,
    safe_repr,
    short_repr,
    type_name,
)
from containers._paths import AttrKey, DictKey, IndexKey, Key
from containers._registry import (
    DEFAULT_DICT,
    DICT,
    ORDERED_DICT,
    NodeKind,
    _KeyedAux,
    _no_keys,
    class_by_name,
    kind_for_type,
)
from containers._serialize._encode import FACTORIES
from containers._serialize._format import bound_json, json_array_chunks, strict_json
from containers._serialize._limits import Limits
from containers._serialize._values import decode_key, decode_scalar
from containers._spec import ContainerSpec

__all__ = [
    "Rec",
    "Records",
    "Row",
    "RowPaths",
    "build",
    "check_root",
    "parse_records",
    "printable",
    "row_path",
    "rows",
]

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
    and the indices of the records that aliases point to."""

    recs: list[Rec]
    names: list[str]
    crcs: list[int]
    targets: set[int]


_TREE_FACTOR = 18


def parse_records(text: str, limits: Limits) -> Records:
    """Parse and validate the tree string of a file into records.

    The records are parsed a chunk at a time (``_format.json_array_chunks``) and each is
    let go of once validated: the parsed JSON of a tree of a million tiny records (a
    list per record, 10 times the text) is never held whole. Errors come in the order
    of parsing the whole text first: a JSON error anywhere, then too many records, then
    the first bad record.

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


def _key_of(rec: Rec, i: int) -> str:
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


def _path(recs: list[Rec], stack: list[list[Any]]) -> str:
    """The path of the value that the open nodes of ``stack`` wait for, for messages.

    Built only when a message needs it, so decoding stays linear in the depth; past
    ``_LONG_PATH`` levels only both ends are shown, as ``_paths.where`` does, so that a
    message about every node of a deep tree costs linear time too.
    """

    def keys(frames: list[list[Any]]) -> str:
        return "".join([_key_of(recs[fr[0]], len(fr[1])) for fr in frames])

    if len(stack) > _LONG_PATH:
        return f"{keys(stack[:_PATH_END])}...{keys(stack[-_PATH_END:])} (depth {len(stack)})"
    return keys(stack) or "the root"


#: Paths deeper than this many levels are shown by their first and last _PATH_END keys.
_LONG_PATH = 40
_PATH_END = 12


def _evolve(
    spec: ContainerSpec,
    version: int,
    children: dict[str, Any],
    meta: dict[str, Any],
    where: Callable[[], str],
    problems: list[Problem],
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    cls = type_name(spec.cls)
    # the names the file holds, where a migration may have added others
    in_file = {*children, *meta} if version < spec.version else None
    for v in range(version, spec.version):
        fn = spec.migrations[v]
        try:
            result = fn(dict(children), dict(meta))
        except SerializationError:
            raise
        except Exception as err:
            raise SchemaError(
                f"the migration of {cls} from version {v} to {v + 1} raised "
                f"{type(err).__name__}: {err} (at {where()}). Fix the migration function."
            ) from err
        if (
            type(result) is not tuple
            or len(result) != 2
            or not all(isinstance(d, dict) for d in result)
        ):
            raise SchemaError(
                f"the migration of {cls} from version {v} to {v + 1} returned {safe_repr(result):.80} "
                f"(at {where()}); it must return a (children, metadata) pair of dicts."
            )
        children, meta = result
    values: dict[str, Any] = {}
    start = len(problems)
    versions = f"(file version {version}, class version {spec.version})"
    unknown: list[tuple[str, Any, bool]] = []  # name, value, is a child
    for source in (children, meta):
        for name, value in source.items():
            target = spec.renamed.get(name, name)
            if name in spec.removed or (target in spec.reset and target == name):
                continue
            if target not in spec.fields and in_file is not None and name not in in_file:
                problems.append(
                    Problem(
                        f"the migrations of {cls} from version {version} to {spec.version} "
                        f"returned an unknown field {_shown(name)}",
                        where(),
                        "a migration must return the fields of the class (or old names "
                        "listed in renamed=)",
                    )
                )
                continue
            if target not in spec.fields:
                unknown.append((name, value, source is children))
                continue
            if target in values:
                problems.append(
                    Problem(
                        f"field {cls}.{target} is in the file twice (as {_shown(name)} and under "
                        f"another name)",
                        where(),
                        "",
                    )
                )
                continue
            values[target] = value
    missing: list[str] = []
    defaulted: dict[str, Any] = {}
    for name in (*spec.children, *spec.keep):
        if name in values:
            continue
        default = _field_default(spec, name)
        if default is None:
            missing.append(name)
        else:
            values[name] = defaulted[name] = default
    for name, value, child in unknown:
        old = _renamed_hint(spec, name, value, child, missing, defaulted, len(unknown))
        problems.append(
            Problem(
                f"unknown field {_shown(name)} in {cls} {versions}",
                where(),
                "add it to removed= to drop it, or to renamed= if it is a field's old name"
                if old is None
                else f"it looks like the old name of {cls}.{old}: add renamed={{{_shown(name)}: "
                f"{old!r}}}, or add it to removed= to drop it",
            )
        )
    for name in missing:
        fix = (
            "its default is an attrs Factory(takes_self=True), which needs the object "
            "before it is built; add a migration that fills it"
            if _takes_self(spec, name)
            else "give it a default, or add a migration that fills it"
        )
        problems.append(Problem(f"missing field {cls}.{name} {versions}", where(), fix))
    if len(problems) > start:
        return None
    return {n: values[n] for n in spec.children}, {n: values[n] for n in spec.keep}


class Problem(NamedTuple):
    """One way a file does not fit a class: what, where (a path) and how to fix it.
    Problems that differ only in where are grouped in the message."""

    what: str
    where: str
    fix: str

    def __str__(self) -> str:
        return f"{self.what} at {self.where}" + (f": {self.fix}" if self.fix else "")


def _renamed_hint(
    spec: ContainerSpec,
    name: str,
    value: Any,
    child: bool,
    missing: list[str],
    defaulted: dict[str, Any],
    n_unknown: int,
) -> str | None:
    """The field an unknown one is likely the old name of, or None: the one missing
    field of its role (child or kept) when it is the one unknown field, else the one
    field filled from a default of the same dtype and shape (an array), the trap of a
    renamed child that its default hides."""
    role = spec.children if child else spec.keep
    same_role = [m for m in missing if m in role]
    if n_unknown == 1 and len(same_role) == 1:
        return same_role[0]
    alike = [f for f, d in defaulted.items() if f in role and _alike(value, d.value)]
    return alike[0] if len(alike) == 1 else None


def _alike(a: Any, b: Any) -> bool:
    """Two arrays of one dtype and shape."""
    try:
        return bool(a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape))
    except Exception:  # not arrays
        return False


#: The most kinds of problems a SchemaError's message lists (the rest are counted).
_MAX_KINDS = 20


def schema_message(problems: list[Problem]) -> str:
    """The message for ``problems``: those that differ only in their path grouped, with
    their count and the first path, the first ``_MAX_KINDS`` kinds shown."""
    groups: dict[tuple[str, str], list[Problem]] = {}
    for p in problems:
        groups.setdefault((p.what, p.fix), []).append(p)
    lines = []
    for (what, fix), group in itertools.islice(groups.items(), _MAX_KINDS):
        first = group[0].where
        head = (
            f"{what}, {len(group):,} times, e.g. at {first}"
            if len(group) > 1
            else (f"{what} at {first}")
        )
        lines.append(f"  - {head}" + (f": {fix}" if fix else ""))
    n = len(problems)
    text = (
        f"the file does not fit the declared classes ({n:,} problem{'s' if n > 1 else ''}):\n"
        + "\n".join(lines)
    )
    if len(groups) > _MAX_KINDS:
        text += (
            f"\nand {len(groups) - _MAX_KINDS} more kinds of problems ({n:,} problems in "
            f"all; the SchemaError's problems attribute lists them)."
        )
    return text


def _field_default(spec: ContainerSpec, name: str) -> Any:
    """A field's default value (a fresh one for factories), or None if it has none."""
    import dataclasses

    import attr

    cls = spec.cls
    if spec.flavor == "dataclass":
        f = {f.name: f for f in dataclasses.fields(cls)}[name]
        if f.default is not dataclasses.MISSING:
            return _Default(f.default)
        if f.default_factory is not dataclasses.MISSING:
            return _Default(f.default_factory())
        return None
    if spec.flavor == "attrs":
        a: Any = attr.fields_dict(cls)[name]
        if isinstance(a.default, attr.Factory):  # type: ignore[arg-type]
            return None if a.default.takes_self else _Default(a.default.factory())
        return None if a.default is attr.NOTHING else _Default(a.default)
    defaults = getattr(cls, "_field_defaults", {})
    return _Default(defaults[name]) if name in defaults else None


def _takes_self(spec: ContainerSpec, name: str) -> bool:
    """Whether an attrs field's default is a factory taking the instance."""
    if spec.flavor != "attrs":
        return False
    import attr

    default: Any = attr.fields_dict(spec.cls)[name].default
    return isinstance(default, attr.Factory) and bool(default.takes_self)  # type: ignore[arg-type]


class _Default:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _kind_for(name: str, tag: str, where: Callable[[], str]) -> NodeKind:
    cls = class_by_name(name)
    if cls is None:
        raise UnknownTypeError(
            f"the file holds a type named {_shown(name)} at {where()}, but no class is registered "
            f"under that name. Import the module that declares it (with @container, "
            f"register or register_node) before loading."
        )
    try:
        kind = kind_for_type(cls)
    except Exception:
        raise UnknownTypeError(
            f"{_shown(name)} at {where()} is registered but is not a node type."
        ) from None
    if (kind.spec is not None) != (tag == "C"):
        what = "a declared container" if kind.spec is not None else "a register_node type"
        raise FormatError(
            f"the file stores {_shown(name)} at {where()} as a "
            f"{'container' if tag == 'C' else 'register_node'} record, but it is {what} here."
        )
    return kind


def _root_type(rec: Rec) -> Any:
    if rec.tag in ("C", "R"):
        return class_by_name(rec.data[0])
    if rec.tag == "S":
        return type(rec.data)
    return _TYPES.get(rec.tag)


def check_root(recs: list[Rec], expect: Any) -> None:
    """Raise ``SchemaError`` unless the root record holds an ``expect`` (None: any)."""
    if expect is None:
        return
    found = _root_type(recs[0])
    if found is not expect:
        rec = recs[0]
        desc = rec.data[0] if rec.tag in ("C", "R") else getattr(found, "__qualname__", "?")
        raise SchemaError(
            f"expected a {_shown(type_name(expect))} at the root, but the file holds {_shown(desc)} "
            f"there. Load it without expect= to see what it is, or pass the right class."
        )


def build(
    records: Records,
    arrays: dict[str, np.ndarray[Any, Any]],
    limits: Limits,
    expect: Any = None,
) -> Any:
    """Rebuild the tree of ``records`` over ``arrays`` (tensor name -> array).

    Raises:
        FormatError: records that do not form one tree, bad aliases, tensors referenced
            twice, missing or never referenced.
        LimitError: nesting deeper than ``limits.max_depth``.
        UnknownTypeError: a type name that is not registered.
        VersionError: a version newer than the class, or a gap in its migrations.
        SchemaError: fields that do not fit the class (all of them at once), or a root
            that is not ``expect``.
    """
    recs = records.recs
    check_root(recs, expect)
    shared: dict[int, Any] = {}  # record index -> value, for arrays and mutable nodes
    used: set[str] = set()
    problems: list[Problem] = []
    stack: list[list[Any]] = []  # [record index, values so far, kind or None]
    result: Any = None
    done = False
    max_depth = limits.max_depth
    # The path of the record at hand, for messages: built only when one is written.
    where = functools.partial(_path, recs, stack)
    # When every tensor is referenced exactly once (checked here, in C), array records
    # need no per-record bookkeeping, and only alias targets are remembered
    # (benchmarks/serialization.py, "many": 100,000 array records).
    names = records.names
    clean = len(names) == len(arrays) and arrays.keys() == set(names)
    targets = records.targets
    for j, rec in enumerate(recs):
        if done:
            raise _bad(j, "follows the end of the tree")
        tag = rec.tag
        if tag == "S":
            value = rec.data
        elif tag == "A" and clean:
            value = arrays[rec.data]
            if j in targets:
                shared[j] = value
        elif tag == "A":
            name = rec.data
            if name not in arrays:
                raise FormatError(
                    f"the tree refers to a tensor {_shown(name)} at {where()} that the "
                    f"file does not have. The file is corrupt."
                )
            if name in used:
                raise FormatError(
                    f"the tree refers to tensor {_shown(name)} twice (at {where()}); "
                    f"shared arrays are stored once and referred to by alias records."
                )
            used.add(name)
            value = arrays[name]
            shared[j] = value
        elif tag == "@":
            k = rec.data
            if k not in shared:
                raise _bad(
                    j,
                    f"is an alias to record #{k}, which is not finished (an alias to an "
                    f"enclosing node would make a cycle)",
                )
            value = shared[k]
        else:
            kind: NodeKind | None = None
            if tag in ("C", "R"):
                kind = _kind_for(rec.data[0], tag, where)
                if tag == "C":
                    _check_version(kind.spec, rec.data[1], where)  # type: ignore[arg-type]
            if rec.n:
                if len(stack) >= max_depth:
                    raise LimitError(
                        f"the tree is nested deeper than max_depth={max_depth} at record "
                        f"#{j}. Pass limits=Limits(max_depth=...) to accept it."
                    )
                stack.append([j, [], kind])
                continue
            value = _make(recs, j, [], kind, where, problems, shared, targets)
        while True:
            if not stack:
                result, done = value, True
                break
            top = stack[-1]
            top[1].append(value)
            if len(top[1]) < recs[top[0]].n:
                break
            stack.pop()
            value = _make(recs, top[0], top[1], top[2], where, problems, shared, targets)
    if not done:
        raise FormatError(
            f"the tree ends inside a node at {where()}: records are missing. The file is corrupt."
        )
    unused = set() if clean else set(arrays) - used
    if unused:
        raise FormatError(
            f"the file has {len(unused)} tensor(s) the tree never refers to, e.g. "
            f"{_shown(sorted(unused)[0])}. The file is corrupt."
        )
    if problems:
        err = SchemaError(schema_message(problems))
        err.problems = [str(p) for p in problems]
        raise err
    return result


def _check_version(spec: ContainerSpec, version: int, where: Callable[[], str]) -> None:
    cls = type_name(spec.cls)
    if version > spec.version:
        raise VersionError(
            f"{cls} at {where()} was written with version {version}, newer than this "
            f"class's version {spec.version}. Load it with the newer code."
        )
    missing = [v for v in range(version, spec.version) if v not in spec.migrations]
    if missing:
        raise VersionError(
            f"{cls} at {where()} was written with version {version}; this class is version "
            f"{spec.version} but has no migration from version {missing[0]} to "
            f"{missing[0] + 1}. Add migrations={{{missing[0]}: fn}}."
        )


def _make(
    recs: list[Rec],
    j: int,
    out: list[Any],
    kind: NodeKind | None,
    where: Callable[[], str],
    problems: list[Problem],
    shared: dict[int, Any],
    targets: set[int],
) -> Any:
    rec = recs[j]
    tag = rec.tag
    value: Any
    if tag == "T":
        return tuple(out)
    if tag == "L":
        value = out
    elif tag == "N":
        return None
    elif tag == "Q":
        value = deque(out, rec.data)
    elif tag in ("D", "DD"):
        keys, order = rec.data[0], rec.data[1]
        aux = (tuple(keys), None if order is None else tuple(keys[i] for i in order))
        if tag == "D":
            value = DICT.unflatten(aux, out)
        else:
            value = DEFAULT_DICT.unflatten((*aux, rec.data[2]), out)
    elif tag == "O":
        value = ORDERED_DICT.unflatten(tuple(rec.data[0]), out)
    else:
        assert kind is not None
        if tag == "C":
            spec = kind.spec
            assert spec is not None
            _, version, kids, kept = rec.data
            children = dict(zip(kids, out[: len(kids)]))
            meta = dict(zip(kept, out[len(kids) :]))
            fitted = _evolve(spec, version, children, meta, where, problems)
            if fitted is None:
                return _PLACEHOLDER
            ch, mt = fitted
            args = [v.value if isinstance(v, _Default) else v for v in ch.values()]
            kv = [v.value if isinstance(v, _Default) else v for v in mt.values()]
            try:
                value = kind.unflatten(tuple(kv), tuple(args))
            except Exception as err:  # a reset field's factory is user code
                raise SchemaError(
                    f"rebuilding {type_name(spec.cls)} at {where()} failed: "
                    f"{type(err).__name__}: {err}."
                ) from None
        else:
            _, n, keys = rec.data
            if (keys is None) != (kind.keys is _no_keys):
                raise FormatError(
                    f"the file stores {_shown(rec.data[0])} at {where()} "
                    f"{'without' if keys is None else 'with'} child keys, but its "
                    f"register_node declaration {'has' if keys is None else 'has no'} keys=."
                )
            raux = out[n] if keys is None else _KeyedAux(out[n], keys)
            try:
                value = kind.unflatten(raux, out[:n])
            except SerializationError:
                raise
            except Exception as err:
                raise SchemaError(
                    f"rebuilding {_shown(rec.data[0])} at {where()} failed: its unflatten raised "
                    f"{type(err).__name__}: {err}."
                ) from None
    # Any container or register_node value may be the target of an alias (sharing an
    # immutable one is harmless), as parse_records allows for inspect and load alike;
    # only the targets are kept (an entry per node of a tree of a million empty lists
    # would cost more than its file).
    if j in targets:
        shared[j] = value
    return value


_PLACEHOLDER = None


class Row(NamedTuple):
    """One line of a file's tree view: depth, parent row, key and what is there."""

    depth: int
    parent: int
    key: str
    text: str
    tensor: str | None


def rows(records: Records, tensors: dict[str, Any], limits: Limits) -> list[Row]:
    """The tree view of ``records``, validated as ``build`` validates it (but for types).

    ``tensors`` maps names to objects with ``code``, ``shape`` (``_format.Tensor``).
    """
    recs = records.recs
    crcs = iter(records.crcs)  # one per array record, in order
    out: list[Row] = []
    stack: list[list[int]] = []  # [record index, values seen, row index]
    paths = RowPaths(out)
    used: set[str] = set()
    # Only for the records that aliases point to (an entry per record of a tree of a
    # million tiny records would cost twice its file).
    targets = records.targets
    finished: set[int] = set()
    row_of: dict[int, int] = {}
    done = False
    for j, rec in enumerate(recs):
        if done:
            raise _bad(j, "follows the end of the tree")
        if stack:
            top = stack[-1]
            key = _key_of(recs[top[0]], top[1])
            parent = top[2]
        else:
            key, parent = "", -1
        tag = rec.tag
        tensor = None
        if tag == "S":
            text = safe_repr(rec.data)
        elif tag == "A":
            name = rec.data
            crc = next(crcs)
            t = tensors.get(name)
            if t is None or name in used:
                raise FormatError(
                    f"the tree refers to tensor {_shown(name)} "
                    f"{'twice' if t is not None else 'that the file does not have'}. "
                    f"The file is corrupt."
                )
            used.add(name)
            tensor = name
            nbytes = t.end - t.begin
            text = f"{_dtype_name(t.code)}[{','.join(map(str, t.shape))}]  {nbytes:,} B  crc32 {crc:08x}"
        elif tag == "@":
            if rec.data not in finished or rec.data not in row_of:
                raise _bad(j, f"is an alias to record #{rec.data}, which is not finished")
            text = f"same object as {paths[row_of[rec.data]]}"
        else:
            text = _node_text(rec)
        row = len(out)
        if j in targets:
            row_of[j] = row
        out.append(Row(len(stack), parent, key, text, tensor))
        paths.add()
        if tag not in _LEAF_TAGS and rec.n:
            if len(stack) >= limits.max_depth:
                raise LimitError(
                    f"the tree is nested deeper than max_depth={limits.max_depth} at record "
                    f"#{j}. Pass limits=Limits(max_depth=...) to accept it."
                )
            stack.append([j, 0, row])
            continue
        if j in targets:
            finished.add(j)
        while True:
            if not stack:
                done = True
                break
            top = stack[-1]
            top[1] += 1
            if top[1] < recs[top[0]].n:
                break
            k = stack.pop()[0]
            if k in targets:
                finished.add(k)
    if not done:
        raise FormatError("the tree ends inside a node: records are missing. The file is corrupt.")
    unused = set(tensors) - used
    if unused:
        raise FormatError(
            f"the file has {len(unused)} tensor(s) the tree never refers to, e.g. "
            f"{_shown(sorted(unused)[0])}. The file is corrupt."
        )
    return out


def row_path(out: list[Row], i: int) -> str:
    """The keystr path of row ``i`` (``'the root'`` for the root)."""
    parts = []
    while i >= 0:
        parts.append(out[i].key)
        i = out[i].parent
    return "".join(reversed(parts)) or "the root"


class RowPaths:
    """The paths of a tree view's rows as messages show them: whole up to
    ``_LONG_PATH`` levels, deeper ones by both ends and the depth (as ``_path``), in
    time that does not grow with the depth, so that a line per row of a deep tree (an
    alias in ``inspect``, a difference in ``diff``) costs linear time in all.

    ``add()`` after each row appended to ``rows``.
    """

    __slots__ = ("_heads", "_rows")

    def __init__(self, rows: list[Row]) -> None:
        self._rows = rows
        # per row deeper than _PATH_END, its ancestor at that depth; None for the others
        # (an int per row would cost as much as the rows of a tree of tiny records)
        self._heads: list[int | None] = []
        for _ in rows:
            self.add()

    def add(self) -> None:
        heads = self._heads
        row = self._rows[len(heads)]
        if row.depth <= _PATH_END:
            heads.append(None)
        else:
            head = heads[row.parent]
            heads.append(row.parent if head is None else head)

    def __getitem__(self, i: int) -> str:
        rows = self._rows
        depth = rows[i].depth
        if depth <= _LONG_PATH:
            return row_path(rows, i)
        tail, j = [], i
        for _ in range(_PATH_END):
            tail.append(rows[j].key)
            j = rows[j].parent
        head = self._heads[i]
        assert head is not None  # depth > _LONG_PATH > _PATH_END
        return f"{row_path(rows, head)}...{''.join(reversed(tail))} (depth {depth})"


_DTYPE_NAMES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "U16": "uint16",
    "I16": "int16",
    "U32": "uint32",
    "I32": "int32",
    "U64": "uint64",
    "I64": "int64",
    "F16": "float16",
    "F32": "float32",
    "F64": "float64",
    "C64": "complex64",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",
}


def _dtype_name(code: str) -> str:
    return _DTYPE_NAMES.get(code, code)


def _node_text(rec: Rec) -> str:
    tag = rec.tag
    if tag == "N":
        return "None"
    if tag == "T":
        return f"tuple ({rec.n})"
    if tag == "L":
        return f"list ({rec.n})"
    if tag == "Q":
        return f"deque ({rec.n}, maxlen={rec.data})"
    if tag == "D":
        return f"dict ({rec.n})"
    if tag == "O":
        return f"OrderedDict ({rec.n})"
    if tag == "DD":
        factory = rec.data[2]
        return f"defaultdict ({rec.n}, {getattr(factory, '__name__', None)})"
    if tag == "C":
        name, version, _, kept = rec.data
        shown = f"{printable(name)} v{version}"
        return shown + (f"  kept: {', '.join(map(printable, kept))}" if kept else "")
    return f"{printable(rec.data[0])} (register_node, {rec.data[1]} children)"
