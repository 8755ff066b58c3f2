"""What the sweep commands share (``tierlab run`` on a scenario with sweep points,
``tierlab telemetry``): their options, the executor they ask for, and running a sweep of
any kind through the one engine with its progress, outputs and messages."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tierlab.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SIMULATION,
    EXIT_USAGE,
    int_in,
    report_error,
    stdout_console,
)
from tierlab.sweep.executor import Executor, LocalExecutor
from tierlab.sweep.kinds import SweepKind
from tierlab.sweep.point import PointError

#: Points at a time when ``--jobs`` is not given, the same for every sweep command (``run``,
#: ``telemetry``, ``tune``, ``reproduce``).
DEFAULT_JOBS = 2

#: ``--jobs N`` of every command: at least 1 (0 or a negative number is an argument error,
#: never silently 1 nor a scheduler that can submit nothing).
JOBS = int_in(1, 1_000_000, "a number of points at a time")


def add_sweep_args(parser: argparse.ArgumentParser, jobs: int = DEFAULT_JOBS) -> None:
    """``--points``, ``--jobs``, ``--executor``, ``--address``, ``--fresh``,
    ``--no-progress``."""
    parser.add_argument(
        "--points",
        metavar="GLOB",
        help="with sweep points: run only the points whose label matches (e.g. 'bt/*/cmcp')",
    )
    parser.add_argument(
        "--jobs",
        type=JOBS,
        default=None,
        metavar="N",
        help=f"run N points at a time in worker processes (default {jobs}); with "
        "--executor ray, at most N Ray tasks at a time (default: the cluster's CPUs)",
    )
    parser.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="where points run: local processes (default), a Ray cluster (needs "
        "tierlab[ray]) or one SLURM job array (needs --out on a file system the nodes share)",
    )
    parser.add_argument(
        "--address",
        metavar="HOST:PORT",
        help="with --executor ray: the cluster to connect to (default: RAY_ADDRESS, else a "
        "Ray instance started on this machine)",
    )
    add_slurm_args(parser)
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="with --out: recompute every point instead of reusing the results stored in "
        "OUT/points/ by earlier runs",
    )
    parser.add_argument("--no-progress", action="store_true", help="never show progress")
    add_cost_args(parser)
    add_table_args(parser)
    parser.set_defaults(default_jobs=jobs)


def add_table_args(parser: argparse.ArgumentParser) -> None:
    """``--columns`` and ``--raw`` (every command that prints a table of results)."""
    parser.add_argument(
        "--columns",
        metavar="A,B,...",
        help="the table's columns, by key or header, in this order (default: those that fit "
        "the terminal's width, COLUMNS)",
    )
    parser.add_argument(
        "--raw",
        action="store_true",
        help="print the table tab-separated with raw values and full column keys (for "
        "scripts; --json gives every figure)",
    )


def add_cost_args(parser: argparse.ArgumentParser) -> None:
    """``--quick`` and ``--dry-run`` (every command that runs simulations)."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a scaled-down run that finishes in about a minute (the paper figure's quick "
        "profile where tierlab reproduce has one, else a tenth of the simulated time or one "
        "iteration); says what it changed",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the points that would run and their estimated CPU time and memory (from "
        "the scenarios' measured costs, tierlab scenarios), run nothing",
    )


def apply_quick(args: argparse.Namespace, command: str, label: str | None = None) -> None:
    """``--quick``: the quick profile's overrides go before the user's, its points are kept
    (``args.quick_keep``), and a line on stderr says what changed."""
    if not getattr(args, "quick", False):
        return
    from tierlab import costs

    q = costs.quick(str(args.scenario), command, args.overrides)
    args.overrides = [*q.set, *args.overrides]
    if q.points:
        args.quick_keep = q.keeps
    print(f"tierlab {label or command}: --quick: {q.note}", file=sys.stderr, flush=True)


