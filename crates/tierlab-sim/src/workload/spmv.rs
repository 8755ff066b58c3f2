//! `spmv`: sparse matrix-vector product in CSR form, optionally inside a conjugate-gradient
//! loop (the memory behaviour of HPCG / MiniFE).
//!
//! The matrix is the operator of an `nx * ny * nz` grid: row `r = (z * ny + y) * nx + x` has a
//! nonzero for each grid neighbour within the `points`-point stencil (7 = faces, 27 = MiniFE's
//! hexahedral finite elements), in ascending column order. Its structure is computed on the
//! fly (no stored column indices); only the access pattern of a real CSR code is emitted:
//! per row, load `row_ptr[r]` and `row_ptr[r + 1]`, then per nonzero `p` load `col_idx[p]`
//! (4 B), `values[p]` (8 B) and the input vector at the column (8 B), and finally store the
//! output vector at `r`. Rows are split among the threads in contiguous blocks.
//!
//! With `matrix = "random"` the matrix is instead NPB CG's kind (its `makea`): `rows` rows
//! of `row_nnz` nonzeros each, the diagonal plus `row_nnz - 1` columns drawn uniformly from
//! the scenario's seed (a stable hash of seed, row and position, so every iteration sees the
//! same matrix), ascending within the row (duplicates are kept; NPB's matrix is symmetric,
//! ours only has its access pattern). The gathers of the input vector then land on random
//! pages, so the TLB misses most of them, as NPB CG's do on the CMCP paper's machine (its
//! Table 1: ~2 G dTLB misses per core on cg.B), while the matrix stays private to each
//! thread's rows and the input vector is read by every thread.
//!
//! With `cg = true` (default) an iteration is one iteration of conjugate gradient over the
//! thread's rows: `Ap = A p`, then `dot(p, Ap)`, `x += alpha p`, `r -= alpha Ap`,
//! `dot(r, r)`, `p = r + beta p` (2 dot products, 3 axpys). The vectors are mapped as `p`,
//! `Ap`, `r` and `x`. With `cg = false` an iteration is one `y = A x` (vectors `x` and `y`).
//!
//! With `dof = 3` (grid matrix only) every grid point carries 3 unknowns (displacements in
//! x, y, z: 3-D linear elasticity, GeoFEM's problem, Nakajima's GeoFEM/ppOpen-HPC solvers)
//! and the matrix is stored in block CSR with 3 x 3 blocks, the usual storage of such
//! solvers: per block row `r`, load `row_ptr[r]` and `row_ptr[r + 1]`, then per block `p`
//! load `col_idx[p]`, the 3 entries of the input vector at the block column, and the block's
//! 9 values (`values[9 p .. 9 p + 9]`), and finally store the 3 entries of the output. The
//! vectors have `3 n` entries and the CG's vector operations run over all of them.

use super::{
    check_threads, Access, AddressSpace, BuildCtx, MapOptions, Ps, Step, Workload, WorkloadParams,
    WorkloadShared,
};
use crate::error::{Result, SimError};
use crate::rng::{derive, splitmix64};
use crate::stats::Stats;
use serde::{Deserialize, Serialize};
use tierlab_core::param::params;

