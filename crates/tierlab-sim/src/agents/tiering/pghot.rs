//! `pghot`: the Linux hot-page tracking and promotion subsystem proposed as pghot /
//! kmigrated (Bharata B Rao, "mm: Hot page tracking and promotion infrastructure", RFC v6,
//! linux-mm, 2026-03), in its default (compact) mode with NUMA hint faults as the source.
//!
//! # Model
//! **Source.** NUMA balancing's scanner protects the next `scan_size` of address space every
//! `scan_period` (slow-tier pages only, the cost on application thread 0, as
//! `numa-tiering`); a hint fault no longer migrates in the fault: it records the access
//! (`pghot_record_access`, `ns_per_record` on the faulting core).
//!
//! **The hotness byte.** Every page of the lower tier has one byte of record (`phi_t = u8`,
//! embedded in `mem_section`): 2 bits of access **frequency** (0..3, saturating), 5 bits of
//! **time** (the access time in buckets of `time_bucket`, 32 buckets: about 4 s with
//! HZ=1000, wrapping), 1 bit **migrate-ready**. An access less than `freq_window` after the
//! recorded one (the difference of the 5-bit buckets, modulo 32: an access more than 4 s
//! later can alias to a recent one, as in the kernel's byte) increments the frequency,
//! otherwise the frequency restarts at 1; a page whose frequency reaches `freq_threshold`
//! is marked migrate-ready and its section (`section_bytes`) is flagged hot.
//!
//! **kmigrated.** One kernel thread per lower-tier node (here the slow node, on the policy's
//! core) wakes every `kmigrated_period`, walks the PFNs of the hot sections of its node
//! (`ns_per_pfn` each), and promotes the migrate-ready pages in batches of `batch` pages;
//! a promoted page's record is cleared. The promotion **rate limit** moved from the
//! scheduler (`numa_promotion_rate_limit`) into pghot: the pages promoted in the current
//! 1 s window stop at `rate_limit_mbps` worth; what is left stays migrate-ready for a later
//! wake-up.
//!
//! **Demotion** is the kernel's reclaim: TPP-style kswapd below `demote_watermark`
//! ([`super::kswapd`]).
//!
//! Limits: records are keyed by the virtual page (one address space: the same one-to-one
//! map as PFNs); the "precision mode" (u32 records with the accessing node) is not modelled
//! (one fast node is the target); huge pages are recorded at their faulting base page.
//!
//! Parameters: [`PghotParams`] (defaults, ranges and sources in `docs/parameters.md`,
//! mechanism and numbers in `docs/tiering-systems.md`).

use std::collections::{BTreeMap, BTreeSet};

