"""Kind factories for the types a program declares: ``container_kind`` makes the kind
of a declared container from its generated functions, ``custom_kind`` the kind of a
``register_node`` type from the functions given (their results checked on every
call). The kinds the registry finds on first sight (namedtuples, hand-written
Container classes) are made in ``_registry``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from containers._errors import ContainerDefinitionError, short_repr, type_name
from containers._kinds import (
    Mismatch,
    NodeKind,
    _as_key,
    _keyed_dict,
    _KeyedAux,
    _no_keys,
    check_keys,
    distinct_labels,
)
from containers._paths import Key
from containers._registry import _same_type_children, label
from containers._spec import ContainerSpec

__all__ = ["container_kind", "custom_kind"]


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
