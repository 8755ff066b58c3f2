"""``tierlab reproduce PAPER|all``: run every figure of a source paper that tierlab
reproduces, through the sweep engine, and write one interactive report."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from tierlab.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    check_overrides,
    out_default,
    seed_value,
)
from tierlab.cli.sweeps import DEFAULT_JOBS, EXECUTORS, JOBS, add_slurm_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    from tierlab.reproduce import names

    p = sub.add_parser(
        "reproduce",
        help="run a paper's figures and write a report beside the paper's values",
        description="Run every figure and table of a source paper that tierlab reproduces "
        "(through the sweep engine: --jobs, --executor ray, results kept in OUT/points/ and "
        "reused by the next run) and write OUT/index.html: tierlab's interactive plots next "
        "to the paper's values, the paper's claims with verdicts computed from the results, "
        "every parameter marked sourced, calibrated or assumed, and the command that reruns "
        "each point; plus report.json and a CSV per figure.",
    )
    p.add_argument("paper", choices=[*names(), "all"], help="the paper, or all of them")
    prof = p.add_mutually_exclusive_group()
    prof.add_argument(
        "--quick",
        action="store_const",
        const="quick",
        dest="profile",
        help="scaled-down runs (fewer points, shorter runs) that finish in minutes; the "
        "report says so on every page",
    )
    prof.add_argument(
        "--profile",
        choices=("full", "quick", "smoke"),
        default="full",
        help="full (default), quick (= --quick) or smoke (a tiny run that only checks the "
        "pipeline; its numbers mean nothing)",
    )
    p.add_argument(
        "--figures", metavar="GLOB", help="only the figures whose id matches (e.g. 'cmcp-p')"
    )
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        metavar="DIR",
        help=f"output directory ({out_default('PAPER', 'reproduce')}); points are stored in "
        "DIR/points/",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check every point's scenario and print what would run (and the commands), run "
        "nothing",
    )
    p.add_argument("--seed", type=seed_value, default=None, help="seed for every scenario")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key of every figure's scenario (after the profile's); repeatable",
    )
    p.add_argument(
        "--jobs",
        type=JOBS,
        default=None,
        metavar="N",
        help=f"points at a time (default {DEFAULT_JOBS} local worker processes; with "
        "--executor ray, at most N Ray tasks, default the cluster's CPUs)",
    )
    p.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="where points run: local processes (default) or a Ray cluster",
    )
    p.add_argument("--address", metavar="HOST:PORT", help="with --executor ray: the cluster")
    add_slurm_args(p)
    p.add_argument(
        "--fresh", action="store_true", help="recompute every point instead of reusing OUT/points/"
    )
    p.add_argument("--no-progress", action="store_true", help="never show progress bars")
    p.set_defaults(func=main, parser=p, default_jobs=DEFAULT_JOBS, profile="full")


def default_out(paper: str) -> Path:
    """``PAPER.reproduce``: the report's folder without ``--out`` (the one rule of
    :data:`tierlab.cli.common.OUT_OPTIONAL`'s comment)."""
    return Path(f"{paper}.reproduce")


def _papers(name: str) -> list[str]:
    from tierlab.reproduce import names

    return names() if name == "all" else [name]


def no_figure(args: argparse.Namespace, papers: list[Any]) -> NoReturn:
    """``--figures GLOB`` that matches nothing: a usage error naming the closest figures."""
    from tierlab.cli.suggest import did_you_mean

    ids = [f.id for paper in papers for f in paper.figures]
    parser: argparse.ArgumentParser = args.parser
    parser.error(
        f"--figures {args.figures!r} matches no figure{did_you_mean(args.figures or '', ids)}"
    )


