"""The one style of tierlab's plots, used by every reporter and every figure it draws
(matplotlib files and the interactive pages' hover text):

* **Reproducible files**: the Agg backend, a fixed salt for the SVG element ids
  (``svg.hashsalt``) and no creation date in the SVG metadata (``SOURCE_DATE_EPOCH``,
  matplotlib's way of leaving it out, set unless the environment sets it), so the same data
  give the same files byte for byte.
* **Words, not keys**: :func:`words` turns a statistic's or time-series column's name
  (``workload.kv.throughput``) into what it is with its unit ("requests per second (req/s)");
  :func:`finish` does it for every title, axis label and legend entry of a figure that is
  still a raw name.
* **Readable ticks**: :func:`human` writes 287,520 or 2.9 M, never ``2.8752x10^5``; on log
  axes too.
* **Every series visible**: the colour cycle also cycles markers and dash patterns
  (:data:`RC`), so a series drawn over another still shows.
* **Legends outside the data**: :func:`finish` moves each axes' legend to the right of it.
* **Heatmaps**: :func:`address` for address ticks, :func:`hover` is the one hover text
  (address, time, count) of the interactive pages; where the data know which memory node
  holds each address range, :func:`draw_tiers` (images) and :func:`tier_traces` (interactive
  pages) draw it as a colour strip along the address axis, with a legend naming each node
  and its tier (:func:`tier_label`: "dram (tier 0)").
"""

from __future__ import annotations

import math
import os
import re
from contextlib import contextmanager
from typing import Any

#: matplotlib settings of every tierlab figure.
RC: dict[str, Any] = {
    "svg.hashsalt": "tierlab",
    "axes.formatter.useoffset": False,
    "axes.formatter.use_mathtext": False,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "lines.markersize": 4,
    "patch.linewidth": 0.6,
    "hist.bins": 40,
}

#: Series styles, in order: colour, marker and dash pattern change together, so two series
#: that coincide still both show (the marker of one over the line of the other).
COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
DASHES = ("-", "--", "-.", ":", "-", "--", "-.", ":", "-", "--")


def _cycle() -> Any:
    from cycler import cycler

    return cycler(color=COLOURS) + cycler(marker=MARKERS) + cycler(linestyle=DASHES)


def rc() -> Any:
    """:data:`RC` with the series cycle."""
    return {**RC, "axes.prop_cycle": _cycle()}


def pyplot() -> Any:
    """``matplotlib.pyplot`` with tierlab's style (see the module docs)."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams.update(rc())
    os.environ.setdefault("SOURCE_DATE_EPOCH", "0")
    import matplotlib.pyplot as plt

    return plt


@contextmanager
def style() -> Any:
    """tierlab's style for figures made without pyplot (``matplotlib.figure.Figure``)."""
    import matplotlib

    os.environ.setdefault("SOURCE_DATE_EPOCH", "0")
    with matplotlib.rc_context(rc()):
        yield


# -- words -----------------------------------------------------------------------------------------

#: Units of the statistics catalogue, as an axis label writes them.
UNIT_WORDS = {
    "s": "s",
    "ns": "ns",
    "us": "us",
    "ms": "ms",
    "bytes": "bytes",
    "per s": "/s",
    "fraction": "fraction",
    "percent": "%",
    "%": "%",
}

#: Names of result-table columns (not in the statistics catalogue) in words.
COLUMN_WORDS = {
    "throughput_rps": "throughput (requests/s)",
    "p95_us": "p95 latency (us)",
    "p99_us": "p99 latency (us)",
    "run_time_s": "run time (s)",
    "remote_tlb_invalidations": "remote TLB invalidations",
    "dtlb_misses": "dTLB misses",
    "page_faults": "page faults",
    "pte_copy_faults": "PTE copy faults",
    "relative_performance": "performance relative to all memory fast",
    "overhead_pct": "overhead (%)",
    "mean_precision": "mean precision",
    "mean_recall": "mean recall",
    "precision": "precision (bytes, per window)",
    "recall": "recall (bytes, per window)",
    "observer_cpu_s": "observer CPU (s)",
    "share_of_optimum": "share of the optimum gain",
    "promoted_pages": "promoted pages",
    "demoted_pages": "demoted pages",
    "fast_used_bytes": "fast tier used (bytes)",
}

