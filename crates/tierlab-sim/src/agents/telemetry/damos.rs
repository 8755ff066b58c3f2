//! DAMOS: DAMON-based operation schemes, as Linux `mm/damon/core.c` applies them (facts in
//! `reference/damon-modern.md`, checked against `core.c` and `ops-common.c` of torvalds/linux
//! at 004ded6b / 0a707d6b).
//!
//! A scheme is an **access pattern** (region size, `nr_accesses`, age ranges), an **action**
//! and its **target node**, an **apply interval**, a **quota** (time, size, reset interval;
//! goals with the kernel's feedback loop; priority weights), **watermarks** and **filters**.
//! A DAMON context runs its schemes inside kdamond's loop ([`Damos::apply`]), after the
//! access check and the merge of each sampling interval, before the interval tuning, the
//! reset and the split (`kdamond_fn`).
//!
//! # Per sampling interval (`kdamond_apply_schemes`)
//! 1. Every scheme whose apply interval is due (`passed_sample_intervals >= next_apply_sis`)
//!    and whose watermarks keep it active adjusts its quota (`damos_adjust_quota`): when the
//!    charge window (`reset_interval`) has passed, a new window starts with a new
//!    **effective size quota** (`damos_set_effective_quota`): goals make
//!    `esz_bp = damon_feed_loop_next_input(max(esz_bp, 10000), score)` with `score` the
//!    highest of the goals' `current * 10000 / target`; a time quota caps it at
//!    `throughput x ms` (throughput = bytes charged per ms of applying so far, initially
//!    4 MiB/ms); a size quota caps it at `sz`. Then a histogram of region sizes by priority
//!    score sets `min_score`: the highest score whose regions (and those above) reach `esz`.
//! 2. Every region, for every due scheme: skip when the window's quota is spent, skip the
//!    regions charged in the previous window (`damos_skip_charged_region`), check the pattern
//!    (`nr_accesses_bp / 10000`, size, age; `__damos_valid_target`) and, under a quota, the
//!    score against `min_score`; split the region to what is left of the quota; apply the
//!    core filters (`addr`, `target`); apply the action page by page through the ops filters
//!    (`young`, `anon`, `active`, `memcg`, `hugepage_size`, `unmapped`); charge the region's
//!    size; reset its age (any action but `stat`).
//! 3. Due schemes get their next apply time (`apply_interval`, default the aggregation
//!    interval).
//!
//! # Scores (`damon_hot_score` in `ops-common.c`)
//! `freq = nr_accesses x 100 / max_nr_accesses`; `age_in_log` = bit length of
//! `age x aggr_interval` in seconds (negated when `freq` is 0), scaled to 0..100; the
//! weighted mean of the two (weights `weight_nr_accesses`, `weight_age`; `weight_sz` is not
//! used, as in the kernel) scaled to 0..99. `migrate_hot` and `lru_prio` use the hot score,
//! `migrate_cold`, `pageout` and `lru_deprio` the cold one (`99 - hot`), `stat` the maximum.
//!
//! # Actions (virtual-address operations)
//! - `migrate_hot` / `migrate_cold`: pages not on `target_nid` move there in batches (one
//!   shootdown per batch); a full target node stops the batch (the kernel's
//!   `__GFP_NOWAIT` allocation fails fast);
//! - `pageout`: pages are reclaimed to swap ([`crate::os::Machine::pageout_pages`]);
//! - `lru_prio` / `lru_deprio`: pages are marked active / inactive on the LRU lists
//!   ([`crate::os::memory::LruMarks`]; reclaim-side demotion consults the marks);
//! - `stat`: nothing (statistics only).
//!
//! `willneed`, `cold`, `hugepage` and `nohugepage` are not modelled (an error names them).
//! The kernel charges the quota with the region's size whatever the action moved; so does
//! this model. `sz_applied` counts the bytes the action really changed.
//!
//! # Quota goal metrics (`damos_set_quota_goal_current_value`)
//! `user_input` (the goal's `current`), `some_mem_psi_us` (time the application's cores
//! spent in page faults — minor, NUMA hint and swap-in faults — since the last evaluation,
//! us: the simulator's stand-in for PSI "some" memory stall time), `node_mem_used_bp` /
//! `node_mem_free_bp` of `nid`, `node_memcg_used_bp` / `node_memcg_free_bp` (the simulated
//! process is the only memory cgroup, so they equal the node's), `active_mem_bp` /
//! `inactive_mem_bp` (bytes marked active by `lru_prio` over resident bytes).
//!
//! # Watermarks (`damos_wmark_wait_us`)
//! Metric `free_mem_rate`: free memory of all nodes per mille of their capacity. Above
//! `high` or below `low` a scheme deactivates; an inactive scheme activates again only in
//! `[low, mid)`; an active one stays active in `[low, high]`. When every scheme is
//! inactive, kdamond only re-checks every `interval` (no monitoring: no sampling cost).
//!
//! # Differences from the kernel, by design
//! - Times are ns of simulated time (the kernel: us and jiffies); the time quota's
//!   throughput is measured with the simulated time the actions charge (copies,
//!   shootdowns, the per-page walk `ns_per_page`), not wall-clock time.
//! - The kernel's `mtier` sample monitors physical address ranges (`paddr`), one context
//!   per node; here every context monitors the process's virtual address space (`vaddr`,
//!   whose `migrate_hot`/`migrate_cold` exist since ~6.16), so a region's `nr_accesses`
//!   mixes the pages of both nodes and the quota is charged with every byte of a region,
//!   including pages already on the target node. A scheme with `source_node_only`
//!   (`damon-mtier`'s per-node contexts) emulates the source node's `paddr` context: it
//!   walks only the pages not on its target node, its quota test and its split at the
//!   quota's remainder count those pages' bytes, and it is charged them. What it still
//!   counts by whole regions: the score histogram that sets `min_score` (the kernel's
//!   regions would hold only source-node bytes), and a region whose quota remainder is
//!   below one page is skipped without walking it (the kernel applies the action to a
//!   region with no source-node byte at all, which changes nothing but its age).
//! - The quota goal tuner is the default `consist` one; `temporal` is not modelled.

use serde::{Deserialize, Serialize};
use tierlab_core::{PageSize, PAGE_SIZE};

use super::monitor::{feed_loop_next_input, Monitor, Region};
use crate::agents::MachineView;
use crate::error::Result;
use crate::hw::pagetable::Level;
use crate::os::Flush;
use crate::stats::Stats;
use crate::units::{ByteSize, Duration};

/// A DAMOS action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Reclaim to swap.
    Pageout,
    /// Mark active on the LRU lists.
    LruPrio,
    /// Mark inactive on the LRU lists.
    LruDeprio,
    /// Migrate to `target_nid`, hottest first under a quota.
    MigrateHot,
    /// Migrate to `target_nid`, coldest first under a quota.
    MigrateCold,
    /// Statistics only.
    Stat,
}

impl Action {
    /// The name damo and the kernel use.
    pub fn name(self) -> &'static str {
        match self {
            Action::Pageout => "pageout",
            Action::LruPrio => "lru_prio",
            Action::LruDeprio => "lru_deprio",
            Action::MigrateHot => "migrate_hot",
            Action::MigrateCold => "migrate_cold",
            Action::Stat => "stat",
        }
    }
    fn from_name(s: &str) -> std::result::Result<Action, String> {
        Ok(match s {
            "pageout" => Action::Pageout,
            "lru_prio" => Action::LruPrio,
            "lru_deprio" => Action::LruDeprio,
            "migrate_hot" => Action::MigrateHot,
            "migrate_cold" => Action::MigrateCold,
            "stat" => Action::Stat,
            "willneed" | "cold" | "hugepage" | "nohugepage" => {
                return Err(format!("action `{s}` is not modelled (pageout, lru_prio, lru_deprio, migrate_hot, migrate_cold, stat are)"))
            }
            _ => return Err(format!("unknown action `{s}`")),
        })
    }
}

/// A quota goal metric (`enum damos_quota_goal_metric`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// A value the user sets (`current`).
    UserInput,
    /// Memory stall time since the last evaluation, us.
    SomeMemPsiUs,
    /// Used memory of `nid`, basis points.
    NodeMemUsedBp,
    /// Free memory of `nid`, basis points.
    NodeMemFreeBp,
    /// The memory cgroup's use of `nid`, basis points.
    NodeMemcgUsedBp,
    /// `nid`'s capacity not used by the memory cgroup, basis points.
    NodeMemcgFreeBp,
    /// Active bytes over resident bytes, basis points.
    ActiveMemBp,
    /// Inactive bytes over resident bytes, basis points.
    InactiveMemBp,
}

impl Metric {
    fn from_name(s: &str) -> std::result::Result<Metric, String> {
        Ok(match s {
            "user_input" => Metric::UserInput,
            "some_mem_psi_us" => Metric::SomeMemPsiUs,
            "node_mem_used_bp" => Metric::NodeMemUsedBp,
            "node_mem_free_bp" => Metric::NodeMemFreeBp,
            "node_memcg_used_bp" => Metric::NodeMemcgUsedBp,
            "node_memcg_free_bp" => Metric::NodeMemcgFreeBp,
            "active_mem_bp" => Metric::ActiveMemBp,
            "inactive_mem_bp" => Metric::InactiveMemBp,
            _ => return Err(format!("unknown quota goal metric `{s}`")),
        })
    }
    fn needs_nid(self) -> bool {
        matches!(
            self,
            Metric::NodeMemUsedBp | Metric::NodeMemFreeBp | Metric::NodeMemcgUsedBp | Metric::NodeMemcgFreeBp
        )
    }
}

/// A quota goal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalConfig {
    /// The metric.
    pub metric: Metric,
    /// Its target value.
    pub target: u64,
    /// The node of node metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nid: Option<u8>,
    /// `user_input`: the current value.
    #[serde(default)]
    pub current: u64,
}

/// A scheme's quota (`struct damos_quota`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    /// Time quota per charge window, ms (0: none).
    #[serde(default)]
    pub ms: u64,
    /// Size quota per charge window (0: none).
    #[serde(default)]
    pub sz: ByteSize,
    /// Charge window. Default 0 (the kernel's: a new window at every application).
    #[serde(default)]
    pub reset_interval: Duration,
    /// Priority weight of the region size (unused by the kernel's score functions).
    #[serde(default)]
    pub weight_sz: u32,
    /// Priority weight of `nr_accesses`.
    #[serde(default)]
    pub weight_nr_accesses: u32,
    /// Priority weight of the age.
    #[serde(default)]
    pub weight_age: u32,
    /// Goals (the feedback loop tunes the effective quota to meet them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub goals: Vec<GoalConfig>,
    /// How the goals set the effective quota (the `goal_tuner` sysfs file). Default
    /// `consist`.
    #[serde(default, skip_serializing_if = "GoalTuner::is_consist")]
    pub goal_tuner: GoalTuner,
}

/// How quota goals set a scheme's effective size quota (`enum damos_quota_goal_tuner`,
/// `mm/damon/core.c`; the `goal_tuner` file of a scheme's `quotas` directory).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalTuner {
    /// `DAMOS_QUOTA_GOAL_TUNER_CONSIST` (the default): the proportional feedback loop
    /// `damon_feed_loop_next_input` (`damos_goal_tune_esz_bp_consist`), which looks for the
    /// quota that keeps the goal met, growing at most 2x per window from one byte.
    #[default]
    Consist,
    /// `DAMOS_QUOTA_GOAL_TUNER_TEMPORAL` (`damos_goal_tune_esz_bp_temporal`): on/off. The
    /// whole size quota (no limit when `sz` is 0) while the score is below the goal, a zero
    /// quota (nothing applied) once it is met.
    Temporal,
}

impl GoalTuner {
    /// Whether this is the default tuner.
    pub fn is_consist(&self) -> bool {
        *self == GoalTuner::Consist
    }

    /// The tuner of that name (`consist`, `temporal`).
    pub fn from_name(name: &str) -> std::result::Result<Self, String> {
        match name {
            "consist" => Ok(Self::Consist),
            "temporal" => Ok(Self::Temporal),
            _ => Err(format!("unknown goal tuner `{name}` (consist, temporal)")),
        }
    }
}

/// The watermark metric.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WmarkMetric {
    /// Always active.
    #[default]
    None,
    /// Free memory per mille.
    FreeMemRate,
}

