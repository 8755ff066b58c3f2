//! `damon-mtier`: Linux's DAMON-based memory tiering as `samples/damon/mtier.c` sets it up
//! (torvalds/linux 00c010e1, ~v6.16; `reference/damon-modern.md` section 7): DAMON monitors
//! the memory and two DAMOS schemes move it ([`crate::agents::telemetry::damos`]).
//!
//! # The kernel's setup (mtier.c, `damon_sample_mtier_build_ctx`)
//! - Monitoring: sampling 5 ms, aggregation 100 ms, ops update 60 s, 10..1000 regions;
//!   intervals auto-tuning aiming at 4% observed accesses (`access_bp` 400, every 3
//!   aggregations, sampling interval kept in [5 ms, 10 s]).
//! - Promotion: `migrate_hot` to the fast node of regions with `nr_accesses >= 1`, applied
//!   every 1 s, quota 200 MiB per 1 s window, priority weights `nr_accesses` 100 / age 100
//!   (size 0), quota goal `node_mem_used_bp` of the fast node = 9970 (99.7% used), a `young`
//!   filter allowing only pages found accessed.
//! - Demotion: `migrate_cold` to the slow node of regions with `nr_accesses == 0`, the same
//!   interval, quota and weights, goal `node_mem_free_bp` of the fast node = 50 (0.5% free),
//!   a `young` filter rejecting pages found accessed.
//! - The goals drive the effective quota through the feedback loop
//!   (`damos_set_effective_quota`, `damon_feed_loop_next_input`): it starts at one byte and
//!   grows by `esz x (goal - score) / goal` per window while the fast node is below its
//!   goal (at most 2x, when the node is empty), so the kernel's promotion ramps up over
//!   tens of seconds from an empty fast node and barely at all from a nearly full one: at
//!   50% used the quota needs 21 windows to reach one page (4 KiB), at 90% 90 windows, at
//!   99.5% 3,977 (`docs/placement.md`).
//! - `goal_tuner = "temporal"` selects the other tuner of newer kernels (the `goal_tuner`
//!   file of a scheme's quotas, `DAMOS_QUOTA_GOAL_TUNER_TEMPORAL`,
//!   `damos_goal_tune_esz_bp_temporal` in `mm/damon/core.c`, 2026): the whole size quota
//!   (200 MiB) in every window whose score is below the goal and a zero quota once it is
//!   met, so each scheme acts from its first window and stops at its goal. mtier.c itself
//!   sets no tuner (the default, `consist`).
//! - The intervals auto-tuning calls `damon_set_attrs` every `tune_aggrs` aggregations
//!   unless the adaptation is exactly 1 (even when the sampling interval is clamped at a
//!   bound and does not change), and `damon_set_attrs` re-arms every scheme's apply time one
//!   apply interval ahead (`damos_set_next_apply_sis`). With mtier's 1 s apply interval and
//!   a tuning every 300 ms, a workload dense enough to keep the interval at its 5 ms floor
//!   never reaches an apply (`tiering-replay-kv`, `docs/placement.md`); modelled as is.
//!
//! # Differences, by design
//! The kernel runs two physical-address (`paddr`) contexts, one per node, each with one
//! scheme. The simulator has no physical address space or reverse map, so here **one
//! virtual-address context** (the process, `vaddr`, whose `migrate_hot`/`migrate_cold` exist
//! too) runs both schemes: a region's `nr_accesses` mixes pages of both nodes. With
//! `per_node_contexts` (default) each scheme emulates its node's `paddr` context: it walks
//! and filters only the pages not already on its target node (the source node's memory;
//! other pages keep their Accessed bits for the other scheme) and its quota is charged with
//! those pages' bytes, as the kernel charges a physical region of the source node; a region
//! whose source-node bytes exceed the quota left is split where its source-node bytes
//! reach that remainder aligned down to a page (`damos_apply_scheme` in `mm/damon/core.c`
//! splits a `paddr` region, made only of the source node's memory, at
//! `ALIGN_DOWN(esz - charged_sz, DAMON_MIN_REGION)`), so a window moves its whole quota.
//! Without it, the quota is charged with every byte of a region, including pages already
//! on the target, and a region is split by its whole size. The quota's resume point
//! (`damos_skip_charged_region`) moves the next window past the regions charged.
//! Migrations go through the tiering mover (`tiering.promoted_*`/`demoted_*`); the promotion
//! rate limit defaults to 65536 MB/s so that the quota, not the mover, limits.
//!
//! # Parameters (defaults: mtier.c)
//! The monitoring attributes (`sample_interval`, `aggr_interval`, `ops_update_interval`,
//! `min_nr_regions`, `max_nr_regions`, `auto_tune`, `tune_*`), `ns_per_check` (300 ns, as
//! DAMON's), `apply_interval` (1 s), `quota_sz` (200 MiB), `quota_reset_interval` (1 s),
//! `promote_goal_bp` (9970), `demote_goal_bp` (50), `goal_tuner` (`consist`; `temporal` is the
//! on/off tuner of newer kernels, below), `young_filter` (true), `per_node_contexts`
//! (true: see above), `ns_per_page`
//! (20 ns, assumption). `schemes` (or a damo file, `damo_schemes`) replace the two built-in
//! schemes entirely.

