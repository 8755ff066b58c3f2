"""PEBS overhead at scale (the PEBS paper's Fig. 3): single-node engine runs + a BSP model.

For each of the paper's six applications the engine runs the application's memory behaviour
on one core of a Knights Landing-like machine (1.4 GHz, a 1 MiB L2 cache model, DDR4), once
without telemetry and once per PEBS configuration (reset R x buffer B, the McKernel driver,
event ``l2-miss-loads``). From each run it takes, per hardware thread:

- ``W_e``: compute time of one engine iteration (baseline ``run.app_seconds`` / iterations);
- ``T``: application time between two PEBS interrupts (``W_e x iterations / interrupts``);
- ``d``: one interrupt handler's time (``interrupt_ns`` + per-record drain time);
- ``a``: the inline slowdown (assists and cache pollution): ``(T_R - T_0 - n d) / T_0``.

The scale model is the only analytic part (``reference/os-noise.md`` section 2, Tsafrir et
al. ICS'05, Hoefler et al. SC'10). A bulk-synchronous step of compute ``W_s`` ends with a
global synchronisation (allreduce or halo exchange); all ``N = nodes x threads per node``
hardware threads take PEBS interrupts periodically with period ``T`` and an independent
random phase, so a thread gets ``K = floor(x)`` or ``floor(x) + 1`` interrupts in a step,
``x = W_s (1 + a) / T``, the latter with probability ``frac(x)``. The step waits for the
slowest thread:

    E[max K] = floor(x) + 1 - (1 - frac(x))^N
    step     = W_s (1 + a) + d E[max K] + C(_TECHNIQUE),    C(_TECHNIQUE) = ceil(log2(P r)) c
    overhead = (step - (W_s + C(_TECHNIQUE))) / (W_s + C(_TECHNIQUE))

with ``r`` ranks per node and ``c`` the per-stage collective latency. ``W_s`` is the engine's
time per row times the application's rows per thread (weak scaling: constant; strong
scaling: x 32 / P), divided by the synchronisations per iteration. Noise during the
collective itself is not modelled (Hoefler SC'10: it stretches collectives too), so the model
is a lower bound where collectives dominate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlab import stats_keys as sk
from tierlab.sweep.kinds import SweepKind, SweepPlan
from tierlab.sweep.point import Point as SweepPoint

if TYPE_CHECKING:
    from rich.console import Console

    from tierlab.sweep.engine import SweepRun

#: The paper's grid.
RESETS = (64, 128, 256)
BUFFERS_KIB = (8, 16, 32)
NODES = (32, 64, 128, 256, 512, 1024, 2048)
#: Per-stage collective latency c, us: ``reference/os-noise.md``'s placeholder (2 us per
#: LogP tree stage), an ASSUMPTION, not calibrated.
COLLECTIVE_STAGE_US = 2.0

#: The paper's statements about Fig. 3 (its per-bar values are not given in the text).
PAPER: dict[str, Any] = {
    "range_percent": (1.0, 10.2),
    "mean_percent": 2.3,
    "GeoFEM R64-B8K": 10.2,
    "GeoFEM R256-B32K (at most)": 4.0,
    "trends": "flat with node count for most applications, a slight decrease for HPCG and "
    "LAMMPS (unexplained), rising for MiniFE (strong scaling); reset value most influential",
}


@dataclass(frozen=True)
class App:
    """One application profile: the engine workload of its memory behaviour and its run
    configuration on Oakforest-PACS."""

    name: str
    #: the paper, Sec. 4.2
    ranks_per_node: int
    threads_per_rank: int
    scaling: str  # "weak" or "strong"
    #: global synchronisations per iteration (allreduces + halo exchanges)
    syncs_per_iter: int
    #: rows (grid points, atoms, elements) per hardware thread at 32 nodes (ASSUMPTION: the
    #: paper gives no problem sizes; see ``source``)
    rows_per_thread: int
    #: the engine workload (inline TOML table) and its rows
    workload: str
    engine_rows: int
    engine_iterations: int
    source: str


APPS: tuple[App, ...] = (
    App(
        "GeoFEM",
        16,
        8,
        "weak",
        3,
        96**3 // 8,
        '{kind="spmv", nx=12, ny=12, nz=16, points=27, dof=3, cg=true, iterations=8}',
        12 * 12 * 16,
        8,
        "3-D linear elasticity by FEM, CG with 3 DOF per node (Nakajima): a 27-point operator "
        "in 3x3 block CSR (per block: column index, 3-vector gather, 9 values); 96^3 nodes "
        "per rank ASSUMED (rows = grid nodes); the engine's 12x12x16 nodes (4.1 MiB, > the L2) "
        "for 8 iterations, so every R samples each page; 2 dot products + 1 halo exchange per "
        "iteration",
    ),
    App(
        "HPCG",
        8,
        8,
        "weak",
        3,
        104**3 // 8,
        '{kind="spmv", nx=24, ny=24, nz=32, points=27, cg=true, iterations=2}',
        24 * 24 * 32,
        2,
        "HPCG reference default local grid 104^3 per rank (hpcg.dat); 27-point CG (the "
        "multigrid smoother is not modelled); 2 dot products + 1 halo exchange per iteration",
    ),
    App(
        "LAMMPS",
        32,
        4,
        "weak",
        1,
        32_000 // 4,
        '{kind="spmv", matrix="random", rows=20000, row_nnz=37, cg=false, iterations=2}',
        20_000,
        2,
        "LJ benchmark (in.lj): 32,000 atoms per rank ASSUMED, ~37 neighbours per atom within "
        "the 2.5 sigma cutoff + skin: a gather over a neighbour list; 1 halo exchange per step",
    ),
    App(
        "MiniFE",
        16,
        4,
        "strong",
        3,
        1536 * 512 // 4,
        '{kind="spmv", nx=24, ny=24, nz=32, points=27, cg=true, iterations=2}',
        24 * 24 * 32,
        2,
        "27-point hexahedral FEM operator, CG; the paper's 1536-page buffer (6 MiB = 786k "
        "doubles per rank at 32 nodes, DERIVED) as the rows per rank; strong scaling",
    ),
    App(
        "Lulesh",
        8,
        16,
        "weak",
        2,
        48**3 // 16,
        '{kind="lulesh", size=30, iterations=2}',
        30**3,
        2,
        "LULESH 2.0, -s 30 (default) in the engine, 48^3 elements per rank ASSUMED at scale "
        "(rows = elements); the engine's lulesh workload: LULESH's time step over its mesh "
        "arrays (gathers through nodelist, force scatter, nodal and element streams); "
        "1 halo exchange + 1 allreduce (time step) per cycle",
    ),
    App(
        "AMG2013",
        16,
        16,
        "weak",
        4,
        64**3 // 16,
        '{kind="spmv", nx=32, ny=32, nz=32, points=7, cg=true, iterations=2}',
        32**3,
        2,
        "7-point Laplacian (AMG2013 default problem), 64^3 per rank ASSUMED; V-cycle "
        "smoothing as 7-point SpMVs; several halo exchanges + allreduces per iteration",
    ),
)


@dataclass
class Stream:
    """One hardware thread's PEBS interrupt stream, from the engine."""

    app: str
    reset: int
    buffer_kib: int
    base_seconds: float
    app_seconds: float
    interrupts: int
    samples: int
    pages_seen: int
    handler_ns: float
    #: inline slowdown (assists + pollution)
    inline: float
    #: application time between interrupts, ns
    interval_ns: float
    single_node_overhead: float
    assumed_costs: str
    #: "interrupt" (the paper's driver) or "dedicated-thread" (its future work)
    drain: str = "interrupt"
    #: the dedicated thread's CPU per application thread (share of its time)
    poller_share: float = 0.0


