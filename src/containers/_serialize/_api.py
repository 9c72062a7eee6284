"""The public functions: deserialize, load, inspect; serialize and save (the writing
half, in ``_save``) re-exported.

This stage only wires the others together: ``_format`` (bytes and files), ``_decode``
(records -> tree), ``_target`` (``to=``, ``like=``). It adds no parsing of its own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from containers._errors import FormatError, SerializationError, VersionError, short_repr
from containers._serialize._decode import (
    Records,
    Row,
    build,
    check_root,
    parse_records,
    printable,
    row_path,
    rows,
)
from containers._serialize._format import (
    FORMAT_KEY,
    FORMAT_VERSION,
    TREE_KEY,
    Layout,
    Wants,
    layout_of_bytes,
    map_file,
    open_for_reading,
    read_arrays,
    read_layout,
    view_arrays,
)
from containers._serialize._gc import gc_paused as _gc_paused
from containers._serialize._lazy import LazyArray, Progress, check_io, materialize
from containers._serialize._limits import DEFAULT_LIMITS, Limits
from containers._serialize._pario import read_parallel
from containers._serialize._save import save, serialize  # the writing half, re-exported
from containers._serialize._shards import (
    Opened,
    is_sharded,
    not_a_checkpoint,
    open_sharded,
    open_single,
)
from containers._serialize._target import (
    FileLeaf,
    check_to,
    converter,
    file_leaves,
    fit,
    foreign_leaves,
    template_paths,
)

__all__ = ["FileInfo", "deserialize", "inspect", "load", "save", "serialize"]

T = TypeVar("T")
PathLike = str | os.PathLike[str]


@contextlib.contextmanager
def _in_file(path: str) -> Iterator[None]:
    """Start the message of a ``SerializationError`` raised inside with ``path``, so that
    an error met while loading many files (or in ``containers diff A B``) says which."""
    try:
        yield
    except SerializationError as err:
        if err.args and type(err.args[0]) is str:
            err.args = (f"{path}: {err.args[0]}", *err.args[1:])
        raise


def _records(layout: Layout, limits: Limits) -> Records:
    return _records_of(layout.metadata, limits)


def _records_of(meta: dict[str, str], limits: Limits) -> Records:
    """The validated records of a file's (or a sharded checkpoint's index's) metadata."""
    fmt = meta.get(FORMAT_KEY)
    if TREE_KEY not in meta or fmt is None:
        raise FormatError(
            "this safetensors file was not written by containers (its __metadata__ has no "
            f"{TREE_KEY!r}): load it with safetensors, or look at it with ct.inspect."
        )
    if fmt != FORMAT_VERSION:
        # isascii: "²" and other Unicode digits are isdigit() but not int()'s.
        if fmt.isascii() and fmt.isdigit() and len(fmt) < 10 and int(fmt) > int(FORMAT_VERSION):
            raise VersionError(
                f"the file is in containers format {fmt}, newer than this version reads "
                f"(format {FORMAT_VERSION}). Upgrade containers to load it."
            )
        raise FormatError(f"unknown containers format {fmt[:20]!r}. The file is corrupt.")
    return parse_records(meta[TREE_KEY], limits)


def _wants(records: Records, layout: Layout) -> Wants:
    """Each tensor's CRC32 from the tree, in file order (None where the tree has none).

    When the tree lists the tensors in file order (it does when the file's order, by
    item size then name, is the tree's), the tree's list is that list
    (benchmarks/serialization.py, "many": 100,000 tensors)."""
    in_file = list(layout.tensors)
    if records.names == in_file:
        return list(records.crcs)
    return list(map(dict(zip(records.names, records.crcs)).get, in_file))


def _check_expect(expect: Any, op: str) -> None:
    if expect is not None and not isinstance(expect, type):
        raise TypeError(
            f"{op}: expect must be a class or None, got {type(expect).__qualname__} "
            f"{short_repr(expect)}. Pass the class itself, e.g. expect=list or expect=MyModel."
        )


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
            records, wants = _tree_records(layout, limits, verify)
            arrays = view_arrays(view, layout, wants, copy=True)
            pairs, max_path = template_paths(like)
            return fit(like, _leaves(records, layout, arrays, limits, max_path), "", pairs=pairs)
    with _gc_paused():
        layout = layout_of_bytes(view, limits)
        records = _records(layout, limits)
        check_root(records.recs, expect)
        arrays = view_arrays(view, layout, _wants(records, layout) if verify else None, copy=True)
        if to is not None:
            arrays = _convert(arrays, to, device, dtype)
        return build(records, arrays, limits, expect)


