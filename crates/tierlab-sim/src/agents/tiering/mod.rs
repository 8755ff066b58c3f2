//! Tiering: promotion of hot pages to a fast tier and demotion of cold ones, driven by
//! telemetry (or by NUMA hint faults), with the cost of every migration charged back.
//!
//! # The machine
//! Two tiers: a **fast** node (default node 0, e.g. DRAM, with a capacity that cannot hold the
//! footprint) and a **slow** node (default node 1, e.g. CXL memory or Optane PMem). Pages move
//! with [`Machine::migrate_pages`] (a batch with one TLB shootdown; each page's copy costs
//! `bytes / min(bandwidth of the two nodes)` on the migrating core).
//!
//! # Contract of a policy ([`TieringPolicy`])
//! Built from its parameters ([`TieringConfig::build`]), then driven on simulated time by the
//! simulation, like an observer:
//! 1. [`TieringPolicy::start`] once at time 0, after the workload's setup and the observers'
//!    start;
//! 2. [`TieringPolicy::on_feed`] whenever the technique it follows (named by its label in
//!    `tiering.telemetry`) publishes a feed of the first kind in the policy's
//!    [`TieringParams::accepts`] that the technique publishes: a region snapshot with
//!    `nr_accesses` (region-based techniques, at every aggregation), sample batches (at every
//!    drain a sampling driver consumes), or the hot set every technique reports at each
//!    window end ([`Feed`]). A policy never learns which technique it follows;
//! 3. [`TieringPolicy::on_event`] at the times it asks for ([`TieringPolicy::next_event`], in ps):
//!    its policy loop, which migrates through a [`Mover`] (rate limit, accounting).
//!
//! A policy sees the machine only through its mechanism (its feed, page tables, hint faults);
//! never ground truth. Its own work is charged to its core (`core`, default: the first core
//! without an application thread, else core 0); migrations are charged to the core that does
//! them (the policy's, or the faulting application core for NUMA balancing's promotions).
//!
//! # Registry
//! One file per policy, one line in the [`crate::registry!`] below; its own parameters are a
//! struct declared with `#[params]` (each field's default, range, unit and source; unknown
//! keys refused). The shared ones ([`TieringShared`]: `name`, `telemetry`, `core`,
//! `fast_node`, `slow_node`, `rate_limit_mbps`) are flattened in by [`crate::params::With`];
//! each policy gives its default rate limit and where it comes from
//! ([`crate::params::SharedDefaults`]).

use crate::error::{Result, SimError};
use crate::hw::pagetable::Level;
use crate::params::{Params, SharedDefaults, With};
use crate::stats::Stats;
use tierlab_core::param::params;

use super::{
    Agent, AgentCtx, AgentOutput, Feed, FeedKind, Info, MachineView, MoveRecord, Ps, Role, Subscription,
};
use tierlab_core::{PageSize, HUGE_SIZE, PAGE_SIZE};

/// Add one sample per record of `drains` to its 4 KiB page's count; returns the number of
/// samples (ARMS' and PACT's per-interval counts).
pub(crate) fn count_sampled_pages(
    drains: &[crate::hw::pebs::Drain],
    counts: &mut std::collections::HashMap<u64, u32>,
) -> u64 {
    let mut n = 0u64;
    for d in drains {
        for &(addr, _) in &d.records {
            n += 1;
            *counts.entry(tierlab_core::vpn(addr)).or_default() += 1;
        }
    }
    n
}

pub mod arms;
pub mod colloid;
pub mod damon_mtier;
pub mod external;
pub mod hemem;
pub mod hottest_first;
pub mod hybridtier;
pub mod klruscand;
pub mod kmmscand;
pub mod kswapd;
pub mod m5;
pub mod memtis;
pub mod nomad;
pub mod numa_tiering;
pub mod pact;
pub mod pghot;
pub mod ptwalk;
#[cfg(test)]
pub mod toy;

/// How the TLB shootdowns of a migration batch are sent (`tiering.shootdown`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShootdownMode {
    /// One shootdown per batch (Linux's batched `migrate_pages` flush).
    #[default]
    Batched,
    /// One shootdown per page moved (every page its own batch).
    PerPage,
}
tierlab_core::choice_param!(ShootdownMode);

/// How a promotion copies its page (`tiering.copy_mode`). Demotions are always made by the
/// policy's thread as the kernel's `migrate_pages` (as `async`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CopyMode {
    /// The thread that asked for the promotion copies: the faulting application thread
    /// (NUMA tiering's `migrate_misplaced_folio` in the hint fault), or application thread 0
    /// for a policy that has no faulting thread (as `move_pages(2)` called by the
    /// application). The copy's time is that thread's; the page is locked meanwhile.
    Sync,
    /// The policy's migration thread copies (`migrate_pages` in a kernel thread): its core
    /// pays, the application runs on, and the page is unmapped and locked during its copy
    /// (an access to it waits for the copy's end: [`crate::os::migrating`]).
    #[default]
    Async,
    /// NOMAD's transactional migration: the migration thread copies the page while it stays
    /// mapped (its Dirty bit cleared and its translations flushed first); at the copy's end
    /// a clean page is remapped to the fast tier (commit, one shootdown), a written one keeps
    /// its slow copy (abort) and is copied again, at most `tx_retries` times.
    Transactional,
}
tierlab_core::choice_param!(CopyMode);

impl CopyMode {
    /// The name a scenario gives it.
    pub fn name(self) -> &'static str {
        match self {
            CopyMode::Sync => "sync",
            CopyMode::Async => "async",
            CopyMode::Transactional => "transactional",
        }
    }
}

/// One transactional copy under way (the engine's, [`CopyMode::Transactional`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TxCopy {
    va: u64,
    bytes: u64,
    end: Ps,
    tries: u32,
}

/// The two tiers a policy manages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiers {
    /// The fast node.
    pub fast: u8,
    /// The slow node.
    pub slow: u8,
}

/// Promotions and demotions with a promotion rate limit (a token bucket) and accounting.
#[derive(Clone, Debug)]
pub struct Mover {
    /// Promotion rate limit, bytes per ns (MB/s / 1000).
    rate: f64,
    /// Bucket capacity, bytes.
    burst: f64,
    tokens: f64,
    last: Ps,
    /// Pages (of any size) promoted / demoted.
    pub promoted_pages: u64,
    /// Pages demoted.
    pub demoted_pages: u64,
    /// Bytes promoted.
    pub promoted_bytes: u64,
    /// Bytes demoted.
    pub demoted_bytes: u64,
    /// Time charged for migrations.
    pub migrate: Ps,
    /// Of it, TLB shootdowns.
    pub shootdown: Ps,
    /// Promotions refused because the rate limit's budget was spent.
    pub rate_limited: u64,
    /// The decision log: every promotion and demotion asked for (up to [`LOG_PAGES`] pages).
    pub log: Vec<MoveRecord>,
    logged: u64,
    /// Pages named after the log was full (not logged).
    pub unlogged: u64,
    win_promoted: u64,
    win_demoted: u64,
    /// Pages per migration batch (one shootdown each).
    batch: usize,
    /// Exchange mode (`tiering.exchange`): demotions wait for the promotions of the same
    /// policy step and are paired with them into exchanges.
    exchange: bool,
    /// Demotions waiting for a promotion to pair with (exchange mode), and their bytes.
    queued: Vec<u64>,
    queued_bytes: u64,
    /// Pairs exchanged (a promotion and a demotion in one operation).
    pub exchanges: u64,
    /// How promotions copy.
    mode: CopyMode,
    /// The application thread a synchronous copy is charged to when no fault names one.
    app_core: usize,
    /// Transactional copies under way, in start order, and their bytes (room they will take
    /// on the fast tier).
    tx: std::collections::VecDeque<TxCopy>,
    tx_bytes: u64,
    /// Retries of an aborted transactional copy.
    tx_retries: u32,
    /// Transactional copies committed.
    pub tx_commits: u64,
    /// Transactional copies aborted by a write during the copy.
    pub tx_aborts: u64,
    /// Transactional copies given up (retries spent, or no room at the commit).
    pub tx_dropped: u64,
    /// Split 2 MiB pages on promotion and promote the named 4 KiB subpages.
    split_huge: bool,
    /// Huge pages split on promotion.
    pub splits: u64,
}

