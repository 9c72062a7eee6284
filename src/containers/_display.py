"""Display: ``pformat``/``pprint``, an indented view of a tree.

A thin client of the engine's traversal, so any depth renders and a cycle is a
``StructureError`` with its path; it never changes the tree and calls nothing but
``repr`` on leaves.
"""

from __future__ import annotations

import sys
from collections import OrderedDict, defaultdict, deque
from collections.abc import Sequence
from typing import Any, TextIO

from containers._engine._core import Cursor, Frame, traverse
from containers._errors import safe_repr, type_name
from containers._paths import AttrKey, Key
from containers._registry import NodeKind, kind_of

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
    if summary is not None and getattr(type(value), "__containers_lazy__", False) is True:
        return f"{summary} (lazy)"  # a LazyArray of load(lazy=True): nothing read
    return summary if summary is not None else _short(safe_repr(value))


def _label(kind: NodeKind, key: Key | None) -> str:
    if key is None:
        return ""
    if isinstance(key, AttrKey):
        return f"{key.name}="
    if kind.type is list or kind.type is tuple or kind.type is deque:
        return ""
    return f"{_short(safe_repr(key.raw))}: "


_BRACKETS: dict[type, tuple[str, str]] = {
    list: ("[", "]"),
    tuple: ("(", ")"),
    dict: ("{", "}"),
    OrderedDict: ("OrderedDict({", "})"),
    deque: ("deque([", "])"),
}


def _open_close(kind: NodeKind, aux: Any) -> tuple[str, str]:
    if kind.type is defaultdict:  # aux: (keys, order, default_factory)
        factory = aux[2]
        return f"defaultdict({getattr(factory, '__qualname__', repr(factory))}, {{", "})"
    return _BRACKETS.get(kind.type) or (f"{type_name(kind.type)}(", ")")


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
        containers.StructureError: pformat: the tree has a reference cycle: the object at "['a'][1]" is the same object as its ancestor at "['a']". Trees must be acyclic; break the cycle, or make the object a leaf (exclude=/is_leaf=, where the operation takes them).

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

    def visit(cursor: Cursor, value: Any, ys: Sequence[Any]) -> tuple[bool, Any]:
        pad = " " * (indent * min(cursor.depth, MAX_INDENT_DEPTH))
        parent = cursor.stack[-1].kind if cursor.stack else None
        prefix = _label(parent, cursor.key()) if parent is not None else ""
        comma = "," if parent is not None else ""
        kind = cursor.kind_of(value)
        if kind is None:
            lines.append(f"{pad}{prefix}{_leaf(value)}{comma}")
            return True, None
        if kind.type is type(None):
            lines.append(f"{pad}{prefix}None{comma}")
            return True, None
        kids, aux = kind.flatten(value)
        keys = kind.keys(aux, len(kids))
        kept = list(zip(kind.spec.keep, aux)) if kind.spec is not None else []
        opening, closing = _open_close(kind, aux)
        if all(k is None or kind_of(k) is None for k in kids):
            items = [f"{_label(kind, k)}{_leaf(v)}" for k, v in zip(keys, kids)]
            items += [f"{name}={_leaf(v)}" for name, v in kept]
            single = ",)" if kind.type is tuple and len(items) == 1 else closing
            line = f"{pad}{prefix}{opening}{', '.join(items)}{single}"
            if len(line) <= width:
                lines.append(line + comma)
                return True, None
        lines.append(f"{pad}{prefix}{opening}")
        inner = " " * (indent * min(cursor.depth + 1, MAX_INDENT_DEPTH))
        cursor.push(value, kind, kids, aux, keys=keys, state=(inner, kept, f"{pad}{closing}"))
        return False, None

    def leave(cursor: Cursor, frame: Frame) -> None:
        inner, kept, closing = frame.state
        lines.extend(f"{inner}{name}={_leaf(v)}," for name, v in kept)
        lines.append(closing + ("," if cursor.stack else ""))

    traverse(visit, leave, tree, op="pformat")
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
