"""The record cursor (``_records.RecordCursor``) over a file's records: its node-at-once
reads (``leaf_run``, ``child_paths``) agree with its steps, and its clients (a file's
tree view, ``_rows.rows``, and its leaves by path, ``_like.file_leaves``) give the
tree's own key paths."""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import containers as ct
from containers._paths import keystr
from containers._records import CLOSE, LEAF, OPEN
from containers._serialize import _decode, _evolve, _layout_fast
from containers._serialize._format import build_header, layout_of_bytes
from containers._serialize._like import _child_keys, file_leaves
from containers._serialize._recparse import _records
from containers._serialize._rows import _row_keys, file_cursor, row_path, rows


@ct.container(children=["w", "b"])
class Layer:
    w: Any
    b: Any
    name: str = "layer"


leaves_st = st.one_of(
    st.integers(-5, 5),
    st.text(max_size=2),
    st.builds(lambda n: np.arange(n, dtype=np.float32), st.integers(0, 3)),
)


def _extend(child: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(child, max_size=4),
        st.lists(child, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=2), child, max_size=4),
        st.dictionaries(st.integers(0, 5), child, max_size=3).map(
            lambda d: OrderedDict(sorted(d.items()))
        ),
        st.builds(Layer, child, child, st.text(max_size=2)),
        st.just(None),
    )


#: Trees of fresh objects (no sharing: each leaf's path is its own), as files hold them.
trees_st = st.recursive(leaves_st, _extend, max_leaves=16)


def _file_records(tree: Any) -> Any:
    """The validated records and tensors of ``tree`` saved to bytes."""
    limits = ct.Limits()
    layout = layout_of_bytes(memoryview(ct.serialize(tree)), limits)
    return _records(layout, limits), layout.tensors, limits


def _stepped(recs: Any, keys: Any) -> list[tuple[int, int, int, tuple[Any, ...]]]:
    """Per record, in order, ``(index, depth, parent, path)`` read by ``step()`` alone:
    the plain twin of the node-at-once reads."""
    cursor = file_cursor(recs, keys)
    out = []
    while (event := cursor.step()) is not None:
        if event == CLOSE:
            continue
        depth, parent, _, _ = cursor.position()
        out.append((cursor.index, depth, parent, cursor.path()))
    assert cursor.complete and cursor.next_record == len(recs)
    return out


@settings(deadline=None)
@given(trees_st)
def test_a_leaf_run_reads_what_the_steps_read(tree: Any) -> None:
    """After OPEN, leaf_run passes over a node's leaf records and child_paths names
    them, as stepping to each does: the same records, depths, parents and paths."""
    records, _, _ = _file_records(tree)
    recs = records.recs
    cursor = file_cursor(recs, _child_keys)
    fast = []
    while (event := cursor.step()) is not None:
        if event == CLOSE:
            continue
        depth, parent, _, _ = cursor.position()
        fast.append((cursor.index, depth, parent, cursor.path()))
        if event == OPEN:
            j = cursor.index
            run = cursor.leaf_run()
            if run is not None:
                paths = cursor.child_paths()
                assert len(paths) == len(run) == recs[j].n
                assert cursor.child_paths(1) == [p[:1] for p in paths]
                fast += [(j + 1 + i, depth + 1, j, p) for i, p in enumerate(paths)]
        else:
            assert event == LEAF
    assert cursor.complete and cursor.next_record == len(recs)
    assert fast == _stepped(recs, _child_keys)


@settings(deadline=None)
@given(trees_st)
def test_file_leaves_are_the_trees_leaves_with_their_paths(tree: Any) -> None:
    """file_leaves (the cursor's client) gives the tree's leaves_with_path: the same
    paths and values, in order (kept values left out), and with max_path the paths cut
    after max_path + 1 keys, the leaves below marked deep."""
    records, tensors, limits = _file_records(tree)
    arrays = {name: np.zeros(0) for name in tensors}
    got = file_leaves(records.recs, tensors, arrays, limits)
    want = ct.leaves_with_path(tree)
    assert [leaf.path for leaf in got] == [path for path, _ in want]
    assert not any(leaf.deep for leaf in got)
    for leaf, (_, value) in zip(got, want):
        assert leaf.is_array is isinstance(value, np.ndarray)
        if not leaf.is_array:
            assert leaf.value == value
    cut = file_leaves(records.recs, tensors, arrays, limits, max_path=1)
    assert [leaf.path for leaf in cut] == [path[:2] for path, _ in want]
    assert [leaf.deep for leaf in cut] == [len(path) > 2 for path, _ in want]


