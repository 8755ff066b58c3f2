//! `pebs`: the McKernel-like PEBS driver on the machine's PEBS hardware ([`crate::hw::pebs`]),
//! and the observer shared by every driver of that hardware (`perf-pebs`: Linux perf;
//! `ibs`: AMD IBS op sampling).
//!
//! The hardware writes a record every R-th event (the reset value) into the sampled core's
//! buffer, each record costing the core a PEBS assist, and, when `threshold` records are in
//! it, takes an interrupt that costs the handler's time on that core and hands the records
//! over as one *drain* stamped with one timestamp (the McKernel driver's design: Knights
//! Landing records carry no time). This driver:
//! - configures the hardware at start: event, R, buffer capacity = `buffer_size` /
//!   `record_size` records, interrupt at `threshold_fraction` of it, handler cost
//!   `interrupt_cycles` (+ `drain_cycles_per_record` per record) at `machine.cpu_ghz`, an
//!   assist of `assist_ns` per record, the records' cache lines written through the cache
//!   model (`pollution`);
//! - with `drain = "dedicated-thread"` (the paper's future work) takes no interrupt: a
//!   hardware thread on the observer's core polls every core's buffer every `poll_interval`,
//!   costing that core `poll_cycles_per_record` per record; a record that finds its buffer
//!   full is lost;
//! - every `tick` consumes the drains (and, in frequency mode, re-computes R);
//! - reports hot, per scoring window, the pages that got at least `min_samples` samples whose
//!   drain time lies in the window (records still in a buffer have no time yet and count
//!   when their drain happens);
//! - keeps every sample for the simulated recording ([`Pebs::samples`]: the live recorder's
//!   `samples` schema).
//!
//! # Why R and B are not interchangeable
//! Each record costs its assist whatever the buffer; the buffer only spreads the handler's
//! fixed cost over more records. Per event the overhead is
//! `(assist + drain per record + interrupt / records per interrupt) / R`: halving R doubles
//! all of it, halving B doubles only the last term.
//!
//! # Frequency mode
//! With `frequency_hz` set, R is re-computed at every tick from the observed event rate of
//! each core as perf does for `sample_freq` (`perf_adjust_period`): the ideal period is
//! events / (frequency x elapsed) and the period moves 1/8 of the way to it (perf's low-pass
//! filter, rounded away from zero). perf starts at period 1 and converges within its first
//! tick through per-overflow adjustments; this model starts at `period`, measures the event
//! rate over the first 100 us and takes that ideal period at once (the event count does not
//! depend on the period), then adjusts every tick with the filter. The hardware model has
//! one reset value for all cores: it is set to the mean of the per-core periods of the cores
//! that ran events, which keeps the machine's total sample rate at (those cores) x frequency.
//! The McKernel driver has no frequency mode: on `pebs` it keeps the buffer (scenarios written
//! before `perf-pebs` use it); `perf-pebs` is Linux's, one record per interrupt.
//!
//! # One per machine
//! The PEBS hardware has one configuration (event, R, buffer), and a drain is consumed once:
//! a second `pebs` observer on the same machine is an error. Run several configurations one
//! machine each (`tierlab telemetry` does).
//!
//! Parameters: [`PebsParams`] (defaults, ranges and sources in `docs/parameters.md`). The
//! costs whose defaults are assumptions rather than measurements (`assist_ns` on Knights
//! Landing, `drain_cycles_per_record`, and with the dedicated thread `poll_interval` and
//! `poll_cycles_per_record`) are reported, while at their defaults, in the `assumed_costs`
//! stat.

use serde::{Deserialize, Serialize};
use tierlab_core::param::params;

use super::*;
use crate::agents::{Feed, FeedKind, MachineView, Ps};
use crate::error::Result;
use crate::hw::pebs::{DrainMode, PebsCosts, PebsHwConfig, Throttle};
use crate::units::{ByteSize, Duration};

/// The sampled event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PebsEvent {
    /// Every load (MEM_INST_RETIRED.ALL_LOADS).
    Loads,
    /// Every store (MEM_INST_RETIRED.ALL_STORES).
    Stores,
    /// Loads and stores (both events, as in Telescope's comparison).
    All,
    /// Loads that miss the L2 (KNL's L2_MISS_LOADS, the McKernel driver's event); needs the
    /// machine's cache model.
    L2MissLoads,
}

impl PebsEvent {
    /// Name of the event of a record of access kind `kind` (0 load, 1 store), as the live
    /// recorder names its events.
    pub fn record_name(self, kind: u8) -> &'static str {
        match self {
            PebsEvent::L2MissLoads => "l2-miss-loads",
            _ if kind == 1 => "all-stores",
            _ => "all-loads",
        }
    }

    /// Events of `core` so far.
    pub(crate) fn count(self, m: &MachineView, core: usize) -> u64 {
        let c = m.core_counters(core);
        match self {
            PebsEvent::Loads => c.accesses() - c.writes,
            PebsEvent::Stores => c.writes,
            PebsEvent::All => c.accesses(),
            PebsEvent::L2MissLoads => m.core_cache(core).load_misses,
        }
    }

    /// (loads, stores) counted.
    fn kinds(self) -> (bool, bool) {
        match self {
            PebsEvent::Loads | PebsEvent::L2MissLoads => (true, false),
            PebsEvent::Stores => (false, true),
            PebsEvent::All => (true, true),
        }
    }
}

/// How the McKernel driver empties the PEBS buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DrainKind {
    /// A PMI at the threshold, handled on the sampled core (the paper's driver).
    #[default]
    Interrupt,
    /// A dedicated hardware thread polls the buffers (the paper's future work): no PMI on the
    /// application's cores.
    DedicatedThread,
}

tierlab_core::choice_param!(PebsEvent, DrainKind);

