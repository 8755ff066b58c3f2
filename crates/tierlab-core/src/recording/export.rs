//! Streaming exporters of a recording's accesses into other tools' trace formats.
//!
//! The accesses of every thread (or of the threads asked for) are merged into one stream in
//! `(time, tid)` order, each thread's rows read chunk by chunk, so memory does not grow with
//! the recording's length. Formats (`docs/formats.md` has the byte layouts):
//! - **oracleGeneral** (libCacheSim): 24-byte records `(u32 clock_time, u64 obj_id, u32
//!   obj_size, i64 next_access_vtime)`; `next_access_vtime` is the 1-based position of the
//!   object's next request (-1: none), computed by a second pass that reads the written
//!   file backwards and rewrites it in place. That pass keeps one entry per distinct object
//!   (memory grows with the objects, not the length).
//! - **lcs** (libCacheSim): an 8192-byte header (start magic, version 1, the trace's
//!   statistics, end magic) followed by oracleGeneral records.
//! - **valpin** (libCacheSim's plain address stream): one little-endian u64 object id per
//!   request.
//! - **ramulator** (Ramulator 2's `LoadStoreTrace`): one `LD 0x<addr>` / `ST 0x<addr>` line
//!   per access.
//! - **champsim**: ChampSim's 64-byte `input_instr` records, one memory instruction per
//!   access; the instruction pointer is synthesised (no recording has it per access).
//! - **csv**: `tid,time,addr,kind,size` lines, the layout the CSV importer reads back.
//!
//! The output is written to a temporary file beside it and renamed into place at the end:
//! an export that fails or is stopped leaves no partial trace under the name asked for.

use std::collections::{BinaryHeap, HashMap};
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::{AccessChunk, AccessCursor, AccessTable, Columns, RecordingError, Result, TimeUnit};

/// A trace format tierlab writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// libCacheSim oracleGeneral.
    OracleGeneral,
    /// libCacheSim lcs, version 1.
    Lcs,
    /// libCacheSim valpin (u64 object ids).
    Valpin,
    /// Ramulator 2 load/store text trace.
    Ramulator,
    /// ChampSim binary instruction trace.
    ChampSim,
    /// CSV `tid,time,addr,kind,size`.
    Csv,
}

impl Format {
    /// Every format, with its name.
    pub const ALL: [(&'static str, Format); 6] = [
        ("oracle-general", Format::OracleGeneral),
        ("lcs", Format::Lcs),
        ("valpin", Format::Valpin),
        ("ramulator", Format::Ramulator),
        ("champsim", Format::ChampSim),
        ("csv", Format::Csv),
    ];

    /// The format called `name`.
    pub fn parse(name: &str) -> Option<Format> {
        Format::ALL.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
    }

    /// True for the formats whose requests are objects (granularity applies).
    pub fn objects(self) -> bool {
        matches!(self, Format::OracleGeneral | Format::Lcs | Format::Valpin)
    }
}

/// What to export.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// The format.
    pub format: Format,
    /// Bytes per object of the object formats (a power of two: 64 for cache lines, 4096 for
    /// pages); an object's id is its address divided by it, its size this many bytes.
    pub object_bytes: u64,
    /// Only these threads (sorted); `None`: every thread.
    pub threads: Option<Vec<u32>>,
    /// Rows decoded at a time from each thread (memory: about 30 bytes a row a thread).
    pub chunk_rows: usize,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            format: Format::Csv,
            object_bytes: crate::page::PAGE_SIZE,
            threads: None,
            chunk_rows: 1 << 16,
        }
    }
}

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportCounts {
    /// Requests (accesses) written.
    pub accesses: u64,
    /// Loads among them.
    pub loads: u64,
    /// Stores among them.
    pub stores: u64,
    /// Threads merged.
    pub threads: u64,
    /// Distinct objects (oracleGeneral and lcs only; 0 otherwise).
    pub objects: u64,
    /// Bytes of the file written.
    pub bytes: u64,
}

/// One access of the merged stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// Time in the recording's unit.
    pub time: u64,
    /// Thread.
    pub tid: u32,
    /// Virtual address.
    pub addr: u64,
    /// 0 load, 1 store.
    pub kind: u8,
    /// Bytes accessed (0: unknown).
    pub size: u8,
}

