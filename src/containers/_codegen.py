"""Generated per-class code: pure builders ``spec -> (source, globals)``, one exec per class.

This stage turns a validated ContainerSpec into straight-line functions (flatten,
unflatten, rebuild, fmap's mapper and the four protocol methods), builds fmap's tuple
mappers (small tuples unrolled), and registers all their source with ``linecache`` so
tracebacks and ``inspect.getsource`` show it. It never validates
(the spec is trusted) and never registers classes. The ``plain_*`` twins at the end
say the same thing with getattr loops; property tests check that both agree.
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import CellType, FunctionType
from typing import Any, NamedTuple, TypeVar

from containers._errors import SchemaError, StructureError, type_name
from containers._spec import ContainerSpec

__all__ = [
    "MAPPER_ARGS",
    "Generated",
    "build_source",
    "compile_loop",
    "compile_pair_loop",
    "compile_pair_mapper",
    "compile_spec",
    "compile_tuple_mapper",
    "loop_source",
    "pair_loop_source",
    "pair_mapper_source",
    "plain_deserialize",
    "plain_flatten",
    "plain_rebuild",
    "plain_reduce",
    "plain_serialize",
    "plain_traverse",
    "plain_unflatten",
    "rebind",
    "tuple_mapper_source",
]

_counter = itertools.count()
F = TypeVar("F", bound=Callable[..., Any])


class Generated(NamedTuple):
    """The compiled functions of one class (see ``build_source`` for their contracts)."""

    flatten: Callable[[Any], tuple[tuple[Any, ...], tuple[Any, ...]]]
    make_mapper: Callable[..., Callable[[Any, int], Any]]
    unflatten: Callable[[tuple[Any, ...], Sequence[Any]], Any]
    rebuild: Callable[[Any, Sequence[Any]], Any]
    children: Callable[[Any], tuple[Any, ...]]
    traverse: Callable[..., Any]
    reduce: Callable[..., Any]
    serialize: Callable[..., Any]
    deserialize: Any  # a classmethod object, attached to the class as is
    source: str
    filename: str


def _construct(spec: ContainerSpec, values: dict[str, str], g: dict[str, Any]) -> list[str]:
    """Lines building a new instance whose fields get the expressions in ``values``.

    Reset fields get their defaults. No ``__init__``, ``__post_init__`` or validator
    runs: mapped values may have any type.
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
        return [f"return _ct_tuple_new(_ct_cls, ({args}{',' if args else ''}))"]

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
    return [*lines, *after, "return _i"]


