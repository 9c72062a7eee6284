"""Hostile bytes: a seeded mutation fuzz (>= 20,000 mutations of valid files, only
SerializationError or a successful load), a hypothesis round trip over random container
classes and trees, and a child process under RLIMIT_AS that loads tiny files claiming
huge tensors."""

from __future__ import annotations

import io
import itertools
import json
import os
import random
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections import Counter, OrderedDict, deque
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pytest
import safetensors.numpy
from hypothesis import HealthCheck, given, settings

import containers as ct
from containers._serialize import (
    _decode,
    _diff,
    _format,
    _layout,
    _layout_fast,
    _recparse,
    _strictjson,
)


@ct.container(children=["w", "b"], keep=["name", "shape"], name="tests.fuzz.Layer")
class Layer:
    w: Any
    b: Any
    name: str = "layer"
    shape: tuple[int, ...] = (1,)


@ct.container(name="tests.fuzz.Net", frozen=False)
class Net:
    layers: list[Any]
    extra: dict[str, Any]


def _seeds() -> list[bytes]:
    """Valid files covering every record kind, tensor dtypes, aliases and scalars."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=(3, 2)).astype(np.float32)
    shared = [np.arange(3, dtype=np.int16)]
    trees = [
        {"a": np.arange(4, dtype=np.float32), "b": [1, 2.5, "x", None], "c": (True, b"z")},
        Net(
            [Layer(w, np.zeros(2, np.float64), "l0", (3, 2)), Layer(w, np.ones(1, np.uint8))],
            {"s": shared, "t": shared, "q": deque([1j, 2**80], maxlen=4)},
        ),
        OrderedDict(
            [("z", np.array(3.0)), ("a", np.zeros((0, 2), np.int64)), ("k", {(1, "a"): -0.0})]
        ),
        [float("nan"), np.float16(1.5), np.bool_(True), np.array([True, False])],
    ]
    return [ct.serialize(t) for t in trees]


def _mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    n = len(b)
    op = rng.randrange(12)
    header_end = 8 + int.from_bytes(data[:8], "little")
    if op >= 9:  # mutate the tree records themselves, keeping the framing valid
        return _mutate_tree(data, header_end, rng)
    if op == 0:  # flip a bit anywhere
        i = rng.randrange(n)
        b[i] ^= 1 << rng.randrange(8)
    elif op == 1:  # a random byte in the header
        b[rng.randrange(8, header_end)] = rng.randrange(256)
    elif op == 2:  # truncate
        del b[rng.randrange(n) :]
    elif op == 3:  # insert bytes
        i = rng.randrange(n + 1)
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
    elif op == 4:  # delete a range
        i = rng.randrange(n)
        del b[i : i + rng.randrange(1, 17)]
    elif op == 5:  # change a digit in the header (counts, offsets, shapes, versions)
        digits = [i for i in range(8, header_end) if 48 <= b[i] <= 57]
        if digits:
            b[rng.choice(digits)] = rng.choice(b"0123456789")
    elif op == 6:  # change the header length
        length = int.from_bytes(data[:8], "little") + rng.choice([-9, -1, 1, 8, 2**40, -(2**20)])
        b[:8] = (length % 2**64).to_bytes(8, "little")
    elif op == 7:  # swap two header characters
        i, j = rng.randrange(8, header_end), rng.randrange(8, header_end)
        b[i], b[j] = b[j], b[i]
    else:  # duplicate a slice of the header inside it
        i = rng.randrange(8, header_end)
        j = min(header_end, i + rng.randrange(1, 40))
        k = rng.randrange(8, header_end)
        b[k:k] = b[i:j]
    return bytes(b)


_TREE_CHARS = '[]",{}0123456789-SALTDNOQRC@' + "'"


def _mutate_tree(data: bytes, header_end: int, rng: random.Random) -> bytes:
    """Edit the tree string (records, counts, names, aliases) and re-frame the file."""
    header = json.loads(data[8:header_end])
    tree = header["__metadata__"]["containers.tree"]
    chars = list(tree)
    for _ in range(rng.randrange(1, 4)):
        i = rng.randrange(len(chars))
        if rng.random() < 0.5:
            chars[i] = rng.choice(_TREE_CHARS)
        else:
            del chars[i]
    header["__metadata__"]["containers.tree"] = "".join(chars)
    body = json.dumps(header).encode()
    return len(body).to_bytes(8, "little") + body + data[header_end:]


def test_mutation_fuzz_raises_only_serialization_errors():
    """20,000 seeded mutations of valid files: each loads or raises a SerializationError."""
    rng = random.Random(20_000)
    seeds = _seeds()
    outcomes: Counter[str] = Counter()
    for i in range(20_000):
        data = _mutate(rng.choice(seeds), rng)
        verify = i % 5 != 0
        try:
            ct.deserialize(data, verify=verify)
        except ct.SerializationError as err:
            outcomes[type(err).__name__] += 1
        else:
            outcomes["loaded"] += 1
    assert sum(outcomes.values()) == 20_000
    assert outcomes["FormatError"] > 10_000  # the mutations do reach the parser
    assert outcomes["IntegrityError"] > 0 and outcomes["loaded"] > 0


def test_mutated_files_on_disk_agree_with_bytes(tmp_path):
    """For 300 mutations, load, load(mmap=True), deserialize and a lazy load then
    materialize give the same outcome."""
    rng = random.Random(7)
    seeds = _seeds()
    path = tmp_path / "m.safetensors"

    def outcome(fn: Any) -> str:
        try:
            fn()
        except ct.SerializationError as err:
            return type(err).__name__
        return "loaded"

    for _ in range(300):
        data = _mutate(rng.choice(seeds), rng)
        path.write_bytes(data)
        a = outcome(lambda data=data: ct.deserialize(data))
        assert outcome(lambda: ct.load(path)) == a
        assert outcome(lambda: ct.load(path, mmap=True)) == a
        assert outcome(lambda: ct.materialize(ct.load(path, lazy=True))) == a


# --- the fast paths of header and tree parsing agree with their plain twins ----------


def _result(fn: Any) -> Any:
    """What ``fn()`` gives: its value, or the error's class and message."""
    try:
        return fn()
    except ct.SerializationError as err:
        return (type(err).__name__, str(err))


