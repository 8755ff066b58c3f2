//! Windows: closing one ([`Run::close_window`]: ground truth cut, every agent's
//! `on_window`, the hot sets scored, a time-series row and a heatmap row recorded), the
//! time series ([`TimeSeries`]) and the heatmap ([`Heatmap`]), and the counters a row is the
//! difference of.

use super::Run;
use crate::agents::{AgentCtx, Feed, Info, MachineView};
use crate::error::Result;
use crate::hw::CoreCounters;
use crate::os::Machine;
use crate::scoring::optimum::Optimum;
use crate::truth::WindowTruth;
use crate::units::Ps;
use tierlab_core::{page_addr, PAGE_SIZE};

use super::slots::{deliver, Slot};

/// Columns of per-window measurements.
#[derive(Clone, Debug, Default)]
pub struct TimeSeries {
    /// Column names in order.
    pub names: Vec<String>,
    /// Column values, one Vec per name.
    pub columns: Vec<Vec<f64>>,
}

impl TimeSeries {
    fn push_row(&mut self, row: Vec<(String, f64)>) {
        if self.names.is_empty() {
            self.names = row.iter().map(|(n, _)| n.clone()).collect();
            self.columns = vec![Vec::new(); self.names.len()];
        }
        for (i, (_, v)) in row.into_iter().enumerate() {
            self.columns[i].push(v);
        }
    }
    /// A column by name.
    pub fn column(&self, name: &str) -> Option<&[f64]> {
        self.names.iter().position(|n| n == name).map(|i| self.columns[i].as_slice())
    }
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.columns.first().map(|c| c.len()).unwrap_or(0)
    }
}

/// Accesses per address bin per window.
#[derive(Clone, Debug, Default)]
pub struct Heatmap {
    /// First address of each bin.
    pub bin_start: Vec<u64>,
    /// Bytes in each bin.
    pub bin_bytes: Vec<u64>,
    /// Mapping name of each bin.
    pub bin_mapping: Vec<String>,
    /// Window start times, s.
    pub t_start_s: Vec<f64>,
    /// Window end times, s.
    pub t_end_s: Vec<f64>,
    /// counts[window][bin].
    pub counts: Vec<Vec<u64>>,
}

impl Heatmap {
    pub(super) fn layout(machine: &Machine, bins: usize) -> Heatmap {
        let vmas = &machine.os.vmas;
        let total: u64 = vmas.values().map(|v| v.len).sum();
        let mut h = Heatmap::default();
        if total == 0 {
            return h;
        }
        for v in vmas.values() {
            let share = ((v.len as f64 / total as f64) * bins as f64).floor().max(1.0) as u64;
            let pages = tierlab_core::pages_for(v.len);
            let per = pages.div_ceil(share).max(1) * PAGE_SIZE;
            let mut a = v.start;
            while a < v.start + v.len {
                let len = per.min(v.start + v.len - a);
                h.bin_start.push(a);
                h.bin_bytes.push(len);
                h.bin_mapping.push(v.name.clone());
                a += len;
            }
        }
        h
    }

    fn add_window(&mut self, w: &WindowTruth) {
        let mut row = vec![0u64; self.bin_start.len()];
        // The pages are sorted and so are the bins, which do not overlap (the mappings'
        // pieces, none empty): each bin sums the run of pages inside it, found by binary
        // search in the pages after the previous bin's (pages between bins belong to none;
        // the sum runs without a compare per page).
        debug_assert!(self.bin_start.is_sorted() && w.pages.is_sorted_by_key(|p| p.0));
        let mut pages = &w.pages[..];
        for ((&start, &len), out) in self.bin_start.iter().zip(&self.bin_bytes).zip(row.iter_mut()) {
            pages = &pages[pages.partition_point(|q| page_addr(q.0) < start)..];
            let n = pages.partition_point(|q| page_addr(q.0) < start + len);
            *out = pages[..n].iter().map(|q| q.1 as u64).sum();
            pages = &pages[n..];
        }
        self.t_start_s.push(w.start_ns as f64 / 1e9);
        self.t_end_s.push(w.end_ns as f64 / 1e9);
        self.counts.push(row);
    }
}

