//! tierlab's simulation engine.
//!
//! No OS or Python dependency: a machine model (cores, TLBs, 4-level page tables with
//! Accessed/Dirty bits at every level, memory nodes/tiers, a cost model), an OS model
//! (mappings, faults, placement), workloads, exact ground truth and a stats registry,
//! driven by scenarios written as TOML.

pub mod bench;
pub mod error;
pub mod groundtruth;
pub mod machine;
pub mod placement;
pub mod rng;
pub mod scenario;
pub mod sim;
pub mod stats;
pub mod telemetry;
pub mod tiering;
pub mod units;
pub mod workload;

pub use error::{Result, SimError};
