"""How a reproduced figure is tabulated and plotted: one *view* per kind of figure, by name.

A view turns a figure's sweep (its kind's report and the finished points) into a tidy
table (one row per point or technique; claims are evaluated on it, and it is written as
CSV/JSON) and draws interactive figures from that table, with the paper's values beside
tierlab's. A view is a function ``(FigureData) -> list[page.Figure]`` plus a function that
builds the table, registered in :data:`VIEWS`.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from tierlab.reporters import page as pg
from tierlab.reproduce import plots as P

if TYPE_CHECKING:
    from tierlab.reproduce.model import FigureSpec, PaperValues
    from tierlab.sweep.engine import SweepRun


@dataclass
class FigureData:
    """What a view works from: the figure's spec, its tidy table, extra tables (time
    series), and the paper's values."""

    spec: FigureSpec
    table: pd.DataFrame
    extra: dict[str, pd.DataFrame] = field(default_factory=dict)

    def paper(self, title_has: str = "") -> PaperValues | None:
        for v in self.spec.paper_values:
            if title_has.lower() in v.title.lower():
                return v
        return None

    def paper_frame(self, title_has: str = "") -> pd.DataFrame | None:
        v = self.paper(title_has)
        if v is None:
            return None
        return pd.DataFrame([list(r) for r in v.rows], columns=list(v.columns))


TableFn = Callable[[Any, "SweepRun"], tuple[pd.DataFrame, dict[str, pd.DataFrame]]]
PlotFn = Callable[[FigureData], list[pg.Figure]]


@dataclass(frozen=True)
class View:
    table: TableFn
    plot: PlotFn
    #: Columns shown in the report's table (name -> page column), in order.
    columns: tuple[tuple[str, pg.Column], ...] = ()


# -- hierarchical memory (CMCP) -------------------------------------------------------------------

_HMEM_COLUMNS = (
    ("label", pg.Column("point", format="text")),
    ("workload", pg.Column("workload", format="text")),
    ("cores", pg.Column("cores", format="int")),
    ("configuration", pg.Column("configuration", format="text")),
    ("page_size", pg.Column("page size", format="text")),
    ("memory_pct", pg.Column("fast memory", "% of footprint", digits=1)),
    ("p", pg.Column("p")),
    ("page_faults", pg.Column("page faults", "per core", "int")),
    ("remote_tlb_invalidations", pg.Column("remote TLB inval.", "per core", "int")),
    ("dtlb_misses", pg.Column("dTLB misses", "per core", "int")),
    ("run_time_s", pg.Column("run time", "modeled", "seconds")),
    ("relative_performance", pg.Column("relative perf.", "vs no movement")),
    ("speedup", pg.Column("speedup", "vs no movement, fewest cores")),
)


def hmem_table(report: Any, run: SweepRun) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    from tierlab.policies import NO_MOVEMENT, HmemRecord

    rows = [r.to_json() for r in report.records if isinstance(r, HmemRecord)]
    df = pd.DataFrame(rows)
    if df.empty:
        return df, {}
    df["configuration"] = [
        NO_MOVEMENT if pol == NO_MOVEMENT else f"{pt} + {pol}"
        for pt, pol in zip(df["page_tables"], df["policy"], strict=True)
    ]
    for c in ("p", "relative_performance", "speedup"):
        if c not in df:
            df[c] = math.nan
    # The memory provided as the point's nominal share (its label's "80%"): the fraction
    # the machine reports is rounded to whole pages, so it differs a little by page size.
    nominal = []
    for label, frac in zip(df["label"], df["fast_memory_fraction"], strict=True):
        m = re.search(r"(\d+(?:\.\d+)?)%$", str(label))
        v = float(m.group(1)) if m else round(100 * float(frac), 1)
        nominal.append(int(v) if v.is_integer() else v)
    df["memory_pct"] = nominal
    return df, {}


_COUNTERS = (
    ("page_faults", "page faults"),
    ("remote_tlb_invalidations", "remote TLB invalidations"),
    ("dtlb_misses", "dTLB misses"),
)


def _workloads(df: pd.DataFrame) -> list[str]:
    order = ["bt", "lu", "cg", "scale"]
    have = list(dict.fromkeys(df["workload"].tolist())) if "workload" in df else []
    return [w for w in order if w in have] + [w for w in have if w not in order]


