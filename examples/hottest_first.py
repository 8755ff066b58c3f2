"""hottest-first, written in Python: the built-in ``hottest-first`` tiering policy
(``crates/tierlab-sim/src/agents/tiering/hottest_first.rs``) re-implemented against the
Python API, step for step, so that a run with it gives the built-in policy's statistics
exactly (``tests/test_python_agents.py`` checks it).

At every report of the followed technique it ranks what was reported hot (regions by
``nr_accesses``, then age, then size; sampled pages by their decayed sample count; a hot set's
ranges all equally hot) and cuts the list where it fills ``fill`` of the fast tier: the plan.
Every ``interval`` it walks the plan hottest first and promotes the plan's pages that are on
the slow tier, in batches of 512, within the rate limit and the time its core has; when the
fast tier is full it first demotes the coldest pages it promoted earlier that rank below the
item being promoted.

    [tiering]
    kind = "python"
    path = "examples/hottest_first.py"
    class = "HottestFirst"
    telemetry = "damon"
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np

from tierlab.agents import Context, HotSet, Param, Regions, Samples, TieringPolicy

PAGE = 4096
BATCH = 512
#: Sample feeds are re-ranked at most this often (ps).
SAMPLE_REPLAN_PS = 200_000_000_000
LIST = 4096  # pages listed per look at the machine


class HottestFirst(TieringPolicy):
    interval = Param("10ms", kind="duration", range=(1, None), doc="policy-loop period")
    fill = Param(0.95, range=(1e-12, 1.0), doc="fraction of the fast tier the plan may fill")
    sample_decay = Param(
        "1s", kind="duration", range=(1, None), doc="sample counts halve this often"
    )
    min_samples = Param(1, range=(1, None), doc="samples a page needs to be a candidate")
    ns_per_item = Param(100.0, range=(0, 1e9), doc="CPU cost of ranking one region or page, ns")

    def __init__(self) -> None:
        self.next_ps = 0
        # The plan: parallel arrays, hottest first; the walk's position (item, address).
        self.p_start = np.zeros(0, np.uint64)
        self.p_single: list[bool] = []
        self.p_index: dict[int, int] = {}
        self.p_end = np.zeros(0, np.uint64)
        self.p_score = np.zeros(0)
        self.pos = (0, 0)
        # Runs this policy promoted: their starts, sorted; their ends and scores by start.
        self.res_keys: list[int] = []
        self.res_end: dict[int, int] = {}
        self.res_score: dict[int, float] = {}
        # Per plan item: a one-page item whose page is in a resident run (kept up to date as
        # pages are promoted and demoted; the walk skips such items without looking).
        self.p_done = np.zeros(0, bool)
        # Decayed sample counts: sorted page numbers and their counts.
        self.vpns = np.zeros(0, np.uint64)
        self.counts = np.zeros(0)
        self.pending: list[np.ndarray] = []
        self.dirty = False
        self.last_replan = 0
        self.last_decay = 0
        self.plans = 0
        self.plan_bytes = 0
        self.blocked = 0

    # -- feeds ---------------------------------------------------------------------------------
    def on_feed(self, feed: Samples | Regions | HotSet, ctx: Context) -> None:
        if isinstance(feed, Regions):
            hot = feed.nr_accesses > feed.hot_threshold
            self.replan(
                feed.start[hot],
                feed.end[hot],
                feed.nr_accesses[hot].astype(float),
                feed.age[hot].astype(np.int64),
                ctx,
            )
        elif isinstance(feed, Samples):
            # Counted at the next policy step (nothing reads the counts before it).
            self.pending.append(feed.addr)
            self.dirty = True
        elif feed.pages is not None:
            p = feed.pages
            self.replan(p * PAGE, (p + 1) * PAGE, np.ones(p.size), np.zeros(p.size, np.int64), ctx)
        else:
            s = feed.start & ~np.uint64(PAGE - 1)
            e = (feed.end + np.uint64(PAGE - 1)) // np.uint64(PAGE) * np.uint64(PAGE)
            self.replan(s, e, np.ones(s.size), np.zeros(s.size, np.int64), ctx)

    def count_samples(self) -> None:
        """Add the samples received since the last step to the counts."""
        if not self.pending:
            return
        u, n = np.unique(np.concatenate(self.pending) >> np.uint64(12), return_counts=True)
        self.pending = []
        i = np.searchsorted(self.vpns, u)
        known = i < self.vpns.size
        known[known] = self.vpns[i[known]] == u[known]
        self.counts[i[known]] += n[known]
        self.vpns = np.concatenate([self.vpns, u[~known]])
        self.counts = np.concatenate([self.counts, n[~known].astype(float)])
        order = np.argsort(self.vpns, kind="stable")
        self.vpns, self.counts = self.vpns[order], self.counts[order]

    def replan(
        self, start: np.ndarray, end: np.ndarray, score: np.ndarray, tie: np.ndarray, ctx: Context
    ) -> None:
        """Rank the candidates, cut the plan at the fast tier's budget, re-score the runs."""
        ctx.charge_ns(float(start.size) * self.ns_per_item)
        start, end = start.astype(np.uint64), end.astype(np.uint64)
        size = end - start
        order = np.lexsort((start, size, -tie, -score))
        start, end, score, size = start[order], end[order], score[order], size[order]
        budget = int(ctx.fast_capacity() * self.fill)
        # Items are taken whole while they fit; the first that does not is cut to whole pages.
        sz = size.astype(np.int64)
        before = budget - np.concatenate([[0], np.cumsum(sz)[:-1]]).astype(np.int64)
        fits = (before >= PAGE) & (sz <= (before & ~(PAGE - 1)))
        k = int(np.argmin(fits)) if not fits.all() else int(fits.size)
        if k < fits.size and before[k] >= PAGE:
            end = end.copy()
            end[k] = start[k] + np.uint64(int(before[k]) & ~(PAGE - 1))
            k += 1
        start, end, score = start[:k], end[:k], score[:k]
        self.p_start, self.p_end, self.p_score = start, end, score
        self.plan_bytes = int((end - start).sum())
        self.pos = (0, int(start[0]) if start.size else 0)
        self.plans += 1
        # Re-score the resident runs: the best plan item they overlap, else 0.
        by = np.argsort(start, kind="stable")
        bs, be, bsc = start[by], end[by], score[by]
        self.p_single = (end - start == PAGE).tolist()
        self.p_index = dict(zip(start.tolist(), range(start.size), strict=True))
        if self.res_keys:
            rs = np.array(self.res_keys, dtype=np.uint64)
            re = np.array([self.res_end[k] for k in self.res_keys], dtype=np.uint64)
            lo = np.searchsorted(be, rs, side="right")
            hi = np.searchsorted(bs, re, side="left")
            best = np.where(
                hi > lo, bsc[np.minimum(lo, max(bsc.size - 1, 0))] if bsc.size else 0.0, 0.0
            )
            for i in np.flatnonzero(hi - lo > 1):
                best[i] = bsc[lo[i] : hi[i]].max()
            self.res_score = dict(zip(self.res_keys, best.tolist(), strict=True))
            j = np.searchsorted(rs, start, side="right").astype(np.int64) - 1
            inside = (j >= 0) & (start < re[np.maximum(j, 0)])
            self.p_done = inside & (end - start == PAGE)
        else:
            self.p_done = np.zeros(start.size, bool)

    def next_undone(self) -> np.ndarray:
        """For each plan item, the first item at or after it not in ``p_done``."""
        n = self.p_done.size
        idx = np.where(self.p_done, n, np.arange(n))
        return np.minimum.accumulate(idx[::-1])[::-1] if n else idx

    def mark(self, pages: list[int], done: bool) -> None:
        """Keep ``p_done`` in step: ``pages`` became resident (or stopped being)."""
        index = self.p_index
        for a in pages:
            k = index.get(a)
            if k is not None:
                self.p_done[k] = done and self.p_single[k]

    # -- resident runs ---------------------------------------------------------------------------
    def add_resident(self, start: int, end: int, score: float) -> None:
        s, e = start, end
        keys, ends, scores = self.res_keys, self.res_end, self.res_score
        i = bisect_right(keys, s) - 1
        if i >= 0 and ends[keys[i]] == s and scores[keys[i]] == score:
            s = keys[i]
        if scores.get(e) == score:
            del keys[bisect_left(keys, e)]
            del scores[e]
            e = ends.pop(e)
        if s not in ends:
            keys.insert(bisect_left(keys, s), s)
        ends[s] = e
        scores[s] = score

    def resident_end(self, va: int) -> int | None:
        """The end of the resident run holding ``va``."""
        i = bisect_right(self.res_keys, va) - 1
        if i >= 0:
            e = self.res_end[self.res_keys[i]]
            if va < e:
                return e
        return None

    def make_room(self, need: int, score: float, ctx: Context) -> int:
        """Demote at least ``need`` bytes of runs ranked below ``score``, coldest first."""
        victims = sorted((sc, s) for s, sc in self.res_score.items() if sc < score)
        freed = 0
        fast = ctx.fast_node
        for _, s in victims:
            if freed >= need:
                break
            del self.res_keys[bisect_left(self.res_keys, s)]
            e, sc = self.res_end.pop(s), self.res_score.pop(s)
            va, pages, got = s, [], 0
            while va < e and freed + got < need:
                bases, sizes, nodes, stop = ctx.present_pages(va, e, LIST)
                on = nodes == fast
                cum = freed + got + np.cumsum(np.where(on, sizes, 0).astype(np.int64))
                done = np.flatnonzero(on & (cum >= need))
                last = int(done[0]) if done.size else bases.size - 1
                take = np.flatnonzero(on[: last + 1])
                pages.extend(bases[take].tolist())
                got += int(sizes[take].sum())
                va = int(bases[last] + sizes[last]) if done.size else stop
            ctx.demote(pages)
            self.mark(pages, False)
            freed += got
            if va < e:
                self.res_keys.insert(bisect_left(self.res_keys, va), va)
                self.res_end[va] = e
                self.res_score[va] = sc
        return freed

    # -- the policy loop -------------------------------------------------------------------------
    def collect(
        self, va: int, end: int, slow: int, budget: int
    ) -> tuple[list[int], list[int], int, int]:
        """Walk ``[va, end)`` as the built-in policy does: skip resident runs, take the pages
        on the slow tier until 512 are taken or the next would exceed ``budget``. Returns the
        pages, their sizes, their bytes and where the walk stopped."""
        batch: list[int] = []
        sizes: list[int] = []
        got = 0
        while va < end and len(batch) < BATCH:
            r = self.resident_end(va)
            if r is not None:
                va = r
                continue
            i = bisect_right(self.res_keys, va)
            limit = min(end, self.res_keys[i]) if i < len(self.res_keys) else end
            bases, sz, nodes, stop = ctx_list(self._ctx, va, limit)
            slow_i = np.flatnonzero(nodes == slow)
            cum = got + np.cumsum(sz[slow_i].astype(np.int64))
            over = np.flatnonzero(cum > budget)
            room = BATCH - len(batch)
            if over.size and int(over[0]) < room:
                k = int(over[0])
                batch.extend(bases[slow_i[:k]].tolist())
                sizes.extend(sz[slow_i[:k]].tolist())
                got = int(cum[k - 1]) if k else got
                return batch, sizes, got, max(va, int(bases[slow_i[k]]))
            if slow_i.size >= room:
                take = slow_i[:room]
                batch.extend(bases[take].tolist())
                sizes.extend(sz[take].tolist())
                got = int(cum[room - 1])
                last = int(take[-1])
                return batch, sizes, got, int(bases[last] + sz[last])
            batch.extend(bases[slow_i].tolist())
            sizes.extend(sz[slow_i].tolist())
            got = int(cum[-1]) if slow_i.size else got
            va = stop
        return batch, sizes, got, va

    def on_interval(self, ctx: Context) -> None:
        now = ctx.now_ps
        self.next_ps = now + self.interval * 1000
        self.count_samples()
        if now >= self.last_decay + self.sample_decay * 1000 and self.vpns.size:
            self.last_decay = now
            self.counts *= 0.5
            keep = self.counts >= 0.5
            self.vpns, self.counts = self.vpns[keep], self.counts[keep]
            self.dirty = True
        if self.dirty and now >= self.last_replan + SAMPLE_REPLAN_PS:
            self.dirty = False
            self.last_replan = now
            sel = self.counts >= float(self.min_samples)
            v = self.vpns[sel]
            self.replan(v * PAGE, (v + 1) * PAGE, self.counts[sel], np.zeros(v.size, np.int64), ctx)
        slow = ctx.slow_node
        self._ctx = ctx
        n = self.p_start.size
        nxt = self.next_undone()
        while self.pos[0] < n and ctx.core_free_before(self.next_ps):
            k = self.pos[0]
            if self.p_done[k] and self.pos[1] <= int(self.p_start[k]):
                # One-page items already resident: the walk passes them without charging.
                j = int(nxt[k])
                if j <= k:  # the item became resident since nxt was made
                    nxt = self.next_undone()
                    j = int(nxt[k])
                self.pos = (j, int(self.p_start[j]) if j < n else 0)
                continue
            it_start, it_end, score = (
                int(self.p_start[k]),
                int(self.p_end[k]),
                float(self.p_score[k]),
            )
            va = max(self.pos[1], it_start)
            if it_end - va == PAGE and va % PAGE == 0:
                # One page (a sampled page's item): the walk below, without listing.
                r = self.resident_end(va)
                size = ctx.page_size_of(va) or PAGE if r is None else PAGE
                if r is not None:
                    batch, sizes, got, va = [], [], 0, r
                elif size != PAGE:
                    batch, sizes, got, va = self.collect(va, it_end, slow, ctx.budget())
                elif ctx.node_of(va) != slow:
                    batch, sizes, got, va = [], [], 0, va + PAGE
                elif size <= ctx.budget():
                    batch, sizes, got, va = [va], [size], size, va + size
                else:
                    batch, sizes, got = [], [], 0  # out of budget: the walk stays here
            else:
                batch, sizes, got, va = self.collect(va, it_end, slow, ctx.budget())
            if not batch:
                if va >= it_end:
                    self.pos = (k + 1, int(self.p_start[k + 1]) if k + 1 < n else 0)
                    continue
                break  # out of budget for now
            free = ctx.fast_free()
            if free < got:
                freed = self.make_room(got - free, score, ctx)
                nxt = self.next_undone()
                if free + freed < got:
                    # Nothing colder to make room with: the plan is done for now.
                    self.blocked += 1
                    fit = (free + freed) // PAGE
                    batch, sizes = batch[:fit], sizes[:fit]
                    if not batch:
                        self.pos = (n, self.pos[1])
                        break
            moved, _ = ctx.promote(batch)
            self.mark(batch[:moved], True)
            j = 0
            while j < moved:
                s = batch[j]
                e = s + sizes[j]
                j += 1
                while j < moved and batch[j] == e:
                    e += sizes[j]
                    j += 1
                self.add_resident(s, e, score)
            if moved < len(batch):
                self.pos = (k, batch[moved])
                break
            self.pos = (k, va)
        self._ctx = None
        return None

    def window_columns(self) -> dict[str, float]:
        return {"plan_bytes": float(self.plan_bytes)}

    def stats(self) -> dict[str, float]:
        return {
            "plans": self.plans,
            "plan_bytes": self.plan_bytes,
            "resident_runs": len(self.res_keys),
            "blocked": self.blocked,
            "rate_limit_mbps": float(self.shared["rate_limit_mbps"]),
        }


def ctx_list(ctx: Context, va: int, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    return ctx.present_pages(va, limit, LIST)
