//! `stencil`: a 3-D 7-point Jacobi sweep over an `nx * ny * nz` grid of f64.
//!
//! Two arrays `a` and `b` (x fastest, then y, then z): iteration 0 reads `a` and writes `b`,
//! iteration 1 reads `b` and writes `a`, and so on. Per grid point the sweep loads the points
//! at z-1, y-1, x-1, the point itself, x+1, y+1, z+1 of the source (neighbours outside the
//! grid are skipped) and stores the point of the destination. The grid is partitioned among
//! the threads by `decomposition`: `slab` (1-D, along z), `pencil` (2-D, y and z) or `block`
//! (3-D), each thread sweeping its box in x-fastest order. Threads do not wait for each other
//! between iterations (no barrier is modelled).

use super::{
    check_threads, Access, AddressSpace, BuildCtx, MapOptions, Ps, Step, Workload, WorkloadParams,
    WorkloadShared,
};
use crate::error::{Result, SimError};
use crate::stats::Stats;
use serde::{Deserialize, Serialize};
use tierlab_core::param::params;

/// How the grid is split among threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decomposition {
    /// Contiguous ranges of z-planes.
    #[default]
    Slab,
    /// A 2-D grid of boxes over y and z (full x rows).
    Pencil,
    /// A 3-D grid of boxes.
    Block,
}

tierlab_core::choice_param!(Decomposition);

/// Parameters of the `stencil` workload.
#[params]
#[derive(Clone, Debug)]
pub struct StencilParams {
    /// Grid points along x (the contiguous dimension).
    #[param(default = 256, range = "[1, 1e7]", unit = "grid points", setting)]
    pub nx: u64,
    /// Grid points along y.
    #[param(default = 256, range = "[1, 1e7]", unit = "grid points", setting)]
    pub ny: u64,
    /// Grid points along z (256^3 f64 = 128 MiB per array).
    #[param(default = 256, range = "[1, 1e7]", unit = "grid points", setting)]
    pub nz: u64,
    /// `"slab"`, `"pencil"` or `"block"`.
    #[param(default)]
    pub decomposition: Decomposition,
    /// Sweeps per thread before it is done; 0 = until the scenario's duration.
    #[param(default, range = "[0, 281474976710656]", unit = "iterations", setting)]
    pub iterations: u64,
}

/// Target accesses per batch.
const BATCH: usize = 16_384;
const ELEM: u64 = 8;

/// The boxes per dimension `(px, py, pz)` for `threads` threads.
pub fn grid_of_threads(d: Decomposition, threads: u64) -> (u64, u64, u64) {
    let divisors = |n: u64| (1..=n).filter(move |d| n / d * d == n);
    match d {
        Decomposition::Slab => (1, 1, threads),
        Decomposition::Pencil => {
            let py = divisors(threads).filter(|&d| d * d <= threads).max().unwrap_or(1);
            (1, py, threads / py)
        }
        Decomposition::Block => {
            let mut best = (1, 1, threads);
            for px in divisors(threads) {
                for py in divisors(threads / px) {
                    let pz = threads / px / py;
                    if px <= py && py <= pz && px + py + pz < best.0 + best.1 + best.2 {
                        best = (px, py, pz);
                    }
                }
            }
            best
        }
    }
}

fn split(n: u64, parts: u64, i: u64) -> (u64, u64) {
    ((n as u128 * i as u128 / parts as u128) as u64, (n as u128 * (i + 1) as u128 / parts as u128) as u64)
}

/// A thread's box: half-open ranges per dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Box3 {
    /// x range.
    pub x: (u64, u64),
    /// y range.
    pub y: (u64, u64),
    /// z range.
    pub z: (u64, u64),
}

impl Box3 {
    fn points(&self) -> u64 {
        (self.x.1 - self.x.0) * (self.y.1 - self.y.0) * (self.z.1 - self.z.0)
    }
}

impl StencilConfig {
    /// The box of each thread.
    pub fn boxes(&self) -> Vec<Box3> {
        let (px, py, pz) = grid_of_threads(self.decomposition, self.shared.threads as u64);
        (0..self.shared.threads as u64)
            .map(|t| {
                let (ix, iy, iz) = (t % px, (t / px) % py, t / (px * py));
                Box3 { x: split(self.nx, px, ix), y: split(self.ny, py, iy), z: split(self.nz, pz, iz) }
            })
            .collect()
    }
}