/// The counters of every core, summed ([`sum_counters`]).
#[derive(Clone, Default)]
pub(super) struct Snapshot {
    c: CoreCounters,
    node_acc: Vec<u64>,
}

pub(super) fn sum_counters(m: &Machine) -> Snapshot {
    let mut s = Snapshot { node_acc: vec![0; m.os.mem.nodes.len()], ..Default::default() };
    for c in &m.hw.cores {
        let k = &c.c;
        s.c.add_accesses(k);
        s.c.writes += k.writes;
        s.c.tlb_misses += k.tlb_misses;
        s.c.l2_tlb_hits += k.l2_tlb_hits;
        s.c.page_faults += k.page_faults;
        s.c.remote_invalidations += k.remote_invalidations;
        for (i, v) in c.node_accesses().iter().enumerate() {
            s.node_acc[i] += v;
        }
    }
    s
}

/// Time the application cores spent on tiering's side effects so far (TLB maintenance
/// received, background work charged to them, hint faults, swap-ins), ps.
pub(super) fn app_overhead_ps(m: &Machine, threads: usize) -> u64 {
    let cores: u64 = m.hw.cores[..threads].iter().map(|c| c.c.background_ps + c.c.tlb_maint_ps).sum();
    cores + m.os.hint.as_ref().map_or(0, |h| h.time_ps()) + m.os.mem.swap.refault_time_ps
}

impl Run {
    /// Whether the run counts ground truth (`report.ground_truth`).
    pub(super) fn counts_truth(&self) -> bool {
        self.scenario.report.ground_truth
    }

