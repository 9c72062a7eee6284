"""The generic recursion: walk objects (Functors.jl) and the iterative map engine.

This stage holds the full semantics of fmap-like traversal: exclude, the identity
cache and prune, several aligned trees, paths, structural output, cycles and unlimited
depth. ``map_tree`` runs it with an explicit stack; the walk classes say the same
thing recursively and are what ``fmap(walk=...)`` composes. The fast paths in
``_fmap``/``_flatten`` must agree with ``map_tree``; property tests check it.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from containers._errors import ContainerDefinitionError, StructureError
from containers._paths import Key, KeyPath, where
from containers._registry import Mismatch, cacheable, kind_of

__all__ = [
    "MAX_FAST_DEPTH",
    "MISS",
    "UNSET",
    "Align",
    "CachedWalk",
    "CollectWalk",
    "DefaultWalk",
    "ExcludeWalk",
    "Memo",
    "Relocate",
    "StructuralWalk",
    "Walk",
    "collect",
    "cycle_error",
    "execute",
    "map_tree",
    "mismatch_error",
]


class _Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "<unset>"


#: "No value given" (``prune``'s default), since ``None`` is a valid prune value.
UNSET = _Unset.UNSET

#: Depth at which the recursive fast paths (``_fmap``, ``_flatten``) hand a subtree to
#: the iterative engine, well below Python's recursion limit. fmap's compiled loops
#: (``_speedups.c``) recurse in C through the mappers, under 1 KB of C stack per level:
#: at this depth that fits the smallest default thread stack in use (musl's 128 KB).
MAX_FAST_DEPTH = 100

_ORDINALS = ("first", "second", "third", "fourth", "fifth")


def _ordinal(i: int) -> str:
    return _ORDINALS[i] if i < len(_ORDINALS) else f"#{i + 1}"


class Memo:
    """fmap's identity cache: results by ``id``, and the objects those ids belong to,
    kept alive so that no id is reused while the walk runs."""

    __slots__ = ("keep", "results")

    def __init__(self) -> None:
        self.results: dict[int, Any] = {}
        self.keep: list[Any] = []

    def store(self, obj: Any, value: Any) -> None:
        """Remember ``value`` as the result for ``obj``."""
        self.results[id(obj)] = value
        self.keep.append(obj)

    def clear(self) -> None:
        """Forget everything: a finished walk's closures may live on until the cyclic
        garbage collector runs, and must not keep the tree and its results alive."""
        self.results.clear()
        self.keep.clear()


#: What ``Memo.results.get`` returns for an object not mapped yet (None is a result).
MISS = object()


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
        f"cycle or treat the object as a leaf with exclude=/is_leaf=.",
        path,
    )


def _own(error: Exception, relocate: bool) -> Exception:
    """What the engine raises for an error it found itself (see ``Relocate``)."""
    return Relocate(error) if relocate else error


def _read_all(
    op: str,
    kind: Any,
    ys: Sequence[Any],
    aux: Any,
    n: int,
    path: Callable[[], KeyPath],
    relocate: bool = False,
) -> list[Any]:
    out = []
    for i, y in enumerate(ys):
        try:
            out.append(kind.read(y, aux, n))
        except Mismatch as e:
            error = mismatch_error(op, path(), tree_index=i + 1, what=str(e))
            raise _own(error, relocate) from None
    return out


class _Frame:
    """One node being mapped: its children, the other trees' children, the results.

    The path of the child being visited is ``keys[len(out)]``; paths are derived from
    the stack when needed (materializing one per frame would cost O(depth**2)).
    """

    __slots__ = ("aux", "ckey", "keys", "kids", "kind", "node", "out", "ykids")

    def __init__(
        self,
        node: Any,
        kind: Any,
        kids: Sequence[Any],
        aux: Any,
        ykids: list[Any],
        keys: Sequence[Key],
        ckey: int | None,
    ) -> None:
        self.node = node
        self.kind = kind
        self.kids = kids
        self.aux = aux
        self.ykids = ykids
        self.keys = keys
        self.ckey = ckey
        self.out: list[Any] = []


def _kind_at(
    node: Any, op: str, path_at: Callable[[int], KeyPath], depth: int, relocate: bool = False
) -> Any:
    """``kind_of(node)``, with the path added to an undeclared-subclass error."""
    try:
        return kind_of(node)
    except ContainerDefinitionError as err:
        error = ContainerDefinitionError(f"{op}: at {where(path_at(depth))}: {err}")
        raise _own(error, relocate) from None


class Align:
    """An alignment mode for ``map_tree``: how the values of several tree arguments
    meet at one position (treelize's strict/inner/outer/left).

    ``node(first, rest, path)`` gets the arguments' values at a position and returns
    ``None`` when all are leaves (the engine then calls ``f(first, *rest)``), or
    ``(lead, kids, aux, rest_kids, keys)``: the node checked for cycles, the first
    argument's value under each aligned key, what ``unflatten`` needs, the other
    arguments' values (``rest_kids[j][i]``) and the keys (for paths). The engine
    rebuilds the position with ``align.unflatten(aux, results)``. ``path()`` gives the
    position's path for error messages.
    """

    def node(
        self, first: Any, rest: Sequence[Any], path: Callable[[], KeyPath]
    ) -> tuple[Any, Sequence[Any], Any, list[Sequence[Any]], Sequence[Key]] | None:
        raise NotImplementedError(f"{type(self).__name__} must define node")

    def unflatten(self, aux: Any, children: Sequence[Any]) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define unflatten")


def map_tree(
    f: Callable[..., Any],
    x: Any,
    ys: Sequence[Any] = (),
    *,
    exclude: Callable[..., bool] | None,
    cache: Memo | None,
    prune: Any = UNSET,
    structural: bool = False,
    with_path: bool = False,
    op: str = "fmap",
    relocate: bool = False,
    align: Align | None = None,
) -> Any:
    """Map ``f`` over ``x`` (and the aligned ``ys``) with an explicit stack.

    Semantics (Functors.jl's ``fmap``): a value for which ``exclude`` is true (by
    default, ``None``: a leaf) is replaced by ``f(value, *ys_values)``
    (``f(path, value, ...)`` and ``exclude(path, value)`` with ``with_path``; paths are
    built only for those calls); a leaf that is not excluded is kept;
    a node is rebuilt from its mapped children (or, with ``structural``, turned into
    a plain dict/tuple/list). With ``cache`` (a ``Memo``), mutable values are mapped once:
    a repeat gets the first result, or ``prune``. The first tree decides the structure;
    the others are read by key. A node that contains itself raises ``StructureError``.
    With ``relocate`` (``x`` is a subtree handed over by a fast path, so paths would be
    relative to it), the engine's own errors are raised as ``Relocate`` instead; errors
    raised by ``f`` or ``exclude`` propagate unchanged either way.
    With ``align`` (treelize), no tree is first: the ``Align`` strategy reads every
    argument's value at each position, and ``exclude``, ``cache`` and ``structural``
    are unused.
    """
    on_path: dict[int, int] = {}  # id of a node being mapped -> its depth in the stack
    stack: list[_Frame] = []
    use_prune = prune is not UNSET

    def path_at(depth: int) -> KeyPath:
        return tuple(fr.keys[len(fr.out)] for fr in stack[:depth])

    def visit(node: Any, yvals: Sequence[Any]) -> tuple[bool, Any]:
        """Map ``node`` at once (True, value), or push its frame (False, None)."""
        depth = len(stack)
        if align is not None:
            step = align.node(node, yvals, lambda: path_at(depth))
            if step is None:
                return True, f(node, *yvals)
            lead, kids, aux, ykids, keys = step
            if id(lead) in on_path:
                raise _own(cycle_error(op, path_at(depth), path_at(on_path[id(lead)])), relocate)
            stack.append(_Frame(lead, align, kids, aux, ykids, keys, None))
            on_path[id(lead)] = depth
            return False, None
        kind = _kind_at(node, op, path_at, depth, relocate)
        ckey = None
        if cache is not None and (kind.mutable if kind is not None else cacheable(node)):
            ckey = id(node)
            hit = cache.results.get(ckey, MISS)
            if hit is not MISS:
                return True, prune if use_prune else hit
        if exclude is None:
            excluded = kind is None
        else:
            excluded = exclude(path_at(depth), node) if with_path else exclude(node)
        if excluded:
            value = f(path_at(depth), node, *yvals) if with_path else f(node, *yvals)
            if ckey is not None:
                cache.store(node, value)  # type: ignore[union-attr]
            return True, value
        if kind is None:
            return True, node
        if id(node) in on_path:
            error = cycle_error(op, path_at(depth), path_at(on_path[id(node)]))
            raise _own(error, relocate)
        kids, aux = kind.flatten(node)
        n = len(kids)
        others: list[Any] = []  # the other trees' children
        if yvals:
            others = _read_all(op, kind, yvals, aux, n, lambda: path_at(depth), relocate)
        stack.append(_Frame(node, kind, kids, aux, others, kind.keys(aux, n), ckey))
        on_path[id(node)] = depth
        return False, None

    done, result = visit(x, ys)
    if done:
        return result
    while stack:
        frame = stack[-1]
        i = len(frame.out)
        if i < len(frame.kids):
            done, value = visit(frame.kids[i], [yk[i] for yk in frame.ykids])
            if done:
                frame.out.append(value)
            continue
        stack.pop()
        del on_path[id(frame.node)]
        build = frame.kind.structural if structural else frame.kind.unflatten
        value = build(frame.aux, frame.out)
        if frame.ckey is not None:
            cache.store(frame.node, value)  # type: ignore[union-attr]
        if stack:
            stack[-1].out.append(value)
        else:
            result = value
    return result


def collect(x: Any, exclude: Callable[[Any], bool]) -> list[Any]:
    """Every node and leaf of ``x`` in depth-first pre-order, mutable ones once.

    An excluded value and its subtree are dropped. A node that contains itself raises
    ``StructureError`` with its path.
    """
    out: list[Any] = []
    seen: dict[int, Any] = {}
    on_path: dict[int, int] = {}  # id of a node being collected -> its depth
    stack: list[list[Any]] = []  # [node, kind, aux, kids, next index]

    def path_at(depth: int) -> KeyPath:
        return tuple(fr[1].keys(fr[2], len(fr[3]))[fr[4] - 1] for fr in stack[:depth])

    def enter(value: Any) -> None:
        if exclude(value):
            return
        depth = len(stack)
        kind = _kind_at(value, "fcollect", path_at, depth)
        if kind is not None and id(value) in on_path:
            raise cycle_error("fcollect", path_at(depth), path_at(on_path[id(value)]))
        if cacheable(value):
            if id(value) in seen:
                return
            seen[id(value)] = value
        out.append(value)
        if kind is not None:
            kids, aux = kind.flatten(value)
            on_path[id(value)] = depth
            stack.append([value, kind, aux, kids, 0])

    enter(x)
    while stack:
        frame = stack[-1]
        i = frame[4]
        if i < len(frame[3]):
            frame[4] = i + 1
            enter(frame[3][i])
        else:
            stack.pop()
            del on_path[id(frame[0])]
    return out


# --- walk objects (Functors.jl): the recursive statement of the same semantics ----------


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
