//! `pact`: a criticality-driven policy in the manner of PACT (MoatLab, ASPLOS 2026: per-page
//! access criticality from PMU counters and PEBS, eager demotion, adaptive-binning
//! promotion) with ALTO's migration throttling (SOAR/ALTO, OSDI 2025: amortised offcore
//! latency, AOL = latency / memory-level parallelism).
//!
//! # Model
//! **Criticality.** What a page's accesses cost the application is its accesses times the
//! stall each causes: its tier's amortised offcore latency (the latency over the
//! memory-level parallelism). Every `interval` each tier's AOL is read from the machine (the
//! current cost of an access to the node on application core 0, loaded latency included,
//! what a latency counter shows) divided by the MLP; a page's criticality is its PEBS
//! samples of the interval times the AOL of the tier it is on, folded into a moving average
//! (`alpha`), and, for a slow-tier page, the stall promotion would save is its samples
//! times the difference of the two tiers' AOLs.
//!
//! **Adaptive binning.** Pages are binned by criticality on a log2 scale (`bins` bins); the
//! promotion bin is the lowest whose pages, with all hotter bins, fit the fast tier (the
//! bins adapt to the distribution: no fixed threshold). Slow pages at or above it are
//! promoted, most critical first; **eager demotion** moves fast pages that fell below it
//! back to the slow tier as soon as the fast tier lacks room for the round's promotions and
//! a batch more (no watermark), least critical first.
//!
//! **Throttling (ALTO).** The promotions of an interval are scaled by how much the slow
//! tier's AOL exceeds the fast tier's: `batch x (1 - AOL_fast / AOL_slow)`; when loaded
//! latency (or parallelism) makes the slow tier's accesses cost about as much as the fast
//! tier's, migration stops paying and is throttled to nothing.
//!
//! Limits: the cost model executes each core's accesses one after the other (no
//! memory-level parallelism), so the MLP is a parameter (`mlp`, default 1) rather than a
//! measurement and criticality is proportional to samples times latency; PACT's per-page
//! queue-occupancy attribution and SOAR's allocation-site (object) placement are not
//! modelled.
//!
//! Parameters: [`PactParams`] (defaults, ranges and sources in `docs/parameters.md`,
//! mechanism and numbers in `docs/tiering-systems.md`).

use std::collections::HashMap;

use super::{Feed, TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::{FeedKind, Ps};
use crate::error::Result;
use crate::stats::Stats;
use crate::units::Duration;
use tierlab_core::param::{params, Provenance};

/// Parameters of `pact`.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct PactParams {
    /// Time between decisions.
    #[param(default = Duration(100_000_000), assumed = "the policy period; 100 ms")]
    pub interval: Duration,
    /// Weight of the latest interval in a page's criticality.
    #[param(
        default = 0.5,
        range = "(0, 1]",
        unit = "fraction",
        assumed = "a moving average of half-life one interval"
    )]
    pub alpha: f64,
    /// Log2 bins of criticality.
    #[param(
        default = 32,
        range = "[2, 64]",
        unit = "bins",
        assumed = "log2 bins over the criticality's range"
    )]
    pub bins: u32,
    /// Pages promoted per interval at most before throttling.
    #[param(
        default = 512,
        range = "[1, 1e9]",
        unit = "pages",
        assumed = "one migration batch (Linux NR_MAX_BATCHED_MIGRATION = 512) per interval"
    )]
    pub batch: u32,
    /// Memory-level parallelism assumed for both tiers (the cost model has none).
    #[param(
        default = 1.0,
        range = "[1, 64]",
        unit = "requests",
        assumed = "the cost model executes each core's accesses one at a time"
    )]
    pub mlp: f64,
    /// CPU cost of one sample.
    #[param(default = 40.0, range = "[0, 1e9]", unit = "ns", assumed = "a hash-map update per sample")]
    pub ns_per_sample: f64,
    /// CPU cost of re-binning one tracked page.
    #[param(default = 10.0, range = "[0, 1e9]", unit = "ns", assumed = "a multiply-add and a bin update")]
    pub ns_per_page: f64,
}

