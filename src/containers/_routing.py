"""Routing leaves to parts by filter: the front half of ``split``, ``state``, ``partition``.

This stage is a client of flatten's walk (``_engine._flat``) and of ``Structure``: a
tree is flattened once (``_flatten``; ``_flat`` names the caller in its errors) and its
leaves sent to the first filter that matches (``_parts``, ``_group``; tag filters
without a call per leaf, ``_route_tags``), with a ``NoMatchWarning`` for a filter that
matches nothing. It never walks a tree itself and knows nothing of rebuilding
(``_split`` does that). Split from ``_split``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from itertools import compress, repeat
from operator import eq, not_
from typing import Any, TypeAlias

from containers._engine._flat import flatten_records
from containers._errors import ContainerDefinitionError, StructureError
from containers._paths import KeyPath, where
from containers._structure import Structure
from containers._tags import declared_tags, fill_part, tag_plan
from containers.filters import (
    _EVERYTHING,
    Filter,
    NoMatchWarning,
    PathContains,
    PathPattern,
    Predicate,
    WithTag,
    bind,
    to_predicate,
)

__all__ = ["Part"]

#: One group of leaves: ``{path: leaf}`` in flatten order, keyed by the paths that
#: ``flatten_with_path`` gives.
Part: TypeAlias = dict[KeyPath, Any]

#: How many unmatched or missing paths an error message lists.
_SHOWN = 5


def _check_order(op: str, filters: Sequence[Filter]) -> list[Predicate]:
    """The predicates of ``filters``; ``...``/``True`` anywhere but last is an error."""
    last = len(filters) - 1
    for i, f in enumerate(filters):
        if (f is ... or f is True) and i != last:
            raise StructureError(
                f"{op}: `{f!r}` matches every leaf, so it can only be the last filter, "
                f"but it is filter {i} of {last + 1}: the filters after it would get "
                f"nothing. Move it to the end."
            )
    return [to_predicate(f) for f in filters]


def _flatten(tree: Any) -> tuple[list[Any], Structure[Any]]:
    """``flatten(tree)``: flatten's walk, its records made a Structure."""
    records: list[Any] = []
    leaves = flatten_records(tree, None, False, "flatten", records, snapshot=True)
    return leaves, Structure(tuple(records), len(leaves))


def _flat(op: str, tree: Any) -> tuple[list[Any], Structure[Any]]:
    """``flatten(tree)``, its errors naming ``op`` instead of flatten."""
    try:
        return _flatten(tree)
    except (StructureError, ContainerDefinitionError) as err:
        text = str(err)
        if not text.startswith("flatten: "):
            raise
        text = f"{op}: {text[len('flatten: ') :]}"
        if isinstance(err, StructureError):
            raise StructureError(text, err.path) from None
        raise ContainerDefinitionError(text) from None


def _names(paths: Sequence[KeyPath]) -> str:
    shown = ", ".join(where(p) for p in paths[:_SHOWN])
    more = len(paths) - _SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def _tags_of(filters: Sequence[Filter]) -> list[str] | None:
    """The tags of ``filters`` if they are all str but the last, which may be ``...``
    or ``True`` (``split(m, "param", "batch_stats")``, the common call): these route
    without making a predicate (``_route_tags``); else None."""
    last = filters[-1] if filters else None
    body = filters[:-1] if last is ... or last is True else filters
    if not body or not all(type(f) is str for f in body):
        return None
    return list(body)  # type: ignore[arg-type]


def _parts(
    op: str, tree: Any, filters: Sequence[Filter], check: bool
) -> tuple[Structure[Any], list[Part], list[int], list[KeyPath], list[list[KeyPath]] | None]:
    """Flatten ``tree`` and group its leaves by ``filters`` (``_group``), warning about
    filters that match nothing: ``split`` and ``state``'s common part. Returns the
    structure, the parts, each leaf's part index, the unmatched paths (with
    ``check``) and, when a kept plan gave them, the parts' keys (else None)."""
    tags = _tags_of(filters)
    if tags is not None:  # no predicate made unless a warning needs one
        leaves, s = _flat(op, tree)
        parts, which, unmatched, keys = _route_tags(
            leaves, s, tags, len(tags) < len(filters), check
        )
        if not all(parts):
            _warn_no_match(op, [to_predicate(f) for f in filters], parts, leaves, s, 4)
        return s, parts, which, unmatched, keys
    preds: list[Predicate] = _check_order(op, filters) if filters else [_EVERYTHING]
    leaves, s = _flat(op, tree)
    preds = [bind(p, s.paths) for p in preds]
    parts, which, unmatched, keys = _group(leaves, s, preds, check)
    _warn_no_match(op, preds, parts, leaves, s, 4)
    return s, parts, which, unmatched, keys


