//! `m5`: device-side telemetry as M5 (Sun et al., *M5: Mastering Page Migration and Memory
//! Management for CXL-based Tiered Memory Systems*, ASPLOS 2025) puts it in a CXL memory
//! controller: a hot-page tracker (HPT) and a hot-word tracker (HWT) that see every access
//! the device serves and report the exact top-K pages and words.
//!
//! # Model
//! The memory system logs each access's address ([`MachineView::enable_device_log`]); every
//! `query_interval` the host queries the device on node `node`: the accesses of the interval
//! that fell on pages of that node (the page's node at the query) are counted exactly per
//! 4 KiB page and per `word_bytes` word, and the device returns the `top_k` pages and the
//! `top_k` words with the most accesses (ties by address), hottest first; the counts then
//! restart (one epoch per query). The device's counting costs the CPU nothing; reading the
//! lists costs `ns_per_entry` per entry on the observer's core (MMIO reads over CXL.io).
//!
//! The top-K pages of each query are published as a sample batch (one record per page,
//! hottest first) for a tiering policy (`m5` tiering); the window's hot set is every page
//! some query of the window reported.
//!
//! Limits: the device counts every access to its pages, cache hits included (the cost
//! model's cache-hit share is the same for every page, so the ranking is that of the
//! device's own traffic when no cache model runs); the tracker's capacity is not limited
//! (M5's trackers are exact for the top K).
//!
//! Parameters: [`M5Params`] (defaults, ranges and sources in `docs/parameters.md`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use tierlab_core::param::params;
use tierlab_core::PAGE_SIZE;

use super::*;
use crate::agents::{Drain, MachineView, Ps};
use crate::error::Result;
use crate::units::{ByteSize, Duration};

/// Parameters of `m5`.
#[params]
#[derive(Clone, Debug)]
pub struct M5Params {
    /// The memory node whose controller tracks accesses (the CXL device).
    #[param(default = 1, range = "[0, 255]", setting)]
    pub node: u8,
    /// Time between two queries of the trackers (one counting epoch).
    #[param(default = Duration(10_000_000), assumed = "M5's manager polls the device's trackers; 10 ms")]
    pub query_interval: Duration,
    /// Pages (and words) each query returns.
    #[param(
        default = 1024,
        range = "[1, 1e9]",
        unit = "entries",
        assumed = "the depth of M5's top-K trackers is a design parameter; 1024 entries"
    )]
    pub top_k: u32,
    /// Granularity of the hot-word tracker.
    #[param(default = ByteSize(64), sourced = "M5: the HWT tracks 64-byte words (cache lines), the CXL access unit")]
    pub word_bytes: ByteSize,
    /// Cost of reading one entry of a top-K list.
    #[param(
        default = 500.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "an MMIO read of an uncached device register over CXL.io"
    )]
    pub ns_per_entry: f64,
}

impl TelemetryParams for M5Params {
    fn build(&self, _label: &str, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
        if self.query_interval.0 == 0 {
            return Err(ctx.err("query_interval", "must be > 0"));
        }
        if self.node as usize >= ctx.nodes.max(1) {
            return Err(ctx.err(
                "node",
                format!("node {} does not exist (the machine has {} nodes)", self.node, ctx.nodes),
            ));
        }
        if self.word_bytes.0 == 0 || self.word_bytes.0 > PAGE_SIZE || !self.word_bytes.0.is_power_of_two() {
            return Err(ctx.err("word_bytes", "must be a power of two from 1 B to 4 KiB"));
        }
        Ok(Box::new(M5::new(self.clone())))
    }
    fn publishes(&self) -> &'static [FeedKind] {
        &[FeedKind::Samples]
    }
}