impl WorkloadParams for StencilConfig {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        let f = &ctx.scenario_file;
        check_threads("stencil", self.shared.threads, ctx)?;
        for (name, v) in [("nx", self.nx), ("ny", self.ny), ("nz", self.nz)] {
            if v == 0 {
                return Err(SimError::config(f, format!("workload.{name}"), "must be at least 1"));
            }
        }
        let points = self
            .nx
            .checked_mul(self.ny)
            .and_then(|v| v.checked_mul(self.nz))
            .and_then(|v| v.checked_mul(ELEM));
        if points.is_none() {
            return Err(SimError::config(f, "workload.nx", "the grid's size overflows 64 bits"));
        }
        let (px, py, pz) = grid_of_threads(self.decomposition, self.shared.threads as u64);
        for (dim, n, p) in [("x", self.nx, px), ("y", self.ny, py), ("z", self.nz, pz)] {
            if p > n {
                return Err(SimError::config(
                    f,
                    "workload.decomposition",
                    format!(
                        "{:?} decomposition splits {dim} into {p} parts but the grid has {n} points along {dim}: use fewer threads or another decomposition",
                        self.decomposition
                    ),
                ));
            }
        }
        if self.iterations == 0 && ctx.duration == Ps::ZERO {
            return Err(SimError::config(
                f,
                "workload.iterations",
                "iterations = 0 runs until the scenario's duration, but the scenario sets none",
            ));
        }
        let st = self
            .boxes()
            .into_iter()
            .map(|b| ThreadState { b, x: b.x.0, y: b.y.0, z: b.z.0, iter: 0, points: 0 })
            .collect();
        Ok(Box::new(Stencil { p: self.clone(), base: [0; 2], st }))
    }
}

struct ThreadState {
    b: Box3,
    x: u64,
    y: u64,
    z: u64,
    iter: u64,
    /// Points updated (write accesses executed).
    points: u64,
}

/// The `stencil` workload.
pub struct Stencil {
    p: StencilConfig,
    base: [u64; 2],
    st: Vec<ThreadState>,
}

