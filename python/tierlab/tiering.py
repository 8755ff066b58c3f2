"""Tiering sweeps (``report.sweep_name = "tiering"``, e.g. the built-in ``tiering-kv``): one
simulation per sweep point (one tiering configuration each), one record per point, a table
and a plot of throughput, p95 latency and fast-tier use over time for all policies.

A record holds: ``policy`` (the point's label), ``kind`` (the tiering policy kind, or
``none``), ``telemetry`` (the technique it follows), ``fast_tier_bytes``/``slow_tier_bytes``
(node capacities), ``run_time_s`` (simulated), ``throughput_rps`` and ``p50_us``/``p95_us``/
``p99_us`` (the ``kv`` workload's, over the run), ``fast_used_bytes`` and
``fast_hot_bytes`` (fast-tier resident bytes, and of them the bytes the workload accessed in
the last window), ``fast_hot_bytes_mean`` (over all windows), ``migrations``,
``promoted_bytes``, ``demoted_bytes``, ``wall_seconds``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import multiprocessing
import sys
import tomllib
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierlab.api import build_overrides, native

#: Time-series columns kept per point for the plot and the table.
SERIES = (
    "t_end_s",
    "kv.throughput",
    "kv.p95_us",
    "tiering.fast_used_bytes",
    "tiering.fast_hot_bytes",
    "tiering.promoted_bytes",
)


@dataclass
class TieringSweep:
    """Records and per-point time series of a tiering sweep."""

    scenario: str
    records: list[dict[str, Any]] = field(default_factory=list)
    series: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    interrupted: bool = False


def _f(st: dict[str, Any], key: str, default: float = math.nan) -> float:
    v = st.get(key)
    try:
        return float(v) if v is not None else default
    except (TypeError, ValueError):
        return default


def record(label: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The record of one point (``raw``: what ``tierlab._native.run`` returns)."""
    st = raw["stats_flat"]
    sc = tomllib.loads(raw["scenario"])
    tiering = sc.get("tiering") or {}
    nodes = sc.get("machine", {}).get("nodes", [])
    ts = raw.get("timeseries") or {}
    fast = int(tiering.get("fast_node", 0))
    slow = int(tiering.get("slow_node", 1))

    def cap(i: int) -> float:
        if i < len(nodes):
            return _f(st, f"node.{nodes[i]['name']}.capacity_bytes")
        return math.nan

    if tiering:
        used = list(ts.get("tiering.fast_used_bytes", []))
        hot = list(ts.get("tiering.fast_hot_bytes", []))
    else:
        name = nodes[fast]["name"] if fast < len(nodes) else ""
        used = list(ts.get(f"node.{name}.resident_bytes", []))
        hot = [0.0] * len(used)
    return {
        "policy": label,
        "kind": str(tiering.get("kind", "none")),
        "telemetry": str(tiering.get("telemetry", "")),
        "fast_tier_bytes": cap(fast),
        "slow_tier_bytes": cap(slow),
        "run_time_s": _f(st, "run.simulated_seconds"),
        "throughput_rps": _f(st, "workload.kv.throughput"),
        "p50_us": _f(st, "workload.kv.p50_us"),
        "p95_us": _f(st, "workload.kv.p95_us"),
        "p99_us": _f(st, "workload.kv.p99_us"),
        "fast_used_bytes": float(used[-1]) if used else 0.0,
        "fast_hot_bytes": float(hot[-1]) if hot else 0.0,
        "fast_hot_bytes_mean": float(sum(hot) / len(hot)) if hot else 0.0,
        "migrations": int(_f(st, "machine.migrations", 0.0)),
        "promoted_bytes": int(_f(st, "tiering.promoted_bytes", 0.0)),
        "demoted_bytes": int(_f(st, "tiering.demoted_bytes", 0.0)),
        "wall_seconds": float(raw.get("wall_seconds", 0.0)),
    }


def _run_one(spec: str, overrides: list[str], seed: int | None, label: str) -> dict[str, Any]:
    raw = native().run(spec, overrides, seed)
    ts = raw.get("timeseries") or {}
    return {
        "record": record(label, raw),
        "series": {k: [float(x) for x in ts.get(k, [])] for k in SERIES},
    }


