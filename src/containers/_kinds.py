"""Node kinds: how each node type is taken apart and put back together, one level deep.

``NodeKind``, the functions that take the builtin node types apart and rebuild them
(their kinds, ``TUPLE``, ``DICT``..., are made in ``_registry``, whose lookups their
``read`` uses), the leaf types known from the start, the aux and keys of
``register_node`` types, and the sorting of dict keys. Nothing here looks a type up
in the registry, and nothing recurses.
"""

from __future__ import annotations

import numbers
import operator
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from containers._equality import value_hash, values_equal
from containers._errors import ContainerDefinitionError, counted, safe_repr
from containers._paths import AttrKey, DictKey, IndexKey, Key, index_key, index_keys, keystr
from containers._spec import ContainerSpec

__all__ = [
    "VALUE_BASES",
    "Mismatch",
    "NodeKind",
    "check_keys",
    "distinct_labels",
    "same_order",
    "sort_keys",
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


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


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


#: Leaf types known from the start. Hot loops test ``type(c) in LEAF_TYPES`` before
#: anything else, so a leaf costs one set lookup (benchmarks/run.py, W2 and W5).
_SEED_LEAVES = frozenset({int, float, complex, bool, str, bytes, np.ndarray})
_SEED_LEAVES_NONE = _SEED_LEAVES | {type(None)}
_SEED_IMMUTABLE = frozenset({int, float, complex, bool, str, bytes})
#: A leaf is a value, never cached by identity, when its type derives from one of these:
#: every number (``numbers.Number``: Decimal, Fraction, numpy scalars too), strings,
#: bytes, frozensets and ranges. Other leaves are objects, cached by identity.
VALUE_BASES: tuple[type, ...] = (numbers.Number, str, bytes, frozenset, range, np.generic)


class _KeyedAux:
    """A register_node aux with the child keys ``keys(x)`` gave; == and hash ignore the keys."""

    __slots__ = ("aux", "keys")
    # Pickled Structures name it by module: the one it was first defined in, which
    # hands it on, so that pickles load in versions before and after it moved here.
    __module__ = "containers._registry"

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
