"""Typing cases for checkers without the plugin: mypy alone, and pyright.

Never executed; tests/typing/test_checkers.py checks it. Without the plugin the tree
operations keep their declared signatures: sound, with ``Any`` where only the structure
of the tree could say more.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from typing_extensions import assert_type

import containers as ct

T = TypeVar("T")


@ct.container
class Pair(Generic[T]):
    a: T
    b: T


def ints() -> Pair[int]:
    return Pair(1, 2)


def case_fmap_is_any() -> None:
    assert_type(ct.fmap(str, ints()), Any)
    assert_type(ct.fmapstructure(str, ints()), Any)


def case_lambda_over_one_tree() -> None:
    # pyright in strict mode: the lambda's parameter is Any, not Unknown.
    assert_type(ct.fmap(lambda x: x + 1, ints()), Any)
    assert_type(ct.fmapstructure(lambda x: x + 1, ints()), Any)


def case_flatten_leaves_are_any() -> None:
    leaves, s = ct.flatten(ints())
    assert_type(leaves, list[Any])
    assert_type(s, ct.Structure[Pair[int]])
    assert_type(ct.leaves(ints()), list[Any])


def case_unflatten_is_any() -> None:
    leaves, s = ct.flatten(ints())
    assert_type(ct.unflatten(s, leaves), Any)
    assert_type(s.unflatten(leaves), Any)


def case_annotate_to_keep_types() -> None:
    out: Pair[str] = ct.fmap(str, ints())
    assert_type(out, Pair[str])


def case_tree_of_builtins() -> None:
    def total(t: ct.Tree[int]) -> int:
        return 0

    total(1)
    total([1, (2, {"k": 3}), None])
    total(["a"])  # type: ignore[list-item]
    total(ints())  # type: ignore[arg-type]
