"""Checkpoints that fit the ML ecosystem (issue 30): load(to=, device=, dtype=),
load(like=), save(names="dotted", metadata=), the torch bridge, optax states, saved
state/split parts, filters that match nothing, and the command line's new options.
Real torch, jax, optax and safetensors; child processes where registration is global.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from typing import Any

import numpy as np
import pytest
import safetensors.numpy

import containers as ct
from containers._cli import main
from containers.filters import NoMatchWarning, PathContains, PathPattern
from containers.interop import from_state_dict, load_into_module, to_state_dict

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
safetensors_torch = pytest.importorskip("safetensors.torch")

#: Every torch dtype a file holds (safetensors' codes), and those it cannot.
STORABLE = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
    torch.float8_e8m0fnu,
]
REFUSED = [torch.complex128, torch.complex32, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]


def _bits(t: Any) -> bytes:
    """A tensor's bytes, whatever its dtype (NaNs and float8 compared exactly)."""
    t = t.contiguous().reshape(-1)
    return bytes(t.view(torch.uint8).numpy().tobytes()) if t.numel() else b""


def _tensor(dtype: Any, shape: tuple[int, ...] = (3, 2)) -> Any:
    g = torch.Generator().manual_seed(0)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point or dtype.is_complex:
        wide = torch.complex64 if dtype.is_complex else torch.float32
        return (torch.randn(shape, generator=g, dtype=wide) * 4).to(dtype)
    return torch.randint(0, 100, shape, generator=g).to(dtype)


# --- 1. load(to=...) --------------------------------------------------------------------


def test_every_storable_torch_dtype_round_trips_to_torch(tmp_path):
    """save of torch tensors then load(to="torch") gives each dtype torch has that a file
    holds back with its dtype, shape and bytes (bfloat16 and float8 included), through
    load, load(mmap=True) and deserialize."""
    tree = {str(dt): _tensor(dt) for dt in STORABLE}
    tree["scalar"] = torch.tensor(2.5, dtype=torch.bfloat16)
    path = tmp_path / "all.safetensors"
    ct.save(path, tree)
    for out in (
        ct.load(path, to="torch"),
        ct.load(path, to="torch", mmap=True),
        ct.deserialize(ct.serialize(tree), to="torch"),
    ):
        for name, t in tree.items():
            got = out[name]
            assert type(got) is torch.Tensor and got.dtype == t.dtype, name
            assert got.shape == t.shape and _bits(got) == _bits(t), name


def test_torch_dtypes_files_cannot_hold_are_refused_with_the_path(tmp_path):
    """complex128, complex32 and the fnuz float8s have no file dtype: save names the path
    and writes nothing."""
    for dt in REFUSED:
        with warnings.catch_warnings():  # "ComplexHalf support is experimental"
            warnings.simplefilter("ignore", UserWarning)
            value = torch.zeros(2, dtype=dt)
        with pytest.raises(ct.SerializationError, match=r"^save: at \['x'\]: an? "):
            ct.save(tmp_path / "x.safetensors", {"x": value})
    assert not os.listdir(tmp_path)


def test_load_to_torch_wraps_the_read_buffer_without_a_copy(tmp_path):
    """Small tensors are read into one buffer and each torch tensor is a view of it: their
    addresses are as far apart as their offsets in the file (no copy per tensor)."""
    path = tmp_path / "two.safetensors"
    ct.save(path, {"a": np.arange(4, dtype=np.float32), "b": np.ones(4, np.float32)})
    out = ct.load(path, to="torch")
    offsets = {}
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    for name, entry in header.items():
        if name != "__metadata__":
            offsets[name] = entry["data_offsets"][0]
    gap = offsets["['b']"] - offsets["['a']"]
    assert out["b"].data_ptr() - out["a"].data_ptr() == gap


def test_tensors_from_a_mapped_file_are_writeable_and_never_write_the_file(tmp_path):
    """load(mmap=True, to="torch") maps the file copy-on-write: writing a tensor changes
    it, not the file."""
    path = tmp_path / "m.safetensors"
    ct.save(path, {"w": np.zeros(3, np.float32)})
    out = ct.load(path, mmap=True, to="torch")
    out["w"] += 1
    assert out["w"].tolist() == [1.0, 1.0, 1.0]
    assert ct.load(path)["w"].tolist() == [0.0, 0.0, 0.0]


def test_load_to_jax_keeps_bfloat16_and_float8_and_puts_arrays_on_the_device(tmp_path):
    """to="jax" gives jax arrays of the saved dtypes on the given device; scalars stay."""
    import ml_dtypes

    path = tmp_path / "j.safetensors"
    tree = {
        "bf": np.arange(3, dtype=ml_dtypes.bfloat16),
        "f8": np.arange(3).astype(ml_dtypes.float8_e5m2),
        "step": 7,
    }
    ct.save(path, tree)
    cpu = jax.devices("cpu")[0]
    out = ct.load(path, to="jax", device=cpu)
    assert out["step"] == 7
    for name in ("bf", "f8"):
        assert isinstance(out[name], jax.Array) and out[name].dtype == tree[name].dtype
        assert out[name].devices() == {cpu}
        assert np.asarray(out[name]).tobytes() == tree[name].tobytes()


def test_dtype_casts_floating_arrays_only():
    """dtype= casts floating-point arrays (bfloat16 too) and leaves integers and bools,
    in every framework."""
    data = ct.serialize({"w": np.ones(2, np.float32), "i": np.arange(2), "m": np.ones(2, bool)})
    t = ct.deserialize(data, to="torch", dtype=torch.bfloat16)
    assert (t["w"].dtype, t["i"].dtype, t["m"].dtype) == (torch.bfloat16, torch.int64, torch.bool)
    j = ct.deserialize(data, to="jax", dtype="float16")
    assert (j["w"].dtype, j["i"].dtype) == (
        jnp.float16,
        jnp.int64 if j["i"].dtype == jnp.int64 else jnp.int32,
    )
    n = ct.deserialize(data, to="numpy", dtype=np.float64)
    assert (n["w"].dtype, n["i"].dtype) == (np.float64, np.int64)


def test_bad_target_options_are_refused_before_reading(tmp_path):
    """An unknown to=, device=/dtype= without to=, like= with to=, and numpy on a GPU."""
    path = tmp_path / "never-read.safetensors"
    with pytest.raises(ValueError, match=r"load: to must be one of 'numpy', 'torch', 'jax'"):
        ct.load(path, to="tensorflow")
    with pytest.raises(TypeError, match=r"load: device= and dtype= need to="):
        ct.load(path, dtype=np.float32)
    with pytest.raises(TypeError, match=r"load: like= decides the framework"):
        ct.load(path, like={}, to="torch")
    with pytest.raises(ValueError, match=r"load: numpy arrays live on the CPU"):
        ct.load(path, to="numpy", device="cuda:0")


