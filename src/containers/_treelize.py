"""treelize (treevalue's func_treelize), subside and rise: lift a function on leaves.

A thin operation over the engine: ``map_tree`` walks the arguments with ``_Align``, an
alignment mode that decides, at each position, which keys the tree arguments share and
how the result node is built. It never recurses itself; the engine's acceleration for
two plain dict trees (``_engine._pair``) hands every other node to ``map_tree``, and
``map_tree`` again finds any error with its full path.
"""

from __future__ import annotations

import enum
import functools
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Sequence
from typing import Any, cast

from containers._engine._core import Align, map_tree
from containers._engine._pair import fast_pair
from containers._errors import (
    ContainerDefinitionError,
    StructureError,
    StructureKeyError,
    StructureTypeError,
    not_callable_error,
)
from containers._paths import DictKey, Key, KeyPath, index_keys, where
from containers._registry import (
    DEFAULT_DICT,
    DEQUE,
    DICT,
    IMMUTABLE_LEAVES,
    LEAF_TYPES,
    LIST,
    ORDERED_DICT,
    TUPLE,
    distinct_labels,
    kind_of,
)

__all__ = ["MODES", "NOT_ALLOWED", "rise", "subside", "treelize"]

#: The alignment modes, by their lower-case names.
MODES = ("strict", "inner", "outer", "left")


class _NotAllowed(enum.Enum):
    NOT_ALLOWED = "NOT_ALLOWED"

    def __repr__(self) -> str:
        return "<not allowed>"


#: ``missing``'s default: an absent key is an error.
NOT_ALLOWED = _NotAllowed.NOT_ALLOWED


class _Absent(enum.Enum):
    ABSENT = "ABSENT"

    def __repr__(self) -> str:
        return "<absent>"


#: The placeholder for an argument that has no value at a position (outer and left
#: modes). It travels down like an inherited leaf; the leaf call replaces it with a
#: fresh ``missing`` value, so a factory runs once per leaf.
_ABSENT = _Absent.ABSENT

_SEQUENCES = (TUPLE, LIST, DEQUE)
_MAPPINGS = (DICT, ORDERED_DICT, DEFAULT_DICT)


def _rebuild_mapping(lead: Any, items: Any) -> Any:
    """A mapping of ``lead``'s builtin type (dict, OrderedDict, defaultdict) with
    ``items``, in their order: the lead's default_factory is kept."""
    if type(lead) is defaultdict:
        return defaultdict(lead.default_factory, items)
    if type(lead) is OrderedDict:
        return OrderedDict(items)
    return dict(items)


def _keys_text(keys: Sequence[Any]) -> str:
    return ", ".join(repr(k) for k in keys) if keys else "no keys"


class _DictKeys:
    """The ``DictKey`` of each key, made only when a path is needed (an error)."""

    __slots__ = ("keys",)

    def __init__(self, keys: Sequence[Any]) -> None:
        self.keys = keys

    def __getitem__(self, i: int) -> Key:
        return DictKey(self.keys[i])

    def __len__(self) -> int:
        return len(self.keys)


