"""treelize's acceleration: two positional arguments walked together over plain dicts.

This stage maps two trees whose nodes are mostly plain dicts by recursion down to
MAX_FAST_DEPTH, with the key rules of the ``Align`` it is given; every other node,
any deeper subtree and every error go to ``_core.map_tree`` with the same ``Align``,
its twin (errors through ``_fast.relocate``, the fast walks' one relocation). It
knows no key rule that the ``Align`` does not name.

It is not folded into ``_fast._Mode``'s several-tree walk, which maps a dict through
its kind (keys in sorted order, ``read`` of the other tree, the identity cache): on
the 10,000-leaf dict trees of benchmarks/treelize.py, pure Python, that walk costs
about 770 ns a leaf where this one costs about 300 (the engine alone: 2,700).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from containers._engine._core import MAX_FAST_DEPTH, UNSET, Align, map_tree
from containers._engine._fast import relocate
from containers._engine._loops import unwound
from containers._engine._relocate import Relocate, trail_note
from containers._errors import ContainerDefinitionError, StructureError
from containers._paths import DictKey
from containers._registry import LEAF_TYPES

__all__ = ["fast_pair"]


def fast_pair(
    f: Callable[..., Any],
    leaf: Callable[..., Any],
    a: Any,
    b: Any,
    align: Align,
    missing: Any,
    absent: Any,
) -> Any:
    """``treelize``'s walk for two positional arguments, recursive over plain dicts
    (benchmarks/treelize.py: the engine costs about 4x more per leaf there).

    ``align.mode`` is one of treelize's key rules (``"strict"``, ``"inner"``,
    ``"outer"``, ``"left"``). Its twin is ``map_tree`` with the same ``align``: any
    other node, and any subtree
    deeper than MAX_FAST_DEPTH, is handed to it; on an error, it runs again from the
    root with a no-op leaf function to raise the error with its full path. ``f`` is
    the user's function, called here with both values (an absent one is ``missing``
    itself, an immutable value, or ``absent`` where a missing key is an error);
    ``leaf`` is what the engine calls (it fills absent values).
    """
    mode = align.mode
    strict = mode == "strict"
    inner = mode == "inner"
    outer = mode == "outer"
    allow = missing is not absent
    leaf_types = LEAF_TYPES

    def engine(x: Any, y: Any) -> Any:
        return map_tree(
            leaf, x, (y,), exclude=None, cache=None, op="treelize", align=align, relocate=True
        )

    def spread(x: Any, y: Any, depth: int) -> Any:
        """A leaf facing a dict (x or y): the dict's keys, the leaf at each."""
        out = {}
        k = None
        try:
            if type(x) is dict:
                for k, v in x.items():
                    out[k] = child(v, y, depth)
            else:
                for k, v in y.items():
                    out[k] = child(x, v, depth)
        except Exception as err:  # the key, for the note's path (_relocate.trail_note)
            unwound(err, (DictKey(k),))
            raise
        return out

    def pair(x: Any, y: Any, depth: int) -> Any:
        if type(x) is not dict:
            if type(y) is dict and type(x) in leaf_types:
                return spread(x, y, depth)
            return engine(x, y)
        if type(y) is not dict:
            if type(y) in leaf_types:
                return spread(x, y, depth)
            return engine(x, y)
        # Errors are found before any f call at this node, as the engine finds them.
        if strict:
            if x.keys() != y.keys():
                raise _differ()
        elif (not allow and not inner) and (
            not x.keys() <= y.keys() or (outer and not y.keys() <= x.keys())
        ):
            raise _differ()
        out = {}
        k = None
        try:
            for k, vx in x.items():
                vy = y.get(k, absent)
                if vy is absent:
                    if inner:
                        continue
                    vy = missing
                if type(vx) in leaf_types and type(vy) in leaf_types:
                    out[k] = f(vx, vy)
                else:
                    out[k] = child(vx, vy, depth)
            if outer and not y.keys() <= x.keys():
                for k, vy in y.items():
                    if k not in x:
                        out[k] = child(missing, vy, depth)
        except Exception as err:  # as in spread
            unwound(err, (DictKey(k),))
            raise
        return out

    def child(x: Any, y: Any, depth: int) -> Any:
        if type(x) in leaf_types and type(y) in leaf_types:
            return f(x, y)
        if depth >= MAX_FAST_DEPTH:
            return engine(x, y)
        return pair(x, y, depth + 1)

    try:
        if type(a) is dict or type(b) is dict:
            return pair(a, b, 0)
        return engine(a, b)
    except (Relocate, StructureError, ContainerDefinitionError) as err:
        found = err if isinstance(err, Relocate) else Relocate(err)
        relocate(found, a, (b,), False, UNSET, structural=False, op="treelize", align=align)
    except Exception as err:  # f's: the note the engine adds, with the path (trail)
        trail_note(err, "treelize", a)
        raise


def _differ() -> Relocate:
    """The keys of two dicts break the key rule: ``relocate`` finds it with its path."""
    return Relocate(StructureError("treelize: the trees' keys differ"))
