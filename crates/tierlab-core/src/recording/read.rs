//! Streaming reader of the `accesses` table.

use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::basic::Type as Physical;
use parquet::column::reader::{get_typed_column_reader, ColumnReaderImpl};
use parquet::data_type::{Int32Type, Int64Type};
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::file::statistics::Statistics;

use super::{RecordingError, Result};

/// Which columns a cursor decodes (the others stay empty in the chunks it returns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Columns {
    /// `time_ns`.
    pub time: bool,
    /// `tid` (always decoded when the cursor filters by thread and a row group holds several).
    pub tid: bool,
    /// `addr`.
    pub addr: bool,
    /// `kind`.
    pub kind: bool,
    /// `size` (optional column: zeros when the table has none).
    pub size: bool,
}

impl Columns {
    /// Every column.
    pub const ALL: Columns = Columns { time: true, tid: true, addr: true, kind: true, size: true };
}

/// A chunk of rows, column by column (columns not asked for are empty).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessChunk {
    /// `time_ns`.
    pub time: Vec<u64>,
    /// `tid`.
    pub tid: Vec<u32>,
    /// `addr`.
    pub addr: Vec<u64>,
    /// `kind`: 0 load, 1 store.
    pub kind: Vec<u8>,
    /// `size` in bytes, 0 = unknown.
    pub size: Vec<u8>,
}

impl AccessChunk {
    /// Rows in the chunk (the longest column).
    pub fn len(&self) -> usize {
        self.addr.len().max(self.time.len()).max(self.tid.len()).max(self.kind.len())
    }
    /// True when the chunk has no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Empty every column.
    pub fn clear(&mut self) {
        self.time.clear();
        self.tid.clear();
        self.addr.clear();
        self.kind.clear();
        self.size.clear();
    }
}

/// One row group of a part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowGroupInfo {
    /// Rows in the row group.
    pub rows: u64,
    /// Row of the part the row group starts at.
    pub first_row: u64,
    /// Smallest and largest `tid`, when the part's statistics say.
    pub tid_range: Option<(u32, u32)>,
}

/// One Parquet part of the table.
#[derive(Clone, Debug)]
pub struct PartInfo {
    /// The part's file.
    pub path: PathBuf,
    /// Its row groups, in order.
    pub row_groups: Vec<RowGroupInfo>,
    /// Column index of `time_ns`, `tid`, `addr`, `kind`, `size` (absent: `None`).
    cols: [Option<usize>; 5],
}

/// The `accesses` table of a recording: its parts and row groups (footers only: nothing is
/// decoded until a cursor reads).
#[derive(Clone, Debug)]
pub struct AccessTable {
    /// The recording directory.
    pub dir: PathBuf,
    /// The parts, in order.
    pub parts: Vec<PartInfo>,
    /// Most bytes a page may declare uncompressed: a cursor refuses a row group with a
    /// larger page before decoding it ([`super::pages::MAX_PAGE_BYTES`]; tests lower it).
    pub max_page_bytes: u64,
}

const NAMES: [&str; 5] = ["time_ns", "tid", "addr", "kind", "size"];

fn pq_err(file: &Path, e: parquet::errors::ParquetError) -> RecordingError {
    RecordingError::file(file.display().to_string(), format!("not a readable Parquet file: {e}"))
}

/// Open Parquet part `path` (a regular file): its reader (footer read) and the file, for
/// [`super::pages::check_chunk`].
fn open_part(path: &Path) -> Result<(SerializedFileReader<File>, File)> {
    let file = super::open_regular(path, "Parquet part")?;
    let pages = file
        .try_clone()
        .map_err(|e| RecordingError::file(path.display().to_string(), format!("cannot read: {e}")))?;
    let r = SerializedFileReader::new_with_options(file, super::pages::reader_options())
        .map_err(|e| pq_err(path, e))?;
    Ok((r, pages))
}

/// The Parquet parts of table `table` in recording `dir`, in order. Checks their names as
/// the Python reader does: parts are `part-NNNNN.parquet` numbered from 0 without gaps;
/// files starting with `.` (a writer's temporaries) are ignored; anything else in the
/// table's directory, and a table "directory" that is not one, is an error.
pub fn table_parts(dir: &Path, table: &str) -> Result<Vec<PathBuf>> {
    let d = dir.join(table);
    let shown = d.display().to_string();
    let Ok(lmd) = std::fs::symlink_metadata(&d) else { return Ok(Vec::new()) };
    if !d.is_dir() {
        let what = match std::fs::metadata(&d) {
            Ok(m) if m.is_file() => "a file".to_string(),
            Ok(m) => super::file_kind(&m.file_type()).to_string(),
            Err(_) if lmd.file_type().is_symlink() => "a broken link".to_string(),
            Err(e) => e.to_string(),
        };
        return Err(RecordingError::file(
            &shown,
            format!("expected the directory of table `{table}` (Parquet parts), found {what}"),
        ));
    }
    let rd = std::fs::read_dir(&d).map_err(|e| RecordingError::file(&shown, e.to_string()))?;
    let mut numbered: std::collections::BTreeMap<u64, PathBuf> = std::collections::BTreeMap::new();
    for entry in rd {
        let path = entry.map_err(|e| RecordingError::file(&shown, e.to_string()))?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        if name.starts_with('.') {
            continue;
        }
        let index = name
            .strip_prefix("part-")
            .and_then(|n| n.strip_suffix(".parquet"))
            .filter(|n| n.len() >= 5 && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u64>().ok());
        let Some(index) = index else {
            return Err(RecordingError::file(
                path.display().to_string(),
                format!("unexpected in table `{table}` (its parts are named part-NNNNN.parquet)"),
            ));
        };
        if let Some(other) = numbered.get(&index) {
            let other = other.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            return Err(RecordingError::file(
                path.display().to_string(),
                format!("part number {index} also used by {other}"),
            ));
        }
        numbered.insert(index, path);
    }
    for (expected, (&index, path)) in numbered.iter().enumerate() {
        if index != expected as u64 {
            let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            return Err(RecordingError::file(
                d.join(format!("part-{expected:05}.parquet")).display().to_string(),
                format!(
                    "missing (table `{table}` goes on with {name}; parts are numbered from 00000 without gaps)"
                ),
            ));
        }
    }
    Ok(numbered.into_values().collect())
}

fn stat_u32_range(s: Option<&Statistics>) -> Option<(u32, u32)> {
    let (lo, hi) = match s? {
        Statistics::Int32(v) => (*v.min_opt()? as u32 as u64, *v.max_opt()? as u32 as u64),
        Statistics::Int64(v) => (*v.min_opt()? as u64, *v.max_opt()? as u64),
        _ => return None,
    };
    (lo <= hi && hi <= u64::from(u32::MAX)).then_some((lo as u32, hi as u32))
}

impl AccessTable {
    /// Open the `accesses` table of recording `dir`: list its parts, read their footers and
    /// check the columns (a missing column or a non-integer one is an error naming the part).
    pub fn open(dir: &Path) -> Result<Self> {
        let mut parts = Vec::new();
        for path in table_parts(dir, crate::format::ACCESSES)? {
            let r = open_part(&path)?.0;
            let md = r.metadata();
            let schema = md.file_metadata().schema_descr();
            let mut cols = [None; 5];
            for (i, c) in schema.columns().iter().enumerate() {
                if let Some(k) = NAMES.iter().position(|n| *n == c.name()) {
                    if c.max_rep_level() > 0
                        || !matches!(c.physical_type(), Physical::INT32 | Physical::INT64)
                    {
                        return Err(RecordingError {
                            file: path.display().to_string(),
                            record: None,
                            field: Some(NAMES[k].into()),
                            msg: format!("has type {:?}, expected an integer", c.physical_type()),
                        });
                    }
                    cols[k] = Some(i);
                }
            }
            if let Some(k) = (0..4).find(|&k| cols[k].is_none()) {
                return Err(RecordingError::file(
                    path.display().to_string(),
                    format!("missing column `{}` (table accesses needs time_ns, tid, addr, kind)", NAMES[k]),
                ));
            }
            let mut first = 0u64;
            let row_groups = md
                .row_groups()
                .iter()
                .map(|rg| {
                    let rows = rg.num_rows().max(0) as u64;
                    let info = RowGroupInfo {
                        rows,
                        first_row: first,
                        tid_range: stat_u32_range(rg.column(cols[1].expect("tid")).statistics()),
                    };
                    first += rows;
                    info
                })
                .collect();
            parts.push(PartInfo { path, row_groups, cols });
        }
        Ok(AccessTable { dir: dir.to_path_buf(), parts, max_page_bytes: super::pages::MAX_PAGE_BYTES })
    }

    /// Rows in the table.
    pub fn rows(&self) -> u64 {
        self.parts.iter().flat_map(|p| &p.row_groups).map(|g| g.rows).sum()
    }

    /// True when every part has the optional `size` column.
    pub fn has_size(&self) -> bool {
        !self.parts.is_empty() && self.parts.iter().all(|p| p.cols[4].is_some())
    }

    /// True when every row group's statistics say it holds one thread only (the layout of
    /// tierlab's importers and tracer).
    pub fn thread_blocked(&self) -> bool {
        self.parts
            .iter()
            .flat_map(|p| &p.row_groups)
            .all(|g| g.rows == 0 || matches!(g.tid_range, Some((a, b)) if a == b))
    }

    /// The distinct thread ids, from the row groups' statistics when the table is
    /// thread-blocked (no decoding), else by decoding the `tid` column.
    pub fn tids(&self) -> Result<Vec<u32>> {
        let mut tids: Vec<u32> = Vec::new();
        if self.thread_blocked() {
            tids = self
                .parts
                .iter()
                .flat_map(|p| &p.row_groups)
                .filter(|g| g.rows > 0)
                .filter_map(|g| g.tid_range.map(|r| r.0))
                .collect();
        } else {
            let mut cur =
                self.cursor(Columns { time: false, tid: true, addr: false, kind: false, size: false }, None);
            let mut chunk = AccessChunk::default();
            let mut seen = std::collections::BTreeSet::new();
            let mut last = None;
            while cur.next_chunk(&mut chunk, 1 << 16)? {
                for &t in &chunk.tid {
                    if last != Some(t) {
                        seen.insert(t);
                        last = Some(t);
                    }
                }
            }
            tids.extend(seen);
        }
        tids.sort_unstable();
        tids.dedup();
        Ok(tids)
    }

    /// A cursor over the rows (in table order) of the threads in `tids` (sorted; `None` =
    /// every thread), decoding the columns in `cols`.
    pub fn cursor(&self, cols: Columns, tids: Option<Vec<u32>>) -> AccessCursor {
        let mut plan = Vec::new();
        for (pi, p) in self.parts.iter().enumerate() {
            for (gi, g) in p.row_groups.iter().enumerate() {
                if g.rows == 0 {
                    continue;
                }
                let all = match (&tids, g.tid_range) {
                    (None, _) => true,
                    (Some(t), Some((lo, hi))) => {
                        let i = t.partition_point(|&x| x < lo);
                        if i == t.len() || t[i] > hi {
                            continue; // no wanted thread in this row group
                        }
                        lo == hi
                    }
                    (Some(_), None) => false,
                };
                plan.push((pi, gi, all));
            }
        }
        AccessCursor {
            parts: self.parts.clone(),
            cols,
            tids,
            plan,
            next: 0,
            max_page_bytes: self.max_page_bytes,
            file: None,
            rg: None,
            scratch: Scratch::default(),
        }
    }

