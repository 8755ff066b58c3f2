//! `pte-scan`: linear scanning of every PTE's Accessed bit (kstaled, MGLRU aging).
//!
//! A *pass* walks every mapping ([`Machine::vmas`]) in address order and tests-and-clears
//! the Accessed bit of each present PTE (of each 2 MiB leaf in huge-page mappings), 64 PTEs
//! per bitmap word through [`crate::machine::pagetable::PageTables::scan_pte_accessed`].
//! Bulk-populated PMD entries report their pages present with no Accessed bit and are never
//! materialized, so a pass over an untouched 5 TiB heap allocates nothing.
//!
//! # Time
//! The pass proceeds in simulated time: each event scans `chunk_ptes` PTE slots of address
//! space and charges `ns_per_pte` per PTE read (the 512 entries of every present PTE table in
//! range, one per present 2 MiB leaf; empty PMD/PUD entries are skipped for free, as
//! `pmd_none` is) to the observer's core, then schedules the next chunk after the time that
//! chunk cost. A pass starts `interval` after the previous one started, or at once when the
//! previous pass took longer (at terabyte scale the scanner is then always busy, which is the
//! point of Telescope's comparison: 1 TB = 256 Mi PTEs, over a minute per pass). The first
//! pass starts at `interval` ("clear, wait, check": bits start clear at time 0).
//!
//! # TLB flush
//! `flush = false` (default) clears bits without flushing, as x86 Linux does for young-bit
//! harvesting (`ptep_clear_flush_young` does not flush on x86): translations cached in a TLB
//! keep hiding later accesses. With `flush = true`, after each chunk the observer's core
//! invalidates the span of the pages it cleared in each mapping with one shootdown
//! ([`Machine::invalidate_range`]: per page up to the flush ceiling, else a full flush), the
//! batching kstaled and MGLRU use; its cost lands on the observer's core (and on the target
//! cores for the IPIs).
//!
//! # Hotness
//! `report = "last-check"` (default): a page is reported hot when the most recent check of
//! its PTE found the Accessed bit set, i.e. the current pass's findings below the scan
//! position and the previous pass's above it. This is what kstaled/MGLRU know at any moment
//! (they act on each page as they scan it). `report = "last-pass"`: only the pages found
//! accessed by the latest *completed* pass (nothing until the first pass completes).
//! Either way the report is coalesced byte ranges ([`HotReport::Regions`]) clipped to the
//! live mappings.

use serde::{Deserialize, Serialize};

use super::*;
use crate::error::Result;
use crate::machine::pagetable::Level;
use crate::units::Duration;
use crate::workload::PageSize;

/// Which pass results are reported hot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PteReport {
    /// The most recent check of each page (current pass below the cursor, previous above).
    #[default]
    LastCheck,
    /// Only the latest completed pass.
    LastPass,
}

/// Parameters of `pte-scan`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PteScanParams {
    /// Label in tables and plots (default `pte-scan`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Core the scanner runs on (default: the first core without an application thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<usize>,
    /// Time between the starts of two passes. Default 1 s: Telescope's comparison scores
    /// 1 s windows and rescans mappings every 1 s; a pass that takes longer is followed
    /// at once by the next.
    #[serde(default = "d_interval")]
    pub interval: Duration,
    /// Cost of reading (and clearing) one PTE, ns. Default 250 ns: the Telescope slides give
    /// "1 TB = 256 M 4 KiB pages; one full scan takes over a minute" (> 234 ns per PTE), so a
    /// full pass over 1 TiB takes 67 s.
    #[serde(default = "d_ns_per_pte")]
    pub ns_per_pte: f64,
    /// PTE slots (of address space: 4 KiB each, 2 MiB in huge-page mappings) scanned per
    /// event. Default 64 Ki (256 MiB of 4 KiB pages, 16 ms of scanning at 250 ns/PTE).
    #[serde(default = "d_chunk")]
    pub chunk_ptes: u64,
    /// Flush the TLBs after clearing (a shootdown per mapping and chunk). Default false, as
    /// x86 Linux does for Accessed-bit harvesting.
    #[serde(default)]
    pub flush: bool,
    /// What is reported hot: `last-check` (default) or `last-pass`.
    #[serde(default)]
    pub report: PteReport,
}

fn d_interval() -> Duration {
    Duration(1_000_000_000)
}
fn d_ns_per_pte() -> f64 {
    250.0
}
fn d_chunk() -> u64 {
    65_536
}

impl TelemetryParams for PteScanParams {
    fn build(&self, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
        if self.interval.0 == 0 {
            return Err(ctx.err("interval", "must be > 0"));
        }
        if !(self.ns_per_pte.is_finite() && self.ns_per_pte >= 0.0) {
            return Err(ctx.err("ns_per_pte", format!("{} must be a finite number >= 0", self.ns_per_pte)));
        }
        if self.chunk_ptes == 0 || self.chunk_ptes > 1 << 30 {
            return Err(ctx.err("chunk_ptes", format!("{} is not in 1..=2^30", self.chunk_ptes)));
        }
        Ok(Box::new(PteScan::new(self.clone())))
    }
    fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| "pte-scan".to_string())
    }
    fn core(&self) -> Option<usize> {
        self.core
    }
}

