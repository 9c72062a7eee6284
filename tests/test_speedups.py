"""fmap's compiled child loops (``_speedups_loop.c``) and their Python twins, the generated
loops. ``Loop`` is the one-tree loop, ``PairLoop`` the loop with one extra tree.

The fmap tests run with both (``conftest.engine``), and test_properties.py checks that
they agree call for call; these check what is particular to the compiled ones: that
they are built where they can be and left out when asked, that the module declares
what it is (multi-phase initialisation, subinterpreters, the GIL), that they keep
nothing alive after a call (returned or raised), that deep trees fit a small thread
stack, and that their bad-argument errors say what is wrong. ``IdTable``, the identity
cache they probe by address, is tested here too, against ``Memo``'s plain dict.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import gc
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tracemalloc
import weakref
from collections import OrderedDict, defaultdict, deque, namedtuple
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import numpy as np
import pytest

import containers as ct
from containers import _flatten, _structure
from containers._engine import _fast, _flat, _loops
from containers._engine._core import MAX_FAST_DEPTH, MISS, UNSET, Memo
from containers._registry import (
    DICT,
    IMMUTABLE_LEAVES,
    KINDS,
    LEAF_TYPES,
    LEAF_TYPES_NONE,
    LIST,
    TUPLE,
    NodeKind,
    cacheable,
    kind_of,
)

compiled = pytest.mark.skipif(
    _fast._speedups is None, reason="containers._engine._speedups is not built"
)


def test_built_where_a_compiler_is_found() -> None:
    """An install with a C compiler builds the accelerator (a failed build is quiet by
    design, so this is where a broken one shows)."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if os.environ.get("CONTAINERS_PURE_PYTHON") or shutil.which(compiler) is None:
        pytest.skip("no C compiler, or the pure-Python loop was asked for")
    assert _fast._speedups is not None


#: The C sources: the engine's module, one file per accelerator sharing _speedups.h, and
#: the CRC32s, load's scanner and save's walk (setup.py lists the same files).
C_SOURCES = [
    *(f"_engine/_speedups{part}.c" for part in ("", "_idtable", "_loop", "_mapnode")),
    *(f"_engine/_speedups{part}.c" for part in ("_flatten", "_paths", "_build", "_rebuild")),
    "_crc32.c",
    "_encoder.c",
    "_encoder_text.c",
    "_scan.c",
    "_scan_records.c",
    "_scan_fit.c",
]


def test_every_c_source_is_built_and_checked() -> None:
    """Every C file of the package is in C_SOURCES, so none escapes the warning check,
    and setup.py builds each engine file into the one extension."""
    package = os.path.dirname(ct.__file__)
    found = sorted(
        os.path.relpath(os.path.join(root, name), package).replace(os.sep, "/")
        for root, _, names in os.walk(package)
        for name in names
        if name.endswith(".c")
    )
    assert found == sorted(C_SOURCES)
    setup = (Path(__file__).parents[1] / "setup.py").read_text(encoding="utf-8")
    parts = re.search(r"SPEEDUPS = (\[.*\])", setup)
    assert parts is not None
    built = sorted(f"_engine/_speedups{part}.c" for part in ast.literal_eval(parts.group(1)))
    assert built == sorted(s for s in C_SOURCES if s.startswith("_engine/"))


@pytest.mark.parametrize("source", C_SOURCES)
def test_compiles_without_warnings(source: str, tmp_path: Any) -> None:
    """Each C source compiles with -Wall -Wextra and no warning, against this
    interpreter's headers (a warning is how an unused argument or a half-initialised
    table shows before it is a bug)."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip("no C compiler")
    path = os.path.join(os.path.dirname(ct.__file__), source)
    include = f"-I{sysconfig.get_paths()['include']}"
    done = subprocess.run(
        [compiler, "-Wall", "-Wextra", "-O2", "-fsyntax-only", include, path],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")


def test_pure_python_is_used_when_asked() -> None:
    """CONTAINERS_PURE_PYTHON=1 leaves the compiled loop out; fmap still works."""
    code = (
        "import containers as ct, containers._engine._fast as m; "
        "print(m._speedups, ct.fmap(lambda v: v + 1, [(1, 2), {'a': 3}]))"
    )
    env = {**os.environ, "CONTAINERS_PURE_PYTHON": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "None [(2, 3), {'a': 4}]"


@compiled
def test_unrolls_the_tuples_its_twin_unrolls() -> None:
    """Both loops map tuples of up to the same length without a call of their mapper."""
    assert _fast._speedups is not None
    assert _fast._speedups.UNROLLED == _loops.UNROLLED_TUPLE_LENGTH


#: Load the built extension from its file and map with it: run in a child process or a
#: subinterpreter, where the package itself (and numpy) need not import.
_LOAD_AND_MAP = """
import importlib.util
spec = importlib.util.spec_from_file_location("containers._engine._speedups", {path!r})
speedups = importlib.util.module_from_spec(spec)
spec.loader.exec_module(speedups)
loop = speedups.Loop(print, {{}}, frozenset({{float}}), frozenset({{float}}), print, print, 100)
loop.bind(abs, speedups.IdTable(), None, False)
assert loop.run([-1.0, (-2.0, -3.0)], 0) == [1.0, (2.0, 3.0)]
"""


def _load_again() -> ModuleType:
    """A new module object from the built extension's file (``import`` would hand back
    the one in ``sys.modules``)."""
    assert _fast._speedups is not None
    spec = importlib.util.spec_from_file_location(
        "containers._engine._speedups", _fast._speedups.__file__
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@compiled
def test_each_load_makes_its_own_module() -> None:
    """Multi-phase initialisation (PEP 489): loading the file again makes a new module
    with its own types (heap types; no Python object in C statics), and both work. The
    types stay closed to subclasses and changes, as the static types they replace."""
    first, second = _fast._speedups, _load_again()
    assert first is not None
    assert second is not first
    assert second.Loop is not first.Loop
    assert second.PairLoop is not first.PairLoop
    assert second.Rebuild is not first.Rebuild
    assert second.IdTable is not first.IdTable
    for module in (first, second):
        loop = module.Loop(print, {}, frozenset({float}), frozenset({float}), print, print, 100)
        loop.bind(abs, module.IdTable(), None, False)
        assert loop.run([-1.0, (-2.0, -3.0)], 0) == [1.0, (2.0, 3.0)]
    message = "table must be an IdTable of this module, or None, not 'containers._engine._speedups.IdTable'"
    with pytest.raises(TypeError, match=re.escape(message)):
        loop.bind(abs, first.IdTable(), None, False)  # one module's loop, another's table
    with pytest.raises(TypeError, match="is not an acceptable base type"):
        type("Sub", (second.Loop,), {})
    with pytest.raises(TypeError, match="immutable type"):
        second.PairLoop.run = None


@compiled
@pytest.mark.skipif(sys.version_info < (3, 12), reason="a GIL per interpreter came in 3.12")
def test_loads_in_a_subinterpreter_with_its_own_gil() -> None:
    """The module declares that it runs in subinterpreters with their own GIL
    (``Py_MOD_PER_INTERPRETER_GIL_SUPPORTED``), which refuse every module that does not:
    one loads it and maps with it (in a child process, through CPython's private
    module for interpreters)."""
    assert _fast._speedups is not None
    script = _LOAD_AND_MAP.format(path=_fast._speedups.__file__)
    code = textwrap.dedent(
        f"""
        try:
            import _interpreters as interpreters  # 3.13+
        except ImportError:
            import _xxsubinterpreters as interpreters  # 3.12
        interp = interpreters.create()  # isolated: its own GIL, checks extensions
        failure = interpreters.run_string(interp, {script!r})  # 3.12 raises instead
        interpreters.destroy(interp)
        print(failure)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "None\n", "")


@compiled
@pytest.mark.skipif(
    not sysconfig.get_config_var("Py_GIL_DISABLED"), reason="not a free-threaded build"
)
def test_turns_the_gil_on_in_a_free_threaded_build() -> None:
    """The module declares that it needs the GIL (``Py_MOD_GIL_USED``): a loop's
    references are read and replaced without locks. A free-threaded build turns the
    GIL on when it loads the module."""
    assert _fast._speedups is not None
    code = _LOAD_AND_MAP.format(path=_fast._speedups.__file__)
    code += "import sys; print(sys._is_gil_enabled())\n"
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_GIL"}
    done = subprocess.run(
        [sys.executable, "-W", "ignore::RuntimeWarning", "-c", code],
        env=env,
        check=False,
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "True\n", "")


def _shapes() -> list[Any]:
    """A tree with each of the loop's cases: small tuples of immutable leaves, a longer
    one, leaves held by the tree alone and shared ones, dicts, a deque, a class."""
    shared = np.zeros(3)
    return [
        (1.0, 2.0),
        (1, 2, 3, 4, 5),
        (np.ones(2),),
        [np.ones(2), shared, shared, "s", 7],
        {"b": shared, "a": [1.5, (2.5, "x")]},
        OrderedDict(z=deque([shared, np.ones(1)])),
        ct.fmap(lambda v: v, [shared]),
    ]


def _watch(tree: Any) -> list[weakref.ref[Any]]:
    """Weak references to every object of ``tree`` that takes one (arrays, deques,
    OrderedDicts): a reference the loop kept by mistake keeps its object alive."""
    refs = []
    for value in ct.fcollect(tree):
        with contextlib.suppress(TypeError):  # a list, tuple or dict takes none
            refs.append(weakref.ref(value))
    return refs


def _all_freed(refs: list[weakref.ref[Any]]) -> bool:
    gc.collect()
    return all(ref() is None for ref in refs)


@compiled
@pytest.mark.parametrize("n_trees", [1, 2])
def test_keeps_nothing_alive_after_a_call(n_trees: int) -> None:
    """After fmap returns, and after f raises at each place in turn, every object of the
    trees is freed with the trees (one tree: Loop; two: PairLoop)."""
    trees = [_shapes() for _ in range(n_trees)]
    refs = _watch(trees)
    assert len(refs) > 5
    for _ in range(3):
        out = ct.fmap(lambda *vs: vs[0], *trees)
        del out
    del trees
    assert _all_freed(refs)
    trees = [_shapes() for _ in range(n_trees)]
    refs = _watch(trees)
    calls: list[Any] = []
    ct.fmap(lambda *vs: calls.append(None), *trees)
    n_calls = len(calls)
    assert n_calls > 10
    for fail_at in range(n_calls):
        seen = [0]

        def fail(*vs: Any, seen: list[int] = seen, fail_at: int = fail_at) -> Any:
            if seen[0] == fail_at:
                raise ValueError(fail_at)
            seen[0] += 1
            return vs[0]

        try:
            ct.fmap(fail, *trees)
        except ValueError as error:  # not pytest.raises: its traceback holds the frames
            assert error.args == (fail_at,)
        else:
            pytest.fail(f"f did not raise at call {fail_at}")
    del trees
    assert _all_freed(refs)


@compiled
def test_a_dict_changed_by_f_raises_and_leaks_nothing() -> None:
    """An iterator that raises inside the compiled loop (a dict f grows) ends the call
    with Python's error."""
    inner = {"a": np.zeros(1), "b": np.zeros(1)}
    tree = [inner]
    refs = _watch(tree) + [weakref.ref(v) for v in inner.values()]

    def grow(v: Any) -> Any:
        inner[f"new{len(inner)}"] = 0
        return v

    try:
        ct.fmap(grow, tree)
    except RuntimeError as error:
        assert str(error) == "dictionary changed size during iteration"
    else:
        pytest.fail("fmap did not raise")
    del tree
    inner.clear()
    assert _all_freed(refs)


@compiled
def test_deep_trees_fit_a_small_thread_stack() -> None:
    """The compiled loops recurse in C, through the nodes' Python mappers, down to the
    fast path's depth limit (``MAX_FAST_DEPTH``; deeper subtrees go to the iterative
    engine). Run in a thread with 128 KB of stack, musl's default (Alpine), on trees
    past the limit (a list 1,000 deep, and dicts, lists and tuples nested 900 deep),
    with one tree and two. (With a limit of 200 this crashed.)"""
    work = """
        deep = inner = []
        for _ in range(1_000):
            child = [1.0]
            inner.append(child)
            inner = child
        mixed = {"a": (1.0, 2.0)}
        for _ in range(300):
            mixed = {"k": [(mixed, 1.0)]}
        kept.extend([deep, mixed])
        for tree in (deep, mixed):
            kept.append(ct.fmap(lambda v: v + 1, tree))
            kept.append(ct.fmap(lambda a, b: a + b, tree, tree))
            assert ct.leaves(kept[-2])[0] == ct.leaves(kept[-1])[0] == 2.0
    """
    _assert_runs_in_a_thread(work, stack_kb=128)


def _assert_runs_in_a_thread(work: str, *, stack_kb: int) -> None:
    """Run ``work`` (statements using ``ct``) in a child process, in a thread with
    ``stack_kb`` KB of stack: it must finish without a crash or an error.

    ``work`` puts every deep tree it makes, and every deep result, in the list
    ``kept``, so that the main thread frees them: CPython 3.13 frees nested objects
    recursively in C, and freeing a list 10,000 deep in a 64 KB thread crashes it,
    containers or not."""
    body = textwrap.indent(textwrap.dedent(work), " " * 4)
    code = (
        "import threading\nimport containers as ct\n\nkept = []\n\ndef work():\n"
        f"{body}    print('ok')\n\n"
        f"threading.stack_size({stack_kb} * 1024)\n"
        "thread = threading.Thread(target=work)\nthread.start()\nthread.join()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")


