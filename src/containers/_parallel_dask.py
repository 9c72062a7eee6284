"""``compute`` and ``persist``: every dask collection among a tree's leaves computed
(or persisted) in one dask call, the tree rebuilt around the results.

A stage above ``_parallel``, whose recording map and fill it uses: the engine's walk
decides what is a leaf and keeps sharing. dask is imported only when these run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from containers._parallel import ONE, cached_map, fill, record

__all__ = ["compute", "persist"]


def _dask(op: str) -> Any:
    try:
        import dask
    except ImportError:
        raise ImportError(
            f"{op} needs dask, which is not installed: pip install dask (or "
            f"'dask[distributed]' for a cluster)."
        ) from None
    return dask


def _over_dask_leaves(op: str, tree: Any, run: Callable[..., tuple[Any, ...]]) -> Any:
    """``tree`` with its dask collections replaced by ``run(*collections)``'s results:
    one call for them all, each shared collection passed once."""

    is_collection = _dask(op).is_dask_collection
    calls, recorder = record(ONE, True)
    recorded = cached_map(lambda v: recorder(v) if is_collection(v) else v, tree)
    return fill(recorded, list(run(*calls)) if calls else [])


def compute(tree: Any, /, **kwargs: Any) -> Any:
    """Compute every dask collection in ``tree`` in one ``dask.compute`` call.

    Dask arrays, delayed objects and other dask collections among the leaves are
    computed together, so graph parts they share run once; the same tree comes back
    with concrete leaves (a shared collection gives one shared result). Other leaves
    are kept. dask is imported only when this runs.

    Examples:
        >>> import containers as ct
        >>> import dask
        >>> x = dask.delayed(sum)([1, 2, 3])
        >>> ct.compute({"a": x, "b": (x, 10)}, scheduler="sync")
        {'a': 6, 'b': (6, 10)}

    Args:
        tree: A tree whose leaves may be dask collections.
        **kwargs: Passed to ``dask.compute`` (``scheduler=``, ...).

    Returns:
        The tree with every dask collection replaced by its value.

    Raises:
        ImportError: dask is not installed.
    """
    dask = _dask("compute")
    return _over_dask_leaves("compute", tree, lambda *c: dask.compute(*c, **kwargs))


def persist(tree: Any, /, **kwargs: Any) -> Any:
    """Persist every dask collection in ``tree`` in one ``dask.persist`` call.

    As ``compute``, but each collection is replaced by a persisted one (computed in
    memory, or on a cluster with a distributed client, and still a dask collection),
    so that later computations start from its results.

    Examples:
        >>> import containers as ct
        >>> import dask
        >>> x = dask.delayed(sum)([1, 2, 3])
        >>> out = ct.persist({"a": x, "b": 10}, scheduler="sync")
        >>> out["a"].compute(), out["b"]
        (6, 10)

    Args:
        tree: A tree whose leaves may be dask collections.
        **kwargs: Passed to ``dask.persist`` (``scheduler=``, ...).

    Returns:
        The tree with every dask collection replaced by its persisted twin.

    Raises:
        ImportError: dask is not installed.
    """
    dask = _dask("persist")
    return _over_dask_leaves("persist", tree, lambda *c: dask.persist(*c, **kwargs))
