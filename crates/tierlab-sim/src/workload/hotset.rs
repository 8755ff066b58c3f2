//! `hotset`: a big heap with a hot set, the ground-truth workload for telemetry scoring.
//!
//! The heap (`heap_size`, one mapping named `heap`, bulk-populated by default) holds a hot set
//! of `hot_size` bytes split into `needles` equal, page-aligned pieces. The heap is cut into
//! `needles` equal slots and needle `j` sits at a seeded, page-aligned offset inside slot `j`
//! (so needles are spread evenly and pseudo-randomly and never overlap; with one needle the hot
//! set is contiguous at a seeded offset). A share `hot_fraction` of the accesses goes to the hot
//! set (uniform over its 64-byte lines), the rest is uniform over the whole heap (64-byte
//! lines; such an access may land in the hot set by chance, but is counted as cold).
//!
//! With `shift_every > 0` the needles move to new seeded positions at every multiple of that
//! period of simulated time (epoch `e = now / shift_every`). Positions are a hash of (seed,
//! epoch, needle), so nothing is stored per needle or per page: a 5 TiB heap with 2560 needles
//! costs O(1) memory. [`HotsetLayout::ranges_at`] gives the exact hot ranges at any time for
//! ground-truth scoring. A thread reads its clock once per batch, so an access issued just
//! before an epoch boundary may execute just after it (at most one batch of 16384 accesses).

use super::uniform::{check_fraction, fraction_threshold};
use super::{
    check_threads, Access, AddressSpace, BuildCtx, MapOptions, Ps, Step, Workload, WorkloadParams,
    WorkloadShared,
};
use crate::error::{Result, SimError};
use crate::rng::{derive, splitmix64, Rng};
use crate::stats::Stats;
use crate::units::{ByteSize, Duration};
use tierlab_core::param::params;

/// Parameters of the `hotset` workload.
#[params]
#[derive(Clone, Debug)]
pub struct HotsetParams {
    /// Bytes of the heap (one mapping named `heap`).
    #[param(default = ByteSize(64 << 30), setting)]
    pub heap_size: ByteSize,
    /// Bytes of the hot set (rounded up so every needle is whole pages).
    #[param(default = ByteSize(1 << 30), setting)]
    pub hot_size: ByteSize,
    /// Number of equal pieces of the hot set, one per equal slot of the heap at a seeded
    /// page-aligned offset; 1 = one contiguous hot range at a seeded offset.
    #[param(default = 1, range = "[0, 281474976710656]", unit = "needles", setting)]
    pub needles: u64,
    /// Share of accesses that go to the hot set; the rest are uniform over the whole heap.
    #[param(default = 1.0, range = "[0, 1]", unit = "fraction", setting)]
    pub hot_fraction: f64,
    /// Fraction of accesses that are loads, the rest stores.
    #[param(default = 1.0, range = "[0, 1]", unit = "fraction", setting)]
    pub read_fraction: f64,
    /// Move the needles to new seeded positions every this much simulated time; "0s" =
    /// never.
    #[param(default, setting)]
    pub shift_every: Duration,
    /// Accesses per thread before it is done; 0 = until the scenario's duration.
    #[param(default, range = "[0, 281474976710656]", unit = "accesses", setting)]
    pub accesses: u64,
}

const BATCH: usize = 16_384;
const LINE: u64 = 64;

/// Where the hot set is at any time (relative to the heap's start).
#[derive(Clone, Debug)]
pub struct HotsetLayout {
    /// Heap bytes.
    pub heap_size: u64,
    /// Number of needles.
    pub needles: u64,
    /// Bytes per needle (a multiple of `align`).
    pub needle_bytes: u64,
    /// Bytes per slot (a multiple of `align`, >= `needle_bytes`).
    pub slot: u64,
    /// Alignment of needles (the page size).
    pub align: u64,
    /// Period of the shifts ([`Ps::ZERO`]: never).
    pub shift_every: Ps,
    /// Placement choices per slot (`(slot - needle_bytes) / align + 1`).
    choices: u64,
    seed: u64,
}

impl HotsetLayout {
    /// Total hot bytes.
    pub fn hot_bytes(&self) -> u64 {
        self.needles * self.needle_bytes
    }

    /// The epoch in force at `time`.
    pub fn epoch_at(&self, time: Ps) -> u64 {
        time.ps().checked_div(self.shift_every.ps()).unwrap_or(0)
    }

