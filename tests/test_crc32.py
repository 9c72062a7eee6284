"""The CRC-32 of save and load: ``containers._crc32`` (carry-less multiplication, an
optional accelerator) agrees with ``zlib.crc32``, its plain twin, on every input and
every implementation this CPU runs; it is built where a compiler is found and left out
when asked; and load checks big tensors, read a chunk at a time, with either one."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import containers as ct
from containers._serialize import _arrays, _format

try:
    from containers import _crc32
except ImportError:  # pragma: no cover - built in the test environment
    _crc32 = None  # type: ignore[assignment]

compiled = pytest.mark.skipif(_crc32 is None, reason="containers._crc32 is not built")


def _runnable() -> list[str]:
    """The implementations this CPU runs (crc32_using refuses the others)."""
    if _crc32 is None:
        return []
    names = list(_crc32.IMPLEMENTATIONS)
    return names[: names.index(_crc32.IMPLEMENTATION) + 1]


def _functions() -> list[tuple[str, Callable[..., int]]]:
    out: list[tuple[str, Callable[..., int]]] = [("_format._crc", _format._crc)]
    if _crc32 is not None:
        out.append(("crc32", _crc32.crc32))
        for name in _runnable():
            out.append((name, lambda data, value=0, _n=name: _crc32.crc32_using(_n, data, value)))
    return out


FUNCTIONS = _functions()
POOL = random.Random(13).randbytes(1 << 21)  # slices of it: any offset, so any alignment


@pytest.mark.parametrize(("name", "crc"), FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
@settings(max_examples=300, deadline=None)
@given(
    length=st.one_of(st.integers(0, 300), st.integers(0, 5000), st.integers(0, 1 << 20)),
    offset=st.integers(0, 127),
    value=st.integers(0, 2**32 - 1),
)
def test_agrees_with_zlib(
    name: str, crc: Callable[..., int], length: int, offset: int, value: int
):
    """Every implementation gives zlib.crc32's value for any length (0 and odd tails
    included), start offset (alignment) and starting value."""
    data = POOL[offset : offset + length]
    assert crc(data, value) == zlib.crc32(data, value)
    assert crc(memoryview(data)) == zlib.crc32(data)


@pytest.mark.parametrize(("name", "crc"), FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_agrees_with_zlib_on_arrays_and_around_block_sizes(name: str, crc: Callable[..., int]):
    """Numpy arrays of every size around the folding block sizes (16, 64, 256 bytes),
    and chained calls, give zlib's values."""
    for n in [*range(600), 1023, 1024, 1025, 4095, 4096, 4097, 16383, 16384, 16385]:
        a = np.frombuffer(POOL, np.uint8, n, offset=n % 61)
        assert crc(a) == zlib.crc32(a), n
    a, b = POOL[:1000], POOL[1000:70001]
    assert crc(b, crc(a)) == zlib.crc32(a + b)
    assert crc(np.arange(1 << 18, dtype=np.float32)) == zlib.crc32(
        np.arange(1 << 18, dtype=np.float32)
    )


@compiled
def test_bad_arguments_fail_as_zlibs_do():
    """Values wrap modulo 2**32 and bad buffers raise what zlib.crc32 raises."""
    assert _crc32 is not None
    for value in (2**32 + 5, -1, 2**70 + 3):
        assert _crc32.crc32(b"abc", value) == zlib.crc32(b"abc", value)
    with pytest.raises(ValueError, match="ndarray is not C-contiguous"):
        _crc32.crc32(np.arange(10, dtype=np.uint8)[::2])
    with pytest.raises(TypeError, match="a bytes-like object is required, not 'str'"):
        _crc32.crc32("abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"crc32\(\): value must be an int, not float"):
        _crc32.crc32(b"abc", 1.0)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"crc32\(\) takes 1 or 2 positional arguments \(0 given\)"
    ):
        _crc32.crc32()  # type: ignore[call-arg]


@compiled
def test_crc32_using_names_what_it_cannot_run():
    """An unknown implementation, or one the CPU lacks, is a ValueError saying which."""
    assert _crc32 is not None
    with pytest.raises(ValueError, match=r"unknown implementation 'sse'; known: 'table'"):
        _crc32.crc32_using("sse", b"")
    best = _crc32.IMPLEMENTATIONS.index(_crc32.IMPLEMENTATION)
    for name in _crc32.IMPLEMENTATIONS[best + 1 :]:
        with pytest.raises(ValueError, match=f"this CPU cannot run '{name}'"):
            _crc32.crc32_using(name, b"")
    assert (_crc32.IMPLEMENTATION != "table") == _crc32.ACCELERATED