class _Align(Align):
    """treelize's alignment: the four modes over dicts, sequences and fixed nodes.

    Mappings (dict, OrderedDict, defaultdict) align by key in first-appearance order;
    sequences (tuple, list, deque) by position: ``inner`` keeps the shortest common
    prefix, ``outer`` the longest with ``missing``; every other node (declared
    containers, namedtuples, ``register_node`` and protocol types, ``None``) has a
    fixed set of children, so its keys must be equal in every mode.
    """

    __slots__ = ("allow_missing", "inherit", "mode", "names", "op")

    def __init__(
        self, mode: str, inherit: bool, allow_missing: bool, names: Sequence[str], op: str
    ) -> None:
        self.mode = mode
        self.inherit = inherit
        self.allow_missing = allow_missing
        self.names = names
        self.op = op

    def node(
        self, first: Any, rest: Sequence[Any], path: Callable[[], KeyPath]
    ) -> tuple[Any, Sequence[Any], Any, list[Sequence[Any]], Sequence[Key]] | None:
        leaf_types = LEAF_TYPES
        if type(first) in leaf_types:  # the common case, without a kind_of per value
            for v in rest:
                if type(v) not in leaf_types:
                    break
            else:
                return None
        values = (first, *rest)
        kinds = []
        lead_i = -1
        for i, v in enumerate(values):
            kind = None
            if v is not _ABSENT:
                try:
                    kind = kind_of(v)
                except ContainerDefinitionError as err:
                    raise ContainerDefinitionError(
                        f"{self.op}: at {where(path())}: {err}"
                    ) from None
                if kind is not None and lead_i < 0:
                    lead_i = i
            kinds.append(kind)
        if lead_i < 0:
            return None
        lead = values[lead_i]
        lead_kind: Any = kinds[lead_i]
        nodes = []  # indexes of the arguments that have a node here
        for i, (v, kind) in enumerate(zip(values, kinds)):
            if kind is None:
                if v is not _ABSENT and not self.inherit:
                    raise self._leaf_error(i, lead_i, v, lead_kind, path())
            elif kind is not lead_kind:
                theirs, mine = distinct_labels(
                    lead_kind.label, lead_kind.type, kind.label, kind.type
                )
                raise StructureError(
                    f"{self.op}: the tree arguments differ at {where(path())}: "
                    f"{self.names[lead_i]} has {theirs} there, {self.names[i]} "
                    f"has {mine}. Aligned nodes must be of the same kind: convert "
                    f"one of them, or pass a leaf there to broadcast it.",
                    path(),
                )
            else:
                nodes.append(i)
        if lead_kind in _MAPPINGS:
            return self._mapping(values, nodes, lead, path)
        if lead_kind in _SEQUENCES:
            return self._sequence(values, nodes, lead, lead_kind, path)
        return self._fixed(values, nodes, lead, lead_kind, path)

    # -- the three families of nodes ---------------------------------------------------

    def _mapping(
        self, values: Sequence[Any], nodes: list[int], lead: Any, path: Callable[[], KeyPath]
    ) -> tuple[Any, Sequence[Any], Any, list[Sequence[Any]], Sequence[Key]]:
        lead_i = nodes[0]
        others = [values[i] for i in nodes[1:]]
        mode = self.mode
        if mode == "strict":
            for j, other in zip(nodes[1:], others):
                if len(other) != len(lead) or any(k not in other for k in lead):
                    raise self._strict_error(lead_i, j, list(lead), list(other), path())
            keys: list[Any] = list(lead)
        elif mode == "inner":
            keys = [k for k in lead if all(k in other for other in others)]
        elif mode == "outer":
            seen = dict.fromkeys(lead)
            for other in others:
                seen.update(dict.fromkeys(other))
            keys = list(seen)
        else:
            keys = list(lead)
        columns: list[Sequence[Any]] = []
        for i, v in enumerate(values):
            if i not in nodes:  # a leaf or an absent value: the same below every key
                columns.append([v] * len(keys))
            elif mode in {"strict", "inner"} or (mode == "left" and i == lead_i):
                columns.append([v[k] for k in keys])
            else:
                columns.append(self._read_keys(i, v, keys, path))
        return (
            lead,
            columns[0],
            (None, (lead, keys)),
            columns[1:],
            cast("Sequence[Key]", _DictKeys(keys)),
        )

    def _read_keys(
        self, i: int, v: Any, keys: Sequence[Any], path: Callable[[], KeyPath]
    ) -> list[Any]:
        out = []
        for k in keys:
            if k in v:
                out.append(v[k])
            elif self.allow_missing:
                out.append(_ABSENT)
            else:
                raise self._missing_error(i, repr(k), path())
        return out

    def _sequence(
        self,
        values: Sequence[Any],
        nodes: list[int],
        lead: Any,
        kind: Any,
        path: Callable[[], KeyPath],
    ) -> tuple[Any, Sequence[Any], Any, list[Sequence[Any]], Sequence[Key]]:
        seqs = {i: list(values[i]) if kind is DEQUE else values[i] for i in nodes}
        lengths = [len(s) for s in seqs.values()]
        mode = self.mode
        lead_i = nodes[0]
        if mode == "strict":
            for j in nodes[1:]:
                if len(seqs[j]) != len(seqs[lead_i]):
                    raise self._strict_error(
                        lead_i, j, range(len(seqs[lead_i])), range(len(seqs[j])), path()
                    )
            n = lengths[0]
        elif mode == "inner":
            n = min(lengths)
        elif mode == "outer":
            n = max(lengths)
        else:
            n = lengths[0]
        columns: list[Sequence[Any]] = []
        for i, v in enumerate(values):
            s = seqs.get(i)
            if s is None:
                columns.append([v] * n)
            elif len(s) >= n:
                columns.append(s[:n] if len(s) > n else s)
            elif self.allow_missing:
                columns.append([*s, *[_ABSENT] * (n - len(s))])
            else:
                raise self._missing_error(i, f"position {len(s)}", path())
        aux = (kind, kind.flatten(lead)[1])
        return lead, columns[0], aux, columns[1:], index_keys(n)

    def _fixed(
        self,
        values: Sequence[Any],
        nodes: list[int],
        lead: Any,
        kind: Any,
        path: Callable[[], KeyPath],
    ) -> tuple[Any, Sequence[Any], Any, list[Sequence[Any]], Sequence[Key]]:
        kids, aux = kind.flatten(lead)
        keys = kind.keys(aux, len(kids))
        flat = {nodes[0]: kids}
        for j in nodes[1:]:
            kids_j, aux_j = kind.flatten(values[j])
            keys_j = kind.keys(aux_j, len(kids_j))
            if keys_j != keys:
                raise self._strict_error(
                    nodes[0],
                    j,
                    [k.raw for k in keys],
                    [k.raw for k in keys_j],
                    path(),
                    fixed=kind.label,
                )
            flat[j] = kids_j
        n = len(keys)
        columns = [flat[i] if i in flat else [v] * n for i, v in enumerate(values)]
        return lead, columns[0], (kind, aux), columns[1:], keys

    def unflatten(self, aux: Any, children: Sequence[Any]) -> Any:
        """Build the result node: the lead's type, kept fields and reset semantics."""
        kind, rest = aux
        if kind is None:  # a mapping: rest is (lead, keys)
            return _rebuild_mapping(rest[0], zip(rest[1], children))
        return kind.unflatten(rest, children)

    # -- errors --------------------------------------------------------------------------

    def _strict_error(
        self,
        i: int,
        j: int,
        keys_i: Sequence[Any],
        keys_j: Sequence[Any],
        path: KeyPath,
        fixed: str | None = None,
    ) -> StructureKeyError:
        if isinstance(keys_i, range):
            what = (
                f"{self.names[i]} has a sequence of length {len(keys_i)}, {self.names[j]} "
                f"one of length {len(keys_j)}"
            )
        else:
            only_i = [k for k in keys_i if k not in keys_j]
            only_j = [k for k in keys_j if k not in keys_i]
            keys = "keys " if keys_i else ""  # not "has keys no keys"
            what = f"{self.names[i]} has {keys}{_keys_text(keys_i)}, {self.names[j]} has "
            what += f"{_keys_text(keys_j)}"
            if only_i or only_j:
                what += f" (only in {self.names[i]}: {_keys_text(only_i)}; only in "
                what += f"{self.names[j]}: {_keys_text(only_j)})"
        # subside() has no mode: it aligns strictly, and treelize's modes are the way out.
        subside = self.op == "subside"
        who = "the elements" if subside else "the tree arguments"
        mode = "" if subside else f" (mode={self.mode!r})"
        if fixed is not None:
            fix = (
                f"{fixed} has a fixed set of children, so its keys must be equal in "
                f"every mode; give both the same keys."
            )
        elif subside:
            fix = (
                "subside aligns the elements strictly, so they must have the same keys; to "
                "align different keys, put @treelize(mode='inner', subside=True) (or mode "
                "'outer' with missing=, or 'left') on the function that takes them."
            )
        else:
            fix = (
                "In strict mode every tree argument must have the same keys; use "
                "mode='inner', 'outer' (with missing=) or 'left' to align different keys."
            )
        return StructureKeyError(
            f"{self.op}: {who} have different keys at {where(path)}{mode}: {what}. {fix}",
            path,
        )

    def _missing_error(self, i: int, key: str, path: KeyPath) -> StructureKeyError:
        return StructureKeyError(
            f"{self.op}: {self.names[i]} has no value at {key} of {where(path)} "
            f"(mode={self.mode!r}) and missing= is not set. Pass missing= (a value, or a "
            f"zero-argument factory called once per absent leaf), or use mode='inner'.",
            path,
        )

    def _leaf_error(
        self, i: int, lead_i: int, value: Any, lead_kind: Any, path: KeyPath
    ) -> StructureTypeError:
        return StructureTypeError(
            f"{self.op}: {self.names[i]} is a leaf of type {type(value).__qualname__} at "
            f"{where(path)}, where {self.names[lead_i]} has {lead_kind.label}, and "
            f"inherit=False. Pass inherit=True to give the leaf to every position below, "
            f"or give {self.names[i]} the same structure.",
            path,
        )