def _slot_descriptor(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise AssertionError(name)  # the spec only lists slots it found


def _unpack(names: Sequence[str], source: str) -> list[str]:
    if not names:
        return []
    targets = ", ".join(f"_c{i}" for i in range(len(names)))
    return [f"{targets}{',' if len(names) == 1 else ''} = {source}"]


# What fmap's fast path hands a generated mapper factory, in this order (``_fmap._Mode``
# builds ``mode.mapper_args`` from these names). Keep it short: a closure copies every
# free variable it uses into its frame on each call.
MAPPER_ARGS = (
    "f",
    "node",
    "direct",
    "immutable",
    "leaf_types",
    "results",
    "keep",
    "use_prune",
    "prune",
    "loop",
    "max_depth",
    "deep",
    "structural",
)

# Tuples up to this length get an unrolled branch for all-immutable-leaf contents.
UNROLLED_TUPLE_LENGTH = 4


def _map_child(value: str, target: str, depth: str) -> list[str]:
    """Lines setting ``target`` to fmap's result for the child in variable ``value``.

    An immutable leaf (a value) is passed to ``f``; every other leaf goes through the
    identity cache, inline (``results`` by id, ``keep`` holding the keys' objects,
    ``prune`` for repeats); a node goes to its mapper in ``direct`` or to ``node``.
    """
    return [f"_t = type({value})", *_map_typed_child(value, target, depth)]


def _map_typed_child(value: str, target: str, depth: str) -> list[str]:
    """``_map_child`` once ``_t`` holds the child's type."""
    return [
        "if _t in immutable:",
        f"    {target} = f({value})",
        "elif _t in leaf_types:",
        f"    _k = id({value})",
        "    if _k in results:",  # a bytecode, not a call like results.get
        f"        {target} = prune if use_prune else results[_k]",
        "    else:",
        f"        {target} = results[_k] = f({value})",
        f"        keep({value})",
        "else:",
        "    _m = direct(_t)",
        f"    {target} = _m({value}, {depth}) if _m is not None else node({value}, {depth})",
    ]


def _mapper_factory(name: str, body: list[str], params: str = "x, depth") -> list[str]:
    """The body of ``make_mapper(mode)``: unpack ``mode.mapper_args``, define ``name``."""
    return [
        f"{', '.join(MAPPER_ARGS)} = mode.mapper_args",
        f"def {name}({params}):",
        *(f"    {line}" for line in body),
        f"return {name}",
    ]


def _unrolled_tuples(trees: str, done: Callable[[str], list[str]]) -> list[str]:
    """``if``/``elif`` branches mapping tuples of up to UNROLLED_TUPLE_LENGTH immutable
    leaves to ``(f(_a0, _b0, ...), ...)``, handed to ``done`` for the lines that use it
    (a ``return``, an ``append``); ``trees`` names the tuples read together (the first
    is tested), which the caller has checked are tuples of length ``n``."""
    lines = []
    for n in range(1, UNROLLED_TUPLE_LENGTH + 1):
        rows = [[f"_{chr(97 + t)}{i}" for i in range(n)] for t in range(len(trees))]
        tests = " and ".join(f"type({a}) in immutable" for a in rows[0])
        calls = ", ".join(f"f({', '.join(col)})" for col in zip(*rows, strict=True))
        comma = "," if n == 1 else ""
        lines.append(f"{'if' if n == 1 else 'elif'} n == {n}:")
        lines += [f"    {', '.join(row)}{comma} = {tree}" for row, tree in zip(rows, trees)]
        lines += [
            f"    if {tests}:",
            *(f"        {line}" for line in done(f"({calls}{comma})")),
        ]
    return lines


def _returned(value: str) -> list[str]:
    return [f"return {value}"]


def _appended(value: str) -> list[str]:
    return [f"append({value})", "continue"]


def loop_source() -> str:
    """The source of ``make_loop(mode)``: fmap's loop over the children of a node.

    ``loop(kids, depth)`` returns the list of the mapped children (at ``depth``), each
    tested as in a class's mapper; a tuple of up to UNROLLED_TUPLE_LENGTH immutable
    leaves is mapped in the loop itself, without the call of the tuple mapper
    (benchmarks/run.py, W2: a list of pairs or 4-tuples). ``_speedups.c`` has the same
    loop in C (``Loop``), used when it is built; this one is its plain twin.
    """
    body = [
        "out = []",
        "append = out.append",
        "for x in kids:",
        "    _t = type(x)",
        "    if _t is tuple:",
        "        n = len(x)",
        *(f"        {line}" for line in _unrolled_tuples("x", _appended)),
        *(f"    {line}" for line in _map_typed_child("x", "_r", "depth")),
        "    append(_r)",
        "return out",
    ]
    lines = [
        "def make_loop(mode):",
        *(f"    {line}" for line in _mapper_factory("loop", body, "kids, depth")),
    ]
    return "\n".join(lines) + "\n"


def tuple_mapper_source() -> str:
    """The source of ``make_mapper(mode)`` for plain tuples (contract as a class's).

    A tuple of up to UNROLLED_TUPLE_LENGTH immutable leaves is mapped by an unrolled
    branch, as hand-written code would (benchmarks/run.py, W2): no loop, no depth or
    sharing test (it holds no node). Any other tuple goes to ``loop(children, depth)``,
    the fast path's loop over a node's children.
    """
    body = [
        "n = len(x)",
        *_unrolled_tuples("x", _returned),
        "if depth > max_depth:",
        "    return deep(x)",
        "return tuple(loop(x, depth + 1))",
    ]
    lines = [
        "def make_mapper(mode):",
        *(f"    {line}" for line in _mapper_factory("map_tuple", body)),
    ]
    return "\n".join(lines) + "\n"


def pair_mapper_source() -> str:
    """The source of ``make_pair_mapper(f, immutable, general)`` for two-tree fmap.

    ``map_pair(x, y, depth)`` maps a tuple of up to UNROLLED_TUPLE_LENGTH immutable
    leaves facing a tuple of the same length in an unrolled branch (benchmarks/run.py,
    W4); everything else goes to ``general(x, y, depth)``.
    """
    body = [
        "if type(x) is tuple and type(y) is tuple:",
        "    n = len(x)",
        "    if n == len(y):",
        *(f"        {line}" for line in _unrolled_tuples("xy", _returned)),
        "return general(x, y, depth)",
    ]
    lines = [
        "def make_pair_mapper(f, immutable, general):",
        "    def map_pair(x, y, depth):",
        *(f"        {line}" for line in body),
        "    return map_pair",
    ]
    return "\n".join(lines) + "\n"


def pair_loop_source() -> str:
    """The source of ``make_pair_loop(f, immutable, leaf_types, leaf, pair, node)``.

    ``pair_loop(kids, ykids, depth)`` returns the list of the mapped children (at
    ``depth``) of a node facing one other tree's node: an immutable leaf goes to ``f``,
    another leaf to ``leaf``, a tuple of up to UNROLLED_TUPLE_LENGTH immutable leaves
    facing a tuple of its length is mapped in the loop itself (benchmarks/run.py, W4),
    any other tuple goes to ``pair`` and any other node to ``node``. ``_speedups.c``
    has the same loop in C (``PairLoop``), used when it is built.
    """
    body = [
        "out = []",
        "append = out.append",
        "for x, y in zip(kids, ykids):",
        "    _t = type(x)",
        "    if _t is tuple:",
        "        n = len(x)",
        "        if type(y) is tuple and n == len(y):",
        *(f"            {line}" for line in _unrolled_tuples("xy", _appended)),
        "        append(pair(x, y, depth))",
        "    elif _t in immutable:",
        "        append(f(x, y))",
        "    elif _t in leaf_types:",
        "        append(leaf(x, (y,)))",
        "    else:",
        "        append(node(x, (y,), depth))",
        "return out",
    ]
    lines = [
        "def make_pair_loop(f, immutable, leaf_types, leaf, pair, node):",
        "    def pair_loop(kids, ykids, depth):",
        *(f"        {line}" for line in body),
        "    return pair_loop",
    ]
    return "\n".join(lines) + "\n"


def compile_pair_loop() -> Callable[..., Callable[[Any, Any, int], list[Any]]]:
    """Compile ``pair_loop_source()``; returns its ``make_pair_loop``."""
    make: Callable[..., Callable[[Any, Any, int], list[Any]]]
    make = _compile_factory(pair_loop_source(), "pair loop", "make_pair_loop")
    return make


def compile_tuple_mapper() -> Callable[..., Callable[[Any, int], Any]]:
    """Compile ``tuple_mapper_source()``; returns its ``make_mapper``."""
    make: Callable[..., Callable[[Any, int], Any]]
    make = _compile_factory(tuple_mapper_source(), "tuple mapper", "make_mapper")
    return make


def compile_loop() -> Callable[..., Callable[[Any, int], list[Any]]]:
    """Compile ``loop_source()``; returns its ``make_loop``."""
    make: Callable[..., Callable[[Any, int], list[Any]]]
    make = _compile_factory(loop_source(), "loop", "make_loop")
    return make


def compile_pair_mapper() -> Callable[..., Callable[[Any, Any, int], Any]]:
    """Compile ``pair_mapper_source()``; returns its ``make_pair_mapper``."""
    make: Callable[..., Callable[[Any, Any, int], Any]]
    make = _compile_factory(pair_mapper_source(), "pair mapper", "make_pair_mapper")
    return make


def rebind(function: F, cells: Mapping[str, CellType]) -> F:
    """``function`` with its free variables named in ``cells`` bound to those cells.

    fmap reuses its closures from call to call (``_fmap._Mode``): the values that change
    per call sit in cells of the mode, and a generated mapper, made by its factory with
    cells of its own, is rebound to share them, so that one assignment per call reaches
    every function of the mode.
    """
    code = function.__code__
    cells_now = function.__closure__ or ()
    closure = tuple(cells.get(n, c) for n, c in zip(code.co_freevars, cells_now, strict=True))
    return FunctionType(  # type: ignore[return-value]
        code, function.__globals__, function.__name__, function.__defaults__, closure
    )


def _compile_factory(source: str, label: str, name: str) -> Any:
    """Compile the generated ``source`` of one factory function and return it."""
    g: dict[str, Any] = {}
    _exec(source, g, f"<containers generated {label} #{next(_counter)}>")
    return g[name]


def _exec(source: str, g: dict[str, Any], filename: str) -> None:
    """Run generated ``source`` in ``g`` and register it in linecache (tracebacks)."""
    exec(compile(source, filename, "exec"), g)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def build_source(spec: ContainerSpec) -> tuple[str, dict[str, Any]]:
    """Build the source and globals of one class's generated functions.

    - ``flatten(x) -> (children, kept)``: tuples in visit and keep order.
    - ``unflatten(kept, children) -> new``: children a sequence in visit order.
    - ``rebuild(x, children) -> new``: kept values read from ``x``.
    - ``children(x) -> tuple``: the children in visit order.
    - ``make_mapper(mode) -> map_node``: fmap's fast path for this class (``mode`` is
      ``_fmap._Mode``). ``map_node(x, depth)`` rebuilds ``x`` with each child ``c``
      replaced by ``f(c)`` if its type is in ``immutable``, ``f(c)`` through the
      identity cache if in ``leaf_types``, else by the mapper ``direct(type(c))`` or ``node(c, depth + 1)``;
      past ``max_depth`` it returns ``deep(x)``; with ``structural`` (fmapstructure)
      it returns a dict keyed by child name instead. The leaf test is inlined and a
      node costs one call (benchmarks/run.py, W3, W3id and fmapstructure).
    - the four ``__container_*__`` protocol methods.
    """
    g: dict[str, Any] = {
        "_ct_cls": spec.cls,
        "_ct_new": object.__new__,
        "_ct_name": spec.name,
        "_ct_missing": _missing_field_error(spec),
        "_ct_unset": _unset_field_error(spec),
    }
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

    def guarded(obj: str, body: list[str]) -> list[str]:
        """``body`` reading fields of ``obj``: an unset field (``init=False``, never
        assigned) is reported by name; try costs nothing until it catches."""
        return [
            "try:",
            *(f"    {line}" for line in body),
            "except AttributeError as _e:",
            f"    raise _ct_unset({obj}, _e) from None",
        ]

    emit(
        "def flatten(x):",
        guarded("x", [f"return {tup(f'x.{n}' for n in kids)}, {tup(f'x.{n}' for n in kept)}"]),
    )
    emit("def children(x):", guarded("x", [f"return {tup(f'x.{n}' for n in kids)}"]))
    values = {**child_vars, **{n: f"kept[{i}]" for i, n in enumerate(kept)}}
    emit(
        "def unflatten(kept, children):",
        _unpack(kids, "children") + _construct(spec, values, g),
    )
    values = {**child_vars, **{n: f"x.{n}" for n in kept}}
    emit(
        "def rebuild(x, children):",
        _unpack(kids, "children")
        + (guarded("x", _construct(spec, values, g)) if kept else _construct(spec, values, g)),
    )
    body = []
    for i, n in enumerate(kids):
        body += [f"_v = x.{n}", *_map_child("_v", f"_c{i}", "depth + 1")]
    body += [
        "if structural:",  # fmapstructure: the node as a dict keyed by child name
        f"    return {{{', '.join(f'{n!r}: {child_vars[n]}' for n in kids)}}}",
    ]
    values = {**child_vars, **{n: f"x.{n}" for n in kept}}
    body = guarded("x", body + _construct(spec, values, g))
    emit(
        "def make_mapper(mode):",
        _mapper_factory("map_node", ["if depth > max_depth:", "    return deep(x)", *body]),
    )
    emit(
        "def __container_traverse__(self, acc, fun, /):",
        guarded(
            "self",
            [f"{child_vars[n]}, acc = fun(self.{n}, acc)" for n in kids]
            + [f"return rebuild(self, {tup(child_vars[n] for n in kids)}), acc"],
        ),
    )
    emit(
        "def __container_reduce__(self, acc, fun, /):",
        guarded("self", [f"acc = fun(self.{n}, acc)" for n in kids] + ["return acc"]),
    )
    pairs = ", ".join(f"({n!r}, self.{n})" for n in kids)
    meta = ", ".join(f"{n!r}: self.{n}" for n in kept)
    emit(
        "def __container_serialize__(self):",
        guarded("self", [f"return _ct_name, [{pairs}], {{{meta}}}"]),
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


def _unset_field_error(spec: ContainerSpec) -> Callable[[Any, AttributeError], Exception]:
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
    filename = f"<containers generated {spec.cls.__module__}.{type_name(spec.cls)}"
    filename += f" #{next(_counter)}>"
    _exec(source, g, filename)
    deserialize: Any = classmethod(g["__container_deserialize__"])
    return Generated(
        flatten=g["flatten"],
        make_mapper=g["make_mapper"],
        unflatten=g["unflatten"],
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


def plain_unflatten(spec: ContainerSpec, kept: Sequence[Any], children: Sequence[Any]) -> Any:
    """``unflatten`` without generated code."""
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
    """``rebuild`` without generated code."""
    return plain_unflatten(spec, plain_flatten(spec, x)[1], children)


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
