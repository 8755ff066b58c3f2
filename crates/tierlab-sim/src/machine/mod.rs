//! The machine model: cores with TLBs, one address space with 4-level page tables, memory
//! nodes/tiers, a cost model, and the OS operations on them (mappings, faults, placement,
//! TLB shootdowns).
//!
//! # Time
//! Each core has a clock in picoseconds. An access advances its core's clock by
//! `cpu + (TLB: 0 | L2-TLB hit | walk of n levels) + memory latency of the node holding the
//! page` (or a cache hit for `cache_hit_fraction` of accesses, as an expected value so runs
//! stay deterministic), plus a fault's cost when the page was not present. Background work
//! (scanners, interrupts, shootdown handling) is charged with [`Machine::charge`] to the core
//! that does it.

pub mod cache;
pub mod cost;
pub mod hmem;
pub mod memory;
pub mod pagetable;
pub mod pebs;
pub mod replacement;
pub mod tlb;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Result, SimError};
use crate::groundtruth::GroundTruth;
use crate::stats::{Stats, StatsSource};
use crate::workload::{AddressSpace, MapOptions, PageSize};
use cost::{ps, CostConfig};
use memory::{Memory, NodeConfig, Placement};
use pagetable::{Level, PageTables, Translation, WalkMemo};
use tierlab_core::Access;
use tlb::{CoreTlb, TlbConfig, TlbHit};

/// Most memory nodes a machine may have.
pub const MAX_NODES: usize = 64;

/// The machine's configuration (`[machine]` in a scenario).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    /// Number of cores.
    #[serde(default = "d_cores")]
    pub cores: usize,
    /// Core clock in GHz (converts cycle counts such as the PEBS handler's to time).
    #[serde(default = "d_ghz")]
    pub cpu_ghz: f64,
    /// Default page size of anonymous mappings: "4KiB" or "2MiB".
    #[serde(default = "d_page")]
    pub page_size: PageSize,
    /// Placement of newly faulted pages: "first-touch" or "interleave".
    #[serde(default = "d_placement")]
    pub placement: Placement,
    /// Set Dirty on upper page-table levels on stores (x86 does not; default false).
    #[serde(default)]
    pub dirty_upper_levels: bool,
    /// Latency multiplier between distinct nodes that both have cores (remote socket).
    /// Source: cost-model.md (remote DRAM ~130-140 ns vs ~90 local: about 1.5x).
    #[serde(default = "d_remote")]
    pub remote_factor: f64,
    /// Explicit latency matrix `[core_node][mem_node]` in ns; replaces the default built
    /// from node latencies and `remote_factor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<Vec<Vec<f64>>>,
    /// TLB geometry.
    #[serde(default)]
    pub tlb: TlbConfig,
    /// Per-core data cache model (`[machine.cache]`: size, ways, line); absent = none.
    /// Needed by PEBS's `l2-miss-loads` event. (Access costs still use
    /// `cost.cache_hit_fraction`.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<cache::CacheConfig>,
    /// Cost model.
    #[serde(default)]
    pub cost: CostConfig,
    /// Memory nodes; default: the two-tier machine of [`memory::default_nodes`].
    #[serde(default = "memory::default_nodes")]
    pub nodes: Vec<NodeConfig>,
    /// Hierarchical memory mode (fast memory = node 0 with a capacity limit, slow memory
    /// behind a link, OS page replacement by the scenario's policy); absent = off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hmem: Option<hmem::HmemConfig>,
}

fn d_cores() -> usize {
    1
}
fn d_ghz() -> f64 {
    2.0
}
fn d_page() -> PageSize {
    PageSize::Base4K
}
fn d_placement() -> Placement {
    Placement::FirstTouch
}
fn d_remote() -> f64 {
    1.5
}

impl Default for MachineConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl MachineConfig {
    /// Check the configuration; returns (dotted field, problem).
    pub fn validate(&self) -> std::result::Result<(), (String, String)> {
        let e = |f: &str, m: String| Err((f.to_string(), m));
        if self.cores == 0 || self.cores > 4096 {
            return e("machine.cores", format!("{} is not in 1..=4096", self.cores));
        }
        if !(self.cpu_ghz.is_finite() && self.cpu_ghz > 0.0) {
            return e("machine.cpu_ghz", format!("{} must be > 0", self.cpu_ghz));
        }
        if self.nodes.is_empty() || self.nodes.len() > MAX_NODES {
            return e("machine.nodes", format!("need 1..={MAX_NODES} nodes, got {}", self.nodes.len()));
        }
        let mut seen_core = vec![None; self.cores];
        for (i, n) in self.nodes.iter().enumerate() {
            if n.name.is_empty() || n.name.contains('.') {
                return e(
                    &format!("machine.nodes[{i}].name"),
                    format!("`{}` must be non-empty without dots", n.name),
                );
            }
            if self.nodes[..i].iter().any(|m| m.name == n.name) {
                return e(&format!("machine.nodes[{i}].name"), format!("duplicate node name `{}`", n.name));
            }
            if !(n.latency_ns.is_finite() && n.latency_ns > 0.0) {
                return e(&format!("machine.nodes[{i}].latency_ns"), format!("{} must be > 0", n.latency_ns));
            }
            if !(n.bandwidth_gbps.is_finite() && n.bandwidth_gbps > 0.0) {
                return e(
                    &format!("machine.nodes[{i}].bandwidth_gbps"),
                    format!("{} must be > 0", n.bandwidth_gbps),
                );
            }
            for &c in &n.cores {
                if c >= self.cores {
                    return e(
                        &format!("machine.nodes[{i}].cores"),
                        format!("core {c} does not exist (machine.cores = {})", self.cores),
                    );
                }
                if let Some(j) = seen_core[c] {
                    return e(
                        &format!("machine.nodes[{i}].cores"),
                        format!("core {c} is already on node {j}"),
                    );
                }
                seen_core[c] = Some(i);
            }
        }
        if let Some(m) = &self.latency_ns {
            if m.len() != self.nodes.len() || m.iter().any(|r| r.len() != self.nodes.len()) {
                return e(
                    "machine.latency_ns",
                    format!("must be a {0}x{0} matrix (one row and column per node)", self.nodes.len()),
                );
            }
            if m.iter().flatten().any(|v| !(v.is_finite() && *v > 0.0)) {
                return e("machine.latency_ns", "every latency must be > 0".into());
            }
        }
        if !(self.remote_factor.is_finite() && self.remote_factor >= 1.0) {
            return e("machine.remote_factor", format!("{} must be >= 1", self.remote_factor));
        }
        self.tlb.validate().map_err(|(f, m)| (f.to_string(), m))?;
        if let Some(c) = &self.cache {
            c.validate().map_err(|(f, m)| (f.to_string(), m))?;
        }
        self.cost.validate().map_err(|(f, m)| (f.to_string(), m))?;
        if let Some(h) = &self.hmem {
            h.validate(self.cores)?;
        }
        Ok(())
    }

