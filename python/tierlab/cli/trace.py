"""``tierlab trace -o REC -- CMD``: every memory access of a program, as ground truth.

Two tracers: Valgrind's lackey for unmodified (single-threaded) binaries, and compiler
instrumentation for programs built from source (``--cc SRC``: multi-threaded, OpenMP, C,
C++, Fortran; see ``tierlab.live.cctrace``). Both stream into the recording's accesses
table."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tierlab.cli.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, print_error


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trace",
        usage="%(prog)s [options] -o REC -- CMD [ARGS...]\n"
        "       %(prog)s --cc SRC [--cflags FLAGS] [options] -o REC -- [ARGS...]\n"
        "       %(prog)s --print-flags",
        help="full access trace of a real program (compiler instrumentation, or Valgrind)",
        description="Record every load and store of a program into a recording, with its "
        "mapping history. With --cc SRC (or --instrumented), the program is built with "
        "compiler instrumentation and every access of every thread is traced at tens of "
        "millions of accesses per second (C, C++, Fortran, OpenMP). Without, an unmodified "
        "binary CMD runs under `valgrind --tool=lackey --trace-mem=yes` (a modify counts as a "
        "load and a store; time_ns is the number of instructions executed before the access; "
        "single-threaded programs only: lackey's trace does not say which thread accessed).",
    )
    p.add_argument("-o", "--out", type=Path, metavar="REC", help="recording to write")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace REC if it is a tierlab recording (anything else is never replaced)",
    )
    p.add_argument("--valgrind", metavar="PATH", help="valgrind executable (default: on PATH)")
    p.add_argument(
        "--cc",
        action="append",
        default=[],
        metavar="SRC",
        help="build SRC (repeatable: C, C++, Fortran) instrumented, then run it with the "
        "arguments after -- and trace every load and store of every thread, and its OpenMP "
        "and pthread synchronisation (the recording's sync table)",
    )
    p.add_argument(
        "--cflags", default="", metavar="FLAGS", help='compile and link flags ("-O2 -fopenmp")'
    )
    p.add_argument(
        "--compiler", metavar="CC", help="compiler (default by extension: gcc/g++/gfortran)"
    )
    p.add_argument(
        "--instrumented",
        action="store_true",
        help="CMD was built with the flags of --print-flags (compile with them, link the "
        "runtime): run and trace it",
    )
    p.add_argument(
        "--print-flags",
        action="store_true",
        help="print the compile flags and the runtime object to link, for a build system",
    )
    p.add_argument(
        "--keep-raw", type=Path, metavar="DIR", help="keep the runtime's raw files in DIR"
    )
    p.add_argument(
        "--window",
        metavar="START:LENGTH[:EVERY]",
        help="with --cc/--instrumented: record only windows of each thread's accesses "
        "(plain counts, k/M/G: 1M:500k:10M) or of time since the start (with a unit, "
        "ns/us/ms/s: 2s:100ms:1s); window k covers [START + k EVERY, START + k EVERY + "
        "LENGTH). Instructions cannot be counted (the instrumentation sees accesses only)",
    )
    p.add_argument(
        "--roi",
        action="store_true",
        help="with --cc/--instrumented: record only between the program's "
        "tierlab_trace_start() and tierlab_trace_stop() calls (tierlab_trace.h; "
        "TIERLAB_TRACE_ROI=1)",
    )
    p.add_argument(
        "--follow-children",
        action="store_true",
        help="under lackey: trace every process CMD starts too (forked children and the "
        "programs they exec: Valgrind's --trace-children=yes), each into REC/processes/p<PID> "
        "(tierlab view REC --process PID); with --cc/--instrumented processes are always "
        "followed",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    p.set_defaults(func=main, parser=p)


def main(args: argparse.Namespace) -> int:
    from tierlab.live.trace import TraceError, trace, trace_children
    from tierlab.recording import check_overwritable

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if args.print_flags:
        from tierlab.live import cctrace

        cc = args.compiler or os.environ.get("CC", "gcc")
        print(" ".join(cctrace.instrument_flags(cc)))
        print(" ".join(str(o) for o in cctrace.runtime_objects()))
        print(f"-I{cctrace.RUNTIME_SOURCE.parent}")
        return EXIT_OK
    if args.out is None:
        args.parser.error("the following arguments are required: -o/--out")
    if args.cc or args.instrumented:
        return _cc_main(args, command)
    if not command:
        args.parser.error("nothing to trace: give -- CMD [ARGS...]")
    out: Path = args.out
    if not args.force and check_overwritable(out, True):
        print_error(f"{out}: already exists (use --force to replace it)")
        return EXIT_USAGE
    check_overwritable(out, args.force)
    try:
        run = trace_children if args.follow_children else trace
        res = run(out, command, valgrind=args.valgrind, overwrite=args.force)
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
    if res.processes is not None and len(res.processes) > 1:
        kept = [p for p in res.processes if p["path"] not in (None, ".")]
        accesses = sum(int(p["accesses"]) for p in res.processes)
        print(
            f"tierlab trace: {len(res.processes)} processes ({accesses} accesses in all); "
            f"{len(kept)} other with accesses in {out}/processes (tierlab view {out} "
            "--process PID)",
            file=sys.stderr,
        )
    if res.interrupted:
        print("tierlab trace: interrupted; kept what was traced", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK


def _preload_import_modules() -> None:
    """Import the modules the recording step needs (an error shows when the main thread
    imports them again)."""
    import contextlib

    with contextlib.suppress(Exception):
        import tierlab.live.allocs  # noqa: F401


def _cc_main(args: argparse.Namespace, command: list[str]) -> int:
    import shlex
    import shutil
    import tempfile
    import threading

    from tierlab import outdir
    from tierlab._version import VERSION as __version__
    from tierlab.live import cctrace
    from tierlab.recording import check_overwritable

    out: Path = args.out
    if not args.force and check_overwritable(out, True):
        print_error(f"{out}: already exists (use --force to replace it)")
        return EXIT_USAGE
    replacing = check_overwritable(out, args.force)
    if args.instrumented and not command:
        args.parser.error("nothing to trace: give -- CMD [ARGS...]")
    target = outdir.staging_dir(out) if replacing else out
    cflags = shlex.split(args.cflags)
    env: dict[str, str] = {}
    if args.window is not None:
        try:
            cctrace.parse_window(args.window)
        except ValueError as e:
            args.parser.error(f"--window {args.window}: {e}")
        env["TIERLAB_TRACE_WINDOW"] = args.window
    if args.roi:
        env["TIERLAB_TRACE_ROI"] = "1"
    # The import after the run symbolises allocation sites with numpy and pandas, whose
    # imports take 0.5-1 s of CPU: load them now, while the compiler and the program run (the
    # main thread waits for them), not after the program.
    threading.Thread(target=_preload_import_modules, daemon=True).start()
    work = Path(tempfile.mkdtemp(prefix="tierlab-trace-"))
    # The raw files: in memory where it has room (docs/live.md).
    raw_work = Path(tempfile.mkdtemp(prefix="tierlab-raw-", dir=cctrace.raw_tmp_dir()))
    try:
        built: list[str] = []
        if args.cc:
            exe = work / Path(args.cc[0]).stem
            built = cctrace.build(args.cc, exe, cflags, args.compiler)
            argv = [str(exe), *command]
        else:
            argv = command
        raw = args.keep_raw or raw_work / "raw"
        raw.mkdir(parents=True, exist_ok=True)
        res = cctrace.run_traced(argv, raw, env)
        counts = cctrace.import_processes(
            raw,
            target,
            # The program built in a temporary directory is named by its sources.
            rename={
                str(work / Path(args.cc[0]).stem): f"{Path(args.cc[0]).stem} (built from "
                + ", ".join(Path(s).name for s in args.cc)
                + ")",
                str(work): ".",
            }
            if args.cc
            else {str(work): "."},
            overwrite=False,
            source=f"tierlab-trace {__version__} (compiler instrumentation)",
            parameters={
                "tool": "compiler instrumentation (-fsanitize=thread callbacks, tierlab runtime)",
                "target": {"argv": argv if not args.cc else [Path(args.cc[0]).stem, *command]},
                "sources": [Path(s).name for s in args.cc],
                "compiler": built[-1].split()[0] if built else None,
                "compiler_version": cctrace.compiler_version(built[-1].split()[0])
                if built
                else None,
                "cflags": cflags,
                "instrument_flags": cctrace.instrument_flags(built[-1].split()[0])
                if built
                else None,
                "coverage": cctrace.coverage(),
                "window": args.window,
                "roi": args.roi,
                "time": "ns of CLOCK_MONOTONIC since the program started (checkpoints every "
                "4096 accesses of a thread, interpolated in between)",
            },
            accounting={
                "exit_code": res.exit_code,
                "wall_seconds": res.wall_seconds,
                "interrupted": res.interrupted,
            },
        )
        if replacing:
            outdir.install(target, out)  # the old recording goes once the new one is whole
    except cctrace.CcTraceError as e:
        print_error(str(e))
        return EXIT_USAGE
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(raw_work, ignore_errors=True)
        if replacing and target.exists():
            shutil.rmtree(target, ignore_errors=True)
    rate = counts["accesses"] / res.wall_seconds if res.wall_seconds > 0 else 0.0
    print(
        f"tierlab trace: {counts['accesses']} accesses ({counts['loads']} loads, "
        f"{counts['stores']} stores) of {counts['threads']} thread(s) and "
        f"{counts.get('sync_events', 0)} synchronisation events in {res.wall_seconds:.2f} s "
        f"({rate / 1e6:.1f} M accesses/s); target exit status {res.exit_code}; wrote {out}"
        + (
            f" ({counts['processes']} processes, {counts['all_accesses']} accesses in all; the "
            f"others in {out}/{cctrace.PROCESS_DIR}/)"
            if counts.get("processes", 1) > 1
            else ""
        ),
        file=sys.stderr,
    )
    return EXIT_INTERRUPTED if res.interrupted else EXIT_OK
