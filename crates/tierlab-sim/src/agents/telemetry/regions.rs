//! The region-based observer of [`super::damon`] and [`super::telescope`]: the settings the
//! two share ([`RegionSettings`]), how a technique samples its regions ([`Sampler`]), and the
//! observer ([`RegionObserver`]) that runs one monitoring context ([`Monitor`]: DAMON's
//! adaptive regions, in [`super::monitor`], whose types are re-exported here) with its DAMOS
//! schemes ([`super::damos`]), modelled on Linux `mm/damon/core.c` and `mm/damon/vaddr.c`
//! (facts in `reference/damon.md`). The observer uses the monitor and the schemes, the
//! schemes use the monitor's regions; neither uses the observer.
//!
//! # The loop (one event per sampling interval)
//! The observer runs once per sampling interval. Each event does, in this order (the order
//! of `kdamond_fn`):
//! 1. **check** the samples prepared one interval earlier (`nr_accesses += 1` per region
//!    whose profiled entry has its Accessed bit set again) — done by a [`Sampler`];
//! 2. at an **aggregation** boundary ([`Monitor::after_check`]):
//!    merge (threshold = largest `nr_accesses` / 10, size limit `sz_limit`, threshold
//!    doubled while the count exceeds `max_nr_regions`), split regions larger than
//!    `sz_limit` (min-regions rule), optional interval auto-tuning, **snapshot**, reset
//!    (`last_nr_accesses = nr_accesses; nr_accesses = 0`), random split into 2 or 3 pieces;
//! 3. at an **ops update** boundary: re-read the mappings and fit the regions to the new three
//!    ranges ([`super::monitor::three_regions`], [`super::monitor::set_regions`]);
//! 4. **prepare** the next samples: a random address per region, clear the Accessed bit of
//!    the entry it profiles, without a TLB flush — done by the [`Sampler`].
//!
//! The first prepare runs in [`Observer::start`] at time 0, after the regions were built
//! from the mappings (three ranges, then split at `sz_limit`, as `kdamond_fn` does before its
//! loop).
//!
//! # What is reported hot (the scoring rule)
//! At a window `[start, end)` the observer reports the regions of the **last aggregation
//! snapshot completed at or before `end`** whose `nr_accesses > hot_threshold`, with all their
//! bytes (the Telescope authors' rule for DAMON: threshold 5, every byte of a hot region
//! counts as reported hot). A snapshot is taken at each aggregation boundary, just before the
//! reset, so it holds the counts of the aggregation interval that just ended. Before the first
//! aggregation nothing is reported.
//!
//! # Cost
//! Every step is O(regions) per event: no per-page work, and no allocation per sample (the
//! region vectors and snapshots reuse their buffers).

use crate::agents::{Feed, FeedKind, MachineView, Ps, RegionSnapshot};
use crate::error::Result;
use crate::rng::Rng;
use crate::stats::Stats;
use crate::units::Duration;
use tierlab_core::param::params;

pub use super::monitor::{Attrs, IntervalsGoal, Monitor, Region, Snapshot};

pub use crate::agents::SnapRegion;

use super::{HotReport, Observer, ObserverCtx};

