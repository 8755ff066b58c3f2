//! `nomad`: NOMAD-like non-exclusive tiering with transactional page migration (Xiang et al.,
//! OSDI 2024), on NUMA hint faults.
//!
//! # Model
//! **Finding hot pages** is TPP's / NUMA balancing's: every `scan_period` the next
//! `scan_size` of address space is protected (slow-tier pages only, the range's TLB entries
//! flushed, the cost on application thread 0); a hint fault whose latency (fault time minus
//! scan time) is below `hot_threshold` queues the page for promotion. Unlike NUMA tiering
//! the faulting thread does not migrate: the page goes to a queue that the policy's migration
//! thread (its core) drains every millisecond.
//!
//! **Transactional migration.** A promotion copies the page *without unmapping it*: the
//! thread clears the page's Dirty bit (and flushes its TLB entries, so a store must set it
//! again), copies the page on its core (`bytes / min(bandwidth)`, from the promotion budget),
//! and when the copy ends checks the Dirty bit. Clean: the copy is committed by remapping the
//! page to the fast tier (one shootdown, no second copy). Dirty: the application wrote the
//! page during the copy; the transaction aborts (the copy's time is lost) and the page is
//! queued again, at most `tx_retries` times. The application never waits for a copy. (That is
//! `copy_mode = "transactional"`, NOMAD's default; `async` has the migration thread migrate
//! the page unmapped, `sync` the faulting thread in its hint fault: the ablations.)
//!
//! **Shadow pages (non-exclusive tiering).** A committed promotion keeps the slow-tier copy
//! as the page's shadow, up to `shadow_limit` of the slow tier's capacity. Demotion (TPP's
//! kswapd: below `demote_watermark` of free fast memory, in second-chance order over the
//! fast tier's pages at start, then those it promoted, until back at the watermark) of a page that still has its shadow and is
//! clean (Dirty bit clear since the commit) only remaps it (no copy); a dirty page is copied
//! back and loses its shadow.
//!
//! Limits: shadow pages are counted (`tiering.shadow_bytes`) but do not take room from the
//! slow node's free memory (the machine has one copy per page), so NOMAD's shadow reclaim
//! under slow-tier pressure is not modelled; a transactional copy is charged to the
//! migration core's time but its traffic does not load the nodes (loaded latency); kswapd's
//! list holds the pages on the fast tier at start and those it promoted (pages faulted onto
//! the fast tier later are not demoted); huge pages are handled as their base pages.
//!
//! Parameters: [`NomadParams`] (defaults, ranges and sources in `docs/parameters.md`,
//! mechanism and numbers in `docs/tiering-systems.md`).

use std::collections::{BTreeSet, VecDeque};

use super::{CopyMode, TieringBuildCtx, TieringCtx, TieringParams, TieringPolicy, TieringShared};
use crate::agents::{FeedKind, Ps};
use crate::error::Result;
use crate::hw::pagetable::Level;
use crate::os::Flush;
use crate::stats::Stats;
use crate::units::{ByteSize, Duration};
use tierlab_core::param::{params, Provenance};
use tierlab_core::PAGE_SIZE;

