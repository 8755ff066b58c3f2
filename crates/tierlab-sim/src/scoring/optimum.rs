//! Distance from the optimum: an offline bound on what tiering could have gained in a run,
//! computed from the run's ground truth (exact per-page access counts per window).
//!
//! # The bound (`optimum.*`)
//! For every window `w` (the epoch), with `a_p(w)` the accesses to 4 KiB page `p` in `w`
//! and `C` the fast node's capacity in pages:
//! - `F*(w)` = the largest number of the window's accesses a fast tier of `C` pages can
//!   serve: the sum of the `C` largest `a_p(w)`;
//! - `F(w)` = the accesses the run's fast node actually served in `w`;
//! - the time the bound saves over the run: `(F*(w) - F(w)) x delta(w)`, where `delta(w)` is
//!   the per-access time difference between the slow and the fast node under the cost model
//!   at the window's end (memory latency times the cache-miss share; with loaded latency,
//!   the loaded latencies then), plus every cycle the run's application cores spent on
//!   tiering's side effects: TLB shootdowns and invalidations received, background work
//!   charged to them (PEBS interrupts, migrations done in fault context, scanners), NUMA hint
//!   faults and swap-ins after DAMOS `pageout`.
//!
//! It **assumes**: the same accesses in the same order (the workload's work does not depend
//! on timing: a closed-loop client sends the same requests, only faster); a placement that
//! changes only at window boundaries, with migrations that are free and unlimited (no copy,
//! no shootdown, no rate limit); every page movable on its own (2 MiB pages split into base
//! pages); access time additive, `delta(w)` per access moved to the fast tier; the time
//! saved spread evenly over the application threads. Under these assumptions no policy
//! whose placement is fixed within each window does better, whatever its migration budget:
//! `optimum.app_seconds <= run.app_seconds`. A policy that migrates inside a window could in
//! principle serve more than `F*(w)` of its accesses from the fast tier; with windows of a
//! second and hot sets that change more slowly this does not happen in the built-in
//! scenarios (the tests check the bound against every policy of `tiering-kv`'s setup).
//!
//! Reported: `optimum.accesses`, `optimum.fast_accesses` (sum of `F*`),
//! `optimum.run_fast_accesses` (sum of `F`), their shares, `optimum.saved_seconds` and
//! `optimum.overhead_seconds` (per application thread), `optimum.app_seconds` (the run's
//! application time minus both) and `optimum.speedup` (`run.app_seconds /
//! optimum.app_seconds`: for a closed-loop workload, the bound's throughput is the run's
//! times this; its latencies the run's divided by it). Per window: `optimum.fast_share`
//! and `optimum.run_fast_share`.

use crate::stats::Stats;
use crate::truth::WindowTruth;

/// The bound's accumulator for one run.
#[derive(Clone, Debug)]
pub struct Optimum {
    /// Fast node.
    pub fast: u8,
    /// Slow node.
    pub slow: u8,
    /// Fast node capacity, 4 KiB pages.
    pub capacity_pages: u64,
    /// Accesses of every window.
    pub accesses: u64,
    /// Sum of `F*(w)`.
    pub bound_fast: u64,
    /// Sum of `F(w)`.
    pub run_fast: u64,
    /// Sum of `(F*(w) - F(w)) x delta(w)` over the application cores, ps (may be negative in
    /// a window where the run beat the epoch bound).
    pub saved_ps: f64,
    /// Side-effect time on the application cores, ps.
    pub overhead_ps: u64,
    scratch: Vec<u32>,
}

impl Optimum {
    /// A bound for a fast node `fast` of `capacity_pages` pages in front of `slow`.
    pub fn new(fast: u8, slow: u8, capacity_pages: u64) -> Self {
        Optimum {
            fast,
            slow,
            capacity_pages,
            accesses: 0,
            bound_fast: 0,
            run_fast: 0,
            saved_ps: 0.0,
            overhead_ps: 0,
            scratch: Vec::new(),
        }
    }

