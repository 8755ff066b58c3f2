//! TLB shootdowns: the one implementation of "invalidate these translations on every core
//! that may cache them", with one cost formula.
//!
//! The initiator invalidates locally (one INVLPG per page, `invlpg_ns` each, or a full flush
//! past `flush_ceiling_pages`, `full_flush_ns`, as Linux's `flush_tlb_mm_range` does) and
//! sends an IPI to each target core; each target pays `shootdown_target_ns` (interrupt entry,
//! the invalidation, exit) and invalidates the same translations. The initiator pays the IPI
//! round trip, [`crate::hw::cost::CostConfig::shootdown_ns`]`(targets)`: `shootdown_base_ns`
//! for the first target plus `shootdown_per_core_ns` for each further one.
//!
//! Who the targets are is the caller's knowledge: with shared page tables the OS only knows
//! the address space's CPU mask, with per-core page tables (PSPT) it knows each page's core
//! map. An initiator that is a kernel thread outside the machine's cores (the dedicated
//! scanner threads of the hierarchical backend) invalidates nothing locally; its time is
//! returned for the caller to account.

use crate::hw::cost::ps;
use crate::hw::Hardware;

/// What to invalidate.
#[derive(Clone, Copy, Debug)]
pub enum Inval<'a> {
    /// The translations of `[start, end)` (counted as `ceil(len / 4 KiB)` pages).
    Range(u64, u64),
    /// One translation per address (4 KiB, 64 KiB or 2 MiB pages).
    Pages(&'a [u64]),
}

/// Who does the shootdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Initiator {
    /// A core of the machine: it pays its local invalidation and the IPI round trip.
    Core {
        /// The core.
        core: usize,
        /// Whether it invalidates its own TLB (true: it may cache the translations).
        local: bool,
    },
    /// A kernel thread outside the machine's cores: no local invalidation; the IPI time is
    /// returned ([`Outcome::initiator_ps`]) and charged by the caller.
    Kernel,
}

/// What a shootdown did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Remote cores interrupted.
    pub targets: u64,
    /// Time of the initiator (local invalidation plus IPI round trip), ps.
    pub initiator_ps: u64,
}

/// Invalidate `what` on the initiator (when it is a core that may cache it) and on every
/// core `i != initiator` for which `target(i)` holds, charging every core its cost.
pub fn shootdown(
    hw: &mut Hardware,
    what: Inval,
    initiator: Initiator,
    target: impl Fn(usize) -> bool,
) -> Outcome {
    let pages = match what {
        Inval::Range(s, e) => tierlab_core::pages_for(e - s),
        Inval::Pages(v) => v.len() as u64,
    };
    if pages == 0 {
        return Outcome::default();
    }
    let cost = &hw.cost;
    let full = pages > cost.flush_ceiling_pages;
    let local_ps = if full { ps(cost.full_flush_ns) } else { ps(cost.invlpg_ns * pages as f64) };
    let target_ps = ps(cost.shootdown_target_ns);
    let me = match initiator {
        Initiator::Core { core, .. } => Some(core),
        Initiator::Kernel => None,
    };
    let mut targets = 0u64;
    for i in 0..hw.cores.len() {
        if Some(i) == me || !target(i) {
            continue;
        }
        targets += 1;
        invalidate(hw, i, what, full);
        let c = &mut hw.cores[i];
        c.c.remote_invalidations += 1;
        c.clock_ps += target_ps;
        c.c.tlb_maint_ps += target_ps;
    }
    let ipi_ps = if targets == 0 { 0 } else { ps(hw.cost.shootdown_ns(targets as usize)) };
    match initiator {
        Initiator::Core { core, local } => {
            let mut t = ipi_ps;
            if local {
                invalidate(hw, core, what, full);
                let c = &mut hw.cores[core].c;
                if full {
                    c.local_flushes += 1;
                } else {
                    c.local_invalidations += pages;
                }
                t += local_ps;
            }
            let c = &mut hw.cores[core];
            c.c.shootdowns_sent += (targets > 0) as u64;
            c.clock_ps += t;
            c.c.tlb_maint_ps += t;
            Outcome { targets, initiator_ps: t }
        }
        Initiator::Kernel => Outcome { targets, initiator_ps: ipi_ps },
    }
}

fn invalidate(hw: &mut Hardware, core: usize, what: Inval, full: bool) {
    if full {
        hw.flush_tlb(core);
        return;
    }
    match what {
        Inval::Range(s, e) => hw.invalidate_range(core, s, e),
        Inval::Pages(v) => {
            for &va in v {
                hw.invalidate_page(core, va);
            }
        }
    }
}
