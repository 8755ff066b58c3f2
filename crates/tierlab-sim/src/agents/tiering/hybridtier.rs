//! `hybridtier`: HybridTier-like tiering (Song et al., ASPLOS 2025) driven by PEBS samples
//! counted in two count-min sketches.
//!
//! # Model
//! Every sampled 4 KiB page is counted in two **count-min sketches** of `sketch_rows` rows
//! of 4-bit saturating counters (at most 15, TinyLFU's counters): a **frequency** sketch for
//! long-term hotness, whose counters all halve every `frequency_reset` samples per fast-tier
//! page (TinyLFU's aging, `W = 16 x 10 x C` in the artefact for a fast tier of `C` pages),
//! and a **momentum** sketch for short-term hotness, halved every `momentum_reset` samples.
//! A page's estimate is the smallest of its counters: a sketch may over-count (pages
//! sharing counters) but never under-counts (before aging and below saturation); its memory
//! is fixed by the fast tier's size, not by the pages touched (the paper's 2.0-7.8x less
//! metadata than per-page counters).
//!
//! Samples are handled in batches of `batch_samples` (the artefact's `SAMPLE_BATCH_SIZE`):
//! each sampled page's counts are added once per batch, and a sampled page on the slow tier
//! whose frequency reaches `hot_threshold` or whose momentum reaches `momentum_threshold`
//! is promoted (in the batch's order, within the rate limit). When the fast tier's free
//! memory falls below `alloc_watermark` of it, demotion scans the pages this policy placed
//! on the fast tier (from a cursor) for pages with a frequency below `hot_threshold` and no
//! momentum, and demotes them until free memory is back at `demote_watermark`.
//!
//! Not modelled: the artefact's adaptive sampling frequency, its second-chance queue for
//! frequent pages without momentum (they are simply kept), and the scan of pages the
//! allocator placed on the fast tier (only pages this policy promoted are demotion
//! candidates).
//!
//! Parameters: [`HybridTierParams`] (defaults, ranges and sources in `docs/parameters.md`,
//! mechanism and numbers in `docs/tiering-systems.md`).

use std::collections::{BTreeSet, HashMap};

