"""The encoder's compiled walk (``containers._encoder``, ``_serialize._compiled``) against
its plain twin, the Python walk (``encode(compiled=False)``): byte-identical files, or the
same error, on trees with shared arrays, shared nodes, cycles, every scalar, classes with
kept fields and register_node kinds."""

from __future__ import annotations

import json
from collections import OrderedDict, defaultdict, deque
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import containers as ct
from containers._serialize import _compiled
from containers._serialize._encode import _CLASSIFY, encode


def _walked(tree: Any) -> Any:
    """The C walk's plan fields for ``tree``, or None where it gives up."""
    return _compiled.encode_compiled(tree, _CLASSIFY)


needs_c = pytest.mark.skipif(_compiled._encoder is None, reason="the C encoder is not built")


@ct.container(children=["w", "b"], keep=["name", "shape"], name="tests.compiled.Layer")
class Layer:
    w: Any
    b: Any
    name: str = "layer"
    shape: tuple[int, ...] = (1,)


@ct.container(children=["x"], keep=["k", "j"], name="tests.compiled.Kept")
class Kept:
    x: Any
    k: Any = None
    j: Any = "j"


@ct.container(name="tests.compiled.Frozen")
class Frozen:
    a: Any


class Span:
    def __init__(self, lo: Any, hi: Any, unit: Any) -> None:
        self.lo, self.hi, self.unit = lo, hi, unit


ct.register_node(
    Span,
    lambda x: ((x.lo, x.hi), x.unit),
    lambda unit, ch: Span(*ch, unit=unit),
    name="tests.compiled.Span",
)


class Pair(NamedTuple):
    x: Any
    y: Any


ct.register(Pair, name="tests.compiled.Pair")


class Unregistered:
    """A class files cannot name: an error either way."""


def _file(tree: Any, compiled: bool) -> Any:
    """The file's bytes for ``tree`` and its names, or the error ``encode`` raises."""
    try:
        plan = encode(tree, compiled=compiled)
    except Exception as err:
        return type(err), str(err)
    plan.fill_crcs()
    entries, order = plan.layout()
    return plan.header(entries) + b"".join(plan.arrays[i].tobytes() for i in order), plan.names


_SCALARS = st.one_of(
    st.floats(),  # NaN (with payloads), infinities, -0.0
    st.integers(-(2**70), 2**70),
    st.text(max_size=3),
    st.sampled_from(["é", "\udcff", ""]),
    st.binary(max_size=4),
    st.booleans(),
    st.complex_numbers(),
    st.sampled_from(
        [np.float16(1.5), np.int8(-3), np.uint64(2**63), np.bool_(True), np.float32(np.nan)]
    ),
    st.sampled_from([np.datetime64(1, "s"), np.longdouble(1.0), Unregistered()]),  # refused
)


@st.composite
def _array(draw: Any) -> Any:
    """Arrays the C walk stores as they are, and ones it hands to Python to normalize."""
    dtype = draw(st.sampled_from(["<f4", "<f8", "i1", "<u2", "<i8", "<f2", "<c8", "?", ">f4"]))
    shape = draw(st.lists(st.integers(0, 3), max_size=2))
    a = np.arange(int(np.prod(shape)) if shape else 1).astype(dtype).reshape(shape)
    choice = draw(st.integers(0, 9))
    if choice == 0 and a.ndim:
        return a[::-1]  # not contiguous
    if choice == 1:
        return np.array([0, 2, 1], np.uint8).view(np.bool_)  # bool bytes other than 0/1
    if choice == 2:
        return np.arange(3, dtype=np.longlong)  # format "q": normalized or refused
    if choice == 3:
        return np.arange(2, dtype=np.complex128)  # refused
    if choice == 4:
        import ml_dtypes

        return np.ones(2, ml_dtypes.bfloat16)  # no buffer format
    return a