/// Most pages the decision log of a run keeps (128 MiB of addresses).
pub const LOG_PAGES: u64 = 16 << 20;

/// Pages per migration batch (Linux's `NR_MAX_BATCHED_MIGRATION`).
pub const BATCH: usize = 512; // not a page size: a batch length

impl Mover {
    /// A mover with a promotion limit of `rate_limit_mbps` MB/s and a bucket of `burst` worth
    /// of it (at least one 2 MiB page).
    pub fn new(rate_limit_mbps: f64, burst: Ps) -> Self {
        let rate = rate_limit_mbps * 1e6 / 1e9;
        let burst = (rate * burst.ns_f64()).max(HUGE_SIZE as f64);
        Mover {
            rate,
            burst,
            tokens: burst,
            last: Ps::ZERO,
            promoted_pages: 0,
            demoted_pages: 0,
            promoted_bytes: 0,
            demoted_bytes: 0,
            migrate: Ps::ZERO,
            shootdown: Ps::ZERO,
            rate_limited: 0,
            log: Vec::new(),
            logged: 0,
            unlogged: 0,
            win_promoted: 0,
            win_demoted: 0,
            batch: BATCH,
            exchange: false,
            queued: Vec::new(),
            queued_bytes: 0,
            exchanges: 0,
            mode: CopyMode::Async,
            app_core: 0,
            tx: std::collections::VecDeque::new(),
            tx_bytes: 0,
            tx_retries: 0,
            tx_commits: 0,
            tx_aborts: 0,
            tx_dropped: 0,
            split_huge: false,
            splits: 0,
        }
    }

    /// The same copying promotions in `mode` (synchronous copies charged to `app_core` when no
    /// fault names a thread; aborted transactional copies retried `tx_retries` times).
    pub fn with_copy(mut self, mode: CopyMode, app_core: usize, tx_retries: u32) -> Self {
        self.mode = mode;
        self.app_core = app_core;
        self.tx_retries = tx_retries;
        self
    }

    /// The same splitting 2 MiB pages on promotion (`split_huge`).
    pub fn with_split(mut self, split: bool) -> Self {
        self.split_huge = split;
        self
    }

    /// How promotions copy.
    pub fn copy_mode(&self) -> CopyMode {
        self.mode
    }

    /// When the first transactional copy under way ends ([`super::NEVER`]: none).
    pub fn next_tx_end(&self) -> Ps {
        self.tx.front().map_or(super::NEVER, |c| c.end)
    }

    /// Bytes of the transactional copies under way (fast-tier room they will take).
    pub fn tx_bytes(&self) -> u64 {
        self.tx_bytes
    }

    /// The same with `batch` pages per migration batch, or one page per batch (one
    /// shootdown per page) with [`ShootdownMode::PerPage`].
    pub fn with_batches(mut self, batch: usize, shootdown: ShootdownMode) -> Self {
        self.batch = if shootdown == ShootdownMode::PerPage { 1 } else { batch.max(1) };
        self
    }

    /// The same exchanging pages instead of demoting and promoting them apart (`exchange`).
    pub fn with_exchange(mut self, exchange: bool) -> Self {
        self.exchange = exchange;
        self
    }

    /// Bytes of the demotions waiting to be paired with promotions (exchange mode): room
    /// the policy may count on.
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// Refill the bucket up to `now`.
    pub fn refill(&mut self, now: Ps) {
        if now > self.last {
            self.tokens = (self.tokens + self.rate * (now - self.last).ns_f64()).min(self.burst);
            self.last = now;
        }
    }

    /// Bytes that may be promoted now.
    pub fn budget(&self) -> u64 {
        self.tokens.max(0.0) as u64
    }

    /// Promote the pages of `vas` (page addresses) to `t.fast`, charged to `core`, as far as
    /// the budget and the fast node's room allow; returns the pages moved and whether the
    /// batch stopped for lack of room.
    pub fn promote(
        &mut self,
        m: &mut MachineView,
        vas: &[u64],
        t: Tiers,
        core: usize,
    ) -> Result<(u64, bool)> {
        let app = self.app_core;
        self.promote_by(m, vas, t, core, app)
    }

    /// [`Mover::promote`] asked for by application thread `trigger` (a faulting thread): the
    /// copy mode picks who copies (`sync`: `trigger`; `async`: `core`, the policy's
    /// migration thread; `transactional`: transactional copies on `core`). Returns the pages
    /// moved (transactional: copies started) and whether the fast tier ran out of room.
    pub fn promote_by(
        &mut self,
        m: &mut MachineView,
        vas: &[u64],
        t: Tiers,
        core: usize,
        trigger: usize,
    ) -> Result<(u64, bool)> {
        let core = if self.mode == CopyMode::Sync { trigger } else { core };
        let split;
        let vas = if self.split_huge {
            split = self.split_for_promotion(m, vas, t, core)?;
            &split[..]
        } else {
            vas
        };
        if self.mode == CopyMode::Transactional {
            return self.start_transactions(m, vas, t, core);
        }
        if !self.queued.is_empty() {
            let (paired, rest) = self.exchange_with_queued(m, vas, t, core)?;
            if paired > 0 || rest < vas.len() {
                let r = self.promote_unlogged(m, &vas[rest..], t, core)?;
                let moved = paired + r.0;
                self.record(true, t.fast, vas, moved);
                return Ok((moved, r.1));
            }
        }
        let r = self.promote_unlogged(m, vas, t, core)?;
        self.record(true, t.fast, vas, r.0);
        Ok(r)
    }

    /// Pair the leading promotions of `vas` with queued demotions and exchange them, batch by
    /// batch, within the rate limit. Returns the promotions exchanged and the index of the
    /// first promotion left to migrate (pairs stop at the first that cannot be made).
    fn exchange_with_queued(
        &mut self,
        m: &mut MachineView,
        vas: &[u64],
        t: Tiers,
        core: usize,
    ) -> Result<(u64, usize)> {
        let mut pairs = Vec::new();
        let mut i = 0;
        let mut budget = self.tokens;
        while i < vas.len() && !self.queued.is_empty() {
            let up = vas[i];
            let down = self.queued[0];
            let (su, sd) = (m.page_size_of(up), m.page_size_of(down));
            if m.node_of(up) != Some(t.slow) || su.is_none() {
                break;
            }
            if m.node_of(down) != Some(t.fast) || sd != su {
                // The victim moved or differs in size: it waits for the flush.
                let v = self.queued.remove(0);
                self.queued_bytes = self.queued_bytes.saturating_sub(page_bytes(m, v));
                self.flush_one(m, v, t, core)?;
                continue;
            }
            let b = page_bytes(m, up);
            if b as f64 > budget {
                self.rate_limited += 1;
                break;
            }
            budget -= b as f64;
            self.queued.remove(0);
            self.queued_bytes = self.queued_bytes.saturating_sub(b);
            pairs.push((up, down));
            i += 1;
        }
        let mut done = 0;
        for chunk in pairs.chunks(self.batch) {
            let before = m.core_clock(core);
            let r = m.exchange_pages(chunk, core)?;
            // Both pages of each pair are unmapped and locked until the batch is done.
            let until = m.core_clock(core);
            let locks: Vec<(u64, Ps, Ps)> =
                chunk.iter().flat_map(|&(a, b)| [(a, before, until), (b, before, until)]).collect();
            m.lock_pages(&locks);
            let n = r.pages / 2;
            let bytes = r.bytes / 2;
            self.tokens -= bytes as f64;
            self.migrate += Ps::from_ns_f64(r.ns);
            self.shootdown += Ps::from_ns_f64(r.shootdown_ns);
            self.promoted_pages += n;
            self.promoted_bytes += bytes;
            self.win_promoted += bytes;
            self.demoted_pages += n;
            self.demoted_bytes += bytes;
            self.win_demoted += bytes;
            self.exchanges += n;
            let downs: Vec<u64> = chunk.iter().map(|p| p.1).collect();
            self.record(false, t.slow, &downs, n);
            done += n;
        }
        Ok((done, i))
    }