/// Append the page run `[s, e)` to sorted runs, merging with the last when adjacent.
fn push_run(runs: &mut Vec<(u64, u64)>, s: u64, e: u64) {
    match runs.last_mut() {
        Some(last) if last.1 >= s => last.1 = last.1.max(e),
        _ => runs.push((s, e)),
    }
}

/// The `pte-scan` observer.
pub struct PteScan {
    p: PteScanParams,
    next_ns: u64,
    in_pass: bool,
    /// Next address to scan in the current pass.
    cursor: u64,
    pass_start_ns: u64,
    /// Pages (runs `[first, end)` of page numbers) found accessed by the current pass, all
    /// below `cursor`, sorted.
    cur: Vec<(u64, u64)>,
    /// Runs of the latest completed pass.
    prev: Vec<(u64, u64)>,
    /// Mapped bytes at the start of the current pass, and bytes of them passed so far.
    pass_total: u64,
    pass_done: u64,
    passes: u64,
    ptes: u64,
    found: u64,
    flushes: u64,
    scan_ps: u64,
    last_pass_ns: u64,
}

impl PteScan {
    fn new(p: PteScanParams) -> Self {
        PteScan {
            next_ns: p.interval.0,
            p,
            in_pass: false,
            cursor: 0,
            pass_start_ns: 0,
            cur: Vec::new(),
            prev: Vec::new(),
            pass_total: 0,
            pass_done: 0,
            passes: 0,
            ptes: 0,
            found: 0,
            flushes: 0,
            scan_ps: 0,
            last_pass_ns: 0,
        }
    }

    /// Completed passes.
    pub fn passes(&self) -> u64 {
        self.passes
    }

    /// PTEs read so far.
    pub fn ptes_scanned(&self) -> u64 {
        self.ptes
    }

    /// The mapping `[start, end)` with page size that holds `cursor` or comes next.
    fn next_vma(m: &Machine, cursor: u64) -> Option<(u64, u64, PageSize)> {
        if let Some((_, v)) = m.vmas.range(..=cursor).next_back() {
            if cursor < v.start + v.len {
                return Some((v.start, v.start + v.len, v.page_size));
            }
        }
        m.vmas.range(cursor..).next().map(|(_, v)| (v.start, v.start + v.len, v.page_size))
    }

    /// Scan one chunk from the cursor; returns (PTEs read, whether the pass is complete) and
    /// fills `batches` with the spans to flush (one per mapping with cleared bits).
    fn scan_chunk(&mut self, ctx: &mut ObserverCtx, batches: &mut Vec<(u64, u64)>) -> (u64, bool) {
        let mut budget = self.p.chunk_ptes;
        let mut read = 0u64;
        let flush = self.p.flush;
        while budget > 0 {
            let Some((vs, ve, psz)) = Self::next_vma(ctx.machine, self.cursor) else {
                return (read, true);
            };
            let s = self.cursor.max(vs);
            let (mut lo, mut hi) = (u64::MAX, 0u64);
            let end;
            match psz {
                PageSize::Base4K => {
                    end = ve.min(s.saturating_add(budget * 4096));
                    budget -= (end - s) / 4096;
                    let cur = &mut self.cur;
                    let mut found = 0u64;
                    ctx.machine.pt.scan_pte_accessed(s, end, true, &mut |va, _present, acc| {
                        // A present PTE table (or bulk entry): every slot in range is read.
                        let (a, b) = (va.max(s), (va + (64 << 12)).min(end));
                        read += (b - a) >> 12;
                        let mut bits = acc;
                        let page0 = va >> 12;
                        while bits != 0 {
                            let tz = bits.trailing_zeros() as u64;
                            let ones = (!(bits >> tz)).trailing_zeros() as u64;
                            push_run(cur, page0 + tz, page0 + tz + ones);
                            found += ones;
                            bits = if tz + ones >= 64 { 0 } else { bits & (!0u64 << (tz + ones)) };
                        }
                        if acc != 0 {
                            lo = lo.min(va + ((acc.trailing_zeros() as u64) << 12));
                            hi = hi.max(va + ((64 - acc.leading_zeros() as u64) << 12));
                        }
                    });
                    self.found += found;
                }
                PageSize::Huge2M => {
                    const H: u64 = 2 << 20;
                    end = ve.min(s.saturating_add(budget * H));
                    budget -= (end - s).div_ceil(H);
                    let mut va = s & !(H - 1);
                    while va < end {
                        if ctx.machine.pt.is_present(va, Level::Pmd) {
                            read += 1;
                            if ctx.machine.pt.test_and_clear_accessed(va, Level::Pmd) {
                                push_run(&mut self.cur, va >> 12, (va + H) >> 12);
                                self.found += 512;
                                lo = lo.min(va);
                                hi = hi.max(va + H);
                            }
                        }
                        va += H;
                    }
                }
            }
            if flush && lo < hi {
                batches.push((lo, hi));
            }
            self.pass_done += end - s;
            self.cursor = end;
            if end >= ve && Self::next_vma(ctx.machine, end).is_none() {
                return (read, true);
            }
        }
        (read, false)
    }