def test_built_where_a_compiler_is_found():
    """An install with a C compiler builds the accelerator, and load uses it when the CPU
    has carry-less multiplication (a failed build is quiet by design)."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if os.environ.get("CONTAINERS_PURE_PYTHON") or shutil.which(compiler) is None:
        pytest.skip("no C compiler, or pure Python was asked for")
    assert _crc32 is not None
    assert (_format._crc is _crc32.crc32) == _crc32.ACCELERATED


def test_pure_python_uses_zlib():
    """CONTAINERS_PURE_PYTHON=1 makes save and load use zlib.crc32; files still load."""
    code = (
        "import zlib, numpy as np, containers as ct; "
        "from containers._serialize import _format as f; "
        "a = np.arange(1 << 20, dtype=np.float32); "
        "print(f._crc is zlib.crc32, (ct.deserialize(ct.serialize([a]))[0] == a).all())"
    )
    env = {**os.environ, "CONTAINERS_PURE_PYTHON": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "True True"


@pytest.fixture(params=["accelerated", "zlib"])
def crc_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test with the module's CRC function, then with zlib.crc32."""
    if request.param == "zlib":
        monkeypatch.setattr(_format, "_crc", zlib.crc32)
    yield request.param


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x40
    path.write_bytes(bytes(data))


def test_big_tensors_are_checked_chunk_by_chunk(tmp_path: Path, crc_impl: str):
    """A tensor read in several chunks round-trips, and one flipped bit anywhere in it
    (first chunk, a middle one, the last byte) is an IntegrityError naming it, on every
    path that verifies; verify=False loads the damaged values."""
    rng = np.random.default_rng(0)
    tree = {
        "big": rng.standard_normal(3 * _format._CHUNK // 4 + 5, dtype=np.float32),
        "small": np.arange(3, dtype=np.int64),
        "odd": rng.integers(0, 255, _format._OWN + 3, dtype=np.uint8),
    }
    path = tmp_path / "t.safetensors"
    ct.save(path, tree)
    back = ct.load(path)
    assert all(np.array_equal(back[k], v) for k, v in tree.items())
    assert all(a.flags.writeable for a in back.values())  # owned buffers, maps or not
    back["big"][:] = 7
    back["odd"][-1] = 0
    again = ct.load(path)
    assert np.array_equal(again["big"], tree["big"]) and np.array_equal(again["odd"], tree["odd"])
    start, offsets = _offsets(path)
    assert offsets["['big']"][1] - offsets["['big']"][0] > 2 * _format._CHUNK
    good = path.read_bytes()
    for name, at in [
        ("['big']", 0),
        ("['big']", _format._CHUNK + 7),
        ("['big']", None),
        ("['odd']", None),
    ]:
        begin, end = offsets[name]
        path.write_bytes(good)
        _flip(path, start + (end - 1 if at is None else begin + at))
        message = rf"tensor \"{re.escape(name)}\": CRC32 mismatch \(the file says [0-9a-f]{{8}}, the data gives [0-9a-f]{{8}}\): the file is corrupted"
        for load in (
            lambda: ct.load(path),
            lambda: ct.load(path, mmap=True),
            lambda: ct.deserialize(path.read_bytes()),
        ):
            with pytest.raises(ct.IntegrityError, match=message):
                load()
        assert not np.array_equal(ct.load(path, verify=False)[name[2:-2]], tree[name[2:-2]])


def _offsets(path: Path) -> tuple[int, dict[str, tuple[int, int]]]:
    """Where the data section starts, and each tensor's offsets in it."""
    with open(path, "rb") as f:
        layout = _format.read_layout(f, ct.Limits())
    return layout.data_start, {name: (t.begin, t.end) for name, t in layout.tensors.items()}


def test_files_agree_between_implementations(tmp_path: Path, crc_impl: str):
    """A file written with either implementation loads with the other: the CRC32s in the
    header are the same numbers."""
    tree: dict[str, Any] = {f"a{i}": np.full(i * 1000 + 1, i, np.float64) for i in range(5)}
    data = ct.serialize(tree)
    other = zlib.crc32 if crc_impl == "accelerated" else _crc32_or_zlib()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_format, "_crc", other)
        back = ct.deserialize(data)
        path = tmp_path / "f.safetensors"
        path.write_bytes(data)
        loaded = ct.load(path)
    for k, v in tree.items():
        assert np.array_equal(back[k], v) and np.array_equal(loaded[k], v)


