//! `omp-kernel`: OpenMP-style loop kernels whose data one thread initializes.
//!
//! The pattern that makes first-touch placement fail on a ccNUMA machine: the program
//! initializes its arrays in a serial region (thread 0 writes every element, so first touch
//! puts every page on thread 0's node), then runs parallel loops with a static schedule
//! (each thread works on the same contiguous block of every array in every iteration).
//!
//! Kernels (`kernel`):
//! - `stream`: one iteration runs STREAM's four kernels (McCalpin) over arrays `a`, `b`, `c`
//!   of `array_size` bytes each: copy `c = a`, scale `b = s*c`, add `c = a + b`, triad
//!   `a = b + s*c`; every array is read and written.
//! - `jacobi`: a 3-D 7-point Jacobi sweep over an `nx * ny * nz` grid of f64, arrays `a`
//!   and `b` swapping roles every iteration, split along z (`#pragma omp for` over planes).
//!
//! Initialization (`init`):
//! - `serial` (default): thread 0 writes every element of every array, in order; the other
//!   threads wait for it by spinning on a flag (reads of one line of a small `flag` mapping,
//!   as OpenMP threads spin at the end of a serial region), then all start.
//! - `parallel`: each thread writes its own block of each array (the NUMA-aware way).
//!
//! Threads do not wait for each other between iterations (no barrier is modelled).

use super::{
    check_threads, Access, AddressSpace, BuildCtx, MapOptions, PageSize, Ps, Step, Workload, WorkloadParams,
    WorkloadShared,
};
use crate::error::{Result, SimError};
use crate::stats::Stats;
use crate::units::ByteSize;
use serde::{Deserialize, Serialize};
use tierlab_core::param::params;

/// The loop kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    /// STREAM copy, scale, add, triad per iteration.
    #[default]
    Stream,
    /// 3-D 7-point Jacobi.
    Jacobi,
}

/// Who initializes the data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Init {
    /// Thread 0 writes everything; the others wait.
    #[default]
    Serial,
    /// Each thread writes its own block.
    Parallel,
}

tierlab_core::choice_param!(Kernel, Init);

/// Parameters of `omp-kernel`.
#[params]
#[derive(Clone, Debug)]
pub struct OmpKernelParams {
    /// `"stream"` or `"jacobi"`.
    #[param(default)]
    pub kernel: Kernel,
    /// `"serial"` or `"parallel"`.
    #[param(default)]
    pub init: Init,
    /// `stream`: bytes per array (8-byte elements).
    #[param(default = ByteSize(8 << 20), setting)]
    pub array_size: ByteSize,
    /// `jacobi`: grid points along x (contiguous).
    #[param(default = 64, range = "[1, 1e7]", unit = "grid points", setting)]
    pub nx: u64,
    /// `jacobi`: grid points along y.
    #[param(default = 64, range = "[1, 1e7]", unit = "grid points", setting)]
    pub ny: u64,
    /// `jacobi`: grid points along z (split among threads).
    #[param(default = 64, range = "[1, 1e7]", unit = "grid points", setting)]
    pub nz: u64,
    /// Iterations of the parallel loop after initialization.
    #[param(default = 10, range = "[0, 281474976710656]", unit = "iterations", setting)]
    pub iterations: u64,
}

const ELEM: u64 = 8;
/// Elements (stream) or accesses (jacobi) per batch.
const BATCH: u64 = 8192;
/// Flag reads per batch of a waiting thread.
const SPIN: usize = 64;

