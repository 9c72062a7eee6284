"""Where a walk's errors get their paths: the engine's own errors (``cycle_error``,
``mismatch_error``) raised as ``Relocate`` from a subtree an acceleration handed over,
and the note (``path_note``, ``trail_note``) that an error of user code gets, naming
the path of the value being mapped. Split from ``_core``, which raises them.
"""

from __future__ import annotations

import sys
from typing import Any

from containers._engine._loops import TRAIL
from containers._errors import ContainersError, StructureError
from containers._paths import Key, KeyPath, where
from containers._registry import kind_of

__all__ = [
    "Locate",
    "Relocate",
    "add_note",
    "cycle_error",
    "mismatch_error",
    "path_note",
    "trail_note",
]

_ORDINALS = ("first", "second", "third", "fourth", "fifth")


def _ordinal(i: int) -> str:
    return _ORDINALS[i] if i < len(_ORDINALS) else f"#{i + 1}"


class Relocate(Exception):
    """An error the engine itself found where it does not know the path: a fast path
    met a tree that does not fit, an undeclared subclass, or (through ``map_tree(...,
    relocate=True)`` on a subtree) a cycle. The public function that started the walk
    catches it and runs ``map_tree`` again from the root, which raises ``error`` with
    its full path.

    Only the engine raises it, so an error raised by ``f`` (or by a node type's own
    functions) is never mistaken for one and propagates unchanged; and it never leaves
    a public function, so an ``fmap`` called inside ``f`` cannot pass one to the outer
    call.
    """

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


class Locate(Exception):
    """Raised by a probe ``f`` to learn the key path of the value it was called on:
    ``traverse`` sets ``path`` as the exception passes (the executor maps find the
    path of their k-th call this way, by a walk that calls no user function ``f``)."""

    path: KeyPath | None = None


def path_note(op: str, path: KeyPath) -> str:
    """The note (PEP 678) added to an exception raised while mapping the value at ``path``."""
    return f"{op}: raised while mapping the value at {where(path)}"


def add_note(err: BaseException, note: str) -> None:
    """``err.add_note(note)``; on Python 3.10, which has no ``add_note``, the same
    ``__notes__`` list that PEP 678 defines (its tracebacks do not print it)."""
    if sys.version_info >= (3, 11):
        err.add_note(note)
    else:  # pragma: no cover (3.10)
        err.__notes__ = [*getattr(err, "__notes__", ()), note]


def trail_note(err: Exception, op: str, tree: Any) -> None:
    """At the top of a fast walk over ``tree``: give an error raised under it (by ``f``)
    the plain walk's note (``path_note``; a ``Locate``, its ``path``), the path built
    once from the trail its levels recorded as it unwound (``_loops.TRAIL``, innermost
    first: child indices, read from ``tree``, and keys: ``traverse``'s relative path of
    a handed-over subtree, or ``_pair``'s dict keys)."""
    trail = err.__dict__.pop(TRAIL, ())
    if isinstance(err, (ContainersError, Relocate)):
        return
    keys: list[Key] = []
    try:  # the keys of the indices, read from the tree as Frame.key reads them
        for step in reversed(trail):
            if type(step) is tuple:  # keys (innermost: no index follows)
                keys += step
                continue
            kind = kind_of(tree)
            kids, aux = kind.flatten(tree)  # type: ignore[union-attr] # None: except
            keys.append(kind.keys(aux, len(kids))[step])  # type: ignore[union-attr]
            tree = kids[step]
    except Exception:  # f changed the tree: no path to name
        return
    if isinstance(err, Locate):
        if err.path is None:
            err.path = tuple(keys)
    else:
        add_note(err, path_note(op, tuple(keys)))


def mismatch_error(op: str, path: KeyPath, *, tree_index: int, what: str) -> StructureError:
    """The error for tree ``tree_index`` (0-based) not fitting the first one at ``path``."""
    other = f"the {_ordinal(tree_index)}"
    return StructureError(
        f"{op}: trees differ at {where(path)}: {what.replace('{other}', other)}. "
        f"Every other tree must have the first tree's nodes and keys.",
        path,
    )


def cycle_error(op: str, path: KeyPath, first: KeyPath) -> StructureError:
    """The error for a node that contains itself."""
    return StructureError(
        f"{op}: the tree has a reference cycle: the object at {where(path)} is the same "
        f"object as its ancestor at {where(first)}. Trees must be acyclic; break the "
        f"cycle, or make the object a leaf (exclude=/is_leaf=, where the operation "
        f"takes them).",
        path,
    )