    /// The placement key of an epoch.
    fn key(&self, epoch: u64) -> u64 {
        derive(self.seed, "workload.hotset.layout", epoch)
    }

    /// Offset of needle `j` from the heap's start, for placement key `key`.
    #[inline]
    fn needle_offset(&self, key: u64, j: u64) -> u64 {
        let mut h = key ^ j.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let r = splitmix64(&mut h);
        let pick = ((r as u128 * self.choices as u128) >> 64) as u64;
        j * self.slot + pick * self.align
    }

    /// The hot ranges `(start, length)` at `time`, ascending, for a heap starting at
    /// `heap_base`.
    pub fn ranges_at(&self, heap_base: u64, time: Ps) -> Vec<(u64, u64)> {
        let key = self.key(self.epoch_at(time));
        (0..self.needles).map(|j| (heap_base + self.needle_offset(key, j), self.needle_bytes)).collect()
    }
}

impl HotsetConfig {
    /// The layout these parameters give under `ctx.seed` (validating them).
    pub fn layout(&self, ctx: &BuildCtx) -> Result<HotsetLayout> {
        let f = &ctx.scenario_file;
        let align = self.shared.page_size.map_or(tierlab_core::PAGE_SIZE, |p| p.bytes());
        if self.needles == 0 {
            return Err(SimError::config(f, "workload.needles", "must be at least 1"));
        }
        if self.hot_size.0 == 0 {
            return Err(SimError::config(f, "workload.hot_size", "must be > 0"));
        }
        if self.heap_size.0 < align {
            return Err(SimError::config(
                f,
                "workload.heap_size",
                format!("must be at least one page ({align} bytes)"),
            ));
        }
        let needle_bytes = self.hot_size.0.div_ceil(self.needles).div_ceil(align) * align;
        let slot = self.heap_size.0 / self.needles / align * align;
        if slot < needle_bytes {
            return Err(SimError::config(
                f,
                "workload.hot_size",
                format!(
                    "{} needles of {} bytes (hot_size / needles rounded up to {align}-byte pages) do not fit in a heap of {} bytes",
                    self.needles, needle_bytes, self.heap_size.0
                ),
            ));
        }
        Ok(HotsetLayout {
            heap_size: self.heap_size.0,
            needles: self.needles,
            needle_bytes,
            slot,
            align,
            shift_every: self.shift_every.ps(),
            choices: (slot - needle_bytes) / align + 1,
            seed: ctx.seed,
        })
    }
}

impl WorkloadParams for HotsetConfig {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        check_threads("hotset", self.shared.threads, ctx)?;
        check_fraction(ctx, "hot_fraction", self.hot_fraction)?;
        check_fraction(ctx, "read_fraction", self.read_fraction)?;
        let layout = self.layout(ctx)?;
        if self.accesses == 0 && ctx.duration == Ps::ZERO {
            return Err(SimError::config(
                &ctx.scenario_file,
                "workload.accesses",
                "accesses = 0 runs until the scenario's duration, but the scenario sets none",
            ));
        }
        let st = (0..self.shared.threads)
            .map(|t| ThreadState {
                rng: Rng::derived(ctx.seed, "workload.hotset", t as u64),
                issued: 0,
                hot: 0,
                cold: 0,
                last: None,
                offsets: Vec::new(),
                cache_key: None,
            })
            .collect();
        Ok(Box::new(Hotset { p: self.clone(), layout, base: 0, st, max_epoch: 0 }))
    }
}

/// What is needed to regenerate the last batch's hot/cold choices in `discard`.
#[derive(Clone, Debug)]
struct LastBatch {
    rng: Rng,
    len: usize,
    key: u64,
}

struct ThreadState {
    rng: Rng,
    issued: u64,
    hot: u64,
    cold: u64,
    last: Option<LastBatch>,
    /// Needle offsets under placement key `cache_key` (when needles <= CACHE_NEEDLES).
    offsets: Vec<u64>,
    cache_key: Option<u64>,
}

/// Up to this many needles, each thread caches the needles' offsets of its current epoch.
const CACHE_NEEDLES: u64 = 1 << 16;

/// The `hotset` workload.
pub struct Hotset {
    p: HotsetConfig,
    layout: HotsetLayout,
    base: u64,
    st: Vec<ThreadState>,
    max_epoch: u64,
}

impl Hotset {
    /// The hot set's layout.
    pub fn layout(&self) -> &HotsetLayout {
        &self.layout
    }

