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
//! # Parameters
//! [`DamonMtierParams`] (defaults, ranges and sources in `docs/parameters.md`): the
//! monitoring attributes and the two schemes' settings are mtier.c's; `schemes` (or a damo
//! file, `damo_schemes`) replace the two built-in schemes entirely.

use super::{Mover, TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared, Tiers};
use crate::agents::telemetry::damon::{resolve_path, DamonSampler};
use crate::agents::telemetry::damos::{
    schemes_from_damo_json, Action, Actor, Damos, FilterConfig, FilterKind, GoalConfig, GoalTuner, Metric,
    QuotaConfig, SchemeConfig,
};
use crate::agents::telemetry::regions::{Attrs, IntervalsGoal, RegionObserver};
use crate::agents::telemetry::Observer;
use crate::agents::{FeedKind, MachineView, Ps};
use crate::error::Result;
use crate::rng::Rng;
use crate::stats::Stats;
use crate::units::{ByteSize, Duration};
use tierlab_core::param::{params, Provenance};

/// Parameters of `damon-mtier`.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct DamonMtierParams {
    /// Sampling interval.
    #[param(
        default = Duration(5_000_000),
        sourced = "reference/damon-modern.md section 7: mtier.c, sampling interval 5 ms",
    )]
    pub sample_interval: Duration,
    /// Aggregation interval.
    #[param(
        default = Duration(100_000_000),
        sourced = "reference/damon-modern.md section 7: mtier.c, aggregation interval 100 ms",
    )]
    pub aggr_interval: Duration,
    /// Ops update interval.
    #[param(
        default = Duration(60_000_000_000),
        sourced = "reference/damon-modern.md section 7: mtier.c, ops update interval 60 s",
    )]
    pub ops_update_interval: Duration,
    /// Minimum number of regions.
    #[param(
        default = 10,
        range = "[1, 1e8]",
        unit = "regions",
        sourced = "reference/damon-modern.md section 7: mtier.c, regions 10..1000"
    )]
    pub min_nr_regions: usize,
    /// Maximum number of regions.
    #[param(
        default = 1000,
        range = "[1, 1e8]",
        unit = "regions",
        sourced = "reference/damon-modern.md section 7: mtier.c, regions 10..1000"
    )]
    pub max_nr_regions: usize,
    /// Intervals auto-tuning.
    #[param(default = true, sourced = "reference/damon-modern.md section 7: mtier.c sets an intervals goal")]
    pub auto_tune: bool,
    /// Auto-tuning goal, of possible access events.
    #[param(
        default = 400,
        range = "[1, 10000]",
        unit = "basis points",
        sourced = "reference/damon-modern.md section 7: mtier.c, intervals goal access_bp 400"
    )]
    pub tune_access_bp: u64,
    /// Auto-tuning period.
    #[param(
        default = 3,
        range = "[1, 1e6]",
        unit = "aggregations",
        sourced = "reference/damon-modern.md section 7: mtier.c, intervals goal aggrs 3"
    )]
    pub tune_aggrs: u64,
    /// Smallest sampling interval of the auto-tuning.
    #[param(
        default = Duration(5_000_000),
        sourced = "reference/damon-modern.md section 7: mtier.c, intervals goal sample range [5 ms, 10 s]",
    )]
    pub tune_min_sample: Duration,
    /// Largest sampling interval of the auto-tuning.
    #[param(
        default = Duration(10_000_000_000),
        sourced = "reference/damon-modern.md section 7: mtier.c, intervals goal sample range [5 ms, 10 s]",
    )]
    pub tune_max_sample: Duration,
    /// CPU time of one sample.
    #[param(
        default = 300.0,
        range = "[0, 1e9]",
        unit = "ns",
        assumed = "as DAMON's: per sample, two software page-table walks"
    )]
    pub ns_per_check: f64,
    /// How often the schemes apply.
    #[param(
        default = Duration(1_000_000_000),
        sourced = "reference/damon-modern.md section 7: mtier.c, apply interval 1 s",
    )]
    pub apply_interval: Duration,
    /// Size quota per window.
    #[param(
        default = ByteSize(200 << 20),
        sourced = "reference/damon-modern.md section 7: mtier.c, quota sz 200 MiB per 1000 ms",
    )]
    pub quota_sz: ByteSize,
    /// Quota window.
    #[param(
        default = Duration(1_000_000_000),
        sourced = "reference/damon-modern.md section 7: mtier.c, quota reset interval 1000 ms",
    )]
    pub quota_reset_interval: Duration,
    /// Promotion goal: fast node used.
    #[param(
        default = 9970,
        range = "[1, 10000]",
        unit = "basis points",
        sourced = "reference/damon-modern.md section 7: mtier.c, promote goal node_mem_used_bp 9970"
    )]
    pub promote_goal_bp: u64,
    /// Demotion goal: fast node free.
    #[param(
        default = 50,
        range = "[1, 10000]",
        unit = "basis points",
        sourced = "reference/damon-modern.md section 7: mtier.c, demote goal node_mem_free_bp 50"
    )]
    pub demote_goal_bp: u64,
    /// The quota goal tuner of both schemes (`goal_tuner`): `consist` (mtier.c's: the
    /// feedback loop) or `temporal` (the whole quota while below the goal, none once it is
    /// met; Linux's `DAMOS_QUOTA_GOAL_TUNER_TEMPORAL`).
    #[param(
        default,
        sourced = "reference/damon-modern.md section 7: mtier.c sets no tuner: the kernel's default, consist"
    )]
    #[serde(skip_serializing_if = "GoalTuner::is_consist")]
    pub goal_tuner: GoalTuner,
    /// The `young` filters (promote only accessed pages, demote only the others).
    #[param(
        default = true,
        sourced = "reference/damon-modern.md section 7: mtier.c, a young filter on each scheme"
    )]
    pub young_filter: bool,
    /// Emulate the kernel's one `paddr` context per node: each migration scheme sees only
    /// the pages not already on its target node (the source node's memory), whose bytes are
    /// what its quota is charged; off: one `vaddr` context, whole regions charged.
    #[param(default = true, setting)]
    pub per_node_contexts: bool,
    /// CPU time of walking one page of a region an action applies to.
    #[param(default = 20.0, range = "[0, 1e9]", unit = "ns", assumed = "as change_prot_numa per PTE")]
    pub ns_per_page: f64,
    /// Schemes replacing the two built-in ones (default: none, mtier's).
    #[param(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub schemes: Vec<SchemeConfig>,
    /// A damo scheme file (JSON) replacing the built-in schemes (appended after `schemes`).
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damo_schemes: Option<String>,
}

