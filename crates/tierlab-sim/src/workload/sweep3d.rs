//! `sweep3d`: the loop structure of NAS BT, NAS LU and the SCALE climate code on a 3-D grid
//! (the applications of the CMCP paper), as memory accesses.
//!
//! The grid has `nx * ny * nz` points, x fastest. Each array holds `comps` f64 per point
//! (5 for the flow variables of BT and LU, 1 for scalars); an access is emitted per point
//! and array touched (a point's components share a cache line or two). Each iteration runs
//! the preset's phases; a phase partitions the grid among the threads along one dimension
//! (contiguous ranges, as an OpenMP `for` over that loop does) and is one of:
//! - a point phase: for every point of the thread's part (z, y, x loops, optionally with z
//!   descending), read some arrays at offsets (stencil halos; neighbours outside the grid
//!   are skipped), then write some arrays at the point;
//! - a line phase along x, y or z: for every grid line of the thread's part, a forward
//!   elimination (read the line's arrays, write the right-hand side) then a back
//!   substitution (read and write it), as BT's x/y/z_solve do.
//!
//! Presets (per iteration):
//! - `bt` (NAS BT, `adi`): arrays u, rhs, forcing (5 components) and us, vs, ws, qs, rho_i,
//!   square; phases: rhs preparation (z split: read u, write the 6 scalars), compute_rhs
//!   (z split: u with its +-1 and +-2 neighbours along each axis, the scalars and forcing at
//!   the point, write rhs), x_solve and y_solve (z split, lines along x and y), z_solve
//!   (y split, lines along z), add (z split: u += rhs).
//! - `lu` (NAS LU, `ssor`): arrays u, rsd, frct (5) and qs, rho_i; phases: rhs preparation
//!   and rhs (z split, as BT's with rsd and frct), the lower sweep jacld/blts (y split, z
//!   ascending: rsd at the point and its -x, -y, -z neighbours), the upper sweep jacu/buts
//!   (y split, z descending, +x, +y, +z neighbours), the update (z split).
//! - `scale` (SCALE's dynamical core): arrays dens, momx, momy, momz, rhot and their five
//!   tendencies, pres, temp (1 component each); phases, all z split, one small loop per
//!   variable as in SCALE's Fortran: diagnostics (read dens and rhot, write pres and temp),
//!   a tendency loop per variable (the variable with its 6 neighbours; dens, the three
//!   momenta and pres at the point; write its tendency), an update loop per variable (variable += tendency).
//!
//! With `init`, a first z-split pass writes every point of every array (NAS initializes its
//! arrays in the program, so the data is born in fast memory).
//!
//! Pages are therefore mostly touched by a thread's z part and, in BT and LU, by the thread
//! owning their y part: the sharing pattern of Figure 6 of the paper (SCALE: mostly private,
//! halos shared by two cores; LU and BT: mostly fewer than six cores).

use super::{
    check_threads, Access, AddressSpace, BuildCtx, MapOptions, Ps, Step, Workload, WorkloadParams,
    WorkloadShared,
};
use crate::error::{Result, SimError};
use crate::stats::Stats;
use serde::{Deserialize, Serialize};
use tierlab_core::param::params;

/// Which application's loop structure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// NAS BT.
    #[default]
    Bt,
    /// NAS LU.
    Lu,
    /// SCALE's dynamical core.
    Scale,
}

tierlab_core::choice_param!(Preset);

/// Parameters of the `sweep3d` workload.
#[params]
#[derive(Clone, Debug)]
pub struct Sweep3dParams {
    /// `"bt"`, `"lu"` or `"scale"`.
    #[param(default)]
    pub preset: Preset,
    /// Grid points along x (contiguous).
    #[param(default = 64, range = "[1, 1e7]", unit = "grid points", setting)]
    pub nx: u64,
    /// Grid points along y.
    #[param(default = 64, range = "[1, 1e7]", unit = "grid points", setting)]
    pub ny: u64,
    /// Grid points along z.
    #[param(default = 64, range = "[1, 1e7]", unit = "grid points", setting)]
    pub nz: u64,
    /// Iterations per thread before it is done; 0 = until the scenario's duration.
    #[param(default, range = "[0, 281474976710656]", unit = "iterations", setting)]
    pub iterations: u64,
    /// Initialize every array before the first iteration (a z-split pass writing each point
    /// of each array, as NAS's initialization routines do).
    #[param(default, setting)]
    pub init: bool,
}