/// The region settings DAMON and Telescope share (flattened into both techniques' tables;
/// each gives its own defaults: DAMON's are the kernel's, Telescope's the paper's).
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct RegionSettings {
    /// Sampling interval.
    #[param(
        default = Duration(5_000_000),
        sourced = "reference/damon.md: sampling interval 5 ms, the kernel's and damo's default \
                   (reference/telescope.md: Telescope's sampling window too)"
    )]
    pub sample_interval: Duration,
    /// Aggregation interval (Telescope's profiling window; default: the technique's).
    #[param(required)]
    pub aggr_interval: Duration,
    /// Interval of re-reading the mappings (ops update; Telescope's VMA scan; default: the
    /// technique's).
    #[param(required)]
    pub ops_update_interval: Duration,
    /// Minimum number of regions.
    #[param(
        default = 10,
        range = "[3, 1e8]",
        unit = "regions",
        sourced = "reference/damon.md: min_nr_regions 10, the kernel's and damo's default"
    )]
    pub min_nr_regions: usize,
    /// Maximum number of regions.
    #[param(
        default = 1000,
        range = "[1, 1e8]",
        unit = "regions",
        sourced = "reference/damon.md: max_nr_regions 1000, the kernel's and damo's default"
    )]
    pub max_nr_regions: usize,
    /// A region is reported hot when its `nr_accesses` in the aggregation interval exceeds
    /// this.
    #[param(
        default = 5,
        range = "[0, 281474976710656]",
        unit = "accesses",
        sourced = "reference/damon.md: the Telescope authors report a region hot when its nr_accesses > 5"
    )]
    pub hot_threshold: u32,
    /// CPU time of one sample (prepare + check of one entry).
    #[param(
        default = 300.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "per sample, two software page-table walks (~150 ns each with cache misses, plus the \
                   lock and the bit operation)"
    )]
    pub ns_per_check: f64,
    /// Interval auto-tuning (the kernel's intervals goal).
    #[param(
        default = false,
        sourced = "reference/damon.md: interval auto-tuning is optional, off when aggrs = 0"
    )]
    pub auto_tune: bool,
    /// Auto-tuning goal: observed access events per possible ones.
    #[param(
        default = 400,
        range = "[1, 10000]",
        unit = "basis points",
        sourced = "reference/damon.md: the recommended intervals goal, 4% (400 bp)"
    )]
    pub tune_access_bp: u64,
    /// Auto-tuning period.
    #[param(
        default = 3,
        range = "[1, 1e6]",
        unit = "aggregations",
        sourced = "reference/damon.md: the recommended intervals goal, aggrs 3"
    )]
    pub tune_aggrs: u64,
    /// Smallest sampling interval auto-tuning may set.
    #[param(
        default = Duration(5_000_000),
        sourced = "reference/damon.md: the recommended intervals goal, min_sample 5 ms"
    )]
    pub tune_min_sample: Duration,
    /// Largest sampling interval auto-tuning may set.
    #[param(
        default = Duration(10_000_000_000),
        sourced = "reference/damon.md: the recommended intervals goal, max_sample 10 s"
    )]
    pub tune_max_sample: Duration,
}

/// Validated [`Attrs`] from the settings' values.
fn build_attrs(
    ctx: &super::TelemetryBuildCtx,
    sample: Duration,
    aggr: Duration,
    ops_update: Duration,
    min_nr_regions: usize,
    max_nr_regions: usize,
    tune: Option<(u64, u64, Duration, Duration)>,
) -> Result<Attrs> {
    let attrs = Attrs {
        sample: sample.ps(),
        aggr: aggr.ps(),
        ops_update: ops_update.ps(),
        min_nr_regions,
        max_nr_regions,
        goal: tune.map(|(access_bp, aggrs, min, max)| IntervalsGoal {
            access_bp,
            aggrs,
            min_sample: min.ps(),
            max_sample: max.ps(),
        }),
    };
    attrs.validate().map_err(|(field, msg)| ctx.err(field, msg))?;
    Ok(attrs)
}

impl RegionSettings {
    /// The settings with these aggregation and ops-update intervals and every other default.
    pub fn with_intervals(aggr: Duration, ops_update: Duration) -> Self {
        RegionSettings {
            sample_interval: Self::__param_default_sample_interval(),
            aggr_interval: aggr,
            ops_update_interval: ops_update,
            min_nr_regions: Self::__param_default_min_nr_regions(),
            max_nr_regions: Self::__param_default_max_nr_regions(),
            hot_threshold: Self::__param_default_hot_threshold(),
            ns_per_check: Self::__param_default_ns_per_check(),
            auto_tune: Self::__param_default_auto_tune(),
            tune_access_bp: Self::__param_default_tune_access_bp(),
            tune_aggrs: Self::__param_default_tune_aggrs(),
            tune_min_sample: Self::__param_default_tune_min_sample(),
            tune_max_sample: Self::__param_default_tune_max_sample(),
        }
    }