/// Parameters of `pebs` (the McKernel-like driver).
#[params]
#[derive(Clone, Debug)]
pub struct PebsParams {
    /// `loads`, `stores`, `all` or `l2-miss-loads`.
    #[param(
        default = PebsEvent::All,
        sourced = "reference/telescope.md: Telescope's PEBS comparison samples MEM_INST_RETIRED.ALL_LOADS \
                   and ALL_STORES"
    )]
    pub event: PebsEvent,
    /// Reset value R: a record every R events. In frequency mode, the starting value.
    #[param(
        default = 100,
        range = "[1, 1e12]",
        unit = "events",
        sourced = "reference/perf-sampling.md: the McKernel driver's default R = 100"
    )]
    pub period: u64,
    /// Frequency mode: samples per second per core (Telescope's PEBS moderate 5000,
    /// aggressive 10000); R follows the event rate. Absent: fixed R. Not a McKernel feature
    /// (see the module docs; `perf-pebs` is Linux's frequency mode).
    #[param(default, range = "(0, 1e10]", unit = "Hz", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_hz: Option<f64>,
    /// Per-core PEBS buffer.
    #[param(
        default = ByteSize(64 << 10),
        sourced = "reference/perf-sampling.md: the McKernel driver's default B = 64 KiB"
    )]
    pub buffer_size: ByteSize,
    /// Bytes per record.
    #[param(
        default = ByteSize(192),
        range = "[1, 65536]",
        unit = "bytes",
        sourced = "reference/perf-sampling.md: a KNL PEBS record is 192 bytes (24 u64)"
    )]
    pub record_size: ByteSize,
    /// The interrupt fires when the buffer holds this fraction of its records (rounded
    /// down, at least 1).
    #[param(
        default = 0.9,
        range = "(0, 1]",
        unit = "fraction",
        assumed = "the paper says only that the interrupt fires at 'a configurable threshold inside the \
                   CPU PEBS buffer' (section 3) and gives no value; reference/perf-sampling.md lists 90% \
                   among the driver's defaults without a source"
    )]
    pub threshold_fraction: f64,
    /// Interrupt handler cost (at `machine.cpu_ghz`).
    #[param(
        default = 20_000.0,
        range = "[0, 1e12]",
        unit = "cycles",
        sourced = "papers/pebs-mckernel-paper.txt: the interrupt handler took approximately 20 thousand \
                   cycles"
    )]
    pub interrupt_cycles: f64,
    /// Handler cycles per record drained, on top of `interrupt_cycles`.
    #[param(
        default = 0.0,
        range = "[0, 1e12]",
        unit = "cycles",
        assumed = "the paper gives the handler's total only (interrupt_cycles)"
    )]
    pub drain_cycles_per_record: f64,
    /// One PEBS assist (writing a record), charged inline to the sampled core.
    #[param(
        default = 250.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "the midpoint of 200-300 ns per record measured on Xeon (Akiyama & Hirofuchi, ROSS'17, \
                   reference/pebs-cost.md section 2) applied to Knights Landing, for which none is \
                   published; 40-73% of the modelled PEBS overhead on pebs-minife, so `tierlab reproduce \
                   pebs` sweeps it"
    )]
    pub assist_ns: f64,
    /// `interrupt` (the paper's driver) or `dedicated-thread` (the future work).
    #[param(default, setting)]
    pub drain: DrainKind,
    /// Dedicated thread: how often it empties the buffers.
    #[param(
        default = Duration(100_000),
        assumed = "an 8 KiB buffer of 42 records at R = 64 fills in ~0.4 ms at 6 M events/s"
    )]
    pub poll_interval: Duration,
    /// Dedicated thread: its cycles per record copied out.
    #[param(
        default = 540.0,
        range = "[0, 1e12]",
        unit = "cycles",
        assumed = "derived: the paper's 20,000-cycle handler over the 37 records of an 8 KiB buffer (an \
                   upper bound: the interrupt's entry and exit are in it too)"
    )]
    pub poll_cycles_per_record: f64,
    /// Write each record's cache lines through the cache model (`[machine.cache]`), so the
    /// records evict application lines (ROSS'17 names the pollution; it has no figure, so no
    /// time is charged for it beyond the misses it causes).
    #[param(default = true, setting)]
    pub pollution: bool,
    /// A page is hot in a window when it got at least this many samples there.
    #[param(
        default = 1,
        range = "[1, 281474976710656]",
        unit = "samples",
        assumed = "every sampled page is hot in its window"
    )]
    pub min_samples: u32,
    /// Driver tick: drains are consumed and frequency-mode periods adjusted this often.
    #[param(
        default = Duration(4_000_000),
        assumed = "perf adjusts on the scheduler tick, 4 ms at CONFIG_HZ=250 (reference/pebs-cost.md \
                   section 5); the McKernel driver has no tick"
    )]
    pub tick: Duration,
}

/// Frequency mode's first adjustment comes this soon after the start (or at the first tick
/// if that is sooner).
pub const FIRST_ADJUST: Ps = Ps::from_ns(100_000);

impl PebsParams {
    /// Records the buffer holds, and the record count at which the interrupt fires.
    pub fn capacity_and_threshold(&self) -> (usize, usize) {
        let cap = (self.buffer_size.0 / self.record_size.0.max(1)) as usize;
        let thr = ((cap as f64 * self.threshold_fraction) + 1e-9).floor() as usize;
        (cap, thr.clamp(1, cap.max(1)))
    }

    /// The observer's specification.
    pub fn spec(&self) -> Spec {
        let (capacity, threshold) = self.capacity_and_threshold();
        let dedicated = self.drain == DrainKind::DedicatedThread;
        Spec {
            driver: if dedicated { "mckernel-dedicated-thread" } else { "mckernel" },
            event: self.event,
            period: self.period,
            frequency_hz: self.frequency_hz,
            capacity,
            threshold: if dedicated { capacity } else { threshold },
            interrupt_cycles: self.interrupt_cycles,
            interrupt_ns: 0.0,
            drain_cycles_per_record: self.drain_cycles_per_record,
            drain_ns_per_record: 0.0,
            assist_ns: self.assist_ns,
            poller: dedicated.then_some(Poller {
                interval: self.poll_interval.ps(),
                cycles_per_record: self.poll_cycles_per_record,
            }),
            throttle: None,
            extra_interrupts_per_record: 0.0,
            pollution_record_bytes: if self.pollution { self.record_size.0 } else { 0 },
            period_quantum: 1,
            min_period: 1,
            min_samples: self.min_samples,
            tick: self.tick.ps(),
            assumed: [
                ("assist_ns", self.assist_ns == PebsParams::__param_default_assist_ns()),
                ("drain_cycles_per_record", self.drain_cycles_per_record == 0.0),
                (
                    "poll_cycles_per_record",
                    dedicated
                        && self.poll_cycles_per_record
                            == PebsParams::__param_default_poll_cycles_per_record(),
                ),
                (
                    "poll_interval",
                    dedicated && self.poll_interval == PebsParams::__param_default_poll_interval(),
                ),
            ]
            .into_iter()
            .filter_map(|(k, on)| on.then_some(k))
            .collect(),
        }
    }
}

/// A driver's polling thread (no interrupts).
#[derive(Clone, Debug, PartialEq)]
pub struct Poller {
    /// Time between two polls.
    pub interval: Ps,
    /// The poller's cycles per record copied out.
    pub cycles_per_record: f64,
}

/// What a driver (`pebs`, `perf-pebs`, `ibs`) asks of the PEBS hardware and of the observer
/// they share.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// Driver and mode, reported as the `driver` stat.
    pub driver: &'static str,
    /// The sampled event.
    pub event: PebsEvent,
    /// Reset value (the starting value in frequency mode).
    pub period: u64,
    /// Frequency mode's target samples per second per core.
    pub frequency_hz: Option<f64>,
    /// Records the buffer holds.
    pub capacity: usize,
    /// Records at which the interrupt fires.
    pub threshold: usize,
    /// Handler cost, cycles at the machine's clock (added to `interrupt_ns`).
    pub interrupt_cycles: f64,
    /// Handler cost, ns.
    pub interrupt_ns: f64,
    /// Handler cycles per record drained.
    pub drain_cycles_per_record: f64,
    /// Handler ns per record drained.
    pub drain_ns_per_record: f64,
    /// One assist, ns.
    pub assist_ns: f64,
    /// Polled instead of interrupts.
    pub poller: Option<Poller>,
    /// perf's throttling.
    pub throttle: Option<Throttle>,
    /// Interrupts per record beyond its drain's (IBS's address-less samples).
    pub extra_interrupts_per_record: f64,
    /// Bytes per record written through the cache model (0: none).
    pub pollution_record_bytes: u64,
    /// Periods are multiples of this (IBS: 16).
    pub period_quantum: u64,
    /// Smallest period (IBS: 144 since Linux 6.x).
    pub min_period: u64,
    /// A page is hot with at least this many samples in a window.
    pub min_samples: u32,
    /// Driver tick.
    pub tick: Ps,
    /// The cost parameters left at a default that is an assumption rather than a measurement
    /// (reported as the `assumed_costs` stat, so every result that depends on them says so).
    pub assumed: Vec<&'static str>,
}

