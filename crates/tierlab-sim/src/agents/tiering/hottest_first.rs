//! `hottest-first`: generic tiering driven by any telemetry observer (the Telescope
//! authors' real-world setup: "telemetry outputs the list of hot regions; the hottest are
//! migrated to DRAM").
//!
//! # Model
//! At every report of the followed technique the policy **ranks** what was reported hot:
//! - region techniques (DAMON, Telescope): the regions of the aggregation snapshot with
//!   `nr_accesses > hot_threshold` (the technique's own threshold), by `nr_accesses`, then
//!   age (older first), then size (smaller, i.e. denser, first);
//! - PEBS: pages by their sample count (counts halve every `sample_decay`; a page needs
//!   `min_samples`), re-ranked at most every 200 ms (a region technique's aggregation);
//! - any other technique: the window's reported ranges, all equally hot.
//!
//! The ranked list is cut where it fills `fill` of the fast tier: that is the **plan**. The
//! policy loop (every `interval`) walks the plan hottest first and promotes its pages that
//! are on the slow tier, in batches of 512 pages (one TLB shootdown per batch), within the
//! promotion rate limit (`rate_limit_mbps`, a token bucket holding one interval's worth) and
//! the time its core has. When the fast tier has no room, it first **demotes** the coldest
//! pages it promoted earlier whose current rank is below the item being promoted (pages no
//! longer reported hot rank 0); it never demotes hotter data for colder.
//!
//! Parameters: [`HottestFirstParams`] (defaults, ranges and sources in `docs/parameters.md`).

use std::collections::{BTreeMap, HashMap};
use tierlab_core::{bytes_of, page_addr, pages_for, vpn, PAGE_MASK, PAGE_SIZE};

use tierlab_core::param::{params, Provenance};

use super::{Feed, TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared, BATCH};
use crate::agents::{FeedKind, Ps};
use crate::error::Result;
use crate::stats::Stats;
use crate::units::Duration;

/// Parameters of `hottest-first`.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct HottestFirstParams {
    /// Policy-loop period.
    #[param(default = Duration(10_000_000), assumed = "HeMem's policy-loop period")]
    pub interval: Duration,
    /// Fraction of the fast tier the plan may fill.
    #[param(
        default = 0.95,
        range = "(0, 1]",
        unit = "fraction",
        assumed = "5% of the fast tier left free (TPP-like headroom)"
    )]
    pub fill: f64,
    /// PEBS feeds: sample counts halve every this long.
    #[param(default = Duration(1_000_000_000),
            assumed = "PEBS counts halve each second (a 1 s hot window, as the scoring)")]
    pub sample_decay: Duration,
    /// PEBS feeds: samples a page needs to be a candidate.
    #[param(
        default = 1,
        range = "[1, 281474976710656]",
        unit = "samples",
        assumed = "every sampled page is a candidate, ranked by count"
    )]
    pub min_samples: u32,
    /// CPU cost of ranking one reported region or page.
    #[param(
        default = 100.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "ranking cost per reported region or page"
    )]
    pub ns_per_item: f64,
}

impl TieringParams for HottestFirstParams {
    fn build(&self, shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        if self.interval.0 == 0 {
            return Err(ctx.err("interval", "must be > 0"));
        }
        if self.sample_decay.0 == 0 {
            return Err(ctx.err("sample_decay", "must be > 0"));
        }
        Ok(Box::new(HottestFirst::new(self.clone(), shared.rate_limit_mbps)))
    }
    fn period(&self) -> Ps {
        self.interval.ps()
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        Some(&[FeedKind::Regions, FeedKind::Samples, FeedKind::HotSet])
    }
}

/// One ranked candidate: a page-aligned byte range `[start, end)` and its score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Item {
    pub start: u64,
    pub end: u64,
    pub score: f64,
}

/// A run of pages this policy promoted (still on the fast tier unless reclaimed by others).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ext {
    end: u64,
    score: f64,
}

/// PEBS feeds: the plan is re-ranked at most this often.
const SAMPLE_REPLAN: Ps = Ps::from_ns(200_000_000);

/// The `hottest-first` policy.
pub struct HottestFirst {
    rate_limit_mbps: f64,
    p: HottestFirstParams,
    next: Ps,
    /// Ranked plan (priority order) and the walk position in it.
    plan: Vec<Item>,
    pos: (usize, u64),
    resident: BTreeMap<u64, Ext>,
    /// PEBS: decayed sample counts per page, and bookkeeping.
    counts: SampleCounts,
    samples_dirty: bool,
    last_replan: Ps,
    last_decay: Ps,
    plans: u64,
    plan_bytes: u64,
    blocked: u64,
}

