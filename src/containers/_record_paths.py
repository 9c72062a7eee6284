"""A Structure's key paths and its text: ``leaf_paths`` (compiled twin
``_speedups.leaf_paths``), ``ranked_paths`` (the paths with the tag ranks that
``split`` and ``state`` read, built once per node and per run of equal records) and
``render`` (``Structure``'s repr). Linear passes over the records of ``_records``,
each with a stack of counters, at any depth.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain, cycle, repeat
from operator import itemgetter
from typing import Any

from containers._engine import _fast
from containers._engine._flat import MIN_RUN
from containers._errors import type_name
from containers._paths import AttrKey, Key, KeyPath
from containers._records import Record
from containers._registry import LIST, TUPLE, NodeKind

__all__ = ["PATHS_CONTEXT", "leaf_paths", "ranked_paths", "render"]

#: What the compiled twin of ``leaf_paths`` (``_speedups.leaf_paths``) reads besides
#: the records: the kinds whose keys depend on the length alone, and the method name.
PATHS_CONTEXT = (TUPLE, LIST, "keys")


def leaf_paths(records: Sequence[Record]) -> list[KeyPath]:
    """The key path of every leaf, in flatten order (in C where the extension is built)."""
    speedups = _fast._speedups  # read per call: tests switch it
    if speedups is not None:
        paths: list[KeyPath] = speedups.leaf_paths(records, PATHS_CONTEXT)
        return paths
    return ranked_paths(records, None, 0)[0]


def ranked_paths(
    records: Sequence[Record], first: dict[str, int] | None, none: int
) -> tuple[list[KeyPath], list[int]]:
    """The key path of every leaf, in flatten order, and with ``first`` each leaf's rank.

    A leaf's rank is the smallest ``first[tag]`` over the tags of the ``AttrKey`` s on
    its path (``none`` if it passes no listed tag): which of several tag filters it
    matches first, read from the tags of each node's keys once per node instead of once
    per leaf (``split``/``state``, benchmarks/split.py). Without ``first`` the ranks are
    not computed (an empty list). Node paths are never built: at depth d that would cost
    O(d**2).
    """
    if not records:
        return [()], [] if first is None else [none]
    out: list[KeyPath] = []
    ranks: list[int] = []
    # (id(keys), rank above) -> (keys, ranks of the node's children); keys is kept so
    # that its id cannot be reused while the entry lives.
    patterns: dict[tuple[int, int], tuple[Sequence[Key], list[int]]] = {}
    table = {} if first is None else first

    def pattern(keys: Sequence[Key], above: int) -> list[int]:
        hit = patterns.get((id(keys), above))
        if hit is not None and hit[0] is keys:
            return hit[1]
        made = [above] * len(keys)
        if AttrKey in set(map(type, keys)):  # only a field's key has tags
            for i, key in enumerate(keys):
                if type(key) is AttrKey:
                    for tag in key.tags:
                        j = table.get(tag, none)
                        made[i] = min(made[i], j)
        patterns[id(keys), above] = (keys, made)
        return made

    keys_above: list[Key] = []
    nxt = 1
    kind, aux, n, mask = records[0]
    keys = kind.keys(aux, n)
    pat = None if first is None else pattern(keys, none)
    if mask is None:
        return list(zip(keys)), [] if pat is None else list(pat)
    if mask is True and n >= MIN_RUN and _leaf_run(records, 1, n):
        _emit_run(records[1], (), keys, pat, pattern, out, ranks)
        return out, ranks
    stack = [[keys, mask, 0, pat]]
    while stack:
        fr = stack[-1]
        keys, mask, i, pat = fr
        if i == len(keys):
            stack.pop()
            if keys_above:
                keys_above.pop()
            continue
        fr[2] = i + 1
        if mask is not True and not mask[i]:
            out.append((*keys_above, keys[i]))
            if pat is not None:
                ranks.append(pat[i])
            continue
        kind, aux, n, child_mask = records[nxt]
        nxt += 1
        child_keys = kind.keys(aux, n)
        child_pat = None if pat is None else pattern(child_keys, pat[i])
        if child_mask is None:
            # A node of leaves: all its paths at once, built in C (benchmarks/run.py,
            # flatten_with_path), and its ranks as one extend (benchmarks/split.py).
            out += map((*keys_above, keys[i]).__add__, zip(child_keys))
            if child_pat is not None:
                ranks += child_pat
        elif (
            child_mask is True
            and n >= MIN_RUN
            and records[nxt][3] is None
            and _leaf_run(records, nxt, n)
        ):
            above = (*keys_above, keys[i])
            _emit_run(records[nxt], above, child_keys, child_pat, pattern, out, ranks)
            nxt += n
        else:
            keys_above.append(keys[i])
            stack.append([child_keys, child_mask, 0, child_pat])
    return out, ranks


def _leaf_run(records: Sequence[Record], j: int, n: int) -> bool:
    """Whether ``records[j:j + n]`` are n nodes of leaves of one kind and size, with
    the same keys: a list of layers. A declared container's keys are its fields; other
    kinds' keys may come from their aux, which must then be one object (compared by
    identity: no aux's ``__eq__`` runs)."""
    sub = records[j : j + n]
    kind, _, m, mask = sub[0]
    if mask is not None:
        return False
    if kind.spec is not None and not kind.spec.keep:
        # The aux of a container without kept fields is always (): == compares the
        # records' fields by identity (a list of layers; benchmarks/split.py).
        return sub.count(sub[0]) == n
    if list(map(_KIND_SIZE_MASK, sub)).count((kind, m, None)) != n:
        return False
    return kind.spec is not None or len(set(map(id, map(itemgetter(1), sub)))) == 1


