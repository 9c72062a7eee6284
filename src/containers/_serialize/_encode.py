"""Encode a tree as flat records plus tensors, ready to be written.

This stage reads the tree through ``flatten`` only: its pre-order ``Structure`` records
and, through the ``is_leaf`` hook, every value in the same order (which is how shared
objects are recognised). It validates and normalises everything before a byte is
written, so a tree that cannot be saved leaves no file behind.
"""

from __future__ import annotations

import sys
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from containers._engine._core import Memo
from containers._engine._flat import flatten_records
from containers._errors import SerializationError, StructureError, short_repr, type_name
from containers._paths import AttrKey, IndexKey, Key
from containers._records import CLOSE, LEAF, RecordCursor
from containers._registry import (
    DEFAULT_DICT,
    DEQUE,
    DICT,
    LIST,
    NONE,
    ORDERED_DICT,
    TUPLE,
    NodeKind,
    _KeyedAux,
    _no_keys,
    kind_of,
    name_of,
)
from containers._serialize._compiled import classifier, encode_compiled
from containers._serialize._format import CODES
from containers._serialize._limits import DEFAULT_LIMITS
from containers._serialize._plan import Plan
from containers._serialize._storable import fail as _fail
from containers._serialize._storable import to_numpy
from containers._serialize._storable import where_of as _where
from containers._serialize._target import dotted_names as _dotted_names
from containers._serialize._values import NotStorable, encode_key, encode_scalar

__all__ = ["FACTORIES", "Plan", "encode"]

#: defaultdict factories a file may name (builtins only: a name is never imported).
FACTORIES: dict[str, Any] = {
    "list": list,
    "dict": dict,
    "set": set,
    "int": int,
    "float": float,
    "complex": complex,
    "str": str,
    "bytes": bytes,
    "bool": bool,
    "tuple": tuple,
    "frozenset": frozenset,
    "OrderedDict": OrderedDict,
}
_FACTORY_NAMES = {id(v): k for k, v in FACTORIES.items()}
_SCALARS = (int, float, complex, str, bytes, bool)


