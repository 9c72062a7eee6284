"""Taking a file's leaves by position when its tree has the template's shape
(``load(like=...)`` without a path built).

The file's tree and the template's are compared node by node (record by record, or,
when ``containers._scan`` gave the file's tree as a ``Structure``'s records, as two
tuples at once); then each leaf's path is the same on both sides. Anything else gives
``NO_FIT``, and ``_like.fit`` decides by path and says what differs.
"""

from __future__ import annotations

import functools
import itertools
import operator
import sys
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from containers._records import CLOSE, LEAF, OPEN
from containers._registry import DEFAULT_DICT, DICT, ORDERED_DICT
from containers._serialize import _layout_fast
from containers._serialize._decode import column_leaves, name_order
from containers._serialize._like import kind_of, like_leaf
from containers._serialize._limits import Limits
from containers._serialize._recparse import Records
from containers._serialize._rows import file_cursor
from containers._serialize._target import _TORCH_TO_NUMPY, _views

__all__ = ["NO_FIT", "positional"]


def positional(template: Any, records: Records, arrays: Any, limits: Limits) -> Any:
    """``fit``'s result when the file's tree has the template's shape, else ``NO_FIT``:
    the template rebuilt over the file's child leaves taken by position.

    The shape is compared node by node, not leaf by leaf (benchmarks/serialization.py,
    "containers like=", "many": 1,002 nodes, 110,000 leaves): the template's records
    (``flatten_records``) and the file's, both in pre-order, must hold the same nodes
    with the same keys (sequences by length; dicts by their str keys, in order;
    declared containers by their child field names) and the same children as nodes
    or leaves; then each leaf's path is the same on both sides, and no path is built.
    Each leaf must then fit as ``fit`` fits it: a numpy array of the same shape and
    dtype (all checked in one pass, ``containers._scan.arrays_fit``, twin
    ``arrays_fit_plain``), a torch or JAX one converted as ``fit`` converts it, a scalar
    for a scalar; anything else, an alias to a node and any other kind of node
    included, gives ``NO_FIT``, and ``fit`` decides with paths, and says what differs
    (tests/test_checkpoints.py holds the two to each other).

    When ``containers._scan`` gave the file's tree as a ``Structure``'s records (a tree
    of builtins: ``Records.columns``), the two trees' records are compared as lists, in
    C, and the leaves are taken from the columns, as ``load`` takes them.
    """
    from containers._engine._flat import flatten_records
    from containers._flatten import Structure

    order = name_order(records.names, arrays)
    if order is None:
        return NO_FIT  # a tensor named twice or never: fit's checks by path say which
    t_records: list[Any] = []
    wants = flatten_records(template, None, False, "load", t_records)
    arrays_at: list[bool] | None = None  # where the file has arrays, when known
    taken = _column_leaves(records, t_records, arrays, order)
    if taken is None:
        taken = _record_leaves(records.recs, t_records, arrays, limits)
        if taken is NO_FIT:
            return NO_FIT
        values, arrays_at = taken
    else:
        values, at = taken
    if len(values) != len(wants):
        return NO_FIT
    # The usual case, in one pass (in C): numpy arrays where the file has arrays, of
    # the same shapes and dtypes, and scalars where it has scalars.
    scan = _layout_fast._scan  # read per call: tests switch it
    fits = scan.arrays_fit if scan is not None and _reads_numpy(scan) else arrays_fit_plain
    torch = sys.modules.get("torch")
    if torch is None:
        others = fits(values, wants, np.ndarray)
    else:
        others = fits(values, wants, np.ndarray, torch.Tensor, _wrapped(torch), torch.from_numpy)
    if others is not None:
        if any(map(_array_like, others)):
            return NO_FIT  # an array in the template where the file has a scalar
        return Structure(tuple(t_records), len(wants)).unflatten(values)
    # torch or JAX template leaves (converted as fit converts them), or no fit
    want_np = list(map(operator.is_, map(type, wants), itertools.repeat(np.ndarray)))
    if arrays_at is None:
        arrays_at = [False] * len(values)
        for k in at:
            arrays_at[k] = True
    converted: dict[int, Any] = {}
    if want_np != arrays_at:
        found = _framework_leaves(wants, values, want_np, arrays_at)
        if found is NO_FIT:
            return NO_FIT
        converted = found
    if any(
        map(_array_like, set(map(type, itertools.compress(wants, map(operator.not_, arrays_at)))))
    ):
        return NO_FIT
    got = list(itertools.compress(values, want_np))
    want = list(itertools.compress(wants, want_np))
    if arrays_fit_plain(got, want, np.ndarray) is None:
        return NO_FIT
    for i, value in converted.items():
        values[i] = value
    return Structure(tuple(t_records), len(wants)).unflatten(values)


