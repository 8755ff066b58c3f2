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
//! # Defaults and sources
//! | parameter | default | source |
//! |---|---|---|
//! | `record_size` | 200 bytes | Skylake's PEBS record, 25 u64 (`ds.c` `struct pebs_record_skl`) |
//! | `pebs_counters` | 4 | `max_pebs_events` with Hyper-Threading on (4 general counters) |
//! | `assist_ns` | 250 ns | Akiyama & Hirofuchi, ROSS'17 (200-300 ns per record) |
//! | `pmi_ns` | 2,500 ns | ASSUMPTION (no measured PMI cost on Xeon was found, `reference/pebs-cost.md` section 3): perf's allowed time per sample at the default sysctls (25% of a 10 us sample period, `perf_sample_allowed_ns`); the kernel's defaults are set so that a handler at this cost is the most it tolerates without lowering the rate, so it is an upper bound of what the kernel expects. The McKernel handler's 20,000 cycles would be 6.7 us at 3 GHz; it copies 42-170 records, which this model charges separately |
//! | `drain_ns_per_record` | 300 ns | ASSUMPTION: `setup_pebs_sample_data` + `perf_event_output` of one record (decode, copy ~100 bytes into the ring buffer), taken as about one assist's 200-300 ns (ROSS'17), not measured |
//!
//! Both assumptions are reported, while at their defaults, in the `assumed_costs` stat of every
//! run that uses them.
//! | `max_sample_rate`, `cpu_time_max_percent`, `hz` | 100,000, 25, 250 | the kernel's defaults (`kernel.perf_event_max_sample_rate`, `kernel.perf_cpu_time_max_percent`, CONFIG_HZ=250) |

use serde::{Deserialize, Serialize};

use super::pebs::{Pebs, PebsEvent, Spec};
use super::*;
use crate::error::Result;
use crate::hw::pebs::Throttle;
use crate::units::ByteSize;

/// Linux's per-CPU PEBS buffer: `PEBS_BUFFER_SIZE` = `PAGE_SIZE << 4`.
pub const PEBS_BUFFER_SIZE: u64 = tierlab_core::PAGE_SIZE << 4;

/// Parameters of `perf-pebs`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfPebsParams {
    /// `loads` (default, `mem-loads` / MEM_INST_RETIRED.ALL_LOADS), `stores`, `all` or
    /// `l2-miss-loads`.
    #[serde(default = "d_event")]
    pub event: PebsEvent,
    /// Fixed period (`perf record -c`, `sample_period`): large PEBS when allowed. Exactly one
    /// of `period` and `frequency_hz`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<u64>,
    /// Frequency mode (`perf record -F`, `sample_freq`): one record per PMI; samples per
    /// second per CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_hz: Option<f64>,
    /// The sample type includes a callchain (PERF_SAMPLE_CALLCHAIN), which large PEBS cannot
    /// supply: one record per PMI even with a fixed period. Default false.
    #[serde(default)]
    pub callchain: bool,
    /// Bytes per PEBS record. Default 200 (Skylake).
    #[serde(default = "d_record")]
    pub record_size: ByteSize,
    /// PEBS-capable counters the kernel reserves room for at the end of the buffer
    /// (`max_pebs_events`). Default 4.
    #[serde(default = "d_counters")]
    pub pebs_counters: u64,
    /// One PEBS assist, ns. Default 250 (ROSS'17).
    #[serde(default = "d_assist")]
    pub assist_ns: f64,
    /// The PMI's fixed cost (entry, handler, exit), ns. Default 2,500 (an ASSUMPTION, see the
    /// module docs: perf's allowed time per sample; no measurement was found).
    #[serde(default = "d_pmi")]
    pub pmi_ns: f64,
    /// Handler time per record (perf_event_output), ns. Default 300 (an ASSUMPTION: about one
    /// assist; not measured).
    #[serde(default = "d_drain")]
    pub drain_ns_per_record: f64,
    /// `kernel.perf_event_max_sample_rate`. Default 100,000.
    #[serde(default = "d_rate")]
    pub max_sample_rate: u64,
    /// `kernel.perf_cpu_time_max_percent`. Default 25.
    #[serde(default = "d_percent")]
    pub cpu_time_max_percent: u64,
    /// CONFIG_HZ: the tick at which perf unthrottles and adjusts frequency-mode periods.
    /// Default 250.
    #[serde(default = "d_hz")]
    pub hz: u64,
    /// Write each record's cache lines through the cache model. Default true.
    #[serde(default = "d_true")]
    pub pollution: bool,
    /// A page is hot in a window when it got at least this many samples there. Default 1.
    #[serde(default = "d_min_samples")]
    pub min_samples: u32,
}

fn d_event() -> PebsEvent {
    PebsEvent::Loads
}
fn d_record() -> ByteSize {
    ByteSize(200)
}
fn d_counters() -> u64 {
    4
}
fn d_assist() -> f64 {
    250.0
}
fn d_pmi() -> f64 {
    2_500.0
}
fn d_drain() -> f64 {
    300.0
}
fn d_rate() -> u64 {
    100_000
}
fn d_percent() -> u64 {
    25
}
fn d_hz() -> u64 {
    250
}
fn d_true() -> bool {
    true
}
fn d_min_samples() -> u32 {
    1
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
            tick_ns: 1_000_000_000 / self.hz.max(1),
            assumed: [
                ("pmi_ns", self.pmi_ns == d_pmi()),
                ("drain_ns_per_record", self.drain_ns_per_record == d_drain()),
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
        if self.record_size.0 == 0 || self.record_size.0 > PEBS_BUFFER_SIZE {
            return Err(ctx
                .err("record_size", format!("{} bytes does not fit the 64 KiB buffer", self.record_size.0)));
        }
        for (f, v) in [("max_sample_rate", self.max_sample_rate), ("hz", self.hz)] {
            if v == 0 {
                return Err(ctx.err(f, "must be > 0"));
            }
        }
        if self.cpu_time_max_percent > 100 {
            return Err(ctx.err("cpu_time_max_percent", "must be at most 100"));
        }
        if self.pmi_ns < 0.0 || !self.pmi_ns.is_finite() {
            return Err(ctx.err("pmi_ns", "must be >= 0"));
        }
        let spec = self.spec();
        spec.validate(ctx)?;
        Ok(Box::new(Pebs::new(spec, label.to_string(), ctx.cores)))
    }
}

crate::legacy_params!(PerfPebsParams);

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
        assert!(bad("period = 5\nhz = 0").contains("hz"));
        assert!(bad("period = 0").contains("period"));
        assert!(bad("period = 5\nrecord_size = 0").contains("record_size"));
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
