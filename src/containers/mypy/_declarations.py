"""Declarations: ``@container`` and ``register(...)`` checked at type-check time, in the
runtime's words (``containers._errors``), and recorded in ``TypeInfo.metadata``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from mypy.nodes import (
    CallExpr,
    Context,
    ListExpr,
    RefExpr,
    StrExpr,
    TupleExpr,
    TypeInfo,
)
from mypy.options import Options
from mypy.plugin import (
    ClassDefContext,
    FunctionContext,
    Plugin,
)
from mypy.plugins import dataclasses as dataclasses_plugin
from mypy.plugins.common import add_method_to_class
from mypy.plugins.default import DefaultPlugin
from mypy.semanal_shared import find_dataclass_transform_spec
from mypy.typeops import make_simplified_union
from mypy.types import (
    CallableType,
    FunctionLike,
    Instance,
    Type,
    TypeType,
    get_proper_type,
)
from mypy.typevars import fill_typevars

from containers._errors import (
    in_both_message,
    listed_twice_message,
    reset_without_default_message,
    unknown_field_message,
)
from containers.mypy._common import CHILDREN_METHOD, DECLARATION_ERROR, METADATA_KEY
from containers.mypy._hooks import _is_none
from containers.mypy._shapes import _field_type


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
    attrs class keeps its own settings (docs/api.md): then its own decorator's hook builds it.
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
