"""Behaviour fingerprint of the engine: run every built-in scenario (every sweep point, and
the masim files of ``../shared/data/masim``) with a short simulated duration where the full
one is long, and record a SHA-256 of each run's stats (every statistic the run publishes, the
whole time series and heatmap).

A refactoring that must keep behaviour compares the fingerprints of the old and the new
build: equal hashes mean equal numbers. The full stats of each run are written beside the
hash file (``--stats-dir``) so that a difference can be listed key by key (``--compare``).

    .venv/bin/python tools/stats_hashes.py --out tools/stats-hashes.json --stats-dir bench-out/stats
    .venv/bin/python tools/stats_hashes.py --compare OLD_DIR NEW_DIR
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MASIM_DIR = ROOT.parent / "shared" / "data" / "masim"

#: Simulated-time cap per built-in scenario (None: the scenario's own length). Chosen so that
#: every periodic mechanism fires several times (LRU scans every 10 ms, DAMON aggregations
#: every 100 ms, PEBS drains, tiering policy loops, windows) while the whole list runs in a
#: few minutes on two cores.
CAPS: dict[str, str | None] = {
    "demo": None,
    "heap-5tb": "3s",
    "stencil-8core": "300ms",
    "cg-16core": "200ms",
    "telescope-5tb": "3s",
    "telescope-footprints": "3s",
    "pebs-minife": "20ms",
    "pebs-lulesh": "20ms",
    "cmcp-table1": "30ms",
    "cmcp-scaling": "30ms",
    "cmcp-p": "30ms",
    "cmcp-pagesize": "30ms",
    "cmcp-memory": "30ms",
    "zipf-tiered": "1s",
    "tiering-kv": "3s",
    "tiering-kv-long": "3s",
    "tiering-ablations": None,
    "numa-placement": "50ms",
    "numa-sources": "50ms",
    "numa-opteron": "50ms",
}
MASIM_CAP = "2s"

#: Scenarios of `tierlab telemetry`: each technique runs on a machine of its own (several PEBS
#: configurations cannot share one machine), plus a baseline without telemetry.
PER_TECHNIQUE = ("telescope-5tb", "telescope-footprints", "pebs-minife", "pebs-lulesh")

#: Stats that measure the host, not the simulation.
VOLATILE = ("wall", "host")


def native() -> Any:
    from tierlab import _native

    return _native


Item = tuple[str, str, list[str], list[str] | None]


def points() -> list[Item]:
    """(key, spec, overrides, techniques) of every run."""
    out: list[Item] = []
    for name, _ in native().builtin_scenarios():
        cap = CAPS.get(name, "1s")
        extra = [f'duration="{cap}"'] if cap else []
        _, pts = native().sweep_points(name, [])
        for label, ov in pts or [("", [])]:
            key = f"{name}/{label}" if label else name
            ov = [*ov, *extra]
            if name in PER_TECHNIQUE:
                out.append((f"{key}/baseline", name, ov, []))
                for tech, _kind in native().techniques(name, ov):
                    out.append((f"{key}/{tech}", name, ov, [tech]))
            else:
                out.append((key, name, ov, None))
    for cfg in sorted(MASIM_DIR.glob("*")):
        if cfg.is_file():
            out.append((f"masim:{cfg.name}", f"masim:{cfg}", [f'duration="{MASIM_CAP}"'], None))
    return out


def _clean(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return v


def run_one(item: Item) -> tuple[str, dict[str, Any], float]:
    key, spec, ov, techniques = item
    t0 = time.perf_counter()
    try:
        raw = native().run(spec, ov, None, None, None, techniques)
    except Exception as e:  # a run that fails is part of the behaviour
        return key, {"error": f"{type(e).__name__}: {e}"}, time.perf_counter() - t0
    stats = {k: _clean(v) for k, v in raw.stats_flat.items() if not any(s in k for s in VOLATILE)}
    doc = {
        "stats": stats,
        "timeseries": {k: [_clean(x) for x in v] for k, v in raw.timeseries.items()},
        "heatmap": raw.heatmap,
    }
    return key, doc, time.perf_counter() - t0


def digest(doc: dict[str, Any]) -> str:
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def record(args: argparse.Namespace) -> int:
    items = points()
    if args.only:
        items = [i for i in items if args.only in i[0]]
    hashes: dict[str, str] = {}
    stats_dir: Path | None = args.stats_dir
    if stats_dir is not None:
        stats_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for k, (key, doc, wall) in enumerate(pool.map(run_one, items), 1):
            hashes[key] = digest(doc)
            if stats_dir is not None:
                (stats_dir / (key.replace("/", "__").replace(":", "_") + ".json")).write_text(
                    json.dumps(doc, sort_keys=True)
                )
            print(f"[{k}/{len(items)}] {key} {hashes[key][:12]} ({wall:.1f} s)", file=sys.stderr)
    print(f"{len(items)} runs in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    text = json.dumps(hashes, indent=1, sort_keys=True) + "\n"
    if args.out is not None:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def flat(doc: dict[str, Any]) -> dict[str, Any]:
    """Stats by name, time-series columns as ``timeseries.NAME``, heatmap fields as
    ``heatmap.NAME`` (whole lists)."""
    out = dict(doc.get("stats", {}))
    if "error" in doc:
        out["error"] = doc["error"]
    for part in ("timeseries", "heatmap"):
        for k, v in (doc.get(part) or {}).items():
            out[f"{part}.{k}"] = v
    return out


def compare(old: Path, new: Path) -> int:
    """List every stat that differs between two ``--stats-dir`` folders."""
    changed = 0
    for f in sorted(old.glob("*.json")):
        g = new / f.name
        if not g.exists():
            print(f"{f.stem}: missing in {new}")
            changed += 1
            continue
        a, b = flat(json.loads(f.read_text())), flat(json.loads(g.read_text()))
        diffs = [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        if diffs:
            changed += 1
            print(f"{f.stem}: {len(diffs)} stats differ")
            for k, x, y in diffs:
                if isinstance(x, list) or isinstance(y, list):
                    print(f"  {k}: list of {len(x or [])} -> {len(y or [])} values differs")
                else:
                    print(f"  {k}: {x} -> {y}")
    print(f"{changed} runs differ", file=sys.stderr)
    return 1 if changed else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, help="write the hash list here (default: stdout)")
    p.add_argument("--stats-dir", type=Path, help="write each run's stats here")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--only", help="only runs whose key contains this text")
    p.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"))
    args = p.parse_args()
    if args.compare:
        return compare(*args.compare)
    return record(args)


if __name__ == "__main__":
    sys.exit(main())
