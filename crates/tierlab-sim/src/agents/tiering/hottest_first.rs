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
//! # Parameters (defaults and sources)
//! | parameter | default | source |
//! |---|---|---|
//! | `rate_limit_mbps` | 2048 | assumption: Memtis' migration cap (2 GB/s), `reference/memory-management.md` |
//! | `interval` | 10 ms | assumption: HeMem's policy-loop period |
//! | `fill` | 0.95 | assumption: 5% of the fast tier left free (TPP-like headroom) |
//! | `sample_decay` | 1 s | assumption: PEBS counts halve each second (a 1 s hot window, as the scoring) |
//! | `min_samples` | 1 | assumption: every sampled page is a candidate, ranked by count |
//! | `ns_per_item` | 100 ns | assumption: ranking cost per reported region/page |

use std::collections::{BTreeMap, HashMap};
use tierlab_core::{bytes_of, page_addr, pages_for, vpn, PAGE_MASK, PAGE_SIZE};

use serde::{Deserialize, Serialize};

use super::{Feed, TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared, BATCH};
use crate::agents::FeedKind;
use crate::error::Result;
use crate::stats::Stats;
use crate::units::Duration;

/// Parameters of `hottest-first`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HottestFirstParams {
    /// Policy-loop period.
    #[serde(default = "d_interval")]
    pub interval: Duration,
    /// Fraction of the fast tier the plan may fill.
    #[serde(default = "d_fill")]
    pub fill: f64,
    /// PEBS feeds: sample counts halve every this long.
    #[serde(default = "d_decay")]
    pub sample_decay: Duration,
    /// PEBS feeds: samples a page needs to be a candidate.
    #[serde(default = "d_min_samples")]
    pub min_samples: u32,
    /// CPU cost of ranking one reported region or page, ns.
    #[serde(default = "d_ns_item")]
    pub ns_per_item: f64,
}

fn d_interval() -> Duration {
    Duration(10_000_000)
}
fn d_fill() -> f64 {
    0.95
}
fn d_decay() -> Duration {
    Duration(1_000_000_000)
}
fn d_min_samples() -> u32 {
    1
}
fn d_ns_item() -> f64 {
    100.0
}

impl Default for HottestFirstParams {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl TieringParams for HottestFirstParams {
    fn build(&self, shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        if self.interval.0 == 0 {
            return Err(ctx.err("interval", "must be > 0"));
        }
        if !(self.fill > 0.0 && self.fill <= 1.0) {
            return Err(ctx.err("fill", format!("{} is not in (0, 1]", self.fill)));
        }
        if self.sample_decay.0 == 0 {
            return Err(ctx.err("sample_decay", "must be > 0"));
        }
        if self.min_samples == 0 {
            return Err(ctx.err("min_samples", "must be at least 1"));
        }
        if !(self.ns_per_item.is_finite() && self.ns_per_item >= 0.0) {
            return Err(ctx.err("ns_per_item", format!("{} must be >= 0", self.ns_per_item)));
        }
        Ok(Box::new(HottestFirst::new(self.clone(), shared.rate_limit_mbps)))
    }
    fn period_ns(&self) -> u64 {
        self.interval.0
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        Some(&[FeedKind::Regions, FeedKind::Samples, FeedKind::HotSet])
    }
}

/// One ranked candidate.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Item {
    start: u64,
    end: u64,
    score: f64,
}

/// A run of pages this policy promoted (still on the fast tier unless reclaimed by others).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ext {
    end: u64,
    score: f64,
}

const SAMPLE_REPLAN_NS: u64 = 200_000_000;

/// The `hottest-first` policy.
pub struct HottestFirst {
    rate_limit_mbps: f64,
    p: HottestFirstParams,
    next_ns: u64,
    /// Ranked plan (priority order) and the walk position in it.
    plan: Vec<Item>,
    pos: (usize, u64),
    resident: BTreeMap<u64, Ext>,
    /// PEBS: decayed sample counts per page, and bookkeeping.
    counts: HashMap<u64, f64>,
    samples_dirty: bool,
    last_replan_ns: u64,
    last_decay_ns: u64,
    plans: u64,
    plan_bytes: u64,
    blocked: u64,
}

