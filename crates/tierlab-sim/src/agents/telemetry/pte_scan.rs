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
//! chunk cost (divided by `max_cpu` when the scanner may use only part of its core). A pass
//! starts `interval` after the previous one started, or at once when the previous pass took
//! longer (at terabyte scale the scanner is then always busy, which is the point of
//! Telescope's comparison: 1 TB = 256 Mi PTEs, over a minute per pass). The first pass starts
//! at `interval` ("clear, wait, check": bits start clear at time 0).
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
use tierlab_core::param::params;
use tierlab_core::{page_addr, vpn, PAGE_SIZE};

use super::*;
use crate::agents::{MachineView, Ps};
use crate::error::Result;
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

tierlab_core::choice_param!(PteReport);

/// Parameters of `pte-scan`.
#[params]
#[derive(Clone, Debug)]
pub struct PteScanParams {
    /// Time between the starts of two passes; a pass that takes longer is followed at once
    /// by the next.
    #[param(
        default = Duration(1_000_000_000),
        assumed = "Telescope's comparison scores 1 s windows (reference/telescope.md): one pass per window"
    )]
    pub interval: Duration,
    /// Cost of reading (and clearing) one PTE.
    #[param(
        default = 250.0,
        range = "[0, 1e9]",
        unit = "ns",
        calibrated = "papers/telescope-slides.txt: 1 TB memory = 256M pages (4K each), one full scan takes \
                      > 1 minute (> 234 ns per PTE; 250 ns gives 67 s per TiB)"
    )]
    pub ns_per_pte: f64,
    /// PTE slots (of address space: 4 KiB each, 2 MiB in huge-page mappings) scanned per
    /// event.
    #[param(
        default = 65_536,
        range = "[1, 1073741824]",
        unit = "PTEs",
        assumed = "a simulation step: 256 MiB of 4 KiB pages, 16 ms of scanning at 250 ns/PTE"
    )]
    pub chunk_ptes: u64,
    /// Flush the TLBs after clearing (a shootdown per mapping and chunk).
    #[param(
        default = false,
        sourced = "reference/page-walk-caches.md: Linux x86 ptep_clear_flush_young() clears A without any \
                   TLB flush"
    )]
    pub flush: bool,
    /// What is reported hot: `last-check` or `last-pass`.
    #[param(default, setting)]
    pub report: PteReport,
    /// Share of its core the scanner may take: after a chunk that took `t`, the next starts
    /// `t / max_cpu` later. Lower it when the scanner shares a core with the application.
    #[param(
        default = 1.0,
        range = "(0, 1]",
        unit = "fraction of one core",
        assumed = "flat out, as \"over a minute per TB\" assumes"
    )]
    pub max_cpu: f64,
}

impl TelemetryParams for PteScanParams {
    fn build(&self, _label: &str, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
        if self.interval.0 == 0 {
            return Err(ctx.err("interval", "must be > 0"));
        }
        Ok(Box::new(PteScan::new(self.clone())))
    }
}

use crate::agents::push_run;

/// The `pte-scan` observer.
pub struct PteScan {
    p: PteScanParams,
    next: Ps,
    in_pass: bool,
    /// Next address to scan in the current pass.
    cursor: u64,
    pass_start: Ps,
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
    scan_time: Ps,
    last_pass: Ps,
}

