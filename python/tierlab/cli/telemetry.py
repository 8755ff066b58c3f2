"""``tierlab telemetry SCENARIO``: compare telemetry techniques against ground truth."""

from __future__ import annotations

import argparse
from pathlib import Path

from tierlab.cli.common import add_scenario_args, check_overrides
from tierlab.cli.sweeps import add_sweep_args, run_sweep_command


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "telemetry",
        help="compare telemetry techniques on a scenario",
        description="Run each [[telemetry]] technique of a scenario on a machine of its own "
        "(plus a baseline without telemetry), score them against exact ground truth per "
        "window, and report precision/recall over time, time to reach 0.9, observer CPU and "
        "application slowdown.",
    )
    p.add_argument(
        "scenario",
        help="scenario file or built-in name (e.g. telescope-5tb); `pebs-scale`: the PEBS "
        "paper's Fig. 3 (six applications x R x B x 32..2,048 nodes: engine runs + BSP model)",
    )
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
        "--no-baseline",
        action="store_true",
        help="skip the run without telemetry; slowdown then counts only the time charged to "
        "the application's cores",
    )
    add_sweep_args(p)
    p.set_defaults(func=main, parser=p)


def main(args: argparse.Namespace) -> int:
    check_overrides(args.parser, args.overrides)
    if args.scenario == "pebs-scale":
        return pebs_scale(args)
    from tierlab.telemetry import TelemetryKind

    kind = TelemetryKind(
        args.techniques.split(",") if args.techniques else None,
        baseline=not args.no_baseline,
        keep_samples=args.out is not None,
        # Local workers write the samples into --out themselves (this process never holds
        # them); Ray tasks may run on other machines, so theirs come back here to be written.
        samples_dir=args.out if getattr(args, "executor", "local") != "ray" else None,
    )
    return run_sweep_command(args, kind)


def pebs_scale(args: argparse.Namespace) -> int:
    import json

    from tierlab import pebs_scale as ps

    apps = ps.APPS
    if args.techniques:
        want = set(args.techniques.split(","))
        unknown = want - {a.name for a in ps.APPS}
        if unknown:
            args.parser.error(
                f"pebs-scale: unknown application(s) {sorted(unknown)}; "
                f"known: {', '.join(a.name for a in ps.APPS)}"
            )
        apps = tuple(a for a in ps.APPS if a.name in want)
    res = ps.run_grid(apps, extra=list(args.overrides or []), seed=args.seed)
    if args.json:
        print(json.dumps(res.to_json()))
    else:
        print(ps.table(res))
        print(f"engine runs + model: {res.wall_seconds:.1f} s")
    if args.out is not None:
        files = ps.write(res, args.out)
        print(f"wrote {len(files)} files to {args.out}")
    return 0
