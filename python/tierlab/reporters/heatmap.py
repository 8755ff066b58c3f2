"""Access heatmap: ``heatmap.parquet`` (long table) and ``heatmap.png`` / ``heatmap.svg``.

x = time (one column per window), y = address bins (bins of all mappings stacked in address
order), colour = accesses per window and bin on a log scale; mapping boundaries are drawn as
lines and each mapping is labelled with its name and start address. When the run placed its
memory by a plan (``result.plan``: address ranges and their nodes), a colour strip along the
address axis shows the node holding each bin, named with its tier in a legend
(:func:`tierlab.plots.draw_tiers`).
"""

from __future__ import annotations

import itertools
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tierlab import plots
from tierlab import stats_keys as sk
from tierlab.api import heatmap_frame
from tierlab.outdir import atomic_output
from tierlab.reporters.base import Reporter, save_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from tierlab._native import Heatmap
    from tierlab.api import Result

#: At most this many mappings get a label (the largest ones); the others still get lines.
MAX_LABELS = 24


def _runs(names: list[str]) -> list[tuple[int, int, str]]:
    """Runs of consecutive bins of the same mapping: (first bin, end bin, name)."""
    runs: list[tuple[int, int, str]] = []
    for i, name in enumerate(names):
        if runs and runs[-1][2] == name:
            runs[-1] = (runs[-1][0], i + 1, name)
        else:
            runs.append((i, i + 1, name))
    return runs


#: What an empty heatmap says when the run counted no ground truth.
NO_TRUTH_NOTE = "no ground truth counted (report.ground_truth = false)"


#: Where the memory is: ``(start, end, node)`` address ranges and each node's
#: ``(name, tier)`` (:func:`tierlab.plots.node_tiers`).
Tiers = tuple[list[tuple[int, int, int]], plots.Nodes]


def heatmap_figure(
    heatmap: Heatmap,
    title: str = "",
    empty_note: str = "no accesses",
    tiers: Tiers | None = None,
) -> Figure:
    """A matplotlib figure of a native heatmap dict (Agg backend, no display needed), in
    tierlab's plot style; ``empty_note`` is written on it when there is nothing to show;
    ``tiers`` (where the memory is) adds the node strip along the address axis."""
    with plots.style():
        return _heatmap_figure(heatmap, title, empty_note, tiers)


def run_tiers(result: Any) -> Tiers | None:
    """Where a run's memory is, when it knows: its placement plan's ranges and the machine's
    nodes (None for a run without a plan)."""
    plan = result.plan
    if not plan:
        return None
    nodes = tomllib.loads(result.scenario).get("machine", {}).get("nodes", [])
    return [(int(a), int(b), int(n)) for a, b, n in plan], plots.node_tiers(nodes)


def _heatmap_figure(heatmap: Heatmap, title: str, empty_note: str, tiers: Tiers | None) -> Figure:
    from matplotlib.colors import LogNorm
    from matplotlib.figure import Figure

    counts = np.asarray(heatmap.get("counts") or [], dtype=float)
    t0 = np.asarray(heatmap.get("t_start_s") or [], dtype=float)
    t1 = np.asarray(heatmap.get("t_end_s") or [], dtype=float)
    starts = [int(s) for s in heatmap.get("bin_start") or []]
    names = [str(n) for n in heatmap.get("bin_mapping") or []]

    fig = Figure(figsize=(10, 6), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title or "accesses by address over time")
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("address (bins of each mapping, in address order)")
    if counts.size == 0 or counts.max() <= 0 or not starts:
        ax.text(0.5, 0.5, empty_note, ha="center", va="center", transform=ax.transAxes)
        return fig

    counts = counts.reshape(len(t0), len(starts))
    x_edges = np.append(t0, t1[-1])
    y_edges = np.arange(len(starts) + 1)
    masked = np.ma.masked_less_equal(counts.T, 0)
    mesh = ax.pcolormesh(
        x_edges,
        y_edges,
        masked,
        norm=LogNorm(vmin=float(counts[counts > 0].min()), vmax=float(counts.max())),
        cmap="viridis",
        shading="flat",
        rasterized=True,
    )
    ax.set_facecolor("#f4f4f4")
    bar = fig.colorbar(mesh, ax=ax, label="accesses per window and bin (log scale)")
    plots.readable_ticks(bar.ax)

    runs = _runs(names)
    for lo, _hi, _name in runs[1:]:
        ax.axhline(lo, color="white", linewidth=2.0)
        ax.axhline(lo, color="crimson", linewidth=1.0, linestyle="--")
    labelled = sorted(runs, key=lambda r: r[1] - r[0], reverse=True)[:MAX_LABELS]
    labelled.sort()
    ax.set_yticks([(lo + hi) / 2 for lo, hi, _ in labelled])
    ax.set_yticklabels(
        [f"{name} @ {plots.address(starts[lo])}" for lo, _hi, name in labelled], fontsize=8
    )
    ax.set_ylim(0, len(starts))
    ax.set_xlim(x_edges[0], x_edges[-1])
    if tiers is not None:
        sizes = [int(b) for b in heatmap.get("bin_bytes") or []]
        if len(sizes) != len(starts):  # each bin up to the next one's start
            sizes = [b - a for a, b in itertools.pairwise(starts)]
            sizes.append(sizes[-1] if sizes else 1)
        per_bin = plots.bin_nodes(starts, sizes, tiers[0])
        strip = [(float(lo), float(hi), n) for lo, hi, n in plots.tier_runs(per_bin)]
        plots.draw_tiers(ax, strip, tiers[1])
    return fig


class HeatmapReporter(Reporter):
    name = "heatmap"
    files = ("heatmap.parquet", "heatmap.png", "heatmap.svg")

    def write(self, result: Result, out_dir: Path) -> list[Path]:
        table = out_dir / "heatmap.parquet"
        with atomic_output(table) as tmp:
            heatmap_frame(result.heatmap).to_parquet(tmp, index=False)
        title = f"{result.name} (seed {result.seed}): accesses by address over time"
        if result.interrupted:
            title += " [interrupted]"
        # A run without ground truth (`report.ground_truth = false`) has no counts to bin.
        counted = sk.RUN_GROUND_TRUTH_ACCESSES in result.stats_flat
        fig = heatmap_figure(
            result.heatmap,
            title,
            "no accesses" if counted else NO_TRUTH_NOTE,
            run_tiers(result),
        )
        written = [table]
        for ext, dpi in (("png", 120), ("svg", None)):
            path = out_dir / f"heatmap.{ext}"
            with atomic_output(path) as tmp:
                save_figure(fig, tmp, ext, dpi)
            written.append(path)
        return written