@dataclass
class Point:
    app: str
    reset: int
    buffer_kib: int
    nodes: int
    step_us: float
    interval_us: float
    overhead: float
    drain: str = "interrupt"


@dataclass
class ScaleResult:
    streams: list[Stream] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    wall_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "streams": [asdict(s) for s in self.streams],
            "points": [asdict(p) for p in self.points],
            "paper": PAPER,
            "collective_stage_us": COLLECTIVE_STAGE_US,
            "wall_seconds": self.wall_seconds,
        }


def expected_max_interrupts(x: float, n: int) -> float:
    """E[max K] over ``n`` threads, K = floor(x) or floor(x) + 1 (probability frac(x))."""
    fl = math.floor(x)
    f = x - fl
    return fl + 1.0 - (1.0 - f) ** n if f > 0 else float(fl)


def step_overhead(
    w_s: float, interval: float, handler: float, inline: float, threads: int, coll: float
) -> float:
    """Relative overhead of one BSP step (all times in the same unit)."""
    x = w_s * (1.0 + inline) / interval if interval > 0 else 0.0
    k = expected_max_interrupts(x, threads) if interval > 0 else 0.0
    clean = w_s + coll
    return (w_s * inline + handler * k) / clean


def scale(app: App, s: Stream, nodes: int, stage_us: float = COLLECTIVE_STAGE_US) -> Point:
    """The BSP model at ``nodes`` nodes for one stream."""
    per_row_ns = s.base_seconds * 1e9 / (app.engine_rows * app.engine_iterations)
    rows = app.rows_per_thread * (32 / nodes if app.scaling == "strong" else 1.0)
    w_s = per_row_ns * rows / app.syncs_per_iter
    threads = nodes * app.ranks_per_node * app.threads_per_rank
    coll = math.ceil(math.log2(nodes * app.ranks_per_node)) * stage_us * 1e3
    o = step_overhead(w_s, s.interval_ns, s.handler_ns, s.inline, threads, coll)
    return Point(app.name, s.reset, s.buffer_kib, nodes, w_s / 1e3, s.interval_ns / 1e3, o, s.drain)


