"""serialize/deserialize/save/load round trips (SPEC section 8), with the real
``safetensors`` package as a differential oracle on every file, plus save-side errors,
shared objects, depth, jax/torch leaves and the typed overloads' runtime side."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pickle
import re
from collections import OrderedDict, defaultdict, deque, namedtuple
from typing import Any, NamedTuple

import attr
import ml_dtypes
import numpy as np
import pytest
import safetensors
import safetensors.numpy

import containers as ct

# --- helpers -------------------------------------------------------------------------


def same_leaf(a: Any, b: Any) -> bool:
    """Type-strict leaf equality: arrays by dtype, shape and bits; floats by repr."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return (
            a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == np.ascontiguousarray(b).tobytes()
        )
    if isinstance(a, (float, complex, np.generic)):
        return repr(a) == repr(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()
    return bool(a == b)


def assert_same_tree(a: Any, b: Any) -> None:
    la, sa = ct.flatten(a)
    lb, sb = ct.flatten(b)
    assert sa == sb, (sa, sb)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        expected = (
            np.array(x, dtype=x.dtype.newbyteorder("<"), order="C")
            if isinstance(x, np.ndarray)
            else x
        )
        assert same_leaf(expected, y), (x, y)


def oracle(path: str, tree: Any) -> None:
    """safetensors lists and loads every array of ``tree`` under its keystr path."""
    expected = {}
    for p, leaf in ct.leaves_with_path(tree):
        if isinstance(leaf, np.ndarray):
            expected.setdefault(ct.keystr(p), leaf)
    with safetensors.safe_open(path, framework="numpy") as f:
        names = set(f.keys())
    ids = {}
    for name, leaf in list(expected.items()):  # shared arrays are stored once
        if id(leaf) in ids:
            del expected[name]
        ids.setdefault(id(leaf), name)
    assert names == set(expected)
    if any(a.dtype == ml_dtypes.bfloat16 for a in expected.values()):
        return  # safetensors.numpy has no numpy bfloat16; safe_open listed it above
    loaded = safetensors.numpy.load_file(path)
    for name, a in expected.items():
        assert np.array_equal(loaded[name], a, equal_nan=a.dtype.kind in "fc")
        assert loaded[name].dtype == a.dtype.newbyteorder("=")


def round_trip(tmp_path: Any, tree: Any, **kw: Any) -> Any:
    """Save, check with safetensors, load (plain and mmap) and deserialize; return one."""
    path = os.fspath(tmp_path / "t.safetensors")
    ct.save(path, tree)
    oracle(path, tree)
    out = ct.load(path, **kw)
    assert_same_tree(tree, out)
    assert_same_tree(tree, ct.load(path, mmap=True, **kw))
    assert_same_tree(tree, ct.deserialize(ct.serialize(tree), **kw))
    with open(path, "rb") as f:
        assert f.read() == ct.serialize(tree)
    return out


# --- declared classes ----------------------------------------------------------------


@ct.container(children=["w", "b"], keep=["name"], name="tests.serialize.Linear")
class Linear:
    w: np.ndarray
    b: np.ndarray
    name: str = "linear"
    cache: dict[str, Any] | None = None  # reset


@ct.container(name="tests.serialize.MLP", frozen=False)
class MLP:
    layers: list[Linear]
    head: Linear


@ct.container(name="tests.serialize.Slotted")
@dataclasses.dataclass(frozen=True, slots=True)
class Slotted:
    x: np.ndarray
    tag: str = dataclasses.field(default="s")


@ct.container(children=["v"], name="tests.serialize.AttrsBox")
@attr.define
class AttrsBox:
    v: Any
    meta: tuple[int, ...] = (1, 2)


@ct.container(children=["v"], name="tests.serialize.FrozenAttrs")
@attr.frozen
class FrozenAttrs:
    v: Any
    scale: float = 1.0


@dataclasses.dataclass
class Registered:
    p: Any
    q: Any


ct.register(Registered, name="tests.serialize.Registered")


class Point(NamedTuple):
    x: Any
    y: Any


ct.register(Point, name="tests.serialize.Point")


class Interval:
    def __init__(self, lo: Any, hi: Any, unit: str = "s") -> None:
        self.lo, self.hi, self.unit = lo, hi, unit


ct.register_node(
    Interval,
    lambda x: ((x.lo, x.hi), x.unit),
    lambda unit, ch: Interval(*ch, unit=unit),
    name="tests.serialize.Interval",
)


class Keyed:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


ct.register_node(
    Keyed,
    lambda x: ((x.a, x.b), None),
    lambda aux, ch: Keyed(*ch),
    keys=lambda x: ("a", "b"),
    name="tests.serialize.Keyed",
)


def arr(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    n = int(np.prod(shape))
    return (np.arange(n) % 7 - 3).astype(dtype).reshape(shape)


# --- round trips ---------------------------------------------------------------------


DTYPES = [
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    ml_dtypes.bfloat16,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trips_and_safetensors_agrees(tmp_path, dtype):
    """Each SPEC dtype (bfloat16 via ml_dtypes) round-trips, 0-d and zero-size too."""
    tree = {
        "a": arr(3, 4, dtype=dtype),
        "zero_d": arr(dtype=dtype),
        "empty": arr(0, 3, dtype=dtype),
    }
    out = round_trip(tmp_path, tree)
    assert out["zero_d"].shape == () and out["empty"].shape == (0, 3)
    assert out["a"].flags.writeable and out["a"].flags.c_contiguous


def test_non_contiguous_and_big_endian_arrays_are_stored_in_logical_order(tmp_path):
    """Fortran, strided, negative-stride, broadcast and big-endian arrays are never scrambled."""
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    tree = {
        "fortran": np.asfortranarray(base),
        "strided": base[:, ::2],
        "reversed": base[::-1, ::-1],
        "broadcast": np.broadcast_to(np.arange(3.0), (4, 3)),
        "big_endian": base.astype(">i4"),
        "big_c64": (base + 1j).astype(">c8"),
    }
    out = round_trip(tmp_path, tree)
    for key, value in tree.items():
        assert np.array_equal(out[key], value)
    assert out["big_endian"].dtype == np.dtype("<i4")


def test_python_scalars_keep_their_types(tmp_path):
    """Big ints, nan/inf/-0.0, complex, str, bytes, bool, None and numpy scalars round-trip."""
    tree = [
        2**200,
        -(2**70),
        2**53,
        7,
        True,
        False,
        float("nan"),
        float("inf"),
        float("-inf"),
        -0.0,
        1e-310,
        complex(float("nan"), -0.0),
        "text é \u2603",
        "",
        b"\x00\xffbytes",
        None,
        np.float32(1.5),
        np.int64(-3),
        np.uint8(200),
        np.bool_(True),
        np.float16(0.1),
        np.complex64(1 + 2j),
        ml_dtypes.bfloat16(2.5),
    ]
    out = round_trip(tmp_path, tree)
    assert type(out[0]) is int and out[0] == 2**200
    assert math.copysign(1.0, out[9]) == -1.0
    assert type(out[16]) is np.float32 and type(out[22]) is ml_dtypes.bfloat16


def test_builtin_nodes_round_trip_with_their_types(tmp_path):
    """tuple, list, dict (any scalar or tuple keys), OrderedDict, defaultdict, deque, None."""
    dd = defaultdict(list, {"b": arr(2), "a": [1]})
    tree = {
        "t": (arr(1), (), (None,)),
        "l": [[], [arr(2)], [[]]],
        "keys": {
            7: "int",
            2.5: "float",
            True: "bool",
            None: "none",
            (1, "a"): "tuple",
            b"k": "bytes",
            "s": arr(1),
        },
        "od": OrderedDict([("z", 1), ("a", arr(2)), ("m", 3)]),
        "dd": dd,
        "dq": deque([arr(2), 1], maxlen=5),
        "dq_unbounded": deque([1, 2]),
        "none": None,
        "empty_dict": {},
    }
    out = round_trip(tmp_path, tree)
    assert list(out["od"]) == ["z", "a", "m"]
    assert type(out["dd"]) is defaultdict and out["dd"].default_factory is list
    assert list(out["dd"]) == ["b", "a"]  # insertion order kept
    assert out["dq"].maxlen == 5 and out["dq_unbounded"].maxlen is None
    assert list(out["keys"]) == list(tree["keys"])


def test_declared_registered_and_custom_nodes_round_trip(tmp_path):
    """Dataclass and attrs containers (frozen or not, slots), register and register_node types."""
    tree = MLP(
        [Linear(arr(2, 3), arr(3), "l0", cache={"x": 1}), Linear(arr(3, 1), arr(1), "l1")],
        Linear(arr(1), arr(1)),
    )
    out = round_trip(tmp_path, tree)
    assert type(out) is MLP and out.layers[0].name == "l0" and out.layers[0].cache is None
    others = {
        "slotted": Slotted(arr(2), "tag"),
        "attrs": AttrsBox([arr(1)], meta=(3, (4, "x"))),
        "frozen_attrs": FrozenAttrs(arr(2), scale=0.5),
        "registered": Registered(arr(1), {"k": 2}),
        "point": Point(arr(1), 2.0),
        "interval": Interval(arr(2), 3, unit="ms"),
        "keyed": Keyed(arr(1), arr(2)),
    }
    out = round_trip(tmp_path, others)
    assert out["attrs"].meta == (3, (4, "x")) and out["frozen_attrs"].scale == 0.5
    assert type(out["point"]) is Point and out["interval"].unit == "ms"
    with safetensors.safe_open(os.fspath(tmp_path / "t.safetensors"), "numpy") as f:
        names = set(f.keys())
    assert "['keyed'].b" in names and "['interval'][0]" in names


class Odd:
    def __init__(self, a: Any) -> None:
        self.a = a


ct.register_node(
    Odd,
    lambda x: ((x.a,), None),
    lambda aux, ch: Odd(*ch),
    keys=lambda x: (ct.AttrKey("\udcff"),),
    name="tests.serialize.Odd",
)


def test_lone_surrogates_round_trip_in_a_file_safetensors_reads(tmp_path):
    """Strs, dict keys and attribute keys holding lone surrogates load back exactly."""
    tree = {"w": arr(2), "src": "\udcff", "\ud800": "a\udfffb", "t": ("é\ud83d",)}
    out = round_trip(tmp_path, tree)  # safetensors lists and loads the arrays too
    assert out["src"] == "\udcff" and out["\ud800"] == "a\udfffb" and out["t"] == ("é\ud83d",)
    path = tmp_path / "odd.safetensors"
    ct.save(path, {"odd": Odd(arr(3))})
    assert sorted(safetensors.numpy.load_file(str(path))) == ["['odd'].\\udcff"]
    with safetensors.safe_open(str(path), "numpy") as f:
        assert f.get_tensor("['odd'].\\udcff").tolist() == arr(3).tolist()
    assert ct.load(path)["odd"].a.tolist() == arr(3).tolist()


def test_files_with_lone_surrogates_written_before_still_load(tmp_path):
    """Earlier files held lone surrogates as JSON escapes in the header: they load as before."""
    tree = json.dumps([["D", ["\udcff"]], ["S", "x\udcff"]], ensure_ascii=False)
    meta = {"containers.format": "1", "containers.tree": tree}
    header = json.dumps({"__metadata__": meta}, separators=(",", ":")).encode()
    assert rb"\"x\udcff\"" in header  # a lone surrogate's escape in the header JSON itself
    path = tmp_path / "old.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header)
    assert ct.load(path) == {"\udcff": "x\udcff"}


def test_root_may_be_a_leaf(tmp_path):
    """An array or a scalar alone is a tree too."""
    assert np.array_equal(round_trip(tmp_path, arr(3)), arr(3))
    assert round_trip(tmp_path, "just a string") == "just a string"


def test_shared_arrays_and_mutable_nodes_come_back_shared(tmp_path):
    """A tied array is stored once and loads as one object; so does a shared list."""
    w = arr(4, 4)
    shared_list = [arr(2)]
    layer = Linear(arr(1), arr(1))
    tree = {"enc": w, "dec": w, "x": shared_list, "y": shared_list, "m": MLP([layer], layer)}
    path = os.fspath(tmp_path / "t.safetensors")
    ct.save(path, tree)
    with safetensors.safe_open(path, "numpy") as f:
        names = set(f.keys())
    assert "['dec']" in names and "['enc']" not in names
    for out in (ct.load(path), ct.load(path, mmap=True), ct.deserialize(ct.serialize(tree))):
        assert out["enc"] is out["dec"] and out["x"] is out["y"]
        assert np.array_equal(out["enc"], w)
        assert out["m"].layers[0].w is out["m"].head.w  # frozen Linear: arrays shared


def test_a_cycle_is_a_structure_error_not_an_alias(tmp_path):
    """A list that contains itself is refused as flatten refuses it, naming the function
    (save or serialize) and the path, with no advice to use options save does not take."""
    a: list[Any] = [1]
    a.append(a)
    for op, write in (
        ("serialize", ct.serialize),
        ("save", lambda tree: ct.save(tmp_path / "c.safetensors", tree)),
    ):
        with pytest.raises(
            ct.StructureError,
            match=rf"^{op}: the tree has a reference cycle: the object at \"\['a'\]\[1\]\" "
            r"is the same object as its ancestor at \"\['a'\]\"\. Trees must be acyclic; "
            r"break the cycle, or make the object a leaf",
        ):
            write({"a": a})


def test_depth_100000_saves_and_loads(tmp_path):
    """A list nested 100,000 deep saves and loads without RecursionError."""
    tree: Any = [arr(1)]
    for _ in range(100_000):
        tree = [tree]
    path = tmp_path / "deep.safetensors"
    ct.save(path, tree)
    out = ct.load(path)
    for _ in range(100_000):
        out = out[0]
    assert np.array_equal(out[0], arr(1))
    assert len(ct.inspect(path).rows) == 100_002


@ct.container(name="tests.serialize.Chain")
class Chain:
    nxt: Any


class Link:
    def __init__(self, nxt: Any) -> None:
        self.nxt = nxt


ct.register_node(
    Link, lambda x: ((x.nxt,), None), lambda aux, ch: Link(*ch), name="tests.serialize.Link"
)


@pytest.mark.parametrize("cls", [Chain, Link])
def test_deep_chains_of_classes_load_in_linear_time(tmp_path, cls):
    """A 30,000-deep chain of a declared class or a register_node type saves and loads."""
    # Loading built the path of every node, quadratic in the depth: 4,000 deep took 11 s,
    # so 30,000 would take about 10 minutes. Linear, both cases take about 1 s together
    # (100,000 deep would take 5 s).
    tree: Any = arr(1)
    for _ in range(30_000):
        tree = cls(tree)
    path = tmp_path / "chain.safetensors"
    ct.save(path, tree)
    out = ct.load(path)
    for _ in range(30_000):
        assert type(out) is cls
        out = out.nxt
    assert np.array_equal(out, arr(1))


@ct.container(name="tests.serialize.Ends")
class Ends:
    v: Any


def test_load_errors_deep_in_a_chain_name_the_path(tmp_path):
    """An error under 3 nodes names the full path, under 50 both ends and the depth."""
    for depth, where in [
        (3, r"\.nxt\.nxt\.nxt"),
        (50, r"(\.nxt){12}\.\.\.(\.nxt){12} \(depth 50\)"),
    ]:
        tree: Any = Ends(1)
        for _ in range(depth):
            tree = Chain(tree)
        data = ct.serialize(tree).replace(b"tests.serialize.Ends", b"tests.serialize.Gone")
        with pytest.raises(
            ct.UnknownTypeError,
            match=f"type named 'tests.serialize.Gone' at {where}, but no class is registered",
        ):
            ct.deserialize(data)


def test_jax_and_torch_leaves_are_saved_as_numpy_arrays(tmp_path):
    """jax arrays and torch tensors (bfloat16 too) load back as numpy arrays with their dtype."""
    jnp = pytest.importorskip("jax.numpy")
    torch = pytest.importorskip("torch")
    tree = {
        "jax": jnp.arange(4, dtype=jnp.float32),
        "jax_bf16": jnp.ones(3, dtype=jnp.bfloat16),
        "torch": torch.arange(6, dtype=torch.int32).reshape(2, 3),
        "torch_bf16": torch.ones(2, dtype=torch.bfloat16),
    }
    out = ct.load(_saved(tmp_path, tree))
    assert np.array_equal(out["jax"], np.arange(4, dtype=np.float32))
    assert out["jax_bf16"].dtype == ml_dtypes.bfloat16
    assert out["torch"].dtype == np.int32 and out["torch"].shape == (2, 3)
    assert out["torch_bf16"].dtype == ml_dtypes.bfloat16 and float(out["torch_bf16"][0]) == 1.0


def test_torch_tensors_with_a_conjugate_or_negative_bit_are_saved(tmp_path):
    """x.conj() and x.conj().imag (lazy views torch marks with a bit) save their values."""
    torch = pytest.importorskip("torch")
    x = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    out = ct.load(_saved(tmp_path, {"conj": x.conj(), "neg": x.conj().imag}))
    assert out["conj"].tolist() == [1 - 2j, 3 + 4j] and out["conj"].dtype == np.complex64
    assert out["neg"].tolist() == [-2.0, 4.0] and out["neg"].dtype == np.float32


def test_jax_and_torch_arrays_numpy_cannot_hold_are_refused_with_their_path(tmp_path):
    """A float8 torch tensor of a dtype files have no code for (e4m3fnuz), a sparse
    one, or a jax key array: SerializationError naming the path, as for a numpy array of an unsupported dtype, and no file."""
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    path = tmp_path / "x.safetensors"
    for value, what in [
        (
            torch.ones(2, dtype=torch.float8_e4m3fnuz),
            r"a torch\.Tensor of dtype torch\.float8_e4m3fnuz",
        ),
        (torch.ones(2).to_sparse(), r"a torch\.Tensor of dtype torch\.float32"),
        (jax.random.key(0), r"a jax[\w.]*Array of dtype key<fry>"),
    ]:
        with pytest.raises(
            ct.SerializationError,
            match=rf"save: at \['m'\]\[0\]: {what}, which cannot be converted to a numpy "
            rf"array \(\w+: .+\)\. Convert it to a supported dtype",
        ):
            ct.save(path, {"m": [value]})
        assert not os.listdir(tmp_path)


def test_arrays_mapped_by_np_load_are_saved(tmp_path):
    """np.load(..., mmap_mode="r") gives np.memmap arrays (a subclass that only says
    where the bytes live): they save as plain arrays, shared ones once, slices too."""
    np.save(tmp_path / "w.npy", np.arange(6.0).reshape(2, 3))
    w = np.load(tmp_path / "w.npy", mmap_mode="r")
    assert type(w) is np.memmap and type(w[1:]) is np.memmap
    out = ct.load(_saved(tmp_path, {"w": w, "tied": w, "row": w[1:]}))
    assert type(out["w"]) is np.ndarray and out["w"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert out["tied"] is out["w"] and out["row"].tolist() == [[3, 4, 5]]


def test_bool_views_of_other_bytes_save_as_0_and_1(tmp_path):
    """A bool array viewing bytes other than 0 and 1 (u8.view(bool)) is written as 0/1,
    which files require: load refused the file save had just written as corrupt."""
    mask = np.array([0, 2, 255, 1], np.uint8).view(bool)
    path = _saved(tmp_path, {"m": mask, "m0": mask[1:2].reshape(()), "f": mask[::2]})
    out = ct.load(path)
    assert out["m"].tolist() == [False, True, True, True]
    assert out["m"].view(np.uint8).tolist() == [0, 1, 1, 1]
    assert out["m0"].shape == () and bool(out["m0"]) and out["f"].tolist() == [False, True]
    assert safetensors.numpy.load_file(path)["['m']"].view(np.uint8).tolist() == [0, 1, 1, 1]
    assert mask.view(np.uint8).tolist() == [0, 2, 255, 1]  # the caller's array is untouched


def _saved(tmp_path: Any, tree: Any) -> str:
    path = os.fspath(tmp_path / "saved.safetensors")
    ct.save(path, tree)
    return path


def test_path_accepts_str_and_pathlike(tmp_path):
    """save/load/inspect take str and os.PathLike."""
    ct.save(tmp_path / "p.safetensors", {"a": 1})
    assert ct.load(os.fspath(tmp_path / "p.safetensors")) == {"a": 1}
    assert ct.inspect(tmp_path / "p.safetensors").format == "containers 1"


def test_file_mode_is_what_open_would_give(tmp_path):
    """The saved file gets 0o666 & ~umask, and an existing file keeps its mode."""
    path = tmp_path / "m.safetensors"
    ct.save(path, {"a": 1})
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask
    os.chmod(path, 0o640)
    ct.save(path, {"a": 2})
    assert os.stat(path).st_mode & 0o777 == 0o640


def test_save_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path):
    """A link is followed as open follows it: the target gets the new file (with the
    target's mode), the link stays a link; a dangling link's target is created."""
    (tmp_path / "run7").mkdir()
    target, link = tmp_path / "run7" / "model.safetensors", tmp_path / "latest.safetensors"
    ct.save(target, {"step": 1})
    os.chmod(target, 0o640)
    link.symlink_to(target)
    ct.save(link, {"step": 2})
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert (ct.load(target), os.stat(target).st_mode & 0o777) == ({"step": 2}, 0o640)
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(
        ["run7", "model.safetensors", "latest.safetensors"]
    )  # no temp file left next to the link or the target
    dangling = tmp_path / "next.safetensors"
    dangling.symlink_to(tmp_path / "run8.safetensors")
    ct.save(dangling, {"step": 3})
    assert dangling.is_symlink() and ct.load(tmp_path / "run8.safetensors") == {"step": 3}


def test_expect_checks_the_root_type(tmp_path):
    """expect=C returns a C, and a different root raises SchemaError before reading arrays."""
    data = ct.serialize(Linear(arr(1), arr(1)))
    assert type(ct.deserialize(data, expect=Linear)) is Linear
    with pytest.raises(
        ct.SchemaError,
        match=r"expected a 'MLP' at the root, but the file holds 'tests.serialize.Linear'",
    ):
        ct.deserialize(data, expect=MLP)
    with pytest.raises(ct.SchemaError, match=r"expected a 'dict' at the root.*'list'"):
        ct.deserialize(ct.serialize([1]), expect=dict)


@pytest.mark.parametrize("expect", ["list", Linear(1, 2)])
def test_expect_must_be_a_class(tmp_path, expect):
    """expect= that is not a class (a type's name, an instance) is a TypeError saying
    what expect must be, from load and deserialize alike, before the file is read."""
    path = tmp_path / "t.safetensors"
    ct.save(path, [1])
    for op, call in (
        ("load", lambda: ct.load(path, expect=expect)),
        ("deserialize", lambda: ct.deserialize(path.read_bytes(), expect=expect)),
    ):
        with pytest.raises(
            TypeError,
            match="^"
            + re.escape(
                f"{op}: expect must be a class or None, got {type(expect).__qualname__} "
                f"{expect!r}. Pass the class itself, e.g. expect=list or expect=MyModel."
            )
            + "$",
        ):
            call()
    with pytest.raises(TypeError, match=r"^load: expect must be a class or None, got str"):
        ct.load(tmp_path / "missing.safetensors", expect="list")


def test_load_and_inspect_errors_name_the_file(tmp_path):
    """A bad file's error starts with its path (a loop over checkpoints says which one);
    deserialize, which reads no file, does not add one."""
    path = tmp_path / "ckpt-7.safetensors"
    ct.save(path, {"w": np.ones(3)})
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(
        ct.IntegrityError, match="^" + re.escape(f"{path}: tensor \"['w']\": CRC32")
    ):
        ct.load(path)
    path.write_bytes(data[:-5])
    for call in (
        lambda: ct.load(path),
        lambda: ct.load(path, mmap=True),
        lambda: ct.inspect(path),
    ):
        with pytest.raises(ct.FormatError, match="^" + re.escape(f"{path}: truncated: need 24")):
            call()
    with pytest.raises(ct.FormatError, match=r"^truncated: need 24"):
        ct.deserialize(data[:-5])
    path.write_bytes(data)
    with pytest.raises(ct.SchemaError, match="^" + re.escape(f"{path}: expected a 'list'")):
        ct.load(path, expect=list)


# --- save-side errors ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        (
            {"a": [np.array(["x"])]},
            r"at \['a'\]\[0\]: an array of dtype <U1, which files cannot hold",
        ),
        ({"o": np.array([object()])}, r"at \['o'\]: an array of dtype object"),
        ({"c": np.zeros(2, np.complex128)}, r"dtype complex128"),
        ({"d": np.zeros(2, "datetime64[s]")}, r"dtype datetime64\[s\]"),
        ({"f": object()}, r"at \['f'\]: a leaf of type object, which files cannot hold"),
        ({"m": np.ma.masked_array([1.0])}, r"at \['m'\]: an array of type MaskedArray"),
        (
            {"nt": namedtuple("Unreg", "a")(1)},
            r"at \['nt'\]: a 'Unreg', which is not registered by name.*ct.register\(Unreg\)",
        ),
        ({"dd": defaultdict(lambda: 0)}, r"at \['dd'\]: a defaultdict whose default_factory"),
        ({"k": {frozenset(): 1}}, r"at \['k'\]: a dict key that is a value of type frozenset"),
        ({"i": Interval(1, 2, unit=object())}, r"at \['i'\]<aux>: a leaf of type object"),
        (Linear(arr(1), arr(1), name=arr(2)), r"at .name: an array inside a kept value"),
        ({"x": {"a": arr(1)}, "y": 1}, None),
    ],
)
def test_unstorable_trees_raise_at_save_and_leave_no_file(tmp_path, tree, message):
    """Unsupported dtypes, leaves, factories, keys and aux raise naming the path; no file."""
    path = tmp_path / "bad.safetensors"
    if message is None:  # the control case: a storable tree is saved
        ct.save(path, tree)
        assert path.exists()
        return
    with pytest.raises(ct.SerializationError, match=message):
        ct.save(path, tree)
    assert os.listdir(tmp_path) == []
    with pytest.raises(ct.SerializationError, match=message):
        ct.serialize(tree)