impl TieringParams for PactParams {
    fn build(&self, _shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        if self.interval.0 == 0 {
            return Err(ctx.err("interval", "must be > 0"));
        }
        Ok(Box::new(Pact::new(self.clone())))
    }
    fn period(&self) -> Ps {
        self.interval.ps()
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        Some(&[FeedKind::Samples])
    }
}

/// The bin of criticality `c` (ns of stall per interval): log2, 0 for anything below 1 ns.
pub fn bin_of(c: f64, bins: u32) -> u32 {
    if c < 1.0 {
        0
    } else {
        ((c.log2().floor() as u32) + 1).min(bins - 1)
    }
}

/// The promotion bin: the lowest bin whose pages and those of every hotter bin fit `cap`
/// pages (`bins` when even the hottest bin does not fit).
pub fn promotion_bin(hist: &[u64], cap: u64) -> u32 {
    let mut total = 0u64;
    let mut bin = hist.len() as u32;
    for b in (0..hist.len()).rev() {
        total += hist[b];
        if total > cap {
            break;
        }
        bin = b as u32;
    }
    bin
}

/// ALTO's throttle: the share of the batch that may move, `1 - AOL_fast / AOL_slow`.
pub fn throttle(aol_fast: f64, aol_slow: f64) -> f64 {
    if aol_slow <= 0.0 {
        0.0
    } else {
        (1.0 - aol_fast / aol_slow).clamp(0.0, 1.0)
    }
}

/// The `pact` policy.
pub struct Pact {
    p: PactParams,
    next: Ps,
    crit: HashMap<u64, f64>,
    counts: HashMap<u64, u32>,
    samples: u64,
    throttled: u64,
    eager_demotions: u64,
    last_throttle: f64,
    last_bin: u32,
}

impl Pact {
    fn new(p: PactParams) -> Self {
        Pact {
            next: p.interval.ps(),
            p,
            crit: HashMap::new(),
            counts: HashMap::new(),
            samples: 0,
            throttled: 0,
            eager_demotions: 0,
            last_throttle: 1.0,
            last_bin: 0,
        }
    }

    fn decide(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let t = ctx.tiers();
        let aol_fast = ctx.machine.access_cost(0, t.fast).ns_f64() / self.p.mlp;
        let aol_slow = ctx.machine.access_cost(0, t.slow).ns_f64() / self.p.mlp;
        let counts = std::mem::take(&mut self.counts);
        for &vpn in counts.keys() {
            self.crit.entry(vpn).or_insert(0.0);
        }
        let a = self.p.alpha;
        let bins = self.p.bins;
        let mut hist = vec![0u64; bins as usize];
        let mut nodes: HashMap<u64, u8> = HashMap::with_capacity(self.crit.len());
        self.crit.retain(|&vpn, c| {
            let node = ctx.machine.node_of(tierlab_core::page_addr(vpn));
            let aol = if node == Some(t.fast) { aol_fast } else { aol_slow };
            let n = counts.get(&vpn).copied().unwrap_or(0) as f64;
            *c = a * n * aol + (1.0 - a) * *c;
            if *c < 0.5 && n == 0.0 {
                return false;
            }
            if let Some(nd) = node {
                nodes.insert(vpn, nd);
            }
            hist[bin_of(*c, bins) as usize] += 1;
            true
        });
        ctx.charge(Ps::from_ns_f64(self.crit.len() as f64 * self.p.ns_per_page));
        let cap = tierlab_core::pages_for(ctx.fast_capacity());
        let pbin = promotion_bin(&hist, cap);
        self.last_bin = pbin;
        // Promotion candidates: slow pages at or above it, most critical first.
        let mut cands: Vec<(f64, u64)> = nodes
            .iter()
            .filter(|&(&v, &n)| n == t.slow && bin_of(self.crit[&v], bins) >= pbin)
            .map(|(&v, _)| (self.crit[&v], v))
            .collect();
        cands.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
        let share = throttle(aol_fast, aol_slow);
        self.last_throttle = share;
        let allowed = (self.p.batch as f64 * share).floor() as usize;
        if allowed < cands.len().min(self.p.batch as usize) {
            self.throttled += 1;
        }
        let promote: Vec<u64> =
            cands.iter().take(allowed).map(|&(_, v)| tierlab_core::page_addr(v)).collect();
        // Eager demotion: fast pages below the promotion bin, least critical first, until the
        // fast tier has room for this round's promotions and a batch more (no watermark).
        let room = tierlab_core::bytes_of(promote.len() as u64 + self.p.batch as u64);
        if ctx.fast_free() < room {
            let mut below: Vec<(f64, u64)> = nodes
                .iter()
                .filter(|&(&v, &n)| n == t.fast && bin_of(self.crit[&v], bins) < pbin)
                .map(|(&v, _)| (self.crit[&v], v))
                .collect();
            below.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
            let mut free = ctx.fast_free();
            let mut demote = Vec::new();
            for (_, v) in below {
                if free >= room {
                    break;
                }
                let va = tierlab_core::page_addr(v);
                free += super::page_bytes(&ctx.machine, va);
                demote.push(va);
            }
            self.eager_demotions += ctx.demote(&demote)?;
        }
        if !promote.is_empty() {
            ctx.promote(&promote)?;
        }
        Ok(())
    }
}

