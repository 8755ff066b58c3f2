//! `uniform`: accesses spread uniformly at random over one mapping (a GUPS-like stream
//! without hot spots, the baseline every hotness detector should find flat).

use super::{
    check_threads, Access, AddressSpace, BuildCtx, MapOptions, Ps, Step, Workload, WorkloadParams,
    WorkloadShared,
};
use crate::error::{Result, SimError};
use crate::rng::Rng;
use crate::stats::Stats;
use crate::units::ByteSize;
use tierlab_core::param::params;

/// Parameters of the `uniform` workload.
#[params]
#[derive(Clone, Debug)]
pub struct UniformParams {
    /// Bytes accessed (one mapping named `heap`).
    #[param(default = ByteSize(1 << 30), setting)]
    pub footprint: ByteSize,
    /// Alignment of every access in bytes (offsets are multiples of it); 64 is one cache
    /// line.
    #[param(default = ByteSize(64), setting)]
    pub align: ByteSize,
    /// Fraction of accesses that are loads, the rest stores (1: all loads).
    #[param(default = 1.0, range = "[0, 1]", unit = "fraction", setting)]
    pub read_fraction: f64,
    /// Accesses per thread before it is done; 0 = until the scenario's duration.
    #[param(default, range = "[0, 281474976710656]", unit = "accesses", setting)]
    pub accesses: u64,
}

const BATCH: u64 = 16_384;

/// Check a `read_fraction` parameter.
pub(crate) fn check_fraction(ctx: &BuildCtx, field: &str, v: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&v) {
        return Err(SimError::config(
            &ctx.scenario_file,
            format!("workload.{field}"),
            format!("must be within 0..1, got {v}"),
        ));
    }
    Ok(())
}

/// Threshold such that `rng.next_u64() < t` has probability `f` (`f` in 0..=1; 1 = always).
pub(crate) fn fraction_threshold(f: f64) -> u64 {
    if f >= 1.0 {
        u64::MAX
    } else {
        (f * 18_446_744_073_709_551_616.0) as u64
    }
}

impl WorkloadParams for UniformConfig {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        let f = &ctx.scenario_file;
        check_threads("uniform", self.shared.threads, ctx)?;
        check_fraction(ctx, "read_fraction", self.read_fraction)?;
        if self.align.0 == 0 {
            return Err(SimError::config(f, "workload.align", "must be at least 1 byte"));
        }
        let slots = self.footprint.0 / self.align.0;
        if slots == 0 {
            return Err(SimError::config(
                f,
                "workload.footprint",
                format!("must be at least `align` ({} bytes), got {}", self.align.0, self.footprint.0),
            ));
        }
        if self.accesses == 0 && ctx.duration == Ps::ZERO {
            return Err(SimError::config(
                f,
                "workload.accesses",
                "accesses = 0 runs until the scenario's duration, but the scenario sets none",
            ));
        }
        Ok(Box::new(Uniform {
            slots,
            base: 0,
            rngs: (0..self.shared.threads)
                .map(|t| Rng::derived(ctx.seed, "workload.uniform", t as u64))
                .collect(),
            issued: vec![0; self.shared.threads],
            discarded: 0,
            p: self.clone(),
        }))
    }
}

/// The `uniform` workload.
pub struct Uniform {
    p: UniformConfig,
    slots: u64,
    base: u64,
    rngs: Vec<Rng>,
    issued: Vec<u64>,
    discarded: u64,
}

impl Workload for Uniform {
    fn threads(&self) -> usize {
        self.p.shared.threads
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        let opts = MapOptions {
            name: "heap".into(),
            page_size: self.p.shared.page_size,
            populate: self.p.shared.populate,
            thread: 0,
        };
        self.base = mem.mmap(self.slots * self.p.align.0, opts)?;
        Ok(())
    }

