"""What the three adapters share: aux data, and the registry subscription.

This stage reads node kinds from ``containers._registry`` and hands them to another
library's pytree registry; it never traverses a tree and never imports jax, optree or
torch (each adapter imports its library when its ``register_*`` is called).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from containers._errors import ContainerDefinitionError, type_name
from containers._registry import REGISTRY, NodeKind, values_equal
from containers._spec import ContainerSpec
from containers._split import MISSING

#: ``ct.MISSING``'s class. The JAX and optree adapters register it as a node with no
#: children, as equinox's ``None`` holes are, so that ``partition``'s halves pass
#: through ``jax.grad``, ``jax.jit`` and optax. Not torch's: torch takes enums as opaque
#: values and deprecates registering them as pytree nodes.
MISSING_TYPE: type = type(MISSING)

__all__ = [
    "MISSING_TYPE",
    "SIMPLE_KEPT",
    "KeptValues",
    "ProtocolAux",
    "Subscription",
    "hand_written_functions",
    "is_hand_written",
    "kept_aux",
    "kept_values_type",
    "value_description",
]


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
    field whose value cannot be hashed. Values that need none of this travel as a
    plain tuple (``kept_aux``). One subclass per class and library carries
    the names the messages need, and refers to the class weakly (a superseded class
    that a library lets go of is freed).
    """

    __slots__ = ()
    owner_ref: ClassVar[weakref.ref[type]]
    fields: ClassVar[tuple[str, ...]]
    library: ClassVar[str]

    @property
    def owner(self) -> type:
        """The container class these are the kept values of."""
        owner = self.owner_ref()
        assert owner is not None  # a structure holding these keeps its class alive
        return owner

    def __eq__(self, other: object) -> bool:
        # jax.jit compares the cached structure's aux data with each call's, whose kept
        # values are mostly the very same objects: the identity test first, with no
        # generator (benchmarks/interop.py, jit)
        if type(other) is not type(self):
            return False
        for a, b in zip(self, other):  # noqa: SIM110 - no generator, see above
            if a is not b and not values_equal(a, b):
                return False
        return True

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


#: Kept values of these exact types travel as a plain tuple: among them ``==`` is
#: type-strict already (no ``1 == 1.0 == True``, no NaN) and ``hash`` never fails, so
#: the tuple compares and hashes as ``KeptValues`` would, in C, and costs no subclass
#: instance per flatten (benchmarks/interop.py, tree_flatten and jit).
SIMPLE_KEPT = frozenset({str, int, bytes, type(None)})


def kept_aux(kept_type: type[KeptValues] | None, kept: tuple[Any, ...]) -> tuple[Any, ...]:
    """The aux data of a container's kept values: ``()`` without kept fields, a plain
    tuple if every value's type is in ``SIMPLE_KEPT``, else a ``kept_type``."""
    if kept_type is None or all(type(v) in SIMPLE_KEPT for v in kept):
        return tuple(kept)
    return kept_type(kept)


_KEPT_TYPES: weakref.WeakKeyDictionary[type, dict[str, type[KeptValues]]] = (
    weakref.WeakKeyDictionary()
)


def kept_values_type(spec: ContainerSpec, library: str) -> type[KeptValues]:
    """The ``KeptValues`` subclass of one container class in one library."""
    with REGISTRY.lock:
        by_library = _KEPT_TYPES.setdefault(spec.cls, {})
        made = by_library.get(library)
        if made is None:
            made = by_library[library] = type(
                "KeptValues",
                (KeptValues,),
                {
                    "__slots__": (),
                    "owner_ref": weakref.ref(spec.cls),
                    "fields": spec.keep,
                    "library": library,
                },
            )
    return made


def _rebuild_kept(owner: type, library: str, values: tuple[Any, ...]) -> KeptValues:
    from containers._decorator import spec

    return kept_values_type(spec(owner), library)(values)


class ProtocolAux:
    """The aux data of a hand-written ``Container`` class: the node itself, compared
    as ``containers`` compares it.

    ``containers`` rebuilds such a node through its ``__container_traverse__``, so the
    node is its own template; two of them are the same structure when their
    ``__container_serialize__`` metadata are equal (by content, arrays too), and hash
    by class, as in ``ct.Structure``.
    """

    __slots__ = ("kind", "template")

    def __init__(self, kind: NodeKind, template: Any) -> None:
        self.kind = kind
        self.template = template

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is ProtocolAux
            and other.kind.type is self.kind.type
            and self.kind.aux_eq(self.template, other.template)
        )

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return self.kind.aux_hash(self.template)

    def __repr__(self) -> str:
        return repr(self.template.__container_serialize__()[2])


