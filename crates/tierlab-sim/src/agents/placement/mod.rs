//! Page placement on a ccNUMA machine: which node a page lives on.
//!
//! # Contract
//! A placement policy is built from its parameters ([`PlacementParams::build`], the
//! scenario's `[placement]` table) and driven by the simulation on simulated time:
//! 1. [`PlacementPolicy::prepare`] runs on the fresh machine *before* the workload maps its
//!    memory: it sets the rule new pages follow ([`crate::machine::memory::Placement`]) and
//!    may install a plan of preferred nodes by address ([`crate::machine::memory::Memory::preferred`],
//!    consulted at every page fault and bulk populate).
//! 2. [`PlacementPolicy::start`] runs at time 0 after the workload's setup (and after the
//!    telemetry observers started): a profiling policy turns its sampling hardware on here.
//! 3. [`PlacementPolicy::next_event`] (ps) / [`PlacementPolicy::on_event`]: periodic work on
//!    simulated time, like telemetry observers (the driver advances every application core to
//!    that time first). Work is charged to the machine's cores ([`Machine::charge`],
//!    [`Machine::migrate_page`]); sampling interrupts are charged by the hardware model to
//!    the sampled cores.
//! 4. [`PlacementPolicy::finish`] runs once at the end of the run.
//! 5. [`PlacementPolicy::report_stats`] publishes the policy's own stats; the common ones
//!    (`placement.run_time_s`, pages per node, local-access fraction, overhead) are added by
//!    [`report`].
//!
//! A policy that needs a profiling run first (profile-guided `next-run`) asks the driver for
//! a *stage* before the reported run ([`PlacementConfig::stages`]): the driver runs the
//! profiling stage, and the next stage's policy receives its output (the plan and the stats,
//! [`StageInput`]) at build time. Policies are deterministic.
//!
//! # Registry
//! One file per policy, one line in [`registry!`] below: kind name, enum variant, parameter
//! type (a struct declared with `#[params]`: each field's default, range, unit and source;
//! unknown keys refused). The kinds share no field, so the registry has no shared struct. A
//! scenario names its policy as `[placement]` with `kind = "first-touch" | "interleave" |
//! "profile-guided"`; without it the machine's `machine.placement` rule applies.

use crate::error::{Result, SimError};
use crate::stats::Stats;

use super::{Agent, AgentCtx, AgentOutput, Info, MachineView, Ps, Role, NEVER};

pub mod external;
pub mod first_touch;
pub mod interleave;
pub mod profile_guided;

/// A plan: sorted, disjoint `(start, end, node)` byte ranges of preferred nodes.
pub type Plan = Vec<(u64, u64, u8)>;

/// What the previous stage handed over (a profiling run's plan and stats).
#[derive(Clone, Debug, Default)]
pub struct StageInput {
    /// Name of the stage that produced it.
    pub stage: String,
    /// Its placement plan, if its policy made one.
    pub plan: Option<Plan>,
    /// Its stats.
    pub stats: Stats,
}

/// A stage a policy needs before the run it is configured for.
#[derive(Clone, Debug)]
pub struct StageRequest {
    /// Stage name (`profile`).
    pub name: String,
    /// The placement configuration that stage runs (`mode = "profile"`).
    pub placement: PlacementConfig,
    /// Telemetry is dropped in that stage.
    pub without_telemetry: bool,
}

/// What every policy gets at build time.
pub struct PlacementBuildCtx<'a> {
    /// The scenario's seed (every random choice: `Rng::derived(seed, "placement", ...)`).
    pub seed: u64,
    /// Scenario file, for messages.
    pub scenario_file: &'a str,
    /// Cores of the machine.
    pub cores: usize,
    /// Core clock, GHz.
    pub cpu_ghz: f64,
    /// Application threads (cores `0..threads` run the workload).
    pub threads: usize,
    /// The previous stage's output, when the driver ran one for this policy.
    pub input: Option<&'a StageInput>,
}

impl PlacementBuildCtx<'_> {
    /// A located configuration error on `placement.<field>`.
    pub fn err(&self, field: &str, msg: impl Into<String>) -> SimError {
        SimError::config(self.scenario_file, format!("placement.{field}"), msg)
    }
    /// The core that runs a policy's own work by default: the first core without an
    /// application thread, else core 0 (as for telemetry).
    pub fn default_core(&self) -> usize {
        super::default_core(self.cores, self.threads)
    }
}