def test_an_unstorable_kept_value_gets_advice_for_kept_values(tmp_path):
    """A kept field holding an unsupported object is told what kept values may hold, or
    to become a reset field (which works), not to become the kept field it already is."""

    def holder(**options: Any) -> type:
        @ct.container(children=["w"], **options)
        class Holder:
            w: Any
            lock: Any = None

        return Holder

    with pytest.raises(
        ct.SerializationError,
        match=re.escape(
            "serialize: at .lock: a leaf of type object, which files cannot hold. Kept values "
            "and register_node aux are stored as plain data: scalars (int, float, complex, "
            "str, bytes, bool, None, numpy scalars) in tuples, lists and dicts. Convert the "
            "value to plain data, or make the field a reset field, which is not saved: pass "
            "keep= without it (it needs a default)."
        ),
    ):
        ct.serialize(holder()(arr(1), object()))
    reset = holder(keep=[])
    assert ct.deserialize(ct.serialize(reset(arr(1), object())), expect=reset).lock is None


class Twins:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


ct.register_node(
    Twins,
    lambda x: ((x.a, x.b), None),
    lambda aux, ch: Twins(*ch),
    keys=lambda x: (ct.AttrKey("a"), ct.AttrKey("a[0]")),
    name="tests.serialize.Twins",
)