/// Parameters of the `spmv` workload.
#[params]
#[derive(Clone, Debug)]
pub struct SpmvParams {
    /// Grid points along x.
    #[param(default = 128, range = "[1, 1e7]", unit = "grid points", setting)]
    pub nx: u64,
    /// Grid points along y.
    #[param(default = 128, range = "[1, 1e7]", unit = "grid points", setting)]
    pub ny: u64,
    /// Grid points along z (128^3 = 2 Mi rows: with 27 points, 53 Mi nonzeros and ~0.7 GiB
    /// of matrix).
    #[param(default = 128, range = "[1, 1e7]", unit = "grid points", setting)]
    pub nz: u64,
    /// Stencil of the matrix: 7 (faces) or 27 (MiniFE's hexahedral finite elements, the
    /// operator of HPCG and MiniFE).
    #[param(default = 27, range = "[1, 1e4]", unit = "stencil points", setting)]
    pub points: u32,
    /// Run the SpMV inside conjugate gradient (adds 2 dot products and 3 axpys per
    /// iteration).
    #[param(default = true, setting)]
    pub cg: bool,
    /// Iterations per thread before it is done; 0 = until the scenario's duration.
    #[param(default, range = "[0, 281474976710656]", unit = "iterations", setting)]
    pub iterations: u64,
    /// `"grid"`: the operator of the `nx * ny * nz` grid; `"random"`: NPB CG's random
    /// sparsity, `rows` x `row_nnz`.
    #[param(default)]
    pub matrix: MatrixKind,
    /// Rows of the random matrix (`matrix = "random"` only); absent: 75,000 (NPB CG class B).
    #[param(default, range = "[0, 281474976710656]", unit = "rows", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// Nonzeros per row of the random matrix, the diagonal included (`matrix = "random"`
    /// only); absent: 27.
    #[param(default, range = "[0, 281474976710656]", unit = "nonzeros", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub row_nnz: Option<u64>,
    /// Degrees of freedom per grid point: 1 (a scalar operator) or 3 (a 3-D elasticity
    /// operator like GeoFEM's: block CSR with 3 x 3 blocks; grid matrix only).
    #[param(default = 1, range = "[0, 281474976710656]", unit = "unknowns per point", setting)]
    #[serde(skip_serializing_if = "is_one")]
    pub dof: u32,
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

/// Sparsity structure of the `spmv` matrix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatrixKind {
    /// The grid operator (HPCG, MiniFE).
    #[default]
    Grid,
    /// Random column positions (NPB CG).
    Random,
}

tierlab_core::choice_param!(MatrixKind);

/// Rows of NPB CG class B (`NA`).
const NPB_CG_B_ROWS: u64 = 75_000;

/// Target accesses per batch.
const BATCH: usize = 16_384;

/// Valid neighbour offsets of index `i` along a dimension of `n` points: `1 + [i > 0] +
/// [i < n - 1]`.
#[inline]
fn c(i: u64, n: u64) -> u64 {
    1 + (i > 0) as u64 + (i + 1 < n) as u64
}

/// `sum_{i < k} c(i, n)`.
#[inline]
fn s(k: u64, n: u64) -> u64 {
    k + k.saturating_sub(1) + k.min(n - 1)
}

/// The grid operator's sparsity structure.
#[derive(Clone, Copy, Debug)]
pub struct GridMatrix {
    /// Grid points along x.
    pub nx: u64,
    /// Grid points along y.
    pub ny: u64,
    /// Grid points along z.
    pub nz: u64,
    /// 7 or 27.
    pub points: u32,
}

impl GridMatrix {
    /// Number of rows.
    pub fn rows(&self) -> u64 {
        self.nx * self.ny * self.nz
    }

    /// Nonzeros of the row at grid point (x, y, z).
    pub fn row_nnz(&self, x: u64, y: u64, z: u64) -> u64 {
        let (cx, cy, cz) = (c(x, self.nx), c(y, self.ny), c(z, self.nz));
        if self.points == 27 {
            cx * cy * cz
        } else {
            cx + cy + cz - 2
        }
    }

    /// `row_ptr[r]`: nonzeros in the rows before `r`, in closed form (O(1)).
    pub fn row_ptr(&self, r: u64) -> u64 {
        let (nx, ny, nz) = (self.nx, self.ny, self.nz);
        let (x, y, z) = (r % nx, (r / nx) % ny, r / (nx * ny));
        if r >= self.rows() {
            return self.row_ptr(self.rows() - 1) + self.row_nnz(nx - 1, ny - 1, nz - 1);
        }
        let (sx, sy) = (s(nx, nx), s(ny, ny));
        if self.points == 27 {
            s(z, nz) * sy * sx + c(z, nz) * s(y, ny) * sx + c(z, nz) * c(y, ny) * s(x, nx)
        } else {
            let planes = z * ny * sx + z * nx * sy + nx * ny * s(z, nz) - 2 * z * nx * ny;
            let rows = y * sx + nx * s(y, ny) + y * nx * c(z, nz) - 2 * y * nx;
            let pts = s(x, nx) + x * c(y, ny) + x * c(z, nz) - 2 * x;
            planes + rows + pts
        }
    }

    /// Total nonzeros.
    pub fn nnz(&self) -> u64 {
        self.row_ptr(self.rows())
    }

