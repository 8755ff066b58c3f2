"""pte-scan, written in Python: the built-in ``pte-scan`` telemetry technique
(``crates/tierlab-sim/src/agents/telemetry/pte_scan.rs``) re-implemented against the Python
API, so that a run with it gives the built-in technique's statistics exactly
(``tests/test_python_agents.py`` checks it).

A pass walks every mapping in address order and tests-and-clears the Accessed bit of each
present PTE (each huge-page leaf), ``chunk_ptes`` entries per event, charging
``ns_per_pte`` per entry read; the next chunk follows after the time the chunk cost
(stretched by ``max_cpu``), the next pass ``interval`` after the previous one started. A page
is reported hot when the latest check of its PTE found the bit set (``report =
"last-check"``) or when the latest completed pass did (``"last-pass"``).

    [[telemetry]]
    kind = "python"
    path = "examples/pte_scan.py"
    class = "PteScan"
"""

from __future__ import annotations

import math

import numpy as np

from tierlab.agents import Context, Param, RegionsReport, Telemetry

PAGE = 4096


def round_half_up(x: float) -> int:
    """Round as the engine does (half away from zero; ``x >= 0``)."""
    r = math.floor(x)
    return r + 1 if x - r >= 0.5 else r


def push_run(runs: list[tuple[int, int]], s: int, e: int) -> None:
    """Append the page run ``[s, e)``, merging with the last when adjacent."""
    if runs and runs[-1][1] >= s:
        runs[-1] = (runs[-1][0], max(runs[-1][1], e))
    else:
        runs.append((s, e))


class PteScan(Telemetry):
    interval = Param(
        "1s", kind="duration", range=(1, None), doc="time between the starts of two passes"
    )
    ns_per_pte = Param(250.0, range=(0, 1e9), doc="cost of reading and clearing one PTE, ns")
    chunk_ptes = Param(65_536, range=(1, 1 << 30), doc="PTE slots scanned per event")
    flush = Param(False, doc="flush the TLBs after clearing")
    report = Param("last-check", doc="last-check or last-pass")
    max_cpu = Param(1.0, range=(1e-12, 1.0), doc="share of its core the scanner may take")

    def __init__(self) -> None:
        self.in_pass = False
        self.cursor = 0
        self.pass_start = 0
        self.cur: list[tuple[int, int]] = []
        self.prev: list[tuple[int, int]] = []
        self.pass_total = 0
        self.pass_done = 0
        self.passes = 0
        self.ptes = 0
        self.found = 0
        self.flushes = 0
        self.scan_ps = 0
        self.last_pass_ps = 0

    def start(self, ctx: Context) -> int:
        if self.report not in ("last-check", "last-pass"):
            raise ValueError(f"report = {self.report!r}: expected last-check or last-pass")
        return ctx.now_ps + self.interval * 1000

    @staticmethod
    def next_vma(
        vmas: tuple[np.ndarray, np.ndarray, np.ndarray], cursor: int
    ) -> tuple[int, int, int] | None:
        """The mapping holding ``cursor`` or the next one: (start, end, page size)."""
        s, e, p = vmas
        i = int(np.searchsorted(s, cursor, side="right")) - 1
        if i >= 0 and cursor < int(e[i]):
            return int(s[i]), int(e[i]), int(p[i])
        i += 1
        return (int(s[i]), int(e[i]), int(p[i])) if i < s.size else None

    def scan_chunk(self, ctx: Context, batches: list[tuple[int, int]]) -> tuple[int, bool]:
        budget = self.chunk_ptes
        read = 0
        vmas = ctx.vmas()
        while budget > 0:
            v = self.next_vma(vmas, self.cursor)
            if v is None:
                return read, True
            vs, ve, h = v
            s = max(self.cursor, vs)
            if h == PAGE:
                end = min(ve, s + budget * PAGE)
                budget -= (end - s) // PAGE
            else:
                end = min(ve, s + budget * h)
                budget -= -(-(end - s) // h)
            r = ctx.scan_accessed(s, end, h, clear=True)
            read += r.read
            self.found += r.pages
            for a, b in zip(r.starts.tolist(), r.ends.tolist(), strict=True):
                push_run(self.cur, a, b)
            if self.flush and r.lo < r.hi:
                batches.append((r.lo, r.hi))
            self.pass_done += end - s
            self.cursor = end
            if end >= ve and self.next_vma(vmas, end) is None:
                return read, True
        return read, False

    def on_interval(self, ctx: Context) -> int:
        now = ctx.now_ps
        if not self.in_pass:
            self.in_pass = True
            self.cursor = 0
            self.pass_start = now
            s, e, _ = ctx.vmas()
            self.pass_total = int((e - s).sum())
            self.pass_done = 0
            self.cur = []
        core = ctx.core
        clock0 = max(ctx.core_clock_ps(core), now)
        batches: list[tuple[int, int]] = []
        read, done = self.scan_chunk(ctx, batches)
        self.ptes += read
        before = ctx.core_clock_ps(core)
        ctx.charge_ns(float(read) * self.ns_per_pte)
        self.scan_ps += ctx.core_clock_ps(core) - max(before, now)
        for lo, hi in batches:
            ctx.invalidate_range(lo, hi)
            self.flushes += 1
        took = max(ctx.core_clock_ps(core) - clock0, 0)
        end = now + max(round_half_up(took / 1000 / self.max_cpu * 1000.0), 1000)
        if done:
            self.in_pass = False
            self.passes += 1
            self.last_pass_ps = end - self.pass_start
            self.prev, self.cur = self.cur, []
            self.pass_done = self.pass_total
            return max(self.pass_start + self.interval * 1000, end)
        return end

    def report_runs(self) -> list[tuple[int, int]]:
        if self.report == "last-pass" or not self.in_pass:
            return list(self.prev)
        cpage = self.cursor // PAGE
        out = list(self.cur)
        for s, e in self.prev:
            if e > cpage:
                push_run(out, max(s, cpage), e)
        return out

    def hot_set(self, start_ps: int, end_ps: int, ctx: Context) -> RegionsReport:
        vs, ve, _ = ctx.vmas()
        out: list[tuple[int, int]] = []
        for s, e in self.report_runs():
            a0, b0 = s * PAGE, e * PAGE
            lo = int(np.searchsorted(ve, a0, side="right"))
            for i in range(lo, vs.size):
                if int(vs[i]) >= b0:
                    break
                a, b = max(a0, int(vs[i])), min(b0, int(ve[i]))
                if a < b:
                    push_run(out, a, b)
        return RegionsReport([r[0] for r in out], [r[1] for r in out])

    def window_columns(self) -> dict[str, float]:
        if self.pass_total == 0:
            progress = 0.0 if self.in_pass else float(self.passes > 0)
        else:
            progress = self.pass_done / self.pass_total
        return {"pass_progress": progress, "passes": float(self.passes)}

    def stats(self) -> dict[str, float]:
        return {
            "passes": self.passes,
            "ptes_scanned": self.ptes,
            "pages_found_accessed": self.found,
            "flushes": self.flushes,
            "scan_seconds": self.scan_ps / 1e12,
            "last_pass_seconds": self.last_pass_ps / 1e12,
            "ns_per_pte": float(self.ns_per_pte),
        }
