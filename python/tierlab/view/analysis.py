"""The numbers behind ``tierlab view``: per mapping, samples, pages touched, the heatmap
matrix and the histogram of pages by samples; in total, samples, losses and drain intervals.

Works on every recording: samples (live or simulated PEBS, imports), else accesses (traces),
else DAMON region snapshots (``regions``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tierlab.recording import Recording, RecordingError
from tierlab.view import datasrc, history, pagesize
from tierlab.view.counts import Counts, RowCounts
from tierlab.view.history import PAGE, Mapping
from tierlab.view.symbols import SymbolRow

#: The largest address (a uint64).
TOP = (1 << 64) - 1

#: Mappings smaller than this are "small" (the McKernel driver's filter; kept and shown).
SMALL_MAPPING = 4 << 20


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
    #: Resolve sample IPs to symbols (``symbols.py``) and list the top ``top_symbols``.
    symbols: bool = True
    top_symbols: int = 20


@dataclass
class MappingView:
    mapping: Mapping
    samples: int
    #: Base pages (4 KiB) of the mapping the points' pages cover (a THP fault covers 512).
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
    #: Bytes of the mapping covered by the pages touched, each of its own size.
    bytes_touched: int = 0
    #: Touched pages larger than the base page (transparent huge pages, hugetlbfs).
    huge_pages_touched: int = 0
    #: Largest page size behind the points.
    page_size: int = PAGE

    @property
    def small(self) -> bool:
        return self.mapping.length < SMALL_MAPPING

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
            "small": self.small,
            "samples": self.samples,
            "pages_touched": self.pages_touched,
            "bytes_touched": self.bytes_touched,
            "huge_pages_touched": self.huge_pages_touched,
            "page_size": self.page_size,
            "touched_fraction": self.bytes_touched / m.length if m.length else 0.0,
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
    #: Samples per symbol (``perf mem report --sort=sym,mem``), most first; None when not
    #: resolved (``--no-symbols``, no samples with an IP).
    symbols: list[SymbolRow] | None = None
    #: Problems met resolving symbols (a file not found, changed, not ELF), one per file.
    symbol_notes: list[str] = field(default_factory=list)
    #: Per allocation site (``tierlab.view.sites.SiteReport``), for recordings with an
    #: ``allocations`` table; None without. Set by the caller (the CLI) after the analysis.
    sites: Any = None
    #: Where the pages are (``tierlab.view.render.Tiers``: address ranges and their nodes,
    #: from ``view --plan``), drawn along each heatmap's address axis; None: not known.
    tiers: Any = None

    def to_json(self) -> dict[str, Any]:
        out = {
            "recording": self.path,
            "source": self.source,
            "points": self.points,
            "time_unit": self.time_unit,
            "mappings": [m.to_json() for m in self.mappings],
            "totals": self.totals,
            "files": self.files,
        }
        if self.symbols is not None:
            out["symbols"] = [r.to_json() for r in self.symbols]
            out["symbol_notes"] = self.symbol_notes
        return out


def table_rows(rec: Recording, table: str) -> int:
    """Rows of a table from its parts' footers (nothing decoded; every part checked as a
    regular file with a readable footer and the table's columns)."""
    return rec.table_rows(table)


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

    # The native reader streams the parts (its survey decodes every column, `kind` too, on
    # every core) and checks them as it goes: a null, a `kind` other than 0/1 or a `tid`
    # beyond uint32 is an error naming the part, row and column.
    try:
        sv = _native.survey_accesses(str(rec.path), history.GAP_BYTES)
    except _native.TraceFormatError as e:  # what the checks above cannot see (page data)
        raise RecordingError(str(e)) from None
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
        # The native aggregator takes uint64 ends: a region holding the top page (ending at
        # 2^64) is passed ending one byte short (an access at 2^64 - 1 itself is unassigned).
        segments.extend((a, min(b, TOP), t0, t1, i) for a, b, t0, t1 in m.segments)
    try:
        aggs, unassigned = _native.aggregate_accesses(
            str(rec.path), segments, specs, lo, width, cols
        )
    except _native.TraceFormatError as e:
        raise RecordingError(str(e)) from None
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
                # A trace carries no page sizes: its pages are base pages.
                bytes_touched=min(int(g["pages_touched"]) * PAGE, m.length),
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
        "small_mappings": sum(1 for m in maps if m.length < SMALL_MAPPING),
        "mapping_events": table_rows(rec, "mappings"),
        "mappings_derived": derived,
        "touched_pages": int(sv["pages"]),
        "drains": table_rows(rec, "drains"),
        "drain_interval": {"count": 0},
        "threads": int(sv["threads"]),
        "duration_ns": hi - lo,
        "lost": _count(acc, "lost"),
        "lost_records": _count(acc, "lost_records"),
        "lost_samples": _count(acc, "lost_samples"),
        "throttled": _count(acc, "throttled"),
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


