"""Decode flat records back into a tree, applying schema evolution.

This stage rebuilds a tree from the records ``_recparse`` validated, with an explicit
stack, the pattern of ``_records.build``; types come from the registry by name and
nothing else; fields are fitted to today's classes by ``_evolve``. It never reads
bytes itself: ``_format`` hands it the parsed metadata and the arrays. The names of
``_recparse`` and ``_rows`` (the tree view) are re-exported here.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from containers._errors import (
    FormatError,
    LimitError,
    SchemaError,
    SerializationError,
    UnknownTypeError,
    type_name,
)
from containers._paths import shorten
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
from containers._serialize._evolve import Default, Problem, check_version, evolve, schema_message
from containers._serialize._limits import Limits
from containers._serialize._recparse import (
    _TYPES,
    Rec,
    Records,
    _bad,
    _records_strict,
    _shown,
    key_of,
    parse_records,
    printable,
)
from containers._serialize._rows import Row, RowPaths, dtype_name, row_path, rows

__all__ = [
    "Rec",
    "Records",
    "Row",
    "RowPaths",
    "_records_strict",
    "build",
    "check_root",
    "dtype_name",
    "parse_records",
    "printable",
    "row_path",
    "rows",
    "schema_message",
]


def _path(recs: list[Rec], stack: list[list[Any]]) -> str:
    """The path of the value that the open nodes of ``stack`` wait for, for messages.

    Built only when a message needs it, so decoding stays linear in the depth, and
    shown by the one rule for paths (``_paths.shorten``: past ``LONG_PATH`` levels only
    both ends), so that a message about every node of a deep tree costs linear time.
    """

    def keys(start: int, stop: int) -> str:
        return "".join([key_of(recs[fr[0]], len(fr[1])) for fr in stack[start:stop]])

    return shorten(len(stack), keys) or "the root"


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
    # When every tensor is referenced exactly once (checked here, in C), array records
    # need no per-record bookkeeping, and only alias targets are remembered
    # (benchmarks/serialization.py, "many": 100,000 array records).
    # The tree lists the tensors in the file's order when that order is the tree's (as
    # save writes a tree of one dtype): a list comparison, no name hashed.
    names = records.names
    in_order = len(names) == len(arrays) and names == list(arrays)
    clean = in_order or (len(names) == len(arrays) and arrays.keys() == set(names))
    if clean and records.columns is not None and records.columns[1] is not None:
        return _build_columns(records.columns, arrays, in_order)
    shared: dict[int, Any] = {}  # record index -> value, for arrays and mutable nodes
    used: set[str] = set()
    problems: list[Problem] = []
    stack: list[list[Any]] = []  # [record index, values so far, kind or None]
    result: Any = None
    done = False
    max_depth = limits.max_depth
    # The path of the record at hand, for messages: built only when one is written.
    where = functools.partial(_path, recs, stack)
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
                    check_version(kind.spec, rec.data[1], where)  # type: ignore[arg-type]
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


def _build_columns(columns: list[Any], arrays: dict[str, Any], in_order: bool) -> Any:
    """The tree of a file whose records ``containers._scan`` also gave as a
    ``Structure``'s (a tree of dicts, lists, tuples, Nones, arrays and scalars, checked
    whole: one root, no record after it, not deeper than ``max_depth``): its leaves
    (``column_leaves``) rebuilt by ``Structure.unflatten`` (the compiled
    ``_records.build`` where the extension is built), as ``build`` would rebuild them
    record by record (tests/test_serialize_fuzz.py compares the two)."""
    from containers._structure import Structure

    leaves, _ = column_leaves(columns, arrays, in_order)
    return Structure(tuple(columns[0]), len(leaves)).unflatten(leaves)


def column_leaves(
    columns: list[Any], arrays: dict[str, Any], in_order: bool
) -> tuple[list[Any], list[int]]:
    """The leaves of ``Records.columns``, each tensor's name replaced by its array, and
    the positions of the arrays.

    The leaves are filled in place and taken out of ``columns`` (a copy would cost a
    slot per leaf, a tenth of a tree of floats' file): a second build of the same
    records goes record by record. When the tree names the tensors in the file's order
    (``in_order``: as save writes a tree of one dtype) and no alias repeats one, the
    arrays go to their places in that order, no name looked up."""
    _, leaves, at = columns
    columns[1] = None
    if in_order and len(at) == len(arrays):
        for k, value in zip(at, arrays.values()):
            leaves[k] = value
    else:
        get = arrays.__getitem__
        for k in at:
            leaves[k] = get(leaves[k])
    return leaves, at


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
            fitted = evolve(spec, version, children, meta, where, problems)
            if fitted is None:
                return _PLACEHOLDER
            ch, mt = fitted
            args = [v.value if isinstance(v, Default) else v for v in ch.values()]
            kv = [v.value if isinstance(v, Default) else v for v in mt.values()]
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
