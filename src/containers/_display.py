"""Display: ``pformat``/``pprint``, an indented view of a tree.

A thin operation over the registry's node kinds: one iterative pass with the engine's
cycle error, so any depth renders and a cycle is a ``StructureError`` with its path;
it never changes the tree and calls nothing but ``repr`` on leaves.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from containers._errors import type_name
from containers._paths import AttrKey, Key, KeyPath
from containers._registry import NodeKind, kind_of
from containers._engine._core import cycle_error

__all__ = ["pformat", "pprint"]

#: Leaves and keys are shown with at most this many characters of their repr.
_REPR_WIDTH = 60
#: Nesting deeper than this is not indented further (output linear in the tree's size).
MAX_INDENT_DEPTH = 20


def _short(text: str) -> str:
    return text if len(text) <= _REPR_WIDTH else text[: _REPR_WIDTH - 3] + "..."


def _array_summary(value: Any) -> str | None:
    """``float32[3,4]`` for anything with a non-empty ``.shape`` of ints and a ``.dtype``
    (numpy, jax and torch arrays alike: none of them is imported), else None."""
    try:
        shape, dtype = value.shape, value.dtype
        dims = ",".join(str(int(d)) for d in shape)
    except Exception:  # no array-like summary: fall back to repr
        return None
    if not dims:
        return None  # a scalar (numpy's float32(1.0), a 0-d array): its repr shows the value
    name = getattr(dtype, "name", None)
    if not isinstance(name, str):
        name = str(dtype)
    return f"{name.rsplit('.', 1)[-1]}[{dims}]"  # torch.float32 -> float32


def _leaf(value: Any) -> str:
    summary = _array_summary(value) if hasattr(value, "dtype") else None
    return summary if summary is not None else _short(repr(value))


def _label(kind: NodeKind, key: Key | None) -> str:
    if key is None:
        return ""
    if isinstance(key, AttrKey):
        return f"{key.name}="
    if kind.type is list or kind.type is tuple:
        return ""
    return f"{_short(repr(key.raw))}: "


_BRACKETS: dict[type, tuple[str, str]] = {list: ("[", "]"), tuple: ("(", ")"), dict: ("{", "}")}


def _open_close(kind: NodeKind) -> tuple[str, str]:
    return _BRACKETS.get(kind.type) or (f"{type_name(kind.type)}(", ")")


class _Frame:
    """One node whose children are being rendered."""

    __slots__ = ("closing", "depth", "i", "kept", "keys", "kids", "kind", "node")

    def __init__(
        self,
        node: Any,
        kind: NodeKind,
        keys: tuple[Key, ...],
        kids: Any,
        depth: int,
        closing: str,
        kept: list[tuple[str, Any]],
    ) -> None:
        self.node, self.kind, self.keys, self.kids = node, kind, keys, kids
        self.i, self.depth, self.closing, self.kept = 0, depth, closing, kept


def pformat(tree: Any, /, *, width: int = 88, indent: int = 2) -> str:
    """Render ``tree`` as an indented tree: class names, field names and kept values.

    Leaves with a ``shape`` and a ``dtype`` (numpy, jax and torch arrays, found by
    those attributes alone) are summarized as ``float32[3,4]``; scalars and other leaves
    are shown by their ``repr``, cut at 60 characters. A node whose children are all leaves stays on one line when it fits in
    ``width``. Nesting deeper than 20 levels is not indented further, so a tree of any
    depth renders in size proportional to its number of nodes (the brackets still show
    the nesting).

    Examples:
        >>> import numpy as np, containers as ct
        >>> @ct.container(children=["w", "b"])
        ... class Dense:
        ...     w: np.ndarray
        ...     b: np.ndarray
        ...     name: str = "dense"
        >>> print(ct.pformat({"layers": [Dense(np.zeros((2, 3), "float32"), np.zeros(3, "float32"))], "step": 7}))
        {
          'layers': [
            Dense(w=float32[2,3], b=float32[3], name='dense'),
          ],
          'step': 7,
        }
        >>> loop = [1]
        >>> loop.append(loop)
        >>> ct.pformat({"a": loop})
        Traceback (most recent call last):
        ...
        containers.StructureError: pformat: the tree has a reference cycle: the object at "['a'][1]" is the same object as its ancestor at "['a']". Trees must be acyclic; break the cycle or treat the object as a leaf with exclude=/is_leaf=.

    Args:
        tree: The tree to render.
        width: The longest line a node of leaves is put on.
        indent: Spaces per level of nesting.

    Returns:
        The rendering, without a final newline.

    Raises:
        StructureError: The tree contains a reference cycle (its path is named).
    """
    lines: list[str] = []
    stack: list[_Frame] = []
    on_path: dict[int, int] = {}  # id of a node being rendered -> its depth in the stack

    def path_at(depth: int) -> KeyPath:
        return tuple(frame.keys[frame.i - 1] for frame in stack[:depth])

    def emit(value: Any, key: Key | None, parent: NodeKind | None) -> None:
        depth = len(stack)
        pad = " " * (indent * min(depth, MAX_INDENT_DEPTH))
        prefix = _label(parent, key) if parent is not None else ""
        kind = kind_of(value)
        if kind is None:
            lines.append(f"{pad}{prefix}{_leaf(value)}")
            return
        if kind.type is type(None):
            lines.append(f"{pad}{prefix}None")
            return
        if id(value) in on_path:
            raise cycle_error("pformat", path_at(depth), path_at(on_path[id(value)]))
        kids, aux = kind.flatten(value)
        keys = kind.keys(aux, len(kids))
        kept = list(zip(kind.spec.keep, aux)) if kind.spec is not None else []
        opening, closing = _open_close(kind)
        if all(k is None or kind_of(k) is None for k in kids):
            items = [f"{_label(kind, k)}{_leaf(v)}" for k, v in zip(keys, kids)]
            items += [f"{name}={_leaf(v)}" for name, v in kept]
            single = ",)" if kind.type is tuple and len(items) == 1 else closing
            line = f"{pad}{prefix}{opening}{', '.join(items)}{single}"
            if len(line) <= width:
                lines.append(line)
                return
        lines.append(f"{pad}{prefix}{opening}")
        on_path[id(value)] = depth
        stack.append(_Frame(value, kind, keys, kids, depth + 1, f"{pad}{closing}", kept))

    emit(tree, None, None)
    while stack:
        frame = stack[-1]
        i = frame.i
        if i < len(frame.kids):
            frame.i = i + 1
            emit(frame.kids[i], frame.keys[i], frame.kind)
            if stack[-1] is frame:  # the child took one line; a node child ends later
                lines[-1] += ","
            continue
        pad = " " * (indent * min(frame.depth, MAX_INDENT_DEPTH))
        lines.extend(f"{pad}{name}={_leaf(v)}," for name, v in frame.kept)
        stack.pop()
        del on_path[id(frame.node)]
        lines.append(frame.closing + ("," if stack else ""))
    return "\n".join(lines)


def pprint(tree: Any, /, *, width: int = 88, indent: int = 2, file: TextIO | None = None) -> None:
    """Print ``pformat(tree)``.

    Examples:
        >>> import containers as ct
        >>> ct.pprint({"a": 1, "b": None})
        {'a': 1, 'b': None}
        >>> ct.pprint({"a": (1, 2), "b": [3]}, width=16)
        {
          'a': (1, 2),
          'b': [3],
        }
    """
    print(pformat(tree, width=width, indent=indent), file=file or sys.stdout)