const BATCH: usize = 16_384;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dim {
    X = 0,
    Y = 1,
    Z = 2,
}

#[derive(Clone, Debug)]
enum Phase {
    Points { split: Dim, descending: bool, reads: Vec<(usize, Vec<[i64; 3]>)>, writes: Vec<usize> },
    Lines { dir: Dim, split: Dim, reads: Vec<usize>, rhs: usize },
}

struct Layout {
    names: Vec<&'static str>,
    comps: Vec<u64>,
    phases: Vec<(&'static str, Phase)>,
}

fn pt() -> Vec<[i64; 3]> {
    vec![[0, 0, 0]]
}
fn star(r: i64) -> Vec<[i64; 3]> {
    let mut v = vec![[0, 0, 0]];
    for d in 1..=r {
        for a in 0..3 {
            let mut m = [0; 3];
            m[a] = -d;
            v.push(m);
            m[a] = d;
            v.push(m);
        }
    }
    v
}

fn layout(p: Preset) -> Layout {
    use Dim::*;
    match p {
        Preset::Bt => {
            // 0 u, 1 rhs, 2 forcing, 3.. us vs ws qs rho_i square
            let names = vec!["u", "rhs", "forcing", "us", "vs", "ws", "qs", "rho_i", "square"];
            let comps = vec![5, 5, 5, 1, 1, 1, 1, 1, 1];
            let scalars: Vec<usize> = (3..9).collect();
            let mut rhs_reads = vec![(0, star(2)), (2, pt())];
            rhs_reads.extend(scalars.iter().map(|&s| (s, pt())));
            let phases = vec![
                (
                    "rhs_prep",
                    Phase::Points { split: Z, descending: false, reads: vec![(0, pt())], writes: scalars },
                ),
                (
                    "compute_rhs",
                    Phase::Points { split: Z, descending: false, reads: rhs_reads, writes: vec![1] },
                ),
                ("x_solve", Phase::Lines { dir: X, split: Z, reads: vec![0], rhs: 1 }),
                ("y_solve", Phase::Lines { dir: Y, split: Z, reads: vec![0], rhs: 1 }),
                ("z_solve", Phase::Lines { dir: Z, split: Y, reads: vec![0], rhs: 1 }),
                (
                    "add",
                    Phase::Points {
                        split: Z,
                        descending: false,
                        reads: vec![(1, pt()), (0, pt())],
                        writes: vec![0],
                    },
                ),
            ];
            Layout { names, comps, phases }
        }
        Preset::Lu => {
            // 0 u, 1 rsd, 2 frct, 3 qs, 4 rho_i
            let names = vec!["u", "rsd", "frct", "qs", "rho_i"];
            let comps = vec![5, 5, 5, 1, 1];
            let lower = vec![[0, 0, 0], [-1, 0, 0], [0, -1, 0], [0, 0, -1]];
            let upper = vec![[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]];
            let phases = vec![
                (
                    "rhs_prep",
                    Phase::Points { split: Z, descending: false, reads: vec![(0, pt())], writes: vec![3, 4] },
                ),
                (
                    "rhs",
                    Phase::Points {
                        split: Z,
                        descending: false,
                        reads: vec![(0, star(2)), (2, pt()), (3, pt()), (4, pt())],
                        writes: vec![1],
                    },
                ),
                (
                    "blts",
                    Phase::Points {
                        split: Y,
                        descending: false,
                        reads: vec![(0, pt()), (1, lower)],
                        writes: vec![1],
                    },
                ),
                (
                    "buts",
                    Phase::Points {
                        split: Y,
                        descending: true,
                        reads: vec![(0, pt()), (1, upper)],
                        writes: vec![1],
                    },
                ),
                (
                    "update",
                    Phase::Points {
                        split: Z,
                        descending: false,
                        reads: vec![(1, pt()), (0, pt())],
                        writes: vec![0],
                    },
                ),
            ];
            Layout { names, comps, phases }
        }
        Preset::Scale => {
            let names = vec![
                "dens", "momx", "momy", "momz", "rhot", "dens_t", "momx_t", "momy_t", "momz_t", "rhot_t",
                "pres", "temp",
            ];
            let comps = vec![1; 12];
            let mut phases = vec![(
                "diagnostics",
                Phase::Points {
                    split: Z,
                    descending: false,
                    reads: vec![(0, pt()), (4, pt())],
                    writes: vec![10, 11],
                },
            )];
            const TEND: [&str; 5] = ["tend_dens", "tend_momx", "tend_momy", "tend_momz", "tend_rhot"];
            const UPD: [&str; 5] = ["upd_dens", "upd_momx", "upd_momy", "upd_momz", "upd_rhot"];
            for (v, name) in TEND.iter().enumerate() {
                phases.push((
                    name,
                    Phase::Points {
                        split: Z,
                        descending: false,
                        reads: vec![(v, star(1)), (0, pt()), (1, pt()), (2, pt()), (3, pt()), (10, pt())],
                        writes: vec![5 + v],
                    },
                ));
            }
            for (v, name) in UPD.iter().enumerate() {
                phases.push((
                    name,
                    Phase::Points {
                        split: Z,
                        descending: false,
                        reads: vec![(5 + v, pt()), (v, pt())],
                        writes: vec![v],
                    },
                ));
            }
            Layout { names, comps, phases }
        }
    }
}

fn part(n: u64, parts: u64, i: u64) -> (u64, u64) {
    ((n as u128 * i as u128 / parts as u128) as u64, (n as u128 * (i + 1) as u128 / parts as u128) as u64)
}

impl WorkloadParams for Sweep3dConfig {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        let f = &ctx.scenario_file;
        check_threads("sweep3d", self.shared.threads, ctx)?;
        for (name, v) in [("nx", self.nx), ("ny", self.ny), ("nz", self.nz)] {
            if v < 3 {
                return Err(SimError::config(f, format!("workload.{name}"), "must be at least 3"));
            }
        }
        if self
            .nx
            .checked_mul(self.ny)
            .and_then(|v| v.checked_mul(self.nz))
            .and_then(|v| v.checked_mul(40))
            .is_none()
        {
            return Err(SimError::config(f, "workload.nx", "the grid's size overflows 64 bits"));
        }
        if self.iterations == 0 && ctx.duration == Ps::ZERO {
            return Err(SimError::config(
                f,
                "workload.iterations",
                "iterations = 0 runs until the scenario's duration, but the scenario sets none",
            ));
        }
        let l = layout(self.preset);
        let st = (0..self.shared.threads)
            .map(|_| ThreadState { init_done: !self.init, ..Default::default() })
            .collect();
        let init = Phase::Points {
            split: Dim::Z,
            descending: false,
            reads: Vec::new(),
            writes: (0..l.names.len()).collect(),
        };
        Ok(Box::new(Sweep3d { p: self.clone(), base: vec![0; l.names.len()], l, init, st }))
    }
}