    /// The validated attributes.
    pub fn attrs(&self, ctx: &super::TelemetryBuildCtx) -> Result<Attrs> {
        build_attrs(
            ctx,
            self.sample_interval,
            self.aggr_interval,
            self.ops_update_interval,
            self.min_nr_regions,
            self.max_nr_regions,
            self.auto_tune.then_some((
                self.tune_access_bp,
                self.tune_aggrs,
                self.tune_min_sample,
                self.tune_max_sample,
            )),
        )
    }
}

/// How a technique samples its regions: DAMON's leaf-PTE sampling or Telescope's profiling
/// of upper page-table levels.
pub trait Sampler: Send {
    /// Pick every region's sampling address (uniform in `[start, end)`, from `rng`) and clear
    /// the Accessed bit of the entry it profiles, without a TLB flush; record the address and
    /// the entry's level in the region. Returns the number of entries prepared (cost units).
    fn prepare(&mut self, regions: &mut [Region], rng: &mut Rng, machine: &mut MachineView) -> u64;
    /// Test the entries prepared one interval earlier and add one to `nr_accesses` of every
    /// region whose entry's Accessed bit is set. Unmapped addresses count as not accessed.
    /// Returns the number of entries tested (results reused from an earlier region excluded).
    fn check(&mut self, regions: &mut [Region], machine: &MachineView) -> u64;
    /// Technique-specific stats, under `prefix.` (no trailing dot in `prefix`).
    fn report_stats(&self, _prefix: &str, _out: &mut Stats) {}
}

/// A region-based observer: a [`Monitor`] driven by a [`Sampler`].
pub struct RegionObserver<S: Sampler> {
    /// Regions and schedule.
    pub mon: Monitor,
    /// The sampling mechanism.
    pub sampler: S,
    /// CPU time of one sample (prepare + check of one entry), ns; half is charged when the
    /// entry is prepared, half when it is tested.
    pub ns_per_check: f64,
    /// A region is reported hot when `nr_accesses > hot_threshold`.
    pub hot_threshold: u32,
    next: Ps,
    /// Aggregations already published as region snapshots.
    published: u64,
    samples_checked: u64,
    entries_checked: u64,
    entries_prepared: u64,
    window_regions: usize,
    window_hot: usize,
    /// DAMOS schemes run in the loop (empty: monitoring only).
    pub damos: super::damos::Damos,
    /// Every aggregation's snapshot, kept for a damo record when asked for.
    pub record: Option<Vec<super::damos::RecordSnapshot>>,
    before: Vec<u32>,
    need_prepare: bool,
}

impl<S: Sampler> RegionObserver<S> {
    /// A new observer (regions are built in [`Observer::start`]).
    pub fn new(attrs: Attrs, rng: Rng, sampler: S, ns_per_check: f64, hot_threshold: u32) -> Self {
        RegionObserver {
            mon: Monitor::new(attrs, rng),
            sampler,
            ns_per_check,
            hot_threshold,
            next: Ps::NEVER,
            published: 0,
            samples_checked: 0,
            entries_checked: 0,
            entries_prepared: 0,
            window_regions: 0,
            window_hot: 0,
            damos: super::damos::Damos::new(Vec::new(), 0.0),
            record: None,
            before: Vec::new(),
            need_prepare: false,
        }
    }

    /// Time of the next iteration ([`Ps::NEVER`] before [`RegionObserver::begin`]).
    pub fn next(&self) -> Ps {
        self.next
    }

    /// Build the regions from the mappings and prepare the first samples at `now`
    /// (`kdamond_fn` before its loop). Returns the entries prepared (cost units).
    pub fn begin(&mut self, m: &mut MachineView, now: Ps) -> u64 {
        self.mon.init(m);
        if !self.damos.is_empty() {
            self.damos.set_next_apply(&self.mon);
        }
        let n = self.prepare(m);
        self.next = now + self.mon.attrs.sample;
        n
    }

