"""Flatten and unflatten (JAX): leaves plus an immutable ``Structure``, and key paths.

A Structure is a flat tuple of node records in pre-order, ``(kind, aux, n, mask)``:
``mask`` is ``None`` when all ``n`` children are leaves, ``True`` when all are nodes,
else a tuple of booleans (True = node). Being flat, it compares, hashes, pickles and
rebuilds without recursion at any depth. This stage never maps functions over leaves.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, compress, cycle, repeat
from operator import itemgetter
from typing import Any, Generic, TypeVar

from containers._engine import _fast
from containers._engine._core import UNSET, Cursor, _Unset, leave_nothing, traverse
from containers._engine._flat import MIN_RUN, flatten_records
from containers._errors import StructureError, counted, short_repr, type_name
from containers._paths import AttrKey, Key, KeyPath, where
from containers._registry import (
    DICT,
    LIST,
    TUPLE,
    NodeKind,
    distinct_labels,
    kind_for_type,
    kind_of,
    label,
)
from containers.filters import Filter

__all__ = [
    "Structure",
    "flatten",
    "flatten_with_path",
    "leaves",
    "leaves_with_path",
    "structure",
    "unflatten",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
Record = tuple[NodeKind, Any, int, Any]
IsLeaf = Callable[[Any], bool] | None


def _build(records: Sequence[Record], leaves: Sequence[Any]) -> Any:
    """Rebuild a tree from pre-order records and leaves, with a stack of open nodes.

    The innermost open node is kept in locals (``pkind``, ``paux``, ``pn``, ``pmask``,
    ``pout``), the others on ``stack``: a node whose children are all leaves is built
    from one slice and attached without touching the stack (benchmarks/run.py, W1u).
    The plain twin of ``_speedups.build``, which ``Structure.unflatten`` runs where the
    extension is built.
    """
    if not records:
        return leaves[0]
    # Slices must be fresh lists (a list node is its slice), so a tuple is copied. A
    # node's unflatten may change the caller's list, so the list is copied before the
    # first one runs while leaves remain to be read: what is read is what the compiled
    # twin, which copies at the start, reads. Tuples and lists, built here, need no
    # copy (benchmarks/instructions.py, W1u: a dict of lists of tuples, the dict last).
    shared = type(leaves) is list
    if not shared:
        leaves = list(leaves)
    total = len(leaves)
    pos = 0
    stack: list[tuple[Any, ...]] = []
    pkind: Any = None
    paux: Any = None
    pn = 0
    pmask: Any = None
    pout: list[Any] | None = None  # None: no open node (the root is next, or done)
    value: Any
    j = 0
    while True:
        kind, aux, n, mask = records[j]
        j += 1
        if mask is None:  # a node whose children are all leaves: one slice
            kids = leaves[pos : pos + n]
            pos += n
        elif mask is True and n and _same_sequences(records, j, n):
            # n tuples (or lists) of m leaves each: cut by zip in C (benchmarks/run.py, W1u)
            seq, _, m, _ = records[j]
            j += n
            chunk = leaves[pos : pos + n * m]
            pos += n * m
            kids = list(zip(*[iter(chunk)] * m)) if m else [()] * n
            if seq is LIST:
                kids = list(map(list, kids))
        else:  # a node with node children: open it
            if pout is not None:
                stack.append((pkind, paux, pn, pmask, pout))
            pkind, paux, pn, pmask, pout = kind, aux, n, mask, []
            if mask is not True:
                i = 0
                while not mask[i]:
                    pout.append(leaves[pos])
                    pos += 1
                    i += 1
            continue
        while True:  # close the node (kind, aux, kids), then the open nodes it completes
            if kind is TUPLE:
                value = tuple(kids)
            elif kind is LIST:
                value = kids
            else:
                if shared and pos < total:
                    leaves, shared = list(leaves), False
                value = kind.unflatten(aux, kids)
            if pout is None:
                return value
            pout.append(value)
            if pmask is not True:
                i = len(pout)
                while i < pn and not pmask[i]:
                    pout.append(leaves[pos])
                    pos += 1
                    i += 1
            if len(pout) < pn:
                break
            kind, aux, kids = pkind, paux, pout
            if stack:
                pkind, paux, pn, pmask, pout = stack.pop()
            else:
                pout = None


#: What the compiled twin of ``_build`` (``_speedups.build``) reads besides the records
#: and leaves: the kinds it builds itself, the dict kind's ``unflatten`` as imported (it
#: builds dicts itself only while that is still the one), and ``_build``, to which it
#: hands records that are not what flatten makes.
C_BUILD_CONTEXT = (TUPLE, LIST, DICT, DICT.unflatten, _build)


def _same_sequences(records: Sequence[Record], j: int, n: int) -> bool:
    """Whether ``records[j:j + n]`` are n equal records of all-leaf tuples or lists."""
    first = records[j]
    return (
        first[3] is None
        and (first[0] is TUPLE or first[0] is LIST)
        and records[j : j + n].count(first) == n
    )


def _node_children(mask: Any, n: int) -> int:
    return 0 if mask is None else n if mask is True else sum(mask)


def _leaf_children(mask: Any, n: int) -> int:
    return n if mask is None else 0 if mask is True else n - sum(mask)


def _ends(records: Sequence[Record]) -> list[int]:
    """For each record, the index just past its subtree's records."""
    ends = [0] * len(records)
    stack: list[list[int]] = []  # [record index, node children still to come]
    for j, (_, _, n, mask) in enumerate(records):
        stack.append([j, _node_children(mask, n)])
        while stack and stack[-1][1] == 0:
            done = stack.pop()[0]
            ends[done] = j + 1
            if stack:
                stack[-1][1] -= 1
    return ends


