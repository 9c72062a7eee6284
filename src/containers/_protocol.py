"""The Container protocol (Nx) and the one-level operations over every node kind.

This stage defines what a container is to the outside (``Container``), and
``traverse``/``reduce``/``functor``/``children``/``isleaf``, each of which looks at one
node and its immediate children. Nothing here recurses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from containers._errors import StructureError, counted, not_callable_error, short_repr
from containers._paths import AttrKey
from containers._registry import KINDS, kind_of

__all__ = ["ACC_USAGE", "Container", "children", "functor", "isleaf", "reduce", "traverse"]

A = TypeVar("A")

#: How the functions with an accumulator take their arguments (Nx's order), for the
#: error when ``fun`` is not callable (``composite`` uses it too).
ACC_USAGE = "Pass the tree, the accumulator, then the function: {op}(x, acc, fun)"


@runtime_checkable
class Container(Protocol):
    """A node that knows its children: what ``@container`` generates, or hand-written.

    A class implementing these four methods is a node in every operation.

    Examples:
        >>> import containers as ct
        >>> @ct.container
        ... class Pair:
        ...     a: int
        ...     b: int
        >>> isinstance(Pair(1, 2), ct.Container)
        True
        >>> Pair(1, 2).__container_serialize__()[1:]
        ([('a', 1), ('b', 2)], {})
    """

    def __container_traverse__(
        self, acc: Any, fun: Callable[[Any, Any], tuple[Any, Any]], /
    ) -> tuple[Any, Any]:
        """Map ``fun(child, acc) -> (new_child, acc)`` over the children; rebuild."""
        ...

    def __container_reduce__(self, acc: Any, fun: Callable[[Any, Any], Any], /) -> Any:
        """Fold ``fun(child, acc) -> acc`` over the children."""
        ...

    def __container_serialize__(self) -> tuple[str, list[tuple[Any, Any]], dict[str, Any]]:
        """Return ``(type_name, [(key, child), ...], metadata)``."""
        ...

    @classmethod
    def __container_deserialize__(
        cls, children: list[tuple[Any, Any]], metadata: dict[str, Any], /
    ) -> Any:
        """Rebuild from what ``__container_serialize__`` gave."""
        ...


def traverse(x: Any, acc: A, fun: Callable[[Any, A], tuple[Any, A]], /) -> tuple[Any, A]:
    """Map ``fun(child, acc) -> (new_child, acc)`` over ``x``'s children, one level deep.

    Children are visited in order (dicts by sorted key) and ``x`` is rebuilt with the
    new children. On a leaf, ``fun(x, acc)`` is called on ``x`` itself (Nx).

    Examples:
        >>> import containers as ct
        >>> ct.traverse({"b": 2, "a": 1}, 0, lambda v, n: (v * 10, n + 1))
        ({'b': 20, 'a': 10}, 2)
        >>> ct.traverse(5, [], lambda v, seen: (v, seen + [v]))
        (5, [5])

    Returns:
        ``(new_x, acc)``.

    Raises:
        TypeError: ``fun`` is not callable (the arguments are in another order, say).
    """
    if not callable(fun):
        raise not_callable_error(fun, "traverse", "fun", ACC_USAGE)
    kind = kind_of(x)
    if kind is None:
        return fun(x, acc)
    method = getattr(kind.type, "__container_traverse__", None)
    if method is not None:

        def checked(child: Any, acc: Any) -> tuple[Any, Any]:
            return fun_pair(fun(child, acc), "traverse")

        return method(x, acc, checked)  # type: ignore[no-any-return]
    kids, aux = kind.flatten(x)
    out = []
    for child in kids:
        new, acc = fun_pair(fun(child, acc), "traverse")
        out.append(new)
    return kind.unflatten(aux, out), acc


def fun_pair(result: Any, op: str, where: str = "") -> tuple[Any, Any]:
    """``result`` of a traverse ``fun`` as ``(new_child, acc)``, or the error saying what
    ``fun`` must return (``where``: the leaf's place, for recursive traversals)."""
    try:
        new, acc = result
    except (TypeError, ValueError):
        raise TypeError(
            f"{op}: fun must return a pair (new_child, acc), got {short_repr(result)}{where}. "
            f"A fun that returns only the accumulator belongs to "
            f"{op.replace('traverse', 'reduce')}."
        ) from None
    return new, acc


def reduce(x: Any, acc: A, fun: Callable[[Any, A], A], /) -> A:
    """Fold ``fun(child, acc) -> acc`` over ``x``'s children, one level deep.

    On a leaf, ``fun(x, acc)`` is called on ``x`` itself (Nx).

    Examples:
        >>> import containers as ct
        >>> ct.reduce((1, [2, 3], 4), [], lambda child, acc: acc + [child])
        [1, [2, 3], 4]

    Raises:
        TypeError: ``fun`` is not callable (the arguments are in another order, say).
    """
    if not callable(fun):
        raise not_callable_error(fun, "reduce", "fun", ACC_USAGE)
    kind = kind_of(x)
    if kind is None:
        return fun(x, acc)
    method = getattr(kind.type, "__container_reduce__", None)
    if method is not None:
        return method(x, acc, fun)  # type: ignore[no-any-return]
    for child in kind.flatten(x)[0]:
        acc = fun(child, acc)
    return acc


def isleaf(x: Any, /) -> bool:
    """Whether ``x`` is a leaf: not a node. ``None`` and empty containers are nodes.

    Examples:
        >>> import numpy as np, containers as ct
        >>> ct.isleaf(1.0), ct.isleaf(np.zeros(3)), ct.isleaf([]), ct.isleaf(None)
        (True, True, False, False)
    """
    t = type(x)
    if t in KINDS:
        return False
    return kind_of(x) is None


def functor(x: Any, /) -> tuple[Any, Callable[[Any], Any]]:
    """Split ``x`` into its children and a function that rebuilds it (Functors.jl).

    ``children`` is a dict keyed by field name for containers (declared or
    hand-written; ``{}`` for one without children), a tuple for tuples (namedtuples
    too), lists and other sequences, a dict for mappings, and ``()`` for leaves and
    ``None``. ``rebuild(new_children)`` takes the same shape or a sequence in child
    order; kept fields come from ``x``, reset fields get their defaults.

    Examples:
        >>> import containers as ct
        >>> @ct.container(children=["w"])
        ... class Scale:
        ...     w: float
        ...     label: str = "s"
        >>> kids, rebuild = ct.functor(Scale(2.0, "x"))
        >>> kids
        {'w': 2.0}
        >>> rebuild({"w": 3.0}), rebuild([4.0])
        (Scale(w=3.0, label='x'), Scale(w=4.0, label='x'))
        >>> ct.functor(7)[0]
        ()
    """
    kind = kind_of(x)
    if kind is None:
        return (), lambda new=(): x
    kids, aux = kind.flatten(x)
    n = len(kids)
    keys = kind.keys(aux, n)
    raws = [k.raw for k in keys]
    view: Any
    if isinstance(x, Mapping):
        view = dict(x)
    elif not isinstance(x, tuple) and (
        hasattr(kind.type, "__container_serialize__")  # declared or hand-written, even childless
        or (keys and all(isinstance(k, AttrKey) for k in keys))
    ):
        view = dict(zip(raws, kids))  # fields by name: declared and hand-written containers
    else:
        view = tuple(kids)

    def rebuild(new: Any) -> Any:
        if isinstance(new, Mapping):
            missing = [r for r in raws if r not in new]
            if missing:
                raise StructureError(
                    f"functor rebuild of {kind.label}: the new children lack "
                    f"{', '.join(map(repr, missing))}. Give every child: {raws!r}."
                )
            extra = [k for k in new if k not in raws]
            if extra:  # a kept field or a new key: dropping it silently would lose it
                raise StructureError(
                    f"functor rebuild of {kind.label}: the new children hold "
                    f"{', '.join(map(repr, extra))}, which "
                    f"{'is not one' if len(extra) == 1 else 'are not'} of its children "
                    f"{raws!r}. A rebuild takes exactly the children functor gave; kept and "
                    f"reset fields come from the original object."
                )
            ordered: Sequence[Any] = [new[r] for r in raws]
        else:
            ordered = list(new)
            if len(ordered) != n:
                raise StructureError(
                    f"functor rebuild of {kind.label}: expected "
                    f"{counted(n, 'child', 'children')}, got "
                    f"{len(ordered)}. Pass them in child order, or as {type(view).__name__}."
                )
        return kind.unflatten(aux, ordered)

    return view, rebuild


def children(x: Any, /) -> Any:
    """Return ``functor(x)[0]``: the immediate children of ``x``.

    Examples:
        >>> import containers as ct
        >>> ct.children({"b": 1, "a": 2}), ct.children([1, 2]), ct.children(3.0)
        ({'b': 1, 'a': 2}, (1, 2), ())
    """
    return functor(x)[0]
