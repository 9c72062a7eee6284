"""Library adapters: each tree library's functions behind one `Lib` record.

Adapters only look the functions up and declare the W3 model classes (Linear, MLP) the
way each library wants them; they never time or compare anything.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
from collections.abc import Callable, Iterable
from functools import cache, partial
from typing import Any, NamedTuple

import numpy as np

Fn = Callable[..., Any]
PathPairs = list[tuple[tuple[Any, ...], Any]]

# optree requires a registry namespace for user classes; the benchmark passes it on
# every call, as a user of optree would.
OPTREE_NAMESPACE = "containers-benchmarks"


class Model(NamedTuple):
    """The two W3 classes as one library declares them: `Linear(w, b)`, `MLP(layers, name)`."""

    linear: type[Any]
    mlp: type[Any]


def raw_key(key: Any) -> Any:
    """The plain dict key, index or attribute name behind one library's path entry."""
    if isinstance(key, (str, int)):
        return key
    for attribute in ("key", "idx", "index", "name"):
        if hasattr(key, attribute):
            return getattr(key, attribute)
    return key


def pairs_of_first(result: Any) -> PathPairs:
    """Read `([(path, leaf), ...], structure)`, as jax, torch and containers return it."""
    return [(tuple(raw_key(k) for k in path), leaf) for path, leaf in result[0]]


def identity_wrap(f: Fn) -> Fn:
    """Leave a mapped function as it is."""
    return f


def on_arrays(f: Fn) -> Fn:
    """Apply `f` to numpy arrays only: dm-tree sees `MLP.name` as a leaf (perf.md)."""

    def g(x: Any, *ys: Any) -> Any:
        return f(x, *ys) if type(x) is np.ndarray else x

    return g


@dataclasses.dataclass(frozen=True)
class Lib:
    """One library's tree functions, or None where it has no such function."""

    name: str
    version: str = ""
    flatten: Fn | None = None  # tree -> (leaves, structure)
    unflatten: Fn | None = None  # (structure, leaves) -> tree
    tree_map: Fn | None = None  # (f, tree, *trees) -> tree
    leaves: Fn | None = None  # tree -> leaves
    flatten_with_path: Fn | None = None
    fmapstructure: Fn | None = None
    fcollect: Fn | None = None
    model: Model | None = None
    # How to read flatten_with_path's result as [(raw path, leaf)] for the equality check.
    path_pairs: Callable[[Any], PathPairs] = pairs_of_first
    # Wraps the function mapped over W3 trees (dm-tree must skip `MLP.name`).
    array_fn: Callable[[Fn], Fn] = identity_wrap
    # Workloads this entry runs; None: every workload whose functions it has.
    only: frozenset[str] | None = None
    note: str = ""


