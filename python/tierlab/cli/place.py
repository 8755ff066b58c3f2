"""``tierlab place plan|apply|show``: live page placement on Linux.

- ``place plan REC -o PLAN``: a page-to-node plan from a recording (node affinity of each
  sampled page, or the hottest pages to a fast node);
- ``place apply --pid PID PLAN``: check the plan against the process's mappings and move its
  pages with ``move_pages(2)``, reporting every page's outcome;
- ``place show --pid PID``: where the process's pages are, per mapping and node.

Exit status of ``apply``: 0 when every page of the plan is where the plan wants it (moved,
already there, or not present so nothing to move) and every plan mapping matched; 1 when some
pages failed, stayed busy or belong to mismatched mappings (the report says which); 2 for an
error that stopped it before any move (bad plan file, no such process, bad option).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from tierlab.cli.common import EXIT_OK, EXIT_USAGE, PID, print_error, stdout_console
from tierlab.live.units import parse_size

#: ``place apply``: the plan was not fully applied (see the report).
EXIT_INCOMPLETE = 1


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _nonneg(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= 0") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= 0")
    if v > 2**31 - 1:
        raise argparse.ArgumentTypeError(f"{text}: too large (at most {2**31 - 1})")
    return v


def _positive(text: str) -> int:
    v = _nonneg(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive integer")
    return v


def _node_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected node numbers such as 0,1") from None
    if not out or any(n < 0 for n in out):
        raise argparse.ArgumentTypeError(f"{text!r}: expected node numbers such as 0,1")
    return out


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "place",
        help="plan, apply and show page placement of a live process (move_pages); plan, "
        "simulate and run allocation-site placement (mbind)",
        description="Live placement on Linux: turn a recording into a page-to-node plan, "
        "apply it to a running process with move_pages(2), and show where a process's pages "
        "are; or plan allocation sites for the fast node (plan --by site), check the plan on "
        "the recording (simulate) and run the program with it (run). See docs/placement.md "
        "(Live placement, Site-based placement).",
    )
    sp = p.add_subparsers(dest="place_command", metavar="ACTION", required=True)

    pp = sp.add_parser(
        "plan",
        help="make a page-to-node plan from a recording",
        description="Each sampled page's affinity is the node whose CPUs sampled it most "
        "(--policy affinity, the profile-guided ccNUMA method); or the hottest pages go to a "
        "fast node up to its capacity (--policy hot-fast). Only mappings still live at the "
        "end of the recording are planned. Writes a JSON plan (docs/formats.md).",
    )
    pp.add_argument("recording", type=Path, metavar="REC", help="recording directory")
    pp.add_argument("-o", "--out", type=Path, metavar="PLAN", required=True, help="plan file")
    pp.add_argument(
        "--force",
        action="store_true",
        help="replace PLAN if it is a placement plan (any other file is never replaced)",
    )
    pp.add_argument(
        "--policy",
        choices=("affinity", "hot-fast"),
        default="affinity",
        help="affinity: each page to the node whose CPUs sampled it most (default); hot-fast: "
        "the hottest pages to --fast-node up to --fast-capacity",
    )
    pp.add_argument(
        "--by",
        choices=("samples", "weight", "site"),
        default="samples",
        help="evidence: number of samples, or their latency weight (PEBS/IBS cycles); site: "
        "plan allocation sites, not pages (a recording with allocations; --fast-capacity, "
        "--fast-node (default 0), --slow-node), for `tierlab place run`",
    )
    pp.add_argument(
        "--nodes",
        type=_node_list,
        metavar="N,N,...",
        help="affinity: allowed target nodes (default: every node of the CPU map)",
    )
    pp.add_argument(
        "--cpu-nodes",
        action="append",
        metavar="NODE=CPUS",
        help="CPU -> node map, e.g. --cpu-nodes 0=0-3,8 --cpu-nodes 1=4-7 (default: the "
        "recording's machine.cpu_nodes, else this machine's /sys/devices/system/node)",
    )
    pp.add_argument("--fast-node", type=_nonneg, metavar="N", help="hot-fast: the fast node")
    pp.add_argument(
        "--fast-capacity", type=_size, metavar="SIZE", help="hot-fast: bytes of the fast node"
    )
    pp.add_argument(
        "--slow-node",
        type=_nonneg,
        metavar="N",
        help="hot-fast: put the other sampled pages here (default: leave them out)",
    )
    pp.add_argument(
        "--min-samples",
        type=_positive,
        default=1,
        metavar="K",
        help="pages with less evidence are left out (affinity) or not promoted (hot-fast)",
    )
    pp.add_argument(
        "--mappings",
        choices=("auto", "live", "history"),
        default="auto",
        help="which mappings to plan: live (mapped when the recording ended: a plan for the "
        "running process), history (every mapping the program had), auto (history when the "
        "recorded program exited, else live)",
    )
    pp.add_argument(
        "--event", metavar="NAME", help="use only samples of this event (samples.event)"
    )
    pp.add_argument(
        "--page-size", type=_size, metavar="SIZE", help="default: the recording's, else 4KiB"
    )
    pp.add_argument("--json", action="store_true", help="print the plan's summary as JSON")
    pp.set_defaults(func=main_plan, parser=pp)

    pr = sp.add_parser(
        "run",
        help="run a program with a --by site plan: the chosen sites' allocations bound to the "
        "fast node (mbind), the rest to the slow node",
        description="Find the plan's fast sites in CMD's executable by source line, run CMD "
        "with tierlab's allocation interposer (LD_PRELOAD, or the one a `tierlab trace --cc` "
        "build links), which mbind()s every allocation of those sites to the fast node and "
        "set_mempolicy()s the rest of the process to the slow node, and report every call from "
        "the interposer's log.",
    )
    pr.add_argument("--plan", type=Path, required=True, metavar="PLAN", help="a --by site plan")
    pr.add_argument("--log", type=Path, metavar="FILE", help="keep the interposer's log here")
    pr.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON on stdout (the program's own stdout goes to stderr)",
    )
    pr.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    pr.set_defaults(func=main_run, parser=pr)

    pm = sp.add_parser(
        "simulate",
        help="apply a --by site plan to a recording's accesses; compare with page placement",
        description="Replay REC's accesses against the plan (an access is fast when its "
        "allocation is a chosen site's) and against the hottest pages that fit the same "
        "capacity; print both fast-tier shares and the plan's prediction.",
    )
    pm.add_argument("--plan", type=Path, required=True, metavar="PLAN", help="a --by site plan")
    pm.add_argument("recording", type=Path, metavar="REC", help="recording directory")
    pm.add_argument(
        "--tiering",
        action="store_true",
        help="also replay REC through the simulator's tiering policies (the tiering-replay "
        "scenario, a fast node of the plan's capacity) and print their fast-tier shares",
    )
    pm.add_argument("--json", action="store_true", help="print the result as JSON")
    pm.set_defaults(func=main_simulate, parser=pm)

    pa = sp.add_parser(
        "apply",
        help="move a process's pages as a plan says (move_pages)",
        description="Check the plan's mappings against /proc/PID/maps (mismatched mappings "
        "are reported and left alone), then move the pages with move_pages(2) in batches, "
        "retrying busy pages, and report every page's outcome: moved, already there, busy, "
        "not present, failed (with errno), mismatch. Only pages listed in the plan are "
        "touched. Exit status: 0 all applied, 1 some pages not applied, 2 error.",
    )
    pa.add_argument("plan", type=Path, metavar="PLAN", help="plan file (tierlab place plan)")
    pa.add_argument("--pid", type=PID, required=True, help="the process to move")
    pa.add_argument(
        "--dry-run", action="store_true", help="query where pages are and say what would move"
    )
    pa.add_argument("--batch", type=_positive, default=1024, metavar="N", help="pages per call")
    pa.add_argument(
        "--retries", type=_nonneg, default=3, metavar="K", help="retries of busy pages (3)"
    )
    pa.add_argument(
        "--move-all",
        action="store_true",
        help="also move pages shared with other processes (MPOL_MF_MOVE_ALL, CAP_SYS_NICE)",
    )
    pa.add_argument(
        "--strict",
        action="store_true",
        help="a plan mapping must still start and end exactly where it did, not just be "
        "covered by a mapping of the same name",
    )
    pa.add_argument("--pages", action="store_true", help="list every page's outcome")
    pa.add_argument("--json", action="store_true", help="print the full report as JSON")
    pa.set_defaults(func=main_apply, parser=pa)

    ps = sp.add_parser(
        "show",
        help="where a process's pages are, per mapping and node",
        description="Query every page of every mapping with move_pages(2) (nodes=NULL) and "
        "count pages per node and pages not present; cross-check with /proc/PID/numa_maps.",
    )
    ps.add_argument("--pid", type=PID, required=True, help="the process")
    ps.add_argument(
        "--min-mapping",
        "--min-size",
        dest="min_size",
        type=_size,
        default=0,
        metavar="SIZE",
        help="list only mappings at least this large (all count in the totals); --min-size "
        "is the old spelling",
    )
    ps.add_argument(
        "--max-pages",
        type=_positive,
        default=1 << 20,
        metavar="N",
        help="count larger mappings from numa_maps instead of page by page (default 1Mi)",
    )
    ps.add_argument("--batch", type=_positive, default=4096, metavar="N", help="pages per call")
    ps.add_argument("--json", action="store_true", help="print the report as JSON")
    ps.set_defaults(func=main_show, parser=ps)


def _size_text(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n} B"


def _fail(message: str) -> int:
    print_error(message)
    return EXIT_USAGE


# -- plan -------------------------------------------------------------------------------------


def _is_plan_file(path: Path) -> bool:
    """A regular file whose first bytes declare the plan format (as ``save`` writes it)."""
    try:
        if not path.is_file() or path.is_symlink():
            return False
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return b'"format": "tierlab-placement-plan"' in head


def main_plan(args: argparse.Namespace) -> int:
    from tierlab.place import PlaceError

    if args.by == "site":
        return _plan_sites(args)
    from tierlab.place.plan import PlanOptions, describe, make_plan, parse_cpu_nodes, save
    from tierlab.recording import Recording

    if args.out.is_dir():
        return _fail(f"{args.out}: is a directory; -o names the plan file to write")
    if os.path.lexists(args.out):
        if not args.force:
            return _fail(f"{args.out}: already exists (use --force to replace it)")
        if not _is_plan_file(args.out):
            return _fail(
                f"{args.out}: exists and is not a placement plan; refusing to replace it "
                "(remove it yourself or choose another -o)"
            )
    try:
        opts = PlanOptions(
            policy=args.policy,
            by=args.by,
            nodes=args.nodes,
            cpu_nodes=parse_cpu_nodes(args.cpu_nodes) if args.cpu_nodes else None,
            fast_node=args.fast_node,
            fast_capacity=args.fast_capacity,
            slow_node=args.slow_node,
            min_samples=args.min_samples,
            event=args.event,
            page_size=args.page_size,
            mappings=args.mappings,
        )
        rec = Recording.open(args.recording)
        plan = make_plan(rec, opts)
        save(plan, args.out)
    except PlaceError as e:
        return _fail(str(e))
    if args.json:
        doc = plan.to_json()
        doc.pop("pages")
        doc["file"] = str(args.out)
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return EXIT_OK
    print(describe(plan))
    if plan.process.get("pid") or plan.process.get("command"):
        cmd = " ".join(plan.process.get("command") or [])
        pid = plan.process.get("pid")
        who = f"pid {pid}" if pid is not None else "no pid (a trace, not a live process)"
        print(f"recorded process: {who}" + (f" `{cmd}`" if cmd else ""))
    print(f"wrote {args.out}")
    return EXIT_OK


def _plan_sites(args: argparse.Namespace) -> int:
    from tierlab.place import PlaceError, sites

    if args.fast_capacity is None:
        return _fail("--by site needs --fast-capacity SIZE (bytes of the fast node)")
    if os.path.lexists(args.out) and not args.force:
        return _fail(f"{args.out}: already exists (use --force to replace it)")
    try:
        plan = sites.make_plan(
            args.recording,
            fast_capacity=args.fast_capacity,
            fast_node=args.fast_node if args.fast_node is not None else 0,
            slow_node=args.slow_node,
        )
    except PlaceError as e:
        return _fail(str(e))
    args.out.write_text(json.dumps(plan, indent=1) + "\n")
    if args.json:
        sys.stdout.write(json.dumps(plan, indent=2) + "\n")
        return EXIT_OK
    p = plan["prediction"]
    print(
        f"site plan: {sum(s['fast'] for s in plan['sites'])} of {len(plan['sites'])} site(s) "
        f"on node {plan['fast_node']} ({_size_text(p['fast_footprint'])} at most live of "
        f"{_size_text(args.fast_capacity)}); predicted fast-tier share "
        f"{100 * p['fast_share']:.2f}% of all accesses "
        f"({100 * p['fast_share_of_allocations']:.2f}% of those in allocations)"
    )
    for s in plan["sites"]:
        print(
            f"  {'fast' if s['fast'] else 'slow':<4} {s['location']:<50} {s['accesses']:>10} "
            f"accesses {_size_text(s['footprint']):>9} {s['accesses_per_byte']:>8.3f}/B"
        )
    print(f"wrote {args.out}")
    return EXIT_OK


def main_run(args: argparse.Namespace) -> int:
    from tierlab.place import PlaceError, sites
    from tierlab.place.numa import errno_name

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    try:
        plan = sites.load_plan(args.plan)
        rep = sites.run(plan, command, args.log, stdout_to_stderr=args.json)
    except PlaceError as e:
        return _fail(str(e))
    if args.json:
        sys.stdout.write(json.dumps(rep.to_json(), indent=2) + "\n")
        return rep.exit_code if rep.exit_code is not None else 1
    out = sys.stderr
    if rep.set_mempolicy is not None:
        smp = rep.set_mempolicy
        print(
            f"place run: set_mempolicy(MPOL_BIND, node {smp['node']}): "
            + ("ok" if smp["rc"] == 0 else f"failed (errno {smp['errno']})"),
            file=out,
        )
    for site, n in sorted(rep.resolved.items()):
        mb = rep.mbind.get(site, {"calls": 0, "bytes": 0, "failed": 0, "errnos": []})
        why = ", ".join(sorted({errno_name(e) for e in mb.get("errnos", [])}))
        print(
            f"place run: site {site}: {n} call instruction(s) in the program; "
            f"{mb['calls']} mbind call(s), {_size_text(mb['bytes'])}, {mb['failed']} failed"
            + (f" ({why})" if why else ""),
            file=out,
        )
    for note in rep.notes:
        print(f"place run: {note}", file=out)
    print(f"place run: interposer log {rep.log}; exit status {rep.exit_code}", file=out)
    return rep.exit_code if rep.exit_code is not None else 1


def main_simulate(args: argparse.Namespace) -> int:
    from tierlab.place import PlaceError, sites
    from tierlab.recording import RecordingError

    try:
        plan = sites.load_plan(args.plan)
        res = sites.simulate(plan, args.recording, tiering=args.tiering)
    except (PlaceError, RecordingError) as e:
        return _fail(str(e))
    if args.json:
        sys.stdout.write(json.dumps(res, indent=2) + "\n")
        return EXIT_OK
    sp, pg = res["site_plan"], res["page_placement"]
    print(
        f"{res['accesses']} accesses: site plan {100 * sp['fast_share']:.2f}% fast (predicted "
        f"{100 * sp['predicted_fast_share']:.2f}%); hottest {pg['pages']} pages "
        f"{100 * pg['fast_share']:.2f}% fast"
    )
    for t in res.get("tiering") or []:
        print(
            f"  tiering {t['policy']:<22} {100 * float(t['fast_share'] or 0):6.2f}% fast, "
            f"{t['migrations']} migrations"
        )
    return EXIT_OK


# -- apply ------------------------------------------------------------------------------------


def _print_apply(report: Any, plan_path: Path, show_pages: bool) -> None:
    from tierlab.place.apply import OUTCOMES

    out = stdout_console(highlight=False)
    cmd = " ".join(report.command) or "?"
    head = "dry run: " if report.dry_run else ""
    out.print(escape(f"{head}plan {plan_path} -> pid {report.pid} ({cmd})"))
    for note in report.notes:
        out.print(escape(f"note: {note}"))
    mt = Table(title="plan mappings", title_justify="left")
    for col in ("id", "range", "name", "pages", "check"):
        mt.add_column(
            col, justify="right" if col in ("id", "pages") else "left", no_wrap=col == "range"
        )
    for c in report.checks:
        m = c.mapping
        mt.add_row(
            str(m.id),
            f"{m.start:#x}-{m.end:#x} ({_size_text(m.length)})",
            escape(m.name or "(derived)"),
            str(c.pages),
            escape(c.reason),
        )
    out.print(mt)
    t = Table(title="outcomes", title_justify="left")
    t.add_column("outcome")
    t.add_column("pages", justify="right")
    counts = report.counts()
    for name in OUTCOMES:
        if name == "would move" and not report.dry_run:
            continue
        t.add_row(name, str(counts[name]))
    t.add_row("total", str(len(report.addr)), style="bold")
    out.print(t)
    fails = report.failures()
    if fails:
        ft = Table(title="failures", title_justify="left")
        ft.add_column("errno")
        ft.add_column("pages", justify="right")
        ft.add_column("meaning")
        for name, f in fails.items():
            ft.add_row(name, str(f["pages"]), escape(f["message"]))
        out.print(ft)
    if show_pages:
        pt = Table(title="pages", title_justify="left")
        for col in ("addr", "mapping", "target", "before", "after", "outcome", "errno"):
            pt.add_column(col)
        for r in report.page_records():
            pt.add_row(
                f"{r['addr']:#x}",
                str(r["mapping"]),
                str(r["target"]),
                "-" if r["before"] is None else str(r["before"]),
                "-" if r["after"] is None else str(r["after"]),
                r["outcome"],
                r.get("errno", ""),
            )
        out.print(pt)
    verdict = (
        "every page is where the plan wants it"
        if report.complete
        else "not every page could be placed (exit status 1)"
    )
    if report.dry_run:
        verdict = (
            "dry run: nothing moved; the plan applies cleanly"
            if report.complete
            else "dry run: nothing moved; some pages would not be placed (exit status 1)"
        )
    out.print(verdict)


def main_apply(args: argparse.Namespace) -> int:
    from tierlab.place import PlaceError
    from tierlab.place.apply import ApplyOptions, apply_plan
    from tierlab.place.plan import load

    try:
        plan = load(args.plan)
        report = apply_plan(
            plan,
            args.pid,
            ApplyOptions(
                dry_run=args.dry_run,
                batch=args.batch,
                retries=args.retries,
                move_all=args.move_all,
                strict=args.strict,
            ),
        )
    except PlaceError as e:
        return _fail(str(e))
    if args.json:
        doc = report.to_json()
        doc["plan"] = str(args.plan)
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        _print_apply(report, args.plan, args.pages)
    return EXIT_OK if report.complete else EXIT_INCOMPLETE


# -- show -------------------------------------------------------------------------------------


def main_show(args: argparse.Namespace) -> int:
    from tierlab.place import PlaceError
    from tierlab.place.show import ShowOptions, show

    try:
        report = show(
            args.pid,
            ShowOptions(batch=args.batch, max_pages=args.max_pages, min_size=args.min_size),
        )
    except PlaceError as e:
        return _fail(str(e))
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
        return EXIT_OK
    out = stdout_console(highlight=False)
    out.print(escape(f"pid {report.pid} ({' '.join(report.command) or '?'})"))
    for note in report.notes:
        out.print(escape(f"note: {note}"))
    nodes = report.nodes()
    t = Table()
    t.add_column("mapping", no_wrap=True)
    t.add_column("size", justify="right", no_wrap=True)
    t.add_column("perms")
    t.add_column("name", overflow="fold")
    t.add_column("pages", justify="right")
    for n in nodes:
        t.add_column(f"node {n}", justify="right")
    t.add_column("not present", justify="right")
    t.add_column("numa_maps")
    for m in report.shown():
        v = m.vma
        if m.method == "numa_maps":
            check = "source"
        elif m.agree is None:
            check = "-"
        elif m.agree:
            check = "agrees"
        else:
            nm = m.numa_maps or {}
            check = "differs: " + (
                ", ".join(f"N{k}={c}" for k, c in sorted(nm.items())) or "no pages"
            )
        extra = "".join(f" {k}={c}" for k, c in m.errors.items())
        t.add_row(
            f"{v.start:#x}",
            _size_text(v.length),
            v.perms,
            escape(v.name),
            str(m.pages),
            *[str(m.nodes.get(n, 0)) for n in nodes],
            str(m.not_present) + extra,
            check,
        )
    tot = report.totals()
    t.add_row(
        "total",
        "",
        "",
        f"{tot['mappings']} mappings",
        str(tot["pages"]),
        *[str(tot["nodes"].get(str(n), 0)) for n in nodes],
        str(tot["not_present"]),
        f"{tot['disagree']} differ" if report.numa_maps else "-",
        style="bold",
    )
    out.print(t)
    hidden = len(report.mappings) - len(report.shown())
    if hidden:
        out.print(f"{hidden} mapping(s) smaller than --min-mapping not listed (counted in total)")
    return EXIT_OK
