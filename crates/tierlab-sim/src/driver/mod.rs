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
//! # Stages
//! A scenario may run as stages: `[[stages]]` in the scenario (each with its own overrides
//! and the stage whose output it takes), or stages a policy asks for (profile-guided
//! placement's `next-run` runs a `profile` stage first). A stage's output (its placement
//! plan, its samples, its stats) is the next stage's input; the last stage's results are the
//! run's.

use std::time::Instant;

/// The progress clock is read every 64 steps or every this much simulated time (1 ms),
/// whichever comes first: long steps (a long quantum, few agents) still see a Ctrl-C soon.
const PROGRESS_EVERY_PS: u64 = 1_000_000_000;

use crate::agents::loaded::LoadedLatencyAgent;
use crate::agents::placement::{PlacementAgent, PlacementBuildCtx, StageInput};
use crate::agents::scanner::ScannerAgent;
use crate::agents::telemetry::TelemetryBuildCtx;
use crate::agents::tiering::{TieringAgent, TieringBuildCtx};
use crate::agents::{Agent, AgentCtx, Feed, FeedKind, Info, MachineView, Ps, Role, NEVER};
use crate::error::{Result, SimError};
use crate::hw::CoreCounters;
use crate::os::backend::Backend;
use crate::os::Machine;
use crate::scenario::{build_ctx, Scenario, Source};
use crate::scoring::optimum::Optimum;
use crate::scoring::{Scorer, TruthRule};
use crate::stats::Stats;
use crate::truth::WindowTruth;
use crate::workload::{Access, BuildCtx, Step, Workload};
use tierlab_core::{page_addr, PAGE_SIZE};

pub mod budget;
pub mod stages;

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

/// Columns of per-window measurements.
#[derive(Clone, Debug, Default)]
pub struct TimeSeries {
    /// Column names in order.
    pub names: Vec<String>,
    /// Column values, one Vec per name.
    pub columns: Vec<Vec<f64>>,
}

impl TimeSeries {
    fn push_row(&mut self, row: Vec<(String, f64)>) {
        if self.names.is_empty() {
            self.names = row.iter().map(|(n, _)| n.clone()).collect();
            self.columns = vec![Vec::new(); self.names.len()];
        }
        for (i, (_, v)) in row.into_iter().enumerate() {
            self.columns[i].push(v);
        }
    }
    /// A column by name.
    pub fn column(&self, name: &str) -> Option<&[f64]> {
        self.names.iter().position(|n| n == name).map(|i| self.columns[i].as_slice())
    }
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.columns.first().map(|c| c.len()).unwrap_or(0)
    }
}

/// Accesses per address bin per window.
#[derive(Clone, Debug, Default)]
pub struct Heatmap {
    /// First address of each bin.
    pub bin_start: Vec<u64>,
    /// Bytes in each bin.
    pub bin_bytes: Vec<u64>,
    /// Mapping name of each bin.
    pub bin_mapping: Vec<String>,
    /// Window start times, s.
    pub t_start_s: Vec<f64>,
    /// Window end times, s.
    pub t_end_s: Vec<f64>,
    /// counts[window][bin].
    pub counts: Vec<Vec<u64>>,
}

impl Heatmap {
    fn layout(machine: &Machine, bins: usize) -> Heatmap {
        let vmas = &machine.os.vmas;
        let total: u64 = vmas.values().map(|v| v.len).sum();
        let mut h = Heatmap::default();
        if total == 0 {
            return h;
        }
        for v in vmas.values() {
            let share = ((v.len as f64 / total as f64) * bins as f64).floor().max(1.0) as u64;
            let pages = tierlab_core::pages_for(v.len);
            let per = pages.div_ceil(share).max(1) * PAGE_SIZE;
            let mut a = v.start;
            while a < v.start + v.len {
                let len = per.min(v.start + v.len - a);
                h.bin_start.push(a);
                h.bin_bytes.push(len);
                h.bin_mapping.push(v.name.clone());
                a += len;
            }
        }
        h
    }

    fn add_window(&mut self, w: &WindowTruth) {
        let mut row = vec![0u64; self.bin_start.len()];
        // The pages are sorted and so are the bins, which do not overlap (the mappings'
        // pieces, none empty): each bin sums the run of pages inside it, found by binary
        // search in the pages after the previous bin's (pages between bins belong to none;
        // the sum runs without a compare per page).
        debug_assert!(self.bin_start.is_sorted() && w.pages.is_sorted_by_key(|p| p.0));
        let mut pages = &w.pages[..];
        for ((&start, &len), out) in self.bin_start.iter().zip(&self.bin_bytes).zip(row.iter_mut()) {
            pages = &pages[pages.partition_point(|q| page_addr(q.0) < start)..];
            let n = pages.partition_point(|q| page_addr(q.0) < start + len);
            *out = pages[..n].iter().map(|q| q.1 as u64).sum();
            pages = &pages[n..];
        }
        self.t_start_s.push(w.start_ns as f64 / 1e9);
        self.t_end_s.push(w.end_ns as f64 / 1e9);
        self.counts.push(row);
    }
}

/// A mapping as reported in results.
#[derive(Clone, Debug)]
pub struct MappingInfo {
    /// Name.
    pub name: String,
    /// Start address.
    pub start: u64,
    /// Length.
    pub length: u64,
    /// Page size in bytes.
    pub page_size: u64,
}

/// What an earlier stage of the run produced.
#[derive(Clone, Debug)]
pub struct StageSummary {
    /// Stage name.
    pub name: String,
    /// Its stats.
    pub stats: Stats,
    /// Whether it produced a placement plan.
    pub plan_ranges: usize,
}

/// Everything a run produced.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The scenario as run (its last stage).
    pub scenario: Scenario,
    /// All stats.
    pub stats: Stats,
    /// One row per window.
    pub timeseries: TimeSeries,
    /// Access heatmap.
    pub heatmap: Heatmap,
    /// Mappings at the end of setup.
    pub mappings: Vec<MappingInfo>,
    /// Stopped early by the caller.
    pub interrupted: bool,
    /// Stopped early by a simulation error (the simulated machine ran out of memory, a
    /// workload touched no mapping): its message. Everything up to the error is kept.
    pub error: Option<String>,
    /// Wall-clock seconds of the run loop (every stage).
    pub wall_seconds: f64,
    /// Mapping events: (time ns, map?, start, len, name).
    pub mapping_log: Vec<(u64, bool, u64, u64, String)>,
    /// Samples of the sample-based techniques (PEBS), per technique label, in drain order.
    pub samples: Vec<(String, Vec<tierlab_core::Sample>)>,
    /// The placement plan the run produced, if any (profile-guided `profile`).
    pub plan: Option<Vec<(u64, u64, u8)>>,
    /// damo records (JSON) of the region-based techniques asked to keep one, per label.
    pub damo_records: Vec<(String, String)>,
    /// The stages that ran before the last one.
    pub stages: Vec<StageSummary>,
    /// Node of each core (for recordings of the run's samples).
    pub core_nodes: Vec<u8>,
}

/// One agent with the driver's bookkeeping.
struct Slot {
    agent: Box<dyn Agent>,
    cpu_ps: u64,
    /// Feed kinds someone receives from this agent.
    wants: Vec<FeedKind>,
    /// (kind, subscriber) routes.
    routes: Vec<(FeedKind, usize)>,
    /// Index in the scorer (telemetry agents).
    scored: Option<usize>,
}

struct Batch {
    buf: Vec<Access>,
    pos: usize,
    done: bool,
}

#[derive(Clone, Default)]
struct Snapshot {
    c: CoreCounters,
    node_acc: Vec<u64>,
}

fn sum_counters(m: &Machine) -> Snapshot {
    let mut s = Snapshot { node_acc: vec![0; m.os.mem.nodes.len()], ..Default::default() };
    for c in &m.hw.cores {
        let k = &c.c;
        s.c.add_accesses(k);
        s.c.writes += k.writes;
        s.c.tlb_misses += k.tlb_misses;
        s.c.l2_tlb_hits += k.l2_tlb_hits;
        s.c.page_faults += k.page_faults;
        s.c.remote_invalidations += k.remote_invalidations;
        for (i, v) in c.node_accesses().iter().enumerate() {
            s.node_acc[i] += v;
        }
    }
    s
}

/// How far ahead [`drain`] prefetches ground-truth counters, accesses.
const PREFETCH_AHEAD: usize = 8;
/// [`drain`] prefetches for a core with more than one TLB miss per this many L1 TLB hits.
const PREFETCH_MISS_RATIO: u64 = 8;

