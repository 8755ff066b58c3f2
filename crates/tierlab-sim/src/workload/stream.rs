//! `stream`: the STREAM benchmark's kernels (McCalpin) over three arrays `a`, `b`, `c`.
//!
//! | kernel | per element `i`              | accesses                     |
//! |--------|------------------------------|------------------------------|
//! | copy   | `c[i] = a[i]`                | read a, write c              |
//! | scale  | `b[i] = s * c[i]`            | read c, write b              |
//! | add    | `c[i] = a[i] + b[i]`         | read a, read b, write c      |
//! | triad  | `a[i] = b[i] + s * c[i]`     | read b, read c, write a      |
//! | read   | `sum += a[i]`                | read a                       |
//!
//! Only the arrays the kernel touches are mapped. Threads split the index range into
//! contiguous blocks (as STREAM's OpenMP static schedule does); one pass of a thread over its
//! block is one iteration.

use super::{
    check_threads, Access, AddressSpace, BuildCtx, MapOptions, Ps, Step, Workload, WorkloadParams,
    WorkloadShared,
};
use crate::error::{Result, SimError};
use crate::stats::Stats;
use crate::units::ByteSize;
use serde::{Deserialize, Serialize};
use tierlab_core::param::params;

/// A STREAM kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    /// `c[i] = a[i]`.
    Copy,
    /// `b[i] = s * c[i]`.
    Scale,
    /// `c[i] = a[i] + b[i]`.
    Add,
    /// `a[i] = b[i] + s * c[i]`.
    #[default]
    Triad,
    /// `sum += a[i]` (read-only bandwidth).
    Read,
}

impl Kernel {
    /// Arrays read, in access order, and the array written (indices 0 = a, 1 = b, 2 = c).
    fn arrays(self) -> (&'static [usize], Option<usize>) {
        match self {
            Kernel::Copy => (&[0], Some(2)),
            Kernel::Scale => (&[2], Some(1)),
            Kernel::Add => (&[0, 1], Some(2)),
            Kernel::Triad => (&[1, 2], Some(0)),
            Kernel::Read => (&[0], None),
        }
    }
}

tierlab_core::choice_param!(Kernel);

/// Parameters of the `stream` workload.
#[params]
#[derive(Clone, Debug)]
pub struct StreamParams {
    /// `"copy"`, `"scale"`, `"add"`, `"triad"` or `"read"`.
    #[param(default)]
    pub kernel: Kernel,
    /// Bytes per array (rounded down to whole elements), well beyond any cache, per STREAM's
    /// sizing rule.
    #[param(default = ByteSize(64 << 20), setting)]
    pub array_size: ByteSize,
    /// Bytes per element (8: STREAM's `double`).
    #[param(default = ByteSize(8), setting)]
    pub element_size: ByteSize,
    /// Passes over the arrays per thread before it is done; 0 = until the scenario's
    /// duration.
    #[param(default, range = "[0, 281474976710656]", unit = "iterations", setting)]
    pub iterations: u64,
}

/// Elements per batch.
const BATCH_ELEMS: u64 = 8192;
const NAMES: [&str; 3] = ["a", "b", "c"];