impl WorkloadParams for OmpKernelConfig {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        let f = &ctx.scenario_file;
        check_threads("omp-kernel", self.shared.threads, ctx)?;
        if self.iterations == 0 {
            return Err(SimError::config(f, "workload.iterations", "must be at least 1"));
        }
        let t = self.shared.threads as u64;
        let (arrays, n, unit) = match self.kernel {
            Kernel::Stream => {
                let n = self.array_size.0 / ELEM;
                if n < t {
                    return Err(SimError::config(
                        f,
                        "workload.array_size",
                        format!("{n} elements cannot be split among {t} threads"),
                    ));
                }
                (3, n, 1)
            }
            Kernel::Jacobi => {
                for (name, v) in [("nx", self.nx), ("ny", self.ny), ("nz", self.nz)] {
                    if v == 0 || v > 1 << 20 {
                        return Err(SimError::config(
                            f,
                            format!("workload.{name}"),
                            format!("{v} is not in 1..=1048576"),
                        ));
                    }
                }
                if self.nz < t {
                    return Err(SimError::config(
                        f,
                        "workload.nz",
                        format!("{} planes cannot be split among {t} threads", self.nz),
                    ));
                }
                let n = self.nx.checked_mul(self.ny).and_then(|v| v.checked_mul(self.nz));
                let n = n
                    .filter(|v| v.checked_mul(ELEM).is_some())
                    .ok_or_else(|| SimError::config(f, "workload.nx", "the grid's size overflows 64 bits"))?;
                (2, n, self.nx * self.ny)
            }
        };
        // Static schedule: contiguous blocks of elements (stream) or z-planes (jacobi).
        let units = n / unit;
        let st = (0..t)
            .map(|i| {
                let lo = (units as u128 * i as u128 / t as u128) as u64 * unit;
                let hi = (units as u128 * (i + 1) as u128 / t as u128) as u64 * unit;
                let phase = match (self.init, i) {
                    (Init::Serial, 0) => Phase::Init { array: 0, i: 0 },
                    (Init::Serial, _) => Phase::Wait,
                    (Init::Parallel, _) => Phase::Init { array: 0, i: lo },
                };
                ThreadState { lo, hi, phase, spins: 0, accesses: 0 }
            })
            .collect();
        Ok(Box::new(OmpKernel { p: self.clone(), arrays, n, base: [0; 3], flag: 0, init_done: false, st }))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Writing array `array` from element `i`.
    Init {
        array: usize,
        i: u64,
    },
    /// Waiting for thread 0's serial initialization.
    Wait,
    /// Iteration `iter`, sub-kernel `k` (stream: 0..4; jacobi: 0), at element `i`.
    Compute {
        iter: u64,
        k: usize,
        i: u64,
    },
    Done,
}

struct ThreadState {
    lo: u64,
    hi: u64,
    phase: Phase,
    spins: u64,
    accesses: u64,
}

/// The `omp-kernel` workload.
pub struct OmpKernel {
    p: OmpKernelConfig,
    arrays: usize,
    n: u64,
    base: [u64; 3],
    flag: u64,
    init_done: bool,
    st: Vec<ThreadState>,
}

impl OmpKernel {
    /// STREAM sub-kernel `k`: (arrays read, array written).
    fn stream_arrays(k: usize) -> (&'static [usize], usize) {
        match k {
            0 => (&[0], 2),    // copy: c = a
            1 => (&[2], 1),    // scale: b = s*c
            2 => (&[0, 1], 2), // add: c = a + b
            _ => (&[1, 2], 0), // triad: a = b + s*c
        }
    }

    /// Append the accesses of Jacobi points `[lo, hi)` (flat indices) of iteration `iter`.
    fn jacobi_points(&self, iter: u64, lo: u64, hi: u64, out: &mut Vec<Access>) {
        let (nx, ny, nz) = (self.p.nx, self.p.ny, self.p.nz);
        let plane = nx * ny;
        let (src, dst) =
            if iter & 1 == 0 { (self.base[0], self.base[1]) } else { (self.base[1], self.base[0]) };
        for c in lo..hi {
            let (x, y, z) = (c % nx, (c / nx) % ny, c / plane);
            if z > 0 {
                out.push(Access::read(src + (c - plane) * ELEM));
            }
            if y > 0 {
                out.push(Access::read(src + (c - nx) * ELEM));
            }
            if x > 0 {
                out.push(Access::read(src + (c - 1) * ELEM));
            }
            out.push(Access::read(src + c * ELEM));
            if x + 1 < nx {
                out.push(Access::read(src + (c + 1) * ELEM));
            }
            if y + 1 < ny {
                out.push(Access::read(src + (c + nx) * ELEM));
            }
            if z + 1 < nz {
                out.push(Access::read(src + (c + plane) * ELEM));
            }
            out.push(Access::write(dst + c * ELEM));
        }
    }
}

