"""Node kinds: how each node type is taken apart and put back together, one level deep.

This stage owns the ``Registry``: the type -> NodeKind table (builtins, declared
containers, ``register_node`` types, namedtuples and hand-written Container protocol
classes, classified on first sight), the names that files use, and the observers
that other libraries' registries hang on. It never recurses: the walks in later
stages do.
"""

from __future__ import annotations

import itertools
import numbers
import operator
import threading
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from containers._equality import value_hash, values_equal
from containers._errors import (
    ContainerDefinitionError,
    counted,
    safe_repr,
    short_repr,
    type_name,
)
from containers._paths import AttrKey, DictKey, IndexKey, Key, index_key, index_keys, keystr
from containers._spec import ContainerSpec, class_flavor

__all__ = [
    "IMMUTABLE_LEAVES",
    "KINDS",
    "LEAF_TYPES",
    "LEAF_TYPES_NONE",
    "REGISTRY",
    "VALUE_BASES",
    "Mismatch",
    "NodeKind",
    "Registry",
    "cacheable",
    "class_by_name",
    "container_kind",
    "custom_kind",
    "distinct_labels",
    "kind_for_type",
    "kind_of",
    "label",
    "name_of",
    "same_order",
    "sort_keys",
    "value_hash",
    "values_equal",
]


class Mismatch(Exception):
    """Raised by ``NodeKind.read`` when another tree does not fit; carries what differs."""


def _no_keys(aux: Any, n: int) -> tuple[Key, ...]:
    return index_keys(n)


class NodeKind:
    """How the engine handles one node type, one level deep.

    - ``flatten(x) -> (children, aux)``: children in visit order, aux the static rest.
    - ``unflatten(aux, children) -> x``.
    - ``keys(aux, n)``: the children's keys, in visit order.
    - ``read(y, aux, n)``: another tree's children aligned with a node that flattened
      to ``aux`` and ``n`` children (fmap's rules), or raise ``Mismatch``.
    - ``structural(aux, children)``: the node as fmapstructure gives it.
    - ``mutable``: cached by identity in fmap/fcollect.
    - ``mappers``: the engine's compiled fmap mappers of a declared class, once made.
    - ``iterate(x)``: ``flatten``'s children as an iterable that holds no reference to
      them of its own, and its aux; fmap's fast path reads children this way, so that
      a child's reference count shows its parent's references alone, as for the items
      of a list (a dict's ``flatten`` builds a list, which holds each value once
      more). Defaults to ``flatten``.
    - ``flatten_snapshot`` and ``unflatten_fresh``: a Structure's pair (flatten's
      records, ``Structure.unflatten``): for a declared class with kept fields, the
      ones that snapshot mutable kept values and copy them per rebuilt instance; else
      ``flatten`` and ``unflatten`` themselves. Every other walk uses the live pair,
      which keeps a kept value as the same object.
    """

    __slots__ = (
        "aux_eq",
        "aux_hash",
        "flatten",
        "flatten_snapshot",
        "iterate",
        "keys",
        "label",
        "mappers",
        "mutable",
        "name",
        "read",
        "spec",
        "structural",
        "type",
        "unflatten",
        "unflatten_fresh",
    )

    def __init__(
        self,
        type_: type,
        label: str,
        *,
        flatten: Callable[[Any], tuple[Sequence[Any], Any]],
        unflatten: Callable[[Any, Sequence[Any]], Any],
        keys: Callable[[Any, int], tuple[Key, ...]] = _no_keys,
        read: Callable[[Any, Any, int], Sequence[Any]],
        structural: Callable[[Any, Sequence[Any]], Any],
        mutable: bool,
        aux_eq: Callable[[Any, Any], bool] = values_equal,
        aux_hash: Callable[[Any], int] = value_hash,
        spec: ContainerSpec | None = None,
        iterate: Callable[[Any], tuple[Iterable[Any], Any]] | None = None,
        flatten_snapshot: Callable[[Any], tuple[Sequence[Any], Any]] | None = None,
        unflatten_fresh: Callable[[Any, Sequence[Any]], Any] | None = None,
    ) -> None:
        self.type = type_
        self.label = label
        self.flatten = flatten
        self.unflatten = unflatten
        self.keys = keys
        self.read = read
        self.structural = structural
        self.mutable = mutable
        self.aux_eq = aux_eq
        self.aux_hash = aux_hash
        self.spec = spec
        self.iterate = flatten if iterate is None else iterate
        self.flatten_snapshot = flatten if flatten_snapshot is None else flatten_snapshot
        self.unflatten_fresh = unflatten if unflatten_fresh is None else unflatten_fresh
        #: A declared class's fmap mapper factories, compiled by the engine on first use
        #: (``_engine._mappers.mappers``); None until then and for other kinds.
        self.mappers: Any = None
        #: The registered name (``Registry.add``); ``None`` for builtins and first-sight kinds.
        self.name: str | None = None

    def __repr__(self) -> str:
        return f"<NodeKind {self.label}>"