@overload
def load(
    path: PathLike,
    /,
    *,
    expect: type[T],
    mmap: bool = False,
    verify: bool = True,
    limits: Limits | None = None,
    lazy: bool = False,
    where: Any = ...,
    workers: int | None = None,
    progress: Progress | None = None,
    to: str | None = None,
    device: Any = None,
    dtype: Any = None,
    like: None = None,
    follow_links: bool = False,
) -> T: ...
@overload
def load(
    path: PathLike,
    /,
    *,
    expect: None = None,
    mmap: bool = False,
    verify: bool = True,
    limits: Limits | None = None,
    lazy: bool = False,
    where: Any = ...,
    workers: int | None = None,
    progress: Progress | None = None,
    to: str | None = None,
    device: Any = None,
    dtype: Any = None,
    like: None = None,
    follow_links: bool = False,
) -> Any: ...
@overload
def load(
    path: PathLike,
    /,
    *,
    like: T,
    mmap: bool = False,
    verify: bool = True,
    limits: Limits | None = None,
) -> T: ...
def load(
    path: PathLike,
    /,
    *,
    expect: type[Any] | None = None,
    mmap: bool = False,
    verify: bool = True,
    limits: Limits | None = None,
    lazy: bool = False,
    where: Any = ...,
    workers: int | None = None,
    progress: Progress | None = None,
    to: str | None = None,
    device: Any = None,
    dtype: Any = None,
    like: Any = None,
    follow_links: bool = False,
) -> Any:
    """Load a tree saved by ``save``.

    The header is validated against the file size before anything is allocated;
    types are rebuilt only from the registry, by name; old files are upgraded by the
    classes' ``migrations=``, ``renamed=``, ``removed=`` and field defaults. By default
    each tensor is read into its own writeable array; ``mmap=True`` returns read-only
    views of a memory map instead (cheap: only the header is read, unless ``verify``).

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> import containers as ct
        >>> @ct.container(children=["w"], keep=["name"])
        ... class Cell:
        ...     w: np.ndarray
        ...     name: str = "cell"
        >>> path = os.path.join(tempfile.mkdtemp(), "cell.safetensors")
        >>> ct.save(path, Cell(np.zeros(2), "c1"))
        >>> ct.load(path, expect=Cell)
        Cell(w=array([0., 0.]), name='c1')
        >>> ct.load(path, mmap=True, verify=False).w.flags.writeable
        False
        >>> ct.load(path, like=Cell(np.ones(2), "template"))  # the template's classes, kept values
        Cell(w=array([0., 0.]), name='template')
        >>> ct.load(path, to="numpy", dtype=np.float32).w
        array([0., 0.], dtype=float32)

    ``path`` may also be a sharded checkpoint (its directory or its
    ``model.safetensors.index.json``). ``lazy=True`` reads the header only and puts a
    ``LazyArray`` wherever an array is; ``where=filter`` reads only the arrays the
    filter selects, leaving the others lazy (docs/checkpoints.md).

    Args:
        path: The file (``str`` or ``os.PathLike``), or a sharded checkpoint.
        expect: The class the root must be (``SchemaError`` otherwise).
        mmap: Return read-only views of a memory map of the file (one file only).
        verify: Check every tensor's CRC32 (a lazy array's when it is read).
        limits: Bounds on the header (``Limits()`` by default).
        lazy: Read no array: lazy leaves instead.
        where: Read only the arrays this filter selects (called with each array's
            path and its ``LazyArray``); the others stay lazy.
        workers: Threads reading at once (default ``min(2, cpu_count)``; 1: the
            calling thread only).
        progress: ``progress(bytes_done, bytes_total)``, called from the calling
            thread as data is read.
        follow_links: Let a sharded checkpoint's shards be symbolic links to regular
            files outside its directory (a Hugging Face hub cache snapshot); by default
            nothing outside the directory is read.
        to: ``"numpy"``, ``"torch"`` or ``"jax"``: the arrays come back as that
            framework's arrays, every dtype exactly (bfloat16 and float8 too), over the
            memory read from the file where the framework can wrap it (torch does; with
            ``mmap=True``, a private copy-on-write map: writes never reach the file).
            Registered classes' migrations then see these arrays.
        device: Where the arrays go (``"cuda:0"``, a ``jax.Device``); with ``to=``.
        dtype: Cast floating-point arrays to it (integers and bools stay); with ``to=``.
        like: A template tree: the file's leaves are matched to its leaves by path
            (keystr, else dotted name), and it decides the classes, kept values,
            framework, device and dtype of the result. The file's type names are not
            resolved, so files of unregistered classes and plain safetensors files
            load. ``StructureError`` lists every mismatch (missing, extra, shape or
            dtype changed).

    Raises:
        FormatError: the file is not a valid safetensors file written by containers, or
            its tree does not match its tensors.
        LimitError: the header exceeds ``limits``.
        IntegrityError: a tensor's CRC32 does not match (with ``verify=True``).
        UnknownTypeError: the file names a type that is not registered.
        VersionError: a class in the file is newer than the code, or its migrations
            have a gap; or the file's format is newer.
        SchemaError: fields do not fit the classes (every problem listed), or the root
            is not ``expect``.
    """
    limits = DEFAULT_LIMITS if limits is None else limits
    _check_expect(expect, "load")
    check_to("load", to, device, dtype, like)
    check_io(workers, progress, "load")
    path = os.fspath(path)
    if like is not None:
        if lazy or where is not ... or is_sharded(path):
            raise TypeError(
                "load: like= fits one file read whole to a template; it does not combine "
                "with lazy=, where= or a sharded checkpoint yet. Load the file whole with "
                "like=, or load lazily without a template."
            )
        return _load_like(path, like, mmap, verify, limits)
    sharded = is_sharded(path)
    if not sharded and os.path.isdir(path):
        raise not_a_checkpoint(path)
    if lazy or where is not ... or sharded:
        if mmap:
            raise TypeError(
                "load: mmap=True reads one file whole through a memory map; it does not "
                "combine with lazy=, where= or a sharded checkpoint. Drop mmap=True (lazy "
                "arrays read only what is asked for)."
            )
        if to is not None and (lazy or where is not ...):
            raise TypeError(
                "load: to= converts the arrays a load reads; lazy= and where= leave arrays "
                "unread. Drop to= and convert what you materialize, or load whole."
            )
        with _gc_paused():
            opened = (
                open_sharded(path, limits, follow_links=follow_links)
                if sharded
                else _open_one(path, limits)
            )
            if not lazy and where is ...:  # a sharded checkpoint, whole
                return _load_whole(
                    opened, limits, expect, verify, workers, progress, (to, device, dtype)
                )
            tree = _lazy_tree(opened, limits, expect, verify, flat=sharded)
        if lazy and where is ...:
            return tree
        # a tensor's errors name its own file (a shard's, for a sharded checkpoint)
        return materialize(tree, where, workers=workers, progress=progress)
    total = 0
    with _in_file(path), open_for_reading(path) as f, _gc_paused():
        layout = read_layout(f, limits)
        records = _records(layout, limits)
        check_root(records.recs, expect)
        wants = _wants(records, layout) if verify else None
        if mmap:
            if progress is not None:
                total = layout.file_size - layout.data_start
                progress(0, total)
            buffer = map_file(f) if to != "torch" else _private_map(f)
            arrays = view_arrays(buffer, layout, wants, copy=False)
        else:
            # big tensors are read (and checked) a piece per task, small neighbours
            # together, ``workers`` tasks at a time, progress as each completes
            arrays = read_parallel(
                [(None, f.fileno(), layout, wants)], workers=workers, progress=progress
            )
        if to is not None:
            arrays = _convert(arrays, to, device, dtype)
        tree = build(records, arrays, limits, expect)
    if mmap and progress is not None:
        progress(total, total)
    return tree


