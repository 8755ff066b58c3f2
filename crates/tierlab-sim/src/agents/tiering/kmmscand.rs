//! `kmmscand`: promotion by a kernel thread that scans the Accessed bits of the process's
//! page tables, as AMD's kmmscand / kscand RFCs (Raghavendra K T, linux-mm, v1 2024-12 to
//! v3 2025-08: "PTE A bit scanning" for slow-tier page promotion).
//!
//! # Model
//! **Scanning.** A global kernel thread (the policy's core) walks the address space in
//! steps of `scan_size` of address space, testing and clearing each leaf PTE's Accessed bit
//! (no TLB flush, `ptep_test_and_clear_young`; `ns_per_pte` per entry read, on its core), and
//! sleeps `scan_sleep` between steps: its scan rate is `scan_size` per (step time +
//! `scan_sleep`). The application pays nothing for the scan (unlike NUMA balancing's hint
//! faults) but the scanner sees only the Accessed bit: whether a page was touched since the
//! previous scan, not how often.
//!
//! **Promotion.** A page on the slow tier found accessed by **two consecutive scans** of
//! its address (the first clear gives a baseline: a bit set long ago, at population, is not
//! evidence of use) goes on the migration list, which the migration thread (kmmmigrated,
//! the same core) promotes after each step, within the rate limit; what the rate limit
//! holds back stays listed.
//!
//! **Demotion** is the kernel's: TPP-style kswapd below `demote_watermark`
//! ([`super::kswapd`]).
//!
//! Limits: the RFC's adaptive per-process scan period and its choice of the target node
//! (from top-tier accesses) are not modelled (one fast node; fixed rate).
//!
//! Parameters: [`KmmscandParams`] (defaults, ranges and sources in `docs/parameters.md`,
//! mechanism and numbers in `docs/tiering-systems.md`).

use std::collections::{BTreeSet, VecDeque};

use super::kswapd::Kswapd;
use super::ptwalk::Walk;
use super::{TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::{FeedKind, Ps};
use crate::error::Result;
use crate::stats::Stats;
use crate::units::{ByteSize, Duration};
use tierlab_core::param::{params, Provenance};
use tierlab_core::PAGE_SIZE;

/// Parameters of `kmmscand`.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct KmmscandParams {
    /// Address space scanned per step.
    #[param(
        default = ByteSize(256 << 20),
        assumed = "the RFC scans in chunks; NUMA balancing's scan size (256 MB) per step"
    )]
    pub scan_size: ByteSize,
    /// Sleep between steps.
    #[param(default = Duration(20_000_000), assumed = "the scanner's sleep between chunks; 20 ms")]
    pub scan_sleep: Duration,
    /// Cost of reading (and clearing) one PTE.
    #[param(
        default = 250.0,
        range = "[0, 1e9]",
        unit = "ns",
        calibrated = "as pte-scan: papers/telescope-slides.txt, a full scan of 1 TB (256M PTEs) takes over a minute"
    )]
    pub ns_per_pte: f64,
    /// kswapd demotes when free fast memory is below this share of it, until back there.
    #[param(
        default = 0.02,
        range = "[0, 0.5)",
        unit = "fraction",
        sourced = "reference/memory-management.md: TPP's demote_scale_factor, 2%"
    )]
    pub demote_watermark: f64,
    /// Cost to kswapd of examining one fast-tier page.
    #[param(default = 100.0, range = "[0, 1e9]", unit = "ns", assumed = "as numa-tiering's kswapd")]
    pub ns_per_demote_scan: f64,
}

impl TieringParams for KmmscandParams {
    fn build(&self, _shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        if self.scan_size.0 < PAGE_SIZE {
            return Err(ctx.err("scan_size", "must be at least one page (4 KiB)"));
        }
        Ok(Box::new(Kmmscand::new(self.clone())))
    }
    fn period(&self) -> Ps {
        self.scan_sleep.ps().max(Ps::from_ns(1_000_000))
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        None
    }
}

/// The `kmmscand` policy.
pub struct Kmmscand {
    p: KmmscandParams,
    next: Ps,
    walk: Walk,
    /// Slow-tier pages found accessed by the latest scan of their address.
    seen: BTreeSet<u64>,
    /// The migration list.
    list: VecDeque<u64>,
    listed: BTreeSet<u64>,
    kswapd: Kswapd,
    steps: u64,
    passes: u64,
    ptes: u64,
    found: u64,
    listed_total: u64,
}

impl Kmmscand {
    fn new(p: KmmscandParams) -> Self {
        Kmmscand {
            next: Ps::ZERO,
            p,
            walk: Walk::default(),
            seen: BTreeSet::new(),
            list: VecDeque::new(),
            listed: BTreeSet::new(),
            kswapd: Kswapd::default(),
            steps: 0,
            passes: 0,
            ptes: 0,
            found: 0,
            listed_total: 0,
        }
    }

    /// One scan step: test-and-clear the Accessed bits of the next `scan_size`, list the
    /// slow pages accessed at this scan and the previous one. Returns the step's time.
    fn scan_step(&mut self, ctx: &mut TieringCtx) -> Ps {
        let step = self.walk.step(&mut ctx.machine, self.p.scan_size.0 / PAGE_SIZE);
        self.steps += 1;
        self.ptes += step.read;
        self.passes += step.done as u64;
        let t = Ps::from_ns_f64(step.read as f64 * self.p.ns_per_pte);
        ctx.charge(t);
        let slow = ctx.tiers().slow;
        // Accessed pages of the step on the slow tier.
        let mut now_seen = Vec::new();
        for &(a, b) in &step.runs {
            for vpn in a..b {
                if ctx.machine.node_of(tierlab_core::page_addr(vpn)) == Some(slow) {
                    now_seen.push(vpn);
                }
            }
        }
        self.found += now_seen.len() as u64;
        // Consecutive: accessed now and at the previous scan of the same address.
        for &vpn in &now_seen {
            if self.seen.contains(&vpn) && self.listed.insert(vpn) {
                self.list.push_back(vpn);
                self.listed_total += 1;
            }
        }
        for &(s, e) in &step.spans {
            let (a, b) = (tierlab_core::vpn(s), tierlab_core::vpn(e.saturating_add(PAGE_SIZE - 1)));
            let stale: Vec<u64> = self.seen.range(a..b).copied().collect();
            for v in stale {
                self.seen.remove(&v);
            }
        }
        self.seen.extend(now_seen);
        t
    }

    /// kmmmigrated: promote the listed pages within the rate limit.
    fn migrate(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let slow = ctx.tiers().slow;
        let mut batch = Vec::new();
        let mut budget = ctx.kind.mover.budget();
        while let Some(&vpn) = self.list.front() {
            let va = tierlab_core::page_addr(vpn);
            if ctx.machine.node_of(va) != Some(slow) {
                self.list.pop_front();
                self.listed.remove(&vpn);
                continue;
            }
            let b = super::page_bytes(&ctx.machine, va);
            if b > budget {
                break;
            }
            budget -= b;
            self.list.pop_front();
            self.listed.remove(&vpn);
            batch.push(va);
        }
        if batch.is_empty() {
            return Ok(());
        }
        let need: u64 = batch.iter().map(|&v| super::page_bytes(&ctx.machine, v)).sum();
        self.kswapd.reclaim(ctx, self.p.demote_watermark, need, self.p.ns_per_demote_scan)?;
        let (moved, _) = ctx.promote(&batch)?;
        for &va in &batch[..moved as usize] {
            self.kswapd.promoted(va);
        }
        // What did not fit stays listed.
        for &va in batch[moved as usize..].iter().rev() {
            let vpn = tierlab_core::vpn(va);
            if self.listed.insert(vpn) {
                self.list.push_front(vpn);
            }
        }
        Ok(())
    }
}

impl TieringPolicy for Kmmscand {
    fn start(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        if ctx.machine.page_tables().is_none() {
            return Err(crate::SimError::runtime(
                "kmmscand reads Accessed bits of radix page tables, which this memory backend does not have",
            ));
        }
        self.kswapd.start(ctx);
        self.next = ctx.now + self.p.scan_sleep.ps();
        Ok(())
    }

