"""containers.interop.register_torch: declared classes are torch.utils._pytree nodes, with
real torch: key paths, tree_map, torch.func.grad and torch.func.vmap over an MLP.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import pytest

import containers as ct
from containers.interop import register_torch

torch = pytest.importorskip("torch")
pytree = pytest.importorskip("torch.utils._pytree")
func = pytest.importorskip("torch.func")


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    """Register when this module's tests start, not at import: the registrations keep
    every class declared later alive, which other modules' tests must not see (they
    run first: tests/conftest.py)."""
    register_torch()


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


def mlp(seed: int, sizes: tuple[int, ...] = (2, 8, 1)) -> MLP:
    """A small MLP of float32 tensors."""
    g = torch.Generator().manual_seed(seed)
    return MLP(
        tuple(
            Linear(torch.randn(m, n, generator=g) * 0.5, torch.zeros(n))
            for m, n in itertools.pairwise(sizes)
        ),
        name="net",
    )


def forward(model: MLP, x: Any) -> Any:
    """tanh hidden layers, linear output."""
    for layer in model.layers[:-1]:
        x = torch.tanh(x @ layer.w + layer.b)
    last = model.layers[-1]
    return x @ last.w + last.b


def test_key_paths_agree_with_ct_keystr() -> None:
    """torch's keystr of every path equals ct.keystr, leaves in the same order (the dict's
    keys are in sorted order: torch visits dicts in insertion order, containers sorted)."""
    tree = {"extra": [Scaled(1.0)], "model": mlp(0)}
    pairs, _ = pytree.tree_flatten_with_path(tree)
    ct_pairs = ct.leaves_with_path(tree)
    assert [pytree.keystr(p) for p, _ in pairs] == [ct.keystr(p) for p, _ in ct_pairs]
    assert pytree.keystr(pairs[0][0]) == "['extra'][0].x"
    assert all(a is b for (_, a), (_, b) in zip(pairs, ct_pairs, strict=True))


def test_tree_map_returns_the_container_type() -> None:
    """tree_map rebuilds containers: kept values kept, reset fields reset."""
    out = pytree.tree_map(lambda t: t * 2, mlp(1))
    assert type(out) is MLP and out.name == "net" and type(out.layers[0]) is Linear
    scaled = pytree.tree_map(lambda v: v + 1, Scaled(1.0, tag="k", cache="dropped"))
    assert scaled == Scaled(2.0, tag="k", cache=None)


def test_flatten_unflatten_round_trip() -> None:
    """tree_unflatten of tree_flatten gives an equal tree; the spec carries kept values."""
    tree = [mlp(2), Scaled(3.0, tag="k")]
    leaves, spec = pytree.tree_flatten(tree)
    out = pytree.tree_unflatten(leaves, spec)
    assert ct.structure(out) == ct.structure(tree)
    assert out[1] == Scaled(3.0, tag="k")
    assert spec != pytree.tree_structure([mlp(2), Scaled(3.0, tag="other")])


def test_treespec_dumps_and_loads_give_back_the_same_spec() -> None:
    """treespec_dumps/treespec_loads (torch.export.save/load) round-trip a spec with
    containers: kept values keep their types (a tuple stays a tuple, arrays too)."""

    @ct.container(children=["x"])
    class Shaped:
        x: Any
        shape: tuple[int, ...]
        scale: Any

    tree = [mlp(0), Scaled(1.0, tag=b"t"), Shaped(torch.ones(2), (3, 4), np.arange(2))]
    spec = pytree.tree_structure(tree)
    back = pytree.treespec_loads(pytree.treespec_dumps(spec))
    assert back == spec
    rebuilt = pytree.tree_unflatten(pytree.tree_leaves(tree), back)
    assert rebuilt[2].shape == (3, 4)
    assert rebuilt[1].tag == b"t"


def test_treespec_dumps_names_an_unstorable_kept_value() -> None:
    """A kept value ct.serialize cannot store fails treespec_dumps naming class and field."""

    @ct.container(children=["x"])
    class WithFn:
        x: Any
        fn: Any

    spec = pytree.tree_structure(WithFn(torch.ones(1), print))
    with pytest.raises(
        ct.SerializationError,
        match=r"treespec_dumps: the kept values of a 'WithFn' .* at \['fn'\]",
    ):
        pytree.treespec_dumps(spec)


def test_kept_tensors_compare_by_content_and_hash_alike() -> None:
    """A kept tensor compares by value in ct.Structure (torch's == is an array and its
    hash is by identity): equal tensors give equal structures with equal hashes."""

    @ct.container(children=["w"])
    class Masked:
        w: Any
        mask: Any

    a, b = ct.structure(Masked(1.0, torch.ones(2))), ct.structure(Masked(2.0, torch.ones(2)))
    assert a == b and hash(a) == hash(b)
    assert a != ct.structure(Masked(1.0, torch.zeros(2)))
    assert (
        pytree.tree_map(
            lambda u, v: u + v, Masked(1.0, torch.ones(2)), Masked(2.0, torch.ones(2))
        ).w
        == 3.0
    )


def test_register_torch_twice_is_harmless() -> None:
    """A second call does nothing (torch would warn about re-registration)."""
    register_torch()
    register_torch()
    assert pytree.tree_leaves(Scaled(1.0)) == [1.0]


def test_classes_declared_later_are_nodes() -> None:
    """A container declared after register_torch is a torch pytree node."""

    @ct.container(children=["b", "a"])
    class Late:
        a: int
        b: int

    leaves, spec = pytree.tree_flatten(Late(1, 2))
    assert leaves == [2, 1]
    assert pytree.tree_unflatten([20, 10], spec) == Late(10, 20)


def test_register_node_classes_use_their_keys() -> None:
    """A register_node class's keys become torch MappingKey/GetAttrKey entries."""

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
    pairs, _ = pytree.tree_flatten_with_path(bag)
    assert [pytree.keystr(p) for p, _ in pairs] == [".p", "['not id']"]
    assert [pytree.keystr(p) for p, _ in pairs] == [
        ct.keystr(p) for p, _ in ct.leaves_with_path(bag)
    ]
    assert pytree.tree_map(lambda v: v * 10, bag).items == {"p": 10, "not id": 20}


