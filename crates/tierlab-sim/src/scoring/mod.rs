//! Scoring: the only reader of ground truth.
//!
//! At each window end the driver hands the closed window's exact counts
//! ([`crate::truth::WindowTruth`]) to the [`Scorer`], which turns them into the truly hot set
//! (by [`TruthRule`]) and scores every telemetry technique's reported hot set against it in
//! bytes (precision = true positive / reported, recall = true positive / truly hot), and
//! reports, for a tiering run, how many of the fast node's bytes were truly hot.

pub mod migrations;
pub mod optimum;

use serde::{Deserialize, Serialize};
use tierlab_core::param::params;
use tierlab_core::{bytes_of, page_addr, PAGE_SIZE};

use crate::agents::HotReport;
use crate::stats::Stats;
use crate::truth::WindowTruth;
use crate::units::Duration;

/// The ground-truth rule of scoring (`scoring.truth`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TruthRule {
    /// Pages accessed at least `truth_threshold` times in the window.
    #[default]
    Accessed,
    /// The workload's declared hot set during the window.
    Declared,
}
tierlab_core::choice_param!(TruthRule);

/// How ground truth's hot set is defined for scoring (`[scoring]` in a scenario).
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct ScoringConfig {
    /// A page is truly hot in a window when the workload accessed it at least this many
    /// times in that window. The default, 1, is every page the workload touched (for masim
    /// and hot-set workloads, the pages of the regions the current phase accesses).
    #[param(default = 1, range = "[0, 281474976710656]", unit = "accesses", setting)]
    pub truth_threshold: u32,
    /// Which pages are truly hot: `accessed` (pages accessed at least `truth_threshold`
    /// times in the window, from exact ground truth) or `declared` (the hot set the workload
    /// declares, e.g. hotset's needles in place during the window, all their pages: the
    /// masim-style rule "the regions the current phase accesses", which does not depend on
    /// how many of their pages a window happens to touch).
    #[param(default)]
    pub truth: TruthRule,
    /// Precision/recall level for the "time to reach" figures.
    #[param(default = 0.9, range = "[0, 1]", unit = "fraction", setting)]
    pub target: f64,
    /// A tiering run's page moved back (promoted after a demotion, or demoted after a
    /// promotion) at most this long after its previous move counts as ping-pong
    /// (`tiering.ping_pong`, see `scoring/migrations.rs`).
    #[param(
        default = Duration(1_000_000_000),
        assumed = "one second: the tiering scenarios' window and the shortest NUMA balancing scan period"
    )]
    pub pingpong_window: Duration,
}

/// One window's score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score {
    /// Bytes reported hot.
    pub reported: u64,
    /// Bytes truly hot.
    pub truth: u64,
    /// Bytes both.
    pub true_positive: u64,
}

impl Score {
    /// TP / reported; 0 when nothing is reported (a technique that reports nothing finds
    /// nothing).
    pub fn precision(&self) -> f64 {
        if self.reported == 0 {
            0.0
        } else {
            self.true_positive as f64 / self.reported as f64
        }
    }
    /// TP / truth; NaN when nothing is truly hot.
    pub fn recall(&self) -> f64 {
        if self.truth == 0 {
            f64::NAN
        } else {
            self.true_positive as f64 / self.truth as f64
        }
    }
}

/// Score a report against the truly hot pages (sorted page numbers), in bytes.
pub fn score(report: &HotReport, truth_pages: &[u64]) -> Score {
    let truth = tierlab_core::bytes_of(truth_pages.len() as u64);
    let tp = match report {
        HotReport::Pages(p) => {
            let (mut i, mut j, mut n) = (0, 0, 0u64);
            while i < p.len() && j < truth_pages.len() {
                match p[i].cmp(&truth_pages[j]) {
                    std::cmp::Ordering::Less => i += 1,
                    std::cmp::Ordering::Greater => j += 1,
                    std::cmp::Ordering::Equal => {
                        n += 1;
                        i += 1;
                        j += 1;
                    }
                }
            }
            bytes_of(n)
        }
        HotReport::Regions(r) => {
            // Bytes of truly hot pages inside reported ranges (partial pages count their
            // overlapping bytes).
            let mut n = 0u64;
            let mut j = 0;
            for &(s, e) in r {
                while j < truth_pages.len() && page_addr(truth_pages[j] + 1) <= s {
                    j += 1;
                }
                let mut k = j;
                while k < truth_pages.len() && page_addr(truth_pages[k]) < e {
                    let ps = page_addr(truth_pages[k]);
                    n += e.min(ps + PAGE_SIZE) - s.max(ps);
                    k += 1;
                }
            }
            n
        }
    };
    Score { reported: report.bytes(), truth, true_positive: tp }
}

