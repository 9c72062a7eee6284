"""Reading and replacing one place in a tree by key path: getpath, setpath, haspath.

Thin operations over the registry's node kinds: they follow one path down, so they
are iterative by nature; ``setpath`` rebuilds only the nodes on the path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from containers._errors import StructureError, safe_repr, short_repr
from containers._paths import AttrKey, DictKey, IndexKey, Key, KeyPath, keystr, parse_keystr, where
from containers._registry import NodeKind, kind_of, label

__all__ = ["getpath", "haspath", "setpath"]

T = TypeVar("T")
PathLike = str | Sequence[Key]


def _as_path(path: PathLike, op: str) -> KeyPath:
    if isinstance(path, str):
        return parse_keystr(path)
    if isinstance(path, (bytes, bytearray)) or not isinstance(path, Iterable):
        raise StructureError(
            f"{op}: path must be a keystr string like '.layers[0].w' or a tuple of keys "
            f"(AttrKey, IndexKey, DictKey), got {type(path).__qualname__} {short_repr(path)}."
        )
    out = tuple(path)
    for key in out:
        if type(key) not in (AttrKey, IndexKey, DictKey):
            raw: object = key  # a raw key: anything but the three key types
            text = safe_repr(raw)
            wrap = (
                f"IndexKey({text}) or DictKey({text})" if type(raw) is int else f"DictKey({text})"
            )
            if isinstance(raw, str) and raw.isidentifier():
                wrap += f" or AttrKey({text})"
            raise StructureError(
                f"{op}: paths are tuples of AttrKey/IndexKey/DictKey or keystr strings like "
                f"'.layers[0].w'; got the element {short_repr(raw)}. Write the key as "
                f"{wrap}, or the whole path as a string."
            )
    return out


def _index(kind: NodeKind, aux: Any, n: int, key: Key) -> int | None:
    keys = kind.keys(aux, n)
    for i, k in enumerate(keys):
        if k == key:
            return i
    # `[0]` parses as IndexKey(0); on a mapping with int keys it means DictKey(0).
    if isinstance(key, IndexKey):
        for i, k in enumerate(keys):
            if isinstance(k, DictKey) and type(k.key) is int and k.key == key.idx:
                return i
    return None


def _descend(tree: Any, path: KeyPath, op: str) -> list[tuple[NodeKind, Any, Sequence[Any], int]]:
    """The nodes along ``path``: (kind, aux, children, index of the next child)."""
    steps = []
    node = tree
    for depth, key in enumerate(path):
        kind = kind_of(node)
        if kind is None:
            here = path[:depth]
            raise StructureError(
                f"{op}: cannot follow {keystr(path)!r}: {where(here)} is {label(node)}, "
                f"which has no children.",
                here,
            )
        kids, aux = kind.flatten(node)
        i = _index(kind, aux, len(kids), key)
        if i is None:
            here = path[:depth]
            present = ", ".join(str(k) for k in kind.keys(aux, len(kids))) or "none"
            raise StructureError(
                f"{op}: cannot follow {keystr(path)!r}: {kind.label} at {where(here)} "
                f"has no child {key}. Its children are: {present}.",
                here,
            )
        steps.append((kind, aux, kids, i))
        node = kids[i]
    return steps


def getpath(tree: Any, path: PathLike, /) -> Any:
    """Return the value at ``path`` (a tuple of keys, or the ``keystr`` form).

    Examples:
        >>> import containers as ct
        >>> tree = {"layers": [{"w": 1}, {"w": 2}]}
        >>> ct.getpath(tree, "['layers'][1]['w']")
        2
        >>> ct.getpath(tree, (ct.DictKey("layers"), ct.IndexKey(0)))
        {'w': 1}

    Raises:
        StructureError: The path leads through a leaf or a missing key (named).
    """
    keys = _as_path(path, "getpath")
    steps = _descend(tree, keys, "getpath")
    if not steps:
        return tree
    _, _, kids, i = steps[-1]
    return kids[i]


def haspath(tree: Any, path: PathLike, /) -> bool:
    """Whether ``path`` leads to a value in ``tree``.

    Examples:
        >>> import containers as ct
        >>> ct.haspath({"a": [1]}, "['a'][0]"), ct.haspath({"a": [1]}, "['a'][1]")
        (True, False)
    """
    keys = _as_path(path, "haspath")  # a malformed path is an error, not an absent one
    try:
        _descend(tree, keys, "haspath")
    except StructureError:
        return False
    return True


def setpath(tree: T, path: PathLike, value: Any, /) -> T:
    """Return a new tree with ``value`` at ``path``; only the nodes on the path are rebuilt.

    Examples:
        >>> import containers as ct
        >>> tree = {"a": [1, 2], "b": (3,)}
        >>> new = ct.setpath(tree, "['a'][1]", 20)
        >>> new, tree, new["b"] is tree["b"]
        ({'a': [1, 20], 'b': (3,)}, {'a': [1, 2], 'b': (3,)}, True)

    Raises:
        StructureError: The path leads through a leaf or a missing key (named).
    """
    steps = _descend(tree, _as_path(path, "setpath"), "setpath")
    for kind, aux, kids, i in reversed(steps):
        new = list(kids)
        new[i] = value
        value = kind.unflatten(aux, new)
    return value  # type: ignore[no-any-return]
