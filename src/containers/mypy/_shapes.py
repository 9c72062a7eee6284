"""The static model of a tree: which static types are nodes, their leaf types, and the
tree type rebuilt with new leaves. It gives up (``_Unknown``) wherever a static type may
hide a node.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Concatenate, Final, ParamSpec, TypeVar

import mypy.types
from mypy.checker import TypeChecker
from mypy.expandtype import expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
from mypy.nodes import (
    TypeInfo,
    Var,
)
from mypy.typeops import get_all_type_vars, make_simplified_union
from mypy.types import (
    FunctionLike,
    Instance,
    LiteralType,
    NoneType,
    ProperType,
    TupleType,
    Type,
    TypedDictType,
    TypeType,
    TypeVarId,
    TypeVarType,
    UninhabitedType,
    UnionType,
    get_proper_type,
)
from mypy.typevars import fill_typevars

from containers.mypy._common import (
    _MAPPING_NODES,
    _MAX_DEPTH,
    _NODE_CLASSES,
    _SEQUENCE_NODES,
    METADATA_KEY,
)


class _Unknown(Exception):
    """The static type does not show what the runtime will find there."""


_LEAF: Final = "leaf"
_NONE: Final = "none"
_EMPTY: Final = "empty"
_UNION: Final = "union"
_SEQUENCE: Final = "sequence"
_MAPPING: Final = "mapping"
_TUPLE: Final = "tuple"
_NAMEDTUPLE: Final = "namedtuple"
_TYPEDDICT: Final = "typeddict"
_CONTAINER: Final = "container"


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _nested(
    method: Callable[Concatenate[_Shapes, _P], _R],
) -> Callable[Concatenate[_Shapes, _P], _R]:
    """Count the nesting of a recursive walk, to stop at `_MAX_DEPTH`."""

    @functools.wraps(method)
    def walk(self: _Shapes, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._deeper():
            return method(self, *args, **kwargs)

    return walk


class _Shapes:
    """Walks static types with the runtime's node rules, for one call site."""

    def __init__(self, api: TypeChecker, result: TypeVarType, *, none_is_leaf: bool = False):
        self.api = api
        self.result = result  # the type of f's results: the new leaves
        self.none_is_leaf = none_is_leaf
        self.leaves: list[Type] = []
        # (leaf type, the type its slot holds after the rebuild, "Class.field") wherever a
        # new leaf lands in a slot that keeps its type: f's result there must fit it.
        self.slots: list[tuple[ProperType, ProperType, str]] = []
        self._visiting: set[tuple[Type, Type | None]] = set()
        self._free: dict[str, frozenset[int]] = {}
        self._depth = 0

    # Classification.

    @contextlib.contextmanager
    def _deeper(self) -> Iterator[None]:
        # Recursive aliases and recursive containers (in fmapstructure) nest forever.
        self._depth += 1
        try:
            if self._depth > _MAX_DEPTH:
                raise _Unknown
            yield
        finally:
            self._depth -= 1

    def kind(self, t: ProperType) -> str:
        if isinstance(t, NoneType):
            return _LEAF if self.none_is_leaf else _NONE
        if isinstance(t, UninhabitedType):
            return _EMPTY
        if isinstance(t, UnionType):
            return _UNION
        if isinstance(t, TupleType):
            fallback = t.partial_fallback.type
            if fallback.is_named_tuple and "namedtuple" in fallback.metadata:
                declared = fallback.metadata.get(METADATA_KEY)
                if declared is not None and (
                    declared.get("opaque")
                    or declared["children"] != fallback.metadata["namedtuple"]["fields"]
                ):
                    raise _Unknown  # a declared namedtuple with kept or reordered fields
                return _NAMEDTUPLE
            if fallback.fullname != "builtins.tuple" or any(
                isinstance(get_proper_type(i), mypy.types.UnpackType) for i in t.items
            ):
                raise _Unknown
            return _TUPLE
        if isinstance(t, TypedDictType):
            return _TYPEDDICT
        if isinstance(t, LiteralType):
            return _LEAF
        if isinstance(t, TypeType):
            return _LEAF  # a class object is a leaf
        if isinstance(t, FunctionLike):
            # A function is a leaf, but a callable type may hold a callable container.
            if t.is_type_obj():
                return _LEAF
            raise _Unknown
        if isinstance(t, Instance):
            return self._instance_kind(t)
        raise _Unknown  # Any, type variables, ParamSpec, partial types...

    def _instance_kind(self, t: Instance) -> str:
        info = t.type
        if info.fullname in _SEQUENCE_NODES:
            return _SEQUENCE
        if info.fullname in _MAPPING_NODES:
            return _MAPPING
        declaration = info.metadata.get(METADATA_KEY)
        if declaration is not None:
            if declaration.get("opaque") or info.has_type_var_tuple_type:
                raise _Unknown
            return _CONTAINER
        if (
            info.is_protocol
            or info.fullname == "builtins.object"
            or info.tuple_type is not None
            or any(
                base.fullname in _NODE_CLASSES or METADATA_KEY in base.metadata
                for base in info.mro[1:]
            )
            or info.metadata.keys() & {"dataclass", "dataclass_tag", "attrs"}
            or info.get("__container_traverse__") is not None
            or info.fullname in _node_bases(self.api)
        ):
            raise _Unknown
        return _LEAF

    def free_vars(self, info: TypeInfo) -> frozenset[int]:
        """Indices of the type parameters that only ever hold children.

        A parameter that also appears in a kept or reset field, or inside a leaf type
        (``Callable[[T], T]``, a dict key), must keep its type argument when the children
        are replaced; the others are re-parameterised by rebuilding their argument.
        """
        cached = self._free.get(info.fullname)
        if cached is not None:
            return cached
        self._free[info.fullname] = frozenset(range(len(info.defn.type_vars)))  # recursion
        self_type = fill_typevars(info)
        assert isinstance(self_type, Instance)
        declaration = info.metadata[METADATA_KEY]
        frozen: set[TypeVarId] = set()
        for name in [*declaration["children"], *declaration["keep"], *declaration["reset"]]:
            declared = _field_type(self_type, name)
            if declared is None:
                frozen.update(_type_var_ids(self_type))
            else:
                self._freeze(declared, frozen, structural=name in declaration["children"])
        ids = _type_var_ids(self_type)
        free = frozenset(i for i, tv in enumerate(ids) if tv not in frozen)
        self._free[info.fullname] = free
        return free

    def _freeze(self, t: Type, frozen: set[TypeVarId], *, structural: bool) -> None:
        p = get_proper_type(t)
        if isinstance(p, TypeVarType):
            if not structural:
                frozen.add(p.id)
            return
        if not structural:
            frozen.update(tv.id for tv in _all_type_vars(p))
            return
        if isinstance(p, UnionType) or (
            isinstance(p, TupleType) and p.partial_fallback.type.fullname == "builtins.tuple"
        ):
            for item in p.items:
                self._freeze(item, frozen, structural=True)
        elif isinstance(p, TypedDictType):
            for item in p.items.values():
                self._freeze(item, frozen, structural=True)
        elif isinstance(p, Instance) and p.type.fullname in _SEQUENCE_NODES and p.args:
            self._freeze(p.args[0], frozen, structural=True)
        elif isinstance(p, Instance) and p.type.fullname in _MAPPING_NODES and p.args:
            self._freeze(p.args[0], frozen, structural=False)
            self._freeze(p.args[1], frozen, structural=True)
        elif isinstance(p, Instance) and METADATA_KEY in p.type.metadata:
            free = (
                self.free_vars(p.type)
                if not p.type.metadata[METADATA_KEY].get("opaque")
                else frozenset()
            )
            for i, arg in enumerate(p.args):
                self._freeze(arg, frozen, structural=i in free)
        else:
            frozen.update(tv.id for tv in _all_type_vars(p))

    # The three walks.

    def _builtin(self, p: ProperType, kind: str, walk: Callable[[Type], Type]) -> Type | None:
        """What ``rebuild`` and ``structure`` share: a leaf becomes U, and unions,
        sequences, mappings and tuples keep their type with ``walk`` applied to their
        items; None for the other kinds."""
        if kind == _LEAF:
            return self.result
        if kind == _UNION:
            assert isinstance(p, UnionType)
            return make_simplified_union([walk(item) for item in p.items])
        if kind == _SEQUENCE:
            assert isinstance(p, Instance)
            return p.copy_modified(args=[walk(p.args[0])], last_known_value=None)
        if kind == _MAPPING:
            assert isinstance(p, Instance)
            return p.copy_modified(args=[p.args[0], walk(p.args[1])], last_known_value=None)
        if kind == _TUPLE:
            assert isinstance(p, TupleType)
            return self._tuple([walk(item) for item in p.items])
        return None

    @_nested
    def rebuild(self, t: Type) -> Type:
        """The type of ``fmap(f, tree)`` for a tree of type ``t``: leaves become U."""
        p = get_proper_type(t)
        kind = self.kind(p)
        shared = self._builtin(p, kind, self.rebuild)
        if shared is not None:
            return shared
        if kind == _TYPEDDICT:
            assert isinstance(p, TypedDictType)
            return self._typeddict({k: self.rebuild(v) for k, v in p.items.items()}, p)
        if kind == _CONTAINER:
            assert isinstance(p, Instance)
            free = self.free_vars(p.type)
            args = [self.rebuild(a) if i in free else a for i, a in enumerate(p.args)]
            return p.copy_modified(args=args, last_known_value=None)
        # None, Never, and namedtuples, whose fields cannot change type: the same type;
        # visit() records their fields as slots.
        return p

    @_nested
    def structure(self, t: Type) -> Type:
        """The type of ``fmapstructure(f, tree)``: containers become dicts of children."""
        p = get_proper_type(t)
        kind = self.kind(p)
        shared = self._builtin(p, kind, self.structure)
        if shared is not None:
            return shared
        if kind == _NAMEDTUPLE:
            assert isinstance(p, TupleType)
            names = p.partial_fallback.type.metadata["namedtuple"]["fields"]
            return self._typeddict(
                {n: self.structure(item) for n, item in zip(names, p.items, strict=True)}, None
            )
        if kind == _TYPEDDICT:
            assert isinstance(p, TypedDictType)
            return self._typeddict({k: self.structure(v) for k, v in p.items.items()}, p)
        if kind == _CONTAINER:
            assert isinstance(p, Instance)
            children = p.type.metadata[METADATA_KEY]["children"]
            return self._typeddict(
                {name: self.structure(self._child_type(p, name)) for name in children}, None
            )
        return p

    @_nested
    def visit(self, old: Type, claimed: Type | None, where: str = "") -> None:
        """Collect the leaf types of ``old``, and the slots where new leaves must fit.

        ``claimed`` is the type claimed for the rebuilt value (None: no claim). Wherever a
        leaf of ``old`` lands in a part of ``claimed`` that is not U itself (a concrete
        field, a frozen type parameter), that part is recorded in `slots`.
        """
        key = (old, claimed)
        if key in self._visiting:
            return  # a recursive container type: this pair is already being checked
        self._visiting.add(key)
        p = get_proper_type(old)
        c = get_proper_type(claimed) if claimed is not None else None
        kind = self.kind(p)
        if kind == _LEAF:
            self.leaves.append(p)
            if c is not None and not self._holds_result(c):
                if _mentions(c, self.result.id):
                    raise _Unknown
                self.slots.append((p, c, where))
        elif kind == _UNION:
            assert isinstance(p, UnionType)
            for item in p.items:
                self.visit(item, claimed, where)
        elif kind in (_NONE, _EMPTY):
            pass
        else:
            c = self._pick(c, p)
            self._visit_children(p, kind, c, where)
        self._visiting.discard(key)

    def _visit_children(self, p: ProperType, kind: str, c: ProperType | None, where: str) -> None:
        if kind in (_SEQUENCE, _MAPPING):
            assert isinstance(p, Instance)
            claimed = c.args[-1] if isinstance(c, Instance) else None
            self.visit(p.args[-1], claimed, where)
        elif kind in (_TUPLE, _NAMEDTUPLE):
            assert isinstance(p, TupleType)
            claimed_items: list[Type | None] = (
                list(c.items) if isinstance(c, TupleType) else [None] * len(p.items)
            )
            if len(claimed_items) != len(p.items):
                raise _Unknown
            names = (
                p.partial_fallback.type.metadata["namedtuple"]["fields"]
                if kind == _NAMEDTUPLE
                else []
            )
            for i, (item, claimed) in enumerate(zip(p.items, claimed_items, strict=True)):
                here = f"{p.partial_fallback.type.name}.{names[i]}" if names else where
                self.visit(item, claimed, here)
        elif kind == _TYPEDDICT:
            assert isinstance(p, TypedDictType)
            for name, item in p.items.items():
                claimed = c.items.get(name) if isinstance(c, TypedDictType) else None
                self.visit(item, claimed, where)
        elif kind == _CONTAINER:
            assert isinstance(p, Instance)
            for name in p.type.metadata[METADATA_KEY]["children"]:
                claimed = self._child_type(c, name) if isinstance(c, Instance) else None
                self.visit(self._child_type(p, name), claimed, f"{p.type.name}.{name}")

    @_nested
    def aligned(self, first: Type, other: Type) -> list[Type]:
        """The types in ``other`` at the positions of the leaves of ``first``."""
        p, o = get_proper_type(first), get_proper_type(other)
        kind = self.kind(p)
        if kind == _LEAF:
            return [o]
        if kind in (_NONE, _EMPTY):
            return []
        if kind == _UNION or self.kind(o) != kind:
            raise _Unknown
        if kind in (_SEQUENCE, _MAPPING):
            assert isinstance(p, Instance)
            assert isinstance(o, Instance)
            return self.aligned(p.args[-1], o.args[-1])
        if kind in (_TUPLE, _NAMEDTUPLE):
            assert isinstance(p, TupleType)
            assert isinstance(o, TupleType)
            if len(o.items) < len(p.items):
                raise _Unknown
            return [t for a, b in zip(p.items, o.items, strict=False) for t in self.aligned(a, b)]
        if kind == _TYPEDDICT:
            assert isinstance(p, TypedDictType)
            assert isinstance(o, TypedDictType)
            if not p.items.keys() <= o.items.keys():
                raise _Unknown
            return [t for k, v in p.items.items() for t in self.aligned(v, o.items[k])]
        assert isinstance(p, Instance)
        assert isinstance(o, Instance)
        if o.type is not p.type:
            raise _Unknown
        return [
            t
            for name in p.type.metadata[METADATA_KEY]["children"]
            for t in self.aligned(self._child_type(p, name), self._child_type(o, name))
        ]

    # Helpers.

    def _holds_result(self, c: ProperType) -> bool:
        if isinstance(c, TypeVarType) and c.id == self.result.id:
            return True
        return isinstance(c, UnionType) and any(
            self._holds_result(get_proper_type(item)) for item in c.items
        )

    def _pick(self, c: ProperType | None, p: ProperType) -> ProperType | None:
        """The member of the claimed type that has the same node kind as ``p``."""
        if c is None:
            return None
        candidates = [get_proper_type(i) for i in c.items] if isinstance(c, UnionType) else [c]
        same = [x for x in candidates if _same_node(x, p)]
        if len(same) != 1:
            raise _Unknown
        return same[0]

    def _child_type(self, t: Instance, name: str) -> Type:
        child = _field_type(t, name)
        if child is None:
            raise _Unknown
        return child

    def _tuple(self, items: list[Type]) -> TupleType:
        fallback = self.api.named_generic_type(
            "builtins.tuple", [make_simplified_union(items) if items else UninhabitedType()]
        )
        return TupleType(items, fallback)

    def _typeddict(self, items: dict[str, Type], like: TypedDictType | None) -> TypedDictType:
        required = set(items) if like is None else set(like.required_keys)
        return TypedDictType(items, required, set(), self.api.named_type("typing._TypedDict"))