/// A scheme's watermarks (`struct damos_watermarks`), per mille.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatermarksConfig {
    /// The metric (default `none`: always active).
    #[serde(default)]
    pub metric: WmarkMetric,
    /// Time between checks while inactive.
    #[serde(default)]
    pub interval: Duration,
    /// High watermark.
    #[serde(default)]
    pub high: u64,
    /// Middle watermark.
    #[serde(default)]
    pub mid: u64,
    /// Low watermark.
    #[serde(default)]
    pub low: u64,
}

/// A filter type (`enum damos_filter_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FilterKind {
    /// Anonymous pages (every page of the simulated process).
    Anon,
    /// Pages marked active.
    Active,
    /// Pages of a memory cgroup (the process's: every page).
    Memcg,
    /// Pages whose Accessed bit is set (tested and cleared).
    Young,
    /// Pages of a size in `[min_size, max_size]`.
    HugepageSize,
    /// Unmapped pages (none: every page the action sees is mapped).
    Unmapped,
    /// An address range `[start, end)`.
    Addr,
    /// A monitoring target (index; one target here).
    Target,
}

impl FilterKind {
    fn for_ops(self) -> bool {
        !matches!(self, FilterKind::Addr | FilterKind::Target)
    }
}

/// A filter (`struct damos_filter`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterConfig {
    /// The type.
    #[serde(rename = "type")]
    pub kind: FilterKind,
    /// Whether memory matching (true) or not matching (false) the type is filtered.
    #[serde(default = "d_true")]
    pub matching: bool,
    /// Allow (true) or reject (false) the memory the filter matches.
    #[serde(default)]
    pub allow: bool,
    /// `addr`: first byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<u64>,
    /// `addr`: one past the last byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<u64>,
    /// `hugepage_size`: smallest page size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_size: Option<ByteSize>,
    /// `hugepage_size`: largest page size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<ByteSize>,
    /// `target`: the target index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<usize>,
    /// `memcg`: the cgroup path (informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memcg_path: Option<String>,
}

fn d_true() -> bool {
    true
}

/// One scheme (`struct damos`), as configured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemeConfig {
    /// The action.
    pub action: Action,
    /// Target node of `migrate_hot` / `migrate_cold`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_nid: Option<u8>,
    /// Smallest region size. Default 0.
    #[serde(default)]
    pub min_size: ByteSize,
    /// Largest region size. Default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<ByteSize>,
    /// Smallest `nr_accesses` (samples per aggregation). Default 0.
    #[serde(default)]
    pub min_nr_accesses: u32,
    /// Largest `nr_accesses`. Default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_nr_accesses: Option<u32>,
    /// Smallest age, aggregation intervals. Default 0.
    #[serde(default)]
    pub min_age: u32,
    /// Largest age, aggregation intervals. Default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<u32>,
    /// How often the scheme is applied (0, the default: every aggregation interval).
    #[serde(default)]
    pub apply_interval: Duration,
    /// The quota.
    #[serde(default)]
    pub quota: QuotaConfig,
    /// The watermarks.
    #[serde(default)]
    pub watermarks: WatermarksConfig,
    /// The filters, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<FilterConfig>,
}

impl SchemeConfig {
    /// A scheme with `action` and every other default.
    pub fn new(action: Action) -> Self {
        SchemeConfig {
            action,
            target_nid: None,
            min_size: ByteSize(0),
            max_size: None,
            min_nr_accesses: 0,
            max_nr_accesses: None,
            min_age: 0,
            max_age: None,
            apply_interval: Duration(0),
            quota: QuotaConfig::default(),
            watermarks: WatermarksConfig::default(),
            filters: Vec::new(),
        }
    }

