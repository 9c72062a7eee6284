"""The accelerations of the engine: fmap's recursive fast paths.

This stage maps shallow trees by recursion through closures pooled per
kind of call (``_Mode``, ``_ManyMode``), with the child loops in C (``_speedups``)
or generated Python (``_loops``), their twins. It owns no semantics of its own: a
subtree past MAX_FAST_DEPTH goes to ``_core``'s traversal, and an error it finds is
raised as ``Relocate`` so that the caller runs the traversal again to locate it.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, NoReturn

from containers._engine._core import (
    MAX_FAST_DEPTH,
    UNSET,
    Memo,
    Relocate,
    map_tree,
    noop,
    trail_note,
)
from containers._engine._loops import (
    MAPPER_ARGS,
    PAIR_MAPPER_ARGS,
    SPEEDUPS,
    compile_loop,
    compile_pair_loop,
    compile_pair_mapper,
    compile_tuple_mapper,
    rebind,
    unwound,
)
from containers._engine._mappers import mappers as class_mappers
from containers._engine._mappers import node_plan
from containers._errors import ContainerDefinitionError, StructureError
from containers._registry import (
    IMMUTABLE_LEAVES,
    KINDS,
    LEAF_TYPES,
    LIST,
    REGISTRY,
    TUPLE,
    Mismatch,
    NodeKind,
    kind_of,
    same_order,
    sort_keys,
)
from containers._spec import ContainerSpec

__all__ = ["fast_map", "fast_map_many", "relocate"]


#: The module of the compiled loops, or None. Read when a mode is built (tests switch it).
_speedups = SPEEDUPS
if _speedups is not None:  # the identity cache the compiled loops probe by address
    Memo.table = _speedups.IdTable


#: Whether two-tree fmap maps declared classes with their generated pair mappers, or
#: with ``_ManyMode.node``'s generic path, their plain twin. Read when a mode is built
#: (tests switch it).
_pair_mappers = True

_make_tuple_mapper = compile_tuple_mapper()
_make_loop = compile_loop()
_make_pair_mapper = compile_pair_mapper()
_make_pair_loop = compile_pair_loop()
#: The free variables of generated functions that ``_Mode`` rebinds to its own cells.
_SHARED_CELLS = frozenset({"f", "results", "keep", "prune", "use_prune", "loop", "leaf"})


class _Mode:
    """The fast path's closures for one kind of call, built once and reused (``_take``).

    ``cached`` (an identity cache is used) and ``structural`` (fmapstructure) are fixed
    per mode. With ``cached``, every value that is not a value type (``immutable``) goes
    through the identity cache, wherever it is met: sharing holds by construction.

    What changes per call (``f``, the cache, ``prune``) lives in
    cells that every closure of the mode shares, generated mappers included
    (``_loops.rebind``): ``begin`` fills them, ``end`` empties them so that an idle
    mode holds no tree. Building the closures and mappers anew cost about 60,000
    instructions per call, the price of mapping some 30 leaves (benchmarks/instructions.py).
    The loop over a node's children is the compiled ``_speedups.Loop`` when it is
    built; it cannot read cells, so ``begin`` and ``end`` also hand it the same values
    (``bind``). The cache is then a ``_speedups.IdTable`` (``Memo.table``), and a
    leaf that is not a value goes through it in one call, ``Loop.leaf``, from the
    generated mappers too. A frozen declared class's mapper in ``direct`` is then a
    ``_speedups.MapNode`` where ``_codegen.node_plan`` allows it: the same mapper run
    in C by the loop, its generated twin called past ``MAX_FAST_DEPTH``.
    """

    __slots__ = (
        "__weakref__",
        "begin",
        "born",
        "dispatch",
        "end",
        "forget_leaves",
        "key",
        "mapper_args",
    )

    def __init__(self, cached: bool, structural: bool) -> None:
        self.key = (_Mode, cached, structural)
        leaf_types = LEAF_TYPES
        # Without a cache every leaf goes straight to f, so every leaf type counts as
        # immutable here.
        immutable = IMMUTABLE_LEAVES if cached else LEAF_TYPES
        kinds_get = KINDS.get
        # Per call (begin, end). The cache's results (read by id) and, with the plain
        # dict, its keep-alive list are used inline (a Memo.store call per value costs:
        # benchmarks/run.py, W3id); keep is None when results is the compiled table,
        # which holds the objects itself and is written with results.store.
        f: Callable[..., Any] = noop
        cache: Memo | None = None
        results: Any = _NO_RESULTS
        keep: Callable[[Any], None] | None = noop
        prune: Any = UNSET
        use_prune = False

        def begin(f_: Callable[..., Any], cache_: Memo | None, prune_: Any) -> None:
            nonlocal f, cache, results, keep, prune, use_prune
            f, cache, prune, use_prune = f_, cache_, prune_, prune_ is not UNSET
            if cache_ is not None:
                results, keep = cache_.results, cache_.keep_alive
            bind(f, None if cache_ is None else results, prune, use_prune)

        def end() -> None:
            nonlocal f, cache, results, keep, prune
            f, cache, results, keep, prune = noop, None, _NO_RESULTS, noop, UNSET
            bind(f, None, prune, False)

        def plain_leaf(c: Any) -> Any:  # a leaf that is not a value: mapped once by identity
            key = id(c)
            if key in results:
                return prune if use_prune else results[key]
            value = f(c)
            if keep is None:
                results.store(c, value)
            else:
                results[key] = value
                keep(c)
            return value

        # The compiled loop's leaf(x) replaces plain_leaf when it is built (below).
        leaf: Callable[[Any], Any] = plain_leaf

        def deep(x: Any) -> Any:
            return map_tree(
                f, x, exclude=None, cache=cache, prune=prune, structural=structural, relocate=True
            )

        map_node: Callable[..., Any] | None = None if _speedups is None else _speedups.MapNode

        def declared(kind: NodeKind, spec: ContainerSpec) -> Any:
            # A frozen declared class's generated mapper, or with the C loop, where the
            # mapper builds with new_instance, the same mapper in C (MapNode: W3id).
            mapper = rebind(class_mappers(kind)[0](self), cells)
            if map_node is None:
                return mapper
            plan = node_plan(spec)
            return mapper if plan is None else map_node(mapper, compiled, *plan, structural)

        def node(x: Any, depth: int) -> Any:
            t = type(x)
            kind = kinds_get(t) or _kind_of(x)
            if kind is None:  # a leaf of a type seen for the first time
                return f(x) if t in immutable else leaf(x)
            ckey = None
            if kind.mutable:
                if cached:
                    ckey = id(x)
                    if ckey in results:
                        return prune if use_prune else results[ckey]
            elif kind.spec is not None:
                mapper = direct[t] = declared(kind, kind.spec)
                return mapper(x, depth)
            if depth > MAX_FAST_DEPTH:
                value = deep(x)
            elif t is list:
                value = loop(x, depth + 1)
            else:
                kids, aux = kind.iterate(x)
                out = loop(kids, depth + 1)
                value = kind.structural(aux, out) if structural else kind.unflatten(aux, out)
            if ckey is not None:
                if keep is None:
                    results.store(x, value)
                else:
                    results[ckey] = value
                    keep(x)
            return value

        def map_dict(x: dict[Any, Any], depth: int) -> Any:
            # node's work for a dict, without its calls (kind lookup, iterate, rebuild):
            # values read from the dict in sorted key order, insertion order kept
            ckey = None
            if cached:
                ckey = id(x)
                if ckey in results:
                    return prune if use_prune else results[ckey]
            if depth > MAX_FAST_DEPTH:
                value: Any = deep(x)
            else:
                keys = list(x)
                order = sort_keys(keys)
                if same_order(order, keys):
                    value = dict(zip(keys, loop(x.values(), depth + 1)))
                else:
                    value = dict.fromkeys(keys)
                    value.update(zip(order, loop(map(x.__getitem__, order), depth + 1)))
            if ckey is not None:
                if keep is None:
                    results.store(x, value)
                else:
                    results[ckey] = value
                    keep(x)
            return value

        direct: dict[type, Callable[[Any, int], Any]] = {dict: map_dict}
        direct_get = direct.get
        loop: Callable[..., Any] = noop  # generated below, once mapper_args exists
        # The cells that generated functions share with this mode: the per-call values
        # (begin's) and the loop (node's), which mapper_args can only name.
        cells = {
            name: cell
            for function in (begin, node)
            for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ())
            if name in _SHARED_CELLS
        }
        args = {
            "f": f,
            "node": node,
            "direct": direct_get,
            "immutable": immutable,
            "leaf_types": leaf_types,
            "results": results,
            "keep": keep,
            "leaf": leaf,
            "use_prune": use_prune,
            "prune": prune,
            "loop": loop,
            "max_depth": MAX_FAST_DEPTH,
            "deep": deep,
            "structural": structural,
        }
        self.mapper_args = tuple(args[name] for name in MAPPER_ARGS)
        bind: Callable[..., Any]
        if _speedups is None:
            loop, bind = rebind(_make_loop(self), cells), noop
        else:  # the same loop in C, which reads the call's values from bind's
            # The C loop records each leaf type it meets in direct, as one of two
            # markers, so that a leaf costs it one lookup (W6id); called, they do what
            # the loop does. A registration forgets them (_forget_modes), as it resets
            # the sets the Python loop reads.
            def value_leaf(x: Any, depth: int) -> Any:
                return f(x)

            def cached_leaf(x: Any, depth: int) -> Any:
                return leaf(x)

            def forget_leaves() -> None:
                # list() copies at once: another thread's C loop may add to direct
                for t, m in list(direct.items()):
                    if m is value_leaf or m is cached_leaf:
                        del direct[t]

            compiled = _speedups.Loop(
                node, direct, immutable, leaf_types, value_leaf, cached_leaf, MAX_FAST_DEPTH
            )
            self.forget_leaves = forget_leaves
            key = id(self)  # dropped by the weakref's callback before the id is reused
            _modes[key] = weakref.ref(self, functools.partial(_forget_mode, key))
            loop, bind, leaf = compiled.run, compiled.bind, compiled.leaf
        direct[tuple] = rebind(_make_tuple_mapper(self), cells)

        def plain_dispatch(x: Any, depth: int) -> Any:
            m = direct_get(type(x))
            return m(x, depth) if m is not None else node(x, depth)

        # With the compiled loop, the root is mapped as it maps a child (the same calls:
        # a leaf to f or through the cache, a node to its mapper), and a dict of str
        # keys in C, without map_dict's Python frame and sort (W6id).
        dispatch = plain_dispatch if _speedups is None else compiled.child
        self.begin, self.end, self.dispatch = begin, end, dispatch


_NO_RESULTS: dict[int, Any] = {}  # a mode's results between calls, no cache: never written
#: Idle modes by key (``_Mode.key``, ``_ManyMode.key``: the class and its arguments).
_idle: dict[tuple[Any, ...], list[Any]] = {}
#: Idle modes kept per key: as many as calls of one kind that usually run at once (nested
#: in ``f``, or on other threads); more are built as needed, dropped when they return.
MAX_IDLE = 4
#: Counts registrations: a mode built before the latest one is not pooled again.
_generation = 0
#: Every mode with a C loop, idle or in use, by id (``_forget_modes``). A dict, which
#: ``list`` copies at once, where iterating a WeakSet would race with other threads.
_modes: dict[int, weakref.ref[_Mode]] = {}


def _take(key: tuple[Any, ...]) -> Any:
    """An idle mode of ``key`` (the class and its arguments), or a new one. Each call
    takes its own, so that fmap called inside ``f`` or on another thread is safe."""
    try:
        return _idle[key].pop()
    except (KeyError, IndexError):
        mode = key[0](*key[1:])
        mode.born = _generation
        return mode


def _give(mode: Any) -> None:
    """Return a mode taken by ``_take``, emptied of the call's values; keep it for the
    next call unless ``MAX_IDLE`` are kept already or a class was registered since it
    was built (its mappers would keep a superseded class alive)."""
    mode.end()
    pool = _idle.setdefault(mode.key, [])
    if len(pool) < MAX_IDLE and mode.born == _generation:
        pool.append(mode)


def _forget_mode(key: int, ref: weakref.ref[_Mode]) -> None:
    """A mode's weakref callback: the mode is gone from ``_modes``."""
    _modes.pop(key, None)


