"""Tiering sweeps (``report.sweep_name = "tiering"``, e.g. the built-in ``tiering-kv``): one
simulation per sweep point (one tiering configuration each), one record per point, a table
and a plot of throughput, p95 latency and fast-tier use over time for all policies.

A record holds: ``policy`` (the point's label), ``kind`` (the tiering policy kind, or
``none``), ``telemetry`` (the technique it follows), ``fast_tier_bytes``/``slow_tier_bytes``
(node capacities), ``run_time_s`` (simulated), ``throughput_rps`` and ``p50_us``/``p95_us``/
``p99_us`` (the ``kv`` workload's, over the run), ``fast_used_bytes`` and
``fast_hot_bytes`` (fast-tier resident bytes, and of them the bytes the workload accessed in
the last window), ``fast_hot_bytes_mean`` (over all windows), ``migrations``,
``promoted_bytes``, ``demoted_bytes``, ``promoted_pages``, ``demoted_pages``,
``wall_seconds``, and the distance from the optimum (``optimum.*`` of the engine, see
``crates/tierlab-sim/src/scoring/optimum.rs``): ``run_fast_share`` and ``optimum_fast_share``
(accesses the fast tier served, in the run and in the per-window bound), ``optimum_speedup``,
``optimum_throughput_rps`` and ``optimum_p95_us`` (the run's figures scaled by the bound's
speedup), and ``share_of_optimum``: ``(throughput - baseline) / (bound - baseline)``, with the
baseline point's (no tiering) throughput and bound, so every policy is measured against the
same possible gain. A workload without requests (a replayed trace, the same work in every
run) has no throughput; its share uses the rate ``1 / run_time_s`` instead (the bound's:
the baseline's rate times its ``optimum_speedup``).

The migration counters, the same for every policy (:data:`COUNTERS`, the second table):
``migrated_bytes`` (promoted plus demoted) and ``migration_mbps`` (over the simulated run),
``migration_s`` (copies and shootdowns, on whichever core migrated) and ``shootdown_s`` (of
it, the TLB shootdowns), ``ping_pong`` (moves reversing a page's previous move within
``scoring.pingpong_window``) and ``wasted_promotions`` (promotions demoted again with no
access seen in between; from ground truth, see ``crates/tierlab-sim/src/scoring/
migrations.rs``), ``telemetry_cpu_s`` (the followed telemetry technique's CPU time, its
interrupts included; 0 for a policy with a mechanism of its own, whose scanning and fault
handling are in ``policy_cpu_s`` or on the application cores) and ``policy_cpu_s`` (the
policy's own work and the migrations it did on its core). A run without tiering has zeros.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlab import stats_keys as sk
from tierlab.sweep.kinds import JSON, SweepKind, SweepPlan

if TYPE_CHECKING:
    from rich.console import Console

    from tierlab._native import StatValue
    from tierlab.sweep.engine import SweepProgress, SweepRun
    from tierlab.sweep.executor import Executor
    from tierlab.sweep.point import PointError, PointResult

#: Time-series columns kept per point for the plot and the table.
SERIES = (
    sk.TS_T_END_S,
    sk.TS_KV_THROUGHPUT,
    sk.TS_KV_P95_US,
    sk.TS_TIERING_FAST_USED_BYTES,
    sk.TS_TIERING_FAST_HOT_BYTES,
    sk.TS_TIERING_PROMOTED_BYTES,
    sk.TS_OPTIMUM_FAST_SHARE,
    sk.TS_OPTIMUM_RUN_FAST_SHARE,
)


@dataclass
class TieringRecord:
    """One tiering configuration's figures (see the module docs)."""

    policy: str
    kind: str
    telemetry: str
    fast_tier_bytes: float
    slow_tier_bytes: float
    run_time_s: float
    throughput_rps: float
    p50_us: float
    p95_us: float
    p99_us: float
    fast_used_bytes: float
    fast_hot_bytes: float
    fast_hot_bytes_mean: float
    migrations: int
    promoted_bytes: int
    demoted_bytes: int
    wall_seconds: float
    promoted_pages: int = 0
    demoted_pages: int = 0
    run_fast_share: float = math.nan
    optimum_fast_share: float = math.nan
    optimum_speedup: float = math.nan
    optimum_throughput_rps: float = math.nan
    optimum_p95_us: float = math.nan
    share_of_optimum: float = math.nan
    migrated_bytes: int = 0
    migration_mbps: float = 0.0
    migration_s: float = 0.0
    shootdown_s: float = 0.0
    ping_pong: int = 0
    wasted_promotions: int = 0
    telemetry_cpu_s: float = 0.0
    policy_cpu_s: float = 0.0

    def to_json(self) -> dict[str, StatValue]:
        return dict(asdict(self))