    /// Column offsets (relative to the row) of the row at (x, y, z), ascending; returns the
    /// count written into `buf`.
    #[inline]
    fn col_offsets(&self, x: u64, y: u64, z: u64, buf: &mut [i64; 27]) -> usize {
        let nx = self.nx as i64;
        let plane = (self.nx * self.ny) as i64;
        let (xm, xp) = (x > 0, x + 1 < self.nx);
        let (ym, yp) = (y > 0, y + 1 < self.ny);
        let (zm, zp) = (z > 0, z + 1 < self.nz);
        let mut n = 0;
        if self.points == 27 {
            for (dz, okz) in [(-plane, zm), (0, true), (plane, zp)] {
                if !okz {
                    continue;
                }
                for (dy, oky) in [(-nx, ym), (0, true), (nx, yp)] {
                    if !oky {
                        continue;
                    }
                    for (dx, okx) in [(-1, xm), (0, true), (1, xp)] {
                        if okx {
                            buf[n] = dz + dy + dx;
                            n += 1;
                        }
                    }
                }
            }
        } else {
            for (d, ok) in [(-plane, zm), (-nx, ym), (-1, xm), (0, true), (1, xp), (nx, yp), (plane, zp)] {
                if ok {
                    buf[n] = d;
                    n += 1;
                }
            }
        }
        n
    }
}

/// NPB CG-like random sparsity: `rows` rows of `row_nnz` nonzeros.
#[derive(Clone, Copy, Debug)]
pub struct RandomMatrix {
    /// Number of rows (and columns).
    pub rows: u64,
    /// Nonzeros per row, the diagonal included.
    pub row_nnz: u64,
    /// Hash key derived from the scenario's seed.
    pub key: u64,
}

impl RandomMatrix {
    /// The columns of row `r`, ascending, into `buf` (cleared first).
    pub fn columns(&self, r: u64, buf: &mut Vec<u64>) {
        buf.clear();
        buf.push(r);
        let mut h = self.key ^ r.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for _ in 1..self.row_nnz {
            let v = splitmix64(&mut h);
            buf.push(((v as u128 * self.rows as u128) >> 64) as u64);
        }
        buf.sort_unstable();
    }
}

/// The matrix of an `spmv` workload.
#[derive(Clone, Copy, Debug)]
pub enum Matrix {
    /// The grid operator.
    Grid(GridMatrix),
    /// Random sparsity.
    Random(RandomMatrix),
}

impl Matrix {
    /// Number of rows.
    pub fn rows(&self) -> u64 {
        match self {
            Matrix::Grid(m) => m.rows(),
            Matrix::Random(m) => m.rows,
        }
    }
    /// `row_ptr[r]`.
    pub fn row_ptr(&self, r: u64) -> u64 {
        match self {
            Matrix::Grid(m) => m.row_ptr(r),
            Matrix::Random(m) => r.min(m.rows) * m.row_nnz,
        }
    }
    /// Total nonzeros.
    pub fn nnz(&self) -> u64 {
        self.row_ptr(self.rows())
    }
}

