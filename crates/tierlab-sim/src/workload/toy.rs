//! `toy`: a workload that exists to show how one is added (one file, one registry line) and
//! to test that the driver runs any registered workload: each thread loads `accesses`
//! randomly chosen `line`-byte lines of one shared buffer, every choice from the scenario's
//! seed. Registered for tests only.

use tierlab_core::param::params;

use super::{
    check_threads, Access, AccessKind, AddressSpace, BuildCtx, MapOptions, Ps, Step, Workload,
    WorkloadParams, WorkloadShared,
};
use crate::error::Result;
use crate::params::{SharedDefaults, With};
use crate::rng::Rng;
use crate::stats::Stats;
use crate::units::ByteSize;

/// Parameters of `toy` (its own; the shared `threads`, `page_size` and `populate` are
/// [`WorkloadShared`]'s, added by the registry).
#[params]
#[derive(Clone, Debug)]
pub struct ToyParams {
    /// Bytes of the buffer.
    #[param(default = ByteSize(1 << 20), range = "[4096, 1e12]", unit = "bytes", setting)]
    pub size: ByteSize,
    /// Bytes of one line (the buffer is accessed line by line).
    #[param(default = 64, range = "[1, 1048576]", unit = "bytes", setting)]
    pub line: u64,
    /// Loads per thread before it is done.
    #[param(default = 1_000_000, range = "[1, 1e12]", unit = "accesses", setting)]
    pub accesses: u64,
}

impl SharedDefaults<WorkloadShared> for ToyParams {
    fn shared_defaults() -> WorkloadShared {
        WorkloadShared::default()
    }
}

impl WorkloadParams for With<WorkloadShared, ToyParams> {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        check_threads("toy", self.shared.threads, ctx)?;
        let rngs =
            (0..self.shared.threads).map(|t| Rng::derived(ctx.seed, "workload.toy", t as u64)).collect();
        let done = vec![0; self.shared.threads];
        Ok(Box::new(Toy { p: self.clone(), base: 0, rngs, done }))
    }
}

/// Accesses per batch.
const BATCH: u64 = 8192;

/// The `toy` workload.
pub struct Toy {
    p: With<WorkloadShared, ToyParams>,
    base: u64,
    rngs: Vec<Rng>,
    done: Vec<u64>,
}

impl Workload for Toy {
    fn threads(&self) -> usize {
        self.p.shared.threads
    }
    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        let opts = MapOptions {
            page_size: self.p.shared.page_size,
            populate: self.p.shared.populate,
            ..MapOptions::named("toy")
        };
        self.base = mem.mmap(self.p.size.0, opts)?;
        Ok(())
    }
    fn next_batch(
        &mut self,
        t: usize,
        _now: Ps,
        out: &mut Vec<Access>,
        _mem: &mut dyn AddressSpace,
    ) -> Result<Step> {
        let lines = (self.p.size.0 / self.p.line).max(1);
        let n = (self.p.accesses - self.done[t]).min(BATCH);
        for _ in 0..n {
            let addr = self.base + self.rngs[t].below(lines) * self.p.line;
            out.push(Access { addr, kind: AccessKind::Read });
        }
        self.done[t] += n;
        Ok(if self.done[t] == self.p.accesses { Step::Done } else { Step::Continue })
    }
    fn report_stats(&self, out: &mut Stats) {
        out.set("workload.toy.accesses", self.done.iter().sum::<u64>());
    }
}
