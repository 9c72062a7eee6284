"""Lazy and partial loads (load(lazy=True), load(where=), LazyArray, materialize) and the
LazyContainer protocol (lazy_traverse, composite.lazy_traverse): real files, bytes read
measured by the kernel (/proc/self/io rchar)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import containers as ct
from containers import composite
from containers.filters import PathContains, WithTag


def rchar() -> int:
    """Bytes this process has read through read-like system calls so far."""
    with open("/proc/self/io", "rb") as f:
        for line in f:
            if line.startswith(b"rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar")


needs_proc_io = pytest.mark.skipif(
    not os.path.exists("/proc/self/io"), reason="needs /proc/self/io"
)


@ct.container
class Layer:
    w: np.ndarray = ct.field(tags=("param",))
    b: np.ndarray = ct.field(tags=("param",))
    stats: np.ndarray = ct.field(default_factory=lambda: np.zeros(2))


def header_bytes(path) -> int:
    with open(path, "rb") as f:
        return 8 + int.from_bytes(f.read(8), "little")


@pytest.fixture
def big(tmp_path):
    """A checkpoint of 200 float32 arrays of 40 KB each (8 MB of data)."""
    tree = {f"layer{i:03d}": np.full(10_000, i, np.float32) for i in range(200)}
    path = tmp_path / "big.safetensors"
    ct.save(path, tree)
    return path, tree


@needs_proc_io
def test_a_lazy_load_reads_the_header_only(big):
    """load(lazy=True) reads the header and no tensor data; so do flatten, fmap's
    structure, filters and pformat on the lazy tree."""
    path, _ = big
    small = path.with_name("small.safetensors")
    ct.save(small, {"a": np.zeros(1)})
    lazy = ct.load(small, lazy=True)  # imports what the calls below use
    ct.leaves(lazy, where=PathContains("a"))
    ct.leaves(lazy, where=WithTag("param"))
    ct.fmapstructure(lambda x: x.shape, lazy)
    ct.pformat(lazy)
    before = rchar()
    lazy = ct.load(path, lazy=True)
    ct.leaves(lazy, where=PathContains("layer007"))
    ct.leaves(lazy, where=WithTag("param"))  # looks for a .tag on each leaf
    ct.fmapstructure(lambda x: x.shape, lazy)
    text = ct.pformat(lazy)
    read = rchar() - before
    assert read <= header_bytes(path) + 4096
    assert "'layer007': float32[10000] (lazy)" in text


def test_a_lazy_array_knows_its_tensor_and_reads_a_fresh_copy(big):
    """A LazyArray has name, shape, dtype, nbytes, ndim, size and file; load() and
    np.asarray give fresh writeable arrays with the saved values."""
    path, tree = big
    x = ct.load(path, lazy=True)["layer005"]
    assert isinstance(x, ct.LazyArray)
    assert (x.name, x.shape, x.dtype, x.nbytes, x.ndim, x.size, len(x)) == (
        "['layer005']",
        (10_000,),
        np.dtype(np.float32),
        40_000,
        1,
        10_000,
        10_000,
    )
    assert x.file == str(path)
    a, b = x.load(), np.asarray(x)
    assert a is not b and a.flags.writeable
    assert np.array_equal(a, tree["layer005"]) and np.array_equal(b, tree["layer005"])
    assert np.asarray(x, dtype=np.float64).dtype == np.float64


@needs_proc_io
def test_a_partial_load_reads_only_the_selected_arrays(big):
    """load(where=) of 1% of the arrays reads at most that 1% of the data plus the
    header; the other leaves stay lazy."""
    path, tree = big
    want = ("layer010", "layer150")  # 2 of 200 arrays
    ct.materialize({"a": 1}, lambda p, v: True)  # imports what load(where=) uses
    before = rchar()
    part = ct.load(path, where=lambda p, v: ct.keystr(p) in ("['layer010']", "['layer150']"))
    read = rchar() - before
    assert read <= 2 * 40_000 + header_bytes(path) + 4096
    for name, value in part.items():
        if name in want:
            assert type(value) is np.ndarray and np.array_equal(value, tree[name])
        else:
            assert isinstance(value, ct.LazyArray)


def test_field_tags_select_a_partial_load(tmp_path):
    """where=WithTag reads the arrays under fields tagged so; the rest stay lazy."""
    path = tmp_path / "layers.safetensors"
    ct.save(path, [Layer(np.ones(3), np.zeros(3)), Layer(np.ones(2), np.ones(2))])
    out = ct.load(path, where=WithTag("param"))
    assert all(type(layer.w) is np.ndarray and type(layer.b) is np.ndarray for layer in out)
    assert all(isinstance(layer.stats, ct.LazyArray) for layer in out)
    full = ct.materialize(out)
    assert type(full[1].stats) is np.ndarray


def test_materialize_reads_a_shared_array_once_and_keeps_it_shared(tmp_path):
    """An array at two paths is one lazy leaf, read once and still one object after."""
    shared = np.arange(4.0)
    path = tmp_path / "s.safetensors"
    ct.save(path, {"a": shared, "b": shared, "c": np.zeros(1)})
    lazy = ct.load(path, lazy=True)
    assert lazy["a"] is lazy["b"]
    out = ct.materialize(lazy, PathContains("a"))
    assert out["a"] is out["b"] and type(out["a"]) is np.ndarray
    assert isinstance(out["c"], ct.LazyArray)


def test_materialize_reports_progress_and_works_with_threads(big):
    """materialize with workers=2 gives the same arrays, progress ends at the total."""
    path, tree = big
    seen = []
    out = ct.materialize(
        ct.load(path, lazy=True), workers=2, progress=lambda d, t: seen.append((d, t))
    )
    assert all(np.array_equal(out[k], tree[k]) for k in tree)
    assert seen[0] == (0, 8_000_000) and seen[-1] == (8_000_000, 8_000_000)


def test_a_corrupt_tensor_is_found_when_it_is_read(tmp_path):
    """A lazy load of a file with a damaged tensor succeeds; reading that tensor raises
    IntegrityError naming the file and the tensor (verify=False reads it anyway)."""
    path = tmp_path / "c.safetensors"
    ct.save(path, {"a_good": np.zeros(4), "b_bad": np.ones(4)})  # file order: by name
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # the last byte of the data: b_bad's
    path.write_bytes(bytes(data))
    lazy = ct.load(path, lazy=True)
    assert np.array_equal(lazy["a_good"].load(), np.zeros(4))
    with pytest.raises(
        ct.IntegrityError, match=rf"^{path}: tensor \"\['b_bad'\]\": CRC32 mismatch"
    ):
        lazy["b_bad"].load()
    assert ct.load(path, lazy=True, verify=False)["b_bad"].load().shape == (4,)


def test_a_lazy_array_reads_the_file_it_was_loaded_from(tmp_path):
    """Saving over the path after a lazy load does not change what the lazy arrays read."""
    path = tmp_path / "m.safetensors"
    ct.save(path, {"w": np.arange(5.0)})
    lazy = ct.load(path, lazy=True)
    ct.save(path, {"w": np.zeros(5)})
    assert np.array_equal(lazy["w"].load(), np.arange(5.0))


def test_a_lazy_tree_saves_as_its_arrays(tmp_path):
    """save reads the lazy leaves of a lazy tree and writes their values."""
    path = tmp_path / "a.safetensors"
    ct.save(path, {"w": np.arange(3.0), "n": 2})
    ct.save(tmp_path / "b.safetensors", ct.load(path, lazy=True))
    out = ct.load(tmp_path / "b.safetensors")
    assert np.array_equal(out["w"], np.arange(3.0)) and out["n"] == 2


def test_ndarray_methods_read_a_lazy_array(tmp_path):
    """ndarray's attributes and methods (.T, .sum()) read the array, so a migration
    written for arrays runs on a lazy load; other attributes are AttributeErrors."""
    path = tmp_path / "a.safetensors"
    ct.save(path, {"w": np.arange(6.0).reshape(2, 3)})
    w = ct.load(path, lazy=True)["w"]
    assert w.T.shape == (3, 2) and w.sum() == 15.0
    assert getattr(w, "tag", None) is None
    with pytest.raises(AttributeError, match=r"'LazyArray' object has no attribute 'detach'"):
        w.detach()


def test_lazy_does_not_combine_with_mmap(tmp_path):
    """load(lazy=True, mmap=True) is a TypeError saying what to drop."""
    path = tmp_path / "a.safetensors"
    ct.save(path, {"w": np.arange(3.0)})
    with pytest.raises(TypeError, match=r"mmap=True .* does not combine with lazy="):
        ct.load(path, lazy=True, mmap=True)


def test_a_lazy_load_checks_the_root_and_the_tree(tmp_path):
    """expect= and the tree's validation apply to lazy loads as to full ones."""
    path = tmp_path / "a.safetensors"
    ct.save(path, [np.zeros(2)])
    with pytest.raises(ct.SchemaError, match=r"expected a 'dict' at the root"):
        ct.load(path, lazy=True, expect=dict)
    assert isinstance(ct.load(path, lazy=True, expect=list)[0], ct.LazyArray)


