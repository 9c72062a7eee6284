"""Sharded checkpoints in the hub's layout: save(max_shard_size=) writes shards that the
safetensors package reads and an index as the hub writes it; load reads them whole,
lazily and partially; hub checkpoints made with safetensors load as flat dicts; hostile
index files and shard sets raise SerializationError naming the index; the directory
appears atomically (killed writers)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import containers as ct
from containers.filters import PathContains

INDEX = "model.safetensors.index.json"


def model(n: int = 8) -> dict[str, object]:
    return {
        "layers": [{"w": np.full((50, 20), i, np.float32), "b": np.full(20, i)} for i in range(n)],
        "step": 12,
    }


def test_a_sharded_save_writes_the_hub_layout(tmp_path):
    """Shards named model-0000i-of-0000N, each a safetensors file the safetensors package
    reads; the index has metadata.total_size and a weight_map naming every tensor's
    shard, sorted and indented as the hub writes it."""
    tree = model()
    out = tmp_path / "ckpt"
    ct.save(out, tree, max_shard_size=10_000)
    names = sorted(os.listdir(out))
    n = len(names) - 1
    assert n > 1 and names[-1] == INDEX
    assert names[:-1] == [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
    text = (out / INDEX).read_text()
    index = json.loads(text)
    assert text == json.dumps(index, indent=2, sort_keys=True) + "\n"
    assert set(index) == {"metadata", "weight_map"}
    total = 0
    seen = {}
    for shard in names[:-1]:
        arrays = load_file(out / shard)
        with safe_open(out / shard, "np") as f:
            assert f.metadata() == {"format": "pt"}
        for name, a in arrays.items():
            assert index["weight_map"][name] == shard
            seen[name] = a
            total += a.nbytes
        assert sum(a.nbytes for a in arrays.values()) <= 10_000
    assert index["metadata"]["total_size"] == total
    assert set(seen) == set(index["weight_map"])
    assert np.array_equal(seen["['layers'][3]['w']"], tree["layers"][3]["w"])


def test_a_sharded_checkpoint_loads_whole_lazily_and_partially(tmp_path):
    """load of the directory or of its index rebuilds the tree; lazy=True reads
    nothing; where= reads the selected arrays only."""
    tree = model()
    out = tmp_path / "ckpt"
    ct.save(out, tree, max_shard_size=10_000)
    for path in (out, out / INDEX, str(out)):
        back = ct.load(path)
        assert back["step"] == 12
        for got, want in zip(back["layers"], tree["layers"]):
            assert np.array_equal(got["w"], want["w"]) and np.array_equal(got["b"], want["b"])
    lazy = ct.load(out, lazy=True)
    assert all(isinstance(x, ct.LazyArray) for x in ct.leaves(lazy["layers"]))
    assert len({x.file for x in ct.leaves(lazy["layers"])}) > 1
    part = ct.load(out, where=lambda p, v: ct.keystr(p).startswith("['layers'][5]"))
    assert type(part["layers"][5]["w"]) is np.ndarray
    assert isinstance(part["layers"][4]["w"], ct.LazyArray)
    assert np.array_equal(ct.materialize(part)["layers"][7]["b"], tree["layers"][7]["b"])


def test_shared_arrays_are_stored_once_across_shards(tmp_path):
    """An array at several paths is one tensor in one shard, and one object again."""
    shared = np.arange(3000.0)
    out = tmp_path / "ckpt"
    ct.save(out, {"a": shared, "b": [shared, np.zeros(3000)], "c": shared}, max_shard_size=24_000)
    index = json.loads((out / INDEX).read_text())
    assert sorted(index["weight_map"]) == ["['a']", "['b'][1]"]
    back = ct.load(out)
    assert back["a"] is back["b"][0] is back["c"]


def test_an_array_larger_than_the_shard_size_gets_a_shard_alone(tmp_path):
    """max_shard_size smaller than one array: one array per shard, nothing refused."""
    out = tmp_path / "ckpt"
    ct.save(out, [np.zeros(100), np.ones(100), np.zeros(3)], max_shard_size=10)
    assert len(os.listdir(out)) == 4
    assert np.array_equal(ct.load(out)[1], np.ones(100))


def test_save_checks_max_shard_size(tmp_path):
    """max_shard_size must be a positive int: a TypeError says so, nothing is written."""
    for bad in (0, -5, 1.5, "5GB", True):
        with pytest.raises(TypeError, match=r"save: max_shard_size must be a positive int"):
            ct.save(tmp_path / "x", [np.zeros(2)], max_shard_size=bad)
    assert os.listdir(tmp_path) == []


def test_save_replaces_only_a_checkpoint_directory(tmp_path):
    """A sharded save replaces an older checkpoint or an empty directory, but refuses a
    directory that is not a checkpoint, a file and a missing parent, naming the path."""
    out = tmp_path / "ckpt"
    ct.save(out, {"w": np.zeros(3)}, max_shard_size=100)
    ct.save(out, {"w": np.ones(3)}, max_shard_size=100)
    assert np.array_equal(ct.load(out)["w"], np.ones(3))
    (tmp_path / "empty").mkdir()
    ct.save(tmp_path / "empty", {"w": np.ones(3)}, max_shard_size=100)
    other = tmp_path / "home"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match=r"is not a sharded checkpoint"):
        ct.save(other, {"w": np.ones(3)}, max_shard_size=100)
    assert (other / "notes.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match=r"exists and is not a directory"):
        ct.save(tmp_path / "file", {"w": np.ones(3)}, max_shard_size=100)
    missing = tmp_path / "no-such-dir" / "ckpt"
    with pytest.raises(FileNotFoundError, match=rf"No such file or directory: '{missing}'"):
        ct.save(missing, {"w": np.ones(3)}, max_shard_size=100)
    strays = [n for n in os.listdir(tmp_path) if n.startswith(".")]
    assert strays == []


def test_a_sharded_save_reports_progress(tmp_path):
    """progress is called with (done, total), from 0 to the data's size."""
    seen = []
    ct.save(
        tmp_path / "c",
        model(),
        max_shard_size=5_000,
        workers=2,
        progress=lambda d, t: seen.append((d, t)),
    )
    total = json.loads((tmp_path / "c" / INDEX).read_text())["metadata"]["total_size"]
    assert seen[0] == (0, total) and seen[-1] == (total, total)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