    /// The latency matrix in effect.
    pub fn latency_matrix(&self) -> Vec<Vec<f64>> {
        self.latency_ns
            .clone()
            .unwrap_or_else(|| memory::default_latency_matrix(&self.nodes, self.remote_factor))
    }
}

/// A mapping of the address space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vma {
    /// First byte.
    pub start: u64,
    /// Length in bytes (a multiple of the page size).
    pub len: u64,
    /// Name.
    pub name: String,
    /// Page size.
    pub page_size: PageSize,
    /// Time it was mapped (ns).
    pub mapped_at_ns: u64,
}

/// Per-core counters.
#[derive(Clone, Debug, Default)]
pub struct CoreCounters {
    /// Accesses executed.
    pub accesses: u64,
    /// Stores executed.
    pub writes: u64,
    /// Accesses that hit an L1 dTLB.
    pub l1_tlb_hits: u64,
    /// Accesses that missed L1 and hit the L2 TLB.
    pub l2_tlb_hits: u64,
    /// Accesses that missed every TLB (each needs a walk).
    pub tlb_misses: u64,
    /// Page walks (TLB misses plus re-walks after faults).
    pub walks: u64,
    /// Page-table levels read by walks.
    pub walk_levels: u64,
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

/// One core.
#[derive(Clone, Debug)]
pub struct Core {
    /// Clock, picoseconds.
    pub clock_ps: u64,
    /// TLBs.
    pub tlb: CoreTlb,
    /// Counters.
    pub c: CoreCounters,
    /// Accesses per memory node.
    pub node_accesses: Vec<u64>,
    memo: WalkMemo,
    /// Fast path: the page of the last access (base address), its mask, node and dirtiness.
    last_base: u64,
    last_mask: u64,
    last_node: u8,
    last_dirty: bool,
    /// Precomputed access cost to each node, ps.
    cost_to: Vec<u64>,
    node: u8,
    /// Ground-truth coalescing cache.
    gt: Box<crate::groundtruth::Coalescer>,
    /// PEBS: events left until the next record, and the event mask (bit 0 loads, bit 1
    /// stores; 0 = sampling off).
    pebs_left: u64,
    pebs_mask: u8,
    /// The per-access hook is needed: a cache is modelled or PEBS counts events.
    hooks: bool,
    /// Data cache model (off unless `machine.cache` is set).
    pub cache: cache::Cache,
}

impl Core {
    /// The end of every translated access: charge the memory access of `node` (plus `extra`
    /// picoseconds of translation work) to this core, and remember the page (a 2 MiB one when
    /// `huge`) for the same-page fast path, with whether its cached translation is dirty.
    #[inline(always)]
    fn complete(&mut self, addr: u64, node: u8, huge: bool, dirty: bool, extra: u64) {
        let t = self.cost_to[node as usize] + extra;
        self.clock_ps += t;
        self.c.access_ps += t;
        self.node_accesses[node as usize] += 1;
        self.last_mask = if huge { !((2u64 << 20) - 1) } else { !4095 };
        self.last_base = addr & self.last_mask;
        self.last_node = node;
        self.last_dirty = dirty;
    }
}

/// Flush behaviour of an Accessed-bit clear.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// No TLB flush: translations cached in TLBs keep hiding later accesses (DAMON does this).
    None,
    /// Invalidate on every core that may cache the entry (a shootdown from `initiator`).
    Shootdown {
        /// Core doing the clearing (pays the initiator cost and the local invalidation).
        initiator: usize,
    },
}

/// The simulated machine with its address space.
pub struct Machine {
    /// Configuration.
    pub cfg: MachineConfig,
    /// Cores.
    pub cores: Vec<Core>,
    /// Page tables.
    pub pt: PageTables,
    /// Memory nodes.
    pub mem: Memory,
    /// Mappings by start address.
    pub vmas: BTreeMap<u64, Vma>,
    /// Mapping history: (time ns, map?, start, len, name).
    pub mapping_log: Vec<(u64, bool, u64, u64, String)>,
    /// Ground truth of the current window.
    pub gt: GroundTruth,
    /// Cores in the address space's CPU mask (those that ran its threads).
    pub mm_cpumask: Vec<bool>,
    next_mmap: u64,
    walk_level_ps: u64,
    l2_hit_ps: u64,
    fault_4k_ps: u64,
    fault_2m_ps: u64,
    /// Accesses outside any mapping (the run stops with an error on the first one).
    pub segfaults: u64,
    /// The PEBS hardware, when a sampling observer enabled it.
    pub pebs: Option<pebs::PebsHw>,
    /// The hierarchical memory mode, when configured.
    pub hmem: Option<Box<hmem::Hmem>>,
    /// TLB-miss sampling (a placement policy's profile source), when enabled.
    pub tlb_sampler: Option<crate::placement::sampling::TlbMissSampler>,
    /// NUMA hint faults armed by a tiering policy (pages protected by its scanner), if any.
    pub hint: Option<Box<crate::tiering::hint::HintFaults>>,
    /// Page migrations done ([`Machine::migrate_page`], [`Machine::migrate_pages`]).
    pub migration: MigrationCounters,
}

/// Counters of page migrations.
#[derive(Clone, Debug, Default)]
pub struct MigrationCounters {
    /// Pages moved (of any size).
    pub moves: u64,
    /// Of them, 2 MiB pages.
    pub huge_moves: u64,
    /// Moves to a faster tier (lower tier rank).
    pub promotions: u64,
    /// Moves to a slower tier (higher tier rank).
    pub demotions: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// Time spent copying, ps (charged to the migrating cores).
    pub copy_ps: u64,
    /// Shootdowns done for migrations (one per single page or batch).
    pub shootdowns: u64,
}

/// What a batch migration did ([`Machine::migrate_pages`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Migrated {
    /// Pages moved (of any size).
    pub pages: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Time charged to the migrating core, ns (copies plus the shootdown).
    pub ns: f64,
    /// The batch stopped early because the target node was full.
    pub out_of_room: bool,
}

const MMAP_BASE: u64 = 0x1000_0000_0000; // 16 TiB: room for many 5 TiB heaps below 2^47