struct ThreadStream {
    cursor: AccessCursor,
    chunk: AccessChunk,
    pos: usize,
    done: bool,
}

impl ThreadStream {
    fn fill(&mut self, rows: usize) -> Result<()> {
        while !self.done && self.pos >= self.chunk.addr.len() {
            self.pos = 0;
            if !self.cursor.next_chunk(&mut self.chunk, rows)? {
                self.done = true;
                self.chunk.clear();
            }
        }
        Ok(())
    }
    fn peek(&self) -> Option<Row> {
        let i = self.pos;
        (i < self.chunk.addr.len()).then(|| Row {
            time: self.chunk.time[i],
            tid: self.chunk.tid[i],
            addr: self.chunk.addr[i],
            kind: self.chunk.kind[i],
            size: self.chunk.size.get(i).copied().unwrap_or(0),
        })
    }
}

/// The accesses of a recording's threads merged in `(time, tid)` order (each thread's rows
/// in table order), read chunk by chunk.
pub struct Merged {
    streams: Vec<ThreadStream>,
    heap: BinaryHeap<std::cmp::Reverse<(u64, u32, usize)>>,
    rows: usize,
    /// The file the rows come from, for errors.
    pub dir: PathBuf,
}

impl Merged {
    /// Merge the threads `threads` (`None`: all) of `table`.
    pub fn new(table: &AccessTable, threads: Option<&[u32]>, chunk_rows: usize) -> Result<Merged> {
        let all = table.tids()?;
        let tids: Vec<u32> = match threads {
            None => all,
            Some(want) => {
                if let Some(t) = want.iter().find(|t| !all.contains(t)) {
                    return Err(RecordingError::file(
                        table.dir.display().to_string(),
                        format!("has no thread {t} (its threads: {})", list(&all)),
                    ));
                }
                want.to_vec()
            }
        };
        // Bounded memory whatever the number of threads: fewer rows each when there are many.
        let rows = (chunk_rows.max(1) * 64 / tids.len().max(64)).clamp(1024, chunk_rows.max(1024));
        let mut m = Merged { streams: Vec::new(), heap: BinaryHeap::new(), rows, dir: table.dir.clone() };
        let cols = Columns { time: true, tid: true, addr: true, kind: true, size: true };
        for t in tids {
            let mut s = ThreadStream {
                cursor: table.cursor(cols, Some(vec![t])),
                chunk: AccessChunk::default(),
                pos: 0,
                done: false,
            };
            s.fill(rows)?;
            if let Some(r) = s.peek() {
                m.heap.push(std::cmp::Reverse((r.time, r.tid, m.streams.len())));
            }
            m.streams.push(s);
        }
        Ok(m)
    }

    /// Threads merged.
    pub fn threads(&self) -> usize {
        self.streams.len()
    }

    /// The next access, or `None` at the end.
    pub fn next_row(&mut self) -> Result<Option<Row>> {
        let Some(std::cmp::Reverse((_, _, i))) = self.heap.pop() else { return Ok(None) };
        let s = &mut self.streams[i];
        let row = s.peek().expect("a stream in the heap has a row");
        s.pos += 1;
        s.fill(self.rows)?;
        if let Some(r) = s.peek() {
            self.heap.push(std::cmp::Reverse((r.time, r.tid, i)));
        }
        Ok(Some(row))
    }
}

fn list(v: &[u32]) -> String {
    let shown: Vec<String> = v.iter().take(20).map(|t| t.to_string()).collect();
    if v.len() > 20 {
        format!("{}, ... ({} in all)", shown.join(", "), v.len())
    } else {
        shown.join(", ")
    }
}

/// Size of an oracleGeneral / lcs v1 record.
pub const ORACLE_RECORD: usize = 24;
/// Size of the lcs header.
pub const LCS_HEADER: usize = 8192;
/// lcs start and end magic.
pub const LCS_MAGIC: u64 = 0x1234_5678_9abc_def0;
/// Size of a ChampSim `input_instr` record.
pub const CHAMPSIM_RECORD: usize = 64;
/// Instruction pointer given to every exported ChampSim instruction of thread 0; thread
/// `t`'s instructions get `CHAMPSIM_IP + 64 * t` (ChampSim needs one; recordings have none).
pub const CHAMPSIM_IP: u64 = 0x40_0000;