# --- calling the function at a leaf ------------------------------------------------------


def _make_leaf(
    func: Callable[..., Any],
    n_positional: int,
    keywords: Sequence[str],
    bundles: Sequence[tuple[int, Any, Any, int]],
    missing: Any,
) -> Callable[..., Any]:
    """The function the engine calls with every argument's value at a leaf position:
    absent values become ``missing`` (a factory is called once per absent value),
    subsided bundles are packed again, keywords are passed by name."""
    factory: Callable[[], Any] | None
    if missing is NOT_ALLOWED:
        factory = None
    elif callable(missing):
        factory = missing
    else:
        factory = functools.partial(lambda v: v, missing)
    if not keywords and not bundles:
        if factory is None:
            return func

        def call_fill(*vals: Any) -> Any:
            return func(*[factory() if v is _ABSENT else v for v in vals])

        return call_fill

    def call(*vals: Any) -> Any:
        if factory is not None:
            vals = tuple(factory() if v is _ABSENT else v for v in vals)
        if bundles:
            packed: list[Any] = []
            at = 0
            for start, kind, aux, count in bundles:
                packed.extend(vals[at:start])
                packed.append(kind.unflatten(aux, vals[start : start + count]))
                at = start + count
            packed.extend(vals[at:])
            vals = tuple(packed)
        args = vals[:n_positional]
        kwargs = dict(zip(keywords, vals[n_positional:]))
        return func(*args, **kwargs)

    return call