/// Parameters of `nomad`.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct NomadParams {
    /// Address space protected per scan.
    #[param(
        default = ByteSize(256 << 20),
        sourced = "Linux kernel/sched/fair.c: numa_balancing_scan_size_mb = 256 (NOMAD runs on NUMA balancing / TPP)"
    )]
    pub scan_size: ByteSize,
    /// Time between scans.
    #[param(
        default = Duration(1_000_000_000),
        sourced = "Linux kernel/sched/fair.c: numa_balancing_scan_period_min_ms = 1000"
    )]
    pub scan_period: Duration,
    /// Time before the first scan.
    #[param(default = Duration(1_000_000_000), sourced = "Linux kernel/sched/fair.c: numa_balancing_scan_delay_ms = 1000")]
    pub scan_delay: Duration,
    /// A hint fault this soon after the scan queues the page for promotion.
    #[param(
        default = Duration(1_000_000_000),
        sourced = "Linux kernel/sched/fair.c: numa_balancing_hot_threshold_ms = MSEC_PER_SEC"
    )]
    pub hot_threshold: Duration,
    /// kswapd demotes when free fast memory is below this share of it, until back there.
    #[param(
        default = 0.02,
        range = "[0, 0.5)",
        unit = "fraction",
        sourced = "reference/memory-management.md: TPP's demote_scale_factor, 2%"
    )]
    pub demote_watermark: f64,
    /// Shadow pages kept at most, as a share of the slow tier's capacity.
    #[param(
        default = 0.1,
        range = "[0, 1]",
        unit = "fraction",
        assumed = "NOMAD reclaims shadow pages under slow-tier memory pressure; a fixed share here"
    )]
    pub shadow_limit: f64,
    /// Pages the migration thread starts copying per millisecond at most.
    #[param(
        default = 512,
        range = "[1, 1e9]",
        unit = "pages",
        assumed = "one migration batch (Linux NR_MAX_BATCHED_MIGRATION = 512) per wake-up"
    )]
    pub batch: u32,
    /// Keep the slow copy of a promoted page as its shadow (`false`: the ablation:
    /// exclusive tiering, every demotion copies).
    #[param(default = true, setting)]
    pub shadow: bool,
    /// Cost of a hint fault to the faulting core.
    #[param(default = 1000.0, range = "[0, 1e9]", unit = "ns", assumed = "a minor fault (cost.fault_ns)")]
    pub hint_fault_ns: f64,
    /// Cost of protecting one present PTE.
    #[param(default = 20.0, range = "[0, 1e9]", unit = "ns", assumed = "change_prot_numa per present PTE")]
    pub ns_per_pte: f64,
}

/// The migration thread wakes this often.
const TICK: Ps = Ps::from_ns(1_000_000);

impl TieringParams for NomadParams {
    fn build(&self, shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        if self.scan_size.0 < PAGE_SIZE {
            return Err(ctx.err("scan_size", "must be at least one page (4 KiB)"));
        }
        for (f, d) in [("scan_period", self.scan_period), ("hot_threshold", self.hot_threshold)] {
            if d.0 == 0 {
                return Err(ctx.err(f, "must be > 0"));
            }
        }
        Ok(Box::new(Nomad::new(self.clone(), shared.copy_mode, shared.tx_retries)))
    }
    fn period(&self) -> Ps {
        TICK
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        None
    }
}

/// One transactional copy in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Copy {
    va: u64,
    end: Ps,
    tries: u32,
}

/// The `nomad` policy.
pub struct Nomad {
    p: NomadParams,
    /// How promotions copy (`tiering.copy_mode`; NOMAD's own: transactional).
    mode: CopyMode,
    /// Retries of an aborted transactional copy (`tiering.tx_retries`).
    max_retries: u32,
    next: Ps,
    next_scan: Ps,
    cursor: u64,
    /// Pages waiting for a copy, with their aborts so far.
    queue: VecDeque<(u64, u32)>,
    queued: BTreeSet<u64>,
    inflight: VecDeque<Copy>,
    /// Pages it promoted, in second-chance order.
    lru: VecDeque<u64>,
    /// Promoted pages whose slow-tier copy is kept.
    shadows: BTreeSet<u64>,
    scans: u64,
    hot_faults: u64,
    commits: u64,
    aborts: u64,
    dropped: u64,
    free_demotions: u64,
    copy_demotions: u64,
}

impl Nomad {
    fn new(p: NomadParams, mode: CopyMode, max_retries: u32) -> Self {
        Nomad {
            mode,
            max_retries,
            next: TICK,
            next_scan: p.scan_delay.ps(),
            p,
            cursor: 0,
            queue: VecDeque::new(),
            queued: BTreeSet::new(),
            inflight: VecDeque::new(),
            lru: VecDeque::new(),
            shadows: BTreeSet::new(),
            scans: 0,
            hot_faults: 0,
            commits: 0,
            aborts: 0,
            dropped: 0,
            free_demotions: 0,
            copy_demotions: 0,
        }
    }

    /// Protect the next `scan_size` of address space (slow-tier pages), as NUMA balancing.
    fn scan(&mut self, ctx: &mut TieringCtx) {
        if super::numa_tiering::hint_scan(
            ctx,
            &mut self.cursor,
            self.p.scan_size.0,
            self.p.hint_fault_ns,
            self.p.ns_per_pte,
        ) {
            self.scans += 1;
        }
    }

    /// The fast node's pages at start, in address order (kswapd's list before any
    /// promotion).
    fn build_lru(&mut self, ctx: &mut TieringCtx) {
        super::numa_tiering::fast_pages_in_order(ctx, &mut self.lru);
    }