use super::{Feed, TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::{FeedKind, Ps};
use crate::error::Result;
use crate::stats::Stats;
use crate::units::Duration;
use tierlab_core::param::{params, Provenance};

/// Largest value of a 4-bit counter.
pub const COUNTER_MAX: u8 = 15;

/// A count-min sketch of 4-bit saturating counters (one byte each here).
#[derive(Clone, Debug)]
pub struct CountMin {
    rows: usize,
    width: usize,
    counters: Vec<u8>,
}

impl CountMin {
    /// A sketch of `rows` rows of `width` counters.
    pub fn new(rows: usize, width: usize) -> Self {
        let width = width.max(1);
        CountMin { rows, width, counters: vec![0; rows * width] }
    }

    fn slot(&self, row: usize, key: u64) -> usize {
        // One multiplicative hash per row (odd constants), the high bits taken.
        let h = (key ^ (row as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .wrapping_mul(0xd6e8_feb8_6659_fd93 | 1)
            .rotate_right(29)
            .wrapping_mul(0xbf58_476d_1ce4_e5b9);
        row * self.width + ((h >> 16) % self.width as u64) as usize
    }

    /// Add `n` to `key`'s counters (saturating).
    pub fn add(&mut self, key: u64, n: u32) {
        for r in 0..self.rows {
            let s = self.slot(r, key);
            let c = &mut self.counters[s];
            *c = (*c as u32 + n).min(COUNTER_MAX as u32) as u8;
        }
    }

    /// The estimate of `key`'s count: its smallest counter.
    pub fn estimate(&self, key: u64) -> u8 {
        (0..self.rows).map(|r| self.counters[self.slot(r, key)]).min().unwrap_or(0)
    }

    /// Halve every counter (aging).
    pub fn halve(&mut self) {
        for c in &mut self.counters {
            *c >>= 1;
        }
    }

    /// Bytes of counters (two 4-bit counters per byte in the real structure).
    pub fn bytes(&self) -> u64 {
        (self.counters.len() as u64).div_ceil(2)
    }
}

/// Parameters of `hybridtier`.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct HybridTierParams {
    /// Frequency (long-term) at which a sampled slow-tier page is promoted.
    #[param(
        default = 4,
        range = "[1, 15]",
        unit = "samples",
        assumed = "the artefact adapts its hot threshold at run time; 4 of the counters' 15"
    )]
    pub hot_threshold: u8,
    /// Momentum (short-term) at which a sampled slow-tier page is promoted.
    #[param(
        default = 2,
        range = "[1, 15]",
        unit = "samples",
        assumed = "the artefact's INIT_MOMENTUM_THRESH is a build option; 2 samples in one momentum window"
    )]
    pub momentum_threshold: u8,
    /// Rows (hash functions) of each sketch.
    #[param(
        default = 4,
        range = "[1, 16]",
        unit = "rows",
        sourced = "HybridTier artefact (kevins981/hybridtier-asplos25-artifact, tiering_runtime/hybridtier.cpp): \
                   NUM_HASH_FUNCTIONS = 4"
    )]
    pub sketch_rows: u32,
    /// Counters per row, per fast-tier page (the sketch's width is this times the fast
    /// tier's 4 KiB pages).
    #[param(
        default = 1.0,
        range = "(0, 64]",
        unit = "counters per page",
        assumed = "TinyLFU sizes its sketch to the cache: one counter per cached item per row"
    )]
    pub width_per_page: f64,
    /// Samples per fast-tier page between halvings of the frequency sketch.
    #[param(
        default = 160.0,
        range = "(0, 1e9]",
        unit = "samples per page",
        sourced = "HybridTier artefact, tiering_runtime/hybridtier.cpp: SAMPLE_SIZE = fast pages x 16 x 10"
    )]
    pub frequency_reset: f64,
    /// Samples between halvings of the momentum sketch.
    #[param(
        default = 100_000,
        range = "[1, 1e12]",
        unit = "samples",
        assumed = "one sample batch (the artefact's momentum window is not documented)"
    )]
    pub momentum_reset: u64,
    /// Samples per batch (promotion decisions are made per batch).
    #[param(
        default = 100_000,
        range = "[1, 1e12]",
        unit = "samples",
        sourced = "HybridTier artefact, tiering_runtime/hybridtier.cpp: SAMPLE_BATCH_SIZE = 100000"
    )]
    pub batch_samples: u64,
    /// Demotion starts when fast free memory falls below this share of the fast tier...
    #[param(
        default = 0.0125,
        range = "[0, 1]",
        unit = "fraction",
        sourced = "HybridTier artefact, tiering_runtime/hybridtier.cpp: ALLOC_WMARK = DEMOTE_WMARK / 4 (1.25%)"
    )]
    pub alloc_watermark: f64,
    /// ...and demotes until free memory is back at this share.
    #[param(
        default = 0.05,
        range = "[0, 1]",
        unit = "fraction",
        sourced = "HybridTier artefact, tiering_runtime/hybridtier.cpp: DEMOTE_WMARK = fast memory / 20 (5%)"
    )]
    pub demote_watermark: f64,
    /// Time between checks of the batch (the tiering thread's poll of the sample buffers).
    #[param(default = Duration(10_000_000), assumed = "the tiering thread polls its sample buffers continuously; 10 ms")]
    pub interval: Duration,
    /// CPU cost of one sample (two sketch updates).
    #[param(
        default = 40.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "8 counter updates and a hash-map update"
    )]
    pub ns_per_sample: f64,
    /// CPU cost of examining one fast-tier page for demotion.
    #[param(
        default = 20.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "a pagemap entry and two sketch lookups"
    )]
    pub ns_per_scan: f64,
}

impl TieringParams for HybridTierParams {
    fn build(&self, _shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        if self.interval.0 == 0 {
            return Err(ctx.err("interval", "must be > 0"));
        }
        if self.alloc_watermark > self.demote_watermark {
            return Err(ctx.err("alloc_watermark", "must not exceed demote_watermark"));
        }
        Ok(Box::new(HybridTier::new(self.clone())))
    }
    fn period(&self) -> Ps {
        self.interval.ps()
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        Some(&[FeedKind::Samples])
    }
}

