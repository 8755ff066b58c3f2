//! Telemetry: observers that watch the machine and report which memory is hot.
//!
//! # Contract ([`Observer`])
//! An observer is built from its parameters ([`TelemetryParams::build`]) and runs as an agent
//! ([`TelemetryAgent`], see [`crate::agents`]) on simulated time, in picoseconds:
//! 1. [`Observer::start`] runs once at time 0, after the workload mapped its memory.
//! 2. [`Observer::next_event`] tells when the observer next wants to run (a sampling
//!    interval, a scan step, a drain check); the driver advances every application core to
//!    that time (lockstep, so the observer sees a consistent machine) and calls
//!    [`Observer::on_event`]. Events at equal times run in scenario order.
//! 3. An observer sees the machine only through its mechanism, via
//!    [`crate::agents::MachineView`]: Accessed/Dirty bits (`clear_accessed`,
//!    `test_accessed`, the radix page tables), the mapping list, the PEBS hardware. It never
//!    reads ground truth (the view does not reach it).
//! 4. Work is charged as CPU time with [`AgentCtx::charge`] to the observer's core (a
//!    kernel thread's core: the first core without an application thread, else core 0, or
//!    the `core` parameter); PEBS interrupts are charged by the hardware model to the
//!    sampled cores. Both are reported as the observer's CPU time.
//! 5. It may publish richer feeds ([`Observer::publishes`]: region snapshots, sample
//!    batches) for policies that follow it; at each window end the agent publishes its
//!    [`Observer::hot_set`], which the driver's scorer compares with ground truth.
//!
//! # Registry
//! One file per technique, one line in the [`crate::registry!`] below; its own parameters
//! are a struct declared with `#[params]` (each field's default, range, unit and source;
//! unknown keys refused). The shared ones ([`TelemetryShared`]: `name`, `core`) are
//! flattened in by [`crate::params::With`]. The region-based techniques (DAMON, Telescope)
//! share the region settings too ([`regions::RegionSettings`]), each with its own defaults
//! and their sources ([`crate::params::SharedDefaults`]).

use crate::error::Result;
use crate::params::{Params, SharedDefaults, With};
use crate::stats::Stats;
use tierlab_core::param::params;

pub use super::HotReport;
use super::{Agent, AgentCtx, AgentOutput, Feed, FeedKind, MachineView, Ps, Role};

pub mod damon;
pub mod damos;
pub mod external;
pub mod ibs;
pub mod m5;
pub mod monitor;
pub mod pebs;
pub mod perf_pebs;
pub mod pte_scan;
pub mod regions;
pub mod telescope;
#[cfg(test)]
pub mod toy;

/// What an observer gets when it runs: the agent context (the machine view, the time, its
/// core, its CPU accounting and its feed outbox).
pub type ObserverCtx<'a> = AgentCtx<'a>;

/// A telemetry technique. See the module docs for the contract.
pub trait Observer: Send {
    /// Called once at time 0 after the workload's setup.
    fn start(&mut self, ctx: &mut ObserverCtx) -> Result<()>;
    /// Simulated time of the next event, ps ([`super::NEVER`] for none).
    fn next_event(&self) -> Ps;
    /// Run the event due at `ctx.now`.
    fn on_event(&mut self, ctx: &mut ObserverCtx) -> Result<()>;
    /// The feeds the technique publishes besides its per-window hot set (region snapshots,
    /// sample batches), richest first.
    fn publishes(&self) -> &'static [FeedKind] {
        &[]
    }
    /// The hot set to score for the window `[start, end)` that just closed.
    fn hot_set(&mut self, start: Ps, end: Ps, machine: &MachineView) -> HotReport;
    /// Extra per-window time-series values (e.g. `nr_regions`), as (column suffix, value).
    fn window_columns(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
    /// CPU time charged by the hardware on the observer's behalf (PEBS interrupts).
    fn hw_cpu(&self, _machine: &MachineView) -> Ps {
        Ps::ZERO
    }
    /// Publish technique-specific stats under `prefix` (`telemetry.<name>`, no trailing dot).
    fn report_stats(&self, _prefix: &str, _out: &mut Stats) {}
    /// Called once when the run ends (after the last window): flush what is still buffered.
    fn finish(&mut self, _ctx: &mut ObserverCtx) -> Result<()> {
        Ok(())
    }
    /// Sample-based techniques: every sample taken, as rows of the recording format's
    /// `samples` table (written by `tierlab run --out` as a recording `tierlab view` reads).
    /// Region-based techniques return nothing.
    fn samples(&self) -> Vec<tierlab_core::Sample> {
        Vec::new()
    }
    /// What the technique hands over at the end of the run: its samples in the compact form
    /// (a few bytes each, [`tierlab_core::SampleSet`]). By default made from
    /// [`Observer::samples`]; a technique with many samples builds it from what it keeps, and
    /// may give up its own copy (the run's stats are reported before this is called).
    fn take_sample_set(&mut self) -> tierlab_core::SampleSet {
        tierlab_core::SampleSet::from_rows(self.samples())
    }
    /// Region-based techniques asked to record: every aggregation's snapshot as a damo
    /// record (JSON).
    fn damo_record(&self) -> Option<String> {
        None
    }
}

