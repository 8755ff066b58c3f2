//! `memtis`: Memtis-like tiering (Lee et al., SOSP 2023) driven by PEBS load samples.
//!
//! # Model
//! Every PEBS record adds one to its 4 KiB page's access count. Pages are kept in a
//! 16-bin **access histogram** by `floor(log2(count))` (bin 15 holds everything above). The
//! **hot threshold** is the lowest bin such that the pages in it and above fit the fast tier
//! (`fill` of its capacity): the hot set is fitted to the fast tier, whatever its size. Every
//! `cooling_samples` samples all counts halve (the histogram shifts down one bin). The
//! sampling period adapts: every `adjust_interval` the PEBS interrupt time of the
//! application cores over that interval is compared with `cpu_limit`: above it the period
//! goes up one step of the ladder, below half of it down one step (from `min_period` to
//! `max_period`). The migration daemon (kmigrated) wakes every `interval`: it promotes the
//! slow-tier pages at or above the hot threshold, hottest first, within the rate limit,
//! demoting fast-tier pages below the threshold (coldest first) to make room. Huge-page
//! splitting is not modelled (the tiering-kv machine maps 4 KiB pages).
//!
//! Parameters: [`MemtisParams`] (defaults, ranges and sources in `docs/parameters.md`).

use std::collections::{HashMap, HashSet};
use tierlab_core::{bytes_of, page_addr, vpn, PAGE_SIZE};

use super::{Feed, TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::{FeedKind, Ps};
use crate::error::Result;
use crate::stats::Stats;
use crate::units::Duration;
use tierlab_core::param::{params, Provenance};

/// Bins of the access histogram.
pub const BINS: usize = 16;

/// Parameters of `memtis`.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct MemtisParams {
    /// Migration daemon period.
    #[param(
        default = Duration(500_000_000),
        sourced = "reference/memory-management.md: Memtis' migration daemon every 500 ms"
    )]
    pub interval: Duration,
    /// Samples between two coolings (all counts halve).
    #[param(
        default = 2_000_000,
        range = "[1, 281474976710656]",
        unit = "samples",
        sourced = "reference/memory-management.md: Memtis halves counts every 2,000,000 samples"
    )]
    pub cooling_samples: u64,
    /// Largest share of the application cores' time PEBS interrupts may take.
    #[param(
        default = 0.03,
        range = "(0, 1)",
        unit = "fraction",
        sourced = "reference/memory-management.md: Memtis keeps sampling CPU <= 3%"
    )]
    pub cpu_limit: f64,
    /// Smallest sample period.
    #[param(
        default = 199,
        range = "[1, 1e12]",
        unit = "events",
        sourced = "reference/memory-management.md: Memtis' load period adapted from 199"
    )]
    pub min_period: u64,
    /// Largest sample period.
    #[param(
        default = 19997,
        range = "[1, 1e12]",
        unit = "events",
        sourced = "reference/memory-management.md: Memtis' load period adapted up to 19997"
    )]
    pub max_period: u64,
    /// Period of the sampling-period adjustment.
    #[param(
        default = Duration(1_000_000_000),
        assumed = "no reference gives Memtis' adjustment period; once a second"
    )]
    pub adjust_interval: Duration,
    /// Fraction of the fast tier the hot set may fill.
    #[param(
        default = 0.95,
        range = "(0, 1]",
        unit = "fraction",
        assumed = "as hottest-first: 5% of the fast tier left free"
    )]
    pub fill: f64,
    /// CPU cost of handling one sample.
    #[param(
        default = 50.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "as hemem: a hash lookup and a histogram update per record"
    )]
    pub ns_per_sample: f64,
}

impl TieringParams for MemtisParams {
    fn build(&self, _shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        if self.interval.0 == 0 {
            return Err(ctx.err("interval", "must be > 0"));
        }
        if self.adjust_interval.0 == 0 {
            return Err(ctx.err("adjust_interval", "must be > 0"));
        }
        if self.max_period < self.min_period {
            return Err(ctx.err("max_period", "must be at least min_period"));
        }
        Ok(Box::new(Memtis::new(self.clone())))
    }
    fn period(&self) -> Ps {
        self.interval.ps()
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        Some(&[FeedKind::Samples])
    }
}

/// The bin of an access count (count >= 1).
pub fn bin_of(count: u32) -> usize {
    ((31 - count.max(1).leading_zeros()) as usize).min(BINS - 1)
}

/// The hot threshold: the lowest bin whose pages, with those of every higher bin, fit in
/// `budget_pages` (above every non-empty bin when the hottest one does not fit).
pub fn hot_threshold(hist: &[u64; BINS], budget_pages: u64) -> usize {
    let mut sum = 0u64;
    let mut thr = BINS;
    for b in (0..BINS).rev() {
        sum += hist[b];
        if sum > budget_pages {
            break;
        }
        thr = b;
    }
    thr
}