def _strict_header(raw: bytes, size: int) -> Any:
    """``parse_header`` with its usual-header fast paths turned off (the Python tiers
    where ``parse_header`` looks them up, the C tiers by their handle)."""
    usual, column, scan = _layout._usual_layout, _layout._column_layout, _layout_fast._scan
    _layout._usual_layout = lambda *args: None  # type: ignore[assignment]
    _layout._column_layout = lambda *args: None  # type: ignore[assignment]
    _layout_fast._scan = None
    try:
        return _format.parse_header(raw, size, ct.Limits())
    finally:
        _layout._usual_layout = usual  # type: ignore[assignment]
        _layout._column_layout = column  # type: ignore[assignment]
        _layout_fast._scan = scan


def _usual_headers(seeds: list[bytes]) -> list[bytes]:
    """Valid headers the fast path must leave to parse_header: entry keys in another
    order, __metadata__ last or twice, a tensor named __metadata__ after it."""
    out = []
    for data in seeds:
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + n])
        meta = header.pop("__metadata__")
        entries = {k: dict(reversed(list(v.items()))) for k, v in header.items()}
        for variant in (
            json.dumps({"__metadata__": meta, **entries}),
            json.dumps({**header, "__metadata__": meta}),
            json.dumps({"__metadata__": meta, **header})[:-1] + ', "__metadata__": {}}',
        ):
            body = variant.encode()
            out.append(len(body).to_bytes(8, "little") + body + data[8 + n :])
    return out