impl DamonMtierParams {
    /// The monitoring attributes.
    pub fn attrs(&self) -> Attrs {
        Attrs {
            sample: self.sample_interval.ps(),
            aggr: self.aggr_interval.ps(),
            ops_update: self.ops_update_interval.ps(),
            min_nr_regions: self.min_nr_regions,
            max_nr_regions: self.max_nr_regions,
            goal: self.auto_tune.then_some(IntervalsGoal {
                access_bp: self.tune_access_bp,
                aggrs: self.tune_aggrs,
                min_sample: self.tune_min_sample.ps(),
                max_sample: self.tune_max_sample.ps(),
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
        if self.apply_interval.0 == 0 || self.quota_reset_interval.0 == 0 {
            return Err(ctx.err("apply_interval", "apply_interval and quota_reset_interval must be > 0"));
        }
        let t = Tiers { fast: shared.fast_node, slow: shared.slow_node };
        let mut schemes = self.schemes.clone();
        if let Some(f) = &self.damo_schemes {
            let path = resolve_path(&ctx.scenario_file, f);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| ctx.err("damo_schemes", format!("cannot read {}: {e}", path.display())))?;
            schemes.extend(
                schemes_from_damo_json(&text, attrs.sample, attrs.aggr)
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
        Ok(Box::new(DamonMtier { obs }))
    }
    fn period(&self) -> Ps {
        self.apply_interval.ps()
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        None
    }
}

impl crate::params::SharedDefaults<TieringShared> for DamonMtierParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(65536.0)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Assumed(
            "mtier.c sets no rate limit: Linux's promotion default (65536 MB/s), far above the schemes' \
             200 MiB/s quota, so that the quota limits",
        )),
            "copy_mode" => Some(Provenance::Sourced(
                "Linux mm/damon: DAMOS migrate_hot / migrate_cold call migrate_pages in kdamond, a kernel thread",
            )),
            _ => None,
        }
    }
}

/// The `damon-mtier` policy: a DAMON context with its schemes, on the policy's core.
pub struct DamonMtier {
    obs: RegionObserver<DamonSampler>,
}

/// Actions through the tiering mover: migrations to the fast node are promotions, to the
/// slow node demotions (any other node: a plain migration).
struct MoverActor<'m> {
    mover: &'m mut Mover,
    tiers: Tiers,
    core: usize,
    /// Time charged to the core by actions and walks.
    charged: Ps,
}

