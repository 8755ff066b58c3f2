//! The OS layer: the machine as a process sees it. It owns the address space (mappings and
//! their history), the memory nodes (capacity, the placement rule), the memory backend (page
//! tables, faults, migration, page replacement), NUMA hint faults and TLB shootdowns, and
//! drives the hardware ([`crate::hw`]) through the narrow [`Mmu`] interface.
//!
//! [`Machine`] is the hardware plus the OS plus the exact ground truth of every access. The
//! ground truth is private to the machine: only the driver's scoring reads it
//! ([`Machine::close_window`]); agents (telemetry, policies) see the machine through
//! [`crate::agents::MachineView`], which cannot reach it.

pub mod backend;
pub mod hint;
pub mod memory;
pub mod migrating;
pub mod replacement;
pub mod shootdown;

use std::collections::BTreeMap;

use tierlab_core::param::{params, Range};

use crate::error::{Result, SimError};
use crate::hw::cost::ps;
use crate::hw::pagetable::{self, Level, PageTables};
use crate::hw::tlb::TlbConfig;
use crate::hw::{Core, CoreCounters, Fill, Hardware, HardwareConfig, Mmu, Translated};
use crate::stats::{Stats, StatsSource};
use crate::truth::{GroundTruth, WindowTruth};
use crate::units::Ps;
use backend::{Backend, Env, MemoryBackend};
use memory::{Memory, NodeConfig, Placement};
use shootdown::{shootdown, Initiator, Inval};
use tierlab_core::{Access, PageSize, HUGE_SIZE};

/// Most memory nodes a machine may have.
pub const MAX_NODES: usize = 64;
/// Most cores a machine may have.
pub const MAX_CORES: usize = 4096; // not a page size
/// The range of `machine.cores`.
const CORES: Range = Range::closed(1.0, MAX_CORES as f64);

/// The machine's configuration (`[machine]` in a scenario).
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct MachineConfig {
    /// Number of cores.
    #[param(default = 1, range = CORES, unit = "cores", setting)]
    pub cores: usize,
    /// CPU preset (`hw::cpu::PRESETS`: "skylake-sp", "icelake-sp", "sapphire-rapids", "zen3",
    /// "zen4", "knl", "knc"): TLB geometry, paging-structure caches, L2-TLB hit and walk
    /// latencies, clock, PEBS/IBS, applied at parse time to every key the scenario does not
    /// give. Absent: the defaults below.
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Core clock (converts cycle counts such as the PEBS handler's to time).
    #[param(
        default = 2.0,
        range = "(0, 100]",
        unit = "GHz",
        assumed = "a 2 GHz core, the clock the cost model's cycle figures are converted at; the CPU presets set their SKU's base clock"
    )]
    pub cpu_ghz: f64,
    /// Default page size of anonymous mappings: "4KiB", "2MiB" or "1GiB".
    #[param(default = PageSize::Base4K)]
    pub page_size: PageSize,
    /// Placement of newly faulted pages: "first-touch" or "interleave".
    #[param(default = Placement::FirstTouch)]
    pub placement: Placement,
    /// Set Dirty on upper page-table levels on stores (x86 does not).
    #[param(
        default = false,
        sourced = "reference/page-walk-caches.md: Intel SDM 4.8, the D flag only in entries that map a page"
    )]
    pub dirty_upper_levels: bool,
    /// Latency multiplier between distinct nodes that both have cores (remote socket).
    #[param(
        default = 1.5,
        range = "[1, 1000]",
        sourced = "reference/cost-model.md: remote-socket DRAM ~130-140 ns, about 1.5-2x local"
    )]
    pub remote_factor: f64,
    /// Explicit latency matrix `[core_node][mem_node]`; replaces the default built from node
    /// latencies and `remote_factor`.
    #[param(default, range = "(0, 1e9]", unit = "ns", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<Vec<Vec<f64>>>,
    /// TLB geometry.
    #[param(default)]
    pub tlb: TlbConfig,
    /// Paging-structure caches (`[machine.psc]`: sizes per level, `enabled`).
    #[param(default)]
    pub psc: crate::hw::psc::PscConfig,
    /// Per-core data cache model (`[machine.cache]`: size, ways, line); absent = none.
    /// Needed by PEBS's `l2-miss-loads` event. (Access costs still use
    /// `cost.cache_hit_fraction`.)
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<crate::hw::cache::CacheConfig>,
    /// Cost model.
    #[param(default)]
    pub cost: crate::hw::cost::CostConfig,
    /// Memory nodes; default: the two-tier machine of [`memory::default_nodes`].
    #[param(
        default = memory::default_nodes(),
        sourced = "reference/cost-model.md: local DRAM ~80-100 ns (90), DDR4-3200 x8 204.8 GB/s; CXL-attached DRAM local + 70..90 ns (170), a PCIe Gen5 expander ~32 GB/s (the capacities, 16 and 64 GiB, are a choice)"
    )]
    pub nodes: Vec<NodeConfig>,
    /// Hierarchical memory mode (fast memory = node 0 with a capacity limit, slow memory
    /// behind a link, OS page replacement by the scenario's policy); absent = off.
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hmem: Option<backend::hier::HmemConfig>,
}

