"""Split and merge (Flax NNX), partition and combine (equinox): group leaves by filter.

This stage is a client of flatten's walk (``_engine._flat``) and of ``Structure``:
``split`` is one pass over the leaves and their paths (routed to parts by
``_routing``), ``merge`` is ``Structure.unflatten`` in path order. It never walks a
tree itself (no recursion, cycle check or depth limit of its own), and imports
nothing from ``_flatten``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat
from operator import getitem, is_, not_, truth
from typing import Any, TypeVar, overload

from containers._engine import _fast
from containers._errors import StructureError, short_repr
from containers._paths import AttrKey, DictKey, IndexKey, KeyPath, keystr, where
from containers._routing import Part, _flat, _flatten, _names, _parts, _warn_no_match
from containers._structure import Structure
from containers._tags import tag_ranks
from containers.filters import Filter, WithTag, bind, to_predicate

__all__ = ["MISSING", "Part", "combine", "merge", "partition", "split", "state"]

T = TypeVar("T")


class _Missing(enum.Enum):
    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "ct.MISSING"


MISSING = _Missing.MISSING
"""The placeholder ``partition`` puts where a leaf went to the other tree, and ``combine``
skips. A leaf of its own (a one-member enum, shown as ``ct.MISSING``) rather than
``None``, so that a ``None`` in the tree (a node with no children) survives the round trip."""


class _Planned(Structure[T]):
    """The Structure ``split`` returns: a ``Structure`` that also remembers which part
    each leaf went to and the parts' keys, so that ``merge`` can check the parts it is
    given against them with list comparisons (in C, and the path tuples are the same
    objects) instead of hashing every path (benchmarks/split.py, merge). Pickling
    gives a plain ``Structure``; equality and hashing are the Structure's."""

    __slots__ = ("_plan",)

    def __init__(self, s: Structure[T], which: list[int], keys: list[list[KeyPath]]) -> None:
        super().__init__(s._records, s._num_leaves)
        self._plan = (which, keys)


@overload
def split(tree: T, /) -> tuple[Structure[T], Part]: ...
@overload
def split(tree: T, f1: Filter, /) -> tuple[Structure[T], Part]: ...
@overload
def split(tree: T, f1: Filter, f2: Filter, /) -> tuple[Structure[T], Part, Part]: ...
@overload
def split(
    tree: T, f1: Filter, f2: Filter, f3: Filter, /
) -> tuple[Structure[T], Part, Part, Part]: ...
@overload
def split(
    tree: T, f1: Filter, f2: Filter, f3: Filter, f4: Filter, /
) -> tuple[Structure[T], Part, Part, Part, Part]: ...
@overload
def split(tree: T, /, *filters: Filter) -> tuple[Any, ...]: ...


def split(tree: Any, /, *filters: Filter) -> tuple[Any, ...]:
    """Split a tree into its structure and one flat part per filter (Flax NNX's ``split``).

    Each leaf goes to the first filter that matches it (order matters: put the specific
    filters first). A part is a ``dict`` from key path to leaf, in flatten order, keyed
    by the paths ``flatten_with_path`` gives. Every leaf must match some filter: end
    with ``...`` to take the rest. With no filters there is one part holding every
    leaf. ``merge(structure, *parts)`` puts the tree back together.

    Examples:
        >>> import containers as ct
        >>> @ct.container
        ... class Layer:
        ...     w: float = ct.field(tags=("param",))
        ...     count: int = ct.field(tags=("batch_stats",))
        >>> s, params, rest = ct.split([Layer(0.5, 3)], "param", ...)
        >>> {ct.keystr(p): v for p, v in params.items()}
        {'[0].w': 0.5}
        >>> ct.merge(s, params, rest)
        [Layer(w=0.5, count=3)]
        >>> ct.split([Layer(0.5, 3)], "param")
        Traceback (most recent call last):
        ...
        containers.StructureError: split: no filter matches the leaf at '[0].count'. Every leaf must go to a part: add a filter for it, or use `...` last to match the rest.

    Args:
        tree: Any tree.
        *filters: Filters (see ``containers.filters``); ``...`` or ``True`` only last.

    Returns:
        ``(structure, *parts)``: one part per filter (one part if there are none).

    Raises:
        StructureError: A leaf matches no filter (the message names it), ``...`` or
            ``True`` is not last, or the tree has a reference cycle.
        FilterError: A filter is not a filter.
    """
    s, parts, which, unmatched, keys = _parts("split", tree, filters, True)
    if unmatched:
        n = len(unmatched)
        leaf = f"the leaf at {_names(unmatched)}" if n == 1 else f"{n} leaves: {_names(unmatched)}"
        raise StructureError(
            f"split: no filter matches {leaf}. Every leaf must go to a part: add a filter "
            f"for {'it' if n == 1 else 'them'}, or use `...` last to match the rest.",
            unmatched[0],
        )
    if keys is None:
        keys = [list(p) for p in parts]
    return (_Planned(s, which, keys), *parts)