    fn flush_one(&mut self, m: &mut MachineView, va: u64, t: Tiers, core: usize) -> Result<()> {
        if m.node_of(va) == Some(t.fast) {
            let (k, _) = self.move_batch(m, &[va], t.slow, core, false)?;
            self.record(false, t.slow, &[va], k);
        }
        Ok(())
    }

    /// Demote the demotions still waiting for a promotion (exchange mode), at the end of the
    /// policy step that asked for them.
    pub fn flush_queued(&mut self, m: &mut MachineView, t: Tiers, core: usize) -> Result<u64> {
        let q = std::mem::take(&mut self.queued);
        self.queued_bytes = 0;
        let keep: Vec<u64> = q.into_iter().filter(|&v| m.node_of(v) == Some(t.fast)).collect();
        if keep.is_empty() {
            return Ok(0);
        }
        let exchange = std::mem::replace(&mut self.exchange, false);
        let r = self.demote(m, &keep, t, core);
        self.exchange = exchange;
        r
    }

    /// Log one call (see [`Mover::log`]).
    fn record(&mut self, promote: bool, node: u8, vas: &[u64], moved: u64) {
        if vas.is_empty() {
            return;
        }
        if self.logged + vas.len() as u64 > LOG_PAGES {
            self.unlogged += vas.len() as u64;
            return;
        }
        self.logged += vas.len() as u64;
        self.log.push(MoveRecord { time: self.last, promote, node, pages: vas.to_vec(), moved });
    }

    fn promote_unlogged(
        &mut self,
        m: &mut MachineView,
        vas: &[u64],
        t: Tiers,
        core: usize,
    ) -> Result<(u64, bool)> {
        let mut moved = 0;
        for chunk in vas.chunks(self.batch) {
            let bytes: u64 = chunk.iter().map(|&v| page_bytes(m, v)).sum();
            if bytes as f64 > self.tokens {
                self.rate_limited += 1;
                // Move what the budget still allows, page by page.
                let mut n = 0;
                let mut b = 0;
                for &v in chunk {
                    let pb = page_bytes(m, v);
                    if (b + pb) as f64 > self.tokens {
                        break;
                    }
                    b += pb;
                    n += 1;
                }
                if n > 0 {
                    let (k, full) = self.move_batch(m, &chunk[..n], t.fast, core, true)?;
                    moved += k;
                    if full {
                        return Ok((moved, true));
                    }
                }
                return Ok((moved, false));
            }
            let (k, full) = self.move_batch(m, chunk, t.fast, core, true)?;
            moved += k;
            if full {
                return Ok((moved, true));
            }
        }
        Ok((moved, false))
    }

    /// Demote the pages of `vas` to `t.slow`, charged to `core` (not rate limited: demotion
    /// makes room for promotions, which are). Returns the pages moved.
    pub fn demote(&mut self, m: &mut MachineView, vas: &[u64], t: Tiers, core: usize) -> Result<u64> {
        if self.exchange {
            // Wait for the step's promotions: each pairs with one of these in an exchange.
            let mut n = 0;
            for &v in vas {
                if m.node_of(v) == Some(t.fast) && !self.queued.contains(&v) {
                    self.queued.push(v);
                    self.queued_bytes += page_bytes(m, v);
                    n += 1;
                }
            }
            return Ok(n);
        }
        let mut moved = 0;
        for chunk in vas.chunks(self.batch) {
            let (k, full) = self.move_batch(m, chunk, t.slow, core, false)?;
            moved += k;
            if full {
                break;
            }
        }
        self.record(false, t.slow, vas, moved);
        Ok(moved)
    }

    fn move_batch(
        &mut self,
        m: &mut MachineView,
        vas: &[u64],
        to: u8,
        core: usize,
        promote: bool,
    ) -> Result<(u64, bool)> {
        // The pages the batch will move, in order, with their copy times: each is unmapped
        // and locked from the batch's start until its own copy is done (migrate_pages
        // unmaps the batch, flushes once, then copies and remaps page by page).
        let mut seen = std::collections::HashSet::new();
        let mut moving: Vec<(u64, Ps)> = Vec::with_capacity(vas.len());
        for &v in vas {
            let (Some(from), Some(size)) = (m.node_of(v), m.page_size_of(v)) else { continue };
            if from != to && seen.insert(size.base(v)) {
                moving.push((v, copy_time_between(m, from, to, size.bytes())));
            }
        }
        let before = m.core_clock(core);
        let r = m.migrate_pages(vas, to, core)?;
        if promote {
            self.tokens -= r.bytes as f64;
        }
        self.count(&r, promote);
        let mut until = before + Ps::from_ns_f64(r.shootdown_ns);
        let locks: Vec<(u64, Ps, Ps)> = (moving.iter().take(r.pages as usize))
            .map(|&(v, c)| {
                until += c;
                (v, before, until)
            })
            .collect();
        m.lock_pages(&locks);
        Ok((r.pages, r.out_of_room))
    }

    /// Split each 2 MiB page of `vas` on the slow tier into 4 KiB pages (on `core`) and name
    /// the 4 KiB subpage of each address instead (the hot subpages the policy named).
    fn split_for_promotion(
        &mut self,
        m: &mut MachineView,
        vas: &[u64],
        t: Tiers,
        core: usize,
    ) -> Result<Vec<u64>> {
        let mut out = Vec::with_capacity(vas.len());
        for &v in vas {
            if m.page_size_of(v) == Some(PageSize::Huge2M) && m.node_of(v) == Some(t.slow) {
                let before = m.core_clock(core);
                if m.split_huge_page(v, core)? {
                    self.splits += 1;
                    self.migrate += m.core_clock(core) - before;
                }
            }
            out.push(if m.page_size_of(v) == Some(PageSize::Base4K) { v & !(PAGE_SIZE - 1) } else { v });
        }
        Ok(out)
    }

    /// Start transactional copies of the slow-tier pages of `vas` on `core` within the
    /// promotion budget and the fast tier's room (counting the copies under way); returns
    /// the copies started and whether the room ran out.
    fn start_transactions(
        &mut self,
        m: &mut MachineView,
        vas: &[u64],
        t: Tiers,
        core: usize,
    ) -> Result<(u64, bool)> {
        let mut started = 0;
        for &v in vas {
            let Some(size) = m.page_size_of(v) else { continue };
            let base = size.base(v);
            if m.node_of(base) != Some(t.slow) || self.tx.iter().any(|c| c.va == base) {
                continue;
            }
            let bytes = size.bytes();
            if bytes as f64 > self.tokens {
                self.rate_limited += 1;
                break;
            }
            if free_bytes(m, t.fast) < self.tx_bytes + bytes {
                return Ok((started, true));
            }
            self.start_tx(m, base, bytes, t, core, 0);
            started += 1;
        }
        Ok((started, false))
    }