#: A point's time series: column name -> one value per window.
Series = dict[str, list[float]]


@dataclass
class TieringSweep:
    """Records and per-point time series of a tiering sweep."""

    scenario: str
    records: list[TieringRecord] = field(default_factory=list)
    series: dict[str, Series] = field(default_factory=dict)
    interrupted: bool = False
    failures: list[PointError] = field(default_factory=list)


def _f(st: dict[str, StatValue], key: str, default: float = math.nan) -> float:
    v = st.get(key)
    try:
        return float(v) if v is not None else default
    except (TypeError, ValueError):
        return default


def record(label: str, result: PointResult) -> TieringRecord:
    """The record of one point."""
    st = result.stats_flat
    sc = tomllib.loads(result.scenario)
    tiering: dict[str, Any] = sc.get("tiering") or {}
    nodes: list[dict[str, Any]] = sc.get("machine", {}).get("nodes", [])
    ts = result.timeseries
    fast = int(tiering.get("fast_node", 0))
    slow = int(tiering.get("slow_node", 1))

    def cap(i: int) -> float:
        if i < len(nodes):
            return _f(st, sk.node_capacity_bytes(nodes[i]["name"]))
        return math.nan

    if tiering:
        used = list(ts.get(sk.TS_TIERING_FAST_USED_BYTES, []))
        hot = list(ts.get(sk.TS_TIERING_FAST_HOT_BYTES, []))
    else:
        name = nodes[fast]["name"] if fast < len(nodes) else ""
        used = list(ts.get(sk.ts_node_resident_bytes(name), []))
        hot = [0.0] * len(used)
    run_s = _f(st, sk.RUN_SIMULATED_SECONDS)
    migrated = int(_f(st, sk.TIERING_MIGRATED_BYTES, 0.0))
    follows = str(tiering.get("telemetry", ""))
    return TieringRecord(
        policy=label,
        kind=str(tiering.get("kind", "none")),
        telemetry=str(tiering.get("telemetry", "")),
        fast_tier_bytes=cap(fast),
        slow_tier_bytes=cap(slow),
        run_time_s=_f(st, sk.RUN_SIMULATED_SECONDS),
        throughput_rps=_f(st, sk.WORKLOAD_KV_THROUGHPUT),
        p50_us=_f(st, sk.WORKLOAD_KV_P50_US),
        p95_us=_f(st, sk.WORKLOAD_KV_P95_US),
        p99_us=_f(st, sk.WORKLOAD_KV_P99_US),
        fast_used_bytes=float(used[-1]) if used else 0.0,
        fast_hot_bytes=float(hot[-1]) if hot else 0.0,
        fast_hot_bytes_mean=float(sum(hot) / len(hot)) if hot else 0.0,
        migrations=int(_f(st, sk.MACHINE_MIGRATIONS, 0.0)),
        promoted_bytes=int(_f(st, sk.TIERING_PROMOTED_BYTES, 0.0)),
        demoted_bytes=int(_f(st, sk.TIERING_DEMOTED_BYTES, 0.0)),
        wall_seconds=float(result.wall_seconds),
        promoted_pages=int(_f(st, sk.TIERING_PROMOTED_PAGES, 0.0)),
        demoted_pages=int(_f(st, sk.TIERING_DEMOTED_PAGES, 0.0)),
        run_fast_share=_f(st, sk.OPTIMUM_RUN_FAST_SHARE),
        optimum_fast_share=_f(st, sk.OPTIMUM_FAST_SHARE),
        optimum_speedup=_f(st, sk.OPTIMUM_SPEEDUP),
        optimum_throughput_rps=_f(st, sk.WORKLOAD_KV_THROUGHPUT) * _f(st, sk.OPTIMUM_SPEEDUP),
        optimum_p95_us=_f(st, sk.WORKLOAD_KV_P95_US) / _f(st, sk.OPTIMUM_SPEEDUP),
        migrated_bytes=migrated,
        migration_mbps=migrated / run_s / 1e6 if run_s > 0 else 0.0,
        migration_s=_f(st, sk.TIERING_MIGRATION_SECONDS, 0.0),
        shootdown_s=_f(st, sk.TIERING_SHOOTDOWN_SECONDS, 0.0),
        ping_pong=int(_f(st, sk.TIERING_PING_PONG, 0.0)),
        wasted_promotions=int(_f(st, sk.TIERING_WASTED_PROMOTIONS, 0.0)),
        telemetry_cpu_s=_f(st, sk.telemetry_cpu_seconds(follows), 0.0) if follows else 0.0,
        policy_cpu_s=_f(st, sk.TIERING_CPU_SECONDS, 0.0),
    )


