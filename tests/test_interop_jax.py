"""containers.interop.register_jax: declared classes are JAX pytrees, with real jax and optax.

Key paths, kept values as aux data, rebuilding without ``__init__``, classes declared
after the call, a training loop with ``jax.jit(jax.value_and_grad(...))`` and
``optax.adam``, ``jax.vmap`` over a batch of containers, and jax arrays as leaves in
containers' own operations.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import numpy as np
import pytest

import containers as ct
from containers.interop import register_jax

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
tu = jax.tree_util


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    """Register when this module's tests start, not at import: the registrations keep
    every class declared later alive, which other modules' tests must not see (they
    run first: tests/conftest.py)."""
    register_jax()


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
    tag: str = "t"
    cache: Any = None  # reset: rebuilt objects get the default


def mlp(key: Any, sizes: tuple[int, ...] = (2, 8, 1)) -> MLP:
    """A small MLP with random weights."""
    keys = jax.random.split(key, len(sizes) - 1)
    layers = tuple(
        Linear(jax.random.normal(k, (m, n)) * 0.5, jnp.zeros(n))
        for k, m, n in zip(keys, sizes[:-1], sizes[1:])
    )
    return MLP(layers, name="net")


def forward(model: MLP, x: Any) -> Any:
    """tanh hidden layers, linear output."""
    for layer in model.layers[:-1]:
        x = jnp.tanh(x @ layer.w + layer.b)
    last = model.layers[-1]
    return x @ last.w + last.b


def test_key_paths_agree_with_ct_keystr() -> None:
    """jax.tree_util.keystr of every path through containers equals ct.keystr."""
    tree = {"model": mlp(jax.random.PRNGKey(0)), "extra": [Scaled(1.0)]}
    jax_paths = [tu.keystr(p) for p, _ in tu.tree_flatten_with_path(tree)[0]]
    ct_paths = [ct.keystr(p) for p, _ in ct.leaves_with_path(tree)]
    assert jax_paths == ct_paths
    assert "['model'].layers[0].w" in jax_paths
    assert tu.keystr(tu.tree_flatten_with_path(mlp(jax.random.PRNGKey(0)))[0][0][0]) == (
        ".layers[0].w"
    )


def test_tree_map_with_path_paths_equal_leaves_with_path() -> None:
    """tree_map_with_path sees the paths ct.leaves_with_path gives, in the same order."""
    model = mlp(jax.random.PRNGKey(1))
    seen: list[str] = []
    tu.tree_map_with_path(lambda p, x: seen.append(tu.keystr(p)), model)
    assert seen == [ct.keystr(p) for p, _ in ct.leaves_with_path(model)]


def test_leaves_and_children_order_match_ct_flatten() -> None:
    """jax's leaves are ct's leaves, the same objects in the same order."""
    model = mlp(jax.random.PRNGKey(2), (3, 4, 5, 2))
    jax_leaves = tu.tree_leaves(model)
    ct_leaves = ct.leaves(model)
    assert len(jax_leaves) == len(ct_leaves) == 6
    assert all(a is b for a, b in zip(jax_leaves, ct_leaves, strict=True))


def test_unflatten_keeps_kept_values_resets_the_rest_and_skips_init() -> None:
    """Kept values come back, reset fields get their defaults, __init__ never runs."""
    calls: list[Any] = []

    @ct.container(children=["x"], keep=["tag"])
    class Checked:
        x: Any
        tag: str = "t"
        cache: Any = None

        def __post_init__(self) -> None:
            calls.append(self.x)

    tree = Checked(1.0, tag="kept", cache="dropped")
    calls.clear()
    treedef = tu.tree_structure(tree)
    out = tu.tree_unflatten(treedef, ["not a number"])
    assert (out.x, out.tag, out.cache) == ("not a number", "kept", None)
    assert calls == []
    mapped = tu.tree_map(lambda v: v + 1, Scaled(1.0, tag="k", cache=[1]))
    assert (mapped.x, mapped.tag, mapped.cache) == (2.0, "k", None)
    assert ct.unflatten(ct.structure(tree), ["not a number"]) == out


def test_structure_carries_kept_values() -> None:
    """Different kept values give different treedefs; equal ones equal treedefs."""
    a = tu.tree_structure(MLP((), name="a"))
    assert a == tu.tree_structure(MLP((), name="a"))
    assert a != tu.tree_structure(MLP((), name="b"))
    assert "MLP[('a',)]" in str(a)


def test_kept_values_compare_type_strictly_whatever_their_representation() -> None:
    """Kept values of simple types (str, int, bytes, None) are a plain tuple in the
    structure, others a KeptValues that names its fields; either way 1, 1.0 and True
    are three structures, as in containers, and equal values one."""
    trees = [MLP((), name=v) for v in (1, 1.0, True, "1", None, np.float64(1.0))]
    defs = [tu.tree_structure(t) for t in trees]
    assert [[a == b for b in defs] for a in defs] == [
        [i == j for j in range(len(defs))] for i in range(len(defs))
    ]
    assert [ct.structure(a) == ct.structure(b) for a in trees for b in trees] == [
        i == j for i in range(len(trees)) for j in range(len(trees))
    ]
    assert defs[0] == tu.tree_structure(MLP((), name=1))
    assert hash(defs[1]) == hash(tu.tree_structure(MLP((), name=1.0)))
    assert "MLP[(name=1.0)]" in str(defs[1]) and "MLP[(1,)]" in str(defs[0])


def test_register_jax_twice_is_harmless() -> None:
    """A second call registers nothing again and raises nothing."""
    before = tu.tree_structure(mlp(jax.random.PRNGKey(0)))
    register_jax()
    register_jax()
    assert tu.tree_structure(mlp(jax.random.PRNGKey(0))) == before


def test_classes_declared_later_and_registered_classes_are_pytrees() -> None:
    """Containers declared after register_jax, and ct.register classes, are nodes."""

    @ct.container(children=["b", "a"])
    class Late:
        a: int
        b: int

    @dataclasses.dataclass
    class Foreign:
        p: int
        q: str = "q"

    ct.register(Foreign, children=["p"])
    Point = collections.namedtuple("Point", "x y")
    ct.register(Point, children=["y"])
    tree = [Late(1, 2), Foreign(3, "kept"), Point(4, 5)]
    leaves, treedef = tu.tree_flatten_with_path(tree)
    assert [(tu.keystr(p), v) for p, v in leaves] == [
        ("[0].b", 2),
        ("[0].a", 1),
        ("[1].p", 3),
        ("[2].y", 5),
    ]
    assert tu.tree_unflatten(treedef, [20, 10, 30, 50]) == [
        Late(10, 20),
        Foreign(30, "kept"),
        Point(4, 50),
    ]


def test_register_node_classes_use_their_keys() -> None:
    """A register_node class flattens with its own functions, and its keys make paths."""

    class Box:
        def __init__(self, items: dict[str, Any]) -> None:
            self.items = items

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Box) and other.items == self.items

        __hash__ = None  # type: ignore[assignment]

    ct.register_node(
        Box,
        lambda b: (list(b.items.values()), tuple(b.items)),
        lambda keys, children: Box(dict(zip(keys, children))),
        keys=lambda b: [ct.DictKey(k) for k in b.items],
    )
    box = Box({"p": 1, "q": [2]})
    pairs, treedef = tu.tree_flatten_with_path({"box": box})
    assert [tu.keystr(p) for p, _ in pairs] == ["['box']['p']", "['box']['q'][0]"]
    assert [tu.keystr(p) for p, _ in pairs] == [
        ct.keystr(p) for p, _ in ct.leaves_with_path({"box": box})
    ]
    assert tu.tree_unflatten(treedef, [10, 20]) == {"box": Box({"p": 10, "q": [20]})}


def test_training_loop_with_optax_adam_decreases_the_loss() -> None:
    """jax.jit(jax.value_and_grad(loss)) and optax.adam train a declared MLP."""
    optax = pytest.importorskip("optax")
    model = mlp(jax.random.PRNGKey(3))
    x = jax.random.normal(jax.random.PRNGKey(4), (32, 2))
    y = jnp.sin(x[:, :1] * 2) + x[:, 1:]

    def loss(model: MLP, x: Any, y: Any) -> Any:
        return jnp.mean((forward(model, x) - y) ** 2)

    optimizer = optax.adam(0.05)

    @jax.jit
    def step(model: MLP, state: Any, x: Any, y: Any) -> tuple[MLP, Any, Any]:
        value, grads = jax.value_and_grad(loss)(model, x, y)
        updates, state = optimizer.update(grads, state, model)
        return optax.apply_updates(model, updates), state, value

    state = optimizer.init(model)
    losses = []
    for _ in range(20):
        model, state, value = step(model, state, x, y)
        losses.append(float(value))
    assert type(model) is MLP and model.name == "net"
    assert type(model.layers[0]) is Linear
    assert losses[-1] < losses[0] * 0.7
    assert all(np.isfinite(losses))


def test_grads_are_containers_of_the_same_structure() -> None:
    """jax.grad returns the container type, with kept values, paths as ct's."""
    model = mlp(jax.random.PRNGKey(5))
    grads = jax.grad(lambda m: jnp.sum(forward(m, jnp.ones((1, 2)))))(model)
    assert type(grads) is MLP and grads.name == "net"
    assert ct.structure(grads) == ct.structure(model)