def arrays_fit_plain(
    values: list[Any],
    wants: list[Any],
    ndarray: Any,
    tensor: Any = None,
    dtypes: dict[Any, Any] | None = None,
    convert: Callable[[Any], Any] | None = None,
) -> set[type] | None:
    """The set of the types of the template leaves (``wants``) where the file's leaves
    (``values``, by position) are no exact ``ndarray``, when every template leaf that
    is an exact ``ndarray`` has one there of an equal shape and dtype, every one that is
    an exact ``tensor`` (``torch.Tensor``) has one that ``convert`` (``torch.from_numpy``)
    takes as it (a CPU tensor, ``dtypes``: the torch dtypes it makes, to numpy's, and an
    equal shape), and no other template leaf has one; else None. When it fits, the
    arrays facing tensors are replaced in ``values`` by ``convert(array)``. The plain twin
    of ``containers._scan.arrays_fit``."""
    if len(values) != len(wants):
        return None
    others: set[type] = set()
    tensors: list[int] = []
    for i, (value, want) in enumerate(zip(values, wants, strict=True)):
        file_array = type(value) is ndarray
        if type(want) is ndarray:
            if not file_array or value.shape != want.shape or value.dtype != want.dtype:
                return None
        elif tensor is not None and type(want) is tensor:
            if not (
                file_array
                and want.is_cpu is True
                and dtypes is not None
                and dtypes.get(want.dtype, _NO_DTYPE) == value.dtype
                and value.shape == want.shape
            ):
                return None
            tensors.append(i)
        elif file_array:
            return None
        else:
            others.add(type(want))
    for i in tensors:
        values[i] = convert(values[i])  # type: ignore[misc]
    return others


_NO_DTYPE = object()  # a torch dtype from_numpy does not make


@functools.cache
def _reads_numpy(scan: Any) -> bool:
    """Whether ``scan.arrays_fit`` reads numpy arrays as numpy does: it reads a shape
    and dtype from the array object (numpy's ABI, as numpy's C macros read them); this
    checks, once per process, that those are what ``.shape`` and ``.dtype`` say, on
    arrays of every number of dimensions, a view, a big-endian and an empty one."""
    samples: list[np.ndarray[Any, Any]] = [
        np.zeros((), np.float64),
        np.zeros((2, 3), np.float32)[:, ::2],
        np.zeros(5, ">i2"),
        np.zeros((0, 4, 1), np.bool_),
        np.zeros((1,) * 32, np.uint8),
    ]
    for a in samples:
        shape, dtype = scan.array_head(a, np.ndarray)
        if shape != a.shape or dtype is not a.dtype:
            return False
    return True


def _wrapped(torch: Any) -> dict[Any, Any]:
    """torch dtype -> numpy dtype, for the dtypes ``torch.from_numpy`` wraps (the others
    go through an integer view: ``_target``)."""
    if not _WRAPPED:  # filled by one update (no thread sees it half made)
        views = _views(torch)  # fills _TORCH_TO_NUMPY
        _WRAPPED.update({t: n for t, n in _TORCH_TO_NUMPY.items() if n not in views})
    return _WRAPPED


_WRAPPED: dict[Any, Any] = {}


