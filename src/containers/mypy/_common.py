"""Names shared by the plugin's modules: the supported mypy versions, error codes,
the runtime's node classes and the call options that hide the leaves.
"""

from __future__ import annotations

from typing import Final

from mypy.errorcodes import ErrorCode

MYPY_VERSIONS: Final = ((2, 4), (2, 5))
"""The mypy versions this plugin is tested with, as ``(lowest, first unsupported)``. The
plugin API is internal to mypy and changes without notice (python/mypy#6617), so the
range is pinned and widened only after the typing tests pass on the new version."""

DECLARATION_ERROR: Final = ErrorCode(
    "containers-field", "Check children= and keep= of container declarations", "containers"
)
LEAF_ERROR: Final = ErrorCode(
    "containers-leaf", "Check that new leaves fit the fields that keep their type", "containers"
)

METADATA_KEY: Final = "containers"
CHILDREN_METHOD: Final = "__containers_children__"

# Node kinds of the runtime (docs/glossary.md) by the full name of their class.
_SEQUENCE_NODES: Final = frozenset({"builtins.list", "builtins.tuple", "collections.deque"})
_MAPPING_NODES: Final = frozenset(
    {"builtins.dict", "collections.OrderedDict", "collections.defaultdict"}
)
_NODE_CLASSES: Final = _SEQUENCE_NODES | _MAPPING_NODES

# Options after which the leaves are no longer the natural leaves, so the declared
# signature is all that can be said.
_MAP_OPAQUE_OPTIONS: Final = ("exclude", "walk", "prune", "where")
_FLATTEN_OPAQUE_OPTIONS: Final = ("is_leaf",)

_MAP_FUNCTIONS: Final = frozenset({"fmap", "fmapstructure", "fmap_with_path"})
_MAX_DEPTH: Final = 64


def _api_name(fullname: str) -> str | None:
    """Return ``fmap`` for ``containers.fmap`` or ``containers._fmap.fmap``, else None."""
    module, _, name = fullname.rpartition(".")
    if module == "containers" or module.startswith("containers._"):
        return name
    return None
