//! The PEBS hardware model: precise event-based sampling of memory accesses (and AMD IBS op
//! sampling, which the same model covers with a one-record buffer).
//!
//! Each core counts the configured event (loads, stores or both, optionally only those that
//! miss the core's cache model). Every `period`-th event (the reset value R) the core takes a
//! *PEBS assist*: the microcode writes a record holding the data address into the core's
//! PEBS buffer, which costs the sampled thread [`PebsCosts::assist_ps`] (Akiyama & Hirofuchi,
//! ROSS'17: 200-300 ns per record) and, with [`PebsCosts::pollution_record_bytes`], writes
//! the record's cache lines through the core's cache model (the records evict application
//! lines; ROSS'17 names the pollution without a figure, so only its effect on the cache's
//! contents is modelled, not a time).
//!
//! What happens when the buffer fills depends on the drain mode:
//! - [`DrainMode::Interrupt`]: when the buffer holds `threshold` records the core takes a PMI
//!   (the McKernel driver at "a configurable threshold", assumed 90% of the buffer's capacity;
//!   Linux's large PEBS a few records before the end; Linux's frequency mode and IBS after
//!   every record). The handler
//!   costs the core `interrupt_ps` plus [`PebsCosts::drain_ps_per_record`] per record, and
//!   the records are handed over as one *drain* stamped with one timestamp (PEBS records on
//!   Knights Landing carry no time).
//! - [`DrainMode::Polled`]: no interrupt; another hardware thread (the McKernel paper's future
//!   work) empties the buffers with [`PebsHw::poll`]. A record that finds the buffer full is
//!   lost (the hardware stops writing at the buffer's absolute maximum).
//!
//! With [`PebsCosts::throttle`] the interrupts are throttled as Linux perf does
//! (`kernel/events/core.c`): a core that takes `max_per_tick` interrupts within one tick stops
//! counting until the next tick ([`PebsHw::tick`]), which is logged like a
//! `PERF_RECORD_THROTTLE` / `UNTHROTTLE` pair; and the running average of the handler's
//! duration, once above the allowed time per sample, lowers `max_per_tick` the way
//! `perf_sample_event_took` lowers `perf_event_max_sample_rate`.
//!
//! The driver side (hotness, frequency mode) lives in `agents::telemetry::pebs`.

use crate::units::Ps;

/// Configuration of the sampling hardware.
#[derive(Clone, Debug, PartialEq)]
pub struct PebsHwConfig {
    /// Sample loads.
    pub loads: bool,
    /// Sample stores.
    pub stores: bool,
    /// Reset value R: one record every R events.
    pub period: u64,
    /// Records the buffer holds (B / record size).
    pub capacity: usize,
    /// Records at which the interrupt fires.
    pub threshold: usize,
    /// Interrupt handler cost (its fixed part), ps.
    pub interrupt_ps: u64,
    /// Count only accesses that miss the cores' cache model (L2_MISS_LOADS).
    pub miss_only: bool,
}

impl PebsHwConfig {
    /// The event mask: bit 0 loads, bit 1 stores, bit 2 ([`super::cache::MISS_ONLY`]) only
    /// cache misses.
    pub fn mask(&self) -> u8 {
        (self.loads as u8)
            | ((self.stores as u8) << 1)
            | if self.miss_only { super::cache::MISS_ONLY } else { 0 }
    }
}

/// How the PEBS buffer is emptied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DrainMode {
    /// A PMI at the threshold; the handler runs on the sampled core.
    #[default]
    Interrupt,
    /// No PMI: another hardware thread polls the buffers ([`PebsHw::poll`]).
    Polled,
}

/// Linux perf's interrupt throttling (`kernel/events/core.c`).
#[derive(Clone, Debug, PartialEq)]
pub struct Throttle {
    /// `max_samples_per_tick` = ceil(`perf_event_max_sample_rate` / HZ).
    pub max_per_tick: u64,
    /// `perf_sample_allowed_ns` = (1e9 / max sample rate) x `perf_cpu_time_max_percent` / 100.
    pub allowed_ns: u64,
    /// TICK_NSEC = 1e9 / HZ.
    pub tick_ns: u64,
    /// `perf_cpu_time_max_percent`.
    pub cpu_time_max_percent: u64,
}

impl Throttle {
    /// The kernel's initial limits for `max_sample_rate` samples/s, `percent` of CPU time
    /// and `hz` ticks per second (`perf_event_max_sample_rate_handler`,
    /// `update_perf_cpu_limits`).
    pub fn linux(max_sample_rate: u64, percent: u64, hz: u64) -> Self {
        let hz = hz.max(1);
        let rate = max_sample_rate.max(1);
        Throttle {
            max_per_tick: rate.div_ceil(hz),
            allowed_ns: (1_000_000_000 / rate) * percent / 100,
            tick_ns: 1_000_000_000 / hz,
            cpu_time_max_percent: percent,
        }
    }
}

