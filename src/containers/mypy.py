"""The mypy plugin: declarations checked and tree operations typed, at type-check time.

This stage runs inside mypy only, after everything else: it imports mypy, the standard
library and ``containers._errors`` (for the runtime's wording), never the runtime. It must
never claim a type the runtime does not produce: wherever the static type of a tree does
not show its structure, it leaves mypy the declared signature.

Enable it with ``plugins = ["containers.mypy"]`` (docs/typing.md). What it does:

- ``@container`` (a ``dataclass_transform``): chains the class maker the runtime uses
  (mypy's dataclass transform, or the class's own dataclass/attrs decorator), then checks
  ``children=``/``keep=`` as ``containers._spec`` does and reports, in the runtime's words,
  an unknown name (with a did-you-mean hint), a name listed twice or in both lists, and a
  reset field without a default (``ct.register(cls, ...)`` calls are checked too). The
  declaration goes into ``TypeInfo.metadata["containers"]``, which mypy caches, and a typed
  ``__containers_children__`` is added so that containers fit ``containers.Tree[T]``.
- ``fmap`` / ``fmapstructure`` / ``fmap_with_path``: a signature hook reads the static
  type of the tree and, when every node in it is known, gives the call the signature
  ``def [U] (f: Callable[[<leaf types>], U], tree) -> <tree with U leaves>``. Mypy's own
  inference solves ``U`` (lambdas get typed parameters, overloaded ``str`` or ``float``
  work, the assignment target is used), and an ``f`` that cannot take the leaves is an
  ``arg-type`` error. A return hook then checks each field that keeps its type (a
  concrete type, or a type parameter a kept field also uses) against what ``f`` returns
  for the leaves found there: a ``containers-leaf`` error.
- ``flatten`` / ``leaves`` / ``structure``: ``list[<leaf types>]`` for the leaves.
- ``unflatten`` / ``Structure.unflatten``: the tree type recorded in ``Structure[X]``,
  rebuilt with the element type of the new leaves.

The node rules mirror the runtime's (SPEC §1): declared containers, list, tuple,
namedtuple, dict, OrderedDict, defaultdict, deque and ``None`` are nodes. Static types
that may hide a node give up: ``Any``, ``object``, type variables, abstract collections,
protocols, callables, subclasses of builtin collections, dataclasses, attrs classes and
container subclasses that are not declared themselves (``ct.register`` may make them
nodes), hand-written ``Container`` classes, and classes some container inherits from.
Classes given to ``register_node`` at runtime cannot be seen: they count as leaves.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Concatenate, Final, NamedTuple, ParamSpec, TypeVar

# mypy.types must be imported before mypy.expandtype and friends, or importing this module
# outside mypy (from a unit test) fails with a circular import.
import mypy.types
from mypy.checker import TypeChecker
from mypy.errorcodes import ErrorCode
from mypy.expandtype import expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
from mypy.meet import is_overlapping_types
from mypy.messages import format_type_bare
from mypy.nodes import (
    ARG_OPT,
    ARG_POS,
    ARG_STAR,
    ARG_STAR2,
    CallExpr,
    Context,
    Expression,
    LambdaExpr,
    ListExpr,
    NameExpr,
    RefExpr,
    StrExpr,
    TempNode,
    TupleExpr,
    TypeAlias,
    TypeInfo,
    Var,
)
from mypy.options import Options
from mypy.plugin import (
    ClassDefContext,
    FunctionContext,
    FunctionSigContext,
    MethodContext,
    MethodSigContext,
    Plugin,
)
from mypy.plugins import dataclasses as dataclasses_plugin
from mypy.plugins.common import add_method_to_class
from mypy.plugins.default import DefaultPlugin
from mypy.semanal_shared import find_dataclass_transform_spec
from mypy.subtypes import is_subtype
from mypy.typeops import get_all_type_vars, make_simplified_union
from mypy.types import (
    AnyType,
    CallableType,
    FunctionLike,
    Instance,
    LiteralType,
    NoneType,
    ProperType,
    TupleType,
    Type,
    TypedDictType,
    TypeOfAny,
    TypeType,
    TypeVarId,
    TypeVarType,
    UninhabitedType,
    UnionType,
    get_proper_type,
)
from mypy.typevars import fill_typevars

from containers._errors import (
    in_both_message,
    listed_twice_message,
    reset_without_default_message,
    unknown_field_message,
)

__all__ = ["MYPY_VERSIONS", "ContainersPlugin", "plugin"]

#: The mypy versions this plugin is tested with, as ``(lowest, first unsupported)``. The
#: plugin API is internal to mypy and changes without notice (python/mypy#6617), so the
#: range is pinned and widened only after the typing tests pass on the new version.
MYPY_VERSIONS: Final = ((2, 4), (2, 5))

DECLARATION_ERROR: Final = ErrorCode(
    "containers-field", "Check children= and keep= of container declarations", "containers"
)
LEAF_ERROR: Final = ErrorCode(
    "containers-leaf", "Check that new leaves fit the fields that keep their type", "containers"
)

METADATA_KEY: Final = "containers"
CHILDREN_METHOD: Final = "__containers_children__"

# Node kinds of the runtime (SPEC §1) by the full name of their class.
_SEQUENCE_NODES: Final = frozenset({"builtins.list", "builtins.tuple", "collections.deque"})
_MAPPING_NODES: Final = frozenset(
    {"builtins.dict", "collections.OrderedDict", "collections.defaultdict"}
)
_NODE_CLASSES: Final = _SEQUENCE_NODES | _MAPPING_NODES

# Options after which the leaves are no longer the natural leaves, so the declared
# signature is all that can be said.
_MAP_OPAQUE_OPTIONS: Final = ("exclude", "walk", "prune", "where")
_FLATTEN_OPAQUE_OPTIONS: Final = ("is_leaf",)

_MAP_FUNCTIONS: Final = frozenset({"fmap", "fmapstructure", "fmap_with_path"})
_MAX_DEPTH: Final = 64


def plugin(version: str) -> type[Plugin]:
    """Return the plugin class; mypy calls this with its own version.

    A version outside `MYPY_VERSIONS` is reported on stderr, and the plugin still runs:
    refusing to start would break every run after a mypy upgrade, while the typing tests
    are what tells whether the new version works.
    """
    if not _version_supported(version):
        low, high = MYPY_VERSIONS
        print(
            f"containers.mypy: mypy {version} is outside the tested range "
            f">={low[0]}.{low[1]},<{high[0]}.{high[1]}; the plugin may report wrong types "
            f"or crash. Install a mypy in that range, or remove containers.mypy from "
            f"plugins= to use the declared signatures.",
            file=sys.stderr,
        )
    return ContainersPlugin


def _version_supported(version: str) -> bool:
    parts: list[int] = []
    for piece in version.split("+", maxsplit=1)[0].split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    low, high = MYPY_VERSIONS
    return low <= (parts[0], parts[1] if len(parts) > 1 else 0) < high


def _api_name(fullname: str) -> str | None:
    """Return ``fmap`` for ``containers.fmap`` or ``containers._fmap.fmap``, else None."""
    module, _, name = fullname.rpartition(".")
    if module == "containers" or module.startswith("containers._"):
        return name
    return None


class ContainersPlugin(Plugin):
    """Route mypy's hooks for the public names of ``containers`` to this module."""

    def get_class_decorator_hook_2(
        self, fullname: str
    ) -> Callable[[ClassDefContext], bool] | None:
        """Check ``@container`` declarations (after chaining mypy's dataclass transform)."""
        return _container_hook if _api_name(fullname) == "container" else None

    def get_function_signature_hook(
        self, fullname: str
    ) -> Callable[[FunctionSigContext], FunctionLike] | None:
        """Type ``fmap``, ``fmapstructure``, ``fmap_with_path``, ``unflatten`` per call."""
        name = _api_name(fullname)
        if name in _MAP_FUNCTIONS:
            return functools.partial(_map_signature, name=name)
        if name == "unflatten":
            return _unflatten_signature
        return None

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        """Check the leaves given to ``Structure.unflatten``."""
        return _unflatten_result if _is_structure_unflatten(fullname) else None

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        """Type the results of ``flatten``, ``leaves`` and ``structure``; check ``register``."""
        name = _api_name(fullname)
        if name in ("flatten", "leaves", "structure"):
            return _flatten_result
        if name in _MAP_FUNCTIONS and name != "fmapstructure":
            return functools.partial(_map_result, name=name)
        if name == "unflatten":
            return _unflatten_result
        if name == "register":
            return _register_hook
        return None

    def get_method_signature_hook(
        self, fullname: str
    ) -> Callable[[MethodSigContext], FunctionLike] | None:
        """Type ``Structure.unflatten`` like ``unflatten``."""
        return _structure_unflatten_signature if _is_structure_unflatten(fullname) else None