impl WorkloadParams for SpmvConfig {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        let f = &ctx.scenario_file;
        check_threads("spmv", self.shared.threads, ctx)?;
        for (name, v) in [("nx", self.nx), ("ny", self.ny), ("nz", self.nz)] {
            if v == 0 {
                return Err(SimError::config(f, format!("workload.{name}"), "must be at least 1"));
            }
        }
        if self.dof != 1 && self.dof != 3 {
            return Err(SimError::config(f, "workload.dof", format!("must be 1 or 3, got {}", self.dof)));
        }
        if self.dof == 3 && self.matrix != MatrixKind::Grid {
            return Err(SimError::config(f, "workload.dof", "dof = 3 applies to matrix = \"grid\" only"));
        }
        if self.points != 7 && self.points != 27 {
            return Err(SimError::config(
                f,
                "workload.points",
                format!("must be 7 or 27, got {}", self.points),
            ));
        }
        let m = match self.matrix {
            MatrixKind::Grid => {
                for (name, set) in [("rows", self.rows.is_some()), ("row_nnz", self.row_nnz.is_some())] {
                    if set {
                        return Err(SimError::config(
                            f,
                            format!("workload.{name}"),
                            "applies to matrix = \"random\" only (the grid's size is nx * ny * nz)",
                        ));
                    }
                }
                let rows = self.nx.checked_mul(self.ny).and_then(|v| v.checked_mul(self.nz));
                match rows {
                    Some(r) if r.checked_mul(27 * 12 * 9).is_some() => {}
                    _ => {
                        return Err(SimError::config(f, "workload.nx", "the matrix's size overflows 64 bits"))
                    }
                }
                Matrix::Grid(GridMatrix { nx: self.nx, ny: self.ny, nz: self.nz, points: self.points })
            }
            MatrixKind::Random => {
                let rows = self.rows.unwrap_or(NPB_CG_B_ROWS);
                let row_nnz = self.row_nnz.unwrap_or(27);
                if rows == 0 {
                    return Err(SimError::config(f, "workload.rows", "must be at least 1"));
                }
                if row_nnz == 0 || row_nnz > rows {
                    return Err(SimError::config(
                        f,
                        "workload.row_nnz",
                        format!("must be between 1 and rows ({rows}), got {row_nnz}"),
                    ));
                }
                if rows.checked_mul(row_nnz).and_then(|v| v.checked_mul(12)).is_none() {
                    return Err(SimError::config(f, "workload.rows", "the matrix's size overflows 64 bits"));
                }
                Matrix::Random(RandomMatrix {
                    rows,
                    row_nnz,
                    key: derive(ctx.seed, "workload.spmv.matrix", 0),
                })
            }
        };
        let n = m.rows();
        if n < self.shared.threads as u64 {
            return Err(SimError::config(
                f,
                "workload.threads",
                format!("{n} rows cannot be split among {} threads", self.shared.threads),
            ));
        }
        if self.iterations == 0 && ctx.duration == Ps::ZERO {
            return Err(SimError::config(
                f,
                "workload.iterations",
                "iterations = 0 runs until the scenario's duration, but the scenario sets none",
            ));
        }
        let t = self.shared.threads as u64;
        let st = (0..t)
            .map(|i| {
                let lo = (n as u128 * i as u128 / t as u128) as u64;
                let hi = (n as u128 * (i + 1) as u128 / t as u128) as u64;
                let p0 = m.row_ptr(lo);
                ThreadState { lo, hi, p0, r: lo, p: p0, stage: 0, iter: 0, issued: 0 }
            })
            .collect();
        let arr = Arrays { dof: self.dof as u64, ..Arrays::default() };
        Ok(Box::new(Spmv { p: self.clone(), m, arr, st, discarded: 0, cols: Vec::new() }))
    }
}

#[derive(Default, Clone, Copy)]
struct Arrays {
    row_ptr: u64,
    col_idx: u64,
    values: u64,
    /// SpMV input (`x`, or `p` in CG).
    input: u64,
    /// SpMV output (`y`, or `Ap` in CG).
    output: u64,
    /// CG's residual `r`.
    r: u64,
    /// CG's solution `x`.
    x: u64,
    /// Unknowns per grid point (1, or 3 with 3 x 3 blocks).
    dof: u64,
}

impl Arrays {
    /// One row `r` of `y = A x`: `row_ptr[r]`, `row_ptr[r + 1]`, then per nonzero (`*p`
    /// counting them) `col_idx[p]`, `values[p]` and `x[col]`, and finally the store to `y[r]`.
    #[inline(always)]
    fn push_row(&self, out: &mut Vec<Access>, r: u64, p: &mut u64, cols: impl Iterator<Item = u64>) {
        out.push(Access::read(self.row_ptr + r * 8));
        out.push(Access::read(self.row_ptr + (r + 1) * 8));
        for col in cols {
            out.push(Access::read(self.col_idx + *p * 4));
            out.push(Access::read(self.values + *p * 8));
            out.push(Access::read(self.input + col * 8));
            *p += 1;
        }
        out.push(Access::write(self.output + r * 8));
    }

    /// One block row `r` of a 3 x 3 block CSR `y = A x`: `row_ptr[r]`, `row_ptr[r + 1]`, then
    /// per block `col_idx[p]`, `x[3 col .. 3 col + 3]` and `values[9 p .. 9 p + 9]`, and
    /// finally the stores to `y[3 r .. 3 r + 3]`.
    #[inline(always)]
    fn push_block_row(&self, out: &mut Vec<Access>, r: u64, p: &mut u64, cols: impl Iterator<Item = u64>) {
        out.push(Access::read(self.row_ptr + r * 8));
        out.push(Access::read(self.row_ptr + (r + 1) * 8));
        for col in cols {
            out.push(Access::read(self.col_idx + *p * 4));
            out.extend((0..3).map(|k| Access::read(self.input + (col * 3 + k) * 8)));
            out.extend((0..9).map(|k| Access::read(self.values + (*p * 9 + k) * 8)));
            *p += 1;
        }
        out.extend((0..3).map(|k| Access::write(self.output + (r * 3 + k) * 8)));
    }
}

