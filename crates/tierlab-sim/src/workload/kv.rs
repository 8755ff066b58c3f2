//! `kv`: a key-value store (Redis-like) under YCSB-like requests.
//!
//! # Model
//! `keys` records live in a **value slab** in insertion order (key 0 first), each
//! `record_size = 64 + value_size` bytes rounded up to 64 (one line of header: the hash
//! entry and the key, then the value), as an allocator fills a slab during YCSB's load
//! phase. A **hash index** of `2^ceil(log2(keys))` 8-byte buckets (load factor <= 1) maps a
//! key to its record; the bucket of key `k` is a seeded hash of `k`. A request picks a key
//! from `distribution` and touches the key's bucket (one load), the record's header line
//! (one load), then every line of the value: loads for a read (YCSB `read`), stores for an
//! update (YCSB `update`, `1 - read_fraction` of the requests).
//!
//! Distributions (YCSB's generators): `zipfian` (ZipfianGenerator over insertion order:
//! key 0 is the most popular; theta 0.99, YCSB's `zipfian` constant), `scrambled-zipfian`
//! (ScrambledZipfianGenerator: the same popularity at hashed positions — YCSB's default
//! for `requestdistribution=zipfian`; here a seeded bijection), `latest`
//! (SkewedLatestGenerator: the most recently inserted key is the most popular), `uniform`.
//!
//! Each thread is one server thread (Redis serves requests one at a time) with `clients`
//! closed-loop YCSB clients that resubmit as soon as they get an answer (no think time).
//! A request's **service time** is the simulated time its thread spent from its first access
//! to the start of the next request: the modeled cost of its accesses plus whatever the
//! machine charged that core meanwhile (PEBS interrupts, TLB shootdowns, hint faults,
//! promotions in fault context). Requests queue FIFO, so with `clients` outstanding
//! requests a request's **latency** is its own service time plus those of the `clients - 1`
//! requests served before it (fewer while the queue fills at start). Throughput is requests
//! per simulated second. Latency
//! percentiles come from a log-linear histogram (64 sub-buckets per power of two, <= 1.6%
//! relative error), per window (`kv.*` time-series columns) and over the run
//! (`workload.kv.*` stats).
//!
//! Placement: `node = N` bulk-populates both mappings on memory node N (as `mbind` and a
//! prefault would; e.g. the slow tier, where Telescope's Redis data was initialized);
//! without it, `populate = true` places pages by the machine's placement rule, and
//! `populate = false` faults them in on first touch.

use super::{
    check_threads, Access, AddressSpace, BuildCtx, MapOptions, Ps, Step, Workload, WorkloadParams,
    WorkloadShared,
};
use crate::error::{Result, SimError};
use crate::rng::{derive, splitmix64, Rng};
use crate::stats::Stats;
use crate::units::ByteSize;
use crate::workload::pointer_chase::Permutation;
use crate::workload::uniform::{check_fraction, fraction_threshold};
use crate::workload::zipf::ZipfSampler;
use serde::{Deserialize, Serialize};
use tierlab_core::param::params;

/// YCSB request distributions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Distribution {
    /// Zipfian over insertion order (key 0 most popular).
    Zipfian,
    /// Zipfian popularity at hashed key positions.
    ScrambledZipfian,
    /// Zipfian over recency (the last inserted key most popular).
    Latest,
    /// Every key equally likely.
    Uniform,
}

tierlab_core::choice_param!(Distribution);