def _is_structure_unflatten(fullname: str) -> bool:
    cls, _, name = fullname.rpartition(".")
    return name == "unflatten" and cls.endswith(".Structure") and _api_name(cls) is not None


# --- declarations -------------------------------------------------------------------


def _container_hook(ctx: ClassDefContext) -> bool:
    """Build the dataclass, check the declaration, record it. Idempotent."""
    info = ctx.cls.info
    if not _make_fields(ctx):
        return False  # a field type is not ready yet (forward reference): next pass
    if METADATA_KEY in info.metadata:
        return True  # checked in an earlier pass over this module; report once
    fields = _class_fields(info)
    if fields is None:
        info.metadata[METADATA_KEY] = {"opaque": True}
        return True
    call = ctx.reason if isinstance(ctx.reason, CallExpr) else None
    declaration = _check_declaration(ctx.api.fail, "@container", info, fields, call, ctx.reason)
    info.metadata[METADATA_KEY] = declaration
    if not declaration["opaque"] and CHILDREN_METHOD not in info.names:
        self_type = fill_typevars(info)
        child_types = (
            [_field_type(self_type, name) for name in declaration["children"]]
            if isinstance(self_type, Instance)
            else []
        )
        iterator = ctx.api.named_type(
            "typing.Iterator", [make_simplified_union([t for t in child_types if t])]
        )
        add_method_to_class(ctx.api, ctx.cls, CHILDREN_METHOD, [], iterator)
    return True