def test_usual_paths_agree_with_their_plain_twins():
    """On valid files, unusual valid headers and 20,000 mutations, the fast paths of
    parse_header and parse_records give exactly what the record-by-record checks give:
    the same layout and records, or the same error with the same message."""
    rng = random.Random(1313)
    seeds = _seeds()
    unusual = _usual_headers(seeds)
    for i, data in enumerate(unusual):
        n = int.from_bytes(data[:8], "little")
        assert (
            _format._usual_layout(data[8 : 8 + n].decode(), 8 + n, len(data), ct.Limits()) is None
        )
        if i % 3 == 2:
            with pytest.raises(ct.FormatError, match="duplicate key '__metadata__'"):
                ct.deserialize(data)
        else:
            ct.deserialize(data)
    files = seeds + unusual + [_mutate(rng.choice(seeds), rng) for _ in range(20_000)]
    fast_layouts = column_layouts = 0
    for data in files:
        if len(data) < 8:
            continue
        n = int.from_bytes(data[:8], "little")
        if n > len(data) - 8:
            continue
        raw = data[8 : 8 + n]
        got = _result(lambda raw=raw, data=data: _format.parse_header(raw, len(data), ct.Limits()))
        assert got == _result(lambda raw=raw, data=data: _strict_header(raw, len(data)))
        if isinstance(got, tuple) or _format.TREE_KEY not in got.metadata:
            continue
        try:
            fast = _format._usual_layout(raw.decode(), 8 + n, len(data), ct.Limits())
        except UnicodeDecodeError:
            fast = None
        fast_layouts += fast is not None
        column = _format._column_layout(raw.decode(), 8 + n, len(data), ct.Limits())
        if column is not None:  # the columns agree with the entries read one by one
            assert column == fast
            column_layouts += 1
        tree = got.metadata[_format.TREE_KEY]
        records = _result(lambda tree=tree: _decode.parse_records(tree, ct.Limits()))

        def strict(tree: str = tree) -> Any:
            raw_records = _format.strict_json(tree, "the tree")
            if type(raw_records) is not list or not raw_records:
                return _decode.parse_records(tree, ct.Limits())  # the same checks first
            return _decode._records_strict(raw_records)

        assert repr(records) == repr(_result(strict))  # repr: nan != nan
    assert fast_layouts > 5_000  # the fast path does run
    assert column_layouts > 1_000  # and the columnar one


# --- hypothesis: random container classes and trees round-trip -----------------------

_scalars = st.one_of(
    st.integers(min_value=-(2**100), max_value=2**100),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.binary(max_size=5),
    st.booleans(),
    st.complex_numbers(allow_nan=False),
)
_dtypes = st.sampled_from(["f4", "f8", "i1", "u2", "i8", "?", "c8", "f2"])


@st.composite
def _arrays(draw: Any) -> np.ndarray:
    dtype = draw(_dtypes)
    shape = draw(st.lists(st.integers(0, 3), max_size=3))
    a = np.arange(int(np.prod(shape)) if shape else 1).astype(dtype).reshape(shape)
    if draw(st.booleans()) and a.ndim:
        a = a[::-1]
    return a


_CLASSES: dict[tuple[int, bool], type] = {}


def _container_class(n: int, frozen: bool) -> type:
    """A declared container with n children and one kept field, made once per shape."""
    key = (n, frozen)
    if key not in _CLASSES:
        fields = {f"f{i}": Any for i in range(n)}
        cls = type(
            f"Gen{n}{'F' if frozen else 'M'}",
            (),
            {"__annotations__": {**fields, "tag": str}, "tag": "t"},
        )
        _CLASSES[key] = ct.container(
            children=list(fields), keep=["tag"], frozen=frozen, name=f"tests.fuzz.Gen{n}{frozen}"
        )(cls)
    return _CLASSES[key]


def _node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(-5, 5)), children, max_size=3),
        st.tuples(
            st.integers(0, 3),
            st.booleans(),
            st.lists(children, min_size=3, max_size=3),
            st.text(max_size=3),
        ).map(lambda t: _container_class(t[0], t[1])(*t[2][: t[0]], tag=t[3])),
        st.just(None),
    )