    /// Check against a machine of `nodes` nodes; `(field within the scheme, problem)`.
    pub fn validate(&self, nodes: usize) -> std::result::Result<(), (String, String)> {
        let e = |f: &str, m: String| Err((f.to_string(), m));
        match (self.action, self.target_nid) {
            (Action::MigrateHot | Action::MigrateCold, None) => {
                return e("target_nid", format!("`{}` needs a target node", self.action.name()))
            }
            (_, Some(n)) if n as usize >= nodes => {
                return e("target_nid", format!("node {n} does not exist (the machine has {nodes} nodes)"))
            }
            _ => {}
        }
        if self.max_size.is_some_and(|m| m.0 < self.min_size.0) {
            return e("max_size", "is below min_size".into());
        }
        if self.max_nr_accesses.is_some_and(|m| m < self.min_nr_accesses) {
            return e("max_nr_accesses", "is below min_nr_accesses".into());
        }
        if self.max_age.is_some_and(|m| m < self.min_age) {
            return e("max_age", "is below min_age".into());
        }
        for (i, g) in self.quota.goals.iter().enumerate() {
            if g.target == 0 {
                return e(&format!("quota.goals[{i}].target"), "must be > 0".into());
            }
            match (g.metric.needs_nid(), g.nid) {
                (true, None) => {
                    return e(&format!("quota.goals[{i}].nid"), "this metric needs a node".into())
                }
                (_, Some(n)) if n as usize >= nodes => {
                    return e(&format!("quota.goals[{i}].nid"), format!("node {n} does not exist"))
                }
                _ => {}
            }
        }
        let w = &self.watermarks;
        if w.metric == WmarkMetric::FreeMemRate {
            if !(w.low <= w.mid && w.mid <= w.high && w.high <= 1000) {
                return e(
                    "watermarks",
                    format!("need low <= mid <= high <= 1000, got {} / {} / {}", w.low, w.mid, w.high),
                );
            }
            if w.interval.0 == 0 {
                return e("watermarks.interval", "must be > 0".into());
            }
        }
        for (i, f) in self.filters.iter().enumerate() {
            match f.kind {
                FilterKind::Addr if !matches!((f.start, f.end), (Some(s), Some(t)) if s < t) => {
                    return e(&format!("filters[{i}]"), "an `addr` filter needs start < end".into())
                }
                FilterKind::HugepageSize if f.min_size.is_none() || f.max_size.is_none() => {
                    return e(
                        &format!("filters[{i}]"),
                        "a `hugepage_size` filter needs min_size and max_size".into(),
                    )
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A scheme's statistics (`struct damos_stat`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchemeStats {
    /// Regions the action was tried on.
    pub nr_tried: u64,
    /// Their bytes.
    pub sz_tried: u64,
    /// Regions the action changed something in.
    pub nr_applied: u64,
    /// Bytes the action changed (pages migrated, reclaimed, marked).
    pub sz_applied: u64,
    /// Bytes that passed the ops filters.
    pub sz_ops_filter_passed: u64,
    /// Charge windows whose quota was used up.
    pub qt_exceeds: u64,
}

/// Runtime state of a scheme's quota.
#[derive(Clone, Debug, Default)]
struct Quota {
    esz: u64,
    esz_bp: u64,
    total_charged_sz: u64,
    total_charged_ns: u64,
    charged_sz: u64,
    charged_from: Option<u64>,
    charge_target_from: bool,
    charge_addr_from: u64,
    min_score: u32,
    last_psi_us: Vec<u64>,
    last_score: u64,
}

/// One scheme with its runtime state.
#[derive(Clone, Debug)]
pub struct Scheme {
    /// Configuration.
    pub cfg: SchemeConfig,
    next_apply_sis: u64,
    quota: Quota,
    wmark_active: bool,
    core_default_reject: bool,
    ops_default_reject: bool,
    /// Emulate a physical-address context of the scheme's source node on this virtual one
    /// (`damon-mtier`'s per-node contexts): a migration action sees only the pages not on
    /// its target node (others are not walked, not filtered, their Accessed bits left alone)
    /// and the quota is charged with those pages' bytes, as the kernel charges a `paddr`
    /// region made only of the source node's memory.
    pub source_node_only: bool,
    /// Statistics.
    pub stats: SchemeStats,
}

impl Scheme {
    /// A scheme in its initial state.
    pub fn new(cfg: SchemeConfig) -> Self {
        let ops: Vec<&FilterConfig> = cfg.filters.iter().filter(|f| f.kind.for_ops()).collect();
        let core: Vec<&FilterConfig> = cfg.filters.iter().filter(|f| !f.kind.for_ops()).collect();
        // damos_set_filters_default_reject: unmatched memory is rejected when the last filter
        // of its group allows (ops filters present: core filters never reject by default).
        let ops_default_reject = ops.last().is_some_and(|f| f.allow);
        let core_default_reject = if ops.is_empty() { core.last().is_some_and(|f| f.allow) } else { false };
        let goals = cfg.quota.goals.len();
        Scheme {
            cfg,
            next_apply_sis: 0,
            quota: Quota { last_psi_us: vec![0; goals], ..Quota::default() },
            wmark_active: true,
            core_default_reject,
            ops_default_reject,
            source_node_only: false,
            stats: SchemeStats::default(),
        }
    }

    /// The effective size quota in force, bytes (0: none).
    pub fn esz(&self) -> u64 {
        self.quota.esz
    }

    /// The last goal score (10,000 = on goal; 0 before the first charge window).
    pub fn last_score(&self) -> u64 {
        self.quota.last_score
    }

    /// Whether the watermarks keep the scheme active.
    pub fn active(&self) -> bool {
        self.wmark_active
    }

    /// The temporal tuner met its goal: a zero effective quota, nothing is applied this
    /// window. (A zero `esz` means "apply nothing" only when a goal set it; the kernel's zero
    /// `esz` otherwise means no quota.)
    fn quota_closed(&self) -> bool {
        let qc = &self.cfg.quota;
        self.quota.esz == 0 && qc.goal_tuner == GoalTuner::Temporal && !qc.goals.is_empty()
    }

    fn has_quota(&self) -> bool {
        let q = &self.cfg.quota;
        q.ms > 0 || q.sz.0 > 0 || !q.goals.is_empty()
    }
}

/// The maximum priority score (`DAMOS_MAX_SCORE`).
pub const MAX_SCORE: u32 = 99;

/// `damon_hot_score`: a region's hotness in 0..=99 from its `nr_accesses` and age.
pub fn hot_score(
    nr_accesses: u32,
    age: u32,
    max_nr_accesses: u64,
    aggr_ns: u64,
    w_freq: u32,
    w_age: u32,
) -> u32 {
    let freq = (nr_accesses as u64 * 100 / max_nr_accesses.max(1)) as i64;
    let mut age_in_sec = (age as u128 * aggr_ns as u128 / 1_000_000_000) as u64;
    let mut age_in_log: i64 = 0;
    while age_in_log < 32 && age_in_sec > 0 {
        age_in_log += 1;
        age_in_sec >>= 1;
    }
    if freq == 0 {
        age_in_log = -age_in_log;
    }
    let age_sub = (age_in_log + 32) * 100 / 32 / 2;
    let (wf, wa) = (w_freq as i64, w_age as i64);
    let mut hot = wf * freq + wa * age_sub;
    if wf + wa > 0 {
        hot /= wf + wa;
    }
    (hot * MAX_SCORE as i64 / 100) as u32
}

/// The score of `r` for `action` (`damon_pa_scheme_score` and the vaddr equivalent).
fn score(action: Action, r: &Region, max_nr: u64, aggr_ns: u64, q: &QuotaConfig) -> u32 {
    let hot = || hot_score(r.nr_accesses, r.age, max_nr, aggr_ns, q.weight_nr_accesses, q.weight_age);
    match action {
        Action::MigrateHot | Action::LruPrio => hot(),
        Action::MigrateCold | Action::Pageout | Action::LruDeprio => MAX_SCORE - hot(),
        Action::Stat => MAX_SCORE,
    }
}

/// What applying an action needs from the machine and whoever runs the context (a telemetry
/// technique's kdamond, or a tiering policy): migrations, reclaim, and charging its work.
pub trait Actor {
    /// Move the pages of `vas` to node `to`; returns the bytes moved and the time charged
    /// (ns). Stops early when the node is full.
    fn migrate(&mut self, m: &mut MachineView, vas: &[u64], to: u8) -> Result<(u64, f64)>;
    /// Reclaim the pages of `vas` to swap; bytes and time (ns).
    fn pageout(&mut self, m: &mut MachineView, vas: &[u64]) -> Result<(u64, f64)>;
    /// Charge `ns` of the context's own work.
    fn charge(&mut self, m: &mut MachineView, ns: f64);
}

/// The actor of a telemetry technique's own kdamond: actions run on its core (the caller
/// brought the core to now), migrations and reclaim go straight to the machine.
#[derive(Clone, Debug, Default)]
pub struct DirectActor {
    /// The kdamond's core.
    pub core: usize,
    /// Time charged to the core by actions and walks, ns.
    pub charged_ns: f64,
    /// Bytes migrated.
    pub migrated_bytes: u64,
    /// Bytes reclaimed.
    pub pageout_bytes: u64,
}

impl DirectActor {
    /// An actor charging `core`.
    pub fn new(core: usize) -> Self {
        DirectActor { core, ..Default::default() }
    }
}

impl Actor for DirectActor {
    fn migrate(&mut self, m: &mut MachineView, vas: &[u64], to: u8) -> Result<(u64, f64)> {
        let r = m.migrate_pages(vas, to, self.core)?;
        self.charged_ns += r.ns;
        self.migrated_bytes += r.bytes;
        Ok((r.bytes, r.ns))
    }
    fn pageout(&mut self, m: &mut MachineView, vas: &[u64]) -> Result<(u64, f64)> {
        let r = m.pageout_pages(vas, self.core)?;
        self.charged_ns += r.ns;
        self.pageout_bytes += r.bytes;
        Ok((r.bytes, r.ns))
    }
    fn charge(&mut self, m: &mut MachineView, ns: f64) {
        m.charge(self.core, ns);
        self.charged_ns += ns;
    }
}

/// The schemes of one DAMON context and their engine.
#[derive(Clone, Debug)]
pub struct Damos {
    /// The schemes, in order.
    pub schemes: Vec<Scheme>,
    /// CPU time of walking one page of a region an action is applied to, ns.
    pub ns_per_page: f64,
    started: bool,
    last_psi_total_us: u64,
    wmark_wait_ns: u64,
    /// Watermark checks that found every scheme inactive.
    pub inactive_checks: u64,
}

/// Pages per migration or reclaim batch (one shootdown each; Linux's batch).
const BATCH: usize = 512; // not a page size: a batch length

impl Damos {
    /// The engine for `schemes`.
    pub fn new(schemes: Vec<SchemeConfig>, ns_per_page: f64) -> Self {
        Damos {
            schemes: schemes.into_iter().map(Scheme::new).collect(),
            ns_per_page,
            started: false,
            last_psi_total_us: 0,
            wmark_wait_ns: 0,
            inactive_checks: 0,
        }
    }

    /// Whether there is any scheme.
    pub fn is_empty(&self) -> bool {
        self.schemes.is_empty()
    }

    /// `kdamond_init_ctx` for the schemes, and re-arming after the intervals changed
    /// (`damos_set_next_apply_sis`).
    pub fn set_next_apply(&mut self, mon: &Monitor) {
        let (sample, aggr) = (mon.attrs.sample_ns.max(1), mon.attrs.aggr_ns);
        for s in &mut self.schemes {
            let ai = if s.cfg.apply_interval.0 > 0 { s.cfg.apply_interval.0 } else { aggr };
            s.next_apply_sis = mon.passed_sis() + ai / sample;
        }
        self.started = true;
    }

    /// `kdamond_wait_activation`: update every scheme's watermark state; returns 0 when some
    /// scheme is active (monitoring goes on), else the time to wait before the next check, ns.
    pub fn wait_activation(&mut self, m: &MachineView) -> u64 {
        if self.schemes.is_empty() {
            return 0;
        }
        let rate = free_mem_permille(m);
        let mut min_wait: Option<u64> = None;
        for s in &mut self.schemes {
            let w = &s.cfg.watermarks;
            let wait = if w.metric == WmarkMetric::None {
                0
            } else if rate > w.high || w.low > rate {
                s.wmark_active = false;
                w.interval.0
            } else if w.high >= rate && rate >= w.mid && !s.wmark_active {
                w.interval.0
            } else {
                s.wmark_active = true;
                0
            };
            min_wait = Some(min_wait.map_or(wait, |m| m.min(wait)));
        }
        let wait = min_wait.unwrap_or(0);
        if wait > 0 {
            self.inactive_checks += 1;
        }
        self.wmark_wait_ns = wait;
        wait
    }

    /// `kdamond_apply_schemes` at `now_ns` on the regions of `mon`.
    pub fn apply(
        &mut self,
        mon: &mut Monitor,
        m: &mut MachineView,
        act: &mut dyn Actor,
        now_ns: u64,
    ) -> Result<()> {
        if !self.started {
            self.set_next_apply(mon);
        }
        let passed = mon.passed_sis();
        let max_nr = mon.attrs.max_nr_accesses();
        let aggr_ns = mon.attrs.aggr_ns;
        // PSI stand-in: fault time of the application's cores, us.
        let psi_total = m.app_total(|c| c.fault_ps) / 1_000_000;
        let mut any = false;
        for s in &mut self.schemes {
            if passed < s.next_apply_sis || !s.wmark_active {
                continue;
            }
            any = true;
            adjust_quota(s, &mon.regions, m, now_ns, max_nr, aggr_ns, psi_total);
        }
        self.last_psi_total_us = psi_total;
        if !any {
            return Ok(());
        }
        // damon_for_each_region_safe: a region split while being applied leaves its new
        // right piece for the next pass.
        let mut i = 0;
        while i < mon.regions.len() {
            let mut next = i + 1;
            let mut cur = i;
            for si in 0..self.schemes.len() {
                let s = &mut self.schemes[si];
                if passed < s.next_apply_sis || !s.wmark_active {
                    continue;
                }
                if s.quota_closed() || (s.quota.esz > 0 && s.quota.charged_sz >= s.quota.esz) {
                    continue;
                }
                match skip_charged_region(s, &mut mon.regions, cur) {
                    Skip::Skip => continue,
                    Skip::Apply(c) => {
                        if c != cur {
                            next += c - cur;
                            cur = c;
                        }
                    }
                }
                if !valid_target(s, &mon.regions[cur], max_nr, aggr_ns) {
                    continue;
                }
                let inserted = apply_scheme(s, &mut mon.regions, cur, m, act, self.ns_per_page)?;
                next += inserted;
            }
            i = next;
        }
        let sample = mon.attrs.sample_ns.max(1);
        for s in &mut self.schemes {
            if passed < s.next_apply_sis {
                continue;
            }
            let ai = if s.cfg.apply_interval.0 > 0 { s.cfg.apply_interval.0 } else { aggr_ns };
            s.next_apply_sis = passed + ai / sample;
        }
        Ok(())
    }

    /// Stats under `prefix.damos.<i>.*`.
    pub fn report_stats(&self, prefix: &str, out: &mut Stats) {
        if self.schemes.is_empty() {
            return;
        }
        out.set(format!("{prefix}.damos.schemes"), self.schemes.len());
        out.set(format!("{prefix}.damos.inactive_checks"), self.inactive_checks);
        for (i, s) in self.schemes.iter().enumerate() {
            let p = format!("{prefix}.damos.{i}");
            out.set(format!("{p}.action"), s.cfg.action.name());
            let st = &s.stats;
            out.set(format!("{p}.nr_tried"), st.nr_tried);
            out.set(format!("{p}.sz_tried"), st.sz_tried);
            out.set(format!("{p}.nr_applied"), st.nr_applied);
            out.set(format!("{p}.sz_applied"), st.sz_applied);
            out.set(format!("{p}.sz_ops_filter_passed"), st.sz_ops_filter_passed);
            out.set(format!("{p}.qt_exceeds"), st.qt_exceeds);
            out.set(format!("{p}.esz_bytes"), s.quota.esz);
            out.set(format!("{p}.goal_score_bp"), s.quota.last_score);
        }
    }

    /// Per-window columns: every scheme's effective quota and goal score.
    pub fn window_columns(&self) -> Vec<(String, f64)> {
        let mut v = Vec::new();
        for (i, s) in self.schemes.iter().enumerate() {
            v.push((format!("damos.{i}.esz_bytes"), s.quota.esz as f64));
            v.push((format!("damos.{i}.sz_applied"), s.stats.sz_applied as f64));
            if !s.cfg.quota.goals.is_empty() {
                v.push((format!("damos.{i}.goal_score_bp"), s.quota.last_score as f64));
            }
        }
        v
    }
}

/// Free memory of every node per mille of their capacity (`DAMOS_WMARK_FREE_MEM_RATE`).
pub fn free_mem_permille(m: &MachineView) -> u64 {
    let (mut cap, mut free) = (0u64, 0u64);
    for n in m.nodes() {
        cap += n.capacity_pages;
        free += n.capacity_pages.saturating_sub(n.used_pages);
    }
    free * 1000 / cap.max(1)
}

/// The current value of a goal (`damos_set_quota_goal_current_value`); `psi_delta_us` is the
/// stall time since the last evaluation.
fn goal_current(g: &GoalConfig, m: &MachineView, psi_now_us: u64, last_psi_us: &mut u64) -> u64 {
    let node_bp = |used: bool| {
        let n = &m.nodes()[g.nid.unwrap_or(0) as usize];
        let total = n.capacity_pages.max(1);
        let used_pages = n.used_pages.min(total);
        let num = if used { used_pages } else { total - used_pages };
        num * 10_000 / total
    };
    match g.metric {
        Metric::UserInput => g.current,
        Metric::SomeMemPsiUs => {
            let v = psi_now_us.saturating_sub(*last_psi_us);
            *last_psi_us = psi_now_us;
            v
        }
        Metric::NodeMemUsedBp | Metric::NodeMemcgUsedBp => node_bp(true),
        Metric::NodeMemFreeBp | Metric::NodeMemcgFreeBp => node_bp(false),
        Metric::ActiveMemBp | Metric::InactiveMemBp => {
            let resident: u64 = m.resident_bytes().iter().sum();
            let active = m.lru().active_bytes().min(resident);
            let num = if g.metric == Metric::ActiveMemBp { active } else { resident - active };
            num * 10_000 / resident.max(1)
        }
    }
}

/// `damos_adjust_quota`.
fn adjust_quota(
    s: &mut Scheme,
    regions: &[Region],
    m: &MachineView,
    now_ns: u64,
    max_nr: u64,
    aggr_ns: u64,
    psi_us: u64,
) {
    if !s.has_quota() {
        return;
    }
    let cfg = &s.cfg;
    let q = &mut s.quota;
    let new_window = match q.charged_from {
        None => true,
        Some(from) => now_ns >= from + cfg.quota.reset_interval.0,
    };
    if new_window {
        if q.esz > 0 && q.charged_sz >= q.esz {
            s.stats.qt_exceeds += 1;
        }
        q.total_charged_sz += q.charged_sz;
        q.charged_from = Some(now_ns);
        q.charged_sz = 0;
        // damos_set_effective_quota.
        let qc = &cfg.quota;
        if qc.ms == 0 && qc.goals.is_empty() {
            q.esz = qc.sz.0;
        } else {
            let mut esz = u64::MAX;
            if !qc.goals.is_empty() {
                let mut score = 0u64;
                for (k, g) in qc.goals.iter().enumerate() {
                    let cur = goal_current(g, m, psi_us, &mut q.last_psi_us[k]);
                    score = score.max(cur.saturating_mul(10_000) / g.target);
                }
                q.last_score = score;
                q.esz_bp = match qc.goal_tuner {
                    GoalTuner::Consist => feed_loop_next_input(q.esz_bp.max(10_000), score),
                    GoalTuner::Temporal if score >= 10_000 => 0,
                    GoalTuner::Temporal if qc.sz.0 > 0 => qc.sz.0.saturating_mul(10_000),
                    GoalTuner::Temporal => u64::MAX,
                };
                esz = q.esz_bp / 10_000;
            }
            if qc.ms > 0 {
                let throughput = if q.total_charged_ns > 0 {
                    (q.total_charged_sz as u128 * 1_000_000 / q.total_charged_ns as u128) as u64
                } else {
                    PAGE_SIZE * 1024
                };
                esz = esz.min(throughput.saturating_mul(qc.ms));
            }
            if qc.sz.0 > 0 && qc.sz.0 < esz {
                esz = qc.sz.0;
            }
            q.esz = esz;
        }
    }
    // The score histogram and the minimum score.
    let mut hist = [0u64; MAX_SCORE as usize + 1];
    let mut max_score = 0u32;
    for r in regions {
        if !pattern_ok(cfg, r) {
            continue;
        }
        let sc = score(cfg.action, r, max_nr, aggr_ns, &cfg.quota);
        hist[sc as usize] += r.size();
        max_score = max_score.max(sc);
    }
    let mut cum = 0u64;
    let mut sc = max_score;
    loop {
        cum += hist[sc as usize];
        if cum >= q.esz || sc == 0 {
            break;
        }
        sc -= 1;
    }
    q.min_score = sc;
}

/// `__damos_valid_target`: the access pattern.
fn pattern_ok(cfg: &SchemeConfig, r: &Region) -> bool {
    let sz = r.size();
    let nr = r.nr_accesses_bp / 10_000;
    cfg.min_size.0 <= sz
        && cfg.max_size.is_none_or(|m| sz <= m.0)
        && cfg.min_nr_accesses <= nr
        && cfg.max_nr_accesses.is_none_or(|m| nr <= m)
        && cfg.min_age <= r.age
        && cfg.max_age.is_none_or(|m| r.age <= m)
}

/// `damos_valid_target`: the pattern and, under a quota, the score.
fn valid_target(s: &Scheme, r: &Region, max_nr: u64, aggr_ns: u64) -> bool {
    if !pattern_ok(&s.cfg, r) {
        return false;
    }
    if s.quota.esz == 0 {
        return true;
    }
    score(s.cfg.action, r, max_nr, aggr_ns, &s.cfg.quota) >= s.quota.min_score
}

enum Skip {
    Skip,
    /// Apply to the region at this index (a split may have moved it right).
    Apply(usize),
}

/// `damos_skip_charged_region`.
fn skip_charged_region(s: &mut Scheme, regions: &mut Vec<Region>, i: usize) -> Skip {
    let q = &mut s.quota;
    if !q.charge_target_from {
        return Skip::Apply(i);
    }
    if i + 1 == regions.len() {
        q.charge_target_from = false;
        q.charge_addr_from = 0;
        return Skip::Skip;
    }
    let r = regions[i];
    if q.charge_addr_from != 0 && r.end <= q.charge_addr_from {
        return Skip::Skip;
    }
    let mut at = i;
    if q.charge_addr_from != 0 && r.start < q.charge_addr_from {
        let mut sz_to_skip = (q.charge_addr_from - r.start) & !(PAGE_SIZE - 1);
        if sz_to_skip == 0 {
            if r.size() <= PAGE_SIZE {
                return Skip::Skip;
            }
            sz_to_skip = PAGE_SIZE;
        }
        split_at(regions, i, sz_to_skip);
        at = i + 1;
    }
    q.charge_target_from = false;
    q.charge_addr_from = 0;
    Skip::Apply(at)
}

/// `damon_split_region_at`: region `i` keeps `sz` bytes, the rest is inserted after it.
fn split_at(regions: &mut Vec<Region>, i: usize, sz: u64) {
    let mut right = regions[i];
    right.start = regions[i].start + sz;
    regions[i].end = right.start;
    regions.insert(i + 1, right);
}

/// `damos_filter_match` of a core filter on region `i` (an `addr` filter may split it).
/// Returns whether the filter matches and how many regions were inserted.
fn core_filter_match(f: &FilterConfig, regions: &mut Vec<Region>, i: usize) -> (bool, usize) {
    let matched;
    let mut inserted = 0;
    match f.kind {
        FilterKind::Target => matched = f.target.unwrap_or(0) == 0,
        FilterKind::Addr => {
            let start = f.start.unwrap_or(0) & !(PAGE_SIZE - 1);
            let end = f.end.unwrap_or(0) & !(PAGE_SIZE - 1);
            let r = regions[i];
            if start <= r.start && r.end <= end {
                matched = true;
            } else if r.end <= start || end <= r.start {
                matched = false;
            } else if r.start < start {
                split_at(regions, i, start - r.start);
                inserted = 1;
                matched = false;
            } else {
                split_at(regions, i, end - r.start);
                inserted = 1;
                matched = true;
            }
        }
        _ => return (false, 0),
    }
    (matched == f.matching, inserted)
}

/// `damos_apply_scheme` on region `i`; returns the regions inserted after it.
fn apply_scheme(
    s: &mut Scheme,
    regions: &mut Vec<Region>,
    i: usize,
    m: &mut MachineView,
    act: &mut dyn Actor,
    ns_per_page: f64,
) -> Result<usize> {
    let mut inserted = 0;
    let mut sz = regions[i].size();
    let q = &s.quota;
    let source_only = s.source_node_only && matches!(s.cfg.action, Action::MigrateHot | Action::MigrateCold);
    // Under a per-node context the split size is charged as source-node bytes.
    let mut split_charge: Option<u64> = None;
    if source_only && q.esz > 0 {
        // The source node's `paddr` region holds only the source node's pages, so the
        // kernel's test `charged_sz + sz > esz` and its split at
        // `ALIGN_DOWN(esz - charged_sz, DAMON_MIN_REGION)` count source-node bytes: the
        // region is cut after the page where its source bytes reach that size.
        let rem = q.esz.saturating_sub(q.charged_sz);
        let lim = rem & !(PAGE_SIZE - 1);
        if lim == 0 {
            // The kernel skips (sz = 0) unless the region has no source page at all, where
            // applying would change nothing but the region's age; no walk here.
            s.stats.nr_tried += 1;
            return Ok(0);
        }
        let r = regions[i];
        if let Some(cut) = source_cut(m, r.start, r.end, s.cfg.target_nid, lim, rem) {
            if cut < r.end {
                split_at(regions, i, cut - r.start);
                inserted += 1;
            }
            split_charge = Some(lim);
        }
    } else if q.esz > 0 && q.charged_sz + sz > q.esz {
        sz = q.esz.saturating_sub(q.charged_sz) & !(PAGE_SIZE - 1);
        if sz == 0 {
            s.stats.nr_tried += 1;
            s.stats.sz_tried += sz;
            return Ok(0);
        }
        split_at(regions, i, sz);
        inserted += 1;
    }
    // damos_filter_out: the core filters.
    let mut allowed: Option<bool> = None;
    let core_filters: Vec<FilterConfig> =
        s.cfg.filters.iter().filter(|f| !f.kind.for_ops()).cloned().collect();
    for f in &core_filters {
        let (hit, ins) = core_filter_match(f, regions, i);
        inserted += ins;
        if hit {
            allowed = Some(f.allow);
            break;
        }
    }
    if !allowed.unwrap_or(!s.core_default_reject) {
        return Ok(inserted);
    }
    let r = regions[i];
    let (applied, passed, ns, source) = apply_action(s, r.start, r.end, m, act, ns_per_page)?;
    if source_only {
        // The source node's context would hold only these pages of the region (a region
        // cut at the quota's remainder is charged that remainder, as the kernel charges
        // the split size).
        sz = split_charge.unwrap_or(source);
    }
    let q = &mut s.quota;
    q.total_charged_ns += ns.round() as u64;
    q.charged_sz += sz;
    if q.esz > 0 && q.charged_sz >= q.esz {
        q.charge_target_from = true;
        q.charge_addr_from = r.end + 1;
    }
    if s.cfg.action != Action::Stat {
        regions[i].age = 0;
    }
    let st = &mut s.stats;
    st.nr_tried += 1;
    st.sz_tried += sz;
    if applied > 0 {
        st.nr_applied += 1;
    }
    st.sz_applied += applied;
    st.sz_ops_filter_passed += passed;
    Ok(inserted)
}

/// Where a per-node context splits a region under a quota: walking `[start, end)`, the
/// present pages not on `target` (the source node's memory) are counted; if they add up to
/// more than `rem` (the quota left), the region is cut at the end of the page where they
/// reach `lim` (`rem` aligned down to a page; a huge page may carry the count past it, as
/// the kernel's walk migrates a folio that starts in the region whole). `None`: the
/// region's source bytes fit in `rem`, no split. The walk stops at the first source page
/// past the cut.
fn source_cut(m: &MachineView, start: u64, end: u64, target: Option<u8>, lim: u64, rem: u64) -> Option<u64> {
    let mut cum = 0u64;
    let mut cut = None;
    let mut va = start;
    while va < end {
        // Runs of the target node's pages (and absent ones) count nothing: skip them whole.
        if let Some(next) = target.and_then(|t| m.skip_node_run(va, end, t)) {
            va = next;
            continue;
        }
        let Some(size) = m.page_size_of(va) else {
            va = (va & !(PAGE_SIZE - 1)) + PAGE_SIZE;
            continue;
        };
        let base = size.base(va);
        let next = base + size.bytes();
        if m.node_of(base) != target {
            cum += size.bytes();
            if cut.is_none() && cum >= lim {
                cut = Some(next.min(end));
            }
            if cum > rem {
                return cut;
            }
        }
        va = next;
    }
    None
}

/// Walk `[start, end)` page by page through the ops filters and apply the action. Returns
/// (bytes applied, bytes that passed the filters, time in ns, bytes of present pages not on
/// the migration target: what a source-node context would see).
fn apply_action(
    s: &Scheme,
    start: u64,
    end: u64,
    m: &mut MachineView,
    act: &mut dyn Actor,
    ns_per_page: f64,
) -> Result<(u64, u64, f64, u64)> {
    let ops: Vec<&FilterConfig> = s.cfg.filters.iter().filter(|f| f.kind.for_ops()).collect();
    let action = s.cfg.action;
    let target = s.cfg.target_nid;
    let mut batch: Vec<u64> = Vec::new();
    let (mut applied, mut passed, mut ns) = (0u64, 0u64, 0.0f64);
    let mut walked = 0u64;
    let mut source = 0u64;
    let source_only = s.source_node_only && matches!(action, Action::MigrateHot | Action::MigrateCold);
    let mut va = start;
    let mut run: Option<(u64, u64)> = None; // lru marks: a run of passed pages
    let flush = |batch: &mut Vec<u64>,
                 m: &mut MachineView,
                 act: &mut dyn Actor,
                 applied: &mut u64,
                 ns: &mut f64|
     -> Result<bool> {
        if batch.is_empty() {
            return Ok(true);
        }
        let (bytes, t) = match action {
            Action::MigrateHot | Action::MigrateCold => act.migrate(m, batch, target.unwrap_or(0))?,
            Action::Pageout => act.pageout(m, batch)?,
            _ => (0, 0.0),
        };
        *applied += bytes;
        *ns += t;
        let full = matches!(action, Action::MigrateHot | Action::MigrateCold)
            && bytes < batch.iter().map(|&v| page_bytes(m, v)).sum::<u64>();
        batch.clear();
        Ok(!full)
    };
    let mut room = true;
    while va < end {
        if source_only {
            // A run of the target node's pages (and absent ones): not in the source node's
            // context, nothing to walk.
            if let Some(next) = target.and_then(|t| m.skip_node_run(va, end, t)) {
                va = next;
                continue;
            }
        }
        let Some(size) = m.page_size_of(va) else {
            // Not present: the next base page.
            va = (va & !(PAGE_SIZE - 1)) + PAGE_SIZE;
            continue;
        };
        let base = size.base(va);
        let bytes = size.bytes();
        if source_only && m.node_of(base) == target {
            // Another node's memory: not in the source node's context.
            va = base + bytes;
            continue;
        }
        source += bytes;
        walked += 1;
        // The ops filters (first match decides; else the default).
        let mut allow: Option<bool> = None;
        for f in &ops {
            let matched = match f.kind {
                FilterKind::Anon | FilterKind::Memcg => true,
                FilterKind::Unmapped => false,
                FilterKind::Active => m.lru().is_active(base),
                FilterKind::HugepageSize => {
                    f.min_size.is_none_or(|x| x.0 <= bytes) && f.max_size.is_none_or(|x| bytes <= x.0)
                }
                FilterKind::Young => {
                    let level = Level::leaf_of(size);
                    // Tested and cleared (damon_folio_mkold), without a TLB flush.
                    m.clear_accessed(base, level, Flush::None)
                }
                FilterKind::Addr | FilterKind::Target => continue,
            };
            if matched == f.matching {
                allow = Some(f.allow);
                break;
            }
        }
        let ok = allow.unwrap_or(!s.ops_default_reject);
        if ok {
            passed += bytes;
            match action {
                Action::MigrateHot | Action::MigrateCold => {
                    if room && m.node_of(base) != target {
                        batch.push(base);
                        if batch.len() == BATCH {
                            room = flush(&mut batch, m, act, &mut applied, &mut ns)?;
                        }
                    }
                }
                Action::Pageout => {
                    batch.push(base);
                    if batch.len() == BATCH {
                        flush(&mut batch, m, act, &mut applied, &mut ns)?;
                    }
                }
                Action::LruPrio | Action::LruDeprio => {
                    run = match run {
                        Some((rs, re)) if re == base => Some((rs, base + bytes)),
                        Some((rs, re)) => {
                            m.lru_mark(rs, re, action == Action::LruPrio);
                            applied += re - rs;
                            Some((base, base + bytes))
                        }
                        None => Some((base, base + bytes)),
                    };
                }
                Action::Stat => {}
            }
        }
        va = base + bytes;
    }
    if room {
        flush(&mut batch, m, act, &mut applied, &mut ns)?;
    }
    if let Some((rs, re)) = run {
        m.lru_mark(rs, re, action == Action::LruPrio);
        applied += re - rs;
    }
    let walk_ns = walked as f64 * ns_per_page;
    act.charge(m, walk_ns);
    ns += walk_ns;
    Ok((applied, passed, ns, source))
}

fn page_bytes(m: &MachineView, va: u64) -> u64 {
    m.page_size_of(va).map_or(PAGE_SIZE, PageSize::bytes)
}

// ---------------------------------------------------------------------------------------
// damo's scheme specifications.

/// Parse schemes as written for damo (`damo args damos --format json`, `damo start
/// --damos ...` files): a JSON list of schemes, an object with `schemes`, or damo's whole
/// DAMON parameters (`kdamonds[].contexts[].schemes`, every context's schemes in order).
/// damo's units are understood: sizes (`"4.000 KiB"`, `"max"`), `nr_accesses` in percent
/// (`"5 %"`) or samples (`"3 samples"`), ages in time (`"10 s"`) or aggregation intervals
/// (`"3 aggr_intervals"`), times (`"1 s"`, microseconds as numbers), per-mille weights
/// and watermarks (`"10 %"`, `"100 permil"` or numbers). Percent and time values are
/// converted with the context's intervals (`sample_ns`, `aggr_ns`), as damo does when it
/// commits them to the kernel. Errors name the scheme index and the field.
pub fn schemes_from_damo_json(
    text: &str,
    sample_ns: u64,
    aggr_ns: u64,
) -> std::result::Result<Vec<SchemeConfig>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let list: Vec<serde_json::Value> = if let Some(a) = v.as_array() {
        a.clone()
    } else if let Some(s) = v.get("schemes").and_then(|s| s.as_array()) {
        s.clone()
    } else if let Some(k) = v.get("kdamonds").and_then(|k| k.as_array()) {
        let mut out = Vec::new();
        for kd in k {
            for ctx in kd.get("contexts").and_then(|c| c.as_array()).into_iter().flatten() {
                out.extend(ctx.get("schemes").and_then(|s| s.as_array()).into_iter().flatten().cloned());
            }
        }
        out
    } else {
        return Err(
            "expected a list of schemes, {\"schemes\": [...]}, or damo's {\"kdamonds\": [...]}".into()
        );
    };
    list.iter()
        .enumerate()
        .map(|(i, s)| damo_scheme(s, sample_ns, aggr_ns).map_err(|(f, e)| format!("schemes[{i}].{f}: {e}")))
        .collect()
}

type FieldErr = (String, String);

fn ferr(f: &str, e: impl Into<String>) -> FieldErr {
    (f.to_string(), e.into())
}

/// A damo text or number: `Ok(None)` for "max" (no limit), `Ok(Some(0))`... for "min".
fn damo_text(v: &serde_json::Value) -> std::result::Result<String, String> {
    match v {
        serde_json::Value::String(s) => Ok(s.trim().to_string()),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        serde_json::Value::Bool(b) => Ok(b.to_string()),
        serde_json::Value::Null => Err("missing value".into()),
        _ => Err(format!("expected a number or a string, got {v}")),
    }
}

fn damo_nr(s: &str) -> std::result::Result<f64, String> {
    let t: String = s.chars().filter(|&c| c != ',').collect();
    t.trim().parse::<f64>().map_err(|_| format!("`{s}` is not a number"))
}

/// `text_to_bytes`; `None` for "max".
fn damo_bytes(v: &serde_json::Value) -> std::result::Result<Option<u64>, String> {
    let s = damo_text(v)?;
    match s.as_str() {
        "max" => return Ok(None),
        "min" => return Ok(Some(0)),
        _ => {}
    }
    if let Ok(n) = damo_nr(&s) {
        // damo writes "no limit" as ULONG_MAX.
        return Ok(if n >= u64::MAX as f64 { None } else { Some(n as u64) });
    }
    let units = [
        ("EiB", 60),
        ("PiB", 50),
        ("TiB", 40),
        ("GiB", 30),
        ("MiB", 20),
        ("KiB", 10),
        ("EB", 60),
        ("PB", 50),
        ("TB", 40),
        ("GB", 30),
        ("MB", 20),
        ("KB", 10),
        ("E", 60),
        ("P", 50),
        ("T", 40),
        ("G", 30),
        ("M", 20),
        ("K", 10),
        ("B", 0),
    ];
    for (u, shift) in units {
        if let Some(num) = s.strip_suffix(u) {
            let n = damo_nr(num)?;
            return Ok(Some((n * (1u64 << shift) as f64) as u64));
        }
    }
    Err(format!("`{s}` is not a size"))
}

/// `text_to_ns`; `None` for "max". Multi-field values ("1 m 30 s") are summed.
fn damo_ns(v: &serde_json::Value, number_unit_ns: f64) -> std::result::Result<Option<u64>, String> {
    let s = damo_text(v)?;
    match s.as_str() {
        "max" => return Ok(None),
        "min" => return Ok(Some(0)),
        _ => {}
    }
    if let Ok(n) = damo_nr(&s) {
        return Ok(Some((n * number_unit_ns) as u64));
    }
    let fields: Vec<&str> = s.split_whitespace().collect();
    let mut total = 0f64;
    let mut k = 0;
    while k < fields.len() {
        let (num, unit, step) = if k + 1 < fields.len() && damo_nr(fields[k]).is_ok() {
            (damo_nr(fields[k])?, fields[k + 1], 2)
        } else {
            let f = fields[k];
            let split =
                f.find(|c: char| c.is_ascii_alphabetic()).ok_or_else(|| format!("`{s}` is not a time"))?;
            (damo_nr(&f[..split])?, &f[split..], 1)
        };
        let mult = match unit {
            "ns" => 1.0,
            "us" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "d" => 86400e9,
            _ => return Err(format!("`{s}`: unknown time unit `{unit}`")),
        };
        total += num * mult;
        k += step;
    }
    Ok(Some(total as u64))
}

/// `text_to_ratio` of a percent, per-mille or basis-point value, as a ratio.
fn damo_ratio(v: &serde_json::Value, number_is: f64) -> std::result::Result<f64, String> {
    let s = damo_text(v)?;
    if let Ok(n) = damo_nr(&s) {
        return Ok(n / number_is);
    }
    if let Some(p) = s.strip_suffix('%') {
        return Ok(damo_nr(p)? / 100.0);
    }
    if let Some(p) = s.strip_suffix("permil") {
        return Ok(damo_nr(p)? / 1000.0);
    }
    if let Some(p) = s.strip_suffix("bp") {
        return Ok(damo_nr(p)? / 10_000.0);
    }
    Err(format!("`{s}` is not a ratio"))
}

fn damo_bool(v: &serde_json::Value) -> std::result::Result<bool, String> {
    match v {
        serde_json::Value::Bool(b) => Ok(*b),
        serde_json::Value::String(s) => match s.to_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(true),
            "n" | "no" | "false" => Ok(false),
            _ => Err(format!("`{s}` is not a boolean")),
        },
        _ => Err(format!("{v} is not a boolean")),
    }
}

fn get<'a>(v: &'a serde_json::Value, k: &str) -> Option<&'a serde_json::Value> {
    v.get(k).filter(|x| !x.is_null())
}