# --- the LazyContainer protocol ----------------------------------------------------


def test_lazy_traverse_hands_templates_and_producers_one_level_deep(tmp_path):
    """lazy_traverse gives fun each child's template (path, shape, dtype) and a
    producer, and rebuilds the node; a lazy child is read only if produced."""
    path = tmp_path / "l.safetensors"
    ct.save(path, Layer(np.ones((2, 3), np.float32), np.zeros(3)))
    lazy = ct.load(path, lazy=True)
    seen = []

    def fun(template, produce, acc):
        seen.append((ct.keystr(template.path), template.shape, str(template.dtype)))
        return (produce() if template.path[0].name == "w" else template), acc + 1

    out, n = ct.lazy_traverse(lazy, 0, fun)
    assert n == 3 and type(out) is Layer
    assert seen == [
        (".w", (2, 3), "float32"),
        (".b", (3,), "float64"),
        (".stats", (2,), "float64"),
    ]
    assert type(out.w) is np.ndarray and isinstance(out.b, ct.Template)


def test_lazy_traverse_on_a_leaf_calls_fun_on_the_leaf():
    """On a leaf, fun receives the leaf's own template (empty path) and producer."""
    out, acc = ct.lazy_traverse(np.zeros(3), None, lambda t, p, a: (p() + 1, t))
    assert np.array_equal(out, np.ones(3)) and acc == ct.Template((), (3,), np.dtype(float))