/// Per-technique scoring state.
#[derive(Clone, Debug, Default)]
struct Track {
    label: String,
    precision: Vec<f64>,
    recall: Vec<f64>,
    window_end_s: Vec<f64>,
}

/// Scores the telemetry techniques of a run, window by window.
#[derive(Clone, Debug)]
pub struct Scorer {
    cfg: ScoringConfig,
    tracks: Vec<Track>,
    truth: Vec<u64>,
    /// The declared ranges `truth` was made from ([`TruthRule::Declared`]; sorted): a
    /// window declaring the same ranges keeps the list as it is.
    declared: Option<Vec<(u64, u64)>>,
}

impl Scorer {
    /// A scorer for the techniques labelled `labels` (in the order their reports come).
    pub fn new(cfg: &ScoringConfig, labels: Vec<String>) -> Self {
        Scorer {
            cfg: cfg.clone(),
            tracks: labels.into_iter().map(|label| Track { label, ..Default::default() }).collect(),
            truth: Vec::new(),
            declared: None,
        }
    }

    /// Whether there is anything to score.
    pub fn active(&self) -> bool {
        !self.tracks.is_empty()
    }

    /// Start a window: compute its truly hot pages from `w` (or from the workload's declared
    /// ranges, `(start, length)` byte ranges, under [`TruthRule::Declared`]). Returns the
    /// `truth_bytes` column.
    pub fn begin_window(
        &mut self,
        w: &WindowTruth,
        declared: impl FnOnce() -> Vec<(u64, u64)>,
    ) -> (String, f64) {
        // The list of the previous window is refilled in place (millions of pages for a hot
        // set of gigabytes: a new list each window would be new memory to map and zero), or
        // kept when the declared ranges have not moved.
        match self.cfg.truth {
            TruthRule::Accessed => {
                self.truth.clear();
                self.truth.extend(w.hot_pages(self.cfg.truth_threshold));
            }
            TruthRule::Declared => {
                let mut ranges = declared();
                ranges.sort_unstable();
                if self.declared.as_ref() != Some(&ranges) {
                    self.truth.clear();
                    for &(s, l) in &ranges {
                        self.truth.extend(tierlab_core::vpn(s)..tierlab_core::pages_for(s + l));
                    }
                    self.truth.dedup();
                    self.declared = Some(ranges);
                }
            }
        }
        ("truth_bytes".to_string(), tierlab_core::bytes_of(self.truth.len() as u64) as f64)
    }

    /// Score technique `i`'s report for the window ending at `end_s`; returns its columns.
    pub fn score(&mut self, i: usize, report: &HotReport, end_s: f64) -> Vec<(String, f64)> {
        let sc = score(report, &self.truth);
        let t = &mut self.tracks[i];
        t.precision.push(sc.precision());
        t.recall.push(sc.recall());
        t.window_end_s.push(end_s);
        let p = format!("telemetry.{}", t.label);
        vec![
            (format!("{p}.precision"), sc.precision()),
            (format!("{p}.recall"), sc.recall()),
            (format!("{p}.reported_bytes"), sc.reported as f64),
        ]
    }

    /// Bytes of the pages ground truth saw accessed at least `truth_threshold` times in `w`
    /// for which `on_fast(va)` holds (a tiering run's fast-tier use of hot data).
    pub fn hot_bytes_where(&self, w: &WindowTruth, on_fast: impl Fn(u64) -> bool) -> f64 {
        let hot = w
            .pages
            .iter()
            .filter(|&&(vpn, n)| n >= self.cfg.truth_threshold && on_fast(tierlab_core::page_addr(vpn)))
            .count() as u64;
        tierlab_core::bytes_of(hot) as f64
    }