def add_shares(records: list[TieringRecord]) -> None:
    """Set every record's ``share_of_optimum`` against its group's baseline: the gain over
    the baseline's throughput as a share of the gain the baseline's bound allows. A label's
    group is what follows its first ``/`` (``NUMA-tiering/interleaved`` is in group
    ``interleaved``, ``NUMA-tiering`` in the unnamed one); a group's baseline is its first
    record without a tiering policy, else the first such record of all. Without a baseline
    the shares stay NaN."""
    first = next((r for r in records if r.kind == "none"), None)
    bases: dict[str, TieringRecord] = {}
    for r in records:
        if r.kind == "none":
            bases.setdefault(_group(r.policy), r)
    for r in records:
        base = bases.get(_group(r.policy), first)
        if base is None:
            continue
        gain = _rate(base) * base.optimum_speedup - _rate(base)
        if gain > 0 and math.isfinite(gain):
            r.share_of_optimum = (_rate(r) - _rate(base)) / gain


def _group(label: str) -> str:
    return label.split("/", 1)[1] if "/" in label else ""


def _rate(r: TieringRecord) -> float:
    """The rate of work the share compares: the request throughput, or for a workload
    without requests (a replayed trace: the same work in every run) runs per second,
    ``1 / run_time_s``."""
    if math.isfinite(r.throughput_rps):
        return r.throughput_rps
    return 1.0 / r.run_time_s if r.run_time_s > 0 else math.nan


def series(result: PointResult) -> Series:
    """The :data:`SERIES` columns of a point's time series."""
    return {k: [float(x) for x in result.timeseries.get(k, [])] for k in SERIES}


class TieringKind(SweepKind[TieringSweep]):
    """``[report] sweep_name = "tiering"`` (``tiering-kv``): one :class:`TieringRecord` and
    one time series per point; ``--out`` writes ``records.json``, ``tiering.csv``,
    ``tiering_timeseries.csv`` and the plot."""

    name = "tiering"

    def report(self, plan: SweepPlan, run: SweepRun) -> TieringSweep:
        out = TieringSweep(plan.spec, interrupted=run.interrupted, failures=list(run.failures))
        for p, r in run.finished():
            out.records.append(record(p.label, r))
            out.series[p.label] = series(r)
        add_shares(out.records)
        return out

    def to_json(self, report: TieringSweep) -> JSON:
        return [dict(r.to_json()) for r in report.records]

    def write(self, report: TieringSweep, out_dir: Path) -> list[Path]:
        return write(report, out_dir)

    def render(self, report: TieringSweep, console: Console, title: str) -> None:
        from tierlab import tables

        rows = []
        by_time = False
        for r in report.records:
            j = dict(r.to_json())
            share = tables.cell(tables.col("share_of_optimum"), j.get("share_of_optimum"))
            if not math.isfinite(r.throughput_rps) and math.isfinite(r.share_of_optimum):
                # No requests (a replayed trace): the share compares run times.
                by_time = True
                share += " *"
            j["_share"] = share
            rows.append(j)
        tables.render(
            rows,
            TABLE,
            console,
            f"{title}: tiering",
            cells={"share_of_optimum": lambda row: row["_share"]},
        )
        # The same counters for every policy (docs/tiering-systems.md).
        tables.render(
            [dict(r.to_json()) for r in report.records], COUNTERS, console, f"{title}: migrations"
        )
        if by_time:
            console.print(
                "* the workload has no request throughput (a replayed trace): its share of the "
                "optimum gain compares runs per second (1 / run_time_s) with the no-tiering "
                "run's and the bound's; below 0%: slower than no tiering",
                highlight=False,
                soft_wrap=True,
            )


def run_tiering_sweep(
    scenario: str | Path,
    *,
    seed: int | None = None,
    set: Iterable[str] | None = None,
    only: str | None = None,
    jobs: int = 1,
    executor: Executor | None = None,
    progress: SweepProgress | None = None,
    on_done: Callable[[int, int, str, float], None] | None = None,
) -> TieringSweep:
    """Run the sweep points of a tiering scenario (or those whose label matches ``only``)."""
    from tierlab.sweep.api import run_kind

    outcome = run_kind(
        scenario,
        TieringKind(),
        seed=seed,
        set=set,
        only=only,
        jobs=jobs,
        executor=executor,
        progress=progress,
        on_done=on_done,
    )
    outcome.raise_failures()
    return outcome.report