#[derive(Default)]
struct ThreadState {
    iter: u64,
    phase: usize,
    /// Next unit (row or line) of the phase.
    unit: u64,
    points: u64,
    done: bool,
    init_done: bool,
}

/// The `sweep3d` workload.
pub struct Sweep3d {
    p: Sweep3dConfig,
    l: Layout,
    /// The initialization pass.
    init: Phase,
    base: Vec<u64>,
    st: Vec<ThreadState>,
}

impl Sweep3d {
    fn n(&self, d: Dim) -> u64 {
        [self.p.nx, self.p.ny, self.p.nz][d as usize]
    }

    /// The thread's box: [lo, hi) per dimension, the split one restricted.
    fn bx(&self, t: usize, split: Dim) -> [(u64, u64); 3] {
        let mut b = [(0, self.p.nx), (0, self.p.ny), (0, self.p.nz)];
        b[split as usize] = part(self.n(split), self.p.shared.threads as u64, t as u64);
        b
    }

    #[inline]
    fn addr(&self, a: usize, x: u64, y: u64, z: u64) -> u64 {
        self.base[a] + ((z * self.p.ny + y) * self.p.nx + x) * self.l.comps[a] * 8
    }

    /// Units (rows for point phases, lines for line phases) of a phase for thread `t`, and
    /// the two dimensions enumerating them (outer, inner).
    fn units(&self, t: usize, ph: &Phase) -> (u64, [(u64, u64); 3], Dim, Dim) {
        let (split, dir) = match ph {
            Phase::Points { split, .. } => (*split, Dim::X),
            Phase::Lines { split, dir, .. } => (*split, *dir),
        };
        let b = self.bx(t, split);
        let (outer, inner) = match dir {
            Dim::X => (Dim::Z, Dim::Y),
            Dim::Y => (Dim::Z, Dim::X),
            Dim::Z => (Dim::Y, Dim::X),
        };
        let len = |d: Dim| b[d as usize].1 - b[d as usize].0;
        (len(outer) * len(inner), b, outer, inner)
    }

