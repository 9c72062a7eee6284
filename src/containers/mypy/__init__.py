"""The mypy plugin: declarations checked and tree operations typed, at type-check time.

This stage runs inside mypy only, after everything else: it imports mypy, the standard
library and ``containers._errors`` (for the runtime's wording), never the runtime. It must
never claim a type the runtime does not produce: wherever the static type of a tree does
not show its structure, it leaves mypy the declared signature.

Enable it with ``plugins = ["containers.mypy"]`` (docs/typing.md). What it does:

- ``@container`` (a ``dataclass_transform``): chains the class maker the runtime uses
  (mypy's dataclass transform, or the class's own dataclass/attrs decorator), then checks
  ``children=``/``keep=`` as ``containers._spec`` does and reports, in the runtime's words,
  an unknown name (with a did-you-mean hint), a name listed twice or in both lists, and a
  reset field without a default (``ct.register(cls, ...)`` calls are checked too). The
  declaration goes into ``TypeInfo.metadata["containers"]``, which mypy caches, and a typed
  ``__containers_children__`` is added so that containers fit ``containers.Tree[T]``.
- ``fmap`` / ``fmapstructure`` / ``fmap_with_path``: a signature hook reads the static
  type of the tree and, when every node in it is known, gives the call the signature
  ``def [U] (f: Callable[[<leaf types>], U], tree) -> <tree with U leaves>``. Mypy's own
  inference solves ``U`` (lambdas get typed parameters, overloaded ``str`` or ``float``
  work, the assignment target is used), and an ``f`` that cannot take the leaves is an
  ``arg-type`` error. A return hook then checks each field that keeps its type (a
  concrete type, or a type parameter a kept field also uses) against what ``f`` returns
  for the leaves found there: a ``containers-leaf`` error.
- ``flatten`` / ``leaves`` / ``structure``: ``list[<leaf types>]`` for the leaves.
- ``unflatten`` / ``Structure.unflatten``: the tree type recorded in ``Structure[X]``,
  rebuilt with the element type of the new leaves.

The node rules mirror the runtime's (docs/glossary.md): declared containers, list, tuple,
namedtuple, dict, OrderedDict, defaultdict, deque and ``None`` are nodes. Static types
that may hide a node give up: ``Any``, ``object``, type variables, abstract collections,
protocols, callables, subclasses of builtin collections, dataclasses, attrs classes and
container subclasses that are not declared themselves (``ct.register`` may make them
nodes), hand-written ``Container`` classes, and classes some container inherits from.
Classes given to ``register_node`` at runtime cannot be seen: they count as leaves.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

# mypy.types must be imported before mypy.expandtype and friends (which the modules
# below import), or importing this package outside mypy fails with a circular import.
import mypy.types  # noqa: F401
from mypy.plugin import (
    ClassDefContext,
    FunctionContext,
    FunctionSigContext,
    MethodContext,
    MethodSigContext,
    Plugin,
)
from mypy.types import FunctionLike, Type

from containers.mypy._common import _MAP_FUNCTIONS, MYPY_VERSIONS, _api_name
from containers.mypy._declarations import _container_hook, _register_hook
from containers.mypy._hooks import (
    _flatten_result,
    _map_result,
    _map_signature,
    _structure_unflatten_signature,
    _unflatten_result,
    _unflatten_signature,
)

__all__ = ["MYPY_VERSIONS", "ContainersPlugin", "plugin"]


def plugin(version: str) -> type[Plugin]:
    """Return the plugin class; mypy calls this with its own version.

    A version outside `MYPY_VERSIONS` is reported on stderr, and the plugin still runs:
    refusing to start would break every run after a mypy upgrade, while the typing tests
    are what tells whether the new version works.
    """
    if not _version_supported(version):
        low, high = MYPY_VERSIONS
        print(
            f"containers.mypy: mypy {version} is outside the tested range "
            f">={low[0]}.{low[1]},<{high[0]}.{high[1]}; the plugin may report wrong types "
            f"or crash. Install a mypy in that range, or remove containers.mypy from "
            f"plugins= to use the declared signatures.",
            file=sys.stderr,
        )
    return ContainersPlugin


def _version_supported(version: str) -> bool:
    parts: list[int] = []
    for piece in version.split("+", maxsplit=1)[0].split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    low, high = MYPY_VERSIONS
    return low <= (parts[0], parts[1] if len(parts) > 1 else 0) < high


class ContainersPlugin(Plugin):
    """Route mypy's hooks for the public names of ``containers`` to this module."""

    def get_class_decorator_hook_2(
        self, fullname: str
    ) -> Callable[[ClassDefContext], bool] | None:
        """Check ``@container`` declarations (after chaining mypy's dataclass transform)."""
        return _container_hook if _api_name(fullname) == "container" else None

    def get_function_signature_hook(
        self, fullname: str
    ) -> Callable[[FunctionSigContext], FunctionLike] | None:
        """Type ``fmap``, ``fmapstructure``, ``fmap_with_path``, ``unflatten`` per call."""
        name = _api_name(fullname)
        if name in _MAP_FUNCTIONS:
            return functools.partial(_map_signature, name=name)
        if name == "unflatten":
            return _unflatten_signature
        return None

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        """Check the leaves given to ``Structure.unflatten``."""
        return _unflatten_result if _is_structure_unflatten(fullname) else None

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        """Type the results of ``flatten``, ``leaves`` and ``structure``; check ``register``."""
        name = _api_name(fullname)
        if name in ("flatten", "leaves", "structure"):
            return _flatten_result
        if name in _MAP_FUNCTIONS and name != "fmapstructure":
            return functools.partial(_map_result, name=name)
        if name == "unflatten":
            return _unflatten_result
        if name == "register":
            return _register_hook
        return None

    def get_method_signature_hook(
        self, fullname: str
    ) -> Callable[[MethodSigContext], FunctionLike] | None:
        """Type ``Structure.unflatten`` like ``unflatten``."""
        return _structure_unflatten_signature if _is_structure_unflatten(fullname) else None


def _is_structure_unflatten(fullname: str) -> bool:
    cls, _, name = fullname.rpartition(".")
    return name == "unflatten" and cls.endswith(".Structure") and _api_name(cls) is not None