impl Actor for MoverActor<'_> {
    fn migrate(&mut self, m: &mut MachineView, vas: &[u64], to: u8) -> Result<(u64, Ps)> {
        let (b0, d0, t0) = (self.mover.promoted_bytes, self.mover.demoted_bytes, self.mover.migrate);
        let bytes = if to == self.tiers.fast {
            self.mover.promote(m, vas, self.tiers, self.core)?;
            self.mover.promoted_bytes - b0
        } else if to == self.tiers.slow {
            self.mover.demote(m, vas, self.tiers, self.core)?;
            self.mover.demoted_bytes - d0
        } else {
            let r = m.migrate_pages(vas, to, self.core)?;
            self.mover.migrate += Ps::from_ns_f64(r.ns);
            self.mover.shootdown += Ps::from_ns_f64(r.shootdown_ns);
            r.bytes
        };
        let t = self.mover.migrate - t0;
        self.charged += t;
        Ok((bytes, t))
    }
    fn pageout(&mut self, m: &mut MachineView, vas: &[u64]) -> Result<(u64, Ps)> {
        let r = m.pageout_pages(vas, self.core)?;
        let t = Ps::from_ns_f64(r.ns);
        self.charged += t;
        Ok((r.bytes, t))
    }
    fn charge(&mut self, m: &mut MachineView, t: Ps) {
        m.charge(self.core, t);
        self.charged += t;
    }
}

impl TieringPolicy for DamonMtier {
    fn start(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        if ctx.machine.page_tables().is_none() {
            return Err(crate::SimError::runtime(
                "damon-mtier reads Accessed bits of radix page tables (the flat memory backend)",
            ));
        }
        let now = ctx.now;
        let n = self.obs.begin(&mut ctx.machine, now);
        ctx.charge(self.obs.check_time(n));
        Ok(())
    }

    fn next_event(&self) -> Ps {
        self.obs.next()
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        // The policy's core works from now on; actions charge it directly.
        ctx.machine.start_work(ctx.core, ctx.now);
        let tiers = ctx.tiers();
        let mut act = MoverActor { mover: &mut *ctx.kind.mover, tiers, core: ctx.core, charged: Ps::ZERO };
        let units = self.obs.step(&mut ctx.machine, ctx.now, &mut act)?;
        *ctx.cpu += act.charged;
        ctx.charge(self.obs.check_time(units));
        Ok(())
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        let mut v = vec![("damon.sampling_interval_s".to_string(), self.obs.mon.attrs.sample.secs_f64())];
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
        let ns = Ps::from_ns;
        assert_eq!((a.sample, a.aggr, a.ops_update), (ns(5_000_000), ns(100_000_000), ns(60_000_000_000)));
        let g = a.goal.unwrap();
        assert_eq!(
            (g.access_bp, g.aggrs, g.min_sample, g.max_sample),
            (400, 3, ns(5_000_000), ns(10_000_000_000))
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

    /// A scenario's `[[tiering.schemes]]` replace the built-in schemes; each number of a
    /// scheme is checked against its declared range.
    #[test]
    fn a_scenario_with_schemes_loads() {
        let text = r#"
duration = "1s"
[[machine.nodes]]
name = "dram"
capacity = "32MiB"
latency_ns = 90.0
bandwidth_gbps = 100.0
[[machine.nodes]]
name = "slow"
capacity = "1GiB"
latency_ns = 300.0
bandwidth_gbps = 20.0
tier = 1
[workload]
kind = "uniform"
footprint = "64MiB"
[tiering]
kind = "damon-mtier"
[[tiering.schemes]]
action = "migrate_hot"
target_nid = 0
min_nr_accesses = 1
min_age = 2
[tiering.schemes.quota]
sz = "100MiB"
reset_interval = "1s"
weight_nr_accesses = 100
[[tiering.schemes.quota.goals]]
metric = "node_mem_used_bp"
target = 9970
nid = 0
[tiering.schemes.watermarks]
metric = "free_mem_rate"
interval = "100ms"
high = 900
mid = 500
low = 100
[[tiering.schemes.filters]]
type = "young"
allow = true
"#;
        let load = |t: &str| {
            let src = crate::scenario::Source { text: t.into(), file: "t.toml".into(), base_dir: ".".into() };
            crate::scenario::load(&src, &[], None)
        };
        let sc = load(text).unwrap_or_else(|e| panic!("{e}"));
        let Some(super::super::TieringConfig::DamonMtier(p)) = &sc.tiering else { panic!("damon-mtier") };
        let s = &p.schemes[0];
        assert_eq!(
            (s.action, s.target_nid, s.min_nr_accesses, s.min_age),
            (Action::MigrateHot, Some(0), 1, 2)
        );
        assert_eq!((s.quota.sz.0, s.quota.weight_nr_accesses, s.watermarks.high), (100 << 20, 100, 900));
        assert_eq!(s.quota.goals[0].target, 9970);
        assert!(s.filters[0].allow && s.filters[0].matching);
        for (from, to, field, range) in [
            ("min_nr_accesses = 1", "min_nr_accesses = 1000000001", "min_nr_accesses", "[0, 1000000000]"),
            ("high = 900", "high = 1001", "watermarks.high", "[0, 1000]"),
            ("target = 9970", "target = 0", "quota.goals[0].target", "[1, 9.223372036854776e18]"),
        ] {
            let e = load(&text.replace(from, to)).expect_err("refused").to_string();
            assert!(e.contains(&format!("tiering.schemes[0].{field}")) && e.contains(range), "{to}: {e}");
        }
    }
}