def _open_one(path: str, limits: Limits) -> Opened:
    with _in_file(path):
        return open_single(path, limits)


def _load_whole(
    opened: Opened,
    limits: Limits,
    expect: Any,
    verify: bool,
    workers: int | None,
    progress: Progress | None,
    target: tuple[str | None, Any, Any],
) -> Any:
    """Read every shard of an opened checkpoint with ``read_parallel`` (grouped reads,
    CRC32s checked as read), ``workers`` pieces at a time, convert them as ``to=``,
    ``device=`` and ``dtype=`` (``target``) ask, and build the tree."""
    meta = opened.metadata
    records = None
    if TREE_KEY in meta or FORMAT_KEY in meta:
        with _in_file(opened.path):
            records = _records_of(meta, limits)
            check_root(records.recs, expect)
    elif expect is not None and expect is not dict:
        raise SerializationError(
            f"{opened.path}: expected a {expect.__qualname__!r} at the root, but this "
            f"checkpoint has no containers tree: it loads as a flat dict of its tensors."
        )
    crcs = dict(zip(records.names, records.crcs)) if records is not None and verify else None
    sources = list({id(src): src for src, _ in opened.tensors.values()}.values())
    try:
        # every shard's pieces on one pool: progress moves within a shard too
        arrays = read_parallel(
            [
                (
                    src.path,
                    src.fd,
                    src.layout,
                    None if crcs is None else [crcs.get(n) for n in src.layout.tensors],
                )
                for src in sources
            ],
            workers=workers,
            progress=progress,
        )
    finally:
        for src in sources:
            src.close()
    to, device, dtype = target
    if to is not None:
        arrays = _convert(arrays, to, device, dtype)
    if records is None:
        return {name: arrays[name] for name in opened.tensors}
    with _in_file(opened.path):
        return build(records, arrays, limits, expect)


