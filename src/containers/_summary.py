"""Leaf summaries for the views: an array's dtype, shape and size, and its statistics.

A helper of the display stage (``_display``, ``_html``) and of generated reprs; it
walks no tree. Arrays are recognized by their attributes alone (a ``shape`` of ints
and a ``dtype``), so no array library is imported, and data is read only from arrays
known to hold it in memory (numpy, jax, torch): a leaf without data (a lazy leaf) is
summarized by its dtype and shape alone.
"""

from __future__ import annotations

import math
import sys
from typing import Any, NamedTuple

from numpy import ndarray as _ndarray  # numpy is a dependency (and imported already)

__all__ = ["ArrayInfo", "Stats", "array_info", "format_bytes", "format_count", "stats"]


class ArrayInfo(NamedTuple):
    """What an array leaf says about itself without reading its data."""

    dtype: str  # "float32", not "torch.float32"
    shape: tuple[int, ...]
    size: int  # the number of elements
    nbytes: int  # 0 when neither ``nbytes`` nor the dtype (its ``itemsize``, its name) tells
    lazy: bool = False  # a lazy leaf (``load(lazy=True)``): its data is not in memory

    @property
    def text(self) -> str:
        """``float32[3,4]``; a 0-d array is ``int32[]``, as ``inspect`` shows it; a lazy
        leaf is ``float32[3,4] (lazy)``."""
        text = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        return f"{text} (lazy)" if self.lazy else text


def _is_numpy_scalar(value: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.generic)


#: Dtype names by dtype (numpy's ``dtype.name`` costs microseconds; trees repeat dtypes).
_NAMES: dict[Any, str] = {}


def _dtype_name(dtype: Any) -> str:
    name = getattr(dtype, "name", None)
    if not isinstance(name, str):
        name = str(dtype)
    name = name.rsplit(".", 1)[-1]  # torch.float32 -> float32
    try:
        if len(_NAMES) < 1024:
            _NAMES[dtype] = name
    except TypeError:  # unhashable dtype: not cached
        pass
    return name


def array_info(value: Any) -> ArrayInfo | None:
    """The dtype, shape, size and bytes of anything with a ``shape`` of ints and a
    ``dtype`` (numpy, jax and torch arrays, lazy leaves), else None. A numpy scalar
    (``np.float32(1.5)``) is a value, not an array: None."""
    if type(value) is _ndarray:  # the common case, in a few attribute reads
        dtype = value.dtype
        name = _NAMES.get(dtype) or _dtype_name(dtype)
        return ArrayInfo(name, value.shape, value.size, value.nbytes)
    if not hasattr(value, "dtype") or _is_numpy_scalar(value):
        return None
    try:
        shape = tuple(int(d) for d in value.shape)
        dtype = value.dtype
    except Exception:  # no array-like summary: the caller falls back to repr
        return None
    try:
        name = _NAMES[dtype]
    except (KeyError, TypeError):  # a dtype not seen yet, or unhashable
        name = _dtype_name(dtype)
    size = math.prod(shape)
    nbytes = getattr(value, "nbytes", None)
    if not isinstance(nbytes, int):
        itemsize = getattr(dtype, "itemsize", None)
        if not isinstance(itemsize, int):
            itemsize = _itemsize(name)
        nbytes = size * itemsize
    lazy = getattr(type(value), "__containers_lazy__", False) is True
    return ArrayInfo(name, shape, size, nbytes, lazy)


def _itemsize(name: str) -> int:
    """The bytes of one element of the dtype named ``name`` as numpy knows it, else 0."""
    import numpy as np

    try:
        return int(np.dtype(name).itemsize)
    except Exception:  # a dtype numpy does not know: its bytes are not counted
        return 0


class Stats(NamedTuple):
    """Statistics of an array's finite values, and the count of the others."""

    min: float
    max: float
    mean: float
    std: float
    nan: int
    inf: int
    values: Any  # the data as a float64 numpy array, for plots (None past the plot limit)


def _host_array(value: Any) -> Any:
    """The array's data as a numpy array, for arrays known to hold it (numpy, jax,
    torch); None for anything else, so that a lazy leaf is never read."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return value
    module = type(value).__module__.split(".", 1)[0]
    if module in ("jax", "jaxlib"):
        return np.asarray(value)
    if module == "torch":
        t = value.detach()
        if t.is_complex():
            return None
        return t.to("cpu").float().numpy() if t.is_floating_point() else t.to("cpu").numpy()
    return None


def stats(value: Any, info: ArrayInfo, *, limit: int, plot_limit: int) -> Stats | None:
    """The statistics of an array leaf holding at most ``limit`` elements of a real
    number or bool dtype, computed in float64; None for others (and lazy leaves)."""
    if info.size == 0 or info.size > limit:
        return None
    import numpy as np

    try:
        data = _host_array(value)
        if data is None or (data.dtype.kind not in "biuf" and "float" not in info.dtype):
            return None
        data = np.asarray(data, dtype=np.float64)  # bfloat16/float8 (ml_dtypes) too
    except Exception:  # an array that will not give its data: shown by dtype and shape
        return None
    finite = np.isfinite(data)
    nan = inf = 0
    if not finite.all():
        nan = int(np.isnan(data).sum())
        inf = int(data.size - nan - int(finite.sum()))
        data = data[finite]
    if data.size == 0:
        return Stats(math.nan, math.nan, math.nan, math.nan, nan, inf, None)
    return Stats(
        float(data.min()),
        float(data.max()),
        float(data.mean()),
        float(data.std()),
        nan,
        inf,
        data if info.size <= plot_limit else None,
    )


def format_count(n: int, word: str = "param") -> str:
    """``1 param``, ``1,234 params``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def format_bytes(n: int) -> str:
    """``36 B``, ``4.0 KiB``, ``12.5 MiB``, ``1.2 GiB`` (powers of 1024)."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} TiB"