impl Machine {
    /// A machine in its initial state (validate the config first).
    pub fn new(cfg: &MachineConfig) -> Self {
        let lat = cfg.latency_matrix();
        let mem = Memory::new(&cfg.nodes, &lat, cfg.cores, cfg.placement);
        let c = &cfg.cost;
        let mut cores = Vec::with_capacity(cfg.cores);
        for i in 0..cfg.cores {
            let node = mem.core_node[i];
            let cost_to = (0..cfg.nodes.len())
                .map(|n| {
                    let mem_ns = lat[node as usize][n];
                    ps(c.cpu_ns_per_access
                        + c.cache_hit_fraction * c.cache_hit_ns
                        + (1.0 - c.cache_hit_fraction) * mem_ns)
                })
                .collect();
            cores.push(Core {
                clock_ps: 0,
                tlb: CoreTlb::new(&cfg.tlb),
                c: CoreCounters::default(),
                node_accesses: vec![0; cfg.nodes.len()],
                memo: WalkMemo::EMPTY,
                last_base: u64::MAX,
                last_mask: 0,
                last_node: 0,
                last_dirty: false,
                cost_to,
                node,
                gt: Box::default(),
                pebs_left: u64::MAX,
                pebs_mask: 0,
                hooks: cfg.cache.is_some(),
                cache: cache::Cache::new(cfg.cache.as_ref()),
            });
        }
        let mut pt = PageTables::new();
        pt.dirty_upper_levels = cfg.dirty_upper_levels;
        Machine {
            cfg: cfg.clone(),
            cores,
            pt,
            mem,
            vmas: BTreeMap::new(),
            mapping_log: Vec::new(),
            gt: GroundTruth::default(),
            mm_cpumask: vec![false; cfg.cores],
            next_mmap: MMAP_BASE,
            walk_level_ps: ps(c.walk_ns_per_level),
            l2_hit_ps: ps(c.l2_tlb_hit_ns),
            fault_4k_ps: ps(c.fault_ns + 4096.0 / c.zero_gbps),
            fault_2m_ps: ps(c.fault_ns + (2u64 << 20) as f64 / c.zero_gbps),
            segfaults: 0,
            pebs: None,
            hmem: cfg.hmem.as_ref().map(|h| Box::new(hmem::Hmem::new(h, cfg))),
            tlb_sampler: None,
            hint: None,
            migration: MigrationCounters::default(),
        }
    }

    /// Simulated time of the furthest core, ns.
    pub fn now_ns(&self) -> u64 {
        self.cores.iter().map(|c| c.clock_ps).max().unwrap_or(0) / 1000
    }

    /// Execute one access of `core`. The hot path of the simulator.
    #[inline]
    pub fn access(&mut self, core: usize, a: Access) -> Result<()> {
        let write = a.is_write();
        let c = &mut self.cores[core];
        c.c.accesses += 1;
        c.c.writes += write as u64;
        // The cache model (its state follows every access) and PEBS event counting:
        // decrement for the sampled kinds only (mask 0 = off).
        let c = if c.hooks {
            c.pebs_left -= c.cache.pebs_event(a.addr, write, c.pebs_mask);
            if c.pebs_left == 0 {
                self.pebs_record(core, a);
            }
            &mut self.cores[core]
        } else {
            c
        };
        // Ground truth (coalesced per core).
        c.gt.count(a.addr >> 12, &mut self.gt);
        // Fast path: same page as the previous access of this core. That page is the
        // most recent entry of its L1 set, so a lookup would hit without changing state.
        if (a.addr & c.last_mask) == c.last_base && (!write || c.last_dirty) {
            c.c.l1_tlb_hits += 1;
            let t = c.cost_to[c.last_node as usize];
            c.clock_ps += t;
            c.c.access_ps += t;
            c.node_accesses[c.last_node as usize] += 1;
            return Ok(());
        }
        // Second fast path: a hit in the L1 4 KiB dTLB that needs no Dirty assist (exactly
        // what `access_slow` does for it, without its call). The hierarchical mode has hit
        // semantics of its own (policy notifications), so it always takes the slow path.
        // A store to a clean entry falls through: the slow path's lookup hits the same
        // entry again, already the most recent of its set, so LRU order does not change.
        if self.hmem.is_none() {
            let Some(d) = c.tlb.l1_4k.lookup(a.addr >> 12) else {
                return self.access_slow::<true>(core, a.addr, write);
            };
            let dirty = d & tlb::DIRTY != 0;
            if !write || dirty {
                c.c.l1_tlb_hits += 1;
                c.complete(a.addr, d & 0x7f, false, dirty, 0);
                return Ok(());
            }
        }
        self.access_slow::<false>(core, a.addr, write)
    }

    /// Everything but the fast paths. `L1_4K_MISSED`: the caller already missed in the L1
    /// 4 KiB dTLB (the lookup resumes after it).
    #[inline(never)]
    fn access_slow<const L1_4K_MISSED: bool>(&mut self, core: usize, addr: u64, write: bool) -> Result<()> {
        if self.hmem.is_some() {
            return self.access_hmem(core, addr, write);
        }
        let c = &mut self.cores[core];
        let mut extra = 0u64;
        let hit = if L1_4K_MISSED { c.tlb.lookup_after_l1_4k_miss(addr) } else { c.tlb.lookup(addr) };
        let (node, huge, dirty) = match hit {
            TlbHit::L1 { data, huge } => {
                c.c.l1_tlb_hits += 1;
                (data & 0x7f, huge, data & tlb::DIRTY != 0)
            }
            TlbHit::L2 { data, huge } => {
                c.c.l2_tlb_hits += 1;
                extra += self.l2_hit_ps;
                (data & 0x7f, huge, data & tlb::DIRTY != 0)
            }
            TlbHit::Miss => {
                c.c.tlb_misses += 1;
                if let Some(s) = self.tlb_sampler.as_mut() {
                    let cost = s.on_miss(core, addr, c.clock_ps);
                    c.clock_ps += cost;
                    c.c.background_ps += cost;
                }
                let (node, huge, walk_ps) = self.walk_and_fault(core, addr, write)?;
                extra += walk_ps;
                if let Some(h) = self.hint.as_deref_mut() {
                    // A NUMA hint fault when the walk reached a page protected by a scanner.
                    let c = &mut self.cores[core];
                    let f = h.on_walk(core, addr, c.clock_ps);
                    c.clock_ps += f;
                    c.c.fault_ps += f;
                }
                let c = &mut self.cores[core];
                c.tlb.fill(addr, huge, node | if write { tlb::DIRTY } else { 0 });
                (node, huge, write)
            }
        };
        let c = &mut self.cores[core];
        let mut dirty = dirty;
        if write && !dirty {
            // Store to a clean cached translation: the hardware sets D in the PTE.
            c.c.dirty_assists += 1;
            self.pt.set_dirty(addr);
            let c = &mut self.cores[core];
            c.tlb.mark_dirty(addr, huge, node | tlb::DIRTY);
            extra += self.walk_level_ps;
            dirty = true;
        }
        self.cores[core].complete(addr, node, huge, dirty, extra);
        Ok(())
    }

