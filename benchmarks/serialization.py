"""Serialization benchmark: containers' save/load against the peers and the physical limit.

Two trees (ISSUE 13):

- big: 64 float32 arrays of 1M elements (256 MiB) in a dict;
- many: a dict of 1,000 dicts of 100 float32[4] arrays (100,000 arrays) plus a dict of
  10,000 Python floats;
- classes: a list of 10,000 small declared containers (two float32[4] arrays and a
  kept str each), a file of class records (issue #31), rebuilt in one compiled pass
  from its `Structure` records (issue #33); only containers' own rows and pickle's (the
  peers' formats do not hold classes).

Contenders, each saving to and loading from a file in a temp directory:

- containers: `ct.save` (fsync included) / `ct.load` (CRC32s verified), `ct.load(verify=False)`
  and `ct.load(mmap=True, verify=False)`;
- safetensors: `safetensors.numpy.save_file`/`load_file` of the flat dict of arrays; its
  "+tree" row also flattens the tree to that dict (`ct.leaves_with_path`) and rebuilds it
  on load (`Structure.unflatten`, the structure kept in memory, scalars carried in the
  metadata as JSON), which is what a user of safetensors has to do;
- pickle (protocol 5) to a file: ``dumps`` then one write; ``dump`` + ``fsync`` (what
  ``ct.save``'s durability costs pickle) and ``load`` from the open file (ISSUE 33);
- in memory: ``ct.serialize``/``ct.deserialize`` and ``pickle.dumps``/``pickle.loads``,
  and ``ct.serialize`` with the compiled encoder off (its plain twins, ISSUE 33);
- flax: `flax.serialization.to_bytes` / `msgpack_restore`, written to / read from a file;
- torch: `torch.save` / `torch.load(weights_only=True)` of the same tree with torch tensors;
- numpy: `np.savez` / `np.load` of the flat dict (scalars as 0-d arrays);
- raw: the bytes of containers' file written with one `os.write` (and + `fsync`), and
  read back with one `readinto` into a preallocated buffer: the physical limit;
- floor (ISSUE 33): what any reader of the file pays above its bytes, with no check and
  no tree: ``json.loads`` of the header and of the tree string, and ``np.frombuffer``
  views at offsets known in advance;
- containers' loads to a framework or a template (ISSUE 30), each beside the plain load
  followed by the framework's own conversion, which the issue bounds them by (1.1x):
  `ct.load(to="torch")` vs `ct.load` then `torch.from_numpy` over the leaves,
  `ct.load(to="jax")` vs `ct.load` then `jax.device_put`, and `ct.load(like=tree)`
  with a numpy and a torch template (saved by `ct.save`, as the others); their ratios
  come from paired rounds (each round loads one file with both, back to back, in
  alternating order), loads to JAX timed until the arrays are ready.

Every contender's loaded tree is checked against the original (arrays equal, scalars
equal) before timing; the script exits with status 1 if one disagrees. Times are
medians of several interleaved rounds (each round runs every contender once, in a fresh
order). Columns: ms per call, ns per leaf, and containers' time over each row's.

    python benchmarks/serialization.py --quick          # small trees, seconds
    python benchmarks/serialization.py --out run1.json  # the full trees (minutes)
    python benchmarks/serialization.py --report run1.json run2.json run3.json

Big checkpoints (ISSUE 29), ``--checkpoints``: a 1 GiB tree of 256 float32 arrays saved
and loaded whole, sharded (4 shards, 2 workers), lazily (header only) and partially (1%
of the arrays), a background save's call against copying the arrays, peak memory of a
full and a lazy load (tracemalloc), next to raw writes and reads of the same bytes with
one and two threads, safetensors and orbax-checkpoint's PyTreeCheckpointer:

    python benchmarks/serialization.py --checkpoints --quick   # 4 MiB, seconds
    python benchmarks/serialization.py --checkpoints           # 1 GiB
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import containers as ct

Case = tuple[Callable[[str], None], Callable[[str], Any]]  # (save, load)


@ct.container(children=["w", "b"], keep=["activation"], name="benchmarks.serialization.Small")
class Small:
    """A small declared container: the classes tree holds 10,000."""

    w: np.ndarray
    b: np.ndarray
    activation: str = "relu"


def make_trees(quick: bool) -> dict[str, Any]:
    """The big, many and classes trees (smaller with --quick)."""
    rng = np.random.default_rng(0)
    n_big, size = (8, 1 << 16) if quick else (64, 1 << 20)
    big = {f"p{i:02d}": rng.standard_normal(size, dtype=np.float32) for i in range(n_big)}
    groups, per, scalars = (100, 10, 100) if quick else (1000, 100, 10_000)
    many: dict[str, Any] = {
        f"g{i:04d}": {f"a{j:03d}": rng.standard_normal(4, dtype=np.float32) for j in range(per)}
        for i in range(groups)
    }
    many["scalars"] = {f"s{i:05d}": float(i) / 7 for i in range(scalars)}
    classes = [
        Small(rng.standard_normal(4, dtype=np.float32), rng.standard_normal(4, dtype=np.float32))
        for _ in range(1_000 if quick else 10_000)
    ]
    return {"big": big, "many": many, "classes": classes}


def _fsync_write(path: str, data: bytes | memoryview) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _write(path: str, data: bytes | memoryview) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def class_cases(tree: Any) -> dict[str, Case]:
    """The contenders for a tree of declared containers: containers' loads (of class
    records at today's fields: from the file's ``Structure`` records) and pickle's."""
    memory: dict[str, bytes] = {}
    return {
        "containers": (lambda p: ct.save(p, tree), ct.load),
        "containers verify=False": (
            lambda p: ct.save(p, tree),
            lambda p: ct.load(p, verify=False),
        ),
        "containers like=numpy tree": (
            lambda p: ct.save(p, tree),
            lambda p: ct.load(p, like=tree),
        ),
        "pickle 5 dump+fsync / load": (
            lambda p: _fsync_write(p, pickle.dumps(tree, protocol=5)),
            lambda p: pickle.loads(_read(p)),
        ),
        "containers serialize / deserialize (memory)": (
            lambda p: memory.__setitem__(p, ct.serialize(tree)),
            lambda p: ct.deserialize(memory.pop(p)),
        ),
        "pickle 5 dumps / loads (memory)": (
            lambda p: memory.__setitem__(p, pickle.dumps(tree, protocol=5)),
            lambda p: pickle.loads(memory.pop(p)),
        ),
    }


