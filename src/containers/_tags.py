"""Which of several tag filters each leaf matches first, read from a Structure's records.

``split``, ``state`` and ``partition`` with filters that are all tags (``"param"``,
``WithTag``) rank every leaf without calling a filter: the tags of the fields on a
leaf's path are read once per node of the structure (``_record_paths.ranked_paths``), a
leaf's own ``tag`` only where its type allows one. The result is what calling each
``WithTag`` in turn gives (tests/test_split.py compares them on random trees).
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Sequence
from itertools import compress, repeat
from operator import eq
from typing import Any

from containers._engine import _fast
from containers._paths import AttrKey, KeyPath
from containers._record_paths import ranked_paths
from containers._records import Record
from containers._structure import same_records

__all__ = [
    "TagPlan",
    "declared_tags",
    "fill_part",
    "fill_part_plain",
    "own_tags",
    "tag_plan",
    "tag_ranks",
    "tagless",
]


class TagPlan:
    """What ``split``/``state``/``partition`` read from a Structure's records for some
    tags, kept for the next call on a tree made of the same objects (``tag_plan``):
    the paths, each leaf's rank from the tags of its path (before its own ``tag``),
    and per number of parts, each part's paths, their hashes and which leaves go
    there. Never
    changed once made: its lists are shared with the callers, who only read them."""

    __slots__ = ("_layouts", "first", "paths", "ranks", "records", "tags")

    def __init__(
        self,
        records: tuple[Record, ...],
        tags: tuple[str, ...],
        first: dict[str, int],
        paths: list[KeyPath],
        ranks: list[int],
    ) -> None:
        self.records = records
        self.tags = tags
        self.first = first
        self.paths = paths
        self.ranks = ranks
        self._layouts: dict[int, list[tuple[list[KeyPath], array[int], array[int]]]] = {}

    def layout(self, count: int) -> list[tuple[list[KeyPath], array[int], array[int]]]:
        """For each part ``0 .. count - 1`` (the leaves ranked j go to part j): its
        paths, their hashes and the indices of its leaves (``fill_part``), the
        numbers as ``array('q')`` (8 bytes each, not an int object)."""
        made = self._layouts.get(count)
        if made is None:
            made = []
            for j in range(count):
                picks = array(
                    "q", compress(range(len(self.ranks)), map(eq, self.ranks, repeat(j)))
                )
                keys = list(map(self.paths.__getitem__, picks))
                made.append((keys, array("q", map(hash, keys)), picks))
            self._layouts[count] = made  # the same value if two threads make it
        return made


def fill_part_plain(
    keys: list[KeyPath], hashes: array[int], leaves: list[Any], picks: array[int]
) -> dict[KeyPath, Any]:
    """``{keys[i]: leaves[picks[i]]}`` in order: the plain twin of
    ``_speedups.fill_part``, which inserts each key with its hash ``hashes[i]`` (kept
    by the plan) instead of hashing the path again."""
    return dict(zip(keys, map(leaves.__getitem__, picks)))


def fill_part(
    keys: list[KeyPath], hashes: array[int], leaves: list[Any], picks: array[int]
) -> dict[KeyPath, Any]:
    """``fill_part_plain`` (in C where the extension is built)."""
    speedups = _fast._speedups  # read per call: tests switch it
    if speedups is not None:
        part: dict[KeyPath, Any] = speedups.fill_part(keys, hashes, leaves, picks)
        return part
    return fill_part_plain(keys, hashes, leaves, picks)


#: The last plans made (``tag_plan``), most recent first; a few, so that a training
#: loop's split and state of one model, and of its optimizer state, all hit.
_PLANS: list[TagPlan] = []
_PLANS_KEPT = 4
_PLANS_LOCK = threading.Lock()


def tag_plan(
    records: tuple[Record, ...], leaves: list[Any], tags: Sequence[str]
) -> tuple[list[KeyPath], list[int], TagPlan | None]:
    """``tag_ranks``, and the plan it was read from if no leaf's own ``tag`` changed a
    rank (else None). The plan of the last calls is reused when the records are made of
    the same objects (``_structure.same_records``): a model split at every step costs
    one comparison of its records, not a pass over its keys (benchmarks/split.py). The
    ranks returned are the plan's list when no rank changed: read them, never write."""
    key = tuple(tags)
    plan = next((p for p in _PLANS if p.tags == key and same_records(p.records, records)), None)
    if plan is None:
        n = len(key)
        first: dict[str, int] = {}
        for j, tag in enumerate(key):
            first.setdefault(tag, j)
        paths, ranks = ranked_paths(records, first, n)
        plan = TagPlan(records, key, first, paths, ranks)
        with _PLANS_LOCK:
            _PLANS.insert(0, plan)
            del _PLANS[_PLANS_KEPT:]
    if not _may_move(leaves, plan.ranks):
        return plan.paths, plan.ranks, plan
    ranks = list(plan.ranks)
    own_tags(leaves, ranks, plan.first, len(key))
    return plan.paths, ranks, (plan if ranks == plan.ranks else None)


