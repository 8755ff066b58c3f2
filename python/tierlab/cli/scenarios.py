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
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    rows = scenarios()
    if args.json:
        print(json.dumps([{"name": n, "description": d} for n, d in rows], indent=2))
        return 0
    table = Table(show_header=True, box=None)
    table.add_column("scenario", style="bold")
    table.add_column("description")
    for name, description in rows:
        table.add_row(name, description)
    stdout_console().print(table)
    return 0
