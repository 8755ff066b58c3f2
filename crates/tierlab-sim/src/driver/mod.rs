//! The driver: runs a scenario's workload on its machine with its agents, window by window,
//! on one clock; stage by stage when the scenario has stages.
//!
//! # One loop
//! Cores advance in lockstep steps of `quantum` simulated time (each core runs until its
//! clock passes the step's end, in core order), so multi-core runs interleave by their
//! clocks deterministically. A step also ends at the earliest agent event; every agent event
//! due by then runs, in time order, ties in list order (telemetry in scenario order, the
//! backend's scanner, placement, tiering). Feeds an agent publishes are delivered to its
//! subscribers right after the publishing hook. At each window end, when every core has
//! passed it, the window is closed: ground truth is cut, every agent's `on_window` runs
//! (telemetry publishes its hot set), the scorer scores the hot sets, and a time-series row
//! and a heatmap row are recorded.
//!
//! A core whose thread waits for another ([`crate::workload::Step::Wait`]: a replayed
//! barrier or lock) stops short of the step's end; when a later core of the same pass made
//! progress, the cores behind run again in core order, so a release reaches its waiters in
//! the step it happens. A thread that waited resumes at the simulated time the workload
//! names ([`crate::workload::Step::Resume`]): its clock moves there (idle). Workloads that
//! never wait run exactly as before: one pass per step.
//!
//! # Stages
//! A scenario may run as stages: `[[stages]]` in the scenario (each with its own overrides
//! and the stage whose output it takes), or stages a policy asks for (profile-guided
//! placement's `next-run` runs a `profile` stage first). A stage's output (its placement
//! plan, its samples, its stats) is the next stage's input; the last stage's results are the
//! run's.
//!
//! # Files
//! - `build.rs`: a stage built from its scenario: the machine, the workload, the agents in
//!   list order, their feed routes ([`Run::build`]);
//! - `run.rs`: a stage's run: the lockstep loop over steps and windows, then the agents
//!   finished and the results and stats assembled;
//! - `access.rs`: the access loop (`drain` and its variants, chosen per run of accesses);
//! - `slots.rs`: the agents in the driver's list: their events, feed routes and deliveries;
//! - `window.rs`: closing a window: scores, the time-series row, the heatmap row;
//! - `results.rs`: what a run produces ([`RunResult`]);
//! - `stages.rs`: the stages of a scenario; `budget.rs`: the host-memory check before a run.

use std::time::Instant;

use crate::error::{Result, SimError};
use crate::os::Machine;
use crate::scenario::{build_ctx, Scenario, Source};
use crate::scoring::optimum::Optimum;
use crate::scoring::Scorer;
use crate::units::Ps;
use crate::workload::{BuildCtx, Workload};

pub mod budget;
pub mod dataset;
pub mod stages;

mod access;
mod build;
mod results;
mod run;
mod slots;
mod window;

pub use results::{MappingInfo, RunResult, StageSummary};
pub use window::{Heatmap, TimeSeries};

use access::Batch;
use results::StageOutcome;
use slots::Slot;
use window::Snapshot;

/// Progress of a run, reported to the caller's callback.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Simulated ns done.
    pub sim_ns: u64,
    /// Simulated ns planned (0 = unknown).
    pub total_ns: u64,
    /// Accesses executed.
    pub accesses: u64,
}

/// What the callback tells the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Go on.
    Continue,
    /// Stop cleanly now, keeping what was done.
    Stop,
}

/// One stage, built and ready to run.
pub struct Run {
    /// The scenario of this stage.
    pub scenario: Scenario,
    /// The machine.
    pub machine: Machine,
    workload: Box<dyn Workload>,
    threads: usize,
    batches: Vec<Batch>,
    /// End of the run ([`Ps::NEVER`]: when the workload finishes).
    end: Ps,
    window: Ps,
    quantum: Ps,
    heatmap: Heatmap,
    timeseries: TimeSeries,
    mappings: Vec<MappingInfo>,
    windows: u64,
    prev: Snapshot,
    agents: Vec<Slot>,
    scorer: Scorer,
    optimum: Option<Optimum>,
    /// The tiering agent's index and its migration audit (with ground truth).
    audit: Option<(usize, crate::scoring::migrations::MigrationAudit)>,
    prev_overhead: u64,
    /// A learning dataset's collector and the agent whose feeds it takes (`tierlab dataset`).
    dataset: Option<(dataset::Collector, Option<usize>)>,
}

