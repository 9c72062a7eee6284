"""The registry: which node kind each type has, one level deep.

This stage owns the one ``Registry`` (the class is in ``_registry_table``): the type -> NodeKind table (builtins, declared
containers, ``register_node`` types, namedtuples and hand-written Container protocol
classes, classified on first sight), the names that files use, and the observers
that other libraries' registries hang on; the kinds of the builtin node types, whose
``read`` looks types up here, and of the types classified on first sight. It never
recurses: the walks in later stages do. ``NodeKind`` and what needs no lookup is in
``_kinds``; the kinds of declared and ``register_node`` types come from
``_kind_factories``.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable, Sequence
from typing import Any

from containers._equality import value_hash, values_equal
from containers._errors import ContainerDefinitionError, counted, short_repr, type_name
from containers._kinds import (
    VALUE_BASES,
    Mismatch,
    NodeKind,
    _build_none,
    _defaultdict_build,
    _defaultdict_eq,
    _defaultdict_flatten,
    _defaultdict_iterate,
    _dict_build,
    _dict_flatten,
    _dict_iterate,
    _dict_keys,
    _keyed_dict,
    _KeyedAux,
    _no_keys,
    _none_flatten,
    _none_read,
    _ordered_build,
    _ordered_flatten,
    _ordered_iterate,
    _ordered_keys,
    _sorted_eq,
    _sorted_hash,
    check_keys,
    distinct_labels,
    same_order,
    sort_keys,
)
from containers._paths import AttrKey, DictKey, Key
from containers._registry_table import Registry
from containers._spec import class_flavor

__all__ = [  # with two names of _kinds read from here (_KeyedAux: old pickles too)
    "DEFAULT_DICT",
    "DEQUE",
    "DICT",
    "IMMUTABLE_LEAVES",
    "KINDS",
    "LEAF_TYPES",
    "LEAF_TYPES_NONE",
    "LIST",
    "NONE",
    "ORDERED_DICT",
    "REGISTRY",
    "TUPLE",
    "VALUE_BASES",
    "Mismatch",
    "NodeKind",
    "Registry",
    "_KeyedAux",
    "_no_keys",
    "cacheable",
    "check_keys",
    "class_by_name",
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


def label(x: Any) -> str:
    """Describe a value for messages: ``a tuple``, ``a 'Linear'``, ``a leaf of type float``."""
    kind = kind_of(x)
    if kind is not None:
        return kind.label
    return f"a leaf of type {type(x).__qualname__}"


# --- builtin kinds ---------------------------------------------------------------------


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


def _ordered_read(y: Any, aux: Any, n: int) -> list[Any]:
    return _read_mapping(y, (aux,), n)


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


#: The Container protocol's methods; a class defining the first must define the rest
#: but ``__container_deserialize__`` (only files need it).
_PROTOCOL = (
    "__container_traverse__",
    "__container_reduce__",
    "__container_serialize__",
)


def _classify(registry: Registry, t: type) -> NodeKind | None:
    """The kind of a type on first sight (``Registry.classify``): a namedtuple's, a
    hand-written Container class's; ``None`` (a leaf) for any other type.

    Raises:
        ContainerDefinitionError: ``t`` is an undeclared subclass of a container or
            registered type, or implements only part of the Container protocol.
    """
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
        kind = registry.registered(base)
        if kind is not None:
            raise _subclass_error(t, base, declared=kind.spec is not None)
    return None


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


#: The one registry.
REGISTRY = Registry(_BUILTINS, _classify)
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


def class_by_name(name: str) -> type | None:
    """The class registered under ``name`` (what files use), or ``None``."""
    return REGISTRY.class_by_name(name)


def name_of(cls: type) -> str | None:
    """The name ``cls`` was registered under (what files use), or ``None``."""
    return REGISTRY.name_of(cls)