def start_line(args: argparse.Namespace, kind: SweepKind[Any] | None, command: str) -> None:
    """The command's first line on stderr: what runs and what it should cost."""
    from tierlab import costs
    from tierlab.progress import start

    points = plan_points(args, kind)
    est = costs.estimate(points)
    what = f"{len(points)} point{'s' if len(points) != 1 else ''}" if kind else "1 run"
    jobs = 1 if kind is None else (args.jobs or args.default_jobs)
    start(command, f"{args.scenario}: {what}, {est.text(jobs)}")


def plan_points(args: argparse.Namespace, kind: SweepKind[Any] | None) -> list[Any]:
    """The points the command will run (one for a scenario without a sweep)."""
    from tierlab.sweep.point import Point

    if kind is None:
        return [Point("", str(args.scenario), tuple(args.overrides), args.seed)]
    from tierlab.sweep.api import plan_kind

    return plan_kind(
        args.scenario,
        kind,
        seed=args.seed,
        set=args.overrides,
        only=args.points,
        keep=getattr(args, "quick_keep", None),
    ).points


def dry_run(args: argparse.Namespace, kind: SweepKind[Any] | None) -> int:
    """``--dry-run``: every point with its estimated CPU time, then the total."""
    jobs = 1 if kind is None else (args.jobs or args.default_jobs)
    return print_estimate(plan_points(args, kind), jobs)


def print_estimate(points: list[Any], jobs: int) -> int:
    """Every point's estimated CPU time, then the total (on stdout)."""
    from tierlab import costs

    table = costs.load()
    total = costs.Estimate()
    out = stdout_console()
    for pt in points:
        est = costs.estimate([pt], table)
        total.add(est)
        cpu = "no measured cost" if est.unpriced else f"~{costs.human_seconds(est.cpu_seconds)}"
        out.print(f"  {pt.label or pt.spec}: {cpu}", highlight=False, markup=False)
    out.print(
        f"{len(points)} point{'s' if len(points) != 1 else ''}: {total.text(jobs)}",
        highlight=False,
        markup=False,
    )
    return EXIT_OK


#: The ``--executor`` choices of every sweep command.
EXECUTORS = ("local", "ray", "slurm")


def add_slurm_args(parser: argparse.ArgumentParser) -> None:
    """The options of ``--executor slurm`` (every sweep command has them)."""
    g = parser.add_argument_group("with --executor slurm")
    g.add_argument("--slurm-partition", metavar="NAME", help="the partition to submit to")
    g.add_argument(
        "--slurm-time",
        type=int_in(1, 525_600, "minutes"),
        metavar="MIN",
        help="time limit of each point's task in minutes (default 60)",
    )
    g.add_argument(
        "--slurm-mem",
        type=int_in(1, 1 << 30, "MiB"),
        metavar="MIB",
        help="memory of each point's task in MiB (default: the engine's estimate for the "
        "largest point, doubled, plus 512 MiB for Python)",
    )
    g.add_argument(
        "--slurm-max-queued",
        type=int_in(1, 1_000_000, "a number of tasks"),
        default=500,
        metavar="N",
        help="at most N of the sweep's tasks in the queue at once (default 500); --jobs N "
        "caps the tasks running at once",
    )


def _slurm_executor(args: argparse.Namespace) -> Executor:
    from tierlab.sweep.slurm_executor import Limits, SlurmExecutor

    out: Path | None = getattr(args, "out", None)
    if out is None:
        args.parser.error(
            "--executor slurm needs --out DIR: the points, the array's scripts and its logs "
            "are kept there (on a file system the cluster's nodes share)"
        )

    assert out is not None

    def submitted(job: str, tasks: int, limits: Limits) -> None:
        print(
            f"tierlab: submitted {tasks} point{'s' if tasks != 1 else ''} as SLURM job array "
            f"{job} ({limits.minutes} min, {limits.mem_mb} MiB each; scripts and logs in "
            f"{out / SLURM_DIR})",
            file=sys.stderr,
        )

    def adopted(jobs: list[str], tasks: int) -> None:
        print(
            f"tierlab: {tasks} point{'s are' if tasks != 1 else ' is'} still queued or running "
            f"in earlier SLURM job arrays ({', '.join(jobs)}); waiting for them",
            file=sys.stderr,
        )

    return SlurmExecutor(
        out / SLURM_DIR,
        partition=args.slurm_partition,
        jobs=args.jobs,
        max_queued=args.slurm_max_queued,
        minutes=args.slurm_time,
        mem_mb=args.slurm_mem,
        on_submit=submitted,
        on_adopt=adopted,
    )


