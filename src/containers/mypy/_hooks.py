"""Call sites: the signature and result hooks of ``fmap``, ``fmapstructure``,
``fmap_with_path``, ``flatten``, ``leaves``, ``structure`` and ``unflatten``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from mypy.checker import TypeChecker
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
    NameExpr,
    TempNode,
    TypeAlias,
    TypeInfo,
)
from mypy.plugin import (
    FunctionContext,
    FunctionSigContext,
    MethodContext,
    MethodSigContext,
)
from mypy.subtypes import is_subtype
from mypy.typeops import make_simplified_union
from mypy.types import (
    AnyType,
    CallableType,
    FunctionLike,
    Instance,
    NoneType,
    ProperType,
    TupleType,
    Type,
    TypedDictType,
    TypeOfAny,
    TypeVarId,
    TypeVarType,
    UnionType,
    get_proper_type,
)

from containers.mypy._common import (
    _FLATTEN_OPAQUE_OPTIONS,
    _MAP_OPAQUE_OPTIONS,
    LEAF_ERROR,
    METADATA_KEY,
    _api_name,
)
from containers.mypy._shapes import _Shapes, _Unknown


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
    _check_bounds(api, name, ctx.default_return_type, ctx.context)
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


def _check_bounds(api: TypeChecker, name: str, result: Type, context: Context) -> None:
    """Report a rebuilt container whose new type argument breaks its type parameter's
    bound or value restriction (``Bound[str]`` for ``N: bound=float``): mypy does not
    check the type arguments of an inferred type."""
    stack = [result]
    seen: set[int] = set()
    while stack:
        p = get_proper_type(stack.pop())
        if id(p) in seen:
            continue
        seen.add(id(p))
        if isinstance(p, UnionType | TupleType):
            stack.extend(p.items)
        elif isinstance(p, TypedDictType):
            stack.extend(p.items.values())
        elif isinstance(p, Instance):
            stack.extend(p.args)
            if METADATA_KEY not in p.type.metadata:
                continue
            for tv, arg in zip(p.type.defn.type_vars, p.args, strict=False):
                if not isinstance(tv, TypeVarType) or isinstance(get_proper_type(arg), AnyType):
                    continue
                if tv.values:
                    if any(is_subtype(arg, v) for v in tv.values):
                        continue
                    need = "one of " + ", ".join(f'"{_show(v, api)}"' for v in tv.values)
                elif is_subtype(arg, tv.upper_bound):
                    continue
                else:
                    need = f'a subtype of "{_show(tv.upper_bound, api)}"'
                api.fail(
                    f'{name}: the result would be "{_show(p, api)}", but the type argument '
                    f'"{_show(arg, api)}" of {p.type.name}\'s parameter {tv.name} must be '
                    f"{need}",
                    context,
                    code=LEAF_ERROR,
                )
                return


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
    _check_bounds(api, "unflatten", ctx.default_return_type, ctx.context)
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