    /// One transactional copy: clear the page's Dirty bit, flush its translations (a store
    /// must set the bit again), copy it on `core` (from the promotion budget).
    fn start_tx(&mut self, m: &mut MachineView, base: u64, bytes: u64, t: Tiers, core: usize, tries: u32) {
        let level = Level::leaf_of(m.page_size_of(base).unwrap_or(PageSize::Base4K));
        if let Some(pt) = m.page_tables_mut() {
            pt.test_and_clear_dirty(base, level);
        }
        let before = m.core_clock(core);
        m.invalidate_range(core, base, base + bytes);
        let copy = copy_time_between(m, t.slow, t.fast, bytes);
        m.charge(core, copy);
        let end = m.core_clock(core);
        self.migrate += end - before;
        self.tokens -= bytes as f64;
        self.tx_bytes += bytes;
        self.tx.push_back(TxCopy { va: base, bytes, end, tries });
    }

    /// Commit or abort the transactional copies that ended by `now`: a clean page is
    /// remapped to the fast tier (no second copy), a page written during its copy is copied
    /// again (up to `tx_retries` times, within the budget) or given up.
    pub fn finish_transactions(&mut self, m: &mut MachineView, t: Tiers, core: usize, now: Ps) -> Result<()> {
        let (mut commit, mut retry) = (Vec::new(), Vec::new());
        while let Some(c) = self.tx.front().copied() {
            if c.end > now {
                break;
            }
            self.tx.pop_front();
            self.tx_bytes -= c.bytes;
            if m.node_of(c.va) != Some(t.slow) {
                continue;
            }
            let level = Level::leaf_of(m.page_size_of(c.va).unwrap_or(PageSize::Base4K));
            if m.page_tables().is_some_and(|pt| pt.test_dirty(c.va, level)) {
                self.tx_aborts += 1;
                if c.tries < self.tx_retries {
                    retry.push(c);
                } else {
                    self.tx_dropped += 1;
                }
                continue;
            }
            commit.push(c.va);
        }
        if !commit.is_empty() {
            let n = self.remap(m, &commit, t, core, true)?;
            self.tx_commits += n;
            self.tx_dropped += commit.len() as u64 - n;
        }
        for c in retry {
            if c.bytes as f64 > self.tokens || free_bytes(m, t.fast) < self.tx_bytes + c.bytes {
                self.tx_dropped += 1;
                continue;
            }
            self.start_tx(m, c.va, c.bytes, t, core, c.tries + 1);
        }
        Ok(())
    }

    fn count(&mut self, r: &crate::os::Migrated, promote: bool) {
        self.migrate += Ps::from_ns_f64(r.ns);
        self.shootdown += Ps::from_ns_f64(r.shootdown_ns);
        if promote {
            self.promoted_pages += r.pages;
            self.promoted_bytes += r.bytes;
            self.win_promoted += r.bytes;
        } else {
            self.demoted_pages += r.pages;
            self.demoted_bytes += r.bytes;
            self.win_demoted += r.bytes;
        }
    }

    /// A copy made outside [`Mover::promote`] (a transactional migration's copy, before its
    /// commit or abort): `t` of migration time, and `bytes` from the promotion budget when
    /// `promote`.
    pub fn copied(&mut self, bytes: u64, t: Ps, promote: bool) {
        self.migrate += t;
        if promote {
            self.tokens -= bytes as f64;
        }
    }

    /// Move the pages of `vas` to the fast (`promote`) or slow tier without a copy (the
    /// target holds an identical copy: [`MachineView::remap_pages`]), logged and counted as
    /// promotions or demotions; not rate limited (the copy, if any, was). Returns the pages
    /// moved.
    pub fn remap(
        &mut self,
        m: &mut MachineView,
        vas: &[u64],
        t: Tiers,
        core: usize,
        promote: bool,
    ) -> Result<u64> {
        let to = if promote { t.fast } else { t.slow };
        let mut moved = 0;
        for chunk in vas.chunks(self.batch) {
            let r = m.remap_pages(chunk, to, core)?;
            self.count(&r, promote);
            moved += r.pages;
            if r.out_of_room {
                break;
            }
        }
        self.record(promote, to, vas, moved);
        Ok(moved)
    }

    /// Bytes promoted and demoted since the last call (per-window columns).
    pub fn take_window(&mut self) -> (u64, u64) {
        (std::mem::take(&mut self.win_promoted), std::mem::take(&mut self.win_demoted))
    }
}

/// Bytes of the page mapping `va` (a base page when it is not present).
pub fn page_bytes(m: &MachineView, va: u64) -> u64 {
    m.page_size_of(va).map_or(PAGE_SIZE, PageSize::bytes)
}

/// Free bytes of node `n`.
pub fn free_bytes(m: &MachineView, n: u8) -> u64 {
    let node = &m.nodes()[n as usize];
    tierlab_core::bytes_of(node.capacity_pages.saturating_sub(node.used_pages))
}

/// Capacity of node `n`, bytes.
pub fn capacity_bytes(m: &MachineView, n: u8) -> u64 {
    tierlab_core::bytes_of(m.nodes()[n as usize].capacity_pages)
}

/// Time to copy `bytes` from node `a` to node `b` (at the slower node's bandwidth, as
/// [`MachineView::migrate_pages`] charges it).
pub fn copy_time_between(m: &MachineView, a: u8, b: u8, bytes: u64) -> Ps {
    let n = m.nodes();
    // GB/s = bytes per ns.
    Ps::from_ns_f64(bytes as f64 / n[a as usize].cfg.bandwidth_gbps.min(n[b as usize].cfg.bandwidth_gbps))
}

/// What a tiering policy's hooks get besides the agent context ([`AgentCtx`]'s `kind`): its
/// tiers and its migrations (rate limit, accounting).
pub struct Tiering<'c> {
    /// The tiers.
    pub tiers: Tiers,
    /// Migrations with the rate limit.
    pub mover: &'c mut Mover,
}

/// What a tiering policy gets when it runs: the agent context with its [`Tiering`].
pub type TieringCtx<'a, 'c> = AgentCtx<'a, Tiering<'c>>;

impl AgentCtx<'_, Tiering<'_>> {
    /// The tiers.
    pub fn tiers(&self) -> Tiers {
        self.kind.tiers
    }

    /// Whether the policy's core still has time in the current period ending at `until` (a
    /// migration thread cannot do more work than time passes).
    pub fn core_free_before(&self, until: Ps) -> bool {
        self.machine.core_clock(self.core) < until
    }

    /// Promote pages (see [`Mover::promote`]) charged to the policy's core.
    pub fn promote(&mut self, vas: &[u64]) -> Result<(u64, bool)> {
        let (core, t) = (self.core, self.kind.tiers);
        self.machine.start_work(core, self.now);
        let before = self.machine.core_clock(core);
        let r = self.kind.mover.promote(&mut self.machine, vas, t, core)?;
        *self.cpu += self.machine.core_clock(core) - before;
        Ok(r)
    }

    /// Promote pages that application thread `fault_core` faulted on (see
    /// [`Mover::promote_by`]): in `sync` mode that thread copies (in its fault), otherwise
    /// the policy's core.
    pub fn promote_faulted(&mut self, vas: &[u64], fault_core: usize) -> Result<(u64, bool)> {
        let (core, t) = (self.core, self.kind.tiers);
        if self.kind.mover.copy_mode() == CopyMode::Sync {
            return self.kind.mover.promote_by(&mut self.machine, vas, t, core, fault_core);
        }
        self.machine.start_work(core, self.now);
        let before = self.machine.core_clock(core);
        let r = self.kind.mover.promote_by(&mut self.machine, vas, t, core, fault_core)?;
        *self.cpu += self.machine.core_clock(core) - before;
        Ok(r)
    }

    /// Commit or abort the engine's transactional copies that ended by now (see
    /// [`Mover::finish_transactions`]), on the policy's core.
    pub fn finish_transactions(&mut self) -> Result<()> {
        if self.kind.mover.next_tx_end() > self.now {
            return Ok(());
        }
        let (core, t, now) = (self.core, self.kind.tiers, self.now);
        self.machine.start_work(core, now);
        let before = self.machine.core_clock(core);
        self.kind.mover.finish_transactions(&mut self.machine, t, core, now)?;
        *self.cpu += self.machine.core_clock(core) - before;
        Ok(())
    }

