"""Generated per-class code: pure builders ``spec -> (source, globals)``, one exec per class.

This stage turns a validated ContainerSpec into the node protocol as straight-line
functions (flatten, children, unflatten, rebuild and the four protocol methods) and
registers their source with ``linecache`` so tracebacks and ``inspect.getsource`` show
it. It never validates (the spec is trusted), never registers classes, and holds no
walk policy: fmap's per-class mappers are the engine's (``_engine._mappers``), which
builds instances with the lines given here (``construct_lines``, ``unpack_lines``,
``guarded_lines``), as interop's adapters do. The ``plain_*`` twins at the end say the
same thing with getattr loops; property tests check that both agree.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from containers._compiled import SPEEDUPS, exec_source, source_filename
from containers._errors import SchemaError, StructureError, type_name
from containers._spec import ContainerSpec

__all__ = [
    "Generated",
    "base_globals",
    "build_source",
    "compile_spec",
    "construct_lines",
    "field_sources",
    "guarded_lines",
    "kept_snapshot",
    "plain_deserialize",
    "plain_flatten",
    "plain_flatten_snapshot",
    "plain_rebuild",
    "plain_reduce",
    "plain_serialize",
    "plain_traverse",
    "plain_unflatten",
    "plain_unflatten_fresh",
    "setattr_stores",
    "unpack_lines",
    "unset_field_error",
]


class Generated(NamedTuple):
    """The compiled functions of one class (see ``build_source`` for their contracts)."""

    flatten: Callable[[Any], tuple[tuple[Any, ...], tuple[Any, ...]]]
    unflatten: Callable[[tuple[Any, ...], Sequence[Any]], Any]
    #: A Structure's pair: ``flatten`` and ``unflatten`` themselves for a class without
    #: kept fields, else the ones that snapshot and copy mutable kept values.
    flatten_snapshot: Callable[[Any], tuple[tuple[Any, ...], tuple[Any, ...]]]
    unflatten_fresh: Callable[[tuple[Any, ...], Sequence[Any]], Any]
    rebuild: Callable[[Any, Sequence[Any]], Any]
    children: Callable[[Any], tuple[Any, ...]]
    traverse: Callable[..., Any]
    reduce: Callable[..., Any]
    serialize: Callable[..., Any]
    deserialize: Any  # a classmethod object, attached to the class as is
    source: str
    filename: str


def construct_lines(
    spec: ContainerSpec, values: dict[str, str], g: dict[str, Any], returned: bool = True
) -> list[str]:
    """Lines building a new instance whose fields get the expressions in ``values``,
    and returning it (or, unless ``returned``, leaving it in ``_i``).

    Reset fields get their defaults. No ``__init__``, ``__post_init__`` or validator
    runs: mapped values may have any type. With the compiled engine, one call of
    ``_speedups.new_instance`` stores the fields as ``plain_unflatten`` does, where
    that is where these lines store them (``setattr_stores``); this keeps CPython's
    compact instance values (3.11+), where writing ``_i.__dict__`` makes a dict per
    instance (benchmarks/run.py, W3id: 0.9x the hand-written code, from 1.2x).
    Otherwise (and with a reset field whose factory takes the instance) the lines
    write the instance's dict and slots.
    """
    for name in spec.reset:
        default = spec.defaults[name]
        if default.how == "value":
            g[f"_ct_default_{name}"] = default.value
            values[name] = f"_ct_default_{name}"
        elif default.how == "factory":
            g[f"_ct_factory_{name}"] = default.value
            values[name] = f"_ct_factory_{name}()"
    if spec.flavor == "namedtuple":
        g["_ct_tuple_new"] = tuple.__new__
        args = ", ".join(values[n] for n in spec.fields)
        built = f"_ct_tuple_new(_ct_cls, ({args}{',' if args else ''}))"
        return [f"return {built}" if returned else f"_i = {built}"]

    if SPEEDUPS is not None and all(n in values for n in spec.fields) and setattr_stores(spec):
        g["_ct_new_instance"] = SPEEDUPS.new_instance
        g["_ct_fields"] = tuple(spec.fields)
        args = "".join(f", {values[n]}" for n in spec.fields)
        built = f"_ct_new_instance(_ct_cls, _ct_fields{args})"
        return [f"return {built}" if returned else f"_i = {built}"]
    lines = ["_i = _ct_new(_ct_cls)"]
    if any(n not in spec.slots for n in spec.fields):
        lines.append("_d = _i.__dict__")
    after: list[str] = []
    for name in spec.fields:
        if name not in values:  # a reset field whose attrs factory takes self
            g[f"_ct_factory_{name}"] = spec.defaults[name].value
            values[name] = f"_ct_factory_{name}(_i)"
            target = after
        else:
            target = lines
        if name in spec.slots:
            # Slot descriptors write past frozen __setattr__ (attrs/dataclass slots=True).
            g[f"_ct_slot_{name}"] = _slot_descriptor(spec.cls, name).__set__
            target.append(f"_ct_slot_{name}(_i, {values[name]})")
        else:
            target.append(f"_d[{name!r}] = {values[name]}")
    return [*lines, *after, *(["return _i"] if returned else [])]


def setattr_stores(spec: ContainerSpec) -> bool:
    """Whether ``object.__setattr__`` stores each field where ``_construct``'s lines
    do: the class attribute of a field's name is a data descriptor exactly for the
    fields in slots (their slot descriptors, which the lines call too). Another data
    descriptor would take a store that the lines make into the instance's dict."""
    for name in spec.fields:
        found = next((k.__dict__[name] for k in spec.cls.__mro__ if name in k.__dict__), None)
        data = hasattr(type(found), "__set__") or hasattr(type(found), "__delete__")
        if data != (name in spec.slots):
            return False
    return True