use super::kswapd::Kswapd;
use super::{TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::{FeedKind, Ps};
use crate::error::Result;
use crate::stats::Stats;
use crate::units::{ByteSize, Duration};
use tierlab_core::param::{params, Provenance};
use tierlab_core::PAGE_SIZE;

/// Parameters of `pghot`.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct PghotParams {
    /// Address space protected per scan (the hint-fault source).
    #[param(
        default = ByteSize(256 << 20),
        sourced = "Linux kernel/sched/fair.c: numa_balancing_scan_size_mb = 256 (pghot v6 keeps NUMA hint faults as its source)"
    )]
    pub scan_size: ByteSize,
    /// Time between scans.
    #[param(
        default = Duration(1_000_000_000),
        sourced = "Linux kernel/sched/fair.c: numa_balancing_scan_period_min_ms = 1000"
    )]
    pub scan_period: Duration,
    /// Time before the first scan.
    #[param(default = Duration(1_000_000_000), sourced = "Linux kernel/sched/fair.c: numa_balancing_scan_delay_ms = 1000")]
    pub scan_delay: Duration,
    /// Width of one bucket of the 5-bit time field (32 buckets wrap).
    #[param(
        default = Duration(128_000_000),
        sourced = "pghot RFC v6 cover letter: 5 time bits represent about 4 s with HZ=1000 (4096 jiffies / 32 buckets = 128 ms)"
    )]
    pub time_bucket: Duration,
    /// An access this soon after the recorded one increments the frequency.
    #[param(
        default = Duration(4_000_000_000),
        assumed = "the span of the 5-bit time field (about 4 s with HZ=1000): hint faults come at most once per \
                   1 s scan, so a 1 s window would almost never see two"
    )]
    pub freq_window: Duration,
    /// Frequency (of the 2-bit counter's 3) at which a page becomes migrate-ready.
    #[param(
        default = 2,
        range = "[1, 3]",
        unit = "accesses",
        assumed = "pghot's frequency threshold tunable; two recorded accesses within the window"
    )]
    pub freq_threshold: u8,
    /// Time between kmigrated's walks.
    #[param(default = Duration(100_000_000), assumed = "kmigrated's sleep between walks; 100 ms")]
    pub kmigrated_period: Duration,
    /// Pages per migration batch of kmigrated.
    #[param(
        default = 512,
        range = "[1, 1e9]",
        unit = "pages",
        assumed = "one migration batch (Linux NR_MAX_BATCHED_MIGRATION = 512)"
    )]
    pub batch: u32,
    /// Size of a memory section (a hot flag per section gates kmigrated's walk).
    #[param(
        default = ByteSize(128 << 20),
        sourced = "Linux arch/x86/include/asm/sparsemem.h: SECTION_SIZE_BITS = 27 (128 MiB); pghot flags hot sections"
    )]
    pub section_bytes: ByteSize,
    /// kswapd demotes when free fast memory is below this share of it, until back there.
    #[param(
        default = 0.02,
        range = "[0, 0.5)",
        unit = "fraction",
        sourced = "reference/memory-management.md: TPP's demote_scale_factor, 2%"
    )]
    pub demote_watermark: f64,
    /// Cost of a hint fault to the faulting core.
    #[param(default = 1000.0, range = "[0, 1e9]", unit = "ns", assumed = "a minor fault (cost.fault_ns)")]
    pub hint_fault_ns: f64,
    /// Cost of protecting one present PTE.
    #[param(default = 20.0, range = "[0, 1e9]", unit = "ns", assumed = "change_prot_numa per present PTE")]
    pub ns_per_pte: f64,
    /// Cost of recording one access (updating the byte) to the faulting core.
    #[param(default = 50.0, range = "[0, 1e9]", unit = "ns", assumed = "a section lookup and a byte update")]
    pub ns_per_record: f64,
    /// Cost of kmigrated's look at one PFN of a hot section.
    #[param(default = 2.0, range = "[0, 1e9]", unit = "ns", assumed = "one byte read per PFN, sequential")]
    pub ns_per_pfn: f64,
    /// Cost to kswapd of examining one fast-tier page.
    #[param(default = 100.0, range = "[0, 1e9]", unit = "ns", assumed = "as numa-tiering's kswapd")]
    pub ns_per_demote_scan: f64,
}

/// Hint faults are handled (recorded) in batches this often.
const FAULT_BATCH: Ps = Ps::from_ns(1_000_000);

/// The promotion rate limit's window (`numa_promotion_rate_limit`: one second).
const RATE_WINDOW: Ps = Ps::from_ns(1_000_000_000);

/// Buckets of the 5-bit time field.
pub const TIME_BUCKETS: u64 = 32;

/// Largest value of the 2-bit frequency.
pub const FREQ_MAX: u8 = 3;

/// The migrate-ready bit.
pub const READY: u8 = 0x80;

impl TieringParams for PghotParams {
    fn build(&self, shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        if self.scan_size.0 < PAGE_SIZE {
            return Err(ctx.err("scan_size", "must be at least one page (4 KiB)"));
        }
        if self.section_bytes.0 < PAGE_SIZE {
            return Err(ctx.err("section_bytes", "must be at least one page (4 KiB)"));
        }
        for (f, d) in [
            ("scan_period", self.scan_period),
            ("time_bucket", self.time_bucket),
            ("freq_window", self.freq_window),
            ("kmigrated_period", self.kmigrated_period),
        ] {
            if d.0 == 0 {
                return Err(ctx.err(f, "must be > 0"));
            }
        }
        Ok(Box::new(Pghot::new(self.clone(), shared.rate_limit_mbps)))
    }
    fn period(&self) -> Ps {
        self.kmigrated_period.ps()
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        None
    }
}

/// One page's hotness byte: `ready | time (5 bits) << 2 | frequency (2 bits)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hotness(pub u8);

impl Hotness {
    /// The access frequency (0..3).
    pub fn freq(self) -> u8 {
        self.0 & FREQ_MAX
    }
    /// The 5-bit time bucket.
    pub fn time(self) -> u64 {
        ((self.0 >> 2) & 0x1f) as u64
    }
    /// Whether the page is marked for migration.
    pub fn ready(self) -> bool {
        self.0 & READY != 0
    }
    /// Record an access at `now` (`pghot_record_access`); true when the page became
    /// migrate-ready.
    pub fn record(&mut self, now: Ps, bucket: Ps, window: Ps, threshold: u8) -> bool {
        let b = (now.ps() / bucket.ps().max(1)) % TIME_BUCKETS;
        let freq = if self.0 == 0 {
            1
        } else {
            // Elapsed time as the 5-bit field sees it (wrapping every 32 buckets).
            let elapsed = Ps::from_ps(((b + TIME_BUCKETS - self.time()) % TIME_BUCKETS) * bucket.ps());
            if elapsed < window {
                (self.freq() + 1).min(FREQ_MAX)
            } else {
                1
            }
        };
        let was = self.ready();
        let ready = was || freq >= threshold;
        self.0 = (ready as u8) << 7 | ((b as u8) << 2) | freq;
        ready && !was
    }
}

/// The `pghot` policy.
pub struct Pghot {
    p: PghotParams,
    rate_limit_mbps: f64,
    next_fault: Ps,
    next_scan: Ps,
    next_migrate: Ps,
    cursor: u64,
    /// The hotness bytes, by page number.
    records: BTreeMap<u64, Hotness>,
    /// Sections holding a migrate-ready page.
    hot_sections: BTreeSet<u64>,
    kswapd: Kswapd,
    /// Rate limit window: its start and the bytes promoted in it.
    rl_start: Ps,
    rl_bytes: u64,
    scans: u64,
    recorded: u64,
    marked: u64,
    walks: u64,
    pfns_walked: u64,
    rate_limited: u64,
}

impl Pghot {
    pub(crate) fn new(p: PghotParams, rate_limit_mbps: f64) -> Self {
        Pghot {
            rate_limit_mbps,
            next_fault: FAULT_BATCH,
            next_scan: p.scan_delay.ps(),
            next_migrate: p.kmigrated_period.ps(),
            p,
            cursor: 0,
            records: BTreeMap::new(),
            hot_sections: BTreeSet::new(),
            kswapd: Kswapd::default(),
            rl_start: Ps::ZERO,
            rl_bytes: 0,
            scans: 0,
            recorded: 0,
            marked: 0,
            walks: 0,
            pfns_walked: 0,
            rate_limited: 0,
        }
    }

    fn section_pages(&self) -> u64 {
        (self.p.section_bytes.0 / PAGE_SIZE).max(1)
    }

    /// Record an access to page `vpn` at `now`.
    pub(crate) fn record(&mut self, vpn: u64, now: Ps) {
        self.recorded += 1;
        let h = self.records.entry(vpn).or_default();
        if h.record(now, self.p.time_bucket.ps(), self.p.freq_window.ps(), self.p.freq_threshold) {
            self.marked += 1;
            let sp = self.section_pages();
            self.hot_sections.insert(vpn / sp);
        }
    }

    /// Promotion budget left in the current 1 s window, bytes.
    fn window_budget(&mut self, now: Ps, rate_limit_mbps: f64) -> u64 {
        if now.saturating_sub(self.rl_start) >= RATE_WINDOW {
            self.rl_start = now;
            self.rl_bytes = 0;
        }
        let limit = (rate_limit_mbps * (1u64 << 20) as f64) as u64;
        limit.saturating_sub(self.rl_bytes)
    }

    /// kmigrated: walk the hot sections, promote migrate-ready pages within the rate limit.
    pub(crate) fn kmigrated(&mut self, ctx: &mut TieringCtx, rate_limit_mbps: f64) -> Result<()> {
        self.walks += 1;
        let sp = self.section_pages();
        let slow = ctx.tiers().slow;
        let mut ready = Vec::new();
        let sections: Vec<u64> = self.hot_sections.iter().copied().collect();
        let mut walked = 0u64;
        for s in sections {
            walked += sp;
            for (&vpn, h) in self.records.range(s * sp..(s + 1) * sp) {
                if h.ready() {
                    ready.push(vpn);
                }
            }
        }
        self.pfns_walked += walked;
        ctx.charge(Ps::from_ns_f64(walked as f64 * self.p.ns_per_pfn));
        let mut budget = self.window_budget(ctx.now, rate_limit_mbps);
        let mut batch = Vec::new();
        let mut done = Vec::new();
        for vpn in ready {
            let va = tierlab_core::page_addr(vpn);
            if ctx.machine.node_of(va) != Some(slow) {
                // Already moved (or gone): the record is stale.
                done.push(vpn);
                continue;
            }
            let b = super::page_bytes(&ctx.machine, va);
            if b > budget {
                self.rate_limited += 1;
                break;
            }
            budget -= b;
            batch.push(va);
            if batch.len() == self.p.batch as usize {
                self.promote(ctx, &mut batch, &mut done)?;
            }
        }
        self.promote(ctx, &mut batch, &mut done)?;
        for vpn in done {
            self.records.remove(&vpn);
        }
        // Sections left without a migrate-ready page lose their flag.
        let records = &self.records;
        self.hot_sections.retain(|&s| records.range(s * sp..(s + 1) * sp).any(|(_, h)| h.ready()));
        Ok(())
    }

