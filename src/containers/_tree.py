"""The static tree type ``Tree[T]`` and the protocol that containers fit it through.

This stage holds typing declarations only: it imports nothing from the package, and
nothing in it runs when trees are traversed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, TypeAlias, TypeVar

__all__ = ["HasChildren", "Tree"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class HasChildren(Protocol[T_co]):
    """A node whose children have type ``T_co``.

    ``@container`` defines ``__containers_children__`` on every class it declares, and
    the ``containers.mypy`` plugin types it with the union of the child fields' types,
    so that ``Pair[int]`` fits ``Tree[int]`` and ``Pair[str]`` does not.
    """

    def __containers_children__(self) -> Iterator[T_co]: ...


Tree: TypeAlias = (
    T
    | list["Tree[T]"]
    | tuple["Tree[T]", ...]
    | dict[Any, "Tree[T]"]
    | HasChildren["Tree[T]"]
    | None
)
"""A tree whose leaves have type ``T``: a ``T``, ``None``, or a list, tuple, dict or (with
the mypy plugin) container of such trees."""
