//! `profile-guided`: hardware profile-guided page placement (Marathe and Mueller, PPoPP 2006;
//! `../shared/papers/numa-placement-abstract.txt`).
//!
//! The method: sample an approximate trace of memory accesses with the performance-monitoring
//! hardware, give every sampled page an *affinity* = the node whose cores' samples hit it
//! most, and place each page at its affinity node. Pages no sample hit keep the default
//! (first-touch) placement.
//!
//! # Sources (`source`)
//! - `long-latency-loads` (default; the paper's better indicator): every `period`-th load that
//!   misses the cores' cache model (the PEBS hardware model's miss-only load event,
//!   [`crate::machine::pebs`]; without `[machine.cache]` every load counts as a miss). Stores
//!   are not sampled.
//! - `tlb-misses`: every `period`-th TLB miss (a page walk), loads and stores
//!   ([`super::sampling`]). A core misses the TLB about once per page it streams through
//!   however often it uses the page, so pages shared at partition boundaries get weaker
//!   affinities than with loads.
//!
//! Each sample is delivered to the profiler by an overflow interrupt (`buffer_records` = 1:
//! the paper's interrupt-driven user-mode scheme; Itanium 2's data event address register
//! holds one sample) whose handler cost, `interrupt_cycles`, is charged to the sampled core.
//! That time is the profiling overhead, reported as a percentage of the run without it.
//!
//! # Modes (`mode`)
//! - `next-run` (default; the paper's scheme): a profiling stage (the same scenario with
//!   `mode = "profile"`: first touch, sampling on, no telemetry) produces the affinities;
//!   the reported run then allocates every profiled page at its affinity node at first touch
//!   (static and dynamic allocations alike). The driver runs the stage first
//!   ([`PlacementParams::stage`]) and hands its plan and stats to this policy. The profiling
//!   run's overhead is the one-time profiling overhead (`placement.profiling_overhead_pct`).
//! - `migrate`: one run. Sampling runs for `interval` of simulated time; then the affinities
//!   are computed and every profiled page not on its affinity node is migrated
//!   ([`Machine::migrate_page`]: the copy at the slower node's bandwidth plus a TLB shootdown,
//!   charged to `core`), and pages not yet allocated follow the affinity at first touch.
//! - `profile`: the profiling run alone (sampling on for the whole run, first touch).
//!
//! # Parameters
//! [`ProfileGuidedParams`] (defaults, ranges and sources in `docs/parameters.md`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    plan_of, PlacementBuildCtx, PlacementCheckCtx, PlacementConfig, PlacementParams, PlacementPolicy, Plan,
    StageRequest,
};
use crate::agents::{AgentCtx, MachineView, Ps, NEVER};
use crate::error::{Result, SimError};
use crate::hw::pebs::PebsHwConfig;
use crate::hw::tlb_sampler::TlbMissSampler;
use crate::os::memory::Placement;
use crate::stats::Stats;
use crate::units::Duration;
use tierlab_core::param::params;
use tierlab_core::plan::{affinity, AffinityRule};

/// When pages are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// A profiling run, then a run that allocates each page at its affinity node.
    NextRun,
    /// Migrate pages after a profiling interval of the same run.
    Migrate,
    /// The profiling run alone.
    Profile,
}

/// What is sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SampleSource {
    /// Loads that miss the caches (PEBS miss-only load event).
    LongLatencyLoads,
    /// TLB misses.
    TlbMisses,
}

impl SampleSource {
    fn name(self) -> &'static str {
        match self {
            SampleSource::LongLatencyLoads => "long-latency-loads",
            SampleSource::TlbMisses => "tlb-misses",
        }
    }

    /// The event name its samples carry in a recording.
    fn event(self) -> &'static str {
        match self {
            SampleSource::LongLatencyLoads => "l2-miss-loads",
            SampleSource::TlbMisses => "tlb-misses",
        }
    }
}