    /// At most `n` cursors over every row (decoding `cols`) that together read the table
    /// once: each takes a contiguous run of row groups, the runs about equal in rows, in
    /// table order (cursor 0 first). For passes whose result does not depend on the order
    /// of rows across cursors, run side by side.
    pub fn split_cursors(&self, cols: Columns, n: usize) -> Vec<AccessCursor> {
        let whole = self.cursor(cols, None);
        let rows: Vec<u64> = whole.plan.iter().map(|&(p, g, _)| self.parts[p].row_groups[g].rows).collect();
        let total: u64 = rows.iter().sum();
        let n = n.clamp(1, rows.len().max(1));
        let mut out = Vec::with_capacity(n);
        let (mut start, mut acc) = (0usize, 0u64);
        for (i, r) in rows.iter().enumerate() {
            acc += r;
            // Cut after this row group when the cursors so far hold their share.
            let k = out.len() as u64 + 1;
            if out.len() + 1 < n && acc * (n as u64) >= total * k {
                out.push(whole.plan[start..=i].to_vec());
                start = i + 1;
            }
        }
        out.push(whole.plan[start..].to_vec());
        out.into_iter().map(|plan| AccessCursor { plan, ..self.cursor(cols, None) }).collect()
    }
}

enum IntCol {
    I32(ColumnReaderImpl<Int32Type>),
    I64(ColumnReaderImpl<Int64Type>),
}

#[derive(Default)]
struct Scratch {
    i32s: Vec<i32>,
    i64s: Vec<i64>,
    defs: Vec<i16>,
    tid: Vec<u32>,
    time: Vec<u64>,
    addr: Vec<u64>,
    kind: Vec<u8>,
    size: Vec<u8>,
}

struct RgState {
    part: usize,
    /// Rows of this row group already read.
    done: u64,
    rows: u64,
    first_row: u64,
    /// Every row is wanted (no filtering by tid).
    all: bool,
    readers: [Option<(IntCol, bool)>; 5],
}

/// Reads rows chunk by chunk; see [`AccessTable::cursor`].
pub struct AccessCursor {
    parts: Vec<PartInfo>,
    cols: Columns,
    tids: Option<Vec<u32>>,
    /// Row groups to visit: (part, row group, every row wanted).
    plan: Vec<(usize, usize, bool)>,
    next: usize,
    max_page_bytes: u64,
    /// The part being read: its index, reader and file (for the page checks).
    file: Option<(usize, SerializedFileReader<File>, File)>,
    rg: Option<RgState>,
    scratch: Scratch,
}

impl AccessCursor {
    /// Rows this cursor may still read at most (the rows of the row groups left to visit).
    pub fn rows_planned(&self) -> u64 {
        self.plan.iter().map(|&(p, g, _)| self.parts[p].row_groups[g].rows).sum()
    }

    fn open_rg(&mut self) -> Result<bool> {
        let Some(&(pi, gi, all)) = self.plan.get(self.next) else { return Ok(false) };
        self.next += 1;
        let part = &self.parts[pi];
        if self.file.as_ref().is_none_or(|f| f.0 != pi) {
            let (r, f) = open_part(&part.path)?;
            self.file = Some((pi, r, f));
        }
        let (_, reader, file) = self.file.as_ref().expect("open");
        let rgr = reader.get_row_group(gi).map_err(|e| pq_err(&part.path, e))?;
        let want = [self.cols.time, self.cols.tid || !all, self.cols.addr, self.cols.kind, self.cols.size];
        let mut readers: [Option<(IntCol, bool)>; 5] = Default::default();
        for k in 0..5 {
            let Some(ci) = part.cols[k] else { continue };
            if !want[k] {
                continue;
            }
            let chunk = rgr.metadata().column(ci);
            super::pages::check_chunk(file, &part.path, gi, chunk, NAMES[k], self.max_page_bytes)?;
            let descr = chunk.column_descr();
            let nullable = descr.max_def_level() > 0;
            let cr = rgr.get_column_reader(ci).map_err(|e| pq_err(&part.path, e))?;
            let col = match descr.physical_type() {
                Physical::INT32 => IntCol::I32(get_typed_column_reader::<Int32Type>(cr)),
                _ => IntCol::I64(get_typed_column_reader::<Int64Type>(cr)),
            };
            readers[k] = Some((col, nullable));
        }
        let g = &part.row_groups[gi];
        self.rg = Some(RgState { part: pi, done: 0, rows: g.rows, first_row: g.first_row, all, readers });
        Ok(true)
    }