def _forget_modes(kind: NodeKind) -> None:
    """``REGISTRY`` observer: drop every idle mode when a class is registered. Their
    ``direct`` tables hold the generated mappers of the classes they met, and with them
    the classes, which a registration may supersede; modes in use are not pooled again
    (``_generation``), and forget the leaf types their C loop recorded, which the
    registration may have made nodes."""
    global _generation  # noqa: PLW0603 - the registrations seen, read by _give
    _generation += 1
    _idle.clear()
    for ref in list(_modes.values()):
        mode = ref()
        if mode is not None:
            mode.forget_leaves()


REGISTRY.on_register(_forget_modes)


def fast_map(
    f: Callable[..., Any],
    x: Any,
    cache: Memo | None,
    prune: Any,
    structural: bool = False,
    op: str = "fmap",
) -> Any:
    """fmap(f, x) (or fmapstructure) with exclude=isleaf, recursively.

    Speed (benchmarks/run.py, W2, W3 and W3id): each child's type is tested inline in
    the parent's loop (or in the class's generated mapper), so an immutable leaf costs
    one set lookup and the call of ``f``. Node types that are never cached (tuples,
    frozen containers) are mapped by a function from ``direct``, called straight from
    the parent; ``node`` handles the rest: first sight of a type, the identity cache
    for mutable nodes, and the hand-over to the iterative engine past MAX_FAST_DEPTH.
    """
    mode: _Mode = _take((_Mode, cache is not None, structural))
    mode.begin(f, cache, prune)
    try:
        return mode.dispatch(x, 0)
    except Relocate as err:
        relocate(err, x, (), cache is not None, prune, structural=structural, op=op)
    except Exception as err:  # f's: the note the plain walk adds (free until raised)
        trail_note(err, op, x)
        raise
    finally:
        _give(mode)


