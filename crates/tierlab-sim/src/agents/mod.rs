//! Agents: everything that acts over simulated time. Telemetry observers, the memory
//! backend's replacement scanner, placement policies and tiering policies all implement one
//! lifecycle, [`Agent`], on one clock (picoseconds), and the driver runs them as one list.
//!
//! # The lifecycle ([`Agent`])
//! 1. [`Agent::prepare`] on the fresh machine, before the workload maps its memory (a
//!    placement policy sets the allocation rule here);
//! 2. [`Agent::start`] at time 0, after the workload's setup, in list order;
//! 3. [`Agent::next_event`] / [`Agent::on_event`]: periodic work. The driver advances every
//!    application core to the event's time first (so the agent sees a consistent machine),
//!    then runs the due events in time order, ties in list order. An event must move
//!    `next_event` past its own time;
//! 4. [`Agent::on_feed`]: a feed the agent subscribed to was published (see below);
//! 5. [`Agent::on_window`] at each window end (telemetry publishes its hot set here);
//!    [`Agent::window_columns`] adds per-window time-series values;
//! 6. [`Agent::finish`] once at the end; [`Agent::report_stats`], [`Agent::output`].
//!
//! # Feeds
//! Agents talk through typed feeds ([`Feed`]): region snapshots, sample batches, hot sets.
//! An agent declares what it publishes ([`Agent::publishes`]) and what it follows
//! ([`Agent::subscription`]: the label of a source agent and the feed kinds it accepts, in
//! order of preference). The driver routes each subscriber to the first accepted kind its
//! source publishes, and delivers a published feed to its subscribers right after the
//! publishing hook returns. A policy never sees the concrete type of a telemetry technique.
//!
//! # What an agent sees
//! The machine through [`MachineView`]: hardware (cores, clocks, TLBs, the PMU), the OS
//! (mappings, page tables and their bits, memory nodes, migration, shootdowns, hint faults).
//! It cannot reach the ground truth: the view does not expose it, and agents never hold the
//! [`Machine`] itself. Only the driver's scoring reads ground truth.
//!
//! # Kinds
//! Each pluggable kind keeps its own contract and registry (`telemetry`, `placement`,
//! `tiering`; replacement policies live in the OS layer, `crate::os::replacement`) and is
//! adapted to [`Agent`] by its module: adding an implementation is one file and one registry
//! line ([`crate::registry!`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::Result;
use crate::hw::cost::ps;
use crate::hw::pagetable::{Level, PageTables};
use crate::hw::Hardware;
use crate::os::backend::MemoryBackend;
use crate::os::hint::HintFaults;
use crate::os::memory::{Node, Placement};
use crate::os::{Flush, Machine, Migrated, MigrationCounters, Vma};
use crate::stats::Stats;

pub mod loaded;
pub mod placement;
pub mod scanner;
pub mod telemetry;
pub mod tiering;

/// Simulated time in picoseconds: the one time unit of every agent hook.
pub type Ps = u64;

/// "No event".
pub const NEVER: Ps = u64::MAX;

/// Nanoseconds as [`Ps`] (saturating).
#[inline]
pub fn ns_to_ps(ns: u64) -> Ps {
    ns.saturating_mul(1000)
}

/// What an agent is, for the driver's reports (stats prefixes, overhead accounting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A telemetry technique (scored against ground truth).
    Telemetry,
    /// The memory backend's periodic OS work (a replacement policy's scanner).
    Os,
    /// A placement policy.
    Placement,
    /// A tiering policy.
    Tiering,
    /// Anything else (a user's own agent).
    Other,
}

/// Kinds of feed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FeedKind {
    /// Region snapshots with per-region access counts (DAMON, Telescope).
    Regions,
    /// Batches of sampled addresses (PEBS drains).
    Samples,
    /// The hot set a technique reports for a window (every telemetry technique).
    HotSet,
}

impl FeedKind {
    /// Name in messages.
    pub fn name(self) -> &'static str {
        match self {
            FeedKind::Regions => "region snapshots",
            FeedKind::Samples => "sample batches",
            FeedKind::HotSet => "hot sets",
        }
    }
}

/// One region of a region snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapRegion {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Samples that found the region accessed in the aggregation interval.
    pub nr_accesses: u32,
    /// Aggregations the region kept its access level.
    pub age: u32,
}

