"""The fmap family (Functors.jl): fmap, fmap_with_path, fmapstructure, fcollect.

Thin operations over ``_walk``: ``map_tree`` holds the semantics; the default
``fmap`` (exclude=isleaf, no custom walk) runs a recursive fast path that must agree
with it, handing subtrees deeper than MAX_FAST_DEPTH to ``map_tree`` and re-running
``map_tree`` to locate any structure error with its full path. Nothing here looks
inside a node type: the registry does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from containers._errors import ContainerDefinitionError, StructureError
from containers._paths import KeyPath
from containers._protocol import isleaf
from containers._registry import (
    IMMUTABLE_LEAVES,
    KINDS,
    LEAF_TYPES,
    LIST,
    TUPLE,
    Mismatch,
    NodeKind,
    kind_of,
)
from containers._walk import (
    MAX_FAST_DEPTH,
    UNSET,
    CachedWalk,
    ExcludeWalk,
    Walk,
    collect,
    execute,
    map_tree,
)

__all__ = ["fcollect", "fmap", "fmap_with_path", "fmapstructure"]

T = TypeVar("T")
Cache = dict[int, tuple[Any, Any]]


def _fast_map(f: Callable[..., Any], x: Any, cache: Cache | None, prune: Any) -> Any:
    """fmap(f, x) with exclude=isleaf, recursively.

    Speed (benchmarks/run.py, W2, W3 and W3id): each child's type is tested inline in
    the parent's loop (or in the class's generated mapper), so an immutable leaf costs
    one set lookup and the call of ``f``; tuples skip the kind lookup.
    """
    leaf_types = LEAF_TYPES
    immutable = IMMUTABLE_LEAVES
    kinds_get = KINDS.get
    use_prune = prune is not UNSET
    cache_get = cache.get if cache is not None else None
    mappers: dict[type, Callable[[Any, int], Any]] = {}

    def cached_leaf(c: Any) -> Any:
        hit = cache_get(id(c))  # type: ignore[misc]
        if hit is not None:
            return prune if use_prune else hit[1]
        value = f(c)
        cache[id(c)] = (c, value)  # type: ignore[index]
        return value

    leaf = f if cache is None else cached_leaf

    def node(x: Any, depth: int) -> Any:
        t = type(x)
        ckey = None
        kind: NodeKind | None = TUPLE
        if t is tuple:
            kids = x
        else:
            kind = kinds_get(t) or kind_of(x)
            if kind is None:  # a leaf of a type seen for the first time
                return f(x) if t in immutable else leaf(x)
            if cache_get is not None and kind.mutable:
                ckey = id(x)
                hit = cache_get(ckey)
                if hit is not None:
                    return prune if use_prune else hit[1]
            if kind.make_mapper is not None and depth <= MAX_FAST_DEPTH:
                mapper = mappers.get(t)
                if mapper is None:
                    mapper = kind.make_mapper(f, leaf, node, immutable, leaf_types)
                    mappers[t] = mapper
                value = mapper(x, depth + 1)
                if ckey is not None:
                    cache[ckey] = (x, value)  # type: ignore[index]
                return value
            kids, aux = (x, None) if t is list else kind.flatten(x)
        if depth > MAX_FAST_DEPTH:
            value = map_tree(f, x, exclude=None, cache=cache, prune=prune)
        else:
            out: list[Any] = []
            append = out.append
            depth += 1
            for c in kids:
                tc = type(c)
                if tc in immutable:
                    append(f(c))
                elif tc in leaf_types:
                    append(leaf(c))
                else:
                    append(node(c, depth))
            if t is tuple:
                return tuple(out)
            value = out if t is list else kind.unflatten(aux, out)  # type: ignore[union-attr]
        if ckey is not None:
            cache[ckey] = (x, value)  # type: ignore[index]
        return value

    return node(x, 0)


def _fast_map_many(
    f: Callable[..., Any], x: Any, ys: tuple[Any, ...], cache: Cache | None, prune: Any
) -> Any:
    """fmap(f, x, *ys) with exclude=isleaf, recursively (as ``_fast_map``)."""
    leaf_types = LEAF_TYPES
    kinds_get = KINDS.get
    use_prune = prune is not UNSET

    def leaf(c: Any, cys: Any) -> Any:
        if cache is None or type(c) in IMMUTABLE_LEAVES:
            return f(c, *cys)
        key = id(c)
        hit = cache.get(key)
        if hit is not None:
            return prune if use_prune else hit[1]
        value = f(c, *cys)
        cache[key] = (c, value)
        return value

    def node(x: Any, ys: Any, depth: int) -> Any:
        kind = kinds_get(type(x)) or kind_of(x)
        if kind is None:
            return leaf(x, ys)
        ckey = None
        if cache is not None and kind.mutable:
            ckey = id(x)
            hit = cache.get(ckey)
            if hit is not None:
                return prune if use_prune else hit[1]
        if depth > MAX_FAST_DEPTH:
            value = map_tree(f, x, ys, exclude=None, cache=cache, prune=prune)
        else:
            kids, aux = kind.flatten(x)
            n = len(kids)
            try:
                ykids = [kind.read(y, aux, n) for y in ys]
            except Mismatch:
                raise StructureError("fmap: trees differ") from None  # located by the caller
            out: list[Any] = []
            append = out.append
            depth += 1
            for c, *cys in zip(kids, *ykids):
                if type(c) in leaf_types:
                    append(leaf(c, cys))
                else:
                    append(node(c, cys, depth))
            value = (
                tuple(out) if kind is TUPLE else out if kind is LIST else kind.unflatten(aux, out)
            )
        if ckey is not None:
            cache[ckey] = (x, value)  # type: ignore[index]
        return value

    return node(x, ys, 0)


def _noop(*args: Any) -> None:
    return None


@overload
def fmap(
    f: Callable[[Any], Any],
    tree: Any,
    /,
    *,
    exclude: Callable[[Any], bool] = ...,
    walk: Walk | None = ...,
    cache: bool = ...,
    prune: Any = ...,
) -> Any: ...


@overload
def fmap(
    f: Callable[..., Any],
    tree: Any,
    /,
    *rest: Any,
    exclude: Callable[[Any], bool] = ...,
    walk: Walk | None = ...,
    cache: bool = ...,
    prune: Any = ...,
) -> Any: ...


def fmap(
    f: Callable[..., Any],
    tree: Any,
    /,
    *rest: Any,
    exclude: Callable[[Any], bool] = isleaf,
    walk: Walk | None = None,
    cache: bool = True,
    prune: Any = UNSET,
) -> Any:
    """Map ``f`` over the leaves of ``tree``, keeping its structure and types.

    ``f(leaf, *leaves_of_rest)`` is called where ``exclude(value)`` is true (by default
    on leaves) and its result replaces the value. ``exclude`` *replaces* ``isleaf``: a
    leaf that is not excluded is kept unchanged (Functors.jl). Kept fields are copied;
    reset fields get their defaults.

    With several trees, the first decides the structure and the output types; the
    others are read by key (field name, position, mapping key): extra keys or trailing
    elements in them are ignored, a missing one raises ``StructureError``.

    Mutable objects (lists, dicts, arrays, non-frozen containers, other objects) are
    mapped once by identity, so shared objects stay shared; values (numbers, strings,
    tuples, frozen containers) are not cached. ``cache=False`` turns this off;
    ``prune=v`` replaces every repeat of a cached object with ``v``.

    Examples:
        >>> import containers as ct
        >>> ct.fmap(lambda v: v + 1, {"a": 1, "b": (2, [3])})
        {'a': 2, 'b': (3, [4])}
        >>> ct.fmap(lambda a, b: a * b, [1, 2], [10, 20, 30])
        [10, 40]
        >>> shared = [1]
        >>> out = ct.fmap(lambda v: v, {"x": shared, "y": shared})
        >>> out["x"] is out["y"]
        True
        >>> ct.fmap(str, [1, (2, 3)], exclude=lambda v: isinstance(v, tuple))
        [1, '(2, 3)']
        >>> ct.fmap(lambda a, b: a + b, {"a": 1}, {"b": 2})
        Traceback (most recent call last):
        ...
        containers.StructureError: fmap: trees differ at the root: the second has no key 'a' there. Every other tree must have the first tree's nodes and keys.

    Args:
        f: The function applied where ``exclude`` is true.
        tree: The tree that decides the structure.
        *rest: More trees, read in parallel.
        exclude: Where to call ``f`` (and stop descending).
        walk: A walk object to use instead of ``DefaultWalk``.
        cache: Map each mutable object once, keeping sharing.
        prune: Replacement for repeats of cached objects.

    Returns:
        The mapped tree.

    Raises:
        StructureError: Another tree lacks a node or key of the first, or the tree
            contains a reference cycle; the message names the path.
    """
    memo: Cache | None = {} if cache else None
    if walk is not None:
        step: Walk = ExcludeWalk(walk, f, exclude)
        if memo is not None:
            step = CachedWalk(step, prune=prune, cache=memo)
        return execute(step, tree, *rest)
    if exclude is not isleaf:
        return map_tree(f, tree, rest, exclude=exclude, cache=memo, prune=prune)
    try:
        if rest:
            return _fast_map_many(f, tree, rest, memo, prune)
        return _fast_map(f, tree, memo, prune)
    except (StructureError, ContainerDefinitionError) as err:
        # The fast path does not track paths: find the error again, with its path,
        # without calling f (f may have side effects).
        try:
            map_tree(_noop, tree, rest, exclude=None, cache={} if cache else None, prune=prune)
        except (StructureError, ContainerDefinitionError) as located:
            raise located from None
        raise err


@overload
def fmap_with_path(
    f: Callable[[KeyPath, Any], Any],
    tree: Any,
    /,
    *,
    exclude: Callable[[KeyPath, Any], bool] | None = ...,
    cache: bool = ...,
    prune: Any = ...,
) -> Any: ...


@overload
def fmap_with_path(
    f: Callable[..., Any],
    tree: Any,
    /,
    *rest: Any,
    exclude: Callable[[KeyPath, Any], bool] | None = ...,
    cache: bool = ...,
    prune: Any = ...,
) -> Any: ...


def fmap_with_path(
    f: Callable[..., Any],
    tree: Any,
    /,
    *rest: Any,
    exclude: Callable[[KeyPath, Any], bool] | None = None,
    cache: bool = True,
    prune: Any = UNSET,
) -> Any:
    """Like ``fmap``, with the key path: ``f(path, leaf, *leaves_of_rest)``.

    ``exclude(path, value)`` (default: ``value`` is a leaf) says where ``f`` is called.

    Examples:
        >>> import containers as ct
        >>> ct.fmap_with_path(lambda p, v: f"{ct.keystr(p)}={v}", {"a": [1, 2]})
        {'a': ["['a'][0]=1", "['a'][1]=2"]}
    """
    memo: Cache | None = {} if cache else None
    return map_tree(
        f,
        tree,
        rest,
        exclude=exclude,
        cache=memo,
        prune=prune,
        with_path=True,
        op="fmap_with_path",
    )


@overload
def fmapstructure(
    f: Callable[[Any], Any],
    tree: Any,
    /,
    *,
    exclude: Callable[[Any], bool] = ...,
    cache: bool = ...,
    prune: Any = ...,
) -> Any: ...


@overload
def fmapstructure(
    f: Callable[..., Any],
    tree: Any,
    /,
    *rest: Any,
    exclude: Callable[[Any], bool] = ...,
    cache: bool = ...,
    prune: Any = ...,
) -> Any: ...


def fmapstructure(
    f: Callable[..., Any],
    tree: Any,
    /,
    *rest: Any,
    exclude: Callable[[Any], bool] = isleaf,
    cache: bool = True,
    prune: Any = UNSET,
) -> Any:
    """Like ``fmap`` with ``walk=StructuralWalk()``: containers become plain dicts.

    Containers and namedtuples become dicts keyed by field name; tuples, lists and
    dicts stay tuples, lists and dicts. Sharing and ``prune`` work as in ``fmap``.

    Examples:
        >>> import containers as ct
        >>> @ct.container(children=["w", "b"])
        ... class Affine:
        ...     w: float
        ...     b: float
        ...     name: str = "aff"
        >>> ct.fmapstructure(lambda v: v * 2, [Affine(1.0, 2.0)])
        [{'w': 2.0, 'b': 4.0}]
    """
    memo: Cache | None = {} if cache else None
    return map_tree(
        f,
        tree,
        rest,
        exclude=exclude,
        cache=memo,
        prune=prune,
        structural=True,
        op="fmapstructure",
    )


def fcollect(tree: Any, /, exclude: Callable[[Any], bool] = lambda v: False) -> list[Any]:
    """Every node and leaf of ``tree``, depth-first pre-order (parents first).

    Mutable objects appear once (by identity); values appear every time. An excluded
    value and its subtree are dropped.

    Examples:
        >>> import containers as ct
        >>> ct.fcollect({"a": [1, 2], "b": 3})
        [{'a': [1, 2], 'b': 3}, [1, 2], 1, 2, 3]
        >>> ct.fcollect({"a": [1, 2], "b": 3}, exclude=lambda v: isinstance(v, list))
        [{'a': [1, 2], 'b': 3}, 3]
    """
    return collect(tree, exclude)
