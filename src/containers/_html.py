"""Display: the interactive HTML view of a tree.

A client of the engine through ``_display.outline`` (one walk: items, keys, kept
values, totals, sharing and cycles); it never walks a tree itself and never changes
one. The HTML is self-contained (inline CSS, an inline click handler, images as data
URIs): no network, no script or font from elsewhere. Every user string is escaped.
The page around the view and its pictures are in ``_html_page``; how notebooks show
it, in ``_notebook``.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from containers._display import Item, outline, paths, view_repr
from containers._errors import short_repr, type_name
from containers._html_page import _PREFIX, _cut, _esc, _heatmap, _histogram, _ids, _num, _page
from containers._paths import AttrKey
from containers._registry import NodeKind
from containers._summary import Stats, format_bytes, format_count, stats

__all__ = ["MAX_NESTING", "STATS_BUDGET", "STATS_LIMIT", "html", "rows_html", "structure_html"]


#: Leaves are shown with at most this many characters of their repr (the whole, up to
#: ``_TITLE_WIDTH``, is the row's tooltip).
_TEXT_WIDTH = 120
_TITLE_WIDTH = 1000
#: Arrays up to this many elements get statistics; larger ones dtype and shape only.
STATS_LIMIT = 1 << 24
#: Statistics of one view read at most this many elements in all (about a second):
#: later arrays show dtype and shape only, and say why (a 7B model's 4096x4096
#: matrices each pass STATS_LIMIT, and would take tens of seconds together).
STATS_BUDGET = 1 << 26
#: 1-D arrays up to this size get a histogram; 2-D arrays up to this side a heatmap.
_HISTOGRAM_LIMIT = 1 << 20
_HEATMAP_SIDE = 128
#: Nodes with more children than this are folded, whatever their depth.
_FOLD_WIDE = 64
#: Nodes this deep show no children: each level nests two elements, and browsers stop
#: nesting past a few hundred (Chromium's parser at 512), which would scramble the view.
MAX_NESTING = 100
#: Paths longer than this (a key of a huge string) are not put on every row below it:
#: the row's path is not copyable, and the page stays small.
_PATH_LIMIT = 2000


# --- the tree ---------------------------------------------------------------------------


def _key_text(parent: NodeKind | None, item: Item) -> str:
    key = item.key
    if key is None or parent is None:
        return ""
    if isinstance(key, AttrKey):
        return key.name
    if parent.type in (list, tuple, deque):
        return f"[{key.raw}]"
    return _cut(view_repr(key.raw), 60)


def _type_text(kind: NodeKind, aux: Any, n: int) -> str:
    if kind.type.__module__ in ("builtins", "collections"):
        return kind.type.__name__  # list, dict, deque, OrderedDict, defaultdict
    return type_name(kind.type)


def _shown(items: list[Item], max_nodes: int) -> list[int]:
    """How many children of each node are shown: breadth first, until ``max_nodes``
    items are, so that the top of a large tree is all there and its depths are cut."""
    shown = [0] * len(items)
    budget = max_nodes - 1
    queue = deque([0])
    while queue and budget > 0:
        i = queue.popleft()
        kids = items[i].kids
        take = 0 if items[i].depth >= MAX_NESTING else min(len(kids), budget)
        shown[i] = take
        budget -= take
        queue.extend(k for k in kids[:take] if items[k].kind is not None)
    return shown


class _Renderer:
    def __init__(self, items: list[Item], *, expand_depth: int, max_nodes: int, stats: bool):
        self.items = items
        self.expand_depth = expand_depth
        self.stats = stats
        self.shown = _shown(items, max_nodes)
        self.budget = STATS_BUDGET  # elements statistics may still read
        rendered = [0]
        for i, n in enumerate(self.shown):
            rendered.extend(items[i].kids[:n])
        self.visible = [False] * len(items)
        for i in rendered:
            self.visible[i] = True
        targets = [it.same if it.same is not None else it.cycle for it in items]
        self.path_of = paths(
            items, itertools.chain(rendered, (t for t in targets if t is not None))
        )
        self.uid = f"ct-{_PREFIX}-{next(_ids)}-"
        # the items a mark points at get an id, so that the mark can open and show them
        self.targets = {t for t in targets if t is not None}

    def path(self, i: int) -> str:
        return self.path_of[i]

    def key(self, i: int) -> str:
        item = self.items[i]
        parent = self.items[item.parent].kind if item.parent >= 0 else None
        text = _key_text(parent, item)
        path = self.path(i)
        label = text if text else "(root)"
        if len(path) > _PATH_LIMIT:
            return (
                f'<span class="ct-key" title="{_esc(_cut(path, _TITLE_WIDTH))} (a path of '
                f'{len(path):,} characters, too long to copy)">{_esc(label)}</span> '
            )
        return (
            f'<span class="ct-key" data-path="{_esc(path)}" title="{_esc(path or "the root")}'
            f' (click to copy the path)">{_esc(label)}</span> '
        )

    def anchor(self, i: int) -> str:
        return f' id="{self.uid}{i}"' if i in self.targets else ""

    def size(self, item: Item) -> str:
        if not item.arrays:
            return ""
        return (
            f' <span class="ct-size">{format_count(item.params)} \u00b7 '
            f"{format_bytes(item.nbytes)}</span>"
        )

    def leaf(self, i: int) -> str:
        item = self.items[i]
        head = f'<div class="ct-row"{self.anchor(i)}>{self.key(i)}'
        if item.same is not None or item.cycle is not None:
            target = item.same if item.same is not None else item.cycle
            assert target is not None
            where = _cut(self.path(target), _TEXT_WIDTH) or "the root"
            what = "same as" if item.same is not None else "cycle: back to"
            css = "ct-ref" if item.same is not None else "ct-ref ct-cycle"
            return (
                f'{head}<span class="{css}" data-goto="{self.uid}{target}" '
                f'title="the same object is shown there">{what} {_esc(where)}</span></div>'
            )
        if item.info is not None:
            return f"{head}{self.array(item)}</div>"
        text = "None" if item.value is None else view_repr(item.value)
        return (
            f'{head}<span class="ct-val" title="{_esc(_cut(text, _TITLE_WIDTH))}">'
            f"{_esc(_cut(text, _TEXT_WIDTH))}</span></div>"
        )

    def array(self, item: Item) -> str:
        info = item.info
        assert info is not None
        out = [f'<span class="ct-arr">{_esc(info.text)}</span>']
        s: Stats | None = None
        spent = False
        if self.stats and info.size <= STATS_LIMIT and not info.lazy:
            if info.size <= self.budget:
                s = stats(item.value, info, limit=STATS_LIMIT, plot_limit=_HISTOGRAM_LIMIT)
                self.budget -= info.size if s is not None else 0
            else:
                spent = True
        if spent:
            out.append(
                f'<span class="ct-dim" title="statistics stop after {STATS_BUDGET:,} elements '
                f'per view, to render in about a second; ct.html of a subtree shows them">'
                f" (no statistics: the view's budget is spent)</span>"
            )
        if s is not None and info.size == 1 and not (s.nan or s.inf):
            out.append(f'<span class="ct-dim"> = {_num(s.mean)}</span>')
        elif s is not None:
            out.append(
                f'<span class="ct-dim"> \u03bc={_num(s.mean)} \u03c3={_num(s.std)} '
                f"[{_num(s.min)}, {_num(s.max)}]</span>"
            )
            if s.nan:
                out.append(f' <span class="ct-bad">{s.nan:,} NaN</span>')
            if s.inf:
                out.append(f' <span class="ct-bad">{s.inf:,} inf</span>')
            if s.values is not None and not (s.nan or s.inf) and s.max > s.min:
                if len(info.shape) == 2 and 1 < max(info.shape) <= _HEATMAP_SIDE:
                    out.append(_heatmap(s.values.reshape(info.shape)))
                elif len(info.shape) in (1, 2) and info.size > 1:
                    out.append(_histogram(s.values))
        out.append(f' <span class="ct-size">{format_bytes(info.nbytes)}</span>')
        return "".join(out)

    def preview(self, item: Item) -> str:
        parts = []
        kind = item.kind
        assert kind is not None
        for k in item.kids[:8]:
            kid = self.items[k]
            label = _key_text(kind, kid)
            label = (
                f"{label}="
                if isinstance(kid.key, AttrKey)
                else f"{label}: "
                if (kind.type not in (list, tuple, deque))
                else ""
            )
            if kid.kind is not None:
                value = _type_text(kid.kind, kid.aux, len(kid.kids)) + "(\u2026)"
            elif kid.same is not None:
                value = f"same as {self.path(kid.same) or 'the root'}"
            elif kid.cycle is not None:
                value = f"cycle: back to {self.path(kid.cycle) or 'the root'}"
            elif kid.info is not None:
                value = kid.info.text
            else:
                value = _cut(view_repr(kid.value), 24)
            parts.append(label + value)
        if len(item.kids) > 8:
            parts.append("\u2026")
        return f' <span class="ct-preview">{_esc(_cut(", ".join(parts), 100))}</span>'

    def opening(self, i: int) -> str:
        item = self.items[i]
        kind = item.kind
        assert kind is not None
        n = len(item.kids)
        is_open = i == 0 or (item.depth < self.expand_depth and n <= _FOLD_WIDE)
        count = f'<span class="ct-dim">({n})</span>' if kind.spec is None else ""
        return (
            f"<details{' open' if is_open else ''}{self.anchor(i)}><summary>{self.key(i)}"
            f'<span class="ct-type">{_esc(_type_text(kind, item.aux, n))}</span>{count}'
            f'{self.size(item)}{self.preview(item) if n else ""}</summary><div class="ct-kids">'
        )

    def fields(self, item: Item) -> str:
        """The kept fields (part of the structure) and the reset ones (not in the tree:
        a rebuilt instance gets their defaults), told apart."""
        spec = item.kind.spec if item.kind is not None else None
        if spec is None:
            return ""
        out = []
        for name, value in zip(spec.keep, item.aux):
            text = view_repr(value)
            out.append(
                f'<div class="ct-row ct-kept"><span class="ct-key">{_esc(name)}</span> '
                f'<span class="ct-badge" title="kept: part of the structure, carried by '
                f'fmap and saved">kept</span> <span class="ct-val" '
                f'title="{_esc(_cut(text, _TITLE_WIDTH))}">{_esc(_cut(text, _TEXT_WIDTH))}'
                f"</span></div>"
            )
        for name in spec.reset:
            try:
                text = view_repr(getattr(item.value, name))
            except Exception:  # an unset or failing attribute
                text = "(unset)"
            out.append(
                f'<div class="ct-row ct-reset"><span class="ct-key">{_esc(name)}</span> '
                f'<span class="ct-badge" title="reset: not in the tree; a rebuilt instance '
                f'gets its default">reset</span> <span class="ct-val">'
                f"{_esc(_cut(text, _TEXT_WIDTH))}</span></div>"
            )
        return "".join(out)

    def more(self, item: Item, shown: int) -> str:
        rest = [self.items[k] for k in item.kids[shown:]]
        params = sum(r.params for r in rest)
        nbytes = sum(r.nbytes for r in rest)
        size = f" ({format_count(params)}, {format_bytes(nbytes)})" if params or nbytes else ""
        how = (
            f"nested deeper than {MAX_NESTING} levels, which browsers cannot lay out: "
            f"ct.html(the subtree at this path) shows them"
            if item.depth >= MAX_NESTING
            else "ct.html(tree, max_nodes=...) shows more"
        )
        return (
            f'<div class="ct-row ct-more">\u2026 {len(rest):,} more not shown{size}: {how}</div>'
        )

    def render(self) -> str:
        items, shown = self.items, self.shown
        out: list[str] = []
        stack: list[int] = []  # open nodes

        def close(i: int) -> None:
            while stack and items[stack[-1]].end <= i:
                j = stack.pop()
                if shown[j] < len(items[j].kids):
                    out.append(self.more(items[j], shown[j]))
                out.append(self.fields(items[j]))
                out.append("</div></details>")

        i = 0
        while i < len(items):
            close(i)
            item = items[i]
            if not self.visible[i]:  # cut: counted by its parent's "more" row
                i = item.end
                continue
            if item.kind is None:
                out.append(self.leaf(i))
                i += 1
                continue
            out.append(self.opening(i))
            stack.append(i)
            i += 1
        close(len(items))
        return "".join(out)


def check_options(op: str, expand_depth: Any, max_nodes: Any, stats: Any) -> None:
    """Refuse options of the wrong type, which would fail deep in the renderer or (a
    string for ``stats``) be silently true."""
    for name, value, how in (
        ("expand_depth", expand_depth, "0 opens the root only"),
        ("max_nodes", max_nodes, "the most rows to render; the default is 1000"),
    ):
        if type(value) is not int:
            raise TypeError(f"{op}: {name}= must be an int ({how}), got {short_repr(value)}.")
        if value < 0:
            raise ValueError(f"{op}: {name}= must be >= 0 ({how}), got {value}.")
    if stats not in (True, False):
        raise TypeError(f"{op}: stats= must be True or False, got {short_repr(stats)}.")


def html(tree: Any, /, *, expand_depth: int = 2, max_nodes: int = 1000, stats: bool = True) -> str:
    """Render ``tree`` as a self-contained, interactive HTML view (a string).

    Every node folds (native ``<details>``; open down to ``expand_depth``, wide nodes
    folded); its summary line gives its type, its number of children, its parameters
    (array elements) and bytes, and a preview of its children. Each array shows
    ``dtype[shape]`` and, for numpy, jax and torch arrays of real numbers, its mean,
    standard deviation, min and max of finite values, NaN and inf counts, and a tiny
    histogram (1-D) or heatmap (2-D up to 128x128); a leaf without data (a lazy leaf)
    shows its dtype and shape only. Kept fields and reset fields are marked apart. A
    shared object is shown once, then as "same as PATH" (a click opens the original),
    a cycle as "cycle: back to PATH" instead of an error. A click on a key copies its
    ``keystr`` path. Past ``max_nodes`` rows the deepest parts are cut, with a count
    of what is not shown. No network, no external script or font; all text escaped.

    Examples:
        >>> import numpy as np, containers as ct
        >>> page = ct.html({"w": np.arange(6.0).reshape(2, 3), "<b>": "<script>"})
        >>> page.startswith('<div class="ct-view"'), "<script>" in page
        (True, False)
        >>> "float64[2,3]" in page, "6 params" in page, "&lt;script&gt;" in page
        (True, True, True)

    Args:
        tree: The tree to show (any tree ``pformat`` takes; cycles are marked).
        expand_depth: Nodes shallower than this start open (the root always does).
        max_nodes: The most rows rendered; the rest is counted, not shown.
        stats: Compute array statistics and plots (False: dtype and shape only).

    Returns:
        An HTML fragment (a ``<div>``) that works in notebooks and in any page.
    """
    check_options("html", expand_depth, max_nodes, stats)
    items = outline(tree, op="html", cycles=True)
    return _page(
        _Renderer(items, expand_depth=expand_depth, max_nodes=max_nodes, stats=stats).render()
    )


# --- other objects' views: Structure, inspect's FileInfo ----------------------------------


class _Slot:
    """A leaf position of a Structure, shown as ``*``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "*"


