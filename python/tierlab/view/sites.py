"""Where hot memory comes from: every access given to the allocation live at its address and
time, and per allocation site the bytes allocated and touched, the accesses, the accesses per
byte, the share of the recording's hot pages and the accesses per phase.

The recording's ``allocations`` table (``tierlab trace --cc``, ``tierlab record
--alloc-sites``) gives each allocation a lifetime: from its event (``malloc``, ``new``,
``mmap``, ...) to the ``free``/``delete``/``munmap`` of its address (``realloc`` ends the old
block and starts a new one at its call site; a ``munmap`` ends every mapping it overlaps;
never freed: to the end). An access at address ``a`` and time ``t`` belongs to the allocation
``[start, start + size)`` holding ``a`` that started last at or before ``t`` and had not ended
before ``t`` (an access at the very ns of a free still counts for the freed block; at the ns of
an allocation, for the new one). A traced program's events carry their place in the thread's
access stream, so for the allocating thread this is exact.

How it is done (linear in accesses, ``O(log)`` per access, in numpy): the allocations' start and
end addresses cut the address space into elementary intervals; each allocation is listed in
every interval it covers, sorted by (interval, start time); an access's (interval, rank of its
time among the start times) is one integer key, and one ``searchsorted`` finds its candidate.
Accesses are streamed by row group.

A sampled recording (``tierlab record --alloc-sites``: no accesses table) is attributed the
same way from its samples, except that a sample after its block's release still counts for
the block: the samples' clock is the kernel's and the allocator's is the program's, and on a
VM they were measured 15-25 ms apart (page-fault samples later), so an end check would drop
them. Addresses reused by a later block then go to the later block only from its start.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tierlab.recording import Recording

PAGE_SHIFT = 12
END = np.iinfo(np.uint64).max
#: Allocation, release and replacement kinds (``allocations.kind``).
_ALLOC = {0, 1, 4, 5, 6, 7, 8, 11}
_FREE = {3, 9, 10}
_MUNMAP = 12
_REPLACE = {2, 13}
#: Above this many bytes of allocations, bytes touched are counted per 8-byte word (said in
#: the report), not per byte.
MAX_BYTE_MAP = 1 << 31


@dataclass
class Allocations:
    """One row per allocation lifetime."""

    start: np.ndarray
    size: np.ndarray
    t_start: np.ndarray
    t_end: np.ndarray
    site: np.ndarray

    @property
    def count(self) -> int:
        return int(self.start.size)


def lifetimes(allocs: Any) -> Allocations:
    """The lifetimes of the blocks in an ``allocations`` frame (in ``seq`` order)."""
    a = allocs.sort_values("seq", kind="stable")
    kind = a["kind"].to_numpy()
    addr = a["addr"].to_numpy(dtype=np.uint64)
    size = a["size"].to_numpy(dtype=np.uint64)
    old = a["old_addr"].to_numpy(dtype=np.uint64)
    t = a["time_ns"].to_numpy(dtype=np.uint64)
    site = a["site"].to_numpy(dtype=np.uint32)
    start_l: list[int] = []
    size_l: list[int] = []
    t0_l: list[int] = []
    t1_l: list[int] = []
    site_l: list[int] = []
    live: dict[int, int] = {}  # address -> row of a block
    maps: dict[int, int] = {}  # address -> row of an mmap'ed range

    def begin(i: int, a_: int, n: int, mapped: bool) -> None:
        if n == 0:
            return
        row = len(start_l)
        start_l.append(a_)
        size_l.append(n)
        t0_l.append(int(t[i]))
        t1_l.append(int(END))
        site_l.append(int(site[i]))
        (maps if mapped else live)[a_] = row

    def end(table: dict[int, int], a_: int, when: int) -> None:
        row = table.pop(a_, None)
        if row is not None:
            t1_l[row] = when

    for i in range(kind.size):
        k = int(kind[i])
        if k in _ALLOC:
            begin(i, int(addr[i]), int(size[i]), k == 11)
        elif k in _FREE:
            end(live, int(addr[i]), int(t[i]))
        elif k == _MUNMAP:
            lo, hi = int(addr[i]), int(addr[i]) + int(size[i])
            for a_ in [m for m in maps if m < hi and m + size_l[maps[m]] > lo]:
                end(maps, a_, int(t[i]))
        elif k in _REPLACE:
            table = maps if k == 13 else live
            if int(old[i]):
                end(table, int(old[i]), int(t[i]))
            if int(addr[i]):
                begin(i, int(addr[i]), int(size[i]), k == 13)
    return Allocations(
        np.array(start_l, dtype=np.uint64),
        np.array(size_l, dtype=np.uint64),
        np.array(t0_l, dtype=np.uint64),
        np.array(t1_l, dtype=np.uint64),
        np.array(site_l, dtype=np.uint32),
    )


class Attributor:
    """Finds the allocation of (address, time) pairs (see the module's doc)."""

    def __init__(self, al: Allocations) -> None:
        self.al = al
        ends = al.start + al.size
        self.bounds = np.unique(np.concatenate([al.start, ends]))
        k0 = np.searchsorted(self.bounds, al.start)
        k1 = np.searchsorted(self.bounds, ends)
        span = (k1 - k0).astype(np.int64)
        rows = np.repeat(np.arange(al.count, dtype=np.int64), span)
        first = np.repeat(np.cumsum(span) - span, span)
        ks = np.repeat(k0.astype(np.int64), span) + (np.arange(rows.size, dtype=np.int64) - first)
        self.times = np.unique(al.t_start)
        self.width = np.uint64(self.times.size + 1)
        rank = np.searchsorted(self.times, al.t_start[rows], side="right").astype(np.uint64)
        key = ks.astype(np.uint64) * self.width + rank
        order = np.argsort(key, kind="stable")
        self.key = key[order]
        self.rows = rows[order]
        self.ks = ks[order]

    def find(self, addr: np.ndarray, t: np.ndarray, check_end: bool = True) -> np.ndarray:
        """Row of the allocation of each access, -1 for none. Without ``check_end`` an access
        after its block's release still counts for the block (for samples, whose clock may
        run late against the allocator's: see :func:`analyze`)."""
        out = np.full(addr.size, -1, dtype=np.int64)
        if self.key.size == 0:
            return out
        # Only addresses inside the allocations' span can be in one (the stack, globals and
        # libraries usually are not: they cost one comparison).
        inside = (addr >= self.bounds[0]) & (addr < self.bounds[-1])
        if not inside.all():
            sel = np.flatnonzero(inside)
            if sel.size:
                out[sel] = self.find(addr[sel], t[sel], check_end)
            return out
        k = np.searchsorted(self.bounds, addr, side="right").astype(np.int64) - 1
        ok = (k >= 0) & (k < self.bounds.size - 1)
        rank = np.searchsorted(self.times, t, side="right").astype(np.uint64)
        q = np.where(ok, k, 0).astype(np.uint64) * self.width + rank
        j = np.searchsorted(self.key, q, side="right").astype(np.int64) - 1
        ok &= j >= 0
        jj = np.where(ok, j, 0)
        ok &= self.ks[jj] == k
        r = self.rows[jj]
        ok &= t >= self.al.t_start[r]
        if check_end:
            ok &= t <= self.al.t_end[r]
        out[ok] = r[ok]
        return out


@dataclass
class SiteRow:
    site: int
    location: str
    stack: list[str]
    objects: list[str]
    allocations: int
    bytes_allocated: int
    peak_bytes: int
    bytes_touched: int
    accesses: int
    loads: int
    stores: int
    accesses_per_byte: float
    hot_share: float
    phases: list[int] = field(default_factory=list)


@dataclass
class SiteReport:
    rows: list[SiteRow]
    accesses: int
    in_allocations: int
    phases: int
    phase_edges: list[int]
    hot_fraction: float
    hot_pages: int
    touched_granularity: int
    depth: int
    #: ``accesses`` (a trace) or ``samples`` (a sampled recording: the counts are samples,
    #: loads are every sample, bytes touched are the bytes the samples saw).
    points: str = "accesses"
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "points": self.points,
            "accesses": self.accesses,
            "in_allocations": self.in_allocations,
            "phases": self.phases,
            "phase_edges_ns": self.phase_edges,
            "hot_fraction": self.hot_fraction,
            "hot_pages": self.hot_pages,
            "touched_granularity": self.touched_granularity,
            "depth": self.depth,
            "notes": self.notes,
            "sites": [asdict(r) for r in self.rows],
        }


