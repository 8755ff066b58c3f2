"""``tierlab tier [options] (--pid PID | -- CMD [ARGS...])``: a live tiering loop.

Samples the target (PEBS/IBS where present, else page faults), decides with the simulator's
``hottest-first`` decision core, moves pages between ``--fast-node`` and ``--slow-node`` with
``move_pages(2)`` in rate-limited batches, and writes a recording with a decision log
(``tierlab view REC`` shows it). Ctrl-C stops it within one batch. See docs/placement.md
(Live tiering loop).

Exit status: 0 when the loop ended because the target exited or ``--duration`` passed, 130
after Ctrl-C, 2 for an error that stopped it (missing node, bad option, no such process).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tierlab.cli.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, PID, print_error
from tierlab.cli.record import add_recorder_options, recorder_options
from tierlab.live.units import human_size, parse_duration_ns, parse_size

#: The recorder's options `tier` takes (as `tierlab record`).
TIER_FIELDS = ("backend", "event", "period")

#: Said with every run on page-fault telemetry (no PMU): its samples are first touches.
PAGE_FAULT_NOTE = (
    "page-fault telemetry samples a page when it faults (its first touch, or again after it "
    "is unmapped or moved), about once per page: the {policy} policy's ranking of pages by "
    "samples carries no information on which pages are hot, only on which were touched and "
    "when. Use --backend intel-pebs or amd-ibs where the machine has a PMU"
)


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _seconds(text: str) -> float:
    try:
        ns = parse_duration_ns(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if ns <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be > 0")
    return ns / 1e9


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number > 0") from None
    if not v > 0 or v != v or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number > 0")
    return v


def _count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive integer") from None
    if not 1 <= v <= 2**31 - 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive integer")
    return v


def _node(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a node number") from None
    if not 0 <= v < 1 << 16:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a node number")
    return v


def _policy(text: str) -> str:
    if text in ("hottest-first", "memtis"):
        return text
    path, sep, cls = text.rpartition(":")
    if not sep or not path.endswith(".py") or not cls.isidentifier():
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected hottest-first, memtis or FILE.py:Class"
        )
    return text


def _params(items: list[str]) -> dict[str, object]:
    """``KEY=VALUE`` (a TOML value; a bare word is a string) -> {key: value}."""
    import tomllib

    out: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ValueError(f"--set {item}: expected KEY=VALUE")
        try:
            out[key] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            out[key] = value
    return out


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tier",
        help="run a tiering policy on a live process (sample, decide, move_pages)",
        description="A live tiering loop: sample CMD (launched) or process PID, decide with the "
        "simulator's policy code (hottest-first or memtis) which pages belong on the fast "
        "node, move them "
        "with move_pages(2) in rate-limited batches (never outside the target's current "
        "mappings), and write a recording with the decision log. Ctrl-C stops it within one "
        "batch. See docs/placement.md (Live tiering loop).",
    )
    p.add_argument(
        "-o", "--out", type=Path, metavar="REC", required=True, help="recording to write"
    )
    p.add_argument("--force", action="store_true", help="replace REC if it exists")
    p.add_argument("--pid", type=PID, help="attach to this running process instead of CMD")
    p.add_argument("--fast-node", type=_node, default=0, metavar="N", help="fast node (default 0)")
    p.add_argument("--slow-node", type=_node, default=1, metavar="N", help="slow node (default 1)")
    p.add_argument(
        "--interval",
        type=_seconds,
        default=0.2,
        metavar="T",
        help="time per step: sample, decide, move (default 200ms)",
    )
    p.add_argument(
        "--rate-limit-mbps",
        type=_positive_float,
        default=2048.0,
        metavar="MBPS",
        help="migration limit in MB/s (10^6 bytes; default 2048, hottest-first's)",
    )
    p.add_argument(
        "--batch-pages",
        type=_count,
        default=512,
        metavar="N",
        help="most pages per move_pages call (default 512)",
    )
    p.add_argument(
        "--batch-time-cap",
        type=_seconds,
        default=0.01,
        metavar="T",
        help="per-batch time cap: a first batch is at most what the rate limit moves in T, and "
        "a batch taking longer halves the next (default 10ms)",
    )
    p.add_argument(
        "--fast-capacity",
        type=_size,
        metavar="SIZE",
        help="bytes of the fast node the target may fill (default: its free memory at start)",
    )
    p.add_argument(
        "--fill",
        type=_positive_float,
        default=0.95,
        metavar="F",
        help="fraction of the capacity the plan fills (default 0.95)",
    )
    p.add_argument(
        "--policy",
        type=_policy,
        default="hottest-first",
        metavar="POLICY",
        help="the simulator's policy whose decision code decides: hottest-first (default), "
        "memtis, or FILE.py:Class, a Python tiering policy (tierlab.agents.TieringPolicy; "
        'the class a scenario names with kind = "python")',
    )
    p.add_argument(
        "--set",
        dest="params",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a parameter of the Python policy (as in a scenario: --set fill=0.9 --set "
        "interval='\"50ms\"'); repeatable",
    )
    p.add_argument(
        "--min-samples",
        type=_count,
        default=1,
        metavar="N",
        help="hottest-first: samples a page needs (1)",
    )
    p.add_argument(
        "--cooling-samples",
        type=_count,
        default=2_000_000,
        metavar="N",
        help="memtis: samples between two coolings (default 2000000, Memtis')",
    )
    p.add_argument(
        "--sample-decay",
        type=_seconds,
        default=1.0,
        metavar="T",
        help="hottest-first: sample counts halve every T (default 1s)",
    )
    p.add_argument("--duration", type=_seconds, metavar="T", help="stop after T")
    p.add_argument("--dry-run", action="store_true", help="decide and log, move nothing")
    p.add_argument(
        "--no-freeze",
        dest="freeze",
        action="store_false",
        help="do not stop the target around each batch (SIGSTOP from reading its mappings to "
        "the move_pages call, then SIGCONT); without it, a page the target unmaps in that "
        "instant can be passed to move_pages",
    )
    add_recorder_options(p, TIER_FIELDS)
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    p.set_defaults(func=main, parser=p)


def main(args: argparse.Namespace) -> int:
    from tierlab import _native
    from tierlab.recording import check_overwritable
    from tierlab.tier import TierError
    from tierlab.tier.loop import TierOptions, tier

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if args.pid is not None and command:
        args.parser.error("give either --pid PID or -- CMD, not both")
    if args.pid is None and not command:
        args.parser.error("nothing to tier: give -- CMD [ARGS...] or --pid PID")
    if args.out is None:
        args.parser.error("-o/--out REC is required (the decision log is written there)")
    if args.fill > 1:
        args.parser.error(f"--fill {args.fill}: must be in (0, 1]")
    if not args.force and check_overwritable(args.out, True):
        print_error(f"{args.out}: already exists (use --force to replace it)")
        return EXIT_USAGE
    check_overwritable(args.out, args.force)
    try:
        params = _params(args.params)
    except ValueError as e:
        args.parser.error(str(e))
    if params and args.policy in ("hottest-first", "memtis"):
        args.parser.error("--set is for a Python policy (--policy FILE.py:Class)")
    opts = TierOptions(
        fast_node=args.fast_node,
        slow_node=args.slow_node,
        interval_s=args.interval,
        rate_limit_mbps=args.rate_limit_mbps,
        batch_pages=args.batch_pages,
        batch_time_cap_ms=args.batch_time_cap * 1e3,
        fast_capacity=args.fast_capacity,
        fill=args.fill,
        policy=args.policy if args.policy in ("hottest-first", "memtis") else "python",
        python_policy=None if args.policy in ("hottest-first", "memtis") else args.policy,
        python_params=params,
        min_samples=args.min_samples,
        cooling_samples=args.cooling_samples,
        sample_decay_s=args.sample_decay,
        dry_run=args.dry_run,
        freeze=args.freeze,
        duration_s=args.duration,
    )
    if opts.policy == "python":
        from tierlab.agents import live

        try:
            # The class and its parameters are checked before the target starts.
            live.load(str(opts.python_policy), params, {"rate_limit_mbps": opts.rate_limit_mbps})
        except TierError as e:
            print_error(str(e))
            return EXIT_USAGE
    ropts = recorder_options(args, TIER_FIELDS)
    try:
        res, params = tier(
            args.out,
            opts,
            argv=command or None,
            pid=args.pid,
            record=ropts,
            overwrite=args.force,
        )
    except (_native.LiveError, TierError) as e:
        print_error(str(e))
        return EXIT_USAGE
    backend = str(params.get("backend"))
    event = str(params.get("event"))
    if backend == "page-faults" and opts.policy != "python":
        res.notes.append(PAGE_FAULT_NOTE.format(policy=opts.policy))
    if args.json:
        sys.stdout.write(json.dumps(res.to_json(), indent=2) + "\n")
    err = sys.stderr
    for note in res.notes:
        print(f"tierlab tier: note: {note}", file=err)
    print(
        f"tierlab tier: {backend if backend == event else f'{backend} {event}'} telemetry, "
        f"{res.samples} samples; policy {opts.python_policy or opts.policy}; nodes fast "
        f"{opts.fast_node} / slow "
        f"{opts.slow_node}, fast capacity {human_size(res.fast_capacity)}"
        f"{' (dry run)' if opts.dry_run else ''}",
        file=err,
    )

    def outcomes(action: str) -> str:
        o = res.outcomes[action]
        return ", ".join(f"{k} {v}" for k, v in sorted(o.items())) or "none"

    print(
        f"tierlab tier: {res.steps} steps, decided {res.decided['promote']} promotions and "
        f"{res.decided['demote']} demotions; {res.batches} batches ({res.move_calls} "
        f"move_pages calls, {res.query_calls} queries); {res.dropped_unmapped} pages dropped "
        "as no longer mapped",
        file=err,
    )
    print(
        f"tierlab tier: promotions: {outcomes('promote')}; demotions: {outcomes('demote')}",
        file=err,
    )
    ex = res.exit
    if ex is not None:
        target = f"target {ex[0]} {ex[1]}"
    elif res.stop_reason == "target exited":
        target = "target gone"
    else:
        target = "target still running"
    print(f"tierlab tier: stopped ({res.stop_reason}); {target}; wrote {args.out}", file=err)
    if res.stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK
