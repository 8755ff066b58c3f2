//! Shared vocabulary of tierlab: the contract between the simulator, the live recorder and
//! the Python package.
//!
//! Every source of memory accesses (simulated workloads, replayed recordings, the live
//! recorder) and every consumer (the machine model, telemetry, reports, placement) speaks in
//! these types:
//!
//! - the crate root: accesses ([`Access`], [`AccessKind`]) and the rows of the recording
//!   format's tables ([`AccessRecord`], [`Sample`], [`MappingEvent`], [`Drain`], [`Region`]);
//! - [`page`]: page sizes ([`PageSize`]: 4 KiB, 64 KiB, 2 MiB, 1 GiB), their constants and
//!   page arithmetic on addresses;
//! - [`schema`]: the recording format (a directory of Parquet parts plus `meta.json`,
//!   `docs/formats.md`) declared once: every table, column, type, code and `meta.json` field.
//!   The Python package builds its pyarrow schemas from it through the binding;
//! - [`plan`]: the page placement rules (affinity, hot-fast) on per-page evidence, shared by
//!   the simulator's profile-guided placement and `tierlab place plan`.
//!
//! No dependency on the simulator, the OS or Python.

use serde::{Deserialize, Serialize};

// `#[params]` names this crate by its path, inside it too.
extern crate self as tierlab_core;

#[cfg(feature = "parquet")]
pub mod recording;

pub mod page;
pub mod param;
pub mod plan;
pub mod samples;
pub mod schema;

pub use page::{
    bytes_of, page_addr, pages_for, vpn, PageSize, HUGE_1G_SHIFT, HUGE_1G_SIZE, HUGE_MASK, HUGE_SHIFT,
    HUGE_SIZE, PAGES_PER_HUGE, PAGE_64K_SHIFT, PAGE_64K_SIZE, PAGE_MASK, PAGE_SHIFT, PAGE_SIZE,
};
pub use samples::SampleSet;

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
    /// Code used in the recording format's `kind` column (the code table is
    /// [`schema::ACCESS_KINDS`]).
    pub const fn code(self) -> u8 {
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
    /// The string stored in the recording format's `event` column (the code table is
    /// [`schema::MAPPING_EVENT_KINDS`]).
    pub const fn as_str(self) -> &'static str {
        match self {
            MappingEventKind::Map => "map",
            MappingEventKind::Unmap => "unmap",
        }
    }
    /// Inverse of [`MappingEventKind::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "map" => Some(MappingEventKind::Map),
            "unmap" => Some(MappingEventKind::Unmap),
            _ => None,
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

/// One row of the recording format's `accesses` table (columns [`schema::ACCESSES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessRecord {
    /// Time in nanoseconds from the start of the recording (or a logical clock: the
    /// instructions executed before the access, for `tierlab trace`).
    pub time_ns: u64,
    /// Thread (simulated thread index, or OS thread id).
    pub tid: u32,
    /// Virtual address of the first byte accessed.
    pub addr: u64,
    /// Load or store, stored as its code.
    #[serde(with = "kind_code")]
    pub kind: AccessKind,
}

/// Serde of [`AccessKind`] as its code (0, 1), as the `kind` column stores it.
mod kind_code {
    use super::AccessKind;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(k: &AccessKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(k.code())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<AccessKind, D::Error> {
        let code = u8::deserialize(d)?;
        AccessKind::from_code(code)
            .ok_or_else(|| D::Error::custom(format!("access kind {code}: expected 0 or 1")))
    }
}

/// One buffer drain (a PEBS interrupt, a perf ring-buffer wake-up): a row of the `drains`
/// table (columns [`schema::DRAINS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drain {
    /// Time of the drain in nanoseconds from the start of the recording.
    pub time_ns: u64,
    /// CPU whose buffer was drained.
    pub cpu: u32,
    /// Drain index, referenced by [`Sample::drain`].
    pub drain: u64,
    /// Samples delivered by this drain.
    pub records: u32,
}

