"""Where loaded arrays go: a framework (``to=``), dotted names (``_like`` fits templates).

This stage sits beside ``_api``: it converts the arrays ``_format`` read (numpy, every
file dtype) to torch or JAX without a copy where the framework can wrap the buffer,
and fits a file's leaves to a template by path. It reads the file's tree through the
records ``_decode`` validated (``rows``) and never resolves a type name: a template
load needs no registered class, so the threat model is unchanged (no name from the
file is imported or looked up; the file's names are dictionary keys only).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from containers._errors import (
    SerializationError,
    StructureError,
    short_repr,
)
from containers._paths import (
    AttrKey,
    IndexKey,
    Key,
    parse_keystr,
)

__all__ = [
    "FRAMEWORKS",
    "check_to",
    "converter",
    "dotted",
    "dotted_names",
    "torch_tensor",
]

#: The values ``to=`` takes.
FRAMEWORKS = ("numpy", "torch", "jax")


def check_to(op: str, to: Any, device: Any, dtype: Any, like: Any) -> None:
    """Refuse option combinations before the file is opened."""
    if to is not None and to not in FRAMEWORKS:
        raise ValueError(
            f"{op}: to must be one of {', '.join(map(repr, FRAMEWORKS))} or None, got "
            f"{short_repr(to)}."
        )
    if like is not None and (to is not None or device is not None or dtype is not None):
        raise TypeError(
            f"{op}: like= decides the framework, device and dtype of every leaf; pass "
            f"either like= or to=/device=/dtype=, not both."
        )
    if to is None and (device is not None or dtype is not None):
        raise TypeError(f"{op}: device= and dtype= need to= ('numpy', 'torch' or 'jax').")
    if to == "numpy" and device not in (None, "cpu"):
        raise ValueError(f"{op}: numpy arrays live on the CPU; got device={short_repr(device)}.")


# --- arrays to a framework -------------------------------------------------------------

#: numpy dtypes that torch.from_numpy refuses, and the same-size integer dtype its
#: buffer is wrapped as (then ``Tensor.view(dtype)``, which copies nothing).
_VIA: dict[str, type[Any]] = {"bfloat16": np.int16}
for _n in ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"):
    _VIA[_n] = np.uint8


def _dtype_name(dtype: Any) -> str:
    """A dtype's name as numpy, torch and JAX share them (``float32``, ``bfloat16``)."""
    text = str(dtype)
    if text.startswith("torch."):
        return text[6:]
    try:
        return str(np.dtype(dtype).name)
    except TypeError:
        return text


def _is_floating(a: np.ndarray[Any, Any]) -> bool:
    return a.dtype.kind == "f" or a.dtype.name in _VIA


def converter(to: str, device: Any, dtype: Any) -> Callable[[np.ndarray[Any, Any]], Any]:
    """The function that turns one loaded numpy array into the target's array.

    ``dtype`` casts floating-point arrays only (integers, booleans and complex stay),
    as ``torch.nn.Module.to(dtype)`` does.
    """
    if to == "numpy":
        if dtype is None:
            return _same
        want = np.dtype(dtype)
        return lambda a: a.astype(want) if _is_floating(a) else a
    if to == "torch":
        torch = importlib.import_module("torch")
        tdt = None if dtype is None else _torch_dtype(torch, dtype)

        def to_torch(a: np.ndarray[Any, Any]) -> Any:
            t = torch_tensor(torch, a)
            if tdt is not None and t.is_floating_point():
                t = t.to(tdt)
            return t if device is None else t.to(device)

        return to_torch
    jax = importlib.import_module("jax")
    jdt = None if dtype is None else _numpy_dtype(dtype)

    def to_jax(a: np.ndarray[Any, Any]) -> Any:
        if jdt is not None and _is_floating(a):
            a = a.astype(jdt)
        return jax.device_put(a, device)

    return to_jax


def _same(a: Any) -> Any:
    return a


def _numpy_dtype(dtype: Any) -> np.dtype[Any]:
    return np.dtype(_dtype_name(dtype)) if str(dtype).startswith("torch.") else np.dtype(dtype)


def _torch_dtype(torch: Any, dtype: Any) -> Any:
    if isinstance(dtype, torch.dtype):
        return dtype
    name = _dtype_name(dtype)
    found = getattr(torch, name, None)
    if not isinstance(found, torch.dtype):
        raise TypeError(f"load: torch has no dtype {name!r}.")
    return found


def torch_tensor(torch: Any, a: np.ndarray[Any, Any]) -> Any:
    """``a`` as a torch tensor over the same memory (every file dtype, bfloat16 and float8
    through a same-size integer view)."""
    via = _views(torch).get(a.dtype)  # by dtype object: dtype.name is slow (many leaves)
    if via is None:
        return torch.from_numpy(a)
    return torch.from_numpy(a.view(via[0])).view(via[1])


_VIEWS: dict[np.dtype[Any], tuple[type[Any], Any]] = {}
_TORCH_TO_NUMPY: dict[Any, np.dtype[Any]] = {}


def _views(torch: Any) -> dict[np.dtype[Any], tuple[type[Any], Any]]:
    """numpy dtype -> (integer view type, torch dtype) for the dtypes torch.from_numpy
    refuses; with it, ``_TORCH_TO_NUMPY`` (torch dtype -> the file's numpy dtype)."""
    if not _VIEWS:
        from containers._serialize._format import DTYPES

        for dt in DTYPES.values():
            tdt = getattr(torch, dt.name, None)
            if tdt is not None:
                _TORCH_TO_NUMPY[tdt] = dt
            if dt.name in _VIA and tdt is not None:
                _VIEWS[dt] = (_VIA[dt.name], tdt)
    return _VIEWS


def dotted(path: Sequence[Key]) -> str:
    """The dotted name of a path (``layers.0.w``), as torch state_dicts and hub files
    name tensors; ``ValueError`` for a dict key that is neither a str nor an int."""
    parts = []
    for k in path:
        if type(k) is AttrKey:
            parts.append(k.name)
        elif type(k) is IndexKey:
            parts.append(str(k.idx))
        else:
            raw = k.raw
            if type(raw) is not str and type(raw) is not int:
                raise ValueError(f"the dict key {raw!r} has no dotted name (str or int keys)")
            parts.append(str(raw))
    return ".".join(parts)


def dotted_names(names: list[str]) -> list[str]:
    """The dotted form of tensor names rendered by keystr, for ``save(names="dotted")``."""
    out = []
    taken: dict[str, str] = {}
    for name in names:
        try:
            new = dotted(parse_keystr(name))
        except (ValueError, StructureError) as err:
            raise SerializationError(
                f"save: at {name or 'the root'}: {err}. Use names='keystr', or keys that "
                f"are str or int."
            ) from None
        if new in taken:
            raise SerializationError(
                f"save: at {name}: names='dotted' gives it the name {new!r}, as "
                f"{taken[new]}. Use names='keystr', or make the keys distinct once dotted."
            )
        taken[new] = name
        out.append(new)
    return out


# --- fitting a template ----------------------------------------------------------------
