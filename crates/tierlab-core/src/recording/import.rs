//! Streaming importers of access traces into a recording (constant memory at any size).
//!
//! Formats (documented with examples in `docs/formats.md`):
//! - **raw per-thread binary**: one file per thread named `t<TID>.bin`, little-endian u64
//!   records, bit 63 = store, bits 0-62 = virtual address; program order per thread, no
//!   timestamps. Optional side files written by tierlab's tracer: `t<TID>.size` (one byte
//!   per record: bytes accessed) and `t<TID>.time` (little-endian u64 pairs `(record index,
//!   ns)`, a checkpoint of the thread's clock every few thousand records; times in between
//!   are interpolated).
//! - **CSV / text**: `tid,time,addr,kind[,size]` per line.
//! - **libCacheSim oracleGeneral**: 24-byte records `(u32 clock, u64 object id, u32 size,
//!   i64 next access)`.
//! - **Valgrind lackey** output (`--trace-mem=yes`).
//!
//! Every importer writes one thread per row group. Errors name the file, the record (from
//! 0 for binary records, the line from 1 for text) and the field.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::{AccessChunk, RecordingError, RecordingWriter, Result};

/// Rows per row group written by the importers.
pub const GROUP_ROWS: usize = 1 << 20;

/// What an import read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportCounts {
    /// Accesses written.
    pub accesses: u64,
    /// Loads among them.
    pub loads: u64,
    /// Stores among them.
    pub stores: u64,
    /// Distinct threads.
    pub threads: u64,
    /// Text lines skipped (blank, comments, a header).
    pub skipped_lines: u64,
}

impl ImportCounts {
    fn add(&mut self, c: &AccessChunk) {
        let stores = c.kind.iter().filter(|&&k| k == 1).count() as u64;
        self.accesses += c.kind.len() as u64;
        self.stores += stores;
        self.loads += c.kind.len() as u64 - stores;
    }
}

/// Whether `addr` is a canonical x86-64 address (bits 63 to 47 all equal: the lower half
/// of user space, or the kernel's upper half). A non-canonical address in a trace is a
/// damaged record (a flipped bit) and is refused at import, where its file and record are
/// known, not at replay.
pub fn canonical(addr: u64) -> bool {
    let top = addr >> 47;
    top == 0 || top == 0x1_ffff
}

fn addr_problem(addr: u64) -> Option<String> {
    (!canonical(addr))
        .then(|| format!("address {addr:#x} is not canonical (x86-64: bits 63 to 47 must be equal)"))
}

/// At most `n` characters of `s`, marked when cut: an error quotes a field, never a whole
/// line of any length.
pub fn quote(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        format!("{s:?}")
    } else {
        let head: String = s.chars().take(n).collect();
        format!("{head:?}... ({} bytes)", s.len())
    }
}

fn io(file: &Path, e: impl std::fmt::Display) -> RecordingError {
    RecordingError::file(file.display().to_string(), e.to_string())
}

/// The thread id in a raw trace file's name (`t<TID>.bin`).
pub fn raw_tid(path: &Path) -> Result<u32> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    name.strip_prefix('t')
        .and_then(|s| s.strip_suffix(".bin"))
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or_else(|| io(path, "a raw trace file is named t<TID>.bin (TID a thread id, e.g. t1234.bin)"))
}

