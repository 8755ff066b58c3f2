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
pub mod pages;
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