def table1_plot(fd: FigureData) -> list[pg.Figure]:
    df = fd.table
    if df.empty:
        return []
    ws = _workloads(df)
    paper = fd.paper_frame("table 1")
    figs = []
    # 1. Each policy's counters relative to FIFO's: tierlab (solid) and the paper (dashed).
    layout = P.grid(
        len(_COUNTERS),
        len(ws),
        [f"{w}: {name}" for _, name in _COUNTERS for w in ws],
        xtitle="cores",
        ytitle=[f"{name} / FIFO's" for _, name in _COUNTERS],
        ylog=True,
        title="LRU and CMCP relative to FIFO: tierlab (solid) and the paper's Table 1 (dashed)",
    )
    data = []
    shown: set[str] = set()
    for r, (counter, _) in enumerate(_COUNTERS):
        for c, w in enumerate(ws):
            k = r * len(ws) + c + 1
            for source, frame, dash in (("tierlab", df, "solid"), ("paper", paper, "dash")):
                if frame is None:
                    continue
                d = frame[frame["workload"] == w]
                fifo = d[d["policy"] == "fifo"].set_index("cores")[counter]
                for pol in ("lru", "cmcp"):
                    pol_s = d[d["policy"] == pol].set_index("cores")[counter]
                    common = sorted(set(pol_s.index) & set(fifo.index))
                    if not common:
                        continue
                    name = f"{pol.upper()} / FIFO ({source})"
                    data.append(
                        P.line(
                            common,
                            [pol_s[x] / fifo[x] for x in common],
                            name,
                            k,
                            dash=dash,
                            col=P.color(pol),
                            show=name not in shown,
                            hover=f"{name}<br>%{{x}} cores: %{{y:.3f}}x<extra></extra>",
                        )
                    )
                    shown.add(name)
    figs.append(
        pg.Figure(
            {"data": data, "layout": layout},
            "Ratios per core count; 1 = FIFO. Hover for values; drag to zoom, double-click "
            "to reset; click a legend entry to hide it.",
            height=260 * len(_COUNTERS) + 80,
        )
    )
    # 2. tierlab's absolute counters and relative performance.
    metrics = [*_COUNTERS, ("relative_performance", "relative performance")]
    layout = P.grid(
        len(metrics),
        len(ws),
        [f"{w}: {name}" for _, name in metrics for w in ws],
        xtitle="cores",
        ytitle=[name for _, name in metrics],
        ylog=[True, True, True, False],
        title="tierlab: per-core averages and run time relative to no movement",
    )
    data = []
    shown = set()
    for r, (metric, label) in enumerate(metrics):
        for c, w in enumerate(ws):
            k = r * len(ws) + c + 1
            d = df[(df["workload"] == w) & (df["policy"] != "no-movement")]
            for pol in ("fifo", "lru", "cmcp"):
                s = d[d["policy"] == pol].sort_values("cores")
                if s.empty:
                    continue
                data.append(
                    P.line(
                        s["cores"].tolist(),
                        s[metric].tolist(),
                        pol,
                        k,
                        show=pol not in shown,
                        hover=f"{pol}, %{{x}} cores<br>{label}: %{{y:,.4~f}}<extra></extra>",
                    )
                )
                shown.add(pol)
    figs.append(pg.Figure({"data": data, "layout": layout}, height=240 * len(metrics) + 80))
    return figs


def scaling_plot(fd: FigureData) -> list[pg.Figure]:
    df = fd.table
    if df.empty:
        return []
    ws = _workloads(df)
    layout = P.grid(
        1,
        len(ws),
        ws,
        xtitle="cores",
        ytitle="performance (no movement at the fewest cores = 1)",
        title="Scaling: shared page tables vs PSPT (Figure 7)",
    )
    data = []
    shown: set[str] = set()
    for c, w in enumerate(ws):
        d = df[df["workload"] == w]
        for conf in sorted(d["configuration"].unique(), key=lambda x: (x != "no-movement", x)):
            s = d[d["configuration"] == conf].sort_values("cores")
            dash = "dot" if conf.startswith("shared") else "solid"
            data.append(
                P.line(
                    s["cores"].tolist(),
                    s["speedup"].tolist(),
                    conf,
                    c + 1,
                    dash=dash,
                    show=conf not in shown,
                    hover=f"{conf}, %{{x}} cores: %{{y:.2f}}<extra></extra>",
                )
            )
            shown.add(conf)
    figs = [pg.Figure({"data": data, "layout": layout}, height=440)]
    # CMCP's gain over FIFO on PSPT at the most cores, beside the paper's (section 5.4).
    paper = fd.paper_frame("cmcp over fifo")
    top = df["cores"].max()
    gains = []
    for w in ws:
        d = df[(df["workload"] == w) & (df["cores"] == top) & (df["page_tables"] == "pspt")]
        f = d[d["policy"] == "fifo"]["run_time_s"]
        m = d[d["policy"] == "cmcp"]["run_time_s"]
        gains.append(100 * (f.iloc[0] / m.iloc[0] - 1) if len(f) and len(m) else None)
    bars = [
        P.bar(
            ws,
            gains,
            f"tierlab ({top} cores)",
            hover="%{x}: %{y:.1f}%<extra></extra>",
            col="#2ca02c",
        )
    ]
    if paper is not None:
        pm = dict(zip(paper["workload"], paper["cmcp_over_fifo_pct"], strict=True))
        bars.append(
            P.bar(
                ws,
                [pm.get(w) for w in ws],
                "paper (56 cores)",
                col="#444444",
                hover="%{x}: %{y:.0f}%<extra></extra>",
            )
        )
    figs.append(
        pg.Figure(
            {
                "data": bars,
                "layout": {
                    "title": {"text": "CMCP's run-time gain over FIFO (PSPT, most cores)"},
                    "barmode": "group",
                    "yaxis": {"title": {"text": "gain (%)"}},
                },
            },
            height=340,
        )
    )
    return figs