def _group(
    leaves: list[Any], s: Structure[Any], preds: list[Predicate], check: bool
) -> tuple[list[Part], list[int], list[KeyPath], list[list[KeyPath]] | None]:
    """Send each leaf of ``s`` (with its path) to the first matching predicate's part.

    Returns the parts, the part index of every leaf, if ``check`` the paths of the
    leaves no predicate matches (their part index is then not one of a part) and the
    parts' keys when a kept plan gave them (else None).
    """
    if len(preds) == 1 and preds[0] is _EVERYTHING:
        return [dict(zip(s.paths(), leaves))], [0] * len(leaves), [], None
    rest = bool(preds) and preds[-1] is _EVERYTHING  # not called per leaf
    tests = preds[:-1] if rest else preds
    tags = [p.tag for p in tests if type(p) is WithTag]
    if tests and len(tags) == len(tests):
        return _route_tags(leaves, s, tags, rest, check)
    parts: list[Part] = [{} for _ in preds]
    calls = list(zip(tests, [p.__setitem__ for p in parts], range(len(tests))))
    which: list[int] = []
    mark = which.append
    unmatched: list[KeyPath] = []
    for path, leaf in zip(s.paths(), leaves):
        for test, put, j in calls:
            if test(path, leaf):
                put(path, leaf)
                mark(j)
                break
        else:
            if rest:
                parts[-1][path] = leaf
                mark(len(tests))
            else:
                unmatched.append(path)
                mark(-1)
    return parts, which, unmatched, None


def _route_tags(
    leaves: list[Any], s: Structure[Any], tags: list[str], rest: bool, check: bool
) -> tuple[list[Part], list[int], list[KeyPath], list[list[KeyPath]] | None]:
    """``_group`` for filters that are all tags (``split(m, "param", "stats", ...)``):
    the same result as calling each ``WithTag`` in turn, without calling any
    (``_tags.tag_plan``), the parts filled by loops in C from the paths and picks the
    plan keeps for a tree of the same records (benchmarks/split.py)."""
    n = len(tags)
    paths, ranks, plan = tag_plan(s._records, leaves, tags)
    s._remember_paths(paths)
    keys: list[list[KeyPath]] | None = None
    if plan is not None:
        layout = plan.layout(n + rest)
        parts = [fill_part(k, hashes, leaves, picks) for k, hashes, picks in layout]
        keys = [k for k, _, _ in layout]
    elif n + rest == 1:  # one part: the leaves ranked 0
        parts = [dict(compress(zip(paths, leaves), map(not_, ranks)))]
    else:
        parts = [
            dict(compress(zip(paths, leaves), map(eq, ranks, repeat(j)))) for j in range(n + rest)
        ]
    unmatched: list[KeyPath] = []
    if check and not rest and n in ranks:  # an error: split names them
        unmatched = list(compress(paths, map(eq, ranks, repeat(n))))
    return parts, ranks, unmatched, keys


def _warn_no_match(
    op: str,
    preds: list[Predicate],
    parts: list[Part],
    leaves: list[Any],
    s: Structure[Any],
    stacklevel: int = 3,
) -> None:
    """Warn (``NoMatchWarning``) about each tag filter whose tag is declared nowhere in
    the tree and each path filter that matches no path, when its part is empty; what
    the tree has is named (its tags, a few paths). Costs nothing when every part has
    leaves; a tree without leaves gives no warning (no filter could match)."""
    if not leaves:
        return
    for pred, part in zip(preds, parts):
        if part or type(pred) not in (WithTag, PathContains, PathPattern):
            continue
        paths = s.paths()
        if type(pred) is WithTag:
            tag = pred.tag
            declared = declared_tags(paths, leaves)
            if tag in declared:
                continue  # declared, and taken by an earlier filter
            hint = (
                f" A str filter is a tag (Flax NNX's rule); to select by path, use "
                f"PathPattern({tag!r})."
                if tag[:1] in (".", "[")
                else ""
            )
            have = ", ".join(map(repr, sorted(declared))) if declared else "none"
            text = (
                f"{op}: the tag filter {tag!r} matches nothing: no field of the tree is "
                f"tagged {tag!r} and no leaf's tag is {tag!r} (tags in the tree: {have})."
                f"{hint}"
            )
        else:
            if any(pred(p, v) for p, v in zip(paths, leaves)):
                continue
            text = (
                f"{op}: {pred!r} matches no path of the tree; its paths include {_names(paths)}."
            )
        warnings.warn(
            text + " (Silence with warnings.filterwarnings('ignore', "
            "category=containers.filters.NoMatchWarning).)",
            NoMatchWarning,
            stacklevel=stacklevel,
        )
