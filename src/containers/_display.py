"""Display: ``pformat``/``pprint``, an indented view of a tree.

A thin client of the engine's traversal, so any depth renders and a cycle is a
``StructureError`` with its path; it never changes the tree and calls nothing but
``repr`` on leaves.
"""

from __future__ import annotations

import dataclasses
import reprlib
import sys
from collections import OrderedDict, defaultdict, deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TextIO

from containers._engine._core import Cursor, Frame, traverse
from containers._errors import ContainerDefinitionError, StructureError, safe_repr, type_name
from containers._paths import AttrKey, DictKey, Key
from containers._registry import DEFAULT_DICT, DICT, IMMUTABLE_LEAVES, NONE, NodeKind, kind_of
from containers._summary import ArrayInfo, array_info, format_bytes, format_count

__all__ = ["pformat", "pprint"]

#: Leaves and keys are shown with at most this many characters of their repr.
_REPR_WIDTH = 60
#: Nesting deeper than this is not indented further (output linear in the tree's size).
MAX_INDENT_DEPTH = 20


def view_repr(value: Any) -> str:
    """``safe_repr(value)``, or a stand-in when the object's ``__repr__`` raises (a
    half-built object): a view shows the rest of the tree rather than fail."""
    try:
        return safe_repr(value)
    except Exception as err:
        return f"<{type_name(type(value))} object: repr raised {type(err).__name__}>"


def _key_str(key: Key) -> str:
    """``str(key)`` (its keystr step), with ``view_repr`` for a key whose repr raises."""
    try:
        return str(key)
    except Exception:
        return f"[{view_repr(key.raw)}]"


def _short(text: str) -> str:
    return text if len(text) <= _REPR_WIDTH else text[: _REPR_WIDTH - 3] + "..."


def _leaf(value: Any) -> str:
    info = array_info(value)
    return info.text if info is not None else _short(view_repr(value))


def _label(kind: NodeKind, key: Key | None) -> str:
    if key is None:
        return ""
    if isinstance(key, AttrKey):
        return f"{key.name}="
    if kind.type is list or kind.type is tuple or kind.type is deque:
        return ""
    return f"{_short(view_repr(key.raw))}: "


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


# --- the outline: one walk, read by pformat and by the HTML view ---------------------------


class Item:
    """One value of the tree in the outline, in pre-order: a leaf, a node, or a mark
    where an object met before recurs (``same``: the item it is the same object as;
    ``cycle``: it is its own ancestor there).

    ``kind`` is the node kind (None for leaves and marks); ``kids`` the items of its
    children in display order; ``end`` the index past its subtree. ``params``,
    ``nbytes`` and ``arrays`` total the subtree's array leaves, each object once (a
    mark counts nothing: it is counted where it is shown).
    """

    # Optional fields are class-level defaults (set on the few items that need them):
    # an item costs four attribute writes, for trees of 100,000 leaves.
    kind: NodeKind | None = None
    aux: Any = None
    end = 0
    info: ArrayInfo | None = None
    same: int | None = None
    cycle: int | None = None
    params = 0
    nbytes = 0
    arrays = 0

    #: A leaf's (never appended to: only an open node, given a list of its own, is a
    #: parent).
    kids: list[int] = []  # noqa: RUF012

    def __init__(self, value: Any, key: Key | None, parent: int, depth: int) -> None:
        self.value = value
        self.key = key
        self.parent = parent
        self.depth = depth


def _display_order(
    kind: NodeKind, aux: Any, kids: Sequence[Any], keys: Sequence[Key]
) -> tuple[Sequence[Any], Sequence[Key]]:
    """A defaultdict's children in insertion order (flatten sorts them; aux keeps both)."""
    if kind is DEFAULT_DICT and aux[1] is not None:
        at = {k: i for i, k in enumerate(aux[0])}  # the keys are the dict's own objects
        perm = [at[k] for k in aux[1]]
        return [kids[i] for i in perm], [keys[i] for i in perm]
    return kids, keys


