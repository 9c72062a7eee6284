"""The one traversal (``containers._engine._core.traverse``) and its cursor: the order of
visits, paths on demand, the cycle check, errors with their paths, and the hand-over of
an acceleration's subtree (``Relocate``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import containers as ct
from containers import AttrKey, DictKey, IndexKey, StructureError
from containers._engine import _core
from containers._engine._core import Cursor, Frame, leave_nothing, traverse
from containers._engine._relocate import Relocate
from containers._registry import kind_of


@ct.container
class Pair:
    left: Any
    right: Any


def _events(tree: Any, ys: Sequence[Any] = ()) -> list[tuple[str, Any, Any]]:
    """Every visit and leave, with the path at that moment and the other trees' values."""
    log: list[tuple[str, Any, Any]] = []

    def visit(cursor: Cursor, value: Any, yvals: Sequence[Any]) -> tuple[bool, Any]:
        log.append(("visit", cursor.path(), tuple(yvals)))
        kind = cursor.kind_of(value)
        if kind is None:
            return True, value
        kids, aux = kind.flatten(value)
        others = cursor.read(kind, yvals, aux, len(kids)) if yvals else ()
        cursor.push(value, kind, kids, aux, others)
        return False, None

    def leave(cursor: Cursor, frame: Frame) -> Any:
        log.append(("leave", cursor.path(), len(frame.out)))
        return frame.kind.unflatten(frame.aux, frame.out)

    assert traverse(visit, leave, tree, ys, op="test") == tree
    return log


def test_visits_depth_first_with_paths_and_aligned_values():
    """Values are visited parent first, in child order, each with its path and the other
    trees' values at that path; a node is left once, after its last child."""
    log = _events({"a": [1, 2], "b": Pair(3, 4)}, ({"a": [10, 20], "b": Pair(30, 40)},))
    a, b = DictKey("a"), DictKey("b")
    assert log == [
        ("visit", (), ({"a": [10, 20], "b": Pair(30, 40)},)),
        ("visit", (a,), ([10, 20],)),
        ("visit", (a, IndexKey(0)), (10,)),
        ("visit", (a, IndexKey(1)), (20,)),
        ("leave", (a,), 2),
        ("visit", (b,), (Pair(30, 40),)),
        ("visit", (b, AttrKey("left")), (30,)),
        ("visit", (b, AttrKey("right")), (40,)),
        ("leave", (b,), 2),
        ("leave", (), 2),
    ]


def test_a_leaf_root_is_visited_once_and_returned():
    """A root that visit finishes at once is the result; leave is never called."""

    def leave(cursor: Cursor, frame: Frame) -> Any:
        raise AssertionError("no node was opened")

    assert traverse(lambda cursor, v, ys: (True, v * 2), leave, 21, op="test") == 42


def test_paths_carry_the_prefix():
    """``prefix`` is prepended to every path the cursor gives."""
    paths = []

    def visit(cursor: Cursor, value: Any, ys: Sequence[Any]) -> tuple[bool, Any]:
        paths.append(cursor.path())
        if type(value) is list:
            cursor.push(value, kind_of(value), value)
            return False, None
        return True, None

    traverse(visit, leave_nothing, [1, [2]], op="test", prefix=(DictKey("p"),))
    p = DictKey("p")
    assert paths == [(p,), (p, IndexKey(0)), (p, IndexKey(1)), (p, IndexKey(1), IndexKey(0))]


def test_keys_are_computed_only_when_a_path_is_asked_for():
    """A walk that never asks for a path never reads a node's keys."""
    asked = []

    class Keys:
        def __init__(self, n: int) -> None:
            self.n = n

        def __getitem__(self, i: int) -> Any:
            asked.append(i)
            return IndexKey(i)

    def visit(cursor: Cursor, value: Any, ys: Sequence[Any]) -> tuple[bool, Any]:
        if type(value) is list:
            cursor.push(value, None, value, keys=Keys(len(value)))
            return False, None
        return True, None

    traverse(visit, leave_nothing, [[1, 2], [3]], op="test")
    assert asked == []


def test_a_node_inside_itself_is_a_cycle_error_naming_both_paths():
    """Opening a node that is already open raises StructureError with the path where it
    is met again and the path of the ancestor it is."""
    loop: list[Any] = [0]
    loop.append({"k": loop})
    with pytest.raises(StructureError) as info:
        _events([loop])
    assert str(info.value) == (
        "test: the tree has a reference cycle: the object at \"[0][1]['k']\" is the same "
        "object as its ancestor at '[0]'. Trees must be acyclic; break the cycle, or make "
        "the object a leaf (exclude=/is_leaf=, where the operation takes them)."
    )
    assert info.value.path == (IndexKey(0), IndexKey(1), DictKey("k"))


