//! `perf-pebs`: PEBS as Linux perf drives it (`perf_event_open` with `precise_ip`), on the
//! machine's PEBS hardware; the observer is [`super::pebs::Pebs`].
//!
//! What decides the cost is the kernel's choice between one record per PMI and *large PEBS*
//! (`arch/x86/events/intel/core.c` `intel_pmu_hw_config`, `ds.c` `pebs_update_threshold`):
//! - **fixed period** (`period`) and a sample type within the large-PEBS flags (no callchain,
//!   `callchain = false`): large PEBS, the records go to a per-CPU buffer of
//!   `PEBS_BUFFER_SIZE` = 16 pages (64 KiB, `intel_ds.h`), and the PMI fires at
//!   `pebs_absolute_maximum - reserved x record size`, reserved = the PEBS-capable counters
//!   (`max_pebs_events`, `pebs_counters`): floor(65536 / 200) - 4 = 323 records on Skylake;
//! - **frequency mode** (`frequency_hz`, `perf record -F`) or a callchain: the threshold is one
//!   record, so every sample is a PMI. The period follows the event rate as in `pebs`.
//!
//! Every PMI goes through perf's throttling (`kernel/events/core.c`): at
//! `max_samples_per_tick` = ceil(`max_sample_rate` / `hz`) interrupts within one tick the
//! event stops until the next tick (a THROTTLE / UNTHROTTLE pair; the `throttles` stat), and
//! when the decaying average of the handler's duration exceeds the allowed time per sample
//! (`1e9 / max_sample_rate x cpu_time_max_percent / 100` = 2.5 us by default) the kernel lowers
//! the limit (`rate_lowerings`, `max_samples_per_tick`). With large PEBS one drain counts as
//! one interrupt (all records but the last go out through `perf_event_output`, DERIVED from
//! `ds.c`).
//!
//! Parameters: [`PerfPebsParams`] (defaults, ranges and sources in `docs/parameters.md`).
//! The PMI's cost is an assumption: no measured PMI cost on Xeon was found
//! (`reference/pebs-cost.md` section 3), so `pmi_ns` is perf's allowed time per sample at the
//! default sysctls (25% of a 10 us sample period, `perf_sample_allowed_ns`); the kernel's
//! defaults are set so that a handler at this cost is the most it tolerates without lowering
//! the rate, so it is an upper bound of what the kernel expects. The McKernel handler's
//! 20,000 cycles would be 6.7 us at 3 GHz; it copies 42-170 records, which this model charges
//! separately. Both assumed costs (`pmi_ns`, `drain_ns_per_record`) are reported, while at
//! their defaults, in the `assumed_costs` stat of every run that uses them.

use tierlab_core::param::params;

use super::pebs::{Pebs, PebsEvent, Spec};
use super::*;
use crate::error::Result;
use crate::hw::pebs::Throttle;
use crate::units::ByteSize;

/// Linux's per-CPU PEBS buffer: `PEBS_BUFFER_SIZE` = `PAGE_SIZE << 4`.
pub const PEBS_BUFFER_SIZE: u64 = tierlab_core::PAGE_SIZE << 4;

