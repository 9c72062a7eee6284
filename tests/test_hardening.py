"""Hardening round 2 (issue 28): one regression test per defect of the second hostile
review of files, keys, aliases and messages, each run on both engines (the suite runs
once normally and once with CONTAINERS_PURE_PYTHON=1)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import gc
import json
import math
import os
import shutil
import stat
import struct
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import containers as ct
from containers._serialize._diff import diff_files

F32 = struct.pack("<f", 1.5)


def _crc(data: bytes) -> str:
    return f"{zlib.crc32(data):08x}"


_TREE_META = object()


def _file(
    records: Any, tensors: dict[str, Any] | None = None, data: bytes = b"", meta: Any = _TREE_META
) -> bytes:
    """A file built by hand: ``tensors`` maps names to raw entries (any JSON), ``meta``
    the __metadata__ (by default the format and ``records`` as the tree)."""
    header: dict[str, Any] = {
        "__metadata__": {"containers.format": "1", "containers.tree": json.dumps(records)}
        if meta is _TREE_META
        else meta
    }
    header.update(tensors or {})
    body = json.dumps(header, separators=(",", ":")).encode()
    return len(body).to_bytes(8, "little") + body + data


def _readers(path: Any) -> list[Any]:
    """Every way of reading a file: load, load(mmap=True), deserialize, inspect."""
    return [
        lambda: ct.load(path),
        lambda: ct.load(path, mmap=True),
        lambda: ct.deserialize(path.read_bytes()),
        lambda: ct.inspect(path),
    ]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "containers", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# --- 1. every header field of any JSON type is a FormatError --------------------------

_JUNK = [["F32"], {"a": 1}, 1, 1.5, True, None, "x", [[[]]], {"": {"": []}}]


def _entry_variants() -> list[tuple[str, dict[str, Any]]]:
    good = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    out = []
    for junk in _JUNK:
        for field in good:
            out.append((f"{field}={junk!r}", {**good, field: junk}))
        out.append((f"shape[0]={junk!r}", {**good, "shape": [junk]}))
        out.append((f"offsets[0]={junk!r}", {**good, "data_offsets": [junk, 4]}))
        out.append((f"offsets[1]={junk!r}", {**good, "data_offsets": [0, junk]}))
    return out


@pytest.mark.parametrize(("what", "entry"), _entry_variants())
def test_a_header_field_of_any_json_type_is_a_format_error(tmp_path, what, entry):
    """A dtype, shape, dimension or offset of any JSON type (list and object included,
    which used to escape as 'unhashable type') is a FormatError on every reader."""
    path = tmp_path / "f.safetensors"
    path.write_bytes(_file([["A", "w", _crc(F32)]], {"w": entry}, F32))
    for read in _readers(path):
        try:
            read()
        except ct.FormatError:
            continue
        if entry["dtype"] == "F32" and entry["shape"] == [1]:
            continue  # e.g. offsets still valid
        raise AssertionError(f"{what} was accepted")


@pytest.mark.parametrize("meta", [[], 1, "x", None, {"k": []}, {"k": {"a": 1}}, {"k": 1}])
def test_metadata_of_any_json_type_is_a_format_error(tmp_path, meta):
    """__metadata__ that is not an object of strings is a FormatError on every reader."""
    path = tmp_path / "f.safetensors"
    path.write_bytes(_file(None, meta=meta))
    for read in _readers(path):
        with pytest.raises(ct.FormatError, match="__metadata__ must map strings to strings"):
            read()


def test_cli_reports_a_list_dtype_in_one_line_and_exits_2(tmp_path):
    """containers inspect and diff exit 2 (an error, not 'files differ') with one line."""
    path = tmp_path / "f.safetensors"
    path.write_bytes(
        _file(
            [["A", "w", _crc(F32)]],
            {"w": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}},
            F32,
        )
    )
    out = _cli("inspect", str(path))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "unsupported dtype ['F32']" in out.stderr
    out = _cli("diff", str(path), str(path))
    assert out.returncode == 2, out.stderr


# --- 2. memory is bounded by the header's size ---------------------------------------


def _peak(fn: Any) -> int:
    tracemalloc.start()
    try:
        with contextlib.suppress(ct.SerializationError):
            fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _junk_headers() -> dict[str, bytes]:
    tree = [["A", "w", _crc(F32)]]
    good = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    n = 60_000
    return {
        "nested arrays in an unknown field": _file(tree, {"w": {**good, "x": [[[]]] * n}}, F32),
        "empty records": _file(tree, {"w": good, **{f"{i}": {} for i in range(n)}}, F32),
        "empty arrays": _file(tree, {"w": good, **{f"{i}": [] for i in range(n)}}, F32),
        "short strings in a shape": _file(tree, {"w": {**good, "shape": ["ab"] * n}}, F32),
        "nested junk in metadata": _file(
            None,
            {"w": good},
            F32,
            meta={"containers.format": "1", "containers.tree": "[]", "x": [[]] * n},
        ),
        "empty lists as tree records": _file([[]] * n, {}),
        "nested junk as a tree record": _file([["L", 1], [[[[]]]] * n], {}),
    }


@pytest.mark.parametrize("name", sorted(_junk_headers()))
def test_junk_headers_cost_memory_of_the_order_of_the_file(tmp_path, name):
    """Headers of tiny junk (nested arrays, empty records, short strings) are refused
    using at most 10x their size in memory, on every reader."""
    data = _junk_headers()[name]
    path = tmp_path / "f.safetensors"
    path.write_bytes(data)
    for read in _readers(path):
        peak = _peak(read)
        assert peak < 10 * len(data), (name, peak / len(data))


_TINY_TREES: dict[str, Any] = {
    "Nones": lambda n: [None] * n,
    "empty lists": lambda n: [[] for _ in range(n)],
    "empty dicts": lambda n: [{} for _ in range(n)],
    "zeros": lambda n: [0] * n,
    "ints": lambda n: list(range(n)),
    "floats": lambda n: [0.5] * n,
    "a dict of ints": lambda n: {str(i): i for i in range(n)},
    "1-tuples": lambda n: [(i,) for i in range(n)],
}


@pytest.mark.parametrize("name", sorted(_TINY_TREES))
def test_trees_of_tiny_records_parse_in_memory_of_the_order_of_the_file(tmp_path, name):
    """Loading or inspecting a valid tree of 100,000 tiny records (Nones, empty lists,
    zeros...) costs at most 10x the file in memory beyond what it returns (the parsed
    records are not all held at once, nor an entry per node)."""
    path = tmp_path / "f.safetensors"
    ct.save(path, _TINY_TREES[name](100_000))
    size = path.stat().st_size
    for read in [*_readers(path), lambda: ct.load(path, lazy=True)]:
        gc.collect()
        tracemalloc.start()
        try:
            out = read()
            kept, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        del out
        assert peak - kept < 10 * size, (name, (peak - kept) / size)


# --- 3. colliding dict keys -----------------------------------------------------------


def _colliding(n: int) -> bytes:
    keys = [{"i": format(k * (2**61 - 1), "x")} for k in range(1, n + 1)]
    return _file([["D", keys]] + [["S", 0]] * n, {})


def test_colliding_int_keys_are_refused_in_time_of_the_order_of_the_header(tmp_path):
    """32,000 int keys that all hash alike are a LimitError within a second, not a
    quadratic dict build (10 s before)."""
    path = tmp_path / "f.safetensors"
    path.write_bytes(_colliding(32_000))
    for read in _readers(path):
        start = time.perf_counter()
        with pytest.raises(ct.LimitError, match="dict keys whose hashes collide"):
            read()
        assert time.perf_counter() - start < 1.5


def test_a_few_colliding_keys_still_load():
    """Keys with equal hashes that are legitimate (-1 and -2 hash alike) load."""
    tree = {-1: 1, -2: 2, 2**61 - 1: 3, 0: 4}
    assert ct.deserialize(ct.serialize(tree)) == tree


# --- 4. keys validate their argument ---------------------------------------------------


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: ct.IndexKey("x"), "IndexKey: the index must be an int, got str 'x'"),
        (lambda: ct.IndexKey(1.0), "IndexKey: the index must be an int, got float 1.0"),
        (lambda: ct.AttrKey(3), "AttrKey: the name must be a str, got int 3"),
        (lambda: ct.AttrKey(None), "AttrKey: the name must be a str, got NoneType None"),
        (lambda: ct.DictKey([1]), r"DictKey: the key must be hashable, got list \[1\]"),
    ],
)
def test_keys_refuse_arguments_of_the_wrong_type(make, match):
    """IndexKey takes an int, AttrKey a str, DictKey a hashable value: anything else is
    a TypeError at construction (a file holding it could not be read back)."""
    with pytest.raises(TypeError, match=match):
        make()


def test_keys_accept_what_they_name():
    """numpy integers become int indices; str subclasses and tuples are fine."""
    assert ct.IndexKey(np.int64(3)) == ct.IndexKey(3) and type(ct.IndexKey(np.int64(3)).idx) is int
    assert (
        ct.keystr((ct.AttrKey("w"), ct.IndexKey(-1), ct.DictKey((1, "a")))) == ".w[-1][(1, 'a')]"
    )


class _Pair:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


_KEYS: list[Any] = [ct.AttrKey("odd name"), ct.IndexKey(-(2**70))]
ct.register_node(
    _Pair,
    lambda p: ((p.a, p.b), None),
    lambda aux, ch: _Pair(*ch),
    keys=lambda p: _KEYS,
    name="tests.hardening.Pair",
)


@pytest.mark.parametrize(
    "keys",
    [
        [ct.AttrKey("odd name"), ct.IndexKey(-(2**70))],
        [ct.DictKey((1, "a")), ct.DictKey(b"x")],
        [ct.DictKey(None), ct.DictKey(float("nan"))],
    ],
)
def test_register_node_keys_that_save_load_back(keys):
    """Whatever keys a register_node keys= gives, save writes a file load reads back."""
    _KEYS[:] = keys
    back = ct.deserialize(ct.serialize(_Pair(np.ones(1), 2)))
    assert type(back) is _Pair and back.b == 2


def test_register_node_key_save_cannot_store_is_a_serialization_error():
    """A DictKey save cannot store (a frozenset) is a SerializationError naming the path."""
    _KEYS[:] = [ct.DictKey(frozenset({1})), ct.DictKey(1)]
    with pytest.raises(
        ct.SerializationError, match="a register_node key that is a value of type frozenset"
    ):
        ct.serialize([_Pair(1, 2)])


# --- 5. save refuses a write-protected file, as open(path, "wb") does -----------------


def _nobody() -> int:
    """The uid to drop to when the tests run as root (none is needed otherwise)."""
    import pwd

    return pwd.getpwnam("nobody").pw_uid if os.getuid() == 0 else os.getuid()


@pytest.mark.skipif(not hasattr(os, "setuid"), reason="POSIX users")
def test_save_refuses_a_write_protected_file_as_a_non_root_user(tmp_path):
    """As a non-root user (root's tests drop to nobody in a child), save over a 0o444
    file raises PermissionError as open(path, 'wb') does, and the file is unchanged."""
    import tempfile

    work = tempfile.mkdtemp(prefix="containers-ro-")
    os.chmod(work, 0o777)  # the directory is writable: only the file's mode says no
    path = os.path.join(work, "ro.safetensors")
    with open(path, "wb") as f:
        f.write(b"old")
    os.chmod(path, 0o444)
    script = textwrap.dedent(
        f"""
        import os, sys
        import containers as ct
        if os.getuid() == 0:
            os.setgid({_nobody()}); os.setuid({_nobody()})
        path = {path!r}
        try:
            open(path, "wb")
        except PermissionError as err:
            print("open:", type(err).__name__, err.filename)
        try:
            ct.save(path, {{"w": 1}})
        except PermissionError as err:
            print("save:", type(err).__name__, err.filename)
        else:
            print("save: replaced")
        print(sorted(os.listdir({work!r})))
        """
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
        )
        with open(path, "rb") as f:
            kept = f.read()
    finally:
        shutil.rmtree(work)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"open: PermissionError {path}",
        f"save: PermissionError {path}",
        "['ro.safetensors']",
    ]
    assert kept == b"old"


def test_save_refuses_a_target_that_is_not_a_regular_file(tmp_path):
    """save never replaces a FIFO (or a device) with a regular file."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        ct.save(fifo, {"w": 1})
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


# --- 6. diff compares keys by position and identity, not by their text -----------------


def test_diff_tells_apart_distinct_nan_keys(tmp_path):
    """{nan: 1, nan: 1} and {nan: 2, nan: 1} differ (they diffed as equal)."""
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    ct.save(a, {float("nan"): 1, float("nan"): 1})
    ct.save(b, {float("nan"): 2, float("nan"): 1})
    assert diff_files(a, b) == ["~ [nan]: 1 -> 2"]
    assert diff_files(a, a) == []
    out = _cli("diff", str(a), str(b))
    assert out.returncode == 1, out.stderr


# --- 7. user keys are never compared with == where identity is meant ----------------


def test_dicts_with_keys_that_compare_to_arrays_are_walked():
    """A dict keyed by ('a', 1) and np.float32(2.5) flattens, maps, prints and saves
    (numpy's 'truth value of an array is ambiguous' escaped before)."""
    d = {("a", 1): 1, np.float32(2.5): 2}
    assert sorted(ct.leaves(d)) == [1, 2]
    leaves, s = ct.flatten(d)
    assert s.unflatten(leaves) == d
    assert ct.fmap(lambda x: x * 10, d) == {("a", 1): 10, np.float32(2.5): 20}
    assert "2.5" in ct.pformat(d)
    assert ct.deserialize(ct.serialize(d)) == d


# --- 8. one alias validation for load and inspect --------------------------------------


@pytest.mark.parametrize(
    ("records", "target"),
    [
        ([["L", 2], ["S", 1], ["@", 1]], "a scalar"),
        ([["L", 2], ["T", 0], ["@", 1]], "a tuple"),
        ([["L", 2], ["N"], ["@", 1]], "None"),
        ([["L", 3], ["L", 0], ["@", 1], ["@", 2]], "an alias"),
    ],
)
def test_an_alias_to_a_record_that_cannot_be_shared_is_refused_by_every_reader(
    tmp_path, records, target
):
    """An @ record pointing at a scalar, tuple, None or alias record is a FormatError
    for load, inspect and diff alike (inspect and diff accepted it)."""
    path = tmp_path / "f.safetensors"
    path.write_bytes(_file(records, {}))
    match = f"is an alias to record #\\d, {target} record, which cannot be shared"
    for read in _readers(path):
        with pytest.raises(ct.FormatError, match=match):
            read()
    with pytest.raises(ct.FormatError, match=match):
        diff_files(path, path)


@ct.container(name="tests.hardening.Frozen", frozen=True)
class _Frozen:
    x: int


def test_an_alias_to_a_frozen_container_loads_as_inspect_shows_it(tmp_path):
    """An alias to a finished container record loads (sharing an immutable object is
    harmless) as inspect accepts it."""
    records = [["L", 2], ["C", "tests.hardening.Frozen", 1, ["x"], []], ["S", 1], ["@", 1]]
    path = tmp_path / "f.safetensors"
    path.write_bytes(_file(records, {}))
    out = ct.load(path)
    assert out == [_Frozen(1), _Frozen(1)] and out[0] is out[1]
    assert "same object as [0]" in str(ct.inspect(path))


# --- 9. Python floats are stored bit-exactly ------------------------------------------


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


@pytest.mark.parametrize("bits", [0xFFF8000000000000, 0x7FF8000000000001, 0xFFF0000000000001])
def test_python_nans_keep_their_sign_and_payload(bits):
    """-nan and NaNs with a payload come back with the same bits, as leaves, kept
    values, complex parts and dict keys."""
    x = struct.unpack("<d", struct.pack("<Q", bits))[0]
    back = ct.deserialize(ct.serialize([x, complex(x, x), {x: x}]))
    assert _bits(back[0]) == _bits(x)
    assert _bits(back[1].real) == _bits(x) and _bits(back[1].imag) == _bits(x)
    ((key, value),) = back[2].items()
    assert _bits(key) == _bits(x) and _bits(value) == _bits(x)
    assert math.isnan(back[0])


def test_the_default_nan_keeps_its_short_form():
    """float('nan') is still written {"f": "nan"}; a bits form of a non-NaN is refused."""
    assert b'{\\"f\\":\\"nan\\"}' in ct.serialize([float("nan")])
    data = _file([["S", {"fx": "3ff0000000000000"}]], {})
    with pytest.raises(ct.FormatError, match="is not a scalar"):
        ct.deserialize(data)


# --- 10. alias DAGs ---------------------------------------------------------------------


def _dag_file(levels: int) -> bytes:
    """``levels`` nested lists, each holding the next one twice (the second time through
    an alias), around a list holding 1."""
    records: list[Any] = [["L", 2] for _ in range(levels)] + [["L", 1], ["S", 1]]
    records += [["@", i + 1] for i in reversed(range(levels))]
    return _file(records, {})


def test_an_alias_dag_whose_expansion_passes_max_nodes_is_refused_in_linear_time(tmp_path):
    """A 1 KB file of 60 lists each holding the next twice expands to 2**61 nodes: a
    LimitError at once, from every reader."""
    path = tmp_path / "dag.safetensors"
    path.write_bytes(_dag_file(60))
    for read in _readers(path):
        start = time.perf_counter()
        with pytest.raises(ct.LimitError, match="expands to more than max_nodes="):
            read()
        assert time.perf_counter() - start < 1


def test_an_alias_dag_within_max_nodes_loads_shared():
    """A DAG whose expansion fits max_nodes loads, sharing intact."""
    out = ct.deserialize(_dag_file(10))
    assert out[0] is out[1] and out[0][0] is out[0][1]
    with pytest.raises(ct.LimitError, match="expands to more than max_nodes=1000"):
        ct.deserialize(_dag_file(10), limits=ct.Limits(max_nodes=1000))


def test_saving_a_dag_of_shared_lists_takes_time_linear_in_distinct_objects():
    """serialize of 60 nested lists each holding the next twice writes aliases in
    linear time (it doubled per level); loading it is refused by max_nodes, and a
    smaller DAG comes back with its sharing."""
    x: Any = [1]
    for _ in range(60):
        x = [x, x]
    start = time.perf_counter()
    data = ct.serialize(x)
    assert time.perf_counter() - start < 1 and len(data) < 4096
    with pytest.raises(ct.LimitError, match="expands to more than max_nodes="):
        ct.deserialize(data)
    back = ct.deserialize(
        ct.serialize(
            x[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][
                0
            ][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]
        )
    )
    assert back[0] is back[1] and back[0][0] is back[0][1]


# --- 11. only regular files are read ---------------------------------------------------


def test_load_inspect_and_diff_refuse_a_fifo_at_once(tmp_path):
    """A FIFO is refused before it is opened for reading (load blocked forever)."""
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    result: list[Any] = []

    def run() -> None:
        for fn in (
            lambda: ct.load(fifo),
            lambda: ct.load(fifo, mmap=True),
            lambda: ct.inspect(fifo),
            lambda: diff_files(fifo, fifo),
        ):
            try:
                fn()
            except ct.FormatError as err:
                result.append(str(err))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():  # unblock the reader, so the test process can exit
        with open(fifo, "wb"):
            pass
        pytest.fail("a reader blocked on a FIFO")
    assert len(result) == 4
    assert all(str(fifo) in r and "not a regular file (a FIFO)" in r for r in result)
    out = _cli("inspect", str(fifo))
    assert out.returncode == 2 and "not a regular file" in out.stderr


def test_load_of_a_directory_is_an_is_a_directory_error(tmp_path):
    """A directory is refused as open() refuses it."""
    with pytest.raises(IsADirectoryError):
        ct.load(tmp_path)


# --- 12 and issue 30.7. schema messages: grouped, capped, with rename hints -----------


def test_identical_problems_are_grouped_with_a_count_and_one_path(tmp_path):
    """A missing renamed= over 9 instances gives one line per problem kind, with the
    count and an example path, and suggests renamed={'w': 'weight'}."""

    @ct.container(name="tests.hardening.Lin")
    class Lin:
        w: np.ndarray

    path = tmp_path / "s.safetensors"
    ct.save(path, [Lin(np.ones(2)) for _ in range(9)])

    @ct.container(name="tests.hardening.Lin")
    class Lin:  # type: ignore[no-redef]
        weight: np.ndarray

    with pytest.raises(ct.SchemaError) as info:
        ct.load(path)
    msg = str(info.value)
    assert msg.count("\n") == 2, msg
    assert (
        "unknown field 'w' in Lin (file version 1, class version 1), 9 times, e.g. at [0]" in msg
    )
    assert (
        "missing field Lin.weight (file version 1, class version 1), 9 times, e.g. at [0]" in msg
    )
    assert "renamed={'w': 'weight'}" in msg
    assert len(info.value.problems) == 18
    assert info.value.problems[0].startswith("unknown field 'w' in Lin")


def test_a_field_filled_from_its_default_next_to_a_look_alike_unknown_one_is_hinted(tmp_path):
    """An unknown array of the dtype and shape of a field filled from its default (the
    optimizer-state trap) suggests renamed=."""

    @ct.container(name="tests.hardening.Adam")
    class Adam:
        m: np.ndarray

    path = tmp_path / "s.safetensors"
    ct.save(path, Adam(np.ones(3, np.float32)))

    @ct.container(name="tests.hardening.Adam")
    class Adam:  # type: ignore[no-redef]
        mu: np.ndarray = ct.field(default_factory=lambda: np.zeros(3, np.float32))

    with pytest.raises(ct.SchemaError, match=r"renamed=\{'m': 'mu'\}"):
        ct.load(path)


def test_a_schema_message_is_capped_and_keeps_every_problem_as_an_attribute(tmp_path):
    """30 distinct problem kinds over 30,000 instances: 20 grouped lines, then 'and N
    more', a message of a few KB; err.problems lists all of them."""
    classes = []
    for i in range(30):
        classes.append(
            ct.container(name=f"tests.hardening.C{i}")(
                type(f"C{i}", (), {"__annotations__": {"a": int}})
            )
        )
    path = tmp_path / "s.safetensors"
    ct.save(path, [classes[i % 30](1) for i in range(30_000)])
    for i in range(30):
        ct.container(name=f"tests.hardening.C{i}")(
            type(f"C{i}", (), {"__annotations__": {"b": int}})
        )
    with pytest.raises(ct.SchemaError) as info:
        ct.load(path)
    msg = str(info.value)
    assert len(msg) < 8_000
    assert msg.count("\n  - ") == 20
    assert msg.rstrip().endswith(
        "and 40 more kinds of problems (60,000 problems in all; the SchemaError's problems attribute lists them)."
    ), msg[-300:]
    assert len(info.value.problems) == 60_000


def test_messages_about_a_file_are_short_whatever_its_names_and_fields(tmp_path):
    """A megabyte tensor name, an entry of 100,000 unknown fields and a megabyte type
    name give messages of a few hundred characters (they held the whole file)."""
    good = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    huge = "w" * 2**20
    cases = [
        _file([["A", huge, _crc(F32)]], {huge: {**good, "x": 1}}, F32),
        _file(
            [["A", "w", _crc(F32)]], {"w": {**good, **{f"k{i}": 1 for i in range(100_000)}}}, F32
        ),
        _file([["C", huge, 1, [], []]], {}),
        _file([["L", 1], ["A", huge, _crc(F32)]], {}),
    ]
    for data in cases:
        with pytest.raises(ct.SerializationError) as info:
            ct.deserialize(data, limits=ct.Limits(max_header_bytes=10**9))
        assert len(str(info.value)) < 1000, str(info.value)[:300]


# --- 13. Structure snapshots mutable kept values ----------------------------------------


@ct.container(keep=["sizes"], name="tests.hardening.Kept")
@dataclass
class _Kept:
    w: Any
    sizes: list[int]


def test_a_structure_is_not_changed_by_mutating_a_kept_list():
    """After the kept list is mutated, a dict keyed by the old Structure still answers
    for [1, 2] and not for [1, 2, 3]; unflatten gives each tree its own copy."""
    tree = _Kept(1, [1, 2])
    s = ct.structure(tree)
    table = {s: "old"}
    tree.sizes.append(3)
    assert table.get(ct.structure(_Kept(0, [1, 2]))) == "old"
    assert ct.structure(tree) not in table
    out = s.unflatten([5])
    assert out.sizes == [1, 2]
    out.sizes.append(9)
    assert s.unflatten([5]).sizes == [1, 2]
    assert table.get(ct.structure(_Kept(0, [1, 2]))) == "old"


def test_a_kept_array_is_snapshotted_and_an_uncopyable_mutable_value_refused():
    """A kept numpy array is copied into the Structure; an unhashable kept value that
    cannot be copied is a StructureError naming the field."""
    tree = _Kept(1, np.array([1, 2]))  # type: ignore[arg-type]
    s = ct.structure(tree)
    tree.sizes[0] = 9
    assert s == ct.structure(_Kept(1, np.array([1, 2])))  # type: ignore[arg-type]

    class Uncopyable:
        __hash__ = None  # type: ignore[assignment]

        def __deepcopy__(self, memo: Any) -> Any:
            raise RuntimeError("no copies")

    with pytest.raises(
        ct.StructureError, match="the kept value 'sizes' of a _Kept is a Uncopyable"
    ):
        ct.structure(_Kept(1, Uncopyable()))  # type: ignore[arg-type]


class _Uncopyable:
    """An unhashable value that refuses to be copied."""

    __hash__ = None  # type: ignore[assignment]

    def __deepcopy__(self, memo: Any) -> Any:
        raise RuntimeError("no copies")


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("kept", [[1, 2], _Uncopyable()], ids=["list", "uncopyable"])
def test_fmap_walks_treelize_and_functor_keep_the_same_kept_object(kept: Any):
    """fmap (one tree and two, serial and on an executor), fmap(walk=...), a treelized
    function and functor's rebuild all give a kept field the same object, copyable or
    not; only a Structure snapshots it."""
    tree = [_Kept(1.0, kept), _Kept(2.0, kept)]

    def double(v: Any, *rest: Any) -> Any:
        return v * 2

    results = [
        ct.fmap(double, tree),
        ct.fmap(double, tree, tree),
        ct.fmap(double, tree, cache=False),
        ct.fmap(double, tree, walk=ct.DefaultWalk()),
        ct.fmap_with_path(lambda p, v: v * 2, tree),
        ct.treelize()(double)(tree),
        ct.treelize()(double)(tree, tree),
    ]
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        results.append(ct.fmap(double, tree, executor=ex))
        results.append(ct.fmap(double, tree, executor=ex, cache=False))
    _, rebuild = ct.functor(tree[0])
    results.append([rebuild({"w": 5.0})])
    for out in results:
        assert [x.sizes for x in out] == [kept] * len(out)
        assert all(x.sizes is kept for x in out)
    if isinstance(kept, list):
        s = ct.structure(tree)
        assert s.unflatten([0.0, 0.0])[0].sizes is not kept


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("shape", ["few", "run", "deep"])
def test_a_structure_snapshots_kept_values_in_runs_and_past_the_fast_depth(shape: str):
    """Flatten's node-by-node walk, its list-of-layers run and its hand-over past the
    recursive walk's depth all snapshot a kept list into the Structure."""
    sizes = [1, 2]
    n = 3 if shape == "few" else 10
    layers: Any = [_Kept(float(i), sizes) for i in range(n)]
    tree = functools.reduce(lambda t, _: [t], range(300), layers) if shape == "deep" else layers
    s = ct.structure(tree)
    sizes.append(3)
    want = [_Kept(0.0, [1, 2]) for _ in range(n)]
    if shape == "deep":
        want = functools.reduce(lambda t, _: [t], range(300), want)
    assert s == ct.structure(want)
    assert s != ct.structure(tree)