    /// Demote pages (see [`Mover::demote`]) charged to the policy's core.
    pub fn demote(&mut self, vas: &[u64]) -> Result<u64> {
        let (core, t) = (self.core, self.kind.tiers);
        self.machine.start_work(core, self.now);
        let before = self.machine.core_clock(core);
        let r = self.kind.mover.demote(&mut self.machine, vas, t, core)?;
        *self.cpu += self.machine.core_clock(core) - before;
        Ok(r)
    }

    /// Remap pages to the fast (`promote`) or slow tier without a copy (see
    /// [`Mover::remap`]), charged to the policy's core.
    pub fn remap(&mut self, vas: &[u64], promote: bool) -> Result<u64> {
        let (core, t) = (self.core, self.kind.tiers);
        self.machine.start_work(core, self.now);
        let before = self.machine.core_clock(core);
        let r = self.kind.mover.remap(&mut self.machine, vas, t, core, promote)?;
        *self.cpu += self.machine.core_clock(core) - before;
        Ok(r)
    }

    /// Time to copy `bytes` between the tiers (at the slower node's bandwidth, as
    /// [`MachineView::migrate_pages`] charges it).
    pub fn copy_time(&self, bytes: u64) -> Ps {
        let n = self.machine.nodes();
        let (f, s) = (&n[self.kind.tiers.fast as usize].cfg, &n[self.kind.tiers.slow as usize].cfg);
        // GB/s = bytes per ns.
        Ps::from_ns_f64(bytes as f64 / f.bandwidth_gbps.min(s.bandwidth_gbps))
    }

    /// Copy `bytes` between the tiers on the policy's core without moving anything (a
    /// transactional migration's copy): the core is charged [`Self::copy_time`], the mover
    /// counts it (and takes it from the promotion budget when `promote`). Returns when the
    /// copy ends on the core.
    pub fn copy(&mut self, bytes: u64, promote: bool) -> Ps {
        let t = self.copy_time(bytes);
        self.machine.start_work(self.core, self.now);
        self.machine.charge(self.core, t);
        *self.cpu += t;
        self.kind.mover.copied(bytes, t, promote);
        self.machine.core_clock(self.core)
    }

    /// Free bytes of the fast node (with exchanges, counting the demotions that wait to
    /// be paired with promotions).
    pub fn fast_free(&self) -> u64 {
        (free_bytes(&self.machine, self.kind.tiers.fast) + self.kind.mover.queued_bytes())
            .saturating_sub(self.kind.mover.tx_bytes())
    }

    /// Demote what still waits for a promotion to pair with (exchange mode), charged to the
    /// policy's core.
    pub fn flush_exchanges(&mut self) -> Result<u64> {
        if self.kind.mover.queued_bytes() == 0 {
            return Ok(0);
        }
        let (core, t) = (self.core, self.kind.tiers);
        self.machine.start_work(core, self.now);
        let before = self.machine.core_clock(core);
        let r = self.kind.mover.flush_queued(&mut self.machine, t, core)?;
        *self.cpu += self.machine.core_clock(core) - before;
        Ok(r)
    }

    /// Capacity of the fast node, bytes.
    pub fn fast_capacity(&self) -> u64 {
        capacity_bytes(&self.machine, self.kind.tiers.fast)
    }
}

/// A tiering policy. See the module docs for the contract.
pub trait TieringPolicy: Send {
    /// Called once at time 0.
    fn start(&mut self, _ctx: &mut TieringCtx) -> Result<()> {
        Ok(())
    }
    /// Simulated time of the next policy event ([`super::NEVER`] for none).
    fn next_event(&self) -> Ps;
    /// Run the event due at `ctx.now`.
    fn on_event(&mut self, ctx: &mut TieringCtx) -> Result<()>;
    /// The followed observer produced `feed`.
    fn on_feed(&mut self, _feed: &Feed, _ctx: &mut TieringCtx) -> Result<()> {
        Ok(())
    }
    /// Extra per-window time-series values, as (column suffix, value).
    fn window_columns(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
    /// Publish policy-specific stats under `prefix` (no trailing dot).
    fn report_stats(&self, _prefix: &str, _out: &mut Stats) {}
    /// The period of its loop when only the built policy knows it (a policy written outside
    /// the engine); None: the parameters' ([`TieringParams::period`]).
    fn period(&self) -> Option<Ps> {
        None
    }
    /// The feed kinds it accepts when only the built policy knows them; None: the
    /// parameters' ([`TieringParams::accepts`]).
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        None
    }
}

/// Build-time context of a policy.
#[derive(Clone, Debug, Default)]
pub struct TieringBuildCtx {
    /// Scenario seed.
    pub seed: u64,
    /// Scenario file, for messages.
    pub scenario_file: String,
    /// Cores of the machine.
    pub cores: usize,
    /// Application threads (cores `0..threads`).
    pub threads: usize,
    /// Memory nodes of the machine.
    pub nodes: usize,
}

impl TieringBuildCtx {
    /// A config error about `tiering.<field>`.
    pub fn err(&self, field: &str, msg: impl Into<String>) -> SimError {
        SimError::config(&self.scenario_file, format!("tiering.{field}"), msg)
    }
}

/// The parameters every policy has, checked once.
#[derive(Clone, Debug, PartialEq)]
pub struct Common {
    /// Label.
    pub name: String,
    /// Label of the followed observer.
    pub telemetry: Option<String>,
    /// Policy core (None = default).
    pub core: Option<usize>,
    /// The tiers.
    pub tiers: Tiers,
    /// Promotion rate limit, MB/s.
    pub rate_limit_mbps: f64,
    /// Period of the policy loop (the rate limit's bucket holds one period's worth).
    pub period: Ps,
    /// Pages per migration batch.
    pub batch_pages: usize,
    /// Shootdowns per batch or per page.
    pub shootdown: ShootdownMode,
    /// Exchange pairs of pages instead of demoting and promoting them apart.
    pub exchange: bool,
    /// How promotions copy.
    pub copy_mode: CopyMode,
    /// Retries of an aborted transactional copy.
    pub tx_retries: u32,
    /// Split 2 MiB pages on promotion.
    pub split_huge: bool,
}

impl Common {
    /// The shared parameters with the policy loop's `period` (`name` empty: the kind's).
    pub fn of(s: &TieringShared, period: Ps) -> Common {
        Common {
            name: s.name.clone().unwrap_or_default(),
            telemetry: s.telemetry.clone(),
            core: s.core,
            tiers: Tiers { fast: s.fast_node, slow: s.slow_node },
            rate_limit_mbps: s.rate_limit_mbps,
            period,
            batch_pages: s.batch_pages as usize,
            shootdown: s.shootdown,
            exchange: s.exchange,
            copy_mode: s.copy_mode,
            tx_retries: s.tx_retries,
            split_huge: s.split_huge,
        }
    }

    /// Validate against the machine.
    pub fn check(&self, ctx: &TieringBuildCtx) -> Result<()> {
        if let Some(c) = self.core {
            if c >= ctx.cores {
                return Err(
                    ctx.err("core", format!("core {c} does not exist (machine.cores = {})", ctx.cores))
                );
            }
        }
        for (f, n) in [("fast_node", self.tiers.fast), ("slow_node", self.tiers.slow)] {
            if n as usize >= ctx.nodes {
                return Err(
                    ctx.err(f, format!("node {n} does not exist (the machine has {} nodes)", ctx.nodes))
                );
            }
        }
        if self.tiers.fast == self.tiers.slow {
            return Err(ctx.err("slow_node", "the slow node must differ from the fast node"));
        }
        if !(self.rate_limit_mbps.is_finite() && self.rate_limit_mbps > 0.0) {
            return Err(ctx.err("rate_limit_mbps", format!("{} must be > 0", self.rate_limit_mbps)));
        }
        if self.exchange && self.copy_mode == CopyMode::Transactional {
            return Err(ctx.err(
                "copy_mode",
                "`transactional` cannot be combined with exchange = true (an exchange swaps both pages in one \
                 unmapped copy; use `sync` or `async`)",
            ));
        }
        Ok(())
    }