# --- subside and rise --------------------------------------------------------------------

_SUBSIDED = (LIST, TUPLE, DICT)


def _subsidable(value: Any) -> tuple[Any, Sequence[Any], Any] | None:
    """``(kind, children, aux)`` for a list/tuple/dict with a node among its children."""
    kind = kind_of(value)
    if kind not in _SUBSIDED:
        return None
    kids, aux = kind.flatten(value)
    if not any(kind_of(k) is not None for k in kids):
        return None
    return kind, kids, aux


def subside(value: Any, /) -> Any:
    """Push a list, tuple or dict of trees down into the trees' leaves.

    ``value`` is one level of list/tuple/dict whose elements are trees; the result is a
    tree shaped like them (strict alignment, leaves among the elements inherited) whose
    leaves are lists/tuples/dicts of the elements' leaves. A value that is not a
    list/tuple/dict, or holds no node, is returned unchanged. ``rise`` is the reverse.

    Examples:
        >>> import containers as ct
        >>> ct.subside([{"a": 1, "b": 2}, {"a": 3, "b": 4}])
        {'a': [1, 3], 'b': [2, 4]}
        >>> ct.subside({"x": {"a": 1}, "y": {"a": 2}, "k": "tag"})
        {'a': {'x': 1, 'y': 2, 'k': 'tag'}}
        >>> ct.subside((1, 2))
        (1, 2)

    Args:
        value: A list, tuple or dict of trees.

    Returns:
        A tree whose leaves are lists/tuples/dicts, or ``value`` unchanged.

    Raises:
        StructureError: The elements do not have the same structure (a
            ``StructureKeyError``, also a ``KeyError``, when keys differ); the message
            names the path and the elements.
    """
    found = _subsidable(value)
    if found is None:
        return value
    kind, kids, aux = found
    keys = kind.keys(aux, len(kids))
    align = _Align("strict", True, False, [f"element {k}" for k in keys], "subside")

    def pack(*vals: Any) -> Any:
        return kind.unflatten(aux, vals)

    return map_tree(pack, kids[0], kids[1:], exclude=None, cache=None, op="subside", align=align)