def test_lazy_traverse_refuses_a_fun_that_returns_no_pair():
    """A fun returning a bare value is a TypeError naming lazy_traverse."""
    with pytest.raises(TypeError, match=r"lazy_traverse: fun must return a pair"):
        ct.lazy_traverse([1], 0, lambda t, p, a: 5)
    with pytest.raises(TypeError, match=r"lazy_traverse"):
        ct.lazy_traverse([1], 0, "not callable")


class NpyDirectory:
    """A hand-written lazy container: a directory of .npy files, read on demand."""

    def __init__(self, path):
        self.path = path

    def __container_lazy_traverse__(self, acc, fun):
        out = {}
        for name in sorted(os.listdir(self.path)):
            full = os.path.join(self.path, name)
            mapped = np.load(full, mmap_mode="r")  # reads the .npy header only
            template = ct.Template((ct.DictKey(name),), mapped.shape, mapped.dtype)
            out[name], acc = fun(template, lambda full=full: np.load(full), acc)
        return out, acc


def test_a_hand_written_lazy_container_becomes_a_container(tmp_path):
    """A foreign object implementing __container_lazy_traverse__ is a LazyContainer;
    lazy_traverse and composite.lazy_traverse turn it into a dict, with paths that
    continue the outer tree's."""
    np.save(tmp_path / "a.npy", np.arange(3))
    np.save(tmp_path / "b.npy", np.ones((2, 2)))
    npy = NpyDirectory(tmp_path)
    assert isinstance(npy, ct.LazyContainer) and isinstance({"a": 1}, ct.LazyContainer)
    assert isinstance(Layer(np.ones(1), np.ones(1)), ct.LazyContainer)
    assert not isinstance(3, ct.LazyContainer)
    out, acc = ct.lazy_traverse(npy, [], lambda t, p, a: (p(), [*a, t.shape]))
    assert list(out) == ["a.npy", "b.npy"] and acc == [(3,), (2, 2)]
    tree = {"data": npy, "step": 4}
    out, paths = composite.lazy_traverse(tree, [], lambda t, p, a: (p(), [*a, ct.keystr(t.path)]))
    assert paths == ["['data']['a.npy']", "['data']['b.npy']", "['step']"]
    assert np.array_equal(out["data"]["b.npy"], np.ones((2, 2))) and out["step"] == 4