/// Per-page access counts and their histogram, cooled (every count halved) every
/// `cooling_samples` samples: Memtis' page-access state, shared by the simulated policy and
/// the live loop (`tierlab tier --policy memtis`, through `tierlab-py`).
#[derive(Clone, Debug)]
pub struct MemtisCounts {
    counts: HashMap<u64, u32>,
    /// Pages per bin.
    pub hist: [u64; BINS],
    cooling_samples: u64,
    since_cooling: u64,
    /// Coolings so far.
    pub coolings: u64,
}

impl MemtisCounts {
    pub fn new(cooling_samples: u64) -> Self {
        MemtisCounts {
            counts: HashMap::new(),
            hist: [0; BINS],
            cooling_samples,
            since_cooling: 0,
            coolings: 0,
        }
    }

    /// One sample on page `vpn` (cooling when `cooling_samples` were taken since the last).
    pub fn add(&mut self, vpn: u64) {
        let c = self.counts.entry(vpn).or_insert(0);
        if *c > 0 {
            self.hist[bin_of(*c)] -= 1;
        }
        *c = c.saturating_add(1);
        self.hist[bin_of(*c)] += 1;
        self.since_cooling += 1;
        if self.since_cooling >= self.cooling_samples {
            self.since_cooling = 0;
            self.cool();
        }
    }

    /// Halve every count; pages reaching 0 are forgotten.
    pub fn cool(&mut self) {
        self.hist = [0; BINS];
        let hist = &mut self.hist;
        self.counts.retain(|_, c| {
            *c /= 2;
            if *c > 0 {
                hist[bin_of(*c)] += 1;
            }
            *c > 0
        });
        self.coolings += 1;
    }

    /// Forget page `vpn` (its memory was unmapped).
    pub fn forget(&mut self, vpn: u64) {
        if let Some(c) = self.counts.remove(&vpn) {
            self.hist[bin_of(c)] -= 1;
        }
    }

    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The count of page `vpn` (0 when unknown).
    pub fn get(&self, vpn: u64) -> u32 {
        self.counts.get(&vpn).copied().unwrap_or(0)
    }

    /// Every counted page `(vpn, count)`, any order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.counts.iter().map(|(&v, &c)| (v, c))
    }

    /// Pages in bin `thr` or above for which `eligible(vpn)` holds, as `(count, vpn)`,
    /// hottest first (then by page).
    pub fn hot_pages(&self, thr: usize, eligible: impl Fn(u64) -> bool) -> Vec<(u32, u64)> {
        let mut hot: Vec<(u32, u64)> = self
            .counts
            .iter()
            .filter(|(_, &c)| bin_of(c) >= thr)
            .map(|(&v, &c)| (c, v))
            .filter(|&(_, v)| eligible(v))
            .collect();
        hot.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        hot
    }

    /// The pages `fast` below bin `thr` (or never counted), as `(count, vpn)`, coldest first
    /// (then by page).
    pub fn cold_pages(&self, fast: impl Iterator<Item = u64>, thr: usize) -> Vec<(u32, u64)> {
        let mut cold: Vec<(u32, u64)> =
            fast.map(|v| (self.get(v), v)).filter(|&(c, _)| c == 0 || bin_of(c) < thr).collect();
        cold.sort();
        cold
    }
}

/// One Memtis migration step over pages (the live loop's form of the daemon's walk): the
/// hot threshold fits the hot set to `fill` of `capacity`; the hot pages not on the fast tier
/// (`fast`: page addresses) are promoted hottest first, at most `max_promote`; when the fast
/// tier has no room, the coldest fast-tier page below the threshold is demoted first; the
/// walk stops when there is none.
pub fn decide(
    counts: &MemtisCounts,
    fast: &[u64],
    capacity: u64,
    fill: f64,
    max_promote: u64,
) -> MemtisDecision {
    let budget_pages = (capacity as f64 * fill) as u64 / PAGE_SIZE;
    let thr = hot_threshold(&counts.hist, budget_pages);
    let on_fast: HashSet<u64> = fast.iter().map(|&a| vpn(a)).collect();
    let hot = counts.hot_pages(thr, |v| !on_fast.contains(&v));
    let mut cold = counts.cold_pages(on_fast.iter().copied(), thr).into_iter();
    let mut free = capacity.saturating_sub(on_fast.len() as u64 * PAGE_SIZE);
    let (mut promote, mut demote) = (Vec::new(), Vec::new());
    for (c, v) in hot {
        if promote.len() as u64 >= max_promote {
            break;
        }
        if free < PAGE_SIZE {
            match cold.next() {
                Some((cc, cv)) => {
                    demote.push((page_addr(cv), cc));
                    free += PAGE_SIZE;
                }
                None => break,
            }
        }
        free -= PAGE_SIZE;
        promote.push((page_addr(v), c));
    }
    MemtisDecision { promote, demote, threshold: thr }
}