def _make_fields(ctx: ClassDefContext) -> bool:
    """Run the class maker the runtime will use; False when it needs another pass.

    Registering this hook turns off mypy's automatic ``dataclass_transform`` handling of
    ``@container``, so the dataclass transform is chained here. An existing dataclass or
    attrs class keeps its own settings (SPEC §2): then its own decorator's hook builds it.
    That hook is called from here because mypy stops calling a class's later decorator
    hooks in a pass once one of them asked for another pass.
    """
    for decorator in ctx.cls.decorators:
        if decorator is ctx.reason:
            continue
        callee = decorator.callee if isinstance(decorator, CallExpr) else decorator
        fullname = callee.fullname if isinstance(callee, RefExpr) else ""
        other = _default_plugin(ctx.api.options).get_class_decorator_hook_2(fullname)
        if other is None and find_dataclass_transform_spec(decorator) is not None:
            other = dataclasses_plugin.dataclass_class_maker_callback
        if other is not None:
            return other(ClassDefContext(ctx.cls, decorator, ctx.api))
    if ctx.cls.info.is_named_tuple:
        return True  # a namedtuple is declared as it is (the runtime makes no dataclass)
    return dataclasses_plugin.dataclass_class_maker_callback(ctx)


_default_plugins: dict[int, Plugin] = {}


def _default_plugin(options: Options) -> Plugin:
    """Mypy's own plugin (dataclasses, attrs), to call its class hooks directly."""
    key = id(options)
    if key not in _default_plugins:
        _default_plugins.clear()
        _default_plugins[key] = DefaultPlugin(options)
    return _default_plugins[key]


class _Field(NamedTuple):
    name: str
    alias: str | None  # attrs' __init__ name for a private attribute; also accepted
    has_default: bool


