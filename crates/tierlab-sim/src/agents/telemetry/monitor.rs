//! DAMON's adaptive regions, modelled on Linux `mm/damon/core.c` and `mm/damon/vaddr.c`
//! (facts in `reference/damon.md`): the regions and the schedule of one monitoring context
//! ([`Monitor`], a `damon_ctx` with one virtual-address target), the region operations (the
//! three ranges, fitting, merge, split, the size limit), the access-rate moving sum, interval
//! auto-tuning and the aggregation snapshots. The observer that drives a monitor, and the
//! order of the steps in its loop, are in [`super::regions`]; DAMOS schemes
//! ([`super::damos`]) apply to a monitor's regions.
//!
//! # Decisions where the sources leave room (each documented at its function)
//! - `sz_limit = total_size / min_nr_regions`, rounded **down** to a page (at least one page),
//!   so that regions no larger than it are at least `min_nr_regions` many (the kernel's
//!   `damon_apply_min_nr_regions` rounds up, which can leave one region fewer). It is computed
//!   at start and after each ops update, when the total size can change.
//! - Fewer than three mappings: the kernel's `__damon_va_three_regions` fails (a real process
//!   always has text, heap and stack mappings); the simulator maps only the workload's memory,
//!   so the ranges are then cut at the gaps that exist (one range per gap + 1).
//! - Times are simulated time ([`Ps`]); the auto-tuning arithmetic follows the kernel's
//!   integer formulas with picoseconds in place of us.

use crate::agents::{MachineView, SnapRegion};
use crate::hw::pagetable::Level;
use crate::rng::Rng;
use crate::units::Ps;

/// Base page size: DAMON's minimum region size and alignment (`DAMON_MIN_REGION`).
pub const PAGE: u64 = tierlab_core::PAGE_SIZE;

fn align_down(x: u64) -> u64 {
    x & !(PAGE - 1)
}

fn align_up(x: u64) -> u64 {
    x.div_ceil(PAGE) * PAGE
}

/// `mult_frac(x, n, d)` of the kernel: `x * n / d` computed without overflowing.
pub fn mult_frac(x: u64, n: u64, d: u64) -> u64 {
    let (q, r) = (x / d, x % d);
    (q as u128 * n as u128 + (r as u128 * n as u128) / d as u128) as u64
}

/// One monitoring region `[start, end)` (`struct damon_region`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// First byte (page aligned).
    pub start: u64,
    /// One past the last byte (page aligned).
    pub end: u64,
    /// Sampling intervals of the current aggregation interval in which an access was seen.
    pub nr_accesses: u32,
    /// `nr_accesses` of the previous aggregation interval.
    pub last_nr_accesses: u32,
    /// Pseudo moving sum of the access checks over the last aggregation interval, in basis
    /// points of one check (`nr_accesses_bp`, `damon_update_region_access_rate`); DAMOS
    /// patterns read `nr_accesses_bp / 10000`. Maintained when a context has schemes.
    pub nr_accesses_bp: u32,
    /// Aggregation intervals the access pattern has stayed similar.
    pub age: u32,
    /// The address sampled in the current sampling interval.
    pub sampling_addr: u64,
    /// The page-table level of the entry profiled for `sampling_addr`.
    pub level: Level,
}

impl Region {
    /// A fresh region (counters zero).
    pub fn new(start: u64, end: u64) -> Self {
        Region {
            start,
            end,
            nr_accesses: 0,
            last_nr_accesses: 0,
            nr_accesses_bp: 0,
            age: 0,
            sampling_addr: start,
            level: Level::Pte,
        }
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.end - self.start
    }

    /// Split at `start + sz_left` (`damon_split_region_at`): `self` keeps the left piece and
    /// the returned right piece inherits the counters and the age.
    fn split_off(&mut self, sz_left: u64) -> Region {
        debug_assert!(sz_left > 0 && sz_left < self.size());
        let mut right = *self;
        right.start = self.start + sz_left;
        self.end = right.start;
        right
    }
}

/// The interval auto-tuning goal (`struct damon_intervals_goal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntervalsGoal {
    /// Target ratio of observed to possible access events, in basis points (1/10,000).
    pub access_bp: u64,
    /// Tune every this many aggregation intervals (>= 1).
    pub aggrs: u64,
    /// Lower bound of the sampling interval.
    pub min_sample: Ps,
    /// Upper bound of the sampling interval.
    pub max_sample: Ps,
}

/// Monitoring attributes (`struct damon_attrs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attrs {
    /// Sampling interval.
    pub sample: Ps,
    /// Aggregation interval.
    pub aggr: Ps,
    /// Ops update interval (mappings re-read).
    pub ops_update: Ps,
    /// Lower bound of the region count.
    pub min_nr_regions: usize,
    /// Upper bound of the region count.
    pub max_nr_regions: usize,
    /// Interval auto-tuning; `None` = off (the kernel's `aggrs = 0`).
    pub goal: Option<IntervalsGoal>,
}