/// Parameters of `profile-guided`.
#[params]
#[derive(Clone, Debug)]
pub struct ProfileGuidedParams {
    /// `"next-run"`, `"migrate"` or `"profile"`.
    #[param(
        default = Mode::NextRun,
        sourced = "papers/numa-placement-abstract.txt: a profiling run (a one-time overhead), then placement"
    )]
    pub mode: Mode,
    /// `"long-latency-loads"` or `"tlb-misses"`.
    #[param(
        default = SampleSource::LongLatencyLoads,
        sourced = "papers/numa-placement-abstract.txt: long-latency loads are the better indicator"
    )]
    pub source: SampleSource,
    /// One sample every this many events (long-latency loads or TLB misses).
    #[param(
        default = 1000,
        range = "[1, 1e12]",
        unit = "events",
        calibrated = "papers/numa-placement-abstract.txt: 'a one-time profiling overhead of 2.7%'; the \
                   abstract gives no sampling interval, and 1 in 1000 was chosen to put the \
                   profiling run's overhead near that 2.7% (while the kernels' pages still get \
                   samples); `tierlab reproduce numa` sweeps it"
    )]
    pub period: u64,
    /// Samples buffered per interrupt (1: an interrupt per sample).
    #[param(
        default = 1,
        range = "[1, 1e9]",
        unit = "samples",
        assumed = "the paper's interrupt-driven user-mode sampling (papers/numa-placement-abstract.txt) \
                   with one sample per interrupt, as Itanium 2's data event address register holds one"
    )]
    pub buffer_records: usize,
    /// Interrupt handler cost at `machine.cpu_ghz`.
    #[param(
        default = 20_000.0,
        range = "[0, 1e12]",
        unit = "cycles",
        assumed = "no handler cost is published for the paper's Itanium 2 (SGI Altix); the only measured \
                   one in the references is the PEBS paper's ~20,000 cycles on Knights Landing \
                   (reference/cost-model.md), reused here"
    )]
    pub interrupt_cycles: f64,
    /// Samples a page needs to get an affinity.
    #[param(
        default = 1,
        range = "[1, 281474976710656]",
        unit = "samples",
        assumed = "any sample gives a page an affinity (the paper's most frequently accessing node \
                   with the samples it has)"
    )]
    pub min_samples: u32,
    /// `migrate`: profiling interval from the start of the run.
    #[param(
        default = Duration(100_000_000),
        assumed = "long enough to cover the serial initialization and many iterations of the STREAM \
                   kernel of `numa-placement` (which sets 30 ms for its shorter Jacobi runs)"
    )]
    pub interval: Duration,
    /// `migrate`: pages moved per batch (one TLB shootdown per batch).
    #[param(
        default = 512, // not a page size: pages per batch
        range = "[1, 281474976710656]",
        unit = "pages",
        assumed = "Linux batches the TLB flush of a migration list, so a batch costs its copies plus \
                   one shootdown"
    )]
    pub batch_pages: usize,
    /// `migrate`: the core that migrates pages (default: the first core without an
    /// application thread, else core 0).
    #[param(default, range = "[0, 4095]", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core: Option<usize>,
}

tierlab_core::choice_param!(Mode, SampleSource);

impl PlacementParams for ProfileGuidedParams {
    fn check(&self, ctx: &PlacementCheckCtx) -> std::result::Result<(), (String, String)> {
        let e = |f: &str, m: String| Err((f.to_string(), m));
        if self.interval.0 == 0 {
            return e("interval", "must be > 0".into());
        }
        if let Some(c) = self.core {
            if c >= ctx.cores {
                return e("core", format!("core {c} does not exist (machine.cores = {})", ctx.cores));
            }
        }
        if self.source == SampleSource::LongLatencyLoads && self.mode != Mode::NextRun && ctx.pebs_telemetry {
            return e(
                "source",
                "long-latency-loads uses the machine's PEBS hardware, which the scenario's `pebs` telemetry also uses: use source = \"tlb-misses\" or mode = \"next-run\"".into(),
            );
        }
        Ok(())
    }

    fn stage(&self) -> Option<StageRequest> {
        if self.mode != Mode::NextRun {
            return None;
        }
        let mut pp = self.clone();
        pp.mode = Mode::Profile;
        Some(StageRequest {
            name: "profile".into(),
            placement: PlacementConfig::ProfileGuided(pp),
            without_telemetry: true,
        })
    }