impl Spec {
    /// Check the specification; errors name the field.
    pub fn validate(&self, ctx: &TelemetryBuildCtx) -> Result<()> {
        if self.period == 0 {
            return Err(ctx.err("period", "the reset value must be at least 1"));
        }
        if let Some(f) = self.frequency_hz {
            if !(f.is_finite() && f > 0.0) {
                return Err(ctx.err("frequency_hz", format!("{f} must be > 0")));
            }
        }
        for (field, v) in [
            ("interrupt_cycles", self.interrupt_cycles),
            ("drain_cycles_per_record", self.drain_cycles_per_record),
            ("assist_ns", self.assist_ns),
            ("drain_ns_per_record", self.drain_ns_per_record),
            ("interrupt_ns", self.interrupt_ns),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ctx.err(field, format!("{v} must be >= 0")));
            }
        }
        if let Some(p) = &self.poller {
            if p.interval == Ps::ZERO {
                return Err(ctx.err("poll_interval", "must be > 0"));
            }
            if !(p.cycles_per_record.is_finite() && p.cycles_per_record >= 0.0) {
                return Err(ctx.err("poll_cycles_per_record", "must be >= 0"));
            }
        }
        if self.min_samples == 0 {
            return Err(ctx.err("min_samples", "must be at least 1"));
        }
        if self.tick == Ps::ZERO {
            return Err(ctx.err("tick", "must be > 0"));
        }
        Ok(())
    }

    /// A period as the hardware takes it (quantum, minimum).
    fn quantize(&self, p: u64) -> u64 {
        let q = self.period_quantum.max(1);
        ((p / q) * q).max(self.min_period).max(1)
    }
}

impl TelemetryParams for PebsParams {
    fn publishes(&self) -> &'static [crate::agents::FeedKind] {
        &[crate::agents::FeedKind::Samples]
    }
    fn build(&self, label: &str, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
        if self.buffer_size.0 < self.record_size.0 {
            return Err(ctx.err(
                "buffer_size",
                format!("{} bytes hold no {}-byte record", self.buffer_size.0, self.record_size.0),
            ));
        }
        if self.drain == DrainKind::DedicatedThread && self.frequency_hz.is_some() {
            return Err(ctx.err("drain", "a dedicated drain thread needs a fixed period (no frequency_hz)"));
        }
        let spec = self.spec();
        spec.validate(ctx)?;
        Ok(Box::new(Pebs::new(spec, label.to_string(), ctx.cores)))
    }
}

/// Samples kept in memory before the older ones go to a temporary file (9 bytes each: about
/// 9 MB), so a run's memory does not grow with its samples.
pub const SPILL_ROWS: usize = 1 << 20;

/// The distinct pages of the samples, kept as a sorted list merged batch by batch (memory
/// for the distinct pages, not for the samples).
#[derive(Default)]
struct DistinctPages {
    sorted: Vec<u64>,
    pending: Vec<u64>,
}

impl DistinctPages {
    fn insert(&mut self, page: u64) {
        self.pending.push(page);
        if self.pending.len() >= (1 << 20).max(self.sorted.len()) {
            self.merge();
        }
    }

    fn merge(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.pending.sort_unstable();
        self.pending.dedup();
        let mut out = Vec::with_capacity(self.sorted.len() + self.pending.len());
        let (mut i, mut j) = (0, 0);
        while i < self.sorted.len() && j < self.pending.len() {
            let (a, b) = (self.sorted[i], self.pending[j]);
            out.push(a.min(b));
            i += usize::from(a <= b);
            j += usize::from(b <= a);
        }
        out.extend_from_slice(&self.sorted[i..]);
        out.extend_from_slice(&self.pending[j..]);
        self.sorted = out;
        self.pending.clear();
    }

    fn len(&self) -> usize {
        let mut p = self.pending.clone();
        p.sort_unstable();
        p.dedup();
        self.sorted.len() + p.iter().filter(|x| self.sorted.binary_search(x).is_err()).count()
    }
}

/// The observer of the PEBS hardware (every driver's).
pub struct Pebs {
    p: Spec,
    label: String,
    next: Ps,
    next_tick: Ps,
    next_poll: Ps,
    /// Every consumed sample, a run per drain (spilled to disk past [`SPILL_ROWS`]).
    set: tierlab_core::SampleSet,
    /// Distinct 4 KiB pages sampled.
    pages: DistinctPages,
    /// Samples once the samples were handed over ([`Observer::take_sample_set`] moves the set
    /// out, before the stats are reported).
    taken: Option<usize>,
    /// (drain time, page) of consumed samples not yet counted in a closed window.
    pending: Vec<(Ps, u64)>,
    /// Times of consumed drains not yet counted in a closed window.
    pending_drains: Vec<Ps>,
    /// Drains with an index below this were consumed.
    seen_upto: u64,
    /// Drains with an index below this were published as sample batches.
    published_upto: u64,
    drains: u64,
    /// Frequency mode: per-core event counts at the last tick, per-core periods, and whether
    /// a core's period was set from a measurement yet.
    last_events: Vec<u64>,
    last_tick: Ps,
    periods: Vec<u64>,
    adjusted: Vec<bool>,
    period_now: u64,
    adjustments: u64,
    /// Per-window figures (set by `hot_set`): samples and interrupts (drains) timed in it.
    win_samples: u64,
    win_interrupts: u64,
    total_interrupts: u64,
    /// Handler cost per interrupt (fixed part).
    irq: Ps,
    /// Handler cost per record.
    drain_rec: Ps,
    /// Assist cost.
    assist: Ps,
    /// Records the poller copied out, and its time.
    polled: u64,
    poll_time: Ps,
    hw_totals: HwTotals,
}

impl Pebs {
    /// The observer of `spec` on a machine of `cores` cores.
    pub fn new(spec: Spec, label: String, cores: usize) -> Self {
        let period = spec.quantize(spec.period);
        Pebs {
            next: Ps::NEVER,
            next_tick: Ps::NEVER,
            next_poll: Ps::NEVER,
            label,
            set: tierlab_core::SampleSet::with_events(
                (0..2).map(|k| spec.event.record_name(k).to_string()).collect(),
            )
            .spilling(SPILL_ROWS),
            pages: DistinctPages::default(),
            taken: None,
            pending: Vec::new(),
            pending_drains: Vec::new(),
            seen_upto: 0,
            published_upto: 0,
            drains: 0,
            last_events: vec![0; cores],
            last_tick: Ps::ZERO,
            periods: vec![period; cores],
            adjusted: vec![false; cores],
            period_now: period,
            adjustments: 0,
            win_samples: 0,
            win_interrupts: 0,
            total_interrupts: 0,
            irq: Ps::ZERO,
            drain_rec: Ps::ZERO,
            assist: Ps::ZERO,
            polled: 0,
            poll_time: Ps::ZERO,
            hw_totals: HwTotals::default(),
            p: spec,
        }
    }

    /// The specification.
    pub fn spec(&self) -> &Spec {
        &self.p
    }

    /// Samples consumed so far.
    pub fn sample_count(&self) -> usize {
        self.taken.unwrap_or(self.set.len())
    }

    /// Every sample consumed so far as rows of the recording format's `samples` table
    /// (`time_ns, tid, cpu, addr, ip, weight, data_src, event, drain`; tid = cpu = core,
    /// ip = weight = data_src = 0: the model records only the data address), in drain order.
    pub fn samples(&self) -> Vec<tierlab_core::Sample> {
        self.set.rows()
    }

    /// The reset value in use.
    pub fn period(&self) -> u64 {
        self.period_now
    }

    /// Distinct 4 KiB pages sampled over the run.
    pub fn pages_seen(&self) -> usize {
        self.pages.len()
    }