def test_split_parts_pass_through_jit_grad_and_optax() -> None:
    """split's parts (dicts keyed by paths) are JAX pytrees: jax.jit, jax.grad and an
    optax step take and return them, and merge rebuilds the model from the results."""
    optax = pytest.importorskip("optax")
    model = {"net": mlp(jax.random.PRNGKey(6)), "steps": 3}
    s, params, rest = ct.split(model, jax.Array, ...)
    x = jnp.ones((4, 2))

    def loss(params: dict[Any, Any]) -> Any:
        return jnp.sum(forward(ct.merge(s, params, rest)["net"], x) ** 2)

    grads = jax.jit(jax.grad(loss))(params)
    direct = jax.grad(lambda net: jnp.sum(forward(net, x) ** 2))(model["net"])
    assert sorted(grads) == sorted(params)
    for (path, g), d in zip(
        ct.leaves_with_path(ct.merge(s, grads, rest)["net"]), ct.leaves(direct)
    ):
        np.testing.assert_allclose(g, d, rtol=1e-6, err_msg=ct.keystr(path))
    optimizer = optax.sgd(0.1)
    updates, _ = optimizer.update(grads, optimizer.init(params), params)
    new = ct.merge(s, optax.apply_updates(params, updates), rest)
    assert type(new["net"]) is MLP and new["net"].name == "net" and new["steps"] == 3
    for path, w in ct.split(new, jax.Array, ...)[1].items():
        np.testing.assert_allclose(w, params[path] - 0.1 * grads[path], rtol=1e-6)