def _same_node(a: ProperType, b: ProperType) -> bool:
    if isinstance(a, Instance) and isinstance(b, Instance):
        return a.type is b.type
    if isinstance(a, TupleType) and isinstance(b, TupleType):
        return len(a.items) == len(b.items)
    return isinstance(a, TypedDictType) and isinstance(b, TypedDictType)


def _field_type(t: Instance, name: str) -> Type | None:
    """The type of field ``name`` of ``t``, with the type arguments of ``t`` applied."""
    for base in t.type.mro:
        symbol = base.names.get(name)
        if symbol is not None and isinstance(symbol.node, Var):
            declared = symbol.node.type
            if declared is None:
                return None
            return expand_type_by_instance(declared, map_instance_to_supertype(t, base))
    return None


def _type_var_ids(t: Instance) -> list[TypeVarId]:
    return [p.id for p in (get_proper_type(a) for a in t.args) if isinstance(p, TypeVarType)]


def _all_type_vars(t: Type) -> list[TypeVarType]:
    return [tv for tv in get_all_type_vars(t) if isinstance(tv, TypeVarType)]


def _mentions(t: Type, var: TypeVarId) -> bool:
    return any(tv.id == var for tv in _all_type_vars(t))


_bases_cache: dict[int, tuple[int, frozenset[str]]] = {}