def outline(tree: Any, *, op: str, cycles: bool = False) -> list[Item]:
    """The outline of ``tree``: its items in pre-order, from one walk of the engine.

    A mutable object (a list, a dict, an array) met again is a ``same`` mark, so the
    outline is linear in the number of distinct objects however they are shared. A node
    inside itself raises the engine's cycle error, or with ``cycles`` is a ``cycle``
    mark. Dicts are read in insertion order (a plain dict directly: sorting its keys,
    as flatten does, would only be undone).
    """
    items: list[Item] = []
    first: dict[int, int] = {}  # id of a mutable object -> its item (the tree keeps it alive)
    immutable = IMMUTABLE_LEAVES

    def visit(cursor: Cursor, value: Any, ys: Sequence[Any]) -> tuple[bool, Any]:
        stack = cursor.stack
        index = len(items)
        if stack:
            top = stack[-1]
            parent = top.state
            item = Item(value, top.keys[len(top.out)], parent, len(stack))  # type: ignore[index]
            items[parent].kids.append(index)
        else:
            item = Item(value, None, -1, 0)
        items.append(item)
        try:
            kind = kind_of(value)
        except ContainerDefinitionError:  # an undeclared subclass: the error with its path
            kind = cursor.kind_of(value)
        if kind is None:
            if type(value) not in immutable:
                seen = first.get(id(value))
                if seen is not None:
                    item.same = seen
                    item.end = index + 1
                    return True, None
                first[id(value)] = index
                info = array_info(value)
                if info is not None:
                    item.info = info
                    item.params, item.nbytes, item.arrays = info.size, info.nbytes, 1
            item.end = index + 1
            return True, None
        on_path = cursor.on_path
        if id(value) in on_path:
            if not cycles:
                cursor.check(value)
            item.cycle = stack[on_path[id(value)]].state
            item.end = index + 1
            return True, None
        if kind.mutable:
            seen = first.get(id(value))
            if seen is not None:
                item.same = seen
                item.end = index + 1
                return True, None
            first[id(value)] = index
        if kind is DICT:
            kids: Sequence[Any] = list(value.values())
            keys: Sequence[Key] = list(map(DictKey, value))
            aux = None
        elif kind is NONE:
            item.end = index + 1
            return True, None
        else:
            kids, aux = kind.flatten(value)
            keys = kind.keys(aux, len(kids))
            kids, keys = _display_order(kind, aux, kids, keys)
        item.kind, item.aux, item.kids = kind, aux, []
        cursor.push(value, kind, kids, aux, keys=keys, state=index)
        return False, None

    def leave(cursor: Cursor, frame: Frame) -> None:
        item = items[frame.state]
        params = nbytes = arrays = 0
        for k in item.kids:
            kid = items[k]
            if kid.arrays:
                params += kid.params
                nbytes += kid.nbytes
                arrays += kid.arrays
        item.params, item.nbytes, item.arrays = params, nbytes, arrays
        item.end = len(items)

    traverse(visit, leave, tree, op=op)
    return items


def totals(item: Item) -> str:
    """``9 params, 36 B`` for a subtree holding arrays, else ``""``."""
    if not item.arrays:
        return ""
    return f"{format_count(item.params)}, {format_bytes(item.nbytes)}"


def paths(items: list[Item], wanted: Iterable[int]) -> dict[int, str]:
    """The keystr paths of the items ``wanted`` (and of their ancestors)."""
    out: dict[int, str] = {-1: ""}
    for i in wanted:
        chain = []
        j = i
        while j not in out:
            chain.append(j)
            j = items[j].parent
        for j in reversed(chain):
            item = items[j]
            out[j] = out[item.parent] + (_key_str(item.key) if item.key is not None else "")
    return out


def _mark(items: list[Item], item: Item, path_of: dict[int, str]) -> str:
    """``<same as ['a']>`` or ``<cycle: back to the root>``."""
    if item.same is not None:
        return f"<same as {path_of[item.same] or 'the root'}>"
    return f"<cycle: back to {path_of[item.cycle] or 'the root'}>"  # type: ignore[index]