fn damo_scheme(
    s: &serde_json::Value,
    sample_ns: u64,
    aggr_ns: u64,
) -> std::result::Result<SchemeConfig, FieldErr> {
    let action = get(s, "action").map_or(Ok("stat".to_string()), damo_text).map_err(|e| ferr("action", e))?;
    let action = Action::from_name(&action).map_err(|e| ferr("action", e))?;
    let mut c = SchemeConfig::new(action);
    if let Some(t) = get(s, "target_nid") {
        let n =
            damo_nr(&damo_text(t).map_err(|e| ferr("target_nid", e))?).map_err(|e| ferr("target_nid", e))?;
        c.target_nid = Some(n as u8);
    }
    if get(s, "dests").and_then(|d| d.as_array()).is_some_and(|d| !d.is_empty()) {
        return Err(ferr("dests", "weighted migration destinations are not modelled; use target_nid"));
    }
    let max_nr = (aggr_ns / sample_ns.max(1)) as f64;
    if let Some(p) = get(s, "access_pattern") {
        if let Some(sz) = get(p, "sz_bytes") {
            if let Some(v) = get(sz, "min") {
                c.min_size = ByteSize(
                    damo_bytes(v).map_err(|e| ferr("access_pattern.sz_bytes.min", e))?.unwrap_or(u64::MAX),
                );
            }
            if let Some(v) = get(sz, "max") {
                c.max_size = damo_bytes(v).map_err(|e| ferr("access_pattern.sz_bytes.max", e))?.map(ByteSize);
            }
        }
        let nr = |v: &serde_json::Value, f: &str| -> std::result::Result<Option<u32>, FieldErr> {
            let t = damo_text(v).map_err(|e| ferr(f, e))?;
            if t == "max" {
                return Ok(None);
            }
            if t == "min" {
                return Ok(Some(0));
            }
            let fields: Vec<&str> = t.split_whitespace().collect();
            if fields.len() == 2 && (fields[1] == "samples" || fields[1] == "sample_intervals") {
                return Ok(Some(damo_nr(fields[0]).map_err(|e| ferr(f, e))? as u32));
            }
            // Percent (damo's default unit): samples = percent x max / 100.
            let pct = if let Some(p) = t.strip_suffix('%') { damo_nr(p) } else { damo_nr(&t) }
                .map_err(|e| ferr(f, e))?;
            Ok(Some((pct * max_nr / 100.0) as u32))
        };
        if let Some(n) = get(p, "nr_accesses") {
            if let Some(v) = get(n, "min") {
                c.min_nr_accesses = nr(v, "access_pattern.nr_accesses.min")?.unwrap_or(u32::MAX);
            }
            if let Some(v) = get(n, "max") {
                c.max_nr_accesses = nr(v, "access_pattern.nr_accesses.max")?;
            }
        }
        let age = |v: &serde_json::Value, f: &str| -> std::result::Result<Option<u32>, FieldErr> {
            let t = damo_text(v).map_err(|e| ferr(f, e))?;
            let fields: Vec<&str> = t.split_whitespace().collect();
            if fields.len() == 2 && fields[1] == "aggr_intervals" {
                return Ok(Some(damo_nr(fields[0]).map_err(|e| ferr(f, e))? as u32));
            }
            // Time (damo's default unit: microseconds as plain numbers).
            Ok(damo_ns(v, 1e3).map_err(|e| ferr(f, e))?.map(|ns| (ns / aggr_ns.max(1)) as u32))
        };
        if let Some(a) = get(p, "age") {
            if let Some(v) = get(a, "min") {
                c.min_age = age(v, "access_pattern.age.min")?.unwrap_or(u32::MAX);
            }
            if let Some(v) = get(a, "max") {
                c.max_age = age(v, "access_pattern.age.max")?;
            }
        }
    }
    if let Some(v) = get(s, "apply_interval_us") {
        c.apply_interval = Duration(damo_ns(v, 1e3).map_err(|e| ferr("apply_interval_us", e))?.unwrap_or(0));
    }
    if let Some(q) = get(s, "quotas") {
        if let Some(v) = get(q, "time_ms") {
            c.quota.ms = damo_ns(v, 1e6).map_err(|e| ferr("quotas.time_ms", e))?.unwrap_or(0) / 1_000_000;
        }
        if let Some(v) = get(q, "sz_bytes") {
            c.quota.sz = ByteSize(damo_bytes(v).map_err(|e| ferr("quotas.sz_bytes", e))?.unwrap_or(0));
        }
        if let Some(v) = get(q, "reset_interval_ms") {
            c.quota.reset_interval = Duration(
                damo_ns(v, 1e6).map_err(|e| ferr("quotas.reset_interval_ms", e))?.unwrap_or(u64::MAX / 2),
            );
        }
        if let Some(v) = get(q, "goal_tuner") {
            let name = damo_text(v).map_err(|e| ferr("quotas.goal_tuner", e))?;
            c.quota.goal_tuner = GoalTuner::from_name(&name).map_err(|e| ferr("quotas.goal_tuner", e))?;
        }
        if let Some(w) = get(q, "weights") {
            for (k, dst) in [
                ("sz_permil", &mut c.quota.weight_sz),
                ("nr_accesses_permil", &mut c.quota.weight_nr_accesses),
                ("age_permil", &mut c.quota.weight_age),
            ] {
                if let Some(v) = get(w, k) {
                    *dst = (damo_ratio(v, 1000.0).map_err(|e| ferr(&format!("quotas.weights.{k}"), e))?
                        * 1000.0)
                        .round() as u32;
                }
            }
        }
        for (gi, g) in get(q, "goals").and_then(|g| g.as_array()).into_iter().flatten().enumerate() {
            let f = |k: &str| format!("quotas.goals[{gi}].{k}");
            let metric = get(g, "metric")
                .map_or(Ok("user_input".to_string()), damo_text)
                .map_err(|e| ferr(&f("metric"), e))?;
            let metric = Metric::from_name(&metric).map_err(|e| ferr(&f("metric"), e))?;
            let value = |k: &str| -> std::result::Result<u64, FieldErr> {
                let Some(v) = get(g, k) else { return Ok(0) };
                Ok(match metric {
                    Metric::SomeMemPsiUs => {
                        damo_ns(v, 1e3).map_err(|e| ferr(&f(k), e))?.unwrap_or(u64::MAX) / 1000
                    }
                    Metric::UserInput => damo_nr(&damo_text(v).map_err(|e| ferr(&f(k), e))?)
                        .map_err(|e| ferr(&f(k), e))? as u64,
                    _ => (damo_ratio(v, 10_000.0).map_err(|e| ferr(&f(k), e))? * 10_000.0).round() as u64,
                })
            };
            let nid = match get(g, "nid") {
                Some(v) => Some(
                    damo_nr(&damo_text(v).map_err(|e| ferr(&f("nid"), e))?).map_err(|e| ferr(&f("nid"), e))?
                        as u8,
                ),
                None => None,
            };
            c.quota.goals.push(GoalConfig {
                metric,
                target: value("target_value")?,
                nid,
                current: value("current_value")?,
            });
        }
    }
    if let Some(w) = get(s, "watermarks") {
        let metric = get(w, "metric")
            .map_or(Ok("none".to_string()), damo_text)
            .map_err(|e| ferr("watermarks.metric", e))?;
        c.watermarks.metric = match metric.as_str() {
            "none" => WmarkMetric::None,
            "free_mem_rate" => WmarkMetric::FreeMemRate,
            m => return Err(ferr("watermarks.metric", format!("unknown metric `{m}`"))),
        };
        if let Some(v) = get(w, "interval_us") {
            c.watermarks.interval =
                Duration(damo_ns(v, 1e3).map_err(|e| ferr("watermarks.interval_us", e))?.unwrap_or(0));
        }
        for (k, dst) in [
            ("high_permil", &mut c.watermarks.high),
            ("mid_permil", &mut c.watermarks.mid),
            ("low_permil", &mut c.watermarks.low),
        ] {
            if let Some(v) = get(w, k) {
                *dst = (damo_ratio(v, 1000.0).map_err(|e| ferr(&format!("watermarks.{k}"), e))? * 1000.0)
                    .round() as u64;
            }
        }
    }
    for (fi, f) in get(s, "filters").and_then(|x| x.as_array()).into_iter().flatten().enumerate() {
        let fl = |k: &str| format!("filters[{fi}].{k}");
        let kind =
            get(f, "filter_type").map(damo_text).transpose().map_err(|e| ferr(&fl("filter_type"), e))?;
        let kind = match kind.as_deref() {
            Some("anon") => FilterKind::Anon,
            Some("active") => FilterKind::Active,
            Some("memcg") => FilterKind::Memcg,
            Some("young") => FilterKind::Young,
            Some("hugepage_size") => FilterKind::HugepageSize,
            Some("unmapped") => FilterKind::Unmapped,
            Some("addr") => FilterKind::Addr,
            Some("target") => FilterKind::Target,
            other => return Err(ferr(&fl("filter_type"), format!("unknown filter type {other:?}"))),
        };
        let matching =
            get(f, "matching").map_or(Ok(true), damo_bool).map_err(|e| ferr(&fl("matching"), e))?;
        let allow = get(f, "allow")
            .or_else(|| get(f, "filter_pass"))
            .map_or(Ok(false), damo_bool)
            .map_err(|e| ferr(&fl("allow"), e))?;
        let mut fc = FilterConfig {
            kind,
            matching,
            allow,
            start: None,
            end: None,
            min_size: None,
            max_size: None,
            target: None,
            memcg_path: get(f, "memcg_path").and_then(|v| v.as_str()).map(str::to_string),
        };
        if kind == FilterKind::Addr {
            let r = get(f, "address_range").ok_or_else(|| ferr(&fl("address_range"), "missing"))?;
            let num = |k: &str| -> std::result::Result<u64, FieldErr> {
                let v = get(r, k).ok_or_else(|| ferr(&fl(&format!("address_range.{k}")), "missing"))?;
                damo_nr(&damo_text(v).map_err(|e| ferr(&fl(k), e))?)
                    .map(|n| n as u64)
                    .map_err(|e| ferr(&fl(k), e))
            };
            fc.start = Some(num("start")?);
            fc.end = Some(num("end")?);
        }
        if kind == FilterKind::HugepageSize {
            let h = get(f, "hugepage_size")
                .and_then(|h| h.as_array())
                .ok_or_else(|| ferr(&fl("hugepage_size"), "missing [min, max]"))?;
            if h.len() != 2 {
                return Err(ferr(&fl("hugepage_size"), "expected [min, max]"));
            }
            fc.min_size = Some(ByteSize(
                damo_bytes(&h[0]).map_err(|e| ferr(&fl("hugepage_size"), e))?.unwrap_or(u64::MAX),
            ));
            fc.max_size = Some(ByteSize(
                damo_bytes(&h[1]).map_err(|e| ferr(&fl("hugepage_size"), e))?.unwrap_or(u64::MAX),
            ));
        }
        if kind == FilterKind::Target {
            let v = get(f, "damon_target_idx").ok_or_else(|| ferr(&fl("damon_target_idx"), "missing"))?;
            fc.target = Some(
                damo_nr(&damo_text(v).map_err(|e| ferr(&fl("damon_target_idx"), e))?)
                    .map_err(|e| ferr(&fl("damon_target_idx"), e))? as usize,
            );
        }
        c.filters.push(fc);
    }
    Ok(c)
}

