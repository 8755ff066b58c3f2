//! `clock`: the CLOCK (second-chance) algorithm on the pages' Accessed bits.
//!
//! Resident pages sit in a circle in the order they were faulted in; a hand points at the
//! oldest. To evict, the hand tests and clears the Accessed bits of the page under it: a
//! referenced page gets a second chance (the hand moves on), an unreferenced one is the
//! victim and the new page takes its place, the hand moving past it. Every cleared bit
//! costs a TLB invalidation on the cores whose PTE had it, paid by the faulting core.
//!
//! With every access setting the bit (TLB effects off) this is libCacheSim's `Clock` with
//! `init_freq = 1, n_bit_counter = 1`: the faulting access itself sets the bit.

use tierlab_core::param::params;

use super::{Frames, PageId, PageVec, PolicyBuildCtx, PolicyParams, Replacement, NIL};
use crate::error::Result;
use crate::stats::Stats;

/// Parameters of `clock` (none).
#[params]
#[derive(Clone, Debug)]
pub struct ClockParams {}

impl PolicyParams for ClockParams {
    fn build(&self, ctx: &PolicyBuildCtx) -> Result<Box<dyn Replacement>> {
        Ok(Box::new(Clock::new(ctx.pages as usize, ctx.frames as usize)))
    }
}

/// The CLOCK policy.
#[derive(Default)]
pub struct Clock {
    /// The circle: a page per slot (`NIL` = a hole left by `remove`).
    ring: Vec<PageId>,
    /// Slot of each resident page (`NIL` = not resident).
    slot: PageVec<u32>,
    hand: usize,
    /// Slot freed by the last `evict`, where the next page goes.
    pending: Option<usize>,
    /// Holes left by `remove`.
    holes: Vec<usize>,
    /// Pages given a second chance.
    pub second_chances: u64,
}

impl Clock {
    /// For `pages` page ids and `frames` frames (both grow on demand).
    pub fn new(pages: usize, frames: usize) -> Self {
        Clock { ring: Vec::with_capacity(frames), slot: PageVec::with_pages(pages), ..Default::default() }
    }
    /// Resident pages from the hand on (the order they will be examined).
    pub fn order(&self) -> Vec<PageId> {
        let n = self.ring.len();
        (0..n).map(|k| self.ring[(self.hand + k) % n]).filter(|&p| p != NIL).collect()
    }
}

impl Replacement for Clock {
    #[inline]
    fn on_fault_in(&mut self, page: PageId, _f: &mut dyn Frames) {
        let s = if let Some(s) = self.pending.take() {
            self.ring[s] = page;
            self.hand = (s + 1) % self.ring.len();
            s
        } else if let Some(s) = self.holes.pop() {
            self.ring[s] = page;
            s
        } else {
            self.ring.push(page);
            self.ring.len() - 1
        };
        self.slot.set(page, s as u32);
    }
    fn evict(&mut self, f: &mut dyn Frames) -> PageId {
        assert!(self.pending.is_none(), "clock: two evictions without a fault-in");
        let n = self.ring.len();
        assert!(n > self.holes.len(), "clock: evict with no resident page");
        loop {
            let p = self.ring[self.hand];
            if p != NIL {
                if f.test_and_clear_young(p) == 0 {
                    self.ring[self.hand] = NIL;
                    self.slot.set(p, NIL);
                    self.pending = Some(self.hand);
                    return p;
                }
                self.second_chances += 1;
            }
            self.hand = (self.hand + 1) % n;
        }
    }
    fn remove(&mut self, page: PageId) {
        let s = self.slot.get(page) as usize;
        self.ring[s] = NIL;
        self.slot.set(page, NIL);
        self.holes.push(s);
    }
    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.second_chances"), self.second_chances);
    }
}
