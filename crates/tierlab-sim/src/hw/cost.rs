//! The cost model: how much simulated time each event takes.
//!
//! Every number is a parameter of [`CostConfig`]: its default comes from
//! `../shared/reference/cost-model.md` or, where that note has no figure, from the assumption
//! its declaration names; `docs/engine.md` lists them all.

use tierlab_core::param::params;

/// Time costs, in nanoseconds unless named otherwise. A CPU preset (`machine.cpu`) sets
/// `l2_tlb_hit_ns` and `walk_ns_per_level` from its cycle counts and clock.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct CostConfig {
    /// CPU time of one access excluding memory (address generation, the instruction itself).
    #[param(default = 1.0, range = "[0, 1e9]", unit = "ns", assumed = "2 cycles at 2 GHz")]
    pub cpu_ns_per_access: f64,
    /// Fraction of accesses served by the CPU caches (they pay `cache_hit_ns` instead of the
    /// memory latency). The optional cache model of the PEBS issue replaces this.
    #[param(
        default = 0.0,
        range = "[0, 1]",
        unit = "fraction",
        assumed = "every access goes to memory, as masim's page-strided and random patterns do"
    )]
    pub cache_hit_fraction: f64,
    /// Latency of a cache hit.
    #[param(default = 5.0, range = "[0, 1e9]", unit = "ns", assumed = "~10 cycles (L1/L2 mix) at 2 GHz")]
    pub cache_hit_ns: f64,
    /// Extra time of an access that misses the L1 dTLB but hits the L2 TLB.
    #[param(
        default = 3.5,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "~7 cycles (Intel STLB hit latency) at 2 GHz"
    )]
    pub l2_tlb_hit_ns: f64,
    /// Time of a page walk per page-table level read (a walk of a 4 KiB page reads 4
    /// levels, of a 2 MiB page 3).
    #[param(
        default = 5.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "paging-structure caches and the data caches serve most walk reads, ~5 ns per level"
    )]
    pub walk_ns_per_level: f64,
    /// Fixed cost of a page fault that allocates a page (trap, handler, PTE install).
    #[param(
        default = 1000.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "~1 us for an anonymous minor fault on Linux"
    )]
    pub fault_ns: f64,
    /// Bandwidth of zeroing a newly allocated page (adds size/bandwidth to a fault).
    #[param(default = 10.0, range = "(0, 1e6]", unit = "GB/s", assumed = "~10 GB/s single-thread memset")]
    pub zero_gbps: f64,
    /// One local INVLPG.
    #[param(
        default = 100.0,
        range = "[0, 1e9]",
        unit = "ns",
        sourced = "reference/cost-model.md: single 4 KiB TLB invalidation (INVLPG) ~100 ns (arch/x86/mm/tlb.c)"
    )]
    pub invlpg_ns: f64,
    /// A local full TLB flush (the refills it causes are modelled).
    #[param(
        default = 500.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "~500 ns plus the refills it causes"
    )]
    pub full_flush_ns: f64,
    /// Linux flushes page by page up to this many pages, then the whole TLB.
    #[param(
        default = 33,
        range = "[0, 281474976710656]",
        unit = "pages",
        sourced = "reference/cost-model.md: Linux flushes per page up to 33 pages, then the whole TLB (tlb_single_page_flush_ceiling, arch/x86/mm/tlb.c)"
    )]
    pub flush_ceiling_pages: u64,
    /// Initiator cost of a remote TLB shootdown (IPI round trip) to one core.
    #[param(
        default = 1500.0,
        range = "[0, 1e9]",
        unit = "ns",
        sourced = "reference/cost-model.md: remote TLB shootdown (IPI round trip) ~1-3 us (Amit ATC'17); 1.5 us in that range"
    )]
    pub shootdown_base_ns: f64,
    /// Additional initiator cost per extra target core (tens of us at 64 cores).
    #[param(
        default = 400.0,
        range = "[0, 1e9]",
        unit = "ns",
        calibrated = "reference/cost-model.md: a shootdown takes tens of us at 64 cores (LATR); 1.5 us + 63 x 400 ns = 26.7 us"
    )]
    pub shootdown_per_core_ns: f64,
    /// Cost charged to each target core for handling a shootdown interrupt.
    #[param(
        default = 1000.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "reference/tlb-shootdown.md's placeholder t_recv, 1 us: each target core's handler (interrupt entry/exit, INVLPG, acknowledgement); not a measured value"
    )]
    pub shootdown_target_ns: f64,
    /// Fixed extra cost of a major fault that reads a page back from swap (after DAMOS
    /// `pageout`).
    #[param(
        default = 10_000.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "~10 us, an NVMe SSD's read latency"
    )]
    pub swap_in_ns: f64,
    /// Bandwidth of the swap device (page-out writes and refault reads).
    #[param(default = 2.0, range = "(0, 1e6]", unit = "GB/s", assumed = "~2 GB/s, one NVMe SSD")]
    pub swap_gbps: f64,
}

/// Convert nanoseconds to the engine's clock unit (picoseconds).
#[inline]
pub fn ps(ns: f64) -> u64 {
    (ns * 1000.0).round() as u64
}

impl CostConfig {
    /// Initiator cost of shooting down `targets` remote cores, in ns.
    pub fn shootdown_ns(&self, targets: usize) -> f64 {
        if targets == 0 {
            0.0
        } else {
            self.shootdown_base_ns + self.shootdown_per_core_ns * (targets as f64 - 1.0)
        }
    }
}