    fn next_batch(
        &mut self,
        t: usize,
        _now: Ps,
        out: &mut Vec<Access>,
        _mem: &mut dyn AddressSpace,
    ) -> Result<Step> {
        let mut n = BATCH;
        if self.p.accesses > 0 {
            n = n.min(self.p.accesses - self.issued[t]);
        }
        let (base, slots, align) = (self.base, self.slots, self.p.align.0);
        // The generator's state in a local: written through `&mut self.rngs[t]`, it would be
        // stored and reloaded at every access (the batch's stores might alias it; callgrind,
        // uniform 1 GiB: 28 -> 20 instructions per access). Written back below.
        let mut local = self.rngs[t].clone();
        let rng = &mut local;
        let rf = self.p.read_fraction;
        if rf >= 1.0 {
            out.extend((0..n).map(|_| Access::read(base + rng.below(slots) * align)));
        } else if rf <= 0.0 {
            out.extend((0..n).map(|_| Access::write(base + rng.below(slots) * align)));
        } else {
            let th = fraction_threshold(rf);
            out.extend((0..n).map(|_| {
                let a = base + rng.below(slots) * align;
                if rng.next_u64() < th {
                    Access::read(a)
                } else {
                    Access::write(a)
                }
            }));
        }
        self.rngs[t] = local;
        self.issued[t] += n;
        if self.p.accesses > 0 && self.issued[t] >= self.p.accesses {
            Ok(Step::Done)
        } else {
            Ok(Step::Continue)
        }
    }

    fn discard(&mut self, _t: usize, unexecuted: &[Access]) {
        self.discarded += unexecuted.len() as u64;
    }

    fn report_stats(&self, out: &mut Stats) {
        out.set("workload.accesses", self.issued.iter().sum::<u64>() - self.discarded);
    }
}

/// `UniformParams` with the workload parameters every kind shares ([`WorkloadShared`]).
pub type UniformConfig = crate::params::With<WorkloadShared, UniformParams>;

impl crate::params::SharedDefaults<WorkloadShared> for UniformParams {
    fn shared_defaults() -> WorkloadShared {
        WorkloadShared::default()
    }
}
#[cfg(test)]
mod tests {
    use super::super::masim::testing::*;
    use super::*;

    fn ctx() -> BuildCtx {
        BuildCtx {
            seed: 3,
            scenario_file: "s.toml".into(),
            cores: 4,
            duration: Ps::ZERO,
            ..Default::default()
        }
    }

    #[test]
    fn uniform_covers_footprint_with_read_fraction() {
        let p: UniformConfig =
            toml::from_str("footprint = \"64KiB\"\nread_fraction = 0.25\naccesses = 100000\nthreads = 2")
                .unwrap();
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let base = mem.find("heap").start;
        let mut hist = vec![0u32; 1024];
        let mut writes = 0;
        let mut total = 0;
        drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, a| {
            let off = a.addr - base;
            assert_eq!(off & 63, 0);
            hist[(off / 64) as usize] += 1;
            writes += a.is_write() as u32;
            total += 1;
        });
        assert_eq!(total, 200_000);
        assert!(hist.iter().all(|&c| (120..280).contains(&c)), "{hist:?}");
        let wf = writes as f64 / total as f64;
        assert!((wf - 0.75).abs() < 0.01, "{wf}");
        let mut s = Stats::new();
        w.report_stats(&mut s);
        assert_eq!(s.get_u64("workload.accesses"), 200_000);
    }

    #[test]
    fn errors_name_fields() {
        let c = ctx();
        let bad = |t: &str| toml::from_str::<UniformConfig>(t).unwrap().build(&c).err().unwrap().to_string();
        assert!(bad("read_fraction = 1.5\naccesses = 1").contains("workload.read_fraction"));
        assert!(bad("align = 0\naccesses = 1").contains("workload.align"));
        assert!(bad("footprint = 10\naccesses = 1").contains("workload.footprint"));
        assert!(bad("footprint = 4096").contains("workload.accesses"));
        assert!(toml::from_str::<UniformConfig>("footprnt = 1").is_err());
    }
}
