"""Fitting a file's leaves to a template (``load(like=...)``).

A file's child leaves by path (``file_leaves``, from the records ``_recparse``
validated; a plain safetensors file's tensors by name), fitted to a template by path
and dotted name (``fit``). ``_positional`` takes them by position when the file's tree
has the template's shape, and leaves the rest to ``fit``. No type name from the file
is resolved: the template decides the classes. ``_target`` converts arrays to a
framework.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from containers._errors import (
    FormatError,
    LimitError,
    StructureError,
    short_repr,
)
from containers._paths import (
    AttrKey,
    DictKey,
    IndexKey,
    Key,
    index_keys,
    keystr,
)
from containers._records import CLOSE, OPEN
from containers._serialize._lazy import is_lazy
from containers._serialize._limits import Limits
from containers._serialize._rows import Indexed, file_cursor
from containers._serialize._target import (
    _TORCH_TO_NUMPY,
    _dtype_name,
    _views,
    dotted,
    torch_tensor,
)

__all__ = [
    "FileLeaf",
    "file_leaves",
    "fit",
    "foreign_leaves",
    "kind_of",
    "like_leaf",
    "template_paths",
]


# --- a file's leaves, by path ----------------------------------------------------------


class FileLeaf(NamedTuple):
    """A child leaf of a file's tree: its path, and its array or scalar."""

    path: tuple[Key, ...]
    value: Any
    is_array: bool
    deep: bool = False  # the path was cut (file_leaves' max_path): it matches nothing


def file_leaves(
    recs: Sequence[Any],
    tensors: Any,
    arrays: dict[str, Any],
    limits: Limits,
    max_path: int | None = None,
) -> list[FileLeaf]:
    """The child leaves of a file's tree, in pre-order, validated as ``_rows.rows``
    validates a tree (but for the text it makes of each row: benchmarks/serialization.py,
    "containers like=", "many"): no record after the end or missing at it, an alias
    only to a finished record, each tensor named once and every tensor named, the depth
    bounded. Kept values and register_node aux are left out (a template decides them).
    An alias is the value of the record it points to; a shared node's leaves appear
    under the first path only. A client of ``_records``' cursor (``_rows.file_cursor``),
    which builds the paths; a node's leaf records are taken at once (``leaf_run``).

    Paths longer than ``max_path`` keys (the template's longest) could match nothing:
    they are cut after ``max_path + 1`` keys and a leaf below is marked ``deep``, so that a
    file nested 100,000 levels deep costs linear time, not a path per level."""
    out: list[FileLeaf] = []
    append = out.append
    cut = max_path + 1 if max_path is not None else None
    new_leaf = tuple.__new__
    values: dict[int, Any] = {}  # each leaf record's value (_NODE: an alias to a node)
    finished: set[int] = set()  # the node records closed
    # per open node record: the index of its first value that is kept, not a child (0
    # within a kept value: the values of a kept value are kept)
    kept_from: dict[int, int] = {}
    used: set[str] = set()
    max_depth = limits.max_depth
    cursor = file_cursor(recs, _child_keys)
    step, position, path_of, leaf_run = cursor.step, cursor.position, cursor.path, cursor.leaf_run
    items: Any
    while (event := step()) is not None:
        j = cursor.index
        if event == CLOSE:
            finished.add(j)
            continue
        rec = cursor.record
        depth, parent, i, _ = position()
        is_kept = parent >= 0 and i >= kept_from[parent]
        if event == OPEN:
            n = rec.n
            if n and depth >= max_depth:
                raise LimitError(
                    f"the tree is nested deeper than max_depth={max_depth} at "
                    f"record #{j}. Pass limits=Limits(max_depth=...) to accept it."
                )
            first_kept = kept_from[j] = 0 if is_kept else _first_kept(rec)
            # a node of leaf records, all children (a dict of arrays): taken at once
            run = leaf_run() if n and first_kept == n else None
            if run is None:
                continue
            items = zip(range(j + 1, j + 1 + n), run, cursor.child_paths(cut))
            deep = cut is not None and depth + 1 > cut
        else:
            items = ((j, rec, None),)
            deep = cut is not None and depth > cut
        for j, rec, given in items:
            tag = rec.tag
            if tag == "A":
                name = rec.data
                if name not in tensors or name in used:
                    raise FormatError(
                        f"the tree refers to tensor {name!r} "
                        f"{'twice' if name in tensors else 'that the file does not have'}. "
                        f"The file is corrupt."
                    )
                used.add(name)
                value = arrays[name]
            elif tag == "S":
                value = rec.data
            else:  # an alias: the value of a finished record
                k = rec.data
                value = values.get(k, _MISSING)
                if value is _MISSING:
                    if k not in finished:
                        raise _bad(j, f"is an alias to record #{k}, which is not finished")
                    value = _NODE
            values[j] = value
            if value is not _NODE and not is_kept:
                is_array = tag != "S" and (isinstance(value, np.ndarray) or is_lazy(value))
                path = path_of(cut) if given is None else given  # None: a leaf stepped to
                append(new_leaf(FileLeaf, (path, value, is_array, deep)))
    if not cursor.complete:
        raise FormatError("the tree ends inside a node: records are missing. The file is corrupt.")
    if cursor.next_record < len(recs):
        raise _bad(cursor.next_record, "follows the end of the tree")
    if len(used) != len(tensors):
        unused = set(tensors) - used
        raise FormatError(
            f"the file has {len(unused)} tensor(s) the tree never refers to, e.g. "
            f"{sorted(unused)[0]!r}. The file is corrupt."
        )
    return out


