"""Generated adapter functions: one class's flatten/unflatten in another library's shape.

This stage builds, for a declared container and a library, straight-line functions
that return what that registry expects in one call (JAX's and torch's pairs, optree's
triple with path entries, torch's ``unflatten(children, context)``), compiled with one
``exec`` per class and library and registered in ``linecache``. The closures in
``_jax``, ``_optree`` and ``_torch`` are their plain twins (and their fallback when
an attribute is unset, which raises the declaration's error); tests check that both
agree. It never traverses a tree and never imports jax, optree or torch.
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable, Sequence
from typing import Any

from containers._codegen import _construct, _unpack
from containers._errors import type_name
from containers._spec import ContainerSpec

__all__ = ["adapter_source", "compile_adapters"]

_counter = itertools.count()


def _tup(items: Sequence[str]) -> str:
    if len(items) == 1:
        return f"({items[0]},)"
    return f"({', '.join(items)})"


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
      kept values as ``kept_type`` (``()`` without kept fields). An unset attribute
      goes to ``_ct_slow(x)``, the plain twin, which raises the declaration's error.
    - jax and torch: ``flatten_with_keys(x)``: ``((key, child), ...), aux`` with the
      given library key objects (a list for torch).
    - torch: ``unflatten(children, kept)``: ``ct.unflatten``'s rebuild (no
      ``__init__``, reset fields get defaults) in torch's argument order.
    """
    g: dict[str, Any] = {"_ct_cls": spec.cls, "_ct_new": object.__new__, "_ct_kept": kept_type}
    kids = [f"x.{n}" for n in spec.children]
    kept = "()" if not spec.keep else f"_ct_kept({_tup([f'x.{n}' for n in spec.keep])})"
    out: list[str] = []

    def emit(header: str, body: list[str]) -> None:
        out.append(header)
        out.extend(f"    {line}" for line in body)
        out.append("")

    def guarded(result: str, slow: str) -> list[str]:
        return [
            "try:",
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
    if library == "torch":
        values = {n: f"_c{i}" for i, n in enumerate(spec.children)}
        values.update({n: f"kept[{i}]" for i, n in enumerate(spec.keep)})
        emit(
            "def unflatten(children, kept):",
            _unpack(spec.children, "children") + _construct(spec, values, g),
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
    """Compile ``adapter_source`` with one ``exec``; returns its functions by name."""
    source, g = adapter_source(spec, library, kept_type=kept_type, keys=keys)
    g["_ct_slow"] = slow
    g["_ct_slow_keys"] = slow_keys
    filename = f"<containers generated {library} adapter {spec.cls.__module__}."
    filename += f"{type_name(spec.cls)} #{next(_counter)}>"
    exec(compile(source, filename, "exec"), g)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    names = ("flatten", "flatten_with_keys", "unflatten")
    return {n: g[n] for n in names if n in g}