    /// One iteration of `kdamond_fn` at `now`: the watermarks (when every scheme is
    /// inactive, only they are checked, every `interval`; sampling resumes with a fresh
    /// prepare), the check of the samples prepared one interval earlier (and the
    /// `nr_accesses_bp` moving sums when there are schemes), the merge at an aggregation
    /// boundary, the schemes (their actions go through `act`), interval tuning, snapshot,
    /// reset and split, the ops update, and the next prepare. Returns the entries tested and
    /// prepared (cost units of `ns_per_check / 2` each).
    pub fn step(&mut self, m: &mut MachineView, now: Ps, act: &mut dyn super::damos::Actor) -> Result<u64> {
        let schemes = !self.damos.is_empty();
        if schemes {
            let wait = self.damos.wait_activation(m);
            if wait > Ps::ZERO {
                self.need_prepare = true;
                self.next = now + wait;
                return Ok(0);
            }
            if self.need_prepare {
                self.need_prepare = false;
                let n = self.prepare(m);
                self.next = now + self.mon.attrs.sample;
                return Ok(n);
            }
            self.before.clear();
            self.before.extend(self.mon.regions.iter().map(|r| r.nr_accesses));
        }
        let tested = self.sampler.check(&mut self.mon.regions, m);
        self.samples_checked += self.mon.regions.len() as u64;
        self.entries_checked += tested;
        if schemes {
            self.mon.update_access_rates(&self.before);
        }
        let p = self.mon.begin_after_check();
        if schemes {
            self.damos.apply(&mut self.mon, m, act, now)?;
        }
        let (tunings, aggrs) = (self.mon.tunings, self.mon.aggregations);
        self.mon.end_after_check(p, now, m);
        if schemes && self.mon.tunings != tunings {
            // damon_set_attrs re-arms every scheme (damos_set_next_apply_sis).
            self.damos.set_next_apply(&self.mon);
        }
        if self.mon.aggregations != aggrs {
            if let (Some(rec), Some(s)) = (self.record.as_mut(), self.mon.latest_snapshot()) {
                rec.push((s.start, s.end, s.regions.clone()));
            }
        }
        let prepared = self.prepare(m);
        self.next = now + self.mon.attrs.sample;
        Ok(tested + prepared)
    }

    /// CPU time of `units` entries tested or prepared (`ns_per_check / 2` each).
    pub fn check_time(&self, units: u64) -> Ps {
        Ps::from_ns_f64(units as f64 * self.ns_per_check / 2.0)
    }

    fn prepare(&mut self, machine: &mut MachineView) -> u64 {
        let n = self.sampler.prepare(&mut self.mon.regions, &mut self.mon.rng, machine);
        self.entries_prepared += n;
        n
    }
}