    /// Walk for `addr`; on a fault allocate the page and walk again. Returns (node, huge,
    /// time of walks and fault in ps).
    fn walk_and_fault(&mut self, core: usize, addr: u64, write: bool) -> Result<(u8, bool, u64)> {
        let mut spent = 0u64;
        for attempt in 0..2 {
            let c = &mut self.cores[core];
            let w = self.pt.walk(addr, write, &mut c.memo);
            c.c.walks += 1;
            c.c.walk_levels += w.levels as u64;
            spent += w.levels as u64 * self.walk_level_ps;
            match w.translation {
                Translation::Page4K { node } => return Ok((node, false, spent)),
                Translation::Page2M { node } => return Ok((node, true, spent)),
                Translation::NotPresent if attempt == 0 => {
                    spent += self.fault(core, addr)?;
                }
                Translation::NotPresent => break,
            }
        }
        Err(SimError::runtime(format!("page at {addr:#x} still not present after its fault")))
    }

    /// Handle a page fault of `core` at `addr`: find the mapping, place and map the page.
    /// Returns the fault's cost in ps (also accounted in the core's fault time).
    fn fault(&mut self, core: usize, addr: u64) -> Result<u64> {
        let vma = match self.vmas.range(..=addr).next_back() {
            Some((_, v)) if addr < v.start + v.len => v,
            _ => {
                self.segfaults += 1;
                return Err(SimError::runtime(format!(
                    "core {core} accessed {addr:#x}, which is outside every mapping (segmentation fault)"
                )));
            }
        };
        let (pages, cost) = match vma.page_size {
            PageSize::Base4K => (1, self.fault_4k_ps),
            PageSize::Huge2M => (512, self.fault_2m_ps),
        };
        let huge = vma.page_size == PageSize::Huge2M;
        let base = if huge { addr & !((2u64 << 20) - 1) } else { addr & !4095 };
        let node = self.mem.allocate_at(core, base, pages).ok_or_else(|| {
            SimError::runtime(format!(
                "out of memory: no node has room for a {} page at {addr:#x} (all {} nodes full, {} bytes total)",
                if huge { "2 MiB" } else { "4 KiB" },
                self.mem.nodes.len(),
                self.mem.capacity_bytes()
            ))
        })?;
        if huge {
            self.pt.map_2m(addr & !((2u64 << 20) - 1), node);
        } else {
            self.pt.map_4k(addr & !4095, node);
        }
        let c = &mut self.cores[core];
        c.c.page_faults += 1;
        c.c.fault_ps += cost;
        c.clock_ps += cost;
        Ok(0)
    }

    #[cold]
    fn pebs_record(&mut self, core: usize, a: Access) {
        let clock = self.cores[core].clock_ps;
        let Some(hw) = self.pebs.as_mut() else {
            self.cores[core].pebs_left = u64::MAX;
            return;
        };
        let cost = hw.record(core, a.addr, a.kind.code(), clock);
        let period = hw.cfg.period.max(1);
        let c = &mut self.cores[core];
        c.pebs_left = period;
        c.clock_ps += cost;
        c.c.background_ps += cost;
    }

    /// Turn PEBS sampling on with `cfg` (replacing any earlier configuration).
    pub fn enable_pebs(&mut self, cfg: pebs::PebsHwConfig) {
        let mask = cfg.mask();
        let period = cfg.period.max(1);
        for c in &mut self.cores {
            c.pebs_mask = mask;
            c.pebs_left = period;
            c.hooks = mask != 0 || c.cache.enabled();
        }
        self.pebs = Some(pebs::PebsHw::new(cfg, self.cores.len()));
    }

    /// Change the reset value (takes effect at each core's next record).
    pub fn set_pebs_period(&mut self, period: u64) {
        if let Some(hw) = self.pebs.as_mut() {
            hw.cfg.period = period.max(1);
            for c in &mut self.cores {
                c.pebs_left = c.pebs_left.min(period.max(1));
            }
        }
    }

    /// Move the present page holding `va` to node `to` (page migration): the node accounting
    /// moves, every core that may cache the translation is shot down (from `core`), and the
    /// copy over the link (page bytes at the slower of the two nodes' bandwidths) is charged
    /// to `core`. Returns the whole cost in ns (copy plus the initiator's shootdown time);
    /// 0 when the page is already there. Errors: page not present, no room on `to`, no such
    /// node, or the hierarchical memory mode (which moves pages itself).
    pub fn migrate_page(&mut self, va: u64, to: u8, core: usize) -> Result<f64> {
        let m = self.migrate_batch(&[va], to, core)?;
        if m.out_of_room {
            return Err(SimError::runtime(format!("migrate_page: node {to} has no room for {va:#x}")));
        }
        Ok(m.ns)
    }

    /// Move the pages holding each of `vas` to node `to` as one batch (Linux's
    /// `migrate_pages` with a batched TLB flush): each page's copy is charged to `core` as in
    /// [`Machine::migrate_page`], and one shootdown covers the batch (per entry up to the
    /// flush ceiling, else full flushes; see [`Machine::shootdown_entries`]). Pages already
    /// on `to` are skipped. Stops at the first page that does not fit (`out_of_room`);
    /// errors when an address is not present or `to` does not exist.
    pub fn migrate_pages(&mut self, vas: &[u64], to: u8, core: usize) -> Result<Migrated> {
        self.migrate_batch(vas, to, core)
    }

    fn migrate_batch(&mut self, vas: &[u64], to: u8, core: usize) -> Result<Migrated> {
        if self.hmem.is_some() {
            return Err(SimError::runtime("migrate_page: not available in the hierarchical memory mode"));
        }
        if to as usize >= self.mem.nodes.len() {
            return Err(SimError::runtime(format!("migrate_page: node {to} does not exist")));
        }
        if core >= self.cores.len() {
            return Err(SimError::runtime(format!("migrate_page: core {core} does not exist")));
        }
        let mut out = Migrated::default();
        let mut entries: Vec<u64> = Vec::with_capacity(vas.len().min(4096));
        let mut copy_ps = 0u64;
        for &va in vas {
            let from = self
                .pt
                .node_of(va)
                .ok_or_else(|| SimError::runtime(format!("migrate_page: {va:#x} is not present")))?;
            if from == to {
                continue;
            }
            let huge = self.pt.is_huge(va);
            let bytes: u64 = if huge { 2 << 20 } else { 4096 };
            if !self.mem.transfer(from, to, bytes / 4096) {
                out.out_of_room = true;
                break;
            }
            let base = va & !(bytes - 1);
            self.pt.set_node(base, to)?;
            let (nf, nt) = (&self.mem.nodes[from as usize].cfg, &self.mem.nodes[to as usize].cfg);
            // GB/s = bytes per ns.
            copy_ps += ps(bytes as f64 / nf.bandwidth_gbps.min(nt.bandwidth_gbps));
            let mc = &mut self.migration;
            mc.moves += 1;
            mc.huge_moves += huge as u64;
            mc.bytes += bytes;
            mc.promotions += (nt.tier < nf.tier) as u64;
            mc.demotions += (nt.tier > nf.tier) as u64;
            entries.push(base);
            out.pages += 1;
            out.bytes += bytes;
        }
        if entries.is_empty() {
            return Ok(out);
        }
        let before = self.cores[core].clock_ps;
        let c = &mut self.cores[core];
        c.clock_ps += copy_ps;
        c.c.background_ps += copy_ps;
        self.migration.copy_ps += copy_ps;
        self.migration.shootdowns += 1;
        self.shootdown_entries(core, &entries);
        out.ns = (self.cores[core].clock_ps - before) as f64 / 1000.0;
        Ok(out)
    }

