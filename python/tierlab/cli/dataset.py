"""``tierlab dataset SCENARIO -o DIR``: per-page, per-window rows for learned tiering policies.

Features a policy could observe, labels only ground truth knows (docs/formats.md "Dataset").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tierlab.cli.common import EXIT_OK, EXIT_USAGE, add_scenario_args, check_overrides


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dataset",
        help="write a learning dataset (per-page, per-window features and future labels)",
        description="Run a scenario (any: built-in, TOML, masim:PATH, replays) and write one "
        "row per 4 KiB page per window into DIR/rows.parquet: features any policy could "
        "observe (samples and region estimates of one telemetry technique, Accessed-bit "
        "history, node and tier, age, last migration) and labels only ground truth knows "
        "(accesses in the window and in the next 1, 10 and 100 windows, whether the page is "
        "in the per-window optimum's fast set in the next window). Written in bounded memory. "
        "Schema: docs/formats.md (Dataset).",
    )
    p.add_argument("scenario", help="scenario file, built-in name, or masim:PATH")
    add_scenario_args(p)
    p.add_argument("-o", "--out", type=Path, required=True, metavar="DIR", help="output directory")
    p.add_argument(
        "--point",
        metavar="LABEL",
        help="the sweep point to run (a scenario with sweep points needs one)",
    )
    p.add_argument(
        "--telemetry",
        metavar="LABEL",
        help="the technique whose samples and regions are features (default: the tiering "
        "policy's, else the scenario's first)",
    )
    p.add_argument(
        "--history",
        type=int,
        default=8,
        metavar="N",
        help="windows of Accessed-bit history, 1-64 (a page has rows while it was accessed "
        "in one of its last N windows; default 8)",
    )
    p.set_defaults(func=main, parser=p)


def main(args: argparse.Namespace) -> int:
    check_overrides(args.parser, args.overrides)
    from tierlab import _native
    from tierlab.progress import progress_bar

    if not 1 <= args.history <= 64:
        args.parser.error(f"--history {args.history}: must be 1 to 64")
    spec = str(args.scenario)
    overrides = list(args.overrides)
    _, points = _native.sweep_points(spec, overrides)
    labels = [label for label, _ in points]
    if points and args.point is None:
        print(
            f"tierlab dataset: {spec} has sweep points; pick one with --point "
            f"({', '.join(labels)})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.point is not None:
        if args.point not in labels:
            have = ", ".join(labels) if labels else "none"
            print(
                f"tierlab dataset: --point {args.point}: no such sweep point "
                f"(the scenario has: {have})",
                file=sys.stderr,
            )
            return EXIT_USAGE
        overrides = [*dict(points)[args.point], *overrides]
    if args.out.exists() and not args.out.is_dir():
        print(f"tierlab dataset: {args.out}: not a directory", file=sys.stderr)
        return EXIT_USAGE
    print(f"tierlab dataset: starting {spec}", file=sys.stderr, flush=True)
    with progress_bar(label="dataset") as update:
        _native.dataset(
            spec,
            str(args.out),
            overrides,
            args.seed,
            args.telemetry,
            args.history,
            progress=update,
        )
    meta = json.loads((args.out / "dataset.json").read_text())
    if args.point is not None:
        meta["point"] = args.point
        (args.out / "dataset.json").write_text(json.dumps(meta, indent=2) + "\n")
    follow = meta.get("followed_technique") or "none"
    print(
        f"{meta['rows']:,} rows over {meta['windows']:,} windows (features from technique: "
        f"{follow}) -> {args.out / 'rows.parquet'}"
    )
    return EXIT_OK
