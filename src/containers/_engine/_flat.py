"""Flatten's walk: leaves plus pre-order node records, plain and accelerated.

This stage emits what ``Structure`` is made of: the leaves and one record
``(kind, aux, n, mask)`` per node in pre-order. ``flatten_plain`` is a client of
``_core.traverse``; ``flatten_fast`` is its acceleration for trees without
``is_leaf``, recursive down to MAX_FAST_DEPTH and in loops in C where a node's
children allow; it is itself the plain twin of ``_speedups.flatten``, the same walk
in C, used where the extension is built. ``flatten_records`` runs one of them. It
never builds a Structure or maps a function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from itertools import chain, repeat
from operator import attrgetter, is_, itemgetter
from typing import Any

from containers._engine import _fast
from containers._engine._core import MAX_FAST_DEPTH, Cursor, Frame, traverse
from containers._errors import ContainerDefinitionError, StructureError, not_callable_error
from containers._paths import where
from containers._registry import (
    DICT,
    KINDS,
    LEAF_TYPES,
    LEAF_TYPES_NONE,
    LIST,
    TUPLE,
    NodeKind,
    kind_of,
)

__all__ = ["MIN_RUN", "flatten_fast", "flatten_once", "flatten_plain", "flatten_records"]

IsLeaf = Callable[[Any], bool] | None


def flatten_plain(
    root: Any,
    leaves: list[Any],
    records: list[Any],
    leaf_types: set[type],
    is_leaf: IsLeaf,
    op: str,
    snapshot: bool = False,
) -> None:
    """Append the leaves and pre-order records of ``root`` to ``leaves`` and ``records``.

    A value is a leaf if ``is_leaf`` says so, its type is in ``leaf_types`` or it is
    no node. A node's record is filled when it is left; each child's result in
    ``frame.out`` says whether it is a node, which makes the record's mask. With
    ``snapshot`` (records for a Structure), nodes are read by their kind's
    ``flatten_snapshot``, which snapshots mutable kept values.
    """

    kinds_get = KINDS.get

    def visit(cursor: Cursor, value: Any, ys: Sequence[Any]) -> tuple[bool, Any]:
        if (is_leaf is not None and is_leaf(value)) or type(value) in leaf_types:
            leaves.append(value)
            return True, False
        kind = kinds_get(type(value)) or cursor.kind_of(value)
        if kind is None:
            leaves.append(value)
            return True, False
        try:
            kids, aux = kind.flatten_snapshot(value) if snapshot else kind.flatten(value)
        except StructureError as err:
            if err.path is not None:
                raise
            path = cursor.path()
            raise StructureError(f"{op}: at {where(path)}: {err}", path) from None
        cursor.push(value, kind, kids, aux, state=len(records))
        records.append(None)
        return False, None

    def leave(cursor: Cursor, frame: Frame) -> bool:
        # out holds True for each node child: the mask is None (all leaves), True (all
        # nodes) or the tuple.
        out = frame.out
        mask = None if True not in out else True if False not in out else tuple(out)
        records[frame.state] = (frame.kind, frame.aux, len(out), mask)
        return True

    traverse(visit, leave, root, op=op)


def flatten_fast(
    x: Any,
    kind: NodeKind,
    leaf_types: set[type],
    records: list[Any] | None,
    met: list[Any] | None = None,
    snapshot: bool = False,
) -> list[Any]:
    """Recursive flatten for shallow trees; subtrees past MAX_FAST_DEPTH go iterative.

    Appends the pre-order records to ``records``, or, when it is ``None`` (``leaves``),
    collects the leaves only; and every node it meets to ``met`` if given, with
    ``HANDED_OVER`` for a subtree it hands to the plain walk (``flatten_once``). With
    ``snapshot`` (records for a Structure), nodes are read by their kind's
    ``flatten_snapshot`` (``flatten_plain``).
    """
    leaves: list[Any] = []
    lappend = leaves.append
    lextend = leaves.extend
    kinds_get = KINDS.get
    all_leaves = leaf_types.issuperset  # of map(type, children): a loop in C
    sequences: dict[type, NodeKind] = {tuple: TUPLE, list: LIST}
    sequences_get = sequences.get

    def rec(x: Any, kind: NodeKind, depth: int) -> None:
        if met is not None:
            met.append(x)
        if kind is TUPLE or kind is LIST:
            kids, aux = x, None
        elif snapshot:
            kids, aux = kind.flatten_snapshot(x)
        else:
            kids, aux = kind.flatten(x)
        if all_leaves(map(type, kids)):
            # All children are leaves: one extend, one record (benchmarks/run.py, W1, W5).
            lextend(kids)
            if records is not None:
                records.append((kind, aux, len(kids), None))
            return
        if depth > MAX_FAST_DEPTH:
            if met is not None:
                met.append(HANDED_OVER)
            _deep(x, leaves, records, leaf_types, snapshot)
            return
        if len(kids) >= MIN_RUN and _flatten_run(
            kind, aux, kids, leaf_types, lextend, records, snapshot
        ):
            if met is not None:
                met.extend(kids)
            return
        if records is not None:
            slot = len(records)
            records.append(None)
        nodes = 0  # the mask is rebuilt only for a node mixing leaves and nodes
        for kid in kids:
            tk = type(kid)
            if tk in leaf_types:
                lappend(kid)
                continue
            k = sequences_get(tk)
            if k is not None:
                # A tuple or list of leaves, done here: no call (benchmarks/run.py, W1).
                # Two to four children are tested inline: creating map(type, kid) alone
                # costs more than four tests.
                n = len(kid)
                if n == 4:
                    a, b, c, d = kid
                    is_leaves = (
                        type(a) in leaf_types
                        and type(b) in leaf_types
                        and type(c) in leaf_types
                        and type(d) in leaf_types
                    )
                elif n == 2:
                    a, b = kid
                    is_leaves = type(a) in leaf_types and type(b) in leaf_types
                elif n == 3:
                    a, b, c = kid
                    is_leaves = (
                        type(a) in leaf_types and type(b) in leaf_types and type(c) in leaf_types
                    )
                else:
                    is_leaves = all_leaves(map(type, kid))
                if is_leaves:
                    lextend(kid)
                    if met is not None:
                        met.append(kid)
                    if records is not None:
                        records.append((k, None, n, None))
                    nodes += 1
                    continue
            k = kinds_get(tk) or kind_of(kid)
            if k is None:
                lappend(kid)
            else:
                rec(kid, k, depth + 1)  # noqa: F821 - deleted only after the walk
                nodes += 1
        if records is not None:
            mask = (
                None
                if not nodes
                else True
                if nodes == len(kids)
                else tuple(
                    type(kid) not in leaf_types and kind_of(kid) is not None for kid in kids
                )
            )
            records[slot] = (kind, aux, len(kids), mask)

    rec(x, kind, 0)
    del rec  # a recursive closure is a reference cycle: free it (and records) now
    return leaves


#: What ``flatten_fast`` puts in ``met`` for a subtree handed to the plain walk.
HANDED_OVER = object()


def flatten_once(
    x: Any, kind: NodeKind, leaf_types: set[type], records: list[Any], immutable: set[type]
) -> tuple[list[Any], bool]:
    """``flatten_fast``'s leaves, and whether no value that fmap's identity cache keeps
    (a node of a ``mutable`` kind, a leaf whose type is not in ``immutable``) was met
    twice: then the records rebuilt with ``f`` of each leaf are ``fmap(f, x)`` (the
    executor maps' one walk, ``_parallel``). A subtree handed to the plain walk is not
    looked at: False. The plain twin of ``_speedups.flatten`` with ``immutable``."""
    nodes: list[Any] = []
    leaves = flatten_fast(x, kind, leaf_types, records, met=nodes)
    if any(node is HANDED_OVER for node in nodes):
        return leaves, False
    cached = (
        []
        if immutable.issuperset(map(type, leaves))  # a loop in C
        else [leaf for leaf in leaves if type(leaf) not in immutable]
    )
    for node in nodes:
        k = KINDS.get(type(node)) or kind_of(node)
        if k is None or k.mutable:
            cached.append(node)
    return leaves, len(set(map(id, cached))) == len(cached)


#: The fewest nodes worth the loops in C of a run (a list of layers): below it, their
#: setup costs more than the node-by-node loop saves (benchmarks/run.py, W3: tuples of
#: 4 layers).
MIN_RUN = 8


def _flatten_run(
    kind: NodeKind,
    aux: Any,
    kids: Sequence[Any],
    leaf_types: set[type],
    lextend: Callable[[Any], None],
    records: list[Any] | None,
    snapshot: bool = False,
) -> bool:
    """Flatten a node whose children are nodes of one kind, each with leaf children
    only (a list of layers), in loops in C but for the kind's ``flatten`` (its
    ``flatten_snapshot`` with ``snapshot``) (benchmarks/split.py); False, having
    appended nothing, if they are not."""
    t = type(kids[0])
    k = KINDS.get(t)
    if k is None or k is TUPLE or k is LIST or t in leaf_types:
        return False
    flatten = k.flatten_snapshot if snapshot else k.flatten
    head = flatten(kids[0])
    if not leaf_types.issuperset(map(type, head[0])):
        return False
    if not all(map(is_, map(type, kids), repeat(t))):
        return False
    spec = k.spec
    auxes: Any
    if spec is not None and len(spec.children) > 1 and not (spec.keep and snapshot):
        # A container's flatten reads its fields (_codegen.plain_flatten): the same
        # reads by attrgetter run in C, a third of flatten's time for a list of layers
        # (benchmarks/split.py), and its kept values too where records want them (a
        # template's, load(like=)). An unset field is reported by the node-by-node
        # path. flatten_snapshot snapshots kept values: the kind's own, node by node.
        try:
            lists = list(map(attrgetter(*spec.children), kids))
            auxes = _kept(spec.keep, kids) if spec.keep and records is not None else repeat(())
        except AttributeError:
            return False
    else:
        flat = [head, *map(flatten, kids[1:])]
        lists = list(map(itemgetter(0), flat))
        auxes = map(itemgetter(1), flat)
    if not leaf_types.issuperset(map(type, chain.from_iterable(lists))):
        return False
    if records is not None:
        records.append((kind, aux, len(kids), True))
        records += zip(repeat(k), auxes, map(len, lists), repeat(None))
    lextend(chain.from_iterable(lists))
    return True


def _kept(keep: tuple[str, ...], kids: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Each of ``kids``' kept values, the tuple its kind's ``flatten`` gives (``keep``:
    its spec's kept field names)."""
    get = attrgetter(*keep)
    return list(map(get, kids)) if len(keep) > 1 else list(zip(map(get, kids)))


