//! `lulesh`: the memory accesses of LULESH 2.0's time step (Lagrangian explicit shock
//! hydrodynamics on a hexahedral mesh), the PEBS paper's Lulesh (Fig. 5).
//!
//! # What LULESH does (sources)
//! Public description of LULESH 2.0 (Karlin et al., "LULESH 2.0 Updates and Changes",
//! LLNL-TR-641973, 2013, and the LULESH 1.0 specification, LLNL-TR-490254): the problem
//! (`-s size`, default 30) is a cube of `s^3` hexahedral elements with `(s+1)^3` nodes, stored
//! as structure-of-arrays. Nodal arrays: coordinates `x, y, z`, velocities `xd, yd, zd`,
//! accelerations `xdd, ydd, zdd`, forces `fx, fy, fz`, `nodalMass`. Element arrays: energy
//! `e`, pressure `p`, artificial viscosity `q`, relative volume `v`, reference volume `volo`,
//! `delv`, characteristic length `arealg`, sound speed `ss`, `elemMass`, and `nodelist` (8
//! node indices per element, 32-bit). One time step (`LagrangeLeapFrog`) is
//! `LagrangeNodal` (CalcForceForNodes: zero the forces, then per element gather the 8 nodes'
//! coordinates, integrate the stress and the hourglass forces and add them to the nodes'
//! forces; CalcAccelerationForNodes; CalcVelocityForNodes; CalcPositionForNodes: streams over
//! the nodal arrays), `LagrangeElements` (CalcLagrangeElements / CalcKinematicsForElems and
//! CalcQForElems: per element gathers of coordinates and velocities;
//! ApplyMaterialPropertiesForElems / EvalEOSForElems and UpdateVolumesForElems: streams over
//! element arrays) and CalcTimeConstraintsForElems (a stream over element arrays).
//!
//! # The model (per time step, in this order; N = nodes, E = elements)
//! | phase | loop | accesses per item |
//! |---|---|---|
//! | zero forces | nodes | store `fx, fy, fz` |
//! | integrate stress | elements | load `p, q`; 8 `nodelist`; gather `x`, `y`, `z` (8 each); scatter: per node load+store `fx, fy, fz` (48) |
//! | hourglass control | elements | 8 `nodelist`; gather `x, y, z`; load `volo, v`; gather `xd, yd, zd`; load `ss, elemMass`; scatter (48) |
//! | acceleration | nodes | load `fx, nodalMass`, store `xdd`; load `fy`, store `ydd`; load `fz`, store `zdd` |
//! | velocity | nodes | per axis: load `xd, xdd`, store `xd` |
//! | position | nodes | per axis: load `x, xd`, store `x` |
//! | kinematics | elements | 8 `nodelist`; gather `x, y, z, xd, yd, zd`; load `volo, v`; store `delv, arealg` |
//! | Q gradients/region | elements | 8 `nodelist`; gather `x, y, z, xd, yd, zd`; load `volo, v, delv`; store `q` |
//! | EOS | elements | load `e, delv, p, q, v`; store `e, p, q, ss` |
//! | update volumes | elements | load `v`, store `v` |
//! | time constraints | elements | load `ss, arealg, delv` |
//!
//! That is `28 N + 324 E` accesses per step, `12 N + 56 E` of them stores. Simplifications
//! (stated, not hidden): the element-local temporaries (`vnew`, `dxx`.., `sigxx`..,
//! `fx_elem`), the symmetry-plane boundary conditions, the region/material indirection and
//! the neighbour-element `delv` loads of the monotonic Q limiter are not modelled; the forces
//! are added to the nodes directly (LULESH 1.0's serial scatter) instead of LULESH 2.0's
//! OpenMP per-corner arrays summed per node; a gather loads `arr[nodelist[e][0..8]]` in
//! corner order, one array after the other (`CollectDomainNodesToElemNodes`). Elements are
//! numbered x fastest; element `(i, j, k)` has corners `n, n+1, n+S+1, n+S` and the same plus
//! `S^2` (`S = s + 1`, `n = (k S + j) S + i`), LULESH's numbering.
//!
//! Threads split the elements and the nodes in contiguous blocks (OpenMP static schedule) and
//! run the phases without barriers between them (as `stencil`). Deterministic: no random
//! choice.

use super::{
    check_threads, Access, AddressSpace, BuildCtx, MapOptions, Ps, Step, Workload, WorkloadParams,
    WorkloadShared,
};
use crate::error::{Result, SimError};
use crate::stats::Stats;
use tierlab_core::param::params;

