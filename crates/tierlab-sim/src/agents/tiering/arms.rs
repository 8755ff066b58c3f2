//! `arms`: ARMS-like threshold-free tiering (Yadalam, Kanellis, Swift, Venkataraman, *ARMS:
//! Adaptive and Robust Memory Tiering System*, arXiv 2508.04417, 2025) on PEBS samples.
//!
//! # Model
//! **Hot/cold identification without thresholds.** Every `interval` each sampled 4 KiB
//! page's sample count of the interval updates two exponentially weighted moving averages:
//! a **short-term** one (`alpha_short`, reacts to a phase change within an interval or two)
//! and a **long-term** one (`alpha_long`, smooths bursts). A page's score is the larger of
//! the two, so a page that just became hot ranks by its short-term average and a page that
//! pauses keeps its long-term one. There is no hot threshold: the hot set is the top `K`
//! pages by score, `K` the fast tier's capacity in pages.
//!
//! **Cost/benefit migration.** A hot-set page on the slow tier is promoted (hottest first)
//! only when the latency it saves over the expected residency exceeds the migration's cost:
//! its access rate (samples per second times the accesses per sample, from the PMU's access
//! count over the samples received) times the tiers' per-access cost difference (the
//! machine's current cost of an access to each node, what a latency counter shows) times
//! the long-term average's time constant (`interval / alpha_long`), against the copy time
//! of the page. When the fast tier has no room, the coldest fast page outside the hot set
//! is the victim: the benefit is then the difference of the two pages' rates, and the cost
//! both copies. Migrations are batched, at most `batch` pages per interval, within the rate
//! limit.
//!
//! Not modelled: the paper's bandwidth-aware scheduling of batches against the
//! application's own bandwidth use (batches go at the rate limit); huge pages (pages are
//! counted at 4 KiB). Pages never sampled on the fast tier are demotion victims only once
//! the policy has seen or placed them.
//!
//! Parameters: [`ArmsParams`] (defaults, ranges and sources in `docs/parameters.md`,
//! mechanism and numbers in `docs/tiering-systems.md`).

use std::collections::{BTreeSet, HashMap};

use super::{Feed, TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::{FeedKind, Ps};
use crate::error::Result;
use crate::stats::Stats;
use crate::units::Duration;
use tierlab_core::param::{params, Provenance};

/// Parameters of `arms`.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct ArmsParams {
    /// Time between updates of the moving averages (and migration decisions).
    #[param(default = Duration(100_000_000), assumed = "ARMS's policy period is not given; 100 ms")]
    pub interval: Duration,
    /// Weight of the latest interval in the short-term average.
    #[param(
        default = 0.5,
        range = "(0, 1]",
        unit = "fraction",
        assumed = "ARMS uses a short- and a long-term EWMA; the weights are the model's (half-life one interval)"
    )]
    pub alpha_short: f64,
    /// Weight of the latest interval in the long-term average.
    #[param(
        default = 0.1,
        range = "(0, 1]",
        unit = "fraction",
        assumed = "ARMS uses a short- and a long-term EWMA; the weights are the model's (time constant 10 intervals)"
    )]
    pub alpha_long: f64,
    /// Pages migrated per interval at most (a batch).
    #[param(
        default = 512,
        range = "[1, 1e9]",
        unit = "pages",
        assumed = "one migration batch (Linux NR_MAX_BATCHED_MIGRATION = 512) per interval"
    )]
    pub batch: u32,
    /// A page whose two averages both fall below this is forgotten (bounded metadata).
    #[param(
        default = 0.01,
        range = "[0, 1e9]",
        unit = "samples",
        assumed = "the model's bound on tracked pages"
    )]
    pub forget_below: f64,
    /// CPU cost of one sample.
    #[param(default = 40.0, range = "[0, 1e9]", unit = "ns", assumed = "a hash-map update per sample")]
    pub ns_per_sample: f64,
    /// CPU cost of updating one tracked page's averages.
    #[param(
        default = 10.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "two multiply-adds and a sort share per page"
    )]
    pub ns_per_page: f64,
}

impl TieringParams for ArmsParams {
    fn build(&self, _shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        if self.interval.0 == 0 {
            return Err(ctx.err("interval", "must be > 0"));
        }
        if self.alpha_long > self.alpha_short {
            return Err(ctx
                .err("alpha_long", "must not exceed alpha_short (the long-term average is the slower one)"));
        }
        Ok(Box::new(Arms::new(self.clone())))
    }
    fn period(&self) -> Ps {
        self.interval.ps()
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        Some(&[FeedKind::Samples])
    }
}

/// A page's two moving averages, samples per interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ewma {
    /// Short-term average.
    pub short: f64,
    /// Long-term average.
    pub long: f64,
}

