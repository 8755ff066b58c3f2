"""``tierlab scenarios``: list the built-in scenarios."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from tierlab.api import scenarios
from tierlab.cli.common import stdout_console


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "scenarios",
        help="list the built-in scenarios",
        description="List the built-in scenarios (run one with `tierlab run NAME`, see its "
        "full definition with `tierlab export NAME`).",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.add_argument(
        "--raw",
        action="store_true",
        help="tab-separated, one scenario a line: name, CPU seconds (of the form measured, "
        "--json says which), peak bytes, description",
    )
    p.set_defaults(func=main, parser=p)


def main(args: argparse.Namespace) -> int:
    from tierlab import costs as c

    rows = scenarios()
    table_of_costs = c.load()
    if args.json:
        doc = []
        for n, d in rows:
            cost = table_of_costs.get(n)
            doc.append(
                {
                    "name": n,
                    "description": d,
                    "command": cost.command if cost else None,
                    "measured_as": cost.measured_as if cost else None,
                    "cpu_seconds": cost.cpu_seconds if cost else None,
                    "full_cpu_seconds_at_most": cost.full_cpu_seconds if cost else None,
                    "peak_rss_bytes": cost.peak_rss_bytes if cost else None,
                    "long": cost.long if cost else None,
                }
            )
        print(json.dumps(doc, indent=2))
        return 0
    if args.raw:
        for n, d in rows:
            cost = table_of_costs.get(n)
            cpu = f"{cost.cpu_seconds:g}" if cost else ""
            rss = str(cost.peak_rss_bytes) if cost else ""
            print(f"{n}\t{cpu}\t{rss}\t{d}")
        return 0
    table = Table(show_header=True, box=None)
    table.add_column("scenario", style="bold", no_wrap=True)
    table.add_column("CPU", justify="right", no_wrap=True)
    table.add_column("memory", justify="right", no_wrap=True)
    table.add_column("description", ratio=1)
    extrapolated = False
    from_docs = False
    for name, description in rows:
        cost = table_of_costs.get(name)
        if cost is None:
            table.add_row(name, "?", "?", description)
            continue
        extrapolated |= cost.measured_as != "full"
        cpu = c.cost_text(cost)
        if cost.long:
            name_cell = f"{name} [bold red]*[/]"
            cpu = f"[red]{cpu}[/]"
        else:
            name_cell = name
        from_docs |= cost.measured_as == "docs"
        rss = c.human_bytes(cost.peak_rss_bytes) if cost.peak_rss_bytes else "?"
        table.add_row(name_cell, cpu, rss, description)
    out = stdout_console()
    out.print(table)
    out.print(
        "CPU: CPU time of `tierlab run NAME` (or `tierlab telemetry NAME`) with --out on the "
        "reference 2-core machine (about half of it in wall time with two free cores); "
        "memory: its largest process's peak RSS"
        + (
            "; A .. B: A measured for --quick, the full run at most B (scaled by simulated time "
            "or iterations)"
            if extrapolated
            else ""
        )
        + (
            "; (b): as docs/benchmarks.md records it (an earlier commit, maybe an earlier "
            "machine; not measured by tierlab bench costs yet)"
            if from_docs
            else ""
        )
        + f"; *: long, more than {c.human_seconds(c.LONG_CPU_SECONDS)} of CPU (--quick runs a "
        "scaled-down form). --dry-run of any command estimates its cost.",
        highlight=False,
    )
    return 0
