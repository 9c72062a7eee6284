"""Walk objects (Functors.jl): the recursive statement of fmap's semantics, composable.

This stage holds ``Walk`` and its stock subclasses and ``execute`` (``fmap(walk=...)``).
A walk is a strategy the one traversal, ``_core.traverse``'s loop, calls at each value
(``Walk._step``): the stock walks and their compositions open nodes on the engine's
cursor and never recurse through Python calls, so they walk any depth, and cycles and
mismatches are the cursor's errors, with paths and fmap's wording. A walk of the
user's own (a class defining ``__call__``) is called with ``recurse``, which re-enters
the same loop (``_core.resume``): its own calls nest, one Python level per level of
the tree.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from containers._engine._core import MISS, UNSET, Cursor, Frame, Memo, resume
from containers._engine._relocate import add_note, mismatch_error, path_note
from containers._errors import ContainersError, StructureError, not_callable_error
from containers._paths import where
from containers._registry import Mismatch, cacheable, kind_of

__all__ = [
    "CachedWalk",
    "CollectWalk",
    "DefaultWalk",
    "ExcludeWalk",
    "StructuralWalk",
    "Walk",
    "execute",
    "run_walk",
]


_EXECUTE_USAGE = (
    "Pass the walk first, then the tree: execute(walk, x, *ys), e.g. execute(ct.DefaultWalk(), x)"
)
_EXCLUDE_WALK_USAGE = (
    "Pass ExcludeWalk(walk, fn, exclude): the inner walk, the function, the predicate"
)
_CACHED_WALK_USAGE = "Pass CachedWalk(walk), the walk whose results it caches"

#: What an open node must do when it is left, besides being rebuilt: the cached walks
#: around the one that opened it, innermost first, as ``(walk, node, next)`` links.
Finish = tuple[Any, Any, Any] | None


class _Recurse:
    """``recurse(child, *ys)`` as the walks receive it: the walk's step on the child,
    and, if it opened a node, the engine's loop until that node is left. The run's
    ``cursor.client``."""

    __slots__ = ("cursor", "visit")

    def __init__(self, cursor: Cursor | None, visit: Any) -> None:
        self.cursor = cursor
        self.visit = visit

    def __call__(self, value: Any, *yvals: Any) -> Any:
        cursor = self.cursor
        if cursor is None:
            raise RuntimeError("recurse was called after the walk that passed it ended")
        done, result = self.visit(cursor, value, yvals)
        return result if done else resume(cursor, self.visit, _leave, len(cursor.stack) - 1)


def _call(walk: Any, cursor: Cursor, x: Any, ys: Sequence[Any]) -> tuple[bool, Any]:
    """The step of a walk that is a plain callable, not a ``Walk``: it is called."""
    return True, walk(cursor.client, x, *ys)


def _leave(cursor: Cursor, frame: Frame) -> Any:
    """The result of a node a stock walk opened: rebuilt by the ``build`` it chose,
    then stored by the cached walks around it (nothing for ``CollectWalk``)."""
    state = frame.state
    if state is None:
        return None
    build, finish = state
    value = build(frame.aux, frame.out)
    while finish is not None:
        cached, node, finish = finish
        cached.cache.store(node, value)
    return value


class Walk:
    """A step of a recursive traversal: ``walk(recurse, x, *ys)``.

    ``recurse(child, *ys_children)`` maps a child; the walk decides what to do with
    ``x`` itself. ``execute(walk, x, *ys)`` runs one. The stock walks and their
    compositions run on the engine's loop, at any depth; a walk class of your own
    that defines ``__call__`` nests one Python call per level of its own, so it is
    bounded by the interpreter's recursion limit.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__call__" in cls.__dict__ and "_step" not in cls.__dict__:
            cls._step = Walk._step  # type: ignore[method-assign]  # its own __call__ decides

    def __call__(self, recurse: Callable[..., Any], x: Any, *ys: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __call__")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def _step(
        self, cursor: Cursor, x: Any, ys: Sequence[Any], finish: Finish = None
    ) -> tuple[bool, Any]:
        """The walk's strategy at ``x``, the engine's ``visit``: ``(True, result)``, or
        ``(False, None)`` after it opened ``x`` on ``cursor`` (``_leave`` then makes
        its result); ``finish`` links the cached walks around it. A walk of the user's
        own is called, with the engine's ``recurse``."""
        return True, self(cursor.client, x, *ys)

    def _on_engine(
        self, step: Callable[..., tuple[bool, Any]], recurse: Any, x: Any, ys: Sequence[Any]
    ) -> tuple[bool, Any]:
        """A stock walk called as ``walk(recurse, x, *ys)``: with the engine's
        ``recurse``, its class's ``step`` (not ``self._step``: a subclass with a
        ``__call__`` of its own that calls this one has the step that calls it) and
        the engine's loop; ``(False, None)`` for another ``recurse`` (the caller's
        own), which the recursive statement then serves."""
        if type(recurse) is not _Recurse or recurse.cursor is None:
            return False, None
        cursor = recurse.cursor
        done, value = step(self, cursor, x, ys)
        if done:
            return True, value
        return True, resume(cursor, recurse.visit, _leave, len(cursor.stack) - 1)


