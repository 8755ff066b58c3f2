"""``tierlab params``: every parameter a scenario may set, from the declarations in the code
(type, default, unit, range, provenance, description)."""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from typing import Any

from rich.table import Table

from tierlab.api import native
from tierlab.cli.common import stdout_console


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "params",
        help="list the parameters a scenario may set (defaults, ranges, sources)",
        description="List the parameters a scenario may set, table by table, with their type, "
        "default, unit, range and provenance (sourced, calibrated, assumed or a setting), as "
        "declared in the code. SECTION picks tables by path and kind: `telemetry`, "
        "`telemetry:damon`, `machine.tlb`, `tiering:hemem`, `workload:*` (shell-style "
        "patterns).",
    )
    p.add_argument(
        "section",
        nargs="*",
        metavar="SECTION",
        help="tables to show: PATH or PATH:KIND, patterns allowed (default: all)",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the tables as JSON")
    out.add_argument(
        "--markdown",
        action="store_true",
        help="print the whole page docs/parameters.md is (ignores SECTION)",
    )
    p.set_defaults(func=main, parser=p)


def _name(path: str, kind: str) -> str:
    base = path.replace("[]", "") or "(top level)"
    return f"{base}:{kind}" if kind else base


def _matches(path: str, kind: str, patterns: list[str]) -> bool:
    if not patterns:
        return True
    name = _name(path, kind)
    base = path.replace("[]", "")
    return any(
        fnmatch.fnmatchcase(name, pat) or (":" not in pat and fnmatch.fnmatchcase(base, pat))
        for pat in patterns
    )


def main(args: argparse.Namespace) -> int:
    n = native()
    if args.markdown:
        sys.stdout.write(n.parameters_page())
        return 0
    sections: list[tuple[str, str, list[dict[str, Any]]]] = [
        s for s in n.param_sections() if s[2] and _matches(s[0], s[1], args.section)
    ]
    if not sections:
        names = sorted({_name(p, k) for p, k, f in n.param_sections() if f})
        print(
            f"tierlab params: no table matches {' '.join(args.section)!r}; tables: "
            + ", ".join(names),
            file=sys.stderr,
        )
        return 2
    if args.json:
        print(
            json.dumps(
                [{"path": p, "kind": k, "fields": fields} for p, k, fields in sections], indent=2
            )
        )
        return 0
    console = stdout_console()
    for path, kind, fields in sections:
        table = Table(title=_name(path, kind), title_justify="left", show_header=True, box=None)
        for col in ("key", "default", "unit", "range", "provenance", "description"):
            table.add_column(col, overflow="fold")
        for f in fields:
            default = "required" if f["required"] else (f["default"] or "none")
            prov = f["status"] + (f": {f['source']}" if f["source"] else "")
            table.add_row(f["key"], default, f["unit"], f["range"] or "", prov, f["summary"])
        console.print(table)
        console.print()
    return 0
