"""How notebooks show trees: ``display`` (a tree that IPython shows as the HTML view and
terminals as ``pformat``), ``notebook`` (every container class shown as the view) and
the IPython extension's entry points (``%load_ext containers``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from containers._display import pformat
from containers._errors import StructureError
from containers._html import check_options, html
from containers._registry import REGISTRY, NodeKind

__all__ = ["Display", "display", "load_ipython_extension", "notebook", "unload_ipython_extension"]


class Display:
    """A tree shown by notebooks as ``html(tree)`` and by terminals as ``pformat``."""

    __slots__ = ("options", "tree")

    def __init__(self, tree: Any, options: dict[str, Any]) -> None:
        self.tree = tree
        self.options = options

    def _repr_html_(self) -> str:
        return html(self.tree, **self.options)

    def __repr__(self) -> str:
        try:
            return pformat(self.tree)
        except StructureError as err:  # a reference cycle, which the HTML view marks
            return f"<a tree pformat cannot print: {err}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))


def display(
    tree: Any, /, *, expand_depth: int = 2, max_nodes: int = 1000, stats: bool = True
) -> Display:
    """Wrap ``tree`` so that a notebook shows it as the HTML view.

    The object's ``_repr_html_()`` is ``html(tree, ...)``, so it shows when it ends a
    cell (or through ``IPython.display.display``); its ``repr`` is ``pformat(tree)``,
    so a terminal, a log or a doctest shows the text view. Nothing is copied: the view
    is rendered when shown.

    Examples:
        >>> import numpy as np, containers as ct
        >>> shown = ct.display({"w": np.zeros(3, "float32"), "step": 1})
        >>> shown
        {'w': float32[3], 'step': 1}  # 3 params, 12 B
        >>> "float32[3]" in shown._repr_html_()
        True

    Args:
        tree: The tree to show.
        expand_depth: As for ``html``.
        max_nodes: As for ``html``.
        stats: As for ``html``.

    Returns:
        An object with ``_repr_html_``, ``_repr_pretty_`` and a ``pformat`` repr.
    """
    check_options("display", expand_depth, max_nodes, stats)
    return Display(tree, {"expand_depth": expand_depth, "max_nodes": max_nodes, "stats": stats})


_enabled: dict[int, Any] = {}  # id(formatter) -> the observer that registers types in it


def _container_html(obj: Any) -> str:
    return html(obj)


def notebook(enable: bool = True, /, *, ipython: Any = None) -> None:
    """Make IPython show every container as the HTML view, present and future classes.

    Registers ``html`` with IPython's HTML display formatter for each class declared
    with ``@container``, ``register`` or ``register_node`` (classes declared later
    too), so that a container ending a cell shows as the view; plain terminals keep the
    text repr. Nothing is added to the classes. ``notebook(False)`` undoes it.
    ``%load_ext containers`` does the same. Outside IPython it does nothing.

    Examples:
        >>> import containers as ct
        >>> ct.notebook()  # outside IPython: nothing to do

    Args:
        enable: True to register the view, False to remove it.
        ipython: The IPython shell (default: the running one).
    """
    if ipython is None:
        try:
            from IPython.core.getipython import get_ipython
        except ImportError:
            return
        ipython = get_ipython()
        if ipython is None:
            return
    formatter = ipython.display_formatter.formatters["text/html"]
    old = _enabled.pop(id(formatter), None)
    if old is not None:
        REGISTRY.remove_observer(old[0])
        for t in old[1]:
            formatter.type_printers.pop(t, None)
    if not enable:
        return
    types: list[type] = []

    def register(kind: NodeKind) -> None:
        if kind.type not in (list, tuple, dict, deque, type(None)):
            formatter.for_type(kind.type, _container_html)
            types.append(kind.type)

    REGISTRY.on_register(register)
    _enabled[id(formatter)] = (register, types)


def load_ipython_extension(ipython: Any) -> None:
    """Load ``containers`` as an IPython extension: ``%load_ext containers``.

    IPython calls it with its shell when a notebook or an IPython session runs
    ``%load_ext containers``; it does what ``notebook(ipython=ipython)`` does: every
    container class, present and future, is shown as the HTML view. Loading it twice
    is harmless.

    Examples:
        >>> import containers as ct
        >>> ct.load_ipython_extension  # doctest: +ELLIPSIS
        <function load_ipython_extension at ...>

    Args:
        ipython: The IPython shell loading the extension.
    """
    notebook(True, ipython=ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Unload the extension: ``%unload_ext containers``.

    Does what ``notebook(False, ipython=ipython)`` does: containers are shown by their
    text repr again.

    Examples:
        >>> import containers as ct
        >>> ct.unload_ipython_extension  # doctest: +ELLIPSIS
        <function unload_ipython_extension at ...>

    Args:
        ipython: The IPython shell unloading the extension.
    """
    notebook(False, ipython=ipython)
