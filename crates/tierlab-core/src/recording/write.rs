//! Writer of a whole recording (format version 1), parts written atomically.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::column::writer::{get_column_writer, get_typed_column_writer, ColumnCloseResult};
use parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::{ColumnDescPtr, ColumnPath, SchemaDescriptor, Type};
use serde_json::{json, Map, Value};

use super::{AccessChunk, RecordingError, Result};
use crate::format;

const ACCESS_SCHEMA: &str = "message accesses {
  REQUIRED INT64 time_ns (INTEGER(64,false));
  REQUIRED INT32 tid (INTEGER(32,false));
  REQUIRED INT64 addr (INTEGER(64,false));
  REQUIRED INT32 kind (INTEGER(8,false));
}";
const ACCESS_SCHEMA_SIZE: &str = "message accesses {
  REQUIRED INT64 time_ns (INTEGER(64,false));
  REQUIRED INT32 tid (INTEGER(32,false));
  REQUIRED INT64 addr (INTEGER(64,false));
  REQUIRED INT32 kind (INTEGER(8,false));
  REQUIRED INT32 size (INTEGER(8,false));
}";
const MAPPING_SCHEMA: &str = "message mappings {
  REQUIRED INT64 time_ns (INTEGER(64,false));
  REQUIRED BYTE_ARRAY event (STRING);
  REQUIRED INT64 start (INTEGER(64,false));
  REQUIRED INT64 length (INTEGER(64,false));
  REQUIRED BYTE_ARRAY name (STRING);
}";
const SAMPLE_SCHEMA: &str = "message samples {
  REQUIRED INT64 time_ns (INTEGER(64,false));
  REQUIRED INT32 tid (INTEGER(32,false));
  REQUIRED INT32 cpu (INTEGER(32,false));
  REQUIRED INT64 addr (INTEGER(64,false));
  REQUIRED INT64 ip (INTEGER(64,false));
  REQUIRED INT64 weight (INTEGER(64,false));
  REQUIRED INT64 data_src (INTEGER(64,false));
  REQUIRED BYTE_ARRAY event (STRING);
  REQUIRED INT64 drain (INTEGER(64,false));
}";
const SYNC_SCHEMA: &str = "message sync {
  REQUIRED INT64 time_ns (INTEGER(64,false));
  REQUIRED INT32 tid (INTEGER(32,false));
  REQUIRED INT64 seq (INTEGER(64,false));
  REQUIRED INT64 index (INTEGER(64,false));
  REQUIRED INT32 kind (INTEGER(8,false));
  REQUIRED INT64 object (INTEGER(64,false));
  REQUIRED INT64 arg (INTEGER(64,false));
}";
const DRAIN_SCHEMA: &str = "message drains {
  REQUIRED INT64 time_ns (INTEGER(64,false));
  REQUIRED INT32 cpu (INTEGER(32,false));
  REQUIRED INT64 drain (INTEGER(64,false));
  REQUIRED INT32 records (INTEGER(32,false));
}";

/// Options of [`RecordingWriter`].
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// Rows per part of the `accesses` table before a new part is started.
    pub part_rows: u64,
    /// zstd level.
    pub zstd_level: i32,
    /// Write the optional `size` column.
    pub with_size: bool,
    /// Replace an existing non-empty directory.
    pub overwrite: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions { part_rows: 1 << 25, zstd_level: 3, with_size: false, overwrite: false }
    }
}

/// One row of the `mappings` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MappingRow {
    /// Time of the event.
    pub time_ns: u64,
    /// `map` (true) or `unmap`.
    pub map: bool,
    /// First byte.
    pub start: u64,
    /// Bytes.
    pub length: u64,
    /// Name (may be empty).
    pub name: String,
}

struct OpenPart {
    tmp: PathBuf,
    path: PathBuf,
    w: SerializedFileWriter<File>,
    rows: u64,
    /// The `addr` column's descriptor and its two encodings' properties.
    addr: AddrEncoder,
}

