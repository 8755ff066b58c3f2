"""Figures (PNG + SVG) and the interactive HTML page of ``tierlab view``.

The page uses the report layout every tierlab report shares
(:mod:`tierlab.reporters.page`): a contents list, the recording's totals in units people
read, and per mapping an interactive heatmap (zoom, hover: the page range, column and
count of each cell) and histogram; the static PNG/SVG figures are written beside it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tierlab import outdir, plots
from tierlab.outdir import atomic_output
from tierlab.reporters import page as pg
from tierlab.reporters.base import save_figure
from tierlab.view import datasrc
from tierlab.view.analysis import MappingView, View
from tierlab.view.history import PAGE

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _save(fig: Figure, out: Path, stem: str) -> list[Path]:
    written = []
    for ext, dpi in (("png", 110), ("svg", None)):
        path = out / f"{stem}.{ext}"
        with atomic_output(path) as tmp:
            save_figure(fig, tmp, ext, dpi)
        written.append(path)
        # The constrained layout placed the axes while drawing the PNG: keep that layout for
        # the SVG instead of solving it again (half of the time of a figure went there).
        fig.set_layout_engine("none")
    return written


def _label(v: MappingView) -> str:
    m = v.mapping
    return f"#{m.id} {m.name or '(unnamed)'} @ {m.start:#x} ({m.length / 2**20:.1f} MiB)"


#: x-axis label of time bins by the recording's time unit (the values are divided by 1e6).
TIME_LABELS = {
    "ns": "time (ms)",
    "instructions": "instructions executed (millions)",
    "accesses": "accesses of the thread (millions)",
}


#: Where the memory is: ``(start, end, node)`` address ranges and each node's ``(name,
#: tier)`` (:func:`tierlab.plots.node_tiers`).
Tiers = tuple[list[tuple[int, int, int]], plots.Nodes]


def tier_rows(v: MappingView, tiers: Tiers) -> list[tuple[float, float, int]]:
    """The node holding each block of the mapping's heatmap rows, as runs ``(first page, end
    page, node)`` on its address axis (pages from the mapping's start)."""
    rows = int(np.asarray(v.counts).shape[0])
    block = v.block_pages * PAGE
    starts = [v.mapping.start + r * block for r in range(rows)]
    per_row = plots.bin_nodes(starts, [block] * rows, tiers[0])
    return [
        (float(lo * v.block_pages), float(hi * v.block_pages), n)
        for lo, hi, n in plots.tier_runs(per_row)
    ]


def heatmap_figure(
    v: MappingView, points: str, time_unit: str = "ns", tiers: Tiers | None = None
) -> Figure:
    """The mapping's heatmap as an image; ``tiers`` (where the memory is) adds the node strip
    along the address axis (:func:`tierlab.plots.draw_tiers`)."""
    from matplotlib.colors import LogNorm
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 5), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(f"{_label(v)}: {v.samples} {points}", fontsize=10)
    if v.x_kind == "snapshot":
        ax.set_xlabel("snapshot (aggregation interval)")
        x = v.x_edges
    elif v.x_kind == "drain":
        per = f" ({v.drains_per_column} per column)" if v.drains_per_column > 1 else ""
        ax.set_xlabel(f"sample set (drain index){per}")
        x = v.x_edges
    else:
        ax.set_xlabel(TIME_LABELS.get(time_unit, TIME_LABELS["ns"]))
        x = v.x_edges / 1e6
    ax.set_ylabel(f"page in mapping (blocks of {v.block_pages} pages)")
    counts = v.counts
    if counts.max() <= 0:
        ax.text(0.5, 0.5, f"no {points}", ha="center", va="center", transform=ax.transAxes)
        return fig
    y = np.arange(counts.shape[0] + 1) * v.block_pages
    mesh = ax.pcolormesh(
        x,
        y,
        np.ma.masked_less_equal(counts, 0),
        norm=LogNorm(vmin=1, vmax=max(2, int(counts.max()))),
        cmap="viridis",
        shading="flat",
        rasterized=True,
    )
    ax.set_facecolor("#f4f4f4")
    what = "nr_accesses of the region" if points == "regions" else f"{points} per block and column"
    fig.colorbar(mesh, ax=ax, label=f"{what} (log)")
    if tiers is not None:
        plots.draw_tiers(ax, tier_rows(v, tiers), tiers[1])
    return fig