@st.composite
def trees(draw: Any) -> Any:
    """Nodes of every builtin kind, containers (kept values of every kind),
    register_node kinds, namedtuples; shared arrays and nodes, now and then a cycle."""
    pool: list[Any] = []  # arrays and mutable nodes made so far
    keys = st.one_of(st.text(max_size=2), st.integers(-3, 9), st.just("é"), st.just((1, "a")))

    def leaf() -> Any:
        if pool and draw(st.integers(0, 5)) == 0:
            return pool[draw(st.integers(0, len(pool) - 1))]  # shared
        if draw(st.booleans()):
            a = draw(_array())
            pool.append(a)
            return a
        return draw(_SCALARS)

    def node(depth: int) -> Any:
        n = draw(st.integers(0, 4))
        kids = [node(depth + 1) if depth < 3 and draw(st.integers(0, 2)) == 0 else leaf()]
        kids += [leaf() for _ in range(n)]
        kind = draw(st.integers(0, 12))
        made: Any
        if kind == 0:
            made = tuple(kids)
        elif kind == 1:
            made = dict(zip(draw(st.lists(keys, min_size=len(kids), max_size=len(kids))), kids))
        elif kind == 2:
            made = OrderedDict((f"k{i}", k) for i, k in enumerate(kids))
        elif kind == 3:
            made = defaultdict(list, {f"k{i}": k for i, k in enumerate(reversed(kids))})
        elif kind == 4:
            made = deque(kids, maxlen=draw(st.sampled_from([None, 9])))
        elif kind == 5:
            made = Layer(kids[0], kids[-1], name=draw(st.text(max_size=2)), shape=(len(kids),))
        elif kind == 6:
            made = Span(kids[0], kids[-1], unit=draw(st.sampled_from(["m", ("s", 2), None])))
        elif kind == 7:
            made = Pair(kids[0], kids[-1])
        elif kind == 8:
            made = Frozen(kids[0])
        elif kind == 9:
            made = None
        elif kind == 11:  # kept scalars (written by classify itself), or other kept values
            kept = st.one_of(_SCALARS, st.none(), st.sampled_from([(1,), [2], {"a": 3}]))
            made = Kept(kids[0], draw(kept), draw(kept))
        elif kind == 10:  # str keys alone, inserted in any order (the C walk's dicts)
            names = st.text(max_size=3)
            made = dict(zip(draw(st.lists(names, min_size=len(kids), max_size=len(kids))), kids))
        else:
            made = kids
        if draw(st.integers(0, 30)) == 0 and isinstance(made, list):
            made.append(made)  # a cycle
        if isinstance(made, (list, dict, deque, Layer, Span)):
            pool.append(made)
        if pool and draw(st.integers(0, 8)) == 0:
            return pool[draw(st.integers(0, len(pool) - 1))]  # a shared node (or array)
        return made

    root = node(0)
    return root if draw(st.integers(0, 9)) else leaf()


@needs_c
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_compiled_and_python_walks_write_the_same_file(tree: Any) -> None:
    """The C walk writes the Python walk's file byte for byte, or the same error."""
    assert _file(tree, compiled=True) == _file(tree, compiled=False)


@needs_c
def test_compiled_walk_takes_the_usual_trees_itself() -> None:
    """Containers with kept fields, register_node kinds, namedtuples, every builtin node,
    shared arrays and nodes, every scalar: the C walk makes the plan, no fallback."""
    w = np.ones((2, 3), np.float32)
    shared = [w, np.arange(3)]
    tree = {
        "layers": [Layer(w, np.zeros(3), "l0", (2, 3)), Layer(np.ones(1, ">f4"), None)],
        "span": Span(1.5, np.float16(2), ("m", 2)),
        "pair": Pair(np.ones(2, np.bool_), b"x"),
        "q": deque([1j, 2**80, float("nan")], maxlen=4),
        "o": OrderedDict([("b", shared), ("a", shared)]),
        "d": defaultdict(list, {3: (), "x": Frozen(shared)}),
        "t": (None, True, "é", -0.0),
    }
    found = _walked(tree)
    assert found is not None
    records, names = found[0], found[1]
    python = encode(tree, compiled=False)
    assert json.dumps(records) == json.dumps(python.records)
    assert names == python.names
    assert sum(r[0] == "@" for r in records) >= 3  # w, shared, and shared's w


