"""Flatten and unflatten (JAX): leaves plus an immutable ``Structure``, and key paths.

This stage runs flatten's walk (``_engine._flat.flatten_records``) and wraps its
records in a ``Structure`` (``_structure``); it never maps functions over leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from containers._engine._core import UNSET, _Unset
from containers._engine._flat import flatten_records
from containers._errors import StructureError
from containers._paths import KeyPath
from containers._record_paths import PATHS_CONTEXT, ranked_paths
from containers._records import C_BUILD_CONTEXT
from containers._records import build as _build  # noqa: F401 - the tests' plain twin
from containers._structure import (
    Structure,
    _restore,  # noqa: F401 - pickles made before it moved
)
from containers._where import leaves_where
from containers.filters import Filter

__all__ = [
    "C_BUILD_CONTEXT",
    "PATHS_CONTEXT",
    "Structure",
    "flatten",
    "flatten_with_path",
    "leaves",
    "leaves_with_path",
    "ranked_paths",
    "structure",
    "unflatten",
]

T = TypeVar("T")
IsLeaf = Callable[[Any], bool] | None


def flatten(
    tree: T, /, *, is_leaf: IsLeaf = None, none_is_leaf: bool = False
) -> tuple[list[Any], Structure[T]]:
    """Split a tree into its leaves (depth-first, children in order) and its structure.

    ``is_leaf`` is OR-ed with the natural leaf test (JAX): where it returns True the
    value is a leaf even if it is a node. ``None`` is a node with no children unless
    ``none_is_leaf=True``. Shared objects are not de-duplicated.

    Examples:
        >>> import containers as ct
        >>> leaves, s = ct.flatten({"b": (1, 2), "a": None, "c": [3]})
        >>> leaves
        [1, 2, 3]
        >>> ct.unflatten(s, ["x", "y", "z"])
        {'b': ('x', 'y'), 'a': None, 'c': ['z']}
        >>> ct.flatten([None, 1], none_is_leaf=True)[0]
        [None, 1]

    Args:
        tree: Any tree.
        is_leaf: Extra leaf test, called on every value before it is looked inside.
        none_is_leaf: Treat ``None`` as a leaf.

    Returns:
        ``(leaves, structure)``; ``structure.unflatten(leaves)`` rebuilds the tree.

    Raises:
        StructureError: The tree contains a reference cycle (the message names it).
    """
    records: list[Any] = []
    leaves = flatten_records(tree, is_leaf, none_is_leaf, "flatten", records, snapshot=True)
    return leaves, Structure(tuple(records), len(leaves))


def structure(tree: T, /, *, is_leaf: IsLeaf = None, none_is_leaf: bool = False) -> Structure[T]:
    """Return the structure of ``tree`` (``flatten(tree)[1]``).

    Examples:
        >>> import containers as ct
        >>> ct.structure({"a": 1, "b": (2, 3)}) == ct.structure({"b": ("x", "y"), "a": 0})
        True
    """
    return flatten(tree, is_leaf=is_leaf, none_is_leaf=none_is_leaf)[1]


def unflatten(structure: Structure[Any], leaves: Sequence[Any], /) -> Any:
    """Rebuild a tree from a structure and its leaves (``structure.unflatten``).

    Examples:
        >>> import containers as ct
        >>> leaves, s = ct.flatten([1, (2, 3)])
        >>> ct.unflatten(s, [v * 10 for v in leaves])
        [10, (20, 30)]
        >>> ct.unflatten(s, [1, 2])
        Traceback (most recent call last):
        ...
        containers.StructureError: unflatten: the structure has 3 leaves but 2 were given. Pass exactly one value per leaf, in the order flatten returned them.

    Raises:
        StructureError: ``leaves`` has the wrong length.
    """
    if not isinstance(structure, Structure):
        raise StructureError(
            f"unflatten: the first argument must be a Structure (from flatten or "
            f"structure), got {type(structure).__qualname__}. The order is unflatten(structure, leaves)."
        )
    return structure.unflatten(leaves)


def leaves(
    tree: Any,
    /,
    *,
    is_leaf: IsLeaf = None,
    none_is_leaf: bool = False,
    where: Filter | _Unset = UNSET,
) -> list[Any]:
    """Return the leaves of ``tree`` in flatten order.

    ``where=filter`` (``containers.filters``) keeps only the leaves that match it,
    called with each leaf's key path.

    Examples:
        >>> import containers as ct
        >>> ct.leaves({"b": [1, 2], "a": 0, "c": None})
        [0, 1, 2]
        >>> ct.leaves([(1, 2), 3], is_leaf=lambda v: isinstance(v, tuple))
        [(1, 2), 3]
        >>> ct.leaves({"w": 1.0, "n": 2}, where=float)
        [1.0]

    Raises:
        StructureError: The tree contains a reference cycle.
    """
    if where is not UNSET:
        return leaves_where(tree, where, is_leaf, none_is_leaf)
    return flatten_records(tree, is_leaf, none_is_leaf, "leaves", None)


def flatten_with_path(
    tree: T, /, *, is_leaf: IsLeaf = None, none_is_leaf: bool = False
) -> tuple[list[tuple[KeyPath, Any]], Structure[T]]:
    """Like ``flatten``, with each leaf paired with its key path.

    Examples:
        >>> import containers as ct
        >>> pairs, _ = ct.flatten_with_path({"a": [1, 2], "b": 3})
        >>> [(ct.keystr(p), v) for p, v in pairs]
        [("['a'][0]", 1), ("['a'][1]", 2), ("['b']", 3)]
    """
    leaves, s = flatten(tree, is_leaf=is_leaf, none_is_leaf=none_is_leaf)
    return list(zip(s.paths(), leaves)), s


def leaves_with_path(
    tree: Any, /, *, is_leaf: IsLeaf = None, none_is_leaf: bool = False
) -> list[tuple[KeyPath, Any]]:
    """The ``(path, leaf)`` pairs of ``tree``, in flatten order.

    Examples:
        >>> import containers as ct
        >>> [ct.keystr(p) for p, _ in ct.leaves_with_path([{"w": 1}, 2])]
        ["[0]['w']", '[1]']
    """
    return flatten_with_path(tree, is_leaf=is_leaf, none_is_leaf=none_is_leaf)[0]
