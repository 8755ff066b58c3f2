"""One plot style (tierlab.plots) for every figure: titles, axes and legends in words with
units, never a raw statistics key; human ticks (no 2.8752x10^5); legends outside the data;
series told apart by marker and dash as well as colour. Renders each kind of figure on small
synthetic inputs (no simulation)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from conftest import REPO
from tierlab import plots
from tierlab.policies import HmemRecord


def _raw(texts: list[str]) -> list[str]:
    return [t for t in texts if plots.is_raw(t)]


def _tick_texts(fig: Any) -> list[str]:
    fig.canvas.draw()
    out = []
    for ax in fig.get_axes():
        out += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
    return [t for t in out if t]


SCIENTIFIC = re.compile(r"10\^|\\times|\u00d710|\de[+-]\d|\$")


def test_finish_puts_names_in_words_ticks_in_numbers_and_the_legend_outside() -> None:
    plt = plots.pyplot()
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [2.8752e5, 3.1e5, 4.4e5], label="node.dram.accesses")
    ax.plot([1, 2, 3], [2.8752e5, 3.1e5, 4.4e5], label="node.cxl.accesses")
    ax.set_yscale("log")
    ax.set_title("bt: remote_tlb_invalidations")
    ax.set_ylabel("workload.kv.throughput")
    ax.set_xlabel("t_end_s")
    ax.legend()
    plots.finish(fig)
    texts = plots.texts(fig)
    assert not _raw(texts), texts
    assert "key-value store: requests per second (/s)" in texts
    assert "bt: remote TLB invalidations" in texts
    assert "accesses served by a node: dram" in texts
    ticks = _tick_texts(fig)
    assert ticks and not [t for t in ticks if SCIENTIFIC.search(t)], ticks
    # the legend sits right of the axes, not over the data
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1
    # two coinciding series differ in marker and dash
    a, b = ax.get_lines()
    assert (a.get_marker(), a.get_linestyle()) != (b.get_marker(), b.get_linestyle())
    plt.close(fig)


def test_human_numbers() -> None:
    assert plots.human(287520) == "287,520"
    assert plots.human(13599.446) == "13,599"
    assert plots.human(4.2e6) == "4.2 M"
    assert plots.human(0.0417) == "0.042"
    assert plots.address(0x7F00_0000_1000) == "0x7f00_0000_1000"
    assert "address" in plots.hover("%{y}", "%{x}", "%{z}") and "time" in plots.hover("a", "b", "c")


def _heatmap() -> Any:
    from tierlab.reporters.heatmap import heatmap_figure

    counts = np.arange(1, 4 * 6 + 1, dtype=float).tolist()
    return heatmap_figure(
        {  # type: ignore[arg-type]
            "counts": counts,
            "t_start_s": [0.0, 0.1, 0.2, 0.3],
            "t_end_s": [0.1, 0.2, 0.3, 0.4],
            "bin_start": [0x1000 * i for i in range(6)],
            "bin_mapping": ["heap"] * 3 + ["stack"] * 3,
        },
        "demo (seed 1): accesses by address over time",
    )


def _records() -> list[HmemRecord]:
    out = []
    for w in ("bt",):
        for cores in (8, 16):
            for pol, p in (("fifo", None), ("lru", None), ("cmcp", 0.2), ("cmcp", 0.6)):
                out.append(
                    HmemRecord(
                        label=f"{w}/{cores}/{pol}",
                        workload=w,
                        cores=cores,
                        policy=pol,
                        page_tables="pspt",
                        page_size="4KiB",
                        fast_memory_fraction=0.5,
                        page_faults=1.0e5 * cores,
                        remote_tlb_invalidations=2.8752e5,
                        dtlb_misses=3.0e6,
                        pte_copy_faults=10.0,
                        data_moved_bytes=1e9,
                        fault_time_s=0.1,
                        run_time_s=1.0 + cores / 100,
                        evictions=5,
                        wall_seconds=1.0,
                        p=p,
                        relative_performance=0.6,
                        speedup=1.0,
                    )
                )
    return out


@pytest.mark.parametrize("kind", ["table1", "scaling", "p", "pagesize"])
def test_policy_figures_say_words(kind: str, tmp_path: Path, monkeypatch: Any) -> None:
    from matplotlib.figure import Figure

    from tierlab import policies

    seen: list[Any] = []
    plt = plots.pyplot()
    monkeypatch.setattr(plt, "close", lambda fig: seen.append(fig))
    monkeypatch.setattr(Figure, "savefig", lambda *a, **k: None)  # the texts, not the files
    files = policies.plot(SimpleNamespace(records=_records(), sweep_name=kind), tmp_path)  # type: ignore[arg-type]
    assert files and seen
    texts = plots.texts(seen[0])
    assert not _raw(texts), texts
    assert not [t for t in _tick_texts(seen[0]) if SCIENTIFIC.search(t)]


def test_the_heatmap_has_address_ticks_and_words() -> None:
    fig = _heatmap()
    plots.finish(fig)
    texts = plots.texts(fig)
    assert not _raw(texts), texts
    ticks = _tick_texts(fig)
    assert any(re.search(r"heap @ 0x", t) for t in ticks), ticks
    assert not [t for t in ticks if SCIENTIFIC.search(t)], ticks


#: Two nodes, the slower listed first (its tier comes from latency, not position).
TWO_TIERS = (
    [(0, 0x2000, 1), (0x2000, 0x6000, 0)],
    plots.node_tiers([{"name": "dram", "latency_ns": 80}, {"name": "cxl", "latency_ns": 250}]),
)


def test_node_tiers_and_bins() -> None:
    assert TWO_TIERS[1] == [("dram", 0), ("cxl", 1)]
    assert plots.node_tiers([{"name": "a"}, {"name": "b"}]) == [("a", 0), ("b", 1)]
    # the nodes' own tiers first; equal latencies one tier (two NUMA nodes)
    stated = [{"name": "n0", "tier": 0, "latency_ns": 90}, {"name": "n1", "tier": 0}]
    assert plots.node_tiers(stated) == [("n0", 0), ("n1", 0)]
    numa = [{"name": "n0", "latency_ns": 90}, {"name": "n1", "latency_ns": 90}]
    assert plots.node_tiers(numa) == [("n0", 0), ("n1", 0)]
    starts = [0x1000 * i for i in range(6)]
    per_bin = plots.bin_nodes(starts, [0x1000] * 6, TWO_TIERS[0])
    assert per_bin == [1, 1, 0, 0, 0, 0]
    # a bin split between ranges goes to the node holding most of it; uncovered: None
    assert plots.bin_nodes([0x1800, 0x9000], [0x1000, 0x1000], TWO_TIERS[0]) == [0, None]
    assert plots.tier_runs([1, 1, 0, None, 0]) == [(0, 2, 1), (2, 3, 0), (4, 5, 0)]


def test_the_heatmap_shows_which_tier_holds_each_address() -> None:
    from matplotlib.patches import Rectangle

    from tierlab.reporters.heatmap import heatmap_figure

    heatmap = {
        "counts": np.arange(1, 4 * 6 + 1, dtype=float).tolist(),
        "t_start_s": [0.0, 0.1, 0.2, 0.3],
        "t_end_s": [0.1, 0.2, 0.3, 0.4],
        "bin_start": [0x1000 * i for i in range(6)],
        "bin_bytes": [0x1000] * 6,
        "bin_mapping": ["heap"] * 3 + ["stack"] * 3,
    }
    fig = heatmap_figure(heatmap, "demo (seed 1): accesses by address over time", tiers=TWO_TIERS)  # type: ignore[arg-type]
    plots.finish(fig)
    labels = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert labels == ["dram (tier 0)", "cxl (tier 1)"]
    ax = fig.get_axes()[0]
    strip = sorted(
        (p.get_y(), p.get_y() + p.get_height(), p.get_facecolor())
        for p in ax.patches
        if isinstance(p, Rectangle)
    )
    # bins 0-1 on cxl, 2-5 on dram, in the two tiers' colours
    assert [(lo, hi) for lo, hi, _ in strip] == [(0.0, 2.0), (2.0, 6.0)]
    assert strip[0][2] != strip[1][2]
    assert not _raw(plots.texts(fig))
    # without tiers: no strip, no legend
    bare = heatmap_figure(heatmap, "demo")  # type: ignore[arg-type]
    assert not bare.legends
    assert not [p for p in bare.get_axes()[0].patches if isinstance(p, Rectangle)]


def test_the_interactive_heatmap_shows_tiers_in_its_legend_and_picture() -> None:
    from tierlab.reporters import static_svg
    from tierlab.view import render
    from tierlab.view.analysis import MappingView
    from tierlab.view.history import PAGE, Mapping

    start = 0x7F00_0000_0000
    mapping = Mapping(id=1, start=start, length=8 * PAGE, name="heap", map_time_ns=0)
    v = MappingView(
        mapping=mapping, samples=10, pages_touched=8, threads=1, first_ns=0, last_ns=3,
        block_pages=2, counts=np.arange(1, 4 * 3 + 1, dtype=float).reshape(4, 3),
        x_kind="time", x_edges=np.array([0.0, 1e6, 2e6, 3e6]), drains_per_column=1,
        hist_n=np.array([1]), hist_pages=np.array([8]),
    )  # fmt: skip
    tiers = ([(start, start + 4 * PAGE, 0), (start + 4 * PAGE, start + 8 * PAGE, 1)], TWO_TIERS[1])
    spec = render.heatmap_spec(v, "samples", "ns", tiers)
    named = [t["name"] for t in spec["data"] if t.get("name")]
    assert named == ["dram (tier 0)", "cxl (tier 1)"]
    assert all("tier" in t["hovertemplate"] for t in spec["data"][1:])
    # rows 0-1 (pages 0-3) on dram, rows 2-3 on cxl; a row's y is its centre
    ys = [sorted({y for y in t["y"] if y is not None}) for t in spec["data"][1:]]
    assert ys == [[-1.0, 3.0], [3.0, 7.0]]
    svg = static_svg.render(spec)
    assert "dram (tier 0)" in svg and "cxl (tier 1)" in svg
    # the image of the same view draws the strip and names the tiers
    fig = render.heatmap_figure(v, "samples", "ns", tiers)
    assert [t.get_text() for leg in fig.legends for t in leg.get_texts()] == named
    assert len(render.heatmap_spec(v, "samples", "ns")["data"]) == 1


def test_a_placement_plan_gives_the_view_its_strip() -> None:
    """`tierlab view --plan`: the plan's pages and nodes (numbers, no tiers) for the strip."""
    from tierlab.cli.view import plan_tiers

    plan = SimpleNamespace(
        page_size=0x1000,
        nodes=[0, 1],
        addr=np.array([0x5000, 0x6000], dtype=np.uint64),
        target=np.array([1, 0]),
    )
    ranges, nodes = plan_tiers(plan)
    assert ranges == [(0x5000, 0x6000, 1), (0x6000, 0x7000, 0)]
    assert nodes == [("node 0", None), ("node 1", None)]
    assert plots.tier_label("node 1", None) == "node 1"


def test_every_figure_goes_through_the_style() -> None:
    """No module draws with its own pyplot set-up, and every module that saves a figure gives
    it the style's last rules (plots.finish, or reporters.base.save_figure, which calls it)."""
    bad = []
    for path in sorted((REPO / "python" / "tierlab").rglob("*.py")):
        if path.name == "plots.py":
            continue
        text = path.read_text()
        if "import matplotlib.pyplot" in text:
            bad.append(f"{path.name}: imports matplotlib.pyplot (use tierlab.plots.pyplot)")
        if ".savefig(" in text and "finish(" not in text and path.name != "base.py":
            bad.append(f"{path.name}: saves a figure without tierlab.plots.finish")
    assert not bad, bad
