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
//! [`crate::os::Machine`] itself. Only the driver's scoring reads ground truth.
//!
//! # Kinds
//! Each pluggable kind keeps its own contract and registry (`telemetry`, `placement`,
//! `tiering`; replacement policies live in the OS layer, `crate::os::replacement`) and is
//! adapted to [`Agent`] by its module: adding an implementation is one file and one registry
//! line ([`crate::registry!`]).

use std::sync::Arc;

use crate::error::Result;
use crate::stats::Stats;

pub mod loaded;
pub mod placement;
pub mod scanner;
pub mod telemetry;
pub mod tiering;
mod view;

pub use crate::units::Ps;
pub use view::{push_run, AccessScan, MachineView};

/// "No event".
pub const NEVER: Ps = Ps::NEVER;

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
    /// Time of the snapshot.
    pub time: Ps,
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
    /// The hot set reported for the window `[start, end)`.
    HotSet {
        /// The report.
        report: Arc<HotReport>,
        /// Window start.
        start: Ps,
        /// Window end.
        end: Ps,
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

/// One promotion or demotion a tiering policy asked for (its decision log): the pages it
/// named, in order, and how many of them moved (the first `moved`; the others did not fit
/// the rate limit's budget or the target node's room).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveRecord {
    /// When.
    pub time: Ps,
    /// Promotion (to the fast node) or demotion (to the slow node).
    pub promote: bool,
    /// The target node.
    pub node: u8,
    /// The pages named (addresses).
    pub pages: Vec<u64>,
    /// How many of them (from the first) moved.
    pub moved: u64,
}

/// What an agent hands over at the end of a run (a stage's output).
#[derive(Default)]
pub struct AgentOutput {
    /// A tiering policy's decision log.
    pub decisions: Vec<MoveRecord>,
    /// Samples taken (the rows of the recording format's `samples` table, compactly).
    pub samples: tierlab_core::SampleSet,
    /// A placement plan: sorted, disjoint `(start, end, node)` byte ranges.
    pub plan: Option<Vec<(u64, u64, u8)>>,
    /// A damo record of region snapshots (JSON), when the technique kept one.
    pub damo_record: Option<String>,
}

/// What an agent gets when one of its hooks runs: the time, the machine, its core and CPU
/// accounting, its feed outbox, and `kind`, what its kind adds (a tiering policy's tiers and
/// migrations, [`tiering::Tiering`]; nothing for the others). Every kind of agent gets this
/// one shape.
pub struct AgentCtx<'a, K = ()> {
    /// Current simulated time.
    pub now: Ps,
    /// The machine.
    pub machine: MachineView<'a>,
    /// The core the agent's own work is charged to.
    pub core: usize,
    /// CPU time charged so far by this agent, maintained by [`AgentCtx::charge`].
    pub cpu: &'a mut Ps,
    /// What the agent's kind adds.
    pub kind: K,
    out: &'a mut Vec<Feed>,
    wants: &'a [FeedKind],
}

impl<'a> AgentCtx<'a> {
    /// A context (the driver makes them).
    pub(crate) fn new(
        now: Ps,
        machine: MachineView<'a>,
        core: usize,
        cpu: &'a mut Ps,
        out: &'a mut Vec<Feed>,
        wants: &'a [FeedKind],
    ) -> Self {
        AgentCtx { now, machine, core, cpu, kind: (), out, wants }
    }
}

impl<K> AgentCtx<'_, K> {
    /// The same context with `kind` added, for a hook of a kind's own contract.
    pub fn with_kind<K2>(&mut self, kind: K2) -> AgentCtx<'_, K2> {
        AgentCtx {
            now: self.now,
            machine: self.machine.reborrow(),
            core: self.core,
            cpu: &mut *self.cpu,
            kind,
            out: &mut *self.out,
            wants: self.wants,
        }
    }

    /// Charge `t` of the agent's own work to its core. The work starts no earlier than now
    /// on that core (a core outside the application idles until then).
    pub fn charge(&mut self, t: Ps) {
        *self.cpu += t;
        self.machine.start_work(self.core, self.now);
        self.machine.charge(self.core, t);
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
    /// CPU time the agent charged to its core so far.
    pub cpu: Ps,
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
    /// The window `[start, end)` just closed.
    fn on_window(&mut self, _start: Ps, _end: Ps, _ctx: &mut AgentCtx) -> Result<()> {
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
    /// A tiering agent's decision log so far (the driver's migration audit reads the new
    /// records at each window end: [`crate::scoring::migrations`]).
    fn decisions(&self) -> &[MoveRecord] {
        &[]
    }
    /// Time the hardware spent on the agent's behalf on application cores (PEBS
    /// interrupts).
    fn hw_cpu(&self, _view: &MachineView) -> Ps {
        Ps::ZERO
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

    /// A context at `now` for an agent on `core` (published feeds are kept and dropped).
    pub fn ctx<'a>(m: &'a mut crate::os::Machine, now: Ps, core: usize, cpu: &'a mut Ps) -> AgentCtx<'a> {
        let out = Box::leak(Box::new(Vec::new()));
        AgentCtx::new(now, MachineView::new(m), core, cpu, out, ALL)
    }
}