    /// Append up to about `max` rows to `out` (after clearing it); false at the end.
    pub fn next_chunk(&mut self, out: &mut AccessChunk, max: usize) -> Result<bool> {
        out.clear();
        let max = max.max(1);
        loop {
            if self.rg.as_ref().is_none_or(|r| r.done >= r.rows) && !self.open_rg()? {
                return Ok(!out.is_empty());
            }
            self.read_some(out, max)?;
            if out.len() >= max / 2 {
                return Ok(true);
            }
        }
    }

    fn read_some(&mut self, out: &mut AccessChunk, max: usize) -> Result<()> {
        let rg = self.rg.as_mut().expect("row group");
        let path = &self.parts[rg.part].path;
        let n = ((rg.rows - rg.done) as usize).min(max.saturating_sub(out.len()).max(1));
        let base = rg.first_row + rg.done;
        let s = &mut self.scratch;
        let mut got = [0usize; 5];
        for k in 0..5 {
            let Some((col, nullable)) = rg.readers[k].as_mut() else { continue };
            let field = NAMES[k];
            s.defs.clear();
            let defs = if *nullable { Some(&mut s.defs) } else { None };
            let read = match col {
                IntCol::I32(r) => {
                    s.i32s.clear();
                    r.read_records(n, defs, None, &mut s.i32s).map_err(|e| pq_err(path, e))?.0
                }
                IntCol::I64(r) => {
                    s.i64s.clear();
                    r.read_records(n, defs, None, &mut s.i64s).map_err(|e| pq_err(path, e))?.0
                }
            };
            if *nullable {
                if let Some(i) = s.defs.iter().position(|&d| d == 0) {
                    return Err(RecordingError::at(
                        path.display().to_string(),
                        base + i as u64,
                        field,
                        "null value",
                    ));
                }
            }
            got[k] = read;
            let vals: Box<dyn Iterator<Item = i64>> = match col {
                IntCol::I32(_) => Box::new(s.i32s.iter().map(|&v| i64::from(v as u32))),
                IntCol::I64(_) => Box::new(s.i64s.iter().copied()),
            };
            match k {
                0 => {
                    s.time.clear();
                    s.time.extend(vals.map(|v| v as u64));
                }
                1 => {
                    s.tid.clear();
                    for (i, v) in vals.enumerate() {
                        if !(0..=i64::from(u32::MAX)).contains(&v) {
                            return Err(RecordingError::at(
                                path.display().to_string(),
                                base + i as u64,
                                field,
                                format!("{v} does not fit uint32"),
                            ));
                        }
                        s.tid.push(v as u32);
                    }
                }
                2 => {
                    s.addr.clear();
                    s.addr.extend(vals.map(|v| v as u64));
                }
                3 => {
                    s.kind.clear();
                    for (i, v) in vals.enumerate() {
                        if v != 0 && v != 1 {
                            return Err(RecordingError::at(
                                path.display().to_string(),
                                base + i as u64,
                                field,
                                format!("{v} (expected 0 = load or 1 = store)"),
                            ));
                        }
                        s.kind.push(v as u8);
                    }
                }
                _ => {
                    s.size.clear();
                    s.size.extend(vals.map(|v| v.clamp(0, 255) as u8));
                }
            }
        }
        let read = got.iter().copied().max().unwrap_or(0);
        if read == 0 {
            // Only possible when no column is read at all; count the rows as read.
            rg.done = rg.rows;
            return Ok(());
        }
        if got.iter().any(|&g| g != 0 && g != read) {
            return Err(RecordingError::file(
                path.display().to_string(),
                "columns have different numbers of rows",
            ));
        }
        rg.done += read as u64;
        let wanted = |i: usize| -> bool {
            match &self.tids {
                _ if rg.all => true,
                Some(t) => t.binary_search(&s.tid[i]).is_ok(),
                None => true,
            }
        };
        let c = &self.cols;
        let size_absent = rg.readers[4].is_none();
        if rg.all {
            if c.time {
                out.time.extend_from_slice(&s.time);
            }
            if c.tid {
                out.tid.extend_from_slice(&s.tid);
            }
            if c.addr {
                out.addr.extend_from_slice(&s.addr);
            }
            if c.kind {
                out.kind.extend_from_slice(&s.kind);
            }
            if c.size {
                if size_absent {
                    out.size.extend(std::iter::repeat_n(0u8, read));
                } else {
                    out.size.extend_from_slice(&s.size);
                }
            }
        } else {
            for i in 0..read {
                if !wanted(i) {
                    continue;
                }
                if c.time {
                    out.time.push(s.time[i]);
                }
                if c.tid {
                    out.tid.push(s.tid[i]);
                }
                if c.addr {
                    out.addr.push(s.addr[i]);
                }
                if c.kind {
                    out.kind.push(s.kind[i]);
                }
                if c.size {
                    out.size.push(if size_absent { 0 } else { s.size[i] });
                }
            }
        }
        Ok(())
    }
}

