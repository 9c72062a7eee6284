"""Decode flat records back into a tree, applying schema evolution.

This stage rebuilds a tree from the records ``_recparse`` validated, as a client of
``_records.RecordCursor`` (the one walk over records, which also builds the paths its
messages name), or, for a tree of builtins, by ``Structure.unflatten``; types come
from the registry by name and nothing else; fields are fitted to today's classes by
``_evolve``. It never reads bytes itself: ``_format`` hands it the parsed metadata and
the arrays. The names of ``_recparse`` and ``_rows`` (the tree view) are re-exported
here.
"""

from __future__ import annotations

import functools
import operator
from collections import deque
from collections.abc import Callable, Sequence
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
from containers._records import CLOSE, OPEN, RecordCursor
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
from containers._serialize import _evolve
from containers._serialize._evolve import Default, Problem, check_version, evolve, schema_message
from containers._serialize._limits import Limits
from containers._serialize._recparse import (
    _TYPES,
    Rec,
    Records,
    _bad,
    _records_strict,
    _shown,
    parse_records,
    printable,
)
from containers._serialize._rows import (
    Row,
    RowPaths,
    _row_keys,
    dtype_name,
    file_cursor,
    row_path,
    rows,
)

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
    order = name_order(records.names, arrays)
    in_order, clean = order is True, order is not None
    if clean and records.columns is not None and records.columns[1] is not None:
        try:
            return _build_columns(records.columns, arrays, in_order)
        except Exception:  # a container's unflatten raised: record by record says where
            pass
    shared: dict[int, Any] = {}  # record index -> value, for arrays and mutable nodes
    used: set[str] = set()
    problems: list[Problem] = []
    # per open node (the cursor's frames, one to one): its kind (None for a builtin)
    # and its values so far
    kinds: list[Any] = []
    # per class record seen, by (tag, name, version or count): its kind and exact's
    classes: dict[tuple[str, str, int], tuple[NodeKind, Any]] = {}
    outs: list[list[Any]] = []
    result: Any = None
    max_depth = limits.max_depth
    targets = records.targets
    cursor = file_cursor(recs, _row_keys)
    step, leaf_records = cursor.step, cursor.leaf_records
    # The path of the record at hand, for messages: built only when one is written.
    where = cursor.shown_path
    context = (arrays, clean, used, shared, targets, cursor)
    value: Any
    while (event := step()) is not None:
        j = cursor.index
        rec = cursor.record
        if event == OPEN:
            tag = rec.tag
            kind: Any = None  # a NodeKind, or (kind, number of children): see exact
            if tag in ("C", "R"):
                data = rec.data
                key = (tag, data[0], data[1])
                known = classes.get(key)
                if known is None:  # a class's first record: its checks, once
                    kind = _kind_for(data[0], tag, where)
                    if tag == "C":
                        check_version(kind.spec, data[1], where)
                    known = classes[key] = (kind, _evolve.exact(kind, data[1]))
                kind, exact = known
                if exact is not None and data[2] == exact[1] and data[3] == exact[2]:
                    kind = exact[0]
            n = rec.n
            out: list[Any] = []
            kinds.append(kind)
            outs.append(out)
            if n:
                if len(outs) > max_depth:
                    raise LimitError(
                        f"the tree is nested deeper than max_depth={max_depth} at record "
                        f"#{j}. Pass limits=Limits(max_depth=...) to accept it."
                    )
                # its first values, while they are leaf records: at once (all of a
                # container of arrays)
                run = leaf_records()
                if run:
                    out += _leaf_values(run, j + 1, 0, *context)
            continue
        if event == CLOSE:  # the node's values are all read
            kind = kinds.pop()
            if type(kind) is tuple:  # a container whose fields are today's: no evolve
                value = _unflatten_exact(kind, outs.pop(), where)
                if j in targets:
                    shared[j] = value
            else:
                value = _make(recs, j, outs.pop(), kind, where, problems, shared, targets)
        else:  # LEAF: a root that is a leaf record
            tag = rec.tag
            if tag == "S":
                value = rec.data
            elif tag == "A":
                value = _array(rec.data, j, arrays, clean, used, shared, targets, where)
            else:
                value = _alias(rec.data, j, shared)
        if not outs:
            result = value
            continue
        out = outs[-1]
        out.append(value)
        # the leaf records that follow it in its parent: at once
        first = cursor.next_record
        run = leaf_records()
        if run:
            out += _leaf_values(run, first, len(out), *context)
    if not cursor.complete:
        raise FormatError(
            f"the tree ends inside a node at {where()}: records are missing. The file is corrupt."
        )
    if cursor.next_record < len(recs):
        raise _bad(cursor.next_record, "follows the end of the tree")
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


