"""Scalars and dict keys as JSON values, both ways, with their Python types kept.

This stage knows the tagged forms of ``docs/file-format.md`` ("Scalars") and nothing
of trees: a scalar is one value, a key is a scalar or a flat tuple of scalars.
Decoding trusts nothing: every malformed form raises ``FormatError``.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from typing import Any

import numpy as np

from containers._errors import FormatError, short_repr
from containers._paths import AttrKey, DictKey, IndexKey
from containers._serialize._format import CODES, DTYPES

__all__ = ["NotStorable", "decode_key", "decode_scalar", "encode_key", "encode_scalar"]

_SAFE_INT = 2**53
_HEX_INT = re.compile(r"-?[0-9a-f]+").fullmatch
_KEY_FORMS = (AttrKey, IndexKey, DictKey)


class NotStorable(Exception):
    """A value has no file form; the message says what it is."""


_NAN_BITS = struct.pack(">d", math.nan)


def _float(x: float) -> Any:
    if math.isfinite(x):
        return x
    if not math.isnan(x):
        return {"f": "inf" if x > 0 else "-inf"}
    bits = struct.pack(">d", x)
    # A NaN's sign and payload are kept: any NaN but the default one by its bits.
    return {"f": "nan"} if bits == _NAN_BITS else {"fx": bits.hex()}


def encode_scalar(v: Any) -> Any:
    """The JSON form of a scalar (int, float, complex, str, bytes, bool, None, numpy scalar)."""
    t = type(v)
    if t is str or t is bool or v is None:
        return v
    if t is int:
        return v if -_SAFE_INT < v < _SAFE_INT else {"i": format(v, "x")}
    if t is float:
        return _float(v)
    if t is complex:
        return {"c": [_float(v.real), _float(v.imag)]}
    if t is bytes:
        return {"b": base64.b64encode(v).decode("ascii")}
    if isinstance(v, np.generic) and type(v) is v.dtype.type:
        code = CODES.get(v.dtype.type)
        if code is None:
            raise NotStorable(f"a numpy scalar of dtype {v.dtype}, which has no file dtype")
        le = np.asarray(v).astype(DTYPES[code], copy=False)
        return {"n": code, "x": le.tobytes().hex()}
    raise NotStorable(f"a value of type {t.__qualname__}")


def _decode_float(x: Any) -> float:
    if type(x) is float:
        return x
    if type(x) is dict and len(x) == 1:
        if x.get("f") in ("nan", "inf", "-inf"):
            return float(x["f"])
        bits = x.get("fx")
        if type(bits) is str and len(bits) == 16 and _HEX_INT(bits) and bits[0] != "-":
            raw = bytes.fromhex(bits)
            value: float = struct.unpack(">d", raw)[0]
            if math.isnan(value) and raw != _NAN_BITS:  # one form per value
                return value
    raise FormatError(f"{short_repr(x)} is not a float")


def decode_scalar(x: Any) -> Any:
    """The value of a JSON scalar form; raises ``FormatError`` on anything else."""
    t = type(x)
    if t is str or t is bool or t is int or t is float or x is None:
        return x
    if t is not dict or (len(x) != 1 and "n" not in x):
        raise FormatError(f"{short_repr(x)} is not a scalar")
    try:
        if "i" in x and len(x) == 1:
            s = x["i"]
            # Only the form writers use: int() would also take "0x", "_", spaces and
            # capitals, which other readers of the format need not.
            if type(s) is not str or not _HEX_INT(s):
                raise ValueError(s)
            return int(s, 16)
        if "f" in x or "fx" in x:
            return _decode_float(x)
        if "c" in x and len(x) == 1:
            c = x["c"]
            if type(c) is not list or len(c) != 2:
                raise ValueError(c)
            return complex(_decode_float(c[0]), _decode_float(c[1]))
        if "b" in x and len(x) == 1:
            if type(x["b"]) is not str:
                raise ValueError(x["b"])
            return base64.b64decode(x["b"].encode("ascii"), validate=True)
        if set(x) == {"n", "x"}:
            code, hexed = x["n"], x["x"]
            if type(code) is not str or code not in DTYPES or type(hexed) is not str:
                raise ValueError(code)
            dt = DTYPES[code]
            if len(hexed) != 2 * dt.itemsize:
                raise ValueError(hexed)
            return np.frombuffer(bytes.fromhex(hexed), dt)[0]
    except (ValueError, TypeError, UnicodeEncodeError, binascii.Error):
        pass
    raise FormatError(f"{short_repr(x)} is not a scalar")


def encode_key(k: Any) -> Any:
    """The JSON form of a dict key: a scalar, or ``{"t": [...]}`` for a tuple of scalars
    or of path keys (the key paths that ``ct.state`` and ``ct.split`` key parts by)."""
    if type(k) is tuple:
        return {
            "t": [
                _path_key(e) if type(e) in _KEY_FORMS else encode_scalar(e)
                for e in k
                if type(e) is not tuple or _nested()
            ]
        }
    return encode_scalar(k)


def _path_key(k: Any) -> Any:
    """A path key inside a tuple key: ``{"ka": name}``, ``{"ki": index}`` or
    ``{"kd": key}`` (a dict key's own form, flat)."""
    if type(k) is AttrKey:
        return {"ka": k.name}
    if type(k) is IndexKey:
        return {"ki": k.idx}
    raw = k.raw
    return {"kd": encode_scalar(raw) if type(raw) is not tuple else encode_key(raw)}


def _nested() -> bool:
    raise NotStorable("a tuple key holding a tuple (tuple keys must be flat)")


def decode_key(x: Any) -> Any:
    """The dict key of a JSON key form."""
    if type(x) is dict and "t" in x:
        if len(x) != 1 or type(x["t"]) is not list:
            raise FormatError(f"{short_repr(x)} is not a key")
        return tuple(_decode_path_key(e) if _is_path_key(e) else decode_scalar(e) for e in x["t"])
    return decode_scalar(x)


def _is_path_key(x: Any) -> bool:
    return type(x) is dict and len(x) == 1 and ("ka" in x or "ki" in x or "kd" in x)


def _decode_path_key(x: Any) -> Any:
    """The path key of ``{"ka": name}``, ``{"ki": index}`` or ``{"kd": key}``."""
    if "ka" in x:
        name = x["ka"]
        if type(name) is str:
            return AttrKey(name)
    elif "ki" in x:
        idx = x["ki"]
        if type(idx) is int and 0 <= idx < _SAFE_INT:
            return IndexKey(idx)
    else:
        inner = x["kd"]
        if not (
            type(inner) is dict
            and "t" in inner
            and any(map(_is_path_key, inner["t"] if type(inner["t"]) is list else []))
        ):
            return DictKey(decode_key(inner))
    raise FormatError(f"{short_repr(x)} is not a path key")
