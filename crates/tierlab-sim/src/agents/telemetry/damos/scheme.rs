//! One DAMOS scheme with its runtime state: its configuration, the state of its quota's
//! charge window, its watermark state, its default filter verdicts and its statistics.

use super::config::{FilterConfig, GoalTuner, SchemeConfig};
use crate::units::Ps;

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
pub(super) struct Quota {
    pub(super) esz: u64,
    pub(super) esz_bp: u64,
    pub(super) total_charged_sz: u64,
    pub(super) total_charged: Ps,
    pub(super) charged_sz: u64,
    pub(super) charged_from: Option<Ps>,
    pub(super) charge_target_from: bool,
    pub(super) charge_addr_from: u64,
    pub(super) min_score: u32,
    pub(super) last_psi_us: Vec<u64>,
    pub(super) last_score: u64,
}

/// One scheme with its runtime state.
#[derive(Clone, Debug)]
pub struct Scheme {
    /// Configuration.
    pub cfg: SchemeConfig,
    pub(super) next_apply_sis: u64,
    pub(super) quota: Quota,
    pub(super) wmark_active: bool,
    pub(super) core_default_reject: bool,
    pub(super) ops_default_reject: bool,
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
    pub(super) fn quota_closed(&self) -> bool {
        let qc = &self.cfg.quota;
        self.quota.esz == 0 && qc.goal_tuner == GoalTuner::Temporal && !qc.goals.is_empty()
    }

    pub(super) fn has_quota(&self) -> bool {
        let q = &self.cfg.quota;
        q.ms > 0 || q.sz.0 > 0 || !q.goals.is_empty()
    }
}
