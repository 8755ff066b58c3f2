//! The hardware layer: cores with their clocks and TLBs, the page-table formats the walker
//! reads (radix tables with Accessed/Dirty bits at every level), optional data caches, the
//! PMU (PEBS records, TLB-miss sampling) and the cost model.
//!
//! The hardware executes accesses ([`Hardware::access`]): counters, the PMU, the TLB lookup;
//! on a TLB miss it asks the OS layer through the narrow [`Mmu`] interface for a translation
//! (the OS walks its page tables, setting the bits the walker sets, and takes a page fault
//! when needed), then caches it. A store through a clean cached translation asks the OS to
//! set the Dirty bit ([`Mmu::set_dirty`]), as the hardware's microcode assist does. The OS
//! layer invalidates translations with [`Hardware::invalidate_page`],
//! [`Hardware::invalidate_range`] and [`Hardware::flush_tlb`] and charges time to cores.
//!
//! # Time
//! Each core has a clock in picoseconds (the engine's one time unit). An access advances its
//! core's clock by `cpu + (TLB: 0 | L2-TLB hit | walk) + memory latency of the node holding
//! the page` (or a cache hit for `cache_hit_fraction` of accesses, as an expected value so
//! runs stay deterministic), plus what the OS charges for faults. Background work (scanners,
//! interrupts, shootdown handling) is charged with [`Hardware::charge`] to the core doing it.

pub mod cache;
pub mod cost;
pub mod cpu;
pub mod loaded;
pub mod pagetable;
pub mod pebs;
pub mod psc;
pub mod tlb;
pub mod tlb_sampler;

use crate::error::Result;
use crate::truth::{Coalescer, GroundTruth};
use cost::{ps, CostConfig};
use tierlab_core::{Access, PageSize};
use tlb::{CoreTlb, TlbConfig, TlbHit};

/// Per-core counters.
#[derive(Clone, Debug)]
pub struct CoreCounters {
    /// Accesses completed, per memory node (indexed with the node masked by [`tlb::NODE`],
    /// the identity for every node: the access path needs no bounds check). Every completed
    /// access adds one here and nowhere else: the number of accesses is derived from it
    /// ([`CoreCounters::accesses`]), which spares the access path a counter.
    node_acc: [u64; COST_SLOTS],
    /// Accesses that ended in an error (outside every mapping, out of memory): executed but
    /// not completed on any node.
    failed: u64,
    /// Stores executed.
    pub writes: u64,
    /// Accesses that hit an L1 dTLB.
    pub l1_tlb_hits: u64,
    /// Accesses that missed L1 and hit the L2 TLB.
    pub l2_tlb_hits: u64,
    /// Accesses that missed every TLB (each needs a walk).
    pub tlb_misses: u64,
    /// Walks by the number of levels they read (index 1..=4; paging-structure caches make
    /// walks shorter, faults end them early). The number of walks and of levels read are
    /// derived from it ([`CoreCounters::walks`], [`CoreCounters::walk_levels`]): a walk
    /// updates one counter.
    pub walks_by_levels: [u64; 5],
    /// Page faults taken (pages allocated).
    pub page_faults: u64,
    /// Stores to a clean cached translation (D bit set by a microcode assist).
    pub dirty_assists: u64,
    /// Single-page invalidations executed locally.
    pub local_invalidations: u64,
    /// Full TLB flushes executed locally.
    pub local_flushes: u64,
    /// Shootdown IPIs received (remote invalidations).
    pub remote_invalidations: u64,
    /// Shootdown IPIs sent.
    pub shootdowns_sent: u64,
    /// Time spent on accesses (incl. TLB, walks), ps.
    pub access_ps: u64,
    /// Time spent in page faults, ps.
    pub fault_ps: u64,
    /// Time spent on TLB maintenance (invalidations, shootdowns), ps.
    pub tlb_maint_ps: u64,
    /// Background work charged to this core (scanners, interrupts), ps.
    pub background_ps: u64,
}

impl Default for CoreCounters {
    fn default() -> Self {
        CoreCounters {
            node_acc: [0; COST_SLOTS],
            failed: 0,
            writes: 0,
            l1_tlb_hits: 0,
            l2_tlb_hits: 0,
            tlb_misses: 0,
            walks_by_levels: [0; 5],
            page_faults: 0,
            dirty_assists: 0,
            local_invalidations: 0,
            local_flushes: 0,
            remote_invalidations: 0,
            shootdowns_sent: 0,
            access_ps: 0,
            fault_ps: 0,
            tlb_maint_ps: 0,
            background_ps: 0,
        }
    }
}

impl CoreCounters {
    /// Accesses executed: those completed on a node plus those that ended in an error.
    pub fn accesses(&self) -> u64 {
        self.node_acc.iter().sum::<u64>() + self.failed
    }