/// The `hybridtier` policy.
pub struct HybridTier {
    p: HybridTierParams,
    next: Ps,
    /// Built at the first event (the width follows the fast tier's size).
    freq: Option<CountMin>,
    momentum: Option<CountMin>,
    /// Sampled pages of the current batch with their sample counts.
    batch: HashMap<u64, u32>,
    batch_n: u64,
    since_freq_reset: u64,
    since_momentum_reset: u64,
    freq_reset_every: u64,
    in_fast: BTreeSet<u64>,
    cursor: u64,
    samples: u64,
    batches: u64,
    resets: u64,
}

impl HybridTier {
    fn new(p: HybridTierParams) -> Self {
        HybridTier {
            next: p.interval.ps(),
            p,
            freq: None,
            momentum: None,
            batch: HashMap::new(),
            batch_n: 0,
            since_freq_reset: 0,
            since_momentum_reset: 0,
            freq_reset_every: u64::MAX,
            in_fast: BTreeSet::new(),
            cursor: 0,
            samples: 0,
            batches: 0,
            resets: 0,
        }
    }

    fn ensure_sketches(&mut self, ctx: &TieringCtx) {
        if self.freq.is_none() {
            let pages = tierlab_core::pages_for(ctx.fast_capacity()).max(1);
            let width = (pages as f64 * self.p.width_per_page).ceil() as usize;
            let rows = self.p.sketch_rows as usize;
            self.freq = Some(CountMin::new(rows, width));
            self.momentum = Some(CountMin::new(rows, width));
            self.freq_reset_every = (pages as f64 * self.p.frequency_reset).max(1.0) as u64;
        }
    }

    /// Apply the batch to the sketches; the promotion candidates on the slow tier.
    fn apply_batch(&mut self, ctx: &TieringCtx) -> Vec<u64> {
        let (Some(freq), Some(mom)) = (self.freq.as_mut(), self.momentum.as_mut()) else { return Vec::new() };
        let mut pages: Vec<(u64, u32)> = self.batch.drain().collect();
        pages.sort_unstable();
        let slow = ctx.tiers().slow;
        let mut out = Vec::new();
        for (vpn, n) in pages {
            freq.add(vpn, n);
            mom.add(vpn, n);
            let hot =
                freq.estimate(vpn) >= self.p.hot_threshold || mom.estimate(vpn) >= self.p.momentum_threshold;
            let va = tierlab_core::page_addr(vpn);
            if hot && ctx.machine.node_of(va) == Some(slow) && ctx.machine.page_size_of(va).is_some() {
                out.push(va);
            }
        }
        self.batch_n = 0;
        self.batches += 1;
        out
    }

    /// Demote cold promoted pages until fast free memory is back at the demotion watermark.
    fn demote(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let cap = ctx.fast_capacity() as f64;
        if ctx.fast_free() as f64 >= cap * self.p.alloc_watermark {
            return Ok(());
        }
        let want = (cap * self.p.demote_watermark) as u64;
        let (Some(freq), Some(mom)) = (self.freq.as_ref(), self.momentum.as_ref()) else { return Ok(()) };
        let mut victims = Vec::new();
        let mut need = want.saturating_sub(ctx.fast_free());
        let mut scanned = 0u64;
        let order: Vec<u64> =
            self.in_fast.range(self.cursor..).chain(self.in_fast.range(..self.cursor)).copied().collect();
        for va in order {
            if need == 0 {
                break;
            }
            scanned += 1;
            self.cursor = va + 1;
            let vpn = tierlab_core::vpn(va);
            if freq.estimate(vpn) < self.p.hot_threshold && mom.estimate(vpn) < 1 {
                need = need.saturating_sub(super::page_bytes(&ctx.machine, va));
                victims.push(va);
            }
        }
        ctx.charge(Ps::from_ns_f64(scanned as f64 * self.p.ns_per_scan));
        for va in &victims {
            self.in_fast.remove(va);
        }
        ctx.demote(&victims)?;
        Ok(())
    }
}