/// The top `k` keys of `counts` by count (ties: lower key first), hottest first.
pub fn top_k(counts: &HashMap<u64, u64>, k: usize) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = counts.iter().map(|(&key, &n)| (key, n)).collect();
    let order = |a: &(u64, u64), b: &(u64, u64)| b.1.cmp(&a.1).then(a.0.cmp(&b.0));
    if v.len() > k {
        v.select_nth_unstable_by(k, order);
        v.truncate(k);
    }
    v.sort_unstable_by(order);
    v
}

/// The `m5` observer.
pub struct M5 {
    p: M5Params,
    next: Ps,
    log: Vec<u64>,
    pages: HashMap<u64, u64>,
    words: HashMap<u64, u64>,
    window: BTreeSet<u64>,
    queries: u64,
    counted: u64,
    last_top_page: u64,
    last_top_word: u64,
    drains: u64,
}

impl M5 {
    fn new(p: M5Params) -> Self {
        M5 {
            next: p.query_interval.ps(),
            p,
            log: Vec::new(),
            pages: HashMap::new(),
            words: HashMap::new(),
            window: BTreeSet::new(),
            queries: 0,
            counted: 0,
            last_top_page: 0,
            last_top_word: 0,
            drains: 0,
        }
    }

    /// Count the logged accesses that fall on the device's node.
    fn count(&mut self, m: &MachineView) {
        let word_shift = self.p.word_bytes.0.trailing_zeros();
        // Runs of accesses to one page (and one word) are added to the tables once.
        let (mut page, mut on_node, mut page_n) = (u64::MAX, false, 0u64);
        let (mut word, mut word_n) = (u64::MAX, 0u64);
        for &a in &self.log {
            let vpn = tierlab_core::vpn(a);
            if page != vpn {
                if on_node && page_n > 0 {
                    *self.pages.entry(page).or_default() += page_n;
                }
                page = vpn;
                page_n = 0;
                on_node = m.node_of(a) == Some(self.p.node);
            }
            if !on_node {
                continue;
            }
            page_n += 1;
            self.counted += 1;
            let w = a >> word_shift;
            if w != word {
                if word_n > 0 {
                    *self.words.entry(word).or_default() += word_n;
                }
                word = w;
                word_n = 0;
            }
            word_n += 1;
        }
        if on_node && page_n > 0 {
            *self.pages.entry(page).or_default() += page_n;
        }
        if word_n > 0 {
            *self.words.entry(word).or_default() += word_n;
        }
        self.log.clear();
    }
}

impl Observer for M5 {
    fn start(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        if self.p.node as usize >= ctx.machine.nodes().len() {
            return Err(crate::SimError::runtime(format!("m5: node {} does not exist", self.p.node)));
        }
        ctx.machine.enable_device_log();
        self.next = ctx.now + self.p.query_interval.ps();
        Ok(())
    }

    fn next_event(&self) -> Ps {
        self.next
    }

    fn publishes(&self) -> &'static [FeedKind] {
        &[FeedKind::Samples]
    }

    fn on_event(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        self.next = ctx.now + self.p.query_interval.ps();
        for core in 0..ctx.machine.cores() {
            ctx.machine.drain_device_log(core, &mut self.log);
        }
        self.count(&ctx.machine);
        let k = self.p.top_k as usize;
        let pages = top_k(&self.pages, k);
        let words = top_k(&self.words, k);
        self.last_top_page = pages.first().map_or(0, |p| p.1);
        self.last_top_word = words.first().map_or(0, |w| w.1);
        self.pages.clear();
        self.words.clear();
        self.queries += 1;
        ctx.charge(Ps::from_ns_f64((pages.len() + words.len()) as f64 * self.p.ns_per_entry));
        self.window.extend(pages.iter().map(|p| p.0));
        if !pages.is_empty() && ctx.wants(FeedKind::Samples) {
            let records = pages.iter().map(|&(vpn, _)| (tierlab_core::page_addr(vpn), 0u8)).collect();
            let d = Drain { time: ctx.now, core: ctx.core as u32, index: self.drains, records, cost_ps: 0 };
            self.drains += 1;
            ctx.publish(Feed::Samples(Arc::new(vec![d])));
        }
        Ok(())
    }

    fn hot_set(&mut self, _start: Ps, _end: Ps, _m: &MachineView) -> HotReport {
        HotReport::Pages(std::mem::take(&mut self.window).into_iter().collect())
    }

    fn finish(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        ctx.machine.disable_device_log();
        Ok(())
    }

    fn report_stats(&self, prefix: &str, out: &mut crate::stats::Stats) {
        out.set(format!("{prefix}.queries"), self.queries);
        out.set(format!("{prefix}.device_accesses"), self.counted);
        out.set(format!("{prefix}.top_page_accesses"), self.last_top_page);
        out.set(format!("{prefix}.top_word_accesses"), self.last_top_word);
    }
}