/// A prepared simulation: its stages, the first one built.
pub struct Simulation {
    /// The scenario (its last stage's).
    pub scenario: Scenario,
    ctx: BuildCtx,
    stages: Vec<stages::Stage>,
    first: Option<Run>,
}

impl Simulation {
    /// Plan the stages of a scenario, build the first one (machine, workload, agents) and run
    /// its workload's setup.
    pub fn new(
        scenario: Scenario,
        src: &Source,
        replay: Option<std::sync::Arc<crate::workload::replay::ReplayData>>,
    ) -> Result<Self> {
        let mut ctx: BuildCtx = build_ctx(&scenario, src);
        ctx.replay = replay;
        Self::with_ctx(scenario, &ctx)
    }

    /// Build with an explicit workload build context.
    pub fn with_ctx(scenario: Scenario, ctx: &BuildCtx) -> Result<Self> {
        let stages = stages::plan(&scenario, &ctx.scenario_file)?;
        let first = match stages.first() {
            Some(s) if s.input.is_none() => Some(Run::build(s.scenario.clone(), ctx, None)?),
            _ => None,
        };
        Ok(Simulation { scenario, ctx: ctx.clone(), stages, first })
    }

    /// Collect a learning dataset ([`dataset`]) while the run goes: one stage with ground
    /// truth only.
    pub fn with_dataset(mut self, spec: dataset::DatasetSpec) -> Result<Self> {
        let file = self.ctx.scenario_file.clone();
        let run = match (&mut self.first, self.stages.len()) {
            (Some(r), 1) => r,
            _ => {
                return Err(SimError::config(
                    &file,
                    "stages",
                    "a dataset is collected from a scenario of one stage (this one has several)",
                ))
            }
        };
        if !run.counts_truth() {
            return Err(SimError::config(
                &file,
                "report.ground_truth",
                "a dataset's labels need ground truth (true)",
            ));
        }
        run.attach_dataset(spec, &file)?;
        Ok(self)
    }

    /// Run every stage to the end (or until `progress` says stop).
    pub fn run(mut self, progress: &mut dyn FnMut(Progress) -> Control) -> Result<RunResult> {
        let mut done: Vec<(String, StageOutcome)> = Vec::new();
        let n = self.stages.len();
        let wall = Instant::now();
        for (k, stage) in std::mem::take(&mut self.stages).into_iter().enumerate() {
            let run = match (k, self.first.take()) {
                (0, Some(r)) => r,
                _ => {
                    let input = match &stage.input {
                        Some(name) => {
                            let (_, o) = done.iter().find(|(s, _)| s == name).ok_or_else(|| {
                                SimError::runtime(format!(
                                    "stage `{}`: its input stage `{name}` did not run",
                                    stage.name
                                ))
                            })?;
                            let mut i = o.input.clone();
                            i.stage = name.clone();
                            Some(i)
                        }
                        None => None,
                    };
                    Run::build(stage.scenario.clone(), &self.ctx, input.as_ref())?
                }
            };
            let out = run.run(progress)?;
            let stop = (out.result.interrupted || out.result.error.is_some()) && k + 1 < n;
            done.push((stage.name.clone(), out));
            if stop {
                break;
            }
        }
        let (_, last) = done.pop().ok_or_else(|| SimError::runtime("the scenario has no stage to run"))?;
        let mut result = last.result;
        result.wall_seconds = wall.elapsed().as_secs_f64();
        result.stages = done
            .into_iter()
            .map(|(name, o)| StageSummary {
                name,
                stats: o.result.stats,
                plan_ranges: o.result.plan.map_or(0, |p| p.len()),
            })
            .collect();
        Ok(result)
    }
}

