"""The numbers behind ``tierlab view``: per mapping, samples, pages touched, the heatmap
matrix and the histogram of pages by samples; in total, samples, losses and drain intervals.

Works on every recording: samples (live or simulated PEBS, imports), else accesses (traces),
else DAMON region snapshots (``regions``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tierlab.recording import Recording
from tierlab.view import history
from tierlab.view.history import PAGE, Mapping


@dataclass
class ViewOptions:
    #: Pages per heatmap row (the paper's blocks of 4 pages); raised when a mapping would need
    #: more than ``max_rows`` rows.
    group: int = 4
    #: x axis: ``drain`` (one column per drain = sample set), ``time`` (time bins) or ``auto``
    #: (drains when the recording has them).
    x: str = "auto"
    bins: int = 100
    max_rows: int = 512
    max_columns: int = 600
    max_mappings: int = 12
    min_mapping: int = 0


@dataclass
class MappingView:
    mapping: Mapping
    samples: int
    pages_touched: int
    threads: int
    first_ns: int | None
    last_ns: int | None
    block_pages: int
    #: Heatmap: counts[row, column]; row = block of pages from the mapping's start.
    counts: np.ndarray
    x_kind: str
    #: Column edges: drain indices (drain axis) or nanoseconds (time axis).
    x_edges: np.ndarray
    drains_per_column: int
    #: Pages by number of samples: hist_n[i] samples -> hist_pages[i] pages (n >= 1).
    hist_n: np.ndarray
    hist_pages: np.ndarray
    files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        m = self.mapping
        return {
            "id": m.id,
            "name": m.name,
            "start": m.start,
            "length": m.length,
            "pages": m.pages,
            "map_time_ns": m.map_time_ns,
            "unmap_time_ns": m.unmap_time_ns,
            "derived": m.derived,
            "samples": self.samples,
            "pages_touched": self.pages_touched,
            "touched_fraction": self.pages_touched / m.pages if m.pages else 0.0,
            "threads": self.threads,
            "first_sample_ns": self.first_ns,
            "last_sample_ns": self.last_ns,
            "heatmap": {
                "x": self.x_kind,
                "columns": int(self.counts.shape[1]),
                "rows": int(self.counts.shape[0]),
                "block_pages": self.block_pages,
                "drains_per_column": self.drains_per_column,
            },
            "histogram": {
                "samples_per_page": self.hist_n.tolist(),
                "pages": self.hist_pages.tolist(),
            },
            "files": self.files,
        }


@dataclass
class View:
    path: str
    source: str
    points: str
    mappings: list[MappingView]
    totals: dict[str, Any]
    drain_intervals_ns: np.ndarray
    files: list[str] = field(default_factory=list)
    #: What ``time_ns`` counts: ``ns`` (wall time), ``instructions`` or ``accesses`` (the
    #: recording's ``time_unit``).
    time_unit: str = "ns"

    def to_json(self) -> dict[str, Any]:
        return {
            "recording": self.path,
            "source": self.source,
            "points": self.points,
            "time_unit": self.time_unit,
            "mappings": [m.to_json() for m in self.mappings],
            "totals": self.totals,
            "files": self.files,
        }


def table_rows(rec: Recording, table: str) -> int:
    """Rows of a table from its parts' footers (nothing decoded)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in rec.parts(table))


def _time_unit(rec: Recording) -> str:
    unit = rec.meta.get("time_unit", "ns")
    return unit if unit in ("ns", "instructions", "accesses") else "ns"