impl HottestFirst {
    fn new(p: HottestFirstParams, rate_limit_mbps: f64) -> Self {
        HottestFirst {
            rate_limit_mbps,
            next_ns: p.interval.0,
            p,
            plan: Vec::new(),
            pos: (0, 0),
            resident: BTreeMap::new(),
            counts: HashMap::new(),
            samples_dirty: false,
            last_replan_ns: 0,
            last_decay_ns: 0,
            plans: 0,
            plan_bytes: 0,
            blocked: 0,
        }
    }

    /// Rank `items` (any order), cut the plan at the fast tier's budget, re-score resident
    /// runs.
    fn replan(&mut self, mut items: Vec<(Item, u32)>, ctx: &mut TieringCtx) {
        ctx.charge(items.len() as f64 * self.p.ns_per_item);
        // score desc, tiebreak (age) desc, size asc, address asc.
        items.sort_by(|(a, ta), (b, tb)| {
            b.score
                .total_cmp(&a.score)
                .then(tb.cmp(ta))
                .then((a.end - a.start).cmp(&(b.end - b.start)))
                .then(a.start.cmp(&b.start))
        });
        let mut left = (ctx.fast_capacity() as f64 * self.p.fill) as u64;
        self.plan.clear();
        for (it, _) in items {
            if left < PAGE_SIZE {
                break;
            }
            let len = (it.end - it.start).min(left & !PAGE_MASK);
            self.plan.push(Item { start: it.start, end: it.start + len, score: it.score });
            left -= len;
        }
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
        let mut victims: Vec<(f64, u64)> =
            self.resident.iter().filter(|(_, e)| e.score < score).map(|(&s, e)| (e.score, s)).collect();
        victims.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut freed = 0u64;
        let fast = ctx.tiers.fast;
        for (_, s) in victims {
            if freed >= need {
                break;
            }
            let Some(e) = self.resident.remove(&s) else { continue };
            let mut va = s;
            let mut pages = Vec::new();
            let mut bytes = 0;
            while va < e.end && freed + bytes < need {
                let b = super::page_bytes(ctx.machine, va);
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
        let min = self.p.min_samples as f64;
        self.counts
            .iter()
            .filter(|(_, &c)| c >= min)
            .map(|(&v, &c)| (Item { start: page_addr(v), end: page_addr(v + 1), score: c }, 0))
            .collect()
    }
}

impl TieringPolicy for HottestFirst {
    fn next_event(&self) -> crate::agents::Ps {
        crate::agents::ns_to_ps(self.next_ns)
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
                        *self.counts.entry(vpn(addr)).or_insert(0.0) += 1.0;
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
        let now = ctx.now_ns;
        self.next_ns = now + self.p.interval.0;
        if now >= self.last_decay_ns + self.p.sample_decay.0 && !self.counts.is_empty() {
            self.last_decay_ns = now;
            self.counts.retain(|_, c| {
                *c *= 0.5;
                *c >= 0.5
            });
            self.samples_dirty = true;
        }
        if self.samples_dirty && now >= self.last_replan_ns + SAMPLE_REPLAN_NS {
            self.samples_dirty = false;
            self.last_replan_ns = now;
            let items = self.sample_items();
            self.replan(items, ctx);
        }
        let until = self.next_ns;
        let slow = ctx.tiers.slow;
        let mut batch: Vec<u64> = Vec::with_capacity(BATCH);
        while self.pos.0 < self.plan.len() && ctx.core_free_before(until) {
            let it = self.plan[self.pos.0];
            let mut va = self.pos.1.max(it.start);
            batch.clear();
            let mut bytes = 0u64;
            let budget = ctx.mover.budget();
            while va < it.end && batch.len() < BATCH {
                if let Some(end) = self.resident_containing(va) {
                    va = end;
                    continue;
                }
                let b = super::page_bytes(ctx.machine, va);
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
                let mut e = s + super::page_bytes(ctx.machine, s);
                k += 1;
                while k < moved && batch[k] == e {
                    e += super::page_bytes(ctx.machine, batch[k]);
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

impl crate::params::Params for HottestFirstParams {}

impl crate::params::SharedDefaults<TieringShared> for HottestFirstParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(2048.0)
    }
}
