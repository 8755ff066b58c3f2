//! The recording format's `accesses` table in Rust: a streaming reader and a writer
//! (feature `parquet`).
//!
//! A recording is a directory of Parquet parts per table plus `meta.json`
//! (`docs/formats.md`). [`AccessTable`] opens the `accesses` parts of a recording, checks
//! their columns, and hands out [`AccessCursor`]s that decode the rows chunk by chunk (memory
//! independent of the table's length), optionally only the rows of some threads: row groups
//! whose `tid` statistics exclude them are skipped without being decoded.
//! [`RecordingWriter`] writes a whole recording (all four tables and `meta.json`), parts
//! atomically, with the compact layout tierlab's importers and tracer use: one thread per
//! row group, `time_ns` and `addr` delta-encoded (`DELTA_BINARY_PACKED`), `tid` and `kind`
//! dictionary/RLE-encoded, zstd on top.

pub mod aggregate;
pub mod export;
pub mod import;
pub mod pages;
mod read;
mod write;

pub use read::{
    read_mappings, read_sync, table_parts, AccessChunk, AccessCursor, AccessTable, Columns, PartInfo,
    RowGroupInfo,
};
pub use write::{atomic_write, now_iso8601, MappingRow, RecordingWriter, WriterOptions};

use std::fmt;

/// An error of the recording reader or writer: the file, and where it applies the record
/// (row, counting from 0 within the file) and the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordingError {
    /// The file (or directory) concerned.
    pub file: String,
    /// Row within the file, from 0.
    pub record: Option<u64>,
    /// The column or field.
    pub field: Option<String>,
    /// What is wrong.
    pub msg: String,
}

impl RecordingError {
    /// An error about a whole file.
    pub fn file(file: impl Into<String>, msg: impl Into<String>) -> Self {
        RecordingError { file: file.into(), record: None, field: None, msg: msg.into() }
    }
    /// An error about one record's field.
    pub fn at(file: impl Into<String>, record: u64, field: &str, msg: impl Into<String>) -> Self {
        RecordingError { file: file.into(), record: Some(record), field: Some(field.into()), msg: msg.into() }
    }
}

impl fmt::Display for RecordingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(r) = self.record {
            write!(f, ": record {r}")?;
        }
        if let Some(c) = &self.field {
            write!(f, ": field `{c}`")?;
        }
        write!(f, ": {}", self.msg)
    }
}

impl std::error::Error for RecordingError {}

/// Result of the recording reader and writer.
pub type Result<T> = std::result::Result<T, RecordingError>;

/// Time unit of a recording's `time_ns` column, from `meta.json`'s `time_unit` (absent =
/// nanoseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    /// Nanoseconds of a clock shared by every thread (wall time).
    Ns,
    /// Instructions executed before the access (lackey: one process-wide count).
    Instructions,
    /// The access's index in its thread's trace (program order only: no timestamps).
    Accesses,
}

impl TimeUnit {
    /// The name written in `meta.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeUnit::Ns => "ns",
            TimeUnit::Instructions => "instructions",
            TimeUnit::Accesses => "accesses",
        }
    }
    /// Inverse of [`TimeUnit::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ns" => Some(TimeUnit::Ns),
            "instructions" => Some(TimeUnit::Instructions),
            "accesses" => Some(TimeUnit::Accesses),
            _ => None,
        }
    }
}

/// Most bytes a `meta.json` may have (as the Python reader).
pub const MAX_META_BYTES: u64 = 64 << 20;

fn file_kind(ft: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Open `path` for reading, refusing anything but a regular file (a FIFO would block the
/// reader, a device never ends): checked before opening and again on the open file. `what`
/// names what the file should be ("Parquet part").
pub fn open_regular(path: &std::path::Path, what: &str) -> Result<std::fs::File> {
    let shown = path.display().to_string();
    let refuse = |ft: &std::fs::FileType| {
        RecordingError::file(&shown, format!("is {}, not a {what}; refusing to read it", file_kind(ft)))
    };
    let md = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => RecordingError::file(&shown, "no such file"),
        _ => RecordingError::file(&shown, format!("cannot read: {e}")),
    })?;
    if !md.is_file() {
        return Err(refuse(&md.file_type()));
    }
    let f =
        std::fs::File::open(path).map_err(|e| RecordingError::file(&shown, format!("cannot read: {e}")))?;
    let md = f.metadata().map_err(|e| RecordingError::file(&shown, format!("cannot read: {e}")))?;
    if !md.is_file() {
        return Err(refuse(&md.file_type()));
    }
    Ok(f)
}