impl Attrs {
    /// The kernel's checks (`damon_set_attrs`, `damon_valid_intervals_goal`) plus what the
    /// simulator needs (a non-zero sampling interval). Returns (parameter name, problem).
    pub fn validate(&self) -> std::result::Result<(), (&'static str, String)> {
        if self.sample == Ps::ZERO {
            return Err(("sample_interval", "must be > 0".into()));
        }
        if self.sample > self.aggr {
            return Err((
                "aggr_interval",
                format!(
                    "the sampling interval ({} ns) must not exceed the aggregation interval ({} ns)",
                    self.sample.whole_ns(),
                    self.aggr.whole_ns()
                ),
            ));
        }
        if self.min_nr_regions < 3 {
            return Err(("min_nr_regions", format!("{} must be >= 3", self.min_nr_regions)));
        }
        if self.min_nr_regions > self.max_nr_regions {
            return Err((
                "max_nr_regions",
                format!("{} is below min_nr_regions = {}", self.max_nr_regions, self.min_nr_regions),
            ));
        }
        if let Some(g) = self.goal {
            if g.aggrs == 0 {
                return Err(("tune_aggrs", "must be >= 1 when auto_tune is on".into()));
            }
            if g.access_bp == 0 || g.access_bp > 10_000 {
                return Err(("tune_access_bp", format!("{} is not in 1..=10000", g.access_bp)));
            }
            if g.min_sample == Ps::ZERO || g.min_sample > g.max_sample {
                return Err((
                    "tune_min_sample",
                    format!("must be > 0 and <= tune_max_sample ({} ns)", g.max_sample.whole_ns()),
                ));
            }
            if self.sample < g.min_sample || self.sample > g.max_sample {
                return Err((
                    "sample_interval",
                    format!(
                        "{} ns is outside [tune_min_sample, tune_max_sample] = [{}, {}] ns",
                        self.sample.whole_ns(),
                        g.min_sample.whole_ns(),
                        g.max_sample.whole_ns()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Most `nr_accesses` one aggregation can reach (`damon_max_nr_accesses`).
    pub fn max_nr_accesses(&self) -> u64 {
        intervals_in(self.aggr, self.sample).min(u32::MAX as u64)
    }
}

/// How many whole intervals of `interval` fit in `t` (`t / interval`, integer division; a
/// zero interval counts as the smallest time step).
pub fn intervals_in(t: Ps, interval: Ps) -> u64 {
    t.ps() / interval.ps().max(1)
}

/// The three address ranges covering a virtual address space (`__damon_va_three_regions`):
/// from the first mapping to the start of the lower of the two biggest gaps, between the two
/// gaps, and from the end of the higher gap to the end of the last mapping. `maps` are the
/// mappings as `(start, end)` in address order. Ties between equal gaps go to the lower
/// address (the kernel's strict `>` comparisons).
///
/// With fewer than two non-empty gaps the kernel returns an error (and monitors nothing);
/// here the ranges are cut at the gaps that exist: one range without gaps, two with one.
/// `None` when there is no mapping.
pub fn three_regions(maps: impl IntoIterator<Item = (u64, u64)>) -> Option<Vec<(u64, u64)>> {
    let (mut first_gap, mut second_gap) = ((0u64, 0u64), (0u64, 0u64));
    let mut start = None;
    let mut prev_end = 0u64;
    for (s, e) in maps {
        if start.is_none() {
            start = Some(s);
        } else {
            let gap = s.saturating_sub(prev_end);
            if gap > first_gap.1 - first_gap.0 {
                second_gap = first_gap;
                first_gap = (prev_end, s);
            } else if gap > second_gap.1 - second_gap.0 {
                second_gap = (prev_end, s);
            }
        }
        prev_end = e;
    }
    let start = align_up(start?);
    let end = align_up(prev_end);
    if first_gap.1 == first_gap.0 {
        return Some(vec![(start, end)]);
    }
    if second_gap.1 == second_gap.0 {
        return Some(vec![(start, align_up(first_gap.0)), (align_up(first_gap.1), end)]);
    }
    if first_gap.0 > second_gap.0 {
        std::mem::swap(&mut first_gap, &mut second_gap);
    }
    Some(vec![
        (start, align_up(first_gap.0)),
        (align_up(first_gap.1), align_up(second_gap.0)),
        (align_up(second_gap.1), end),
    ])
}

/// Fit `regions` to `ranges` (sorted, disjoint), as `damon_set_regions` does: regions that
/// intersect no range are removed; then for each range, the first and last regions that
/// intersect it are extended/trimmed to its bounds and the holes between them are filled
/// with new regions; a range no region intersects gets one new region. Counters of the
/// surviving regions are kept.
pub fn set_regions(regions: &mut Vec<Region>, ranges: &[(u64, u64)]) {
    let intersects = |r: &Region, g: &(u64, u64)| !(r.end <= g.0 || g.1 <= r.start);
    regions.retain(|r| ranges.iter().any(|g| intersects(r, g)));
    if regions.is_empty() {
        regions.extend(ranges.iter().map(|&(s, e)| Region::new(align_down(s), align_up(e))));
        return;
    }
    // The kernel walks the list with one cursor across the ranges; `i` is that cursor.
    let mut i = 0;
    for g in ranges {
        let (mut first, mut last, mut insert_before) = (None, 0, None);
        while i < regions.len() {
            let r = &regions[i];
            if intersects(r, g) {
                first.get_or_insert(i);
                last = i;
            }
            if r.start >= g.1 {
                insert_before = Some(i);
                break;
            }
            i += 1;
        }
        let Some(f) = first else {
            let newr = Region::new(align_down(g.0), align_up(g.1));
            match insert_before {
                Some(j) => {
                    regions.insert(j, newr);
                    i = j + 1;
                }
                None => {
                    regions.push(newr);
                    i = regions.len();
                }
            }
            continue;
        };
        regions[f].start = align_down(g.0);
        regions[last].end = align_up(g.1);
        // damon_fill_regions_holes(first, last).
        let mut k = f;
        while k < last {
            if regions[k].end != regions[k + 1].start {
                let hole = Region::new(regions[k].end, regions[k + 1].start);
                regions.insert(k + 1, hole);
                last += 1;
                i += 1;
                k += 1;
            }
            k += 1;
        }
    }
}

/// The region size limit: total size / `min_nr_regions`, rounded down to a page, at least one
/// page (see the module docs for the rounding).
pub fn region_sz_limit(regions: &[Region], min_nr_regions: usize) -> u64 {
    let total: u64 = regions.iter().map(Region::size).sum();
    align_down(total / min_nr_regions.max(1) as u64).max(PAGE)
}

/// Split every region larger than `sz_limit` into pieces of `sz_limit` from its start (the
/// last piece takes the rest), as `damon_apply_min_nr_regions` does. Pieces inherit the
/// counters. `scratch` is a reused buffer.
pub fn apply_min_nr_regions(regions: &mut Vec<Region>, scratch: &mut Vec<Region>, sz_limit: u64) {
    if regions.iter().all(|r| r.size() <= sz_limit) {
        return;
    }
    scratch.clear();
    for &r in regions.iter() {
        let mut r = r;
        while r.size() > sz_limit {
            let right = r.split_off(sz_limit);
            scratch.push(r);
            r = right;
        }
        scratch.push(r);
    }
    std::mem::swap(regions, scratch);
}

/// One merge pass (`damon_merge_regions_of`). For each region in address order: its age is
/// reset to 0 when `|nr_accesses - last_nr_accesses| > thres` or when it switched between
/// zero and non-zero, else incremented; then it is merged into the previous (surviving)
/// region when they are adjacent, `|prev.nr_accesses - nr_accesses| <= thres` and the merged
/// size is `<= sz_limit`. The merged `nr_accesses` and `age` are size-weighted averages
/// (integer division); the previous region keeps its `last_nr_accesses`.
pub fn merge_regions_of(regions: &mut Vec<Region>, thres: u32, sz_limit: u64) {
    let mut w = 0usize;
    let mut have_prev = false;
    for i in 0..regions.len() {
        let mut r = regions[i];
        if r.nr_accesses.abs_diff(r.last_nr_accesses) > thres
            || (r.nr_accesses == 0) != (r.last_nr_accesses == 0)
        {
            r.age = 0;
        } else {
            r.age += 1;
        }
        if have_prev {
            let p = &mut regions[w];
            if p.end == r.start
                && p.nr_accesses.abs_diff(r.nr_accesses) <= thres
                && p.size() + r.size() <= sz_limit
            {
                let (sl, sr) = (p.size() as u128, r.size() as u128);
                p.nr_accesses =
                    ((p.nr_accesses as u128 * sl + r.nr_accesses as u128 * sr) / (sl + sr)) as u32;
                p.nr_accesses_bp = p.nr_accesses.saturating_mul(10_000);
                p.age = ((p.age as u128 * sl + r.age as u128 * sr) / (sl + sr)) as u32;
                p.end = r.end;
                continue;
            }
            w += 1;
        }
        regions[w] = r;
        have_prev = true;
    }
    regions.truncate(if have_prev { w + 1 } else { 0 });
}

/// `kdamond_merge_regions`: merge passes with `threshold`, repeated with the threshold
/// doubled (`max(1, 2 * threshold)`) while the count exceeds `max_nr_regions` and
/// `threshold / 2 < max_thres` (`max_thres` = aggregation / sampling interval). Like the
/// kernel, every pass updates the ages again.
pub fn merge_regions(
    regions: &mut Vec<Region>,
    threshold: u32,
    sz_limit: u64,
    max_nr_regions: usize,
    max_thres: u64,
) {
    let mut t = threshold;
    loop {
        merge_regions_of(regions, t, sz_limit);
        t = t.saturating_mul(2).max(1);
        if !(regions.len() > max_nr_regions && ((t / 2) as u64) < max_thres) {
            break;
        }
    }
}

/// Split every region into up to `nr_subs` pieces (`damon_split_regions_of`): while fewer
/// than `nr_subs - 1` cuts were tried and the (left) piece is larger than two pages, cut it at
/// `k * size / 10` rounded down to a page, with `k` uniform in 1..=9 (`damon_rand(1, 10)`,
/// i.e. 10%..90%), skipping an empty cut; the left piece is the one cut again. Pieces inherit
/// the counters and the age. Output is in address order.
pub fn split_regions_of(regions: &mut Vec<Region>, scratch: &mut Vec<Region>, nr_subs: u32, rng: &mut Rng) {
    scratch.clear();
    let mut rights = [Region::new(0, 0); 2];
    for &r in regions.iter() {
        let mut r = r;
        let mut nr_rights = 0;
        let mut sz_region = r.size();
        let mut i = 0;
        while i + 1 < nr_subs && sz_region > 2 * PAGE {
            i += 1;
            let k = rng.below(9) + 1;
            let sz_sub = align_down(k * sz_region / 10);
            if sz_sub == 0 || sz_sub >= sz_region {
                continue;
            }
            rights[nr_rights] = r.split_off(sz_sub);
            nr_rights += 1;
            sz_region = sz_sub;
        }
        scratch.push(r);
        // The latest cut is the leftmost right piece.
        for k in (0..nr_rights).rev() {
            scratch.push(rights[k]);
        }
    }
    std::mem::swap(regions, scratch);
}

/// The auto-tuning score (`damon_get_intervals_score`): observed access events
/// `sum(size * nr_accesses)` relative to the goal `sum(size * aggr_samples) * access_bp /
/// 10000`, in basis points (10,000 = on goal).
pub fn intervals_score(regions: &[Region], aggr_samples: u64, access_bp: u64) -> u64 {
    let mut max_events = 0u128;
    let mut events = 0u128;
    for r in regions {
        max_events += r.size() as u128 * aggr_samples as u128;
        events += r.size() as u128 * r.nr_accesses as u128;
    }
    let target = (max_events * access_bp as u128 / 10_000).max(1);
    let (q, rem) = (events / target, events % target);
    (q * 10_000 + rem * 10_000 / target).min(u64::MAX as u128) as u64
}

/// `damon_feed_loop_next_input`: the next input to reach a score of 10,000 assuming input
/// and score are proportional; at least 10,000; a score >= 20,000 resets to the minimum.
pub fn feed_loop_next_input(last_input: u64, score: u64) -> u64 {
    const GOAL: u64 = 10_000;
    const MIN_INPUT: u64 = 10_000;
    if score == GOAL {
        return last_input;
    }
    if score >= 2 * GOAL {
        return MIN_INPUT;
    }
    let over = score > GOAL;
    let diff = if over { score - GOAL } else { GOAL - score };
    let compensation =
        if last_input < u64::MAX / diff { last_input * diff / GOAL } else { last_input / GOAL * diff };
    if over {
        return last_input.saturating_sub(compensation).max(MIN_INPUT);
    }
    last_input.saturating_add(compensation)
}

/// `damon_get_intervals_adaptation_bp`: the factor (basis points) to multiply the sampling
/// interval by, in [5000, 20000] (reductions are damped to at most halving).
pub fn intervals_adaptation_bp(regions: &[Region], aggr_samples: u64, access_bp: u64) -> u64 {
    let score = intervals_score(regions, aggr_samples, access_bp);
    let a = feed_loop_next_input(100_000_000, score) / 10_000;
    if a <= 10_000 {
        5_000 + a / 2
    } else {
        a
    }
}

/// The regions at the end of one aggregation interval (a damo "aggregated" record).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Start of the aggregation interval (the previous aggregation).
    pub start: Ps,
    /// End of the aggregation interval (when the snapshot was taken).
    pub end: Ps,
    /// Sampling interval in use.
    pub sample: Ps,
    /// The regions, in address order.
    pub regions: Vec<SnapRegion>,
}

impl Snapshot {
    /// The byte ranges of the regions with `nr_accesses > threshold` (adjacent ones
    /// coalesced) and the number of such regions.
    pub fn hot_ranges(&self, threshold: u32) -> (Vec<(u64, u64)>, usize) {
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut n = 0;
        for r in self.regions.iter().filter(|r| r.nr_accesses > threshold) {
            n += 1;
            match out.last_mut() {
                Some(last) if last.1 == r.start => last.1 = r.end,
                _ => out.push((r.start, r.end)),
            }
        }
        (out, n)
    }
}

/// What [`Monitor::begin_after_check`] hands to [`Monitor::end_after_check`]: the schedule
/// read at the start of the iteration (`kdamond_fn` reads it before the callbacks).
#[derive(Clone, Copy, Debug)]
pub struct AfterCheck {
    next_aggr: u64,
    next_ops: u64,
}

/// The region state and the schedule of one monitoring context (a `damon_ctx` with one
/// virtual-address target).
pub struct Monitor {
    /// Attributes in use (the sampling and aggregation intervals change under auto-tuning).
    pub attrs: Attrs,
    /// Samples per aggregation (`aggr_samples`), fixed at start.
    pub aggr_samples: u64,
    /// The regions, sorted and disjoint.
    pub regions: Vec<Region>,
    scratch: Vec<Region>,
    /// The one random stream (sampling addresses and split points).
    pub rng: Rng,
    passed_sis: u64,
    next_aggr_sis: u64,
    next_ops_sis: u64,
    next_tune_sis: u64,
    sz_limit: u64,
    last_split_nr_regions: usize,
    last_aggr: Ps,
    snaps: [Snapshot; 2],
    latest: Option<usize>,
    snapshots_taken: u64,
    /// Aggregations done.
    pub aggregations: u64,
    /// Ops updates done.
    pub ops_updates: u64,
    /// Interval tunings that changed the intervals.
    pub tunings: u64,
}

impl Monitor {
    /// A monitor with no regions yet (see [`Monitor::init`]).
    pub fn new(attrs: Attrs, rng: Rng) -> Self {
        Monitor {
            aggr_samples: intervals_in(attrs.aggr, attrs.sample),
            attrs,
            regions: Vec::new(),
            scratch: Vec::new(),
            rng,
            passed_sis: 0,
            next_aggr_sis: 0,
            next_ops_sis: 0,
            next_tune_sis: 0,
            sz_limit: PAGE,
            last_split_nr_regions: 0,
            last_aggr: Ps::ZERO,
            snaps: [Snapshot::default(), Snapshot::default()],
            latest: None,
            snapshots_taken: 0,
            aggregations: 0,
            ops_updates: 0,
            tunings: 0,
        }
    }

    /// Build the regions from the machine's mappings (`kdamond_init_ctx`, `damon_va_init`,
    /// `damon_apply_min_nr_regions`).
    pub fn init(&mut self, m: &MachineView) {
        let a = self.attrs;
        self.passed_sis = 0;
        self.next_aggr_sis = intervals_in(a.aggr, a.sample);
        self.next_ops_sis = intervals_in(a.ops_update, a.sample);
        self.next_tune_sis = self.next_aggr_sis * a.goal.map_or(0, |g| g.aggrs);
        self.regions.clear();
        if let Some(ranges) = three_regions(m.vmas().values().map(|v| (v.start, v.start + v.len))) {
            set_regions(&mut self.regions, &ranges);
        }
        self.sz_limit = region_sz_limit(&self.regions, a.min_nr_regions);
        apply_min_nr_regions(&mut self.regions, &mut self.scratch, self.sz_limit);
    }

    /// The current size limit of a region.
    pub fn sz_limit(&self) -> u64 {
        self.sz_limit
    }

    /// Sampling intervals passed (`passed_sample_intervals`).
    pub fn passed_sis(&self) -> u64 {
        self.passed_sis
    }

    /// Set the sampling intervals passed (tests that drive schemes without sampling).
    #[cfg(test)]
    pub fn set_passed_sis(&mut self, n: u64) {
        self.passed_sis = n;
    }

    /// Update every region's `nr_accesses_bp` after a check (`damon_update_region_access_rate`):
    /// `before[i]` is region `i`'s `nr_accesses` before the check.
    pub fn update_access_rates(&mut self, before: &[u32]) {
        let len = self.attrs.max_nr_accesses().max(1) as u32;
        for (r, &b) in self.regions.iter_mut().zip(before) {
            let hit = if r.nr_accesses > b { 10_000 } else { 0 };
            r.nr_accesses_bp =
                moving_sum(r.nr_accesses_bp, r.last_nr_accesses.saturating_mul(10_000), len, hit);
        }
    }

    /// Everything between a check and the next prepare: count the sampling interval, then
    /// aggregate and update the regions when due (see the module docs for the order).
    pub fn after_check(&mut self, now: Ps, m: &MachineView) {
        let p = self.begin_after_check();
        self.end_after_check(p, now, m);
    }

    /// The first half of [`Monitor::after_check`]: count the sampling interval and merge at an
    /// aggregation boundary. DAMOS schemes apply between the two halves (`kdamond_fn`).
    pub fn begin_after_check(&mut self) -> AfterCheck {
        let p = AfterCheck { next_aggr: self.next_aggr_sis, next_ops: self.next_ops_sis };
        self.passed_sis += 1;
        if self.passed_sis >= p.next_aggr {
            let max_nr = self.regions.iter().map(|r| r.nr_accesses).max().unwrap_or(0);
            merge_regions(
                &mut self.regions,
                max_nr / 10,
                self.sz_limit,
                self.attrs.max_nr_regions,
                self.attrs.max_nr_accesses(),
            );
            apply_min_nr_regions(&mut self.regions, &mut self.scratch, self.sz_limit);
        }
        p
    }

    /// The second half of [`Monitor::after_check`]: interval tuning, snapshot, reset and
    /// split at an aggregation boundary, then the ops update when due.
    pub fn end_after_check(&mut self, p: AfterCheck, now: Ps, m: &MachineView) {
        let (next_aggr, next_ops) = (p.next_aggr, p.next_ops);
        let mut sample = self.attrs.sample;
        if self.passed_sis >= next_aggr {
            if let Some(goal) = self.attrs.goal {
                if self.passed_sis >= self.next_tune_sis {
                    self.next_aggr_sis = next_aggr;
                    self.next_tune_sis += self.aggr_samples * goal.aggrs;
                    self.tune(goal);
                    sample = self.attrs.sample;
                }
            }
            self.next_aggr_sis = next_aggr + intervals_in(self.attrs.aggr, sample);
            self.take_snapshot(now);
            for r in &mut self.regions {
                // damon_warn_fix_nr_accesses_corruption, then the reset.
                r.nr_accesses_bp = r.nr_accesses.saturating_mul(10_000);
                r.last_nr_accesses = r.nr_accesses;
                r.nr_accesses = 0;
            }
            self.split();
            self.aggregations += 1;
        }
        if self.passed_sis >= next_ops {
            self.next_ops_sis = next_ops + intervals_in(self.attrs.ops_update, sample);
            self.ops_update(m);
        }
    }

    /// `kdamond_split_regions`: skipped when the count exceeds `max_nr_regions / 2`; three
    /// pieces per region when the count is unchanged since the last split and below
    /// `max_nr_regions / 3`, else two.
    fn split(&mut self) {
        let nr = self.regions.len();
        if nr > self.attrs.max_nr_regions / 2 {
            return;
        }
        let subs = if self.last_split_nr_regions == nr && nr < self.attrs.max_nr_regions / 3 { 3 } else { 2 };
        split_regions_of(&mut self.regions, &mut self.scratch, subs, &mut self.rng);
        self.last_split_nr_regions = nr;
    }

    /// `damon_va_update` then the new size limit.
    fn ops_update(&mut self, m: &MachineView) {
        if let Some(ranges) = three_regions(m.vmas().values().map(|v| (v.start, v.start + v.len))) {
            set_regions(&mut self.regions, &ranges);
        }
        self.sz_limit = region_sz_limit(&self.regions, self.attrs.min_nr_regions);
        self.ops_updates += 1;
    }

    /// `kdamond_tune_intervals` and the `damon_set_attrs` it calls: scale the sampling
    /// interval by the adaptation factor, clamp it to the goal's bounds, keep
    /// `aggr_samples`, convert `nr_accesses` and `age` to the new intervals and restart the
    /// aggregation and ops-update schedules from now.
    fn tune(&mut self, goal: IntervalsGoal) {
        let adaptation = intervals_adaptation_bp(&self.regions, self.aggr_samples, goal.access_bp);
        if adaptation == 10_000 {
            return;
        }
        let old = self.attrs;
        let s = Ps::from_ps((old.sample.ps() as u128 * adaptation as u128 / 10_000) as u64)
            .min(goal.max_sample)
            .max(goal.min_sample);
        let mut new = old;
        new.sample = s;
        new.aggr = s.times(self.aggr_samples);
        let (old_max, new_max) = (old.max_nr_accesses().max(1), new.max_nr_accesses());
        for r in &mut self.regions {
            let bp = mult_frac(r.nr_accesses as u64, 10_000, old_max);
            r.nr_accesses = (bp * new_max / 10_000) as u32;
            r.nr_accesses_bp = r.nr_accesses.saturating_mul(10_000);
            r.age = (r.age as u128 * old.aggr.ps() as u128 / new.aggr.ps().max(1) as u128) as u32;
        }
        self.next_aggr_sis = self.passed_sis + intervals_in(new.aggr, s);
        self.next_ops_sis = self.passed_sis + intervals_in(new.ops_update, s);
        self.attrs = new;
        self.tunings += 1;
    }

    fn take_snapshot(&mut self, now: Ps) {
        let slot = match self.latest {
            Some(i) => 1 - i,
            None => 0,
        };
        let s = &mut self.snaps[slot];
        s.start = self.last_aggr;
        s.end = now;
        s.sample = self.attrs.sample;
        s.regions.clear();
        s.regions.extend(self.regions.iter().map(|r| SnapRegion {
            start: r.start,
            end: r.end,
            nr_accesses: r.nr_accesses,
            age: r.age,
        }));
        self.latest = Some(slot);
        self.snapshots_taken += 1;
        self.last_aggr = now;
    }

    /// The latest snapshot taken at or before `t`, if any (the two latest are kept).
    pub fn snapshot_at(&self, t: Ps) -> Option<&Snapshot> {
        let i = self.latest?;
        let kept = self.snapshots_taken.min(2) as usize;
        [i, 1 - i].into_iter().take(kept).map(|k| &self.snaps[k]).find(|s| s.end <= t)
    }

    /// The latest snapshot.
    pub fn latest_snapshot(&self) -> Option<&Snapshot> {
        self.latest.map(|i| &self.snaps[i])
    }
}

/// `damon_moving_sum`: the pseudo moving sum of `nr_accesses_bp`.
pub fn moving_sum(mvsum: u32, nomvsum: u32, len_window: u32, new_value: u32) -> u32 {
    mvsum.saturating_sub(nomvsum / len_window.max(1)).saturating_add(new_value)
}

#[cfg(test)]
mod tests {
    use super::super::regions::testutil;
    use super::*;

    const P: u64 = PAGE;

    fn reg(start_pages: u64, end_pages: u64, nr: u32) -> Region {
        let mut r = Region::new(start_pages * P, end_pages * P);
        r.nr_accesses = nr;
        r
    }

    fn attrs() -> Attrs {
        Attrs {
            sample: Ps::from_ns(5_000_000),
            aggr: Ps::from_ns(100_000_000),
            ops_update: Ps::from_ns(60_000_000_000),
            min_nr_regions: 10,
            max_nr_regions: 1000,
            goal: None,
        }
    }

    /// A monitor scheduled from time 0 (an empty machine) over `regions`.
    fn monitor(a: Attrs, seed: u64, regions: Vec<Region>) -> Monitor {
        let mut m = Monitor::new(a, Rng::new(seed));
        m.init(&MachineView::new(&mut testutil::machine()));
        m.regions = regions;
        m.sz_limit = region_sz_limit(&m.regions, a.min_nr_regions);
        m
    }

    fn check_sorted_contiguous(rs: &[Region]) {
        for w in rs.windows(2) {
            assert!(w[0].start < w[0].end && w[0].end <= w[1].start, "{w:?}");
        }
        for r in rs {
            assert_eq!(r.start % P, 0);
            assert_eq!(r.end % P, 0);
            assert!(r.start < r.end);
        }
    }

    #[test]
    fn three_regions_picks_the_two_biggest_gaps() {
        // Mappings (in pages) with gaps 10, 50, 3, 40, 7 between them.
        let maps = [(100, 110), (120, 130), (180, 190), (193, 200), (240, 250), (257, 260)];
        let r = three_regions(maps.iter().map(|&(s, e)| (s * P, e * P))).unwrap();
        // Biggest gaps: [130, 180) (50) and [200, 240) (40).
        assert_eq!(r, vec![(100 * P, 130 * P), (180 * P, 200 * P), (240 * P, 260 * P)]);
        // The biggest gap after the second biggest: still sorted by address.
        let maps = [(0, 10), (50, 60), (61, 70), (170, 180)];
        let r = three_regions(maps.iter().map(|&(s, e)| (s * P, e * P))).unwrap();
        assert_eq!(r, vec![(0, 10 * P), (50 * P, 70 * P), (170 * P, 180 * P)]);
    }

    #[test]
    fn three_regions_ties_and_few_mappings() {
        // Three equal gaps of 5 pages: the two lowest win (strict comparisons).
        let maps = [(0, 10), (15, 20), (25, 30), (35, 40)];
        let r = three_regions(maps.iter().map(|&(s, e)| (s * P, e * P))).unwrap();
        assert_eq!(r, vec![(0, 10 * P), (15 * P, 20 * P), (25 * P, 40 * P)]);
        assert_eq!(three_regions([(P, 9 * P)]).unwrap(), vec![(P, 9 * P)]);
        assert_eq!(three_regions([(P, 2 * P), (5 * P, 9 * P)]).unwrap(), vec![(P, 2 * P), (5 * P, 9 * P)]);
        // Adjacent mappings: no gap.
        assert_eq!(three_regions([(P, 2 * P), (2 * P, 9 * P)]).unwrap(), vec![(P, 9 * P)]);
        assert_eq!(three_regions(std::iter::empty()), None);
    }

    #[test]
    fn set_regions_trims_extends_and_fills_holes() {
        let mut rs = vec![reg(0, 10, 1), reg(10, 20, 2), reg(30, 40, 3), reg(100, 110, 4)];
        set_regions(&mut rs, &[(5 * P, 35 * P), (50 * P, 60 * P), (90 * P, 105 * P)]);
        let got: Vec<(u64, u64, u32)> = rs.iter().map(|r| (r.start / P, r.end / P, r.nr_accesses)).collect();
        // [0,10) trimmed to 5, hole [20,30) filled, [30,40) trimmed to 35, [50,60) new,
        // [100,110) extended down to 90 and trimmed to 105.
        assert_eq!(got, vec![(5, 10, 1), (10, 20, 2), (20, 30, 0), (30, 35, 3), (50, 60, 0), (90, 105, 4)]);
        check_sorted_contiguous(&rs);
        // Nothing intersects: the ranges become the regions.
        let mut rs = vec![reg(0, 10, 1)];
        set_regions(&mut rs, &[(20 * P, 30 * P), (40 * P, 45 * P)]);
        assert_eq!(rs, vec![reg(20, 30, 0), reg(40, 45, 0)]);
        // A range after every region is appended.
        let mut rs = vec![reg(0, 10, 1)];
        set_regions(&mut rs, &[(0, 8 * P), (20 * P, 30 * P), (40 * P, 45 * P)]);
        assert_eq!(rs, vec![reg(0, 8, 1), reg(20, 30, 0), reg(40, 45, 0)]);
    }

    #[test]
    fn merge_follows_threshold_and_size_limit() {
        // thres 3: 10 and 12 merge (diff 2), 30 does not (diff 18).
        let mut rs = vec![reg(0, 4, 10), reg(4, 8, 12), reg(8, 12, 30)];
        merge_regions_of(&mut rs, 3, 8 * P);
        assert_eq!(rs.len(), 2);
        assert_eq!((rs[0].start, rs[0].end, rs[0].nr_accesses), (0, 8 * P, 11));
        assert_eq!(rs[1].nr_accesses, 30);
        // Same but the size limit (7 pages) forbids the merge.
        let mut rs = vec![reg(0, 4, 10), reg(4, 8, 12), reg(8, 12, 30)];
        merge_regions_of(&mut rs, 3, 7 * P);
        assert_eq!(rs.len(), 3);
        // Exactly at the threshold merges; one above does not.
        let mut rs = vec![reg(0, 1, 10), reg(1, 2, 13), reg(2, 3, 17)];
        merge_regions_of(&mut rs, 3, 100 * P);
        assert_eq!(rs.len(), 2, "10~13 merge to 11 (weighted), 11 vs 17 differ by 6");
        assert_eq!(rs[0].nr_accesses, 11);
        // Weighted average with integer division: (1*1 + 2*3) / 4 = 1.
        let mut rs = vec![reg(0, 1, 1), reg(1, 4, 2)];
        merge_regions_of(&mut rs, 1, 100 * P);
        assert_eq!(rs[0].nr_accesses, 1);
        // Non-adjacent regions never merge.
        let mut rs = vec![reg(0, 1, 5), reg(2, 3, 5)];
        merge_regions_of(&mut rs, 10, 100 * P);
        assert_eq!(rs.len(), 2);
    }

    #[test]
    fn merge_updates_ages() {
        let mk = |nr, last, age| {
            let mut r = reg(0, 1, nr);
            r.last_nr_accesses = last;
            r.age = age;
            r
        };
        let cases = [
            (mk(5, 4, 7), 1, 8), // similar: age + 1
            (mk(5, 1, 7), 1, 0), // changed by more than thres
            (mk(1, 0, 7), 3, 0), // zero -> non-zero
            (mk(0, 2, 7), 3, 0), // non-zero -> zero
            (mk(0, 0, 7), 0, 8),
        ];
        for (r, thres, age) in cases {
            let mut rs = vec![r];
            merge_regions_of(&mut rs, thres, 100 * P);
            assert_eq!(rs[0].age, age, "{r:?} thres {thres}");
        }
        // Merged age: size-weighted, integer division: (3 * 1 + 0 * 3) / 4 = 0.
        let mut a = reg(0, 1, 4);
        a.last_nr_accesses = 4;
        a.age = 2; // becomes 3
        let mut b = reg(1, 4, 4);
        b.last_nr_accesses = 0; // switched: age 0
        b.age = 9;
        let mut rs = vec![a, b];
        merge_regions_of(&mut rs, 1, 100 * P);
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0].age, 3 / 4);
    }

    #[test]
    fn merge_doubles_the_threshold_while_over_max() {
        // 8 one-page regions with nr 0,4,8,...: thres 0 merges nothing; the loop doubles it
        // (1, 2, 4) until pairs merge and the count falls to max = 4.
        let mut rs: Vec<Region> = (0..8).map(|i| reg(i, i + 1, 4 * i as u32)).collect();
        merge_regions(&mut rs, 0, 2 * P, 4, 40);
        assert_eq!(rs.len(), 4);
        assert!(rs.iter().all(|r| r.size() == 2 * P));
        // Bounded by max_thres: with max_thres 1 only the passes at 0 and 1 run.
        let mut rs: Vec<Region> = (0..8).map(|i| reg(i, i + 1, 4 * i as u32)).collect();
        merge_regions(&mut rs, 0, 2 * P, 4, 1);
        assert_eq!(rs.len(), 8);
    }

    #[test]
    fn min_regions_split_at_the_size_limit() {
        let mut rs = vec![reg(0, 25, 3), reg(25, 27, 1)];
        let lim = region_sz_limit(&rs, 10);
        assert_eq!(lim, 2 * P, "27 pages / 10 = 2.7 pages, rounded down");
        let mut scratch = Vec::new();
        apply_min_nr_regions(&mut rs, &mut scratch, lim);
        assert_eq!(rs.len(), 13 + 1);
        assert!(rs.iter().all(|r| r.size() <= lim));
        assert_eq!((rs[12].start, rs[12].end), (24 * P, 25 * P), "the last piece takes the rest");
        assert_eq!(rs[12].nr_accesses, 3, "pieces inherit");
        check_sorted_contiguous(&rs);
        assert!(rs.len() >= 10);
        // Tiny spaces: the limit is at least one page.
        assert_eq!(region_sz_limit(&[reg(0, 3, 0)], 10), P);
    }

    #[test]
    fn split_makes_two_or_three_pieces_at_10_to_90_percent() {
        let mut rng = Rng::new(7);
        let mut scratch = Vec::new();
        let mut seen_k = [false; 10];
        for trial in 0..2000u64 {
            let pages = 1 + trial % 200;
            let base = 1000 * P;
            let mut r = Region::new(base, base + pages * P);
            r.nr_accesses = 7;
            r.last_nr_accesses = 3;
            r.age = 11;
            let subs = 2 + (trial % 2) as u32;
            let mut rs = vec![r];
            split_regions_of(&mut rs, &mut scratch, subs, &mut rng);
            check_sorted_contiguous(&rs);
            assert_eq!(rs.first().unwrap().start, base);
            assert_eq!(rs.last().unwrap().end, base + pages * P);
            assert!(rs.len() as u32 <= subs, "{} pieces of {subs}", rs.len());
            if pages <= 2 {
                assert_eq!(rs.len(), 1, "regions of <= 2 pages are never split");
            }
            for p in &rs {
                assert_eq!((p.nr_accesses, p.last_nr_accesses, p.age), (7, 3, 11), "pieces inherit");
            }
            if rs.len() >= 2 {
                // The last cut is of the region (two pieces) or of its left piece (three).
                let whole = if rs.len() == 2 { pages * P } else { rs[2].start - base };
                let cut = rs[1].start - base;
                let k = (1..=9).find(|&k| align_down(k * whole / 10) == cut);
                let k = k.unwrap_or_else(|| panic!("cut {cut} of {whole} is not k*10% page aligned"));
                seen_k[k as usize] = true;
                if rs.len() == 3 {
                    let k1 = (1..=9).any(|k| align_down(k * pages * P / 10) == whole);
                    assert!(k1, "first cut of three pieces");
                }
            }
        }
        assert!(seen_k[1..].iter().all(|&s| s), "every k in 1..=9 occurs: {seen_k:?}");
    }

    #[test]
    fn kdamond_split_rules() {
        let mut a = attrs();
        a.max_nr_regions = 12;
        let mut m = Monitor::new(a, Rng::new(1));
        // 7 regions > 12/2: no split.
        m.regions = (0..7).map(|i| reg(100 * i, 100 * (i + 1), 0)).collect();
        m.split();
        assert_eq!(m.regions.len(), 7);
        // 3 regions: two pieces each (first split: count changed from 0).
        m.regions = (0..3).map(|i| reg(100 * i, 100 * (i + 1), 0)).collect();
        m.split();
        assert_eq!(m.regions.len(), 6);
        // Back to 3 regions (count equal to last split's and 3 < 12/3): three pieces each.
        m.regions = (0..3).map(|i| reg(100 * i, 100 * (i + 1), 0)).collect();
        m.split();
        assert_eq!(m.regions.len(), 9);
    }

    #[test]
    fn auto_tune_formulas() {
        let rs = vec![reg(0, 10, 0), reg(10, 20, 0)];
        // No access at all: score 0, input doubles, interval doubles.
        assert_eq!(intervals_score(&rs, 20, 400), 0);
        assert_eq!(intervals_adaptation_bp(&rs, 20, 400), 20_000);
        // Half the space seen in 1 of 20 samples: 2.5% observed vs a 4% goal, score 6250,
        // compensation 37.5%: x1.375.
        let rs = vec![reg(0, 10, 0), reg(10, 20, 1)];
        // events = 10 pages * 1; max = 20 pages * 20 = 400 pages; target = 16 pages.
        assert_eq!(intervals_score(&rs, 20, 400), 10 * 10_000 / 16);
        assert_eq!(intervals_adaptation_bp(&rs, 20, 400), 10_000 + 10_000 * (10_000 - 6250) / 10_000);
        // Way over the goal: reset to the minimum, damped to halving.
        let rs = vec![reg(0, 10, 20)];
        assert_eq!(intervals_adaptation_bp(&rs, 20, 400), 5_000);
        assert_eq!(feed_loop_next_input(100_000_000, 10_000), 100_000_000);
        assert_eq!(feed_loop_next_input(100_000_000, 15_000), 50_000_000);
    }

    #[test]
    fn auto_tune_changes_the_sampling_interval_within_bounds() {
        let mut a = attrs();
        a.goal = Some(IntervalsGoal {
            access_bp: 400,
            aggrs: 1,
            min_sample: Ps::from_ns(5_000_000),
            max_sample: Ps::from_ns(12_000_000),
        });
        let mut m = monitor(a, 1, vec![reg(0, 100, 0), reg(100, 200, 0)]);
        m.sz_limit = 100 * P;
        let mut mach = testutil::machine();
        // 20 sampling intervals with no access: first tuning doubles 5 ms -> 10 ms.
        for _ in 0..20 {
            m.after_check(Ps::ZERO, &MachineView::new(&mut mach));
        }
        assert_eq!(m.attrs.sample, Ps::from_ns(10_000_000));
        assert_eq!(m.attrs.aggr, Ps::from_ns(200_000_000), "aggr_samples kept");
        for _ in 0..20 {
            m.after_check(Ps::ZERO, &MachineView::new(&mut mach));
        }
        assert_eq!(m.attrs.sample, Ps::from_ns(12_000_000), "clamped to the maximum");
        assert_eq!(m.tunings, 2);
    }

    #[test]
    fn auto_tune_shortens_the_interval_when_accesses_exceed_the_goal() {
        // Every region accessed in every sample: 100% observed vs a 4% goal, score >= 2x the
        // goal: the input resets to its minimum and the change is damped to halving.
        let mut a = attrs();
        a.sample = Ps::from_ns(20_000_000);
        a.aggr = Ps::from_ns(400_000_000);
        a.goal = Some(IntervalsGoal {
            access_bp: 400,
            aggrs: 1,
            min_sample: Ps::from_ns(6_000_000),
            max_sample: Ps::from_ns(1_000_000_000),
        });
        let mut m = monitor(a, 1, vec![reg(0, 100, 0), reg(100, 200, 0)]);
        m.sz_limit = 100 * P;
        let mut mach = testutil::machine();
        let mut seen = vec![m.attrs.sample];
        for _ in 0..3 {
            for _ in 0..20 {
                for r in &mut m.regions {
                    r.nr_accesses += 1;
                }
                m.after_check(Ps::ZERO, &MachineView::new(&mut mach));
            }
            seen.push(m.attrs.sample);
        }
        // 20 ms -> 10 ms -> 6 ms (5 ms clamped to the minimum) -> 6 ms.
        let want: Vec<Ps> = [20_000_000, 10_000_000, 6_000_000, 6_000_000].map(Ps::from_ns).to_vec();
        assert_eq!(seen, want);
        assert_eq!(m.attrs.aggr, Ps::from_ns(6_000_000 * 20), "aggr_samples kept");
    }

    #[test]
    fn region_count_stays_within_bounds() {
        // Random nr_accesses at every aggregation over a 1 GiB space; after each aggregation
        // the count is within [min, max].
        for (min, max) in [(10, 1000), (10, 40), (3, 8)] {
            let mut a = attrs();
            a.min_nr_regions = min;
            a.max_nr_regions = max;
            let mut m = monitor(a, min as u64 * 31 + max as u64, vec![Region::new(0, 1 << 30)]);
            apply_min_nr_regions(&mut m.regions, &mut m.scratch, m.sz_limit);
            let mut mach = testutil::machine();
            let mut rng = Rng::new(99);
            for step in 0..20 * 300 {
                for r in &mut m.regions {
                    if rng.below(3) == 0 && (r.nr_accesses as u64) < a.max_nr_accesses() {
                        r.nr_accesses += 1;
                    }
                }
                let aggr = m.aggregations;
                m.after_check(Ps::ZERO, &MachineView::new(&mut mach));
                if m.aggregations > aggr {
                    let n = m.regions.len();
                    assert!(n >= min && n <= max, "{n} regions not in [{min}, {max}] at step {step}");
                    check_sorted_contiguous(&m.regions);
                    assert_eq!(m.regions.first().unwrap().start, 0);
                    assert_eq!(m.regions.last().unwrap().end, 1 << 30);
                }
            }
        }
    }

    #[test]
    fn snapshots_and_hot_ranges() {
        let s = Snapshot {
            start: Ps::ZERO,
            end: Ps::from_ns(1),
            sample: Ps::from_ns(1),
            regions: vec![
                SnapRegion { start: 0, end: P, nr_accesses: 6, age: 0 },
                SnapRegion { start: P, end: 2 * P, nr_accesses: 9, age: 0 },
                SnapRegion { start: 2 * P, end: 3 * P, nr_accesses: 5, age: 0 },
                SnapRegion { start: 5 * P, end: 6 * P, nr_accesses: 40, age: 0 },
            ],
        };
        let (r, n) = s.hot_ranges(5);
        assert_eq!(r, vec![(0, 2 * P), (5 * P, 6 * P)], "> 5, adjacent coalesced");
        assert_eq!(n, 3);
    }

    #[test]
    fn snapshot_at_picks_the_last_completed() {
        let mut m = Monitor::new(attrs(), Rng::new(1));
        m.regions = vec![reg(0, 10, 0)];
        let ns = Ps::from_ns;
        assert!(m.snapshot_at(Ps::NEVER).is_none());
        m.regions[0].nr_accesses = 1;
        m.take_snapshot(ns(100));
        m.regions[0].nr_accesses = 2;
        m.take_snapshot(ns(200));
        m.regions[0].nr_accesses = 3;
        m.take_snapshot(ns(300));
        assert_eq!(m.snapshot_at(ns(300)).unwrap().regions[0].nr_accesses, 3);
        assert_eq!(m.snapshot_at(ns(299)).unwrap().regions[0].nr_accesses, 2);
        assert_eq!(m.snapshot_at(ns(299)).unwrap().start, ns(100));
        assert!(m.snapshot_at(ns(150)).is_none(), "only the two latest are kept");
    }

    #[test]
    fn monitor_is_deterministic() {
        let run = |seed| {
            let mut m = monitor(attrs(), seed, vec![Region::new(0, 1 << 30)]);
            let mut mach = testutil::machine();
            for i in 0..400u32 {
                for (k, r) in m.regions.iter_mut().enumerate() {
                    r.nr_accesses += (i as usize + k).is_multiple_of(3) as u32;
                }
                m.after_check(Ps::ZERO, &MachineView::new(&mut mach));
            }
            m.regions.clone()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }

    #[test]
    fn attrs_validation() {
        let ok = attrs();
        assert!(ok.validate().is_ok());
        let bad = [
            (Attrs { min_nr_regions: 2, ..ok }, "min_nr_regions"),
            (Attrs { min_nr_regions: 20, max_nr_regions: 10, ..ok }, "max_nr_regions"),
            (Attrs { sample: Ps::from_ns(200_000_000), ..ok }, "aggr_interval"),
            (Attrs { sample: Ps::ZERO, ..ok }, "sample_interval"),
            (
                Attrs {
                    goal: Some(IntervalsGoal {
                        access_bp: 400,
                        aggrs: 3,
                        min_sample: Ps::from_ns(6_000_000),
                        max_sample: Ps::from_ns(10_000_000_000),
                    }),
                    ..ok
                },
                "sample_interval",
            ),
        ];
        for (a, field) in bad {
            assert_eq!(a.validate().unwrap_err().0, field, "{a:?}");
        }
    }

    #[test]
    fn moving_sum_is_exact_at_window_boundaries() {
        // A window of 4: last window 2 hits -> nomvsum 20000; this window 3 hits.
        let mut bp = 20_000;
        for hit in [true, false, true, true] {
            bp = moving_sum(bp, 20_000, 4, if hit { 10_000 } else { 0 });
        }
        assert_eq!(bp, 30_000);
    }
}