def _crc32_or_zlib() -> Callable[..., int]:
    return _crc32.crc32 if _crc32 is not None else zlib.crc32


def _check_plain(tensors: list[Any], arrays: list[Any], wants: list[Any]) -> int:
    """The index ``_arrays._check_all`` (the plain twin) refuses, or -1."""
    try:
        _arrays._check_all(tensors, arrays, wants)
    except ct.IntegrityError as err:
        name = re.search(r"tensor '([^']*)'", str(err))
        assert name is not None
        return [t.name for t in tensors].index(name.group(1))
    return -1


@compiled
@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 200), min_size=1, max_size=40),
    base=st.integers(-5, 5),
    seed=st.integers(0, 2**32 - 1),
    wrong=st.lists(st.sampled_from(["none", "ok", "off", "big", "negative"]), max_size=40),
)
def test_first_mismatch_agrees_with_check_all(
    sizes: list[int], base: int, seed: int, wrong: list[str]
):
    """first_mismatch (one C loop over a buffer) finds the tensor the plain _check_all
    refuses first, for groups of any sizes (empty ones too), offsets, None wants and
    wrong ones (off by one, past 32 bits, negative)."""
    data = random.Random(seed).randbytes(sum(sizes) + 10)
    buf = np.frombuffer(data, np.uint8)
    tensors, arrays, wants = [], [], []
    pos = base + 5  # the first tensor's offset: at index 5 of the buffer
    for k, n in enumerate(sizes):
        t = _format.Tensor(pos, pos + n, f"t{k}", "U8", (n,), np.dtype("u1"))
        tensors.append(t)
        arrays.append(buf[pos - base : pos - base + n])
        kind = wrong[k] if k < len(wrong) else "ok"
        value = zlib.crc32(arrays[-1])
        wants.append(
            {
                "none": None,
                "ok": value,
                "off": value ^ 1,
                "big": value + 2**32,
                "negative": -value - 1,
            }[kind]
        )
        pos += n
    assert _crc32.first_mismatch(buf, tensors, base, wants) == _check_plain(tensors, arrays, wants)


@compiled
def test_first_mismatch_refuses_what_is_not_a_group():
    """first_mismatch says what it takes: lists of one length, tensors inside the data."""
    t = _format.Tensor(0, 4, "t", "U8", (4,), np.dtype("u1"))
    with pytest.raises(TypeError, match="two lists"):
        _crc32.first_mismatch(b"abcd", (t,), 0, [None])
    with pytest.raises(ValueError, match="differ in length"):
        _crc32.first_mismatch(b"abcd", [t], 0, [])
    with pytest.raises(ValueError, match="outside data"):
        _crc32.first_mismatch(b"abc", [t], 0, [0])
    with pytest.raises(TypeError, match="an int or None"):
        _crc32.first_mismatch(b"abcd", [t], 0, ["0"])


def test_small_tensors_are_checked_in_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A flipped byte in any of many small tensors read as one group is an
    IntegrityError naming that tensor, with first_mismatch and with its plain twin, by
    load, load(workers=1), load(mmap=True) (a map's offsets) and deserialize."""
    tree = {f"a{i:03d}": np.full(4, i, np.float32) for i in range(300)}
    path = tmp_path / "f.safetensors"
    ct.save(path, tree)
    start, offsets = _offsets(path)
    for twin in (_arrays._first_mismatch, None):
        monkeypatch.setattr(_arrays, "_first_mismatch", twin)
        for name in ("a000", "a137", "a299"):
            saved = path.read_bytes()
            _flip(path, start + offsets[f"['{name}']"][0] + 2)
            message = rf"tensor \"\['{name}'\]\": CRC32 mismatch"
            with pytest.raises(ct.IntegrityError, match=message):
                ct.load(path)
            with pytest.raises(ct.IntegrityError, match=message):
                ct.load(path, workers=1)
            with pytest.raises(ct.IntegrityError, match=message):
                ct.load(path, mmap=True)
            with pytest.raises(ct.IntegrityError, match=message):
                ct.deserialize(path.read_bytes())
            path.write_bytes(saved)
        assert ct.load(path)["a137"][0] == 137
