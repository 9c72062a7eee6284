"""The JAX adapter: containers as ``jax.tree_util`` pytrees with keys.

This stage translates node kinds into ``jax.tree_util.register_pytree_with_keys``
calls; it imports jax only when ``register_jax`` runs and never traverses a tree.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from containers._errors import type_name
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
from containers.interop._optax import register_optax_if_imported

__all__ = ["jax_functions", "register_jax"]


def _key_converter(tu: Any) -> Callable[[Key], Any]:
    get_attr, sequence, dict_key = tu.GetAttrKey, tu.SequenceKey, tu.DictKey

    def convert(key: Key) -> Any:
        if type(key) is AttrKey:
            return get_attr(key.name)
        if type(key) is IndexKey:
            return sequence(key.idx)
        assert type(key) is DictKey
        return dict_key(key.key)

    return convert


def jax_functions(kind: NodeKind, tu: Any, *, plain: bool = False) -> tuple[Any, Any, Any]:
    """``(flatten, unflatten, flatten_with_keys)`` of one kind, for ``jax.tree_util``.

    A declared container's aux data is the tuple of its kept values (``()`` without
    kept fields), as ``KeptValues`` so that arrays and unhashable values compare and
    fail the way ``containers`` says; its keys are ``GetAttrKey``s. Its functions are
    generated (``_generated``); ``plain=True`` gives their plain twins. A hand-written
    ``Container`` class goes through its protocol methods, with ``ProtocolAux``.
    """
    spec = kind.spec
    if spec is not None:
        generated = kind.flatten
        keys = tuple(tu.GetAttrKey(n) for n in spec.children)
        kept_type = kept_values_type(spec, "jax") if spec.keep else None

        def flatten(x: Any) -> tuple[Sequence[Any], Any]:
            children, kept = generated(x)
            return children, kept_aux(kept_type, kept)

        def flatten_with_keys(x: Any) -> tuple[Sequence[tuple[Any, Any]], Any]:
            children, aux = flatten(x)
            return tuple(zip(keys, children)), aux

        if plain:
            return flatten, plain_unflatten(spec), flatten_with_keys
        # One call per node, as a hand-written registration makes (benchmarks/interop.py)
        fast = compile_adapters(
            spec, "jax", kept_type=kept_type, slow=flatten, slow_keys=flatten_with_keys, keys=keys
        )
        return fast["flatten"], fast["unflatten"], fast["flatten_with_keys"]

    convert = _key_converter(tu)
    if is_hand_written(kind):
        node_flatten, unflatten, node_keys = hand_written_functions(kind)
    else:
        node_flatten, unflatten, node_keys = kind.flatten, kind.unflatten, kind.keys

    def custom_flatten_with_keys(x: Any) -> tuple[Sequence[tuple[Any, Any]], Any]:
        children, aux = node_flatten(x)
        keys = node_keys(aux, len(children))
        return [(convert(k), c) for k, c in zip(keys, children)], aux

    return node_flatten, unflatten, custom_flatten_with_keys


def _add(kind: NodeKind) -> bool:
    tu = importlib.import_module("jax.tree_util")
    flatten, unflatten, flatten_with_keys = jax_functions(kind, tu)
    try:
        tu.register_pytree_with_keys(kind.type, flatten_with_keys, unflatten, flatten)
    except ValueError as e:
        if "Duplicate" not in str(e):
            raise
        warnings.warn(
            f"register_jax: {type_name(kind.type)!r} is already registered with "
            f"jax.tree_util by other code, and that registration stays: jax flattens "
            f"{type_name(kind.type)} as that code says, not as its containers "
            f"declaration. Remove the other registration to use the declaration.",
            stacklevel=2,
        )
        return False
    return True


def _add_missing() -> None:
    """``ct.MISSING`` as a JAX node without children (``_common.MISSING_TYPE``)."""
    tu = importlib.import_module("jax.tree_util")
    tu.register_pytree_with_keys(
        MISSING_TYPE, lambda x: ((), None), lambda aux, children: MISSING, lambda x: ((), None)
    )


_JAX = Subscription(_add, first=_add_missing)


def register_jax() -> None:
    """Make every container a JAX pytree: present and future, with key paths.

    Registers each declared container (and each class given to ``register`` or
    ``register_node``) with ``jax.tree_util.register_pytree_with_keys``: the
    children in the declared order are the pytree children, with ``GetAttrKey``
    keys, so ``jax.tree_util.keystr`` gives ``ct.keystr``'s text; the kept values
    are the aux data; unflattening rebuilds exactly as ``ct.unflatten`` does (no
    ``__init__``, reset fields get their defaults). Classes declared later are
    registered as they are declared. Classes implementing the ``Container``
    protocol by hand are registered too (their protocol methods flatten and rebuild
    them): those defined so far by each call, later ones when ``containers`` first
    meets one of their instances. Calling it again registers only hand-written
    classes defined since. JAX cannot unregister a type: every class registered
    stays alive. jax is imported here, not by ``import containers``. When optax is
    imported already, its state classes are registered for files too
    (``register_optax``).

    Kept values must be hashable where JAX hashes structures (``jax.jit``'s cache):
    an unhashable one (a list, a dict, an array) raises ``ContainerDefinitionError``
    naming the field there; ``tree_map`` and friends compare kept values by
    content, arrays included.

    Examples:
        >>> import pytest
        >>> jax = pytest.importorskip("jax")
        >>> import containers as ct
        >>> from containers.interop import register_jax
        >>> register_jax()
        >>> @ct.container(children=["w"])
        ... class Scale:
        ...     w: float
        ...     name: str = "scale"
        >>> path, leaf = jax.tree_util.tree_flatten_with_path([Scale(2.0)])[0][0]
        >>> jax.tree_util.keystr(path), leaf
        ('[0].w', 2.0)
        >>> jax.tree_util.tree_map(lambda w: w * 10, Scale(2.0, name="s"))
        Scale(w=20.0, name='s')

    Raises:
        ImportError: jax is not installed.
    """
    importlib.import_module("jax.tree_util")
    _JAX.subscribe()
    register_optax_if_imported()
