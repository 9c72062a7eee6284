"""treelize's alignment of several trees: ``_Align``, the strategy ``map_tree`` calls
at each position to decide which keys the arguments share and how the result node is
built (strict, inner, outer, left), with its errors.
"""

from __future__ import annotations

import enum
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Sequence
from typing import Any, cast

from containers._engine._core import Align
from containers._errors import (
    ContainerDefinitionError,
    StructureError,
    StructureKeyError,
    StructureTypeError,
)
from containers._paths import DictKey, Key, KeyPath, index_keys, where
from containers._registry import (
    DEFAULT_DICT,
    DEQUE,
    DICT,
    LEAF_TYPES,
    LIST,
    ORDERED_DICT,
    TUPLE,
    distinct_labels,
    kind_of,
)

__all__ = ["MODES", "NOT_ALLOWED"]


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