/// Parameters of the `lulesh` workload.
#[params]
#[derive(Clone, Debug)]
pub struct LuleshParams {
    /// Elements per side of the cube (LULESH's `-s`). 30 is LULESH 2.0's default: 27,000
    /// elements, 29,791 nodes, 5.9 MB of arrays.
    #[param(default = 30, range = "[0, 281474976710656]", unit = "elements per side", setting)]
    pub size: u64,
    /// Time steps per thread before it is done; 0 = until the scenario's duration.
    #[param(default, range = "[0, 281474976710656]", unit = "time steps", setting)]
    pub iterations: u64,
}

/// Target accesses per batch.
const BATCH: usize = 16_384;

/// The mesh arrays, in mapping order: 13 nodal arrays, then the element arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Arr {
    X,
    Y,
    Z,
    Xd,
    Yd,
    Zd,
    Xdd,
    Ydd,
    Zdd,
    Fx,
    Fy,
    Fz,
    NodalMass,
    E,
    P,
    Q,
    V,
    Volo,
    Delv,
    Arealg,
    Ss,
    ElemMass,
    Nodelist,
}

/// Mapping names, indexed by `Arr`.
pub const ARRAYS: [&str; 23] = [
    "x",
    "y",
    "z",
    "xd",
    "yd",
    "zd",
    "xdd",
    "ydd",
    "zdd",
    "fx",
    "fy",
    "fz",
    "nodalMass",
    "e",
    "p",
    "q",
    "v",
    "volo",
    "delv",
    "arealg",
    "ss",
    "elemMass",
    "nodelist",
];
const NODAL: usize = 13;

/// One step of a loop body.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// Load the item's own entry of the array.
    R(Arr),
    /// Store the item's own entry.
    W(Arr),
    /// Load the element's 8 node indices.
    Nodes,
    /// Load the array at the element's 8 nodes.
    Gather(Arr),
    /// Per node: load and store `fx`, `fy`, `fz`.
    Scatter,
}

use Arr::*;
use Op::{Gather, Nodes, Scatter, R, W};

/// A phase: over nodes (`false`) or elements (`true`), and its loop body.
const PHASES: [(bool, &[Op]); 11] = [
    (false, &[W(Fx), W(Fy), W(Fz)]),
    (true, &[R(P), R(Q), Nodes, Gather(X), Gather(Y), Gather(Z), Scatter]),
    (
        true,
        &[
            Nodes,
            Gather(X),
            Gather(Y),
            Gather(Z),
            R(Volo),
            R(V),
            Gather(Xd),
            Gather(Yd),
            Gather(Zd),
            R(Ss),
            R(ElemMass),
            Scatter,
        ],
    ),
    (false, &[R(Fx), R(NodalMass), W(Xdd), R(Fy), W(Ydd), R(Fz), W(Zdd)]),
    (false, &[R(Xd), R(Xdd), W(Xd), R(Yd), R(Ydd), W(Yd), R(Zd), R(Zdd), W(Zd)]),
    (false, &[R(X), R(Xd), W(X), R(Y), R(Yd), W(Y), R(Z), R(Zd), W(Z)]),
    (
        true,
        &[
            Nodes,
            Gather(X),
            Gather(Y),
            Gather(Z),
            Gather(Xd),
            Gather(Yd),
            Gather(Zd),
            R(Volo),
            R(V),
            W(Delv),
            W(Arealg),
        ],
    ),
    (
        true,
        &[
            Nodes,
            Gather(X),
            Gather(Y),
            Gather(Z),
            Gather(Xd),
            Gather(Yd),
            Gather(Zd),
            R(Volo),
            R(V),
            R(Delv),
            W(Q),
        ],
    ),
    (true, &[R(E), R(Delv), R(P), R(Q), R(V), W(E), W(P), W(Q), W(Ss)]),
    (true, &[R(V), W(V)]),
    (true, &[R(Ss), R(Arealg), R(Delv)]),
];