def _unflatten_exact(exact: tuple[NodeKind, int], out: list[Any], where: Callable[[], str]) -> Any:
    """The container of ``out`` (its children, then its kept values): what ``_make``
    makes of a record ``_evolve.exact`` vouches for, without ``evolve``."""
    kind, nk = exact
    try:
        return kind.unflatten(tuple(out[nk:]), tuple(out[:nk]))
    except Exception as err:  # a reset field's factory is user code
        raise SchemaError(
            f"rebuilding {type_name(kind.spec.cls)} at {where()} failed: "  # type: ignore[union-attr]
            f"{type(err).__name__}: {err}."
        ) from None


def _array(
    name: str,
    j: int,
    arrays: dict[str, Any],
    clean: bool,
    used: set[str],
    shared: dict[int, Any],
    targets: set[int],
    where: Callable[[], str],
) -> Any:
    """The array of the array record ``j`` (tensor ``name``), checked to be in the file
    and named once, unless ``clean`` (every tensor named exactly once, checked
    already); kept in ``shared`` where an alias needs it."""
    if clean:
        value = arrays[name]
        if j in targets:
            shared[j] = value
        return value
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
    value = shared[j] = arrays[name]
    return value


def _alias(k: int, j: int, shared: dict[int, Any]) -> Any:
    """The value of the finished record ``k`` that the alias record ``j`` points to."""
    if k not in shared:
        raise _bad(
            j,
            f"is an alias to record #{k}, which is not finished (an alias to an "
            f"enclosing node would make a cycle)",
        )
    return shared[k]


def _leaf_values(
    run: Sequence[Rec],
    first: int,
    child: int,
    arrays: dict[str, Any],
    clean: bool,
    used: set[str],
    shared: dict[int, Any],
    targets: set[int],
    cursor: RecordCursor,
) -> list[Any]:
    """The values of a node's leaf records ``run`` (records ``first``, ``first + 1``,
    ..., its children ``child``, ``child + 1``, ...), taken at once
    (``RecordCursor.leaf_records``): a comprehension when all are array records of a
    clean file (their names looked up in C) or scalars, else record by record, as the
    cursor's steps would give them."""
    if len(run) == 1:  # one leaf between nodes (a field of a container of nodes)
        tag, _, data = run[0]
        if tag == "S":
            return [data]
        if tag == "A" and clean and first not in targets:
            return [arrays[data]]
    tags = set(map(_TAG, run))
    if tags == _SCALAR_TAGS:
        return list(map(_DATA, run))
    if clean and "@" not in tags and targets.isdisjoint(range(first, first + len(run))):
        if tags == _ARRAY_TAGS:
            return list(map(arrays.__getitem__, map(_DATA, run)))
        get = arrays.__getitem__
        return [get(data) if tag == "A" else data for tag, _, data in run]
    out = []
    for i, rec in enumerate(run):
        j = first + i
        tag = rec.tag
        if tag == "S":
            out.append(rec.data)
        elif tag == "A":
            where = functools.partial(cursor.shown_path, str, child + i)
            out.append(_array(rec.data, j, arrays, clean, used, shared, targets, where))
        else:
            out.append(_alias(rec.data, j, shared))
    return out


_TAG = operator.itemgetter(0)  # Rec.tag
_DATA = operator.itemgetter(2)  # Rec.data
_SCALAR_TAGS = {"S"}
_ARRAY_TAGS = {"A"}


def name_order(names: list[str], arrays: dict[str, Any]) -> bool | None:
    """Whether a file's tree names each of its tensors once (``names``: the array
    records' names, in record order; ``arrays``: name -> array, in the file's order):
    True in the file's order, False in another; None if not each once (``build`` says
    which, record by record). The file's order is compared first: a list comparison of
    the header's own name objects (``_scan.records(known=)``), no name hashed."""
    if len(names) != len(arrays):
        return None
    if names == list(arrays):
        return True
    return False if arrays.keys() == set(names) else None


def _build_columns(columns: list[Any], arrays: dict[str, Any], in_order: bool) -> Any:
    """The tree of a file whose records ``containers._scan`` also gave as a
    ``Structure``'s (a tree of dicts, lists, tuples, Nones, arrays, scalars and declared
    containers at today's fields with scalar kept values, ``_evolve.exact_kind``;
    checked whole: one root, no record after it, not deeper than ``max_depth``): its
    leaves (``column_leaves``) rebuilt by ``Structure.unflatten`` (the compiled
    ``_records.build`` where the extension is built), as ``build`` would rebuild them
    record by record (tests/test_serialize_fuzz.py and tests/test_records.py compare
    the two). Should a container's unflatten raise (a field's factory is user code),
    ``build`` goes record by record, which says where."""
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
    arrays go to their places in that order, no name looked up: at once when they are
    consecutive leaves (``at`` increases, so its ends tell), as in a dict of arrays
    (benchmarks/serialization.py, "many": 100,000 arrays)."""
    _, leaves, at = columns
    columns[1] = None
    if in_order and len(at) == len(arrays):
        if at and at[-1] - at[0] == len(at) - 1:
            leaves[at[0] : at[-1] + 1] = arrays.values()
            return leaves, at
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
