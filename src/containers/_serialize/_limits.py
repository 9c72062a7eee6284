"""Limits: the bounds a file must respect before anything is allocated for it.

This stage only holds numbers; the parser (``_format``) and the tree decoder
(``_decode``) check them. It imports nothing from the package but the errors.
"""

from __future__ import annotations

import dataclasses

__all__ = ["DEFAULT_LIMITS", "Limits"]


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what ``load``, ``deserialize`` and ``inspect`` accept from a file.

    Every bound is checked before the memory it guards is allocated; going past one
    raises ``LimitError`` naming the bound and how to raise it. The defaults accept
    real models (millions of tensors, trees 1,000,000 deep) and refuse absurd headers.

    Examples:
        >>> import containers as ct
        >>> ct.Limits().max_header_bytes
        100000000
        >>> ct.Limits(max_depth=10)
        Limits(max_header_bytes=100000000, max_nodes=10000000, max_depth=10, max_tensors=10000000, max_ndim=64)

    Args:
        max_header_bytes: The largest JSON header, in bytes (safetensors uses 100 MB).
        max_nodes: The most records (nodes, leaves and kept values) in the tree, and
            the most values it expands to, a subtree shared through aliases counted
            once per path that reaches it.
        max_depth: The deepest nesting of nodes in the tree.
        max_tensors: The most tensors in the file.
        max_ndim: The most dimensions of one tensor.
    """

    max_header_bytes: int = 100_000_000
    max_nodes: int = 10_000_000
    max_depth: int = 1_000_000
    max_tensors: int = 10_000_000
    max_ndim: int = 64

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if type(value) is not int or value < 0:
                raise TypeError(f"Limits: {f.name} must be a non-negative int, got {value!r}.")


DEFAULT_LIMITS = Limits()