/// One DAMON-style region of one snapshot: a row of the optional `regions` table (columns
/// [`schema::REGIONS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
    /// Start of the snapshot's aggregation interval (ns).
    pub time_ns: u64,
    /// End of the aggregation interval (ns).
    pub end_ns: u64,
    /// DAMON target.
    pub target: u32,
    /// First byte of the region.
    pub start: u64,
    /// End of the region (exclusive).
    pub end: u64,
    /// Sampling intervals of the aggregation interval in which the region was seen accessed.
    pub nr_accesses: u32,
    /// Aggregation intervals the region kept its access pattern.
    pub age: u32,
}

/// What a synchronisation event of a recorded thread was: the codes of the `sync` table's
/// `kind` column ([`schema::SYNC_KINDS`]). Each kind is one of three roles in a replay
/// ([`SyncKind::role`]): a barrier arrival, an acquire (waits for the latest release of the
/// same object before it), a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum SyncKind {
    /// `pthread_barrier_wait` (arg: the barrier's count).
    Barrier = 0,
    /// An OpenMP team barrier: explicit, at the end of a worksharing construct, at the end of
    /// a parallel region (object: the region; arg: the team's size).
    OmpBarrier = 1,
    /// A pthread mutex acquired (lock, successful trylock, return of a condition wait).
    MutexLock = 2,
    /// A pthread mutex released (unlock, entering a condition wait).
    MutexUnlock = 3,
    /// `pthread_cond_signal` or `pthread_cond_broadcast`.
    CondSignal = 4,
    /// A `pthread_cond_wait` (or timed wait that was signalled) returned.
    CondWake = 5,
    /// The encountering thread starts an OpenMP parallel region (object: the region).
    OmpFork = 6,
    /// A team thread starts the region's body.
    OmpStart = 7,
    /// A critical section, an atomic region or an `omp_set_lock` entered.
    OmpLock = 8,
    /// A critical section, an atomic region or an `omp_unset_lock` left.
    OmpUnlock = 9,
}

/// What a [`SyncKind`] does in a replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncRole {
    /// Arrives at a barrier: waits until every participant of the same barrier instance has
    /// arrived; all leave at the latest arrival.
    Arrive,
    /// Waits for the latest release (of the given family, same object) recorded before it.
    Acquire(u8),
    /// Releases: an acquire after it waits for it.
    Release(u8),
}

impl SyncKind {
    /// Every kind, in code order.
    pub const ALL: [SyncKind; 10] = [
        SyncKind::Barrier,
        SyncKind::OmpBarrier,
        SyncKind::MutexLock,
        SyncKind::MutexUnlock,
        SyncKind::CondSignal,
        SyncKind::CondWake,
        SyncKind::OmpFork,
        SyncKind::OmpStart,
        SyncKind::OmpLock,
        SyncKind::OmpUnlock,
    ];

    /// The kind of a code (`None` for an unknown code).
    pub const fn from_code(c: u8) -> Option<SyncKind> {
        if (c as usize) < Self::ALL.len() {
            Some(Self::ALL[c as usize])
        } else {
            None
        }
    }