# --- 2. load(like=...) ------------------------------------------------------------------


@ct.container(children=["w", "b"], keep=["act"], name="tests.checkpoints.Dense")
class Dense:
    w: Any
    b: Any
    act: str = "relu"


@ct.container(children=["layers"], name="tests.checkpoints.Net")
class Net:
    layers: list[Dense]


def _net(seed: int = 0, dtype: Any = np.float32) -> Net:
    rng = np.random.default_rng(seed)
    return Net(
        [Dense(rng.normal(size=(3, 4)).astype(dtype), np.zeros(4, dtype)) for _ in range(2)]
    )


def test_like_decides_classes_kept_values_framework_device_and_dtype(tmp_path):
    """A template of torch Parameters, jax arrays and ShapeDtypeStructs gets the file's
    values in those types; its kept values stay; a shared array is loaded into each place."""
    path = tmp_path / "net.safetensors"
    net = _net()
    ct.save(path, net)
    like = Net(
        [
            Dense(torch.nn.Parameter(torch.zeros(3, 4)), torch.zeros(4), act="gelu"),
            Dense(jnp.zeros((3, 4)), jax.ShapeDtypeStruct((4,), jnp.float32), act="tanh"),
        ]
    )
    out = ct.load(path, like=like)
    first, second = out.layers
    assert type(first.w) is torch.nn.Parameter and first.w.requires_grad
    assert type(first.b) is torch.Tensor and (first.act, second.act) == ("gelu", "tanh")
    assert isinstance(second.w, jax.Array) and isinstance(second.b, jax.Array)
    assert np.array_equal(first.w.detach().numpy(), net.layers[0].w)
    assert np.array_equal(np.asarray(second.w), net.layers[1].w)


def test_a_template_mismatch_lists_every_problem(tmp_path):
    """Missing, extra, shape changed and dtype changed leaves: one StructureError that
    starts with the file's path and lists them all."""
    path = tmp_path / "net.safetensors"
    ct.save(path, {"a": np.zeros(3, np.float32), "b": np.zeros(2), "c": np.zeros(1), "d": 1})
    like = {"a": np.zeros(4, np.float32), "b": np.zeros(2, np.float32), "new": np.zeros(1), "d": 0}
    with pytest.raises(ct.StructureError) as info:
        ct.load(path, like=like)
    assert str(info.value).splitlines() == [
        f"{path}: the file does not match the template (like=): 4 problems:",
        "  shape changed: ['a'] is float32[3] in the file, float32[4] in the template",
        "  dtype changed: ['b'] is float64[2] in the file, float32[2] in the template",
        "  missing: ['new'] (float64[1] in the template)",
        "  extra: ['c'] (in the file, not in the template)",
        "Load it without like= to see its tree (or `containers inspect FILE`), and make "
        "the template match it.",
    ]


def test_like_loads_a_file_whose_classes_are_not_importable(tmp_path):
    """A file saved by a script's __main__.Linear (not registered here) loads into a
    template of another class; without like= it is an UnknownTypeError."""
    path = tmp_path / "script.safetensors"
    script = textwrap.dedent(
        """
        import sys, numpy as np, containers as ct
        @ct.container
        class Linear:
            w: object
            b: object
        ct.save(sys.argv[1], [Linear(np.full((2, 2), 3.0), np.ones(2))])
        """
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=True)
    with pytest.raises(ct.UnknownTypeError, match=r"__main__\.Linear"):
        ct.load(path)
    out = ct.load(path, like=[Dense(np.zeros((2, 2)), np.zeros(2))])
    assert out[0].w.tolist() == [[3.0, 3.0], [3.0, 3.0]] and out[0].act == "relu"


def test_like_loads_a_plain_safetensors_file_by_dotted_names(tmp_path):
    """A torch state_dict written by safetensors.torch (names layers.0.w) loads into a
    container template whose paths are .layers[0].w."""
    path = tmp_path / "hub.safetensors"
    net = _net(1)
    state = {
        f"layers.{i}.{f}": torch.from_numpy(getattr(layer, f))
        for i, layer in enumerate(net.layers)
        for f in ("w", "b")
    }
    safetensors_torch.save_file(state, path)
    out = ct.load(path, like=_net(2))
    for got, want in zip(out.layers, net.layers):
        assert np.array_equal(got.w, want.w) and np.array_equal(got.b, want.b)


def test_like_keeps_the_file_checks(tmp_path):
    """A corrupted tensor is still an IntegrityError with like=, and a truncated file a
    FormatError naming it: a template weakens no check."""
    path = tmp_path / "c.safetensors"
    ct.save(path, {"w": np.arange(4.0)})
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ct.IntegrityError, match="CRC32 mismatch"):
        ct.load(path, like={"w": np.zeros(4)})
    path.write_bytes(bytes(data[:-3]))
    with pytest.raises(ct.FormatError, match=rf"^{path}: truncated"):
        ct.load(path, like={"w": np.zeros(4)})


# --- 3. dotted names and the torch bridge -----------------------------------------------


def _trained_module() -> Any:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    for _ in range(5):
        opt.zero_grad()
        torch.nn.functional.mse_loss(module(x), y).backward()
        opt.step()
    return module


@ct.container(name="tests.checkpoints.Linear")
class Linear:
    weight: Any
    bias: Any


def test_names_dotted_writes_the_names_torch_uses(tmp_path):
    """save(names="dotted") names tensors layers.0.w: safetensors.torch reads them into a
    module with load_state_dict, and ct.load still rebuilds the tree."""
    module = _trained_module()
    params = {
        "0": Linear(module[0].weight.detach(), module[0].bias.detach()),
        "2": Linear(module[2].weight.detach(), module[2].bias.detach()),
    }
    path = tmp_path / "dotted.safetensors"
    ct.save(path, params, names="dotted")
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    fresh.load_state_dict(safetensors_torch.load_file(path))
    x = torch.randn(3, 4)
    assert torch.equal(fresh(x), module(x))
    back = ct.load(path)
    assert torch.equal(
        back["2"].weight
        if isinstance(back["2"].weight, torch.Tensor)
        else torch.from_numpy(back["2"].weight),
        module[2].weight.detach(),
    )