    fn build(&self, ctx: &PlacementBuildCtx) -> Result<Box<dyn PlacementPolicy>> {
        let cores = ctx.cores;
        let mut pg = ProfileGuided {
            p: self.clone(),
            interrupt: Ps::from_ns_f64(self.interrupt_cycles / ctx.cpu_ghz),
            core: self.core.unwrap_or_else(|| ctx.default_core()),
            threads: ctx.threads,
            counts: BTreeMap::new(),
            sampling_on: false,
            next_event: NEVER,
            samples: 0,
            sampling: vec![Ps::ZERO; cores],
            migration: vec![Ps::ZERO; cores],
            pages_with_affinity: 0,
            migrated_pages: 0,
            migrate_skipped: 0,
            migration_ns: 0.0,
            plan: None,
            profile_run: None,
            log: tierlab_core::SampleSet::with_events(vec![self.source.event().to_string()])
                .spilling(crate::agents::telemetry::pebs::SPILL_ROWS),
        };
        if self.mode == Mode::NextRun {
            // The profiling stage ran first: its plan and measurements.
            let input = ctx.input.ok_or_else(|| {
                SimError::runtime("profile-guided next-run: the profiling stage did not run before this one")
            })?;
            let plan = input.plan.clone().ok_or_else(|| {
                SimError::runtime("profile-guided: the profiling run produced no placement plan")
            })?;
            let res = &input.stats;
            let f = |k: &str| res.get(k).map(|v| v.as_f64()).unwrap_or(f64::NAN);
            pg.profile_run = Some(ProfileRun {
                run_time_s: f("placement.run_time_s"),
                overhead_s: f("placement.overhead_s"),
                overhead_pct: f("placement.overhead_pct"),
                samples: res.get_u64("placement.profile.samples"),
                pages_with_affinity: res.get_u64("placement.profile.pages_with_affinity"),
            });
            pg.pages_with_affinity = res.get_u64("placement.profile.pages_with_affinity");
            pg.plan = Some(plan);
        }
        Ok(Box::new(pg))
    }
}

/// What the profiling run of `next-run` measured.
#[derive(Clone, Debug)]
struct ProfileRun {
    run_time_s: f64,
    overhead_s: f64,
    overhead_pct: f64,
    samples: u64,
    pages_with_affinity: u64,
}

/// The `profile-guided` policy.
pub struct ProfileGuided {
    p: ProfileGuidedParams,
    /// Interrupt handler time.
    interrupt: Ps,
    core: usize,
    threads: usize,
    /// Samples per page (page address -> page bytes, samples per node).
    counts: BTreeMap<u64, (u64, Vec<u32>)>,
    sampling_on: bool,
    next_event: Ps,
    samples: u64,
    /// Per core: time in sampling interrupts, and taken by migrations.
    sampling: Vec<Ps>,
    migration: Vec<Ps>,
    pages_with_affinity: u64,
    migrated_pages: u64,
    migrate_skipped: u64,
    migration_ns: f64,
    /// `next-run`: the plan of the profiling run; `profile`: the plan this run produced.
    plan: Option<Plan>,
    profile_run: Option<ProfileRun>,
    /// Every sample taken, as rows of the recording format's `samples` table.
    /// The samples taken, as the recording format's rows (the core is the CPU and the
    /// thread; times are whole ns), spilled to disk past
    /// [`crate::agents::telemetry::pebs::SPILL_ROWS`].
    log: tierlab_core::SampleSet,
}

impl ProfileGuided {
    fn start_sampling(&mut self, m: &mut MachineView) -> Result<()> {
        let cap = self.p.buffer_records;
        match self.p.source {
            SampleSource::LongLatencyLoads => {
                if m.pebs().is_some() {
                    return Err(SimError::runtime(
                        "profile-guided placement: the PEBS hardware is already in use by another observer",
                    ));
                }
                m.enable_pebs(PebsHwConfig {
                    loads: true,
                    stores: false,
                    period: self.p.period,
                    capacity: cap,
                    threshold: cap,
                    interrupt_ps: self.interrupt.ps(),
                    miss_only: true,
                });
            }
            SampleSource::TlbMisses => {
                let cores = m.cores();
                m.set_tlb_sampler(Some(TlbMissSampler::new(cores, self.p.period, cap, self.interrupt.ps())));
            }
        }
        self.sampling_on = true;
        Ok(())
    }