class _MappingAcc:
    """One mapping's view, built batch by batch (:meth:`add`): the heatmap, the points per
    touched page (each of its own size), threads, first and last point."""

    def __init__(
        self, m: Mapping, x_kind: str, x_range: tuple[int, int], opts: ViewOptions, base: int
    ) -> None:
        self.m, self.x_kind, self.base = m, x_kind, base
        self.group, self.rows = _rows_for(m.pages, opts)
        lo, hi = x_range
        self.lo = lo
        if x_kind == "drain":
            span = max(1, hi - lo + 1)
            self.per = max(1, -(-span // opts.max_columns))
            self.cols = max(1, -(-span // self.per))
            self.edges = lo + np.arange(self.cols + 1, dtype=np.float64) * self.per
        else:
            self.per = 1
            self.cols = max(1, opts.bins)
            self.width = max(1, math.ceil((hi - lo + 1) / self.cols))
            self.edges = lo + np.arange(self.cols + 1, dtype=np.float64) * self.width
        self.counts = np.zeros((self.rows, self.cols), dtype=np.int64)
        self.units: dict[int, Counts] = {}  # page size -> points per page number
        self.tids = Counts()
        self.n = 0
        self.first: int | None = None
        self.last: int | None = None
        self.page_size = 0

    def add(
        self, addr: np.ndarray, t: np.ndarray, tid: np.ndarray, drain: np.ndarray, size: np.ndarray
    ) -> None:
        if addr.size == 0:
            return
        lo_page = self.m.start // PAGE * PAGE
        page = ((addr - np.uint64(lo_page)) // np.uint64(PAGE)).astype(np.int64)
        if self.x_kind == "drain":
            col = (drain.astype(np.int64) - self.lo) // self.per
        else:
            col = ((t - np.uint64(self.lo)) // np.uint64(self.width)).astype(np.int64)
        col = np.clip(col, 0, self.cols - 1)
        row = np.clip(page // self.group, 0, self.rows - 1)
        np.add.at(self.counts, (row, col), 1)
        # Points per touched page (its own size: a THP fault is one 2 MiB page), counted per
        # page size, each a 1-D count (a 2-D unique over (page, size) pairs sorts ~20x slower).
        for z in np.unique(size).tolist():
            self.units.setdefault(int(z), Counts()).add(addr[size == z] // np.uint64(z))
        self.tids.add(tid)
        self.n += int(addr.size)
        t0, t1 = int(t.min()), int(t.max())
        self.first = t0 if self.first is None else min(self.first, t0)
        self.last = t1 if self.last is None else max(self.last, t1)
        self.page_size = max(self.page_size, int(size.max()))

    def view(self) -> MappingView:
        m = self.m
        per_page = [np.zeros(0, dtype=np.int64)]
        starts, sizes = [np.zeros(0, dtype=np.uint64)], [np.zeros(0, dtype=np.uint64)]
        for z, c in sorted(self.units.items()):
            keys, counts = c.result()
            per_page.append(counts)
            starts.append(keys * np.uint64(z))
            sizes.append(np.full(keys.size, z, dtype=np.uint64))
        per_unit = np.concatenate(per_page)
        hist_n, hist_pages = (
            np.unique(per_unit, return_counts=True) if per_unit.size else (np.empty(0), np.empty(0))
        )
        covered, _units, huge = pagesize.covered_bytes(
            np.concatenate(starts), np.concatenate(sizes), m.start, m.end, self.base
        )
        return MappingView(
            mapping=m,
            samples=self.n,
            pages_touched=-(-covered // PAGE),
            threads=len(self.tids),
            first_ns=self.first,
            last_ns=self.last,
            block_pages=self.group,
            counts=self.counts,
            x_kind=self.x_kind,
            x_edges=self.edges,
            drains_per_column=self.per,
            hist_n=np.asarray(hist_n, dtype=np.int64),
            hist_pages=np.asarray(hist_pages, dtype=np.int64),
            bytes_touched=covered,
            huge_pages_touched=huge,
            page_size=self.page_size or self.base,
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
    # Region boundaries as offsets from the mapping's start: addresses above 2^63 do not fit
    # an int64.
    bounds = [0, m.length]
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
        bounds += [start - m.start, end - m.start]
    # Accesses per page summed over snapshots, piecewise constant between region boundaries.
    edges = np.unique(np.clip(np.asarray(bounds, dtype=np.int64), 0, m.length))
    total = np.zeros(max(0, edges.size - 1), dtype=np.int64)
    base = np.uint64(m.start)
    lo = np.searchsorted(edges, (regs["start"].to_numpy(dtype=np.uint64) - base).astype(np.int64))
    hi = np.searchsorted(edges, (regs["end"].to_numpy(dtype=np.uint64) - base).astype(np.int64))
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
    keys = sorted(
        set(zip(regs["target"].tolist(), regs["time_ns"].tolist(), strict=True)),
        key=lambda k: (k[1], k[0]),
    )
    snaps = {k: i for i, k in enumerate(keys)}
    # Each region row belongs to the derived mapping whose range holds its start.
    starts = np.asarray([m.start for m in maps], dtype=np.uint64)
    owner = (
        np.searchsorted(starts, regs["start"].to_numpy(dtype=np.uint64), side="right") - 1
        if len(regs)
        else np.zeros(0, dtype=np.int64)
    )
    nr = regs["nr_accesses"].to_numpy(dtype=np.int64)
    totals_by_map: np.ndarray = np.bincount(owner, weights=nr, minlength=max(1, len(maps)))
    eligible = [m for m in maps if m.length >= opts.min_mapping]
    ranked = sorted(eligible, key=lambda m: (-totals_by_map[m.id], m.start))
    chosen = sorted(ranked[: opts.max_mappings], key=lambda m: m.start)
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(len(maps) + 1), side="left")
    shown = []
    for m in chosen:
        rows = order[bounds[m.id] : bounds[m.id + 1]]
        shown.append(_region_mapping_view(m, regs.iloc[rows], snaps, opts))
    times = np.asarray(sorted({k[1] for k in keys}), dtype=np.float64)
    totals = {
        "regions": len(regs),
        "samples": 0,
        "accesses": 0,
        "snapshots": len(keys),
        "nr_accesses": int(regs["nr_accesses"].sum()),
        "assigned": len(regs),
        "unassigned": 0,
        "mappings": len(eligible),
        "mappings_with_points": len(eligible),
        "mappings_shown": len(shown),
        "small_mappings": sum(1 for m in eligible if m.length < SMALL_MAPPING),
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


def _count(acc: dict[str, Any], key: str) -> int:
    v = acc.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _check_regions(rec: Recording) -> None:
    """The optional ``regions`` table is checked whatever the view shows (a recording is
    read whole or refused): its parts, row count and values, batch by batch."""
    from tierlab.recording.schema import arrow_schemas

    if rec.table_rows("regions"):
        rec.check_streaming("regions", arrow_schemas()["regions"].names)


#: Samples read at a time by the passes over a sampled recording (about 40 MB of columns):
#: the view's memory is one batch's plus what grows with the distinct pages, threads and IPs,
#: never with the number of samples.
BATCH_ROWS = 1 << 20

_SAMPLE_COLUMNS = ("time_ns", "tid", "addr", "ip", "data_src", "event", "drain")


def _sample_batches(rec: Recording, rows: int) -> Iterator[dict[str, np.ndarray]]:
    """The ``samples`` table, ``rows`` at a time, as numpy columns (``event`` as
    ``faults``: whether each sample is a page fault). Every column is read and checked, the
    ones the view does not use too: a recording is read whole or refused."""
    import pyarrow.compute as pc

    for t in rec.batches("samples", None, rows):
        out = {n: t.column(n).to_numpy() for n in _SAMPLE_COLUMNS if n != "event"}
        out["faults"] = pc.equal(t.column("event"), "page-faults").to_numpy(zero_copy_only=False)
        yield out


def analyze(rec: Recording, opts: ViewOptions | None = None, batch_rows: int = BATCH_ROWS) -> View:
    opts = opts or ViewOptions()
    _check_regions(rec)
    n_samples = table_rows(rec, "samples")
    if not n_samples and table_rows(rec, "accesses"):
        return _analyze_accesses(rec, opts)
    if not n_samples and len(rec.regions()):
        return _analyze_regions(rec, opts)
    return _analyze_samples(rec, opts, batch_rows)


def _analyze_samples(rec: Recording, opts: ViewOptions, batch_rows: int) -> View:
    """Samples (or none at all): streamed in batches, three passes at most (the summary and
    each mapping's points; the mappings' totals first when they are derived from the data)."""
    meta = rec.meta
    base = pagesize.base_page(meta)
    drains = rec.drains()
    all_maps = maps = history.build(rec.mappings())
    derived = not maps
    blocks: dict[tuple[int, int], Counts] = {}
    pages, tids, words = Counts(), Counts(), Counts()
    per_map = Counts()
    n = 0
    t_lo = d_lo = TOP
    t_hi = d_hi = 0
    any_ip = False
    kept = [m for m in maps if m.length >= opts.min_mapping]
    for b in _sample_batches(rec, batch_rows):
        addr, t = b["addr"], b["time_ns"]
        if not addr.size:
            continue
        n += int(addr.size)
        t_lo, t_hi = min(t_lo, int(t.min())), max(t_hi, int(t.max()))
        d_lo, d_hi = min(d_lo, int(b["drain"].min())), max(d_hi, int(b["drain"].max()))
        tids.add(b["tid"])
        words.add(b["data_src"])
        any_ip = any_ip or bool(b["ip"].any())
        pagesize.count_blocks(meta, addr, blocks)
        if derived:
            pages.add(addr // np.uint64(PAGE))
        else:
            owner = history.assign(kept, t, addr)
            per_map.add(owner[owner >= 0].astype(np.uint64))
    if derived:
        maps = history.derive(pages.result()[0] * np.uint64(PAGE))
        kept = [m for m in maps if m.length >= opts.min_mapping]
        for b in _sample_batches(rec, batch_rows):
            owner = history.assign(kept, b["time_ns"], b["addr"])
            per_map.add(owner[owner >= 0].astype(np.uint64))
    by_id = {m.id: m for m in kept}
    ids, counts = per_map.result()
    ranked = sorted(
        zip(ids.tolist(), counts.tolist(), strict=True), key=lambda x: (-x[1], by_id[x[0]].start)
    )
    x_kind = opts.x
    if x_kind == "auto":
        x_kind = "drain" if len(drains) > 1 else "time"
    if x_kind == "drain":
        seen = [d_lo, d_hi] if n else [0]
        if len(drains):
            all_d = drains["drain"].to_numpy(dtype=np.int64)
            seen += [int(all_d.min()), int(all_d.max())]
        x_range = (min(seen), max(seen))
    else:
        x_range = (t_lo, t_hi) if n else (0, 0)
    accs = {
        mid: _MappingAcc(by_id[mid], x_kind, x_range, opts, base)
        for mid, _ in ranked[: opts.max_mappings]
    }

    # The symbols' pass gathers distinct (IP, its mapping, memory level, data mapping) rows.
    word_keys, word_counts = words.result()
    level_names: list[str] | None = None
    level_lut = np.zeros(0, dtype=np.int64)
    if word_keys.size and bool(word_keys.any()):
        names = [datasrc.level(int(v)) for v in word_keys.tolist()]
        level_names = [k for k in datasrc.ORDER if k in set(names)]
        pos = {k: i for i, k in enumerate(level_names)}
        level_lut = np.asarray([pos[x] for x in names], dtype=np.int64)
    resolver = None
    sym_rows = RowCounts(4)
    if opts.symbols and n and any_ip:
        from tierlab.view import symbols

        acc_meta = meta.get("accounting") or {}
        resolver = symbols.Resolver(
            rec.mappings(),
            acc_meta.get("mapped_files") if isinstance(acc_meta, dict) else None,
            maps=all_maps,
        )
    code_of = {m.id: i + 1 for i, m in enumerate(sorted(kept, key=lambda m: m.id))}
    data_lut = np.zeros(max(by_id, default=-1) + 2, dtype=np.int64)
    for mid, c in code_of.items():
        data_lut[mid + 1] = c
    huge_samples = 0
    with_ip = 0
    if n:
        for b in _sample_batches(rec, batch_rows):
            addr, t = b["addr"], b["time_ns"]
            if not addr.size:
                continue
            owner = history.assign(kept, t, addr)
            size = pagesize.point_page_sizes(meta, addr, None, blocks, faults=b["faults"])
            huge_samples += int((size > np.uint64(base)).sum())
            held = np.flatnonzero(np.isin(owner, list(accs)))
            order = held[np.argsort(owner[held], kind="stable")]
            got, first, cnt = np.unique(owner[order], return_index=True, return_counts=True)
            for mid, i0, k in zip(got.tolist(), first.tolist(), cnt.tolist(), strict=True):
                sel = order[i0 : i0 + k]
                accs[mid].add(addr[sel], t[sel], b["tid"][sel], b["drain"][sel], size[sel])
            if resolver is not None:
                ip = b["ip"]
                with_ip += int((ip != 0).sum())
                level = (
                    level_lut[np.searchsorted(word_keys, b["data_src"])]
                    if level_names
                    else np.zeros(ip.size, dtype=np.int64)
                )
                sym_rows.add(ip, resolver.owners(t, ip) + 1, level, data_lut[owner + 1])
    views = [acc.view() for acc in accs.values()]
    shown = sorted(views, key=lambda v: (v.mapping.start, v.mapping.map_time_ns))

    acc = meta.get("accounting") or {}
    intervals = drain_intervals(drains)
    assigned = int(counts.sum())
    levels = datasrc.levels(word_keys, word_counts) if n else {}
    totals = {
        "samples": n,
        "accesses": table_rows(rec, "accesses"),
        "assigned": assigned,
        "unassigned": n - assigned,
        "mappings": len(kept),
        "mappings_with_points": int(ids.size),
        "mappings_shown": len(shown),
        "small_mappings": sum(1 for m in kept if m.length < SMALL_MAPPING),
        "mapping_events": len(rec.mappings()),
        "mappings_derived": derived,
        "drains": len(drains),
        "drain_interval": _summary(intervals),
        "threads": len(tids),
        "duration_ns": t_hi - t_lo if n else 0,
        "lost": _count(acc, "lost"),
        "lost_records": _count(acc, "lost_records"),
        "lost_samples": _count(acc, "lost_samples"),
        "throttled": _count(acc, "throttled"),
        "complete": bool(meta.get("complete", False)),
        "huge_page_samples": huge_samples,
        # Samples per memory level from their data_src (`perf mem report`'s view), if any.
        "memory_levels": levels,
    }
    view = View(
        path=str(rec.path),
        source=str(meta.get("source", "")),
        points="samples",
        mappings=shown,
        totals=totals,
        drain_intervals_ns=intervals,
        time_unit=_time_unit(rec),
    )
    if resolver is not None:
        _symbols(view, resolver, sym_rows, level_names, kept, n, with_ip, opts)
    return view


def _symbols(
    view: View,
    resolver: Any,
    rows: RowCounts,
    level_names: list[str] | None,
    maps: list[Mapping],
    n: int,
    with_ip: int,
    opts: ViewOptions,
) -> None:
    """Resolve the samples' distinct IPs to symbols (``symbols.py``) and fill
    ``view.symbols`` (``rows``: distinct (IP, IP's mapping + 1, level, data code) rows and
    their samples)."""
    from tierlab.view import symbols

    r, w = rows.result()
    ip = r[0]
    owner = r[1].astype(np.int64) - 1
    res = resolver.resolve_owned(ip, owner, w)
    data_names = ["(no mapping)"] + [
        f"#{m.id} {m.name or '(unnamed)'}" for m in sorted(maps, key=lambda m: m.id)
    ]
    view.symbols = symbols.table(
        res,
        r[2].astype(np.int64) if level_names else None,
        level_names,
        r[3].astype(np.int64),
        data_names,
        top=opts.top_symbols,
        weights=w,
    )
    view.symbol_notes = res.notes
    named = np.asarray([symbols.is_symbol(x) for x in res.names], dtype=bool)
    in_symbols = named[res.symbol]
    view.totals["symbols"] = {
        "samples_with_ip": with_ip,
        "samples_in_symbols": int(w[in_symbols].sum()),
        "distinct_symbols": int(np.unique(res.symbol[in_symbols]).size),
    }