/// Whether core `t` mostly misses its TLB so far (random accesses over much memory): its
/// accesses then run with `PREFETCH` ([`drain`]).
fn misses_often(m: &Machine, t: usize) -> bool {
    let c = &m.hw.cores[t].c;
    c.tlb_misses.saturating_mul(PREFETCH_MISS_RATIO) > c.l1_tlb_hits
}

/// Execute core `t`'s accesses `buf[*pos..]` until its clock reaches `target_ps` (true) or
/// the batch ends (false), counting them in the ground truth when `TRUTH`. Never inlined:
/// the simulator's hot loop keeps the same code whatever its callers inline (inlined, a
/// change elsewhere in the driver moved its registers and cost 1% more instructions).
///
/// `PLAIN`: the core [`crate::hw::Core::is_plain`] (tested by the caller; nothing on the
/// access path changes it): each access skips two tests (callgrind uniform 362.7 -> 355.6
/// instructions per access, triad 104.2 -> 100.3, 16 cores 95.2 -> 91.2).
///
/// `PREFETCH`: have the host fetch the ground-truth counter of the access
/// [`PREFETCH_AHEAD`] further (the page walks in between leave its memory the time). On the
/// 2-core VM, uniform 1 GiB (a walk per access): distances 4 to 32 ran 4-6% faster than
/// none, alternated; STREAM triad (TLB hits) ran 8% slower with it, hence [`misses_often`].
#[inline(never)]
fn drain<const TRUTH: bool, const PLAIN: bool, const PREFETCH: bool>(
    m: &mut Machine,
    t: usize,
    buf: &[Access],
    pos: &mut usize,
    target_ps: u64,
) -> Result<bool> {
    let mut i = *pos;
    // The core's clock comes back from each access (reading it from the core again costs
    // a bounds check and two loads per access).
    let mut clock = m.hw.cores[t].clock_ps;
    let r = (|| {
        while i < buf.len() {
            if clock >= target_ps {
                return Ok(true);
            }
            if PREFETCH {
                m.prefetch_truth(buf[(i + PREFETCH_AHEAD).min(buf.len() - 1)].addr);
            }
            clock = m.access_with::<TRUTH, PLAIN>(t, buf[i])?;
            i += 1;
        }
        Ok::<bool, SimError>(clock >= target_ps)
    })();
    *pos = i;
    r
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
    end_ps: u64,
    window_ps: u64,
    quantum_ps: u64,
    heatmap: Heatmap,
    timeseries: TimeSeries,
    mappings: Vec<MappingInfo>,
    windows: u64,
    prev: Snapshot,
    agents: Vec<Slot>,
    scorer: Scorer,
    optimum: Option<Optimum>,
    prev_overhead: u64,
}

/// The fast and slow node of a run on a tiered machine (the tiering policy's, else the
/// first node of the fastest tier and the first of the slowest), for the optimum bound; none
/// on an untiered machine or the hierarchical backend.
fn tier_pair(sc: &Scenario) -> Option<(u8, u8)> {
    if sc.machine.hmem.is_some() {
        return None;
    }
    if let Some(t) = &sc.tiering {
        let c = t.common();
        return Some((c.tiers.fast, c.tiers.slow));
    }
    let nodes = &sc.machine.nodes;
    let fast = (0..nodes.len()).min_by_key(|&i| (nodes[i].tier, i))?;
    let slow = (0..nodes.len()).min_by_key(|&i| (std::cmp::Reverse(nodes[i].tier), i))?;
    (nodes[fast].tier < nodes[slow].tier).then_some((fast as u8, slow as u8))
}

/// Time the application cores spent on tiering's side effects so far (TLB maintenance
/// received, background work charged to them, hint faults, swap-ins), ps.
fn app_overhead_ps(m: &Machine, threads: usize) -> u64 {
    let cores: u64 = m.hw.cores[..threads].iter().map(|c| c.c.background_ps + c.c.tlb_maint_ps).sum();
    cores + m.os.hint.as_ref().map_or(0, |h| h.time_ps()) + m.os.mem.swap.refault_time_ps
}

/// The outcome of one stage.
struct StageOutcome {
    result: RunResult,
    input: StageInput,
}

