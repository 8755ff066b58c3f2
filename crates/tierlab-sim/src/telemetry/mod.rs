//! Telemetry: observers that watch the machine and report which memory is hot.
//!
//! # Contract
//! An observer is built from its parameters ([`TelemetryParams::build`]) and then driven by
//! the simulation on simulated time:
//! 1. [`Observer::start`] runs once at time 0, after the workload mapped its memory.
//! 2. [`Observer::next_event_ns`] tells when the observer next wants to run (a sampling
//!    interval, a scan step, a drain check); the driver advances every application core to
//!    that time (lockstep, so the observer sees a consistent machine) and calls
//!    [`Observer::on_event`]. Events at equal times run in scenario order.
//! 3. An observer sees the machine only through its mechanism: Accessed/Dirty bits
//!    ([`crate::machine::Machine::clear_accessed`], `pt.test_accessed`, `pt.scan_pte_accessed`),
//!    the mapping list, and the PEBS hardware ([`crate::machine::pebs`]). It never reads
//!    ground truth.
//! 4. Work is charged as CPU time with [`ObserverCtx::charge`] to the observer's core (a
//!    kernel thread's core: the first core without an application thread, else core 0, or
//!    the `core` parameter); PEBS interrupts are charged by the hardware model to the
//!    sampled cores. Both are reported as the observer's CPU time.
//! 4. At each window end the driver asks [`Observer::hot_set`] for the bytes the observer
//!    reports hot and scores them against ground truth ([`score`]).
//!
//! # Registry
//! One file per technique, one line in [`registry!`]. Parameter types derive
//! `Deserialize` with `deny_unknown_fields` and `Serialize`; every one has a `name` (label
//! in tables and plots, default the kind) and an optional `core`.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::machine::Machine;
use crate::stats::Stats;

pub mod damon;
pub mod pebs;
pub mod pte_scan;
pub mod regions;
pub mod telescope;

/// What an observer reports hot for a window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HotReport {
    /// Byte ranges `[start, end)`, sorted and disjoint (region-based techniques).
    Regions(Vec<(u64, u64)>),
    /// 4 KiB page numbers, sorted and unique (sample-based techniques).
    Pages(Vec<u64>),
}

impl HotReport {
    /// Bytes reported.
    pub fn bytes(&self) -> u64 {
        match self {
            HotReport::Regions(r) => r.iter().map(|(s, e)| e - s).sum(),
            HotReport::Pages(p) => p.len() as u64 * 4096,
        }
    }
}

/// What an observer gets when it runs.
pub struct ObserverCtx<'a> {
    /// The machine (page tables, TLBs, mappings, PEBS hardware).
    pub machine: &'a mut Machine,
    /// Current simulated time, ns.
    pub now_ns: u64,
    /// The core the observer's own work is charged to.
    pub core: usize,
    /// CPU time charged so far by this observer (ps), maintained by [`ObserverCtx::charge`].
    pub cpu_ps: &'a mut u64,
}

impl ObserverCtx<'_> {
    /// Charge `ns` of the observer's own work to its core.
    pub fn charge(&mut self, ns: f64) {
        let t = crate::machine::cost::ps(ns);
        *self.cpu_ps += t;
        let core = self.core;
        // Work starts no earlier than now on that core.
        let now_ps = self.now_ns * 1000;
        let c = &mut self.machine.cores[core];
        if c.clock_ps < now_ps && !self.machine.mm_cpumask[core] {
            c.clock_ps = now_ps;
        }
        self.machine.charge(core, ns);
    }
}

