"""Mapping history: rebuild the mappings live over time and assign each sample to one.

As the McKernel viewer does: replay the ``map`` / ``unmap`` events in time order; a map over
addresses still mapped ends the old mapping there at that time (the kernel replaced it); an
unmap ends every part of a mapping it covers (it may split a mapping). A sample belongs to the
mapping whose range holds its address at its time; samples in no mapping are dropped (counted).

One exception keeps one row per mapping: a ``map`` of the same name over (or, for a named
mapping, right beside, when mapped earlier) one live mapping, and nothing else, is that
mapping **growing** (a heap extended by ``brk``, a stack, a file's next segment, the kernel
reporting a merged range): it extends the live mapping instead of ending it. (``[heap]`` over
an anonymous mapping starting at the same address is growth too: perf names the first
extension of the heap ``//anon``.)
The live recorder emits an ``unmap`` first when a mapping is really replaced, so a
replacement is never taken for growth.

Without mapping events (traces, imports), mappings are derived from the data: runs of touched
pages with gaps under ``GAP_BYTES`` form one region each.

Everything here is O(n log n) in mapping events and points (no per-page arrays: a mapping may
be 2^63 bytes long).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

PAGE = 4096
#: Largest hole between touched pages inside one derived region.
GAP_BYTES = 1 << 20
_INF = np.iinfo(np.uint64).max
#: The end of the address space: a region holding the top page ends here, one past what a
#: uint64 holds (tables of segments store it as ``_INF`` and take it as inclusive).
ADDR_END = 1 << 64
#: The name of anonymous memory (recordings spell it ``[anon]``, or leave it empty).
ANON_NAMES = ("", "[anon]", "//anon")


@dataclass
class Mapping:
    """One mapping instance: a ``map`` event and what became of its range."""

    id: int
    start: int
    length: int
    name: str
    map_time_ns: int
    #: When the last of its range was unmapped or replaced; ``None`` while any part lives.
    unmap_time_ns: int | None = None
    derived: bool = False
    #: Live pieces: (lo, hi, t_from, t_to).
    segments: list[tuple[int, int, int, int]] = field(default_factory=list)

    @property
    def end(self) -> int:
        return self.start + self.length

    @property
    def pages(self) -> int:
        return max(1, -(-(self.end - self.start // PAGE * PAGE) // PAGE))


class _Live:
    """The live pieces of mappings: disjoint ranges kept sorted by start."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        #: Parallel to ``starts``: (hi, t_from, mapping id).
        self.rest: list[tuple[int, int, int]] = []

    def span(self, lo: int, hi: int, touching: bool = False) -> tuple[int, int]:
        """Index range of the pieces overlapping ``[lo, hi)`` (or touching it)."""
        i = bisect.bisect_left(self.starts, lo)  # the first piece starting at lo or above
        if i and (self.rest[i - 1][0] > lo or (touching and self.rest[i - 1][0] == lo)):
            i -= 1  # the piece before overlaps (or touches) [lo, hi) too
        j = bisect.bisect_left(self.starts, hi + 1 if touching else hi, lo=i)
        return i, j

    def pieces(self, i: int, j: int) -> list[tuple[int, int, int, int]]:
        return [(self.starts[k], *self.rest[k]) for k in range(i, j)]

    def replace(self, i: int, j: int, new: list[tuple[int, int, int, int]]) -> None:
        self.starts[i:j] = [p[0] for p in new]
        self.rest[i:j] = [p[1:] for p in new]


def build(mappings: pd.DataFrame) -> list[Mapping]:
    """Mapping instances from a ``mappings`` table (events in any order: sorted stably by
    time, so equal times keep their recorded order)."""
    ev = mappings.sort_values("time_ns", kind="stable")
    out: list[Mapping] = []
    live = _Live()
    remaining: dict[int, int] = {}

    def cut(lo: int, hi: int, t: int) -> None:
        i, j = live.span(lo, hi)
        if i >= j:
            return
        keep = []
        for s_lo, s_hi, t0, mid in live.pieces(i, j):
            out[mid].segments.append((s_lo, s_hi, t0, t))
            if s_lo < lo:
                keep.append((s_lo, lo, t, mid))
            if s_hi > hi:
                keep.append((hi, s_hi, t, mid))
            remaining[mid] -= min(hi, s_hi) - max(lo, s_lo)
            if remaining[mid] <= 0:
                out[mid].unmap_time_ns = t
        live.replace(i, j, keep)

    def grow(lo: int, hi: int, t: int, name: str) -> bool:
        """Extend the one live mapping of this name the map lies over (or beside); False
        when the map is not such a growth."""
        i, j = live.span(lo, hi, touching=name not in ANON_NAMES)
        if i >= j:
            return False
        # A mapping beside (not over) this one grows only when it was mapped earlier: two
        # neighbours of one name mapped at the same time (a maps snapshot) stay two.
        pieces = [
            p for p in live.pieces(i, j) if (p[1] > lo and p[0] < hi) or out[p[3]].map_time_ns < t
        ]
        if not pieces:
            return False
        mids = {p[3] for p in pieces}
        if len(mids) != 1:
            return False
        m = out[mids.pop()]
        if m.name != name:
            # perf names the first extension of the brk area `//anon`, the next ones [heap].
            if not (name == "[heap]" and m.name in ANON_NAMES and m.start == lo):
                return False
            m.name = name
        overlapping = [p for p in pieces if p[1] > lo and p[0] < hi]
        if name in ANON_NAMES and not overlapping:
            return False
        # The parts of [lo, hi) no live piece covers become new pieces of the mapping.
        new = []
        pos = lo
        for p_lo, p_hi, _t0, _mid in pieces:
            if p_lo > pos:
                new.append((pos, min(p_lo, hi), t, m.id))
            pos = max(pos, p_hi)
        if pos < hi:
            new.append((pos, hi, t, m.id))
        merged = sorted(live.pieces(i, j) + new)
        live.replace(i, j, merged)
        added = sum(b - a for a, b, _, _ in new)
        remaining[m.id] += added
        start = min(m.start, lo)
        m.length = max(m.end, hi) - start
        m.start = start
        return True

    for t, kind, start, length, name in zip(
        ev["time_ns"].to_numpy(dtype=np.uint64).tolist(),
        ev["event"].tolist(),
        ev["start"].to_numpy(dtype=np.uint64).tolist(),
        ev["length"].to_numpy(dtype=np.uint64).tolist(),
        ev["name"].tolist(),
        strict=True,
    ):
        if length == 0:
            continue
        lo, hi = int(start), min(int(start) + int(length), ADDR_END)
        t = int(t)
        if kind == "map":
            if grow(lo, hi, t, str(name)):
                continue
            cut(lo, hi, t)
            m = Mapping(len(out), lo, hi - lo, str(name), t)
            out.append(m)
            remaining[m.id] = hi - lo
            i, j = live.span(lo, hi)
            live.replace(i, j, [(lo, hi, t, m.id)])
        else:
            cut(lo, hi, t)
    for lo, (hi, t0, mid) in zip(live.starts, live.rest, strict=True):
        out[mid].segments.append((lo, hi, t0, int(_INF)))
    return out