/// Bytes per row of a `DELTA_BINARY_PACKED` `addr` chunk above which the writer also tries
/// `BYTE_STREAM_SPLIT` and keeps the smaller. Regular traces (a few streams per thread, small
/// strides) take well under a byte per address with deltas; irregular ones (indirect and random
/// accesses) spread their deltas over 20-40 bits, which bit-packing leaves to zstd as noise,
/// while byte-stream-split gives zstd each address byte in a stream of its own (the high bytes
/// of a thread's addresses hardly change).
pub const ADDR_TRY_SPLIT_BYTES_PER_ROW: f64 = 0.5;

/// Encodes the `addr` column of a row group in memory, choosing its encoding per row group.
struct AddrEncoder {
    descr: ColumnDescPtr,
    delta: Arc<WriterProperties>,
    split: Arc<WriterProperties>,
}

impl AddrEncoder {
    fn new(schema: &Arc<Type>, opts: &WriterOptions) -> Result<Self> {
        let sd = SchemaDescriptor::new(schema.clone());
        let descr = (0..sd.num_columns())
            .map(|i| sd.column(i))
            .find(|c| c.name() == "addr")
            .expect("the accesses schema has addr");
        Ok(AddrEncoder {
            descr,
            delta: props_with(opts, &["time_ns", "addr"], &[], &[], ACCESS_NO_STATS)?,
            split: props_with(opts, &["time_ns"], &[], &["addr"], ACCESS_NO_STATS)?,
        })
    }

    /// One encoded chunk of `values` with `props`: its bytes and its metadata.
    fn encode(
        &self,
        props: &Arc<WriterProperties>,
        values: &[i64],
    ) -> parquet::errors::Result<(bytes::Bytes, ColumnCloseResult)> {
        let mut sink = TrackedWrite::new(Vec::with_capacity(values.len() * 2));
        let close = {
            let pw = SerializedPageWriter::new(&mut sink);
            let cw = get_column_writer(self.descr.clone(), props.clone(), Box::new(pw));
            let mut typed = get_typed_column_writer::<Int64Type>(cw);
            typed.write_batch(values, None, None)?;
            typed.close()?
        };
        Ok((bytes::Bytes::from(sink.into_inner()?), close))
    }

    /// The smaller of the delta and the byte-stream-split chunk (the split one is tried only
    /// when deltas take more than [`ADDR_TRY_SPLIT_BYTES_PER_ROW`]).
    fn best(&self, values: &[i64]) -> parquet::errors::Result<(bytes::Bytes, ColumnCloseResult)> {
        let delta = self.encode(&self.delta, values)?;
        if (delta.0.len() as f64) <= ADDR_TRY_SPLIT_BYTES_PER_ROW * values.len() as f64 {
            return Ok(delta);
        }
        let split = self.encode(&self.split, values)?;
        Ok(if split.0.len() < delta.0.len() { split } else { delta })
    }
}

/// Writes a recording: `accesses` row group by row group (a new part every
/// [`WriterOptions::part_rows`] rows), the other tables at once, `meta.json` after every part.
pub struct RecordingWriter {
    dir: PathBuf,
    opts: WriterOptions,
    meta: Map<String, Value>,
    parts: [usize; 4],
    rows: [u64; 4],
    acc: Option<OpenPart>,
    /// Parts and rows of the optional `sync` table (`None`: not written).
    sync: Option<(usize, u64)>,
    closed: bool,
    /// Pages the `accesses` written so far touch (for `meta.json`'s `touched_pages`).
    touched: super::aggregate::PageSet,
}

/// Most runs of touched pages `meta.json` lists (`touched_pages.runs`); a trace whose pages
/// form more runs gets the count only, and readers make their own pass.
pub const MAX_TOUCHED_RUNS: usize = 4096;

const TABLES: [&str; 4] = [format::ACCESSES, format::SAMPLES, format::MAPPINGS, format::DRAINS];

fn io_err(p: &Path, e: impl std::fmt::Display) -> RecordingError {
    RecordingError::file(p.display().to_string(), e.to_string())
}

