//! Applying the schemes of one DAMON context in the monitoring loop
//! (`kdamond_apply_schemes`): [`Damos`] runs every due scheme over the regions (quota charge
//! windows, the pattern and score test, the split at the quota's remainder, the core
//! filters), then applies the action page by page through the ops filters; an [`Actor`]
//! carries out migrations and reclaim and is charged the work.
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

use tierlab_core::{PageSize, PAGE_SIZE};

use super::config::{pattern_ok, Action, FilterConfig, FilterKind, SchemeConfig};
use super::quota::{adjust_quota, score};
use super::scheme::Scheme;
use crate::agents::telemetry::monitor::{intervals_in, Monitor, Region};
use crate::agents::MachineView;
use crate::error::Result;
use crate::hw::pagetable::Level;
use crate::os::Flush;
use crate::stats::Stats;
use crate::units::Ps;

/// What applying an action needs from the machine and whoever runs the context (a telemetry
/// technique's kdamond, or a tiering policy): migrations, reclaim, and charging its work.
pub trait Actor {
    /// Move the pages of `vas` to node `to`; returns the bytes moved and the time charged.
    /// Stops early when the node is full.
    fn migrate(&mut self, m: &mut MachineView, vas: &[u64], to: u8) -> Result<(u64, Ps)>;
    /// Reclaim the pages of `vas` to swap; bytes and time.
    fn pageout(&mut self, m: &mut MachineView, vas: &[u64]) -> Result<(u64, Ps)>;
    /// Charge `t` of the context's own work.
    fn charge(&mut self, m: &mut MachineView, t: Ps);
}

/// The actor of a telemetry technique's own kdamond: actions run on its core (the caller
/// brought the core to now), migrations and reclaim go straight to the machine.
#[derive(Clone, Debug, Default)]
pub struct DirectActor {
    /// The kdamond's core.
    pub core: usize,
    /// Time charged to the core by actions and walks.
    pub charged: Ps,
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
    fn migrate(&mut self, m: &mut MachineView, vas: &[u64], to: u8) -> Result<(u64, Ps)> {
        let r = m.migrate_pages(vas, to, self.core)?;
        let t = Ps::from_ns_f64(r.ns);
        self.charged += t;
        self.migrated_bytes += r.bytes;
        Ok((r.bytes, t))
    }
    fn pageout(&mut self, m: &mut MachineView, vas: &[u64]) -> Result<(u64, Ps)> {
        let r = m.pageout_pages(vas, self.core)?;
        let t = Ps::from_ns_f64(r.ns);
        self.charged += t;
        self.pageout_bytes += r.bytes;
        Ok((r.bytes, t))
    }
    fn charge(&mut self, m: &mut MachineView, t: Ps) {
        m.charge(self.core, t);
        self.charged += t;
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
    pub(super) wmark_wait: Ps,
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
            wmark_wait: Ps::ZERO,
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
        let (sample, aggr) = (mon.attrs.sample, mon.attrs.aggr);
        for s in &mut self.schemes {
            let ai = if s.cfg.apply_interval.0 > 0 { s.cfg.apply_interval.ps() } else { aggr };
            s.next_apply_sis = mon.passed_sis() + intervals_in(ai, sample);
        }
        self.started = true;
    }

