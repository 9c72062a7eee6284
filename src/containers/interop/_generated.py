"""Generated adapter functions: one class's flatten/unflatten in another library's shape.

This stage builds, for a declared container and a library, straight-line functions
that return what that registry expects in one call (JAX's and torch's pairs, optree's
triple with path entries, the rebuild in each library's argument order), compiled with
one ``exec`` per class and library and registered in ``linecache``. The closures in
``_jax``, ``_optree`` and ``_torch`` and ``plain_unflatten`` are their plain twins
(the closures are also the fallback when an attribute is unset, which raises the
declaration's error); tests check that both agree. A frozen class's generated rebuild
is itself the plain twin of ``_speedups.Rebuild``, registered instead where the
accelerator is built. It never traverses a tree and never imports jax, optree or torch.
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable, Sequence
from typing import Any

from containers._codegen import construct_lines, field_sources, setattr_stores, unpack_lines
from containers._codegen import plain_unflatten as _plain_unflatten
from containers._engine import _fast
from containers._errors import type_name
from containers._spec import ContainerSpec
from containers.interop._common import SIMPLE_KEPT

__all__ = [
    "adapter_source",
    "compile_adapters",
    "compiled_rebuild_fields",
    "plain_unflatten",
    "rebuild_shadow",
]

_counter = itertools.count()


def _tup(items: Sequence[str]) -> str:
    if len(items) == 1:
        return f"({items[0]},)"
    return f"({', '.join(items)})"


def rebuild_shadow(spec: ContainerSpec) -> type | None:
    """A stand-in class whose instances become ``spec.cls`` ones by ``__class__`` assignment.

    Without the accelerator (``compiled_rebuild_fields``), a rebuild of a class with
    its own ``__setattr__`` (frozen dataclasses and attrs classes) stores the fields
    into an instance of this plain class, where each store
    is CPython's specialized attribute store, then assigns ``__class__``: that is
    faster than the core rebuild's ``__dict__`` lookup and writes, and than an
    ``object.__setattr__`` call per field (benchmarks/interop.py, ``tree_unflatten``).
    Same layout as ``spec.cls``: ``object`` as base, and ``spec.cls``'s own
    ``__slots__`` if it has them; CPython checks the layouts on assignment, and a probe
    checks that every field reads back as stored. ``None`` where that fails (slotted
    bases, C bases, and on CPython 3.11 a ``__weakref__`` slot, which attrs gives its
    slotted classes), for namedtuples, for classes with a ``__del__`` (the probe would
    reach it) and for attrs factories that take ``self``: their rebuild is the core's.
    """
    cls = spec.cls
    if (
        spec.flavor == "namedtuple"
        or hasattr(cls, "__del__")
        or any(spec.defaults[n].how == "factory_self" for n in spec.reset)
    ):
        return None
    namespace: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
    if "__slots__" in cls.__dict__:
        namespace["__slots__"] = cls.__dict__["__slots__"]
    try:
        # type(), not a subclass of cls: no __init_subclass__ or metaclass hook runs.
        shadow = type(cls.__name__, (object,), namespace)
        probe = shadow()
        markers = {n: object() for n in spec.fields}
        for name, marker in markers.items():
            setattr(probe, name, marker)
        probe.__class__ = cls
        if any(object.__getattribute__(probe, n) is not m for n, m in markers.items()):
            return None  # pragma: no cover - CPython lays equal slot lists out equally
    except (TypeError, AttributeError):
        return None
    return shadow


def _direct_construct(spec: ContainerSpec, values: dict[str, str], g: dict[str, Any]) -> list[str]:
    """Lines rebuilding an instance by plain attribute stores, or ``[]`` if the class
    does not allow them.

    A class without a ``__setattr__`` of its own (``frozen=False``) is built by
    ``object.__new__`` and stores into it, which is what ``object.__setattr__`` does;
    another (frozen) class through ``rebuild_shadow``. Reset fields get their defaults.
    """
    if spec.flavor == "namedtuple" or any(
        spec.defaults[n].how == "factory_self" for n in spec.reset
    ):
        return []
    if getattr(spec.cls, "__setattr__", None) is object.__setattr__:
        lines, switch = ["_i = _ct_new(_ct_cls)"], []
    else:
        shadow = rebuild_shadow(spec)
        if shadow is None:
            return []
        g["_ct_shadow"] = shadow
        lines, switch = ["_i = _ct_shadow()"], ["_i.__class__ = _ct_cls"]
    for name in spec.reset:
        default = spec.defaults[name]
        if default.how == "value":
            g[f"_ct_default_{name}"] = default.value
            values[name] = f"_ct_default_{name}"
        else:
            g[f"_ct_factory_{name}"] = default.value
            values[name] = f"_ct_factory_{name}()"
    lines += [f"_i.{name} = {values[name]}" for name in spec.fields]
    return [*lines, *switch, "return _i"]


def compiled_rebuild_fields(spec: ContainerSpec) -> tuple[tuple[str, str, Any], ...] | None:
    """The fields of ``_speedups.Rebuild`` for a frozen class, or ``None`` where it would
    not build what the generated rebuild builds.

    ``Rebuild`` stores each field with ``object.__setattr__``'s C function: on 3.11+
    into the instance's inline values, with no dict and no ``__class__`` switch, and it
    is registered itself, so a rebuild runs no Python frame (benchmarks/interop.py,
    ``tree_unflatten``: frozen classes took 1.1-1.25x a hand registration's
    ``cls(*children)`` through ``rebuild_shadow``). That store equals the generated one
    where ``setattr_stores`` says so and ``object.__new__(cls)`` is allowed (a probe).
    Not for classes without a ``__setattr__`` of their own (already as fast as a hand
    registration), namedtuples, or classes with a ``__del__`` (the probe would reach
    it).
    """
    cls = spec.cls
    if (
        spec.flavor == "namedtuple"
        or getattr(cls, "__setattr__", None) is object.__setattr__
        or hasattr(cls, "__del__")
    ):
        return None
    if not setattr_stores(spec):
        return None
    try:
        object.__new__(cls)
    except TypeError:
        return None
    return field_sources(spec)


def plain_unflatten(spec: ContainerSpec) -> Callable[[Any, Sequence[Any]], Any]:
    """The plain twin of the generated ``unflatten(kept, children)``: a getattr loop."""

    def unflatten(kept: Any, children: Sequence[Any]) -> Any:
        return _plain_unflatten(spec, () if kept is None else kept, children)

    return unflatten


def adapter_source(
    spec: ContainerSpec,
    library: str,
    *,
    kept_type: type | None,
    keys: Sequence[Any] = (),
) -> tuple[str, dict[str, Any]]:
    """Source and globals of one class's adapter functions for ``library``.

    - every library: ``flatten(x)``: ``(children, aux)``, or for optree
      ``(children, aux, entries)`` with the field names as entries; ``aux`` is the
      kept values as ``_common.kept_aux`` gives them. An unset attribute
      goes to ``_ct_slow(x)``, the plain twin, which raises the declaration's error.
    - jax and torch: ``flatten_with_keys(x)``: ``((key, child), ...), aux`` with the
      given library key objects (a list for torch).
    - every library: ``ct.unflatten``'s rebuild (no ``__init__``, reset fields get
      defaults), as ``unflatten(aux, children)`` for jax and optree and
      ``unflatten(children, context)`` for torch; through ``rebuild_shadow`` where the
      class allows it.
    """
    g: dict[str, Any] = {
        "_ct_cls": spec.cls,
        "_ct_new": object.__new__,
        "_ct_kept": kept_type,
        "_ct_simple": SIMPLE_KEPT,
    }
    kids = [f"x.{n}" for n in spec.children]
    kept = "()"
    if spec.keep:  # kept_aux, inlined
        simple = " and ".join(f"type(_k[{i}]) in _ct_simple" for i in range(len(spec.keep)))
        kept = f"(_k if {simple} else _ct_kept(_k))"
    out: list[str] = []

    def emit(header: str, body: list[str]) -> None:
        out.append(header)
        out.extend(f"    {line}" for line in body)
        out.append("")

    def guarded(result: str, slow: str) -> list[str]:
        read_kept = [f"    _k = {_tup([f'x.{n}' for n in spec.keep])}"] if spec.keep else []
        return [
            "try:",
            *read_kept,
            f"    return {result}",
            "except AttributeError:",
            f"    return {slow}(x)",
        ]

    if library == "optree":
        g["_ct_entries"] = spec.children
        emit("def flatten(x):", guarded(f"{_tup(kids)}, {kept}, _ct_entries", "_ct_slow"))
    else:
        emit("def flatten(x):", guarded(f"{_tup(kids)}, {kept}", "_ct_slow"))
        for i, key in enumerate(keys):
            g[f"_ct_k{i}"] = key
        pairs = [f"(_ct_k{i}, {c})" for i, c in enumerate(kids)]
        keyed = f"[{', '.join(pairs)}]" if library == "torch" else _tup(pairs)
        emit("def flatten_with_keys(x):", guarded(f"{keyed}, {kept}", "_ct_slow_keys"))
    values = {n: f"_c{i}" for i, n in enumerate(spec.children)}
    # kept[i], not unpacking: a KeptValues is a tuple subclass, which unpacks through
    # an iterator (benchmarks/interop.py, tree_unflatten)
    values.update({n: f"kept[{i}]" for i, n in enumerate(spec.keep)})
    construct = _direct_construct(spec, dict(values), g) or construct_lines(spec, values, g)
    header = "unflatten(children, kept)" if library == "torch" else "unflatten(kept, children)"
    emit(f"def {header}:", unpack_lines(spec.children, "children") + construct)
    if spec.children:  # _speedups.Rebuild's unpacking of anything but a list or tuple
        unpacked = _tup([f"_c{i}" for i in range(len(spec.children))])
        emit(
            "def _ct_unpack(children):",
            [*unpack_lines(spec.children, "children"), f"return {unpacked}"],
        )
    return "\n".join(out), g


def compile_adapters(
    spec: ContainerSpec,
    library: str,
    *,
    kept_type: type | None,
    slow: Callable[[Any], Any],
    slow_keys: Callable[[Any], Any] | None = None,
    keys: Sequence[Any] = (),
) -> dict[str, Any]:
    """Compile ``adapter_source`` with one ``exec``; returns its functions by name.

    ``unflatten`` is a ``_speedups.Rebuild`` where ``compiled_rebuild_fields`` allows
    it and the accelerator is built (``_engine._fast._speedups``); the generated one is its
    plain twin.
    """
    source, g = adapter_source(spec, library, kept_type=kept_type, keys=keys)
    g["_ct_slow"] = slow
    g["_ct_slow_keys"] = slow_keys
    filename = f"<containers generated {library} adapter {spec.cls.__module__}."
    filename += f"{type_name(spec.cls)} #{next(_counter)}>"
    exec(compile(source, filename, "exec"), g)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    names = ("flatten", "flatten_with_keys", "unflatten")
    functions = {n: g[n] for n in names if n in g}
    speedups = _fast._speedups
    fields = None if speedups is None else compiled_rebuild_fields(spec)
    if speedups is not None and fields is not None:
        functions["unflatten"] = speedups.Rebuild(
            spec.cls, fields, g.get("_ct_unpack"), library != "torch"
        )
    return functions