/// Read up to `buf.len()` bytes (fewer only at the end of the file).
fn read_full(f: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Checkpoints a `.time` file may hold beyond one per record of its trace and one at its
/// end: a tracer stopped before its last flush leaves checkpoints of records it never wrote
/// (tierlab's: at most 16, one per 4096 of the 65536 records it buffers per thread).
pub const TIME_SLACK_CHECKPOINTS: u64 = 1024;

/// Most bytes of the `.time` file of a raw trace of `records` records: 16 bytes per
/// checkpoint, whose indices strictly increase, so one per record, one at the end, and
/// [`TIME_SLACK_CHECKPOINTS`].
pub fn max_time_bytes(records: u64) -> u64 {
    records.saturating_add(1 + TIME_SLACK_CHECKPOINTS).saturating_mul(16)
}

/// Time checkpoints `(record index, ns)` of a raw trace of `records` records (`trace`, its
/// `.bin` file), strictly increasing in index. A file larger than the trace can need
/// ([`max_time_bytes`]) is refused before it is read.
fn read_checkpoints(path: &Path, trace: &Path, records: u64) -> Result<Vec<(u64, u64)>> {
    let shown = path.display().to_string();
    let f = super::open_regular(path, "time checkpoint file")?;
    let len = f.metadata().map_err(|e| io(path, e))?.len();
    let max = max_time_bytes(records);
    if len > max {
        let name = trace.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        return Err(RecordingError::file(
            shown,
            format!(
                "{len} bytes, more than the time checkpoints of the {records} records of {name} can \
                 take ({max} bytes: 16 each, their record indices increasing); refusing to read it"
            ),
        ));
    }
    let mut r = BufReader::with_capacity(1 << 16, f).take(max); // even if it grows meanwhile
    let mut out: Vec<(u64, u64)> = Vec::with_capacity((len / 16) as usize);
    let mut pair = [0u8; 16];
    loop {
        let i = out.len() as u64;
        match read_full(&mut r, &mut pair).map_err(|e| io(path, e))? {
            0 => break,
            16 => {}
            _ => return Err(RecordingError::at(shown, i, "time", "truncated (pairs of u64)")),
        }
        let idx = u64::from_le_bytes(pair[..8].try_into().expect("8"));
        let ns = u64::from_le_bytes(pair[8..].try_into().expect("8"));
        if let Some(&(pi, pns)) = out.last() {
            if idx <= pi || ns < pns {
                return Err(RecordingError::at(shown, i, "time", "checkpoints must increase"));
            }
        }
        out.push((idx, ns));
    }
    Ok(out)
}

/// Time of record `i` from checkpoints (linear between them, rounded down; before the first,
/// the first; after the last, the last; without checkpoints, `i` itself).
struct Clock {
    cps: Vec<(u64, u64)>,
    k: usize,
}

impl Clock {
    /// The time of record `i` (any order).
    #[cfg(test)]
    fn at(&mut self, i: u64) -> u64 {
        let mut v = Vec::with_capacity(1);
        self.k = 0;
        self.fill(i, 1, &mut v);
        v[0]
    }

    /// Append the times of records `start .. start + count` to `out` (calls in increasing
    /// `start`). Between two checkpoints the floor of `t0 + (t1 - t0) (i - i0) / (i1 - i0)` is
    /// carried from record to record (quotient and remainder of the slope), one addition and
    /// a comparison a record instead of a division.
    fn fill(&mut self, start: u64, count: usize, out: &mut Vec<u64>) {
        let cps = &self.cps;
        if cps.is_empty() {
            out.extend(start..start + count as u64);
            return;
        }
        let (mut i, end) = (start, start + count as u64);
        while i < end {
            while self.k + 1 < cps.len() && cps[self.k + 1].0 <= i {
                self.k += 1;
            }
            let (i0, t0) = cps[self.k];
            if i < i0 {
                // Before the first checkpoint: its time.
                let upto = end.min(i0);
                out.extend(std::iter::repeat_n(t0, (upto - i) as usize));
                i = upto;
                continue;
            }
            let Some(&(i1, t1)) = cps.get(self.k + 1) else {
                out.extend(std::iter::repeat_n(t0, (end - i) as usize));
                return;
            };
            let upto = end.min(i1);
            let (n, d) = (i1 - i0, t1 - t0);
            let (q, r) = (d / n, d % n);
            let j = i - i0;
            let prod = d as u128 * j as u128;
            let mut val = t0 + (prod / n as u128) as u64;
            let mut rem = (prod % n as u128) as u64;
            for _ in i..upto {
                out.push(val);
                val += q;
                rem += r;
                if rem >= n {
                    rem -= n;
                    val += 1;
                }
            }
            i = upto;
        }
    }
}

/// Import raw per-thread traces (`t<TID>.bin` files, with optional `.size` and `.time`
/// side files). Returns the counts and whether every file had timestamps.
pub fn import_raw(files: &[PathBuf], w: &mut RecordingWriter) -> Result<(ImportCounts, bool)> {
    let mut by_tid: Vec<(u32, &PathBuf)> =
        files.iter().map(|f| Ok((raw_tid(f)?, f))).collect::<Result<_>>()?;
    by_tid.sort_by_key(|x| x.0);
    if let Some(w2) = by_tid.windows(2).find(|w2| w2[0].0 == w2[1].0) {
        return Err(io(w2[1].1, format!("thread {} appears twice", w2[0].0)));
    }
    let timed = !by_tid.is_empty() && by_tid.iter().all(|(_, f)| f.with_extension("time").is_file());
    let mut counts = ImportCounts::default();
    let mut buf = vec![0u8; GROUP_ROWS * 8];
    let mut sizes = vec![0u8; GROUP_ROWS];
    let mut chunk = AccessChunk::default();
    for (tid, path) in by_tid {
        let f = super::open_regular(path, "trace file")?;
        let records = f.metadata().map_err(|e| io(path, e))?.len() / 8;
        let mut f = BufReader::with_capacity(1 << 20, f);
        let size_path = path.with_extension("size");
        let mut sf =
            if size_path.is_file() { Some(super::open_regular(&size_path, "size file")?) } else { None };
        if let Some(sf) = sf.as_ref() {
            // One byte per record: a size file of another length belongs to another trace
            // (or to a cut one), longer as much as shorter.
            let sizes = sf.metadata().map_err(|e| io(&size_path, e))?.len();
            if sizes != records {
                let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
                return Err(io(
                    &size_path,
                    format!(
                        "{sizes} byte{}: {} sizes than the {records} records of {name} (one byte per \
                         record); refusing both",
                        if sizes == 1 { "" } else { "s" },
                        if sizes > records { "more" } else { "fewer" },
                    ),
                ));
            }
        }
        let mut clock = Clock {
            cps: if timed {
                read_checkpoints(&path.with_extension("time"), path, records)?
            } else {
                Vec::new()
            },
            k: 0,
        };
        let mut index = 0u64;
        counts.threads += 1;
        loop {
            let n = read_full(&mut f, &mut buf).map_err(|e| io(path, e))?;
            if n % 8 != 0 {
                return Err(RecordingError::at(
                    path.display().to_string(),
                    index + (n / 8) as u64,
                    "addr",
                    format!("truncated record ({} of 8 bytes)", n % 8),
                ));
            }
            let recs = n / 8;
            if recs == 0 {
                break;
            }
            chunk.clear();
            if let Some(sf) = sf.as_mut() {
                let k = read_full(sf, &mut sizes[..recs]).map_err(|e| io(&size_path, e))?;
                if k != recs {
                    return Err(RecordingError::at(
                        size_path.display().to_string(),
                        index + k as u64,
                        "size",
                        "fewer sizes than records",
                    ));
                }
                chunk.size.extend_from_slice(&sizes[..recs]);
            } else {
                chunk.size.resize(recs, 0);
            }
            for c in buf[..n].chunks_exact(8) {
                let v = u64::from_le_bytes(c.try_into().expect("8"));
                let addr = v & !(1 << 63);
                // Bit 63 is the kind: the address's own bit 63 is that of its upper half.
                if let Some(msg) = addr_problem(addr).filter(|_| !canonical(addr | (1 << 63))) {
                    return Err(RecordingError::at(path.display().to_string(), index, "addr", msg));
                }
                chunk.addr.push(addr);
                chunk.kind.push((v >> 63) as u8);
                index += 1;
            }
            clock.fill(index - recs as u64, recs, &mut chunk.time);
            chunk.tid.resize(recs, tid);
            counts.add(&chunk);
            w.write_accesses(&chunk)?;
        }
        if index == 0 {
            return Err(RecordingError::file(path.display().to_string(), "empty: no accesses (0 records)"));
        }
    }
    Ok((counts, timed))
}

/// Bytes of one record of the tracer's `sync.bin`.
pub const SYNC_RECORD: usize = 48;

/// The tracer's `sync.bin` (`tierlab trace --cc`): 48-byte little-endian records `u64 seq,
/// u64 ns, u64 access index, u64 object, u64 arg, u32 tid, u32 kind`, in `seq` order. Errors
/// name the file, the record and the field.
pub fn read_sync_file(path: &Path) -> Result<Vec<crate::SyncEvent>> {
    let shown = path.display().to_string();
    let f = super::open_regular(path, "sync event file")?;
    let len = f.metadata().map_err(|e| io(path, e))?.len();
    if len % SYNC_RECORD as u64 != 0 {
        return Err(RecordingError::at(
            shown,
            len / SYNC_RECORD as u64,
            "seq",
            format!("truncated record ({} of {SYNC_RECORD} bytes)", len % SYNC_RECORD as u64),
        ));
    }
    let mut r = BufReader::with_capacity(1 << 16, f).take(len);
    let mut out = Vec::with_capacity((len / SYNC_RECORD as u64) as usize);
    let mut rec = [0u8; SYNC_RECORD];
    loop {
        let i = out.len() as u64;
        match read_full(&mut r, &mut rec).map_err(|e| io(path, e))? {
            0 => break,
            SYNC_RECORD => {}
            _ => return Err(RecordingError::at(shown, i, "seq", "truncated record")),
        }
        let u = |k: usize| u64::from_le_bytes(rec[k * 8..k * 8 + 8].try_into().expect("8"));
        let tid = u32::from_le_bytes(rec[40..44].try_into().expect("4"));
        let code = u32::from_le_bytes(rec[44..48].try_into().expect("4"));
        let kind = u8::try_from(code)
            .ok()
            .and_then(crate::SyncKind::from_code)
            .ok_or_else(|| RecordingError::at(&shown, i, "kind", format!("{code} is not a sync kind")))?;
        let e =
            crate::SyncEvent { seq: u(0), time_ns: u(1), index: u(2), object: u(3), arg: u(4), tid, kind };
        if let Some(prev) = out.last() {
            let prev: &crate::SyncEvent = prev;
            if e.seq <= prev.seq {
                return Err(RecordingError::at(shown, i, "seq", "sequence numbers must increase"));
            }
        }
        out.push(e);
    }
    Ok(out)
}

/// Options of the CSV importer.
#[derive(Clone, Debug)]
pub struct CsvOptions {
    /// Field separator (`,` by default; any run of spaces/tabs also separates when `b' '`).
    pub sep: u8,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions { sep: b',' }
    }
}

