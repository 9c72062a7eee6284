"""The PyTorch adapter: containers as ``torch.utils._pytree`` nodes with keys.

This stage translates node kinds into ``torch.utils._pytree.register_pytree_node``
calls; it imports torch only when ``register_torch`` runs and never traverses a tree.
"""

from __future__ import annotations

import base64
import importlib
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from containers._errors import SerializationError, type_name
from containers._paths import AttrKey, DictKey, IndexKey, Key
from containers._registry import NodeKind
from containers._serialize import deserialize, serialize
from containers._spec import ContainerSpec
from containers.interop._common import (
    Subscription,
    hand_written_functions,
    is_hand_written,
    kept_aux,
    kept_values_type,
)
from containers.interop._generated import compile_adapters, plain_unflatten

__all__ = ["dumpable_context", "register_torch", "torch_functions"]


def _key_converter(pytree: Any) -> Callable[[Key], Any]:
    get_attr, sequence, mapping = pytree.GetAttrKey, pytree.SequenceKey, pytree.MappingKey

    def convert(key: Key) -> Any:
        if type(key) is AttrKey:
            return get_attr(key.name)
        if type(key) is IndexKey:
            return sequence(key.idx)
        if type(key) is DictKey:
            return mapping(key.key)
        raise TypeError(f"not a containers key: {key!r}")  # pragma: no cover

    return convert


def torch_functions(kind: NodeKind, pytree: Any, *, plain: bool = False) -> tuple[Any, Any, Any]:
    """``(flatten_fn, unflatten_fn, flatten_with_keys_fn)`` of one kind, for torch.

    torch's ``unflatten_fn`` takes ``(children, context)``, the reverse of JAX's
    order; the context is what ``jax_functions`` uses as aux data. A container's
    functions are generated (``_generated``); ``plain=True`` gives their plain twins.
    """
    spec = kind.spec
    if is_hand_written(kind):
        node_flatten, unflatten, node_keys = hand_written_functions(kind)
    else:
        node_flatten, unflatten, node_keys = kind.flatten, kind.unflatten, kind.keys

    def unflatten_fn(children: Iterable[Any], context: Any) -> Any:
        return unflatten(context, children)

    if spec is not None:
        generated = kind.flatten
        keys = tuple(pytree.GetAttrKey(n) for n in spec.children)
        kept_type = kept_values_type(spec, "torch") if spec.keep else None

        def flatten(x: Any) -> tuple[Sequence[Any], Any]:
            children, kept = generated(x)
            return children, kept_aux(kept_type, kept)

        def flatten_with_keys(x: Any) -> tuple[list[tuple[Any, Any]], Any]:
            children, context = flatten(x)
            return list(zip(keys, children)), context

        if plain:
            twin = plain_unflatten(spec)
            return flatten, lambda children, context: twin(context, children), flatten_with_keys
        # One call per node, as a hand-written registration makes (benchmarks/interop.py)
        fast = compile_adapters(
            spec,
            "torch",
            kept_type=kept_type,
            slow=flatten,
            slow_keys=flatten_with_keys,
            keys=keys,
        )
        return fast["flatten"], fast["unflatten"], fast["flatten_with_keys"]

    convert = _key_converter(pytree)

    def custom_flatten_with_keys(x: Any) -> tuple[list[tuple[Any, Any]], Any]:
        children, aux = node_flatten(x)
        keys = node_keys(aux, len(children))
        return [(convert(k), c) for k, c in zip(keys, children)], aux

    return node_flatten, unflatten_fn, custom_flatten_with_keys


