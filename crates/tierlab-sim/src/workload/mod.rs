//! Workloads: the sources of memory accesses.
//!
//! # Contract
//! A workload is built once from its parameters ([`WorkloadParams::build`]), then:
//! 1. [`Workload::setup`] maps its memory through [`AddressSpace`] (and may bulk-populate
//!    it: pages placed without simulated accesses, so a 5 TiB heap costs nothing to fill).
//! 2. The driver repeatedly calls [`Workload::next_batch`] for each thread `t` in
//!    `0..threads()`, passing that thread's simulated clock. The workload appends accesses to
//!    `out` (any number, typically 1..=131072) and returns [`Step::Continue`], or
//!    [`Step::Done`] when thread `t` has finished (accesses appended in that same call are
//!    still executed). A workload whose threads synchronise (a replay of a recording with a
//!    `sync` table) may also return [`Step::Wait`] (thread `t` waits for another thread:
//!    nothing appended, the driver asks again once other threads ran) or [`Step::Resume`]
//!    (thread `t` waited until that simulated time: its clock moves there before the
//!    appended accesses run). Time-based behaviour (masim phases) reads `now`; the driver
//!    executes every access of a batch before asking for the next one, except at the end
//!    of the run, when it hands back the unexecuted tail through [`Workload::discard`].
//! 3. At the end of the run [`Workload::report_stats`] publishes the workload's own stats
//!    under `workload.` (e.g. masim's per-phase, per-region access counts).
//!
//! Every random choice must come from an [`crate::rng::Rng`] derived from
//! [`BuildCtx::seed`] (per thread: `Rng::derived(seed, "workload.<kind>", t)`), so the same
//! scenario and seed give the same accesses.
//!
//! # Registry
//! Each implementation lives in its own file and is registered by one line in
//! [`registry!`] below: kind name, enum variant, parameter type. Parameter types are declared
//! with `#[params]` (each field's default, range, unit and provenance; a typo is an error,
//! and `tierlab export` prints every default); the registry reads each kind's table as
//! [`WorkloadShared`] plus its own (`With<WorkloadShared, ItsParams>`), the kind giving its
//! defaults for the shared part ([`crate::params::SharedDefaults`]); `replay`, which takes
//! its threads from the recording, is registered `alone`.

use crate::error::{Result, SimError};
pub use crate::os::{AddressSpace, MapOptions};
use crate::stats::Stats;
pub use crate::units::Ps;
use std::path::PathBuf;
use tierlab_core::param::params;
pub use tierlab_core::{Access, AccessKind, PageSize};

pub mod graph;
pub mod hotset;
pub mod kv;
pub mod lulesh;
pub mod masim;
pub mod masim_config;
pub mod omp_kernel;
pub mod pointer_chase;
pub mod replay;
pub mod spmv;
pub mod stencil;
pub mod stream;
pub mod sweep3d;
#[cfg(test)]
pub mod toy;
pub mod uniform;
pub mod zipf;

/// Whether a thread has more to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// More batches will follow.
    Continue,
    /// This thread has finished.
    Done,
    /// This thread waits for another one (a barrier, a lock): nothing was appended; the
    /// driver runs the other threads and asks again.
    Wait,
    /// This thread waited until this simulated time: its clock moves there (if it is
    /// behind) before the appended accesses run; more batches follow.
    Resume(Ps),
}

/// What every workload gets at build time.
#[derive(Clone, Debug, Default)]
pub struct BuildCtx {
    /// The scenario's seed.
    pub seed: u64,
    /// Directory relative paths in parameters are resolved against (the scenario's folder).
    pub base_dir: PathBuf,
    /// The scenario file's name, for error messages.
    pub scenario_file: String,
    /// Cores of the machine (a workload's `threads` must not exceed it).
    pub cores: usize,
    /// Simulated run length ([`Ps::ZERO`]: until the workload finishes).
    pub duration: Ps,
    /// Recorded accesses handed over by the caller for `replay` (see [`replay`]).
    pub replay: Option<std::sync::Arc<replay::ReplayData>>,
}