def cases(tree: Any) -> dict[str, Case]:
    """Every contender's (save, load) for ``tree``."""
    pairs, structure = ct.flatten_with_path(tree)
    names = [ct.keystr(p) for p, _ in pairs]
    flat = {n: v for n, (_, v) in zip(names, pairs) if isinstance(v, np.ndarray)}
    scalar_names = [n for n, (_, v) in zip(names, pairs) if not isinstance(v, np.ndarray)]
    out: dict[str, Case] = {
        "containers": (lambda p: ct.save(p, tree), ct.load),
        "containers verify=False": (
            lambda p: ct.save(p, tree),
            lambda p: ct.load(p, verify=False),
        ),
        "containers mmap, verify=False": (
            lambda p: ct.save(p, tree),
            lambda p: ct.load(p, mmap=True, verify=False),
        ),
    }
    import safetensors.numpy as stn

    out["safetensors (flat)"] = (lambda p: stn.save_file(flat, p), stn.load_file)

    def st_tree_save(p: str) -> None:
        leaves = ct.leaves_with_path(tree)
        arrays = {}
        scalars = []
        for path, leaf in leaves:
            if isinstance(leaf, np.ndarray):
                arrays[ct.keystr(path)] = leaf
            else:
                scalars.append(leaf)
        stn.save_file(arrays, p, metadata={"scalars": json.dumps(scalars)})

    def st_tree_load(p: str) -> Any:
        import safetensors

        arrays = stn.load_file(p)
        with safetensors.safe_open(p, "numpy") as f:
            scalars = iter(json.loads(f.metadata()["scalars"]))
        it = iter(names)
        scalar_set = set(scalar_names)
        leaves = [next(scalars) if n in scalar_set else arrays[n] for n in it]
        return structure.unflatten(leaves)

    out["safetensors + tree"] = (st_tree_save, st_tree_load)
    out["pickle 5"] = (
        lambda p: _write(p, pickle.dumps(tree, protocol=5)),
        lambda p: pickle.loads(_read(p)),
    )

    def pickle_dump_fsync(p: str) -> None:
        with open(p, "wb") as f:
            pickle.dump(tree, f, protocol=5)
            f.flush()
            os.fsync(f.fileno())

    def pickle_load(p: str) -> Any:
        with open(p, "rb") as f:
            return pickle.load(f)

    # ISSUE 33's bounds: save <= pickle.dump + fsync, load <= pickle.load, and in
    # memory serialize <= pickle.dumps, deserialize <= pickle.loads.
    out["pickle 5 dump+fsync / load"] = (pickle_dump_fsync, pickle_load)
    memory: dict[str, bytes] = {}
    out["containers serialize / deserialize (memory)"] = (
        lambda p: memory.__setitem__(p, ct.serialize(tree)),
        lambda p: ct.deserialize(memory.pop(p)),
    )

    def serialize_plain(p: str) -> None:
        # ISSUE 33: the same serialize with the compiled encoder off (the Python walk,
        # json.dumps and the entries' other writers, its plain twins): the A/B of the
        # C walk in one run
        from containers._serialize import _compiled

        encoder = _compiled._encoder
        _compiled._encoder = None
        try:
            memory[p] = ct.serialize(tree)
        finally:
            _compiled._encoder = encoder

    out["containers serialize, plain twins (memory)"] = (
        serialize_plain,
        lambda p: ct.deserialize(memory.pop(p)),
    )
    out["pickle 5 dumps / loads (memory)"] = (
        lambda p: memory.__setitem__(p, pickle.dumps(tree, protocol=5)),
        lambda p: pickle.loads(memory.pop(p)),
    )
    try:  # not in the dev extra: the row is left out where flax is not installed
        import flax.serialization as fs
    except ImportError:
        print("flax is not installed: its row is left out", file=sys.stderr)
    else:
        out["flax msgpack"] = (
            lambda p: _write(p, fs.to_bytes(tree)),
            lambda p: fs.msgpack_restore(_read(p)),
        )
    import torch

    torch_tree = ct.fmap(lambda a: torch.from_numpy(a) if isinstance(a, np.ndarray) else a, tree)
    out["torch save/load(weights_only)"] = (
        lambda p: torch.save(torch_tree, p),
        lambda p: torch.load(p, weights_only=True),
    )
    npz = {f"a{i}": np.asarray(v) for i, (_, v) in enumerate(pairs)}
    out["numpy savez (flat)"] = (
        lambda p: np.savez(p, **npz),
        lambda p: dict(np.load(p if p.endswith(".npz") else p + ".npz")),
    )
    raw = ct.serialize(tree)
    buffer = bytearray(len(raw))

    def raw_read(p: str) -> bytearray:
        with open(p, "rb", buffering=0) as f:
            f.readinto(buffer)  # type: ignore[attr-defined]
        return buffer

    out.update(_target_cases(tree, torch_tree))
    out.update(_floor_cases(tree, raw))
    out["raw write+fsync / readinto"] = (lambda p: _fsync_write(p, raw), raw_read)
    out["raw write (no fsync)"] = (lambda p: _write(p, raw), raw_read)
    return out