# --- checkpoints written by the hub's conventions -----------------------------------


def hub_checkpoint(directory, tensors_per_shard):
    """A sharded checkpoint as the hub's tools write it: flat names, safetensors shards,
    a hand-written index."""
    directory.mkdir()
    n = len(tensors_per_shard)
    weight_map = {}
    total = 0
    for i, tensors in enumerate(tensors_per_shard, 1):
        name = f"model-{i:05d}-of-{n:05d}.safetensors"
        save_file(tensors, directory / name, metadata={"format": "pt"})
        for key, a in tensors.items():
            weight_map[key] = name
            total += a.nbytes
    index = {
        "metadata": {"total_size": total, "total_parameters": total // 4},
        "weight_map": weight_map,
    }
    (directory / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return weight_map


def test_a_hub_checkpoint_loads_as_a_flat_dict(tmp_path):
    """A checkpoint made by safetensors.numpy.save_file and a hand-written index loads as
    {tensor name: array}, lazily and partially too."""
    shards = [
        {f"model.layers.{i}.weight": np.full((4, 4), i, np.float32) for i in range(3)},
        {f"model.layers.{i}.weight": np.full((4, 4), i, np.float32) for i in range(3, 5)},
        {"lm_head.weight": np.ones((4, 2), np.float32)},
    ]
    weight_map = hub_checkpoint(tmp_path / "hub", shards)
    full = ct.load(tmp_path / "hub")
    assert list(full) == sorted(weight_map)  # the index's order: the hub sorts it
    assert np.array_equal(full["model.layers.4.weight"], np.full((4, 4), 4, np.float32))
    lazy = ct.load(tmp_path / "hub" / INDEX, lazy=True)
    assert all(isinstance(v, ct.LazyArray) for v in lazy.values())
    part = ct.load(tmp_path / "hub", where=PathContains("lm_head.weight"))
    assert type(part["lm_head.weight"]) is np.ndarray
    assert isinstance(part["model.layers.0.weight"], ct.LazyArray)
    with pytest.raises(ct.SerializationError, match=r"expected a 'list' at the root"):
        ct.load(tmp_path / "hub", expect=list)


# --- hostile index files and shard sets --------------------------------------------


@pytest.fixture
def hub(tmp_path):
    shards = [{"a": np.zeros(4, np.float32)}, {"b": np.ones(4, np.float32)}]
    hub_checkpoint(tmp_path / "hub", shards)
    return tmp_path / "hub"


def rewrite(hub, edit):
    index = json.loads((hub / INDEX).read_text())
    edit(index)
    (hub / INDEX).write_text(json.dumps(index))


def refused(hub, match, error=ct.FormatError):
    index = str(hub / INDEX)
    for how in (hub, hub / INDEX):
        with pytest.raises(error, match=rf"^{index}: .*{match}"):
            ct.load(how)
        with pytest.raises(error, match=match):
            ct.load(how, lazy=True)


S1 = "model-00001-of-00002.safetensors"
S2 = "model-00002-of-00002.safetensors"


def test_a_weight_map_pointing_outside_the_directory_is_refused(hub, tmp_path):
    """'../x', an absolute path and a name with a separator are refused before anything
    is opened; a symbolic link to a file outside the directory is refused."""
    outside = tmp_path / "outside.safetensors"
    save_file({"b": np.ones(4, np.float32)}, outside)
    for name in ("../outside.safetensors", str(outside), "sub/x.safetensors", ".."):
        rewrite(hub, lambda ix, name=name: ix["weight_map"].update(b=name))
        refused(hub, r"which is not a file name in the checkpoint's directory")
    os.symlink(outside, hub / "link.safetensors")
    rewrite(hub, lambda ix: ix["weight_map"].update(b="link.safetensors"))
    refused(hub, r"is a symbolic link to .*outside the checkpoint's directory")


def test_a_symbolic_link_inside_the_directory_is_followed(hub):
    """A shard that is a link to another file in the directory loads."""
    os.rename(hub / S2, hub / "real.safetensors")
    os.symlink("real.safetensors", hub / S2)
    assert np.array_equal(ct.load(hub)["b"], np.ones(4, np.float32))


def hub_cache_snapshot(cache):
    """A checkpoint in the Hugging Face hub cache's layout: the files are blobs named by
    hash, and snapshots/<rev>/ holds relative symbolic links to them."""
    import hashlib

    made = cache / "made"
    hub_checkpoint(made, [{"a": np.zeros(4, np.float32)}, {"b": np.ones(4, np.float32)}])
    repo = cache / "models--org--tiny"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    for f in sorted(made.iterdir()):
        blob = hashlib.sha256(f.read_bytes()).hexdigest()
        os.rename(f, repo / "blobs" / blob)
        os.symlink(f"../../blobs/{blob}", snapshot / f.name)
    return snapshot


def test_a_hub_cache_snapshot_loads_with_follow_links(tmp_path):
    """A hub cache snapshot (shards linked to ../../blobs) is refused by default, naming
    follow_links=True, and loads whole, lazily, partially and in inspect with it."""
    snapshot = hub_cache_snapshot(tmp_path)
    with pytest.raises(
        ct.FormatError, match=r"outside the checkpoint's directory.*follow_links=True"
    ):
        ct.load(snapshot)
    with pytest.raises(ct.FormatError, match=r"follow_links=True"):
        ct.inspect(snapshot)
    full = ct.load(snapshot, follow_links=True)
    assert np.array_equal(full["b"], np.ones(4, np.float32))
    lazy = ct.load(snapshot / INDEX, lazy=True, follow_links=True)
    assert isinstance(lazy["a"], ct.LazyArray) and not np.asarray(lazy["a"]).any()
    part = ct.load(snapshot, where=PathContains("b"), follow_links=True)
    assert type(part["b"]) is np.ndarray and isinstance(part["a"], ct.LazyArray)
    assert ct.inspect(snapshot, follow_links=True).tensors["a"] == ("float32", (4,), 16)


def test_follow_links_still_refuses_bad_names_and_targets(tmp_path):
    """With follow_links=True the weight_map's names are still plain names, and a link to
    a directory, a FIFO or nothing is refused."""
    snapshot = hub_cache_snapshot(tmp_path)
    for name in ("../../blobs/x", "/etc/passwd", ".."):
        rewrite_linked(snapshot, lambda ix, name=name: ix["weight_map"].update(b=name))
        with pytest.raises(ct.FormatError, match=r"which is not a file name in the"):
            ct.load(snapshot, follow_links=True)
    os.mkfifo(tmp_path / "fifo")
    for target, match in (
        (tmp_path, r"which is not a regular file"),
        (tmp_path / "fifo", r"which is not a regular file"),
        (tmp_path / "gone", r"which is missing"),
    ):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(snapshot / "odd.safetensors")
        os.symlink(target, snapshot / "odd.safetensors")
        rewrite_linked(snapshot, lambda ix: ix["weight_map"].update(b="odd.safetensors"))
        with pytest.raises(ct.FormatError, match=rf"^{snapshot / INDEX}: .*{match}"):
            ct.load(snapshot, follow_links=True)


def rewrite_linked(snapshot, edit):
    """Edit a snapshot's index, replacing its link by a plain file."""
    index = json.loads((snapshot / INDEX).read_text())
    edit(index)
    os.unlink(snapshot / INDEX)
    (snapshot / INDEX).write_text(json.dumps(index))


def test_missing_and_duplicated_shards_are_refused(hub):
    """A shard that is missing, one that is the same file as another (a hard link), and
    a shard name that is not a string are refused."""
    os.link(hub / S1, hub / "twin.safetensors")
    rewrite(hub, lambda ix: ix["weight_map"].update(b="twin.safetensors"))
    refused(
        hub,
        r"the shards 'model-00001-of-00002.safetensors' and 'twin.safetensors' are the same file",
    )
    rewrite(hub, lambda ix: ix["weight_map"].update(b=S2))
    os.unlink(hub / S2)
    refused(
        hub, r"the shard 'model-00002-of-00002.safetensors' that the weight_map names is missing"
    )
    rewrite(hub, lambda ix: ix["weight_map"].update(b=["x"]))
    refused(
        hub, r"names a shard by the JSON value \['x'\] \(a list\); a shard is named by a string"
    )


def test_tensors_listed_wrongly_are_refused(hub):
    """A tensor the index maps to a shard that does not hold it, a shard holding a tensor
    the index does not list, and a tensor stored in two shards are refused."""
    rewrite(hub, lambda ix: ix["weight_map"].update(c=S1))
    refused(
        hub, r"maps the tensor 'c' to 'model-00001-of-00002.safetensors', which does not hold it"
    )
    rewrite(hub, lambda ix: ix["weight_map"].pop("c"))
    save_file({"a": np.zeros(4, np.float32), "c": np.ones(1, np.float32)}, hub / S1)
    refused(hub, r"holds the tensor 'c', but the weight_map does not list it")
    save_file({"a": np.zeros(4, np.float32)}, hub / S1)
    save_file({"a": np.zeros(4, np.float32), "b": np.ones(4, np.float32)}, hub / S2)
    rewrite(hub, lambda ix: ix["weight_map"].update(b=S2))
    refused(hub, r"holds the tensor 'a', but the weight_map maps it to 'model-00001")


def test_an_index_claiming_a_wrong_size_is_refused(hub):
    """metadata.total_size that is not the shards' bytes, or not an integer, is refused."""
    rewrite(hub, lambda ix: ix["metadata"].update(total_size=10**12))
    refused(hub, r"metadata.total_size is 1000000000000 bytes, but the shards' tensors hold 32")
    rewrite(hub, lambda ix: ix["metadata"].update(total_size="32"))
    refused(hub, r"metadata.total_size '32' is not a non-negative integer")


def test_malformed_indexes_are_refused(hub, tmp_path):
    """Not JSON, duplicate keys, a wrong shape, unknown keys, an index larger than the
    header limit and a FIFO as the index raise SerializationError; a directory without
    an index is not a checkpoint (IsADirectoryError, as open() says)."""
    (hub / INDEX).write_text('{"weight_map": {"a": "x", "a": "y"}}')
    refused(hub, r"the index: duplicate key 'a'")
    (hub / INDEX).write_text("[1, 2]")
    refused(hub, r"the index must be an object with 'weight_map' and 'metadata', got list")
    (hub / INDEX).write_text('{"weight_map": {}, "extra": 1}')
    refused(hub, r"got \['extra', 'weight_map'\]")
    (hub / INDEX).write_text('{"weight_map": ')
    refused(hub, r"not valid JSON")
    (hub / INDEX).write_text('{"weight_map": {}}' + " " * 200)
    with pytest.raises(
        ct.LimitError, match=r"the index has 218 bytes, more than max_header_bytes=100"
    ):
        ct.load(hub, limits=ct.Limits(max_header_bytes=100))
    os.unlink(hub / INDEX)
    for lazy in (False, True):  # not a checkpoint: what open() says of a directory
        with pytest.raises(IsADirectoryError, match=r"Is a directory"):
            ct.load(hub, lazy=lazy)
    os.mkfifo(hub / INDEX)
    with pytest.raises(ct.FormatError, match=rf"^{hub / INDEX}: not a regular file \(a FIFO\)"):
        ct.load(hub / INDEX)


def test_mutated_indexes_raise_only_serialization_errors(tmp_path):
    """2,000 random byte mutations of a sharded checkpoint's index: every load, whole or
    lazy, either succeeds or raises a SerializationError (nothing else escapes)."""
    out = tmp_path / "ckpt"
    ct.save(out, model(3), max_shard_size=5_000)
    original = (out / INDEX).read_bytes()
    rng = random.Random(29)
    alphabet = b'{}[]",:./\\ 0123456789-aez\x00'
    for _ in range(2000):
        data = bytearray(original)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            if rng.random() < 0.5:
                data[i] = rng.choice(alphabet)
            else:
                del data[i]
        (out / INDEX).write_bytes(bytes(data))
        with contextlib.suppress(ct.SerializationError):
            ct.load(out, lazy=rng.random() < 0.5)


#: Values of every JSON type, nested junk and huge numbers, put in place of a field.
JUNK = [
    None,
    True,
    False,
    0,
    -1,
    1.5,
    10**30,
    2**63,
    "",
    "x",
    "../outside.safetensors",
    "/etc/passwd",
    "model.safetensors.index.json",
    "model-00001-of-00002.safetensors",
    [],
    {},
    [1, "a", None],
    {"a": {"b": [{}]}},
    [[[[[[[[[[[]]]]]]]]]]],
    "\u0000",
    "\udcff",
]
#: Raw JSON text put in place of a field's value: what json.dumps never writes.
RAW_JUNK = ["1e999", "-1e999", "NaN", "Infinity", "9" * 5000, "[" * 5000 + "]" * 5000, "1.0"]


def mutate_index(index, rng):
    """The index's text with one field (anywhere: top level, metadata, total_size, the
    tree, the format, a weight_map key or value) replaced by junk of another type, a
    key duplicated, or a key removed."""
    ix = json.loads(json.dumps(index))
    meta, wm = ix["metadata"], ix["weight_map"]
    target = rng.choice([ix, meta, meta, wm])  # metadata: total_size, the tree, the format
    key = rng.choice(list(target))
    how = rng.random()
    raw = None
    if how < 0.45:
        target[key] = rng.choice(JUNK)
    elif how < 0.6:
        raw = rng.choice(RAW_JUNK)
        target[key] = "@@RAW@@"
    elif how < 0.7:
        target.pop(key)
    elif how < 0.8 and target is wm:  # a weight_map key of another shape
        target[rng.choice(["", "../x", "\u0000", "a" * 10_000])] = target.pop(key)
    elif how < 0.9:
        dup = json.dumps(key)
        text = json.dumps(ix)
        return text.replace(f"{dup}:", f"{dup}: null, {dup}:", 1)
    else:  # a new field, of any type, at that level
        target[rng.choice(["extra", "total_size", "weight_map", "metadata"])] = rng.choice(JUNK)
    text = json.dumps(ix)
    return text if raw is None else text.replace('"@@RAW@@"', raw)


FIELD_FUZZ = """
import json, os, random, sys, tracemalloc
sys.path.insert(0, sys.argv[2])
import containers as ct
from test_serialize_shards import INDEX, mutate_index

out, rounds, measure = sys.argv[1], int(sys.argv[3]), sys.argv[4] == "1"
index = json.loads(open(os.path.join(out, INDEX)).read())
rng = random.Random(2929)
names = (os.path.join(out, INDEX), os.path.join(out, "model-"))
failures = 0
worst = 0.0
for _ in range(rounds):
    text = mutate_index(index, rng)
    with open(os.path.join(out, INDEX), "w") as f:
        f.write(text)
    size = len(text.encode())
    op = rng.choice(["load", "lazy", "inspect"])
    if measure:
        tracemalloc.start()
    try:
        if op == "inspect":
            ct.inspect(out)
        else:
            ct.load(out, lazy=op == "lazy")
    except ct.SerializationError as err:
        failures += 1
        assert str(err).startswith(names), (text[:300], err)
    finally:
        peak = tracemalloc.get_traced_memory()[1] if measure else 0
        tracemalloc.stop()
    data = 0 if op != "load" else 40 * (50 * 20 * 4 + 20 * 8)  # the arrays, read whole
    worst = max(worst, (peak - data) / size)
    # measured: up to 11x for a lazy load (the tree, its LazyArrays and the shards'
    # headers), 15x for inspect (its rows too)
    assert peak <= 16 * size + data + 65_536, (op, peak, size, text[:300])
print(failures, round(worst, 1))
"""


def test_indexes_mutated_by_field_type_raise_serialization_errors_naming_the_index(tmp_path):
    """1,500 indexes with a field of another JSON type, junk nested in it, huge numbers,
    duplicated or missing keys: each load (whole or lazy) and inspect succeeds or raises
    a SerializationError naming the index (or the shard whose data it reaches), and
    allocates at most about 16x the index's size (measured in a child process, where no
    other test's threads allocate)."""
    out = tmp_path / "ckpt"
    ct.save(out, model(40), max_shard_size=20_000)
    tests = os.path.dirname(os.path.abspath(__file__))
    run = subprocess.run(
        [sys.executable, "-c", FIELD_FUZZ, str(out), tests, "1500", "1"],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    failures, worst = run.stdout.split()
    assert int(failures) > 1000 and float(worst) <= 16


# --- atomic directories -------------------------------------------------------------

WRITER = """
import sys
import numpy as np
import containers as ct

path = sys.argv[1]
gen = 0
while True:
    gen += 1
    tree = {"gen": gen, "a": np.full(1_000_000, gen, np.float32), "b": [np.full(500_000, gen, np.int64)]}
    ct.save(path, tree, max_shard_size=1_500_000)
    if gen == 1:
        print("ready", flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_killing_a_sharded_writer_leaves_the_old_or_the_new_checkpoint(tmp_path):
    """6 kills at random points of a sharded save loop: the directory always loads whole
    and consistent, and strays are hidden temporary directories only."""
    path = tmp_path / "ckpt"
    rng = random.Random(29)
    seen = set()
    for _ in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.4))
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        tree = ct.load(path)
        gen = tree["gen"]
        assert (tree["a"] == gen).all() and (tree["b"][0] == gen).all()
        seen.add(gen)
        for name in os.listdir(tmp_path):
            assert name == "ckpt" or (name.startswith(".ckpt.") and ".tmp" in name)
    assert len(seen) > 1


# --- containers inspect / diff -------------------------------------------------------


def test_inspect_and_diff_accept_sharded_checkpoints(tmp_path, capsys):
    """`containers inspect DIR` shows the tree from the index and shard headers;
    `containers diff` compares two sharded checkpoints (or one with a file)."""
    from containers._cli import main

    a, b = tmp_path / "a", tmp_path / "b"
    ct.save(a, {"w": [np.zeros(100), np.ones(100)], "n": 1}, max_shard_size=800)
    ct.save(b, {"w": [np.zeros(100), np.full(100, 3.0)], "n": 2}, max_shard_size=800)
    ct.save(tmp_path / "c.safetensors", {"w": [np.zeros(100), np.ones(100)], "n": 1})
    assert main(["inspect", str(a)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{a / INDEX}: containers 1, 2 shards, 2 tensors, 1,600 bytes of data"
    assert out[1:3] == ["(root): dict (2)", "  ['n']: 1"]
    assert out[4].startswith("    [0]: float64[100]  800 B  crc32 ")
    assert main(["diff", str(a), str(b)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "~ ['n']: 1 -> 2",
        "~ ['w'][1]: float64[100] values differ, max abs diff 2",
        f"2 differences: 2 changed, 0 only in {a}, 0 only in {b}",
    ]
    assert main(["diff", str(a), str(tmp_path / "c.safetensors")]) == 0


def test_inspect_lists_a_hub_checkpoint_tensor_by_tensor(tmp_path):
    """A hub checkpoint without a containers tree is listed as a flat list of tensors."""
    hub_checkpoint(tmp_path / "hub", [{"x": np.zeros(2, np.float32)}, {"y": np.ones(3, np.int8)}])
    info = ct.inspect(tmp_path / "hub")
    assert info.format == "safetensors, 2 shards"
    assert str(info).splitlines()[1:] == [
        "(root): sharded safetensors (2 tensors)",
        "  x: float32[2]  8 B",
        "  y: int8[3]  3 B",
    ]


def test_a_corrupt_shard_is_named_when_loaded(tmp_path):
    """A damaged tensor in a shard: the whole load raises IntegrityError naming the shard
    file, the lazy load only when that tensor is read; verify=False loads it."""
    out = tmp_path / "ckpt"
    ct.save(out, {"a": np.zeros(100), "b": np.ones(100)}, max_shard_size=800)
    shard = out / "model-00002-of-00002.safetensors"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0x55
    shard.write_bytes(bytes(data))
    with pytest.raises(ct.IntegrityError, match=rf"^{shard}: tensor \"\['b'\]\": CRC32 mismatch"):
        ct.load(out)
    lazy = ct.load(out, lazy=True)
    assert np.array_equal(lazy["a"].load(), np.zeros(100))
    with pytest.raises(ct.IntegrityError, match=rf"^{shard}: tensor"):
        lazy["b"].load()
    assert ct.load(out, verify=False)["b"].shape == (100,)


SHARDS_PAST_FD_LIMIT = """
import resource, sys
import containers as ct
resource.setrlimit(resource.RLIMIT_NOFILE, (40, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
try:
    ct.load(sys.argv[1], lazy=True)
except ct.LimitError as err:
    print(err)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="resource")
def test_more_shards_than_open_files_allowed_is_a_limit_error(tmp_path):
    """An index naming more shards than the process may open is a LimitError naming the
    index and the fix, not an OSError (checked in a child with a low RLIMIT_NOFILE)."""
    out = tmp_path / "many"
    ct.save(out, [np.zeros(1) for _ in range(60)], max_shard_size=1)
    result = subprocess.run(
        [sys.executable, "-c", SHARDS_PAST_FD_LIMIT, str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{out / INDEX}: the weight_map names 60 shards, more files")
    assert "Raise the limit on open files (ulimit -n)" in result.stdout


def test_a_directory_in_the_wrong_place_says_what_to_give(tmp_path):
    """load and inspect of a directory that is no checkpoint (in a note: the message is
    open()'s), and save without max_shard_size over a sharded checkpoint, raise
    IsADirectoryError saying what to do."""
    (tmp_path / "plain").mkdir()
    for call in (
        lambda: ct.load(tmp_path / "plain"),
        lambda: ct.load(tmp_path / "plain", lazy=True),
        lambda: ct.inspect(tmp_path / "plain"),
    ):
        with pytest.raises(IsADirectoryError, match=r"Is a directory") as err:
            call()
        assert "is not a sharded checkpoint (it has no model" in err.value.__notes__[0]
    ct.save(tmp_path / "c", model(2), max_shard_size=5_000)
    with pytest.raises(IsADirectoryError, match=r"a sharded checkpoint. Pass max_shard_size="):
        ct.save(tmp_path / "c", model(2), background=True)
    assert ct.load(tmp_path / "c")["step"] == 12


def test_containers_inspect_follows_links_when_told(tmp_path, capsys):
    """`containers inspect --follow-links SNAPSHOT` lists a hub cache snapshot; without
    the flag it is refused (status 2, one line naming follow_links)."""
    from containers._cli import main

    snapshot = hub_cache_snapshot(tmp_path)
    assert main(["inspect", str(snapshot)]) == 2
    assert "follow_links=True" in capsys.readouterr().err
    assert main(["inspect", "--follow-links", str(snapshot)]) == 0
    out = capsys.readouterr().out
    assert "safetensors, 2 shards" in out and "a: float32[4]" in out