/// Parameters of `perf-pebs`.
#[params]
#[derive(Clone, Debug)]
pub struct PerfPebsParams {
    /// `loads` (`mem-loads` / MEM_INST_RETIRED.ALL_LOADS), `stores`, `all` or
    /// `l2-miss-loads`.
    #[param(default = PebsEvent::Loads, setting)]
    pub event: PebsEvent,
    /// Fixed period (`perf record -c`, `sample_period`): large PEBS when allowed. Exactly one
    /// of `period` and `frequency_hz`.
    #[param(default, range = "[1, 1e12]", unit = "events", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period: Option<u64>,
    /// Frequency mode (`perf record -F`, `sample_freq`): one record per PMI; samples per
    /// second per CPU.
    #[param(default, range = "(0, 1e10]", unit = "Hz", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_hz: Option<f64>,
    /// The sample type includes a callchain (PERF_SAMPLE_CALLCHAIN), which large PEBS cannot
    /// supply: one record per PMI even with a fixed period.
    #[param(default = false, setting)]
    pub callchain: bool,
    /// Bytes per PEBS record (at most the 64 KiB buffer).
    #[param(
        default = ByteSize(200),
        range = "[1, 65536]",
        unit = "bytes",
        sourced = "reference/pebs-cost.md section 1: Skylake's PEBS record (adds TSC), 25x8 = 200 B"
    )]
    pub record_size: ByteSize,
    /// PEBS-capable counters the kernel reserves room for at the end of the buffer
    /// (`max_pebs_events`).
    #[param(
        default = 4,
        range = "[1, 64]",
        unit = "counters",
        assumed = "max_pebs_events with Hyper-Threading on (4 general counters); the reference notes name \
                   the reservation (reference/pebs-cost.md section 4) but not the count"
    )]
    pub pebs_counters: u64,
    /// One PEBS assist.
    #[param(
        default = 250.0,
        range = "[0, 1e9]",
        unit = "ns",
        sourced = "reference/pebs-cost.md section 2: Akiyama & Hirofuchi, ROSS'17, 200-300 ns per record \
                   (the midpoint)"
    )]
    pub assist_ns: f64,
    /// The PMI's fixed cost (entry, handler, exit).
    #[param(
        default = 2_500.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "no measured PMI cost on Xeon was found (reference/pebs-cost.md section 3): perf's allowed \
                   time per sample at the default sysctls (25% of a 10 us sample period, \
                   perf_sample_allowed_ns), an upper bound of what the kernel expects"
    )]
    pub pmi_ns: f64,
    /// Handler time per record (perf_event_output).
    #[param(
        default = 300.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "setup_pebs_sample_data + perf_event_output of one record (decode, copy ~100 bytes into \
                   the ring buffer), taken as about one assist's 200-300 ns (ROSS'17); not measured"
    )]
    pub drain_ns_per_record: f64,
    /// `kernel.perf_event_max_sample_rate`.
    #[param(
        default = 100_000,
        range = "(0, 1e9]",
        unit = "samples per second",
        sourced = "reference/pebs-cost.md section 5: kernel.perf_event_max_sample_rate default 100000"
    )]
    pub max_sample_rate: u64,
    /// `kernel.perf_cpu_time_max_percent`.
    #[param(
        default = 25,
        range = "[0, 100]",
        unit = "percent",
        sourced = "reference/pebs-cost.md section 5: kernel.perf_cpu_time_max_percent default 25"
    )]
    pub cpu_time_max_percent: u64,
    /// CONFIG_HZ: the tick at which perf unthrottles and adjusts frequency-mode periods.
    #[param(
        default = 250,
        range = "(0, 1e6]",
        unit = "Hz",
        sourced = "reference/pebs-cost.md section 5 and suggested defaults: HZ = 250 (400 samples per tick)"
    )]
    pub hz: u64,
    /// Write each record's cache lines through the cache model.
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
}

impl PerfPebsParams {
    /// Whether the kernel would use large PEBS (a multi-record buffer).
    pub fn large_pebs(&self) -> bool {
        self.frequency_hz.is_none() && !self.callchain
    }

    /// (records the buffer holds, records at which the PMI fires).
    pub fn capacity_and_threshold(&self) -> (usize, usize) {
        let cap = (PEBS_BUFFER_SIZE / self.record_size.0.max(1)) as usize;
        if self.large_pebs() {
            (cap, cap.saturating_sub(self.pebs_counters as usize).max(1))
        } else {
            (cap, 1)
        }
    }

    /// The observer's specification.
    pub fn spec(&self) -> Spec {
        let (capacity, threshold) = self.capacity_and_threshold();
        Spec {
            driver: if self.frequency_hz.is_some() {
                "perf-frequency"
            } else if self.large_pebs() {
                "perf-large-pebs"
            } else {
                "perf-single-record"
            },
            event: self.event,
            period: self.period.unwrap_or(1),
            frequency_hz: self.frequency_hz,
            capacity,
            threshold,
            interrupt_cycles: 0.0,
            interrupt_ns: self.pmi_ns,
            drain_cycles_per_record: 0.0,
            drain_ns_per_record: self.drain_ns_per_record,
            assist_ns: self.assist_ns,
            poller: None,
            throttle: Some(Throttle::linux(self.max_sample_rate, self.cpu_time_max_percent, self.hz)),
            extra_interrupts_per_record: 0.0,
            pollution_record_bytes: if self.pollution { self.record_size.0 } else { 0 },
            period_quantum: 1,
            min_period: 1,
            min_samples: self.min_samples,
            tick: Ps::from_ns(1_000_000_000 / self.hz.max(1)),
            assumed: [
                ("pmi_ns", self.pmi_ns == PerfPebsParams::__param_default_pmi_ns()),
                (
                    "drain_ns_per_record",
                    self.drain_ns_per_record == PerfPebsParams::__param_default_drain_ns_per_record(),
                ),
            ]
            .into_iter()
            .filter_map(|(k, on)| on.then_some(k))
            .collect(),
        }
    }
}

impl TelemetryParams for PerfPebsParams {
    fn publishes(&self) -> &'static [crate::agents::FeedKind] {
        &[crate::agents::FeedKind::Samples]
    }
    fn build(&self, label: &str, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
        match (self.period, self.frequency_hz) {
            (Some(_), Some(_)) => {
                return Err(ctx.err("frequency_hz", "give either period (fixed) or frequency_hz, not both"))
            }
            (None, None) => {
                return Err(ctx.err("period", "give a fixed period or frequency_hz (perf record -c or -F)"))
            }
            _ => {}
        }
        let spec = self.spec();
        spec.validate(ctx)?;
        Ok(Box::new(Pebs::new(spec, label.to_string(), ctx.cores)))
    }
}

