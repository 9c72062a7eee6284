"""A Structure's records: pre-order ``(kind, aux, n, mask)`` tuples, and the linear
passes over them (rebuild, subtree ends, the record cursor; their key paths and text
are in ``_record_paths``).

``mask`` is ``None`` when all ``n`` children of a node are leaves, ``True`` when all
are nodes, else a tuple of booleans (True = node). Records meet no object twice and
no cycle, so their passes need no engine: each is one loop with a stack of counters,
at any depth. ``RecordCursor`` is the one walk over them, and over a file's records,
that a pass without a faster loop of its own uses, and the one place their key paths
are built and shortened (``_paths.shorten``): ``ends``, the save encoder's second
pass, a file's tree view and its leaves by path (``_serialize._rows``,
``_serialize._like``). ``build`` and ``_record_paths.ranked_paths`` keep their own
loops, which handle runs of equal records at once, and have compiled twins
(``_speedups.build``, ``_speedups.leaf_paths``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from functools import partial
from operator import itemgetter
from typing import Any

from containers._paths import Key, shorten
from containers._registry import DICT, LIST, TUPLE, NodeKind

__all__ = [
    "CLOSE",
    "C_BUILD_CONTEXT",
    "C_LIVE_BUILD_CONTEXT",
    "LEAF",
    "OPEN",
    "Record",
    "RecordCursor",
    "build",
    "ends",
    "leaf_children",
]

#: One node: its kind, its aux, its number of children, and which of them are nodes.
Record = tuple[NodeKind, Any, int, Any]


def build(records: Sequence[Record], leaves: Sequence[Any], fresh: bool = True) -> Any:
    """Rebuild a tree from pre-order records and leaves, with a stack of open nodes.

    Each node but tuples and lists is made by its kind's ``unflatten_fresh`` (a
    Structure's rebuild: mutable kept values copied), or with ``fresh=False`` by its
    ``unflatten`` (the executor maps' one walk: kept values kept as the same objects,
    as fmap keeps them).

    The innermost open node is kept in locals (``pkind``, ``paux``, ``pn``, ``pmask``,
    ``pout``), the others on ``stack``: a node whose children are all leaves is built
    from one slice and attached without touching the stack (benchmarks/run.py, W1u).
    The plain twin of ``_speedups.build``, which ``Structure.unflatten`` runs where the
    extension is built.
    """
    if not records:
        return leaves[0]
    # Slices must be fresh lists (a list node is its slice), so a tuple is copied. A
    # node's unflatten may change the caller's list, so the list is copied before the
    # first one runs while leaves remain to be read: what is read is what the compiled
    # twin, which copies at the start, reads. Tuples and lists, built here, need no
    # copy (benchmarks/instructions.py, W1u: a dict of lists of tuples, the dict last).
    shared = type(leaves) is list
    if not shared:
        leaves = list(leaves)
    total = len(leaves)
    pos = 0
    stack: list[tuple[Any, ...]] = []
    pkind: Any = None
    paux: Any = None
    pn = 0
    pmask: Any = None
    pout: list[Any] | None = None  # None: no open node (the root is next, or done)
    value: Any
    j = 0
    while True:
        kind, aux, n, mask = records[j]
        j += 1
        if mask is None:  # a node whose children are all leaves: one slice
            kids = leaves[pos : pos + n]
            pos += n
        elif mask is True and n and _same_sequences(records, j, n):
            # n tuples (or lists) of m leaves each: cut by zip in C (benchmarks/run.py, W1u)
            seq, _, m, _ = records[j]
            j += n
            chunk = leaves[pos : pos + n * m]
            pos += n * m
            kids = list(zip(*[iter(chunk)] * m)) if m else [()] * n
            if seq is LIST:
                kids = list(map(list, kids))
        else:  # a node with node children: open it
            if pout is not None:
                stack.append((pkind, paux, pn, pmask, pout))
            pkind, paux, pn, pmask, pout = kind, aux, n, mask, []
            if mask is not True:
                i = 0
                while not mask[i]:
                    pout.append(leaves[pos])
                    pos += 1
                    i += 1
            continue
        while True:  # close the node (kind, aux, kids), then the open nodes it completes
            if kind is TUPLE:
                value = tuple(kids)
            elif kind is LIST:
                value = kids
            else:
                if shared and pos < total:
                    leaves, shared = list(leaves), False
                if fresh:
                    value = kind.unflatten_fresh(aux, kids)  # copies mutable kept values
                else:
                    value = kind.unflatten(aux, kids)
            if pout is None:
                return value
            pout.append(value)
            if pmask is not True:
                i = len(pout)
                while i < pn and not pmask[i]:
                    pout.append(leaves[pos])
                    pos += 1
                    i += 1
            if len(pout) < pn:
                break
            kind, aux, kids = pkind, paux, pout
            if stack:
                pkind, paux, pn, pmask, pout = stack.pop()
            else:
                pout = None


#: What the compiled twin of ``build`` (``_speedups.build``) reads besides the records
#: and leaves: the kinds it builds itself, the dict kind's ``unflatten_fresh`` as
#: imported (it builds dicts itself only while that is still the one), ``build``, to
#: which it hands records that are not what flatten makes, and the name of the method
#: it calls on each other kind, as ``build`` does: a Structure's rebuild.
C_BUILD_CONTEXT = (TUPLE, LIST, DICT, DICT.unflatten_fresh, build, "unflatten_fresh")
#: ``C_BUILD_CONTEXT`` for ``build(..., fresh=False)``: kept values kept, as fmap keeps
#: them (the executor maps' one walk).
C_LIVE_BUILD_CONTEXT = (
    TUPLE,
    LIST,
    DICT,
    DICT.unflatten,
    partial(build, fresh=False),
    "unflatten",
)


def _same_sequences(records: Sequence[Record], j: int, n: int) -> bool:
    """Whether ``records[j:j + n]`` are n equal records of all-leaf tuples or lists."""
    first = records[j]
    return (
        first[3] is None
        and (first[0] is TUPLE or first[0] is LIST)
        and records[j : j + n].count(first) == n
    )


def _node_children(mask: Any, n: int) -> int:
    return 0 if mask is None else n if mask is True else sum(mask)


def leaf_children(mask: Any, n: int) -> int:
    return n if mask is None else 0 if mask is True else n - sum(mask)


def ends(records: Sequence[Record]) -> list[int]:
    """For each record, the index just past its subtree's records."""
    out = [0] * len(records)
    cursor = RecordCursor(records)
    while (event := cursor.step()) is not None:
        if event == CLOSE:
            out[cursor.index] = cursor.next_record
    return out