    /// Invalidate the translations of the pages at `vas` (one TLB entry each, 4 KiB or
    /// 2 MiB) with one shootdown from `initiator`: per entry up to the flush ceiling, else a
    /// full flush, on the initiator and on the other cores of the address space's CPU mask,
    /// charged as [`Machine::invalidate_range`] charges it.
    pub fn shootdown_entries(&mut self, initiator: usize, vas: &[u64]) {
        if vas.is_empty() {
            return;
        }
        let n = vas.len() as u64;
        let full = n > self.cfg.cost.flush_ceiling_pages;
        let cost = &self.cfg.cost;
        let local_ps = if full { ps(cost.full_flush_ns) } else { ps(cost.invlpg_ns * n as f64) };
        let target_ps = ps(cost.shootdown_target_ns);
        let mut targets = 0usize;
        for (i, core) in self.cores.iter_mut().enumerate() {
            if i == initiator || !self.mm_cpumask[i] {
                continue;
            }
            targets += 1;
            if full {
                core.tlb.flush();
            } else {
                for &va in vas {
                    core.tlb.invalidate(va);
                }
            }
            core.last_base = u64::MAX;
            core.c.remote_invalidations += 1;
            core.clock_ps += target_ps;
            core.c.tlb_maint_ps += target_ps;
        }
        let init_ps = local_ps + ps(cost.shootdown_ns(targets));
        let me = &mut self.cores[initiator];
        if full {
            me.tlb.flush();
            me.c.local_flushes += 1;
        } else {
            for &va in vas {
                me.tlb.invalidate(va);
            }
            me.c.local_invalidations += n;
        }
        me.last_base = u64::MAX;
        me.c.shootdowns_sent += (targets > 0) as u64;
        me.clock_ps += init_ps;
        me.c.tlb_maint_ps += init_ps;
    }

    /// Charge `ns` of background work to `core` (its clock advances).
    pub fn charge(&mut self, core: usize, ns: f64) {
        let c = &mut self.cores[core];
        let t = ps(ns);
        c.clock_ps += t;
        c.c.background_ps += t;
    }

    /// Flush the ground-truth coalescing buffers of every core (before closing a window).
    pub fn flush_ground_truth(&mut self) {
        for c in &mut self.cores {
            c.gt.flush(&mut self.gt);
        }
    }

    /// Test the Accessed bit at `level` for `va` (no side effect).
    pub fn test_accessed(&self, va: u64, level: Level) -> bool {
        self.pt.test_accessed(va, level)
    }

    /// Test and clear the Accessed bit at `level` for `va`, then flush as told. Clearing
    /// without a flush leaves cached translations in place, so later accesses that hit
    /// the TLB do not set the bit again.
    pub fn clear_accessed(&mut self, va: u64, level: Level, flush: Flush) -> bool {
        let was = self.pt.test_and_clear_accessed(va, level);
        if let Flush::Shootdown { initiator } = flush {
            let span = level.span();
            let start = va & !(span - 1);
            self.invalidate_range(initiator, start, start + span);
        }
        was
    }

    /// Invalidate translations of `[start, end)` on every core that may cache them: the
    /// initiator invalidates locally (per page up to the flush ceiling, else a full flush)
    /// and sends a shootdown to the other cores of the address space's CPU mask that cache
    /// an entry in the range. Costs are charged to the initiator and the targets.
    pub fn invalidate_range(&mut self, initiator: usize, start: u64, end: u64) {
        let pages = (end - start).div_ceil(4096);
        let full = pages > self.cfg.cost.flush_ceiling_pages;
        let cost = &self.cfg.cost;
        let local_ps = if full { ps(cost.full_flush_ns) } else { ps(cost.invlpg_ns * pages as f64) };
        let target_ps = ps(cost.shootdown_target_ns);
        let mut targets = 0usize;
        for (i, core) in self.cores.iter_mut().enumerate() {
            if i == initiator {
                continue;
            }
            // Cores that may cache the entry: those in the CPU mask (the OS cannot know more
            // with shared page tables). Cores that never ran the address space are skipped.
            if !self.mm_cpumask[i] {
                continue;
            }
            targets += 1;
            if full {
                core.tlb.flush();
            } else {
                core.tlb.invalidate_range(start, end);
            }
            core.last_base = u64::MAX;
            core.c.remote_invalidations += 1;
            core.clock_ps += target_ps;
            core.c.tlb_maint_ps += target_ps;
        }
        let init_ps = local_ps + ps(cost.shootdown_ns(targets));
        let me = &mut self.cores[initiator];
        if full {
            me.tlb.flush();
            me.c.local_flushes += 1;
        } else {
            me.tlb.invalidate_range(start, end);
            me.c.local_invalidations += pages;
        }
        me.last_base = u64::MAX;
        me.c.shootdowns_sent += (targets > 0) as u64;
        me.clock_ps += init_ps;
        me.c.tlb_maint_ps += init_ps;
    }

    fn add_vma(&mut self, start: u64, len: u64, opts: &MapOptions) -> Result<()> {
        let ps_ = opts.page_size.unwrap_or(self.cfg.page_size);
        if let Some((_, v)) = self.vmas.range(..start + len).next_back() {
            if v.start + v.len > start {
                return Err(SimError::runtime(format!(
                    "mapping `{}` at {start:#x}+{len:#x} overlaps mapping `{}` at {:#x}+{:#x}",
                    opts.name, v.name, v.start, v.len
                )));
            }
        }
        let now = self.cores.get(opts.thread).map(|c| c.clock_ps / 1000).unwrap_or(0);
        self.vmas
            .insert(start, Vma { start, len, name: opts.name.clone(), page_size: ps_, mapped_at_ns: now });
        self.mapping_log.push((now, true, start, len, opts.name.clone()));
        self.hmem_add_area(start, len);
        if opts.populate {
            self.populate(start, len, opts.thread)?;
        }
        Ok(())
    }

