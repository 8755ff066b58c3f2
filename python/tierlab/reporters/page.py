"""The interactive HTML page every tierlab report uses (``tierlab view`` of a recording,
``tierlab reproduce`` of a paper, ``tierlab tune``): one layout, one file, no network.

A :class:`Page` is a title, an optional banner (shown at the top of the page and kept in
view while scrolling, e.g. "quick run"), and a tree of :class:`Section` s holding blocks:
paragraphs, tables (:class:`Table`: numbers right-aligned, with units and thousands
separators), key/value tables, interactive figures (:class:`Figure`: a Plotly figure,
zoom and hover), code blocks and collapsible details. :meth:`Page.render` writes it as one
self-contained HTML file: a contents list of the sections, the figures' data inline, and
plotly.js embedded (compressed; the browser inflates it with ``DecompressionStream``), so
the file works offline and can be mailed around.

Every figure's ``<div class="figure-plot">`` holds a static SVG picture of it
(:mod:`tierlab.reporters.static_svg`) until plotly.js replaces it, so the page reads
without scripts (a screenshot at load, a mail client, print); the div gets
``data-rendered="1"`` once drawn interactively (tests wait for it); a figure that fails to
draw says so in place, under its picture.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Union

# -- values as people read them ----------------------------------------------------------------

_BINARY = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB")


def fmt_int(v: float) -> str:
    """``1234567`` -> ``1,234,567``."""
    return f"{round(v):,}"


def fmt_number(v: object, digits: int = 3) -> str:
    """A number for a table cell: integers (and integral floats) with thousands separators,
    other floats with ``digits`` decimals (significant digits below 0.1), booleans as
    yes/no, missing values and NaN as ``-``."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if (v.is_integer() and abs(v) >= 1000) or abs(v) >= 100_000:
            return f"{round(v):,}"
        if abs(v) >= 1000:
            return f"{v:,.1f}"
        if v != 0 and abs(v) < 0.1:
            return f"{v:.{digits}g}"
        return f"{v:,.{digits}f}"
    return str(v)


def fmt_bytes(n: float | None) -> str:
    """``67108864`` -> ``64.0 MiB``; below 1 KiB, ``512 bytes``."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    v = float(n)
    unit = 0
    while abs(v) >= 1024 and unit < len(_BINARY) - 1:
        v /= 1024
        unit += 1
    if unit == 0:
        return f"{fmt_int(v)} bytes"
    return f"{v:,.1f} {_BINARY[unit]}"


def fmt_seconds(s: float | None) -> str:
    """A duration: ``0.000012`` -> ``12.0 us``, ``0.5`` -> ``500.0 ms``, ``75`` -> ``1 min 15 s``
    (seconds given)."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    a = abs(s)
    if a == 0:
        return "0 s"
    if a < 1e-6:
        return f"{s * 1e9:,.1f} ns"
    if a < 1e-3:
        return f"{s * 1e6:,.1f} us"
    if a < 1:
        return f"{s * 1e3:,.1f} ms"
    if a < 60:
        return f"{s:,.2f} s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m} min {sec} s"
    h, m = divmod(m, 60)
    return f"{h} h {m} min"


def fmt_ns(ns: float | None) -> str:
    """A duration given in nanoseconds (see :func:`fmt_seconds`)."""
    return "-" if ns is None else fmt_seconds(ns / 1e9)


def fmt_pct(fraction: float | None, digits: int = 1) -> str:
    """``0.256`` -> ``25.6%``."""
    if fraction is None or (isinstance(fraction, float) and math.isnan(fraction)):
        return "-"
    return f"{100 * fraction:.{digits}f}%"