/// Convenience: open a spec, build and run without progress reporting.
pub fn run_spec(spec: &str, overrides: &[String], seed: Option<u64>) -> Result<RunResult> {
    let (sc, src) = crate::scenario::open(spec, overrides, seed)?;
    Simulation::new(sc, &src, None)?.run(&mut |_| Control::Continue)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::load;

    fn run(text: &str) -> RunResult {
        let src = Source { text: text.into(), file: "t.toml".into(), base_dir: ".".into() };
        let sc = load(&src, &[], None).unwrap_or_else(|e| panic!("{e}"));
        Simulation::new(sc, &src, None)
            .unwrap_or_else(|e| panic!("{e}"))
            .run(&mut |_| Control::Continue)
            .unwrap()
    }

    const TWO_TIERS: &str = r#"
duration = "200ms"
window = "50ms"
[machine]
cores = 2
[[machine.nodes]]
name = "fast"
capacity = "8MiB"
latency_ns = 90.0
[[machine.nodes]]
name = "slow"
capacity = "1GiB"
latency_ns = 300.0
tier = 1
[workload]
kind = "uniform"
footprint = "32MiB"
"#;

    /// A simulated machine that runs out of memory ends the run like Ctrl-C: what was
    /// simulated until then is in the result, with the error.
    #[test]
    fn out_of_memory_keeps_what_was_simulated() {
        let text = r#"
duration = "2s"
window = "10ms"
[machine]
cores = 1
[[machine.nodes]]
name = "only"
capacity = "16MiB"
latency_ns = 90.0
[workload]
kind = "uniform"
footprint = "64MiB"
"#;
        let r = run(text);
        let e = r.error.as_deref().expect("an error");
        assert!(e.contains("out of memory"), "{e}");
        assert!(!r.interrupted);
        assert!(r.stats.get_u64("machine.accesses") > 0);
        assert_eq!(r.stats.get_u64("machine.page_faults"), 16 << 8);
        let rows = r.timeseries.columns.first().map_or(0, |c| c.len());
        assert!((1..200).contains(&rows), "{rows}");
        assert_eq!(r.heatmap.counts.len(), rows);
    }

    /// A technique and a tiering policy added as one file and one registry line each
    /// (`agents/telemetry/toy.rs`, `agents/tiering/toy.rs`, registered for tests) run in a
    /// scenario: the technique's hot sets reach the policy, which promotes pages.
    /// The toy workload, technique and tiering policy, each added as docs/architecture.md's
    /// "How to add" says (one file and one registry line each: `workload/toy.rs`,
    /// `agents/telemetry/toy.rs`, `agents/tiering/toy.rs`), run together in a scenario; their
    /// declared parameters are validated, listed and defaulted from their one declaration.
    #[test]
    fn toy_workload_technique_and_policy_added_by_the_recipe_run() {
        let base = TWO_TIERS
            .replace("capacity = \"8MiB\"", "capacity = \"64MiB\"")
            .replace("cores = 2", "cores = 2\nplacement = \"interleave\"")
            .replace(
                "kind = \"uniform\"\nfootprint = \"32MiB\"",
                "kind = \"toy\"\nsize = \"32MiB\"\naccesses = 100000000\nthreads = 2",
            );
        let text =
            format!("{base}[[telemetry]]\nkind = \"toy\"\n[tiering]\nkind = \"toy\"\ntelemetry = \"toy\"\n");
        let r = run(&text);
        let s = &r.stats;
        assert!(s.get_u64("workload.toy.accesses") > 100_000, "{:?}", s.get("workload.toy.accesses"));
        assert!(s.get_u64("telemetry.toy.looks") >= 10, "{:?}", s.get("telemetry.toy.looks"));
        assert!(s.get_u64("tiering.toy.promoted") > 0, "the policy promoted pages");
        // The declarations: the shared fields the registry adds, the toy's own, their ranges.
        let f = crate::workload::WorkloadConfig::fields_of_kind("toy").expect("registered");
        let names: Vec<&str> = f.iter().map(|f| f.name).collect();
        assert_eq!(names, ["threads", "page_size", "populate", "size", "line", "accesses"]);
        let line = f.iter().find(|f| f.name == "line").unwrap();
        assert_eq!((line.default_text().as_deref(), line.unit), (Some("64"), "bytes"));
        // A value outside the declared range is refused at load, naming file, line and field.
        let bad = Source {
            text: text.replace("threads = 2", "threads = 2\nline = 0"),
            file: "t.toml".into(),
            base_dir: ".".into(),
        };
        let e = load(&bad, &[], None).unwrap_err().to_string();
        assert!(e.contains("t.toml:") && e.contains("workload.line") && e.contains("[1, 1048576]"), "{e}");
    }

    #[test]
    fn toy_technique_and_policy_run_in_a_scenario() {
        // Interleaved placement: half the pages start on the slow node, with room on the fast.
        let text = format!(
            "{}[[telemetry]]\nkind = \"toy\"\ninterval = \"5ms\"\n[tiering]\nkind = \"toy\"\ntelemetry = \"toy\"\n",
            TWO_TIERS.replace("capacity = \"8MiB\"", "capacity = \"64MiB\"").replace("cores = 2", "cores = 2\nplacement = \"interleave\"")
        );
        let r = run(&text);
        let s = &r.stats;
        assert!(s.get_u64("telemetry.toy.looks") >= 39, "{:?}", s.get("telemetry.toy.looks"));
        assert_eq!(s.get("telemetry.toy.kind").map(|v| format!("{v:?}")), Some("Str(\"toy\")".into()));
        assert!(s.get_u64("tiering.toy.feeds") >= 3, "one hot set per window");
        assert!(s.get_u64("tiering.toy.promoted") > 0, "the policy promoted pages");
        assert!(s.get_u64("machine.migration.promotions") > 0);
        assert!(r.timeseries.column("telemetry.toy.precision").is_some(), "scored like any technique");
        // An unknown field of the toy's tables is an error naming it.
        let src = Source {
            text: format!("{TWO_TIERS}[[telemetry]]\nkind = \"toy\"\nintervl = \"5ms\"\n"),
            file: "t.toml".into(),
            base_dir: ".".into(),
        };
        let e = load(&src, &[], None).unwrap_err().to_string();
        assert!(e.contains("intervl"), "{e}");
    }

    /// Explicit stages: each runs the scenario with its overrides; a stage's plan is the next
    /// one's input; the last stage's results are the run's, the others' are kept.
    #[test]
    fn stages_run_in_order_and_pass_their_output() {
        let text = r#"
duration = "20ms"
window = "10ms"
[machine]
cores = 2
[[machine.nodes]]
name = "n0"
capacity = "1GiB"
latency_ns = 90.0
cores = [0]
[[machine.nodes]]
name = "n1"
capacity = "1GiB"
latency_ns = 90.0
cores = [1]
[workload]
kind = "stream"
array_size = "4MiB"
threads = 2
[placement]
kind = "profile-guided"
mode = "next-run"
period = 50
[[stages]]
name = "profile"
set = ["placement.mode=\"profile\""]
[[stages]]
name = "placed"
input = "profile"
"#;
        let r = run(text);
        assert_eq!(r.stages.len(), 1);
        assert_eq!(r.stages[0].name, "profile");
        assert!(r.stages[0].plan_ranges > 0, "the profile stage made a plan");
        let s = &r.stats;
        assert_eq!(s.get("placement.mode").map(|v| format!("{v:?}")), Some("Str(\"next-run\")".into()));
        assert_eq!(
            s.get_u64("placement.profile.samples"),
            r.stages[0].stats.get_u64("placement.profile.samples"),
            "the run reports the profile stage's samples"
        );
        // The implied stages of next-run give the same numbers as the explicit ones.
        let implied = run(&text[..text.find("[[stages]]").unwrap()]);
        assert_eq!(implied.stats.to_flat_json(), r.stats.to_flat_json());
        // A stage whose input did not run before it is an error naming the field.
        let src = Source {
            text: text.replace("input = \"profile\"", "input = \"later\""),
            file: "t.toml".into(),
            base_dir: ".".into(),
        };
        let sc = load(&src, &[], None).unwrap();
        let e = Simulation::new(sc, &src, None).err().expect("an error").to_string();
        assert!(e.contains("stages[1].input"), "{e}");
    }

    /// Placement and tiering run on the hierarchical backend: moving pages to node 0 brings
    /// them into the fast memory, elsewhere evicts them.
    #[test]
    fn tiering_runs_on_the_hierarchical_backend() {
        let text = r#"
duration = "600ms"
window = "100ms"
[machine]
cores = 2
[[machine.nodes]]
name = "fast"
capacity = "64MiB"
latency_ns = 90.0
[[machine.nodes]]
name = "host"
capacity = "1GiB"
latency_ns = 90.0
[machine.hmem]
fast_memory = "50%"
[[policies]]
kind = "fifo"
[workload]
kind = "uniform"
footprint = "16MiB"
[[telemetry]]
kind = "pebs"
period = 50
[tiering]
kind = "hottest-first"
telemetry = "pebs"
sample_decay = "20ms"
"#;
        let r = run(text);
        let s = &r.stats;
        assert!(s.get_u64("hmem.evictions") > 0);
        assert!(s.get_u64("machine.migration.promotions") + s.get_u64("machine.migration.demotions") > 0);
    }
}