class _Encoder:
    def __init__(self, runs: bool = True) -> None:
        self.plan = Plan()
        #: ``run`` takes nodes of this many leaf children or more (``runs=False``: the
        #: per-leaf loop alone, its plain twin)
        self.min_run = _MIN_RUN if runs else sys.maxsize
        # id of an array or mutable node -> its record; the Memo keeps each object
        # alive while the file is written, so that no id is reused (a temporary array)
        self.first = Memo()
        self.names: set[str] = set()  # tensor names taken

    def array(self, v: np.ndarray[Any, Any], path: str) -> None:
        """An ndarray leaf at ``path``: an alias if seen before, else a new tensor."""
        out = self.plan.records
        k = self.first.results.get(id(v))
        if k is not None:
            out.append(["@", k])
            return
        dt = v.dtype
        if v.flags.c_contiguous and dt.byteorder != ">" and dt.type in CODES:
            a = v
        else:
            a = to_numpy(v, path)  # type: ignore[assignment]
        self.add(v, a, path)

    def add(self, v: Any, a: np.ndarray[Any, Any], path: str) -> None:
        """Record ``a`` (normalized from the leaf ``v``) as the tensor ``path``.

        A lone surrogate in ``path`` (an attribute key may hold one) is written as the
        text ``\\udcff``: a tensor name must be valid UTF-8.
        """
        if not path.isascii():
            path = path.encode("utf-8", "backslashreplace").decode("utf-8")
        a = file_bools(a)
        if path in self.names:
            raise _fail(
                _where(path),
                "a path that names two different arrays (two keys render alike)",
                "Make the keys distinct once rendered by keystr.",
            )
        self.names.add(path)
        out = self.plan.records
        self.first.store(v, len(out))
        rec = ["A", path, "00000000"]
        out.append(rec)
        self.plan.names.append(path)
        self.plan.arrays.append(a)
        self.plan.crc_slots.append(rec)

    def leaf(self, v: Any, where: Callable[[], str], plain: bool) -> None:
        out = self.plan.records
        t = type(v)
        if t in _SCALARS or (isinstance(v, np.generic) and not isinstance(v, np.ndarray)):
            try:
                out.append(["S", encode_scalar(v)])
            except NotStorable as err:
                raise _fail(
                    _where(where()), str(err), "Convert it to a supported value."
                ) from None
            return
        if plain:
            if isinstance(v, np.ndarray) or to_numpy(v, where()) is not None:
                raise _fail(
                    _where(where()),
                    "an array inside a kept value or register_node aux",
                    "Kept values are stored as metadata: make the array a child instead.",
                )
            a = None
        else:
            k = self.first.results.get(id(v))
            if k is not None:
                out.append(["@", k])
                return
            path = where()
            a = to_numpy(v, path)
        if a is None:
            raise _fail(
                _where(where()),
                f"a leaf of type {t.__qualname__}, which files cannot hold",
                "Leaves must be arrays (numpy, jax, torch) or scalars (int, float, complex, "
                "str, bytes, bool, None, numpy scalars); declare the class with @container "
                "or treat it as a kept field of a plain type."
                if not plain
                else "Kept values and register_node aux are stored as plain data: scalars "
                "(int, float, complex, str, bytes, bool, None, numpy scalars) in tuples, "
                "lists and dicts. Convert the value to plain data, or make the field a reset "
                "field, which is not saved: pass keep= without it (it needs a default).",
            )
        self.add(v, a, path)

    def node_record(
        self, kind: NodeKind, aux: Any, n: int, where: Callable[[], str], plain: bool
    ) -> list[Any]:
        t = kind.type
        try:
            if kind is TUPLE:
                return ["T", n]
            if kind is LIST:
                return ["L", n]
            if kind is NONE:
                return ["N"]
            if kind is DICT:
                keys = aux[0]
                # str keys are their own JSON form (100,000 keys in the "many" tree)
                rec = ["D", [*keys] if _all_str(keys) else [encode_key(k) for k in keys]]
                if aux[1] is not None:
                    pos = {id(k): i for i, k in enumerate(aux[0])}
                    rec.append([pos[id(k)] for k in aux[1]])
                return rec
            if kind is ORDERED_DICT:
                return ["O", [encode_key(k) for k in aux]]
            if kind is DEFAULT_DICT:
                factory = aux[2]
                fname = None if factory is None else _FACTORY_NAMES.get(id(factory))
                if factory is not None and fname is None:
                    raise _fail(
                        _where(where()),
                        f"a defaultdict whose default_factory is {factory!r}",
                        f"Files name factories, never import them: use one of "
                        f"{', '.join(FACTORIES)} or None.",
                    )
                order = None
                if aux[1] is not None:
                    pos = {id(k): i for i, k in enumerate(aux[0])}
                    order = [pos[id(k)] for k in aux[1]]
                return ["DD", [encode_key(k) for k in aux[0]], order, fname]
            if kind is DEQUE:
                return ["Q", n, aux]
        except NotStorable as err:
            raise _fail(
                _where(where()),
                f"a dict key that is {err}",
                "Keys must be str, int, float, bool, None, bytes, complex or flat tuples of those.",
            ) from None
        name = name_of(t)
        if plain:
            raise _fail(
                _where(where()),
                f"a {type_name(t)!r} inside a kept value or register_node aux",
                "Kept values are stored as plain data (tuples, lists, dicts, scalars).",
            )
        if name is None:
            raise _Unregistered(
                t,
                where,
                _fail(
                    _where(where()),
                    f"a {type_name(t)!r}, which is not registered by name",
                    f"Files rebuild classes by their registered name: declare it with "
                    f"@container, or call ct.register({type_name(t)}) (namedtuples too)"
                    + (
                        ", or containers.interop.register_optax() for optax's states."
                        if (t.__module__ or "").startswith("optax")
                        else "."
                    ),
                ),
            )
        spec = kind.spec
        if spec is not None:
            return ["C", name, spec.version, list(spec.children), list(spec.keep)]
        if kind.keys is _no_keys:
            return ["R", name, n, None]
        keys = aux.keys if isinstance(aux, _KeyedAux) else kind.keys(aux, n)
        try:
            return ["R", name, n, [_key_form(k) for k in keys]]
        except NotStorable as err:  # what load refuses, save refuses
            raise _fail(
                _where(where()),
                f"a register_node key that is {err}",
                "Keys must be str, int, float, bool, None, bytes, complex or flat tuples of those.",
            ) from None

    def tail(self, kind: NodeKind, aux: Any, where: Callable[[], str]) -> None:
        """The values that follow a node's children: kept values, or the aux."""
        spec = kind.spec
        if spec is not None:
            for name, value in zip(spec.keep, aux):
                self.tree(value, lambda name=name: f"{where()}.{name}", plain=True)  # type: ignore[misc]
        elif kind.type not in _BUILTIN_TYPES:
            value = aux.aux if isinstance(aux, _KeyedAux) else aux
            self.tree(value, lambda: f"{where()}<aux>", plain=True)

    def run(
        self,
        values: list[Any],
        vi: int,
        n: int,
        kind: NodeKind,
        aux: Any,
        where: Callable[[], str],
    ) -> bool:
        """The ``n`` children of a node, all leaves, from ``values[vi]``, at once: plain
        arrays (new, C-contiguous, little-endian, not bool) become tensors, or plain
        scalars become records; False (nothing written) for anything else, which the
        per-leaf loop of ``tree`` then handles (its plain twin: tests/test_serialize_encode.py).

        The "many" tree of benchmarks/serialization.py is 1,000 dicts of 100 arrays and
        one of 10,000 floats: one pass per run instead of a method call per array.
        """
        vals = values[vi : vi + n]
        out = self.plan.records
        types = set(map(type, vals))
        if len(types) != 1:
            return False
        t = types.pop()
        if t is float or t is str:
            out.extend([["S", encode_scalar(v)] for v in vals])
            return True
        if t is not np.ndarray:
            return False
        known = self.first.results
        ids = set(map(id, vals))
        if len(ids) != n or any(map(known.__contains__, ids)):
            return False  # aliases
        for dt in {v.dtype for v in vals}:
            if dt.byteorder == ">" or dt.type not in CODES or dt.type is np.bool_:
                return False
        if not all(v.flags.c_contiguous for v in vals):
            return False
        prefix = where()
        if kind is DICT and _all_str(aux[0]):
            paths = [f"{prefix}[{k!r}]" for k in aux[0]]
        else:
            paths = [prefix + str(k) for k in kind.keys(aux, n)]
        taken = self.names
        fresh = set(paths)
        if len(fresh) != n or not fresh.isdisjoint(taken) or not "".join(paths).isascii():
            return False  # the per-leaf loop names the clash, or escapes the name
        taken |= fresh
        start = len(out)
        recs = [["A", p, "00000000"] for p in paths]
        out.extend(recs)
        plan = self.plan
        plan.names.extend(paths)
        plan.arrays.extend(vals)
        plan.crc_slots.extend(recs)
        store = self.first.store
        for k, v in enumerate(vals, start):
            store(v, k)
        return True

    def tree(self, tree: Any, base: Callable[[], str], *, plain: bool) -> None:
        """Append the records of ``tree`` (a pre-order walk of flatten's records).

        Paths are built only when needed (tensor names, errors): ``base()`` is where
        ``tree`` sits, ``keystack`` the rendered keys down to the open node.
        """
        values: list[Any] = []
        see = values.append
        seen = Memo()  # the nodes met so far (the engine's identity table)
        met = seen.results
        mark = seen.store
        limit = DEFAULT_LIMITS.max_nodes

        def is_leaf(v: Any) -> bool:
            # A mutable node met again is cut here, made a leaf that the walk below
            # writes as an alias: flatten does not expand it, so a DAG of shared lists
            # costs time linear in its distinct objects, not in its paths. What must be
            # written in full (tuples, kept values) is bounded by what load accepts:
            # checked at every value that is not an array or a scalar (those expand
            # nothing: between two checks come at most one node's children), and once
            # more after the walk.
            see(v)
            t = type(v)
            if t is np.ndarray or t in _SCALARS:
                return False
            if len(values) > limit:
                raise too_many()
            if plain:
                return False
            if id(v) in met:
                kind = kind_of(v)
                return kind is not None and kind.mutable
            mark(v, True)
            return False

        def too_many() -> SerializationError:
            return _fail(
                _where(base()),
                f"a tree of more than max_nodes={limit} values once its shared "
                f"tuples and kept values are written out in full, which load would "
                f"refuse",
                "Share lists or containers rather than tuples (they are written "
                "once), or save parts of the tree in several files.",
            )

        records: list[Any] = []
        flatten_records(tree, is_leaf, False, "save", records)  # errors name save
        if len(values) > limit:
            raise too_many()
        if not records:
            self.leaf(values[0], base, plain)
            return
        out = self.plan.records
        # The second pass: the records' walk is RecordCursor's, and so are the paths
        # (cursor.where: rendered only for tensor names and errors). Values are in
        # pre-order, nodes and leaves alike: before a leaf come next_record nodes and
        # index leaves, before a node its record index and next_leaf leaves.
        cursor = RecordCursor(records)
        step = cursor.step
        key = cursor.key
        # per open node: [kind, aux, where, its path (built on first use), its id]
        nodes: list[list[Any]] = []
        open_ids: dict[int, Callable[[], str]] = {}  # mutable nodes open on the walk
        while (event := step()) is not None:
            if event == LEAF:
                v = values[cursor.next_record + cursor.index]
                tv = type(v)
                # Arrays and plain scalars inline, the path string built once per node.
                if tv is np.ndarray and not plain:
                    node = nodes[-1]
                    prefix = node[3]
                    if prefix is None:
                        prefix = node[3] = node[2]()
                    self.array(v, prefix + str(key()))
                elif tv is float or tv is str or tv is int or tv is bool:
                    out.append(["S", encode_scalar(v)])
                else:
                    where = _under(base, cursor.where())
                    if id(v) in open_ids:  # cut by is_leaf: an ancestor of itself
                        raise _cycle(where(), open_ids[id(v)]())
                    self.leaf(v, where, plain)
                continue
            if event == CLOSE:
                kind, aux, where, _, oid = nodes.pop()
                open_ids.pop(oid, None)
                self.tail(kind, aux, where)
                continue
            kind, aux, n, mask = cursor.record
            vi = cursor.index + cursor.next_leaf
            obj = values[vi]
            where = _under(base, cursor.where())
            if kind.mutable and not plain:
                k = self.first.results.get(id(obj))
                if k is not None:
                    out.append(["@", k])
                    cursor.skip()
                    continue
                self.first.store(obj, len(out))
                open_ids[id(obj)] = where
            out.append(self.node_record(kind, aux, n, where, plain))
            if mask is None and n and not plain:
                # All children leaves: taken here, not one cursor step each (a model's
                # layers of a few arrays), as a run when they are alike.
                if n < self.min_run or not self.run(values, vi + 1, n, kind, aux, where):
                    self.leaf_children(values, vi + 1, kind.keys(aux, n), where, open_ids)
                cursor.skip()
                open_ids.pop(id(obj), None)
                self.tail(kind, aux, where)
                continue
            nodes.append([kind, aux, where, None, id(obj)])

    def leaf_children(
        self,
        values: list[Any],
        vi: int,
        keys: Sequence[Key],
        where: Callable[[], str],
        open_ids: dict[int, Callable[[], str]],
    ) -> None:
        """The leaf children of a node (``keys``, values from ``values[vi]``) one by one:
        what ``tree`` does at each ``LEAF``, without the cursor's step per leaf."""
        out = self.plan.records
        prefix = None
        for i, k in enumerate(keys, vi):
            v = values[i]
            tv = type(v)
            if tv is np.ndarray:
                if prefix is None:
                    prefix = where()
                self.array(v, prefix + str(k))
            elif tv is float or tv is str or tv is int or tv is bool:
                out.append(["S", encode_scalar(v)])
            else:
                at = _under(where, lambda k=k: str(k))  # type: ignore[misc]
                if id(v) in open_ids:  # cut by is_leaf: an ancestor of itself
                    raise _cycle(at(), open_ids[id(v)]())
                self.leaf(v, at, False)