    /// Add `other`'s access counts (per node and failed) to these (a sum over cores).
    pub fn add_accesses(&mut self, other: &CoreCounters) {
        for (a, b) in self.node_acc.iter_mut().zip(&other.node_acc) {
            *a += b;
        }
        self.failed += other.failed;
    }

    /// Page walks (TLB misses plus re-walks after faults).
    pub fn walks(&self) -> u64 {
        self.walks_by_levels.iter().sum()
    }

    /// Page-table levels read by walks.
    pub fn walk_levels(&self) -> u64 {
        self.walks_by_levels.iter().enumerate().map(|(n, &w)| n as u64 * w).sum()
    }
}

/// One core. Aligned to a cache line: where its hot fields fall relative to line
/// boundaries is then fixed by its layout alone (a 16-byte counter update that straddled
/// two lines, depending on where the allocator put the cores, cost STREAM triad 6%).
#[derive(Clone, Debug)]
#[repr(align(64))]
pub struct Core {
    /// Clock, picoseconds.
    pub(crate) clock_ps: u64,
    /// TLBs.
    pub(crate) tlb: CoreTlb,
    /// Paging-structure caches (consulted by walks only).
    pub(crate) psc: psc::Psc,
    /// The memo of this core's last page walk in the flat backend's page tables (a
    /// simulator shortcut, not hardware: [`pagetable::WalkMemo`]). Kept with the core: the
    /// walk needs no other per-core lookup.
    pub(crate) walk_memo: pagetable::WalkMemo,
    /// Counters.
    pub(crate) c: CoreCounters,
    /// Memory nodes of the machine: the first `nodes` entries of the per-node arrays are used.
    nodes: usize,
    /// Fast path: the page of the last access (base address), its mask, node and dirtiness.
    last_base: u64,
    last_mask: u64,
    last_node: u8,
    last_dirty: bool,
    /// Precomputed access cost to each node, ps (nodes are fewer than [`COST_SLOTS`]; the
    /// rest is 0). A fixed-size array indexed with the node masked by [`tlb::NODE`] (the
    /// identity for every node): the access path needs no bounds check.
    cost_to: [u64; COST_SLOTS],
    /// The memory node this core belongs to.
    pub(crate) node: u8,
    /// PEBS: events left until the next record, and the event mask (bit 0 loads, bit 1
    /// stores; 0 = sampling off).
    pebs_left: u64,
    pebs_mask: u8,
    /// The per-access hook is needed: a cache is modelled, PEBS counts events or a memory
    /// device logs the accesses it serves.
    hooks: bool,
    /// A memory-side tracker (a CXL device's hot-page tracker) wants this core's accesses:
    /// their addresses are appended to `device_log` until the tracker drains it.
    device_on: bool,
    device_log: Vec<u64>,
    /// The inline L1 4 KiB hit path may be used: TLBs cache, hits are not reported to the
    /// OS, and the TLB has the usual geometry ([`CoreTlb::usual_geometry`]).
    fast_l1: bool,
    /// Data cache model (off unless `machine.cache` is set).
    pub(crate) cache: cache::Cache,
    /// The ground-truth tap: a small cache of this core's recent page counts, spilled into the
    /// machine's ground truth (private: nothing but the machine's window close reads it).
    truth: Box<Coalescer>,
}

impl Core {
    /// The core's clock, ps.
    #[inline]
    pub fn clock_ps(&self) -> u64 {
        self.clock_ps
    }

    /// Its counters.
    #[inline]
    pub fn counters(&self) -> &CoreCounters {
        &self.c
    }

    /// Its TLBs.
    pub fn tlb(&self) -> &CoreTlb {
        &self.tlb
    }

    /// Its data cache model.
    pub fn cache(&self) -> &cache::Cache {
        &self.cache
    }

    /// The memory node it belongs to.
    pub fn node(&self) -> u8 {
        self.node
    }

    /// No per-access hook is on (cache model, PEBS) and the inline L1 probe may be used:
    /// [`Hardware::access`] may skip both tests (`PLAIN`).
    #[inline]
    pub fn is_plain(&self) -> bool {
        !self.hooks && self.fast_l1
    }

    /// The end of [`Hardware::miss_plain`]: cache the translation `f` of `addr` and complete
    /// the access; returns the clock after it.
    #[inline(always)]
    fn finish_miss_plain(&mut self, addr: u64, f: Fill) -> u64 {
        let data = f.node | if f.dirty { tlb::DIRTY } else { 0 };
        if f.size == PageSize::Base4K {
            self.tlb.fill_4k_plain(addr, data);
            self.complete_4k(f.node, f.walk_ps);
        } else {
            self.tlb.fill(addr, f.size, data);
            self.complete(addr, f.node, f.size, f.dirty, f.walk_ps, true);
        }
        self.clock_ps
    }

