//! `ibs`: AMD Instruction-Based Sampling, op sampling (`ibs_op`), as Linux perf drives it
//! (`arch/x86/events/amd/ibs.c`); the observer is [`super::pebs::Pebs`].
//!
//! IBS has no record buffer: every op sample raises an NMI whose handler reads the IBS MSRs
//! (`perf_ibs_handle_irq`), so the cost is one interrupt per sample. The op counter counts
//! dispatched ops (`cnt_ctl`); the engine simulates only loads and stores, so the model
//! counts memory ops and takes, for each sample that lands on one (and carries its data
//! address), `1 / mem_op_fraction - 1` more interrupts for the samples that land on other ops
//! and carry no address (accumulated fractionally, deterministically). The period's low 4 bits
//! are masked (periods are multiples of 16) and at least `min_period`.
//!
//! Interrupts are throttled as perf throttles every sampling event (see `perf-pebs`).
//!
//! Parameters: [`IbsParams`] (defaults, ranges and sources in `docs/parameters.md`). The two
//! assumed costs (`nmi_ns`, `mem_op_fraction`) are reported, while at their defaults, in the
//! `assumed_costs` stat.

use tierlab_core::param::params;

use super::pebs::{Pebs, PebsEvent, Spec};
use super::*;
use crate::error::Result;
use crate::hw::pebs::Throttle;

/// IBS periods are multiples of this many ops (`ibs.c` masks the period's low nibble;
/// `reference/pebs-cost.md` section 7).
pub const PERIOD_QUANTUM: u64 = 16;

/// Parameters of `ibs`.
#[params]
#[derive(Clone, Debug)]
pub struct IbsParams {
    /// Ops between samples (rounded down to a multiple of 16). Exactly one of `period` and
    /// `frequency_hz`.
    #[param(default, range = "[1, 1e12]", unit = "ops", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period: Option<u64>,
    /// Samples per second per CPU (perf's frequency mode).
    #[param(default, range = "(0, 1e10]", unit = "Hz", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_hz: Option<f64>,
    /// Smallest op period accepted.
    #[param(
        default = 144,
        range = "[1, 1e12]",
        unit = "ops",
        sourced = "reference/pebs-cost.md section 7: ibs.c, a 2024 patch sets the minimum op period 0x90 \
                   (144)"
    )]
    pub min_period: u64,
    /// Share of ops that are loads or stores.
    #[param(
        default = 0.35,
        range = "(0, 1]",
        unit = "fraction",
        assumed = "the share of loads and stores in a typical integer/FP instruction mix (roughly a third in \
                   common instruction-mix studies); not measured for any workload here"
    )]
    pub mem_op_fraction: f64,
    /// Cost of one IBS NMI.
    #[param(
        default = 2_500.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "no measured IBS NMI cost was found; reference/pebs-cost.md (section 7 and its suggested \
                   defaults) says to reuse the PMI cost (perf-pebs' pmi_ns) until a measurement exists"
    )]
    pub nmi_ns: f64,
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
    /// CONFIG_HZ.
    #[param(
        default = 250,
        range = "(0, 1e6]",
        unit = "Hz",
        sourced = "reference/pebs-cost.md section 5 and suggested defaults: HZ = 250 (400 samples per tick)"
    )]
    pub hz: u64,
    /// A page is hot in a window when it got at least this many samples there.
    #[param(
        default = 1,
        range = "[1, 281474976710656]",
        unit = "samples",
        assumed = "every sampled page is hot in its window"
    )]
    pub min_samples: u32,
}

impl IbsParams {
    /// The memory-op period that gives one sample every `ops` ops.
    fn mem_period(&self, ops: u64) -> u64 {
        ((ops as f64 * self.mem_op_fraction).round() as u64).max(1)
    }