    fn emit_unit(&self, t: usize, ph: &Phase, u: u64, out: &mut Vec<Access>) -> u64 {
        let (n_units, b, outer, inner) = self.units(t, ph);
        let inner_len = b[inner as usize].1 - b[inner as usize].0;
        let mut pos = [0u64; 3];
        match ph {
            Phase::Points { descending, reads, writes, .. } => {
                let u = if *descending { n_units - 1 - u } else { u };
                pos[outer as usize] = b[outer as usize].0 + u / inner_len;
                pos[inner as usize] = b[inner as usize].0 + u % inner_len;
                let (y, z) = (pos[1], pos[2]);
                let (nx, ny, nz) = (self.p.nx as i64, self.p.ny as i64, self.p.nz as i64);
                for x in b[0].0..b[0].1 {
                    for (a, offs) in reads {
                        for o in offs {
                            let (xx, yy, zz) = (x as i64 + o[0], y as i64 + o[1], z as i64 + o[2]);
                            if xx >= 0 && xx < nx && yy >= 0 && yy < ny && zz >= 0 && zz < nz {
                                out.push(Access::read(self.addr(*a, xx as u64, yy as u64, zz as u64)));
                            }
                        }
                    }
                    for &a in writes {
                        out.push(Access::write(self.addr(a, x, y, z)));
                    }
                }
                b[0].1 - b[0].0
            }
            Phase::Lines { dir, reads, rhs, .. } => {
                pos[outer as usize] = b[outer as usize].0 + u / inner_len;
                pos[inner as usize] = b[inner as usize].0 + u % inner_len;
                let d = *dir as usize;
                let (lo, hi) = b[d];
                let at = |k: u64| {
                    let mut p = pos;
                    p[d] = k;
                    p
                };
                // Forward elimination, then back substitution.
                for k in lo..hi {
                    let p = at(k);
                    for &a in reads {
                        out.push(Access::read(self.addr(a, p[0], p[1], p[2])));
                    }
                    out.push(Access::read(self.addr(*rhs, p[0], p[1], p[2])));
                    out.push(Access::write(self.addr(*rhs, p[0], p[1], p[2])));
                }
                for k in (lo..hi).rev() {
                    let p = at(k);
                    out.push(Access::read(self.addr(*rhs, p[0], p[1], p[2])));
                    out.push(Access::write(self.addr(*rhs, p[0], p[1], p[2])));
                }
                hi - lo
            }
        }
    }
}