def _lazy_tree(opened: Opened, limits: Limits, expect: Any, verify: bool, *, flat: bool) -> Any:
    """The tree of an opened checkpoint with a ``LazyArray`` for each tensor: the
    decoder's own ``build`` over lazy leaves (with ``flat``, a sharded checkpoint
    without a tree: a flat dict of them, by tensor name; a single file without one is
    refused, as ``load`` refuses it)."""
    meta = opened.metadata
    with _in_file(opened.path):
        if flat and TREE_KEY not in meta and FORMAT_KEY not in meta:
            if expect is not None and expect is not dict:
                raise SerializationError(
                    f"expected a {expect.__qualname__!r} at the root, but this checkpoint "
                    f"has no containers tree: it loads as a flat dict of its tensors."
                )
            return {name: LazyArray(src, t, None) for name, (src, t) in opened.tensors.items()}
        records = _records_of(meta, limits)
        check_root(records.recs, expect)
        crcs = dict(zip(records.names, records.crcs)) if verify else {}
        arrays: dict[str, Any] = {
            name: LazyArray(src, t, crcs.get(name)) for name, (src, t) in opened.tensors.items()
        }
        return build(records, arrays, limits, expect)


def _convert(arrays: dict[str, Any], to: str, device: Any, dtype: Any) -> dict[str, Any]:
    """The loaded arrays, each converted for ``to=`` (before the tree is built, so
    shared arrays stay shared and no tree is walked again)."""
    convert = converter(to, device, dtype)
    return {name: convert(a) for name, a in arrays.items()}


def _private_map(f: Any) -> Any:
    """A copy-on-write map of the file: torch tensors have no read-only flag, so the
    arrays it wraps must be writeable; writes go to private pages, never the file."""
    import mmap as _mmap

    return _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_COPY)


def _tree_records(layout: Layout, limits: Limits, verify: bool) -> tuple[Any, Any]:
    """A containers file's records and the CRC32s to check; ``(None, None)`` for a
    plain safetensors file (which has no CRC32s)."""
    meta = layout.metadata
    if TREE_KEY not in meta and FORMAT_KEY not in meta:
        return None, None
    records = _records(layout, limits)
    return records, (_wants(records, layout) if verify else None)


