//! `colloid`: balance the tiers' **loaded** access latencies (Vuppalapati & Agarwal, "Tiered
//! Memory Management: Access Latency is the Key!", SOSP'24; `reference/loaded-latency.md`).
//!
//! # Model
//! Colloid's principle: place pages so that the default (fast) tier and the alternate (slow)
//! tier have equal loaded access latencies, rather than packing the hottest pages into the
//! fast tier: under load the fast tier's latency can exceed the slow tier's.
//!
//! **Measurement** (colloid-mon, `host-architecture/colloid`, every `interval`): per tier,
//! the access latency by Little's law, occupancy / inserts of the uncore's request queue
//! (CHA TOR), each EWMA-smoothed with weight `2^-ewma_exp`. The simulator's hardware counts
//! every core's accesses per node (the inserts) and exposes each node's current loaded
//! latency (`hw::loaded`: idle latency x the curve at the node's utilization); the occupancy
//! of an interval is latency x inserts, so the measured latency is the ratio of the smoothed
//! occupancy to the smoothed inserts; a tier without traffic has its unloaded latency (what a
//! probe would measure; colloid-mon floors its latencies instead). `p` = the fast tier's
//! share of the accesses.
//!
//! **Control** (colloid-mon's `p_lo` / `p_hi` watermarks): when the two latencies differ by
//! at most `delta` (of the fast tier's latency), nothing moves (`delta_p = 0`). Otherwise, if
//! the fast tier is the faster one, `p_lo = p` (the fast tier should take more accesses;
//! `p_hi` resets to 1 if it is not above `p_lo`), else `p_hi = p` (`p_lo` resets to 0 if it is
//! not below); when `p_hi - p_lo < epsilon` the far watermark resets (the load changed). The
//! target is `(p_lo + p_hi) / 2` and `delta_p = |target - p|`: a binary search for the
//! access split at which the latencies are equal.
//!
//! **Migration** (every `quantum`, colloid's `MIGRATION_QUANTUM_MS`): page hotness comes from
//! PEBS samples (as in Colloid's HeMem and MEMTIS integrations), per 4 KiB page, halved every
//! `cooling`. With `delta_p > 0`, pages whose sampled access share adds up to `delta_p` move
//! toward the lower-latency tier, hottest first: promotions when the fast tier is faster
//! (making room by demoting the fast pages with the fewest samples, as the base systems
//! demote cold pages), demotions of the fast tier's hottest pages when it is slower. The
//! promotion rate limit (`rate_limit_mbps`) and the policy core's time bound the work.
//!
//! Parameters: [`ColloidParams`] (defaults, ranges and sources in `docs/parameters.md`;
//! colloid-mon's constants are those of its MEMTIS integration without spin polling).

use std::collections::HashMap;

use tierlab_core::PAGE_SIZE;

use super::{TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::{Feed, FeedKind, MachineView, Ps};
use crate::error::Result;
use crate::stats::Stats;
use crate::units::Duration;
use tierlab_core::param::{params, Provenance};

/// Parameters of `colloid`.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct ColloidParams {
    /// Latency measurement period.
    #[param(
        default = Duration(10_000_000),
        sourced = "colloid-mon.c of Colloid's MEMTIS integration (host-architecture/colloid): \
                   SAMPLE_INTERVAL_MS 10",
    )]
    pub interval: Duration,
    /// EWMA weight exponent (weight of a new measurement = 2^-ewma_exp).
    #[param(
        default = 4,
        range = "[0, 16]",
        sourced = "colloid-mon.c of Colloid's MEMTIS integration (host-architecture/colloid): EWMA_EXP 4 \
                   without SPINPOLL (weight 1/16)"
    )]
    pub ewma_exp: u32,
    /// Migration period.
    #[param(
        default = Duration(500_000_000),
        sourced = "colloid-mon.c of Colloid's MEMTIS integration (host-architecture/colloid): \
                   MIGRATION_QUANTUM_MS 500",
    )]
    pub quantum: Duration,
    /// Latencies within this fraction of the fast tier's are balanced.
    #[param(
        default = 0.05,
        range = "[0, 1)",
        unit = "fraction",
        sourced = "colloid-mon.c of Colloid's MEMTIS integration (host-architecture/colloid): \
                   COLLOID_DELTA_PERCENT 5"
    )]
    pub delta: f64,
    /// Watermarks closer than this reset.
    #[param(
        default = 0.01,
        range = "[0, 1)",
        unit = "fraction",
        sourced = "colloid-mon.c of Colloid's MEMTIS integration (host-architecture/colloid): \
                   COLLOID_EPSILON_PERCENT 1"
    )]
    pub epsilon: f64,
    /// Sample counts halve this often.
    #[param(default = Duration(1_000_000_000), assumed = "sample counts halve every second")]
    pub cooling: Duration,
    /// CPU time per sample processed.
    #[param(
        default = 50.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "as hemem and memtis: a hash lookup and an update per record"
    )]
    pub ns_per_sample: f64,
}

