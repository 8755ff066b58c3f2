//! `replay`: replays a recorded access stream (a tierlab recording's `accesses` table).
//!
//! The workload reads the recording itself, chunk by chunk (`tierlab_core::recording`):
//! memory does not grow with the trace's length. `path` is relative to the scenario's folder;
//! `builtin:NAME` names a recording shipped with tierlab ([`builtin`]).
//! (A caller may instead hand the accesses over in memory as [`ReplayData`] through
//! [`BuildCtx::replay`]; tests do.)
//!
//! **Threads.** Recorded threads are ordered by ascending `tid`; the `i`-th of them replays
//! on simulated thread `i % threads` (default: one simulated thread per recorded thread, at
//! most one per core). Each recorded thread's accesses run in the order the table holds
//! them. Across cores the simulated clocks (the cost model) decide the interleaving. When
//! several recorded threads share a simulated thread:
//! - a table whose row groups mix threads (written in recorded order, as the Python writer
//!   and `tierlab trace` do) is replayed in table order: the recorded interleaving is kept;
//! - a thread-blocked table (one thread per row group: tierlab's importers and tracer) is
//!   merged by `time_ns` when the recording has timestamps of a shared clock (`time_unit` ns
//!   or instructions, equal times in thread order), else (`time_unit = "accesses"`: program
//!   order only) interleaved in slices of [`SLICE`] accesses per thread, round robin.
//!
//! `repeat` replays the whole stream that many times.
//!
//! **Memory.** `mappings = "touched"` (default) maps exactly the pages the trace touches:
//! maximal runs of touched 4 KiB pages, named after the recorded mapping that holds them
//! (`[replay]` outside every recorded mapping, or when the recording has none), so a
//! percent limit (`machine.hmem.fast_memory = "50%"`) is a share of the touched pages. When
//! the touched pages form more than [`MAX_RUNS`] runs, runs closer than the smallest gap
//! that brings them under it are merged (`workload.mapped_bytes` then exceeds
//! `workload.touched_pages` x 4 KiB). `mappings = "recorded"` maps every recorded range
//! whole (rounded out to pages, overlapping ranges merged) plus the touched runs outside
//! them. Finding the touched pages costs one pass over the `addr` column at setup.

use super::{
    check_threads, Access, AccessKind, AddressSpace, BuildCtx, MapOptions, PageSize, Ps, Step, Workload,
    WorkloadParams,
};
use crate::error::{Location, Result, SimError};
use crate::stats::Stats;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use tierlab_core::param::params;
use tierlab_core::recording::aggregate::PageSet;
use tierlab_core::recording::{
    self as rec, AccessChunk, AccessCursor, AccessTable, Columns, RecordingError, TimeUnit,
};

#[path = "replay_traces.rs"]
pub mod builtin;
#[path = "replay_sync.rs"]
pub mod sync;

/// A recorded access stream held in memory, column by column (row `i` of every column is one
/// access).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplayData {
    /// Virtual address of each access.
    pub addr: Vec<u64>,
    /// Recorded thread id of each access.
    pub tid: Vec<u32>,
    /// Kind code of each access (0 = read, 1 = write; see [`AccessKind::code`]).
    pub kind: Vec<u8>,
    /// Recorded mappings `(start, length, name)`.
    pub mappings: Vec<(u64, u64, String)>,
}

fn input_err(field: &str, msg: String) -> SimError {
    SimError::Input {
        at: Location { file: "<replay data>".into(), line: None, field: Some(field.into()) },
        msg,
    }
}

fn rec_err(e: RecordingError) -> SimError {
    let file = match e.record {
        Some(r) => format!("{}: record {r}", e.file),
        None => e.file,
    };
    SimError::Input { at: Location { file, line: None, field: e.field }, msg: e.msg }
}

/// The error for a recording without accesses (a sampled one holds samples only).
fn no_accesses(dir: &std::path::Path, meta: &serde_json::Value) -> SimError {
    let samples = meta["tables"]["samples"].as_u64().unwrap_or(0);
    let msg = if samples > 0 {
        format!(
            "the recording holds no accesses, only {samples} samples (a sampled recording: `tierlab \
             record`, perf script, damo); replay needs every access: record with `tierlab trace`, or import \
             a full trace (`tierlab import csv|raw|lackey|oracle-general`)"
        )
    } else {
        "the recording holds no accesses: there is nothing to replay".to_string()
    };
    SimError::Input {
        at: Location { file: dir.display().to_string(), line: None, field: Some("accesses".into()) },
        msg,
    }
}

impl ReplayData {
    /// Number of accesses.
    pub fn len(&self) -> usize {
        self.addr.len()
    }

    /// True when there is no access.
    pub fn is_empty(&self) -> bool {
        self.addr.is_empty()
    }