    /// The end of every translated access: charge the memory access of `node` (plus `extra`
    /// picoseconds of translation work) to this core, and remember the page (of `size`) for
    /// the same-page fast path, with whether its cached translation is dirty.
    #[inline(always)]
    fn complete(&mut self, addr: u64, node: u8, size: PageSize, dirty: bool, extra: u64, remember: bool) {
        let t = self.cost_to[(node & tlb::NODE) as usize] + extra;
        self.clock_ps = self.clock_ps.saturating_add(t);
        self.c.access_ps += t;
        self.c.node_acc[(node & tlb::NODE) as usize] += 1;
        if remember {
            self.last_mask = !(size.bytes() - 1);
            self.last_base = addr & self.last_mask;
            self.last_node = node;
            self.last_dirty = dirty;
        }
    }

    /// [`Core::complete`] of a 4 KiB page after an L1 miss ([`Hardware::miss_plain`]): the
    /// page is not remembered for the same-page fast path, only the last one forgotten (one
    /// store, not four: a run of misses, the case here, never takes that path; a next
    /// access to the page hits the L1 and is remembered then).
    #[inline(always)]
    fn complete_4k(&mut self, node: u8, extra: u64) {
        let t = self.cost_to[(node & tlb::NODE) as usize] + extra;
        self.clock_ps = self.clock_ps.saturating_add(t);
        self.c.access_ps += t;
        self.c.node_acc[(node & tlb::NODE) as usize] += 1;
        self.last_base = u64::MAX;
    }

    /// Forget the same-page fast path's page (its translation may be gone).
    #[inline]
    pub fn forget_last(&mut self) {
        self.last_base = u64::MAX;
    }

    /// Accesses per memory node (one entry per node of the machine).
    pub fn node_accesses(&self) -> &[u64] {
        &self.c.node_acc[..self.nodes]
    }

    /// Access cost to memory node `node` in ps (CPU, cache share, the node's latency).
    pub fn cost_to(&self, node: u8) -> u64 {
        self.cost_to[node as usize]
    }
}

/// Slots of a core's per-node cost table: every node number (below `os::MAX_NODES`, 64)
/// masked by [`tlb::NODE`].
const COST_SLOTS: usize = tlb::NODE as usize + 1;

/// The time of one access to memory of latency `mem_ns` under the cost model (CPU time, the
/// cache-hit share, the memory latency of the rest), ps.
pub fn access_ps(c: &CostConfig, mem_ns: f64) -> u64 {
    ps(c.cpu_ns_per_access + c.cache_hit_fraction * c.cache_hit_ns + (1.0 - c.cache_hit_fraction) * mem_ns)
}

/// What a TLB miss resolved to: the translation the TLB caches, and the walk's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill {
    /// Memory node holding the page (whose latency the access pays).
    pub node: u8,
    /// Size of the page (the TLB array it is cached in).
    pub size: PageSize,
    /// Whether the cached translation is dirty.
    pub dirty: bool,
    /// Time of the walk(s) in ps, charged as part of the access (fault time is charged by
    /// the OS to the core's clock directly).
    pub walk_ps: u64,
}

/// What a translation returns: the fill, or the error boxed, so that the whole value is 16
/// bytes and comes back in two registers (an unboxed [`crate::error::SimError`] makes it
/// large enough to be returned through memory and read back on every TLB miss).
pub type Translated = std::result::Result<Fill, Box<crate::error::SimError>>;

const _: () = assert!(std::mem::size_of::<Translated>() == 16);

/// What the hardware asks of the OS layer: the narrow interface between the two.
pub trait Mmu {
    /// A TLB miss of `core` at `addr`: walk the page tables (setting the Accessed/Dirty bits
    /// the walker sets), taking a page fault when the page is not present; return the
    /// translation to cache. An access outside every mapping is an error. Provided: the two
    /// parts below, one after the other.
    #[inline(always)]
    fn translate(&mut self, hw: &mut Hardware, core: usize, addr: u64, write: bool) -> Translated {
        let level_ps = hw.walk_level_ps;
        match self.walk_first(&mut hw.cores[core], level_ps, addr, write) {
            Ok(f) => Ok(f),
            Err(spent) => self.translate_after(hw, core, addr, write, spent),
        }
    }
    /// The same in two parts, the first with only the core `c` (a page-table level read
    /// costs `level_ps`): `Ok` is the translation; `Err(spent)` (the walk's ps so
    /// far, or [`crate::os::backend::NOT_WALKED`]) asks for [`Mmu::translate_after`]. The
    /// usual miss path ([`Hardware::miss_plain`]) holds its core apart from the rest of the
    /// hardware until a fault needs it.
    fn walk_first(&mut self, c: &mut Core, level_ps: u64, addr: u64, write: bool) -> Result<Fill, u64>;
    /// The second part: complete the translation [`Mmu::walk_first`] did not.
    fn translate_after(
        &mut self,
        hw: &mut Hardware,
        core: usize,
        addr: u64,
        write: bool,
        spent: u64,
    ) -> Translated;
    /// A store through the clean cached translation of `addr` (a page of `size`): set the
    /// page's Dirty bit (the hardware's assist).
    fn set_dirty(&mut self, core: usize, addr: u64, size: PageSize);
    /// A TLB hit of `core` at `addr` (called only when [`Hardware::set_hit_reporting`] asked
    /// for it: an exact-LRU experiment; real hardware reports nothing).
    fn on_hit(&mut self, core: usize, addr: u64);
}