/// `meta.json` of a recording directory, parsed (with the format and version checked). The
/// file must be a regular file of at most [`MAX_META_BYTES`]; nothing of a file that is not
/// a recording's `meta.json` is echoed in the errors.
pub fn read_meta(dir: &std::path::Path) -> Result<serde_json::Value> {
    use std::io::Read;
    let path = dir.join("meta.json");
    let shown = path.display().to_string();
    if !dir.is_dir() {
        return Err(RecordingError::file(
            dir.display().to_string(),
            "no such recording (directory not found)",
        ));
    }
    if std::fs::symlink_metadata(&path).is_err() {
        return Err(RecordingError::file(
            &shown,
            format!("missing; {} is not a tierlab recording", dir.display()),
        ));
    }
    let f = open_regular(&path, "meta.json")?;
    let mut bytes = Vec::new();
    f.take(MAX_META_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| RecordingError::file(&shown, format!("unreadable: {e}")))?;
    if bytes.len() as u64 > MAX_META_BYTES {
        return Err(RecordingError::file(
            &shown,
            format!("more than {MAX_META_BYTES} bytes, more than a meta.json may have; refusing to read it"),
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
        RecordingError::file(&shown, format!("not valid JSON ({e}); not a tierlab recording"))
    })?;
    if v.get("format").and_then(|f| f.as_str()) != Some(crate::format::NAME) {
        return Err(RecordingError::file(
            &shown,
            format!(
                "its field `format` is not \"{}\": {} is not a tierlab recording",
                crate::format::NAME,
                dir.display()
            ),
        ));
    }
    match v.get("version").and_then(|x| x.as_u64()) {
        Some(ver) if ver >= 1 && ver <= u64::from(crate::format::VERSION) => Ok(v),
        Some(ver) if ver > u64::from(crate::format::VERSION) => Err(RecordingError::file(
            &shown,
            format!(
                "recording format version {ver} is newer than this tierlab reads (up to {}); upgrade tierlab",
                crate::format::VERSION
            ),
        )),
        _ => Err(RecordingError::file(&shown, "field `version` must be a positive integer")),
    }
}

/// The time unit a recording's `meta.json` declares (`time_unit`; absent = ns).
pub fn time_unit(meta: &serde_json::Value) -> TimeUnit {
    meta.get("time_unit").and_then(|v| v.as_str()).and_then(TimeUnit::parse).unwrap_or(TimeUnit::Ns)
}

/// The runs of touched pages (bytes, ascending) and their page count that a writer kept in
/// `meta.json` (`touched_pages`), when they describe a table of `rows` accesses and are well
/// formed (page-aligned, ascending, disjoint runs of 4 KiB pages); `None` otherwise (a
/// recording from an older or another writer, more runs than the writer lists, or parts
/// changed since): the reader then finds them with a pass over the addresses.
pub fn touched_runs(meta: &serde_json::Value, rows: u64) -> Option<(Vec<(u64, u64)>, u64)> {
    let t = meta.get("touched_pages")?;
    if t.get("rows")?.as_u64()? != rows || t.get("page_bytes")?.as_u64()? != crate::PAGE_SIZE {
        return None;
    }
    let pages = t.get("pages")?.as_u64()?;
    let mut runs = Vec::new();
    let mut counted = 0u64;
    let mut prev_end = 0u64;
    for r in t.get("runs")?.as_array()? {
        let r = r.as_array()?;
        let (s, e) = (r.first()?.as_u64()?, r.get(1)?.as_u64()?);
        if r.len() != 2 || e <= s || (s | e) & crate::PAGE_MASK != 0 || (s < prev_end && !runs.is_empty()) {
            return None;
        }
        counted += (e - s) / crate::PAGE_SIZE;
        prev_end = e;
        runs.push((s, e));
    }
    (counted == pages).then_some((runs, pages))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("tierlab-core-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn chunk(tid: u32, n: u64, base: u64) -> AccessChunk {
        AccessChunk {
            time: (0..n).collect(),
            tid: vec![tid; n as usize],
            addr: (0..n).map(|i| base + i * 64).collect(),
            kind: (0..n).map(|i| (i % 3 == 0) as u8).collect(),
            size: vec![8; n as usize],
        }
    }

    #[test]
    fn a_mapping_may_end_at_the_end_of_the_address_space() {
        let d = tmpdir("top");
        let row =
            |length| MappingRow { time_ns: 0, map: true, start: u64::MAX - 4095, length, name: "t".into() };
        let mut w = RecordingWriter::create(&d, "test", WriterOptions::default()).unwrap();
        w.write_mappings(&[row(4096)]).unwrap();
        w.close().unwrap();
        assert_eq!(read_mappings(&d).unwrap()[0].length, 4096); // ends at 2^64 exactly
        let _ = std::fs::remove_dir_all(&d);
        let mut w = RecordingWriter::create(&d, "test", WriterOptions::default()).unwrap();
        w.write_mappings(&[row(4097)]).unwrap();
        w.close().unwrap();
        let e = read_mappings(&d).unwrap_err().to_string();
        assert!(e.contains("ends past the end of the address space"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn write_then_read_by_thread() {
        let d = tmpdir("rw");
        let opts = WriterOptions { part_rows: 2500, with_size: true, ..Default::default() };
        let mut w = RecordingWriter::create(&d, "test", opts).unwrap();
        w.meta_mut().insert("time_unit".into(), serde_json::json!("accesses"));
        for round in 0..3u64 {
            for tid in [7u32, 3, 9] {
                w.write_accesses(&chunk(tid, 1000, 0x1000_0000 * u64::from(tid) + round * 64_000)).unwrap();
            }
        }
        w.write_mappings(&[MappingRow {
            time_ns: 0,
            map: true,
            start: 0x1000,
            length: 4096,
            name: "x".into(),
        }])
        .unwrap();
        w.close().unwrap();
        assert_eq!(read_mappings(&d).unwrap()[0].name, "x");
        let meta = read_meta(&d).unwrap();
        assert_eq!(meta["tables"]["accesses"], 9000);
        assert_eq!(meta["complete"], true);
        assert_eq!(time_unit(&meta), TimeUnit::Accesses);
        let t = AccessTable::open(&d).unwrap();
        assert_eq!(t.rows(), 9000);
        assert!(t.thread_blocked() && t.has_size());
        assert_eq!(t.parts.len(), 3);
        assert_eq!(t.tids().unwrap(), vec![3, 7, 9]);
        let mut cur = t.cursor(Columns::ALL, Some(vec![3]));
        let mut c = AccessChunk::default();
        let mut all = AccessChunk::default();
        while cur.next_chunk(&mut c, 700).unwrap() {
            assert!(c.len() <= 700);
            all.addr.extend(&c.addr);
            all.tid.extend(&c.tid);
            all.kind.extend(&c.kind);
            all.size.extend(&c.size);
        }
        assert_eq!(all.addr.len(), 3000);
        assert!(all.tid.iter().all(|&t| t == 3));
        assert_eq!(all.addr[1000], 0x3000_0000 + 64_000);
        assert_eq!(all.kind.iter().filter(|&&k| k == 1).count(), 3 * 334);
        assert!(all.size.iter().all(|&s| s == 8));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn addresses_are_encoded_per_row_group_and_read_back_exactly() {
        use parquet::basic::Encoding;
        use parquet::file::reader::FileReader;
        let d = tmpdir("addrenc");
        let mut w = RecordingWriter::create(&d, "test", WriterOptions::default()).unwrap();
        // A regular thread (deltas win) and an irregular one (random lines of 256 MiB).
        let regular = chunk(1, 20_000, 0x7f00_0000_0000);
        let mut random = chunk(2, 20_000, 0);
        let mut s = 12345u64;
        for a in random.addr.iter_mut() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            *a = 0x7f10_0000_0000 + ((s >> 20) & 0xfff_ffc0);
        }
        w.write_accesses(&regular).unwrap();
        w.write_accesses(&random).unwrap();
        w.close().unwrap();
        let part = d.join("accesses/part-00000.parquet");
        let r =
            parquet::file::serialized_reader::SerializedFileReader::new(std::fs::File::open(&part).unwrap())
                .unwrap();
        let enc = |rg: usize| r.metadata().row_group(rg).column(2).encodings().collect::<Vec<_>>();
        assert!(enc(0).contains(&Encoding::DELTA_BINARY_PACKED), "{:?}", enc(0));
        assert!(enc(1).contains(&Encoding::BYTE_STREAM_SPLIT), "{:?}", enc(1));
        let t = AccessTable::open(&d).unwrap();
        for (tid, want) in [(1, &regular), (2, &random)] {
            let mut cur = t.cursor(Columns::ALL, Some(vec![tid]));
            let (mut c, mut got) = (AccessChunk::default(), Vec::<u64>::new());
            while cur.next_chunk(&mut c, 4096).unwrap() {
                got.extend(&c.addr);
            }
            assert_eq!(&got, &want.addr);
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_writer_keeps_the_touched_pages_and_readers_check_them() {
        let d = tmpdir("touched");
        let mut w = RecordingWriter::create(&d, "test", WriterOptions::default()).unwrap();
        w.write_accesses(&chunk(1, 200, 0x10_0000)).unwrap(); // 200 x 64 B: pages 0x100..0x103
        w.write_accesses(&chunk(2, 10, 0x80_0000)).unwrap();
        w.close().unwrap();
        let meta = read_meta(&d).unwrap();
        let t = AccessTable::open(&d).unwrap();
        let (runs, pages) = touched_runs(&meta, t.rows()).unwrap();
        assert_eq!(runs, vec![(0x10_0000, 0x10_4000), (0x80_0000, 0x80_1000)]);
        assert_eq!(pages, 5);
        // The same as a pass over the addresses finds.
        let s = super::aggregate::survey(&t).unwrap();
        assert_eq!((s.runs.clone(), s.pages), (runs, pages));
        // Stale (rows differ) or malformed: not used.
        assert!(touched_runs(&meta, t.rows() + 1).is_none());
        let mut bad = meta.clone();
        bad["touched_pages"]["runs"][0][1] = serde_json::json!(0x10_0001);
        assert!(touched_runs(&bad, t.rows()).is_none());
        bad["touched_pages"]["runs"] = serde_json::json!([[0x80_0000, 0x80_1000], [0x10_0000, 0x10_4000]]);
        assert!(touched_runs(&bad, t.rows()).is_none());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn split_passes_give_the_single_pass_results() {
        use super::aggregate::{aggregate_with, survey_with, Bins, MapSpec, Segment};
        let d = tmpdir("split");
        let opts = WriterOptions { part_rows: 1700, ..Default::default() };
        let mut w = RecordingWriter::create(&d, "test", opts).unwrap();
        for round in 0..4u64 {
            for tid in [5u32, 2, 8] {
                let mut c = chunk(tid, 900, 0x4000_0000 + u64::from(tid) * 0x20_0000 + round * 0x3_1000);
                for (i, t) in c.time.iter_mut().enumerate() {
                    *t = round * 10_000 + i as u64 * 7 + u64::from(tid);
                }
                w.write_accesses(&c).unwrap();
            }
        }
        w.close().unwrap();
        let t = AccessTable::open(&d).unwrap();
        assert!(t.parts.len() > 2);
        // Cursors split the rows once, in order, whatever their number.
        for n in 1..6 {
            let mut rows = 0;
            for mut cur in t.split_cursors(Columns::ALL, n) {
                let mut c = AccessChunk::default();
                while cur.next_chunk(&mut c, 500).unwrap() {
                    rows += c.len();
                }
            }
            assert_eq!(rows, 3 * 4 * 900, "{n} cursors");
        }
        let one = survey_with(&t, 1).unwrap();
        assert_eq!(one.rows, 10_800);
        assert_eq!(one.threads, 3);
        let specs = [
            MapSpec { base: 0x4000_0000, pages: 4096, group: 8 },
            MapSpec { base: 0x4100_0000, pages: 512, group: 1 },
        ];
        let segments = [
            Segment { lo: 0x4000_0000, hi: 0x4100_0000, t0: 0, t1: 25_000, mapping: 0 },
            Segment { lo: 0x4100_0000, hi: 0x4120_0000, t0: 0, t1: u64::MAX, mapping: 1 },
        ];
        let bins = Bins { t_lo: 0, width: 1000, cols: 40 };
        let (a1, u1) = aggregate_with(&t, &segments, &specs, bins, 1).unwrap();
        assert!(a1[0].accesses > 0 && u1 > 0);
        for n in 2..5 {
            assert_eq!(survey_with(&t, n).unwrap(), one, "{n} threads");
            let (an, un) = aggregate_with(&t, &segments, &specs, bins, n).unwrap();
            assert_eq!((an, un), (a1.clone(), u1), "{n} threads");
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn sync_events_roundtrip_and_bad_files_are_named() {
        use crate::{SyncEvent, SyncKind};
        let d = tmpdir("sync");
        let ev = |seq: u64, kind: SyncKind| SyncEvent {
            time_ns: seq * 10,
            tid: 7 + (seq % 2) as u32,
            seq,
            index: seq * 100,
            kind,
            object: 0xdead,
            arg: 2,
        };
        let events = vec![ev(1, SyncKind::OmpBarrier), ev(0, SyncKind::MutexLock), ev(2, SyncKind::CondWake)];
        let mut w = RecordingWriter::create(&d, "t", WriterOptions::default()).unwrap();
        w.write_accesses(&chunk(7, 10, 0)).unwrap();
        w.write_sync(&events).unwrap();
        w.close().unwrap();
        assert_eq!(read_meta(&d).unwrap()["tables"]["sync"], 3);
        let got = read_sync(&d).unwrap();
        assert_eq!(got.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(got[1], events[0]);
        // A recording without the table has no events.
        std::fs::remove_dir_all(d.join("sync")).unwrap();
        assert!(read_sync(&d).unwrap().is_empty());
        // The tracer's file: 48-byte records in seq order.
        let rec = |seq: u64, kind: u32| {
            let mut b = Vec::new();
            for v in [seq, 5, 6, 7, 8] {
                b.extend(v.to_le_bytes());
            }
            b.extend(9u32.to_le_bytes());
            b.extend(kind.to_le_bytes());
            b
        };
        let f = d.join("sync.bin");
        std::fs::write(&f, [rec(0, 1), rec(1, 2)].concat()).unwrap();
        let e = import::read_sync_file(&f).unwrap();
        assert_eq!((e[1].kind, e[1].index, e[1].tid), (SyncKind::MutexLock, 6, 9));
        std::fs::write(&f, [rec(0, 1), rec(1, 42)].concat()).unwrap();
        let msg = import::read_sync_file(&f).unwrap_err().to_string();
        assert!(msg.contains("sync.bin: record 1: field `kind`: 42 is not a sync kind"), "{msg}");
        std::fs::write(&f, [rec(3, 1), rec(1, 2)].concat()).unwrap();
        let msg = import::read_sync_file(&f).unwrap_err().to_string();
        assert!(msg.contains("record 1: field `seq`"), "{msg}");
        std::fs::write(&f, &rec(0, 1)[..40]).unwrap();
        let msg = import::read_sync_file(&f).unwrap_err().to_string();
        assert!(msg.contains("truncated record (40 of 48 bytes)"), "{msg}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn mixed_row_groups_are_filtered() {
        let d = tmpdir("mixed");
        let mut w = RecordingWriter::create(&d, "test", WriterOptions::default()).unwrap();
        let mut c = chunk(1, 100, 0);
        for i in 0..100 {
            c.tid[i] = (i % 4) as u32;
        }
        w.write_accesses(&c).unwrap();
        w.close().unwrap();
        let t = AccessTable::open(&d).unwrap();
        assert!(!t.thread_blocked() && !t.has_size());
        assert_eq!(t.tids().unwrap(), vec![0, 1, 2, 3]);
        let mut cur = t.cursor(
            Columns { time: true, tid: false, addr: true, kind: false, size: false },
            Some(vec![1, 2]),
        );
        let mut out = AccessChunk::default();
        assert!(cur.next_chunk(&mut out, 1000).unwrap());
        assert_eq!(out.addr.len(), 50);
        assert_eq!(out.time[..3], [1, 2, 5]);
        assert!(!cur.next_chunk(&mut out, 1000).unwrap());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn parts_names_special_files_and_overwrite_are_checked() {
        let d = tmpdir("parts");
        let mut w = RecordingWriter::create(&d, "t", WriterOptions::default()).unwrap();
        w.write_accesses(&chunk(1, 10, 0)).unwrap();
        w.close().unwrap();
        let acc = d.join("accesses");
        std::fs::copy(acc.join("part-00000.parquet"), acc.join("part-00002.parquet")).unwrap();
        let e = AccessTable::open(&d).unwrap_err().to_string();
        assert!(e.contains("part-00001.parquet: missing") && e.contains("part-00002.parquet"), "{e}");
        std::fs::remove_file(acc.join("part-00002.parquet")).unwrap();
        std::fs::write(acc.join(".part-00001.parquet.tmp"), b"a dead writer's").unwrap();
        assert_eq!(AccessTable::open(&d).unwrap().rows(), 10);
        std::fs::write(acc.join("notes.parquet"), b"x").unwrap();
        let e = AccessTable::open(&d).unwrap_err().to_string();
        assert!(e.contains("notes.parquet: unexpected in table `accesses`"), "{e}");
        std::fs::remove_file(acc.join("notes.parquet")).unwrap();
        std::fs::remove_file(acc.join("part-00000.parquet")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", acc.join("part-00000.parquet")).unwrap();
        let e = AccessTable::open(&d).unwrap_err().to_string();
        assert!(e.contains("is a character device, not a Parquet part; refusing to read it"), "{e}");
        std::fs::remove_dir_all(&acc).unwrap();
        std::fs::write(&acc, b"not a directory").unwrap();
        let e = AccessTable::open(&d).unwrap_err().to_string();
        assert!(e.contains("expected the directory of table `accesses`"), "{e}");
        // The writer replaces a recording, never anything else.
        let other = tmpdir("other");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("thesis.tex"), b"years of work").unwrap();
        let opts = WriterOptions { overwrite: true, ..Default::default() };
        let e = RecordingWriter::create(&other, "t", opts.clone()).err().unwrap().to_string();
        assert!(e.contains("is not a tierlab recording"), "{e}");
        assert!(other.join("thesis.tex").exists());
        RecordingWriter::create(&d, "t", opts).unwrap().close().unwrap();
        assert_eq!(AccessTable::open(&d).unwrap().rows(), 0);
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_dir_all(&other);
    }

    #[test]
    fn pages_larger_than_the_limit_are_refused() {
        let d = tmpdir("pagecap");
        let mut w = RecordingWriter::create(&d, "t", WriterOptions::default()).unwrap();
        w.write_accesses(&chunk(1, 1000, 0x7f00_0000_0000)).unwrap();
        w.close().unwrap();
        let mut t = AccessTable::open(&d).unwrap();
        assert_eq!(t.max_page_bytes, pages::MAX_PAGE_BYTES);
        let mut out = AccessChunk::default();
        assert!(t.cursor(Columns::ALL, None).next_chunk(&mut out, 4000).unwrap());
        // A highly compressible column (delta-encoded times) over a small limit.
        t.max_page_bytes = 16;
        let e = t.cursor(Columns::ALL, None).next_chunk(&mut out, 4000).unwrap_err().to_string();
        assert!(
            e.contains("part-00000.parquet: field `time_ns`: row group 0: page at byte 4 declares")
                && e.ends_with(
                    "bytes uncompressed, more than a page may have (16); refusing to decompress it"
                ),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Zigzag varint of the Thrift compact protocol.
    fn varint(v: i64) -> Vec<u8> {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = Vec::new();
        loop {
            if z < 0x80 {
                out.push(z as u8);
                return out;
            }
            out.push((z as u8 & 0x7f) | 0x80);
            z >>= 7;
        }
    }

    #[test]
    fn a_page_header_claiming_a_gigabyte_is_refused() {
        use parquet::file::reader::FileReader;
        let d = tmpdir("pagebomb");
        let mut w = RecordingWriter::create(&d, "t", WriterOptions::default()).unwrap();
        w.write_accesses(&chunk(1, 100, 0x7f00_0000_0000)).unwrap();
        w.write_mappings(&[MappingRow {
            time_ns: 0,
            map: true,
            start: 0x1000,
            length: 4096,
            name: "x".into(),
        }])
        .unwrap();
        w.close().unwrap();
        // The first page header of the part's last column chunk (`kind`, written last:
        // nothing after it but the footer, whose offsets stay right) now says 1 GiB
        // uncompressed: fields 1 (type) and 2 (uncompressed_page_size), both i32.
        for (table, last) in [("accesses", "kind"), ("mappings", "name")] {
            let part = d.join(table).join("part-00000.parquet");
            let data = std::fs::read(&part).unwrap();
            let r = parquet::file::serialized_reader::SerializedFileReader::new(
                std::fs::File::open(&part).unwrap(),
            )
            .unwrap();
            let rg = r.metadata().row_group(0);
            let col = rg.columns().iter().max_by_key(|c| c.byte_range().0).unwrap();
            assert_eq!(col.column_path().string(), last);
            let at = col.byte_range().0 as usize;
            assert_eq!(data[at], 0x15, "field 1, i32");
            let type_end = at + 1 + data[at + 1..].iter().position(|b| b & 0x80 == 0).unwrap() + 1;
            assert_eq!(data[type_end], 0x15, "field 2, i32");
            let size_end =
                type_end + 1 + data[type_end + 1..].iter().position(|b| b & 0x80 == 0).unwrap() + 1;
            let mut crafted = data[..type_end + 1].to_vec();
            crafted.extend(varint(1 << 30));
            crafted.extend(&data[size_end..]);
            std::fs::write(&part, crafted).unwrap();
            let want = format!(
                "{table}/part-00000.parquet: field `{last}`: row group 0: page at byte {at} declares 1073741824 \
                 bytes uncompressed, more than a page may have (268435456); refusing to decompress it"
            );
            let e = if table == "accesses" {
                let t = AccessTable::open(&d).unwrap();
                t.cursor(Columns::ALL, None).next_chunk(&mut AccessChunk::default(), 100).unwrap_err()
            } else {
                read_mappings(&d).unwrap_err()
            };
            assert!(e.to_string().ends_with(&want), "{e}");
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn errors_name_file_and_field() {
        let d = tmpdir("err");
        assert!(read_meta(&d).unwrap_err().to_string().contains("directory not found"));
        std::fs::create_dir_all(&d).unwrap();
        assert!(read_meta(&d).unwrap_err().to_string().contains("meta.json: missing"));
        let mut w = RecordingWriter::create(&d, "t", WriterOptions { overwrite: true, ..Default::default() })
            .unwrap();
        let mut c = chunk(1, 10, 0);
        c.kind[4] = 2;
        w.write_accesses(&c).unwrap();
        w.close().unwrap();
        let t = AccessTable::open(&d).unwrap();
        let mut cur = t.cursor(Columns::ALL, None);
        let e = cur.next_chunk(&mut AccessChunk::default(), 100).unwrap_err().to_string();
        assert!(e.contains("part-00000.parquet: record 4: field `kind`"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
