"""``tierlab view REC``: per mapping, a heatmap (sample sets or time x page blocks), the
histogram of pages by samples, pages touched; the distribution of time between drains."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierlab.cli.common import EXIT_OK, int_in, out_default
from tierlab.live.units import human_size as _size_text
from tierlab.live.units import parse_size

if TYPE_CHECKING:
    from tierlab.view.analysis import View


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive integer")
    return v


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "view",
        help="plot a recording per mapping (heatmaps, histograms, drain intervals)",
        description="Assign every sample to the mapping live at its time and draw, per "
        "mapping, a heatmap (x: sample set = drain, or time bins; y: page blocks), the "
        "histogram of pages by number of samples, and pages touched; plus the distribution of "
        "time between drains. Writes a self-contained index.html (interactive, with a static "
        "picture of every plot for viewers without scripts) and view.json; --images adds "
        "every figure as PNG and SVG.",
    )
    p.add_argument("recording", type=Path, metavar="REC", help="recording directory")
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        metavar="DIR",
        help=f"output directory ({out_default('REC', 'view')}, beside the recording); "
        "replaced as a "
        "whole if it holds an earlier view, refused if it holds anything else",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the numbers as JSON on stdout (draws nothing unless -o is given)",
    )
    p.add_argument(
        "--images",
        action="store_true",
        help="also write every figure as PNG and SVG files (matplotlib; the page alone is "
        "much faster to write)",
    )
    p.add_argument(
        "--group",
        type=int_in(1, 2**40, "a number of pages"),
        default=4,
        metavar="G",
        help="pages per heatmap row (default 4; raised for a mapping that would need more "
        "than 512 rows)",
    )
    p.add_argument(
        "--x",
        choices=("auto", "drain", "time"),
        default="auto",
        help="heatmap columns: one per drain (sample set), or time bins (auto: drains if any)",
    )
    p.add_argument(
        "--bins",
        type=int_in(1, 10_000, "a number of bins"),
        default=100,
        metavar="N",
        help="time bins (--x time; default 100, at most 10000)",
    )
    p.add_argument(
        "--max-mappings",
        type=int_in(1, 1_000_000, "a number of mappings"),
        default=12,
        metavar="N",
        help="plot the N mappings with most samples (default 12)",
    )
    p.add_argument(
        "--min-mapping",
        type=_size,
        default=0,
        metavar="SIZE",
        help="ignore mappings smaller than SIZE (default 0: every mapping; those under 4MiB "
        "are marked small)",
    )
    p.add_argument(
        "--no-symbols",
        action="store_true",
        help="do not resolve sample IPs to symbols (the per-symbol table)",
    )
    p.add_argument(
        "--top-symbols",
        type=int_in(1, 1_000_000, "a number of symbols"),
        default=20,
        metavar="N",
        help="list the N symbols with most samples (default 20)",
    )
    p.add_argument(
        "--site-depth",
        type=int_in(1, 8, "a number of frames"),
        default=1,
        metavar="N",
        help="allocation sites: group call stacks by their N innermost frames (default 1: the "
        "line that called the allocator)",
    )
    p.add_argument(
        "--phases",
        type=int_in(1, 1000, "a number of phases"),
        default=4,
        metavar="N",
        help="allocation sites: accesses per site in N equal spans of the recording's time "
        "(default 4)",
    )
    p.add_argument(
        "--process",
        type=_process_arg,
        metavar="PID[-N]",
        help="a recording of several processes (tierlab trace --cc of a program that forks or "
        "execs, trace --follow-children): view process PID's own recording (default: the "
        "first process, with the table of all of them); PID-N: the program PID ran after its "
        "(N-1)th exec",
    )
    p.add_argument(
        "--plan",
        type=Path,
        metavar="PLAN",
        help="a placement plan of this recording's pages (tierlab place plan): each heatmap "
        "gets a strip along its address axis showing the node the plan puts each block on",
    )
    p.set_defaults(func=main, parser=p)


def _process_arg(text: str) -> tuple[int, int]:
    """``PID`` or ``PID-N`` (N >= 2): the process and which of its programs (1: the first)."""
    pid, _, nth = text.partition("-")
    try:
        value = (int(pid), int(nth) if nth else 1)
    except ValueError:
        value = (0, 0)
    if not (1 <= value[0] < 2**31 and 1 <= value[1] < 1000) or (nth and value[1] < 2):
        raise argparse.ArgumentTypeError(f"{text!r}: not a process id (PID or PID-N, N >= 2)")
    return value


def _process_recording(args: argparse.Namespace) -> Path:
    """The recording of ``--process PID`` (``meta.json``'s ``processes``); exits with a usage
    error naming the processes there are."""
    from tierlab.recording import Recording

    parser: argparse.ArgumentParser = args.parser
    top = Recording.open(args.recording)
    procs = [p for p in top.meta.get("processes") or [] if isinstance(p, dict)]
    pid, nth = args.process
    name = f"{pid}" if nth == 1 else f"{pid}-{nth}"
    same = [p for p in procs if p.get("pid") == pid]
    if len(same) >= nth:
        p = same[nth - 1]
        if p.get("path") is None:
            parser.error(f"--process {name}: it recorded no access")
        return Path(args.recording) / str(p["path"])
    seen: dict[object, int] = {}
    names = []
    for p in procs:
        seen[p.get("pid")] = seen.get(p.get("pid"), 0) + 1
        k = seen[p.get("pid")]
        names.append(f"{p.get('pid')}" if k == 1 else f"{p.get('pid')}-{k}")
    known = ", ".join(names) or "none listed"
    parser.error(f"--process {name}: not a process of {args.recording} (processes: {known})")


def plan_tiers(plan: Any) -> tuple[list[tuple[int, int, int]], list[tuple[str, int | None]]]:
    """Where a placement plan puts the pages: ``(start, end, index)`` page ranges and each
    node's ``(name, tier)`` (a plan names nodes by number and knows no tiers)."""
    nodes = sorted({int(n) for n in plan.target.tolist()} | set(plan.nodes))
    index = {n: i for i, n in enumerate(nodes)}
    size = int(plan.page_size)
    ranges = [
        (int(a), int(a) + size, index[int(n)])
        for a, n in zip(plan.addr.tolist(), plan.target.tolist(), strict=True)
    ]
    return ranges, [(f"node {n}", None) for n in nodes]


def processes_text(meta: dict) -> list[str]:
    """The table of a multi-process recording's processes (``meta.json``'s ``processes``)."""
    procs = [p for p in meta.get("processes") or [] if isinstance(p, dict)]
    if len(procs) < 2:
        return []
    total = sum(int(p.get("accesses") or 0) for p in procs) or 1
    lines = [f"processes: {len(procs)}, {total} accesses in all"]
    for p in procs:
        acc = int(p.get("accesses") or 0)
        where = "this recording" if p.get("path") == "." else (p.get("path") or "no accesses")
        start = p.get("start_ns")
        at = "" if start is None else f" at {int(start) / 1e9:.3f} s"
        lines.append(
            f"  pid {p.get('pid')} (parent {p.get('parent')}, {p.get('how')}{at}) "
            f"{Path(str(p.get('exe') or '')).name}: "
            f"{acc} accesses ({100 * acc / total:.1f}%), {p.get('threads')} thread(s); {where}"
        )
    return lines


def main(args: argparse.Namespace) -> int:
    from tierlab.recording import Recording

    if args.process is not None:
        sub = _process_recording(args)
        if args.out is None and not args.json:
            args.out = default_out(args.recording).with_name(
                f"{args.recording.name}.{sub.name}.view"
            )
        args.recording = sub
    rec = Recording.open(args.recording)  # a missing or malformed recording fails here, light
    if not rec.meta.get("complete", False):
        # Said first (on stderr, so --json stays clean): what follows is what was written.
        print(
            f"tierlab: note: {args.recording} is incomplete (complete: false): its recorder "
            "stopped early or was killed; this view shows what it wrote",
            file=sys.stderr,
        )
    out = args.out
    if out is None and not args.json:
        out = default_out(args.recording)
    if out is not None:
        # Refused before the analysis, not after it.
        from tierlab import outdir

        outdir.check_replaceable(out, ("view",), outdir.OutputError)

    from tierlab.view.analysis import ViewOptions, analyze

    opts = ViewOptions(
        group=args.group,
        x=args.x,
        bins=args.bins,
        max_mappings=args.max_mappings,
        min_mapping=args.min_mapping,
        symbols=not args.no_symbols,
        top_symbols=args.top_symbols,
    )
    view = analyze(rec, opts)
    if args.plan is not None:
        from tierlab.place import PlaceError
        from tierlab.place.plan import load

        try:
            plan = load(args.plan)
        except PlaceError as e:
            print(f"tierlab view: {e}", file=sys.stderr)
            return 2
        view.tiers = plan_tiers(plan)
    from tierlab.view import sites as site_view

    site_report = site_view.analyze(rec, depth=args.site_depth, phases=args.phases)
    view.sites = site_report
    if out is not None:
        from tierlab.view.render import write

        written = write(view, out, images=args.images)
        if site_report is not None:
            (out / "sites.json").write_text(json.dumps(site_report.to_json(), indent=2) + "\n")
            written.append(out / "sites.json")
    from tierlab.tier import log as tier_log

    tier = tier_log.summary(rec.path, rec.meta)
    if out is not None and tier is not None:
        png = tier_log.plot(rec.path, out, rec.meta)
        if png is not None:
            if args.images:
                written.append(png)
                src = png.name
            else:
                # One file: the picture goes into the page.
                import base64

                src = "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()
                png.unlink()
            _link_in_index(out / "index.html", src, tier_log.describe(tier))
    procs = processes_text(rec.meta)
    if out is not None and procs:
        _section_in_index(out / "index.html", "processes", "Processes", "\n".join(procs))
    if args.json:
        data = view.to_json()
        if procs:
            data["processes"] = rec.meta.get("processes")
        if tier is not None:
            data["tier"] = tier
        if site_report is not None:
            data["sites"] = site_report.to_json()
        coverage = _coverage(rec.meta)
        if coverage is not None:
            data["coverage"] = coverage
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return EXIT_OK
    t = view.totals
    small = f", {t['small_mappings']} small (< 4 MiB)" if t.get("small_mappings") else ""
    print(
        f"{view.points}: {t[view.points]} ({t['assigned']} in {t['mappings_with_points']} "
        f"mapping(s), {t['unassigned']} in none); mappings: {t['mappings']}{small}; "
        f"drains: {t['drains']}; lost: {t['lost']}; throttled: {t['throttled']}"
    )
    if t.get("memory_levels"):
        n = sum(t["memory_levels"].values())
        print(
            "memory levels (data_src): "
            + ", ".join(f"{k} {c} ({100 * c / n:.1f}%)" for k, c in t["memory_levels"].items())
        )
    for v in view.mappings:
        m = v.mapping
        name = m.name or "(unnamed)"
        huge = (
            f" ({v.huge_pages_touched} in {_size_text(v.page_size)} pages)"
            if v.huge_pages_touched
            else ""
        )
        print(
            f"  #{m.id} {name} @ {m.start:#x} {_size_text(m.length)}"
            f"{' (small)' if v.small else ''}: {v.samples} {view.points}, "
            f"{_size_text(v.bytes_touched)} of {_size_text(m.length)} touched{huge}, "
            f"{v.threads} thread(s)"
        )
    if view.symbols is not None:
        _print_symbols(view)
    if site_report is not None:
        _print_sites(site_report)
    _print_coverage(rec.meta)
    if tier is not None:
        print(tier_log.describe(tier))
    for line in procs:
        print(line)
    if procs:
        print("  (tierlab view REC --process PID: one process's own view; PID-N: after its exec)")
    print(f"wrote {len(written)} files to {out} (open {out / 'index.html'})")
    return EXIT_OK


def default_out(recording: Path) -> Path:
    """``REC.view`` beside the recording; ``.`` or ``..`` (a recording named by where it is
    from inside) is made absolute first, so the view lands beside the recording, not inside
    it."""
    if recording.name in ("", ".", ".."):
        recording = Path(os.path.abspath(recording))
    return recording.with_name(recording.name + ".view")


def _coverage(meta: dict[str, Any]) -> dict[str, Any] | None:
    cov = (meta.get("parameters") or {}).get("coverage")
    if not isinstance(cov, dict):
        return None
    params = meta.get("parameters") or {}
    return {
        "compiler": params.get("compiler_version") or params.get("compiler"),
        "instrument_flags": params.get("instrument_flags"),
        "cflags": params.get("cflags"),
        **cov,
    }


def _print_coverage(meta: dict[str, Any]) -> None:
    """What the recording covers and what not (a trace's ``parameters.coverage``)."""
    cov = _coverage(meta)
    if cov is None:
        return
    flags = " ".join([*(cov.get("cflags") or []), *(cov.get("instrument_flags") or [])])
    print(f"coverage: built with {cov.get('compiler') or '?'} ({flags})")
    for c in cov.get("covered", []):
        print(f"  recorded: {c}")
    for c in cov.get("not_covered", []):
        print(f"  not recorded: {c}")


def _print_sites(rep: Any) -> None:
    """The per-site table: where the touched memory was allocated."""
    share = 100 * rep.in_allocations / rep.accesses if rep.accesses else 0.0
    print(
        f"allocation sites: {rep.in_allocations} of {rep.accesses} {rep.points} ({share:.1f}%) "
        f"in allocations, {len(rep.rows)} site(s); hot pages: the {rep.hot_pages} hottest "
        f"taking {100 * rep.hot_fraction:.0f}% of all {rep.points}"
    )
    width = min(60, max([len(r.location) for r in rep.rows] + [4]))
    print(
        f"  {'site':<{width}} {'allocs':>6} {'allocated':>10} {'peak':>10} {'touched':>10} "
        f"{'accesses':>10} {'acc/B':>8} {'hot':>6}  phases"
    )
    for r in rep.rows:
        loc = r.location if len(r.location) <= width else "..." + r.location[-(width - 3) :]
        ph = " ".join(f"{100 * p / r.accesses:.0f}" if r.accesses else "-" for p in r.phases)
        print(
            f"  {loc:<{width}} {r.allocations:>6} {_size_text(r.bytes_allocated):>10} "
            f"{_size_text(r.peak_bytes):>10} {_size_text(r.bytes_touched):>10} {r.accesses:>10} "
            f"{r.accesses_per_byte:>8.2f} {100 * r.hot_share:>5.1f}%  {ph}"
        )
        for caller in r.stack[1:]:
            print(f"  {'':<{width}}   < {caller}")
    for note in rep.notes:
        print(f"sites: {note}")


def _print_symbols(view: View) -> None:
    """The per-symbol table, as ``perf mem report --sort=sym,mem`` lists it."""
    from tierlab.view.datasrc import ORDER

    rows = view.symbols or []
    st = view.totals.get("symbols", {})
    print(
        f"symbols: {st.get('samples_in_symbols', 0)} of {st.get('samples_with_ip', 0)} "
        f"samples with an IP in {st.get('distinct_symbols', 0)} symbol(s); top {len(rows)}:"
    )
    levels = [k for k in ORDER if any(k in r.levels for r in rows)]
    width = min(48, max([len(r.symbol) for r in rows] + [6]))
    objs = [Path(r.obj).name if r.obj.startswith("/") else r.obj for r in rows]
    owidth = min(32, max([len(o) for o in objs] + [6]))
    lw = [max(6, len(k)) for k in levels]
    head = f"  {'share':>6} {view.points:>9}  {'symbol':<{width}}  {'object':<{owidth}}"
    print((head + "".join(f"  {k:>{w}}" for k, w in zip(levels, lw, strict=True))).rstrip())
    for r, obj in zip(rows, objs, strict=True):
        sym = r.symbol if len(r.symbol) <= width else r.symbol[: width - 3] + "..."
        obj = obj if len(obj) <= owidth else obj[: owidth - 3] + "..."
        print(
            (
                f"  {100 * r.share:5.1f}% {r.samples:>9}  {sym:<{width}}  {obj:<{owidth}}"
                + "".join(f"  {r.levels.get(k, 0):>{w}}" for k, w in zip(levels, lw, strict=True))
            ).rstrip()
        )
        if r.data:
            print(" " * 20 + "data: " + ", ".join(f"{n} {c}" for n, c in r.data))
    for note in view.symbol_notes:
        print(f"symbols: {note}")


def _link_in_index(index: Path, png: str, text: str) -> None:
    """Show the tiering decision log's picture (``tierlab tier``) in the view's HTML page."""
    import html

    try:
        page = index.read_text()
    except OSError:
        return
    section = (
        f'<section id="tier"><h2>Tiering decisions (tierlab tier)</h2>'
        f'<pre>{html.escape(text)}</pre><img src="{html.escape(png)}" '
        f'alt="promotions and demotions over time" style="max-width:100%"></section>'
    )
    if "</body>" in page:
        page = page.replace("</body>", section + "</body>", 1)
    else:
        page += section
    index.write_text(page)


def _section_in_index(index: Path, ident: str, title: str, text: str) -> None:
    """A section of preformatted text at the end of the view's HTML page."""
    import html

    try:
        page = index.read_text()
    except OSError:
        return
    section = f'<section id="{ident}"><h2>{title}</h2><pre>{html.escape(text)}</pre></section>'
    if "</body>" in page:
        page = page.replace("</body>", section + "</body>", 1)
    else:
        page += section
    index.write_text(page)
