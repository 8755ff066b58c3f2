"""``tierlab import FORMAT FILE... -o REC``: other tools' memory samples (perf-script,
mckernel, damo) and full access traces (raw, csv, oracle-general, lackey) into the recording
format (docs/recording.md, docs/formats.md). Traces are converted streaming, in Rust."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from tierlab.cli.common import EXIT_OK, EXIT_USAGE, int_in, print_error

SAMPLE_FORMATS = ("perf-script", "mckernel", "damo")
#: Full access traces, imported streaming by tierlab._native.import_trace.
TRACE_FORMATS = ("raw", "csv", "oracle-general", "lackey")
FORMATS = SAMPLE_FORMATS + TRACE_FORMATS


def _rate(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number such as 1e9") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive finite number")
    return v


def _sep(text: str) -> str:
    """A field separator: one ASCII character (a typed ``\\t`` is a tab)."""
    if text == "\\t":
        return "\t"
    if len(text) != 1 or not text.isascii():
        raise argparse.ArgumentTypeError(
            f"{text!r}: the field separator must be one ASCII character (' ' = any "
            "whitespace, \\t = a tab)"
        )
    return text


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="import perf script, McKernel, damo samples or raw/CSV/oracleGeneral/lackey traces",
        description="Convert `perf script` text of memory samples, McKernel PEBS dump files "
        "(one per thread), damo (DAMON) records, or full access traces (raw per-thread binary "
        "t<TID>.bin files, CSV tid,time,addr,kind[,size], libCacheSim oracleGeneral, a Valgrind "
        "lackey log) into a recording. Traces stream: memory does not grow with their size.",
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
    p.add_argument(
        "--time-unit",
        choices=("ns", "instructions", "accesses"),
        default="ns",
        help="csv: what the time column counts (default ns)",
    )
    p.add_argument(
        "--sep",
        type=_sep,
        default=",",
        help="csv: field separator, one ASCII character (' ' = any whitespace, \\t = a tab)",
    )
    p.add_argument(
        "--object-bytes",
        type=int_in(1, 2**40, "a number of bytes per object"),
        default=4096,
        metavar="B",
        help="oracle-general: bytes per object (address = object id x B; default 4096)",
    )
    p.set_defaults(func=main, parser=p)


def main(args: argparse.Namespace) -> int:
    from tierlab import safeio
    from tierlab.recording import RecordingError, check_overwritable

    out: Path = args.out
    if not args.force and check_overwritable(out, True):
        print_error(f"{out}: already exists (use --force to replace it)")
        return EXIT_USAGE
    replacing = check_overwritable(out, args.force)
    for f in args.files:  # every reader refuses FIFOs and devices; the native ones too
        safeio.check_regular(f, RecordingError, "file")
    # A failed import takes back what it wrote at OUT (a directory it made, or what it put
    # into an empty one), so the corrected command can run; it never touches anything else.
    created = not os.path.lexists(out)
    from tierlab.progress import phase

    try:
        with phase(f"importing {args.format} into {out}", "import") as state:
            code = _import(args, out, replacing)
            state.failed = code != EXIT_OK
    except BaseException:
        _take_back(out, created, replacing)
        raise
    if code != EXIT_OK:
        _take_back(out, created, replacing)
    return code


def _take_back(out: Path, created: bool, replacing: bool) -> None:
    """Remove what a failed import wrote at ``out`` (a recording it was to replace, with
    ``--force``, is left as it was: the new one was written beside it)."""
    from tierlab import outdir

    if not replacing:
        outdir.take_back(out, created)


def _import(args: argparse.Namespace, out: Path, replacing: bool) -> int:
    from tierlab.live import imports

    if args.format in TRACE_FORMATS:
        return _import_trace(args, out, replacing)
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


def _import_trace(args: argparse.Namespace, out: Path, replacing: bool) -> int:
    """A full trace, imported streaming by the native extension; a recording it replaces
    (--force) is swapped for the new one only once that is complete."""
    import json
    import shutil

    from tierlab import _native, outdir
    from tierlab._version import VERSION as __version__

    meta = {
        "source": f"tierlab import {args.format} (tierlab {__version__})",
        "parameters": {"format": args.format, "files": [str(f) for f in args.files]},
    }
    if args.format == "csv":
        meta["time_unit"] = args.time_unit
    target = outdir.staging_dir(out) if replacing else out
    try:
        c = _native.import_trace(
            args.format,
            [str(f) for f in args.files],
            str(target),
            overwrite=False,
            meta=json.dumps(meta),
            object_bytes=args.object_bytes,
            sep=args.sep,
            with_size=args.format == "csv",
        )
        if replacing:
            outdir.install(target, out)
    except _native.TraceFormatError as e:
        print_error(str(e))
        return EXIT_USAGE
    finally:
        if replacing and target.exists():
            shutil.rmtree(target, ignore_errors=True)
    print(
        f"imported {c['accesses']} accesses ({c['loads']} loads, {c['stores']} stores) of "
        f"{c['threads']} thread(s) into {out} (time: {c['time_unit']})"
    )
    return EXIT_OK