/// What Memtis' `decide` chose.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemtisDecision {
    /// (page address, count), hottest first.
    pub promote: Vec<(u64, u32)>,
    /// (page address, count), coldest first.
    pub demote: Vec<(u64, u32)>,
    /// The hot threshold bin.
    pub threshold: usize,
}

/// The `memtis` policy.
pub struct Memtis {
    p: MemtisParams,
    next: Ps,
    next_adjust: Ps,
    counts: MemtisCounts,
    in_fast: HashSet<u64>,
    samples: u64,
    threshold: usize,
    ladder: Vec<u64>,
    step: usize,
    last_irq: Ps,
    adjustments: u64,
}

impl Memtis {
    fn new(p: MemtisParams) -> Self {
        // A geometric ladder of periods from min to max (about x1.6 per step).
        let mut ladder = vec![p.min_period];
        while *ladder.last().expect("ladder") < p.max_period {
            let next = ((*ladder.last().expect("ladder") as f64 * 1.6).ceil() as u64).min(p.max_period);
            ladder.push(next);
        }
        Memtis {
            next: p.interval.ps(),
            next_adjust: p.adjust_interval.ps(),
            counts: MemtisCounts::new(p.cooling_samples),
            p,
            in_fast: HashSet::new(),
            samples: 0,
            threshold: BINS,
            ladder,
            step: 0,
            last_irq: Ps::ZERO,
            adjustments: 0,
        }
    }

    /// PEBS interrupt time of every core so far.
    fn irq(ctx: &TieringCtx) -> Ps {
        Ps::from_ps(ctx.machine.pebs().map_or(0, |hw| hw.cores.iter().map(|c| c.interrupt_ps).sum()))
    }

    fn adjust_period(&mut self, ctx: &mut TieringCtx) {
        let irq = Self::irq(ctx);
        let d = irq - self.last_irq;
        self.last_irq = irq;
        let cores = ctx.machine.mm_cpumask().iter().filter(|&&b| b).count().max(1) as f64;
        let share = d.ps() as f64 / (self.p.adjust_interval.ps().ps() as f64 * cores);
        let old = self.step;
        if share > self.p.cpu_limit && self.step + 1 < self.ladder.len() {
            self.step += 1;
        } else if share < self.p.cpu_limit / 2.0 && self.step > 0 {
            self.step -= 1;
        }
        if self.step != old {
            ctx.machine.set_pebs_period(self.ladder[self.step]);
            self.adjustments += 1;
        }
    }
}

impl TieringPolicy for Memtis {
    fn start(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        ctx.machine.set_pebs_period(self.ladder[0]);
        self.last_irq = Self::irq(ctx);
        Ok(())
    }

    fn next_event(&self) -> Ps {
        self.next.min(self.next_adjust)
    }