/// A region snapshot: the regions at the end of an aggregation interval.
#[derive(Clone, Debug, PartialEq)]
pub struct RegionSnapshot {
    /// The regions in address order.
    pub regions: Vec<SnapRegion>,
    /// Samples per aggregation interval (the largest possible `nr_accesses`).
    pub max_nr_accesses: u32,
    /// The technique's own hot threshold (`nr_accesses > hot_threshold` is reported hot).
    pub hot_threshold: u32,
    /// Time of the snapshot, ns.
    pub time_ns: u64,
}

/// A batch of sampled records handed over by one interrupt (or a final flush).
pub use crate::hw::pebs::Drain;

/// What a technique reports hot for a window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HotReport {
    /// Byte ranges `[start, end)`, sorted and disjoint (region-based techniques).
    Regions(Vec<(u64, u64)>),
    /// 4 KiB page numbers, sorted and unique (sample-based techniques).
    Pages(Vec<u64>),
}

impl HotReport {
    /// Bytes reported.
    pub fn bytes(&self) -> u64 {
        match self {
            HotReport::Regions(r) => r.iter().map(|(s, e)| e - s).sum(),
            HotReport::Pages(p) => tierlab_core::bytes_of(p.len() as u64),
        }
    }
}

/// A published feed.
#[derive(Clone, Debug)]
pub enum Feed {
    /// A region snapshot.
    Regions(Arc<RegionSnapshot>),
    /// New sample drains, in drain order.
    Samples(Arc<Vec<Drain>>),
    /// The hot set reported for the window `[start_ns, end_ns)`.
    HotSet {
        /// The report.
        report: Arc<HotReport>,
        /// Window start, ns.
        start_ns: u64,
        /// Window end, ns.
        end_ns: u64,
    },
}

impl Feed {
    /// Its kind.
    pub fn kind(&self) -> FeedKind {
        match self {
            Feed::Regions(_) => FeedKind::Regions,
            Feed::Samples(_) => FeedKind::Samples,
            Feed::HotSet { .. } => FeedKind::HotSet,
        }
    }
}

/// What an agent follows: the label of the source agent and the feed kinds it accepts, in
/// order of preference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// Label of the source agent.
    pub source: String,
    /// Accepted kinds, preferred first.
    pub accepts: Vec<FeedKind>,
    /// Where the subscription was configured, for messages (`tiering.telemetry`).
    pub field: String,
}

/// What an agent hands over at the end of a run (a stage's output).
#[derive(Default)]
pub struct AgentOutput {
    /// Samples taken, as rows of the recording format's `samples` table.
    pub samples: Vec<tierlab_core::Sample>,
    /// A placement plan: sorted, disjoint `(start, end, node)` byte ranges.
    pub plan: Option<Vec<(u64, u64, u8)>>,
    /// A damo record of region snapshots (JSON), when the technique kept one.
    pub damo_record: Option<String>,
}

/// The machine as agents see it: hardware and OS, never the ground truth.
pub struct MachineView<'a> {
    m: &'a mut Machine,
}

impl<'a> MachineView<'a> {
    /// A view of `m` (the driver and tests make views; agents only receive them).
    pub fn new(m: &'a mut Machine) -> Self {
        MachineView { m }
    }

