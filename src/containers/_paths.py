"""Keys and key paths: ``AttrKey``, ``IndexKey``, ``DictKey``, ``keystr`` and its parser.

This stage only names places in a tree; it knows nothing of node kinds, so it never
looks inside a tree (``getpath`` and friends live in ``_access``).
"""

from __future__ import annotations

import ast
import operator
import sys
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, TypeAlias

from containers._compiled import SPEEDUPS
from containers._errors import StructureError, safe_repr, short_repr

__all__ = [
    "AttrKey",
    "DictKey",
    "IndexKey",
    "Key",
    "KeyPath",
    "index_key",
    "index_keys",
    "keystr",
    "parse_keystr",
    "where",
]


class _PlainHashedKey:
    """The plain twin of ``_speedups.KeyHash``: a key whose hash is its ``_hash`` field,
    set once by its ``__init__`` (``AttrKey``, ``IndexKey``). The compiled base returns
    the field from C: a dict keyed by paths (``split``'s parts, ``merge``'s lookups)
    hashes every key of every path, and a Python ``__hash__`` is a call per key
    (benchmarks/split.py). The same hashes either way (tests/test_paths.py)."""

    __slots__ = ("_hash",)
    _hash: int

    def __hash__(self) -> int:
        return self._hash


#: The base of the hashed key classes: compiled where the extension is built.
if TYPE_CHECKING:
    _HashedKey = _PlainHashedKey
else:
    _HashedKey = _PlainHashedKey if SPEEDUPS is None else SPEEDUPS.KeyHash


class _OrderedKey:
    """What the three key classes share: an order, so that paths sort.

    JAX sorts the keys of every dict it flattens, so the parts of ``split`` and
    ``state`` (dicts keyed by paths) need paths that compare with ``<``. Keys order
    by kind (``AttrKey``, then ``IndexKey``, then ``DictKey``), then by raw value: by
    the value's own ``<`` among raw values of one type, else by type name and repr
    (never an error).
    """

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        if type(other) not in _KIND_RANK:
            return NotImplemented
        return _key_lt(self, other)

    def __gt__(self, other: object) -> bool:
        if type(other) not in _KIND_RANK:
            return NotImplemented
        return _key_lt(other, self)

    def __le__(self, other: object) -> bool:
        if type(other) not in _KIND_RANK:
            return NotImplemented
        return self == other or _key_lt(self, other)

    def __ge__(self, other: object) -> bool:
        if type(other) not in _KIND_RANK:
            return NotImplemented
        return self == other or _key_lt(other, self)


