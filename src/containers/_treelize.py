"""treelize (treevalue's func_treelize), subside and rise: lift a function on leaves.

A thin operation over the engine: ``map_tree`` walks the arguments with ``_Align``, an
alignment mode that decides, at each position, which keys the tree arguments share and
how the result node is built. It never recurses itself; the engine's acceleration for
two plain dict trees (``_engine._pair``) hands every other node to ``map_tree``, and
``map_tree`` again finds any error with its full path.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from containers._align import _ABSENT, MODES, NOT_ALLOWED, _Align
from containers._engine._core import map_tree
from containers._engine._pair import fast_pair
from containers._errors import (
    not_callable_error,
)
from containers._parallel import WITH_KEYWORDS, check_options, executor_map, fill
from containers._registry import (
    DICT,
    IMMUTABLE_LEAVES,
    LIST,
    TUPLE,
    kind_of,
)

__all__ = ["MODES", "NOT_ALLOWED", "rise", "subside", "treelize"]


def _make_leaf(
    func: Callable[..., Any],
    n_positional: int,
    keywords: Sequence[str],
    bundles: Sequence[tuple[int, Any, Any, int]],
    missing: Any,
) -> Callable[..., Any]:
    """The function the engine calls with every argument's value at a leaf position:
    absent values become ``missing`` (a factory is called once per absent value),
    subsided bundles are packed again, keywords are passed by name."""
    factory: Callable[[], Any] | None
    if missing is NOT_ALLOWED:
        factory = None
    elif callable(missing):
        factory = missing
    else:
        factory = functools.partial(lambda v: v, missing)
    if not keywords and not bundles:
        if factory is None:
            return func

        def call_fill(*vals: Any) -> Any:
            return func(*[factory() if v is _ABSENT else v for v in vals])

        return call_fill

    def call(*vals: Any) -> Any:
        if factory is not None:
            vals = tuple(factory() if v is _ABSENT else v for v in vals)
        if bundles:
            packed: list[Any] = []
            at = 0
            for start, kind, aux, count in bundles:
                packed.extend(vals[at:start])
                packed.append(kind.unflatten(aux, vals[start : start + count]))
                at = start + count
            packed.extend(vals[at:])
            vals = tuple(packed)
        args = vals[:n_positional]
        kwargs = dict(zip(keywords, vals[n_positional:]))
        return func(*args, **kwargs)

    return call


# --- subside and rise --------------------------------------------------------------------

_SUBSIDED = (LIST, TUPLE, DICT)


def _subsidable(value: Any) -> tuple[Any, Sequence[Any], Any] | None:
    """``(kind, children, aux)`` for a list/tuple/dict with a node among its children."""
    kind = kind_of(value)
    if kind not in _SUBSIDED:
        return None
    kids, aux = kind.flatten(value)
    if not any(kind_of(k) is not None for k in kids):
        return None
    return kind, kids, aux


def subside(value: Any, /) -> Any:
    """Push a list, tuple or dict of trees down into the trees' leaves.

    ``value`` is one level of list/tuple/dict whose elements are trees; the result is a
    tree shaped like them (strict alignment, leaves among the elements inherited) whose
    leaves are lists/tuples/dicts of the elements' leaves. A value that is not a
    list/tuple/dict, or holds no node, is returned unchanged. ``rise`` is the reverse.

    Examples:
        >>> import containers as ct
        >>> ct.subside([{"a": 1, "b": 2}, {"a": 3, "b": 4}])
        {'a': [1, 3], 'b': [2, 4]}
        >>> ct.subside({"x": {"a": 1}, "y": {"a": 2}, "k": "tag"})
        {'a': {'x': 1, 'y': 2, 'k': 'tag'}}
        >>> ct.subside((1, 2))
        (1, 2)

    Args:
        value: A list, tuple or dict of trees.

    Returns:
        A tree whose leaves are lists/tuples/dicts, or ``value`` unchanged.

    Raises:
        StructureError: The elements do not have the same structure (a
            ``StructureKeyError``, also a ``KeyError``, when keys differ); the message
            names the path and the elements.
    """
    found = _subsidable(value)
    if found is None:
        return value
    kind, kids, aux = found
    keys = kind.keys(aux, len(kids))
    align = _Align("strict", True, False, [f"element {k}" for k in keys], "subside")

    def pack(*vals: Any) -> Any:
        return kind.unflatten(aux, vals)

    return map_tree(pack, kids[0], kids[1:], exclude=None, cache=None, op="subside", align=align)


class _Slot:
    """A leaf standing for the ``index``-th value to rise (a plain object: a leaf)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def _rise_slots(skeleton: Any, values: Sequence[Any]) -> Any | None:
    """The node of trees lifted from ``values`` (all nodes of one shape) into the
    ``_Slot`` leaves of ``skeleton``; ``None`` when they cannot rise."""
    if not values:
        return None
    kind = kind_of(values[0])
    if kind is None:
        return None
    kids0, aux0 = kind.flatten(values[0])
    n = len(kids0)
    if n == 0:
        return None
    keys0 = kind.keys(aux0, n)
    table = [kids0]
    for v in values[1:]:
        if kind_of(v) is not kind:
            return None
        kids, aux = kind.flatten(v)
        if len(kids) != n or kind.keys(aux, n) != keys0 or not kind.aux_eq(aux0, aux):
            return None
        table.append(kids)
    trees = [
        map_tree(lambda s, j=j: table[s.index][j], skeleton, exclude=None, cache=None, op="rise")
        for j in range(n)
    ]
    return kind.unflatten(aux0, trees)