/// Current UTC time as ISO 8601 with seconds (`2025-01-31T12:00:00+00:00`).
pub fn now_iso8601() -> String {
    let secs =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}+00:00", rem / 3600, rem / 60 % 60, rem % 60)
}

fn props(opts: &WriterOptions, delta: &[&str], dict: &[&str]) -> Result<Arc<WriterProperties>> {
    props_with(opts, delta, dict, &[], &[])
}

/// Columns of `accesses` written without min/max statistics: computing them compares every
/// value (a sixth of the import's CPU time on a 66 M-access trace) and no reader uses them.
/// `tid` keeps its statistics: readers pick a thread's row groups by them.
const ACCESS_NO_STATS: &[&str] = &["time_ns", "addr", "kind", "size"];

fn props_with(
    opts: &WriterOptions,
    delta: &[&str],
    dict: &[&str],
    split: &[&str],
    no_stats: &[&str],
) -> Result<Arc<WriterProperties>> {
    let level =
        ZstdLevel::try_new(opts.zstd_level).map_err(|e| RecordingError::file("<writer>", e.to_string()))?;
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_data_page_size_limit(1 << 20)
        .set_write_batch_size(1 << 16)
        .set_created_by(format!("tierlab {}", env!("CARGO_PKG_VERSION")));
    for c in delta {
        b = b.set_column_encoding(ColumnPath::from(*c), Encoding::DELTA_BINARY_PACKED);
    }
    for c in split {
        b = b.set_column_encoding(ColumnPath::from(*c), Encoding::BYTE_STREAM_SPLIT);
    }
    for c in dict {
        b = b.set_column_dictionary_enabled(ColumnPath::from(*c), true);
    }
    for c in no_stats {
        b = b.set_column_statistics_enabled(ColumnPath::from(*c), EnabledStatistics::None);
    }
    Ok(Arc::new(b.build()))
}

fn schema(text: &str) -> Arc<Type> {
    Arc::new(parse_message_type(text).expect("valid schema"))
}