/// The cost model of sampling: what each record and each interrupt costs, and how the buffer
/// is emptied. The default costs nothing beyond the configuration's `interrupt_ps`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PebsCosts {
    /// A PEBS assist (writing one record), charged to the sampled core inline, ps.
    pub assist_ps: u64,
    /// Handler time per record drained (copying it out), ps, added to `interrupt_ps`.
    pub drain_ps_per_record: u64,
    /// Interrupt or polled.
    pub drain: DrainMode,
    /// perf's throttling, if any.
    pub throttle: Option<Throttle>,
    /// Interrupts taken per record beyond the one of its drain (IBS: samples landing on ops
    /// that are not loads or stores interrupt too but carry no address; 1 / fraction - 1).
    pub extra_interrupts_per_record: f64,
    /// Bytes of each record written through the core's cache model (0: not modelled).
    pub pollution_record_bytes: u64,
}

/// A batch of records handed over by one interrupt (or a poll, or a final flush).
#[derive(Clone, Debug, PartialEq)]
pub struct Drain {
    /// Time of the interrupt (the one timestamp all its records get).
    pub time: Ps,
    /// Core that took it.
    pub core: u32,
    /// Drain number on this machine, from 0.
    pub index: u64,
    /// (data address, access kind code) of each record.
    pub records: Vec<(u64, u8)>,
    /// Handler time charged to the sampled core for this drain, ps (0 for a poll or flush).
    pub cost_ps: u64,
}

/// What one record did (returned to the access path).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordOutcome {
    /// Time to charge to the sampled core, ps (assist, plus the handler if it interrupted).
    pub cost_ps: u64,
    /// The core is throttled: stop counting events until the next tick.
    pub throttled: bool,
    /// Buffer address of the record written (for the cache model), if one was written.
    pub written_at: Option<u64>,
}

/// Per-core sampling state.
#[derive(Clone, Debug, Default)]
pub struct PebsCore {
    /// Records in the buffer.
    pub buf: Vec<(u64, u8)>,
    /// Records written.
    pub samples: u64,
    /// Interrupts taken.
    pub interrupts: u64,
    /// Time in the interrupt handler, ps.
    pub interrupt_ps: u64,
    /// Time in PEBS assists, ps.
    pub assist_ps: u64,
    /// Records lost because the buffer was full (polled mode).
    pub lost: u64,
    /// Times this core was throttled.
    pub throttles: u64,
    /// Throttled now (counting stopped until the next tick).
    pub throttled: bool,
    /// Interrupts in the current tick.
    tick_irqs: u64,
    /// perf_sample_event_took's decaying sum of handler durations, ns.
    running_len_ns: u64,
    /// Fractional extra interrupts not yet taken.
    extra_acc: f64,
}

/// The number of handler durations perf's running average decays over
/// (`NR_ACCUMULATED_SAMPLES`).
pub const NR_ACCUMULATED_SAMPLES: u64 = 128;

/// Where the model places each core's PEBS buffer for the cache model (a kernel address, so
/// it never collides with the application's lines).
pub const BUFFER_BASE: u64 = 0xffff_8880_0000_0000;
/// Distance between two cores' buffers in [`BUFFER_BASE`]'s area.
pub const BUFFER_STRIDE: u64 = 1 << 24;

/// The sampling hardware of all cores.
#[derive(Clone, Debug)]
pub struct PebsHw {
    /// Configuration.
    pub cfg: PebsHwConfig,
    /// Costs and drain mode.
    pub costs: PebsCosts,
    /// Per core.
    pub cores: Vec<PebsCore>,
    /// Drains not yet consumed by the driver.
    pub drained: Vec<Drain>,
    /// Drains so far.
    pub drains: u64,
    /// Throttle log: (time ns, core, true = THROTTLE / false = UNTHROTTLE).
    pub throttle_log: Vec<(u64, u32, bool)>,
    /// Times perf's "interrupt took too long" lowered the limit.
    pub lowerings: u64,
}

impl PebsHw {
    /// Hardware for `cores` cores, costing only the configuration's interrupt.
    pub fn new(cfg: PebsHwConfig, cores: usize) -> Self {
        Self::with_costs(cfg, PebsCosts::default(), cores)
    }

    /// Hardware for `cores` cores with a cost model.
    pub fn with_costs(cfg: PebsHwConfig, costs: PebsCosts, cores: usize) -> Self {
        PebsHw {
            cfg,
            costs,
            cores: vec![PebsCore::default(); cores],
            drained: Vec::new(),
            drains: 0,
            throttle_log: Vec::new(),
            lowerings: 0,
        }
    }