def file_bools(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``a``, or a bool array viewing other bytes (u8.view(bool)) as 0s and 1s: files
    hold a bool as 0 or 1, and load refuses any other byte."""
    if a.dtype.type is np.bool_ and a.size and a.view(np.uint8).max() > 1:
        return np.asarray(a.view(np.uint8) != 0)  # asarray: 0-d gives a scalar
    return a


def _under(base: Callable[[], str], path: Callable[[], str]) -> Callable[[], str]:
    """``base() + path()``, rendered when called."""
    return lambda: base() + path()


_BUILTIN_TYPES = (tuple, list, dict, OrderedDict, defaultdict, deque, type(None))

#: Nodes with fewer leaf children than this go through the per-leaf loop alone.
_MIN_RUN = 8

#: What the C walk asks of Python (``_compiled.classifier``): the Python walk's calls.
_CLASSIFY = classifier(_Encoder().node_record, _Encoder, file_bools, _SCALARS, _BUILTIN_TYPES)


def _cycle(path: str, first: str) -> StructureError:
    """The engine's cycle error (``_relocate.cycle_error``) for paths already rendered."""
    return StructureError(
        f"save: the tree has a reference cycle: the object at {path!r} is the same "
        f"object as its ancestor at {first!r}. Trees must be acyclic; break the cycle, or "
        f"make the object a leaf (exclude=/is_leaf=, where the operation takes them)."
    )


def _all_str(keys: tuple[Any, ...]) -> bool:
    return all(type(k) is str for k in keys)


def _key_form(k: Key) -> list[Any]:
    if isinstance(k, AttrKey):
        return ["a", k.name]
    if isinstance(k, IndexKey):
        return ["i", k.idx]
    return ["d", encode_key(k.raw)]


class _Unregistered(SerializationError):
    """A class that is not registered by name, at ``where()``; ``encode`` then lists
    every such class of the tree in one error."""

    def __init__(self, cls: type, where: Callable[[], str], one: SerializationError) -> None:
        super().__init__(*one.args)
        self.cls = cls
        self.where = where
        self.one = one


def encode(
    tree: Any,
    *,
    op: str = "save",
    names: str = "keystr",
    metadata: Any = None,
    runs: bool = True,
    compiled: bool = True,
) -> Plan:
    """Validate ``tree`` and encode it; raises ``SerializationError`` naming the path.

    ``op`` names the public function in errors; ``names="dotted"`` names tensors as
    torch state_dicts do (``layers.0.w``); ``metadata`` is the user's str -> str
    metadata, stored beside the tree in ``__metadata__``; ``runs=False`` encodes
    leaf by leaf (the plain twin of ``_Encoder.run``); ``compiled=False`` walks in
    Python alone (the plain twin of ``_compiled.encode_compiled``).
    """
    if names not in ("keystr", "dotted"):
        raise ValueError(f"{op}: names must be 'keystr' or 'dotted', got {names!r}.")
    user = _check_metadata(metadata, op)
    found = encode_compiled(tree, _CLASSIFY) if compiled else None
    try:
        if found is None:
            enc = _Encoder(runs)
            enc.tree(tree, str, plain=False)
            plan = enc.plan
        else:
            plan = Plan(*found)
        if names == "dotted":
            plan.names = _dotted_names(plan.names)
            for rec, name in zip(plan.crc_slots, plan.names):
                rec[1] = name
    except _Unregistered as err:
        raise _as_op(_unregistered(tree, err, op), op) from None
    except (SerializationError, StructureError) as err:
        raise _as_op(err, op) from None
    plan.metadata = user
    return plan


def _as_op(err: Exception, op: str) -> Exception:
    """``err`` with its message saying ``op:`` where the encoder says ``save:``."""
    if op != "save" and err.args and type(err.args[0]) is str and err.args[0].startswith("save"):
        err.args = (op + err.args[0][4:], *err.args[1:])
    return err


def _check_metadata(metadata: Any, op: str) -> dict[str, str]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or not all(
        type(k) is str and type(v) is str for k, v in metadata.items()
    ):
        raise TypeError(
            f"{op}: metadata must be a dict of str to str (as safetensors' metadata=), got "
            f"{short_repr(metadata)}. Convert the values with str() or json.dumps()."
        )
    reserved = sorted(k for k in metadata if k.startswith("containers."))
    if reserved:
        raise ValueError(
            f"{op}: metadata keys starting with 'containers.' are the library's own: "
            f"{', '.join(map(repr, reserved))}. Choose other keys."
        )
    return dict(metadata)


def _unregistered(tree: Any, first: _Unregistered, op: str) -> SerializationError:
    """One error naming every class of ``tree`` that is not registered by name."""
    records: list[Any] = []
    flatten_records(tree, None, False, op, records)
    found: dict[type, None] = {first.cls: None}
    for rec in records:
        t = rec[0].type
        if rec[0].spec is None and t not in _BUILTIN_TYPES and name_of(t) is None:
            found.setdefault(t, None)
    if len(found) == 1:
        return first.one
    listed = ", ".join(repr(type_name(t)) for t in found)
    optax = any((t.__module__ or "").startswith("optax") for t in found)
    fix = (
        "Call containers.interop.register_optax() (register_jax() does it when optax is "
        "imported) to register optax's states under their public names; declare the "
        "others with @container or ct.register."
        if optax
        else f"Files rebuild classes by their registered name: declare each with "
        f"@container, or call ct.register({type_name(first.cls)}) (namedtuples too)."
    )
    n = len(found)
    return SerializationError(
        f"save: {n} class{'' if n == 1 else 'es'} in the tree {'is' if n == 1 else 'are'} "
        f"not registered by name: {listed} (the first at {_where(first.where())}). {fix}"
    )
