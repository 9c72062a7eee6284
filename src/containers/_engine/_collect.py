"""fcollect's walks: ``collect`` on the one traversal, and its acceleration.

``collect`` lists a tree's values in pre-order as a client of ``_core.traverse`` (any
depth; the cursor's cycle check and paths). ``fast_collect`` does the same through a
recursive closure down to MAX_FAST_DEPTH; a deeper subtree, a reference cycle and an
undeclared subclass send the whole tree to ``collect``, its plain twin, which reports
the cycle and the subclass with their paths. It owns no semantics of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from containers._engine._core import MAX_FAST_DEPTH, Cursor, Memo, leave_nothing, traverse
from containers._errors import ContainerDefinitionError
from containers._registry import (
    IMMUTABLE_LEAVES,
    KINDS,
    LEAF_TYPES,
    LIST,
    TUPLE,
    cacheable,
    kind_of,
)

__all__ = ["collect", "fast_collect"]


def collect(x: Any, exclude: Callable[[Any], bool] | None) -> list[Any]:
    """Every node and leaf of ``x`` in depth-first pre-order, mutable ones once.

    An excluded value and its subtree are dropped. A node that contains itself raises
    ``StructureError`` with its path.
    """
    out: list[Any] = []
    seen = Memo()  # the one identity table: here a set of the objects met

    def visit(cursor: Cursor, value: Any, yvals: Sequence[Any]) -> tuple[bool, Any]:
        if exclude is not None and exclude(value):
            return True, None
        kind = cursor.kind_of(value)
        if kind is not None:
            cursor.check(value)
        if cacheable(value):
            if id(value) in seen.results:
                return True, None
            seen.store(value, None)
        out.append(value)
        if kind is None:
            return True, None
        kids, aux = kind.flatten(value)
        cursor.push(value, kind, kids, aux)
        return False, None

    traverse(visit, leave_nothing, x, op="fcollect")
    return out


class _Redo(Exception):
    """Raised inside ``fast_collect``: let ``collect`` do this tree (a subtree deeper
    than MAX_FAST_DEPTH, which a reference cycle also makes)."""


def fast_collect(x: Any) -> list[Any]:
    """fcollect(x) with nothing excluded, recursively; agrees with ``collect``.

    Speed (benchmarks/run.py, fcollect): each child's type is tested in the parent's
    loop, immutable leaves are appended at once, other leaves and mutable nodes go
    through ``seen``, the identity table (``Memo``), which keeps them alive. A mutable
    node is stored after its children, so that one met again inside itself is walked
    again: a reference cycle runs past MAX_FAST_DEPTH, as a deep subtree does, and
    the tree goes to ``collect``, which owns the cycle check (and reports it with its
    paths); an undeclared subclass goes there too (its error, with its path).
    """
    out: list[Any] = []
    append = out.append
    seen = Memo()
    # Written inline: the compiled table with its own store; the plain twin's dict by
    # hand, each object its own value, which keeps it alive (no call per object to the
    # keep-alive list: benchmarks/instructions.py, fcollect).
    results, store, plain = seen.results, seen.store, seen.keep_alive is not None
    kinds_get = KINDS.get
    immutable = IMMUTABLE_LEAVES
    leaf_types = LEAF_TYPES

    def rec(x: Any, kind: Any, depth: int) -> None:
        if depth > MAX_FAST_DEPTH:
            raise _Redo
        for kid in x if kind is TUPLE or kind is LIST else kind.flatten(x)[0]:
            t = type(kid)
            if t in immutable:
                append(kid)
                continue
            k = None if t in leaf_types else kinds_get(t) or kind_of(kid)
            if k is None:
                if t in immutable:  # a value type seen for the first time (kind_of)
                    append(kid)
                    continue
            elif not k.mutable:
                append(kid)
                rec(kid, k, depth + 1)  # noqa: F821 - deleted only after the walk
                continue
            key = id(kid)
            if key in results:
                continue
            append(kid)
            if k is not None:
                rec(kid, k, depth + 1)  # noqa: F821
            if plain:
                results[key] = kid
            else:
                store(kid, kid)

    try:
        rec([x], LIST, 0)
    except (_Redo, ContainerDefinitionError):
        return collect(x, None)  # finds the cycle or the subclass again, with its path
    finally:
        del rec  # a recursive closure is a reference cycle: free it (and seen) now
        seen.clear()
    return out