    /// The event mask: bit 0 loads, bit 1 stores, bit 2 ([`super::cache::MISS_ONLY`]) only
    /// cache misses.
    pub fn mask(&self) -> u8 {
        self.cfg.mask()
    }

    /// The current interrupt limit per tick (perf), if throttling.
    pub fn max_per_tick(&self) -> Option<u64> {
        self.costs.throttle.as_ref().map(|t| t.max_per_tick)
    }

    /// Take a record for `core` at `clock_ps`: the assist, and the interrupt when the buffer
    /// reached its threshold (see the module docs). The caller charges `cost_ps` to the core
    /// and stops its event counting while `throttled`.
    pub fn record(&mut self, core: usize, addr: u64, kind: u8, clock_ps: u64) -> RecordOutcome {
        let costs = &self.costs;
        let c = &mut self.cores[core];
        let mut out = RecordOutcome::default();
        if costs.drain == DrainMode::Polled && c.buf.len() >= self.cfg.capacity {
            c.lost += 1;
            return out;
        }
        let slot = c.buf.len() as u64;
        c.buf.push((addr, kind));
        c.samples += 1;
        c.assist_ps += costs.assist_ps;
        out.cost_ps = costs.assist_ps;
        if costs.pollution_record_bytes > 0 {
            out.written_at =
                Some(BUFFER_BASE + core as u64 * BUFFER_STRIDE + slot * costs.pollution_record_bytes);
        }
        if costs.drain == DrainMode::Polled {
            return out;
        }
        // IBS: the samples of this record's period that landed on other ops.
        let mut irqs = 0u64;
        if costs.extra_interrupts_per_record > 0.0 {
            c.extra_acc += costs.extra_interrupts_per_record;
            let k = c.extra_acc.floor();
            c.extra_acc -= k;
            irqs += k as u64;
        }
        let drain = c.buf.len() >= self.cfg.threshold;
        irqs += drain as u64;
        if irqs == 0 {
            return out;
        }
        let n = if drain { c.buf.len() as u64 } else { 0 };
        let handler = irqs * self.cfg.interrupt_ps + n * costs.drain_ps_per_record;
        c.interrupts += irqs;
        c.interrupt_ps += handler;
        out.cost_ps += handler;
        if drain {
            let records = std::mem::take(&mut c.buf);
            self.drained.push(Drain {
                time: Ps::from_ps(clock_ps),
                core: core as u32,
                index: self.drains,
                records,
                cost_ps: handler,
            });
            self.drains += 1;
        }
        if let Some(t) = self.costs.throttle.as_mut() {
            let c = &mut self.cores[core];
            // perf_sample_event_took, once per interrupt (the average handler's duration).
            let each_ns = handler / irqs / 1000;
            for _ in 0..irqs {
                c.running_len_ns -= c.running_len_ns / NR_ACCUMULATED_SAMPLES;
                c.running_len_ns += each_ns;
                let avg = c.running_len_ns / NR_ACCUMULATED_SAMPLES;
                if t.allowed_ns > 0 && avg > t.allowed_ns {
                    let avg = avg + avg / 4;
                    let max = (t.tick_ns / 100) * t.cpu_time_max_percent;
                    t.max_per_tick = if avg < max { max / avg } else { 1 };
                    t.allowed_ns = avg;
                    self.lowerings += 1;
                }
            }
            // __perf_event_account_interrupt: throttle at max_samples_per_tick in one tick.
            c.tick_irqs += irqs;
            if c.tick_irqs >= t.max_per_tick && !c.throttled {
                c.throttled = true;
                c.throttles += 1;
                self.throttle_log.push((clock_ps / 1000, core as u32, true));
                out.throttled = true;
            }
        }
        out
    }

    /// A tick (perf's `perf_event_task_tick`): every core's interrupt count restarts and the
    /// throttled cores are unthrottled (logged). Returns the cores unthrottled, whose event
    /// counting the caller restarts.
    pub fn tick(&mut self, now: Ps) -> Vec<usize> {
        let now_ns = now.whole_ns();
        let mut back = Vec::new();
        for (i, c) in self.cores.iter_mut().enumerate() {
            c.tick_irqs = 0;
            if c.throttled {
                c.throttled = false;
                self.throttle_log.push((now_ns, i as u32, false));
                back.push(i);
            }
        }
        back
    }

    /// Polled mode: another hardware thread empties every core's buffer at `now_ns`. Returns
    /// the records taken (the poller's cost is the caller's).
    pub fn poll(&mut self, now: Ps) -> u64 {
        let mut n = 0;
        for (i, c) in self.cores.iter_mut().enumerate() {
            if !c.buf.is_empty() {
                let records = std::mem::take(&mut c.buf);
                n += records.len() as u64;
                self.drained.push(Drain {
                    time: now,
                    core: i as u32,
                    index: self.drains,
                    records,
                    cost_ps: 0,
                });
                self.drains += 1;
            }
        }
        n
    }