impl Ewma {
    /// Fold in one interval's count.
    pub fn update(&mut self, count: f64, alpha_short: f64, alpha_long: f64) {
        self.short = alpha_short * count + (1.0 - alpha_short) * self.short;
        self.long = alpha_long * count + (1.0 - alpha_long) * self.long;
    }
    /// The score: the larger average.
    pub fn score(&self) -> f64 {
        self.short.max(self.long)
    }
}

/// The `arms` policy.
pub struct Arms {
    p: ArmsParams,
    next: Ps,
    pages: HashMap<u64, Ewma>,
    /// Sample counts of the current interval.
    counts: HashMap<u64, u32>,
    /// Pages it placed on (or saw on) the fast tier.
    in_fast: BTreeSet<u64>,
    /// PMU access count and samples at the last interval.
    last_accesses: u64,
    interval_samples: u64,
    accesses_per_sample: f64,
    samples: u64,
    intervals: u64,
    rejected: u64,
    swaps: u64,
}

impl Arms {
    fn new(p: ArmsParams) -> Self {
        Arms {
            next: p.interval.ps(),
            p,
            pages: HashMap::new(),
            counts: HashMap::new(),
            in_fast: BTreeSet::new(),
            last_accesses: 0,
            interval_samples: 0,
            accesses_per_sample: 0.0,
            samples: 0,
            intervals: 0,
            rejected: 0,
            swaps: 0,
        }
    }

    /// Fold the interval's counts into every tracked page's averages.
    fn update(&mut self) {
        let (a_s, a_l) = (self.p.alpha_short, self.p.alpha_long);
        let counts = std::mem::take(&mut self.counts);
        for &vpn in counts.keys() {
            self.pages.entry(vpn).or_default();
        }
        let forget = self.p.forget_below;
        self.pages.retain(|vpn, e| {
            e.update(counts.get(vpn).copied().unwrap_or(0) as f64, a_s, a_l);
            e.score() >= forget || counts.contains_key(vpn)
        });
    }

    /// The hot set: the top `k` pages by score (page numbers).
    fn hot_set(&self, k: usize) -> BTreeSet<u64> {
        let mut v: Vec<(f64, u64)> = self.pages.iter().map(|(&p, e)| (e.score(), p)).collect();
        if v.len() > k {
            v.select_nth_unstable_by(k, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            v.truncate(k);
        }
        v.into_iter().map(|(_, p)| p).collect()
    }

    fn score(&self, vpn: u64) -> f64 {
        self.pages.get(&vpn).map_or(0.0, Ewma::score)
    }

    /// One interval: averages, hot set, cost/benefit promotions (with victims).
    fn decide(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        self.update();
        self.intervals += 1;
        let accesses = ctx.machine.app_total(|c| c.accesses());
        if self.interval_samples > 0 {
            self.accesses_per_sample =
                accesses.saturating_sub(self.last_accesses) as f64 / self.interval_samples as f64;
        }
        self.last_accesses = accesses;
        self.interval_samples = 0;
        ctx.charge(Ps::from_ns_f64(self.pages.len() as f64 * self.p.ns_per_page));
        let k = tierlab_core::pages_for(ctx.fast_capacity()) as usize;
        let hot = self.hot_set(k);
        let t = ctx.tiers();
        let (fast, slow) = (t.fast, t.slow);
        let mut cands: Vec<(f64, u64)> = hot
            .iter()
            .filter(|&&p| ctx.machine.node_of(tierlab_core::page_addr(p)) == Some(slow))
            .map(|&p| (self.score(p), p))
            .collect();
        cands.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        if cands.is_empty() {
            return Ok(());
        }
        // Victims: fast pages it knows outside the hot set, coldest first.
        for (&p, _) in self.pages.iter() {
            if ctx.machine.node_of(tierlab_core::page_addr(p)) == Some(fast) {
                self.in_fast.insert(p);
            }
        }
        self.in_fast.retain(|&p| ctx.machine.node_of(tierlab_core::page_addr(p)) == Some(fast));
        let mut victims: Vec<(f64, u64)> =
            self.in_fast.iter().filter(|p| !hot.contains(p)).map(|&p| (self.score(p), p)).collect();
        victims.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        // Per-access saving of the fast tier (core 0's cost table) and the horizon.
        let saving_ns =
            (ctx.machine.access_cost(0, slow).ns_f64() - ctx.machine.access_cost(0, fast).ns_f64()).max(0.0);
        let horizon_s = self.p.interval.0 as f64 / 1e9 / self.p.alpha_long;
        let per_s = 1e9 / self.p.interval.0 as f64;
        let rate = |score: f64| score * per_s * self.accesses_per_sample;
        let page_copy_ns = ctx.copy_time(tierlab_core::PAGE_SIZE).ns_f64();
        let mut free = ctx.fast_free();
        let mut promote = Vec::new();
        let mut demote = Vec::new();
        let mut vi = victims.into_iter();
        for (score, p) in cands.into_iter().take(self.p.batch as usize) {
            let va = tierlab_core::page_addr(p);
            let bytes = super::page_bytes(&ctx.machine, va);
            let gain = |victim: f64| (rate(score) - rate(victim)) * horizon_s * saving_ns;
            if free >= bytes {
                if gain(0.0) > page_copy_ns {
                    free -= bytes;
                    promote.push(va);
                } else {
                    self.rejected += 1;
                }
                continue;
            }
            let Some((vs, v)) = vi.next() else { break };
            if gain(vs) > 2.0 * page_copy_ns {
                demote.push(tierlab_core::page_addr(v));
                promote.push(va);
                self.swaps += 1;
            } else {
                // Candidates are hottest first and victims coldest first: no later pair pays.
                self.rejected += 1;
                break;
            }
        }
        if !demote.is_empty() {
            ctx.demote(&demote)?;
            for &va in &demote {
                self.in_fast.remove(&tierlab_core::vpn(va));
            }
        }
        if !promote.is_empty() {
            let (moved, _) = ctx.promote(&promote)?;
            for &va in &promote[..moved as usize] {
                self.in_fast.insert(tierlab_core::vpn(va));
            }
        }
        Ok(())
    }
}

impl TieringPolicy for Arms {
    fn next_event(&self) -> Ps {
        self.next
    }