class _ManyMode:
    """fmap(f, x, *ys) with exclude=isleaf: the closures for one kind of call, reused
    as ``_Mode``'s are (``begin`` binds f, the cache and ``prune``; ``end`` drops them).

    Speed (benchmarks/run.py, W4): a tuple or list facing one of its own type is read
    directly, and with one extra tree (the common case) ``pair`` maps tuples without
    looking them up (small ones unrolled, in generated code) and the loop pairs
    children without building a list per child. With one extra tree, a declared class
    is mapped by its generated pair mapper (``kind.make_pair_mapper``, kept in
    ``mappers``), which reads both instances' fields and maps each pair of children
    inline (benchmarks/instructions.py, W4c); ``node``'s generic path is its plain twin.
    As in ``_Mode``, the mappers share the mode's per-call cells (``rebind``), and with
    the cache they use its ``results`` and, with the plain dict, ``keep`` inline.
    """

    __slots__ = ("begin", "born", "end", "key", "mapper_args", "run")

    def __init__(self, cached: bool) -> None:
        self.key = (_ManyMode, cached)
        leaf_types = LEAF_TYPES
        # Without a cache every leaf goes straight to f (as in _Mode).
        immutable = IMMUTABLE_LEAVES if cached else LEAF_TYPES
        kinds_get = KINDS.get
        generate = _pair_mappers
        # Per call (begin, end). results and keep as in _Mode, for the pair mappers.
        f: Callable[..., Any] = noop
        cache: Memo | None = None
        results: Any = _NO_RESULTS
        keep: Callable[[Any], None] | None = noop
        prune: Any = UNSET
        use_prune = False

        def begin(f_: Callable[..., Any], cache_: Memo | None, prune_: Any) -> None:
            nonlocal f, cache, results, keep, prune, use_prune
            f, cache, prune, use_prune = f_, cache_, prune_, prune_ is not UNSET
            if cache_ is not None:
                results, keep = cache_.results, cache_.keep_alive
            bind(f, None if cache_ is None else results, prune, use_prune)

        def end() -> None:
            nonlocal f, cache, results, keep, prune
            f, cache, results, keep, prune = noop, None, _NO_RESULTS, noop, UNSET
            bind(f, None, prune, False)

        def leaf(c: Any, cys: Any) -> Any:
            if cache is None or type(c) in immutable:
                return f(c, *cys)
            key = id(c)
            if key in cache.results:
                return prune if use_prune else cache.results[key]
            value = f(c, *cys)
            cache.store(c, value)
            return value

        def general_pair(x: Any, y: Any, depth: int) -> Any:
            """``node(x, (y,), depth)`` for a tuple ``x``; facing a tuple, mapped here."""
            if type(y) is not tuple or len(y) < len(x) or depth > MAX_FAST_DEPTH:
                return node(x, (y,), depth)
            return tuple(pair_loop(x, y, depth + 1))

        # Small tuples unrolled, in generated code; its f is this mode's.
        per_call = dict(zip(begin.__code__.co_freevars, begin.__closure__ or ()))
        pair = rebind(_make_pair_mapper(f, immutable, general_pair), per_call)

        def deep(x: Any, y: Any) -> Any:  # a pair mapper's hand-over past MAX_FAST_DEPTH
            return map_tree(f, x, (y,), exclude=None, cache=cache, prune=prune, relocate=True)

        def mismatch() -> Relocate:
            # fmap runs the engine again from the root, to say where
            return Relocate(StructureError("fmap: trees differ"))

        def node(x: Any, ys: Any, depth: int) -> Any:
            t = type(x)
            mapper = mappers_get(t)
            if mapper is not None and len(ys) == 1:
                return mapper(x, ys[0], depth)
            kind = kinds_get(t) or _kind_of(x)
            if kind is None:
                return leaf(x, ys)
            if generate and kind.spec is not None and len(ys) == 1:
                mapper = mappers[t] = rebind(class_mappers(kind)[1](self), per_call)
                return mapper(x, ys[0], depth)
            ckey = None
            if cache is not None and kind.mutable:
                ckey = id(x)
                if ckey in cache.results:
                    return prune if use_prune else cache.results[ckey]
            if depth > MAX_FAST_DEPTH:
                value = map_tree(f, x, ys, exclude=None, cache=cache, prune=prune, relocate=True)
            else:
                kids, aux = (x, None) if t is tuple or t is list else kind.flatten(x)
                n = len(kids)
                ykids = []
                for y in ys:
                    if type(y) is t and (t is tuple or t is list) and len(y) >= n:
                        ykids.append(y)  # zip ignores the extra trailing elements
                        continue
                    try:
                        ykids.append(kind.read(y, aux, n))
                    except Mismatch:
                        raise mismatch() from None
                depth += 1
                if len(ykids) == 1:
                    out = pair_loop(kids, ykids[0], depth)
                else:
                    out = []
                    try:
                        for c, *cys in zip(kids, *ykids):
                            out.append(
                                leaf(c, cys) if type(c) in leaf_types else node(c, cys, depth)
                            )
                    except Exception as err:  # the child's index, for the note's path
                        unwound(err, len(out))
                        raise
                value = (
                    tuple(out)
                    if kind is TUPLE
                    else out
                    if kind is LIST
                    else kind.unflatten(aux, out)
                )
            if ckey is not None:
                cache.store(x, value)  # type: ignore[union-attr]
            return value

        # The generated pair mappers of the declared classes met, by class.
        mappers: dict[type, Callable[[Any, Any, int], Any]] = {}
        mappers_get = mappers.get
        bind: Callable[..., None]
        if _speedups is None:
            pair_loop = rebind(
                _make_pair_loop(f, immutable, leaf_types, leaf, pair, node), per_call
            )
            bind = noop

            def cached_leaf(x: Any, y: Any) -> Any:  # PairLoop.leaf's plain twin
                return leaf(x, (y,))

        else:  # the same loop in C, which reads f and the cache from bind's
            compiled = _speedups.PairLoop(pair, node, immutable, leaf_types)
            pair_loop, bind, cached_leaf = compiled.run, compiled.bind, compiled.leaf
        args = {
            "f": f,
            "node": node,
            "mappers": mappers_get,
            "pair": pair,
            "immutable": immutable,
            "leaf_types": leaf_types,
            "results": results,
            "keep": keep,
            "leaf": cached_leaf,
            "use_prune": use_prune,
            "prune": prune,
            "cached": cached,
            "max_depth": MAX_FAST_DEPTH,
            "deep": deep,
            "mismatch": mismatch,
        }
        self.mapper_args = tuple(args[name] for name in PAIR_MAPPER_ARGS)

        def run(x: Any, ys: tuple[Any, ...]) -> Any:
            if len(ys) == 1 and type(x) is tuple:
                return pair(x, ys[0], 0)
            return node(x, ys, 0)

        self.begin, self.end, self.run = begin, end, run