@overload
def state(tree: Any, /) -> Part: ...
@overload
def state(tree: Any, f1: Filter, /) -> Part: ...
@overload
def state(tree: Any, f1: Filter, f2: Filter, /, *more: Filter) -> tuple[Part, ...]: ...


def state(tree: Any, /, *filters: Filter) -> Part | tuple[Part, ...]:
    """Return the leaves that ``filters`` select, as flat parts (Flax NNX's ``state``).

    Like ``split`` without the structure and without the requirement that every leaf
    match: leaves no filter matches are left out. One filter (or none: every leaf)
    gives one part; several give a tuple of parts, each leaf in the first that matches.

    Examples:
        >>> import containers as ct
        >>> @ct.container
        ... class Norm:
        ...     scale: float = ct.field(tags=("param",))
        ...     mean: float = ct.field(tags=("batch_stats",))
        ...     steps: int = 0
        >>> {ct.keystr(p): v for p, v in ct.state(Norm(1.0, 0.1), "param").items()}
        {'.scale': 1.0}
        >>> params, stats = ct.state(Norm(1.0, 0.1), "param", "batch_stats")
        >>> list(stats.values())
        [0.1]

    Args:
        tree: Any tree.
        *filters: Filters; ``...`` or ``True`` only last.

    Returns:
        One part, or a tuple of parts for two or more filters.

    Raises:
        StructureError: ``...`` or ``True`` is not last, or the tree has a cycle.
        FilterError: A filter is not a filter.
    """
    parts = _parts("state", tree, filters, False)[1]
    return parts[0] if len(parts) == 1 else tuple(parts)


def merge(structure: Structure[T], /, *parts: Mapping[KeyPath, Any]) -> T:
    """Rebuild the tree that ``split`` took apart, from its structure and parts.

    The parts together must hold exactly one leaf for every path of ``structure``; in
    any order, and in any number of parts (the parts of ``state``, or parts edited or
    built by hand, work too). Node types, kept fields and reset fields come from the
    structure, as ``unflatten`` rebuilds them. A leaf shared by several paths is
    shared again if the parts hold the same object there; nodes are rebuilt one per
    path, as ``unflatten`` does (see docs/filters.md).

    Examples:
        >>> import containers as ct
        >>> s, evens, odds = ct.split([0, 1, 2], lambda p, v: v % 2 == 0, ...)
        >>> ct.merge(s, odds, {p: v * 10 for p, v in evens.items()})
        [0, 1, 20]
        >>> ct.merge(s, evens)
        Traceback (most recent call last):
        ...
        containers.StructureError: merge: no part holds the leaf at '[1]'. The parts must hold one leaf for every path of the structure; pass every part split returned.

    Args:
        structure: The structure ``split`` returned (or any ``Structure``).
        *parts: Mappings from key path to leaf.

    Returns:
        The rebuilt tree.

    Raises:
        StructureError: A path of the structure is in no part, a part holds a path the
            structure does not have or a key that is not a key path (a ``keystr``
            string, say), or two parts hold the same path; the message names them.
        TypeError: A part is not a mapping.
    """
    if not isinstance(structure, Structure):
        raise StructureError(
            f"merge: the first argument must be the Structure that split returned, got "
            f"{type(structure).__qualname__}. Call merge(structure, *parts)."
        )
    if type(structure) is _Planned and len(parts) == len(structure._plan[1]):
        leaves = _planned(*structure._plan, parts)
        if leaves is not None:
            return structure.unflatten(leaves)  # type: ignore[no-any-return]
    return structure.unflatten(_lookup(structure, parts))  # type: ignore[no-any-return]