impl TieringParams for ColloidParams {
    fn build(&self, _shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        for (f, d) in [("interval", self.interval), ("quantum", self.quantum), ("cooling", self.cooling)] {
            if d.0 == 0 {
                return Err(ctx.err(f, "must be > 0"));
            }
        }
        Ok(Box::new(Colloid::new(self.clone())))
    }
    fn period(&self) -> Ps {
        self.quantum.ps()
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        Some(&[FeedKind::Samples])
    }
}

/// The time one access of `core` to memory of `node` costs now (its cost table: CPU time, the
/// cache-hit share, the node's current latency).
fn access_cost(m: &MachineView, core: usize, node: u8) -> Ps {
    m.access_cost(core, node)
}

/// The `colloid` policy.
pub struct Colloid {
    p: ColloidParams,
    next_measure: Ps,
    next_migrate: Ps,
    next_cool: Ps,
    /// Per-node access counters at the last measurement (all cores).
    last_ins: Vec<u64>,
    /// Smoothed occupancy (latency x inserts) and inserts of the fast and slow tier.
    occ: [f64; 2],
    ins: [f64; 2],
    /// The measured latencies, ns.
    lat: [f64; 2],
    p_lo: f64,
    p_hi: f64,
    delta_p: f64,
    fast_slower: bool,
    /// Sample counts per 4 KiB page.
    counts: HashMap<u64, f64>,
    samples: u64,
    measures: u64,
    unbalanced: u64,
    promoted_for_balance: u64,
    demoted_for_balance: u64,
}

impl Colloid {
    fn new(p: ColloidParams) -> Self {
        Colloid {
            next_measure: p.interval.ps(),
            next_migrate: p.quantum.ps(),
            next_cool: p.cooling.ps(),
            p,
            last_ins: Vec::new(),
            occ: [0.0; 2],
            ins: [0.0; 2],
            lat: [0.0; 2],
            p_lo: 0.0,
            p_hi: 1.0,
            delta_p: 0.0,
            fast_slower: false,
            counts: HashMap::new(),
            samples: 0,
            measures: 0,
            unbalanced: 0,
            promoted_for_balance: 0,
            demoted_for_balance: 0,
        }
    }

    /// The memory latency an access to `node` pays now (ns), from the hardware's cost table
    /// of core 0 (the loaded latency when the node has a loaded-latency model).
    fn latency_ns(ctx: &TieringCtx, node: u8) -> f64 {
        let c = ctx.machine.cost();
        let total_ns = access_cost(&ctx.machine, 0, node).ns_f64();
        let miss = (1.0 - c.cache_hit_fraction).max(1e-9);
        (total_ns - c.cpu_ns_per_access - c.cache_hit_fraction * c.cache_hit_ns) / miss
    }

    /// The measured (smoothed) latencies of the fast and slow tier, ns.
    pub fn latencies(&self) -> [f64; 2] {
        self.lat
    }