def version_of(distribution: str) -> str:
    """The installed version of a distribution, or '?' when its metadata is missing."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def frozen_dataclasses() -> Model:
    """Fresh frozen dataclasses Linear and MLP (each library registers its own pair)."""

    @dataclasses.dataclass(frozen=True)
    class Linear:
        w: Any
        b: Any

    @dataclasses.dataclass(frozen=True)
    class MLP:
        layers: tuple[Any, ...]
        name: str

    return Model(Linear, MLP)


def callbacks(model: Model) -> tuple[tuple[type[Any], Fn, Fn], ...]:
    """`(class, flatten, unflatten)` in the jax/optree convention: `MLP.name` is aux data."""
    linear, mlp = model
    return (
        (linear, lambda x: ((x.w, x.b), None), lambda _, children: linear(*children)),
        (mlp, lambda x: ((x.layers,), x.name), lambda name, children: mlp(children[0], name)),
    )


@cache
def containers_model() -> Model:
    """Linear and MLP declared with `@ct.container`; MLP keeps `name` (a kept field)."""
    import containers as ct

    @ct.container(children=["w", "b"])
    class Linear:
        w: Any
        b: Any

    @ct.container(children=["layers"])
    class MLP:
        layers: tuple[Any, ...]
        name: str

    return Model(Linear, MLP)


def load_containers() -> Lib:
    import containers as ct

    missing = [
        name
        for name in ("fmap", "flatten", "unflatten", "leaves", "container")
        if not hasattr(ct, name)
    ]
    return Lib(
        name="containers",
        version=version_of("containers"),
        flatten=getattr(ct, "flatten", None),
        unflatten=getattr(ct, "unflatten", None),
        tree_map=getattr(ct, "fmap", None),
        leaves=getattr(ct, "leaves", None),
        flatten_with_path=getattr(ct, "flatten_with_path", None),
        fmapstructure=getattr(ct, "fmapstructure", None),
        fcollect=getattr(ct, "fcollect", None),
        model=containers_model() if hasattr(ct, "container") else None,
        note=f"missing: {', '.join(missing)}" if missing else "",
    )


def load_containers_nocache() -> Lib:
    import containers as ct

    return Lib(
        name="containers-nocache",
        version=version_of("containers"),
        tree_map=partial(ct.fmap, cache=False),
        model=containers_model(),
    )


def load_optree() -> Lib:
    import optree

    model = frozen_dataclasses()
    for cls, flatten, unflatten in callbacks(model):
        optree.register_pytree_node(cls, flatten, unflatten, namespace=OPTREE_NAMESPACE)
    ns = OPTREE_NAMESPACE
    return Lib(
        name="optree",
        version=version_of("optree"),
        flatten=partial(optree.tree_flatten, namespace=ns),
        unflatten=optree.tree_unflatten,
        tree_map=partial(optree.tree_map, namespace=ns),
        leaves=partial(optree.tree_leaves, namespace=ns),
        flatten_with_path=partial(optree.tree_flatten_with_path, namespace=ns),
        model=model,
        path_pairs=lambda r: [(tuple(p), x) for p, x in zip(r[0], r[1], strict=True)],
    )


def _jax_tree_util() -> Any:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # tree_util needs no accelerator
    import jax.tree_util

    return jax.tree_util


def load_jax() -> Lib:
    jtu = _jax_tree_util()
    model = frozen_dataclasses()
    jtu.register_dataclass(model.linear, data_fields=["w", "b"], meta_fields=[])
    jtu.register_dataclass(model.mlp, data_fields=["layers"], meta_fields=["name"])
    return Lib(
        name="jax",
        version=version_of("jax"),
        flatten=jtu.tree_flatten,
        unflatten=jtu.tree_unflatten,
        tree_map=jtu.tree_map,
        leaves=jtu.tree_leaves,
        flatten_with_path=jtu.tree_flatten_with_path,
        model=model,
        note="W3 classes via register_dataclass",
    )


def load_jax_pyreg() -> Lib:
    jtu = _jax_tree_util()
    model = frozen_dataclasses()
    for cls, flatten, unflatten in callbacks(model):
        jtu.register_pytree_node(cls, flatten, unflatten)
    return Lib(
        name="jax-pyreg",
        version=version_of("jax"),
        tree_map=jtu.tree_map,
        model=model,
        only=frozenset({"W3", "W3id", "W4c"}),
        note="W3 classes via register_pytree_node (Python callbacks)",
    )


def load_torch() -> Lib:
    import torch.utils._pytree as pytree

    linear, mlp = model = frozen_dataclasses()
    pytree.register_pytree_node(
        linear,
        lambda x: ([x.w, x.b], None),
        lambda values, _: linear(*values),
        serialized_type_name="benchmarks.Linear",
    )
    pytree.register_pytree_node(
        mlp,
        lambda x: ([x.layers], x.name),
        lambda values, name: mlp(*values, name),
        serialized_type_name="benchmarks.MLP",
    )
    return Lib(
        name="torch-py",
        version=version_of("torch"),
        flatten=pytree.tree_flatten,
        unflatten=lambda spec, leaves: pytree.tree_unflatten(leaves, spec),
        tree_map=pytree.tree_map,
        leaves=pytree.tree_leaves,
        flatten_with_path=pytree.tree_flatten_with_path,
        model=model,
        note="torch.utils._pytree, pure Python",
    )


def load_dm_tree() -> Lib:
    import attrs
    import tree

    # dm-tree has no registry: attrs classes are nodes whose every field is a child.
    @attrs.frozen
    class Linear:
        w: Any
        b: Any

    @attrs.frozen
    class MLP:
        layers: tuple[Any, ...]
        name: str

    return Lib(
        name="dm-tree",
        version=version_of("dm-tree"),
        flatten=lambda t: (tree.flatten(t), t),  # unflatten_as takes the tree as structure
        unflatten=tree.unflatten_as,
        tree_map=tree.map_structure,
        leaves=tree.flatten,
        flatten_with_path=tree.flatten_with_path,
        model=Model(Linear, MLP),
        path_pairs=lambda r: [(tuple(p), x) for p, x in r],
        array_fn=on_arrays,
        note="attrs classes; MLP.name is a leaf",
    )


LOADERS: dict[str, Callable[[], Lib]] = {
    "containers": load_containers,
    "containers-nocache": load_containers_nocache,
    "optree": load_optree,
    "jax": load_jax,
    "jax-pyreg": load_jax_pyreg,
    "torch-py": load_torch,
    "dm-tree": load_dm_tree,
}


def load(names: Iterable[str]) -> tuple[list[Lib], list[str]]:
    """The libraries that import, and a note for each one that does not."""
    libs: list[Lib] = []
    notes: list[str] = []
    for name in names:
        try:
            libs.append(LOADERS[name]())
        except ImportError as exc:
            notes.append(f"{name}: not installed, skipped ({exc})")
        except Exception as exc:
            notes.append(f"{name}: failed to load, skipped ({type(exc).__name__}: {exc})")
    return libs, notes