/// The hardware of a machine.
pub struct Hardware {
    /// Cores. A boxed slice: their number is fixed when the hardware is built (the access
    /// path relies on it: a core index checked once stays in range).
    pub(crate) cores: Box<[Core]>,
    /// The PEBS hardware, when a driver enabled it.
    pub(crate) pebs: Option<pebs::PebsHw>,
    /// TLB-miss sampling (a PMU event a profiler enabled), when on
    /// ([`Hardware::set_tlb_sampler`]: the cores' TLBs must know).
    tlb_sampler: Option<tlb_sampler::TlbMissSampler>,
    /// Core clock in GHz.
    pub(crate) cpu_ghz: f64,
    /// The cost model.
    pub(crate) cost: CostConfig,
    /// One page-table level read by a walk, ps.
    pub(crate) walk_level_ps: u64,
    /// An L2 TLB hit, ps.
    pub l2_hit_ps: u64,
    /// Memory latency in force `[core node][memory node]`, ns: the idle latencies, or the
    /// loaded ones the loaded-latency model set (what uncore latency counters would show).
    pub(crate) mem_latency_ns: Vec<Vec<f64>>,
    /// TLBs cache translations (false: every access walks; for checking policies against
    /// trace simulators).
    caching: bool,
    /// Every TLB hit is reported to the OS ([`Mmu::on_hit`]).
    report_hits: bool,
}

/// What the hardware is built from.
pub struct HardwareConfig<'a> {
    /// Cores.
    pub cores: usize,
    /// Core clock, GHz.
    pub cpu_ghz: f64,
    /// TLB geometry.
    pub tlb: &'a TlbConfig,
    /// Paging-structure caches.
    pub psc: &'a psc::PscConfig,
    /// 64 KiB L1 TLB geometry (entries, ways); (0, 0) = none.
    pub l1_64k: (usize, usize),
    /// Data cache model.
    pub cache: Option<&'a cache::CacheConfig>,
    /// The cost model.
    pub cost: &'a CostConfig,
    /// Node of each core.
    pub core_node: &'a [u8],
    /// Idle latency `[core node][memory node]`, ns.
    pub latency_ns: &'a [Vec<f64>],
}

impl Hardware {
    /// Hardware in its initial state.
    pub fn new(h: &HardwareConfig) -> Self {
        let c = h.cost;
        let cores = (0..h.cores)
            .map(|i| {
                let node = h.core_node[i];
                let nodes = h.latency_ns.len();
                let mut cost_to = [0; COST_SLOTS];
                for (t, &l) in cost_to.iter_mut().zip(&h.latency_ns[node as usize][..nodes]) {
                    *t = access_ps(c, l);
                }
                let tlb = CoreTlb::with_64k(h.tlb, h.l1_64k.0, h.l1_64k.1);
                Core {
                    clock_ps: 0,
                    fast_l1: tlb.usual_geometry(),
                    tlb,
                    psc: psc::Psc::new(h.psc),
                    walk_memo: pagetable::WalkMemo::EMPTY,
                    c: CoreCounters::default(),
                    nodes,
                    last_base: u64::MAX,
                    last_mask: 0,
                    last_node: 0,
                    last_dirty: false,
                    cost_to,
                    node,
                    pebs_left: u64::MAX,
                    pebs_mask: 0,
                    hooks: h.cache.is_some(),
                    device_on: false,
                    device_log: Vec::new(),
                    cache: cache::Cache::new(h.cache),
                    truth: Box::default(),
                }
            })
            .collect::<Vec<_>>()
            .into_boxed_slice();
        Hardware {
            cores,
            pebs: None,
            tlb_sampler: None,
            cpu_ghz: h.cpu_ghz,
            cost: c.clone(),
            walk_level_ps: ps(c.walk_ns_per_level),
            l2_hit_ps: ps(c.l2_tlb_hit_ns),
            mem_latency_ns: h.latency_ns.to_vec(),
            caching: true,
            report_hits: false,
        }
    }

    /// Set the memory latency every core sees, `latency_ns[core node][memory node]` (the
    /// loaded-latency model recomputes it between accesses; the access path reads the
    /// per-core table it produces).
    /// The cores.
    pub fn cores(&self) -> &[Core] {
        &self.cores
    }

