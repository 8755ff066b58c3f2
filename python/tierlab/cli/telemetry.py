"""``tierlab telemetry SCENARIO``: compare telemetry techniques against ground truth."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tierlab.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    add_scenario_args,
    check_overrides,
    stdout_console,
)
from tierlab.telemetry import compare, plot, write_sample_recordings


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "telemetry",
        help="compare telemetry techniques on a scenario",
        description="Run each [[telemetry]] technique of a scenario on a machine of its own "
        "(plus a baseline without telemetry), score them against exact ground truth per "
        "window, and report precision/recall over time, time to reach 0.9, observer CPU and "
        "application slowdown.",
    )
    p.add_argument("scenario", help="scenario file or built-in name (e.g. telescope-5tb)")
    p.add_argument(
        "--techniques",
        metavar="A,B,...",
        help="only these techniques (names as in the scenario), comma-separated",
    )
    add_scenario_args(p)
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write tables and plots into DIR; for sample-based techniques (PEBS) also their "
        "samples as recordings (samples-NAME/, for tierlab view) and their views (view-NAME/)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON on stdout")
    p.add_argument(
        "--jobs", type=int, default=2, help="runs in parallel (default 2: one per core here)"
    )
    p.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the run without telemetry; slowdown then counts only the time charged to "
        "the application's cores",
    )
    p.set_defaults(func=main, parser=p)


def _fmt(x: object, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if x != x:  # NaN
            return "-"
        if x.is_integer() and abs(x) >= 1000:
            return f"{int(x):,}"  # counts (samples, interrupts, pages seen)
        if x != 0 and abs(x) < 0.1:
            return f"{x:.{digits}g}"  # small figures (CPU seconds, slowdowns): significant digits
        return f"{x:.{digits}f}"
    return str(x)


def main(args: argparse.Namespace) -> int:
    check_overrides(args.parser, args.overrides)
    err = Console(stderr=True)
    techniques = args.techniques.split(",") if args.techniques else None

    def done(point: str, tech: str, wall: float) -> None:
        where = f" [{point}]" if point else ""
        err.print(f"  finished {tech}{where} in {wall:.1f} s wall", highlight=False)

    cmp = compare(
        args.scenario,
        techniques,
        seed=args.seed,
        set=args.overrides,
        jobs=args.jobs,
        baseline=not args.no_baseline,
        keep_samples=args.out is not None,
        on_done=None if args.json else done,
    )
    table = cmp.table()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out / "telemetry.csv", index=False)
        table.to_parquet(args.out / "telemetry.parquet", index=False)
        cmp.timeseries.to_csv(args.out / "telemetry_timeseries.csv", index=False)
        cmp.timeseries.to_parquet(args.out / "telemetry_timeseries.parquet", index=False)
        (args.out / "telemetry.json").write_text(json.dumps(cmp.as_json(), indent=2) + "\n")
        plot(cmp, str(args.out / "precision_recall"))
        # Sample-based techniques: their samples as recordings, and views of them.
        write_sample_recordings(cmp, args.out)
    if args.json:
        sys.stdout.write(json.dumps(cmp.as_json(), indent=2) + "\n")
    else:
        out = stdout_console()
        t = Table(title=f"telemetry on {args.scenario}")
        cols = list(table.columns)
        for c in cols:
            left = c in ("technique", "kind", cmp.sweep_name)
            t.add_column(c, justify="left" if left else "right")
        for _, row in table.iterrows():
            t.add_row(*[_fmt(row[c]) for c in cols])
        out.print(t)
        if args.out is not None:
            out.print(f"wrote tables and precision/recall plots to {args.out}")
    if cmp.interrupted:
        err.print("tierlab: interrupted; the table holds the runs that finished")
        return EXIT_INTERRUPTED
    return EXIT_OK
