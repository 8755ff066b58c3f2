//! `fifo`: first in, first out. The victim is the page resident the longest; references
//! are ignored, so FIFO never tests an Accessed bit and causes no TLB invalidation of its own.

use tierlab_core::param::params;

use super::{DList, Frames, Links, PageId, PolicyBuildCtx, PolicyParams, Replacement};
use crate::error::Result;
use crate::stats::Stats;

/// Parameters of `fifo` (none).
#[params]
#[derive(Clone, Debug)]
pub struct FifoParams {}

impl PolicyParams for FifoParams {
    fn build(&self, ctx: &PolicyBuildCtx) -> Result<Box<dyn Replacement>> {
        Ok(Box::new(Fifo::new(ctx.pages as usize)))
    }
}

/// The FIFO policy.
#[derive(Default)]
pub struct Fifo {
    links: Links,
    queue: DList,
}

impl Fifo {
    /// For `pages` page ids (grows on demand).
    pub fn new(pages: usize) -> Self {
        Fifo { links: Links::with_pages(pages), queue: DList::default() }
    }
    /// Resident pages, oldest first.
    pub fn order(&self) -> Vec<PageId> {
        self.queue.to_vec(&self.links)
    }
}

impl Replacement for Fifo {
    #[inline]
    fn on_fault_in(&mut self, page: PageId, _f: &mut dyn Frames) {
        self.queue.push_back(&mut self.links, page);
    }
    #[inline]
    fn evict(&mut self, _f: &mut dyn Frames) -> PageId {
        self.queue.pop_front(&mut self.links).expect("fifo: evict with no resident page")
    }
    fn remove(&mut self, page: PageId) {
        self.queue.remove(&mut self.links, page);
    }
    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.resident_pages"), self.queue.len());
    }
}