def _bad(j: int, what: str) -> FormatError:
    """``_decode._bad``'s error (which this stage cannot import: _decode imports _encode,
    which imports this)."""
    return FormatError(f"the tree's record #{j} {what}. The file is corrupt.")


_NODE = object()  # an alias to a node: its leaves are under the first path
_MISSING = object()


def _child_keys(rec: Any) -> Any:
    """The keys of a node record's values (a container's kept values and a
    register_node's aux included: ``_first_kept``)."""
    tag = rec.tag
    n = rec.n
    if not n:  # None, an empty node
        return ()
    if tag in ("T", "L", "Q"):
        # made when read past the shared ones (Indexed): a count may be 2**62
        return index_keys(n) if n <= _SHARED_KEYS else Indexed(n, IndexKey)
    if tag in ("D", "O", "DD"):
        return [DictKey(k) for k in rec.data[0]]
    if tag == "C":
        kids, kept_names = rec.data[2], rec.data[3]
        return [AttrKey(name) for name in (*kids, *kept_names)]
    _, count, keys = rec.data
    if keys is not None:
        return [*keys, AttrKey("<aux>")]
    return Indexed(n, lambda i: AttrKey("<aux>") if i == count else IndexKey(i))


_SHARED_KEYS = 256  # index_keys' shared tuple


def _first_kept(rec: Any) -> int:
    """The index of a node record's first kept value (or register_node aux): the
    values from it on are not children."""
    tag = rec.tag
    if tag == "C":
        return len(rec.data[2])
    if tag == "R":
        n: int = rec.data[1]
        return n
    return int(rec.n)


def foreign_leaves(arrays: dict[str, Any]) -> list[FileLeaf]:
    """The tensors of a safetensors file not written by containers, by name."""
    return [FileLeaf((DictKey(name),), a, True) for name, a in arrays.items()]


# --- dotted names ----------------------------------------------------------------------


def kind_of(leaf: Any) -> str | None:
    """The framework of an array-like template leaf, or None for a scalar leaf."""
    t = type(leaf)
    if t is np.ndarray or isinstance(leaf, np.ndarray):
        return "numpy"
    module = t.__module__ or ""
    if module.startswith("torch") and hasattr(leaf, "detach"):
        return "torch"
    if module.startswith(("jax", "jaxlib")) and hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return "jax"
    return None