impl PteScan {
    fn new(p: PteScanParams) -> Self {
        PteScan {
            next: p.interval.ps(),
            p,
            in_pass: false,
            cursor: 0,
            pass_start: Ps::ZERO,
            cur: Vec::new(),
            prev: Vec::new(),
            pass_total: 0,
            pass_done: 0,
            passes: 0,
            ptes: 0,
            found: 0,
            flushes: 0,
            scan_time: Ps::ZERO,
            last_pass: Ps::ZERO,
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
    fn next_vma(m: &MachineView, cursor: u64) -> Option<(u64, u64, PageSize)> {
        if let Some((_, v)) = m.vmas().range(..=cursor).next_back() {
            if cursor < v.start + v.len {
                return Some((v.start, v.start + v.len, v.page_size));
            }
        }
        m.vmas().range(cursor..).next().map(|(_, v)| (v.start, v.start + v.len, v.page_size))
    }

    /// Scan one chunk from the cursor; returns (PTEs read, whether the pass is complete) and
    /// fills `batches` with the spans to flush (one per mapping with cleared bits).
    fn scan_chunk(&mut self, ctx: &mut ObserverCtx, batches: &mut Vec<(u64, u64)>) -> (u64, bool) {
        let mut budget = self.p.chunk_ptes;
        let mut read = 0u64;
        let flush = self.p.flush;
        while budget > 0 {
            let Some((vs, ve, psz)) = Self::next_vma(&ctx.machine, self.cursor) else {
                return (read, true);
            };
            let s = self.cursor.max(vs);
            let h = psz.bytes();
            let end = if psz == PageSize::Base4K {
                let end = ve.min(s.saturating_add(budget * PAGE_SIZE));
                budget -= (end - s) / PAGE_SIZE;
                end
            } else {
                // Huge pages (2 MiB or 1 GiB): one leaf entry per page.
                let end = ve.min(s.saturating_add(budget * h));
                budget -= (end - s).div_ceil(h);
                end
            };
            let Some(r) = ctx.machine.scan_accessed(s, end, psz, true) else { return (read, true) };
            read += r.read;
            self.found += r.pages;
            for (a, b) in r.runs {
                push_run(&mut self.cur, a, b);
            }
            let (lo, hi) = (r.lo, r.hi);
            if flush && lo < hi {
                batches.push((lo, hi));
            }
            self.pass_done += end - s;
            self.cursor = end;
            if end >= ve && Self::next_vma(&ctx.machine, end).is_none() {
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
                let cpage = vpn(self.cursor);
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
    fn start(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        if ctx.machine.page_tables().is_none() {
            return Err(crate::SimError::runtime(
                "pte-scan reads Accessed bits of radix page tables, which this memory backend does not have",
            ));
        }
        Ok(())
    }

    fn next_event(&self) -> Ps {
        self.next
    }

    fn on_event(&mut self, ctx: &mut ObserverCtx) -> Result<()> {
        let now = ctx.now;
        if !self.in_pass {
            self.in_pass = true;
            self.cursor = 0;
            self.pass_start = now;
            self.pass_total = ctx.machine.vmas().values().map(|v| v.len).sum();
            self.pass_done = 0;
            self.cur.clear();
        }
        let core = ctx.core;
        let clock0 = ctx.machine.core_clock(core).max(now);
        let mut batches = Vec::new();
        let (read, done) = self.scan_chunk(ctx, &mut batches);
        self.ptes += read;
        let t = Ps::from_ns_f64(read as f64 * self.p.ns_per_pte);
        ctx.charge(t);
        self.scan_time += t;
        // Then the flushes, from the observer's core (initiator time is the observer's).
        for (lo, hi) in batches {
            let before = ctx.machine.core_clock(core);
            ctx.machine.invalidate_range(core, lo, hi);
            *ctx.cpu += ctx.machine.core_clock(core) - before;
            self.flushes += 1;
        }
        // The chunk's work (scan and any flush) ends when the observer's core finishes it
        // (stretched by `max_cpu`), and at least 1 ns after it started.
        let took = ctx.machine.core_clock(core).saturating_sub(clock0);
        let end = now + Ps::from_ns_f64(took.ns_f64() / self.p.max_cpu).max(Ps::NS);
        if done {
            self.in_pass = false;
            self.passes += 1;
            self.last_pass = end - self.pass_start;
            self.prev = std::mem::take(&mut self.cur);
            self.pass_done = self.pass_total;
            self.next = (self.pass_start + self.p.interval.ps()).max(end);
        } else {
            self.next = end;
        }
        Ok(())
    }

    fn hot_set(&mut self, _start: Ps, _end: Ps, machine: &MachineView) -> HotReport {
        let runs = self.report_runs();
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut vmas = machine.vmas().values().map(|v| (v.start, v.start + v.len)).peekable();
        for (s, e) in runs {
            let (s, e) = (page_addr(s), page_addr(e));
            // Skip mappings that end before the run; clip the run to each overlapping one.
            while let Some(&(_, ve)) = vmas.peek() {
                if ve <= s {
                    vmas.next();
                } else {
                    break;
                }
            }
            for (vs, ve) in vmas.clone() {
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
        out.set(format!("{prefix}.scan_seconds"), self.scan_time.secs_f64());
        out.set(format!("{prefix}.last_pass_seconds"), self.last_pass.secs_f64());
        out.set(format!("{prefix}.ns_per_pte"), self.p.ns_per_pte);
    }
}

impl crate::params::SharedDefaults<TelemetryShared> for PteScanParams {
    fn shared_defaults() -> TelemetryShared {
        TelemetryShared::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::pagetable::Level;
    use crate::os::{Machine, MachineConfig, Vma};
    use crate::units::ByteSize;
    use crate::workload::{AddressSpace, MapOptions};
    use tierlab_core::Access;

    /// Two cores: the application on core 0, the scanner on core 1.
    fn machine() -> Machine {
        let mut cfg = MachineConfig { cores: 2, ..MachineConfig::default() };
        cfg.nodes[1].capacity = ByteSize(2 << 40);
        let mut m = Machine::new(&cfg);
        m.os.mm_cpumask[0] = true;
        m
    }

    fn scanner(text: &str) -> PteScan {
        let p: PteScanParams = toml::from_str(text).unwrap();
        let ctx = TelemetryBuildCtx { cores: 2, threads: 1, ..Default::default() };
        p.build("pte-scan", &ctx).unwrap(); // validation
        PteScan::new(p)
    }

    /// Run events until `passes` passes completed; returns the observer's CPU time.
    fn run_passes(o: &mut PteScan, m: &mut Machine, passes: u64) -> Ps {
        let mut cpu = Ps::ZERO;
        while o.passes < passes {
            let now = o.next_event();
            o.on_event(&mut crate::agents::testing::ctx(m, now, 1, &mut cpu)).unwrap();
            assert!(o.next_event() > now);
        }
        cpu
    }

    fn pages(r: &HotReport) -> Vec<u64> {
        match r {
            HotReport::Regions(v) => v.iter().flat_map(|&(s, e)| (s >> 12)..(e >> 12)).collect(),
            HotReport::Pages(p) => p.clone(),
        }
    }

    #[test]
    fn finds_exactly_the_touched_pages_and_clears_them() {
        let mut m = machine();
        let a = m.mmap(300 * 4096, MapOptions::named("a")).unwrap();
        let b = m.mmap(5 * 4096, MapOptions::named("b")).unwrap();
        let touched = [a, a + 4096, a + 63 * 4096, a + 64 * 4096, a + 299 * 4096, b + 2 * 4096];
        for &t in &touched {
            m.access(0, Access::read(t + 8)).unwrap();
        }
        let mut o = scanner("interval = \"10ms\"");
        run_passes(&mut o, &mut m, 1);
        let want: Vec<u64> = touched.iter().map(|t| t >> 12).collect();
        assert_eq!(pages(&o.hot_set(Ps::ZERO, Ps::from_ns(1), &MachineView::new(&mut m))), want);
        assert_eq!(o.found, 6);
        // The PTE slots of the mappings' ranges in present PTE tables: 300 + 5.
        assert_eq!(o.ptes, 305);
        for &t in &touched {
            assert!(!m.test_accessed(t, Level::Pte), "cleared");
        }
        // Nothing touched since: the next pass finds nothing (last-check reports it).
        run_passes(&mut o, &mut m, 2);
        assert_eq!(pages(&o.hot_set(Ps::ZERO, Ps::from_ns(1), &MachineView::new(&mut m))), Vec::<u64>::new());
    }

    #[test]
    fn charges_ns_per_pte_for_every_pte_read() {
        let mut m = machine();
        // 3 MiB populated: one bulk PMD entry (512) + 256 PTEs mapped page by page, in two
        // PTE-table spans; read slots = 512 + 256.
        let opts = MapOptions { populate: true, ..MapOptions::named("h") };
        m.mmap(3 << 20, opts).unwrap();
        let mut o = scanner("interval = \"1s\"\nns_per_pte = 100.0\nchunk_ptes = 100");
        let cpu = run_passes(&mut o, &mut m, 1);
        assert_eq!(o.ptes, 768);
        assert_eq!(cpu, Ps::from_ns(768 * 100), "ns_per_pte per PTE");
        assert_eq!(m.hw.cores[1].c.background_ps, cpu.ps());
        // Chunks of 100 slots: the pass spans 768 slots, so 8 events, and lasted 76.8 us.
        assert_eq!(o.last_pass, Ps::from_ns(76_800));
        // At most a quarter of the core: the same pass spans four times as long.
        let mut m2 = machine();
        m2.mmap(3 << 20, MapOptions { populate: true, ..MapOptions::named("h") }).unwrap();
        let mut paced = scanner("interval = \"1s\"\nns_per_pte = 100.0\nchunk_ptes = 100\nmax_cpu = 0.25");
        assert_eq!(run_passes(&mut paced, &mut m2, 1), cpu);
        assert_eq!(paced.last_pass, Ps::from_ns(4 * 76_800));
        let mut s = Stats::new();
        o.report_stats("t", &mut s);
        assert_eq!(s.get_u64("t.ptes_scanned"), 768);
    }

    #[test]
    fn full_pass_of_a_bulk_terabyte_takes_over_a_minute_and_materializes_nothing() {
        let mut m = machine();
        let opts = MapOptions { populate: true, ..MapOptions::named("heap") };
        let heap = m.mmap(1 << 40, opts).unwrap();
        let hot = [heap + (7 << 30) + 5 * 4096, heap + (900 << 30), heap + (1 << 40) - 4096];
        for &h in &hot {
            m.access(0, Access::write(h)).unwrap();
        }
        let tables = m.page_tables_mut().unwrap().tables().1;
        let materialized = m.page_tables_mut().unwrap().stats.materialized;
        assert_eq!(materialized, 3);
        let mut o = scanner("");
        let cpu = run_passes(&mut o, &mut m, 1);
        assert_eq!(m.page_tables_mut().unwrap().tables().1, tables, "the scan created no PTE table");
        assert_eq!(m.page_tables_mut().unwrap().stats.materialized, materialized);
        assert_eq!(o.ptes, 1 << 28, "256 Mi PTEs");
        let secs = o.last_pass.secs_f64();
        assert!(secs > 60.0 && (secs - 67.108864).abs() < 1e-6, "{secs}");
        assert_eq!(cpu, Ps::from_ns((1u64 << 28) * 250));
        assert_eq!(
            pages(&o.hot_set(Ps::ZERO, Ps::from_ns(1), &MachineView::new(&mut m))),
            hot.iter().map(|h| h >> 12).collect::<Vec<_>>()
        );
        // It proceeded in simulated time: the next pass starts right after (pass > interval).
        assert_eq!(o.next_event(), Ps::from_ns(1_000_000_000) + o.last_pass);
    }

    #[test]
    fn window_columns_show_pass_progress() {
        let mut m = machine();
        m.mmap(4 << 20, MapOptions { populate: true, ..MapOptions::named("h") }).unwrap();
        let mut o = scanner("chunk_ptes = 256");
        let mut cpu = Ps::ZERO;
        let cols = |o: &PteScan| o.window_columns().into_iter().map(|(_, v)| v).collect::<Vec<_>>();
        assert_eq!(cols(&o), vec![0.0, 0.0]);
        for k in 1..=4 {
            let now = o.next_event();
            o.on_event(&mut crate::agents::testing::ctx(&mut m, now, 1, &mut cpu)).unwrap();
            let want_passes = (k == 4) as u64 as f64;
            assert_eq!(cols(&o), vec![k as f64 / 4.0, want_passes], "event {k}");
        }
    }

    #[test]
    fn without_flush_tlb_hits_are_missed_with_flush_they_are_seen() {
        for flush in [false, true] {
            let mut m = machine();
            let a = m.mmap(16 * 4096, MapOptions::named("a")).unwrap();
            // Two pages in the TLB.
            m.access(0, Access::read(a)).unwrap();
            m.access(0, Access::read(a + 4096)).unwrap();
            let mut o = scanner(&format!("interval = \"1ms\"\nflush = {flush}"));
            run_passes(&mut o, &mut m, 1);
            assert_eq!(pages(&o.hot_set(Ps::ZERO, Ps::from_ns(1), &MachineView::new(&mut m))).len(), 2);
            // Touched again: TLB hits unless the scan flushed.
            m.access(0, Access::read(a + 64)).unwrap();
            m.access(0, Access::read(a + 4096 + 64)).unwrap();
            run_passes(&mut o, &mut m, 2);
            let found = pages(&o.hot_set(Ps::ZERO, Ps::from_ns(1), &MachineView::new(&mut m))).len();
            if flush {
                assert_eq!(found, 2);
                assert_eq!(o.flushes, 2, "one shootdown per pass with cleared bits");
                assert_eq!(m.hw.cores[1].c.shootdowns_sent, 2);
                assert_eq!(m.hw.cores[0].c.remote_invalidations, 2);
            } else {
                assert_eq!(found, 0, "cleared bits hidden by the TLB");
                assert_eq!(m.hw.cores[0].c.remote_invalidations, 0);
            }
        }
    }

    #[test]
    fn huge_pages_are_scanned_at_the_pmd() {
        let mut m = machine();
        let opts = MapOptions { page_size: Some(PageSize::Huge2M), ..MapOptions::named("h") };
        let a = m.mmap(8 << 20, opts).unwrap();
        m.access(0, Access::read(a + (2 << 20) + 100)).unwrap();
        let mut o = scanner("interval = \"1ms\"");
        run_passes(&mut o, &mut m, 1);
        assert_eq!(o.ptes, 1, "one present PMD leaf");
        let want: Vec<u64> = ((a + (2 << 20)) >> 12..(a + (4 << 20)) >> 12).collect();
        assert_eq!(pages(&o.hot_set(Ps::ZERO, Ps::from_ns(1), &MachineView::new(&mut m))), want);
        assert!(!m.test_accessed(a + (2 << 20), Level::Pmd));
    }

    #[test]
    fn gigantic_pages_are_scanned_at_the_pud() {
        let mut m = machine();
        let opts = MapOptions { page_size: Some(PageSize::Huge1G), ..MapOptions::named("g") };
        let a = m.mmap(2 << 30, opts).unwrap();
        m.access(0, Access::read(a + (1 << 30) + 100)).unwrap();
        let mut o = scanner("interval = \"1ms\"");
        run_passes(&mut o, &mut m, 1);
        assert_eq!(o.ptes, 1, "one present PUD leaf");
        assert_eq!(o.found, 1 << 18, "262,144 base pages");
        let hot = pages(&o.hot_set(Ps::ZERO, Ps::from_ns(1), &MachineView::new(&mut m)));
        assert_eq!((hot.len(), hot[0]), (1 << 18, (a + (1 << 30)) >> 12));
        assert!(!m.test_accessed(a + (1 << 30), Level::Pud));
    }

    #[test]
    fn last_check_mixes_passes_at_the_cursor_last_pass_waits() {
        for report in ["last-check", "last-pass"] {
            let mut m = machine();
            let a = m.mmap(4 << 20, MapOptions { populate: true, ..MapOptions::named("h") }).unwrap();
            let (lo, hi) = (a + 4096, a + (3 << 20));
            m.access(0, Access::read(lo)).unwrap();
            m.access(0, Access::read(hi)).unwrap();
            let mut o = scanner(&format!("interval = \"1ms\"\nchunk_ptes = 512\nreport = \"{report}\""));
            let mut cpu = Ps::ZERO;
            let mut step = |o: &mut PteScan, m: &mut Machine| {
                let now = o.next_event();
                o.on_event(&mut crate::agents::testing::ctx(m, now, 1, &mut cpu)).unwrap();
            };
            let last_check = report == "last-check";
            // Pass 1 half done (one PMD of two): last-check knows `lo`, last-pass nothing yet.
            step(&mut o, &mut m);
            let want = if last_check { vec![lo >> 12] } else { vec![] };
            assert_eq!(
                pages(&o.hot_set(Ps::ZERO, Ps::from_ns(1), &MachineView::new(&mut m))),
                want,
                "{report}"
            );
            step(&mut o, &mut m);
            assert_eq!(o.passes, 1);
            assert_eq!(
                pages(&o.hot_set(Ps::ZERO, Ps::from_ns(1), &MachineView::new(&mut m))),
                vec![lo >> 12, hi >> 12],
                "{report}"
            );
            // Pass 2 half done over untouched memory: last-check drops `lo` (checked, clear)
            // and keeps `hi` (last checked by pass 1); last-pass still reports pass 1.
            step(&mut o, &mut m);
            let want = if last_check { vec![hi >> 12] } else { vec![lo >> 12, hi >> 12] };
            assert_eq!(
                pages(&o.hot_set(Ps::ZERO, Ps::from_ns(1), &MachineView::new(&mut m))),
                want,
                "{report}"
            );
            step(&mut o, &mut m);
            assert_eq!(
                pages(&o.hot_set(Ps::ZERO, Ps::from_ns(1), &MachineView::new(&mut m))),
                Vec::<u64>::new(),
                "{report}"
            );
        }
    }

    #[test]
    fn reports_are_clipped_to_live_mappings() {
        let mut m = machine();
        let a = m.mmap(8 * 4096, MapOptions::named("a")).unwrap();
        let b = m.mmap(8 * 4096, MapOptions::named("b")).unwrap();
        m.access(0, Access::read(a)).unwrap();
        m.access(0, Access::read(b)).unwrap();
        let mut o = scanner("interval = \"1ms\"");
        run_passes(&mut o, &mut m, 1);
        m.munmap(a).unwrap();
        assert_eq!(
            o.hot_set(Ps::ZERO, Ps::from_ns(1), &MachineView::new(&mut m)),
            HotReport::Regions(vec![(b, b + 4096)])
        );
        let _: Option<&Vma> = m.vma_of(b);
    }

    #[test]
    fn in_a_scenario_it_finds_the_hot_set_deterministically() {
        let text = r#"
seed = 7
duration = "1s"
window = "125ms"
[machine]
cores = 2
[workload]
kind = "hotset"
heap_size = "1GiB"
hot_size = "8MiB"
needles = 8
[[telemetry]]
kind = "pte-scan"
interval = "125ms"
flush = true
"#;
        let run = || {
            let src =
                crate::scenario::Source { text: text.into(), file: "t.toml".into(), base_dir: ".".into() };
            let sc = crate::scenario::load(&src, &[], None).unwrap();
            crate::driver::Simulation::new(sc, &src, None)
                .unwrap()
                .run(&mut |_| crate::driver::Control::Continue)
                .unwrap()
        };
        let a = run();
        let b = run();
        assert_eq!(a.stats, b.stats);
        assert_eq!(a.timeseries.columns, b.timeseries.columns);
        let prec = a.timeseries.column("telemetry.pte-scan.precision").unwrap();
        let rec = a.timeseries.column("telemetry.pte-scan.recall").unwrap();
        assert_eq!(rec.len(), 8);
        // From the second window on, every window sees a full pass (65 ms per 1 GiB).
        for w in 1..8 {
            assert!(prec[w] > 0.99 && rec[w] > 0.99, "window {w}: {} {}", prec[w], rec[w]);
        }
        let g = |k: &str| a.stats.get(&format!("telemetry.pte-scan.{k}")).unwrap().as_f64();
        assert_eq!(g("passes"), 7.0);
        assert!((g("last_pass_seconds") - 262_144.0 * 250e-9).abs() < 1e-3);
        // Its CPU time is the scan plus the initiator side of its shootdowns.
        assert!(g("cpu_seconds") >= g("ptes_scanned") * 250e-9);
        assert!(g("flushes") >= 7.0);
    }

    #[test]
    fn parameters_are_checked() {
        let ctx = TelemetryBuildCtx { cores: 2, threads: 1, index: 3, ..Default::default() };
        let bad = |t: &str| {
            let p: PteScanParams = toml::from_str(t).unwrap();
            p.build("pte-scan", &ctx).err().unwrap().to_string()
        };
        assert!(bad("interval = 0").contains("telemetry[3].interval"));
        for (text, field, range) in [
            ("chunk_ptes = 0", "chunk_ptes", "[1, 1073741824]"),
            ("chunk_ptes = 1073741825", "chunk_ptes", "[1, 1073741824]"),
            ("ns_per_pte = -1.0", "ns_per_pte", "[0, 1000000000]"),
            ("max_cpu = 0.0", "max_cpu", "(0, 1]"),
        ] {
            let e = load_error(&format!("kind = \"pte-scan\"\n{text}"));
            assert!(e.contains(&format!("telemetry[0].{field}")) && e.contains(range), "{text}: {e}");
        }
        assert!(toml::from_str::<PteScanParams>("nspte = 1").is_err(), "unknown fields rejected");
        let p: PteScanParams = toml::from_str("").unwrap();
        let cfg: TelemetryConfig = toml::from_str("kind = \"pte-scan\"").unwrap();
        assert_eq!(cfg.label(), "pte-scan");
        assert_eq!(
            (p.ns_per_pte, p.chunk_ptes, p.flush, p.interval.0),
            (250.0, 65_536, false, 1_000_000_000)
        );
    }
}