def field_sources(spec: ContainerSpec) -> tuple[tuple[str, str, Any], ...]:
    """Where each field of a rebuilt instance comes from, in declaration order, as the
    compiled ``Rebuild`` and ``MapNode`` read it: ``(name, how, arg)``, how ``"child"``
    or ``"kept"`` (arg: the index in ``spec.children`` or ``spec.keep``), or for a reset
    field its default's (``"value"``, ``"factory"``, ``"factory_self"``; arg: the
    default or the factory)."""
    fields: list[tuple[str, str, Any]] = []
    for name in spec.fields:
        if name in spec.children:
            fields.append((name, "child", spec.children.index(name)))
        elif name in spec.keep:
            fields.append((name, "kept", spec.keep.index(name)))
        else:
            default = spec.defaults[name]
            fields.append((name, default.how, default.value))
    return tuple(fields)


def guarded_lines(obj: str, body: list[str]) -> list[str]:
    """``body`` reading fields of ``obj``: an unset field (``init=False``, never
    assigned) is reported by name; try costs nothing until it catches. No lines for an
    empty body."""
    if not body:
        return []
    return [
        "try:",
        *(f"    {line}" for line in body),
        "except AttributeError as _e:",
        f"    raise _ct_unset({obj}, _e) from None",
    ]


