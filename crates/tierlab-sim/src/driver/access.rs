//! The access loop: each core's accesses in batches from its workload ([`Run::run_core`]),
//! executed by [`drain`] in the variant chosen for the run of accesses (with or without
//! ground truth, for a plain core, for a core that mostly misses its TLB).

use super::Run;
use crate::error::{Result, SimError};
use crate::os::Machine;
use crate::units::Ps;
use crate::workload::{Access, Step};

/// A core's batch of accesses from its workload, executed from `pos` on.
pub(super) struct Batch {
    pub(super) buf: Vec<Access>,
    pub(super) pos: usize,
    pub(super) done: bool,
}

/// How far ahead [`drain`] prefetches ground-truth counters, accesses.
const PREFETCH_AHEAD: usize = 8;
/// [`drain`] prefetches for a core with more than one TLB miss per this many L1 TLB hits.
const PREFETCH_MISS_RATIO: u64 = 8;

/// Whether core `t` mostly misses its TLB so far (random accesses over much memory): its
/// accesses then run with `PREFETCH` ([`drain`]).
fn misses_often(m: &Machine, t: usize) -> bool {
    let c = &m.hw.cores[t].c;
    c.tlb_misses.saturating_mul(PREFETCH_MISS_RATIO) > c.l1_tlb_hits
}

/// Execute core `t`'s accesses `buf[*pos..]` until its clock reaches `target_ps` (true) or
/// the batch ends (false), counting them in the ground truth when `TRUTH`. Never inlined:
/// the simulator's hot loop keeps the same code whatever its callers inline (inlined, a
/// change elsewhere in the driver moved its registers and cost 1% more instructions).
///
/// `PLAIN`: the core [`crate::hw::Core::is_plain`] (tested by the caller; nothing on the
/// access path changes it): each access skips two tests (callgrind uniform 362.7 -> 355.6
/// instructions per access, triad 104.2 -> 100.3, 16 cores 95.2 -> 91.2).
///
/// `PREFETCH`: have the host fetch the ground-truth counter of the access
/// [`PREFETCH_AHEAD`] further (the page walks in between leave its memory the time). On the
/// 2-core VM, uniform 1 GiB (a walk per access): distances 4 to 32 ran 4-6% faster than
/// none, alternated; STREAM triad (TLB hits) ran 8% slower with it, hence [`misses_often`].
#[inline(never)]
fn drain<const TRUTH: bool, const PLAIN: bool, const PREFETCH: bool>(
    m: &mut Machine,
    t: usize,
    buf: &[Access],
    pos: &mut usize,
    target_ps: u64,
) -> Result<bool> {
    let mut i = *pos;
    // The core's clock comes back from each access (reading it from the core again costs
    // a bounds check and two loads per access).
    let mut clock = m.hw.cores[t].clock_ps;
    let r = (|| {
        while i < buf.len() {
            if clock >= target_ps {
                return Ok(true);
            }
            if PREFETCH {
                m.prefetch_truth(buf[(i + PREFETCH_AHEAD).min(buf.len() - 1)].addr);
            }
            clock = m.access_with::<TRUTH, PLAIN>(t, buf[i])?;
            i += 1;
        }
        Ok::<bool, SimError>(clock >= target_ps)
    })();
    *pos = i;
    r
}

impl Run {
    /// Run core `t` until its clock reaches `target_ps` or its thread finishes; true when
    /// it stopped short because its thread waits for another ([`Step::Wait`]).
    #[inline]
    pub(super) fn run_core(&mut self, t: usize, target: Ps) -> Result<bool> {
        let target_ps = target.ps();
        loop {
            let b = &mut self.batches[t];
            if b.pos == b.buf.len() {
                if b.done {
                    return Ok(false);
                }
                b.buf.clear();
                b.pos = 0;
                let now = Ps::from_ps(self.machine.hw.cores[t].clock_ps);
                match self.workload.next_batch(t, now, &mut b.buf, &mut self.machine)? {
                    Step::Continue => {}
                    Step::Done => b.done = true,
                    Step::Wait => return Ok(true),
                    Step::Resume(at) => {
                        // The thread waited (idle) until `at`.
                        let c = &mut self.machine.hw.cores[t];
                        c.clock_ps = c.clock_ps.max(at.ps());
                    }
                }
                if b.buf.is_empty() {
                    if b.done {
                        return Ok(false);
                    }
                    if self.machine.hw.cores[t].clock_ps >= target_ps {
                        return Ok(false);
                    }
                    continue;
                }
            }
            let b = &mut self.batches[t];
            let m = &mut self.machine;
            let r = if !self.scenario.report.ground_truth {
                drain::<false, false, false>(m, t, &b.buf, &mut b.pos, target_ps)
            } else if !m.hw.cores[t].is_plain() {
                drain::<true, false, false>(m, t, &b.buf, &mut b.pos, target_ps)
            } else if misses_often(m, t) {
                drain::<true, true, true>(m, t, &b.buf, &mut b.pos, target_ps)
            } else {
                drain::<true, true, false>(m, t, &b.buf, &mut b.pos, target_ps)
            };
            if r? {
                return Ok(false);
            }
        }
    }

    pub(super) fn all_done(&self) -> bool {
        self.batches.iter().all(|b| b.done && b.pos == b.buf.len())
    }
}
