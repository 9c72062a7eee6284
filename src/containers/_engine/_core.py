"""The one traversal: an explicit stack that owns cycles, depth, paths and errors.

This stage holds the full semantics of every walk over a tree: ``map_tree`` (fmap's
exclude, the identity cache and prune, several aligned trees, paths, structural
output); ``_collect.collect`` is its other general client. Its errors and the notes
that name their paths are made in ``_relocate``. The accelerations
(``_fast``, ``_flat``, ``_collect.fast_collect``) must agree with them; property tests
check it. It never recurses through Python calls.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NoReturn

from containers._engine._loops import SPEEDUPS, exec_source, unwound
from containers._engine._relocate import (
    Locate,
    Relocate,
    add_note,
    cycle_error,
    mismatch_error,
    path_note,
)
from containers._errors import ContainerDefinitionError, ContainersError
from containers._paths import Key, KeyPath, where
from containers._registry import Mismatch, cacheable, kind_of

__all__ = [
    "MAX_FAST_DEPTH",
    "MISS",
    "UNSET",
    "WALK_FRAME_ROOM",
    "Align",
    "Cursor",
    "Frame",
    "Memo",
    "frame_stack_room",
    "in_new_chunk",
    "leave_nothing",
    "map_tree",
    "noop",
    "resume",
    "traverse",
]


class _Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "<unset>"


#: "No value given" (``prune``'s default), since ``None`` is a valid prune value.
UNSET = _Unset.UNSET

#: Depth at which the recursive accelerations (``_fast``, ``_flat``, ``_pair``) hand a
#: subtree to ``traverse``, well below Python's recursion limit. fmap's compiled loops
#: (``_speedups_loop.c``, ``_speedups_mapnode.c``) recurse in C through the mappers, under 1 KB of C stack per level:
#: at this depth that fits the smallest default thread stack in use (musl's 128 KB).
MAX_FAST_DEPTH = 100


class Memo:
    """fmap's identity cache: results by ``id``, and the objects those ids belong to,
    kept alive so that no id is reused while the walk runs.

    ``results`` is read by id (``get``, ``in``, ``[]``); ``store`` writes it. Here it
    is a dict, with a list of the objects: the plain twin. When the compiled loops are
    built, ``_fast`` sets ``Memo.table`` to ``_speedups.IdTable``: then ``results`` is
    one, keyed by address and holding the objects itself, so that the compiled loops
    and the generated mappers share it without an int per lookup (benchmarks/run.py,
    W3id).
    """

    __slots__ = ("_keep", "lookup", "results", "store")
    #: The compiled table's type, or None for the plain dict and list (set by ``_fast``).
    table: ClassVar[Callable[[], Any] | None] = None

    def __init__(self) -> None:
        table = Memo.table
        #: ``store(obj, value)`` remembers ``value`` as the result for ``obj``: the
        #: compiled table's own method, called without a Python frame (the walk over a
        #: deep tree calls it at every node), or a closure over the twin's dict and list
        #: (not a method: the Memo would be a reference cycle, freed only by the
        #: collector).
        self.store: Callable[[Any, Any], None]
        #: ``lookup(obj, default)``: the result for ``obj`` itself, or ``default``: the
        #: compiled table's method (no ``id`` int made per lookup: benchmarks/run.py,
        #: deep-fmap); None for the twin, read by id (``results.get(id(obj), default)``).
        self.lookup: Callable[[Any, Any], Any] | None
        if table is None:
            results: dict[int, Any] = {}
            keep: list[Any] = []

            def store(obj: Any, value: Any) -> None:
                results[id(obj)] = value
                keep.append(obj)

            self.results: Any = results
            self._keep: list[Any] | None = keep
            self.store = store
            self.lookup = None
        else:
            self.results = table()
            self._keep = None
            self.store = self.results.store
            self.lookup = self.results.lookup

    @property
    def keep(self) -> list[Any]:
        """The objects whose results are stored: the plain twin's own list (which
        callers may append to), or a new list of the compiled table's keys."""
        return self.results.keys() if self._keep is None else self._keep

    @property
    def keep_alive(self) -> Callable[[Any], None] | None:
        """What code writing ``results`` by id inline calls with the key's object: the
        plain twin list's ``append``; None for the compiled table, which holds its
        objects itself and is written with ``results.store``."""
        return None if self._keep is None else self._keep.append

    def clear(self) -> None:
        """Forget everything: a finished walk's closures may live on until the cyclic
        garbage collector runs, and must not keep the tree and its results alive."""
        self.results.clear()
        if self._keep is not None:
            self._keep.clear()