/// What a parameter check knows of the scenario.
pub struct PlacementCheckCtx {
    /// Cores of the machine.
    pub cores: usize,
    /// The scenario's telemetry includes a PEBS technique (the PMU is taken).
    pub pebs_telemetry: bool,
}

/// A placement policy. See the module docs for the contract.
pub trait PlacementPolicy: Send {
    /// Mode shown in reports (`next-run`, `migrate`, ...; the kind when it has none).
    fn mode(&self) -> String;
    /// Set the allocation rule (and plan) on the fresh machine, before the workload's setup.
    fn prepare(&mut self, ctx: &mut AgentCtx) -> Result<()>;
    /// Time 0, after the workload's setup.
    fn start(&mut self, _ctx: &mut AgentCtx) -> Result<()> {
        Ok(())
    }
    /// Simulated time of the next event ([`NEVER`]: none).
    fn next_event(&self) -> Ps {
        NEVER
    }
    /// Run the event due at `ctx.now`.
    fn on_event(&mut self, _ctx: &mut AgentCtx) -> Result<()> {
        Ok(())
    }
    /// End of the run at `ctx.now`: drain what is buffered.
    fn finish(&mut self, _ctx: &mut AgentCtx) -> Result<()> {
        Ok(())
    }
    /// Per-core time the policy took from each core (sampling interrupts, migrations), for
    /// the overhead figures; empty = none.
    fn overhead(&self) -> Vec<Ps> {
        Vec::new()
    }
    /// Publish the policy's own stats (under `placement.`).
    fn report_stats(&self, _out: &mut Stats) {}
    /// The plan the run produced (profile-guided `profile`), taken once.
    fn take_plan(&mut self) -> Option<Plan> {
        None
    }
    /// The samples a profiling policy took (the recording format's rows, compactly), taken
    /// once.
    fn take_samples(&mut self) -> tierlab_core::SampleSet {
        tierlab_core::SampleSet::new()
    }
}

/// Parameters of one placement policy kind.
pub trait PlacementParams {
    /// Build the policy (validating parameters: errors name the field).
    fn build(&self, ctx: &PlacementBuildCtx) -> Result<Box<dyn PlacementPolicy>>;
    /// Check the parameters without building: (field below `placement`, problem).
    fn check(&self, _ctx: &PlacementCheckCtx) -> std::result::Result<(), (String, String)> {
        Ok(())
    }
    /// A stage the policy needs before the configured run (none by default).
    fn stage(&self) -> Option<StageRequest> {
        None
    }
}

crate::registry! {
    /// A placement policy's configuration (`[placement]`): `kind` picks the implementation,
    /// the other keys are its parameters.
    pub enum PlacementConfig: PlacementParams {
    "first-touch" => FirstTouch(first_touch::FirstTouchParams),
    "interleave" => Interleave(interleave::InterleaveParams),
    "profile-guided" => ProfileGuided(profile_guided::ProfileGuidedParams),
    "python" => Python(crate::params::External<crate::params::Unshared>),
    }
}

impl PlacementConfig {
    /// Build the policy.
    pub fn build(&self, ctx: &PlacementBuildCtx) -> Result<Box<dyn PlacementPolicy>> {
        self.params().build(ctx)
    }
    /// Check the parameters: (field below `placement`, problem).
    pub fn check(&self, ctx: &PlacementCheckCtx) -> std::result::Result<(), (String, String)> {
        self.params().check(ctx)
    }
    /// A stage the policy needs before the configured run.
    pub fn stage(&self) -> Option<StageRequest> {
        self.params().stage()
    }
}

/// A placement policy as an agent.
pub struct PlacementAgent {
    kind: &'static str,
    policy: Box<dyn PlacementPolicy>,
    core: usize,
    threads: usize,
}

impl PlacementAgent {
    /// Build the configured policy.
    pub fn new(cfg: &PlacementConfig, ctx: &PlacementBuildCtx) -> Result<Self> {
        Ok(PlacementAgent {
            kind: cfg.kind(),
            policy: cfg.build(ctx)?,
            core: ctx.default_core(),
            threads: ctx.threads,
        })
    }
}