/// Parameters of the `kv` workload.
#[params]
#[derive(Clone, Debug)]
pub struct KvParams {
    /// Number of keys (records).
    #[param(default = 1_000_000, range = "[0, 281474976710656]", unit = "keys", setting)]
    pub keys: u64,
    /// Bytes per value (1 KiB: YCSB's 10 fields of 100 bytes).
    #[param(default = ByteSize(1024), setting)]
    pub value_size: ByteSize,
    /// Request distribution (`scrambled-zipfian` is YCSB's `zipfian`).
    #[param(default = Distribution::ScrambledZipfian)]
    pub distribution: Distribution,
    /// Zipf exponent (0.99: YCSB's).
    #[param(default = 0.99, range = "[0, 100]", setting)]
    pub theta: f64,
    /// Fraction of requests that are reads, the rest updates (0.95: YCSB workload B).
    #[param(default = 0.95, range = "[0, 1]", unit = "fraction", setting)]
    pub read_fraction: f64,
    /// Requests per thread; 0 = until the scenario's duration.
    #[param(default, range = "[0, 281474976710656]", unit = "requests", setting)]
    pub requests: u64,
    /// Closed-loop clients per server thread (outstanding requests).
    #[param(default = 1, range = "[0, 281474976710656]", unit = "clients", setting)]
    pub clients: usize,
    /// Populate on this memory node (e.g. the slow tier); absent = by the placement rule.
    #[param(default, range = "[0, 255]", unit = "node number", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<u8>,
}

/// Log-linear latency histogram (ns).
#[derive(Clone, Debug)]
pub struct LatencyHist {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
}

const SUB: u64 = 64;

impl Default for LatencyHist {
    fn default() -> Self {
        LatencyHist { counts: vec![0; (SUB * 60) as usize], n: 0, sum: 0 }
    }
}

impl LatencyHist {
    fn index(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let msb = 63 - v.leading_zeros() as u64;
        let shift = msb - 6;
        (SUB + shift * SUB + ((v >> shift) - SUB)) as usize
    }

    fn value(i: usize) -> f64 {
        let i = i as u64;
        if i < SUB {
            return i as f64;
        }
        let shift = (i - SUB) / SUB;
        let top = (i - SUB) % SUB + SUB;
        let low = top << shift;
        low as f64 + ((1u64 << shift) as f64 - 1.0) / 2.0
    }

    /// Record one latency (ns).
    pub fn add(&mut self, v: u64) {
        let i = Self::index(v).min(self.counts.len() - 1);
        self.counts[i] += 1;
        self.n += 1;
        self.sum += v as u128;
    }

    /// Values recorded.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Mean, ns (NaN when empty).
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            f64::NAN
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    /// The `q`-quantile (0 < q <= 1), ns, as its bucket's midpoint (NaN when empty).
    pub fn quantile(&self, q: f64) -> f64 {
        if self.n == 0 {
            return f64::NAN;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut acc = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= rank {
                return Self::value(i);
            }
        }
        Self::value(self.counts.len() - 1)
    }

    fn clear(&mut self) {
        if self.n > 0 {
            self.counts.iter_mut().for_each(|c| *c = 0);
            self.n = 0;
            self.sum = 0;
        }
    }
}

impl WorkloadParams for KvConfig {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        let f = &ctx.scenario_file;
        check_threads("kv", self.shared.threads, ctx)?;
        check_fraction(ctx, "read_fraction", self.read_fraction)?;
        if self.keys == 0 {
            return Err(SimError::config(f, "workload.keys", "the store needs at least one key"));
        }
        if self.value_size.0 == 0 {
            return Err(SimError::config(f, "workload.value_size", "must be at least 1 byte"));
        }
        if !(self.theta.is_finite() && self.theta >= 0.0) {
            return Err(SimError::config(
                f,
                "workload.theta",
                format!("must be a number >= 0, got {}", self.theta),
            ));
        }
        let record = (64 + self.value_size.0).div_ceil(64) * 64;
        if self.keys.checked_mul(record).is_none_or(|b| b >= 1 << 46) {
            return Err(SimError::config(f, "workload.keys", "keys x record size exceeds 64 TiB"));
        }
        if self.requests == 0 && ctx.duration == Ps::ZERO {
            return Err(SimError::config(
                f,
                "workload.requests",
                "requests = 0 runs until the scenario's duration, but the scenario sets none",
            ));
        }
        if self.clients == 0 || self.clients > 1 << 20 {
            return Err(SimError::config(
                f,
                "workload.clients",
                format!("{} is not in 1..=1048576", self.clients),
            ));
        }
        if self.node.is_some() && !self.shared.populate {
            return Err(SimError::config(
                f,
                "workload.node",
                "`node` places populated memory: set populate = true",
            ));
        }
        let buckets = self.keys.next_power_of_two();
        Ok(Box::new(Kv {
            sampler: ZipfSampler::new(self.keys, self.theta),
            perm: (self.distribution == Distribution::ScrambledZipfian)
                .then(|| Permutation::new(self.keys, derive(ctx.seed, "workload.kv.scramble", 0))),
            bucket_seed: derive(ctx.seed, "workload.kv.hash", 0),
            buckets,
            record,
            index: 0,
            slab: 0,
            rngs: (0..self.shared.threads).map(|t| Rng::derived(ctx.seed, "workload.kv", t as u64)).collect(),
            started: vec![None; self.shared.threads],
            queues: vec![std::collections::VecDeque::with_capacity(self.clients); self.shared.threads],
            queued: vec![Ps::ZERO; self.shared.threads],
            issued: vec![0; self.shared.threads],
            reads: 0,
            updates: 0,
            pending: Vec::new(),
            win: LatencyHist::default(),
            all: LatencyHist::default(),
            last_done: Ps::ZERO,
            p: self.clone(),
        }))
    }
}

