"""A static SVG picture of a Plotly figure spec, for every figure of a report page.

The page draws its figures with plotly.js once its scripts have run; until then (a
screenshot taken at load, a viewer with scripts off, a mail client, a printer) each figure
shows this picture instead: the same data, titles, axis titles with readable ticks, a colour
bar for heatmaps and a legend outside the plot area. It covers the trace types tierlab's
reports use: ``heatmap`` (drawn as one embedded PNG, not a rectangle per cell), ``bar``
(vertical, horizontal, grouped), ``scatter`` and ``line`` (lines and/or markers), on linear,
log and category axes, with subplots placed by their axes' ``domain``. Other trace types
(``parcoords``) are named in a note in place of the plot.

The picture is plain text, deterministic (no ids, no dates), and costs a few milliseconds a
figure.
"""

from __future__ import annotations

import base64
import html
import math
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Colours of series without their own (Plotly's default sequence).
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)

FONT = "font-family='sans-serif'"


def _esc(s: object) -> str:
    return html.escape(str(s), quote=True)


def _text(spec: Any) -> str:
    """A Plotly title (a string or ``{"text": ...}``) as plain text."""
    if isinstance(spec, dict):
        spec = spec.get("text", "")
    text = str(spec or "")
    for tag in ("<br>", "<br/>", "<br />"):
        text = text.replace(tag, " ")
    return text


def _num(v: float) -> str:
    """A tick label: thousands separators, no float noise, k/M/G beyond a million."""
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6:
        for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
            if a >= div:
                return f"{v / div:.3g}{suffix}"
    if a >= 1 and float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.3g}"


def nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    """Round ticks (1, 2 or 5 times a power of ten apart) covering ``[lo, hi]``."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    t = first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    return ticks


@dataclass
class _Axis:
    kind: str  # "linear", "log" or "category"
    lo: float = math.inf
    hi: float = -math.inf
    categories: list[str] = field(default_factory=list)
    title: str = ""
    reversed: bool = False
    domain: tuple[float, float] = (0.0, 1.0)

    def see(self, values: Any) -> np.ndarray:
        """The values as numbers on this axis (category names as indices), widening its
        range."""
        if self.kind == "category" or (
            len(values) and any(isinstance(v, str) for v in values[:50])
        ):
            self.kind = "category"
            out = []
            for v in values:
                s = str(v)
                if s not in self.categories:
                    self.categories.append(s)
                out.append(float(self.categories.index(s)))
            arr = np.asarray(out, dtype=np.float64)
        else:
            arr = np.asarray(
                [np.nan if v is None else v for v in values], dtype=np.float64
            ).reshape(-1)
        fin = arr[np.isfinite(arr)]
        if self.kind == "log":
            fin = fin[fin > 0]
        if fin.size:
            self.lo = min(self.lo, float(fin.min()))
            self.hi = max(self.hi, float(fin.max()))
        return arr

    def include(self, v: float) -> None:
        if math.isfinite(v) and (self.kind != "log" or v > 0):
            self.lo, self.hi = min(self.lo, v), max(self.hi, v)

    def finish(self) -> None:
        if self.kind == "category":
            self.lo, self.hi = -0.5, max(0, len(self.categories) - 1) + 0.5
            return
        if not math.isfinite(self.lo):
            self.lo, self.hi = (1.0, 10.0) if self.kind == "log" else (0.0, 1.0)
        if self.kind == "log":
            self.lo, self.hi = math.log10(self.lo), math.log10(self.hi)
            if self.hi - self.lo < 1e-9:
                self.lo, self.hi = self.lo - 0.5, self.hi + 0.5
            pad = (self.hi - self.lo) * 0.04
            self.lo, self.hi = self.lo - pad, self.hi + pad
        else:
            if self.hi - self.lo < 1e-12:
                self.lo, self.hi = self.lo - 1, self.hi + 1
            pad = (self.hi - self.lo) * 0.04
            self.lo, self.hi = self.lo - pad, self.hi + pad

    def pos(self, v: np.ndarray | float) -> np.ndarray:
        """Axis value(s) -> fraction of the axis length (0..1)."""
        x = np.asarray(v, dtype=np.float64)
        if self.kind == "log":
            with np.errstate(divide="ignore", invalid="ignore"):
                x = np.where(x > 0, np.log10(np.where(x > 0, x, 1)), np.nan)
        f = (x - self.lo) / (self.hi - self.lo)
        return 1 - f if self.reversed else f

    def ticks(self) -> list[tuple[float, str]]:
        """(fraction, label) of the axis' ticks."""
        if self.kind == "category":
            n = len(self.categories)
            every = max(1, math.ceil(n / 12))
            return [
                (float(self.pos(i)), c if len(c) <= 24 else c[:23] + "…")
                for i, c in enumerate(self.categories)
                if i % every == 0
            ]
        if self.kind == "log":
            lo, hi = math.ceil(self.lo - 1e-9), math.floor(self.hi + 1e-9)
            if hi - lo >= 1:
                step = max(1, math.ceil((hi - lo + 1) / 8))
                return [(float(self.pos(10.0**k)), _num(10.0**k)) for k in range(lo, hi + 1, step)]
            # Less than a decade: round values inside it.
            return [
                (float(self.pos(t)), _num(t))
                for t in nice_ticks(10**self.lo, 10**self.hi, 4)
                if t > 0
            ]
        return [(float(self.pos(t)), _num(t)) for t in nice_ticks(self.lo, self.hi)]