def _class_fields(info: TypeInfo) -> list[_Field] | None:
    """The fields as the runtime lists them (``dataclasses.fields``, ``attrs.fields``)."""
    if "attrs" in info.metadata:
        return [
            # attrs' default alias is the name without leading underscores.
            _Field(a["name"], a.get("alias") or a["name"].lstrip("_"), a["has_default"])
            for a in info.metadata["attrs"]["attributes"]
        ]
    if "dataclass" in info.metadata:
        return [
            _Field(a["name"], None, a["has_default"])
            for a in info.metadata["dataclass"]["attributes"]
            if not a["is_init_var"]
        ]
    if "namedtuple" in info.metadata:
        defaults = _namedtuple_defaults(info)
        return [
            _Field(name, None, name in defaults) for name in info.metadata["namedtuple"]["fields"]
        ]
    return None


def _namedtuple_defaults(info: TypeInfo) -> set[str]:
    new = info.get("__new__")
    signature = get_proper_type(getattr(new.node, "type", None)) if new else None
    if not isinstance(signature, CallableType):
        return set()
    return {
        name
        for name, kind in zip(signature.arg_names, signature.arg_kinds, strict=True)
        if name and kind.is_optional()
    }


def _qualname(info: TypeInfo) -> str:
    """The class's ``__qualname__`` as the runtime messages show it."""
    prefix = info.module_name + "."
    if info.fullname.startswith(prefix) and "@" not in info.fullname:
        return info.fullname[len(prefix) :]
    return info.name  # a class defined in a function: mypy names it "Cls@line"


def _literal_names(call: CallExpr | None, option: str) -> tuple[bool, list[StrExpr] | None]:
    """Read ``option=`` from the call: (given, its strings or None when not literal)."""
    if call is None:
        return False, []
    for name, value in zip(call.arg_names, call.args, strict=True):
        if name != option:
            continue
        if _is_none(value):
            return False, []
        if isinstance(value, (ListExpr, TupleExpr)) and all(
            isinstance(item, StrExpr) for item in value.items
        ):
            return True, [item for item in value.items if isinstance(item, StrExpr)]
        return True, None
    return False, []


def _check_declaration(
    fail: Callable[..., object],
    where: str,
    info: TypeInfo,
    fields: list[_Field],
    call: CallExpr | None,
    context: Context,
) -> dict[str, Any]:
    """Report what the runtime would raise for this declaration; return its metadata.

    Mirrors ``containers._spec.build_spec``, but reports every problem, each on the
    string that causes it, instead of raising the first one.
    """
    cls_name = _qualname(info)
    names = [f.name for f in fields]
    by_name = {f.name: f.name for f in fields}
    by_name.update({f.alias: f.name for f in fields if f.alias and f.alias not in by_name})
    children_given, children_exprs = _literal_names(call, "children")
    keep_given, keep_exprs = _literal_names(call, "keep")
    if children_exprs is None or keep_exprs is None:
        # Not a literal list: only the runtime can check it, and fmap cannot know the
        # children, so it keeps the declared signature for this class.
        return {"opaque": True, "children": [], "keep": [], "reset": []}
    ok = True
    resolved: dict[str, list[str]] = {}
    for option, exprs in (("keep", keep_exprs), ("children", children_exprs)):
        resolved[option] = []
        for expr in exprs:
            if expr.value not in by_name:
                message = unknown_field_message(where, cls_name, expr.value, option, names)
                fail(message, expr, code=DECLARATION_ERROR)
                ok = False
            elif by_name[expr.value] in resolved[option]:
                message = listed_twice_message(where, cls_name, by_name[expr.value], option)
                fail(message, expr, code=DECLARATION_ERROR)
                ok = False
            else:
                resolved[option].append(by_name[expr.value])
    keep = resolved["keep"]
    if children_given:
        children = resolved["children"]
    else:
        children = [name for name in names if name not in keep]
    for expr in keep_exprs:
        name = by_name.get(expr.value)
        if name is not None and name in children and children_given:
            fail(in_both_message(where, cls_name, name), expr, code=DECLARATION_ERROR)
            ok = False
    reset: list[str] = []
    if not keep_given:
        keep = [name for name in names if name not in children]
    elif ok:
        # After a wrong name the reset fields are a guess: the name alone is reported.
        reset = [name for name in names if name not in children and name not in keep]
        for field in fields:
            if field.name in reset and not field.has_default:
                message = reset_without_default_message(where, cls_name, field.name)
                fail(message, context, code=DECLARATION_ERROR)
                ok = False
    return {"opaque": not ok, "children": children, "keep": keep, "reset": reset}