def slug(text: str) -> str:
    """An id for an anchor: lower case, runs of other characters as one ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


# -- blocks -------------------------------------------------------------------------------------


@dataclass
class Paragraph:
    """Text; ``markup=True`` takes it as trusted HTML (links, emphasis), else it is escaped."""

    text: str
    markup: bool = False
    css: str = ""


@dataclass
class Column:
    """A table column: its title, unit (shown under the title) and how cells are formatted
    (``number``, ``int``, ``bytes``, ``seconds``, ``ns``, ``pct`` of a fraction, ``text``)."""

    title: str
    unit: str = ""
    format: str = "number"
    digits: int = 3

    def cell(self, v: object) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        f = self.format
        if f == "text" or isinstance(v, str):
            return str(v)
        if f == "int" and isinstance(v, int | float):
            return fmt_int(float(v))
        if f == "bytes" and isinstance(v, int | float):
            return fmt_bytes(float(v))
        if f == "seconds" and isinstance(v, int | float):
            return fmt_seconds(float(v))
        if f == "ns" and isinstance(v, int | float):
            return fmt_ns(float(v))
        if f == "pct" and isinstance(v, int | float):
            return fmt_pct(float(v), max(0, self.digits - 2))
        return fmt_number(v, self.digits)

    @property
    def numeric(self) -> bool:
        return self.format != "text"


@dataclass
class Table:
    """Rows under columns; cells are formatted by their column (a cell already a string is
    shown as it is). ``classes`` gives a CSS class per row (``holds``, ``fails``)."""

    columns: list[Column]
    rows: list[list[object]]
    caption: str = ""
    classes: list[str] | None = None
    css: str = ""


@dataclass
class KeyValues:
    """A two-column table of names and values already formatted for reading."""

    rows: list[tuple[str, str]]


@dataclass
class Code:
    """Preformatted text (a scenario, commands)."""

    text: str
    lang: str = ""


@dataclass
class Figure:
    """An interactive figure: a Plotly figure as JSON (``{"data": [...], "layout": {...}}``,
    e.g. ``plotly.graph_objects.Figure.to_plotly_json()`` or built by hand) and a caption.
    ``height`` is in CSS pixels."""

    spec: dict[str, Any]
    caption: str = ""
    height: int = 420


@dataclass
class Details:
    """A collapsible part: a summary line and blocks shown when opened."""

    summary: str
    blocks: list[Block] = field(default_factory=list)
    open: bool = False


@dataclass
class Row:
    """Blocks side by side (wrapping on narrow screens); ``widths`` are CSS fractions."""

    blocks: list[Block]
    widths: list[int] | None = None


Block = Union[Paragraph, Table, KeyValues, Code, Figure, Details, Row, "Section"]


@dataclass
class Section:
    """A heading with an anchor, listed in the page's contents, and its blocks."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    id: str = ""
    badge: str = ""

    def add(self, *blocks: Block) -> Section:
        self.blocks.extend(blocks)
        return self

    def section(self, title: str, id: str = "", badge: str = "") -> Section:
        s = Section(title, id=id, badge=badge)
        self.blocks.append(s)
        return s


# -- the page -----------------------------------------------------------------------------------


@dataclass
class Page:
    """One report page (see the module docs)."""

    title: str
    subtitle: str = ""
    banner: str = ""
    sections: list[Section] = field(default_factory=list)
    footer: str = ""

    def section(self, title: str, id: str = "", badge: str = "") -> Section:
        s = Section(title, id=id, badge=badge)
        self.sections.append(s)
        return s

    def figures(self) -> list[Figure]:
        out: list[Figure] = []

        def walk(blocks: Iterable[Block]) -> None:
            for b in blocks:
                if isinstance(b, Figure):
                    out.append(b)
                elif isinstance(b, Section | Details | Row):
                    walk(b.blocks)

        walk(self.sections)
        return out

    def render(self) -> str:
        return _Renderer(self).render()

    def write(self, path: Path) -> Path:
        """Write the page to ``path`` atomically."""
        from tierlab.outdir import atomic_output

        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path) as tmp:
            tmp.write_text(self.render(), encoding="utf-8")
        return path