def _node_bases(api: TypeChecker) -> frozenset[str]:
    """Full names of the classes that some declared container or builtin node class
    (``list``, ``dict``, ``deque``...) inherits from.

    A value of such a class (a ``Sequence``, a ``Mapping``) may be a node at runtime, so
    it is not a leaf. The scan covers the modules loaded so far and is redone when more
    are loaded.
    """
    modules = api.modules
    cached = _bases_cache.get(id(modules))
    if cached is not None and cached[0] == len(modules):
        return cached[1]
    bases: set[str] = set()
    for name in _NODE_CLASSES:
        module, _, cls = name.rpartition(".")
        symbol = modules[module].names.get(cls) if module in modules else None
        if symbol is not None and isinstance(symbol.node, TypeInfo):
            bases.update(base.fullname for base in symbol.node.mro[1:])
    stack: list[Iterable[Any]] = [m.names.values() for m in modules.values()]
    seen: set[int] = set()
    while stack:
        for symbol in stack.pop():
            info = symbol.node
            if not isinstance(info, TypeInfo) or id(info) in seen:
                continue
            seen.add(id(info))
            stack.append(info.names.values())
            if METADATA_KEY in info.metadata:
                bases.update(base.fullname for base in info.mro[1:])
    result = frozenset(bases)
    _bases_cache.clear()
    _bases_cache[id(modules)] = (len(modules), result)
    return result
