"""The optree adapter: containers as optree pytrees, in any namespace.

This stage translates node kinds into ``optree.register_pytree_node`` calls; it
imports optree only when ``register_optree`` runs and never traverses a tree.
"""

from __future__ import annotations

import importlib
import threading
import warnings
from collections.abc import Sequence
from typing import Any

from containers._access import getpath
from containers._errors import ContainerDefinitionError, type_name
from containers._paths import AttrKey, DictKey, IndexKey, Key
from containers._registry import NodeKind
from containers._split import MISSING
from containers.interop._common import (
    MISSING_TYPE,
    Subscription,
    hand_written_functions,
    is_hand_written,
    kept_aux,
    kept_values_type,
)
from containers.interop._generated import compile_adapters, plain_unflatten

__all__ = ["optree_functions", "register_optree"]

_ENTRY_TYPE: list[Any] = []


class _ItemName(str):
    """A ``DictKey``'s string as an optree path entry: equal to the string (paths stay
    raw keys), but read and rendered as an item, ``['k']``, where a plain ``str`` entry
    is a field, ``.k``."""

    __slots__ = ()


def _entry(key: Key) -> Any:
    """A key's optree path entry: its raw value, a ``DictKey``'s string as ``_ItemName``."""
    if type(key) is AttrKey:
        return key.name
    if type(key) is DictKey and type(key.key) is str:
        return _ItemName(key.key)
    return key.raw


def _key(entry: Any) -> Key:
    """The key an ``_entry`` came from (an ``int`` is read as ``getpath`` reads ``[0]``)."""
    if type(entry) is str:
        return AttrKey(entry)
    if type(entry) is int:
        return IndexKey(entry)
    return DictKey(str(entry) if type(entry) is _ItemName else entry)


def _key_entry_type(optree: Any) -> Any:
    """The path entry type of ``register_node`` classes: each key rendered as ct does."""
    if not _ENTRY_TYPE:

        class KeyEntry(optree.PyTreeEntry):  # type: ignore[misc]
            """A child of a ``register_node`` class: ``.name`` for a field (``AttrKey``),
            ``[k]`` for an item (``DictKey``, ``IndexKey``)."""

            __slots__ = ()

            def __call__(self, obj: Any, /) -> Any:
                # the child under this key as containers finds it: a register_node
                # class need not have the attribute or item its keys name
                return getpath(obj, (_key(self.entry),))

            def codify(self, /, node: str = "") -> str:
                entry = self.entry
                if type(entry) is str:
                    return f"{node}.{entry}"
                return f"{node}[{entry!r}]"

        _ENTRY_TYPE.append(KeyEntry)
    return _ENTRY_TYPE[0]


def optree_functions(kind: NodeKind, optree: Any, *, plain: bool = False) -> tuple[Any, Any, Any]:
    """``(flatten, unflatten, path_entry_type)`` of one kind, for optree.

    ``flatten`` gives optree's triple ``(children, metadata, entries)``: the field
    names of a declared container (``GetAttrEntry``), the raw keys of a
    ``register_node`` class. Metadata is what ``jax_functions`` uses as aux data. A
    container's ``flatten`` is generated (``_generated``); ``plain=True`` gives its
    plain twin.
    """
    spec = kind.spec
    if spec is not None:
        generated = kind.flatten
        entries = spec.children
        kept_type = kept_values_type(spec, "optree") if spec.keep else None

        def flatten(x: Any) -> tuple[Sequence[Any], Any, Sequence[Any]]:
            children, kept = generated(x)
            return children, kept_aux(kept_type, kept), entries

        if plain:
            return flatten, plain_unflatten(spec), optree.GetAttrEntry
        # One call per node, as a hand-written registration makes (benchmarks/interop.py)
        fast = compile_adapters(spec, "optree", kept_type=kept_type, slow=flatten)
        return fast["flatten"], fast["unflatten"], optree.GetAttrEntry

    if is_hand_written(kind):
        node_flatten, unflatten, node_keys = hand_written_functions(kind)
    else:
        node_flatten, unflatten, node_keys = kind.flatten, kind.unflatten, kind.keys

    def custom_flatten(x: Any) -> tuple[Sequence[Any], Any, Sequence[Any]]:
        children, aux = node_flatten(x)
        return children, aux, [_entry(k) for k in node_keys(aux, len(children))]

    return custom_flatten, unflatten, _key_entry_type(optree)


