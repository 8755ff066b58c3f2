//! The quota of a DAMOS scheme (`damos_adjust_quota`): at each charge window the effective
//! size quota from the time and size quotas and the goals' feedback loop, then the priority
//! score above which regions are applied to.
//!
//! # Scores (`damon_hot_score` in `ops-common.c`)
//! `freq = nr_accesses x 100 / max_nr_accesses`; `age_in_log` = bit length of
//! `age x aggr_interval` in seconds (negated when `freq` is 0), scaled to 0..100; the
//! weighted mean of the two (weights `weight_nr_accesses`, `weight_age`; `weight_sz` is not
//! used, as in the kernel) scaled to 0..99. `migrate_hot` and `lru_prio` use the hot score,
//! `migrate_cold`, `pageout` and `lru_deprio` the cold one (`99 - hot`), `stat` the maximum.
//!
//! # Quota goal metrics (`damos_set_quota_goal_current_value`)
//! `user_input` (the goal's `current`), `some_mem_psi_us` (time the application's cores
//! spent in page faults — minor, NUMA hint and swap-in faults — since the last evaluation,
//! us: the simulator's stand-in for PSI "some" memory stall time), `node_mem_used_bp` /
//! `node_mem_free_bp` of `nid`, `node_memcg_used_bp` / `node_memcg_free_bp` (the simulated
//! process is the only memory cgroup, so they equal the node's), `active_mem_bp` /
//! `inactive_mem_bp` (bytes marked active by `lru_prio` over resident bytes).

use tierlab_core::PAGE_SIZE;

use super::config::{pattern_ok, Action, GoalConfig, GoalTuner, Metric, QuotaConfig};
use super::scheme::Scheme;
use crate::agents::telemetry::monitor::{feed_loop_next_input, Region};
use crate::agents::MachineView;
use crate::units::Ps;

/// The maximum priority score (`DAMOS_MAX_SCORE`).
pub const MAX_SCORE: u32 = 99;