def label(x: Any) -> str:
    """Describe a value for messages: ``a tuple``, ``a 'Linear'``, ``a leaf of type float``."""
    kind = kind_of(x)
    if kind is not None:
        return kind.label
    return f"a leaf of type {type(x).__qualname__}"


def distinct_labels(a: str, type_a: type, b: str, type_b: type) -> tuple[str, str]:
    """Labels ``a`` and ``b`` of two values, told apart when they read the same but the
    types differ (two classes named ``P``): then the classes' modules are shown, and a
    class redefined under the same module and name is called another class."""
    if a != b or type_a is type_b:
        return a, b
    qual_a, qual_b = _qualified(type_a), _qualified(type_b)
    if qual_a != qual_b:
        return f"a {qual_a!r}", f"a {qual_b!r}"
    return f"a {qual_a!r}", f"an instance of another class also named {qual_b!r}"


# --- builtin kinds --------------------------------------------------------------------


def _read_sequence(y: Any, aux: Any, n: int) -> Sequence[Any]:
    if not isinstance(y, (tuple, list, deque)) or kind_of(y) is None:
        raise Mismatch(
            f"the first tree has a sequence of length {n} there, {{other}} has {label(y)}"
        )
    if len(y) < n:
        raise Mismatch(
            f"the first tree has a sequence of length {n} there, {{other}} has one of length {len(y)}"
        )
    if isinstance(y, deque):
        return list(itertools.islice(y, n))
    return y[:n]


def sort_keys(d: Iterable[Any]) -> list[Any]:
    """Sort mapping keys, never raising: in their own order when ``<`` totally
    orders them, else by ``(type name, repr)``.

    ``<`` must give a strict total order (each key below the next once sorted):
    partially ordered keys (frozensets, NaN) would otherwise sort by insertion order,
    and a ``<`` that raises any error falls back too.
    """
    keys = list(d)
    try:
        order = sorted(keys)
        if len(order) < 2 or all(map(operator.lt, order, order[1:])):
            return order
    except Exception:  # keys that cannot be compared, however they fail
        pass
    return sorted(keys, key=_fallback_key)


def _fallback_key(k: Any) -> tuple[str, str]:
    return type(k).__name__, safe_repr(k)  # a huge int key has no repr


def same_order(order: list[Any], keys: list[Any]) -> bool:
    """Whether two lists hold the same objects in the same order: by identity, as user
    keys may compare with ``==`` to anything (numpy scalars to an array)."""
    return len(order) == len(keys) and all(map(operator.is_, order, keys))


def _dict_iterate(x: dict[Any, Any]) -> tuple[Iterable[Any], tuple[tuple[Any, ...], Any]]:
    keys = list(x)
    order = sort_keys(keys)
    if same_order(order, keys):
        return x.values(), (tuple(order), None)
    return map(x.__getitem__, order), (tuple(order), tuple(keys))


def _dict_flatten(x: dict[Any, Any]) -> tuple[list[Any], tuple[tuple[Any, ...], Any]]:
    children, aux = _dict_iterate(x)
    return list(children), aux


def _dict_build(aux: tuple[tuple[Any, ...], Any], children: Sequence[Any]) -> dict[Any, Any]:
    order, insertion = aux
    if insertion is None:
        return dict(zip(order, children))
    d = dict.fromkeys(insertion)  # insertion order, then the values in sorted order
    d.update(zip(order, children))
    return d


def _read_mapping(y: Any, aux: Any, n: int) -> list[Any]:
    if not isinstance(y, dict) or kind_of(y) is None:
        raise Mismatch(f"the first tree has a mapping there, {{other}} has {label(y)}")
    out = []
    for k in aux[0]:
        try:
            out.append(y[k])
        except KeyError:
            raise Mismatch(f"{{other}} has no key {k!r} there") from None
    return out


def _dict_keys(aux: Any, n: int) -> tuple[Key, ...]:
    return tuple(DictKey(k) for k in aux[0])


def _sorted_eq(a: Any, b: Any) -> bool:
    return values_equal(a[0], b[0])


def _sorted_hash(a: Any) -> int:
    return value_hash(a[0])


def _defaultdict_iterate(x: defaultdict[Any, Any]) -> tuple[Iterable[Any], Any]:
    children, aux = _dict_iterate(x)
    if aux[1] is not None:  # read by key, a key that f removed would come back, made
        children = list(children)  # by default_factory: read a snapshot instead
    return children, (*aux, x.default_factory)


def _defaultdict_flatten(x: defaultdict[Any, Any]) -> tuple[list[Any], Any]:
    children, aux = _defaultdict_iterate(x)
    return list(children), aux


def _defaultdict_build(aux: Any, children: Sequence[Any]) -> defaultdict[Any, Any]:
    return defaultdict(aux[2], _dict_build(aux[:2], children))


def _defaultdict_eq(a: Any, b: Any) -> bool:
    return values_equal(a[0], b[0]) and a[2] == b[2]


def _ordered_iterate(x: OrderedDict[Any, Any]) -> tuple[Iterable[Any], tuple[Any, ...]]:
    return x.values(), tuple(x)


def _ordered_flatten(x: OrderedDict[Any, Any]) -> tuple[list[Any], tuple[Any, ...]]:
    return list(x.values()), tuple(x)


def _ordered_build(aux: tuple[Any, ...], children: Sequence[Any]) -> OrderedDict[Any, Any]:
    return OrderedDict(zip(aux, children))


def _ordered_read(y: Any, aux: Any, n: int) -> list[Any]:
    return _read_mapping(y, (aux,), n)


def _ordered_keys(aux: Any, n: int) -> tuple[Key, ...]:
    return tuple(DictKey(k) for k in aux)


def _none_flatten(x: None) -> tuple[tuple[()], None]:
    return (), None


def _none_read(y: Any, aux: Any, n: int) -> tuple[()]:
    return ()


def _build_none(aux: Any, children: Sequence[Any]) -> None:
    return None


def _keyed_dict(keys: tuple[Key, ...], children: Sequence[Any]) -> dict[Any, Any]:
    return {k.raw: c for k, c in zip(keys, children)}


TUPLE = NodeKind(
    tuple,
    "a tuple",
    flatten=lambda x: (x, None),
    unflatten=lambda aux, ch: tuple(ch),
    read=_read_sequence,
    structural=lambda aux, ch: tuple(ch),
    mutable=False,
)
LIST = NodeKind(
    list,
    "a list",
    flatten=lambda x: (x, None),
    unflatten=lambda aux, ch: list(ch),
    read=_read_sequence,
    structural=lambda aux, ch: list(ch),
    mutable=True,
)
DICT = NodeKind(
    dict,
    "a dict",
    flatten=_dict_flatten,
    unflatten=_dict_build,
    keys=_dict_keys,
    read=_read_mapping,
    structural=_dict_build,
    mutable=True,
    iterate=_dict_iterate,
    aux_eq=_sorted_eq,
    aux_hash=_sorted_hash,
)
ORDERED_DICT = NodeKind(
    OrderedDict,
    "an OrderedDict",
    flatten=_ordered_flatten,
    unflatten=_ordered_build,
    keys=_ordered_keys,
    read=_ordered_read,
    structural=_ordered_build,
    mutable=True,
    iterate=_ordered_iterate,
)
DEFAULT_DICT = NodeKind(
    defaultdict,
    "a defaultdict",
    flatten=_defaultdict_flatten,
    unflatten=_defaultdict_build,
    keys=_dict_keys,
    read=_read_mapping,
    structural=_defaultdict_build,
    mutable=True,
    iterate=_defaultdict_iterate,
    aux_eq=_defaultdict_eq,
    aux_hash=_sorted_hash,
)
DEQUE = NodeKind(
    deque,
    "a deque",
    flatten=lambda x: (list(x), x.maxlen),
    unflatten=lambda aux, ch: deque(ch, aux),
    read=_read_sequence,
    structural=lambda aux, ch: deque(ch, aux),
    mutable=True,
    iterate=lambda x: (x, x.maxlen),
)
NONE = NodeKind(
    type(None),
    "None",
    flatten=_none_flatten,
    unflatten=_build_none,
    read=_none_read,
    structural=_build_none,
    mutable=False,
)

_BUILTINS = {k.type: k for k in (TUPLE, LIST, DICT, ORDERED_DICT, DEFAULT_DICT, DEQUE, NONE)}
#: Leaf types known from the start. Hot loops test ``type(c) in LEAF_TYPES`` before
#: anything else, so a leaf costs one set lookup (benchmarks/run.py, W2 and W5).
_SEED_LEAVES = frozenset({int, float, complex, bool, str, bytes, np.ndarray})
_SEED_LEAVES_NONE = _SEED_LEAVES | {type(None)}
_SEED_IMMUTABLE = frozenset({int, float, complex, bool, str, bytes})
#: A leaf is a value, never cached by identity, when its type derives from one of these:
#: every number (``numbers.Number``: Decimal, Fraction, numpy scalars too), strings,
#: bytes, frozensets and ranges. Other leaves are objects, cached by identity.
VALUE_BASES: tuple[type, ...] = (numbers.Number, str, bytes, frozenset, range, np.generic)
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

    def __init__(self) -> None:
        #: Every known node type: builtins, registered, and classified on first sight.
        self.kinds: dict[type, NodeKind] = dict(_BUILTINS)
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
        if issubclass(t, tuple) and isinstance(getattr(t, "_fields", None), tuple):
            return _namedtuple_kind(t)
        traverse = getattr(t, "__container_traverse__", None)
        if traverse is not None:
            owner = getattr(traverse, "__container_owner__", None)
            if owner is not None and owner is not t:
                raise _subclass_error(t, owner, declared=True)
            missing = [m for m in _PROTOCOL[1:] if not callable(getattr(t, m, None))]
            if missing:
                raise ContainerDefinitionError(
                    f"{type_name(t)!r} defines __container_traverse__ but not "
                    f"{' or '.join(missing)}: a hand-written container implements all "
                    f"of {', '.join(_PROTOCOL)} (see containers.Container)."
                )
            return _protocol_kind(t)
        for base in t.__mro__[1:]:
            kind = self._registered.get(base) or _retired_kind(base)
            if kind is not None:
                raise _subclass_error(t, base, declared=kind.spec is not None)
        return None

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
        if cls in _BUILTINS or cls in _SEED_LEAVES:
            raise ContainerDefinitionError(
                f"{where} on {type_name(cls)!r}: {type_name(cls)} is built in "
                f"({'a node' if cls in _BUILTINS else 'always a leaf'}) and cannot be "
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
            for t in [t for t in self.kinds if t not in _BUILTINS and t not in self._registered]:
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


#: The Container protocol's methods; a class defining the first must define the rest
#: but ``__container_deserialize__`` (only files need it).
_PROTOCOL = (
    "__container_traverse__",
    "__container_reduce__",
    "__container_serialize__",
)


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _retired_kind(t: type) -> NodeKind | None:
    kind = t.__dict__.get(_RETIRED)
    return kind if isinstance(kind, NodeKind) and kind.type is t else None


#: The one registry.
REGISTRY = Registry()
#: Its live tables, for the engine's hot loops (see ``Registry``).
KINDS = REGISTRY.kinds
LEAF_TYPES = REGISTRY.leaf_types
LEAF_TYPES_NONE = REGISTRY.leaf_types_none
IMMUTABLE_LEAVES = REGISTRY.immutable_leaves


def kind_of(x: Any) -> NodeKind | None:
    """Return the node kind of ``x``, or ``None`` when ``x`` is a leaf.

    Raises:
        ContainerDefinitionError: ``x`` is an instance of an undeclared subclass of a
            container or registered type.
    """
    t = type(x)
    kind = KINDS.get(t)
    if kind is not None or t in LEAF_TYPES:
        return kind
    return REGISTRY.classify(t)


def cacheable(x: Any) -> bool:
    """Whether fmap caches ``x`` by identity: mutable objects yes, values no."""
    kind = kind_of(x)
    if kind is not None:
        return kind.mutable
    return type(x) not in IMMUTABLE_LEAVES


def kind_for_type(t: type) -> NodeKind:
    """The node kind of type ``t`` (unpickling a Structure); raises if it is not a node."""
    kind = KINDS.get(t) or (None if t in LEAF_TYPES else REGISTRY.classify(t))
    if kind is None:
        raise ContainerDefinitionError(
            f"{type_name(t)!r} is not a node type here: declare or register it before "
            f"unpickling structures that contain it."
        )
    return kind


def _subclass_error(t: type, base: type, declared: bool) -> ContainerDefinitionError:
    """The error for an undeclared subclass ``t`` of ``base``, a declared container
    (``declared``) or a ``register_node`` type; the fix offered is one that works for
    ``t``: ``register`` only takes classes with fields of their own."""
    sub, name = repr(type_name(t)), type_name(t)
    leaf = "or treat it as a leaf with is_leaf=/exclude=."
    if not declared:
        return ContainerDefinitionError(
            f"{sub} is a subclass of the registered type {type_name(base)!r} but is not "
            f"registered itself, so it cannot be taken apart and rebuilt. Register it "
            f"with register_node({name}, flatten, unflatten) as {type_name(base)!r} was, "
            f"{leaf}"
        )
    register = f" (or call register({name}))" if class_flavor(t) is not None else ""
    return ContainerDefinitionError(
        f"{sub} is a subclass of the container {type_name(base)!r} but is not declared "
        f"itself, so its fields are unknown and it cannot be rebuilt. Decorate {sub} with "
        f"@container{register}, {leaf}"
    )


def _namedtuple_kind(t: type) -> NodeKind:
    fields: tuple[str, ...] = t._fields  # type: ignore[attr-defined]
    keys = tuple(AttrKey(f) for f in fields)
    new = tuple.__new__

    def read(y: Any, aux: Any, n: int) -> Sequence[Any]:
        return _read_sequence(y, aux, n)

    return NodeKind(
        t,
        f"a {type_name(t)!r}",
        flatten=lambda x: (x, None),
        unflatten=lambda aux, ch: new(t, tuple(ch)),
        keys=lambda aux, n: keys,
        read=read,
        structural=lambda aux, ch: dict(zip(fields, ch)),
        mutable=False,
    )


def _same_type_children(t: type, flatten: Callable[[Any], tuple[Sequence[Any], Any]]) -> Any:
    def read(y: Any, aux: Any, n: int) -> Sequence[Any]:
        if type(y) is not t:
            mine, theirs = distinct_labels(f"a {type_name(t)!r}", t, label(y), type(y))
            raise Mismatch(f"the first tree has {mine} there, {{other}} has {theirs}")
        children = flatten(y)[0]
        if len(children) != n:
            raise Mismatch(
                f"the first tree has a {type_name(t)!r} with {counted(n, 'child', 'children')} "
                f"there, {{other}} has one with {len(children)}"
            )
        return children

    return read


def _protocol_kind(t: type) -> NodeKind:
    # A hand-written container's three methods must agree (same children, same order);
    # what they return is checked here, at the one place that calls them for the
    # engine, so that a mistake names the method instead of surfacing as a bare
    # TypeError or StopIteration, or a child's new value silently dropped.
    name = type_name(t)

    def flatten(x: Any) -> tuple[list[Any], Any]:
        children: list[Any] = []
        x.__container_reduce__(children, _collect)
        return children, x

    def unflatten(template: Any, children: Sequence[Any]) -> Any:
        feed = iter(children)
        try:
            out = template.__container_traverse__(feed, _feed)
        except _Overrun:
            raise ContainerDefinitionError(
                f"{name}.__container_traverse__ called fun on more children than the "
                f"{len(children)} that __container_reduce__ gave: the two methods must "
                f"visit the same children in the same order."
            ) from None
        if type(out) is not tuple or len(out) != 2:
            raise ContainerDefinitionError(
                f"{name}.__container_traverse__ returned {short_repr(out)}; it must return "
                f"a pair (new_self, acc): the rebuilt object and the accumulator the last "
                f"call of fun returned."
            )
        left = sum(1 for _ in feed)
        if left:
            raise ContainerDefinitionError(
                f"{name}.__container_traverse__ called fun on "
                f"{counted(len(children) - left, 'child', 'children')}, but "
                f"__container_reduce__ gave {len(children)}: the two methods must visit the "
                f"same children in the same order (a child's new value was lost)."
            )
        return out[0]

    def serialized(x: Any) -> tuple[Any, Sequence[tuple[Any, Any]], Any]:
        out = x.__container_serialize__()
        if type(out) is not tuple or len(out) != 3 or not isinstance(out[1], (list, tuple)):
            raise ContainerDefinitionError(
                f"{name}.__container_serialize__ returned {short_repr(out)}; it must return "
                f"a triple (type_name, [(key, child), ...], metadata_dict)."
            )
        return out

    def keys(template: Any, n: int) -> tuple[Key, ...]:
        pairs = serialized(template)[1]
        out = tuple(
            AttrKey(k) if isinstance(k, str) and k.isidentifier() else DictKey(k) for k, _ in pairs
        )
        check_keys(f"{name}.__container_serialize__ gave", out, n)
        return out

    def aux_eq(a: Any, b: Any) -> bool:
        return values_equal(serialized(a)[2], serialized(b)[2])

    def structural(template: Any, children: Sequence[Any]) -> dict[Any, Any]:
        return _keyed_dict(keys(template, len(children)), children)

    return NodeKind(
        t,
        f"a {type_name(t)!r}",
        flatten=flatten,
        unflatten=unflatten,
        keys=keys,
        read=_same_type_children(t, flatten),
        structural=structural,
        mutable=True,
        aux_eq=aux_eq,
        aux_hash=lambda a: hash(type(a)),
    )


def _collect(child: Any, acc: list[Any]) -> list[Any]:
    acc.append(child)
    return acc


class _Overrun(Exception):
    """A hand-written ``__container_traverse__`` asked for more children than there are."""


def _feed(child: Any, it: Any) -> tuple[Any, Any]:
    for new in it:
        return new, it
    raise _Overrun


def container_kind(
    spec: ContainerSpec,
    flatten: Any,
    unflatten: Any,
    children: Any,
    flatten_snapshot: Any = None,
    unflatten_fresh: Any = None,
) -> NodeKind:
    """The kind of a declared container, from its generated functions."""
    cls = spec.cls
    keys = spec.child_keys
    names = spec.children

    def read(y: Any, aux: Any, n: int) -> Sequence[Any]:
        if type(y) is not cls:
            mine, theirs = distinct_labels(f"a {type_name(cls)!r}", cls, label(y), type(y))
            raise Mismatch(f"the first tree has {mine} there, {{other}} has {theirs}")
        return children(y)  # type: ignore[no-any-return]

    return NodeKind(
        cls,
        f"a {type_name(cls)!r}",
        flatten=flatten,
        unflatten=unflatten,
        keys=lambda aux, n: keys,
        read=read,
        structural=lambda aux, ch: dict(zip(names, ch)),
        mutable=not spec.frozen,
        spec=spec,
        flatten_snapshot=flatten_snapshot,
        unflatten_fresh=unflatten_fresh,
    )


class _KeyedAux:
    """A register_node aux with the child keys ``keys(x)`` gave; == and hash ignore the keys."""

    __slots__ = ("aux", "keys")

    def __init__(self, aux: Any, keys: tuple[Key, ...]) -> None:
        self.aux = aux
        self.keys = keys

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _KeyedAux) and values_equal(self.aux, other.aux)

    def __hash__(self) -> int:
        return value_hash(self.aux)

    def __repr__(self) -> str:
        return repr(self.aux)


