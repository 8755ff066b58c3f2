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
//! 3. [`PlacementPolicy::next_event_ns`] / [`PlacementPolicy::on_event`]: periodic work on
//!    simulated time, like telemetry observers (the driver advances every application core to
//!    that time first). Work is charged to the machine's cores ([`Machine::charge`],
//!    [`Machine::migrate_page`]); sampling interrupts are charged by the hardware model to
//!    the sampled cores.
//! 4. [`PlacementPolicy::finish`] runs once at the end of the run.
//! 5. [`PlacementPolicy::report_stats`] publishes the policy's own stats; the common ones
//!    (`placement.run_time_s`, pages per node, local-access fraction, overhead) are added by
//!    [`report`].
//!
//! A policy that needs a profiling run first (profile-guided `next-run`) runs it inside its
//! `build` through [`crate::sim::Simulation::run_with_placement`] and keeps the plan that run
//! produced ([`PlacementPolicy::take_plan`]). Policies are deterministic.
//!
//! # Registry
//! One file per policy, one line in [`registry!`] below: kind name, enum variant, parameter
//! type (deserialized with unknown fields rejected). A scenario names its policy as
//! `[placement]` with `kind = "first-touch" | "interleave" | "profile-guided"`; without it
//! the machine's `machine.placement` rule applies.

use serde::{Deserialize, Serialize};

use crate::error::{Result, SimError};
use crate::machine::Machine;
use crate::scenario::Scenario;
use crate::stats::Stats;
use crate::workload::BuildCtx;

pub mod first_touch;
pub mod interleave;
pub mod profile_guided;
pub mod sampling;

/// A plan: sorted, disjoint `(start, end, node)` byte ranges of preferred nodes.
pub type Plan = Vec<(u64, u64, u8)>;

/// What every policy gets at build time.
pub struct PlacementBuildCtx<'a> {
    /// The scenario being run (a `next-run` policy runs its profiling run from it).
    pub scenario: &'a Scenario,
    /// The workload's build context (seed, scenario file, ...).
    pub workload: &'a BuildCtx,
    /// Application threads (cores `0..threads` run the workload).
    pub threads: usize,
}

impl PlacementBuildCtx<'_> {
    /// A located configuration error on `placement.<field>`.
    pub fn err(&self, field: &str, msg: impl Into<String>) -> SimError {
        SimError::config(&self.workload.scenario_file, format!("placement.{field}"), msg)
    }
    /// The core that runs a policy's own work by default: the first core without an
    /// application thread, else core 0 (as for telemetry).
    pub fn default_core(&self) -> usize {
        if self.threads < self.scenario.machine.cores {
            self.threads
        } else {
            0
        }
    }
}

/// A placement policy. See the module docs for the contract.
pub trait PlacementPolicy: Send {
    /// Mode shown in reports (`next-run`, `migrate`, ...; the kind when it has none).
    fn mode(&self) -> String;
    /// Set the allocation rule (and plan) on the fresh machine, before the workload's setup.
    fn prepare(&mut self, m: &mut Machine) -> Result<()>;
    /// Time 0, after the workload's setup.
    fn start(&mut self, _m: &mut Machine) -> Result<()> {
        Ok(())
    }
    /// Simulated time (ns) of the next event; `u64::MAX` for none.
    fn next_event_ns(&self) -> u64 {
        u64::MAX
    }
    /// Run the event due at `now_ns`.
    fn on_event(&mut self, _now_ns: u64, _m: &mut Machine) -> Result<()> {
        Ok(())
    }
    /// End of the run (drain what is buffered).
    fn finish(&mut self, _now_ns: u64, _m: &mut Machine) -> Result<()> {
        Ok(())
    }
    /// Per-core time (ps) the policy took from each core (sampling interrupts, migrations),
    /// for the overhead figures; empty = none.
    fn overhead_ps(&self) -> Vec<u64> {
        Vec::new()
    }
    /// Publish the policy's own stats (under `placement.`).
    fn report_stats(&self, _out: &mut Stats) {}
    /// The plan the run produced (profile-guided `profile`), taken once.
    fn take_plan(&mut self) -> Option<Plan> {
        None
    }
}

/// Parameters of one placement policy kind.
pub trait PlacementParams {
    /// Build the policy (validating parameters: errors name the field).
    fn build(&self, ctx: &PlacementBuildCtx) -> Result<Box<dyn PlacementPolicy>>;
    /// Check the parameters against the scenario without building: (field below
    /// `placement`, problem).
    fn check(&self, _sc: &Scenario) -> std::result::Result<(), (String, String)> {
        Ok(())
    }
}