def _leaves(
    records: Any, layout: Layout, arrays: dict[str, Any], limits: Limits, max_path: int | None
) -> list[FileLeaf]:
    """The file's child leaves by path (its tensors by name for a plain file)."""
    if records is None:
        return foreign_leaves(arrays)
    return file_leaves(records.recs, layout.tensors, arrays, limits, max_path)


def _load_like(path: str, like: Any, mmap: bool, verify: bool, limits: Limits) -> Any:
    """``load(path, like=...)``: the file's leaves by path, fitted to the template (the
    collector paused throughout, as for load: the paths are many small tuples)."""
    with _gc_paused():
        pairs, max_path = template_paths(like)
        leaves = read_leaves(path, mmap=mmap, verify=verify, limits=limits, max_path=max_path)
        return fit(like, leaves, f"{path}: ", pairs=pairs)


def read_leaves(
    path: PathLike,
    *,
    mmap: bool = False,
    verify: bool = True,
    limits: Limits | None = None,
    max_path: int | None = None,
) -> list[FileLeaf]:
    """The child leaves of a file by path (a plain safetensors file: its tensors by
    name), validated as ``load`` validates the file; no type name is resolved. Paths
    longer than ``max_path`` are cut (``FileLeaf.deep``: they can match nothing)."""
    limits = DEFAULT_LIMITS if limits is None else limits
    path = os.fspath(path)
    with _in_file(path), open_for_reading(path) as f, _gc_paused():
        layout = read_layout(f, limits)
        records, wants = _tree_records(layout, limits, verify)
        if mmap:
            arrays = view_arrays(_private_map(f), layout, wants, copy=False)
        else:
            arrays = read_arrays(f, layout, wants)
        return _leaves(records, layout, arrays, limits, max_path)