    /// Start a transactional copy of `va`: clear its Dirty bit, flush its translations, copy.
    fn start_copy(&mut self, va: u64, tries: u32, ctx: &mut TieringCtx) {
        let bytes = super::page_bytes(&ctx.machine, va);
        if let Some(pt) = ctx.machine.page_tables_mut() {
            pt.test_and_clear_dirty(va, Level::Pte);
        }
        let core = ctx.core;
        ctx.machine.invalidate_range(core, va, va + bytes);
        let end = ctx.copy(bytes, true);
        self.inflight.push_back(Copy { va, end, tries });
    }

    /// Commit or abort the copies that ended by now.
    fn finish_copies(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let slow = ctx.tiers().slow;
        let mut commit = Vec::new();
        while let Some(c) = self.inflight.front().copied() {
            if c.end > ctx.now {
                break;
            }
            self.inflight.pop_front();
            if ctx.machine.node_of(c.va) != Some(slow) {
                continue;
            }
            let dirty = ctx.machine.page_tables().is_some_and(|pt| pt.test_dirty(c.va, Level::Pte));
            if dirty {
                self.aborts += 1;
                if c.tries < self.max_retries {
                    self.queue.push_back((c.va, c.tries + 1));
                } else {
                    self.queued.remove(&c.va);
                    self.dropped += 1;
                }
                continue;
            }
            commit.push(c.va);
        }
        if commit.is_empty() {
            return Ok(());
        }
        self.make_room(commit.len() as u64 * PAGE_SIZE, ctx)?;
        let moved = ctx.remap(&commit, true)? as usize;
        let slow_cap = super::capacity_bytes(&ctx.machine, slow) as f64;
        for &va in &commit[..moved] {
            self.queued.remove(&va);
            self.commits += 1;
            self.promoted(va, slow_cap);
        }
        // What did not fit stays queued for the next wake-up.
        for &va in &commit[moved..] {
            self.queue.push_back((va, 0));
        }
        Ok(())
    }

    /// `va` is on the fast tier now: on kswapd's list, its slow copy kept as a shadow.
    fn promoted(&mut self, va: u64, slow_cap: f64) {
        self.lru.push_back(va);
        if self.p.shadow
            && ((self.shadows.len() as u64 + 1) * PAGE_SIZE) as f64 <= slow_cap * self.p.shadow_limit
        {
            self.shadows.insert(va);
        }
    }

    /// The ablation without transactions: migrate `vas` (copy and unmap) now.
    fn migrate_now(&mut self, vas: &[u64], ctx: &mut TieringCtx) -> Result<()> {
        if vas.is_empty() {
            return Ok(());
        }
        self.make_room(vas.len() as u64 * PAGE_SIZE, ctx)?;
        let (moved, _) = ctx.promote(vas)?;
        let slow_cap = super::capacity_bytes(&ctx.machine, ctx.tiers().slow) as f64;
        for &va in &vas[..moved as usize] {
            self.queued.remove(&va);
            self.commits += 1;
            // A plain migration leaves the page's Dirty bit as it was: clear it so that a
            // shadow's cleanliness means "not written since the promotion".
            if let Some(pt) = ctx.machine.page_tables_mut() {
                pt.test_and_clear_dirty(va, Level::Pte);
            }
            self.promoted(va, slow_cap);
        }
        for &va in &vas[moved as usize..] {
            self.queue.push_back((va, 0));
        }
        Ok(())
    }

    /// `copy_mode = "sync"`: each faulting thread migrates its page in the fault (the copy
    /// on its core), within the promotion budget.
    fn migrate_in_faults(&mut self, faulted: &[(u64, usize)], ctx: &mut TieringCtx) -> Result<()> {
        let slow_cap = super::capacity_bytes(&ctx.machine, ctx.tiers().slow) as f64;
        for &(va, core) in faulted {
            if ctx.machine.node_of(va) != Some(ctx.tiers().slow)
                || super::page_bytes(&ctx.machine, va) > ctx.kind.mover.budget()
            {
                continue;
            }
            self.make_room(PAGE_SIZE, ctx)?;
            let (moved, _) = ctx.promote_faulted(&[va], core)?;
            if moved > 0 {
                self.commits += 1;
                if let Some(pt) = ctx.machine.page_tables_mut() {
                    pt.test_and_clear_dirty(va, Level::Pte);
                }
                self.promoted(va, slow_cap);
            }
        }
        Ok(())
    }