@settings(deadline=None)
@given(trees_st)
def test_the_tree_view_has_a_row_per_record_at_the_cursors_positions(tree: Any) -> None:
    """rows gives a row per record with the depth, parent and key the cursor's steps
    give, and each row's path is the keystr of the position's path."""
    records, tensors, limits = _file_records(tree)
    view = rows(records, tensors, limits)
    stepped = _stepped(records.recs, _child_keys)
    assert [(r.depth, r.parent) for r in view] == [(d, p) for _, d, p, _ in stepped]
    assert [row_path(view, j) for j in range(len(view))] == [
        keystr(path) or "the root" for _, _, _, path in stepped
    ]
    assert [r.key for r in view] == [
        keys[-1] if keys else "" for _, _, _, keys in _stepped(records.recs, _row_keys)
    ]


def test_an_alias_to_a_leaf_of_a_run_shows_the_leafs_path() -> None:
    """An alias to an array read with its siblings at once (leaf_run) shows that array's
    path, whole or, past LONG_PATH keys, shortened as every message's path."""
    shared = np.ones(2, np.float32)
    tree = {"a": {"x": np.zeros(1), "y": shared}, "b": {"z": shared}}
    records, tensors, limits = _file_records(tree)
    texts = [r.text for r in rows(records, tensors, limits)]
    assert "same object as ['a']['y']" in texts
    deep: Any = {"w": np.zeros(1), "v": shared}
    for _ in range(50):
        deep = [deep]
    records, tensors, limits = _file_records({"deep": deep, "later": shared})
    texts = [r.text for r in rows(records, tensors, limits)]
    assert f"same object as ['deep']{'[0]' * 11}...{'[0]' * 11}['v'] (depth 52)" in texts


@settings(deadline=None)
@given(trees_st)
def test_leaf_records_read_what_the_steps_read(tree: Any) -> None:
    """After OPEN and after each CLOSE, leaf_records passes over the open node's next
    leaf records (up to a node record or its end), and shown_path(child=i) names each,
    as stepping to each does: the same records, depths, parents and shown paths."""
    records, _, _ = _file_records(tree)
    recs = records.recs
    cursor = file_cursor(recs, _row_keys)
    fast = []

    def take() -> None:
        first = cursor.next_record
        depth = len(cursor._frames)
        parent = cursor._frames[-1][0]
        child = cursor._frames[-1][3] + 1
        for i, _ in enumerate(cursor.leaf_records()):
            shown = cursor.shown_path(child=child + i)
            fast.append((first + i, depth, parent, shown))

    while (event := cursor.step()) is not None:
        if event == CLOSE:
            if cursor._frames:
                take()
            continue
        depth, parent, _, _ = cursor.position()
        fast.append((cursor.index, depth, parent, cursor.shown_path()))
        if event == OPEN:
            take()
    assert cursor.complete and cursor.next_record == len(recs)
    stepped = []
    cursor = file_cursor(recs, _row_keys)
    while (event := cursor.step()) is not None:
        if event != CLOSE:
            depth, parent, _, _ = cursor.position()
            stepped.append((cursor.index, depth, parent, cursor.shown_path()))
    assert fast == stepped


def _built(tree: Any, exact: bool) -> Any:
    """``tree`` saved and rebuilt by ``_decode.build`` from its records, with containers
    at today's fields rebuilt at once (``exact``) or each through ``evolve``."""
    records, tensors, limits = _file_records(tree)
    arrays = {name: np.full(1, i) for i, name in enumerate(tensors)}
    saved = _evolve.exact_fields
    _evolve.exact_fields = exact
    try:
        return _decode.build(records, arrays, limits)
    finally:
        _evolve.exact_fields = saved


@settings(deadline=None)
@given(trees_st)
def test_containers_rebuilt_at_once_agree_with_evolve(tree: Any) -> None:
    """build's rebuild of a container whose record has today's fields (_exact) gives
    what evolve's fitting gives: the same structure, leaves and kept values."""
    fast, plain = _built(tree, True), _built(tree, False)
    assert ct.structure(fast) == ct.structure(plain)
    for a, b in zip(ct.leaves(fast), ct.leaves(plain), strict=True):
        assert type(a) is type(b) and np.array_equal(a, b)


