"""optax's optimizer states as containers, under their public names.

optax's states are NamedTuples defined in private modules (``optax._src.transform``);
this stage registers each class optax exports with ``ct.register`` under the name
users write (``optax.ScaleByAdamState``), so files name them stably across optax's
internal moves. It imports optax only when ``register_optax`` runs.
"""

from __future__ import annotations

import importlib
import sys

from containers._errors import ContainerDefinitionError
from containers._registry import name_of

__all__ = ["register_optax"]

#: The modules whose exported NamedTuple classes are registered, in this order.
_MODULES = ("optax", "optax.contrib", "optax.schedules", "optax.transforms")


def register_optax() -> list[str]:
    """Register optax's state classes (NamedTuples) for save/load, by public name.

    Each NamedTuple class that optax exports (``optax.ScaleByAdamState``,
    ``optax.EmptyState``, ``optax.contrib.MuonState``, ...) is declared with
    ``ct.register`` under that name, all fields children, so
    ``ct.save(path, opt.init(params))`` works for any optax chain and the file names
    the classes as users do, not by optax's private modules. Classes already
    registered (by you, or by an earlier call) keep their registration.
    ``register_jax()`` calls this when optax is already imported; call it yourself
    otherwise (before loading a file that holds optax states, without ``like=``).

    Examples:
        >>> import pytest
        >>> optax = pytest.importorskip("optax")
        >>> import jax.numpy as jnp
        >>> import containers as ct
        >>> from containers.interop import register_optax
        >>> _ = register_optax()
        >>> state = optax.adam(1e-3).init({"w": jnp.zeros(2)})
        >>> ct.deserialize(ct.serialize(state))[0].mu
        {'w': array([0., 0.], dtype=float32)}

    Returns:
        The names registered by this call.

    Raises:
        ImportError: optax is not installed.
    """
    done: list[str] = []
    for module_name in _MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            if module_name == "optax":
                raise
            continue
        # A class under its own name first: optax also exports aliases
        # (AdaptiveGradClipState is EmptyState), which then find it registered.
        attrs = sorted(
            dir(module),
            key=lambda a: (getattr(getattr(module, a, None), "__name__", None) != a, a),
        )
        for attr in attrs:
            cls = getattr(module, attr, None)
            if (
                attr.startswith(("_", "GradientTransformation"))
                or not isinstance(cls, type)
                or not issubclass(cls, tuple)
                or not hasattr(cls, "_fields")
                or name_of(cls) is not None
            ):
                continue
            name = f"{module_name}.{attr}"
            from containers._decorator import register

            try:
                register(cls, name=name)
            except ContainerDefinitionError:  # the name is taken by another class
                continue
            done.append(name)
    return done


def register_optax_if_imported() -> None:
    """``register_optax()`` if optax is imported already (``register_jax`` calls it)."""
    if "optax" in sys.modules:
        register_optax()
