"""Operations on shapes (JAX): broadcast a prefix tree, transpose, diff two structures.

Thin operations over ``_flatten``'s Structure and the engine's traversal (``diff``), so
any depth works and a cycle is reported with its path. Nothing here calls user
functions on leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from containers._engine._core import Cursor, leave_nothing, traverse
from containers._errors import StructureError, counted
from containers._flatten import flatten
from containers._paths import DictKey, Key, KeyPath, keystr
from containers._registry import distinct_labels, label
from containers._structure import Structure, aux_difference

__all__ = ["assert_same_structure", "broadcast", "diff", "transpose"]


def broadcast(
    prefix: Any,
    full: Any,
    /,
    *,
    is_leaf: Callable[[Any], bool] | None = None,
    none_is_leaf: bool = False,
) -> Any:
    """Return a tree shaped like ``full`` whose leaves repeat the leaves of ``prefix``.

    ``prefix`` must be a prefix of ``full``: the same nodes down to its own leaves
    (JAX's prefix trees, as in ``vmap``'s ``in_axes``). Each leaf of ``prefix`` is
    repeated over the whole subtree of ``full`` below it.

    Examples:
        >>> import containers as ct
        >>> ct.broadcast(("x", 0), (1.0, {"k1": 2.0, "k2": 3.0}))
        ('x', {'k1': 0, 'k2': 0})
        >>> ct.broadcast((None, 0), ([1, 2], 3), none_is_leaf=True)
        ([None, None], 0)

    Raises:
        StructureError: ``prefix`` is not a prefix of ``full``; the message names the
            first differing path.
    """
    pleaves, pstruct = flatten(prefix, is_leaf=is_leaf, none_is_leaf=none_is_leaf)
    subtrees = pstruct._up_to(full, "broadcast")
    filled = []
    for value, sub in zip(pleaves, subtrees):
        n, s = _count(sub, is_leaf, none_is_leaf)
        filled.append(s.unflatten([value] * n))
    return pstruct.unflatten(filled)


def _count(
    tree: Any, is_leaf: Callable[[Any], bool] | None, none_is_leaf: bool
) -> tuple[int, Structure[Any]]:
    _, s = flatten(tree, is_leaf=is_leaf, none_is_leaf=none_is_leaf)
    return s.num_leaves, s


def transpose(outer: Structure[Any], inner: Structure[Any], tree: Any, /) -> Any:
    """Turn a tree of shape ``outer`` of trees of shape ``inner`` inside out (JAX).

    Examples:
        >>> import containers as ct
        >>> outer = ct.structure([0, 0])
        >>> inner = ct.structure({"a": 0, "b": 0})
        >>> ct.transpose(outer, inner, [{"a": 1, "b": 2}, {"a": 3, "b": 4}])
        {'a': [1, 3], 'b': [2, 4]}

    Raises:
        StructureError: ``tree`` is not ``outer`` of ``inner``.
        StructureError: ``outer`` or ``inner`` is not a Structure.
    """
    for name, s in (("outer", outer), ("inner", inner)):
        if not isinstance(s, Structure):
            raise StructureError(
                f"transpose: {name} must be a Structure (from ct.structure), got "
                f"{type(s).__qualname__}."
            )
    paths = outer.paths()
    columns = [
        inner._up_to(sub, "transpose", paths[i])
        for i, sub in enumerate(outer._up_to(tree, "transpose"))
    ]
    rows = [outer.unflatten(list(row)) for row in zip(*columns)] if columns else []
    if not columns:
        rows = [outer.unflatten([]) for _ in range(inner.num_leaves)]
    return inner.unflatten(rows)


def diff(a: Any, b: Any, /) -> list[tuple[KeyPath, str]]:
    """List every structural difference between two trees, as ``(path, description)``.

    Leaves are not compared, only the shape: node types, keys, lengths and kept
    values. The list is empty exactly when ``structure(a) == structure(b)``.

    Examples:
        >>> import containers as ct
        >>> for path, what in ct.diff({"a": [1, 2], "b": 0}, {"a": [1], "c": 0}):
        ...     print(ct.keystr(path) or "<root>", "->", what)
        ['a'] -> a list with 2 children in one and 1 in the other
        ['b'] -> present only in the first tree
        ['c'] -> present only in the second tree
    """
    out: list[tuple[KeyPath, str]] = []

    def visit(cursor: Cursor, va: Any, ys: Sequence[Any]) -> tuple[bool, Any]:
        if type(va) is _Finding:
            out.append((cursor.path(), va.text))
            return True, None
        (vb,) = ys
        ka, kb = cursor.kind_of(va), cursor.kind_of(vb)
        if ka is None and kb is None:
            return True, None
        if ka is None or kb is None or ka.type is not kb.type:
            one, other = distinct_labels(label(va), type(va), label(vb), type(vb))
            out.append((cursor.path(), f"{one} vs {other}"))
            return True, None
        kids_a, aux_a = ka.flatten(va)
        kids_b, aux_b = kb.flatten(vb)
        keys_a = ka.keys(aux_a, len(kids_a))
        keys_b = kb.keys(aux_b, len(kids_b))
        index_b = {k: i for i, k in enumerate(keys_b)}
        # The positions to visit under this node: pairs of children, and findings (a
        # key only one tree has) reported at their position, in order.
        keys: list[Key] = []
        kids: list[Any] = []
        others: list[Any] = []
        if any(isinstance(k, DictKey) for k in (*keys_a, *keys_b)) and set(keys_a) != set(keys_b):
            set_a = set(keys_a)
            for i, k in enumerate(keys_a):
                j = index_b.get(k)
                keys.append(k)
                kids.append(kids_a[i] if j is not None else _ONLY_FIRST)
                others.append(kids_b[j] if j is not None else None)
            for k in keys_b:
                if k not in set_a:
                    keys.append(k)
                    kids.append(_ONLY_SECOND)
                    others.append(None)
        else:
            if len(kids_a) != len(kids_b) or not ka.aux_eq(aux_a, aux_b):
                detail = aux_difference(ka, aux_a, aux_b, len(kids_a), len(kids_b))
                out.append((cursor.path(), detail))
            for i, k in enumerate(keys_a):
                j = index_b.get(k)
                if j is not None:
                    keys.append(k)
                    kids.append(kids_a[i])
                    others.append(kids_b[j])
        cursor.push(va, ka, kids, aux_a, (others,), keys)
        return False, None

    traverse(visit, leave_nothing, a, (b,), op="diff")
    return out


class _Finding:
    """A difference found at a node's child position (a key only one tree has), visited
    in its place so that it is reported in order with its path."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_ONLY_FIRST = _Finding("present only in the first tree")
_ONLY_SECOND = _Finding("present only in the second tree")


def assert_same_structure(a: Any, b: Any, /) -> None:
    """Raise ``StructureError`` listing every difference if ``a`` and ``b`` differ in shape.

    Examples:
        >>> import containers as ct
        >>> ct.assert_same_structure([1, (2, 3)], ["a", ("b", "c")])
        >>> ct.assert_same_structure([1, (2, 3)], [1, 2])
        Traceback (most recent call last):
        ...
        containers.StructureError: assert_same_structure: the trees differ in 1 place: at [1]: a tuple vs a leaf of type int.
    """
    found = diff(a, b)
    if found:
        places = "; ".join(f"at {keystr(p) or 'the root'}: {what}" for p, what in found[:10])
        more = f" (and {len(found) - 10} more)" if len(found) > 10 else ""
        raise StructureError(
            f"assert_same_structure: the trees differ in {counted(len(found), 'place')}: "
            f"{places}{more}.",
            found[0][0],
        )
