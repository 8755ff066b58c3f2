"""``tierlab bench engine``: the engine's throughput (accesses per second).
``tierlab bench policies``: replacement policies against libCacheSim on one page trace.
``tierlab bench tracer``: the compiler-instrumentation tracer against Valgrind lackey on the
same program, in one run."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

from rich.table import Table

from tierlab.api import bench_engine
from tierlab.cli.common import exit_status_text, int_in, stdout_console


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks", description="Benchmarks of tierlab itself.")
    what = p.add_subparsers(dest="bench", metavar="BENCH", required=True)
    e = what.add_parser(
        "engine",
        help="engine throughput",
        description="Accesses per second of the workload generator alone (generate) and of "
        "the machine model with 1 and 16 cores.",
    )
    e.add_argument(
        "--json",
        action="store_true",
        help="print a JSON object instead of a table: each benchmark's best rate "
        '(accesses/s) under its name, and every round\'s rates under "runs"',
    )
    e.add_argument("--quick", action="store_true", help="shorter measurement (less precise)")
    e.add_argument(
        "--repeat",
        type=int_in(0, 1000, "a number of rounds"),
        default=5,
        metavar="K",
        help="rounds of every benchmark; the best and the median are reported (default 5)",
    )
    e.add_argument(
        "--calibrate",
        type=Path,
        metavar="C_FILE",
        help="also build and run this naive C model of the TLB-miss path (make bench: "
        "../shared/bench/engine-calibration.c) in every round, alternating with tierlab, "
        "and report tierlab's rate over the model's (machine_1core_random over its random "
        "run, machine_1core over its sequential run)",
    )
    e.add_argument(
        "--record",
        type=Path,
        metavar="DIR",
        help="write the figures with the commit and the machine to DIR/engine-*.json "
        "(make bench: bench/results) and print the ratios to the newest earlier record",
    )
    e.set_defaults(func=engine, parser=e)
    pol = what.add_parser(
        "policies",
        help="replacement policies vs libCacheSim",
        description="Replay one page trace (half Zipf-distributed hot pages, half a cyclic "
        "scan) through tierlab's fifo, exact lru and clock and, in the same process, through "
        "libCacheSim's FIFO, LRU and Clock: requests per second of each (best of --repeat) "
        "and the ratio. The miss counts must be equal; a difference is reported as an error.",
    )
    pol.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    pol.add_argument(
        "--requests",
        type=int_in(1, 10**10, "a number of requests"),
        default=5_000_000,
        metavar="N",
        help="trace length (default 5e6)",
    )
    pol.add_argument(
        "--repeat",
        type=int_in(1, 1000, "a number of runs"),
        default=3,
        metavar="K",
        help="runs per side (best; default 3)",
    )
    pol.set_defaults(func=policies, parser=pol)
    tr = what.add_parser(
        "tracer",
        help="tierlab trace --cc against the native run and Valgrind lackey",
        description="Build three programs (a STREAM triad, a random-access GUPS kernel, a 2-D "
        "OpenMP stencil) natively and instrumented; run each natively, instrumented alone "
        "(raw files in memory), as the whole `tierlab trace --cc` command (build, run, "
        "recording), and natively and under Valgrind lackey at a smaller size: wall and CPU "
        "time, slowdowns against native, accesses per second, bytes per access on disk.",
    )
    tr.add_argument(
        "--programs",
        default="triad,gups,stencil",
        metavar="LIST",
        help="comma-separated programs (default triad,gups,stencil)",
    )
    tr.add_argument(
        "--scale",
        type=float_in(1e-4, 100.0, "a scale"),
        default=1.0,
        help="size factor of every program (default 1: 120-290 M accesses each, about "
        "9 bytes an access of raw files while a program runs)",
    )
    tr.add_argument(
        "--lackey-scale",
        type=float_in(0.0, 1.0, "a scale"),
        default=0.01,
        help="size of lackey's runs against --scale (default 0.01: lackey is about 100x "
        "slower than the tracer); 0: no lackey",
    )
    tr.add_argument(
        "--threads",
        type=int_in(1, 1024, "a number of OpenMP threads"),
        default=4,
        help="OpenMP threads (default 4)",
    )
    tr.add_argument("--json", action="store_true", help="print a JSON object")
    tr.set_defaults(func=tracer, parser=tr)
    co = what.add_parser(
        "costs",
        help="measure every built-in scenario's CPU time and peak memory",
        description="Run each built-in scenario's command (tierlab run NAME, or tierlab "
        "telemetry NAME for a comparison of techniques) with --out into a temporary "
        "directory and --jobs 2, one after the other, and measure its CPU time (the command "
        "and its workers) and peak RSS (its largest process). With --write, the figures go "
        "into the checked-in table that tierlab scenarios and every --dry-run read "
        "(python/tierlab/scenario_costs.json; make costs). Takes about an hour on two cores.",
    )
    co.add_argument(
        "scenarios", nargs="*", metavar="NAME", help="only these scenarios (default: every one)"
    )
    co.add_argument(
        "--write",
        action="store_true",
        help="store the figures in the checked-in table (the other scenarios' are kept)",
    )
    co.add_argument(
        "--quick",
        action="store_true",
        help="measure the scenarios' --quick form (the full cost is then extrapolated from "
        "it: tierlab scenarios marks such figures with ~)",
    )
    co.add_argument("--json", action="store_true", help="print the figures as JSON")
    co.set_defaults(func=costs, parser=co)


def engine(args: argparse.Namespace) -> int:
    if args.repeat < 1:
        print(f"tierlab: error: --repeat must be at least 1, not {args.repeat}", file=sys.stderr)
        return 2
    if args.calibrate is None and args.record is None:
        runs = bench_engine(args.quick, args.repeat)
        models: dict[str, list[float]] = {}
    else:
        from tierlab import benchrecord as br

        try:
            with tempfile.TemporaryDirectory() as work:
                model = (
                    br.Model.build(args.calibrate, Path(work), args.quick)
                    if args.calibrate is not None
                    else None
                )
                runs, models = br.rounds(
                    lambda: {k: v[0] for k, v in bench_engine(args.quick, 1).items()},
                    args.repeat,
                    model,
                )
        except br.BenchRecordError as e:
            print(f"tierlab: error: {e}", file=sys.stderr)
            return 2
    record = None
    if args.calibrate is not None or args.record is not None:
        from tierlab import benchrecord as br

        record = br.make_record(runs, models, quick=args.quick, source=args.calibrate)
    if args.json:
        out: dict[str, object] = {name: max(rates) for name, rates in runs.items()}
        out["runs"] = runs
        if record is not None and "calibration" in record:
            out["calibration"] = record["calibration"]
        print(json.dumps(out, indent=2))
    else:
        table = Table(
            title=f"engine throughput, simulated accesses per second, {args.repeat} round(s)",
            title_justify="left",
            box=None,
        )
        table.add_column("benchmark", style="bold")
        for c in ("best", "median", "worst"):
            table.add_column(f"{c} (M/s)", justify="right")
        for name, rates in {**runs, **models}.items():
            table.add_row(
                name, *(f"{x / 1e6:.1f}" for x in (max(rates), median(rates), min(rates)))
            )
        stdout_console().print(table)
        if record is not None:
            for k, v in record.get("calibration", {}).items():
                if isinstance(v, dict) and "median" in v:
                    print(f"calibration {k}: {v['median']:.2f} (median of the rounds)")
    if args.record is not None and record is not None:
        from tierlab import benchrecord as br

        prev = br.previous(args.record)
        try:
            path = br.write(args.record, record)
        except br.BenchRecordError as e:
            print(f"tierlab: error: {e}", file=sys.stderr)
            return 2
        out_err = sys.stderr if args.json else sys.stdout
        print(f"recorded {path}", file=out_err)
        if prev is not None:
            ratios = br.compare(record, prev[1])
            print(
                f"against {prev[0].name} (commit {str(prev[1].get('commit', ''))[:10]}), "
                "new median / old median:",
                file=out_err,
            )
            for k, r in ratios.items():
                print(f"  {k:40} {r:6.3f}x", file=out_err)
    return 0


def policies(args: argparse.Namespace) -> int:
    try:
        import libcachesim  # noqa: F401
    except ImportError:
        print(
            "tierlab: error: libCacheSim is not installed (pip install libcachesim)",
            file=sys.stderr,
        )
        return 2
    from tierlab.policies import bench_policies

    res = bench_policies(args.requests, args.repeat)
    bad = [k for k, v in res.items() if v["misses_tierlab"] != v["misses_libcachesim"]]
    if args.json:
        out = {k: {x: v[x] for x in ("tierlab", "libcachesim", "ratio")} for k, v in res.items()}
        print(json.dumps(out, indent=2))
    else:
        table = Table(
            title=f"replacement policies, {args.requests:,} requests, 100,000 frames",
            title_justify="left",
            box=None,
        )
        for c in ("policy", "tierlab req/s", "libCacheSim req/s", "ratio", "misses"):
            table.add_column(c, justify="left" if c == "policy" else "right")
        for k, v in res.items():
            table.add_row(
                k,
                f"{v['tierlab']:,.0f}",
                f"{v['libcachesim']:,.0f}",
                f"{v['ratio']:.1f}x",
                f"{v['misses_tierlab']:,}",
            )
        stdout_console().print(table)
    if bad:
        print(
            f"tierlab: error: miss counts differ from libCacheSim for {', '.join(bad)}",
            file=sys.stderr,
        )
        return 1
    return 0


def float_in(lo: float, hi: float, what: str) -> Any:
    """An argparse type: a finite number from ``lo`` to ``hi``."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what}") from None
        if not lo <= v <= hi:  # NaN fails too
            raise argparse.ArgumentTypeError(f"{text}: expected {what} from {lo:g} to {hi:g}")
        return v

    parse.__name__ = what
    return parse