    fn promote(&mut self, ctx: &mut TieringCtx, batch: &mut Vec<u64>, done: &mut Vec<u64>) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let need: u64 = batch.iter().map(|&v| super::page_bytes(&ctx.machine, v)).sum();
        self.kswapd.reclaim(ctx, self.p.demote_watermark, need, self.p.ns_per_demote_scan)?;
        let (moved, _) = ctx.promote(batch)?;
        for &va in &batch[..moved as usize] {
            self.rl_bytes += super::page_bytes(&ctx.machine, va);
            self.kswapd.promoted(va);
            done.push(tierlab_core::vpn(va));
        }
        batch.clear();
        Ok(())
    }
}

impl TieringPolicy for Pghot {
    fn start(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        super::numa_tiering::enable_hint_faults(ctx, self.p.hint_fault_ns);
        self.kswapd.start(ctx);
        Ok(())
    }

    fn next_event(&self) -> Ps {
        self.next_fault.min(self.next_scan).min(self.next_migrate)
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let now = ctx.now;
        if now >= self.next_scan {
            self.next_scan = now + self.p.scan_period.ps();
            if super::numa_tiering::hint_scan(
                ctx,
                &mut self.cursor,
                self.p.scan_size.0,
                self.p.hint_fault_ns,
                self.p.ns_per_pte,
            ) {
                self.scans += 1;
            }
        }
        if now >= self.next_fault {
            self.next_fault = now + FAULT_BATCH;
            let faults = ctx.machine.hint_faults().as_mut().map(|h| h.take_faults()).unwrap_or_default();
            let slow = ctx.tiers().slow;
            let record = Ps::from_ns_f64(self.p.ns_per_record);
            for f in faults {
                if ctx.machine.node_of(f.va) != Some(slow) {
                    continue;
                }
                // Recorded in the fault, on the faulting core.
                ctx.machine.charge(f.core, record);
                self.record(tierlab_core::vpn(f.va), f.time);
            }
        }
        if now >= self.next_migrate {
            self.next_migrate = now + self.p.kmigrated_period.ps();
            self.kmigrated(ctx, self.rate_limit_mbps)?;
            self.kswapd.reclaim(ctx, self.p.demote_watermark, 0, self.p.ns_per_demote_scan)?;
        }
        Ok(())
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        vec![("pghot_ready".into(), self.ready_pages() as f64)]
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.hint_scans"), self.scans);
        self.engine_stats(prefix, out);
    }
}

impl Pghot {
    /// The kswapd of the engine (start, demotion).
    pub(crate) fn kswapd(&mut self) -> &mut Kswapd {
        &mut self.kswapd
    }

    /// Pages marked migrate-ready now.
    pub(crate) fn ready_pages(&self) -> usize {
        self.records.values().filter(|h| h.ready()).count()
    }

    /// The stats of the recording and migration engine.
    pub(crate) fn engine_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.pghot_recorded"), self.recorded);
        out.set(format!("{prefix}.pghot_marked"), self.marked);
        out.set(format!("{prefix}.pghot_records"), self.records.len() as u64);
        out.set(format!("{prefix}.kmigrated_walks"), self.walks);
        out.set(format!("{prefix}.kmigrated_pfns"), self.pfns_walked);
        out.set(format!("{prefix}.window_rate_limited"), self.rate_limited);
        out.set(format!("{prefix}.kswapd_reclaims"), self.kswapd.reclaims);
    }
}

