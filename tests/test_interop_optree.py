"""containers.interop.register_optree: declared classes are optree pytrees, globally or
in a namespace; and ``import containers`` imports none of jax, optree, torch.
"""

from __future__ import annotations

import collections
import dataclasses
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import containers as ct
from containers.interop import register_optree


def test_import_containers_imports_no_peer_library() -> None:
    """A fresh `import containers` (and of containers.interop) loads no jax/torch/optree."""
    code = (
        "import sys, containers, containers.interop\n"
        "heavy = sorted(m for m in ('jax', 'jaxlib', 'torch', 'optree', 'optax') "
        "if m in sys.modules)\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


optree = pytest.importorskip("optree")


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    """Register when this module's tests start, not at import: the registrations keep
    every class declared later alive, which other modules' tests must not see (they
    run first: tests/conftest.py)."""
    register_optree()
    register_optree(namespace="ct-tests")


@ct.container
class Linear:
    w: Any
    b: Any


@ct.container(children=["layers"])
class MLP:
    layers: tuple[Linear, ...]
    name: str = "mlp"


@ct.container(children=["x"], keep=["tag"])
class Scaled:
    x: Any
    tag: Any = "t"
    cache: Any = None


def model() -> MLP:
    """A two-layer MLP of numpy arrays."""
    return MLP(
        (Linear(np.ones((2, 3)), np.zeros(3)), Linear(np.ones((3, 1)), np.zeros(1))), name="m"
    )


@pytest.mark.parametrize("namespace", ["", "ct-tests"])
def test_tree_map_returns_the_container_type(namespace: str) -> None:
    """optree.tree_map rebuilds containers with their kept values, in either namespace."""
    out = optree.tree_map(lambda a: a + 1, model(), namespace=namespace)
    assert type(out) is MLP and out.name == "m"
    assert type(out.layers[1]) is Linear
    np.testing.assert_array_equal(out.layers[0].w, np.full((2, 3), 2.0))


@pytest.mark.parametrize("namespace", ["", "ct-tests"])
def test_flatten_with_path_gives_ct_paths(namespace: str) -> None:
    """Paths are the raw keys of ct's paths; accessors render them as ct.keystr does."""
    tree = {"net": model(), "s": [Scaled(1.0)]}
    paths, leaves, _ = optree.tree_flatten_with_path(tree, namespace=namespace)
    ct_pairs = ct.leaves_with_path(tree)
    assert paths == [tuple(k.raw for k in p) for p, _ in ct_pairs]
    assert all(a is b for a, (_, b) in zip(leaves, ct_pairs, strict=True))
    accessors, _, _ = optree.tree_flatten_with_accessor(tree, namespace=namespace)
    assert [a.codify("") for a in accessors] == [ct.keystr(p) for p, _ in ct_pairs]
    assert accessors[0](tree) is tree["net"].layers[0].w


@pytest.mark.parametrize("namespace", ["", "ct-tests"])
def test_structure_round_trip(namespace: str) -> None:
    """tree_structure then unflatten rebuilds an equal tree; kept values are metadata."""
    tree = [model(), Scaled(2.0, tag="k", cache="dropped")]
    leaves, spec = optree.tree_flatten(tree, namespace=namespace)
    assert spec == optree.tree_structure(tree, namespace=namespace)
    out = optree.tree_unflatten(spec, leaves)
    assert out[1] == Scaled(2.0, tag="k", cache=None)
    assert ct.structure(out) == ct.structure(tree)
    assert spec != optree.tree_structure([model(), Scaled(2.0, tag="other")], namespace=namespace)
    assert spec.num_leaves == ct.structure(tree).num_leaves == 5


def test_a_namespace_registration_is_seen_only_in_that_namespace() -> None:
    """A class seen only by a namespaced registration is a leaf in other namespaces."""

    @ct.container
    class OnlyHere:
        a: int
        b: int

    register_optree(namespace="ct-tests-only")
    from optree.registry import __GLOBAL_NAMESPACE as GLOBAL  # type: ignore[attr-defined]

    optree.unregister_pytree_node(OnlyHere, namespace=GLOBAL)
    assert optree.tree_leaves(OnlyHere(1, 2), namespace="ct-tests-only") == [1, 2]
    assert optree.tree_leaves(OnlyHere(1, 2)) == [OnlyHere(1, 2)]


def test_register_optree_twice_is_harmless() -> None:
    """Calling again, for a namespace already registered, does nothing."""
    register_optree()
    register_optree(namespace="ct-tests")
    assert optree.tree_leaves(Scaled(1.0), namespace="ct-tests") == [1.0]


def test_later_classes_register_and_namedtuples_follow_their_declaration() -> None:
    """Classes declared afterwards are nodes; ct.register on a namedtuple overrides optree's
    namedtuple handling (children= and keep= apply)."""
    Point = collections.namedtuple("Point", "x y")
    ct.register(Point, children=["y"])

    @ct.container(children=["b"])
    class Late:
        a: str
        b: int

    leaves, spec = optree.tree_flatten([Point(1, 2), Late("kept", 3)])
    assert leaves == [2, 3]
    assert optree.tree_unflatten(spec, [20, 30]) == [Point(1, 20), Late("kept", 30)]


def test_register_node_classes_use_their_keys() -> None:
    """A register_node class's keys are its path entries; accessors render ct's text."""

    class Bag:
        def __init__(self, items: dict[str, Any]) -> None:
            self.items = items

    ct.register_node(
        Bag,
        lambda b: (list(b.items.values()), tuple(b.items)),
        lambda keys, children: Bag(dict(zip(keys, children))),
        keys=lambda b: list(b.items),
    )
    bag = Bag({"p": 1, "not id": 2})
    paths, leaves, _ = optree.tree_flatten_with_path(bag, namespace="ct-tests")
    assert (paths, leaves) == ([("p",), ("not id",)], [1, 2])
    accessors = optree.tree_accessors(bag, namespace="ct-tests")
    assert [a.codify("") for a in accessors] == [ct.keystr(p) for p, _ in ct.leaves_with_path(bag)]
    assert [a.codify("") for a in accessors] == [".p", "['not id']"]
    out = optree.tree_map(lambda v: v * 10, bag, namespace="ct-tests")
    assert out.items == {"p": 10, "not id": 20}


def test_array_kept_values_compare_by_content() -> None:
    """Two trees whose kept arrays are equal map together; unequal ones do not."""
    a, b = Scaled(1.0, tag=np.arange(2)), Scaled(2.0, tag=np.arange(2))
    assert optree.tree_map(lambda u, v: u + v, a, b).x == 3.0
    with pytest.raises(ValueError, match="Mismatch custom node data"):
        optree.tree_map(lambda u, v: u + v, a, Scaled(2.0, tag=np.arange(3)))


def test_a_class_registered_with_optree_by_hand_keeps_that_registration() -> None:
    """A class already in optree's global registry warns when declared, and stays as is."""

    @dataclasses.dataclass
    class Hand:
        a: Any
        b: Any

    optree.register_pytree_node(
        Hand, lambda h: ((h.a,), h.b), lambda b, c: Hand(c[0], b), namespace="ct-tests"
    )
    with pytest.warns(
        UserWarning, match=r"'.*Hand' is already registered with optree in namespace 'ct-tests'"
    ):
        ct.register(Hand)
    assert optree.tree_leaves(Hand(1, 2), namespace="ct-tests") == [1]
    assert optree.tree_leaves(Hand(1, 2)) == [1, 2]


def test_a_namespace_must_be_a_string() -> None:
    """A namespace that is not a string is refused before optree sees it."""
    with pytest.raises(ct.ContainerDefinitionError, match=r"takes a string, got 3"):
        register_optree(namespace=3)  # type: ignore[arg-type]


def test_generated_flatten_agrees_with_its_plain_twin() -> None:
    """The generated flatten gives its plain twin's triple; an unset field raises the
    declaration's error."""
    from containers._registry import kind_of
    from containers.interop._optree import optree_functions

    @ct.container(frozen=False)
    class Open:
        x: Any
        y: Any

    for tree in (model().layers[0], model(), Scaled(1.0, "k", "c"), Open(1, 2)):
        kind = kind_of(tree)
        fast = optree_functions(kind, optree)[0](tree)
        plain = optree_functions(kind, optree, plain=True)[0](tree)
        assert fast[0] == plain[0] and fast[1] == plain[1] and tuple(fast[2]) == tuple(plain[2])
    broken = Open(1, 2)
    del broken.y
    with pytest.raises(ct.StructureError, match=r"Open\.y is not set"):
        optree.tree_flatten(broken)


def test_declaring_while_registering_from_other_threads_misses_no_class() -> None:
    """Classes declared in other threads while register_optree subscribes are all
    registered, once, and nothing deadlocks."""
    import threading

    declared: list[type] = []
    start = threading.Barrier(5)

    def declare(tag: int) -> None:
        start.wait()
        for i in range(20):
            cls = type(f"Threaded{tag}_{i}", (), {"__annotations__": {"v": int}})
            declared.append(ct.container(cls))

    threads = [threading.Thread(target=declare, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    start.wait()
    register_optree(namespace="ct-tests-threads")
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert len(declared) == 80
    for cls in declared:
        assert optree.tree_leaves(cls(7), namespace="ct-tests-threads") == [7]