    /// The largest number of `w`'s accesses `capacity` pages can serve.
    pub fn best_fast(&mut self, w: &WindowTruth, capacity: u64) -> u64 {
        let c = capacity.min(w.pages.len() as u64) as usize;
        if c == w.pages.len() {
            return w.accesses();
        }
        if c == 0 {
            return 0;
        }
        self.scratch.clear();
        self.scratch.extend(w.pages.iter().map(|p| p.1));
        self.scratch.select_nth_unstable_by(c - 1, |a, b| b.cmp(a));
        self.scratch[..c].iter().map(|&n| n as u64).sum()
    }

    /// Account window `w`: the run's fast-node accesses in it, the per-access time
    /// difference slow - fast (ps) and the side-effect time on the application cores (ps).
    /// Returns `(F*(w), F(w), accesses)`.
    pub fn add_window(
        &mut self,
        w: &WindowTruth,
        run_fast: u64,
        delta_ps: f64,
        overhead_ps: u64,
    ) -> (u64, u64, u64) {
        let acc = w.accesses();
        let best = self.best_fast(w, self.capacity_pages);
        let run_fast = run_fast.min(acc);
        self.accesses += acc;
        self.bound_fast += best;
        self.run_fast += run_fast;
        self.saved_ps += (best as f64 - run_fast as f64) * delta_ps;
        self.overhead_ps += overhead_ps;
        (best, run_fast, acc)
    }

    /// Per-window columns for `(F*, F, accesses)`.
    pub fn window_columns(best: u64, run_fast: u64, acc: u64) -> Vec<(String, f64)> {
        let share = |x: u64| if acc == 0 { 0.0 } else { x as f64 / acc as f64 };
        vec![("optimum.fast_share".into(), share(best)), ("optimum.run_fast_share".into(), share(run_fast))]
    }

    /// The application time the bound needs for the run's work, s, given the run's
    /// (`app_seconds`, over `threads` application threads).
    pub fn app_seconds(&self, app_seconds: f64, threads: usize) -> f64 {
        let t = threads.max(1) as f64;
        let cut = (self.saved_ps + self.overhead_ps as f64) / 1e12 / t;
        (app_seconds - cut).max(app_seconds * 1e-6)
    }

    /// Run-level stats under `optimum.`.
    pub fn report_stats(&self, app_seconds: f64, threads: usize, out: &mut Stats) {
        let t = threads.max(1) as f64;
        let share = |x: u64| if self.accesses == 0 { 0.0 } else { x as f64 / self.accesses as f64 };
        out.set("optimum.fast_node", self.fast as u64);
        out.set("optimum.fast_capacity_pages", self.capacity_pages);
        out.set("optimum.accesses", self.accesses);
        out.set("optimum.fast_accesses", self.bound_fast);
        out.set("optimum.run_fast_accesses", self.run_fast);
        out.set("optimum.fast_share", share(self.bound_fast));
        out.set("optimum.run_fast_share", share(self.run_fast));
        out.set("optimum.saved_seconds", self.saved_ps / 1e12 / t);
        out.set("optimum.overhead_seconds", self.overhead_ps as f64 / 1e12 / t);
        let opt = self.app_seconds(app_seconds, threads);
        out.set("optimum.app_seconds", opt);
        out.set("optimum.speedup", if opt > 0.0 { app_seconds / opt } else { 1.0 });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(counts: &[u32]) -> WindowTruth {
        WindowTruth {
            index: 0,
            start_ns: 0,
            end_ns: 1,
            pages: counts.iter().enumerate().map(|(i, &n)| (i as u64, n)).collect(),
        }
    }

    #[test]
    fn the_best_fast_set_is_the_top_c_pages() {
        let mut o = Optimum::new(0, 1, 2);
        let w = window(&[5, 1, 9, 3, 7]);
        assert_eq!(o.best_fast(&w, 2), 16);
        assert_eq!(o.best_fast(&w, 0), 0);
        assert_eq!(o.best_fast(&w, 10), 25);
        // 10 ns saved per access moved; the run served 5 from the fast node.
        let (b, r, a) = o.add_window(&w, 5, 10_000.0, 2_000);
        assert_eq!((b, r, a), (16, 5, 25));
        assert_eq!(o.saved_ps, 110_000.0);
        // One thread, 1 ms of application time: the bound needs 1 ms - 112 ns.
        let s = o.app_seconds(1e-3, 1);
        assert!((s - (1e-3 - 112e-9)).abs() < 1e-15, "{s}");
    }
}
