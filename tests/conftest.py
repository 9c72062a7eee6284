"""Fixtures shared by the test modules."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import containers as ct
from containers._engine import _fast


@pytest.fixture(params=["compiled", "python"], scope="module")
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a module's tests twice: with fmap's compiled child loop (``_speedups``) and
    with the generated Python loop it accelerates, which must pass the same tests.

    The modes ``_engine._fast`` keeps between calls were built with one loop; each run starts
    from none and puts the previous ones back afterwards.
    """
    if request.param == "compiled" and _fast._speedups is None:
        pytest.skip("containers._engine._speedups is not built here (no C compiler at install)")
    saved = _fast._speedups, _fast._idle
    _fast._speedups = saved[0] if request.param == "compiled" else None
    _fast._idle = {}
    yield request.param
    _fast._speedups, _fast._idle = saved


#: The compiled loops as imported (None without the extension or with
#: CONTAINERS_PURE_PYTHON): what a test that does not ask for ``engine`` runs with.
_AS_IMPORTED = _fast._speedups


@pytest.fixture(autouse=True)
def _loops_as_imported(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that does not ask for ``engine`` runs with the loops as imported, even
    while a module's ``engine`` run (module-scoped) has switched them: otherwise such
    a test in that module would silently run the Python loop on both sides of a
    comparison with the compiled one."""
    if "engine" in request.fixturenames or _fast._speedups is _AS_IMPORTED:
        yield
        return
    saved = _fast._speedups, _fast._idle
    _fast._speedups, _fast._idle = _AS_IMPORTED, {}
    yield
    _fast._speedups, _fast._idle = saved


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the interop tests and examples last (stable order otherwise).

    ``register_jax``/``register_optree``/``register_torch`` register every class
    declared afterwards with those libraries, whose registries keep the classes alive
    (JAX cannot unregister a type); tests elsewhere check that superseded classes are
    freed, which holds in a process where no ``register_*`` ran.
    """
    items.sort(key=lambda item: "interop" in item.path.name or item.path.parent.name == "interop")


@pytest.fixture
def hand_pair() -> type:
    """A fresh class implementing the Container protocol by hand (children ``a`` and
    ``b``, metadata ``tag``), for the interop tests: each test gets its own class."""

    class HandPair:
        def __init__(self, a: Any, b: Any, tag: str = "t") -> None:
            self.a, self.b, self.tag = a, b, tag

        def __container_traverse__(self, acc: Any, fun: Any, /) -> Any:
            a, acc = fun(self.a, acc)
            b, acc = fun(self.b, acc)
            return type(self)(a, b, self.tag), acc

        def __container_reduce__(self, acc: Any, fun: Any, /) -> Any:
            return fun(self.b, fun(self.a, acc))

        def __container_serialize__(self) -> Any:
            return "HandPair", [("a", self.a), ("b", self.b)], {"tag": self.tag}

        @classmethod
        def __container_deserialize__(cls, children: Any, metadata: Any, /) -> Any:
            kids = dict(children)
            return cls(kids["a"], kids["b"], metadata["tag"])

    return HandPair


@pytest.fixture
def twin_classes() -> Callable[..., tuple[type, ...]]:
    """Make container classes named ``Twin`` (one child, ``a``), one per module name
    given: two modules give two classes named alike, one module twice a class and its
    redefinition."""

    def make(*modules: str) -> tuple[type, ...]:
        return tuple(
            ct.container(type("Twin", (), {"__annotations__": {"a": int}, "__module__": m}))
            for m in modules
        )

    return make


@pytest.fixture
def failing_factory() -> Callable[[str], Any]:
    """Make a declared attrs class ``Factory`` (child ``w``) registered under the given
    name, whose reset field ``cache`` has an ``attr.Factory(takes_self=True)`` that
    raises ``RuntimeError("no")``, and return an instance of it built without running
    the factory (``w=1``): rebuilding it runs user code that fails."""
    import attr

    def boom(self: Any) -> Any:
        raise RuntimeError("no")

    def make(name: str) -> Any:
        @ct.container(children=["w"], keep=[], name=name)
        @attr.define
        class Factory:
            w: int
            cache: Any = attr.Factory(boom, takes_self=True)

        item = object.__new__(Factory)
        object.__setattr__(item, "w", 1)
        object.__setattr__(item, "cache", None)
        return item

    return make
