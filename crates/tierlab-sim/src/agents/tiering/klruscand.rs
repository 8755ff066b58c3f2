//! `klruscand`: promotion driven by the multi-generational LRU's page-table walks (Kinsey
//! Ho, "mm: multi-gen LRU scanning for page promotion", RFC v1 2025-03, v2 2025-09,
//! linux-mm), which feeds the pages it finds young to pghot ([`super::pghot`]) as the
//! aggregation and promotion engine.
//!
//! # Model
//! **Aging walks.** Every `aging_interval` the kernel thread klruscand ages the slow node's
//! MGLRU lists: the aging increments `max_seq` and walks the process's page tables
//! (MGLRU's `walk_mm`), testing and clearing each leaf PTE's Accessed bit (no flush);
//! every page found young moves to the youngest generation. The walk proceeds in steps of
//! `chunk_ptes` entries, flat out on the policy's core (`ns_per_pte` per entry read); a walk
//! that takes longer than the interval is followed at once by the next.
//!
//! **Promotion.** Each young page on the slow node is reported to pghot
//! (`pghot_record_access` with the walk's time: an Accessed-bit source knows only that the
//! page was touched since the previous walk). pghot's hotness byte counts the reports (2-bit
//! frequency, 5-bit time bucket); a page reported `freq_threshold` times within
//! `freq_window` becomes migrate-ready and kmigrated promotes it within the rate limit, as
//! in `pghot`. Demotion is TPP-style kswapd below `demote_watermark` ([`super::kswapd`]).
//!
//! Limits: MGLRU's Bloom filter (later walks skip PMD tables that had few young entries)
//! and the look-around from eviction are not modelled: every walk reads every PTE, so the
//! walk's cost is an upper bound; the fast node's demotion follows second-chance order, not
//! MGLRU's generations.
//!
//! Parameters: [`KlruscandParams`] (defaults, ranges and sources in `docs/parameters.md`,
//! mechanism and numbers in `docs/tiering-systems.md`).

use super::pghot::{Pghot, PghotParams};
use super::ptwalk::Walk;
use super::{TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::{FeedKind, Ps};
use crate::error::Result;
use crate::stats::Stats;
use crate::units::Duration;
use tierlab_core::param::{params, Provenance};

/// Parameters of `klruscand`.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct KlruscandParams {
    /// Time between the starts of two aging walks.
    #[param(default = Duration(1_000_000_000), assumed = "klruscand's aging period is a tunable of the RFC; 1 s")]
    pub aging_interval: Duration,
    /// PTE slots read per step of a walk (a simulation step).
    #[param(
        default = 65_536,
        range = "[1, 1073741824]",
        unit = "PTEs",
        assumed = "a simulation step, as pte-scan: 256 MiB of 4 KiB pages"
    )]
    pub chunk_ptes: u64,
    /// Cost of reading (and clearing) one PTE.
    #[param(
        default = 250.0,
        range = "[0, 1e9]",
        unit = "ns",
        calibrated = "as pte-scan: papers/telescope-slides.txt, a full scan of 1 TB (256M PTEs) takes over a minute"
    )]
    pub ns_per_pte: f64,
    /// pghot: reports within this time count as frequent.
    #[param(
        default = Duration(4_000_000_000),
        assumed = "an Accessed-bit source reports once per walk: the span of pghot's 5-bit time field (~4 s)"
    )]
    pub freq_window: Duration,
    /// pghot: reports within the window that make a page migrate-ready.
    #[param(
        default = 2,
        range = "[1, 3]",
        unit = "reports",
        assumed = "pghot's frequency threshold tunable; young in two walks"
    )]
    pub freq_threshold: u8,
    /// pghot: time between kmigrated's walks.
    #[param(default = Duration(100_000_000), assumed = "as pghot: kmigrated's sleep between walks, 100 ms")]
    pub kmigrated_period: Duration,
    /// kswapd demotes when free fast memory is below this share of it, until back there.
    #[param(
        default = 0.02,
        range = "[0, 0.5)",
        unit = "fraction",
        sourced = "reference/memory-management.md: TPP's demote_scale_factor, 2%"
    )]
    pub demote_watermark: f64,
}

