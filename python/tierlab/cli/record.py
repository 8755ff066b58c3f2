"""``tierlab record -o REC -- CMD [ARGS...]`` (or ``--pid PID``): sample a real program's
memory accesses with perf_event_open into a recording."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tierlab.cli.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, PID, int_in, print_error
from tierlab.live.config import FIELDS, RecordOptions
from tierlab.live.units import format_size, parse_duration_ns, parse_size

#: The command-line option of each recorder field that has one: the option, its metavar and
#: what an error message calls a value. The default, range, choices and help text come from
#: the native recorder's description of the field (``tierlab.live.config.FIELDS``).
RECORDER_OPTIONS: dict[str, tuple[str, str | None, str]] = {
    "backend": ("--backend", None, "a backend"),
    "event": ("--event", "NAME", "an event"),
    "period": ("--period", "R", "a period"),
    "buffer_size": ("--buffer-size", "B", "a size"),
    "ldlat": ("--ldlat", "N", "a latency in cycles"),
    "l3_miss_only": ("--l3-miss-only", None, "a flag"),
    "min_mapping": ("--min-mapping", "SIZE", "a size"),
    "snapshot_interval_ns": ("--maps-interval", "T", "a duration"),
    "flush_interval_ns": ("--flush-interval", "T", "a duration"),
}
#: What `tierlab record` sets (`overhead` and `tier` take a part of it).
RECORD_FIELDS = tuple(RECORDER_OPTIONS)
#: The largest value of the recorder's integer fields (u64).
_U64_MAX = 2**64 - 1


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _duration(text: str) -> int:
    try:
        return parse_duration_ns(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _value_type(name: str) -> Any:
    """The argparse type of an integer field: a size, a duration or a plain integer, in the
    field's range."""
    f = FIELDS[name]
    what = RECORDER_OPTIONS[name][2]
    lo, hi = f["min"], f["max"]
    if lo is None or hi is None:
        raise ValueError(f"recorder field {name}: an integer field without a range")
    if f["unit"] not in ("bytes", "ns"):
        return int_in(lo, hi, what)
    parse = _size if f["unit"] == "bytes" else _duration
    unit = f" {f['unit']}"
    bounds = f"at least {lo}{unit}" if hi >= _U64_MAX else f"from {lo} to {hi}{unit}"

    def parse_in(text: str) -> int:
        v = parse(text)
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text}: expected {what} of {bounds}")
        return v

    parse_in.__name__ = what
    return parse_in


def add_recorder_options(p: argparse.ArgumentParser, names: Sequence[str]) -> None:
    """Add the options of the recorder fields ``names`` to ``p`` (each one's ``dest`` is the
    field's name), with the native recorder's defaults, ranges, choices and descriptions."""
    for name in names:
        f = FIELDS[name]
        flag, metavar, _ = RECORDER_OPTIONS[name]
        text = f["description"].replace("%", "%%")  # argparse formats help with %
        if f["type"] == "bool":
            if f["default"]:
                p.add_argument(
                    flag, dest=name, action=argparse.BooleanOptionalAction, default=True, help=text
                )
            else:
                p.add_argument(flag, dest=name, action="store_true", help=text)
            continue
        default_text = f["default_text"].replace("%", "%%")
        kw: dict[str, Any] = {
            "dest": name,
            "default": f["default"],
            "help": f"{text} (default: {default_text})",
        }
        if f["choices"] is not None:
            kw["choices"] = f["choices"]
        elif f["type"] in ("int", "int | None"):
            kw["type"] = _value_type(name)
        if metavar is not None:
            kw["metavar"] = metavar
        p.add_argument(flag, **kw)


