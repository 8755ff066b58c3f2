//! `hemem`: HeMem-like tiering (Raybuck et al., SOSP 2021) driven by PEBS samples.
//!
//! # Model
//! HeMem manages memory in huge pages (`page = "2MiB"`: 2 MiB chunks, moved as 512 base
//! pages when the mapping uses 4 KiB pages; `"4KiB"` tracks base pages). Each PEBS record
//! counts one read (a load) or one write (a store) for its page. A page is **hot** when its
//! reads reach `read_hot_threshold` or its writes reach `write_hot_threshold`. When any
//! page's reads or writes reach `cooling_threshold`, a global cooling clock ticks: every
//! page's counts are halved once per tick (lazily, the next time the page is looked at), so
//! pages that stop being sampled cool down. Pages that turn hot while on the slow tier join a
//! FIFO hot list. The policy thread wakes every `interval` and promotes from the hot list up
//! to `max_migrate` bytes per wake-up (and the rate limit); when the fast tier is full it
//! first demotes a cold page from the fast tier (coldest first, after applying cooling);
//! with no cold page there, promotion stops until one appears.
//!
//! Parameters: [`HememParams`] (defaults, ranges and sources in `docs/parameters.md`).
//!
//! The PEBS sample period is the followed `pebs` observer's (`period`; HeMem uses 5003 to
//! 19997, and samples DRAM loads, NVM loads and stores: `event = "all"`).

use std::collections::{BTreeSet, HashMap, VecDeque};

use super::{Feed, TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::{FeedKind, Ps};
use crate::error::Result;
use crate::stats::Stats;
use crate::units::{ByteSize, Duration};
use tierlab_core::param::{params, Provenance};
use tierlab_core::PageSize;

/// Parameters of `hemem`.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct HememParams {
    /// Sampled reads that make a page hot.
    #[param(
        default = 8,
        range = "[1, 281474976710656]",
        unit = "samples",
        sourced = "reference/memory-management.md: HeMem, a page is hot at >= 8 sampled reads"
    )]
    pub read_hot_threshold: u32,
    /// Sampled writes that make a page hot.
    #[param(
        default = 4,
        range = "[1, 281474976710656]",
        unit = "samples",
        sourced = "reference/memory-management.md: HeMem, a page is hot at >= 4 sampled writes"
    )]
    pub write_hot_threshold: u32,
    /// A count reaching this ticks the cooling clock (all counts halve).
    #[param(
        default = 18,
        range = "[1, 281474976710656]",
        unit = "samples",
        sourced = "reference/memory-management.md: HeMem's cooling threshold (18)"
    )]
    pub cooling_threshold: u32,
    /// Policy-loop period.
    #[param(
        default = Duration(10_000_000),
        sourced = "reference/memory-management.md: HeMem's policy loop every 10 ms"
    )]
    pub interval: Duration,
    /// Bytes migrated per loop at most.
    #[param(
        default = ByteSize(10_000_000_000),
        sourced = "reference/memory-management.md: HeMem migrates up to 10 GB per policy loop"
    )]
    pub max_migrate: ByteSize,
    /// Tracking and migration unit.
    #[param(
        default = PageSize::Huge2M,
        sourced = "reference/memory-management.md: HeMem tracks hot/cold per 2 MiB page"
    )]
    pub page: PageSize,
    /// CPU cost of handling one sample.
    #[param(
        default = 50.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "a hash lookup and a list update per record"
    )]
    pub ns_per_sample: f64,
}

