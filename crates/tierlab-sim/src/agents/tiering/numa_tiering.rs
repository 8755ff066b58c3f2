//! `numa-tiering`: Linux NUMA balancing in memory-tiering mode (`numa_balancing = 2`), with
//! TPP-style proactive demotion.
//!
//! # Model
//! **Scanning** (`task_numa_work`, kernel/sched/fair.c): every `scan_period` the task's NUMA
//! scanner (run in the context of application thread 0, so its cost lands on that core)
//! protects the next `scan_size` of the address space (a cursor over the mappings, wrapping
//! around): every present page **on the slow tier** in it is made inaccessible (fast-tier
//! pages are skipped in tiering mode), the scan time is recorded for the page and the range's
//! TLB entries are flushed ([`super::hint`]). The next access to such a page takes a hint
//! fault (`hint_fault_ns` on the faulting core).
//!
//! **Promotion decision** (`should_numa_migrate_memory`, tiering branch, kernel/sched/fair.c,
//! Linux 5.18 onwards):
//! 1. if the fast node has "enough" free memory (`pgdat_free_space_enough`: free above the
//!    promotion watermark plus `max(1 GiB, node size / 16)`), every hint-faulted page is
//!    promoted, without hot threshold or rate limit, and the adjusted threshold is reset;
//! 2. otherwise the **hot threshold** is adjusted (`numa_promotion_adjust_threshold`): once per
//!    `scan_period_max` window the promotion candidates counted in the window are compared with
//!    `ref = rate limit (pages/s) x window (s)`; above `1.1 x ref` the threshold drops by one
//!    step, below `0.9 x ref` it rises by one step, a step being `2 x hot_threshold /
//!    adjust_steps` (`NUMA_MIGRATION_ADJUST_STEPS` = 16), within `[step, 2 x hot_threshold]`;
//! 3. a page is a candidate when its **hint-fault latency** (fault time minus scan time,
//!    `numa_hint_fault_latency`) is below the threshold;
//! 4. the **rate limit** (`numa_promotion_rate_limit`): each candidate adds its pages to the
//!    node's candidate counter; a candidate is refused when the candidates counted since the
//!    start of the current 1 s window reach `rate_limit_mbps` worth of pages.
//!
//! The promotion (copy and shootdown) is charged to the faulting core, as
//! `migrate_misplaced_folio` runs in the fault (`copy_mode = "sync"`, the default; another
//! copy mode hands it to the policy's thread). Faults are handled in batches every
//! millisecond of simulated time.
//!
//! **Demotion** (TPP, Maruf et al., ASPLOS'23: decoupled allocation and demotion
//! watermarks): kswapd (the policy's core) wakes when the fast node's free memory falls below
//! `demote_watermark` of its capacity and demotes, in second-chance order over the fast
//! node's pages (the pages resident there at start in address order, then the pages it
//! promotes; the Accessed bit tested and cleared without a flush, as x86's
//! `ptep_clear_flush_young`), until free memory is back at the watermark (at least
//! `SWAP_CLUSTER_MAX` = 32 pages per wake-up). Promotions may dip below the watermark down to a full node
//! (only the allocation watermark, not modelled beyond "one free page", stops them), so
//! promotion never waits for demotion.
//!
//! Pages faulted onto the fast node after the start join the list when kswapd finds it
//! holding fewer than half of the node's pages (a rebuild from the page tables, at most once
//! per scan period). Not modelled: the scan period's own adaptation (1 s .. 60 s: the period
//! stays at `scan_period`).
//!
//! Parameters: [`NumaTieringParams`] (defaults, ranges and sources in `docs/parameters.md`).

use std::collections::VecDeque;
use tierlab_core::PAGE_SIZE;

