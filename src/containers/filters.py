"""Filters: predicates ``(path, value) -> bool`` that pick leaves (Flax NNX's filter language).

A filter says which leaves of a tree an operation takes: ``split``, ``state``,
``partition``, ``fmap(..., where=)`` and ``leaves(..., where=)`` all accept one. Any
callable ``(path, value) -> bool`` is a filter; so are the shorthands that
``to_predicate`` converts:

| filter                | predicate                                                        |
|-----------------------|------------------------------------------------------------------|
| a type ``t``          | ``OfType(t)``: ``isinstance(value, t)``                          |
| a str ``s``           | ``WithTag(s)``: a field tagged ``s`` on the path, or ``value.tag == s`` |
| ``...`` or ``True``   | ``Everything()``                                                 |
| ``None`` or ``False`` | ``Nothing()``                                                    |
| a list or tuple       | ``Any(*elements)`` (each element converted)                      |
| any other callable    | itself                                                           |

Only the real ``True``, ``False`` and ``...`` are shorthands: ``1`` or ``0`` raise
``FilterError`` (a ``TypeError``), like every other value that is not a filter. Every predicate here is
immutable, hashable, compares by value and has a repr that reads like its
construction.

Examples:
    >>> import numpy as np
    >>> import containers as ct
    >>> from containers.filters import All, Not, OfType, PathContains, to_predicate
    >>> to_predicate((np.ndarray, "param"))
    Any(OfType(numpy.ndarray), WithTag('param'))
    >>> is_bias = All(OfType(np.ndarray), PathContains("b"))
    >>> is_bias((ct.AttrKey("b"),), np.zeros(3)), is_bias((ct.AttrKey("w"),), np.zeros(3))
    (True, False)
    >>> Not(is_bias)
    Not(All(OfType(numpy.ndarray), PathContains('b')))
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from fnmatch import fnmatchcase
from types import EllipsisType
from typing import Any as _Any
from typing import TypeAlias, Union

from containers._errors import ContainersError
from containers._paths import AttrKey, DictKey, IndexKey, KeyPath

__all__ = [
    "All",
    "Any",
    "Everything",
    "Filter",
    "FilterError",
    "NoMatchWarning",
    "Not",
    "Nothing",
    "OfType",
    "PathContains",
    "PathPattern",
    "Predicate",
    "WithTag",
    "to_predicate",
]

Predicate: TypeAlias = Callable[[KeyPath, _Any], bool]
"""A predicate: called with a leaf's key path and the leaf, says whether it matches."""

Filter: TypeAlias = Union[
    type,
    str,
    bool,
    EllipsisType,
    Callable[[KeyPath, _Any], bool],
    "list[Filter]",
    "tuple[Filter, ...]",
    None,
]
"""What every filter argument accepts: a predicate, or a shorthand that ``to_predicate``
converts (a type, a tag, ``...``/``True``, ``None``/``False``, a list or tuple of filters)."""


class FilterError(ContainersError, TypeError):
    """A value given as a filter is not one (also a ``TypeError``)."""


class NoMatchWarning(UserWarning):
    """A filter given to ``split``, ``state`` or ``partition`` selects nothing: a tag
    declared nowhere in the tree, or a path filter that matches no path. Silence it
    with ``warnings.filterwarnings("ignore", category=NoMatchWarning)``."""


class _Predicate:
    """The shared machinery: immutable, compared and hashed by (class, arguments)."""

    __slots__ = ("_args",)
    _args: tuple[_Any, ...]

    def __init__(self, *args: _Any) -> None:
        object.__setattr__(self, "_args", args)

    def __setattr__(self, attr: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __call__(self, path: KeyPath, value: _Any, /) -> bool:
        raise NotImplementedError  # pragma: no cover - every subclass defines it

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._args == other._args

    def __hash__(self) -> int:
        return hash((type(self), self._args))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(_show, self._args))})"

    def __reduce__(self) -> tuple[type[_Predicate], tuple[_Any, ...]]:
        return (type(self), self._args)


