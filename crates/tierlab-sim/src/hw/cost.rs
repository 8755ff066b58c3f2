//! The cost model: how much simulated time each event takes.
//!
//! Every number is a parameter. Defaults come from `../shared/reference/cost-model.md`
//! (sources given per field) or, where that note has no figure, from the assumption named
//! in the field's doc; `docs/engine.md` lists them all.

use serde::{Deserialize, Serialize};

/// Time costs, in nanoseconds unless named otherwise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostConfig {
    /// CPU time of one access excluding memory (address generation, the instruction itself).
    /// Assumption: 2 cycles at 2 GHz.
    #[serde(default = "d_cpu")]
    pub cpu_ns_per_access: f64,
    /// Fraction of accesses served by the CPU caches (they pay `cache_hit_ns` instead of the
    /// memory latency). Default 0: every access goes to memory, as masim's page-strided and
    /// random patterns do; the optional cache model of the PEBS issue replaces this.
    #[serde(default)]
    pub cache_hit_fraction: f64,
    /// Latency of a cache hit. Assumption: ~10 cycles (L1/L2 mix).
    #[serde(default = "d_cache")]
    pub cache_hit_ns: f64,
    /// Extra time of an access that misses the L1 dTLB but hits the L2 TLB.
    /// Assumption: ~7 cycles (Intel STLB hit latency).
    #[serde(default = "d_l2tlb")]
    pub l2_tlb_hit_ns: f64,
    /// Time of a page walk per page-table level read (a walk of a 4 KiB page reads 4
    /// levels, of a 2 MiB page 3). Assumption: paging-structure caches and the data caches
    /// serve most walk reads, ~5 ns per level.
    #[serde(default = "d_walk")]
    pub walk_ns_per_level: f64,
    /// Fixed cost of a page fault that allocates a page (trap, handler, PTE install).
    /// Assumption: ~1 us for an anonymous minor fault on Linux.
    #[serde(default = "d_fault")]
    pub fault_ns: f64,
    /// Bandwidth of zeroing a newly allocated page, in GB/s (adds size/bandwidth to a fault).
    /// Assumption: ~10 GB/s single-thread memset.
    #[serde(default = "d_zero")]
    pub zero_gbps: f64,
    /// One local INVLPG. Source: cost-model.md (~100 ns, arch/x86/mm/tlb.c).
    #[serde(default = "d_invlpg")]
    pub invlpg_ns: f64,
    /// A local full TLB flush. Assumption: ~500 ns plus the refills it causes (modelled).
    #[serde(default = "d_flush")]
    pub full_flush_ns: f64,
    /// Linux flushes page by page up to this many pages, then the whole TLB.
    /// Source: cost-model.md (tlb_single_page_flush_ceiling = 33).
    #[serde(default = "d_ceiling")]
    pub flush_ceiling_pages: u64,
    /// Initiator cost of a remote TLB shootdown (IPI round trip) to one core.
    /// Source: cost-model.md (~1-3 us, Amit ATC'17).
    #[serde(default = "d_ipi")]
    pub shootdown_base_ns: f64,
    /// Additional initiator cost per extra target core (tens of us at 64 cores).
    /// Source: cost-model.md (LATR); 400 ns x 63 + 1.5 us = 26.7 us at 64 cores.
    #[serde(default = "d_ipi_core")]
    pub shootdown_per_core_ns: f64,
    /// Cost charged to each target core for handling a shootdown interrupt.
    /// Assumption: ~1 us (interrupt entry/exit plus the INVLPG).
    #[serde(default = "d_ipi_target")]
    pub shootdown_target_ns: f64,
}

fn d_cpu() -> f64 {
    1.0
}
fn d_cache() -> f64 {
    5.0
}
fn d_l2tlb() -> f64 {
    3.5
}
fn d_walk() -> f64 {
    5.0
}
fn d_fault() -> f64 {
    1000.0
}
fn d_zero() -> f64 {
    10.0
}
fn d_invlpg() -> f64 {
    100.0
}
fn d_flush() -> f64 {
    500.0
}
fn d_ceiling() -> u64 {
    33
}
fn d_ipi() -> f64 {
    1500.0
}
fn d_ipi_core() -> f64 {
    400.0
}
fn d_ipi_target() -> f64 {
    1000.0
}

impl Default for CostConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

/// Convert nanoseconds to the engine's clock unit (picoseconds).
#[inline]
pub fn ps(ns: f64) -> u64 {
    (ns * 1000.0).round() as u64
}

impl CostConfig {
    /// Check ranges; returns (field, problem).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(0.0..=1.0).contains(&self.cache_hit_fraction) {
            return Err((
                "machine.cost.cache_hit_fraction",
                format!("{} is not in [0, 1]", self.cache_hit_fraction),
            ));
        }
        for (f, v) in [
            ("machine.cost.cpu_ns_per_access", self.cpu_ns_per_access),
            ("machine.cost.cache_hit_ns", self.cache_hit_ns),
            ("machine.cost.l2_tlb_hit_ns", self.l2_tlb_hit_ns),
            ("machine.cost.walk_ns_per_level", self.walk_ns_per_level),
            ("machine.cost.fault_ns", self.fault_ns),
            ("machine.cost.invlpg_ns", self.invlpg_ns),
            ("machine.cost.full_flush_ns", self.full_flush_ns),
            ("machine.cost.shootdown_base_ns", self.shootdown_base_ns),
            ("machine.cost.shootdown_per_core_ns", self.shootdown_per_core_ns),
            ("machine.cost.shootdown_target_ns", self.shootdown_target_ns),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err((f, format!("{v} must be a finite number >= 0")));
            }
        }
        if !(self.zero_gbps.is_finite() && self.zero_gbps > 0.0) {
            return Err(("machine.cost.zero_gbps", format!("{} must be > 0", self.zero_gbps)));
        }
        Ok(())
    }

    /// Initiator cost of shooting down `targets` remote cores, in ns.
    pub fn shootdown_ns(&self, targets: usize) -> f64 {
        if targets == 0 {
            0.0
        } else {
            self.shootdown_base_ns + self.shootdown_per_core_ns * (targets as f64 - 1.0)
        }
    }
}