    /// The policy core: the parameter, else the first core without an application thread,
    /// else core 0.
    pub fn core_or_default(&self, cores: usize, threads: usize) -> usize {
        self.core.unwrap_or(if threads < cores { threads } else { 0 })
    }
}

/// Parameters of one tiering policy kind.
pub trait TieringParams {
    /// Build the policy (validating its own parameters; `shared` are checked by the agent).
    fn build(&self, shared: &TieringShared, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>>;
    /// Period of the policy loop (the rate limit's bucket holds one period's worth).
    fn period(&self) -> Ps;
    /// The feed kinds the policy accepts from the technique it follows, preferred first
    /// (`None`: it follows no technique; it has a mechanism of its own).
    fn accepts(&self) -> Option<&'static [FeedKind]>;
}

/// The parameters every tiering policy has, flattened into each policy's `[tiering]` table
/// (each policy gives its own default rate limit).
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct TieringShared {
    /// Label (default: the policy's kind).
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Label of the telemetry technique it follows (policies with a mechanism of their own
    /// take none).
    #[param(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<String>,
    /// Core of the policy thread (default: the first core without an application thread).
    #[param(default, range = "[0, 4095]", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core: Option<usize>,
    /// Fast node.
    #[param(default = 0, range = "[0, 255]", setting)]
    pub fast_node: u8,
    /// Slow node.
    #[param(default = 1, range = "[0, 255]", setting)]
    pub slow_node: u8,
    /// Promotion rate limit (default: the policy's).
    #[param(required, range = "(0, 1e9]", unit = "MB/s", assumed = "each policy's own default")]
    pub rate_limit_mbps: f64,
    /// Pages per migration batch (one TLB shootdown per batch).
    #[param(
        default = 512,
        range = "[1, 1048576]",
        unit = "pages",
        sourced = "Linux mm/migrate.c: NR_MAX_BATCHED_MIGRATION = 512"
    )]
    pub batch_pages: u32,
    /// `batched`: one shootdown per migration batch; `per-page`: one per page moved (the
    /// ablation of batched flushing).
    #[param(default)]
    pub shootdown: ShootdownMode,
    /// Exchange a promoted page with a page the same policy step demotes, in one operation
    /// (Nimble's `exchange_pages`, the Linux folio-exchange RFC): no free fast page needed,
    /// one shootdown per batch of pairs instead of one for the demotions and one for the
    /// promotions. Demotions with no promotion to pair with are demoted at the step's end.
    #[param(default)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub exchange: bool,
    /// How a promotion copies its page: `sync` (the thread that asked copies: the faulting
    /// application thread, else application thread 0; the page is locked meanwhile),
    /// `async` (the policy's migration thread copies with the page unmapped and locked:
    /// accesses to it wait for the copy's end) or `transactional` (NOMAD's: copied while
    /// mapped, aborted by a write during the copy and copied again). Demotions are always
    /// the policy thread's `migrate_pages` (as `async`). Default: the policy's published
    /// mechanism.
    #[param(required, assumed = "each policy's own default")]
    pub copy_mode: CopyMode,
    /// Times an aborted transactional copy is copied again before it is given up (until the
    /// policy asks again).
    #[param(
        default = 3,
        range = "[0, 1000]",
        unit = "retries",
        assumed = "NOMAD retries an aborted migration later; the bound is this model's"
    )]
    pub tx_retries: u32,
    /// Split a 2 MiB page found hot on the slow tier into 4 KiB pages and promote only the
    /// 4 KiB pages the policy named (Memtis' split of huge pages with skewed subpages; Linux
    /// splits a THP when the target node has no free huge page) instead of migrating it whole.
    #[param(default)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub split_huge: bool,
}

impl TieringShared {
    /// The defaults with a rate limit of `mbps` MB/s.
    pub fn with_rate(mbps: f64) -> Self {
        TieringShared {
            name: None,
            telemetry: None,
            core: None,
            fast_node: TieringShared::__param_default_fast_node(),
            slow_node: TieringShared::__param_default_slow_node(),
            rate_limit_mbps: mbps,
            batch_pages: TieringShared::__param_default_batch_pages(),
            shootdown: ShootdownMode::default(),
            exchange: false,
            copy_mode: CopyMode::Async,
            tx_retries: TieringShared::__param_default_tx_retries(),
            split_huge: false,
        }
    }

    /// The same copying promotions in `mode` by default.
    pub fn copying(mut self, mode: CopyMode) -> Self {
        self.copy_mode = mode;
        self
    }
}

/// A tiering policy's whole configuration: the shared parameters and its own.
pub trait TieringKind {
    /// Build the policy.
    fn build(&self, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>>;
    /// The shared parameters, resolved (`name` empty: the kind's name).
    fn common(&self) -> Common;
    /// The feed kinds it accepts.
    fn accepts(&self) -> Option<&'static [FeedKind]>;
}

impl<P: TieringParams + Params + SharedDefaults<TieringShared>> TieringKind for With<TieringShared, P> {
    fn build(&self, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        self.own.build(&self.shared, ctx)
    }
    fn common(&self) -> Common {
        Common::of(&self.shared, self.own.period())
    }
    fn accepts(&self) -> Option<&'static [FeedKind]> {
        self.own.accepts()
    }
}

crate::registry! {
    /// A tiering policy's configuration (`[tiering]`): `kind` picks the implementation.
    pub enum TieringConfig: TieringKind, shared TieringShared {
        "hottest-first" => HottestFirst(hottest_first::HottestFirstParams),
        "hemem" => Hemem(hemem::HememParams),
        "memtis" => Memtis(memtis::MemtisParams),
        "numa-tiering" => NumaTiering(numa_tiering::NumaTieringParams),
        "damon-mtier" => DamonMtier(damon_mtier::DamonMtierParams),
        "colloid" => Colloid(colloid::ColloidParams),
        "hybridtier" => HybridTier(hybridtier::HybridTierParams),
        "nomad" => Nomad(nomad::NomadParams),
        "arms" => Arms(arms::ArmsParams),
        "pghot" => Pghot(pghot::PghotParams),
        "kmmscand" => Kmmscand(kmmscand::KmmscandParams),
        "klruscand" => Klruscand(klruscand::KlruscandParams),
        "m5" => M5(m5::M5TieringParams),
        "pact" => Pact(pact::PactParams),
        "python" => Python(crate::params::External<TieringShared>) alone,
        #[cfg(test)] "toy" => Toy(toy::ToyParams),
    }
}

impl TieringConfig {
    /// Build the policy.
    pub fn build(&self, ctx: &TieringBuildCtx) -> Result<Box<dyn TieringPolicy>> {
        self.params().build(ctx)
    }
    /// The shared parameters.
    pub fn common(&self) -> Common {
        let mut c = self.params().common();
        if c.name.is_empty() {
            c.name = self.kind().to_string();
        }
        c
    }
    /// Feed kinds the policy accepts (`None`: it follows no technique).
    pub fn accepts(&self) -> Option<&'static [FeedKind]> {
        self.params().accepts()
    }
}

/// A tiering policy as an agent: the policy, the technique it follows, its mover and
/// accounting.
pub struct TieringAgent {
    label: String,
    kind: &'static str,
    policy: Box<dyn TieringPolicy>,
    follows: Option<String>,
    accepts: Option<&'static [FeedKind]>,
    mover: Mover,
    tiers: Tiers,
    core: usize,
}

