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
from pathlib import Path
from typing import Any

#: The paper's average wall-clock saving (a lower bound: "more than 20%") and overhead.
PAPER_SAVINGS_PCT = 20.0
PAPER_OVERHEAD_PCT = 2.7

#: Sweep name that marks a placement sweep.
SWEEP_NAME = "placement"

#: Record columns, in table order.
COLUMNS = (
    "label",
    "kernel",
    "nodes",
    "policy",
    "mode",
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


def _num(v: Any, default: float = math.nan) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


def policy_name(r: dict[str, Any]) -> str:
    """``first-touch``, ``interleave``, ``profile-guided`` (next run) or
    ``profile-guided-migrate``/``profile-guided-profile``."""
    kind = str(r.get("placement.policy", ""))
    mode = str(r.get("placement.mode", ""))
    if kind == "profile-guided" and mode != "next-run":
        return f"{kind}-{mode}"
    return kind


def record(raw: dict[str, Any]) -> dict[str, Any]:
    """The placement record of one point (``raw``: a record of
    :func:`tierlab.policies.record`, which carries every machine-wide stat)."""
    kind = str(raw.get("placement.policy", ""))
    rec: dict[str, Any] = {
        "label": raw.get("label", ""),
        "workload": str(raw.get("workload", "")),
        "kernel": str(raw.get("workload.kernel", raw.get("workload", ""))),
        "nodes": int(_num(raw.get("placement.nodes"), 0)),
        "policy": policy_name(raw),
        "mode": str(raw.get("placement.mode", "")),
        "run_time_s": _num(raw.get("placement.run_time_s")),
        "savings_pct": math.nan,
        "overhead_pct": _num(raw.get("placement.profiling_overhead_pct"), 0.0),
        "local_access_fraction": _num(raw.get("placement.local_access_fraction")),
    }
    if kind == "profile-guided":
        rec["source"] = str(raw.get("placement.profile.source", ""))
        rec["profile_samples"] = int(_num(raw.get("placement.profile.samples"), 0))
        rec["pages_with_affinity"] = int(_num(raw.get("placement.profile.pages_with_affinity"), 0))
        if "placement.migrate.pages" in raw:
            rec["pages_migrated"] = int(_num(raw["placement.migrate.pages"], 0))
            rec["migration_time_s"] = _num(raw.get("placement.migrate.time_s"))
        if "placement.profile_run.run_time_s" in raw:
            rec["profile_run_time_s"] = _num(raw["placement.profile_run.run_time_s"])
        rec["paper_savings_pct"] = PAPER_SAVINGS_PCT
        rec["paper_overhead_pct"] = PAPER_OVERHEAD_PCT
    rec["seed"] = raw.get("run.seed")
    return rec


def add_savings(records: list[dict[str, Any]]) -> None:
    """``savings_pct`` = 100 x (first-touch time - time) / first-touch time, against the
    first-touch record of the same kernel and node count (left NaN without one)."""
    base = {
        (r["kernel"], r["nodes"]): r["run_time_s"]
        for r in records
        if r["policy"] == "first-touch" and r["run_time_s"] > 0
    }
    for r in records:
        b = base.get((r["kernel"], r["nodes"]))
        if b:
            r["savings_pct"] = round(100.0 * (b - r["run_time_s"]) / b, 3)


def placement_records(raw_records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Placement records of a sweep's raw records, with savings filled in."""
    recs = [record(r) for r in raw_records if "placement.policy" in r]
    add_savings(recs)
    return recs


def table(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per record with the table's columns (missing values empty)."""
    return [{c: r.get(c) for c in COLUMNS} for r in records]


def plot(records: Sequence[dict[str, Any]], out_dir: Path) -> list[Path]:
    """Bars of the saving against first touch per kernel and node count, one bar per
    policy, with the paper's 20% average saving and 2.7% overhead marked; the overhead in a
    second panel. Returns the PNG and SVG written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = [r for r in records if r["policy"] != "first-touch"]
    if not recs:
        return []
    groups = sorted({(r["kernel"], r["nodes"]) for r in recs})
    policies = sorted({r["policy"] for r in recs}, key=lambda p: (p != "interleave", p))
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    width = 0.8 / max(1, len(policies))
    for metric, ax, ref, ylabel in (
        ("savings_pct", axes[0], PAPER_SAVINGS_PCT, "wall-time saving vs first touch (%)"),
        ("overhead_pct", axes[1], PAPER_OVERHEAD_PCT, "profiling overhead (%)"),
    ):
        for j, pol in enumerate(policies):
            xs, ys = [], []
            for i, g in enumerate(groups):
                r = next(
                    (r for r in recs if (r["kernel"], r["nodes"]) == g and r["policy"] == pol), None
                )
                if r is not None:
                    xs.append(i + (j - (len(policies) - 1) / 2) * width)
                    ys.append(r.get(metric, math.nan))
            ax.bar(xs, ys, width=width, label=pol)
        ax.axhline(ref, color="k", linestyle="--", linewidth=1, label=f"paper ({ref:g}%)")
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"{k}\n{n} nodes" for k, n in groups], fontsize=8)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    fig.suptitle("ccNUMA placement of serially initialized kernels (remote = 2x local)")
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "placement.png", out_dir / "placement.svg"]
    for p in paths:
        fig.savefig(p, dpi=110)
    plt.close(fig)
    return paths


def write_placement(records: Sequence[dict[str, Any]], out_dir: Path) -> list[Path]:
    """``placement.csv`` (the table) and the plot."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    p = out_dir / "placement.csv"
    pd.DataFrame(table(records), columns=list(COLUMNS)).to_csv(p, index=False)
    return [p, *plot(records, out_dir)]