def fast_map_many(
    f: Callable[..., Any], x: Any, ys: tuple[Any, ...], cache: Memo | None, prune: Any
) -> Any:
    """fmap(f, x, *ys) with exclude=isleaf, recursively (``_ManyMode``)."""
    mode: _ManyMode = _take((_ManyMode, cache is not None))
    mode.begin(f, cache, prune)
    try:
        return mode.run(x, ys)
    except Relocate as err:
        relocate(err, x, ys, cache is not None, prune, structural=False, op="fmap")
    except Exception as err:  # f's: the note, as in fast_map
        trail_note(err, "fmap", x)
        raise
    finally:
        _give(mode)


def _kind_of(x: Any) -> Any:
    """``kind_of(x)`` for the fast paths: an undeclared subclass is the engine's own
    error, raised as ``Relocate`` so that the public function adds its path."""
    try:
        return kind_of(x)
    except ContainerDefinitionError as err:
        raise Relocate(err) from None


def relocate(
    err: Relocate,
    tree: Any,
    rest: tuple[Any, ...],
    cache: bool,
    prune: Any,
    *,
    structural: bool,
    op: str,
) -> NoReturn:
    """Raise the error a fast path found (``err``) with its path: run the engine again
    from the root without calling ``f`` (it may have side effects), which raises it
    located. Should the tree have changed so that it does not, raise it as found.
    Errors raised by ``f`` are not ``Relocate`` and pass unchanged."""
    map_tree(
        noop,
        tree,
        rest,
        exclude=None,
        cache=Memo() if cache else None,
        prune=prune,
        structural=structural,
        op=op,
    )
    raise err.error from None