    /// The hardware: cores, clocks, TLBs, the PMU.
    pub fn hw(&self) -> &Hardware {
        &self.m.hw
    }
    /// Mutable [`MachineView::hw`].
    pub fn hw_mut(&mut self) -> &mut Hardware {
        &mut self.m.hw
    }
    /// Number of cores.
    pub fn cores(&self) -> usize {
        self.m.hw.cores.len()
    }
    /// Core clock, GHz.
    pub fn cpu_ghz(&self) -> f64 {
        self.m.hw.cpu_ghz
    }
    /// Whether `core` runs the address space's threads (is in its CPU mask).
    pub fn in_cpumask(&self, core: usize) -> bool {
        self.m.os.mm_cpumask[core]
    }
    /// The address space's CPU mask.
    pub fn mm_cpumask(&self) -> &[bool] {
        &self.m.os.mm_cpumask
    }
    /// Whether the machine models data caches (`[machine.cache]`).
    pub fn has_cache(&self) -> bool {
        self.m.cfg.cache.is_some()
    }
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
    /// Invalidate the translations of `[start, end)` with a shootdown from `initiator`.
    pub fn invalidate_range(&mut self, initiator: usize, start: u64, end: u64) {
        self.m.invalidate_range(initiator, start, end)
    }
    /// Move pages to node `to` as one batch from `core` ([`Machine::migrate_pages`]).
    pub fn migrate_pages(&mut self, vas: &[u64], to: u8, core: usize) -> Result<Migrated> {
        self.m.migrate_pages(vas, to, core)
    }
    /// Charge `ns` of background work to `core`.
    pub fn charge(&mut self, core: usize, ns: f64) {
        self.m.charge(core, ns)
    }
    /// NUMA hint faults (armed by a policy's scanner).
    pub fn hint_faults(&mut self) -> &mut Option<Box<HintFaults>> {
        &mut self.m.os.hint
    }
    /// Protect (PROT_NONE-like, for NUMA hint faults) the 4 KiB pages of `[start, end)` for
    /// which `pick(node of the page)` holds, at scan time `now_ns`; hint faults cost
    /// `fault_ns` each (armed on first use). The caller flushes the TLBs of the range.
    /// Returns the pages protected.
    pub fn hint_protect(
        &mut self,
        start: u64,
        end: u64,
        now_ns: u64,
        fault_ns: f64,
        pick: &mut dyn FnMut(Option<u8>) -> bool,
    ) -> u64 {
        let os = &mut self.m.os;
        let backend = &os.backend;
        let h = os.hint.get_or_insert_with(|| Box::new(HintFaults::new(fault_ns)));
        h.protect(start, end, now_ns, &mut |va| pick(backend.node_of(va)))
    }
    /// Time of the memory backend's next periodic work, ps.
    pub fn backend_next_event(&self) -> Ps {
        self.m.backend_next_event_ps()
    }
    /// Run the memory backend's periodic work due at `now`.
    pub fn backend_tick(&mut self, now: Ps) {
        self.m.backend_tick(now)
    }
    /// Resident bytes per node.
    pub fn resident_bytes(&self) -> Vec<u64> {
        self.m.resident_bytes()
    }
    /// Page migrations done so far (the OS's counters).
    pub fn migration(&self) -> &MigrationCounters {
        &self.m.os.migration
    }
    /// Reclaim pages to swap ([`Machine::pageout_pages`]), charged to `core`.
    pub fn pageout_pages(&mut self, vas: &[u64], core: usize) -> Result<Migrated> {
        self.m.pageout_pages(vas, core)
    }
    /// The LRU activity marks (DAMOS `lru_prio` / `lru_deprio`).
    pub fn lru(&self) -> &crate::os::memory::LruMarks {
        &self.m.os.mem.lru
    }
    /// Mark `[start, end)` active or inactive on the LRU lists.
    pub fn lru_mark(&mut self, start: u64, end: u64, active: bool) {
        self.m.os.mem.lru.mark(start, end, active)
    }
    /// The current value of a per-core counter summed over the application's cores (those
    /// in the CPU mask).
    pub fn app_total(&self, f: impl Fn(&crate::hw::CoreCounters) -> u64) -> u64 {
        let mask = &self.m.os.mm_cpumask;
        self.m.hw.cores.iter().enumerate().filter(|(i, _)| mask[*i]).map(|(_, c)| f(&c.c)).sum()
    }
}

/// What an agent gets when one of its hooks runs.
pub struct AgentCtx<'a> {
    /// Current simulated time, ps.
    pub now: Ps,
    /// The machine.
    pub machine: MachineView<'a>,
    /// The core the agent's own work is charged to.
    pub core: usize,
    /// CPU time charged so far by this agent (ps), maintained by [`AgentCtx::charge`].
    pub cpu_ps: &'a mut u64,
    out: &'a mut Vec<Feed>,
    wants: &'a [FeedKind],
}

impl<'a> AgentCtx<'a> {
    /// A context (the driver makes them).
    pub fn new(
        now: Ps,
        machine: MachineView<'a>,
        core: usize,
        cpu_ps: &'a mut u64,
        out: &'a mut Vec<Feed>,
        wants: &'a [FeedKind],
    ) -> Self {
        AgentCtx { now, machine, core, cpu_ps, out, wants }
    }

    /// Current simulated time, ns.
    pub fn now_ns(&self) -> u64 {
        self.now / 1000
    }

    /// Charge `ns` of the agent's own work to its core. The work starts no earlier than now
    /// on that core (a core outside the application idles until then).
    pub fn charge(&mut self, ns: f64) {
        let t = ps(ns);
        *self.cpu_ps += t;
        let core = self.core;
        let now = self.now_ns() * 1000;
        let in_mask = self.machine.in_cpumask(core);
        let hw = self.machine.hw_mut();
        if hw.cores[core].clock_ps < now && !in_mask {
            hw.cores[core].clock_ps = now;
        }
        hw.charge(core, t);
    }

