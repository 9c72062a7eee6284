"""The runtime returns what the mypy plugin says it returns.

cases/agreement_cases.py pairs each call with the type the plugin infers for it
(``assert_type``, checked by test_checkers.py). Here each case runs, and its value must
conform to that same type expression, evaluated at runtime: container classes and their
type arguments, lists, tuples, dicts, TypedDicts, namedtuples, None and leaf types.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import importlib.util
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

import containers as ct

CASES_FILE = Path(__file__).parent / "cases" / "agreement_cases.py"


def _load_cases() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("agreement_cases", CASES_FILE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses and get_type_hints look the module up by name.
    sys.modules["agreement_cases"] = module
    spec.loader.exec_module(module)
    return module


CASES = _load_cases()


def _claimed_types() -> dict[str, str]:
    """``case name -> source of the type in its assert_type``."""
    claimed = {}
    for node in ast.parse(CASES_FILE.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("case_"):
            calls = [
                n
                for n in ast.walk(node)
                if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name)
                and n.func.id == "assert_type"
            ]
            assert len(calls) == 1, f"{node.name} must have one assert_type"
            claimed[node.name] = ast.unparse(calls[0].args[1])
    return claimed


CLAIMED = _claimed_types()


def conforms(value: Any, tp: Any, bound: dict[Any, Any] | None = None) -> bool:
    """Whether ``value`` is a value of the static type ``tp`` (deeply, as far as it can tell)."""
    bound = bound or {}
    if isinstance(tp, TypeVar):
        return tp not in bound or conforms(value, bound[tp])
    if tp is Any or tp is object:
        return True
    if tp is None or tp is type(None):
        return value is None
    if tp is float:  # mypy's numeric promotions
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is complex:
        return isinstance(value, (int, float, complex)) and not isinstance(value, bool)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, arg, bound) for arg in args)
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        return (
            isinstance(value, dict)
            and set(value) == set(hints)
            and all(conforms(value[k], hints[k], bound) for k in hints)
        )
    if isinstance(origin, getattr(typing, "TypeAliasType", ())):  # NDArray, numpy 2.5+
        return conforms(value, origin.__value__[args], bound)
    cls = origin or tp
    if not isinstance(value, cls):
        return False
    if cls is np.ndarray:
        return _dtype_conforms(value, args)
    if cls in (list, collections.deque):
        return all(conforms(item, args[0], bound) for item in value) if args else True
    if cls is dict or cls is collections.OrderedDict:
        return all(conforms(v, args[1], bound) for v in value.values()) if args else True
    if cls is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return all(conforms(item, args[0], bound) for item in value)
        return len(value) == len(args) and all(map(conforms, value, args, [bound] * len(args)))
    if dataclasses.is_dataclass(cls) or hasattr(cls, "_fields"):
        # A container or a namedtuple: every field, with the class's type arguments.
        params = getattr(cls, "__parameters__", ())
        inner = {**bound, **dict(zip(params, args, strict=False))}
        hints = typing.get_type_hints(cls)
        names = (
            [f.name for f in dataclasses.fields(cls)]
            if dataclasses.is_dataclass(cls)
            else list(cls._fields)
        )
        return all(conforms(getattr(value, name), hints[name], inner) for name in names)
    return True  # a leaf class (or Structure[X], whose parameter is only static)


def _dtype_conforms(value: np.ndarray[Any, Any], args: tuple[Any, ...]) -> bool:
    if len(args) < 2:
        return True
    scalar = typing.get_args(args[1])
    return not scalar or scalar[0] is Any or np.issubdtype(value.dtype, scalar[0])


@pytest.mark.parametrize("name", sorted(CLAIMED))
def test_runtime_value_has_the_inferred_type(name: str) -> None:
    """The value a case returns at runtime conforms to the type the plugin infers for it."""
    case: Callable[[], object] = getattr(CASES, name)
    claimed = eval(CLAIMED[name], vars(CASES))  # our own source, as written
    value = case()
    assert conforms(value, claimed), f"{name}: {value!r} is not a {CLAIMED[name]}"


@pytest.mark.parametrize(
    ("value", "tp", "expected"),
    [
        (1, str, False),
        ([1, "a"], list[int], False),
        ((1, 2), tuple[int, ...], True),
        ((1, 2), tuple[int], False),
        ({"a": 1}, dict[str, str], False),
        (None, int, False),
        (1, float, True),
    ],
)
def test_conforms_rejects_mismatches(value: object, tp: object, expected: bool) -> None:
    """The conformance check can fail: it is not vacuous."""
    assert conforms(value, tp) is expected


def test_conforms_reads_container_type_arguments() -> None:
    """A container's fields are checked against its type arguments."""
    pair = CASES.Pair(1, 2)
    assert conforms(pair, CASES.Pair[int])
    assert not conforms(pair, CASES.Pair[str])
    assert not conforms(ct.fmap(str, CASES.layer()), CASES.Linear)
