"""``tierlab coremap SCENARIO``: the distribution of pages by the number of cores mapping
them (the CMCP paper's Figure 6), from the per-core page tables of the hierarchical mode."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tierlab.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    OUT_OPTIONAL,
    add_scenario_args,
    check_overrides,
    stdout_console,
)
from tierlab.cli.sweeps import add_cost_args, apply_quick, print_estimate


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "coremap",
        help="pages by number of mapping cores",
        description="Run a scenario in the hierarchical memory mode and show how many pages "
        "were mapped by 1, 2, 3, ... cores over the run (every core that ever installed a "
        "PTE for the page counts). With --points, run those sweep points instead of the base "
        "scenario (e.g. tierlab coremap cmcp-table1 --points '*/56/fifo').",
    )
    p.add_argument("scenario", help="scenario file or built-in name")
    add_scenario_args(p)
    p.add_argument("--points", metavar="GLOB", help="run the sweep points whose label matches")
    p.add_argument("--json", action="store_true", help="print {run: {cores: pages}} as JSON")
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        metavar="DIR",
        help="write coremap.json/.csv/.png/.svg into DIR (a new or empty directory, or an "
        "earlier coremap --out, which is replaced); " + OUT_OPTIONAL,
    )
    add_cost_args(p)
    p.set_defaults(func=main, parser=p)


def main(args: argparse.Namespace) -> int:
    check_overrides(args.parser, args.overrides)
    apply_quick(args, "run", "coremap")
    if args.dry_run:
        from tierlab.sweep.point import Point as P
        from tierlab.sweep.point import scenario_points as sp

        if args.points:
            _, pts = sp(args.scenario, list(args.overrides), args.points)
            plan = [P(label, args.scenario, (*ov, *args.overrides), args.seed) for label, ov in pts]
        else:
            plan = [P("", args.scenario, tuple(args.overrides), args.seed)]
        return print_estimate(plan, 1)
    from tierlab import outdir
    from tierlab.policies import coremap, record
    from tierlab.sweep.engine import execute
    from tierlab.sweep.point import Point, scenario_points

    if args.out is not None:
        # Checked before simulating; checked again when the output is put in place.
        outdir.check_replaceable(args.out, ("coremap",), outdir.OutputError)
    user = tuple(args.overrides)
    points = [Point("", args.scenario, user, args.seed)]
    if args.points:
        _name, pts = scenario_points(args.scenario, user, args.points)
        if not pts:
            args.parser.error(f"--points {args.points!r} matches no sweep point")
        points = [
            Point(lb, args.scenario, (*ov, *user), args.seed, sweep_label=lb) for lb, ov in pts
        ]
    run = execute(points)
    if run.failures:
        raise run.failures[0]
    err = Console(stderr=True)
    dists: dict[str, dict[int, int]] = {}
    for point, result in run.finished():
        d = coremap(result.stats_flat)
        if not d:
            print(
                "tierlab: error: the core map is known in the hierarchical memory mode only: "
                "the scenario needs [machine.hmem] and a [[policies]] entry",
                file=sys.stderr,
            )
            return EXIT_USAGE
        rec = record(point.label, result.stats_flat, result.scenario)
        cores = getattr(rec, "cores", "?")
        name = point.label or f"{rec.workload}, {cores} cores"
        dists[name] = d
        if not args.json and sys.stderr.isatty():
            err.print(f"{name}: {sum(d.values())} pages", highlight=False)
    if run.interrupted:
        raise KeyboardInterrupt
    if args.out is not None:
        # An absent or empty directory, or an earlier `coremap --out` (replaced as a whole,
        # atomically); anything else is refused.
        with outdir.replacing(args.out, ("coremap",), outdir.OutputError) as staged:
            write(dists, staged)
    if args.json:
        sys.stdout.write(
            json.dumps({k: {str(c): n for c, n in d.items()} for k, d in dists.items()}, indent=2)
            + "\n"
        )
        return EXIT_OK
    out = stdout_console()
    for name, d in dists.items():
        total = sum(d.values()) or 1
        table = Table(title=name, title_justify="left", box=None)
        for column in ("cores mapping", "pages", "% of pages", "cumulative %"):
            table.add_column(column, justify="right")
        cum = 0
        for c, n in d.items():
            cum += n
            table.add_row(str(c), f"{n:,}", f"{100 * n / total:.1f}", f"{100 * cum / total:.1f}")
        out.print(table)
    if args.out is not None:
        out.print(f"wrote coremap.json, coremap.csv, coremap.png, coremap.svg to {args.out}")
    return EXIT_OK


def write(dists: dict[str, dict[int, int]], out_dir: Path) -> None:
    """The distributions as JSON, CSV (run, cores, pages, share) and a grouped bar plot."""
    from tierlab.plots import pyplot

    plt = pyplot()
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "coremap.json").write_text(
        json.dumps({k: {str(c): n for c, n in d.items()} for k, d in dists.items()}, indent=2)
        + "\n"
    )
    rows: list[dict[str, Any]] = []
    for k, d in dists.items():
        total = sum(d.values()) or 1
        rows.extend({"run": k, "cores": c, "pages": n, "share": n / total} for c, n in d.items())
    pd.DataFrame(rows).to_csv(out_dir / "coremap.csv", index=False)
    # One slot per core count that occurs (1, 2, ..., 7, 56 rather than an axis up to 56).
    cats = sorted({c for d in dists.values() for c, n in d.items() if n}) or [1]
    slot = {c: i for i, c in enumerate(cats)}
    fig, ax = plt.subplots(figsize=(max(5.0, 0.45 * len(cats) + 3), 3.4))
    width = 0.8 / max(1, len(dists))
    for i, (k, d) in enumerate(dists.items()):
        total = sum(d.values()) or 1
        cs = [c for c in d if c in slot]
        xs = [slot[c] + (i - (len(dists) - 1) / 2) * width for c in cs]
        ax.bar(xs, [100 * d[c] / total for c in cs], width=width, label=k)
    ax.set_xticks(range(len(cats)), [str(c) for c in cats])
    ax.set_xlabel("number of cores mapping the page")
    ax.set_ylabel("% of pages")
    ax.set_title("pages by number of mapping cores")
    ax.legend(fontsize=8)
    fig.tight_layout()
    from tierlab.plots import finish

    finish(fig)
    for ext in ("png", "svg"):
        fig.savefig(out_dir / f"coremap.{ext}", dpi=110)
    plt.close(fig)