_KIND_SIZE_MASK = itemgetter(0, 2, 3)


def _emit_run(
    record: Record,
    above: KeyPath,
    keys: Sequence[Key],
    pat: list[int] | None,
    pattern: Callable[[Sequence[Key], int], list[int]],
    out: list[KeyPath],
    ranks: list[int],
) -> None:
    """The paths (and ranks) of the leaves of a run of nodes (``_leaf_run``) under the
    keys ``keys`` at ``above``: one loop in C for the whole run (benchmarks/split.py;
    a list of layers)."""
    kind, aux, m, _ = record
    inner = kind.keys(aux, m)
    out += _run_paths(above, keys, inner)
    if pat is None:
        return
    if pat.count(pat[0]) == len(pat):
        ranks += pattern(inner, pat[0]) * len(pat)
    else:
        for above_rank in pat:
            ranks += pattern(inner, above_rank)


#: The paths of the last runs, by (keys above, id of the run's keys, id of a node's
#: keys): a list of layers has the same keys objects at each split (``index_keys``
#: keeps the last long tuple, a container's keys are its spec's), so its paths are
#: built once, not at every split or state (benchmarks/split.py).
_RUNS: dict[tuple[KeyPath, int, int], tuple[Sequence[Key], Sequence[Key], list[KeyPath]]] = {}
_RUNS_KEPT = 8


def _run_paths(above: KeyPath, keys: Sequence[Key], inner: Sequence[Key]) -> list[KeyPath]:
    """The paths ``above + (k, t)`` for ``k`` in ``keys`` and ``t`` in ``inner``, in that
    order; the same list (never changed) for the same keys objects."""
    key = (above, id(keys), id(inner))
    hit = _RUNS.get(key)
    if hit is not None and hit[0] is keys and hit[1] is inner:
        return hit[2]
    made: list[KeyPath]
    if len(above) == 1:  # .layers[i].w: a comprehension beats zip by a third
        (a,) = above
        made = [(a, k, t) for k in keys for t in inner]
    elif not above:
        made = [(k, t) for k in keys for t in inner]
    else:
        m = len(inner)
        made = list(
            zip(
                *map(repeat, above),
                chain.from_iterable(map(repeat, keys, repeat(m))),
                cycle(inner),
            )
        )
    if len(_RUNS) >= _RUNS_KEPT:
        _RUNS.clear()
    _RUNS[key] = (keys, inner, made)  # keys and inner kept: their ids stay theirs
    return made


_REPR_LIMIT = 2000


def render(records: Sequence[Record]) -> str:
    """Render records like the tree, with ``*`` for leaves; summarize huge structures."""
    if not records:
        return "*"
    parts: list[str] = []  # reversed pre-order fold: children results sit on the stack
    size = 0
    for kind, aux, n, mask in reversed(records):
        keys = kind.keys(aux, n)
        items = []
        for i in range(n):
            if mask is None or (mask is not True and not mask[i]):
                items.append("*")
            else:
                items.append(parts.pop())
        text = _render_node(kind, aux, keys, items)
        size += len(text)
        if size > _REPR_LIMIT * 4:
            return f"<{len(records)} nodes; root: {records[0][0].label}>"
        parts.append(text)
    text = parts[0]
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."


def _render_node(kind: NodeKind, aux: Any, keys: Sequence[Key], items: list[str]) -> str:
    t = kind.type
    if t is tuple:
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if t is list:
        return f"[{', '.join(items)}]"
    if t is type(None):
        return "None"
    if t is dict:
        return "{" + ", ".join(f"{k.raw!r}: {v}" for k, v in zip(keys, items)) + "}"
    fields = [
        f"{k.raw}={v}" if isinstance(k, AttrKey) else f"{k.raw!r}: {v}" if hasattr(k, "key") else v
        for k, v in zip(keys, items)
    ]
    if kind.spec is not None:
        fields += [f"{name}={value!r}" for name, value in zip(kind.spec.keep, aux)]
    return f"{type_name(t)}({', '.join(fields)})"