use serde::{Deserialize, Serialize};

use super::{Mover, TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared, Tiers};
use crate::agents::telemetry::damon::{resolve_path, DamonSampler};
use crate::agents::telemetry::damos::{
    schemes_from_damo_json, Action, Actor, Damos, FilterConfig, FilterKind, GoalConfig, GoalTuner, Metric,
    QuotaConfig, SchemeConfig,
};
use crate::agents::telemetry::regions::{Attrs, IntervalsGoal, RegionObserver};
use crate::agents::telemetry::Observer;
use crate::agents::{FeedKind, MachineView, Ps, NEVER};
use crate::error::Result;
use crate::rng::Rng;
use crate::stats::Stats;
use crate::units::{ByteSize, Duration};

/// Parameters of `damon-mtier`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DamonMtierParams {
    /// Sampling interval. Default 5 ms.
    #[serde(default = "d_sample")]
    pub sample_interval: Duration,
    /// Aggregation interval. Default 100 ms.
    #[serde(default = "d_aggr")]
    pub aggr_interval: Duration,
    /// Ops update interval. Default 60 s.
    #[serde(default = "d_ops")]
    pub ops_update_interval: Duration,
    /// Minimum number of regions. Default 10.
    #[serde(default = "d_min_regions")]
    pub min_nr_regions: usize,
    /// Maximum number of regions. Default 1000.
    #[serde(default = "d_max_regions")]
    pub max_nr_regions: usize,
    /// Intervals auto-tuning. Default on (mtier.c).
    #[serde(default = "d_true")]
    pub auto_tune: bool,
    /// Auto-tuning goal, basis points of possible access events. Default 400.
    #[serde(default = "d_tune_bp")]
    pub tune_access_bp: u64,
    /// Auto-tuning period, aggregations. Default 3.
    #[serde(default = "d_tune_aggrs")]
    pub tune_aggrs: u64,
    /// Smallest sampling interval of the auto-tuning. Default 5 ms.
    #[serde(default = "d_sample")]
    pub tune_min_sample: Duration,
    /// Largest sampling interval of the auto-tuning. Default 10 s.
    #[serde(default = "d_tune_max")]
    pub tune_max_sample: Duration,
    /// CPU time of one sample, ns. Default 300 (DAMON's assumption).
    #[serde(default = "d_ns_per_check")]
    pub ns_per_check: f64,
    /// How often the schemes apply. Default 1 s.
    #[serde(default = "d_second")]
    pub apply_interval: Duration,
    /// Size quota per window. Default 200 MiB.
    #[serde(default = "d_quota")]
    pub quota_sz: ByteSize,
    /// Quota window. Default 1 s.
    #[serde(default = "d_second")]
    pub quota_reset_interval: Duration,
    /// Promotion goal: fast node used, basis points. Default 9970.
    #[serde(default = "d_promote_bp")]
    pub promote_goal_bp: u64,
    /// Demotion goal: fast node free, basis points. Default 50.
    #[serde(default = "d_demote_bp")]
    pub demote_goal_bp: u64,
    /// The quota goal tuner of both schemes (`goal_tuner`): `consist` (default, mtier.c's:
    /// the feedback loop) or `temporal` (the whole quota while below the goal, none once it
    /// is met; Linux's `DAMOS_QUOTA_GOAL_TUNER_TEMPORAL`).
    #[serde(default, skip_serializing_if = "GoalTuner::is_consist")]
    pub goal_tuner: GoalTuner,
    /// The `young` filters (promote only accessed pages, demote only the others). Default on.
    #[serde(default = "d_true")]
    pub young_filter: bool,
    /// Emulate the kernel's one `paddr` context per node: each migration scheme sees only
    /// the pages not already on its target node (the source node's memory), whose bytes are
    /// what its quota is charged; off: one `vaddr` context, whole regions charged. Default on.
    #[serde(default = "d_true")]
    pub per_node_contexts: bool,
    /// CPU time of walking one page of a region an action applies to, ns. Default 20.
    #[serde(default = "d_ns_per_page")]
    pub ns_per_page: f64,
    /// Schemes replacing the two built-in ones (default: none, mtier's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schemes: Vec<SchemeConfig>,
    /// A damo scheme file (JSON) replacing the built-in schemes (appended after `schemes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damo_schemes: Option<String>,
}

