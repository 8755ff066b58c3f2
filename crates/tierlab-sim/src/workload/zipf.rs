//! `zipf`: accesses to items drawn from a Zipf distribution (YCSB-style skew).
//!
//! Item ranks `k = 1..=n` are drawn with probability proportional to `1 / k^theta` by
//! rejection-inversion (W. Hörmann, G. Derflinger, "Rejection-inversion to generate variates
//! from monotone discrete distributions", ACM TOMACS 1996): O(1) time per sample and memory
//! independent of `n` (nothing per item, so 1e9 items cost nothing to set up; a fixed 64 KiB
//! table speeds up the inversion, see [`ZipfSampler`]). Rank `k` is item `k - 1`,
//! or, with `scramble = true`, the item at a hashed position (a seeded bijection, so the hot
//! items are scattered over the footprint as with YCSB's hashed keys). Each access touches
//! one uniformly chosen 64-byte line of its item.

use super::pointer_chase::Permutation;
use super::uniform::{check_fraction, fraction_threshold};
use super::{
    check_threads, Access, AddressSpace, BuildCtx, MapOptions, Ps, Step, Workload, WorkloadParams,
    WorkloadShared,
};
use crate::error::{Result, SimError};
use crate::rng::{derive, Rng};
use crate::stats::Stats;
use crate::units::ByteSize;
use tierlab_core::param::params;

/// Parameters of the `zipf` workload.
#[params]
#[derive(Clone, Debug)]
pub struct ZipfParams {
    /// Number of items. Give either `items` or `footprint` (items = footprint / item_size);
    /// with neither, the footprint is 1 GiB.
    #[param(default, range = "[0, 281474976710656]", unit = "items", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub items: Option<u64>,
    /// Bytes covered by the items (rounded down to whole items); alternative to `items`.
    #[param(default, setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub footprint: Option<ByteSize>,
    /// Bytes per item (4096: one base page per item).
    #[param(default = ByteSize(tierlab_core::PAGE_SIZE), setting)]
    pub item_size: ByteSize,
    /// Zipf exponent (0 = uniform); 0.99 is YCSB's `zipfian` constant.
    #[param(default = 0.99, range = "[0, 100]", setting)]
    pub theta: f64,
    /// Place item ranks at hashed positions (a seeded bijection) instead of in rank order.
    #[param(default, setting)]
    pub scramble: bool,
    /// Fraction of accesses that are loads, the rest stores.
    #[param(default = 1.0, range = "[0, 1]", unit = "fraction", setting)]
    pub read_fraction: f64,
    /// Accesses per thread before it is done; 0 = until the scenario's duration.
    #[param(default, range = "[0, 281474976710656]", unit = "accesses", setting)]
    pub accesses: u64,
}

const BATCH: u64 = 16_384;

/// Buckets of the table that speeds up `H^-1` (see [`ZipfSampler`]).
const INV_BUCKETS: usize = 4096; // not a page size
/// Series terms of the bucketed `H^-1`.
const INV_TERMS: usize = 5;

/// Zipf sampler over ranks `1..=n` with exponent `theta`, by rejection-inversion
/// (Hörmann & Derflinger; the formulation of Apache Commons RNG's
/// `RejectionInversionZipfSampler`).
///
/// It draws `u` uniformly over `(H(1.5) - 1, H(n + 0.5)]` (`H` an antiderivative of
/// `h(x) = x^-theta`), proposes `k = round(H^-1(u))` and accepts it when `k - x <= s` (a
/// squeeze) or `u >= H(k + 0.5) - h(k)`. O(1) time and memory, any `n`.
///
/// Speed: `H^-1(u) = (1 + (1 - theta) u)^(1 / (1 - theta))` costs a logarithm and an
/// exponential. Instead, the `u` range is cut into 4096 buckets, and `H^-1` inside a bucket is
/// its value at the bucket's centre times a 5-term binomial series in the distance from the
/// centre (per bucket: the centre's value and one reciprocal, 64 KiB in all; the series is
/// exact when `1 / (1 - theta)` is a whole number up to 5, and its truncation error is bounded
/// per bucket at build time, falling back to the direct formula where the bound exceeds
/// 1e-15). Whenever the fast value lies within 1e-12 (relative) of a rounding or squeeze
/// boundary, the direct formula decides, so the samples are those of plain
/// rejection-inversion (a test checks they are identical). [`ZipfSampler::fill`] draws many
/// at once about twice as fast as repeated [`ZipfSampler::sample`].
#[derive(Clone, Debug)]
pub struct ZipfSampler {
    n: u64,
    exponent: f64,
    /// `1 / (1 - theta)` when theta is not within 1e-3 of 1 (cheaper, accurate `H^-1`).
    inv_one_minus: Option<f64>,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
    /// Bucket width in `u`, its reciprocal, and `alpha_i = (1 - i (1 - theta)) / (i + 1)`.
    width: f64,
    inv_width: f64,
    alpha: [f64; INV_TERMS],
    /// Per bucket: `H^-1` at the centre and `1 / (1 + (1 - theta) u_centre)`; a NaN centre
    /// value (and 0) where the direct formula must be used.
    buckets: Vec<(f64, f64)>,
}

fn helper1(x: f64) -> f64 {
    // log1p(x) / x, accurate near 0.
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

fn helper2(x: f64) -> f64 {
    // expm1(x) / x, accurate near 0.
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

/// Relative distance within which the fast `H^-1` defers to the direct formula.
const GUARD: f64 = 1e-12;

impl ZipfSampler {
    /// A sampler of ranks `1..=n` (`n >= 1`) with `P(k) ~ 1 / k^theta` (`theta >= 0`).
    pub fn new(n: u64, theta: f64) -> Self {
        Self::with_table(n, theta, true)
    }

    /// Like [`ZipfSampler::new`]; `table = false` always uses the direct `H^-1` (the
    /// reference the table is tested against).
    pub fn with_table(n: u64, theta: f64, table: bool) -> Self {
        let n = n.max(1);
        let eps = 1.0 - theta;
        let mut alpha = [0.0; INV_TERMS];
        for (i, a) in alpha.iter_mut().enumerate() {
            *a = (1.0 - i as f64 * eps) / (i as f64 + 1.0);
        }
        let mut z = ZipfSampler {
            n,
            exponent: theta,
            inv_one_minus: (eps.abs() > 1e-3).then(|| 1.0 / eps),
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
            width: 0.0,
            inv_width: 0.0,
            alpha,
            buckets: Vec::new(),
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(n as f64 + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        if table {
            z.width = (z.h_integral_n - z.h_integral_x1) / INV_BUCKETS as f64;
            z.inv_width = 1.0 / z.width;
            // Bound of the series' remainder relative to its value: prod |alpha_i| * T^(m+1)
            // for |t| <= T, with the next coefficient included.
            let next = ((1.0 - INV_TERMS as f64 * eps) / (INV_TERMS as f64 + 1.0)).abs();
            let coef: f64 = alpha.iter().map(|a| a.abs()).product::<f64>() * next;
            let mut buckets = Vec::with_capacity(INV_BUCKETS);
            for b in 0..INV_BUCKETS {
                let lo = z.h_integral_x1 + b as f64 * z.width;
                let uc = lo + 0.5 * z.width;
                let (y_lo, y_hi) = (1.0 + eps * lo, 1.0 + eps * (lo + z.width));
                let y_min = y_lo.min(y_hi);
                let yc = 1.0 + eps * uc;
                let mut r = 0.0;
                if y_min > 0.0 && yc > 0.0 {
                    // |t| = |u - uc| / yc, but the series converges like |u - uc| / y_min.
                    let tmax = 0.5 * z.width / y_min;
                    let bound = if coef == 0.0 { 0.0 } else { coef * tmax.powi(INV_TERMS as i32 + 1) };
                    if bound.is_finite() && bound < 1e-15 && (coef == 0.0 || tmax < 0.5) {
                        r = 1.0 / yc;
                    }
                }
                let xc = if r == 0.0 { f64::NAN } else { z.h_integral_inverse(uc) };
                buckets.push((xc, r));
            }
            z.buckets = buckets;
        }
        z
    }

    /// `H(x)`: an antiderivative of `h(x) = x^-theta`, continuous in theta.
    #[inline]
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.exponent) * log_x) * log_x
    }

    #[inline]
    fn h(&self, x: f64) -> f64 {
        (-self.exponent * x.ln()).exp()
    }

    /// The direct `H^-1`.
    #[inline]
    fn h_integral_inverse(&self, x: f64) -> f64 {
        let mut t = x * (1.0 - self.exponent);
        if t < -1.0 {
            // Limit value, reached only through rounding.
            t = -1.0;
        }
        match self.inv_one_minus {
            // exp(log1p(t) / t * x) = exp(ln(1 + t) / (1 - theta)); the rounding of 1 + t
            // costs at most 1e-13 relative here.
            Some(inv) => ((1.0 + t).ln() * inv).exp(),
            None => (helper1(t) * x).exp(),
        }
    }

    /// The bucketed `H^-1`, or NaN where the direct formula must be used (flagged buckets
    /// hold a NaN centre value; no branch).
    #[inline(always)]
    fn h_integral_inverse_fast(&self, u: f64) -> f64 {
        let b = (((u - self.h_integral_x1) * self.inv_width) as usize).min(INV_BUCKETS - 1);
        let (xc, r) = self.buckets[b];
        let uc = self.h_integral_x1 + (b as f64 + 0.5) * self.width;
        let t = (u - uc) * r;
        let a = &self.alpha;
        let series =
            1.0 + a[0] * t * (1.0 + a[1] * t * (1.0 + a[2] * t * (1.0 + a[3] * t * (1.0 + a[4] * t))));
        xc * series
    }

    /// A uniform `u` over the proposal range.
    #[inline(always)]
    fn draw_u(&self, rng: &mut Rng) -> f64 {
        self.h_integral_n + rng.f64() * (self.h_integral_x1 - self.h_integral_n)
    }

    /// Finish one attempt at `u` given a candidate `x = H^-1(u)` (NaN = compute it): the
    /// accepted rank, or `None` when rejected.
    #[inline(always)]
    fn attempt(&self, u: f64, mut x: f64) -> Option<u64> {
        // Defer to the direct formula near a rounding or squeeze boundary. x > 0, so the
        // cast rounds like floor(x + 0.5); a NaN fails the tests.
        let g = GUARD * (x + 1.0);
        let k0 = (x + 0.5) as u64;
        let frac = (x + 0.5) - k0 as f64;
        let kc = k0.clamp(1, self.n) as f64;
        if !(frac >= g && 1.0 - frac >= g && ((kc - x) - self.s).abs() >= g) {
            x = self.h_integral_inverse(u);
        }
        let k = ((x + 0.5) as u64).clamp(1, self.n);
        let kf = k as f64;
        if kf - x <= self.s || u >= self.h_integral(kf + 0.5) - self.h(kf) {
            Some(k)
        } else {
            None
        }
    }

    /// Draw one rank in `1..=n`.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.draw_u(rng);
            let x = if self.buckets.is_empty() { f64::NAN } else { self.h_integral_inverse_fast(u) };
            if let Some(k) = self.attempt(u, x) {
                return k;
            }
        }
    }

    /// Fill `out` with independent ranks. Faster than repeated [`ZipfSampler::sample`]: the
    /// first attempts of a chunk are computed in a branch-free pass (independent work the CPU
    /// overlaps) and checked in a second pass; a rejected first attempt is replaced by a
    /// fresh [`ZipfSampler::sample`], which keeps every rank distributed exactly as
    /// rejection-inversion's.
    pub fn fill(&self, rng: &mut Rng, out: &mut [u64]) {
        if self.buckets.is_empty() {
            for o in out.iter_mut() {
                *o = self.sample(rng);
            }
            return;
        }
        const CHUNK: usize = 256;
        let mut us = [0f64; CHUNK];
        let mut xs = [0f64; CHUNK];
        for chunk in out.chunks_mut(CHUNK) {
            let m = chunk.len();
            for (u, x) in us[..m].iter_mut().zip(&mut xs[..m]) {
                *u = self.draw_u(rng);
                *x = self.h_integral_inverse_fast(*u);
            }
            for (i, o) in chunk.iter_mut().enumerate() {
                *o = match self.attempt(us[i], xs[i]) {
                    Some(k) => k,
                    None => self.sample(rng),
                };
            }
        }
    }
}

impl ZipfParams {
    fn item_count(&self, ctx: &BuildCtx) -> Result<u64> {
        let f = &ctx.scenario_file;
        if self.item_size.0 == 0 {
            return Err(SimError::config(f, "workload.item_size", "must be at least 1 byte"));
        }
        let n = match (self.items, self.footprint) {
            (Some(_), Some(_)) => {
                return Err(SimError::config(
                    f,
                    "workload.items",
                    "give either `items` or `footprint`, not both",
                ))
            }
            (Some(n), None) => n,
            (None, fp) => fp.map_or(1 << 30, |b| b.0) / self.item_size.0,
        };
        if n == 0 {
            return Err(SimError::config(f, "workload.items", "the workload needs at least one item"));
        }
        if n.checked_mul(self.item_size.0).is_none() {
            return Err(SimError::config(f, "workload.items", "items x item_size overflows 64 bits"));
        }
        Ok(n)
    }
}

impl WorkloadParams for ZipfConfig {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        let f = &ctx.scenario_file;
        check_threads("zipf", self.shared.threads, ctx)?;
        check_fraction(ctx, "read_fraction", self.read_fraction)?;
        if !(self.theta.is_finite() && self.theta >= 0.0) {
            return Err(SimError::config(
                f,
                "workload.theta",
                format!("must be a number >= 0, got {}", self.theta),
            ));
        }
        let items = self.item_count(ctx)?;
        if self.accesses == 0 && ctx.duration == Ps::ZERO {
            return Err(SimError::config(
                f,
                "workload.accesses",
                "accesses = 0 runs until the scenario's duration, but the scenario sets none",
            ));
        }
        let line = self.item_size.0.min(64);
        Ok(Box::new(Zipf {
            sampler: ZipfSampler::new(items, self.theta),
            perm: self
                .scramble
                .then(|| Permutation::new(items, derive(ctx.seed, "workload.zipf.scramble", 0))),
            items,
            lines_per_item: self.item_size.0 / line,
            line,
            base: 0,
            rngs: (0..self.shared.threads)
                .map(|t| Rng::derived(ctx.seed, "workload.zipf", t as u64))
                .collect(),
            issued: vec![0; self.shared.threads],
            discarded: 0,
            scratch: vec![0; BATCH as usize],
            p: self.clone(),
        }))
    }
}

/// The `zipf` workload.
pub struct Zipf {
    p: ZipfConfig,
    sampler: ZipfSampler,
    perm: Option<Permutation>,
    items: u64,
    lines_per_item: u64,
    line: u64,
    base: u64,
    rngs: Vec<Rng>,
    issued: Vec<u64>,
    discarded: u64,
    /// Ranks of the batch being generated.
    scratch: Vec<u64>,
}

impl Zipf {
    /// The item holding rank `k` (1-based; rank 1 is the most popular).
    pub fn item_of_rank(&self, k: u64) -> u64 {
        match &self.perm {
            Some(p) => p.apply(k - 1),
            None => k - 1,
        }
    }
}