    /// The PEBS hardware, when enabled.
    pub fn pebs(&self) -> Option<&pebs::PebsHw> {
        self.pebs.as_ref()
    }

    /// Core clock, GHz.
    pub fn cpu_ghz(&self) -> f64 {
        self.cpu_ghz
    }

    /// The cost model.
    pub fn cost(&self) -> &CostConfig {
        &self.cost
    }

    /// Memory latency in force `[core node][memory node]`, ns.
    pub fn mem_latency_ns(&self) -> &[Vec<f64>] {
        &self.mem_latency_ns
    }

    pub fn set_memory_latency(&mut self, latency_ns: &[Vec<f64>]) {
        self.mem_latency_ns = latency_ns.to_vec();
        let cost = &self.cost;
        for c in &mut self.cores {
            let row = &latency_ns[c.node as usize];
            for (t, &l) in c.cost_to.iter_mut().zip(row) {
                *t = access_ps(cost, l);
            }
        }
    }

    /// Turn TLB-miss sampling on (`Some`) or off (`None`, returning the sampler that was on).
    pub fn set_tlb_sampler(
        &mut self,
        s: Option<tlb_sampler::TlbMissSampler>,
    ) -> Option<tlb_sampler::TlbMissSampler> {
        for c in &mut self.cores {
            c.tlb.set_sampled(s.is_some());
        }
        std::mem::replace(&mut self.tlb_sampler, s)
    }

    /// The TLB-miss sampler, when on.
    pub fn tlb_sampler_mut(&mut self) -> Option<&mut tlb_sampler::TlbMissSampler> {
        self.tlb_sampler.as_mut()
    }

    /// Turn TLB caching off (every access walks) or on.
    pub fn set_tlb_caching(&mut self, on: bool) {
        self.caching = on;
        for c in &mut self.cores {
            c.fast_l1 = on && !self.report_hits && c.tlb.usual_geometry();
            c.forget_last();
        }
    }

    /// Report every TLB hit (except repeated accesses to the page of the previous one, which
    /// the same-page fast path serves) to the OS through [`Mmu::on_hit`].
    pub fn set_hit_reporting(&mut self, on: bool) {
        self.report_hits = on;
        for c in &mut self.cores {
            c.fast_l1 = self.caching && !on && c.tlb.usual_geometry();
        }
    }

    /// Whether TLBs cache translations.
    pub fn tlb_caching(&self) -> bool {
        self.caching
    }

    /// Simulated time of the furthest core, ps.
    pub fn now_ps(&self) -> u64 {
        self.cores.iter().map(|c| c.clock_ps).max().unwrap_or(0)
    }

    /// Execute one access of `core`, counting it in the ground truth `gt` when `TRUTH`;
    /// `mmu` resolves TLB misses; returns the core's clock after it, ps. The hot path of the
    /// simulator. `PLAIN`: the caller knows the core [`Core::is_plain`] (a run of accesses
    /// tests it once: nothing on the access path changes it), and its two tests are skipped.
    #[inline(always)]
    pub(crate) fn access<M: Mmu, const TRUTH: bool, const PLAIN: bool>(
        &mut self,
        core: usize,
        a: Access,
        mmu: &mut M,
        gt: &mut GroundTruth,
    ) -> Result<u64> {
        let write = a.is_write();
        let c = &mut self.cores[core];
        debug_assert!(!PLAIN || c.is_plain());
        if TRUTH {
            let vpn = tierlab_core::vpn(a.addr);
            if !gt.count_dense(vpn) {
                c.truth.count(vpn, gt);
            }
        }
        // (The access is counted where it completes, per node: `CoreCounters::accesses`.)
        c.c.writes += write as u64;
        // The cache model (its state follows every access) and PEBS event counting:
        // decrement for the sampled kinds only (mask 0 = off).
        let c = if !PLAIN && c.hooks {
            if c.device_on {
                c.device_log.push(a.addr);
            }
            c.pebs_left -= c.cache.pebs_event(a.addr, write, c.pebs_mask);
            if c.pebs_left == 0 {
                self.pebs_record(core, a);
            }
            &mut self.cores[core]
        } else {
            c
        };
        // Fast path: same page as the previous access of this core. That page is the
        // most recent entry of its L1 set, so a lookup would hit without changing state.
        if (a.addr & c.last_mask) == c.last_base && (!write || c.last_dirty) {
            c.c.l1_tlb_hits += 1;
            let t = c.cost_to[(c.last_node & tlb::NODE) as usize];
            c.clock_ps = c.clock_ps.saturating_add(t);
            c.c.access_ps += t;
            c.c.node_acc[(c.last_node & tlb::NODE) as usize] += 1;
            return Ok(c.clock_ps);
        }
        // Second fast path: a hit in the L1 4 KiB dTLB that needs no Dirty assist (exactly
        // what `access_slow` does for it, without its call). Off when the OS wants hits
        // reported, TLBs do not cache or their geometry is not the usual one. A store to a clean entry falls through: the slow
        // path's lookup hits the same entry again, already the most recent of its set, so
        // LRU order does not change. A miss goes to the usual case's miss path when it holds.
        if PLAIN || c.fast_l1 {
            let Some(d) = c.tlb.lookup_l1_4k_usual(a.addr) else {
                if c.tlb.plain_4k() {
                    return self.miss_plain(core, a.addr, write, mmu).map_err(|e| *e);
                }
                return self.access_slow::<M, true>(core, a.addr, write, mmu);
            };
            let dirty = d & tlb::DIRTY != 0;
            if !write || dirty {
                c.c.l1_tlb_hits += 1;
                c.complete(a.addr, d & tlb::NODE, PageSize::Base4K, dirty, 0, true);
                return Ok(c.clock_ps);
            }
        }
        self.access_slow::<M, false>(core, a.addr, write, mmu)
    }

