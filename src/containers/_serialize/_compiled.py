"""The encoder's compiled walk: ``containers._encoder.encode`` and what it asks of Python.

``encode_compiled(tree)`` is the ``Plan`` of ``_encode._Encoder.tree`` (its plain twin)
made by one walk in C, or None: the C walk gives up on anything it does not decide
itself (a cycle, a name met twice, any error, a tree deeper than 100 levels, more
values than load accepts), and ``encode`` then runs the Python walk from the start,
which writes the same file or raises the error with its path. Sharing is recorded
exactly as the Python walk records it: every array and mutable node is noted by
identity, and held, until the walk ends (containers/_encoder.c).

The C walk takes tuples, lists, None, str/bool/int/float and arrays already in the
file's form itself; every other value goes to ``classify`` (made by ``classifier`` with ``_encode``'s
helpers), which answers with
the same calls the Python walk makes (the kind's ``flatten``, ``node_record``,
``to_numpy``, the kept values' plain walk). tests/test_serialize_compiled.py holds
both walks to byte-identical files on Hypothesis trees.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from containers._kinds import _dict_flatten
from containers._registry import DICT, KINDS, LEAF_TYPES, NodeKind, kind_of, name_of
from containers._serialize._format import DTYPES
from containers._serialize._limits import DEFAULT_LIMITS
from containers._serialize._storable import to_numpy
from containers._serialize._strictjson import load_extension
from containers._serialize._values import encode_scalar

__all__ = ["classifier", "encode_compiled", "format_codes", "render"]


#: ``containers._encoder``, or None. Read at each call (tests switch it off).
_encoder = load_extension("_encoder")


class _Fallback(Exception):
    """The C walk gives up: ``encode`` runs the Python walk from the start."""


def _nowhere() -> str:
    """The ``where`` given to the Python encoder's helpers: rendering a path means an
    error is being made, which the Python walk then raises with its path."""
    raise _Fallback


def _buffer_formats() -> frozenset[str]:
    """The buffer formats of the file's dtypes, as numpy exports them on this machine
    (``f`` for little-endian float32 here, ``<f`` on a big-endian one): an array with
    one of them is stored as it is. Bool is left out (a bool array viewing other bytes
    than 0 and 1 is normalized first), as is any dtype without a buffer format
    (bfloat16, float8)."""
    formats = set()
    for dt in DTYPES.values():
        if dt.type is np.bool_:
            continue
        try:
            formats.add(np.zeros(0, dt).data.format)
        except (ValueError, TypeError):
            continue
    return frozenset(formats)


_STR = frozenset({str})


_CODES: dict[str, str] | None = None


def format_codes() -> dict[str, str]:
    """Buffer format -> the file's dtype code, for the dtypes numpy exports a buffer of
    (``containers._encoder.entries``)."""
    global _CODES  # noqa: PLW0603 - built on first use
    if _CODES is None:
        codes = {}
        for code, dt in DTYPES.items():
            try:
                codes[np.zeros(0, dt).data.format] = code
            except (ValueError, TypeError):
                continue
        _CODES = codes
    return _CODES


def classifier(
    node_record: Callable[..., list[Any]],
    encoder: Callable[[], Any],
    file_bools: Callable[[Any], Any],
    scalars: tuple[type, ...],
    builtin_types: tuple[type, ...],
) -> Callable[[Any], Any]:
    """``classify(x)``: what the C walk does with ``x``, a value it does not take
    itself: a node's ``(kids, record, mutable, keys, tail)``, a scalar's record, or the
    array to store (as the Python walk normalizes it); ``_Fallback`` for anything else.
    It makes the Python walk's calls, given by ``_encode`` (which imports this module):
    ``_Encoder.node_record``, a new ``_Encoder`` (kept values), ``file_bools``.

    A declared container's record and keys are made once per class, registered name
    and number of children (``plans``, dropped past ``_MAX_PLANS`` classes), and kept
    values that are str, int, float, bool or None are written as the kept values' walk
    writes them (``_plain_kept``), without one (benchmarks/serialization.py, "classes":
    10,000 containers); the Python walk writes the same bytes
    (tests/test_serialize_compiled.py), and ``_per_class = False`` makes every call."""
    # per declared container kind: (its registered name, n, its record, its keys)
    plans: dict[NodeKind, tuple[Any, int, list[Any], list[str]]] = {}

    def container(x: Any, kind: NodeKind) -> Any:
        """``classify``'s answer for the declared container ``x`` (of ``kind``)."""
        kids, aux = kind.flatten(x)
        if type(kids) is not list and type(kids) is not tuple:
            kids = list(kids)
        n = len(kids)
        name = name_of(kind.type)  # as node_record names it
        plan = plans.get(kind)
        if plan is None or plan[0] != name or plan[1] != n:
            if len(plans) >= _MAX_PLANS:
                plans.clear()
            record = node_record(kind, aux, n, _nowhere, False)
            plan = plans[kind] = (name, n, record, [str(k) for k in kind.keys(aux, n)])
        tail = _plain_kept(aux) if aux else None
        if aux and tail is None:
            sub = encoder()  # kept values: plain data, no sharing
            sub.tail(kind, aux, _nowhere)
            tail = sub.plan.records
        return kids, plan[2].copy(), kind.mutable, plan[3], tail

    def classify(x: Any) -> Any:
        try:
            t = type(x)
            kind = None if t in LEAF_TYPES else KINDS.get(t) or kind_of(x)
            if kind is not None and kind.spec is not None and _per_class:
                return container(x, kind)
            if kind is None:
                if t in scalars or (isinstance(x, np.generic) and not isinstance(x, np.ndarray)):
                    return ["S", encode_scalar(x)]
                a = to_numpy(x, "")
                if a is None:
                    raise _Fallback
                return file_bools(a)
            kids, aux = kind.flatten(x)
            if type(kids) is not list and type(kids) is not tuple:
                kids = list(kids)
            n = len(kids)
            record = node_record(kind, aux, n, _nowhere, False)
            keys: Any
            if kind is DICT and _STR.issuperset(map(type, aux[0])):  # a loop in C
                keys = aux[0]  # a tuple of str: the C walk renders [repr(key)]
            else:
                keys = [str(k) for k in kind.keys(aux, n)]
            tail = None
            spec = kind.spec
            if (spec is not None and spec.keep) or (
                spec is None and kind.type not in builtin_types
            ):
                sub = encoder()  # kept values and aux: plain data, no sharing
                sub.tail(kind, aux, _nowhere)
                tail = sub.plan.records
            return kids, record, kind.mutable, keys, tail
        except _Fallback:
            raise
        except Exception:  # the Python walk raises it again, with its path
            raise _Fallback from None

    return classify


