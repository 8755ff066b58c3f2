//! tierlab's live Linux recorder.
//!
//! - [`config`]: the recorder's configuration, every knob's default, unit, range and
//!   description declared once;
//! - [`perf`]: the `perf_event_open` ABI (attribute layout, flags, record types);
//! - [`events`]: backends (Intel PEBS, AMD IBS, software page faults), their event encodings,
//!   and detection of what the machine's PMUs support;
//! - [`ring`]: the ring-buffer reader and record decoder (tested on synthetic buffers);
//! - [`maps`]: the mapping history (perf `MMAP2` records plus `/proc/PID/maps` snapshots);
//! - [`session`] (Linux only): launching or attaching, one ring per CPU, drains, accounting;
//! - [`lackey`]: a streaming parser of Valgrind lackey's memory trace (`tierlab trace`).
//!
//! Placement-independent and free of Python: the binding crate drives a
//! [`session::Recorder`] and writes its batches into the recording format.

pub mod config;
pub mod events;
pub mod lackey;
pub mod maps;
pub mod perf;
pub mod ring;
#[cfg(target_os = "linux")]
pub mod session;