#: ``RecordCursor.step``'s events: a node opened, a leaf, a node closed.
OPEN, LEAF, CLOSE = 0, 1, 2
_END = 3  # the walk is over (or the records ran out)
_FIRST = itemgetter(0)
_CHUNK = 256  # leaf records checked at once by leaf_run


class RecordCursor:
    """The walk over records in pre-order, one event at a time, with the path of the
    current position built only when asked for: the one walk over records and the one
    place their key paths are built.

    ``step()`` returns ``OPEN`` (a node: ``record`` and its ``index`` in the records;
    ``skip()`` then passes over its subtree), ``LEAF`` (``index``: the leaf's index in
    flatten order), ``CLOSE`` (the node ``record`` at ``index`` is done) or None at
    the end; a structure that is one leaf gives one ``LEAF``. ``path()`` is the key
    path of the current position, from the open nodes' keys (each node's computed
    once, when a path below it is first asked for); ``depth`` is its length, and
    ``position()`` gives the depth, parent record, index and key at once.
    ``next_record`` and ``next_leaf`` count what was read; ``key()``,
    ``shown_path()`` and ``where()`` give the current key, the path as messages show
    it (``_paths.shorten``) and the whole path, rendered on demand. The passes over
    records are its clients: ``ends``, the save encoder's second pass, and a file's
    tree view (``_serialize._rows``) and leaves by path (``_serialize._like``).

    ``shape(record) -> (n, mask)`` and ``keys(record) -> keys of its n children`` read
    a record; by default a Structure's, ``(kind, aux, n, mask)``. Records of another
    format plug in with their own. A file's records are one per node or leaf: ``leaf``
    is the set of the first items (a file's tags) of the records that are leaves
    (``leaf_run`` and ``leaf_records`` take a node's leaf records at once), and
    ``shape(record)`` is a node's count of values (its children and their records
    follow it); a leaf record gives a ``LEAF`` whose ``index`` and ``record`` are its
    record's, and ``next_leaf`` counts such leaves. Records that run out inside a node
    end the walk (None) with ``complete`` False; records left after the root's end are
    at ``next_record``.
    """

    __slots__ = (
        "_event",
        "_frames",
        "_keys_of",
        "_leaf",
        "_shape",
        "index",
        "next_leaf",
        "next_record",
        "record",
        "records",
        "step",
    )

    def __init__(
        self,
        records: Sequence[Any],
        shape: Callable[[Any], Any] = itemgetter(2, 3),
        keys: Callable[[Any], Sequence[Any]] | None = None,
        leaf: AbstractSet[Any] | None = None,
    ) -> None:
        self.records = records
        self._shape = shape
        self._keys_of = _structure_keys if keys is None else keys
        self._leaf = leaf
        #: per open node: [record index, n, mask, current child, keys or None,
        #: the node's own path or None]
        self._frames: list[list[Any]] = []
        self._event: int | None = None
        self.record: Any = None
        self.index = -1
        self.next_record = 0
        self.next_leaf = 0
        #: ``step()``: the next event (see the class), or None when the walk is done.
        self.step: Callable[[], int | None] = (
            self._step_records if leaf is None else self._step_file
        )

    def _step_file(self) -> int | None:
        """``step`` over a file's records (``leaf``): the walk of ``_step_records``, a
        node's count read by ``shape`` and every value a record of its own."""
        frames = self._frames
        if frames:
            frame = frames[-1]
            i = frame[3] = frame[3] + 1
            if i < frame[1]:
                j = self.next_record
                records = self.records
                if j >= len(records):
                    self._event = _END  # run out inside a node
                    return None
                record = records[j]
                self.next_record = j + 1
                self.record, self.index = record, j
                if record[0] in self._leaf:  # type: ignore[operator]
                    self.next_leaf += 1
                    self._event = LEAF
                    return LEAF
                frames.append([j, self._shape(record), True, -1, None, None])
                self._event = OPEN
                return OPEN
            frames.pop()
            self.index = j = frame[0]
            self.record = self.records[j]
            self._event = CLOSE
            return CLOSE
        if self._event is None:  # the start
            return self._open()
        self._event = _END  # done: step() stays None
        return None

    def _step_records(self) -> int | None:
        """``step`` over a Structure's records (or records of another format without
        leaf records)."""
        frames = self._frames
        while frames:
            frame = frames[-1]
            frame[3] += 1
            i = frame[3]
            if i < frame[1]:
                mask = frame[2]
                if mask is None or (mask is not True and not mask[i]):
                    self.index = self.next_leaf
                    self.next_leaf += 1
                    self._event = LEAF
                    return LEAF
                return self._open()
            frames.pop()
            self.index = frame[0]
            self.record = self.records[frame[0]]
            self._event = CLOSE
            return CLOSE
        if self._event is None:  # the start
            if not self.records:  # the structure of a leaf
                self.index, self.next_leaf = 0, 1
                self._event = LEAF
                return LEAF
            return self._open()
        self._event = _END  # done: step() stays None
        return None

    def _open(self) -> int | None:
        j = self.next_record
        records = self.records
        if j >= len(records):  # records of another format, run out inside a node
            self._event = _END
            return None
        self.next_record = j + 1
        record = records[j]
        self.record, self.index = record, j
        leaf = self._leaf
        if leaf is None:
            self._frames.append([j, *self._shape(record), -1, None, None])
        elif record[0] in leaf:
            self.next_leaf += 1
            self._event = LEAF
            return LEAF
        else:
            self._frames.append([j, self._shape(record), True, -1, None, None])
        self._event = OPEN
        return OPEN

    @property
    def complete(self) -> bool:
        """Whether no node is open: after the end, whether the records held the whole
        tree (False: they ran out inside a node)."""
        return not self._frames

    def skip(self) -> None:
        """After ``OPEN``: pass over the node's subtree, without its events."""
        frame = self._frames.pop()
        n, mask = frame[1], frame[2]
        nodes = 0 if mask is None else n if mask is True else sum(mask)
        leaves = n - nodes
        j = self.next_record
        shape, leaf = self._shape, self._leaf
        while nodes:
            record = self.records[j]
            j += 1
            if leaf is not None:  # a file's record: a leaf, or a node of m values
                if record[0] in leaf:
                    nodes -= 1
                    leaves += 1
                else:
                    nodes += shape(record) - 1
                continue
            m, sub_mask = shape(record)
            sub = 0 if sub_mask is None else m if sub_mask is True else sum(sub_mask)
            nodes += sub - 1
            leaves += m - sub
        self.next_record = j
        self.next_leaf += leaves
        self._event = CLOSE

    @property
    def depth(self) -> int:
        """The number of keys on the current position's path."""
        return len(self._frames) - (self._event == OPEN)

    def leaf_run(self) -> Sequence[Any] | None:
        """After ``OPEN`` of a node of a file's records (``leaf``): the records of its
        children when all are leaf records, passed over without their events (the next
        step closes the node; ``child_keys`` and ``child_paths`` name them); else None,
        nothing read. A dict of many arrays is read a node at a time, not a step per
        leaf (benchmarks/serialization.py, "many")."""
        frame = self._frames[-1]
        n = frame[1]
        j = self.next_record
        records = self.records
        if n > len(records) - j:
            return None
        leaf: Any = self._leaf
        # checked a chunk at a time, up to the first node record: a node's check costs
        # at most the leaf records that follow it, so that the checks of all nodes of
        # a file (a hostile one too) cost linear time
        for k in range(j, j + n, _CHUNK):
            if not leaf.issuperset(map(_FIRST, records[k : min(k + _CHUNK, j + n)])):
                return None
        run = records[j : j + n]
        self.next_record = j + n
        self.next_leaf += n
        frame[3] = n - 1
        return run

    def leaf_records(self) -> Sequence[Any]:
        """After ``OPEN`` or ``CLOSE``, in a file's records (``leaf``): the records of the
        open node's next children while they are leaf records, passed over without
        their events (``shown_path(child=i)`` names the i-th child); empty when its next
        child is a node or it has none left. A node's values are read a run at a time
        between its node children, not a step per leaf (``_serialize._decode.build``)."""
        frame = self._frames[-1]
        j = self.next_record
        records = self.records
        stop = min(len(records), j + frame[1] - frame[3] - 1)
        leaf: Any = self._leaf
        if j >= stop or records[j][0] not in leaf:
            return ()
        # chunks checked at once (in C), each up to twice the run so far, the one
        # holding a node record a record at a time: a run costs linear time in the
        # records it takes, a node next costs one test
        k, size = j + 1, 4
        while k < stop:
            end = min(k + size, stop)
            if leaf.issuperset(map(_FIRST, records[k:end])):
                k, size = end, min(2 * size, _CHUNK)
                continue
            while records[k][0] in leaf:
                k += 1
            break
        frame[3] += k - j
        self.next_record = k
        self.next_leaf += k - j
        return records[j:k]

    def child_keys(self) -> Sequence[Any]:
        """After ``OPEN``: the keys of the node's children."""
        return self._keys(self._frames[-1])

    def child_paths(self, limit: int | None = None) -> list[tuple[Any, ...]]:
        """After ``OPEN``: the paths of the node's children (``path(limit)`` of each)."""
        above = self.path(limit)
        keys = self.child_keys()
        if limit is not None and len(above) >= limit:
            return [above] * len(keys)
        return list(map(above.__add__, zip(keys)))

    def position(self) -> tuple[int, int, int, Any]:
        """The current position's ``(depth, parent, i, key)``: the index of the record
        whose ``i``-th child it is, under ``key`` (at the root ``(0, -1, -1, None)``);
        one call for a pass that needs them at every position."""
        frames = self._frames
        depth = len(frames) - (self._event == OPEN)
        if not depth:
            return 0, -1, -1, None
        frame = frames[depth - 1]
        keys = frame[4]
        if keys is None:
            keys = frame[4] = self._keys_of(self.records[frame[0]])
        i = frame[3]
        return depth, frame[0], i, keys[i]

    def path(self, limit: int | None = None) -> tuple[Any, ...]:
        """The key path of the current position (of the node, at ``OPEN``/``CLOSE``),
        or with ``limit`` its first ``limit`` keys at most."""
        frames = self._frames
        depth = len(frames) - (self._event == OPEN)
        if limit is not None and depth > limit:
            depth = limit
        if not depth:
            return ()
        frame = frames[depth - 1]
        above = frame[5]
        if above is None:
            above = self._node_path(depth - 1)
        keys = frame[4]
        if keys is None:
            keys = frame[4] = self._keys_of(self.records[frame[0]])
        return (*above, keys[frame[3]])

    def _node_path(self, k: int) -> tuple[Any, ...]:
        """The path of the open node ``_frames[k]``, kept in its frame (and those of
        its ancestors computed on the way)."""
        frames = self._frames
        j = k
        while j and frames[j][5] is None:
            j -= 1
        if frames[j][5] is None:
            frames[j][5] = ()  # the root
        for m in range(j + 1, k + 1):
            parent = frames[m - 1]
            frames[m][5] = (*parent[5], self._keys(parent)[parent[3]])
        path: tuple[Any, ...] = frames[k][5]
        return path

    def shown_path(self, render: Callable[[Any], str] = str, child: int | None = None) -> str:
        """The current position's path as messages show it (``_paths.shorten``: whole
        up to ``LONG_PATH`` keys, else both ends and the depth), each key rendered by
        ``render``; with ``child``, the path of the open node's child at that index
        (after ``OPEN``, the node's: one of a ``leaf_run`` or ``leaf_records``). It
        reads only the frames it shows, so a line per position of a deep structure
        costs linear time in all."""
        frames = self._frames
        depth = self.depth
        last, index = -1, -1  # the frame whose index is child's, and child
        if child is not None:  # the top open node's child (after OPEN: the node's)
            last, index = len(frames) - 1, child
            depth = len(frames)

        def key(k: int) -> str:
            frame = frames[k]
            return render(self._keys(frame)[index if k == last else frame[3]])

        def text(start: int, stop: int) -> str:
            return "".join(map(key, range(start, stop)))

        return shorten(depth, text) or "the root"

    def key(self) -> Any:
        """The current position's key in its parent node (the last key of ``path()``;
        at the root, which has none: ``IndexError``)."""
        frame = self._frames[-2] if self._event == OPEN else self._frames[-1]
        return self._keys(frame)[frame[3]]

    def where(self, render: Callable[[Any], str] = str) -> Callable[[], str]:
        """The current position's whole path (never shortened: a name, not a message),
        each key rendered by ``render``, as a function that renders it when called.
        It stays right while the position's ancestors are open: within its subtree and
        at its ``CLOSE``. Taking one costs O(1), so a pass may take one per node and
        render the few it needs (the save encoder's tensor names and errors)."""
        frames = self._frames
        depth = self.depth
        keys = self._keys

        def text() -> str:
            return "".join([render(keys(fr)[fr[3]]) for fr in frames[:depth]])

        return text

    def _keys(self, frame: list[Any]) -> Sequence[Any]:
        if frame[4] is None:
            frame[4] = self._keys_of(self.records[frame[0]])
        keys: Sequence[Any] = frame[4]
        return keys


def _structure_keys(record: Record) -> Sequence[Key]:
    """The keys of a Structure record's children: its kind's."""
    kind, aux, n, _ = record
    keys: Sequence[Key] = kind.keys(aux, n)
    return keys