def test_keys_that_render_alike_are_refused(tmp_path):
    """Two arrays whose keystr paths collide cannot both be tensors; no file is left."""
    with pytest.raises(
        ct.SerializationError, match=r"at \['t'\]\.a\[0\]: a path that names two different arrays"
    ):
        ct.save(tmp_path / "x.safetensors", {"t": Twins([arr(1)], arr(2))})
    assert os.listdir(tmp_path) == []


def test_huge_integer_literals_are_refused_without_pythons_digit_limit():
    """With sys.set_int_max_str_digits(0), a 5000-digit literal is still a FormatError."""
    import sys
    from pathlib import Path

    corpus = Path(__file__).parent / "corpus" / "files" / "21n-huge-int-literal.safetensors"
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        with pytest.raises(
            ct.FormatError, match=r"integer literal of 5000 digits \(at most 4300\)"
        ):
            ct.load(corpus)
    finally:
        sys.set_int_max_str_digits(old)


def test_a_hostile_huge_int_loads_and_inspects_within_the_limits(tmp_path):
    """An int of 20,000 hex digits loads, inspects by its size, and counts in max_header_bytes."""
    tree = json.dumps([["S", {"i": "f" * 20_000}]])
    header = json.dumps({"__metadata__": {"containers.format": "1", "containers.tree": tree}})
    path = tmp_path / "huge-int.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header.encode())
    assert ct.load(path) == 16**20_000 - 1
    assert ct.inspect(path).rows[0].text == "int(80000 bits, crc32 133c790d)"
    with pytest.raises(
        ct.LimitError, match=r"the header claims 20\d{3} bytes, more than max_header_bytes=20000"
    ):
        ct.load(path, limits=ct.Limits(max_header_bytes=20_000))


