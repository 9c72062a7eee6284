"""The fmap family (Functors.jl): fmap, fmap_with_path, fmapstructure, fcollect.

Thin operations over the engine: ``_engine._core.map_tree`` and ``collect`` hold the
semantics; the default ``fmap`` (exclude=isleaf, no custom walk) and ``fcollect``
run the engine's accelerations (``_engine._fast``), which agree with them. Nothing
here recurses or looks inside a node type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from containers._engine._collect import collect, fast_collect
from containers._engine._core import UNSET, Memo, map_tree
from containers._engine._fast import fast_map
from containers._engine._walks import CachedWalk, ExcludeWalk, Walk, run_walk
from containers._errors import not_callable_error, short_repr
from containers._parallel import (
    ONE,
    PRUNED,
    STAR,
    check_options,
    executor_map,
    fmap_with_path_on_executor,
)
from containers._paths import KeyPath
from containers._protocol import isleaf
from containers._where import fmap_where
from containers.filters import Filter

__all__ = ["fcollect", "fmap", "fmap_with_path", "fmapstructure"]

T = TypeVar("T")

_USAGE = "Pass the function first, then the tree: {op}(f, tree, *more_trees)"
_EXCLUDE_USAGE = "Pass exclude=a predicate value -> bool that says where {op} calls f"
_PATH_EXCLUDE_USAGE = (
    "Pass exclude=a predicate (path, value) -> bool that says where {op} calls f, or None"
)
_COLLECT_USAGE = "Pass exclude=a predicate value -> bool; what it excludes is dropped"
_WALK_USAGE = "Pass walk=a walk object, called as walk(recurse, x, *ys), e.g. ct.DefaultWalk()"


def _check_cache(op: str, cache: object, prune: object) -> None:
    """Check ``cache=`` and ``prune=`` at ``op``'s entry point.

    Raises:
        TypeError: ``cache`` is not a bool (a string such as ``"no"`` is true), or
            ``prune`` is given with ``cache=False``, where nothing is found twice.
    """
    if cache not in (True, False):
        raise TypeError(f"{op}: cache= must be True or False, got {short_repr(cache)}.")
    if not cache and prune is not UNSET:
        raise TypeError(
            f"{op}: prune= replaces the repeats the identity cache finds, and with "
            f"cache=False it finds none. Keep cache=True, or drop prune=."
        )


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
    where: Filter = ...,
    executor: Any = ...,
    chunksize: int | None = ...,
    progress: Any = ...,
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
    where: Filter = ...,
    executor: Any = ...,
    chunksize: int | None = ...,
    progress: Any = ...,
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
    where: Any = UNSET,
    executor: Any = None,
    chunksize: int | None = None,
    progress: Any = None,
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
    ``prune=v`` replaces every repeat of a cached object with ``v``. With several
    trees the cache is keyed by the first tree's objects (Functors.jl): a repeat gets
    the first result and the other trees are not read there, so tied weights updated
    with ``fmap(step, params, grads)`` stay tied, with the gradient at their first
    occurrence; ``cache=False`` maps every position with its own values.

    ``where=filter`` (``containers.filters``) maps only the leaves that match it,
    called with each leaf's key path; the others stay as they are. A shared object is
    mapped (or kept) as at its first occurrence; ``cache=False`` decides per path.

    A node's children are read as they are mapped, as in a comprehension, so ``f``
    must not add or remove children of the tree it maps: Python then raises
    ``RuntimeError`` (a dict or deque changed size) or ``KeyError`` (a dict's key was
    removed before it was reached).

    ``executor=`` (a ``concurrent.futures`` pool or a ``dask.distributed.Client``) runs
    the calls of ``f`` there, ``chunksize`` leaves per task, with the same result and
    the same errors (docs/parallel.md); ``progress`` reports ``(done, total)``.

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
        >>> ct.fmap(lambda v: -v, {"w": 1.0, "n": 2}, where=float)
        {'w': -1.0, 'n': 2}
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
        where: Map only the leaves this filter matches (not with ``exclude``/``walk``).
        executor: Where to run the calls of ``f``: an executor or a dask Client.
        chunksize: Leaves per task (default: about four tasks per worker).
        progress: A function ``(done, total)``, or True for a bar on stderr.

    Returns:
        The mapped tree.

    Raises:
        StructureError: Another tree lacks a node or key of the first, or the tree
            contains a reference cycle; the message names the path.
        TypeError: ``f`` is not callable (the arguments are swapped, say), ``cache``
            is not a bool, or ``prune`` is given with ``cache=False``.
    """
    if not callable(f):
        raise not_callable_error(f, "fmap", "f", _USAGE)
    if not callable(exclude):
        raise not_callable_error(exclude, "fmap", "exclude", _EXCLUDE_USAGE)
    if walk is not None and not callable(walk):
        raise not_callable_error(walk, "fmap", "walk", _WALK_USAGE)
    _check_cache("fmap", cache, prune)
    if executor is not None or chunksize is not None or progress is not None:
        return _on_executor(
            f, tree, rest, exclude, walk, cache, prune, where, executor, chunksize, progress
        )
    if where is not UNSET:
        return fmap_where(
            f, tree, rest, where, exclude is not isleaf or walk is not None, cache, prune
        )
    memo: Memo | None = Memo() if cache else None
    if walk is not None:
        step: Walk = ExcludeWalk(walk, f, exclude)
        if memo is not None:
            step = CachedWalk(step, prune=prune, cache=memo)
        try:
            return run_walk(step, tree, rest, op="fmap", note=True)
        finally:
            if memo is not None:
                memo.clear()  # the tree and the results must not outlive the call
    if exclude is not isleaf:
        return map_tree(f, tree, rest, exclude=exclude, cache=memo, prune=prune)
    try:
        return fast_map(f, tree, memo, prune, ys=rest)
    finally:
        if memo is not None:
            memo.clear()