@dataclass(frozen=True)
class FileInfo:
    """What ``inspect`` reads from a file's header; ``str()`` gives the tree view.

    ``tensors`` maps each tensor name to ``(dtype, shape, nbytes)``; ``rows`` is the
    tree, one row per value in pre-order (a flat list of tensors for a safetensors file
    not written by containers); ``format`` is ``"containers 1"`` or ``"safetensors"``;
    ``metadata`` is the whole ``__metadata__``, ``user_metadata`` its entries but the
    library's own (what ``save(metadata=...)`` stored, or a foreign file's).
    """

    path: str
    format: str
    tensors: dict[str, tuple[str, tuple[int, ...], int]]
    metadata: dict[str, str]
    rows: list[Row]
    data_bytes: int

    def path_of(self, i: int) -> str:
        """The keystr path of row ``i``."""
        return row_path(self.rows, i)

    @property
    def user_metadata(self) -> dict[str, str]:
        """The header's metadata but the library's own ``containers.*`` entries: what
        ``save(metadata=...)`` stored, or a foreign file's own metadata."""
        return {k: v for k, v in self.metadata.items() if not k.startswith("containers.")}

    def __str__(self) -> str:
        lines = [
            f"{self.path}: {self.format}, {len(self.tensors)} tensor"
            f"{'' if len(self.tensors) == 1 else 's'}, {self.data_bytes:,} bytes of data"
        ]
        user = self.user_metadata
        if user:
            lines.append("metadata:")
            for k, v in user.items():
                shown = v if len(v) <= _META_CHARS else v[:_META_CHARS] + f"... ({len(v):,} chars)"
                lines.append(f"  {printable(k)} = {printable(shown)}")
        for r in self.rows:
            indent = "  " * min(r.depth, 40)
            key = r.key if r.depth else "(root)"
            lines.append(f"{indent}{key}: {r.text}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The tree view as collapsible HTML (notebooks show it)."""
        from containers._html import rows_html

        title = str(self).split("\n", 1)[0]
        return rows_html(title, self.rows, self.path_of)


#: Characters of a metadata value that ``str(FileInfo)`` shows.
_META_CHARS = 200


def inspect(
    path: PathLike, /, *, limits: Limits | None = None, follow_links: bool = False
) -> FileInfo:
    """Read a file's header only and describe its tree, validated as ``load`` does.

    Works on any safetensors file of the dtypes containers reads: one not written by
    containers shows its tensors as a flat list. Types need not be importable: names are
    shown, not resolved.

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> import containers as ct
        >>> path = os.path.join(tempfile.mkdtemp(), "t.safetensors")
        >>> ct.save(path, {"w": np.zeros((2, 3), np.float32), "lr": 0.1})
        >>> info = ct.inspect(path)
        >>> info.tensors
        {"['w']": ('float32', (2, 3), 24)}
        >>> print(str(info).split("\\n", 1)[1])
        (root): dict (2)
          ['lr']: 0.1
          ['w']: float32[2,3]  24 B  crc32 a3c1ca20
        >>> ct.save(path, {"w": np.zeros(2)}, metadata={"run": "r1", "step": "1000"})
        >>> ct.inspect(path).user_metadata
        {'run': 'r1', 'step': '1000'}

    ``follow_links=True`` lets a sharded checkpoint's shards be symbolic links to
    files outside its directory, as ``load``'s.

    Raises:
        FormatError, LimitError, VersionError: as ``load`` would for the header.
    """
    limits = DEFAULT_LIMITS if limits is None else limits
    path = os.fspath(path)
    if is_sharded(path):
        return _inspect_sharded(path, limits, follow_links)
    if os.path.isdir(path):
        raise not_a_checkpoint(path)
    with _in_file(path):
        return _inspect(path, limits)


def _inspect_sharded(path: str, limits: Limits, follow_links: bool) -> FileInfo:
    """``inspect`` of a sharded checkpoint: its index and its shards' headers."""
    from containers._serialize._decode import _dtype_name

    opened = open_sharded(path, limits, follow_links=follow_links)
    try:
        layout = {name: t for name, (_, t) in opened.tensors.items()}
        tensors = {
            name: (_dtype_name(t.code), t.shape, t.end - t.begin) for name, t in layout.items()
        }
        data = sum(t.end - t.begin for t in layout.values())
        n = len(opened.shards)
        shards = f"{n} shard{'' if n == 1 else 's'}"
        meta = opened.metadata
        if TREE_KEY in meta or FORMAT_KEY in meta:
            with _in_file(opened.path):
                records = _records_of(meta, limits)
                view = rows(records, layout, limits)
            return FileInfo(
                opened.path, f"containers {FORMAT_VERSION}, {shards}", tensors, meta, view, data
            )
        count = len(tensors)
        flat = [
            Row(
                0, -1, "", f"sharded safetensors ({count} tensor{'' if count == 1 else 's'})", None
            )
        ]
        for name, (dt, shape, nbytes) in tensors.items():
            text = f"{dt}[{','.join(map(str, shape))}]  {nbytes:,} B"
            flat.append(Row(1, 0, printable(name), text, name))
        return FileInfo(opened.path, f"safetensors, {shards}", tensors, meta, flat, data)
    finally:
        for source in {id(s): s for s, _ in opened.tensors.values()}.values():
            source.close()


def _inspect(path: str, limits: Limits) -> FileInfo:
    from containers._serialize._decode import _dtype_name

    with open_for_reading(path) as f:
        layout = read_layout(f, limits)
    tensors = {
        name: (_dtype_name(t.code), t.shape, t.end - t.begin) for name, t in layout.tensors.items()
    }
    data = layout.file_size - layout.data_start
    if TREE_KEY in layout.metadata or FORMAT_KEY in layout.metadata:
        records = _records(layout, limits)
        return FileInfo(
            path,
            f"containers {FORMAT_VERSION}",
            tensors,
            layout.metadata,
            rows(records, layout.tensors, limits),
            data,
        )
    n = len(tensors)
    flat = [Row(0, -1, "", f"safetensors file ({n} tensor{'' if n == 1 else 's'})", None)]
    for name, (dt, shape, nbytes) in tensors.items():
        text = f"{dt}[{','.join(map(str, shape))}]  {nbytes:,} B"
        flat.append(Row(1, 0, printable(name), text, name))
    return FileInfo(path, "safetensors", tensors, layout.metadata, flat, data)