def _axis_name(trace: dict[str, Any], letter: str) -> str:
    ref = str(trace.get(f"{letter}axis", letter))  # "x", "x2"
    return f"{letter}axis" + ref[1:]


def _png(rgb: np.ndarray) -> bytes:
    """An RGB image (rows x cols x 3, uint8) as PNG bytes."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[r].tobytes() for r in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + tag
            + data
            + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
        )

    head = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", head)
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )


def _viridis(f: np.ndarray) -> np.ndarray:
    """Fractions 0..1 (NaN: empty) -> RGB uint8 on Plotly's Viridis colour scale (its
    colours, evenly spaced, interpolated linearly as plotly.js does), so the picture has the
    interactive heatmap's colours; empty cells in the plot background's grey."""
    from plotly.colors import sequential  # type: ignore[import-untyped]

    anchors = np.array(
        [[int(c[i : i + 2], 16) for i in (1, 3, 5)] for c in sequential.Viridis], dtype=np.float64
    )
    stops = np.linspace(0, 1, len(anchors))
    g = np.nan_to_num(np.clip(f, 0, 1))
    rgb: np.ndarray = (
        np.stack([np.interp(g, stops, anchors[:, k]) for k in range(3)], axis=-1)
        .round()
        .astype(np.uint8)
    )
    rgb[~np.isfinite(f)] = (0xF4, 0xF4, 0xF4)
    return rgb


class _Plot:
    """One subplot's box in pixels and its two axes."""

    def __init__(self, x: _Axis, y: _Axis, box: tuple[float, float, float, float]) -> None:
        self.x, self.y = x, y
        self.left, self.top, self.width, self.height = box

    def px(self, v: Any) -> np.ndarray:
        return self.left + self.x.pos(v) * self.width

    def py(self, v: Any) -> np.ndarray:
        return self.top + (1 - self.y.pos(v)) * self.height