    /// `kdamond_apply_schemes` at `now` on the regions of `mon`.
    pub fn apply(
        &mut self,
        mon: &mut Monitor,
        m: &mut MachineView,
        act: &mut dyn Actor,
        now: Ps,
    ) -> Result<()> {
        if !self.started {
            self.set_next_apply(mon);
        }
        let passed = mon.passed_sis();
        let max_nr = mon.attrs.max_nr_accesses();
        let aggr = mon.attrs.aggr;
        // PSI stand-in: fault time of the application's cores, us.
        let psi_total = m.app_total(|c| c.fault_ps) / 1_000_000;
        let mut any = false;
        for s in &mut self.schemes {
            if passed < s.next_apply_sis || !s.wmark_active {
                continue;
            }
            any = true;
            adjust_quota(s, &mon.regions, m, now, max_nr, aggr, psi_total);
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
                if !valid_target(s, &mon.regions[cur], max_nr, aggr) {
                    continue;
                }
                let inserted = apply_scheme(s, &mut mon.regions, cur, m, act, self.ns_per_page)?;
                next += inserted;
            }
            i = next;
        }
        let sample = mon.attrs.sample;
        for s in &mut self.schemes {
            if passed < s.next_apply_sis {
                continue;
            }
            let ai = if s.cfg.apply_interval.0 > 0 { s.cfg.apply_interval.ps() } else { aggr };
            s.next_apply_sis = passed + intervals_in(ai, sample);
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

/// `damos_valid_target`: the pattern and, under a quota, the score.
fn valid_target(s: &Scheme, r: &Region, max_nr: u64, aggr: Ps) -> bool {
    if !pattern_ok(&s.cfg, r) {
        return false;
    }
    if s.quota.esz == 0 {
        return true;
    }
    score(s.cfg.action, r, max_nr, aggr, &s.cfg.quota) >= s.quota.min_score
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
    let (applied, passed, took, source) = apply_action(s, r.start, r.end, m, act, ns_per_page)?;
    if source_only {
        // The source node's context would hold only these pages of the region (a region
        // cut at the quota's remainder is charged that remainder, as the kernel charges
        // the split size).
        sz = split_charge.unwrap_or(source);
    }
    let q = &mut s.quota;
    q.total_charged += took;
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
/// (bytes applied, bytes that passed the filters, time taken, bytes of present pages not on
/// the migration target: what a source-node context would see).
fn apply_action(
    s: &Scheme,
    start: u64,
    end: u64,
    m: &mut MachineView,
    act: &mut dyn Actor,
    ns_per_page: f64,
) -> Result<(u64, u64, Ps, u64)> {
    let ops: Vec<&FilterConfig> = s.cfg.filters.iter().filter(|f| f.kind.for_ops()).collect();
    let action = s.cfg.action;
    let target = s.cfg.target_nid;
    let mut batch: Vec<u64> = Vec::new();
    let (mut applied, mut passed, mut took) = (0u64, 0u64, Ps::ZERO);
    let mut walked = 0u64;
    let mut source = 0u64;
    let source_only = s.source_node_only && matches!(action, Action::MigrateHot | Action::MigrateCold);
    let mut va = start;
    let mut run: Option<(u64, u64)> = None; // lru marks: a run of passed pages
    let flush = |batch: &mut Vec<u64>,
                 m: &mut MachineView,
                 act: &mut dyn Actor,
                 applied: &mut u64,
                 took: &mut Ps|
     -> Result<bool> {
        if batch.is_empty() {
            return Ok(true);
        }
        let (bytes, t) = match action {
            Action::MigrateHot | Action::MigrateCold => act.migrate(m, batch, target.unwrap_or(0))?,
            Action::Pageout => act.pageout(m, batch)?,
            _ => (0, Ps::ZERO),
        };
        *applied += bytes;
        *took += t;
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
                            room = flush(&mut batch, m, act, &mut applied, &mut took)?;
                        }
                    }
                }
                Action::Pageout => {
                    batch.push(base);
                    if batch.len() == BATCH {
                        flush(&mut batch, m, act, &mut applied, &mut took)?;
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
        flush(&mut batch, m, act, &mut applied, &mut took)?;
    }
    if let Some((rs, re)) = run {
        m.lru_mark(rs, re, action == Action::LruPrio);
        applied += re - rs;
    }
    let walk = Ps::from_ns_f64(walked as f64 * ns_per_page);
    act.charge(m, walk);
    took += walk;
    Ok((applied, passed, took, source))
}

fn page_bytes(m: &MachineView, va: u64) -> u64 {
    m.page_size_of(va).map_or(PAGE_SIZE, PageSize::bytes)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;

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
            apply(&mut d, &mut mon, &mut m, Ps::ZERO);
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
            apply(&mut d, &mut mon, &mut m, Ps::ZERO);
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
                apply(&mut d, &mut mon, &mut m, Ps::from_ns(100_000_000));
                assert_eq!(d.schemes[0].stats.sz_applied, 128 << 10);
            }
        }
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
        apply(&mut d, &mut mon, &mut m, Ps::ZERO);
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
        apply(&mut d, &mut mon, &mut m, Ps::ZERO);
        let bounds: Vec<(u64, u64)> = mon.regions.iter().map(|r| (r.start - base, r.end - base)).collect();
        assert_eq!(bounds, vec![(0, MIB), (MIB, 3 * MIB / 2), (3 * MIB / 2, 2 * MIB), (2 * MIB, 3 * MIB)]);
        assert_eq!(m.os.mem.lru.active_bytes(), 3 * MIB / 2);
        apply(&mut d, &mut mon, &mut m, Ps::from_ns(50_000_000));
        assert_eq!(m.os.mem.lru.active_bytes(), 3 * MIB / 2, "quota spent in this window");
        apply(&mut d, &mut mon, &mut m, Ps::from_ns(100_000_000));
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
}