impl crate::params::SharedDefaults<TieringShared> for PghotParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(65536.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Sourced(
            "Linux kernel/sched/fair.c: numa_balancing_promote_rate_limit_MBps = 65536 (pghot RFC v6 moves \
             NUMA balancing's promotion rate limit into pghot)",
        )),
            "copy_mode" => Some(Provenance::Sourced(
                "pghot RFC v6: kmigrated, a kernel thread per lower-tier node, promotes (the hint fault only records)",
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::tiering::{Mover, Tiering, Tiers};
    use crate::os::{AddressSpace, MachineConfig, MapOptions};
    use tierlab_core::Access;

    /// The hotness byte: 2 bits of frequency saturating at 3, 5 bits of time in 128 ms
    /// buckets that wrap after 4.096 s (an access 4.2 s later reads as 104 ms later), the
    /// migrate-ready bit set at the threshold.
    #[test]
    fn hotness_byte_counts_saturates_and_wraps() {
        let (bucket, window) = (Ps::from_ns(128_000_000), Ps::from_ns(1_000_000_000));
        let mut h = Hotness::default();
        assert!(!h.record(Ps::from_ns(10_000_000), bucket, window, 2));
        assert_eq!((h.freq(), h.ready()), (1, false));
        assert!(h.record(Ps::from_ns(300_000_000), bucket, window, 2), "second access within 1 s");
        assert_eq!((h.freq(), h.ready()), (2, true));
        h.record(Ps::from_ns(400_000_000), bucket, window, 2);
        h.record(Ps::from_ns(500_000_000), bucket, window, 2);
        assert_eq!(h.freq(), FREQ_MAX, "the 2-bit frequency saturates");
        // 2 s later: outside the window, the frequency restarts.
        let mut g = Hotness::default();
        g.record(Ps::from_ns(0), bucket, window, 3);
        g.record(Ps::from_ns(2_000_000_000), bucket, window, 3);
        assert_eq!(g.freq(), 1);
        // 4.2 s later: the 5-bit time wraps and the access aliases to a recent one.
        let mut a = Hotness::default();
        a.record(Ps::from_ns(0), bucket, window, 3);
        a.record(Ps::from_ns(4_200_000_000), bucket, window, 3);
        assert_eq!(a.freq(), 2, "4.2 s aliases to 104 ms in a 32-bucket field");
    }

    /// kmigrated promotes the migrate-ready pages only, and the rate limit caps a window's
    /// promotions: at 1 MB/s (256 pages per second) 1,000 ready pages take four windows.
    #[test]
    fn kmigrated_promotes_ready_pages_within_the_rate_limit() {
        let mut m = crate::os::Machine::new(&MachineConfig { cores: 2, ..MachineConfig::default() });
        let n = 1200u64;
        let a = m.mmap(n * PAGE_SIZE, MapOptions::named("x")).unwrap();
        for i in 0..n {
            m.access(0, Access::read(a + i * PAGE_SIZE)).unwrap();
        }
        let pages: Vec<u64> = (0..n).map(|i| a + i * PAGE_SIZE).collect();
        m.migrate_pages(&pages, 1, 1).unwrap();
        let t = Tiers { fast: 0, slow: 1 };
        // The engine's token bucket out of the way: pghot's own window is what limits.
        let mut mover = Mover::new(1e6, Ps::from_ns(100_000_000));
        let mut pg = Pghot::new(PghotParams { demote_watermark: 0.0, ..PghotParams::default() }, 1.0);
        // Pages 0..1000 fault twice within the window (ready), 1000..1200 once.
        for (i, &va) in pages.iter().enumerate() {
            pg.record(tierlab_core::vpn(va), Ps::from_ns(1_000_000));
            if i < 1000 {
                pg.record(tierlab_core::vpn(va), Ps::from_ns(200_000_000));
            }
        }
        assert_eq!(pg.marked, 1000);
        let mut promoted = Vec::new();
        for w in 0..5u64 {
            let now = Ps::from_ns(1_000_000_000 * (w + 1));
            let mut cpu = Ps::ZERO;
            let mut c = crate::agents::testing::ctx(&mut m, now, 1, &mut cpu);
            mover.refill(now);
            let mut tc = c.with_kind(Tiering { tiers: t, mover: &mut mover });
            pg.kmigrated(&mut tc, 1.0).unwrap();
            promoted.push(mover.promoted_pages);
        }
        // 1 MB/s = 256 pages per 1 s window.
        assert_eq!(promoted, vec![256, 512, 768, 1000, 1000]);
        assert!(pg.rate_limited >= 3);
        for &va in &pages[1000..] {
            assert_eq!(m.node_of(va), Some(1), "a page seen once is not promoted");
        }
        assert!(pg.hot_sections.is_empty(), "no ready page left: no hot section");
    }
}