def _deep(
    x: Any,
    leaves: list[Any],
    records: list[Any] | None,
    leaf_types: set[type],
    snapshot: bool = False,
) -> None:
    """The hand-over of a subtree past MAX_FAST_DEPTH to the plain walk (``flatten_fast``
    and its compiled twin); with ``snapshot``, for a Structure's records (kept values
    snapshotted)."""
    sink = [] if records is None else records
    flatten_plain(x, leaves, sink, leaf_types, None, "flatten", snapshot)


def _run(
    kind: NodeKind,
    aux: Any,
    kids: Sequence[Any],
    leaf_types: set[type],
    leaves: list[Any],
    records: list[Any] | None,
    snapshot: bool = False,
) -> bool:
    """``_flatten_run`` for the compiled walk, which holds the leaves' list; with
    ``snapshot``, for a Structure's records (kept values snapshotted)."""
    return _flatten_run(kind, aux, kids, leaf_types, leaves.extend, records, snapshot)


#: What the compiled twin of ``flatten_fast`` (``_speedups.flatten``) reads besides the
#: tree: the registry's kinds by exact type, ``kind_of``, the kinds it walks itself,
#: the handovers to Python, the limits, and the name of the kinds' attribute it reads
#: a node with; ``C_SNAPSHOT_CONTEXT`` is its twin for a Structure's records.
C_CONTEXT = (KINDS, kind_of, TUPLE, LIST, DICT, _deep, _run, MIN_RUN, MAX_FAST_DEPTH, "flatten")
C_SNAPSHOT_CONTEXT = (
    KINDS,
    kind_of,
    TUPLE,
    LIST,
    DICT,
    partial(_deep, snapshot=True),
    partial(_run, snapshot=True),
    MIN_RUN,
    MAX_FAST_DEPTH,
    "flatten_snapshot",
)


