"""``tierlab overhead -- CMD``: the slowdown recording causes, with a confidence interval."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tierlab.cli.common import EXIT_OK, EXIT_USAGE, int_in, print_error
from tierlab.cli.record import add_recorder_options, backend_text, recorder_options

#: The recorder's options `overhead` takes (as `tierlab record`).
OVERHEAD_FIELDS = ("backend", "event", "period", "buffer_size", "ldlat", "min_mapping")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "overhead",
        help="measure the overhead of recording a command",
        description="Run CMD N times without and N times with `tierlab record`, interleaved, "
        "and report the overhead (mean recorded run time / mean baseline - 1) with a 95% "
        "bootstrap confidence interval. The target's output is discarded.",
    )
    p.add_argument(
        "-n",
        "--runs",
        type=int_in(0, 100_000, "a number of runs"),
        default=5,
        help="runs of each kind (default 5; at least 2)",
    )
    p.add_argument(
        "--warmup",
        type=int_in(0, 100_000, "a number of runs"),
        default=1,
        help="uncounted runs of each kind first (default 1)",
    )
    add_recorder_options(p, OVERHEAD_FIELDS)
    p.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep the recordings in DIR/run-N/ (with the result in DIR/overhead.json): a new "
        "or empty directory, or an earlier --keep, which is replaced",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    p.set_defaults(func=main, parser=p)


def main(args: argparse.Namespace) -> int:
    from tierlab import _native
    from tierlab.live.overhead import Overhead, OverheadError, measure

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        args.parser.error("nothing to measure: give -- CMD [ARGS...]")
    if args.runs < 2:
        args.parser.error("--runs must be at least 2")
    if args.warmup < 0:
        args.parser.error("--warmup must not be negative")
    opts = recorder_options(args, OVERHEAD_FIELDS)
    from tierlab import outdir

    if args.keep is not None:
        # A new or empty directory, or an earlier `overhead --keep` (overhead.json), which
        # the new recordings replace as a whole once they are all written.
        outdir.check_replaceable(args.keep, ("overhead",), outdir.OutputError)

    def progress(kind: str, i: int, dt: float) -> None:
        if not args.json:
            print(f"  run {i + 1} {kind:9s} {dt * 1e3:9.2f} ms", file=sys.stderr)

    def run(keep: Path | None) -> Overhead:
        return measure(
            command,
            runs=args.runs,
            warmup=args.warmup,
            options=opts,
            keep=keep,
            on_run=progress,
        )

    try:
        if args.keep is None:
            res = run(None)
        else:
            with outdir.replacing(args.keep, ("overhead",), outdir.OutputError) as staged:
                res = run(staged)
                doc = {"format": "tierlab-overhead", **res.to_json()}
                (staged / "overhead.json").write_text(json.dumps(doc, indent=2) + "\n")
    except (_native.LiveError, OverheadError) as e:
        print_error(str(e))
        return EXIT_USAGE
    if args.json:
        sys.stdout.write(json.dumps(res.to_json(), indent=2) + "\n")
        return EXIT_OK
    d = res.to_json()
    p = res.parameters
    lo, hi = res.ci95
    print(
        f"{' '.join(command)}: {backend_text(p)}, period {p['period']}, "
        f"buffer {p['buffer_size']} B, {res.runs} runs of each"
    )
    print(f"  baseline  mean {d['baseline_mean_s'] * 1e3:.2f} ms")
    print(
        f"  recorded  mean {d['recorded_mean_s'] * 1e3:.2f} ms  "
        f"({sum(res.samples) // res.runs} samples, {sum(res.drains) // res.runs} drains, "
        f"{sum(res.lost) // res.runs} lost records per run)"
    )
    from tierlab import noise

    print(
        f"  overhead  {res.overhead * 100:+.1f} %  (95% CI {lo * 100:+.1f} % .. {hi * 100:+.1f} %)"
        + noise.flag(res.ci95, res.load_max, res.cores)
    )
    return EXIT_OK