    /// Everything but the fast paths and [`Hardware::miss_plain`]. `L1_4K_MISSED`: the
    /// caller already missed in the L1 4 KiB dTLB (the lookup resumes after it).
    #[inline(never)]
    fn access_slow<M: Mmu, const L1_4K_MISSED: bool>(
        &mut self,
        core: usize,
        addr: u64,
        write: bool,
        mmu: &mut M,
    ) -> Result<u64> {
        let c = &mut self.cores[core];
        let mut extra = 0u64;
        let hit = if L1_4K_MISSED {
            // The caller's inline L1 probe runs only when `fast_l1`, which implies `caching`.
            debug_assert!(self.caching);
            c.tlb.lookup_after_l1_4k_miss(addr)
        } else if !self.caching {
            TlbHit::Miss
        } else {
            c.tlb.lookup(addr)
        };
        let (node, size, dirty, hit) = match hit {
            TlbHit::L1 { data, size } => {
                c.c.l1_tlb_hits += 1;
                (data & tlb::NODE, size, data & tlb::DIRTY != 0, true)
            }
            TlbHit::L2 { data, size } => {
                c.c.l2_tlb_hits += 1;
                extra += self.l2_hit_ps;
                (data & tlb::NODE, size, data & tlb::DIRTY != 0, true)
            }
            TlbHit::Miss => {
                c.c.tlb_misses += 1;
                if let Some(s) = self.tlb_sampler.as_mut() {
                    let cost = s.on_miss(core, addr, c.clock_ps);
                    c.clock_ps = c.clock_ps.saturating_add(cost);
                    c.c.background_ps += cost;
                }
                let f = match mmu.translate(self, core, addr, write) {
                    Ok(f) => f,
                    Err(e) => return Err(self.failed(core, e)),
                };
                extra += f.walk_ps;
                if self.caching {
                    // SAFETY: `core` was checked against the cores at the top (`self.cores[core]`)
                    // and their number never changes (a boxed slice, never reassigned).
                    let c = unsafe { self.cores.get_unchecked_mut(core) };
                    c.tlb.fill(addr, f.size, f.node | if f.dirty { tlb::DIRTY } else { 0 });
                }
                (f.node, f.size, f.dirty, false)
            }
        };
        let mut dirty = dirty;
        if hit && write && !dirty {
            extra += self.dirty_assist(core, addr, size, node, mmu);
            dirty = true;
        }
        if hit && self.report_hits {
            mmu.on_hit(core, addr);
        }
        let caching = self.caching;
        // SAFETY: as for the fill above (`core` checked at the top, the cores fixed).
        let c = unsafe { self.cores.get_unchecked_mut(core) };
        c.complete(addr, node, size, dirty, extra, caching);
        Ok(c.clock_ps)
    }

