"""The encoder's fast paths against their plain twins (ISSUE 33).

``_Encoder.run`` takes a node's leaf children at once (a dict of arrays, of floats);
``encode(runs=False)`` encodes leaf by leaf, its plain twin. ``Plan.layout`` renders the
tensor entries with cached dtype/shape parts; ``Plan._layout_plain`` with ``json.dumps``.
Each pair must give the same records, tensors, file bytes and errors.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import containers as ct
from containers._serialize._encode import encode


def _leaf(draw: Any, pool: list[Any]) -> Any:
    """One leaf: arrays of the kinds the fast path must refuse as well as take."""
    choice = draw(st.integers(0, 12))
    if choice == 0 and pool:
        return pool[draw(st.integers(0, len(pool) - 1))]  # shared: an alias
    if choice == 1:
        return np.arange(8, dtype=np.float32)[::2]  # not contiguous
    if choice == 2:
        return np.arange(4, dtype=">f4")  # big-endian
    if choice == 3:
        return np.array([0, 2, 1, 0], np.uint8).view(np.bool_)  # bool bytes other than 0/1
    if choice == 4:
        return draw(st.floats(allow_nan=False))
    if choice == 5:
        return draw(st.text(max_size=3))
    if choice == 6:
        return draw(st.integers(-(2**70), 2**70))
    if choice == 7:
        return None
    if choice == 8:
        return np.full(3, draw(st.integers(-5, 5)), np.int64)
    a = np.full(4, draw(st.floats(-1, 1, width=32)), np.float32)
    pool.append(a)
    return a


@st.composite
def trees(draw: Any) -> Any:
    """Dicts (str, int and non-ASCII keys) of runs of leaves, lists, shared subtrees."""
    pool: list[Any] = []
    nodes: list[Any] = []

    def node(depth: int) -> Any:
        if nodes and draw(st.integers(0, 9)) == 0:
            return nodes[draw(st.integers(0, len(nodes) - 1))]  # a shared node
        n = draw(st.integers(0, 12))
        uniform = draw(st.booleans())  # all float32 arrays, or all floats: the runs
        keys = draw(
            st.lists(
                st.one_of(st.text(max_size=3), st.integers(-3, 30), st.just("é")),
                min_size=n,
                max_size=n,
                unique_by=lambda k: (type(k), k),
            )
        )
        kids: list[Any] = []
        for _ in keys:
            if depth < 2 and draw(st.integers(0, 6)) == 0:
                kids.append(node(depth + 1))
            elif uniform:
                a = np.full(4, len(kids), np.float32)
                pool.append(a)
                kids.append(a if draw(st.integers(0, 9)) else pool[0])
            else:
                kids.append(_leaf(draw, pool))
        made: Any = dict(zip(keys, kids)) if draw(st.integers(0, 3)) else [*kids, float(len(kids))]
        nodes.append(made)
        return made

    return node(0)


def _outcome(tree: Any, runs: bool) -> Any:
    """What encoding ``tree`` gives: the records, names and tensors, or the error."""
    try:
        plan = encode(tree, runs=runs)
    except Exception as err:
        return type(err), str(err)
    plan.fill_crcs()
    tensors = [(a.dtype.str, a.shape, a.tobytes()) for a in plan.arrays]
    return json.dumps(plan.records), plan.names, tensors, plan.layout()


@settings(max_examples=300, deadline=None)
@given(trees())
def test_runs_encode_as_the_per_leaf_loop(tree: Any) -> None:
    """encode's runs give the records, tensor names, tensors and errors of the per-leaf loop."""
    assert _outcome(tree, runs=True) == _outcome(tree, runs=False)


