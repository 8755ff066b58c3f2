//! A page-table walk in steps, testing and clearing leaf Accessed bits (no TLB flush, as
//! x86's `ptep_test_and_clear_young`): the mechanism of the Accessed-bit promotion policies
//! (`kmmscand`'s scan, `klruscand`'s MGLRU aging walk). Each step reads up to a number of
//! PTE slots from a cursor over the mappings in address order (4 KiB slots, one per leaf in
//! huge-page mappings); the caller charges the entries read.

use crate::agents::MachineView;
use crate::workload::PageSize;

/// What one step found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Entries read.
    pub read: u64,
    /// Spans `[start, end)` (addresses) scanned.
    pub spans: Vec<(u64, u64)>,
    /// Runs `[first, end)` of base-page numbers found accessed, sorted.
    pub runs: Vec<(u64, u64)>,
    /// The step reached the end of the last mapping (the pass is complete).
    pub done: bool,
}

/// The walk's position.
#[derive(Clone, Debug, Default)]
pub struct Walk {
    /// Next address to scan.
    pub cursor: u64,
}

impl Walk {
    /// The mapping `[start, end)` with page size that holds `cursor` or comes next.
    fn next_vma(m: &MachineView, cursor: u64) -> Option<(u64, u64, PageSize)> {
        if let Some((_, v)) = m.vmas().range(..=cursor).next_back() {
            if cursor < v.start + v.len {
                return Some((v.start, v.start + v.len, v.page_size));
            }
        }
        m.vmas().range(cursor..).next().map(|(_, v)| (v.start, v.start + v.len, v.page_size))
    }

    /// Scan up to `ptes` slots from the cursor; at the end of the last mapping the cursor
    /// goes back to 0 and `done` is set.
    pub fn step(&mut self, m: &mut MachineView, ptes: u64) -> Step {
        let mut out = Step::default();
        let mut budget = ptes.max(1);
        while budget > 0 {
            let Some((vs, ve, psz)) = Self::next_vma(m, self.cursor) else {
                self.cursor = 0;
                out.done = true;
                return out;
            };
            let s = self.cursor.max(vs);
            let h = psz.bytes();
            let end = ve.min(s.saturating_add(budget.saturating_mul(h)));
            budget = budget.saturating_sub((end - s).div_ceil(h));
            let Some(r) = m.scan_accessed(s, end, psz, true) else {
                self.cursor = 0;
                out.done = true;
                return out;
            };
            out.read += r.read;
            out.spans.push((s, end));
            for (a, b) in r.runs {
                crate::agents::push_run(&mut out.runs, a, b);
            }
            self.cursor = end;
            if end >= ve && Self::next_vma(m, end).is_none() {
                self.cursor = 0;
                out.done = true;
                return out;
            }
        }
        out
    }
}
