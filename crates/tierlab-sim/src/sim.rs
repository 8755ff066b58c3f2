//! The driver: runs a scenario's workload on its machine, window by window.
//!
//! Cores advance in lockstep steps of `quantum` simulated time (each core runs until its
//! clock passes the step's end, in core order), so multi-core runs interleave by their
//! clocks deterministically. At each window end, when every core has passed it, the window
//! is closed: ground truth is cut, a time-series row and a heatmap row are recorded.

use std::time::Instant;

use crate::error::{Result, SimError};
use crate::groundtruth::WindowTruth;
use crate::machine::{CoreCounters, Machine};
use crate::scenario::{build_ctx, Scenario, Source};
use crate::stats::{Stats, StatsSource};
use crate::telemetry::{score, Observer, ObserverCtx, TelemetryBuildCtx, TruthRule};
use crate::workload::{Access, BuildCtx, Step, Workload};

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
        let total: u64 = machine.vmas.values().map(|v| v.len).sum();
        let mut h = Heatmap::default();
        if total == 0 {
            return h;
        }
        for v in machine.vmas.values() {
            let share = ((v.len as f64 / total as f64) * bins as f64).floor().max(1.0) as u64;
            let pages = v.len.div_ceil(4096);
            let per = pages.div_ceil(share).max(1) * 4096;
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
        for &(vpn, n) in &w.pages {
            let addr = vpn << 12;
            let i = self.bin_start.partition_point(|&s| s <= addr);
            if i > 0 && addr < self.bin_start[i - 1] + self.bin_bytes[i - 1] {
                row[i - 1] += n as u64;
            }
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

/// Everything a run produced.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The scenario as run.
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
    /// Wall-clock seconds of the run loop.
    pub wall_seconds: f64,
    /// Mapping events: (time ns, map?, start, len, name).
    pub mapping_log: Vec<(u64, bool, u64, u64, String)>,
    /// Samples of the sample-based techniques (PEBS), per technique label, in drain order.
    pub samples: Vec<(String, Vec<tierlab_core::Sample>)>,
}

struct ObsSlot {
    label: String,
    kind: &'static str,
    obs: Box<dyn Observer>,
    core: usize,
    cpu_ps: u64,
    precision: Vec<f64>,
    recall: Vec<f64>,
    window_end_s: Vec<f64>,
}

struct Batch {
    buf: Vec<Access>,
    pos: usize,
    done: bool,
}

/// A prepared simulation.
pub struct Simulation {
    /// The scenario.
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
    observers: Vec<ObsSlot>,
    placement: Option<Box<dyn crate::placement::PlacementPolicy>>,
    tiering: Option<crate::tiering::Tiering>,
}

#[derive(Clone, Default)]
struct Snapshot {
    c: CoreCounters,
    node_acc: Vec<u64>,
}

fn sum_counters(m: &Machine) -> Snapshot {
    let mut s = Snapshot { node_acc: vec![0; m.mem.nodes.len()], ..Default::default() };
    for c in &m.cores {
        let k = &c.c;
        s.c.accesses += k.accesses;
        s.c.writes += k.writes;
        s.c.tlb_misses += k.tlb_misses;
        s.c.l2_tlb_hits += k.l2_tlb_hits;
        s.c.page_faults += k.page_faults;
        s.c.remote_invalidations += k.remote_invalidations;
        for (i, v) in c.node_accesses.iter().enumerate() {
            s.node_acc[i] += v;
        }
    }
    s
}

impl Simulation {
    /// Build the machine and workload of a scenario and run the workload's setup.
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
    pub fn with_ctx(mut scenario: Scenario, ctx: &BuildCtx) -> Result<Self> {
        let mut workload = scenario.workload.build(ctx)?;
        let threads = workload.threads();
        if threads > scenario.machine.cores {
            return Err(SimError::config(
                &ctx.scenario_file,
                "workload.threads",
                format!("{threads} threads but the machine has {} cores", scenario.machine.cores),
            ));
        }
        let mut machine = Machine::new(&scenario.machine);
        for t in 0..threads {
            machine.mm_cpumask[t] = true;
        }
        let mut placement = crate::placement::build(&scenario, ctx, threads)?;
        if let Some(p) = placement.as_mut() {
            p.prepare(&mut machine)?;
        }
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
        machine.start_hmem(&scenario.policies, &ctx.scenario_file)?;
        let end_ns = match scenario.duration {
            Some(d) => d.0,
            None => workload.natural_duration_ns().unwrap_or(0),
        };
        if scenario.duration.is_none() && end_ns > 0 {
            scenario.duration = Some(crate::units::Duration(end_ns));
        }
        let heatmap = Heatmap::layout(&machine, scenario.report.heatmap_bins);
        let mappings = machine
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
        let mut observers = Vec::new();
        for (index, t) in scenario.telemetry.iter().enumerate() {
            let tctx = TelemetryBuildCtx {
                seed: scenario.seed,
                scenario_file: ctx.scenario_file.clone(),
                index,
                cores: scenario.machine.cores,
                threads,
            };
            let mut obs = t.build(&tctx)?;
            let core = tctx.core(t.core())?;
            let mut cpu_ps = 0;
            obs.start(&mut ObserverCtx { machine: &mut machine, now_ns: 0, core, cpu_ps: &mut cpu_ps })?;
            observers.push(ObsSlot {
                label: t.label(),
                kind: t.kind(),
                obs,
                core,
                cpu_ps,
                precision: Vec::new(),
                recall: Vec::new(),
                window_end_s: Vec::new(),
            });
        }
        if let Some(p) = placement.as_mut() {
            p.start(&mut machine)?;
        }
        let tiering = match &scenario.tiering {
            Some(cfg) => {
                let labels: Vec<String> = observers.iter().map(|o| o.label.clone()).collect();
                let kinds: Vec<&'static str> = observers.iter().map(|o| o.kind).collect();
                let tctx = crate::tiering::TieringBuildCtx {
                    seed: scenario.seed,
                    scenario_file: ctx.scenario_file.clone(),
                    cores: scenario.machine.cores,
                    threads,
                    nodes: scenario.machine.nodes.len(),
                    telemetry_kind: None,
                };
                let mut t = crate::tiering::Tiering::new(
                    cfg,
                    &tctx,
                    &labels,
                    &kinds,
                    scenario.scoring.truth_threshold,
                )?;
                t.start(&mut machine)?;
                Some(t)
            }
            None => None,
        };
        Ok(Simulation {
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
            observers,
            placement,
            tiering,
        })
    }

    fn next_tiering_ps(&self) -> u64 {
        self.tiering.as_ref().map_or(u64::MAX, |t| t.next_event_ps())
    }

    fn next_placement_ps(&self) -> u64 {
        self.placement.as_ref().map(|p| p.next_event_ns().saturating_mul(1000)).unwrap_or(u64::MAX)
    }

    /// Run the placement policy's events due at or before `now_ps`.
    fn fire_placement(&mut self, now_ps: u64) -> Result<()> {
        let Some(p) = self.placement.as_mut() else { return Ok(()) };
        while p.next_event_ns().saturating_mul(1000) <= now_ps {
            let t = p.next_event_ns();
            p.on_event(t, &mut self.machine)?;
            if p.next_event_ns() <= t {
                return Err(SimError::runtime(format!(
                    "placement policy did not advance its next event past {t} ns"
                )));
            }
        }
        Ok(())
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
                let now_ns = self.machine.cores[t].clock_ps / 1000;
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
            let buf = &b.buf;
            let mut pos = b.pos;
            let m = &mut self.machine;
            let r = (|| {
                while pos < buf.len() {
                    if m.cores[t].clock_ps >= target_ps {
                        return Ok(true);
                    }
                    m.access(t, buf[pos])?;
                    pos += 1;
                }
                Ok::<bool, SimError>(m.cores[t].clock_ps >= target_ps)
            })();
            b.pos = pos;
            if r? {
                return Ok(());
            }
        }
    }

    fn next_observer_ps(&self) -> u64 {
        self.observers.iter().map(|o| o.obs.next_event_ns().saturating_mul(1000)).min().unwrap_or(u64::MAX)
    }

    /// Run every observer event due at or before `now_ps`, in time order then scenario order.
    fn fire_observers(&mut self, now_ps: u64) -> Result<()> {
        loop {
            let mut due: Option<(u64, usize)> = None;
            for (i, o) in self.observers.iter().enumerate() {
                let t = o.obs.next_event_ns();
                if t.saturating_mul(1000) <= now_ps && due.is_none_or(|(bt, _)| t < bt) {
                    due = Some((t, i));
                }
            }
            let Some((t, i)) = due else { return Ok(()) };
            let o = &mut self.observers[i];
            if let Some(tier) = self.tiering.as_mut() {
                tier.before_observer(i, o.obs.as_ref(), &mut self.machine, t)?;
            }
            let mut ctx =
                ObserverCtx { machine: &mut self.machine, now_ns: t, core: o.core, cpu_ps: &mut o.cpu_ps };
            o.obs.on_event(&mut ctx)?;
            if let Some(tier) = self.tiering.as_mut() {
                tier.after_observer(i, o.obs.as_ref(), &mut self.machine, t)?;
            }
            if o.obs.next_event_ns() <= t {
                return Err(SimError::runtime(format!(
                    "telemetry `{}` did not advance its next event past {t} ns",
                    o.label
                )));
            }
        }
    }

    fn all_done(&self) -> bool {
        self.batches.iter().all(|b| b.done && b.pos == b.buf.len())
    }

    fn close_window(&mut self, start_ps: u64, end_ps: u64) {
        self.machine.flush_ground_truth();
        let w = self.machine.gt.close(self.windows, start_ps / 1000, end_ps / 1000);
        self.heatmap.add_window(&w);
        let mut obs_cols = Vec::new();
        if !self.observers.is_empty() {
            let truth: Vec<u64> = match self.scenario.scoring.truth {
                TruthRule::Accessed => w.hot_pages(self.scenario.scoring.truth_threshold).collect(),
                TruthRule::Declared => {
                    let mut ranges =
                        self.workload.declared_hot_ranges(start_ps / 1000, end_ps / 1000).unwrap_or_default();
                    ranges.sort_unstable();
                    let mut pages = Vec::new();
                    for (s, l) in ranges {
                        pages.extend((s >> 12)..((s + l).div_ceil(4096)));
                    }
                    pages.dedup();
                    pages
                }
            };
            obs_cols.push(("truth_bytes".to_string(), (truth.len() as u64 * 4096) as f64));
            for (i, o) in self.observers.iter_mut().enumerate() {
                let rep = o.obs.hot_set(start_ps / 1000, end_ps / 1000, &self.machine);
                if let Some(tier) = self.tiering.as_mut() {
                    tier.on_window_report(i, o.obs.as_ref(), &rep, &mut self.machine, end_ps / 1000);
                }
                let sc = score(&rep, &truth);
                let p = format!("telemetry.{}", o.label);
                o.precision.push(sc.precision());
                o.recall.push(sc.recall());
                o.window_end_s.push(end_ps as f64 / 1e12);
                obs_cols.push((format!("{p}.precision"), sc.precision()));
                obs_cols.push((format!("{p}.recall"), sc.recall()));
                obs_cols.push((format!("{p}.reported_bytes"), sc.reported as f64));
                let cpu = o.cpu_ps + o.obs.hw_cpu_ps(&self.machine);
                obs_cols.push((format!("{p}.cpu_s"), cpu as f64 / 1e12));
                for (k, v) in o.obs.window_columns() {
                    obs_cols.push((format!("{p}.{k}"), v));
                }
            }
        }
        let now = sum_counters(&self.machine);
        let d = |a: u64, b: u64| (a - b) as f64;
        let mut row = vec![
            ("window".to_string(), self.windows as f64),
            ("t_start_s".to_string(), start_ps as f64 / 1e12),
            ("t_end_s".to_string(), end_ps as f64 / 1e12),
            ("accesses".to_string(), d(now.c.accesses, self.prev.c.accesses)),
            (
                "reads".to_string(),
                d(now.c.accesses - now.c.writes, self.prev.c.accesses - self.prev.c.writes),
            ),
            ("writes".to_string(), d(now.c.writes, self.prev.c.writes)),
            ("pages_touched".to_string(), w.pages.len() as f64),
            ("bytes_touched".to_string(), (w.pages.len() as u64 * 4096) as f64),
            ("tlb_misses".to_string(), d(now.c.tlb_misses, self.prev.c.tlb_misses)),
            ("l2_tlb_hits".to_string(), d(now.c.l2_tlb_hits, self.prev.c.l2_tlb_hits)),
            ("page_faults".to_string(), d(now.c.page_faults, self.prev.c.page_faults)),
            (
                "remote_invalidations".to_string(),
                d(now.c.remote_invalidations, self.prev.c.remote_invalidations),
            ),
        ];
        let secs = (end_ps - start_ps) as f64 / 1e12;
        let acc = d(now.c.accesses, self.prev.c.accesses);
        row.push(("accesses_per_ms".to_string(), if secs > 0.0 { acc / (secs * 1e3) } else { 0.0 }));
        for (i, n) in self.machine.mem.nodes.iter().enumerate() {
            row.push((format!("node.{}.accesses", n.cfg.name), d(now.node_acc[i], self.prev.node_acc[i])));
            row.push((format!("node.{}.resident_bytes", n.cfg.name), (n.used_pages * 4096) as f64));
        }
        row.extend(obs_cols);
        row.extend(self.workload.window_columns(start_ps / 1000, end_ps / 1000));
        if let Some(tier) = self.tiering.as_mut() {
            row.extend(tier.window_columns(&self.machine, &w));
        }
        self.timeseries.push_row(row);
        self.prev = now;
        self.windows += 1;
    }

    /// Run to the end (or until `progress` says stop).
    pub fn run(self, progress: &mut dyn FnMut(Progress) -> Control) -> Result<RunResult> {
        self.run_with_placement(progress).map(|r| r.0)
    }

    /// Run to the end and hand back the placement policy too (a profiling run's plan).
    pub fn run_with_placement(
        mut self,
        progress: &mut dyn FnMut(Progress) -> Control,
    ) -> Result<(RunResult, Option<Box<dyn crate::placement::PlacementPolicy>>)> {
        let wall = Instant::now();
        let mut last_report = Instant::now();
        let mut window_start = 0u64;
        let mut interrupted = false;
        let total_ns = if self.end_ps == u64::MAX { 0 } else { self.end_ps / 1000 };
        let mut frontier = 0u64;
        let mut steps = 0u64;
        'outer: loop {
            let window_end = (window_start + self.window_ps).min(self.end_ps);
            while frontier < window_end {
                let next_obs = self
                    .next_observer_ps()
                    .min(self.machine.next_policy_event_ps())
                    .min(self.next_placement_ps())
                    .min(self.next_tiering_ps());
                frontier = (frontier + self.quantum_ps).min(window_end).min(next_obs.max(frontier + 1));
                for t in 0..self.threads {
                    if self.machine.cores[t].clock_ps < frontier {
                        self.run_core(t, frontier)?;
                    }
                }
                if next_obs <= frontier {
                    self.fire_observers(frontier)?;
                    self.machine.fire_policy(frontier);
                    self.fire_placement(frontier)?;
                    if let Some(tier) = self.tiering.as_mut() {
                        tier.fire(&mut self.machine, frontier)?;
                    }
                }
                if self.all_done() {
                    break;
                }
                steps += 1;
                if steps & 63 == 0 && last_report.elapsed().as_millis() >= 100 {
                    last_report = Instant::now();
                    let p = Progress {
                        sim_ns: frontier / 1000,
                        total_ns,
                        accesses: self.machine.total(|c| c.accesses),
                    };
                    if progress(p) == Control::Stop {
                        interrupted = true;
                        let end = self
                            .machine
                            .cores
                            .iter()
                            .map(|c| c.clock_ps)
                            .max()
                            .unwrap_or(frontier)
                            .max(window_start + 1);
                        self.close_window(window_start, end.min(window_end));
                        break 'outer;
                    }
                }
            }
            if self.all_done() {
                let end = self.machine.cores.iter().map(|c| c.clock_ps).max().unwrap_or(window_end);
                if end > window_start {
                    self.close_window(window_start, end.min(window_end).max(window_start + 1));
                }
                break;
            }
            self.close_window(window_start, window_end);
            window_start = window_end;
            if window_end >= self.end_ps {
                break;
            }
        }
        for t in 0..self.threads {
            let b = &self.batches[t];
            if b.pos < b.buf.len() {
                self.workload.discard(t, &b.buf[b.pos..]);
            }
        }
        let p = Progress { sim_ns: frontier / 1000, total_ns, accesses: self.machine.total(|c| c.accesses) };
        progress(p);
        let end_ns = self.machine.cores.iter().map(|c| c.clock_ps).max().unwrap_or(0) / 1000;
        let mut samples = Vec::new();
        for o in &mut self.observers {
            let mut ctx = ObserverCtx {
                machine: &mut self.machine,
                now_ns: end_ns,
                core: o.core,
                cpu_ps: &mut o.cpu_ps,
            };
            o.obs.finish(&mut ctx)?;
            let s = o.obs.samples();
            if !s.is_empty() {
                samples.push((o.label.clone(), s));
            }
        }
        if let Some(p) = self.placement.as_mut() {
            p.finish(end_ns, &mut self.machine)?;
        }
        let wall_seconds = wall.elapsed().as_secs_f64();
        let mut stats = Stats::new();
        stats.collect(&self.machine);
        self.workload.report_stats(&mut stats);
        if let Some(tier) = &self.tiering {
            tier.report_stats(&self.machine, &mut stats);
        }
        if let (Some(p), Some(cfg)) = (&self.placement, &self.scenario.placement) {
            crate::placement::report(cfg.kind(), p.as_ref(), &self.machine, self.threads, &mut stats);
        }
        let sim_s = self.machine.cores.iter().map(|c| c.clock_ps).max().unwrap_or(0) as f64 / 1e12;
        stats.set("run.simulated_seconds", sim_s);
        stats.set("run.windows", self.windows);
        stats.set("run.seed", self.scenario.seed);
        stats.set("run.scenario", self.scenario.name.as_str());
        stats.set("run.interrupted", interrupted as u64);
        stats.set("run.threads", self.threads);
        stats.set("run.ground_truth_accesses", self.machine.gt.total_accesses);
        let target = self.scenario.scoring.target;
        if !self.observers.is_empty() {
            stats.set("scoring.target", target);
            stats.set("scoring.truth_threshold", self.scenario.scoring.truth_threshold as u64);
        }
        for o in &self.observers {
            let p = format!("telemetry.{}", o.label);
            stats.set(format!("{p}.kind"), o.kind);
            let mean = |v: &[f64]| {
                let f: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
                if f.is_empty() {
                    f64::NAN
                } else {
                    f.iter().sum::<f64>() / f.len() as f64
                }
            };
            stats.set(format!("{p}.mean_precision"), mean(&o.precision));
            stats.set(format!("{p}.mean_recall"), mean(&o.recall));
            let first = |v: &[f64]| v.iter().position(|&x| x >= target).map(|i| o.window_end_s[i]);
            if let Some(t) = first(&o.precision) {
                stats.set(format!("{p}.time_to_precision"), t);
            }
            if let Some(t) = first(&o.recall) {
                stats.set(format!("{p}.time_to_recall"), t);
            }
            let cpu = o.cpu_ps + o.obs.hw_cpu_ps(&self.machine);
            stats.set(format!("{p}.cpu_seconds"), cpu as f64 / 1e12);
            stats.set(format!("{p}.core"), o.core);
            // Time taken from the application: hardware interrupts land on application cores;
            // the observer's own work does when its core runs an application thread.
            let app_cpu = o.obs.hw_cpu_ps(&self.machine) + if o.core < self.threads { o.cpu_ps } else { 0 };
            stats.set(format!("{p}.app_cpu_seconds"), app_cpu as f64 / 1e12);
            o.obs.report_stats(&p, &mut stats);
        }
        let app_s =
            (0..self.threads).map(|t| self.machine.cores[t].clock_ps).max().unwrap_or(0) as f64 / 1e12;
        stats.set("run.app_seconds", app_s);
        let result = RunResult {
            scenario: self.scenario.clone(),
            stats,
            timeseries: self.timeseries,
            heatmap: self.heatmap,
            mappings: self.mappings,
            interrupted,
            wall_seconds,
            mapping_log: self.machine.mapping_log.clone(),
            samples,
        };
        Ok((result, self.placement.take()))
    }
}

impl StatsSource for Simulation {
    fn report_stats(&self, out: &mut Stats) {
        self.machine.report_stats(out);
        self.workload.report_stats(out);
    }
}

/// Convenience: open a spec, build and run without progress reporting.
pub fn run_spec(spec: &str, overrides: &[String], seed: Option<u64>) -> Result<RunResult> {
    let (sc, src) = crate::scenario::open(spec, overrides, seed)?;
    Simulation::new(sc, &src, None)?.run(&mut |_| Control::Continue)
}