// ---------------------------------------------------------------------------------------
// damo records of region snapshots.

/// One snapshot for a damo record: `(start_ns, end_ns, regions)`.
pub type RecordSnapshot = (u64, u64, Vec<crate::agents::SnapRegion>);

/// A damo record (the JSON `damo record` writes and `damo report` reads, machine-friendly
/// numbers): one record for the context's one target, with its intervals and every
/// snapshot (`nr_accesses` in samples and percent, age in aggregation intervals and us).
pub fn damo_record_json(
    sample_ns: u64,
    aggr_ns: u64,
    ops_update_ns: u64,
    snapshots: &[RecordSnapshot],
) -> String {
    let max_nr = (aggr_ns / sample_ns.max(1)).max(1);
    let snaps: Vec<serde_json::Value> = snapshots
        .iter()
        .map(|(s, e, regions)| {
            let total: u64 = regions.iter().map(|r| r.end - r.start).sum();
            serde_json::json!({
                "start_time": s.to_string(),
                "end_time": e.to_string(),
                "regions": regions.iter().map(|r| serde_json::json!({
                    "start": r.start.to_string(),
                    "end": r.end.to_string(),
                    "nr_accesses": {"samples": r.nr_accesses, "percent": r.nr_accesses as u64 * 100 / max_nr},
                    "age": {"usec": (r.age as u64 * aggr_ns / 1000).to_string(), "aggr_intervals": r.age},
                })).collect::<Vec<_>>(),
                "total_bytes": total.to_string(),
            })
        })
        .collect();
    let rec = serde_json::json!([{
        "kdamond_idx": 0,
        "context_idx": 0,
        "intervals": {
            "sample_us": (sample_ns / 1000).to_string(),
            "aggr_us": (aggr_ns / 1000).to_string(),
            "ops_update_us": (ops_update_ns / 1000).to_string(),
        },
        "scheme_idx": null,
        "target_id": 0,
        "snapshots": snaps,
    }]);
    serde_json::to_string(&rec).expect("json")
}