impl TieringPolicy for HybridTier {
    fn next_event(&self) -> Ps {
        self.next
    }

    fn on_feed(&mut self, feed: &Feed, ctx: &mut TieringCtx) -> Result<()> {
        let Feed::Samples(drains) = feed else { return Ok(()) };
        self.ensure_sketches(ctx);
        let mut n = 0u64;
        for d in drains.iter() {
            for &(addr, _) in &d.records {
                n += 1;
                *self.batch.entry(tierlab_core::vpn(addr)).or_default() += 1;
            }
        }
        self.samples += n;
        self.batch_n += n;
        self.since_freq_reset += n;
        self.since_momentum_reset += n;
        ctx.charge(Ps::from_ns_f64(n as f64 * self.p.ns_per_sample));
        Ok(())
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        self.next = ctx.now + self.p.interval.ps();
        self.ensure_sketches(ctx);
        if self.batch_n < self.p.batch_samples {
            return Ok(());
        }
        let candidates = self.apply_batch(ctx);
        if self.since_freq_reset >= self.freq_reset_every {
            self.freq.as_mut().expect("sketch").halve();
            self.since_freq_reset = 0;
            self.resets += 1;
        }
        if self.since_momentum_reset >= self.p.momentum_reset {
            self.momentum.as_mut().expect("sketch").halve();
            self.since_momentum_reset = 0;
        }
        self.demote(ctx)?;
        if candidates.is_empty() {
            return Ok(());
        }
        let (moved, _) = ctx.promote(&candidates)?;
        for &va in candidates.iter().take(moved as usize) {
            self.in_fast.insert(va);
        }
        self.demote(ctx)
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.samples"), self.samples);
        out.set(format!("{prefix}.sample_batches"), self.batches);
        out.set(format!("{prefix}.coolings"), self.resets);
        let bytes =
            self.freq.as_ref().map_or(0, CountMin::bytes) + self.momentum.as_ref().map_or(0, CountMin::bytes);
        out.set(format!("{prefix}.metadata_bytes"), bytes);
    }
}

impl crate::params::SharedDefaults<TieringShared> for HybridTierParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(1_000_000.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Assumed(
            "HybridTier migrates each batch's candidates with move_pages without a rate limit: 1,000,000 MB/s",
        )),
            "copy_mode" => Some(Provenance::Sourced(
                "HybridTier artefact (tiering_runtime/hybridtier.cpp): the runtime's own thread calls move_pages, not the application's threads",
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distinguishing property of the sketch: it over-counts (pages share counters) but
    /// never under-counts below saturation.
    #[test]
    fn sketch_overcounts_but_never_undercounts() {
        let mut cm = CountMin::new(4, 64);
        let mut exact: HashMap<u64, u32> = HashMap::new();
        let mut x = 12345u64;
        for _ in 0..2000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // 1,000 keys of skewed popularity into 256 counters: collisions are certain.
            let key = ((x >> 33) % 1000).min((x >> 13) % 1000);
            cm.add(key, 1);
            *exact.entry(key).or_default() += 1;
        }
        let mut over = 0;
        for (&k, &n) in &exact {
            let e = cm.estimate(k) as u32;
            assert!(e >= n.min(COUNTER_MAX as u32), "key {k}: estimate {e} < exact {n}");
            over += (e > n) as u32;
        }
        assert!(over > 0, "a sketch this small must over-count some key");
        // A key never added may read above zero (a false positive), never below.
        assert!((5000..5100).any(|k| cm.estimate(k) > 0));
        cm.halve();
        assert!(cm.counters.iter().all(|&c| c <= COUNTER_MAX / 2));
    }

    #[test]
    fn counters_saturate_at_fifteen() {
        let mut cm = CountMin::new(2, 8);
        cm.add(7, 100);
        assert_eq!(cm.estimate(7), COUNTER_MAX);
        assert_eq!(cm.bytes(), 8);
    }
}
