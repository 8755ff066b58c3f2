//! The machine as agents see it: hardware and OS operations, never the ground truth.
//!
//! [`MachineView`] is the only way an agent reaches the machine. It holds the machine
//! privately (this module's private field: no agent module can name it), and offers what a
//! mechanism can do on real hardware and a real kernel: read and clear Accessed bits at any
//! level of the page tables, walk the mappings, program and drain the PMU (PEBS, TLB-miss
//! sampling), read the cores' counters and clocks, migrate and reclaim pages, arm NUMA hint
//! faults, and charge the CPU time of its own work. It gives no `&mut Hardware` and no path to
//! the ground truth the scorer reads (`crate::truth`), so a technique can only see what its
//! mechanism sees.
//!
//! An agent written against the view compiles:
//!
//! ```
//! use tierlab_sim::agents::{AgentCtx, MachineView};
//! use tierlab_sim::hw::pagetable::Level;
//! use tierlab_sim::os::Flush;
//!
//! fn scan(ctx: &mut AgentCtx, va: u64) -> bool {
//!     let hot = ctx.machine.clear_accessed(va, Level::Pte, Flush::None);
//!     ctx.charge(tierlab_sim::units::Ps::from_ns(100));
//!     hot
//! }
//! ```
//!
//! and one that reaches for the hardware or the ground truth does not:
//!
//! ```compile_fail,E0599
//! use tierlab_sim::agents::AgentCtx;
//!
//! fn peek(ctx: &mut AgentCtx) {
//!     // No mutable hardware: the cores' ground-truth taps stay out of reach.
//!     let _hw = ctx.machine.hw_mut();
//! }
//! ```
//!
//! ```compile_fail,E0616
//! use tierlab_sim::agents::AgentCtx;
//!
//! fn peek(ctx: &mut AgentCtx) {
//!     // The machine inside the view is private to this module.
//!     let _ = ctx.machine.m.ground_truth_accesses();
//! }
//! ```
//!
//! ```compile_fail,E0599
//! use tierlab_sim::agents::AgentCtx;
//!
//! fn peek(ctx: &mut AgentCtx) {
//!     // The ground truth's store is the crate's own, not the agents' API.
//!     let mut gt = tierlab_sim::truth::GroundTruth::default();
//!     ctx.machine.flush_truth(&mut gt);
//! }
//! ```

use std::collections::BTreeMap;

use crate::error::Result;
use crate::hw::cache::Cache;
use crate::hw::cost::CostConfig;
use crate::hw::pagetable::{Level, PageTables};
use crate::hw::pebs::{PebsCosts, PebsHw, PebsHwConfig};
use crate::hw::tlb_sampler::TlbMissSampler;
use crate::hw::CoreCounters;
use crate::os::backend::MemoryBackend;
use crate::os::hint::HintFaults;
use crate::os::memory::{LruMarks, Node, Placement};
use crate::os::{Flush, Machine, Migrated, MigrationCounters, Vma};
use crate::units::Ps;
use tierlab_core::{bytes_of, vpn, PageSize, HUGE_1G_SIZE, HUGE_SIZE, PAGE_SIZE};

/// What [`MachineView::scan_accessed`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessScan {
    /// Entries read.
    pub read: u64,
    /// Runs `[first, end)` of base-page numbers found accessed, sorted and disjoint.
    pub runs: Vec<(u64, u64)>,
    /// Base pages found accessed.
    pub pages: u64,
    /// Lowest address of an accessed page.
    pub lo: u64,
    /// End of the highest accessed page.
    pub hi: u64,
}

/// Append the page run `[s, e)` to sorted runs, merging with the last when adjacent.
pub fn push_run(runs: &mut Vec<(u64, u64)>, s: u64, e: u64) {
    match runs.last_mut() {
        Some(last) if last.1 >= s => last.1 = last.1.max(e),
        _ => runs.push((s, e)),
    }
}

/// The machine as agents see it (see the module docs).
pub struct MachineView<'a> {
    m: &'a mut Machine,
}

impl<'a> MachineView<'a> {
    /// A view of `m` (the driver and tests make views; agents only receive them).
    pub(crate) fn new(m: &'a mut Machine) -> Self {
        MachineView { m }
    }