def _target(namespace: str) -> Any:
    """optree's own name of a namespace: ``""`` is its global namespace object."""
    if namespace == "":
        return getattr(importlib.import_module("optree.registry"), "__GLOBAL_NAMESPACE")
    return namespace


def _remover(namespace: str) -> Any:
    def remove(cls: type) -> None:
        """Unregister a superseded class, so that optree lets go of it."""
        optree = importlib.import_module("optree")
        optree.unregister_pytree_node(cls, namespace=_target(namespace))

    return remove


def _adder(namespace: str) -> Any:
    def add(kind: NodeKind) -> bool:
        optree = importlib.import_module("optree")
        target = _target(namespace)
        flatten, unflatten, entry_type = optree_functions(kind, optree)
        try:
            with warnings.catch_warnings():
                # Overriding optree's namedtuple handling is the point of ct.register
                # on a namedtuple (children= and keep= may differ from its fields).
                warnings.filterwarnings("ignore", "PyTree type .* is a subclass of")
                optree.register_pytree_node(
                    kind.type, flatten, unflatten, path_entry_type=entry_type, namespace=target
                )
        except ValueError as e:
            if "already registered" not in str(e):
                raise
            where = f"namespace {namespace!r}" if namespace else "the global namespace"
            warnings.warn(
                f"register_optree: {type_name(kind.type)!r} is already registered with "
                f"optree in {where} by other code, and that registration stays: optree "
                f"flattens {type_name(kind.type)} as that code says, not as its "
                f"containers declaration. Remove the other registration to use the "
                f"declaration.",
                stacklevel=2,
            )
            return False
        return True

    return add


_NAMESPACES: dict[str, Subscription] = {}
_LOCK = threading.Lock()


def _missing_adder(namespace: str) -> Any:
    def add_missing() -> None:
        """``ct.MISSING`` as an optree node without children (``_common.MISSING_TYPE``)."""
        optree = importlib.import_module("optree")
        optree.register_pytree_node(
            MISSING_TYPE,
            lambda x: ((), None, ()),
            lambda aux, children: MISSING,
            namespace=_target(namespace),
        )

    return add_missing


def register_optree(namespace: str = "") -> None:
    """Make every container an optree pytree, present and future, in ``namespace``.

    Registers each declared container (and each class given to ``register`` or
    ``register_node``) with ``optree.register_pytree_node``: the declared children
    in order, with their field names as path entries (``GetAttrEntry``, so
    accessors render ``.layers[0].w``), the kept values as metadata, rebuilt as
    ``ct.unflatten`` does. ``namespace=""`` registers globally, so every optree call
    sees containers; another name registers only for calls made with
    ``namespace=that name``. Classes implementing the ``Container`` protocol by
    hand are registered too: those defined so far by each call, later ones when
    ``containers`` first meets one of their instances. Calling it again for a
    namespace registers only hand-written classes defined since. A class superseded
    by a redefinition (same ``module.qualname``) is unregistered, so that it can be
    freed. optree is imported here, not by ``import containers``.

    Examples:
        >>> import pytest
        >>> optree = pytest.importorskip("optree")
        >>> import containers as ct
        >>> from containers.interop import register_optree
        >>> register_optree(namespace="demo")
        >>> @ct.container
        ... class Pair:
        ...     a: int
        ...     b: int
        >>> optree.tree_flatten_with_path(Pair(1, 2), namespace="demo")[:2]
        ([('a',), ('b',)], [1, 2])
        >>> optree.tree_map(lambda v: v * 10, Pair(1, 2), namespace="demo")
        Pair(a=10, b=20)

    Args:
        namespace: optree's registry namespace; ``""`` (the default) is global.

    Raises:
        ContainerDefinitionError: ``namespace`` is not a string.
        ImportError: optree is not installed.
    """
    if not isinstance(namespace, str):
        raise ContainerDefinitionError(
            f"register_optree(namespace=...) takes a string, got {namespace!r}: pass "
            f'"" for the global namespace or the name your optree calls use.'
        )
    importlib.import_module("optree")
    with _LOCK:
        subscription = _NAMESPACES.get(namespace)
        if subscription is None:
            subscription = _NAMESPACES[namespace] = Subscription(
                _adder(namespace), _remover(namespace), first=_missing_adder(namespace)
            )
    subscription.subscribe()
