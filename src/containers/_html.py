"""Display: the interactive HTML view of a tree, and how notebooks show it.

A client of the engine through ``_display.outline`` (one walk: items, keys, kept
values, totals, sharing and cycles); it never walks a tree itself and never changes
one. The HTML is self-contained (inline CSS, an inline click handler, images as data
URIs): no network, no script or font from elsewhere. Every user string is escaped.
"""

from __future__ import annotations

import base64
import html as _html
import itertools
import math
import secrets
import struct
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from containers._display import Item, outline, paths, pformat, view_repr
from containers._errors import StructureError, short_repr, type_name
from containers._paths import AttrKey
from containers._registry import REGISTRY, NodeKind
from containers._summary import Stats, format_bytes, format_count, stats

__all__ = ["Display", "display", "html", "load_ipython_extension", "notebook"]

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

#: Ids of views and rows: unique in a page that holds outputs of several kernels' runs.
_PREFIX = secrets.token_hex(3)
_ids = itertools.count()


def _esc(text: str) -> str:
    return _html.escape(text, quote=True)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def _num(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if x == 0:
        return "0"
    return f"{x:.4g}"


# --- small pictures: a histogram as SVG, a heatmap as a PNG data URI ---------------------


def _histogram(values: Any, bins: int = 24) -> str:
    import numpy as np

    lo, hi = float(values.min()), float(values.max())
    # np.histogram costs ~80 us per call on small arrays; binning by hand, ~10
    where = ((values - lo) * (bins / ((hi - lo) or 1.0))).astype(np.intp)
    counts = np.bincount(np.minimum(where, bins - 1), minlength=bins)
    top = max(int(counts.max()), 1)
    w, h = 3, 14
    bars = "".join(
        f"M{i * w},{h}v-{max(c / top * h, 0.5 if c else 0):.1f}h{w - 0.6:.1f}V{h}z"
        for i, c in enumerate(counts.tolist())
    )
    return (
        f'<svg class="ct-plot" width="{bins * w}" height="{h}" viewBox="0 0 {bins * w} {h}" '
        f'role="img" aria-label="histogram"><path d="{bars}"/></svg>'
    )


_VIRIDIS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
_DIVERGING = ((33, 102, 172), (146, 197, 222), (247, 247, 247), (244, 165, 130), (178, 24, 43))


def _png(rgb: Any) -> bytes:
    """A minimal PNG (8-bit RGB, no interlace) of an ``(h, w, 3)`` uint8 array."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))
        )

    head = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", head)
        + chunk(b"IDAT", zlib.compress(raw))
        + (chunk(b"IEND", b""))
    )


def _heatmap(data: Any) -> str:
    import numpy as np

    a = np.asarray(data, dtype=np.float64)
    finite = np.isfinite(a)
    lo, hi = (float(a[finite].min()), float(a[finite].max())) if finite.any() else (0.0, 0.0)
    if lo < 0 < hi:
        m = max(-lo, hi)
        t, lut = (a + m) / (2 * m), _DIVERGING
    else:
        t, lut = (a - lo) / ((hi - lo) or 1.0), _VIRIDIS
    t = np.where(finite, np.clip(t, 0, 1), 0) * (len(lut) - 1)
    i = np.minimum(t.astype(int), len(lut) - 2)
    f = (t - i)[..., None]
    table = np.array(lut, dtype=np.float64)
    rgb = table[i] * (1 - f) + table[i + 1] * f
    rgb[~finite] = (255, 0, 255)
    png = _png(rgb.round().astype(np.uint8))
    h, w = a.shape
    side = 28 / max(h, w)  # the longest side 28 pixels, the other in proportion
    uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return (
        f'<img class="ct-plot ct-heat" alt="heatmap" width="{max(round(w * side), 2)}" '
        f'height="{max(round(h * side), 2)}" src="{uri}">'
    )


# --- the page ---------------------------------------------------------------------------

_CSS = """
.ct-view{font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;
color:inherit;position:relative;padding:2px 0;--ct-dim:rgba(127,127,127,.85);
--ct-line:rgba(127,127,127,.28);--ct-hi:rgba(255,200,0,.35)}
.ct-view details{margin:0}
.ct-view summary{list-style:none;cursor:pointer;white-space:nowrap}
.ct-view summary::-webkit-details-marker{display:none}
.ct-view summary::before{content:"\\25B8";display:inline-block;width:1.1em;color:var(--ct-dim)}
.ct-view details[open]>summary::before{content:"\\25BE"}
.ct-view .ct-kids{margin-left:.55em;padding-left:.9em;border-left:1px solid var(--ct-line)}
.ct-view .ct-row{white-space:nowrap;padding-left:1.1em}
.ct-view .ct-key{cursor:copy;font-weight:600}
.ct-view .ct-key:hover{text-decoration:underline dotted}
.ct-view .ct-type{color:#8250df}
.ct-view .ct-arr{color:#0a7d6b}
.ct-view .ct-dim,.ct-view .ct-size{color:var(--ct-dim)}
.ct-view .ct-size{margin-left:.5em}
.ct-view details[open]>summary .ct-preview{display:none}
.ct-view .ct-preview{color:var(--ct-dim)}
.ct-view .ct-badge{font-size:10px;border-radius:3px;padding:0 .35em;
border:1px solid currentColor;opacity:.85}
.ct-view .ct-kept .ct-badge{color:#9a6700}
.ct-view .ct-reset{opacity:.6}
.ct-view .ct-reset .ct-badge{color:var(--ct-dim)}
.ct-view .ct-bad{color:#cf222e;font-weight:600}
.ct-view .ct-ref{color:#0969da;cursor:pointer;text-decoration:underline dotted}
.ct-view .ct-cycle{color:#cf222e}
.ct-view .ct-more{color:var(--ct-dim);font-style:italic}
.ct-view .ct-plot{vertical-align:middle;margin-left:.6em;image-rendering:pixelated}
.ct-view svg.ct-plot path{fill:#0a7d6b}
.ct-view .ct-flash{background:var(--ct-hi)}
.ct-view .ct-toast{position:sticky;top:0;float:right;font-size:11px;padding:1px 6px;
border-radius:3px;background:rgba(127,127,127,.18);visibility:hidden}
.ct-view .ct-toast.ct-on{visibility:visible}
"""

# One delegated handler on the view's root element (an attribute, so that it works
# wherever the HTML is inserted, even where inserted scripts do not run): a click on a
# key copies its keystr path; a click on "same as ..." opens and shows the original.
_CLICK = (
    "var v=this,e=event.target;"
    "var g=e.closest&&e.closest('[data-goto]');"
    "if(g&&v.contains(g)){event.preventDefault();"
    "var d=document.getElementById(g.getAttribute('data-goto'));if(!d)return;"
    "for(var p=d.parentElement;p&&p!==v;p=p.parentElement){if(p.tagName==='DETAILS')p.open=true}"
    "d.scrollIntoView({block:'center'});d.classList.add('ct-flash');"
    "setTimeout(function(){d.classList.remove('ct-flash')},1200);return}"
    "var k=e.closest&&e.closest('[data-path]');if(!k||!v.contains(k))return;"
    "event.preventDefault();var s=k.getAttribute('data-path'),t=v.querySelector('.ct-toast');"
    "t.textContent='copied '+(s||'the root (empty path)');t.classList.add('ct-on');"
    "clearTimeout(v.ctTimer);v.ctTimer=setTimeout(function(){t.classList.remove('ct-on')},1500);"
    "function old(){try{var a=document.createElement('textarea');a.value=s;"
    "a.style.position='fixed';a.style.opacity='0';v.appendChild(a);a.select();"
    "document.execCommand('copy');v.removeChild(a)}catch(x){}}"
    "try{navigator.clipboard.writeText(s).then(null,old)}catch(x){old()}"
)


def _page(body: str, *, head: str = "") -> str:
    n = next(_ids)
    return (
        f'<div class="ct-view" id="ct-view-{_PREFIX}-{n}" onclick="{_esc(_CLICK)}">'
        f"<style>{_CSS}</style>"
        f'<span class="ct-toast" role="status"></span>{head}{body}</div>'
    )


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
