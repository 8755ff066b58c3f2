//! A stage's run ([`Run::run`]): cores in lockstep steps of the quantum, agent events when
//! due, windows closed as every core passes them, progress reported and a stop honoured;
//! then the agents finish and the results and stats are assembled.

use std::time::Instant;

use super::results::{RunResult, StageOutcome};
use super::slots::Slot;
use super::{Control, Progress, Run};
use crate::agents::placement::StageInput;
use crate::agents::{AgentCtx, Info, MachineView};
use crate::error::{Result, SimError};
use crate::stats::Stats;
use crate::units::Ps;

/// The progress clock is read every 64 steps or every this much simulated time (1 ms),
/// whichever comes first: long steps (a long quantum, few agents) still see a Ctrl-C soon.
const PROGRESS_EVERY: Ps = Ps::from_ns(1_000_000);

impl Run {
    /// Run to the end (or until `progress` says stop).
    pub(super) fn run(mut self, progress: &mut dyn FnMut(Progress) -> Control) -> Result<StageOutcome> {
        let wall = Instant::now();
        let mut last_report = Instant::now();
        let mut window_start = Ps::ZERO;
        let mut interrupted = false;
        let total_ns = if self.end.is_never() { 0 } else { self.end.whole_ns() };
        let mut frontier = Ps::ZERO;
        let mut steps = 0u64;
        let mut error: Option<String> = None;
        let mut checked_at = Ps::ZERO;
        // A simulation error (not a bad input: those are found before the run) ends the run
        // like Ctrl-C: the window so far is closed and everything simulated is reported.
        macro_rules! step {
            ($label:lifetime, $e:expr) => {
                match $e {
                    Ok(v) => v,
                    Err(SimError::Runtime(m)) => {
                        error = Some(m);
                        break $label;
                    }
                    Err(e) => return Err(e),
                }
            };
        }
        'outer: loop {
            let window_end = window_start.saturating_add(self.window).min(self.end);
            while frontier < window_end {
                let next = self.next_event();
                frontier = frontier
                    .saturating_add(self.quantum)
                    .min(window_end)
                    .min(next.max(frontier + Ps::from_ps(1)));
                // A thread that waits for another (a replayed barrier or lock) stops short;
                // when a later core of the same pass made progress (it may have released
                // it), the cores behind the frontier run again, in core order.
                loop {
                    let (mut waited, mut progressed) = (false, false);
                    for t in 0..self.threads {
                        let before = self.machine.hw.cores[t].clock_ps;
                        if before < frontier.ps() {
                            let waits = step!('outer, self.run_core(t, frontier));
                            waited |= waits;
                            progressed |= waited && self.machine.hw.cores[t].clock_ps != before;
                        }
                    }
                    if !(waited && progressed) {
                        break;
                    }
                }
                if next <= frontier {
                    step!('outer, self.fire_agents(frontier));
                }
                if self.all_done() {
                    break;
                }
                steps += 1;
                let due = steps & 63 == 0 || frontier - checked_at >= PROGRESS_EVERY;
                if due {
                    checked_at = frontier;
                }
                if due && last_report.elapsed().as_millis() >= 100 {
                    last_report = Instant::now();
                    let p = Progress {
                        sim_ns: frontier.whole_ns(),
                        total_ns,
                        accesses: self.machine.total(|c| c.accesses()),
                    };
                    if progress(p) == Control::Stop {
                        interrupted = true;
                        break 'outer;
                    }
                }
            }
            if self.all_done() {
                let end = Ps::from_ps(self.machine.hw.now_ps());
                if end > window_start {
                    self.close_window(window_start, end.min(window_end).max(window_start + Ps::from_ps(1)))?;
                }
                break;
            }
            self.close_window(window_start, window_end)?;
            window_start = window_end;
            if window_end >= self.end {
                break;
            }
        }
        if interrupted || error.is_some() {
            // The window under way when the run stopped.
            let window_end = window_start.saturating_add(self.window).min(self.end);
            let one = Ps::from_ps(1);
            let end = Ps::from_ps(self.machine.hw.now_ps())
                .max(window_start + one)
                .min(window_end.max(window_start + one));
            if let Err(e) = self.close_window(window_start, end) {
                error.get_or_insert(e.to_string());
            }
        }
        for t in 0..self.threads {
            let b = &self.batches[t];
            if b.pos < b.buf.len() {
                self.workload.discard(t, &b.buf[b.pos..]);
            }
        }
        let p = Progress {
            sim_ns: frontier.whole_ns(),
            total_ns,
            accesses: self.machine.total(|c| c.accesses()),
        };
        progress(p);
        let end = Ps::from_ps(self.machine.hw.now_ps());
        let mut samples = Vec::new();
        let mut plan = None;
        let mut damo_records = Vec::new();
        let mut decisions = Vec::new();
        for i in 0..self.agents.len() {
            let mut out = Vec::new();
            let Slot { agent, cpu, wants, .. } = &mut self.agents[i];
            let core = agent.core();
            let mut ctx = AgentCtx::new(end, MachineView::new(&mut self.machine), core, cpu, &mut out, wants);
            match agent.finish(&mut ctx) {
                Ok(()) => {}
                // After an error the agents finish on what there is; a second error is
                // secondary to the first.
                Err(SimError::Runtime(m)) if error.is_some() => drop(m),
                Err(SimError::Runtime(m)) => error = Some(m),
                Err(e) => return Err(e),
            }
            let o = agent.output();
            if !o.samples.is_empty() {
                samples.push((agent.label().to_string(), o.samples));
            }
            if o.plan.is_some() {
                plan = o.plan;
            }
            decisions.extend(o.decisions);
            if let Some(r) = o.damo_record {
                damo_records.push((agent.label().to_string(), r));
            }
        }
        let wall_seconds = wall.elapsed().as_secs_f64();
        let mut stats = Stats::new();
        stats.collect(&self.machine);
        self.workload.report_stats(&mut stats);
        let threads = self.threads;
        {
            let view = MachineView::new(&mut self.machine);
            for s in &self.agents {
                s.agent.report_stats(&Info { view: &view, cpu: s.cpu, threads }, &mut stats);
            }
        }
        let sim_s = self.machine.hw.now_ps() as f64 / 1e12;
        stats.set("run.simulated_seconds", sim_s);
        stats.set("run.windows", self.windows);
        stats.set("run.seed", self.scenario.seed);
        stats.set("run.scenario", self.scenario.name.as_str());
        stats.set("run.interrupted", interrupted as u64);
        stats.set("run.threads", self.threads);
        if self.counts_truth() {
            stats.set("run.ground_truth_accesses", self.machine.ground_truth_accesses());
        }
        self.scorer.report_stats(&mut stats);
        if let Some((_, a)) = &self.audit {
            a.report_stats(&mut stats);
        }
        let app_s =
            (0..self.threads).map(|t| self.machine.hw.cores[t].clock_ps).max().unwrap_or(0) as f64 / 1e12;
        stats.set("run.app_seconds", app_s);
        if let Some(o) = &self.optimum {
            o.report_stats(app_s, self.threads, &mut stats);
        }
        if let Some((c, _)) = self.dataset.take() {
            let meta = serde_json::json!({
                "scenario": self.scenario.name,
                "seed": self.scenario.seed,
                "window_s": self.window.secs_f64(),
                "interrupted": interrupted,
            });
            c.finish(meta)?;
        }
        let input = StageInput { stage: String::new(), plan: plan.clone(), stats: stats.clone() };
        let result = RunResult {
            scenario: self.scenario.clone(),
            stats,
            timeseries: self.timeseries,
            heatmap: self.heatmap,
            mappings: self.mappings,
            interrupted,
            error,
            wall_seconds,
            mapping_log: self.machine.os.mapping_log.clone(),
            samples,
            plan,
            damo_records,
            decisions,
            stages: Vec::new(),
            core_nodes: self.machine.os.mem.core_node.clone(),
        };
        Ok(StageOutcome { result, input })
    }
}