impl TieringPolicy for Pact {
    fn next_event(&self) -> Ps {
        self.next
    }

    fn on_feed(&mut self, feed: &Feed, ctx: &mut TieringCtx) -> Result<()> {
        let Feed::Samples(drains) = feed else { return Ok(()) };
        let n = super::count_sampled_pages(drains, &mut self.counts);
        self.samples += n;
        ctx.charge(Ps::from_ns_f64(n as f64 * self.p.ns_per_sample));
        Ok(())
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        self.next = ctx.now + self.p.interval.ps();
        self.decide(ctx)
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        vec![("pact_throttle".into(), self.last_throttle)]
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.samples"), self.samples);
        out.set(format!("{prefix}.pact_tracked"), self.crit.len() as u64);
        out.set(format!("{prefix}.pact_throttled"), self.throttled);
        out.set(format!("{prefix}.pact_eager_demotions"), self.eager_demotions);
        out.set(format!("{prefix}.pact_promotion_bin"), self.last_bin as u64);
    }
}

impl crate::params::SharedDefaults<TieringShared> for PactParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(10_000.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Assumed(
            "PACT migrates with move_pages; ALTO's throttle, not a fixed limit, bounds it: 10,000 MB/s",
        )),
            "copy_mode" => Some(Provenance::Assumed(
                "PACT migrates with move_pages from its own background thread (the application does not wait)",
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Criticality weighs accesses by their tier's stall: a page sampled 4 times on a tier of
    /// 300 ns out-ranks one sampled 8 times on a tier of 100 ns; the promotion bin is the
    /// lowest that fits the fast tier; ALTO's throttle closes as the slow tier's amortised
    /// latency approaches the fast tier's.
    #[test]
    fn criticality_bins_and_throttle() {
        assert!(bin_of(4.0 * 300.0, 32) > bin_of(8.0 * 100.0, 32));
        // 10 pages in bin 12, 100 in bin 8, 1,000 in bin 3; a fast tier of 200 pages.
        let mut hist = vec![0u64; 32];
        hist[12] = 10;
        hist[8] = 100;
        hist[3] = 1000;
        assert_eq!(promotion_bin(&hist, 200), 4, "bins 4 and above hold 110 pages, bin 3 would overflow");
        assert_eq!(promotion_bin(&hist, 5), 13, "not even the hottest bin fits: only empty bins qualify");
        assert_eq!(promotion_bin(&hist, 5000), 0, "everything fits: every page qualifies");
        assert!((throttle(100.0, 300.0) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(throttle(300.0, 300.0), 0.0, "equal stalls: migration does not pay");
        assert_eq!(throttle(400.0, 300.0), 0.0);
    }
}
