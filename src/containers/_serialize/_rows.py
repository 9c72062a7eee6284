"""A file's tree view: a row per record (depth, parent, key, text), validated as built.

``inspect`` and ``containers diff`` show files through these rows; their paths are
shown by the one rule of ``_paths.shorten``. Split from ``_decode``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from containers._errors import FormatError, LimitError, safe_repr
from containers._paths import PATH_END, shorten
from containers._serialize._limits import Limits
from containers._serialize._recparse import (
    _LEAF_TAGS,
    Rec,
    Records,
    _bad,
    _shown,
    key_of,
    printable,
)

__all__ = ["Row", "RowPaths", "dtype_name", "row_path", "rows"]


class Row(NamedTuple):
    """One line of a file's tree view: depth, parent row, key and what is there."""

    depth: int
    parent: int
    key: str
    text: str
    tensor: str | None


def rows(records: Records, tensors: dict[str, Any], limits: Limits) -> list[Row]:
    """The tree view of ``records``, validated as ``build`` validates it (but for types).

    ``tensors`` maps names to objects with ``code``, ``shape`` (``_format.Tensor``).
    """
    recs = records.recs
    crcs = iter(records.crcs)  # one per array record, in order
    out: list[Row] = []
    stack: list[list[int]] = []  # [record index, values seen, row index]
    paths = RowPaths(out)
    used: set[str] = set()
    # Only for the records that aliases point to (an entry per record of a tree of a
    # million tiny records would cost twice its file).
    targets = records.targets
    finished: set[int] = set()
    row_of: dict[int, int] = {}
    done = False
    for j, rec in enumerate(recs):
        if done:
            raise _bad(j, "follows the end of the tree")
        if stack:
            top = stack[-1]
            key = key_of(recs[top[0]], top[1])
            parent = top[2]
        else:
            key, parent = "", -1
        tag = rec.tag
        tensor = None
        if tag == "S":
            text = safe_repr(rec.data)
        elif tag == "A":
            name = rec.data
            crc = next(crcs)
            t = tensors.get(name)
            if t is None or name in used:
                raise FormatError(
                    f"the tree refers to tensor {_shown(name)} "
                    f"{'twice' if t is not None else 'that the file does not have'}. "
                    f"The file is corrupt."
                )
            used.add(name)
            tensor = name
            nbytes = t.end - t.begin
            text = f"{dtype_name(t.code)}[{','.join(map(str, t.shape))}]  {nbytes:,} B  crc32 {crc:08x}"
        elif tag == "@":
            if rec.data not in finished or rec.data not in row_of:
                raise _bad(j, f"is an alias to record #{rec.data}, which is not finished")
            text = f"same object as {paths[row_of[rec.data]]}"
        else:
            text = _node_text(rec)
        row = len(out)
        if j in targets:
            row_of[j] = row
        out.append(Row(len(stack), parent, key, text, tensor))
        paths.add()
        if tag not in _LEAF_TAGS and rec.n:
            if len(stack) >= limits.max_depth:
                raise LimitError(
                    f"the tree is nested deeper than max_depth={limits.max_depth} at record "
                    f"#{j}. Pass limits=Limits(max_depth=...) to accept it."
                )
            stack.append([j, 0, row])
            continue
        if j in targets:
            finished.add(j)
        while True:
            if not stack:
                done = True
                break
            top = stack[-1]
            top[1] += 1
            if top[1] < recs[top[0]].n:
                break
            k = stack.pop()[0]
            if k in targets:
                finished.add(k)
    if not done:
        raise FormatError("the tree ends inside a node: records are missing. The file is corrupt.")
    unused = set(tensors) - used
    if unused:
        raise FormatError(
            f"the file has {len(unused)} tensor(s) the tree never refers to, e.g. "
            f"{_shown(sorted(unused)[0])}. The file is corrupt."
        )
    return out


def row_path(out: list[Row], i: int) -> str:
    """The keystr path of row ``i`` (``'the root'`` for the root)."""
    parts = []
    while i >= 0:
        parts.append(out[i].key)
        i = out[i].parent
    return "".join(reversed(parts)) or "the root"


class RowPaths:
    """The paths of a tree view's rows as messages show them: whole up to
    ``LONG_PATH`` levels, deeper ones by both ends and the depth (as ``_path``), in
    time that does not grow with the depth, so that a line per row of a deep tree (an
    alias in ``inspect``, a difference in ``diff``) costs linear time in all.

    ``add()`` after each row appended to ``rows``.
    """

    __slots__ = ("_heads", "_rows")

    def __init__(self, rows: list[Row]) -> None:
        self._rows = rows
        # per row deeper than PATH_END, its ancestor at that depth; None for the others
        # (an int per row would cost as much as the rows of a tree of tiny records)
        self._heads: list[int | None] = []
        for _ in rows:
            self.add()

    def add(self) -> None:
        heads = self._heads
        row = self._rows[len(heads)]
        if row.depth <= PATH_END:
            heads.append(None)
        else:
            head = heads[row.parent]
            heads.append(row.parent if head is None else head)

    def __getitem__(self, i: int) -> str:
        rows = self._rows
        depth = rows[i].depth

        def keys(start: int, stop: int) -> str:
            if stop < depth:  # the first PATH_END keys: the path of the row's head
                head = self._heads[i]
                assert head is not None and start == 0  # depth > LONG_PATH > PATH_END
                return row_path(rows, head)
            if start == 0:
                return row_path(rows, i)
            tail, j = [], i
            for _ in range(stop - start):
                tail.append(rows[j].key)
                j = rows[j].parent
            return "".join(reversed(tail))

        return shorten(depth, keys)


_DTYPE_NAMES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "U16": "uint16",
    "I16": "int16",
    "U32": "uint32",
    "I32": "int32",
    "U64": "uint64",
    "I64": "int64",
    "F16": "float16",
    "F32": "float32",
    "F64": "float64",
    "C64": "complex64",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",
}


def dtype_name(code: str) -> str:
    return _DTYPE_NAMES.get(code, code)


def _node_text(rec: Rec) -> str:
    tag = rec.tag
    if tag == "N":
        return "None"
    if tag == "T":
        return f"tuple ({rec.n})"
    if tag == "L":
        return f"list ({rec.n})"
    if tag == "Q":
        return f"deque ({rec.n}, maxlen={rec.data})"
    if tag == "D":
        return f"dict ({rec.n})"
    if tag == "O":
        return f"OrderedDict ({rec.n})"
    if tag == "DD":
        factory = rec.data[2]
        return f"defaultdict ({rec.n}, {getattr(factory, '__name__', None)})"
    if tag == "C":
        name, version, _, kept = rec.data
        shown = f"{printable(name)} v{version}"
        return shown + (f"  kept: {', '.join(map(printable, kept))}" if kept else "")
    return f"{printable(rec.data[0])} (register_node, {rec.data[1]} children)"
