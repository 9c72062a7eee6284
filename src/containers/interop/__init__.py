"""Interop: containers as JAX, optree and PyTorch pytrees.

``register_jax()``, ``register_optree(namespace="")`` and ``register_torch()`` each
register every container, present and future (and the classes given to ``register``
and ``register_node``), with that library's pytree registry, with the same children
order, key paths and kept values as ``containers`` itself. None of them is imported
until it is called, so ``import containers`` stays light. See docs/interop.md.
"""

from containers.interop._jax import register_jax as register_jax
from containers.interop._optree import register_optree as register_optree
from containers.interop._torch import register_torch as register_torch

__all__ = ["register_jax", "register_optree", "register_torch"]