    /// The name in the code table.
    pub const fn name(self) -> &'static str {
        match self {
            SyncKind::Barrier => "barrier",
            SyncKind::OmpBarrier => "omp-barrier",
            SyncKind::MutexLock => "mutex-lock",
            SyncKind::MutexUnlock => "mutex-unlock",
            SyncKind::CondSignal => "cond-signal",
            SyncKind::CondWake => "cond-wake",
            SyncKind::OmpFork => "omp-fork",
            SyncKind::OmpStart => "omp-start",
            SyncKind::OmpLock => "omp-lock",
            SyncKind::OmpUnlock => "omp-unlock",
        }
    }

    /// What it means, and what a replay does with it.
    pub const fn meaning(self) -> &'static str {
        match self {
            SyncKind::Barrier => "pthread_barrier_wait (arg = the barrier's count): waits for every participant",
            SyncKind::OmpBarrier => {
                "OpenMP team barrier (explicit, worksharing end, region end; object = the region, arg = team size)"
            }
            SyncKind::MutexLock => "pthread mutex acquired: waits for the mutex's previous unlock",
            SyncKind::MutexUnlock => "pthread mutex released",
            SyncKind::CondSignal => "pthread_cond_signal or _broadcast",
            SyncKind::CondWake => "pthread_cond_wait returned: waits for the latest signal before it",
            SyncKind::OmpFork => "an OpenMP parallel region forked (object = the region)",
            SyncKind::OmpStart => "a team thread starts the region's body: waits for its fork",
            SyncKind::OmpLock => "critical, atomic or omp_set_lock entered: waits for the previous exit",
            SyncKind::OmpUnlock => "critical, atomic or omp_unset_lock left",
        }
    }

    /// The role in a replay; acquires and releases name their family (pthread mutexes,
    /// condition variables, OpenMP forks, OpenMP locks), so an acquire waits only for a
    /// release of its own family and object.
    pub const fn role(self) -> SyncRole {
        match self {
            SyncKind::Barrier | SyncKind::OmpBarrier => SyncRole::Arrive,
            SyncKind::MutexLock => SyncRole::Acquire(0),
            SyncKind::MutexUnlock => SyncRole::Release(0),
            SyncKind::CondWake => SyncRole::Acquire(1),
            SyncKind::CondSignal => SyncRole::Release(1),
            SyncKind::OmpStart => SyncRole::Acquire(2),
            SyncKind::OmpFork => SyncRole::Release(2),
            SyncKind::OmpLock => SyncRole::Acquire(3),
            SyncKind::OmpUnlock => SyncRole::Release(3),
        }
    }
}

impl Serialize for SyncKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_u8(*self as u8)
    }
}

impl<'de> Deserialize<'de> for SyncKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let c = u8::deserialize(d)?;
        SyncKind::from_code(c).ok_or_else(|| serde::de::Error::custom(format!("unknown sync kind {c}")))
    }
}

/// One synchronisation event of a recorded thread: a row of the optional `sync` table
/// (columns [`schema::SYNC`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncEvent {
    /// Time of the event (ns from the start of the recording).
    pub time_ns: u64,
    /// Thread.
    pub tid: u32,
    /// Order among every thread's events.
    pub seq: u64,
    /// The thread's accesses before the event.
    pub index: u64,
    /// What happened.
    pub kind: SyncKind,
    /// What it synchronises on.
    pub object: u64,
    /// A barrier's participants (0 unknown); else 0.
    pub arg: u64,
}

/// The recording format's identity and table names (kept for existing users; the schema
/// itself, columns included, is [`schema`]).
pub mod format {
    /// Value of the `format` field of `meta.json`.
    pub const NAME: &str = crate::schema::FORMAT_NAME;
    /// Current version; readers reject newer versions with a clear error.
    pub const VERSION: u32 = crate::schema::FORMAT_VERSION;
    /// Table (sub-directory) of full access streams.
    pub const ACCESSES: &str = crate::schema::ACCESSES.name;
    /// Table of telemetry samples.
    pub const SAMPLES: &str = crate::schema::SAMPLES.name;
    /// Table of mapping events.
    pub const MAPPINGS: &str = crate::schema::MAPPINGS.name;
    /// Table of drains (interrupts / buffer wake-ups).
    pub const DRAINS: &str = crate::schema::DRAINS.name;
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
        for k in [MappingEventKind::Map, MappingEventKind::Unmap] {
            assert_eq!(MappingEventKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(MappingEventKind::parse("remap"), None);
    }

    #[test]
    fn access_records_store_kind_codes() {
        let a: AccessRecord = serde_json::from_str(r#"{"time_ns":1,"tid":2,"addr":3,"kind":1}"#).unwrap();
        assert_eq!(a.kind, AccessKind::Write);
        let e =
            serde_json::from_str::<AccessRecord>(r#"{"time_ns":1,"tid":2,"addr":3,"kind":2}"#).unwrap_err();
        assert!(e.to_string().contains("access kind 2: expected 0 or 1"), "{e}");
    }
}
