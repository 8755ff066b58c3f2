"""``tierlab tune SCENARIO --param NAME=RANGE ... --objective KEY``: grid or Bayesian search
over a scenario's parameters, every trial a point of the sweep engine."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlab.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    OUT_OPTIONAL,
    add_scenario_args,
    check_overrides,
    int_in,
    print_error,
    stdout_console,
)

if TYPE_CHECKING:
    from tierlab.costs import Estimate
from tierlab.cli.sweeps import (
    DEFAULT_JOBS,
    EXECUTORS,
    JOBS,
    add_cost_args,
    add_slurm_args,
    add_table_args,
    apply_quick,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune",
        help="search a scenario's parameters for the best value of a statistic",
        description="Grid or Bayesian (Optuna) search over scenario keys: every trial runs "
        "the scenario (one of its sweep points, chosen with --points) with the trial's "
        "values as overrides, through the sweep engine (--jobs, --executor ray; with --out "
        "every trial is stored in OUT/points/ and a rerun reuses it). Prints the trials best "
        "first; --out also writes tune.json, trials.csv and an interactive index.html.",
        epilog="Ranges: A:B:STEP (a grid of numbers), A:B (integers A..B, or a continuous "
        'range of floats), A:B:log (log scale), ["10ms", "50ms"] (choices, TOML values). '
        "Example: tierlab tune tiering-kv --points HeMem --param "
        'tiering.read_hot_threshold=2:8:2 --param \'tiering.interval=["10ms","50ms"]\' '
        "--objective workload.kv.throughput --set duration='\"3s\"' --out tune-hemem",
    )
    p.add_argument("scenario", help="scenario file or built-in name")
    p.add_argument(
        "--param",
        dest="params",
        action="append",
        default=[],
        metavar="NAME=RANGE",
        required=True,
        help="a scenario key and its range (repeatable)",
    )
    p.add_argument(
        "--objective",
        required=True,
        metavar="KEY",
        help="the statistic to optimize: a key of the run's flat stats (tierlab run --json "
        "shows them nested), e.g. workload.kv.throughput",
    )
    d = p.add_mutually_exclusive_group()
    d.add_argument(
        "--maximize",
        dest="direction",
        action="store_const",
        const="maximize",
        help="the best trial has the largest objective (the default)",
    )
    d.add_argument(
        "--minimize",
        dest="direction",
        action="store_const",
        const="minimize",
        help="the best trial has the smallest objective",
    )
    p.add_argument(
        "--method",
        choices=("grid", "bayes"),
        default="grid",
        help="grid: every combination (default); bayes: Optuna's TPE sampler, --trials trials",
    )
    p.add_argument(
        "--trials",
        type=int_in(1, 1_000_000, "a number of trials"),
        default=20,
        metavar="N",
        help="bayes: trials (20)",
    )
    p.add_argument(
        "--grid-points",
        type=int_in(1, 1_000_000, "a number of values"),
        default=5,
        metavar="K",
        help="grid: values of a continuous range without a step (5)",
    )
    p.add_argument(
        "--points",
        metavar="LABEL",
        help="the sweep point to tune, for a scenario with [[sweep]] points (a glob that "
        "matches one label)",
    )
    add_scenario_args(p)
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        metavar="DIR",
        help="write tune.json, trials.csv and index.html into DIR, and keep every trial in "
        "DIR/points/ (reused by later runs); " + OUT_OPTIONAL,
    )
    p.add_argument("--json", action="store_true", help="print the search as JSON")
    p.add_argument(
        "--jobs",
        type=JOBS,
        default=None,
        metavar="N",
        help=f"trials at a time ({DEFAULT_JOBS})",
    )
    p.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="where trials run: local worker processes (default) or a Ray cluster",
    )
    p.add_argument("--address", metavar="HOST:PORT", help="with --executor ray: the cluster")
    add_slurm_args(p)
    p.add_argument("--fresh", action="store_true", help="recompute trials stored in OUT/points/")
    p.add_argument("--no-progress", action="store_true", help="never show progress")
    add_cost_args(p)
    add_table_args(p)
    p.set_defaults(func=main, parser=p, default_jobs=DEFAULT_JOBS, direction="maximize")


def trial_estimate(args: argparse.Namespace, params: list[Any]) -> tuple[int, Estimate]:
    """How many trials the search runs, and their estimated cost."""
    from tierlab import costs, tune
    from tierlab.sweep.point import Point

    label, own, user = tune.base_point(args.scenario, args.points, args.overrides, args.seed)
    n = args.trials
    if args.method == "grid":
        n = 1
        for prm in params:
            n *= prm.grid_size(args.grid_points)
    one = costs.estimate([Point(label, str(args.scenario), (*own, *user), args.seed)])
    total = costs.Estimate(
        cpu_seconds=one.cpu_seconds * n,
        peak_rss_bytes=one.peak_rss_bytes,
        points=n,
        unpriced=one.unpriced,
    )
    return n, total


def main(args: argparse.Namespace) -> int:
    check_overrides(args.parser, args.overrides)

    from tierlab import tune
    from tierlab.cli.sweeps import make_executor
    from tierlab.sweep.cache import ResultCache
    from tierlab.sweep.progress import sweep_progress

    try:
        params = [tune.Param.parse(x) for x in args.params]
    except tune.TuneError as e:
        args.parser.error(str(e))
    apply_quick(args, "run", "tune")
    try:
        n, est = trial_estimate(args, params)
    except tune.TuneError as e:
        print_error(str(e))
        return EXIT_USAGE
    jobs = args.jobs or args.default_jobs
    if args.dry_run:
        stdout_console().print(
            f"{n} trial{'s' if n != 1 else ''} of {args.scenario}: {est.text(jobs)}",
            highlight=False,
        )
        return EXIT_OK
    from tierlab.progress import start

    start("tune", f"{args.scenario}: {n} trials, {est.text(jobs)}")
    if args.out is not None:
        from tierlab import outdir

        # Only this command's earlier output (its trials are reused from points/), or an
        # empty or new directory: never a recording or a directory of the user's.
        outdir.check_replaceable(args.out, ("tune", "points"), outdir.OutputError)
    store = ResultCache(args.out / "points", reuse=not args.fresh) if args.out else None
    show = not args.no_progress
    try:
        with make_executor(args) as executor:
            search = tune.run_search(
                args.scenario,
                params,
                args.objective,
                direction=args.direction,
                method=args.method,
                trials=args.trials,
                grid_points=args.grid_points,
                point=args.points,
                user_set=args.overrides,
                seed=args.seed,
                executor=executor,
                store=store,
                progress=sweep_progress("tune") if show else None,
            )
    except tune.TuneError as e:
        print_error(str(e))
        return EXIT_USAGE
    if search.stored:
        print(
            f"tierlab: reused {search.stored} trials stored in {args.out / 'points'} "
            "(--fresh recomputes them)",
            file=sys.stderr,
        )
    written = []
    if args.out is not None:
        import pandas as pd

        args.out.mkdir(parents=True, exist_ok=True)
        doc = tune.to_json(search)
        (args.out / "tune.json").write_text(json.dumps(doc, indent=2) + "\n")
        rows = [
            {"trial": t["trial"], **t["params"], args.objective: t["value"], "error": t["error"]}
            for t in doc["trials"]
        ]
        pd.DataFrame(rows).to_csv(args.out / "trials.csv", index=False)
        from tierlab.progress import phase

        with phase(f"writing the page to {args.out}", "tune"):
            tune.page(search).write(args.out / "index.html")
        written = ["tune.json", "trials.csv", "index.html"]
    if args.json:
        sys.stdout.write(json.dumps(tune.to_json(search), indent=2) + "\n")
    else:
        from tierlab import tables

        out = stdout_console()
        title = (
            f"tune {args.scenario}{' ' + search.point if search.point else ''}: "
            f"{search.direction} {search.objective} ({search.method}, {len(search.trials)} trials)"
        )
        rows = []
        for i, tr in enumerate(search.ranked()[:15], start=1):
            row: dict[str, Any] = {
                "rank": i if tr.value is not None else None,
                "trial": tr.number,
                **{prm.name: tune.toml_value(tr.params[prm.name]) for prm in params},
                search.objective: tr.value,
                "_note": tr.error or "not run",
            }
            rows.append(row)
        cols = [
            tables.Col("rank", "rank", kind="count", key_column=True),
            tables.Col("trial", "trial", kind="count", key_column=True),
            *(
                tables.Col(prm.name, prm.name.rsplit(".", 1)[-1], prm.name, "text")
                for prm in params
            ),
            tables.Col(search.objective, "objective", search.objective, "number"),
        ]
        try:
            with tables.options(args.columns, args.raw):
                tables.render(
                    rows,
                    cols,
                    out,
                    title,
                    cells={
                        search.objective: lambda r: (
                            tables.number(r[search.objective])
                            if r[search.objective] is not None
                            else r["_note"]
                        )
                    },
                )
        except tables.TableError as e:
            args.parser.error(str(e))
        best = search.best()
        if best is not None:
            out.print(f"best: {search.command(best)}", highlight=False, soft_wrap=True)
        if written:
            out.print(f"wrote {len(written)} files to {args.out} (open {args.out / 'index.html'})")
    for tr in search.trials:
        if tr.error and not tr.reused:
            print(f"tierlab: trial {tr.number}: {tr.error}", file=sys.stderr)
    if search.interrupted:
        print("tierlab: interrupted; kept the trials done", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK if search.best() is not None else 1