def _describe(leaf: Any, is_array: bool) -> str:
    if is_array or kind_of(leaf) is not None:
        shape = ",".join(map(str, tuple(leaf.shape)))
        return f"{_dtype_name(leaf.dtype)}[{shape}]"
    return f"{type(leaf).__qualname__} {short_repr(leaf)}"


def template_paths(template: Any) -> tuple[list[tuple[Any, Any]], int]:
    """The template's ``(path, leaf)`` pairs and its longest path (``file_leaves``'
    ``max_path``)."""
    from containers._flatten import leaves_with_path

    pairs = leaves_with_path(template)
    return pairs, max(map(len, (p for p, _ in pairs)), default=0)


def fit(
    template: Any,
    leaves: list[FileLeaf],
    where: str,
    *,
    strict: bool = True,
    pairs: list[tuple[Any, Any]] | None = None,
) -> Any:
    """``template`` with each leaf replaced by the file's leaf at its path (by keystr
    path, else by dotted name), converted to the framework, device and dtype of the
    template's leaf; ``StructureError`` listing every mismatch. ``pairs`` are the
    template's ``template_paths`` when known."""
    from containers._flatten import leaves_with_path, structure, unflatten

    if pairs is None:
        pairs = leaves_with_path(template)
    # The file's leaf at the template leaf's position first (the usual case: one
    # structure), then by path as keys, then by keystr and dotted name; each map is
    # built only when a path is not found before it (benchmarks/serialization.py,
    # "containers like=", "many").
    by_keys: dict[tuple[Key, ...], int] = {}
    by_path: dict[str, int] = {}
    by_dotted: dict[str, int] = {}

    def by_name(path: tuple[Key, ...]) -> int | None:
        if not by_path:
            for k, leaf in enumerate(leaves):
                if leaf.deep:
                    continue
                by_path.setdefault(keystr(leaf.path), k)
                with contextlib.suppress(ValueError):  # a key without a dotted name
                    by_dotted.setdefault(dotted(leaf.path), k)
        i = by_path.get(keystr(path))
        if i is None or used[i]:
            try:
                i = by_dotted.get(dotted(path))
            except ValueError:
                i = None
        return i

    used = [False] * len(leaves)
    problems: list[str] = []
    values: list[Any] = []
    missing: list[tuple[tuple[Key, ...], Any]] = []
    n = len(leaves)
    for pos, (path, want) in enumerate(pairs):
        i: int | None = pos
        if pos >= n or used[pos] or leaves[pos].path != path:
            if not by_keys:
                for k, leaf in enumerate(leaves):
                    if not leaf.deep:
                        by_keys.setdefault(leaf.path, k)
            i = by_keys.get(path)
        if i is None or used[i]:
            i = by_name(path)
        if i is None or used[i]:
            if not strict:
                values.append(want)
                continue
            missing.append((path, want))
            values.append(want)
            continue
        used[i] = True
        got = leaves[i]
        if type(want) is np.ndarray and got.is_array:  # the usual numpy leaf, inline
            a = got.value
            if a.shape == want.shape and a.dtype == want.dtype:
                values.append(a)
                continue
        kind = kind_of(want)
        if kind is None:
            if got.is_array:
                problems.append(
                    f"changed: {keystr(path) or 'the root'} is {_describe(got.value, True)} in the file, "
                    f"{_describe(want, False)} in the template"
                )
            values.append(got.value)
            continue
        if not got.is_array:
            problems.append(
                f"changed: {keystr(path) or 'the root'} is {_describe(got.value, False)} in the file, "
                f"{_describe(want, False)} in the template"
            )
            values.append(want)
            continue
        a = got.value
        if kind == "torch":
            _views(importlib.import_module("torch"))
            same_dtype = a.dtype == _TORCH_TO_NUMPY.get(want.dtype)
        else:
            same_dtype = a.dtype == want.dtype
        if not same_dtype or tuple(a.shape) != tuple(want.shape):
            what = "shape" if tuple(a.shape) != tuple(want.shape) else "dtype"
            problems.append(
                f"{what} changed: {keystr(path) or 'the root'} is {_describe(a, True)} in the file, "
                f"{_describe(want, False)} in the template"
            )
            values.append(want)
            continue
        # a lazy leaf (like= with lazy= or where=) stays unread: the template's type
        # is given to the arrays a load reads
        values.append(a if is_lazy(a) else like_leaf(kind, a, want))
    if missing:
        found = _prefixes(leaf.path for leaf in leaves)
        for group, items in _grouped([(tuple(p), w) for p, w in missing], found):
            if len(items) == 1 and items[0][0] == group:
                shown = f"{_describe(items[0][1], False)} in the template"
            else:
                shown = f"{_leaves_text(len(items))} in the template, none in the file"
            problems.append(f"missing: {keystr(group) or 'the root'} ({shown})")
    extra = [(leaf.path, leaf) for i, leaf in enumerate(leaves) if strict and not used[i]]
    if extra:
        for group, items in _grouped(extra, _prefixes(tuple(p) for p, _ in pairs)):
            if len(items) == 1 and items[0][0] == group:
                shown = "in the file, not in the template"
            else:
                shown = f"{_leaves_text(len(items))} in the file, none in the template"
            problems.append(f"extra: {keystr(group) or 'the root'} ({shown})")
    if problems:
        listed = problems[:_SHOWN]
        more = len(problems) - len(listed)
        raise StructureError(
            f"{where}the file does not match the template (like=): {len(problems)} "
            f"problem{'' if len(problems) == 1 else 's'}:\n  "
            + "\n  ".join(listed)
            + (f"\n  ... and {more} more" if more else "")
            + "\nLoad it without like= to see its tree (or `containers inspect FILE`), "
            "and make the template match it."
        )
    return unflatten(structure(template), values)


