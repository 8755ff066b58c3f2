//! `cmcp`: Core-Map Count based Priority replacement (Gerofi et al., HPDC'14, section 3).
//!
//! Resident pages are split into a regular group kept as a FIFO list and a priority group
//! ordered by the number of cores mapping each page (the core map of per-core page tables),
//! holding at most a fraction `p` of the resident pages:
//! - when a core installs a PTE for a page (the fault that brings it in, or another core
//!   mapping it later), the page is placed into the priority group if the group holds fewer
//!   than `floor(p * resident pages)`; otherwise, if its core-map count is larger than the
//!   priority of the lowest-priority page of the group, that page moves to the FIFO list and
//!   the new one takes its place; otherwise it stays in (or enters) the FIFO list. A page
//!   already in the priority group gets its priority raised to its new count;
//! - ageing: every `aging * frames` evictions, the priority of every prioritized page drops by
//!   one; a page whose priority reaches 0 falls back to the FIFO list's newest end. So pages
//!   that are no longer mapped by more cores slowly leave the group;
//! - eviction takes the FIFO list's oldest page, or, when the FIFO list is empty, the
//!   lowest-priority page of the group (the oldest among equals).
//!
//! No Accessed bit is ever tested: CMCP causes no TLB invalidation beyond the evictions'.
//! With `p = 0` the priority group stays empty and CMCP is FIFO. With shared page tables
//! the core map is unknown (count 0) and pages never win a place by count.

use std::collections::BTreeSet;

use tierlab_core::param::params;

use super::{DList, Frames, Links, PageId, PageVec, PolicyBuildCtx, PolicyParams, Replacement};
use crate::error::Result;
use crate::stats::Stats;

/// Parameters of `cmcp`.
#[params]
#[derive(Clone, Debug)]
pub struct CmcpParams {
    /// Fraction of resident pages the priority group may hold.
    #[param(
        default = 0.5,
        range = "[0, 1]",
        unit = "fraction",
        assumed = "the middle of [0, 1]: the paper's best p is workload-specific (CG low, LU and SCALE high)"
    )]
    pub p: f64,
    /// Ageing period as a fraction of the fast memory's frames: every `aging * frames`
    /// evictions every prioritized page loses one priority level. 0 = no ageing.
    #[param(
        default = 1.0,
        range = "[0, 1e6]",
        assumed = "a step per memory turnover; the paper names \"a simple aging method\" without a rate"
    )]
    pub aging: f64,
}

impl PolicyParams for CmcpParams {
    fn build(&self, ctx: &PolicyBuildCtx) -> Result<Box<dyn Replacement>> {
        if let Err((f, m)) = self.check() {
            return Err(ctx.error(&f, m));
        }
        let every =
            if self.aging == 0.0 { 0 } else { ((self.aging * ctx.frames as f64).round() as u64).max(1) };
        Ok(Box::new(Cmcp::new(self.p, every, ctx.pages as usize)))
    }
    fn check(&self) -> std::result::Result<(), (String, String)> {
        crate::limits::check_ranges(self, "")
    }
}

const NONE: u8 = 0;
const FIFO: u8 = 1;
const PRIO: u8 = 2;

/// The CMCP policy.
pub struct Cmcp {
    p: f64,
    /// Evictions per ageing step (0 = no ageing).
    age_every: u64,
    links: Links,
    fifo: DList,
    /// (priority key, sequence, page): effective priority = key - age.
    prio: BTreeSet<(u64, u64, PageId)>,
    group: PageVec<u8>,
    key: PageVec<u64>,
    seq: PageVec<u64>,
    next_seq: u64,
    age: u64,
    resident: u64,
    evictions: u64,
    c: CmcpCounters,
}

/// Counters of CMCP.
#[derive(Clone, Debug, Default)]
pub struct CmcpCounters {
    /// Pages placed into the priority group.
    pub prioritized: u64,
    /// Lowest-priority pages pushed back to FIFO by a page with a larger count.
    pub displaced: u64,
    /// Pages that aged out of the priority group.
    pub aged_out: u64,
    /// Ageing steps.
    pub aging_steps: u64,
    /// Victims taken from the priority group (FIFO list empty).
    pub evicted_prio: u64,
}