/// The `kv` workload.
pub struct Kv {
    p: KvConfig,
    sampler: ZipfSampler,
    perm: Option<Permutation>,
    bucket_seed: u64,
    buckets: u64,
    record: u64,
    index: u64,
    slab: u64,
    rngs: Vec<Rng>,
    /// Start time of each thread's request in flight.
    started: Vec<Option<Ps>>,
    /// Service times of the last `clients` requests of each thread, and their sum.
    queues: Vec<std::collections::VecDeque<Ps>>,
    queued: Vec<Ps>,
    issued: Vec<u64>,
    reads: u64,
    updates: u64,
    /// (completion time, latency) of requests not yet counted in a window.
    pending: Vec<(Ps, Ps)>,
    win: LatencyHist,
    all: LatencyHist,
    /// Completion time of the last request.
    last_done: Ps,
}

impl Kv {
    /// The key a Zipf rank (1-based) or a uniform draw selects.
    fn key_of(&self, rank: u64) -> u64 {
        let r = rank - 1;
        match self.p.distribution {
            Distribution::Zipfian | Distribution::Uniform => r,
            Distribution::ScrambledZipfian => self.perm.as_ref().map_or(r, |p| p.apply(r)),
            Distribution::Latest => self.p.keys - 1 - r,
        }
    }

    /// Address of key `k`'s index bucket.
    pub fn bucket_addr(&self, k: u64) -> u64 {
        let mut s = k ^ self.bucket_seed;
        self.index + (splitmix64(&mut s) & (self.buckets - 1)) * 8
    }

    /// Address of key `k`'s record.
    pub fn record_addr(&self, k: u64) -> u64 {
        self.slab + k * self.record
    }

    fn map(&self, mem: &mut dyn AddressSpace, len: u64, name: &str) -> Result<u64> {
        let opts = MapOptions {
            name: name.into(),
            page_size: self.p.shared.page_size,
            populate: self.p.shared.populate && self.p.node.is_none(),
            thread: 0,
        };
        let a = mem.mmap(len, opts)?;
        if let Some(n) = self.p.node {
            mem.populate_on(a, len, n)?;
        }
        Ok(a)
    }
}

impl Workload for Kv {
    fn threads(&self) -> usize {
        self.p.shared.threads
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        self.index = self.map(mem, self.buckets * 8, "kv.index")?;
        self.slab = self.map(mem, self.p.keys * self.record, "kv.slab")?;
        Ok(())
    }

