"""Display: ``pformat``/``pprint``, an indented view of a tree.

A thin operation over the registry's node kinds: one iterative pass, so any depth
renders; it never changes the tree and calls nothing but ``repr`` on leaves.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

import numpy as np

from containers._errors import type_name
from containers._paths import AttrKey, Key
from containers._registry import NodeKind, kind_of

__all__ = ["pformat", "pprint"]


def _leaf(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype}[{','.join(map(str, value.shape))}]"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _label(kind: NodeKind, key: Key | None) -> str:
    if key is None:
        return ""
    if isinstance(key, AttrKey):
        return f"{key.name}="
    return f"{key.raw!r}: " if kind.type is not list and kind.type is not tuple else ""


_BRACKETS = {list: ("[", "]"), tuple: ("(", ")")}


def _open_close(kind: NodeKind) -> tuple[str, str]:
    t = kind.type
    if t in _BRACKETS:
        return _BRACKETS[t]
    if t is dict:
        return "{", "}"
    return f"{type_name(t)}(", ")"


def pformat(tree: Any, /, *, width: int = 88, indent: int = 2) -> str:
    """Render ``tree`` as an indented tree: class names, field names and kept values.

    Arrays are summarized by dtype and shape (``float32[3,4]``); a node whose children
    are all leaves stays on one line when it fits in ``width``.

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
    """
    lines: list[str] = []
    # Each frame: [kind, keys, kids, next index, depth, closing text, kept items].
    stack: list[list[Any]] = []

    def emit(value: Any, key: Key | None, parent: NodeKind | None, depth: int) -> None:
        pad = " " * (indent * depth)
        prefix = _label(parent, key) if parent is not None else ""
        kind = kind_of(value)
        if kind is None:
            lines.append(f"{pad}{prefix}{_leaf(value)}")
            return
        kids, aux = kind.flatten(value)
        keys = kind.keys(aux, len(kids))
        kept = list(zip(kind.spec.keep, aux)) if kind.spec is not None else []
        opening, closing = _open_close(kind)
        if kind.type is type(None):
            lines.append(f"{pad}{prefix}None")
            return
        if all(k is None or kind_of(k) is None for k in kids):
            items = [f"{_label(kind, k)}{_leaf(v)}" for k, v in zip(keys, kids)]
            items += [f"{name}={_leaf(v)}" for name, v in kept]
            single = ",)" if kind.type is tuple and len(items) == 1 else closing
            line = f"{pad}{prefix}{opening}{', '.join(items)}{single}"
            if len(line) <= width:
                lines.append(line)
                return
        lines.append(f"{pad}{prefix}{opening}")
        stack.append([kind, keys, kids, 0, depth + 1, f"{pad}{closing}", kept])

    emit(tree, None, None, 0)
    while stack:
        frame = stack[-1]
        kind, keys, kids, i, depth, closing, kept = frame
        if i < len(kids):
            frame[3] = i + 1
            emit(kids[i], keys[i], kind, depth)
            if stack[-1] is frame:  # the child took one line; a node child ends later
                lines[-1] += ","
            continue
        pad = " " * (indent * depth)
        lines.extend(f"{pad}{name}={_leaf(v)}," for name, v in kept)
        stack.pop()
        lines.append(closing + ("," if stack else ""))
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