/// A source of memory accesses. See the module docs for the contract.
pub trait Workload: Send {
    /// Number of threads; thread `t` runs on core `t`.
    fn threads(&self) -> usize;
    /// Map (and optionally populate) memory.
    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()>;
    /// Append the next accesses of thread `t` (whose clock is `now`) to `out`.
    fn next_batch(
        &mut self,
        t: usize,
        now: Ps,
        out: &mut Vec<Access>,
        mem: &mut dyn AddressSpace,
    ) -> Result<Step>;
    /// Take back accesses of thread `t` that were generated but not executed (run end).
    fn discard(&mut self, _t: usize, _unexecuted: &[Access]) {}
    /// Publish the workload's stats (under `workload.`).
    fn report_stats(&self, _out: &mut Stats) {}
    /// Extra time-series columns for the window `[start, end)` that just closed, as
    /// (name, value) (e.g. `kv.throughput`); the same names every window.
    fn window_columns(&mut self, _start: Ps, _end: Ps) -> Vec<(String, f64)> {
        Vec::new()
    }
    /// Total simulated time the workload wants when the scenario gives no duration
    /// (masim: the sum of its phases times `repeat`); `None` = runs until it reports Done.
    fn natural_duration(&self) -> Option<Ps> {
        None
    }
    /// The hot set the workload declares for the window `[start, end)`, as page-aligned
    /// `(start, length)` ranges (hotset: its needles; the ground truth of
    /// `scoring.truth = "declared"`); `None` = the workload declares none.
    fn declared_hot_ranges(&self, _start: Ps, _end: Ps) -> Option<Vec<(u64, u64)>> {
        None
    }
}

/// The parameters (almost) every workload kind shares, flattened into each kind's `[workload]`
/// table with [`crate::params::With`] (each kind gives its defaults). `replay` takes its
/// threads from the recording and declares its own, so the registry below lists each kind's
/// `With<WorkloadShared, _>` itself rather than applying `shared WorkloadShared` to all.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadShared {
    /// Threads (thread `t` runs on core `t`; at most `machine.cores`).
    #[param(default = 1, range = "[1, 4096]", unit = "threads", setting)]
    pub threads: usize,
    /// Page size of the workload's mappings (`"4KiB"`, `"2MiB"`, `"1GiB"`); default the machine's.
    #[param(default, setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_size: Option<PageSize>,
    /// Bulk-populate the workload's memory at setup (pages placed without simulated first
    /// touches, as if touched by thread 0). Default: the kind's (false except for the hot-set
    /// heap and the key-value store).
    #[param(default, setting)]
    pub populate: bool,
}

/// Parameters of one workload kind.
pub trait WorkloadParams {
    /// Build the workload (validating parameters: errors name the field).
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>>;
}

/// Check a workload's `threads` against the machine.
pub fn check_threads(kind: &str, threads: usize, ctx: &BuildCtx) -> Result<()> {
    if threads == 0 {
        return Err(SimError::config(&ctx.scenario_file, "workload.threads", "must be at least 1"));
    }
    if ctx.cores > 0 && threads > ctx.cores {
        return Err(SimError::config(
            &ctx.scenario_file,
            "workload.threads",
            format!(
                "{kind}: {threads} threads but the machine has {} cores (one thread per core)",
                ctx.cores
            ),
        ));
    }
    Ok(())
}

crate::registry! {
    /// A workload's configuration: `kind` picks the implementation, the other keys are its
    /// parameters.
    pub enum WorkloadConfig: WorkloadParams, shared WorkloadShared {
        "masim" => Masim(masim::MasimParams),
        "stream" => Stream(stream::StreamParams),
        "uniform" => Uniform(uniform::UniformParams),
        "zipf" => Zipf(zipf::ZipfParams),
        "pointer-chase" => PointerChase(pointer_chase::PointerChaseParams),
        "stencil" => Stencil(stencil::StencilParams),
        "spmv" => Spmv(spmv::SpmvParams),
        "hotset" => Hotset(hotset::HotsetParams),
        // Replay takes its threads from the recording: it declares them itself.
        "replay" => Replay(replay::ReplayParams) alone,
        "sweep3d" => Sweep3d(sweep3d::Sweep3dParams),
        "omp-kernel" => OmpKernel(omp_kernel::OmpKernelParams),
        "kv" => Kv(kv::KvParams),
        "lulesh" => Lulesh(lulesh::LuleshParams),
        "graph" => Graph(graph::GraphParams),
        #[cfg(test)] "toy" => Toy(toy::ToyParams),
    }
}

impl WorkloadConfig {
    /// Build the workload.
    pub fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        self.params().build(ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierlab_core::param::{expand, Provenance};

    /// Every kind's parameters are declared with `#[params]`,
    /// each number with a range and a provenance.
    #[test]
    fn every_kind_declares_its_fields() {
        for k in WorkloadConfig::kinds() {
            let fields = expand(WorkloadConfig::fields_of_kind(k).expect("registered"));
            assert!(fields.len() >= 3, "{k}");
            for f in fields {
                assert!(!f.rust_type.is_empty(), "workload {k}: `{}` is not declared", f.name);
                if (f.shape)().is_numeric() {
                    assert!(f.range.is_some(), "workload {k}: `{}` has no range", f.name);
                    assert_ne!(f.provenance, Provenance::Unstated, "workload {k}: `{}`", f.name);
                }
            }
        }
    }
}