def test_containers_rebuilt_at_once_keep_sharing() -> None:
    """A list and an array met twice (through a frozen container, written twice) are
    one object in the rebuilt tree, whether the container is rebuilt at once or through
    evolve; a kept value is kept."""
    shared = np.ones(2, np.float32)
    layer = Layer(shared, [shared, 1.0], "x")
    for exact in (True, False):
        got = _built({"a": layer, "b": [layer, Layer(2.0, shared)]}, exact)
        assert got["a"] == got["b"][0] and got["a"].b is got["b"][0].b
        assert got["a"].w is got["a"].b[0] is got["b"][1].b
        assert got["a"].name == "x" and got["b"][1].name == "layer"


@ct.container(children=["x"], keep=["k"], name="test_records.Tagged")
class Tagged:
    x: Any
    k: Any = None


#: Kept values that compare equal across types (1, 1.0, True; 0.0, -0.0): each must come
#: back as its own type.
kept_st = st.one_of(
    st.integers(-1, 1),
    st.booleans(),
    st.sampled_from([0.0, -0.0, 1.0]),
    st.none(),
    st.text("ab", max_size=2),
)


def _extend_tagged(child: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(_extend(child), st.builds(Tagged, child, kept_st))


#: Trees of declared containers among builtins, with objects met twice (an array, a
#: list, a container): what a file's aliases point to.
shared_trees_st = st.recursive(leaves_st, _extend_tagged, max_leaves=16).flatmap(
    lambda tree: st.sampled_from(
        [tree, [tree, tree], {"a": tree, "b": [ct.leaves(tree)[:1], tree]}]
        + [[leaf, {"again": leaf}] for leaf in ct.leaves(tree)[:1]]
    )
)


def _outcome(fn: Any) -> Any:
    """What ``fn()`` gives, as comparable data: the tree's repr (types, -0.0 and 0.0
    apart) and which leaves are the same object, or the error's type and message."""
    try:
        tree = fn()
    except ct.SerializationError as err:
        return (type(err).__name__, str(err))
    first: dict[int, int] = {}
    return repr(tree), [first.setdefault(id(x), i) for i, x in enumerate(ct.leaves(tree))]


def _both_builds(data: bytes) -> tuple[Any, Any, bool]:
    """The tree of ``data`` rebuilt from the records ``containers._scan`` gives as a
    ``Structure``'s (classes included), and record by record; and whether the first
    ran."""
    limits = ct.Limits()
    layout = layout_of_bytes(memoryview(data), limits)
    arrays = {name: np.full(1, i) for i, name in enumerate(layout.tensors)}
    records = _records(layout, limits, columns=True)
    at_once = records.columns is not None
    fast = _outcome(lambda: _decode.build(records, arrays, limits))
    plain = _outcome(lambda: _decode.build(records._replace(columns=None), arrays, limits))
    return fast, plain, at_once


@settings(deadline=None, max_examples=300)
@given(shared_trees_st)
def test_classes_rebuilt_from_columns_agree_with_record_by_record(tree: Any) -> None:
    """A tree of declared containers at today's fields (scalar kept values of any type)
    and builtins, with shared arrays and nodes, rebuilt by Structure.unflatten from the
    columns containers._scan makes gives what build gives record by record: the same
    repr (kept values' types included) and the same shared leaves."""
    fast, plain, _ = _both_builds(ct.serialize(tree))
    assert fast == plain


def test_classes_rebuilt_from_columns_only_at_todays_fields() -> None:
    """The columns hold a file's containers only when each is registered at today's
    version and fields, with scalar kept values, and no node is shared; anything else
    goes record by record, whose errors name the class and path."""
    tree = [Tagged(np.zeros(2), k) for k in (1, True, 1.0, -0.0, "a", None)]
    tree.append({"s": np.ones(1), "t": Tagged([Tagged(1.0, 2)], "x")})
    data = ct.serialize(tree)
    fast, plain, at_once = _both_builds(data)
    assert fast == plain and at_once == (_layout_fast._scan is not None)
    node = Tagged([1.0], "x")
    for other in (
        [node, node],  # a shared node
        [Tagged(1.0, [2])],  # a kept node
    ):
        fast, plain, at_once = _both_builds(ct.serialize(other))
        assert fast == plain and not at_once
    # a kept array, as no save writes it (the records of the child and the kept value
    # swapped): rebuilt as record by record rebuilds it
    swapped = _edit_tree(ct.serialize([Tagged(np.zeros(1), 1)]), lambda r: r[:2] + r[:1:-1])
    fast, plain, at_once = _both_builds(swapped)
    assert fast == plain and not at_once and "array" in repr(fast)
    renamed = data.replace(b"test_records.Tagged", b"test_records.Taggxd")
    fast, plain, at_once = _both_builds(renamed)
    assert fast == plain and not at_once
    assert fast[0] == "UnknownTypeError" and "at [0]" in fast[1]
    for edit, error in (
        (lambda r: [r[0], ["C", "test_records.Tagged", 2, ["x"], ["k"]], *r[2:]], "VersionError"),
        (lambda r: [r[0], ["C", "test_records.Tagged", 1, ["y"], ["k"]], *r[2:]], "SchemaError"),
    ):
        fast, plain, at_once = _both_builds(_edit_tree(data, edit))
        assert fast == plain and not at_once and fast[0] == error and "at [0]" in fast[1]


def _edit_tree(data: bytes, edit: Any) -> bytes:
    """``data`` with the records of its tree replaced by ``edit(records)``."""
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__")
    tree = json.dumps(edit(json.loads(meta["containers.tree"])), separators=(",", ":"))
    entries = json.dumps(header, separators=(",", ":"))[1:-1]
    return build_header(entries, {**meta, "containers.tree": tree}) + data[8 + n :]


def test_a_failing_factory_in_columns_is_reported_record_by_record(
    failing_factory: Callable[[str], Any],
) -> None:
    """A container whose rebuild runs user code that raises (an attrs factory taking
    self), met while rebuilding from the columns, gives build's SchemaError with its
    path."""
    item = failing_factory("test_records.Factory")
    fast, plain, at_once = _both_builds(ct.serialize({"a": [item]}))
    assert fast == plain and at_once == (_layout_fast._scan is not None)
    assert fast == ("SchemaError", "rebuilding Factory at ['a'][0] failed: RuntimeError: no.")


def test_nodes_claiming_huge_counts_cost_linear_time() -> None:
    """A hostile file of 20,000 nested lists each claiming 2**62 values: the tree view
    and file_leaves read the keys of the values met only, and say the tree ends inside
    a node (instead of making 2**62 keys per node)."""
    seed = ct.serialize([])
    n = int.from_bytes(seed[:8], "little")
    header = json.loads(seed[8 : 8 + n])
    meta = header.pop("__metadata__")
    tree = json.dumps([["L", 2**62]] * 20_000 + [["N"]])
    data = build_header("", {**meta, "containers.tree": tree}) + seed[8 + n :]
    limits = ct.Limits(max_depth=100_000)
    layout = layout_of_bytes(memoryview(data), limits)
    records = _records(layout, limits)
    message = re.escape("the tree ends inside a node: records are missing")
    with pytest.raises(ct.FormatError, match=message):
        rows(records, layout.tensors, limits)
    with pytest.raises(ct.FormatError, match=message):
        file_leaves(records.recs, layout.tensors, {}, limits, max_path=3)
    deep = re.escape(f"{'[0]' * 12}...{'[0]' * 11}[1] (depth 20000)")
    with pytest.raises(ct.FormatError, match=f"ends inside a node at {deep}: records are"):
        _decode.build(records, {}, limits)


@settings(deadline=None)
@given(trees_st)
def test_leaves_by_position_are_the_trees_leaves(tree: Any) -> None:
    """load(like=)'s reading by position (_positional._record_leaves, a cursor client)
    takes a file's child leaves against the tree's own records: its leaves in order,
    kept values passed over, arrays marked; a template of another shape gives NO_FIT."""
    from containers._engine._flat import flatten_records
    from containers._serialize._positional import NO_FIT, _record_leaves

    records, tensors, limits = _file_records(tree)
    arrays = {name: np.full(1, i) for i, name in enumerate(tensors)}
    t_records: list[Any] = []
    want = flatten_records(tree, None, False, "load", t_records)
    got = _record_leaves(records.recs, t_records, arrays, limits)
    int_keys = any(
        type(key) is not str
        for kind, aux, _, _ in t_records
        if kind.type in (dict, OrderedDict)
        for key in (aux if kind.type is OrderedDict else aux[0])
    )
    assert (got is NO_FIT) == int_keys  # dicts by their str keys only
    if got is NO_FIT:
        return
    values, arrays_at = got
    assert arrays_at == [isinstance(x, np.ndarray) for x in want]
    for value, x in zip(values, want, strict=True):
        assert value == x if not isinstance(x, np.ndarray) else type(value) is np.ndarray
    if t_records:
        assert _record_leaves(records.recs, t_records[:-1], arrays, limits) is NO_FIT
