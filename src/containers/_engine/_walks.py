"""Walk objects (Functors.jl): the recursive statement of fmap's semantics, composable.

This stage holds ``Walk`` and its stock subclasses and ``execute``, which runs one by
recursing through Python calls (``fmap(walk=...)``). It is the one traversal a user
writes steps of; it never serves the library's own operations, which run on
``_core.traverse`` and its accelerations.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from containers._engine._core import MISS, UNSET, Memo, mismatch_error
from containers._errors import StructureError, not_callable_error
from containers._paths import Key, KeyPath, where
from containers._registry import Mismatch, cacheable, kind_of

__all__ = [
    "CachedWalk",
    "CollectWalk",
    "DefaultWalk",
    "ExcludeWalk",
    "StructuralWalk",
    "Walk",
    "execute",
]


_EXECUTE_USAGE = (
    "Pass the walk first, then the tree: execute(walk, x, *ys), e.g. execute(ct.DefaultWalk(), x)"
)
_EXCLUDE_WALK_USAGE = (
    "Pass ExcludeWalk(walk, fn, exclude): the inner walk, the function, the predicate"
)
_CACHED_WALK_USAGE = "Pass CachedWalk(walk), the walk whose results it caches"


class Walk:
    """A step of a recursive traversal: ``walk(recurse, x, *ys)``.

    ``recurse(child, *ys_children)`` maps a child; the walk decides what to do with
    ``x`` itself. ``execute(walk, x, *ys)`` runs one. Walks recurse through Python
    calls, so a custom walk is bounded by the interpreter's recursion limit.
    """

    def __call__(self, recurse: Callable[..., Any], x: Any, *ys: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __call__")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _WalkError(Exception):
    """A structure error inside recursive walks; keys are added as it unwinds through
    ``DefaultWalk``, and ``execute`` raises it as a ``StructureError`` with its path."""

    def __init__(self, render: Callable[[KeyPath], StructureError]) -> None:
        super().__init__()
        self.render = render
        self.keys: list[Key] = []  # innermost first


class DefaultWalk(Walk):
    """Rebuild a node from its recursed children; return a leaf unchanged.

    Examples:
        >>> import containers as ct
        >>> ct.execute(ct.DefaultWalk(), [1, (2, 3)])
        [1, (2, 3)]
    """

    _build = "unflatten"

    def __call__(self, recurse: Callable[..., Any], x: Any, *ys: Any) -> Any:
        kind = kind_of(x)
        if kind is None:
            return x
        kids, aux = kind.flatten(x)
        n = len(kids)
        ykids = []
        for j, y in enumerate(ys):
            try:
                ykids.append(kind.read(y, aux, n))
            except Mismatch as e:
                raise _WalkError(
                    partial(mismatch_error, "fmap", tree_index=j + 1, what=str(e))
                ) from None
        out: list[Any] = []
        for i, kid in enumerate(kids):
            try:
                out.append(recurse(kid, *(yk[i] for yk in ykids)))
            except _WalkError as err:
                err.keys.append(kind.keys(aux, n)[i])
                raise
        return getattr(kind, self._build)(aux, out)


class StructuralWalk(DefaultWalk):
    """Like ``DefaultWalk``, but containers become dicts keyed by field name.

    Examples:
        >>> import containers as ct
        >>> @ct.container
        ... class P:
        ...     a: int
        ...     b: tuple
        >>> ct.execute(ct.StructuralWalk(), P(1, (2, 3)))
        {'a': 1, 'b': (2, 3)}
    """

    _build = "structural"


class ExcludeWalk(Walk):
    """Call ``fn(x, *ys)`` where ``exclude(x)`` is true; otherwise defer to ``walk``.

    Examples:
        >>> import containers as ct
        >>> w = ct.ExcludeWalk(ct.DefaultWalk(), lambda v: v * 2, ct.isleaf)
        >>> ct.execute(w, [1, (2, 3)])
        [2, (4, 6)]
    """

    def __init__(self, walk: Walk, fn: Callable[..., Any], exclude: Callable[[Any], bool]) -> None:
        for arg, value in (("walk", walk), ("fn", fn), ("exclude", exclude)):
            if not callable(value):
                raise not_callable_error(value, "ExcludeWalk", arg, _EXCLUDE_WALK_USAGE)
        self.walk = walk
        self.fn = fn
        self.exclude = exclude

    def __call__(self, recurse: Callable[..., Any], x: Any, *ys: Any) -> Any:
        if self.exclude(x):
            return self.fn(x, *ys)
        return self.walk(recurse, x, *ys)

    def __repr__(self) -> str:
        return f"ExcludeWalk({self.walk!r}, {self.fn!r}, {self.exclude!r})"


class CachedWalk(Walk):
    """Map each mutable object once, by identity; repeats get the result (or ``prune``).

    Examples:
        >>> import containers as ct
        >>> shared = [1.0]
        >>> w = ct.CachedWalk(ct.ExcludeWalk(ct.DefaultWalk(), lambda v: v + 1, ct.isleaf))
        >>> out = ct.execute(w, {"a": shared, "b": shared})
        >>> out, out["a"] is out["b"]
        ({'a': [2.0], 'b': [2.0]}, True)
    """

    def __init__(self, walk: Walk, *, prune: Any = UNSET, cache: Memo | None = None) -> None:
        if not callable(walk):
            raise not_callable_error(walk, "CachedWalk", "walk", _CACHED_WALK_USAGE)
        self.walk = walk
        self.prune = prune
        self.cache = Memo() if cache is None else cache

    def __call__(self, recurse: Callable[..., Any], x: Any, *ys: Any) -> Any:
        if not cacheable(x):
            return self.walk(recurse, x, *ys)
        hit = self.cache.results.get(id(x), MISS)
        if hit is not MISS:
            return hit if self.prune is UNSET else self.prune
        value = self.walk(recurse, x, *ys)
        self.cache.store(x, value)
        return value

    def __repr__(self) -> str:
        return f"CachedWalk({self.walk!r}, prune={self.prune!r})"


class CollectWalk(Walk):
    """Append every value to ``items`` in pre-order, mutable objects once (fcollect).

    Examples:
        >>> import containers as ct
        >>> w = ct.CollectWalk()
        >>> _ = ct.execute(w, [1, (2,)])
        >>> w.items
        [[1, (2,)], 1, (2,), 2]
    """

    def __init__(self, exclude: Callable[[Any], bool] = lambda v: False) -> None:
        self.exclude = exclude
        self.items: list[Any] = []
        self._seen: dict[int, Any] = {}

    def __call__(self, recurse: Callable[..., Any], x: Any, *ys: Any) -> None:
        if self.exclude(x):
            return
        if cacheable(x):
            if id(x) in self._seen:
                return
            self._seen[id(x)] = x
        self.items.append(x)
        kind = kind_of(x)
        if kind is not None:
            for kid in kind.flatten(x)[0]:
                recurse(kid)


def execute(walk: Callable[..., Any], x: Any, *ys: Any) -> Any:
    """Run ``walk`` from the root: ``walk(recurse, x, *ys)``, where ``recurse`` re-enters it.

    A node met again inside itself (a reference cycle) and, through ``DefaultWalk``,
    another tree that does not fit raise ``StructureError`` with the path. Walks
    recurse through Python calls: a tree deeper than the recursion limit allows raises
    ``StructureError`` (the default fmap, fmapstructure and flatten have no limit).

    Examples:
        >>> import containers as ct
        >>> walk = ct.ExcludeWalk(ct.StructuralWalk(), str, ct.isleaf)
        >>> ct.execute(walk, (1, [2]))
        ('1', ['2'])
    """
    if not callable(walk):
        raise not_callable_error(walk, "execute", "walk", _EXECUTE_USAGE)
    active: set[int] = set()

    def recurse(value: Any, *yvals: Any) -> Any:
        if kind_of(value) is None:
            return walk(recurse, value, *yvals)  # noqa: F821 - deleted only after the walk
        key = id(value)
        if key in active:
            raise _WalkError(
                lambda path: StructureError(
                    f"execute: the tree has a reference cycle: the object at {where(path)} "
                    f"is one of its own ancestors. Trees must be acyclic; break the cycle "
                    f"or exclude the object.",
                    path,
                )
            )
        active.add(key)
        try:
            return walk(recurse, value, *yvals)  # noqa: F821
        finally:
            active.discard(key)

    try:
        return recurse(x, *ys)
    except _WalkError as err:
        raise err.render(tuple(reversed(err.keys))) from None
    except RecursionError:
        raise StructureError(
            f"execute: the tree is too deep for a recursive walk (the recursion limit is "
            f"{sys.getrecursionlimit()}). fmap, fmapstructure and flatten without walk= "
            f"have no depth limit; a custom walk recurses through Python calls."
        ) from None
    finally:
        # recurse refers to itself through its closure: a reference cycle that would
        # keep it (and the walk, which holds the cache) alive until the cyclic GC runs.
        del recurse
