"""The public functions of the load side: load, inspect (and ``FileInfo``).

This stage only wires the others together: ``_format`` (bytes and files), ``_decode``
(records -> tree), ``_shards`` and ``_lazy`` (checkpoints past one file and past
memory), ``_target`` (``to=``, ``like=``). It adds no parsing of its own. Split from
``_api``, which keeps the save side and re-exports these.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar, overload

from containers._errors import SerializationError
from containers._serialize._common import PathLike, _check_expect, _gc_paused, _in_file
from containers._serialize._decode import (
    build,
    check_root,
)
from containers._serialize._format import (
    FORMAT_KEY,
    TREE_KEY,
    Layout,
    map_file,
    open_for_reading,
    read_arrays,
    read_layout,
    view_arrays,
)
from containers._serialize._lazy import (
    LazyArray,
    Progress,
    check_io,
    is_lazy,
    materialize_converted,
    read_many,
)
from containers._serialize._like import (
    FileLeaf,
    file_leaves,
    fit,
    foreign_leaves,
    template_paths,
)
from containers._serialize._limits import DEFAULT_LIMITS, Limits
from containers._serialize._pario import read_parallel
from containers._serialize._positional import NO_FIT, positional
from containers._serialize._recparse import _records, _records_of, _wants
from containers._serialize._shards import (
    Opened,
    is_sharded,
    not_a_checkpoint,
    open_sharded,
    open_single,
)
from containers._serialize._target import check_to, converter

__all__ = ["load", "read_leaves"]

T = TypeVar("T")


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
    sharded = is_sharded(path)
    if like is not None and not (lazy or where is not ... or sharded):
        return _load_like(path, like, mmap, verify, limits, workers, progress)
    if not sharded and os.path.isdir(path):
        raise not_a_checkpoint(path)
    if lazy or where is not ... or sharded:
        if mmap:
            raise TypeError(
                "load: mmap=True reads one file whole through a memory map; it does not "
                "combine with lazy=, where= or a sharded checkpoint. Drop mmap=True (lazy "
                "arrays read only what is asked for)."
            )
        if to is not None and lazy and where is ...:
            raise TypeError(
                "load: to= converts the arrays a load reads; lazy=True reads none. Drop "
                "to= and convert what you materialize, or pass where= to read (and "
                "convert) the arrays it selects."
            )
        with _gc_paused():
            opened = (
                open_sharded(path, limits, follow_links=follow_links)
                if sharded
                else _open_one(path, limits)
            )
            if like is not None:
                return _like_opened(opened, like, lazy, where, limits, verify, workers, progress)
            if not lazy and where is ...:  # a sharded checkpoint, whole
                return _load_whole(
                    opened, limits, expect, verify, workers, progress, (to, device, dtype)
                )
            tree = _lazy_tree(opened, limits, expect, verify, flat=sharded)
        if lazy and where is ...:
            return tree
        # a tensor's errors name its own file (a shard's, for a sharded checkpoint)
        convert = None if to is None else converter(to, device, dtype)
        return materialize_converted(
            tree, where, workers=workers, progress=progress, convert=convert
        )
    with _in_file(path), open_for_reading(path) as f, _gc_paused():
        layout = read_layout(f, limits)
        records = _records(layout, limits, columns=True)
        check_root(records.recs, expect)
        wants = _wants(records, layout) if verify else None
        arrays, total = _read_file(f, layout, wants, mmap, to == "torch", workers, progress)
        if to is not None:
            arrays = _convert(arrays, to, device, dtype)
        tree = build(records, arrays, limits, expect)
    if mmap and progress is not None:
        progress(total, total)
    return tree


def _read_file(
    f: Any,
    layout: Layout,
    wants: Any,
    mmap: bool,
    private: bool,
    workers: int | None,
    progress: Progress | None,
) -> tuple[dict[str, Any], int]:
    """The arrays of one open file and the bytes they hold. With ``mmap``, views of a
    map of it (``private``: copy-on-write, for arrays torch wraps), ``progress`` told
    that none is done yet (the caller says all are once the tree is built); else big
    tensors are read (and checked) a piece per task, small neighbours together,
    ``workers`` tasks at a time, progress as each completes."""
    total = layout.file_size - layout.data_start
    if not mmap:
        tasks = [(None, f.fileno(), layout, wants)]
        return read_parallel(tasks, workers=workers, progress=progress), total
    if progress is not None:
        progress(0, total)
    buffer = _private_map(f) if private else map_file(f)
    return view_arrays(buffer, layout, wants, copy=False), total


def _open_one(path: str, limits: Limits) -> Opened:
    with _in_file(path):
        return open_single(path, limits)


#: ``_load_whole``'s ``like=`` when there is no template (None is a template: a leaf).
_NO_TEMPLATE: Any = object()


def _load_whole(
    opened: Opened,
    limits: Limits,
    expect: Any,
    verify: bool,
    workers: int | None,
    progress: Progress | None,
    target: tuple[str | None, Any, Any],
    *,
    like: Any = _NO_TEMPLATE,
) -> Any:
    """Read every shard of an opened checkpoint with ``read_parallel`` (grouped reads,
    CRC32s checked as read), ``workers`` pieces at a time, convert them as ``to=``,
    ``device=`` and ``dtype=`` (``target``) ask, and build the tree."""
    meta = opened.metadata
    records = None
    if TREE_KEY in meta or FORMAT_KEY in meta:
        with _in_file(opened.path):
            records = _records_of(meta, limits, columns=True)
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
    if like is not _NO_TEMPLATE:  # load(like=) of a sharded checkpoint, whole
        with _in_file(opened.path):
            if records is not None:
                tree = positional(like, records, arrays, limits)
                if tree is not NO_FIT:
                    return tree
            pairs, max_path = template_paths(like)
            if records is None:
                leaves = foreign_leaves({name: arrays[name] for name in opened.tensors})
            else:
                leaves = file_leaves(records.recs, arrays, arrays, limits, max_path)
        return fit(like, leaves, f"{opened.path}: ", pairs=pairs)
    if records is None:
        return {name: arrays[name] for name in opened.tensors}
    with _in_file(opened.path):
        return build(records, arrays, limits, expect)


def _like_opened(
    opened: Opened,
    like: Any,
    lazy: bool,
    where: Any,
    limits: Limits,
    verify: bool,
    workers: int | None,
    progress: Progress | None,
) -> Any:
    """``load(like=)`` of an opened checkpoint (a sharded one, or any with ``lazy=`` or
    ``where=``): read whole and fitted, or fitted over lazy leaves (each checked
    against the template leaf's shape and dtype, left unread); with ``where=``, the
    leaves the filter selects in the fitted tree are read and the file's leaves fitted
    again, so that the arrays read take the template's framework, device and dtype."""
    if not lazy and where is ...:
        return _load_whole(
            opened, limits, None, verify, workers, progress, (None, None, None), like=like
        )
    meta = opened.metadata
    pairs, max_path = template_paths(like)
    with _in_file(opened.path):
        if TREE_KEY not in meta and FORMAT_KEY not in meta:
            lazies = {name: LazyArray(src, t, None) for name, (src, t) in opened.tensors.items()}
            leaves = foreign_leaves(lazies)
        else:
            records = _records_of(meta, limits)
            crcs = dict(zip(records.names, records.crcs)) if verify else {}
            lazies = {
                name: LazyArray(src, t, crcs.get(name))
                for name, (src, t) in opened.tensors.items()
            }
            leaves = file_leaves(records.recs, lazies, lazies, limits, max_path)
    where_text = f"{opened.path}: "
    tree = fit(like, leaves, where_text, pairs=pairs)
    if where is ...:
        return tree
    from containers._flatten import leaves as tree_leaves

    selected = [x for x in tree_leaves(tree, where=where) if is_lazy(x)]
    got = read_many(selected, workers=workers, progress=progress)
    leaves = [leaf._replace(value=got.get(id(leaf.value), leaf.value)) for leaf in leaves]
    return fit(like, leaves, where_text, pairs=pairs)


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
        records = _records_of(meta, limits, columns=True)
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


def _tree_records(
    layout: Layout, limits: Limits, verify: bool, *, columns: bool = False
) -> tuple[Any, Any]:
    """A containers file's records (with ``columns``, a tree of builtins' ``Structure``
    records too, for ``positional``) and the CRC32s to check; ``(None, None)`` for a
    plain safetensors file (which has no CRC32s)."""
    meta = layout.metadata
    if TREE_KEY not in meta and FORMAT_KEY not in meta:
        return None, None
    records = _records(layout, limits, columns=columns)
    return records, (_wants(records, layout) if verify else None)


def _leaves(
    records: Any, layout: Layout, arrays: dict[str, Any], limits: Limits, max_path: int | None
) -> list[FileLeaf]:
    """The file's child leaves by path (its tensors by name for a plain file)."""
    if records is None:
        return foreign_leaves(arrays)
    return file_leaves(records.recs, layout.tensors, arrays, limits, max_path)


def _load_like(
    path: str,
    like: Any,
    mmap: bool,
    verify: bool,
    limits: Limits,
    workers: int | None,
    progress: Progress | None,
) -> Any:
    """``load(path, like=...)``: the file read as ``load`` reads it (``workers``,
    ``progress``), its leaves taken by position when its tree has the template's shape
    (``positional``: no path built), else by path and fitted to the template (``fit``,
    which says what differs). The collector is paused throughout, as for load."""
    with _in_file(path), open_for_reading(path) as f, _gc_paused():
        layout = read_layout(f, limits)
        records, wants = _tree_records(layout, limits, verify, columns=True)
        arrays, total = _read_file(f, layout, wants, mmap, True, workers, progress)
        tree = NO_FIT
        if records is not None:
            tree = positional(like, records, arrays, limits)
        if tree is NO_FIT:
            pairs, max_path = template_paths(like)
            leaves = _leaves(records, layout, arrays, limits, max_path)
    if tree is NO_FIT:
        tree = fit(like, leaves, f"{path}: ", pairs=pairs)
    if mmap and progress is not None:
        progress(total, total)
    return tree


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
        records, wants = _tree_records(layout, limits, verify, columns=True)
        if mmap:
            arrays = view_arrays(_private_map(f), layout, wants, copy=False)
        else:
            arrays = read_arrays(f, layout, wants)
        return _leaves(records, layout, arrays, limits, max_path)