def p_plot(fd: FigureData) -> list[pg.Figure]:
    df = fd.table
    d = df[df["policy"] == "cmcp"] if not df.empty else df
    if d.empty:
        return []
    data = []
    for w in _workloads(d):
        s = d[d["workload"] == w].sort_values("p")
        best = s.iloc[int(s["relative_performance"].to_numpy(dtype=float).argmax())]
        data.append(
            P.line(
                s["p"].tolist(),
                s["relative_performance"].tolist(),
                w,
                hover=f"{w}, p = %{{x}}: %{{y:.3f}}<extra></extra>",
            )
        )
        data.append(
            P.line(
                [best["p"]],
                [best["relative_performance"]],
                f"{w} best",
                mode="markers",
                col=P.color(w),
                symbol="star",
                group=w,
                show=False,
                hover=f"{w}: best p = %{{x}}<extra></extra>",
            )
        )
    layout = {
        "title": {"text": "CMCP: the effect of p (Figure 9); stars mark each workload's best"},
        "xaxis": {"title": {"text": "p (fraction of prioritized pages)"}},
        "yaxis": {"title": {"text": "relative performance (no movement = 1)"}},
    }
    return [pg.Figure({"data": data, "layout": layout}, height=420)]


def pagesize_plot(fd: FigureData) -> list[pg.Figure]:
    df = fd.table
    if df.empty:
        return []
    ws = _workloads(df)
    layout = P.grid(
        1,
        len(ws),
        ws,
        xtitle="memory provided (% of footprint)",
        ytitle="relative performance (4 KiB, no movement = 1)",
        xreversed=True,
        title="Page sizes vs memory provided, FIFO, PSPT (Figure 10)",
    )
    data = []
    shown: set[str] = set()
    for c, w in enumerate(ws):
        d = df[df["workload"] == w]
        for ps in ("4KiB", "64KiB", "2MiB"):
            s = d[d["page_size"] == ps].sort_values("memory_pct", ascending=False)
            if s.empty:
                continue
            data.append(
                P.line(
                    s["memory_pct"].tolist(),
                    s["relative_performance"].tolist(),
                    ps,
                    c + 1,
                    show=ps not in shown,
                    hover=f"{ps}, %{{x}}% memory: %{{y:.3f}}<extra></extra>",
                )
            )
            shown.add(ps)
    return [pg.Figure({"data": data, "layout": layout}, height=440)]


# -- telemetry (Telescope, PEBS) ------------------------------------------------------------------

_TELEMETRY_COLUMNS = (
    ("footprint", pg.Column("footprint", format="text")),
    ("technique", pg.Column("technique", format="text")),
    ("time_to_precision_s", pg.Column("time to precision 0.9", "s")),
    ("time_to_recall_s", pg.Column("time to recall 0.9", "s")),
    ("mean_precision", pg.Column("mean precision")),
    ("mean_recall", pg.Column("mean recall")),
    ("observer_cpu_s", pg.Column("observer CPU", "", "seconds")),
    ("cpu_share_pct", pg.Column("CPU share", "% of one core", digits=3)),
    ("samples", pg.Column("samples", format="int")),
)


def telemetry_table(report: Any, run: SweepRun) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    cmp = report
    df = cmp.table()
    ts = cmp.timeseries
    if df.empty:
        return df, {"timeseries": ts}
    name = cmp.sweep_name
    if name and name in df.columns:
        df = df.rename(columns={name: "footprint"})
        ts = ts.rename(columns={name: "footprint"})
    # CPU share: observer CPU over the simulated length of the run.
    dur: dict[Any, float] = {}
    if not ts.empty and "t_end_s" in ts:
        keys = ["footprint", "technique"] if "footprint" in ts else ["technique"]
        for k, g in ts.groupby(keys):
            dur[k if isinstance(k, tuple) else (k,)] = float(g["t_end_s"].max())
    shares = []
    for _, r in df.iterrows():
        k = (r["footprint"], r["technique"]) if "footprint" in df else (r["technique"],)
        d = dur.get(k)
        shares.append(r["observer_cpu_s"] / d if d else math.nan)
    df["cpu_share_pct"] = [100 * x for x in shares]
    return df, {"timeseries": ts}


def timeline_plot(fd: FigureData) -> list[pg.Figure]:
    ts = fd.extra.get("timeseries", pd.DataFrame())
    if ts.empty:
        return []
    layout = P.grid(
        2,
        1,
        ["precision", "recall"],
        xtitle="simulated time (s)",
        ytitle=["precision", "recall"],
        vgap=0.12,
        title="Precision and recall per 1 s window",
    )
    data = []
    for k, metric in enumerate(("precision", "recall"), start=1):
        for tech in fd.table["technique"].tolist():
            d = ts[ts["technique"] == tech]
            data.append(
                P.line(
                    d["t_end_s"].tolist(),
                    d[metric].fillna(0.0).tolist(),
                    tech,
                    k,
                    show=k == 1,
                    mode="lines",
                    hover=f"{tech}, t = %{{x}} s: {metric} %{{y:.3f}}<extra></extra>",
                )
            )
    for ax in ("yaxis", "yaxis2"):
        layout[ax]["range"] = [-0.02, 1.02]
    return [pg.Figure({"data": data, "layout": layout}, height=560)]


_FOOTPRINTS = ("1GB", "10GB", "100GB", "5TB")