use super::{TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::{FeedKind, Ps};
use crate::error::Result;
use crate::hw::pagetable::Level;
use crate::os::hint::HintFaults;
use crate::os::Flush;
use crate::stats::Stats;
use crate::units::{ByteSize, Duration};
use tierlab_core::param::{params, Provenance};

/// Parameters of `numa-tiering`.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct NumaTieringParams {
    /// Address space protected per scan.
    #[param(
        default = ByteSize(256 << 20),
        sourced = "Linux kernel/sched/fair.c: numa_balancing_scan_size_mb = 256; \
                   reference/memory-management.md"
    )]
    pub scan_size: ByteSize,
    /// Time between scans.
    #[param(
        default = Duration(1_000_000_000),
        sourced = "Linux kernel/sched/fair.c: numa_balancing_scan_period_min_ms = 1000 (the period ranges \
                   1..60 s)"
    )]
    pub scan_period: Duration,
    /// Time before the first scan.
    #[param(
        default = Duration(1_000_000_000),
        sourced = "Linux kernel/sched/fair.c: numa_balancing_scan_delay_ms = 1000"
    )]
    pub scan_delay: Duration,
    /// A hint fault this soon after the scan marks the page hot.
    #[param(
        default = Duration(1_000_000_000),
        sourced = "Linux kernel/sched/fair.c: numa_balancing_hot_threshold_ms = MSEC_PER_SEC; \
                   reference/memory-management.md"
    )]
    pub hot_threshold: Duration,
    /// Window of the hot threshold's adjustment (`numa_balancing_scan_period_max_ms`).
    #[param(
        default = Duration(60_000_000_000),
        sourced = "Linux kernel/sched/fair.c: numa_balancing_scan_period_max_ms = 60000"
    )]
    pub scan_period_max: Duration,
    /// Steps of the threshold's adjustment (`NUMA_MIGRATION_ADJUST_STEPS`).
    #[param(
        default = 16,
        range = "[1, 1e6]",
        unit = "steps",
        sourced = "Linux kernel/sched/fair.c: NUMA_MIGRATION_ADJUST_STEPS = 16"
    )]
    pub adjust_steps: u32,
    /// Free fast memory above which every hint-faulted page is promoted: at least this...
    #[param(
        default = ByteSize(1 << 30),
        sourced = "Linux kernel/sched/fair.c: pgdat_free_space_enough, max(1 GiB, node size / 16)"
    )]
    pub enough_free: ByteSize,
    /// ...or this fraction of the fast node, whichever is larger (`pgdat_free_space_enough`).
    #[param(
        default = 1.0 / 16.0,
        range = "[0, 1]",
        unit = "fraction",
        sourced = "Linux kernel/sched/fair.c: pgdat_free_space_enough, max(1 GiB, node size / 16)"
    )]
    pub enough_free_fraction: f64,
    /// kswapd demotes when free fast memory is below this fraction of its capacity (TPP's
    /// demotion watermark), until it is back there.
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
}

impl TieringParams for NumaTieringParams {
    fn build(&self, shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        if self.scan_size.0 < PAGE_SIZE {
            return Err(ctx.err("scan_size", "must be at least one page (4 KiB)"));
        }
        for (f, d) in [
            ("scan_period", self.scan_period),
            ("hot_threshold", self.hot_threshold),
            ("scan_period_max", self.scan_period_max),
        ] {
            if d.0 == 0 {
                return Err(ctx.err(f, "must be > 0"));
            }
        }
        Ok(Box::new(NumaTiering::new(self.clone(), shared.rate_limit_mbps)))
    }
    fn period(&self) -> Ps {
        FAULT_BATCH
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        None
    }
}

/// Pages kswapd reclaims at least per wake-up (Linux `SWAP_CLUSTER_MAX`).
const SWAP_CLUSTER_MAX: u64 = 32;

/// Hint faults are handled in batches this often.
const FAULT_BATCH: Ps = Ps::from_ns(1_000_000);

/// The window of the promotion rate limit (`numa_promotion_rate_limit`: one second).
const RATE_LIMIT_WINDOW: Ps = Ps::from_ns(1_000_000_000);