macro_rules! registry {
    ($( $name:literal => $variant:ident ( $params:ty ) ),* $(,)?) => {
        /// A placement policy's configuration (`[placement]`): `kind` picks the
        /// implementation, the other keys are its parameters.
        #[derive(Clone, Debug, Serialize, Deserialize)]
        #[serde(tag = "kind")]
        pub enum PlacementConfig {
            $( #[serde(rename = $name)] #[allow(missing_docs)] $variant($params), )*
        }
        impl PlacementConfig {
            /// The registered name of this policy's kind.
            pub fn kind(&self) -> &'static str {
                match self { $( Self::$variant(_) => $name, )* }
            }
            /// Build the policy.
            pub fn build(&self, ctx: &PlacementBuildCtx) -> Result<Box<dyn PlacementPolicy>> {
                match self { $( Self::$variant(p) => p.build(ctx), )* }
            }
            /// Check the parameters: (field below `placement`, problem).
            pub fn check(&self, sc: &Scenario) -> std::result::Result<(), (String, String)> {
                if sc.machine.hmem.is_some() {
                    return Err((
                        "kind".into(),
                        "a placement policy cannot run in the hierarchical memory mode ([machine.hmem])".into(),
                    ));
                }
                match self { $( Self::$variant(p) => p.check(sc), )* }
            }
        }
        /// Registered placement kinds.
        pub const KINDS: &[&str] = &[$($name),*];
    };
}

registry! {
    "first-touch" => FirstTouch(first_touch::FirstTouchParams),
    "interleave" => Interleave(interleave::InterleaveParams),
    "profile-guided" => ProfileGuided(profile_guided::ProfileGuidedParams),
}

/// Build the scenario's placement policy, if it names one.
pub fn build(sc: &Scenario, wctx: &BuildCtx, threads: usize) -> Result<Option<Box<dyn PlacementPolicy>>> {
    let Some(cfg) = &sc.placement else { return Ok(None) };
    let ctx = PlacementBuildCtx { scenario: sc, workload: wctx, threads };
    cfg.check(sc).map_err(|(f, m)| ctx.err(&f, m))?;
    cfg.build(&ctx).map(Some)
}

/// Modeled run time of the application (the slowest application core's clock), ps.
pub fn app_time_ps(m: &Machine, threads: usize) -> u64 {
    m.cores[..threads.min(m.cores.len())].iter().map(|c| c.clock_ps).max().unwrap_or(0)
}

/// The common placement stats (under `placement.`) of a run with policy `p`.
pub fn report(kind: &str, p: &dyn PlacementPolicy, m: &Machine, threads: usize, out: &mut Stats) {
    out.set("placement.policy", kind);
    out.set("placement.mode", p.mode().as_str());
    let nodes_with_cores = m.mem.nodes.iter().filter(|n| !n.cfg.cores.is_empty()).count();
    out.set("placement.nodes", nodes_with_cores.max(1));
    let t = app_time_ps(m, threads);
    out.set("placement.run_time_s", t as f64 / 1e12);
    // Overhead: the time the policy took on the critical path, relative to the run without it.
    let over = p.overhead_ps();
    let without = m.cores[..threads.min(m.cores.len())]
        .iter()
        .enumerate()
        .map(|(i, c)| c.clock_ps.saturating_sub(over.get(i).copied().unwrap_or(0)))
        .max()
        .unwrap_or(0);
    let overhead = t.saturating_sub(without);
    out.set("placement.overhead_s", overhead as f64 / 1e12);
    let pct = if without > 0 { 100.0 * overhead as f64 / without as f64 } else { 0.0 };
    out.set("placement.overhead_pct", pct);
    // The profiling overhead: this run's unless the policy profiled in a run of its own.
    out.set("placement.profiling_overhead_pct", pct);
    let (mut local, mut total) = (0u64, 0u64);
    for (i, c) in m.cores[..threads.min(m.cores.len())].iter().enumerate() {
        let home = m.mem.core_node[i] as usize;
        local += c.node_accesses.get(home).copied().unwrap_or(0);
        total += c.node_accesses.iter().sum::<u64>();
    }
    out.set("placement.local_access_fraction", if total > 0 { local as f64 / total as f64 } else { 0.0 });
    for n in &m.mem.nodes {
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