    /// Consume the samples handed over so far.
    fn collect(&mut self, now: Ps, m: &mut MachineView) {
        let mut recs: Vec<(u32, u64)> = Vec::new();
        if let Some(hw) = m.pebs_mut() {
            for d in std::mem::take(&mut hw.drained) {
                recs.extend(d.records.iter().map(|&(a, _)| (d.core, a)));
                for &(addr, _) in &d.records {
                    self.log.push_at(d.time.whole_ns(), d.core, d.core, d.index, addr, 0);
                }
            }
        }
        if let Some(s) = m.tlb_sampler_mut() {
            let drain = self.log.last_drain().map_or(0, |d| d + 1);
            for &(core, addr) in &s.drained {
                self.log.push_at(now.whole_ns(), core, core, drain, addr, 0);
            }
            recs.append(&mut s.drained);
        }
        let nodes = m.nodes().len();
        for (core, addr) in recs {
            let node = m.core_node(core as usize) as usize;
            let Some(v) = m.vma_of(addr) else { continue };
            let size = v.page_size.bytes();
            let e = self.counts.entry(addr & !(size - 1)).or_insert_with(|| (size, vec![0; nodes]));
            e.1[node] += 1;
            self.samples += 1;
        }
    }

    /// Stop sampling: flush buffers, consume every sample, account the interrupt time.
    fn stop_sampling(&mut self, now: Ps, m: &mut MachineView) {
        if !self.sampling_on {
            return;
        }
        if let Some(hw) = m.pebs_mut() {
            hw.flush(now);
        }
        if let Some(s) = m.tlb_sampler_mut() {
            s.flush();
        }
        self.collect(now, m);
        if let Some(hw) = m.disable_pebs() {
            for (i, c) in hw.cores.iter().enumerate() {
                self.sampling[i] += Ps::from_ps(c.interrupt_ps);
            }
        }
        if let Some(s) = m.set_tlb_sampler(None) {
            for (i, &b) in s.busy_ps.iter().enumerate() {
                self.sampling[i] += Ps::from_ps(b);
            }
        }
        self.sampling_on = false;
    }

    /// Each profiled page's affinity: (page address, page bytes, node), by address.
    /// The placement rule is `tierlab_core::plan::affinity`, the code `tierlab place plan`
    /// runs on a recording: most samples wins, ties to the lower node, pages with fewer than
    /// `min_samples` samples left out.
    fn affinities(&self) -> Vec<(u64, u64, u8)> {
        let rule = AffinityRule { allowed: None, min_samples: u64::from(self.p.min_samples) };
        affinity(self.counts.iter().map(|(&va, (len, c))| (va, *len, c.as_slice())), &rule)
            .targets
            .iter()
            .map(|t| (t.addr, t.bytes, t.node as u8))
            .collect()
    }

    fn migrate(&mut self, now: Ps, m: &mut MachineView) -> Result<()> {
        let aff = self.affinities();
        self.pages_with_affinity = aff.len() as u64;
        let core = self.core;
        m.start_work(core, now);
        let before: Vec<Ps> = (0..m.cores()).map(|i| m.core_clock(i)).collect();
        // Batches per destination node, as move_pages(2) moves a list with one flush.
        let nodes = m.nodes().len();
        let mut todo: Vec<Vec<u64>> = vec![Vec::new(); nodes];
        let mut room: Vec<u64> =
            m.nodes().iter().map(|n| n.capacity_pages.saturating_sub(n.used_pages)).collect();
        for &(va, len, node) in &aff {
            match m.node_of(va) {
                Some(n) if n != node => {
                    let pages = tierlab_core::pages_for(len);
                    if room[node as usize] >= pages {
                        room[node as usize] -= pages;
                        todo[node as usize].push(va);
                    } else {
                        self.migrate_skipped += 1;
                    }
                }
                _ => {}
            }
        }
        for (node, vas) in todo.iter().enumerate() {
            for batch in vas.chunks(self.p.batch_pages) {
                let r = m.migrate_pages(batch, node as u8, core)?;
                self.migration_ns += r.ns;
                self.migrated_pages += r.pages;
            }
        }
        for (i, &b) in before.iter().enumerate() {
            self.migration[i] += m.core_clock(i) - b;
        }
        // Pages not allocated yet follow their affinity at first touch.
        m.set_preferred(plan_of(aff));
        Ok(())
    }
}

