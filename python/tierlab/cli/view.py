"""``tierlab view REC``: per mapping, a heatmap (sample sets or time x page blocks), the
histogram of pages by samples, pages touched; the distribution of time between drains."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tierlab.cli.common import EXIT_OK
from tierlab.live.units import parse_size


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
        "time between drains. Writes PNG, SVG, view.json and a self-contained index.html.",
    )
    p.add_argument("recording", type=Path, metavar="REC", help="recording directory")
    p.add_argument(
        "-o", "--out", type=Path, metavar="DIR", help="output directory (default: REC.view)"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the numbers as JSON on stdout (draws nothing unless -o is given)",
    )
    p.add_argument(
        "--group", type=_positive, default=4, metavar="G", help="pages per heatmap row (4)"
    )
    p.add_argument(
        "--x",
        choices=("auto", "drain", "time"),
        default="auto",
        help="heatmap columns: one per drain (sample set), or time bins (auto: drains if any)",
    )
    p.add_argument("--bins", type=_positive, default=100, help="time bins (--x time)")
    p.add_argument(
        "--max-mappings", type=_positive, default=12, help="plot the N mappings with most samples"
    )
    p.add_argument(
        "--min-mapping", type=_size, default=0, metavar="SIZE", help="ignore smaller mappings"
    )
    p.set_defaults(func=main, parser=p)


def main(args: argparse.Namespace) -> int:
    from tierlab.recording import Recording
    from tierlab.view.analysis import ViewOptions, analyze

    rec = Recording.open(args.recording)
    opts = ViewOptions(
        group=args.group,
        x=args.x,
        bins=args.bins,
        max_mappings=args.max_mappings,
        min_mapping=args.min_mapping,
    )
    view = analyze(rec, opts)
    out = args.out
    if out is None and not args.json:
        out = args.recording.with_name(args.recording.name + ".view")
    if out is not None:
        from tierlab.view.render import write

        written = write(view, out)
    if args.json:
        sys.stdout.write(json.dumps(view.to_json(), indent=2) + "\n")
        return EXIT_OK
    t = view.totals
    print(
        f"{view.points}: {t[view.points]} ({t['assigned']} in {t['mappings_with_points']} "
        f"mapping(s), {t['unassigned']} in none); drains: {t['drains']}; "
        f"lost: {t['lost']}; throttled: {t['throttled']}"
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
        print(
            f"  #{m.id} {name} @ {m.start:#x} {m.length / 2**20:.1f} MiB: {v.samples} "
            f"{view.points}, {v.pages_touched}/{m.pages} pages touched, {v.threads} thread(s)"
        )
    print(f"wrote {len(written)} files to {out} (open {out / 'index.html'})")
    return EXIT_OK