/// A hasher for u64 keys (the object ids): one multiply, enough for a hash table's buckets.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ (v >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type IdMap = HashMap<u64, u32, BuildHasherDefault<IdHasher>>;

fn io(path: &Path, e: impl std::fmt::Display) -> RecordingError {
    RecordingError::file(path.display().to_string(), e.to_string())
}

/// A temporary file beside `out`, removed unless [`Tmp::keep`] renames it to `out`.
struct Tmp {
    path: PathBuf,
    out: PathBuf,
    kept: bool,
}

impl Tmp {
    fn new(out: &Path) -> Result<(Tmp, File)> {
        let name = out.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        if name.is_empty() {
            return Err(io(out, "the output must name a file"));
        }
        if out.is_dir() {
            return Err(io(out, "is a directory; the output must name a file"));
        }
        let path = out.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| io(&path, format!("cannot create: {e}")))?;
        Ok((Tmp { path, out: out.to_path_buf(), kept: false }, f))
    }
    fn keep(mut self) -> Result<()> {
        std::fs::rename(&self.path, &self.out).map_err(|e| io(&self.out, format!("cannot write: {e}")))?;
        self.kept = true;
        Ok(())
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The `clock_time` of a libCacheSim record: whole seconds since the first access for a
/// recording timed in ns; the request's position otherwise (saturating at u32::MAX).
fn clock(unit: TimeUnit, t0: u64, time: u64, index: u64) -> u32 {
    let v = match unit {
        TimeUnit::Ns => time.saturating_sub(t0) / 1_000_000_000,
        _ => index,
    };
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// Export the accesses of the recording `table` (its `meta.json` time unit `unit`) to `out`.
/// `stop` is polled between chunks: when it returns true the export ends with an error and
/// nothing is left at `out`.
pub fn export(
    table: &AccessTable,
    unit: TimeUnit,
    out: &Path,
    opts: &ExportOptions,
    stop: &dyn Fn() -> bool,
) -> Result<ExportCounts> {
    if opts.format.objects() && !opts.object_bytes.is_power_of_two() {
        return Err(RecordingError::file(
            out.display().to_string(),
            format!("object size {} bytes: expected a power of two (64, 4096, ...)", opts.object_bytes),
        ));
    }
    let shift = opts.object_bytes.trailing_zeros();
    let mut merged = Merged::new(table, opts.threads.as_deref(), opts.chunk_rows)?;
    let (tmp, file) = Tmp::new(out)?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let mut counts = ExportCounts { threads: merged.threads() as u64, ..Default::default() };
    let header = if opts.format == Format::Lcs { LCS_HEADER } else { 0 };
    w.write_all(&vec![0u8; header]).map_err(|e| io(&tmp.path, e))?;
    if opts.format == Format::Csv {
        w.write_all(b"tid,time,addr,kind,size\n").map_err(|e| io(&tmp.path, e))?;
    }
    let obj_size = u32::try_from(opts.object_bytes).unwrap_or(u32::MAX);
    let mut t0: Option<u64> = None;
    let mut last_time = 0u64;
    let mut line = Vec::with_capacity(64);
    while let Some(r) = merged.next_row()? {
        let i = counts.accesses;
        if i.is_multiple_of(1 << 16) && stop() {
            return Err(io(out, "interrupted; nothing written"));
        }
        counts.accesses += 1;
        if r.kind == 1 {
            counts.stores += 1;
        } else {
            counts.loads += 1;
        }
        let first = *t0.get_or_insert(r.time);
        last_time = r.time;
        let e = |e: std::io::Error| io(&tmp.path, e);
        match opts.format {
            Format::OracleGeneral | Format::Lcs => {
                let mut rec = [0u8; ORACLE_RECORD];
                rec[..4].copy_from_slice(&clock(unit, first, r.time, i).to_le_bytes());
                rec[4..12].copy_from_slice(&(r.addr >> shift).to_le_bytes());
                rec[12..16].copy_from_slice(&obj_size.to_le_bytes());
                rec[16..].copy_from_slice(&(-1i64).to_le_bytes());
                w.write_all(&rec).map_err(e)?;
            }
            Format::Valpin => w.write_all(&(r.addr >> shift).to_le_bytes()).map_err(e)?,
            Format::Ramulator => {
                line.clear();
                let _ = writeln!(line, "{} 0x{:x}", if r.kind == 1 { "ST" } else { "LD" }, r.addr);
                w.write_all(&line).map_err(e)?;
            }
            Format::ChampSim => {
                let mut rec = [0u8; CHAMPSIM_RECORD];
                let ip = CHAMPSIM_IP.wrapping_add(64 * u64::from(r.tid));
                rec[..8].copy_from_slice(&ip.to_le_bytes());
                // is_branch, branch_taken, 2 destination and 4 source registers: all 0 (none).
                // destination_memory[0] at 16 for a store, source_memory[0] at 32 for a load.
                let at = if r.kind == 1 { 16 } else { 32 };
                rec[at..at + 8].copy_from_slice(&r.addr.to_le_bytes());
                w.write_all(&rec).map_err(e)?;
            }
            Format::Csv => {
                line.clear();
                let _ = writeln!(line, "{},{},0x{:x},{},{}", r.tid, r.time, r.addr, r.kind, r.size);
                w.write_all(&line).map_err(e)?;
            }
        }
    }
    let mut file = w.into_inner().map_err(|e| io(&tmp.path, e.error()))?;
    if matches!(opts.format, Format::OracleGeneral | Format::Lcs) {
        let objects = next_access_pass(&mut file, &tmp.path, header as u64, counts.accesses, stop)?;
        counts.objects = objects;
        if opts.format == Format::Lcs {
            let span = match unit {
                TimeUnit::Ns => last_time.saturating_sub(t0.unwrap_or(0)) / 1_000_000_000,
                _ => counts.accesses.saturating_sub(1),
            };
            let h = lcs_header(&counts, opts.object_bytes, span);
            file.seek(SeekFrom::Start(0)).map_err(|e| io(&tmp.path, e))?;
            file.write_all(&h).map_err(|e| io(&tmp.path, e))?;
        }
    }
    file.flush().map_err(|e| io(&tmp.path, e))?;
    file.sync_all().map_err(|e| io(&tmp.path, e))?;
    counts.bytes = file.metadata().map_err(|e| io(&tmp.path, e))?.len();
    drop(file);
    tmp.keep()?;
    Ok(counts)
}

/// Fill in `next_access_vtime` of the `n` oracleGeneral records after `start` in `file`:
/// read backwards chunk by chunk, each chunk rewritten in place. Returns the distinct
/// objects.
fn next_access_pass(
    file: &mut File,
    path: &Path,
    start: u64,
    n: u64,
    stop: &dyn Fn() -> bool,
) -> Result<u64> {
    const CHUNK: u64 = 1 << 18;
    let mut next: IdMap = IdMap::default();
    // Objects seen so far (from the end) and the 1-based position of their next request;
    // the positions fit in u32 for traces below 2^32 requests, else a wider map is used.
    let mut wide: HashMap<u64, u64, BuildHasherDefault<IdHasher>> = HashMap::default();
    let narrow = n < u64::from(u32::MAX);
    let mut buf = vec![0u8; CHUNK as usize * ORACLE_RECORD];
    let mut end = n;
    while end > 0 {
        if stop() {
            return Err(io(path, "interrupted; nothing written"));
        }
        let begin = end.saturating_sub(CHUNK);
        let len = ((end - begin) as usize) * ORACLE_RECORD;
        let at = start + begin * ORACLE_RECORD as u64;
        file.seek(SeekFrom::Start(at)).map_err(|e| io(path, e))?;
        file.read_exact(&mut buf[..len]).map_err(|e| io(path, e))?;
        for k in (0..(end - begin) as usize).rev() {
            let rec = &mut buf[k * ORACLE_RECORD..(k + 1) * ORACLE_RECORD];
            let id = u64::from_le_bytes(rec[4..12].try_into().expect("8"));
            let vtime = begin + k as u64 + 1; // 1-based, as libCacheSim's traceConv
            let prev: i64 = if narrow {
                next.insert(id, vtime as u32).map_or(-1, i64::from)
            } else {
                wide.insert(id, vtime).map_or(-1, |v| v as i64)
            };
            rec[16..].copy_from_slice(&prev.to_le_bytes());
        }
        file.seek(SeekFrom::Start(at)).map_err(|e| io(path, e))?;
        file.write_all(&buf[..len]).map_err(|e| io(path, e))?;
        end = begin;
    }
    Ok(if narrow { next.len() } else { wide.len() } as u64)
}

/// The lcs header (version 1): magic, version, the statistics libCacheSim's reader checks
/// and prints (requests, objects, bytes, reads/writes, object size), magic.
fn lcs_header(c: &ExportCounts, object_bytes: u64, span_s: u64) -> Vec<u8> {
    let mut h = vec![0u8; LCS_HEADER];
    let put = |h: &mut Vec<u8>, at: usize, v: i64| h[at..at + 8].copy_from_slice(&v.to_le_bytes());
    h[..8].copy_from_slice(&LCS_MAGIC.to_le_bytes());
    h[8..16].copy_from_slice(&1u64.to_le_bytes());
    // The statistics start at byte 16: version, n_req, n_obj, n_req_byte, n_obj_byte,
    // start_timestamp, end_timestamp, n_read, n_write, n_delete, smallest and largest
    // object size, the most common object sizes (first of 16) ...
    let s = 16;
    let ob = object_bytes as i64;
    put(&mut h, s, 1);
    put(&mut h, s + 8, c.accesses as i64);
    put(&mut h, s + 16, c.objects as i64);
    put(&mut h, s + 24, (c.accesses as i64).saturating_mul(ob));
    put(&mut h, s + 32, (c.objects as i64).saturating_mul(ob));
    put(&mut h, s + 40, 0);
    put(&mut h, s + 48, span_s as i64);
    put(&mut h, s + 56, c.loads as i64);
    put(&mut h, s + 64, c.stores as i64);
    put(&mut h, s + 72, 0);
    put(&mut h, s + 80, ob);
    put(&mut h, s + 88, ob);
    put(&mut h, s + 96, ob);
    // most_common_obj_size_ratio[0] (f32) after the 16 sizes: every request has this size.
    let r = s + 96 + 16 * 8;
    h[r..r + 4].copy_from_slice(&1.0f32.to_le_bytes());
    h[LCS_HEADER - 8..].copy_from_slice(&LCS_MAGIC.to_le_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::{RecordingWriter, WriterOptions};

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tierlab-export-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// Two threads, interleaved in time: thread 1 at even times, thread 2 at odd ones.
    fn recording(d: &Path) -> AccessTable {
        let mut w = RecordingWriter::create(d, "test", WriterOptions::default()).unwrap();
        for tid in [2u32, 1] {
            let n = 5u64;
            let c = AccessChunk {
                time: (0..n).map(|i| 2 * i + u64::from(tid == 2)).collect(),
                tid: vec![tid; n as usize],
                addr: (0..n).map(|i| 0x1000 * (i % 3) + u64::from(tid) * 8).collect(),
                kind: (0..n).map(|i| (i % 2) as u8).collect(),
                size: Vec::new(),
            };
            w.write_accesses(&c).unwrap();
        }
        w.close().unwrap();
        AccessTable::open(d).unwrap()
    }

    fn run(t: &AccessTable, out: &Path, format: Format, object_bytes: u64) -> ExportCounts {
        let opts = ExportOptions { format, object_bytes, ..Default::default() };
        export(t, TimeUnit::Accesses, out, &opts, &|| false).unwrap()
    }

    #[test]
    fn threads_are_merged_by_time_and_next_access_is_one_based() {
        let d = tmpdir("og");
        let t = recording(&d);
        let out = d.join("t.oracleGeneral");
        let c = run(&t, &out, Format::OracleGeneral, 4096);
        assert_eq!((c.accesses, c.threads, c.objects, c.loads, c.stores), (10, 2, 3, 6, 4));
        let data = std::fs::read(&out).unwrap();
        assert_eq!(data.len(), 10 * ORACLE_RECORD);
        let recs: Vec<(u32, u64, u32, i64)> = data
            .chunks_exact(ORACLE_RECORD)
            .map(|r| {
                (
                    u32::from_le_bytes(r[..4].try_into().unwrap()),
                    u64::from_le_bytes(r[4..12].try_into().unwrap()),
                    u32::from_le_bytes(r[12..16].try_into().unwrap()),
                    i64::from_le_bytes(r[16..].try_into().unwrap()),
                )
            })
            .collect();
        // Merged: (t0 tid1 p0) (t1 tid2 p0) (t2 tid1 p1) (t3 tid2 p1) (t4 tid1 p2) (t5 tid2 p2) ...
        let ids: Vec<u64> = recs.iter().map(|r| r.1).collect();
        assert_eq!(ids, [0, 0, 1, 1, 2, 2, 0, 0, 1, 1]);
        let next: Vec<i64> = recs.iter().map(|r| r.3).collect();
        assert_eq!(next, [2, 7, 4, 9, 6, -1, 8, -1, 10, -1]);
        assert!(recs.iter().all(|r| r.2 == 4096));
        assert_eq!(recs[3].0, 3, "clock = position for a recording without ns");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn lcs_has_the_header_libcachesim_checks() {
        let d = tmpdir("lcs");
        let t = recording(&d);
        let out = d.join("t.lcs");
        let c = run(&t, &out, Format::Lcs, 8);
        let data = std::fs::read(&out).unwrap();
        assert_eq!(data.len() as u64, c.bytes);
        assert_eq!(data.len(), LCS_HEADER + 10 * ORACLE_RECORD);
        let u = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().unwrap());
        assert_eq!((u(0), u(8), u(LCS_HEADER - 8)), (LCS_MAGIC, 1, LCS_MAGIC));
        assert_eq!((u(24), u(32)), (10, c.objects));
        // 8-byte objects: the two threads' addresses never share one.
        assert_eq!(c.objects, 6);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn text_and_champsim_layouts() {
        let d = tmpdir("text");
        let t = recording(&d);
        let out = d.join("t.trace");
        run(&t, &out, Format::Ramulator, 1);
        let text = std::fs::read_to_string(&out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[..3], ["LD 0x8", "LD 0x10", "ST 0x1008"]);
        run(&t, &out, Format::Csv, 1);
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(text.lines().nth(1), Some("1,0,0x8,0,0"));
        let c = run(&t, &out, Format::ChampSim, 1);
        let data = std::fs::read(&out).unwrap();
        assert_eq!(data.len(), 10 * CHAMPSIM_RECORD);
        assert_eq!(c.bytes, data.len() as u64);
        let store = &data[2 * CHAMPSIM_RECORD..3 * CHAMPSIM_RECORD];
        assert_eq!(u64::from_le_bytes(store[..8].try_into().unwrap()), CHAMPSIM_IP + 64);
        assert_eq!(u64::from_le_bytes(store[16..24].try_into().unwrap()), 0x1008);
        assert_eq!(u64::from_le_bytes(store[32..40].try_into().unwrap()), 0);
        run(&t, &out, Format::Valpin, 4096);
        assert_eq!(std::fs::read(&out).unwrap().len(), 80);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn errors_and_interruption_leave_no_file() {
        let d = tmpdir("err");
        let t = recording(&d);
        let out = d.join("t.bin");
        let opts = ExportOptions { format: Format::OracleGeneral, object_bytes: 100, ..Default::default() };
        let e = export(&t, TimeUnit::Ns, &out, &opts, &|| false).unwrap_err().to_string();
        assert!(e.contains("expected a power of two"), "{e}");
        let opts = ExportOptions { threads: Some(vec![7]), ..Default::default() };
        let e = export(&t, TimeUnit::Ns, &out, &opts, &|| false).unwrap_err().to_string();
        assert!(e.contains("has no thread 7 (its threads: 1, 2)"), "{e}");
        let e = export(&t, TimeUnit::Ns, &out, &ExportOptions::default(), &|| true).unwrap_err().to_string();
        assert!(e.contains("interrupted"), "{e}");
        assert!(!out.exists());
        let leftovers: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
        let _ = std::fs::remove_dir_all(&d);
    }
}