def histogram_figure(v: MappingView, points: str) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(f"{_label(v)}: pages by number of {points}", fontsize=10)
    ax.set_xlabel(f"{points} per page (N)")
    ax.set_ylabel("pages with N")
    if v.hist_n.size and v.hist_n.max() <= HIST_LINEAR_MAX:
        ax.bar(v.hist_n, v.hist_pages, width=0.9, color="#3b6ea8")
        if v.hist_pages.max() / max(1, v.hist_pages.min()) > 100:
            ax.set_yscale("log")
    elif v.hist_n.size:
        # Full traces: pages have up to millions of accesses; log-spaced bins on a log axis
        # (1-wide bars would be invisible).
        edges, counts = log_bins(v.hist_n, v.hist_pages)
        ax.stairs(counts, edges, fill=True, color="#3b6ea8")
        ax.set_xscale("log")
        ax.set_xlabel(f"{points} per page (N, log-spaced bins)")
        if counts.max() / max(1, counts[counts > 0].min()) > 100:
            ax.set_yscale("log")
    ax.text(
        0.98,
        0.95,
        f"{v.pages_touched} of {v.mapping.pages} pages touched"
        + (f" ({v.huge_pages_touched} huge pages)" if v.huge_pages_touched else ""),
        ha="right",
        va="top",
        transform=ax.transAxes,
    )
    return fig