fn d_sample() -> Duration {
    Duration(5_000_000)
}
fn d_aggr() -> Duration {
    Duration(100_000_000)
}
fn d_ops() -> Duration {
    Duration(60_000_000_000)
}
fn d_min_regions() -> usize {
    10
}
fn d_max_regions() -> usize {
    1000
}
fn d_true() -> bool {
    true
}
fn d_tune_bp() -> u64 {
    400
}
fn d_tune_aggrs() -> u64 {
    3
}
fn d_tune_max() -> Duration {
    Duration(10_000_000_000)
}
fn d_ns_per_check() -> f64 {
    300.0
}
fn d_second() -> Duration {
    Duration(1_000_000_000)
}
fn d_quota() -> ByteSize {
    ByteSize(200 << 20)
}
fn d_promote_bp() -> u64 {
    9970
}
fn d_demote_bp() -> u64 {
    50
}
fn d_ns_per_page() -> f64 {
    20.0
}

impl Default for DamonMtierParams {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl DamonMtierParams {
    /// The monitoring attributes.
    pub fn attrs(&self) -> Attrs {
        Attrs {
            sample_ns: self.sample_interval.0,
            aggr_ns: self.aggr_interval.0,
            ops_update_ns: self.ops_update_interval.0,
            min_nr_regions: self.min_nr_regions,
            max_nr_regions: self.max_nr_regions,
            goal: self.auto_tune.then_some(IntervalsGoal {
                access_bp: self.tune_access_bp,
                aggrs: self.tune_aggrs,
                min_sample_ns: self.tune_min_sample.0,
                max_sample_ns: self.tune_max_sample.0,
            }),
        }
    }