def _show(arg: _Any) -> str:
    if isinstance(arg, type):
        module = arg.__module__
        return arg.__qualname__ if module == "builtins" else f"{module}.{arg.__qualname__}"
    return repr(arg)


class OfType(_Predicate):
    """Match values that are instances of ``type`` (``isinstance``).

    Examples:
        >>> import numpy as np
        >>> from containers.filters import OfType
        >>> OfType(np.ndarray)((), np.zeros(2)), OfType(np.ndarray)((), 2.0)
        (True, False)
        >>> OfType(int) == OfType(int), OfType(int)
        (True, OfType(int))
    """

    __slots__ = ()

    def __init__(self, cls: type, /) -> None:
        if not isinstance(cls, type):
            raise FilterError(f"OfType takes a class, got {cls!r}. Write OfType(np.ndarray).")
        super().__init__(cls)

    @property
    def type(self) -> type:
        """The class matched."""
        return self._args[0]  # type: ignore[no-any-return]

    def __call__(self, path: KeyPath, value: _Any, /) -> bool:
        return isinstance(value, self._args[0])


class WithTag(_Predicate):
    """Match leaves under a field declared with ``tag``, and values whose ``tag`` is ``tag``.

    A field declared ``ct.field(tags=("param",))`` tags everything below it, at any
    depth: the keys of a declared container's fields carry their tags, so the path of a
    leaf says which tagged fields it is under. A value with a ``tag`` attribute equal to
    ``tag`` matches too (Flax NNX's ``WithTag``).

    Examples:
        >>> import numpy as np
        >>> import containers as ct
        >>> from containers.filters import WithTag
        >>> @ct.container
        ... class Norm:
        ...     scale: list = ct.field(tags=("param",))
        ...     mean: float = 0.0
        >>> [ct.keystr(p) for p, v in ct.leaves_with_path(Norm([1.0, 2.0])) if WithTag("param")(p, v)]
        ['.scale[0]', '.scale[1]']
    """

    __slots__ = ()

    def __init__(self, tag: str, /) -> None:
        if not isinstance(tag, str):
            raise FilterError(f"WithTag takes a str, got {tag!r}.")
        super().__init__(tag)

    @property
    def tag(self) -> str:
        """The tag matched."""
        return self._args[0]  # type: ignore[no-any-return]

    def __call__(self, path: KeyPath, value: _Any, /) -> bool:
        tag = self._args[0]
        for key in path:
            if type(key) is AttrKey and tag in key.tags:
                return True
        own = getattr(value, "tag", None)
        return isinstance(own, str) and own == tag


class PathContains(_Predicate):
    """Match leaves whose path contains ``key``: a field name, an index or a dict key.

    A raw ``key`` matches a path key whose raw value (``AttrKey("w")`` has ``"w"``,
    ``IndexKey(0)`` has ``0``) has the same type and is equal, so ``0`` does not match
    ``False`` or ``0.0``; a key object (``AttrKey``, ``IndexKey``, ``DictKey``) is
    compared as a key.

    Examples:
        >>> import containers as ct
        >>> from containers.filters import PathContains
        >>> pairs = ct.leaves_with_path({"enc": [1, 2], "dec": [3]})
        >>> [v for p, v in pairs if PathContains("enc")(p, v)]
        [1, 2]
        >>> [v for p, v in pairs if PathContains(0)(p, v)]
        [3, 1]
    """

    __slots__ = ()

    def __init__(self, key: Hashable, /) -> None:
        try:
            hash(key)  # a key that cannot be hashed is no key: an error now, not later
        except TypeError:
            raise FilterError(
                f"PathContains takes a key (a field name, an index or a dict key), got "
                f"{key!r} of type {type(key).__name__}, which is not hashable, so no "
                f"path can contain it. Pass a field name, an index or a dict key."
            ) from None
        super().__init__(key)

    @property
    def key(self) -> Hashable:
        """The key looked for."""
        return self._args[0]  # type: ignore[no-any-return]

    def __call__(self, path: KeyPath, value: _Any, /) -> bool:
        key = self._args[0]
        if type(key) in (AttrKey, IndexKey, DictKey):
            return key in path
        kt = type(key)
        for k in path:
            raw = k.raw
            if type(raw) is kt and raw == key:
                return True
        return False