/// A telemetry technique. See the module docs for the contract. (`Any` lets a consumer of
/// reports, such as a tiering policy, read a technique's richer state by its concrete type.)
pub trait Observer: Send + std::any::Any {
    /// Called once at time 0 after the workload's setup.
    fn start(&mut self, ctx: &mut ObserverCtx) -> Result<()>;
    /// Simulated time (ns) of the next event; `u64::MAX` for none.
    fn next_event_ns(&self) -> u64;
    /// Run the event due at `ctx.now_ns`.
    fn on_event(&mut self, ctx: &mut ObserverCtx) -> Result<()>;
    /// The hot set to score for the window `[start_ns, end_ns)` that just closed.
    fn hot_set(&mut self, start_ns: u64, end_ns: u64, machine: &Machine) -> HotReport;
    /// Extra per-window time-series values (e.g. `nr_regions`), as (column suffix, value).
    fn window_columns(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
    /// CPU time charged by the hardware on the observer's behalf (PEBS interrupts), ps.
    fn hw_cpu_ps(&self, _machine: &Machine) -> u64 {
        0
    }
    /// Publish technique-specific stats under `prefix` (`telemetry.<name>`, no trailing dot).
    fn report_stats(&self, _prefix: &str, _out: &mut Stats) {}
    /// Called once when the run ends (after the last window): flush what is still buffered.
    fn finish(&mut self, _ctx: &mut ObserverCtx) -> Result<()> {
        Ok(())
    }
    /// Sample-based techniques: every sample taken, as rows of the recording format's
    /// `samples` table (written by `tierlab run --out` as a recording `tierlab view` reads).
    /// Region-based techniques return nothing.
    fn samples(&self) -> Vec<tierlab_core::Sample> {
        Vec::new()
    }
}

/// Build-time context of an observer.
#[derive(Clone, Debug, Default)]
pub struct TelemetryBuildCtx {
    /// Scenario seed.
    pub seed: u64,
    /// Scenario file, for messages.
    pub scenario_file: String,
    /// Index of this observer in the scenario's list (for error fields and RNG streams).
    pub index: usize,
    /// Cores of the machine.
    pub cores: usize,
    /// Application threads (cores `0..threads` run the workload).
    pub threads: usize,
}

impl TelemetryBuildCtx {
    /// The default core for an observer's own work: the first core without an
    /// application thread, else core 0.
    pub fn default_core(&self) -> usize {
        if self.threads < self.cores {
            self.threads
        } else {
            0
        }
    }
    /// Validate a `core` parameter.
    pub fn core(&self, core: Option<usize>) -> Result<usize> {
        match core {
            Some(c) if c >= self.cores => Err(crate::SimError::config(
                &self.scenario_file,
                format!("telemetry[{}].core", self.index),
                format!("core {c} does not exist (machine.cores = {})", self.cores),
            )),
            Some(c) => Ok(c),
            None => Ok(self.default_core()),
        }
    }
    /// A config error about field `field` of this observer.
    pub fn err(&self, field: &str, msg: impl Into<String>) -> crate::SimError {
        crate::SimError::config(&self.scenario_file, format!("telemetry[{}].{field}", self.index), msg)
    }
}

/// Parameters of one telemetry technique.
pub trait TelemetryParams {
    /// Build the observer (validating parameters).
    fn build(&self, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>>;
    /// The label used in tables and plots.
    fn label(&self) -> String;
    /// The `core` parameter (None = the default core, see [`TelemetryBuildCtx::core`]).
    fn core(&self) -> Option<usize>;
}

macro_rules! registry {
    ($( $name:literal => $variant:ident ( $params:ty ) ),* $(,)?) => {
        /// A telemetry technique's configuration: `kind` picks the implementation.
        #[derive(Clone, Debug, Serialize, Deserialize)]
        #[serde(tag = "kind")]
        pub enum TelemetryConfig {
            $( #[serde(rename = $name)] #[allow(missing_docs)] $variant($params), )*
        }
        impl TelemetryConfig {
            /// The registered name of this technique's kind.
            pub fn kind(&self) -> &'static str {
                match self { $( Self::$variant(_) => $name, )* }
            }
            /// Build the observer.
            pub fn build(&self, ctx: &TelemetryBuildCtx) -> Result<Box<dyn Observer>> {
                match self { $( Self::$variant(p) => p.build(ctx), )* }
            }
            /// Label in tables and plots.
            pub fn label(&self) -> String {
                match self { $( Self::$variant(p) => p.label(), )* }
            }
            /// The `core` parameter.
            pub fn core(&self) -> Option<usize> {
                match self { $( Self::$variant(p) => p.core(), )* }
            }
        }
        /// Registered telemetry kinds.
        pub const KINDS: &[&str] = &[$($name),*];
    };
}

registry! {
    "pte-scan" => PteScan(pte_scan::PteScanParams),
    "damon" => Damon(damon::DamonParams),
    "telescope" => Telescope(telescope::TelescopeParams),
    "pebs" => Pebs(pebs::PebsParams),
}

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

/// How ground truth's hot set is defined for scoring (`[scoring]` in a scenario).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoringConfig {
    /// A page is truly hot in a window when the workload accessed it at least this many
    /// times in that window. Default 1: every page the workload touched (for masim and
    /// hot-set workloads, the pages of the regions the current phase accesses).
    #[serde(default = "d_truth")]
    pub truth_threshold: u32,
    /// Which pages are truly hot: `accessed` (default: pages accessed at least
    /// `truth_threshold` times in the window, from exact ground truth) or `declared` (the hot
    /// set the workload declares, e.g. hotset's needles in place during the window, all their
    /// pages: the masim-style rule "the regions the current phase accesses", which does not
    /// depend on how many of their pages a window happens to touch).
    #[serde(default)]
    pub truth: TruthRule,
    /// Precision/recall level for the "time to reach" figures.
    #[serde(default = "d_target")]
    pub target: f64,
}

fn d_truth() -> u32 {
    1
}
fn d_target() -> f64 {
    0.9
}

impl Default for ScoringConfig {
    fn default() -> Self {
        ScoringConfig { truth_threshold: d_truth(), truth: TruthRule::default(), target: d_target() }
    }
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
    let truth = truth_pages.len() as u64 * 4096;
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
            n * 4096
        }
        HotReport::Regions(r) => {
            // Bytes of truly hot pages inside reported ranges (partial pages count their
            // overlapping bytes).
            let mut n = 0u64;
            let mut j = 0;
            for &(s, e) in r {
                while j < truth_pages.len() && (truth_pages[j] + 1) * 4096 <= s {
                    j += 1;
                }
                let mut k = j;
                while k < truth_pages.len() && truth_pages[k] * 4096 < e {
                    let ps = truth_pages[k] * 4096;
                    n += e.min(ps + 4096) - s.max(ps);
                    k += 1;
                }
            }
            n
        }
    };
    Score { reported: report.bytes(), truth, true_positive: tp }
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
}