def _on_executor(
    f: Callable[..., Any],
    tree: Any,
    rest: tuple[Any, ...],
    exclude: Callable[[Any], bool],
    walk: Any,
    cache: bool,
    prune: Any,
    where_: Any,
    executor: Any,
    chunksize: Any,
    progress: Any,
) -> Any:
    """``fmap(f, tree, *rest, ..., executor=executor)`` (options checked by ``fmap``)."""
    check_options("fmap", executor, chunksize, progress)
    if walk is not None:
        raise TypeError(
            "fmap: executor= cannot be combined with walk=: a walk object calls f "
            "itself. Use exclude= or where= to choose the values f is called on."
        )
    default = exclude is isleaf and where_ is UNSET

    def serial(g: Callable[..., Any], plain: bool) -> Any:
        if plain and default:  # the accelerations do not locate; their twin does
            return map_tree(g, tree, rest, exclude=None, cache=Memo() if cache else None)
        options: dict[str, Any] = {} if where_ is UNSET else {"where": where_}
        return fmap(
            g,
            tree,
            *rest,
            exclude=exclude,
            cache=cache,
            prune=PRUNED if prune is not UNSET and not plain else UNSET,
            **options,
        )

    shape = STAR if rest else ONE
    return executor_map(
        "fmap",
        f,
        executor,
        chunksize,
        progress,
        shape,
        serial,
        slots=not default,
        prune=prune,
        tree=tree,
        cache=cache,
    )


@overload
def fmap_with_path(
    f: Callable[[KeyPath, Any], Any],
    tree: Any,
    /,
    *,
    exclude: Callable[[KeyPath, Any], bool] | None = ...,
    cache: bool = ...,
    prune: Any = ...,
    executor: Any = ...,
    chunksize: int | None = ...,
    progress: Any = ...,
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
    executor: Any = ...,
    chunksize: int | None = ...,
    progress: Any = ...,
) -> Any: ...


def fmap_with_path(
    f: Callable[..., Any],
    tree: Any,
    /,
    *rest: Any,
    exclude: Callable[[KeyPath, Any], bool] | None = None,
    cache: bool = True,
    prune: Any = UNSET,
    executor: Any = None,
    chunksize: int | None = None,
    progress: Any = None,
) -> Any:
    """Like ``fmap``, with the key path: ``f(path, leaf, *leaves_of_rest)``.

    ``exclude(path, value)`` (default: ``value`` is a leaf) says where ``f`` is called;
    ``executor=``, ``chunksize=`` and ``progress=`` are ``fmap``'s.

    Examples:
        >>> import containers as ct
        >>> ct.fmap_with_path(lambda p, v: f"{ct.keystr(p)}={v}", {"a": [1, 2]})
        {'a': ["['a'][0]=1", "['a'][1]=2"]}

    Raises:
        TypeError: ``f`` is not callable (the arguments are swapped, say), ``cache``
            is not a bool, or ``prune`` is given with ``cache=False``.
    """
    if not callable(f):
        raise not_callable_error(f, "fmap_with_path", "f", _USAGE)
    if exclude is not None and not callable(exclude):
        raise not_callable_error(exclude, "fmap_with_path", "exclude", _PATH_EXCLUDE_USAGE)
    _check_cache("fmap_with_path", cache, prune)
    if executor is not None or chunksize is not None or progress is not None:
        return fmap_with_path_on_executor(
            f, tree, rest, exclude, cache, prune, executor, chunksize, progress
        )
    memo: Memo | None = Memo() if cache else None
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

    Raises:
        TypeError: ``f`` is not callable (the arguments are swapped, say), ``cache``
            is not a bool, or ``prune`` is given with ``cache=False``.
    """
    if not callable(f):
        raise not_callable_error(f, "fmapstructure", "f", _USAGE)
    if not callable(exclude):
        raise not_callable_error(exclude, "fmapstructure", "exclude", _EXCLUDE_USAGE)
    _check_cache("fmapstructure", cache, prune)
    memo: Memo | None = Memo() if cache else None
    if exclude is isleaf and not rest:
        try:
            return fast_map(f, tree, memo, prune, structural=True, op="fmapstructure")
        finally:
            if memo is not None:
                memo.clear()
    return map_tree(
        f,
        tree,
        rest,
        exclude=None if exclude is isleaf else exclude,
        cache=memo,
        prune=prune,
        structural=True,
        op="fmapstructure",
    )


def _exclude_nothing(value: Any) -> bool:
    """fcollect's default ``exclude``: keep every value."""
    return False


def fcollect(tree: Any, /, exclude: Callable[[Any], bool] = _exclude_nothing) -> list[Any]:
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
    if exclude is _exclude_nothing:
        return fast_collect(tree)
    if not callable(exclude):
        raise not_callable_error(exclude, "fcollect", "exclude", _COLLECT_USAGE)
    return collect(tree, exclude)