impl Run {
    /// Build the machine, the workload and the agents of `scenario`, and run the workload's
    /// setup. `input` is what the previous stage handed over.
    pub fn build(mut scenario: Scenario, ctx: &BuildCtx, input: Option<&StageInput>) -> Result<Self> {
        let mut workload = scenario.workload.build(ctx)?;
        let threads = workload.threads();
        if threads > scenario.machine.cores {
            return Err(SimError::config(
                &ctx.scenario_file,
                "workload.threads",
                format!("{threads} threads but the machine has {} cores", scenario.machine.cores),
            ));
        }
        // Before anything big is allocated: would the run fit in the host's memory?
        let natural_ns =
            scenario.duration.map(|d| d.0).or_else(|| workload.natural_duration_ns()).unwrap_or(0);
        let agent_count = scenario.telemetry.len()
            + scenario.placement.is_some() as usize
            + scenario.tiering.is_some() as usize;
        budget::check(
            &ctx.scenario_file,
            &budget::estimate(&scenario, natural_ns, agent_count),
            budget::available_bytes(),
        )?;
        let mut machine = Machine::new(&scenario.machine);
        for t in 0..threads {
            machine.os.mm_cpumask[t] = true;
        }
        let cores = scenario.machine.cores;
        // The agents, in list order: telemetry, the backend's scanner, placement, tiering.
        let mut agents: Vec<Box<dyn Agent>> = Vec::new();
        for (index, t) in scenario.telemetry.iter().enumerate() {
            let tctx = TelemetryBuildCtx {
                seed: scenario.seed,
                scenario_file: ctx.scenario_file.clone(),
                index,
                cores,
                threads,
                nodes: scenario.machine.nodes.len(),
            };
            agents.push(Box::new(t.build_agent(&tctx)?));
        }
        if let (Backend::Hier(_), Some(p)) = (&machine.os.backend, scenario.policies.first()) {
            agents.push(Box::new(ScannerAgent::new(p.kind(), NEVER)));
        }
        if let Some(cfg) = &scenario.placement {
            let pctx = PlacementBuildCtx {
                scenario_file: &ctx.scenario_file,
                cores,
                cpu_ghz: scenario.machine.cpu_ghz,
                threads,
                input,
            };
            agents.push(Box::new(PlacementAgent::new(cfg, &pctx)?));
        }
        if let Some(cfg) = &scenario.tiering {
            let tctx = TieringBuildCtx {
                seed: scenario.seed,
                scenario_file: ctx.scenario_file.clone(),
                cores,
                threads,
                nodes: scenario.machine.nodes.len(),
            };
            agents.push(Box::new(TieringAgent::new(cfg, &tctx)?));
        }
        if let Some(a) = LoadedLatencyAgent::new(&scenario.machine.nodes, scenario.machine.latency_matrix()) {
            agents.push(Box::new(a));
        }
        let mut slots: Vec<Slot> = agents
            .into_iter()
            .map(|agent| Slot { agent, cpu_ps: 0, wants: Vec::new(), routes: Vec::new(), scored: None })
            .collect();
        let labels: Vec<String> = slots
            .iter()
            .filter(|s| s.agent.role() == Role::Telemetry)
            .map(|s| s.agent.label().to_string())
            .collect();
        let mut k = 0;
        for s in &mut slots {
            if s.agent.role() == Role::Telemetry {
                s.scored = Some(k);
                s.wants.push(FeedKind::HotSet);
                k += 1;
            }
        }
        route_feeds(&mut slots, &ctx.scenario_file)?;
        let scorer = Scorer::new(&scenario.scoring, labels);
        let run_agents = |slots: &mut Vec<Slot>, machine: &mut Machine, hook: Hook| -> Result<()> {
            for i in 0..slots.len() {
                let mut out = Vec::new();
                {
                    let Slot { agent, cpu_ps, wants, .. } = &mut slots[i];
                    let core = agent.core();
                    let mut actx = AgentCtx::new(0, MachineView::new(machine), core, cpu_ps, &mut out, wants);
                    match hook {
                        Hook::Prepare => agent.prepare(&mut actx)?,
                        Hook::Start => agent.start(&mut actx)?,
                    }
                }
                deliver(slots, machine, i, out, 0)?;
            }
            Ok(())
        };
        run_agents(&mut slots, &mut machine, Hook::Prepare)?;
        workload.setup(&mut machine)?;
        if scenario.scoring.truth == TruthRule::Declared && workload.declared_hot_ranges(0, 1).is_none() {
            return Err(SimError::config(
                &ctx.scenario_file,
                "scoring.truth",
                format!(
                    "\"declared\" needs a workload that declares its hot set (hotset); `{}` does not: use \"accessed\"",
                    scenario.workload.kind()
                ),
            ));
        }
        machine.start_backend(&scenario.policies, &ctx.scenario_file)?;
        let end_ns = match scenario.duration {
            Some(d) => d.0,
            None => workload.natural_duration_ns().unwrap_or(0),
        };
        if scenario.duration.is_none() && end_ns > 0 {
            scenario.duration = Some(crate::units::Duration(end_ns));
        }
        let truth = scenario.report.ground_truth;
        if !truth && scorer.active() && scenario.scoring.truth == TruthRule::Accessed {
            return Err(SimError::config(
                &ctx.scenario_file,
                "report.ground_truth",
                "false leaves nothing to score the [[telemetry]] techniques with under scoring.truth = \"accessed\": keep it true, or score by the declared hot set (scoring.truth = \"declared\")"
                    .to_string(),
            ));
        }
        // Without ground truth there is nothing to bin: no heatmap.
        let heatmap =
            if truth { Heatmap::layout(&machine, scenario.report.heatmap_bins) } else { Heatmap::default() };
        let mappings = machine
            .os
            .vmas
            .values()
            .map(|v| MappingInfo {
                name: v.name.clone(),
                start: v.start,
                length: v.len,
                page_size: v.page_size.bytes(),
            })
            .collect();
        let prev = sum_counters(&machine);
        run_agents(&mut slots, &mut machine, Hook::Start)?;
        let optimum = tier_pair(&scenario)
            .filter(|_| truth)
            .map(|(f, s)| Optimum::new(f, s, machine.os.mem.nodes[f as usize].capacity_pages));
        let prev_overhead = app_overhead_ps(&machine, threads);
        Ok(Run {
            window_ps: scenario.window.0 * 1000,
            quantum_ps: scenario.quantum.0 * 1000,
            end_ps: if end_ns == 0 { u64::MAX } else { end_ns.saturating_mul(1000) },
            scenario,
            machine,
            workload,
            threads,
            batches: (0..threads)
                .map(|_| Batch { buf: Vec::with_capacity(1 << 16), pos: 0, done: false })
                .collect(),
            heatmap,
            timeseries: TimeSeries::default(),
            mappings,
            windows: 0,
            prev,
            agents: slots,
            scorer,
            optimum,
            prev_overhead,
        })
    }

