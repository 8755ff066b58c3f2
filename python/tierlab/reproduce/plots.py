"""Small builders of Plotly figures as plain JSON (no plotly Python objects): subplot grids,
lines, bars, a shared palette. Used by the reproduction views and ``tierlab tune``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

#: Colours by series name, stable across figures (policies, techniques, page sizes).
PALETTE = [
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
]
_NAMED = {
    "fifo": "#1f77b4",
    "lru": "#d62728",
    "cmcp": "#2ca02c",
    "no-movement": "#555555",
    "paper": "#000000",
}
_assigned: dict[str, str] = {}


def color(name: str) -> str:
    """The colour of series ``name`` (the same in every figure of a process)."""
    key = name.split(" + ")[-1] if " + " in name else name
    if key in _NAMED:
        return _NAMED[key]
    if name not in _assigned:
        _assigned[name] = PALETTE[len(_assigned) % len(PALETTE)]
    return _assigned[name]


def axis_ids(k: int) -> tuple[str, str]:
    """Trace axis references of subplot ``k`` (1-based): ``("x", "y")``, ``("x2", "y2")``."""
    return ("x", "y") if k == 1 else (f"x{k}", f"y{k}")


def grid(
    nrows: int,
    ncols: int,
    titles: Sequence[str] = (),
    *,
    xtitle: str | Sequence[str] = "",
    ytitle: str | Sequence[str] = "",
    ylog: bool | Sequence[bool] = False,
    xreversed: bool = False,
    hgap: float = 0.06,
    vgap: float = 0.09,
    title: str = "",
) -> dict[str, Any]:
    """A layout of ``nrows`` x ``ncols`` subplots (subplot ``k`` = row-major, 1-based) with
    titles over each; ``xtitle``/``ytitle`` go on the bottom row / first column (a sequence:
    one per row for y, per column for x); ``ylog`` per row."""
    layout: dict[str, Any] = {"annotations": [], "showlegend": True}
    if title:
        layout["title"] = {"text": title, "font": {"size": 15}}
    w = (1 - (ncols - 1) * hgap) / ncols
    h = (1 - (nrows - 1) * vgap) / nrows
    for r in range(nrows):
        for c in range(ncols):
            k = r * ncols + c + 1
            x0 = c * (w + hgap)
            y1 = 1 - r * (h + vgap)
            xa, ya = ("xaxis", "yaxis") if k == 1 else (f"xaxis{k}", f"yaxis{k}")
            xref, yref = axis_ids(k)
            log = ylog[r] if isinstance(ylog, Sequence) else ylog
            layout[xa] = {
                "domain": [x0, x0 + w],
                "anchor": yref,
                "automargin": True,
                "autorange": "reversed" if xreversed else True,
            }
            layout[ya] = {
                "domain": [y1 - h, y1],
                "anchor": xref,
                "automargin": True,
                "type": "log" if log else "linear",
                "exponentformat": "SI",
            }
            if r == nrows - 1:
                xt = xtitle[c] if not isinstance(xtitle, str) else xtitle
                if xt:
                    layout[xa]["title"] = {"text": xt}
            if c == 0:
                yt = ytitle[r] if not isinstance(ytitle, str) else ytitle
                if yt:
                    layout[ya]["title"] = {"text": yt}
            if k <= len(titles) and titles[k - 1]:
                layout["annotations"].append(
                    {
                        "text": f"<b>{titles[k - 1]}</b>",
                        "x": x0 + w / 2,
                        "y": y1,
                        "xref": "paper",
                        "yref": "paper",
                        "xanchor": "center",
                        "yanchor": "bottom",
                        "showarrow": False,
                        "font": {"size": 12},
                    }
                )
    return layout


def clean(values: Sequence[Any]) -> list[Any]:
    """Values for JSON: NaN/inf and None as None, numpy scalars as Python numbers."""
    out: list[Any] = []
    for v in values:
        if hasattr(v, "item"):
            v = v.item()
        if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
            v = None
        out.append(v)
    return out


def line(
    x: Sequence[Any],
    y: Sequence[Any],
    name: str,
    k: int = 1,
    *,
    dash: str = "solid",
    group: str = "",
    show: bool = True,
    hover: str = "",
    mode: str = "lines+markers",
    col: str | None = None,
    symbol: str = "circle",
) -> dict[str, Any]:
    """A line (with markers) on subplot ``k``; ``group`` ties legend entries together (one
    legend entry for the same series across subplots: ``show`` on the first only)."""
    xa, ya = axis_ids(k)
    t: dict[str, Any] = {
        "type": "scatter",
        "mode": mode,
        "x": clean(x),
        "y": clean(y),
        "name": name,
        "xaxis": xa,
        "yaxis": ya,
        "line": {"color": col or color(name), "dash": dash, "width": 2},
        "marker": {"color": col or color(name), "size": 7, "symbol": symbol},
        "legendgroup": group or name,
        "showlegend": show,
    }
    if hover:
        t["hovertemplate"] = hover
    return t


def bar(
    x: Sequence[Any],
    y: Sequence[Any],
    name: str,
    k: int = 1,
    *,
    group: str = "",
    show: bool = True,
    hover: str = "",
    col: str | None = None,
    text: Sequence[str] | None = None,
) -> dict[str, Any]:
    xa, ya = axis_ids(k)
    t: dict[str, Any] = {
        "type": "bar",
        "x": clean(x),
        "y": clean(y),
        "name": name,
        "xaxis": xa,
        "yaxis": ya,
        "marker": {"color": col or color(name)},
        "legendgroup": group or name,
        "showlegend": show,
    }
    if hover:
        t["hovertemplate"] = hover
    if text is not None:
        t["text"] = list(text)
        t["textposition"] = "outside"
    return t


def hline(
    y: float, k: int, text: str, color_: str = "#000"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A horizontal reference line across subplot ``k`` and its label (shape, annotation)."""
    xa, ya = axis_ids(k)
    shape = {
        "type": "line",
        "xref": f"{xa} domain",
        "x0": 0,
        "x1": 1,
        "yref": ya,
        "y0": y,
        "y1": y,
        "line": {"dash": "dash", "color": color_, "width": 1.5},
    }
    note = {
        "text": text,
        "xref": f"{xa} domain",
        "x": 1,
        "xanchor": "right",
        "yref": ya,
        "y": y,
        "yanchor": "bottom",
        "showarrow": False,
        "font": {"size": 11, "color": color_},
    }
    return shape, note