    /// Close the window `[start, end)`: ground truth is cut (its windows are in whole ns, the
    /// recording format's unit), the agents' `on_window` run, scores and a row recorded.
    pub(super) fn close_window(&mut self, start: Ps, end: Ps) -> Result<()> {
        let w = self.machine.close_window(self.windows, start.whole_ns(), end.whole_ns());
        if self.counts_truth() {
            self.heatmap.add_window(&w);
        }
        let mut score_cols = Vec::new();
        if self.scorer.active() {
            let workload = &self.workload;
            score_cols.push(
                self.scorer.begin_window(&w, || workload.declared_hot_ranges(start, end).unwrap_or_default()),
            );
        }
        for i in 0..self.agents.len() {
            let mut out = Vec::new();
            {
                let Slot { agent, cpu, wants, .. } = &mut self.agents[i];
                let core = agent.core();
                let mut ctx =
                    AgentCtx::new(end, MachineView::new(&mut self.machine), core, cpu, &mut out, wants);
                agent.on_window(start, end, &mut ctx)?;
            }
            if let Some(k) = self.agents[i].scored {
                for f in &out {
                    if let Feed::HotSet { report, .. } = f {
                        score_cols.extend(self.scorer.score(k, report, end.secs_f64()));
                    }
                }
            }
            self.tap(i, &out);
            deliver(&mut self.agents, &mut self.machine, i, out, end)?;
        }
        let now = sum_counters(&self.machine);
        let d = |a: u64, b: u64| (a - b) as f64;
        let mut row = vec![
            ("window".to_string(), self.windows as f64),
            ("t_start_s".to_string(), start.secs_f64()),
            ("t_end_s".to_string(), end.secs_f64()),
            ("accesses".to_string(), d(now.c.accesses(), self.prev.c.accesses())),
            (
                "reads".to_string(),
                d(now.c.accesses() - now.c.writes, self.prev.c.accesses() - self.prev.c.writes),
            ),
            ("writes".to_string(), d(now.c.writes, self.prev.c.writes)),
        ];
        if self.counts_truth() {
            row.push(("pages_touched".to_string(), w.pages.len() as f64));
            row.push(("bytes_touched".to_string(), tierlab_core::bytes_of(w.pages.len() as u64) as f64));
        }
        row.extend([
            ("tlb_misses".to_string(), d(now.c.tlb_misses, self.prev.c.tlb_misses)),
            ("l2_tlb_hits".to_string(), d(now.c.l2_tlb_hits, self.prev.c.l2_tlb_hits)),
            ("page_faults".to_string(), d(now.c.page_faults, self.prev.c.page_faults)),
            (
                "remote_invalidations".to_string(),
                d(now.c.remote_invalidations, self.prev.c.remote_invalidations),
            ),
        ]);
        let secs = (end - start).secs_f64();
        let acc = d(now.c.accesses(), self.prev.c.accesses());
        row.push(("accesses_per_ms".to_string(), if secs > 0.0 { acc / (secs * 1e3) } else { 0.0 }));
        for (i, n) in self.machine.os.mem.nodes.iter().enumerate() {
            row.push((format!("node.{}.accesses", n.cfg.name), d(now.node_acc[i], self.prev.node_acc[i])));
            row.push((
                format!("node.{}.resident_bytes", n.cfg.name),
                tierlab_core::bytes_of(n.used_pages) as f64,
            ));
        }
        row.extend(score_cols);
        if let Some(o) = &mut self.optimum {
            let (f, sl) = (o.fast as usize, o.slow as usize);
            let run_fast = now.node_acc[f] - self.prev.node_acc[f];
            let c0 = &self.machine.hw.cores[0];
            let delta = c0.cost_to(sl as u8) as f64 - c0.cost_to(f as u8) as f64;
            let ov = app_overhead_ps(&self.machine, self.threads);
            let (b, r, a) = o.add_window(&w, run_fast, delta, ov.saturating_sub(self.prev_overhead));
            self.prev_overhead = ov;
            row.extend(Optimum::window_columns(b, r, a));
        }
        let threads = self.threads;
        let truth = self.counts_truth();
        let view = MachineView::new(&mut self.machine);
        for s in &mut self.agents {
            let info = Info { view: &view, cpu: s.cpu, threads };
            row.extend(s.agent.window_columns(&info));
            if let Some(fast) = s.agent.fast_node().filter(|_| truth) {
                let hot = self.scorer.hot_bytes_where(&w, |va| view.node_of(va) == Some(fast));
                row.push(("tiering.fast_hot_bytes".to_string(), hot));
            }
        }
        if let Some((i, a)) = &mut self.audit {
            let span = |va| view.page_size_of(va).map_or(1, |s| s.base_pages());
            a.close_window(self.agents[*i].agent.decisions(), &w, end, span);
        }
        if let Some((c, _)) = &mut self.dataset {
            let log = self.audit.as_ref().map_or(&[][..], |(i, _)| self.agents[*i].agent.decisions());
            c.close_window(&w, &self.machine, log, end)?;
        }
        row.extend(self.workload.window_columns(start, end));
        self.timeseries.push_row(row);
        self.prev = now;
        self.windows += 1;
        self.machine.recycle_window(w);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The heatmap's merge of sorted pages and bins gives what a search per page gives,
    /// with gaps between bins, pages before the first and after the last bin.
    #[test]
    fn heatmap_merge_matches_search_per_page() {
        let mut h = Heatmap::default();
        for (start, bytes) in [(1u64 << 20, 3 * PAGE_SIZE), (2 << 20, 5 * PAGE_SIZE), (9 << 20, PAGE_SIZE)] {
            for k in 0..4 {
                h.bin_start.push(start + k * bytes);
                h.bin_bytes.push(bytes);
                h.bin_mapping.push(String::new());
            }
        }
        let mut x = 7u64;
        let mut pages: Vec<(u64, u32)> = (0..3000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (tierlab_core::vpn((x >> 40) % (12 << 20)), (x & 7) as u32 + 1)
            })
            .collect();
        pages.sort_unstable();
        pages.dedup_by_key(|p| p.0);
        let mut expect = vec![0u64; h.bin_start.len()];
        for &(vpn, n) in &pages {
            let addr = page_addr(vpn);
            let i = h.bin_start.partition_point(|&s| s <= addr);
            if i > 0 && addr < h.bin_start[i - 1] + h.bin_bytes[i - 1] {
                expect[i - 1] += n as u64;
            }
        }
        assert!(expect.iter().filter(|&&c| c > 0).count() > 6, "{expect:?}");
        h.add_window(&WindowTruth { index: 0, start_ns: 0, end_ns: 1, pages });
        assert_eq!(h.counts, vec![expect]);
    }
}