    /// The reported page runs (sorted, disjoint).
    fn report_runs(&self) -> Vec<(u64, u64)> {
        match self.p.report {
            PteReport::LastPass => self.prev.clone(),
            PteReport::LastCheck => {
                if !self.in_pass {
                    return self.prev.clone();
                }
                let cpage = self.cursor >> 12;
                let mut out = self.cur.clone();
                let i = self.prev.partition_point(|r| r.1 <= cpage);
                for &(s, e) in &self.prev[i..] {
                    push_run(&mut out, s.max(cpage), e);
                }
                out
            }
        }
    }
}

impl Observer for PteScan {
    fn start(&mut self, _ctx: &mut ObserverCtx) -> Result<()> {
        Ok(())
    }

    fn next_event_ns(&self) -> u64 {
        self.next_ns
    }

    fn on_event(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        let now = ctx.now_ns;
        if !self.in_pass {
            self.in_pass = true;
            self.cursor = 0;
            self.pass_start_ns = now;
            self.pass_total = ctx.machine.vmas.values().map(|v| v.len).sum();
            self.pass_done = 0;
            self.cur.clear();
        }
        let core = ctx.core;
        let clock0 = ctx.machine.cores[core].clock_ps.max(now * 1000);
        let mut batches = Vec::new();
        let (read, done) = self.scan_chunk(ctx, &mut batches);
        self.ptes += read;
        let before = *ctx.cpu_ps;
        ctx.charge(read as f64 * self.p.ns_per_pte);
        self.scan_ps += *ctx.cpu_ps - before;
        // Then the flushes, from the observer's core (initiator time is the observer's).
        for (lo, hi) in batches {
            let before = ctx.machine.cores[core].clock_ps;
            ctx.machine.invalidate_range(core, lo, hi);
            *ctx.cpu_ps += ctx.machine.cores[core].clock_ps - before;
            self.flushes += 1;
        }
        // The chunk's work (scan and any flush) ends when the observer's core finishes it.
        let took_ns = ctx.machine.cores[core].clock_ps.saturating_sub(clock0).div_ceil(1000);
        let end = now + took_ns.max(1);
        if done {
            self.in_pass = false;
            self.passes += 1;
            self.last_pass_ns = end - self.pass_start_ns;
            self.prev = std::mem::take(&mut self.cur);
            self.pass_done = self.pass_total;
            self.next_ns = (self.pass_start_ns + self.p.interval.0).max(end);
        } else {
            self.next_ns = end;
        }
        Ok(())
    }

    fn hot_set(&mut self, _start_ns: u64, _end_ns: u64, machine: &Machine) -> HotReport {
        let runs = self.report_runs();
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut vmas = machine.vmas.values().map(|v| (v.start, v.start + v.len)).peekable();
        for (s, e) in runs {
            let (s, e) = (s << 12, e << 12);
            // Skip mappings that end before the run; clip the run to each overlapping one.
            while let Some(&(_, ve)) = vmas.peek() {
                if ve <= s {
                    vmas.next();
                } else {
                    break;
                }
            }
            let mut it = vmas.clone();
            while let Some((vs, ve)) = it.next() {
                if vs >= e {
                    break;
                }
                let (a, b) = (s.max(vs), e.min(ve));
                if a < b {
                    push_run(&mut out, a, b);
                }
            }
        }
        HotReport::Regions(out)
    }

    fn window_columns(&self) -> Vec<(String, f64)> {
        let progress = if self.pass_total == 0 {
            if self.in_pass {
                0.0
            } else {
                (self.passes > 0) as u64 as f64
            }
        } else {
            self.pass_done as f64 / self.pass_total as f64
        };
        vec![("pass_progress".to_string(), progress), ("passes".to_string(), self.passes as f64)]
    }

    fn report_stats(&self, prefix: &str, out: &mut Stats) {
        out.set(format!("{prefix}.passes"), self.passes);
        out.set(format!("{prefix}.ptes_scanned"), self.ptes);
        out.set(format!("{prefix}.pages_found_accessed"), self.found);
        out.set(format!("{prefix}.flushes"), self.flushes);
        out.set(format!("{prefix}.scan_seconds"), self.scan_ps as f64 / 1e12);
        out.set(format!("{prefix}.last_pass_seconds"), self.last_pass_ns as f64 / 1e9);
        out.set(format!("{prefix}.ns_per_pte"), self.p.ns_per_pte);
    }
}