def _planned(
    which: list[int], keys: list[list[KeyPath]], parts: Sequence[Mapping[KeyPath, Any]]
) -> list[Any] | None:
    """The leaves in flatten order if every part has the keys split gave it, else None."""
    for part, expected in zip(parts, keys):
        if type(part) is not dict or len(part) != len(expected) or list(part) != expected:
            return None
    if len(parts) == 1:
        return list(parts[0].values())
    values: list[Iterator[Any]] = [iter(p.values()) for p in parts]
    return list(map(next, map(values.__getitem__, which)))


def _lookup(structure: Structure[Any], parts: Sequence[Mapping[KeyPath, Any]]) -> list[Any]:
    """The leaves of ``parts`` in the order of ``structure.paths()``, checked."""
    for i, part in enumerate(parts):
        if not isinstance(part, Mapping):
            unpack = (
                " To pass a list of parts, unpack it: merge(structure, *parts)."
                if isinstance(part, (list, tuple)) and part and isinstance(part[0], Mapping)
                else ""
            )
            raise TypeError(
                f"merge: part {i} is a {type(part).__qualname__}, not a dict from key path "
                f"to leaf. Pass the parts split returned, after the structure: "
                f"merge(structure, part, ...).{unpack}"
            )
    if len(parts) == 1:
        merged = parts[0]
    else:
        merged = {}
        for part in parts:
            merged.update(part)
        if len(merged) != sum(map(len, parts)):
            _check_keys(structure, parts)
            owner: dict[KeyPath, int] = {}
            for i, part in enumerate(parts):
                for path in part:
                    if path in owner:
                        raise StructureError(
                            f"merge: parts {owner[path]} and {i} both hold the leaf at "
                            f"{where(path)}. Each path must be in one part only.",
                            path,
                        )
                    owner[path] = i
    paths = structure.paths()
    try:
        leaves = list(map(merged.__getitem__, paths))
    except (KeyError, TypeError):
        _check_keys(structure, parts)
        missing = [p for p in paths if p not in merged]
        raise StructureError(
            f"merge: no part holds the leaf at {_names(missing)}. The parts must hold one "
            f"leaf for every path of the structure; pass every part split returned.",
            missing[0],
        ) from None
    if len(merged) != len(paths):
        _check_keys(structure, parts)
        known = set(paths)
        extra = [p for p in merged if p not in known]
        raise StructureError(
            f"merge: the parts hold a leaf at {_names(extra)}, which the structure does "
            f"not have. Pass the parts split returned with this structure, with their "
            f"paths unchanged.",
            extra[0],
        )
    return leaves


def _check_keys(structure: Structure[Any], parts: Sequence[Mapping[Any, Any]]) -> None:
    """Raise if a part has a key that is not a key path (merge's errors render paths;
    a keystr string would otherwise read as a missing leaf)."""
    for i, part in enumerate(parts):
        for key in part:
            if type(key) is tuple and all(type(k) in (AttrKey, IndexKey, DictKey) for k in key):
                continue
            paths = structure.paths()
            same = next((p for p in paths if keystr(p) == key), None)
            example = (
                f": {key!r} is the keystr of the path {same!r}"
                if same is not None
                else (f", such as {paths[0]!r}" if paths else "")
            )
            raise StructureError(
                f"merge: part {i} has the key {short_repr(key)}, which is not a key path. "
                f"Parts are keyed by tuples of AttrKey, IndexKey and DictKey, as split "
                f"returns them{example}."
            )