impl crate::params::SharedDefaults<TelemetryShared> for M5Params {
    fn shared_defaults() -> TelemetryShared {
        TelemetryShared::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trackers are exact: on a skewed stream of 20,000 accesses over 500 pages the
    /// top 16 pages (and words) are those of an exact count, in order, with their exact
    /// counts (a sampled or sketched tracker would miss or misorder some).
    #[test]
    fn top_k_is_exact() {
        let mut pages: HashMap<u64, u64> = HashMap::new();
        let mut exact: Vec<u64> = vec![0; 500];
        let mut x = 7u64;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let p = ((x >> 33) % 500).min((x >> 20) % 500).min((x >> 7) % 500);
            exact[p as usize] += 1;
            *pages.entry(p).or_default() += 1;
        }
        let got = top_k(&pages, 16);
        let mut want: Vec<(u64, u64)> = exact.iter().enumerate().map(|(p, &n)| (p as u64, n)).collect();
        want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        want.truncate(16);
        assert_eq!(got, want);
        assert!(got.windows(2).all(|w| w[0].1 >= w[1].1), "hottest first");
    }

    /// The device counts only the accesses to its own node's pages, per page and per word.
    #[test]
    fn counts_only_its_node() {
        use crate::os::{AddressSpace, MachineConfig, MapOptions};
        use tierlab_core::Access;
        let mut m = crate::os::Machine::new(&MachineConfig { cores: 1, ..MachineConfig::default() });
        let a = m.mmap(4 * PAGE_SIZE, MapOptions::named("x")).unwrap();
        for i in 0..4 {
            m.access(0, Access::read(a + i * PAGE_SIZE)).unwrap();
        }
        m.migrate_pages(&[a + 2 * PAGE_SIZE, a + 3 * PAGE_SIZE], 1, 0).unwrap();
        let mut cpu = Ps::ZERO;
        let mut d = M5::new(M5Params::default());
        {
            let mut ctx = crate::agents::testing::ctx(&mut m, Ps::ZERO, 0, &mut cpu);
            d.start(&mut ctx).unwrap();
        }
        for _ in 0..5 {
            m.access(0, Access::read(a)).unwrap(); // node 0: not the device's
            m.access(0, Access::read(a + 2 * PAGE_SIZE)).unwrap();
            m.access(0, Access::read(a + 2 * PAGE_SIZE + 64)).unwrap();
        }
        m.access(0, Access::read(a + 3 * PAGE_SIZE)).unwrap();
        let mut ctx = crate::agents::testing::ctx(&mut m, Ps::from_ns(10_000_000), 0, &mut cpu);
        ctx.machine.drain_device_log(0, &mut d.log);
        d.count(&ctx.machine);
        assert_eq!(d.counted, 11);
        let vpn2 = tierlab_core::vpn(a) + 2;
        assert_eq!(top_k(&d.pages, 2), vec![(vpn2, 10), (vpn2 + 1, 1)]);
        assert_eq!(top_k(&d.words, 1)[0].1, 5, "two words of page 2, five accesses each");
    }
}