def test_partition_halves_pass_through_grad_with_missing_as_empty_nodes() -> None:
    """ct.MISSING is a JAX node without children (equinox's None holes): jax.grad and
    optax take partition's halves, and combine rebuilds the model from the results."""
    optax = pytest.importorskip("optax")
    model = Scaled(jnp.ones(2), tag="s")
    trainable, frozen = ct.partition({"m": model, "steps": 3}, jax.Array)
    assert tu.tree_leaves(trainable) == [model.x] and tu.tree_leaves(frozen) == [3]
    grads = jax.jit(jax.grad(lambda t: jnp.sum(ct.combine(t, frozen)["m"].x * 2)))(trainable)
    assert grads["steps"] is ct.MISSING
    np.testing.assert_allclose(grads["m"].x, [2.0, 2.0])
    optimizer = optax.sgd(0.5)
    updates, _ = optimizer.update(grads, optimizer.init(trainable), trainable)
    new = ct.combine(optax.apply_updates(trainable, updates), frozen)
    assert new["steps"] == 3 and new["m"].tag == "s"
    np.testing.assert_allclose(new["m"].x, [0.0, 0.0])


def test_kept_jax_arrays_compare_by_content_as_numpy_arrays_do() -> None:
    """A kept jax array compares by value, shape and dtype, in ct.Structure and as JAX
    aux data: equal ones match (tree_map of two trees), others do not."""

    @ct.container(children=["w"])
    class Masked:
        w: Any
        mask: Any

    s = ct.structure(Masked(1.0, jnp.arange(3)))
    assert s == ct.structure(Masked(2.0, jnp.arange(3)))
    assert hash(s) == hash(ct.structure(Masked(2.0, jnp.arange(3))))
    assert s != ct.structure(Masked(1.0, jnp.arange(4)))
    assert s != ct.structure(Masked(1.0, jnp.arange(3.0)))
    assert (
        tu.tree_map(lambda a, b: a + b, Masked(1.0, jnp.ones(2)), Masked(2.0, jnp.ones(2))).w
        == 3.0
    )
    with pytest.raises(ValueError, match=r"different pytree metadata|Mismatch custom node data"):
        tu.tree_map(lambda a, b: a + b, Masked(1.0, jnp.ones(2)), Masked(2.0, jnp.zeros(2)))


def test_vmap_over_a_batch_of_containers() -> None:
    """jax.vmap maps over containers whose leaves carry a batch axis."""
    models = [mlp(jax.random.PRNGKey(i)) for i in range(3)]
    batch = tu.tree_map(lambda *xs: jnp.stack(xs), *models)
    assert type(batch) is MLP and batch.layers[0].w.shape == (3, 2, 8)
    x = jnp.ones((1, 2))
    out = jax.vmap(lambda m: forward(m, x))(batch)
    expected = jnp.stack([forward(m, x) for m in models])
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    doubled = jax.vmap(lambda m: tu.tree_map(lambda a: a * 2, m))(batch)
    assert type(doubled) is MLP and doubled.name == "net"
    np.testing.assert_allclose(doubled.layers[1].b, batch.layers[1].b * 2)