impl HottestFirst {
    fn new(p: HottestFirstParams, rate_limit_mbps: f64) -> Self {
        HottestFirst {
            rate_limit_mbps,
            next: p.interval.ps(),
            p,
            plan: Vec::new(),
            pos: (0, 0),
            resident: BTreeMap::new(),
            counts: SampleCounts::default(),
            samples_dirty: false,
            last_replan: Ps::ZERO,
            last_decay: Ps::ZERO,
            plans: 0,
            plan_bytes: 0,
            blocked: 0,
        }
    }

    /// Rank `items` (any order), cut the plan at the fast tier's budget, re-score resident
    /// runs.
    fn replan(&mut self, items: Vec<(Item, u32)>, ctx: &mut TieringCtx) {
        ctx.charge(Ps::from_ns_f64(items.len() as f64 * self.p.ns_per_item));
        self.plan = rank(items, plan_budget(ctx.fast_capacity(), self.p.fill));
        self.plan_bytes = self.plan.iter().map(|i| i.end - i.start).sum();
        self.pos = (0, self.plan.first().map_or(0, |i| i.start));
        self.plans += 1;
        // Re-score resident runs: the best plan item they overlap, else 0.
        let mut by_addr: Vec<Item> = self.plan.clone();
        by_addr.sort_by_key(|i| i.start);
        for (&s, e) in self.resident.iter_mut() {
            let mut best = 0.0f64;
            let k = by_addr.partition_point(|i| i.end <= s);
            for it in &by_addr[k..] {
                if it.start >= e.end {
                    break;
                }
                best = best.max(it.score);
            }
            e.score = best;
        }
    }

    fn add_resident(&mut self, start: u64, end: u64, score: f64) {
        let (mut s, mut e) = (start, end);
        if let Some((&ps, pe)) = self.resident.range(..=s).next_back() {
            if pe.end == s && pe.score == score {
                s = ps;
            }
        }
        if let Some(ne) = self.resident.get(&e).copied() {
            if ne.score == score {
                self.resident.remove(&e);
                e = ne.end;
            }
        }
        self.resident.insert(s, Ext { end: e, score });
    }

    fn resident_containing(&self, va: u64) -> Option<u64> {
        match self.resident.range(..=va).next_back() {
            Some((_, e)) if va < e.end => Some(e.end),
            _ => None,
        }
    }

    /// Demote at least `need` bytes of resident runs ranked below `score`, coldest first.
    /// Returns the bytes freed.
    fn make_room(&mut self, need: u64, score: f64, ctx: &mut TieringCtx) -> Result<u64> {
        let victims = demotion_order(self.resident.iter().map(|(&s, e)| (s, e.score)), score);
        let mut freed = 0u64;
        let fast = ctx.tiers().fast;
        for s in victims {
            if freed >= need {
                break;
            }
            let Some(e) = self.resident.remove(&s) else { continue };
            let mut va = s;
            let mut pages = Vec::new();
            let mut bytes = 0;
            while va < e.end && freed + bytes < need {
                let b = super::page_bytes(&ctx.machine, va);
                if ctx.machine.node_of(va) == Some(fast) {
                    pages.push(va);
                    bytes += b;
                }
                va = (va & !(b - 1)) + b;
            }
            ctx.demote(&pages)?;
            freed += bytes;
            if va < e.end {
                self.resident.insert(va, e);
            }
        }
        Ok(freed)
    }

    fn sample_items(&self) -> Vec<(Item, u32)> {
        self.counts.items(self.p.min_samples)
    }
}

impl TieringPolicy for HottestFirst {
    fn next_event(&self) -> Ps {
        self.next
    }