/// The `numa-tiering` policy.
pub struct NumaTiering {
    p: NumaTieringParams,
    /// Promotion rate limit, pages (4 KiB) per second.
    rate_limit_pages: u64,
    next: Ps,
    next_scan: Ps,
    cursor: u64,
    /// Fast-node pages in second-chance order (kswapd's list).
    lru: VecDeque<u64>,
    next_rebuild: Ps,
    rebuilds: u64,
    /// `PGPROMOTE_CANDIDATE` of the fast node, pages.
    candidates: u64,
    /// Rate limit window: start and the candidate count then.
    rl_start: Ps,
    rl_nr_cand: u64,
    /// Threshold adjustment: window start, candidate count then, the adjusted threshold
    /// (zero: the default `hot_threshold`).
    th_start: Ps,
    th_nr_cand: u64,
    threshold: Ps,
    threshold_changes: u64,
    scans: u64,
    hot_faults: u64,
    cold_faults: u64,
    free_enough_promotions: u64,
    rate_limited: u64,
    demote_scans: u64,
}

impl NumaTiering {
    fn new(p: NumaTieringParams, rate_limit_mbps: f64) -> Self {
        NumaTiering {
            next: FAULT_BATCH,
            next_scan: p.scan_delay.ps(),
            rate_limit_pages: (rate_limit_mbps * (1u64 << 20) as f64 / PAGE_SIZE as f64) as u64,
            p,
            cursor: 0,
            lru: VecDeque::new(),
            next_rebuild: Ps::ZERO,
            rebuilds: 0,
            candidates: 0,
            rl_start: Ps::ZERO,
            rl_nr_cand: 0,
            th_start: Ps::ZERO,
            th_nr_cand: 0,
            threshold: Ps::ZERO,
            threshold_changes: 0,
            scans: 0,
            hot_faults: 0,
            cold_faults: 0,
            free_enough_promotions: 0,
            rate_limited: 0,
            demote_scans: 0,
        }
    }

    /// The hot threshold in force.
    pub fn threshold(&self) -> Ps {
        if self.threshold == Ps::ZERO {
            self.p.hot_threshold.ps()
        } else {
            self.threshold
        }
    }

    /// `numa_promotion_adjust_threshold`: once per `scan_period_max`, move the threshold one
    /// step against the candidates counted in the window.
    fn adjust_threshold(&mut self, now: Ps) {
        let period = self.p.scan_period_max.ps();
        if now.saturating_sub(self.th_start) <= period {
            return;
        }
        self.th_start = now;
        let ref_cand = self.rate_limit_pages as f64 * period.ns_f64() / 1e9;
        let diff = (self.candidates - self.th_nr_cand) as f64;
        let def = self.p.hot_threshold.ps();
        // The step, in whole ns (the kernel divides its threshold in ms the same way).
        let unit = Ps::from_ns(self.p.hot_threshold.0 * 2 / self.p.adjust_steps as u64);
        let th = self.threshold();
        let new = if diff > ref_cand * 1.1 {
            th.saturating_sub(unit).max(unit)
        } else if diff < ref_cand * 0.9 {
            (th + unit).min(def.times(2))
        } else {
            th
        };
        if new != th {
            self.threshold_changes += 1;
        }
        self.th_nr_cand = self.candidates;
        self.threshold = new;
    }

    /// `numa_promotion_rate_limit`: count `pages` candidates; true when the window's
    /// candidates reached the limit.
    fn rate_limited(&mut self, now: Ps, pages: u64) -> bool {
        self.candidates += pages;
        if now.saturating_sub(self.rl_start) > RATE_LIMIT_WINDOW {
            self.rl_start = now;
            self.rl_nr_cand = self.candidates;
        }
        self.candidates - self.rl_nr_cand >= self.rate_limit_pages
    }

    /// `pgdat_free_space_enough`: free memory above the watermark plus `max(enough_free,
    /// capacity x enough_free_fraction)`.
    fn free_space_enough(&self, ctx: &TieringCtx) -> bool {
        let cap = ctx.fast_capacity() as f64;
        let enough = (self.p.enough_free.0 as f64).max(cap * self.p.enough_free_fraction);
        ctx.fast_free() as f64 > cap * self.p.demote_watermark + enough
    }

    /// The fast node's pages at start, in address order (kswapd's list before any promotion).
    /// Done once, at start.
    fn build_lru(&mut self, ctx: &mut TieringCtx) {
        fast_pages_in_order(ctx, &mut self.lru);
    }

    /// Protect the next `scan_size` of address space (slow-tier present pages only).
    fn scan(&mut self, ctx: &mut TieringCtx) {
        if hint_scan(ctx, &mut self.cursor, self.p.scan_size.0, self.p.hint_fault_ns, self.p.ns_per_pte) {
            self.scans += 1;
        }
    }