impl WorkloadParams for StreamConfig {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        let f = &ctx.scenario_file;
        check_threads("stream", self.shared.threads, ctx)?;
        if self.element_size.0 == 0 {
            return Err(SimError::config(f, "workload.element_size", "must be at least 1 byte"));
        }
        let n = self.array_size.0 / self.element_size.0;
        if n < self.shared.threads as u64 {
            return Err(SimError::config(
                f,
                "workload.array_size",
                format!("{n} elements cannot be split among {} threads", self.shared.threads),
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
        let range = (0..t).map(|i| {
            ((n as u128 * i as u128 / t as u128) as u64, (n as u128 * (i + 1) as u128 / t as u128) as u64)
        });
        let threads = range.map(|(lo, hi)| ThreadState { lo, hi, i: lo, iter: 0, executed: 0 }).collect();
        Ok(Box::new(Stream { p: self.clone(), n, base: [0; 3], st: threads }))
    }
}

struct ThreadState {
    lo: u64,
    hi: u64,
    i: u64,
    iter: u64,
    executed: u64,
}

/// The `stream` workload.
pub struct Stream {
    p: StreamConfig,
    n: u64,
    base: [u64; 3],
    st: Vec<ThreadState>,
}

impl Workload for Stream {
    fn threads(&self) -> usize {
        self.p.shared.threads
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        let (reads, write) = self.p.kernel.arrays();
        for (a, name) in NAMES.iter().enumerate() {
            if reads.contains(&a) || write == Some(a) {
                let opts = MapOptions {
                    name: (*name).into(),
                    page_size: self.p.shared.page_size,
                    populate: self.p.shared.populate,
                    thread: 0,
                };
                self.base[a] = mem.mmap(self.n * self.p.element_size.0, opts)?;
            }
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
        let es = self.p.element_size.0;
        let s = &mut self.st[t];
        let end = s.hi.min(s.i + BATCH_ELEMS);
        let (lo, hi) = (s.i, end);
        let b = self.base;
        match self.p.kernel {
            Kernel::Read => out.extend((lo..hi).map(|i| Access::read(b[0] + i * es))),
            k => {
                let (reads, write) = k.arrays();
                let w = b[write.unwrap_or(0)];
                match *reads {
                    [r] => {
                        let r = b[r];
                        out.reserve(2 * (hi - lo) as usize);
                        for i in lo..hi {
                            let o = i * es;
                            out.push(Access::read(r + o));
                            out.push(Access::write(w + o));
                        }
                    }
                    [r0, r1] => {
                        let (r0, r1) = (b[r0], b[r1]);
                        out.reserve(3 * (hi - lo) as usize);
                        for i in lo..hi {
                            let o = i * es;
                            out.push(Access::read(r0 + o));
                            out.push(Access::read(r1 + o));
                            out.push(Access::write(w + o));
                        }
                    }
                    _ => unreachable!("every STREAM kernel reads one or two arrays"),
                }
            }
        }
        s.executed += hi - lo;
        s.i = end;
        if s.i >= s.hi {
            s.i = s.lo;
            s.iter += 1;
            if self.p.iterations > 0 && s.iter >= self.p.iterations {
                return Ok(Step::Done);
            }
        }
        Ok(Step::Continue)
    }

    fn discard(&mut self, t: usize, unexecuted: &[Access]) {
        let per = self.p.kernel.arrays().0.len() as u64 + self.p.kernel.arrays().1.is_some() as u64;
        self.st[t].executed -= (unexecuted.len() as u64).div_ceil(per);
    }

    fn report_stats(&self, out: &mut Stats) {
        let elems: u64 = self.st.iter().map(|s| s.executed).sum();
        out.set("workload.elements", elems);
        out.set("workload.passes", elems as f64 / self.n as f64);
    }
}

/// `StreamParams` with the workload parameters every kind shares ([`WorkloadShared`]).
pub type StreamConfig = crate::params::With<WorkloadShared, StreamParams>;

impl crate::params::SharedDefaults<WorkloadShared> for StreamParams {
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
    fn triad_pattern_and_partition() {
        let p: StreamConfig = toml::from_str("array_size = 80000\niterations = 2\nthreads = 3").unwrap();
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let (a, b, c) = (mem.find("a").start, mem.find("b").start, mem.find("c").start);
        let n = 10_000u64;
        let mut writes = vec![0u32; n as usize];
        let mut per_thread: Vec<Vec<Access>> = vec![Vec::new(); 3];
        drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |t, _, acc| per_thread[t].push(*acc));
        for v in &per_thread {
            for triple in v.chunks(3) {
                let i = (triple[2].addr - a) / 8;
                assert_eq!(triple[0], Access::read(b + i * 8));
                assert_eq!(triple[1], Access::read(c + i * 8));
                assert_eq!(triple[2], Access::write(a + i * 8));
                writes[i as usize] += 1;
            }
        }
        assert!(writes.iter().all(|&x| x == 2));
        // Contiguous blocks: thread 1 starts at n/3.
        assert_eq!((per_thread[1][2].addr - a) / 8, n / 3);
    }

    #[test]
    fn kernels_map_only_their_arrays() {
        for (k, names, per) in [("copy", "ac", 2), ("scale", "bc", 2), ("add", "abc", 3), ("read", "a", 1)] {
            let p: StreamConfig =
                toml::from_str(&format!("kernel = \"{k}\"\narray_size = 8192\niterations = 1")).unwrap();
            let mut w = p.build(&ctx()).unwrap();
            let mut mem = MockSpace::new();
            w.setup(&mut mem).unwrap();
            let got: String = mem.maps.iter().map(|m| m.opts.name.clone()).collect();
            assert_eq!(got, names);
            let mut addrs = Vec::new();
            drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, acc| addrs.push(acc.addr));
            assert!(addrs.iter().all(|&a| mem.contains(a)));
            assert_eq!(addrs.len(), 1024 * per, "{k}");
        }
    }

    #[test]
    fn errors() {
        let c = ctx();
        let bad = |t: &str| toml::from_str::<StreamConfig>(t).unwrap().build(&c).err().unwrap().to_string();
        assert!(bad("array_size = 8\nthreads = 2\niterations = 1").contains("workload.array_size"));
        assert!(bad("element_size = 0\niterations = 1").contains("workload.element_size"));
        assert!(bad("kernel = \"triad\"").contains("workload.iterations"));
        assert!(toml::from_str::<StreamConfig>("kernel = \"mul\"").is_err());
    }
}
