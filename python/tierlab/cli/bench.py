"""``tierlab bench engine``: measure the engine's throughput (accesses per second)."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from tierlab.api import bench_engine


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks", description="Benchmarks of tierlab itself.")
    what = p.add_subparsers(dest="bench", metavar="BENCH", required=True)
    e = what.add_parser(
        "engine",
        help="engine throughput",
        description="Accesses per second of the workload generator alone (generate) and of "
        "the machine model with 1 and 16 cores.",
    )
    e.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    e.add_argument("--quick", action="store_true", help="shorter measurement (less precise)")
    e.set_defaults(func=engine)


def engine(args: argparse.Namespace) -> int:
    results = bench_engine(args.quick)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    table = Table(title="engine throughput", title_justify="left", box=None)
    table.add_column("benchmark", style="bold")
    table.add_column("accesses/s", justify="right")
    table.add_column("M accesses/s", justify="right")
    for name, rate in results.items():
        table.add_row(name, f"{rate:,.0f}", f"{rate / 1e6:.1f}")
    Console().print(table)
    return 0