    /// Check the columns (equal lengths, kind codes) and the mappings (non-empty, no overflow,
    /// no overlap). Errors name the column and the row.
    pub fn validate(&self) -> Result<()> {
        let n = self.addr.len();
        for (col, len) in [("tid", self.tid.len()), ("kind", self.kind.len())] {
            if len != n {
                return Err(input_err(
                    &format!("accesses.{col}"),
                    format!("column `{col}` has {len} rows but column `addr` has {n}"),
                ));
            }
        }
        if let Some(row) = self.kind.iter().position(|&k| AccessKind::from_code(k).is_none()) {
            return Err(input_err(
                "accesses.kind",
                format!(
                    "row {row} of column `kind`: code {} (expected 0 = read or 1 = write)",
                    self.kind[row]
                ),
            ));
        }
        let mut order: Vec<usize> = (0..self.mappings.len()).collect();
        for &i in &order {
            let (start, len, ref name) = self.mappings[i];
            if len == 0 {
                return Err(input_err(
                    "mappings.length",
                    format!("row {i} of mappings (`{name}`): length 0"),
                ));
            }
            if start.checked_add(len).is_none() {
                return Err(input_err(
                    "mappings.length",
                    format!("row {i} of mappings (`{name}`): {start:#x} + {len:#x} overflows 64 bits"),
                ));
            }
        }
        order.sort_by_key(|&i| self.mappings[i].0);
        for w in order.windows(2) {
            let (a, b) = (&self.mappings[w[0]], &self.mappings[w[1]]);
            if b.0 < a.0 + a.1 {
                return Err(input_err(
                    "mappings.start",
                    format!(
                        "row {} of mappings (`{}` at {:#x}+{:#x}) overlaps row {} (`{}` at {:#x}+{:#x})",
                        w[1], b.2, b.0, b.1, w[0], a.2, a.0, a.1
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Which address ranges a replay maps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MapMode {
    /// The touched pages, in runs named after the recorded mappings.
    #[default]
    Touched,
    /// The recorded mappings whole, plus the touched pages outside them.
    Recorded,
}

tierlab_core::choice_param!(MapMode);

/// Parameters of the `replay` workload (not [`super::WorkloadShared`]: its threads default to
/// the recording's).
#[params]
#[derive(Clone, Debug)]
pub struct ReplayParams {
    /// The recording directory, relative to the scenario's folder (`builtin:NAME`: a
    /// recording shipped with tierlab).
    #[param(required)]
    pub path: String,
    /// Simulated threads; absent = one per distinct recorded tid, at most one per core.
    /// Recorded thread `i` (by ascending tid) runs on simulated thread `i % threads`.
    #[param(default, range = "[1, 4096]", unit = "threads", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Times the whole stream is replayed (`loop_count` is accepted as an old name).
    #[param(default = 1, range = "[1, 1e9]", unit = "repetitions", setting)]
    #[serde(alias = "loop_count")]
    pub repeat: u32,
    /// Page size of the mappings: absent = 4 KiB pages for ranges that are not
    /// 2 MiB-aligned and the machine's default for the others; `"2MiB"` rounds every range
    /// out to 2 MiB.
    #[param(default, setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_size: Option<PageSize>,
    /// Bulk-populate the mappings at setup (false: faulted in on first touch).
    #[param(default, setting)]
    pub populate: bool,
    /// `touched`: map the touched pages; `recorded`: the recorded mappings whole.
    #[param(default)]
    pub mappings: MapMode,
    /// Populate the mappings on this memory node (`numactl --membind` and a pre-fault: e.g.
    /// a store loaded in the slow tier); needs `populate = true`. Absent: the placement rule.
    #[param(default, range = "[0, 255]", unit = "node number", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<u8>,
    /// Obey the recording's synchronisation (its `sync` table, `tierlab trace --cc`):
    /// threads wait at barriers and for locks in simulated time. Needs one simulated thread
    /// per recorded thread. No effect on recordings without the table.
    #[param(default = true, setting)]
    pub sync: bool,
}

/// Accesses handed to the driver per batch.
const BATCH: usize = 16_384;
/// Rows decoded per chunk of a recorded thread.
const CHUNK: usize = 1 << 16;
/// Accesses a folded recorded thread issues before the next one's turn when the recording
/// has no timestamps.
pub const SLICE: usize = 4096; // not a page size
/// Most mappings a replay creates from the touched pages.
pub const MAX_RUNS: usize = 4096; // not a page size
const PAGE: u64 = tierlab_core::PAGE_SIZE;

/// Merge ranges `(start, end, name)` that overlap (or touch, when `touch`); names of merged
/// ranges are joined with `+` when not touching.
fn merge(mut v: Vec<(u64, u64, String)>, touch: bool) -> Vec<(u64, u64, String)> {
    v.sort_by_key(|r| r.0);
    let mut out: Vec<(u64, u64, String)> = Vec::with_capacity(v.len());
    for r in v {
        match out.last_mut() {
            Some(last) if r.0 < last.1 || (touch && r.0 == last.1) => {
                if r.1 > last.1 {
                    last.1 = r.1;
                }
                if !touch && !last.2.split('+').any(|n| n == r.2) {
                    last.2 = format!("{}+{}", last.2, r.2);
                }
            }
            _ => out.push(r),
        }
    }
    out
}

/// Merge runs across the smallest gaps until at most `max` remain.
fn cap_runs(runs: Vec<(u64, u64)>, max: usize) -> Vec<(u64, u64)> {
    if runs.len() <= max {
        return runs;
    }
    let mut gaps: Vec<u64> = runs.windows(2).map(|w| w[1].0 - w[0].1).collect();
    gaps.sort_unstable();
    let limit = gaps[runs.len() - max - 1];
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(max);
    for r in runs {
        match out.last_mut() {
            Some(last) if r.0 - last.1 <= limit => last.1 = r.1,
            _ => out.push(r),
        }
    }
    out
}

/// Pieces of the runs, named after the given ranges (sorted, disjoint) that hold them and
/// `[replay]` elsewhere.
fn name_runs(runs: &[(u64, u64)], given: &[(u64, u64, String)]) -> Vec<(u64, u64, String)> {
    let mut out = Vec::new();
    for &(mut s, e) in runs {
        let first = given.partition_point(|c| c.1 <= s);
        for c in &given[first..] {
            if c.0 >= e {
                break;
            }
            if c.0 > s {
                out.push((s, c.0, "[replay]".to_string()));
            }
            let hi = c.1.min(e);
            out.push((s.max(c.0), hi, c.2.clone()));
            s = hi;
            if s >= e {
                break;
            }
        }
        if s < e {
            out.push((s, e, "[replay]".to_string()));
        }
    }
    out
}

/// Recorded mappings `(start, length, name)`, runs of touched pages, touched pages.
type Survey = (Vec<(u64, u64, String)>, Vec<(u64, u64)>, u64);

/// Where the accesses come from.
#[derive(Clone)]
enum Data {
    Memory(Arc<ReplayData>),
    Files { table: Arc<AccessTable>, unit: TimeUnit, dir: PathBuf },
}

impl Data {
    fn rows(&self) -> u64 {
        match self {
            Data::Memory(d) => d.len() as u64,
            Data::Files { table, .. } => table.rows(),
        }
    }
    fn thread_blocked(&self) -> bool {
        matches!(self, Data::Files { table, .. } if table.thread_blocked())
    }
}

/// One source of accesses in order: the rows of some recorded threads.
struct Stream {
    src: StreamSrc,
    acc: Vec<Access>,
    time: Vec<u64>,
    pos: usize,
    done: bool,
}

enum StreamSrc {
    Cursor(Box<AccessCursor>, AccessChunk),
    Memory { data: Arc<ReplayData>, tids: Vec<u32>, row: usize },
}

#[inline]
fn access(addr: u64, kind: u8) -> Access {
    if kind == 0 {
        Access::read(addr)
    } else {
        Access::write(addr)
    }
}

impl Stream {
    fn new(data: &Data, tids: Vec<u32>, with_time: bool) -> Stream {
        let src = match data {
            Data::Memory(d) => StreamSrc::Memory { data: d.clone(), tids, row: 0 },
            Data::Files { table, .. } => {
                let cols = Columns { time: with_time, tid: false, addr: true, kind: true, size: false };
                StreamSrc::Cursor(Box::new(table.cursor(cols, Some(tids))), AccessChunk::default())
            }
        };
        Stream { src, acc: Vec::new(), time: Vec::new(), pos: 0, done: false }
    }

    /// Make sure an access is buffered (false at the end of the stream).
    #[inline]
    fn ready(&mut self) -> Result<bool> {
        if self.pos < self.acc.len() {
            return Ok(true);
        }
        if self.done {
            return Ok(false);
        }
        self.acc.clear();
        self.time.clear();
        self.pos = 0;
        match &mut self.src {
            StreamSrc::Cursor(cur, chunk) => {
                if cur.next_chunk(chunk, CHUNK).map_err(rec_err)? {
                    self.acc.extend(chunk.addr.iter().zip(&chunk.kind).map(|(&a, &k)| access(a, k)));
                    std::mem::swap(&mut self.time, &mut chunk.time);
                }
            }
            StreamSrc::Memory { data, tids, row } => {
                let n = data.len();
                while *row < n && self.acc.len() < CHUNK {
                    if tids.binary_search(&data.tid[*row]).is_ok() {
                        self.acc.push(access(data.addr[*row], data.kind[*row]));
                        self.time.push(*row as u64);
                    }
                    *row += 1;
                }
            }
        }
        if self.acc.is_empty() {
            self.done = true;
            return Ok(false);
        }
        Ok(true)
    }

    #[inline]
    fn head_time(&self) -> u64 {
        self.time.get(self.pos).copied().unwrap_or(0)
    }
}

/// What a simulated thread replays.
struct Feed {
    streams: Vec<Stream>,
    /// Merge several streams by time (else round robin in slices).
    by_time: bool,
    cur: usize,
    slice_left: usize,
}

impl Feed {
    /// Append up to `max` accesses to `out`; the number appended (0 = the feed is done).
    fn fill(&mut self, out: &mut Vec<Access>, max: usize) -> Result<usize> {
        let start = out.len();
        if self.streams.len() == 1 {
            let s = &mut self.streams[0];
            while out.len() - start < max && s.ready()? {
                let n = (s.acc.len() - s.pos).min(max - (out.len() - start));
                out.extend_from_slice(&s.acc[s.pos..s.pos + n]);
                s.pos += n;
            }
            return Ok(out.len() - start);
        }
        if self.by_time {
            while out.len() - start < max {
                // The stream with the earliest next access (ties: the lower thread) runs
                // until another one's next access comes first.
                let (mut best, mut best_t) = (usize::MAX, u64::MAX);
                let (mut second, mut second_t) = (usize::MAX, u64::MAX);
                for i in 0..self.streams.len() {
                    if !self.streams[i].ready()? {
                        continue;
                    }
                    let t = self.streams[i].head_time();
                    if best == usize::MAX || t < best_t {
                        (second, second_t) = (best, best_t);
                        (best, best_t) = (i, t);
                    } else if second == usize::MAX || t < second_t {
                        (second, second_t) = (i, t);
                    }
                }
                if best == usize::MAX {
                    break;
                }
                let s = &mut self.streams[best];
                loop {
                    let room = max - (out.len() - start);
                    let end = (s.pos + room).min(s.acc.len());
                    let n = s.time[s.pos..end]
                        .iter()
                        .position(|&t| t > second_t || (t == second_t && best > second))
                        .unwrap_or(end - s.pos);
                    out.extend_from_slice(&s.acc[s.pos..s.pos + n]);
                    s.pos += n;
                    if s.pos < s.acc.len() || out.len() - start >= max || !s.ready()? {
                        break;
                    }
                }
            }
        } else {
            let k = self.streams.len();
            let mut idle = 0;
            while out.len() - start < max && idle < k {
                let s = &mut self.streams[self.cur];
                if self.slice_left == 0 || !s.ready()? {
                    self.cur = (self.cur + 1) % k;
                    self.slice_left = SLICE;
                    idle += 1;
                    continue;
                }
                idle = 0;
                let n = (s.acc.len() - s.pos).min(self.slice_left).min(max - (out.len() - start));
                out.extend_from_slice(&s.acc[s.pos..s.pos + n]);
                s.pos += n;
                self.slice_left -= n;
            }
        }
        Ok(out.len() - start)
    }
}

impl ReplayParams {
    fn dir(&self, ctx: &BuildCtx) -> Result<PathBuf> {
        if let Some(name) = self.path.strip_prefix("builtin:") {
            return builtin::materialize(name);
        }
        let p = PathBuf::from(&self.path);
        Ok(if p.is_absolute() { p } else { ctx.base_dir.join(p) })
    }

    /// The ranges `(start, end, name)` to map, disjoint and ascending, for the recorded
    /// mappings `given` (`(start, length, name)`) and the touched page runs; also the
    /// touched pages.
    fn plan(&self, given: &[(u64, u64, String)], runs: Vec<(u64, u64)>) -> Vec<(u64, u64, String)> {
        let given: Vec<(u64, u64, String)> = given
            .iter()
            .map(|(s, l, n)| {
                (s / PAGE * PAGE, s.saturating_add(*l).saturating_add(PAGE - 1) / PAGE * PAGE, n.clone())
            })
            .collect();
        let given = merge(given, false);
        let mut ranges = match self.mappings {
            MapMode::Touched => name_runs(&cap_runs(runs, MAX_RUNS), &given),
            MapMode::Recorded => {
                let outside: Vec<(u64, u64)> = name_runs(&runs, &given)
                    .into_iter()
                    .filter(|r| r.2 == "[replay]")
                    .map(|r| (r.0, r.1))
                    .collect();
                let mut all = given.clone();
                all.extend(name_runs(&cap_runs(outside, MAX_RUNS), &[]));
                all
            }
        };
        if let Some(p) = self.page_size {
            let b = p.bytes();
            ranges = ranges.into_iter().map(|(s, e, n)| (s / b * b, e.div_ceil(b) * b, n)).collect();
            ranges = merge(ranges, false);
        }
        ranges.sort_by_key(|r| r.0);
        ranges
    }
}

impl WorkloadParams for ReplayParams {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        let f = &ctx.scenario_file;
        if self.repeat == 0 {
            return Err(SimError::config(f, "workload.repeat", "must be at least 1"));
        }
        if self.node.is_some() && !self.populate {
            return Err(SimError::config(
                f,
                "workload.node",
                "`node` places populated memory: set populate = true",
            ));
        }
        let mut sync_events = Vec::new();
        let (data, tids) = match ctx.replay.clone() {
            Some(d) => {
                if d.is_empty() {
                    return Err(SimError::Input {
                        at: Location { file: self.path.clone(), line: None, field: Some("accesses".into()) },
                        msg: "the recording holds no accesses: there is nothing to replay".into(),
                    });
                }
                d.validate().map_err(|e| match e {
                    SimError::Input { mut at, msg } => {
                        at.file = self.path.clone();
                        SimError::Input { at, msg }
                    }
                    other => other,
                })?;
                let mut tids = d.tid.clone();
                tids.sort_unstable();
                tids.dedup();
                (Data::Memory(d), tids)
            }
            None => {
                let dir = self.dir(ctx)?;
                if !dir.is_dir() {
                    // The scenario names it: the place is the scenario's field.
                    return Err(SimError::Input {
                        at: Location { file: f.clone(), line: None, field: Some("workload.path".into()) },
                        msg: format!("{}: no such recording (directory not found)", dir.display()),
                    });
                }
                let meta = rec::read_meta(&dir).map_err(rec_err)?;
                let table = AccessTable::open(&dir).map_err(rec_err)?;
                if table.rows() == 0 {
                    return Err(no_accesses(&dir, &meta));
                }
                let tids = table.tids().map_err(rec_err)?;
                sync_events = rec::read_sync(&dir).map_err(rec_err)?;
                (Data::Files { table: Arc::new(table), unit: rec::time_unit(&meta), dir }, tids)
            }
        };
        let threads = self.threads.unwrap_or_else(|| {
            let n = tids.len().max(1);
            if ctx.cores > 0 {
                n.min(ctx.cores)
            } else {
                n
            }
        });
        if threads > tids.len().max(1) {
            return Err(SimError::config(
                f,
                "workload.threads",
                format!(
                    "{threads} simulated threads but the recording has {} thread(s): each simulated thread \
                     replays one or more recorded threads, so at most {}",
                    tids.len(),
                    tids.len()
                ),
            ));
        }
        check_threads("replay", threads, ctx)?;
        let sync = if self.sync && !sync_events.is_empty() {
            if threads < tids.len() {
                return Err(SimError::config(
                    f,
                    "workload.sync",
                    format!(
                        "the recording's {} threads synchronise ({} events in its `sync` table): each \
                         needs a simulated thread of its own, but {threads} simulated threads replay them \
                         (give the machine {} cores and workload.threads = {}, or set sync = false to \
                         replay without the synchronisation)",
                        tids.len(),
                        sync_events.len(),
                        tids.len(),
                        tids.len()
                    ),
                ));
            }
            sync::Sync::new(&sync_events, &tids)
        } else {
            None
        };
        let mut groups: Vec<Vec<u32>> = vec![Vec::new(); threads];
        for (i, &t) in tids.iter().enumerate() {
            groups[i % threads].push(t);
        }
        let mut w = Replay {
            p: self.clone(),
            data,
            groups,
            feeds: Vec::new(),
            rounds: vec![0; threads],
            issued: vec![0; threads],
            discarded: 0,
            recorded_threads: tids.len(),
            sync_events: sync_events.len() as u64,
            sync,
            pos: vec![0; threads],
            touched_pages: 0,
            mapped_bytes: 0,
            mappings: 0,
        };
        w.feeds = (0..threads).map(|t| w.feed(t)).collect();
        Ok(Box::new(w))
    }
}

/// The `replay` workload.
pub struct Replay {
    p: ReplayParams,
    data: Data,
    /// Recorded tids of each simulated thread.
    groups: Vec<Vec<u32>>,
    feeds: Vec<Feed>,
    rounds: Vec<u32>,
    issued: Vec<u64>,
    discarded: u64,
    recorded_threads: usize,
    /// Rows of the recording's `sync` table, and their plan when the replay obeys them.
    sync_events: u64,
    sync: Option<sync::Sync>,
    /// Accesses issued by each thread in its current round.
    pos: Vec<u64>,
    touched_pages: u64,
    mapped_bytes: u64,
    mappings: u64,
}

impl Replay {
    /// [`Workload::next_batch`] of a replay that obeys the recording's synchronisation: each
    /// batch ends at the thread's next sync point, where [`sync::Sync::advance`] decides
    /// whether it waits.
    fn next_synced(&mut self, t: usize, now: Ps, out: &mut Vec<Access>) -> Result<Step> {
        loop {
            let sync = self.sync.as_mut().expect("synchronised");
            if self.rounds[t] >= self.p.repeat {
                sync.finish(t);
                let at = sync.resume_at(t);
                return Ok(if at > now { Step::Resume(at) } else { Step::Done });
            }
            let (round, pos) = (self.rounds[t], self.pos[t]);
            let Some(limit) = sync.advance(t, round, pos, now, false, &self.rounds) else {
                return Ok(Step::Wait);
            };
            let max = usize::try_from(limit).unwrap_or(usize::MAX).min(BATCH);
            let n = self.feeds[t].fill(out, max)?;
            let sync = self.sync.as_mut().expect("synchronised");
            if n > 0 {
                self.issued[t] += n as u64;
                self.pos[t] += n as u64;
                let at = sync.resume_at(t);
                return Ok(if at > now { Step::Resume(at) } else { Step::Continue });
            }
            // The round's stream is over: its remaining points, then the next round.
            if sync.advance(t, round, pos, now, true, &self.rounds).is_none() {
                return Ok(Step::Wait);
            }
            self.rounds[t] += 1;
            self.pos[t] = 0;
            sync.start_round(t);
            let oldest = self.rounds.iter().copied().min().unwrap_or(0);
            sync.drop_rounds_before(oldest);
            if self.rounds[t] < self.p.repeat {
                self.feeds[t] = self.feed(t);
            }
        }
    }

    fn feed(&self, t: usize) -> Feed {
        let tids = &self.groups[t];
        let blocked = self.data.thread_blocked();
        let by_time = !matches!(self.data, Data::Files { unit: TimeUnit::Accesses, .. });
        let streams = if tids.len() <= 1 || !blocked {
            vec![Stream::new(&self.data, tids.clone(), false)]
        } else {
            tids.iter().map(|&tid| Stream::new(&self.data, vec![tid], by_time)).collect()
        };
        Feed { streams, by_time, cur: 0, slice_left: SLICE }
    }

    /// The recorded mappings and the runs of touched pages: from the writer's list in
    /// `meta.json` when it has one for these rows, else from one pass over the addresses.
    fn survey(&self) -> Result<Survey> {
        let mut set = PageSet::default();
        match &self.data {
            Data::Memory(d) => {
                d.addr.iter().for_each(|&a| set.insert(a));
                let (runs, pages) = set.runs();
                Ok((d.mappings.clone(), runs, pages))
            }
            Data::Files { table, dir, .. } => {
                let given = rec::read_mappings(dir)
                    .map_err(rec_err)?
                    .into_iter()
                    .filter(|m| m.map && m.length > 0)
                    .map(|m| (m.start, m.length, m.name))
                    .collect();
                if let Some((runs, pages)) =
                    rec::read_meta(dir).ok().and_then(|m| rec::touched_runs(&m, table.rows()))
                {
                    return Ok((given, runs, pages));
                }
                let cols = Columns { time: false, tid: false, addr: true, kind: false, size: false };
                let mut cur = table.cursor(cols, None);
                let mut chunk = AccessChunk::default();
                while cur.next_chunk(&mut chunk, CHUNK).map_err(rec_err)? {
                    chunk.addr.iter().for_each(|&a| set.insert(a));
                }
                let (runs, pages) = set.runs();
                Ok((given, runs, pages))
            }
        }
    }
}

impl Workload for Replay {
    fn threads(&self) -> usize {
        self.groups.len()
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        let (given, runs, pages) = self.survey()?;
        self.touched_pages = pages;
        for (s, e, name) in self.p.plan(&given, runs) {
            if e > crate::hw::pagetable::VA_LIMIT {
                return Err(SimError::Input {
                    at: Location {
                        file: self.p.path.clone(),
                        line: None,
                        field: Some("accesses.addr".into()),
                    },
                    msg: format!(
                        "`{name}` ({s:#x}..{e:#x}) lies beyond the simulated machine's 48-bit virtual \
                         addresses (4-level paging): its accesses cannot be replayed as recorded"
                    ),
                });
            }
            let page_size = match self.p.page_size {
                Some(p) => Some(p),
                None if (s | e) & (tierlab_core::HUGE_SIZE - 1) == 0 => None,
                None => Some(PageSize::Base4K),
            };
            let populate = self.p.populate && self.p.node.is_none();
            let opts = MapOptions { name, page_size, populate, thread: 0 };
            mem.mmap_fixed(s, e - s, opts)?;
            if let Some(n) = self.p.node {
                mem.populate_on(s, e - s, n)?;
            }
            self.mapped_bytes += e - s;
            self.mappings += 1;
        }
        Ok(())
    }

    fn next_batch(
        &mut self,
        t: usize,
        now: Ps,
        out: &mut Vec<Access>,
        _mem: &mut dyn AddressSpace,
    ) -> Result<Step> {
        if self.sync.is_some() {
            return self.next_synced(t, now, out);
        }
        loop {
            if self.rounds[t] >= self.p.repeat {
                return Ok(Step::Done);
            }
            let n = self.feeds[t].fill(out, BATCH)?;
            if n > 0 {
                self.issued[t] += n as u64;
                return Ok(Step::Continue);
            }
            self.rounds[t] += 1;
            if self.rounds[t] < self.p.repeat {
                self.feeds[t] = self.feed(t);
            }
        }
    }

    fn discard(&mut self, _t: usize, unexecuted: &[Access]) {
        // (A synchronised replay's positions are not rewound: the run is over.)
        self.discarded += unexecuted.len() as u64;
    }

    fn report_stats(&self, out: &mut Stats) {
        out.set("workload.accesses", self.issued.iter().sum::<u64>() - self.discarded);
        out.set("workload.recorded_accesses", self.data.rows());
        out.set("workload.recorded_threads", self.recorded_threads as u64);
        out.set("workload.touched_pages", self.touched_pages);
        out.set("workload.mapped_bytes", self.mapped_bytes);
        out.set("workload.mappings", self.mappings);
        if self.sync_events > 0 {
            out.set("workload.sync_events", self.sync_events);
            let s = self.sync.as_ref();
            out.set("workload.sync_points", s.map_or(0, |s| s.applied));
            out.set("workload.sync_wait_s", s.map_or(0.0, |s| s.waited_ps as f64 / 1e12));
            out.set("workload.sync_forced", s.map_or(0, |s| s.forced_points));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::masim::testing::*;
    use super::*;

    fn ctx(data: ReplayData) -> BuildCtx {
        BuildCtx {
            seed: 1,
            scenario_file: "s.toml".into(),
            cores: 4,
            duration: Ps::ZERO,
            replay: Some(Arc::new(data)),
            ..Default::default()
        }
    }

    fn sample() -> ReplayData {
        ReplayData {
            addr: vec![0x1000_0010, 0x1000_2000, 0x7f00_0000_0040, 0x1000_0010, 0x5000_0000, 0x1000_1ff8],
            tid: vec![30, 10, 20, 10, 30, 10],
            kind: vec![0, 1, 0, 1, 0, 0],
            mappings: vec![(0x1000_0000, 0x2100, "heap".into()), (0x7f00_0000_0000, 0x1000, "stack".into())],
        }
    }

    fn params(t: &str) -> ReplayParams {
        toml::from_str(t).unwrap()
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tierlab-replay-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn drive_all(w: &mut dyn Workload) -> (Vec<Vec<Access>>, MockSpace) {
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let mut per: Vec<Vec<Access>> = vec![Vec::new(); w.threads()];
        drive(w, &mut mem, Ps::NS, Ps::ZERO, |t, _, a| per[t].push(*a));
        (per, mem)
    }

    #[test]
    fn validate_names_column_and_row() {
        let mut d = sample();
        d.kind[3] = 7;
        let e = d.validate().unwrap_err();
        assert_eq!(e.kind(), "input");
        let s = e.to_string();
        assert!(s.contains("row 3") && s.contains("`kind`"), "{s}");
        let mut d = sample();
        d.tid.pop();
        assert!(d.validate().unwrap_err().to_string().contains("column `tid` has 5 rows"));
        let mut d = sample();
        d.mappings.push((0x1000_2000, 0x10, "x".into()));
        let s = d.validate().unwrap_err().to_string();
        assert!(s.contains("row 2") && s.contains("overlaps row 0"), "{s}");
        let mut d = sample();
        d.mappings[1].1 = 0;
        assert!(d.validate().unwrap_err().to_string().contains("length 0"));
        // Build reports the recording's path.
        let mut d = sample();
        d.kind[0] = 2;
        let e = params("path = \"rec\"").build(&ctx(d)).err().unwrap();
        assert!(e.to_string().starts_with("rec"), "{e}");
    }

    #[test]
    fn a_recording_without_accesses_is_refused() {
        let mut d = sample();
        d.addr.clear();
        d.tid.clear();
        d.kind.clear();
        let e = params("path = \"rec\"").build(&ctx(d)).err().unwrap();
        assert_eq!(e.kind(), "input");
        assert!(e.to_string().contains("no accesses"), "{e}");
    }

    #[test]
    fn more_threads_than_recorded_ones_are_refused() {
        // sample() has three recorded threads: a fourth simulated one would idle.
        let e = params("path = \"rec\"\nthreads = 4").build(&ctx(sample())).err().unwrap();
        assert!(e.to_string().contains("workload.threads") && e.to_string().contains("3 thread(s)"), "{e}");
        assert!(params("path = \"rec\"\nthreads = 3").build(&ctx(sample())).is_ok());
    }

    #[test]
    fn missing_recording_is_an_input_error() {
        let c = BuildCtx { replay: None, base_dir: tmpdir("none"), ..ctx(sample()) };
        let e = params("path = \"rec\"").build(&c).err().unwrap();
        assert_eq!(e.kind(), "input");
        assert!(e.to_string().contains("no such recording"), "{e}");
    }

    #[test]
    fn addresses_beyond_48_bits_are_refused_naming_the_recording() {
        for mapped in [true, false] {
            let mut d = sample();
            d.addr[2] = 0xffff_ffff_ffff_e010;
            if mapped {
                d.mappings[1] = (0xffff_ffff_ffff_e000, 0x1000, "top".into());
            } else {
                d.mappings.pop();
            }
            let mut w = params("path = \"rec\"").build(&ctx(d)).unwrap();
            let e = w.setup(&mut MockSpace::new()).unwrap_err().to_string();
            assert!(e.starts_with("rec") && e.contains("48-bit"), "{e}");
        }
    }

    #[test]
    fn touched_pages_are_mapped_and_named() {
        let mut w = params("path = \"rec\"").build(&ctx(sample())).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let got: Vec<(u64, u64, String)> =
            mem.maps.iter().map(|m| (m.start, m.len, m.opts.name.clone())).collect();
        assert_eq!(
            got,
            vec![
                (0x1000_0000, 0x3000, "heap".to_string()),
                (0x5000_0000, 0x1000, "[replay]".to_string()),
                (0x7f00_0000_0000, 0x1000, "stack".to_string()),
            ]
        );
        assert_eq!(mem.find("heap").opts.page_size, Some(PageSize::Base4K));
        let mut s = Stats::new();
        w.report_stats(&mut s);
        assert_eq!(s.get_u64("workload.touched_pages"), 5);
        // A recorded mapping only partly touched: only its touched pages; runs split at the
        // recorded boundaries keep each name.
        let d = ReplayData {
            addr: vec![0x1000, 0x3000, 0x4000, 0x30_0000],
            tid: vec![1; 4],
            kind: vec![0; 4],
            mappings: vec![(0x0, 0x3800, "a".into()), (0x4000, 0x40_0000, "b".into())],
        };
        let p = params("path = \"r\"");
        let mut w = p.build(&ctx(d.clone())).unwrap();
        let (_, mem) = drive_all(w.as_mut());
        let got: Vec<(u64, u64, String)> =
            mem.maps.iter().map(|m| (m.start, m.len, m.opts.name.clone())).collect();
        assert_eq!(
            got,
            vec![
                (0x1000, 0x1000, "a".to_string()),
                (0x3000, 0x1000, "a".to_string()),
                (0x4000, 0x1000, "b".to_string()),
                (0x30_0000, 0x1000, "b".to_string()),
            ]
        );
        // Recorded mode maps them whole.
        let mut w = params("path = \"r\"\nmappings = \"recorded\"").build(&ctx(d)).unwrap();
        let (_, mem) = drive_all(w.as_mut());
        let got: Vec<(u64, u64)> = mem.maps.iter().map(|m| (m.start, m.len)).collect();
        assert_eq!(got, vec![(0x0, 0x4000), (0x4000, 0x40_0000)]);
    }

    #[test]
    fn runs_are_capped_across_the_smallest_gaps() {
        let runs: Vec<(u64, u64)> =
            (0..10u64).map(|i| (i * 10 * PAGE + (i % 2) * PAGE, i * 10 * PAGE + 2 * PAGE)).collect();
        let capped = cap_runs(runs.clone(), 5);
        assert!(capped.len() <= 5, "{capped:?}");
        assert_eq!(capped.first().unwrap().0, runs[0].0);
        assert_eq!(capped.last().unwrap().1, runs[9].1);
        assert_eq!(cap_runs(runs.clone(), 10), runs);
    }

    #[test]
    fn replays_in_order_per_thread_and_folds() {
        let d = sample();
        // Three tids: 10 -> thread 0, 20 -> thread 1, 30 -> thread 2.
        let mut w = params("path = \"rec\"\nrepeat = 2").build(&ctx(d.clone())).unwrap();
        assert_eq!(w.threads(), 3);
        let (per, mem) = drive_all(w.as_mut());
        let rows = |idx: &[usize]| -> Vec<Access> {
            let one: Vec<Access> = idx.iter().map(|&i| access(d.addr[i], d.kind[i])).collect();
            [one.clone(), one].concat()
        };
        assert_eq!(per[0], rows(&[1, 3, 5]));
        assert_eq!(per[1], rows(&[2]));
        assert_eq!(per[2], rows(&[0, 4]));
        assert!(per.iter().flatten().all(|a| mem.contains(a.addr)));
        // `loop_count` is the old name of `repeat`.
        assert_eq!(params("path = \"r\"\nloop_count = 3").repeat, 3);
        // Folded onto two threads: tid 30 (rank 2) joins tid 10 on thread 0, in recorded order.
        let mut w = params("path = \"rec\"\nthreads = 2").build(&ctx(d.clone())).unwrap();
        let (per, _) = drive_all(w.as_mut());
        let one = |idx: &[usize]| idx.iter().map(|&i| access(d.addr[i], d.kind[i])).collect::<Vec<_>>();
        assert_eq!(per[0], one(&[0, 1, 3, 4, 5]));
        assert_eq!(per[1], one(&[2]));
        // One thread: the whole stream in order.
        let mut w = params("path = \"rec\"\nthreads = 1").build(&ctx(d.clone())).unwrap();
        let (per, _) = drive_all(w.as_mut());
        assert_eq!(per[0], one(&[0, 1, 2, 3, 4, 5]));
        let mut s = Stats::new();
        w.report_stats(&mut s);
        assert_eq!(s.get_u64("workload.accesses"), 6);
    }

    #[test]
    fn recorded_threads_fold_onto_cores() {
        let d = ReplayData { addr: vec![0; 8], tid: (0..8).collect(), kind: vec![0; 8], mappings: vec![] };
        assert_eq!(params("path = \"r\"").build(&ctx(d.clone())).unwrap().threads(), 4);
        assert_eq!(params("path = \"r\"\nthreads = 3").build(&ctx(d.clone())).unwrap().threads(), 3);
        let e = params("path = \"r\"\nthreads = 5").build(&ctx(d)).err().unwrap().to_string();
        assert!(e.contains("workload.threads"), "{e}");
    }

    /// A thread-blocked recording on disk: tids 1, 2, 3 with `n` accesses each; thread `t`'s
    /// access `i` at time `i * t` (or no timestamps).
    fn write_blocked(dir: &std::path::Path, n: u64, unit: &str) {
        let mut w = rec::RecordingWriter::create(
            dir,
            "test",
            rec::WriterOptions { part_rows: 700, ..Default::default() },
        )
        .unwrap();
        w.meta_mut().insert("time_unit".into(), serde_json::json!(unit));
        for t in 1..=3u64 {
            for lo in (0..n).step_by(500) {
                let hi = (lo + 500).min(n);
                w.write_accesses(&AccessChunk {
                    time: (lo..hi).map(|i| i * t).collect(),
                    tid: vec![t as u32; (hi - lo) as usize],
                    addr: (lo..hi).map(|i| (t << 32) + i * 64).collect(),
                    kind: (lo..hi).map(|i| (i % 2) as u8).collect(),
                    size: vec![],
                })
                .unwrap();
            }
        }
        w.close().unwrap();
    }

    fn file_ctx(dir: &std::path::Path, cores: usize) -> BuildCtx {
        BuildCtx {
            seed: 1,
            scenario_file: "s.toml".into(),
            cores,
            base_dir: dir.parent().unwrap().to_path_buf(),
            ..Default::default()
        }
    }

    #[test]
    fn streams_from_disk_per_thread_and_merges_by_time() {
        let d = tmpdir("disk");
        write_blocked(&d, 2000, "ns");
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        let p = params(&format!("path = \"{name}\""));
        let mut w = p.build(&file_ctx(&d, 4)).unwrap();
        assert_eq!(w.threads(), 3);
        let (per, mem) = drive_all(w.as_mut());
        for (t, acc) in per.iter().enumerate() {
            let tid = t as u64 + 1;
            assert_eq!(acc.len(), 2000);
            assert!(acc.iter().enumerate().all(|(i, a)| a.addr == (tid << 32) + i as u64 * 64));
            assert!(acc.iter().enumerate().all(|(i, a)| a.is_write() == (i % 2 == 1)));
        }
        // Touched pages: 2000 * 64 B = 32 pages per thread, one run each.
        assert_eq!(mem.maps.len(), 3);
        assert!(mem.maps.iter().all(|m| m.len == 32 * PAGE && m.opts.name == "[replay]"));
        // Folded on one core: merged by time (thread t's access i at time i * t).
        let mut w = params(&format!("path = \"{name}\"\nthreads = 1")).build(&file_ctx(&d, 4)).unwrap();
        let (per, _) = drive_all(w.as_mut());
        let mut want: Vec<(u64, u64, u64)> =
            (1..=3u64).flat_map(|t| (0..2000u64).map(move |i| (i * t, t, (t << 32) + i * 64))).collect();
        want.sort();
        assert_eq!(
            per[0].iter().map(|a| a.addr).collect::<Vec<_>>(),
            want.iter().map(|w| w.2).collect::<Vec<_>>()
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn without_timestamps_folded_threads_take_turns() {
        let d = tmpdir("slices");
        write_blocked(&d, 10_000, "accesses");
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        let mut w =
            params(&format!("path = \"{name}\"\nthreads = 1\nrepeat = 2")).build(&file_ctx(&d, 1)).unwrap();
        let (per, _) = drive_all(w.as_mut());
        let a = &per[0];
        assert_eq!(a.len(), 60_000);
        // SLICE accesses of thread 1, then of thread 2, then 3, then thread 1 again.
        let tid = |x: &Access| x.addr >> 32;
        assert!(a[..SLICE].iter().all(|x| tid(x) == 1));
        assert!(a[SLICE..2 * SLICE].iter().all(|x| tid(x) == 2));
        assert!(a[3 * SLICE..4 * SLICE].iter().all(|x| tid(x) == 1));
        for t in 1..=3 {
            assert_eq!(a.iter().filter(|x| tid(x) == t).count(), 20_000);
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn builtin_recordings_replay() {
        let c = BuildCtx { replay: None, cores: 4, ..ctx(sample()) };
        let w = params("path = \"builtin:omp-stencil\"").build(&c).unwrap();
        assert_eq!(w.threads(), 4);
        let e = params("path = \"builtin:nope\"").build(&c).err().unwrap().to_string();
        assert!(e.contains("omp-stencil"), "{e}");
    }
}