    /// mtier.c's scheme for one direction (`promote`: migrate_hot to `t.fast`, else
    /// migrate_cold to `t.slow`).
    pub fn mtier_scheme(&self, promote: bool, t: Tiers) -> SchemeConfig {
        let mut s = SchemeConfig::new(if promote { Action::MigrateHot } else { Action::MigrateCold });
        s.target_nid = Some(if promote { t.fast } else { t.slow });
        s.min_size = ByteSize(tierlab_core::PAGE_SIZE);
        s.min_nr_accesses = if promote { 1 } else { 0 };
        s.max_nr_accesses = if promote { None } else { Some(0) };
        s.apply_interval = self.apply_interval;
        s.quota = QuotaConfig {
            ms: 0,
            sz: self.quota_sz,
            reset_interval: self.quota_reset_interval,
            weight_sz: 0,
            weight_nr_accesses: 100,
            weight_age: 100,
            goals: vec![GoalConfig {
                metric: if promote { Metric::NodeMemUsedBp } else { Metric::NodeMemFreeBp },
                target: if promote { self.promote_goal_bp } else { self.demote_goal_bp },
                nid: Some(t.fast),
                current: 0,
            }],
            goal_tuner: self.goal_tuner,
        };
        if self.young_filter {
            s.filters.push(FilterConfig {
                kind: FilterKind::Young,
                matching: true,
                allow: promote,
                start: None,
                end: None,
                min_size: None,
                max_size: None,
                target: None,
                memcg_path: None,
            });
        }
        s
    }
}

impl TieringParams for DamonMtierParams {
    fn build(&self, shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        let attrs = self.attrs();
        attrs.validate().map_err(|(f, m)| ctx.err(f, m))?;
        for (f, v) in [("ns_per_check", self.ns_per_check), ("ns_per_page", self.ns_per_page)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ctx.err(f, format!("{v} must be >= 0")));
            }
        }
        if self.apply_interval.0 == 0 || self.quota_reset_interval.0 == 0 {
            return Err(ctx.err("apply_interval", "apply_interval and quota_reset_interval must be > 0"));
        }
        for (f, v) in [("promote_goal_bp", self.promote_goal_bp), ("demote_goal_bp", self.demote_goal_bp)] {
            if v == 0 || v > 10_000 {
                return Err(ctx.err(f, format!("{v} is not in 1..=10000")));
            }
        }
        let t = Tiers { fast: shared.fast_node, slow: shared.slow_node };
        let mut schemes = self.schemes.clone();
        if let Some(f) = &self.damo_schemes {
            let path = resolve_path(&ctx.scenario_file, f);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| ctx.err("damo_schemes", format!("cannot read {}: {e}", path.display())))?;
            schemes.extend(
                schemes_from_damo_json(&text, attrs.sample_ns, attrs.aggr_ns)
                    .map_err(|e| ctx.err("damo_schemes", format!("{}: {e}", path.display())))?,
            );
        }
        if schemes.is_empty() {
            schemes = vec![self.mtier_scheme(true, t), self.mtier_scheme(false, t)];
        }
        for (k, s) in schemes.iter().enumerate() {
            s.validate(ctx.nodes).map_err(|(f, m)| ctx.err(&format!("schemes[{k}].{f}"), m))?;
        }
        let rng = Rng::derived(ctx.seed, "tiering.damon-mtier", 0);
        let mut obs = RegionObserver::new(attrs, rng, DamonSampler::default(), self.ns_per_check, u32::MAX);
        obs.damos = Damos::new(schemes, self.ns_per_page);
        if self.per_node_contexts {
            for s in &mut obs.damos.schemes {
                s.source_node_only = true;
            }
        }
        Ok(Box::new(DamonMtier { obs, ns_per_check: self.ns_per_check }))
    }
    fn period_ns(&self) -> u64 {
        self.apply_interval.0
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        None
    }
}

crate::legacy_params!(DamonMtierParams);

impl crate::params::SharedDefaults<TieringShared> for DamonMtierParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(65536.0)
    }
}

/// The `damon-mtier` policy: a DAMON context with its schemes, on the policy's core.
pub struct DamonMtier {
    obs: RegionObserver<DamonSampler>,
    ns_per_check: f64,
}

/// Actions through the tiering mover: migrations to the fast node are promotions, to the
/// slow node demotions (any other node: a plain migration).
struct MoverActor<'m> {
    mover: &'m mut Mover,
    tiers: Tiers,
    core: usize,
    ns: f64,
}