def _array_like(t: type) -> bool:
    """Whether a template leaf of type ``t`` is an array (a numpy subclass, torch, JAX)."""
    return issubclass(t, np.ndarray) or (t.__module__ or "").startswith(("torch", "jax"))


def _column_leaves(
    records: Records, t_records: list[Any], arrays: Any, in_order: bool
) -> tuple[list[Any], list[int]] | None:
    """``(values, at)`` from the file's ``Structure`` records and leaves when they equal
    the template's records, else None. The leaves are taken out of the columns, as
    ``load`` takes them (``in_order``: the tree names the tensors in the file's order,
    ``_decode.name_order``); ``at`` lists the positions of the file's arrays."""
    columns = records.columns
    if columns is None or columns[1] is None or columns[0] != t_records:
        return None
    return column_leaves(columns, arrays, in_order)


def _record_leaves(recs: Sequence[Any], t_records: list[Any], arrays: Any, limits: Limits) -> Any:
    """``(values, arrays_at)``: the file's child leaves, by position, read against the
    template's records, or ``NO_FIT``. A client of ``_records.RecordCursor`` (the one
    walk over a file's records): a container's kept values are passed over whole
    (``skip``), the leaf records of a node whose children are all leaves in the
    template are taken at once (``leaf_records``)."""
    values: list[Any] = []
    arrays_at: list[bool] = []
    add, add_at = values.append, arrays_at.append
    # per open node: [template mask, its children (its kept values follow), next value]
    stack: list[list[Any]] = []
    ti = 0
    n_templates = len(t_records)
    max_depth = limits.max_depth
    fields: dict[Any, Any] = {}  # a container kind's child fields, as a file lists them
    cursor = file_cursor(recs, _no_keys)
    step, skip, leaf_records = cursor.step, cursor.skip, cursor.leaf_records
    while (event := step()) is not None:
        if event == CLOSE:
            stack.pop()
            continue
        rec = cursor.record
        if stack:
            top = stack[-1]
            i = top[2]
            top[2] = i + 1
            if i >= top[1]:  # a kept value of a container: not a child
                if event == OPEN:
                    skip()
                continue
            mask = top[0]
            child_is_node = mask is not None and (mask is True or mask[i])
        else:
            child_is_node = ti < n_templates  # the root: a leaf when no record
        if event == LEAF:
            if child_is_node or _leaf_value(rec, recs, arrays, add, add_at) is NO_FIT:
                return NO_FIT
            continue
        if not child_is_node or ti >= n_templates:
            return NO_FIT
        kind, aux, n, mask = t_records[ti]
        ti += 1
        if rec.tag == "C":  # a container: its child fields, the template's (inline)
            children = fields.get(kind)
            if children is None:
                children = fields[kind] = _child_fields(kind)
            if rec.data[2] != children or len(children) != n:
                return NO_FIT
        elif not _same_node(rec, kind, aux, n):
            return NO_FIT
        if len(stack) >= max_depth:  # fit's file_leaves says so
            return NO_FIT
        if mask is not None or not n:
            stack.append([mask, n, 0])
            continue
        # all its children are leaves: their records at once (its kept values among
        # them passed over)
        run = leaf_records()
        stack.append([mask, n, len(run)])
        if len(run) != n:
            if len(run) < n:
                return NO_FIT  # a node where the template has a leaf, or the end
            run = run[:n]
        tags = set(map(_TAG, run))
        if tags == _ARRAY_TAGS:
            values.extend(map(arrays.__getitem__, map(_DATA, run)))
            arrays_at.extend(itertools.repeat(True, n))
        elif tags == _SCALAR_TAGS:
            values.extend(map(_DATA, run))
            arrays_at.extend(itertools.repeat(False, n))
        else:
            for leaf in run:
                if _leaf_value(leaf, recs, arrays, add, add_at) is NO_FIT:
                    return NO_FIT
    if not cursor.complete or cursor.next_record < len(recs) or ti != n_templates:
        return NO_FIT
    return values, arrays_at