#: What ``Memo.results.get`` returns for an object not mapped yet (None is a result).
MISS = object()


class Frame:
    """One open node of the traversal: its children, the other trees' children there,
    and the results of the children visited so far.

    The child being visited is ``kids[len(out)]``. ``keys`` names the children for
    paths, or is ``None``: then ``kind.keys(aux, len(kids))`` names them, computed only
    when a path is asked for. ``state`` is the client's own.
    """

    __slots__ = ("aux", "keys", "kids", "kind", "node", "out", "state", "ykids")

    def __init__(
        self,
        node: Any,
        kind: Any,
        kids: Sequence[Any],
        aux: Any,
        ykids: Sequence[Sequence[Any]],
        keys: Sequence[Key] | None,
        state: Any,
    ) -> None:
        self.node = node
        self.kind = kind
        self.kids = kids
        self.aux = aux
        self.ykids = ykids
        self.keys = keys
        self.state = state
        self.out: list[Any] = []

    def key(self, i: int) -> Key:
        """The key of child ``i``."""
        if self.keys is None:
            self.keys = self.kind.keys(self.aux, len(self.kids))
        return self.keys[i]


class Cursor:
    """The traversal's state, as its client's ``visit`` and ``leave`` see it.

    ``stack`` holds the open nodes, root first; ``depth`` is the depth of the value
    being visited. The cursor owns what every walk needs and no client repeats: the
    cycle check (``push``), paths derived from the stack only when asked for
    (``path``), and errors raised where the walk is (``fail``, ``kind_of``).
    """

    __slots__ = ("client", "on_path", "op", "prefix", "relocate", "stack")

    def __init__(self, op: str, relocate: bool, prefix: KeyPath) -> None:
        #: The client's own state for the whole walk (``_walks``: its ``recurse``).
        self.client: Any = None
        self.op = op
        self.relocate = relocate
        self.prefix = prefix
        self.stack: list[Frame] = []
        self.on_path: dict[int, int] = {}  # id of an open node -> its depth

    @property
    def depth(self) -> int:
        """The depth of the value being visited (0 for the root)."""
        return len(self.stack)

    def path(self, depth: int | None = None) -> KeyPath:
        """The path of the value being visited at ``depth`` (default: the current one)."""
        frames = self.stack if depth is None else self.stack[:depth]
        return self.prefix + tuple(fr.key(len(fr.out)) for fr in frames)

    def key(self) -> Key | None:
        """The key of the value being visited under its parent (None at the root)."""
        if not self.stack:
            return None
        top = self.stack[-1]
        return top.key(len(top.out))

    def fail(self, error: Exception) -> NoReturn:
        """Raise an error the walk found itself: as is, or as ``Relocate`` when the walk
        runs on a subtree handed over by an acceleration (its paths are relative)."""
        try:
            raise (Relocate(error) if self.relocate else error) from None
        finally:
            del error  # the traceback holds this frame: no cycle through the error

    def kind_of(self, value: Any) -> Any:
        """``kind_of(value)``, with the path added to an undeclared-subclass error."""
        try:
            return kind_of(value)
        except ContainerDefinitionError as err:
            message = str(err)
        # raised outside the except clause: the error holds no context whose traceback
        # holds this frame, and so the tree (a cycle the GC alone would free)
        return self.fail(
            ContainerDefinitionError(f"{self.op}: at {where(self.path())}: {message}")
        )

    def read(self, kind: Any, ys: Sequence[Any], aux: Any, n: int) -> list[Any]:
        """The children of each other tree in ``ys`` at a node like ``(kind, aux, n)``."""
        out = []
        for i, y in enumerate(ys):
            try:
                out.append(kind.read(y, aux, n))
                continue
            except Mismatch as e:
                what = str(e)
            # outside the except clause, as in kind_of
            self.fail(mismatch_error(self.op, self.path(), tree_index=i + 1, what=what))
        return out

    def push(
        self,
        node: Any,
        kind: Any,
        kids: Sequence[Any],
        aux: Any = None,
        ykids: Sequence[Sequence[Any]] = (),
        keys: Sequence[Key] | None = None,
        state: Any = None,
    ) -> None:
        """Open ``node``: its children are visited next. If it is open already (it
        contains itself), the cycle error is raised as ``check`` raises it."""
        on_path = self.on_path
        if id(node) in on_path:
            self.check(node)
        on_path[id(node)] = len(self.stack)
        self.stack.append(Frame(node, kind, kids, aux, ykids, keys, state))

    def check(self, node: Any) -> None:
        """Raise the cycle error, with both paths, if ``node`` is open: it contains itself."""
        first = self.on_path.get(id(node))
        if first is not None:
            self.fail(cycle_error(self.op, self.path(), self.path(first)))