    /// The hot ranges `(start, length)` at `time` (addresses valid after setup).
    pub fn hot_ranges_at(&self, time: Ps) -> Vec<(u64, u64)> {
        self.layout.ranges_at(self.base, time)
    }

    /// Generate `n` accesses with `rng` under placement key `key` (`offsets`: the needles'
    /// offsets under that key, if cached), calling `sink(addr, is_read, is_hot)` for each.
    #[inline(always)]
    fn generate(
        &self,
        rng: &mut Rng,
        n: usize,
        key: u64,
        offsets: Option<&[u64]>,
        mut sink: impl FnMut(u64, bool, bool),
    ) {
        let l = &self.layout;
        let hot_th = fraction_threshold(self.p.hot_fraction);
        let read_th = fraction_threshold(self.p.read_fraction);
        let (all_hot, no_hot) = (self.p.hot_fraction >= 1.0, self.p.hot_fraction <= 0.0);
        let (all_read, no_read) = (self.p.read_fraction >= 1.0, self.p.read_fraction <= 0.0);
        let lines_per_needle = l.needle_bytes / LINE;
        let heap_lines = l.heap_size / LINE;
        let base = self.base;
        let single = (l.needles == 1).then(|| l.needle_offset(key, 0));
        for _ in 0..n {
            let hot = all_hot || (!no_hot && rng.next_u64() < hot_th);
            let addr = if hot {
                let start = match (single, offsets) {
                    (Some(s), _) => s,
                    (None, Some(o)) => o[rng.below(l.needles) as usize],
                    (None, None) => l.needle_offset(key, rng.below(l.needles)),
                };
                base + start + rng.below(lines_per_needle) * LINE
            } else {
                base + rng.below(heap_lines) * LINE
            };
            let read = all_read || (!no_read && rng.next_u64() < read_th);
            sink(addr, read, hot);
        }
    }
}

impl Workload for Hotset {
    fn threads(&self) -> usize {
        self.p.shared.threads
    }

    /// The needles in place for most of the window (the epoch of its midpoint).
    fn declared_hot_ranges(&self, start: Ps, end: Ps) -> Option<Vec<(u64, u64)>> {
        let mid = start + Ps::from_ps(end.saturating_sub(start).ps() / 2);
        Some(self.hot_ranges_at(mid))
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        let opts = MapOptions {
            name: "heap".into(),
            page_size: self.p.shared.page_size,
            populate: self.p.shared.populate,
            thread: 0,
        };
        self.base = mem.mmap(self.layout.heap_size, opts)?;
        Ok(())
    }

    fn next_batch(
        &mut self,
        t: usize,
        now: Ps,
        out: &mut Vec<Access>,
        _mem: &mut dyn AddressSpace,
    ) -> Result<Step> {
        let mut n = BATCH;
        if self.p.accesses > 0 {
            n = n.min((self.p.accesses - self.st[t].issued) as usize);
        }
        let epoch = self.layout.epoch_at(now);
        self.max_epoch = self.max_epoch.max(epoch);
        let key = self.layout.key(epoch);
        let l = &self.layout;
        let cache = l.needles > 1 && l.needles <= CACHE_NEEDLES;
        if cache && self.st[t].cache_key != Some(key) {
            let offsets = (0..l.needles).map(|j| l.needle_offset(key, j)).collect();
            self.st[t].offsets = offsets;
            self.st[t].cache_key = Some(key);
        }
        let offsets = cache.then_some(&self.st[t].offsets[..]);
        let mut rng = self.st[t].rng.clone();
        let saved = rng.clone();
        let mut hot = 0u64;
        out.reserve(n);
        self.generate(&mut rng, n, key, offsets, |addr, read, is_hot| {
            hot += is_hot as u64;
            out.push(if read { Access::read(addr) } else { Access::write(addr) });
        });
        let s = &mut self.st[t];
        s.rng = rng;
        s.hot += hot;
        s.cold += n as u64 - hot;
        s.issued += n as u64;
        s.last = Some(LastBatch { rng: saved, len: n, key });
        if self.p.accesses > 0 && s.issued >= self.p.accesses {
            Ok(Step::Done)
        } else {
            Ok(Step::Continue)
        }
    }

    fn discard(&mut self, t: usize, unexecuted: &[Access]) {
        let Some(last) = self.st[t].last.take() else {
            return;
        };
        let tail = unexecuted.len().min(last.len);
        let first = last.len - tail;
        let mut rng = last.rng;
        let (mut i, mut hot) = (0usize, 0u64);
        let s = &self.st[t];
        let offsets = (s.cache_key == Some(last.key)).then_some(&s.offsets[..]);
        self.generate(&mut rng, last.len, last.key, offsets, |_, _, is_hot| {
            if i >= first {
                hot += is_hot as u64;
            }
            i += 1;
        });
        let s = &mut self.st[t];
        s.hot -= hot;
        s.cold -= tail as u64 - hot;
    }