#: What the compiled twin of ``_leaf_paths`` (``_speedups.leaf_paths``) reads besides
#: the records: the kinds whose keys depend on the length alone, and the method name.
PATHS_CONTEXT = (TUPLE, LIST, "keys")


def _leaf_paths(records: Sequence[Record]) -> list[KeyPath]:
    """The key path of every leaf, in flatten order (in C where the extension is built)."""
    speedups = _fast._speedups  # read per call: tests switch it
    if speedups is not None:
        paths: list[KeyPath] = speedups.leaf_paths(records, PATHS_CONTEXT)
        return paths
    return ranked_paths(records, None, 0)[0]


def ranked_paths(
    records: Sequence[Record], first: dict[str, int] | None, none: int
) -> tuple[list[KeyPath], list[int]]:
    """The key path of every leaf, in flatten order, and with ``first`` each leaf's rank.

    A leaf's rank is the smallest ``first[tag]`` over the tags of the ``AttrKey`` s on
    its path (``none`` if it passes no listed tag): which of several tag filters it
    matches first, read from the tags of each node's keys once per node instead of once
    per leaf (``split``/``state``, benchmarks/split.py). Without ``first`` the ranks are
    not computed (an empty list). Node paths are never built: at depth d that would cost
    O(d**2).
    """
    if not records:
        return [()], [] if first is None else [none]
    out: list[KeyPath] = []
    ranks: list[int] = []
    # (id(keys), rank above) -> (keys, ranks of the node's children); keys is kept so
    # that its id cannot be reused while the entry lives.
    patterns: dict[tuple[int, int], tuple[Sequence[Key], list[int]]] = {}
    table = {} if first is None else first

    def pattern(keys: Sequence[Key], above: int) -> list[int]:
        hit = patterns.get((id(keys), above))
        if hit is not None and hit[0] is keys:
            return hit[1]
        made = [above] * len(keys)
        if AttrKey in set(map(type, keys)):  # only a field's key has tags
            for i, key in enumerate(keys):
                if type(key) is AttrKey:
                    for tag in key.tags:
                        j = table.get(tag, none)
                        made[i] = min(made[i], j)
        patterns[id(keys), above] = (keys, made)
        return made

    keys_above: list[Key] = []
    nxt = 1
    kind, aux, n, mask = records[0]
    keys = kind.keys(aux, n)
    pat = None if first is None else pattern(keys, none)
    if mask is None:
        return list(zip(keys)), [] if pat is None else list(pat)
    if mask is True and n >= MIN_RUN and _leaf_run(records, 1, n):
        _emit_run(records[1], (), keys, pat, pattern, out, ranks)
        return out, ranks
    stack = [[keys, mask, 0, pat]]
    while stack:
        fr = stack[-1]
        keys, mask, i, pat = fr
        if i == len(keys):
            stack.pop()
            if keys_above:
                keys_above.pop()
            continue
        fr[2] = i + 1
        if mask is not True and not mask[i]:
            out.append((*keys_above, keys[i]))
            if pat is not None:
                ranks.append(pat[i])
            continue
        kind, aux, n, child_mask = records[nxt]
        nxt += 1
        child_keys = kind.keys(aux, n)
        child_pat = None if pat is None else pattern(child_keys, pat[i])
        if child_mask is None:
            # A node of leaves: all its paths at once, built in C (benchmarks/run.py,
            # flatten_with_path), and its ranks as one extend (benchmarks/split.py).
            out += map((*keys_above, keys[i]).__add__, zip(child_keys))
            if child_pat is not None:
                ranks += child_pat
        elif (
            child_mask is True
            and n >= MIN_RUN
            and records[nxt][3] is None
            and _leaf_run(records, nxt, n)
        ):
            above = (*keys_above, keys[i])
            _emit_run(records[nxt], above, child_keys, child_pat, pattern, out, ranks)
            nxt += n
        else:
            keys_above.append(keys[i])
            stack.append([child_keys, child_mask, 0, child_pat])
    return out, ranks