def _f(st: dict[str, Any], k: str) -> float:
    v = st.get(k)
    return float(v) if isinstance(v, (int, float)) else 0.0


#: The label of the PEBS technique of the single-node runs.
_TECHNIQUE = "p"


def engine_streams(
    app: App,
    resets: tuple[int, ...] = RESETS,
    buffers: tuple[int, ...] = BUFFERS_KIB,
    extra: list[str] | None = None,
    drains: tuple[str, ...] = ("interrupt",),
    seed: int | None = None,
) -> list[Stream]:
    """The engine's single-node runs of ``app``: a baseline and one per (drain, R, B)."""
    from tierlab.api import run_native

    base = run_native("pebs-minife", run_overrides(app, None, extra), seed)
    b = _f(base.stats_flat, sk.RUN_APP_SECONDS)
    out = []
    for drain, r, kib in ((dr, r, k) for dr in drains for r in resets for k in buffers):
        res = run_native("pebs-minife", run_overrides(app, (drain, r, kib), extra), seed)
        out.append(stream(app, r, kib, drain, b, res.stats_flat))
    return out


def run_overrides(
    app: App, config: tuple[str, int, int] | None, extra: list[str] | None = None
) -> list[str]:
    """The overrides of ``pebs-minife`` for one single-node run of ``app``: its baseline
    (``config`` None) or PEBS with (drain, R, B KiB)."""
    # Two cores: the application on core 0, a kernel thread (the dedicated drain thread) on 1.
    common = [f"workload={app.workload}", "machine.cores=2", *(extra or [])]
    if config is None:
        return [*common, "telemetry=[]"]
    drain, r, kib = config
    tele = (
        f'telemetry=[{{kind="pebs", name="{_TECHNIQUE}", event="l2-miss-loads", period={r}, '
        f'buffer_size="{kib}KiB", drain="{drain}"}}]'
    )
    return [*common, tele]


def stream(app: App, r: int, kib: int, drain: str, b: float, st: dict[str, Any]) -> Stream:
    """One (R, B, drain) run's interrupt stream, from its statistics and the baseline's
    application time ``b`` (s)."""
    t = _f(st, sk.RUN_APP_SECONDS)
    n = int(_f(st, sk.telemetry_interrupts(_TECHNIQUE)))
    samples = int(_f(st, sk.telemetry_samples(_TECHNIQUE)))
    per_irq = _f(st, sk.telemetry_threshold_records(_TECHNIQUE))
    d = (
        _f(st, sk.telemetry_interrupt_ns(_TECHNIQUE))
        + _f(st, sk.telemetry_drain_ns_per_record(_TECHNIQUE)) * per_irq
    )
    inline = max(0.0, (t - b - n * d * 1e-9) / b) if b > 0 else 0.0
    # The interval from the sample count (exact: events / R) and the records per
    # interrupt, so a run too short for many interrupts still gives it.
    polled = drain != "interrupt"
    interval = b * 1e9 * per_irq / samples if samples and not polled else math.inf
    if polled:
        d = 0.0
    return Stream(
        app=app.name,
        reset=r,
        buffer_kib=kib,
        base_seconds=b,
        app_seconds=t,
        interrupts=n,
        samples=samples,
        pages_seen=int(_f(st, sk.telemetry_pages_seen(_TECHNIQUE))),
        handler_ns=d,
        inline=inline,
        interval_ns=interval,
        single_node_overhead=t / b - 1.0 if b > 0 else 0.0,
        assumed_costs=str(st.get(sk.telemetry_assumed_costs(_TECHNIQUE), "")),
        drain=drain,
        poller_share=_f(st, sk.telemetry_poller_seconds(_TECHNIQUE)) / t if t > 0 else 0.0,
    )