impl PlacementPolicy for ProfileGuided {
    fn mode(&self) -> String {
        match self.p.mode {
            Mode::NextRun => "next-run",
            Mode::Migrate => "migrate",
            Mode::Profile => "profile",
        }
        .into()
    }

    fn prepare(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        let m = &mut ctx.machine;
        m.set_placement(Placement::FirstTouch);
        m.set_preferred(match (self.p.mode, &self.plan) {
            (Mode::NextRun, Some(plan)) => plan.clone(),
            _ => Vec::new(),
        });
        Ok(())
    }

    fn start(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        match self.p.mode {
            Mode::NextRun => Ok(()),
            Mode::Profile => self.start_sampling(&mut ctx.machine),
            Mode::Migrate => {
                self.next_event = self.p.interval.ps();
                self.start_sampling(&mut ctx.machine)
            }
        }
    }

    fn next_event(&self) -> Ps {
        self.next_event
    }

    fn on_event(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        self.next_event = NEVER;
        if self.p.mode == Mode::Migrate {
            self.stop_sampling(ctx.now, &mut ctx.machine);
            self.migrate(ctx.now, &mut ctx.machine)?;
        }
        Ok(())
    }

    fn finish(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        self.stop_sampling(ctx.now, &mut ctx.machine);
        if self.p.mode == Mode::Profile {
            let aff = self.affinities();
            self.pages_with_affinity = aff.len() as u64;
            self.plan = Some(plan_of(aff));
        }
        Ok(())
    }

    fn overhead(&self) -> Vec<Ps> {
        self.sampling.iter().zip(&self.migration).map(|(&a, &b)| a + b).collect()
    }

    fn report_stats(&self, out: &mut Stats) {
        let pre = "placement.profile";
        out.set(format!("{pre}.source"), self.p.source.name());
        out.set(format!("{pre}.period"), self.p.period);
        match &self.profile_run {
            Some(r) => {
                out.set(format!("{pre}.samples"), r.samples);
                out.set(format!("{pre}.pages_with_affinity"), r.pages_with_affinity);
                out.set("placement.profile_run.run_time_s", r.run_time_s);
                out.set("placement.profile_run.overhead_s", r.overhead_s);
                out.set("placement.profile_run.overhead_pct", r.overhead_pct);
                // The one-time profiling overhead is the profiling run's.
                out.set("placement.profiling_overhead_pct", r.overhead_pct);
            }
            None => {
                out.set(format!("{pre}.samples"), self.samples);
                out.set(format!("{pre}.pages_with_affinity"), self.pages_with_affinity);
                let t: Ps = self.sampling[..self.threads.min(self.sampling.len())].iter().copied().sum();
                out.set(format!("{pre}.interrupt_s"), t.secs_f64());
            }
        }
        if self.p.mode == Mode::Migrate {
            out.set("placement.migrate.interval_s", self.p.interval.secs_f64());
            out.set("placement.migrate.pages", self.migrated_pages);
            out.set("placement.migrate.skipped_full", self.migrate_skipped);
            out.set("placement.migrate.time_s", self.migration_ns / 1e9);
            out.set("placement.migrate.core", self.core);
        }
    }

    fn take_plan(&mut self) -> Option<Plan> {
        self.plan.take()
    }

    fn take_samples(&mut self) -> tierlab_core::SampleSet {
        std::mem::take(&mut self.log)
    }
}