def _slot_descriptor(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise AssertionError(name)  # the spec only lists slots it found


def unpack_lines(names: Sequence[str], source: str) -> list[str]:
    if not names:
        return []
    targets = ", ".join(f"_c{i}" for i in range(len(names)))
    return [f"{targets}{',' if len(names) == 1 else ''} = {source}"]


def base_globals(spec: ContainerSpec) -> dict[str, Any]:
    """The globals every generated function of ``spec``'s class reads: the class, the
    allocator ``construct_lines`` calls, and the unset-field error ``guarded_lines``
    raises."""
    return {"_ct_cls": spec.cls, "_ct_new": object.__new__, "_ct_unset": unset_field_error(spec)}


def build_source(spec: ContainerSpec) -> tuple[str, dict[str, Any]]:
    """Build the source and globals of one class's generated functions.

    - ``flatten(x) -> (children, kept)``: tuples in visit and keep order.
    - ``unflatten(kept, children) -> new``: children a sequence in visit order.
    - ``rebuild(x, children) -> new``: kept values read from ``x``.
    - ``children(x) -> tuple``: the children in visit order.
    - the four ``__container_*__`` protocol methods.
    """
    g = base_globals(spec)
    g["_ct_name"] = spec.name
    g["_ct_missing"] = _missing_field_error(spec)
    kids, kept = spec.children, spec.keep
    child_vars = {n: f"_c{i}" for i, n in enumerate(kids)}

    def tup(items: Iterable[str]) -> str:
        items = list(items)
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"

    out: list[str] = []

    def emit(header: str, body: list[str]) -> None:
        out.append(header)
        out.extend(f"    {line}" for line in (body or ["pass"]))
        out.append("")

    emit(
        "def flatten(x):",
        guarded_lines(
            "x", [f"return {tup(f'x.{n}' for n in kids)}, {tup(f'x.{n}' for n in kept)}"]
        ),
    )
    emit("def children(x):", guarded_lines("x", [f"return {tup(f'x.{n}' for n in kids)}"]))
    values = {**child_vars, **{n: f"kept[{i}]" for i, n in enumerate(kept)}}
    emit(
        "def unflatten(kept, children):",
        unpack_lines(kids, "children") + construct_lines(spec, values, g),
    )
    if kept:
        # A Structure's own pair: flatten_snapshot snapshots the kept values that are
        # mutable and unhashable, so that a Structure cannot change, and unflatten_fresh
        # gives each rebuilt instance its own copy (its snapshot is never handed out).
        # flatten and unflatten, which fmap, walks and the protocol use, stay live.
        g["_ct_atomic"] = ATOMIC
        g["_ct_snap"] = kept_snapshot(spec)
        kept_vars = [f"_k{i}" for i in range(len(kept))]
        emit(
            "def flatten_snapshot(x):",
            guarded_lines(
                "x",
                [f"_r = {tup(f'x.{n}' for n in kids)}"]
                + [f"{v} = x.{n}" for v, n in zip(kept_vars, kept)],
            )
            + _snapshot_lines(kept_vars)
            + [f"return _r, {tup(kept_vars)}"],
        )
        values = {**child_vars, **dict(zip(kept, kept_vars))}
        emit(
            "def unflatten_fresh(kept, children):",
            unpack_lines(kids, "children")
            + [f"{v} = kept[{i}]" for i, v in enumerate(kept_vars)]
            + _snapshot_lines(kept_vars)
            + construct_lines(spec, values, g),
        )
    values = {**child_vars, **{n: f"x.{n}" for n in kept}}
    emit(
        "def rebuild(x, children):",
        unpack_lines(kids, "children")
        + (
            guarded_lines("x", construct_lines(spec, values, g))
            if kept
            else construct_lines(spec, values, g)
        ),
    )
    emit(
        "def __container_traverse__(self, acc, fun, /):",
        guarded_lines(
            "self",
            [f"{child_vars[n]}, acc = fun(self.{n}, acc)" for n in kids]
            + [f"return rebuild(self, {tup(child_vars[n] for n in kids)}), acc"],
        ),
    )
    emit(
        "def __container_reduce__(self, acc, fun, /):",
        guarded_lines("self", [f"acc = fun(self.{n}, acc)" for n in kids] + ["return acc"]),
    )
    pairs = ", ".join(f"({n!r}, self.{n})" for n in kids)
    meta = ", ".join(f"{n!r}: self.{n}" for n in kept)
    emit(
        "def __container_serialize__(self):",
        guarded_lines("self", [f"return _ct_name, [{pairs}], {{{meta}}}"]),
    )
    emit(
        "def __container_deserialize__(cls, children, metadata, /):",
        [
            "_kids = dict(children)",
            "try:",
            f"    _kept = {tup(f'metadata[{n!r}]' for n in kept)}",
            f"    _children = {tup(f'_kids[{n!r}]' for n in kids)}",
            "except KeyError as e:",
            "    raise _ct_missing(e.args[0], metadata) from None",
            "return unflatten(_kept, _children)",
        ],
    )
    return "\n".join(out), g


#: Kept values of these types are immutable: flatten_snapshot and unflatten_fresh pass
#: them as they are.
ATOMIC = frozenset({str, int, float, bool, complex, bytes, type(None)})


def _snapshot_lines(names: Sequence[str]) -> list[str]:
    """Lines replacing each kept value in ``names`` that is not of an ``ATOMIC`` type by
    ``kept_snapshot``'s result (the value itself if hashable, else a deep copy)."""
    return [
        line
        for i, v in enumerate(names)
        for line in (f"if type({v}) not in _ct_atomic:", f"    {v} = _ct_snap({v}, {i})")
    ]


def kept_snapshot(spec: ContainerSpec) -> Callable[[Any, int], Any]:
    """``snap(value, i)``: the kept value ``value`` of field ``spec.keep[i]`` as a
    Structure holds it: itself if hashable (its hash promises that its equality does
    not change), else a deep copy (a list, a dict, an array: equal by content, yet
    mutable). The generated ``flatten_snapshot`` snapshots with it, and
    ``unflatten_fresh`` copies again per rebuilt instance."""
    cls_name = type_name(spec.cls)
    keep = spec.keep

    def snap(value: Any, i: int) -> Any:
        try:
            hash(value)
            return value
        except TypeError:
            pass
        try:
            return copy.deepcopy(value)
        except Exception as err:
            raise StructureError(
                f"the kept value {keep[i]!r} of a {cls_name} is a {type_name(type(value))}, "
                f"mutable and unhashable, which a Structure copies so as to stay "
                f"unchanged, but the copy failed ({type(err).__name__}: {err}). Keep a "
                f"hashable value (a tuple) instead, or make it copyable."
            ) from None

    return snap


def _missing_field_error(spec: ContainerSpec) -> Callable[[str, Any], SchemaError]:
    cls_name = type_name(spec.cls)

    def missing(name: str, metadata: Any) -> SchemaError:
        role = "kept field" if name in spec.keep else "child"
        return SchemaError(
            f"{cls_name}.__container_deserialize__: the data has no value for {role} "
            f"{cls_name}.{name}. Pass every child as (key, child) pairs and every kept "
            f"field in metadata, as __container_serialize__ gives them."
        )

    return missing


def unset_field_error(spec: ContainerSpec) -> Callable[[Any, AttributeError], Exception]:
    cls_name = type_name(spec.cls)

    def unset(obj: Any, err: AttributeError) -> Exception:
        name = getattr(err, "name", None)
        if getattr(err, "obj", obj) is not obj or name not in spec.fields:
            return err  # not a field of this object: someone else's error, unchanged
        return StructureError(
            f"{cls_name}.{name} is not set on this {cls_name} (a field declared with "
            f"init=False and never assigned), and containers read every child and kept "
            f"field. Assign it in __post_init__, or give it a default."
        )

    return unset


def compile_spec(spec: ContainerSpec) -> Generated:
    """Compile ``build_source(spec)`` with one ``exec`` and register it in linecache."""
    source, g = build_source(spec)
    filename = source_filename(f"{spec.cls.__module__}.{type_name(spec.cls)}")
    exec_source(source, g, filename)
    deserialize: Any = classmethod(g["__container_deserialize__"])
    return Generated(
        flatten=g["flatten"],
        unflatten=g["unflatten"],
        flatten_snapshot=g.get("flatten_snapshot", g["flatten"]),
        unflatten_fresh=g.get("unflatten_fresh", g["unflatten"]),
        rebuild=g["rebuild"],
        children=g["children"],
        traverse=g["__container_traverse__"],
        reduce=g["__container_reduce__"],
        serialize=g["__container_serialize__"],
        deserialize=deserialize,
        source=source,
        filename=filename,
    )


# --- the plain twins: the same semantics with getattr loops --------------------------


def plain_flatten(spec: ContainerSpec, x: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """``flatten`` without generated code."""
    return (
        tuple(getattr(x, n) for n in spec.children),
        tuple(getattr(x, n) for n in spec.keep),
    )


def plain_flatten_snapshot(spec: ContainerSpec, x: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """``flatten_snapshot`` without generated code: unhashable kept values snapshotted."""
    children, kept = plain_flatten(spec, x)
    return children, _snapshot(spec, kept)


def _snapshot(spec: ContainerSpec, kept: Sequence[Any]) -> tuple[Any, ...]:
    """``kept`` with each value passed through ``kept_snapshot``."""
    if not kept:
        return tuple(kept)
    snap = kept_snapshot(spec)
    return tuple(snap(v, i) for i, v in enumerate(kept))


def plain_unflatten(spec: ContainerSpec, kept: Sequence[Any], children: Sequence[Any]) -> Any:
    """``unflatten`` without generated code: the kept values as given."""
    return _store(spec, kept, children)


def plain_unflatten_fresh(
    spec: ContainerSpec, kept: Sequence[Any], children: Sequence[Any]
) -> Any:
    """``unflatten_fresh`` without generated code: each instance gets its own copy of an
    unhashable kept value."""
    return _store(spec, _snapshot(spec, kept), children)


def _store(spec: ContainerSpec, kept: Sequence[Any], children: Sequence[Any]) -> Any:
    """A new instance with these children and kept values, reset fields defaulted."""
    values = dict(zip(spec.children, children))
    values.update(zip(spec.keep, kept))
    for name in spec.reset:
        default = spec.defaults[name]
        if default.how == "value":
            values[name] = default.value
        elif default.how == "factory":
            values[name] = default.value()
    if spec.flavor == "namedtuple":
        return tuple.__new__(spec.cls, tuple(values[n] for n in spec.fields))
    inst: Any = object.__new__(spec.cls)
    for name in spec.fields:
        if name in values:
            object.__setattr__(inst, name, values[name])
    for name in spec.reset:
        if spec.defaults[name].how == "factory_self":
            object.__setattr__(inst, name, spec.defaults[name].value(inst))
    return inst


def plain_rebuild(spec: ContainerSpec, x: Any, children: Sequence[Any]) -> Any:
    """``rebuild`` without generated code: ``x``'s kept values, shared."""
    return _store(spec, tuple(getattr(x, n) for n in spec.keep), children)


def plain_traverse(spec: ContainerSpec, x: Any, acc: Any, fun: Callable[..., Any]) -> Any:
    """``__container_traverse__`` without generated code."""
    out = []
    for name in spec.children:
        child, acc = fun(getattr(x, name), acc)
        out.append(child)
    return plain_rebuild(spec, x, out), acc


def plain_reduce(spec: ContainerSpec, x: Any, acc: Any, fun: Callable[..., Any]) -> Any:
    """``__container_reduce__`` without generated code."""
    for name in spec.children:
        acc = fun(getattr(x, name), acc)
    return acc


def plain_serialize(
    spec: ContainerSpec, x: Any
) -> tuple[str, list[tuple[str, Any]], dict[str, Any]]:
    """``__container_serialize__`` without generated code."""
    return (
        spec.name,
        [(n, getattr(x, n)) for n in spec.children],
        {n: getattr(x, n) for n in spec.keep},
    )


def plain_deserialize(
    spec: ContainerSpec, children: Iterable[tuple[str, Any]], metadata: dict[str, Any]
) -> Any:
    """``__container_deserialize__`` without generated code."""
    kids = dict(children)
    return plain_unflatten(
        spec, [metadata[n] for n in spec.keep], [kids[n] for n in spec.children]
    )
