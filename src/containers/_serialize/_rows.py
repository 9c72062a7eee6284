"""A file's tree view: a row per record (depth, parent, key, text), validated as built.

``inspect`` and ``containers diff`` show files through these rows; their paths are
shown by the one rule of ``_paths.shorten``. The rows are read by ``_records``'
cursor over a file's records (``file_cursor``, which ``_like.file_leaves`` reads the
file's leaves by path with too). Split from ``_decode``.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from containers._errors import FormatError, LimitError, safe_repr
from containers._paths import PATH_END, shorten
from containers._records import CLOSE, OPEN, RecordCursor
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

__all__ = ["Indexed", "Row", "RowPaths", "dtype_name", "file_cursor", "row_path", "rows"]


class Row(NamedTuple):
    """One line of a file's tree view: depth, parent row, key and what is there."""

    depth: int
    parent: int
    key: str
    text: str
    tensor: str | None


def rows(records: Records, tensors: dict[str, Any], limits: Limits) -> list[Row]:
    """The tree view of ``records``, validated as ``build`` validates it (but for types).

    ``tensors`` maps names to objects with ``code``, ``shape`` (``_format.Tensor``). A
    client of ``_records.RecordCursor`` (``file_cursor``): a row per record, its key
    the cursor's; an alias shows its target's path as messages show it, taken when the
    target is finished.
    """
    recs = records.recs
    crcs = iter(records.crcs)  # one per array record, in order
    out: list[Row] = []
    append = out.append
    used: set[str] = set()
    # The shown paths of the finished records that aliases point to (only those: an
    # entry per record of a tree of a million tiny records would cost twice its file).
    targets = records.targets
    shown: dict[int, str] = {}
    max_depth = limits.max_depth
    cursor = file_cursor(recs, _row_keys)
    step, position, leaf_run = cursor.step, cursor.position, cursor.leaf_run
    items: Any
    while (event := step()) is not None:
        j = cursor.index
        if event == CLOSE:
            if j in targets:
                shown[j] = cursor.shown_path()
            continue
        rec = cursor.record
        depth, parent, _, key = position()
        if event == OPEN:
            append(Row(depth, parent, key if depth else "", _node_text(rec), None))
            n = rec.n
            if n and depth >= max_depth:
                raise LimitError(
                    f"the tree is nested deeper than max_depth={max_depth} at record "
                    f"#{j}. Pass limits=Limits(max_depth=...) to accept it."
                )
            # a node of leaf records: its rows at once
            run = leaf_run() if n else None
            if run is None:
                continue
            items = zip(range(j + 1, j + 1 + n), run, cursor.child_keys())
            # the alias targets among them (each run's records are read once: linear)
            first = j + 1
            in_run = bool(targets) and not targets.isdisjoint(range(first, first + n))
            depth, parent = depth + 1, j
        else:
            items = ((j, rec, key if depth else ""),)
            in_run = False
        for j, rec, key in items:
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
            else:  # an alias
                target = shown.get(rec.data)
                if target is None:
                    raise _bad(j, f"is an alias to record #{rec.data}, which is not finished")
                text = f"same object as {target}"
            append(Row(depth, parent, key, text, tensor))
            if in_run:
                if j in targets:
                    shown[j] = cursor.shown_path(child=j - first)
            elif j in targets:  # a leaf stepped to
                shown[j] = cursor.shown_path()
    if not cursor.complete:
        raise FormatError("the tree ends inside a node: records are missing. The file is corrupt.")
    if cursor.next_record < len(recs):
        raise _bad(cursor.next_record, "follows the end of the tree")
    unused = set(tensors) - used
    if unused:
        raise FormatError(
            f"the file has {len(unused)} tensor(s) the tree never refers to, e.g. "
            f"{_shown(sorted(unused)[0])}. The file is corrupt."
        )
    return out


def file_cursor(recs: Sequence[Rec], keys: Callable[[Rec], Sequence[Any]]) -> RecordCursor:
    """The cursor over a file's records: one per node (``n`` values follow it) or
    leaf (an array, a scalar, an alias), each node's values keyed by ``keys``."""
    return RecordCursor(recs, _COUNT, keys, _LEAF_TAGS)


_COUNT = operator.itemgetter(1)  # Rec.n: a node's count of values


def _row_keys(rec: Rec) -> Any:
    """A node record's keys as the tree view shows them (``key_of``), each made when
    read (``Indexed``)."""
    return Indexed(rec.n, functools.partial(key_of, rec))


class Indexed:
    """The keys of a node record, made from their index when read: a file's node may
    claim 2**62 values (a hostile one; the records run out first), and a walk reads
    the keys of the values it meets only, so that it costs linear time in the file."""

    __slots__ = ("_key", "_n")

    def __init__(self, n: int, key: Callable[[int], Any]) -> None:
        self._n = n
        self._key = key

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> Any:
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self._key(i)

    def __iter__(self) -> Iterator[Any]:
        return map(self._key, range(self._n))


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