    /// One colloid-mon step: measure, smooth, update the watermarks and `delta_p`.
    fn measure(&mut self, ctx: &TieringCtx) {
        let m = &ctx.machine;
        let k = m.nodes().len();
        let now: Vec<u64> = (0..k).map(|n| (0..m.cores()).map(|c| m.node_accesses(c)[n]).sum()).collect();
        if self.last_ins.is_empty() {
            self.last_ins = vec![0; k];
        }
        let tiers = [ctx.tiers().fast, ctx.tiers().slow];
        let w = 1.0 / (1u64 << self.p.ewma_exp) as f64;
        for (i, &n) in tiers.iter().enumerate() {
            let ins = (now[n as usize] - self.last_ins[n as usize]) as f64;
            let lat = Self::latency_ns(ctx, n);
            self.occ[i] += w * (lat * ins - self.occ[i]);
            self.ins[i] += w * (ins - self.ins[i]);
            // Little's law; a tier without traffic has its unloaded latency (what a probe
            // would measure; colloid-mon floors the latencies instead).
            self.lat[i] = if self.ins[i] > 1e-9 { self.occ[i] / self.ins[i] } else { lat };
        }
        self.last_ins = now;
        self.measures += 1;
        let (ins_f, ins_s) = (self.ins[0], self.ins[1]);
        let [lf, ls] = self.lat;
        self.fast_slower = lf > ls;
        if (lf - ls).abs() <= self.p.delta * lf || ins_f + ins_s <= 1e-9 {
            self.delta_p = 0.0;
            return;
        }
        self.unbalanced += 1;
        let p = ins_f / (ins_f + ins_s);
        if !self.fast_slower {
            self.p_lo = p;
            if self.p_hi <= self.p_lo {
                self.p_hi = 1.0;
            }
        } else {
            self.p_hi = p;
            if self.p_lo >= self.p_hi {
                self.p_lo = 0.0;
            }
        }
        if self.p_hi - self.p_lo < self.p.epsilon {
            if !self.fast_slower {
                self.p_hi = 1.0;
            } else {
                self.p_lo = 0.0;
            }
        }
        let target = (self.p_lo + self.p_hi) / 2.0;
        self.delta_p = (target - p).abs();
    }

    /// Move pages whose sampled access share adds up to `delta_p` toward the faster tier.
    fn migrate(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        if self.delta_p <= 0.0 || self.counts.is_empty() {
            return Ok(());
        }
        let total: f64 = self.counts.values().sum();
        if total <= 0.0 {
            return Ok(());
        }
        let want = self.delta_p * total;
        let (fast, slow) = (ctx.tiers().fast, ctx.tiers().slow);
        let mut ranked: Vec<(u64, f64)> = self.counts.iter().map(|(&k, &v)| (k, v)).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let until = ctx.now + self.p.quantum.ps();
        if self.fast_slower {
            // Shift load away from the fast tier: its hottest pages go to the slow tier.
            let mut moved = 0.0;
            let mut batch = Vec::new();
            for &(pg, c) in &ranked {
                if moved >= want {
                    break;
                }
                if ctx.machine.node_of(pg) == Some(fast) {
                    batch.push(pg);
                    moved += c;
                }
            }
            let n = ctx.demote(&batch)?;
            self.demoted_for_balance += n;
            return Ok(());
        }
        // Shift load toward the fast tier: promote the slow tier's hottest pages, making room
        // by demoting the fast pages with the fewest samples.
        let cand: Vec<(u64, f64)> =
            ranked.iter().copied().filter(|&(pg, _)| ctx.machine.node_of(pg) == Some(slow)).collect();
        let mut cold: Vec<u64> = ranked
            .iter()
            .rev()
            .map(|&(pg, _)| pg)
            .filter(|&pg| ctx.machine.node_of(pg) == Some(fast))
            .collect();
        cold.reverse(); // pop() yields the coldest
                        // Pages to promote: the hottest slow pages up to `delta_p` of the sampled accesses,
                        // within the rate limit's budget.
        let budget_pages = ctx.kind.mover.budget() / PAGE_SIZE;
        let mut take = Vec::new();
        let mut moved = 0.0;
        let mut coldest_taken = f64::INFINITY;
        for (pg, c) in cand {
            if moved >= want || take.len() as u64 >= budget_pages {
                break;
            }
            take.push(pg);
            moved += c;
            coldest_taken = c;
        }
        // Room: demote the coldest fast pages, never one as hot as a page it makes room for.
        let free_pages = ctx.fast_free() / PAGE_SIZE;
        let need = (take.len() as u64).saturating_sub(free_pages);
        let mut victims = Vec::new();
        while (victims.len() as u64) < need {
            let Some(v) = cold.pop() else { break };
            if self.counts.get(&v).copied().unwrap_or(0.0) >= coldest_taken {
                break;
            }
            victims.push(v);
        }
        if !victims.is_empty() && ctx.core_free_before(until) {
            ctx.demote(&victims)?;
        }
        let room = (free_pages + victims.len() as u64) as usize;
        take.truncate(room);
        if !take.is_empty() && ctx.core_free_before(until) {
            let (k, _) = ctx.promote(&take)?;
            self.promoted_for_balance += k;
        }
        Ok(())
    }
}

