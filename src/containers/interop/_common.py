"""What the three adapters share: kept values as aux data, and the registry subscription.

This stage reads node kinds from ``containers._registry`` and hands them to another
library's pytree registry; it never traverses a tree and never imports jax, optree or
torch (each adapter imports its library when its ``register_*`` is called).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from containers._errors import ContainerDefinitionError, type_name
from containers._registry import REGISTRY, NodeKind, values_equal
from containers._spec import ContainerSpec

__all__ = ["KeptValues", "Subscription", "kept_values_type", "value_description"]


def value_description(value: Any) -> str:
    """``a list``, ``an ndarray``: a value's type for messages."""
    name = type(value).__qualname__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


class KeptValues(tuple):  # type: ignore[type-arg]
    """A container's kept values, in ``spec.keep`` order, as another library's aux data.

    JAX, optree and torch store aux data in their structures, compare it with ``==``
    (to match trees) and hash it (``jax.jit`` caches compiled code by structure). A
    plain tuple of kept values breaks both on an array (``==`` gives an array) and the
    hash on a list or dict, deep inside those libraries. This tuple compares like
    ``ct.Structure`` does (type-strict, arrays by content), and its hash names the
    field whose value cannot be hashed. One subclass per class and library carries
    the names the messages need.
    """

    __slots__ = ()
    owner: ClassVar[type]
    fields: ClassVar[tuple[str, ...]]
    library: ClassVar[str]

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(values_equal(a, b) for a, b in zip(self, other))

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        try:
            return tuple.__hash__(self)
        except TypeError:
            raise self._unhashable() from None

    def _unhashable(self) -> ContainerDefinitionError:
        owner = type_name(self.owner)
        # tuple.__hash__ failed, so some value's hash fails too
        name, value = next((n, v) for n, v in zip(self.fields, self) if not _hashable(v))
        return ContainerDefinitionError(
            f"{self.library} needs the hash of a {owner!r}'s structure (jax.jit caches "
            f"compiled code by structure), but its kept field {owner}.{name} holds "
            f"{value_description(value)}, which is not hashable. Keep hashable values "
            f"in kept fields (a tuple instead of a list, a frozenset instead of a set, "
            f"a tuple of numbers instead of an array), or make {owner}.{name} a child "
            f"(@container(children=[..., {name!r}])) if it holds arrays."
        )

    def __repr__(self) -> str:
        return "(" + ", ".join(f"{n}={v!r}" for n, v in zip(self.fields, self)) + ")"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_kept, (self.owner, self.library, tuple(self)))


_KEPT_TYPES: dict[tuple[type, str], type[KeptValues]] = {}


def kept_values_type(spec: ContainerSpec, library: str) -> type[KeptValues]:
    """The ``KeptValues`` subclass of one container class in one library."""
    key = (spec.cls, library)
    made = _KEPT_TYPES.get(key)
    if made is None:
        made = type(
            "KeptValues",
            (KeptValues,),
            {"__slots__": (), "owner": spec.cls, "fields": spec.keep, "library": library},
        )
        _KEPT_TYPES[key] = made
    return made


def _rebuild_kept(owner: type, library: str, values: tuple[Any, ...]) -> KeptValues:
    from containers._decorator import spec

    return kept_values_type(spec(owner), library)(values)


class Subscription:
    """One library registration: subscribes once, registers each kind once.

    ``add(kind)`` registers one node kind with the library; ``subscribe()`` hands it
    every kind, present and future, through the registry's observer hook, once:
    calling it again does nothing. Everything runs under the registry's own lock,
    which the registry holds while it calls observers, so that one lock orders
    declarations and subscriptions (two locks taken in two orders could deadlock).
    """

    def __init__(self, add: Callable[[NodeKind], None]) -> None:
        self._add = add
        self._done: set[type] = set()
        self.active = False

    def observe(self, kind: NodeKind) -> None:
        """The registry observer: register ``kind`` unless it already is."""
        with REGISTRY.lock:
            if kind.type in self._done:
                return
            self._add(kind)
            self._done.add(kind.type)

    def subscribe(self) -> None:
        """Start observing the registry (once)."""
        with REGISTRY.lock:
            if not self.active:
                REGISTRY.on_register(self.observe)
                self.active = True