def check_keys(what: str, keys: tuple[Key, ...], n: int) -> None:
    """Raise unless ``keys`` are ``n`` distinct keys (one per child, none lost);
    ``what`` says who gave them."""
    if len(keys) != n or len(set(keys)) != n:
        problem = (
            f"{counted(len(keys), 'key')} for {counted(n, 'child', 'children')}"
            if len(keys) != n
            else "the same key twice: "
            + ", ".join(sorted({keystr((k,)) for k in keys if keys.count(k) > 1}))
        )
        raise ContainerDefinitionError(
            f"{what} {problem}. Every child needs exactly one key, "
            f"distinct from its siblings', in the order of the children."
        )


def _as_key(k: Any, i: int) -> Key:
    if isinstance(k, (AttrKey, IndexKey, DictKey)):
        return k
    if isinstance(k, str) and k.isidentifier():
        return AttrKey(k)
    return DictKey(k) if isinstance(k, Hashable) else index_key(i)


def custom_kind(
    cls: type,
    flatten: Callable[[Any], tuple[Iterable[Any], Any]],
    unflatten: Callable[[Any, Sequence[Any]], Any],
    keys: Callable[[Any], Iterable[Any]] | None,
) -> NodeKind:
    """The kind of a ``register_node`` type.

    What ``flatten`` and ``keys`` return is checked on every call (a pair, as many
    distinct keys as children): a bad result raises ``ContainerDefinitionError``
    instead of losing children silently.
    """

    def split(x: Any) -> tuple[tuple[Any, ...], Any]:
        out = flatten(x)
        if type(out) is not tuple or len(out) != 2:
            raise ContainerDefinitionError(
                f"register_node on {type_name(cls)!r}: flatten must return a pair "
                f"(children, aux), got {short_repr(out, 80)}."
            )
        children, aux = out
        try:
            return tuple(children), aux
        except TypeError:
            raise ContainerDefinitionError(
                f"register_node on {type_name(cls)!r}: flatten must return "
                f"(children, aux) with children a sequence, got {short_repr(children, 80)}."
            ) from None

    if keys is None:
        flat = split

        def unflat(aux: Any, children: Sequence[Any]) -> Any:
            return unflatten(aux, children)

        key_fn = _no_keys
    else:

        def flat(x: Any) -> tuple[tuple[Any, ...], Any]:
            children, aux = split(x)
            given = tuple(_as_key(k, i) for i, k in enumerate(keys(x)))
            check_keys(
                f"register_node on {type_name(cls)!r}: keys(x) returned", given, len(children)
            )
            return children, _KeyedAux(aux, given)

        def unflat(aux: Any, children: Sequence[Any]) -> Any:
            return unflatten(aux.aux, children)

        def key_fn(aux: Any, n: int) -> tuple[Key, ...]:
            return aux.keys  # type: ignore[no-any-return]

    def structural(aux: Any, children: Sequence[Any]) -> Any:
        return _keyed_dict(aux.keys, children) if keys is not None else tuple(children)

    return NodeKind(
        cls,
        f"a {type_name(cls)!r}",
        flatten=flat,
        unflatten=unflat,
        keys=key_fn,
        read=_same_type_children(cls, flat),
        structural=structural,
        mutable=True,
    )


def class_by_name(name: str) -> type | None:
    """The class registered under ``name`` (what files use), or ``None``."""
    return REGISTRY.class_by_name(name)


def name_of(cls: type) -> str | None:
    """The name ``cls`` was registered under (what files use), or ``None``."""
    return REGISTRY.name_of(cls)