    /// Whether the run counts ground truth (`report.ground_truth`).
    fn counts_truth(&self) -> bool {
        self.scenario.report.ground_truth
    }

    fn next_event(&self) -> Ps {
        self.agents.iter().map(|s| s.agent.next_event()).min().unwrap_or(NEVER)
    }

    /// Run every agent event due at or before `now`, in time order, ties in list order.
    fn fire_agents(&mut self, now: Ps) -> Result<()> {
        loop {
            let mut due: Option<(Ps, usize)> = None;
            for (i, s) in self.agents.iter().enumerate() {
                let t = s.agent.next_event();
                if t <= now && due.is_none_or(|(bt, _)| t < bt) {
                    due = Some((t, i));
                }
            }
            let Some((t, i)) = due else { return Ok(()) };
            let mut out = Vec::new();
            {
                let Slot { agent, cpu_ps, wants, .. } = &mut self.agents[i];
                let core = agent.core();
                let mut ctx =
                    AgentCtx::new(t, MachineView::new(&mut self.machine), core, cpu_ps, &mut out, wants);
                agent.on_event(&mut ctx)?;
                if agent.next_event() <= t {
                    return Err(SimError::runtime(format!(
                        "{} `{}` did not advance its next event past {} ns",
                        role_name(agent.role()),
                        agent.label(),
                        t / 1000
                    )));
                }
            }
            deliver(&mut self.agents, &mut self.machine, i, out, t)?;
        }
    }

    /// Run core `t` until its clock reaches `target_ps` or its thread finishes.
    #[inline]
    fn run_core(&mut self, t: usize, target_ps: u64) -> Result<()> {
        loop {
            let b = &mut self.batches[t];
            if b.pos == b.buf.len() {
                if b.done {
                    return Ok(());
                }
                b.buf.clear();
                b.pos = 0;
                let now_ns = self.machine.hw.cores[t].clock_ps / 1000;
                let step = self.workload.next_batch(t, now_ns, &mut b.buf, &mut self.machine)?;
                if step == Step::Done {
                    b.done = true;
                }
                if b.buf.is_empty() {
                    if b.done {
                        return Ok(());
                    }
                    continue;
                }
            }
            let b = &mut self.batches[t];
            let m = &mut self.machine;
            let r = if !self.scenario.report.ground_truth {
                drain::<false, false, false>(m, t, &b.buf, &mut b.pos, target_ps)
            } else if !m.hw.cores[t].is_plain() {
                drain::<true, false, false>(m, t, &b.buf, &mut b.pos, target_ps)
            } else if misses_often(m, t) {
                drain::<true, true, true>(m, t, &b.buf, &mut b.pos, target_ps)
            } else {
                drain::<true, true, false>(m, t, &b.buf, &mut b.pos, target_ps)
            };
            if r? {
                return Ok(());
            }
        }
    }