class _Slot:
    """A leaf standing for the ``index``-th value to rise (a plain object: a leaf)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def _rise_slots(skeleton: Any, values: Sequence[Any]) -> Any | None:
    """The node of trees lifted from ``values`` (all nodes of one shape) into the
    ``_Slot`` leaves of ``skeleton``; ``None`` when they cannot rise."""
    if not values:
        return None
    kind = kind_of(values[0])
    if kind is None:
        return None
    kids0, aux0 = kind.flatten(values[0])
    n = len(kids0)
    if n == 0:
        return None
    keys0 = kind.keys(aux0, n)
    table = [kids0]
    for v in values[1:]:
        if kind_of(v) is not kind:
            return None
        kids, aux = kind.flatten(v)
        if len(kids) != n or kind.keys(aux, n) != keys0 or not kind.aux_eq(aux0, aux):
            return None
        table.append(kids)
    trees = [
        map_tree(lambda s, j=j: table[s.index][j], skeleton, exclude=None, cache=None, op="rise")
        for j in range(n)
    ]
    return kind.unflatten(aux0, trees)


def rise_results(skeleton: Any, values: Sequence[Any]) -> Any:
    """treelize's ``rise=True``: ``values`` (the results, at the ``_Slot`` leaves of
    ``skeleton``) lifted above the tree if they can rise, else put in place."""
    lifted = _rise_slots(skeleton, values)
    if lifted is not None:
        return lifted
    return map_tree(lambda s: values[s.index], skeleton, exclude=None, cache=None, op="treelize")


def _is_bottom(value: Any) -> bool:
    """A leaf, or a node with children that are all leaves: what ``rise`` lifts."""
    kind = kind_of(value)
    if kind is None:
        return True
    kids = kind.flatten(value)[0]
    return len(kids) > 0 and all(kind_of(k) is None for k in kids)


def rise(tree: Any, /) -> Any:
    """Lift the bottom level of ``tree`` above it: the reverse of ``subside``.

    When every leaf of ``tree`` sits in a bottom node (a tuple, list, dict or other node
    whose children are all leaves) and all those nodes have one shape (same type, same
    keys or length), the result is one such node whose children are trees shaped like
    ``tree``. Otherwise ``tree`` is returned unchanged. Nodes with no children
    (``{}``, ``()``, ``None``) are copied into every lifted tree.

    Examples:
        >>> import containers as ct
        >>> ct.rise({"a": (1, 2), "x": {"c": (3, 4)}})
        ({'a': 1, 'x': {'c': 3}}, {'a': 2, 'x': {'c': 4}})
        >>> ct.rise({"a": [1, 3], "b": [2, 4]})
        [{'a': 1, 'b': 2}, {'a': 3, 'b': 4}]
        >>> ct.rise({"a": (1, 2), "b": 3})
        {'a': (1, 2), 'b': 3}

    Args:
        tree: A tree whose bottom nodes share one shape.

    Returns:
        The lifted node of trees, or ``tree`` unchanged.

    Raises:
        StructureError: ``tree`` contains a reference cycle; the message names the path.
    """
    found: list[Any] = []

    def slot(value: Any) -> Any:
        found.append(value)
        return _Slot(len(found) - 1)

    skeleton = map_tree(slot, tree, exclude=_is_bottom, cache=None, op="rise")
    if any(kind_of(v) is None for v in found):
        return tree
    lifted = _rise_slots(skeleton, found)
    return tree if lifted is None else lifted


# --- the decorator -----------------------------------------------------------------------


def _check_mode(mode: Any) -> str:
    if not isinstance(mode, str):
        hint = (
            " treelize takes options and returns the decorator: write @ct.treelize() "
            "with parentheses."
            if callable(mode)
            else ""
        )
        raise TypeError(
            f"treelize: mode must be a string, one of {', '.join(map(repr, MODES))}; "
            f"got {type(mode).__qualname__}.{hint}"
        )
    name = mode.lower()
    if name not in MODES:
        raise ValueError(
            f"treelize: unknown mode {mode!r}. Modes are {', '.join(map(repr, MODES))} "
            f"(in any letter case)."
        )
    return name


def treelize(
    mode: str = "strict",
    *,
    inherit: bool = True,
    missing: Any = NOT_ALLOWED,
    rise: bool = False,
    subside: bool = False,
    executor: Any = None,
    chunksize: int | None = None,
    progress: Any = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Lift a function on leaves to trees: treevalue's ``func_treelize`` for every node.

    The decorated function takes trees wherever the original took values: every
    positional and keyword argument that is a node is a tree argument, the function
    runs once per aligned leaf position, and the results are assembled in the trees'
    structure. Where the arguments' nodes meet, ``mode`` decides the keys:

    - ``"strict"``: all key sets equal, else a ``StructureKeyError`` (also a
      ``KeyError``);
    - ``"inner"``: the keys every tree argument has;
    - ``"outer"``: the keys any tree argument has, absent values from ``missing``;
    - ``"left"``: the first tree argument's keys.

    Arguments are ordered positional first, then keywords sorted by name; the first one
    that has a node at a position decides its type, kept fields and key order (then
    keys new in later arguments, in their order). Dicts align by key; tuples, lists and
    deques by position (``inner``: the shortest, ``outer``: the longest); containers,
    namedtuples and registered types have fixed children, so they must have the same
    class and keys. With ``inherit`` a leaf argument, or a leaf facing a subtree, goes
    to every position below it. ``subside=True`` first turns each list/tuple/dict
    argument of trees into a tree of lists/tuples/dicts; ``rise=True`` turns a result
    whose leaves are all nodes of one shape into that node of trees. ``executor=``,
    ``chunksize=`` and ``progress=`` run the calls on an executor, as ``fmap``'s do.

    Examples:
        >>> import containers as ct
        >>> @ct.treelize()
        ... def add(a, b):
        ...     return a + b
        >>> add({"a": 1, "x": (2, 3)}, {"a": 10, "x": (20, 30)})
        {'a': 11, 'x': (22, 33)}
        >>> add({"a": 1, "b": 2}, 100)
        {'a': 101, 'b': 102}
        >>> ct.treelize("outer", missing=0)(add)({"a": 1}, {"b": 2})
        {'a': 1, 'b': 2}
        >>> ct.treelize("inner")(add)([1, 2, 3], [10, 20])
        [11, 22]

    Args:
        mode: ``"strict"``, ``"inner"``, ``"outer"`` or ``"left"``, in any case.
        inherit: Pass leaf arguments to every position below them; with ``False`` a
            leaf facing a subtree raises ``TypeError``.
        missing: The value for an absent key (``outer``, ``left``), or a zero-argument
            factory called once per absent leaf. By default absent keys are errors.
        rise: Lift the results' common shape above the tree (see ``rise``).
        subside: Push list/tuple/dict arguments of trees into the leaves first.
        executor: Where to run the calls: a ``concurrent.futures`` executor or a dask
            Client (docs/parallel.md).
        chunksize: Leaf positions per task (default: about four tasks per worker).
        progress: A function ``(done, total)``, or True for a bar on stderr.

    Returns:
        A decorator; the decorated function keeps the original's name, docstring and
        signature (``functools.wraps``).

    Raises:
        ValueError: ``mode`` is not one of the four.
        TypeError: ``mode`` is not a string.
    """
    name = _check_mode(mode)
    if name == "strict" and missing is not NOT_ALLOWED:
        warnings.warn(
            "treelize: missing= is set, but mode='strict' never uses it: in strict mode "
            "different keys raise StructureError (a KeyError). Drop missing=, or use mode='outer' "
            "or 'left'.",
            RuntimeWarning,
            stacklevel=2,
        )
    if name == "outer" and missing is NOT_ALLOWED:
        warnings.warn(
            "treelize: mode='outer' without missing=: a key absent from one tree "
            "argument raises StructureError (a KeyError). Pass missing= (a value, or a zero-argument "
            "factory) to fill absent values.",
            RuntimeWarning,
            stacklevel=2,
        )
    allow_missing = missing is not NOT_ALLOWED
    # The fast path (two plain dict trees) passes an immutable missing value itself: a
    # constant factory would return that very object at every absent leaf anyway.
    fast_missing: Any = missing if type(missing) in IMMUTABLE_LEAVES else _ABSENT
    do_rise = rise
    do_subside = subside
    if executor is not None or chunksize is not None or progress is not None:
        from containers._parallel import check_options  # a later stage

        check_options("treelize", executor, chunksize, progress)

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(func):
            raise not_callable_error(
                func, "treelize", "the decorated value", "Decorate a def, or call {op}(mode)(f)"
            )

        def lift(
            func: Callable[..., Any], args: Any, kwargs: Any, do_rise: bool, fast: bool
        ) -> Any:
            keywords = sorted(kwargs)
            values = [*args, *(kwargs[k] for k in keywords)]
            names = [f"argument {i}" for i in range(len(args))]
            names += [f"argument {k!r}" for k in keywords]
            bundles: list[tuple[int, Any, Any, int]] = []
            if do_subside:
                values, names, bundles = _expand(values, names)
            if not values:
                return func()
            leaf = _make_leaf(func, len(args), keywords, bundles, missing)
            found: list[Any] = []
            if do_rise:
                plain = leaf

                def leaf(*vals: Any) -> Any:
                    found.append(plain(*vals))
                    return _Slot(len(found) - 1)

            align = _Align(name, inherit, allow_missing, names, "treelize")
            if (
                fast
                and len(values) == 2
                and inherit
                and not kwargs
                and not bundles
                and not do_rise
                and (fast_missing is not _ABSENT or not allow_missing)
            ):
                result = fast_pair(func, leaf, values[0], values[1], align, fast_missing, _ABSENT)
            else:
                result = map_tree(
                    leaf,
                    values[0],
                    values[1:],
                    exclude=None,
                    cache=None,
                    op="treelize",
                    align=align,
                )
            if do_rise:
                return rise_results(result, found)
            return result

        @functools.wraps(func)
        def treelized(*args: Any, **kwargs: Any) -> Any:
            if executor is None:
                return lift(func, args, kwargs, do_rise, _FAST)
            from containers._parallel import treelize_on_executor  # a later stage

            return treelize_on_executor(
                func,
                lambda g, plain: lift(g, args, kwargs, False, not plain and _FAST),
                do_rise,
                executor,
                chunksize,
                progress,
            )

        return treelized

    return decorate


def _expand(
    values: list[Any], names: list[str]
) -> tuple[list[Any], list[str], list[tuple[int, Any, Any, int]]]:
    """subside=True: each list/tuple/dict argument holding trees becomes several tree
    arguments (its elements), packed again at every leaf."""
    out: list[Any] = []
    out_names: list[str] = []
    bundles: list[tuple[int, Any, Any, int]] = []
    for v, nm in zip(values, names):
        found = _subsidable(v)
        if found is None:
            out.append(v)
            out_names.append(nm)
            continue
        kind, kids, aux = found
        bundles.append((len(out), kind, aux, len(kids)))
        out.extend(kids)
        out_names.extend(f"{nm}{k}" for k in kind.keys(aux, len(kids)))
    return out, out_names, bundles


# --- the fast path: two plain dict trees -------------------------------------------------


#: Whether two-argument calls may take ``fast_pair`` (tests switch it off to run the
#: engine, its twin, on the same cases).
_FAST = True