def render(spec: dict[str, Any], width: int = 800, height: int = 420) -> str:
    """The figure ``spec`` (``{"data": [...], "layout": {...}}``) as an SVG document."""
    data = [t for t in spec.get("data") or [] if isinstance(t, dict)]
    layout = spec.get("layout") or {}
    out: list[str] = [
        f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}' "
        f"width='100%' height='{height}' role='img' class='static-figure'>",
        f"<rect width='{width}' height='{height}' fill='white'/>",
    ]
    title = _text(layout.get("title"))
    out.append(
        f"<text x='{width / 2:.1f}' y='22' text-anchor='middle' font-size='14' {FONT}>"
        f"{_esc(title)}</text>"
    )
    other = sorted(
        {str(t.get("type", "scatter")) for t in data} - {"heatmap", "bar", "scatter", "line"}
    )
    if other:
        out.append(
            f"<text x='{width / 2:.1f}' y='{height / 2:.1f}' text-anchor='middle' "
            f"font-size='13' fill='#666' {FONT}>a {_esc(', '.join(other))} plot: shown when "
            "the page's scripts run</text></svg>"
        )
        return "".join(out)

    # Axes: one per id the traces name, with the layout's type, title and domain.
    axes: dict[str, _Axis] = {}

    def axis(name: str) -> _Axis:
        if name not in axes:
            lay = layout.get(name) or {}
            dom = lay.get("domain") or [0.0, 1.0]
            axes[name] = _Axis(
                kind=str(lay.get("type") or "linear")
                if lay.get("type") in ("log", "category")
                else "linear",
                title=_text(lay.get("title")),
                reversed=lay.get("autorange") == "reversed",
                domain=(float(dom[0]), float(dom[1])),
            )
        return axes[name]

    prepared: list[tuple[dict[str, Any], str, str, np.ndarray, np.ndarray]] = []
    for t in data:
        xa, ya = _axis_name(t, "x"), _axis_name(t, "y")
        X, Y = axis(xa), axis(ya)
        kind = t.get("type", "scatter")
        horizontal = kind == "bar" and t.get("orientation") == "h"
        if kind == "heatmap":
            z = _grid(t.get("z"))
            xs = X.see(
                t.get("x")
                if t.get("x") is not None
                else list(range(z.shape[1] if z.ndim == 2 else 0))
            )
            ys = Y.see(t.get("y") if t.get("y") is not None else list(range(z.shape[0])))
            for A, v in ((X, xs), (Y, ys)):
                if v.size > 1:
                    A.include(float(v[-1] + (v[-1] - v[-2])))
        else:
            xs = X.see(t.get("x") or [])
            ys = Y.see(t.get("y") or [])
            if kind == "bar":
                (X if horizontal else Y).include(0.0)
                w = t.get("width")
                if w is not None and not horizontal:
                    half = np.asarray(w, dtype=np.float64) / 2
                    X.include(float(np.nanmin(xs - half)) if xs.size else math.nan)
                    X.include(float(np.nanmax(xs + half)) if xs.size else math.nan)
        prepared.append((t, xa, ya, xs, ys))
    for A in axes.values():
        A.finish()

    # Legend: named bar/scatter series when there is more than one, right of the plots.
    named = [
        (str(t.get("name")), _colour(t, i))
        for i, t in enumerate(data)
        if t.get("name") and t.get("type", "scatter") != "heatmap" and t.get("showlegend", True)
    ]
    legend = named if len(named) > 1 or layout.get("showlegend") else []
    colorbar = next((t for t in data if t.get("type") == "heatmap"), None)
    right = 20 + (150 if legend else 0) + (90 if colorbar is not None else 0)
    left, top, bottom = 78, 40, 56
    area = (left, top, width - left - right, height - top - bottom)

    plots: dict[tuple[str, str], _Plot] = {}
    for _, xa, ya, _, _ in prepared:
        if (xa, ya) in plots:
            continue
        X, Y = axes[xa], axes[ya]
        l0 = area[0] + X.domain[0] * area[2]
        w0 = (X.domain[1] - X.domain[0]) * area[2] - (30 if X.domain[1] < 1 else 0)
        t0 = area[1] + (1 - Y.domain[1]) * area[3]
        h0 = (Y.domain[1] - Y.domain[0]) * area[3] - (30 if Y.domain[0] > 0 else 0)
        plots[(xa, ya)] = _Plot(X, Y, (l0, t0, w0, h0))

    bg = layout.get("plot_bgcolor", "#ffffff")
    for p in plots.values():
        out.append(
            f"<rect x='{p.left:.1f}' y='{p.top:.1f}' width='{p.width:.1f}' "
            f"height='{p.height:.1f}' fill='{_esc(bg)}' stroke='#999'/>"
        )
        out.append(_axes_svg(p))

    groups = [t for t in data if t.get("type") == "bar"]
    grouped = layout.get("barmode") == "group" and len(groups) > 1
    bar_no = 0
    for i, (t, xa, ya, xs, ys) in enumerate(prepared):
        p = plots[(xa, ya)]
        kind = t.get("type", "scatter")
        colour = _colour(t, i)
        clip = (
            f"<svg x='{p.left:.1f}' y='{p.top:.1f}' width='{p.width:.1f}' "
            f"height='{p.height:.1f}' overflow='hidden'>"
            f"<g transform='translate({-p.left:.1f},{-p.top:.1f})'>"
        )
        out.append(clip)
        if kind == "heatmap":
            out.append(_heatmap_svg(t, p, xs, ys))
        elif kind == "bar":
            out.append(_bars_svg(t, p, xs, ys, colour, (bar_no, len(groups)) if grouped else None))
            bar_no += 1
        else:
            out.append(_scatter_svg(t, p, xs, ys, colour))
        out.append("</g></svg>")

    for a in layout.get("annotations") or []:
        if isinstance(a, dict) and a.get("text") and a.get("xref") == "paper":
            out.append(
                f"<text x='{area[0] + area[2] * float(a.get('x', 0.5)):.1f}' "
                f"y='{area[1] + area[3] * (1 - float(a.get('y', 0.5))):.1f}' text-anchor='middle' "
                f"font-size='13' fill='#555' {FONT}>{_esc(_text(a.get('text')))}</text>"
            )

    x0 = width - right + 12
    if colorbar is not None:
        out.append(_colorbar_svg(colorbar, x0, top, area[3]))
        x0 += 90
    if legend:
        for k, (name, colour) in enumerate(legend[:16]):
            y = top + 8 + 18 * k
            out.append(
                f"<rect x='{x0:.1f}' y='{y - 9:.1f}' width='12' height='10' fill='{_esc(colour)}'/>"
                f"<text x='{x0 + 17:.1f}' y='{y:.1f}' font-size='11' {FONT}>"
                f"{_esc(name if len(name) <= 20 else name[:19] + '…')}</text>"
            )
    out.append("</svg>")
    return "".join(out)