    fn all_done(&self) -> bool {
        self.batches.iter().all(|b| b.done && b.pos == b.buf.len())
    }

    fn close_window(&mut self, start_ps: u64, end_ps: u64) -> Result<()> {
        let (start_ns, end_ns) = (start_ps / 1000, end_ps / 1000);
        let w = self.machine.close_window(self.windows, start_ns, end_ns);
        if self.counts_truth() {
            self.heatmap.add_window(&w);
        }
        let mut score_cols = Vec::new();
        if self.scorer.active() {
            let workload = &self.workload;
            score_cols.push(
                self.scorer
                    .begin_window(&w, || workload.declared_hot_ranges(start_ns, end_ns).unwrap_or_default()),
            );
        }
        for i in 0..self.agents.len() {
            let mut out = Vec::new();
            {
                let Slot { agent, cpu_ps, wants, .. } = &mut self.agents[i];
                let core = agent.core();
                let mut ctx =
                    AgentCtx::new(end_ps, MachineView::new(&mut self.machine), core, cpu_ps, &mut out, wants);
                agent.on_window(start_ns, end_ns, &mut ctx)?;
            }
            if let Some(k) = self.agents[i].scored {
                for f in &out {
                    if let Feed::HotSet { report, .. } = f {
                        score_cols.extend(self.scorer.score(k, report, end_ps as f64 / 1e12));
                    }
                }
            }
            deliver(&mut self.agents, &mut self.machine, i, out, end_ps)?;
        }
        let now = sum_counters(&self.machine);
        let d = |a: u64, b: u64| (a - b) as f64;
        let mut row = vec![
            ("window".to_string(), self.windows as f64),
            ("t_start_s".to_string(), start_ps as f64 / 1e12),
            ("t_end_s".to_string(), end_ps as f64 / 1e12),
            ("accesses".to_string(), d(now.c.accesses(), self.prev.c.accesses())),
            (
                "reads".to_string(),
                d(now.c.accesses() - now.c.writes, self.prev.c.accesses() - self.prev.c.writes),
            ),
            ("writes".to_string(), d(now.c.writes, self.prev.c.writes)),
        ];
        if self.counts_truth() {
            row.push(("pages_touched".to_string(), w.pages.len() as f64));
            row.push(("bytes_touched".to_string(), tierlab_core::bytes_of(w.pages.len() as u64) as f64));
        }
        row.extend([
            ("tlb_misses".to_string(), d(now.c.tlb_misses, self.prev.c.tlb_misses)),
            ("l2_tlb_hits".to_string(), d(now.c.l2_tlb_hits, self.prev.c.l2_tlb_hits)),
            ("page_faults".to_string(), d(now.c.page_faults, self.prev.c.page_faults)),
            (
                "remote_invalidations".to_string(),
                d(now.c.remote_invalidations, self.prev.c.remote_invalidations),
            ),
        ]);
        let secs = (end_ps - start_ps) as f64 / 1e12;
        let acc = d(now.c.accesses(), self.prev.c.accesses());
        row.push(("accesses_per_ms".to_string(), if secs > 0.0 { acc / (secs * 1e3) } else { 0.0 }));
        for (i, n) in self.machine.os.mem.nodes.iter().enumerate() {
            row.push((format!("node.{}.accesses", n.cfg.name), d(now.node_acc[i], self.prev.node_acc[i])));
            row.push((
                format!("node.{}.resident_bytes", n.cfg.name),
                tierlab_core::bytes_of(n.used_pages) as f64,
            ));
        }
        row.extend(score_cols);
        if let Some(o) = &mut self.optimum {
            let (f, sl) = (o.fast as usize, o.slow as usize);
            let run_fast = now.node_acc[f] - self.prev.node_acc[f];
            let c0 = &self.machine.hw.cores[0];
            let delta = c0.cost_to(sl as u8) as f64 - c0.cost_to(f as u8) as f64;
            let ov = app_overhead_ps(&self.machine, self.threads);
            let (b, r, a) = o.add_window(&w, run_fast, delta, ov.saturating_sub(self.prev_overhead));
            self.prev_overhead = ov;
            row.extend(Optimum::window_columns(b, r, a));
        }
        let threads = self.threads;
        let truth = self.counts_truth();
        let view = MachineView::new(&mut self.machine);
        for s in &mut self.agents {
            let info = Info { view: &view, cpu_ps: s.cpu_ps, threads };
            row.extend(s.agent.window_columns(&info));
            if let Some(fast) = s.agent.fast_node().filter(|_| truth) {
                let hot = self.scorer.hot_bytes_where(&w, |va| view.node_of(va) == Some(fast));
                row.push(("tiering.fast_hot_bytes".to_string(), hot));
            }
        }
        row.extend(self.workload.window_columns(start_ns, end_ns));
        self.timeseries.push_row(row);
        self.prev = now;
        self.windows += 1;
        self.machine.recycle_window(w);
        Ok(())
    }