@needs_c
@pytest.mark.parametrize(
    "tree",
    [
        pytest.param([np.ones(1), (np.ones(1),)], id="plain"),
        pytest.param({"é": np.ones(1)}, id="a non-ASCII name"),
        pytest.param(Span(np.ones(1), np.zeros(1), None), id="register_node keys"),
    ],
)
def test_names_are_the_python_walks(tree: Any) -> None:
    """Tensor names come out as the Python walk renders them (escapes included)."""
    assert encode(tree).names == encode(tree, compiled=False).names


@needs_c
def test_cycles_and_clashes_fall_back_to_the_python_walks_error() -> None:
    """A cycle or two keys rendering alike: the C walk gives up, and the error is the
    Python walk's, with its path."""
    loop: list[Any] = [np.ones(1)]
    loop.append({"back": loop})
    assert _walked(loop) is None
    with pytest.raises(ct.StructureError, match=r"reference cycle.*\[1\]\['back'\]"):
        ct.serialize(loop)
    deep: Any = np.ones(1)
    for _ in range(150):
        deep = [deep]
    assert _walked(deep) is None  # deeper than the C walk goes
    assert ct.deserialize(ct.serialize(deep)) is not None


def test_pure_python_encoder_when_asked(monkeypatch: Any) -> None:
    """With the C walk off (as under CONTAINERS_PURE_PYTHON), save writes the same file."""
    tree = {"a": [np.ones(2, np.float32)] * 2, "s": 1.5}
    data = ct.serialize(tree)
    monkeypatch.setattr(_compiled, "_encoder", None)
    assert _walked(tree) is None
    assert ct.serialize(tree) == data


_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**80), 2**80),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),  # escapes, non-ASCII, astral characters, lone surrogates
    ),
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.lists(kids, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=3), kids, max_size=3),
    ),
    max_leaves=20,
)


@needs_c
@settings(max_examples=500, deadline=None)
@given(_JSON)
def test_render_is_json_dumps(value: Any) -> None:
    """The tree text rendered in C is json.dumps's, character for character, and so is
    the header's str of it (json.dumps of the text)."""
    text = json.dumps(value, separators=(",", ":"))
    assert _compiled.render(value) == text
    assert _compiled.render(value, quoted=True) == json.dumps(text)
    assert _compiled._encoder.render(value, True) is not None


@needs_c
@pytest.mark.parametrize(
    "value",
    [[float("nan")], [float("-inf")], {1: 2}, [np.float64(1.5)], [1, {"a": b"x"}]],
)
def test_render_leaves_what_records_do_not_hold_to_json(value: Any) -> None:
    """Values records never hold (non-finite floats, non-str keys, other types): the C
    renderer declines and json.dumps writes (or refuses) them."""
    assert _compiled._encoder.render(value, False) is None
    try:
        expected: Any = json.dumps(value, separators=(",", ":"))
    except TypeError as err:
        with pytest.raises(TypeError, match=str(err)):
            _compiled.render(value)
        return
    assert _compiled.render(value) == expected


@needs_c
def test_render_gives_up_past_its_depth() -> None:
    """A value nested deeper than the C renderer goes is json.dumps's."""
    deep: Any = []
    for _ in range(100):
        deep = [deep]
    assert _compiled._encoder.render(deep, True) is None
    assert _compiled.render(deep) == json.dumps(deep)
    assert _compiled.render(deep, quoted=True) == json.dumps(json.dumps(deep))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2))
def test_header_is_json_dumps_of_the_metadata(tree: Any, metadata: dict[str, str]) -> None:
    """The header, the tree's str written into it directly, is the one json.dumps of the
    whole metadata (tree text included) gives: files stay byte for byte as they were."""
    from containers._serialize._format import FORMAT_KEY, FORMAT_VERSION, TREE_KEY, build_header

    try:
        plan = encode(tree, metadata=metadata)
    except Exception:
        return
    plan.fill_crcs()
    entries, _ = plan.layout()
    tree_text = json.dumps(plan.records, separators=(",", ":"))
    whole = {**metadata, FORMAT_KEY: FORMAT_VERSION, TREE_KEY: tree_text}
    assert plan.header(entries) == build_header(entries, whole)
