//! `lru-exact`: exact least-recently-used replacement, a reference point. Every access the
//! machine sees makes its page the most recent; the victim is the least recent page. Real
//! hardware cannot report every access, so this policy has no scanning cost and causes no
//! TLB invalidation of its own: it is the best an LRU could do for free.
//!
//! Implementation: a recency queue with lazy deletion. Each access appends `(page, stamp)`
//! and records the page's latest stamp; eviction pops from the front, skipping entries that
//! are no longer a page's latest (one sequential append and one random write per access, the
//! queue compacted when stale entries outnumber live ones).

use std::collections::VecDeque;

use tierlab_core::param::params;

use super::{Frames, PageId, PolicyBuildCtx, PolicyParams, Replacement};
use crate::error::Result;
use crate::stats::Stats;

/// Parameters of `lru-exact` (none).
#[params]
#[derive(Clone, Debug)]
pub struct LruExactParams {}

impl PolicyParams for LruExactParams {
    fn build(&self, ctx: &PolicyBuildCtx) -> Result<Box<dyn Replacement>> {
        Ok(Box::new(LruExact::new(ctx.pages as usize)))
    }
}

/// The exact LRU policy.
#[derive(Default)]
pub struct LruExact {
    /// Latest stamp of each resident page (0 = not resident).
    last: Vec<u32>,
    queue: VecDeque<(PageId, u32)>,
    stamp: u32,
    resident: usize,
}

impl LruExact {
    /// For `pages` page ids (grows on demand).
    pub fn new(pages: usize) -> Self {
        LruExact { last: vec![0; pages], ..Default::default() }
    }
    /// Resident pages, least recent first.
    pub fn order(&self) -> Vec<PageId> {
        self.queue.iter().filter(|&&(p, t)| self.last[p as usize] == t).map(|&(p, _)| p).collect()
    }
    /// Renumber the live entries 1, 2, ... (when stamps run out).
    #[cold]
    fn renumber(&mut self) {
        let last = &mut self.last;
        self.queue.retain(|&(p, t)| last[p as usize] == t);
        for (k, e) in self.queue.iter_mut().enumerate() {
            e.1 = k as u32 + 1;
            last[e.0 as usize] = e.1;
        }
        self.stamp = self.queue.len() as u32;
    }
    #[inline]
    fn touch(&mut self, page: PageId) {
        if self.stamp == u32::MAX {
            self.renumber();
        }
        self.stamp += 1;
        let i = page as usize;
        if i >= self.last.len() {
            self.last.resize((i + 1).max(self.last.len() * 2), 0);
        }
        self.last[i] = self.stamp;
        self.queue.push_back((page, self.stamp));
        if self.queue.len() > 4 * self.resident + 65536 {
            let last = &self.last;
            self.queue.retain(|&(p, t)| last[p as usize] == t);
        }
    }
}

impl Replacement for LruExact {
    #[inline]
    fn on_fault_in(&mut self, page: PageId, _f: &mut dyn Frames) {
        self.resident += 1;
        self.touch(page);
    }
    fn wants_accesses(&self) -> bool {
        true
    }
    #[inline]
    fn on_access(&mut self, page: PageId) {
        self.touch(page);
    }
    #[inline]
    fn evict(&mut self, _f: &mut dyn Frames) -> PageId {
        while let Some((p, t)) = self.queue.pop_front() {
            if self.last[p as usize] == t {
                self.last[p as usize] = 0;
                self.resident -= 1;
                return p;
            }
        }
        panic!("lru-exact: evict with no resident page");
    }
    fn remove(&mut self, page: PageId) {
        if let Some(l) = self.last.get_mut(page as usize) {
            if *l != 0 {
                *l = 0;
                self.resident -= 1;
            }
        }
    }
    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.resident_pages"), self.resident);
    }
}