    fn next_event(&self) -> Ps {
        self.next
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let t = self.scan_step(ctx);
        self.migrate(ctx)?;
        self.kswapd.reclaim(ctx, self.p.demote_watermark, 0, self.p.ns_per_demote_scan)?;
        self.next = ctx.now + t.max(Ps::NS) + self.p.scan_sleep.ps();
        Ok(())
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        vec![("migration_list".into(), self.list.len() as f64)]
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.abit_steps"), self.steps);
        out.set(format!("{prefix}.abit_passes"), self.passes);
        out.set(format!("{prefix}.abit_ptes"), self.ptes);
        out.set(format!("{prefix}.abit_found"), self.found);
        out.set(format!("{prefix}.abit_listed"), self.listed_total);
        out.set(format!("{prefix}.kswapd_reclaims"), self.kswapd.reclaims);
    }
}

impl crate::params::SharedDefaults<TieringShared> for KmmscandParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(65536.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Assumed(
            "Linux's promotion rate limit (numa_balancing_promote_rate_limit_MBps = 65536); the RFC's migration \
             thread has no limit of its own",
        )),
            "copy_mode" => Some(Provenance::Sourced(
                "kmmscand RFC: a migration kernel thread promotes the pages of the migration list",
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

    /// Three slow pages: A accessed before each of two consecutive scans is promoted after
    /// the second; B accessed before the first scan only and C before the second only are not.
    #[test]
    fn promotes_pages_accessed_in_consecutive_scans_only() {
        let mut m = crate::os::Machine::new(&MachineConfig { cores: 2, ..MachineConfig::default() });
        m.os.mm_cpumask = vec![true, false];
        let base = m.mmap(8 * PAGE_SIZE, MapOptions::named("x")).unwrap();
        let pages: Vec<u64> = (0..8).map(|i| base + i * PAGE_SIZE).collect();
        for &va in &pages {
            m.access(0, Access::read(va)).unwrap();
        }
        m.migrate_pages(&pages, 1, 1).unwrap();
        let t = Tiers { fast: 0, slow: 1 };
        let mut mover = Mover::new(65536.0, Ps::from_ns(20_000_000));
        let mut k = Kmmscand::new(KmmscandParams { demote_watermark: 0.0, ..KmmscandParams::default() });
        let (a, b, c) = (pages[0], pages[1], pages[2]);
        let mut scan = |m: &mut crate::os::Machine, k: &mut Kmmscand, ms: u64| {
            let mut cpu = Ps::ZERO;
            let mut ctx = crate::agents::testing::ctx(m, Ps::from_ns(ms * 1_000_000), 1, &mut cpu);
            let mut tc = ctx.with_kind(Tiering { tiers: t, mover: &mut mover });
            k.scan_step(&mut tc);
            k.migrate(&mut tc).unwrap();
        };
        // The first scan finds the bits set by the population; the second finds nothing
        // accessed since, so no page has two consecutive scans of evidence.
        scan(&mut m, &mut k, 10);
        scan(&mut m, &mut k, 20);
        assert_eq!(k.listed_total, 0);
        // The migration flushed the TLBs: each access walks and sets the Accessed bit.
        m.access(0, Access::read(a)).unwrap();
        m.access(0, Access::read(b)).unwrap();
        scan(&mut m, &mut k, 30);
        assert_eq!(k.listed_total, 0, "one scan's evidence is not enough");
        // Flush core 0's TLB so that the next accesses set the bits again (as a context
        // switch would).
        m.invalidate_range(1, base, base + 8 * PAGE_SIZE);
        m.access(0, Access::read(a)).unwrap();
        m.access(0, Access::read(c)).unwrap();
        scan(&mut m, &mut k, 40);
        assert_eq!(k.listed_total, 1);
        assert_eq!(m.node_of(a), Some(0), "accessed at two consecutive scans: promoted");
        assert_eq!(m.node_of(b), Some(1));
        assert_eq!(m.node_of(c), Some(1));
        assert_eq!(k.passes, 4, "each step covered the whole mapping");
    }
}