def footprints_plot(fd: FigureData) -> list[pg.Figure]:
    df = fd.table
    if df.empty:
        return []
    fps = [f for f in _FOOTPRINTS if f in set(df["footprint"])] + [
        f for f in dict.fromkeys(df["footprint"]) if f not in _FOOTPRINTS
    ]
    data = []
    for tech in dict.fromkeys(df["technique"]):
        d = df[df["technique"] == tech].set_index("footprint")
        b = P.bar(
            fps,
            [d["mean_recall"].get(f) for f in fps],
            tech,
            hover=f"{tech} at %{{x}}: mean recall %{{y:.3f}}<extra></extra>",
        )
        b["offsetgroup"] = tech
        data.append(b)
    paper = fd.paper_frame("detect")
    if paper is not None:
        sym = {">": "triangle-up", "<": "triangle-down", "~": "circle", "=": "circle"}
        for tech in dict.fromkeys(paper["technique"]):
            d = paper[paper["technique"] == tech]
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "x": d["footprint"].tolist(),
                    "y": d["mean_recall"].tolist(),
                    "name": f"paper: {tech}",
                    "offsetgroup": tech,
                    "marker": {
                        "symbol": [sym.get(s, "circle") for s in d["relation"]],
                        "size": 13,
                        "color": "#000",
                        "line": {"color": P.color(tech), "width": 2},
                    },
                    "customdata": [
                        f"{s} {v:.0%}" for s, v in zip(d["relation"], d["mean_recall"], strict=True)
                    ],
                    "hovertemplate": f"paper, {tech} at %{{x}}: %{{customdata}}<extra></extra>",
                }
            )
    layout = {
        "title": {
            "text": "Mean recall per footprint; black markers: the paper's "
            "(triangle up: more than, down: less than, circle: about)"
        },
        "barmode": "group",
        "scattermode": "group",
        "xaxis": {"title": {"text": "footprint"}},
        "yaxis": {"title": {"text": "mean recall"}, "range": [0, 1.08]},
    }
    figs = [pg.Figure({"data": data, "layout": layout}, height=420)]
    ts = fd.extra.get("timeseries", pd.DataFrame())
    if not ts.empty:
        lay = P.grid(
            len(fps),
            2,
            [f"{f}: {m}" for f in fps for m in ("precision", "recall")],
            xtitle="simulated time (s)",
            ytitle=fps,
            vgap=0.06,
            title="Precision and recall over time per footprint",
        )
        tdata = []
        for r, f in enumerate(fps):
            for c, metric in enumerate(("precision", "recall")):
                k = r * 2 + c + 1
                for tech in dict.fromkeys(df["technique"]):
                    d = ts[(ts["footprint"] == f) & (ts["technique"] == tech)]
                    tdata.append(
                        P.line(
                            d["t_end_s"].tolist(),
                            d[metric].fillna(0.0).tolist(),
                            tech,
                            k,
                            mode="lines",
                            show=k == 1,
                            hover=f"{tech}, {f}, t = %{{x}} s: {metric} %{{y:.3f}}<extra></extra>",
                        )
                    )
        for key, ax in lay.items():
            if key.startswith("yaxis"):
                ax["range"] = [-0.02, 1.02]
        figs.append(pg.Figure({"data": tdata, "layout": lay}, height=200 * len(fps) + 100))
    return figs


_PEBS_COLUMNS = (
    ("technique", pg.Column("technique", format="text")),
    ("reset", pg.Column("R", "reset value", "int")),
    ("buffer_kib", pg.Column("B", "KiB", "int")),
    ("samples", pg.Column("samples", format="int")),
    ("interrupts", pg.Column("interrupts", format="int")),
    ("samples_per_set", pg.Column("samples per set")),
    ("pages_seen", pg.Column("pages seen", format="int")),
    ("overhead_pct", pg.Column("overhead", "% vs no PEBS", digits=2)),
    ("observer_cpu_s", pg.Column("interrupt time", "", "seconds")),
)


def pebs_table(report: Any, run: SweepRun) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    from tierlab.live.units import parse_size

    df, extra = telemetry_table(report, run)
    if df.empty:
        return df, extra
    params: dict[str, tuple[int, int]] = {}
    for p, r in run.finished():
        if not p.techniques:
            continue
        sc = tomllib.loads(r.scenario)
        for t in sc.get("telemetry", []):
            if t.get("name") == p.techniques[0]:
                params[t["name"]] = (
                    int(t.get("period", 0)),
                    _size(t.get("buffer_size", 0), parse_size),
                )
    df["reset"] = [params.get(t, (math.nan, 0))[0] for t in df["technique"]]
    df["buffer_kib"] = [params.get(t, (0, math.nan))[1] / 1024 for t in df["technique"]]
    df["overhead_pct"] = 100 * df["slowdown"]
    return df, extra


def _size(v: object, parse: Callable[[str], int]) -> int:
    return parse(v) if isinstance(v, str) else int(v)  # type: ignore[call-overload]


