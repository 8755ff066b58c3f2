//! Shared vocabulary of tierlab.
//!
//! Every source of memory accesses (simulated workloads, replayed recordings, the live
//! recorder) and every consumer (the machine model, telemetry, reports) speaks in these
//! types. The on-disk recording format (a directory of Parquet parts plus `meta.json`,
//! documented in `docs/formats.md`) uses the column names and codes defined here, so a
//! simulated recording and a live one share one schema.

use serde::{Deserialize, Serialize};

#[cfg(feature = "parquet")]
pub mod recording;

/// Size of a base page (4 KiB).
pub const PAGE_SHIFT: u32 = 12;
/// Bytes in a base page.
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// Shift of a 2 MiB huge page.
pub const HUGE_SHIFT: u32 = 21;
/// Bytes in a 2 MiB huge page.
pub const HUGE_SIZE: u64 = 1 << HUGE_SHIFT;

/// Kind of one memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum AccessKind {
    /// A load.
    Read = 0,
    /// A store.
    Write = 1,
}

impl AccessKind {
    /// Code used in the recording format's `kind` column.
    pub fn code(self) -> u8 {
        self as u8
    }
    /// Inverse of [`AccessKind::code`].
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(AccessKind::Read),
            1 => Some(AccessKind::Write),
            _ => None,
        }
    }
}

/// One memory access issued by a thread: a virtual address and a kind.
///
/// Kept to 16 bytes so workloads can fill large batches cheaply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Access {
    /// Virtual address of the first byte accessed.
    pub addr: u64,
    /// Load or store.
    pub kind: AccessKind,
}

impl Access {
    /// A load of `addr`.
    #[inline]
    pub fn read(addr: u64) -> Self {
        Access { addr, kind: AccessKind::Read }
    }
    /// A store to `addr`.
    #[inline]
    pub fn write(addr: u64) -> Self {
        Access { addr, kind: AccessKind::Write }
    }
    /// True for stores.
    #[inline]
    pub fn is_write(&self) -> bool {
        self.kind == AccessKind::Write
    }
}

/// A change of the address space: a mapping appears or disappears.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MappingEvent {
    /// Time of the event in nanoseconds from the start of the recording.
    pub time_ns: u64,
    /// `map` or `unmap`.
    pub event: MappingEventKind,
    /// First byte of the range.
    pub start: u64,
    /// Length of the range in bytes.
    pub length: u64,
    /// A name for the mapping (region name, file path, `[heap]`, ...); may be empty.
    pub name: String,
}

/// Kinds of [`MappingEvent`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MappingEventKind {
    /// A range became mapped.
    Map,
    /// A range was unmapped.
    Unmap,
}

impl MappingEventKind {
    /// The string stored in the recording format's `event` column.
    pub fn as_str(self) -> &'static str {
        match self {
            MappingEventKind::Map => "map",
            MappingEventKind::Unmap => "unmap",
        }
    }
}

/// One telemetry sample (a PEBS/IBS record, a sampled page fault, ...).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Time in nanoseconds from the start of the recording.
    pub time_ns: u64,
    /// Thread id (or simulated thread index).
    pub tid: u32,
    /// CPU (core) that took the sample.
    pub cpu: u32,
    /// Sampled data address.
    pub addr: u64,
    /// Instruction pointer if known, else 0.
    pub ip: u64,
    /// Access latency weight in cycles if known, else 0.
    pub weight: u64,
    /// Raw data-source word (perf `PERF_SAMPLE_DATA_SRC`) if known, else 0.
    pub data_src: u64,
    /// Event name (`mem-loads`, `page-faults`, `pebs-model`, ...).
    pub event: String,
    /// Index of the buffer drain (sample set) that delivered this sample.
    pub drain: u64,
}

/// The recording format's identity and version, written into `meta.json`.
pub mod format {
    /// Value of the `format` field of `meta.json`.
    pub const NAME: &str = "tierlab-recording";
    /// Current version; readers reject newer major versions with a clear error.
    pub const VERSION: u32 = 1;
    /// Table (sub-directory) of full access streams.
    pub const ACCESSES: &str = "accesses";
    /// Table of telemetry samples.
    pub const SAMPLES: &str = "samples";
    /// Table of mapping events.
    pub const MAPPINGS: &str = "mappings";
    /// Table of drains (interrupts / buffer wake-ups).
    pub const DRAINS: &str = "drains";
    /// Columns of the `accesses` table, in order.
    pub const ACCESS_COLUMNS: &[&str] = &["time_ns", "tid", "addr", "kind"];
    /// Columns of the `samples` table, in order.
    pub const SAMPLE_COLUMNS: &[&str] =
        &["time_ns", "tid", "cpu", "addr", "ip", "weight", "data_src", "event", "drain"];
    /// Columns of the `mappings` table, in order.
    pub const MAPPING_COLUMNS: &[&str] = &["time_ns", "event", "start", "length", "name"];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Access>(), 16);
    }

    #[test]
    fn kind_codes_roundtrip() {
        for k in [AccessKind::Read, AccessKind::Write] {
            assert_eq!(AccessKind::from_code(k.code()), Some(k));
        }
        assert_eq!(AccessKind::from_code(7), None);
    }
}