#: A raw name: a dotted statistics key or a snake_case column name.
RAW = re.compile(r"^[a-z][a-z0-9]*(?:[._][a-z0-9]+)+$")


def is_raw(text: str) -> bool:
    """Whether ``text`` (a title, an axis label, a legend entry) is an internal name: a known
    statistic or column, or a dotted / snake_case identifier."""
    from tierlab import stats_keys as sk

    t = text.strip()
    if not t:
        return False
    if t in COLUMN_WORDS or sk.entry_of(t) is not None or sk.column_of(t) is not None:
        return True
    # "bt: remote_tlb_invalidations": a label that ends in a raw name
    return any(bool(RAW.match(part.strip())) for part in re.split(r"[:(),]", t) if part.strip())


def words(name: str) -> str:
    """What statistic or column ``name`` is, with its unit: ``workload.kv.throughput`` ->
    ``key-value store: requests per second (per s)``. Text that is not a name is returned
    as it is."""
    from tierlab import stats_keys as sk

    if name in COLUMN_WORDS:
        return COLUMN_WORDS[name]
    entry = sk.entry_of(name) or sk.column_of(name)
    if entry is not None:
        unit = UNIT_WORDS.get(entry.unit, entry.unit)
        about = entry.about
        # a family's entry ("node.{name}.accesses"): say which member
        pattern = re.sub(r"\\\{\w+\\\}", "([^.]+)", re.escape(entry.key))
        m = re.fullmatch(pattern, name)
        if m and m.groups():
            about = f"{about}: {', '.join(m.groups())}"
        return about if unit in ("count", "label", "flag", "") else f"{about} ({unit})"
    if RAW.match(name):
        return name.replace(".", " ").replace("_", " ")
    return name


def _words_in(text: str) -> str:
    """``text`` with every raw name in it put in words ("bt: remote_tlb_invalidations" ->
    "bt: remote TLB invalidations")."""
    if not is_raw(text):
        return text
    if RAW.match(text.strip()) or text.strip() in COLUMN_WORDS:
        return words(text.strip())
    return re.sub(r"[a-z][a-z0-9]*(?:[._][a-z0-9]+)+", lambda m: words(m.group(0)), text)


# -- numbers ---------------------------------------------------------------------------------------


def human(value: float, _pos: Any = None) -> str:
    """A tick or hover number: 0.05, 12, 4,096, 287,520, 2.9 M, 5.5 G; never a power of ten
    in scientific notation."""
    if value is None or not math.isfinite(value):
        return ""
    a = abs(value)
    if a == 0:
        return "0"
    if a >= 1e9:
        return f"{value / 1e9:.3g} G"
    if a >= 1e6:
        return f"{value / 1e6:.3g} M"
    if a >= 1000:
        return f"{value:,.0f}"
    if a >= 1:
        return f"{value:.3g}"
    return f"{value:.2g}"


def address(value: int) -> str:
    """An address for a tick or a hover: ``0x7f00_0000_0000``."""
    h = f"{int(value):x}"
    groups = [h[max(0, i - 4) : i] for i in range(len(h), 0, -4)][::-1]
    return "0x" + "_".join(groups)


def hover(addr: str, time: str, count: str, what: str = "accesses") -> str:
    """The hover text of a heatmap cell (a Plotly ``hovertemplate``, whose ``%{...}`` fields
    are filled in by the browser): address, time and count, each named."""
    return f"address {addr}<br>time {time}<br>{what} {count}<extra></extra>"


# -- tiers along a heatmap's address axis ----------------------------------------------------------

