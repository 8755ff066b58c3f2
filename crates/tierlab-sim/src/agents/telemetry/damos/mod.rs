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
//! # Differences from the kernel, by design
//! - Times are simulated time ([`crate::units::Ps`]; the kernel: us and jiffies); the time quota's
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
//!
//! # Files
//! - `config.rs`: the parameters of a scheme (action, access pattern, quota and goals,
//!   watermarks, filters) and their validation;
//! - `scheme.rs`: one scheme with its runtime state (quota charge window, watermark state,
//!   statistics);
//! - `quota.rs`: the effective quota of each charge window, goals and priority scores;
//! - `engine.rs`: the schemes of a context ([`Damos`]) applied in the monitoring loop, the
//!   actions and who carries them out ([`Actor`]);
//! - `watermarks.rs`: when the schemes are active;
//! - `damo_json.rs`: damo's formats (scheme specifications in, records out).
//!
//! The schemes work on the regions of a monitoring context ([`super::monitor`]); the
//! observer that runs both is [`super::regions::RegionObserver`].

mod config;
mod damo_json;
mod engine;
mod quota;
mod scheme;
mod watermarks;

pub use config::{
    Action, FilterConfig, FilterKind, GoalConfig, GoalTuner, Metric, QuotaConfig, SchemeConfig,
    WatermarksConfig, WmarkMetric,
};
pub use damo_json::{damo_record_json, schemes_from_damo_json, RecordSnapshot};
pub use engine::{Actor, Damos, DirectActor};
pub use quota::{hot_score, MAX_SCORE};
pub use scheme::{Scheme, SchemeStats};
pub use watermarks::free_mem_permille;

#[cfg(test)]
mod testutil {
    //! A machine with regions whose schemes are due, for the tests of the scheme engine.
    pub(super) use super::super::monitor::{Attrs, Monitor, Region};
    pub(super) use super::super::regions::testutil;
    pub(super) use super::*;
    pub(super) use crate::agents::MachineView;
    pub(super) use crate::os::Machine;
    pub(super) use crate::rng::Rng;
    pub(super) use crate::units::{ByteSize, Duration, Ps};
    pub(super) use tierlab_core::PAGE_SIZE;

    pub(super) const MIB: u64 = 1 << 20;

    pub(super) fn attrs() -> Attrs {
        Attrs {
            sample: Ps::from_ns(5_000_000),
            aggr: Ps::from_ns(100_000_000),
            ops_update: Ps::from_ns(60_000_000_000),
            min_nr_regions: 3,
            max_nr_regions: 1000,
            goal: None,
        }
    }

    /// A machine with `n` regions of `sz` bytes over a populated mapping, each region's
    /// `nr_accesses` (and its moving sum) and age set, and a monitor whose schemes are due.
    pub(super) fn setup(sz: u64, nr: &[u32], age: u32) -> (Machine, Monitor, u64) {
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
    pub(super) fn scheme(action: Action) -> SchemeConfig {
        let mut s = SchemeConfig::new(action);
        s.apply_interval = Duration(5_000_000);
        s
    }

    /// The engine for `schemes`, armed on `mon` (`damon_add_scheme`).
    pub(super) fn damos(schemes: Vec<SchemeConfig>, ns_per_page: f64, mon: &Monitor) -> Damos {
        let mut d = Damos::new(schemes, ns_per_page);
        d.set_next_apply(mon);
        d
    }

    /// One sampling interval passes, then the schemes apply at `now`.
    pub(super) fn apply(d: &mut Damos, mon: &mut Monitor, m: &mut Machine, now: Ps) {
        mon.set_passed_sis(mon.passed_sis() + 1);
        let mut act = DirectActor::new(1);
        d.apply(mon, &mut MachineView::new(m), &mut act, now).unwrap();
    }
}