impl Workload for OmpKernel {
    fn threads(&self) -> usize {
        self.p.shared.threads
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        for (a, name) in ["a", "b", "c"].iter().enumerate().take(self.arrays) {
            let opts = MapOptions {
                name: (*name).into(),
                page_size: self.p.shared.page_size,
                populate: self.p.shared.populate,
                thread: 0,
            };
            self.base[a] = mem.mmap(self.n * ELEM, opts)?;
        }
        if self.p.init == Init::Serial && self.p.shared.threads > 1 {
            let opts = MapOptions {
                name: "flag".into(),
                page_size: Some(PageSize::Base4K),
                populate: false,
                thread: 0,
            };
            self.flag = mem.mmap(tierlab_core::PAGE_SIZE, opts)?;
        }
        Ok(())
    }

    fn next_batch(
        &mut self,
        t: usize,
        _now: Ps,
        out: &mut Vec<Access>,
        _mem: &mut dyn AddressSpace,
    ) -> Result<Step> {
        let start = out.len();
        let serial = self.p.init == Init::Serial;
        let s = &self.st[t];
        let (lo, hi) = (s.lo, s.hi);
        let (init_lo, init_hi) = if serial { (0, self.n) } else { (lo, hi) };
        let phase = s.phase;
        let next = match phase {
            Phase::Init { array, i } => {
                let end = init_hi.min(i + BATCH);
                let b = self.base[array];
                out.extend((i..end).map(|k| Access::write(b + k * ELEM)));
                if end < init_hi {
                    Phase::Init { array, i: end }
                } else if array + 1 < self.arrays {
                    Phase::Init { array: array + 1, i: init_lo }
                } else {
                    // Thread 0 marks the serial region done when it comes back for more work,
                    // i.e. once its last initializing store has executed.
                    Phase::Compute { iter: 0, k: 0, i: lo }
                }
            }
            Phase::Wait => {
                if self.init_done {
                    Phase::Compute { iter: 0, k: 0, i: lo }
                } else {
                    out.extend(std::iter::repeat_n(Access::read(self.flag), SPIN));
                    self.st[t].spins += SPIN as u64;
                    Phase::Wait
                }
            }
            Phase::Compute { iter, k, i } => {
                if t == 0 && serial {
                    self.init_done = true;
                }
                match self.p.kernel {
                    Kernel::Stream => {
                        let end = hi.min(i + BATCH);
                        let (reads, w) = Self::stream_arrays(k);
                        let b = self.base;
                        out.reserve(((reads.len() + 1) as u64 * (end - i)) as usize);
                        for e in i..end {
                            let o = e * ELEM;
                            for &r in reads {
                                out.push(Access::read(b[r] + o));
                            }
                            out.push(Access::write(b[w] + o));
                        }
                        if end < hi {
                            Phase::Compute { iter, k, i: end }
                        } else if k < 3 {
                            Phase::Compute { iter, k: k + 1, i: lo }
                        } else if iter + 1 < self.p.iterations {
                            Phase::Compute { iter: iter + 1, k: 0, i: lo }
                        } else {
                            Phase::Done
                        }
                    }
                    Kernel::Jacobi => {
                        let end = hi.min(i + BATCH / 8);
                        self.jacobi_points(iter, i, end, out);
                        if end < hi {
                            Phase::Compute { iter, k, i: end }
                        } else if iter + 1 < self.p.iterations {
                            Phase::Compute { iter: iter + 1, k, i: lo }
                        } else {
                            Phase::Done
                        }
                    }
                }
            }
            Phase::Done => Phase::Done,
        };
        let s = &mut self.st[t];
        s.phase = next;
        s.accesses += (out.len() - start) as u64;
        Ok(if next == Phase::Done { Step::Done } else { Step::Continue })
    }