def hand_written_functions(kind: NodeKind) -> tuple[Any, Any, Any]:
    """``(flatten, unflatten, keys)`` of a hand-written ``Container`` class, in JAX's
    argument order, with ``ProtocolAux`` as aux data."""
    node_flatten, node_unflatten, node_keys = kind.flatten, kind.unflatten, kind.keys

    def flatten(x: Any) -> tuple[Any, ProtocolAux]:
        children, template = node_flatten(x)
        return children, ProtocolAux(kind, template)

    def unflatten(aux: ProtocolAux, children: Any) -> Any:
        return node_unflatten(aux.template, children)

    def keys(aux: ProtocolAux, n: int) -> Any:
        return node_keys(aux.template, n)

    return flatten, unflatten, keys


def is_hand_written(kind: NodeKind) -> bool:
    """Whether ``kind`` is a class implementing the ``Container`` protocol by hand:
    found on first sight, neither declared nor registered."""
    return (
        kind.spec is None
        and kind.name is None
        and hasattr(kind.type, "__container_traverse__")
        and not getattr(kind.type, "_is_protocol", False)
    )


def _hand_written_classes() -> Iterator[type]:
    """Every class now defined that implements the ``Container`` protocol by hand, or
    inherits it (a walk of ``object``'s subclasses: ~15 ms with jax and torch
    imported)."""
    seen: set[type] = set()
    stack: list[type] = [object]
    while stack:
        subclasses: list[type] = type.__subclasses__(stack.pop())
        for sub in subclasses:
            if sub in seen:
                continue
            seen.add(sub)
            stack.append(sub)
            try:
                traverse = getattr(sub, "__container_traverse__", None)
            except Exception:  # a metaclass __getattr__ may raise anything
                continue
            if (
                traverse is not None
                and getattr(traverse, "__container_owner__", None) is None  # declared
                and not getattr(sub, "_is_protocol", False)  # Container itself
            ):
                yield sub


class Subscription:
    """One library registration: subscribes once, registers each kind once.

    ``add(kind)`` registers one node kind with the library and says whether it did
    (not if other code registered the type first); ``subscribe()`` hands it
    every registered kind, present and future, through the registry's observer hook,
    once, and every class implementing the ``Container`` protocol by hand: those
    defined so far on each call, later ones when the registry first classifies them.
    ``remove(cls)``, where the library can unregister a type, takes a class out that a
    newer one of the same name superseded (``Registry.add``). Everything runs under
    the registry's own lock, which the registry holds while it calls observers, so
    that one lock orders declarations and subscriptions (two locks taken in two orders
    could deadlock). Classes are held weakly here: the library's registry decides
    what stays alive. ``first()``, if given, runs once, on the first ``subscribe()``
    (the JAX and optree adapters register ``ct.MISSING`` there).
    """

    def __init__(
        self,
        add: Callable[[NodeKind], bool],
        remove: Callable[[type], object] | None = None,
        *,
        first: Callable[[], object] | None = None,
    ) -> None:
        self._add = add
        self._remove = remove
        self._first = first
        self._done: weakref.WeakSet[type] = weakref.WeakSet()
        self._by_name: weakref.WeakValueDictionary[str, type] = weakref.WeakValueDictionary()
        self.active = False

    def observe(self, kind: NodeKind) -> None:
        """The registry observer: register ``kind`` unless it already is."""
        with REGISTRY.lock:
            if kind.type in self._done:
                return
            if kind.name is not None and self._remove is not None:
                old = self._by_name.pop(kind.name, None)
                if old is not None and REGISTRY.class_by_name(kind.name) is not old:
                    self._remove(old)  # superseded by kind.type
                    self._done.discard(old)
            if self._add(kind) and kind.name is not None:
                self._by_name[kind.name] = kind.type  # ours to remove
            self._done.add(kind.type)

    def observe_first_sight(self, kind: NodeKind) -> None:
        """The first-sight observer: register hand-written ``Container`` classes."""
        if is_hand_written(kind):
            self.observe(kind)

    def subscribe(self) -> None:
        """Start observing the registry (once); register the hand-written classes."""
        with REGISTRY.lock:
            if not self.active:
                if self._first is not None:
                    self._first()
                REGISTRY.on_register(self.observe)
                REGISTRY.on_first_sight(self.observe_first_sight)
                self.active = True
            for cls in list(_hand_written_classes()):
                if cls in self._done:
                    continue
                try:
                    kind = REGISTRY.classify(cls)
                except ContainerDefinitionError:
                    continue  # a subclass of a declared class, or a partial protocol
                if kind is not None and is_hand_written(kind):
                    self.observe(kind)
