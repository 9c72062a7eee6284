"""The HTML view's page: escaping, the small pictures (a histogram as SVG, a heatmap as
a PNG data URI), the inline CSS and click handler, and the wrapper every view is
rendered into, with ids unique in a page that holds several views. No tree here: the
tree is rendered by ``_html``.
"""

from __future__ import annotations

import base64
import html as _html
import itertools
import math
import secrets
import struct
import zlib
from typing import Any

__all__: list[str] = []


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