    /// The observer's specification. The hardware model counts memory ops, so the op
    /// period becomes `ops x mem_op_fraction` memory ops.
    pub fn spec(&self) -> Spec {
        let ops = self.period.map(|p| ((p / PERIOD_QUANTUM) * PERIOD_QUANTUM).max(self.min_period));
        Spec {
            driver: "ibs-op",
            event: PebsEvent::All,
            period: ops.map_or(1, |o| self.mem_period(o)),
            frequency_hz: self.frequency_hz.map(|f| f * self.mem_op_fraction),
            capacity: 1,
            threshold: 1,
            interrupt_cycles: 0.0,
            interrupt_ns: self.nmi_ns,
            drain_cycles_per_record: 0.0,
            drain_ns_per_record: 0.0,
            assist_ns: 0.0,
            poller: None,
            throttle: Some(Throttle::linux(self.max_sample_rate, self.cpu_time_max_percent, self.hz)),
            extra_interrupts_per_record: 1.0 / self.mem_op_fraction - 1.0,
            pollution_record_bytes: 0,
            period_quantum: 1,
            min_period: self.mem_period(self.min_period),
            min_samples: self.min_samples,
            tick: Ps::from_ns(1_000_000_000 / self.hz.max(1)),
            assumed: [
                ("nmi_ns", self.nmi_ns == IbsParams::__param_default_nmi_ns()),
                ("mem_op_fraction", self.mem_op_fraction == IbsParams::__param_default_mem_op_fraction()),
            ]
            .into_iter()
            .filter_map(|(k, on)| on.then_some(k))
            .collect(),
        }
    }
}

impl TelemetryParams for IbsParams {
    fn publishes(&self) -> &'static [crate::agents::FeedKind] {
        &[crate::agents::FeedKind::Samples]
    }
    fn build(&self, label: &str, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
        match (self.period, self.frequency_hz) {
            (Some(_), Some(_)) => {
                return Err(ctx.err("frequency_hz", "give either period (fixed) or frequency_hz, not both"))
            }
            (None, None) => return Err(ctx.err("period", "give a fixed op period or frequency_hz")),
            _ => {}
        }
        if let Some(p) = self.period {
            if p < self.min_period.max(PERIOD_QUANTUM) {
                return Err(ctx.err(
                    "period",
                    format!(
                        "{p} ops is below the smallest IBS op period ({})",
                        self.min_period.max(PERIOD_QUANTUM)
                    ),
                ));
            }
        }
        let spec = self.spec();
        spec.validate(ctx)?;
        Ok(Box::new(Pebs::new(spec, label.to_string(), ctx.cores)))
    }
}

impl crate::params::SharedDefaults<TelemetryShared> for IbsParams {
    fn shared_defaults() -> TelemetryShared {
        TelemetryShared::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_multiples_of_16_ops_and_every_sample_interrupts() {
        let p: IbsParams = toml::from_str("period = 1000").unwrap();
        let s = p.spec();
        // 1000 -> 992 ops -> 347 memory ops at 35%.
        assert_eq!(s.period, 347);
        assert_eq!((s.capacity, s.threshold), (1, 1));
        assert!((s.extra_interrupts_per_record - (1.0 / 0.35 - 1.0)).abs() < 1e-12);
        let ctx = TelemetryBuildCtx { cores: 1, threads: 1, ..Default::default() };
        let e = toml::from_str::<IbsParams>("period = 100").unwrap().build("i", &ctx).err().unwrap();
        assert!(e.to_string().contains("below the smallest IBS op period (144)"), "{e}");
        let e = load_error("kind = \"ibs\"\nperiod = 1000\nmem_op_fraction = 0.0");
        assert!(e.contains("telemetry[0].mem_op_fraction") && e.contains("must be in (0, 1]"), "{e}");
    }

    #[test]
    fn every_op_sample_is_an_interrupt() {
        use crate::agents::telemetry::pebs::tests::run_small;
        let r = run_small("kind = \"ibs\"\nperiod = 4096");
        let g = |k: &str| r.stats.get(&format!("telemetry.t.{k}")).unwrap().as_f64();
        let (s, i) = (g("samples"), g("interrupts"));
        assert!(s > 100.0, "{s}");
        // 1 / 0.35 interrupts per sample with an address.
        assert!((i / s - 1.0 / 0.35).abs() < 0.01, "{i} / {s}");
        assert!((g("cpu_seconds") - i * 2_500e-9).abs() < 1e-9);
    }
}
