//! `lru`: a Linux-like two-list LRU approximation, as the CMCP paper's baseline: active and
//! inactive lists maintained by an Accessed-bit scanner that runs every `scan_period`
//! (default 10 ms, the paper's timer) on dedicated hardware threads.
//!
//! The paper (section 5.1): its LRU "implements the same algorithm employed by the Linux
//! kernel" (Mauerer 2008, i.e. Linux 2.6.24); "pages transit between these two states based on
//! periodic scanning of the access bit of the corresponding PTEs, which is carried out in a
//! timer set for every 10 milliseconds". By default every scan therefore passes over both
//! lists; the rules are Linux's (`reference/memory-management.md`, "Linux's two-list LRU"):
//! - a newly faulted page enters the inactive list's head (the newest end); with `refault`
//!   on (off by default, see [`LruParams::refault`]), a page whose refault distance
//!   (evictions + activations since its eviction) is at most the active list's size is
//!   activated directly (the workingset shadow entries);
//! - each scan first examines the active list from its tail (oldest end), `active_scan` of it
//!   (default all): a page whose Accessed bits were set (tested and cleared) goes back to the
//!   active head, as mapped pages do in 2.6.24's `shrink_active_list`; an unreferenced one is
//!   deactivated to the inactive head;
//! - then, while the inactive list is too small (`inactive * ratio < active`, `ratio =
//!   int_sqrt(10 * fast memory in GB)`, 1 below 1 GB), active tail pages are deactivated, their
//!   bits tested and cleared on the way;
//! - then it examines the inactive list from its tail (by default all of it; `scan_ratio > 0`
//!   examines `scan_ratio` pages per page evicted since the previous scan, at least 32, the way
//!   kswapd scans in proportion to what it must reclaim), testing and clearing the Accessed
//!   bits of every PTE mapping each page: referenced and already marked referenced, or
//!   referenced through more than one PTE -> activated (active head); referenced once ->
//!   marked referenced and rotated to the inactive head (one more trip); not referenced ->
//!   moved to the tail, the next victims;
//! - eviction (in the faulting core) first restores the inactive:active balance by moving
//!   active tail pages to the inactive head (without testing their bits: statistics are the
//!   scanner's job, kept off the application's cores as in the paper), then takes the
//!   inactive list's tail.
//!
//! Every Accessed bit the scanner clears costs a TLB invalidation on the cores whose PTE had
//! it: the price the CMCP paper shows LRU pays on many cores.

use tierlab_core::param::params;

use super::{DList, Frames, Links, PageId, PageVec, PolicyBuildCtx, PolicyParams, Replacement};
use crate::error::Result;
use crate::stats::Stats;
use crate::units::{Duration, Ps};

/// Parameters of `lru`.
#[params]
#[derive(Clone, Debug)]
pub struct LruParams {
    /// Period of the Accessed-bit scanner.
    #[param(
        default = Duration(10_000_000),
        sourced = "papers/cmcp-pspt-paper.txt, section 5.1: periodic scanning of the access bit \"in a timer set for every 10 milliseconds\""
    )]
    pub scan_period: Duration,
    /// Inactive:active ratio target; absent = Linux's `int_sqrt(10 * GB)` of fast memory.
    #[param(
        default,
        range = "[1, 1e6]",
        sourced = "reference/memory-management.md, Linux's two-list LRU: ratio = int_sqrt(10 * total_GB) when absent"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inactive_ratio: Option<u64>,
    /// Activate refaulting pages whose refault distance fits the active list (Linux's
    /// workingset detection, 3.15 and later). Off by default: the paper's LRU follows the
    /// Linux 2.6 algorithm (Mauerer 2008), which has none.
    #[param(default = false)]
    pub refault: bool,
    /// Inactive pages a scan examines per page evicted since the previous scan (reclaim-
    /// driven, as kswapd scans in proportion to what it must reclaim), at least 32 (Linux's
    /// SWAP_CLUSTER_MAX); 0 = the whole inactive list every scan, the paper's timer.
    #[param(
        default = 0.0,
        range = "[0, 1e6]",
        assumed = "the whole inactive list every scan, as the paper's timer-driven LRU"
    )]
    pub scan_ratio: f64,
    /// Fraction of the active list (from its oldest end) each scan examines, referenced pages
    /// rotating back to the active head, the others deactivated; 0 = the active list is aged
    /// only to keep the inactive ratio.
    #[param(
        default = 1.0,
        range = "[0, 1]",
        unit = "fraction",
        assumed = "the whole list every scan, as the paper's timer-driven LRU"
    )]
    pub active_scan: f64,
}