def pformat(tree: Any, /, *, width: int = 88, indent: int = 2) -> str:
    """Render ``tree`` as an indented tree: class names, field names and kept values.

    Leaves with a ``shape`` and a ``dtype`` (numpy, jax and torch arrays, found by
    those attributes alone) are summarized as ``float32[3,4]`` (a 0-d array as
    ``int32[]``); scalars and other leaves are shown by their ``repr``, cut at 60
    characters. A node holding arrays ends its first line with a comment totalling its
    parameters (array elements) and bytes. Dicts show their keys in insertion order. A
    mutable object met again (a shared list, dict or array, as tied weights are) is
    shown once, then as ``<same as PATH>``, so shared subtrees cost nothing more. A node
    whose children are all leaves stays on one line when it fits in ``width``. Nesting
    deeper than 20 levels is not indented further, so a tree of any depth renders in
    size proportional to its number of nodes (the brackets still show the nesting).

    Examples:
        >>> import numpy as np, containers as ct
        >>> @ct.container(children=["w", "b"])
        ... class Dense:
        ...     w: np.ndarray
        ...     b: np.ndarray
        ...     name: str = "dense"
        >>> layers = [Dense(np.zeros((2, 3), "float32"), np.zeros(3, "float32"))]
        >>> print(ct.pformat({"step": np.array(7, "int32"), "enc": layers, "dec": layers}))
        {  # 10 params, 40 B
          'step': int32[],
          'enc': [  # 9 params, 36 B
            Dense(w=float32[2,3], b=float32[3], name='dense'),  # 9 params, 36 B
          ],
          'dec': <same as ['enc']>,
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
    items = outline(tree, op="pformat")
    path_of = paths(items, [i.same for i in items if i.same is not None])
    lines: list[str] = []
    open_: list[tuple[int, str, list[tuple[str, Any]]]] = []  # (end, closing, kept)

    def text(item: Item) -> str:
        if item.kind is not None:
            raise AssertionError("a node has no one-word text")  # pragma: no cover
        if item.same is not None or item.cycle is not None:
            return _mark(items, item, path_of)
        if item.info is not None:
            return item.info.text
        return "None" if item.value is None else _short(view_repr(item.value))

    def close(to: int) -> None:
        while open_ and open_[-1][0] <= to:
            _, closing, kept = open_.pop()
            inner = " " * (indent * min(len(open_) + 1, MAX_INDENT_DEPTH))
            lines.extend(f"{inner}{name}={_leaf(v)}," for name, v in kept)
            lines.append(closing + ("," if open_ else ""))

    i = 0
    while i < len(items):
        close(i)
        item = items[i]
        depth = item.depth
        pad = " " * (indent * min(depth, MAX_INDENT_DEPTH))
        parent = items[item.parent].kind if item.parent >= 0 else None
        prefix = _label(parent, item.key) if parent is not None else ""
        comma = "," if parent is not None else ""
        kind = item.kind
        if kind is None:
            lines.append(f"{pad}{prefix}{text(item)}{comma}")
            i += 1
            continue
        note = totals(item)
        note = f"  # {note}" if note else ""
        kept = list(zip(kind.spec.keep, item.aux)) if kind.spec is not None else []
        opening, closing = _open_close(kind, item.aux)
        if all(items[k].kind is None for k in item.kids):
            keys = [_label(kind, items[k].key) for k in item.kids]
            parts = [f"{key}{text(items[k])}" for key, k in zip(keys, item.kids)]
            parts += [f"{name}={_leaf(v)}" for name, v in kept]
            single = ",)" if kind.type is tuple and len(parts) == 1 else closing
            line = f"{pad}{prefix}{opening}{', '.join(parts)}{single}"
            if len(line) <= width:
                lines.append(line + comma + note)
                i = item.end
                continue
        lines.append(f"{pad}{prefix}{opening}{note}")
        open_.append((item.end, f"{pad}{closing}", kept))
        i += 1
    close(len(items))
    return "\n".join(lines)


# --- what @container gives the classes it declares ------------------------------------------


def _field_repr(value: Any) -> str:
    """``repr(value)``, but an array numpy would elide (more elements than its print
    ``threshold``, 1000 by default) is ``float32[1024,1024]``: a model's repr stays short."""
    info = array_info(value)
    if info is not None:
        import numpy as np

        if info.size > np.get_printoptions()["threshold"]:
            return info.text
    return repr(value)


@reprlib.recursive_repr()
def container_repr(self: Any) -> str:
    """The dataclass repr of a declared container (its fields with ``repr=True``), with
    large arrays summarized by dtype and shape."""
    fields = ", ".join(
        f"{f.name}={_field_repr(getattr(self, f.name))}"
        for f in dataclasses.fields(self)
        if f.repr
    )
    return f"{type(self).__qualname__}({fields})"


def repr_pretty(self: Any, p: Any, cycle: bool) -> None:
    """IPython's pretty printer: ``pformat``'s view; for an object inside itself, which
    ``pformat`` refuses, the repr (it writes ``...`` where the object recurs)."""
    if cycle:
        p.text(f"{type(self).__qualname__}(...)")
        return
    try:
        text = pformat(self)
    except StructureError:  # a reference cycle
        text = repr(self)
    p.text(text)


class _Summary:
    """A value rich shows by its summary text (an array's ``float32[3,4]``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def rich_repr(self: Any) -> Iterator[tuple[str, Any]]:
    """rich's pretty printer: the fields with ``repr=True``, arrays as ``float32[3,4]``."""
    for f in dataclasses.fields(self):
        if f.repr:
            value = getattr(self, f.name)
            info = array_info(value)
            yield f.name, _Summary(info.text) if info is not None else value


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