#: Colours of the memory nodes in tier order (the fastest first), apart from viridis.
TIER_COLOURS = ("#d62728", "#1f77b4", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f")


def tier_label(name: str, tier: int | None) -> str:
    """A node in a tier legend: ``dram (tier 0)``; its name alone when its tier is unknown."""
    return name if tier is None else f"{name} (tier {tier})"


#: A machine's nodes for a tier strip: ``(name, tier)`` (tier None: unknown).
Nodes = list[tuple[str, int | None]]


def node_tiers(nodes: list[dict[str, Any]]) -> Nodes:
    """``(name, tier)`` of each node of a machine (its ``[[machine.nodes]]`` tables): the
    node's own ``tier`` where every node states one, else its rank by access latency
    (``latency_ns``, fastest = 0, equal latencies one tier), else its position."""
    names = [str(n.get("name", f"node {i}")) for i, n in enumerate(nodes)]
    tiers = [n.get("tier") for n in nodes]
    if all(isinstance(t, int) for t in tiers):
        return [(names[i], int(tiers[i])) for i in range(len(nodes))]  # type: ignore[arg-type]
    lat = [n.get("latency_ns") for n in nodes]
    if all(isinstance(x, int | float) for x in lat):
        levels = sorted({float(x) for x in lat})  # type: ignore[arg-type]
        return [(names[i], levels.index(float(lat[i]))) for i in range(len(nodes))]  # type: ignore[arg-type]
    return [(names[i], i) for i in range(len(nodes))]


def bin_nodes(
    bin_start: list[int], bin_bytes: list[int], ranges: list[tuple[int, int, int]]
) -> list[int | None]:
    """The node holding most of each address bin's bytes, from ``(start, end, node)``
    ranges (None: no range covers the bin)."""
    import numpy as np

    if not ranges:
        return [None] * len(bin_start)
    rs = sorted(ranges)
    lo = np.array([r[0] for r in rs], dtype=np.uint64)
    out: list[int | None] = []
    for start, size in zip(bin_start, bin_bytes, strict=True):
        end = start + max(int(size), 1)
        held: dict[int, int] = {}
        i = max(int(np.searchsorted(lo, np.uint64(start), side="right")) - 1, 0)
        while i < len(rs) and rs[i][0] < end:
            a, b, node = rs[i]
            overlap = min(b, end) - max(a, start)
            if overlap > 0:
                held[node] = held.get(node, 0) + overlap
            i += 1
        out.append(max(held, key=lambda n: (held[n], -n)) if held else None)
    return out


def tier_runs(per_bin: list[int | None]) -> list[tuple[int, int, int]]:
    """Runs of consecutive bins on the same node: ``(first bin, end bin, node)``."""
    runs: list[tuple[int, int, int]] = []
    for i, node in enumerate(per_bin):
        if node is None:
            continue
        if runs and runs[-1][2] == node and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1, node)
        else:
            runs.append((i, i + 1, node))
    return runs


def _node_colours(nodes: Nodes) -> list[str]:
    """A colour per node, given in tier order (the fastest tier's first node first), so two
    nodes of one tier (NUMA nodes) still differ."""
    order = sorted(range(len(nodes)), key=lambda n: (nodes[n][1] or 0, n))
    colours = [""] * len(nodes)
    for k, n in enumerate(order):
        colours[n] = TIER_COLOURS[k % len(TIER_COLOURS)]
    return colours


def draw_tiers(ax: Any, runs: list[tuple[float, float, int]], nodes: Nodes) -> list[str]:
    """A colour strip along the left edge of a heatmap's address (y) axis: each run
    ``(y from, y to, node)`` in its node's colour (over the first 2.5% of the time
    axis), and a legend under the axes naming each node shown (:func:`tier_label`). Returns
    the legend's labels."""
    from matplotlib.patches import Patch, Rectangle

    shown: dict[int, str] = {}
    colours = _node_colours(nodes)
    trans = ax.get_yaxis_transform()  # x in axes fractions, y in data
    for lo, hi, node in runs:
        if node >= len(nodes):
            continue
        name, tier = nodes[node]
        colour = colours[node]
        ax.add_patch(
            Rectangle((0, lo), 0.025, hi - lo, transform=trans, facecolor=colour,
                      edgecolor="white", linewidth=0.5, zorder=3, clip_on=False)
        )  # fmt: skip
        shown.setdefault(node, tier_label(name, tier))
    if not shown:
        return []
    order = sorted(shown, key=lambda n: (nodes[n][1] or 0, n))
    handles = [Patch(facecolor=colours[n], label=shown[n]) for n in order]
    labels = [shown[n] for n in order]
    ax.figure.legend(
        handles=handles, labels=labels, title="memory node (strip at the left edge)",
        loc="outside lower center", ncols=min(len(handles), 4),
    )  # fmt: skip
    return labels