def _time_range(rec: Recording) -> tuple[int, int]:
    import pyarrow.parquet as pq

    lo, hi = None, None
    for part in rec.parts(points_table(rec)):
        md = pq.ParquetFile(part).metadata
        col = md.schema.to_arrow_schema().get_field_index("time_ns")
        for g in range(md.num_row_groups):
            st = md.row_group(g).column(col).statistics
            if st is None or not st.has_min_max:
                return _time_range_scan(rec)
            lo = st.min if lo is None else min(lo, st.min)
            hi = st.max if hi is None else max(hi, st.max)
    return (int(lo or 0), int(hi or 0))


def _time_range_scan(rec: Recording) -> tuple[int, int]:
    lo, hi = None, None
    for b in _batches(rec, ["time_ns"]):
        t = b["time_ns"]
        if t.size:
            lo = int(t.min()) if lo is None else min(lo, int(t.min()))
            hi = int(t.max()) if hi is None else max(hi, int(t.max()))
    return (lo or 0, hi or 0)


def points_table(rec: Recording) -> str:
    """``accesses`` when the recording has them (a trace), else ``samples`` (a sampled
    recording: each sample stands for the accesses it samples)."""
    return "accesses" if rec.meta.get("tables", {}).get("accesses") else "samples"


def _batches(rec: Recording, columns: list[str], table: str | None = None) -> Any:
    import pyarrow.parquet as pq

    for part in rec.parts(table or points_table(rec)):
        f = pq.ParquetFile(part)
        names = set(f.schema_arrow.names)
        cols = [c for c in columns if c in names]
        for b in f.iter_batches(batch_size=1 << 20, columns=cols):
            yield {c: b.column(c).to_numpy(zero_copy_only=False) for c in cols}


