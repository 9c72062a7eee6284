"""The fast path's generated loops: templates, their compilation, and the shared cells.

This stage holds the source templates of fmap's child loop (one tree or two: its C
twins are ``_speedups.Loop`` and ``PairLoop``) and tuple mappers, the child-mapping
lines (``map_child``) that the loops and the generated per-class mappers inline, and ``MAPPER_ARGS`` and
``PAIR_MAPPER_ARGS``, the one list each of what a mapper factory and a two-tree pair
mapper factory receive. It never reads a spec: ``_mappers`` asks it for the
child-mapping lines of a class's mappers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import CellType, FunctionType
from typing import Any, TypeVar

from containers._compiled import SPEEDUPS, exec_source, source_filename

__all__ = [
    "MAPPER_ARGS",
    "PAIR_MAPPER_ARGS",
    "ROWS",
    "SPEEDUPS",
    "TRAIL",
    "UNROLLED_TUPLE_LENGTH",
    "compile_loop",
    "compile_pair_mapper",
    "compile_tuple_mapper",
    "exec_source",
    "loop_source",
    "map_child",
    "mapper_factory",
    "marked",
    "pair_mapper_source",
    "rebind",
    "source_filename",
    "tuple_mapper_source",
    "unwound",
    "unwound_at",
    "with_rows",
]


F = TypeVar("F", bound=Callable[..., Any])

# What fmap's fast path hands a generated mapper factory, in this order (``_fast._Mode``
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
    "leaf",
    "use_prune",
    "prune",
    "loop",
    "max_depth",
    "deep",
    "structural",
)

# What two-tree fmap's fast path hands a generated pair mapper factory, in this order
# (``_fast._Mode`` with several trees builds its ``mapper_args`` from these names).
PAIR_MAPPER_ARGS = (
    "f",
    "node",
    "mappers",
    "pair",
    "immutable",
    "leaf_types",
    "results",
    "keep",
    "leaf",
    "use_prune",
    "prune",
    "cached",
    "max_depth",
    "deep",
    "mismatch",
)

# Tuples up to this length get an unrolled branch for all-immutable-leaf contents.
UNROLLED_TUPLE_LENGTH = 4

#: The attribute of an exception raised under a fast walk (by ``f``, say) that lists,
#: innermost level first, the index of the child each level was mapping (an int) and,
#: from a subtree handed to ``traverse``, the path within it (a tuple of keys). Filled
#: while the error unwinds (the fast tiers' ``except`` clauses and C's ``trail_index``:
#: free until an error is raised); ``_relocate.trail_note`` turns it into the key path once,
#: at the top.
TRAIL = "_containers_trail"
#: The comment marking a generated line that maps child (or tuple element) ``i``: the
#: ``except`` clause of the function reads the failing line's mark (``unwound_at``).
MARK = "  # child "


def unwound(err: BaseException, step: Any) -> None:
    """Append ``step`` (a child's index, or a relative key path) to ``err``'s trail."""
    try:
        trail = err.__dict__.setdefault(TRAIL, [])
    except AttributeError:  # pragma: no cover - an exception without a __dict__
        return
    trail.append(step)


def unwound_at(err: BaseException, rows: Mapping[int, int], index: int | None) -> None:
    """In a generated function's ``except`` clause: append the mark of the line the
    error came through (``rows``: line offset from the ``def`` to the child or element
    index it maps, ``marked_rows``), if any, then ``index`` (a loop's ``len(out)``)."""
    tb = err.__traceback__
    if tb is not None:  # its first entry is the frame catching it
        row = rows.get(tb.tb_lineno - tb.tb_frame.f_code.co_firstlineno)
        if row is not None:
            unwound(err, row)
    if index is not None:
        unwound(err, index)


def marked(lines: list[str], i: int) -> list[str]:
    """``lines`` (mapping one child or element) marked as mapping number ``i``."""
    return [f"{line}{MARK}{i}" for line in lines]


def catching(function: list[str], index: str = "None") -> list[str]:
    """``function`` (its ``def`` line and body, unindented) with the body in a ``try``
    whose ``except`` records the trail (``unwound_at``: the marked lines, then
    ``index``, an expression the clause evaluates) and re-raises."""
    head, body = function[0], function[1:]
    return with_rows(
        [
            head,
            "    try:",
            *(f"    {line}" for line in body),
            "    except Exception as _e:",
            f"        _ct_unwound(_e, {ROWS}, {index})",
            "        raise",
        ]
    )


#: What ``with_rows`` replaces in a handler's lines by the function's marked rows.
ROWS = "_ct_rows_"


def with_rows(function: list[str]) -> list[str]:
    """``function`` (its ``def`` line first) with ``ROWS`` in its lines replaced by the
    table its ``except`` clauses give ``unwound_at``: the offset of each marked line
    from the ``def`` line to its mark. A function whose own ``try`` has a handler
    already (``_mappers``: an unset field) adds its clause there: no ``try`` of its own,
    whose line costs an instruction per call."""
    rows = {k: int(line.rpartition(MARK)[2]) for k, line in enumerate(function) if MARK in line}
    return [line.replace(ROWS, repr(rows)) for line in function]


def map_child(value: str, target: str, depth: str, other: str | None = None) -> list[str]:
    """Lines setting ``target`` to fmap's result for the child in variable ``value``
    (facing ``other``, the other tree's child, with two trees): the fast tiers' one
    Python copy of the leaf test, the identity cache's use and the dispatch to a node's
    mapper, inlined by the loops (``loop_source``) and the per-class mappers
    (``_mappers.mapper_source``), as the C ``Loop`` and ``PairLoop`` map a child.

    An immutable leaf (a value) is passed to ``f``; every other leaf goes through the
    identity cache: with the compiled table (``keep`` is None) in one call, ``leaf``
    (``Loop.leaf``, ``PairLoop.leaf``); with the plain dict inline (``results`` by id,
    ``keep`` holding the keys' objects, ``prune`` for repeats), where a call of a
    Python function would cost more than the lines (benchmarks/run.py, W3id). With one
    tree a node goes to its mapper in ``direct`` or to ``node``; with two, a tuple to
    ``pair``, another node to its pair mapper in ``mappers`` or to ``node``.
    """
    return [f"_t = type({value})", *_map_typed_child(value, target, depth, other)]


def _map_typed_child(value: str, target: str, depth: str, other: str | None) -> list[str]:
    """``map_child`` once ``_t`` holds the child's type."""
    args = value if other is None else f"{value}, {other}"
    lines = [
        "if _t in immutable:",
        f"    {target} = f({args})",
        "elif _t in leaf_types:",
        "    if keep is None:",
        f"        {target} = leaf({args})",
        "    else:",
        f"        _k = id({value})",
        "        if _k in results:",  # a bytecode, not a call like results.get
        f"            {target} = prune if use_prune else results[_k]",
        "        else:",
        f"            {target} = results[_k] = f({args})",
        f"            keep({value})",
    ]
    if other is None:
        return [
            *lines,
            "else:",
            "    _m = direct(_t)",
            f"    {target} = _m({value}, {depth}) if _m is not None else node({value}, {depth})",
        ]
    return [
        *lines,
        "elif _t is tuple:",
        f"    {target} = pair({value}, {other}, {depth})",
        "else:",
        "    _m = mappers(_t)",
        "    if _m is not None:",
        f"        {target} = _m({value}, {other}, {depth})",
        "    else:",
        f"        {target} = node({value}, ({other},), {depth})",
    ]


def mapper_factory(
    name: str,
    body: list[str],
    params: str = "x, depth",
    args: tuple[str, ...] = MAPPER_ARGS,
    index: str | None = "None",
) -> list[str]:
    """The body of ``make_mapper(mode)``: unpack ``mode.mapper_args`` (named ``args``:
    ``MAPPER_ARGS``, or ``PAIR_MAPPER_ARGS`` for a pair mapper), define ``name``, its
    body in ``catching`` (``index``: see there), or with ``index`` None as it is
    (its own handlers, ``with_rows``)."""
    function = [f"def {name}({params}):", *(f"    {line}" for line in body)]
    return [
        f"{', '.join(args)} = mode.mapper_args",
        *(with_rows(function) if index is None else catching(function, index)),
        f"return {name}",
    ]


def _unrolled_tuples(trees: str, done: Callable[[list[str]], list[str]]) -> list[str]:
    """``if``/``elif`` branches mapping tuples of up to UNROLLED_TUPLE_LENGTH immutable
    leaves to ``(f(_a0, _b0, ...), ...)``: its element lines (one call each, marked
    with its index for ``catching``) are handed to ``done`` for the lines that build
    and use the tuple (a ``return``, an ``append``); ``trees`` names the tuples read together (the first
    is tested), which the caller has checked are tuples of length ``n``."""
    lines = []
    for n in range(1, UNROLLED_TUPLE_LENGTH + 1):
        rows = [[f"_{chr(97 + t)}{i}" for i in range(n)] for t in range(len(trees))]
        tests = " and ".join(f"type({a}) in immutable" for a in rows[0])
        # one call per line, marked: an error from f names its element (catching)
        calls = [
            f"    f({', '.join(col)}),{MARK}{i}" for i, col in enumerate(zip(*rows, strict=True))
        ]
        comma = "," if n == 1 else ""
        lines.append(f"{'if' if n == 1 else 'elif'} n == {n}:")
        lines += [f"    {', '.join(row)}{comma} = {tree}" for row, tree in zip(rows, trees)]
        lines += [
            f"    if {tests}:",
            *(f"        {line}" for line in done(calls)),
        ]
    return lines


def _returned(calls: list[str]) -> list[str]:
    return ["return (", *calls, ")"]


def _appended(calls: list[str]) -> list[str]:
    return ["append((", *calls, "))", "continue"]


def loop_source(trees: int = 1) -> str:
    """The source of ``make_loop(mode)``: fmap's loop over the children of a node, for
    one tree (``trees`` 1) or for a node facing one other tree's (2).

    ``loop(kids, depth)`` (``loop(kids, ykids, depth)``) returns the list of the mapped
    children (at ``depth``), each as ``map_child`` maps it; a tuple of up to
    UNROLLED_TUPLE_LENGTH immutable leaves (facing a tuple of its length) is mapped in
    the loop itself, without the call of the tuple mapper (benchmarks/run.py, W2, W4:
    lists of pairs or 4-tuples). ``_speedups_loop.c`` has the same loops in C
    (``Loop``, ``PairLoop``), used when it is built; these are their plain twins.
    """
    args: tuple[str, ...]
    if trees == 1:
        head, params, args = "for x in kids:", "kids, depth", MAPPER_ARGS
        tuples = _unrolled_tuples("x", _appended)
    else:
        head, params, args = (
            "for x, y in zip(kids, ykids):",
            "kids, ykids, depth",
            PAIR_MAPPER_ARGS,
        )
        tuples = [
            "if type(y) is tuple and n == len(y):",
            *_indented(_unrolled_tuples("xy", _appended)),
        ]
    body = [
        "out = []",
        "append = out.append",
        head,
        "    _t = type(x)",
        "    if _t is tuple:",
        "        n = len(x)",
        *(f"        {line}" for line in tuples),
        *(
            f"    {line}"
            for line in _map_typed_child("x", "_r", "depth", "y" if trees > 1 else None)
        ),
        "    append(_r)",
        "return out",
    ]
    lines = [
        "def make_loop(mode):",
        *_indented(mapper_factory("loop", body, params, args, index="len(out)")),
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
        *(f"    {line}" for line in mapper_factory("map_tuple", body)),
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
        *(f"    {line}" for line in catching(["def map_pair(x, y, depth):", *_indented(body)])),
        "    return map_pair",
    ]
    return "\n".join(lines) + "\n"


def compile_tuple_mapper() -> Callable[..., Callable[[Any, int], Any]]:
    """Compile ``tuple_mapper_source()``; returns its ``make_mapper``."""
    make: Callable[..., Callable[[Any, int], Any]]
    make = _compile_factory(tuple_mapper_source(), "tuple mapper", "make_mapper")
    return make


def compile_loop(trees: int = 1) -> Callable[..., Callable[..., list[Any]]]:
    """Compile ``loop_source(trees)``; returns its ``make_loop``."""
    make: Callable[..., Callable[..., list[Any]]]
    make = _compile_factory(loop_source(trees), "loop" if trees == 1 else "pair loop", "make_loop")
    return make


def compile_pair_mapper() -> Callable[..., Callable[[Any, Any, int], Any]]:
    """Compile ``pair_mapper_source()``; returns its ``make_pair_mapper``."""
    make: Callable[..., Callable[[Any, Any, int], Any]]
    make = _compile_factory(pair_mapper_source(), "pair mapper", "make_pair_mapper")
    return make


def rebind(function: F, cells: Mapping[str, CellType]) -> F:
    """``function`` with its free variables named in ``cells`` bound to those cells.

    fmap reuses its closures from call to call (``_fast._Mode``): the values that change
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


def _indented(lines: list[str]) -> list[str]:
    return [f"    {line}" for line in lines]


def _compile_factory(source: str, label: str, name: str) -> Any:
    """Compile the generated ``source`` of one factory function and return it."""
    g: dict[str, Any] = {"_ct_unwound": unwound_at}
    exec_source(source, g, source_filename(label))
    return g[name]