def recorder_options(args: argparse.Namespace, names: Sequence[str]) -> RecordOptions:
    """The recorder configuration of the options ``names`` (the others keep their defaults)."""
    return RecordOptions(**{name: getattr(args, name) for name in names})


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "record",
        usage="%(prog)s [options] -o REC (-- CMD [ARGS...] | --pid PID)\n"
        "       %(prog)s --list-backends",
        help="record a real program's memory accesses (perf_event_open)",
        description="Sample the memory accesses of CMD (launched) or of a running process "
        "(--pid) with Intel PEBS, AMD IBS or, without a PMU, software page faults, and track "
        "its mappings; write a recording (docs/recording.md). Ctrl-C stops recording and keeps "
        "the data; an attached process keeps running.",
    )
    p.add_argument("-o", "--out", type=Path, metavar="REC", help="recording directory to write")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace REC if it is a tierlab recording (anything else is never replaced); the "
        "new recording is written beside it and replaces it when complete",
    )
    p.add_argument("--pid", type=PID, help="attach to this running process instead of CMD")
    add_recorder_options(p, RECORD_FIELDS)
    p.add_argument(
        "--list-backends", action="store_true", help="say which backends this machine supports"
    )
    p.add_argument("--json", action="store_true", help="print the accounting as JSON on stdout")
    p.add_argument(
        "--alloc-sites",
        action="store_true",
        help="also record CMD's allocations (malloc & co., C++ new/delete, mmap) with their "
        "call stacks, through tierlab's LD_PRELOAD interposer: the recording's allocations "
        "table, for `tierlab view`'s per-site table and `tierlab place plan --by site`",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    p.set_defaults(func=main, parser=p)


def backend_text(p: dict) -> str:
    """``page-faults``, or ``intel-pebs mem-loads`` when the event is not the backend's name."""
    backend, event = str(p.get("backend")), str(p.get("event"))
    return backend if event == backend else f"{backend} {event}"


def list_backends() -> int:
    from tierlab import _native

    info = _native.live_backends()
    for name, why in info["backends"].items():
        events = ", ".join(info["events"][name])
        print(f"{name:12s} {'yes' if why is None else 'no'}  events: {events}")
        if why is not None:
            print(f"{'':12s}      {why}")
    print(f"auto -> {info['auto']}")
    return EXIT_OK


def main(args: argparse.Namespace) -> int:
    from tierlab import _native
    from tierlab.live.recorder import record
    from tierlab.recording import check_overwritable

    if args.list_backends:
        return list_backends()
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if args.pid is not None and command:
        args.parser.error("give either --pid PID or -- CMD, not both")
    if args.pid is None and not command:
        args.parser.error("nothing to record: give -- CMD [ARGS...] or --pid PID")
    if args.out is None:
        args.parser.error("-o/--out REC is required")
    if not args.force and check_overwritable(args.out, True):
        print_error(f"{args.out}: already exists (use --force to replace it)")
        return EXIT_USAGE
    check_overwritable(args.out, args.force)
    opts = recorder_options(args, RECORD_FIELDS)
    from tierlab.progress import format_elapsed, interval, start

    target_text = f"pid {args.pid}" if args.pid is not None else " ".join(command)
    if len(target_text) > 60:
        target_text = target_text[:57] + "..."
    start("record", f"starting {target_text} (into {args.out})")
    polls = {"first": True, "last": time.monotonic(), "start": time.monotonic()}

    def on_poll(rec: Any) -> None:
        # Said while the target runs: what is recorded, and every interval how much so far.
        now = time.monotonic()
        if polls["first"]:
            polls["first"] = False
            p = {**dict(rec.parameters()), "buffer_size": opts.buffer_size}
            print(
                f"tierlab record: {backend_text(p)}, period {p['period']}, drain every "
                f"{format_size(p['buffer_size'])} (ring {format_size(p['ring_bytes'])} per CPU "
                f"x {len(p['cpus'])}); recording pid {rec.pid}, Ctrl-C stops",
                file=sys.stderr,
                flush=True,
            )
        elif now - polls["last"] >= interval():
            polls["last"] = now
            print(
                f"tierlab record: {int(rec.stats()['samples']):,} samples so far, "
                f"{format_elapsed(now - polls['start'])} elapsed",
                file=sys.stderr,
                flush=True,
            )

    alloc_dir = None
    saved_env: dict[str, str | None] = {}
    if args.alloc_sites:
        if args.pid is not None:
            args.parser.error("--alloc-sites needs a launched program (-- CMD), not --pid")
        import tempfile

        from tierlab.live import cctrace

        try:
            preload = str(cctrace.preload_object())
        except cctrace.CcTraceError as e:
            print_error(str(e))
            return EXIT_USAGE
        alloc_dir = Path(tempfile.mkdtemp(prefix="tierlab-allocs-"))
        extra = {
            "TIERLAB_ALLOC_DIR": str(alloc_dir),
            "LD_PRELOAD": preload
            + (" " + os.environ["LD_PRELOAD"] if os.environ.get("LD_PRELOAD") else ""),
        }
        for k, v in extra.items():  # the launched program inherits the environment
            saved_env[k] = os.environ.get(k)
            os.environ[k] = v
        # The launched program is the first process (it sets this for the processes it
        # starts, which record into p<PID> directories beside its own).
        saved_env["TIERLAB_ALLOC_ROOT"] = os.environ.pop("TIERLAB_ALLOC_ROOT", None)
    origin = time.monotonic_ns()
    try:
        res = record(
            args.out,
            argv=command or None,
            pid=args.pid,
            options=opts,
            overwrite=args.force,
            on_poll=on_poll,
        )
    except _native.LiveError as e:
        print_error(str(e))
        return EXIT_USAGE
    finally:
        for k, old in saved_env.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old
    if alloc_dir is not None:
        import shutil

        from tierlab.live import allocs

        try:
            if (alloc_dir / "allocs.bin").is_file():
                got = allocs.import_allocs(
                    alloc_dir,
                    args.out,
                    trace_dir=None,
                    origin_ns=int(res.parameters.get("monotonic_origin_ns", origin)),
                )
                print(
                    f"tierlab record: {got['allocation_events']} allocation events at "
                    f"{got['allocation_sites']} call stacks",
                    file=sys.stderr,
                )
        except allocs.AllocError as e:
            print_error(str(e))
            return EXIT_USAGE
        finally:
            shutil.rmtree(alloc_dir, ignore_errors=True)
    a = res.accounting
    p = res.parameters
    if args.json:
        sys.stdout.write(json.dumps({"parameters": p, "accounting": a}, indent=2) + "\n")
    err = sys.stderr
    for note in p.get("auto_notes") or []:
        print(f"tierlab record: auto: {note}", file=err)
    if args.l3_miss_only and p.get("backend") != "amd-ibs":
        print(
            f"tierlab record: note: --l3-miss-only applies to amd-ibs only; the "
            f"{p.get('backend')} backend recorded every sample",
            file=err,
        )
    if polls["first"]:  # the target ended before the first poll
        print(
            f"tierlab record: {backend_text(p)}, period {p['period']}, "
            f"drain every {format_size(p['buffer_size'])} (ring {format_size(p['ring_bytes'])} "
            f"per CPU x {len(p['cpus'])})",
            file=err,
        )
    di = a["drain_intervals"]
    mean = f", mean interval {di['mean_ns'] / 1e6:.2f} ms" if di.get("count") else ""
    print(
        f"tierlab record: {a['samples']} samples from {a['threads']} thread(s), "
        f"{a['drains']} drains{mean}, {a['mapping_events']} mapping events "
        f"(maps snapshots: {a['maps_snapshots']}, max gap "
        f"{a['max_snapshot_gap_ns'] / 1e6:.1f} ms)",
        file=err,
    )
    print(
        f"tierlab record: lost {a['lost']} records in {a['lost_records']} LOST events, "
        f"{a['lost_samples']} samples lost by the PMU, throttled {a['throttled']} times",
        file=err,
    )
    ex = res.exit
    if ex is None:
        target = f"target {res.pid} still running"
    elif ex[0] == "exit":
        target = f"target exited with status {ex[1]}"
    elif ex[0] == "signal":
        target = f"target killed by signal {ex[1]}"
    else:
        target = "target exited"
    print(f"tierlab record: {target}; wrote {args.out}", file=err)
    if res.interrupted:
        print("tierlab record: interrupted; kept what was recorded", file=err)
        return EXIT_INTERRUPTED
    return EXIT_OK