@pytest.mark.parametrize("engine", ["compiled", "python"])
@pytest.mark.parametrize("kib", [32, 64])
def test_a_thread_with_a_tiny_stack_maps_deep_trees(engine: str, kib: int) -> None:
    """In a thread with 32 or 64 KiB of stack, a list 100 deep (the depth the fast path
    recurses to), mixed trees and a chain of declared nodes 1,000 deep map with one
    tree and two, and through fmapstructure: the compiled loops hand their nodes to
    the iterative engine when the stack runs low. (A list 100 deep crashed the interpreter at 64 KiB.) The trees
    and results outlive the thread, so the main thread frees them: CPython 3.13 frees
    nested objects recursively in C, and a list 1,000 deep freed in a 32 KiB thread
    crashes it, containers or not."""
    if sys.version_info < (3, 11):
        pytest.skip(
            "Python 3.10 runs every Python call on the C stack: the fast paths' 100 levels "
            "need more than 64 KiB there (128 KiB is tested above)"
        )
    if engine == "compiled" and _fast._speedups is None:
        pytest.skip("containers._engine._speedups is not built")
    code = textwrap.dedent(
        f"""
        import threading
        import numpy as np
        import containers as ct

        @ct.container
        class Node:
            a: object
            b: object

        def nested(depth, leaf):
            root = inner = []
            for _ in range(depth):
                child = [leaf]
                inner.append(child)
                inner = child
            return root

        kept = []

        def work():
            mixed = {{"a": (1.0, np.ones(1))}}
            for i in range(1_000):
                mixed = {{"k": [(mixed, 1.0)]}} if i % 2 else Node(np.zeros(1), ({{"m": mixed}},))
            chain = 1.0
            for _ in range(1_000):
                chain = Node(chain, 2.0)
            for tree in (nested(100, 1.0), nested(1_000, 1.0), mixed, chain):
                first = ct.leaves(tree)[0]
                one, two = ct.fmap(lambda v: v + 1, tree), ct.fmap(lambda a, b: a + b, tree, tree)
                structure = ct.fmapstructure(lambda v: v, tree)
                kept.append((tree, one, two, structure))
                assert ct.leaves(one)[0] == first + 1
                assert ct.leaves(two)[0] == 2 * first
                assert ct.leaves(structure) == ct.leaves(tree)
            print("ok")

        threading.stack_size({kib} * 1024)
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "CONTAINERS_PURE_PYTHON"}
    if engine == "python":
        env["CONTAINERS_PURE_PYTHON"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, check=False, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")


@compiled
def test_bad_arguments_are_named() -> None:
    """The Loop's own checks (it is private; _engine._fast._Mode is its one user)."""
    assert _fast._speedups is not None
    loop_type = _fast._speedups.Loop
    callables = r"^Loop: node, value_leaf and cached_leaf must be callable$"
    with pytest.raises(TypeError, match=callables):
        loop_type(1, {}, frozenset(), frozenset(), print, print, 100)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=callables):
        loop_type(print, {}, frozenset(), frozenset(), print, 1, 100)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^Loop: immutable and leaf_types must be sets$"):
        loop_type(print, {}, [], frozenset(), print, print, 100)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^'str' object cannot be interpreted as an integer$"):
        loop_type(print, {}, frozenset(), frozenset(), print, print, "100")  # type: ignore[arg-type]
    loop = loop_type(print, {}, frozenset(), frozenset(), print, print, 100)
    message = (
        "bind(f, table, prune, use_prune): table must be an IdTable of this module, or None, "
        "not 'dict'"
    )
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        loop.bind(print, {}, None, False)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=rf"^{re.escape('bind() takes 4 arguments (5 given)')}$"):
        loop.bind(print, None, [], None, False)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=rf"^{re.escape('run() takes 2 arguments (1 given)')}$"):
        loop.run([])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^Loop\.run: the loop was never initialised$"):
        loop_type.__new__(loop_type).run([], 0)
    with pytest.raises(TypeError, match=r"^Loop\.leaf: the loop was never initialised$"):
        loop_type.__new__(loop_type).leaf([])
    pair_type = _fast._speedups.PairLoop
    with pytest.raises(TypeError, match=r"^PairLoop: pair and node must be callable$"):
        pair_type(print, 1, frozenset(), frozenset())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^PairLoop: immutable and leaf_types must be sets$"):
        pair_type(print, print, frozenset(), {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^PairLoop\.run: the loop was never initialised$"):
        pair_type.__new__(pair_type).run([], [], 0)


# --- IdTable: the identity cache the compiled loops probe by address ----------------------


def _table() -> Any:
    assert _fast._speedups is not None
    return _fast._speedups.IdTable()


class _Value:
    """An object equal to every other one of its kind: only identity tells them apart."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Value)

    def __hash__(self) -> int:
        return 0


@compiled
def test_table_reads_by_id_what_store_wrote() -> None:
    """``store(obj, value)`` is read back by ``id(obj)``, as the plain twin's dict is;
    storing again replaces the value; ``clear`` forgets everything."""
    table, obj, other = _table(), [1], [1]
    assert (len(table), id(obj) in table, table.get(id(obj)), table.get(id(obj), 7)) == (
        0,
        False,
        None,
        7,
    )
    table.store(obj, "first")
    table.store(obj, "second")
    assert (len(table), table[id(obj)], table.get(id(obj), 7), id(obj) in table) == (
        1,
        "second",
        "second",
        True,
    )
    assert id(other) not in table  # equal, but another object
    assert table.keys() == [obj]
    table.clear()
    assert (len(table), id(obj) in table, table.keys()) == (0, False, [])
    table.store(obj, "again")  # usable after clear
    assert table[id(obj)] == "again"


@compiled
def test_table_tells_equal_objects_apart() -> None:
    """Keys are identities: objects that compare and hash equal get entries of their own."""
    table, values = _table(), [_Value() for _ in range(50)]
    for i, v in enumerate(values):
        table.store(v, i)
    assert [table[id(v)] for v in values] == list(range(50))
    assert len(table) == 50


@compiled
def test_table_grows_past_many_resizes() -> None:
    """Thousands of entries (64 slots at first, at most half full, four times as many
    at each growth, then twice) are all found again, and ids of objects never stored
    are not."""
    table, objects = _table(), [object() for _ in range(5000)]
    for i, obj in enumerate(objects):
        table.store(obj, i)
    assert len(table) == 5000
    assert all(table.get(id(obj)) == i for i, obj in enumerate(objects))
    assert not any(
        id(obj) in table for obj in [object() for _ in range(100)] if obj not in objects
    )
    assert sorted(map(id, table.keys())) == sorted(map(id, objects))


@compiled
def test_table_finds_objects_allocated_side_by_side() -> None:
    """100,000 ``object()``s, 16 bytes apart, take runs of neighbouring slots; where runs
    meet, probes leave the run and jump (as the table grows too): every key is found
    again with its value, ids never stored are not, and fmap keeps the sharing."""
    table, objects = _table(), [object() for _ in range(100_000)]
    for i, obj in enumerate(objects):
        table.store(obj, i)
    assert len(table) == len(objects)
    assert all(table.get(id(obj)) == i for i, obj in enumerate(objects))
    strangers = [object() for _ in range(10_000)]
    assert not any(id(obj) in table for obj in strangers)
    out = ct.fmap(lambda v: [v], objects + objects[::-1])
    assert all(a is b for a, b in zip(out[: len(objects)], out[::-1][: len(objects)]))
    assert len({id(v) for v in out}) == len(objects)


@compiled
def test_a_cleared_table_leaves_no_entry_to_the_next() -> None:
    """A cleared table's slots go to the next table of the module (zeroed): objects
    freed after the clear, whose addresses new objects then take, are not found in the
    next table or in the cleared one, and both store and find their new keys."""
    first, second = _table(), _table()
    objects = [[i] for i in range(50_000)]
    for obj in objects:
        first.store(obj, "stale")
    first.clear()
    del objects
    newcomers = [[i] for i in range(50_000)]  # many at the freed addresses
    assert not any(id(obj) in second or id(obj) in first for obj in newcomers)
    for i, obj in enumerate(newcomers):
        second.store(obj, i)
    assert all(second.get(id(obj)) == i for i, obj in enumerate(newcomers))
    out = ct.fmap(lambda v: v, {"a": newcomers, "b": newcomers})
    assert out["a"] is out["b"] and out["a"][7] is out["b"][7] is not newcomers[7]


@compiled
def test_table_spaces_its_slots_by_its_first_keys() -> None:
    """The home slots follow the spacing of the first keys stored (here 256-byte
    objects, then 16-byte ones): keys spaced otherwise later, by the same table or by
    the next one taking its cleared slots, are all found with their values, ids never
    stored are not, and a node looked up before the spacing changed (its children
    stored in between) keeps its entry, as fmap's sharing shows."""
    sparse = [bytearray(200) for _ in range(3000)]
    dense = [object() for _ in range(30_000)]
    first, second = _table(), _table()
    for i, obj in enumerate(sparse + dense):
        first.store(obj, i)
    assert all(first.get(id(obj)) == i for i, obj in enumerate(sparse + dense))
    first.clear()
    for i, obj in enumerate(dense + sparse):
        second.store(obj, i)
    assert all(second.get(id(obj)) == i for i, obj in enumerate(dense + sparse))
    strangers = [object() for _ in range(5000)] + [bytearray(200) for _ in range(500)]
    assert not any(id(obj) in second for obj in strangers)
    node = {"leaves": sparse[:100], "more": dense[:100]}
    out = ct.fmap(lambda v: [v], {"a": node, "b": node, "c": sparse[:100]})
    assert out["a"] is out["b"] and out["a"]["leaves"] is not out["c"]
    assert all(x is y for x, y in zip(out["a"]["leaves"], out["c"]))


@compiled
def test_table_finds_keys_stored_from_two_regions_in_turn() -> None:
    """Keys stored alternately from two regions of memory (two arrays, then the dict
    holding them, as fmap stores a tree of dicts of arrays), on a heap with holes, take
    their spacing in address order: every key is found with its value, by the same
    table and by the next one taking its cleared slots, and ids never stored are not."""
    junk = [np.zeros(4) for _ in range(20_000)]
    del junk[::3]  # holes the next arrays and dicts fill first
    tree = {f"layer{i:05d}": {"b": np.zeros(4), "w": np.zeros((4, 4))} for i in range(20_000)}
    order = [obj for layer in tree.values() for obj in (layer["b"], layer["w"], layer)]
    for table in (_table(), _table()):
        for i, obj in enumerate(order):
            table.store(obj, i)
        assert all(table.get(id(obj)) == i for i, obj in enumerate(order))
        assert not any(id(obj) in table for obj in junk)
        table.clear()
    out = ct.fmap(lambda a: a, {"x": tree, "y": tree})
    assert out["x"] is out["y"] and all(
        out["x"][k]["w"] is v["w"] and out["x"][k] is not v for k, v in tree.items()
    )


@compiled
def test_a_node_stored_after_its_children_keeps_every_entry() -> None:
    """A mutable node is looked up before its children are mapped and stored after them,
    in the slot its lookup found if that slot is still empty: a child stored in between
    may have taken it (in a small table, addresses far apart share slots), and keeps
    its entry. Over many small trees: f runs once per leaf object, and every repeat,
    node or leaf, gets the first result."""

    class Leaf:
        pass

    calls: list[Leaf] = []
    for trial in range(300):
        leaves = [Leaf() for _ in range(12)]
        nodes = [{"x": leaves[i], "y": [leaves[(i + trial) % 12]]} for i in range(12)]
        calls.clear()
        out = ct.fmap(lambda v: calls.append(v) or [v], {"a": nodes, "b": nodes[::-1]})
        assert sorted(map(id, calls)) == sorted(map(id, leaves))
        assert all(a is b for a, b in zip(out["a"], out["b"][::-1]))
        assert all(n["y"][0] is out["a"][(i + trial) % 12]["x"] for i, n in enumerate(out["a"]))


@compiled
def test_table_keeps_its_entries_in_the_order_stored() -> None:
    """``keys()`` lists the objects in the order they were first stored, across the
    resizes (the entries stay in order; only the slots are rebuilt), and storing again
    replaces a value in place."""
    table, objects = _table(), [object() for _ in range(3000)]
    for obj in reversed(objects):
        table.store(obj, 0)
    table.store(objects[-1], "replaced")
    assert table.keys() == objects[::-1]
    assert (len(table), table[id(objects[-1])], table[id(objects[0])]) == (3000, "replaced", 0)


@compiled
def test_table_keeps_its_keys_and_values_alive_until_cleared() -> None:
    """The table holds every key object (so no other object can take its address while it
    is in there) and every value, until ``clear`` or the table's end releases them."""

    class Obj:
        pass

    table, key, value = _table(), Obj(), Obj()
    key_ref, value_ref = weakref.ref(key), weakref.ref(value)
    table.store(key, value)
    del key, value
    gc.collect()
    assert key_ref() is not None
    assert value_ref() is not None
    assert table[id(key_ref())] is value_ref()
    table.clear()
    assert (key_ref(), value_ref()) == (None, None)
    table.store(Obj(), Obj())
    last = weakref.ref(table.keys()[0])
    del table
    assert last() is None


@compiled
def test_table_survives_code_run_by_a_release() -> None:
    """A value whose release runs Python code (``__del__``) that clears or writes the
    table, while the table replaces or clears it, leaves a consistent table."""
    table = _table()

    class Meddler:
        def __del__(self) -> None:
            table.clear()
            table.store(marker, "written during a release")

    marker, obj = object(), object()
    table.store(obj, Meddler())
    table.store(obj, "replacement")  # releases the Meddler: it clears and writes
    assert (len(table), table.get(id(marker))) == (1, "written during a release")
    table.store(obj, Meddler())
    table.clear()  # releases the Meddler again, on a table already detached
    assert (len(table), table.get(id(marker)), id(obj) in table) == (
        1,
        "written during a release",
        False,
    )


@compiled
def test_table_misuse_is_named() -> None:
    """Keys are ids: anything else is a TypeError saying so; an int no object can have
    is simply absent; the methods say how many arguments they take."""
    assert _fast._speedups is not None
    table = _table()
    message = "IdTable: keys are ids of objects (int), not 'str'"
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        table.get("x")
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        "x" in table  # noqa: B015 - the test is the error
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        table["x"]
    with pytest.raises(KeyError, match=r"^12345$"):
        table[12345]
    assert (table.get(2**80, "absent"), -1 in table) == ("absent", False)
    with pytest.raises(TypeError, match=rf"^{re.escape('store() takes 2 arguments (1 given)')}$"):
        table.store(1)
    with pytest.raises(
        TypeError, match=rf"^{re.escape('get() takes 1 or 2 arguments (3 given)')}$"
    ):
        table.get(1, 2, 3)
    with pytest.raises(TypeError, match=r"^IdTable\(\) takes no arguments$"):
        _fast._speedups.IdTable({})
    with pytest.raises(TypeError, match="is not an acceptable base type"):
        type("Sub", (_fast._speedups.IdTable,), {})


@compiled
def test_memo_is_the_table_where_it_is_built() -> None:
    """With the extension built, every ``Memo`` keeps its results in an ``IdTable``; its
    interface (read by id, ``store``, ``keep``, ``clear``) is the plain twin's."""
    assert _fast._speedups is not None
    memo, obj = Memo(), [1]
    assert type(memo.results) is _fast._speedups.IdTable
    memo.store(obj, "result")
    assert (memo.results.get(id(obj), MISS), memo.keep) == ("result", [obj])
    memo.clear()
    assert (memo.results.get(id(obj), MISS), memo.keep) == (MISS, [])


@compiled
def test_table_lookup_reads_by_the_object_itself() -> None:
    """``lookup(obj, default)`` reads what ``store`` wrote for ``obj`` (as ``get`` does by
    ``id(obj)``), ``default`` for another object, equal or not, and after ``clear``; it
    takes exactly two arguments. ``Memo.lookup`` is this method."""
    table, obj, other = _table(), _Value(), _Value()
    assert table.lookup(obj, MISS) is MISS  # no slots yet
    table.store(obj, "result")
    assert (table.lookup(obj, MISS), table.lookup(other, MISS)) == ("result", MISS)
    assert table.lookup(None, 7) == 7
    table.clear()
    assert table.lookup(obj, MISS) is MISS
    with pytest.raises(TypeError, match=rf"^{re.escape('lookup() takes 2 arguments (1 given)')}$"):
        table.lookup(obj)
    memo = Memo()
    assert memo.lookup is not None
    memo.store(obj, 1)
    assert memo.lookup(obj, MISS) == memo.results.get(id(obj), MISS) == 1
    memo.clear()


@pytest.mark.parametrize("table", ["compiled", "plain"])
def test_the_deep_walk_keeps_sharing_with_either_memo(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_FAST_DEPTH fmap runs the iterative walk, which reads the cache by object
    (``Memo.lookup``) with the compiled table and by id with the plain twin: either way
    a shared list and a shared leaf object are mapped once and stay shared, a repeat
    gets ``prune``, and a cycle down there is still reported."""
    if table == "compiled" and _fast._speedups is None:
        pytest.skip("containers._engine._speedups is not built")
    if table == "plain":  # the twin, with the loops that use it
        monkeypatch.setattr(Memo, "table", None)
        monkeypatch.setattr(_fast, "_speedups", None)
        monkeypatch.setattr(_fast, "_idle", {})
    leaf, calls = _Value(), []
    shared = [leaf, 1.0]
    tree: Any = [shared, leaf, shared]
    for _ in range(MAX_FAST_DEPTH + 50):
        tree = [tree]

    def f(x: Any) -> Any:
        calls.append(x)
        return ("mapped", len(calls))

    out = ct.fmap(f, tree)
    bottom = out
    for _ in range(MAX_FAST_DEPTH + 50):
        (bottom,) = bottom
    assert bottom[0] is bottom[2] and bottom[0][0] is bottom[1] == ("mapped", 1)
    assert len(calls) == 2  # the leaf object once, the float once
    pruned = ct.fmap(lambda x: x, tree, prune="P")
    for _ in range(MAX_FAST_DEPTH + 50):
        (pruned,) = pruned
    assert pruned[1:] == ["P", "P"]
    shared.append(shared)
    with pytest.raises(ct.StructureError, match="reference cycle"):
        ct.fmap(f, tree)


@pytest.mark.parametrize("sort", [False, True])
def test_large_str_dicts_keep_sharing_in_the_compiled_loop(sort: bool) -> None:
    """A dict of more than eight str keys (the C loop hints each next value's cache
    slot) maps each shared array once and keeps it shared, in either key order; a
    dict that ``f`` grows raises Python's error where it is read in its own order (sorted
    keys) and is read by key otherwise, as ``map_dict`` reads it."""
    arrays = [np.zeros(2) for _ in range(20)]
    keys = [f"k{i:02d}" for i in range(40)]
    tree = {k: arrays[i % 20] for i, k in enumerate(sorted(keys, reverse=not sort))}
    calls: list[Any] = []
    out = ct.fmap(lambda a: calls.append(a) or a + 1, tree)
    assert len(calls) == 20 and all(out[k] is out[f"k{int(k[1:]) + 20:02d}"] for k in keys[:20])
    grown = dict(tree)

    def grow(a: Any) -> Any:
        grown[f"z{len(grown)}"] = 0.0
        return a

    if not sort:
        assert list(ct.fmap(grow, grown)) == list(tree)
        return
    with pytest.raises(RuntimeError, match="dictionary changed size during iteration"):
        ct.fmap(grow, grown)


def test_plain_memo_is_a_dict_and_a_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the extension (``Memo.table`` None), ``Memo`` is the plain twin: a dict by
    id and a list of the objects, cleared together."""
    monkeypatch.setattr(Memo, "table", None)
    memo, obj = Memo(), [1]
    memo.store(obj, "result")
    assert (memo.results, memo.keep) == ({id(obj): "result"}, [obj])
    memo.clear()
    assert (memo.results, memo.keep) == ({}, [])


@pytest.mark.parametrize("engine", ["compiled", "generated"])
def test_one_table_under_every_path(engine: str) -> None:
    """A leaf object met by the C loop (in a list), by a class's generated mapper and by
    the engine past MAX_FAST_DEPTH is mapped once: all three read the one cache."""
    if engine == "compiled" and _fast._speedups is None:
        pytest.skip("containers._engine._speedups is not built")
    saved = _fast._speedups, _fast._idle
    _fast._speedups, _fast._idle = (saved[0] if engine == "compiled" else None), {}
    try:

        @ct.container(children=["a", "b"])
        class Pair:
            a: Any
            b: Any

        shared, calls = _Value(), []

        def f(x: Any) -> Any:
            calls.append(x)
            return [x]

        deep: Any = shared
        for _ in range(MAX_FAST_DEPTH + 5):
            deep = [deep]
        out = ct.fmap(f, [shared, Pair(shared, shared), deep])
        assert len(calls) == 1
        first = out[0]
        inner = out[2]
        for _ in range(MAX_FAST_DEPTH + 5):
            inner = inner[0]
        assert out[1].a is first and out[1].b is first and inner is first
        assert ct.fmap(f, [shared, Pair(shared, 1)], prune=None)[1].a is None
    finally:
        _fast._speedups, _fast._idle = saved


# --- new_instance: the generated code's object.__new__ and field stores -------------------


@compiled
def test_new_instance_stores_as_object_setattr_past_a_frozen_setattr() -> None:
    """new_instance(cls, names, *values) makes an instance without running the class's
    __new__ or __init__ and stores each value, the very object given, as
    object.__setattr__ would: into the dict in the order given, or a slot."""
    assert _fast._speedups is not None
    new_instance = _fast._speedups.new_instance
    for slots in (False, True):

        @dataclasses.dataclass(frozen=True, slots=slots)
        class Frozen:
            a: Any
            b: Any

            def __new__(cls, *args: Any, **kwargs: Any) -> Any:
                raise AssertionError("no __new__")

            def __post_init__(self) -> None:
                raise AssertionError("no __init__")

        a, b = object(), [1]
        built = new_instance(Frozen, ("b", "a"), b, a)
        assert type(built) is Frozen and built.a is a and built.b is b
        if not slots:
            assert list(vars(built)) == ["b", "a"]
            assert vars(new_instance(Frozen, ())) == {}


@compiled
def test_new_instance_raises_what_object_new_and_setattr_raise() -> None:
    """A class object.__new__ refuses (an abstract class, a built-in base with its own
    __new__) and a name object.__setattr__ refuses raise their errors, and the
    function's own checks name what is wrong."""
    import abc

    assert _fast._speedups is not None
    new_instance = _fast._speedups.new_instance

    class Abstract(abc.ABC):
        @abc.abstractmethod
        def method(self) -> None: ...

    class Number(int):
        pass

    class Slotted:
        __slots__ = ("a",)

    for cls in (Abstract, Number):
        with pytest.raises(TypeError) as expected:
            object.__new__(cls)
        with pytest.raises(TypeError, match=f"^{re.escape(str(expected.value))}$"):
            new_instance(cls, ())
    with pytest.raises(AttributeError, match=r"^'Slotted' object has no attribute 'b'"):
        new_instance(Slotted, ("a", "b"), 1, 2)
    with pytest.raises(TypeError, match=r"^attribute name must be string"):
        new_instance(Slotted, (1,), 2)
    message = (
        "new_instance(cls, names, *values) takes a type, a tuple of names and one value per name"
    )
    for args in (
        (),
        (Slotted,),
        (1, ()),
        (Slotted, ["a"], 1),
        (Slotted, ("a",)),
        (Slotted, (), 1),
    ):
        with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
            new_instance(*args)


# --- Rebuild: interop's rebuild of a frozen class ------------------------------------------


def _rebuild_type() -> Any:
    assert _fast._speedups is not None
    return _fast._speedups.Rebuild


def _unpack_two(children: Any) -> tuple[Any, Any]:
    c0, c1 = children
    return c0, c1


@compiled
@pytest.mark.parametrize("children_as", [tuple, list, iter, deque])
@pytest.mark.parametrize("kept_first", [True, False])
def test_rebuild_stores_past_a_frozen_setattr_without_init(
    children_as: Any, kept_first: bool
) -> None:
    """Rebuild makes an instance of the class without __new__ or __init__ and stores
    each field where object.__setattr__ would (the instance's dict, a slot), the very
    objects given, reset fields getting their default or a factory's value; in either
    argument order, from any iterable of the right length."""
    for slots in (False, True):

        @dataclasses.dataclass(frozen=True, slots=slots)
        class Frozen:
            a: Any
            tag: Any
            b: Any
            shared: Any = "default"
            fresh: Any = dataclasses.field(default_factory=list)

            def __new__(cls, *args: Any, **kwargs: Any) -> Any:
                raise AssertionError("no __new__")

            def __post_init__(self) -> None:
                raise AssertionError("no __init__")

        fields = (
            ("a", "child", 1),
            ("tag", "kept", 0),
            ("b", "child", 0),
            ("shared", "value", "default"),
            ("fresh", "factory", list),
        )
        rebuild = _rebuild_type()(Frozen, fields, _unpack_two, kept_first)
        a, b, kept = object(), [1], ("t",)
        children = children_as([b, a])
        built = rebuild(kept, children) if kept_first else rebuild(children, kept)
        assert type(built) is Frozen
        assert (built.a, built.tag, built.b) == (a, "t", b)
        assert built.a is a and built.b is b and built.tag is kept[0]
        assert built.shared == "default" and built.fresh == []
        if not slots:
            assert list(vars(built)) == ["a", "tag", "b", "shared", "fresh"]


@compiled
def test_rebuild_raises_what_the_generated_rebuild_raises_and_leaks_nothing() -> None:
    """Children of the wrong number or not iterable raise the interpreter's unpacking
    error; a factory that raises, a kept value that is missing and a child that a
    factory removes from the list all end the call with their error or result, and
    every object given is freed afterwards (nothing kept alive by a failed call)."""

    class Plain:
        pass

    class Value:
        pass

    def boom() -> Any:
        raise RuntimeError("factory failed")

    rebuild_type = _rebuild_type()
    kids = [Value(), Value()]
    refs = [weakref.ref(k) for k in kids]
    good = rebuild_type(Plain, (("a", "child", 0), ("b", "child", 1)), _unpack_two, True)
    with pytest.raises(ValueError, match=r"^not enough values to unpack \(expected 2, got 1\)$"):
        good((), kids[:1])
    with pytest.raises(ValueError, match=r"^too many values to unpack \(expected 2"):
        good((), [*kids, 3])
    with pytest.raises(TypeError, match=r"^cannot unpack non-iterable int object$"):
        good((), 3)
    failing = rebuild_type(
        Plain, (("a", "child", 0), ("f", "factory", boom), ("b", "child", 1)), _unpack_two, True
    )
    with pytest.raises(RuntimeError, match=r"^factory failed$"):
        failing((), kids)
    missing = rebuild_type(Plain, (("a", "child", 0), ("k", "kept", 3)), tuple, True)
    with pytest.raises(IndexError, match=r"^tuple index out of range$"):
        missing((1,), kids[:1])
    with pytest.raises(TypeError, match=r"^'NoneType' object is not subscriptable$"):
        missing(None, kids[:1])

    def shrink() -> Any:
        kids.clear()  # the children were taken before: the rebuild still holds them
        return "f"

    taken = rebuild_type(
        Plain, (("a", "child", 0), ("f", "factory", shrink), ("b", "child", 1)), _unpack_two, True
    )
    built = taken((), kids)
    assert built.f == "f" and all(isinstance(v, Value) for v in (built.a, built.b))
    del built
    assert _all_freed(refs)


@compiled
def test_rebuild_bad_arguments_are_named() -> None:
    """Rebuild's own checks (it is private; interop._generated is its one user)."""
    rebuild_type = _rebuild_type()

    class Plain:
        pass

    with pytest.raises(TypeError, match=r"must be type, not int"):
        rebuild_type(1, (), None, True)
    with pytest.raises(
        TypeError, match=r"^Rebuild: each field must be a tuple \(name, how, arg\)$"
    ):
        rebuild_type(Plain, (["a", "child", 0],), print, True)
    with pytest.raises(ValueError, match=r"^Rebuild: unknown how 'kid' for field 'a'$"):
        rebuild_type(Plain, (("a", "kid", 0),), print, True)
    with pytest.raises(TypeError, match=r"^Rebuild: a field's name and how must be str$"):
        rebuild_type(Plain, ((1, "child", 0),), print, True)
    with pytest.raises(ValueError, match=r"^Rebuild: child index 1 out of range$"):
        rebuild_type(Plain, (("a", "child", 1),), print, True)
    with pytest.raises(ValueError, match=r"^Rebuild: negative index for field 'a'$"):
        rebuild_type(Plain, (("a", "kept", -1),), print, True)
    with pytest.raises(TypeError, match=r"^Rebuild: the factory of field 'a' must be callable$"):
        rebuild_type(Plain, (("a", "factory", 1),), print, True)
    with pytest.raises(TypeError, match=r"^Rebuild: unpack must be callable$"):
        rebuild_type(Plain, (("a", "child", 0),), None, True)
    rebuild = rebuild_type(Plain, (("a", "child", 0),), lambda c: c, True)
    with pytest.raises(TypeError, match=r"^Rebuild: unpack must return a tuple of 1$"):
        rebuild((), iter([1]))
    message = "Rebuild() takes 2 arguments (1 given)"
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        rebuild(())
    with pytest.raises(TypeError, match=r"^Rebuild\(\) takes no keyword arguments$"):
        rebuild((), (1,), x=1)
    with pytest.raises(TypeError, match="is not an acceptable base type"):
        type("Sub", (rebuild_type,), {})


# --- MapNode: a declared class's mapper, run by the compiled loop ----------------------


@ct.container(children=["w", "b"], keep=["name"])
class _Mapped:
    """Every source of a field: children, a kept field, reset value and factory."""

    w: Any
    b: Any
    name: str = "m"
    cache: dict[str, Any] | None = None
    seen: list[Any] = dataclasses.field(default_factory=list)


@ct.container(children=["w"])
@attrs.define(frozen=True)
class _SlotMapped:
    w: Any
    spare: Any = attrs.field(init=False, default=None)


@ct.container(children=["a", "b"])
@dataclasses.dataclass(frozen=True)
class _Unset:
    a: Any
    b: Any = dataclasses.field(init=False)


def _map_node_frames(fn: Any, *args: Any, **options: Any) -> tuple[Any, int]:
    """fn(*args, **options), and how many Python frames the generated mappers ran in
    it, called a second time."""
    frames = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal frames
        frames += event == "call" and frame.f_code.co_name == "map_node"

    fn(*args, **options)  # a mode meets each class first in Python (_Mode.node)
    sys.setprofile(profile)
    try:
        return fn(*args, **options), frames
    finally:
        sys.setprofile(None)


@pytest.mark.parametrize("cache", [True, False])
def test_the_compiled_loop_maps_declared_classes_without_their_mappers(
    engine: str, cache: bool
) -> None:
    """With the compiled loop, a frozen declared class is mapped in C (MapNode) and its
    generated mapper, the twin, runs no frame; both read every source of a field and
    call f alike (the property tests compare them on random classes)."""
    shared = np.ones(2)
    tree = [_Mapped(shared, [shared, 2.0], "first"), (_SlotMapped(shared), _Mapped(1, shared))]
    calls: list[Any] = []

    def f(x: Any) -> Any:
        calls.append(x)
        return x * 2

    out, frames = _map_node_frames(ct.fmap, f, tree, cache=cache)
    assert (frames == 0) == (engine == "compiled"), frames
    del calls[: len(calls) // 2]  # the first call's
    expected = [shared, 2.0, 1] if cache else [shared, shared, 2.0, shared, 1, shared]
    assert [id(x) for x in calls] == [id(x) for x in expected]
    first, (slotted, last) = out
    assert (first.name, first.cache, first.seen, last.name) == ("first", None, [], "m")
    assert first.seen is not last.seen  # the factory ran once per node
    assert first.b[1] == 4.0 and last.w == 2 and slotted.spare is None
    assert np.array_equal(slotted.w, [2.0, 2.0])
    assert (first.w is slotted.w is last.b) == cache  # sharing with the cache


def test_map_node_gives_fmapstructure_the_dict_of_children(engine: str) -> None:
    got, frames = _map_node_frames(ct.fmapstructure, str, [_Mapped(1.0, (2.0,)), _SlotMapped(3)])
    assert (frames == 0) == (engine == "compiled")
    assert got == [{"w": "1.0", "b": ("2.0",)}, {"w": "3"}]


def test_map_node_raises_what_the_generated_mapper_raises(engine: str) -> None:
    """An unset field is named; f's own AttributeError goes through unchanged but for
    its context, which the mapper's `raise ... from None` suppresses."""
    with pytest.raises(ct.StructureError, match=r"^_Unset\.b is not set on this _Unset "):
        ct.fmap(float, [_Unset(1.0)])
    error = AttributeError("f's own")

    def fails(x: Any) -> Any:
        raise error

    with pytest.raises(AttributeError) as raised:
        ct.fmap(fails, [_Mapped(1.0, 2.0)])
    assert raised.value is error
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_map_node_hands_deep_chains_to_the_engine(engine: str) -> None:
    """Declared nodes nested past the fast path's depth go to the iterative engine: the
    compiled loop calls the generated mapper once, at the first node past the limit,
    which hands the rest over; the twin runs it at every level down to there."""
    chain: Any = 0.0
    for _ in range(3 * MAX_FAST_DEPTH):
        chain = _SlotMapped(chain)
    out, frames = _map_node_frames(ct.fmap, lambda v: v + 1, chain)
    assert frames == 1 if engine == "compiled" else frames > MAX_FAST_DEPTH, frames
    assert ct.leaves(out) == [1.0]
    assert len(ct.structure(out).paths()[0]) == 3 * MAX_FAST_DEPTH


@compiled
def test_map_node_bad_arguments_are_named() -> None:
    """MapNode's own checks (it is private; _engine._fast._Mode is its one user)."""
    assert _fast._speedups is not None
    map_node, loop_type = _fast._speedups.MapNode, _fast._speedups.Loop
    loop = loop_type(print, {}, frozenset(), frozenset(), print, print, 100)
    callables = r"^MapNode: mapper and unset must be callable$"
    with pytest.raises(TypeError, match=callables):
        map_node(1, loop, _SlotMapped, (), (), print, False)
    with pytest.raises(TypeError, match=callables):
        map_node(print, loop, _SlotMapped, (), (), 1, False)
    with pytest.raises(
        TypeError, match=r"^MapNode: loop must be a Loop of this module, not 'dict'$"
    ):
        map_node(print, {}, _SlotMapped, (), (), print, False)
    with pytest.raises(TypeError, match=r"^MapNode: children must be a tuple of str$"):
        map_node(print, loop, _SlotMapped, (), (1,), print, False)
    with pytest.raises(TypeError, match=r"^MapNode: a field's name and how must be str$"):
        map_node(print, loop, _SlotMapped, ((1, "child", 0),), ("w",), print, False)
    cannot = r"^MapNode: field 'w' cannot be built here \(a factory taking self, or a child"
    with pytest.raises(ValueError, match=cannot):
        map_node(print, loop, _SlotMapped, (("w", "child", 1),), ("w",), print, False)
    with pytest.raises(ValueError, match=cannot):
        map_node(print, loop, _SlotMapped, (("w", "factory_self", print),), (), print, False)
    node = map_node(lambda x, d: ("deep", x, d), loop, _SlotMapped, (), (), print, False)
    arguments = r"^MapNode\(\) takes 2 positional arguments \(x, depth\)$"
    with pytest.raises(TypeError, match=arguments):
        node(1)
    with pytest.raises(TypeError, match=arguments):
        node(1, depth=2)
    assert node(1, 101) == ("deep", 1, 101)  # past the loop's max_depth: the mapper's
    with pytest.raises(TypeError, match="is not an acceptable base type"):
        type("Sub", (map_node,), {})


# --- flatten: the compiled twin of _flat.flatten_fast ------------------------------------


#: The compiled module as imported (an ``engine`` fixture may switch ``_fast._speedups``).
_SPEEDUPS = _fast._speedups


def _flatten_with(compiled_walk: bool, tree: Any, none_is_leaf: bool, records: Any) -> Any:
    """The leaves of ``tree`` by ``_speedups.flatten`` or by ``flatten_fast``, its twin;
    records appended to ``records`` unless it is None. An error is returned, not raised."""
    leaf_types = LEAF_TYPES_NONE if none_is_leaf else LEAF_TYPES
    kind = kind_of(tree)
    try:
        if compiled_walk:
            assert _SPEEDUPS is not None
            return _SPEEDUPS.flatten(tree, kind, leaf_types, records, _flat.C_CONTEXT)
        return _flat.flatten_fast(tree, kind, leaf_types, records)
    except Exception as err:  # compared by the caller, type and message
        return err


def _same_flatten(tree: Any) -> None:
    """Both walks give the same leaves (the same objects, in order), the same records
    and the same leaves without records, or the same error, with None a node and a leaf."""
    for none_is_leaf in (False, True):
        results = []
        for compiled_walk in (True, False):
            records: list[Any] = []
            leaves = _flatten_with(compiled_walk, tree, none_is_leaf, records)
            alone = _flatten_with(compiled_walk, tree, none_is_leaf, None)
            results.append((leaves, records, alone))
        (c_leaves, c_records, c_alone), (p_leaves, p_records, p_alone) = results
        if isinstance(p_leaves, Exception):
            assert (type(c_leaves), str(c_leaves)) == (type(p_leaves), str(p_leaves))
            assert (type(c_alone), str(c_alone)) == (type(p_alone), str(p_alone))
            continue
        assert list(map(id, c_leaves)) == list(map(id, p_leaves))
        assert list(map(id, c_alone)) == list(map(id, p_leaves))
        assert len(c_records) == len(p_records)
        for c, p in zip(c_records, p_records):
            assert c[0] is p[0]
            assert c[1:] == p[1:]


def _nested(depth: int, make: Any) -> Any:
    tree: Any = 1.0
    for i in range(depth):
        tree = make(tree, i)
    return tree


Pair = namedtuple("Pair", ["a", "b"])


@ct.container(children=["w", "b"], keep=["name"])
class _Layer:
    w: Any
    b: Any
    name: str = "l"


class _Key(str):
    """A str subclass as a dict key (its comparisons may run Python code)."""


#: Trees that reach every branch of the compiled flatten and leaf_paths.
EDGE_TREES = [
    [],
    (),
    {},
    None,
    [None, [], (), {}],
    1.0,
    (1, 2.0, "s", b"b", True, None),
    [(1.0, 2.0), [3.0, (4.0, [5.0])], {"b": 6, "a": (7,)}],
    {"b": [1, (2, 3)], "a": {"y": None, "x": [4]}, 3: 5},
    OrderedDict([("z", 1), ("a", [2, 3])]),
    {"b": 1, "a": 2, "c": {"z": [1.0], "y": 2.0}},  # str keys out of order: in C
    {"a": 1, "b": [2.0], "c": {"x": 3, "y": 4}},  # str keys inserted sorted: one pass
    {"a": 1, "b": 2, "d": 3, "c": 4},  # sorted until the last key: sorted after all
    {"a": 1, "b": 2, "a2": 3},  # "a2" after "b": out of order at the end
    {"a": 1, "b": 2, _Key("c"): 3},  # sorted, then a key that is no exact str
    {"a": 1, "b": 2, 3: 3},  # sorted, then a key that is no str
    {"Z": 1, "a": 2, "é": 3, "\U0001f600": 4},  # code point order, one pass
    {"é": 1, "z": 2},  # code point order says "z" < "é": sorted
    {"only": [1.0]},
    [{"b": 1.0, "a": 2.0} for _ in range(9)],  # dicts of leaves: each in C, no run
    {_Key("b"): 1, "a": 2},  # a key that is no exact str: the kind's flatten
    {"a": 1, 2: 3, (1,): 4},  # keys that do not compare: its fallback order
    deque([1, (2, 3)], maxlen=5),
    Pair(1, [2, (3, 4)]),
    [Pair((1, 2), None), Pair(3, 4)],
    _Layer(np.zeros(2), [1.0, 2.0]),
    [_Layer(1.0, 2.0) for _ in range(9)],  # a run: _flatten_run takes it
    [_Layer(1.0, 2.0) for _ in range(8)] + [_Layer(1.0, [2.0])],  # almost a run
    [(1.0, 2.0, 3.0, 4.0)] * 9,  # eight or more tuples: no run
    [1.0, object(), "s", np.ones(3), (object(),)],
    [1, [2, 3], 4, (5, [6]), 7],  # mixed leaves and nodes: a tuple mask
    [[1, 2]] * 3,
    _nested(150, lambda t, i: [t, i]),
    _nested(150, lambda t, i: {"k": (t, float(i))}),
    _nested(150, lambda t, i: [t]),
]


@compiled
@pytest.mark.parametrize("tree", EDGE_TREES)
def test_flatten_agrees_with_flatten_fast(tree: Any) -> None:
    """The compiled flatten gives flatten_fast's leaves (the same objects) and records,
    or the same error, on edge cases and past the depth where both hand over."""
    _same_flatten(tree)


@ct.container(children=["w", "b"], keep=["name", "scale"])
class _Kept2:
    w: Any
    b: Any
    name: str = "k"
    scale: Any = 1.0


@pytest.mark.parametrize("snapshot", [False, True])
def test_a_run_of_containers_with_kept_values_flattens_as_node_by_node(snapshot: bool) -> None:
    """A list of nine containers with one or two kept fields (a list among them, the
    same objects from node to node or not): the run (_flatten_run: kept values read by
    attrgetter; in C, flat_run_read) gives the records and leaves of the node-by-node
    walk (each kind's flatten, or flatten_snapshot), in both engines."""
    trees = [
        [_Layer(1.0, np.zeros(2), f"n{i}") for i in range(9)],
        [_Kept2(1.0, 2.0, "n", [i]) for i in range(9)],
        [_Kept2(1.0, 2.0, "n", (1, "s")) for i in range(9)],
        # kept values the same objects node after node, then others, then again
        [_Layer(1.0, np.zeros(2), name) for name in ["a", "a", "b", "b", "a", "a", "c", "a", "a"]],
        [_Kept2(1.0, 2.0, name, scale) for name, scale in zip("aabbaaaab", [1.0] * 4 + [2.0] * 5)],
    ]
    for tree in trees:
        want: list[Any] = []
        want_records: list[Any] = []
        _flat.flatten_plain(tree, want, want_records, LEAF_TYPES, None, "flatten", snapshot)
        got_records: list[Any] = []
        got = _flat.flatten_fast(tree, kind_of(tree), LEAF_TYPES, got_records, None, snapshot)
        assert list(map(id, got)) == list(map(id, want)) and got_records == want_records
        c_records: list[Any] = []
        c = _flat.flatten_records(tree, None, False, "flatten", c_records, snapshot=snapshot)
        assert list(map(id, c)) == list(map(id, want)) and c_records == want_records


def _shared_variants() -> list[Any]:
    """Trees with a mutable value at two positions, and with only values repeated."""
    arr, layer, row = np.zeros(2), _Layer(1.0, 2.0), [1.0, 2.0]
    tup = (1.0, 2.0)
    return [
        {"a": arr, "b": [arr]},  # a mutable leaf twice
        [row, {"k": row}],  # a list node twice
        [layer] * 9,  # a run of one node: _flatten_run takes it
        [_Layer(row, 1.0), _Layer(2.0, row)],
        [tup, tup, (tup,)],  # a tuple twice: a value, not cached
        [1.5, 1.5, "s", "s", None, None],  # the same values twice
        {"x": [[]], "y": [[]]},  # equal, not the same
    ]


@compiled
@pytest.mark.parametrize("tree", EDGE_TREES + _shared_variants())
def test_flatten_once_agrees_with_its_twin(tree: Any) -> None:
    """The compiled flatten with immutable= gives flatten_once's leaves, records and
    verdict: True exactly when no node of a mutable kind and no leaf of a type not in
    IMMUTABLE_LEAVES sits at two positions (False past the hand-over depth)."""
    kind = kind_of(tree)
    if kind is None:
        return
    c_records: list[Any] = []
    p_records: list[Any] = []
    assert _SPEEDUPS is not None
    c_leaves, c_once = _SPEEDUPS.flatten(
        tree, kind, LEAF_TYPES, c_records, _flat.C_CONTEXT, IMMUTABLE_LEAVES
    )
    p_leaves, p_once = _flat.flatten_once(tree, kind, LEAF_TYPES, p_records, IMMUTABLE_LEAVES)
    assert list(map(id, c_leaves)) == list(map(id, p_leaves))
    assert c_records == p_records and c_once is p_once
    positions = _every_position(tree)
    cached = [id(v) for v, _ in positions if cacheable(v)]
    deep = max(depth for _, depth in positions) > MAX_FAST_DEPTH
    assert c_once is (len(set(cached)) == len(cached) and not deep)


def _every_position(tree: Any) -> list[tuple[Any, int]]:
    """Every node and leaf of ``tree`` in pre-order, at every position it sits, with
    its depth."""
    out, stack = [], [(tree, 0)]
    while stack:
        value, depth = stack.pop()
        out.append((value, depth))
        kind = kind_of(value)
        if kind is not None:
            stack.extend((kid, depth + 1) for kid in reversed(kind.flatten(value)[0]))
    return out


@compiled
def test_flatten_once_says_false_past_the_hand_over_depth() -> None:
    """A subtree handed to the plain walk is not looked at: False, in both walks."""
    tree = _nested(150, lambda t, i: [t, float(i)])
    assert _SPEEDUPS is not None
    flat = _SPEEDUPS.flatten(
        tree, kind_of(tree), LEAF_TYPES, [], _flat.C_CONTEXT, IMMUTABLE_LEAVES
    )
    assert flat[1] is False
    assert _flat.flatten_once(tree, kind_of(tree), LEAF_TYPES, [], IMMUTABLE_LEAVES)[1] is False


@compiled
def test_flatten_with_a_bad_immutable_is_refused() -> None:
    """immutable= that is not a set: a TypeError saying so."""
    assert _SPEEDUPS is not None
    with pytest.raises(TypeError, match="immutable must be a set"):
        _SPEEDUPS.flatten([1.0], kind_of([]), LEAF_TYPES, [], _flat.C_CONTEXT, [float])


@compiled
def test_flatten_agrees_on_a_very_deep_tree() -> None:
    """A list nested 100,000 deep: both walks hand it to the plain walk at the same
    depth, and give the same leaves and records."""
    _same_flatten(_nested(100_000, lambda t, i: [t, i]))


@compiled
def test_flatten_makes_a_record_once_for_a_run_of_equal_nodes() -> None:
    """Consecutive nodes of one sort whose records hold the same objects (kind, aux, n,
    mask) get one record object; any difference (n, aux, mask, kind) makes a new one;
    the records equal the plain walk's, and so do the Structures."""
    layer = _Layer(1.0, 2.0)
    tree = {
        "a": [(1.0, 2.0)] * 4 + [(3.0,), (4.0, 5.0)],  # n differs, then the same again
        "b": [[1, [2]], [3, [4]]],  # a mask (False, True) is a new tuple each time
        "c": [layer, _Layer(3.0, 4.0), _Layer(5.0, 6.0, name="other")],  # aux
        "d": [(), [], ()],  # a tuple's record outlives the list between them
    }
    records: list[Any] = []
    leaves = _flatten_with(True, tree, False, records)
    twin: list[Any] = []
    assert _flatten_with(False, tree, False, twin) == leaves
    assert records == twin
    assert ct.structure(tree)._records == tuple(twin)
    by_id = {id(r): r for r in records}
    tuples_of_two = [r for r in records if r[0] is TUPLE and r[2] == 2]
    assert len({id(r) for r in tuples_of_two}) == 2  # before (3.0,) and after it
    masks = [r for r in records if isinstance(r[3], tuple)]
    assert len(masks) == len({id(r) for r in masks}) == 2  # each list's own mask tuple
    layers = [r for r in records if r[0] is not TUPLE and r[0] is not LIST and r[2] == 2]
    assert [r[1] for r in layers] == [("l",), ("l",), ("other",)]
    assert len({id(r) for r in layers}) == 3  # each layer's kept values: a new tuple
    empty_tuples = [r for r in records if r[0] is TUPLE and r[2] == 0]
    assert len({id(r) for r in empty_tuples}) == 1
    assert len(by_id) < len(records)


class _Odd:
    """A node type of a test kind (below), whose ``flatten`` is a function of the test."""

    def __init__(self, *kids: Any) -> None:
        self.kids = list(kids)


@contextlib.contextmanager
def _odd_kind(flatten: Any) -> Any:
    """Make ``_Odd`` a node whose kind flattens with ``flatten``, for the block."""
    kind = NodeKind(
        _Odd,
        "an _Odd",
        flatten=flatten,
        unflatten=lambda aux, ch: _Odd(*ch),
        read=lambda y, aux, n: list(y.kids),
        structural=lambda aux, ch: _Odd(*ch),
        mutable=True,
    )
    KINDS[_Odd] = kind
    try:
        yield kind
    finally:
        del KINDS[_Odd]


@compiled
def test_flatten_raises_what_a_node_flatten_raises() -> None:
    """A node's flatten that raises, or returns no pair: both walks raise the same."""

    def boom(x: Any) -> Any:
        raise ValueError("boom")

    for flatten, error in [
        (boom, "boom"),
        (lambda x: (x.kids,), "not enough values to unpack"),
        (lambda x: (x.kids, 1, 2), "too many values to unpack"),
        (lambda x: 3, "cannot unpack non-iterable int object"),
        (lambda x: (3, None), "'int' object is not iterable"),
    ]:
        with _odd_kind(flatten):
            tree = [1.0, (_Odd(2.0),)]
            for compiled_walk in (True, False):
                err = _flatten_with(compiled_walk, tree, False, [])
                assert isinstance(err, (ValueError, TypeError))
                assert error in str(err)
            _same_flatten(tree)


@compiled
def test_flatten_takes_any_iterable_of_children() -> None:
    """A node's flatten may give its children as any sized iterable (here a deque and a
    dict view), as in the Python walk; aux is kept as given. An iterator is no
    sequence of children: both walks raise TypeError for it."""
    with _odd_kind(lambda x: (deque(x.kids), ("aux", len(x.kids)))):
        _same_flatten([_Odd(1.0, [2.0, _Odd()]), _Odd(3.0)])
    with _odd_kind(lambda x: ({"a": x.kids[0]}.values(), None)):
        _same_flatten(_Odd((1.0, 2.0)))
    with _odd_kind(lambda x: (iter(x.kids), None)):
        for compiled_walk in (True, False):
            err = _flatten_with(compiled_walk, [_Odd(1.0, [2.0])], False, [])
            assert isinstance(err, TypeError)
            assert "has no len()" in str(err)


@compiled
def test_flatten_survives_a_node_flatten_that_changes_the_tree() -> None:
    """A node's flatten that empties or extends the list being walked: the compiled
    walk reads the list as a Python for loop does (its length at each step), and gives
    what flatten_fast gives; nothing is freed while it is used."""
    outer: list[Any] = []

    def grab(x: Any) -> Any:
        outer.clear()  # the only reference to the children after this one
        outer.extend([object(), [1.0, object()]])
        return x.kids, None

    for compiled_walk in (True, False):
        outer[:] = [1.0, _Odd(2.0), [3.0, 4.0], object(), _Odd()]
        with _odd_kind(grab):
            records: list[Any] = []
            leaves = _flatten_with(compiled_walk, outer, False, records)
        assert not isinstance(leaves, Exception)
        if compiled_walk:
            compiled_result = (len(leaves), [r[2:] for r in records])
        else:
            assert (len(leaves), [r[2:] for r in records]) == compiled_result


@compiled
def test_flatten_reports_a_cycle_with_its_path() -> None:
    """A cycle goes past the depth limit in the compiled walk, to the plain walk, whose
    error flatten_records relocates: the user sees the located cycle error."""
    tree: dict[str, Any] = {"a": [1, 2]}
    tree["a"].append(tree)
    with pytest.raises(ct.StructureError, match=r"^flatten: the tree has a reference cycle"):
        ct.flatten(tree)
    with pytest.raises(ct.StructureError, match=r"^leaves: .* at \"\['a'\]\[2\]\""):
        ct.leaves(tree)


@compiled
def test_flatten_raises_for_an_undeclared_subclass() -> None:
    """kind_of's error for an undeclared subclass of a container propagates from the
    compiled walk, and flatten reports it with its path."""

    class Sub(_Layer):
        pass

    tree = [1.0, (Sub(1.0, 2.0),)]
    _same_flatten(tree)
    with pytest.raises(ct.ContainerDefinitionError, match="'Sub' is a subclass"):
        ct.leaves(tree)


@compiled
def test_flatten_follows_the_engine_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """flatten_records reads ``_fast._speedups`` at each call, as the tests' engine
    fixture switches it: None runs flatten_fast."""
    calls: list[Any] = []
    real = _flat.flatten_fast
    monkeypatch.setattr(_fast, "_speedups", _SPEEDUPS)
    monkeypatch.setattr(_flat, "flatten_fast", lambda *a: calls.append(a) or real(*a))
    ct.leaves([1, (2, 3)])
    assert calls == []
    monkeypatch.setattr(_fast, "_speedups", None)
    assert ct.leaves([1, (2, 3)]) == [1, 2, 3]
    assert len(calls) == 1


@compiled
def test_flatten_keeps_nothing_alive() -> None:
    """After a call, returned or raised, the compiled flatten holds nothing of the tree,
    and many calls do not grow memory."""
    tree = {"a": [(np.zeros(1), 2.0)] * 3, "b": [_Layer(np.ones(1), [1.0])], "c": Pair(1, None)}
    refs = _watch(tree)
    for _ in range(3):
        ct.flatten(tree)
        ct.leaves(tree)
    cyclic: list[Any] = [tree]
    cyclic.append(cyclic)
    with pytest.raises(ct.StructureError):
        ct.flatten(cyclic)
    del tree, cyclic
    gc.collect()
    assert _all_freed(refs)

    small = {"k": [(1.0, 2.0, 3.0, 4.0)] * 5, "m": [1, [2, (3,)]]}
    for _ in range(2_000):  # warm up: caches, freelists
        ct.flatten(small)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20_000):
            ct.flatten(small)
            ct.leaves(small)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024


@compiled
def test_flatten_of_deep_trees_fits_a_small_thread_stack() -> None:
    """The compiled flatten recurses in C down to MAX_FAST_DEPTH: in a thread with
    64 KB of stack it flattens a list 10,000 deep and dicts nested 2,000 deep."""
    work = """
        deep = [1.0]
        for _ in range(10_000):
            deep = [deep, 2.0]
        mixed = {"a": (1.0, 2.0)}
        for _ in range(2_000):
            mixed = {"k": [(mixed, 1.0)]}
        kept.extend([deep, mixed])
        for tree in (deep, mixed):
            leaves, s = ct.flatten(tree)
            assert ct.leaves(tree) == leaves and leaves[0] == 1.0
    """
    _assert_runs_in_a_thread(work, stack_kb=64)


@compiled
def test_flatten_bad_arguments_are_named() -> None:
    """Wrong arguments to the compiled flatten raise TypeError saying what is wrong."""
    assert _SPEEDUPS is not None
    flatten = _SPEEDUPS.flatten
    with pytest.raises(TypeError, match=r"^flatten\(\) takes 5 or 6 arguments \(1 given\)$"):
        flatten([])
    with pytest.raises(TypeError, match="leaf_types must be a set, records a list or None"):
        flatten([], LIST, [float], None, _flat.C_CONTEXT)
    with pytest.raises(TypeError, match="leaf_types must be a set, records a list or None"):
        flatten([], LIST, LEAF_TYPES, (), _flat.C_CONTEXT)
    with pytest.raises(TypeError, match="context must be a tuple"):
        flatten([], LIST, LEAF_TYPES, None, [])
    with pytest.raises(TypeError, match="flatten context"):
        flatten([], LIST, LEAF_TYPES, None, (1, 2))


# --- leaf_paths: a Structure's key paths -----------------------------------------------


def _same_paths(records: Any) -> list[Any]:
    """The compiled leaf_paths and ranked_paths give equal paths, or the same error."""
    from containers._flatten import PATHS_CONTEXT, ranked_paths

    assert _fast._speedups is not None
    results = []
    for run in (
        lambda: _fast._speedups.leaf_paths(records, PATHS_CONTEXT),
        lambda: ranked_paths(records, None, 0)[0],
    ):
        try:
            results.append(run())
        except Exception as error:  # compared below, by type and message
            results.append(error)
    compiled_paths, plain_paths = results
    if isinstance(plain_paths, Exception):
        assert (type(compiled_paths), str(compiled_paths)) == (
            type(plain_paths),
            str(plain_paths),
        )
        return []
    assert compiled_paths == plain_paths
    assert all(type(path) is tuple for path in compiled_paths)
    return list(compiled_paths)


@compiled
@pytest.mark.parametrize("tree", EDGE_TREES)
def test_leaf_paths_agree_with_ranked_paths(tree: Any) -> None:
    """The compiled leaf_paths gives ranked_paths' key paths, on records of both None
    conventions, as a tuple (a Structure's) and as a list."""
    for none_is_leaf in (False, True):
        records = ct.structure(tree, none_is_leaf=none_is_leaf)._records
        paths = _same_paths(records)
        assert _same_paths(list(records)) == paths
        assert len(paths) == len(ct.leaves(tree, none_is_leaf=none_is_leaf))


@compiled
def test_leaf_paths_of_a_very_deep_tree() -> None:
    """Records are flat: a list nested 100,000 deep has one path of 100,000 keys."""
    tree = _nested(100_000, lambda t, i: [t])
    (path,) = _same_paths(ct.structure(tree)._records)
    assert len(path) == 100_000


@compiled
def test_leaf_paths_call_keys_once_per_node_and_raise_what_it_raises() -> None:
    """A kind's ``keys`` is called once per node, in record order, as in ranked_paths
    (sequences of one length share one call); what it raises goes through."""
    seen: list[Any] = []

    def keys(aux: Any, n: int) -> tuple[Any, ...]:
        seen.append(aux)
        return tuple(ct.DictKey(f"{aux}{i}") for i in range(n))

    kind = NodeKind(
        _Odd,
        "an _Odd",
        flatten=lambda x: (x.kids, len(x.kids)),
        unflatten=lambda aux, ch: _Odd(*ch),
        read=lambda y, aux, n: list(y.kids),
        structural=lambda aux, ch: _Odd(*ch),
        mutable=True,
        keys=keys,
    )
    KINDS[_Odd] = kind
    try:
        records = ct.structure([_Odd(1.0, _Odd(2.0)), (3.0, 4.0), (5.0, 6.0)])._records
        paths = _same_paths(records)
        assert seen == [2, 1, 2, 1]  # the compiled walk, then the plain one
        assert ct.keystr(paths[1]) == "[0]['21']['10']"

        def broken(aux: Any, n: int) -> Any:
            raise ValueError(f"no keys for {aux}")

        KINDS[_Odd] = NodeKind(
            _Odd,
            "an _Odd",
            flatten=lambda x: (x.kids, len(x.kids)),
            unflatten=lambda aux, ch: _Odd(*ch),
            read=lambda y, aux, n: list(y.kids),
            structural=lambda aux, ch: _Odd(*ch),
            mutable=True,
            keys=broken,
        )
        with pytest.raises(ValueError, match="no keys for 1"):
            _fast._speedups.leaf_paths(ct.structure([_Odd(1.0)])._records, (None, LIST, "keys"))
    finally:
        del KINDS[_Odd]


@compiled
def test_leaf_paths_reject_malformed_records() -> None:
    """Records that no Structure holds raise a clear error instead of reading past them."""
    from containers._flatten import PATHS_CONTEXT

    leaf_paths = _fast._speedups.leaf_paths
    (record,) = ct.structure([1.0, 2.0])._records
    with pytest.raises(TypeError, match=r"a record must be a tuple \(kind, aux, n, mask\)"):
        leaf_paths([record[:3]], PATHS_CONTEXT)
    with pytest.raises(IndexError, match="the records end inside a node"):
        leaf_paths([(record[0], None, 1, True)], PATHS_CONTEXT)
    with pytest.raises(TypeError, match="records must be a tuple or a list"):
        leaf_paths(iter([record]), PATHS_CONTEXT)
    with pytest.raises(TypeError, match="leaf_paths: context must be a tuple"):
        leaf_paths([record], list(PATHS_CONTEXT))


@compiled
def test_leaf_paths_read_a_copy_of_a_list_of_records() -> None:
    """A kind's keys may run any code, even empty the list of records being read: the
    compiled leaf_paths reads a tuple copy of it, and gives the paths of the records as
    they were passed."""
    from containers._flatten import PATHS_CONTEXT

    records: list[Any] = []

    def keys(aux: Any, n: int) -> tuple[Any, ...]:
        records.clear()
        return tuple(ct.DictKey(f"k{i}") for i in range(n))

    KINDS[_Odd] = NodeKind(
        _Odd,
        "an _Odd",
        flatten=lambda x: (x.kids, None),
        unflatten=lambda aux, ch: _Odd(*ch),
        read=lambda y, aux, n: list(y.kids),
        structural=lambda aux, ch: _Odd(*ch),
        mutable=True,
        keys=keys,
    )
    try:
        records.extend(ct.structure([_Odd(1.0, [2.0, 3.0])])._records)
        paths = _fast._speedups.leaf_paths(records, PATHS_CONTEXT)
    finally:
        del KINDS[_Odd]
    assert records == []
    assert [ct.keystr(p) for p in paths] == ["[0]['k0']", "[0]['k1'][0]", "[0]['k1'][1]"]


@compiled
def test_leaf_paths_keep_nothing_alive() -> None:
    """Many calls of the compiled leaf_paths do not grow memory, raised or returned."""
    from containers._flatten import PATHS_CONTEXT

    records = ct.structure({"k": [(1.0, 2.0)] * 3, "m": [1, [2, (3,)]], "n": Pair(1, 2)})._records
    leaf_paths = _fast._speedups.leaf_paths
    bad = [(records[0][0], records[0][1], records[0][2], True)]
    for _ in range(2_000):
        leaf_paths(records, PATHS_CONTEXT)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20_000):
            leaf_paths(records, PATHS_CONTEXT)
            with contextlib.suppress(IndexError):
                leaf_paths(bad, PATHS_CONTEXT)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024


# --- Loop's dicts: the compiled twin of _fast._Mode.map_dict ----------------------------


class _Made:
    """What f returns: the number of the call that made it."""

    __slots__ = ("k",)

    def __init__(self, k: int) -> None:
        self.k = k


class _Sub(dict):  # type: ignore[type-arg]
    """An undeclared dict subclass: a leaf, never the exact-dict path."""


class _Str(str):
    """A str subclass: its ``<`` may be its own, so its dicts go to map_dict."""


class _Attrs:
    """An object whose ``vars()`` is a dict sharing its keys with others of its class."""

    def __init__(self, a: Any, b: Any) -> None:
        self.b = b
        self.a = a


def _described(v: Any, seen: dict[int, int]) -> Any:
    """``v`` as nested tuples: f's results by call number, each node with its type and
    its keys in order, a node met again by its first number, other leaves by value."""
    if type(v) is _Made:
        return ("f", v.k)
    if isinstance(v, (dict, list, tuple, deque)):
        if id(v) in seen:
            return ("again", seen[id(v)])
        seen[id(v)] = len(seen)
        items = list(v.items()) if isinstance(v, dict) else list(enumerate(v))
        return (type(v), [(k, type(k), _described(w, seen)) for k, w in items])
    return ("value", type(v), v if type(v) in (int, float, str) else id(v))


def _fmap_run(
    speedups: Any, make: Any, fn: Any, options: dict[str, Any], f_step: Any = None
) -> tuple[list[tuple[int, ...]], Any]:
    """f's arguments at each call (by id, numbers and strings by value) and fmap's
    result described, or its error
    (type and message), with the compiled loops ``speedups`` (None: the generated
    ones) on the tree ``make()`` builds; ``f_step(tree, n)`` runs at the n-th call."""
    tree = make()
    calls: list[tuple[int, ...]] = []

    def f(*vs: Any) -> Any:
        calls.append(tuple(v if type(v) in (int, float, str) else id(v) for v in vs))
        if f_step is not None:
            f_step(tree, len(calls))
        return _Made(len(calls) - 1)

    saved = _fast._speedups, _fast._idle
    _fast._speedups, _fast._idle = speedups, {}
    try:
        out = fn(f, tree, **options)
    except Exception as err:  # compared by type and message
        return calls, (type(err), str(err))
    finally:
        _fast._speedups, _fast._idle = saved
    return calls, _described(out, {})


def _same_fmap(make: Any, f_step: Any = None) -> None:
    """fmap and fmapstructure with the compiled loop and with its twin make the same
    calls of f (the same objects, in order) and give the same result or error, with the
    cache, without it and with prune."""
    runs = [
        (ct.fmap, {}),
        (ct.fmap, {"cache": False}),
        (ct.fmap, {"prune": "P"}),
        (ct.fmapstructure, {}),
    ]
    for fn, options in runs:
        got = _fmap_run(_SPEEDUPS, make, fn, options, f_step)
        want = _fmap_run(None, make, fn, options, f_step)
        assert got == want, (fn.__name__, options)


def _self_containing() -> dict[str, Any]:
    d: dict[str, Any] = {"b": _A}
    d["a"] = d
    return d


def _inside_its_list() -> dict[str, Any]:
    d: dict[str, Any] = {"z": 1.0, "b": _A}
    d["a"] = [d]
    return d


_A, _B, _C = np.zeros(1), np.ones(2), np.arange(3)
_SHARED = {"w": _A, "b": (1.0, 2.0), "o": [_B]}
_ARRAYS = [np.full(1, i) for i in range(12)]
_SUB = _Sub(b=_A, a=_B)  # one object: f's calls are compared by id


@compiled
@pytest.mark.parametrize(
    "make",
    [
        dict,
        lambda: [{}, {"a": {}}],
        lambda: {"a": _A, "b": _B, "c": 1.0},  # keys in sorted order
        lambda: {"b": _A, "a": [1.5, (2.5, "x")], "c": _C},  # keys out of order
        lambda: {"kernel": _A, "bias": _B},
        lambda: {f"k{i:02d}": a for i, a in enumerate(_ARRAYS)},  # more than SMALL_DICT
        lambda: {f"k{11 - i:02d}": a for i, a in enumerate(_ARRAYS)},
        lambda: {"": 1, "é": 2, "e": 3, "\U0001f600": _A, "ab": 4, "a": 5},  # code points
        lambda: [_SHARED, _SHARED, {"s": _SHARED, "a": _SHARED}],  # a dict met again
        lambda: [_SHARED["o"], _SHARED],
        lambda: {"b": _A, 1: _B},  # keys of two types: sort_keys' fallback order
        lambda: {2: _A, 1: _B, 3: _A},
        lambda: {(1, 2): _A, (0, 5): _B},
        lambda: {_Str("b"): _A, "a": _B},  # a str subclass key: sort_keys' own order
        lambda: [_SUB],  # an undeclared dict subclass: a leaf, never the exact-dict path
        lambda: [OrderedDict([("b", _A), ("a", _B)]), {"x": OrderedDict(z=_C)}],
        lambda: {"d": vars(_Attrs(_A, _B)), "e": vars(_Attrs(1.0, _A))},  # shared keys
        _self_containing,  # a cycle: the same error and path
        _inside_its_list,
        lambda: [1.0, {"x": [_self_containing()]}],
        lambda: _nested(150, lambda t, i: {"k": t, "a": _A}),  # past MAX_FAST_DEPTH
        lambda: _nested(150, lambda t, i: {"z": t, "a": float(i), "m": (_B,)}),
        lambda: _nested(150, lambda t, i: [{"b": t, "a": i}]),
        lambda: {"a": _nested(MAX_FAST_DEPTH - 1, lambda t, i: {"k": t})},  # at the limit
        lambda: {"a": _nested(MAX_FAST_DEPTH, lambda t, i: {"k": t})},
        lambda: {"a": _nested(MAX_FAST_DEPTH + 1, lambda t, i: {"k": t})},
    ],
)
def test_dicts_agree_with_map_dict(make: Any) -> None:
    """A dict of str keys, mapped in C, gives what map_dict gives: f called in sorted
    key order on the same objects, the keys in the dict's order, the same sharing, the
    same errors; any other dict (other keys, a subclass) goes to map_dict itself."""
    _same_fmap(make)


@compiled
def test_dicts_agree_when_f_raises_at_each_call() -> None:
    """f raising at each call in turn inside dicts of str keys: the same error, after
    the same calls, with the compiled loop and with its twin."""
    tree = [{"b": _A, "a": {"y": _B, "x": 1.0}}, _SHARED, {"c": _C, "d": (_A, 2.0)}]
    n_calls = len(_fmap_run(None, lambda: tree, ct.fmap, {})[0])
    assert n_calls > 5
    for fail_at in range(1, n_calls + 1):

        def fail(tree: Any, n: int, fail_at: int = fail_at) -> None:
            if n == fail_at:
                raise ValueError(f"f failed at call {n}")

        _same_fmap(lambda: tree, fail)


def _grow(tree: Any, n: int) -> None:
    tree["new"] = n


def _pop_a(tree: Any, n: int) -> None:
    tree.pop("a", None)


def _swap_first_key(tree: Any, n: int) -> None:
    if n == 1:
        del tree["a"]
        tree["c"] = 3.0


_REPLACEMENT = np.full(1, -5)


def _replace_later(tree: Any, n: int) -> None:
    if n == 1:  # the loop read the old value's address ahead, as a hint
        tree["k05"] = _REPLACEMENT


def _pop_later(tree: Any, n: int) -> None:
    if n == 1:
        del tree["k09"]


def _many() -> dict[str, Any]:
    """More than SMALL_DICT values."""
    return {f"k{i:02d}": a for i, a in enumerate(_ARRAYS)}


@compiled
@pytest.mark.parametrize(
    ("make", "f_step"),
    [
        (lambda: {"a": _A, "b": _B}, _grow),  # sorted: "dictionary changed size"
        (lambda: {"b": _A, "a": _B}, _grow),  # by key: no size check
        (lambda: {"b": _A, "c": _C, "a": _B}, _pop_a),  # by key: KeyError('a')
        (lambda: {"a": _A, "b": _B}, _pop_a),
        (lambda: {"a": _A, "b": _B}, _swap_first_key),  # "keys changed"
        (_many, _replace_later),  # a later value replaced: the new one is mapped
        (_many, _pop_later),  # "dictionary changed size"
    ],
)
def test_dicts_f_changes_agree_with_map_dict(make: Any, f_step: Any) -> None:
    """A dict f changes while it is mapped: the compiled path reads its values as
    map_dict does, and raises Python's errors where map_dict's reads raise them."""
    _same_fmap(make, f_step)


def _rss() -> int:
    """This process's resident memory, in bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@compiled
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads /proc (Linux)")
def test_dicts_map_in_c_and_leak_nothing() -> None:
    """The exact-dict path keeps nothing alive, and many calls (returned and raised) do
    not grow memory."""
    tree = {"b": np.zeros(1), "a": {"y": np.ones(1), "x": [1.0]}, "c": {"s": "t"}}
    tree["d"] = {f"k{11 - i:02d}": tree["a"] for i in range(12)}
    refs = _watch(tree)

    def boom(v: Any) -> Any:
        if isinstance(v, str):
            raise ValueError("boom")
        return v

    def calls(tree: Any, n: int) -> None:
        for i in range(n):
            cache = i % 2 == 0
            ct.fmap(lambda v: v, tree, cache=cache, prune=0 if cache and i % 3 == 0 else UNSET)
            if i % 100 == 0:
                with contextlib.suppress(ValueError):
                    ct.fmap(boom, tree)

    calls(tree, 2_000)  # warm up: caches, freelists
    before = _rss()
    calls(tree, 200_000)
    assert _rss() - before < 4 * 1024 * 1024
    del tree
    assert _all_freed(refs)


@compiled
@pytest.mark.parametrize("what_f_does", ["nothing", "stores", "fills", "clears"])
def test_leaf_stores_its_result_wherever_f_left_the_table(what_f_does: str) -> None:
    """Loop.leaf probes the table once and stores f's result in the slot the lookup
    found, unless f changed the table meanwhile (stored into it, made it grow, cleared
    it): then the result is stored as store() would, and read back by id."""
    assert _fast._speedups is not None
    table = _table()
    others = [_Value() for _ in range(40)]
    table.store(others[0], "first")

    calls = []

    def f(x: Any) -> Any:
        calls.append(x)
        if len(calls) > 1:  # the table changes once, at the first call
            pass
        elif what_f_does == "stores":
            table.store(others[1], "other")
        elif what_f_does == "fills":  # past the table's size: it grows
            for i, other in enumerate(others):
                table.store(other, i)
        elif what_f_does == "clears":
            table.clear()
        return ("mapped", x)

    loop = _fast._speedups.Loop(
        print, {}, frozenset(), frozenset({_Value}), print, print, MAX_FAST_DEPTH
    )
    loop.bind(f, table, None, False)
    xs = [_Value() for _ in range(3)]
    assert [loop.leaf(x) for x in xs] == [("mapped", x) for x in xs]
    assert [loop.leaf(x) for x in xs] == [("mapped", x) for x in xs]  # read back
    assert calls == xs
    assert all(table[id(x)] == ("mapped", x) for x in xs)
    stored = list(map(id, table.keys()))
    assert len(stored) == len(set(stored)) == len(table)  # each object once
    assert set(stored) >= set(map(id, xs))
    loop.bind(print, None, None, False)


# --- build: the compiled twin of _records.build ------------------------------------------


def _build_with(compiled_build: bool, records: Any, leaves: Any) -> Any:
    """The tree of ``records`` and ``leaves`` by ``_speedups.build`` or by ``_build``, its
    twin. An error is returned, not raised."""
    try:
        if compiled_build:
            assert _SPEEDUPS is not None
            return _SPEEDUPS.build(records, leaves, _flatten.C_BUILD_CONTEXT)
        return _flatten._build(records, leaves)
    except Exception as err:  # compared by the caller, type and message
        return err


class _Leaf:
    """A leaf no other tree holds."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __repr__(self) -> str:
        return f"_Leaf({self.v!r})"


def _types_and_orders(tree: Any) -> list[Any]:
    """Each value's type in pre-order, with a dict's keys in its order."""
    return [(type(v), list(v) if isinstance(v, dict) else None) for v in ct.fcollect(tree)]


def _same_tree(a: Any, b: Any, orders: bool = True) -> None:
    """``a`` and ``b`` have one structure (node types, keys, kept values), the same leaf
    objects in order, and (if ``orders``) the same types and dict orders everywhere."""
    a_leaves, a_structure = ct.flatten(a)
    b_leaves, b_structure = ct.flatten(b)
    assert a_structure == b_structure
    assert list(map(id, a_leaves)) == list(map(id, b_leaves))
    if orders:
        assert _types_and_orders(a) == _types_and_orders(b)


def _same_build(records: Any, leaves: Any, orders: bool = True) -> Any:
    """Both builds give the same tree of ``records`` and ``leaves`` (returned), or the
    same error (returned)."""
    out = _build_with(True, records, leaves)
    twin = _build_with(False, records, leaves)
    if isinstance(twin, Exception):
        assert (type(out), str(out)) == (type(twin), str(twin))
        return twin
    assert not isinstance(out, Exception), out
    _same_tree(out, twin, orders)
    return out


def _same_unflatten(tree: Any) -> None:
    """Both builds rebuild ``tree`` from its records and fresh leaves given as a list and
    as a tuple, with None a node and a leaf: equal to ``tree``, the given leaves in place."""
    for none_is_leaf in (False, True):
        leaves, structure = ct.flatten(tree, none_is_leaf=none_is_leaf)
        fresh = list(map(_Leaf, leaves))
        for given in (fresh, tuple(fresh)):
            out = _same_build(structure._records, given)
            assert ct.flatten(out, none_is_leaf=none_is_leaf)[1] == structure
            _same_tree(out, ct.unflatten(structure, given))


@compiled
@pytest.mark.parametrize(
    "tree",
    [
        [],
        (),
        {},
        None,
        [None, [], (), {}],
        1.0,
        (1, 2.0, "s", b"b", True, None),
        [(1.0, 2.0), [3.0, (4.0, [5.0])], {"b": 6, "a": (7,)}],
        {"b": [1, (2, 3)], "a": {"y": None, "x": [4]}, 3: 5},  # unsortable: fallback order
        {"z": 1, "a": 2, "m": [3]},  # insertion order is not the sorted one
        OrderedDict([("z", 1), ("a", [2, 3])]),
        defaultdict(list, {"b": [1], "a": 2}),
        deque([1, (2, 3)], maxlen=5),
        Pair(1, [2, (3, 4)]),
        [Pair((1, 2), None), Pair(3, 4)],
        _Layer(np.zeros(2), [1.0, 2.0], name="kept"),
        [_Layer(1.0, 2.0, name=str(i)) for i in range(9)],
        [(1.0, 2.0, 3.0, 4.0)] * 9,  # runs of equal sequences (_same_sequences)
        {"k": [(1.0, 2.0, 3.0, 4.0)] * 5, "j": [[1, 2]] * 3},
        [[], [], []],
        [(), (), ()],
        [[1, 2], (3, 4), [5, 6]],  # equal counts, not equal records: no run
        [1, [2, 3], 4, (5, [6]), 7],  # mixed leaves and nodes: a tuple mask
        [[1, [2, [3, 4], 5], 6], 7],
        _nested(150, lambda t, i: [t, i]),
        _nested(150, lambda t, i: {"k": (float(i), t)}),
        _nested(150, lambda t, i: [t]),
    ],
)
def test_build_agrees_with_build(tree: Any) -> None:
    """The compiled build gives _build's tree (the same types, keys, order, kept values
    and leaf objects) on edge cases, from leaves given as a list or a tuple."""
    _same_unflatten(tree)


@compiled
def test_build_agrees_on_a_very_deep_tree() -> None:
    """A list and dicts nested 100,000 deep: both builds rebuild them with no recursion
    (the compiled one keeps its stack in arrays), the same structure, the same leaves."""
    for tree in (
        _nested(100_000, lambda t, i: [t, i]),
        _nested(50_000, lambda t, i: {"k": [t]}),
    ):
        leaves, structure = ct.flatten(tree)
        out = _same_build(structure._records, leaves, orders=False)
        assert ct.flatten(out) == (leaves, structure)


@compiled
def test_build_makes_the_same_unflatten_calls() -> None:
    """Both builds call each kind's unflatten_fresh once per node, in the same order (a node
    when its last child is built), with the same aux and a fresh list of the same
    children."""
    calls: list[Any] = []
    leaf_ids: set[int] = set()

    def unflatten(aux: Any, children: Any) -> Any:
        assert type(children) is list
        calls.append((aux, [id(c) if id(c) in leaf_ids else type(c) for c in children]))
        return _Odd(*children)

    with _odd_kind(lambda x: (x.kids, len(x.kids))) as kind:
        kind.unflatten_fresh = unflatten  # what a Structure's build calls
        tree = [_Odd(1.0, _Odd()), {"a": _Odd([2.0, _Odd(3.0)])}, _Odd(_Odd(_Odd(4.0)), 5.0)]
        leaves, structure = ct.flatten(tree)
        leaf_ids.update(map(id, leaves))
        results = []
        for compiled_build in (True, False):
            calls.clear()
            out = _build_with(compiled_build, structure._records, leaves)
            results.append(list(calls))
            assert len(calls) == 7
            assert list(map(id, ct.leaves(out))) == list(map(id, leaves))
        assert results[0] == results[1]


@compiled
def test_build_raises_what_a_node_unflatten_raises() -> None:
    """A kind's unflatten_fresh that raises, at each node in turn: both builds raise the same
    error; the compiled one keeps nothing alive after it."""
    with _odd_kind(lambda x: (x.kids, None)) as kind:
        tree = [_Odd(1.0, np.ones(1)), (_Odd(_Odd(np.ones(2)), 2.0), {"k": _Odd()})]
        leaves, structure = ct.flatten(tree)
        for fail_at in range(4):
            seen = [0]

            def fail(aux: Any, children: Any, seen: list[int] = seen, at: int = fail_at) -> Any:
                if seen[0] == at:
                    raise ValueError(f"boom at {at}")
                seen[0] += 1
                return _Odd(*children)

            kind.unflatten_fresh = fail
            for compiled_build in (True, False):
                seen[0] = 0
                err = _build_with(compiled_build, structure._records, leaves)
                assert (type(err), str(err)) == (ValueError, f"boom at {fail_at}")
        refs = _watch(tree)
        del tree, leaves, structure, err
        assert _all_freed(refs)


@compiled
def test_build_builds_dicts_as_the_dict_kind_does() -> None:
    """A dict is built in C as _registry's dict unflatten builds it: keys in sorted
    order, then the insertion order, with the same hash calls of each key; once the
    dict kind's unflatten is replaced, the compiled build calls it as _build does."""
    hashes: list[str] = []

    class Key(str):
        __slots__ = ()

        def __hash__(self) -> int:
            hashes.append(str(self))
            return str.__hash__(self)

    tree = {Key("b"): 1, Key("a"): [2, {Key("d"): 3, Key("c"): 4}]}
    leaves, structure = ct.flatten(tree)
    counts = []
    for compiled_build in (True, False):
        hashes.clear()
        out = _build_with(compiled_build, structure._records, leaves)
        assert list(out) == ["b", "a"] and list(out["a"][1]) == ["d", "c"]
        counts.append(list(hashes))
    assert counts[0] == counts[1] and counts[0]

    calls: list[Any] = []
    real = DICT.unflatten_fresh

    def logged(aux: Any, children: Any) -> Any:
        calls.append(aux)
        return real(aux, children)

    DICT.unflatten_fresh = logged
    try:
        _same_build(structure._records, leaves)
        for compiled_build in (True, False):
            calls.clear()
            assert _build_with(compiled_build, structure._records, leaves) == tree
            assert len(calls) == 2
    finally:
        DICT.unflatten_fresh = real


@compiled
@pytest.mark.parametrize(
    "tree",
    [
        [_Odd(1.0), 2.0, [3.0, _Odd(4.0)], (5.0, 6.0)],  # the first node is the kind's
        [[1.0, (2.0, 3.0)], _Odd(4.0), (5.0, 6.0)],  # tuples and lists are read first
        {"a": [1.0, 2.0], "b": _Odd(3.0), "c": (4.0, [5.0, 6.0])},
    ],
)
def test_build_is_unchanged_by_a_node_unflatten_that_changes_the_leaves(tree: Any) -> None:
    """A kind's unflatten that empties the caller's list of leaves: both builds read
    the leaves as given (the compiled one copies them at the start, _build before the
    first unflatten it calls), and give the same tree."""
    given: list[Any] = []

    def grab(aux: Any, children: Any) -> Any:
        given.clear()
        return _Odd(*children)

    with _odd_kind(lambda x: (x.kids, None)) as kind:
        kind.unflatten_fresh = grab
        leaves, structure = ct.flatten(tree)
        outs = []
        for compiled_build in (True, False):
            given[:] = map(_Leaf, leaves)
            outs.append(_build_with(compiled_build, structure._records, given))
            assert given == []
        assert not isinstance(outs[0], Exception)
        assert [leaf.v for leaf in ct.leaves(outs[0])] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        assert [leaf.v for leaf in ct.leaves(outs[1])] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


@compiled
def test_a_build_inside_a_build_uses_memory_of_its_own() -> None:
    """A kind's unflatten that unflattens another tree, larger and then smaller, while
    the compiled build is using its block of memory (its copy of the leaves, its
    stacks): each build gets the tree its twin gives, and so do the builds after, which
    reuse the block the module kept."""
    inner_leaves, inner = ct.flatten([[float(i), (i, [i])] for i in range(1_000)])
    small_leaves, small = ct.flatten([(1.0, [2.0]), {"k": 3.0}])
    inner_trees: list[Any] = []

    def nested(aux: Any, children: Any) -> Any:
        inner_trees.append(_build_with(True, inner._records, list(inner_leaves)))
        inner_trees.append(_build_with(True, small._records, list(small_leaves)))
        return _Odd(*children)

    with _odd_kind(lambda x: (x.kids, None)) as kind:
        kind.unflatten_fresh = nested
        tree = [[float(i), _Odd(float(-i), [i])] for i in range(100)]
        leaves, structure = ct.flatten(tree)
        for _ in range(2):
            inner_trees.clear()
            _same_build(structure._records, [_Leaf(v) for v in leaves])  # each build: 100 calls
            for got, want in zip(inner_trees, [inner, small] * 200, strict=True):
                assert ct.flatten(got)[1] == want
            assert inner_trees[0] == ct.unflatten(inner, inner_leaves)
            assert inner_trees[-1] == ct.unflatten(small, small_leaves)


@compiled
def test_builds_of_changing_sizes_reuse_memory_correctly() -> None:
    """Builds of growing and shrinking trees one after another, past the size of block
    the module keeps (about 250,000 leaves): each is its twin's tree, every leaf in
    place, from a list of leaves and from a tuple."""
    for n in (10, 100_000, 50, 300_000, 1, 100_000):
        tree = {"a": [(float(i), [i, -i]) for i in range(n // 3)], "b": list(range(n % 3))}
        leaves, structure = ct.flatten(tree)
        fresh = [_Leaf(v) for v in leaves]
        for given in (fresh, tuple(fresh)):
            out = _same_build(structure._records, given)
            assert ct.flatten(out)[1] == structure
            assert all(a is b for a, b in zip(ct.leaves(out), given, strict=True))


@compiled
@pytest.mark.parametrize(
    "records",
    [
        ((LIST, None, 2, (False, False)),),  # no node child: _build's scan runs off
        ((LIST, None, 2, (1, 0)), (TUPLE, None, 1, None)),  # ints for bools
        ((LIST, None, 1, True), (TUPLE, None, 1, None), (TUPLE, None, 1, None)),  # extra
        ((LIST, None, 2, True), (TUPLE, None, 1, None)),  # a missing record
        ((LIST, None, 3, None),),  # more leaves than given
        ((LIST, None, 1, None),),  # fewer
        ((LIST, None, -1, None),),
        ((LIST, None, 2**70, None),),
        ((LIST, None, 0, True),),
        ((TUPLE, "aux", 2, None),),
        ((LIST, None, 2, None, "x"),),
        (("no kind", None, 2, None),),
        ((DICT, ("ab", None), 2, None),),  # keys not a tuple: dict's own unflatten
        ((DICT, (("a", "b"), ("b",)), 2, None),),  # insertion missing a key
        ((DICT, (("a", ["b"]), None), 2, None),),  # an unhashable key
        ((DICT, (("a",), None), 2, None),),  # fewer keys than children, as zip
        [(LIST, None, 2, None)],  # records in a list
        (),
    ],
)
def test_build_hands_other_records_to_its_twin(records: Any) -> None:
    """Records flatten does not make (as from a pickle altered by hand) give the
    same tree or the same error as _build gives: the compiled build checks them all
    before any call and hands them over whole."""
    for leaves in ([1.0, 2.0], (1.0, 2.0), []):
        _same_build(records, leaves)


@compiled
def test_unflatten_checks_the_leaves_first_and_follows_the_engine_switch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Structure.unflatten checks the number of leaves before either build, with one
    message, takes any iterable, and reads ``_fast._speedups`` at each call, as the
    tests' engine fixture switches it: None runs _build."""
    calls: list[Any] = []
    real = _structure._build
    monkeypatch.setattr(_structure, "_build", lambda *a: calls.append(a) or real(*a))
    structure = ct.structure({"a": [1, (2, 3)]})
    message = (
        "unflatten: the structure has 3 leaves but 2 were given. Pass exactly one "
        "value per leaf, in the order flatten returned them."
    )
    for speedups in (_SPEEDUPS, None):
        monkeypatch.setattr(_fast, "_speedups", speedups)
        with pytest.raises(ct.StructureError, match=f"^{re.escape(message)}$"):
            ct.unflatten(structure, [1, 2])
        assert ct.unflatten(structure, iter("xyz")) == {"a": ["x", ("y", "z")]}
        assert structure.unflatten((4, 5, 6)) == {"a": [4, (5, 6)]}
    assert len(calls) == 2


@compiled
def test_build_keeps_nothing_alive() -> None:
    """After a call the compiled build holds nothing of the leaves, and 200,000 calls
    do not grow the process's memory (nor its traced allocations)."""
    tree = {"a": [(np.zeros(1), 2.0)] * 3, "b": [_Layer(np.ones(1), [1.0])], "c": Pair(1, None)}
    leaves, structure = ct.flatten(tree)
    refs = _watch(tree)
    for _ in range(3):
        assert ct.flatten(structure.unflatten(leaves))[1] == structure
    del tree, leaves, structure
    assert _all_freed(refs)

    leaves, structure = ct.flatten(
        {"k": [(1.0, 2.0, 3.0, 4.0)] * 5, "m": [1, [2, (3,)]], "p": Pair(1, _Layer(2, 3))}
    )
    for _ in range(2_000):  # warm up: caches, freelists
        structure.unflatten(leaves)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20_000):
            structure.unflatten(leaves)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024

    def rss() -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    if not os.path.exists("/proc/self/statm"):
        return
    before = rss()
    for _ in range(200_000):  # a leak of one small object per call: over 6 MB
        structure.unflatten(leaves)
    assert rss() - before < 2 * 1024 * 1024


@compiled
def test_build_of_deep_trees_fits_a_small_thread_stack() -> None:
    """The compiled build does not recurse: in a thread with 64 KB of stack it rebuilds
    a list nested 100,000 deep and dicts nested 20,000 deep."""
    work = """
        for make in (lambda t: [t, 2.0], lambda t: {"k": [(t, 1.0)]}):
            tree = 1.0
            for _ in range(20_000):
                tree = make(tree)
            leaves, s = ct.flatten(tree)
            kept.extend([tree, ct.unflatten(s, leaves)])
            assert ct.flatten(kept[-1]) == (leaves, s)
        deep = 1.0
        for _ in range(100_000):
            deep = [deep]
        leaves, s = ct.flatten(deep)
        kept.extend([deep, s.unflatten(leaves)])
        assert ct.flatten(kept[-1]) == (leaves, s)
    """
    _assert_runs_in_a_thread(work, stack_kb=64)


@compiled
def test_build_bad_arguments_are_named() -> None:
    """Wrong arguments to the compiled build raise TypeError saying what is wrong."""
    assert _SPEEDUPS is not None
    build = _SPEEDUPS.build
    with pytest.raises(TypeError, match=r"^build\(\) takes 3 arguments \(1 given\)$"):
        build(())
    with pytest.raises(TypeError, match="context must be a tuple"):
        build((), [1], [])
    with pytest.raises(TypeError, match="build context"):
        build((), [1], (1, 2))
    with pytest.raises(TypeError, match="build context"):  # the method's name: a str
        build((), [1], (*_flatten.C_BUILD_CONTEXT[:5], 5))