impl Workload for Zipf {
    fn threads(&self) -> usize {
        self.p.shared.threads
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        let opts = MapOptions {
            name: "items".into(),
            page_size: self.p.shared.page_size,
            populate: self.p.shared.populate,
            thread: 0,
        };
        self.base = mem.mmap(self.items * self.p.item_size.0, opts)?;
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
        if self.p.accesses > 0 {
            n = n.min(self.p.accesses - self.issued[t]);
        }
        let th = fraction_threshold(self.p.read_fraction);
        let all_reads = self.p.read_fraction >= 1.0;
        let (base, isz, lpi, line) = (self.base, self.p.item_size.0, self.lines_per_item, self.line);
        let perm = self.perm.as_ref();
        // The generator's state in a local (as `uniform` does: through `&mut self.rngs[t]`
        // it would be stored and reloaded at every access). Written back below.
        let mut local = self.rngs[t].clone();
        let rng = &mut local;
        let ranks = &mut self.scratch[..n as usize];
        self.sampler.fill(rng, ranks);
        out.extend(ranks.iter().map(|&k| {
            let r = k - 1;
            let item = match perm {
                Some(p) => p.apply(r),
                None => r,
            };
            let mut a = base + item * isz;
            if lpi > 1 {
                a += rng.below(lpi) * line;
            }
            if all_reads || rng.next_u64() < th {
                Access::read(a)
            } else {
                Access::write(a)
            }
        }));
        self.rngs[t] = local;
        self.issued[t] += n;
        if self.p.accesses > 0 && self.issued[t] >= self.p.accesses {
            Ok(Step::Done)
        } else {
            Ok(Step::Continue)
        }
    }

    fn discard(&mut self, _t: usize, unexecuted: &[Access]) {
        self.discarded += unexecuted.len() as u64;
    }

    fn report_stats(&self, out: &mut Stats) {
        out.set("workload.items", self.items);
        out.set("workload.accesses", self.issued.iter().sum::<u64>() - self.discarded);
    }
}

/// `ZipfParams` with the workload parameters every kind shares ([`WorkloadShared`]).
pub type ZipfConfig = crate::params::With<WorkloadShared, ZipfParams>;

