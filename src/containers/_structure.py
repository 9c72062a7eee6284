"""A flattened tree's shape: ``Structure``, immutable, hashable, rebuilt without recursion.

A Structure is a flat tuple of node records in pre-order, ``(kind, aux, n, mask)``
(``_records``): ``mask`` is ``None`` when all ``n`` children are leaves, ``True`` when
all are nodes, else a tuple of booleans (True = node). Being flat, it compares,
hashes, pickles and rebuilds without recursion at any depth. Its records come from
flatten's walk (``_engine._flat``), whose per-class ``flatten`` (``_codegen``) has
already snapshotted every mutable kept value: a Structure copies nothing itself, and
its rebuild gives each tree its own copy through the generated ``unflatten``. This
stage sits below the operations that make or read Structures (``_flatten``,
``_split``, ``_shape``) and never walks a tree but through the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from containers._engine import _fast
from containers._engine._core import Cursor, leave_nothing, traverse
from containers._errors import StructureError, counted, short_repr, type_name
from containers._paths import KeyPath, where
from containers._record_paths import leaf_paths, render
from containers._records import (
    C_BUILD_CONTEXT,
    Record,
    ends,
    leaf_children,
)
from containers._records import build as _build
from containers._registry import (
    NodeKind,
    distinct_labels,
    kind_for_type,
    kind_of,
    label,
)

__all__ = [
    "Structure",
    "aux_difference",
    "node_children_matching",
    "same_records",
    "same_records_plain",
]

T_co = TypeVar("T_co", covariant=True)


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

    __slots__ = ("_hash", "_num_leaves", "_paths", "_records")

    def __init__(self, records: tuple[Record, ...], num_leaves: int) -> None:
        self._records = records
        self._paths: list[KeyPath] | None = None  # computed once, on the first paths()
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
        records = self._records  # its kinds' unflatten copies mutable kept values
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
        if self._paths is None:
            self._paths = leaf_paths(self._records)
        return list(self._paths)  # a list of its own: the caller may change it

    def _remember_paths(self, paths: list[KeyPath]) -> None:
        """Keep ``paths`` (what ``paths()`` would give, computed by its caller: split's
        ``ranked_paths``) for the next ``paths()``."""
        if self._paths is None:
            self._paths = paths

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
        a, b = self._records, other._records
        if type(a) is tuple and type(b) is tuple and same_records(a, b):  # no aux_eq called
            return True  # (combine's check of partition's trees; benchmarks/split.py)
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


#: The types of the aux items ``same_records`` trusts: none can change in place.
_SCALARS = frozenset({str, int, float, bool, bytes, type(None)})


def _same_items(x: Any, y: Any, scalars: int) -> bool:
    """Whether ``x`` and ``y`` are one object or tuples of the same objects; with
    ``scalars``, ``x`` must be None or a tuple of scalars (``_SCALARS``) and, at the
    first level, of tuples of scalars compared the same way (a dict's keys)."""
    if type(x) is not tuple or type(y) is not tuple:
        return x is y and (not scalars or x is None)
    if len(x) != len(y):
        return False
    for item, other in zip(x, y):
        if scalars == 1 and type(item) is tuple:
            if not _same_items(item, other, 2):
                return False
        elif item is not other or (scalars and type(item) not in _SCALARS):
            return False
    return True


def same_records_plain(a: tuple[Record, ...], b: tuple[Record, ...]) -> bool:
    """Whether the records ``a`` and ``b`` are made of the same objects: kinds
    identical, ``n`` equal ints, masks identical or tuples of identical items, every
    aux ``None`` or a tuple of identical str, int, float, bool, bytes, ``None`` or
    tuples of those (a dict's keys): nothing that could change in place. Then their paths and tag ranks are the same, and
    what was computed from ``a`` serves ``b`` (``_tags.tag_plan``, ``combine``). No
    ``__eq__`` runs. False says nothing. The plain twin of ``_speedups.same_records``
    (tests/test_split.py compares them)."""
    if type(a) is not tuple or type(b) is not tuple:
        raise TypeError("same_records: records must be tuples")
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b):
        if type(ra) is not tuple or type(rb) is not tuple or len(ra) != 4 or len(rb) != 4:
            return False
        ka, aa, na, ma = ra
        kb, ab, nb, mb = rb
        if (
            ka is not kb
            or not (na is nb or (type(na) is int and type(nb) is int and na == nb))
            or not _same_items(ma, mb, 0)
            or not _same_items(aa, ab, 1)
        ):
            return False
    return True


def same_records(a: tuple[Record, ...], b: tuple[Record, ...]) -> bool:
    """``same_records_plain`` (in C where the extension is built)."""
    speedups = _fast._speedups  # read per call: tests switch it
    if speedups is not None:
        same: bool = speedups.same_records(a, b)
        return same
    return same_records_plain(a, b)


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