_CSS = """
:root{--fg:#1d2330;--muted:#5b6475;--line:#d8dde6;--bg:#fff;--side:#f5f7fa;--accent:#2f5fa8;
--ok:#1d7a3a;--okbg:#e5f4ea;--bad:#a3261b;--badbg:#fbe9e7;--na:#6b6b6b;--nabg:#f0f0f0}
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
background:var(--bg)}
.layout{display:grid;grid-template-columns:260px minmax(0,1fr);min-height:100vh}
nav.contents{position:sticky;top:0;align-self:start;max-height:100vh;overflow:auto;
padding:1em 1em 2em;background:var(--side);border-right:1px solid var(--line);font-size:13px}
nav.contents h2{font-size:14px;margin:.2em 0 .6em}
nav.contents ol{list-style:none;padding-left:0;margin:0}
nav.contents ol ol{padding-left:1em}
nav.contents a{color:var(--fg);text-decoration:none;display:block;padding:1px 0}
nav.contents a:hover{color:var(--accent);text-decoration:underline}
main{padding:0 2em 3em;max-width:1280px}
header.page{padding:1.2em 0 .4em;border-bottom:2px solid var(--line)}
header.page h1{margin:0;font-size:24px}
header.page p{margin:.3em 0 0;color:var(--muted)}
.banner{position:sticky;top:0;z-index:10;background:#fff4d6;border:1px solid #e3c266;
padding:.45em .9em;margin:.8em 0;border-radius:4px;font-weight:600}
section{margin-top:1.6em}
section section{margin-top:1.2em}
h2{font-size:20px;border-bottom:1px solid var(--line);padding-bottom:.2em}
h3{font-size:17px}h4{font-size:15px}
.badge{font-size:12px;font-weight:600;background:#eef2f8;color:var(--accent);border-radius:3px;
padding:1px 6px;margin-left:.5em;vertical-align:middle}
table{border-collapse:collapse;margin:.6em 0;font-size:13.5px}
th,td{border:1px solid var(--line);padding:3px 8px;vertical-align:top}
thead th{background:var(--side);text-align:left}
thead th .unit{display:block;font-weight:400;color:var(--muted);font-size:12px}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.kv th{text-align:left;background:var(--side);font-weight:600}
p.caption{color:var(--muted);margin:.8em 0 0;font-size:13.5px}
tr.holds td.verdict{color:var(--ok);background:var(--okbg);font-weight:600}
tr.fails td.verdict{color:var(--bad);background:var(--badbg);font-weight:600}
tr.na td.verdict{color:var(--na);background:var(--nabg)}
.scroll{overflow-x:auto}
pre{background:var(--side);border:1px solid var(--line);padding:.6em .8em;overflow:auto;
font-size:12.5px;max-height:32em}
details{margin:.6em 0}details>summary{cursor:pointer;color:var(--accent)}
figure{margin:.8em 0}figcaption{color:var(--muted);font-size:13px}
.figure-plot{width:100%;border:1px solid var(--line);border-radius:4px}
.figure-error{color:var(--bad);padding:1em}
.row{display:flex;flex-wrap:wrap;gap:1.2em;align-items:flex-start}
.row>div{min-width:320px}
footer{margin-top:3em;color:var(--muted);font-size:12px}
@media (max-width:900px){.layout{grid-template-columns:1fr}nav.contents{position:static;
max-height:none}}
"""

_LOADER = """
(function(){
  var figs = document.querySelectorAll('.figure-plot');
  function fail(msg){
    figs.forEach(function(d){
      d.insertAdjacentHTML('beforeend', '<div class="figure-error">' + msg + '</div>');
    });
  }
  function draw(){
    figs.forEach(function(div){
      var spec = JSON.parse(document.getElementById(div.dataset.spec).textContent);
      var pic = div.querySelector(':scope > .static-figure');
      if (pic) pic.remove();  // the static picture gives way to the interactive figure
      var layout = Object.assign({autosize: true, separators: '.,',
        margin: {l: 70, r: 30, t: 50, b: 60}}, spec.layout || {});
      Plotly.newPlot(div, spec.data || [], layout,
        {responsive: true, displaylogo: false, scrollZoom: false})
        .then(function(){ div.dataset.rendered = '1'; });
    });
  }
  if (typeof DecompressionStream === 'undefined') {
    fail('This browser cannot inflate the embedded plotting library (no DecompressionStream);'
      + ' open the page in a current Chrome, Edge, Firefox or Safari.');
    return;
  }
  var b64 = document.getElementById('plotly-gz').textContent.trim();
  var bin = atob(b64), bytes = new Uint8Array(bin.length);
  for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  new Response(stream).text().then(function(src){
    var s = document.createElement('script');
    s.textContent = src;
    document.head.appendChild(s);
    draw();
  }).catch(function(e){ fail('could not load the plotting library: ' + e); });
})();
"""


@lru_cache(maxsize=1)
def plotly_js_gz_b64() -> str:
    """plotly.js (the copy shipped in the ``plotly`` Python package), gzip-compressed and
    base64-encoded, deterministic (no timestamp in the gzip header)."""
    from importlib.resources import files

    src = files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    return base64.b64encode(gzip.compress(src, 6, mtime=0)).decode("ascii")


def _json_script(obj: object) -> str:
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False, default=_json_default)
    return text.replace("</", "<\\/")


def _json_default(o: object) -> object:
    try:
        import numpy as np

        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def clean_json(obj: Any) -> Any:
    """``obj`` with NaN and infinities replaced by None (JSON has neither)."""
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {k: clean_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean_json(v) for v in obj]
    try:
        import numpy as np

        if isinstance(obj, np.ndarray):
            return clean_json(obj.tolist())
        if isinstance(obj, np.generic):
            return clean_json(obj.item())
    except ImportError:  # pragma: no cover
        pass
    return obj


class _Renderer:
    def __init__(self, page: Page) -> None:
        self.page = page
        self.ids: set[str] = set()
        self.figure_no = 0
        self.specs: list[str] = []

    def _id(self, s: Section) -> str:
        base = s.id or slug(s.title)
        sid, n = base, 2
        while sid in self.ids:
            sid, n = f"{base}-{n}", n + 1
        self.ids.add(sid)
        s.id = sid
        return sid

    def render(self) -> str:
        p = self.page
        e = html.escape
        # Ids first, so that the contents list and the headings agree.
        self._assign(p.sections)
        body = "".join(self.section(s, 2) for s in p.sections)
        parts = [
            "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            f"<title>{e(p.title)}</title><style>{_CSS}</style></head><body>",
            "<div class='layout'><nav class='contents' aria-label='contents'><h2>Contents</h2>",
            self.contents(p.sections),
            "</nav><main>",
            f"<header class='page'><h1>{e(p.title)}</h1>",
            f"<p>{e(p.subtitle)}</p>" if p.subtitle else "",
            "</header>",
            f"<div class='banner' role='note'>{e(p.banner)}</div>" if p.banner else "",
            body,
            f"<footer>{e(p.footer)}</footer>" if p.footer else "",
            "</main></div>",
            "".join(self.specs),
        ]
        if self.figure_no:
            parts.append(
                f"<script id='plotly-gz' type='application/octet-stream'>{plotly_js_gz_b64()}"
                f"</script><script>{_LOADER}</script>"
            )
        parts.append("</body></html>\n")
        return "".join(parts)

    def _assign(self, sections: Sequence[Block]) -> None:
        for s in sections:
            if isinstance(s, Section):
                self._id(s)
                self._assign(s.blocks)
            elif isinstance(s, Details | Row):
                self._assign(s.blocks)

    def contents(self, blocks: Sequence[Block]) -> str:
        items = []
        for s in blocks:
            if not isinstance(s, Section):
                continue
            sub = self.contents(s.blocks)
            items.append(f"<li><a href='#{s.id}'>{html.escape(s.title)}</a>{sub}</li>")
        return f"<ol>{''.join(items)}</ol>" if items else ""

    def section(self, s: Section, level: int) -> str:
        h = min(level, 4)
        badge = f"<span class='badge'>{html.escape(s.badge)}</span>" if s.badge else ""
        inner = "".join(self.block(b, level + 1) for b in s.blocks)
        return f"<section id='{s.id}'><h{h}>{html.escape(s.title)}{badge}</h{h}>{inner}</section>"

    def block(self, b: Block, level: int) -> str:
        e = html.escape
        if isinstance(b, Section):
            return self.section(b, level)
        if isinstance(b, Paragraph):
            text = b.text if b.markup else e(b.text)
            cls = f" class='{e(b.css)}'" if b.css else ""
            return f"<p{cls}>{text}</p>"
        if isinstance(b, Table):
            return self.table(b)
        if isinstance(b, KeyValues):
            rows = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in b.rows)
            return f"<table class='kv'>{rows}</table>"
        if isinstance(b, Code):
            return f"<pre><code>{e(b.text)}</code></pre>"
        if isinstance(b, Details):
            inner = "".join(self.block(x, level) for x in b.blocks)
            op = " open" if b.open else ""
            return f"<details{op}><summary>{e(b.summary)}</summary>{inner}</details>"
        if isinstance(b, Row):
            widths = b.widths or [1] * len(b.blocks)
            cells = "".join(
                f"<div style='flex:{w} 1 0'>{self.block(x, level)}</div>"
                for x, w in zip(b.blocks, widths, strict=False)
            )
            return f"<div class='row'>{cells}</div>"
        if isinstance(b, Figure):
            return self.figure(b)
        raise TypeError(f"not a page block: {type(b).__name__}")

    def table(self, t: Table) -> str:
        e = html.escape
        head = "".join(
            f"<th>{e(c.title)}"
            + (f"<span class='unit'>{e(c.unit)}</span>" if c.unit else "")
            + "</th>"
            for c in t.columns
        )
        rows = []
        for i, row in enumerate(t.rows):
            cls = f" class='{e(t.classes[i])}'" if t.classes and t.classes[i] else ""
            cells = []
            for c, v in zip(t.columns, row, strict=False):
                klass = []
                if c.numeric and not isinstance(v, str):
                    klass.append("num")
                if c.title.lower() in ("holds?", "verdict"):
                    klass.append("verdict")
                k = f" class='{' '.join(klass)}'" if klass else ""
                cells.append(f"<td{k}>{e(c.cell(v))}</td>")
            rows.append(f"<tr{cls}>{''.join(cells)}</tr>")
        # The caption above the table as a paragraph: a <caption> wraps at the table's width.
        cap = f"<p class='caption'>{e(t.caption)}</p>" if t.caption else ""
        cls = f" class='{e(t.css)}'" if t.css else ""
        return (
            f"{cap}<div class='scroll'><table{cls}><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>"
        )

    def figure(self, f: Figure) -> str:
        self.figure_no += 1
        n = self.figure_no
        spec = {"data": f.spec.get("data", []), "layout": f.spec.get("layout", {})}
        try:  # most specs hold no NaN: written as they are, without a walk in Python
            text = _json_script(spec)
        except ValueError:
            spec = clean_json(spec)
            text = _json_script(spec)
        self.specs.append(f"<script type='application/json' id='figure-spec-{n}'>{text}</script>")
        cap = f"<figcaption>{html.escape(f.caption)}</figcaption>" if f.caption else ""
        from tierlab.reporters import static_svg

        picture = static_svg.render(spec, height=int(f.height))
        return (
            f"<figure><div class='figure-plot' id='figure-{n}' data-spec='figure-spec-{n}' "
            f"style='height:{int(f.height)}px'>{picture}</div>{cap}</figure>"
        )


__all__ = [
    "Block",
    "Code",
    "Column",
    "Details",
    "Figure",
    "KeyValues",
    "Page",
    "Paragraph",
    "Row",
    "Section",
    "Table",
    "clean_json",
    "fmt_bytes",
    "fmt_int",
    "fmt_ns",
    "fmt_number",
    "fmt_pct",
    "fmt_seconds",
    "plotly_js_gz_b64",
]