class AttrKey(_OrderedKey, _HashedKey):
    """The key of a named field: a container field or a namedtuple field.

    ``tags`` are the tags the field was declared with (``ct.field(tags=...)``); the
    keys of a declared container carry them, so that a path says which tagged fields
    it passes through (``filters.WithTag``). They are not part of the key: ``==``,
    ``hash`` and ``repr`` ignore them.

    Examples:
        >>> from containers import AttrKey, keystr
        >>> AttrKey("w")
        AttrKey('w')
        >>> keystr((AttrKey("layers"), AttrKey("w")))
        '.layers.w'
        >>> AttrKey("w", tags=("param",)) == AttrKey("w")
        True
    """

    __slots__ = ("name", "tags")
    name: str
    tags: tuple[str, ...]

    def __init__(self, name: str, tags: tuple[str, ...] = ()) -> None:
        if not isinstance(name, str):  # a file could not hold it, getpath not reach it
            raise TypeError(
                f"AttrKey: the name must be a str, got {type(name).__qualname__} "
                f"{short_repr(name)}."
            )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "tags", tags)
        object.__setattr__(self, "_hash", hash((AttrKey, name)))

    def __setattr__(self, attr: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is AttrKey and other.name == self.name

    # computed once (a field's keys are made once, by its spec) and returned by the
    # base (in C where compiled): a dict keyed by paths hashes every key of every path
    __hash__ = _HashedKey.__hash__

    def __repr__(self) -> str:
        return f"AttrKey({self.name!r})"

    def __str__(self) -> str:
        return f".{self.name}"

    def __reduce__(self) -> tuple[type[AttrKey], tuple[str] | tuple[str, tuple[str, ...]]]:
        return (AttrKey, (self.name, self.tags) if self.tags else (self.name,))

    @property
    def raw(self) -> str:
        """The field name (what ``PathContains`` and ``fmapstructure`` use)."""
        return self.name


class IndexKey(_OrderedKey, _HashedKey):
    """The key of a position in a tuple, list, deque or other sequence node.

    Examples:
        >>> from containers import IndexKey
        >>> IndexKey(2)
        IndexKey(2)
        >>> str(IndexKey(2))
        '[2]'
    """

    __slots__ = ("idx",)
    idx: int

    def __init__(self, idx: int) -> None:
        if type(idx) is not int:
            try:  # numpy integers and other ints: stored as the int they are
                idx = operator.index(idx)
            except TypeError:
                raise TypeError(
                    f"IndexKey: the index must be an int, got {type(idx).__qualname__} "
                    f"{short_repr(idx)}."
                ) from None
        object.__setattr__(self, "idx", idx)
        object.__setattr__(self, "_hash", hash((IndexKey, idx)))

    def __setattr__(self, attr: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is IndexKey and other.idx == self.idx

    __hash__ = _HashedKey.__hash__  # computed once, as AttrKey's

    def __repr__(self) -> str:
        return f"IndexKey({self.idx!r})"

    def __str__(self) -> str:
        return f"[{self.idx!r}]"

    def __reduce__(self) -> tuple[type[IndexKey], tuple[int]]:
        return (IndexKey, (self.idx,))

    @property
    def raw(self) -> int:
        """The position."""
        return self.idx


class DictKey(_OrderedKey):
    """The key of an entry in a dict, OrderedDict or defaultdict node.

    Examples:
        >>> from containers import DictKey
        >>> DictKey("a")
        DictKey('a')
        >>> str(DictKey("a"))
        "['a']"
    """

    __slots__ = ("key",)
    key: Hashable

    def __init__(self, key: Hashable) -> None:
        try:
            if type(key) is not str and type(key) is not int:  # the usual keys first
                hash(key)
        except TypeError:
            raise TypeError(
                f"DictKey: the key must be hashable, got {type(key).__qualname__} "
                f"{short_repr(key)}."
            ) from None
        object.__setattr__(self, "key", key)

    def __setattr__(self, attr: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is DictKey and type(other.key) is type(self.key) and other.key == self.key
        )

    def __hash__(self) -> int:
        return hash((DictKey, self.key))

    def __repr__(self) -> str:
        return f"DictKey({safe_repr(self.key)})"

    def __str__(self) -> str:
        # repr inline first: save names every array by its path, and a call here
        # would add 9 ms to the "many" save (benchmarks/serialization.py, 100,000 keys)
        try:
            return f"[{self.key!r}]"
        except ValueError:  # an int too long to print
            return f"[{safe_repr(self.key)}]"

    def __reduce__(self) -> tuple[type[DictKey], tuple[Hashable]]:
        return (DictKey, (self.key,))

    @property
    def raw(self) -> Hashable:
        """The mapping key."""
        return self.key


Key: TypeAlias = AttrKey | IndexKey | DictKey
KeyPath: TypeAlias = tuple[Key, ...]

_KIND_RANK: dict[type, int] = {AttrKey: 0, IndexKey: 1, DictKey: 2}


def _key_lt(a: object, b: object) -> bool:
    """``a < b`` for two keys."""
    rank_a, rank_b = _KIND_RANK[type(a)], _KIND_RANK[type(b)]
    if rank_a != rank_b:
        return rank_a < rank_b
    x, y = a.raw, b.raw  # type: ignore[attr-defined]
    if type(x) is type(y):
        try:
            return bool(x < y)
        except Exception:  # raw values of a type without an order
            pass
    return (type(x).__name__, safe_repr(x)) < (type(y).__name__, safe_repr(y))


# Paths are built for every leaf by the path variants; sharing the small index keys
# saves an allocation per child (benchmarks/run.py, flatten_with_path).
_INDEX_KEYS = tuple(IndexKey(i) for i in range(256))


def index_key(i: int) -> IndexKey:
    """Return the (shared, for small ``i``) ``IndexKey(i)``."""
    return _INDEX_KEYS[i] if i < 256 else IndexKey(i)


def index_keys(n: int) -> tuple[IndexKey, ...]:
    """Return ``(IndexKey(0), ..., IndexKey(n - 1))``, shared for small ``n``."""
    if n <= 256:
        return _INDEX_KEYS[:n]
    # The keys past 256 are made in loops in C: allocated without __init__, then their
    # slot written by its member descriptor (which IndexKey.__setattr__ does not stop);
    # 1.7x faster than calling IndexKey (benchmarks/split.py, 100k leaves).
    # The last long tuple is kept: a list of layers has the same length at each split.
    last = _LAST_INDEX_KEYS[0]  # one read: another thread may replace it
    if last[0] == n:
        return last[1]
    more = list(map(_new, repeat(IndexKey, n - 256)))
    deque(map(_set_idx, more, range(256, n)), 0)
    deque(map(_set_hash, more, map(hash, zip(repeat(IndexKey), range(256, n)))), 0)
    keys = (*_INDEX_KEYS, *more)
    _LAST_INDEX_KEYS[0] = (n, keys)
    return keys


_new = object.__new__
_set_idx = IndexKey.__dict__["idx"].__set__
_set_hash = _HashedKey.__dict__["_hash"].__set__
_LAST_INDEX_KEYS: list[tuple[int, tuple[IndexKey, ...]]] = [(0, ())]


def keystr(path: Sequence[Key]) -> str:
    """Render a key path as the Python expression that reaches it from the root.

    The root itself is the empty path and renders as ``''``.

    Examples:
        >>> from containers import AttrKey, DictKey, IndexKey, keystr
        >>> keystr((AttrKey("layers"), IndexKey(2), AttrKey("w")))
        '.layers[2].w'
        >>> keystr((DictKey("a"), IndexKey(0)))
        "['a'][0]"
        >>> keystr(())
        ''

    Args:
        path: A tuple of keys, as ``flatten_with_path`` gives.

    Returns:
        The rendered path.

    Raises:
        StructureError: An element of ``path`` is not a key.
    """
    parts = []
    for key in path:
        if type(key) not in (AttrKey, IndexKey, DictKey):
            raise StructureError(
                f"keystr: {key!r} is not a key. Paths are tuples of AttrKey, IndexKey "
                f"and DictKey, as flatten_with_path gives them."
            )
        parts.append(str(key))
    return "".join(parts)


def where(path: Sequence[Key]) -> str:
    """Render a path for an error message: ``'.a[0]'`` or ``'the root'``.

    Paths in very deep trees are shortened to their ends and their depth.
    """
    if not path:
        return "the root"
    return shorten(len(path), lambda start, stop: keystr(path[start:stop]), repr)


#: Paths deeper than this many keys are shown in messages by their ends (``shorten``).
LONG_PATH = 40
#: The keys shown at each end of a path deeper than ``LONG_PATH``.
PATH_END = 12


def shorten(
    depth: int, keys_text: Callable[[int, int], str], quote: Callable[[str], str] = str
) -> str:
    """A path of ``depth`` keys as messages show it, ``keys_text(start, stop)``
    rendering its keys ``start:stop``: whole up to ``LONG_PATH`` keys, else its first
    and last ``PATH_END`` keys and the depth, so that a message about a node of a deep
    tree costs time that does not grow with the depth. The one rule for every path
    shown (``where``; the file decoder's paths of records and rows)."""
    if depth <= LONG_PATH:
        return quote(keys_text(0, depth))
    ends = keys_text(0, PATH_END) + "..." + keys_text(depth - PATH_END, depth)
    return f"{quote(ends)} (depth {depth})"


def parse_keystr(text: str) -> KeyPath:
    """Parse the ``keystr`` form back into keys.

    ``[...]`` holding an int becomes an ``IndexKey``, anything else a ``DictKey``;
    lookups accept an ``IndexKey`` on a mapping with int keys as well.
    """
    keys: list[Key] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == ".":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            name = text[i + 1 : j]
            if not name.isidentifier():
                raise StructureError(_bad_keystr(text, i, "expected a field name after '.'"))
            keys.append(AttrKey(name))
            i = j
        elif ch == "[":
            j = _closing_bracket(text, i)
            inner = text[i + 1 : j]
            digits = inner[1:] if inner[:1] == "-" else inner
            limit = _max_int_digits()
            if digits.isascii() and digits.isdigit() and 0 < limit < len(digits):
                raise StructureError(
                    _bad_keystr(
                        text,
                        i,
                        f"the number in [...] has {len(digits)} digits, more than Python "
                        f"converts to int (sys.get_int_max_str_digits() is {limit})",
                    )
                )
            if inner.isascii() and inner.isdigit():  # the common case, without the parser
                keys.append(IndexKey(int(inner)))
                i = j + 1
                continue
            try:
                value: Any = _literal(inner)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                # ValueError: also an int literal past sys.get_int_max_str_digits()
                raise StructureError(
                    _bad_keystr(text, i, "the text in [...] is not a Python literal")
                ) from None
            keys.append(IndexKey(value) if type(value) is int else DictKey(value))
            i = j + 1
        else:
            raise StructureError(_bad_keystr(text, i, "expected '.' or '['"))
    return tuple(keys)


def _literal(text: str) -> Any:
    """``ast.literal_eval(text)``, also reading ``inf`` and ``nan`` as floats, which is
    how ``repr`` (and so ``keystr``) shows the float keys Python has no literal for."""
    try:
        return ast.literal_eval(text)
    except ValueError:
        return ast.literal_eval(_NonFiniteFloats().visit(ast.parse(text, mode="eval")))


class _NonFiniteFloats(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Constant(float(node.id)) if node.id in ("inf", "nan") else node


def _closing_bracket(text: str, start: int) -> int:
    quote = None
    depth = 0
    escaped = False
    for j in range(start, len(text)):
        ch = text[j]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return j
    raise StructureError(_bad_keystr(text, start, "this '[' is never closed"))


def _max_int_digits() -> int:
    """The longest decimal string ``int()`` converts here (0: no limit, as before 3.11)."""
    get = getattr(sys, "get_int_max_str_digits", None)
    return int(get()) if get is not None else 0


#: How much of a malformed key path an error message quotes.
_QUOTED = 80


def _bad_keystr(text: str, pos: int, what: str) -> str:
    shown = (
        repr(text) if len(text) <= _QUOTED else f"{text[:_QUOTED]!r}... ({len(text)} characters)"
    )
    return (
        f"cannot parse key path {shown} at position {pos}: {what}. Write paths as "
        f'keystr renders them, e.g. ".layers[2].w" or "[\'a\'][0]".'
    )
