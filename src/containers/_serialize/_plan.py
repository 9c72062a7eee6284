"""A validated tree ready to write: its records and tensors, and the header they make.

``Plan.layout`` renders the tensor entries (sorted by item size, then name), ``header``
the whole header with the tree's records, ``fill_crcs`` the CRC32 slots. It knows
nothing of trees: ``_encode`` fills it, ``_save`` writes it.
"""

from __future__ import annotations

import json
import json.encoder
import operator
from collections import deque
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np

from containers._serialize import _compiled, _format
from containers._serialize._format import (
    CODES,
    FORMAT_KEY,
    FORMAT_VERSION,
    build_header,
    crc32,
)

__all__ = ["Plan"]


_ITEMSIZE = operator.attrgetter("itemsize")


@dataclass
class Plan:
    """A validated tree ready to write: records, tensors (C-contiguous, little-endian)."""

    records: list[Any] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    arrays: list[np.ndarray[Any, Any]] = field(default_factory=list)
    crc_slots: list[list[Any]] = field(default_factory=list)  # the "A" records
    metadata: dict[str, str] = field(default_factory=dict)  # save(metadata=...)

    def layout(self) -> tuple[str, list[int]]:
        """The tensor entries as JSON members, and the order of the tensors in the file.

        Tensors are sorted by item size (largest first), then name, so each is aligned
        to its item size. The members are rendered directly rather than through
        ``json.dumps`` of dicts, the part that depends on the dtype and shape once per
        distinct pair (benchmarks/serialization.py, "many": 100,000 entries of 4
        distinct kinds at most); ``_layout_plain`` is the plain twin
        (tests/test_serialize_encode.py).
        """
        arrays, names = self.arrays, self.names
        sizes = set(map(_ITEMSIZE, arrays))
        if len(sizes) == 1:  # no ties: the names are distinct
            order = sorted(range(len(arrays)), key=names.__getitem__)
        else:
            keyed = sorted(zip([-a.itemsize for a in arrays], names, range(len(arrays))))
            order = [k[2] for k in keyed]
        encoder = _compiled._encoder
        if encoder is not None:  # in C, dtypes and shapes read by the buffer protocol
            found: str | None = encoder.entries(arrays, names, order, _compiled.format_codes())
            if found is not None:
                return found, order
        # What json.dumps gives for a str, without its per-call overhead (100,000 names).
        dumps = json.encoder.encode_basestring_ascii
        middles: dict[tuple[Any, tuple[int, ...]], str] = {}
        parts = []
        pos = 0
        for i in order:
            a = arrays[i]
            key = (a.dtype, a.shape)
            middle = middles.get(key)
            if middle is None:
                shape = ",".join(map(str, a.shape))
                middle = middles[key] = (
                    f':{{"dtype":"{CODES[a.dtype.type]}","shape":[{shape}],"data_offsets":['
                )
            end = pos + a.nbytes
            parts.append(f"{dumps(names[i])}{middle}{pos},{end}]}}")
            pos = end
        return ",".join(parts), order

    def _layout_plain(self) -> tuple[str, list[int]]:
        """``layout``'s plain twin: the same entries, one ``json.dumps`` each."""
        arrays, names = self.arrays, self.names
        keyed = sorted(zip([-a.itemsize for a in arrays], names, range(len(arrays))))
        order = [k[2] for k in keyed]
        parts = []
        pos = 0
        for i in order:
            a = arrays[i]
            entry = {"dtype": CODES[a.dtype.type], "shape": list(a.shape)}
            entry["data_offsets"] = [pos, pos + a.nbytes]
            parts.append(json.dumps({names[i]: entry}, separators=(",", ":"))[1:-1])
            pos += a.nbytes
        return ",".join(parts), order

    def header(self, entries: str) -> bytes:
        """The header bytes, with the CRC32 slots as they are now.

        The tree is ASCII: a str holding a lone surrogate (which UTF-8 cannot encode)
        is then the escape ``\\udcff`` inside the tree string, and the header stays
        the valid UTF-8 JSON every safetensors reader requires (docs/file-format.md).
        """
        tree = _compiled.render(self.records, quoted=True)  # escaped once more, as a str
        return build_header(entries, {**self.metadata, FORMAT_KEY: FORMAT_VERSION}, tree)

    def fill_crcs(self, order: list[int] | None = None) -> None:
        """Compute every tensor's CRC32 into its record (with ``order``: those tensors'
        only, by index)."""
        if order is not None:
            for i in order:
                self.crc_slots[i][2] = f"{crc32(self.arrays[i]):08x}"
            return
        # _format._crc read now (tests switch it), called without crc32's own frame; the
        # slots filled by map in C, no bytecode per array (100,000 in the "many" tree)
        hexes = map("%08x".__mod__, map(_format._crc, self.arrays))
        deque(map(operator.setitem, self.crc_slots, repeat(2), hexes), maxlen=0)
