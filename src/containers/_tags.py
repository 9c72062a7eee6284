"""Which of several tag filters each leaf matches first, read from a Structure's records.

``split``, ``state`` and ``partition`` with filters that are all tags (``"param"``,
``WithTag``) rank every leaf without calling a filter: the tags of the fields on a
leaf's path are read once per node of the structure (``_records.ranked_paths``), a
leaf's own ``tag`` only where its type allows one. The result is what calling each
``WithTag`` in turn gives (tests/test_split.py compares them on random trees).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from typing import Any

from containers._paths import AttrKey, KeyPath
from containers._records import Record, ranked_paths

__all__ = ["declared_tags", "own_tags", "tag_ranks", "tagless"]


def tag_ranks(
    records: Sequence[Record], leaves: list[Any], tags: Sequence[str]
) -> tuple[list[KeyPath], list[int]]:
    """The path of every leaf, and the index in ``tags`` of the first tag it matches
    (``len(tags)`` if none): on a field of its path, or its own ``tag`` attribute."""
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


def own_tags(leaves: list[Any], ranks: list[int], first: dict[str, int], n: int) -> None:
    """Lower each leaf's rank to the first filter its own ``tag`` attribute matches."""
    types = set(map(type, compress(leaves, ranks)))  # of the leaves that could move up
    if types <= _TAGLESS or all(map(tagless, types)):
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