def make_executor(args: argparse.Namespace) -> Executor:
    """The executor the command line asks for."""
    if args.address is not None and not args.address.strip():
        args.parser.error("--address '': expected HOST:PORT (or leave --address out)")
    if args.executor == "slurm":
        if args.address is not None:
            args.parser.error("--address needs --executor ray")
        return _slurm_executor(args)
    if args.executor == "ray":
        from tierlab.sweep.ray_executor import RayExecutor

        return RayExecutor(args.address, args.jobs)
    if args.address is not None:
        args.parser.error("--address needs --executor ray")
    return LocalExecutor(args.jobs if args.jobs is not None else args.default_jobs)


#: Where ``--out DIR`` keeps the result of every point (see tierlab.sweep.cache).
POINTS_DIR = "points"

#: Where ``--executor slurm`` keeps its job scripts, logs and pending results under ``--out``.
SLURM_DIR = "slurm"


def exit_code(error: PointError) -> int:
    """An invalid scenario or override is a usage error; anything else a failed run."""
    return EXIT_USAGE if error.kind == "scenario" else EXIT_SIMULATION


def run_sweep_command(
    args: argparse.Namespace, kind: SweepKind[Any], title: str | None = None
) -> int:
    """Run the sweep of ``args.scenario`` as ``kind``: progress on stderr, the report as a
    table (or ``--json``), files into ``--out``; one line per failed point, naming it; exit
    status 130 when interrupted (the points done are kept), non-zero when a point failed."""
    from tierlab.sweep.api import run_kind
    from tierlab.sweep.progress import sweep_progress

    show = not args.no_progress
    cache_dir = args.out / POINTS_DIR if args.out is not None else None
    with make_executor(args) as executor:
        outcome = run_kind(
            args.scenario,
            kind,
            seed=args.seed,
            set=args.overrides,
            only=args.points,
            executor=executor,
            progress=sweep_progress(args.command) if show else None,
            cache_dir=cache_dir,
            fresh=args.fresh,
            keep=getattr(args, "quick_keep", None),
        )
    run, report = outcome.run, outcome.report
    if run.reused:
        print(
            f"tierlab: reused {run.reused} of {len(run.points)} points stored in {cache_dir} "
            "(--fresh recomputes them)",
            file=sys.stderr,
        )
    if args.points and not outcome.plan.points:
        args.parser.error(f"--points {args.points!r} matches no sweep point")
    written = []
    if args.out is not None:
        from tierlab.progress import phase

        with phase(f"writing tables and plots to {args.out}", args.command):
            written = kind.write(report, args.out)
    if args.json:
        from tierlab.reporters.page import clean_json

        sys.stdout.write(
            json.dumps(clean_json(kind.to_json(report)), indent=2, default=str, allow_nan=False)
            + "\n"
        )
        sys.stdout.flush()
    else:
        from tierlab import tables

        out = stdout_console()
        try:
            with tables.options(args.columns, args.raw):
                kind.render(report, out, title or str(args.scenario))
        except tables.TableError as e:
            args.parser.error(str(e))
        if written:
            out.print(f"wrote {len(written)} files to {args.out}", highlight=False)
    for error in run.failures:
        report_error(error)
    if run.interrupted:
        print("tierlab: interrupted; kept the points done", file=sys.stderr)
        return EXIT_INTERRUPTED
    if run.failures:
        return max(exit_code(e) for e in run.failures)
    return EXIT_OK
