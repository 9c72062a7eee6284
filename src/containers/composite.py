"""Recursive traversals with an accumulator, ``fun`` on leaves only (Nx.Defn.Composite).

Examples:
    >>> import containers as ct
    >>> from containers import composite
    >>> composite.traverse({"a": 1, "b": (2, 3)}, 0, lambda v, acc: (v * 10, acc + v))
    ({'a': 10, 'b': (20, 30)}, 6)
    >>> composite.reduce([1, [2, 3]], [], lambda v, acc: acc + [v])
    [1, 2, 3]
    >>> composite.count({"a": 1, "b": (2, None)})
    2
    >>> composite.flatten_list([(1, 2), {"k": 3}], tail=[4])
    [1, 2, 3, 4]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from containers._errors import not_callable_error
from containers._flatten import flatten, flatten_with_path, leaves
from containers._paths import keystr
from containers._protocol import ACC_USAGE, Template, _produce, fun_pair, template_of
from containers._registry import kind_of

__all__ = ["count", "flatten_list", "lazy_traverse", "reduce", "traverse"]

A = TypeVar("A")
T = TypeVar("T")


def traverse(x: T, acc: A, fun: Callable[[Any, A], tuple[Any, A]], /) -> tuple[T, A]:
    """Map ``fun(leaf, acc) -> (new_leaf, acc)`` over every leaf, threading ``acc``.

    Leaves are visited in flatten order; the tree is rebuilt with the new leaves.

    Raises:
        TypeError: ``fun`` is not callable (the arguments are in another order, say).
    """
    if not callable(fun):
        raise not_callable_error(fun, "composite.traverse", "fun", ACC_USAGE)
    old, s = flatten(x)
    new: list[Any] = []
    for leaf in old:
        result = fun(leaf, acc)
        try:
            value, acc = result
        except (TypeError, ValueError):
            here = f" at {keystr(s.paths()[len(new)])!r}" if s.num_nodes > 1 else ""
            value, acc = fun_pair(result, "composite.traverse", here)  # raises, with why
        new.append(value)
    return s.unflatten(new), acc


def reduce(x: Any, acc: A, fun: Callable[[Any, A], A], /) -> A:
    """Fold ``fun(leaf, acc) -> acc`` over every leaf, in flatten order.

    Raises:
        TypeError: ``fun`` is not callable (the arguments are in another order, say).
    """
    if not callable(fun):
        raise not_callable_error(fun, "composite.reduce", "fun", ACC_USAGE)
    for leaf in leaves(x):
        acc = fun(leaf, acc)
    return acc


def count(x: Any, /) -> int:
    """The number of leaves of ``x``."""
    return len(leaves(x))


def flatten_list(xs: Iterable[Any], /, tail: Iterable[Any] = ()) -> list[Any]:
    """The leaves of every tree in ``xs``, in order, followed by ``tail``."""
    out: list[Any] = []
    for x in xs:
        out.extend(leaves(x))
    out.extend(tail)
    return out


def _foreign_lazy(v: Any) -> bool:
    return hasattr(type(v), "__container_lazy_traverse__") and kind_of(v) is None


def lazy_traverse(
    x: T, acc: A, fun: Callable[[Template, Callable[[], Any], A], tuple[Any, A]], /
) -> tuple[T, A]:
    """Map ``fun(template, produce, acc) -> (new_leaf, acc)`` over every leaf, lazily.

    The recursive ``containers.lazy_traverse`` (Nx.LazyContainer.traverse over a
    whole data structure): each leaf's ``Template`` has its full key path, shape and
    dtype, and ``produce()`` gives the leaf (reads it, for a ``LazyArray``). A
    hand-written lazy container inside the tree (a class with
    ``__container_lazy_traverse__`` that is not registered) is asked for its children,
    whose paths continue its own.

    Examples:
        >>> import numpy as np
        >>> import containers as ct
        >>> from containers import composite
        >>> tree = {"layers": [np.zeros(2), np.zeros((3, 4))], "step": 1}
        >>> def small(template, produce, acc):
        ...     keep = template.shape is None or template.shape[0] < 3
        ...     return (produce() if keep else None), acc + (0 if keep else 1)
        >>> composite.lazy_traverse(tree, 0, small)
        ({'layers': [array([0., 0.]), None], 'step': 1}, 1)

    Raises:
        TypeError: ``fun`` is not callable, or does not return a pair.
    """
    if not callable(fun):
        raise not_callable_error(fun, "composite.lazy_traverse", "fun", ACC_USAGE)
    pairs, s = flatten_with_path(x, is_leaf=_foreign_lazy)
    new: list[Any] = []
    for path, leaf in pairs:
        if _foreign_lazy(leaf):

            def inner(t: Template, produce: Callable[[], Any], acc: Any, path: Any = path) -> Any:
                return fun(Template((*path, *t.path), t.shape, t.dtype), produce, acc)

            value, acc = leaf.__container_lazy_traverse__(acc, inner)
        else:
            here = f" at {keystr(path)!r}" if path else ""
            value, acc = fun_pair(
                fun(template_of(leaf, path), _produce(leaf), acc), "composite.lazy_traverse", here
            )
        new.append(value)
    return s.unflatten(new), acc
