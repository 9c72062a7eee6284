"""Value equality and hash for static data (kept values, aux): ``values_equal`` and
``value_hash``, type-strict, arrays by content, NaN equal to NaN, at any depth and
through reference cycles. Node kinds compare and hash their aux with them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["value_hash", "values_equal"]


def values_equal(a: Any, b: Any) -> bool:
    """Compare kept values and other static data: type-strict, arrays by content, and
    NaN equal to NaN (a structure equals its own copy, as a pickled one).

    Tuples, lists and dicts are compared item by item, in order, with a list of pairs
    still to compare instead of recursion (any depth); a pair of them met again (a
    reference cycle, or sharing) is not compared twice: the first difference found
    ends the comparison, so a pair met again is equal unless another differs."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if not isinstance(a, (tuple, list, dict)):
        return _scalars_equal(a, b)
    pending = [(a, b)]
    seen: set[tuple[int, int]] = set()
    while pending:
        a, b = pending.pop()
        if a is b:
            continue
        if type(a) is not type(b):
            return False
        if isinstance(a, (tuple, list, dict)):
            if len(a) != len(b):
                return False
            pair = (id(a), id(b))
            if pair in seen:
                continue
            seen.add(pair)
            if isinstance(a, dict):
                if a.keys() != b.keys():
                    return False
                pending.extend((a[k], b[k]) for k in reversed(list(a)))
            else:
                pending.extend(reversed(list(zip(a, b))))
        elif not _scalars_equal(a, b):
            return False
    return True


def _scalars_equal(a: Any, b: Any) -> bool:
    """``values_equal`` for two values of one type that are not tuples, lists or dicts."""
    if isinstance(a, np.ndarray) or _other_array(a):
        if not isinstance(a, np.ndarray):
            try:
                a, b = np.asarray(a), np.asarray(b)
            except Exception:  # a tensor that requires grad, a tracer: only itself
                return False
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        try:
            return bool(np.array_equal(a, b, equal_nan=True))
        except TypeError:  # dtypes without NaN (objects, strings)
            return bool(np.array_equal(a, b))
    if _is_nan(a):
        return _is_nan(b)
    try:
        return bool(a == b)
    except Exception:  # an == that raises or returns something without a truth value
        return False


def _other_array(value: Any) -> bool:
    """Whether ``value`` is an array of another library (jax, torch) that numpy reads:
    compared by content as numpy arrays are, never by its own ``==`` (an array) or
    ``hash`` (torch's is by identity)."""
    return (
        hasattr(type(value), "__array__")
        and not isinstance(value, np.generic)
        and hasattr(value, "shape")
        and hasattr(value, "dtype")
    )


def _is_nan(value: Any) -> bool:
    return isinstance(value, (float, complex, np.inexact)) and bool(np.isnan(value))


def value_hash(value: Any) -> int:
    """Hash static data consistently with ``values_equal``: unhashable values hash by
    type, every NaN alike (Python hashes a NaN by identity), tuples item by item (with
    a stack of open tuples instead of recursion: any depth; a tuple cannot contain
    itself)."""
    if type(value) is not tuple:
        return _scalar_hash(value)
    stack: list[tuple[tuple[Any, ...], list[int]]] = [(value, [])]
    while True:
        items, hashes = stack[-1]
        if len(hashes) < len(items):
            item = items[len(hashes)]
            if type(item) is tuple:
                stack.append((item, []))
            else:
                hashes.append(_scalar_hash(item))
            continue
        stack.pop()
        done = hash(tuple(hashes))
        if not stack:
            return done
        stack[-1][1].append(done)


def _scalar_hash(value: Any) -> int:
    """``value_hash`` of a value that is not a tuple."""
    if _is_nan(value):
        return hash("nan")
    if _other_array(value):
        return hash(type(value).__qualname__)
    try:
        return hash(value)
    except TypeError:
        return hash(type(value).__qualname__)
