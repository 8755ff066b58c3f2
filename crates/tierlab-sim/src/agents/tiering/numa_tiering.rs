//! `numa-tiering`: Linux NUMA balancing in memory-tiering mode (`numa_balancing = 2`).
//!
//! # Model
//! Every `scan_period` the task's NUMA scanner (`task_numa_work`, run in the context of
//! application thread 0, so its cost lands on that core) protects the next `scan_size` of
//! the address space (a cursor over the mappings, wrapping around): every present page **on
//! the slow tier** in it is made inaccessible (fast-tier pages are skipped in tiering mode),
//! and the range's TLB entries are flushed ([`super::hint`]). The next access to such a page
//! takes a hint fault (`hint_fault_ns` on the faulting core). The fault promotes the page
//! when it came within `hot_threshold` of the scan (the page is hot) and the promotion rate
//! limit allows; the promotion (copy and shootdown) is charged to the faulting core, as
//! `migrate_misplaced_folio` runs in the fault. Demotion happens in reclaim: when the fast
//! tier's free memory falls below `demote_watermark` of its capacity, kswapd (the policy's
//! core) demotes promoted pages in second-chance order (Accessed bit tested and cleared
//! without a flush, as x86's `ptep_clear_flush_young` does) until twice the watermark is
//! free. Faults are handled in batches every millisecond of simulated time. The scan period's
//! own adaptation (1 s .. 60 s) is not modelled: the period stays at `scan_period`.
//!
//! # Parameters (defaults and sources: `reference/memory-management.md`, Linux)
//! | parameter | default | source |
//! |---|---|---|
//! | `scan_size` | 256 MB | Linux `numa_balancing_scan_size_mb` |
//! | `scan_period` | 1 s | Linux `numa_balancing_scan_period_min_ms` (the period ranges 1..60 s) |
//! | `scan_delay` | 1 s | Linux `numa_balancing_scan_delay_ms` |
//! | `hot_threshold` | 1 s | Linux `numa_balancing_hot_threshold_ms` (1000 ms) |
//! | `rate_limit_mbps` | 65536 | Linux `numa_balancing_promote_rate_limit_MBps` |
//! | `demote_watermark` | 0.02 | TPP's `demote_scale_factor` (2%) |
//! | `hint_fault_ns` | 1000 ns | assumption: a minor fault (`cost.fault_ns`) |
//! | `ns_per_pte` | 20 ns | assumption: `change_prot_numa` per present PTE |

use std::collections::VecDeque;
use tierlab_core::PAGE_SIZE;

use serde::{Deserialize, Serialize};

use super::{TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::FeedKind;
use crate::error::Result;
use crate::hw::pagetable::Level;
use crate::os::hint::HintFaults;
use crate::os::Flush;
use crate::stats::Stats;
use crate::units::{ByteSize, Duration};

/// Parameters of `numa-tiering`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NumaTieringParams {
    /// Address space protected per scan.
    #[serde(default = "d_size")]
    pub scan_size: ByteSize,
    /// Time between scans.
    #[serde(default = "d_period")]
    pub scan_period: Duration,
    /// Time before the first scan.
    #[serde(default = "d_period")]
    pub scan_delay: Duration,
    /// A hint fault this soon after the scan marks the page hot.
    #[serde(default = "d_period")]
    pub hot_threshold: Duration,
    /// Reclaim demotes when free fast memory is below this fraction of its capacity.
    #[serde(default = "d_wmark")]
    pub demote_watermark: f64,
    /// Cost of a hint fault to the faulting core, ns.
    #[serde(default = "d_fault")]
    pub hint_fault_ns: f64,
    /// Cost of protecting one present PTE, ns.
    #[serde(default = "d_pte")]
    pub ns_per_pte: f64,
}

fn d_size() -> ByteSize {
    ByteSize(256 << 20)
}
fn d_period() -> Duration {
    Duration(1_000_000_000)
}
fn d_wmark() -> f64 {
    0.02
}
fn d_fault() -> f64 {
    1000.0
}
fn d_pte() -> f64 {
    20.0
}

impl Default for NumaTieringParams {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl TieringParams for NumaTieringParams {
    fn build(&self, _shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        if self.scan_size.0 < PAGE_SIZE {
            return Err(ctx.err("scan_size", "must be at least one page (4 KiB)"));
        }
        for (f, d) in [("scan_period", self.scan_period), ("hot_threshold", self.hot_threshold)] {
            if d.0 == 0 {
                return Err(ctx.err(f, "must be > 0"));
            }
        }
        if !(0.0..0.5).contains(&self.demote_watermark) {
            return Err(ctx.err("demote_watermark", format!("{} is not in [0, 0.5)", self.demote_watermark)));
        }
        for (f, v) in [("hint_fault_ns", self.hint_fault_ns), ("ns_per_pte", self.ns_per_pte)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ctx.err(f, format!("{v} must be >= 0")));
            }
        }
        Ok(Box::new(NumaTiering::new(self.clone())))
    }
    fn period_ns(&self) -> u64 {
        FAULT_BATCH_NS
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        None
    }
}

/// Hint faults are handled in batches this often.
const FAULT_BATCH_NS: u64 = 1_000_000;