fn field_u64(f: &parquet::record::Field) -> Option<u64> {
    use parquet::record::Field as F;
    match *f {
        F::Byte(v) => u64::try_from(v).ok(),
        F::Short(v) => u64::try_from(v).ok(),
        F::Int(v) => u64::try_from(v).ok(),
        F::Long(v) => u64::try_from(v).ok(),
        F::UByte(v) => Some(u64::from(v)),
        F::UShort(v) => Some(u64::from(v)),
        F::UInt(v) => Some(u64::from(v)),
        F::ULong(v) => Some(v),
        _ => None,
    }
}

/// Every row of the `mappings` table of recording `dir` (a small table: read whole), in
/// table order. Errors name the part, the row and the column.
pub fn read_mappings(dir: &Path) -> Result<Vec<super::MappingRow>> {
    let mut out = Vec::new();
    for path in table_parts(dir, crate::format::MAPPINGS)? {
        let shown = path.display().to_string();
        let (r, file) = open_part(&path)?;
        let schema = r.metadata().file_metadata().schema_descr();
        for want in ["time_ns", "event", "start", "length", "name"] {
            let Some(c) = schema.columns().iter().find(|c| c.name() == want) else {
                return Err(RecordingError::file(
                    &shown,
                    format!(
                        "missing column `{want}` (table mappings needs time_ns, event, start, length, name)"
                    ),
                ));
            };
            let string = matches!(want, "event" | "name");
            let ok = c.max_rep_level() == 0
                && if string {
                    c.physical_type() == Physical::BYTE_ARRAY
                } else {
                    matches!(c.physical_type(), Physical::INT32 | Physical::INT64)
                };
            if !ok {
                return Err(RecordingError {
                    file: shown.clone(),
                    record: None,
                    field: Some(want.into()),
                    msg: format!(
                        "has type {:?}, expected {}",
                        c.physical_type(),
                        if string { "a string" } else { "an unsigned integer" }
                    ),
                });
            }
        }
        for (gi, rg) in r.metadata().row_groups().iter().enumerate() {
            for col in rg.columns() {
                let name = col.column_path().string();
                super::pages::check_chunk(&file, &path, gi, col, &name, super::pages::MAX_PAGE_BYTES)?;
            }
        }
        let rows = r.get_row_iter(None).map_err(|e| pq_err(&path, e))?;
        for (i, row) in rows.enumerate() {
            let row = row.map_err(|e| pq_err(&path, e))?;
            let (mut t, mut ev, mut start, mut len, mut name) = (None, None, None, None, String::new());
            for (col, v) in row.get_column_iter() {
                match col.as_str() {
                    "time_ns" => t = field_u64(v),
                    "start" => start = field_u64(v),
                    "length" => len = field_u64(v),
                    "event" => {
                        if let parquet::record::Field::Str(s) = v {
                            ev = Some(s.clone());
                        }
                    }
                    "name" => match v {
                        parquet::record::Field::Str(s) => name = s.clone(),
                        _ => {
                            return Err(RecordingError::at(&shown, i as u64, "name", "null or not a string"))
                        }
                    },
                    _ => {}
                }
            }
            let bad = |field: &str, msg: &str| RecordingError::at(&shown, i as u64, field, msg.to_string());
            let map = match ev.as_deref() {
                Some("map") => true,
                Some("unmap") => false,
                _ => return Err(bad("event", "expected `map` or `unmap`")),
            };
            let start = start.ok_or_else(|| bad("start", "missing or not an unsigned integer"))?;
            let length = len.ok_or_else(|| bad("length", "missing or not an unsigned integer"))?;
            // A mapping may end at 2^64 exactly (the last byte of the address space).
            if u128::from(start) + u128::from(length) > 1u128 << 64 {
                return Err(bad(
                    "length",
                    &format!(
                        "mapping at {start:#x} of length {length} ends past the end of the address space"
                    ),
                ));
            }
            out.push(super::MappingRow {
                time_ns: t.ok_or_else(|| bad("time_ns", "missing or not an unsigned integer"))?,
                map,
                start,
                length,
                name,
            });
        }
    }
    Ok(out)
}

