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
from containers._flatten import flatten, leaves
from containers._paths import keystr
from containers._protocol import ACC_USAGE, fun_pair

__all__ = ["count", "flatten_list", "reduce", "traverse"]

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
