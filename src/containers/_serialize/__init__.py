"""Saving and loading trees as safetensors files (SPEC section 8).

The stages, in import order: ``_limits`` (bounds), ``_format`` (bytes, dtypes, strict
JSON, CRC32, atomic writes), ``_values`` (scalars and keys), ``_encode`` (tree ->
records), ``_decode`` (records -> tree, schema evolution), ``_api`` (the public
functions). README.md states the threat model.
"""

from containers._serialize._api import FileInfo as FileInfo
from containers._serialize._api import deserialize as deserialize
from containers._serialize._api import inspect as inspect
from containers._serialize._api import load as load
from containers._serialize._lazy import LazyArray as LazyArray
from containers._serialize._lazy import materialize as materialize
from containers._serialize._limits import Limits as Limits
from containers._serialize._manager import CheckpointManager as CheckpointManager
from containers._serialize._save import save as save
from containers._serialize._save import serialize as serialize

__all__ = [
    "CheckpointManager",
    "FileInfo",
    "LazyArray",
    "Limits",
    "deserialize",
    "inspect",
    "load",
    "materialize",
    "save",
    "serialize",
]