def dry_run(args: argparse.Namespace) -> int:
    import fnmatch

    from tierlab.reproduce import load
    from tierlab.reproduce.runner import plan_figure

    papers = [load(name) for name in _papers(args.paper)]
    chosen = [
        (paper, [s for s in paper.figures if fnmatch.fnmatchcase(s.id, args.figures or "*")])
        for paper in papers
    ]
    if not any(specs for _, specs in chosen):
        # As the run itself refuses it.
        no_figure(args, papers)
    from tierlab import costs

    table = costs.load()
    cost = costs.Estimate()
    done: set[tuple[Any, ...]] = set()  # points priced: the same simulation again is reused
    total = 0
    bad = 0
    for paper, specs in chosen:
        for spec in specs:
            _, plan, _ = plan_figure(spec, args.profile, args.overrides, args.seed)
            note = spec.profile(args.profile).note
            est = costs.estimate(plan.points, table, done)
            cost.add(est)
            price = (
                "no measured cost"
                if est.unpriced
                else f"~{costs.human_seconds(est.cpu_seconds)} of CPU"
            )
            print(
                f"{paper.id}/{spec.id}: {len(plan.points)} points, {price}"
                + (f" ({note})" if note else "")
            )
            from tierlab.reproduce.runner import point_command

            for pt in plan.points:
                try:
                    costs.expanded(pt.spec, tuple(pt.overrides), pt.seed)
                    mark = ""
                except Exception as e:  # an invalid override or scenario
                    bad += 1
                    mark = f"  <- invalid: {' '.join(str(e).split())}"
                print(f"  {point_command(spec, pt, args.seed)}{mark}")
            total += len(plan.points)
        from tierlab.reproduce.runner import sensitivity_plan

        ids = {s.id for s in specs}
        for sens in paper.sensitivity:
            if sens.figure not in ids:
                continue
            fig, sets = sensitivity_plan(sens, paper.figure(sens.figure), args.profile)
            for value, extra in sets:
                _, plan, _ = plan_figure(
                    fig, args.profile, args.overrides, args.seed, extra, sens.apply_to
                )
                est = costs.estimate(plan.points, table, done)
                cost.add(est)
                print(
                    f"{paper.id}/{sens.figure}: sensitivity {sens.key} = {value}: "
                    f"{len(plan.points)} points, ~{costs.human_seconds(est.cpu_seconds)} of CPU "
                    "(the points the figure runs as well are reused)"
                )
                for pt in plan.points:
                    try:
                        costs.expanded(pt.spec, tuple(pt.overrides), pt.seed)
                    except Exception as e:  # an invalid override or scenario
                        bad += 1
                        print(f"  {point_command(fig, pt, args.seed)}  <- invalid: {e}")
                total += len(plan.points)
    print(f"{total} points" + (f", {bad} invalid" if bad else ", every scenario valid"))
    print(f"estimated cost: {cost.text(args.jobs or DEFAULT_JOBS)}")
    return EXIT_USAGE if bad else EXIT_OK


def estimate_text(args: argparse.Namespace) -> str:
    """``315 points, ~12 min of CPU (~6 min with 2 jobs), ...``: what the run will cost."""
    import fnmatch

    from tierlab import costs
    from tierlab.reproduce import load
    from tierlab.reproduce.runner import plan_figure, sensitivity_plan

    total = costs.Estimate()
    table = costs.load()
    done: set[tuple[Any, ...]] = set()
    for name in _papers(args.paper):
        paper = load(name)
        ids = set()
        for spec in paper.figures:
            if fnmatch.fnmatchcase(spec.id, args.figures or "*"):
                ids.add(spec.id)
                _, plan, _ = plan_figure(spec, args.profile, args.overrides, args.seed)
                total.add(costs.estimate(plan.points, table, done))
        for sens in paper.sensitivity:
            if sens.figure in ids:
                fig, sets = sensitivity_plan(sens, paper.figure(sens.figure), args.profile)
                for _value, extra in sets:
                    _, plan, _ = plan_figure(
                        fig, args.profile, args.overrides, args.seed, extra, sens.apply_to
                    )
                    total.add(costs.estimate(plan.points, table, done))
    return f"{total.points} points, {total.text(args.jobs or DEFAULT_JOBS)}"