def tier_traces(
    runs: list[tuple[float, float, int]], nodes: Nodes, x: float, width: float
) -> list[dict[str, Any]]:
    """The same strip for an interactive (Plotly) heatmap: one filled trace per node along
    the address (y) axis at ``x`` (the first column's left edge), ``width`` wide, named in
    the legend (:func:`tier_label`), with hover naming the node and the address rows."""
    per_node: dict[int, list[tuple[float, float]]] = {}
    for lo, hi, node in runs:
        if node < len(nodes):
            per_node.setdefault(node, []).append((lo, hi))
    out = []
    colours = _node_colours(nodes)
    for node in sorted(per_node, key=lambda n: (nodes[n][1] or 0, n)):
        name, tier = nodes[node]
        xs: list[float | None] = []
        ys: list[float | None] = []
        for lo, hi in per_node[node]:
            xs += [x, x + width, x + width, x, x, None]
            ys += [lo, lo, hi, hi, lo, None]
        out.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": xs,
                "y": ys,
                "fill": "toself",
                "fillcolor": colours[node],
                "line": {"color": colours[node], "width": 1},
                "name": tier_label(name, tier),
                "legendgroup": "tiers",
                "hovertemplate": f"{tier_label(name, tier)}<extra></extra>",
            }
        )
    return out


# -- figures ---------------------------------------------------------------------------------------


def readable_ticks(ax: Any) -> None:
    """Human tick labels on both axes of ``ax`` (linear or log); category axes untouched."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, ScalarFormatter

    for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
        major = axis.get_major_formatter()
        if scale == "log":
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=8))
            axis.set_major_formatter(FuncFormatter(human))
            axis.set_minor_formatter(NullFormatter())
        elif isinstance(major, ScalarFormatter):
            axis.set_major_formatter(FuncFormatter(human))


def legend_outside(ax: Any) -> None:
    """Move ``ax``'s legend, if it has one, to the right of the axes (never over data)."""
    leg = ax.get_legend()
    if leg is None:
        return
    handles = leg.legend_handles
    labels = [t.get_text() for t in leg.get_texts()]
    title = leg.get_title().get_text()
    leg.remove()
    ax.legend(
        handles,
        [_words_in(x) for x in labels],
        title=_words_in(title) or None,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0.0,
    )


def finish(fig: Any) -> Any:
    """Apply the style's last rules to a drawn figure: titles, axis labels and legend entries
    in words (:func:`words` for any that is still a raw name), human ticks, legends outside
    the data. Returns ``fig``; a second call does nothing."""
    if getattr(fig, "_tierlab_finished", False):
        return fig
    fig._tierlab_finished = True
    if getattr(fig, "_suptitle", None) is not None:
        fig._suptitle.set_text(_words_in(fig._suptitle.get_text()))
    for ax in fig.get_axes():
        ax.set_title(_words_in(ax.get_title()))
        ax.set_xlabel(_words_in(ax.get_xlabel()))
        ax.set_ylabel(_words_in(ax.get_ylabel()))
        if ax.get_label() != "<colorbar>":
            readable_ticks(ax)
        legend_outside(ax)
    engine = fig.get_layout_engine()
    if engine is None or type(engine).__name__ == "TightLayoutEngine":
        fig.tight_layout()  # room for the legends moved outside
    return fig


def texts(fig: Any) -> list[str]:
    """Every title, axis label and legend entry of a figure (what :func:`finish` puts in
    words), for the tests."""
    out = []
    if getattr(fig, "_suptitle", None) is not None:
        out.append(fig._suptitle.get_text())
    for ax in fig.get_axes():
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        leg = ax.get_legend()
        if leg is not None:
            out += [t.get_text() for t in leg.get_texts()]
    return [t for t in out if t]
