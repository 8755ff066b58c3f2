//! NUMA hint faults (Linux NUMA balancing): a scanner makes PTEs of a window inaccessible
//! (`change_prot_numa`, PROT_NONE-like, with a TLB flush of the range); the next access to
//! such a page walks the page tables (its translation was flushed), finds the PTE
//! inaccessible and takes a *hint fault*, which restores the PTE and lets the kernel decide
//! whether to migrate the page. The machine calls [`HintFaults::on_walk`] on every page walk
//! when hint faults are armed; the policy reads the faults with [`HintFaults::take_faults`].

use crate::units::Ps;

use crate::stats::Stats;
use tierlab_core::{bytes_of, vpn, PAGE_MASK, PAGE_SIZE};

/// One hint fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintFault {
    /// Address of the page.
    pub va: u64,
    /// Core that faulted.
    pub core: usize,
    /// Time of the fault.
    pub time: Ps,
    /// Time the page was protected by the scan.
    pub scan: Ps,
}

/// Protected pages of one scanned window `[start, start + 4096 * bits)`.
#[derive(Clone, Debug)]
struct Window {
    start: u64,
    end: u64,
    scan: Ps,
    bits: Vec<u64>,
    left: u64,
}

/// The protected pages and the pending hint faults.
#[derive(Clone, Debug)]
pub struct HintFaults {
    /// Windows sorted by start, disjoint.
    windows: Vec<Window>,
    faults: Vec<HintFault>,
    fault_ps: u64,
    /// Hint faults taken.
    pub total_faults: u64,
    /// Pages protected by scans.
    pub protected_pages: u64,
}

impl HintFaults {
    /// Hint faults costing `fault` each to the faulting core.
    pub fn new(fault: Ps) -> Self {
        HintFaults {
            windows: Vec::new(),
            faults: Vec::new(),
            fault_ps: fault.ps(),
            total_faults: 0,
            protected_pages: 0,
        }
    }

    /// Protect the 4 KiB pages `[start, end)` for which `pick(va)` is true (scan time
    /// `now_ns`), replacing older protection of those addresses. The caller flushes the TLBs
    /// of the range. Returns the pages protected.
    pub fn protect(&mut self, start: u64, end: u64, now: Ps, pick: &mut dyn FnMut(u64) -> bool) -> u64 {
        let n = (end - start) / PAGE_SIZE;
        let mut bits = vec![0u64; n.div_ceil(64) as usize];
        let mut left = 0;
        for k in 0..n {
            if pick(start + bytes_of(k)) {
                bits[(k >> 6) as usize] |= 1 << (k & 63);
                left += 1;
            }
        }
        // Drop windows overlapping the new one (their pages are re-protected or not).
        self.windows.retain(|w| w.end <= start || w.start >= end);
        if left > 0 {
            let i = self.windows.partition_point(|w| w.start < start);
            self.windows.insert(i, Window { start, end, scan: now, bits, left });
        }
        self.protected_pages += left;
        left
    }

    /// A page walk of `core` reached `addr` at `clock_ps`: when its page is protected, take a
    /// hint fault (record it, unprotect the page) and return its cost in ps; else 0.
    #[inline]
    pub fn on_walk(&mut self, core: usize, addr: u64, clock_ps: u64) -> u64 {
        let i = self.windows.partition_point(|w| w.end <= addr);
        let Some(w) = self.windows.get_mut(i) else { return 0 };
        if addr < w.start {
            return 0;
        }
        let k = vpn(addr - w.start);
        let (word, bit) = ((k >> 6) as usize, 1u64 << (k & 63));
        if w.bits[word] & bit == 0 {
            return 0;
        }
        w.bits[word] &= !bit;
        w.left -= 1;
        let scan = w.scan;
        if w.left == 0 {
            self.windows.remove(i);
        }
        self.total_faults += 1;
        self.faults.push(HintFault { va: addr & !PAGE_MASK, core, time: Ps::from_ps(clock_ps), scan });
        self.fault_ps
    }

    /// Time of every hint fault taken so far, ps.
    pub fn time_ps(&self) -> u64 {
        self.total_faults * self.fault_ps
    }

    /// The faults taken since the last call, in order.
    pub fn take_faults(&mut self) -> Vec<HintFault> {
        std::mem::take(&mut self.faults)
    }

    /// Pages still protected.
    pub fn still_protected(&self) -> u64 {
        self.windows.iter().map(|w| w.left).sum()
    }

    /// Publish counters under `prefix`.
    pub fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.faults"), self.total_faults);
        out.set(format!("{prefix}.protected_pages"), self.protected_pages);
        out.set(format!("{prefix}.still_protected"), self.still_protected());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_pages_fault_once() {
        let mut h = HintFaults::new(Ps::from_ns(1000));
        let base = 1u64 << 30;
        let n = h.protect(base, base + 128 * 4096, Ps::from_ns(5), &mut |va| {
            ((va - base) / 4096).is_multiple_of(2)
        });
        assert_eq!(n, 64);
        assert_eq!(h.on_walk(0, base + 8, 7_000), 1_000_000);
        assert_eq!(h.on_walk(0, base + 8, 8_000), 0, "unprotected by the fault");
        assert_eq!(h.on_walk(1, base + 4096, 8_000), 0, "odd pages were not protected");
        assert_eq!(h.on_walk(1, base - 4096, 8_000), 0);
        let f = h.take_faults();
        assert_eq!(f, vec![HintFault { va: base, core: 0, time: Ps::from_ps(7_000), scan: Ps::from_ns(5) }]);
        assert_eq!(h.still_protected(), 63);
        // A new scan of part of the range replaces the old protection.
        h.protect(base, base + 64 * 4096, Ps::from_ns(100), &mut |_| true);
        assert_eq!(h.still_protected(), 64);
    }
}