    /// The run-level scoring stats.
    pub fn report_stats(&self, out: &mut Stats) {
        if self.tracks.is_empty() {
            return;
        }
        let target = self.cfg.target;
        out.set("scoring.target", target);
        out.set("scoring.truth_threshold", self.cfg.truth_threshold as u64);
        for t in &self.tracks {
            let p = format!("telemetry.{}", t.label);
            let mean = |v: &[f64]| {
                let f: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
                if f.is_empty() {
                    f64::NAN
                } else {
                    f.iter().sum::<f64>() / f.len() as f64
                }
            };
            out.set(format!("{p}.mean_precision"), mean(&t.precision));
            out.set(format!("{p}.mean_recall"), mean(&t.recall));
            let first = |v: &[f64]| v.iter().position(|&x| x >= target).map(|i| t.window_end_s[i]);
            if let Some(x) = first(&t.precision) {
                out.set(format!("{p}.time_to_precision"), x);
            }
            if let Some(x) = first(&t.recall) {
                out.set(format!("{p}.time_to_recall"), x);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_scores() {
        let r = HotReport::Pages(vec![1, 2, 3, 10]);
        let s = score(&r, &[2, 3, 4, 5]);
        assert_eq!(s.true_positive, 2 * 4096);
        assert_eq!(s.precision(), 0.5);
        assert_eq!(s.recall(), 0.5);
    }

    #[test]
    fn region_scores_count_bytes() {
        // Region covers pages 2..4 fully and half of page 4.
        let r = HotReport::Regions(vec![(2 * 4096, 4 * 4096 + 2048), (100 * 4096, 101 * 4096)]);
        let s = score(&r, &[1, 2, 3, 4, 50]);
        assert_eq!(s.true_positive, 2 * 4096 + 2048);
        assert_eq!(s.reported, 2 * 4096 + 2048 + 4096);
        assert_eq!(s.truth, 5 * 4096);
    }

    #[test]
    fn empty_report_has_zero_precision() {
        let s = score(&HotReport::Regions(vec![]), &[1]);
        assert_eq!(s.precision(), 0.0);
        assert_eq!(s.recall(), 0.0);
        assert!(score(&HotReport::Pages(vec![1]), &[]).recall().is_nan());
    }

    /// The truly hot set of each window, whether its list is refilled (ranges moved, or the
    /// accessed rule) or kept (the same declared ranges as the previous window).
    #[test]
    fn truth_is_recomputed_only_when_it_can_change() {
        let p = tierlab_core::PAGE_SIZE;
        let cfg = ScoringConfig { truth: TruthRule::Declared, ..Default::default() };
        let mut s = Scorer::new(&cfg, vec!["t".into()]);
        let w = WindowTruth::default();
        assert_eq!(s.begin_window(&w, || vec![(10 * p, 2 * p)]).1, (2 * p) as f64);
        assert_eq!(s.truth, vec![10, 11]);
        assert_eq!(s.begin_window(&w, || vec![(10 * p, 2 * p)]).1, (2 * p) as f64);
        assert_eq!(s.truth, vec![10, 11]);
        // Unsorted ranges, a shorter list than before.
        assert_eq!(s.begin_window(&w, || vec![(40 * p, p), (3 * p, p / 2)]).1, (2 * p) as f64);
        assert_eq!(s.truth, vec![3, 40]);
        assert_eq!(s.begin_window(&w, Vec::new).1, 0.0);
        assert!(s.truth.is_empty());

        let cfg = ScoringConfig { truth: TruthRule::Accessed, truth_threshold: 2, ..Default::default() };
        let mut s = Scorer::new(&cfg, vec!["t".into()]);
        let w1 = WindowTruth { pages: vec![(1, 5), (2, 1), (7, 2)], ..Default::default() };
        s.begin_window(&w1, || unreachable!());
        assert_eq!(s.truth, vec![1, 7]);
        let w2 = WindowTruth { pages: vec![(4, 9)], ..Default::default() };
        s.begin_window(&w2, || unreachable!());
        assert_eq!(s.truth, vec![4]);
    }
}