_SEGMENT = re.compile(
    r"""\.(?P<many>\*\*)(?![\w*?])"""  # .**: any number of keys
    r"""|\.(?P<name>[\w*?]+)"""  # .name, .w*, .*
    r"""|\[(?P<index>-?\d+)\]"""  # [0], [-1]
    r"""|\[(?P<star>\*)\]"""  # [*]: any index or dict key
    r"""|\[(?P<quote>['"])(?P<key>(?:(?!(?P=quote)).)*)(?P=quote)\]"""  # ['key'], ["k*"]
)


class PathPattern(_Predicate):
    """Match leaves whose path starts with keys that match a glob-like pattern.

    The pattern is written as ``keystr`` writes paths: ``.name`` a field (``*`` and
    ``?`` glob inside names: ``.w*``), ``[i]`` an index, counting from the end when
    negative (``[-1]`` is the last element, known from the tree the filter is used on),
    ``['key']`` a dict key (globs too), ``[*]`` any index or dict key, ``.*`` any one
    key and ``.**`` any number of keys. A pattern matches a leaf when it matches the
    start of its path, so ``".layers[-1]"`` selects every leaf of the last layer.
    Negative indices need the tree: they work in ``split``, ``state``, ``partition``,
    ``leaves(where=)`` and ``fmap(where=)`` (also inside ``Any``/``All``/``Not``).

    Examples:
        >>> import containers as ct
        >>> from containers.filters import PathPattern
        >>> model = {"layers": [{"w": 1, "b": 2}, {"w": 3, "b": 4}]}
        >>> {ct.keystr(p): v for p, v in ct.state(model, PathPattern("['layers'][-1]")).items()}
        {"['layers'][1]['b']": 4, "['layers'][1]['w']": 3}
        >>> ct.leaves(model, where=PathPattern("['layers'][*]['w']"))
        [1, 3]

    Raises:
        FilterError: the pattern is not one (the message shows where).
    """

    __slots__ = ("_lengths", "_segments")
    _segments: tuple[tuple[str, _Any], ...]
    _lengths: dict[KeyPath, int] | None

    def __init__(self, pattern: str, /) -> None:
        if not isinstance(pattern, str):
            raise FilterError(f"PathPattern takes a str, got {pattern!r}.")
        segments: list[tuple[str, _Any]] = []
        pos = 0
        while pos < len(pattern):
            m = _SEGMENT.match(pattern, pos)
            if m is None:
                raise FilterError(
                    f"PathPattern {pattern!r}: cannot read it at position {pos} "
                    f"({pattern[pos : pos + 10]!r}). Write it as keystr writes paths: "
                    f".name, [0], [-1], ['key'], [*], .* or .**."
                )
            if m["many"]:
                segments.append(("many", None))
            elif m["name"] is not None:
                name = m["name"]
                segments.append(("any", None) if name == "*" else ("name", name))
            elif m["index"] is not None:
                segments.append(("index", int(m["index"])))
            elif m["star"]:
                segments.append(("item", None))
            else:
                segments.append(("key", m["key"]))
            pos = m.end()
        super().__init__(pattern)
        object.__setattr__(self, "_segments", tuple(segments))
        object.__setattr__(self, "_lengths", None)

    @property
    def pattern(self) -> str:
        """The pattern."""
        return self._args[0]  # type: ignore[no-any-return]

    def needs_tree(self) -> bool:
        """Whether the pattern has a negative index (``bind`` must give the lengths)."""
        return any(kind == "index" and arg < 0 for kind, arg in self._segments)

    def bind(self, paths: _Any) -> PathPattern:
        """This pattern with the lengths of the sequences of a tree's ``paths`` known,
        for its negative indices (an index is one past the largest seen there)."""
        if not self.needs_tree():
            return self
        lengths: dict[KeyPath, int] = {}
        for path in paths:
            for d, key in enumerate(path):
                if type(key) is IndexKey:
                    prefix = tuple(path[:d])
                    if key.idx >= lengths.get(prefix, 0):
                        lengths[prefix] = key.idx + 1
        bound = PathPattern(self.pattern)
        object.__setattr__(bound, "_lengths", lengths)
        return bound

    def _step(self, i: int, key: _Any, path: KeyPath, d: int) -> bool:
        """Whether segment ``i`` matches ``key``, the ``d``-th key of ``path``."""
        kind, arg = self._segments[i]
        if kind == "any":
            return True
        if kind == "name":
            return type(key) is AttrKey and fnmatchcase(key.name, arg)
        if kind == "item":
            return type(key) is not AttrKey
        if kind == "key":
            return type(key) is DictKey and type(key.raw) is str and fnmatchcase(key.raw, arg)
        raw = key.raw
        if type(key) is AttrKey or type(raw) is not int:
            return False
        if arg >= 0:
            return raw == arg  # type: ignore[no-any-return]
        if self._lengths is None:
            raise FilterError(
                f"PathPattern({self.pattern!r}): a negative index counts from the end of "
                f"a sequence, which only the tree knows: use the pattern in split, state, "
                f"partition, leaves(where=) or fmap(where=), or write the index from the start."
            )
        n = self._lengths.get(tuple(path[:d]))
        return n is not None and raw == n + arg

    def __call__(self, path: KeyPath, value: _Any, /) -> bool:
        segments = self._segments
        end = len(segments)
        states = self._closure({0})
        for d, key in enumerate(path):
            if end in states:
                return True
            nxt: set[int] = set()
            for i in states:
                if i == end:
                    continue
                if segments[i][0] == "many":
                    nxt.add(i)  # ** takes this key and stays
                elif self._step(i, key, path, d):
                    nxt.add(i + 1)
            states = self._closure(nxt)
            if not states:
                return False
        return end in states

    def _closure(self, states: set[int]) -> set[int]:
        """``states`` and the positions after each ``**`` reached (it may take no key)."""
        out = set(states)
        todo = list(states)
        while todo:
            i = todo.pop()
            if i < len(self._segments) and self._segments[i][0] == "many" and i + 1 not in out:
                out.add(i + 1)
                todo.append(i + 1)
        return out