def run_grid(
    apps: tuple[App, ...] = APPS,
    nodes: tuple[int, ...] = NODES,
    resets: tuple[int, ...] = RESETS,
    buffers: tuple[int, ...] = BUFFERS_KIB,
    extra: list[str] | None = None,
    drains: tuple[str, ...] = ("interrupt", "dedicated-thread"),
    seed: int | None = None,
) -> ScaleResult:
    import time

    t0 = time.monotonic()
    res = ScaleResult()
    for app in apps:
        for s in engine_streams(app, resets, buffers, extra, drains, seed):
            res.streams.append(s)
            for p in nodes:
                res.points.append(scale(app, s, p))
    res.wall_seconds = time.monotonic() - t0
    return res


def table(res: ScaleResult) -> str:
    nodes = sorted({p.nodes for p in res.points})
    head = f"{'app':8} {'R':>4} {'B':>4} {'T_irq us':>9} {'1 node':>7} " + " ".join(
        f"{n:>6}" for n in nodes
    )
    lines = [head]
    by = {(p.app, p.reset, p.buffer_kib, p.drain, p.nodes): p for p in res.points}
    for s in res.streams:
        cells = " ".join(
            f"{100 * by[(s.app, s.reset, s.buffer_kib, s.drain, n)].overhead:5.2f}%" for n in nodes
        )
        tag = "" if s.drain == "interrupt" else " ded"
        lines.append(
            f"{s.app + tag:8} {s.reset:>4} {s.buffer_kib:>3}K {s.interval_ns / 1e3:9.1f} "
            f"{100 * s.single_node_overhead:6.2f}% {cells}"
        )
    ov = [100 * p.overhead for p in res.points if p.drain == "interrupt"]
    if ov:
        lines.append(
            f"model: {min(ov):.2f}%-{max(ov):.2f}%, mean {sum(ov) / len(ov):.2f}% "
            f"({len(res.streams)} engine runs with PEBS)"
        )
    ded = [p for p in res.points if p.drain != "interrupt"]
    if ded:
        worst = max(ded, key=lambda p: p.overhead)
        share = max(s.poller_share for s in res.streams)
        lines.append(
            f"dedicated drain thread (the paper's future work): at most "
            f"{100 * worst.overhead:.2f}% ({worst.app} R{worst.reset} B{worst.buffer_kib}K, "
            f"{worst.nodes} nodes); the poller uses at most {100 * share:.2f}% of a hardware "
            "thread per application thread"
        )
    lines.append("paper: 1.0%-10.2%, mean 2.3%, GeoFEM R64-B8K 10.2%, GeoFEM R256-B32K <= 4%")
    assumed = sorted({s.assumed_costs for s in res.streams if s.assumed_costs not in ("", "none")})
    if assumed:
        lines.append("costs at assumed defaults: " + "; ".join(assumed))
    return "\n".join(lines)


def write(res: ScaleResult, out: Path) -> list[str]:
    import pandas as pd

    out.mkdir(parents=True, exist_ok=True)
    files = []
    from tierlab.reporters.page import clean_json

    (out / "pebs-scale.json").write_text(
        json.dumps(clean_json(res.to_json()), indent=1, allow_nan=False)
    )
    files.append("pebs-scale.json")
    pd.DataFrame([asdict(p) for p in res.points]).to_csv(out / "pebs-scale.csv", index=False)
    pd.DataFrame([asdict(s) for s in res.streams]).to_csv(out / "pebs-streams.csv", index=False)
    files += ["pebs-scale.csv", "pebs-streams.csv"]
    (out / "pebs-scale.txt").write_text(table(res) + "\n")
    files.append("pebs-scale.txt")
    files += plot(res, out / "pebs-scale")
    return files


