"""Background saves (save(background=True)) and CheckpointManager: snapshots taken before
the call returns, errors from result(), the interpreter waiting for pending saves, the
last N checkpoints kept, and a crash leaving the last complete one restorable (real
child processes)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import Future

import numpy as np
import pytest

import containers as ct


def test_a_background_save_snapshots_the_arrays(tmp_path):
    """Arrays changed in place right after save(background=True) returns are saved with
    the values they had at the call."""
    w = np.zeros(2_000_000, np.float32)
    tree = {"w": w, "layers": [w[:10], np.ones(5)]}
    future = ct.save(tmp_path / "m.safetensors", tree, background=True)
    assert isinstance(future, Future)
    w += 1.0
    tree["layers"][1][:] = 7
    assert future.result(timeout=60) is None
    back = ct.load(tmp_path / "m.safetensors")
    assert not back["w"].any() and np.array_equal(back["layers"][1], np.ones(5))


def test_a_background_save_snapshots_torch_parameters_across_an_optimizer_step(tmp_path):
    """optimizer.step() after save(background=True) does not reach the file."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(256, 256)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    future = ct.save(tmp_path / "t.safetensors", dict(model.state_dict()), background=True)
    model(torch.ones(4, 256)).sum().backward()
    opt.step()
    future.result(timeout=60)
    back = ct.load(tmp_path / "t.safetensors")
    for k, v in before.items():
        assert np.array_equal(back[k], v.numpy())
    assert not np.array_equal(back["weight"], model.weight.detach().numpy())


def test_a_background_save_reports_errors_from_result(tmp_path):
    """An unstorable tree raises at the call; a write error comes from result()."""
    with pytest.raises(ct.SerializationError, match=r"at \['bad'\]: a leaf of type object"):
        ct.save(tmp_path / "x.safetensors", {"bad": object()}, background=True)
    future = ct.save(tmp_path / "missing" / "x.safetensors", [np.zeros(2)], background=True)
    with pytest.raises(FileNotFoundError, match=r"No such file or directory"):
        future.result(timeout=60)


def test_a_sharded_background_save(tmp_path):
    """background=True with max_shard_size= writes a sharded checkpoint."""
    a = np.arange(1000.0)
    ct.save(tmp_path / "c", {"a": a, "b": -a}, max_shard_size=8000, background=True).result(60)
    assert len(os.listdir(tmp_path / "c")) == 3
    assert np.array_equal(ct.load(tmp_path / "c")["b"], -a)


EXITER = """
import sys
import numpy as np
import containers as ct
ct.save(sys.argv[1], {"w": np.full(20_000_000, 3.0, np.float32)}, background=True)
print("returned", flush=True)
"""