    fn report_stats(&self, out: &mut Stats) {
        out.set("workload.hot_bytes", self.layout.hot_bytes());
        out.set("workload.needles", self.layout.needles);
        out.set("workload.needle_bytes", self.layout.needle_bytes);
        out.set("workload.hot_accesses", self.st.iter().map(|s| s.hot).sum::<u64>());
        out.set("workload.cold_accesses", self.st.iter().map(|s| s.cold).sum::<u64>());
        out.set("workload.epochs", self.max_epoch + 1);
    }
}

/// `HotsetParams` with the workload parameters every kind shares ([`WorkloadShared`]).
pub type HotsetConfig = crate::params::With<WorkloadShared, HotsetParams>;

impl crate::params::SharedDefaults<WorkloadShared> for HotsetParams {
    fn shared_defaults() -> WorkloadShared {
        WorkloadShared { populate: true, ..WorkloadShared::default() }
    }
}
#[cfg(test)]
mod tests {
    use super::super::masim::testing::*;
    use super::*;

    fn ctx() -> BuildCtx {
        BuildCtx {
            seed: 17,
            scenario_file: "s.toml".into(),
            cores: 4,
            duration: Ps::ZERO,
            ..Default::default()
        }
    }

    fn params(t: &str) -> HotsetConfig {
        toml::from_str(t).unwrap()
    }

    fn inside(ranges: &[(u64, u64)], a: u64) -> bool {
        ranges.iter().any(|&(s, l)| a >= s && a < s + l)
    }

    #[test]
    fn layout_at_five_tib_is_cheap_and_sound() {
        let p = params("heap_size = \"5TiB\"\nhot_size = \"10GB\"\nneedles = 2560\naccesses = 1");
        let l = p.layout(&ctx()).unwrap();
        let r = l.ranges_at(0, Ps::ZERO);
        assert_eq!(r.len(), 2560);
        assert!(l.hot_bytes() >= 10_000_000_000 && l.hot_bytes() < 10_000_000_000 + 2560 * 4096);
        for (i, &(s, len)) in r.iter().enumerate() {
            assert_eq!(s & 4095, 0);
            assert_eq!(len, l.needle_bytes);
            assert!(s + len <= 5 << 40);
            if i > 0 {
                assert!(r[i - 1].0 + r[i - 1].1 <= s, "needles overlap or are out of order");
            }
        }
        // Not all at the start of their slot.
        assert!(r.iter().enumerate().filter(|(j, &(s, _))| s == *j as u64 * l.slot).count() < 10);
        // A single needle is contiguous at a seeded offset.
        let one = params("heap_size = \"1GiB\"\nhot_size = \"64MiB\"\naccesses = 1").layout(&ctx()).unwrap();
        let r1 = one.ranges_at(0, Ps::ZERO);
        assert_eq!(r1.len(), 1);
        assert_eq!(r1[0].1, 64 << 20);
        let other = params("heap_size = \"1GiB\"\nhot_size = \"64MiB\"\naccesses = 1")
            .layout(&BuildCtx { seed: 18, ..ctx() })
            .unwrap();
        assert_ne!(other.ranges_at(0, Ps::ZERO), r1);
        // 2 MiB pages align needles to 2 MiB.
        let huge = params(
            "heap_size = \"1GiB\"\nhot_size = \"10MiB\"\nneedles = 4\npage_size = \"2MiB\"\naccesses = 1",
        )
        .layout(&ctx())
        .unwrap();
        assert!(huge.ranges_at(0, Ps::ZERO).iter().all(|&(s, l)| s & ((2 << 20) - 1) == 0 && l == 4 << 20));
    }