def run_tiering_sweep(
    scenario: str | Path,
    *,
    seed: int | None = None,
    set: Iterable[str] | None = None,
    only: str | None = None,
    jobs: int = 1,
    on_done: Callable[[int, int, str, float], None] | None = None,
) -> TieringSweep:
    """Run the sweep points of a tiering scenario (or those whose label matches ``only``)."""
    spec = str(scenario)
    user = build_overrides(None, set)
    _name, pts = native().sweep_points(spec, user)
    points = [(str(label), list(ov)) for label, ov in pts]
    if only:
        points = [p for p in points if fnmatch.fnmatchcase(p[0], only)]
    out = TieringSweep(scenario=spec)
    done: dict[int, dict[str, Any]] = {}
    try:
        if jobs <= 1:
            for i, (label, ov) in enumerate(points):
                done[i] = _run_one(spec, [*ov, *user], seed, label)
                if on_done is not None:
                    on_done(len(done), len(points), label, done[i]["record"]["wall_seconds"])
        else:
            ctx = multiprocessing.get_context(
                "fork" if sys.platform.startswith("linux") else "spawn"
            )
            with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
                futures = {
                    pool.submit(_run_one, spec, [*ov, *user], seed, label): i
                    for i, (label, ov) in enumerate(points)
                }
                for fut, i in futures.items():
                    done[i] = fut.result()
                    if on_done is not None:
                        on_done(
                            len(done), len(points), points[i][0], done[i]["record"]["wall_seconds"]
                        )
    except KeyboardInterrupt:
        out.interrupted = True
    for i in sorted(done):
        out.records.append(done[i]["record"])
        out.series[points[i][0]] = done[i]["series"]
    return out


def plot(sweep: TieringSweep, out_dir: Path) -> list[Path]:
    """``tiering.png``/``.svg``: throughput, p95 latency and fast-tier use over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for label, s in sweep.series.items():
        t = s.get("t_end_s", [])
        (line,) = axes[0].plot(t, [v / 1e3 for v in s.get("kv.throughput", [])], label=label)
        # One colour per policy in every panel (the fast-tier panel skips policies without
        # a fast tier, so its own colour cycle would drift from the legend's).
        color = line.get_color()
        axes[1].plot(t, s.get("kv.p95_us", []), label=label, color=color)
        used = s.get("tiering.fast_used_bytes", [])
        hot = s.get("tiering.fast_hot_bytes", [])
        if used:
            axes[2].plot(t, [v / 2**30 for v in used], label=f"{label} used", color=color)
            if hot:
                axes[2].plot(t, [v / 2**30 for v in hot], linestyle="--", color=color)
    axes[0].set_ylabel("throughput (k requests/s)")
    axes[1].set_ylabel("p95 latency (us)")
    axes[2].set_ylabel("fast tier (GiB; dashed: hot)")
    axes[2].set_xlabel("time (s)")
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle(f"{sweep.scenario}: tiering policies")
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "tiering.png", out_dir / "tiering.svg"]
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
    p.write_text(json.dumps(sweep.records, indent=2) + "\n")
    written.append(p)
    p = out_dir / "tiering.csv"
    pd.DataFrame(sweep.records).to_csv(p, index=False)
    written.append(p)
    rows = []
    for label, s in sweep.series.items():
        for i in range(len(s.get("t_end_s", []))):
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
)


def _cell(column: str, v: object) -> str:
    """A table cell: sizes in GiB, rates and counts with thousands separators, latencies
    and times with a few decimals."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if column.endswith("_bytes") and isinstance(v, float | int):
        gib = v / 2**30
        return f"{gib:,.0f} GiB" if gib >= 100 else f"{gib:.3g} GiB"
    if column in ("throughput_rps", "migrations") and isinstance(v, float | int):
        return f"{v:,.0f}"
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 10 else f"{v:.3g}"
    return str(v)


def run_tiering_cli(args: argparse.Namespace) -> int:
    """``tierlab run`` for a tiering sweep: a table (or ``--json`` records), ``--out`` files."""
    from rich.console import Console
    from rich.table import Table

    from tierlab.cli.common import EXIT_INTERRUPTED, EXIT_OK, stdout_console

    err = Console(stderr=True)
    show = not args.no_progress and sys.stderr.isatty()

    def done(k: int, total: int, label: str, wall: float) -> None:
        if show:
            err.print(f"[{k}/{total}] {label} ({wall:.1f} s)", highlight=False)

    sweep = run_tiering_sweep(
        args.scenario,
        seed=args.seed,
        set=args.overrides,
        only=args.points,
        jobs=max(1, args.jobs),
        on_done=done,
    )
    if args.points and not sweep.records and not sweep.interrupted:
        args.parser.error(f"--points {args.points!r} matches no sweep point")
    written = write(sweep, args.out) if args.out is not None else []
    if args.json:
        sys.stdout.write(json.dumps(sweep.records, indent=2) + "\n")
        sys.stdout.flush()
    else:
        out = stdout_console()
        table = Table(title=f"{args.scenario}: tiering", title_justify="left", box=None)
        for c in TABLE:
            table.add_column(c, justify="left" if c in ("policy", "telemetry") else "right")
        for r in sweep.records:
            cells = []
            for c in TABLE:
                v = r.get(c)
                cells.append(_cell(c, v))
            table.add_row(*cells)
        out.print(table)
        if written:
            out.print(f"wrote {len(written)} files to {args.out}")
    if sweep.interrupted:
        err.print("tierlab: interrupted; kept the points done", highlight=False)
        return EXIT_INTERRUPTED
    return EXIT_OK