def _colour(t: dict[str, Any], i: int) -> str:
    for key in ("marker", "line"):
        c = (t.get(key) or {}).get("color")
        if isinstance(c, str):
            return c
    return PALETTE[i % len(PALETTE)]


def _axes_svg(p: _Plot) -> str:
    parts = []
    bottom = p.top + p.height
    for f, label in p.x.ticks():
        if -1e-6 <= f <= 1 + 1e-6:
            x = p.left + f * p.width
            parts.append(
                f"<line x1='{x:.1f}' y1='{bottom:.1f}' x2='{x:.1f}' y2='{bottom + 4:.1f}' "
                "stroke='#666'/>"
                f"<text x='{x:.1f}' y='{bottom + 16:.1f}' text-anchor='middle' font-size='10' "
                f"{FONT}>{_esc(label)}</text>"
            )
    for f, label in p.y.ticks():
        if -1e-6 <= f <= 1 + 1e-6:
            y = p.top + (1 - f) * p.height
            parts.append(
                f"<line x1='{p.left - 4:.1f}' y1='{y:.1f}' x2='{p.left:.1f}' y2='{y:.1f}' "
                "stroke='#666'/>"
                f"<text x='{p.left - 6:.1f}' y='{y + 3.5:.1f}' text-anchor='end' font-size='10' "
                f"{FONT}>{_esc(label)}</text>"
            )
    if p.x.title:
        parts.append(
            f"<text x='{p.left + p.width / 2:.1f}' y='{bottom + 34:.1f}' text-anchor='middle' "
            f"font-size='12' {FONT}>{_esc(p.x.title)}</text>"
        )
    if p.y.title:
        cx, cy = p.left - 58, p.top + p.height / 2
        parts.append(
            f"<text x='{cx:.1f}' y='{cy:.1f}' text-anchor='middle' font-size='12' {FONT} "
            f"transform='rotate(-90 {cx:.1f} {cy:.1f})'>{_esc(p.y.title)}</text>"
        )
    return "".join(parts)


