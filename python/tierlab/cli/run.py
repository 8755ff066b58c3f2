"""``tierlab run SCENARIO``: simulate, print the summary, optionally write every output."""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from pathlib import Path

from rich.console import Console

from tierlab.api import Result, run_native
from tierlab.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    add_scenario_args,
    check_overrides,
    stdout_console,
)
from tierlab.progress import progress_bar
from tierlab.reporters import write_all
from tierlab.reporters.stats_json import stats_json
from tierlab.reporters.summary import SummaryReporter


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run a scenario",
        description="Run a scenario (a TOML file, a built-in name, or masim:PATH for a masim "
        "config) and print its summary. Ctrl-C stops the run and keeps what was done.",
    )
    p.add_argument("scenario", help="scenario file, built-in name, or masim:PATH")
    add_scenario_args(p)
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write timeseries.parquet/.csv, stats.json, run.json, scenario.toml, summary.csv, "
        "heatmap.parquet/.png/.svg into DIR",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the nested stats as JSON on stdout (only); for a scenario with sweep "
        "points, the list of records (one per point)",
    )
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.add_argument(
        "--points",
        metavar="GLOB",
        help="with sweep points: run only the points whose label matches (e.g. 'bt/*/cmcp')",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="with sweep points: run N points in parallel processes (default 1)",
    )
    p.set_defaults(func=main, parser=p)


def interrupted_message(result: Result) -> str:
    done = f"{(result.sim_ns_done or 0) / 1e9:.3f} s"
    if result.sim_ns_total:
        return f"interrupted at {done} of {result.sim_ns_total / 1e9:g} s (simulated time)"
    return f"interrupted at {done} (simulated time)"


def main(args: argparse.Namespace) -> int:
    check_overrides(args.parser, args.overrides)
    from tierlab.policies import sweep_points

    name, points = sweep_points(args.scenario, args.overrides)
    if points and name == "tiering":
        from tierlab.tiering import run_tiering_cli

        return run_tiering_cli(args)
    if points:
        return run_sweep_cli(args)
    err = Console(stderr=True)
    show_progress = not args.no_progress and sys.stderr.isatty()
    with progress_bar(err) if show_progress else nullcontext() as bar:
        result = run_native(args.scenario, args.overrides, args.seed, bar)
    written = write_all(result, args.out) if args.out is not None else []
    if args.json:
        sys.stdout.write(stats_json(result))
        sys.stdout.flush()
    else:
        out = stdout_console()
        SummaryReporter().render(result, out)
        if written:
            out.print(f"wrote {len(written)} files to {args.out}")
    if result.interrupted:
        err.print(f"tierlab: {interrupted_message(result)}; kept what was done", highlight=False)
        return EXIT_INTERRUPTED
    return EXIT_OK


def run_sweep_cli(args: argparse.Namespace) -> int:
    """A scenario with sweep points: run every point (or those of ``--points``), one record
    each; print them as a table or, with ``--json``, as a JSON list."""
    import json

    from rich.table import Table

    from tierlab.policies import run_sweep, write_sweep

    err = Console(stderr=True)
    show = not args.no_progress and sys.stderr.isatty()

    def done(k: int, total: int, label: str, wall: float) -> None:
        if show:
            err.print(f"[{k}/{total}] {label} ({wall:.1f} s)", highlight=False)

    sweep = run_sweep(
        args.scenario,
        seed=args.seed,
        set=args.overrides,
        only=args.points,
        jobs=max(1, args.jobs),
        on_done=done,
    )
    if args.points and not sweep.records and not sweep.interrupted:
        args.parser.error(f"--points {args.points!r} matches no sweep point")
    if sweep.sweep_name == "placement":
        from tierlab.placement_sim import placement_records

        sweep.records = placement_records(sweep.records)
    written = write_sweep(sweep, args.out) if args.out is not None else []
    if args.out is not None and sweep.sweep_name == "placement":
        from tierlab.placement_sim import write_placement

        written += write_placement(sweep.records, args.out)
    if args.json:
        sys.stdout.write(json.dumps(sweep.records, indent=2, default=str) + "\n")
        sys.stdout.flush()
    else:
        out = stdout_console()
        table = Table(
            title=f"{args.scenario}: {len(sweep.records)} points", title_justify="left", box=None
        )
        cols = [
            c
            for c in (
                "label",
                "kernel",
                "nodes",
                "policy",
                "page_tables",
                "page_size",
                "fast_memory_fraction",
                "page_faults",
                "remote_tlb_invalidations",
                "dtlb_misses",
                "run_time_s",
                "relative_performance",
                "savings_pct",
                "overhead_pct",
            )
            if any(c in r for r in sweep.records)
        ]
        for c in cols:
            table.add_column(
                c,
                justify="left"
                if c in ("label", "kernel", "policy", "page_tables", "page_size")
                else "right",
            )
        for r in sweep.records:
            table.add_row(*(_fmt(r.get(c)) for c in cols))
        out.print(table)
        if written:
            out.print(f"wrote {len(written)} files to {args.out}")
    if sweep.interrupted:
        err.print("tierlab: interrupted; kept the points done", highlight=False)
        return EXIT_INTERRUPTED
    return EXIT_OK


def _fmt(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-2):
            return f"{v:.3g}"
        return f"{v:.3f}".rstrip("0").rstrip(".") if v != int(v) else f"{v:.0f}"
    return str(v)