def _register_hook(ctx: FunctionContext) -> Type:
    """Check ``ct.register(cls, children=..., keep=...)`` like ``@container``."""
    if not ctx.args or not ctx.args[0] or not isinstance(ctx.context, CallExpr):
        return ctx.default_return_type
    target = get_proper_type(ctx.arg_types[0][0])
    info = None
    if isinstance(target, FunctionLike) and target.is_type_obj():
        info = target.type_object()
    elif isinstance(target, TypeType) and isinstance(target.item, Instance):
        info = target.item.type
    fields = _class_fields(info) if info is not None else None
    if info is not None and fields is not None:
        _check_declaration(ctx.api.fail, "register", info, fields, ctx.context, ctx.context)
    return ctx.default_return_type


# --- the static model of a tree -----------------------------------------------------


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
    """Full names of the classes that some declared container in the build inherits from.

    A value of such a class may be a container at runtime, so it is not a leaf. The scan
    covers the modules loaded so far and is redone when more are loaded.
    """
    modules = api.modules
    cached = _bases_cache.get(id(modules))
    if cached is not None and cached[0] == len(modules):
        return cached[1]
    bases: set[str] = set()
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


# --- call sites ---------------------------------------------------------------------


def _fresh_result_var(signature: CallableType, api: TypeChecker) -> TypeVarType:
    """A type variable for the new leaves, unused elsewhere in ``signature``."""
    namespace = f"{signature.name or 'containers'}.<containers>"
    return TypeVarType(
        "U",
        f"{namespace}.U",
        TypeVarId(-1 - len(signature.variables), namespace=namespace),
        [],
        api.named_type("builtins.object"),
        AnyType(TypeOfAny.from_omitted_generics),
    )


def _passed(
    formals: Sequence[str | None], actuals: list[list[Expression]], options: Sequence[str]
) -> bool:
    """Whether the call passes any of ``options``, other than as a literal None."""
    for formal, exprs in zip(formals, actuals, strict=True):
        if formal in options and exprs and not _is_none(exprs[0]):
            return True
    return False


def _is_none(expr: Expression) -> bool:
    return isinstance(expr, NameExpr) and expr.fullname == "builtins.None"


def _literal_bool(
    formals: Sequence[str | None], actuals: list[list[Expression]], option: str
) -> bool | None:
    """The literal value of a bool option (False when absent), or None if not literal."""
    for formal, exprs in zip(formals, actuals, strict=True):
        if formal == option and exprs:
            expr = exprs[0]
            if isinstance(expr, NameExpr) and expr.fullname in ("builtins.True", "builtins.False"):
                return expr.fullname == "builtins.True"
            return None
    return False


def _plain_call(context: Context) -> bool:
    """A call without ``*args``/``**kwargs``, whose trees are the written arguments."""
    return isinstance(context, CallExpr) and not any(
        kind in (ARG_STAR, ARG_STAR2) for kind in context.arg_kinds
    )


class _MapCall(NamedTuple):
    """An ``fmap``-like call whose trees the plugin can follow."""

    name: str  # "fmap", "fmapstructure" or "fmap_with_path"
    f: Expression
    tree: Type
    rest: list[Type]  # the other trees, read at the positions of the first one's leaves


def _map_call(
    name: str,
    api: TypeChecker,
    context: Context,
    formals: Sequence[str | None],
    actuals: list[list[Expression]],
    positional: Sequence[bool],
) -> _MapCall | None:
    """Read the call, or None where the leaves are not the natural ones.

    ``positional[i]`` says whether formal ``i`` takes positional trees (``*rest`` or, in
    an overload, a named positional parameter), which works for every overload item.
    """
    if (
        not _plain_call(context)
        or len(actuals) < 2
        or len(actuals[0]) != 1
        or len(actuals[1]) != 1
        or _passed(formals, actuals, _MAP_OPAQUE_OPTIONS)
    ):
        return None
    # The trees' own types: in the context of a parameter declared Any (or a TypeVar
    # bound by the call), mypy would infer [1, 2] as list[Any] and hide the leaves.
    tree = api.get_expression_type(actuals[1][0])
    rest = [
        api.get_expression_type(expr)
        for i in range(2, len(actuals))
        if positional[i]
        for expr in actuals[i]
    ]
    return _MapCall(name, actuals[0][0], tree, rest)