impl TieringPolicy for Colloid {
    fn next_event(&self) -> Ps {
        self.next_measure.min(self.next_migrate)
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let now = ctx.now;
        if now >= self.next_cool {
            self.next_cool = now + self.p.cooling.ps();
            self.counts.retain(|_, c| {
                *c /= 2.0;
                *c >= 0.25
            });
        }
        if now >= self.next_measure {
            self.next_measure = now + self.p.interval.ps();
            self.measure(ctx);
        }
        if now >= self.next_migrate {
            self.next_migrate = now + self.p.quantum.ps();
            self.migrate(ctx)?;
        }
        Ok(())
    }

    fn on_feed(&mut self, feed: &Feed, ctx: &mut TieringCtx) -> Result<()> {
        let Feed::Samples(drains) = feed else { return Ok(()) };
        let mut n = 0u64;
        for d in drains.iter() {
            for &(addr, _) in &d.records {
                *self.counts.entry(addr & !(PAGE_SIZE - 1)).or_default() += 1.0;
                n += 1;
            }
        }
        self.samples += n;
        ctx.charge(Ps::from_ns_f64(n as f64 * self.p.ns_per_sample));
        Ok(())
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        let [lf, ls] = self.latencies();
        vec![
            ("colloid.fast_latency_ns".into(), lf),
            ("colloid.slow_latency_ns".into(), ls),
            ("colloid.delta_p".into(), self.delta_p),
        ]
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        let [lf, ls] = self.latencies();
        let p = format!("{prefix}.colloid");
        out.set(format!("{p}.samples"), self.samples);
        out.set(format!("{p}.measures"), self.measures);
        out.set(format!("{p}.unbalanced_measures"), self.unbalanced);
        out.set(format!("{p}.fast_latency_ns"), lf);
        out.set(format!("{p}.slow_latency_ns"), ls);
        out.set(format!("{p}.delta_p"), self.delta_p);
        out.set(format!("{p}.p_lo"), self.p_lo);
        out.set(format!("{p}.p_hi"), self.p_hi);
        out.set(format!("{p}.promoted_pages"), self.promoted_for_balance);
        out.set(format!("{p}.demoted_pages"), self.demoted_for_balance);
    }
}

impl crate::params::SharedDefaults<TieringShared> for ColloidParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(2048.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Assumed(
            "MEMTIS' 2 GB/s migration cap (reference/memory-management.md), as Colloid runs on MEMTIS; no \
             reference gives Colloid's own limit",
        )),
            "copy_mode" => Some(Provenance::Assumed(
                "Colloid runs on HeMem, MEMTIS or TPP; HeMem's and MEMTIS' migration threads copy in the background",
            )),
            _ => None,
        }
    }
}