def test_the_interpreter_waits_for_pending_background_saves(tmp_path):
    """A process that ends right after save(background=True) returns leaves the file."""
    path = tmp_path / "exit.safetensors"
    out = subprocess.run(
        [sys.executable, "-c", EXITER, str(path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout == "returned\n", out.stderr
    assert (ct.load(path)["w"] == 3.0).all()


def test_the_interpreter_waits_for_a_pending_sharded_background_save(tmp_path):
    """A sharded save(background=True) pending at exit is written: its threads start
    while concurrent.futures already refuses new work."""
    path = tmp_path / "exit"
    code = EXITER.replace("background=True", "background=True, max_shard_size=30_000_000")
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout == "returned\n", out.stderr
    assert (ct.load(path)["w"] == 3.0).all()


# --- CheckpointManager ---------------------------------------------------------------


def test_the_manager_keeps_the_newest_steps(tmp_path):
    """save(step) then prune: steps(), latest() and restore() see the last keep steps."""
    manager = ct.CheckpointManager(tmp_path / "run", keep=3)
    assert manager.steps() == [] and manager.latest() is None
    for step in range(0, 100, 10):
        manager.save(step, {"w": np.full(3, step), "step": step})
    assert manager.steps() == [70, 80, 90] and manager.latest() == 90
    assert manager.restore()["step"] == 90
    assert np.array_equal(manager.restore(80)["w"], np.full(3, 80))
    assert isinstance(manager.restore(70, lazy=True)["w"], ct.LazyArray)
    assert sorted(os.listdir(tmp_path / "run")) == [
        "step-70.safetensors",
        "step-80.safetensors",
        "step-90.safetensors",
    ]


def test_the_manager_saves_sharded_and_in_the_background(tmp_path):
    """max_shard_size= makes each step a sharded directory; background=True returns a
    future, and old steps go once the new one is complete."""
    manager = ct.CheckpointManager(tmp_path, keep=2, max_shard_size=4000, background=True)
    futures = [manager.save(s, {"a": np.full(1000, s, np.float32), "s": s}) for s in (1, 2, 3)]
    for f in futures:
        assert f is not None
        f.result(timeout=60)
    assert manager.steps() == [2, 3]
    assert os.path.isdir(tmp_path / "step-3")
    assert manager.restore(where=lambda p, v: True)["s"] == 3


def test_the_manager_checks_its_arguments(tmp_path):
    """keep and step must be positive/non-negative ints; a missing step names the saved ones."""
    with pytest.raises(TypeError, match=r"keep must be a positive int or None, got 0"):
        ct.CheckpointManager(tmp_path, keep=0)
    manager = ct.CheckpointManager(tmp_path)
    with pytest.raises(TypeError, match=r"step must be a non-negative int, got -1"):
        manager.save(-1, {})
    with pytest.raises(FileNotFoundError, match=r"holds no checkpoint yet"):
        manager.restore()
    manager.save(5, {"x": 1})
    with pytest.raises(FileNotFoundError, match=r"no step 4 in .*; the steps saved are \[5\]"):
        manager.restore(4)


TRAINER = """
import sys
import numpy as np
import containers as ct

manager = ct.CheckpointManager(sys.argv[1], keep=2, max_shard_size=3_000_000 if sys.argv[2] == "1" else None)
step = manager.latest() or 0  # resume where the last run stopped
while True:
    step += 1
    manager.save(step, {"step": step, "w": np.full(2_000_000, step, np.float32)})
    print("ready", flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
@pytest.mark.parametrize("sharded", ["0", "1"])
def test_a_killed_trainer_leaves_the_last_complete_step_restorable(tmp_path, sharded):
    """Kills at random points of a manager's save loop: the latest step restores whole
    and consistent, and at most keep steps (plus an unfinished temp) remain."""
    rng = random.Random(7)
    seen = set()
    for _ in range(4):
        child = subprocess.Popen(
            [sys.executable, "-c", TRAINER, str(tmp_path), sharded],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.4))
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        manager = ct.CheckpointManager(tmp_path, keep=2)
        steps = manager.steps()
        assert 1 <= len(steps) <= 3  # a kill between the save and the prune leaves 3
        tree = manager.restore()
        assert tree["step"] == steps[-1] and (tree["w"] == steps[-1]).all()
        seen.add(steps[-1])
    assert len(seen) > 1


def test_overlapping_gc_pauses_in_threads_never_leave_the_collector_disabled(tmp_path):
    """Encodes and decodes pausing the collector at once in several threads (a
    background save and loads) leave it enabled once all of them end."""
    import gc
    import threading

    from containers._serialize._api import _gc_paused

    assert gc.isenabled()
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads between almost every bytecode
    try:

        def hammer() -> None:
            for _ in range(50_000):
                with _gc_paused():
                    pass

        threads = [threading.Thread(target=hammer) for _ in range(8)]
        for t in threads:
            t.start()
        path = tmp_path / "m.safetensors"
        for i in range(20):
            future = ct.save(path, {"w": np.full(3, i)}, background=True)
            ct.load(path) if path.exists() else None
            assert future is not None
            future.result(timeout=60)
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert gc.isenabled()


def test_the_manager_refuses_bad_arguments_when_made_and_restoring(tmp_path):
    """A bad max_shard_size is refused when the manager is made, not at its first save; a
    file as the directory and a step that is not an int say what to give instead."""
    with pytest.raises(TypeError, match=r"CheckpointManager: max_shard_size must be a positive"):
        ct.CheckpointManager(tmp_path / "a", max_shard_size=0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match=r"exists and is not a directory; CheckpointManager"):
        ct.CheckpointManager(tmp_path / "file")
    manager = ct.CheckpointManager(tmp_path / "b")
    manager.save(1, {"x": 1})
    with pytest.raises(TypeError, match=r"restore: step must be a non-negative int or None"):
        manager.restore("1")


def test_two_managers_on_one_directory_share_its_steps(tmp_path):
    """Two managers on one directory list the same steps; each prunes by its own keep."""
    a = ct.CheckpointManager(tmp_path, keep=3)
    b = ct.CheckpointManager(tmp_path, keep=1)
    a.save(1, {"x": 1})
    a.save(2, {"x": 2})
    assert b.steps() == [1, 2]
    b.save(3, {"x": 3})
    assert a.steps() == b.steps() == [3] and a.restore()["x"] == 3


def test_a_save_after_a_background_save_to_the_same_path_lands_last(tmp_path):
    """save(path, new) made after save(path, old, background=True) leaves new in the
    file: it waits for the pending background save to that path first."""
    path = tmp_path / "m.safetensors"
    future = ct.save(path, {"w": np.zeros(30_000_000, np.float32)}, background=True)
    ct.save(path, {"w": np.ones(3, np.float32)})
    assert future is not None and future.result(timeout=120) is None
    assert np.array_equal(ct.load(path)["w"], np.ones(3, np.float32))


FAILER = """
import shutil, sys
import numpy as np
import containers as ct
# the first save keeps the writer busy until the program has ended; the second, queued
# behind it, then finds its directory gone
ct.save(sys.argv[2], {"w": np.ones(20_000_000, np.float32)}, background=True)
ct.save(sys.argv[1] + "/x.safetensors", {"w": np.ones(3)}, background=True)
shutil.rmtree(sys.argv[1])
"""


def test_a_background_save_failing_at_exit_says_so_on_stderr(tmp_path):
    """A background save that fails while the interpreter waits for it at exit (when no
    one can call result()) prints what failed on stderr instead of losing it silently."""
    where = tmp_path / "gone"
    where.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", FAILER, str(where), str(tmp_path / "first.safetensors")],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "containers: a background save to " in out.stderr, out.stderr
    assert "failed at interpreter exit, the file was not written: FileNotFoundError" in out.stderr
    assert (ct.load(tmp_path / "first.safetensors")["w"] == 1.0).all()