def test_unhashable_kept_values_work_and_compare_by_content() -> None:
    """A list or array kept value is aux data compared by content: jit retraces only
    when it changes, and tree_map over two trees with equal arrays works."""
    traces: list[Any] = []

    @jax.jit
    def f(s: Scaled) -> Any:
        traces.append(s.tag)
        return s.x * len(s.tag)

    assert float(f(Scaled(jnp.float32(1.0), tag=["a", "b"]))) == 2.0
    assert float(f(Scaled(jnp.float32(2.0), tag=["a", "b"]))) == 4.0
    assert len(traces) == 1
    assert float(f(Scaled(jnp.float32(1.0), tag=["a"]))) == 1.0
    assert len(traces) == 2
    a = Scaled(1.0, tag=np.arange(3))
    b = Scaled(2.0, tag=np.arange(3))
    assert tu.tree_map(lambda u, v: u + v, a, b).x == 3.0
    with pytest.raises(ValueError, match=r"different pytree metadata|Mismatch custom node data"):
        tu.tree_map(lambda u, v: u + v, a, Scaled(2.0, tag=np.arange(4)))


def test_hashing_an_unhashable_kept_value_names_the_field() -> None:
    """Where the structure is hashed, an unhashable kept value raises an error that
    names the class and field and says what to do."""
    treedef = tu.tree_structure(Scaled(1.0, tag=["a"]))
    _, aux = treedef.node_data()
    with pytest.raises(ct.ContainerDefinitionError, match=r"kept field Scaled\.tag holds a list"):
        hash(aux)
    with pytest.raises(TypeError, match="a tuple instead of a list"):
        hash(aux)
    hashable = tu.tree_structure(Scaled(1.0, tag=("a",))).node_data()[1]
    assert hash(hashable) == hash((("a",),))


def test_a_class_registered_with_jax_by_hand_keeps_that_registration() -> None:
    """A class already registered with jax warns when declared, and jax keeps its own."""

    @dataclasses.dataclass
    class Hand:
        a: Any
        b: Any

    tu.register_pytree_node(Hand, lambda h: ((h.a,), h.b), lambda b, c: Hand(c[0], b))
    with pytest.warns(UserWarning, match=r"'.*Hand' is already registered with jax"):
        ct.register(Hand)
    assert tu.tree_leaves(Hand(1, 2)) == [1]
    assert ct.leaves(Hand(1, 2)) == [1, 2]


def test_jax_arrays_are_leaves_in_containers_operations() -> None:
    """ct.flatten, fmap and leaves treat jax arrays as leaves, never traversing them."""
    model = mlp(jax.random.PRNGKey(6))
    leaves, structure = ct.flatten(model)
    assert all(isinstance(leaf, jax.Array) for leaf in leaves)
    assert structure.num_leaves == 4
    doubled = ct.fmap(lambda a: a * 2, model)
    assert type(doubled.layers[0].w) is type(model.layers[0].w)
    np.testing.assert_allclose(doubled.layers[0].w, model.layers[0].w * 2)
    assert ct.isleaf(jnp.zeros((2, 2)))


def test_pformat_summarizes_jax_arrays_like_numpy() -> None:
    """pformat shows a jax array as dtype[shape], as it does a numpy array."""
    text = ct.pformat(Linear(jnp.zeros((3, 4), jnp.float32), jnp.zeros(4, jnp.bfloat16)))
    assert "float32[3,4]" in text
    assert "bfloat16[4]" in text
    assert "Array(" not in text


def test_save_stores_jax_arrays_as_numpy_arrays(tmp_path: Any) -> None:
    """ct.save writes jax arrays as arrays; they load as numpy arrays, dtype kept."""
    if not hasattr(ct, "save"):
        pytest.skip("ct.save is not built yet (containers.serialize)")
    model = Linear(jnp.arange(6, dtype=jnp.float32).reshape(2, 3), jnp.ones(3, jnp.bfloat16))
    ct.save(tmp_path / "m.safetensors", model)
    loaded = ct.load(tmp_path / "m.safetensors")
    assert type(loaded.w) is np.ndarray and loaded.w.dtype == np.float32
    np.testing.assert_array_equal(loaded.w, np.asarray(model.w))
    assert str(loaded.b.dtype) == "bfloat16"