    #[test]
    fn all_hot_accesses_hit_the_hot_set() {
        let p = params("heap_size = \"256MiB\"\nhot_size = \"4MiB\"\nneedles = 16\naccesses = 50000\nread_fraction = 0.5");
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        assert!(mem.find("heap").opts.populate);
        let base = mem.find("heap").start;
        let ranges = p.layout(&ctx()).unwrap().ranges_at(base, Ps::ZERO);
        let mut per_needle = vec![0u32; 16];
        let mut writes = 0;
        drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, a| {
            assert_eq!(a.addr & 63, 0);
            let j = ranges.iter().position(|&(s, l)| a.addr >= s && a.addr < s + l).expect("hot");
            per_needle[j] += 1;
            writes += a.is_write() as u32;
        });
        assert!(per_needle.iter().all(|&c| (2500..3750).contains(&c)), "{per_needle:?}");
        assert!((writes as f64 / 50_000.0 - 0.5).abs() < 0.02);
        let mut s = Stats::new();
        w.report_stats(&mut s);
        assert_eq!(s.get_u64("workload.hot_accesses"), 50_000);
        assert_eq!(s.get_u64("workload.cold_accesses"), 0);
        assert_eq!(s.get_u64("workload.hot_bytes"), 4 << 20);
    }

    #[test]
    fn hot_fraction_and_discard() {
        let p =
            params("heap_size = \"1GiB\"\nhot_size = \"1MiB\"\nneedles = 4\nhot_fraction = 0.8\nthreads = 2");
        let c = BuildCtx { duration: Ps::NS, ..ctx() };
        let mut w = p.build(&c).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let base = mem.find("heap").start;
        let ranges = p.layout(&c).unwrap().ranges_at(base, Ps::ZERO);
        let (mut n, mut in_hot) = (0u64, 0u64);
        drive(w.as_mut(), &mut mem, Ps::NS, Ps::from_ns(100_001), |_, _, a| {
            assert!(a.addr >= base && a.addr < base + (1 << 30));
            n += 1;
            in_hot += inside(&ranges, a.addr) as u64;
        });
        assert_eq!(n, 2 * 100_001);
        let mut s = Stats::new();
        w.report_stats(&mut s);
        let (hot, cold) = (s.get_u64("workload.hot_accesses"), s.get_u64("workload.cold_accesses"));
        assert_eq!(hot + cold, n);
        assert!((hot as f64 / n as f64 - 0.8).abs() < 0.01);
        // Cold accesses land in the hot set only by chance (1 MiB of 1 GiB).
        assert!(in_hot >= hot && in_hot - hot < 200, "{in_hot} {hot}");

        // Discarding a whole batch takes back exactly what it counted.
        let mut w = p.build(&c).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let mut out = Vec::new();
        w.next_batch(0, Ps::ZERO, &mut out, &mut mem).unwrap();
        w.discard(0, &out);
        let mut s = Stats::new();
        w.report_stats(&mut s);
        assert_eq!((s.get_u64("workload.hot_accesses"), s.get_u64("workload.cold_accesses")), (0, 0));
    }

    #[test]
    fn shifts_move_the_hot_set() {
        let p = params(
            "heap_size = \"1GiB\"\nhot_size = \"8MiB\"\nneedles = 8\nshift_every = \"1ms\"\naccesses = 65536",
        );
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let base = mem.find("heap").start;
        let l = p.layout(&ctx()).unwrap();
        let (r0, r1) = (l.ranges_at(base, Ps::ZERO), l.ranges_at(base, Ps::from_ns(1_500_000)));
        assert_ne!(r0, r1);
        assert_eq!(l.ranges_at(base, Ps::from_ns(999_999)), r0);
        let mut out = Vec::new();
        w.next_batch(0, Ps::ZERO, &mut out, &mut mem).unwrap();
        assert!(out.iter().all(|a| inside(&r0, a.addr)));
        out.clear();
        w.next_batch(0, Ps::from_ns(1_200_000), &mut out, &mut mem).unwrap();
        assert!(out.iter().all(|a| inside(&r1, a.addr)));
        let mut s = Stats::new();
        w.report_stats(&mut s);
        assert_eq!(s.get_u64("workload.epochs"), 2);
    }

    #[test]
    fn errors() {
        let c = ctx();
        let bad = |t: &str| params(t).build(&c).err().unwrap().to_string();
        assert!(bad("heap_size = \"1GiB\"\nhot_size = \"2GiB\"\naccesses = 1").contains("workload.hot_size"));
        assert!(bad("needles = 0\naccesses = 1").contains("workload.needles"));
        assert!(bad("hot_fraction = 2.0\naccesses = 1").contains("workload.hot_fraction"));
        assert!(bad("heap_size = \"1GiB\"").contains("workload.accesses"));
        let s = toml::to_string(&params("accesses = 1")).unwrap();
        assert!(s.contains("populate = true") && s.contains("shift_every = \"0s\""), "{s}");
    }
}
