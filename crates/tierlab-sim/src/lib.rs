//! tierlab's simulation engine.
//!
//! No OS or Python dependency. Layers that only call downward (the map is
//! `docs/architecture.md`):
//! - [`truth`]: exact per-page, per-window access counts (a store the hardware counts into,
//!   read only by [`scoring`] through the driver);
//! - [`hw`]: the hardware: cores, clocks, TLBs, page-table formats with Accessed/Dirty bits,
//!   caches, the PMU, the cost model;
//! - [`os`]: the OS: the address space, memory nodes, memory backends (flat NUMA nodes, a
//!   hierarchical fast memory with page replacement), faults, migration, one TLB shootdown
//!   implementation; [`os::Machine`] is hardware plus OS plus ground truth;
//! - [`workload`]: the sources of accesses;
//! - [`agents`]: everything that acts over time (telemetry, the backend's scanner,
//!   placement, tiering) on one lifecycle and one clock, talking through typed feeds;
//! - [`scoring`]: the only reader of ground truth;
//! - [`scenario`]: scenarios as data (TOML);
//! - [`driver`]: one loop over the agents, windows, stages;
//! - [`bench`]: throughput measurements.

pub mod error;
pub mod limits;
pub mod params;
pub mod rng;
pub mod stats;
pub mod stats_keys;
pub mod units;

pub mod truth;

pub mod hw;

pub mod os;

pub mod workload;

pub mod agents;

pub mod scoring;

pub mod scenario;

pub mod driver;

pub mod bench;

pub use error::{Result, SimError};