def _walk_map(
    call: _MapCall, api: TypeChecker, result: TypeVarType
) -> tuple[_Shapes, Type, list[Type]] | None:
    """Walk the trees: (shapes, the result type, f's parameter types)."""
    shapes = _Shapes(api, result)
    try:
        if call.name == "fmapstructure":
            claimed = shapes.structure(call.tree)
            shapes.visit(call.tree, None)
        else:
            claimed = shapes.rebuild(call.tree)
            shapes.visit(call.tree, claimed)
    except _Unknown:
        return None
    params: list[Type] = [make_simplified_union(shapes.leaves)]
    for other in call.rest:
        # f also takes the values of the other trees at the same positions; where they
        # do not line up statically, the runtime raises or passes subtrees: Any.
        try:
            params.append(make_simplified_union(shapes.aligned(call.tree, other)))
        except _Unknown:
            params.append(AnyType(TypeOfAny.special_form))
    if call.name == "fmap_with_path":
        params.insert(0, _key_path_type(api))
    return shapes, claimed, params


def _key_path_type(api: TypeChecker) -> Type:
    """``containers.KeyPath`` (a tuple of keys), or ``tuple[Any, ...]`` if not found."""
    module = api.modules.get("containers._paths")
    symbol = module.names.get("KeyPath") if module is not None else None
    if symbol is not None and isinstance(symbol.node, TypeAlias):
        return symbol.node.target
    return api.named_generic_type("builtins.tuple", [AnyType(TypeOfAny.special_form)])


def _map_signature(ctx: FunctionSigContext, name: str) -> FunctionLike:
    """``def [U] (f: Callable[[<leaves>, ...], U], tree: T, ...) -> <T with U leaves>``.

    ``U`` is left unbounded so that mypy infers it as usual (also from the type the
    result is assigned to); `_map_result` then checks the fields that keep their type.
    """
    signature = ctx.default_signature
    api = ctx.api
    if not isinstance(api, TypeChecker):
        return signature
    positional = [kind in (ARG_POS, ARG_OPT, ARG_STAR) for kind in signature.arg_kinds]
    call = _map_call(name, api, ctx.context, signature.arg_names, ctx.args, positional)
    walked = _walk_map(call, api, _fresh_result_var(signature, api)) if call else None
    if call is None or walked is None:
        return signature
    shapes, claimed, params = walked
    f_type = CallableType(
        params,
        [ARG_POS] * len(params),
        [None] * len(params),
        shapes.result,
        api.named_type("builtins.function"),
    )
    arg_types = list(signature.arg_types)
    arg_types[0], arg_types[1] = f_type, call.tree
    return signature.copy_modified(
        arg_types=arg_types, ret_type=claimed, variables=[*signature.variables, shapes.result]
    )