    /// kswapd (TPP): below the demotion watermark, demote in second-chance order until free
    /// memory is back at the watermark (at least one batch).
    fn reclaim(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let cap = ctx.fast_capacity();
        let wmark = (cap as f64 * self.p.demote_watermark) as u64;
        if ctx.fast_free() >= wmark || wmark == 0 {
            return Ok(());
        }
        let target = wmark.max(ctx.fast_free() + SWAP_CLUSTER_MAX * PAGE_SIZE);
        let fast = ctx.tiers().fast;
        // Pages faulted onto the fast node since the list was built are not on it: when it
        // holds fewer pages than the node, rebuild it (at most once per scan period).
        let used = ctx.machine.nodes()[fast as usize].used_pages as usize;
        if self.lru.len() < used / 2 && ctx.now >= self.next_rebuild {
            self.next_rebuild = ctx.now + self.p.scan_period.ps();
            self.lru.clear();
            self.build_lru(ctx);
            self.rebuilds += 1;
        }
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
        ctx.charge(Ps::from_ns_f64(victims.len() as f64 * 100.0));
        ctx.demote(&victims)?;
        Ok(())
    }
}

/// Append the fast node's pages to `lru` in address order (kswapd's list before any
/// promotion). Walks each mapping by 2 MiB chunks, looking into a chunk page by page only
/// when one of its pages is on the fast node or the chunk's first page is not present.
/// (NUMA tiering and NOMAD, which builds on it.)
pub(crate) fn fast_pages_in_order(ctx: &mut TieringCtx, lru: &mut VecDeque<u64>) {
    let fast = ctx.tiers().fast;
    if ctx.machine.nodes()[fast as usize].used_pages == 0 {
        return;
    }
    let vmas: Vec<(u64, u64)> = ctx.machine.vmas().values().map(|v| (v.start, v.start + v.len)).collect();
    let chunk = tierlab_core::HUGE_SIZE;
    for (s, e) in vmas {
        let mut a = s;
        while a < e {
            let ce = ((a / chunk + 1) * chunk).min(e);
            // A whole chunk on one node (bulk populate, huge pages) is decided by its first
            // and last page; otherwise it is looked at page by page.
            let (first, last) = (ctx.machine.node_of(a), ctx.machine.node_of(ce - PAGE_SIZE));
            if first == last && first != Some(fast) && first.is_some() {
                a = ce;
                continue;
            }
            let mut v = a;
            while v < ce {
                if ctx.machine.node_of(v) == Some(fast) {
                    lru.push_back(v);
                }
                v += PAGE_SIZE;
            }
            a = ce;
        }
    }
}

/// Turn the machine's NUMA hint faults on (each costing `hint_fault_ns`), unless another
/// agent did. (NUMA tiering and NOMAD.)
pub(crate) fn enable_hint_faults(ctx: &mut TieringCtx, hint_fault_ns: f64) {
    let h = ctx.machine.hint_faults();
    if h.is_none() {
        *h = Some(Box::new(HintFaults::new(Ps::from_ns_f64(hint_fault_ns))));
    }
}

/// NUMA balancing's scanner (`task_numa_work`): protect the next `scan_size` bytes of
/// address space from `cursor` on (wrapping over the mappings), arming a hint fault on the
/// slow tier's present pages, and charge `ns_per_pte` per protected PTE to application
/// thread 0 (the task's context). False when there is no mapping to scan.
pub(crate) fn hint_scan(
    ctx: &mut TieringCtx,
    cursor: &mut u64,
    scan_size: u64,
    hint_fault_ns: f64,
    ns_per_pte: f64,
) -> bool {
    let vmas: Vec<(u64, u64)> = ctx.machine.vmas().values().map(|v| (v.start, v.start + v.len)).collect();
    if vmas.is_empty() {
        return false;
    }
    let mut left = scan_size;
    let hint_fault = Ps::from_ns_f64(hint_fault_ns);
    let slow = ctx.tiers().slow;
    let app = 0usize;
    let mut protected = 0u64;
    let mut guard = 0;
    while left > 0 && guard < 2 * vmas.len() + 2 {
        guard += 1;
        // The mapping holding the cursor, or the next one (wrapping).
        let Some(&(s, e)) = vmas.iter().find(|&&(_, e)| e > *cursor) else {
            *cursor = 0;
            continue;
        };
        let start = (*cursor).max(s);
        let end = e.min(start + left);
        protected += ctx.machine.hint_protect(start, end, ctx.now, hint_fault, &mut |n| n == Some(slow));
        ctx.machine.invalidate_range(app, start, end);
        left -= end - start;
        *cursor = end;
    }
    ctx.machine.charge(app, Ps::from_ns_f64(protected as f64 * ns_per_pte));
    true
}