def test_func_grad_trains_the_mlp() -> None:
    """torch.func.grad of a loss over a declared MLP returns an MLP of gradients, and
    plain SGD with them decreases the loss."""
    model = mlp(3)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(32, 2, generator=g)
    y = torch.sin(x[:, :1] * 2) + x[:, 1:]

    def loss(model: MLP) -> Any:
        return torch.mean((forward(model, x) - y) ** 2)

    losses = []
    for _ in range(30):
        grads = func.grad(loss)(model)
        assert type(grads) is MLP and grads.name == "net"
        model = pytree.tree_map(lambda p, d: p - 0.1 * d, model, grads)
        losses.append(float(loss(model)))
    assert losses[-1] < losses[0] * 0.7


def test_func_vmap_over_a_batch_of_containers() -> None:
    """torch.func.vmap maps over a container whose tensors carry a batch axis."""
    models = [mlp(i) for i in range(3)]
    batch = pytree.tree_map(lambda *ts: torch.stack(ts), *models)
    assert type(batch) is MLP and batch.layers[0].w.shape == (3, 2, 8)
    x = torch.ones(1, 2)
    out = func.vmap(lambda m: forward(m, x))(batch)
    expected = torch.stack([forward(m, x) for m in models])
    torch.testing.assert_close(out, expected)
    doubled = func.vmap(lambda m: pytree.tree_map(lambda t: t * 2, m))(batch)
    assert type(doubled) is MLP and doubled.name == "net"
    torch.testing.assert_close(doubled.layers[1].b, batch.layers[1].b * 2)


def test_a_class_registered_with_torch_by_hand_keeps_that_registration() -> None:
    """A class already in torch's registry warns when declared, and torch keeps its own."""

    @dataclasses.dataclass
    class Hand:
        a: Any
        b: Any

    pytree.register_pytree_node(Hand, lambda h: ([h.a], h.b), lambda c, b: Hand(c[0], b))
    with pytest.warns(UserWarning, match=r"'.*Hand' is already registered with torch"):
        ct.register(Hand)
    assert pytree.tree_leaves(Hand(1, 2)) == [1]
    assert ct.leaves(Hand(1, 2)) == [1, 2]


def test_tensors_are_leaves_in_containers_operations() -> None:
    """ct.flatten, fmap and isleaf treat torch tensors as leaves."""
    model = mlp(5)
    leaves, structure = ct.flatten(model)
    assert all(isinstance(t, torch.Tensor) for t in leaves) and structure.num_leaves == 4
    doubled = ct.fmap(lambda t: t * 2, model)
    torch.testing.assert_close(doubled.layers[0].w, model.layers[0].w * 2)
    assert ct.isleaf(torch.zeros(2))


def test_pformat_summarizes_tensors_like_numpy() -> None:
    """pformat shows a tensor as dtype[shape], as it does a numpy array."""
    text = ct.pformat(Linear(torch.zeros(3, 4), torch.zeros(4, dtype=torch.bfloat16)))
    assert "float32[3,4]" in text
    assert "bfloat16[4]" in text
    assert "tensor(" not in text