def rise_results(skeleton: Any, values: Sequence[Any]) -> Any:
    """treelize's ``rise=True``: ``values`` (the results, at the ``_Slot`` leaves of
    ``skeleton``) lifted above the tree if they can rise, else put in place."""
    lifted = _rise_slots(skeleton, values)
    if lifted is not None:
        return lifted
    return map_tree(lambda s: values[s.index], skeleton, exclude=None, cache=None, op="treelize")


def _is_bottom(value: Any) -> bool:
    """A leaf, or a node with children that are all leaves: what ``rise`` lifts."""
    kind = kind_of(value)
    if kind is None:
        return True
    kids = kind.flatten(value)[0]
    return len(kids) > 0 and all(kind_of(k) is None for k in kids)


def rise(tree: Any, /) -> Any:
    """Lift the bottom level of ``tree`` above it: the reverse of ``subside``.

    When every leaf of ``tree`` sits in a bottom node (a tuple, list, dict or other node
    whose children are all leaves) and all those nodes have one shape (same type, same
    keys or length), the result is one such node whose children are trees shaped like
    ``tree``. Otherwise ``tree`` is returned unchanged. Nodes with no children
    (``{}``, ``()``, ``None``) are copied into every lifted tree.

    Examples:
        >>> import containers as ct
        >>> ct.rise({"a": (1, 2), "x": {"c": (3, 4)}})
        ({'a': 1, 'x': {'c': 3}}, {'a': 2, 'x': {'c': 4}})
        >>> ct.rise({"a": [1, 3], "b": [2, 4]})
        [{'a': 1, 'b': 2}, {'a': 3, 'b': 4}]
        >>> ct.rise({"a": (1, 2), "b": 3})
        {'a': (1, 2), 'b': 3}

    Args:
        tree: A tree whose bottom nodes share one shape.

    Returns:
        The lifted node of trees, or ``tree`` unchanged.

    Raises:
        StructureError: ``tree`` contains a reference cycle; the message names the path.
    """
    found: list[Any] = []

    def slot(value: Any) -> Any:
        found.append(value)
        return _Slot(len(found) - 1)

    skeleton = map_tree(slot, tree, exclude=_is_bottom, cache=None, op="rise")
    if any(kind_of(v) is None for v in found):
        return tree
    lifted = _rise_slots(skeleton, found)
    return tree if lifted is None else lifted


# --- the decorator -----------------------------------------------------------------------


def _check_mode(mode: Any) -> str:
    if not isinstance(mode, str):
        hint = (
            " treelize takes options and returns the decorator: write @ct.treelize() "
            "with parentheses."
            if callable(mode)
            else ""
        )
        raise TypeError(
            f"treelize: mode must be a string, one of {', '.join(map(repr, MODES))}; "
            f"got {type(mode).__qualname__}.{hint}"
        )
    name = mode.lower()
    if name not in MODES:
        raise ValueError(
            f"treelize: unknown mode {mode!r}. Modes are {', '.join(map(repr, MODES))} "
            f"(in any letter case)."
        )
    return name