impl Agent for PlacementAgent {
    fn label(&self) -> &str {
        "placement"
    }
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn role(&self) -> Role {
        Role::Placement
    }
    fn core(&self) -> usize {
        self.core
    }
    fn prepare(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        self.policy.prepare(ctx)
    }
    fn start(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        self.policy.start(ctx)
    }
    fn next_event(&self) -> Ps {
        self.policy.next_event()
    }
    fn on_event(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        self.policy.on_event(ctx)
    }
    fn finish(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        self.policy.finish(ctx)
    }
    fn report_stats(&self, info: &Info, out: &mut Stats) {
        report(self.kind, self.policy.as_ref(), info.view, self.threads, out);
    }
    fn output(&mut self) -> AgentOutput {
        AgentOutput {
            samples: self.policy.take_samples(),
            plan: self.policy.take_plan(),
            damo_record: None,
            decisions: Vec::new(),
        }
    }
}

/// Modeled run time of the application (the slowest application core's clock).
pub fn app_time(m: &MachineView, threads: usize) -> Ps {
    m.app_clock(threads)
}

/// The common placement stats (under `placement.`) of a run with policy `p`.
pub fn report(kind: &str, p: &dyn PlacementPolicy, m: &MachineView, threads: usize, out: &mut Stats) {
    out.set("placement.policy", kind);
    out.set("placement.mode", p.mode().as_str());
    let nodes_with_cores = m.nodes().iter().filter(|n| !n.cfg.cores.is_empty()).count();
    out.set("placement.nodes", nodes_with_cores.max(1));
    let t = app_time(m, threads);
    out.set("placement.run_time_s", t.secs_f64());
    // Overhead: the time the policy took on the critical path, relative to the run without it.
    let over = p.overhead();
    let without = (0..threads.min(m.cores()))
        .map(|i| m.core_clock(i).saturating_sub(over.get(i).copied().unwrap_or(Ps::ZERO)))
        .max()
        .unwrap_or(Ps::ZERO);
    let overhead = t.saturating_sub(without);
    out.set("placement.overhead_s", overhead.secs_f64());
    let pct = if without > Ps::ZERO { 100.0 * overhead.ps() as f64 / without.ps() as f64 } else { 0.0 };
    out.set("placement.overhead_pct", pct);
    // The profiling overhead: this run's unless the policy profiled in a run of its own.
    out.set("placement.profiling_overhead_pct", pct);
    let (mut local, mut total) = (0u64, 0u64);
    for i in 0..threads.min(m.cores()) {
        let home = m.core_node(i) as usize;
        local += m.node_accesses(i).get(home).copied().unwrap_or(0);
        total += m.node_accesses(i).iter().sum::<u64>();
    }
    out.set("placement.local_access_fraction", if total > 0 { local as f64 / total as f64 } else { 0.0 });
    for n in m.nodes() {
        out.set(format!("placement.resident_pages.{}", n.cfg.name), n.used_pages);
    }
    p.report_stats(out);
}

/// Turn per-page affinities (page address, page bytes, node), sorted by address, into a
/// plan of merged ranges.
pub fn plan_of(pages: impl IntoIterator<Item = (u64, u64, u8)>) -> Plan {
    let mut plan: Plan = Vec::new();
    for (va, len, node) in pages {
        match plan.last_mut() {
            Some(last) if last.1 == va && last.2 == node => last.1 = va + len,
            _ => plan.push((va, va + len, node)),
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_merges_adjacent_pages_of_one_node() {
        let p = plan_of([(0, 4096, 1), (4096, 4096, 1), (8192, 4096, 0), (16384, 4096, 0)]);
        assert_eq!(p, vec![(0, 8192, 1), (8192, 12288, 0), (16384, 20480, 0)]);
    }

    #[test]
    fn unknown_kind_and_field_are_errors() {
        assert!(toml::from_str::<PlacementConfig>("kind = \"nearest\"").is_err());
        let e = toml::from_str::<PlacementConfig>("kind = \"interleave\"\nnodes = 2").unwrap_err();
        assert!(e.to_string().contains("nodes"), "{e}");
    }
}