def tracer(args: argparse.Namespace) -> int:
    from tierlab.live.cctrace import BENCH_PROGRAMS, CcTraceError, bench_tracer

    programs = [p.strip() for p in args.programs.split(",") if p.strip()]
    for p in programs:
        if p not in BENCH_PROGRAMS:
            args.parser.error(f"--programs: {p!r} is not one of {', '.join(BENCH_PROGRAMS)}")
    if not programs:
        args.parser.error("--programs: give at least one program")

    def say(msg: str) -> None:
        print(f"tierlab bench tracer: {msg}", file=sys.stderr, flush=True)

    try:
        res = bench_tracer(
            programs, args.threads, args.scale, args.lackey_scale or None, progress=say
        )
    except CcTraceError as e:
        print(f"tierlab: error: {e}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as e:
        # A program (native, traced or under lackey) died: one line, not a traceback.
        cmd = e.cmd if isinstance(e.cmd, list | tuple) else [str(e.cmd)]
        stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else ""
        last = stderr.strip().splitlines()[-1:] if stderr.strip() else []
        detail = f": {last[0].strip()}" if last else ""
        print(
            f"tierlab: error: bench tracer: {Path(str(cmd[0])).name} "
            f"{exit_status_text(e.returncode)} (--scale {args.scale:g}, "
            f"--threads {args.threads}){detail}",
            file=sys.stderr,
        )
        return 1
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    table = Table(
        title=f"tierlab trace --cc against native, {args.threads} OpenMP threads "
        "(slowdown: wall time / native wall time; CPU in brackets)",
        title_justify="left",
        box=None,
    )
    cols = ("program", "native s", "instrumented", "whole command", "M acc/s written",
            "B/access", "lackey (size)")  # fmt: skip
    for c in cols:
        table.add_column(c, justify="left" if c == "program" else "right")

    def cpu(x: float | None) -> str:
        return f"{x:.1f}x" if x is not None else "n/a"

    for name, r in res["programs"].items():
        sd = r["slowdown"]
        lk = r.get("lackey")
        table.add_row(
            f"{name} ({r['command']['accesses'] / 1e6:.0f} M acc)",
            f"{r['native']['wall']:.2f}",
            f"{sd['instrumented_wall']:.1f}x ({cpu(sd['instrumented_cpu'])})",
            f"{sd['command_wall']:.1f}x ({cpu(sd['command_cpu'])})",
            f"{r['command']['accesses_per_second'] / 1e6:.1f}",
            f"{r['command']['bytes_per_access']:.3f}",
            f"{sd['lackey_wall']:.0f}x ({cpu(sd['lackey_cpu'])}; {lk['accesses'] / 1e6:.1f} M acc)"
            if lk
            else "-",
        )
    stdout_console().print(table)
    return 0


def costs(args: argparse.Namespace) -> int:
    from tierlab import costs as c
    from tierlab.api import scenarios
    from tierlab.cli.suggest import check_choice

    known = [n for n, _ in scenarios()]
    for name in args.scenarios:
        check_choice(args.parser, "scenario", name, known)
    names = args.scenarios or known
    table = c.load()
    measured = {}
    fixed: dict[str, float] = {}
    for i, name in enumerate(names, 1):
        print(f"tierlab bench costs: [{i}/{len(names)}] {name} ...", file=sys.stderr, flush=True)
        cost = c.measure(name, fixed, quick_form=args.quick)
        measured[name] = cost
        print(
            f"tierlab bench costs: {name}{' --quick' if args.quick else ''}: "
            f"{c.human_seconds(cost.cpu_seconds)} of CPU (full: "
            f"{c.human_seconds(cost.full_cpu_seconds)}), "
            f"{c.human_bytes(cost.peak_rss_bytes)} peak, {cost.points} point(s), "
            f"{c.human_seconds(cost.wall_seconds)} wall (load {cost.measured['load_before']})",
            file=sys.stderr,
            flush=True,
        )
        if args.write:
            table[name] = cost
            c.save(table)
    if args.json:
        from dataclasses import asdict

        print(json.dumps({n: asdict(v) for n, v in measured.items()}, indent=2))
    elif args.write:
        print(f"wrote {len(measured)} scenario costs to {c.COSTS_FILE}")
    return 0