impl TieringParams for HememParams {
    fn build(&self, _shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        if self.cooling_threshold < self.read_hot_threshold.max(self.write_hot_threshold) {
            return Err(ctx.err("cooling_threshold", "must be at least the hot thresholds"));
        }
        if !matches!(self.page, PageSize::Base4K | PageSize::Huge2M) {
            return Err(
                ctx.err("page", format!("`{}`: HeMem manages \"4KiB\" or \"2MiB\" units", self.page.name()))
            );
        }
        if self.interval.0 == 0 {
            return Err(ctx.err("interval", "must be > 0"));
        }
        if self.max_migrate.0 < tierlab_core::PAGE_SIZE {
            return Err(ctx.err("max_migrate", "must be at least one page (4 KiB)"));
        }
        Ok(Box::new(Hemem::new(self.clone())))
    }
    fn period(&self) -> Ps {
        self.interval.ps()
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        Some(&[FeedKind::Samples])
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Page {
    reads: u32,
    writes: u32,
    clock: u32,
    queued: bool,
}

/// The `hemem` policy.
pub struct Hemem {
    p: HememParams,
    shift: u32,
    next: Ps,
    pages: HashMap<u64, Page>,
    clock: u32,
    hot_list: VecDeque<u64>,
    /// Units this policy placed on the fast tier.
    in_fast: BTreeSet<u64>,
    samples: u64,
    coolings: u64,
    blocked: u64,
}

impl Hemem {
    fn new(p: HememParams) -> Self {
        Hemem {
            shift: if p.page == PageSize::Huge2M { 21 } else { 12 },
            next: p.interval.ps(),
            p,
            pages: HashMap::new(),
            clock: 0,
            hot_list: VecDeque::new(),
            in_fast: BTreeSet::new(),
            samples: 0,
            coolings: 0,
            blocked: 0,
        }
    }

    fn cool(clock: u32, pg: &mut Page) {
        let d = clock - pg.clock;
        if d > 0 {
            pg.reads = pg.reads.checked_shr(d).unwrap_or(0);
            pg.writes = pg.writes.checked_shr(d).unwrap_or(0);
            pg.clock = clock;
        }
    }

    fn is_hot(&self, pg: &Page) -> bool {
        pg.reads >= self.p.read_hot_threshold || pg.writes >= self.p.write_hot_threshold
    }

    /// The base pages of unit `u` on node `node`.
    fn unit_pages(&self, u: u64, node: u8, ctx: &TieringCtx) -> Vec<u64> {
        let start = u << self.shift;
        let end = start + (1u64 << self.shift);
        let mut out = Vec::new();
        let mut va = start;
        while va < end {
            let b = super::page_bytes(&ctx.machine, va);
            if ctx.machine.node_of(va) == Some(node) {
                out.push(va & !(b - 1));
            }
            va = (va & !(b - 1)) + b;
        }
        out
    }

    /// Demote the coldest non-hot unit of the fast tier; false when there is none.
    fn demote_one(&mut self, ctx: &mut TieringCtx) -> Result<bool> {
        let clock = self.clock;
        let mut best: Option<(u32, u64)> = None;
        for &u in &self.in_fast {
            let pg = self.pages.entry(u).or_default();
            Self::cool(clock, pg);
            let pg = *pg;
            if self.is_hot(&pg) {
                continue;
            }
            let heat = pg.reads + pg.writes;
            if best.is_none_or(|(h, _)| heat < h) {
                best = Some((heat, u));
            }
        }
        let Some((_, u)) = best else { return Ok(false) };
        self.in_fast.remove(&u);
        let pages = self.unit_pages(u, ctx.tiers().fast, ctx);
        ctx.demote(&pages)?;
        Ok(true)
    }
}

impl TieringPolicy for Hemem {
    fn next_event(&self) -> Ps {
        self.next
    }

    fn on_feed(&mut self, feed: &Feed, ctx: &mut TieringCtx) -> Result<()> {
        let Feed::Samples(drains) = feed else { return Ok(()) };
        let mut n = 0u64;
        for d in drains.iter() {
            for &(addr, kind) in &d.records {
                n += 1;
                let u = addr >> self.shift;
                let clock = self.clock;
                let pg = self.pages.entry(u).or_default();
                Self::cool(clock, pg);
                if kind == 1 {
                    pg.writes += 1;
                } else {
                    pg.reads += 1;
                }
                let cool = pg.reads >= self.p.cooling_threshold || pg.writes >= self.p.cooling_threshold;
                let pg = *pg;
                if self.is_hot(&pg) && !pg.queued && !self.in_fast.contains(&u) {
                    self.pages.get_mut(&u).expect("page").queued = true;
                    self.hot_list.push_back(u);
                }
                if cool {
                    self.clock += 1;
                    self.coolings += 1;
                }
            }
        }
        self.samples += n;
        ctx.charge(Ps::from_ns_f64(n as f64 * self.p.ns_per_sample));
        Ok(())
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        self.next = ctx.now + self.p.interval.ps();
        let mut moved = 0u64;
        let unit = 1u64 << self.shift;
        while moved + unit <= self.p.max_migrate.0 && ctx.core_free_before(self.next) {
            let Some(&u) = self.hot_list.front() else { break };
            let clock = self.clock;
            let pg = self.pages.entry(u).or_default();
            Self::cool(clock, pg);
            let pg = *pg;
            if !self.is_hot(&pg) {
                // Cooled down while waiting.
                self.hot_list.pop_front();
                self.pages.get_mut(&u).expect("page").queued = false;
                continue;
            }
            let pages = self.unit_pages(u, ctx.tiers().slow, ctx);
            let bytes: u64 = pages.iter().map(|&v| super::page_bytes(&ctx.machine, v)).sum();
            if bytes > ctx.kind.mover.budget() {
                break;
            }
            if ctx.fast_free() < bytes && !self.demote_one(ctx)? {
                self.blocked += 1;
                break;
            }
            if ctx.fast_free() < bytes {
                continue;
            }
            self.hot_list.pop_front();
            self.pages.get_mut(&u).expect("page").queued = false;
            ctx.promote(&pages)?;
            self.in_fast.insert(u);
            moved += bytes;
        }
        Ok(())
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        vec![("hot_list".into(), self.hot_list.len() as f64)]
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.samples"), self.samples);
        out.set(format!("{prefix}.coolings"), self.coolings);
        out.set(format!("{prefix}.tracked_pages"), self.pages.len());
        out.set(format!("{prefix}.blocked"), self.blocked);
    }
}

impl crate::params::SharedDefaults<TieringShared> for HememParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(1_000_000.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Sourced(
            "reference/memory-management.md: HeMem migrates up to 10 GB per 10 ms loop, i.e. 1,000,000 \
             MB/s (it has no other limit)",
        )),
            "copy_mode" => Some(Provenance::Sourced(
                "HeMem (Raybuck et al., SOSP'21): a policy thread migrates pages in the background while the application runs",
            )),
            _ => None,
        }
    }
}