def test_dotted_names_that_collide_or_cannot_be_dotted_are_refused():
    """Two paths with one dotted name, or a dict key that is not a str or int."""
    with pytest.raises(ct.SerializationError, match=r"names='dotted' gives it the name 'a\.0'"):
        ct.serialize({"a": [np.zeros(1)], "a.0": np.zeros(1)}, names="dotted")
    with pytest.raises(
        ct.SerializationError,
        match=r"serialize: at \['k'\]\[1\.5\]: the dict key 1\.5 has no dotted name",
    ):
        ct.serialize({"k": {1.5: np.zeros(1)}}, names="dotted")
    with pytest.raises(ValueError, match="names must be 'keystr' or 'dotted'"):
        ct.serialize({}, names="slashes")


def test_a_trained_module_goes_into_a_container_and_back(tmp_path):
    """A trained nn.Module's state_dict saved by ct loads into container classes
    (like=), which torch.func.functional_call accepts through to_state_dict; container
    parameters saved by ct load into a fresh module with load_into_module."""
    module = _trained_module()
    path = tmp_path / "module.safetensors"
    ct.save(path, module.state_dict())
    like = {
        "0": Linear(torch.zeros(8, 4), torch.zeros(8)),
        "2": Linear(torch.zeros(1, 8), torch.zeros(1)),
    }
    params = ct.load(path, like=like)
    assert torch.equal(params["0"].weight, module[0].weight.detach())
    x = torch.randn(5, 4)
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    out = torch.func.functional_call(fresh, to_state_dict(params), (x,))
    assert torch.equal(out, module(x))
    back = tmp_path / "params.safetensors"
    ct.save(back, params)  # keystr names: load_into_module dots them
    assert str(load_into_module(fresh, back)) == "<All keys matched successfully>"
    assert torch.equal(fresh(x), module(x))
    assert from_state_dict(like, module.state_dict())["2"].bias.tolist() == module[2].bias.tolist()


def test_load_into_module_has_torchs_strict_semantics(tmp_path):
    """strict=True raises torch's RuntimeError for missing and unexpected keys; with
    strict=False torch returns them."""
    path = tmp_path / "partial.safetensors"
    ct.save(path, {"weight": np.ones((2, 3), np.float32), "extra": np.ones(1, np.float32)})
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "bias"'):
        load_into_module(torch.nn.Linear(3, 2), path)
    result = load_into_module(torch.nn.Linear(3, 2), path, strict=False)
    assert (result.missing_keys, result.unexpected_keys) == (["bias"], ["extra"])


def test_from_state_dict_strict_false_keeps_template_values():
    """from_state_dict(strict=False): missing names keep the template's values and extra
    names are ignored; strict=True lists both."""
    like = {"w": np.zeros(2, np.float32), "b": np.full(1, 5.0, np.float32)}
    sd = {"w": torch.ones(2), "junk": torch.ones(3)}
    out = from_state_dict(like, sd, strict=False)
    assert out["w"].tolist() == [1.0, 1.0] and out["b"].tolist() == [5.0]
    with pytest.raises(
        ct.StructureError, match=r"2 problems:\n  missing: \['b'\].*\n  extra: \['junk'\]"
    ):
        from_state_dict(like, sd)


# --- 4. optax ---------------------------------------------------------------------------