def _leaves_text(n: int) -> str:
    return f"{n} lea{'f' if n == 1 else 'ves'}"


def _prefixes(paths: Any) -> set[tuple[Key, ...]]:
    """Every prefix of every path (the root's ``()`` included)."""
    out: set[tuple[Key, ...]] = set()
    for path in paths:
        for d in range(len(path) + 1):
            out.add(tuple(path[:d]))
    return out


def _grouped(
    items: list[tuple[tuple[Key, ...], Any]], other: set[tuple[Key, ...]]
) -> list[tuple[tuple[Key, ...], list[tuple[tuple[Key, ...], Any]]]]:
    """``items`` grouped by the shortest prefix of their path that the other side has no
    leaf under, in order: a subtree only one side has is one problem, not one per leaf."""
    groups: dict[tuple[Key, ...], list[tuple[tuple[Key, ...], Any]]] = {}
    for path, value in items:
        d = 0
        while d < len(path) and path[: d + 1] in other:
            d += 1
        groups.setdefault(path[: d + 1], []).append((path, value))
    return list(groups.items())


#: Problems listed in full by a template mismatch.
_SHOWN = 50


def like_leaf(kind: str, a: np.ndarray[Any, Any], want: Any) -> Any:
    """``a`` in the framework and on the device of the template leaf ``want``."""
    if kind == "numpy":
        return a
    if kind == "torch":
        torch = sys.modules["torch"]  # imported: the template holds a tensor
        t = torch_tensor(torch, a)
        if not (want.is_cpu or want.is_meta):  # device.type costs 5x is_cpu
            t = t.to(want.device)
        if type(want) is torch.Tensor:  # Parameter's isinstance check is slow (many leaves)
            return t
        if isinstance(want, torch.nn.Parameter):
            return torch.nn.Parameter(t, requires_grad=want.requires_grad)
        return t
    jax = importlib.import_module("jax")
    sharding = getattr(want, "sharding", None)
    return jax.device_put(a, sharding)
