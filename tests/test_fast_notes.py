"""The note (PEP 678) naming the key path of the value ``f`` failed on, from fmap's fast
tiers (the recursive walker, the generated per-class mappers, the compiled ``Loop``,
``PairLoop`` and ``MapNode``): the same text the plain walk (``traverse``) adds, once."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

import containers as ct

BAD = -1.0


@ct.container
class Frozen:
    first: Any
    rest: Any


@ct.container(frozen=False)
class Mutable:
    first: Any
    rest: Any


def one(x: Any) -> Any:
    return math.sqrt(x) if type(x) is float else x


def two(x: Any, y: Any) -> Any:
    return math.sqrt(x) + y if type(x) is float else x


def plain(x: Any) -> bool:
    """The default exclude as a new function: fmap then runs the plain walk."""
    return ct.isleaf(x)


def wrap(kind: str, child: Any, level: int) -> Any:
    """One level of a chain: ``child`` under a node of ``kind`` next to a good leaf."""
    if kind == "list":
        return [0.0, child]
    if kind == "tuple":
        return (0.0, child)
    if kind == "dict":  # inserted out of sorted order: the walk maps in sorted order
        return {"z": child, "a": 0.0} if level % 2 else {"a": 0.0, "z": child}
    if kind == "frozen":
        return Frozen(0.0, child)
    if kind == "mutable":
        return Mutable(0.0, child)
    kinds = ("list", "tuple", "dict", "frozen", "mutable")
    return wrap(kinds[level % len(kinds)], child, level)  # "mixed"


def chain(kind: str, depth: int, leaf: Any = BAD) -> Any:
    """``leaf`` at ``depth`` levels below the root, each a node of ``kind``."""
    tree = leaf
    for level in range(depth):
        tree = wrap(kind, tree, level)
    return tree


def raised(call: Callable[[], Any]) -> BaseException:
    with pytest.raises(ValueError, match="math domain error") as info:
        call()
    return info.value


def notes_of(call: Callable[[], Any]) -> list[str]:
    return list(getattr(raised(call), "__notes__", []))


KINDS = ["list", "tuple", "dict", "frozen", "mutable", "mixed"]


@pytest.mark.parametrize("depth", [1, 50, 5_000])
@pytest.mark.parametrize("kind", KINDS)
def test_fmap_notes_the_path_as_the_plain_walk_does(engine: str, kind: str, depth: int) -> None:
    """fmap's fast tiers add the plain walk's note, once, at depths 1, 50 and 5,000."""
    tree = chain(kind, depth)
    expected = notes_of(lambda: ct.fmap(one, tree, exclude=plain))
    assert len(expected) == 1
    assert expected[0].startswith("fmap: raised while mapping the value at ")
    assert notes_of(lambda: ct.fmap(one, tree)) == expected
    assert notes_of(lambda: ct.fmap(one, tree, cache=False)) == expected


@pytest.mark.parametrize("depth", [1, 50, 5_000])
@pytest.mark.parametrize("kind", KINDS)
def test_two_tree_fmap_notes_the_path_as_the_plain_walk_does(
    engine: str, kind: str, depth: int
) -> None:
    """fmap over two trees (pair loop, pair mappers, the generic node) notes the path."""
    tree, other = chain(kind, depth), chain(kind, depth, 0.0)
    expected = notes_of(lambda: ct.fmap(two, tree, other, exclude=plain))
    assert len(expected) == 1
    assert notes_of(lambda: ct.fmap(two, tree, other)) == expected
    assert notes_of(lambda: ct.fmap(two, tree, other, cache=False)) == expected


@pytest.mark.parametrize("kind", KINDS)
def test_three_tree_fmap_notes_the_path(engine: str, kind: str) -> None:
    """fmap over three trees (the generic node's loop) notes the path once."""
    tree, other = chain(kind, 7), chain(kind, 7, 0.0)
    expected = notes_of(lambda: ct.fmap(lambda x, y, z: one(x), tree, other, other, exclude=plain))
    assert notes_of(lambda: ct.fmap(lambda x, y, z: one(x), tree, other, other)) == expected


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_each_element_of_a_small_tuple_is_named(engine: str, n: int) -> None:
    """A tuple of values (mapped unrolled, in one expression) names the element f failed on."""
    for bad in range(n):
        leaves = tuple(BAD if i == bad else 1.0 for i in range(n))
        for tree in (leaves, [leaves], {"k": leaves}, Frozen(leaves, 1.0)):
            path = ct.keystr(ct.leaves_with_path(tree)[bad][0])
            note = f"fmap: raised while mapping the value at {path!r}"
            assert notes_of(lambda t=tree: ct.fmap(one, t)) == [note]
            other = ct.fmap(lambda v: 0.0, tree)
            assert notes_of(lambda t=tree, o=other: ct.fmap(two, t, o)) == [note]


def test_the_note_names_paths_as_literal_text(engine: str) -> None:
    """The note's text for a few trees, written out."""
    tree = {"b": [1.0, (2.0, BAD)], "a": Frozen(1.0, {"q": [BAD]})}
    assert notes_of(lambda: ct.fmap(one, tree)) == [
        "fmap: raised while mapping the value at \"['a'].rest['q'][0]\""
    ]
    assert notes_of(lambda: ct.fmap(one, BAD)) == [
        "fmap: raised while mapping the value at the root"
    ]


def test_fmapstructure_and_fmap_with_path_note_the_path(engine: str) -> None:
    """fmapstructure (fast) and fmap_with_path (plain) add the same path."""
    tree = chain("mixed", 60)
    expected = notes_of(lambda: ct.fmap(one, tree, exclude=plain))
    assert notes_of(lambda: ct.fmapstructure(one, tree)) == [
        expected[0].replace("fmap:", "fmapstructure:")
    ]
    assert notes_of(lambda: ct.fmap_with_path(lambda p, x: one(x), tree)) == [
        expected[0].replace("fmap:", "fmap_with_path:")
    ]


def test_a_shared_subtree_is_named_where_f_first_met_it(engine: str) -> None:
    """With the identity cache, f fails on a shared list the first time: that path."""
    shared = [1.0, BAD]
    tree = {"a": Mutable(shared, 0.0), "b": shared}
    assert notes_of(lambda: ct.fmap(one, tree)) == notes_of(
        lambda: ct.fmap(one, tree, exclude=plain)
    )


def test_an_error_of_a_nested_fmap_gets_both_notes(engine: str) -> None:
    """fmap called inside f: the inner note, then the outer one, as the plain walk gives."""
    inner = [[1.0, BAD]]

    def f(x: Any) -> Any:
        return ct.fmap(one, inner) if x == 2.0 else x

    tree = {"k": [0.0, 2.0]}
    assert notes_of(lambda: ct.fmap(f, tree)) == [
        "fmap: raised while mapping the value at '[0][1]'",
        "fmap: raised while mapping the value at \"['k'][1]\"",
    ]


def test_the_engines_own_errors_get_no_note(engine: str) -> None:
    """A cycle found under the fast tiers is the engine's error: its message names the
    path, and no note is added (by the relocation run or the trail)."""
    cyc: list[Any] = [1.0]
    cyc.append(cyc)
    with pytest.raises(ct.StructureError, match="reference cycle") as info:
        ct.fmap(one, {"a": cyc})
    assert getattr(info.value, "__notes__", []) == []


@pytest.mark.parametrize(
    "walk",
    [ct.DefaultWalk(), ct.CachedWalk(ct.DefaultWalk())],
    ids=["default", "cached"],
)
def test_fmap_with_a_walk_notes_the_path_as_fmap_does(engine: str, walk: Any) -> None:
    """fmap(walk=...) gives f's error fmap's note, 100,000 levels down too."""
    for depth in (1, 100_000):
        tree = chain("list", depth)
        expected = notes_of(lambda t=tree: ct.fmap(one, t))
        assert notes_of(lambda t=tree: ct.fmap(one, t, walk=walk)) == expected
        assert notes_of(lambda t=tree: ct.fmap(one, t, walk=walk, cache=False)) == expected


def test_a_walk_of_ones_own_notes_the_path(engine: str) -> None:
    """A walk class defining __call__ (recursing through ``recurse``) gets the note too."""

    class Mine(ct.Walk):
        def __call__(self, recurse: Any, x: Any, *ys: Any) -> Any:
            return ct.DefaultWalk()(recurse, x, *ys)

    tree = chain("mixed", 30)
    assert notes_of(lambda: ct.fmap(one, tree, walk=Mine())) == notes_of(
        lambda: ct.fmap(one, tree)
    )


def test_fmap_with_a_walk_reports_a_cycle_as_fmap_does(engine: str) -> None:
    """A reference cycle 100,000 levels down: fmap(walk=...) raises fmap's error, word
    for word, with the same path."""
    loop: list[Any] = [0.0]
    tree = chain("list", 100_000, loop)
    loop.append(tree)
    with pytest.raises(ct.StructureError, match=r"^fmap: the tree has a reference cycle") as plain:
        ct.fmap(one, tree)
    with pytest.raises(
        ct.StructureError, match=r"^fmap: the tree has a reference cycle"
    ) as walked:
        ct.fmap(one, tree, walk=ct.DefaultWalk())
    assert str(walked.value) == str(plain.value)
    assert walked.value.path == plain.value.path


@pytest.mark.parametrize("mode", ["strict", "outer"])
@pytest.mark.parametrize("depth", [1, 50, 5_000])
def test_treelize_notes_the_path_as_its_engine_does(
    mode: str, depth: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """treelize's fast path over plain dicts (``_pair.fast_pair``) and its hand-over to
    the engine give the note of the engine run alone (``_FAST`` off), full path."""
    from containers import _treelize

    @ct.treelize(mode=mode, **({"missing": 0.0} if mode == "outer" else {}))
    def g(a: Any, b: Any) -> Any:
        return math.sqrt(a) + b

    cases = [
        (chain("dict", depth), chain("dict", depth, 1.0)),
        (chain("mixed", depth), chain("mixed", depth, 1.0)),
        (BAD, chain("dict", depth, 1.0)),
        (chain("dict", depth), 1.0),
    ]
    for a, b in cases:
        fast = notes_of(lambda a=a, b=b: g(a, b))
        monkeypatch.setattr(_treelize, "_FAST", False)
        plain_notes = notes_of(lambda a=a, b=b: g(a, b))
        monkeypatch.setattr(_treelize, "_FAST", True)
        assert len(plain_notes) == 1
        assert plain_notes[0].startswith("treelize: raised while mapping the value at ")
        assert fast == plain_notes


def test_an_attribute_error_of_f_in_a_declared_class_is_noted(engine: str) -> None:
    """An AttributeError raised by f inside a declared class's mapper (whose unset-field
    clause sees it first and passes it on) gets the note too."""

    def f(x: Any) -> Any:
        if x == BAD:
            raise AttributeError("no such thing")
        return x

    tree = [Frozen(1.0, Mutable(2.0, BAD))]
    with pytest.raises(AttributeError, match="no such thing") as info:
        ct.fmap(f, tree)
    assert info.value.__notes__ == ["fmap: raised while mapping the value at '[0].rest.rest'"]