def derive(addr: np.ndarray) -> list[Mapping]:
    """Regions of the address space the data touches (when the recording has no mappings)."""
    if addr.size == 0:
        return []
    pages = np.unique(addr.astype(np.uint64) // PAGE)
    breaks = np.flatnonzero(np.diff(pages) * PAGE > GAP_BYTES) + 1
    out = []
    for i, run in enumerate(np.split(pages, breaks)):
        lo, hi = int(run[0]) * PAGE, (int(run[-1]) + 1) * PAGE
        m = Mapping(i, lo, hi - lo, f"region {i} (from the data)", 0, derived=True)
        m.segments.append((lo, hi, 0, int(_INF)))
        out.append(m)
    return out


def from_runs(runs: list[tuple[int, int]]) -> list[Mapping]:
    """Derived regions from runs of touched pages ``(start, end)`` (already merged across
    holes under ``GAP_BYTES``)."""
    out = []
    for i, (lo, hi) in enumerate(runs):
        # A run holding the top page ends at 2^64, which the native survey (uint64) reports
        # wrapped to 0.
        hi = int(hi) if int(hi) > int(lo) else ADDR_END
        m = Mapping(i, int(lo), int(hi) - int(lo), f"region {i} (from the data)", 0, derived=True)
        m.segments.append((int(lo), int(hi), 0, int(_INF)))
        out.append(m)
    return out


def segment_table(maps: list[Mapping]) -> tuple[np.ndarray, ...]:
    """Every segment as columns ``lo, hi, t0, t1, mapping id`` (uint64 / int64). A segment
    ending at the end of the address space (2^64) has ``hi`` = 2^64 - 1 (``_INF``), to be taken
    as inclusive (:func:`segment_end`)."""
    top = int(_INF)
    rows = [(lo, min(hi, top), t0, t1, m.id) for m in maps for lo, hi, t0, t1 in m.segments]
    if not rows:
        z = np.zeros(0, dtype=np.uint64)
        return z, z, z, z, np.zeros(0, dtype=np.int64)
    lo, hi, t0, t1, mid = zip(*rows, strict=True)
    u = np.uint64
    return (
        np.asarray(lo, dtype=u),
        np.asarray(hi, dtype=u),
        np.asarray(t0, dtype=u),
        np.asarray(t1, dtype=u),
        np.asarray(mid, dtype=np.int64),
    )


def segment_end(hi: int) -> int:
    """The end of a segment from the ``hi`` column of :func:`segment_table` (2^64 for the
    segment holding the top page)."""
    return ADDR_END if hi == int(_INF) else hi


def assign_segments(
    maps: list[Mapping], time_ns: np.ndarray, addr: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each point, the mapping id live at its address and time (or -1) and the index of
    the segment (of :func:`segment_table`) that holds it (or -1)."""
    lo, hi, t0, t1, mid = segment_table(maps)
    owner = np.full(addr.size, -1, dtype=np.int64)
    seg = np.full(addr.size, -1, dtype=np.int64)
    if addr.size == 0 or lo.size == 0:
        return owner, seg
    addr = addr.astype(np.uint64)
    t = time_ns.astype(np.uint64)
    order = np.argsort(addr, kind="stable")
    sorted_addr = addr[order]
    i0 = np.searchsorted(sorted_addr, lo, side="left")
    # A segment ending at 2^64 (stored as 2^64 - 1) holds the address 2^64 - 1 too.
    i1 = np.where(
        hi == _INF,
        np.searchsorted(sorted_addr, hi, side="right"),
        np.searchsorted(sorted_addr, hi, side="left"),
    )
    # Segments in the order of their mapping ids, so the earliest mapping wins ties as before.
    for k in np.lexsort((np.arange(lo.size), mid)):
        a, b = int(i0[k]), int(i1[k])
        if b <= a:
            continue
        idx = order[a:b]
        tt = t[idx]
        ok = (tt >= t0[k]) & (tt < t1[k])
        sel = idx[ok]
        sel = sel[owner[sel] < 0]
        owner[sel] = mid[k]
        seg[sel] = k
    return owner, seg


def assign(maps: list[Mapping], time_ns: np.ndarray, addr: np.ndarray) -> np.ndarray:
    """For each point, the id of the mapping live at its address and time, or -1."""
    return assign_segments(maps, time_ns, addr)[0]