def test_composite_lazy_traverse_reads_only_what_fun_produces(big):
    """composite.lazy_traverse over a lazy tree: templates for every leaf, data read
    only for the leaves whose producer is called."""
    path, tree = big
    lazy = ct.load(path, lazy=True)
    out, n = composite.lazy_traverse(
        lazy, 0, lambda t, p, a: ((p() if t.path[0].raw == "layer001" else t.shape), a + 1)
    )
    assert n == 200 and np.array_equal(out["layer001"], tree["layer001"])
    assert out["layer002"] == (10_000,)


def test_pformat_marks_lazy_leaves(tmp_path):
    """pformat shows a lazy leaf as dtype[shape] (lazy), a plain array without it."""
    ct.save(tmp_path / "m.safetensors", {"a": np.zeros((2, 2), np.float32)})
    lazy = ct.load(tmp_path / "m.safetensors", lazy=True)
    assert ct.pformat(lazy) == "{'a': float32[2,2] (lazy)}  # 4 params, 16 B"
    assert (
        ct.pformat({"a": np.zeros((2, 2), np.float32)}) == "{'a': float32[2,2]}  # 4 params, 16 B"
    )


def test_progress_of_a_single_file_save_and_load(tmp_path):
    """save and load of one file call progress(0, total) first and (total, total) last."""
    path = tmp_path / "p.safetensors"
    saved, loaded = [], []
    ct.save(
        path, {"w": np.zeros(1000), "v": np.ones(10)}, progress=lambda d, t: saved.append((d, t))
    )
    ct.load(path, progress=lambda d, t: loaded.append((d, t)))
    assert saved == [(0, 8080), (8080, 8080)]
    assert loaded[0][0] == 0 and loaded[-1][0] == loaded[-1][1] >= 8080


def test_a_template_load_reports_progress_and_reads_on_workers(tmp_path):
    """load(like=) reads as load does: progress(0, total) first and (total, total) last,
    read or mapped, and workers= threads reading at once (an error names the bad count)."""
    path = tmp_path / "p.safetensors"
    tree = {"w": np.zeros(1000), "v": [np.ones(10), 2.0]}
    ct.save(path, tree)
    for mmap in (False, True):
        loaded = []
        got = ct.load(
            path,
            like=tree,
            mmap=mmap,
            workers=2,
            progress=lambda d, t, seen=loaded: seen.append((d, t)),
        )
        assert np.array_equal(got["w"], tree["w"]) and got["v"][1] == 2.0
        assert loaded[0][0] == 0 and loaded[-1][0] == loaded[-1][1] >= 8080, (mmap, loaded)
    with pytest.raises(TypeError, match="load: workers must be a positive int or None"):
        ct.load(path, like=tree, workers=0)


def test_a_lazy_load_of_a_plain_safetensors_file_is_refused_as_a_load_is(tmp_path):
    """A single safetensors file without a containers tree: load, lazy or partial,
    raises the same FormatError (a sharded hub checkpoint loads as a flat dict)."""
    from safetensors.numpy import save_file

    path = tmp_path / "plain.safetensors"
    save_file({"a": np.zeros(2)}, str(path))
    for options in ({}, {"lazy": True}, {"where": PathContains("a")}):
        with pytest.raises(ct.FormatError, match=r"was not written by containers"):
            ct.load(path, **options)


def test_a_fifo_is_refused_before_it_is_read(tmp_path):
    """A lazy load of a FIFO is a FormatError naming it, without blocking on a read."""
    path = tmp_path / "fifo.safetensors"
    os.mkfifo(path)
    with pytest.raises(ct.FormatError, match=rf"^{path}: not a regular file \(a FIFO\)"):
        ct.load(path, lazy=True)


def test_a_partial_load_of_a_corrupt_tensor_names_the_file_once(tmp_path):
    """load(where=) selecting a damaged tensor raises IntegrityError whose message starts
    with the file's path, once."""
    path = tmp_path / "c.safetensors"
    ct.save(path, {"a_good": np.zeros(4), "b_bad": np.ones(4)})
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(
        ct.IntegrityError, match=rf"^{path}: tensor \"\['b_bad'\]\": CRC32"
    ) as info:
        ct.load(path, where=PathContains("b_bad"))
    assert str(info.value).count(str(path)) == 1