_IS_LEAF_USAGE = "Pass is_leaf=a predicate value -> bool that makes more values leaves, or None"


def flatten_records(
    x: Any,
    is_leaf: IsLeaf,
    none_is_leaf: bool,
    op: str,
    records: list[Any] | None,
    *,
    snapshot: bool = False,
) -> list[Any]:
    """The leaves of ``x``; its pre-order records go to ``records`` unless it is None.

    With ``snapshot`` (the records of a Structure), nodes are read by their kind's
    ``flatten_snapshot``: mutable kept values are snapshotted; other callers (the leaf
    paths, save) read kept values as they are.

    Without ``is_leaf``, ``flatten_fast`` runs (``_speedups.flatten``, its compiled
    twin, where the extension is built); should it meet an error (a cycle, an
    undeclared subclass, an unset field), ``flatten_plain`` runs again from the root
    and raises it with its path.
    """
    if is_leaf is not None and not callable(is_leaf):
        raise not_callable_error(is_leaf, op, "is_leaf", _IS_LEAF_USAGE)
    leaf_types = LEAF_TYPES_NONE if none_is_leaf else LEAF_TYPES
    sink = [] if records is None else records
    if is_leaf is None and type(x) not in leaf_types:
        try:
            kind = kind_of(x)
            if kind is not None:
                speedups = _fast._speedups  # read per call: tests switch it
                if speedups is not None:
                    context = C_SNAPSHOT_CONTEXT if snapshot else C_CONTEXT
                    found: list[Any] = speedups.flatten(x, kind, leaf_types, records, context)
                    return found
                return flatten_fast(x, kind, leaf_types, records, None, snapshot)
        except (StructureError, ContainerDefinitionError):
            sink.clear()
    leaves: list[Any] = []
    flatten_plain(x, leaves, sink, leaf_types, is_leaf, op, snapshot)
    return leaves
