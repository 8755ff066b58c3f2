"""``tierlab telemetry SCENARIO``: compare telemetry techniques against ground truth."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tierlab.cli.common import OUT_OPTIONAL, add_scenario_args, check_overrides
from tierlab.cli.sweeps import add_sweep_args, apply_quick, dry_run, run_sweep_command, start_line


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
        "-o",
        "--out",
        type=Path,
        metavar="DIR",
        help="write tables and plots into DIR; for sample-based techniques (PEBS) also their "
        "samples as recordings (samples-NAME/, for tierlab view) and their views (view-NAME/); "
        + OUT_OPTIONAL,
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


def technique_list(args: argparse.Namespace) -> list[str] | None:
    """``--techniques A,B``: the names, ``None`` when not given; an empty list or an empty
    name in it is an argument error (it would silently run nothing, or everything)."""
    if args.techniques is None:
        return None
    names = [t.strip() for t in args.techniques.split(",")]
    if not any(names):
        args.parser.error(
            f"--techniques {args.techniques!r}: no technique named; give a comma-separated "
            "list of names (or leave the option out for every technique)"
        )
    if not all(names):
        args.parser.error(f"--techniques {args.techniques!r}: an empty name in the list")
    return names


def main(args: argparse.Namespace) -> int:
    check_overrides(args.parser, args.overrides)
    techniques = technique_list(args)
    if args.scenario == "pebs-scale":
        if args.quick:
            print("tierlab telemetry: --quick: no shorter form: run as it is", file=sys.stderr)
        if args.dry_run:
            print(
                "pebs-scale: the application profiles' engine runs and the BSP model; no "
                "measured cost (tierlab bench costs measures the built-in scenarios)"
            )
            return 0
        return pebs_scale(args, techniques)
    from tierlab import outdir
    from tierlab.telemetry import TelemetryKind

    if args.out is not None:
        # Only this command's earlier output (resumed from its points/) or an empty or new
        # directory: the samples of PEBS-like techniques are written into it as they come.
        outdir.check_replaceable(args.out, ("telemetry", "points"), outdir.OutputError)
    kind = TelemetryKind(
        techniques,
        baseline=not args.no_baseline,
        keep_samples=args.out is not None,
        # Local workers write the samples into --out themselves (this process never holds
        # them); Ray tasks may run on other machines, so theirs come back here to be written.
        samples_dir=args.out if getattr(args, "executor", "local") != "ray" else None,
    )
    apply_quick(args, "telemetry")
    if args.dry_run:
        return dry_run(args, kind)
    start_line(args, kind, "telemetry")
    return run_sweep_command(args, kind)


def pebs_scale(args: argparse.Namespace, techniques: list[str] | None) -> int:
    import json

    from tierlab import pebs_scale as ps

    apps = ps.APPS
    if techniques is not None:
        want = set(techniques)
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
        from tierlab import outdir

        outdir.check_replaceable(args.out, ("pebs-scale",), outdir.OutputError)
        files = ps.write(res, args.out)
        print(f"wrote {len(files)} files to {args.out}")
    return 0