    /// Run to the end (or until `progress` says stop).
    fn run(mut self, progress: &mut dyn FnMut(Progress) -> Control) -> Result<StageOutcome> {
        let wall = Instant::now();
        let mut last_report = Instant::now();
        let mut window_start = 0u64;
        let mut interrupted = false;
        let total_ns = if self.end_ps == u64::MAX { 0 } else { self.end_ps / 1000 };
        let mut frontier = 0u64;
        let mut steps = 0u64;
        let mut error: Option<String> = None;
        let mut checked_at = 0u64;
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
            let window_end = (window_start + self.window_ps).min(self.end_ps);
            while frontier < window_end {
                let next = self.next_event();
                frontier = (frontier + self.quantum_ps).min(window_end).min(next.max(frontier + 1));
                for t in 0..self.threads {
                    if self.machine.hw.cores[t].clock_ps < frontier {
                        step!('outer, self.run_core(t, frontier));
                    }
                }
                if next <= frontier {
                    step!('outer, self.fire_agents(frontier));
                }
                if self.all_done() {
                    break;
                }
                steps += 1;
                let due = steps & 63 == 0 || frontier - checked_at >= PROGRESS_EVERY_PS;
                if due {
                    checked_at = frontier;
                }
                if due && last_report.elapsed().as_millis() >= 100 {
                    last_report = Instant::now();
                    let p = Progress {
                        sim_ns: frontier / 1000,
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
                let end = self.machine.hw.now_ps();
                if end > window_start {
                    self.close_window(window_start, end.min(window_end).max(window_start + 1))?;
                }
                break;
            }
            self.close_window(window_start, window_end)?;
            window_start = window_end;
            if window_end >= self.end_ps {
                break;
            }
        }
        if interrupted || error.is_some() {
            // The window under way when the run stopped.
            let window_end = window_start.saturating_add(self.window_ps).min(self.end_ps);
            let end = self.machine.hw.now_ps().max(window_start + 1).min(window_end.max(window_start + 1));
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
        let p =
            Progress { sim_ns: frontier / 1000, total_ns, accesses: self.machine.total(|c| c.accesses()) };
        progress(p);
        let end_ps = self.machine.hw.now_ps() / 1000 * 1000;
        let mut samples = Vec::new();
        let mut plan = None;
        let mut damo_records = Vec::new();
        for i in 0..self.agents.len() {
            let mut out = Vec::new();
            let Slot { agent, cpu_ps, wants, .. } = &mut self.agents[i];
            let core = agent.core();
            let mut ctx =
                AgentCtx::new(end_ps, MachineView::new(&mut self.machine), core, cpu_ps, &mut out, wants);
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
                s.agent.report_stats(&Info { view: &view, cpu_ps: s.cpu_ps, threads }, &mut stats);
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
        let app_s =
            (0..self.threads).map(|t| self.machine.hw.cores[t].clock_ps).max().unwrap_or(0) as f64 / 1e12;
        stats.set("run.app_seconds", app_s);
        if let Some(o) = &self.optimum {
            o.report_stats(app_s, self.threads, &mut stats);
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
            stages: Vec::new(),
            core_nodes: self.machine.os.mem.core_node.clone(),
        };
        Ok(StageOutcome { result, input })
    }
}

#[derive(Clone, Copy)]
enum Hook {
    Prepare,
    Start,
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Telemetry => "telemetry",
        Role::Os => "OS agent",
        Role::Placement => "placement policy",
        Role::Tiering => "tiering",
        Role::Other => "agent",
    }
}

/// Resolve every subscription: the source agent by label, and the first accepted feed kind
/// it publishes.
fn route_feeds(slots: &mut [Slot], file: &str) -> Result<()> {
    for j in 0..slots.len() {
        let Some(sub) = slots[j].agent.subscription() else { continue };
        let Some(i) =
            slots.iter().position(|s| s.agent.label() == sub.source && s.agent.role() == Role::Telemetry)
        else {
            let labels: Vec<&str> =
                slots.iter().filter(|s| s.agent.role() == Role::Telemetry).map(|s| s.agent.label()).collect();
            return Err(SimError::config(
                file,
                &sub.field,
                format!(
                    "no telemetry technique is named `{}` (the scenario has: {})",
                    sub.source,
                    if labels.is_empty() { "none".to_string() } else { labels.join(", ") }
                ),
            ));
        };
        let published = slots[i].agent.publishes().to_vec();
        let Some(kind) = sub.accepts.iter().copied().find(|k| published.contains(k)) else {
            let names = |v: &[FeedKind]| v.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ");
            let kinds = crate::agents::telemetry::TelemetryConfig::kinds_publishing(&sub.accepts);
            return Err(SimError::config(
                file,
                &sub.field,
                format!(
                    "`{}` follows `{}`, a `{}` technique, which publishes {}; it needs {}{}",
                    slots[j].agent.kind(),
                    sub.source,
                    slots[i].agent.kind(),
                    names(&published),
                    names(&sub.accepts),
                    if kinds.is_empty() {
                        String::new()
                    } else {
                        format!(" (the techniques of kind {} publish them)", kinds.join(", "))
                    }
                ),
            ));
        };
        slots[i].routes.push((kind, j));
        if !slots[i].wants.contains(&kind) {
            slots[i].wants.push(kind);
        }
    }
    Ok(())
}

/// Deliver the feeds agent `from` published to its subscribers (and what they publish in
/// turn).
fn deliver(slots: &mut [Slot], machine: &mut Machine, from: usize, feeds: Vec<Feed>, now: Ps) -> Result<()> {
    for f in feeds {
        let routes: Vec<usize> =
            slots[from].routes.iter().filter(|(k, _)| *k == f.kind()).map(|&(_, j)| j).collect();
        for j in routes {
            let mut out = Vec::new();
            {
                let Slot { agent, cpu_ps, wants, .. } = &mut slots[j];
                let core = agent.core();
                let mut ctx = AgentCtx::new(now, MachineView::new(machine), core, cpu_ps, &mut out, wants);
                agent.on_feed(&f, &mut ctx)?;
            }
            deliver(slots, machine, j, out, now)?;
        }
    }
    Ok(())
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

    /// The heatmap's merge of sorted pages and bins gives what a search per page gives,
    /// with gaps between bins, pages before the first and after the last bin.
    #[test]
    fn heatmap_merge_matches_search_per_page() {
        let mut h = Heatmap::default();
        for (start, bytes) in [(1u64 << 20, 3 * PAGE_SIZE), (2 << 20, 5 * PAGE_SIZE), (9 << 20, PAGE_SIZE)] {
            for k in 0..4 {
                h.bin_start.push(start + k * bytes);
                h.bin_bytes.push(bytes);
                h.bin_mapping.push(String::new());
            }
        }
        let mut x = 7u64;
        let mut pages: Vec<(u64, u32)> = (0..3000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (tierlab_core::vpn((x >> 40) % (12 << 20)), (x & 7) as u32 + 1)
            })
            .collect();
        pages.sort_unstable();
        pages.dedup_by_key(|p| p.0);
        let mut expect = vec![0u64; h.bin_start.len()];
        for &(vpn, n) in &pages {
            let addr = page_addr(vpn);
            let i = h.bin_start.partition_point(|&s| s <= addr);
            if i > 0 && addr < h.bin_start[i - 1] + h.bin_bytes[i - 1] {
                expect[i - 1] += n as u64;
            }
        }
        assert!(expect.iter().filter(|&&c| c > 0).count() > 6, "{expect:?}");
        h.add_window(&WindowTruth { index: 0, start_ns: 0, end_ns: 1, pages });
        assert_eq!(h.counts, vec![expect]);
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