@settings(max_examples=300, deadline=None)
@given(trees())
def test_layout_renders_as_json_dumps(tree: Any) -> None:
    """Plan.layout's entries and order are those of its json.dumps twin, byte for byte."""
    try:
        plan = encode(tree)
    except ct.SerializationError:
        return
    assert plan.layout() == plan._layout_plain()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(alphabet=st.sampled_from('ab"\\\x00\x1f\x7f\u00e9 ~'), max_size=4),
            st.sampled_from(
                [np.float32, np.int8, np.float64, np.bool_, np.uint16, np.complex64, "bfloat16"]
            ),
            st.lists(st.integers(0, 3), max_size=2),
        ),
        max_size=12,
    )
)
def test_layout_in_c_and_python_agree_on_any_name(items: list[Any]) -> None:
    """Plan.layout gives the same entries with containers._encoder.entries and without
    it (names with quotes, backslashes, control characters, DEL and non-ASCII, which
    the C pass leaves to json's escapes; bfloat16, which has no buffer format), and as
    its json.dumps twin."""
    import ml_dtypes

    from containers._serialize import _compiled

    tree = {
        name: np.zeros(shape, ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
        for name, dtype, shape in items
    }
    plan = encode(tree)
    got = plan.layout()
    encoder = _compiled._encoder
    try:
        _compiled._encoder = None
        assert got == plan.layout() == plan._layout_plain()
    finally:
        _compiled._encoder = encoder


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(alphabet="ab_0", min_size=1, max_size=3),
        st.tuples(
            st.sampled_from([np.float32, np.int64, np.bool_, np.float16, np.uint8, np.complex64]),
            st.lists(st.integers(0, 3), max_size=3),
        ),
        max_size=12,
    )
)
def test_layout_in_c_reads_every_dtype_and_shape(items: dict[str, Any]) -> None:
    """containers._encoder.entries, which reads dtypes and shapes by the buffer protocol
    (names that need no escapes), writes the entries of the json.dumps twin: runs of
    one dtype with changing shapes, 0-d and empty arrays."""
    from containers._serialize import _compiled

    plan = encode({name: np.zeros(shape, dtype) for name, (dtype, shape) in items.items()})
    if _compiled._encoder is not None:
        text = _compiled._encoder.entries(
            plan.arrays, plan.names, plan.layout()[1], _compiled.format_codes()
        )
        assert text == plan._layout_plain()[0]
    assert plan.layout() == plan._layout_plain()


def test_layout_orders_by_item_size_then_name() -> None:
    """Tensors of mixed item sizes are sorted largest first, then by name, in both twins."""
    tree = {"b": np.zeros(2, np.int8), "a": np.zeros(2, np.float64), "c": np.ones(1, np.float32)}
    plan = encode(tree)
    assert plan.layout() == plan._layout_plain()
    assert [plan.names[i] for i in plan.layout()[1]] == ["['a']", "['c']", "['b']"]


def test_run_with_a_shared_array_writes_an_alias() -> None:
    """An array met twice inside one dict of arrays is stored once and loads as one object."""
    a = np.zeros(4, np.float32)
    tree = {f"k{i}": np.full(4, i, np.float32) for i in range(10)}
    tree["k3"] = tree["k7"] = a
    back = ct.deserialize(ct.serialize(tree))
    assert back["k3"] is back["k7"]
    assert ct.serialize(tree) == _serialized_plain(tree)


def _serialized_plain(tree: Any) -> bytes:
    plan = encode(tree, runs=False)
    plan.fill_crcs()
    entries, order = plan._layout_plain()
    return b"".join([plan.header(entries), *[plan.arrays[i] for i in order]])


def test_shared_empty_node_is_an_alias_not_a_cycle() -> None:
    """An empty list or dict met twice is stored once, not refused as a reference cycle."""
    e: dict[str, Any] = {}
    lst: list[Any] = []
    back = ct.deserialize(ct.serialize([e, e, lst, {"x": lst}, 2.0]))
    assert back == [{}, {}, [], {"x": []}, 2.0]
    assert back[0] is back[1] and back[2] is back[3]["x"]


@settings(max_examples=200, deadline=None)
@given(trees())
def test_record_cursor_key_and_where_agree_with_path(tree: Any) -> None:
    """RecordCursor.key() is the last key of path(), and where() renders path() whole,
    also when called at the node's CLOSE (what the encoder's tail and errors rely on)."""
    from containers._records import CLOSE, OPEN, RecordCursor

    cursor = RecordCursor(ct.structure(tree)._records)
    opened = []
    while (event := cursor.step()) is not None:
        path = cursor.path()
        if event == CLOSE:
            where, want = opened.pop()
            assert where() == want == "".join(map(str, path))
            continue
        assert cursor.where()() == "".join(map(str, path))
        if path:
            assert cursor.key() == path[-1]
        if event == OPEN:
            opened.append((cursor.where(), "".join(map(str, path))))
