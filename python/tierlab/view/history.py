"""Mapping history: rebuild the mappings live over time and assign each sample to one.

As the McKernel viewer does: replay the ``map`` / ``unmap`` events in time order; a map over
addresses still mapped ends the old mapping there at that time (the kernel replaced it); an
unmap ends every part of a mapping it covers (it may split a mapping). A sample belongs to the
mapping whose range holds its address at its time; samples in no mapping are dropped (counted).

Without mapping events (traces, imports), mappings are derived from the data: runs of touched
pages with gaps under ``GAP_BYTES`` form one region each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

PAGE = 4096
#: Largest hole between touched pages inside one derived region.
GAP_BYTES = 1 << 20
_INF = np.iinfo(np.uint64).max


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


def build(mappings: pd.DataFrame) -> list[Mapping]:
    """Mapping instances from a ``mappings`` table (events in any order: sorted stably by
    time, so equal times keep their recorded order)."""
    ev = mappings.sort_values("time_ns", kind="stable")
    out: list[Mapping] = []
    live: list[tuple[int, int, int, int]] = []  # (lo, hi, t_from, mapping id)
    remaining: dict[int, int] = {}

    def cut(lo: int, hi: int, t: int) -> None:
        nonlocal live
        keep = []
        for s_lo, s_hi, t0, mid in live:
            if s_hi <= lo or s_lo >= hi:
                keep.append((s_lo, s_hi, t0, mid))
                continue
            out[mid].segments.append((s_lo, s_hi, t0, t))
            for a, b in ((s_lo, min(lo, s_hi)), (max(hi, s_lo), s_hi)):
                if b > a:
                    keep.append((a, b, t, mid))
            gone = min(hi, s_hi) - max(lo, s_lo)
            remaining[mid] -= gone
            if remaining[mid] <= 0:
                out[mid].unmap_time_ns = t
        live = keep

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
        lo, hi = int(start), int(start) + int(length)
        cut(lo, hi, int(t))
        if kind == "map":
            m = Mapping(len(out), lo, hi - lo, str(name), int(t))
            out.append(m)
            remaining[m.id] = hi - lo
            live.append((lo, hi, int(t), m.id))
    for lo, hi, t0, mid in live:
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
        m = Mapping(i, int(lo), int(hi) - int(lo), f"region {i} (from the data)", 0, derived=True)
        m.segments.append((int(lo), int(hi), 0, int(_INF)))
        out.append(m)
    return out


def assign(maps: list[Mapping], time_ns: np.ndarray, addr: np.ndarray) -> np.ndarray:
    """For each point, the id of the mapping live at its address and time, or -1."""
    result = np.full(addr.size, -1, dtype=np.int64)
    if addr.size == 0:
        return result
    order = np.argsort(addr, kind="stable")
    sorted_addr = addr[order]
    t = time_ns.astype(np.uint64)
    for m in maps:
        for lo, hi, t0, t1 in m.segments:
            i0, i1 = np.searchsorted(sorted_addr, [np.uint64(lo), np.uint64(hi)], side="left")
            if i1 <= i0:
                continue
            idx = order[i0:i1]
            tt = t[idx]
            ok = (tt >= np.uint64(t0)) & (tt < np.uint64(t1))
            sel = idx[ok]
            result[sel[result[sel] < 0]] = m.id
    return result