impl TieringParams for KlruscandParams {
    fn build(&self, shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        for (f, d) in [
            ("aging_interval", self.aging_interval),
            ("freq_window", self.freq_window),
            ("kmigrated_period", self.kmigrated_period),
        ] {
            if d.0 == 0 {
                return Err(ctx.err(f, "must be > 0"));
            }
        }
        Ok(Box::new(Klruscand::new(self.clone(), shared.rate_limit_mbps)))
    }
    fn period(&self) -> Ps {
        self.kmigrated_period.ps()
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        None
    }
}

/// The `klruscand` policy.
pub struct Klruscand {
    p: KlruscandParams,
    rate_limit_mbps: f64,
    engine: Pghot,
    walk: Walk,
    in_walk: bool,
    walk_start: Ps,
    next_step: Ps,
    next_migrate: Ps,
    /// MGLRU's youngest generation's sequence number.
    max_seq: u64,
    walks: u64,
    ptes: u64,
    young: u64,
}

impl Klruscand {
    fn new(p: KlruscandParams, rate_limit_mbps: f64) -> Self {
        let engine = Pghot::new(
            PghotParams {
                freq_window: p.freq_window,
                freq_threshold: p.freq_threshold,
                kmigrated_period: p.kmigrated_period,
                demote_watermark: p.demote_watermark,
                ..PghotParams::default()
            },
            rate_limit_mbps,
        );
        Klruscand {
            next_step: p.aging_interval.ps(),
            next_migrate: p.kmigrated_period.ps(),
            p,
            rate_limit_mbps,
            engine,
            walk: Walk::default(),
            in_walk: false,
            walk_start: Ps::ZERO,
            max_seq: 0,
            walks: 0,
            ptes: 0,
            young: 0,
        }
    }

    /// One step of the aging walk: young slow pages are reported to pghot.
    fn step(&mut self, ctx: &mut TieringCtx) {
        let now = ctx.now;
        if !self.in_walk {
            self.in_walk = true;
            self.walk_start = now;
            self.max_seq += 1;
        }
        let core = ctx.core;
        let clock0 = ctx.machine.core_clock(core).max(now);
        let s = self.walk.step(&mut ctx.machine, self.p.chunk_ptes);
        self.ptes += s.read;
        ctx.charge(Ps::from_ns_f64(s.read as f64 * self.p.ns_per_pte));
        let slow = ctx.tiers().slow;
        for &(a, b) in &s.runs {
            for vpn in a..b {
                if ctx.machine.node_of(tierlab_core::page_addr(vpn)) == Some(slow) {
                    self.young += 1;
                    self.engine.record(vpn, now);
                }
            }
        }
        let end = now + ctx.machine.core_clock(core).saturating_sub(clock0).max(Ps::NS);
        if s.done {
            self.in_walk = false;
            self.walks += 1;
            self.next_step = (self.walk_start + self.p.aging_interval.ps()).max(end);
        } else {
            self.next_step = end;
        }
    }
}

impl TieringPolicy for Klruscand {
    fn start(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        if ctx.machine.page_tables().is_none() {
            return Err(crate::SimError::runtime(
                "klruscand walks the Accessed bits of radix page tables, which this memory backend does not have",
            ));
        }
        self.engine.kswapd().start(ctx);
        Ok(())
    }