def drain_figure(view: View) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    gaps = view.drain_intervals_ns / 1e6
    ax.set_title("time between drains (interrupts) of a CPU's buffer", fontsize=10)
    ax.set_xlabel("interval (ms)")
    ax.set_ylabel("drains")
    if gaps.size:
        ax.hist(gaps, bins=min(60, max(5, gaps.size // 3)), color="#a8553b")
    else:
        ax.text(0.5, 0.5, "fewer than two drains", ha="center", va="center", transform=ax.transAxes)
    return fig


def touched_figure(view: View) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, max(2.5, 0.45 * len(view.mappings) + 1.2)), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title("pages touched vs pages in the mapping", fontsize=10)
    names = [f"#{v.mapping.id} {v.mapping.name[-28:]}" for v in view.mappings]
    y = np.arange(len(names))
    pages = [v.mapping.pages for v in view.mappings]
    touched = [v.pages_touched for v in view.mappings]
    ax.barh(y + 0.2, pages, height=0.4, label="pages", color="#bbbbbb")
    ax.barh(y - 0.2, touched, height=0.4, label="touched", color="#3b6ea8")
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("pages")
    if view.mappings:
        ax.legend(loc="lower right")
        if max(pages) > 100 * max(1, min(t or 1 for t in touched)):
            ax.set_xscale("log")
    return fig


def write(view: View, out: Path, images: bool = False) -> list[Path]:
    """``view.json`` and the self-contained ``index.html`` (and with ``images`` every figure
    as PNG and SVG too), into ``out`` as a whole: written beside it and swapped in, so no
    file of an earlier view survives and an interrupted write leaves the old view. ``out``
    must be absent, empty, or an earlier view (``view.json``); anything else is refused."""
    with outdir.replacing(out, ("view",), outdir.OutputError) as staged:
        written = _write(view, staged, images)
    return [out / p.name for p in written]


#: What the figure workers draw (set before they are forked, read by them).
_JOBS: tuple[View, Path] | None = None


def _draw_mapping(i: int) -> list[str]:
    """Draw and save mapping ``i``'s heatmap and histogram (PNG and SVG); their names."""
    assert _JOBS is not None
    view, out = _JOBS
    v = view.mappings[i]
    names: list[str] = []
    for kind in ("heatmap", "histogram"):
        stem = f"mapping-{v.mapping.id}-{kind}"
        fig = (
            heatmap_figure(v, view.points, view.time_unit, view.tiers)
            if kind == "heatmap"
            else histogram_figure(v, view.points)
        )
        names.extend(p.name for p in _save(fig, out, stem))
    return names


#: Fewest mappings whose figures are drawn by worker processes (below, starting them costs
#: more than it saves).
PARALLEL_MIN_MAPPINGS = 4


def _draw_mappings(view: View, out: Path) -> list[list[str]]:
    """Every mapping's figures: in worker processes, one per idle core (at most two:
    drawing is most of a view's time), forked so they share the view without copying it; in
    this process where forking is not available, there are few mappings, or the other cores
    are busy (the load average, this process included, says so: there workers only add
    their start-up)."""
    import multiprocessing
    import os

    global _JOBS
    n = len(view.mappings)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        idle = int((cpus or 1) - os.getloadavg()[0] + 1)
    except OSError:
        idle = cpus or 1
    workers = min(2, cpus or 1, max(1, idle), n)
    _JOBS = (view, out)
    try:
        if (
            workers > 1
            and n >= PARALLEL_MIN_MAPPINGS
            and "fork" in multiprocessing.get_all_start_methods()
        ):
            from concurrent.futures import ProcessPoolExecutor

            ctx = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
                return list(pool.map(_draw_mapping, range(n)))
        return [_draw_mapping(i) for i in range(n)]
    finally:
        _JOBS = None


def _write(view: View, out: Path, images: bool) -> list[Path]:
    written: list[Path] = []
    if images:
        for v, names in zip(view.mappings, _draw_mappings(view, out), strict=True):
            v.files.extend(names)
            written.extend(out / name for name in names)
        for stem, draw in (("drain-intervals", drain_figure), ("pages-touched", touched_figure)):
            written.extend(_save(draw(view), out, stem))
    view.files = [p.name for p in written] + ["view.json", "index.html"]
    doc = view.to_json()
    js = out / "view.json"
    with atomic_output(js) as tmp:
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
    written.append(js)

    page = out / "index.html"
    page_of(view).write(page)
    written.append(page)
    return written


# -- the interactive page ---------------------------------------------------------------------


def _x_axis(v: MappingView, time_unit: str = "ns") -> tuple[str, np.ndarray]:
    """The heatmap's x title and column centres (drain indices, snapshots, or time in the
    recording's unit: ms, millions of instructions or of accesses)."""
    edges = np.asarray(v.x_edges, dtype=np.float64)
    if v.x_kind == "snapshot":
        title = "snapshot (aggregation interval)"
    elif v.x_kind == "drain":
        per = f", {v.drains_per_column} per column" if v.drains_per_column > 1 else ""
        title = f"sample set (drain index{per})"
    else:
        title = TIME_LABELS.get(time_unit, TIME_LABELS["ns"])
        edges = edges / 1e6
    if edges.size < 2:
        return title, np.zeros(v.counts.shape[1])
    return title, (edges[:-1] + edges[1:]) / 2


def _none_for_nan(a: np.ndarray) -> list[Any]:
    """``a`` as nested lists, None where it is NaN (JSON has no NaN; Plotly draws a gap)."""
    out = a.astype(object)
    out[~np.isfinite(a)] = None
    rows: list[Any] = out.tolist()
    return rows


def heatmap_spec(
    v: MappingView, points: str, time_unit: str = "ns", tiers: Tiers | None = None
) -> dict[str, Any]:
    """The mapping's heatmap as a Plotly figure: log colour scale (the colour is log10 of the
    count, the colour bar labelled in counts), hover with the page range and the count;
    ``tiers`` (where the memory is) adds the node strip left of the first column, one legend
    entry per node (:func:`tierlab.plots.tier_traces`)."""
    counts = np.asarray(v.counts, dtype=np.float64)
    xtitle, xs = _x_axis(v, time_unit)
    rows = counts.shape[0]
    ys = np.arange(rows) * v.block_pages
    z = np.where(counts > 0, np.log10(np.maximum(counts, 1)), np.nan)
    top = float(np.nanmax(z)) if np.isfinite(z).any() else 1.0
    ticks = list(range(0, math.floor(top) + 1))
    what = "nr_accesses" if points == "regions" else points
    layout: dict[str, Any] = {
        "title": {"text": f"{_label(v)}: {v.samples:,} {points}", "font": {"size": 14}},
        "xaxis": {"title": {"text": xtitle}},
        "yaxis": {"title": {"text": f"page in mapping (blocks of {v.block_pages} pages)"}},
        "plot_bgcolor": "#f4f4f4",
    }
    if not np.isfinite(z).any():
        layout["annotations"] = [
            {"text": f"no {points}", "showarrow": False, "xref": "paper", "yref": "paper"}
        ]
    trace = {
        "type": "heatmap",
        "x": xs.tolist(),
        "y": ys.tolist(),
        "z": _none_for_nan(np.round(z, 4)),
        "customdata": counts.astype(np.int64).tolist(),
        "colorscale": "Viridis",
        "zmin": 0,
        "zmax": max(top, 0.3),
        "colorbar": {
            "title": {"text": f"{what} (log)"},
            "tickvals": ticks,
            "ticktext": [f"{10**k:,}" for k in ticks],
        },
        # the block's address: the mapping's start plus the block's first page (%{y})
        "hovertemplate": plots.hover(
            f"{plots.address(v.mapping.start)} + page %{{y:,}} ({v.block_pages} pages)",
            f"%{{x:,.4~f}} ({xtitle})",
            "%{customdata:,}",
            what,
        ),
        "hoverongaps": False,
    }
    data = [trace]
    if tiers is not None and len(xs):
        span = float(xs[-1] - xs[0]) if len(xs) > 1 else 1.0
        col = span / max(len(xs) - 1, 1)
        width = max(span, col) * 0.03
        half = v.block_pages / 2  # a row's y is its centre
        rows = [(lo - half, hi - half, n) for lo, hi, n in tier_rows(v, tiers)]
        data += plots.tier_traces(rows, tiers[1], float(xs[0]) - col / 2 - width, width)
        layout["showlegend"] = True
        layout["legend"] = {
            "title": {"text": "memory node"},
            "orientation": "h",
            "y": -0.25,
            "yanchor": "top",
        }
    return {"data": data, "layout": layout}


#: Most distinct counts per page drawn one bar each; beyond, log-spaced bins (as the PNG).
HIST_LINEAR_MAX = 60


def log_bins(hist_n: np.ndarray, hist_pages: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pages by count per page in log-spaced bins: ``(edges, pages per bin)`` (about 40
    bins from 1 to the largest count)."""
    top = float(hist_n.max())
    edges = np.unique(np.geomspace(1, top + 1, 41).round())
    if edges[-1] <= top:
        edges = np.append(edges, top + 1)
    counts, _ = np.histogram(hist_n, bins=edges, weights=hist_pages)
    return edges, counts


def histogram_spec(v: MappingView, points: str) -> dict[str, Any]:
    """Pages by number of samples (bars, one per count up to :data:`HIST_LINEAR_MAX`, else
    log-spaced bins on a log x axis, as the PNG); log y when the counts span two decades."""
    hist_n = np.asarray(v.hist_n)
    hist_pages = np.asarray(v.hist_pages)
    xaxis: dict[str, Any] = {"title": {"text": f"{points} per page (N)"}, "automargin": True}
    if hist_n.size and hist_n.max() > HIST_LINEAR_MAX:
        edges, counts = log_bins(hist_n, hist_pages)
        keep = counts > 0
        lo, hi = edges[:-1][keep], edges[1:][keep] - 1
        pages = counts[keep].astype(np.int64).tolist()
        trace: dict[str, Any] = {
            "type": "bar",
            # Bars centred (geometrically) in their bins, each as wide as its bin.
            "x": np.sqrt(np.maximum(lo, 1) * np.maximum(hi, 1)).tolist(),
            "width": (hi - lo + 1).tolist(),
            "y": pages,
            "customdata": np.stack([lo, hi], axis=1).astype(np.int64).tolist(),
            "marker": {"color": "#3b6ea8"},
            "hovertemplate": f"%{{y:,}} pages with %{{customdata[0]:,}}-%{{customdata[1]:,}} "
            f"{points}<extra></extra>",
        }
        xaxis = {
            "title": {"text": f"{points} per page (N, log-spaced bins)"},
            "type": "log",
            "automargin": True,
        }
    else:
        pages = hist_pages.tolist()
        trace = {
            "type": "bar",
            "x": hist_n.tolist(),
            "y": pages,
            "marker": {"color": "#3b6ea8"},
            "hovertemplate": f"%{{y:,}} pages with %{{x:,}} {points}<extra></extra>",
        }
    log = bool(pages) and max(pages) / max(1, min(pages)) > 100
    return {
        "data": [trace],
        "layout": {
            "title": {
                "text": f"pages by number of {points}: {v.pages_touched:,} of "
                f"{v.mapping.pages:,} pages touched",
                "font": {"size": 14},
            },
            "xaxis": xaxis,
            "yaxis": {
                "title": {"text": "pages with N"},
                "type": "log" if log else "linear",
                "automargin": True,
            },
            "bargap": 0.05,
        },
    }


def drain_spec(view: View) -> dict[str, Any]:
    """The distribution of time between drains (ms)."""
    gaps = np.asarray(view.drain_intervals_ns, dtype=np.float64) / 1e6
    layout: dict[str, Any] = {
        "title": {
            "text": "time between drains (interrupts) of a CPU's buffer",
            "font": {"size": 14},
        },
        "xaxis": {"title": {"text": "interval (ms)"}},
        "yaxis": {"title": {"text": "drains"}},
        "bargap": 0.02,
    }
    if gaps.size < 1:
        layout["annotations"] = [
            {"text": "fewer than two drains", "showarrow": False, "xref": "paper", "yref": "paper"}
        ]
        return {"data": [{"type": "bar", "x": [], "y": [], "name": "drains"}], "layout": layout}
    hist, edges = np.histogram(gaps, bins=min(60, max(5, gaps.size // 3)))
    centres = (edges[:-1] + edges[1:]) / 2
    return {
        "data": [
            {
                "type": "bar",
                "x": centres.tolist(),
                "y": hist.tolist(),
                "width": float(edges[1] - edges[0]),
                "marker": {"color": "#a8553b"},
                "customdata": np.stack([edges[:-1], edges[1:]], axis=1).tolist(),
                "hovertemplate": "%{y:,} drains %{customdata[0]:.3f}-%{customdata[1]:.3f} ms"
                "<extra></extra>",
            }
        ],
        "layout": layout,
    }


def touched_spec(view: View) -> dict[str, Any]:
    """Pages touched vs pages per mapping (horizontal bars)."""
    names = [f"#{v.mapping.id} {v.mapping.name[-28:]}" for v in view.mappings]
    pages = [v.mapping.pages for v in view.mappings]
    touched = [v.pages_touched for v in view.mappings]
    log = bool(pages) and max(pages) > 100 * max(1, min(t or 1 for t in touched))
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "name": "pages",
                "y": names,
                "x": pages,
                "marker": {"color": "#bbbbbb"},
                "hovertemplate": "%{y}: %{x:,} pages<extra></extra>",
            },
            {
                "type": "bar",
                "orientation": "h",
                "name": "touched",
                "y": names,
                "x": touched,
                "marker": {"color": "#3b6ea8"},
                "hovertemplate": "%{y}: %{x:,} pages touched<extra></extra>",
            },
        ],
        "layout": {
            "title": {"text": "pages touched vs pages in the mapping", "font": {"size": 14}},
            "barmode": "group",
            "xaxis": {"title": {"text": "pages"}, "type": "log" if log else "linear"},
            "yaxis": {"autorange": "reversed"},
        },
    }


def duration_text(duration: float | None, time_unit: str) -> str:
    """A recording's duration in its time unit (``time_ns`` counts instructions or accesses
    in some traces, not nanoseconds)."""
    if duration is None:
        return "-"
    if time_unit in ("instructions", "accesses"):
        return f"{pg.fmt_number(int(duration))} {time_unit}"
    return pg.fmt_ns(duration)


def page_of(view: View) -> pg.Page:
    """The interactive page of a view (see the module docs)."""
    t = view.totals
    di = t["drain_interval"]
    points = view.points
    name = Path(view.path).name
    page = pg.Page(
        f"tierlab view: {name}",
        subtitle=f"{view.path} ({view.source or 'unknown source'})",
        footer="written by tierlab view; the numbers are in view.json beside this page",
    )
    # A full trace (every access, no PMU, no buffer drains) has none of a sampler's rows.
    sampled = not (points == "accesses" and not t["drains"])
    rows: list[tuple[str, str]] = [
        ("recording", view.path),
        ("source", view.source or "-"),
        (points, pg.fmt_number(t[points])),
        ("assigned to a mapping", pg.fmt_number(t["assigned"])),
        ("in no mapping (dropped)", pg.fmt_number(t["unassigned"])),
        ("mappings (shown)", f"{t['mappings']:,} ({t['mappings_shown']:,})"),
    ]
    if sampled:
        rows += [
            ("drains", pg.fmt_number(t["drains"])),
            (
                "time between drains",
                f"mean {pg.fmt_ns(di['mean_ns'])}, median {pg.fmt_ns(di['median_ns'])}"
                if di.get("count")
                else "-",
            ),
            ("lost records", pg.fmt_number(t["lost"])),
            ("samples lost by the PMU", pg.fmt_number(t["lost_samples"])),
            ("throttled", f"{t['throttled']:,} times"),
            (
                "memory levels (data_src)",
                ", ".join(f"{k}: {c:,}" for k, c in t.get("memory_levels", {}).items()) or "-",
            ),
        ]
    rows += [
        ("threads", pg.fmt_number(t["threads"])),
        ("duration", duration_text(t.get("duration_ns"), view.time_unit)),
        (
            "recording complete",
            "yes" if t["complete"] else "no (the recorder stopped early or was killed)",
        ),
    ]
    overview = page.section("Overview")
    if not t["complete"]:
        overview.add(
            pg.Paragraph(
                "This recording is incomplete (complete: false in meta.json): its recorder "
                "stopped early or was killed, and this view shows what it wrote."
            )
        )
    overview.add(pg.KeyValues(rows))
    if view.mappings:
        overview.add(
            pg.Table(
                [
                    pg.Column("mapping", format="text"),
                    pg.Column("start", format="text"),
                    pg.Column("length", format="bytes"),
                    pg.Column(points, format="int"),
                    pg.Column("pages touched", format="int"),
                    pg.Column("pages", format="int"),
                    pg.Column("touched", format="pct", digits=3),
                ],
                [
                    [
                        f"#{v.mapping.id} {v.mapping.name or '(unnamed)'}",
                        f"{v.mapping.start:#x}",
                        v.mapping.length,
                        v.samples,
                        v.pages_touched,
                        v.mapping.pages,
                        v.pages_touched / v.mapping.pages if v.mapping.pages else None,
                    ]
                    for v in view.mappings
                ],
            )
        )
    overview.add(pg.Figure(touched_spec(view), height=max(260, 40 * len(view.mappings) + 140)))
    if sampled:
        overview.add(pg.Figure(drain_spec(view), height=340))
    if view.symbols is not None:
        _symbols_section(page, view)
    if view.sites is not None:
        _sites_section(page, view)
    for v in view.mappings:
        m = v.mapping
        sec = page.section(f"#{m.id} {m.name or '(unnamed)'}", id=f"mapping-{m.id}")
        sec.add(
            pg.KeyValues(
                [
                    ("start", f"{m.start:#x}"),
                    ("length", f"{pg.fmt_bytes(m.length)} ({m.length:,} bytes)"),
                    (points, pg.fmt_number(v.samples)),
                    ("pages touched / pages", f"{v.pages_touched:,} / {m.pages:,}"),
                    ("threads", pg.fmt_number(v.threads)),
                    ("mapped at", pg.fmt_ns(m.map_time_ns)),
                    ("unmapped at", "-" if m.unmap_time_ns is None else pg.fmt_ns(m.unmap_time_ns)),
                ]
            ),
            pg.Figure(heatmap_spec(v, points, view.time_unit, view.tiers), height=460),
            pg.Figure(histogram_spec(v, points), height=340),
        )
    if not view.mappings:
        overview.add(pg.Paragraph(f"No {points} fall in a mapping."))
    return page


def _sites_section(page: pg.Page, view: View) -> None:
    """Per allocation site: what was allocated there, touched and accessed (``sites.py``)."""
    rep = view.sites
    sec = page.section("Allocation sites", id="sites")
    share = rep.in_allocations / rep.accesses if rep.accesses else 0.0
    sec.add(
        pg.Paragraph(
            f"Every {'access' if rep.points == 'accesses' else 'sample'} given to the "
            "allocation live at its address and time: "
            f"{rep.in_allocations:,} of {rep.accesses:,} ({100 * share:.1f}%) fall in "
            f"allocations of {len(rep.rows)} call site(s) (grouped by {rep.depth} frame(s)). "
            f"Hot share: the site's part of the accesses to the {rep.hot_pages} hottest pages, "
            f"which take {100 * rep.hot_fraction:.0f}% of all; phases: accesses in "
            f"{rep.phases} equal spans of the recording's time (sites.json has every figure)."
        )
    )
    sec.add(
        pg.Table(
            [
                pg.Column("site", format="text"),
                pg.Column("allocations", format="int"),
                pg.Column("allocated", format="bytes"),
                pg.Column("most live", format="bytes"),
                pg.Column("touched", format="bytes"),
                pg.Column("loads", format="int"),
                pg.Column("stores", format="int"),
                pg.Column("per byte", format="number", digits=3),
                pg.Column("hot share", format="pct", digits=3),
                pg.Column("phases", format="text"),
            ],
            [
                [
                    " < ".join(r.stack) or r.location,
                    r.allocations,
                    r.bytes_allocated,
                    r.peak_bytes,
                    r.bytes_touched,
                    r.loads,
                    r.stores,
                    r.accesses_per_byte,
                    r.hot_share,
                    " ".join(f"{p:,}" for p in r.phases),
                ]
                for r in rep.rows
            ],
        )
    )
    for note in rep.notes:
        sec.add(pg.Paragraph(note))


def _symbols_section(page: pg.Page, view: View) -> None:
    """Samples per symbol with their memory levels and data mappings (``perf mem report``)."""
    sec = page.section("Symbols", id="symbols")
    rows = view.symbols or []
    st = view.totals.get("symbols", {})
    sec.add(
        pg.Paragraph(
            f"The instruction of each sample (its IP) resolved to a symbol of the file mapped "
            f"there (.symtab, else .dynsym; FILE+0xOFFSET when no symbol holds it, [unknown] "
            f"outside files): {st.get('samples_in_symbols', 0):,} of "
            f"{st.get('samples_with_ip', 0):,} samples with an IP fall in "
            f"{st.get('distinct_symbols', 0):,} symbols; the top {len(rows)} are listed."
        )
    )
    levels = [k for k in datasrc.ORDER if any(k in r.levels for r in rows)]
    sec.add(
        pg.Table(
            [
                pg.Column("symbol", format="text"),
                pg.Column("object", format="text"),
                pg.Column(view.points, format="int"),
                pg.Column("share", format="pct", digits=3),
                *[pg.Column(k, format="int") for k in levels],
                pg.Column("data mappings", format="text"),
            ],
            [
                [
                    r.symbol,
                    Path(r.obj).name if r.obj.startswith("/") else r.obj,
                    r.samples,
                    r.share,
                    *[r.levels.get(k, 0) for k in levels],
                    ", ".join(f"{n} ({c:,})" for n, c in r.data),
                ]
                for r in rows
            ],
        )
    )
    for note in view.symbol_notes:
        sec.add(pg.Paragraph(note))