    fn on_feed(&mut self, feed: &Feed, ctx: &mut TieringCtx) -> Result<()> {
        let Feed::Samples(drains) = feed else { return Ok(()) };
        let mut n = 0u64;
        for d in drains.iter() {
            for &(addr, _) in &d.records {
                n += 1;
                self.counts.add(vpn(addr));
            }
        }
        self.samples += n;
        ctx.charge(Ps::from_ns_f64(n as f64 * self.p.ns_per_sample));
        Ok(())
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let now = ctx.now;
        if now >= self.next_adjust {
            self.next_adjust = now + self.p.adjust_interval.ps();
            self.adjust_period(ctx);
        }
        if now < self.next {
            return Ok(());
        }
        self.next = now + self.p.interval.ps();
        let budget_pages = (ctx.fast_capacity() as f64 * self.p.fill) as u64 / PAGE_SIZE;
        self.threshold = hot_threshold(&self.counts.hist, budget_pages);
        let thr = self.threshold;
        let (fast, slow) = (ctx.tiers().fast, ctx.tiers().slow);
        // Hot pages on the slow tier, hottest first.
        let machine = &ctx.machine;
        let hot = self.counts.hot_pages(thr, |v| machine.node_of(page_addr(v)) == Some(slow));
        ctx.charge(Ps::from_ns_f64(self.counts.len() as f64 * 10.0));
        if hot.is_empty() {
            return Ok(());
        }
        // Cold pages on the fast tier (below the threshold), coldest first.
        let cold = self.counts.cold_pages(self.in_fast.iter().copied(), thr);
        let mut cold = cold.into_iter();
        let mut batch = Vec::with_capacity(super::BATCH);
        let mut i = 0;
        while i < hot.len() && ctx.core_free_before(self.next) {
            batch.clear();
            let budget = ctx.kind.mover.budget();
            while i < hot.len() && batch.len() < super::BATCH && bytes_of(batch.len() as u64 + 1) <= budget {
                batch.push(page_addr(hot[i].1));
                i += 1;
            }
            if batch.is_empty() {
                break;
            }
            let need = bytes_of(batch.len() as u64);
            let free = ctx.fast_free();
            if free < need {
                let mut victims = Vec::new();
                let mut got = free;
                for (_, v) in cold.by_ref() {
                    if got >= need {
                        break;
                    }
                    if ctx.machine.node_of(page_addr(v)) == Some(fast) {
                        victims.push(page_addr(v));
                        got += PAGE_SIZE;
                    }
                    self.in_fast.remove(&v);
                }
                ctx.demote(&victims)?;
                let fit = (ctx.fast_free() / PAGE_SIZE) as usize;
                batch.truncate(fit);
            }
            if batch.is_empty() {
                break;
            }
            let (moved, _) = ctx.promote(&batch)?;
            for &v in &batch[..moved as usize] {
                self.in_fast.insert(vpn(v));
            }
            if (moved as usize) < batch.len() {
                break;
            }
        }
        Ok(())
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        vec![
            ("hot_threshold_bin".into(), self.threshold as f64),
            ("sample_period".into(), self.ladder[self.step] as f64),
        ]
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.samples"), self.samples);
        out.set(format!("{prefix}.coolings"), self.counts.coolings);
        out.set(format!("{prefix}.tracked_pages"), self.counts.len());
        out.set(format!("{prefix}.hot_threshold_bin"), self.threshold as u64);
        out.set(format!("{prefix}.sample_period"), self.ladder[self.step]);
        out.set(format!("{prefix}.period_adjustments"), self.adjustments);
    }
}

impl crate::params::SharedDefaults<TieringShared> for MemtisParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(2048.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Sourced(
            "reference/memory-management.md: Memtis' migration daemon is capped at 2 GB/s (here 2 x 1024 \
             MB/s)",
        )),
            "copy_mode" => Some(Provenance::Sourced(
                "Memtis (Lee et al., SOSP'23): the kmigrated kernel thread migrates pages in the background",
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_threshold_fits_the_fast_tier() {
        assert_eq!(bin_of(1), 0);
        assert_eq!(bin_of(2), 1);
        assert_eq!(bin_of(3), 1);
        assert_eq!(bin_of(1 << 20), BINS - 1);
        let mut h = [0u64; BINS];
        h[0] = 1000;
        h[3] = 50;
        h[5] = 10;
        assert_eq!(hot_threshold(&h, 60), 1, "bins 5 and 3 (60 pages) fit, bin 0 does not");
        assert_eq!(hot_threshold(&h, 5), 6, "bin 5 does not fit: the threshold is above every page");
        assert_eq!(hot_threshold(&h, 5000), 0);
    }

    #[test]
    fn decide_promotes_pages_above_the_threshold_and_demotes_cold_ones() {
        let mut c = MemtisCounts::new(1_000_000);
        // Pages 1..=4: 8 samples (bin 3); pages 10..=13: 1 sample (bin 0); page 20: 2 (bin 1).
        for v in 1..=4u64 {
            for _ in 0..8 {
                c.add(v);
            }
        }
        for v in 10..=13u64 {
            c.add(v);
        }
        c.add(20);
        c.add(20);
        // Fast tier: 5 pages, holding 10, 11, 12 (cold) and 1 (hot).
        let fast: Vec<u64> = [10, 11, 12, 1].iter().map(|&v| page_addr(v)).collect();
        let d = decide(&c, &fast, 5 * PAGE_SIZE, 1.0, u64::MAX);
        let (pro, dem, thr) = (d.promote, d.demote, d.threshold);
        // Budget 5 pages: bins 3 (4 pages) and 1 (1 page) fit, bin 0 does not.
        assert_eq!(thr, 1);
        let pages = |v: &[(u64, u32)]| v.iter().map(|&(a, _)| vpn(a)).collect::<Vec<_>>();
        assert_eq!(pages(&pro), vec![2, 3, 4, 20]);
        assert_eq!(pages(&dem), vec![10, 11, 12]);
        // Forgetting keeps the histogram right; cooling halves.
        c.forget(20);
        assert_eq!(c.hist[1], 0);
        c.cool();
        assert_eq!((c.get(1), c.get(10), c.len()), (4, 0, 4));
    }
}