/// The `numa-tiering` policy.
pub struct NumaTiering {
    p: NumaTieringParams,
    next_ns: u64,
    next_scan_ns: u64,
    cursor: u64,
    /// Promoted pages in second-chance order.
    lru: VecDeque<u64>,
    scans: u64,
    hot_faults: u64,
    cold_faults: u64,
    rate_limited: u64,
    demote_scans: u64,
}

impl NumaTiering {
    fn new(p: NumaTieringParams) -> Self {
        NumaTiering {
            next_ns: FAULT_BATCH_NS,
            next_scan_ns: p.scan_delay.0,
            p,
            cursor: 0,
            lru: VecDeque::new(),
            scans: 0,
            hot_faults: 0,
            cold_faults: 0,
            rate_limited: 0,
            demote_scans: 0,
        }
    }

    /// Protect the next `scan_size` of address space (slow-tier present pages only).
    fn scan(&mut self, ctx: &mut TieringCtx) {
        let vmas: Vec<(u64, u64)> = ctx.machine.vmas().values().map(|v| (v.start, v.start + v.len)).collect();
        if vmas.is_empty() {
            return;
        }
        let mut left = self.p.scan_size.0;
        let slow = ctx.tiers.slow;
        let app = 0usize;
        let mut protected = 0u64;
        let mut guard = 0;
        while left > 0 && guard < 2 * vmas.len() + 2 {
            // The mapping holding the cursor, or the next one (wrapping).
            let k = vmas.iter().position(|&(_, e)| e > self.cursor);
            let (s, e) = match k {
                Some(k) => vmas[k],
                None => {
                    self.cursor = 0;
                    guard += 1;
                    continue;
                }
            };
            let start = self.cursor.max(s);
            let end = e.min(start + left);
            protected += ctx
                .machine
                .hint_protect(start, end, ctx.now_ns, self.p.hint_fault_ns, &mut |n| n == Some(slow));
            ctx.machine.invalidate_range(app, start, end);
            left -= end - start;
            self.cursor = end;
            guard += 1;
        }
        // task_numa_work runs in the task's context.
        let t = crate::hw::cost::ps(protected as f64 * self.p.ns_per_pte);
        ctx.machine.hw_mut().charge(app, t);
        self.scans += 1;
    }

    /// kswapd: demote in second-chance order until twice the watermark is free.
    fn reclaim(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let cap = ctx.fast_capacity();
        let low = (cap as f64 * self.p.demote_watermark) as u64;
        if ctx.fast_free() >= low || low == 0 {
            return Ok(());
        }
        let target = 2 * low;
        let fast = ctx.tiers.fast;
        let mut victims = Vec::new();
        let mut freed = ctx.fast_free();
        let mut budget = self.lru.len() * 2;
        while freed < target && budget > 0 {
            budget -= 1;
            let Some(va) = self.lru.pop_front() else { break };
            if ctx.machine.node_of(va) != Some(fast) {
                continue;
            }
            if ctx.machine.clear_accessed(va, Level::Pte, Flush::None) {
                self.lru.push_back(va);
                continue;
            }
            victims.push(va);
            freed += PAGE_SIZE;
        }
        self.demote_scans += 1;
        ctx.charge(victims.len() as f64 * 100.0);
        ctx.demote(&victims)?;
        Ok(())
    }
}

impl TieringPolicy for NumaTiering {
    fn start(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let h = ctx.machine.hint_faults();
        if h.is_none() {
            *h = Some(Box::new(HintFaults::new(self.p.hint_fault_ns)));
        }
        Ok(())
    }

    fn next_event(&self) -> crate::agents::Ps {
        crate::agents::ns_to_ps(self.next_ns.min(self.next_scan_ns))
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let now = ctx.now_ns;
        if now >= self.next_scan_ns {
            self.next_scan_ns = now + self.p.scan_period.0;
            self.scan(ctx);
        }
        if now < self.next_ns {
            return Ok(());
        }
        self.next_ns = now + FAULT_BATCH_NS;
        let faults = ctx.machine.hint_faults().as_mut().map(|h| h.take_faults()).unwrap_or_default();
        let slow = ctx.tiers.slow;
        for f in faults {
            if f.time_ns.saturating_sub(f.scan_ns) >= self.p.hot_threshold.0 {
                self.cold_faults += 1;
                continue;
            }
            self.hot_faults += 1;
            if ctx.machine.node_of(f.va) != Some(slow) {
                continue;
            }
            if ctx.mover.budget() < PAGE_SIZE {
                self.rate_limited += 1;
                continue;
            }
            if ctx.fast_free() < PAGE_SIZE {
                // Promotion fails while the fast tier is full; reclaim runs below.
                continue;
            }
            let t = ctx.tiers;
            let (moved, _) = ctx.mover.promote(ctx.machine, &[f.va], t, f.core)?;
            if moved > 0 {
                self.lru.push_back(f.va);
            }
        }
        self.reclaim(ctx)
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        vec![("hot_faults".into(), self.hot_faults as f64)]
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.scans"), self.scans);
        out.set(format!("{prefix}.hot_faults"), self.hot_faults);
        out.set(format!("{prefix}.cold_faults"), self.cold_faults);
        out.set(format!("{prefix}.fault_rate_limited"), self.rate_limited);
        out.set(format!("{prefix}.reclaims"), self.demote_scans);
    }
}

impl crate::params::Params for NumaTieringParams {}

impl crate::params::SharedDefaults<TieringShared> for NumaTieringParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(65536.0)
    }
}