def pebs_plot(fd: FigureData) -> list[pg.Figure]:
    df = fd.table
    if df.empty:
        return []
    layout = P.grid(
        1,
        2,
        ["pages seen vs reset value R", "overhead vs R and buffer size B"],
        xtitle=["reset value R", "reset value R"],
        ytitle="pages seen",
        hgap=0.1,
        title="PEBS on the MiniFE-like CG: accuracy and overhead",
    )
    layout["xaxis"]["type"] = "log"
    layout["xaxis2"]["type"] = "category"
    layout["yaxis2"]["title"] = {"text": "overhead (%)"}
    data = []
    for b in sorted(df["buffer_kib"].dropna().unique()):
        s = df[df["buffer_kib"] == b].sort_values("reset")
        data.append(
            P.line(
                s["reset"].tolist(),
                s["pages_seen"].tolist(),
                f"B = {b:g} KiB",
                1,
                group=f"B{b:g}",
                hover=f"R = %{{x}}, B = {b:g} KiB: %{{y:,}} pages<extra></extra>",
            )
        )
        data.append(
            P.bar(
                [str(int(x)) for x in s["reset"]],
                s["overhead_pct"].tolist(),
                f"B = {b:g} KiB",
                2,
                group=f"B{b:g}",
                show=False,
                hover=f"R = %{{x}}, B = {b:g} KiB: %{{y:.2f}}%<extra></extra>",
            )
        )
    paper = fd.paper_frame("pages")
    if paper is not None:
        data.append(
            P.line(
                paper["reset"].tolist(),
                paper["pages_seen"].tolist(),
                "paper (of 1536 pages)",
                1,
                mode="markers",
                col="#000",
                symbol="diamond",
                hover="paper, R = %{x}: %{y:,} pages<extra></extra>",
            )
        )
    layout["barmode"] = "group"
    return [pg.Figure({"data": data, "layout": layout}, height=440)]


# -- NUMA placement -------------------------------------------------------------------------------

_NUMA_COLUMNS = (
    ("kernel", pg.Column("kernel", format="text")),
    ("nodes", pg.Column("nodes", format="int")),
    ("policy", pg.Column("policy", format="text")),
    ("run_time_s", pg.Column("run time", "modeled", "seconds")),
    ("savings_pct", pg.Column("saving", "vs first touch, %", digits=1)),
    ("overhead_pct", pg.Column("profiling overhead", "%", digits=2)),
    ("local_access_fraction", pg.Column("local accesses", "", "pct", 3)),
    ("pages_with_affinity", pg.Column("pages with affinity", format="int")),
    ("pages_migrated", pg.Column("pages migrated", format="int")),
)


def numa_table(report: Any, run: SweepRun) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    df = pd.DataFrame([r.to_json() for r in report.records])
    if not df.empty:
        df["configuration"] = [
            f"{k}, {n} nodes" for k, n in zip(df["kernel"], df["nodes"], strict=True)
        ]
    return df, {}


def numa_plot(fd: FigureData) -> list[pg.Figure]:
    df = fd.table
    if df.empty:
        return []
    d = df[df["policy"] != "first-touch"]
    confs = list(dict.fromkeys(d["configuration"]))
    layout = P.grid(
        1,
        2,
        ["wall-time saving vs first touch", "profiling overhead"],
        ytitle="saving (%)",
        hgap=0.1,
        title="ccNUMA placement of serially initialized kernels (remote = 2x local)",
    )
    layout["yaxis2"]["title"] = {"text": "overhead (%)"}
    data = []
    for pol in dict.fromkeys(d["policy"]):
        s = d[d["policy"] == pol].set_index("configuration")
        for k, col in ((1, "savings_pct"), (2, "overhead_pct")):
            data.append(
                P.bar(
                    confs,
                    [s[col].get(c) for c in confs],
                    pol,
                    k,
                    show=k == 1,
                    hover=f"{pol}, %{{x}}: %{{y:.2f}}%<extra></extra>",
                )
            )
    paper = fd.paper_frame("abstract")
    shapes, notes = [], []
    if paper is not None:
        vals = dict(zip(paper["figure"], paper["value_pct"], strict=True))
        for k, key, text in (
            (1, "saving", "paper: > {v:g}% average"),
            (2, "overhead", "paper: {v:g}%"),
        ):
            if key in vals:
                s, n = P.hline(float(vals[key]), k, text.format(v=vals[key]))
                shapes.append(s)
                notes.append(n)
    layout["shapes"] = shapes
    layout["annotations"] = layout["annotations"] + notes
    layout["barmode"] = "group"
    return [pg.Figure({"data": data, "layout": layout}, height=440)]


_NUMA_SOURCES_COLUMNS = (
    ("kernel", pg.Column("kernel", format="text")),
    ("profile", pg.Column("profile", "source, 1 sample per", format="text")),
    ("profile_samples", pg.Column("records in profile", "samples", "int")),
    ("overhead_pct", pg.Column("time to trace", "profiling run overhead, %", digits=2)),
    ("pages_with_affinity", pg.Column("pages with affinity", format="int")),
    ("local_access_fraction", pg.Column("local accesses", "after placement", "pct", 3)),
    ("savings_pct", pg.Column("saving", "vs first touch, %", digits=1)),
    ("run_time_s", pg.Column("run time", "modeled", "seconds")),
)

_NUMA_MACHINE_COLUMNS = (
    ("kernel", pg.Column("kernel", format="text")),
    ("machine", pg.Column("machine", format="text")),
    ("remote_factor", pg.Column("remote / local", digits=2)),
    ("policy", pg.Column("policy", format="text")),
    ("run_time_s", pg.Column("run time", "modeled", "seconds")),
    ("savings_pct", pg.Column("saving", "vs first touch, %", digits=1)),
    ("overhead_pct", pg.Column("profiling overhead", "%", digits=2)),
    ("local_access_fraction", pg.Column("local accesses", "", "pct", 3)),
)