/// Integer square root (floor).
pub fn int_sqrt(x: u64) -> u64 {
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

/// Linux's inactive ratio for a memory of `bytes`: `int_sqrt(10 * GB)`, at least 1.
pub fn linux_inactive_ratio(bytes: u64) -> u64 {
    let gb = bytes >> 30;
    if gb == 0 {
        1
    } else {
        int_sqrt(10 * gb).max(1)
    }
}

impl PolicyParams for LruParams {
    fn build(&self, ctx: &PolicyBuildCtx) -> Result<Box<dyn Replacement>> {
        if let Err((f, m)) = self.check() {
            return Err(ctx.error(&f, m));
        }
        let ratio = self.inactive_ratio.unwrap_or_else(|| linux_inactive_ratio(ctx.capacity_bytes));
        Ok(Box::new(Lru::new(self, ratio, ctx.pages as usize)))
    }
    fn check(&self) -> std::result::Result<(), (String, String)> {
        crate::limits::check_ranges(self, "")?;
        if self.scan_period.0 == 0 {
            return Err(("scan_period".into(), "must be > 0".into()));
        }
        Ok(())
    }
}

const ACTIVE: u8 = 1;
const REFERENCED: u8 = 2;
const NO_SHADOW: u64 = u64::MAX;

/// The Linux-like LRU.
pub struct Lru {
    period: Ps,
    ratio: u64,
    refault: bool,
    scan_ratio: f64,
    active_scan: f64,
    /// Evictions at the previous scan.
    evictions_at_scan: u64,
    evictions: u64,
    links: Links,
    active: DList,
    inactive: DList,
    flags: PageVec<u8>,
    /// Eviction-time value of `age` per evicted page (`NO_SHADOW` = none).
    shadow: Vec<u64>,
    /// Evictions plus activations so far (Linux's nonresident age).
    age: u64,
    c: LruCounters,
}

/// Counters of the Linux-like LRU.
#[derive(Clone, Debug, Default)]
pub struct LruCounters {
    /// Scans run.
    pub scans: u64,
    /// Inactive pages examined by scans.
    pub scanned: u64,
    /// Active pages deactivated by scans (their bits tested on the way).
    pub deactivated: u64,
    /// Referenced active pages a scan rotated back to the active head.
    pub active_rotated: u64,
    /// Pages moved to the active list by scans.
    pub activated: u64,
    /// Referenced-once pages given one more trip.
    pub rotated: u64,
    /// Refaulting pages activated at fault time.
    pub refault_activated: u64,
    /// Victims taken from the active list (the inactive list was empty).
    pub evicted_active: u64,
    /// Active pages deactivated by reclaim to keep the ratio between scans (bits untested).
    pub deactivated_in_reclaim: u64,
}

impl Lru {
    /// A policy with `params`, inactive ratio `ratio`, for `pages` page ids.
    pub fn new(params: &LruParams, ratio: u64, pages: usize) -> Self {
        Lru {
            period: params.scan_period.ps(),
            ratio: ratio.max(1),
            refault: params.refault,
            scan_ratio: params.scan_ratio,
            active_scan: params.active_scan,
            evictions_at_scan: 0,
            evictions: 0,
            links: Links::with_pages(pages),
            active: DList::default(),
            inactive: DList::default(),
            flags: PageVec::with_pages(pages),
            shadow: vec![NO_SHADOW; pages],
            age: 0,
            c: LruCounters::default(),
        }
    }
    /// The lists (oldest first): (inactive, active).
    pub fn lists(&self) -> (Vec<PageId>, Vec<PageId>) {
        (self.inactive.to_vec(&self.links), self.active.to_vec(&self.links))
    }
    /// The counters.
    pub fn counters(&self) -> &LruCounters {
        &self.c
    }
    /// Whether `page` carries the software referenced mark.
    pub fn is_marked_referenced(&self, page: PageId) -> bool {
        self.flags.get(page) & REFERENCED != 0
    }

    fn activate(&mut self, p: PageId) {
        self.active.push_back(&mut self.links, p);
        self.flags.set(p, ACTIVE);
        self.age += 1;
    }

    /// One scan: examine the active list, keep the inactive ratio, then examine the inactive
    /// list from its tail.
    pub fn scan(&mut self, f: &mut dyn Frames) {
        self.c.scans += 1;
        if self.active_scan > 0.0 {
            let n = ((self.active.len() as f64 * self.active_scan).ceil() as usize).min(self.active.len());
            // Exactly n pops from the oldest end: a page put back at the newest end is not
            // reached again in this pass, and the referenced pages keep their order.
            for _ in 0..n {
                let p = self.active.pop_front(&mut self.links).expect("active");
                if f.test_and_clear_young(p) > 0 {
                    self.active.push_back(&mut self.links, p);
                    self.c.active_rotated += 1;
                } else {
                    self.inactive.push_back(&mut self.links, p);
                    self.flags.set(p, 0);
                    self.c.deactivated += 1;
                }
            }
        }
        while self.inactive.len() as u64 * self.ratio < self.active.len() as u64 {
            let p = self.active.pop_front(&mut self.links).expect("active");
            f.test_and_clear_young(p);
            self.inactive.push_back(&mut self.links, p);
            self.flags.set(p, 0);
            self.c.deactivated += 1;
        }
        let mut n = self.inactive.len() as u64;
        if self.scan_ratio > 0.0 {
            let due = (self.scan_ratio * (self.evictions - self.evictions_at_scan) as f64).ceil() as u64;
            n = n.min(due.max(32));
        }
        self.evictions_at_scan = self.evictions;
        let mut keep: Vec<PageId> = Vec::new();
        for _ in 0..n {
            let p = self.inactive.pop_front(&mut self.links).expect("inactive");
            self.c.scanned += 1;
            let refs = f.test_and_clear_young(p);
            let was_referenced = self.flags.get(p) & REFERENCED != 0;
            if refs == 0 {
                // TestClearPageReferenced: an unreferenced page loses its mark.
                self.flags.set(p, 0);
                keep.push(p);
            } else if was_referenced || refs > 1 {
                self.activate(p);
                self.c.activated += 1;
            } else {
                self.flags.set(p, REFERENCED);
                self.inactive.push_back(&mut self.links, p);
                self.c.rotated += 1;
            }
        }
        // Unreferenced pages stay at the tail in their order.
        for &p in keep.iter().rev() {
            self.inactive.push_front(&mut self.links, p);
        }
    }
}

impl Replacement for Lru {
    fn on_fault_in(&mut self, page: PageId, _f: &mut dyn Frames) {
        let s = self.shadow.get(page as usize).copied().unwrap_or(NO_SHADOW);
        if self.refault && s != NO_SHADOW && self.age - s <= self.active.len() as u64 {
            self.activate(page);
            self.c.refault_activated += 1;
        } else {
            self.inactive.push_back(&mut self.links, page);
            self.flags.set(page, 0);
        }
    }
    fn evict(&mut self, _f: &mut dyn Frames) -> PageId {
        // Reclaim keeps the lists balanced between scans; the pages' Accessed bits are left
        // for the scanner (no statistics work on the application's cores).
        while self.inactive.len() as u64 * self.ratio < self.active.len() as u64 {
            let p = self.active.pop_front(&mut self.links).expect("active");
            self.inactive.push_back(&mut self.links, p);
            self.flags.set(p, 0);
            self.c.deactivated_in_reclaim += 1;
        }
        let p = if let Some(p) = self.inactive.pop_front(&mut self.links) {
            p
        } else {
            self.c.evicted_active += 1;
            self.active.pop_front(&mut self.links).expect("lru: evict with no resident page")
        };
        self.flags.set(p, 0);
        self.evictions += 1;
        if self.refault {
            if self.shadow.len() <= p as usize {
                self.shadow.resize((p as usize + 1).max(self.shadow.len() * 2), NO_SHADOW);
            }
            self.shadow[p as usize] = self.age;
        }
        self.age += 1;
        p
    }
    fn remove(&mut self, page: PageId) {
        if self.flags.get(page) & ACTIVE != 0 {
            self.active.remove(&mut self.links, page);
        } else {
            self.inactive.remove(&mut self.links, page);
        }
        self.flags.set(page, 0);
        if let Some(s) = self.shadow.get_mut(page as usize) {
            *s = NO_SHADOW;
        }
    }
    fn period(&self) -> Ps {
        self.period
    }
    fn tick(&mut self, _now: Ps, f: &mut dyn Frames) {
        self.scan(f);
    }
    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        let c = &self.c;
        out.set(format!("{prefix}.inactive_ratio"), self.ratio);
        out.set(format!("{prefix}.scans"), c.scans);
        out.set(format!("{prefix}.scanned"), c.scanned);
        out.set(format!("{prefix}.deactivated"), c.deactivated);
        out.set(format!("{prefix}.active_rotated"), c.active_rotated);
        out.set(format!("{prefix}.activated"), c.activated);
        out.set(format!("{prefix}.rotated"), c.rotated);
        out.set(format!("{prefix}.refault_activated"), c.refault_activated);
        out.set(format!("{prefix}.evicted_active"), c.evicted_active);
        out.set(format!("{prefix}.deactivated_in_reclaim"), c.deactivated_in_reclaim);
        out.set(format!("{prefix}.active_pages"), self.active.len());
        out.set(format!("{prefix}.inactive_pages"), self.inactive.len());
    }
}