def main(args: argparse.Namespace) -> int:
    check_overrides(args.parser, args.overrides)
    if args.dry_run:
        return dry_run(args)
    from tierlab.progress import start as say

    out = args.out or default_out(args.paper)
    say("reproduce", f"{args.paper} ({args.profile} profile) into {out}")
    say("reproduce", estimate_text(args))
    from rich.console import Console

    from tierlab import outdir
    from tierlab._version import VERSION as __version__
    from tierlab.cli.sweeps import make_executor
    from tierlab.reproduce import load, report
    from tierlab.reproduce.model import FigureSpec
    from tierlab.reproduce.runner import run_paper
    from tierlab.sweep.cache import ResultCache
    from tierlab.sweep.engine import SweepProgress
    from tierlab.sweep.progress import sweep_progress

    out = args.out or default_out(args.paper)
    # As `run --out` of a sweep: an earlier report of this command (its stored points are
    # reused), an interrupted one's points, an empty or a new directory; anything else (a
    # user's files, another command's output) is refused before a point runs.
    outdir.check_replaceable(out, ("reproduce", "points"), outdir.OutputError)
    args.out = out  # where --executor slurm keeps its files too
    store = ResultCache(out / "points", reuse=not args.fresh)
    show = not args.no_progress
    err = Console(stderr=True)

    def progress(spec: FigureSpec, n: int) -> SweepProgress | None:
        print(f"tierlab reproduce: {spec.id}: {n} points ({args.profile})", file=sys.stderr)
        return sweep_progress(f"reproduce {spec.id}", err, lines=False) if show else None

    start = time.monotonic()
    runs = []
    interrupted = False
    with make_executor(args) as executor:
        desc = executor.describe()
        for name in _papers(args.paper):
            pr = run_paper(
                load(name),
                args.profile,
                executor,
                store=store,
                progress=progress,
                user_set=args.overrides,
                seed=args.seed,
                figures=args.figures,
            )
            runs.append(pr)
            if pr.interrupted:
                interrupted = True
                break
    runs = [r for r in runs if r.figures]
    if not runs:
        no_figure(args, [load(name) for name in _papers(args.paper)])
    wall = time.monotonic() - start
    command = (
        " ".join(["tierlab", "reproduce", *map(shlex.quote, sys.argv[2:])])
        if (len(sys.argv) > 1 and sys.argv[1] == "reproduce")
        else f"tierlab reproduce {args.paper}"
    )
    info = report.RunInfo(
        command=command,
        profile=args.profile,
        executor=desc,
        wall_seconds=wall,
        version=str(__version__),
        seed=args.seed,
        interrupted=interrupted,
    )
    from tierlab.progress import phase

    with phase(f"writing the report to {out}", "reproduce"):
        written = report.write(runs, info, out)
    failures = 0
    for pr in runs:
        print(f"{pr.paper.id}: {len(pr.figures)} figures, {report.tally(pr)}", file=sys.stdout)
        for c in pr.claims:
            if c.outcome.verdict == "error":
                print(f"tierlab: {pr.paper.id}: claim {c.claim.id}: {c.outcome.observed}")
        for f in pr.figures:
            for e in f.run.failures:
                failures += 1
                print(f"tierlab: {f.spec.id}: {e}", file=sys.stderr)
    reused = sum(f.run.reused for pr in runs for f in pr.figures) + sum(
        fr.run.reused for pr in runs for sr in pr.sensitivity for _, fr, _ in sr.runs
    )
    if reused:
        print(
            f"tierlab: reused {reused} points stored in {out / 'points'} (--fresh recomputes)",
            file=sys.stderr,
        )
    print(f"wrote {len(written)} files to {out} (open {out / 'index.html'}) in {wall:.1f} s")
    if interrupted:
        print("tierlab: interrupted; the report holds the points done", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 1 if failures else EXIT_OK