impl TieringAgent {
    /// Build from the scenario's `[tiering]` table.
    pub fn new(cfg: &TieringConfig, ctx: &TieringBuildCtx) -> Result<Self> {
        let c = cfg.common();
        c.check(ctx)?;
        let accepts = cfg.accepts();
        match (&c.telemetry, accepts) {
            (None, Some(_)) => {
                return Err(ctx.err(
                    "telemetry",
                    format!("`{}` needs the label of the telemetry technique it follows", cfg.kind()),
                ))
            }
            (Some(l), None) => {
                return Err(ctx.err(
                    "telemetry",
                    format!("`{}` takes no telemetry (it has its own mechanism), got `{l}`", cfg.kind()),
                ))
            }
            _ => {}
        }
        let policy = cfg.build(ctx)?;
        let accepts = policy.accepts().map(Some).unwrap_or(accepts);
        let period = policy.period().unwrap_or(c.period);
        let core = c.core_or_default(ctx.cores, ctx.threads);
        Ok(TieringAgent {
            label: c.name.clone(),
            kind: cfg.kind(),
            policy,
            follows: c.telemetry.clone(),
            accepts,
            mover: Mover::new(c.rate_limit_mbps, period)
                .with_batches(c.batch_pages, c.shootdown)
                .with_exchange(c.exchange)
                .with_copy(c.copy_mode, 0, c.tx_retries)
                .with_split(c.split_huge),
            tiers: c.tiers,
            core,
        })
    }

    fn run<R>(
        &mut self,
        ctx: &mut AgentCtx,
        f: impl FnOnce(&mut dyn TieringPolicy, &mut TieringCtx) -> Result<R>,
    ) -> Result<R> {
        self.mover.refill(ctx.now);
        let mut tctx = ctx.with_kind(Tiering { tiers: self.tiers, mover: &mut self.mover });
        let r = f(self.policy.as_mut(), &mut tctx)?;
        tctx.flush_exchanges()?;
        Ok(r)
    }
}

