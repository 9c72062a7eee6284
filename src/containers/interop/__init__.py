"""Interop: containers as JAX, optree and PyTorch pytrees.

``register_jax()``, ``register_optree(namespace="")`` and ``register_torch()`` each
register every container, present and future (and the classes given to ``register``
and ``register_node``), with that library's pytree registry, with the same children
order, key paths and kept values as ``containers`` itself. None of them is imported
until it is called, so ``import containers`` stays light. See docs/interop.md.

``register_optax()`` registers optax's state classes for files under their public
names; ``to_state_dict``, ``from_state_dict`` and ``load_into_module`` bridge
container trees and torch ``state_dict``s (docs/ml-checkpoints.md).
"""

from containers.interop._jax import register_jax as register_jax
from containers.interop._optax import register_optax as register_optax
from containers.interop._optree import register_optree as register_optree
from containers.interop._state_dict import from_state_dict as from_state_dict
from containers.interop._state_dict import load_into_module as load_into_module
from containers.interop._state_dict import to_state_dict as to_state_dict
from containers.interop._torch import register_torch as register_torch

__all__ = [
    "from_state_dict",
    "load_into_module",
    "register_jax",
    "register_optax",
    "register_optree",
    "register_torch",
    "to_state_dict",
]