    fn next_batch(
        &mut self,
        t: usize,
        now: Ps,
        out: &mut Vec<Access>,
        _mem: &mut dyn AddressSpace,
    ) -> Result<Step> {
        if let Some(s) = self.started[t].take() {
            let service = now - s;
            let q = &mut self.queues[t];
            if q.len() == self.p.clients {
                self.queued[t] = self.queued[t] - q.pop_front().unwrap_or(Ps::ZERO);
            }
            q.push_back(service);
            self.queued[t] += service;
            let lat = self.queued[t];
            self.pending.push((now, lat));
            // The histograms count whole ns (the unit of the latency outputs).
            self.all.add(lat.whole_ns());
            self.last_done = self.last_done.max(now);
        }
        if self.p.requests > 0 && self.issued[t] >= self.p.requests {
            return Ok(Step::Done);
        }
        let rng = &mut self.rngs[t];
        let rank = if self.p.distribution == Distribution::Uniform {
            1 + rng.below(self.p.keys)
        } else {
            self.sampler.sample(rng)
        };
        let read = self.p.read_fraction >= 1.0 || rng.next_u64() < fraction_threshold(self.p.read_fraction);
        let k = self.key_of(rank);
        let rec = self.record_addr(k);
        out.push(Access::read(self.bucket_addr(k)));
        out.push(Access::read(rec));
        let lines = self.p.value_size.0.div_ceil(64);
        for l in 0..lines {
            let a = rec + 64 + l * 64;
            out.push(if read { Access::read(a) } else { Access::write(a) });
        }
        if read {
            self.reads += 1;
        } else {
            self.updates += 1;
        }
        self.started[t] = Some(now);
        self.issued[t] += 1;
        Ok(Step::Continue)
    }

    fn window_columns(&mut self, start: Ps, end: Ps) -> Vec<(String, f64)> {
        self.win.clear();
        let mut keep = Vec::new();
        for &(done, lat) in &self.pending {
            if done < end {
                self.win.add(lat.whole_ns());
            } else {
                keep.push((done, lat));
            }
        }
        self.pending = keep;
        let secs = end.saturating_sub(start).secs_f64();
        let n = self.win.len() as f64;
        vec![
            ("kv.requests".into(), n),
            ("kv.throughput".into(), if secs > 0.0 { n / secs } else { 0.0 }),
            ("kv.mean_us".into(), self.win.mean() / 1e3),
            ("kv.p50_us".into(), self.win.quantile(0.50) / 1e3),
            ("kv.p95_us".into(), self.win.quantile(0.95) / 1e3),
            ("kv.p99_us".into(), self.win.quantile(0.99) / 1e3),
        ]
    }

    fn report_stats(&self, out: &mut Stats) {
        let p = "workload.kv";
        out.set(format!("{p}.keys"), self.p.keys);
        out.set(format!("{p}.record_bytes"), self.record);
        out.set(format!("{p}.index_bytes"), self.buckets * 8);
        out.set(format!("{p}.slab_bytes"), self.p.keys * self.record);
        out.set(format!("{p}.requests"), self.all.len());
        out.set(format!("{p}.reads"), self.reads);
        out.set(format!("{p}.updates"), self.updates);
        let secs = self.last_done.secs_f64();
        out.set(format!("{p}.throughput"), if secs > 0.0 { self.all.len() as f64 / secs } else { 0.0 });
        out.set(format!("{p}.mean_us"), self.all.mean() / 1e3);
        out.set(format!("{p}.p50_us"), self.all.quantile(0.50) / 1e3);
        out.set(format!("{p}.p95_us"), self.all.quantile(0.95) / 1e3);
        out.set(format!("{p}.p99_us"), self.all.quantile(0.99) / 1e3);
    }
}

/// `KvParams` with the workload parameters every kind shares ([`WorkloadShared`]).
pub type KvConfig = crate::params::With<WorkloadShared, KvParams>;

impl crate::params::SharedDefaults<WorkloadShared> for KvParams {
    fn shared_defaults() -> WorkloadShared {
        WorkloadShared { populate: true, ..WorkloadShared::default() }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_close() {
        let mut h = LatencyHist::default();
        for v in 1..=10_000u64 {
            h.add(v * 10);
        }
        for (q, want) in [(0.5, 50_000.0), (0.95, 95_000.0), (0.99, 99_000.0)] {
            let got = h.quantile(q);
            assert!((got / want - 1.0).abs() < 0.02, "q{q}: {got} vs {want}");
        }
        assert!((h.mean() - 50_005.0).abs() < 1e-6);
        for v in [0u64, 1, 63, 64, 65, 1000, 123_456_789] {
            let i = LatencyHist::index(v);
            let back = LatencyHist::value(i);
            assert!((back - v as f64).abs() <= (v as f64) * 0.016 + 0.5, "{v} -> {back}");
        }
    }
}