    fn on_feed(&mut self, feed: &Feed, ctx: &mut TieringCtx) -> Result<()> {
        let Feed::Samples(drains) = feed else { return Ok(()) };
        let n = super::count_sampled_pages(drains, &mut self.counts);
        self.samples += n;
        self.interval_samples += n;
        ctx.charge(Ps::from_ns_f64(n as f64 * self.p.ns_per_sample));
        Ok(())
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        self.next = ctx.now + self.p.interval.ps();
        self.decide(ctx)
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        vec![("arms_tracked".into(), self.pages.len() as f64)]
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.samples"), self.samples);
        out.set(format!("{prefix}.arms_intervals"), self.intervals);
        out.set(format!("{prefix}.arms_tracked"), self.pages.len() as u64);
        out.set(format!("{prefix}.arms_rejected"), self.rejected);
        out.set(format!("{prefix}.arms_swaps"), self.swaps);
        out.set(format!("{prefix}.arms_accesses_per_sample"), self.accesses_per_sample);
    }
}

impl crate::params::SharedDefaults<TieringShared> for ArmsParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(10_000.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Assumed(
            "ARMS schedules migration batches against the available bandwidth; a fixed 10,000 MB/s here",
        )),
            "copy_mode" => Some(Provenance::Assumed(
                "ARMS is built on a HeMem-like runtime whose background thread migrates (the application does not wait)",
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A phase change: page A hot (10 samples per interval) for 30 intervals, then page B
    /// instead. The short-term average ranks B above A after one interval, the long-term one
    /// only after seven; the score (their maximum) puts B in a one-page hot set after three
    /// intervals, and A stays in a two-page hot set meanwhile.
    #[test]
    fn short_average_reacts_to_a_phase_change_the_long_one_lags() {
        let p = ArmsParams::default();
        let mut arms = Arms::new(p.clone());
        let (a, b) = (100u64, 200u64);
        for _ in 0..30 {
            arms.counts.insert(a, 10);
            arms.update();
        }
        let mut short_flip = None;
        let mut long_flip = None;
        let mut top_flip = None;
        for i in 1..=20 {
            arms.counts.insert(b, 10);
            arms.update();
            let (ea, eb) = (arms.pages[&a], arms.pages[&b]);
            if short_flip.is_none() && eb.short > ea.short {
                short_flip = Some(i);
            }
            if long_flip.is_none() && eb.long > ea.long {
                long_flip = Some(i);
            }
            if top_flip.is_none() && arms.hot_set(1).contains(&b) {
                top_flip = Some(i);
                assert_eq!(arms.hot_set(2), BTreeSet::from([a, b]), "A keeps its long-term score");
            }
        }
        assert_eq!(short_flip, Some(1));
        assert_eq!(long_flip, Some(7));
        assert_eq!(top_flip, Some(3));
        // A page that stops being sampled is forgotten once both averages fade.
        for _ in 0..100 {
            arms.counts.insert(b, 10);
            arms.update();
        }
        assert!(!arms.pages.contains_key(&a));
    }
}