struct ThreadState {
    lo: u64,
    hi: u64,
    /// `row_ptr[lo]`.
    p0: u64,
    r: u64,
    p: u64,
    /// 0 = SpMV; with CG: 1 = dot(p, Ap), 2 = x += alpha p, 3 = r -= alpha Ap, 4 = dot(r, r),
    /// 5 = p = r + beta p.
    stage: u8,
    iter: u64,
    issued: u64,
}

/// The `spmv` workload.
pub struct Spmv {
    p: SpmvConfig,
    m: Matrix,
    arr: Arrays,
    st: Vec<ThreadState>,
    discarded: u64,
    /// Scratch: a random row's columns.
    cols: Vec<u64>,
}

impl Workload for Spmv {
    fn threads(&self) -> usize {
        self.p.shared.threads
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        let n = self.m.rows();
        let nnz = self.m.nnz();
        let (ps, pop) = (self.p.shared.page_size, self.p.shared.populate);
        let mut map = |name: &str, len: u64| -> Result<u64> {
            mem.mmap(len, MapOptions { name: name.into(), page_size: ps, populate: pop, thread: 0 })
        };
        self.arr.row_ptr = map("row_ptr", (n + 1) * 8)?;
        self.arr.col_idx = map("col_idx", nnz * 4)?;
        let d = self.arr.dof;
        self.arr.values = map("values", nnz * 8 * d * d)?;
        if self.p.cg {
            self.arr.input = map("p", n * 8 * d)?;
            self.arr.output = map("Ap", n * 8 * d)?;
            self.arr.r = map("r", n * 8 * d)?;
            self.arr.x = map("x", n * 8 * d)?;
        } else {
            self.arr.input = map("x", n * 8 * d)?;
            self.arr.output = map("y", n * 8 * d)?;
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
        let m = self.m;
        let a = self.arr;
        let s = &mut self.st[t];
        let start = out.len();
        let mut cols = [0i64; 27];
        let last_stage = if self.p.cg { 5 } else { 0 };
        out.reserve(BATCH + 96);
        while out.len() - start < BATCH {
            if s.stage == 0 {
                // Whole rows until the budget is used.
                match m {
                    Matrix::Random(rm) => {
                        while s.r < s.hi && out.len() - start < BATCH {
                            rm.columns(s.r, &mut self.cols);
                            a.push_row(out, s.r, &mut s.p, self.cols.iter().copied());
                            s.r += 1;
                        }
                    }
                    Matrix::Grid(m) => {
                        let (nx, ny) = (m.nx, m.ny);
                        let mut x = s.r % nx;
                        let mut y = (s.r / nx) % ny;
                        let mut z = s.r / (nx * ny);
                        while s.r < s.hi && out.len() - start < BATCH {
                            let r = s.r;
                            let k = m.col_offsets(x, y, z, &mut cols);
                            let cs = cols[..k].iter().map(|&d| (r as i64 + d) as u64);
                            if a.dof == 1 {
                                a.push_row(out, r, &mut s.p, cs);
                            } else {
                                a.push_block_row(out, r, &mut s.p, cs);
                            }
                            s.r += 1;
                            x += 1;
                            if x == nx {
                                x = 0;
                                y += 1;
                                if y == ny {
                                    y = 0;
                                    z += 1;
                                }
                            }
                        }
                    }
                }
            } else {
                let budget = ((BATCH - (out.len() - start)) / 3 / a.dof as usize).max(1) as u64;
                let (rlo, rhi) = (s.r, s.hi.min(s.r + budget));
                // Vector entries of rows rlo..rhi (dof per row).
                let (lo, hi) = (rlo * a.dof, rhi * a.dof);
                match s.stage {
                    1 => {
                        for i in lo..hi {
                            out.push(Access::read(a.input + i * 8));
                            out.push(Access::read(a.output + i * 8));
                        }
                    }
                    2 => {
                        for i in lo..hi {
                            out.push(Access::read(a.input + i * 8));
                            out.push(Access::read(a.x + i * 8));
                            out.push(Access::write(a.x + i * 8));
                        }
                    }
                    3 => {
                        for i in lo..hi {
                            out.push(Access::read(a.output + i * 8));
                            out.push(Access::read(a.r + i * 8));
                            out.push(Access::write(a.r + i * 8));
                        }
                    }
                    4 => out.extend((lo..hi).map(|i| Access::read(a.r + i * 8))),
                    _ => {
                        for i in lo..hi {
                            out.push(Access::read(a.r + i * 8));
                            out.push(Access::read(a.input + i * 8));
                            out.push(Access::write(a.input + i * 8));
                        }
                    }
                }
                s.r = rhi;
            }
            if s.r == s.hi {
                s.r = s.lo;
                if s.stage == last_stage {
                    s.stage = 0;
                    s.p = s.p0;
                    s.iter += 1;
                    if self.p.iterations > 0 && s.iter >= self.p.iterations {
                        s.issued += (out.len() - start) as u64;
                        return Ok(Step::Done);
                    }
                } else {
                    s.stage += 1;
                }
            }
        }
        s.issued += (out.len() - start) as u64;
        Ok(Step::Continue)
    }

    fn discard(&mut self, _t: usize, unexecuted: &[Access]) {
        self.discarded += unexecuted.len() as u64;
    }

    fn report_stats(&self, out: &mut Stats) {
        out.set("workload.rows", self.m.rows());
        out.set("workload.nnz", self.m.nnz());
        if self.arr.dof != 1 {
            out.set("workload.dof", self.arr.dof);
        }
        out.set("workload.accesses", self.st.iter().map(|s| s.issued).sum::<u64>() - self.discarded);
        out.set("workload.iterations_completed", self.st.iter().map(|s| s.iter).min().unwrap_or(0));
    }
}

/// `SpmvParams` with the workload parameters every kind shares ([`WorkloadShared`]).
pub type SpmvConfig = crate::params::With<WorkloadShared, SpmvParams>;

impl crate::params::SharedDefaults<WorkloadShared> for SpmvParams {
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
            cores: 8,
            duration: Ps::ZERO,
            ..Default::default()
        }
    }

    #[test]
    fn closed_form_row_ptr_matches_brute_force() {
        for points in [7, 27] {
            for (nx, ny, nz) in [(1, 1, 1), (1, 1, 5), (4, 3, 2), (5, 1, 3), (6, 5, 4), (2, 2, 2)] {
                let m = GridMatrix { nx, ny, nz, points };
                let mut p = 0;
                let mut r = 0;
                let mut buf = [0i64; 27];
                for z in 0..nz {
                    for y in 0..ny {
                        for x in 0..nx {
                            assert_eq!(m.row_ptr(r), p, "{points} {nx}x{ny}x{nz} row {r}");
                            let k = m.col_offsets(x, y, z, &mut buf);
                            assert_eq!(k as u64, m.row_nnz(x, y, z));
                            // Ascending columns, all inside the grid, the diagonal included.
                            assert!(buf[..k].windows(2).all(|w| w[0] < w[1]));
                            assert!(buf[..k].contains(&0));
                            assert!(buf[..k].iter().all(|&d| (0..m.rows() as i64).contains(&(r as i64 + d))));
                            p += k as u64;
                            r += 1;
                        }
                    }
                }
                assert_eq!(m.nnz(), p);
            }
        }
        // MiniFE-style interior rows have 27 nonzeros.
        assert_eq!(GridMatrix { nx: 3, ny: 3, nz: 3, points: 27 }.row_nnz(1, 1, 1), 27);
    }

    #[test]
    fn spmv_touches_every_nonzero_once() {
        for (points, threads) in [(7, 1), (27, 3)] {
            let p: SpmvConfig = toml::from_str(&format!(
                "nx = 5\nny = 4\nnz = 3\npoints = {points}\ncg = false\niterations = 1\nthreads = {threads}"
            ))
            .unwrap();
            let mut w = p.build(&ctx()).unwrap();
            let mut mem = MockSpace::new();
            w.setup(&mut mem).unwrap();
            let m = GridMatrix { nx: 5, ny: 4, nz: 3, points };
            let names = ["row_ptr", "col_idx", "values", "x", "y"];
            let starts: Vec<u64> = names.iter().map(|n| mem.find(n).start).collect();
            let mut hits: Vec<Vec<u32>> = vec![vec![0; (m.nnz() + 1) as usize]; 5];
            let mut writes = 0;
            let mut accs = Vec::new();
            drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, a| accs.push(*a));
            for a in &accs {
                let (i, s) =
                    starts.iter().enumerate().filter(|(_, &s)| a.addr >= s).max_by_key(|(_, &s)| s).unwrap();
                let elem = if i == 1 { 4 } else { 8 };
                assert!(mem.contains(a.addr));
                hits[i][((a.addr - s) / elem) as usize] += 1;
                if a.is_write() {
                    assert_eq!(i, 4);
                    writes += 1;
                }
            }
            assert_eq!(writes, m.rows());
            assert!(hits[1][..m.nnz() as usize].iter().all(|&c| c == 1), "col_idx");
            assert!(hits[2][..m.nnz() as usize].iter().all(|&c| c == 1), "values");
            // x[j] is read once per nonzero in column j (the matrix is symmetric).
            let mut buf = [0i64; 27];
            for r in 0..m.rows() {
                let (x, y, z) = (r % 5, (r / 5) % 4, r / 20);
                assert_eq!(hits[3][r as usize] as usize, m.col_offsets(x, y, z, &mut buf));
            }
            assert_eq!(accs.len() as u64, m.rows() * 3 + m.nnz() * 3);
        }
    }

    #[test]
    fn cg_adds_vector_operations() {
        let p: SpmvConfig =
            toml::from_str("nx = 4\nny = 4\nnz = 4\npoints = 7\niterations = 2\nthreads = 2").unwrap();
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let names: Vec<String> = mem.maps.iter().map(|m| m.opts.name.clone()).collect();
        assert_eq!(names, ["row_ptr", "col_idx", "values", "p", "Ap", "r", "x"]);
        let x = mem.find("x").start;
        let pv = mem.find("p").start;
        let mut n = 0u64;
        let mut x_writes = vec![0u32; 64];
        let mut p_writes = vec![0u32; 64];
        drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, a| {
            n += 1;
            if a.is_write() && a.addr >= x && a.addr < x + 512 {
                x_writes[((a.addr - x) / 8) as usize] += 1;
            }
            if a.is_write() && a.addr >= pv && a.addr < pv + 512 {
                p_writes[((a.addr - pv) / 8) as usize] += 1;
            }
        });
        let m = GridMatrix { nx: 4, ny: 4, nz: 4, points: 7 };
        // Per iteration: SpMV + dot(2) + axpy(3) + axpy(3) + dot(1) + axpy(3) per row.
        assert_eq!(n, 2 * (m.rows() * 3 + m.nnz() * 3 + m.rows() * 12));
        assert!(x_writes.iter().all(|&c| c == 2) && p_writes.iter().all(|&c| c == 2));
        let mut s = Stats::new();
        w.report_stats(&mut s);
        assert_eq!(s.get_u64("workload.accesses"), n);
        assert_eq!(s.get_u64("workload.iterations_completed"), 2);
    }

    #[test]
    fn block_3x3_operator_like_geofem() {
        let p: SpmvConfig =
            toml::from_str("nx = 4\nny = 3\nnz = 3\npoints = 27\ndof = 3\niterations = 2\nthreads = 2")
                .unwrap();
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let m = GridMatrix { nx: 4, ny: 3, nz: 3, points: 27 };
        let (n, nnz) = (m.rows(), m.nnz());
        // Mappings are rounded up to pages.
        assert_eq!(mem.find("values").len.div_ceil(4096), (nnz * 9 * 8).div_ceil(4096));
        assert_eq!(mem.find("p").len.div_ceil(4096), (n * 3 * 8).div_ceil(4096));
        let (vs, ps, aps) = (mem.find("values").start, mem.find("p").start, mem.find("Ap").start);
        let mut values = vec![0u32; (nnz * 9) as usize];
        let mut p_reads = vec![0u32; (n * 3) as usize];
        let (mut total, mut ap_writes) = (0u64, 0u64);
        drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, a| {
            total += 1;
            if a.addr >= vs && a.addr < vs + nnz * 72 {
                values[((a.addr - vs) / 8) as usize] += 1;
            }
            if !a.is_write() && a.addr >= ps && a.addr < ps + n * 24 {
                p_reads[((a.addr - ps) / 8) as usize] += 1;
            }
            if a.is_write() && a.addr >= aps && a.addr < aps + n * 24 {
                ap_writes += 1;
            }
        });
        // Per iteration: per block row 2 row_ptr loads and 3 stores, per block 1 + 3 + 9
        // loads, and the CG's 12 accesses per vector entry (3 entries per row).
        assert_eq!(total, 2 * (n * 5 + nnz * 13 + 3 * n * 12));
        assert!(values.iter().all(|&c| c == 2), "every block value read once per iteration");
        assert_eq!(ap_writes, 2 * 3 * n);
        // p's 3 entries of a point are gathered once per block in its column (the operator
        // is symmetric: as many as the point's row has blocks) and read by 3 vector ops.
        let mut buf = [0i64; 27];
        for r in 0..n {
            let (x, y, z) = (r % 4, (r / 4) % 3, r / 12);
            let k = m.col_offsets(x, y, z, &mut buf) as u32;
            for c in 0..3 {
                assert_eq!(p_reads[(r * 3 + c) as usize], 2 * (k + 3), "row {r}");
            }
        }
        let mut s = Stats::new();
        w.report_stats(&mut s);
        assert_eq!(s.get_u64("workload.dof"), 3);
        assert_eq!(s.get_u64("workload.accesses"), total);
    }

    #[test]
    fn random_matrix_like_npb_cg() {
        let p: SpmvConfig = toml::from_str(
            "matrix = \"random\"\nrows = 500\nrow_nnz = 9\ncg = false\niterations = 2\nthreads = 4",
        )
        .unwrap();
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let (xs, ys) = (mem.find("x").start, mem.find("y").start);
        let (vs, cs) = (mem.find("values").start, mem.find("col_idx").start);
        let mut gathered = Vec::new();
        let mut values = vec![0u32; 500 * 9];
        let mut n = 0u64;
        drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, a| {
            n += 1;
            if a.addr >= xs && a.addr < xs + 500 * 8 {
                gathered.push((a.addr - xs) / 8);
            } else if a.addr >= vs && a.addr < vs + 500 * 9 * 8 {
                values[((a.addr - vs) / 8) as usize] += 1;
            }
            assert!(a.addr < cs || a.addr >= cs + 500 * 9 * 4 || !a.is_write());
            assert!(!a.is_write() || (a.addr >= ys && a.addr < ys + 500 * 8));
        });
        assert_eq!(n, 2 * (500 * 3 + 500 * 9 * 3));
        assert!(values.iter().all(|&c| c == 2), "every nonzero read once per iteration");
        assert_eq!(gathered.len(), 2 * 500 * 9);
        // Same columns in both iterations (every column gathered an even number of times); the
        // columns spread over the whole vector.
        let mut count = std::collections::BTreeMap::<u64, u32>::new();
        for &c in &gathered {
            *count.entry(c).or_default() += 1;
        }
        assert!(count.values().all(|&c| c % 2 == 0), "iterations gather the same columns");
        assert!(count.len() > 400, "{} distinct columns of 500", count.len());
        // Each row: 9 ascending columns, the diagonal among them; another seed, another matrix.
        let m = RandomMatrix { rows: 500, row_nnz: 9, key: 7 };
        let mut buf = Vec::new();
        for r in 0..500 {
            m.columns(r, &mut buf);
            assert_eq!(buf.len(), 9);
            assert!(buf.windows(2).all(|w| w[0] <= w[1]) && buf.contains(&r) && buf.iter().all(|&c| c < 500));
        }
        let mut other = Vec::new();
        RandomMatrix { key: 8, ..m }.columns(3, &mut other);
        m.columns(3, &mut buf);
        assert_ne!(buf, other);
    }

    #[test]
    fn errors() {
        let c = ctx();
        let bad = |t: &str| toml::from_str::<SpmvConfig>(t).unwrap().build(&c).err().unwrap().to_string();
        assert!(bad("rows = 10\niterations = 1").contains("workload.rows"));
        assert!(
            bad("matrix = \"random\"\nrows = 10\nrow_nnz = 11\niterations = 1").contains("workload.row_nnz")
        );
        assert!(bad("matrix = \"random\"\nrows = 0\niterations = 1").contains("workload.rows"));
        assert!(toml::from_str::<SpmvConfig>("matrix = \"banded\"").is_err());
        assert!(bad("points = 9\niterations = 1").contains("workload.points"));
        assert!(bad("dof = 2\niterations = 1").contains("workload.dof"));
        assert!(bad("matrix = \"random\"\ndof = 3\niterations = 1").contains("workload.dof"));
        assert!(bad("nx = 1\nny = 1\nnz = 1\nthreads = 2\niterations = 1").contains("workload.threads"));
        assert!(bad("nx = 4").contains("workload.iterations"));
    }
}