def bind(pred: _Any, paths: _Any) -> _Any:
    """``pred`` with every ``PathPattern`` in it (also inside ``Any``/``All``/``Not``)
    bound to a tree's ``paths``, for negative indices; ``paths`` is called lazily."""
    if type(pred) is PathPattern:
        return pred.bind(paths()) if pred.needs_tree() else pred
    if type(pred) in (Any, All):
        args = [bind(p, paths) for p in pred._args]
        if all(a is b for a, b in zip(args, pred._args)):
            return pred
        return type(pred)(*args)
    if type(pred) is Not:
        inner = bind(pred._args[0], paths)
        return pred if inner is pred._args[0] else Not(inner)
    return pred


class Any(_Predicate):
    """Match values that match any of ``filters`` (none given: nothing matches).

    Examples:
        >>> from containers.filters import Any
        >>> Any(int, "param")
        Any(OfType(int), WithTag('param'))
        >>> Any(int, str)((), "s"), Any()((), 1)
        (True, False)
    """

    __slots__ = ()

    def __init__(self, *filters: Filter) -> None:
        super().__init__(*map(to_predicate, filters))

    @property
    def filters(self) -> tuple[Predicate, ...]:
        """The predicates, converted."""
        return self._args

    def __call__(self, path: KeyPath, value: _Any, /) -> bool:
        return any(p(path, value) for p in self._args)


