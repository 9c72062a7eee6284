"""The Container protocol (Nx) and the one-level operations over every node kind.

This stage defines what a container is to the outside (``Container``), and
``traverse``/``reduce``/``functor``/``children``/``isleaf``, each of which looks at one
node and its immediate children. Nothing here recurses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar, runtime_checkable

from containers._errors import StructureError, counted, not_callable_error, short_repr
from containers._paths import AttrKey
from containers._registry import KINDS, kind_of

__all__ = [
    "ACC_USAGE",
    "Container",
    "LazyContainer",
    "Template",
    "children",
    "functor",
    "isleaf",
    "lazy_traverse",
    "reduce",
    "template_of",
    "traverse",
]

A = TypeVar("A")

#: How the functions with an accumulator take their arguments (Nx's order), for the
#: error when ``fun`` is not callable (``composite`` uses it too).
ACC_USAGE = "Pass the tree, the accumulator, then the function: {op}(x, acc, fun)"


@runtime_checkable
class Container(Protocol):
    """A node that knows its children: what ``@container`` generates, or hand-written.

    A class implementing these four methods is a node in every operation.

    Examples:
        >>> import containers as ct
        >>> @ct.container
        ... class Pair:
        ...     a: int
        ...     b: int
        >>> isinstance(Pair(1, 2), ct.Container)
        True
        >>> Pair(1, 2).__container_serialize__()[1:]
        ([('a', 1), ('b', 2)], {})
    """

    def __container_traverse__(
        self, acc: Any, fun: Callable[[Any, Any], tuple[Any, Any]], /
    ) -> tuple[Any, Any]:
        """Map ``fun(child, acc) -> (new_child, acc)`` over the children; rebuild."""
        ...

    def __container_reduce__(self, acc: Any, fun: Callable[[Any, Any], Any], /) -> Any:
        """Fold ``fun(child, acc) -> acc`` over the children."""
        ...

    def __container_serialize__(self) -> tuple[str, list[tuple[Any, Any]], dict[str, Any]]:
        """Return ``(type_name, [(key, child), ...], metadata)``."""
        ...

    @classmethod
    def __container_deserialize__(
        cls, children: list[tuple[Any, Any]], metadata: dict[str, Any], /
    ) -> Any:
        """Rebuild from what ``__container_serialize__`` gave."""
        ...


def traverse(x: Any, acc: A, fun: Callable[[Any, A], tuple[Any, A]], /) -> tuple[Any, A]:
    """Map ``fun(child, acc) -> (new_child, acc)`` over ``x``'s children, one level deep.

    Children are visited in order (dicts by sorted key) and ``x`` is rebuilt with the
    new children. On a leaf, ``fun(x, acc)`` is called on ``x`` itself (Nx).

    Examples:
        >>> import containers as ct
        >>> ct.traverse({"b": 2, "a": 1}, 0, lambda v, n: (v * 10, n + 1))
        ({'b': 20, 'a': 10}, 2)
        >>> ct.traverse(5, [], lambda v, seen: (v, seen + [v]))
        (5, [5])

    Returns:
        ``(new_x, acc)``.

    Raises:
        TypeError: ``fun`` is not callable (the arguments are in another order, say).
    """
    if not callable(fun):
        raise not_callable_error(fun, "traverse", "fun", ACC_USAGE)
    kind = kind_of(x)
    if kind is None:
        return fun(x, acc)
    method = getattr(kind.type, "__container_traverse__", None)
    if method is not None:

        def checked(child: Any, acc: Any) -> tuple[Any, Any]:
            return fun_pair(fun(child, acc), "traverse")

        return method(x, acc, checked)  # type: ignore[no-any-return]
    kids, aux = kind.flatten(x)
    out = []
    for child in kids:
        new, acc = fun_pair(fun(child, acc), "traverse")
        out.append(new)
    return kind.unflatten(aux, out), acc


def fun_pair(result: Any, op: str, where: str = "") -> tuple[Any, Any]:
    """``result`` of a traverse ``fun`` as ``(new_child, acc)``, or the error saying what
    ``fun`` must return (``where``: the leaf's place, for recursive traversals)."""
    try:
        new, acc = result
    except (TypeError, ValueError):
        raise TypeError(
            f"{op}: fun must return a pair (new_child, acc), got {short_repr(result)}{where}. "
            f"A fun that returns only the accumulator belongs to "
            f"{op.replace('traverse', 'reduce')}."
        ) from None
    return new, acc


def reduce(x: Any, acc: A, fun: Callable[[Any, A], A], /) -> A:
    """Fold ``fun(child, acc) -> acc`` over ``x``'s children, one level deep.

    On a leaf, ``fun(x, acc)`` is called on ``x`` itself (Nx).

    Examples:
        >>> import containers as ct
        >>> ct.reduce((1, [2, 3], 4), [], lambda child, acc: acc + [child])
        [1, [2, 3], 4]

    Raises:
        TypeError: ``fun`` is not callable (the arguments are in another order, say).
    """
    if not callable(fun):
        raise not_callable_error(fun, "reduce", "fun", ACC_USAGE)
    kind = kind_of(x)
    if kind is None:
        return fun(x, acc)
    method = getattr(kind.type, "__container_reduce__", None)
    if method is not None:
        return method(x, acc, fun)  # type: ignore[no-any-return]
    for child in kind.flatten(x)[0]:
        acc = fun(child, acc)
    return acc


def isleaf(x: Any, /) -> bool:
    """Whether ``x`` is a leaf: not a node. ``None`` and empty containers are nodes.

    Examples:
        >>> import numpy as np, containers as ct
        >>> ct.isleaf(1.0), ct.isleaf(np.zeros(3)), ct.isleaf([]), ct.isleaf(None)
        (True, True, False, False)
    """
    t = type(x)
    if t in KINDS:
        return False
    return kind_of(x) is None


def functor(x: Any, /) -> tuple[Any, Callable[[Any], Any]]:
    """Split ``x`` into its children and a function that rebuilds it (Functors.jl).

    ``children`` is a dict keyed by field name for containers (declared or
    hand-written; ``{}`` for one without children), a tuple for tuples (namedtuples
    too), lists and other sequences, a dict for mappings, and ``()`` for leaves and
    ``None``. ``rebuild(new_children)`` takes the same shape or a sequence in child
    order; kept fields come from ``x``, reset fields get their defaults.

    Examples:
        >>> import containers as ct
        >>> @ct.container(children=["w"])
        ... class Scale:
        ...     w: float
        ...     label: str = "s"
        >>> kids, rebuild = ct.functor(Scale(2.0, "x"))
        >>> kids
        {'w': 2.0}
        >>> rebuild({"w": 3.0}), rebuild([4.0])
        (Scale(w=3.0, label='x'), Scale(w=4.0, label='x'))
        >>> ct.functor(7)[0]
        ()
    """
    kind = kind_of(x)
    if kind is None:
        return (), lambda new=(): x
    kids, aux = kind.flatten(x)
    n = len(kids)
    keys = kind.keys(aux, n)
    raws = [k.raw for k in keys]
    view: Any
    if isinstance(x, Mapping):
        view = dict(x)
    elif not isinstance(x, tuple) and (
        hasattr(kind.type, "__container_serialize__")  # declared or hand-written, even childless
        or (keys and all(isinstance(k, AttrKey) for k in keys))
    ):
        view = dict(zip(raws, kids))  # fields by name: declared and hand-written containers
    else:
        view = tuple(kids)

    def rebuild(new: Any) -> Any:
        if isinstance(new, Mapping):
            missing = [r for r in raws if r not in new]
            if missing:
                raise StructureError(
                    f"functor rebuild of {kind.label}: the new children lack "
                    f"{', '.join(map(repr, missing))}. Give every child: {raws!r}."
                )
            extra = [k for k in new if k not in raws]
            if extra:  # a kept field or a new key: dropping it silently would lose it
                raise StructureError(
                    f"functor rebuild of {kind.label}: the new children hold "
                    f"{', '.join(map(repr, extra))}, which "
                    f"{'is not one' if len(extra) == 1 else 'are not'} of its children "
                    f"{raws!r}. A rebuild takes exactly the children functor gave; kept and "
                    f"reset fields come from the original object."
                )
            ordered: Sequence[Any] = [new[r] for r in raws]
        else:
            ordered = list(new)
            if len(ordered) != n:
                raise StructureError(
                    f"functor rebuild of {kind.label}: expected "
                    f"{counted(n, 'child', 'children')}, got "
                    f"{len(ordered)}. Pass them in child order, or as {type(view).__name__}."
                )
        return kind.unflatten(aux, ordered)

    return view, rebuild


def children(x: Any, /) -> Any:
    """Return ``functor(x)[0]``: the immediate children of ``x``.

    Examples:
        >>> import containers as ct
        >>> ct.children({"b": 1, "a": 2}), ct.children([1, 2]), ct.children(3.0)
        ({'b': 1, 'a': 2}, (1, 2), ())
    """
    return functor(x)[0]


class Template(NamedTuple):
    """What a lazy traversal tells about a value before producing it (Nx's template):
    its key path, and its shape and dtype where it is an array (None otherwise)."""

    path: tuple[Any, ...]
    shape: tuple[int, ...] | None
    dtype: Any


def template_of(value: Any, path: tuple[Any, ...]) -> Template:
    """The template of ``value`` at ``path``: shape and dtype read from the value's
    attributes (arrays and lazy arrays alike), without reading any data."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return Template(path, None, None)
    try:
        return Template(path, tuple(int(d) for d in shape), dtype)
    except (TypeError, ValueError):
        return Template(path, None, None)


def _produce(value: Any) -> Callable[[], Any]:
    """A zero-argument function giving ``value``: a lazy leaf is read when it is called."""
    if getattr(type(value), "__containers_lazy__", False) is True:
        return value.load  # type: ignore[no-any-return]
    return lambda: value


class _LazyContainerMeta(type(Protocol)):  # type: ignore[misc]
    def __instancecheck__(cls, x: Any) -> bool:
        if hasattr(type(x), "__container_lazy_traverse__"):
            return True
        return kind_of(x) is not None


class LazyContainer(Protocol, metaclass=_LazyContainerMeta):
    """Something that can become a container lazily (Nx.LazyContainer).

    A lazy traversal hands ``fun`` a *template* of each child (``Template``: its path,
    shape and dtype) and a zero-argument *function that produces it*, instead of the
    child itself, so a caller can decide from shapes and dtypes alone what to read. It
    is provided for every declared and registered container (and for lazy trees from
    ``load(..., lazy=True)``, whose leaves are read only when produced); a foreign
    object (an h5py file, a directory of ``.npy`` files) implements it by hand and
    returns a container built from the values ``fun`` gives.

    Examples:
        >>> import numpy as np
        >>> import containers as ct
        >>> class NpyFiles:  # stands for a directory of .npy files
        ...     def __init__(self, files): self.files = files
        ...     def __container_lazy_traverse__(self, acc, fun):
        ...         out = {}
        ...         for name, a in self.files.items():
        ...             template = ct.Template((ct.DictKey(name),), a.shape, a.dtype)
        ...             out[name], acc = fun(template, lambda a=a: a, acc)
        ...         return out, acc
        >>> isinstance(NpyFiles({}), ct.LazyContainer), isinstance({"a": 1}, ct.LazyContainer)
        (True, True)
        >>> ct.lazy_traverse(NpyFiles({"w": np.ones(2)}), 0, lambda t, get, n: (get(), n + 1))
        ({'w': array([1., 1.])}, 1)
    """

    def __container_lazy_traverse__(
        self, acc: Any, fun: Callable[[Template, Callable[[], Any], Any], tuple[Any, Any]], /
    ) -> tuple[Any, Any]:
        """Call ``fun(template, produce, acc) -> (value, acc)`` per child; return the
        container of the values and the accumulator."""
        ...


LAZY_USAGE = "Pass the tree, the accumulator, then the function: {op}(x, acc, fun)"


def lazy_traverse(
    x: Any, acc: A, fun: Callable[[Template, Callable[[], Any], A], tuple[Any, A]], /
) -> tuple[Any, A]:
    """Map ``fun(template, produce, acc) -> (new_child, acc)`` over ``x``'s children.

    Nx.LazyContainer's traverse, one level deep: for each child, ``fun`` receives its
    ``Template`` (key path from ``x``, shape and dtype where it is an array) and a
    zero-argument function producing it (reading it, for a ``LazyArray``), and
    returns the new child; ``x`` is rebuilt with the new children. A class with a
    ``__container_lazy_traverse__`` method is asked itself (and may return any
    container); a leaf is handed to ``fun`` itself, with the empty path.

    Examples:
        >>> import numpy as np
        >>> import containers as ct
        >>> tree = {"w": np.ones((2, 3)), "n": 4}
        >>> def shapes(template, produce, acc):
        ...     return template.shape, acc + [ct.keystr(template.path)]
        >>> ct.lazy_traverse(tree, [], shapes)
        ({'w': (2, 3), 'n': None}, ["['n']", "['w']"])

    Returns:
        ``(new_x, acc)``.

    Raises:
        TypeError: ``fun`` is not callable, or does not return a pair.
    """
    if not callable(fun):
        raise not_callable_error(fun, "lazy_traverse", "fun", LAZY_USAGE)
    method = getattr(type(x), "__container_lazy_traverse__", None)
    if method is not None:
        return method(x, acc, _paired(fun))  # type: ignore[no-any-return]
    kind = kind_of(x)
    if kind is None:
        return fun_pair(fun(template_of(x, ()), _produce(x), acc), "lazy_traverse")
    kids, aux = kind.flatten(x)
    keys = kind.keys(aux, len(kids))
    out = []
    for key, child in zip(keys, kids):
        new, acc = fun_pair(fun(template_of(child, (key,)), _produce(child), acc), "lazy_traverse")
        out.append(new)
    return kind.unflatten(aux, out), acc


def _paired(fun: Callable[..., Any]) -> Callable[..., tuple[Any, Any]]:
    def checked(template: Template, produce: Callable[[], Any], acc: Any) -> tuple[Any, Any]:
        return fun_pair(fun(template, produce, acc), "lazy_traverse")

    return checked