def site_groups(
    sites: Any, depth: int
) -> tuple[np.ndarray, list[tuple[str, list[str], list[str]]]]:
    """Site number -> group (sites whose first ``depth`` frames' locations agree), and each
    group's (location of frame 0, stack, objects)."""
    n = int(sites["site"].max()) + 1 if len(sites) else 0
    group = np.zeros(max(n, 1), dtype=np.int64)
    keys: dict[tuple[str, ...], int] = {}
    info: list[tuple[str, list[str], list[str]]] = []
    for s, locs, objs in zip(sites["site"], sites["locations"], sites["objects"], strict=True):
        lv = str(locs).split("\n")
        ov = str(objs).split("\n")
        key = tuple(
            loc if loc != "?" else obj for loc, obj in zip(lv[:depth], ov[:depth], strict=False)
        )
        g = keys.get(key)
        if g is None:
            g = keys[key] = len(info)
            info.append((key[0] if key else "?", lv[:depth], ov[:depth]))
        group[int(s)] = g
    return group, info


def analyze(
    rec: Recording, *, depth: int = 1, phases: int = 4, hot_fraction: float = 0.8
) -> SiteReport | None:
    """Per-site report of a recording with allocations (None without)."""
    if not rec.meta.get("tables", {}).get("allocations"):
        return None
    allocs = rec.frame("allocations")
    sites = rec.frame("alloc_sites")
    al = lifetimes(allocs)
    att = Attributor(al)
    group, info = site_groups(sites, depth)
    ngroups = len(info)
    alloc_group = group[al.site] if al.count else np.zeros(0, dtype=np.int64)
    total = int(al.size.sum())
    gran = 1 if total <= MAX_BYTE_MAP else 8
    base = np.concatenate([[0], np.cumsum((al.size + np.uint64(gran - 1)) // np.uint64(gran))])
    touched = np.zeros(int(base[-1]), dtype=bool)
    lo_t, hi_t = _time_range(rec)
    edges = np.linspace(lo_t, hi_t + 1, phases + 1).astype(np.uint64) if phases else np.zeros(0)
    loads = np.zeros(ngroups, dtype=np.int64)
    stores = np.zeros(ngroups, dtype=np.int64)
    per_phase = np.zeros((ngroups, max(phases, 1)), dtype=np.int64)
    pair_keys: list[np.ndarray] = []
    pair_counts: list[np.ndarray] = []
    page_keys: list[np.ndarray] = []
    page_counts: list[np.ndarray] = []
    n_acc = 0
    n_in = 0
    for b in _batches(rec, ["time_ns", "addr", "kind", "size"]):
        addr = b["addr"].astype(np.uint64, copy=False)
        t = b["time_ns"].astype(np.uint64, copy=False)
        n_acc += addr.size
        pages = addr >> np.uint64(PAGE_SHIFT)
        pk, pc = np.unique(pages, return_counts=True)
        page_keys.append(pk)
        page_counts.append(pc)
        row = att.find(addr, t, check_end=points_table(rec) == "accesses")
        m = row >= 0
        if not m.any():
            continue
        r = row[m]
        n_in += int(m.sum())
        g = alloc_group[r]
        kind = b["kind"][m] if "kind" in b else np.zeros(r.size, dtype=np.uint8)
        loads += np.bincount(g[kind == 0], minlength=ngroups)
        stores += np.bincount(g[kind != 0], minlength=ngroups)
        if phases:
            ph = np.clip(np.searchsorted(edges, t[m], side="right") - 1, 0, phases - 1)
            per_phase += np.bincount(g * phases + ph, minlength=ngroups * phases).reshape(
                ngroups, phases
            )
        # (group, page) pairs for the hot share.
        key = (g.astype(np.uint64) << np.uint64(36)) | pages[m]
        uk, uc = np.unique(key, return_counts=True)
        pair_keys.append(uk)
        pair_counts.append(uc)
        # Bytes touched: every byte of every access, inside its allocation.
        off = addr[m] - al.start[r]
        size = b["size"][m].astype(np.uint64) if "size" in b else np.ones(r.size, np.uint64)
        size = np.maximum(size, np.uint64(1))
        end = np.minimum(off + size, al.size[r])
        if gran == 1:
            _mark_bytes(touched, base[r].astype(np.uint64) + off, end - off)
        else:
            w0 = off // np.uint64(gran)
            w1 = (end + np.uint64(gran - 1)) // np.uint64(gran)
            _mark_bytes(touched, base[r].astype(np.uint64) + w0, w1 - w0)
    # Touched bytes per allocation, then per group.
    csum = np.concatenate([[0], np.cumsum(touched, dtype=np.int64)])
    per_alloc = (csum[base[1:].astype(np.int64)] - csum[base[:-1].astype(np.int64)]) * gran
    if gran > 1:
        per_alloc = np.minimum(per_alloc, al.size.astype(np.int64))
    touched_g = np.bincount(alloc_group, weights=per_alloc, minlength=ngroups).astype(np.int64)
    bytes_g = np.bincount(alloc_group, weights=al.size.astype(np.float64), minlength=ngroups)
    count_g = np.bincount(alloc_group, minlength=ngroups)
    peak_g = _peaks(al, alloc_group, ngroups)
    # The hot pages: the hottest pages (ties: lower address) that take hot_fraction of all
    # accesses; a group's hot share is its part of the accesses to them.
    hot_pages_n = 0
    hot_g = np.zeros(ngroups, dtype=np.int64)
    hot_total = 0
    if page_keys:
        pk, inv = np.unique(np.concatenate(page_keys), return_inverse=True)
        pc = np.bincount(inv, weights=np.concatenate(page_counts)).astype(np.int64)
        order = np.lexsort((pk, -pc))
        cum = np.cumsum(pc[order])
        need = hot_fraction * cum[-1] if cum.size else 0
        hot_pages_n = int(np.searchsorted(cum, need, side="left")) + 1 if cum.size else 0
        hot = np.sort(pk[order[:hot_pages_n]])
        hot_total = int(cum[hot_pages_n - 1]) if hot_pages_n else 0
        if pair_keys:
            uk, inv2 = np.unique(np.concatenate(pair_keys), return_inverse=True)
            uc = np.bincount(inv2, weights=np.concatenate(pair_counts)).astype(np.int64)
            gpage = uk & np.uint64((1 << 36) - 1)
            gg = (uk >> np.uint64(36)).astype(np.int64)
            pos = np.searchsorted(hot, gpage)
            is_hot = (pos < hot.size) & (hot[np.minimum(pos, max(hot.size - 1, 0))] == gpage)
            hot_g = np.bincount(gg[is_hot], weights=uc[is_hot], minlength=ngroups).astype(np.int64)
    rows = []
    for gi, (loc, stack, objs) in enumerate(info):
        if count_g[gi] == 0:  # a stack that only freed
            continue
        acc = int(loads[gi] + stores[gi])
        ba = int(bytes_g[gi])
        rows.append(
            SiteRow(
                site=gi,
                location=loc,
                stack=stack,
                objects=objs,
                allocations=int(count_g[gi]),
                bytes_allocated=ba,
                peak_bytes=int(peak_g[gi]),
                bytes_touched=int(touched_g[gi]),
                accesses=acc,
                loads=int(loads[gi]),
                stores=int(stores[gi]),
                accesses_per_byte=acc / ba if ba else 0.0,
                hot_share=float(hot_g[gi]) / hot_total if hot_total else 0.0,
                phases=[int(x) for x in per_phase[gi]] if phases else [],
            )
        )
    rows.sort(key=lambda r: (-r.accesses, r.location))
    notes = []
    if gran > 1:
        notes.append(
            f"bytes touched counted per {gran}-byte word (the allocations take "
            f"{total} bytes, more than {MAX_BYTE_MAP})"
        )
    return SiteReport(
        rows=rows,
        accesses=n_acc,
        in_allocations=n_in,
        phases=phases,
        phase_edges=[int(x) for x in edges],
        hot_fraction=hot_fraction,
        hot_pages=hot_pages_n,
        touched_granularity=gran,
        depth=depth,
        points=points_table(rec),
        notes=notes,
    )


#: Whole aligned words marked at once: (bytes, the word's dtype, the word with every byte 1).
_WORDS = ((8, np.uint64, 0x0101010101010101), (4, np.uint32, 0x01010101), (2, np.uint16, 0x0101))


def _mark_bytes(touched: np.ndarray, start: np.ndarray, length: np.ndarray) -> None:
    """Set ``touched[start[i] : start[i] + length[i]]`` (lengths of at most a few words):
    an aligned access of 2, 4 or 8 bytes in one store through a wider view."""
    done = np.zeros(start.size, dtype=bool)
    n = touched.size
    for width, dtype, ones in _WORDS:
        sel = (length == np.uint64(width)) & (start % np.uint64(width) == 0)
        sel &= start + np.uint64(width) <= np.uint64(n - n % width)
        if sel.any():
            view = touched[: n - n % width].view(dtype)
            view[(start[sel] // np.uint64(width)).astype(np.int64)] = ones
            done |= sel
    rest = ~done
    if rest.any():
        st, ln = start[rest], length[rest]
        for k in np.unique(ln):
            f = st[ln == k]
            for j in range(int(k)):
                touched[(f + np.uint64(j)).astype(np.int64)] = True


def _peaks(al: Allocations, alloc_group: np.ndarray, ngroups: int) -> np.ndarray:
    """Most bytes live at once per group."""
    out = np.zeros(ngroups, dtype=np.int64)
    if al.count == 0:
        return out
    t = np.concatenate([al.t_start, al.t_end])
    d = np.concatenate([al.size.astype(np.int64), -al.size.astype(np.int64)])
    g = np.concatenate([alloc_group, alloc_group])
    # Ends after starts at the same time (an access at a free's ns still counts the block).
    order = np.lexsort((d < 0, t))
    live = np.zeros(ngroups, dtype=np.int64)
    for i in order:
        live[g[i]] += d[i]
        if live[g[i]] > out[g[i]]:
            out[g[i]] = live[g[i]]
    return out
