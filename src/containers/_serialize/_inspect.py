"""``inspect`` and ``FileInfo``: what a file's (or a sharded checkpoint's) header says,
read without its arrays. Split from ``_load``, which re-exports them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from containers._serialize._common import PathLike, _in_file
from containers._serialize._decode import (
    Row,
    printable,
    row_path,
    rows,
)
from containers._serialize._format import (
    FORMAT_KEY,
    FORMAT_VERSION,
    TREE_KEY,
    open_for_reading,
    read_layout,
)
from containers._serialize._limits import DEFAULT_LIMITS, Limits
from containers._serialize._recparse import _records, _records_of
from containers._serialize._shards import (
    is_sharded,
    not_a_checkpoint,
    open_sharded,
)

__all__ = ["FileInfo", "inspect"]


@dataclass(frozen=True)
class FileInfo:
    """What ``inspect`` reads from a file's header; ``str()`` gives the tree view.

    ``tensors`` maps each tensor name to ``(dtype, shape, nbytes)``; ``rows`` is the
    tree, one row per value in pre-order (a flat list of tensors for a safetensors file
    not written by containers); ``format`` is ``"containers 1"`` or ``"safetensors"``;
    ``metadata`` is the whole ``__metadata__``, ``user_metadata`` its entries but the
    library's own (what ``save(metadata=...)`` stored, or a foreign file's).
    """

    path: str
    format: str
    tensors: dict[str, tuple[str, tuple[int, ...], int]]
    metadata: dict[str, str]
    rows: list[Row]
    data_bytes: int

    def path_of(self, i: int) -> str:
        """The keystr path of row ``i``."""
        return row_path(self.rows, i)

    @property
    def user_metadata(self) -> dict[str, str]:
        """The header's metadata but the library's own ``containers.*`` entries: what
        ``save(metadata=...)`` stored, or a foreign file's own metadata."""
        return {k: v for k, v in self.metadata.items() if not k.startswith("containers.")}

    def __str__(self) -> str:
        lines = [
            f"{self.path}: {self.format}, {len(self.tensors)} tensor"
            f"{'' if len(self.tensors) == 1 else 's'}, {self.data_bytes:,} bytes of data"
        ]
        user = self.user_metadata
        if user:
            lines.append("metadata:")
            for k, v in user.items():
                shown = v if len(v) <= _META_CHARS else v[:_META_CHARS] + f"... ({len(v):,} chars)"
                lines.append(f"  {printable(k)} = {printable(shown)}")
        for r in self.rows:
            indent = "  " * min(r.depth, 40)
            key = r.key if r.depth else "(root)"
            lines.append(f"{indent}{key}: {r.text}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The tree view as collapsible HTML (notebooks show it)."""
        from containers._html import rows_html

        title = str(self).split("\n", 1)[0]
        return rows_html(title, self.rows, self.path_of)


#: Characters of a metadata value that ``str(FileInfo)`` shows.
_META_CHARS = 200


def inspect(
    path: PathLike, /, *, limits: Limits | None = None, follow_links: bool = False
) -> FileInfo:
    """Read a file's header only and describe its tree, validated as ``load`` does.

    Works on any safetensors file of the dtypes containers reads: one not written by
    containers shows its tensors as a flat list. Types need not be importable: names are
    shown, not resolved.

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> import containers as ct
        >>> path = os.path.join(tempfile.mkdtemp(), "t.safetensors")
        >>> ct.save(path, {"w": np.zeros((2, 3), np.float32), "lr": 0.1})
        >>> info = ct.inspect(path)
        >>> info.tensors
        {"['w']": ('float32', (2, 3), 24)}
        >>> print(str(info).split("\\n", 1)[1])
        (root): dict (2)
          ['lr']: 0.1
          ['w']: float32[2,3]  24 B  crc32 a3c1ca20
        >>> ct.save(path, {"w": np.zeros(2)}, metadata={"run": "r1", "step": "1000"})
        >>> ct.inspect(path).user_metadata
        {'run': 'r1', 'step': '1000'}

    ``follow_links=True`` lets a sharded checkpoint's shards be symbolic links to
    files outside its directory, as ``load``'s.

    Raises:
        FormatError, LimitError, VersionError: as ``load`` would for the header.
    """
    limits = DEFAULT_LIMITS if limits is None else limits
    path = os.fspath(path)
    if is_sharded(path):
        return _inspect_sharded(path, limits, follow_links)
    if os.path.isdir(path):
        raise not_a_checkpoint(path)
    with _in_file(path):
        return _inspect(path, limits)


def _inspect_sharded(path: str, limits: Limits, follow_links: bool) -> FileInfo:
    """``inspect`` of a sharded checkpoint: its index and its shards' headers."""
    from containers._serialize._decode import dtype_name as _dtype_name

    opened = open_sharded(path, limits, follow_links=follow_links)
    try:
        layout = {name: t for name, (_, t) in opened.tensors.items()}
        tensors = {
            name: (_dtype_name(t.code), t.shape, t.end - t.begin) for name, t in layout.items()
        }
        data = sum(t.end - t.begin for t in layout.values())
        n = len(opened.shards)
        shards = f"{n} shard{'' if n == 1 else 's'}"
        meta = opened.metadata
        if TREE_KEY in meta or FORMAT_KEY in meta:
            with _in_file(opened.path):
                records = _records_of(meta, limits)
                view = rows(records, layout, limits)
            return FileInfo(
                opened.path, f"containers {FORMAT_VERSION}, {shards}", tensors, meta, view, data
            )
        count = len(tensors)
        flat = [
            Row(
                0, -1, "", f"sharded safetensors ({count} tensor{'' if count == 1 else 's'})", None
            )
        ]
        for name, (dt, shape, nbytes) in tensors.items():
            text = f"{dt}[{','.join(map(str, shape))}]  {nbytes:,} B"
            flat.append(Row(1, 0, printable(name), text, name))
        return FileInfo(opened.path, f"safetensors, {shards}", tensors, meta, flat, data)
    finally:
        for source in {id(s): s for s, _ in opened.tensors.values()}.values():
            source.close()


def _inspect(path: str, limits: Limits) -> FileInfo:
    from containers._serialize._decode import dtype_name as _dtype_name

    with open_for_reading(path) as f:
        layout = read_layout(f, limits)
    tensors = {
        name: (_dtype_name(t.code), t.shape, t.end - t.begin) for name, t in layout.tensors.items()
    }
    data = layout.file_size - layout.data_start
    if TREE_KEY in layout.metadata or FORMAT_KEY in layout.metadata:
        records = _records(layout, limits)
        return FileInfo(
            path,
            f"containers {FORMAT_VERSION}",
            tensors,
            layout.metadata,
            rows(records, layout.tensors, limits),
            data,
        )
    n = len(tensors)
    flat = [Row(0, -1, "", f"safetensors file ({n} tensor{'' if n == 1 else 's'})", None)]
    for name, (dt, shape, nbytes) in tensors.items():
        text = f"{dt}[{','.join(map(str, shape))}]  {nbytes:,} B"
        flat.append(Row(1, 0, printable(name), text, name))
    return FileInfo(path, "safetensors", tensors, layout.metadata, flat, data)