def structure_html(structure: Any) -> str:
    """The view of a ``Structure``: its tree with ``*`` at each leaf position."""
    try:  # one slot per leaf: a slot met twice would show as "same as"
        tree = structure.unflatten([_Slot() for _ in range(structure.num_leaves)])
    except Exception:  # a node type whose rebuild refuses placeholders: the text view
        return _page(f"<pre>{_esc(repr(structure))}</pre>")
    return html(tree, stats=False)


def rows_html(
    title: str, rows: Sequence[Any], path_of: Callable[[int], str], *, max_nodes: int = 1000
) -> str:
    """The view of ``inspect``'s rows (pre-order, with depth, key and text); ``path_of(i)``
    is row ``i``'s keystr path."""
    out = [f'<div class="ct-row ct-dim">{_esc(title)}</div>']
    depth_open = 0
    for j, row in enumerate(rows[:max_nodes]):
        while depth_open > row.depth:
            out.append("</div></details>")
            depth_open -= 1
        key = row.key if row.depth else "(root)"
        nxt = rows[j + 1] if j + 1 < len(rows) and j + 1 < max_nodes else None
        path = _esc(path_of(j) if row.depth else "")
        head = f'<span class="ct-key" data-path="{path}">{_esc(key)}</span> {_esc(row.text)}'
        if nxt is not None and nxt.depth > row.depth:
            is_open = " open" if row.depth < 2 else ""
            out.append(f'<details{is_open}><summary>{head}</summary><div class="ct-kids">')
            depth_open += 1
        else:
            out.append(f'<div class="ct-row">{head}</div>')
    out.append("</div></details>" * depth_open)
    if len(rows) > max_nodes:
        out.append(f'<div class="ct-row ct-more">\u2026 {len(rows) - max_nodes:,} more rows</div>')
    return _page("".join(out))
