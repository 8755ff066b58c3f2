//! `pointer-chase`: a linked list threaded through the whole footprint in one random cycle.
//!
//! The footprint is split into `footprint / node_size` nodes. The list visits the nodes in the
//! order of a seeded permutation `perm` (step `i` loads node `perm(i mod n)`), so following
//! the `next` pointers walks one cycle over every node; each step is one dependent load. The
//! permutation is computed on the fly without O(n) memory (see [`Permutation`]), so a 1 TiB
//! footprint costs nothing to set up. Thread `t` of `T` starts at step `t * n / T` of the same
//! cycle.

use super::{
    check_threads, Access, AddressSpace, BuildCtx, MapOptions, Ps, Step, Workload, WorkloadParams,
    WorkloadShared,
};
use crate::error::{Result, SimError};
use crate::rng::{derive, splitmix64};
use crate::stats::Stats;
use crate::units::ByteSize;
use tierlab_core::param::params;

/// A seeded bijection of `[0, n)` in O(1) memory and a few ns per evaluation.
///
/// A keyed mixing function over the next power of two `2^k >= n` (rounds of multiply by an
/// odd constant, add, mask to `k` bits, xor-shift: each step is a bijection of `[0, 2^k)`) is
/// restricted to `[0, n)` by cycle walking (re-apply while the result is `>= n`), which keeps
/// it a bijection; on average fewer than two walks are needed.
#[derive(Clone, Debug)]
pub struct Permutation {
    n: u64,
    mask: u64,
    shift: u32,
    mul: [u64; ROUNDS],
    add: [u64; ROUNDS],
}

const ROUNDS: usize = 4;

impl Permutation {
    /// A permutation of `[0, n)` (`n >= 1`) chosen by `seed`.
    pub fn new(n: u64, seed: u64) -> Self {
        let n = n.max(1);
        let bits = 64 - (n - 1).leading_zeros();
        let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let mut s = seed;
        let mut mul = [0u64; ROUNDS];
        let mut add = [0u64; ROUNDS];
        for r in 0..ROUNDS {
            mul[r] = splitmix64(&mut s) | 1;
            add[r] = splitmix64(&mut s);
        }
        Permutation { n, mask, shift: (bits.div_ceil(2)).max(1), mul, add }
    }

    /// Size of the permuted range.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Always false (`n >= 1`).
    pub fn is_empty(&self) -> bool {
        false
    }

    #[inline(always)]
    fn mix(&self, mut x: u64) -> u64 {
        for r in 0..ROUNDS {
            x = x.wrapping_mul(self.mul[r]).wrapping_add(self.add[r]) & self.mask;
            x ^= x >> self.shift;
        }
        x
    }

    /// The image of `i` (`i < n`).
    #[inline]
    pub fn apply(&self, i: u64) -> u64 {
        let mut x = self.mix(i);
        while x >= self.n {
            x = self.mix(x);
        }
        x
    }
}

/// Parameters of the `pointer-chase` workload.
#[params]
#[derive(Clone, Debug)]
pub struct PointerChaseParams {
    /// Bytes covered by the list (rounded down to whole nodes).
    #[param(default = ByteSize(1 << 30), setting)]
    pub footprint: ByteSize,
    /// Bytes per node; each step loads the first byte of a node. 64 is one cache line, as in
    /// lmbench-style latency chasers.
    #[param(default = ByteSize(64), setting)]
    pub node_size: ByteSize,
    /// Steps per thread before it is done; 0 = until the scenario's duration.
    #[param(default, range = "[0, 281474976710656]", unit = "steps", setting)]
    pub steps: u64,
}

const BATCH: u64 = 16_384;

impl WorkloadParams for PointerChaseConfig {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        let f = &ctx.scenario_file;
        check_threads("pointer-chase", self.shared.threads, ctx)?;
        if self.node_size.0 == 0 {
            return Err(SimError::config(f, "workload.node_size", "must be at least 1 byte"));
        }
        let nodes = self.footprint.0 / self.node_size.0;
        if nodes == 0 {
            return Err(SimError::config(
                f,
                "workload.footprint",
                format!("{} bytes hold no node of {} bytes", self.footprint.0, self.node_size.0),
            ));
        }
        if self.steps == 0 && ctx.duration == Ps::ZERO {
            return Err(SimError::config(
                f,
                "workload.steps",
                "steps = 0 runs until the scenario's duration, but the scenario sets none",
            ));
        }
        let perm = Permutation::new(nodes, derive(ctx.seed, "workload.pointer-chase.cycle", 0));
        let pos = (0..self.shared.threads as u64)
            .map(|t| ((t as u128 * nodes as u128) / self.shared.threads as u128) as u64)
            .collect();
        Ok(Box::new(PointerChase {
            p: self.clone(),
            perm,
            nodes,
            base: 0,
            pos,
            done_steps: vec![0; self.shared.threads],
            discarded: vec![0; self.shared.threads],
        }))
    }
}

/// The `pointer-chase` workload.
pub struct PointerChase {
    p: PointerChaseConfig,
    perm: Permutation,
    nodes: u64,
    base: u64,
    pos: Vec<u64>,
    done_steps: Vec<u64>,
    discarded: Vec<u64>,
}

