"""The ``Registry``: every node type's kind, the names files use for classes, and the
observers other libraries' registries hang on, behind one lock; its live tables are
what the engine's hot loops read. It knows node kinds only as values: the builtin ones
and the classification of a type seen for the first time are given to it
(``_registry`` makes the one registry, ``REGISTRY``, with both).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from containers._errors import ContainerDefinitionError, type_name
from containers._kinds import (
    _SEED_IMMUTABLE,
    _SEED_LEAVES,
    _SEED_LEAVES_NONE,
    VALUE_BASES,
    NodeKind,
    _qualified,
)

__all__ = ["Registry"]


#: The attribute a superseded class keeps its own node kind in (``Registry.add``).
_RETIRED = "__containers_kind__"


class Registry:
    """Every node type, and the names that saved files use for classes.

    One object holds all registration state; the module-level tables below
    (``KINDS``, ``LEAF_TYPES``, ``LEAF_TYPES_NONE``, ``IMMUTABLE_LEAVES``) are its
    live tables, read by the engine's hot loops without a lock. Invariants:

    - **Readers never lock; writers always do.** Every write (a registration, or the
      classification of a type seen for the first time) runs under ``lock``, and is a
      sequence of single-entry or single-call updates, each atomic for a reader.
    - **A registration is atomic for every reader.** It first forgets every cached
      first-sight classification (leaf types beyond the seeds, namedtuples, protocol
      classes), then adds the new kind. A reader that finds a type in no table
      classifies it, which takes the lock, so it waits for the registration to finish
      and then sees all of it. Builtin kinds and seed leaf types are never removed:
      ``list`` or ``dict`` can never be read as a leaf.
    - **Superseded classes are not kept alive.** When a class takes over the name of an
      earlier class with the same ``module.qualname`` (a redefinition in a notebook, a
      test, a loop), the earlier one leaves every table; its kind is kept on the class
      itself (``__containers_kind__``), so its surviving instances still traverse as
      declared and the class is freed with its last instance.
    - **Observers see every registration once, in order**: ``on_register`` replays the
      registered kinds to a new observer, then calls it after each later registration,
      all under the lock. ``on_first_sight`` observers see each node kind found by
      classification (namedtuples, hand-written ``Container`` classes), under the lock.
    """

    __slots__ = (
        "_builtins",
        "_classifier",
        "_first_sight_observers",
        "_names",
        "_observers",
        "_pinned",
        "_registered",
        "immutable_leaves",
        "kinds",
        "leaf_types",
        "leaf_types_none",
        "lock",
    )

    def __init__(
        self,
        builtins: dict[type, NodeKind],
        classifier: Callable[[Registry, type], NodeKind | None],
    ) -> None:
        #: The builtin node kinds: never removed, never registered again.
        self._builtins = builtins
        #: The kind of a type on first sight (``classify``), ``None`` for a leaf.
        self._classifier = classifier
        #: Every known node type: builtins, registered, and classified on first sight.
        self.kinds: dict[type, NodeKind] = dict(builtins)
        #: Types known to be leaves.
        self.leaf_types: set[type] = set(_SEED_LEAVES)
        #: The same, with ``None`` a leaf (``none_is_leaf=True``).
        self.leaf_types_none: set[type] = set(_SEED_LEAVES_NONE)
        #: Leaf types that are values (``VALUE_BASES``): never cached by identity.
        self.immutable_leaves: set[type] = set(_SEED_IMMUTABLE)
        self.lock = threading.RLock()
        self._registered: dict[type, NodeKind] = {}
        self._names: dict[str, type] = {}
        self._observers: list[Callable[[NodeKind], object]] = []
        self._first_sight_observers: list[Callable[[NodeKind], object]] = []
        self._pinned: list[NodeKind] = []  # superseded types that take no attributes

    def registered(self, cls: type) -> NodeKind | None:
        """The kind ``cls`` was registered with (``@container``, ``register``,
        ``register_node``), superseded or not; ``None`` if it never was."""
        kind = self._registered.get(cls)
        if kind is None:
            kind = _retired_kind(cls)
        return kind

    def class_by_name(self, name: str) -> type | None:
        """The class registered under ``name`` (what files use), or ``None``."""
        return self._names.get(name)

    def name_of(self, cls: type) -> str | None:
        """The name ``cls`` was registered under, or ``None`` if it was not registered."""
        kind = self.registered(cls)
        return None if kind is None else kind.name

    def on_register(self, observer: Callable[[NodeKind], object]) -> Callable[[NodeKind], object]:
        """Call ``observer(kind)`` for every registered kind, now and for all to come.

        The kinds registered so far are replayed first, in registration order; every
        later registration calls it once it is complete. Returns ``observer``.
        """
        with self.lock:
            for kind in list(self._registered.values()):
                observer(kind)
            self._observers.append(observer)
        return observer

    def remove_observer(self, observer: Callable[[NodeKind], object]) -> None:
        """Stop calling ``observer`` (added by ``on_register``); it holds nothing after."""
        with self.lock:
            self._observers.remove(observer)

    def on_first_sight(self, observer: Callable[[NodeKind], object]) -> None:
        """Call ``observer(kind)`` for each node kind that ``classify`` finds from now on
        (a type seen again after a registration forgot it is found again)."""
        with self.lock:
            self._first_sight_observers.append(observer)

    def classify(self, t: type) -> NodeKind | None:
        """The kind of a type in no table yet (first sight), cached; ``None``: a leaf.

        Raises:
            ContainerDefinitionError: ``t`` is an undeclared subclass of a container or
                registered type, or implements only part of the Container protocol.
        """
        with self.lock:
            kind = self.kinds.get(t)
            if kind is not None or t in self.leaf_types:
                return kind
            kind = self._first_sight(t)
            if kind is not None:
                self.kinds[t] = kind
                for observer in list(self._first_sight_observers):
                    observer(kind)
                return kind
            if issubclass(t, VALUE_BASES):
                self.immutable_leaves.add(t)
            self.leaf_types_none.add(t)
            self.leaf_types.add(t)
            return None

    def _first_sight(self, t: type) -> NodeKind | None:
        retired = _retired_kind(t)
        if retired is not None:
            return retired
        return self._classifier(self, t)

    def add(self, kind: NodeKind, name: str, *, explicit_name: bool, where: str) -> None:
        """Register ``kind`` under ``name``, then tell the observers.

        A different class under an explicit name that is taken raises; under a default
        name the newest class wins, and an earlier class of the same
        ``module.qualname`` is superseded (see the class docstring).

        Raises:
            ContainerDefinitionError: ``kind.type`` is built in or already registered,
                or ``name`` is explicit and taken by another class.
        """
        cls = kind.type
        if cls in self._builtins or cls in _SEED_LEAVES:
            raise ContainerDefinitionError(
                f"{where} on {type_name(cls)!r}: {type_name(cls)} is built in "
                f"({'a node' if cls in self._builtins else 'always a leaf'}) and cannot be "
                f"registered."
            )
        with self.lock:
            if self.registered(cls) is not None:
                raise ContainerDefinitionError(
                    f"{where} on {type_name(cls)!r}: {type_name(cls)} is already "
                    f"registered. Register each class once."
                )
            taken = self._names.get(name)
            redefined = taken is not None and _qualified(taken) == _qualified(cls)
            if explicit_name and taken is not None and not redefined:
                raise ContainerDefinitionError(
                    f"{where} on {type_name(cls)!r}: the name {name!r} is already used by "
                    f"{_qualified(taken)}. Names identify classes in saved files, so each "
                    f"must be unique: choose another name=."
                )
            kind.name = name
            # Forget first-sight classifications (a type seen before its registration
            # was classified as a leaf, and so were its subclasses): values first, so
            # that no reader takes a type for a value that is not one; kinds last.
            self.immutable_leaves.intersection_update(_SEED_IMMUTABLE)
            self.leaf_types_none.intersection_update(_SEED_LEAVES_NONE)
            self.leaf_types.intersection_update(_SEED_LEAVES)
            for t in [
                t for t in self.kinds if t not in self._builtins and t not in self._registered
            ]:
                del self.kinds[t]
            if redefined:
                self._retire(taken)  # type: ignore[arg-type]
            self._registered[cls] = kind
            self._names[name] = cls
            self.kinds[cls] = kind
            for observer in list(self._observers):
                observer(kind)

    def _retire(self, old: type) -> None:
        kind = self._registered.pop(old)
        self.kinds.pop(old, None)
        try:
            type.__setattr__(old, _RETIRED, kind)
        except (TypeError, AttributeError):  # a type that takes no attributes (C types)
            self._pinned.append(kind)


def _retired_kind(t: type) -> NodeKind | None:
    kind = t.__dict__.get(_RETIRED)
    return kind if isinstance(kind, NodeKind) and kind.type is t else None