impl WorkloadParams for LuleshConfig {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        let f = &ctx.scenario_file;
        check_threads("lulesh", self.shared.threads, ctx)?;
        let s = self.size;
        if s == 0 {
            return Err(SimError::config(f, "workload.size", "must be at least 1"));
        }
        let nodes = (s + 1).checked_pow(3).filter(|n| n.checked_mul(64).is_some());
        let Some(nodes) = nodes else {
            return Err(SimError::config(f, "workload.size", "the mesh's size overflows 64 bits"));
        };
        let elems = s * s * s;
        let t = self.shared.threads as u64;
        if elems < t {
            return Err(SimError::config(
                f,
                "workload.threads",
                format!("{elems} elements cannot be split among {t} threads"),
            ));
        }
        if self.iterations == 0 && ctx.duration == Ps::ZERO {
            return Err(SimError::config(
                f,
                "workload.iterations",
                "iterations = 0 runs until the scenario's duration, but the scenario sets none",
            ));
        }
        let part = |n: u64, i: u64| {
            ((n as u128 * i as u128 / t as u128) as u64, (n as u128 * (i + 1) as u128 / t as u128) as u64)
        };
        let st = (0..t)
            .map(|i| {
                let (e, n) = (part(elems, i), part(nodes, i));
                ThreadState { elems: e, nodes: n, phase: 0, i: n.0, iter: 0, issued: 0 }
            })
            .collect();
        Ok(Box::new(Lulesh { p: self.clone(), s, base: [0; 23], st, discarded: 0 }))
    }
}

struct ThreadState {
    elems: (u64, u64),
    nodes: (u64, u64),
    phase: usize,
    /// Next item (node or element) of the phase.
    i: u64,
    iter: u64,
    issued: u64,
}

/// The `lulesh` workload.
pub struct Lulesh {
    p: LuleshConfig,
    s: u64,
    base: [u64; 23],
    st: Vec<ThreadState>,
    discarded: u64,
}

impl Lulesh {
    /// Element `e`'s 8 nodes, in LULESH's corner order.
    #[inline]
    fn corners(&self, e: u64) -> [u64; 8] {
        let s = self.s;
        let (i, j, k) = (e % s, (e / s) % s, e / (s * s));
        let sn = s + 1;
        let pl = sn * sn;
        let n = (k * sn + j) * sn + i;
        [n, n + 1, n + sn + 1, n + sn, n + pl, n + pl + 1, n + pl + sn + 1, n + pl + sn]
    }

    #[inline]
    fn addr(&self, a: Arr, i: u64) -> u64 {
        let elem = if a == Nodelist { 4 } else { 8 };
        self.base[a as usize] + i * elem
    }

    /// The loop body of `phase` for item `i`.
    #[inline]
    fn body(&self, phase: usize, i: u64, out: &mut Vec<Access>) {
        let (on_elems, ops) = PHASES[phase];
        let nodes = if on_elems { self.corners(i) } else { [0; 8] };
        for op in ops {
            match *op {
                R(a) => out.push(Access::read(self.addr(a, i))),
                W(a) => out.push(Access::write(self.addr(a, i))),
                Nodes => out.extend((0..8).map(|c| Access::read(self.addr(Nodelist, i * 8 + c)))),
                Gather(a) => out.extend(nodes.iter().map(|&n| Access::read(self.addr(a, n)))),
                Scatter => {
                    for &n in &nodes {
                        for a in [Fx, Fy, Fz] {
                            out.push(Access::read(self.addr(a, n)));
                            out.push(Access::write(self.addr(a, n)));
                        }
                    }
                }
            }
        }
    }
}

impl Workload for Lulesh {
    fn threads(&self) -> usize {
        self.p.shared.threads
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        let s = self.s;
        let (nodes, elems) = ((s + 1).pow(3), s * s * s);
        for (k, name) in ARRAYS.iter().enumerate() {
            let len = match k {
                _ if k < NODAL => nodes * 8,
                22 => elems * 8 * 4,
                _ => elems * 8,
            };
            let opts = MapOptions {
                name: (*name).into(),
                page_size: self.p.shared.page_size,
                populate: self.p.shared.populate,
                thread: 0,
            };
            self.base[k] = mem.mmap(len, opts)?;
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
        out.reserve(BATCH + 128);
        let (mut phase, mut i) = (self.st[t].phase, self.st[t].i);
        let mut done = false;
        while out.len() - start < BATCH {
            let hi = if PHASES[phase].0 { self.st[t].elems.1 } else { self.st[t].nodes.1 };
            while i < hi && out.len() - start < BATCH {
                self.body(phase, i, out);
                i += 1;
            }
            if i >= hi {
                phase += 1;
                if phase == PHASES.len() {
                    phase = 0;
                    let st = &mut self.st[t];
                    st.iter += 1;
                    if self.p.iterations > 0 && st.iter >= self.p.iterations {
                        done = true;
                    }
                }
                i = if PHASES[phase].0 { self.st[t].elems.0 } else { self.st[t].nodes.0 };
                if done {
                    break;
                }
            }
        }
        let st = &mut self.st[t];
        st.phase = phase;
        st.i = i;
        st.issued += (out.len() - start) as u64;
        Ok(if done { Step::Done } else { Step::Continue })
    }

    fn discard(&mut self, _t: usize, unexecuted: &[Access]) {
        self.discarded += unexecuted.len() as u64;
    }

    fn report_stats(&self, out: &mut Stats) {
        out.set("workload.elements", self.s * self.s * self.s);
        out.set("workload.nodes", (self.s + 1).pow(3));
        out.set("workload.accesses", self.st.iter().map(|s| s.issued).sum::<u64>() - self.discarded);
        out.set("workload.iterations_completed", self.st.iter().map(|s| s.iter).min().unwrap_or(0));
    }
}

/// `LuleshParams` with the workload parameters every kind shares ([`WorkloadShared`]).
pub type LuleshConfig = crate::params::With<WorkloadShared, LuleshParams>;

impl crate::params::SharedDefaults<WorkloadShared> for LuleshParams {
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
    fn access_counts_per_step_match_the_formula() {
        for (size, threads, iters) in [(2u64, 1usize, 1u64), (3, 2, 2), (4, 3, 1)] {
            let p: LuleshConfig =
                toml::from_str(&format!("size = {size}\niterations = {iters}\nthreads = {threads}")).unwrap();
            let mut w = p.build(&ctx()).unwrap();
            let mut mem = MockSpace::new();
            w.setup(&mut mem).unwrap();
            let names: Vec<&str> = mem.maps.iter().map(|m| m.opts.name.as_str()).collect();
            assert_eq!(names, ARRAYS);
            let (e, n) = (size.pow(3), (size + 1).pow(3));
            let xs = mem.find("x").start;
            let nl = mem.find("nodelist");
            let (mut reads, mut writes) = (0u64, 0u64);
            let mut x_reads = vec![0u64; n as usize];
            let mut nodelist_reads = vec![0u64; (8 * e) as usize];
            let (nl_start, nl_len) = (nl.start, nl.len);
            drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, a| {
                if a.is_write() {
                    writes += 1;
                } else {
                    reads += 1;
                    if a.addr >= xs && a.addr < xs + n * 8 {
                        x_reads[((a.addr - xs) / 8) as usize] += 1;
                    }
                    if a.addr >= nl_start && a.addr < nl_start + nl_len {
                        nodelist_reads[((a.addr - nl_start) / 4) as usize] += 1;
                    }
                }
            });
            // Hand-computed from the phase table: 28 N + 324 E per step, 12 N + 56 E stores.
            assert_eq!(writes, iters * (12 * n + 56 * e), "size {size}");
            assert_eq!(reads, iters * (16 * n + 268 * e), "size {size}");
            // Every node index is loaded by the 4 gathering phases.
            assert!(nodelist_reads.iter().all(|&c| c == 4 * iters));
            // x[node] is gathered 4 times per element touching the node, and loaded once by
            // the position update: a corner node has 1 element, an interior one 8.
            let sn = size + 1;
            for k in 0..sn {
                for j in 0..sn {
                    for i in 0..sn {
                        let touching = |c: u64| if c == 0 || c == size { 1 } else { 2 };
                        let elems = touching(i) * touching(j) * touching(k);
                        let node = (k * sn + j) * sn + i;
                        assert_eq!(x_reads[node as usize], iters * (4 * elems + 1), "node {node}");
                    }
                }
            }
            let mut s = Stats::new();
            w.report_stats(&mut s);
            assert_eq!(s.get_u64("workload.accesses"), reads + writes);
            assert_eq!(s.get_u64("workload.iterations_completed"), iters);
        }
    }

    #[test]
    fn errors() {
        let c = ctx();
        let bad = |t: &str| toml::from_str::<LuleshConfig>(t).unwrap().build(&c).err().unwrap().to_string();
        assert!(bad("size = 0\niterations = 1").contains("workload.size"));
        assert!(bad("size = 1\nthreads = 2\niterations = 1").contains("workload.threads"));
        assert!(bad("size = 4").contains("workload.iterations"));
        assert!(bad("size = 3000000\niterations = 1").contains("workload.size"));
        assert!(toml::from_str::<LuleshConfig>("sizes = 3").is_err());
    }
}