impl PointerChase {
    /// The node loaded at step `i` of the cycle.
    pub fn node_at(&self, i: u64) -> u64 {
        self.perm.apply(i % self.nodes)
    }
}

impl Workload for PointerChase {
    fn threads(&self) -> usize {
        self.p.shared.threads
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        let opts = MapOptions {
            name: "list".into(),
            page_size: self.p.shared.page_size,
            populate: self.p.shared.populate,
            thread: 0,
        };
        self.base = mem.mmap(self.nodes * self.p.node_size.0, opts)?;
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
        if self.p.steps > 0 {
            n = n.min(self.p.steps - self.done_steps[t]);
        }
        let (perm, nodes, base, size) = (&self.perm, self.nodes, self.base, self.p.node_size.0);
        let mut pos = self.pos[t];
        out.extend((0..n).map(|_| {
            let a = base + perm.apply(pos) * size;
            pos += 1;
            if pos == nodes {
                pos = 0;
            }
            Access::read(a)
        }));
        self.pos[t] = pos;
        self.done_steps[t] += n;
        if self.p.steps > 0 && self.done_steps[t] >= self.p.steps {
            Ok(Step::Done)
        } else {
            Ok(Step::Continue)
        }
    }

    fn discard(&mut self, t: usize, unexecuted: &[Access]) {
        self.discarded[t] += unexecuted.len() as u64;
    }

    fn report_stats(&self, out: &mut Stats) {
        let steps: u64 = self.done_steps.iter().sum::<u64>() - self.discarded.iter().sum::<u64>();
        out.set("workload.nodes", self.nodes);
        out.set("workload.steps", steps);
    }
}

/// `PointerChaseParams` with the workload parameters every kind shares ([`WorkloadShared`]).
pub type PointerChaseConfig = crate::params::With<WorkloadShared, PointerChaseParams>;

impl crate::params::SharedDefaults<WorkloadShared> for PointerChaseParams {
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
            seed: 9,
            scenario_file: "s.toml".into(),
            cores: 4,
            duration: Ps::from_ns(1_000_000),
            ..Default::default()
        }
    }

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u64, 2, 3, 5, 64, 100, 1000, 4097] {
            for seed in 0..3 {
                let p = Permutation::new(n, seed);
                let mut seen = vec![false; n as usize];
                for i in 0..n {
                    let y = p.apply(i);
                    assert!(y < n && !seen[y as usize], "n={n} seed={seed}");
                    seen[y as usize] = true;
                }
            }
        }
        // Huge n: images stay in range.
        let p = Permutation::new(1_000_000_000_000, 1);
        assert!((0..1000).all(|i| p.apply(i) < 1_000_000_000_000));
        // Not the identity.
        let p = Permutation::new(1000, 5);
        assert!((0..1000).filter(|&i| p.apply(i) == i).count() < 20);
    }

    #[test]
    fn visits_every_node_once_per_cycle() {
        let p: PointerChaseConfig = toml::from_str("footprint = 64000\nnode_size = 64\nthreads = 3").unwrap();
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let base = mem.find("list").start;
        let mut visits: Vec<Vec<u64>> = vec![Vec::new(); 3];
        let mut out = Vec::new();
        for (t, v) in visits.iter_mut().enumerate() {
            while v.len() < 3000 {
                out.clear();
                w.next_batch(t, Ps::ZERO, &mut out, &mut mem).unwrap();
                v.extend(out.iter().map(|a| {
                    assert!(!a.is_write());
                    (a.addr - base) / 64
                }));
            }
        }
        for (t, v) in visits.iter().enumerate() {
            let mut seen = vec![0u32; 1000];
            for &node in &v[..1000] {
                seen[node as usize] += 1;
            }
            assert!(seen.iter().all(|&c| c == 1), "thread {t}");
            // The cycle repeats.
            assert_eq!(v[..1000], v[1000..2000]);
        }
        // Threads walk the same cycle from different points.
        assert_ne!(visits[0][0], visits[1][0]);
        let start1 = visits[0].iter().position(|&x| x == visits[1][0]).unwrap();
        assert_eq!(start1, 333);
        assert_eq!(visits[0][start1..start1 + 100], visits[1][..100]);
    }

    #[test]
    fn steps_limit_and_errors() {
        let p: PointerChaseConfig = toml::from_str("footprint = \"1MiB\"\nsteps = 20000").unwrap();
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let mut addrs = Vec::new();
        drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, a| addrs.push(a.addr));
        assert_eq!(addrs.len(), 20000);
        assert!(addrs.iter().all(|&a| mem.contains(a)));
        let bad: PointerChaseConfig = toml::from_str("footprint = 10\nnode_size = 64").unwrap();
        assert!(bad.build(&ctx()).err().unwrap().to_string().contains("workload.footprint"));
        let forever: PointerChaseConfig = toml::from_str("footprint = \"1MiB\"").unwrap();
        let c = BuildCtx { duration: Ps::ZERO, ..ctx() };
        assert!(forever.build(&c).err().unwrap().to_string().contains("workload.steps"));
    }
}