fn to_i64(v: &[u64]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

fn to_i32<T: Copy + Into<u32>>(v: &[T]) -> Vec<i32> {
    v.iter().map(|&x| x.into() as i32).collect()
}

impl RecordingWriter {
    /// Start a recording in `dir` (created; a non-empty existing directory is an error
    /// unless `opts.overwrite`). `source` goes into `meta.json`.
    pub fn create(dir: &Path, source: &str, opts: WriterOptions) -> Result<Self> {
        if dir.exists() {
            let nonempty =
                !dir.is_dir() || std::fs::read_dir(dir).map_err(|e| io_err(dir, e))?.next().is_some();
            if nonempty {
                if !opts.overwrite {
                    return Err(io_err(dir, "already exists (use --force to overwrite)"));
                }
                // Only a tierlab recording is ever replaced: never a file, a link, or a
                // directory of anything else.
                let link =
                    std::fs::symlink_metadata(dir).map(|m| m.file_type().is_symlink()).unwrap_or(false);
                if link || !dir.is_dir() || super::read_meta(dir).is_err() {
                    return Err(io_err(
                        dir,
                        "exists and is not a tierlab recording (meta.json); refusing to replace it: \
                         remove it yourself or choose another directory",
                    ));
                }
                std::fs::remove_dir_all(dir).map_err(|e| io_err(dir, e))?;
            }
        }
        for t in TABLES {
            std::fs::create_dir_all(dir.join(t)).map_err(|e| io_err(dir, e))?;
        }
        let mut meta = Map::new();
        meta.insert("format".into(), json!(format::NAME));
        meta.insert("version".into(), json!(format::VERSION));
        meta.insert("source".into(), json!(source));
        meta.insert("created".into(), json!(now_iso8601()));
        meta.insert("complete".into(), json!(false));
        meta.insert("parameters".into(), json!({}));
        meta.insert("machine".into(), json!({}));
        let mut w = RecordingWriter {
            dir: dir.to_path_buf(),
            opts,
            meta,
            parts: [0; 4],
            rows: [0; 4],
            acc: None,
            sync: None,
            closed: false,
            touched: Default::default(),
        };
        w.write_meta()?;
        Ok(w)
    }

    /// The recording directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `meta.json`'s fields, to set `parameters`, `machine`, `time_unit`, `accounting`, ...
    /// (written at the next part or at [`RecordingWriter::close`]).
    pub fn meta_mut(&mut self) -> &mut Map<String, Value> {
        &mut self.meta
    }

    /// Rows of `accesses` written so far.
    pub fn access_rows(&self) -> u64 {
        self.rows[0] + self.acc.as_ref().map_or(0, |p| p.rows)
    }

    fn write_meta(&mut self) -> Result<()> {
        let mut m = self.meta.clone();
        let mut tables: Map<String, Value> =
            TABLES.iter().zip(self.rows).map(|(t, r)| (t.to_string(), json!(r))).collect();
        if let Some((_, rows)) = self.sync {
            tables.insert(crate::schema::SYNC.name.into(), json!(rows));
        }
        m.insert("tables".into(), Value::Object(tables));
        let text = serde_json::to_string_pretty(&Value::Object(m)).expect("json") + "\n";
        atomic_write(&self.dir.join("meta.json"), text.as_bytes())
    }

    fn part_paths(&self, table: usize) -> (PathBuf, PathBuf) {
        let name = format!("part-{:05}.parquet", self.parts[table]);
        let dir = self.dir.join(TABLES[table]);
        (dir.join(format!(".{name}.tmp")), dir.join(name))
    }

    fn finish_part(
        &mut self,
        table: usize,
        w: SerializedFileWriter<File>,
        tmp: &Path,
        path: &Path,
        rows: u64,
    ) -> Result<()> {
        let f = w.into_inner().map_err(|e| io_err(tmp, e))?;
        f.sync_all().map_err(|e| io_err(tmp, e))?;
        drop(f);
        std::fs::rename(tmp, path).map_err(|e| io_err(path, e))?;
        self.parts[table] += 1;
        self.rows[table] += rows;
        self.write_meta()
    }

    /// Write `chunk` (every column of the table; `size` too when the writer has it) as one row
    /// group of `accesses`. Give each row group the rows of one thread: replay and the
    /// compression work best on that layout.
    pub fn write_accesses(&mut self, chunk: &AccessChunk) -> Result<()> {
        let n = chunk.addr.len();
        if n == 0 {
            return Ok(());
        }
        if chunk.time.len() != n
            || chunk.tid.len() != n
            || chunk.kind.len() != n
            || (self.opts.with_size && chunk.size.len() != n)
        {
            return Err(RecordingError::file("<writer>", "write_accesses: columns of different lengths"));
        }
        if self.acc.is_none() {
            let (tmp, path) = self.part_paths(0);
            let f = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
            let s = schema(if self.opts.with_size { ACCESS_SCHEMA_SIZE } else { ACCESS_SCHEMA });
            let p =
                props_with(&self.opts, &["time_ns", "addr"], &["tid", "kind", "size"], &[], ACCESS_NO_STATS)?;
            let addr = AddrEncoder::new(&s, &self.opts)?;
            let w = SerializedFileWriter::new(f, s, p).map_err(|e| io_err(&tmp, e))?;
            self.acc = Some(OpenPart { tmp, path, w, rows: 0, addr });
        }
        let columns = if self.opts.with_size { 5 } else { 4 };
        let touched = &mut self.touched;
        let part = self.acc.as_mut().expect("open part");
        let tmp = part.tmp.clone();
        let e = |e: parquet::errors::ParquetError| io_err(&tmp, e);
        let (enc, w) = (&part.addr, &mut part.w);
        // The addresses (their touched pages, their encoding: most of the work) on a thread of
        // their own while this one writes the other columns.
        std::thread::scope(|s| -> Result<()> {
            let mut addr = Some(s.spawn(move || {
                for &a in &chunk.addr {
                    touched.insert(a);
                }
                enc.best(&to_i64(&chunk.addr))
            }));
            let mut rg = w.next_row_group().map_err(e)?;
            for k in 0..columns {
                if k == 2 {
                    let handle = addr.take().expect("the addr column once");
                    let (b, c) = handle.join().expect("the address encoder does not panic").map_err(e)?;
                    rg.append_column(&b, c).map_err(e)?;
                    continue;
                }
                let mut col = rg.next_column().map_err(e)?.expect("a column of the schema");
                match k {
                    0 => col.typed::<Int64Type>().write_batch(&to_i64(&chunk.time), None, None),
                    1 => col.typed::<Int32Type>().write_batch(&to_i32(&chunk.tid), None, None),
                    3 => col.typed::<Int32Type>().write_batch(&to_i32(&chunk.kind), None, None),
                    _ => col.typed::<Int32Type>().write_batch(&to_i32(&chunk.size), None, None),
                }
                .map_err(e)?;
                col.close().map_err(e)?;
            }
            rg.close().map_err(e)?;
            Ok(())
        })?;
        part.rows += n as u64;
        if part.rows >= self.opts.part_rows {
            self.flush()?;
        }
        Ok(())
    }

    /// Close the open `accesses` part (renamed into place) and rewrite `meta.json`.
    pub fn flush(&mut self) -> Result<()> {
        if let Some(p) = self.acc.take() {
            self.finish_part(0, p.w, &p.tmp, &p.path, p.rows)?;
        } else {
            self.write_meta()?;
        }
        Ok(())
    }

    /// Write `rows` as one part of `mappings`.
    pub fn write_mappings(&mut self, rows: &[MappingRow]) -> Result<()> {
        let (tmp, path) = self.part_paths(2);
        let f = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
        let p = props(&self.opts, &[], &[])?;
        let mut w = SerializedFileWriter::new(f, schema(MAPPING_SCHEMA), p).map_err(|e| io_err(&tmp, e))?;
        if !rows.is_empty() {
            let e = |e: parquet::errors::ParquetError| io_err(&tmp, e);
            let mut rg = w.next_row_group().map_err(e)?;
            let mut k = 0;
            while let Some(mut col) = rg.next_column().map_err(e)? {
                match k {
                    0 => col.typed::<Int64Type>().write_batch(
                        &rows.iter().map(|r| r.time_ns as i64).collect::<Vec<_>>(),
                        None,
                        None,
                    ),
                    1 => col.typed::<ByteArrayType>().write_batch(
                        &rows
                            .iter()
                            .map(|r| ByteArray::from(if r.map { "map" } else { "unmap" }))
                            .collect::<Vec<_>>(),
                        None,
                        None,
                    ),
                    2 => col.typed::<Int64Type>().write_batch(
                        &rows.iter().map(|r| r.start as i64).collect::<Vec<_>>(),
                        None,
                        None,
                    ),
                    3 => col.typed::<Int64Type>().write_batch(
                        &rows.iter().map(|r| r.length as i64).collect::<Vec<_>>(),
                        None,
                        None,
                    ),
                    _ => col.typed::<ByteArrayType>().write_batch(
                        &rows.iter().map(|r| ByteArray::from(r.name.as_str())).collect::<Vec<_>>(),
                        None,
                        None,
                    ),
                }
                .map_err(e)?;
                col.close().map_err(e)?;
                k += 1;
            }
            rg.close().map_err(e)?;
        }
        self.finish_part(2, w, &tmp, &path, rows.len() as u64)
    }

    /// Write `rows` as one part of the optional `sync` table (sorted by `seq` first; the
    /// table's rows are in `seq` order).
    pub fn write_sync(&mut self, rows: &[crate::SyncEvent]) -> Result<()> {
        let (parts, total) = self.sync.unwrap_or((0, 0));
        let dir = self.dir.join(crate::schema::SYNC.name);
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let name = format!("part-{parts:05}.parquet");
        let (tmp, path) = (dir.join(format!(".{name}.tmp")), dir.join(name));
        let mut rows = rows.to_vec();
        rows.sort_by_key(|r| r.seq);
        let f = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
        let p = props(&self.opts, &["time_ns", "seq", "index"], &["tid", "kind"])?;
        let mut w = SerializedFileWriter::new(f, schema(SYNC_SCHEMA), p).map_err(|e| io_err(&tmp, e))?;
        if !rows.is_empty() {
            let e = |e: parquet::errors::ParquetError| io_err(&tmp, e);
            let u64s = |f: fn(&crate::SyncEvent) -> u64| rows.iter().map(|r| f(r) as i64).collect::<Vec<_>>();
            let mut rg = w.next_row_group().map_err(e)?;
            let mut k = 0;
            while let Some(mut col) = rg.next_column().map_err(e)? {
                match k {
                    0 => col.typed::<Int64Type>().write_batch(&u64s(|r| r.time_ns), None, None),
                    1 => col.typed::<Int32Type>().write_batch(
                        &rows.iter().map(|r| r.tid as i32).collect::<Vec<_>>(),
                        None,
                        None,
                    ),
                    2 => col.typed::<Int64Type>().write_batch(&u64s(|r| r.seq), None, None),
                    3 => col.typed::<Int64Type>().write_batch(&u64s(|r| r.index), None, None),
                    4 => col.typed::<Int32Type>().write_batch(
                        &rows.iter().map(|r| r.kind as i32).collect::<Vec<_>>(),
                        None,
                        None,
                    ),
                    5 => col.typed::<Int64Type>().write_batch(&u64s(|r| r.object), None, None),
                    _ => col.typed::<Int64Type>().write_batch(&u64s(|r| r.arg), None, None),
                }
                .map_err(e)?;
                col.close().map_err(e)?;
                k += 1;
            }
            rg.close().map_err(e)?;
        }
        let f = w.into_inner().map_err(|e| io_err(&tmp, e))?;
        f.sync_all().map_err(|e| io_err(&tmp, e))?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(|e| io_err(&path, e))?;
        self.sync = Some((parts + 1, total + rows.len() as u64));
        self.write_meta()
    }

    fn empty_part(&mut self, table: usize, text: &str) -> Result<()> {
        let (tmp, path) = self.part_paths(table);
        let f = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
        let p = props(&self.opts, &[], &[])?;
        let w = SerializedFileWriter::new(f, schema(text), p).map_err(|e| io_err(&tmp, e))?;
        self.finish_part(table, w, &tmp, &path, 0)
    }

    /// Flush, give every table without parts an empty one, mark the recording complete.
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.flush()?;
        let schemas = [
            if self.opts.with_size { ACCESS_SCHEMA_SIZE } else { ACCESS_SCHEMA },
            SAMPLE_SCHEMA,
            MAPPING_SCHEMA,
            DRAIN_SCHEMA,
        ];
        for (t, s) in schemas.iter().enumerate() {
            if self.parts[t] == 0 {
                self.empty_part(t, s)?;
            }
        }
        // The pages the accesses touch, counted while they were written: a replay maps them
        // without a pass over the addresses (readers check `rows` against the table's).
        let (runs, pages) = std::mem::take(&mut self.touched).runs();
        let mut touched = json!({"rows": self.rows[0], "pages": pages, "page_bytes": crate::PAGE_SIZE});
        if runs.len() <= MAX_TOUCHED_RUNS {
            touched["runs"] = json!(runs.iter().map(|&(s, e)| [s, e]).collect::<Vec<_>>());
        }
        self.meta.insert("touched_pages".into(), touched);
        self.meta.insert("complete".into(), json!(true));
        self.write_meta()?;
        self.closed = true;
        Ok(())
    }
}

/// Write `data` to `path` atomically (hidden temporary file, fsync, rename).
pub fn atomic_write(path: &Path, data: &[u8]) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let mut f = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
    f.write_all(data).map_err(|e| io_err(&tmp, e))?;
    f.sync_all().map_err(|e| io_err(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_err(path, e))
}