impl<S: Sampler + 'static> Observer for RegionObserver<S> {
    fn start(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        if ctx.machine.page_tables().is_none() {
            return Err(crate::SimError::runtime(
                "region-based telemetry reads Accessed bits of radix page tables, which this memory \
                 backend does not have (the hierarchical backend keeps per-core PTE state only)",
            ));
        }
        let now = ctx.now;
        let n = self.begin(&mut ctx.machine, now);
        ctx.charge(self.check_time(n));
        Ok(())
    }

    fn next_event(&self) -> Ps {
        self.next
    }

    fn publishes(&self) -> &'static [FeedKind] {
        &[FeedKind::Regions]
    }

    fn on_event(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        let now = ctx.now;
        // The kdamond's own core works from now on; actions charge it directly.
        ctx.machine.start_work(ctx.core, now);
        let mut act = super::damos::DirectActor::new(ctx.core);
        let units = self.step(&mut ctx.machine, now, &mut act)?;
        *ctx.cpu += act.charged;
        if self.mon.aggregations != self.published && ctx.wants(FeedKind::Regions) {
            self.published = self.mon.aggregations;
            if let Some(snap) = self.mon.latest_snapshot() {
                ctx.publish(Feed::Regions(std::sync::Arc::new(RegionSnapshot {
                    regions: snap.regions.clone(),
                    max_nr_accesses: self.mon.aggr_samples.min(u32::MAX as u64) as u32,
                    hot_threshold: self.hot_threshold,
                    time: snap.end,
                })));
            }
        }
        ctx.charge(self.check_time(units));
        Ok(())
    }

    fn hot_set(&mut self, _start: Ps, end: Ps, _machine: &MachineView) -> HotReport {
        let Some(snap) = self.mon.snapshot_at(end) else {
            self.window_regions = 0;
            self.window_hot = 0;
            return HotReport::Regions(Vec::new());
        };
        let (ranges, n) = snap.hot_ranges(self.hot_threshold);
        self.window_regions = snap.regions.len();
        self.window_hot = n;
        HotReport::Regions(ranges)
    }

    fn damo_record(&self) -> Option<String> {
        let rec = self.record.as_ref()?;
        let a = &self.mon.attrs;
        Some(super::damos::damo_record_json(a.sample, a.aggr, a.ops_update, rec))
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        vec![
            ("nr_regions".to_string(), self.window_regions as f64),
            ("nr_hot_regions".to_string(), self.window_hot as f64),
        ]
        .into_iter()
        .chain(self.damos.window_columns())
        .collect()
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        let p = prefix.trim_end_matches('.');
        out.set(format!("{p}.nr_regions"), self.mon.regions.len());
        out.set(format!("{p}.aggregations"), self.mon.aggregations);
        out.set(format!("{p}.ops_updates"), self.mon.ops_updates);
        out.set(format!("{p}.samples_checked"), self.samples_checked);
        out.set(format!("{p}.entries_checked"), self.entries_checked);
        out.set(format!("{p}.entries_prepared"), self.entries_prepared);
        out.set(format!("{p}.checks_reused"), self.samples_checked - self.entries_checked);
        out.set(format!("{p}.sampling_interval_s"), self.mon.attrs.sample.secs_f64());
        out.set(format!("{p}.aggregation_interval_s"), self.mon.attrs.aggr.secs_f64());
        out.set(format!("{p}.interval_tunings"), self.mon.tunings);
        out.set(format!("{p}.hot_threshold"), self.hot_threshold as u64);
        self.sampler.report_stats(p, out);
        self.damos.report_stats(p, out);
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! A miniature driver for end-to-end tests of region-based observers.
    use super::*;
    use crate::os::{Machine, MachineConfig};
    use crate::workload::{Access, AddressSpace, MapOptions};

    /// A 2-core machine (core 0 runs the workload, core 1 the observer).
    pub fn machine() -> Machine {
        let mut m = Machine::new(&MachineConfig { cores: 2, ..MachineConfig::default() });
        m.os.mm_cpumask[0] = true;
        m
    }

    /// Map and populate `len` bytes.
    pub fn map(m: &mut Machine, len: u64, name: &str) -> u64 {
        m.mmap(len, MapOptions { populate: true, ..MapOptions::named(name) }).unwrap()
    }

    /// Run `obs` until `end` while core 0 reads random 64-byte lines of `[lo, hi)`.
    /// Returns the observer's CPU time.
    pub fn drive(obs: &mut dyn Observer, m: &mut Machine, end: Ps, lo: u64, hi: u64, seed: u64) -> Ps {
        let mut cpu = Ps::ZERO;
        obs.start(&mut crate::agents::testing::ctx(m, Ps::ZERO, 1, &mut cpu)).unwrap();
        let mut rng = Rng::new(seed);
        let lines = (hi - lo) / 64;
        loop {
            let t = obs.next_event();
            if t > end {
                break;
            }
            while m.hw.cores[0].clock_ps < t.ps() {
                m.access(0, Access::read(lo + rng.below(lines) * 64)).unwrap();
            }
            obs.on_event(&mut crate::agents::testing::ctx(m, t, 1, &mut cpu)).unwrap();
            assert!(obs.next_event() > t);
        }
        cpu
    }

    /// Precision and recall of `report` against the byte range `[lo, hi)`.
    pub fn precision_recall(report: &HotReport, lo: u64, hi: u64) -> (f64, f64) {
        let HotReport::Regions(r) = report else { panic!("region report expected") };
        let reported: u64 = r.iter().map(|(s, e)| e - s).sum();
        let tp: u64 = r.iter().map(|&(s, e)| e.min(hi).saturating_sub(s.max(lo))).sum();
        let p = if reported == 0 { 0.0 } else { tp as f64 / reported as f64 };
        (p, tp as f64 / (hi - lo) as f64)
    }
}
