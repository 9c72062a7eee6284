"""A declared class's fmap mappers: per-class code the engine generates for itself.

This stage turns a ``ContainerSpec`` into the two mapper factories fmap's fast path
calls for a frozen declared class: ``make_mapper(mode)`` (one tree, ``_fast._Mode``)
and ``make_pair_mapper(mode)`` (two trees, the same ``_Mode``'s), compiled on the
first walk that meets the class (``mappers``) and kept while the class lives. Their
child lines are the engine's (``_loops.map_child``); how they
build the new instance is the class's (``_codegen.construct_lines``), as ``unflatten``
builds it. ``node_plan`` says whether the compiled ``MapNode`` may run a mapper.
"""

from __future__ import annotations

import linecache
from collections.abc import Callable
from typing import Any

from containers._codegen import (
    base_globals,
    construct_lines,
    field_sources,
    guarded_lines,
    setattr_stores,
    unset_field_error,
)
from containers._engine._loops import (
    PAIR_MAPPER_ARGS,
    ROWS,
    map_child,
    mapper_factory,
    marked,
    unwound_at,
)
from containers._registry import NodeKind
from containers._spec import ContainerSpec

__all__ = ["mapper_source", "mappers", "node_plan"]

#: Factory = ``make_mapper(mode)`` or ``make_pair_mapper(mode)``.
Factory = Callable[..., Callable[..., Any]]


def mappers(kind: NodeKind) -> tuple[Factory, Factory]:
    """``(make_mapper, make_pair_mapper)`` for a declared class's ``kind``, compiled on
    first use and kept on the kind (``NodeKind.mappers``), which lives as its class."""
    made: tuple[Factory, Factory] | None = kind.mappers
    if made is not None:
        return made
    spec = kind.spec
    assert spec is not None  # only declared classes have mappers
    source, g = mapper_source(spec)
    # Shown with the class's code: appended to its linecache entry, which leaves with
    # the class (_decorator), and compiled under its filename at the lines past it.
    filename = kind.flatten.__code__.co_filename
    entry: Any = linecache.cache.get(filename)
    lines = list(entry[2]) if entry is not None else []
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    exec(compile("\n" * len(lines) + source, filename, "exec"), g)
    lines += source.splitlines(True)
    linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)
    kind.mappers = made = (g["make_mapper"], g["make_pair_mapper"])
    return made


def node_plan(
    spec: ContainerSpec,
) -> tuple[type, tuple[tuple[str, str, Any], ...], tuple[str, ...], Callable[..., Any]] | None:
    """What ``_speedups.MapNode`` takes after the generated mapper: the class, its
    ``field_sources``, its children's names and the mapper's ``_ct_unset``; or None
    where the mapper does not build the instance with ``new_instance``
    (``construct_lines``: a namedtuple, a reset factory that takes the instance, or
    stores that ``setattr_stores`` refuses), so that the loop runs the mapper's own
    lines."""
    fields = field_sources(spec)
    if (
        spec.flavor == "namedtuple"
        or any(how == "factory_self" for _, how, _ in fields)
        or not setattr_stores(spec)
    ):
        return None
    return spec.cls, fields, tuple(spec.children), unset_field_error(spec)


