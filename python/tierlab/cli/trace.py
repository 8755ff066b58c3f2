"""``tierlab trace -o REC -- CMD``: every memory access of a (single-threaded) program, as
ground truth, through Valgrind's lackey tool, streamed into the recording's accesses table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tierlab.cli.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, print_error


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trace",
        help="full access trace of a real program (Valgrind lackey)",
        description="Run CMD under `valgrind --tool=lackey --trace-mem=yes` and stream every "
        "load and store into a recording's accesses table (a modify counts as a load and a "
        "store). time_ns is the number of instructions executed before the access. For "
        "single-threaded programs: lackey's trace does not say which thread accessed.",
    )
    p.add_argument("-o", "--out", type=Path, required=True, metavar="REC", help="recording")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace REC if it is a tierlab recording (anything else is never replaced)",
    )
    p.add_argument("--valgrind", metavar="PATH", help="valgrind executable (default: on PATH)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    p.set_defaults(func=main, parser=p)


def main(args: argparse.Namespace) -> int:
    from tierlab.live.trace import TraceError, trace
    from tierlab.recording import check_overwritable

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        args.parser.error("nothing to trace: give -- CMD [ARGS...]")
    out: Path = args.out
    if not args.force and check_overwritable(out, True):
        print_error(f"{out}: already exists (use --force to replace it)")
        return EXIT_USAGE
    check_overwritable(out, args.force)
    try:
        res = trace(out, command, valgrind=args.valgrind, overwrite=args.force)
    except TraceError as e:
        print_error(str(e))
        return EXIT_USAGE
    c = res.counts
    check = ""
    if res.lackey_instructions is not None:
        same = res.lackey_instructions == c["instructions"]
        check = " (= lackey's count)" if same else f" (lackey reports {res.lackey_instructions})"
    print(
        f"tierlab trace: {c['accesses']} accesses ({c['loads']} loads, {c['stores']} stores, "
        f"{c['modifies']} modifies) over {c['instructions']} instructions{check}; "
        f"target exit status {res.exit_code}; wrote {out}",
        file=sys.stderr,
    )
    if res.interrupted:
        print("tierlab trace: interrupted; kept what was traced", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK
