//! The parameters of a DAMOS scheme, as a scenario (or damo) writes them: the action and its
//! target node, the access pattern, the quota and its goals, the watermarks and the filters
//! ([`SchemeConfig`]); their validation against the machine ([`SchemeConfig::validate`]) and
//! the access-pattern test (`__damos_valid_target`).

use serde::{Deserialize, Serialize};
use tierlab_core::param::params;

use crate::agents::telemetry::monitor::Region;
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
    pub(super) fn from_name(s: &str) -> std::result::Result<Action, String> {
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
    pub(super) fn from_name(s: &str) -> std::result::Result<Metric, String> {
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
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct GoalConfig {
    /// The metric.
    #[param(required)]
    pub metric: Metric,
    /// Its target value (in the metric's unit).
    #[param(required, range = "[1, 9223372036854775807]", setting)]
    pub target: u64,
    /// The node of node metrics.
    #[param(default, range = "[0, 255]", unit = "node", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nid: Option<u8>,
    /// `user_input`: the current value (in the metric's unit).
    #[param(default, range = "[0, 9223372036854775807]", setting)]
    pub current: u64,
}

/// A scheme's quota (`struct damos_quota`).
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaConfig {
    /// Time quota per charge window (0: none).
    #[param(default, range = "[0, 1e9]", unit = "ms", setting)]
    pub ms: u64,
    /// Size quota per charge window (0: none).
    #[param(default, setting)]
    pub sz: ByteSize,
    /// Charge window (0, the kernel's default: a new window at every application).
    #[param(default, setting)]
    pub reset_interval: Duration,
    /// Priority weight of the region size (unused by the kernel's score functions).
    #[param(default, range = "[0, 4294967295]", setting)]
    pub weight_sz: u32,
    /// Priority weight of `nr_accesses`.
    #[param(default, range = "[0, 4294967295]", setting)]
    pub weight_nr_accesses: u32,
    /// Priority weight of the age.
    #[param(default, range = "[0, 4294967295]", setting)]
    pub weight_age: u32,
    /// Goals (the feedback loop tunes the effective quota to meet them).
    #[param(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub goals: Vec<GoalConfig>,
    /// How the goals set the effective quota (the `goal_tuner` sysfs file; the kernel's
    /// default is `consist`).
    #[param(default, setting)]
    #[serde(skip_serializing_if = "GoalTuner::is_consist")]
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

/// A scheme's watermarks (`struct damos_watermarks`).
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct WatermarksConfig {
    /// The metric (`none`: always active).
    #[param(default, setting)]
    pub metric: WmarkMetric,
    /// Time between checks while inactive.
    #[param(default, setting)]
    pub interval: Duration,
    /// High watermark.
    #[param(default, range = "[0, 1000]", unit = "per mille", setting)]
    pub high: u64,
    /// Middle watermark.
    #[param(default, range = "[0, 1000]", unit = "per mille", setting)]
    pub mid: u64,
    /// Low watermark.
    #[param(default, range = "[0, 1000]", unit = "per mille", setting)]
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
    pub(super) fn for_ops(self) -> bool {
        !matches!(self, FilterKind::Addr | FilterKind::Target)
    }
}

tierlab_core::choice_param!(Action, Metric, GoalTuner, WmarkMetric, FilterKind);

/// A filter (`struct damos_filter`).
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct FilterConfig {
    /// The type.
    #[param(required)]
    #[serde(rename = "type")]
    pub kind: FilterKind,
    /// Whether memory matching (true) or not matching (false) the type is filtered.
    #[param(default = true, setting)]
    pub matching: bool,
    /// Allow (true) or reject (false) the memory the filter matches.
    #[param(default = false, setting)]
    pub allow: bool,
    /// `addr`: first byte.
    #[param(default, range = "[0, 9223372036854775807]", unit = "address", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<u64>,
    /// `addr`: one past the last byte.
    #[param(default, range = "[0, 9223372036854775807]", unit = "address", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<u64>,
    /// `hugepage_size`: smallest page size.
    #[param(default, setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_size: Option<ByteSize>,
    /// `hugepage_size`: largest page size.
    #[param(default, setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_size: Option<ByteSize>,
    /// `target`: the target index.
    #[param(default, range = "[0, 9223372036854775807]", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<usize>,
    /// `memcg`: the cgroup path (informative).
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memcg_path: Option<String>,
}

/// One scheme (`struct damos`), as configured.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct SchemeConfig {
    /// The action.
    #[param(required)]
    pub action: Action,
    /// Target node of `migrate_hot` / `migrate_cold`.
    #[param(default, range = "[0, 255]", unit = "node", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_nid: Option<u8>,
    /// Smallest region size.
    #[param(default, setting)]
    pub min_size: ByteSize,
    /// Largest region size (absent: no limit).
    #[param(default, setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_size: Option<ByteSize>,
    /// Smallest `nr_accesses` (samples per aggregation).
    #[param(default, range = "[0, 1e9]", unit = "accesses", setting)]
    pub min_nr_accesses: u32,
    /// Largest `nr_accesses` (absent: no limit).
    #[param(default, range = "[0, 1e9]", unit = "accesses", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_nr_accesses: Option<u32>,
    /// Smallest age.
    #[param(default, range = "[0, 4294967295]", unit = "aggregations", setting)]
    pub min_age: u32,
    /// Largest age (absent: no limit).
    #[param(default, range = "[0, 4294967295]", unit = "aggregations", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_age: Option<u32>,
    /// How often the scheme is applied (0: every aggregation interval, the kernel's
    /// default).
    #[param(default, setting)]
    pub apply_interval: Duration,
    /// The quota.
    #[param(default)]
    pub quota: QuotaConfig,
    /// The watermarks.
    #[param(default)]
    pub watermarks: WatermarksConfig,
    /// The filters, in order.
    #[param(default)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
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

/// `__damos_valid_target`: the access pattern.
pub(super) fn pattern_ok(cfg: &SchemeConfig, r: &Region) -> bool {
    let sz = r.size();
    let nr = r.nr_accesses_bp / 10_000;
    cfg.min_size.0 <= sz
        && cfg.max_size.is_none_or(|m| sz <= m.0)
        && cfg.min_nr_accesses <= nr
        && cfg.max_nr_accesses.is_none_or(|m| nr <= m)
        && cfg.min_age <= r.age
        && cfg.max_age.is_none_or(|m| r.age <= m)
}