    /// The miss path's usual case, chosen by [`Hardware::access`] after its L1 probe missed:
    /// 4 KiB translations only, the usual TLB geometry, no sampler ([`CoreTlb::plain_4k`]);
    /// `fast_l1` (the probe) implies TLBs cache and hits are not reported. The same steps as
    /// [`Hardware::access_slow`] takes for it, without its tests. Inlined into the driver's
    /// loop (callgrind, the bench's uniform 1 GiB 2 s: 382.8 instructions per access, 400.1
    /// as a function of its own; triad 105.2 against 102.0). It holds its core apart from the
    /// rest of the hardware ([`Mmu::walk_first`]) until a fault needs it (363.8). The error
    /// comes back boxed, in a register.
    #[inline(always)]
    fn miss_plain<M: Mmu>(
        &mut self,
        core: usize,
        addr: u64,
        write: bool,
        mmu: &mut M,
    ) -> std::result::Result<u64, Box<crate::error::SimError>> {
        // SAFETY: the caller ([`Hardware::access`]) checked `core`; the cores never change.
        let c = unsafe { self.cores.get_unchecked_mut(core) };
        if let Some(d) = c.tlb.lookup_l2_4k_plain(addr) {
            c.c.l2_tlb_hits += 1;
            let node = d & tlb::NODE;
            let mut extra = self.l2_hit_ps;
            if write && d & tlb::DIRTY == 0 {
                extra += self.dirty_assist(core, addr, PageSize::Base4K, node, mmu);
            }
            // SAFETY: `core` was checked at the top and the cores never change.
            let c = unsafe { self.cores.get_unchecked_mut(core) };
            c.complete_4k(node, extra);
            return Ok(c.clock_ps);
        }
        c.c.tlb_misses += 1;
        match mmu.walk_first(c, self.walk_level_ps, addr, write) {
            Ok(f) => Ok(c.finish_miss_plain(addr, f)),
            Err(spent) => self.miss_plain_after(core, addr, write, spent, mmu),
        }
    }

    /// [`Hardware::miss_plain`] when the first walk did not finish (a fault, or NUMA hint
    /// faults are on): the rest of the translation with the whole hardware.
    #[inline(never)]
    fn miss_plain_after<M: Mmu>(
        &mut self,
        core: usize,
        addr: u64,
        write: bool,
        spent: u64,
        mmu: &mut M,
    ) -> std::result::Result<u64, Box<crate::error::SimError>> {
        match mmu.translate_after(self, core, addr, write, spent) {
            Ok(f) => Ok(self.cores[core].finish_miss_plain(addr, f)),
            Err(e) => {
                self.cores[core].c.failed += 1;
                Err(e)
            }
        }
    }

    /// An access of `core` ended in error `e` (counted as executed, on no node); returns
    /// the error unboxed. (It takes the box: unboxing in the caller, or a function without
    /// the error, changed the miss path's register allocation for 2.5% more instructions.)
    #[cold]
    #[allow(clippy::boxed_local)]
    fn failed(&mut self, core: usize, e: Box<crate::error::SimError>) -> crate::error::SimError {
        self.cores[core].c.failed += 1;
        *e
    }

    /// A store to the clean cached translation of `addr` (a page of `size` on `node`): the
    /// hardware sets D in the PTE (a microcode assist) and in the cached entries. Returns
    /// its time, ps.
    #[cold]
    fn dirty_assist<M: Mmu>(&mut self, core: usize, addr: u64, size: PageSize, node: u8, mmu: &mut M) -> u64 {
        self.cores[core].c.dirty_assists += 1;
        mmu.set_dirty(core, addr, size);
        self.cores[core].tlb.mark_dirty(addr, size, node | tlb::DIRTY);
        self.walk_level_ps
    }

    #[cold]
    fn pebs_record(&mut self, core: usize, a: Access) {
        let clock = self.cores[core].clock_ps;
        let Some(hw) = self.pebs.as_mut() else {
            self.cores[core].pebs_left = u64::MAX;
            return;
        };
        let out = hw.record(core, a.addr, a.kind.code(), clock);
        let period = hw.cfg.period.max(1);
        let line_bytes = hw.costs.pollution_record_bytes;
        let c = &mut self.cores[core];
        // The record's cache lines are written through the core's cache (pollution).
        if let Some(at) = out.written_at {
            if c.cache.enabled() {
                let line = c.cache.line_bytes();
                let mut x = at & !(line - 1);
                while x < at + line_bytes {
                    c.cache.access(x, true);
                    x += line;
                }
            }
        }
        // Throttled: counting stops until the tick restarts it ([`Hardware::pebs_tick`]).
        c.pebs_left = if out.throttled { u64::MAX } else { period };
        c.clock_ps = c.clock_ps.saturating_add(out.cost_ps);
        c.c.background_ps += out.cost_ps;
    }

    /// Turn PEBS sampling on with `cfg` (replacing any earlier configuration).
    pub fn enable_pebs(&mut self, cfg: pebs::PebsHwConfig) {
        let mask = cfg.mask();
        let period = cfg.period.max(1);
        for c in &mut self.cores {
            c.pebs_mask = mask;
            c.pebs_left = period;
            c.hooks = mask != 0 || c.cache.enabled() || c.device_on;
        }
        self.pebs = Some(pebs::PebsHw::new(cfg, self.cores.len()));
    }

    /// Turn PEBS sampling on with `cfg` and the cost model `costs` (replacing any earlier
    /// configuration).
    pub fn enable_pebs_with(&mut self, cfg: pebs::PebsHwConfig, costs: pebs::PebsCosts) {
        self.enable_pebs(cfg);
        if let Some(hw) = self.pebs.as_mut() {
            hw.costs = costs;
        }
    }