#[cfg(test)]
mod tests {
    use super::super::monitor::Attrs;
    use super::super::regions::testutil;
    use super::*;
    use crate::os::Machine;
    use crate::rng::Rng;

    const MIB: u64 = 1 << 20;

    fn attrs() -> Attrs {
        Attrs {
            sample_ns: 5_000_000,
            aggr_ns: 100_000_000,
            ops_update_ns: 60_000_000_000,
            min_nr_regions: 3,
            max_nr_regions: 1000,
            goal: None,
        }
    }

    /// A machine with `n` regions of `sz` bytes over a populated mapping, each region's
    /// `nr_accesses` (and its moving sum) and age set, and a monitor whose schemes are due.
    fn setup(sz: u64, nr: &[u32], age: u32) -> (Machine, Monitor, u64) {
        let mut m = testutil::machine();
        let base = testutil::map(&mut m, sz * nr.len() as u64, "x");
        let mut mon = Monitor::new(attrs(), Rng::new(1));
        mon.init(&MachineView::new(&mut m));
        mon.regions = nr
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let mut r = Region::new(base + i as u64 * sz, base + (i as u64 + 1) * sz);
                r.nr_accesses = n;
                r.nr_accesses_bp = n * 10_000;
                r.age = age;
                r
            })
            .collect();
        mon.set_passed_sis(1_000);
        (m, mon, base)
    }

    /// A scheme applied at every sampling interval.
    fn scheme(action: Action) -> SchemeConfig {
        let mut s = SchemeConfig::new(action);
        s.apply_interval = Duration(5_000_000);
        s
    }

    /// The engine for `schemes`, armed on `mon` (`damon_add_scheme`).
    fn damos(schemes: Vec<SchemeConfig>, ns_per_page: f64, mon: &Monitor) -> Damos {
        let mut d = Damos::new(schemes, ns_per_page);
        d.set_next_apply(mon);
        d
    }

    /// One sampling interval passes, then the schemes apply at `now_ns`.
    fn apply(d: &mut Damos, mon: &mut Monitor, m: &mut Machine, now_ns: u64) {
        mon.set_passed_sis(mon.passed_sis() + 1);
        let mut act = DirectActor::new(1);
        d.apply(mon, &mut MachineView::new(m), &mut act, now_ns).unwrap();
    }

    #[test]
    fn quota_prioritizes_by_score_and_actions_reset_the_age() {
        // Four 1 MiB regions seen in 20, 10, 5 and 0 of 20 samples, age 7. Weights: access
        // frequency only, so score = freq * 99 / 100 = 99, 49, 24, 0. A 2 MiB quota: the
        // histogram from 99 down reaches 2 MiB at 49, so min_score = 49 and exactly the two
        // hottest regions are marked active.
        let (mut m, mut mon, base) = setup(MIB, &[20, 10, 5, 0], 7);
        let mut s = scheme(Action::LruPrio);
        s.quota.sz = ByteSize(2 * MIB);
        s.quota.reset_interval = Duration(1_000_000_000);
        s.quota.weight_nr_accesses = 100;
        let mut d = damos(vec![s], 0.0, &mon);
        apply(&mut d, &mut mon, &mut m, 0);
        assert_eq!(d.schemes[0].quota.min_score, 49);
        assert_eq!(d.schemes[0].esz(), 2 * MIB);
        let st = &d.schemes[0].stats;
        assert_eq!((st.nr_tried, st.sz_tried, st.nr_applied, st.sz_applied), (2, 2 * MIB, 2, 2 * MIB));
        let lru = &m.os.mem.lru;
        assert_eq!(lru.active_bytes(), 2 * MIB);
        assert!(lru.is_active(base) && lru.is_active(base + 2 * MIB - 1) && !lru.is_active(base + 2 * MIB));
        // Any action but `stat` resets the age of the regions it was applied to.
        let ages: Vec<u32> = mon.regions.iter().map(|r| r.age).collect();
        assert_eq!(ages, vec![0, 0, 7, 7]);
        // The quota is spent for this window: nothing more until it resets.
        apply(&mut d, &mut mon, &mut m, 500_000_000);
        assert_eq!(d.schemes[0].stats.nr_tried, 2);
        // `stat` without a quota: every region, ages kept.
        let (mut m, mut mon, _) = setup(MIB, &[20, 10, 5, 0], 7);
        let mut d = damos(vec![scheme(Action::Stat)], 0.0, &mon);
        apply(&mut d, &mut mon, &mut m, 0);
        let st = &d.schemes[0].stats;
        assert_eq!((st.nr_tried, st.sz_tried, st.sz_applied), (4, 4 * MIB, 0));
        assert!(mon.regions.iter().all(|r| r.age == 7));
    }

    #[test]
    fn source_node_only_walks_and_charges_only_the_source_nodes_pages() {
        // Two cold 1 MiB regions on node 0; a quarter of region 0's pages already on node 1.
        // migrate_cold to node 1 as one node-0 `paddr` context would apply it: the pages on
        // node 1 are not part of it, so the scheme is charged 0.75 MiB for region 0, not 1.
        for on in [false, true] {
            let (mut m, mut mon, base) = setup(MIB, &[0, 0], 5);
            let moved: Vec<u64> = (0..64).map(|i| base + i * 4096).collect();
            m.migrate_pages(&moved, 1, 0).unwrap();
            let mut s = scheme(Action::MigrateCold);
            s.target_nid = Some(1);
            s.max_nr_accesses = Some(0);
            let mut d = damos(vec![s], 0.0, &mon);
            d.schemes[0].source_node_only = on;
            apply(&mut d, &mut mon, &mut m, 0);
            let st = &d.schemes[0].stats;
            let tried = if on { 2 * MIB - 64 * 4096 } else { 2 * MIB };
            assert_eq!(st.sz_tried, tried, "source_node_only = {on}");
            assert_eq!(st.sz_applied, 2 * MIB - 64 * 4096, "only node-0 pages move");
            assert!((0..512).all(|i| m.node_of(base + i * 4096) == Some(1)));
        }
    }

    #[test]
    fn source_node_only_splits_at_the_quota_in_source_bytes() {
        // Two cold 1 MiB regions, every other page already on node 1; migrate_cold to node 1
        // under a 64 KiB quota per 100 ms window. A node-0 `paddr` context's region holds
        // only its 128 node-0 pages, so the kernel splits it 64 KiB (16 source pages) in:
        // here after the 16th node-0 page (VA offset 128 KiB), and exactly 64 KiB move per
        // window. Split by the whole size (no per-node context), the cut falls at VA 64 KiB
        // and only half of that moves.
        for on in [false, true] {
            let (mut m, mut mon, base) = setup(MIB, &[0, 0], 5);
            let moved: Vec<u64> = (0..256).map(|i| base + 2 * i * 4096).collect();
            m.migrate_pages(&moved, 1, 0).unwrap();
            let mut s = scheme(Action::MigrateCold);
            s.target_nid = Some(1);
            s.max_nr_accesses = Some(0);
            s.quota.sz = ByteSize(64 << 10);
            s.quota.reset_interval = Duration(100_000_000);
            let mut d = damos(vec![s], 0.0, &mon);
            d.schemes[0].source_node_only = on;
            apply(&mut d, &mut mon, &mut m, 0);
            let st = &d.schemes[0].stats;
            let want = if on { 64 << 10 } else { 32 << 10 };
            assert_eq!(st.sz_applied, want, "source_node_only = {on}");
            assert_eq!(d.schemes[0].quota.charged_sz, 64 << 10);
            let cut = if on { 128 << 10 } else { 64 << 10 };
            assert_eq!(mon.regions[0].end - base, cut, "source_node_only = {on}");
            let on_node0 = (0..512).filter(|&i| m.node_of(base + i * 4096) == Some(0)).count();
            assert_eq!(on_node0 as u64, 256 - want / 4096);
            if on {
                // The next window resumes after the cut and moves the next 16 source pages.
                apply(&mut d, &mut mon, &mut m, 100_000_000);
                assert_eq!(d.schemes[0].stats.sz_applied, 128 << 10);
            }
        }
    }

    /// Quota windows for a goal-driven quota to reach `bytes` from its initial state at a
    /// fixed goal score (`damos_set_effective_quota`: `esz_bp = next(max(esz_bp, 10000),
    /// score)`, `esz = esz_bp / 10000`).
    fn windows_to(bytes: u64, score: u64) -> Option<u32> {
        let mut bp = 0u64;
        for n in 1..=20_000 {
            bp = feed_loop_next_input(bp.max(10_000), score);
            if bp / 10_000 >= bytes {
                return Some(n);
            }
        }
        None
    }

    #[test]
    fn mtier_quota_ramp_takes_the_documented_windows() {
        // docs/placement.md, "DAMON-mtier and the length of a run": promotion's score is
        // used_bp * 10000 / 9970, demotion's free_bp * 10000 / 50.
        let promo = |used_bp: u64| used_bp * 10_000 / 9970;
        let page = PAGE_SIZE;
        let cap = 200 << 20;
        let got: Vec<(Option<u32>, Option<u32>)> = [0, 5000, 9000, 9400, 9700, 9900, 9950]
            .iter()
            .map(|&u| (windows_to(page, promo(u)), windows_to(cap, promo(u))))
            .collect();
        let want = [(12, 28), (21, 48), (90, 207), (150, 345), (312, 717), (1177, 2710), (3977, 9146)];
        assert_eq!(got, want.iter().map(|&(a, b)| (Some(a), Some(b))).collect::<Vec<_>>());
        let demo = |free_bp: u64| free_bp * 10_000 / 50;
        let got: Vec<Option<u32>> = [0, 10, 17, 25, 40].iter().map(|&f| windows_to(page, demo(f))).collect();
        assert_eq!(got, [12, 15, 17, 21, 46].map(Some).to_vec());
        assert_eq!(windows_to(page, demo(100)), None, "1% free: reset to the minimum");
        // The interleaved group's end state: 99.6% used (score 9,960).
        assert_eq!(windows_to(page, 9960), Some(2087));
    }

    #[test]
    fn access_pattern_filters_regions() {
        // Pattern nr_accesses in [5, 10] and age >= 3, reading nr_accesses_bp / 10000.
        let (mut m, mut mon, _) = setup(MIB, &[20, 10, 5, 0], 3);
        mon.regions[1].age = 2;
        mon.regions[2].nr_accesses_bp = 59_999; // 5.9999 samples -> 5
        let mut s = scheme(Action::Stat);
        s.min_nr_accesses = 5;
        s.max_nr_accesses = Some(10);
        s.min_age = 3;
        let mut d = damos(vec![s], 0.0, &mon);
        apply(&mut d, &mut mon, &mut m, 0);
        assert_eq!(d.schemes[0].stats.nr_tried, 1, "only region 2 (region 1 is too young)");
        assert_eq!(d.schemes[0].stats.sz_tried, MIB);
    }

    #[test]
    fn quota_splits_a_region_and_resumes_after_it_next_window() {
        // Three equally hot 1 MiB regions, a 1.5 MiB quota per 100 ms window. Window 1:
        // region 0 whole, region 1 split at 0.5 MiB (the quota left), charge_addr_from =
        // its end + 1. Window 2 (damos_skip_charged_region): regions ending at or before
        // that address are skipped; the region starting just below it is split one page in
        // (ALIGN_DOWN(1 byte) = 0 -> one page) and that page is skipped too; then
        // 0.5 MiB - 4 KiB and 1 MiB are charged.
        let (mut m, mut mon, base) = setup(MIB, &[20, 20, 20], 0);
        let mut s = scheme(Action::LruPrio);
        s.quota.sz = ByteSize(3 * MIB / 2);
        s.quota.reset_interval = Duration(100_000_000);
        s.quota.weight_nr_accesses = 100;
        let mut d = damos(vec![s], 0.0, &mon);
        apply(&mut d, &mut mon, &mut m, 0);
        let bounds: Vec<(u64, u64)> = mon.regions.iter().map(|r| (r.start - base, r.end - base)).collect();
        assert_eq!(bounds, vec![(0, MIB), (MIB, 3 * MIB / 2), (3 * MIB / 2, 2 * MIB), (2 * MIB, 3 * MIB)]);
        assert_eq!(m.os.mem.lru.active_bytes(), 3 * MIB / 2);
        apply(&mut d, &mut mon, &mut m, 50_000_000);
        assert_eq!(m.os.mem.lru.active_bytes(), 3 * MIB / 2, "quota spent in this window");
        apply(&mut d, &mut mon, &mut m, 100_000_000);
        assert_eq!(d.schemes[0].stats.qt_exceeds, 1);
        let bounds: Vec<(u64, u64)> = mon.regions.iter().map(|r| (r.start - base, r.end - base)).collect();
        let p = PAGE_SIZE;
        assert_eq!(
            bounds,
            vec![
                (0, MIB),
                (MIB, 3 * MIB / 2),
                (3 * MIB / 2, 3 * MIB / 2 + p),
                (3 * MIB / 2 + p, 2 * MIB),
                (2 * MIB, 3 * MIB)
            ]
        );
        let lru = &m.os.mem.lru;
        assert_eq!(lru.active_bytes(), 3 * MIB - p);
        assert!(!lru.is_active(base + 3 * MIB / 2), "the page split off at the resume point is skipped");
        assert_eq!(d.schemes[0].quota.charged_sz, 3 * MIB / 2 - p);
    }

    #[test]
    fn goal_feedback_follows_the_kernel_law_and_converges() {
        // A `user_input` goal of 10000 with current 5000: score 5000 every window, so
        // esz_bp = last + last * 5000 / 10000 (integer), from max(0, 10000); esz = esz_bp / 10000.
        let (mut m, mut mon, _) = setup(MIB, &[20, 20, 20], 0);
        let mut s = scheme(Action::Stat);
        s.quota.reset_interval = Duration(10_000_000);
        s.quota.goals =
            vec![GoalConfig { metric: Metric::UserInput, target: 10_000, nid: None, current: 5000 }];
        let mut d = damos(vec![s], 0.0, &mon);
        let mut want_bp = 10_000u64;
        for w in 0..30u64 {
            apply(&mut d, &mut mon, &mut m, w * 10_000_000);
            want_bp += want_bp * 5000 / 10_000;
            assert_eq!(d.schemes[0].quota.esz_bp, want_bp, "window {w}");
            assert_eq!(d.schemes[0].esz(), want_bp / 10_000);
            assert_eq!(d.schemes[0].last_score(), 5000);
        }
        // A closed loop: the plant reports current = esz / 1024 against a target of 1000, so
        // the goal is met at esz = 1,024,000 bytes. From one byte the quota at most doubles
        // per window and then settles (x' = x (2 - x / x*): no overshoot from below).
        let (mut m, mut mon, _) = setup(MIB, &[20, 20, 20], 0);
        let mut s = scheme(Action::Stat);
        s.quota.reset_interval = Duration(10_000_000);
        s.quota.goals = vec![GoalConfig { metric: Metric::UserInput, target: 1000, nid: None, current: 0 }];
        let mut d = damos(vec![s], 0.0, &mon);
        let goal = 1_024_000f64;
        let mut trace = Vec::new();
        for w in 0..80u64 {
            apply(&mut d, &mut mon, &mut m, w * 10_000_000);
            let esz = d.schemes[0].esz();
            trace.push(esz);
            d.schemes[0].cfg.quota.goals[0].current = esz / 1024;
        }
        for w in trace.windows(2) {
            assert!(w[1] <= 2 * w[0] + 1, "at most doubles: {trace:?}");
            assert!(w[1] as f64 <= goal * 1.001, "no overshoot: {trace:?}");
        }
        let last = *trace.last().unwrap() as f64;
        assert!((last - goal).abs() / goal < 0.002, "converged to {last}, goal {goal}: {trace:?}");
        // Above twice the goal the quota drops to its minimum (one byte).
        d.schemes[0].cfg.quota.goals[0].current = 2000;
        apply(&mut d, &mut mon, &mut m, 80 * 10_000_000);
        assert_eq!(d.schemes[0].esz(), 1);
    }

    #[test]
    fn temporal_tuner_opens_the_whole_quota_below_the_goal_and_closes_at_it() {
        // `damos_goal_tune_esz_bp_temporal`: score < 10000 -> esz = sz; score >= 10000 -> a
        // zero quota under which nothing is applied.
        let (mut m, mut mon, _) = setup(MIB, &[20, 20, 20], 0);
        let mut s = scheme(Action::LruPrio);
        s.quota.sz = ByteSize(MIB);
        s.quota.reset_interval = Duration(100_000_000);
        s.quota.weight_nr_accesses = 100;
        s.quota.goal_tuner = GoalTuner::Temporal;
        s.quota.goals =
            vec![GoalConfig { metric: Metric::UserInput, target: 10_000, nid: None, current: 9999 }];
        let mut d = damos(vec![s], 0.0, &mon);
        apply(&mut d, &mut mon, &mut m, 0);
        assert_eq!(d.schemes[0].esz(), MIB, "below the goal: the whole quota from the first window");
        assert_eq!(m.os.mem.lru.active_bytes(), MIB);
        d.schemes[0].cfg.quota.goals[0].current = 10_000;
        apply(&mut d, &mut mon, &mut m, 100_000_000);
        assert_eq!(d.schemes[0].esz(), 0);
        assert_eq!(m.os.mem.lru.active_bytes(), MIB, "goal met: nothing applied");
        d.schemes[0].cfg.quota.goals[0].current = 0;
        apply(&mut d, &mut mon, &mut m, 200_000_000);
        assert_eq!(d.schemes[0].esz(), MIB);
        assert_eq!(m.os.mem.lru.active_bytes(), 2 * MIB, "below again: the whole quota again");
        // Without a size quota, no limit below the goal.
        let (mut m, mut mon, _) = setup(MIB, &[20, 20, 20], 0);
        let mut s = scheme(Action::LruPrio);
        s.quota.reset_interval = Duration(100_000_000);
        s.quota.goal_tuner = GoalTuner::Temporal;
        s.quota.goals = vec![GoalConfig { metric: Metric::UserInput, target: 10_000, nid: None, current: 0 }];
        let mut d = damos(vec![s], 0.0, &mon);
        apply(&mut d, &mut mon, &mut m, 0);
        assert_eq!(d.schemes[0].esz(), u64::MAX / 10_000);
        assert_eq!(m.os.mem.lru.active_bytes(), 3 * MIB);
        // The damo spelling.
        let c = schemes_from_damo_json(
            r#"[{"action": "stat", "quotas": {"sz_bytes": 4096, "goal_tuner": "temporal",
                "goals": [{"metric": "user_input", "target_value": 100, "current_value": 5}]}}]"#,
            5_000_000,
            100_000_000,
        )
        .unwrap();
        assert_eq!(c[0].quota.goal_tuner, GoalTuner::Temporal);
        let e = schemes_from_damo_json(
            r#"[{"action": "stat", "quotas": {"goal_tuner": "eager"}}]"#,
            5_000_000,
            100_000_000,
        )
        .unwrap_err();
        assert!(e.contains("quotas.goal_tuner") && e.contains("eager"), "{e}");
    }

    #[test]
    fn time_quota_uses_measured_throughput() {
        // ms = 10, nothing charged yet: the initial guess is PAGE_SIZE * 1024 bytes per ms.
        let (mut m, mut mon, _) = setup(MIB, &[20, 20, 20], 0);
        let mut s = scheme(Action::LruPrio);
        s.quota.ms = 10;
        s.quota.reset_interval = Duration(100_000_000);
        let mut d = damos(vec![s], 1000.0, &mon); // 1 us per page walked
        apply(&mut d, &mut mon, &mut m, 0);
        assert_eq!(d.schemes[0].esz(), PAGE_SIZE * 1024 * 10);
        // 3 MiB = 768 pages charged in 768 us: 4096 bytes per us = 4,096,000 per ms.
        apply(&mut d, &mut mon, &mut m, 100_000_000);
        assert_eq!(d.schemes[0].esz(), 4_096_000 * 10);
    }

    #[test]
    fn watermarks_activate_and_deactivate_as_the_kernel_does() {
        // Free memory per mille of both nodes; high 500, mid 400, low 200.
        let mut m = testutil::machine();
        let total: u64 = m.os.mem.nodes.iter().map(|n| n.capacity_pages).sum();
        let set_free = |m: &mut Machine, permille: u64| {
            let used = total - total * permille / 1000;
            let c0 = m.os.mem.nodes[0].capacity_pages;
            m.os.mem.nodes[0].used_pages = used.min(c0);
            m.os.mem.nodes[1].used_pages = used.saturating_sub(c0);
        };
        let mut s = scheme(Action::Stat);
        s.watermarks = WatermarksConfig {
            metric: WmarkMetric::FreeMemRate,
            interval: Duration(1_000_000_000),
            high: 500,
            mid: 400,
            low: 200,
        };
        let mut d = Damos::new(vec![s], 0.0);
        let mut step = |m: &mut Machine, free: u64| {
            set_free(m, free);
            let w = d.wait_activation(&MachineView::new(m));
            (w, d.schemes[0].active())
        };
        assert_eq!(step(&mut m, 1000), (1_000_000_000, false), "above high: off");
        assert_eq!(step(&mut m, 450), (1_000_000_000, false), "in [mid, high] an inactive scheme stays off");
        assert_eq!(step(&mut m, 300), (0, true), "in [low, mid): on");
        assert_eq!(step(&mut m, 450), (0, true), "in [mid, high] an active scheme stays on");
        assert_eq!(step(&mut m, 199), (1_000_000_000, false), "below low: off");
        assert_eq!(step(&mut m, 250), (0, true));
        assert_eq!(d.inactive_checks, 3);
    }

    #[test]
    fn hot_score_follows_the_kernel() {
        // aggr 100 ms, 20 samples: full frequency, age 0 -> (100*100 + 100*50)/200 = 75 -> 74.
        assert_eq!(hot_score(20, 0, 20, 100_000_000, 100, 100), 75 * 99 / 100);
        // No access, old (age 100 aggregations = 10 s -> log 4): age subscore (-4+32)*100/64
        // = 43; hot = (0 + 43*100)/200 = 21 -> 20.
        assert_eq!(hot_score(0, 100, 20, 100_000_000, 100, 100), 21 * 99 / 100);
        // Weights zero: hotness 0.
        assert_eq!(hot_score(20, 10, 20, 100_000_000, 0, 0), 0);
        // No access, age 0: age subscore 50; hot = (0 + 50*100)/200 = 25 -> 24; cold = 75.
        assert_eq!(MAX_SCORE - hot_score(0, 0, 20, 100_000_000, 100, 100), 99 - 25 * 99 / 100);
    }

    #[test]
    fn damo_json_schemes_parse_with_units() {
        // As damo prints them (human-readable), the mtier promotion scheme.
        let text = r#"[{
            "action": "migrate_hot", "target_nid": 0,
            "access_pattern": {"sz_bytes": {"min": "4.000 KiB", "max": "max"},
                               "nr_accesses": {"min": "5 %", "max": "100 %"},
                               "age": {"min": "0 ns", "max": "max"}},
            "apply_interval_us": "1 s",
            "quotas": {"time_ms": "0 ns", "sz_bytes": "200.000 MiB", "reset_interval_ms": "1 s",
                       "goals": [{"metric": "node_mem_used_bp", "nid": "0", "target_value": "99.7 %", "current_value": "0"}],
                       "effective_sz_bytes": "0 B",
                       "weights": {"sz_permil": "0 %", "nr_accesses_permil": "10 %", "age_permil": "10 %"}},
            "watermarks": {"metric": "none", "interval_us": "0 ns", "high_permil": "0 %", "mid_permil": "0 %", "low_permil": "0 %"},
            "filters": [{"filter_type": "young", "matching": true, "allow": true, "memcg_path": null,
                         "address_range": null, "damon_target_idx": null, "hugepage_size": null}]
        }]"#;
        let s = schemes_from_damo_json(text, 5_000_000, 100_000_000).unwrap();
        assert_eq!(s.len(), 1);
        let c = &s[0];
        assert_eq!((c.action, c.target_nid), (Action::MigrateHot, Some(0)));
        assert_eq!((c.min_size.0, c.max_size), (4096, None));
        assert_eq!((c.min_nr_accesses, c.max_nr_accesses), (1, Some(20)), "5 % of 20 samples");
        assert_eq!((c.min_age, c.max_age), (0, None));
        assert_eq!(c.apply_interval.0, 1_000_000_000);
        assert_eq!((c.quota.ms, c.quota.sz.0, c.quota.reset_interval.0), (0, 200 << 20, 1_000_000_000));
        assert_eq!(
            c.quota.goals,
            vec![GoalConfig { metric: Metric::NodeMemUsedBp, target: 9970, nid: Some(0), current: 0 }]
        );
        assert_eq!((c.quota.weight_sz, c.quota.weight_nr_accesses, c.quota.weight_age), (0, 100, 100));
        assert_eq!(c.filters[0].kind, FilterKind::Young);
        assert!(c.filters[0].allow && c.filters[0].matching);
        // Machine-friendly (raw) numbers and samples / aggr_intervals units, inside damo's
        // whole parameters.
        let raw = r#"{"kdamonds": [{"contexts": [{"schemes": [{"action": "pageout",
            "access_pattern": {"sz_bytes": {"min": 4096, "max": 18446744073709551615},
                               "nr_accesses": {"min": "0 samples", "max": "0 samples"},
                               "age": {"min": "10 aggr_intervals", "max": "max"}},
            "apply_interval_us": 0,
            "quotas": {"time_ms": 10, "sz_bytes": 104857600, "reset_interval_ms": 1000,
                       "weights": {"sz_permil": 0, "nr_accesses_permil": 0, "age_permil": 1000}},
            "watermarks": {"metric": "free_mem_rate", "interval_us": 5000000,
                           "high_permil": 500, "mid_permil": 400, "low_permil": 200}}]}]}]}"#;
        let s = schemes_from_damo_json(raw, 5_000_000, 100_000_000).unwrap();
        let c = &s[0];
        assert_eq!(
            (c.action, c.min_nr_accesses, c.max_nr_accesses, c.min_age),
            (Action::Pageout, 0, Some(0), 10)
        );
        assert_eq!((c.quota.ms, c.quota.sz.0, c.quota.reset_interval.0), (10, 100 << 20, 1_000_000_000));
        assert_eq!(
            (c.watermarks.metric, c.watermarks.high, c.watermarks.mid, c.watermarks.low),
            (WmarkMetric::FreeMemRate, 500, 400, 200)
        );
        assert_eq!(c.watermarks.interval.0, 5_000_000_000);
        // Errors name the scheme and the field.
        let e =
            schemes_from_damo_json(r#"[{"action": "stat"}, {"action": "willneed"}]"#, 5_000_000, 100_000_000)
                .unwrap_err();
        assert!(e.starts_with("schemes[1].action") && e.contains("not modelled"), "{e}");
        let e = schemes_from_damo_json(
            r#"[{"action": "stat", "quotas": {"sz_bytes": "12 parsecs"}}]"#,
            5_000_000,
            100_000_000,
        )
        .unwrap_err();
        assert!(e.starts_with("schemes[0].quotas.sz_bytes"), "{e}");
    }

    #[test]
    fn damo_record_roundtrips_through_json() {
        let snaps = vec![(
            0,
            100_000_000,
            vec![crate::agents::SnapRegion { start: 4096, end: 8192, nr_accesses: 10, age: 3 }],
        )];
        let j: serde_json::Value =
            serde_json::from_str(&damo_record_json(5_000_000, 100_000_000, 1_000_000_000, &snaps)).unwrap();
        let r = &j[0]["snapshots"][0]["regions"][0];
        assert_eq!(r["nr_accesses"]["percent"], 50);
        assert_eq!(r["age"]["aggr_intervals"], 3);
        assert_eq!(r["age"]["usec"], "300000");
        assert_eq!(j[0]["intervals"]["aggr_us"], "100000");
    }
}