def tag_ranks(
    records: tuple[Record, ...], leaves: list[Any], tags: Sequence[str]
) -> tuple[list[KeyPath], list[int]]:
    """The path of every leaf, and the index in ``tags`` of the first tag it matches
    (``len(tags)`` if none): on a field of its path, or its own ``tag`` attribute.
    Both lists may be shared with a kept plan (``tag_plan``): read them only."""
    paths, ranks, _ = tag_plan(records, leaves, tags)
    return paths, ranks


def tag_ranks_plain(
    records: Sequence[Record], leaves: list[Any], tags: Sequence[str]
) -> tuple[list[KeyPath], list[int]]:
    """``tag_ranks`` computed afresh, with no plan kept or reused: the plain twin the
    tests compare ``tag_plan`` with."""
    n = len(tags)
    first: dict[str, int] = {}
    for j, tag in enumerate(tags):
        first.setdefault(tag, j)
    paths, ranks = ranked_paths(records, first, n)
    own_tags(leaves, ranks, first, n)
    return paths, ranks


def declared_tags(paths: list[KeyPath], leaves: list[Any]) -> set[str]:
    """Every tag of a field on some path, and every leaf's own str ``tag``."""
    tags: set[str] = set()
    for path in paths:
        for key in path:
            if type(key) is AttrKey and key.tags:
                tags.update(key.tags)
    for leaf in leaves:
        if not tagless(type(leaf)):
            own = getattr(leaf, "tag", None)
            if isinstance(own, str):
                tags.add(own)
    return tags


#: Types none of whose instances can have a ``tag`` attribute (``tagless``).
_TAGLESS: set[type] = set()
_GENERIC_GETATTR: Any = object.__getattribute__
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: no attribute can be added later


def tagless(t: type) -> bool:
    """Whether no instance of ``t`` can have a ``tag`` attribute, so that ``WithTag``
    need not look (cached): ``t`` and its bases have none, its instances have no
    ``__dict__``, attribute lookup is the default one, and ``t`` cannot be changed
    (float, int, numpy arrays)."""
    if t in _TAGLESS:
        return True
    if (
        t.__flags__ & _IMMUTABLE_TYPE
        and not t.__dictoffset__
        and t.__getattribute__ is _GENERIC_GETATTR
        and not hasattr(t, "__getattr__")
        and not hasattr(t, "tag")
    ):
        _TAGLESS.add(t)
        return True
    return False


def _may_move(leaves: list[Any], ranks: list[int]) -> bool:
    """Whether ``own_tags`` could change a rank: some leaf that could move up (rank
    above 0) has a type whose instances may have a ``tag``."""
    types = set(map(type, compress(leaves, ranks)))
    return not (types <= _TAGLESS or all(map(tagless, types)))


def own_tags(leaves: list[Any], ranks: list[int], first: dict[str, int], n: int) -> None:
    """Lower each leaf's rank to the first filter its own ``tag`` attribute matches."""
    if not _may_move(leaves, ranks):
        return
    for i, leaf in enumerate(leaves):
        rank = ranks[i]
        if rank and type(leaf) not in _TAGLESS:
            own = getattr(leaf, "tag", None)
            if type(own) is str:
                j = first.get(own, n)
            elif isinstance(own, str):  # a str subclass: compared as WithTag does
                j = next((first[t] for t in first if own == t), n)
            else:
                continue
            if j < rank:
                ranks[i] = j