def _profile_name(source: object, period: object) -> str:
    if not isinstance(source, str) or not source:
        return "first touch"
    src = "TLB misses" if source == "tlb-misses" else "long-latency loads"
    return f"{src}, 1/{int(float(str(period)))}"


def numa_sources_table(report: Any, run: SweepRun) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    df, extra = numa_table(report, run)
    if not df.empty:
        for c in ("source", "period", "profile_samples", "pages_with_affinity"):
            if c not in df:
                df[c] = None
        df["profile"] = [
            _profile_name(s, p) for s, p in zip(df["source"], df["period"], strict=True)
        ]
    return df, extra


def numa_sources_plot(fd: FigureData) -> list[pg.Figure]:
    """The two profile sources at each period: records in the profile, time to trace,
    local accesses after placement (accuracy) and the saving, one bar per kernel."""
    df = fd.table
    if df.empty:
        return []
    d = df[df["policy"] != "first-touch"]
    panels = (
        ("profile_samples", "records in profile (samples)"),
        ("overhead_pct", "time to trace (profiling overhead, %)"),
        ("local_access_fraction", "accuracy: local accesses after placement"),
        ("savings_pct", "saving vs first touch (%)"),
    )
    layout = P.grid(
        2,
        2,
        [t for _, t in panels],
        ylog=[True, False],
        vgap=0.22,
        title="Profile sources: long-latency loads vs TLB misses (remote = 2x local)",
    )
    profiles = list(dict.fromkeys(d["profile"]))
    data = []
    for kernel in dict.fromkeys(d["kernel"]):
        s = d[d["kernel"] == kernel].set_index("profile")
        for k, (col, _) in enumerate(panels, start=1):
            data.append(
                P.bar(
                    profiles,
                    [s[col].get(p) for p in profiles],
                    kernel,
                    k,
                    show=k == 1,
                    hover=f"{kernel}, %{{x}}: %{{y:.4g}}<extra></extra>",
                )
            )
    layout["barmode"] = "group"
    return [pg.Figure({"data": data, "layout": layout}, height=640)]


def numa_machine_table(report: Any, run: SweepRun) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    df, extra = numa_table(report, run)
    if not df.empty:
        df["machine"] = [
            "Opteron-like" if float(f) < 2.0 else "Altix-like" for f in df["remote_factor"]
        ]
    return df, extra


def numa_machine_plot(fd: FigureData) -> list[pg.Figure]:
    """The saving of interleave and profile-guided placement over first touch on the
    Altix-like (remote 2x) and Opteron-like (1.5x) machines, per kernel."""
    df = fd.table
    if df.empty:
        return []
    d = df[df["policy"] != "first-touch"]
    kernels = list(dict.fromkeys(d["kernel"]))
    layout = P.grid(
        1,
        len(kernels),
        kernels,
        ytitle="saving vs first touch (%)",
        title="Placement savings: Altix-like (remote 2x) vs Opteron-like (remote 1.5x)",
    )
    data = []
    shown: set[str] = set()
    for c, kernel in enumerate(kernels, start=1):
        s = d[d["kernel"] == kernel]
        machines = list(dict.fromkeys(s["machine"]))
        for pol in dict.fromkeys(s["policy"]):
            t = s[s["policy"] == pol].set_index("machine")
            data.append(
                P.bar(
                    machines,
                    [t["savings_pct"].get(m) for m in machines],
                    pol,
                    c,
                    show=pol not in shown,
                    hover=f"{pol}, %{{x}}: %{{y:.1f}}%<extra></extra>",
                )
            )
            shown.add(pol)
    paper = fd.paper_frame("machine")
    if paper is not None:
        pairs = zip(paper["machine"], paper["value_pct"], strict=True)
        notes = [f"paper, {m}: {v:g}% average" for m, v in pairs]
        layout["annotations"] = layout["annotations"] + [
            {
                "text": "; ".join(notes),
                "xref": "paper",
                "yref": "paper",
                "x": 0.5,
                "y": -0.18,
                "showarrow": False,
                "font": {"size": 11},
            }
        ]
    layout["barmode"] = "group"
    return [pg.Figure({"data": data, "layout": layout}, height=440)]


def memory_plot(fd: FigureData) -> list[pg.Figure]:
    """Figure 8: relative performance against the memory provided, one panel per workload,
    one line per policy (the no-movement run at 100%)."""
    df = fd.table
    if df.empty:
        return []
    ws = _workloads(df)
    layout = P.grid(
        1,
        len(ws),
        ws,
        xtitle="memory provided (% of footprint)",
        ytitle="relative performance (no movement = 1)",
        xreversed=True,
        title="Relative performance vs memory provided, PSPT, 4 KiB pages, 56 cores (Figure 8)",
    )
    data = []
    shown: set[str] = set()
    for c, w in enumerate(ws):
        d = df[df["workload"] == w]
        base = d[d["policy"] == "no-movement"]
        for pol in ("fifo", "lru", "cmcp"):
            s = pd.concat([base, d[d["policy"] == pol]]).sort_values("memory_pct", ascending=False)
            if len(s) <= len(base):
                continue
            data.append(
                P.line(
                    s["memory_pct"].tolist(),
                    s["relative_performance"].tolist(),
                    pol,
                    c + 1,
                    show=pol not in shown,
                    hover=f"{pol}, %{{x}}% memory: %{{y:.3f}}<extra></extra>",
                )
            )
            shown.add(pol)
    return [pg.Figure({"data": data, "layout": layout}, height=440)]