    fn take_drain(&mut self, d: &crate::hw::pebs::Drain) {
        if d.index < self.seen_upto {
            return;
        }
        self.seen_upto = d.index + 1;
        self.drains += 1;
        self.pending_drains.push(d.time);
        self.set.start_run(d.time.whole_ns(), d.core, d.core, d.index);
        for &(addr, kind) in &d.records {
            self.set.push_code(addr, kind & 1);
            self.pages.insert(tierlab_core::vpn(addr));
            self.pending.push((d.time, tierlab_core::vpn(addr)));
        }
    }

    /// Frequency mode: re-compute the period from each core's events since the last tick.
    fn adjust(&mut self, m: &mut MachineView, now: Ps) {
        let Some(freq) = self.p.frequency_hz else { return };
        let dt = now.saturating_sub(self.last_tick);
        if dt == Ps::ZERO {
            return;
        }
        let (mut sum, mut n) = (0u128, 0u128);
        for core in 0..m.cores() {
            let e = self.p.event.count(m, core);
            let delta = e - self.last_events[core];
            self.last_events[core] = e;
            if delta == 0 {
                continue;
            }
            let ideal = ((delta as f64 * 1e9) / (freq * dt.ns_f64())).round().max(1.0) as u64;
            let old = self.periods[core];
            let new = if !self.adjusted[core] {
                self.adjusted[core] = true;
                ideal
            } else {
                // perf_adjust_period: delta = (period - old), +-7, / 8 (toward zero).
                let d = ideal as i64 - old as i64;
                let d = if d >= 0 { (d + 7) / 8 } else { (d - 7) / 8 };
                (old as i64 + d).max(1) as u64
            };
            self.periods[core] = new;
            sum += new as u128;
            n += 1;
        }
        self.last_tick = now;
        if n == 0 {
            return;
        }
        let period = self.p.quantize(((sum + n / 2) / n).max(1) as u64);
        if period != self.period_now {
            m.set_pebs_period(period);
            self.period_now = period;
            self.adjustments += 1;
        }
    }

    /// Consume every drain handed over so far.
    fn consume(&mut self, m: &mut MachineView) {
        if let Some(hw) = m.pebs_mut() {
            let drained = std::mem::take(&mut hw.drained);
            for d in &drained {
                self.take_drain(d);
            }
            self.total_interrupts = hw.cores.iter().map(|c| c.interrupts).sum();
            self.hw_totals = HwTotals::of(hw);
        }
    }
}

/// The PEBS hardware's totals, as last seen by the observer.
#[derive(Clone, Debug, Default)]
struct HwTotals {
    interrupt: Ps,
    assist: Ps,
    lost: u64,
    throttles: u64,
    lowerings: u64,
    max_per_tick: Option<u64>,
}

impl HwTotals {
    fn of(hw: &crate::hw::pebs::PebsHw) -> Self {
        let sum = |f: fn(&crate::hw::pebs::PebsCore) -> u64| hw.cores.iter().map(f).sum::<u64>();
        HwTotals {
            interrupt: Ps::from_ps(sum(|c| c.interrupt_ps)),
            assist: Ps::from_ps(sum(|c| c.assist_ps)),
            lost: sum(|c| c.lost),
            throttles: sum(|c| c.throttles),
            lowerings: hw.lowerings,
            max_per_tick: hw.max_per_tick(),
        }
    }
}

impl Observer for Pebs {
    fn start(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        let now = ctx.now;
        let m = &mut ctx.machine;
        if m.pebs().is_some() {
            return Err(crate::SimError::runtime(format!(
                "telemetry `{}`: the machine's PEBS hardware is already configured by another PEBS \
                 observer; it has one configuration (event, reset value, buffer), so run each PEBS \
                 configuration on a machine of its own (`tierlab telemetry`, which does; or \
                 `tierlab telemetry --techniques {}`)",
                self.label, self.label
            )));
        }
        if self.p.event == PebsEvent::L2MissLoads && !m.core_cache(0).enabled() {
            return Err(crate::SimError::runtime(format!(
                "telemetry `{}`: event `l2-miss-loads` needs a cache model: add `[machine.cache]` \
                 (e.g. size = \"1MiB\", ways = 16, line = 64, Knights Landing's L2)",
                self.label
            )));
        }
        let (loads, stores) = self.p.event.kinds();
        let ghz = m.cpu_ghz();
        self.irq = Ps::from_ns_f64(self.p.interrupt_cycles / ghz + self.p.interrupt_ns);
        self.drain_rec = Ps::from_ns_f64(self.p.drain_cycles_per_record / ghz + self.p.drain_ns_per_record);
        self.assist = Ps::from_ns_f64(self.p.assist_ns);
        let costs = PebsCosts {
            assist_ps: self.assist.ps(),
            drain_ps_per_record: self.drain_rec.ps(),
            drain: if self.p.poller.is_some() { DrainMode::Polled } else { DrainMode::Interrupt },
            throttle: self.p.throttle.clone(),
            extra_interrupts_per_record: self.p.extra_interrupts_per_record,
            pollution_record_bytes: self.p.pollution_record_bytes,
        };
        m.enable_pebs_with(
            PebsHwConfig {
                loads,
                stores,
                period: self.period_now,
                capacity: self.p.capacity,
                threshold: self.p.threshold,
                interrupt_ps: self.irq.ps(),
                miss_only: self.p.event == PebsEvent::L2MissLoads,
            },
            costs,
        );
        let cores = m.cores();
        self.last_events = (0..cores).map(|core| self.p.event.count(m, core)).collect();
        self.periods = vec![self.period_now; cores];
        self.adjusted = vec![false; cores];
        self.last_tick = now;
        // Frequency mode calibrates early (perf adjusts at every overflow while far off).
        let first = if self.p.frequency_hz.is_some() { FIRST_ADJUST.min(self.p.tick) } else { self.p.tick };
        self.next_tick = now + first;
        self.next_poll = self.p.poller.as_ref().map_or(Ps::NEVER, |p| now + p.interval);
        self.next = self.next_tick.min(self.next_poll);
        Ok(())
    }

    fn next_event(&self) -> Ps {
        self.next
    }

