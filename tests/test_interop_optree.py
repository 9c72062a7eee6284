"""containers.interop.register_optree: declared classes are optree pytrees, globally or
in a namespace; and ``import containers`` imports none of jax, optree, torch.
"""

from __future__ import annotations

import abc
import collections
import dataclasses
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_register_node_dict_keys_are_items_in_optree_accessors() -> None:
    """A register_node child keyed by a DictKey with an identifier string renders as
    ['k'] (not .k) and its accessor finds it, as ct.getpath does; paths stay raw keys."""

    class Box:
        def __init__(self, items: dict[Any, Any]) -> None:
            self.items = items

    ct.register_node(
        Box,
        lambda b: (list(b.items.values()), tuple(b.items)),
        lambda keys, children: Box(dict(zip(keys, children))),
        keys=lambda b: [ct.DictKey(k) for k in b.items],
    )
    box = Box({"a": 1, 2: 2})
    paths, leaves, _ = optree.tree_flatten_with_path(box, namespace="ct-tests")
    assert (paths, leaves) == ([("a",), (2,)], [1, 2])
    accessors = optree.tree_accessors(box, namespace="ct-tests")
    assert [a.codify("") for a in accessors] == ["['a']", "[2]"]
    assert [a.codify("") for a in accessors] == [ct.keystr(p) for p, _ in ct.leaves_with_path(box)]
    assert [a(box) for a in accessors] == [1, 2]


def test_missing_is_an_optree_node_without_children() -> None:
    """partition's ct.MISSING holes hold no leaf for optree, in every namespace used."""
    trainable, frozen = ct.partition({"w": np.ones(2), "n": 3}, np.ndarray)
    assert optree.tree_leaves(frozen) == [3]
    assert optree.tree_leaves(trainable, namespace="ct-tests")[0] is trainable["w"]
    doubled = optree.tree_map(lambda v: v * 2, trainable)
    assert ct.combine(doubled, frozen)["n"] == 3 and doubled["n"] is ct.MISSING


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


@pytest.mark.parametrize("namespace", ["", "ct-tests"])
def test_hand_written_containers_are_optree_pytrees(namespace: str, hand_pair: type) -> None:
    """A class implementing the Container protocol by hand is an optree node in every
    registered namespace once register_optree runs again: paths, metadata, rebuild."""
    Pair = hand_pair
    assert len(optree.tree_leaves(Pair(1, 2), namespace=namespace)) == 1  # a leaf so far
    register_optree(namespace)
    tree = {"p": Pair(1, [2, 3], "x")}
    paths, leaves, spec = optree.tree_flatten_with_path(tree, namespace=namespace)
    assert (paths, leaves) == ([("p", "a"), ("p", "b", 0), ("p", "b", 1)], [1, 2, 3])
    assert [a.codify("") for a in optree.tree_accessors(tree, namespace=namespace)] == [
        ct.keystr(p) for p, _ in ct.leaves_with_path(tree)
    ]
    out = optree.tree_unflatten(spec, [10, 20, 30])["p"]
    assert (type(out), out.a, out.b, out.tag) == (Pair, 10, [20, 30], "x")
    assert optree.tree_structure(Pair(1, 2, "x"), namespace=namespace) == optree.tree_structure(
        Pair(5, 6, "x"), namespace=namespace
    )
    assert optree.tree_structure(Pair(1, 2, "x"), namespace=namespace) != optree.tree_structure(
        Pair(1, 2, "y"), namespace=namespace
    )


def test_a_hand_written_container_met_by_containers_first_is_registered(hand_pair: type) -> None:
    """A hand-written class defined after register_optree becomes an optree node as
    soon as containers classifies one of its instances."""
    Pair = hand_pair
    assert len(optree.tree_leaves(Pair(1, 2))) == 1  # a leaf: optree has not heard of it
    assert ct.leaves(Pair(1, 2)) == [1, 2]
    assert optree.tree_leaves(Pair(1, 2)) == [1, 2]
    assert optree.tree_leaves(Pair(1, 2), namespace="ct-tests") == [1, 2]