fn parse_uint(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse::<u64>().ok()
    }
}

fn parse_kind(s: &str) -> Option<u8> {
    match s.trim() {
        "0" | "L" | "l" | "R" | "r" | "load" | "read" | "LOAD" | "READ" => Some(0),
        "1" | "S" | "s" | "W" | "w" | "store" | "write" | "STORE" | "WRITE" => Some(1),
        _ => None,
    }
}

/// Per-thread buffers of an importer that reads threads interleaved: each thread's rows
/// are written as row groups of that thread alone; at most `limit` rows are held in all.
struct ThreadBuffers {
    bufs: HashMap<u32, AccessChunk>,
    held: usize,
    limit: usize,
    with_size: bool,
}

impl ThreadBuffers {
    fn new(with_size: bool) -> Self {
        ThreadBuffers { bufs: HashMap::new(), held: 0, limit: 4 * GROUP_ROWS, with_size }
    }

    fn push(
        &mut self,
        w: &mut RecordingWriter,
        tid: u32,
        time: u64,
        addr: u64,
        kind: u8,
        size: u8,
    ) -> Result<()> {
        let b = self.bufs.entry(tid).or_default();
        b.tid.push(tid);
        b.time.push(time);
        b.addr.push(addr);
        b.kind.push(kind);
        if self.with_size {
            b.size.push(size);
        }
        self.held += 1;
        if b.addr.len() >= GROUP_ROWS {
            self.write(w, tid)?;
        } else if self.held >= self.limit {
            let big = self.bufs.iter().max_by_key(|(_, b)| b.addr.len()).map(|(t, _)| *t).expect("a buffer");
            self.write(w, big)?;
        }
        Ok(())
    }