def _same_node(rec: Any, kind: Any, aux: Any, n: int) -> bool:
    """Whether the file's node record ``rec`` holds the template's node ``(kind, aux,
    n)`` (but for a container's, checked inline): a sequence of its length, a dict of
    its str keys in its order, None; a register_node record never (keys of its own)."""
    tag = rec.tag
    if tag in ("T", "L", "Q"):
        return kind.type in (tuple, list, deque) and rec.n == n
    if tag in ("D", "O", "DD"):
        if _DICTS.get(kind) is None:
            return False
        keys = aux if kind is ORDERED_DICT else aux[0]
        file_keys = rec.data[0]
        return (
            len(file_keys) == n
            and not set(map(type, file_keys)) - {str}
            and tuple(file_keys) == tuple(keys)
        )
    if tag == "N":
        return kind.type is type(None)
    return False


def _child_fields(kind: Any) -> list[str]:
    """A container kind's child fields as a file's record lists them (for another
    kind: a list no record's equals)."""
    return [_NOT_A_FIELD] if kind.spec is None else list(kind.spec.children)


_NOT_A_FIELD: Any = object()


def _leaf_value(rec: Any, recs: Sequence[Any], arrays: Any, add: Any, add_at: Any) -> Any:
    """Append the value of the leaf record ``rec`` and whether it is an array; NO_FIT
    for an alias to a node (a node's leaves are under its first path only)."""
    tag = rec.tag
    if tag == "A":
        add(arrays[rec.data])
        add_at(True)
    elif tag == "S":
        add(rec.data)
        add_at(False)
    else:  # an alias: to an array only
        target = recs[rec.data]
        if target.tag != "A":
            return NO_FIT
        add(arrays[target.data])
        add_at(True)
    return None


def _framework_leaves(
    wants: list[Any], values: list[Any], want_np: list[bool], arrays_at: list[bool]
) -> Any:
    """``{leaf index: the file's array in the template leaf's framework}`` for the
    template leaves that are not numpy arrays where the file has an array, or
    ``NO_FIT``.

    The leaves ``arrays_fit`` does not take (tensors on an accelerator or of a dtype
    ``torch.from_numpy`` refuses, ``Parameter`` s, JAX arrays) go one by one.
    """
    at = list(itertools.compress(range(len(wants)), map(operator.ne, want_np, arrays_at)))
    if not all(map(arrays_at.__getitem__, at)):
        return NO_FIT  # a scalar in the file where the template has an array
    got = list(map(values.__getitem__, at))
    if set(map(type, got)) != {np.ndarray}:
        return NO_FIT
    want = list(map(wants.__getitem__, at))
    types = set(map(type, want))
    kinds: dict[type, str] = {}
    for t in types:
        kind = kind_of(next(w for w in want if type(w) is t))
        if kind not in ("torch", "jax"):
            return NO_FIT
        kinds[t] = kind
    torch = sys.modules.get("torch")
    if torch is not None:
        _views(torch)  # fills _TORCH_TO_NUMPY
    converted: dict[int, Any] = {}
    for i, w, a in zip(at, want, got, strict=True):
        kind = kinds[type(w)]
        if kind == "torch":
            same_dtype = a.dtype == _TORCH_TO_NUMPY.get(w.dtype)
        else:
            same_dtype = a.dtype == w.dtype
        if not same_dtype or a.shape != tuple(w.shape):
            return NO_FIT
        converted[i] = like_leaf(kind, a, w)
    return converted


#: What ``positional`` gives when the file's tree does not have the template's shape.
NO_FIT: Any = object()
_ARRAY_TAGS = {"A"}
_SCALAR_TAGS = {"S"}
_TAG = operator.itemgetter(0)  # Rec.tag
_DATA = operator.itemgetter(2)  # Rec.data
_DICTS = {DICT: "D", ORDERED_DICT: "O", DEFAULT_DICT: "DD"}


def _no_keys(rec: Any) -> Any:
    """The cursor's keys of a node record: never asked for here (no path is built)."""
    raise AssertionError("positional builds no path")
