"""Executor maps (fmap, fmap_with_path, treelize with executor=) on real thread and
process pools and a real dask LocalCluster, and compute/persist for dask leaves
(issue 32, docs/parallel.md)."""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import math
import multiprocessing
import operator
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import containers as ct
from containers._registry import kind_of

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

# Workers import what they run: the functions given to process pools here are
# importable (numpy, math, operator, builtins); dask's cloudpickle sends this module's
# own functions by value.
cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(sys.modules[__name__])

#: Seconds any map here may take before the test fails instead of hanging.
TIMEOUT = 60


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """``fn()``'s result or exception, or a test failure if it takes over ``seconds``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # handed to the test's thread
            box["error"] = err

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        pytest.fail(f"the map did not return within {seconds} s: it hangs")
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture(scope="module")
def threads() -> Iterator[cf.ThreadPoolExecutor]:
    with cf.ThreadPoolExecutor(2) as pool:
        yield pool


def spawned_pool(n: int = 2) -> cf.ProcessPoolExecutor:
    """A process pool whose workers are started fresh (no fork of a threaded process)."""
    return cf.ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"))


@pytest.fixture(scope="module")
def processes() -> Iterator[cf.ProcessPoolExecutor]:
    with spawned_pool() as pool:
        yield pool


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """A real dask cluster: two worker processes, started and stopped here. A task whose
    worker dies fails at once (allowed-failures=0) instead of being retried."""
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
    with cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(params=["threads", "processes", "dask"])
def executor(request: pytest.FixtureRequest) -> Any:
    """Each kind of executor in turn."""
    name = {"dask": "client"}.get(request.param, request.param)
    ex = request.getfixturevalue(name)
    if request.param == "dask":
        ex.wait_for_workers(2, timeout=TIMEOUT)
    return ex


@ct.container(children=["w", "b"])
class Layer:
    w: Any
    b: Any
    name: str = "layer"


@ct.container(children=["x"], keep=[], frozen=False)
class Box:
    x: Any
    seen: int = 0


def sample_tree() -> Any:
    shared = np.arange(4.0)
    return {
        "layers": [Layer(np.ones(3), 2.0, name="l0"), Layer(shared, -1.5, name="l1")],
        "tied": shared,
        "box": Box((4.0, [9.0]), seen=7),
        "n": 3,
    }


def same(a: Any, b: Any) -> bool:
    """Equal structure, kept fields, leaves (arrays by content) and sharing."""
    la, sa = ct.flatten(a)
    lb, sb = ct.flatten(b)
    if sa != sb or len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if type(x) is not type(y):
            return False
        if isinstance(x, np.ndarray):
            if x.dtype != y.dtype or not np.array_equal(x, y):
                return False
        elif x != y and not (math.isnan(x) and math.isnan(y)):
            return False
    return sharing(a) == sharing(b)


def sharing(tree: Any) -> list[int]:
    """Each position's first position holding the same object (pre-order), for objects
    that are not values: the tree's pattern of sharing."""
    first: dict[int, int] = {}
    out = []
    keep = []
    stack = [tree]
    while stack:
        value = stack.pop()
        keep.append(value)
        if isinstance(value, (int, float, str, tuple, type(None))):
            out.append(-1)
        else:
            out.append(first.setdefault(id(value), len(out)))
        kind = kind_of(value)
        if kind is not None:
            stack.extend(reversed(kind.flatten(value)[0]))
    return out


def negate(v: Any) -> Any:
    return operator.neg(v)


# --- results ---------------------------------------------------------------------------


@pytest.mark.usefixtures("engine")  # the compiled child loop and its twin
def test_every_executor_gives_the_serial_result(executor: Any) -> None:
    """fmap over a thread pool, a process pool and a dask cluster equals the serial fmap,
    with kept fields, reset fields and shared leaves as serial fmap gives them."""
    tree = sample_tree()
    out = within(TIMEOUT, lambda: ct.fmap(np.negative, tree, executor=executor))
    assert same(out, ct.fmap(np.negative, tree))
    assert out["layers"][1].w is out["tied"]
    assert out["layers"][0].name == "l0"
    assert out["box"].seen == 0