    /// Hand over every partly filled buffer without an interrupt (end of run).
    pub fn flush(&mut self, now: Ps) {
        self.poll(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hw(threshold: usize, costs: PebsCosts) -> PebsHw {
        let cfg = PebsHwConfig {
            loads: true,
            stores: false,
            period: 1,
            capacity: 8,
            threshold,
            interrupt_ps: 1_000_000,
            miss_only: false,
        };
        PebsHw::with_costs(cfg, costs, 2)
    }

    #[test]
    fn assists_every_record_handler_per_drain() {
        let costs = PebsCosts { assist_ps: 250_000, drain_ps_per_record: 10_000, ..Default::default() };
        let mut h = hw(4, costs);
        let mut total = 0;
        for k in 0..10u64 {
            total += h.record(0, k, 0, k * 1_000_000).cost_ps;
        }
        // 10 assists, 2 interrupts of 4 records each.
        assert_eq!(total, 10 * 250_000 + 2 * (1_000_000 + 4 * 10_000));
        assert_eq!(h.cores[0].interrupts, 2);
        assert_eq!(h.cores[0].assist_ps, 10 * 250_000);
        assert_eq!(h.drained.len(), 2);
        assert_eq!(h.drained[1].cost_ps, 1_040_000);
        assert_eq!(h.drained[1].time, Ps::from_ns(7_000));
        assert_eq!(h.cores[0].buf.len(), 2);
    }

    #[test]
    fn polled_buffers_never_interrupt_and_lose_records_when_full() {
        let costs = PebsCosts { assist_ps: 5, drain: DrainMode::Polled, ..Default::default() };
        let mut h = hw(4, costs);
        let mut total = 0;
        for k in 0..12u64 {
            total += h.record(1, k, 0, 0).cost_ps;
        }
        assert_eq!(total, 8 * 5, "assists only, for the 8 records that fit");
        assert_eq!((h.cores[1].interrupts, h.cores[1].lost, h.cores[1].samples), (0, 4, 8));
        assert_eq!(h.poll(Ps::from_ns(100)), 8);
        assert_eq!(h.drained[0].cost_ps, 0);
        assert!(h.cores[1].buf.is_empty());
    }

    #[test]
    fn throttles_at_max_per_tick_and_unthrottles_at_the_tick() {
        let costs = PebsCosts {
            throttle: Some(Throttle {
                max_per_tick: 3,
                allowed_ns: 0,
                tick_ns: 4_000_000,
                cpu_time_max_percent: 25,
            }),
            ..Default::default()
        };
        let mut h = hw(1, costs);
        let t: Vec<bool> = (0..3u64).map(|k| h.record(0, k, 0, k).throttled).collect();
        assert_eq!(t, vec![false, false, true]);
        assert_eq!(h.cores[0].throttles, 1);
        assert_eq!(h.tick(Ps::from_ns(4_000)), vec![0]);
        assert_eq!(h.throttle_log, vec![(0, 0, true), (4_000, 0, false)]);
        assert!(!h.record(0, 9, 0, 5_000_000).throttled, "a new tick counts from zero");
    }

    #[test]
    fn a_slow_handler_lowers_the_limit_like_perf() {
        // Defaults: 100 kHz, 25%, HZ = 250: 400 per tick, 2.5 us allowed.
        let t = Throttle::linux(100_000, 25, 250);
        assert_eq!((t.max_per_tick, t.allowed_ns, t.tick_ns), (400, 2_500, 4_000_000));
        let cfg = PebsHwConfig {
            loads: true,
            stores: false,
            period: 1,
            capacity: 1,
            threshold: 1,
            interrupt_ps: 4_000_000, // 4 us per PMI
            miss_only: false,
        };
        let costs = PebsCosts { throttle: Some(t), ..Default::default() };
        let mut h = PebsHw::with_costs(cfg, costs, 1);
        for k in 0..2000u64 {
            h.record(0, k, 0, k * 1_000_000_000);
            h.tick(Ps::from_ns(k));
        }
        // The running average converges to 4,000 ns > 2,500: limit = 1e6 / (1.25 x avg).
        let t = h.costs.throttle.as_ref().unwrap();
        assert!(h.lowerings > 0);
        assert!((190..=320).contains(&t.max_per_tick), "{}", t.max_per_tick);
    }

    #[test]
    fn extra_interrupts_accumulate_fractionally() {
        let costs = PebsCosts { extra_interrupts_per_record: 1.5, ..Default::default() };
        let mut h = hw(1, costs);
        for k in 0..4u64 {
            h.record(0, k, 0, 0);
        }
        // 4 records: 4 drains + floor(6) extra interrupts.
        assert_eq!(h.cores[0].interrupts, 10);
        assert_eq!(h.drained.len(), 4);
    }
}
