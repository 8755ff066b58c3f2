"""Figures (PNG + SVG) and the self-contained HTML page of ``tierlab view``."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tierlab import outdir
from tierlab.reporters import atomic_output
from tierlab.view.analysis import MappingView, View

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _save(fig: Figure, out: Path, stem: str) -> list[Path]:
    written = []
    for ext, dpi in (("png", 110), ("svg", None)):
        path = out / f"{stem}.{ext}"
        with atomic_output(path) as tmp:
            fig.savefig(tmp, format=ext, dpi=dpi)
        written.append(path)
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


def heatmap_figure(v: MappingView, points: str, time_unit: str = "ns") -> Figure:
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
    return fig


def histogram_figure(v: MappingView, points: str) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(f"{_label(v)}: pages by number of {points}", fontsize=10)
    ax.set_xlabel(f"{points} per page (N)")
    ax.set_ylabel("pages with N")
    if v.hist_n.size and v.hist_n.max() <= 60:
        ax.bar(v.hist_n, v.hist_pages, width=0.9, color="#3b6ea8")
        if v.hist_pages.max() / max(1, v.hist_pages.min()) > 100:
            ax.set_yscale("log")
    elif v.hist_n.size:
        # Full traces: pages have up to millions of accesses; log-spaced bins on a log axis
        # (1-wide bars would be invisible).
        top = float(v.hist_n.max())
        edges = np.unique(np.geomspace(1, top + 1, 41).round())
        if edges[-1] <= top:
            edges = np.append(edges, top + 1)
        counts, _ = np.histogram(v.hist_n, bins=edges, weights=v.hist_pages)
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


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def _table(rows: list[tuple[str, object]]) -> str:
    body = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows
    )
    return f"<table>{body}</table>"


def write(view: View, out: Path) -> list[Path]:
    """Every figure (PNG and SVG), ``view.json`` and the self-contained ``index.html``, into
    ``out`` as a whole: written beside it and swapped in, so no file of an earlier view
    survives and an interrupted write leaves the old view. ``out`` must be absent, empty, or
    an earlier view (``view.json``); anything else is refused."""
    with outdir.replacing(out, ("view",), outdir.OutputError) as staged:
        written = _write(view, staged)
    return [out / p.name for p in written]


def _write(view: View, out: Path) -> list[Path]:
    written: list[Path] = []
    pngs: dict[str, Path] = {}
    for v in view.mappings:
        for kind in ("heatmap", "histogram"):
            stem = f"mapping-{v.mapping.id}-{kind}"
            fig = (
                heatmap_figure(v, view.points, view.time_unit)
                if kind == "heatmap"
                else histogram_figure(v, view.points)
            )
            files = _save(fig, out, stem)
            v.files.extend(p.name for p in files)
            pngs[stem] = files[0]
            written.extend(files)
    for stem, make in (("drain-intervals", drain_figure), ("pages-touched", touched_figure)):
        files = _save(make(view), out, stem)
        pngs[stem] = files[0]
        written.extend(files)
    view.files = [p.name for p in written] + ["view.json", "index.html"]
    doc = view.to_json()
    js = out / "view.json"
    with atomic_output(js) as tmp:
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
    written.append(js)

    t = view.totals
    di = t["drain_interval"]
    total_rows: list[tuple[str, object]] = [
        ("recording", view.path),
        ("source", view.source),
        (view.points, t[view.points]),
        ("assigned to a mapping", t["assigned"]),
        ("in no mapping (dropped)", t["unassigned"]),
        ("mappings (shown)", f"{t['mappings']} ({t['mappings_shown']})"),
        ("drains", t["drains"]),
        (
            "time between drains",
            f"mean {di['mean_ns'] / 1e6:.3f} ms, median {di['median_ns'] / 1e6:.3f} ms"
            if di.get("count")
            else "-",
        ),
        ("lost records / PMU-lost samples", f"{t['lost']} / {t['lost_samples']}"),
        ("throttled", t["throttled"]),
        (
            "memory levels (data_src)",
            ", ".join(f"{k}: {c}" for k, c in t.get("memory_levels", {}).items()) or "-",
        ),
        ("threads", t["threads"]),
        ("complete", t["complete"]),
    ]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>tierlab view: {html.escape(view.path)}</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1100px}"
        "table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;"
        "padding:2px 8px;text-align:left}img{max-width:100%}"
        "section{border-top:1px solid #ddd;margin-top:1.5em}</style></head><body>",
        f"<h1>tierlab view: {html.escape(Path(view.path).name)}</h1>",
        _table(total_rows),
        _img(pngs["pages-touched"]),
        _img(pngs["drain-intervals"]),
    ]
    for v in view.mappings:
        m = v.mapping
        parts.append(f"<section><h2>{html.escape(_label(v))}</h2>")
        parts.append(
            _table(
                [
                    ("start", f"{m.start:#x}"),
                    ("length", m.length),
                    (view.points, v.samples),
                    ("pages touched / pages", f"{v.pages_touched} / {m.pages}"),
                    ("threads", v.threads),
                    ("mapped at", f"{m.map_time_ns / 1e6:.3f} ms"),
                    (
                        "unmapped at",
                        "-" if m.unmap_time_ns is None else f"{m.unmap_time_ns / 1e6:.3f} ms",
                    ),
                ]
            )
        )
        parts.append(_img(pngs[f"mapping-{m.id}-heatmap"]))
        parts.append(_img(pngs[f"mapping-{m.id}-histogram"]))
        parts.append("</section>")
    if not view.mappings:
        parts.append(f"<p>No {view.points} fall in a mapping.</p>")
    parts.append("</body></html>\n")
    page = out / "index.html"
    with atomic_output(page) as tmp:
        tmp.write_text("".join(parts))
    written.append(page)
    return written