def _rows_for(pages: int, opts: ViewOptions) -> tuple[int, int]:
    """(pages per heatmap row, rows) of a mapping of ``pages`` pages."""
    group = max(1, opts.group)
    if -(-pages // group) > opts.max_rows:
        group = -(-pages // opts.max_rows)
    return group, max(1, -(-pages // group))


def _analyze_accesses(rec: Recording, opts: ViewOptions) -> View:
    """Full traces: aggregated by the native extension while streaming the parts (memory
    independent of the trace's length)."""
    from tierlab import _native

    sv = _native.survey_accesses(str(rec.path), history.GAP_BYTES)
    maps = history.build(rec.mappings())
    derived = False
    if not maps:
        maps = history.from_runs(sv["runs"])
        derived = True
    maps = [m for m in maps if m.length >= opts.min_mapping]
    lo, hi = int(sv["time_min"]), int(sv["time_max"])
    cols = max(1, opts.bins)
    width = max(1, math.ceil((hi - lo + 1) / cols))
    specs: list[tuple[int, int, int]] = []
    segments: list[tuple[int, int, int, int, int]] = []
    groups: list[int] = []
    for i, m in enumerate(maps):
        group, _rows = _rows_for(m.pages, opts)
        groups.append(group)
        specs.append((m.start // PAGE * PAGE, m.pages, group))
        segments.extend((a, b, t0, t1, i) for a, b, t0, t1 in m.segments)
    aggs, unassigned = _native.aggregate_accesses(str(rec.path), segments, specs, lo, width, cols)
    edges = lo + np.arange(cols + 1, dtype=np.float64) * width
    views = []
    for m, g, group in zip(maps, aggs, groups, strict=True):
        if not g["accesses"]:
            continue
        rows = _rows_for(m.pages, opts)[1]
        views.append(
            MappingView(
                mapping=m,
                samples=int(g["accesses"]),
                pages_touched=int(g["pages_touched"]),
                threads=int(g["threads"]),
                first_ns=g["first_ns"],
                last_ns=g["last_ns"],
                block_pages=group,
                counts=np.frombuffer(g["counts"], dtype="<u8").astype(np.int64).reshape(rows, cols),
                x_kind="time",
                x_edges=edges,
                drains_per_column=1,
                hist_n=np.asarray(g["hist_n"], dtype=np.int64),
                hist_pages=np.asarray(g["hist_pages"], dtype=np.int64),
            )
        )
    views.sort(key=lambda v: (-v.samples, v.mapping.start))
    shown = views[: opts.max_mappings]
    shown.sort(key=lambda v: (v.mapping.start, v.mapping.map_time_ns))
    total = int(sv["rows"])
    acc = rec.meta.get("accounting") or {}
    totals = {
        "accesses": total,
        "samples": table_rows(rec, "samples"),
        "assigned": total - int(unassigned),
        "unassigned": int(unassigned),
        "mappings": len(maps),
        "mappings_with_points": len(views),
        "mappings_shown": len(shown),
        "mapping_events": table_rows(rec, "mappings"),
        "mappings_derived": derived,
        "touched_pages": int(sv["pages"]),
        "drains": table_rows(rec, "drains"),
        "drain_interval": {"count": 0},
        "threads": int(sv["threads"]),
        "duration_ns": hi - lo,
        "lost": int(acc.get("lost", 0) or 0),
        "lost_records": int(acc.get("lost_records", 0) or 0),
        "lost_samples": int(acc.get("lost_samples", 0) or 0),
        "throttled": int(acc.get("throttled", 0) or 0),
        "complete": bool(rec.meta.get("complete", False)),
    }
    return View(
        path=str(rec.path),
        source=str(rec.meta.get("source", "")),
        points="accesses",
        mappings=shown,
        totals=totals,
        drain_intervals_ns=np.empty(0),
        time_unit=_time_unit(rec),
    )


def _points(rec: Recording) -> tuple[str, pd.DataFrame]:
    """What to plot: samples if any (else an empty samples frame)."""
    return "samples", rec.samples()


def drain_intervals(drains: pd.DataFrame) -> np.ndarray:
    """Time between consecutive drains of the same CPU's buffer (ns)."""
    if len(drains) < 2:
        return np.empty(0)
    gaps = []
    for _, g in drains.groupby("cpu", sort=True):
        t = np.sort(g["time_ns"].to_numpy(dtype=np.float64))
        if t.size > 1:
            gaps.append(np.diff(t))
    return np.concatenate(gaps) if gaps else np.empty(0)


def _summary(values: np.ndarray) -> dict[str, Any]:
    if values.size == 0:
        return {"count": 0}
    return {
        "count": int(values.size),
        "mean_ns": float(values.mean()),
        "median_ns": float(np.median(values)),
        "min_ns": float(values.min()),
        "max_ns": float(values.max()),
    }


def _mapping_view(
    m: Mapping,
    pts: pd.DataFrame,
    x_kind: str,
    x_range: tuple[int, int],
    opts: ViewOptions,
) -> MappingView:
    addr = pts["addr"].to_numpy(dtype=np.uint64)
    t = pts["time_ns"].to_numpy(dtype=np.uint64)
    base = m.start // PAGE * PAGE
    page = ((addr - np.uint64(base)) // np.uint64(PAGE)).astype(np.int64)
    pages = m.pages
    group = max(1, opts.group)
    if -(-pages // group) > opts.max_rows:
        group = -(-pages // opts.max_rows)
    rows = max(1, -(-pages // group))
    lo, hi = x_range
    if x_kind == "drain":
        span = max(1, hi - lo + 1)
        per = max(1, -(-span // opts.max_columns))
        cols = max(1, -(-span // per))
        col = (pts["drain"].to_numpy(dtype=np.int64) - lo) // per
        edges = lo + np.arange(cols + 1, dtype=np.float64) * per
    else:
        per = 1
        cols = max(1, opts.bins)
        width = max(1, math.ceil((hi - lo + 1) / cols))
        col = (t.astype(np.int64) - lo) // width
        edges = lo + np.arange(cols + 1, dtype=np.float64) * width
    col = np.clip(col, 0, cols - 1)
    row = np.clip(page // group, 0, rows - 1)
    counts = np.zeros((rows, cols), dtype=np.int64)
    np.add.at(counts, (row, col), 1)
    per_page = np.bincount(page.clip(0, pages - 1), minlength=pages) if page.size else np.zeros(0)
    touched = per_page[per_page > 0]
    hist_n, hist_pages = (
        np.unique(touched, return_counts=True) if touched.size else (np.empty(0), np.empty(0))
    )
    return MappingView(
        mapping=m,
        samples=int(addr.size),
        pages_touched=int(touched.size),
        threads=int(pts["tid"].nunique()) if len(pts) else 0,
        first_ns=int(t.min()) if t.size else None,
        last_ns=int(t.max()) if t.size else None,
        block_pages=group,
        counts=counts,
        x_kind=x_kind,
        x_edges=edges,
        drains_per_column=per,
        hist_n=np.asarray(hist_n, dtype=np.int64),
        hist_pages=np.asarray(hist_pages, dtype=np.int64),
    )


def _region_mapping_view(
    m: Mapping, regs: pd.DataFrame, snaps: dict[tuple[int, int], int], opts: ViewOptions
) -> MappingView:
    """DAMON regions of one derived mapping: every page of a region has its nr_accesses."""
    pages = m.pages
    group = max(1, opts.group)
    if -(-pages // group) > opts.max_rows:
        group = -(-pages // opts.max_rows)
    rows = max(1, -(-pages // group))
    cols = max(1, len(snaps))
    counts = np.zeros((rows, cols), dtype=np.int64)
    bounds = [m.start, m.end]
    for start, end, nr, key in zip(
        regs["start"].tolist(),
        regs["end"].tolist(),
        regs["nr_accesses"].tolist(),
        zip(regs["target"].tolist(), regs["time_ns"].tolist(), strict=True),
        strict=True,
    ):
        r0 = (start - m.start) // PAGE // group
        r1 = max(r0 + 1, -(-((end - m.start) // PAGE) // group))
        counts[r0:r1, snaps[key]] = np.maximum(counts[r0:r1, snaps[key]], nr)
        bounds += [start, end]
    # Accesses per page summed over snapshots, piecewise constant between region boundaries.
    edges = np.unique(np.clip(np.asarray(bounds, dtype=np.int64), m.start, m.end))
    total = np.zeros(max(0, edges.size - 1), dtype=np.int64)
    lo = np.searchsorted(edges, regs["start"].to_numpy(dtype=np.int64))
    hi = np.searchsorted(edges, regs["end"].to_numpy(dtype=np.int64))
    diff = np.zeros(edges.size, dtype=np.int64)
    np.add.at(diff, lo, regs["nr_accesses"].to_numpy(dtype=np.int64))
    np.add.at(diff, hi, -regs["nr_accesses"].to_numpy(dtype=np.int64))
    total = np.cumsum(diff)[:-1] if edges.size > 1 else total
    npages = np.diff(edges) // PAGE if edges.size > 1 else np.zeros(0, dtype=np.int64)
    hist = pd.Series(npages[total > 0]).groupby(total[total > 0]).sum()
    return MappingView(
        mapping=m,
        samples=int(regs["nr_accesses"].sum()),
        pages_touched=int(npages[total > 0].sum()),
        threads=int(regs["target"].nunique()),
        first_ns=int(regs["time_ns"].min()) if len(regs) else None,
        last_ns=int(regs["time_ns"].max()) if len(regs) else None,
        block_pages=group,
        counts=counts,
        x_kind="snapshot",
        x_edges=np.arange(cols + 1, dtype=np.float64),
        drains_per_column=1,
        hist_n=np.asarray(hist.index, dtype=np.int64),
        hist_pages=np.asarray(hist.to_numpy(), dtype=np.int64),
    )


def _analyze_regions(rec: Recording, opts: ViewOptions) -> View:
    regs = rec.regions()
    ranges = regs[["start", "end"]].drop_duplicates().sort_values("start")
    maps: list[Mapping] = []
    for start, end in zip(ranges["start"].tolist(), ranges["end"].tolist(), strict=True):
        if maps and start <= maps[-1].end:
            last = maps[-1]
            last.length = max(last.end, end) - last.start
        else:
            maps.append(
                Mapping(len(maps), start, end - start, f"region {len(maps)}", 0, derived=True)
            )
    maps = [m for m in maps if m.length >= opts.min_mapping]
    keys = sorted(
        set(zip(regs["target"].tolist(), regs["time_ns"].tolist(), strict=True)),
        key=lambda k: (k[1], k[0]),
    )
    snaps = {k: i for i, k in enumerate(keys)}
    views = []
    for m in maps:
        sel = regs[(regs["start"] >= m.start) & (regs["end"] <= m.end)]
        views.append(_region_mapping_view(m, sel, snaps, opts))
    views.sort(key=lambda v: (-v.samples, v.mapping.start))
    shown = sorted(views[: opts.max_mappings], key=lambda v: v.mapping.start)
    times = np.asarray(sorted({k[1] for k in keys}), dtype=np.float64)
    totals = {
        "regions": len(regs),
        "samples": 0,
        "accesses": 0,
        "snapshots": len(keys),
        "nr_accesses": int(regs["nr_accesses"].sum()),
        "assigned": len(regs),
        "unassigned": 0,
        "mappings": len(maps),
        "mappings_with_points": len(views),
        "mappings_shown": len(shown),
        "mapping_events": 0,
        "mappings_derived": True,
        "drains": 0,
        "drain_interval": {"count": 0},
        "threads": int(regs["target"].nunique()),
        "duration_ns": int(times.max() - times.min()) if times.size else 0,
        "lost": 0,
        "lost_records": 0,
        "lost_samples": 0,
        "throttled": 0,
        "complete": bool(rec.meta.get("complete", False)),
    }
    return View(
        str(rec.path),
        str(rec.meta.get("source", "")),
        "regions",
        shown,
        totals,
        np.diff(times) if times.size > 1 else np.empty(0),
    )


def analyze(rec: Recording, opts: ViewOptions | None = None) -> View:
    opts = opts or ViewOptions()
    kind, pts = _points(rec)
    if not len(pts) and table_rows(rec, "accesses"):
        return _analyze_accesses(rec, opts)
    if not len(pts) and len(rec.regions()):
        return _analyze_regions(rec, opts)
    drains = rec.drains()
    maps = history.build(rec.mappings())
    derived = False
    if not maps:
        maps = history.derive(pts["addr"].to_numpy(dtype=np.uint64))
        derived = True
    maps = [m for m in maps if m.length >= opts.min_mapping]
    addr = pts["addr"].to_numpy(dtype=np.uint64)
    t = pts["time_ns"].to_numpy(dtype=np.uint64)
    owner = history.assign(maps, t, addr)
    by_id = {m.id: m for m in maps}

    x_kind = opts.x
    if x_kind == "auto":
        x_kind = "drain" if kind == "samples" and len(drains) > 1 else "time"
    if x_kind == "drain":
        d = pts["drain"].to_numpy(dtype=np.int64) if len(pts) else np.zeros(1, dtype=np.int64)
        all_d = drains["drain"].to_numpy(dtype=np.int64) if len(drains) else d
        x_range = (int(min(d.min(), all_d.min())), int(max(d.max(), all_d.max())))
    else:
        x_range = (int(t.min()), int(t.max())) if t.size else (0, 0)

    views = []
    counts = pd.Series(owner[owner >= 0]).value_counts()
    for mid, _n in counts.items():
        sel = owner == mid
        views.append(_mapping_view(by_id[int(mid)], pts[sel], x_kind, x_range, opts))
    views.sort(key=lambda v: (-v.samples, v.mapping.start))
    shown = views[: opts.max_mappings]
    shown.sort(key=lambda v: (v.mapping.start, v.mapping.map_time_ns))

    acc = rec.meta.get("accounting") or {}
    intervals = drain_intervals(drains)
    totals = {
        kind: len(pts),
        "samples": len(rec.samples()),
        "accesses": table_rows(rec, "accesses"),
        "assigned": int((owner >= 0).sum()),
        "unassigned": int((owner < 0).sum()),
        "mappings": len(maps),
        "mappings_with_points": len(views),
        "mappings_shown": len(shown),
        "mapping_events": len(rec.mappings()),
        "mappings_derived": derived,
        "drains": len(drains),
        "drain_interval": _summary(intervals),
        "threads": int(pts["tid"].nunique()) if len(pts) else 0,
        "duration_ns": int(t.max() - t.min()) if t.size else 0,
        "lost": int(acc.get("lost", 0) or 0),
        "lost_records": int(acc.get("lost_records", 0) or 0),
        "lost_samples": int(acc.get("lost_samples", 0) or 0),
        "throttled": int(acc.get("throttled", 0) or 0),
        "complete": bool(rec.meta.get("complete", False)),
    }
    return View(
        path=str(rec.path),
        source=str(rec.meta.get("source", "")),
        points=kind,
        mappings=shown,
        totals=totals,
        drain_intervals_ns=intervals,
        time_unit=_time_unit(rec),
    )