def test_several_trees_and_exclude_and_where_decide_the_calls(threads: Any) -> None:
    """Several trees, exclude= and where= choose the values f is called on, as serially."""
    a = {"x": [1.0, 2.0], "y": (3, "s")}
    b = {"x": [10.0, 20.0], "y": (30, "t"), "extra": 0}
    assert ct.fmap(operator.add, a, b, executor=threads) == ct.fmap(operator.add, a, b)

    def is_list(v: Any) -> bool:
        return isinstance(v, list)

    assert ct.fmap(len, a, exclude=is_list, executor=threads) == {"x": 2, "y": (3, "s")}
    assert ct.fmap(negate, a, where=float, executor=threads) == {"x": [-1.0, -2.0], "y": (3, "s")}


def test_a_shared_leaf_is_computed_once_and_comes_back_shared(threads: Any) -> None:
    """The identity cache decides what is submitted: f runs once per shared object."""
    shared = np.zeros(2)
    calls: list[Any] = []

    def f(v: Any) -> Any:
        calls.append(v)
        return v + 1

    out = ct.fmap(f, {"a": shared, "b": [shared, shared], "c": 1.0}, executor=threads)
    assert len(calls) == 2
    assert out["a"] is out["b"][0] is out["b"][1]
    pruned = ct.fmap(f, {"a": shared, "b": shared}, prune="again", executor=threads)
    assert pruned["b"] == "again"


def test_fmap_with_path_on_an_executor(executor: Any) -> None:
    """fmap_with_path with executor= passes each leaf's path, as serially."""
    tree = {"a": [1, 2], "b": Layer(3, 4)}
    out = within(TIMEOUT, lambda: ct.fmap_with_path(slice, tree, executor=executor))
    assert out == ct.fmap_with_path(slice, tree)


def test_treelize_on_an_executor(executor: Any) -> None:
    """A function lifted by treelize(executor=) gives the serial lift's result."""
    serial = ct.treelize("outer", missing=0)(operator.sub)
    lifted = ct.treelize("outer", missing=0, executor=executor)(operator.sub)
    a, b = {"a": 5, "x": (1, 2)}, {"a": 1, "x": (1, 1), "new": 4}
    assert within(TIMEOUT, lambda: lifted(a, b)) == serial(a, b)
    rising = ct.treelize(rise=True, executor=executor)(divmod)
    assert within(TIMEOUT, lambda: rising({"a": 7, "b": 9}, 2)) == (
        {"a": 3, "b": 4},
        {"a": 1, "b": 1},
    )


def test_chunksize_sets_the_leaves_per_task(threads: Any) -> None:
    """chunksize= leaves go to each task: progress sees them done chunk by chunk."""
    seen: list[tuple[int, int]] = []
    ct.fmap(
        negate, list(range(10)), executor=threads, chunksize=4, progress=lambda *a: seen.append(a)
    )
    assert seen[0] == (0, 10)
    assert sorted(seen[1:]) == sorted(set(seen[1:]))
    steps = sorted(d for d, _ in seen[1:])
    assert steps[-1] == 10
    assert {b - a for a, b in zip([0, *steps], steps)} <= {4, 2}


def test_the_automatic_chunksize_keeps_both_workers_busy(threads: Any) -> None:
    """Without chunksize=, 100 leaves go out as about four tasks per worker."""
    seen: list[tuple[int, int]] = []
    ct.fmap(negate, list(range(100)), executor=threads, progress=lambda *a: seen.append(a))
    assert len(seen) == 1 + 8


def test_progress_true_draws_a_bar_on_stderr(
    threads: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """progress=True draws a tqdm bar on stderr that ends at the total."""
    pytest.importorskip("tqdm")
    ct.fmap(negate, list(range(7)), executor=threads, progress=True)
    assert "7/7" in capsys.readouterr().err


def test_progress_true_without_a_bar_library_says_what_to_install(
    threads: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """progress=True with neither tqdm nor rich importable names both and pip install."""
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    monkeypatch.setitem(sys.modules, "rich.progress", None)
    with pytest.raises(ImportError, match=r"tqdm or rich.*pip install tqdm"):
        ct.fmap(negate, [1], executor=threads, progress=True)


def test_bad_options_are_refused_with_how_to_fix(threads: Any) -> None:
    """A non-executor, chunksize=0, options without executor= and walk= are errors."""
    with pytest.raises(TypeError, match=r"executor= must be a concurrent\.futures\.Executor"):
        ct.fmap(negate, [1], executor="threads")
    with pytest.raises(ValueError, match="chunksize= must be a positive int"):
        ct.fmap(negate, [1], executor=threads, chunksize=0)
    with pytest.raises(TypeError, match="pass executor= too"):
        ct.fmap(negate, [1], chunksize=3)
    with pytest.raises(TypeError, match="pass executor= too"):
        ct.treelize(progress=print)
    with pytest.raises(TypeError, match="cannot be combined with walk="):
        ct.fmap(negate, [1], walk=ct.DefaultWalk(), executor=threads)
    with pytest.raises(TypeError, match="progress= must be True"):
        ct.fmap(negate, [1], executor=threads, progress="yes")


def test_an_empty_tree_submits_nothing(threads: Any) -> None:
    """A tree with no leaves comes back rebuilt, with nothing submitted."""
    seen: list[Any] = []
    assert ct.fmap(
        negate, {"a": [], "b": ()}, executor=threads, progress=lambda *a: seen.append(a)
    ) == {"a": [], "b": ()}
    assert seen == []


# --- errors ----------------------------------------------------------------------------


def note(path: str, op: str = "fmap") -> str:
    return f"{op}: raised while mapping the value at {path!r}"


def test_f_errors_are_raised_as_f_raised_them_with_the_path(executor: Any) -> None:
    """The error f raises on a worker comes back with its type and message, and a note
    naming the leaf's path (the same note serial fmap adds)."""
    tree = {"a": [4.0, 9.0], "b": (1.0, -1.0)}
    with pytest.raises(ValueError, match=r"^math domain error\n") as info:
        within(TIMEOUT, lambda: ct.fmap(math.sqrt, tree, executor=executor, chunksize=1))
    assert info.value.__notes__ == [note("['b'][1]")]


@pytest.mark.parametrize("kwargs", [{}, {"where": int}, {"cache": False}])
def test_the_note_names_the_failing_leaf_inside_a_chunk(threads: Any, kwargs: Any) -> None:
    """Wherever the failing leaf sits in its chunk of 3, the note names its path, for
    the plain, where= and uncached recordings alike."""
    by_int = kwargs.get("where") is int
    for bad in range(7):
        leaves = [1.0] * 7
        leaves[bad] = -1.0
        ints = [int(v) for v in leaves] if by_int else [1] * 7
        tree = {"x": ints, "shared": [-1.0] * 7 if by_int else leaves}
        with pytest.raises(ValueError, match=r"^math domain error\n") as info:
            ct.fmap(math.sqrt, tree, executor=threads, chunksize=3, **kwargs)
        path = f"['x'][{bad}]" if by_int else f"['shared'][{bad}]"
        assert info.value.__notes__ == [note(path)]


def test_the_serial_fmap_adds_the_same_note() -> None:
    """Serial fmap, fmap_with_path and treelize note the path of the value f failed on."""
    tree = {"a": [4.0, 9.0], "b": (1.0, -1.0)}
    with pytest.raises(ValueError, match=r"^math domain error\n") as info:
        ct.fmap(math.sqrt, tree, where=float)
    assert info.value.__notes__ == [note("['b'][1]")]
    with pytest.raises(ValueError, match=r"^math domain error\n") as info:
        ct.fmap(math.sqrt, tree, exclude=lambda v: isinstance(v, float))
    assert info.value.__notes__ == [note("['b'][1]")]
    with pytest.raises(ValueError, match=r"^math domain error\n") as info:
        ct.fmap_with_path(lambda p, v: math.sqrt(v), tree)
    assert info.value.__notes__ == [note("['b'][1]", "fmap_with_path")]
    with pytest.raises(ValueError, match=r"^math domain error\n") as info:
        ct.treelize(missing=0, mode="outer")(lambda a, b, c: math.sqrt(a - b + c))(
            {"a": 1, "b": 2}, {"b": 1, "c": 1}, 0
        )
    assert info.value.__notes__ == [note("['c']", "treelize")]


def test_the_first_error_cancels_the_chunks_not_started() -> None:
    """After the first error, tasks that have not started never run."""
    calls = itertools.count()

    def f(v: int) -> int:
        next(calls)
        if v == 0:
            raise KeyError("first")
        time.sleep(0.01)
        return v

    with cf.ThreadPoolExecutor(1) as pool, pytest.raises(KeyError, match="first"):
        ct.fmap(f, list(range(200)), executor=pool, chunksize=1)
    assert next(calls) < 20


def test_keyboard_interrupt_cancels_pending_work() -> None:
    """Ctrl-C while the map waits raises KeyboardInterrupt and cancels what has not started."""
    calls = itertools.count()
    main = threading.main_thread().ident
    assert main is not None and threading.get_ident() == main

    def f(v: int) -> int:
        next(calls)
        if v == 3:
            signal.pthread_kill(main, signal.SIGINT)
        time.sleep(0.01)
        return v

    with cf.ThreadPoolExecutor(1) as pool, pytest.raises(KeyboardInterrupt):
        ct.fmap(f, list(range(200)), executor=pool, chunksize=1)
    assert next(calls) < 40


def test_a_killed_process_pool_worker_names_the_path() -> None:
    """A worker process killed mid-task (os.kill) raises BrokenProcessPool at once, with
    a note naming the leaves whose task it was running."""
    with spawned_pool(1) as pool:
        pool.submit(int).result()  # the worker is up
        (pid,) = list(pool._processes)
        threading.Timer(1.0, os.kill, (pid, signal.SIGKILL)).start()
        with pytest.raises(cf.process.BrokenProcessPool, match="terminated abruptly") as info:
            within(
                TIMEOUT,
                lambda: ct.fmap(time.sleep, {"a": 0.0, "b": 30.0}, executor=pool, chunksize=1),
            )
    (text,) = info.value.__notes__
    assert text.startswith("fmap: a worker died while f ran on the leaves at \"['b']\"")


def test_a_killed_dask_worker_names_the_path(client: Any) -> None:
    """A dask worker process killed mid-task (os.kill) fails the map with KilledWorker
    and a note naming the leaves of its task, instead of hanging."""
    client.wait_for_workers(2, timeout=TIMEOUT)
    pids = client.run(os.getpid)

    def kill_the_busy_worker() -> None:
        for address, tasks in client.processing().items():
            if tasks:
                os.kill(pids[address], signal.SIGKILL)

    threading.Timer(2.0, kill_the_busy_worker).start()
    with pytest.raises(distributed.scheduler.KilledWorker) as info:
        within(
            TIMEOUT,
            lambda: ct.fmap(time.sleep, {"a": 0.0, "b": 30.0}, executor=client, chunksize=1),
        )
    (text,) = info.value.__notes__
    assert text.startswith("fmap: a worker died while f ran on the leaves at \"['b']\"")
    client.wait_for_workers(2, timeout=TIMEOUT)  # the nanny restarts it for later tests


@pytest.mark.parametrize("kind", ["processes", "dask"])
def test_an_unpicklable_leaf_is_named(kind: str, request: pytest.FixtureRequest) -> None:
    """A leaf that cannot be pickled for worker processes: a TypeError naming its path."""
    ex = request.getfixturevalue({"dask": "client"}.get(kind, kind))
    tree = {"ok": 1.0, "bad": [2.0, threading.Lock()]}
    with pytest.raises(
        TypeError, match=re.escape("fmap: the leaf at \"['bad'][1]\" cannot be pickled")
    ):
        within(TIMEOUT, lambda: ct.fmap(id, tree, executor=ex, chunksize=1))


def test_an_unpicklable_f_is_named(processes: Any) -> None:
    """An f that cannot be pickled for a process pool: a TypeError that says so and how to fix."""
    with pytest.raises(TypeError, match=r"^fmap: f \(<function .*\) cannot be pickled.*top level"):
        within(TIMEOUT, lambda: ct.fmap(lambda v: v, [1.0], executor=processes))


# --- the property: identical to serial fmap --------------------------------------------


@st.composite
def shared_trees(draw: st.DrawFn) -> Any:
    """Random trees of dicts, lists, tuples and containers over a pool of leaves and
    nodes that sit at several positions."""
    pool: list[Any] = [np.arange(3.0), [1.0, 2.0]]
    leaf = st.one_of(
        st.integers(-5, 5), st.floats(-10, 10), st.text(max_size=2), st.sampled_from(pool)
    )

    def node(child: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        kids = st.lists(child, max_size=3)
        return st.one_of(
            kids,
            kids.map(tuple),
            st.dictionaries(st.text(max_size=2), child, max_size=3),
            st.builds(Layer, child, child, st.text(max_size=2)),
            st.builds(Box, child, st.integers()),
        )

    for _ in range(draw(st.integers(0, 3))):
        pool.append(draw(node(leaf)))
    return draw(st.recursive(leaf, node, max_leaves=10))


def bump(v: Any, *rest: Any) -> Any:
    if isinstance(v, str):
        return v + "!"
    if isinstance(v, list):
        return len(v)
    return v * 2 + sum(r for r in rest if isinstance(r, (int, float)))


# The dask cluster's event-loop thread draws from the global `random` while hypothesis
# draws a tree, which hypothesis takes for a strategy using `random`.
_RANDOM_IN_OTHER_THREADS = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies"
)


@_RANDOM_IN_OTHER_THREADS
@pytest.mark.usefixtures("engine")
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    tree=shared_trees(), option=st.sampled_from(["plain", "exclude", "where", "two", "nocache"])
)
def test_executor_fmap_is_identical_to_serial_fmap(threads: Any, tree: Any, option: str) -> None:
    """On random trees with shared objects, with exclude=, where=, two trees or no cache,
    fmap over a thread pool gives exactly what serial fmap gives, sharing included."""
    kwargs: dict[str, Any] = {
        "plain": {},
        "exclude": {"exclude": lambda v: isinstance(v, (list, float))},
        "where": {"where": float},
        "nocache": {"cache": False},
        "two": {},
    }[option]
    trees = (tree, tree) if option == "two" else (tree,)
    serial = ct.fmap(bump, *trees, **kwargs)
    assert same(ct.fmap(bump, *trees, executor=threads, chunksize=3, **kwargs), serial)


@_RANDOM_IN_OTHER_THREADS
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(tree=shared_trees())
def test_dask_fmap_is_identical_to_serial_fmap(client: Any, tree: Any) -> None:
    """The same on the dask cluster (fewer examples: each is a round of tasks)."""
    out = within(TIMEOUT, lambda: ct.fmap(bump, tree, executor=client))
    assert same(out, ct.fmap(bump, tree))


# --- dask collections as leaves --------------------------------------------------------


def test_compute_runs_shared_graph_parts_once() -> None:
    """ct.compute computes every dask leaf in one call: a part two leaves share runs
    once, a shared collection comes back as one shared value, other leaves stay."""
    runs = itertools.count()

    def base(v: int) -> np.ndarray:
        next(runs)
        return np.full(2, v)

    x = dask.delayed(base)(3)
    tree = {"y": x + 1, "z": [x * 2, x * 2], "x": x, "n": "kept"}
    tree["z"][1] = tree["z"][0]
    out = ct.compute(tree, scheduler="sync")
    assert next(runs) == 1
    assert out["y"].tolist() == [4, 4] and out["x"].tolist() == [3, 3]
    assert out["z"][0] is out["z"][1] and out["n"] == "kept"


def test_compute_and_persist_on_the_cluster(client: Any) -> None:
    """With a distributed Client, compute gives numpy arrays; persist gives dask arrays
    that compute to the same values."""
    da = pytest.importorskip("dask.array")
    a = da.arange(10, chunks=5)
    tree = Layer(a.sum(), a * 2, name="kept")
    out = ct.compute(tree)
    assert out.w == 45 and out.b.tolist() == list(range(0, 20, 2)) and out.name == "kept"
    held = ct.persist(tree)
    assert dask.is_dask_collection(held.b) and held.b.compute().tolist() == out.b.tolist()


def test_compute_without_dask_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """ct.compute where dask cannot be imported: an ImportError naming pip install dask."""
    monkeypatch.setitem(sys.modules, "dask", None)
    with pytest.raises(ImportError, match=r"^compute needs dask.*pip install dask"):
        ct.compute({"a": 1})


# --- the docs page's dask example ------------------------------------------------------


def test_the_docs_dask_example_runs() -> None:
    """The dask example of docs/parallel.md (not a doctest: it starts a cluster) runs."""
    page = (Path(__file__).parent.parent / "docs" / "parallel.md").read_text()
    (code,) = re.findall(r"```python dask-example\n(.*?)```", page, re.S)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    within(TIMEOUT * 2, lambda: exec(compile(code, "docs/parallel.md", "exec"), namespace))
    assert namespace["checked"] is True


# --- review fixes ----------------------------------------------------------------------


def test_a_numpy_integer_chunksize_is_accepted(threads: Any) -> None:
    """chunksize= takes any integer type (np.int64 from a computation), not only int."""
    out = ct.fmap(negate, [1, 2, 3], executor=threads, chunksize=np.int64(2))
    assert out == [-1, -2, -3]
    with pytest.raises(ValueError, match="chunksize= must be a positive int"):
        ct.fmap(negate, [1], executor=threads, chunksize=np.float64(2.0))


def test_a_shut_down_thread_pool_raises_its_own_error() -> None:
    """A pool already shut down raises its own RuntimeError, not a pickling error about f."""
    pool = cf.ThreadPoolExecutor(1)
    pool.shutdown()
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
        ct.fmap(lambda v: v, [1.0], executor=pool)


def test_results_that_cannot_be_pickled_back_are_explained(processes: Any) -> None:
    """A process pool's f returning what cannot be pickled: a note says the results
    of the chunk (named by its first path) could not be sent back, and how to fix."""
    with pytest.raises(TypeError, match="memoryview") as info:
        within(TIMEOUT, lambda: ct.fmap(memoryview, {"a": [b"x", b"y"]}, executor=processes))
    (text,) = info.value.__notes__
    # either chunk may be the first to come back: both hold an unpicklable result
    assert re.match(
        r"fmap: f's results for the chunk of leaves that starts at \"\['a'\]\[[01]\]\"", text
    )
    assert "return picklable values" in text


def test_a_tree_changed_by_f_during_the_map_is_an_error(threads: Any) -> None:
    """f that adds leaves to a tree with sharing (mapped by two walks): a RuntimeError,
    not misplaced results; to a tree without (one walk): the tree as it was walked."""
    grow = [1.0, 2.0]

    def f(v: float) -> float:
        grow.append(0.0)
        return v

    with pytest.raises(RuntimeError, match="the tree changed while the executor ran f"):
        ct.fmap(f, {"a": grow, "b": grow}, executor=threads)
    del grow[2:]
    assert ct.fmap(f, {"a": grow}, executor=threads) == {"a": [1.0, 2.0]}


def test_an_error_in_the_progress_function_says_it_is_not_f(threads: Any) -> None:
    """progress= raising: its own error, with a note naming progress= and its arguments."""

    def progress(done: int, total: int) -> None:
        raise ZeroDivisionError("bar broke")

    with pytest.raises(ZeroDivisionError, match="bar broke") as info:
        ct.fmap(negate, [1, 2], executor=threads, progress=progress)
    assert info.value.__notes__ == [
        "fmap: raised by the progress= function, called as progress(0, 2)"
    ]


def test_kept_values_stay_the_same_objects_in_the_one_walk(threads: Any) -> None:
    """A tree of containers with mutable kept values and no sharing takes the one walk
    (f growing a list of it does not disturb the map), and its kept values come back
    as the same objects, as serial fmap keeps them."""
    tags = ["l0"]
    grow = [1.0, 2.0]
    tree = {"layer": Layer(np.ones(2), grow, name=tags)}  # type: ignore[arg-type]

    def f(v: Any) -> Any:
        grow.append(0.0)
        return v

    out = ct.fmap(f, tree, executor=threads)
    assert out["layer"].name is tags
    assert out["layer"].b == [1.0, 2.0]
    assert ct.fmap(negate, tree, executor=threads)["layer"].name is tags