/// The optional `sync` table (the program's synchronisation, `tierlab trace --cc`) in `seq`
/// order; empty when the recording has none. Errors name the part, the record and the field.
pub fn read_sync(dir: &Path) -> Result<Vec<crate::SyncEvent>> {
    let table = crate::schema::SYNC;
    let mut out = Vec::new();
    for path in table_parts(dir, table.name)? {
        let shown = path.display().to_string();
        let (r, file) = open_part(&path)?;
        let schema = r.metadata().file_metadata().schema_descr();
        for want in table.column_names() {
            let Some(c) = schema.columns().iter().find(|c| c.name() == want) else {
                return Err(RecordingError::file(
                    &shown,
                    format!(
                        "missing column `{want}` (table sync needs {})",
                        table.column_names().collect::<Vec<_>>().join(", ")
                    ),
                ));
            };
            if c.max_rep_level() != 0 || !matches!(c.physical_type(), Physical::INT32 | Physical::INT64) {
                return Err(RecordingError {
                    file: shown.clone(),
                    record: None,
                    field: Some(want.into()),
                    msg: format!("has type {:?}, expected an unsigned integer", c.physical_type()),
                });
            }
        }
        for (gi, rg) in r.metadata().row_groups().iter().enumerate() {
            for col in rg.columns() {
                let name = col.column_path().string();
                super::pages::check_chunk(&file, &path, gi, col, &name, super::pages::MAX_PAGE_BYTES)?;
            }
        }
        let rows = r.get_row_iter(None).map_err(|e| pq_err(&path, e))?;
        for (i, row) in rows.enumerate() {
            let row = row.map_err(|e| pq_err(&path, e))?;
            let mut v = [None::<u64>; 7];
            for (col, f) in row.get_column_iter() {
                if let Some(k) = table.column_names().position(|n| n == col.as_str()) {
                    v[k] = field_u64(f);
                }
            }
            let get = |k: usize| {
                let name = table.columns[k].name;
                v[k].ok_or_else(|| {
                    RecordingError::at(&shown, i as u64, name, "missing or not an unsigned integer")
                })
            };
            let tid = u32::try_from(get(1)?)
                .map_err(|_| RecordingError::at(&shown, i as u64, "tid", "does not fit 32 bits"))?;
            let code = get(4)?;
            let kind = u8::try_from(code).ok().and_then(crate::SyncKind::from_code).ok_or_else(|| {
                RecordingError::at(
                    &shown,
                    i as u64,
                    "kind",
                    format!("{code} is not a sync kind (0..={})", crate::SyncKind::ALL.len() - 1),
                )
            })?;
            out.push(crate::SyncEvent {
                time_ns: get(0)?,
                tid,
                seq: get(2)?,
                index: get(3)?,
                kind,
                object: get(5)?,
                arg: get(6)?,
            });
        }
    }
    out.sort_by_key(|e| e.seq);
    Ok(out)
}