impl Actor for MoverActor<'_> {
    fn migrate(&mut self, m: &mut MachineView, vas: &[u64], to: u8) -> Result<(u64, f64)> {
        let (b0, d0, t0) = (self.mover.promoted_bytes, self.mover.demoted_bytes, self.mover.migrate_ps);
        let bytes = if to == self.tiers.fast {
            self.mover.promote(m, vas, self.tiers, self.core)?;
            self.mover.promoted_bytes - b0
        } else if to == self.tiers.slow {
            self.mover.demote(m, vas, self.tiers, self.core)?;
            self.mover.demoted_bytes - d0
        } else {
            let r = m.migrate_pages(vas, to, self.core)?;
            self.mover.migrate_ps += (r.ns * 1000.0).round() as u64;
            r.bytes
        };
        let ns = (self.mover.migrate_ps - t0) as f64 / 1000.0;
        self.ns += ns;
        Ok((bytes, ns))
    }
    fn pageout(&mut self, m: &mut MachineView, vas: &[u64]) -> Result<(u64, f64)> {
        let r = m.pageout_pages(vas, self.core)?;
        self.ns += r.ns;
        Ok((r.bytes, r.ns))
    }
    fn charge(&mut self, m: &mut MachineView, ns: f64) {
        m.charge(self.core, ns);
        self.ns += ns;
    }
}

impl TieringPolicy for DamonMtier {
    fn start(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        if ctx.machine.page_tables().is_none() {
            return Err(crate::SimError::runtime(
                "damon-mtier reads Accessed bits of radix page tables (the flat memory backend)",
            ));
        }
        let n = self.obs.begin(ctx.machine, ctx.now_ns);
        ctx.charge(n as f64 * self.ns_per_check / 2.0);
        Ok(())
    }

    fn next_event(&self) -> Ps {
        match self.obs.next_ns() {
            u64::MAX => NEVER,
            t => t * 1000,
        }
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        ctx.sync_core();
        let now = ctx.now_ns;
        let mut act = MoverActor { mover: &mut *ctx.mover, tiers: ctx.tiers, core: ctx.core, ns: 0.0 };
        let units = self.obs.step(&mut *ctx.machine, now, &mut act)?;
        let ns = act.ns;
        *ctx.cpu_ps += crate::hw::cost::ps(ns);
        ctx.charge(units as f64 * self.ns_per_check / 2.0);
        Ok(())
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        let mut v =
            vec![("damon.sampling_interval_s".to_string(), self.obs.mon.attrs.sample_ns as f64 / 1e9)];
        for (k, x) in self.obs.damos.window_columns() {
            v.push((format!("damon.{k}"), x));
        }
        v
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        Observer::report_stats(&self.obs, &format!("{prefix}.damon"), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_mtier_c() {
        let p = DamonMtierParams::default();
        let a = p.attrs();
        assert_eq!((a.sample_ns, a.aggr_ns, a.ops_update_ns), (5_000_000, 100_000_000, 60_000_000_000));
        let g = a.goal.unwrap();
        assert_eq!(
            (g.access_bp, g.aggrs, g.min_sample_ns, g.max_sample_ns),
            (400, 3, 5_000_000, 10_000_000_000)
        );
        let t = Tiers { fast: 0, slow: 1 };
        let pr = p.mtier_scheme(true, t);
        assert_eq!(
            (pr.action, pr.target_nid, pr.min_nr_accesses, pr.max_nr_accesses),
            (Action::MigrateHot, Some(0), 1, None)
        );
        assert_eq!(
            (pr.quota.sz.0, pr.quota.reset_interval.0, pr.apply_interval.0),
            (200 << 20, 1_000_000_000, 1_000_000_000)
        );
        assert_eq!(
            pr.quota.goals[0],
            GoalConfig { metric: Metric::NodeMemUsedBp, target: 9970, nid: Some(0), current: 0 }
        );
        assert!(pr.filters[0].allow);
        let de = p.mtier_scheme(false, t);
        assert_eq!((de.action, de.target_nid, de.max_nr_accesses), (Action::MigrateCold, Some(1), Some(0)));
        assert_eq!(de.quota.goals[0].metric, Metric::NodeMemFreeBp);
        assert_eq!(de.quota.goals[0].target, 50);
        assert!(!de.filters[0].allow);
        // Serialized defaults read back identically.
        let s = toml::to_string(&p).unwrap();
        assert_eq!(toml::from_str::<DamonMtierParams>(&s).unwrap(), p);
    }
}
