"""The ``where=`` option of ``fmap`` and ``leaves``: a filter on ``(path, leaf)``.

This stage sits below the operations that take ``where=`` (``_fmap``, ``_flatten``)
and uses only the engine, flatten's records and the filters: ``fmap_where`` is
``map_tree`` with paths, ``leaves_where`` reads the leaves' paths from the records
flatten makes (``_record_paths.leaf_paths``). It never walks a tree itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from containers._engine._core import Memo, map_tree
from containers._engine._flat import flatten_records
from containers._paths import KeyPath
from containers._record_paths import leaf_paths
from containers._records import Record
from containers.filters import Filter, FilterError, bind, to_predicate

__all__ = ["fmap_where", "leaves_where"]


def fmap_where(
    f: Callable[..., Any],
    tree: Any,
    rest: Sequence[Any],
    where: Filter,
    custom: bool,
    cache: bool,
    prune: Any,
) -> Any:
    """``fmap(f, tree, *rest, where=where)``: the engine with paths, ``f`` on matching leaves.

    Paths are built for leaves only (as ``flatten_with_path`` does), and the identity
    cache keeps sharing as in ``fmap``.
    """
    if custom:
        raise FilterError(
            "fmap: where= cannot be combined with exclude= or walk=. where= maps the "
            "leaves it matches; to map other values, put the test in exclude= instead."
        )
    # a PathPattern with negative indices reads the tree's leaf paths, only if it has one
    pred = bind(to_predicate(where), lambda: _leaf_paths(tree))

    def step(path: KeyPath, value: Any, *ys: Any) -> Any:
        return f(value, *ys) if pred(path, value) else value

    memo = Memo() if cache else None
    try:
        return map_tree(
            step, tree, rest, exclude=None, cache=memo, prune=prune, with_path=True, op="fmap"
        )
    finally:
        if memo is not None:
            memo.clear()


def leaves_where(tree: Any, where: Filter, is_leaf: Any, none_is_leaf: bool) -> list[Any]:
    """``leaves(tree, where=where)``: the leaves whose ``(path, leaf)`` match, their
    paths read from flatten's records."""
    records: list[Record] = []
    found = flatten_records(tree, is_leaf, none_is_leaf, "leaves", records)
    paths = leaf_paths(records)
    pred = bind(to_predicate(where), lambda: paths)
    return [v for p, v in zip(paths, found) if pred(p, v)]


def _leaf_paths(tree: Any) -> list[KeyPath]:
    """The paths of ``tree``'s leaves, as ``flatten_with_path`` gives them."""
    records: list[Record] = []
    flatten_records(tree, None, False, "fmap", records)
    return leaf_paths(records)
