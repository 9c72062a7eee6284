"""A file's vocabulary: the format's keys, the dtype table, ``Tensor`` and ``Layout``.

The first stage of the read side: the names every header reader (``_layout_fast``,
``_layout``) and the array readers (``_arrays``) share. It parses nothing and reads no
bytes. Split from ``_layout``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "CODES",
    "DTYPES",
    "FORMAT_KEY",
    "FORMAT_VERSION",
    "TREE_KEY",
    "Layout",
    "Tensor",
]

FORMAT_KEY = "containers.format"
TREE_KEY = "containers.tree"
FORMAT_VERSION = "1"
_ALIGN = 64  # the data section starts on a cache line
_MAX_INT = 2**63

#: The safetensors dtype codes this library reads and writes, and their numpy dtypes
#: (little-endian). Dtype strings from a file are looked up here, never given to
#: ``np.dtype``.
DTYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype("?"),
    "U8": np.dtype("u1"),
    "I8": np.dtype("i1"),
    "U16": np.dtype("<u2"),
    "I16": np.dtype("<i2"),
    "U32": np.dtype("<u4"),
    "I32": np.dtype("<i4"),
    "U64": np.dtype("<u8"),
    "I64": np.dtype("<i8"),
    "F16": np.dtype("<f2"),
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "C64": np.dtype("<c8"),
}
try:  # bfloat16 exists only with ml_dtypes
    import ml_dtypes

    DTYPES["BF16"] = np.dtype(ml_dtypes.bfloat16)
    # float8, as safetensors names them (torch.float8_e4m3fn, float8_e5m2, float8_e8m0fnu)
    DTYPES["F8_E4M3"] = np.dtype(ml_dtypes.float8_e4m3fn)
    DTYPES["F8_E5M2"] = np.dtype(ml_dtypes.float8_e5m2)
    DTYPES["F8_E8M0"] = np.dtype(ml_dtypes.float8_e8m0fnu)
except ImportError:  # pragma: no cover - ml_dtypes is installed in the test environment
    pass

#: The safetensors dtypes (safetensors 0.8) that may be missing from DTYPES (BF16 is
#: there when ml_dtypes is installed): refused like any unknown dtype, with a message
#: that says where to read them.
_OTHER_SAFETENSORS_DTYPES = frozenset(
    {"F8_E5M2", "F8_E4M3", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "BF16"}
)

#: numpy scalar type -> code (byte order is normalized separately).
CODES: dict[type, str] = {dt.type: code for code, dt in DTYPES.items()}


class Tensor(NamedTuple):
    """One validated tensor entry: ``begin``/``end`` relative to the data section.

    A tuple, so that sorting by position is a C comparison (benchmarks/serialization.py,
    "many": 100,000 entries).
    """

    begin: int
    end: int
    name: str
    code: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]


@dataclass(frozen=True, slots=True)
class Layout:
    """A validated header: tensors in file order, metadata strings, where data starts."""

    tensors: dict[str, Tensor]
    metadata: dict[str, str]
    data_start: int
    file_size: int