/// `damon_hot_score`: a region's hotness in 0..=99 from its `nr_accesses` and age.
pub fn hot_score(nr_accesses: u32, age: u32, max_nr_accesses: u64, aggr: Ps, w_freq: u32, w_age: u32) -> u32 {
    let freq = (nr_accesses as u64 * 100 / max_nr_accesses.max(1)) as i64;
    let second = Ps::from_ns(1_000_000_000);
    let mut age_in_sec = (age as u128 * aggr.ps() as u128 / second.ps() as u128) as u64;
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
pub(super) fn score(action: Action, r: &Region, max_nr: u64, aggr: Ps, q: &QuotaConfig) -> u32 {
    let hot = || hot_score(r.nr_accesses, r.age, max_nr, aggr, q.weight_nr_accesses, q.weight_age);
    match action {
        Action::MigrateHot | Action::LruPrio => hot(),
        Action::MigrateCold | Action::Pageout | Action::LruDeprio => MAX_SCORE - hot(),
        Action::Stat => MAX_SCORE,
    }
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
pub(super) fn adjust_quota(
    s: &mut Scheme,
    regions: &[Region],
    m: &MachineView,
    now: Ps,
    max_nr: u64,
    aggr: Ps,
    psi_us: u64,
) {
    if !s.has_quota() {
        return;
    }
    let cfg = &s.cfg;
    let q = &mut s.quota;
    let new_window = match q.charged_from {
        None => true,
        Some(from) => now >= from + cfg.quota.reset_interval.ps(),
    };
    if new_window {
        if q.esz > 0 && q.charged_sz >= q.esz {
            s.stats.qt_exceeds += 1;
        }
        q.total_charged_sz += q.charged_sz;
        q.charged_from = Some(now);
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
                // Bytes per ms of applying.
                let throughput = if q.total_charged > Ps::ZERO {
                    let ms = Ps::from_ns(1_000_000);
                    (q.total_charged_sz as u128 * ms.ps() as u128 / q.total_charged.ps() as u128) as u64
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
        let sc = score(cfg.action, r, max_nr, aggr, &cfg.quota);
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

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::agents::telemetry::damos::schemes_from_damo_json;

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
        apply(&mut d, &mut mon, &mut m, Ps::ZERO);
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
        apply(&mut d, &mut mon, &mut m, Ps::from_ns(500_000_000));
        assert_eq!(d.schemes[0].stats.nr_tried, 2);
        // `stat` without a quota: every region, ages kept.
        let (mut m, mut mon, _) = setup(MIB, &[20, 10, 5, 0], 7);
        let mut d = damos(vec![scheme(Action::Stat)], 0.0, &mon);
        apply(&mut d, &mut mon, &mut m, Ps::ZERO);
        let st = &d.schemes[0].stats;
        assert_eq!((st.nr_tried, st.sz_tried, st.sz_applied), (4, 4 * MIB, 0));
        assert!(mon.regions.iter().all(|r| r.age == 7));
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
            apply(&mut d, &mut mon, &mut m, Ps::from_ns(w * 10_000_000));
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
            apply(&mut d, &mut mon, &mut m, Ps::from_ns(w * 10_000_000));
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
        apply(&mut d, &mut mon, &mut m, Ps::from_ns(80 * 10_000_000));
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
        apply(&mut d, &mut mon, &mut m, Ps::ZERO);
        assert_eq!(d.schemes[0].esz(), MIB, "below the goal: the whole quota from the first window");
        assert_eq!(m.os.mem.lru.active_bytes(), MIB);
        d.schemes[0].cfg.quota.goals[0].current = 10_000;
        apply(&mut d, &mut mon, &mut m, Ps::from_ns(100_000_000));
        assert_eq!(d.schemes[0].esz(), 0);
        assert_eq!(m.os.mem.lru.active_bytes(), MIB, "goal met: nothing applied");
        d.schemes[0].cfg.quota.goals[0].current = 0;
        apply(&mut d, &mut mon, &mut m, Ps::from_ns(200_000_000));
        assert_eq!(d.schemes[0].esz(), MIB);
        assert_eq!(m.os.mem.lru.active_bytes(), 2 * MIB, "below again: the whole quota again");
        // Without a size quota, no limit below the goal.
        let (mut m, mut mon, _) = setup(MIB, &[20, 20, 20], 0);
        let mut s = scheme(Action::LruPrio);
        s.quota.reset_interval = Duration(100_000_000);
        s.quota.goal_tuner = GoalTuner::Temporal;
        s.quota.goals = vec![GoalConfig { metric: Metric::UserInput, target: 10_000, nid: None, current: 0 }];
        let mut d = damos(vec![s], 0.0, &mon);
        apply(&mut d, &mut mon, &mut m, Ps::ZERO);
        assert_eq!(d.schemes[0].esz(), u64::MAX / 10_000);
        assert_eq!(m.os.mem.lru.active_bytes(), 3 * MIB);
        // The damo spelling.
        let c = schemes_from_damo_json(
            r#"[{"action": "stat", "quotas": {"sz_bytes": 4096, "goal_tuner": "temporal",
                "goals": [{"metric": "user_input", "target_value": 100, "current_value": 5}]}}]"#,
            Ps::from_ns(5_000_000),
            Ps::from_ns(100_000_000),
        )
        .unwrap();
        assert_eq!(c[0].quota.goal_tuner, GoalTuner::Temporal);
        let e = schemes_from_damo_json(
            r#"[{"action": "stat", "quotas": {"goal_tuner": "eager"}}]"#,
            Ps::from_ns(5_000_000),
            Ps::from_ns(100_000_000),
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
        apply(&mut d, &mut mon, &mut m, Ps::ZERO);
        assert_eq!(d.schemes[0].esz(), PAGE_SIZE * 1024 * 10);
        // 3 MiB = 768 pages charged in 768 us: 4096 bytes per us = 4,096,000 per ms.
        apply(&mut d, &mut mon, &mut m, Ps::from_ns(100_000_000));
        assert_eq!(d.schemes[0].esz(), 4_096_000 * 10);
    }

    #[test]
    fn hot_score_follows_the_kernel() {
        // aggr 100 ms, 20 samples: full frequency, age 0 -> (100*100 + 100*50)/200 = 75 -> 74.
        assert_eq!(hot_score(20, 0, 20, Ps::from_ns(100_000_000), 100, 100), 75 * 99 / 100);
        // No access, old (age 100 aggregations = 10 s -> log 4): age subscore (-4+32)*100/64
        // = 43; hot = (0 + 43*100)/200 = 21 -> 20.
        assert_eq!(hot_score(0, 100, 20, Ps::from_ns(100_000_000), 100, 100), 21 * 99 / 100);
        // Weights zero: hotness 0.
        assert_eq!(hot_score(20, 10, 20, Ps::from_ns(100_000_000), 0, 0), 0);
        // No access, age 0: age subscore 50; hot = (0 + 50*100)/200 = 25 -> 24; cold = 75.
        assert_eq!(MAX_SCORE - hot_score(0, 0, 20, Ps::from_ns(100_000_000), 100, 100), 99 - 25 * 99 / 100);
    }
}