impl Cmcp {
    /// CMCP with fraction `p`, an ageing step every `age_every` evictions (0 = never).
    pub fn new(p: f64, age_every: u64, pages: usize) -> Self {
        Cmcp {
            p,
            age_every,
            links: Links::with_pages(pages),
            fifo: DList::default(),
            prio: BTreeSet::new(),
            group: PageVec::with_pages(pages),
            key: PageVec::with_pages(pages),
            seq: PageVec::with_pages(pages),
            next_seq: 0,
            age: 0,
            resident: 0,
            evictions: 0,
            c: CmcpCounters::default(),
        }
    }
    /// FIFO list (oldest first) and priority group (lowest priority first, with effective
    /// priorities).
    pub fn groups(&self) -> (Vec<PageId>, Vec<(PageId, u64)>) {
        (self.fifo.to_vec(&self.links), self.prio.iter().map(|&(k, _, p)| (p, k - self.age)).collect())
    }
    /// The counters.
    pub fn counters(&self) -> &CmcpCounters {
        &self.c
    }

    fn room(&self) -> bool {
        (self.prio.len() as u64) < (self.p * self.resident as f64).floor() as u64
    }

    fn prioritize(&mut self, p: PageId, count: u64) {
        let s = self.next_seq;
        self.next_seq += 1;
        let k = count + self.age;
        self.key.set(p, k);
        self.seq.set(p, s);
        self.group.set(p, PRIO);
        self.prio.insert((k, s, p));
    }

    /// Place page `p` (in FIFO or in no group) given its core-map count.
    fn place(&mut self, p: PageId, count: u64, in_fifo: bool) {
        if self.room() {
            if in_fifo {
                self.fifo.remove(&mut self.links, p);
            }
            self.prioritize(p, count);
            self.c.prioritized += 1;
            return;
        }
        if let Some(&(k, s, low)) = self.prio.first() {
            if count > k - self.age {
                self.prio.remove(&(k, s, low));
                self.fifo.push_back(&mut self.links, low);
                self.group.set(low, FIFO);
                self.c.displaced += 1;
                if in_fifo {
                    self.fifo.remove(&mut self.links, p);
                }
                self.prioritize(p, count);
                self.c.prioritized += 1;
                return;
            }
        }
        if !in_fifo {
            self.fifo.push_back(&mut self.links, p);
            self.group.set(p, FIFO);
        }
    }

    fn age_step(&mut self) {
        self.age += 1;
        self.c.aging_steps += 1;
        while let Some(&(k, s, p)) = self.prio.first() {
            if k > self.age {
                break;
            }
            self.prio.remove(&(k, s, p));
            self.fifo.push_back(&mut self.links, p);
            self.group.set(p, FIFO);
            self.c.aged_out += 1;
        }
    }
}

impl Replacement for Cmcp {
    fn on_fault_in(&mut self, page: PageId, f: &mut dyn Frames) {
        self.resident += 1;
        let count = f.mapcount(page) as u64;
        self.place(page, count, false);
    }
    fn on_map(&mut self, page: PageId, f: &mut dyn Frames) {
        let count = f.mapcount(page) as u64;
        match self.group.get(page) {
            PRIO => {
                let (k, s) = (self.key.get(page), self.seq.get(page));
                if count + self.age > k {
                    self.prio.remove(&(k, s, page));
                    self.prioritize(page, count);
                }
            }
            FIFO => self.place(page, count, true),
            _ => {}
        }
    }
    fn evict(&mut self, _f: &mut dyn Frames) -> PageId {
        let p = if let Some(p) = self.fifo.pop_front(&mut self.links) {
            p
        } else {
            let first = *self.prio.first().expect("cmcp: evict with no resident page");
            self.prio.remove(&first);
            self.c.evicted_prio += 1;
            first.2
        };
        self.group.set(p, NONE);
        self.resident -= 1;
        self.evictions += 1;
        if self.age_every > 0 && self.evictions.is_multiple_of(self.age_every) {
            self.age_step();
        }
        p
    }
    fn remove(&mut self, page: PageId) {
        match self.group.get(page) {
            PRIO => {
                self.prio.remove(&(self.key.get(page), self.seq.get(page), page));
            }
            FIFO => self.fifo.remove(&mut self.links, page),
            _ => return,
        }
        self.group.set(page, NONE);
        self.resident -= 1;
    }
    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        let c = &self.c;
        out.set(format!("{prefix}.p"), self.p);
        out.set(format!("{prefix}.aging_every_evictions"), self.age_every);
        out.set(format!("{prefix}.prioritized"), c.prioritized);
        out.set(format!("{prefix}.displaced"), c.displaced);
        out.set(format!("{prefix}.aged_out"), c.aged_out);
        out.set(format!("{prefix}.aging_steps"), c.aging_steps);
        out.set(format!("{prefix}.evicted_from_priority"), c.evicted_prio);
        out.set(format!("{prefix}.priority_pages"), self.prio.len());
        out.set(format!("{prefix}.fifo_pages"), self.fifo.len());
    }
}