impl Agent for TieringAgent {
    fn label(&self) -> &str {
        &self.label
    }
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn role(&self) -> Role {
        Role::Tiering
    }
    fn core(&self) -> usize {
        self.core
    }
    fn subscription(&self) -> Option<Subscription> {
        Some(Subscription {
            source: self.follows.clone()?,
            accepts: self.accepts.unwrap_or(&[]).to_vec(),
            field: "tiering.telemetry".into(),
        })
    }
    fn start(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        self.run(ctx, |p, t| p.start(t))
    }
    fn next_event(&self) -> Ps {
        self.policy.next_event().min(self.mover.next_tx_end())
    }
    fn on_event(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        self.run(ctx, |p, t| {
            t.finish_transactions()?;
            if t.now >= p.next_event() {
                p.on_event(t)
            } else {
                Ok(())
            }
        })
    }
    fn on_feed(&mut self, feed: &Feed, ctx: &mut AgentCtx) -> Result<()> {
        self.run(ctx, |p, t| p.on_feed(feed, t))
    }
    fn fast_node(&self) -> Option<u8> {
        Some(self.tiers.fast)
    }
    /// Fast-tier use (resident bytes), bytes promoted and demoted, the policy's CPU time and
    /// its own columns (the scorer adds `tiering.fast_hot_bytes`).
    fn window_columns(&mut self, info: &Info) -> Vec<(String, f64)> {
        let (pro, de) = self.mover.take_window();
        let node = &info.view.nodes()[self.tiers.fast as usize];
        let mut cols = vec![
            ("tiering.fast_used_bytes".to_string(), tierlab_core::bytes_of(node.used_pages) as f64),
            ("tiering.promoted_bytes".to_string(), pro as f64),
            ("tiering.demoted_bytes".to_string(), de as f64),
            ("tiering.cpu_s".to_string(), info.cpu.secs_f64()),
        ];
        for (k, v) in self.policy.window_columns() {
            cols.push((format!("tiering.{k}"), v));
        }
        cols
    }
    fn report_stats(&self, info: &Info, out: &mut Stats) {
        let view = info.view;
        out.set("tiering.policy", self.label.as_str());
        out.set("tiering.kind", self.kind);
        out.set("tiering.core", self.core);
        out.set("tiering.fast_node", view.nodes()[self.tiers.fast as usize].cfg.name.as_str());
        out.set("tiering.slow_node", view.nodes()[self.tiers.slow as usize].cfg.name.as_str());
        out.set("tiering.fast_capacity_bytes", capacity_bytes(view, self.tiers.fast));
        out.set("tiering.slow_capacity_bytes", capacity_bytes(view, self.tiers.slow));
        let m = &self.mover;
        out.set("tiering.promoted_pages", m.promoted_pages);
        out.set("tiering.demoted_pages", m.demoted_pages);
        out.set("tiering.promoted_bytes", m.promoted_bytes);
        out.set("tiering.demoted_bytes", m.demoted_bytes);
        out.set("tiering.rate_limited", m.rate_limited);
        out.set("tiering.migration_seconds", m.migrate.secs_f64());
        out.set("tiering.shootdown_seconds", m.shootdown.secs_f64());
        out.set("tiering.migrated_bytes", m.promoted_bytes + m.demoted_bytes);
        out.set("tiering.unlogged_pages", m.unlogged);
        if m.exchange {
            out.set("tiering.exchanges", m.exchanges);
        }
        if m.tx_commits + m.tx_aborts + m.tx_dropped > 0 {
            out.set("tiering.tx_commits", m.tx_commits);
            out.set("tiering.tx_aborts", m.tx_aborts);
            out.set("tiering.tx_dropped", m.tx_dropped);
        }
        if m.split_huge {
            out.set("tiering.huge_splits", m.splits);
        }
        out.set("tiering.cpu_seconds", info.cpu.secs_f64());
        self.policy.report_stats("tiering", out);
    }
    fn decisions(&self) -> &[MoveRecord] {
        &self.mover.log
    }
    fn output(&mut self) -> AgentOutput {
        AgentOutput { decisions: std::mem::take(&mut self.mover.log), ..AgentOutput::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::{AddressSpace, MachineConfig, MapOptions};
    use tierlab_core::Access;

    /// A full fast tier: demoting then promoting apart needs the demotion to free a page
    /// first (two batches, two shootdowns); with exchanges the step's demotions wait, each
    /// pairs with a promotion, and one batch swaps them (one shootdown, the same bytes).
    #[test]
    fn exchange_swaps_pairs_on_a_full_fast_tier_with_one_shootdown() {
        let mut nodes = crate::os::memory::default_nodes();
        nodes[0].capacity = crate::units::ByteSize(2 * PAGE_SIZE);
        let mut m = crate::os::Machine::new(&MachineConfig { cores: 2, nodes, ..MachineConfig::default() });
        m.os.mm_cpumask = vec![true, true];
        let a = m.mmap(4 * PAGE_SIZE, MapOptions::named("x")).unwrap();
        for i in 0..4 {
            m.access(0, Access::read(a + i * PAGE_SIZE)).unwrap();
        }
        let pages: Vec<u64> = (0..4).map(|i| a + i * PAGE_SIZE).collect();
        // First touch filled the fast node with the first two pages.
        assert_eq!((m.node_of(pages[0]), m.node_of(pages[2])), (Some(0), Some(1)));
        let t = Tiers { fast: 0, slow: 1 };
        for exchange in [false, true] {
            let mut m2 = crate::os::Machine::new(&MachineConfig {
                cores: 2,
                nodes: m.cfg().nodes.clone(),
                ..MachineConfig::default()
            });
            m2.os.mm_cpumask = vec![true, true];
            let b = m2.mmap(4 * PAGE_SIZE, MapOptions::named("x")).unwrap();
            for i in 0..4 {
                m2.access(0, Access::read(b + i * PAGE_SIZE)).unwrap();
            }
            let p: Vec<u64> = (0..4).map(|i| b + i * PAGE_SIZE).collect();
            let mut mover = Mover::new(65536.0, Ps::from_ns(1_000_000)).with_exchange(exchange);
            let shootdowns = m2.migration().shootdowns;
            let mut view = MachineView::new(&mut m2);
            assert_eq!(mover.demote(&mut view, &p[..2], t, 1).unwrap(), 2);
            assert_eq!(mover.promote(&mut view, &p[2..], t, 1).unwrap().0, 2);
            mover.flush_queued(&mut view, t, 1).unwrap();
            for (i, want) in [(0, 1), (1, 1), (2, 0), (3, 0)] {
                assert_eq!(m2.node_of(p[i]), Some(want), "exchange {exchange}: page {i}");
            }
            assert_eq!((mover.promoted_pages, mover.demoted_pages), (2, 2));
            assert_eq!(mover.exchanges, if exchange { 2 } else { 0 });
            let sent = m2.migration().shootdowns - shootdowns;
            assert_eq!(sent, if exchange { 1 } else { 2 }, "exchange {exchange}");
            assert_eq!(mover.log.len(), 2, "one demotion and one promotion logged");
        }
    }

    /// Two cores (application thread 0, policy thread 1), `n` pages of `size` first touched
    /// by thread 0 and moved to the slow node; both clocks at the same time.
    fn slow_pages(n: u64, size: PageSize) -> (crate::os::Machine, Vec<u64>) {
        let mut m = crate::os::Machine::new(&MachineConfig { cores: 2, ..MachineConfig::default() });
        m.os.mm_cpumask = vec![true, false];
        let opts = MapOptions { page_size: Some(size), ..MapOptions::named("x") };
        let a = m.mmap(n * size.bytes(), opts).unwrap();
        let pages: Vec<u64> = (0..n).map(|i| a + i * size.bytes()).collect();
        for &p in &pages {
            m.access(0, Access::read(p)).unwrap();
        }
        m.migrate_pages(&pages, 1, 1).unwrap();
        let t = m.hw.cores[0].clock_ps.max(m.hw.cores[1].clock_ps);
        for c in &mut m.hw.cores {
            c.clock_ps = t;
            c.c.background_ps = 0;
        }
        (m, pages)
    }

    /// The three copy modes on one promotion each: `sync` charges the copy to the thread
    /// that asked (application thread 0), `async` to the policy's core and an access during
    /// the copy waits for it (the page is unmapped), `transactional` copies on the policy's
    /// core with the page mapped: a store during the copy aborts it (the page stays slow),
    /// an untouched page commits at the copy's end.
    #[test]
    fn copy_modes_charge_wait_and_abort_differently() {
        let t = Tiers { fast: 0, slow: 1 };
        for mode in [CopyMode::Sync, CopyMode::Async, CopyMode::Transactional] {
            let (mut m, p) = slow_pages(2, PageSize::Base4K);
            let start = Ps::from_ps(m.hw.cores[0].clock_ps);
            let mut mover = Mover::new(65536.0, Ps::from_ns(1_000_000)).with_copy(mode, 0, 0);
            let started = {
                let mut view = MachineView::new(&mut m);
                mover.promote_by(&mut view, &p, t, 1, 0).unwrap().0
            };
            assert_eq!(started, 2, "{mode:?}");
            let (app, policy) = (Ps::from_ps(m.hw.cores[0].clock_ps), Ps::from_ps(m.hw.cores[1].clock_ps));
            // Two 4 KiB copies at the slow node's 32 GB/s.
            let copies = Ps::from_ns(2 * PAGE_SIZE / 32);
            // Copies are background work of the core that makes them (the application's
            // clock also takes the shootdown's interrupt in every mode).
            let work = |m: &crate::os::Machine, c: usize| Ps::from_ps(m.hw.cores[c].c.background_ps);
            match mode {
                CopyMode::Sync => {
                    assert!(work(&m, 0) >= copies && policy == start, "sync: the application copies")
                }
                _ => assert!(
                    work(&m, 1) >= copies && work(&m, 0) == Ps::ZERO,
                    "{mode:?}: the policy's core copies"
                ),
            }
            assert!(app > start);
            // The application stores to the first page while it is (being) copied.
            m.access(0, Access::write(p[0])).unwrap();
            let after = Ps::from_ps(m.hw.cores[0].clock_ps);
            let (waits, _) = m.lock_waits();
            {
                let mut view = MachineView::new(&mut m);
                mover.finish_transactions(&mut view, t, 1, policy.max(after)).unwrap();
            }
            match mode {
                CopyMode::Sync => {
                    assert_eq!(waits, 0, "the copying thread itself does not wait");
                    assert_eq!((m.node_of(p[0]), m.node_of(p[1])), (Some(0), Some(0)));
                }
                CopyMode::Async => {
                    assert_eq!(waits, 1, "the store waited for the copy");
                    assert!(after > start, "until the copy's end");
                    assert_eq!((m.node_of(p[0]), m.node_of(p[1])), (Some(0), Some(0)));
                    assert_eq!(mover.tx_aborts, 0);
                }
                CopyMode::Transactional => {
                    assert_eq!(waits, 0, "the page stayed mapped: no wait");
                    assert_eq!((mover.tx_aborts, mover.tx_commits, mover.tx_dropped), (1, 1, 1));
                    assert_eq!(m.node_of(p[0]), Some(1), "the written page stays slow");
                    assert_eq!(m.node_of(p[1]), Some(0), "the clean page was committed");
                    assert_eq!(mover.promoted_pages, 1);
                }
            }
        }
    }

    /// A 2 MiB page on the slow tier named hot by one of its 4 KiB addresses: migrated whole
    /// by default; with `split_huge` split, and only the named 4 KiB page promoted.
    #[test]
    fn split_huge_promotes_the_named_subpage_only() {
        let t = Tiers { fast: 0, slow: 1 };
        for split in [false, true] {
            let (mut m, p) = slow_pages(1, PageSize::Huge2M);
            let hot = p[0] + 5 * PAGE_SIZE;
            let mut mover = Mover::new(65536.0, Ps::from_ns(1_000_000)).with_split(split);
            {
                let mut view = MachineView::new(&mut m);
                assert_eq!(mover.promote(&mut view, &[hot], t, 1).unwrap().0, 1);
            }
            let fast_pages = m.os.mem.nodes[0].used_pages;
            if split {
                assert_eq!(mover.splits, 1);
                assert_eq!(m.page_tables().unwrap().page_size_of(hot), Some(PageSize::Base4K));
                assert_eq!((m.node_of(hot), m.node_of(p[0])), (Some(0), Some(1)));
                assert_eq!((fast_pages, mover.promoted_bytes), (1, PAGE_SIZE));
            } else {
                assert_eq!(m.page_tables().unwrap().page_size_of(hot), Some(PageSize::Huge2M));
                assert_eq!(m.node_of(p[0]), Some(0));
                assert_eq!((fast_pages, mover.promoted_bytes), (HUGE_SIZE / PAGE_SIZE, HUGE_SIZE));
            }
        }
    }

    #[test]
    fn token_bucket_limits_promotions() {
        let mut m = Mover::new(1000.0, Ps::from_ns(10_000_000)); // 1 GB/s, 10 ms burst = 10 MB
        assert_eq!(m.budget(), 10_000_000);
        m.tokens = 0.0;
        m.refill(Ps::from_ns(1_000_000)); // 1 ms
        assert_eq!(m.budget(), 1_000_000);
        m.refill(Ps::from_ns(1_000_000_000));
        assert_eq!(m.budget(), 10_000_000, "capped at the burst");
    }
}
