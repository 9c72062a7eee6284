"""The public functions: serialize, deserialize, save, load, inspect.

This stage only wires the others together and adds no parsing of its own:
``deserialize`` is here; ``serialize`` and ``save`` live in ``_save``, ``load`` in
``_load`` and ``inspect`` in ``_inspect``, and are re-exported here.
"""

from __future__ import annotations

from typing import Any, TypeVar, overload

from containers._serialize._common import (
    _check_expect,
    _gc_paused,
)
from containers._serialize._decode import (
    build,
    check_root,
)
from containers._serialize._format import (
    layout_of_bytes,
    view_arrays,
)
from containers._serialize._inspect import FileInfo, inspect
from containers._serialize._like import fit, template_paths
from containers._serialize._limits import DEFAULT_LIMITS, Limits
from containers._serialize._load import (
    _convert,
    _leaves,
    _tree_records,
    load,
    read_leaves,  # noqa: F401 - re-exported
)
from containers._serialize._positional import NO_FIT, positional
from containers._serialize._recparse import _records, _wants
from containers._serialize._save import save, serialize
from containers._serialize._target import check_to

__all__ = ["FileInfo", "deserialize", "inspect", "load", "save", "serialize"]

T = TypeVar("T")


@overload
def deserialize(
    data: bytes | bytearray | memoryview,
    /,
    *,
    expect: type[T],
    verify: bool = True,
    limits: Limits | None = None,
    to: str | None = None,
    device: Any = None,
    dtype: Any = None,
    like: None = None,
) -> T: ...
@overload
def deserialize(
    data: bytes | bytearray | memoryview,
    /,
    *,
    expect: None = None,
    verify: bool = True,
    limits: Limits | None = None,
    to: str | None = None,
    device: Any = None,
    dtype: Any = None,
    like: None = None,
) -> Any: ...
@overload
def deserialize(
    data: bytes | bytearray | memoryview,
    /,
    *,
    like: T,
    verify: bool = True,
    limits: Limits | None = None,
) -> T: ...
def deserialize(
    data: bytes | bytearray | memoryview,
    /,
    *,
    expect: type[Any] | None = None,
    verify: bool = True,
    limits: Limits | None = None,
    to: str | None = None,
    device: Any = None,
    dtype: Any = None,
    like: Any = None,
) -> Any:
    """Rebuild a tree from bytes made by ``serialize`` (or read from a file).

    The bytes are validated before anything is allocated for them, types are found
    in the registry by name, and the arrays are fresh, writeable copies.

    Examples:
        >>> import containers as ct
        >>> @ct.container
        ... class Point:
        ...     x: float
        ...     y: float
        >>> ct.deserialize(ct.serialize(Point(1.0, 2.0)), expect=Point)
        Point(x=1.0, y=2.0)
        >>> ct.deserialize(b"junk")
        Traceback (most recent call last):
        ...
        containers.FormatError: file too small: 4 bytes (a safetensors file starts with an 8-byte header length).

    Args:
        data: The bytes.
        expect: The class the root must be (``SchemaError`` otherwise).
        verify: Check every tensor's CRC32 (``IntegrityError`` on a mismatch).
        limits: Bounds on the header (``Limits()`` by default).
        to: ``"numpy"``, ``"torch"`` or ``"jax"``, as for ``load``.
        device: Where the arrays go, as for ``load``.
        dtype: Cast floating-point arrays to it, as for ``load``.
        like: A template tree, as for ``load``.

    Raises:
        FormatError: the bytes are not a valid file, or the tree does not match them.
        LimitError, IntegrityError, UnknownTypeError, VersionError, SchemaError: see
            ``load``.
    """
    limits = DEFAULT_LIMITS if limits is None else limits
    _check_expect(expect, "deserialize")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"deserialize: data must be bytes, got {type(data).__qualname__}.")
    check_to("deserialize", to, device, dtype, like)
    view = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
    if like is not None:
        with _gc_paused():
            layout = layout_of_bytes(view, limits)
            records, wants = _tree_records(layout, limits, verify, columns=True)
            arrays = view_arrays(view, layout, wants, copy=True)
            if records is not None:
                tree = positional(like, records, arrays, limits)
                if tree is not NO_FIT:
                    return tree
            pairs, max_path = template_paths(like)
            return fit(like, _leaves(records, layout, arrays, limits, max_path), "", pairs=pairs)
    with _gc_paused():
        layout = layout_of_bytes(view, limits)
        records = _records(layout, limits, columns=True)
        check_root(records.recs, expect)
        arrays = view_arrays(view, layout, _wants(records, layout) if verify else None, copy=True)
        if to is not None:
            arrays = _convert(arrays, to, device, dtype)
        return build(records, arrays, limits, expect)