    fn publishes(&self) -> &'static [FeedKind] {
        &[FeedKind::Samples]
    }

    fn on_event(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        let now = ctx.now;
        if now >= self.next_poll {
            // The dedicated thread empties every buffer; its work is the observer core's.
            if let Some(p) = self.p.poller.clone() {
                let ghz = ctx.machine.cpu_ghz();
                if let Some(hw) = ctx.machine.pebs_mut() {
                    let n = hw.poll(now);
                    self.polled += n;
                    let t = Ps::from_ns_f64(n as f64 * p.cycles_per_record / ghz);
                    self.poll_time += t;
                    ctx.charge(t);
                }
                self.next_poll = now + p.interval;
            }
        }
        // The drains handed over since the last event, to whoever follows this technique.
        if ctx.wants(FeedKind::Samples) {
            if let Some(hw) = ctx.machine.pebs() {
                let new: Vec<crate::hw::pebs::Drain> =
                    hw.drained.iter().filter(|d| d.index >= self.published_upto).cloned().collect();
                if let Some(d) = new.last() {
                    self.published_upto = d.index + 1;
                    ctx.publish(Feed::Samples(std::sync::Arc::new(new)));
                }
            }
        }
        self.consume(&mut ctx.machine);
        if now >= self.next_tick {
            self.adjust(&mut ctx.machine, now);
            ctx.machine.pebs_tick(now);
            self.next_tick = now + self.p.tick;
        }
        self.next = self.next_tick.min(self.next_poll);
        Ok(())
    }

    fn finish(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        // The records still in the buffers are handed over as one last drain per core (as the
        // McKernel driver dumps them when the application exits); no interrupt is charged.
        let now = ctx.now;
        if let Some(hw) = ctx.machine.pebs_mut() {
            hw.flush(now);
        }
        self.consume(&mut ctx.machine);
        Ok(())
    }

    fn samples(&self) -> Vec<tierlab_core::Sample> {
        Pebs::samples(self)
    }

    fn take_sample_set(&mut self) -> tierlab_core::SampleSet {
        // The set moves out as it is (spilled samples stay in their file): never a row per
        // sample, never a second copy of the addresses.
        self.taken = Some(self.set.len());
        std::mem::take(&mut self.set)
    }

    fn hot_set(&mut self, start: Ps, end: Ps, machine: &MachineView) -> HotReport {
        // Drains since the last tick are visible too (read, consumed later once).
        if let Some(hw) = machine.pebs() {
            for d in &hw.drained {
                self.take_drain(d);
            }
            self.total_interrupts = hw.cores.iter().map(|c| c.interrupts).sum();
            self.hw_totals = HwTotals::of(hw);
        }
        let in_window = |t: &Ps| (start..end).contains(t);
        self.win_interrupts = self.pending_drains.iter().filter(|t| in_window(t)).count() as u64;
        self.pending_drains.retain(|&t| t >= end);
        let mut pages: Vec<u64> =
            self.pending.iter().filter(|(t, _)| in_window(t)).map(|&(_, p)| p).collect();
        self.win_samples = pages.len() as u64;
        self.pending.retain(|&(t, _)| t >= end);
        pages.sort_unstable();
        let min = self.p.min_samples as usize;
        let mut hot = Vec::new();
        let mut i = 0;
        while i < pages.len() {
            let mut j = i + 1;
            while j < pages.len() && pages[j] == pages[i] {
                j += 1;
            }
            if j - i >= min {
                hot.push(pages[i]);
            }
            i = j;
        }
        HotReport::Pages(hot)
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        vec![
            ("samples".to_string(), self.win_samples as f64),
            ("interrupts".to_string(), self.win_interrupts as f64),
            ("period".to_string(), self.period_now as f64),
        ]
    }

    fn hw_cpu(&self, machine: &MachineView) -> Ps {
        Ps::from_ps(
            machine.pebs().map(|hw| hw.cores.iter().map(|c| c.interrupt_ps + c.assist_ps).sum()).unwrap_or(0),
        )
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        let n = self.sample_count() as u64;
        out.set(format!("{prefix}.driver"), self.p.driver);
        out.set(
            format!("{prefix}.assumed_costs"),
            if self.p.assumed.is_empty() { "none".to_string() } else { self.p.assumed.join(",") },
        );
        out.set(format!("{prefix}.samples"), n);
        out.set(format!("{prefix}.interrupts"), self.total_interrupts);
        out.set(format!("{prefix}.drains"), self.drains);
        out.set(format!("{prefix}.period"), self.period_now);
        out.set(format!("{prefix}.period_adjustments"), self.adjustments);
        out.set(format!("{prefix}.buffer_records"), self.p.capacity);
        out.set(format!("{prefix}.threshold_records"), self.p.threshold);
        out.set(
            format!("{prefix}.mean_samples_per_drain"),
            if self.drains == 0 { 0.0 } else { n as f64 / self.drains as f64 },
        );
        out.set(format!("{prefix}.pages_seen"), self.pages_seen());
        // The cost model's per-event figures (what the scale model reads).
        out.set(format!("{prefix}.interrupt_ns"), self.irq.ns_f64());
        out.set(format!("{prefix}.drain_ns_per_record"), self.drain_rec.ns_f64());
        out.set(format!("{prefix}.assist_ns"), self.assist.ns_f64());
        out.set(format!("{prefix}.polled_records"), self.polled);
        out.set(format!("{prefix}.poller_seconds"), self.poll_time.secs_f64());
        out.set(format!("{prefix}.extra_interrupts_per_record"), self.p.extra_interrupts_per_record);
        let h = &self.hw_totals;
        out.set(format!("{prefix}.interrupt_seconds"), h.interrupt.secs_f64());
        out.set(format!("{prefix}.assist_seconds"), h.assist.secs_f64());
        out.set(format!("{prefix}.lost"), h.lost);
        out.set(format!("{prefix}.throttles"), h.throttles);
        out.set(format!("{prefix}.rate_lowerings"), h.lowerings);
        if let Some(t) = h.max_per_tick {
            out.set(format!("{prefix}.max_samples_per_tick"), t);
        }
    }
}