def _map_result(ctx: FunctionContext, name: str) -> Type:
    """Report an ``f`` whose results do not fit a field that keeps its type.

    Each such field is checked with the leaf type found there (a lambda is inferred again
    for that type), so a tree with leaves of several types is not held to one result type.
    """
    api = ctx.api
    if not isinstance(api, TypeChecker) or len(ctx.arg_types) < 2 or not ctx.arg_types[0]:
        return ctx.default_return_type
    positional = [bool(kinds) and set(kinds) == {ARG_POS} for kinds in ctx.arg_kinds]
    call = _map_call(name, api, ctx.context, ctx.callee_arg_names, ctx.args, positional)
    walked = _walk_map(call, api, _fresh_result_var(_dummy_signature(api), api)) if call else None
    if call is None or walked is None:
        return ctx.default_return_type
    shapes, _, params = walked
    failures: list[tuple[Type, ProperType, str]] = []
    checked: set[tuple[str, str, str]] = set()
    leaf_index = 1 if name == "fmap_with_path" else 0
    for leaf, holds, where in shapes.slots:
        key = (str(leaf), str(holds), where)
        if key in checked:
            continue
        checked.add(key)
        args = [*params[:leaf_index], leaf, *params[leaf_index + 1 :]]
        returned = _apply(api, call.f, ctx.arg_types[0][0], args, ctx.context)
        if returned is not None and not is_subtype(returned, holds):
            failures.append((returned, holds, where))
    if failures:
        returned, holds, where = failures[0]
        more = f" (and {len(failures) - 1} more fields)" if len(failures) > 1 else ""
        api.fail(
            f'{name}: f returns "{_show(returned, api)}" for the leaves in {where}, but a '
            f'rebuilt {where.split(".")[0]} must hold "{_show(holds, api)}" there{more}',
            ctx.context,
            code=LEAF_ERROR,
        )
    return ctx.default_return_type


def _apply(
    api: TypeChecker, f_expr: Expression, f_type: Type, params: list[Type], context: Context
) -> Type | None:
    """The return type of ``f`` for arguments of types ``params``; None when unknown."""
    kinds = [ARG_POS] * len(params)
    with api.msg.filter_errors() as watcher, api.local_type_map:
        if isinstance(f_expr, LambdaExpr):
            saved = [arg.variable.type for arg in f_expr.arguments]
            expected = CallableType(
                params,
                kinds,
                [None] * len(params),
                AnyType(TypeOfAny.special_form),
                api.named_type("builtins.function"),
            )
            inferred = get_proper_type(api.expr_checker.accept(f_expr, expected))
            for arg, original in zip(f_expr.arguments, saved, strict=True):
                arg.variable.type = original
            returned = inferred.ret_type if isinstance(inferred, CallableType) else None
        else:
            args: list[Expression] = [TempNode(p, context=context) for p in params]
            returned, _ = api.expr_checker.check_call(f_type, args, kinds, context)
    if watcher.has_new_errors():
        return None
    proper = get_proper_type(returned) if returned is not None else None
    return None if proper is None or isinstance(proper, AnyType) else proper


def _show(t: Type, api: TypeChecker) -> str:
    return format_type_bare(t, api.options)


def _dummy_signature(api: TypeChecker) -> CallableType:
    return CallableType([], [], [], NoneType(), api.named_type("builtins.function"))


def _flatten_result(ctx: FunctionContext) -> Type:
    """Leaves as ``list[<leaf types>]``; ``Structure[Any]`` when leaves are not natural.

    With ``is_leaf=`` or ``none_is_leaf=True`` the leaves are cut elsewhere than the tree
    type says, so the tree type is dropped from the Structure: unflatten could not rebuild
    it faithfully.
    """
    declared = ctx.default_return_type
    api = ctx.api
    if (
        not isinstance(api, TypeChecker)
        or not ctx.arg_types
        or len(ctx.arg_types[0]) != 1
        or not _plain_call(ctx.context)
    ):
        return declared
    custom = _passed(ctx.callee_arg_names, ctx.args, _FLATTEN_OPAQUE_OPTIONS)
    none_is_leaf = _literal_bool(ctx.callee_arg_names, ctx.args, "none_is_leaf")
    leaf_list: Type | None = None
    if not custom and none_is_leaf is not None:
        shapes = _Shapes(
            api, _fresh_result_var(_dummy_signature(api), api), none_is_leaf=none_is_leaf
        )
        try:
            shapes.visit(_tree_type(api, ctx.args[0][0]), None)
            leaf_list = api.named_generic_type(
                "builtins.list", [make_simplified_union(shapes.leaves)]
            )
        except _Unknown:
            pass
    forget = custom or none_is_leaf is not False

    def replace(t: Type) -> Type:
        p = get_proper_type(t)
        if isinstance(p, Instance) and _is_structure(p.type) and forget:
            return p.copy_modified(args=[AnyType(TypeOfAny.special_form)] * len(p.args))
        if isinstance(p, Instance) and p.type.fullname == "builtins.list" and leaf_list:
            return leaf_list
        return t

    proper = get_proper_type(declared)
    if isinstance(proper, TupleType):
        return proper.copy_modified(items=[replace(item) for item in proper.items])
    return replace(proper)