_trees = st.recursive(st.one_of(_scalars, _arrays()), _node, max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_trees)
def test_random_trees_round_trip(tree):
    """Random container classes, builtins, scalars and arrays round-trip; safetensors agrees."""
    data = ct.serialize(tree)
    out = ct.deserialize(data)
    assert ct.structure(out) == ct.structure(tree)
    oracle = safetensors.numpy.load(data)  # the reference reader agrees on every array
    arrays = {ct.keystr(p): a for p, a in ct.leaves_with_path(tree) if isinstance(a, np.ndarray)}
    assert set(oracle) <= set(arrays)
    assert len(oracle) == len({id(a) for a in arrays.values()})  # one tensor per array
    for name, a in oracle.items():
        assert np.array_equal(a, arrays[name]) and a.dtype == arrays[name].dtype
    for a, b in zip(ct.leaves(tree), ct.leaves(out)):
        assert type(a) is type(b)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
        else:
            assert a == b or (isinstance(a, float) and np.isnan(a) and np.isnan(b))


# --- memory: a tiny file claiming a huge tensor allocates nothing ----------------------


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")
def test_huge_claims_fail_under_a_memory_cap(tmp_path):
    """Under RLIMIT_AS (256 MB above the interpreter's use), tiny files claiming a TB fail cleanly."""
    tb = tmp_path / "tb.safetensors"
    header = (
        b'{"__metadata__":{"containers.format":"1","containers.tree":"[[\\"A\\",\\"w\\",\\"00000000\\"]]"},'
        b'"w":{"dtype":"F32","shape":[274877906944],"data_offsets":[0,1099511627776]}}'
    )
    tb.write_bytes(len(header).to_bytes(8, "little") + header + b"\x00" * 12)
    claim = tmp_path / "claim.safetensors"  # a header longer than the file
    claim.write_bytes((2**40).to_bytes(8, "little") + b"{}")
    over = tmp_path / "over.safetensors"  # a header within the file, past the limit
    with open(over, "wb") as f:
        f.write((10**8 + 1).to_bytes(8, "little") + b"{")
        f.truncate(8 + 10**8 + 1)  # sparse
    script = textwrap.dedent(
        f"""
        import resource, sys
        import containers as ct
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        cap = used + 256 * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        for path in ({str(tb)!r}, {str(claim)!r}, {str(over)!r}):
            for fn in (ct.load, lambda p: ct.load(p, mmap=True), ct.inspect,
                       lambda p: ct.deserialize(open(p, "rb").read())):
                try:
                    fn(path)
                except ct.SerializationError as err:
                    print(type(err).__name__)
                else:
                    print("loaded")
        """
    )
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["FormatError"] * 8 + ["LimitError"] * 4


# --- the input classes of the second hostile review (issue 28) --------------------------

_JSON_JUNK: list[Any] = [["F32"], {"a": 1}, 1, -1, 1.5, True, None, "x", [[[]]], {"": {"": []}}]


def _header_field_variants(data: bytes) -> list[bytes]:
    """Each header field of a valid file (dtype, shape, a dimension, data_offsets, an
    offset, an entry, __metadata__, a metadata value, the tree) replaced by each JSON
    type, and junk added as an unknown entry field."""
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    rest = data[8 + n :]
    name = next(k for k in header if k != "__metadata__")
    out = []

    def frame(h: Any) -> bytes:
        body = json.dumps(h).encode()
        return len(body).to_bytes(8, "little") + body + rest

    for junk in _JSON_JUNK:
        for path in (
            ("dtype",),
            ("shape",),
            ("shape", 0),
            ("data_offsets",),
            ("data_offsets", 0),
            ("data_offsets", 1),
            ("junk",),
        ):
            h = json.loads(json.dumps(header))
            target = h[name]
            for key in path[:-1]:
                target = target[key]
            if isinstance(target, list) and not target:
                continue
            target[path[-1]] = junk
            out.append(frame(h))
        for key in ("containers.tree", "containers.format", "other"):
            h = json.loads(json.dumps(header))
            h["__metadata__"][key] = junk
            out.append(frame(h))
        out.append(frame({**header, "__metadata__": junk}))
        out.append(frame({**header, name: junk}))
    return out