impl MachineConfig {
    /// Check the configuration: every number in its declared range ([`crate::limits::check_ranges`]; a
    /// scenario's load has checked them already), then how the fields agree. Returns (dotted
    /// field, problem).
    pub fn validate(&self) -> std::result::Result<(), (String, String)> {
        crate::limits::check_ranges(self, "machine")?;
        let e = |f: &str, m: String| Err((f.to_string(), m));
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
            if let Some(l) = &n.loaded {
                l.validate().map_err(|(f, m)| (format!("machine.nodes[{i}].loaded.{f}"), m))?;
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
        }
        if !matches!(self.page_size, PageSize::Base4K | PageSize::Huge2M | PageSize::Huge1G) {
            return e(
                "machine.page_size",
                format!("`{}`: mappings use \"4KiB\", \"2MiB\" or \"1GiB\" pages", self.page_size.name()),
            );
        }
        if self.page_size == PageSize::Huge1G && self.hmem.is_some() {
            return e(
                "machine.page_size",
                "\"1GiB\" pages need the flat memory backend; the hierarchical mode ([machine.hmem]) \
                 supports \"4KiB\" and \"2MiB\""
                    .into(),
            );
        }
        self.tlb.validate().map_err(|(f, m)| (f.to_string(), m))?;
        self.psc.validate().map_err(|(f, m)| (f.to_string(), m))?;
        if let Some(c) = &self.cache {
            c.validate().map_err(|(f, m)| (f.to_string(), m))?;
        }
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

/// Options of a mapping made by a workload.
#[derive(Clone, Debug)]
pub struct MapOptions {
    /// Name shown in reports (masim region name, `x`, `row_ptr`, ...).
    pub name: String,
    /// Page size; `None` uses the machine's default page size.
    pub page_size: Option<PageSize>,
    /// Bulk-populate the whole mapping at map time: every page present and placed by the
    /// placement policy (as if first touched by `thread`), Accessed/Dirty clear, no
    /// simulated access and no fault charged.
    pub populate: bool,
    /// The thread on whose behalf the mapping is made (decides the node for first touch).
    pub thread: usize,
}

impl MapOptions {
    /// A named mapping with defaults (machine page size, faulted in on first touch).
    pub fn named(name: impl Into<String>) -> Self {
        MapOptions { name: name.into(), page_size: None, populate: false, thread: 0 }
    }
}

/// What a workload may do to the simulated address space.
pub trait AddressSpace {
    /// Map `len` bytes (rounded up to the page size) and return the start address, aligned to
    /// at least 2 MiB (to the page size for 1 GiB pages). Mappings never overlap.
    fn mmap(&mut self, len: u64, opts: MapOptions) -> Result<u64>;
    /// Map `len` bytes at exactly `addr` (both multiples of the page size), for replaying a
    /// recorded address space. Fails if the range overlaps an existing mapping.
    fn mmap_fixed(&mut self, addr: u64, len: u64, opts: MapOptions) -> Result<()>;
    /// Unmap a whole mapping previously returned by `mmap` (its pages are freed and every
    /// core that may cache a translation is invalidated).
    fn munmap(&mut self, addr: u64) -> Result<()>;
    /// Bulk-populate `len` bytes of the mapping that starts at `start` on memory node `node`
    /// (bound there, as `mbind` plus a prefault would place them; no fault cost). Errors when
    /// the node does not exist or lacks room.
    fn populate_on(&mut self, start: u64, _len: u64, node: u8) -> Result<()> {
        Err(SimError::runtime(format!(
            "populating the mapping at {start:#x} on node {node} is not supported by this address space"
        )))
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

/// Counters of page migrations.
#[derive(Clone, Debug, Default)]
pub struct MigrationCounters {
    /// Pages moved (of any size).
    pub moves: u64,
    /// Of them, huge pages (2 MiB or 1 GiB).
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
    /// Bytes copied out of each node (index = node; grows on use).
    pub node_out_bytes: Vec<u64>,
    /// Bytes copied into each node.
    pub node_in_bytes: Vec<u64>,
}

impl MigrationCounters {
    /// Count a copy of `bytes` from node `from` to node `to` (the traffic it puts on both).
    pub fn count_copy(&mut self, from: u8, to: u8, bytes: u64) {
        for (v, n) in [(&mut self.node_out_bytes, from), (&mut self.node_in_bytes, to)] {
            if v.len() <= n as usize {
                v.resize(n as usize + 1, 0);
            }
            v[n as usize] += bytes;
        }
    }
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
    /// Of it, the TLB shootdown's (the flat backend; the hierarchical backend's evictions
    /// do not separate it: zero there).
    pub shootdown_ns: f64,
    /// The batch stopped early because the target node was full.
    pub out_of_room: bool,
}

const MMAP_BASE: u64 = 0x1000_0000_0000; // 16 TiB: room for many 5 TiB heaps below 2^47

/// The OS state of the machine.
pub struct Os {
    /// The memory backend.
    pub(crate) backend: Backend,
    /// Memory nodes.
    pub(crate) mem: Memory,
    /// Mappings by start address.
    pub(crate) vmas: BTreeMap<u64, Vma>,
    /// Mapping history: (time ns, map?, start, len, name).
    pub(crate) mapping_log: Vec<(u64, bool, u64, u64, String)>,
    /// Cores in the address space's CPU mask (those that ran its threads).
    pub(crate) mm_cpumask: Vec<bool>,
    /// Accesses outside any mapping (the run stops with an error on the first one).
    pub(crate) segfaults: u64,
    /// NUMA hint faults armed by a tiering policy (pages protected by its scanner), if any.
    pub(crate) hint: Option<Box<hint::HintFaults>>,
    /// Pages locked by copies under way (their accesses wait for the copy's end).
    pub(crate) locks: migrating::Locks,
    /// Page migrations done.
    pub(crate) migration: MigrationCounters,
    default_page: PageSize,
    next_mmap: u64,
}

/// The backend and what it may use of the rest of the machine, borrowed apart.
fn split<'a>(os: &'a mut Os, hw: &'a mut Hardware) -> (&'a mut Backend, Env<'a>) {
    let Os { backend, mem, vmas, mm_cpumask, segfaults, migration, .. } = os;
    (backend, Env { hw, mem, vmas, mm_cpumask, segfaults, migration })
}

impl Mmu for Os {
    /// The first walk, unless NUMA hint faults are on (every walk goes to the scanner's
    /// check, in [`Mmu::translate_after`]).
    #[inline(always)]
    fn walk_first(&mut self, c: &mut Core, level_ps: u64, addr: u64, write: bool) -> Result<Fill, u64> {
        if self.hint.is_some() || self.locks.may_block(addr, c.clock_ps) {
            return Err(backend::NOT_WALKED);
        }
        self.backend.walk_present(c, level_ps, addr, write)
    }

    fn translate_after(
        &mut self,
        hw: &mut Hardware,
        core: usize,
        addr: u64,
        write: bool,
        spent: u64,
    ) -> Translated {
        let f = {
            let Os { backend, mem, vmas, mm_cpumask, segfaults, migration, .. } = self;
            let mut env = Env { hw: &mut *hw, mem, vmas, mm_cpumask, segfaults, migration };
            backend.translate_after(&mut env, core, addr, write, spent)?
        };
        if let Some(h) = self.hint.as_deref_mut() {
            // A NUMA hint fault when the walk reached a page protected by a scanner.
            let c = &mut hw.cores[core];
            let t = h.on_walk(core, addr, c.clock_ps);
            c.clock_ps = c.clock_ps.saturating_add(t);
            c.c.fault_ps += t;
        }
        if self.locks.may_wait(hw.cores[core].clock_ps) {
            // The page is under migration: the access faults on its migration entry and
            // waits for the copy to end.
            let c = &mut hw.cores[core];
            let t = self.locks.on_walk(addr, c.clock_ps);
            c.clock_ps = c.clock_ps.saturating_add(t);
            c.c.fault_ps += t;
        }
        Ok(f)
    }

    #[inline]
    fn set_dirty(&mut self, core: usize, addr: u64, size: PageSize) {
        self.backend.set_dirty(core, addr, size);
    }

    fn on_hit(&mut self, core: usize, addr: u64) {
        self.backend.on_hit(core, addr);
    }
}

/// The simulated machine with its address space.
pub struct Machine {
    /// Configuration.
    pub(crate) cfg: MachineConfig,
    /// The hardware.
    pub(crate) hw: Hardware,
    /// The OS.
    pub(crate) os: Os,
    /// Exact per-window access counts: read only by scoring.
    truth: GroundTruth,
}

impl Machine {
    /// A machine in its initial state (validate the config first).
    pub fn new(cfg: &MachineConfig) -> Self {
        let lat = cfg.latency_matrix();
        let mut mem = Memory::new(&cfg.nodes, &lat, cfg.cores, cfg.placement);
        mem.swap.refault_ps = ps(cfg.cost.swap_in_ns + tierlab_core::PAGE_SIZE as f64 / cfg.cost.swap_gbps);
        let l1_64k = match &cfg.hmem {
            Some(h) if h.page_size == PageSize::Knc64K => (h.l1_64k_entries, h.l1_64k_ways),
            _ => (0, 0),
        };
        let mut hw = Hardware::new(&HardwareConfig {
            cores: cfg.cores,
            cpu_ghz: cfg.cpu_ghz,
            tlb: &cfg.tlb,
            psc: &cfg.psc,
            l1_64k,
            cache: cfg.cache.as_ref(),
            cost: &cfg.cost,
            core_node: &mem.core_node,
            latency_ns: &lat,
        });
        let backend = Backend::for_config(cfg, &mut hw);
        Machine {
            cfg: cfg.clone(),
            hw,
            os: Os {
                backend,
                mem,
                vmas: BTreeMap::new(),
                mapping_log: Vec::new(),
                mm_cpumask: vec![false; cfg.cores],
                segfaults: 0,
                hint: None,
                locks: migrating::Locks::default(),
                migration: MigrationCounters::default(),
                default_page: cfg.page_size,
                next_mmap: MMAP_BASE,
            },
            truth: GroundTruth::default(),
        }
    }

    /// The hardware, read-only (the driver, tests; agents see the machine only through
    /// [`crate::agents::MachineView`]).
    pub fn hw(&self) -> &Hardware {
        &self.hw
    }

    /// The hardware, for tests that drive a mechanism (a shootdown) by hand.
    pub fn hw_mut(&mut self) -> &mut Hardware {
        &mut self.hw
    }

    /// The configuration the machine was built from.
    pub fn cfg(&self) -> &MachineConfig {
        &self.cfg
    }

    /// Page migrations done so far.
    pub fn migration(&self) -> &MigrationCounters {
        &self.os.migration
    }

    /// Set the cores that run the address space's threads (its CPU mask: they receive its TLB
    /// shootdowns).
    pub fn set_cpumask(&mut self, mask: Vec<bool>) {
        assert_eq!(mask.len(), self.hw.cores.len(), "one entry per core");
        self.os.mm_cpumask = mask;
    }

    /// Simulated time of the furthest core, ns.
    pub fn now_ns(&self) -> u64 {
        self.hw.now_ps() / 1000
    }

    /// Execute one access of `core`, counted in the ground truth. The hot path of the
    /// simulator.
    #[inline(always)]
    pub fn access(&mut self, core: usize, a: Access) -> Result<()> {
        self.access_with::<true, false>(core, a).map(|_| ())
    }

    /// Have the host fetch the ground-truth counter of `addr` (an access soon to come).
    #[inline(always)]
    pub fn prefetch_truth(&self, addr: u64) {
        self.truth.prefetch_dense(tierlab_core::vpn(addr));
    }

    /// [`Machine::access`], counted in the ground truth only when `TRUTH` (a run without
    /// ground truth, `report.ground_truth = false`); returns the core's clock after it, ps.
    #[inline(always)]
    pub fn access_with<const TRUTH: bool, const PLAIN: bool>(
        &mut self,
        core: usize,
        a: Access,
    ) -> Result<u64> {
        self.hw.access::<_, TRUTH, PLAIN>(core, a, &mut self.os, &mut self.truth)
    }

    /// Close the ground-truth window `[start_ns, end_ns)` numbered `index` and return its
    /// exact counts (the driver's scoring is the only caller).
    pub(crate) fn close_window(&mut self, index: u64, start_ns: u64, end_ns: u64) -> WindowTruth {
        self.hw.flush_truth(&mut self.truth);
        let w = self.truth.close(index, start_ns, end_ns);
        self.hw.truth_window_ended(self.truth.is_buffered());
        w
    }

    /// Hand back a window [`Machine::close_window`] returned, once nothing reads it (its
    /// page list is reused by the next window).
    pub(crate) fn recycle_window(&mut self, w: WindowTruth) {
        self.truth.recycle(w);
    }

    /// Accesses ground truth counted so far.
    pub fn ground_truth_accesses(&self) -> u64 {
        self.truth.total_accesses()
    }

    /// Start the memory backend after the workload's setup (the hierarchical backend sizes
    /// its fast memory and builds the replacement policy from `policies`).
    pub fn start_backend(
        &mut self,
        policies: &[replacement::PolicyConfig],
        scenario_file: &str,
        seed: u64,
    ) -> Result<()> {
        if let (Backend::Flat(_), Some(p)) = (&self.os.backend, policies.first()) {
            return Err(SimError::config(
                scenario_file,
                "policies[0].kind",
                format!(
                    "replacement policy `{}` needs the hierarchical memory mode: add [machine.hmem] with fast_memory",
                    p.kind()
                ),
            ));
        }
        let (backend, mut env) = split(&mut self.os, &mut self.hw);
        backend.start(&mut env, policies, scenario_file, seed)
    }

    /// The hierarchical backend, when it runs.
    pub fn hier(&mut self) -> Option<&mut backend::hier::Hier> {
        match &mut self.os.backend {
            Backend::Hier(h) => Some(h),
            _ => None,
        }
    }

    /// The radix page tables (flat backend); `None` for backends without them.
    pub fn page_tables(&self) -> Option<&PageTables> {
        self.os.backend.page_tables_ref()
    }

    /// Mutable [`Machine::page_tables`].
    pub fn page_tables_mut(&mut self) -> Option<&mut PageTables> {
        self.os.backend.page_tables()
    }

    /// The node holding the page of `va` (None: not present).
    pub fn node_of(&self, va: u64) -> Option<u8> {
        self.os.backend.node_of(va)
    }

    /// Time of the backend's next periodic work, ps.
    pub fn backend_next_event_ps(&self) -> u64 {
        self.os.backend.next_event_ps()
    }

    /// Run the backend's periodic work due at `now_ps`.
    pub fn backend_tick(&mut self, now_ps: u64) {
        let (backend, mut env) = split(&mut self.os, &mut self.hw);
        backend.tick(&mut env, now_ps);
    }

    /// Move the present page holding `va` to node `to` (page migration): the node accounting
    /// moves, every core that may cache the translation is shot down (from `core`), and the
    /// copy over the link (page bytes at the slower of the two nodes' bandwidths) is charged
    /// to `core`. Returns the whole cost in ns (copy plus the initiator's shootdown time);
    /// 0 when the page is already there. Errors: page not present, no room on `to`, no such
    /// node.
    pub fn migrate_page(&mut self, va: u64, to: u8, core: usize) -> Result<f64> {
        let m = self.migrate_pages(&[va], to, core)?;
        if m.out_of_room {
            return Err(SimError::runtime(format!("migrate_page: node {to} has no room for {va:#x}")));
        }
        Ok(m.ns)
    }

    /// Move the pages holding each of `vas` to node `to` as one batch (Linux's
    /// `migrate_pages` with a batched TLB flush): each page's copy is charged to `core` as in
    /// [`Machine::migrate_page`], and one shootdown covers the batch (per entry up to the
    /// flush ceiling, else full flushes). Pages already on `to` are skipped. Stops at the
    /// first page that does not fit (`out_of_room`); errors when an address is not present
    /// or `to` does not exist. In the hierarchical backend, moving to node 0 brings pages into
    /// the fast memory and moving elsewhere evicts them.
    pub fn migrate_pages(&mut self, vas: &[u64], to: u8, core: usize) -> Result<Migrated> {
        if to as usize >= self.os.mem.nodes.len() {
            return Err(SimError::runtime(format!("migrate_page: node {to} does not exist")));
        }
        if core >= self.hw.cores.len() {
            return Err(SimError::runtime(format!("migrate_page: core {core} does not exist")));
        }
        let (backend, mut env) = split(&mut self.os, &mut self.hw);
        backend.migrate(&mut env, vas, to, core)
    }

    /// Move the present pages holding `vas` to node `to` **without copying** their data: the
    /// target already holds an identical copy (a shadow page kept by non-exclusive tiering,
    /// or a copy made earlier by a transactional migration). Each page is remapped (node
    /// accounting and page tables) and one shootdown from `core` covers the batch; only the
    /// shootdown is charged. Counted as migrations (`machine.migration.*`) without copy
    /// traffic. Pages already on `to` are skipped; stops when `to` is full. Needs radix page
    /// tables.
    pub fn remap_pages(&mut self, vas: &[u64], to: u8, core: usize) -> Result<Migrated> {
        let mut out = Migrated::default();
        if to as usize >= self.os.mem.nodes.len() {
            return Err(SimError::runtime(format!("remap_pages: node {to} does not exist")));
        }
        if core >= self.hw.cores.len() {
            return Err(SimError::runtime(format!("remap_pages: core {core} does not exist")));
        }
        let Some(pt) = self.os.backend.page_tables() else {
            return Err(SimError::runtime("remap_pages needs the flat memory backend (radix page tables)"));
        };
        let mut entries = Vec::new();
        for &va in vas {
            let from = pt
                .node_of(va)
                .ok_or_else(|| SimError::runtime(format!("remap_pages: {va:#x} is not present")))?;
            if from == to {
                continue;
            }
            let size = pt.page_size_of(va).unwrap_or(PageSize::Base4K);
            if !self.os.mem.transfer(from, to, size.base_pages()) {
                out.out_of_room = true;
                break;
            }
            let base = size.base(va);
            pt.set_node(base, to)?;
            let (tf, tt) =
                (self.os.mem.nodes[from as usize].cfg.tier, self.os.mem.nodes[to as usize].cfg.tier);
            let mc = &mut self.os.migration;
            mc.moves += 1;
            mc.huge_moves += (size >= PageSize::Huge2M) as u64;
            mc.bytes += size.bytes();
            mc.promotions += (tt < tf) as u64;
            mc.demotions += (tt > tf) as u64;
            entries.push(base);
            out.pages += 1;
            out.bytes += size.bytes();
        }
        if entries.is_empty() {
            return Ok(out);
        }
        self.os.migration.shootdowns += 1;
        let before = self.hw.cores[core].clock_ps;
        self.shootdown_entries(core, &entries);
        out.ns = (self.hw.cores[core].clock_ps - before) as f64 / 1000.0;
        out.shootdown_ns = out.ns;
        Ok(out)
    }

    /// Exchange pages pairwise between two nodes in one operation (Nimble's `exchange_pages`,
    /// the Linux folio-exchange RFC): each pair `(a, b)` of present pages of the same size on
    /// different nodes swaps nodes, `a` taking `b`'s and `b` taking `a`'s. Neither node
    /// needs a free page (the data cross through a buffer of the copying core), so an
    /// exchange works on a full fast tier where a demotion and a promotion need a free page
    /// each. Each pair's copy is both pages' bytes at the slower node's bandwidth (the same
    /// bytes as two migrations), and one shootdown from `core` covers the whole batch (a
    /// demotion plus a promotion flush twice). Pairs on the same node or of different sizes
    /// are skipped (their count is not in the result). Counted as two migrations per pair.
    /// Needs radix page tables.
    pub fn exchange_pages(&mut self, pairs: &[(u64, u64)], core: usize) -> Result<Migrated> {
        let mut out = Migrated::default();
        if core >= self.hw.cores.len() {
            return Err(SimError::runtime(format!("exchange_pages: core {core} does not exist")));
        }
        let Some(pt) = self.os.backend.page_tables() else {
            return Err(SimError::runtime(
                "exchange_pages needs the flat memory backend (radix page tables)",
            ));
        };
        let mut entries = Vec::with_capacity(pairs.len() * 2);
        let mut copy_ps = 0u64;
        for &(a, b) in pairs {
            let (Some(na), Some(nb)) = (pt.node_of(a), pt.node_of(b)) else {
                return Err(SimError::runtime(format!("exchange_pages: {a:#x} or {b:#x} is not present")));
            };
            let sa = pt.page_size_of(a).unwrap_or(PageSize::Base4K);
            let sb = pt.page_size_of(b).unwrap_or(PageSize::Base4K);
            if na == nb || sa != sb {
                continue;
            }
            let (ba, bb) = (sa.base(a), sb.base(b));
            pt.set_node(ba, nb)?;
            pt.set_node(bb, na)?;
            let (ca, cb) = (&self.os.mem.nodes[na as usize].cfg, &self.os.mem.nodes[nb as usize].cfg);
            let bytes = sa.bytes();
            // GB/s = bytes per ns; both directions, one after the other.
            copy_ps += 2 * ps(bytes as f64 / ca.bandwidth_gbps.min(cb.bandwidth_gbps));
            let (ta, tb) = (ca.tier, cb.tier);
            let mc = &mut self.os.migration;
            mc.moves += 2;
            mc.huge_moves += 2 * (sa >= PageSize::Huge2M) as u64;
            mc.bytes += 2 * bytes;
            mc.promotions += (tb < ta) as u64 + (ta < tb) as u64;
            mc.demotions += (tb > ta) as u64 + (ta > tb) as u64;
            mc.count_copy(na, nb, bytes);
            mc.count_copy(nb, na, bytes);
            entries.push(ba);
            entries.push(bb);
            out.pages += 2;
            out.bytes += 2 * bytes;
        }
        if entries.is_empty() {
            return Ok(out);
        }
        let before = self.hw.cores[core].clock_ps;
        self.hw.charge(core, copy_ps);
        self.os.migration.copy_ps += copy_ps;
        self.os.migration.shootdowns += 1;
        let copied = self.hw.cores[core].clock_ps;
        self.shootdown_entries(core, &entries);
        out.ns = (self.hw.cores[core].clock_ps - before) as f64 / 1000.0;
        out.shootdown_ns = (self.hw.cores[core].clock_ps - copied) as f64 / 1000.0;
        Ok(out)
    }

    /// Lock each page `(va, from, until)` against accesses from `from` to `until` (a copy
    /// under way with the page unmapped: [`migrating::Locks`]); locks that every core of the
    /// address space has passed are forgotten first.
    pub fn lock_pages(&mut self, locks: &[(u64, Ps, Ps)]) {
        let mm = &self.os.mm_cpumask;
        let oldest = (self.hw.cores.iter().enumerate())
            .filter(|(i, _)| mm[*i])
            .map(|(_, c)| c.clock_ps)
            .min()
            .unwrap_or(0);
        self.os.locks.expire(oldest);
        for &(va, from, until) in locks {
            let size = self.os.backend.page_size_of(va).unwrap_or(PageSize::Base4K);
            self.os.locks.lock(size.base(va), size.bytes(), from.ps(), until.ps());
        }
    }

    /// Accesses that waited for a locked page's copy, and their time.
    pub fn lock_waits(&self) -> (u64, Ps) {
        (self.os.locks.waits, Ps::from_ps(self.os.locks.wait_ps))
    }

    /// Split the 2 MiB page mapping `va` into 4 KiB pages on the same node (THP split:
    /// `split_huge_pmd` + `split_huge_page`): the PMD entry becomes a table of 512 PTEs,
    /// the node's use is unchanged and the huge translation is shot down from `core` (its
    /// time charged there). Returns false when `va` is not mapped by a 2 MiB page. Needs
    /// radix page tables.
    pub fn split_huge_page(&mut self, va: u64, core: usize) -> Result<bool> {
        let Some(pt) = self.os.backend.page_tables() else {
            return Err(SimError::runtime(
                "split_huge_page needs the flat memory backend (radix page tables)",
            ));
        };
        if pt.page_size_of(va) != Some(PageSize::Huge2M) {
            return Ok(false);
        }
        let base = PageSize::Huge2M.base(va);
        let node = pt.node_of(base).expect("present");
        // The memory stays allocated on its node: only the mapping changes.
        pt.unmap_range(base, base + HUGE_SIZE, &mut |_, _| {});
        pt.populate_4k(base, base + HUGE_SIZE, node);
        self.shootdown_entries(core, &[base]);
        Ok(true)
    }

    /// Reclaim the present pages holding `vas` to swap (DAMOS `pageout`, MADV_PAGEOUT): each is
    /// unmapped and freed from its node, written to the swap device at `cost.swap_gbps`
    /// (charged to `core`), and one shootdown covers the batch. A later touch is a major fault
    /// that reads it back ([`memory::Swap::refault`]). Pages not present are skipped. Returns
    /// the pages and bytes reclaimed and the time charged (ns). Needs radix page tables.
    pub fn pageout_pages(&mut self, vas: &[u64], core: usize) -> Result<Migrated> {
        let mut out = Migrated::default();
        if self.os.backend.page_tables_ref().is_none() {
            return Err(SimError::runtime("pageout needs the flat memory backend (radix page tables)"));
        }
        let mut entries = Vec::new();
        for &va in vas {
            let Some(size) = self.os.backend.page_size_of(va) else { continue };
            let base = size.base(va);
            let mut freed: Vec<(u8, u64)> = Vec::new();
            if let Some(pt) = self.os.backend.page_tables() {
                pt.unmap_range(base, base + size.bytes(), &mut |n, p| freed.push((n, p)));
            }
            for (n, p) in freed {
                self.os.mem.free(n, p);
            }
            self.os.mem.swap.pages.insert(base);
            self.os.mem.swap.pageouts += 1;
            entries.push(base);
            out.pages += 1;
            out.bytes += size.bytes();
        }
        if entries.is_empty() {
            return Ok(out);
        }
        let before = self.hw.cores[core].clock_ps;
        self.hw.charge(core, ps(out.bytes as f64 / self.cfg.cost.swap_gbps));
        self.shootdown_entries(core, &entries);
        out.ns = (self.hw.cores[core].clock_ps - before) as f64 / 1000.0;
        Ok(out)
    }

    /// Invalidate the translations of the pages at `vas` (one TLB entry each) with one
    /// shootdown from `initiator` to the other cores of the address space's CPU mask.
    pub fn shootdown_entries(&mut self, initiator: usize, vas: &[u64]) {
        let mm = &self.os.mm_cpumask;
        shootdown(&mut self.hw, Inval::Pages(vas), Initiator::Core { core: initiator, local: true }, |i| {
            mm[i]
        });
    }

    /// Invalidate translations of `[start, end)` on every core that may cache them: the
    /// initiator invalidates locally (per page up to the flush ceiling, else a full flush)
    /// and sends a shootdown to the other cores of the address space's CPU mask.
    pub fn invalidate_range(&mut self, initiator: usize, start: u64, end: u64) {
        let mm = &self.os.mm_cpumask;
        shootdown(
            &mut self.hw,
            Inval::Range(start, end),
            Initiator::Core { core: initiator, local: true },
            |i| mm[i],
        );
    }

    /// Charge `ns` of background work to `core` (its clock advances).
    pub fn charge(&mut self, core: usize, ns: f64) {
        self.hw.charge(core, ps(ns));
    }

    /// Test the Accessed bit at `level` for `va` (no side effect; false without radix page
    /// tables).
    pub fn test_accessed(&self, va: u64, level: Level) -> bool {
        self.page_tables().is_some_and(|pt| pt.test_accessed(va, level))
    }

    /// Test and clear the Accessed bit at `level` for `va`, then flush as told. Clearing
    /// without a flush leaves cached translations in place, so later accesses that hit
    /// the TLB do not set the bit again.
    pub fn clear_accessed(&mut self, va: u64, level: Level, flush: Flush) -> bool {
        let Some(pt) = self.os.backend.page_tables() else { return false };
        let was = pt.test_and_clear_accessed(va, level);
        if let Flush::Shootdown { initiator } = flush {
            let span = level.span();
            let start = va & !(span - 1);
            self.invalidate_range(initiator, start, start + span);
        }
        was
    }

    fn add_vma(&mut self, start: u64, len: u64, opts: &MapOptions) -> Result<()> {
        let page_size = opts.page_size.unwrap_or(self.os.default_page);
        if page_size == PageSize::Huge1G && self.os.backend.name() != "flat" {
            return Err(SimError::runtime(format!(
                "mapping `{}` uses 1 GiB pages (machine.page_size / workload.page_size = \"1GiB\"), \
                 which only the flat memory backend supports, not the `{}` backend",
                opts.name,
                self.os.backend.name()
            )));
        }
        if let Some((_, v)) = self.os.vmas.range(..start + len).next_back() {
            if v.start + v.len > start {
                return Err(SimError::runtime(format!(
                    "mapping `{}` at {start:#x}+{len:#x} overlaps mapping `{}` at {:#x}+{:#x}",
                    opts.name, v.name, v.start, v.len
                )));
            }
        }
        let now = self.hw.cores.get(opts.thread).map(|c| c.clock_ps / 1000).unwrap_or(0);
        let vma = Vma { start, len, name: opts.name.clone(), page_size, mapped_at_ns: now };
        {
            let (backend, mut env) = split(&mut self.os, &mut self.hw);
            backend.map(&mut env, &vma);
        }
        self.os.vmas.insert(start, vma);
        self.os.mapping_log.push((now, true, start, len, opts.name.clone()));
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
            .os
            .vmas
            .get(&start)
            .cloned()
            .ok_or_else(|| SimError::runtime(format!("populate: no mapping at {start:#x}")))?;
        let (backend, mut env) = split(&mut self.os, &mut self.hw);
        backend.populate(&mut env, &vma, start, len, core)
    }

    /// The mapping containing `addr`.
    pub fn vma_of(&self, addr: u64) -> Option<&Vma> {
        match self.os.vmas.range(..=addr).next_back() {
            Some((_, v)) if addr < v.start + v.len => Some(v),
            _ => None,
        }
    }

    /// Resident bytes per node.
    pub fn resident_bytes(&self) -> Vec<u64> {
        self.os.mem.nodes.iter().map(|n| tierlab_core::bytes_of(n.used_pages)).collect()
    }

    /// Sum of a per-core counter.
    pub fn total(&self, f: impl Fn(&CoreCounters) -> u64) -> u64 {
        self.hw.total(f)
    }
}

impl AddressSpace for Machine {
    fn mmap(&mut self, len: u64, opts: MapOptions) -> Result<u64> {
        if len == 0 {
            return Err(SimError::runtime(format!("mmap of `{}` with length 0", opts.name)));
        }
        let psz = opts.page_size.unwrap_or(self.os.default_page).bytes();
        let len = len.div_ceil(psz) * psz;
        // 1 GiB pages: align the start to 1 GiB (as hugetlbfs does); otherwise `next_mmap`
        // is already 2 MiB aligned.
        let start = self.os.next_mmap.div_ceil(psz.max(HUGE_SIZE)) * psz.max(HUGE_SIZE);
        // Keep mappings 2 MiB aligned with a 2 MiB guard gap.
        let next = (start + len).div_ceil(HUGE_SIZE) * HUGE_SIZE + HUGE_SIZE;
        if next >= pagetable::VA_LIMIT {
            return Err(SimError::runtime(format!(
                "address space exhausted mapping `{}` ({len} bytes)",
                opts.name
            )));
        }
        self.add_vma(start, len, &opts)?;
        self.os.next_mmap = next;
        Ok(start)
    }

    fn mmap_fixed(&mut self, addr: u64, len: u64, opts: MapOptions) -> Result<()> {
        let psz = opts.page_size.unwrap_or(self.os.default_page).bytes();
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
        let vma = self
            .os
            .vmas
            .get(&start)
            .cloned()
            .ok_or_else(|| SimError::runtime(format!("populate: no mapping at {start:#x}")))?;
        let (backend, mut env) = split(&mut self.os, &mut self.hw);
        backend.populate_on(&mut env, &vma, start, len, node)
    }

    fn munmap(&mut self, addr: u64) -> Result<()> {
        let v = self
            .os
            .vmas
            .remove(&addr)
            .ok_or_else(|| SimError::runtime(format!("munmap: no mapping starts at {addr:#x}")))?;
        {
            let (backend, mut env) = split(&mut self.os, &mut self.hw);
            backend.unmap(&mut env, &v);
        }
        let now = self.now_ns();
        self.os.mapping_log.push((now, false, v.start, v.len, v.name));
        Ok(())
    }
}

impl StatsSource for Machine {
    fn report_stats(&self, out: &mut Stats) {
        let cores = &self.hw.cores;
        let sum = |f: &dyn Fn(&CoreCounters) -> u64| cores.iter().map(|c| f(&c.c)).sum::<u64>();
        out.set("machine.cores", cores.len());
        out.set("machine.accesses", sum(&|c| c.accesses()));
        out.set("machine.reads", sum(&|c| c.accesses() - c.writes));
        out.set("machine.writes", sum(&|c| c.writes));
        out.set("machine.tlb.l1_hits", sum(&|c| c.l1_tlb_hits));
        out.set("machine.tlb.l2_hits", sum(&|c| c.l2_tlb_hits));
        out.set("machine.tlb.misses", sum(&|c| c.tlb_misses));
        out.set("machine.tlb.local_invalidations", sum(&|c| c.local_invalidations));
        out.set("machine.tlb.local_flushes", sum(&|c| c.local_flushes));
        out.set("machine.tlb.remote_invalidations", sum(&|c| c.remote_invalidations));
        out.set("machine.tlb.shootdowns_sent", sum(&|c| c.shootdowns_sent));
        out.set("machine.walks", sum(&|c| c.walks()));
        out.set("machine.walk_levels", sum(&|c| c.walk_levels()));
        for n in 1..=4 {
            out.set(format!("machine.walk.levels_{n}"), sum(&|c| c.walks_by_levels[n]));
        }
        if cores.iter().any(|c| c.psc.enabled()) {
            let psc = |f: &dyn Fn(&crate::hw::psc::PscCounters) -> u64| {
                cores.iter().map(|c| f(&c.psc.c)).sum::<u64>()
            };
            out.set("machine.psc.hits.pml4", psc(&|p| p.hits[0]));
            out.set("machine.psc.hits.pdpte", psc(&|p| p.hits[1]));
            out.set("machine.psc.hits.pde", psc(&|p| p.hits[2]));
            out.set("machine.psc.misses", psc(&|p| p.misses));
            out.set("machine.psc.flushes", psc(&|p| p.flushes));
            out.set("machine.psc.fault_invalidations", psc(&|p| p.fault_invalidations));
        }
        out.set("machine.page_faults", sum(&|c| c.page_faults));
        out.set("machine.dirty_assists", sum(&|c| c.dirty_assists));
        if self.cfg.cache.is_some() {
            out.set("machine.cache.hits", cores.iter().map(|c| c.cache.hits).sum::<u64>());
            out.set("machine.cache.misses", cores.iter().map(|c| c.cache.misses).sum::<u64>());
            out.set("machine.cache.load_misses", cores.iter().map(|c| c.cache.load_misses).sum::<u64>());
        }
        out.set("machine.time.access_s", sum(&|c| c.access_ps) as f64 / 1e12);
        out.set("machine.time.fault_s", sum(&|c| c.fault_ps) as f64 / 1e12);
        out.set("machine.time.tlb_maintenance_s", sum(&|c| c.tlb_maint_ps) as f64 / 1e12);
        out.set("machine.time.background_s", sum(&|c| c.background_ps) as f64 / 1e12);
        out.set("machine.mappings", self.os.vmas.len());
        let mc = &self.os.migration;
        out.set("machine.migrations", mc.moves);
        out.set("machine.migration.huge_pages", mc.huge_moves);
        out.set("machine.migration.promotions", mc.promotions);
        out.set("machine.migration.demotions", mc.demotions);
        out.set("machine.migration.bytes", mc.bytes);
        out.set("machine.migration.shootdowns", mc.shootdowns);
        out.set("machine.time.migration_copy_s", mc.copy_ps as f64 / 1e12);
        let l = &self.os.locks;
        if l.waits > 0 {
            out.set("machine.migration.lock_waits", l.waits);
            out.set("machine.time.migration_wait_s", l.wait_ps as f64 / 1e12);
        }
        if let Some(h) = &self.os.hint {
            h.report_stats("machine.hint", out);
        }
        let sw = &self.os.mem.swap;
        if sw.pageouts > 0 {
            out.set("machine.swap.pageouts", sw.pageouts);
            out.set("machine.swap.refaults", sw.refaults);
            out.set("machine.swap.pages_out", sw.pages.len());
        }
        for (i, c) in cores.iter().enumerate() {
            let p = format!("machine.core.{i}");
            out.set(format!("{p}.accesses"), c.c.accesses());
            out.set(format!("{p}.tlb_misses"), c.c.tlb_misses);
            out.set(format!("{p}.page_faults"), c.c.page_faults);
            out.set(format!("{p}.remote_invalidations"), c.c.remote_invalidations);
            out.set(format!("{p}.time_s"), c.clock_ps as f64 / 1e12);
            out.set(format!("{p}.node"), self.os.mem.nodes[c.node as usize].cfg.name.as_str());
        }
        for (i, n) in self.os.mem.nodes.iter().enumerate() {
            let p = format!("node.{}", n.cfg.name);
            let acc: u64 = cores.iter().map(|c| c.node_accesses()[i]).sum();
            out.set(format!("{p}.accesses"), acc);
            out.set(format!("{p}.resident_bytes"), tierlab_core::bytes_of(n.used_pages));
            out.set(format!("{p}.capacity_bytes"), tierlab_core::bytes_of(n.capacity_pages));
            out.set(format!("{p}.allocated_bytes"), tierlab_core::bytes_of(n.allocated_pages));
            out.set(format!("{p}.tier"), n.cfg.tier as u64);
        }
        self.os.backend.report_stats(&self.hw, &self.os.mm_cpumask, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(cores: usize) -> Machine {
        let cfg = MachineConfig { cores, ..MachineConfig::default() };
        let mut m = Machine::new(&cfg);
        m.os.mm_cpumask = vec![true; cores];
        m
    }

    #[test]
    fn first_access_faults_then_hits() {
        let mut m = machine(1);
        let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
        m.access(0, Access::read(a)).unwrap();
        m.access(0, Access::read(a + 8)).unwrap();
        let c = &m.hw.cores[0].c;
        assert_eq!(c.page_faults, 1);
        assert_eq!(c.tlb_misses, 1);
        assert_eq!(c.l1_tlb_hits, 1);
        assert_eq!(c.walks(), 2, "one walk that faults, one after");
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

    #[test]
    fn invlpg_cr3_and_shootdowns_empty_the_paging_structure_caches() {
        let mut m = machine(2);
        let a = m.mmap(8 << 20, MapOptions::named("x")).unwrap();
        let far = a + (4 << 20);
        for core in 0..2 {
            m.access(core, Access::read(a)).unwrap();
            m.access(core, Access::read(far)).unwrap();
        }
        assert!(m.hw.cores.iter().all(|c| c.psc.holds(a, Level::Pmd)));
        // INVLPG of `far` on core 0 drops every PSC entry of core 0, including `a`'s.
        m.hw.invalidate_page(0, far);
        assert_eq!(m.hw.cores[0].psc.occupancy(), [0, 0, 0]);
        assert!(m.hw.cores[1].psc.holds(a, Level::Pmd), "core 1 untouched");
        // A shootdown (here: clearing a PTE bit with a flush) reaches core 1's PSCs too.
        m.clear_accessed(far, Level::Pte, Flush::Shootdown { initiator: 0 });
        assert_eq!(m.hw.cores[1].psc.occupancy(), [0, 0, 0]);
        // Refill, then a CR3 write (full flush) on core 1.
        let b = a + 5 * tierlab_core::PAGE_SIZE;
        m.access(1, Access::read(b)).unwrap();
        assert!(m.hw.cores[1].psc.holds(a, Level::Pmd));
        m.hw.flush_tlb(1);
        assert_eq!(m.hw.cores[1].psc.occupancy(), [0, 0, 0]);
        // With the PSC of core 0 warm and the upper bits cleared without a flush, a TLB miss
        // on a present page (b, faulted in by core 1: a fault would drop the PSC entries of
        // its address) in `a`'s 2 MiB sets the PTE bit only; the stats count the one-level
        // walk.
        m.access(0, Access::read(a + tierlab_core::PAGE_SIZE)).unwrap();
        assert!(m.hw.cores[0].psc.holds(a, Level::Pmd));
        for l in Level::ALL {
            m.clear_accessed(b, l, Flush::None);
        }
        m.access(0, Access::read(b)).unwrap();
        assert_eq!(Level::ALL.map(|l| m.test_accessed(b, l)), [false, false, false, true]);
        let mut st = crate::stats::Stats::new();
        m.report_stats(&mut st);
        assert!(st.get("machine.psc.hits.pde").unwrap().as_f64() >= 1.0);
        assert!(st.get("machine.walk.levels_1").unwrap().as_f64() >= 1.0);
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
    /// the TLBs hold, checked after every access. Two geometries: one the general code
    /// handles (2-way L1, 4-way L2), and one of the shape the specialised 4 KiB paths take
    /// (4-way L1 and 8-way L2 with power-of-two sets, as the default geometry).
    #[test]
    fn access_path_matches_naive_tlbs() {
        for (l1_entries, l1_ways, l2_entries, l2_ways, pages) in [(8, 2, 16, 4, 64), (16, 4, 64, 8, 256)] {
            access_path_matches_naive_tlbs_with(l1_entries, l1_ways, l2_entries, l2_ways, pages);
        }
    }

    fn access_path_matches_naive_tlbs_with(
        l1_entries: usize,
        l1_ways: usize,
        l2_entries: usize,
        l2_ways: usize,
        pages: u64,
    ) {
        let tlb = crate::hw::tlb::TlbConfig {
            l1_4k_entries: l1_entries,
            l1_4k_ways: l1_ways,
            l1_2m_entries: 4,
            l1_2m_ways: 2,
            l2_entries,
            l2_ways,
            ..crate::hw::tlb::TlbConfig::default()
        };
        let cfg = MachineConfig { cores: 1, tlb: tlb.clone(), ..MachineConfig::default() };
        let mut m = Machine::new(&cfg);
        m.os.mm_cpumask = vec![true];
        let base = m.mmap(pages << 12, MapOptions::named("x")).unwrap();
        let mut naive = NaiveTlbs {
            l1: vec![Vec::new(); l1_entries / l1_ways],
            l2: vec![Vec::new(); l2_entries / l2_ways],
            l1_ways,
            l2_ways,
            hits1: 0,
            hits2: 0,
            misses: 0,
            assists: 0,
        };
        let mut rng = crate::rng::Rng::new(7);
        for i in 0..200_000u64 {
            // Mostly a small hot set (hits), sometimes any page (L2 hits, misses), runs on
            // one page (the same-page fast path), a third of them stores.
            let page = match rng.below(10) {
                0..=5 => rng.below(6),
                6..=7 => rng.below(pages),
                _ => (base >> 12) % pages,
            };
            let addr = base + page * 4096 + rng.below(4096);
            let write = rng.below(3) == 0;
            let a = if write { Access::write(addr) } else { Access::read(addr) };
            m.access(0, a).unwrap();
            naive.access(addr >> 12, write);
            let c = &m.hw.cores[0].c;
            let got = (c.l1_tlb_hits, c.l2_tlb_hits, c.tlb_misses, c.dirty_assists);
            let want = (naive.hits1, naive.hits2, naive.misses, naive.assists);
            assert_eq!(got, want, "{l1_entries}/{l1_ways}, {l2_entries}/{l2_ways}: after access {i} ({a:?})");
            if write {
                assert!(
                    m.page_tables_mut().unwrap().test_dirty(addr, Level::Pte),
                    "store {i} left the PTE clean"
                );
            }
        }
    }

    #[test]
    fn store_sets_dirty_even_on_tlb_hit() {
        let mut m = machine(1);
        let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
        m.access(0, Access::read(a)).unwrap();
        assert!(!m.page_tables_mut().unwrap().test_dirty(a, Level::Pte));
        m.access(0, Access::write(a)).unwrap();
        assert!(m.page_tables_mut().unwrap().test_dirty(a, Level::Pte));
        assert_eq!(m.hw.cores[0].c.dirty_assists, 1);
    }

    #[test]
    fn shootdown_reaches_other_cores() {
        let mut m = machine(4);
        let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
        for core in 0..4 {
            m.access(core, Access::read(a)).unwrap();
        }
        m.clear_accessed(a, Level::Pte, Flush::Shootdown { initiator: 0 });
        assert_eq!(m.hw.cores[0].c.shootdowns_sent, 1);
        for core in 1..4 {
            assert_eq!(m.hw.cores[core].c.remote_invalidations, 1);
            assert!(!m.hw.cores[core].tlb.caches(a));
        }
    }

    #[test]
    fn access_outside_mappings_is_an_error() {
        let mut m = machine(1);
        let e = m.access(0, Access::read(0x1234)).unwrap_err();
        assert!(e.to_string().contains("outside every mapping"), "{e}");
        // The failed access was executed (a TLB miss and a walk) but completed on no node.
        let c = &m.hw.cores[0].c;
        assert_eq!((c.accesses(), c.tlb_misses), (1, 1));
        assert_eq!(m.hw.cores[0].node_accesses().iter().sum::<u64>(), 0);
    }

    #[test]
    fn accesses_are_counted_once_per_node_and_summed() {
        let mut m = machine(2);
        let a = m.mmap(8 * 4096, MapOptions::named("x")).unwrap();
        for k in 0..8 {
            m.access(k as usize % 2, Access::write(a + k * 4096)).unwrap();
            m.access(k as usize % 2, Access::read(a + k * 4096)).unwrap();
        }
        let c = &m.hw.cores;
        assert_eq!((c[0].c.accesses(), c[1].c.accesses()), (8, 8));
        assert_eq!((c[0].c.writes, c[1].c.writes), (4, 4));
        let mut total = crate::hw::CoreCounters::default();
        total.add_accesses(&c[0].c);
        total.add_accesses(&c[1].c);
        assert_eq!(total.accesses(), 16);
        assert_eq!(m.hw.total(|c| c.accesses()), 16);
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
        assert_eq!(m.page_tables_mut().unwrap().node_of(a), Some(0));
        assert_eq!(m.page_tables_mut().unwrap().node_of(a + 8192), Some(1));
        // Slower tier costs more time per access.
        assert!(m.hw.cores[0].cost_to(1) > m.hw.cores[0].cost_to(0));
    }

    #[test]
    fn huge_page_mapping_faults_once_per_2m() {
        let mut m = machine(1);
        let opts = MapOptions { page_size: Some(PageSize::Huge2M), ..MapOptions::named("h") };
        let a = m.mmap(4 << 20, opts).unwrap();
        for k in 0..1024u64 {
            m.access(0, Access::read(a + k * 4096)).unwrap();
        }
        assert_eq!(m.hw.cores[0].c.page_faults, 2);
        assert_eq!(m.hw.cores[0].c.tlb_misses, 2);
    }

    #[test]
    fn gigantic_pages_fault_migrate_and_free_whole() {
        use tierlab_core::HUGE_1G_SIZE;
        let mut m = machine(1);
        let _small = m.mmap(4096, MapOptions::named("x")).unwrap(); // moves the next start off 1 GiB
        let opts = MapOptions { page_size: Some(PageSize::Huge1G), ..MapOptions::named("g") };
        // 1.5 GiB is rounded up to two 1 GiB pages, the start aligned to 1 GiB.
        let a = m.mmap(3 * HUGE_1G_SIZE / 2, opts).unwrap();
        assert_eq!(a % HUGE_1G_SIZE, 0);
        assert_eq!(m.vma_of(a).unwrap().len, 2 * HUGE_1G_SIZE);
        for k in 0..2048u64 {
            m.access(0, Access::read(a + k * (HUGE_1G_SIZE / 1024))).unwrap();
        }
        assert_eq!(m.hw.cores[0].c.page_faults, 2);
        assert_eq!(m.os.backend.page_size_of(a + 12345), Some(PageSize::Huge1G));
        let pages = PageSize::Huge1G.base_pages();
        assert_eq!(pages, 262_144);
        assert_eq!(m.os.mem.nodes[0].used_pages, 2 * pages);
        // Migrating one address moves the whole 1 GiB page: 262,144 base pages of accounting.
        let r = m.migrate_pages(&[a + HUGE_1G_SIZE + 777], 1, 0).unwrap();
        assert_eq!((r.pages, r.bytes), (1, HUGE_1G_SIZE));
        assert_eq!(m.os.mem.nodes[0].used_pages, pages);
        assert_eq!(m.os.mem.nodes[1].used_pages, pages);
        assert_eq!(m.os.migration.huge_moves, 1);
        assert_eq!(m.page_tables_mut().unwrap().node_of(a + 2 * HUGE_1G_SIZE - 1), Some(1));
        assert_eq!(m.page_tables_mut().unwrap().node_of(a), Some(0));
        m.munmap(a).unwrap();
        assert_eq!((m.os.mem.nodes[0].used_pages, m.os.mem.nodes[1].used_pages), (0, 0));
        // populate and populate_on place whole 1 GiB pages.
        let opts = MapOptions { page_size: Some(PageSize::Huge1G), populate: true, ..MapOptions::named("p") };
        let b = m.mmap(HUGE_1G_SIZE + 4096, opts).unwrap();
        assert_eq!(m.os.mem.nodes[0].used_pages, 2 * pages);
        assert_eq!(m.os.backend.page_size_of(b + HUGE_1G_SIZE + 5), Some(PageSize::Huge1G));
        let opts = MapOptions { page_size: Some(PageSize::Huge1G), ..MapOptions::named("q") };
        let c = m.mmap(10, opts).unwrap();
        m.populate_on(c, 10, 1).unwrap();
        assert_eq!(m.os.mem.nodes[1].used_pages, pages);
        assert_eq!(m.os.backend.page_size_of(c + HUGE_1G_SIZE - 1), Some(PageSize::Huge1G));
    }

    #[test]
    fn validate_checks_the_declared_ranges() {
        MachineConfig::default().validate().unwrap();
        let cfg = MachineConfig { cores: 0, ..MachineConfig::default() };
        assert_eq!(cfg.validate().unwrap_err().0, "machine.cores");
        let mut cfg = MachineConfig::default();
        cfg.nodes[1].latency_ns = 0.0;
        assert_eq!(cfg.validate().unwrap_err().0, "machine.nodes[1].latency_ns");
        let mut cfg = MachineConfig::default();
        cfg.cost.swap_gbps = 0.0;
        assert_eq!(cfg.validate().unwrap_err().0, "machine.cost.swap_gbps");
    }

    #[test]
    fn gigantic_pages_need_the_flat_backend() {
        let mut cfg: MachineConfig =
            toml::from_str("page_size = \"1GiB\"\n[hmem]\nfast_memory = \"64MiB\"").unwrap();
        let e = cfg.validate().unwrap_err();
        assert_eq!(e.0, "machine.page_size", "{e:?}");
        cfg.page_size = PageSize::Base4K;
        cfg.validate().unwrap();
        let mut m = Machine::new(&cfg);
        let opts = MapOptions { page_size: Some(PageSize::Huge1G), ..MapOptions::named("g") };
        let e = m.mmap(1 << 20, opts).unwrap_err();
        assert!(e.to_string().contains("flat memory backend"), "{e}");
    }

    #[test]
    fn pebs_samples_every_rth_event_and_interrupts_when_full() {
        let mut m = machine(1);
        let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
        m.hw.enable_pebs(crate::hw::pebs::PebsHwConfig {
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
        let hw = m.hw.pebs.as_ref().unwrap();
        assert_eq!(hw.cores[0].samples, 100, "N/R records for N events");
        assert_eq!(hw.cores[0].interrupts, 2, "100 records, interrupt every 37");
        assert_eq!(hw.drained.len(), 2);
        assert_eq!(hw.drained[0].records.len(), 37);
        assert_eq!(hw.drained[0].records[0].0, a + 9 * 64, "the 10th load");
        assert_eq!(m.hw.cores[0].c.background_ps, 2 * ps(10_000.0));
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