def _grid(z: Any) -> np.ndarray:
    """A heatmap's ``z`` (rows of numbers, None for gaps) as a float array, NaN for gaps."""
    try:
        return np.array(z if z is not None else [], dtype=np.float64, ndmin=2)
    except (TypeError, ValueError):  # ragged rows or text: nothing to draw
        return np.zeros((0, 0))


def _edges(c: np.ndarray) -> np.ndarray:
    """Cell edges from cell positions (centres or starts: Plotly treats them as centres)."""
    if c.size == 0:
        return np.zeros(1)
    if c.size == 1:
        return np.array([c[0] - 0.5, c[0] + 0.5])
    mid = (c[:-1] + c[1:]) / 2
    return np.concatenate([[c[0] - (mid[0] - c[0])], mid, [c[-1] + (c[-1] - mid[-1])]])


def _heatmap_svg(t: dict[str, Any], p: _Plot, xs: np.ndarray, ys: np.ndarray) -> str:
    z = _grid(t.get("z"))
    if z.ndim != 2 or not z.size:
        return ""
    lo = float(t.get("zmin", np.nanmin(z) if np.isfinite(z).any() else 0))
    hi = float(t.get("zmax", np.nanmax(z) if np.isfinite(z).any() else 1))
    f = (z - lo) / (hi - lo if hi > lo else 1)
    rgb = _viridis(f)[::-1]  # first row at the bottom
    xe, ye = _edges(xs), _edges(ys)
    x0, x1 = float(p.px(xe[0])), float(p.px(xe[-1]))
    y0, y1 = float(p.py(ye[-1])), float(p.py(ye[0]))
    uri = "data:image/png;base64," + base64.b64encode(_png(np.ascontiguousarray(rgb))).decode()
    return (
        f"<image x='{min(x0, x1):.1f}' y='{min(y0, y1):.1f}' width='{abs(x1 - x0):.1f}' "
        f"height='{abs(y1 - y0):.1f}' preserveAspectRatio='none' "
        f"style='image-rendering:pixelated' href='{uri}'/>"
    )


def _colorbar_svg(t: dict[str, Any], x: float, top: float, height: float) -> str:
    cb = t.get("colorbar") or {}
    steps = 64
    f = np.linspace(1, 0, steps).reshape(steps, 1)
    uri = "data:image/png;base64," + base64.b64encode(_png(_viridis(f))).decode()
    lo, hi = float(t.get("zmin", 0)), float(t.get("zmax", 1))
    parts = [
        f"<image x='{x:.1f}' y='{top:.1f}' width='14' height='{height:.1f}' "
        f"preserveAspectRatio='none' href='{uri}'/>"
    ]
    vals = cb.get("tickvals")
    texts = cb.get("ticktext") or ([_num(v) for v in vals] if vals else None)
    if not vals:
        vals = nice_ticks(lo, hi, 5)
        texts = [_num(v) for v in vals]
    for v, s in zip(vals, texts or [], strict=False):
        if hi > lo and lo <= v <= hi:
            y = top + (1 - (v - lo) / (hi - lo)) * height
            parts.append(
                f"<text x='{x + 18:.1f}' y='{y + 3.5:.1f}' font-size='10' {FONT}>{_esc(s)}</text>"
            )
    title = _text(cb.get("title"))
    if title:
        cx, cy = x + 70, top + height / 2
        parts.append(
            f"<text x='{cx:.1f}' y='{cy:.1f}' text-anchor='middle' font-size='11' {FONT} "
            f"transform='rotate(-90 {cx:.1f} {cy:.1f})'>{_esc(title)}</text>"
        )
    return "".join(parts)