def treelize(
    mode: str = "strict",
    *,
    inherit: bool = True,
    missing: Any = NOT_ALLOWED,
    rise: bool = False,
    subside: bool = False,
    executor: Any = None,
    chunksize: int | None = None,
    progress: Any = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Lift a function on leaves to trees: treevalue's ``func_treelize`` for every node.

    The decorated function takes trees wherever the original took values: every
    positional and keyword argument that is a node is a tree argument, the function
    runs once per aligned leaf position, and the results are assembled in the trees'
    structure. Where the arguments' nodes meet, ``mode`` decides the keys:

    - ``"strict"``: all key sets equal, else a ``StructureKeyError`` (also a
      ``KeyError``);
    - ``"inner"``: the keys every tree argument has;
    - ``"outer"``: the keys any tree argument has, absent values from ``missing``;
    - ``"left"``: the first tree argument's keys.

    Arguments are ordered positional first, then keywords sorted by name; the first one
    that has a node at a position decides its type, kept fields and key order (then
    keys new in later arguments, in their order). Dicts align by key; tuples, lists and
    deques by position (``inner``: the shortest, ``outer``: the longest); containers,
    namedtuples and registered types have fixed children, so they must have the same
    class and keys. With ``inherit`` a leaf argument, or a leaf facing a subtree, goes
    to every position below it. ``subside=True`` first turns each list/tuple/dict
    argument of trees into a tree of lists/tuples/dicts; ``rise=True`` turns a result
    whose leaves are all nodes of one shape into that node of trees. ``executor=``,
    ``chunksize=`` and ``progress=`` run the calls on an executor, as ``fmap``'s do.

    Examples:
        >>> import containers as ct
        >>> @ct.treelize()
        ... def add(a, b):
        ...     return a + b
        >>> add({"a": 1, "x": (2, 3)}, {"a": 10, "x": (20, 30)})
        {'a': 11, 'x': (22, 33)}
        >>> add({"a": 1, "b": 2}, 100)
        {'a': 101, 'b': 102}
        >>> ct.treelize("outer", missing=0)(add)({"a": 1}, {"b": 2})
        {'a': 1, 'b': 2}
        >>> ct.treelize("inner")(add)([1, 2, 3], [10, 20])
        [11, 22]

    Args:
        mode: ``"strict"``, ``"inner"``, ``"outer"`` or ``"left"``, in any case.
        inherit: Pass leaf arguments to every position below them; with ``False`` a
            leaf facing a subtree raises ``TypeError``.
        missing: The value for an absent key (``outer``, ``left``), or a zero-argument
            factory called once per absent leaf. By default absent keys are errors.
        rise: Lift the results' common shape above the tree (see ``rise``).
        subside: Push list/tuple/dict arguments of trees into the leaves first.
        executor: Where to run the calls: a ``concurrent.futures`` executor or a dask
            Client (docs/parallel.md).
        chunksize: Leaf positions per task (default: about four tasks per worker).
        progress: A function ``(done, total)``, or True for a bar on stderr.

    Returns:
        A decorator; the decorated function keeps the original's name, docstring and
        signature (``functools.wraps``).

    Raises:
        ValueError: ``mode`` is not one of the four.
        TypeError: ``mode`` is not a string.
    """
    name = _check_mode(mode)
    if name == "strict" and missing is not NOT_ALLOWED:
        warnings.warn(
            "treelize: missing= is set, but mode='strict' never uses it: in strict mode "
            "different keys raise StructureError (a KeyError). Drop missing=, or use mode='outer' "
            "or 'left'.",
            RuntimeWarning,
            stacklevel=2,
        )
    if name == "outer" and missing is NOT_ALLOWED:
        warnings.warn(
            "treelize: mode='outer' without missing=: a key absent from one tree "
            "argument raises StructureError (a KeyError). Pass missing= (a value, or a zero-argument "
            "factory) to fill absent values.",
            RuntimeWarning,
            stacklevel=2,
        )
    allow_missing = missing is not NOT_ALLOWED
    # The fast path (two plain dict trees) passes an immutable missing value itself: a
    # constant factory would return that very object at every absent leaf anyway.
    fast_missing: Any = missing if type(missing) in IMMUTABLE_LEAVES else _ABSENT
    do_rise = rise
    do_subside = subside
    if executor is not None or chunksize is not None or progress is not None:
        check_options("treelize", executor, chunksize, progress)

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(func):
            raise not_callable_error(
                func, "treelize", "the decorated value", "Decorate a def, or call {op}(mode)(f)"
            )

        def lift(
            func: Callable[..., Any], args: Any, kwargs: Any, do_rise: bool, fast: bool
        ) -> Any:
            keywords = sorted(kwargs)
            values = [*args, *(kwargs[k] for k in keywords)]
            names = [f"argument {i}" for i in range(len(args))]
            names += [f"argument {k!r}" for k in keywords]
            bundles: list[tuple[int, Any, Any, int]] = []
            if do_subside:
                values, names, bundles = _expand(values, names)
            if not values:
                return func()
            leaf = _make_leaf(func, len(args), keywords, bundles, missing)
            found: list[Any] = []
            if do_rise:
                plain = leaf

                def leaf(*vals: Any) -> Any:
                    found.append(plain(*vals))
                    return _Slot(len(found) - 1)

            align = _Align(name, inherit, allow_missing, names, "treelize")
            if (
                fast
                and len(values) == 2
                and inherit
                and not kwargs
                and not bundles
                and not do_rise
                and (fast_missing is not _ABSENT or not allow_missing)
            ):
                result = fast_pair(func, leaf, values[0], values[1], align, fast_missing, _ABSENT)
            else:
                result = map_tree(
                    leaf,
                    values[0],
                    values[1:],
                    exclude=None,
                    cache=None,
                    op="treelize",
                    align=align,
                )
            if do_rise:
                return rise_results(result, found)
            return result

        @functools.wraps(func)
        def treelized(*args: Any, **kwargs: Any) -> Any:
            if executor is None:
                return lift(func, args, kwargs, do_rise, _FAST)
            return _on_executor(
                func,
                lambda g, plain: lift(g, args, kwargs, False, not plain and _FAST),
                do_rise,
                executor,
                chunksize,
                progress,
            )

        return treelized

    return decorate


def _expand(
    values: list[Any], names: list[str]
) -> tuple[list[Any], list[str], list[tuple[int, Any, Any, int]]]:
    """subside=True: each list/tuple/dict argument holding trees becomes several tree
    arguments (its elements), packed again at every leaf."""
    out: list[Any] = []
    out_names: list[str] = []
    bundles: list[tuple[int, Any, Any, int]] = []
    for v, nm in zip(values, names):
        found = _subsidable(v)
        if found is None:
            out.append(v)
            out_names.append(nm)
            continue
        kind, kids, aux = found
        bundles.append((len(out), kind, aux, len(kids)))
        out.extend(kids)
        out_names.extend(f"{nm}{k}" for k in kind.keys(aux, len(kids)))
    return out, out_names, bundles


# --- the fast path: two plain dict trees -------------------------------------------------


#: Whether two-argument calls may take ``fast_pair`` (tests switch it off to run the
#: engine, its twin, on the same cases).
_FAST = True


def _on_executor(
    func: Callable[..., Any],
    serial: Callable[[Callable[..., Any], bool], Any],
    rise: bool,
    executor: Any,
    chunksize: Any,
    progress: Any,
) -> Any:
    """A treelized ``func`` called with ``executor=``: ``serial(g, plain)`` lifts ``g``
    over the call's arguments (without rising); ``rise`` lifts the results after."""

    def rebuild(recorded: Any, results: list[Any]) -> Any:
        return rise_results(recorded, results) if rise else fill(recorded, results)

    return executor_map(
        "treelize",
        func,
        executor,
        chunksize,
        progress,
        WITH_KEYWORDS,
        serial,
        slots=rise,
        rebuild=rebuild if rise else None,
    )
