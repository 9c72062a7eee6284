"""Array leaves as the file stores them: C-contiguous, little-endian numpy arrays of a
dtype files hold, converted from numpy subclasses, JAX, torch and lazy arrays, with
errors that name the leaf's path and how to fix it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from containers._errors import SerializationError
from containers._serialize._format import CODES

__all__ = ["fail", "to_numpy", "where_of"]


def fail(where: str, what: str, fix: str) -> SerializationError:
    return SerializationError(f"save: at {where}: {what}. {fix}")


def where_of(path: str) -> str:
    return path if path else "the root"


def to_numpy(x: Any, path: str) -> np.ndarray[Any, Any] | None:
    """``x`` as a C-contiguous little-endian ndarray if it is an array leaf, else None."""
    t = type(x)
    a: np.ndarray[Any, Any]
    if t is np.ndarray:
        a = x
    elif t is np.memmap:  # np.load(mmap_mode=...): the subclass only says where bytes live
        a = x.view(np.ndarray)
    else:
        module = t.__module__ or ""
        convert: Callable[[Any], np.ndarray[Any, Any]] | None = None
        if module.startswith(("jax", "jaxlib")) and hasattr(x, "__array__"):
            convert = np.asarray
        elif module.startswith("torch") and hasattr(x, "detach"):
            convert = _torch_numpy
        elif getattr(t, "__containers_lazy__", False) is True:
            convert = np.asarray  # a LazyArray: read now, to be written
        if convert is not None:
            try:
                a = convert(x)
            except Exception as err:  # float8, sparse, meta, key arrays: the library's own error
                raise fail(
                    where_of(path),
                    f"a {module.split('.')[0]}.{t.__qualname__} of dtype "
                    f"{getattr(x, 'dtype', '?')}, which cannot be converted to a numpy array "
                    f"({type(err).__name__}: {' '.join(str(err).split()).rstrip('.')})",
                    "Convert it to a supported dtype, dense and with data, first (e.g. "
                    "x.float() in torch, jax.random.key_data(k) for jax keys).",
                ) from err
        elif isinstance(x, np.ndarray):
            raise fail(
                where_of(path),
                f"an array of type {t.__qualname__} (a numpy subclass, whose meaning a plain "
                f"array loses)",
                "Convert it with np.asarray first.",
            )
        else:
            return None
    code = CODES.get(a.dtype.type)
    if code is None:
        raise fail(
            where_of(path),
            f"an array of dtype {a.dtype}, which files cannot hold",
            "Supported dtypes: bool, int8-int64, uint8-uint64, float16/32/64, complex64, "
            "bfloat16; convert it (e.g. a.astype(np.float64)).",
        )
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a if a.flags.c_contiguous else a.copy(order="C")  # ascontiguousarray makes 0-d 1-d


def _torch_numpy(x: Any) -> np.ndarray[Any, Any]:
    # conj() and the imaginary part of a conjugate view are lazy: a bit on the tensor,
    # which numpy() refuses until it is resolved into data.
    x = x.detach().cpu().resolve_conj().resolve_neg()
    if str(x.dtype) in _TORCH_FLOAT8:
        import ml_dtypes
        import torch

        as_bytes = x.contiguous().view(torch.uint8).numpy()
        return np.asarray(as_bytes.view(getattr(ml_dtypes, str(x.dtype)[6:])))
    if str(x.dtype) == "torch.bfloat16":
        import ml_dtypes
        import torch

        return np.asarray(x.view(torch.int16).numpy().view(ml_dtypes.bfloat16))
    return np.asarray(x.numpy())


#: torch's float8 dtypes that files hold (as safetensors names them: F8_E4M3, ...).
_TORCH_FLOAT8 = frozenset({"torch.float8_e4m3fn", "torch.float8_e5m2", "torch.float8_e8m0fnu"})