    /// Bulk-populate `[start, start+len)` (within one mapping) without simulated accesses:
    /// pages are placed by the placement policy as if touched by `core`'s thread, 2 MiB at a
    /// time where possible. No fault cost is charged.
    pub fn populate(&mut self, start: u64, len: u64, core: usize) -> Result<()> {
        let vma = self
            .vmas
            .get(&start)
            .cloned()
            .ok_or_else(|| SimError::runtime(format!("populate: no mapping at {start:#x}")))?;
        if self.hmem.is_some() {
            self.hmem_populate(start, len);
            return Ok(());
        }
        let end = start + len;
        let core = core.min(self.cores.len() - 1);
        let mut va = start;
        while va < end {
            let mut chunk_end = ((va | ((2u64 << 20) - 1)) + 1).min(end);
            if vma.page_size == PageSize::Base4K && !self.mem.preferred.is_empty() {
                // A placement plan may prefer different nodes within the chunk.
                chunk_end = chunk_end.min(self.mem.preferred_run(va).1.max(va + 4096));
            }
            let pages = (chunk_end - va) / 4096;
            let node = self.mem.allocate_at(core, va, pages).ok_or_else(|| {
                SimError::runtime(format!(
                    "out of memory while populating `{}`: {} of {} bytes placed, every node is full",
                    vma.name,
                    va - start,
                    len
                ))
            })?;
            match vma.page_size {
                PageSize::Huge2M => {
                    self.pt.map_2m(va, node);
                }
                PageSize::Base4K => {
                    self.pt.populate_4k(va, chunk_end, node);
                }
            }
            va = chunk_end;
        }
        Ok(())
    }

    /// Bulk-populate `[start, start+len)` of the mapping starting at `start` on node `node`
    /// (like [`Machine::populate`], but bound to one node, as `mbind` plus a prefault would
    /// place it). No fault cost is charged.
    pub fn populate_on(&mut self, start: u64, len: u64, node: u8) -> Result<()> {
        let vma = self
            .vmas
            .get(&start)
            .cloned()
            .ok_or_else(|| SimError::runtime(format!("populate: no mapping at {start:#x}")))?;
        if self.hmem.is_some() {
            return Err(SimError::runtime(format!(
                "populate `{}` on node {node}: not available in the hierarchical memory mode",
                vma.name
            )));
        }
        let Some(n) = self.mem.nodes.get(node as usize) else {
            return Err(SimError::runtime(format!(
                "populate `{}` on node {node}: the machine has {} nodes",
                vma.name,
                self.mem.nodes.len()
            )));
        };
        let len = len.min(vma.len);
        if !self.mem.has_room(node, len.div_ceil(4096)) {
            return Err(SimError::runtime(format!(
                "out of memory while populating `{}` ({len} bytes) on node {node} (`{}`): {} bytes free",
                vma.name,
                n.cfg.name,
                (n.capacity_pages - n.used_pages) * 4096
            )));
        }
        let end = start + len;
        let mut va = start;
        while va < end {
            let chunk_end = ((va | ((2u64 << 20) - 1)) + 1).min(end);
            let pages = (chunk_end - va) / 4096;
            let n = &mut self.mem.nodes[node as usize];
            n.used_pages += pages;
            n.allocated_pages += pages;
            match vma.page_size {
                PageSize::Huge2M => {
                    self.pt.map_2m(va, node);
                }
                PageSize::Base4K => {
                    self.pt.populate_4k(va, chunk_end, node);
                }
            }
            va = chunk_end;
        }
        Ok(())
    }

    /// The mapping containing `addr`.
    pub fn vma_of(&self, addr: u64) -> Option<&Vma> {
        match self.vmas.range(..=addr).next_back() {
            Some((_, v)) if addr < v.start + v.len => Some(v),
            _ => None,
        }
    }

    /// Resident bytes per node.
    pub fn resident_bytes(&self) -> Vec<u64> {
        self.mem.nodes.iter().map(|n| n.used_pages * 4096).collect()
    }

    /// Sum of a per-core counter.
    pub fn total(&self, f: impl Fn(&CoreCounters) -> u64) -> u64 {
        self.cores.iter().map(|c| f(&c.c)).sum()
    }
}

impl AddressSpace for Machine {
    fn mmap(&mut self, len: u64, opts: MapOptions) -> Result<u64> {
        if len == 0 {
            return Err(SimError::runtime(format!("mmap of `{}` with length 0", opts.name)));
        }
        let psz = opts.page_size.unwrap_or(self.cfg.page_size).bytes();
        let len = len.div_ceil(psz) * psz;
        let start = self.next_mmap;
        // Keep mappings 2 MiB aligned with a 2 MiB guard gap.
        let next = (start + len).div_ceil(2 << 20) * (2 << 20) + (2 << 20);
        if next >= pagetable::VA_LIMIT {
            return Err(SimError::runtime(format!(
                "address space exhausted mapping `{}` ({len} bytes)",
                opts.name
            )));
        }
        self.add_vma(start, len, &opts)?;
        self.next_mmap = next;
        Ok(start)
    }

    fn mmap_fixed(&mut self, addr: u64, len: u64, opts: MapOptions) -> Result<()> {
        let psz = opts.page_size.unwrap_or(self.cfg.page_size).bytes();
        if !addr.is_multiple_of(psz) || !len.is_multiple_of(psz) || len == 0 {
            return Err(SimError::runtime(format!(
                "mmap_fixed `{}`: {addr:#x}+{len:#x} is not a non-empty multiple of the page size {psz}",
                opts.name
            )));
        }
        if addr + len > pagetable::VA_LIMIT {
            return Err(SimError::runtime(format!(
                "mmap_fixed `{}`: {addr:#x}+{len:#x} is beyond 48-bit addresses",
                opts.name
            )));
        }
        self.add_vma(addr, len, &opts)
    }

    fn populate_on(&mut self, start: u64, len: u64, node: u8) -> Result<()> {
        Machine::populate_on(self, start, len, node)
    }

    fn munmap(&mut self, addr: u64) -> Result<()> {
        let v = self
            .vmas
            .remove(&addr)
            .ok_or_else(|| SimError::runtime(format!("munmap: no mapping starts at {addr:#x}")))?;
        let mut freed: Vec<(u8, u64)> = Vec::new();
        self.pt.unmap_range(v.start, v.start + v.len, &mut |n, p| freed.push((n, p)));
        for (n, p) in freed {
            self.mem.free(n, p);
        }
        self.hmem_unmap(v.start, v.len);
        let initiator = 0;
        self.invalidate_range(initiator, v.start, v.start + v.len);
        let now = self.now_ns();
        self.mapping_log.push((now, false, v.start, v.len, v.name));
        Ok(())
    }
}

