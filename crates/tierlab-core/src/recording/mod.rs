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
pub mod import;
mod read;
mod write;

pub use read::{
    read_mappings, table_parts, AccessChunk, AccessCursor, AccessTable, Columns, PartInfo, RowGroupInfo,
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

/// `meta.json` of a recording directory, parsed (with the format and version checked).
pub fn read_meta(dir: &std::path::Path) -> Result<serde_json::Value> {
    let path = dir.join("meta.json");
    let shown = path.display().to_string();
    if !dir.is_dir() {
        return Err(RecordingError::file(
            dir.display().to_string(),
            "no such recording (directory not found)",
        ));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            RecordingError::file(&shown, format!("missing; {} is not a tierlab recording", dir.display()))
        } else {
            RecordingError::file(&shown, format!("unreadable: {e}"))
        }
    })?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| RecordingError::file(&shown, format!("unreadable: {e}")))?;
    if v.get("format").and_then(|f| f.as_str()) != Some(crate::format::NAME) {
        return Err(RecordingError::file(
            &shown,
            format!(
                "field `format` is {}, expected \"{}\"",
                v.get("format").unwrap_or(&serde_json::Value::Null),
                crate::format::NAME
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