/// A telemetry technique as an agent: the observer, its label, kind and core.
pub struct TelemetryAgent {
    label: String,
    kind: &'static str,
    core: usize,
    threads: usize,
    obs: Box<dyn Observer>,
    feeds: Vec<FeedKind>,
}

impl TelemetryAgent {
    /// Wrap an observer.
    pub fn new(
        label: String,
        kind: &'static str,
        core: usize,
        threads: usize,
        obs: Box<dyn Observer>,
    ) -> Self {
        let mut feeds = obs.publishes().to_vec();
        feeds.push(FeedKind::HotSet);
        TelemetryAgent { label, kind, core, threads, obs, feeds }
    }
}

impl Agent for TelemetryAgent {
    fn label(&self) -> &str {
        &self.label
    }
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn role(&self) -> Role {
        Role::Telemetry
    }
    fn core(&self) -> usize {
        self.core
    }
    fn publishes(&self) -> &[FeedKind] {
        &self.feeds
    }
    fn start(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        self.obs.start(ctx)
    }
    fn next_event(&self) -> Ps {
        self.obs.next_event()
    }
    fn on_event(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        self.obs.on_event(ctx)
    }
    fn on_window(&mut self, start: Ps, end: Ps, ctx: &mut AgentCtx) -> Result<()> {
        let report = self.obs.hot_set(start, end, &ctx.machine);
        ctx.publish(Feed::HotSet { report: std::sync::Arc::new(report), start, end });
        Ok(())
    }
    fn window_columns(&mut self, info: &super::Info) -> Vec<(String, f64)> {
        let p = format!("telemetry.{}", self.label);
        let cpu = info.cpu + self.obs.hw_cpu(info.view);
        let mut cols = vec![(format!("{p}.cpu_s"), cpu.secs_f64())];
        for (k, v) in self.obs.window_columns() {
            cols.push((format!("{p}.{k}"), v));
        }
        cols
    }
    fn hw_cpu(&self, view: &MachineView) -> Ps {
        self.obs.hw_cpu(view)
    }
    fn finish(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        self.obs.finish(ctx)
    }
    fn report_stats(&self, info: &super::Info, out: &mut Stats) {
        let p = format!("telemetry.{}", self.label);
        out.set(format!("{p}.kind"), self.kind);
        let hw = self.obs.hw_cpu(info.view);
        out.set(format!("{p}.cpu_seconds"), (info.cpu + hw).secs_f64());
        out.set(format!("{p}.core"), self.core);
        // Time taken from the application: hardware interrupts land on application cores;
        // the observer's own work does when its core runs an application thread.
        let app = hw + if self.core < self.threads { info.cpu } else { Ps::ZERO };
        out.set(format!("{p}.app_cpu_seconds"), app.secs_f64());
        self.obs.report_stats(&p, out);
    }
    fn output(&mut self) -> AgentOutput {
        AgentOutput {
            samples: self.obs.take_sample_set(),
            plan: None,
            damo_record: self.obs.damo_record(),
            decisions: Vec::new(),
        }
    }
}

/// The error of loading a small scenario whose one `[[telemetry]]` table is `table` (for the
/// tests of values a declared range refuses).
#[cfg(test)]
pub(crate) fn load_error(table: &str) -> String {
    let text = format!(
        "duration = \"100ms\"\n[workload]\nkind = \"uniform\"\nfootprint = \"16MiB\"\n\
         [[telemetry]]\n{table}\n"
    );
    let src = crate::scenario::Source { text, file: "t.toml".into(), base_dir: ".".into() };
    crate::scenario::load(&src, &[], None).expect_err("the scenario is refused").to_string()
}

/// Build-time context of an observer.
#[derive(Clone, Debug, Default)]
pub struct TelemetryBuildCtx {
    /// Scenario seed.
    pub seed: u64,
    /// Scenario file, for messages.
    pub scenario_file: String,
    /// Index of this observer in the scenario's list (for error fields and RNG streams).
    pub index: usize,
    /// Cores of the machine.
    pub cores: usize,
    /// Application threads (cores `0..threads` run the workload).
    pub threads: usize,
    /// Memory nodes of the machine.
    pub nodes: usize,
}

impl TelemetryBuildCtx {
    /// The default core for an observer's own work: the first core without an
    /// application thread, else core 0.
    pub fn default_core(&self) -> usize {
        if self.threads < self.cores {
            self.threads
        } else {
            0
        }
    }
    /// Validate a `core` parameter.
    pub fn core(&self, core: Option<usize>) -> Result<usize> {
        match core {
            Some(c) if c >= self.cores => Err(crate::SimError::config(
                &self.scenario_file,
                format!("telemetry[{}].core", self.index),
                format!("core {c} does not exist (machine.cores = {})", self.cores),
            )),
            Some(c) => Ok(c),
            None => Ok(self.default_core()),
        }
    }
    /// A config error about field `field` of this observer.
    pub fn err(&self, field: &str, msg: impl Into<String>) -> crate::SimError {
        crate::SimError::config(&self.scenario_file, format!("telemetry[{}].{field}", self.index), msg)
    }
}