impl crate::params::SharedDefaults<TelemetryShared> for PerfPebsParams {
    fn shared_defaults() -> TelemetryShared {
        TelemetryShared::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(t: &str) -> PerfPebsParams {
        toml::from_str(t).unwrap()
    }

    #[test]
    fn the_kernel_chooses_large_pebs_only_for_a_fixed_period_without_callchain() {
        let fixed = params("period = 10007");
        assert!(fixed.large_pebs());
        // floor(65536 / 200) = 327 records, minus 4 reserved.
        assert_eq!(fixed.capacity_and_threshold(), (327, 323));
        assert_eq!(fixed.spec().driver, "perf-large-pebs");
        let freq = params("frequency_hz = 5000.0");
        assert_eq!(freq.capacity_and_threshold().1, 1, "frequency mode: one record per PMI");
        assert_eq!(freq.spec().driver, "perf-frequency");
        let cc = params("period = 10007\ncallchain = true");
        assert_eq!(cc.capacity_and_threshold().1, 1);
        let t = freq.spec().throttle.unwrap();
        assert_eq!((t.max_per_tick, t.allowed_ns, t.tick_ns), (400, 2_500, 4_000_000));
    }

    #[test]
    fn parameters_are_checked() {
        let ctx = TelemetryBuildCtx { cores: 2, threads: 1, index: 3, ..Default::default() };
        let bad = |t: &str| params(t).build("p", &ctx).err().unwrap().to_string();
        assert!(bad("").contains("telemetry[3].period"));
        assert!(bad("period = 5\nfrequency_hz = 10.0").contains("frequency_hz"));
        let e = load_error("kind = \"perf-pebs\"\nperiod = 5\nhz = 0");
        assert!(e.contains("telemetry[0].hz") && e.contains("must be in (0, 1000000]"), "{e}");
        assert!(bad("period = 0").contains("period"));
        for text in ["record_size = 0", "record_size = \"65537B\""] {
            let e = load_error(&format!("kind = \"perf-pebs\"\nperiod = 5\n{text}"));
            assert!(e.contains("telemetry[0].record_size") && e.contains("must be in [1, 65536]"), "{e}");
        }
        assert!(toml::from_str::<PerfPebsParams>("buffer_size = \"8KiB\"").is_err(), "the buffer is fixed");
    }

    #[test]
    fn frequency_mode_interrupts_per_sample_large_pebs_per_buffer() {
        use crate::agents::telemetry::pebs::tests::run_small;
        let freq = run_small("kind = \"perf-pebs\"\nfrequency_hz = 5000.0");
        let fixed = run_small("kind = \"perf-pebs\"\nperiod = 2003");
        let g = |r: &crate::driver::RunResult, k: &str| {
            r.stats.get(&format!("telemetry.t.{k}")).unwrap().as_f64()
        };
        assert_eq!(
            freq.stats.get("telemetry.t.driver"),
            Some(&crate::stats::StatValue::Str("perf-frequency".into()))
        );
        assert_eq!(g(&freq, "interrupts"), g(&freq, "samples"), "one PMI per record");
        // The costs at their assumed defaults are named in the results.
        let assumed = crate::stats::StatValue::Str("pmi_ns,drain_ns_per_record".into());
        assert_eq!(freq.stats.get("telemetry.t.assumed_costs"), Some(&assumed));
        let set = run_small(
            "kind = \"perf-pebs\"\nfrequency_hz = 5000.0\npmi_ns = 1000.0\ndrain_ns_per_record = 100.0",
        );
        assert_eq!(
            set.stats.get("telemetry.t.assumed_costs"),
            Some(&crate::stats::StatValue::Str("none".into()))
        );
        assert!(g(&freq, "samples") > 500.0);
        let (s, i) = (g(&fixed, "samples"), g(&fixed, "interrupts"));
        assert!(s > 2.0 * 323.0, "{s}");
        assert_eq!(i, (s / 323.0).floor(), "one PMI per 323 records");
        // Cost: assist per record, PMI + per-record drain per interrupt.
        let cpu = i * 2_500e-9 + s * (250e-9 + 300e-9 * i * 323.0 / s);
        assert!((g(&fixed, "cpu_seconds") - cpu).abs() < 1e-9, "{} vs {cpu}", g(&fixed, "cpu_seconds"));
    }

    #[test]
    fn throttling_caps_interrupts_per_tick_and_logs_throttles() {
        use crate::agents::telemetry::pebs::tests::run_small;
        // Every 10th load one PMI, far above 400 per 4 ms tick: throttled every tick.
        let r = run_small("kind = \"perf-pebs\"\nperiod = 10\ncallchain = true");
        let g = |k: &str| r.stats.get(&format!("telemetry.t.{k}")).unwrap().as_f64();
        assert!(g("throttles") >= 40.0, "{}", g("throttles"));
        // At most max_samples_per_tick interrupts per 4 ms tick over 0.2 s (plus the first).
        assert!(g("interrupts") <= (50.0 + 1.0) * 400.0, "{}", g("interrupts"));
    }
}
