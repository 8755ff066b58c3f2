//! TPP-style demotion (kswapd with decoupled demotion watermark) for the policies whose
//! papers or patches promote only and leave demotion to the kernel's reclaim: `pghot`
//! (kmigrated promotes, kswapd demotes) and `kmmscand`.
//!
//! kswapd wakes when the fast node's free memory falls below `watermark` of its capacity and
//! demotes, in second-chance order over its list (the pages on the fast node at start in
//! address order, then the pages the policy promoted; the Accessed bit tested and cleared
//! without a flush, as x86's `ptep_clear_flush_young`), until free memory is back at the
//! watermark, at least `SWAP_CLUSTER_MAX` (32) pages per wake-up. The same model as
//! `numa-tiering`'s demotion ([`super::numa_tiering`]), kept apart so that the policies that
//! use it do not depend on NUMA tiering's internals.

use std::collections::VecDeque;

use super::TieringCtx;
use crate::agents::Ps;
use crate::error::Result;
use crate::hw::pagetable::Level;
use crate::os::Flush;
use tierlab_core::PAGE_SIZE;

/// Pages kswapd reclaims at least per wake-up (Linux `SWAP_CLUSTER_MAX`).
const SWAP_CLUSTER_MAX: u64 = 32;

/// kswapd's list of fast-node pages and its counters.
#[derive(Clone, Debug, Default)]
pub struct Kswapd {
    lru: VecDeque<u64>,
    /// Wake-ups that demoted.
    pub reclaims: u64,
    /// Pages examined (Accessed bit tested).
    pub examined: u64,
}

impl Kswapd {
    /// The list with the fast node's pages at start (address order).
    pub fn start(&mut self, ctx: &mut TieringCtx) {
        super::numa_tiering::fast_pages_in_order(ctx, &mut self.lru);
    }

    /// A page the policy promoted joins the list's tail.
    pub fn promoted(&mut self, va: u64) {
        self.lru.push_back(va);
    }

    /// Pages on the list.
    pub fn len(&self) -> usize {
        self.lru.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.lru.is_empty()
    }

    /// Below the watermark (`watermark` of the fast node's capacity, plus `need` bytes the
    /// caller is about to promote): demote in second-chance order until free memory is back
    /// there. `ns_per_page` of the policy's core per page examined. Returns the pages demoted.
    pub fn reclaim(
        &mut self,
        ctx: &mut TieringCtx,
        watermark: f64,
        need: u64,
        ns_per_page: f64,
    ) -> Result<u64> {
        let cap = ctx.fast_capacity();
        let wmark = (cap as f64 * watermark) as u64 + need;
        if ctx.fast_free() >= wmark || wmark == 0 {
            return Ok(0);
        }
        let target = wmark.max(ctx.fast_free() + SWAP_CLUSTER_MAX * PAGE_SIZE);
        let fast = ctx.tiers().fast;
        let mut victims = Vec::new();
        let mut freed = ctx.fast_free();
        let mut budget = self.lru.len() * 2;
        let mut examined = 0u64;
        while freed < target && budget > 0 {
            budget -= 1;
            let Some(va) = self.lru.pop_front() else { break };
            if ctx.machine.node_of(va) != Some(fast) {
                continue;
            }
            examined += 1;
            if ctx.machine.clear_accessed(va, Level::Pte, Flush::None) {
                self.lru.push_back(va);
                continue;
            }
            freed += super::page_bytes(&ctx.machine, va);
            victims.push(va);
        }
        self.examined += examined;
        self.reclaims += 1;
        ctx.charge(Ps::from_ns_f64(examined as f64 * ns_per_page));
        ctx.demote(&victims)
    }
}