/// The parameters every technique has, flattened into each technique's table.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct TelemetryShared {
    /// Label in tables, plots and subscriptions (default: the kind).
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Core charged with the technique's own work (default: the first core without an
    /// application thread, else core 0).
    #[param(default, range = "[0, 4095]", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core: Option<usize>,
}

/// Parameters of one telemetry technique (its own; the shared ones are [`TelemetryShared`]).
pub trait TelemetryParams {
    /// Build the observer labelled `label` (validating parameters).
    fn build(&self, label: &str, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>>;
    /// The feeds the technique publishes besides its per-window hot set.
    fn publishes(&self) -> &'static [FeedKind] {
        &[]
    }
}

/// A technique's whole configuration (shared and own parameters), as the registry sees it.
pub trait Technique {
    /// Build the observer labelled `label`.
    fn build(&self, label: &str, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>>;
    /// The shared parameters.
    fn shared(&self) -> &TelemetryShared;
    /// The feeds it publishes besides its hot set.
    fn publishes(&self) -> &'static [FeedKind];
}

impl<P: TelemetryParams + Params + SharedDefaults<TelemetryShared>> Technique for With<TelemetryShared, P> {
    fn build(&self, label: &str, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
        self.own.build(label, ctx)
    }
    fn shared(&self) -> &TelemetryShared {
        &self.shared
    }
    fn publishes(&self) -> &'static [FeedKind] {
        self.own.publishes()
    }
}

crate::registry! {
    /// A telemetry technique's configuration: `kind` picks the implementation.
    pub enum TelemetryConfig: Technique, shared TelemetryShared {
        "pte-scan" => PteScan(pte_scan::PteScanParams),
        "damon" => Damon(damon::DamonParams),
        "telescope" => Telescope(telescope::TelescopeParams),
        "pebs" => Pebs(pebs::PebsParams),
        "perf-pebs" => PerfPebs(perf_pebs::PerfPebsParams),
        "ibs" => Ibs(ibs::IbsParams),
        "m5" => M5(m5::M5Params),
        "python" => Python(crate::params::External<TelemetryShared>) alone,
        #[cfg(test)] "toy" => Toy(toy::ToyParams),
    }
}

impl TelemetryConfig {
    /// Build the observer.
    pub fn build(&self, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
        self.params().build(&self.label(), ctx)
    }
    /// Label in tables and plots.
    pub fn label(&self) -> String {
        self.params().shared().name.clone().unwrap_or_else(|| self.kind().to_string())
    }
    /// The `core` parameter.
    pub fn core(&self) -> Option<usize> {
        self.params().shared().core
    }
    /// The feeds the technique publishes besides its hot set.
    pub fn publishes(&self) -> &'static [FeedKind] {
        self.params().publishes()
    }
    /// The registered kinds whose techniques publish one of `kinds` (with their defaults).
    pub fn kinds_publishing(kinds: &[FeedKind]) -> Vec<&'static str> {
        Self::kinds()
            .into_iter()
            .filter(|k| {
                toml::from_str::<TelemetryConfig>(&format!("kind = \"{k}\""))
                    .is_ok_and(|c| c.publishes().iter().any(|f| kinds.contains(f)))
            })
            .collect()
    }
    /// Build the technique as an agent.
    pub fn build_agent(&self, ctx: &TelemetryBuildCtx) -> Result<TelemetryAgent> {
        let obs = self.build(ctx)?;
        let core = ctx.core(self.core())?;
        Ok(TelemetryAgent::new(self.label(), self.kind(), core, ctx.threads, obs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierlab_core::param::{expand, FieldSpec, Provenance, Shape};

    /// Every field of `fields` (and of the tables nested in them) is declared with
    /// `#[params]`, each number with a range and a provenance.
    fn check_declared(kind: &str, fields: Vec<&'static FieldSpec>) {
        for f in expand(fields) {
            assert!(!f.rust_type.is_empty(), "telemetry {kind}: `{}` is not declared", f.name);
            let mut shape = (f.shape)();
            while let Shape::Optional(inner) | Shape::List(inner) = shape {
                shape = inner();
            }
            match shape {
                Shape::Table(inner) => check_declared(kind, inner()),
                Shape::Any => panic!("telemetry {kind}: `{}` has no declared shape", f.name),
                s if s.is_numeric() => {
                    assert!(f.range.is_some(), "telemetry {kind}: `{}` has no range", f.name);
                    assert_ne!(f.provenance, Provenance::Unstated, "telemetry {kind}: `{}`", f.name);
                }
                _ => {}
            }
        }
    }

    #[test]
    fn every_kind_declares_its_fields() {
        for k in TelemetryConfig::kinds() {
            check_declared(k, TelemetryConfig::fields_of_kind(k).expect("registered"));
        }
    }
}