def test_generated_adapters_agree_with_their_plain_twins() -> None:
    """The generated flatten functions give what their plain twins give, aux included;
    an unset field raises the declaration's error through either."""
    from containers._registry import kind_of
    from containers.interop._jax import jax_functions

    @ct.container(frozen=False)
    class Open:
        x: Any
        y: Any

    for tree in (Linear(1, 2), MLP((Linear(1, 2),), name="n"), Scaled(1.0, "k", "c"), Open(1, 2)):
        kind = kind_of(tree)
        fast, plain = jax_functions(kind, tu), jax_functions(kind, tu, plain=True)
        assert fast[0](tree) == plain[0](tree)
        assert list(fast[2](tree)[0]) == list(plain[2](tree)[0])
        assert fast[2](tree)[1] == plain[2](tree)[1]
    broken = Open(1, 2)
    del broken.y
    with pytest.raises(ct.StructureError, match=r"Open\.y is not set"):
        tu.tree_flatten(broken)
    with pytest.raises(ct.StructureError, match=r"Open\.y is not set"):
        tu.tree_flatten_with_path(broken)


def test_hand_written_containers_are_pytrees_with_their_paths(hand_pair: type) -> None:
    """A class implementing the Container protocol by hand, defined after register_jax,
    is a JAX pytree once register_jax runs again: its children, paths and metadata."""
    Pair = hand_pair
    assert len(tu.tree_leaves(Pair(1, 2))) == 1  # a leaf: jax has not heard of it yet
    register_jax()
    tree = {"p": Pair(1, [2, 3], "x")}
    pairs, treedef = tu.tree_flatten_with_path(tree)
    assert [(tu.keystr(p), v) for p, v in pairs] == [
        ("['p'].a", 1),
        ("['p'].b[0]", 2),
        ("['p'].b[1]", 3),
    ]
    assert [tu.keystr(p) for p, _ in pairs] == [ct.keystr(p) for p, _ in ct.leaves_with_path(tree)]
    assert tu.tree_unflatten(treedef, [4, 5, 6])["p"].b == [5, 6]
    out = tu.tree_map(lambda v: v * 10, tree)["p"]
    assert (type(out), out.a, out.b, out.tag) == (Pair, 10, [20, 30], "x")
    assert tu.tree_structure(Pair(1, 2, "x")) == tu.tree_structure(Pair(5, 6, "x"))
    assert tu.tree_structure(Pair(1, 2, "x")) != tu.tree_structure(Pair(1, 2, "y"))


def test_jit_traces_a_hand_written_container_once_per_metadata(hand_pair: type) -> None:
    """jax.jit reuses its trace while the metadata are equal and traces again when they
    change, as for kept values."""
    Pair = hand_pair
    register_jax()
    traces = []

    @jax.jit
    def f(p: Any) -> Any:
        traces.append(p.tag)
        return type(p)(p.a + p.b, p.b, p.tag)

    out = f(Pair(jnp.ones(2), jnp.ones(2), "x"))
    f(Pair(jnp.zeros(2), jnp.ones(2), "x"))
    f(Pair(jnp.zeros(2), jnp.ones(2), "y"))
    assert traces == ["x", "y"]
    assert type(out) is Pair and out.tag == "x" and np.array_equal(out.a, [2.0, 2.0])


def test_a_hand_written_container_met_by_containers_first_needs_no_new_call(
    hand_pair: type,
) -> None:
    """A hand-written class defined after register_jax becomes a JAX pytree as soon as
    containers classifies one of its instances (here ct.leaves)."""
    Pair = hand_pair
    assert len(tu.tree_leaves(Pair(1, 2))) == 1  # a leaf: jax has not heard of it yet
    assert ct.leaves(Pair(1, 2)) == [1, 2]
    assert tu.tree_leaves(Pair(1, 2)) == [1, 2]
    assert jax.grad(lambda p: p.a * p.b)(Pair(3.0, 4.0)).a == 4.0


def test_superseded_classes_stay_registered_with_jax() -> None:
    """JAX cannot unregister a type: a class superseded by a redefinition stays
    registered and alive, and still flattens as declared."""
    import gc
    import weakref

    def declare() -> type:
        @ct.container(children=["w"])
        class Redefined:
            w: Any
            name: str = "r"

        return Redefined

    first = declare()
    ref = weakref.ref(first)
    second = declare()
    del first
    gc.collect()
    old = ref()
    assert old is not None
    assert tu.tree_leaves([old(1), second(2)]) == [1, 2]