impl crate::params::SharedDefaults<WorkloadShared> for ZipfParams {
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
            seed: 21,
            scenario_file: "s.toml".into(),
            cores: 4,
            duration: Ps::ZERO,
            ..Default::default()
        }
    }

    fn counts(n: u64, theta: f64, draws: u64) -> Vec<u64> {
        counts_table(n, theta, draws, true)
    }

    fn counts_table(n: u64, theta: f64, draws: u64, table: bool) -> Vec<u64> {
        let z = ZipfSampler::with_table(n, theta, table);
        let mut rng = Rng::new(99);
        let mut c = vec![0u64; n as usize + 1];
        // The batched fill with the table, single samples without.
        let mut buf = vec![0u64; 1000];
        for _ in 0..draws / 1000 {
            if table {
                z.fill(&mut rng, &mut buf);
            } else {
                buf.iter_mut().for_each(|k| *k = z.sample(&mut rng));
            }
            for &k in &buf {
                assert!((1..=n).contains(&k));
                c[k as usize] += 1;
            }
        }
        c
    }

    #[test]
    fn rank_one_vs_two_is_two_to_theta() {
        for theta in [0.5, 0.99, 1.0, 1.3] {
            let c = counts(1000, theta, 1_000_000);
            let ratio = c[1] as f64 / c[2] as f64;
            let want = 2f64.powf(theta);
            assert!((ratio / want - 1.0).abs() < 0.03, "theta {theta}: {ratio} vs {want}");
        }
    }

    #[test]
    fn matches_the_exact_pmf() {
        let (n, theta) = (50u64, 0.99);
        let draws = 1_000_000u64;
        let c = counts(n, theta, draws);
        let norm: f64 = (1..=n).map(|k| (k as f64).powf(-theta)).sum();
        for k in 1..=n {
            let p = (k as f64).powf(-theta) / norm;
            let want = p * draws as f64;
            let sd = (want * (1.0 - p)).sqrt();
            assert!((c[k as usize] as f64 - want).abs() < 5.0 * sd, "rank {k}: {} vs {want}", c[k as usize]);
        }
        // theta = 0 is uniform.
        let c = counts(10, 0.0, 200_000);
        assert!(c[1..].iter().all(|&x| (19_000..21_000).contains(&x)), "{c:?}");
        // n = 1 always gives rank 1.
        assert!(counts(1, 0.99, 1000)[1] == 1000);
    }

    #[test]
    fn table_gives_the_same_samples_as_the_direct_formula() {
        for (n, theta) in [
            (1_000_000_000u64, 0.99),
            (1000, 0.99),
            (5_000_000, 0.9),
            (1_000_000, 1.0),
            (1_000_000, 0.9999),
            (1_000_000, 1.2),
            (1_000_000, 0.0),
            (1_000_000, 0.5),
            (10_000_000, 0.7),
            (3, 2.5),
        ] {
            let fast = ZipfSampler::new(n, theta);
            let slow = ZipfSampler::with_table(n, theta, false);
            let (mut a, mut b) = (Rng::new(5), Rng::new(5));
            for i in 0..200_000 {
                assert_eq!(fast.sample(&mut a), slow.sample(&mut b), "n {n} theta {theta} draw {i}");
            }
            // The batched fill draws the same distribution (checked in matches_the_exact_pmf);
            // here: the table really is used for the common cases.
            if theta < 1.1 {
                let used = fast.buckets.iter().filter(|b| b.1 != 0.0).count();
                assert!(used > INV_BUCKETS * 9 / 10, "n {n} theta {theta}: {used} buckets");
            }
        }
    }

    #[test]
    fn a_billion_items_is_cheap() {
        let z = ZipfSampler::new(1_000_000_000, 0.99);
        let mut rng = Rng::new(1);
        let mut top = 0;
        for _ in 0..100_000 {
            let k = z.sample(&mut rng);
            assert!((1..=1_000_000_000).contains(&k));
            top += (k == 1) as u32;
        }
        // P(rank 1) = 1 / H(1e9, 0.99) ~ 0.045.
        assert!((3_500..5_500).contains(&top), "{top}");
    }

    #[test]
    fn workload_places_ranks_and_scrambles() {
        let p: ZipfConfig = toml::from_str("items = 1000\naccesses = 200000\nread_fraction = 0.5").unwrap();
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let base = mem.find("items").start;
        let mut hist = vec![0u64; 1000];
        let mut writes = 0u64;
        drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, a| {
            hist[((a.addr - base) / 4096) as usize] += 1;
            writes += a.is_write() as u64;
        });
        assert!(hist[0] > hist[1] && hist[1] > hist[2] && hist[0] > hist[999] * 100);
        assert!((writes as f64 / 200_000.0 - 0.5).abs() < 0.01);

        let p: ZipfConfig = toml::from_str("items = 1000\naccesses = 200000\nscramble = true").unwrap();
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let base = mem.find("items").start;
        let mut hist2 = vec![0u64; 1000];
        drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, a| {
            hist2[((a.addr - base) / 4096) as usize] += 1
        });
        // Same multiset of counts' shape: the most popular item is somewhere else.
        let hottest = (0..1000).max_by_key(|&i| hist2[i]).unwrap();
        assert_ne!(hottest, 0);
        assert!(hist2[hottest] as f64 > 0.8 * hist[0] as f64);
    }

    #[test]
    fn parameter_errors() {
        let c = ctx();
        let bad = |t: &str| toml::from_str::<ZipfConfig>(t).unwrap().build(&c).err().unwrap().to_string();
        assert!(bad("items = 10\nfootprint = 4096\naccesses = 1").contains("not both"));
        assert!(bad("items = 0\naccesses = 1").contains("workload.items"));
        assert!(bad("theta = -1.0\naccesses = 1").contains("workload.theta"));
        assert!(bad("items = 10").contains("workload.accesses"));
        // Default: 1 GiB of 4 KiB items.
        let p: ZipfConfig = toml::from_str("accesses = 1").unwrap();
        assert_eq!(p.item_count(&c).unwrap(), 262_144);
    }
}