def partition(tree: T, filter: Filter, /) -> tuple[T, T]:
    """Split a tree in two trees of its structure: the matching leaves, and the others.

    Each tree keeps the other's leaves' places with ``ct.MISSING`` (not ``None``, which
    is a node with no leaves); ``combine`` puts them back together (equinox's
    ``partition``/``combine``).

    Examples:
        >>> import containers as ct
        >>> params, rest = ct.partition({"w": 1.0, "n": 3}, float)
        >>> params, rest
        ({'w': 1.0, 'n': ct.MISSING}, {'w': ct.MISSING, 'n': 3})
        >>> ct.combine(params, rest)
        {'w': 1.0, 'n': 3}

    Args:
        tree: Any tree.
        filter: Which leaves go to the first tree.

    Returns:
        ``(matching, rest)``, both with ``tree``'s structure.

    Raises:
        FilterError: ``filter`` is not a filter.
        StructureError: The tree has a reference cycle.
    """
    pred = to_predicate(filter)
    leaves, s = _flat("partition", tree)
    pred = bind(pred, s.paths)
    if type(pred) is WithTag:  # ranked from the structure, no call per leaf
        hits: list[Any] = list(map(not_, tag_ranks(s._records, leaves, [pred.tag])[1]))
    else:
        hits = list(map(pred, s.paths(), leaves))
    if not any(hits):
        _warn_no_match("partition", [pred], [{}], leaves, s)
    # (v, MISSING)[not hit] and (MISSING, v)[not hit], chosen in C
    left = list(map(getitem, zip(leaves, repeat(MISSING)), map(not_, hits)))
    right = list(map(getitem, zip(leaves, repeat(MISSING)), map(truth, hits)))
    return s.unflatten(left), s.unflatten(right)


def combine(*trees: T) -> T:
    """Put trees of one structure back together: each leaf from the first tree that has it.

    A leaf position takes the first value that is not ``ct.MISSING``, or stays
    ``ct.MISSING`` if every tree has ``MISSING`` there.

    Examples:
        >>> import containers as ct
        >>> ct.combine([1, ct.MISSING, ct.MISSING], [ct.MISSING, 2, ct.MISSING])
        [1, 2, ct.MISSING]

    Args:
        *trees: Trees of one structure (``partition``'s results).

    Returns:
        The combined tree, with the first tree's structure.

    Raises:
        StructureError: No tree was given, or the trees' structures differ (the message
            names the first place).
    """
    if not trees:
        raise StructureError("combine: no trees given. Pass the trees partition returned.")
    out, s = _flatten(trees[0])
    for i in range(1, len(trees)):
        _fill_from(out, s, trees[i], i)
    return s.unflatten(out)  # type: ignore[no-any-return]


def _fill_from(out: list[Any], s: Structure[Any], other: Any, i: int) -> None:
    """``fill_missing(out, leaves of other)`` after checking that ``other`` (tree ``i``
    of combine) has the structure ``s``. Its own function so that other's leaves and
    records are released before combine rebuilds the tree: alive, every garbage
    collection the rebuild's allocations trigger would walk them again
    (benchmarks/split.py, combine at 100k)."""
    theirs, s_other = _flatten(other)
    if s_other != s:
        s._up_to(other, f"combine: tree {i}")  # names the first difference
        raise StructureError(
            f"combine: tree {i} has more nodes than tree 0 (a node where tree 0 has "
            f"a leaf). Pass trees of one structure, as partition returns them.",
        )
    fill_missing(out, theirs)


def fill_missing_plain(out: list[Any], other: list[Any], missing: Any = MISSING) -> None:
    """Each ``missing`` in ``out`` replaced by ``other``'s leaf at its index, in place:
    combine's choice of each leaf from the first tree that has it. The plain twin of
    ``_speedups.fill_missing`` (tests/test_split.py compares them)."""
    if len(out) != len(other):
        raise ValueError(f"fill_missing: lists of {len(out)} and {len(other)} items")
    # (ours, theirs)[ours is missing], chosen in C
    out[:] = map(getitem, zip(out, other), map(is_, out, repeat(missing)))


def fill_missing(out: list[Any], other: list[Any]) -> None:
    """``fill_missing_plain``, in C where the extension is built (benchmarks/split.py)."""
    speedups = _fast._speedups  # read per call: tests switch it
    (fill_missing_plain if speedups is None else speedups.fill_missing)(out, other, MISSING)
