"""``tierlab export SCENARIO``: print the scenario fully expanded, every default written."""

from __future__ import annotations

import argparse
import sys

from tierlab import _native
from tierlab.cli.common import add_scenario_args, check_overrides


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="print a scenario fully expanded as TOML",
        description="Print a scenario with every default written out; the output runs to the "
        "same numbers as the original.",
    )
    p.add_argument("scenario", help="scenario file, built-in name, or masim:PATH")
    add_scenario_args(p)
    p.set_defaults(func=main, parser=p)


def main(args: argparse.Namespace) -> int:
    check_overrides(args.parser, args.overrides)
    text = _native.export(args.scenario, args.overrides, args.seed)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()
    return 0