    /// kswapd (TPP): demote in second-chance order until free fast memory is back at the
    /// watermark plus `need`; a clean page with a shadow is remapped, others copied.
    fn make_room(&mut self, need: u64, ctx: &mut TieringCtx) -> Result<()> {
        let wmark = (ctx.fast_capacity() as f64 * self.p.demote_watermark) as u64;
        let target = wmark + need;
        if ctx.fast_free() >= target {
            return Ok(());
        }
        let fast = ctx.tiers().fast;
        let (mut free, mut copy) = (Vec::new(), Vec::new());
        let mut freed = ctx.fast_free();
        let mut budget = self.lru.len() * 2;
        while freed < target && budget > 0 {
            budget -= 1;
            let Some(va) = self.lru.pop_front() else { break };
            if ctx.machine.node_of(va) != Some(fast) {
                self.shadows.remove(&va);
                continue;
            }
            if ctx.machine.clear_accessed(va, Level::Pte, Flush::None) {
                self.lru.push_back(va);
                continue;
            }
            let clean = !ctx.machine.page_tables().is_some_and(|pt| pt.test_dirty(va, Level::Pte));
            if self.shadows.remove(&va) && clean {
                free.push(va);
            } else {
                copy.push(va);
            }
            freed += PAGE_SIZE;
        }
        self.free_demotions += ctx.remap(&free, false)?;
        self.copy_demotions += ctx.demote(&copy)?;
        Ok(())
    }
}

impl TieringPolicy for Nomad {
    fn start(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        super::numa_tiering::enable_hint_faults(ctx, self.p.hint_fault_ns);
        self.build_lru(ctx);
        Ok(())
    }

    fn next_event(&self) -> Ps {
        self.next.min(self.next_scan)
    }

    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()> {
        let now = ctx.now;
        if now >= self.next_scan {
            self.next_scan = now + self.p.scan_period.ps();
            self.scan(ctx);
        }
        if now < self.next {
            return Ok(());
        }
        self.next = now + TICK;
        let slow = ctx.tiers().slow;
        let faults = ctx.machine.hint_faults().as_mut().map(|h| h.take_faults()).unwrap_or_default();
        let mut sync = Vec::new();
        for f in faults {
            let va = f.va & !(PAGE_SIZE - 1);
            if f.time.saturating_sub(f.scan) >= self.p.hot_threshold.ps()
                || ctx.machine.node_of(va) != Some(slow)
            {
                continue;
            }
            self.hot_faults += 1;
            if self.mode == CopyMode::Sync {
                // The faulting thread migrates in its fault, as NUMA tiering.
                sync.push((va, f.core));
            } else if self.queued.insert(va) {
                self.queue.push_back((va, 0));
            }
        }
        self.migrate_in_faults(&sync, ctx)?;
        self.finish_copies(ctx)?;
        let mut started = 0;
        let mut plain = Vec::new();
        while started < self.p.batch && ctx.core_free_before(self.next) {
            let Some(&(va, tries)) = self.queue.front() else { break };
            if ctx.machine.node_of(va) != Some(slow) {
                self.queue.pop_front();
                self.queued.remove(&va);
                continue;
            }
            if super::page_bytes(&ctx.machine, va) > ctx.kind.mover.budget() {
                break;
            }
            self.queue.pop_front();
            if self.mode == CopyMode::Transactional {
                self.start_copy(va, tries, ctx);
            } else {
                plain.push(va);
            }
            started += 1;
        }
        self.migrate_now(&plain, ctx)?;
        if let Some(c) = self.inflight.front() {
            self.next = self.next.min(c.end.max(now + Ps::from_ps(1)));
        }
        Ok(())
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        vec![("promotion_queue".into(), self.queue.len() as f64)]
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.scans"), self.scans);
        out.set(format!("{prefix}.hot_faults"), self.hot_faults);
        out.set(format!("{prefix}.tx_commits"), self.commits);
        out.set(format!("{prefix}.tx_aborts"), self.aborts);
        out.set(format!("{prefix}.tx_dropped"), self.dropped);
        out.set(format!("{prefix}.shadow_demotions"), self.free_demotions);
        out.set(format!("{prefix}.copy_demotions"), self.copy_demotions);
        out.set(format!("{prefix}.shadow_bytes"), self.shadows.len() as u64 * PAGE_SIZE);
    }
}

impl crate::params::SharedDefaults<TieringShared> for NomadParams {
    fn shared_defaults() -> TieringShared {
        TieringShared::with_rate(65536.0).copying(super::CopyMode::Transactional)
    }
    fn shared_provenance(field: &str) -> Option<Provenance> {
        match field {
            "rate_limit_mbps" => Some(Provenance::Sourced(
            "Linux kernel/sched/fair.c: numa_balancing_promote_rate_limit_MBps = 65536 (NOMAD keeps the kernel's limit)",
        )),
            "copy_mode" => Some(Provenance::Sourced(
                "NOMAD (Xiang et al., OSDI'24): transactional page migration by a migration thread, the page mapped during its copy",
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::tiering::{Mover, Tiering, Tiers};
    use crate::os::{AddressSpace, MachineConfig, MapOptions};
    use tierlab_core::Access;

    /// Three pages on the slow tier: a write during the copy of the first aborts its
    /// transaction (it stays slow); the second commits without a second copy and keeps its
    /// slow copy as a shadow; demoting it again (clean) is a remap, no copy.
    #[test]
    fn write_during_copy_aborts_and_clean_shadow_demotes_free() {
        let mut m = crate::os::Machine::new(&MachineConfig { cores: 2, ..MachineConfig::default() });
        m.os.mm_cpumask = vec![true, true];
        let a = m.mmap(4 * PAGE_SIZE, MapOptions::named("x")).unwrap();
        for i in 0..4 {
            m.access(0, Access::read(a + i * PAGE_SIZE)).unwrap();
        }
        let pages: Vec<u64> = (0..4).map(|i| a + i * PAGE_SIZE).collect();
        m.migrate_pages(&pages, 1, 1).unwrap();
        let t = Tiers { fast: 0, slow: 1 };
        let mut mover = Mover::new(65536.0, TICK);
        let mut nomad = Nomad::new(NomadParams::default(), CopyMode::Transactional, 0);
        let mut cpu = Ps::ZERO;
        let now = Ps::from_ns(10_000_000);
        {
            let mut c = crate::agents::testing::ctx(&mut m, now, 1, &mut cpu);
            let mut tc = c.with_kind(Tiering { tiers: t, mover: &mut mover });
            nomad.start_copy(pages[0], 0, &mut tc);
            nomad.start_copy(pages[1], 0, &mut tc);
        }
        // The application stores to the first page while it is being copied.
        m.access(0, Access::write(pages[0])).unwrap();
        let copy_time = mover.migrate;
        assert!(copy_time > Ps::ZERO, "the copies were charged");
        let later = now + Ps::from_ns(1_000_000);
        {
            let mut c = crate::agents::testing::ctx(&mut m, later, 1, &mut cpu);
            let mut tc = c.with_kind(Tiering { tiers: t, mover: &mut mover });
            nomad.finish_copies(&mut tc).unwrap();
        }
        assert_eq!((nomad.aborts, nomad.commits, nomad.dropped), (1, 1, 1));
        assert_eq!(m.node_of(pages[0]), Some(1), "the aborted page stays on the slow tier");
        assert_eq!(m.node_of(pages[1]), Some(0), "the clean page was committed");
        assert!(nomad.shadows.contains(&pages[1]), "its slow copy is kept as a shadow");
        assert_eq!(mover.promoted_pages, 1);
        // The commit remapped: only a shootdown was added to the copies' time.
        let commit = mover.migrate - copy_time;
        assert_eq!(commit, mover.shootdown, "a commit costs its shootdown, no second copy");
        // Demote the clean shadowed page: a remap (no copy).
        let before = (mover.migrate, mover.shootdown);
        {
            let mut c = crate::agents::testing::ctx(&mut m, later + TICK, 1, &mut cpu);
            let mut tc = c.with_kind(Tiering { tiers: t, mover: &mut mover });
            nomad.p.demote_watermark = 0.0;
            let need = tc.fast_free() + PAGE_SIZE;
            nomad.make_room(need, &mut tc).unwrap();
        }
        assert_eq!(m.node_of(pages[1]), Some(1));
        assert_eq!((nomad.free_demotions, nomad.copy_demotions), (1, 0));
        assert_eq!(mover.migrate - before.0, mover.shootdown - before.1, "a shadow demotion copies nothing");
    }
}