def test_save_stores_tensors_as_numpy_arrays(tmp_path: Any) -> None:
    """ct.save writes tensors as arrays that load as numpy arrays, dtype kept."""
    if not hasattr(ct, "save"):
        pytest.skip("ct.save is not built yet (containers.serialize)")
    model = Linear(torch.arange(6, dtype=torch.float32).reshape(2, 3), torch.ones(3).bfloat16())
    ct.save(tmp_path / "m.safetensors", model)
    loaded = ct.load(tmp_path / "m.safetensors")
    assert type(loaded.w) is np.ndarray and loaded.w.dtype == np.float32
    np.testing.assert_array_equal(loaded.w, model.w.numpy())
    assert str(loaded.b.dtype) == "bfloat16"


def test_generated_adapters_agree_with_their_plain_twins() -> None:
    """Generated flatten, flatten_with_keys and unflatten agree with the plain twins,
    for kept, reset, slotted and attrs fields."""
    import attrs

    from containers._registry import kind_of
    from containers.interop._torch import torch_functions

    @ct.container(children=["a"], keep=["k"])
    @dataclasses.dataclass(slots=True)
    class Slotted:
        a: Any
        k: str = "k"
        r: list[int] = dataclasses.field(default_factory=list)

    @ct.container(children=["x"])
    @attrs.define
    class Attrs:
        x: Any
        _y: int = 0

    for tree in (
        MLP((Linear(1, 2),), name="n"),
        Scaled(1.0, "k", "c"),
        Slotted(1, "kk", [1]),
        Attrs(1, 2),
    ):
        kind = kind_of(tree)
        fast, plain = torch_functions(kind, pytree), torch_functions(kind, pytree, plain=True)
        children, context = fast[0](tree)
        assert (children, context) == plain[0](tree)
        assert fast[2](tree) == plain[2](tree)
        assert ct.structure(fast[1](children, context)) == ct.structure(
            plain[1](children, context)
        )
        assert fast[1](children, context) == plain[1](children, context)
    assert torch_functions(kind_of(Slotted(1)), pytree)[1]([5], ("kk",)) == Slotted(5, "kk", [])


def test_namedtuples_are_read_by_torch_as_all_their_fields_in_order() -> None:
    """torch reads every namedtuple as one before its registry: a ct.register'ed
    namedtuple whose children are all its fields in order agrees with containers; with
    children= or keep= it does not, and torch maps every field, in field order, and
    rebuilds through the class."""
    import collections

    Full = collections.namedtuple("Full", "a b")
    ct.register(Full)
    pairs, spec = pytree.tree_flatten_with_path(Full(1, 2))
    assert [(pytree.keystr(p), v) for p, v in pairs] == [
        (ct.keystr(p), v) for p, v in ct.leaves_with_path(Full(1, 2))
    ]
    assert pytree.tree_unflatten([10, 20], spec) == Full(10, 20)

    Partial = collections.namedtuple("Partial", "a b")
    ct.register(Partial, children=["b"])  # a is kept, for containers
    assert ct.leaves(Partial(1, 2)) == [2]
    pairs, spec = pytree.tree_flatten_with_path(Partial(1, 2))
    assert [(pytree.keystr(p), v) for p, v in pairs] == [(".a", 1), (".b", 2)]
    out = pytree.tree_map(lambda v: v * 10, Partial(1, 2))
    assert type(out) is Partial and out == (10, 20)
    assert ct.fmap(lambda v: v * 10, Partial(1, 2)) == (1, 20)


def test_hand_written_containers_are_torch_nodes(hand_pair: type) -> None:
    """A class implementing the Container protocol by hand is a torch pytree node once
    register_torch runs again, with its keys; torch.func.grad returns one."""

    HandPair = hand_pair
    assert len(pytree.tree_leaves(HandPair(1, 2))) == 1  # a leaf: torch has not heard of it
    register_torch()
    tree = [HandPair(1, {"k": 2}, "x")]
    pairs, spec = pytree.tree_flatten_with_path(tree)
    assert [(pytree.keystr(p), v) for p, v in pairs] == [("[0].a", 1), ("[0].b['k']", 2)]
    out = pytree.tree_unflatten([10, 20], spec)[0]
    assert (type(out), out.a, out.b, out.tag) == (HandPair, 10, {"k": 20}, "x")
    grads = func.grad(lambda p: (p.a * p.b).sum())(HandPair(torch.ones(2), torch.full((2,), 3.0)))
    assert type(grads) is HandPair and grads.tag == "t"
    assert torch.equal(grads.a, torch.full((2,), 3.0)) and torch.equal(grads.b, torch.ones(2))