    fn write(&mut self, w: &mut RecordingWriter, tid: u32) -> Result<()> {
        if let Some(b) = self.bufs.get_mut(&tid) {
            self.held -= b.addr.len();
            w.write_accesses(b)?;
            b.clear();
        }
        Ok(())
    }

    fn finish(&mut self, w: &mut RecordingWriter) -> Result<u64> {
        let mut tids: Vec<u32> = self.bufs.keys().copied().collect();
        tids.sort_unstable();
        for t in &tids {
            self.write(w, *t)?;
        }
        Ok(tids.len() as u64)
    }
}

/// Longest line of a CSV trace (a file without line breaks is not one).
const MAX_LINE: u64 = 1 << 16;

/// A UTF-8 byte order mark, which some tools write at the start of a text file.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

fn split_fields(l: &str, sep: u8) -> Vec<&str> {
    if sep == b' ' {
        l.split_ascii_whitespace().collect()
    } else {
        l.split(sep as char).collect()
    }
}

/// Import a CSV/text trace: one access per line, `tid,time,addr,kind[,size]` (addresses in
/// decimal or `0x` hex; kind `0`/`1`, `L`/`S`, `R`/`W`, `load`/`store`, `read`/`write`).
/// Blank lines, `#` comments and a first line that names the columns are skipped; a file
/// with nothing else (no access) is an error. Times of each thread must not decrease.
/// `with_size`: write the `size` column (lines without a size give 0).
pub fn import_csv(
    path: &Path,
    opts: &CsvOptions,
    w: &mut RecordingWriter,
    with_size: bool,
) -> Result<ImportCounts> {
    import_csv_files(&[path.to_path_buf()], opts, w, with_size)
}