def _target_cases(tree: Any, torch_tree: Any) -> dict[str, Case]:
    """containers' loads into torch, JAX and templates, and their plain twins."""
    import jax
    import torch

    def save(p: str) -> None:
        ct.save(p, tree)

    def to_torch(x: Any) -> Any:
        return torch.from_numpy(x) if isinstance(x, np.ndarray) else x

    def to_jax(x: Any) -> Any:
        return jax.device_put(x) if isinstance(x, np.ndarray) else x

    # JAX copies to its device in the background: a load to JAX is done when its
    # arrays are (block_until_ready), for both rows
    return {
        "containers to=torch": (save, lambda p: ct.load(p, to="torch")),
        "containers load + torch.from_numpy": (save, lambda p: ct.fmap(to_torch, ct.load(p))),
        "containers to=jax": (save, lambda p: jax.block_until_ready(ct.load(p, to="jax"))),
        "containers load + jax.device_put": (
            save,
            lambda p: jax.block_until_ready(ct.fmap(to_jax, ct.load(p))),
        ),
        "containers like=numpy tree": (save, lambda p: ct.load(p, like=tree)),
        "containers like=torch tree": (save, lambda p: ct.load(p, like=torch_tree)),
    }


def _floor_cases(tree: Any, raw: bytes) -> dict[str, Case]:
    """What any reader of containers' file pays above the bytes (ISSUE 33's floor): the
    header's JSON parsed whole by ``json.loads`` (no check, no tree), and the arrays
    cut as views from one read of the file at offsets known in advance (no header, no
    CRC32, no tree). Their loads return no tree (``check`` skips them)."""
    from containers._serialize import _format

    layout = _format.layout_of_bytes(memoryview(raw), ct.Limits())
    cuts = [
        (t.dtype, (t.end - t.begin) // t.dtype.itemsize, layout.data_start + t.begin, t.shape)
        for t in layout.tensors.values()
    ]

    def save(p: str) -> None:
        _write(p, raw)

    def header_json(p: str) -> Any:
        with open(p, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        return json.loads(header["__metadata__"][_format.TREE_KEY])

    def views(p: str) -> Any:
        data = np.fromfile(p, np.uint8)
        return [np.frombuffer(data, d, n, at).reshape(shape) for d, n, at, shape in cuts]

    return {
        "floor: read + json.loads of header and tree": (save, header_json),
        "floor: read + np.frombuffer views": (save, views),
    }


def _as_numpy(x: Any) -> Any:
    if type(x).__module__.startswith("torch"):
        return x.numpy()
    if type(x).__module__.startswith(("jax", "jaxlib")):
        return np.asarray(x)
    return x


def check(name: str, tree: Any, loaded: Any) -> str | None:
    """Why ``loaded`` differs from ``tree``, or None when it agrees."""
    if name.startswith("raw"):
        return None if bytes(loaded) == ct.serialize(tree) else "bytes differ"
    if name.startswith("floor"):
        return None
    pairs = ct.leaves_with_path(tree)
    if name.startswith("numpy"):
        got = [loaded[f"a{i}"] for i in range(len(pairs))]
    elif name.startswith("safetensors (flat)"):
        got = [loaded[ct.keystr(p)] for p, v in pairs if isinstance(v, np.ndarray)]
        pairs = [(p, v) for p, v in pairs if isinstance(v, np.ndarray)]
    else:
        got = [_as_numpy(v) for v in ct.leaves(loaded)]
    if len(got) != len(pairs):
        return f"{len(got)} leaves, expected {len(pairs)}"
    for (path, want), have in zip(pairs, got):
        if not np.array_equal(np.asarray(want), np.asarray(have)):
            return f"differs at {ct.keystr(path)}"
    return None


def run(trees: dict[str, Any], rounds: int, tmp: str) -> dict[str, dict[str, list[float]]]:
    """Seconds per call: ``{tree: {"contender save"/"contender load": [per round]}}``."""
    results: dict[str, dict[str, list[float]]] = {}
    rng = random.Random(0)
    for tree_name, tree in trees.items():
        table = class_cases(tree) if tree_name == "classes" else cases(tree)
        cells: dict[str, list[float]] = {}
        for name in table:  # the table's rows in this order
            cells[f"{name} save"], cells[f"{name} load"] = [], []
        for name, (save, load) in table.items():  # the agreement check, untimed
            path = os.path.join(tmp, "check")
            save(path)
            problem = check(name, tree, load(path))
            _remove(path)
            if problem:
                print(f"{tree_name}: {name} disagrees: {problem}", file=sys.stderr)
                sys.exit(1)
        for _ in range(rounds):
            order = list(table)
            rng.shuffle(order)
            for name in order:
                save, load = table[name]
                path = os.path.join(tmp, "f")
                gc.collect()
                gc.disable()
                try:
                    t0 = time.perf_counter()
                    save(path)
                    t1 = time.perf_counter()
                    loaded = load(path)
                    t2 = time.perf_counter()
                finally:
                    gc.enable()
                del loaded
                _remove(path)
                cells.setdefault(f"{name} save", []).append(t1 - t0)
                cells.setdefault(f"{name} load", []).append(t2 - t1)
        cells.update(paired_ratios(table, 3 * rounds, tmp))
        results[tree_name] = cells
        results[tree_name]["leaves"] = [float(len(ct.leaves(tree)))]
    return results


def paired_ratios(contenders: dict[str, Case], rounds: int, tmp: str) -> dict[str, list[float]]:
    """``{"pair: ours / plain": [ratio per round]}`` for each of TARGET_PAIRS among
    ``contenders``: the two loads read one saved file back to back, in alternating
    order, and each round gives the ratio of their times. Two loads timed side by side
    give a steadier ratio than two medians taken apart: a load of 256 MiB costs more or
    less with what the call before it freed."""
    path = os.path.join(tmp, "pair")
    contenders["containers"][0](path)
    out: dict[str, list[float]] = {}
    pairs = [(a, b) for a, b in TARGET_PAIRS if a in contenders and b in contenders]
    for k in range(rounds):
        for ours, plain in pairs:
            times = {}
            for name in (ours, plain) if k % 2 == 0 else (plain, ours):
                load = contenders[name][1]
                gc.collect()
                gc.disable()
                try:
                    t0 = time.perf_counter()
                    loaded = load(path)
                    times[name] = time.perf_counter() - t0
                finally:
                    gc.enable()
                del loaded
            out.setdefault(f"pair: {ours} / {plain}", []).append(times[ours] / times[plain])
    _remove(path)
    return out


def _remove(path: str) -> None:
    for p in (path, path + ".npz"):
        if os.path.exists(p):
            os.remove(p)


def table(medians: dict[str, dict[str, float]]) -> str:
    """The Markdown table of median times, ns per leaf and containers' ratio."""
    lines = []
    for tree_name, cells in medians.items():
        leaves = cells["leaves"]
        lines.append(f"\n**{tree_name}** ({int(leaves):,} leaves)\n")
        lines.append(
            "| contender | save ms | load ms | save ns/leaf | load ns/leaf | containers/this save | containers/this load |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|---:|")
        names = [k[: -len(" save")] for k in cells if k.endswith(" save")]
        ours_save = cells["containers save"]
        ours_load = cells["containers load"]
        for name in names:
            s, ld = cells[f"{name} save"], cells[f"{name} load"]
            lines.append(
                f"| {name} | {s * 1e3:.1f} | {ld * 1e3:.1f} | {s / leaves * 1e9:,.0f} | "
                f"{ld / leaves * 1e9:,.0f} | {ours_save / s:.2f} | {ours_load / ld:.2f} |"
            )
    return "\n".join(lines)


def medians_of(runs: list[dict[str, dict[str, list[float]]]]) -> dict[str, dict[str, float]]:
    """Median of each cell over rounds (and over runs)."""
    out: dict[str, dict[str, float]] = {}
    for tree_name in runs[0]:
        out[tree_name] = {}
        for cell in runs[0][tree_name]:
            values = [v for r in runs for v in r[tree_name][cell]]
            out[tree_name][cell] = statistics.median(values)
    return out


def crc_implementation() -> str:
    """Which CRC32 containers uses here: its C module's (and which instructions), or zlib's."""
    from containers._serialize import _format

    try:
        from containers import _crc32
    except ImportError:
        return "zlib.crc32 (containers._crc32 is not built)"
    if _format._crc is _crc32.crc32:
        return f"containers._crc32 ({_crc32.IMPLEMENTATION})"
    return f"zlib.crc32 (containers._crc32 has {_crc32.IMPLEMENTATION} only, or pure Python was asked for)"


# --- big checkpoints (ISSUE 29) --------------------------------------------------------


def checkpoint_tree(quick: bool) -> dict[str, Any]:
    """256 float32 arrays: 1 GiB (4 MiB each), or 4 MiB with --quick (16 KiB each)."""
    rng = np.random.default_rng(1)
    size = 1 << 12 if quick else 1 << 20
    return {f"layer{i:03d}": rng.standard_normal(size, dtype=np.float32) for i in range(256)}


def _raw_parallel_write(paths: list[str], chunks: list[memoryview]) -> None:
    """Write each chunk to its file and fsync it, one thread per file."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(paths)) as pool:
        list(pool.map(_fsync_write, paths, chunks))


def _raw_parallel_read(paths: list[str], buffers: list[bytearray]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def read(path: str, buffer: bytearray) -> None:
        with open(path, "rb", buffering=0) as f:
            f.readinto(buffer)  # type: ignore[attr-defined]

    with ThreadPoolExecutor(len(paths)) as pool:
        list(pool.map(read, paths, buffers))


def _peak(fn: Callable[[], Any]) -> float:
    """The peak of memory traced by tracemalloc (numpy's arrays included) during fn()."""
    import tracemalloc

    tracemalloc.start()
    try:
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return float(peak)


def checkpoint_cells(tree: dict[str, Any], tmp: str, rounds: int) -> dict[str, list[float]]:
    """Seconds (or bytes, for "peak") per round for every checkpoint workload."""
    arrays = list(tree.values())
    total = sum(a.nbytes for a in arrays)
    data = ct.serialize(tree)
    half = len(data) // 2
    halves = [memoryview(data)[:half], memoryview(data)[half:]]
    buffers = [bytearray(len(h)) for h in halves]
    one = os.path.join(tmp, "one.safetensors")
    shards = os.path.join(tmp, "sharded")
    raw = [os.path.join(tmp, f"raw{i}") for i in range(2)]
    selected = {f"['layer{i:03d}']" for i in range(0, 256, 100)}  # 3 of 256 arrays: ~1%
    shard_size = -(-total // 4)

    def partial(path: str) -> Any:
        return ct.load(path, where=lambda p, v: ct.keystr(p) in selected)

    steps: dict[str, Callable[[], Any]] = {
        "raw write+fsync, 1 thread": lambda: _fsync_write(raw[0], data),
        "raw write+fsync, 2 threads": lambda: _raw_parallel_write(raw, halves),
        "raw readinto, 1 thread": lambda: _raw_parallel_read([raw[0]], [bytearray(len(data))]),
        "raw readinto, 2 threads": lambda: _raw_parallel_read(raw, buffers),
        "containers save": lambda: ct.save(one, tree),
        "containers save, 4 shards, 2 workers": lambda: ct.save(
            shards, tree, max_shard_size=shard_size, workers=2
        ),
        "containers save, 1 worker": lambda: ct.save(one, tree, workers=1),
        "containers load": lambda: ct.load(one),
        "containers load, 1 worker": lambda: ct.load(one, workers=1),
        "containers load, 4 shards, 2 workers": lambda: ct.load(shards, workers=2),
        "containers lazy load (header only)": lambda: ct.load(one, lazy=True),
        "containers lazy load, 4 shards": lambda: ct.load(shards, lazy=True),
        "containers partial load, 1% of arrays": lambda: partial(one),
        "containers partial load, 1%, 4 shards": lambda: partial(shards),
        "copy of the arrays in memory": lambda: [a.copy() for a in arrays],
        "containers save(background=True) returns": lambda: ct.save(
            os.path.join(tmp, "bg.safetensors"), tree, background=True
        ),
    }
    import safetensors.numpy as stn

    st = os.path.join(tmp, "st.safetensors")
    steps["safetensors save_file"] = lambda: stn.save_file(tree, st)
    steps["safetensors load_file"] = lambda: stn.load_file(st)
    try:
        import orbax.checkpoint as ocp
    except ImportError:
        ocp = None
    if ocp is not None:
        checkpointer = ocp.PyTreeCheckpointer()
        orbax_dir = os.path.join(tmp, "orbax")

        def orbax_save() -> None:
            checkpointer.save(orbax_dir, tree, force=True)

        steps["orbax PyTreeCheckpointer save"] = orbax_save
        steps["orbax PyTreeCheckpointer restore"] = lambda: checkpointer.restore(orbax_dir)
    cells: dict[str, list[float]] = {name: [] for name in steps}
    # every reader needs its file: write each once, untimed, and check what loads
    for name in ("raw write+fsync, 2 threads", "containers save", "safetensors save_file"):
        steps[name]()
    steps["containers save, 4 shards, 2 workers"]()
    if ocp is not None:
        steps["orbax PyTreeCheckpointer save"]()
    for name in ("containers load", "containers load, 4 shards, 2 workers"):
        back = steps[name]()
        if not all(np.array_equal(back[k], v) for k, v in tree.items()):
            print(f"checkpoints: {name} disagrees", file=sys.stderr)
            sys.exit(1)
    for _ in range(rounds):
        for name, fn in steps.items():
            gc.collect()
            t0 = time.perf_counter()
            result = fn()
            cells[name].append(time.perf_counter() - t0)
            if name.endswith("returns"):
                result.result()  # the background write, untimed
            del result
    cells["peak of a full load (bytes)"] = [_peak(lambda: ct.load(one))]
    cells["peak of a lazy load (bytes)"] = [_peak(lambda: ct.load(one, lazy=True))]
    cells["arrays (bytes)"] = [float(total)]
    with open(one, "rb") as f:
        cells["header (bytes)"] = [float(8 + int.from_bytes(f.read(8), "little"))]
    return cells


def checkpoint_table(cells: dict[str, list[float]]) -> str:
    """Median times (ms) and the issue's ratios."""
    med = {k: statistics.median(v) for k, v in cells.items()}
    lines = ["| workload | median ms |", "|---|---:|"]
    for name, value in med.items():
        if not name.endswith("(bytes)"):
            lines.append(f"| {name} | {value * 1e3:.2f} |")
    lines.append("")
    ratios = [
        ("partial 1% / full load", "containers partial load, 1% of arrays", "containers load"),
        (
            "sharded save / single-file save",
            "containers save, 4 shards, 2 workers",
            "containers save",
        ),
        (
            "sharded save / raw write+fsync (1 thread)",
            "containers save, 4 shards, 2 workers",
            "raw write+fsync, 1 thread",
        ),
        (
            "sharded load / single-file load",
            "containers load, 4 shards, 2 workers",
            "containers load",
        ),
        (
            "background save call / copy of the arrays",
            "containers save(background=True) returns",
            "copy of the arrays in memory",
        ),
        ("save, 2 workers (default) / 1 worker", "containers save", "containers save, 1 worker"),
        ("load, 2 workers (default) / 1 worker", "containers load", "containers load, 1 worker"),
        ("containers save / orbax save", "containers save", "orbax PyTreeCheckpointer save"),
        ("containers load / orbax restore", "containers load", "orbax PyTreeCheckpointer restore"),
        ("containers save / safetensors save", "containers save", "safetensors save_file"),
        ("containers load / safetensors load", "containers load", "safetensors load_file"),
    ]
    lines += ["| ratio | value |", "|---|---:|"]
    for label, a, b in ratios:
        if a in med and b in med:
            lines.append(f"| {label} | {med[a] / med[b]:.2f} |")
    mib = 1 << 20
    arrays, header = med["arrays (bytes)"], med["header (bytes)"]
    lines.append(
        f"| peak of a full load - arrays (MiB) | {(med['peak of a full load (bytes)'] - arrays) / mib:.1f} |"
    )
    lines.append(
        f"| peak of a lazy load / header | {med['peak of a lazy load (bytes)'] / header:.2f} |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="small trees, 3 rounds")
    parser.add_argument(
        "--checkpoints",
        action="store_true",
        help="the big-checkpoint workloads (1 GiB of 256 float32 arrays; 4 MiB with --quick)",
    )
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--out", help="write the per-round times as JSON")
    parser.add_argument("--report", nargs="+", help="print the median table of saved runs")
    args = parser.parse_args(argv)
    if args.report:
        runs = [json.loads(Path(p).read_text()) for p in args.report]
        print(table(medians_of(runs)))
        print(pickle_ratios(medians_of(runs)))
        print(target_ratios(medians_of(runs)))
        return 0
    if args.checkpoints:
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
            cells = checkpoint_cells(checkpoint_tree(args.quick), tmp, args.rounds or 3)
        if args.out:
            Path(args.out).write_text(json.dumps(cells))
        print(checkpoint_table(cells))
        return 0
    trees = make_trees(args.quick)
    rounds = args.rounds or (3 if args.quick else 5)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        results = run(trees, rounds, tmp)
    if args.out:
        Path(args.out).write_text(json.dumps(results))
    print("all contenders agree with the original trees")
    print(f"CRC32 of save and load: {crc_implementation()}")
    medians = medians_of([results])
    print(table(medians))
    print(pickle_ratios(medians))
    print(target_ratios(medians))
    return 0


#: containers' load to a framework or template, and what ISSUE 30 bounds it by (1.1x).
TARGET_PAIRS = [
    ("containers to=torch", "containers load + torch.from_numpy"),
    ("containers to=jax", "containers load + jax.device_put"),
    ("containers like=numpy tree", "containers"),
    ("containers like=torch tree", "containers load + torch.from_numpy"),
]


def target_ratios(medians: dict[str, dict[str, float]]) -> str:
    """The load-time ratio of each target load to its plain twin (bound: 1.1): the
    median of the paired rounds' ratios (``paired_ratios``)."""
    lines = ["\n**to= and like= loads over the plain load + conversion** (bound 1.1)\n"]
    for tree_name, cells in medians.items():
        for ours, plain in TARGET_PAIRS:
            ratio = cells.get(f"pair: {ours} / {plain}")
            if ratio is not None:
                lines.append(f"- {tree_name}: {ours} / {plain}: {ratio:.2f}")
    return "\n".join(lines)


#: ISSUE 33's bounds (1.0): containers' cell over pickle's, per tree.
PICKLE_PAIRS = [
    ("containers save", "pickle 5 dump+fsync / load save"),
    ("containers load", "pickle 5 dump+fsync / load load"),
    (
        "containers serialize / deserialize (memory) save",
        "pickle 5 dumps / loads (memory) save",
    ),
    (
        "containers serialize / deserialize (memory) load",
        "pickle 5 dumps / loads (memory) load",
    ),
]


def pickle_ratios(medians: dict[str, dict[str, float]]) -> str:
    """containers over pickle: save/dump+fsync, load/load, serialize/dumps,
    deserialize/loads (bound: 1.0)."""
    lines = ["\n**containers over pickle** (bound 1.0)\n"]
    for tree_name, cells in medians.items():
        for ours, theirs in PICKLE_PAIRS:
            if ours in cells and theirs in cells:
                ratio = cells[ours] / cells[theirs]
                lines.append(f"- {tree_name}: {ours} / {theirs}: {ratio:.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