    /// A shorter-lived view of the same machine (for a context made inside a hook).
    pub(crate) fn reborrow(&mut self) -> MachineView<'_> {
        MachineView { m: self.m }
    }

    // -- cores, clocks, counters ---------------------------------------------------------

    /// Number of cores.
    pub fn cores(&self) -> usize {
        self.m.hw.cores.len()
    }
    /// Core clock, GHz.
    pub fn cpu_ghz(&self) -> f64 {
        self.m.hw.cpu_ghz
    }
    /// The clock of `core`.
    pub fn core_clock(&self, core: usize) -> Ps {
        Ps::from_ps(self.m.hw.cores[core].clock_ps)
    }
    /// The latest clock of the application's first `threads` cores (its run time so far).
    pub fn app_clock(&self, threads: usize) -> Ps {
        let n = threads.min(self.cores());
        Ps::from_ps(self.m.hw.cores[..n].iter().map(|c| c.clock_ps).max().unwrap_or(0))
    }
    /// The counters of `core` (what a PMU counts: accesses, TLB misses, walks, faults).
    pub fn core_counters(&self, core: usize) -> &CoreCounters {
        &self.m.hw.cores[core].c
    }
    /// Accesses `core` made to each memory node (uncore counters).
    pub fn node_accesses(&self, core: usize) -> &[u64] {
        self.m.hw.cores[core].node_accesses()
    }
    /// The data cache model of `core` (its hit and miss counters).
    pub fn core_cache(&self, core: usize) -> &Cache {
        &self.m.hw.cores[core].cache
    }
    /// What one access of `core` to memory of `node` costs now (its cost table: CPU time, the
    /// cache-hit share, the node's current latency; what a latency counter would show).
    pub fn access_cost(&self, core: usize, node: u8) -> Ps {
        Ps::from_ps(self.m.hw.cores[core].cost_to(node))
    }
    /// Whether `core` runs the address space's threads (is in its CPU mask).
    pub fn in_cpumask(&self, core: usize) -> bool {
        self.m.os.mm_cpumask[core]
    }
    /// The address space's CPU mask.
    pub fn mm_cpumask(&self) -> &[bool] {
        &self.m.os.mm_cpumask
    }
    /// The current value of a per-core counter summed over the application's cores (those
    /// in the CPU mask).
    pub fn app_total(&self, f: impl Fn(&CoreCounters) -> u64) -> u64 {
        let mask = &self.m.os.mm_cpumask;
        self.m.hw.cores.iter().enumerate().filter(|(i, _)| mask[*i]).map(|(_, c)| f(&c.c)).sum()
    }
    /// Whether the machine models data caches (`[machine.cache]`).
    pub fn has_cache(&self) -> bool {
        self.m.cfg.cache.is_some()
    }
    /// The cost model.
    pub fn cost(&self) -> &CostConfig {
        &self.m.hw.cost
    }
    /// Set the memory latency in force, ns `[core node][memory node]` (the loaded-latency
    /// model).
    pub fn set_memory_latency(&mut self, latency_ns: &[Vec<f64>]) {
        self.m.hw.set_memory_latency(latency_ns)
    }

    // -- the agent's own work --------------------------------------------------------------

    /// Work of an agent on `core` starts no earlier than `now`: a core that runs no
    /// application thread (outside the CPU mask) idles until then. (The one rule of every
    /// agent's work; [`crate::agents::AgentCtx::charge`] applies it.)
    pub fn start_work(&mut self, core: usize, now: Ps) {
        let in_mask = self.m.os.mm_cpumask[core];
        let c = &mut self.m.hw.cores[core];
        if c.clock_ps < now.ps() && !in_mask {
            c.clock_ps = now.ps();
        }
    }
    /// Charge `t` of background work to `core` (its clock advances).
    pub fn charge(&mut self, core: usize, t: Ps) {
        self.m.hw.charge(core, t.ps())
    }

    // -- the PMU -----------------------------------------------------------------------------

    /// Have the memory system log every access's address for a memory-side tracker (a CXL
    /// device's hot-page tracker): what a device sees of the accesses it serves.
    pub fn enable_device_log(&mut self) {
        self.m.hw.enable_device_log()
    }
    /// Stop the memory-side access log.
    pub fn disable_device_log(&mut self) {
        self.m.hw.disable_device_log()
    }
    /// Append the addresses `core` accessed since the last drain to `out` and empty its log.
    pub fn drain_device_log(&mut self, core: usize, out: &mut Vec<u64>) {
        self.m.hw.drain_device_log(core, out)
    }

    /// The PEBS hardware, when a driver enabled it.
    pub fn pebs(&self) -> Option<&PebsHw> {
        self.m.hw.pebs.as_ref()
    }
    /// The PEBS hardware, mutable (drain, poll, flush).
    pub fn pebs_mut(&mut self) -> Option<&mut PebsHw> {
        self.m.hw.pebs.as_mut()
    }
    /// Enable PEBS with the default costs.
    pub fn enable_pebs(&mut self, cfg: PebsHwConfig) {
        self.m.hw.enable_pebs(cfg)
    }
    /// Enable PEBS with the given costs.
    pub fn enable_pebs_with(&mut self, cfg: PebsHwConfig, costs: PebsCosts) {
        self.m.hw.enable_pebs_with(cfg, costs)
    }
    /// Disable PEBS, handing back its state.
    pub fn disable_pebs(&mut self) -> Option<PebsHw> {
        self.m.hw.disable_pebs()
    }
    /// Set every core's PEBS reset value.
    pub fn set_pebs_period(&mut self, period: u64) {
        self.m.hw.set_pebs_period(period)
    }
    /// The PMU's periodic work at `now` (throttling: perf's tick).
    pub fn pebs_tick(&mut self, now: Ps) {
        self.m.hw.pebs_tick(now)
    }
    /// Install (or remove) a TLB-miss sampler; returns the previous one.
    pub fn set_tlb_sampler(&mut self, s: Option<TlbMissSampler>) -> Option<TlbMissSampler> {
        self.m.hw.set_tlb_sampler(s)
    }
    /// The TLB-miss sampler, when installed.
    pub fn tlb_sampler_mut(&mut self) -> Option<&mut TlbMissSampler> {
        self.m.hw.tlb_sampler_mut()
    }

    // -- memory nodes and placement ----------------------------------------------------------

    /// Memory nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.m.os.mem.nodes
    }
    /// Node of each core.
    pub fn core_node(&self, core: usize) -> u8 {
        self.m.os.mem.core_node[core]
    }
    /// The rule new pages follow.
    pub fn placement(&self) -> Placement {
        self.m.os.mem.placement()
    }
    /// Change the rule new pages follow.
    pub fn set_placement(&mut self, p: Placement) {
        self.m.os.mem.set_placement(p);
    }
    /// The preferred-node plan consulted at every fault and populate.
    pub fn preferred(&self) -> &[(u64, u64, u8)] {
        &self.m.os.mem.preferred
    }
    /// Install a preferred-node plan (sorted, disjoint `(start, end, node)` ranges).
    pub fn set_preferred(&mut self, plan: Vec<(u64, u64, u8)>) {
        self.m.os.mem.preferred = plan;
    }
    /// Resident bytes per node.
    pub fn resident_bytes(&self) -> Vec<u64> {
        self.m.resident_bytes()
    }

    // -- mappings and page tables --------------------------------------------------------------

    /// The mappings by start address.
    pub fn vmas(&self) -> &BTreeMap<u64, Vma> {
        &self.m.os.vmas
    }
    /// The mapping containing `addr`.
    pub fn vma_of(&self, addr: u64) -> Option<&Vma> {
        self.m.vma_of(addr)
    }
    /// The radix page tables (the flat backend's); `None` for backends without them.
    pub fn page_tables(&self) -> Option<&PageTables> {
        self.m.page_tables()
    }
    /// Mutable [`MachineView::page_tables`].
    pub fn page_tables_mut(&mut self) -> Option<&mut PageTables> {
        self.m.page_tables_mut()
    }
    /// The node holding the page of `va` (None: not present).
    pub fn node_of(&self, va: u64) -> Option<u8> {
        self.m.node_of(va)
    }
    /// The size of the present page holding `va`.
    pub fn page_size_of(&self, va: u64) -> Option<tierlab_core::PageSize> {
        self.m.os.backend.page_size_of(va)
    }
    /// The end of a run from `va` with no present page off `node` (see
    /// [`PageTables::skip_node_run`]); None without radix page tables or when the run must
    /// be looked at page by page.
    pub fn skip_node_run(&self, va: u64, end: u64, node: u8) -> Option<u64> {
        self.m.page_tables().and_then(|pt| pt.skip_node_run(va, end, node))
    }
    /// Whether `va` is mapped by a present entry at `level` of the radix page tables (false
    /// without them).
    pub fn is_present(&self, va: u64, level: Level) -> bool {
        self.m.page_tables().is_some_and(|pt| pt.is_present(va, level))
    }
    /// Whether `va` is in a present 2 MiB page of the radix page tables.
    pub fn is_huge(&self, va: u64) -> bool {
        self.m.page_tables().is_some_and(|pt| pt.is_huge(va))
    }
    /// Whether `va` is in a present 1 GiB page of the radix page tables.
    pub fn is_giant(&self, va: u64) -> bool {
        self.m.page_tables().is_some_and(|pt| pt.is_giant(va))
    }
    /// Test the Accessed bit at `level` for `va`.
    pub fn test_accessed(&self, va: u64, level: Level) -> bool {
        self.m.test_accessed(va, level)
    }
    /// Test and clear the Accessed bit at `level` for `va`, then flush as told.
    pub fn clear_accessed(&mut self, va: u64, level: Level, flush: Flush) -> bool {
        self.m.clear_accessed(va, level, flush)
    }
    /// The present pages of `[start, end)` in address order, each once at its base (a huge
    /// page whole, also when `start` lies inside it): `(base, bytes, node)`, at most `max` of
    /// them; and where the listing stopped: the end of the last page listed when `max` were,
    /// else the first page boundary at or past `end` (a walk that steps over each present
    /// page and over absent memory 4 KiB at a time).
    pub fn present_pages(&self, start: u64, end: u64, max: usize) -> (Vec<(u64, u64, u8)>, u64) {
        let mut out = Vec::new();
        let mut va = start;
        while va < end {
            if out.len() >= max {
                break;
            }
            let b = self.page_size_of(va).map_or(PAGE_SIZE, |p| p.bytes());
            let base = va & !(b - 1);
            if let Some(n) = self.node_of(va) {
                out.push((base, b, n));
            }
            va = base + b;
        }
        (out, va)
    }
    /// Read the leaf Accessed bits of `[start, end)` in a mapping of `page_size` pages (PTEs
    /// 64 per bitmap word; one PMD or PUD leaf per huge page), clearing them when `clear`
    /// (no TLB flush): the entries read, the runs of pages found accessed (base-page numbers
    /// `[first, end)`, sorted), and the span `[lo, hi)` of the accessed pages (`lo >= hi`:
    /// none). None without radix page tables.
    pub fn scan_accessed(
        &mut self,
        start: u64,
        end: u64,
        page_size: PageSize,
        clear: bool,
    ) -> Option<AccessScan> {
        let pt = self.m.page_tables_mut()?;
        let mut r = AccessScan { read: 0, runs: Vec::new(), pages: 0, lo: u64::MAX, hi: 0 };
        match page_size {
            PageSize::Base4K => {
                pt.scan_pte_accessed(start, end, clear, &mut |va, _present, acc| {
                    // A present PTE table (or bulk entry): every slot in range is read.
                    let (a, b) = (va.max(start), (va + bytes_of(64)).min(end));
                    r.read += vpn(b - a);
                    let mut bits = acc;
                    let page0 = vpn(va);
                    while bits != 0 {
                        let tz = bits.trailing_zeros() as u64;
                        let ones = (!(bits >> tz)).trailing_zeros() as u64;
                        push_run(&mut r.runs, page0 + tz, page0 + tz + ones);
                        r.pages += ones;
                        bits = if tz + ones >= 64 { 0 } else { bits & (!0u64 << (tz + ones)) };
                    }
                    if acc != 0 {
                        r.lo = r.lo.min(va + bytes_of(acc.trailing_zeros() as u64));
                        r.hi = r.hi.max(va + bytes_of(64 - acc.leading_zeros() as u64));
                    }
                });
            }
            _ => {
                let (h, level) = if page_size == PageSize::Huge1G {
                    (HUGE_1G_SIZE, Level::Pud)
                } else {
                    (HUGE_SIZE, Level::Pmd)
                };
                let mut va = start & !(h - 1);
                while va < end {
                    if pt.is_present(va, level) {
                        r.read += 1;
                        let hot = if clear {
                            pt.test_and_clear_accessed(va, level)
                        } else {
                            pt.test_accessed(va, level)
                        };
                        if hot {
                            push_run(&mut r.runs, vpn(va), vpn(va + h));
                            r.pages += vpn(h);
                            r.lo = r.lo.min(va);
                            r.hi = r.hi.max(va + h);
                        }
                    }
                    va += h;
                }
            }
        }
        Some(r)
    }
    /// Invalidate the translations of `[start, end)` with a shootdown from `initiator`.
    pub fn invalidate_range(&mut self, initiator: usize, start: u64, end: u64) {
        self.m.invalidate_range(initiator, start, end)
    }

    // -- moving pages ----------------------------------------------------------------------------

    /// Move pages to node `to` as one batch from `core` ([`Machine::migrate_pages`]).
    pub fn migrate_pages(&mut self, vas: &[u64], to: u8, core: usize) -> Result<Migrated> {
        self.m.migrate_pages(vas, to, core)
    }
    /// Move pages to node `to` without a copy (the target holds an identical copy), one
    /// shootdown from `core` ([`Machine::remap_pages`]).
    pub fn remap_pages(&mut self, vas: &[u64], to: u8, core: usize) -> Result<Migrated> {
        self.m.remap_pages(vas, to, core)
    }
    /// Exchange pages pairwise between nodes in one operation
    /// ([`Machine::exchange_pages`]), charged to `core`.
    pub fn exchange_pages(&mut self, pairs: &[(u64, u64)], core: usize) -> Result<Migrated> {
        self.m.exchange_pages(pairs, core)
    }
    /// Lock pages under a copy against accesses ([`Machine::lock_pages`]).
    pub fn lock_pages(&mut self, locks: &[(u64, Ps, Ps)]) {
        self.m.lock_pages(locks)
    }
    /// Split the 2 MiB page mapping `va` into 4 KiB pages ([`Machine::split_huge_page`]).
    pub fn split_huge_page(&mut self, va: u64, core: usize) -> Result<bool> {
        self.m.split_huge_page(va, core)
    }
    /// Reclaim pages to swap ([`Machine::pageout_pages`]), charged to `core`.
    pub fn pageout_pages(&mut self, vas: &[u64], core: usize) -> Result<Migrated> {
        self.m.pageout_pages(vas, core)
    }
    /// Page migrations done so far (the OS's counters).
    pub fn migration(&self) -> &MigrationCounters {
        &self.m.os.migration
    }
    /// The LRU activity marks (DAMOS `lru_prio` / `lru_deprio`).
    pub fn lru(&self) -> &LruMarks {
        &self.m.os.mem.lru
    }
    /// Mark `[start, end)` active or inactive on the LRU lists.
    pub fn lru_mark(&mut self, start: u64, end: u64, active: bool) {
        self.m.os.mem.lru.mark(start, end, active)
    }

    // -- NUMA hint faults and the backend's own work ----------------------------------------------

    /// NUMA hint faults (armed by a policy's scanner).
    pub fn hint_faults(&mut self) -> &mut Option<Box<HintFaults>> {
        &mut self.m.os.hint
    }
    /// Protect (PROT_NONE-like, for NUMA hint faults) the 4 KiB pages of `[start, end)` for
    /// which `pick(node of the page)` holds, at scan time `now`; hint faults cost `fault` each
    /// (armed on first use). The caller flushes the TLBs of the range. Returns the pages
    /// protected.
    pub fn hint_protect(
        &mut self,
        start: u64,
        end: u64,
        now: Ps,
        fault: Ps,
        pick: &mut dyn FnMut(Option<u8>) -> bool,
    ) -> u64 {
        let os = &mut self.m.os;
        let backend = &os.backend;
        let h = os.hint.get_or_insert_with(|| Box::new(HintFaults::new(fault)));
        h.protect(start, end, now, &mut |va| pick(backend.node_of(va)))
    }
    /// Time of the memory backend's next periodic work.
    pub fn backend_next_event(&self) -> Ps {
        Ps::from_ps(self.m.backend_next_event_ps())
    }
    /// Run the memory backend's periodic work due at `now`.
    pub fn backend_tick(&mut self, now: Ps) {
        self.m.backend_tick(now.ps())
    }
}