def _leaf_run(records: Sequence[Record], j: int, n: int) -> bool:
    """Whether ``records[j:j + n]`` are n nodes of leaves of one kind and size, with
    the same keys: a list of layers. A declared container's keys are its fields; other
    kinds' keys may come from their aux, which must then be one object (compared by
    identity: no aux's ``__eq__`` runs)."""
    sub = records[j : j + n]
    kind, _, m, mask = sub[0]
    if mask is not None:
        return False
    if kind.spec is not None and not kind.spec.keep:
        # The aux of a container without kept fields is always (): == compares the
        # records' fields by identity (a list of layers; benchmarks/split.py).
        return sub.count(sub[0]) == n
    if list(map(_KIND_SIZE_MASK, sub)).count((kind, m, None)) != n:
        return False
    return kind.spec is not None or len(set(map(id, map(itemgetter(1), sub)))) == 1


_KIND_SIZE_MASK = itemgetter(0, 2, 3)


def _emit_run(
    record: Record,
    above: KeyPath,
    keys: Sequence[Key],
    pat: list[int] | None,
    pattern: Callable[[Sequence[Key], int], list[int]],
    out: list[KeyPath],
    ranks: list[int],
) -> None:
    """The paths (and ranks) of the leaves of a run of nodes (``_leaf_run``) under the
    keys ``keys`` at ``above``: one loop in C for the whole run (benchmarks/split.py;
    a list of layers)."""
    kind, aux, m, _ = record
    inner = kind.keys(aux, m)
    if len(above) == 1:  # .layers[i].w: a comprehension beats zip by a third
        (a,) = above
        out += [(a, k, t) for k in keys for t in inner]
    elif not above:
        out += [(k, t) for k in keys for t in inner]
    else:
        out += zip(
            *map(repeat, above), chain.from_iterable(map(repeat, keys, repeat(m))), cycle(inner)
        )
    if pat is None:
        return
    if pat.count(pat[0]) == len(pat):
        ranks += pattern(inner, pat[0]) * len(pat)
    else:
        for above_rank in pat:
            ranks += pattern(inner, above_rank)


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
        ends = _ends(self._records)
        out: list[Structure[Any]] = []
        j = 1
        for i in range(n):
            if mask is None or (mask is not True and not mask[i]):
                out.append(Structure((), 1))
            else:
                sub = self._records[j : ends[j]]
                out.append(Structure(sub, sum(_leaf_children(r[3], r[2]) for r in sub)))
                j = ends[j]
        return out

    def paths(self) -> list[KeyPath]:
        """The key path of every leaf, in flatten order."""
        return _leaf_paths(self._records)

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
        return f"Structure({_render(self._records)})"

    def _repr_html_(self) -> str:
        """The HTML view of the tree, ``*`` at each leaf position (notebooks show it)."""
        from containers._html import structure_html

        return structure_html(self)


_REPR_LIMIT = 2000


def _render(records: Sequence[Record]) -> str:
    """Render records like the tree, with ``*`` for leaves; summarize huge structures."""
    if not records:
        return "*"
    parts: list[str] = []  # reversed pre-order fold: children results sit on the stack
    size = 0
    for kind, aux, n, mask in reversed(records):
        keys = kind.keys(aux, n)
        items = []
        for i in range(n):
            if mask is None or (mask is not True and not mask[i]):
                items.append("*")
            else:
                items.append(parts.pop())
        text = _render_node(kind, aux, keys, items)
        size += len(text)
        if size > _REPR_LIMIT * 4:
            return f"<{len(records)} nodes; root: {records[0][0].label}>"
        parts.append(text)
    text = parts[0]
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."


def _render_node(kind: NodeKind, aux: Any, keys: Sequence[Key], items: list[str]) -> str:
    t = kind.type
    if t is tuple:
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if t is list:
        return f"[{', '.join(items)}]"
    if t is type(None):
        return "None"
    if t is dict:
        return "{" + ", ".join(f"{k.raw!r}: {v}" for k, v in zip(keys, items)) + "}"
    fields = [
        f"{k.raw}={v}" if isinstance(k, AttrKey) else f"{k.raw!r}: {v}" if hasattr(k, "key") else v
        for k, v in zip(keys, items)
    ]
    if kind.spec is not None:
        fields += [f"{name}={value!r}" for name, value in zip(kind.spec.keep, aux)]
    return f"{type_name(t)}({', '.join(fields)})"


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
        from containers._split import leaves_where  # _split is a later stage

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