def replay_plot(fd: FigureData) -> list[pg.Figure]:
    """A replayed real trace: each policy's page faults, remote TLB invalidations and run time
    relative to FIFO's, one bar per policy and counter."""
    df = fd.table
    if df.empty or "fifo" not in set(df["policy"]):
        return []
    fifo = df[df["policy"] == "fifo"].iloc[0]
    counters = (*_COUNTERS, ("run_time_s", "run time"))
    layout = P.grid(
        1,
        len(counters),
        [name for _, name in counters],
        ytitle="relative to FIFO",
        title="FIFO, LRU and CMCP on per-core page tables replaying a real OpenMP trace",
    )
    data = []
    pols = [p for p in ("fifo", "lru", "cmcp") if p in set(df["policy"])]
    for k, (counter, name) in enumerate(counters, start=1):
        base = float(fifo[counter]) or math.nan
        ys = [float(df[df["policy"] == p].iloc[0][counter]) / base for p in pols]
        data.append(
            P.bar(
                pols,
                ys,
                name,
                k,
                show=False,
                col=P.color(name),
                hover=f"%{{x}}: %{{y:.3f}} of FIFO's {name}<extra></extra>",
                text=[f"{y:.2f}" for y in ys],
            )
        )
    return [pg.Figure({"data": data, "layout": layout}, height=380)]


# -- PEBS at scale (Fig. 3) ----------------------------------------------------------------------

_PEBS_SCALE_COLUMNS = (
    ("app", pg.Column("application", format="text")),
    ("config", pg.Column("R, B", format="text")),
    ("drain", pg.Column("drain", format="text")),
    ("nodes", pg.Column("nodes", format="int")),
    ("interval_us", pg.Column("time between interrupts", "us", digits=1)),
    ("overhead_pct", pg.Column("overhead", "%", digits=2)),
)


def pebs_scale_table(report: Any, run: SweepRun) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    from tierlab.pebs_scale import frame

    return frame(report), {}


def pebs_scale_plot(fd: FigureData) -> list[pg.Figure]:
    """Overhead against node count, one panel per application, the interrupt-driven driver
    at R = 64 / B = 8 KiB and R = 256 / B = 32 KiB (the paper's extremes)."""
    df = fd.table
    if df.empty:
        return []
    d = df[df["drain"] == "interrupt"]
    apps = list(dict.fromkeys(d["app"]))
    layout = P.grid(
        1, len(apps), apps, xtitle="nodes", ytitle="overhead (%)",
        title="PEBS overhead at scale (Fig. 3): engine streams + BSP model; paper 1%-10.2%",
    )  # fmt: skip
    data = []
    for c, app in enumerate(apps, start=1):
        for conf, dash in (("R64-B8K", "solid"), ("R256-B32K", "dash")):
            s = d[(d["app"] == app) & (d["config"] == conf)].sort_values("nodes")
            data.append(
                P.line(list(s["nodes"]), list(s["overhead_pct"]), conf, c, dash=dash,
                       show=c == 1,
                       hover=f"{app} {conf}, %{{x}} nodes: %{{y:.2f}}%<extra></extra>")
            )  # fmt: skip
    return [pg.Figure({"data": data, "layout": layout}, height=380)]


# -- tiering (Telescope's Redis runs) -------------------------------------------------------------

_REDIS_COLUMNS = (
    ("policy", pg.Column("point", format="text")),
    ("telemetry", pg.Column("telemetry", format="text")),
    ("throughput_rps", pg.Column("throughput", "requests/s", "int")),
    ("p95_us", pg.Column("p95 latency", "us", digits=1)),
    ("promoted_pages", pg.Column("promoted", "pages", "int")),
    ("demoted_pages", pg.Column("demoted", "pages", "int")),
    ("run_fast_share", pg.Column("fast accesses", "", "pct", 3)),
    ("share_of_optimum", pg.Column("share of the optimum gain", "", "pct", 3)),
)


def redis_table(report: Any, run: SweepRun) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    return pd.DataFrame([r.to_json() for r in report.records]), {}


def redis_plot(fd: FigureData) -> list[pg.Figure]:
    """Throughput and p95 latency of each tiering configuration (the key-value store over a
    slow tier with a small fast tier), tierlab's beside the paper's ordering."""
    df = fd.table
    if df.empty:
        return []
    layout = P.grid(
        1,
        2,
        ["throughput (requests/s)", "p95 latency (us)"],
        hgap=0.1,
        title="Key-value store on tiered memory: throughput and p95 latency by telemetry",
    )
    names = list(df["policy"])
    data = [
        P.bar(names, list(df["throughput_rps"]), "throughput", 1,
              hover="%{x}: %{y:,.0f} requests/s<extra></extra>"),
        P.bar(names, list(df["p95_us"]), "p95 latency", 2, show=False,
              hover="%{x}: p95 %{y:.1f} us<extra></extra>"),
    ]  # fmt: skip
    return [pg.Figure({"data": data, "layout": layout}, height=420)]


# -- tiering systems side by side -----------------------------------------------------------------