    /// Whether anyone subscribed to this agent's feeds of `kind` (publishing costs a copy).
    pub fn wants(&self, kind: FeedKind) -> bool {
        self.wants.contains(&kind)
    }

    /// Publish a feed (delivered to the subscribers after the current hook returns).
    pub fn publish(&mut self, feed: Feed) {
        if self.wants(feed.kind()) {
            self.out.push(feed);
        }
    }
}

/// What reporting hooks get: the machine, the agent's CPU time, the application's threads.
pub struct Info<'v, 'a> {
    /// The machine.
    pub view: &'v MachineView<'a>,
    /// CPU time the agent charged to its core so far, ps.
    pub cpu_ps: u64,
    /// Application threads (cores `0..threads` run the workload).
    pub threads: usize,
}

/// One agent. See the module docs for the lifecycle.
pub trait Agent: Send {
    /// Label in tables, stats and subscriptions.
    fn label(&self) -> &str;
    /// Registered kind (`damon`, `hemem`, `profile-guided`, ...).
    fn kind(&self) -> &'static str;
    /// What the agent is.
    fn role(&self) -> Role;
    /// The core its own work is charged to.
    fn core(&self) -> usize;
    /// Feed kinds it publishes.
    fn publishes(&self) -> &[FeedKind] {
        &[]
    }
    /// What it follows.
    fn subscription(&self) -> Option<Subscription> {
        None
    }
    /// Before the workload maps its memory.
    fn prepare(&mut self, _ctx: &mut AgentCtx) -> Result<()> {
        Ok(())
    }
    /// Time 0, after the workload's setup.
    fn start(&mut self, _ctx: &mut AgentCtx) -> Result<()> {
        Ok(())
    }
    /// Time of the next event, ps ([`NEVER`]: none).
    fn next_event(&self) -> Ps {
        NEVER
    }
    /// Run the event due at `ctx.now`.
    fn on_event(&mut self, _ctx: &mut AgentCtx) -> Result<()> {
        Ok(())
    }
    /// A feed it subscribed to.
    fn on_feed(&mut self, _feed: &Feed, _ctx: &mut AgentCtx) -> Result<()> {
        Ok(())
    }
    /// The window `[start_ns, end_ns)` just closed.
    fn on_window(&mut self, _start_ns: u64, _end_ns: u64, _ctx: &mut AgentCtx) -> Result<()> {
        Ok(())
    }
    /// Per-window time-series values as (column, value), the same names every window.
    fn window_columns(&mut self, _info: &Info) -> Vec<(String, f64)> {
        Vec::new()
    }
    /// The node a tiering agent fills (the scorer reports its hot bytes per window).
    fn fast_node(&self) -> Option<u8> {
        None
    }
    /// Time the hardware spent on the agent's behalf on application cores (PEBS
    /// interrupts), ps.
    fn hw_cpu_ps(&self, _view: &MachineView) -> u64 {
        0
    }
    /// Once, when the run ends.
    fn finish(&mut self, _ctx: &mut AgentCtx) -> Result<()> {
        Ok(())
    }
    /// Publish its stats (its own prefix: `telemetry.<label>`, `tiering`, `placement`).
    fn report_stats(&self, _info: &Info, _out: &mut Stats) {}
    /// What it hands over at the end (samples, a plan).
    fn output(&mut self) -> AgentOutput {
        AgentOutput::default()
    }
}

/// The default core of an agent's own work: the first core without an application thread,
/// else core 0.
pub fn default_core(cores: usize, threads: usize) -> usize {
    if threads < cores {
        threads
    } else {
        0
    }
}

/// Helpers for tests that drive agents by hand.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// Every feed kind (test contexts publish everything).
    pub const ALL: &[FeedKind] = &[FeedKind::Regions, FeedKind::Samples, FeedKind::HotSet];

    /// A context at `now_ns` for an agent on `core` (published feeds are kept and dropped).
    pub fn ctx<'a>(m: &'a mut Machine, now_ns: u64, core: usize, cpu_ps: &'a mut u64) -> AgentCtx<'a> {
        let out = Box::leak(Box::new(Vec::new()));
        AgentCtx::new(ns_to_ps(now_ns), MachineView::new(m), core, cpu_ps, out, ALL)
    }
}