impl Workload for Sweep3d {
    fn threads(&self) -> usize {
        self.p.shared.threads
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        let points = self.p.nx * self.p.ny * self.p.nz;
        for (i, name) in self.l.names.iter().enumerate() {
            let opts = MapOptions {
                name: (*name).into(),
                page_size: self.p.shared.page_size,
                populate: self.p.shared.populate,
                thread: 0,
            };
            self.base[i] = mem.mmap(points * self.l.comps[i] * 8, opts)?;
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
        while out.len() - start < BATCH {
            let s = &self.st[t];
            if s.done {
                return Ok(Step::Done);
            }
            let in_init = !s.init_done;
            let ph = if in_init { &self.init } else { &self.l.phases[s.phase].1 };
            let (n_units, ..) = self.units(t, ph);
            let unit = s.unit;
            let pts = if unit < n_units { self.emit_unit(t, ph, unit, out) } else { 0 };
            let s = &mut self.st[t];
            s.unit += 1;
            if in_init {
                if s.unit >= n_units {
                    s.unit = 0;
                    s.init_done = true;
                }
                continue;
            }
            s.points += pts;
            if s.unit >= n_units {
                s.unit = 0;
                s.phase += 1;
                if s.phase == self.l.phases.len() {
                    s.phase = 0;
                    s.iter += 1;
                    if self.p.iterations > 0 && s.iter >= self.p.iterations {
                        s.done = true;
                        return Ok(Step::Done);
                    }
                }
            }
        }
        Ok(Step::Continue)
    }

    fn report_stats(&self, out: &mut Stats) {
        out.set("workload.preset", format!("{:?}", self.p.preset).to_lowercase());
        out.set("workload.iterations_done", self.st.iter().map(|s| s.iter).min().unwrap_or(0));
        out.set("workload.points_visited", self.st.iter().map(|s| s.points).sum::<u64>());
    }
}

/// `Sweep3dParams` with the workload parameters every kind shares ([`WorkloadShared`]).
pub type Sweep3dConfig = crate::params::With<WorkloadShared, Sweep3dParams>;

impl crate::params::SharedDefaults<WorkloadShared> for Sweep3dParams {
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
    fn every_phase_covers_the_grid_once_per_iteration() {
        for preset in ["bt", "lu", "scale"] {
            for threads in [1usize, 3, 8] {
                let p: Sweep3dConfig = toml::from_str(&format!(
                    "preset = \"{preset}\"\nnx = 5\nny = 6\nnz = 7\nthreads = {threads}\niterations = 2"
                ))
                .unwrap();
                let mut w = p.build(&ctx()).unwrap();
                let mut mem = MockSpace::new();
                w.setup(&mut mem).unwrap();
                let l = layout(p.preset);
                let first = mem.find(l.names[0]).start;
                let mut writes = 0u64;
                drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, acc| {
                    assert!(acc.addr >= first);
                    writes += acc.is_write() as u64;
                });
                // Writes per point per iteration: point phases write their arrays once,
                // line phases twice (elimination and substitution).
                let per_point: u64 = l
                    .phases
                    .iter()
                    .map(|(_, ph)| match ph {
                        Phase::Points { writes, .. } => writes.len() as u64,
                        Phase::Lines { .. } => 2,
                    })
                    .sum();
                assert_eq!(writes, 2 * 5 * 6 * 7 * per_point, "{preset} x{threads}");
                // The initialization pass writes every array once more.
                let p: Sweep3dConfig = toml::from_str(&format!(
                    "preset = \"{preset}\"\nnx = 5\nny = 6\nnz = 7\nthreads = {threads}\niterations = 2\ninit = true"
                ))
                .unwrap();
                let mut w = p.build(&ctx()).unwrap();
                let mut mem = MockSpace::new();
                w.setup(&mut mem).unwrap();
                let mut w_init = 0u64;
                drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, acc| w_init += acc.is_write() as u64);
                assert_eq!(w_init, writes + 5 * 6 * 7 * l.names.len() as u64, "{preset} init");
            }
        }
    }

    #[test]
    fn errors() {
        let c = ctx();
        let bad = |t: &str| toml::from_str::<Sweep3dConfig>(t).unwrap().build(&c).err().unwrap().to_string();
        assert!(bad("nx = 2\niterations = 1").contains("workload.nx"));
        assert!(bad("nx = 4").contains("workload.iterations"));
        assert!(toml::from_str::<Sweep3dConfig>("preset = \"sp\"").is_err());
    }
}