class All(_Predicate):
    """Match values that match all of ``filters`` (none given: everything matches).

    Examples:
        >>> from containers.filters import All
        >>> All(int, lambda p, v: v > 0)((), 3), All(int, lambda p, v: v > 0)((), -3)
        (True, False)
    """

    __slots__ = ()

    def __init__(self, *filters: Filter) -> None:
        super().__init__(*map(to_predicate, filters))

    @property
    def filters(self) -> tuple[Predicate, ...]:
        """The predicates, converted."""
        return self._args

    def __call__(self, path: KeyPath, value: _Any, /) -> bool:
        return all(p(path, value) for p in self._args)


class Not(_Predicate):
    """Match values that do not match ``filter``.

    Examples:
        >>> from containers.filters import Not
        >>> Not(str)((), 1), Not(str)((), "s")
        (True, False)
        >>> Not("param")
        Not(WithTag('param'))
    """

    __slots__ = ()

    def __init__(self, filter: Filter, /) -> None:
        super().__init__(to_predicate(filter))

    @property
    def filter(self) -> Predicate:
        """The predicate negated, converted."""
        return self._args[0]  # type: ignore[no-any-return]

    def __call__(self, path: KeyPath, value: _Any, /) -> bool:
        return not self._args[0](path, value)


class Everything(_Predicate):
    """Match everything (what ``...`` and ``True`` stand for).

    Examples:
        >>> from containers.filters import Everything
        >>> Everything()((), 1), Everything() == Everything()
        (True, True)
    """

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__()

    def __call__(self, path: KeyPath, value: _Any, /) -> bool:
        return True


class Nothing(_Predicate):
    """Match nothing (what ``None`` and ``False`` stand for).

    Examples:
        >>> from containers.filters import Nothing
        >>> Nothing()((), 1)
        False
    """

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__()

    def __call__(self, path: KeyPath, value: _Any, /) -> bool:
        return False


_EVERYTHING = Everything()
_NOTHING = Nothing()


def to_predicate(filter: Filter, /) -> Predicate:
    """Convert a filter to its predicate ``(path, value) -> bool``.

    A type becomes ``OfType``, a str ``WithTag``, ``...`` and ``True`` become
    ``Everything()``, ``None`` and ``False`` ``Nothing()``, a list or tuple ``Any`` of
    its converted elements; any other callable is returned as it is.

    Examples:
        >>> from containers.filters import to_predicate
        >>> to_predicate(...), to_predicate(None), to_predicate(["param", float])
        (Everything(), Nothing(), Any(WithTag('param'), OfType(float)))
        >>> to_predicate(1)
        Traceback (most recent call last):
        ...
        containers.filters.FilterError: 1 (an int) is not a filter. A filter is a type, a tag (str), ..., True, False, None, a list or tuple of filters, or a callable (path, value) -> bool.

    Args:
        filter: The filter.

    Returns:
        The predicate.

    Raises:
        FilterError: ``filter`` is none of the forms above (a ``TypeError``).
    """
    if filter is ... or filter is True:
        return _EVERYTHING
    if filter is None or filter is False:
        return _NOTHING
    if isinstance(filter, str):
        return WithTag(filter)
    if isinstance(filter, type):
        return OfType(filter)
    if isinstance(filter, (list, tuple)):
        return Any(*filter)
    if callable(filter):
        return filter
    raise FilterError(
        f"{filter!r} (a{'n' if type(filter).__name__[0] in 'aeiou' else ''} "
        f"{type(filter).__name__}) is not a filter. A filter is a type, a tag (str), "
        f"..., True, False, None, a list or tuple of filters, or a callable "
        f"(path, value) -> bool."
    )