class DefaultWalk(Walk):
    """Rebuild a node from its recursed children; return a leaf unchanged.

    Examples:
        >>> import containers as ct
        >>> ct.execute(ct.DefaultWalk(), [1, (2, 3)])
        [1, (2, 3)]
    """

    _build = "unflatten"

    def __call__(self, recurse: Callable[..., Any], x: Any, *ys: Any) -> Any:
        engine, value = self._on_engine(DefaultWalk._step, recurse, x, ys)
        if engine:
            return value
        kind = kind_of(x)  # a recurse of the caller's own: the recursive statement
        if kind is None:
            return x
        kids, aux = kind.flatten(x)
        n = len(kids)
        ykids = []
        for j, y in enumerate(ys):
            try:
                ykids.append(kind.read(y, aux, n))
            except Mismatch as e:
                raise mismatch_error("execute", (), tree_index=j + 1, what=str(e)) from None
        out = [recurse(kid, *(yk[i] for yk in ykids)) for i, kid in enumerate(kids)]
        return getattr(kind, self._build)(aux, out)

    def _step(
        self, cursor: Cursor, x: Any, ys: Sequence[Any], finish: Finish = None
    ) -> tuple[bool, Any]:
        kind = cursor.kind_of(x)
        if kind is None:
            return True, x
        kids, aux = kind.flatten(x)
        others = cursor.read(kind, ys, aux, len(kids)) if ys else ()
        cursor.push(x, kind, kids, aux, others, None, (getattr(kind, self._build), finish))
        return False, None


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
        engine, value = self._on_engine(ExcludeWalk._step, recurse, x, ys)
        if engine:
            return value
        if self.exclude(x):
            return self.fn(x, *ys)
        return self.walk(recurse, x, *ys)

    def _step(
        self, cursor: Cursor, x: Any, ys: Sequence[Any], finish: Finish = None
    ) -> tuple[bool, Any]:
        if self.exclude(x):
            return True, self.fn(x, *ys)
        walk = self.walk
        if isinstance(walk, Walk):
            return walk._step(cursor, x, ys, finish)
        return _call(walk, cursor, x, ys)

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
        engine, value = self._on_engine(CachedWalk._step, recurse, x, ys)
        if engine:
            return value
        if not cacheable(x):
            return self.walk(recurse, x, *ys)
        hit = self.cache.results.get(id(x), MISS)
        if hit is not MISS:
            return hit if self.prune is UNSET else self.prune
        value = self.walk(recurse, x, *ys)
        self.cache.store(x, value)
        return value

    def _step(
        self, cursor: Cursor, x: Any, ys: Sequence[Any], finish: Finish = None
    ) -> tuple[bool, Any]:
        walk = self.walk
        if not cacheable(x):
            if isinstance(walk, Walk):
                return walk._step(cursor, x, ys, finish)
            return _call(walk, cursor, x, ys)
        hit = self.cache.results.get(id(x), MISS)
        if hit is not MISS:
            return True, (hit if self.prune is UNSET else self.prune)
        if isinstance(walk, Walk):
            done, value = walk._step(cursor, x, ys, (self, x, finish))
        else:
            done, value = _call(walk, cursor, x, ys)
        if done:
            self.cache.store(x, value)
        return done, value

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
        self._seen = Memo()

    def __call__(self, recurse: Callable[..., Any], x: Any, *ys: Any) -> None:
        engine, _ = self._on_engine(CollectWalk._step, recurse, x, ys)
        if engine or self.exclude(x):
            return
        if cacheable(x):
            if id(x) in self._seen.results:
                return
            self._seen.store(x, None)
        self.items.append(x)
        kind = kind_of(x)
        if kind is not None:
            for kid in kind.flatten(x)[0]:
                recurse(kid)

    def _step(
        self, cursor: Cursor, x: Any, ys: Sequence[Any], finish: Finish = None
    ) -> tuple[bool, Any]:
        if self.exclude(x):
            return True, None
        kind = cursor.kind_of(x)
        if kind is not None:
            cursor.check(x)
        if cacheable(x):
            if id(x) in self._seen.results:
                return True, None
            self._seen.store(x, None)
        self.items.append(x)
        if kind is None:
            return True, None
        kids, aux = kind.flatten(x)
        cursor.push(x, kind, kids, aux)
        return False, None