def plot(res: ScaleResult, stem: Path) -> list[str]:
    from tierlab.plots import pyplot

    plt = pyplot()

    apps = list(dict.fromkeys(p.app for p in res.points))
    nodes = sorted({p.nodes for p in res.points})
    configs = list(
        dict.fromkeys((s.reset, s.buffer_kib) for s in res.streams if s.drain == "interrupt")
    )
    fig, axes = plt.subplots(2, 3, figsize=(15, 7), sharey=True, squeeze=False)
    by = {
        (p.app, p.reset, p.buffer_kib, p.nodes): p.overhead
        for p in res.points
        if p.drain == "interrupt"
    }
    width = 0.8 / max(1, len(configs))
    for i, app in enumerate(apps[:6]):
        ax = axes[i // 3][i % 3]
        for j, (r, b) in enumerate(configs):
            ys = [100 * by.get((app, r, b, n), 0.0) for n in nodes]
            xs = [k + j * width for k in range(len(nodes))]
            ax.bar(xs, ys, width, label=f"R{r} B{b}K")
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(nodes))], [str(n) for n in nodes])
        ax.set_title(f"({'abcdef'[i]}) {app}")
        ax.set_xlabel("nodes")
        if i % 3 == 0:
            ax.set_ylabel("overhead (%)")
    axes[0][0].legend(fontsize=7, ncol=3)
    fig.suptitle("PEBS overhead at scale (engine streams + BSP model); paper: 1%-10.2%")
    fig.tight_layout()
    files = []
    from tierlab.plots import finish

    finish(fig)
    for ext in ("png", "svg"):
        fig.savefig(f"{stem}.{ext}", dpi=110)
        files.append(f"{stem.name}.{ext}")
    plt.close(fig)
    return files


class PebsScaleKind(SweepKind[ScaleResult]):
    """The PEBS paper's Fig. 3 as a sweep (``tierlab reproduce pebs``'s ``pebs-scale``
    figure): each application's single-node runs are points of ``pebs-minife`` (a baseline
    labelled ``APP/baseline`` and ``APP/R{R}-B{B}K/{drain}``), run by the sweep engine, and
    the report is the BSP model over them at every node count."""

    name = "pebs-scale"

    def plan(
        self,
        spec: str,
        overrides: Sequence[str] = (),
        seed: int | None = None,
        only: str | None = None,
    ) -> SweepPlan:
        return plan(spec, list(overrides), seed)

    def report(self, plan: SweepPlan, run: SweepRun) -> ScaleResult:
        return report(plan, run)

    def to_json(self, report: ScaleResult) -> Any:
        return report.to_json()

    def write(self, report: ScaleResult, out_dir: Path) -> list[Path]:
        return [out_dir / f for f in write(report, out_dir)]

    def render(self, report: ScaleResult, console: Console, title: str) -> None:
        console.print(table(report), highlight=False, soft_wrap=True)


#: The drains of the grid: the paper's interrupt-driven driver and a dedicated drain thread.
DRAINS = ("interrupt", "dedicated-thread")


def plan(spec: str, overrides: list[str], seed: int | None) -> SweepPlan:
    """Every application's baseline and (drain, R, B) runs as points of ``spec``."""
    points = []
    for app in APPS:
        configs: list[tuple[str, tuple[str, int, int] | None]] = [(f"{app.name}/baseline", None)]
        configs += [
            (f"{app.name}/R{r}-B{k}K/{d}", (d, r, k))
            for d in DRAINS
            for r in RESETS
            for k in BUFFERS_KIB
        ]
        for label, config in configs:
            ov = (*run_overrides(app, config), *overrides)
            points.append(SweepPoint(label, spec, ov, seed, sweep_label=label))
    return SweepPlan(spec, "pebs-scale", [p.label for p in points], points)


def report(plan: SweepPlan, run: SweepRun) -> ScaleResult:
    """The BSP model at every node count over the points that finished."""
    done = {p.label: r for p, r in run.finished()}
    res = ScaleResult()
    for app in APPS:
        base = done.get(f"{app.name}/baseline")
        if base is None:
            continue
        b = _f(base.stats_flat, sk.RUN_APP_SECONDS)
        for p in plan.points:
            parts = p.label.split("/")
            if parts[0] != app.name or len(parts) != 3 or p.label not in done:
                continue
            r, k = (int(x) for x in parts[1][1:-1].split("-B"))
            s = stream(app, r, k, parts[2], b, done[p.label].stats_flat)
            res.streams.append(s)
            res.points += [scale(app, s, n) for n in NODES]
    return res


def frame(res: ScaleResult) -> Any:
    """The model's points as a table: app, reset, buffer_kib, nodes, drain, overhead_pct."""
    import pandas as pd

    df = pd.DataFrame([asdict(p) for p in res.points])
    if not df.empty:
        df["overhead_pct"] = 100 * df["overhead"]
        df["config"] = [f"R{r}-B{b}K" for r, b in zip(df["reset"], df["buffer_kib"], strict=True)]
    return df