def _child(script: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_an_optax_training_loop_resumes_bit_identically(tmp_path):
    """With register_jax() (optax imported), a chain of clip_by_global_norm and adamw with
    a schedule checkpoints at step 5 and resumes to step 10 exactly as the uninterrupted
    run; the file names the states by their public names."""
    out = _child(
        """
        import sys
        import jax, jax.numpy as jnp, numpy as np, optax
        import containers as ct
        from containers.interop import register_jax
        register_jax()

        @ct.container(name="tests.MLP")
        class MLP:
            w1: jax.Array
            b1: jax.Array
            w2: jax.Array

        def loss(p, x, y):
            return jnp.mean((jnp.tanh(x @ p.w1 + p.b1) @ p.w2 - y) ** 2)

        schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-2, 3, 20)
        opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule))

        @jax.jit
        def step(p, s, x, y):
            u, s = opt.update(jax.grad(loss)(p, x, y), s, p)
            return optax.apply_updates(p, u), s

        k = jax.random.split(jax.random.key(0), 4)
        x, y = jax.random.normal(k[0], (32, 4)), jax.random.normal(k[1], (32, 1))
        p = MLP(jax.random.normal(k[2], (4, 8)), jnp.zeros(8), jax.random.normal(k[3], (8, 1)))
        s = opt.init(p)
        for i in range(10):
            if i == 5:
                ct.save(sys.argv[1], {"params": p, "opt_state": s, "step": i})
            p, s = step(p, s, x, y)
        ck = ct.load(sys.argv[1], to="jax")
        p2, s2 = ck["params"], ck["opt_state"]
        for i in range(ck["step"], 10):
            p2, s2 = step(p2, s2, x, y)
        a, b = jax.tree_util.tree_leaves((p, s)), jax.tree_util.tree_leaves((p2, s2))
        print(len(a) == len(b) and all(
            x.dtype == y.dtype and np.asarray(x).tobytes() == np.asarray(y).tobytes()
            for x, y in zip(a, b)
        ))
        print(jax.tree_util.tree_structure(s) == jax.tree_util.tree_structure(s2))
        """,
        str(tmp_path / "ck.safetensors"),
    )
    assert out.split() == ["True", "True"]
    names = str(ct.inspect(tmp_path / "ck.safetensors"))
    assert "optax.ScaleByAdamState v1" in names and "optax.EmptyState v1" in names
    assert "optax.ScaleByScheduleState v1" in names and "_src" not in names


def test_unregistered_classes_are_listed_in_one_error():
    """Without registration, saving an optax state names all its unregistered classes at
    once and points at register_optax; register_optax() then makes it saveable."""
    out = _child(
        """
        import jax.numpy as jnp, optax
        import containers as ct
        from containers.interop import register_optax
        state = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3)).init({"w": jnp.zeros(2)})
        try:
            ct.serialize(state)
        except ct.SerializationError as err:
            print(err)
        register_optax()
        print(type(ct.deserialize(ct.serialize(state))[1][0]).__name__)
        """
    )
    first, second = out.strip().splitlines()
    assert first.startswith(
        "serialize: 2 classes in the tree are not registered by name: 'EmptyState', "
        "'ScaleByAdamState' (the first at [0]). Call containers.interop.register_optax()"
    )
    assert second == "ScaleByAdamState"


# --- 5. parts of split/state ------------------------------------------------------------


@ct.container(name="tests.checkpoints.Block")
class Block:
    w: Any = ct.field(tags=("param",))
    count: Any = ct.field(tags=("batch_stats",))


def test_state_and_split_parts_save_and_load(tmp_path):
    """A part (a dict keyed by key paths) saves and loads with its keys (attribute, index
    and dict keys, tuple dict keys too) and merges back into the tree."""
    model = {
        "blocks": [Block(np.ones(2), 3), Block(np.zeros(2), 4)],
        ("t", 1): Block(np.ones(1), 0),
    }
    structure, params, rest = ct.split(model, "param", ...)
    path = tmp_path / "params.safetensors"
    ct.save(path, params)
    loaded = ct.load(path)
    assert list(loaded) == list(params)
    back = ct.merge(structure, loaded, rest)
    assert np.array_equal(back["blocks"][1].w, np.zeros(2)) and back[("t", 1)].count == 0


def test_malformed_path_keys_in_a_file_are_format_errors():
    """Path-key forms holding the wrong type (a file is hostile input) are FormatErrors."""
    from containers._serialize._format import build_header

    good = ct.serialize({(ct.AttrKey("w"), ct.IndexKey(0)): 1})
    n = int.from_bytes(good[:8], "little")
    meta = json.loads(good[8 : 8 + n])["__metadata__"]
    assert '{"ka":"w"}' in meta["containers.tree"] and '{"ki":0}' in meta["containers.tree"]
    for old, new in [
        ('{"ka":"w"}', '{"ka":1}'),
        ('{"ki":0}', '{"ki":-1}'),
        ('{"ki":0}', '{"ki":true}'),
        ('{"ka":"w"}', '{"kd":{"t":[{"ka":"x"}]}}'),
    ]:
        tree = meta["containers.tree"].replace(old, new)
        data = build_header("", {**meta, "containers.tree": tree})
        with pytest.raises(ct.FormatError, match="is not a path key"):
            ct.deserialize(data)


# --- 6. filters that match nothing, PathPattern -----------------------------------------


def test_a_tag_declared_nowhere_warns_naming_the_tags_there():
    """state(model, ".blocks[1].w") is a tag filter (NNX's rule): it warns that no field is
    tagged so, lists the tags in the tree, and points at PathPattern."""
    model = {"blocks": [Block(np.ones(2), 3)]}
    with pytest.warns(NoMatchWarning) as record:
        assert ct.state(model, "['blocks'][0].w") == {}
    assert str(record[0].message).startswith(
        "state: the tag filter \"['blocks'][0].w\" matches nothing: no field of the tree is "
        "tagged \"['blocks'][0].w\" and no leaf's tag is \"['blocks'][0].w\" (tags in the "
        "tree: 'batch_stats', 'param'). A str filter is a tag (Flax NNX's rule); to select "
        "by path, use PathPattern(\"['blocks'][0].w\")."
    )


def test_a_path_filter_matching_no_path_warns_and_can_be_silenced():
    """PathContains(-1) matches no path: a warning naming paths that exist; silenced by
    the warning category; a tag that is declared but taken by an earlier filter is quiet."""
    model = {"blocks": [Block(np.ones(2), 3)]}
    with pytest.warns(
        NoMatchWarning,
        match=r"PathContains\(-1\) matches no path of the tree; its paths include \"\['blocks'\]\[0\]\.w\"",
    ):
        ct.partition(model, PathContains(-1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=NoMatchWarning)
        ct.state(model, PathContains(-1))
        ct.split(model, "param", "param", ...)  # declared: no warning either way


def test_path_patterns_select_by_glob_and_negative_index():
    """PathPattern: [-1] is the last element of the tree's sequence, * one key, ** any
    keys, globs in names; it matches the start of a path."""
    model = {"blocks": [Block(np.ones(2), 1), Block(np.ones(2), 2), Block(np.ones(2), 3)]}
    last = ct.state(model, PathPattern("['blocks'][-1]"))
    assert [ct.keystr(p) for p in last] == ["['blocks'][2].w", "['blocks'][2].count"]
    assert ct.leaves(model, where=PathPattern(".**.c*")) == [1, 2, 3]
    assert ct.leaves(model, where=PathPattern("['blocks'][-2].*")) == [ct.leaves(model)[2], 2]
    bumped = ct.fmap(lambda v: v + 10, model, where=PathPattern("['blocks'][-1].count"))
    assert [b.count for b in bumped["blocks"]] == [1, 2, 13]
    with pytest.raises(ct.filters.FilterError, match="only the tree knows"):
        PathPattern("[-1]")((ct.IndexKey(0),), 1)
    with pytest.raises(ct.filters.FilterError, match="cannot read it at position 6"):
        PathPattern(".layer(0)")


# --- 8. metadata ------------------------------------------------------------------------


def test_metadata_is_stored_returned_by_inspect_and_shown(tmp_path, capsys):
    """save(metadata=) keeps str -> str entries in __metadata__ (safetensors reads them),
    inspect returns them and containers inspect shows them; reserved or non-str refused."""
    path = tmp_path / "m.safetensors"
    ct.save(path, {"w": np.zeros(1)}, metadata={"run": "r1", "step": "100"})
    assert ct.inspect(path).user_metadata == {"run": "r1", "step": "100"}
    with safetensors.safe_open(path, "np") as f:  # type: ignore[attr-defined]
        assert f.metadata()["run"] == "r1"
    assert main(["inspect", str(path)]) == 0
    assert "metadata:\n  run = r1\n  step = 100\n" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"'containers\.tree'"):
        ct.save(path, {}, metadata={"containers.tree": "x"})
    with pytest.raises(TypeError, match=r"metadata must be a dict of str to str"):
        ct.serialize({}, metadata={"step": 100})  # type: ignore[dict-item]


def test_inspect_shows_a_foreign_files_own_metadata(tmp_path, capsys):
    """A safetensors file's own metadata (format: pt) is shown, not hidden."""
    path = tmp_path / "pt.safetensors"
    safetensors_torch.save_file({"w": torch.zeros(2)}, path, metadata={"format": "pt"})
    assert main(["inspect", str(path)]) == 0
    assert "metadata:\n  format = pt\n" in capsys.readouterr().out


# --- 9. the command line ----------------------------------------------------------------


def test_version_flag_prints_the_version(capsys):
    """containers --version prints the package's version and exits 0."""
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out == f"containers {ct.__version__}\n"


def test_inspect_of_several_files_prints_each_and_fails_for_the_bad_one(tmp_path, capsys):
    """Each readable file is shown; a missing one is an error line starting with its path
    and exit status 2."""
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    ct.save(a, [1])
    ct.save(b, [2])
    assert main(["inspect", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{a}: containers 1") and f"\n\n{b}: containers 1" in out
    assert main(["inspect", str(a), str(tmp_path / "gone")]) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{a}: ")
    assert (
        captured.err
        == f"{tmp_path / 'gone'}: FileNotFoundError: cannot read it: No such file or directory.\n"
    )
    assert main(["inspect", "--json", str(a), str(b)]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert [d["path"] for d in docs] == [str(a), str(b)] and docs[0]["format"] == "containers 1"


def test_diff_tolerances_summary_and_json(tmp_path, capsys):
    """diff --atol/--rtol: values within tolerance are equal (exit 0); differences end
    with a one-line summary; --json gives them as objects."""
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    ct.save(a, {"w": np.array([1.0, 2.0]), "lr": 0.1, "gone": 1})
    ct.save(b, {"w": np.array([1.0, 2.001]), "lr": 0.1000001, "new": 2})
    assert main(["diff", str(a), str(b)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "- ['gone']: 1",
        "~ ['lr']: 0.1 -> 0.1000001",
        "~ ['w']: float64[2] values differ, max abs diff 0.001",
        "+ ['new']: 2",
        f"4 differences: 2 changed, 1 only in {a}, 1 only in {b}",
    ]
    assert main(["diff", "--atol", "0.01", str(a), str(b)]) == 1
    assert (
        capsys.readouterr().out.splitlines()[-1]
        == f"2 differences: 0 changed, 1 only in {a}, 1 only in {b}"
    )
    ct.save(b, {"w": np.array([1.0, 2.001]), "lr": 0.1000001, "gone": 1})
    assert main(["diff", "--rtol", "1e-3", str(a), str(b)]) == 0
    assert capsys.readouterr().out == ""
    assert main(["diff", "--json", str(a), str(b)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["equal"] is False and doc["differences"][0] == {
        "op": "~",
        "path": "['lr']",
        "text": "0.1 -> 0.1000001",
    }
    assert main(["diff", "--atol", "-1", str(a), str(b)]) == 2
    assert "must be >= 0" in capsys.readouterr().err


# --- the threat model holds with like= and to= ------------------------------------------


def test_mutated_files_raise_only_serialization_or_structure_errors_with_like_and_to():
    """3,000 seeded mutations (bit flips, bytes in the header, truncations, edits of the
    tree string with the framing kept): deserialize(like=) and deserialize(to="torch")
    raise only SerializationError (the file) or StructureError (the template), as load;
    like='s own pass over the tree (file_leaves) accepts and refuses exactly the trees
    that inspect's (rows) does, with the same message."""
    import random

    from containers._serialize._decode import rows
    from containers._serialize._format import build_header

    tree = {
        "net": _net(3),
        "blocks": [Block(np.arange(3, dtype=np.int16), 2)],
        "tied": [np.ones(2, np.float32)] * 2,
        "meta": {"k": (1, "a", None), 2: 2.5},
    }
    seed = ct.serialize(tree)
    like = ct.deserialize(seed)
    n = int.from_bytes(seed[:8], "little")
    header = json.loads(seed[8 : 8 + n])
    meta = header.pop("__metadata__")
    entries = json.dumps(header, separators=(",", ":"))[1:-1]
    rng = random.Random(30)
    outcomes = {"ok": 0, "file": 0, "template": 0}
    for _ in range(3000):
        data = bytearray(seed)
        op = rng.randrange(4)
        if op == 0:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            data[rng.randrange(8, 8 + n)] = rng.randrange(32, 127)
        elif op == 2:
            del data[rng.randrange(len(data)) :]
        else:
            text = meta["containers.tree"]
            i = rng.randrange(len(text))
            text = text[:i] + rng.choice('[]{}",:0123456789aAkdit@SNCD') + text[i + 1 :]
            data = bytearray(
                build_header(entries, {**meta, "containers.tree": text}) + seed[8 + n :]
            )
        verdict = _tree_verdict(bytes(data), rows)
        assert verdict == _tree_verdict(bytes(data), _lean), op
        outcomes[verdict.split(":")[0]] = outcomes.get(verdict.split(":")[0], 0) + 1
        for kwargs in ({"like": like}, {"to": "torch"}):
            try:
                ct.deserialize(bytes(data), **kwargs)
                outcomes["ok"] += 1
            except ct.SerializationError:
                outcomes["file"] += 1
            except ct.StructureError:
                outcomes["template"] += 1
    assert outcomes["file"] > 1000 and outcomes["template"] > 0 and outcomes["ok"] > 0
    assert outcomes["FormatError"] > 100, outcomes  # trees both passes refuse


def _lean(records: Any, tensors: Any, limits: Any) -> Any:
    from containers._serialize._like import file_leaves

    return file_leaves(records.recs, tensors, dict.fromkeys(tensors), limits)


def _tree_verdict(data: bytes, check: Any) -> str:
    """What ``check`` (rows or file_leaves) says of the tree of ``data``: "ok", the
    error, or "framing" when the file fails before its tree is read."""
    from containers._serialize._api import _records
    from containers._serialize._format import layout_of_bytes

    limits = ct.Limits()
    try:
        layout = layout_of_bytes(memoryview(data), limits)
        records = _records(layout, limits)
    except ct.SerializationError:
        return "framing"
    try:
        check(records, layout.tensors, limits)
    except ct.SerializationError as err:
        return f"{type(err).__name__}: {err}"
    return "ok"


def test_a_file_nested_100000_deep_fits_a_template_in_linear_time(tmp_path):
    """A file whose one array is 100,000 levels deep (as a hostile file may be) is one
    "extra" problem for a shallow template, and an unexpected key for a module, in
    linear time: paths longer than the template's are cut, not built level by level."""
    import time

    deep: Any = np.ones(2, np.float32)
    for _ in range(100_000):
        deep = [deep]
    path = tmp_path / "deep.safetensors"
    ct.save(path, {"w": np.zeros(2, np.float32), "deep": deep})
    start = time.perf_counter()
    with pytest.raises(
        ct.StructureError,
        match=r"1 problem:\n  extra: \['deep'\] \(1 leaf in the file, none in the template\)",
    ):
        ct.load(path, like={"w": np.zeros(2, np.float32)})
    result = load_into_module(torch.nn.Linear(2, 1), path, strict=False)
    assert time.perf_counter() - start < 20  # quadratic: hours
    assert result.unexpected_keys == ["deep.0.(deeper)", "w"]


def test_to_converts_a_whole_sharded_load(tmp_path):
    """load(directory, to="torch") converts the arrays of every shard, as for one file."""
    torch = pytest.importorskip("torch")
    tree = {"a": np.arange(6, dtype=np.float32), "b": np.ones(4, np.int64)}
    ct.save(tmp_path / "ckpt", tree, max_shard_size=16)
    out = ct.load(tmp_path / "ckpt", to="torch")
    assert isinstance(out["a"], torch.Tensor) and out["a"].dtype == torch.float32
    assert out["b"].dtype == torch.int64 and out["a"].tolist() == list(range(6))


def test_to_with_lazy_alone_says_why_it_does_not_combine(tmp_path):
    """to= with lazy=True and no where= is a TypeError that says why (nothing is read)
    and what to do instead."""
    path = tmp_path / "m.safetensors"
    ct.save(path, {"w": np.ones(3)})
    with pytest.raises(TypeError, match=r"load: to= converts the arrays a load reads; lazy=True"):
        ct.load(path, to="numpy", lazy=True)


def test_to_with_where_converts_the_arrays_read_and_leaves_the_others_lazy(tmp_path):
    """load(to=, where=) reads the selected arrays into the framework (bfloat16 kept
    exactly); the others stay lazy, on a single file and a sharded checkpoint."""
    import ml_dtypes

    tree = {"enc": np.arange(4, dtype=ml_dtypes.bfloat16), "dec": np.ones(3, np.float32)}
    ct.save(tmp_path / "m.safetensors", tree)
    ct.save(tmp_path / "ckpt", tree, max_shard_size=8)
    for path in (tmp_path / "m.safetensors", tmp_path / "ckpt"):
        out = ct.load(path, to="torch", where=PathContains("enc"))
        assert type(out["enc"]) is torch.Tensor and out["enc"].dtype == torch.bfloat16
        assert out["enc"].float().tolist() == [0.0, 1.0, 2.0, 3.0]
        assert isinstance(out["dec"], ct.LazyArray)


def test_like_combines_with_lazy_where_and_sharded_checkpoints(tmp_path):
    """like= with a sharded checkpoint loads whole into the template; with lazy=True
    the template's classes and kept values hold lazy leaves checked against its shapes
    and dtypes; with where= the selected leaves are read into the template leaf's
    framework and the others stay lazy; a mismatch is a StructureError either way."""
    net = _net()
    ct.save(tmp_path / "one.safetensors", net)
    ct.save(tmp_path / "ckpt", net, max_shard_size=64)
    like = Net(
        [
            Dense(torch.zeros(3, 4), torch.zeros(4), act="gelu"),
            Dense(np.zeros((3, 4), np.float32), np.zeros(4, np.float32), act="tanh"),
        ]
    )
    for path in (tmp_path / "one.safetensors", tmp_path / "ckpt"):
        if path.is_dir():
            whole = ct.load(path, like=like)
            assert type(whole.layers[0].w) is torch.Tensor and whole.layers[1].act == "tanh"
            assert np.array_equal(whole.layers[0].w.numpy(), net.layers[0].w)
        lazy = ct.load(path, like=like, lazy=True)
        assert type(lazy) is Net and lazy.layers[0].act == "gelu"
        assert all(isinstance(x, ct.LazyArray) for x in ct.leaves(lazy))
        assert np.array_equal(np.asarray(lazy.layers[1].w), net.layers[1].w)
        part = ct.load(path, like=like, where=PathContains("b"))
        assert type(part.layers[0].b) is torch.Tensor
        assert np.array_equal(part.layers[0].b.numpy(), net.layers[0].b)
        assert type(part.layers[1].b) is np.ndarray
        assert isinstance(part.layers[0].w, ct.LazyArray)
        bad = Net([Dense(np.zeros((3, 5), np.float32), np.zeros(4, np.float32))] * 2)
        with pytest.raises(ct.StructureError, match=r"shape changed: \.layers\[0\]\.w"):
            ct.load(path, like=bad, lazy=True)


def test_like_loads_a_hub_style_sharded_checkpoint_by_dotted_names(tmp_path):
    """A sharded checkpoint written by the hub's conventions (flat dotted names, no
    containers tree) loads into a template with like=, whole or lazily."""
    ckpt = tmp_path / "hub"
    ckpt.mkdir()
    w, b = np.ones((3, 4), np.float32), np.zeros(4, np.float32)
    safetensors.numpy.save_file({"layers.0.w": w}, str(ckpt / "model-00001-of-00002.safetensors"))
    safetensors.numpy.save_file({"layers.0.b": b}, str(ckpt / "model-00002-of-00002.safetensors"))
    index = {
        "metadata": {"total_size": w.nbytes + b.nbytes},
        "weight_map": {
            "layers.0.w": "model-00001-of-00002.safetensors",
            "layers.0.b": "model-00002-of-00002.safetensors",
        },
    }
    (ckpt / "model.safetensors.index.json").write_text(json.dumps(index))
    like = {"layers": [{"w": np.zeros((3, 4), np.float32), "b": np.ones(4, np.float32)}]}
    out = ct.load(ckpt, like=like)
    assert np.array_equal(out["layers"][0]["w"], w) and np.array_equal(out["layers"][0]["b"], b)
    lazy = ct.load(ckpt, like=like, lazy=True)
    assert isinstance(lazy["layers"][0]["w"], ct.LazyArray)


def _fit_by_paths(path: Any, like: Any) -> Any:
    """``load(path, like=)`` through ``fit`` alone (the by-path plain twin of
    ``_positional.positional``): the result, or the error's class and message."""
    from containers._serialize import _like, _load

    try:
        pairs, max_path = _like.template_paths(like)
        leaves = _load.read_leaves(path, max_path=max_path)
        return _like.fit(like, leaves, f"{os.fspath(path)}: ", pairs=pairs)
    except (ct.SerializationError, ct.StructureError) as err:
        return (type(err).__name__, str(err))


def _loaded(path: Any, like: Any) -> Any:
    try:
        return ct.load(path, like=like)
    except (ct.SerializationError, ct.StructureError) as err:
        return (type(err).__name__, str(err))


def test_like_by_position_agrees_with_like_by_path(tmp_path):
    """load(like=) takes the file's leaves by position when its tree has the template's
    shape (no path built) and gives what fitting by path gives, on matching templates
    and on every kind of mismatch (keys, leaf or node, shapes, dtypes, kept values,
    aliases, scalars, None, deques, frameworks), both engines."""
    from collections import deque

    from containers._serialize._positional import NO_FIT

    rng = np.random.default_rng(5)
    a = rng.normal(size=4).astype(np.float32)
    base = {
        "g": [Dense(rng.normal(size=(2, 3)), np.zeros(3), act="x"), Dense(a, a)],
        "s": {"k1": 1.5, "k2": "text", "k3": None},
        "q": deque([np.arange(3), 7]),
        "t": (np.ones(2, np.int8), ()),
    }
    path = tmp_path / "m.safetensors"
    ct.save(path, base)
    variants = [
        base,
        {**base, "s": {"k1": 2.5, "k2": "other", "k3": None}},  # other scalar values
        {**base, "s": {"k1": 1.5, "k2": "text"}},  # a key fewer
        {**base, "s": {"k1": 1.5, "k2": "text", "k4": None}},  # another key
        {**base, "q": deque([np.arange(3)])},  # a shorter deque
        {**base, "q": [np.arange(3), 7]},  # a list for a deque
        {**base, "t": (np.ones(2, np.int16), ())},  # a dtype
        {**base, "t": (np.ones(3, np.int8), ())},  # a shape
        {**base, "t": (np.ones(2, np.int8), 0.0)},  # a leaf for a node
        {**base, "t": ((), np.ones(2, np.int8))},  # the same leaves, swapped places
        {**base, "g": [Dense(np.zeros((2, 3)), np.ones(3), act="y"), Dense(a, a)]},
        {**base, "g": [Dense(np.zeros((2, 3)), np.ones(3)), Dense(a, torch.zeros(4))]},
        {**base, "g": [Linear(np.zeros((2, 3)), np.ones(3)), Dense(a, a)]},
        {**base, "s": {"k1": np.float64(1.5), "k2": "text", "k3": None}},
        {**base, "s": {"k1": np.zeros(1), "k2": "text", "k3": None}},
        {"g": base["g"]},
    ]
    as_torch = ct.fmap(
        lambda x: torch.from_numpy(x.copy()) if isinstance(x, np.ndarray) else x, base
    )
    variants += [
        as_torch,  # every array leaf a CPU tensor: checked and converted by columns
        {**as_torch, "t": (torch.ones(2, dtype=torch.int16), ())},  # a torch dtype
        {**as_torch, "t": (torch.ones(3, dtype=torch.int8), ())},  # a torch shape
        {**as_torch, "t": (torch.nn.Parameter(torch.ones(2)), ())},  # a Parameter's dtype
        {  # Parameters: converted one by one
            **as_torch,
            "g": [as_torch["g"][0], Dense(torch.nn.Parameter(torch.from_numpy(a.copy())), a)],
        },
    ]
    taken = 0
    for like in variants:
        expected = _fit_by_paths(path, like)
        got = _loaded(path, like)
        if isinstance(expected, tuple):
            assert got == expected
        else:
            (xs, sx), (ys, sy) = ct.flatten(got), ct.flatten(expected)
            assert sx == sy and len(xs) == len(ys)
            for x, y in zip(xs, ys):
                assert type(x) is type(y)
                if isinstance(x, torch.Tensor):
                    assert x.requires_grad == y.requires_grad
                    assert torch.equal(x.detach(), y.detach())
                else:
                    assert np.array_equal(np.asarray(x), np.asarray(y))
        taken += _by_position(path, like, columns=False)[0] is not NO_FIT
    # base, other scalar and kept values, a list for a deque, a numpy scalar template,
    # a torch leaf, the torch template and its Parameter leaf
    assert taken == 8


def _by_position(path: Any, like: Any, *, columns: bool) -> tuple[Any, bool]:
    """``_positional.positional`` on the file at ``path``, with or without the records
    of its tree as a ``Structure``'s (``Records.columns``, made for a tree of builtins),
    and whether it took its leaves from those columns."""
    from containers._serialize import _format, _load, _positional

    with open(path, "rb") as f:
        lay = _format.read_layout(f, ct.Limits())
        records, wants = _load._tree_records(lay, ct.Limits(), True, columns=columns)
        arrays = _format.read_arrays(f, lay, wants)
    tree = _positional.positional(like, records, arrays, ct.Limits())
    return tree, records.columns is not None and records.columns[1] is None


def test_like_by_columns_agrees_with_like_by_records_and_by_path(tmp_path):
    """A file of builtins fits a template by comparing the two trees' Structure records
    at once (the columns containers._scan gives); that gives what reading the file's
    records one by one gives, and what fitting by path gives, on matching templates and
    on every kind of mismatch, both engines."""
    from containers._serialize import _layout_fast
    from containers._serialize._positional import NO_FIT

    rng = np.random.default_rng(7)
    shared = rng.normal(size=3).astype(np.float32)
    base = {  # dicts in key order: the columns are made for them
        "layers": [{"b": np.zeros(3, np.float32), "w": rng.normal(size=(2, 3))} for _ in range(3)],
        "meta": {"name": "run", "none": None, "step": 7},
        "t": (np.arange(4), ()),
        "tied": [shared, shared],  # one array, two places: an alias in the file
    }
    path = tmp_path / "b.safetensors"
    ct.save(path, base)
    as_torch = ct.fmap(
        lambda x: torch.from_numpy(x.copy()) if isinstance(x, np.ndarray) else x, base
    )
    variants = [
        base,
        ct.fmap(lambda x: x.copy() if isinstance(x, np.ndarray) else x, base),  # unshared
        {**base, "meta": {"name": "other", "none": None, "step": 8}},  # other scalars
        {**base, "meta": {"name": "run", "step": 7}},  # a key fewer
        {**base, "meta": {"step": 7, "name": "run", "none": None}},  # keys reordered
        {**base, "t": [np.arange(4), ()]},  # a list for a tuple
        {**base, "t": (np.arange(5), ())},  # a shape
        {**base, "t": (np.arange(4, dtype=np.int8), ())},  # a dtype
        {**base, "t": (np.arange(4), None)},  # a leaf for a node
        {
            **base,
            "meta": {"name": "run", "none": None, "step": np.zeros(1)},
        },  # an array for a scalar
        as_torch,
        {**as_torch, "t": (torch.arange(4, dtype=torch.int32), ())},  # a torch dtype
        {k: v for k, v in base.items() if k != "tied"},
    ]
    taken, by_columns_taken = 0, 0
    for like in variants:
        expected = _fit_by_paths(path, like)
        by_records, _ = _by_position(path, like, columns=False)
        by_columns, took_columns = _by_position(path, like, columns=True)
        assert (by_records is NO_FIT) == (by_columns is NO_FIT)
        by_columns_taken += took_columns
        if by_columns is NO_FIT:
            continue
        taken += 1
        assert not isinstance(expected, tuple)
        for got in (by_records, by_columns):
            (xs, sx), (ys, sy) = ct.flatten(got), ct.flatten(expected)
            assert sx == sy and len(xs) == len(ys)
            for x, y in zip(xs, ys):
                assert type(x) is type(y)
                assert np.array_equal(np.asarray(x), np.asarray(y))
            # the alias gives the same array (a numpy template), or the same memory
            assert (got["tied"][0] is got["tied"][1]) == (
                expected["tied"][0] is expected["tied"][1]
            )
            assert np.shares_memory(np.asarray(got["tied"][0]), np.asarray(got["tied"][1]))
    # base, its unshared copy, other scalars, the torch template, and (record by record)
    # reordered keys and a list for a tuple
    assert taken == 6
    # by columns: those with the file's records, the leaf mismatches included (the
    # columns come from containers._scan: none without the extension)
    assert by_columns_taken == (0 if _layout_fast._scan is None else 8)


def test_arrays_fit_agrees_with_its_plain_twin():
    """containers._scan.arrays_fit (load(like=)'s check of a file's leaves against a
    template's, in C) gives what arrays_fit_plain gives: the types of the template
    leaves facing scalars and the arrays facing CPU tensors made tensors, or None (and
    nothing converted) for any array, shape, dtype, device, type or length that
    differs, on random pairs of leaf lists."""
    import random

    from containers._serialize import _layout_fast
    from containers._serialize._positional import _wrapped, arrays_fit_plain

    if _layout_fast._scan is None:
        pytest.skip("containers._scan is not built")

    class Sub(np.ndarray):
        pass

    def leaf(rng: random.Random) -> Any:
        shape = rng.choice([(), (0,), (2,), (3,), (6,), (2, 3), (3, 2), (1, 2, 3)])
        # equal dtypes that are distinct objects too: ">f4", "U3", a structured one
        dtype = rng.choice([np.float32, np.float64, np.int8, ">f4", "U3", [("a", "<f4")]])
        tdtype = rng.choice([torch.float32, torch.float64, torch.bfloat16])
        return rng.choice(
            [
                lambda: np.zeros(shape, dtype),
                lambda: np.zeros((*shape, 2), dtype)[..., 0],  # a strided view
                lambda: np.zeros(shape, dtype).view(Sub),
                lambda: torch.zeros(shape, dtype=tdtype),
                lambda: torch.zeros(shape, device="meta"),
                lambda: torch.nn.Parameter(torch.zeros(shape)),
                lambda: rng.choice([1.5, 7, "s", None, True]),
                lambda: np.float32(2.0),
            ]
        )()

    def like_file(v: Any, w: Any) -> Any:  # a template leaf that fits the file's v
        if type(v) is not np.ndarray or v.dtype.byteorder == ">":
            return w
        if isinstance(w, torch.Tensor) and v.dtype.kind in "fiu":
            return torch.from_numpy(v.copy())
        return np.zeros_like(v)

    rng = random.Random(3)
    outcomes = set()
    extra = (torch.Tensor, _wrapped(torch), torch.from_numpy)
    for _ in range(3_000):
        n = rng.randrange(0, 6)
        values = [leaf(rng) for _ in range(n)]
        wants = [leaf(rng) for _ in range(n + (rng.random() < 0.05))]
        if rng.random() < 0.5:  # mostly fitting pairs: the same shapes and dtypes
            wants = [like_file(v, w) for v, w in zip(values, wants)]
        for args in ((np.ndarray,), (np.ndarray, *extra)):
            by_c, by_plain = list(values), list(values)
            got = _layout_fast._scan.arrays_fit(by_c, wants, *args)
            assert got == arrays_fit_plain(by_plain, wants, *args), (values, wants)
            assert list(map(type, by_c)) == list(map(type, by_plain))
            assert all(x is y for x, y in zip(by_c, by_plain) if type(x) is not torch.Tensor)
            same = all(x is y for x, y in zip(by_c, values))
            assert same or got is not None  # nothing converted when no fit
            outcomes.add(None if got is None else (len(got), same))
    assert {None, (0, True), (0, False)} <= outcomes, outcomes
    with pytest.raises(TypeError, match="must be list"):
        _layout_fast._scan.arrays_fit((), [], np.ndarray)
    with pytest.raises(TypeError, match="a tensor type needs dtypes and convert"):
        _layout_fast._scan.arrays_fit([], [], np.ndarray, torch.Tensor)
    with pytest.raises(TypeError, match=r"ndarray must be numpy\.ndarray, got Sub"):
        _layout_fast._scan.arrays_fit([], [], Sub)


def test_array_head_reads_what_numpy_says():
    """containers._scan.array_head, what arrays_fit reads of a numpy array from the
    array object, gives ``(a.shape, a.dtype)`` (the dtype object itself) on arrays of
    every dtype kind, 0 to 32 dimensions, views and empty ones; load(like=) uses the C
    check only when that holds (``_reads_numpy``)."""
    import random

    from containers._serialize import _layout_fast
    from containers._serialize._positional import _reads_numpy

    scan = _layout_fast._scan
    if scan is None:
        pytest.skip("containers._scan is not built")
    rng = random.Random(5)
    dtypes = ["f4", ">f8", "i1", "u8", "?", "c16", "U5", "S2", "M8[s]", [("a", "<i2")]]
    for _ in range(500):
        shape = tuple(rng.randrange(0, 3) for _ in range(rng.choice([0, 1, 2, 5, 32])))
        a = np.zeros(shape, rng.choice(dtypes))
        if a.ndim and rng.random() < 0.5:
            a = a[..., ::2] if rng.random() < 0.5 else a.T
        got_shape, got_dtype = scan.array_head(a, np.ndarray)
        assert got_shape == a.shape and got_dtype is a.dtype
    assert _reads_numpy(scan) is True
    with pytest.raises(TypeError, match=r"array_head: expected a numpy\.ndarray, got list"):
        scan.array_head([], np.ndarray)
    with pytest.raises(TypeError, match=r"ndarray must be numpy\.ndarray, got list"):
        scan.array_head(np.zeros(1), list)