/// Import CSV/text traces (see [`import_csv`]) as one trace: the files are read in the
/// order given and are the parts of one recording, so each thread's times must not
/// decrease from one file to the next either, a thread found in several files counts once,
/// and a file given twice is refused.
pub fn import_csv_files(
    paths: &[PathBuf],
    opts: &CsvOptions,
    w: &mut RecordingWriter,
    with_size: bool,
) -> Result<ImportCounts> {
    let mut seen: HashMap<PathBuf, &PathBuf> = HashMap::new();
    for p in paths {
        let key = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        if let Some(first) = seen.insert(key, p) {
            return Err(io(
                p,
                format!("given twice (as {} too): its accesses would be imported twice", first.display()),
            ));
        }
    }
    let mut counts = ImportCounts::default();
    let mut bufs = ThreadBuffers::new(with_size);
    // Per thread: the last time, and the file (index in `paths`) and line it was read on.
    let mut last_time: HashMap<u32, (u64, usize, u64)> = HashMap::new();
    for (index, path) in paths.iter().enumerate() {
        csv_file(path, index, paths, opts, &mut bufs, &mut last_time, &mut counts, w)?;
    }
    counts.threads = bufs.finish(w)?;
    Ok(counts)
}

/// One file of [`import_csv_files`].
#[allow(clippy::too_many_arguments)]
fn csv_file(
    path: &Path,
    index: usize,
    paths: &[PathBuf],
    opts: &CsvOptions,
    bufs: &mut ThreadBuffers,
    last_time: &mut HashMap<u32, (u64, usize, u64)>,
    total: &mut ImportCounts,
    w: &mut RecordingWriter,
) -> Result<()> {
    let f = super::open_regular(path, "trace file")?;
    let mut r = BufReader::with_capacity(1 << 20, f);
    let mut counts = ImportCounts::default();
    let mut raw: Vec<u8> = Vec::new();
    let mut lineno = 0u64;
    // A line other than a comment or a blank one was read (only the first may be a header).
    let mut data_seen = false;
    let shown = path.display().to_string();
    loop {
        raw.clear();
        let n = (&mut r).take(MAX_LINE).read_until(b'\n', &mut raw).map_err(|e| io(path, e))?;
        if n == 0 {
            break;
        }
        if n as u64 == MAX_LINE && raw.last() != Some(&b'\n') {
            return Err(RecordingError {
                file: shown.clone(),
                record: Some(lineno + 1),
                field: None,
                msg: format!("line longer than {MAX_LINE} bytes; not a CSV trace"),
            });
        }
        lineno += 1;
        let bytes = if lineno == 1 { raw.strip_prefix(BOM).unwrap_or(&raw) } else { &raw[..] };
        let trimmed = bytes.trim_ascii();
        if trimmed.is_empty() || trimmed[0] == b'#' {
            counts.skipped_lines += 1; // comments are skipped as bytes: any encoding
            continue;
        }
        let l = std::str::from_utf8(trimmed).map_err(|e| RecordingError {
            file: shown.clone(),
            record: Some(lineno),
            field: None,
            msg: format!(
                "not UTF-8 text (an invalid byte 0x{:02x} at column {})",
                trimmed[e.valid_up_to()],
                e.valid_up_to() + 1
            ),
        })?;
        let fields = split_fields(l, opts.sep);
        let bad = |field: &str, msg: String| RecordingError {
            file: shown.clone(),
            record: Some(lineno),
            field: Some(field.into()),
            msg,
        };
        // Only the first line may be a header, and only one that cannot be a data row: no
        // field of it is a number (`tid,time,addr,kind`). A damaged first row is an error.
        if !data_seen && fields.iter().all(|f| parse_uint(f).is_none()) {
            data_seen = true;
            counts.skipped_lines += 1;
            continue;
        }
        data_seen = true;
        if fields.len() < 4 || fields.len() > 5 {
            return Err(RecordingError {
                file: shown.clone(),
                record: Some(lineno),
                field: None,
                msg: format!("expected 4 or 5 fields (tid,time,addr,kind[,size]), got {}", fields.len()),
            });
        }
        let tid = parse_uint(fields[0]).filter(|&v| v <= u64::from(u32::MAX)).ok_or_else(|| {
            bad("tid", format!("{} is not a thread id (an integer below 2^32)", quote(fields[0].trim(), 40)))
        })? as u32;
        let time = parse_uint(fields[1]).ok_or_else(|| {
            bad("time", format!("{} is not an unsigned integer", quote(fields[1].trim(), 40)))
        })?;
        let addr = parse_uint(fields[2]).ok_or_else(|| {
            bad("addr", format!("{} is not an address (decimal or 0x hex)", quote(fields[2].trim(), 40)))
        })?;
        if let Some(msg) = addr_problem(addr) {
            return Err(bad("addr", msg));
        }
        let kind = parse_kind(fields[3]).ok_or_else(|| {
            bad("kind", format!("{} is not a kind (0/1, L/S, R/W, load/store)", quote(fields[3].trim(), 40)))
        })?;
        let size = match fields.get(4) {
            Some(s) => parse_uint(s).filter(|&v| v <= 255).ok_or_else(|| {
                bad("size", format!("{} is not a size in bytes (0-255)", quote(s.trim(), 40)))
            })? as u8,
            None => 0,
        };
        let prev = last_time.entry(tid).or_insert((time, index, lineno));
        if time < prev.0 {
            let (t, file, line) = *prev;
            let at = if file == index {
                String::new()
            } else {
                format!(", at line {line} of {}, an earlier file of the same trace", paths[file].display())
            };
            return Err(bad(
                "time",
                format!(
                    "{time} is before the previous access of thread {tid} ({t}{at}): each thread's \
                     times must not decrease"
                ),
            ));
        }
        *prev = (time, index, lineno);
        counts.accesses += 1;
        if kind == 1 {
            counts.stores += 1;
        } else {
            counts.loads += 1;
        }
        bufs.push(w, tid, time, addr, kind, size)?;
    }
    if counts.accesses == 0 {
        return Err(RecordingError::file(
            shown,
            if lineno == 0 {
                "empty: no accesses found".to_string()
            } else {
                format!(
                    "no accesses found (only comments, blank lines or a header in its {lineno} line{})",
                    if lineno == 1 { "" } else { "s" }
                )
            },
        ));
    }
    total.accesses += counts.accesses;
    total.loads += counts.loads;
    total.stores += counts.stores;
    total.skipped_lines += counts.skipped_lines;
    Ok(())
}