def _not_safetensors(path: Any, kind: str) -> None:
    if kind == "npz":
        np.savez(path, a=arr(3))
    elif kind == "npy":
        np.save(path, arr(3))
    elif kind == "pickle":
        path.write_bytes(pickle.dumps({"a": [1, 2]}))
    elif kind == "json":
        path.write_text(json.dumps({"a": [1, 2]}))
    else:
        path.write_text("ten bytes\n")


@pytest.mark.parametrize("kind", ["npz", "npy", "pickle", "json", "text"])
def test_a_file_that_is_not_safetensors_is_a_format_error_saying_so(tmp_path, kind):
    """npz, npy, pickle, JSON and text files say they are not safetensors, never ask for limits."""
    path = tmp_path / f"data.{kind}"
    _not_safetensors(path, kind)
    message = (
        r"this is not a safetensors file: its first 8 bytes give a header length of \d+ "
        r"bytes, but only \d+ bytes follow them \(or the file is truncated\)\.$"
    )
    for read in (ct.load, ct.inspect):
        with pytest.raises(ct.FormatError, match="^" + re.escape(f"{path}: ") + message):
            read(path)
    with pytest.raises(ct.FormatError, match="^" + message):
        ct.deserialize(path.read_bytes())


def test_the_garbage_collector_is_paused_only_during_a_call(tmp_path):
    """save/load pause the cyclic GC while they run and restore its state, errors too."""
    import gc

    path = tmp_path / "g.safetensors"
    ct.save(path, {"a": arr(2)})
    assert gc.isenabled()
    with pytest.raises(ct.FormatError, match=r"file too small"):
        ct.deserialize(b"")
    assert gc.isenabled()
    gc.disable()
    try:
        ct.load(path)
        assert not gc.isenabled()  # a caller's disabled GC stays disabled
    finally:
        gc.enable()


def test_limits_apply_to_ordinary_entries_too():
    """max_ndim=1 refuses a 2-d tensor; the header's fast path checks the limit as well."""
    data = ct.serialize({"w": arr(2, 3)})
    with pytest.raises(
        ct.LimitError, match=r"tensor \"\['w'\]\" has 2 dimensions, more than max_ndim=1"
    ):
        ct.deserialize(data, limits=ct.Limits(max_ndim=1))
    assert ct.deserialize(data, limits=ct.Limits(max_ndim=2))["w"].shape == (2, 3)
