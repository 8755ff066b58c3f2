"""``tierlab export-trace REC --format F -o OUT``: a recording's accesses in another tool's
trace format (libCacheSim oracleGeneral / lcs / valpin, Ramulator 2, ChampSim, CSV),
streaming, in Rust (``tierlab._native.export_trace``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tierlab.cli.common import EXIT_OK, int_in

#: Format name -> what it is, for the help text.
FORMATS = {
    "oracle-general": "libCacheSim oracleGeneral (24-byte records, next access computed)",
    "lcs": "libCacheSim lcs v1 (header with the trace's statistics + oracleGeneral records)",
    "valpin": "libCacheSim valpin (one u64 object id per request)",
    "ramulator": "Ramulator 2 LoadStoreTrace text (LD/ST 0xADDR)",
    "champsim": "ChampSim binary input_instr records (one memory instruction per access)",
    "csv": "tid,time,addr,kind,size (what `tierlab import csv` reads)",
}

#: ``--granularity`` names.
GRANULARITY = {"line": 64, "page": 4096}


def _granularity(text: str) -> int:
    if text in GRANULARITY:
        return GRANULARITY[text]
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected line, page or a number of bytes (a power of two)"
        ) from None
    if v < 1 or v & (v - 1):
        raise argparse.ArgumentTypeError(f"{text}: the object size must be a power of two")
    return v


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export-trace",
        help="write a recording's accesses as a libCacheSim, Ramulator, ChampSim or CSV trace",
        description="Write the accesses of a recording (live, traced, imported or simulated) "
        "in another tool's trace format, every thread merged in time order, streaming (memory "
        "does not grow with the recording's length). Formats: "
        + "; ".join(f"{k}: {v}" for k, v in FORMATS.items())
        + ". See docs/formats.md.",
    )
    p.add_argument("recording", type=Path, metavar="REC", help="a recording directory")
    p.add_argument("--format", required=True, choices=tuple(FORMATS), help="the trace format")
    p.add_argument("-o", "--out", type=Path, required=True, metavar="OUT", help="trace file")
    p.add_argument(
        "--granularity",
        type=_granularity,
        default=GRANULARITY["page"],
        metavar="G",
        help="libCacheSim formats: one object per line (64 B), page (4 KiB, the default) or "
        "BYTES (a power of two); the object id is the address divided by it, its size G",
    )
    p.add_argument(
        "--threads",
        type=int_in(0, 2**32 - 1, "a thread id"),
        nargs="+",
        metavar="TID",
        help="only these threads (default: every thread, merged by time)",
    )
    p.add_argument(
        "--force", action="store_true", help="replace OUT if it exists (a file, never a directory)"
    )
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.set_defaults(func=main, parser=p)


def main(args: argparse.Namespace) -> int:
    import json

    from tierlab import _native

    out: Path = args.out
    if out.exists() and not args.force:
        args.parser.error(f"{out}: exists; give --force to replace it")
    if out.is_dir():
        args.parser.error(f"{out}: is a directory; the output is a file")
    try:
        counts = _native.export_trace(
            str(args.recording), args.format, str(out), args.granularity, args.threads
        )
    except _native.TraceFormatError as e:
        raise OSError(str(e)) from None
    if args.json:
        sys.stdout.write(json.dumps(counts, indent=2) + "\n")
        return EXIT_OK
    objects = f", {counts['objects']:,} distinct objects" if counts["objects"] else ""
    print(
        f"wrote {counts['accesses']:,} accesses ({counts['loads']:,} loads, "
        f"{counts['stores']:,} stores) of {counts['threads']} thread"
        f"{'s' if counts['threads'] != 1 else ''}{objects} to {out} as {args.format} "
        f"({counts['bytes']:,} bytes)"
    )
    return EXIT_OK