impl StatsSource for Machine {
    fn report_stats(&self, out: &mut Stats) {
        let sum = |f: &dyn Fn(&CoreCounters) -> u64| self.cores.iter().map(|c| f(&c.c)).sum::<u64>();
        out.set("machine.cores", self.cores.len());
        out.set("machine.accesses", sum(&|c| c.accesses));
        out.set("machine.reads", sum(&|c| c.accesses - c.writes));
        out.set("machine.writes", sum(&|c| c.writes));
        out.set("machine.tlb.l1_hits", sum(&|c| c.l1_tlb_hits));
        out.set("machine.tlb.l2_hits", sum(&|c| c.l2_tlb_hits));
        out.set("machine.tlb.misses", sum(&|c| c.tlb_misses));
        out.set("machine.tlb.local_invalidations", sum(&|c| c.local_invalidations));
        out.set("machine.tlb.local_flushes", sum(&|c| c.local_flushes));
        out.set("machine.tlb.remote_invalidations", sum(&|c| c.remote_invalidations));
        out.set("machine.tlb.shootdowns_sent", sum(&|c| c.shootdowns_sent));
        out.set("machine.walks", sum(&|c| c.walks));
        out.set("machine.walk_levels", sum(&|c| c.walk_levels));
        out.set("machine.page_faults", sum(&|c| c.page_faults));
        out.set("machine.dirty_assists", sum(&|c| c.dirty_assists));
        if self.cfg.cache.is_some() {
            out.set("machine.cache.hits", self.cores.iter().map(|c| c.cache.hits).sum::<u64>());
            out.set("machine.cache.misses", self.cores.iter().map(|c| c.cache.misses).sum::<u64>());
            out.set("machine.cache.load_misses", self.cores.iter().map(|c| c.cache.load_misses).sum::<u64>());
        }
        out.set("machine.time.access_s", sum(&|c| c.access_ps) as f64 / 1e12);
        out.set("machine.time.fault_s", sum(&|c| c.fault_ps) as f64 / 1e12);
        out.set("machine.time.tlb_maintenance_s", sum(&|c| c.tlb_maint_ps) as f64 / 1e12);
        out.set("machine.time.background_s", sum(&|c| c.background_ps) as f64 / 1e12);
        out.set("machine.pagetable.present_4k", self.pt.present_4k());
        out.set("machine.pagetable.present_2m", self.pt.present_2m());
        let (u, p) = self.pt.tables();
        out.set("machine.pagetable.upper_tables", u);
        out.set("machine.pagetable.pte_tables", p);
        out.set("machine.pagetable.materialized", self.pt.stats.materialized);
        out.set("machine.mappings", self.vmas.len());
        let mc = &self.migration;
        out.set("machine.migrations", mc.moves);
        out.set("machine.migration.huge_pages", mc.huge_moves);
        out.set("machine.migration.promotions", mc.promotions);
        out.set("machine.migration.demotions", mc.demotions);
        out.set("machine.migration.bytes", mc.bytes);
        out.set("machine.migration.shootdowns", mc.shootdowns);
        out.set("machine.time.migration_copy_s", mc.copy_ps as f64 / 1e12);
        if let Some(h) = &self.hint {
            h.report_stats("machine.hint", out);
        }
        for (i, c) in self.cores.iter().enumerate() {
            let p = format!("machine.core.{i}");
            out.set(format!("{p}.accesses"), c.c.accesses);
            out.set(format!("{p}.tlb_misses"), c.c.tlb_misses);
            out.set(format!("{p}.page_faults"), c.c.page_faults);
            out.set(format!("{p}.remote_invalidations"), c.c.remote_invalidations);
            out.set(format!("{p}.time_s"), c.clock_ps as f64 / 1e12);
            out.set(format!("{p}.node"), self.mem.nodes[c.node as usize].cfg.name.as_str());
        }
        for (i, n) in self.mem.nodes.iter().enumerate() {
            let p = format!("node.{}", n.cfg.name);
            let acc: u64 = self.cores.iter().map(|c| c.node_accesses[i]).sum();
            out.set(format!("{p}.accesses"), acc);
            out.set(format!("{p}.resident_bytes"), n.used_pages * 4096);
            out.set(format!("{p}.capacity_bytes"), n.capacity_pages * 4096);
            out.set(format!("{p}.allocated_bytes"), n.allocated_pages * 4096);
            out.set(format!("{p}.tier"), n.cfg.tier as u64);
        }
        self.hmem_stats(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(cores: usize) -> Machine {
        let cfg = MachineConfig { cores, ..MachineConfig::default() };
        let mut m = Machine::new(&cfg);
        m.mm_cpumask = vec![true; cores];
        m
    }

    #[test]
    fn first_access_faults_then_hits() {
        let mut m = machine(1);
        let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
        m.access(0, Access::read(a)).unwrap();
        m.access(0, Access::read(a + 8)).unwrap();
        let c = &m.cores[0].c;
        assert_eq!(c.page_faults, 1);
        assert_eq!(c.tlb_misses, 1);
        assert_eq!(c.l1_tlb_hits, 1);
        assert_eq!(c.walks, 2, "one walk that faults, one after");
    }

    #[test]
    fn accessed_bits_set_on_walk_not_on_tlb_hit() {
        let mut m = machine(1);
        let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
        m.access(0, Access::read(a)).unwrap();
        for l in Level::ALL {
            assert!(m.test_accessed(a, l), "{l:?}");
        }
        // Clear every level without flushing: the TLB still holds the translation.
        for l in Level::ALL {
            m.clear_accessed(a, l, Flush::None);
        }
        m.access(0, Access::read(a + 64)).unwrap();
        for l in Level::ALL {
            assert!(!m.test_accessed(a, l), "TLB hit must not set {l:?}");
        }
        // Clear with a flush: the next access walks and sets the bits again.
        m.clear_accessed(a, Level::Pte, Flush::Shootdown { initiator: 0 });
        m.access(0, Access::read(a + 128)).unwrap();
        for l in Level::ALL {
            assert!(m.test_accessed(a, l), "{l:?} after flush");
        }
    }

    /// Naive reference of the 4 KiB translation path: L1 and L2 as per-set LRU lists of
    /// (page, known dirty), walk on a miss, a Dirty assist on a store to a clean entry.
    struct NaiveTlbs {
        l1: Vec<Vec<(u64, bool)>>,
        l2: Vec<Vec<(u64, bool)>>,
        l1_ways: usize,
        l2_ways: usize,
        hits1: u64,
        hits2: u64,
        misses: u64,
        assists: u64,
    }

    impl NaiveTlbs {
        fn put(sets: &mut [Vec<(u64, bool)>], ways: usize, e: (u64, bool)) {
            let s = &mut sets[(e.0 as usize) % sets.len()];
            if s.len() == ways {
                s.remove(0);
            }
            s.push(e);
        }

        fn touch(sets: &mut [Vec<(u64, bool)>], vpn: u64) -> Option<bool> {
            let n = sets.len();
            let s = &mut sets[(vpn as usize) % n];
            let i = s.iter().position(|e| e.0 == vpn)?;
            let e = s.remove(i);
            s.push(e);
            Some(e.1)
        }

        fn set_dirty(sets: &mut [Vec<(u64, bool)>], vpn: u64) {
            let n = sets.len();
            for e in sets[(vpn as usize) % n].iter_mut().filter(|e| e.0 == vpn) {
                e.1 = true;
            }
        }

        fn access(&mut self, vpn: u64, write: bool) {
            let dirty = if let Some(d) = Self::touch(&mut self.l1, vpn) {
                self.hits1 += 1;
                d
            } else if let Some(d) = Self::touch(&mut self.l2, vpn) {
                self.hits2 += 1;
                Self::put(&mut self.l1, self.l1_ways, (vpn, d));
                d
            } else {
                self.misses += 1;
                Self::put(&mut self.l1, self.l1_ways, (vpn, write));
                Self::put(&mut self.l2, self.l2_ways, (vpn, write));
                write
            };
            if write && !dirty {
                self.assists += 1;
                Self::set_dirty(&mut self.l1, vpn);
                Self::set_dirty(&mut self.l2, vpn);
            }
        }
    }

    /// Differential test of the whole access path (both fast paths and the slow path)
    /// against the naive reference, on a random mix of reads and writes over more pages than
    /// the TLBs hold, checked after every access.
    #[test]
    fn access_path_matches_naive_tlbs() {
        let tlb = tlb::TlbConfig {
            l1_4k_entries: 8,
            l1_4k_ways: 2,
            l1_2m_entries: 4,
            l1_2m_ways: 2,
            l2_entries: 16,
            l2_ways: 4,
        };
        let cfg = MachineConfig { cores: 1, tlb: tlb.clone(), ..MachineConfig::default() };
        let mut m = Machine::new(&cfg);
        m.mm_cpumask = vec![true];
        let base = m.mmap(64 << 12, MapOptions::named("x")).unwrap();
        let mut naive = NaiveTlbs {
            l1: vec![Vec::new(); 4],
            l2: vec![Vec::new(); 4],
            l1_ways: 2,
            l2_ways: 4,
            hits1: 0,
            hits2: 0,
            misses: 0,
            assists: 0,
        };
        let mut rng = crate::rng::Rng::new(7);
        for i in 0..200_000u64 {
            // Mostly a small hot set (hits), sometimes any of 64 pages (L2 hits, misses),
            // runs on one page (the same-page fast path), a third of them stores.
            let page = match rng.below(10) {
                0..=5 => rng.below(6),
                6..=7 => rng.below(64),
                _ => (base >> 12) % 64,
            };
            let addr = base + page * 4096 + rng.below(4096);
            let write = rng.below(3) == 0;
            let a = if write { Access::write(addr) } else { Access::read(addr) };
            m.access(0, a).unwrap();
            naive.access(addr >> 12, write);
            let c = &m.cores[0].c;
            let got = (c.l1_tlb_hits, c.l2_tlb_hits, c.tlb_misses, c.dirty_assists);
            let want = (naive.hits1, naive.hits2, naive.misses, naive.assists);
            assert_eq!(got, want, "after access {i} ({a:?})");
            if write {
                assert!(m.pt.test_dirty(addr, Level::Pte), "store {i} left the PTE clean");
            }
        }
    }

    #[test]
    fn store_sets_dirty_even_on_tlb_hit() {
        let mut m = machine(1);
        let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
        m.access(0, Access::read(a)).unwrap();
        assert!(!m.pt.test_dirty(a, Level::Pte));
        m.access(0, Access::write(a)).unwrap();
        assert!(m.pt.test_dirty(a, Level::Pte));
        assert_eq!(m.cores[0].c.dirty_assists, 1);
    }

    #[test]
    fn shootdown_reaches_other_cores() {
        let mut m = machine(4);
        let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
        for core in 0..4 {
            m.access(core, Access::read(a)).unwrap();
        }
        m.clear_accessed(a, Level::Pte, Flush::Shootdown { initiator: 0 });
        assert_eq!(m.cores[0].c.shootdowns_sent, 1);
        for core in 1..4 {
            assert_eq!(m.cores[core].c.remote_invalidations, 1);
            assert!(!m.cores[core].tlb.caches(a));
        }
    }

    #[test]
    fn access_outside_mappings_is_an_error() {
        let mut m = machine(1);
        let e = m.access(0, Access::read(0x1234)).unwrap_err();
        assert!(e.to_string().contains("outside every mapping"), "{e}");
    }

    #[test]
    fn full_fast_tier_falls_back_to_next() {
        let mut cfg = MachineConfig::default();
        cfg.nodes[0].capacity = crate::units::ByteSize(8192);
        let mut m = Machine::new(&cfg);
        let a = m.mmap(4 * 4096, MapOptions::named("x")).unwrap();
        for k in 0..4 {
            m.access(0, Access::read(a + k * 4096)).unwrap();
        }
        assert_eq!(m.pt.node_of(a), Some(0));
        assert_eq!(m.pt.node_of(a + 8192), Some(1));
        // Slower tier costs more time per access.
        assert!(m.cores[0].cost_to[1] > m.cores[0].cost_to[0]);
    }

    #[test]
    fn huge_page_mapping_faults_once_per_2m() {
        let mut m = machine(1);
        let opts = MapOptions { page_size: Some(PageSize::Huge2M), ..MapOptions::named("h") };
        let a = m.mmap(4 << 20, opts).unwrap();
        for k in 0..1024u64 {
            m.access(0, Access::read(a + k * 4096)).unwrap();
        }
        assert_eq!(m.cores[0].c.page_faults, 2);
        assert_eq!(m.cores[0].c.tlb_misses, 2);
    }

    #[test]
    fn pebs_samples_every_rth_event_and_interrupts_when_full() {
        let mut m = machine(1);
        let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
        m.enable_pebs(pebs::PebsHwConfig {
            loads: true,
            stores: false,
            period: 10,
            capacity: 42,
            threshold: 37,
            interrupt_ps: ps(10_000.0),
            miss_only: false,
        });
        // 1000 loads and 1000 stores: loads only are counted.
        for k in 0..1000u64 {
            m.access(0, Access::read(a + k * 64)).unwrap();
            m.access(0, Access::write(a + k * 64)).unwrap();
        }
        let hw = m.pebs.as_ref().unwrap();
        assert_eq!(hw.cores[0].samples, 100, "N/R records for N events");
        assert_eq!(hw.cores[0].interrupts, 2, "100 records, interrupt every 37");
        assert_eq!(hw.drained.len(), 2);
        assert_eq!(hw.drained[0].records.len(), 37);
        assert_eq!(hw.drained[0].records[0].0, a + 9 * 64, "the 10th load");
        assert_eq!(m.cores[0].c.background_ps, 2 * ps(10_000.0));
    }

    #[test]
    fn munmap_frees_memory() {
        let mut m = machine(1);
        let a = m.mmap(1 << 20, MapOptions { populate: true, ..MapOptions::named("x") }).unwrap();
        assert_eq!(m.resident_bytes()[0], 1 << 20);
        m.munmap(a).unwrap();
        assert_eq!(m.resident_bytes()[0], 0);
        assert!(m.access(0, Access::read(a)).is_err());
    }
}
