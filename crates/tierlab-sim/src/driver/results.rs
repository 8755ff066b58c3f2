//! What a run produces: its stats, time series, heatmap, mappings, samples, plan and damo
//! records ([`RunResult`]), and what each stage hands to the next ([`StageOutcome`]).

use super::window::{Heatmap, TimeSeries};
use crate::agents::placement::StageInput;
use crate::scenario::Scenario;
use crate::stats::Stats;

/// A mapping as reported in results.
#[derive(Clone, Debug)]
pub struct MappingInfo {
    /// Name.
    pub name: String,
    /// Start address.
    pub start: u64,
    /// Length.
    pub length: u64,
    /// Page size in bytes.
    pub page_size: u64,
}

/// What an earlier stage of the run produced.
#[derive(Clone, Debug)]
pub struct StageSummary {
    /// Stage name.
    pub name: String,
    /// Its stats.
    pub stats: Stats,
    /// Whether it produced a placement plan.
    pub plan_ranges: usize,
}

/// Everything a run produced.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The scenario as run (its last stage).
    pub scenario: Scenario,
    /// All stats.
    pub stats: Stats,
    /// One row per window.
    pub timeseries: TimeSeries,
    /// Access heatmap.
    pub heatmap: Heatmap,
    /// Mappings at the end of setup.
    pub mappings: Vec<MappingInfo>,
    /// Stopped early by the caller.
    pub interrupted: bool,
    /// Stopped early by a simulation error (the simulated machine ran out of memory, a
    /// workload touched no mapping): its message. Everything up to the error is kept.
    pub error: Option<String>,
    /// Wall-clock seconds of the run loop (every stage).
    pub wall_seconds: f64,
    /// Mapping events: (time ns, map?, start, len, name).
    pub mapping_log: Vec<(u64, bool, u64, u64, String)>,
    /// Samples of the sample-based techniques (PEBS), per technique label, in drain order.
    pub samples: Vec<(String, tierlab_core::SampleSet)>,
    /// The placement plan the run produced, if any (profile-guided `profile`).
    pub plan: Option<Vec<(u64, u64, u8)>>,
    /// damo records (JSON) of the region-based techniques asked to keep one, per label.
    pub damo_records: Vec<(String, String)>,
    /// The tiering policy's decision log (see [`crate::agents::MoveRecord`]).
    pub decisions: Vec<crate::agents::MoveRecord>,
    /// The stages that ran before the last one.
    pub stages: Vec<StageSummary>,
    /// Node of each core (for recordings of the run's samples).
    pub core_nodes: Vec<u8>,
}

/// The outcome of one stage.
pub(super) struct StageOutcome {
    pub(super) result: RunResult,
    pub(super) input: StageInput,
}