    fn on_feed(&mut self, feed: &Feed, ctx: &mut TieringCtx) -> Result<()> {
        match feed {
            Feed::Regions(snap) => {
                let hot_threshold = snap.hot_threshold;
                let items = snap
                    .regions
                    .iter()
                    .filter(|r| r.nr_accesses > hot_threshold)
                    .map(|r| (Item { start: r.start, end: r.end, score: r.nr_accesses as f64 }, r.age))
                    .collect();
                self.replan(items, ctx);
            }
            Feed::Samples(drains) => {
                for d in drains.iter() {
                    for &(addr, _) in &d.records {
                        self.counts.add(vpn(addr));
                    }
                }
                self.samples_dirty = true;
            }
            Feed::HotSet { report, .. } => {
                let items = match &**report {
                    crate::agents::HotReport::Regions(r) => r
                        .iter()
                        .map(|&(s, e)| {
                            (Item { start: s & !PAGE_MASK, end: bytes_of(pages_for(e)), score: 1.0 }, 0)
                        })
                        .collect(),
                    crate::agents::HotReport::Pages(p) => p
                        .iter()
                        .map(|&v| (Item { start: page_addr(v), end: page_addr(v + 1), score: 1.0 }, 0))
                        .collect(),
                };
                self.replan(items, ctx);
            }
        }
        Ok(())
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let now = ctx.now;
        self.next = now + self.p.interval.ps();
        if now >= self.last_decay + self.p.sample_decay.ps() && !self.counts.is_empty() {
            self.last_decay = now;
            self.counts.halve();
            self.samples_dirty = true;
        }
        if self.samples_dirty && now >= self.last_replan + SAMPLE_REPLAN {
            self.samples_dirty = false;
            self.last_replan = now;
            let items = self.sample_items();
            self.replan(items, ctx);
        }
        let until = self.next;
        let slow = ctx.tiers().slow;
        let mut batch: Vec<u64> = Vec::with_capacity(BATCH);
        while self.pos.0 < self.plan.len() && ctx.core_free_before(until) {
            let it = self.plan[self.pos.0];
            let mut va = self.pos.1.max(it.start);
            batch.clear();
            let mut bytes = 0u64;
            let budget = ctx.kind.mover.budget();
            while va < it.end && batch.len() < BATCH {
                if let Some(end) = self.resident_containing(va) {
                    va = end;
                    continue;
                }
                let b = super::page_bytes(&ctx.machine, va);
                if ctx.machine.node_of(va) == Some(slow) {
                    if bytes + b > budget {
                        break;
                    }
                    batch.push(va & !(b - 1));
                    bytes += b;
                }
                va = (va & !(b - 1)) + b;
            }
            if batch.is_empty() {
                if va >= it.end {
                    self.pos = (self.pos.0 + 1, self.plan.get(self.pos.0 + 1).map_or(0, |i| i.start));
                    continue;
                }
                // Out of budget for now.
                break;
            }
            let free = ctx.fast_free();
            if free < bytes {
                let freed = self.make_room(bytes - free, it.score, ctx)?;
                if free + freed < bytes {
                    // Nothing colder to make room with: the plan is done for now.
                    self.blocked += 1;
                    let fit = (free + freed) / PAGE_SIZE;
                    batch.truncate(fit as usize);
                    if batch.is_empty() {
                        self.pos.0 = self.plan.len();
                        break;
                    }
                }
            }
            let (moved, _) = ctx.promote(&batch)?;
            let moved = moved as usize;
            // Record the moved pages as resident runs.
            let mut k = 0;
            while k < moved {
                let s = batch[k];
                let mut e = s + super::page_bytes(&ctx.machine, s);
                k += 1;
                while k < moved && batch[k] == e {
                    e += super::page_bytes(&ctx.machine, batch[k]);
                    k += 1;
                }
                self.add_resident(s, e, it.score);
            }
            if moved < batch.len() {
                self.pos.1 = batch[moved];
                break;
            }
            self.pos.1 = va;
        }
        Ok(())
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        vec![("plan_bytes".into(), self.plan_bytes as f64)]
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.plans"), self.plans);
        out.set(format!("{prefix}.plan_bytes"), self.plan_bytes);
        out.set(format!("{prefix}.resident_runs"), self.resident.len());
        out.set(format!("{prefix}.blocked"), self.blocked);
        out.set(format!("{prefix}.rate_limit_mbps"), self.rate_limit_mbps);
    }
}

impl crate::params::SharedDefaults<TieringShared> for HottestFirstParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(2048.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => {
                Some(Provenance::Assumed("Memtis' migration cap, 2 GB/s (reference/memory-management.md)"))
            }
            "copy_mode" => Some(Provenance::Assumed(
                "tierlab's telemetry-driven policy: a migration thread on the policy's core",
            )),
            _ => None,
        }
    }
}

// -- the decision core ----------------------------------------------------------------------
//
// The parts of the policy that decide, free of the machine: ranking (`rank`), the decayed
// sample counts (`SampleCounts`) and the order of demotion (`demotion_order`). The simulated
// policy above calls them; the live loop (`tierlab tier`, through `tierlab-py`'s `tier.rs`)
// calls `decide`, which composes them over a page-granular view of the fast tier.

/// Bytes of the fast tier a plan may fill: `capacity * fill`.
pub fn plan_budget(capacity: u64, fill: f64) -> u64 {
    (capacity as f64 * fill) as u64
}