/// Import a libCacheSim oracleGeneral trace: object `id` becomes address `id *
/// object_bytes`, every request a load of thread 0 at time = its index.
pub fn import_oracle_general(
    path: &Path,
    object_bytes: u64,
    w: &mut RecordingWriter,
) -> Result<ImportCounts> {
    const REC: usize = 24;
    let mut f = BufReader::with_capacity(1 << 20, super::open_regular(path, "trace file")?);
    let mut buf = vec![0u8; (GROUP_ROWS / 4) * REC];
    let mut counts = ImportCounts { threads: 1, ..Default::default() };
    let mut index = 0u64;
    let mut chunk = AccessChunk::default();
    loop {
        let n = read_full(&mut f, &mut buf).map_err(|e| io(path, e))?;
        if n % REC != 0 {
            return Err(RecordingError::at(
                path.display().to_string(),
                index + (n / REC) as u64,
                "obj_id",
                format!("truncated record ({} of {REC} bytes)", n % REC),
            ));
        }
        if n == 0 {
            break;
        }
        chunk.clear();
        for c in buf[..n].chunks_exact(REC) {
            let id = u64::from_le_bytes(c[4..12].try_into().expect("8"));
            let addr = id.checked_mul(object_bytes).filter(|&a| a >> 47 == 0).ok_or_else(|| {
                RecordingError::at(
                    path.display().to_string(),
                    index,
                    "obj_id",
                    format!("{id} x {object_bytes} bytes is beyond the 47-bit user address space"),
                )
            })?;
            chunk.addr.push(addr);
            chunk.time.push(index);
            chunk.kind.push(0);
            chunk.tid.push(0);
            index += 1;
        }
        counts.add(&chunk);
        w.write_accesses(&chunk)?;
    }
    if counts.accesses == 0 {
        return Err(RecordingError::file(path.display().to_string(), "empty: no requests (0 records)"));
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::Clock;

    /// The carried interpolation gives the floor of the exact formula at every record, from
    /// any starting record, before, between and after the checkpoints.
    #[test]
    fn clock_fill_is_the_exact_floor() {
        let cps = vec![
            (5u64, 100u64),
            (9, 107),
            (4105, 1_000_000_007),
            (4106, 1_000_000_007),
            (9000, u64::MAX / 4),
        ];
        let exact = |i: u64| -> u64 {
            let k = cps.iter().rposition(|c| c.0 <= i);
            match k {
                None => cps[0].1,
                Some(k) if k + 1 == cps.len() => cps[k].1,
                Some(k) => {
                    let ((i0, t0), (i1, t1)) = (cps[k], cps[k + 1]);
                    t0 + ((t1 - t0) as u128 * (i - i0) as u128 / (i1 - i0) as u128) as u64
                }
            }
        };
        for step in [1usize, 3, 4096, 20_000] {
            let mut c = Clock { cps: cps.clone(), k: 0 };
            let mut got = Vec::new();
            let mut i = 0u64;
            while i < 12_000 {
                c.fill(i, step, &mut got);
                i += step as u64;
            }
            assert!(got.iter().enumerate().all(|(i, &t)| t == exact(i as u64)), "step {step}");
        }
        let mut c = Clock { cps: Vec::new(), k: 0 };
        assert_eq!(c.at(7), 7);
        let mut c = Clock { cps: cps.clone(), k: 0 };
        assert_eq!(c.at(2000), exact(2000));
    }
}