def dumpable_context(spec: ContainerSpec) -> tuple[Any, Any]:
    """``(to_dumpable_context, from_dumpable_context)`` of a declared container.

    ``treespec_dumps`` (and ``torch.export.save``, which stores the input and output
    specs with it) writes a context as JSON, and torch's default turns the tuple of
    kept values into a list, so a spec read back never matched the one it was written
    from. The kept values travel as a ``ct.serialize`` of ``{field: value}`` (types
    kept: tuples, bytes, floats, arrays), base64 in the JSON, and come back as
    the aux data ``flatten`` gives.
    """
    kept_type = kept_values_type(spec, "torch") if spec.keep else None
    where = type_name(spec.cls)

    def to_dumpable(context: Any) -> str:
        try:
            data = serialize(dict(zip(spec.keep, context)))
        except SerializationError as e:
            raise SerializationError(
                f"treespec_dumps: the kept values of a {where!r} must be storable by "
                f"ct.serialize to be written in a TreeSpec; {e}"
            ) from None
        return base64.b64encode(data).decode("ascii")

    def from_dumpable(dumped: Any) -> Any:
        kept = deserialize(base64.b64decode(dumped))
        return kept_aux(kept_type, tuple(kept[name] for name in spec.keep))

    return to_dumpable, from_dumpable


def _add(kind: NodeKind) -> bool:
    cls = kind.type
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        # torch's Python pytree reads every namedtuple as one before its registry, so
        # a registration would reach only its C++ twin: the two would disagree.
        return False
    pytree = importlib.import_module("torch.utils._pytree")
    flatten, unflatten, flatten_with_keys = torch_functions(kind, pytree)
    name = kind.spec.name if kind.spec is not None else f"{cls.__module__}.{cls.__qualname__}"
    to_dumpable, from_dumpable = (None, None) if kind.spec is None else dumpable_context(kind.spec)
    try:
        pytree.register_pytree_node(
            cls,
            flatten,
            unflatten,
            serialized_type_name=name,
            flatten_with_keys_fn=flatten_with_keys,
            to_dumpable_context=to_dumpable,
            from_dumpable_context=from_dumpable,
        )
    except ValueError as e:
        if "already registered" not in str(e):
            raise
        warnings.warn(
            f"register_torch: {type_name(cls)!r} is already registered with "
            f"torch.utils._pytree by other code, and that registration stays: torch "
            f"flattens {type_name(cls)} as that code says, not as its containers "
            f"declaration. Remove the other registration to use the declaration.",
            stacklevel=2,
        )
        return False
    return True


_TORCH = Subscription(_add)


def register_torch() -> None:
    """Make every container a ``torch.utils._pytree`` node: present and future.

    Registers each declared container (and each class given to ``register`` or
    ``register_node``) with ``torch.utils._pytree.register_pytree_node``, with a
    ``flatten_with_keys_fn`` (``GetAttrKey`` keys, so ``torch.utils._pytree.keystr``
    gives ``ct.keystr``'s text), the kept values as context and the class's
    ``ct`` name as ``serialized_type_name``; unflattening rebuilds as
    ``ct.unflatten`` does. ``torch.func.grad``/``vmap`` and ``tree_map`` then take
    and return containers. Classes implementing the ``Container`` protocol by hand
    are registered too: those defined so far by each call, later ones when
    ``containers`` first meets one of their instances. Calling it again registers
    only hand-written classes defined since. torch has no public way to unregister
    a type: every class registered stays alive. torch is imported here, not by
    ``import containers``.

    torch reads every namedtuple as a namedtuple before its registry (all fields
    children, in field order, rebuilt by calling the class): ``ct.register`` on a
    namedtuple class cannot change what torch does, so such classes are left out;
    torch agrees with ``containers`` on those whose children are all their fields.
    torch visits dicts in insertion order, containers in sorted key order.

    Examples:
        >>> import pytest
        >>> pytree = pytest.importorskip("torch.utils._pytree")
        >>> import containers as ct
        >>> from containers.interop import register_torch
        >>> register_torch()
        >>> @ct.container
        ... class Pair:
        ...     a: int
        ...     b: int
        >>> path, leaf = pytree.tree_flatten_with_path(Pair(1, 2))[0][1]
        >>> pytree.keystr(path), leaf
        ('.b', 2)
        >>> pytree.tree_map(lambda v: v * 10, Pair(1, 2))
        Pair(a=10, b=20)

    Raises:
        ImportError: torch is not installed.
    """
    importlib.import_module("torch.utils._pytree")
    _TORCH.subscribe()