def _big_hostile_files() -> dict[str, bytes]:
    """Files of about 300 KB of each new input class: nested junk in unknown fields and
    in the tree, empty records, colliding keys, alias DAGs."""
    n = 40_000

    def tree_file(records: Any, entries: dict[str, Any] | None = None, data: bytes = b"") -> bytes:
        h = {"__metadata__": {"containers.format": "1", "containers.tree": json.dumps(records)}}
        h.update(entries or {})
        body = json.dumps(h, separators=(",", ":")).encode()
        return len(body).to_bytes(8, "little") + body + data

    good = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    a = [["A", "w", "00000000"]]
    keys = [{"i": format(k * (2**61 - 1), "x")} for k in range(1, n // 2)]
    dag = [["L", 2] for _ in range(200)] + [["L", 1], ["S", 1]]
    dag += [["@", i + 1] for i in reversed(range(200))]
    return {
        "junk in an unknown field": tree_file(a, {"w": {**good, "x": [[[]]] * n}}, b"\0" * 4),
        "junk in a dimension": tree_file(a, {"w": {**good, "shape": [[[]]] * n}}, b"\0" * 4),
        "empty records": tree_file(a, {"w": good, **{f"{i}": {} for i in range(n)}}, b"\0" * 4),
        "empty arrays": tree_file(a, {"w": good, **{f"{i}": [] for i in range(n)}}, b"\0" * 4),
        "short strings": tree_file(a, {"w": {**good, "dtype": ["ab"] * n}}, b"\0" * 4),
        "junk tree records": tree_file([[]] * n),
        "nested tree records": tree_file([["L", 1], [[[[]]]] * n]),
        "colliding keys": tree_file([["D", keys]] + [["S", 0]] * len(keys)),
        "alias DAG": tree_file(dag),
    }


def _call(fn: Any) -> tuple[str, float, int]:
    """fn's outcome (an error class or 'ok'), its time (a run of its own: tracemalloc
    slows allocation down) and its peak traced memory."""

    def run() -> str:
        try:
            fn()
        except ct.SerializationError as err:
            return type(err).__name__
        except IsADirectoryError:
            return "IsADirectoryError"
        return "ok"

    start = time.perf_counter()
    outcome = run()
    elapsed = time.perf_counter() - start
    tracemalloc.start()
    try:
        assert run() == outcome
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return outcome, elapsed, peak


def test_new_hostile_input_classes_raise_only_serialization_errors_in_bounded_time_and_memory(
    tmp_path,
):
    """Non-string and non-expected JSON types in every header field, nested junk in
    unknown fields and the tree, empty records, colliding keys, alias DAGs and files
    that are not regular: every reader (load, load(mmap=True), deserialize, inspect,
    diff) raises only SerializationError, each call within 2 s and 10x the file's size
    in memory (plus 1 MB for the interpreter's small objects)."""
    path = tmp_path / "f.safetensors"
    files = [("field", d) for s in _seeds() for d in _header_field_variants(s)]
    files += list(_big_hostile_files().items())
    outcomes: Counter[str] = Counter()
    for what, data in files:
        path.write_bytes(data)
        for fn in (
            lambda: ct.load(path),
            lambda: ct.load(path, mmap=True),
            lambda data=data: ct.deserialize(data),
            lambda: ct.inspect(path),
            lambda: _diff.diff_files(path, path),
        ):
            outcome, elapsed, peak = _call(fn)
            outcomes[outcome] += 1
            assert elapsed < 2, (what, elapsed)
            assert peak < 10 * len(data) + 2**20, (what, peak / len(data))
    assert outcomes["ok"] < sum(outcomes.values()) // 10
    special = tmp_path / "special"
    special.mkdir()
    fifo = special / "pipe.safetensors"
    os.mkfifo(fifo)
    for target in (fifo, special):
        for fn in (lambda t=target: ct.load(t), lambda t=target: ct.inspect(t)):
            outcome, elapsed, _ = _call(fn)
            assert outcome in ("FormatError", "IsADirectoryError") and elapsed < 2


def test_read_groups_agree_with_their_plain_twin():
    """``_format._groups`` (a binary search per range) cuts the tensors of a file into
    the same read ranges as ``_groups_plain`` (a step per tensor), big and empty
    tensors and runs of small ones included."""
    rng = random.Random(7)
    own = _format._OWN
    for _ in range(2_000):
        pos, tensors = 0, []
        for i in range(rng.choice([0, 1, 63, 64, 65, 300, 2_000])):
            k = rng.choice([0, 16, 1_000, own // 3, own - 1, own, own + 5, 3 * own])
            tensors.append(_format.Tensor(pos, pos + k, str(i), "U8", (k,), np.dtype("u1")))
            pos += k
        assert list(_format._groups(tensors)) == list(_format._groups_plain(tensors))


def test_many_small_tensors_take_the_columnar_path():
    """A file of many small tensors (the benchmark's "many" tree, smaller) is parsed by
    the columnar fast path into the layout the plain checks build, and loads."""
    tree = {
        f"g{i}": {f"a{j}": np.full(4, i + j, np.float32) for j in range(50)} for i in range(40)
    }
    tree["s"] = {f"s{i}": i / 7 for i in range(100)}
    data = ct.serialize(tree)
    n = int.from_bytes(data[:8], "little")
    raw = data[8 : 8 + n]
    column = _format._column_layout(raw.decode(), 8 + n, len(data), ct.Limits())
    assert column is not None
    assert column == _strict_header(raw, len(data))
    back = ct.deserialize(data)
    assert back["s"] == tree["s"]
    assert all(np.array_equal(back[g][a], tree[g][a]) for g in tree if g != "s" for a in tree[g])


def test_mutated_index_files_of_the_sharded_corpus_read_nothing_outside(tmp_path):
    """3,600 mutations of the indexes of the sharded corpus (tests/corpus/sharded/, a
    valid checkpoint among them) by bytes and by weight_map entry: every load (whole,
    lazy, partial) and inspect succeeds or raises SerializationError, and none returns
    the tensor of the valid file placed beside the checkpoint (nothing outside read)."""
    import shutil

    corpus = os.path.join(os.path.dirname(__file__), "corpus", "sharded")
    index = "model.safetensors.index.json"
    shutil.copy(os.path.join(corpus, "outside.safetensors"), tmp_path / "outside.safetensors")
    seeds = sorted(d for d in os.listdir(corpus) if os.path.isdir(os.path.join(corpus, d)))
    valid = tmp_path / "valid"
    ct.save(valid, {"a": np.zeros(4, np.float32), "b": np.ones(4, np.float32)}, max_shard_size=16)
    rng = random.Random(33)
    names = [b"../outside.safetensors", b"/etc/passwd", b"..", b".", b"", b"a/b", b"\x00"]
    alphabet = b'{}[]",:./\\ 0123456789-aez\x00'
    for seed in [None, *seeds]:
        work = tmp_path / "work"
        shutil.rmtree(work, ignore_errors=True)
        if seed is None:
            shutil.copytree(valid, work)
        else:
            shutil.copytree(os.path.join(corpus, seed), work, symlinks=True)
        if not (work / index).is_file() or (work / index).is_symlink():
            continue
        original = (work / index).read_bytes()
        for _ in range(190):
            data = bytearray(original)
            if rng.random() < 0.3 and b".safetensors" in data:
                at = data.find(b'"model-0')
                if at >= 0:  # a shard name in the weight_map, replaced by a hostile one
                    end = data.index(b'"', at + 1)
                    data[at + 1 : end] = rng.choice(names)
            else:
                for _ in range(rng.randint(1, 4)):
                    i = rng.randrange(len(data))
                    if rng.random() < 0.5:
                        data[i] = rng.choice(alphabet)
                    else:
                        del data[i]
            (work / index).write_bytes(bytes(data))
            for call in (
                lambda work=work: ct.load(work),
                lambda work=work: ct.materialize(ct.load(work / index, lazy=True)),
                lambda work=work: ct.inspect(work),
            ):
                try:
                    out = call()
                except ct.SerializationError:
                    continue
                if isinstance(out, dict):
                    for v in ct.leaves(out):
                        assert not (np.asarray(v) == 6).any(), "read outside the directory"


# --- containers._scan (the header and tree parsed in C) against its plain twins ---------


def _plain_seeds() -> list[bytes]:
    """Valid files of the trees ``_scan`` reads whole (dicts, lists, tuples, None,
    arrays, plain scalars), with shared arrays and shared nodes, and class records."""
    a = np.arange(4, dtype=np.float32)
    inner = {"x": a, "y": [1, 2]}
    trees = [
        {"a": a, "b": a, "c": [1, 2.5, "x\n", None, True, -0.0, 2**50], "d": (), "e": {}},
        [inner, inner, (None, [np.zeros((2, 0), np.int8)], np.ones((2, 3), np.float64))],
        {f"k{i}": {f"a{j}": np.full(3, i + j, np.int32) for j in range(5)} for i in range(4)},
        np.arange(3, dtype=np.uint16),
        7,
        [Layer(a, np.zeros(2), "l", (1,)), {"s": [a, a]}],
        {"deep": [[[[[[a]]]]]], "n": None, "t": (1.5, 'q\\"', [])},
        {"\u00e9": a},  # a key outside ASCII: left to the Python tiers
        # classes at today's fields with scalar kept values: in the Structure's records
        [
            Layer(a, [np.zeros(2), None], "l", None),
            {"s": Layer(1, a, "m", 3)},
            Layer(a, a, "n", -0.0),
        ],
    ]
    return [ct.serialize(t, metadata={"note": 'a "b"\t'}) for t in trees]


def _outcome(fn: Any) -> Any:
    """What ``fn()`` gives, comparable across runs: the tree's repr and which of its
    leaves are one object, or the error's class and message."""
    try:
        tree = fn()
    except ct.SerializationError as err:
        return (type(err).__name__, str(err))
    leaves = ct.leaves(tree)
    first: dict[int, int] = {}
    return repr(tree), [first.setdefault(id(x), i) for i, x in enumerate(leaves)]


def _scan_check(data: bytes) -> tuple[bool, bool, bool]:
    """Hold each part of ``_scan`` to its plain twin on one file; say which ran."""
    limits = ct.Limits()
    if len(data) < 8 or int.from_bytes(data[:8], "little") > len(data) - 8:
        return False, False, False
    n = int.from_bytes(data[:8], "little")
    try:
        text = data[8 : 8 + n].decode()
    except UnicodeDecodeError:
        return False, False, False
    span = _result(lambda: _layout_fast._tree_span(text))
    scan = _layout_fast._scan
    try:
        _layout_fast._scan = None
        assert span == _result(lambda: _layout_fast._tree_span(text))
    finally:
        _layout_fast._scan = scan
    scanned = _layout_fast._scanned_layout(text, 8 + n, len(data), limits)
    if scanned is not None:  # a subset of what the columnar path reads, the same layout
        assert scanned == _layout_fast._column_layout(text, 8 + n, len(data), limits)
    if scan is not None and text.isascii():  # ASCII bytes are read as their str
        raw = data[8 : 8 + n]
        assert scan.tree_span(raw) == scan.tree_span(text)
        assert scan.counts(raw, 3, n // 2) == scan.counts(text, 3, n // 2)
    # the same scan of the header's bytes, before any str is made: the same layout
    from_bytes = _layout_fast._scanned_ascii(data[8 : 8 + n], 8 + n, len(data), limits)
    assert from_bytes is None or from_bytes == scanned
    assert (from_bytes is None) == (
        scanned is None
        or not _strictjson.counts_fit(
            text, _strictjson.PARSE_FACTOR * n, _layout_fast._tree_span(text)
        )
    )
    try:
        layout = _format.parse_header(data[8 : 8 + n], len(data), limits)
    except ct.SerializationError:
        return scanned is not None, False, False
    tree = layout.metadata.get(_format.TREE_KEY)
    if type(tree) is not str:
        return scanned is not None, False, False
    records = _recparse._scanned_records(tree, limits)
    if records is None:
        return scanned is not None, False, False
    items = itertools.chain.from_iterable(_strictjson.json_array_chunks(tree, "the tree"))
    plain = _recparse._records_usual(items, limits)
    assert plain is not None
    assert repr(records[:4]) == repr(plain[:4])  # repr: -0.0 and 0.0, types
    known = _recparse._scanned_records(tree, limits, False, layout.tensors)
    assert known is not None and repr(known[:4]) == repr(plain[:4])  # the layout's names
    if records.columns is None:
        return scanned is not None, True, False
    arrays = _format.read_arrays(io.BytesIO(data), layout, None)
    got = _outcome(lambda: _decode.build(records, arrays, limits))
    assert got == _outcome(lambda: _decode.build(records._replace(columns=None), arrays, limits))
    return scanned is not None, True, True


@pytest.mark.skipif(_layout_fast._scan is None, reason="containers._scan is not built")
def test_scan_agrees_with_its_plain_twins():
    """containers._scan gives what its plain twins give, on valid files and 20,000
    mutations: the header's layout (_column_layout), the tree span bound_json skips
    (_tree_span), the records (_records_usual) and the tree rebuilt from the Structure
    records it makes (_decode.build record by record: the same values, the same shared
    objects, or the same error)."""
    rng = random.Random(4242)
    seeds = _plain_seeds() + _seeds()
    counts = Counter()
    # which parts read each plain seed whole: not an empty tensor (1) or a file of no
    # tensor (4) in the header, nor a key outside ASCII (7: its escapes); not a shared
    # node (1) or a class record with a kept tuple (5) in the rebuild
    ran = [(1, 1, 1), (0, 1, 0), (1, 1, 1), (1, 1, 1), (0, 1, 1), (1, 1, 0), (1, 1, 1), (0, 0, 0)]
    ran += [(1, 1, 1)]  # 8: classes with scalar kept values, rebuilt from the columns
    for i, data in enumerate(_plain_seeds()):
        assert _scan_check(data) == tuple(map(bool, ran[i])), i
    for data in seeds + [_mutate(rng.choice(seeds), rng) for _ in range(20_000)]:
        counts.update(k for k, ran in zip("hrb", _scan_check(data)) if ran)
    assert counts["h"] > 1_000 and counts["r"] > 1_000 and counts["b"] > 500, counts


#: Values of every JSON type, for a header field: what a hostile writer may put there.
_FIELD_VALUES = [
    None,
    True,
    0,
    -1,
    2**63,
    2**64,
    1.5,
    -0.0,
    "F32",
    "",
    "x" * 300,
    [],
    [4],
    [[4]],
    ["4"],
    [1.5],
    [-1],
    [0, 2**62],
    {},
    {"a": 1},
]


def _field_mutant(data: bytes, rng: random.Random) -> bytes:
    """One field of one header entry (a tensor's dtype, shape or data_offsets, or a
    metadata value) given a value of another JSON type, the header written back as
    containers writes it (no whitespace), so the C scanner reads it and must agree."""
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    names = list(header)
    name = rng.choice(names)
    if name == "__metadata__":
        key = rng.choice(list(header[name]))
        header[name][key] = rng.choice(_FIELD_VALUES)
    else:
        header[name][rng.choice(["dtype", "shape", "data_offsets"])] = rng.choice(_FIELD_VALUES)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + n :]


@pytest.mark.skipif(_layout_fast._scan is None, reason="containers._scan is not built")
def test_scan_agrees_with_its_plain_twins_on_fields_of_every_type():
    """Each header field given a value of every JSON type (null, bools, negative and
    huge ints, floats, strings, nested lists, objects): containers._scan agrees with
    its plain twins on all of them (the same layout and records, or the same error)."""
    rng = random.Random(7)
    seeds = _plain_seeds()[:4] + _seeds()[:4]
    ran = Counter()
    for _ in range(3_000):
        ran.update(
            k for k, r in zip("hrb", _scan_check(_field_mutant(rng.choice(seeds), rng))) if r
        )
    assert ran["h"] > 100, ran  # the C header scanner read many of them


@pytest.mark.skipif(_layout_fast._scan is None, reason="containers._scan is not built")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(st.one_of(_scalars, _arrays()), _node, max_leaves=12), st.randoms())
def test_scan_agrees_on_random_trees(tree, rnd):
    """On random trees (shared subtrees included) and mutations of their files, the
    C parse of header and tree and the rebuild from its Structure records agree with
    the plain twins."""
    data = ct.serialize([tree, tree, ct.leaves(tree)])
    _scan_check(data)
    for _ in range(5):
        _scan_check(_mutate(data, random.Random(rnd.random())))