#: Whether ``classify`` makes a declared container's record once per class and writes
#: its scalar kept values itself; False in the tests that compare it with its twin.
_per_class = True

#: How many classes' plans ``classify`` keeps (classes made on the fly stay bounded).
_MAX_PLANS = 1024


def _plain_kept(values: Any) -> list[Any] | None:
    """The records of the kept values ``values`` as ``_Encoder.tail`` writes them, when
    each is a str, int, float, bool (``["S", encode_scalar(v)]``) or None (``["N"]``);
    else None (the kept values' walk decides, and says what is wrong)."""
    out: list[Any] = []
    for v in values:
        t = type(v)
        if t is str or t is int or t is float or t is bool:
            out.append(["S", encode_scalar(v)])
        elif v is None:
            out.append(["N"])
        else:
            return None
    return out


_CONTEXTS: dict[int, tuple[Any, ...]] = {}


def encode_compiled(tree: Any, classify: Callable[[Any], Any]) -> Any:
    """``(records, names, arrays, crc_slots)`` of ``tree`` from the C walk (a ``Plan``'s
    fields), or None: not built, or it gave up."""
    encoder = _encoder
    if encoder is None:
        return None
    context = _CONTEXTS.get(id(classify))
    if context is None:
        context = _CONTEXTS[id(classify)] = (
            classify,
            encode_scalar,
            _Fallback,
            _buffer_formats(),
            np.ndarray,
            DEFAULT_LIMITS.max_nodes,
            # dicts of str keys read in C, as the DICT kind reads them
            KINDS.get(dict) is DICT and DICT.flatten is _dict_flatten,
        )
    try:
        return encoder.encode(tree, context)
    except _Fallback:
        return None


def render(records: list[Any], quoted: bool = False) -> str:
    """``json.dumps(records, separators=(",", ":"))``, the tree as the header holds it
    (with ``quoted``, ``json.dumps`` of that text: the header's JSON str): in C
    (``containers._encoder.render``: one buffer, a str with nothing to escape copied as
    it is) where it is built, else by json.dumps, its plain twin."""
    encoder = _encoder
    text: str | None = None if encoder is None else encoder.render(records, quoted)
    if text is None:
        text = json.dumps(records, separators=(",", ":"))
        return json.dumps(text) if quoted else text
    return text
