"""``tierlab record -o REC -- CMD [ARGS...]`` (or ``--pid PID``): sample a real program's
memory accesses with perf_event_open into a recording."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tierlab.cli.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, PID, int_in, print_error
from tierlab.live.units import format_size, parse_duration_ns, parse_size

BACKENDS = ("auto", "intel-pebs", "amd-ibs", "page-faults")
#: The reset value (perf's sample_period, a u64; kept to what every kernel takes).
PERIOD = int_in(1, 2**63 - 1, "a period")
#: The load latency threshold (config1 bits 0-15).
LDLAT = int_in(0, 0xFFFF, "a latency in cycles")


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


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "record",
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
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="sample source (default auto: the first of intel-pebs, amd-ibs, page-faults this "
        "machine supports)",
    )
    p.add_argument(
        "--event",
        help="event of the backend: intel-pebs mem-loads (default), all-loads, all-stores; "
        "amd-ibs ibs-op; page-faults page-faults",
    )
    p.add_argument(
        "--period",
        type=PERIOD,
        metavar="R",
        help="reset value: one sample every R events (default: intel-pebs 100, amd-ibs 4096, "
        "page-faults 1)",
    )
    p.add_argument(
        "--buffer-size",
        type=_size,
        default=64 << 10,
        metavar="B",
        help="bytes of records per drain (the wake-up watermark: the drain rate); the ring "
        "buffer of each CPU holds at least 2*B (default 64KiB)",
    )
    p.add_argument(
        "--ldlat",
        type=LDLAT,
        default=30,
        metavar="N",
        help="mem-loads latency threshold (cycles; default 30)",
    )
    p.add_argument("--l3-miss-only", action="store_true", help="amd-ibs: only ops missing L3")
    p.add_argument(
        "--min-mapping",
        type=_size,
        default=0,
        metavar="SIZE",
        help="keep only mappings at least this large (default 0: every mapping; the McKernel "
        "driver kept 4MiB and more)",
    )
    p.add_argument(
        "--maps-interval",
        type=_duration,
        default=20_000_000,
        metavar="T",
        help="longest time between /proc/PID/maps snapshots, which date unmaps (default 20ms)",
    )
    p.add_argument(
        "--flush-interval",
        type=_duration,
        default=500_000_000,
        metavar="T",
        help="write a chunk at least this often (default 0.5s: at most that is lost on SIGKILL)",
    )
    p.add_argument(
        "--list-backends", action="store_true", help="say which backends this machine supports"
    )
    p.add_argument("--json", action="store_true", help="print the accounting as JSON on stdout")
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
    from tierlab.live.recorder import RecordOptions, record
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
    opts = RecordOptions(
        backend=args.backend,
        event=args.event,
        period=args.period,
        buffer_size=args.buffer_size,
        ldlat=args.ldlat,
        l3_miss_only=args.l3_miss_only,
        min_mapping=args.min_mapping,
        snapshot_interval_ns=args.maps_interval,
        flush_interval_s=args.flush_interval / 1e9,
    )
    try:
        res = record(
            args.out,
            argv=command or None,
            pid=args.pid,
            options=opts,
            overwrite=args.force,
        )
    except _native.LiveError as e:
        print_error(str(e))
        return EXIT_USAGE
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