def _bars_svg(
    t: dict[str, Any],
    p: _Plot,
    xs: np.ndarray,
    ys: np.ndarray,
    colour: str,
    group: tuple[int, int] | None,
) -> str:
    horizontal = t.get("orientation") == "h"
    pos, val = (ys, xs) if horizontal else (xs, ys)
    A, V = (p.y, p.x) if horizontal else (p.x, p.y)
    n = min(pos.size, val.size)
    if not n:
        return ""
    w = t.get("width")
    if w is not None:
        widths = np.broadcast_to(np.asarray(w, dtype=np.float64), (n,)).copy()
    elif A.kind == "category":
        widths = np.full(n, 0.8)
    else:
        d = np.diff(np.unique(pos[np.isfinite(pos)]))
        widths = np.full(n, 0.8 * (float(d.min()) if d.size else 1.0))
    offset = np.zeros(n)
    if group is not None:
        k, m = group
        widths = widths / m
        offset = (k - (m - 1) / 2) * widths
    base = 1.0 if V.kind == "log" else 0.0
    lo_f = A.pos(pos + offset - widths / 2)
    hi_f = A.pos(pos + offset + widths / 2)
    v0, v1 = V.pos(np.full(n, base)), V.pos(val[:n])
    out = []
    for i in range(n):
        if not (np.isfinite(lo_f[i]) and np.isfinite(hi_f[i]) and np.isfinite(v1[i])):
            continue
        a0, a1 = sorted((float(lo_f[i]), float(hi_f[i])))
        b0 = float(np.clip(v0[i] if np.isfinite(v0[i]) else 0.0, -0.05, 1.05))
        b0, b1 = sorted((b0, float(v1[i])))
        if horizontal:
            x, wpx = p.left + b0 * p.width, (b1 - b0) * p.width
            y, hpx = p.top + (1 - a1) * p.height, (a1 - a0) * p.height
        else:
            x, wpx = p.left + a0 * p.width, (a1 - a0) * p.width
            y, hpx = p.top + (1 - b1) * p.height, (b1 - b0) * p.height
        out.append(
            f"<rect x='{x:.1f}' y='{y:.1f}' width='{max(wpx, 1.0):.1f}' "
            f"height='{max(hpx, 0.0):.1f}' fill='{_esc(colour)}'/>"
        )
    return "".join(out)


def _scatter_svg(t: dict[str, Any], p: _Plot, xs: np.ndarray, ys: np.ndarray, colour: str) -> str:
    n = min(xs.size, ys.size)
    if not n:
        return ""
    mode = str(t.get("mode") or ("lines" if t.get("type") == "line" else "lines+markers"))
    px, py = p.px(xs[:n]), p.py(ys[:n])
    ok = np.isfinite(px) & np.isfinite(py)
    parts: list[str] = []
    if "lines" in mode:
        dash = (t.get("line") or {}).get("dash")
        style = " stroke-dasharray='5,3'" if dash in ("dash", "dot", "dashdot") else ""
        # One polyline per run of finite points (a gap breaks the line, as in Plotly).
        runs: list[list[str]] = [[]]
        for i in range(n):
            if ok[i]:
                runs[-1].append(f"{px[i]:.1f},{py[i]:.1f}")
            elif runs[-1]:
                runs.append([])
        parts.extend(
            f"<polyline points='{' '.join(r)}' fill='none' stroke='{_esc(colour)}' "
            f"stroke-width='1.6'{style}/>"
            for r in runs
            if len(r) > 1
        )
    if "markers" in mode or n == 1:
        parts.extend(
            f"<circle cx='{px[i]:.1f}' cy='{py[i]:.1f}' r='3' fill='{_esc(colour)}'/>"
            for i in range(n)
            if ok[i]
        )
    return "".join(parts)
