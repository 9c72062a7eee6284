"""Flatten and unflatten (JAX): leaves plus an immutable ``Structure``, and key paths.

A Structure is a flat tuple of node records in pre-order, ``(kind, aux, n, mask)``:
``mask`` is ``None`` when all ``n`` children are leaves, ``True`` when all are nodes,
else a tuple of booleans (True = node). Being flat, it compares, hashes, pickles and
rebuilds without recursion at any depth. This stage never maps functions over leaves.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, compress
from operator import itemgetter
from typing import Any, Generic, TypeVar

from containers._engine import _fast
from containers._engine._core import UNSET, Cursor, _Unset, leave_nothing, traverse
from containers._engine._flat import flatten_records
from containers._errors import StructureError, counted, short_repr, type_name
from containers._paths import KeyPath, where
from containers._records import (
    C_BUILD_CONTEXT,
    PATHS_CONTEXT,
    Record,
    ends,
    leaf_children,
    leaf_paths,
    ranked_paths,
    render,
)
from containers._records import build as _build
from containers._registry import (
    NodeKind,
    distinct_labels,
    kind_for_type,
    kind_of,
    label,
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
T_co = TypeVar("T_co", covariant=True)
IsLeaf = Callable[[Any], bool] | None


def _snapshot(records: tuple[Record, ...], force: bool = False) -> tuple[tuple[Record, ...], bool]:
    """``records`` with every unhashable kept value (a list, a dict, an array: equal by
    content, yet mutable) replaced by a deep copy, and whether there was one.

    A Structure is immutable and hashable: it must not change when the tree it came
    from does. Hashable kept values are kept as they are (their hash promises that
    their equality does not change). Only kinds with kept fields are looked at, found
    in one pass in C."""
    kept = {k for k in set(map(_KIND, records)) if k.spec is not None and k.spec.keep}
    if not kept:
        return records, False
    # The types of every kept value, gathered in C: usually str, numbers and None only
    # (a flatten of 1000 layers with a kept activation name costs no loop here).
    auxes = compress(map(_AUX, records), map(kept.__contains__, map(_KIND, records)))
    if not force and set(map(type, chain.from_iterable(auxes))) <= _ATOMIC:
        return records, False
    out = list(records)
    found = False
    for i, (kind, aux, n, mask) in enumerate(records):
        if kind.spec is None or not kind.spec.keep:
            continue
        values = list(aux)
        for j, value in enumerate(values):
            try:
                hash(value)
                continue
            except TypeError:
                pass
            found = True
            try:
                values[j] = copy.deepcopy(value)
            except Exception as err:
                raise StructureError(
                    f"the kept value {kind.spec.keep[j]!r} of a {type_name(kind.type)} is "
                    f"a {type_name(type(value))}, mutable and unhashable, which a "
                    f"Structure copies so as to stay unchanged, but the copy failed "
                    f"({type(err).__name__}: {err}). Keep a hashable value (a tuple) "
                    f"instead, or make it copyable."
                ) from None
        out[i] = (kind, tuple(values) if type(aux) is tuple else type(aux)(values), n, mask)
    if not found and not force:
        return records, False
    return tuple(out), found


_KIND = itemgetter(0)
_AUX = itemgetter(1)
#: Kept values of these types are immutable: a Structure holds them as they are.
_ATOMIC = frozenset({str, int, float, bool, complex, bytes, type(None)})


def _restore(refs: tuple[tuple[type, Any, int, Any], ...], num_leaves: int) -> Structure[Any]:
    records = tuple((kind_for_type(t), aux, n, mask) for t, aux, n, mask in refs)
    return Structure(records, num_leaves)


class Structure(Generic[T_co]):
    """The shape of a tree without its leaves: node types, keys and kept values.

    Immutable, hashable, comparable with ``==`` (dict insertion order and reset fields
    are ignored; kept values are compared) and picklable.

    Examples:
        >>> import containers as ct
        >>> leaves, s = ct.flatten({"a": 1, "b": [2, 3]})
        >>> s
        Structure({'a': *, 'b': [*, *]})
        >>> s.num_leaves, s.num_nodes
        (3, 5)
        >>> s.unflatten([10, 20, 30])
        {'a': 10, 'b': [20, 30]}
        >>> [ct.keystr(p) for p in s.paths()]
        ["['a']", "['b'][0]", "['b'][1]"]
    """

    __slots__ = ("_hash", "_mutable", "_num_leaves", "_records")

    def __init__(self, records: tuple[Record, ...], num_leaves: int) -> None:
        self._records, self._mutable = _snapshot(records)
        self._num_leaves = num_leaves
        self._hash: int | None = None

    @property
    def num_leaves(self) -> int:
        """The number of leaves."""
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        """The number of nodes, counting leaves too (as JAX does)."""
        return len(self._records) + self._num_leaves

    def unflatten(self, leaves: Sequence[Any], /) -> Any:
        """Rebuild a tree of this structure from ``leaves`` (in flatten order).

        Raises:
            StructureError: ``leaves`` does not have ``num_leaves`` elements.
            TypeError: ``leaves`` is not iterable, or is a mapping.
        """
        if not isinstance(leaves, (list, tuple)):
            if isinstance(leaves, Mapping) or not isinstance(leaves, Iterable):
                hint = (
                    " To rebuild from a dict of path: leaf, use ct.merge(structure, part)."
                    if isinstance(leaves, Mapping)
                    else ""
                )
                raise TypeError(
                    f"unflatten: leaves must be a sequence of values, one per leaf in flatten "
                    f"order (a list, as flatten returns them), got "
                    f"{type(leaves).__qualname__} {short_repr(leaves)}.{hint}"
                )
            leaves = list(leaves)
        if len(leaves) != self._num_leaves:
            raise StructureError(
                f"unflatten: the structure has {counted(self._num_leaves, 'leaf', 'leaves')} "
                f"but {len(leaves)} {'was' if len(leaves) == 1 else 'were'} given. Pass "
                f"exactly one value per leaf, in the order flatten returned them.",
                None,
            )
        records = self._records
        if self._mutable:  # each tree gets its own copy of the snapshot
            records, _ = _snapshot(records, force=True)
        speedups = _fast._speedups  # read per call: tests switch it
        if speedups is not None:
            return speedups.build(records, leaves, C_BUILD_CONTEXT)
        return _build(records, leaves)

    def children(self) -> list[Structure[Any]]:
        """The structures of the root's children (a leaf's is the leaf structure)."""
        if not self._records:
            return []
        _, _, n, mask = self._records[0]
        ends_at = ends(self._records)
        out: list[Structure[Any]] = []
        j = 1
        for i in range(n):
            if mask is None or (mask is not True and not mask[i]):
                out.append(Structure((), 1))
            else:
                sub = self._records[j : ends_at[j]]
                out.append(Structure(sub, sum(leaf_children(r[3], r[2]) for r in sub)))
                j = ends_at[j]
        return out

    def paths(self) -> list[KeyPath]:
        """The key path of every leaf, in flatten order."""
        return leaf_paths(self._records)

    def flatten_up_to(self, tree: Any, /) -> list[Any]:
        """Cut ``tree`` at this structure: the subtrees at this structure's leaves.

        ``tree`` must have this structure's nodes down to its leaves (a prefix match,
        as in JAX); what hangs below a leaf position can be anything.

        Examples:
            >>> import containers as ct
            >>> s = ct.structure((0, {"k": 0}))
            >>> s.flatten_up_to(([1, 2], {"k": (3, 4)}))
            [[1, 2], (3, 4)]

        Raises:
            StructureError: ``tree`` differs from the structure at a node; the message
                names the path and what differs.
        """
        return self._up_to(tree, "flatten_up_to")

    def _up_to(self, tree: Any, op: str, prefix: KeyPath = ()) -> list[Any]:
        """``flatten_up_to`` naming ``op`` in its errors, its paths under ``prefix``."""
        return _up_to(self._records, tree, op, prefix)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Structure):
            return NotImplemented
        if self is other:
            return True
        if self._num_leaves != other._num_leaves or len(self._records) != len(other._records):
            return False
        for (ka, aa, na, ma), (kb, ab, nb, mb) in zip(self._records, other._records):
            if ka.type is not kb.type or na != nb or ma != mb or not ka.aux_eq(aa, ab):
                return False
        return True

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(
                (
                    self._num_leaves,
                    tuple((k.type, n, m, k.aux_hash(a)) for k, a, n, m in self._records),
                )
            )
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:
        refs = tuple((k.type, a, n, m) for k, a, n, m in self._records)
        return (_restore, (refs, self._num_leaves))

    def __repr__(self) -> str:
        return f"Structure({render(self._records)})"

    def _repr_html_(self) -> str:
        """The HTML view of the tree, ``*`` at each leaf position (notebooks show it)."""
        from containers._html import structure_html

        return structure_html(self)


def _up_to(records: Sequence[Record], tree: Any, op: str, prefix: KeyPath = ()) -> list[Any]:
    """The subtrees of ``tree`` at the leaf positions of ``records`` (prefix match).

    Walks the tree with the engine, opening the next record at each node position;
    the open node's mask says which of its children are leaf positions.
    """
    if not records:
        return [tree]
    out: list[Any] = []
    following = iter(records)  # the record of the next node position, in pre-order

    def visit(cursor: Cursor, value: Any, ys: Sequence[Any]) -> tuple[bool, Any]:
        if cursor.stack:
            top = cursor.stack[-1]
            mask = top.state
            if mask is None or (mask is not True and not mask[len(top.out)]):
                out.append(value)
                return True, None
        kind, aux, n, mask = next(following)
        kids = node_children_matching(kind, aux, n, value, cursor.path, op)
        if mask is None:  # leaf positions only: done here, without opening the node
            cursor.check(value)
            out.extend(kids)
            return True, None
        cursor.push(value, kind, kids, aux, state=mask)
        return False, None

    traverse(visit, leave_nothing, tree, op=op, prefix=prefix)
    return out


def node_children_matching(
    kind: NodeKind, aux: Any, n: int, value: Any, path_of: Callable[[], KeyPath], op: str
) -> Sequence[Any]:
    """The children of ``value``, which must be a node like ``(kind, aux, n)``."""
    vkind = kind_of(value)
    path = path_of() if vkind is None or vkind.type is not kind.type else ()
    if vkind is None or vkind.type is not kind.type:
        expected, found = distinct_labels(kind.label, kind.type, label(value), type(value))
        raise StructureError(
            f"{op}: the tree does not match the structure at {where(path)}: expected "
            f"{expected} there, found {found}.",
            path,
        )
    kids, vaux = vkind.flatten(value)
    if len(kids) != n or not kind.aux_eq(aux, vaux):
        path = path_of()
        detail = aux_difference(kind, aux, vaux, n, len(kids))
        raise StructureError(
            f"{op}: the tree does not match the structure at {where(path)}: {detail}.", path
        )
    return kids


def aux_difference(kind: NodeKind, a: Any, b: Any, na: int, nb: int) -> str:
    """Say how two nodes of one kind differ, the first described by ``a``/``na``."""
    t = kind.type
    if kind.spec is not None:
        for name, va, vb in zip(kind.spec.keep, a, b):
            if not kind.aux_eq((va,), (vb,)):
                return f"kept field {type_name(t)}.{name} is {va!r} in one and {vb!r} in the other"
    if isinstance(a, tuple) and a and isinstance(a[0], tuple) and t is not tuple:
        ka, kb = set(a[0]), set(b[0])
        if ka != kb:
            only_a, only_b = sorted(map(repr, ka - kb)), sorted(map(repr, kb - ka))
            return (
                f"{kind.label} with different keys: only in the expected one: "
                f"{', '.join(only_a) or 'none'}; only in the other: {', '.join(only_b) or 'none'}"
            )
    if na != nb:
        return f"{kind.label} with {counted(na, 'child', 'children')} in one and {nb} in the other"
    return f"{kind.label} whose static data differ: {a!r} vs {b!r}"


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
    leaves = flatten_records(tree, is_leaf, none_is_leaf, "flatten", records)
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