    fn discard(&mut self, t: usize, unexecuted: &[Access]) {
        self.st[t].accesses -= unexecuted.len() as u64;
    }

    fn report_stats(&self, out: &mut Stats) {
        out.set(
            "workload.kernel",
            match self.p.kernel {
                Kernel::Stream => "stream",
                Kernel::Jacobi => "jacobi",
            },
        );
        out.set(
            "workload.init",
            match self.p.init {
                Init::Serial => "serial",
                Init::Parallel => "parallel",
            },
        );
        out.set("workload.accesses", self.st.iter().map(|s| s.accesses).sum::<u64>());
        out.set("workload.spin_reads", self.st.iter().map(|s| s.spins).sum::<u64>());
        out.set("workload.threads_done", self.st.iter().filter(|s| s.phase == Phase::Done).count());
    }
}

/// `OmpKernelParams` with the workload parameters every kind shares ([`WorkloadShared`]).
pub type OmpKernelConfig = crate::params::With<WorkloadShared, OmpKernelParams>;

impl crate::params::SharedDefaults<WorkloadShared> for OmpKernelParams {
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
            seed: 1,
            scenario_file: "s.toml".into(),
            cores: 4,
            duration: Ps::ZERO,
            ..Default::default()
        }
    }

    #[test]
    fn serial_init_writes_everything_from_thread_0_first() {
        let p: OmpKernelConfig = toml::from_str("array_size = 65536\niterations = 1\nthreads = 2").unwrap();
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let mut per: Vec<Vec<Access>> = vec![Vec::new(); 2];
        drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |t, _, a| per[t].push(*a));
        let n = 65536 / 8;
        // Thread 0: 3n init stores, then its half: copy 2, scale 2, add 3, triad 3 per element.
        assert!(per[0][..3 * n].iter().all(|a| a.is_write()));
        assert_eq!(per[0].len(), 3 * n + 10 * n / 2);
        let flag = mem.find("flag").start;
        let spins = per[1].iter().take_while(|a| a.addr == flag).count();
        assert!(spins > 0 && spins % SPIN == 0);
        assert_eq!(per[1].len() - spins, 10 * n / 2);
    }

    #[test]
    fn parallel_init_writes_own_block() {
        let p: OmpKernelConfig = toml::from_str(
            "kernel = \"jacobi\"\nnx = 8\nny = 8\nnz = 8\ninit = \"parallel\"\niterations = 2\nthreads = 2",
        )
        .unwrap();
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        assert!(mem.maps.iter().all(|m| m.opts.name != "flag"));
        let a = mem.find("a").start;
        let mut first: Vec<Vec<Access>> = vec![Vec::new(); 2];
        drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |t, _, acc| first[t].push(*acc));
        // Thread 1 initializes planes 4..8 of a, then of b.
        assert_eq!(first[1][0], Access::write(a + 256 * 8));
        assert!(first[1][..512].iter().all(|x| x.is_write()));
    }

    #[test]
    fn errors_name_the_field() {
        let c = ctx();
        let bad =
            |t: &str| toml::from_str::<OmpKernelConfig>(t).unwrap().build(&c).err().unwrap().to_string();
        assert!(bad("iterations = 0").contains("workload.iterations"));
        assert!(bad("kernel = \"jacobi\"\nnz = 2\nthreads = 4").contains("workload.nz"));
        assert!(bad("array_size = 16\nthreads = 4").contains("workload.array_size"));
        assert!(toml::from_str::<OmpKernelConfig>("kernel = \"mg\"").is_err());
    }
}