impl Workload for Stencil {
    fn threads(&self) -> usize {
        self.p.shared.threads
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        let bytes = self.p.nx * self.p.ny * self.p.nz * ELEM;
        for (i, name) in ["a", "b"].iter().enumerate() {
            let opts = MapOptions {
                name: (*name).into(),
                page_size: self.p.shared.page_size,
                populate: self.p.shared.populate,
                thread: 0,
            };
            self.base[i] = mem.mmap(bytes, opts)?;
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
        let (nx, ny, nz) = (self.p.nx, self.p.ny, self.p.nz);
        let plane = nx * ny;
        let s = &mut self.st[t];
        let start = out.len();
        out.reserve(BATCH + 8 * nx.min(BATCH as u64) as usize);
        while out.len() - start < BATCH {
            let (src, dst) =
                if s.iter & 1 == 0 { (self.base[0], self.base[1]) } else { (self.base[1], self.base[0]) };
            let (y, z) = (s.y, s.z);
            let (zm, zp, ym, yp) = (z > 0, z + 1 < nz, y > 0, y + 1 < ny);
            let budget = ((BATCH - (out.len() - start)) / 8).max(1) as u64;
            let xs = s.x;
            let xe = s.b.x.1.min(xs + budget);
            let row = (z * ny + y) * nx;
            for x in xs..xe {
                let c = row + x;
                if zm {
                    out.push(Access::read(src + (c - plane) * ELEM));
                }
                if ym {
                    out.push(Access::read(src + (c - nx) * ELEM));
                }
                if x > 0 {
                    out.push(Access::read(src + (c - 1) * ELEM));
                }
                out.push(Access::read(src + c * ELEM));
                if x + 1 < nx {
                    out.push(Access::read(src + (c + 1) * ELEM));
                }
                if yp {
                    out.push(Access::read(src + (c + nx) * ELEM));
                }
                if zp {
                    out.push(Access::read(src + (c + plane) * ELEM));
                }
                out.push(Access::write(dst + c * ELEM));
            }
            s.points += xe - xs;
            s.x = xe;
            if s.x == s.b.x.1 {
                s.x = s.b.x.0;
                s.y += 1;
                if s.y == s.b.y.1 {
                    s.y = s.b.y.0;
                    s.z += 1;
                    if s.z == s.b.z.1 {
                        s.z = s.b.z.0;
                        s.iter += 1;
                        if self.p.iterations > 0 && s.iter >= self.p.iterations {
                            return Ok(Step::Done);
                        }
                    }
                }
            }
        }
        Ok(Step::Continue)
    }

    fn discard(&mut self, t: usize, unexecuted: &[Access]) {
        let unwritten = unexecuted.iter().filter(|a| a.is_write()).count() as u64;
        self.st[t].points -= unwritten;
    }

    fn report_stats(&self, out: &mut Stats) {
        let points: u64 = self.st.iter().map(|s| s.points).sum();
        let total: u64 = self.st.iter().map(|s| s.b.points()).sum();
        out.set("workload.points_updated", points);
        out.set("workload.sweeps", points as f64 / total as f64);
    }
}

/// `StencilParams` with the workload parameters every kind shares ([`WorkloadShared`]).
pub type StencilConfig = crate::params::With<WorkloadShared, StencilParams>;

impl crate::params::SharedDefaults<WorkloadShared> for StencilParams {
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
            cores: 64,
            duration: Ps::ZERO,
            ..Default::default()
        }
    }

    #[test]
    fn thread_grids() {
        assert_eq!(grid_of_threads(Decomposition::Slab, 6), (1, 1, 6));
        assert_eq!(grid_of_threads(Decomposition::Pencil, 6), (1, 2, 3));
        assert_eq!(grid_of_threads(Decomposition::Pencil, 16), (1, 4, 4));
        assert_eq!(grid_of_threads(Decomposition::Block, 8), (2, 2, 2));
        assert_eq!(grid_of_threads(Decomposition::Block, 12), (2, 2, 3));
        assert_eq!(grid_of_threads(Decomposition::Block, 7), (1, 1, 7));
        assert_eq!(grid_of_threads(Decomposition::Block, 1), (1, 1, 1));
    }

    #[test]
    fn every_point_written_once_per_iteration() {
        let (nx, ny, nz) = (7u64, 5u64, 6u64);
        let n = (nx * ny * nz) as usize;
        for (dec, threads) in [("slab", 4), ("pencil", 6), ("block", 8), ("block", 1), ("pencil", 5)] {
            let p: StencilConfig = toml::from_str(&format!(
                "nx = {nx}\nny = {ny}\nnz = {nz}\ndecomposition = \"{dec}\"\nthreads = {threads}\niterations = 2"
            ))
            .unwrap();
            // The partition covers the grid exactly once.
            let mut cover = vec![0u32; n];
            for b in p.boxes() {
                for z in b.z.0..b.z.1 {
                    for y in b.y.0..b.y.1 {
                        for x in b.x.0..b.x.1 {
                            cover[((z * ny + y) * nx + x) as usize] += 1;
                        }
                    }
                }
            }
            assert!(cover.iter().all(|&c| c == 1), "{dec}");
            let mut w = p.build(&ctx()).unwrap();
            let mut mem = MockSpace::new();
            w.setup(&mut mem).unwrap();
            let (a, b) = (mem.find("a").start, mem.find("b").start);
            let mut writes = [vec![0u32; n], vec![0u32; n]];
            let mut reads = [vec![0u32; n], vec![0u32; n]];
            drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, acc| {
                let (arr, off) = if acc.addr >= b { (1, acc.addr - b) } else { (0, acc.addr - a) };
                assert!(off < n as u64 * 8);
                if acc.is_write() {
                    writes[arr][(off / 8) as usize] += 1;
                } else {
                    reads[arr][(off / 8) as usize] += 1;
                }
            });
            assert!(writes[0].iter().chain(&writes[1]).all(|&c| c == 1), "{dec}");
            for z in 0..nz {
                for y in 0..ny {
                    for x in 0..nx {
                        let nb = 1
                            + (x > 0) as u32
                            + (x + 1 < nx) as u32
                            + (y > 0) as u32
                            + (y + 1 < ny) as u32
                            + (z > 0) as u32
                            + (z + 1 < nz) as u32;
                        let i = ((z * ny + y) * nx + x) as usize;
                        assert_eq!((reads[0][i], reads[1][i]), (nb, nb), "{dec} ({x},{y},{z})");
                    }
                }
            }
            let mut stats = Stats::new();
            w.report_stats(&mut stats);
            assert_eq!(stats.get_u64("workload.points_updated"), 2 * n as u64);
        }
    }

    #[test]
    fn errors() {
        let c = ctx();
        let bad = |t: &str| toml::from_str::<StencilConfig>(t).unwrap().build(&c).err().unwrap().to_string();
        assert!(bad("nz = 2\nthreads = 3\niterations = 1").contains("workload.decomposition"));
        assert!(bad("nx = 0\niterations = 1").contains("workload.nx"));
        assert!(bad("nx = 4").contains("workload.iterations"));
        assert!(toml::from_str::<StencilConfig>("decomposition = \"cube\"").is_err());
    }
}