    /// perf's tick: restart the per-tick interrupt counts and the counting of throttled cores.
    pub fn pebs_tick(&mut self, now: crate::units::Ps) {
        let Some(hw) = self.pebs.as_mut() else { return };
        let period = hw.cfg.period.max(1);
        for core in hw.tick(now) {
            self.cores[core].pebs_left = period;
        }
    }

    /// Turn PEBS sampling off and hand the hardware's state back.
    pub fn disable_pebs(&mut self) -> Option<pebs::PebsHw> {
        for c in &mut self.cores {
            c.pebs_mask = 0;
            c.pebs_left = u64::MAX;
            c.hooks = c.cache.enabled() || c.device_on;
        }
        self.pebs.take()
    }

    /// Have every core log the addresses of its accesses for a memory-side tracker (a CXL
    /// device's hot-page tracker, `m5` telemetry) until [`Hardware::disable_device_log`].
    pub fn enable_device_log(&mut self) {
        for c in self.cores.iter_mut() {
            c.device_on = true;
            c.hooks = true;
        }
    }

    /// Stop logging accesses for a memory-side tracker.
    pub fn disable_device_log(&mut self) {
        for c in self.cores.iter_mut() {
            c.device_on = false;
            c.device_log = Vec::new();
            c.hooks = c.pebs_mask != 0 || c.cache.enabled();
        }
    }

    /// Append the addresses `core` accessed since the last drain to `out` (oldest first) and
    /// empty its log.
    pub fn drain_device_log(&mut self, core: usize, out: &mut Vec<u64>) {
        let log = &mut self.cores[core].device_log;
        out.extend_from_slice(log);
        log.clear();
    }

    /// Change the reset value (takes effect at each core's next record).
    pub fn set_pebs_period(&mut self, period: u64) {
        if let Some(hw) = self.pebs.as_mut() {
            hw.cfg.period = period.max(1);
            for (c, p) in self.cores.iter_mut().zip(&hw.cores) {
                if !p.throttled {
                    c.pebs_left = c.pebs_left.min(period.max(1));
                }
            }
        }
    }

    /// Charge `t` ps of background work to `core` (its clock advances).
    #[inline]
    pub fn charge(&mut self, core: usize, t: u64) {
        let c = &mut self.cores[core];
        c.clock_ps = c.clock_ps.saturating_add(t);
        c.c.background_ps += t;
    }

    /// Charge `t` ps of TLB maintenance to `core`.
    #[inline]
    pub fn charge_tlb(&mut self, core: usize, t: u64) {
        let c = &mut self.cores[core];
        c.clock_ps = c.clock_ps.saturating_add(t);
        c.c.tlb_maint_ps += t;
    }

    /// Charge `t` ps of page-fault handling to `core`.
    #[inline]
    pub fn charge_fault(&mut self, core: usize, t: u64) {
        let c = &mut self.cores[core];
        c.clock_ps = c.clock_ps.saturating_add(t);
        c.c.fault_ps += t;
    }

    /// INVLPG on `core`: drop its cached translation of the page holding `va` (any size)
    /// and every paging-structure-cache entry, whatever its address (SDM 4.10.4.1).
    pub fn invalidate_page(&mut self, core: usize, va: u64) {
        let c = &mut self.cores[core];
        c.tlb.invalidate(va);
        c.psc.flush();
        c.forget_last();
    }

    /// Drop every translation of `core` within `[start, end)` (INVLPG page by page: the
    /// paging-structure caches are emptied too).
    pub fn invalidate_range(&mut self, core: usize, start: u64, end: u64) {
        let c = &mut self.cores[core];
        c.tlb.invalidate_range(start, end);
        c.psc.flush();
        c.forget_last();
    }

    /// Flush `core`'s TLBs and paging-structure caches (a CR3 write).
    pub fn flush_tlb(&mut self, core: usize) {
        let c = &mut self.cores[core];
        c.tlb.flush();
        c.psc.flush();
        c.forget_last();
    }

    /// Spill every core's ground-truth tap into `gt` (before a window closes).
    pub(crate) fn flush_truth(&mut self, gt: &mut GroundTruth) {
        for c in &mut self.cores {
            c.truth.flush(gt);
        }
    }

    /// A ground-truth window closed (after [`Hardware::flush_truth`]); `buffered`: the next
    /// one is buffered. Each core's tap decides whether to coalesce in it.
    pub(crate) fn truth_window_ended(&mut self, buffered: bool) {
        for c in &mut self.cores {
            c.truth.end_window(buffered);
        }
    }

    /// Sum of a per-core counter.
    pub fn total(&self, f: impl Fn(&CoreCounters) -> u64) -> u64 {
        self.cores.iter().map(|c| f(&c.c)).sum()
    }
}