/// Rank candidates (score descending, then tiebreak descending — a region's age — then size
/// ascending, then address) and cut the list where it fills `budget` bytes (the last item is
/// shortened to whole pages; nothing under a page is kept).
pub fn rank(mut items: Vec<(Item, u32)>, budget: u64) -> Vec<Item> {
    items.sort_by(|(a, ta), (b, tb)| {
        b.score
            .total_cmp(&a.score)
            .then(tb.cmp(ta))
            .then((a.end - a.start).cmp(&(b.end - b.start)))
            .then(a.start.cmp(&b.start))
    });
    let mut left = budget;
    let mut plan = Vec::new();
    for (it, _) in items {
        if left < PAGE_SIZE {
            break;
        }
        let len = (it.end - it.start).min(left & !PAGE_MASK);
        plan.push(Item { start: it.start, end: it.start + len, score: it.score });
        left -= len;
    }
    plan
}

/// Decayed sample counts per page (virtual page number -> count).
#[derive(Clone, Debug, Default)]
pub struct SampleCounts {
    counts: HashMap<u64, f64>,
}

impl SampleCounts {
    /// One sample on page `vpn`.
    pub fn add(&mut self, vpn: u64) {
        *self.counts.entry(vpn).or_insert(0.0) += 1.0;
    }

    /// Halve every count; pages falling under 0.5 are forgotten.
    pub fn halve(&mut self) {
        self.counts.retain(|_, c| {
            *c *= 0.5;
            *c >= 0.5
        });
    }

    /// Forget page `vpn` (its memory was unmapped).
    pub fn forget(&mut self, vpn: u64) {
        self.counts.remove(&vpn);
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// The count of page `vpn` (0 when unknown).
    pub fn get(&self, vpn: u64) -> f64 {
        self.counts.get(&vpn).copied().unwrap_or(0.0)
    }

    /// Pages with at least `min_samples`, one candidate each (any order; `rank` orders them).
    pub fn items(&self, min_samples: u32) -> Vec<(Item, u32)> {
        let min = min_samples as f64;
        self.counts
            .iter()
            .filter(|(_, &c)| c >= min)
            .map(|(&v, &c)| (Item { start: page_addr(v), end: page_addr(v + 1), score: c }, 0))
            .collect()
    }
}

/// The starts of the `resident` runs `(start, score)` scored below `score`, coldest first
/// (ties: lower address first): the order in which room is made for an item of `score`.
pub fn demotion_order(resident: impl Iterator<Item = (u64, f64)>, score: f64) -> Vec<u64> {
    let mut victims: Vec<(f64, u64)> = resident.filter(|&(_, s)| s < score).map(|(a, s)| (s, a)).collect();
    victims.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    victims.into_iter().map(|(_, a)| a).collect()
}

/// What `decide` chose: pages (addresses) to promote in order, pages to demote first to
/// make room, and how the plan ended.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    /// (page address, score), hottest first.
    pub promote: Vec<(u64, f64)>,
    /// (page address, score), coldest first; demoted before the promotions that need room.
    pub demote: Vec<(u64, f64)>,
    /// Pages in the plan (the ranked list cut at the budget).
    pub plan_pages: u64,
    /// The plan stopped because nothing colder could make room (the policy's `blocked`).
    pub blocked: bool,
}