_SUPERSEDE = """
import gc, json, sys, weakref
import containers as ct
from containers import interop

library = sys.argv[1]
if library == "optree":
    import optree
    interop.register_optree()
    interop.register_optree("ns")
    flatten = lambda t: optree.tree_leaves(t) + optree.tree_leaves(t, namespace="ns")
elif library == "jax":
    import jax
    interop.register_jax()
    flatten = lambda t: jax.tree_util.tree_leaves(t) * 2
else:
    import torch.utils._pytree as pytree
    interop.register_torch()
    flatten = lambda t: pytree.tree_leaves(t) * 2

def declare():
    @ct.container(children=["w"])
    class Redefined:
        w: object
        name: str = "r"
    return Redefined

first = declare()
ref = weakref.ref(first)
leaves = flatten([first(1)])
second = declare()
del first
gc.collect()
print(json.dumps({"freed": ref() is None, "before": leaves, "after": flatten([second(2)])}))
"""


@pytest.mark.parametrize(
    ("library", "freed"), [("optree", True), ("jax", False), ("torch", False)]
)
def test_a_superseded_class_is_freed_where_the_library_can_unregister_it(
    library: str, freed: bool
) -> None:
    """A redefinition supersedes a class: optree unregisters it (every namespace) and it
    is freed; JAX cannot unregister a type and torch has no public way to, so there it
    stays alive. The new class is registered in each case."""
    import json

    pytest.importorskip({"optree": "optree", "jax": "jax", "torch": "torch"}[library])
    out = subprocess.run(
        [sys.executable, "-c", _SUPERSEDE, library],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert json.loads(out.stdout) == {"freed": freed, "before": [1, 1], "after": [2, 2]}


# --- the generated unflatten and its plain twin ------------------------------------------

_serial = iter(range(10**9))


@st.composite
def rebuild_cases(draw: st.DrawFn) -> tuple[type, tuple[Any, ...], tuple[Any, ...]]:
    """A freshly declared class of a random flavor (dataclass or attrs, frozen or not,
    slotted or not, or a namedtuple), with children, kept and reset fields (defaults,
    factories, attrs factories taking self), and children and kept values drawn from a
    small pool, so that the same object often appears in several fields."""
    import attrs

    n = draw(st.integers(0, 4))
    names = [f"f{i}" for i in range(n)]
    flavor = draw(
        st.sampled_from(
            [
                "dataclass",
                "dataclass-frozen",
                "dataclass-slots",
                "dataclass-slots-mutable",
                "attrs",
                "attrs-frozen",
                "attrs-slots",
                "namedtuple",
            ]
        )
    )
    roles = [draw(st.sampled_from(["child", "keep", "reset"])) for _ in names]
    children = [nm for nm, r in zip(names, roles) if r == "child"]
    children = list(draw(st.permutations(children))) if children else []
    keep = [nm for nm, r in zip(names, roles) if r == "keep"]
    reset = [nm for nm, r in zip(names, roles) if r == "reset"]
    how = {nm: draw(st.sampled_from(["value", "factory", "self"])) for nm in reset}
    cls_name = f"Rebuilt{next(_serial)}"
    if flavor == "namedtuple":
        cls = collections.namedtuple(cls_name, names, defaults=["d"] * len(names))  # type: ignore[misc]
        ct.register(cls, children=children, keep=keep if reset else None)
    elif flavor.startswith("dataclass"):

        def dc_field(nm: str) -> Any:
            if how.get(nm) == "value":
                return dataclasses.field(default=f"default-{nm}")
            if nm in how:
                return dataclasses.field(default_factory=lambda: [nm])
            return dataclasses.field()

        fields = sorted([(nm, Any, dc_field(nm)) for nm in names], key=lambda f: f[0] in how)
        cls = dataclasses.make_dataclass(
            cls_name,
            fields,
            frozen=not flavor.endswith(("dataclass", "mutable")),
            slots="slots" in flavor,
        )
        ct.container(children=children, keep=keep if reset else None)(cls)
    else:

        def at_field(nm: str) -> Any:
            if how.get(nm) == "value":
                return attrs.field(default=f"default-{nm}")
            if how.get(nm) == "factory":
                return attrs.field(factory=lambda: [nm])
            if nm in how:
                return attrs.field(default=attrs.Factory(lambda self: [id(self)], takes_self=True))
            return attrs.field()

        attributes = {nm: at_field(nm) for nm in sorted(names, key=lambda nm: nm in how)}
        cls = attrs.make_class(
            cls_name,
            attributes,
            slots=flavor == "attrs-slots",
            frozen=flavor != "attrs",
        )
        ct.container(children=children, keep=keep if reset else None)(cls)
    pool = [object(), [1], "s", 2.5]
    kids = tuple(draw(st.sampled_from(pool)) for _ in ct.spec(cls).children)
    kept = tuple(draw(st.sampled_from(pool)) for _ in ct.spec(cls).keep)
    return cls, kids, kept


@settings(max_examples=60, deadline=None)
@given(rebuild_cases(), st.sampled_from(["jax", "optree", "torch"]))
def test_generated_unflatten_agrees_with_its_plain_twin(
    case: tuple[type, tuple[Any, ...], tuple[Any, ...]], library: str
) -> None:
    """Each library's generated unflatten builds what its plain twin builds: the same
    class, the very same objects in children and kept fields (shared ones shared
    alike), defaults in reset fields, no __init__ run; whichever way it builds."""
    from containers.interop._generated import compile_adapters, plain_unflatten

    cls, kids, kept = case
    spec = ct.spec(cls)
    kept_type = type("Kept", (tuple,), {}) if spec.keep else None
    aux = kept_type(kept) if kept_type is not None else ()
    unflatten = compile_adapters(spec, library, kept_type=kept_type, slow=print)["unflatten"]
    built = unflatten(list(kids), aux) if library == "torch" else unflatten(aux, kids)
    plain = plain_unflatten(spec)(aux, kids)
    assert type(built) is type(plain) is cls
    for name in spec.fields:
        got, want = getattr(built, name), getattr(plain, name)
        if name in spec.reset and spec.defaults[name].how != "value":
            assert got == want or spec.defaults[name].how == "factory_self"
            assert got is not want  # a fresh object from the factory
        else:
            assert got is want
    if not isinstance(built, tuple) and hasattr(built, "__dict__"):
        assert list(vars(built)) == list(vars(plain))
    values = [getattr(built, n) for n in spec.fields]
    others = [getattr(plain, n) for n in spec.fields]
    assert [[a is b for b in values] for a in values] == [[a is b for b in others] for a in others]


@settings(max_examples=80, deadline=None)
@given(
    rebuild_cases(),
    st.sampled_from(["jax", "optree", "torch"]),
    st.sampled_from([tuple, list, iter]),
)
def test_compiled_unflatten_agrees_with_the_generated_one(
    case: tuple[type, tuple[Any, ...], tuple[Any, ...]], library: str, children_as: Any
) -> None:
    """Where the accelerator rebuilds a class (``_speedups.Rebuild``: every frozen
    dataclass and attrs class, slotted or not), it builds what the generated Python
    rebuild, its plain twin, builds: the same class, the very same objects in children
    and kept fields (shared ones shared alike), the same defaults and factory values in
    reset fields, the instance dict in the same order; whatever the children come as."""
    from containers._engine import _fast
    from containers.interop._generated import compile_adapters, compiled_rebuild_fields

    speedups = _fast._speedups
    if speedups is None:
        pytest.skip("containers._engine._speedups is not built")
    cls, kids, kept = case
    spec = ct.spec(cls)
    frozen = spec.flavor != "namedtuple" and cls.__setattr__ is not object.__setattr__
    assert (compiled_rebuild_fields(spec) is not None) == frozen
    kept_type = type("Kept", (tuple,), {}) if spec.keep else None
    aux = kept_type(kept) if kept_type is not None else ()
    compiled = compile_adapters(spec, library, kept_type=kept_type, slow=print)["unflatten"]
    assert isinstance(compiled, speedups.Rebuild) == frozen
    try:
        _fast._speedups = None
        twin = compile_adapters(spec, library, kept_type=kept_type, slow=print)["unflatten"]
    finally:
        _fast._speedups = speedups
    assert not isinstance(twin, speedups.Rebuild)

    def call(unflatten: Any) -> Any:
        children = children_as(kids)
        return unflatten(children, aux) if library == "torch" else unflatten(aux, children)

    built, plain = call(compiled), call(twin)
    assert type(built) is type(plain) is cls
    for name in spec.fields:
        got, want = getattr(built, name), getattr(plain, name)
        if name in spec.reset and spec.defaults[name].how == "factory_self":
            assert got == [id(built)] and want == [id(plain)]
        elif name in spec.reset and spec.defaults[name].how == "factory":
            assert got == want and got is not want  # a fresh object from the factory
        else:
            assert got is want
    if not isinstance(built, tuple) and hasattr(built, "__dict__"):
        assert list(vars(built)) == list(vars(plain))
    if spec.slots:
        assert not hasattr(built, "__dict__") or not any(n in vars(built) for n in spec.slots)
    values = [getattr(built, n) for n in spec.fields]
    others = [getattr(plain, n) for n in spec.fields]
    assert [[a is b for b in values] for a in values] == [[a is b for b in others] for a in others]


def test_the_compiled_rebuild_is_left_out_where_it_would_differ() -> None:
    """The accelerator's rebuild stores as object.__setattr__ does, so it is not used
    where that differs from the generated rebuild's stores (a data descriptor named like
    a field stored in the instance dict), for a class with a __del__, or for a class
    object.__new__ refuses; the generated rebuild builds those."""
    from containers.interop._generated import compile_adapters, compiled_rebuild_fields

    class Loud:
        def __get__(self, obj: Any, owner: Any) -> Any:
            return "descriptor" if obj is None else obj.__dict__["a"]

        def __set__(self, obj: Any, value: Any) -> None:
            raise AssertionError("the rebuild stores past descriptors")

    @dataclasses.dataclass(frozen=True)
    class Described:
        a: Any

    @ct.container
    @dataclasses.dataclass(frozen=True)
    class Finalized:
        a: Any

        def __del__(self) -> None:
            pass

    @ct.container
    @dataclasses.dataclass(frozen=True)
    class Abstract(abc.ABC):
        a: Any

        @abc.abstractmethod
        def method(self) -> None: ...

    Described.a = Loud()  # type: ignore[misc]
    ct.container(Described)
    assert compiled_rebuild_fields(ct.spec(Described)) is None
    assert compiled_rebuild_fields(ct.spec(Finalized)) is None
    assert compiled_rebuild_fields(ct.spec(Abstract)) is None
    for cls in (Described, Finalized):
        unflatten = compile_adapters(ct.spec(cls), "optree", kept_type=None, slow=print)
        built = unflatten["unflatten"]((), ("v",))
        assert type(built) is cls and built.__dict__ == {"a": "v"}
    unflatten = compile_adapters(ct.spec(Abstract), "optree", kept_type=None, slow=print)
    with pytest.raises(TypeError, match="Can't instantiate abstract class"):
        unflatten["unflatten"]((), ("v",))


def test_a_rebuild_never_makes_a_subclass_and_falls_back_where_layouts_differ() -> None:
    """The stand-in class of a frozen rebuild is no subclass (no __init_subclass__ or
    metaclass hook runs); classes whose layout it cannot share (a slotted base), or
    with a __del__, are rebuilt the core's way, with the same result."""
    from containers.interop._generated import compile_adapters, rebuild_shadow

    seen: list[type] = []

    class Base:
        def __init_subclass__(cls, **kwargs: Any) -> None:
            seen.append(cls)

    @ct.container
    @dataclasses.dataclass(frozen=True)
    class Frozen(Base):
        a: Any

    class SlottedBase:
        __slots__ = ("extra",)

    @ct.container
    @dataclasses.dataclass(frozen=True)
    class OnSlots(SlottedBase):
        a: Any

    @ct.container
    @dataclasses.dataclass(frozen=True)
    class Finalized:
        a: Any

        def __del__(self) -> None:
            pass

    assert seen == [Frozen]
    assert rebuild_shadow(ct.spec(Frozen)) is not None and seen == [Frozen]
    assert Frozen.__subclasses__() == []
    assert rebuild_shadow(ct.spec(OnSlots)) is None
    assert rebuild_shadow(ct.spec(Finalized)) is None
    for cls in (Frozen, OnSlots, Finalized):
        unflatten = compile_adapters(ct.spec(cls), "optree", kept_type=None, slow=print)
        built = unflatten["unflatten"]((), ("v",))
        assert type(built) is cls and built.a == "v"
        assert optree.tree_map(lambda v: v + "!", cls("w")) == cls("w!")


def test_a_namedtuple_without_fields_rebuilds() -> None:
    """An empty namedtuple given to ct.register rebuilds, in containers and through
    optree (the generated rebuild once built the invalid `(,)`)."""
    Empty = collections.namedtuple("Empty", [])
    ct.register(Empty)
    assert ct.fmap(lambda v: v, [Empty()]) == [Empty()]
    assert optree.tree_map(lambda v: v, [Empty()]) == [Empty()]
    assert type(optree.tree_unflatten(optree.tree_structure(Empty()), [])) is Empty