def test_a_big_single_file_is_written_and_read_on_threads_with_progress(tmp_path):
    """A single-file save and load of 48 MB with workers=2 move pieces on two threads,
    report progress as pieces complete (from the calling thread), and give the bytes
    and values of a one-thread save and load."""
    import threading

    rng = np.random.default_rng(0)
    tree = {
        "big": rng.standard_normal(5_000_000).astype(np.float32),
        "mid": [rng.standard_normal(300_000) for _ in range(8)],
        "small": [np.full(10, i, np.int16) for i in range(200)],
        "flags": np.array([True, False] * 50),
    }
    seen: dict[str, list[tuple[int, int]]] = {"save": [], "load": []}
    helpers: set[str] = set()

    def progress_of(op):
        def progress(done, total):
            assert threading.current_thread() is threading.main_thread()
            helpers.update(
                t.name for t in threading.enumerate() if t.name.startswith("containers-io")
            )
            seen[op].append((done, total))

        return progress

    two, one = tmp_path / "two.safetensors", tmp_path / "one.safetensors"
    ct.save(two, tree, workers=2, progress=progress_of("save"))
    ct.save(one, tree, workers=1)
    assert two.read_bytes() == one.read_bytes()
    back = ct.load(two, workers=2, progress=progress_of("load"))
    assert np.array_equal(back["big"], tree["big"]) and np.array_equal(
        back["flags"], tree["flags"]
    )
    assert all(np.array_equal(a, b) for a, b in zip(back["mid"], tree["mid"]))
    assert np.array_equal(ct.load(one, workers=1)["small"][199], tree["small"][199])
    for op in ("save", "load"):
        done = [d for d, _ in seen[op]]
        total = seen[op][-1][1]
        assert done[0] == 0 and done[-1] == total >= 20_000_000 + 8 * 2_400_000, op
        assert done == sorted(done) and len({d for d in done if 0 < d < total}) >= 4, op
    assert len(helpers) >= 2


def test_a_corrupt_tensor_of_a_big_file_is_named_once_by_a_threaded_load(tmp_path):
    """A flipped byte in a big file loaded on two threads is an IntegrityError naming the
    file once and the tensor."""
    path = tmp_path / "c.safetensors"
    ct.save(path, {"a": np.zeros(3_000_000, np.float32), "b": np.ones(3_000_000, np.float32)})
    data = bytearray(path.read_bytes())
    data[-5] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ct.IntegrityError, match=rf"^{path}: tensor \"\['b'\]\": CRC32 mismatch"):
        ct.load(path, workers=2)


def test_workers_must_be_a_positive_int(tmp_path):
    """workers=0, a negative or a non-int is a TypeError naming the default."""
    path = tmp_path / "w.safetensors"
    for bad in (0, -1, 2.0, "2", True):
        with pytest.raises(TypeError, match=r"save: workers must be a positive int or None"):
            ct.save(path, {"a": np.zeros(2)}, workers=bad)
    ct.save(path, {"a": np.zeros(2)})
    with pytest.raises(TypeError, match=r"load: workers must be a positive int or None"):
        ct.load(path, workers=0)


def test_a_lazy_array_of_a_closed_file_refuses_to_read(tmp_path):
    """Once its file is closed a LazyArray raises ValueError naming the file, and never
    reads a descriptor that may now be another file's."""
    path = tmp_path / "c.safetensors"
    ct.save(path, {"a": np.arange(4.0)})
    lazy = ct.load(path, lazy=True, verify=False)
    lazy["a"]._source.close()  # what the last reference going away does
    with pytest.raises(ValueError, match=rf"^{path}: the file was closed, so tensor"):
        np.asarray(lazy["a"])


def test_progress_must_be_callable(tmp_path):
    """progress=3 is a TypeError from save, load and materialize before any file is
    written or read."""
    path = tmp_path / "p.safetensors"
    with pytest.raises(TypeError, match=r"save: progress must be a function"):
        ct.save(path, {"a": np.zeros(2)}, progress=3)
    assert not path.exists()
    ct.save(path, {"a": np.zeros(2)})
    with pytest.raises(TypeError, match=r"load: progress must be a function"):
        ct.load(path, progress=3)
    with pytest.raises(TypeError, match=r"materialize: progress must be a function"):
        ct.materialize(ct.load(path, lazy=True), progress=3)
