"""``tierlab run SCENARIO``: simulate, print the summary, optionally write every output."""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from tierlab.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SIMULATION,
    OUT_OPTIONAL,
    add_scenario_args,
    check_overrides,
    stdout_console,
)
from tierlab.cli.sweeps import add_sweep_args, apply_quick, dry_run, run_sweep_command, start_line

if TYPE_CHECKING:
    from tierlab.api import Result


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
        "-o",
        "--out",
        type=Path,
        metavar="DIR",
        help="write timeseries.parquet/.csv, stats.json, run.json, scenario.toml, summary.csv, "
        "heatmap.parquet/.png/.svg into DIR; with sweep points, the sweep's records, tables "
        "and plots, and every point's result in DIR/points/ (reused by later runs); "
        + OUT_OPTIONAL,
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the nested stats as JSON on stdout (only); for a scenario with sweep "
        "points, the list of records (one per point)",
    )
    add_sweep_args(p)
    p.set_defaults(func=main, parser=p)


def interrupted_message(result: Result) -> str:
    done = f"{(result.sim_ns_done or 0) / 1e9:.3f} s"
    if result.sim_ns_total:
        return f"interrupted at {done} of {result.sim_ns_total / 1e9:g} s (simulated time)"
    return f"interrupted at {done} (simulated time)"


def main(args: argparse.Namespace) -> int:
    check_overrides(args.parser, args.overrides)
    from tierlab.sweep import kinds
    from tierlab.sweep.point import scenario_points

    apply_quick(args, "run")
    name, points = scenario_points(args.scenario, args.overrides)
    kind = kinds.for_sweep(name) if points else None
    if args.dry_run:
        return dry_run(args, kind)
    start_line(args, kind, "run")
    if points:
        if args.out is not None:
            from tierlab import outdir

            # A sweep's own earlier output (its stored points are reused), an empty or a new
            # directory: anything else is refused before a point runs.
            outdir.check_replaceable(args.out, ("points",), outdir.OutputError)
        assert kind is not None
        return run_sweep_command(args, kind)
    if args.points is not None:
        args.parser.error(
            f"--points {args.points!r}: scenario {args.scenario!r} has no sweep points"
        )
    from rich.console import Console

    from tierlab.api import run_native
    from tierlab.progress import progress_bar
    from tierlab.reporters import write_all
    from tierlab.reporters.stats_json import stats_json
    from tierlab.reporters.summary import SummaryReporter

    err = Console(stderr=True)
    show_progress = not args.no_progress
    with progress_bar(err) if show_progress else nullcontext() as bar:
        result = run_native(args.scenario, args.overrides, args.seed, bar)
    written = []
    if args.out is not None:
        from tierlab import provenance
        from tierlab.progress import phase

        result.provenance = provenance.collect(
            args.scenario, result.scenario, "local", list(args.overrides)
        )
        with phase(f"writing tables and plots to {args.out}", "run", err):
            written = write_all(result, args.out)
    if args.json:
        sys.stdout.write(stats_json(result))
        sys.stdout.flush()
    elif args.raw:
        # For scripts: every statistic, tab-separated (--json gives them nested).
        sys.stdout.write("stat\tvalue\n")
        sys.stdout.writelines(f"{k}\t{v}\n" for k, v in result.stats_flat.items())
        sys.stdout.flush()
    else:
        out = stdout_console()
        SummaryReporter().render(result, out)
        if written:
            out.print(f"wrote {len(written)} files to {args.out}")
    if result.interrupted:
        err.print(f"tierlab: {interrupted_message(result)}; kept what was done", highlight=False)
        return EXIT_INTERRUPTED
    if result.error is not None:
        done = ""
        if result.sim_ns_done is not None:
            done = f" at {result.sim_ns_done / 1e9:g} s (simulated time)"
        kept = f"; kept what was simulated in {args.out}" if written else ""
        message = f"tierlab: simulation error{done}: {result.error}{kept}"
        err.print(message, highlight=False, soft_wrap=True)
        return EXIT_SIMULATION
    return EXIT_OK