def plot(sweep: TieringSweep, out_dir: Path) -> list[Path]:
    """``tiering.png``/``.svg``: throughput, p95 latency and fast-tier use over time."""
    from tierlab.plots import pyplot

    plt = pyplot()

    fig, axes = plt.subplots(4, 1, figsize=(8, 12), sharex=True)
    for label, s in sweep.series.items():
        t = s.get(sk.TS_T_END_S, [])
        # A workload without request metrics (a replayed trace) has no throughput or
        # latency series: its line is empty, it keeps its colour.
        tput = s.get(sk.TS_KV_THROUGHPUT, [])
        (line,) = axes[0].plot(t if tput else [], [v / 1e3 for v in tput], label=label)
        # One colour per policy in every panel (the fast-tier panel skips policies without
        # a fast tier, so its own colour cycle would drift from the legend's).
        color = line.get_color()
        p95 = s.get(sk.TS_KV_P95_US, [])
        axes[1].plot(t if p95 else [], p95, label=label, color=color)
        used = s.get(sk.TS_TIERING_FAST_USED_BYTES, [])
        hot = s.get(sk.TS_TIERING_FAST_HOT_BYTES, [])
        if used:
            axes[2].plot(t, [v / 2**30 for v in used], label=f"{label} used", color=color)
            if hot:
                axes[2].plot(t, [v / 2**30 for v in hot], linestyle="--", color=color)
        run_share = s.get(sk.TS_OPTIMUM_RUN_FAST_SHARE, [])
        bound = s.get(sk.TS_OPTIMUM_FAST_SHARE, [])
        if run_share:
            axes[3].plot(t, [100 * v for v in run_share], color=color)
        if bound and label == next(iter(sweep.series)):
            axes[3].plot(t, [100 * v for v in bound], linestyle=":", color="black", label="bound")
    axes[0].set_ylabel("throughput (k requests/s)")
    axes[1].set_ylabel("p95 latency (us)")
    axes[2].set_ylabel("fast tier (GiB; dashed: hot)")
    axes[3].set_ylabel("fast-tier accesses (%;\ndotted: bound)")
    axes[3].set_xlabel("time (s)")
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle(f"{sweep.scenario}: tiering policies")
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "tiering.png", out_dir / "tiering.svg"]
    from tierlab.plots import finish

    finish(fig)
    for p in paths:
        fig.savefig(p, dpi=110)
    plt.close(fig)
    return paths


def write(sweep: TieringSweep, out_dir: Path) -> list[Path]:
    """``records.json``, ``tiering.csv`` (the table), ``tiering_timeseries.csv`` and the plot."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    p = out_dir / "records.json"
    from tierlab.reporters.page import clean_json

    p.write_text(
        json.dumps(clean_json([r.to_json() for r in sweep.records]), indent=2, allow_nan=False)
        + "\n"
    )
    written.append(p)
    p = out_dir / "tiering.csv"
    pd.DataFrame([r.to_json() for r in sweep.records]).to_csv(p, index=False)
    written.append(p)
    rows: list[dict[str, str | float]] = []
    for label, s in sweep.series.items():
        for i in range(len(s.get(sk.TS_T_END_S, []))):
            rows.append({"policy": label, **{k: s[k][i] for k in SERIES if i < len(s[k])}})
    p = out_dir / "tiering_timeseries.csv"
    pd.DataFrame(rows).to_csv(p, index=False)
    written.append(p)
    written.extend(plot(sweep, out_dir))
    return written


TABLE = (
    "policy",
    "telemetry",
    "fast_tier_bytes",
    "slow_tier_bytes",
    "run_time_s",
    "throughput_rps",
    "p95_us",
    "fast_used_bytes",
    "fast_hot_bytes",
    "migrations",
    "promoted_pages",
    "demoted_pages",
    "optimum_throughput_rps",
    "share_of_optimum",
)


#: The migration counters' table: the same columns for every policy.
COUNTERS = (
    "policy",
    "promoted_pages",
    "demoted_pages",
    "ping_pong",
    "wasted_promotions",
    "migrated_bytes",
    "migration_mbps",
    "migration_s",
    "shootdown_s",
    "telemetry_cpu_s",
    "policy_cpu_s",
    "run_fast_share",
    "optimum_fast_share",
    "p50_us",
    "p95_us",
    "p99_us",
)
