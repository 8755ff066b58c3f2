"""Simulated ccNUMA page placement: the records, table and plot of a placement sweep.

A scenario whose ``[report] sweep_name`` is ``"placement"`` (the built-in
``numa-placement``) runs one simulation per sweep point with a ``[placement]`` policy
(``first-touch``, ``interleave``, ``profile-guided``). Each point gives one record: what ran
(kernel, nodes, policy, mode) and the modeled wall time, the saving against first touch of
the same kernel on the same nodes, and the profiling overhead, beside the paper's figures
(Marathe and Mueller, PPoPP 2006: > 20% average saving, 2.7% one-time profiling overhead).
See ``docs/placement.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlab import stats_keys as sk
from tierlab.sweep.kinds import JSON, SweepKind, SweepPlan

if TYPE_CHECKING:
    from rich.console import Console

    from tierlab._native import StatValue
    from tierlab.sweep.engine import SweepRun
    from tierlab.sweep.point import PointError

#: The paper's average wall-clock saving (a lower bound: "more than 20%") and overhead.
PAPER_SAVINGS_PCT = 20.0
PAPER_OVERHEAD_PCT = 2.7

#: ``placement.period`` of profile-guided when a scenario does not set it (events per sample).
DEFAULT_PERIOD = 1000

#: Sweep name that marks a placement sweep.
SWEEP_NAME = "placement"

#: Record columns, in table order.
COLUMNS = (
    "label",
    "kernel",
    "nodes",
    "policy",
    "mode",
    "remote_factor",
    "source",
    "period",
    "run_time_s",
    "savings_pct",
    "overhead_pct",
    "local_access_fraction",
    "profile_samples",
    "pages_with_affinity",
    "pages_migrated",
    "profile_run_time_s",
    "paper_savings_pct",
    "paper_overhead_pct",
)


def _num(v: StatValue, default: float = math.nan) -> float:
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default


def policy_name(stats: dict[str, StatValue]) -> str:
    """``first-touch``, ``interleave``, ``profile-guided`` (next run) or
    ``profile-guided-migrate``/``profile-guided-profile``."""
    kind = str(stats.get(sk.PLACEMENT_POLICY, ""))
    mode = str(stats.get(sk.PLACEMENT_MODE, ""))
    if kind == "profile-guided" and mode != "next-run":
        return f"{kind}-{mode}"
    return kind


@dataclass
class PlacementRecord:
    """One placement point: what ran, the modeled wall time, the saving against first touch
    (:func:`add_savings`) and the profiling overhead; for ``profile-guided``, the profile
    (source, samples, pages with an affinity), the migration and the paper's figures
    (fields left None are absent from the JSON)."""

    label: str
    workload: str
    kernel: str
    nodes: int
    policy: str
    mode: str
    run_time_s: float
    savings_pct: float
    overhead_pct: float
    local_access_fraction: float
    seed: StatValue = None
    #: The machine's remote/local latency ratio (``machine.remote_factor`` of the point).
    remote_factor: float | None = None
    source: str | None = None
    #: Events per sample of the profile (``placement.period``).
    period: int | None = None
    profile_samples: int | None = None
    pages_with_affinity: int | None = None
    pages_migrated: int | None = None
    migration_time_s: float | None = None
    profile_run_time_s: float | None = None
    paper_savings_pct: float | None = None
    paper_overhead_pct: float | None = None

    def to_json(self) -> dict[str, StatValue]:
        out: dict[str, StatValue] = {
            "label": self.label,
            "workload": self.workload,
            "kernel": self.kernel,
            "nodes": self.nodes,
            "policy": self.policy,
            "mode": self.mode,
            "run_time_s": self.run_time_s,
            "savings_pct": self.savings_pct,
            "overhead_pct": self.overhead_pct,
            "local_access_fraction": self.local_access_fraction,
        }
        for k in (
            "remote_factor",
            "source",
            "period",
            "profile_samples",
            "pages_with_affinity",
            "pages_migrated",
            "migration_time_s",
            "profile_run_time_s",
            "paper_savings_pct",
            "paper_overhead_pct",
        ):
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        out["seed"] = self.seed
        return out


def record(
    label: str,
    workload: str,
    stats: dict[str, StatValue],
    scenario: dict[str, Any] | None = None,
) -> PlacementRecord | None:
    """The placement record of one point from its flat stats (None for a point without a
    placement policy); ``scenario`` (the point's resolved scenario) gives the machine's
    remote factor and the profile's sampling period."""
    if sk.PLACEMENT_POLICY not in stats:
        return None
    kind = str(stats.get(sk.PLACEMENT_POLICY, ""))
    rec = PlacementRecord(
        label=label,
        workload=workload,
        kernel=str(stats.get(sk.WORKLOAD_KERNEL, workload)),
        nodes=int(_num(stats.get(sk.PLACEMENT_NODES), 0)),
        policy=policy_name(stats),
        mode=str(stats.get(sk.PLACEMENT_MODE, "")),
        run_time_s=_num(stats.get(sk.PLACEMENT_RUN_TIME_S)),
        savings_pct=math.nan,
        overhead_pct=_num(stats.get(sk.PLACEMENT_PROFILING_OVERHEAD_PCT), 0.0),
        local_access_fraction=_num(stats.get(sk.PLACEMENT_LOCAL_ACCESS_FRACTION)),
        seed=stats.get(sk.RUN_SEED),
    )
    sc = scenario or {}
    machine = sc.get("machine", {})
    if isinstance(machine, dict) and "remote_factor" in machine:
        rec.remote_factor = float(machine["remote_factor"])
    if kind == "profile-guided":
        rec.source = str(stats.get(sk.PLACEMENT_PROFILE_SOURCE, ""))
        period = stats.get(sk.PLACEMENT_PROFILE_PERIOD)
        if period is None:
            pl = sc.get("placement", {})
            period = pl.get("period", DEFAULT_PERIOD) if isinstance(pl, dict) else None
        rec.period = int(_num(period, 0)) if period is not None else None
        rec.profile_samples = int(_num(stats.get(sk.PLACEMENT_PROFILE_SAMPLES), 0))
        rec.pages_with_affinity = int(_num(stats.get(sk.PLACEMENT_PROFILE_PAGES_WITH_AFFINITY), 0))
        if sk.PLACEMENT_MIGRATE_PAGES in stats:
            rec.pages_migrated = int(_num(stats[sk.PLACEMENT_MIGRATE_PAGES], 0))
            rec.migration_time_s = _num(stats.get(sk.PLACEMENT_MIGRATE_TIME_S))
        if sk.PLACEMENT_PROFILE_RUN_RUN_TIME_S in stats:
            rec.profile_run_time_s = _num(stats[sk.PLACEMENT_PROFILE_RUN_RUN_TIME_S])
        rec.paper_savings_pct = PAPER_SAVINGS_PCT
        rec.paper_overhead_pct = PAPER_OVERHEAD_PCT
    return rec


def add_savings(records: Sequence[PlacementRecord]) -> None:
    """``savings_pct`` = 100 x (first-touch time - time) / first-touch time, against the
    first-touch record of the same kernel, node count and remote factor (left NaN without
    one)."""
    base = {
        (r.kernel, r.nodes, r.remote_factor): r.run_time_s
        for r in records
        if r.policy == "first-touch" and r.run_time_s > 0
    }
    for r in records:
        b = base.get((r.kernel, r.nodes, r.remote_factor))
        if b:
            r.savings_pct = round(100.0 * (b - r.run_time_s) / b, 3)


@dataclass
class PlacementSweep:
    """The placement records of a sweep (points without a placement policy are left out)."""

    scenario: str
    records: list[PlacementRecord]
    interrupted: bool = False
    failures: list[PointError] | None = None


class PlacementKind(SweepKind[PlacementSweep]):
    """``[report] sweep_name = "placement"`` (``numa-placement``): one
    :class:`PlacementRecord` per point with the savings against first touch; ``--out``
    writes ``records.json``, ``records.csv``, ``placement.csv`` and the plot."""

    name = "placement"

    def report(self, plan: SweepPlan, run: SweepRun) -> PlacementSweep:
        import tomllib

        from tierlab.policies import workload_name

        records = []
        for p, r in run.finished():
            sc = tomllib.loads(r.scenario)
            rec = record(p.label, workload_name(sc), r.stats_flat, sc)
            if rec is not None:
                records.append(rec)
        add_savings(records)
        return PlacementSweep(plan.spec, records, run.interrupted, list(run.failures))

    def to_json(self, report: PlacementSweep) -> JSON:
        return [dict(r.to_json()) for r in report.records]

    def write(self, report: PlacementSweep, out_dir: Path) -> list[Path]:
        from tierlab.policies import write_records

        written = write_records([r.to_json() for r in report.records], out_dir)
        return written + write_placement(report.records, out_dir)

    def render(self, report: PlacementSweep, console: Console, title: str) -> None:
        from tierlab.policies import render_records

        render_records(
            [r.to_json() for r in report.records],
            console,
            f"{title}: {len(report.records)} points",
        )


def table(records: Sequence[PlacementRecord]) -> list[dict[str, StatValue]]:
    """One row per record with the table's columns (missing values empty)."""
    rows = []
    for r in records:
        j = r.to_json()
        rows.append({c: j.get(c) for c in COLUMNS})
    return rows


def series_names(records: Sequence[PlacementRecord]) -> dict[int, str]:
    """A name per record (by ``id``): its policy, with the profile's source and period when
    the records profile with more than one (``numa-sources``)."""
    profiles = {(r.source, r.period) for r in records if r.source is not None}
    out = {}
    for r in records:
        name = r.policy
        if len(profiles) > 1 and r.source is not None:
            src = "TLB misses" if r.source == "tlb-misses" else "loads"
            name = f"{r.policy} ({src}, 1/{r.period})"
        out[id(r)] = name
    return out


def group_name(r: PlacementRecord, several_machines: bool) -> str:
    """``stream, 2 nodes`` (with ``, remote 1.5x`` when the records have several machines)."""
    g = f"{r.kernel}, {r.nodes} nodes"
    if several_machines and r.remote_factor is not None:
        g += f", remote {r.remote_factor:g}x"
    return g


def plot(records: Sequence[PlacementRecord], out_dir: Path) -> list[Path]:
    """Bars of the saving against first touch per kernel and node count, one bar per
    policy, with the paper's 20% average saving and 2.7% overhead marked; the overhead in a
    second panel. Returns the PNG and SVG written."""
    from tierlab.plots import pyplot

    plt = pyplot()

    recs = [r for r in records if r.policy != "first-touch"]
    if not recs:
        return []
    several = len({r.remote_factor for r in records}) > 1
    names = series_names(recs)
    groups = list(dict.fromkeys(group_name(r, several) for r in recs))
    policies = list(dict.fromkeys(names[id(r)] for r in recs))
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    width = 0.8 / max(1, len(policies))
    for metric, ax, ref, ylabel in (
        ("savings_pct", axes[0], PAPER_SAVINGS_PCT, "wall-time saving vs first touch (%)"),
        ("overhead_pct", axes[1], PAPER_OVERHEAD_PCT, "profiling overhead (%)"),
    ):
        for j, pol in enumerate(policies):
            xs: list[float] = []
            ys: list[float] = []
            for i, g in enumerate(groups):
                r = next(
                    (r for r in recs if group_name(r, several) == g and names[id(r)] == pol), None
                )
                if r is not None:
                    xs.append(i + (j - (len(policies) - 1) / 2) * width)
                    ys.append(float(getattr(r, metric)))
            ax.bar(xs, ys, width=width, label=pol)
        ax.axhline(ref, color="k", linestyle="--", linewidth=1, label=f"paper ({ref:g}%)")
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([g.replace(", ", "\n", 1) for g in groups], fontsize=8)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    factors = sorted({r.remote_factor for r in records if r.remote_factor is not None})
    remote = " / ".join(f"{f:g}x" for f in factors) or "2x"
    fig.suptitle(f"ccNUMA placement of serially initialized kernels (remote = {remote} local)")
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "placement.png", out_dir / "placement.svg"]
    from tierlab.plots import finish

    finish(fig)
    for p in paths:
        fig.savefig(p, dpi=110)
    plt.close(fig)
    return paths


def write_placement(records: Sequence[PlacementRecord], out_dir: Path) -> list[Path]:
    """``placement.csv`` (the table) and the plot."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    p = out_dir / "placement.csv"
    pd.DataFrame(table(records), columns=list(COLUMNS)).to_csv(p, index=False)
    return [p, *plot(records, out_dir)]