def _tree_type(api: TypeChecker, expr: Expression) -> Type:
    """The tree argument's own type: in the context of a parameter declared ``Any``,
    mypy infers ``[1, 2]`` as ``list[Any]``, which hides the leaves."""
    return api.get_expression_type(expr)


def _is_structure(info: TypeInfo) -> bool:
    return info.name == "Structure" and _api_name(info.fullname) is not None


def _unflatten_signature(ctx: FunctionSigContext) -> FunctionLike:
    api = ctx.api
    if not isinstance(api, TypeChecker) or len(ctx.args) < 2 or len(ctx.args[0]) != 1:
        return ctx.default_signature
    structure = get_proper_type(api.get_expression_type(ctx.args[0][0]))
    return _rebuilding_signature(ctx.default_signature, structure, api, ctx.context, 1)


def _structure_unflatten_signature(ctx: MethodSigContext) -> FunctionLike:
    api = ctx.api
    if not isinstance(api, TypeChecker):
        return ctx.default_signature
    return _rebuilding_signature(ctx.default_signature, ctx.type, api, ctx.context, 0)


def _unflatten_shapes(
    structure: ProperType, api: TypeChecker, signature: CallableType, context: Context
) -> tuple[_Shapes, Type] | None:
    """Rebuild the tree type kept in ``Structure[X]`` with new leaves."""
    if not (
        _plain_call(context)
        and isinstance(structure, Instance)
        and _is_structure(structure.type)
        and structure.args
    ):
        return None
    shapes = _Shapes(api, _fresh_result_var(signature, api))
    try:
        result = shapes.rebuild(structure.args[0])
        shapes.visit(structure.args[0], result)
    except _Unknown:
        return None
    return shapes, result


def _rebuilding_signature(
    signature: CallableType,
    structure: ProperType,
    api: TypeChecker,
    context: Context,
    leaves_index: int,
) -> FunctionLike:
    """``(Structure[X], leaves: Iterable[U]) -> <X with U leaves>``."""
    walked = _unflatten_shapes(structure, api, signature, context)
    if walked is None or len(signature.arg_types) <= leaves_index:
        return signature
    shapes, result = walked
    arg_types = list(signature.arg_types)
    arg_types[leaves_index] = api.named_generic_type("typing.Iterable", [shapes.result])
    return signature.copy_modified(
        arg_types=arg_types, ret_type=result, variables=[*signature.variables, shapes.result]
    )


def _unflatten_result(ctx: FunctionContext | MethodContext) -> Type:
    """Report leaves that no field keeping its type could hold.

    The leaves are one iterable, so which leaf lands where is unknown: only leaves whose
    type cannot overlap a field's type are certainly wrong.
    """
    api = ctx.api
    if isinstance(ctx, MethodContext):
        structure, leaves_index = ctx.type, 0
    elif ctx.arg_types and len(ctx.arg_types[0]) == 1:
        structure, leaves_index = get_proper_type(ctx.arg_types[0][0]), 1
    else:
        return ctx.default_return_type
    if not isinstance(api, TypeChecker) or len(ctx.arg_types) <= leaves_index:
        return ctx.default_return_type
    if len(ctx.arg_types[leaves_index]) != 1:
        return ctx.default_return_type
    walked = _unflatten_shapes(structure, api, _dummy_signature(api), ctx.context)
    if walked is None:
        return ctx.default_return_type
    _, item = api.analyze_iterable_item_type_without_expression(
        ctx.arg_types[leaves_index][0], ctx.context
    )
    for _, holds, where in walked[0].slots:
        if not is_overlapping_types(item, holds):
            api.fail(
                f'unflatten: the leaves are "{_show(item, api)}", but a rebuilt '
                f'{where.split(".")[0]} must hold "{_show(holds, api)}" in {where}',
                ctx.context,
                code=LEAF_ERROR,
            )
            break
    return ctx.default_return_type
