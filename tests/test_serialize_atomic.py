"""Crash-safe writes: a child killed at random points during save leaves the old file or
the new one, never a partial one; saving over a file mapped by load(mmap=True) leaves the
mapped arrays intact; a failed save leaves no temp file."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import containers as ct

WRITER = """
import sys
import numpy as np
import containers as ct

path = sys.argv[1]
gen = 0
while True:
    gen += 1
    tree = {"gen": gen, "a": np.full(2_000_000, gen, np.float32), "b": [np.full(1_000_000, gen, np.int64)]}
    ct.save(path, tree)
    if gen == 1:
        print("ready", flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_killing_the_writer_leaves_the_old_or_the_new_file(tmp_path):
    """8 kills at random points of a save loop: the file always loads whole and consistent."""
    path = tmp_path / "state.safetensors"
    rng = random.Random(12)
    seen = set()
    for _ in range(8):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.4))
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        tree = ct.load(path)  # verify=True: a partial or mixed file would fail here
        gen = tree["gen"]
        assert (tree["a"] == gen).all() and (tree["b"][0] == gen).all()
        assert tree["a"].shape == (2_000_000,)
        seen.add(gen)
        for name in os.listdir(tmp_path):  # strays are temp files, never the target
            assert name == "state.safetensors" or (
                name.startswith(".state.safetensors.") and name.endswith(".tmp")
            )
    assert len(seen) > 1  # the kills did land at different points of the loop


def test_saving_over_a_mapped_file_leaves_the_mapped_arrays_intact(tmp_path):
    """Arrays from load(mmap=True) keep their values when the file is saved over."""
    path = tmp_path / "m.safetensors"
    ct.save(path, {"w": np.arange(1000, dtype=np.float64)})
    mapped = ct.load(path, mmap=True)
    assert not mapped["w"].flags.writeable
    ct.save(path, {"w": np.zeros(10)})
    ct.save(path, {"w": -np.ones(3)})
    assert np.array_equal(mapped["w"], np.arange(1000, dtype=np.float64))
    assert np.array_equal(ct.load(path)["w"], -np.ones(3))


def test_a_failed_save_leaves_the_old_file_and_no_temp_file(tmp_path):
    """An unstorable tree raises before writing: the old file is untouched, nothing else exists."""
    path = tmp_path / "keep.safetensors"
    ct.save(path, {"w": np.ones(2)})
    before = path.read_bytes()
    with pytest.raises(ct.SerializationError, match=r"at \['bad'\]: a leaf of type object"):
        ct.save(path, {"w": np.zeros(2), "bad": object()})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["keep.safetensors"]


def test_a_write_error_removes_the_temp_file(tmp_path):
    """If writing fails midway (here: the target is a directory), the temp file is removed."""
    target = tmp_path / "dir.safetensors"
    target.mkdir()
    with pytest.raises(OSError):
        ct.save(target, {"w": np.ones(2)})
    assert sorted(os.listdir(tmp_path)) == ["dir.safetensors"]


def test_save_errors_name_the_path_given_not_the_temp_file(tmp_path):
    """A missing directory, a directory at the path, or a path ending in a separator raise
    what open(path, "wb") would, naming that path (not a '.name.xxxx.tmp' file the caller
    never gave), and leave nothing behind; a trailing separator never creates a file."""
    missing = tmp_path / "no-such-dir" / "m.safetensors"
    with pytest.raises(
        FileNotFoundError, match=re.escape(f"No such file or directory: '{missing}'")
    ):
        ct.save(missing, [1])
    (tmp_path / "d").mkdir()
    for path in (
        str(tmp_path / "d"),
        str(tmp_path / "d") + os.sep,
        str(tmp_path / "new") + os.sep,
    ):
        with pytest.raises(IsADirectoryError, match=re.escape(f"Is a directory: '{path}'") + "$"):
            ct.save(path, [1])
    assert sorted(os.listdir(tmp_path)) == ["d"] and os.listdir(tmp_path / "d") == []


def test_a_file_name_as_long_as_the_system_allows_saves(tmp_path):
    """A 250-byte name, which open() accepts, saves: the temp file's name, which adds a
    prefix and a suffix to it, was too long for the file system (ENAMETOOLONG)."""
    for name in ("a" * 246 + ".st", "\u00e9" * 123 + ".st"):  # 249 bytes each
        path = tmp_path / name
        ct.save(path, {"w": np.arange(3)})
        assert ct.load(path)["w"].tolist() == [0, 1, 2]
    assert len(os.listdir(tmp_path)) == 2