def test_a_shared_object_that_is_not_its_own_ancestor_is_no_cycle():
    """The same object at two sibling positions is visited twice, without an error."""
    shared = [1]
    assert len([e for e in _events([shared, shared]) if e[0] == "leave"]) == 3


def test_another_tree_that_does_not_fit_names_the_tree_and_the_path():
    """``cursor.read`` reports a missing key of another tree with its ordinal and path."""
    with pytest.raises(StructureError) as info:
        _events({"a": {"x": 1}}, ({"a": {"x": 1}}, {"a": {"y": 1}}))
    assert str(info.value) == (
        "test: trees differ at \"['a']\": the third has no key 'x' there. Every other tree "
        "must have the first tree's nodes and keys."
    )


def test_an_undeclared_subclass_is_reported_with_its_path():
    """``cursor.kind_of`` adds the path and the operation to the registry's error."""

    class Sub(Pair):
        pass

    with pytest.raises(ct.ContainerDefinitionError, match=r"^test: at \"\['a'\]\[0\]\": "):
        _events({"a": [Sub(1, 2)]})


def test_relocate_raises_the_walks_own_errors_as_the_signal():
    """With ``relocate``, the walk's own errors come out as ``Relocate`` carrying the error
    (its paths are relative to a subtree); errors of the client's functions do not."""
    loop: list[Any] = []
    loop.append(loop)

    def visit(cursor: Cursor, value: Any, ys: Sequence[Any]) -> tuple[bool, Any]:
        if type(value) is list:
            cursor.push(value, kind_of(value), value)
            return False, None
        raise ValueError("from f")

    with pytest.raises(Relocate) as info:
        traverse(visit, leave_nothing, [loop], op="test", relocate=True)
    assert isinstance(info.value.error, StructureError)
    assert info.value.error.path == (IndexKey(0), IndexKey(0))
    with pytest.raises(ValueError, match=r"^from f$"):
        traverse(visit, leave_nothing, [1], op="test", relocate=True)


def test_walks_any_depth_without_recursion():
    """A list nested 50,000 deep is walked by the explicit stack."""
    tree: Any = 1
    for _ in range(50_000):
        tree = [tree]
    depth = 0

    def visit(cursor: Cursor, value: Any, ys: Sequence[Any]) -> tuple[bool, Any]:
        nonlocal depth
        depth = max(depth, cursor.depth)
        if type(value) is list:
            cursor.push(value, kind_of(value), value)
            return False, None
        return True, None

    traverse(visit, leave_nothing, tree, op="test")
    assert depth == 50_000


# --- the walk's room on CPython's frame stack (gh-142183) -------------------------------


@pytest.mark.skipif(_core.frame_stack_room is None, reason="needs CPython 3.11+ and the C engine")
def test_in_new_chunk_gives_its_callee_the_walks_room() -> None:
    """Called where the chunk of CPython's frame stack has less than ``WALK_FRAME_ROOM``
    bytes left, ``in_new_chunk`` runs its callee in a new chunk with more than that."""
    room = _core.frame_stack_room
    assert room is not None

    def descend() -> tuple[int, int]:
        here = room()
        if here >= _core.WALK_FRAME_ROOM:
            return descend()
        return here, _core.in_new_chunk(room)

    here, there = descend()
    assert here < _core.WALK_FRAME_ROOM < there


def test_a_long_walk_moves_to_a_new_chunk_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the chunk is nearly full, a walk of more than ``WALK_ROOM_CHECK_AFTER``
    nodes goes on from ``in_new_chunk`` once, with the same result; a shorter walk never
    moves, nor does one with room (a stand-in ``frame_stack_room`` says which)."""
    moves: list[object] = []

    def in_new_chunk(fn: Any, *args: Any) -> Any:
        moves.append(fn)
        return fn(*args)

    def paths(tree: Any) -> list[Any]:
        return ct.leaves(ct.fmap_with_path(lambda path, leaf: path, tree))

    long_tree, short_tree = [[i, [i]] for i in range(100)], [[1, [2]]]
    want_long, want_short = paths(long_tree), paths(short_tree)
    monkeypatch.setattr(_core, "in_new_chunk", in_new_chunk)
    monkeypatch.setattr(_core, "frame_stack_room", lambda: _core.WALK_FRAME_ROOM)
    assert (paths(long_tree), moves) == (want_long, [])
    monkeypatch.setattr(_core, "frame_stack_room", lambda: _core.WALK_FRAME_ROOM - 1)
    assert (paths(short_tree), moves) == (want_short, [])
    assert (paths(long_tree), moves) == (want_long, [_core._walk])