impl crate::params::SharedDefaults<TelemetryShared> for PebsParams {
    fn shared_defaults() -> TelemetryShared {
        TelemetryShared::default()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::os::{Machine, MachineConfig};
    use crate::workload::{AddressSpace, MapOptions};
    use tierlab_core::Access;

    fn machine(cores: usize) -> Machine {
        let mut m = Machine::new(&MachineConfig { cores, ..MachineConfig::default() });
        m.os.mm_cpumask[0] = true;
        m
    }

    fn pebs(text: &str, cores: usize) -> Pebs {
        let w: crate::params::With<TelemetryShared, PebsParams> = toml::from_str(text).unwrap();
        let label = w.shared.name.clone().unwrap_or_else(|| "pebs".into());
        let ctx = TelemetryBuildCtx { cores, threads: 1, ..Default::default() };
        w.own.build(&label, &ctx).unwrap(); // validation
        Pebs::new(w.own.spec(), label, cores)
    }

    fn start(o: &mut Pebs, m: &mut Machine) {
        let mut cpu = Ps::ZERO;
        o.start(&mut crate::agents::testing::ctx(m, Ps::ZERO, 0, &mut cpu)).unwrap();
    }

    /// Run core 0 through `accesses` (cycled) until `until`, firing the observer's ticks.
    fn drive(
        o: &mut Pebs,
        m: &mut Machine,
        accesses: &[Access],
        until: Ps,
        mut at_tick: impl FnMut(&Pebs, &Machine),
    ) {
        let mut i = 0;
        let mut cpu = Ps::ZERO;
        loop {
            let t = o.next_event().min(until);
            while m.hw.cores[0].clock_ps < t.ps() {
                m.access(0, accesses[i % accesses.len()]).unwrap();
                i += 1;
            }
            if t == until {
                return;
            }
            o.on_event(&mut crate::agents::testing::ctx(m, t, 1, &mut cpu)).unwrap();
            at_tick(o, m);
        }
    }

    fn stat(o: &Pebs, name: &str) -> f64 {
        let mut s = Stats::new();
        o.report_stats("p", &mut s);
        s.get(&format!("p.{name}")).unwrap().as_f64()
    }

    #[test]
    fn closed_form_samples_interrupts_and_cost() {
        for r in [1u64, 7, 64, 100, 256] {
            let mut m = machine(2);
            let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
            // 8 KiB / 192 B = 42 records, interrupt at 90%: 37.
            let mut o = pebs(&format!("event = \"loads\"\nperiod = {r}\nbuffer_size = \"8KiB\""), 2);
            start(&mut o, &mut m);
            let n = 20_000u64;
            for k in 0..n {
                m.access(0, Access::read(a + (k * 64) % (1 << 20))).unwrap();
                m.access(0, Access::write(a + (k * 64) % (1 << 20))).unwrap();
            }
            let mut cpu = Ps::ZERO;
            o.on_event(&mut crate::agents::testing::ctx(&mut m, Ps::from_ns(1), 1, &mut cpu)).unwrap();
            let hw = m.hw.pebs.as_ref().unwrap();
            let samples = n / r;
            let irqs = samples / 37;
            assert_eq!(hw.cores[0].samples, samples, "N/R samples for R = {r}");
            assert_eq!(hw.cores[0].interrupts, irqs, "R = {r}");
            assert_eq!(o.sample_count() as u64, irqs * 37, "drained records");
            // 20,000 cycles at 2 GHz = 10 us per interrupt, and a 250 ns assist per record.
            assert_eq!(
                o.hw_cpu(&MachineView::new(&mut m)),
                Ps::from_ps(irqs * 10_000_000 + samples * 250_000),
                "R = {r}"
            );
            assert!((stat(&o, "assist_seconds") - samples as f64 * 250e-9).abs() < 1e-15);
            assert_eq!(cpu, Ps::ZERO, "the driver's tick charges nothing");
            assert_eq!(stat(&o, "samples"), (irqs * 37) as f64);
            assert_eq!(stat(&o, "interrupts"), irqs as f64);
            assert!((stat(&o, "interrupt_seconds") - irqs as f64 * 10e-6).abs() < 1e-15);
            if irqs > 0 {
                assert_eq!(stat(&o, "mean_samples_per_drain"), 37.0);
            }
            assert_eq!(stat(&o, "period"), r as f64);
        }
    }

    #[test]
    fn buffer_geometry_follows_the_mckernel_driver() {
        for (b, cap, thr) in [("8KiB", 42, 37), ("16KiB", 85, 76), ("32KiB", 170, 153), ("64KiB", 341, 306)] {
            let p: PebsParams = toml::from_str(&format!("buffer_size = \"{b}\"")).unwrap();
            assert_eq!(p.capacity_and_threshold(), (cap, thr), "{b}");
        }
        let p: PebsParams = toml::from_str("buffer_size = 192\nthreshold_fraction = 0.5").unwrap();
        assert_eq!(p.capacity_and_threshold(), (1, 1), "at least one record");
    }

    #[test]
    fn events_select_loads_stores_or_both() {
        for (ev, want) in [("loads", 100u64), ("stores", 50), ("all", 150)] {
            let mut m = machine(1);
            let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
            let mut o = pebs(&format!("event = \"{ev}\"\nperiod = 10\nbuffer_size = 1920"), 1);
            start(&mut o, &mut m);
            for k in 0..500u64 {
                m.access(0, Access::read(a + k * 8)).unwrap();
                m.access(0, Access::read(a + k * 8 + 4)).unwrap();
                m.access(0, Access::write(a + k * 8)).unwrap();
            }
            let mut cpu = Ps::ZERO;
            o.on_event(&mut crate::agents::testing::ctx(&mut m, Ps::from_ns(1), 0, &mut cpu)).unwrap();
            assert_eq!(m.hw.pebs.as_ref().unwrap().cores[0].samples, want, "{ev}");
            // Buffer of 10 records, interrupt at 9: every drained row names its event.
            let names: Vec<String> = o.samples().iter().map(|s| s.event.clone()).collect();
            assert_eq!(names.len(), (want / 9 * 9) as usize);
            match ev {
                "loads" => assert!(names.iter().all(|n| n == "all-loads")),
                "stores" => assert!(names.iter().all(|n| n == "all-stores")),
                _ => {
                    assert!(names.iter().any(|n| n == "all-loads") && names.iter().any(|n| n == "all-stores"))
                }
            }
        }
    }

    #[test]
    fn samples_match_the_recording_schema() {
        let mut m = machine(1);
        let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
        let mut o = pebs("event = \"loads\"\nperiod = 3\nbuffer_size = 768", 1); // 4 records, irq at 3
        start(&mut o, &mut m);
        for k in 0..18u64 {
            m.access(0, Access::read(a + k * 4096 + 8)).unwrap();
        }
        let rep = o.hot_set(Ps::ZERO, Ps::NEVER, &MachineView::new(&mut m));
        let s = o.samples();
        assert_eq!(s.len(), 6);
        assert_eq!(s[0].addr, a + 2 * 4096 + 8, "the 3rd load");
        assert_eq!((s[0].tid, s[0].cpu, s[0].ip, s[0].weight, s[0].data_src), (0, 0, 0, 0, 0));
        assert_eq!(s.iter().map(|s| s.drain).collect::<Vec<_>>(), vec![0, 0, 0, 1, 1, 1]);
        assert!(s[0].time_ns == s[2].time_ns && s[3].time_ns > s[0].time_ns, "one time per drain");
        let pages: Vec<u64> = (0..6).map(|i| (a >> 12) + 2 + 3 * i).collect();
        assert_eq!(rep, HotReport::Pages(pages));
        // Consumed at the tick after the window read them: no double counting.
        let mut cpu = Ps::ZERO;
        o.on_event(&mut crate::agents::testing::ctx(&mut m, Ps::from_ns(5), 0, &mut cpu)).unwrap();
        assert_eq!(o.samples().len(), 6);
        assert_eq!(stat(&o, "drains"), 2.0);
        assert_eq!(stat(&o, "pages_seen"), 6.0);
    }

    #[test]
    fn hot_set_counts_samples_per_window_with_min_samples() {
        let mut m = machine(1);
        let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
        // Every load sampled, a drain every 2 records.
        let mut o = pebs(
            "event = \"loads\"\nperiod = 1\nbuffer_size = 576\nthreshold_fraction = 0.7\nmin_samples = 2",
            1,
        );
        start(&mut o, &mut m);
        let page = |p: u64| a + p * 4096;
        for p in [1, 1, 2, 3, 3, 3] {
            m.access(0, Access::read(page(p))).unwrap();
        }
        let mid = Ps::from_ps(m.hw.cores[0].clock_ps) + Ps::NS;
        for p in [2, 4, 4, 2] {
            m.access(0, Access::read(page(p))).unwrap();
        }
        let end = Ps::from_ps(m.hw.cores[0].clock_ps) + Ps::NS;
        assert_eq!(
            o.hot_set(Ps::ZERO, mid, &MachineView::new(&mut m)),
            HotReport::Pages(vec![(a >> 12) + 1, (a >> 12) + 3])
        );
        assert_eq!(o.window_columns()[0], ("samples".to_string(), 6.0));
        assert_eq!(o.window_columns()[1], ("interrupts".to_string(), 3.0));
        // Page 2's sample of the first window does not carry over.
        assert_eq!(
            o.hot_set(mid, end, &MachineView::new(&mut m)),
            HotReport::Pages(vec![(a >> 12) + 2, (a >> 12) + 4])
        );
        assert_eq!(o.window_columns()[0].1, 4.0);
    }

    #[test]
    fn frequency_mode_converges_to_the_target_rate() {
        for freq in [5_000.0, 10_000.0] {
            let mut m = machine(2);
            let a = m.mmap(16 << 20, MapOptions::named("x")).unwrap();
            let acc: Vec<Access> = (0..(16u64 << 20) / 64)
                .map(|k| if k % 4 == 3 { Access::write(a + k * 64) } else { Access::read(a + k * 64) })
                .collect();
            let mut o = pebs(&format!("frequency_hz = {freq}\nbuffer_size = \"8KiB\""), 2);
            start(&mut o, &mut m);
            let mut at_half = None;
            drive(&mut o, &mut m, &acc, Ps::from_ns(1_000_000_000), |o, m| {
                if o.last_tick >= Ps::from_ns(500_000_000) && at_half.is_none() {
                    at_half = Some((o.last_tick, m.hw.pebs.as_ref().unwrap().cores[0].samples));
                }
            });
            let (t, n) = at_half.unwrap();
            let got = m.hw.pebs.as_ref().unwrap().cores[0].samples - n;
            let want = freq * (1e9 - t.ns_f64()) / 1e9;
            assert!((got as f64 - want).abs() < 0.02 * want, "{got} samples, want {want} at {freq} Hz");
            // The period is far from the starting 100 (about 1e7 events/s / freq).
            assert!(o.period() > 500, "{}", o.period());
            assert!(stat(&o, "period_adjustments") >= 1.0);
        }
    }

    #[test]
    fn frequency_mode_follows_a_change_of_the_event_rate() {
        let mut m = machine(1);
        let a = m.mmap(16 << 20, MapOptions::named("x")).unwrap();
        let line = |k: u64, w: bool| if w { Access::write(a + k * 64) } else { Access::read(a + k * 64) };
        let loads: Vec<Access> = (0..(16u64 << 20) / 64).map(|k| line(k, false)).collect();
        // Then one load in four: the load rate drops about fourfold.
        let mixed: Vec<Access> = (0..(16u64 << 20) / 64).map(|k| line(k, k % 4 != 0)).collect();
        let mut o = pebs("event = \"loads\"\nfrequency_hz = 2000.0\nbuffer_size = \"8KiB\"", 1);
        start(&mut o, &mut m);
        drive(&mut o, &mut m, &loads, Ps::from_ns(500_000_000), |_, _| {});
        let p1 = o.period();
        let mut mark = None;
        drive(&mut o, &mut m, &mixed, Ps::from_ns(1_500_000_000), |o, m| {
            if o.last_tick >= Ps::from_ns(1_000_000_000) && mark.is_none() {
                mark = Some((o.last_tick, m.hw.pebs.as_ref().unwrap().cores[0].samples));
            }
        });
        let p2 = o.period();
        assert!((p1 as f64 / p2 as f64 - 4.0).abs() < 0.2, "{p1} -> {p2}");
        let (t, n) = mark.unwrap();
        let got = (m.hw.pebs.as_ref().unwrap().cores[0].samples - n) as f64;
        let want = 2000.0 * (1.5e9 - t.ns_f64()) / 1e9;
        assert!((got - want).abs() < 0.02 * want, "{got} samples, want {want}");
    }

    #[test]
    fn fixed_period_never_changes() {
        let mut m = machine(1);
        let a = m.mmap(1 << 20, MapOptions::named("x")).unwrap();
        let acc: Vec<Access> = (0..4096u64).map(|k| Access::read(a + k * 64)).collect();
        let mut o = pebs("period = 128", 1);
        start(&mut o, &mut m);
        drive(&mut o, &mut m, &acc, Ps::from_ns(50_000_000), |o, m| {
            assert_eq!(o.period(), 128);
            assert_eq!(m.hw.pebs.as_ref().unwrap().cfg.period, 128);
        });
    }

    #[test]
    fn one_pebs_observer_per_machine() {
        let mut m = machine(1);
        let mut a = pebs("name = \"a\"", 1);
        let mut b = pebs("name = \"b\"", 1);
        start(&mut a, &mut m);
        let mut cpu = Ps::ZERO;
        let e = b.start(&mut crate::agents::testing::ctx(&mut m, Ps::ZERO, 0, &mut cpu)).unwrap_err();
        assert!(e.to_string().contains("one configuration"), "{e}");
        assert!(e.to_string().contains("--techniques b"), "{e}");
    }

    fn run_text(text: &str, overrides: &[&str]) -> crate::driver::RunResult {
        let src = crate::scenario::Source { text: text.into(), file: "t.toml".into(), base_dir: ".".into() };
        let ov: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        let sc = crate::scenario::load(&src, &ov, None).unwrap();
        crate::driver::Simulation::new(sc, &src, None)
            .unwrap()
            .run(&mut |_| crate::driver::Control::Continue)
            .unwrap()
    }

    const SMALL: &str = r#"
seed = 4
duration = "200ms"
window = "50ms"
[machine]
cores = 2
[workload]
kind = "hotset"
heap_size = "256MiB"
hot_size = "4MiB"
needles = 4
hot_fraction = 0.9
read_fraction = 0.7
[[telemetry]]
kind = "pebs"
frequency_hz = 5000.0
buffer_size = "8KiB"
"#;

    #[test]
    fn runs_in_a_scenario_deterministically() {
        let a = run_text(SMALL, &[]);
        let b = run_text(SMALL, &[]);
        assert_eq!(a.stats, b.stats);
        assert_eq!(a.timeseries.columns, b.timeseries.columns);
        let g = |k: &str| a.stats.get(&format!("telemetry.pebs.{k}")).unwrap().as_f64();
        // ~5000 samples/s for 0.2 s on the one application core (the period is re-computed
        // every tick, so the rate overshoots a little; the last partial buffer is flushed).
        assert!((900.0..=1100.0).contains(&g("samples")), "{}", g("samples"));
        assert!(g("mean_recall") > 0.0 && g("mean_precision") > 0.5);
        let irq = 20_000.0 / 2.0e9;
        assert!((g("cpu_seconds") - g("interrupts") * irq - g("samples") * 250e-9).abs() < 1e-9);
        assert_eq!(a.timeseries.column("telemetry.pebs.period").unwrap().len(), 4);
        let c = run_text(SMALL, &["seed=5"]);
        assert_ne!(a.stats, c.stats, "the seed matters");
    }

    /// SMALL with its telemetry replaced by `tele` (TOML of one `[[telemetry]]` table's body).
    pub(crate) fn small_with(tele: &str) -> String {
        let base = SMALL.split("[[telemetry]]").next().unwrap();
        format!("{base}[[telemetry]]\nname = \"t\"\n{tele}\n")
    }

    pub(crate) fn run_small(tele: &str) -> crate::driver::RunResult {
        run_text(&small_with(tele), &[])
    }

    #[test]
    fn a_dedicated_drain_thread_takes_no_interrupt_on_the_application_core() {
        let irq = run_small("kind = \"pebs\"\nevent = \"loads\"\nperiod = 64\nbuffer_size = \"8KiB\"");
        let ded = run_small(
            "kind = \"pebs\"\nevent = \"loads\"\nperiod = 64\nbuffer_size = \"8KiB\"\ndrain = \"dedicated-thread\"",
        );
        let g = |r: &crate::driver::RunResult, k: &str| {
            r.stats.get(&format!("telemetry.t.{k}")).unwrap().as_f64()
        };
        assert!(g(&irq, "interrupts") > 10.0);
        assert_eq!(g(&ded, "interrupts"), 0.0);
        assert_eq!(g(&ded, "interrupt_seconds"), 0.0);
        assert!(g(&ded, "polled_records") > 100.0);
        // The poller's time is on the observer's core: ~540 cycles at 2 GHz per record.
        let want = g(&ded, "polled_records") * 540.0 / 2.0e9;
        assert!((g(&ded, "poller_seconds") - want).abs() < 1e-9 * want.max(1.0));
        assert_eq!(g(&ded, "lost"), 0.0, "100 us polls keep up with an 8 KiB buffer");
        // The application's cores pay only the assists.
        let app = |r: &crate::driver::RunResult| r.stats.get("run.app_seconds").unwrap().as_f64();
        assert!(app(&ded) < app(&irq), "{} vs {}", app(&ded), app(&irq));
    }

    const MINIFE: &str = include_str!("../../../scenarios/pebs-minife.toml");

    #[test]
    fn minife_scenario_sweeps_r_and_b_one_machine_each() {
        let src = crate::scenario::Source {
            text: MINIFE.into(),
            file: "pebs-minife.toml".into(),
            base_dir: ".".into(),
        };
        // One iteration keeps the test short; the scenario runs two.
        let sc = crate::scenario::load(&src, &["workload.iterations=1".to_string()], None).unwrap();
        let labels: Vec<String> = sc.telemetry.iter().map(|t| t.label()).collect();
        // `export` prints every default and loads back to the same techniques.
        let text = crate::scenario::export(&sc);
        let src2 = crate::scenario::Source { text, file: "export.toml".into(), base_dir: ".".into() };
        let again = crate::scenario::load(&src2, &[], None).unwrap();
        assert_eq!(format!("{:?}", again.telemetry), format!("{:?}", sc.telemetry));
        let want: Vec<String> =
            [64, 128, 256].iter().flat_map(|r| [8, 16, 32].map(|b| format!("R{r}-B{b}K"))).collect();
        assert_eq!(labels, want);
        let e = crate::driver::Simulation::new(sc.clone(), &src, None).err().unwrap();
        assert!(e.to_string().contains("one configuration"), "{e}");
        let run = |t: Vec<TelemetryConfig>| {
            let mut one = sc.clone();
            one.telemetry = t;
            crate::driver::Simulation::new(one, &src, None)
                .unwrap()
                .run(&mut |_| crate::driver::Control::Continue)
                .unwrap()
        };
        let base = run(vec![]);
        let app0 = base.stats.get("run.app_seconds").unwrap().as_f64();
        let mut res = Vec::new();
        for t in &sc.telemetry {
            let TelemetryConfig::Pebs(p) = t else { panic!("pebs only") };
            let r = run(vec![t.clone()]);
            let g = |k: &str| r.stats.get(&format!("telemetry.{}.{k}", t.label())).unwrap().as_f64();
            let events = match p.event {
                PebsEvent::Loads => r.stats.get_u64("machine.reads"),
                _ => r.stats.get_u64("machine.cache.load_misses"),
            };
            // Every R-th event is sampled: N/R samples, of which all but the last, partial
            // buffer (flushed at the end of the run, no interrupt) were drained by interrupts.
            let (_, thr) = p.capacity_and_threshold();
            let n_r = (events / p.period) as f64;
            assert_eq!(g("samples"), n_r, "{}", t.label());
            let drained = g("interrupts") * thr as f64;
            assert!(drained <= n_r && drained > n_r - thr as f64, "{}: {drained} vs {n_r}", t.label());
            let cpu = g("interrupts") * 20_000.0 / 1.4e9 + g("samples") * 250e-9;
            assert!((g("cpu_seconds") - cpu).abs() < 1e-9, "{}", t.label());
            let app = r.stats.get("run.app_seconds").unwrap().as_f64();
            res.push((p.period, p.buffer_size.0, g("pages_seen"), app / app0 - 1.0, p.event));
        }
        // Overhead falls with larger R at every B, and with larger B at every R.
        for i in 0..9 {
            let (r, b, _, o, _) = res[i];
            assert!(o > 0.0, "R{r} B{b}: {o}");
            if i % 3 < 2 {
                assert!(res[i + 1].3 < o, "B {b} -> {}: {o} -> {}", res[i + 1].1, res[i + 1].3);
            }
            if i < 6 {
                assert!(res[i + 3].3 < o, "R {r} -> {}: {o} -> {}", res[i + 3].0, res[i + 3].3);
            }
        }
        // R dominates (the paper's finding): from R128/B16K, halving R costs more than halving
        // B, because every record's assist scales with 1/R and not with B.
        for (at, half_r, half_b) in [(4, 1, 3), (8, 5, 7), (5, 2, 4)] {
            let (dr, db) = (res[half_r].3 - res[at].3, res[half_b].3 - res[at].3);
            assert!(
                dr > db && db > 0.0,
                "from {:?}: halving R +{dr}, halving B +{db}",
                (res[at].0, res[at].1)
            );
        }
        // With the paper's event (L2 misses) fewer pages are seen as R grows.
        if res[0].4 == PebsEvent::L2MissLoads {
            for i in 0..6 {
                assert!(res[i + 3].2 < res[i].2, "pages seen {:?}", res);
            }
        }
    }

    #[test]
    fn l2_miss_loads_count_only_loads_that_miss_the_cache_model() {
        let cfg = MachineConfig { cores: 1, cache: Some(Default::default()), ..MachineConfig::default() };
        let mut m = Machine::new(&cfg);
        let a = m.mmap(4 << 20, MapOptions::named("x")).unwrap();
        let mut o = pebs("event = \"l2-miss-loads\"\nperiod = 4\nbuffer_size = 960", 1); // irq at 4
        start(&mut o, &mut m);
        // Two sweeps of 4 MiB with 8-byte loads and a store per line: every line misses once per
        // sweep (4 MiB > 1 MiB cache, LRU), the other 7 loads and the store hit.
        for _ in 0..2 {
            for k in 0..(4u64 << 20) / 8 {
                m.access(0, Access::read(a + k * 8)).unwrap();
                if k % 8 == 7 {
                    m.access(0, Access::write(a + k * 8)).unwrap();
                }
            }
        }
        let lines = 2 * (4u64 << 20) / 64;
        assert_eq!(m.hw.cores[0].cache.load_misses, lines);
        assert_eq!(m.hw.pebs.as_ref().unwrap().cores[0].samples, lines / 4);
        let mut cpu = Ps::ZERO;
        o.on_event(&mut crate::agents::testing::ctx(&mut m, Ps::from_ns(1), 0, &mut cpu)).unwrap();
        // Every 4th missing line (256 bytes apart), at the load that missed it.
        let s = o.samples();
        assert_eq!(s[0].addr, a + 3 * 64);
        assert_eq!(s[1].addr - s[0].addr, 4 * 64);
        assert!(s.iter().all(|s| s.event == "l2-miss-loads"));
        // Without a cache model the event is refused at start.
        let mut m = machine(1);
        let mut o = pebs("event = \"l2-miss-loads\"", 1);
        let e = o.start(&mut crate::agents::testing::ctx(&mut m, Ps::ZERO, 0, &mut cpu)).unwrap_err();
        assert!(e.to_string().contains("[machine.cache]"), "{e}");
    }

    #[test]
    fn parameters_are_checked() {
        let ctx = TelemetryBuildCtx { cores: 2, threads: 1, index: 4, ..Default::default() };
        let bad = |t: &str| {
            let p: PebsParams = toml::from_str(t).unwrap();
            p.build("pebs", &ctx).err().unwrap().to_string()
        };
        assert!(bad("period = 0").contains("telemetry[4].period"));
        assert!(bad("frequency_hz = 0.0").contains("frequency_hz"));
        assert!(bad("buffer_size = 100").contains("buffer_size"));
        let e = load_error("kind = \"pebs\"\nthreshold_fraction = 1.5");
        assert!(e.contains("telemetry[0].threshold_fraction") && e.contains("must be in (0, 1]"), "{e}");
        for text in
            ["record_size = 65540\nbuffer_size = \"1MiB\"", "record_size = \"128KiB\"", "record_size = 0"]
        {
            let e = load_error(&format!("kind = \"pebs\"\n{text}"));
            assert!(e.contains("telemetry[0].record_size") && e.contains("must be in [1, 65536]"), "{e}");
        }
        assert!(bad("min_samples = 0").contains("min_samples"));
        assert!(bad("tick = 0").contains("tick"));
        assert!(toml::from_str::<PebsParams>("event = \"cycles\"").is_err());
        assert!(toml::from_str::<PebsParams>("perod = 3").is_err(), "unknown fields rejected");
        let p: PebsParams = toml::from_str("").unwrap();
        assert_eq!((p.event, p.period, p.buffer_size.0, p.record_size.0), (PebsEvent::All, 100, 65536, 192));
        assert_eq!((p.threshold_fraction, p.interrupt_cycles, p.min_samples), (0.9, 20_000.0, 1));
        let cfg: TelemetryConfig = toml::from_str("kind = \"pebs\"").unwrap();
        assert_eq!(cfg.label(), "pebs");
    }
}