/// One policy step over pages, as the simulated policy takes it: rank the sampled pages
/// (`counts`, at least `min_samples`), cut at `capacity * fill` bytes, then walk the plan
/// hottest first; a planned page not on the fast tier is promoted, and when the fast tier
/// (`capacity` bytes, holding the pages `fast`) has no room, the coldest page on it scored
/// below the page being promoted is demoted first (a page on the fast tier scores as its
/// plan entry, or 0 when it is not planned); the walk stops when nothing colder is left
/// (`blocked`) or after `max_promote` promotions (the rate limit's share of one step).
pub fn decide(
    counts: &SampleCounts,
    fast: &[u64],
    capacity: u64,
    fill: f64,
    min_samples: u32,
    max_promote: u64,
) -> Decision {
    let plan = rank(counts.items(min_samples), plan_budget(capacity, fill));
    let mut on_fast: BTreeMap<u64, f64> = fast.iter().map(|&a| (a & !PAGE_MASK, 0.0)).collect();
    for it in &plan {
        // Pages of the plan that are already on the fast tier score as their entry.
        for (_, s) in on_fast.range_mut(it.start..it.end) {
            *s = it.score;
        }
    }
    let mut free = capacity.saturating_sub(on_fast.len() as u64 * PAGE_SIZE);
    let mut d = Decision {
        plan_pages: plan.iter().map(|i| (i.end - i.start) / PAGE_SIZE).sum(),
        ..Default::default()
    };
    'walk: for it in &plan {
        let mut va = it.start;
        while va < it.end {
            if d.promote.len() as u64 >= max_promote {
                break 'walk;
            }
            if on_fast.contains_key(&va) {
                va += PAGE_SIZE;
                continue;
            }
            if free < PAGE_SIZE {
                match demotion_order(on_fast.iter().map(|(&a, &s)| (a, s)), it.score).first() {
                    Some(&victim) => {
                        let s = on_fast.remove(&victim).unwrap_or(0.0);
                        d.demote.push((victim, s));
                        free += PAGE_SIZE;
                    }
                    None => {
                        d.blocked = true;
                        break 'walk;
                    }
                }
            }
            free -= PAGE_SIZE;
            on_fast.insert(va, it.score);
            d.promote.push((va, it.score));
            va += PAGE_SIZE;
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pages: &[(u64, u32)]) -> SampleCounts {
        let mut c = SampleCounts::default();
        for &(v, n) in pages {
            for _ in 0..n {
                c.add(v);
            }
        }
        c
    }

    #[test]
    fn rank_orders_by_score_then_address_and_cuts_at_the_budget() {
        let c = counts(&[(10, 1), (11, 5), (12, 3), (13, 3)]);
        let plan = rank(c.items(1), 3 * PAGE_SIZE);
        let got: Vec<(u64, f64)> = plan.iter().map(|i| (vpn(i.start), i.score)).collect();
        assert_eq!(got, vec![(11, 5.0), (12, 3.0), (13, 3.0)]);
        assert_eq!(rank(c.items(4), 100 * PAGE_SIZE).len(), 1);
    }

    #[test]
    fn halving_forgets_pages_under_half_a_sample() {
        let mut c = counts(&[(1, 1), (2, 4)]);
        c.halve();
        assert_eq!((c.get(1), c.get(2)), (0.5, 2.0));
        c.halve();
        assert_eq!((c.len(), c.get(1), c.get(2)), (1, 0.0, 1.0));
    }

    #[test]
    fn decide_promotes_hottest_and_demotes_only_colder_pages() {
        // Fast tier: 4 pages, holding pages 1 (unsampled) and 2 (1 sample); hot pages 5..8.
        let c = counts(&[(2, 1), (5, 9), (6, 8), (7, 7), (8, 2)]);
        let fast = [page_addr(1), page_addr(2)];
        let d = decide(&c, &fast, 4 * PAGE_SIZE, 1.0, 1, u64::MAX);
        let pages = |v: &[(u64, f64)]| v.iter().map(|&(a, _)| vpn(a)).collect::<Vec<_>>();
        // Plan: 5, 6, 7, 8 (4 pages). 5 and 6 take the free room; 7 demotes page 1 (score 0,
        // unplanned), 8 (score 2) demotes page 2 (score 1).
        assert_eq!(pages(&d.promote), vec![5, 6, 7, 8]);
        assert_eq!(pages(&d.demote), vec![1, 2]);
        assert!(!d.blocked);
        // Nothing colder than the plan: blocked, never demoting hotter data for colder.
        let fast: Vec<u64> = [5, 6, 7, 8].iter().map(|&v| page_addr(v)).collect();
        let c2 = counts(&[(5, 9), (6, 8), (7, 7), (8, 2), (9, 2)]);
        let d = decide(&c2, &fast, 4 * PAGE_SIZE, 1.0, 1, u64::MAX);
        assert_eq!((d.promote.len(), d.demote.len()), (0, 0));
        // The rate limit's share stops the walk.
        let d = decide(&c, &[], 4 * PAGE_SIZE, 1.0, 1, 2);
        assert_eq!(pages(&d.promote), vec![5, 6]);
    }

    #[test]
    fn the_simulated_policy_plans_with_the_same_ranking_as_decide() {
        // The agent's sample path (`sample_items` + `rank` at the fast tier's budget) and
        // `decide` on an empty fast tier promote the same pages in the same order.
        let mut agent = HottestFirst::new(HottestFirstParams::default(), 2048.0);
        for &(v, n) in &[(40u64, 3u32), (41, 1), (42, 7), (50, 3), (51, 2)] {
            for _ in 0..n {
                agent.counts.add(v);
            }
        }
        let cap = 4 * PAGE_SIZE;
        let plan = rank(agent.sample_items(), plan_budget(cap, agent.p.fill));
        let d = decide(&agent.counts, &[], cap, agent.p.fill, agent.p.min_samples, u64::MAX);
        let from_plan: Vec<(u64, f64)> = plan.iter().map(|i| (i.start, i.score)).collect();
        assert_eq!(d.promote, from_plan);
        assert_eq!(vpn(d.promote[0].0), 42);
    }
}