impl TieringPolicy for NumaTiering {
    fn start(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        enable_hint_faults(ctx, self.p.hint_fault_ns);
        self.build_lru(ctx);
        Ok(())
    }

    fn next_event(&self) -> Ps {
        self.next.min(self.next_scan)
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let now = ctx.now;
        if now >= self.next_scan {
            self.next_scan = now + self.p.scan_period.ps();
            self.scan(ctx);
        }
        if now < self.next {
            return Ok(());
        }
        self.next = now + FAULT_BATCH;
        let faults = ctx.machine.hint_faults().as_mut().map(|h| h.take_faults()).unwrap_or_default();
        let slow = ctx.tiers().slow;
        for f in faults {
            if ctx.machine.node_of(f.va) != Some(slow) {
                continue;
            }
            if ctx.fast_free() < PAGE_SIZE {
                // The allocation fails while the fast tier is full; kswapd runs below.
                continue;
            }
            if self.free_space_enough(ctx) {
                // Enough free memory: promote whatever faulted; the workload changed, so the
                // adjusted threshold is reset.
                self.threshold = Ps::ZERO;
                self.th_nr_cand = self.candidates;
                self.free_enough_promotions += 1;
            } else {
                self.adjust_threshold(f.time);
                if f.time.saturating_sub(f.scan) >= self.threshold() {
                    self.cold_faults += 1;
                    continue;
                }
                self.hot_faults += 1;
                if self.rate_limited(f.time, 1) {
                    self.rate_limited += 1;
                    continue;
                }
            }
            if ctx.kind.mover.budget() < PAGE_SIZE {
                self.rate_limited += 1;
                continue;
            }
            // `sync` (the kernel's): the promotion runs in the fault, on the faulting core
            // (already at its time); otherwise the policy's thread copies.
            let (moved, _) = ctx.promote_faulted(&[f.va], f.core)?;
            if moved > 0 {
                self.lru.push_back(f.va);
            }
        }
        self.reclaim(ctx)
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        vec![
            ("hot_faults".into(), self.hot_faults as f64),
            ("hot_threshold_ms".into(), self.threshold().ns_f64() / 1e6),
        ]
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.scans"), self.scans);
        out.set(format!("{prefix}.hot_faults"), self.hot_faults);
        out.set(format!("{prefix}.cold_faults"), self.cold_faults);
        out.set(format!("{prefix}.fault_rate_limited"), self.rate_limited);
        out.set(format!("{prefix}.reclaims"), self.demote_scans);
        out.set(format!("{prefix}.free_enough_promotions"), self.free_enough_promotions);
        out.set(format!("{prefix}.promote_candidates"), self.candidates);
        out.set(format!("{prefix}.hot_threshold_ms"), self.threshold().ns_f64() / 1e6);
        out.set(format!("{prefix}.threshold_changes"), self.threshold_changes);
        out.set(format!("{prefix}.lru_rebuilds"), self.rebuilds);
    }
}

impl crate::params::SharedDefaults<TieringShared> for NumaTieringParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(65536.0).copying(super::CopyMode::Sync)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Sourced(
            "Linux kernel/sched/fair.c: numa_balancing_promote_rate_limit_MBps = 65536; \
             reference/memory-management.md",
        )),
            "copy_mode" => Some(Provenance::Sourced(
                "Linux mm/memory.c: do_numa_page calls migrate_misplaced_folio in the hint fault: the faulting thread copies",
            )),
            _ => None,
        }
    }
}