    fn next_event(&self) -> Ps {
        self.next_step.min(self.next_migrate)
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let now = ctx.now;
        if now >= self.next_step {
            self.step(ctx);
        }
        if now >= self.next_migrate {
            self.next_migrate = now + self.p.kmigrated_period.ps();
            self.engine.kmigrated(ctx, self.rate_limit_mbps)?;
            let w = self.p.demote_watermark;
            self.engine.kswapd().reclaim(ctx, w, 0, 100.0)?;
        }
        Ok(())
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        vec![("pghot_ready".into(), self.engine.ready_pages() as f64)]
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.mglru_walks"), self.walks);
        out.set(format!("{prefix}.mglru_max_seq"), self.max_seq);
        out.set(format!("{prefix}.abit_ptes"), self.ptes);
        out.set(format!("{prefix}.abit_found"), self.young);
        self.engine.engine_stats(prefix, out);
    }
}

impl crate::params::SharedDefaults<TieringShared> for KlruscandParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(65536.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Sourced(
            "Linux kernel/sched/fair.c: numa_balancing_promote_rate_limit_MBps = 65536 (pghot, klruscand's \
             promotion engine, takes over NUMA balancing's limit)",
        )),
            "copy_mode" => Some(Provenance::Sourced(
                "klruscand RFC v2: pages found young are promoted by pghot's kmigrated kernel thread",
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
    use tierlab_core::{Access, PAGE_SIZE};

    /// Two aging walks: a slow page young at both is reported twice and promoted by
    /// kmigrated; a page young at one walk only is reported once and stays; each walk
    /// advances MGLRU's max_seq and reads every PTE of the mapping.
    #[test]
    fn pages_young_in_two_walks_are_promoted_through_pghot() {
        let mut m = crate::os::Machine::new(&MachineConfig { cores: 2, ..MachineConfig::default() });
        m.os.mm_cpumask = vec![true, false];
        let base = m.mmap(16 * PAGE_SIZE, MapOptions::named("x")).unwrap();
        let pages: Vec<u64> = (0..16).map(|i| base + i * PAGE_SIZE).collect();
        for &va in &pages {
            m.access(0, Access::read(va)).unwrap();
        }
        m.migrate_pages(&pages, 1, 1).unwrap();
        let t = Tiers { fast: 0, slow: 1 };
        let mut mover = Mover::new(65536.0, Ps::from_ns(100_000_000));
        let mut k =
            Klruscand::new(KlruscandParams { demote_watermark: 0.0, ..KlruscandParams::default() }, 65536.0);
        let (a, b) = (pages[3], pages[9]);
        let mut run = |m: &mut crate::os::Machine, k: &mut Klruscand, ms: u64, migrate: bool| {
            let mut cpu = Ps::ZERO;
            let now = Ps::from_ns(ms * 1_000_000);
            let mut ctx = crate::agents::testing::ctx(m, now, 1, &mut cpu);
            mover.refill(now);
            let mut tc = ctx.with_kind(Tiering { tiers: t, mover: &mut mover });
            if migrate {
                k.engine.kmigrated(&mut tc, 65536.0).unwrap();
            } else {
                k.step(&mut tc);
            }
        };
        // Walk 1 finds every page young (the bits their first touches set).
        run(&mut m, &mut k, 1000, false);
        assert_eq!((k.walks, k.max_seq, k.ptes), (1, 1, 16));
        m.invalidate_range(1, base, base + 16 * PAGE_SIZE);
        m.access(0, Access::read(a)).unwrap();
        run(&mut m, &mut k, 2000, false);
        m.invalidate_range(1, base, base + 16 * PAGE_SIZE);
        m.access(0, Access::read(a)).unwrap();
        m.access(0, Access::read(b)).unwrap();
        run(&mut m, &mut k, 3000, false);
        assert_eq!((k.walks, k.max_seq), (3, 3));
        run(&mut m, &mut k, 3100, true);
        assert_eq!(m.node_of(a), Some(0), "young in consecutive walks: migrate-ready and promoted");
        assert_eq!(m.node_of(b), Some(0), "young at walks 1 and 3, 2 s apart: within the 4 s window");
        assert_eq!(m.node_of(pages[5]), Some(1), "young at the first walk only");
    }
}