#: ``visit(cursor, value, other_trees_values)``: ``(True, result)`` for a value done at
#: once, or ``(False, None)`` after ``cursor.push`` opened it.
Visit = Callable[[Cursor, Any, Sequence[Any]], tuple[bool, Any]]
#: ``leave(cursor, frame)``: the result of an open node once its children are done.
Leave = Callable[[Cursor, Frame], Any]


#: The bytes a walk wants free in the current chunk of CPython's frame stack below its
#: loop's frame, for the frames it pushes at each node: its client's, ``f``'s (see
#: ``traverse``).
WALK_FRAME_ROOM = 4096
#: Nodes a walk visits before it checks that room: a shorter walk never moves.
WALK_ROOM_CHECK_AFTER = 64


def _in_new_chunk_source(room: int) -> str:
    """The source of ``in_new_chunk``: ``fn(*args)`` called from a frame of more than
    ``room`` bytes (its locals, never assigned, only make the frame that large)."""
    names = " = ".join(f"_{i}" for i in range(room // 8 + 64))
    return (
        "def in_new_chunk(fn, *args):\n"
        "    if False:\n"
        f"        {names} = None\n"
        "    return fn(*args)\n"
    )


def _load_in_new_chunk() -> Callable[..., Any]:
    g: dict[str, Any] = {}
    exec_source(_in_new_chunk_source(WALK_FRAME_ROOM), g, "<containers in_new_chunk>")
    return g["in_new_chunk"]  # type: ignore[no-any-return]


#: ``in_new_chunk(fn, *args)``: ``fn(*args)``, called from a frame that does not fit in
#: the last ``WALK_FRAME_ROOM`` bytes of a chunk, so that it opens a new one.
in_new_chunk = _load_in_new_chunk()
#: ``frame_stack_room()``: the bytes left in the current chunk of CPython's frame
#: stack, read on CPython 3.11 to 3.13 with the compiled engine (3.10 has no such
#: stack; 3.14 caches chunks), else None.
frame_stack_room: Callable[[], int] | None = (
    SPEEDUPS.frame_stack_room
    if SPEEDUPS is not None and (3, 11) <= sys.version_info < (3, 14)
    else None
)


def traverse(
    visit: Visit,
    leave: Leave,
    x: Any,
    ys: Sequence[Any] = (),
    *,
    op: str,
    relocate: bool = False,
    prefix: KeyPath = (),
    note: bool = False,
) -> Any:
    """The one traversal: visit ``x`` (and the aligned ``ys``) depth-first, with an
    explicit stack, so any depth is walked; return ``leave``'s result for the root.

    ``visit`` decides what a value is: done at once (a leaf, a cached repeat, an
    excluded value) or a node it opens with ``cursor.push``, whose children are then
    visited in order, their results appended to ``frame.out``; ``leave`` turns an open
    node into its result when its last child is done. Paths (``cursor.path()``), the
    cycle check and errors with paths (``cursor.fail``) are the cursor's; ``op`` names
    the operation in messages, ``prefix`` is prepended to every path, and ``relocate``
    (a subtree handed over by an acceleration) raises the walk's own errors as
    ``Relocate``. Errors raised by ``visit``'s callbacks (``f``, ``exclude``) propagate
    unchanged, with ``note`` (and not ``relocate``) a note naming the path of the value
    being mapped: read from the cursor as the error passes, so the walk pays nothing
    for it until an error is raised. A ``Locate`` gets that path as its ``path``.
    """
    cursor = Cursor(op, relocate, prefix)
    try:
        done, result = visit(cursor, x, ys)
        if done:
            return result
        return _walk(cursor, visit, leave, 0)
    except Exception as err:
        if not relocate:
            if isinstance(err, Locate):
                if err.path is None:
                    err.path = cursor.path()
            elif note and not isinstance(err, ContainersError):  # ours name their path
                add_note(err, path_note(op, cursor.path()))
        elif note and not isinstance(err, (ContainersError, Relocate)):
            unwound(err, cursor.path())  # a fast walk's subtree: the rest of its trail
        raise


def _walk(
    cursor: Cursor, visit: Visit, leave: Leave, base: int, check_in: int = WALK_ROOM_CHECK_AFTER
) -> Any:
    """``traverse``'s loop, from the open nodes on ``cursor.stack``, until the frame at
    depth ``base`` is left (0: the root's); its result. A ``visit`` that opened a node
    (the top frame) walks it to its result with ``resume(cursor, visit, leave,
    cursor.depth - 1)``: the re-entry a walk object's ``recurse`` needs (``_walks``).
    The frames below stay open, so cycles and paths run through them.

    The loop calls ``visit`` and ``leave`` at every node from one depth of CPython's
    frame stack, which CPython 3.11 to 3.13 allocate in 16 KB chunks and free as soon as
    they are empty (until fixes released in 2026). Where the loop's frame ends a chunk,
    each of those calls allocates a chunk and frees it on return (CPython issue
    gh-142183): a walk ten times slower, depending only on where its caller stands (a
    deep ``fmap`` called at a script's top level took 25 us per level instead of 2.4).
    So after ``check_in`` nodes (a walk that long repays a chunk), where the chunk has
    less than ``WALK_FRAME_ROOM`` bytes left, the loop goes on from ``in_new_chunk``,
    whose frame opens a new chunk with room for the calls; the walk's state is all in
    ``cursor``.
    """
    stack = cursor.stack
    on_path = cursor.on_path
    bottom = stack[base]  # the frame whose leaving ends this loop
    while True:
        check_in -= 1
        if not check_in and frame_stack_room is not None and frame_stack_room() < WALK_FRAME_ROOM:
            return in_new_chunk(_walk, cursor, visit, leave, base, 0)  # counts past 0: once
        frame = stack[-1]
        out = frame.out
        i = len(out)
        if i < len(frame.kids):
            yvals = [yk[i] for yk in frame.ykids] if frame.ykids else ()
            done, value = visit(cursor, frame.kids[i], yvals)
            if done:
                out.append(value)
            continue
        stack.pop()
        del on_path[id(frame.node)]
        value = leave(cursor, frame)
        if frame is bottom:
            return value
        stack[-1].out.append(value)


#: ``resume(cursor, visit, leave, base)``: the loop, re-entered (see ``_walk``).
resume = _walk


class Align:
    """An alignment mode for ``map_tree``: how the values of several tree arguments
    meet at one position (treelize's key rule, ``mode``: strict/inner/outer/left).

    ``node(first, rest, path)`` gets the arguments' values at a position and returns
    ``None`` when all are leaves (the engine then calls ``f(first, *rest)``), or
    ``(lead, kids, aux, rest_kids, keys)``: the node checked for cycles, the first
    argument's value under each aligned key, what ``unflatten`` needs, the other
    arguments' values (``rest_kids[j][i]``) and the keys (for paths). The engine
    rebuilds the position with ``align.unflatten(aux, results)``. ``path()`` gives the
    position's path for error messages.
    """

    mode: str

    def node(
        self, first: Any, rest: Sequence[Any], path: Callable[[], KeyPath]
    ) -> tuple[Any, Sequence[Any], Any, list[Sequence[Any]], Sequence[Key]] | None:
        raise NotImplementedError(f"{type(self).__name__} must define node")

    def unflatten(self, aux: Any, children: Sequence[Any]) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define unflatten")


def map_tree(
    f: Callable[..., Any],
    x: Any,
    ys: Sequence[Any] = (),
    *,
    exclude: Callable[..., bool] | None,
    cache: Memo | None,
    prune: Any = UNSET,
    structural: bool = False,
    with_path: bool = False,
    op: str = "fmap",
    relocate: bool = False,
    align: Align | None = None,
) -> Any:
    """Map ``f`` over ``x`` (and the aligned ``ys``): fmap's semantics on ``traverse``.

    Semantics (Functors.jl's ``fmap``): a value for which ``exclude`` is true (by
    default, ``None``: a leaf) is replaced by ``f(value, *ys_values)``
    (``f(path, value, ...)`` and ``exclude(path, value)`` with ``with_path``; paths are
    built only for those calls); a leaf that is not excluded is kept;
    a node is rebuilt from its mapped children (or, with ``structural``, turned into
    a plain dict/tuple/list). With ``cache`` (a ``Memo``), mutable values are mapped once:
    a repeat gets the first result, or ``prune``. The first tree decides the structure;
    the others are read by key. A node that contains itself raises ``StructureError``.
    With ``relocate`` (``x`` is a subtree handed over by a fast path, so paths would be
    relative to it), the engine's own errors are raised as ``Relocate`` instead; errors
    raised by ``f`` or ``exclude`` propagate unchanged either way.
    With ``align`` (treelize), no tree is first: the ``Align`` strategy reads every
    argument's value at each position, and ``exclude``, ``cache`` and ``structural``
    are unused.
    """
    use_prune = prune is not UNSET
    # The cache's methods, read once per walk: by object with the compiled table, else
    # by id (benchmarks/run.py, deep-fmap: a node's cache costs a lookup and a store)
    lookup = results_get = store = None
    if cache is not None:
        lookup, store = cache.lookup, cache.store
        if lookup is None:
            results_get = cache.results.get

    def visit(cursor: Cursor, node: Any, yvals: Sequence[Any]) -> tuple[bool, Any]:
        if align is not None:
            step = align.node(node, yvals, cursor.path)
            if step is None:
                return True, f(node, *yvals)
            lead, kids, aux, ykids, keys = step
            cursor.push(lead, align, kids, aux, ykids, keys)
            return False, None
        kind = cursor.kind_of(node)
        cached = False
        if store is not None and (kind.mutable if kind is not None else cacheable(node)):
            cached = True
            if lookup is not None:
                hit = lookup(node, MISS)
            else:
                hit = results_get(id(node), MISS)  # type: ignore[misc]
            if hit is not MISS:
                return True, prune if use_prune else hit
        if exclude is None:
            excluded = kind is None
        else:
            excluded = exclude(cursor.path(), node) if with_path else exclude(node)
        if excluded:
            value = f(cursor.path(), node, *yvals) if with_path else f(node, *yvals)
            if cached:
                store(node, value)  # type: ignore[misc]
            return True, value
        if kind is None:
            return True, node
        kids, aux = kind.flatten(node)
        others = cursor.read(kind, yvals, aux, len(kids)) if yvals else ()
        cursor.push(node, kind, kids, aux, others, None, cached or None)
        return False, None

    def leave(cursor: Cursor, frame: Frame) -> Any:
        build = frame.kind.structural if structural else frame.kind.unflatten
        value = build(frame.aux, frame.out)
        if frame.state is not None:
            store(frame.node, value)  # type: ignore[misc]
        return value

    return traverse(visit, leave, x, ys, op=op, relocate=relocate, note=True)


def noop(*args: Any) -> None:
    """A function that does nothing: the ``f`` of a walk run again only to locate an error."""


def leave_nothing(cursor: Cursor, frame: Frame) -> None:
    """A ``leave`` for walks that produce nothing per node."""