def execute(walk: Callable[..., Any], x: Any, *ys: Any) -> Any:
    """Run ``walk`` from the root: ``walk(recurse, x, *ys)``, where ``recurse`` re-enters it.

    The stock walks and their compositions run on the engine's loop: any depth. A node
    met again inside itself (a reference cycle) and, through ``DefaultWalk``, another
    tree that does not fit raise ``StructureError`` with the path. A walk class of your
    own that defines ``__call__`` nests a Python call per level of its own: a tree
    deeper than the recursion limit allows it raises ``StructureError``.

    Examples:
        >>> import containers as ct
        >>> walk = ct.ExcludeWalk(ct.StructuralWalk(), str, ct.isleaf)
        >>> ct.execute(walk, (1, [2]))
        ('1', ['2'])
    """
    if not callable(walk):
        raise not_callable_error(walk, "execute", "walk", _EXECUTE_USAGE)
    return run_walk(walk, x, ys, op="execute")


def run_walk(
    walk: Callable[..., Any], x: Any, ys: Sequence[Any], *, op: str, note: bool = False
) -> Any:
    """``execute``'s run, with ``op`` naming the operation in errors (fmap's wording for
    ``fmap(walk=...)``): ``walk``'s step at each value, on the engine's loop. With
    ``note`` (``fmap(walk=...)``), an error of user code (``f``, the walk) gets the note
    ``traverse`` adds (``path_note``), naming the path of the value being walked."""
    cursor = Cursor(op, False, ())
    visit = walk._step if isinstance(walk, Walk) else partial(_call, walk)
    cursor.client = _Recurse(cursor, visit)
    try:
        done, value = visit(cursor, x, ys)
        return value if done else resume(cursor, visit, _leave, 0)
    except RecursionError:
        raise StructureError(
            f"{op}: the tree is too deep, at {where(cursor.path())}, for a walk of your own "
            f"that recurses through Python calls (the recursion limit is "
            f"{sys.getrecursionlimit()}). The stock walks (DefaultWalk, StructuralWalk, "
            f"ExcludeWalk, CachedWalk, CollectWalk) and fmap without walk= have no depth "
            f"limit: compose them, or raise the limit with sys.setrecursionlimit.",
            cursor.path(),
        ) from None
    except Exception as err:
        if note and not isinstance(err, ContainersError):  # ours name their path
            add_note(err, path_note(op, cursor.path()))
        raise
    finally:
        cursor.client.cursor = None  # a recurse kept by the walk must not keep the run alive