_TIERING_COLUMNS = (
    ("policy", pg.Column("policy", format="text")),
    ("telemetry", pg.Column("telemetry", format="text")),
    ("run_time_s", pg.Column("run time", "modeled", "seconds")),
    ("throughput_rps", pg.Column("throughput", "requests/s", "int")),
    ("p50_us", pg.Column("p50", "us", digits=1)),
    ("p95_us", pg.Column("p95", "us", digits=1)),
    ("p99_us", pg.Column("p99", "us", digits=1)),
    ("share_of_optimum", pg.Column("share of optimum gain", "", "pct", 3)),
    ("run_fast_share", pg.Column("fast-tier accesses", "", "pct", 3)),
    ("optimum_fast_share", pg.Column("optimum's", "fast-tier accesses", "pct", 3)),
    ("fast_share_gap", pg.Column("distance from optimum", "fast-tier share, points", digits=1)),
    ("promoted_pages", pg.Column("promoted", "pages", "int")),
    ("demoted_pages", pg.Column("demoted", "pages", "int")),
    ("ping_pong", pg.Column("ping-pong", "moves", "int")),
    ("wasted_promotions", pg.Column("wasted promotions", format="int")),
    ("migrated_bytes", pg.Column("migrated", "bytes", "int")),
    ("migration_mbps", pg.Column("migration bandwidth", "MB/s", digits=2)),
    ("migration_s", pg.Column("migration time", "s", digits=4)),
    ("shootdown_s", pg.Column("shootdown time", "s", digits=4)),
    ("telemetry_cpu_s", pg.Column("telemetry CPU", "s", digits=4)),
    ("policy_cpu_s", pg.Column("policy CPU", "s", digits=4)),
)


def tiering_table(report: Any, run: SweepRun) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """One row per policy with the counter schema (docs/tiering-systems.md) and the distance
    from the per-window optimum: its share of the optimum's gain and the gap, in points,
    between the accesses the fast tier served and those the optimum's would."""
    df = pd.DataFrame([r.to_json() for r in report.records])
    if not df.empty:
        run_share = pd.to_numeric(df["run_fast_share"], errors="coerce")
        opt_share = pd.to_numeric(df["optimum_fast_share"], errors="coerce")
        df["fast_share_gap"] = 100.0 * (opt_share - run_share)
    return df, {}


def tiering_plot(fd: FigureData) -> list[pg.Figure]:
    """Each policy's share of the optimum's gain, and the fast tier's share of the accesses
    beside the optimum's."""
    df = fd.table
    if df.empty:
        return []
    pols = list(df["label"]) if "label" in df.columns else list(df["policy"])
    layout = P.grid(
        1,
        2,
        ["share of the optimum's gain", "accesses served by the fast tier"],
        ytitle="share (%)",
        hgap=0.1,
        title=fd.spec.title,
    )
    layout["yaxis2"]["title"] = {"text": "share (%)"}
    share = pd.to_numeric(df["share_of_optimum"], errors="coerce") * 100.0
    data = [
        P.bar(pols, list(share), "policy", 1, hover="%{x}: %{y:.1f}%<extra></extra>"),
        P.bar(
            pols,
            list(pd.to_numeric(df["run_fast_share"], errors="coerce") * 100.0),
            "run",
            2,
            hover="%{x}: %{y:.1f}%<extra></extra>",
        ),
        P.bar(
            pols,
            list(pd.to_numeric(df["optimum_fast_share"], errors="coerce") * 100.0),
            "optimum",
            2,
            hover="%{x}, optimum: %{y:.1f}%<extra></extra>",
        ),
    ]
    layout["barmode"] = "group"
    return [pg.Figure({"data": data, "layout": layout}, height=460)]


VIEWS: dict[str, View] = {
    "cmcp-table1": View(hmem_table, table1_plot, _HMEM_COLUMNS),
    "cmcp-scaling": View(hmem_table, scaling_plot, _HMEM_COLUMNS),
    "cmcp-p": View(hmem_table, p_plot, _HMEM_COLUMNS),
    "cmcp-pagesize": View(hmem_table, pagesize_plot, _HMEM_COLUMNS),
    "cmcp-replay": View(hmem_table, replay_plot, _HMEM_COLUMNS),
    "cmcp-memory": View(hmem_table, memory_plot, _HMEM_COLUMNS),
    "telemetry-timeline": View(telemetry_table, timeline_plot, _TELEMETRY_COLUMNS),
    "telemetry-footprints": View(telemetry_table, footprints_plot, _TELEMETRY_COLUMNS),
    "pebs-knobs": View(pebs_table, pebs_plot, _PEBS_COLUMNS),
    "numa-placement": View(numa_table, numa_plot, _NUMA_COLUMNS),
    "numa-sources": View(numa_sources_table, numa_sources_plot, _NUMA_SOURCES_COLUMNS),
    "numa-opteron": View(numa_machine_table, numa_machine_plot, _NUMA_MACHINE_COLUMNS),
    "telescope-redis": View(redis_table, redis_plot, _REDIS_COLUMNS),
    "tiering": View(tiering_table, tiering_plot, _TIERING_COLUMNS),
    "pebs-scale": View(pebs_scale_table, pebs_scale_plot, _PEBS_SCALE_COLUMNS),
}


def natural_key(label: str) -> list[Any]:
    """Sort key that orders ``bt/8/fifo`` before ``bt/16/fifo``."""
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", label)]