def mapper_source(spec: ContainerSpec) -> tuple[str, dict[str, Any]]:
    """The source and globals of one class's two mapper factories.

    - ``make_mapper(mode) -> map_node``: fmap's fast path for this class (``mode`` is
      ``_engine._fast._Mode``). ``map_node(x, depth)`` rebuilds ``x`` with each child ``c``
      replaced by ``f(c)`` if its type is in ``immutable``, ``f(c)`` through the
      identity cache if in ``leaf_types``, else by the mapper ``direct(type(c))`` or
      ``node(c, depth + 1)``; past ``max_depth`` it returns ``deep(x)``; with
      ``structural`` (fmapstructure) it returns a dict keyed by child name instead. The
      leaf test is inlined and a node costs one call.
    - ``make_pair_mapper(mode) -> map_pair_node``: two-tree fmap's fast path for this
      class (``mode`` is a several-tree ``_engine._fast._Mode``); see ``_pair_mapper_body``.
    """
    g = base_globals(spec)
    g["_ct_unwound"] = unwound_at  # the except clause of each mapper (_loops.catching)
    kids, kept = spec.children, spec.keep
    child_vars = {n: f"_c{i}" for i, n in enumerate(kids)}
    out: list[str] = []

    def emit(header: str, body: list[str]) -> None:
        out.append(header)
        out.extend(f"    {line}" for line in (body or ["pass"]))
        out.append("")

    body = []
    for i, n in enumerate(kids):
        body += [f"_v = x.{n}", *marked(map_child("_v", f"_c{i}", "depth + 1"), i)]
    body += [
        "if structural:",  # fmapstructure: the node as a dict keyed by child name
        f"    return {{{', '.join(f'{n!r}: {child_vars[n]}' for n in kids)}}}",
    ]
    values = {**child_vars, **{n: f"x.{n}" for n in kept}}
    body = _guarded_catching("x", body + construct_lines(spec, values, g))
    emit(
        "def make_mapper(mode):",
        mapper_factory(
            "map_node", ["if depth > max_depth:", "    return deep(x)", *body], index=None
        ),
    )
    emit(
        "def make_pair_mapper(mode):",
        mapper_factory(
            "map_pair_node", _pair_mapper_body(spec, g), "x, y, depth", PAIR_MAPPER_ARGS
        ),
    )
    return "\n".join(out), g


def _guarded_catching(obj: str, body: list[str]) -> list[str]:
    """``_codegen.guarded_lines(obj, body)`` with the trail's handler
    (``_loops.catching``) as clauses of its ``try``, which then is the mapper's only
    one: an unset field is reported by name, any error gets the index of the child
    being mapped (the marked lines) on its way out."""
    record = f"    _ct_unwound(_e, {ROWS}, None)"
    return [
        "try:",
        *(f"    {line}" for line in body),
        "except AttributeError as _e:",
        record,
        f"    raise _ct_unset({obj}, _e) from None",
        "except Exception as _e:",
        record,
        "    raise",
    ]


def _pair_mapper_body(spec: ContainerSpec, g: dict[str, Any]) -> list[str]:
    """The body of ``map_pair_node(x, y, depth)``: fmap(f, x, y) for an instance ``x``.

    It does what ``_Mode``'s several-tree generic path (``many_node``) does with ``flatten``, ``read``,
    ``pair_loop`` and ``unflatten``, in the same order, without those calls
    (benchmarks/instructions.py, W4c): a mutable class's instance is looked up in the
    identity cache; past ``max_depth`` it returns ``deep(x, y)``; else it reads ``x``'s
    children and kept fields, requires ``y`` to be of the same class (else raises
    ``mismatch()``, which fmap turns into the error with its path), reads ``y``'s
    children, maps each pair inline (``_loops.map_child``) and rebuilds with
    ``x``'s kept fields; a mutable class's result is stored in the identity cache.
    """
    kids, kept = spec.children, spec.keep
    mutable = not spec.frozen

    def assign(targets: list[str], values: list[str]) -> list[str]:
        return [f"{', '.join(targets)} = {', '.join(values)}"] if targets else []

    x_vars = [f"_x{i}" for i in range(len(kids))]
    kept_vars = [f"_k{i}" for i in range(len(kept))]
    y_vars = [f"_y{i}" for i in range(len(kids))]
    walk = [
        *guarded_lines("x", assign(x_vars + kept_vars, [f"x.{n}" for n in (*kids, *kept)])),
        "if type(y) is not _ct_cls:",
        "    raise mismatch()",
        *guarded_lines("y", assign(y_vars, [f"y.{n}" for n in kids])),
    ]
    for i in range(len(kids)):
        walk += marked(map_child(f"_x{i}", f"_c{i}", "depth + 1", f"_y{i}"), i)
    values = {n: f"_c{i}" for i, n in enumerate(kids)}
    values.update({n: f"_k{i}" for i, n in enumerate(kept)})
    walk += construct_lines(spec, values, g, returned=False)
    body = [
        "if cached:",
        "    _key = id(x)",
        "    if _key in results:",
        "        return prune if use_prune else results[_key]",
    ]
    body = body if mutable else []
    body += [
        "if depth > max_depth:",
        "    _i = deep(x, y)",
        "else:",
        *(f"    {line}" for line in walk),
    ]
    if mutable:
        body += [
            "if cached:",
            "    if keep is None:",
            "        results.store(x, _i)",
            "    else:",
            "        results[_key] = _i",
            "        keep(x)",
        ]
    return [*body, "return _i"]
