"""``tierlab import perf-script|mckernel|damo FILE... -o REC``: other tools' memory samples
into the recording format (see docs/recording.md for the formats accepted)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from tierlab.cli.common import EXIT_OK, EXIT_USAGE, print_error

FORMATS = ("perf-script", "mckernel", "damo")


def _rate(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number such as 1e9") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive finite number")
    return v


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="import perf script text, McKernel PEBS dumps or damo records",
        description="Convert `perf script` text of memory samples, McKernel PEBS dump files "
        "(one per thread) or damo (DAMON) records into a recording.",
    )
    p.add_argument("format", choices=FORMATS, help="input format")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="input file(s)")
    p.add_argument("-o", "--out", type=Path, required=True, metavar="REC", help="recording")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace REC if it is a tierlab recording (anything else is never replaced)",
    )
    p.add_argument(
        "--ticks-per-second",
        type=_rate,
        default=1e9,
        metavar="HZ",
        help="mckernel: timestamp ticks per second (default 1e9: nanoseconds; the TSC rate "
        "for rdtsc stamps)",
    )
    p.add_argument(
        "--event", default="pebs-mckernel", help="mckernel: event name stored with the samples"
    )
    p.set_defaults(func=main, parser=p)


def main(args: argparse.Namespace) -> int:
    from tierlab.live import imports
    from tierlab.recording import check_overwritable

    out: Path = args.out
    if not args.force and check_overwritable(out, True):
        print_error(f"{out}: already exists (use --force to replace it)")
        return EXIT_USAGE
    check_overwritable(out, args.force)
    try:
        if args.format == "perf-script":
            res = imports.import_perf_script(args.files, out, overwrite=args.force)
        elif args.format == "mckernel":
            res = imports.import_mckernel(
                args.files,
                out,
                ticks_per_second=args.ticks_per_second,
                event=args.event,
                overwrite=args.force,
            )
        else:
            res = imports.import_damo(args.files, out, overwrite=args.force)
    except imports.ImportError_ as e:
        print_error(str(e))
        return EXIT_USAGE
    for w in res.warnings:
        print(f"tierlab import: warning: {w}", file=sys.stderr)
    counts = ", ".join(f"{v} {k}" for k, v in res.counts.items())
    print(f"imported {counts} into {out}")
    return EXIT_OK
