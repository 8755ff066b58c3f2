//! Learning datasets: one row per 4 KiB page per window, with features a policy could observe
//! and labels only ground truth knows (`tierlab dataset`, docs/formats.md "Dataset").
//!
//! The collector rides along a normal run (it changes nothing the simulated machine does).
//! At each window end it takes the window's exact counts, the pages' nodes and the tiering
//! policy's decision log, and the feeds of one telemetry technique (its samples, its region
//! snapshots), and appends two spill files in the output directory: the features of the
//! window's rows (fixed-size records) and the window's sparse counts `(page, count)`. Labels
//! need the future: after the run one pass reads the feature rows window by window beside
//! three readers of the counts at windows `t + 1`, `t + 10` and `t + 100`, keeping running
//! sums of the next 10 and 100 windows per page (`S(t) = S(t - 1) - c(t) + c(t + k)`), and
//! writes Parquet row groups. Memory holds the per-page state of the pages touched so far,
//! the pages with a non-zero Accessed-bit history, two running sums and one row group; never
//! a window of rows waiting for its labels.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{Compression, ZstdLevel};
use parquet::data_type::{BoolType, DoubleType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

use crate::agents::{Feed, MoveRecord, RegionSnapshot};
use crate::error::{Result, SimError};
use crate::os::backend::MemoryBackend as _;
use crate::os::Machine;
use crate::truth::WindowTruth;
use crate::units::Ps;
use tierlab_core::{page_addr, vpn};

/// Windows of lookahead of the longest label.
pub const HORIZONS: [u32; 3] = [1, 10, 100];

/// What to collect and where.
#[derive(Clone, Debug)]
pub struct DatasetSpec {
    /// Output directory (created).
    pub dir: PathBuf,
    /// Label of the telemetry technique whose samples and regions are features (None: the
    /// tiering policy's, else the scenario's first technique, else none).
    pub follow: Option<String>,
    /// Windows of Accessed-bit history (1 to 64): a page has rows while it was accessed in
    /// one of its last `history` windows.
    pub history: u32,
    /// Rows per Parquet row group.
    pub group_rows: usize,
}

/// Size of one spilled feature row, bytes.
const REC: usize = 64;

/// A page's state as the collector sees it.
#[derive(Clone, Copy, Debug)]
struct PageState {
    first: u32,
    abits: u64,
    node: u8,
    last_move: u32,
    moves: u32,
    samples_total: u64,
}

const NONE: u32 = u32::MAX;

/// One feature row (spilled, then joined with its labels).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Row {
    window: u32,
    vpn: u64,
    abits: u64,
    samples: u32,
    samples_total: u64,
    region_nr: i32,
    region_bytes: u64,
    region_age: i32,
    node: u8,
    tier: u8,
    huge: bool,
    age: u32,
    since_move: i32,
    moves: u32,
    accesses: u32,
}

impl Row {
    fn encode(&self) -> [u8; REC] {
        let mut b = [0u8; REC];
        b[0..4].copy_from_slice(&self.window.to_le_bytes());
        b[4..12].copy_from_slice(&self.vpn.to_le_bytes());
        b[12..20].copy_from_slice(&self.abits.to_le_bytes());
        b[20..24].copy_from_slice(&self.samples.to_le_bytes());
        b[24..32].copy_from_slice(&self.samples_total.to_le_bytes());
        b[32..36].copy_from_slice(&self.region_nr.to_le_bytes());
        b[36..44].copy_from_slice(&self.region_bytes.to_le_bytes());
        b[44..48].copy_from_slice(&self.region_age.to_le_bytes());
        b[48] = self.node;
        b[49] = self.tier;
        b[50] = self.huge as u8;
        b[52..56].copy_from_slice(&self.age.to_le_bytes());
        b[56..60].copy_from_slice(&self.since_move.to_le_bytes());
        b[60..64].copy_from_slice(&self.moves.to_le_bytes());
        b
    }

    fn decode(b: &[u8; REC], accesses: u32) -> Row {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Row {
            window: u32_at(0),
            vpn: u64_at(4),
            abits: u64_at(12),
            samples: u32_at(20),
            samples_total: u64_at(24),
            region_nr: u32_at(32) as i32,
            region_bytes: u64_at(36),
            region_age: u32_at(44) as i32,
            node: b[48],
            tier: b[49],
            huge: b[50] != 0,
            age: u32_at(52),
            since_move: u32_at(56) as i32,
            moves: u32_at(60),
            accesses,
        }
    }
}

/// The collector (see the module docs).
pub struct Collector {
    spec: DatasetSpec,
    rows_path: PathBuf,
    counts_path: PathBuf,
    rows_out: BufWriter<File>,
    counts_out: BufWriter<File>,
    /// (rows, count entries) of every window.
    windows: Vec<(u64, u64)>,
    /// Window end times, s.
    ends: Vec<f64>,
    pages: HashMap<u64, PageState>,
    active: Vec<u64>,
    samples: HashMap<u64, u32>,
    regions: Option<Arc<RegionSnapshot>>,
    log_cursor: usize,
    mask: u64,
    /// The optimum's fast node and its capacity in 4 KiB pages.
    fast: Option<(u8, u64)>,
    /// The followed technique's label.
    pub follow: Option<String>,
}

fn io(path: &Path, e: impl std::fmt::Display) -> SimError {
    SimError::runtime(format!("dataset: {}: {e}", path.display()))
}

impl Collector {
    /// Open the spill files in `spec.dir`.
    pub fn new(spec: DatasetSpec, follow: Option<String>, fast: Option<(u8, u64)>) -> Result<Self> {
        if !(1..=64).contains(&spec.history) {
            return Err(SimError::runtime(format!(
                "dataset: history {} must be 1 to 64 windows",
                spec.history
            )));
        }
        std::fs::create_dir_all(&spec.dir).map_err(|e| io(&spec.dir, e))?;
        let rows_path = spec.dir.join(".rows.spill");
        let counts_path = spec.dir.join(".counts.spill");
        let open =
            |p: &Path| File::create(p).map(|f| BufWriter::with_capacity(1 << 20, f)).map_err(|e| io(p, e));
        let mask = if spec.history == 64 { u64::MAX } else { (1u64 << spec.history) - 1 };
        Ok(Collector {
            rows_out: open(&rows_path)?,
            counts_out: open(&counts_path)?,
            rows_path,
            counts_path,
            spec,
            windows: Vec::new(),
            ends: Vec::new(),
            pages: HashMap::new(),
            active: Vec::new(),
            samples: HashMap::new(),
            regions: None,
            log_cursor: 0,
            mask,
            fast,
            follow,
        })
    }

    /// A feed of the followed technique.
    pub fn on_feed(&mut self, f: &Feed) {
        match f {
            Feed::Samples(drains) => {
                for d in drains.iter() {
                    for &(addr, _) in &d.records {
                        *self.samples.entry(vpn(addr)).or_default() += 1;
                    }
                }
            }
            Feed::Regions(s) => self.regions = Some(s.clone()),
            Feed::HotSet { .. } => {}
        }
    }

    /// The window `w` closed at `end`; `log` is the tiering policy's decision log so far.
    pub fn close_window(&mut self, w: &WindowTruth, m: &Machine, log: &[MoveRecord], end: Ps) -> Result<()> {
        let t = self.windows.len() as u32;
        // Moves the policy made: the pages' last migration (pages with no rows too).
        for rec in log.get(self.log_cursor..).unwrap_or(&[]) {
            for &va in rec.pages.iter().take(rec.moved as usize) {
                let span = m.os.backend.page_size_of(va).map_or(1, |s| s.base_pages());
                let first = vpn(va) & !(span - 1);
                for p in first..first + span {
                    if let Some(st) = self.pages.get_mut(&p) {
                        st.last_move = t;
                        st.moves += 1;
                        st.node = rec.node;
                    }
                }
            }
        }
        self.log_cursor = log.len();
        // Counts of the window.
        for &(p, n) in &w.pages {
            self.counts_out.write_all(&p.to_le_bytes()).map_err(|e| io(&self.counts_path, e))?;
            self.counts_out.write_all(&n.to_le_bytes()).map_err(|e| io(&self.counts_path, e))?;
        }
        // Rows: the union of the pages with a history and the window's pages, in page order.
        let regions = self.regions.clone();
        let mut next = Vec::with_capacity(self.active.len().max(w.pages.len()));
        let (mut i, mut j) = (0, 0);
        let mut rows = 0u64;
        let mut ri = 0usize;
        while i < self.active.len() || j < w.pages.len() {
            let a = self.active.get(i).copied().unwrap_or(u64::MAX);
            let b = w.pages.get(j).map_or(u64::MAX, |q| q.0);
            let p = a.min(b);
            let count = if b == p { w.pages[j].1 } else { 0 };
            if a == p {
                i += 1;
            }
            if b == p {
                j += 1;
            }
            let va = page_addr(p);
            let node_now = m.node_of(va).unwrap_or(u8::MAX);
            let st = self.pages.entry(p).or_insert(PageState {
                first: t,
                abits: 0,
                node: node_now,
                last_move: NONE,
                moves: 0,
                samples_total: 0,
            });
            st.abits = ((st.abits << 1) | u64::from(count > 0)) & self.mask;
            if st.abits == 0 {
                continue;
            }
            if node_now != st.node && node_now != u8::MAX && st.node != u8::MAX {
                st.last_move = t;
                st.moves += 1;
            }
            st.node = node_now;
            let samples = self.samples.get(&p).copied().unwrap_or(0);
            st.samples_total += samples as u64;
            let mut row = Row {
                window: t,
                vpn: p,
                abits: st.abits,
                samples,
                samples_total: st.samples_total,
                region_nr: -1,
                region_bytes: 0,
                region_age: -1,
                node: node_now,
                tier: m.os.mem.nodes.get(node_now as usize).map_or(u8::MAX, |n| n.cfg.tier.min(254) as u8),
                huge: m.os.backend.page_size_of(va).is_some_and(|s| s.base_pages() > 1),
                age: t - st.first,
                since_move: if st.last_move == NONE { -1 } else { (t - st.last_move) as i32 },
                moves: st.moves,
                accesses: count,
            };
            if let Some(s) = &regions {
                while ri < s.regions.len() && s.regions[ri].end <= va {
                    ri += 1;
                }
                if let Some(r) = s.regions.get(ri).filter(|r| r.start <= va) {
                    row.region_nr = r.nr_accesses as i32;
                    row.region_bytes = r.end - r.start;
                    row.region_age = r.age as i32;
                }
            }
            self.rows_out.write_all(&row.encode()).map_err(|e| io(&self.rows_path, e))?;
            rows += 1;
            next.push(p);
        }
        self.active = next;
        self.samples.clear();
        self.windows.push((rows, w.pages.len() as u64));
        self.ends.push(end.secs_f64());
        Ok(())
    }

    /// Join the rows with their labels and write `rows.parquet` and `dataset.json`; the
    /// spill files are removed. Returns the rows written.
    pub fn finish(mut self, meta: serde_json::Value) -> Result<u64> {
        self.rows_out.flush().map_err(|e| io(&self.rows_path, e))?;
        self.counts_out.flush().map_err(|e| io(&self.counts_path, e))?;
        drop(std::mem::take(&mut self.pages));
        drop(std::mem::take(&mut self.active));
        let out = self.spec.dir.join("rows.parquet");
        let tmp = self.spec.dir.join(".rows.parquet.tmp");
        let rows = self.write_parquet(&tmp)?;
        std::fs::rename(&tmp, &out).map_err(|e| io(&out, e))?;
        let _ = std::fs::remove_file(&self.rows_path);
        let _ = std::fs::remove_file(&self.counts_path);
        let mut meta = meta;
        if let Some(o) = meta.as_object_mut() {
            o.insert("format".into(), "tierlab-dataset".into());
            o.insert("rows".into(), rows.into());
            o.insert("windows".into(), (self.windows.len() as u64).into());
            o.insert("history_windows".into(), self.spec.history.into());
            o.insert("horizons".into(), HORIZONS.to_vec().into());
            o.insert("followed_technique".into(), self.follow.clone().into());
            o.insert(
                "optimum_fast".into(),
                match self.fast {
                    Some((n, c)) => serde_json::json!({"node": n, "capacity_pages": c}),
                    None => serde_json::Value::Null,
                },
            );
            o.insert("files".into(), serde_json::json!(["rows.parquet"]));
        }
        let mp = self.spec.dir.join("dataset.json");
        let text = serde_json::to_string_pretty(&meta).map_err(|e| io(&mp, e))? + "\n";
        std::fs::write(&mp, text).map_err(|e| io(&mp, e))?;
        Ok(rows)
    }

    fn write_parquet(&self, path: &Path) -> Result<u64> {
        let nw = self.windows.len();
        let mut counts_at = Vec::with_capacity(nw + 1);
        let mut acc = 0u64;
        for &(_, c) in &self.windows {
            counts_at.push(acc);
            acc += c;
        }
        counts_at.push(acc);
        let reader = |k: usize| -> Result<CountsReader> {
            let f = File::open(&self.counts_path).map_err(|e| io(&self.counts_path, e))?;
            let mut r = BufReader::with_capacity(1 << 18, f);
            let skip = counts_at[k.min(nw)] * 12;
            std::io::copy(&mut (&mut r).take(skip), &mut std::io::sink())
                .map_err(|e| io(&self.counts_path, e))?;
            Ok(CountsReader { r, next: k.min(nw), path: self.counts_path.clone() })
        };
        let sizes: Vec<u64> = self.windows.iter().map(|w| w.1).collect();
        // Sums of the next 10 and 100 windows: S(-1) = c(0) + ... + c(k - 1).
        let mut sums: Vec<(HashMap<u64, u64>, CountsReader)> = Vec::new();
        for &k in &HORIZONS[1..] {
            let mut r = reader(0)?;
            let mut s = HashMap::new();
            for _ in 0..(k as usize).min(nw) {
                for (p, n) in r.window(&sizes)? {
                    *s.entry(p).or_insert(0) += n as u64;
                }
            }
            sums.push((s, r));
        }
        let mut cur = reader(0)?;
        let mut now: Vec<(u64, u32)> = cur.window(&sizes)?;
        let f = File::open(&self.rows_path).map_err(|e| io(&self.rows_path, e))?;
        let mut rows_in = BufReader::with_capacity(1 << 20, f);
        let mut w = ParquetOut::create(path, self.spec.group_rows)?;
        let mut total = 0u64;
        for t in 0..nw {
            let after: Vec<(u64, u32)> = if t + 1 < nw { cur.window(&sizes)? } else { Vec::new() };
            // Running sums move to windows t+1..t+k.
            for ((s, r), &k) in sums.iter_mut().zip(&HORIZONS[1..]) {
                for &(p, n) in &now {
                    if let Some(v) = s.get_mut(&p) {
                        *v -= n as u64;
                        if *v == 0 {
                            s.remove(&p);
                        }
                    }
                }
                if t + (k as usize) < nw {
                    for (p, n) in r.window(&sizes)? {
                        *s.entry(p).or_insert(0) += n as u64;
                    }
                }
            }
            let best = self.fast.map(|(_, c)| top_pages(&after, c));
            let mut buf = [0u8; REC];
            let (mut a, mut b) = (0usize, 0usize);
            for _ in 0..self.windows[t].0 {
                rows_in.read_exact(&mut buf).map_err(|e| io(&self.rows_path, e))?;
                let row = Row::decode(&buf, 0);
                while a < now.len() && now[a].0 < row.vpn {
                    a += 1;
                }
                let accesses = now.get(a).filter(|q| q.0 == row.vpn).map_or(0, |q| q.1);
                while b < after.len() && after[b].0 < row.vpn {
                    b += 1;
                }
                let hit = after.get(b).filter(|q| q.0 == row.vpn);
                let next1 = hit.map_or(0, |q| q.1 as u64);
                let opt = match (&best, hit) {
                    (Some(set), Some(_)) => set[b],
                    _ => false,
                };
                let labels = Labels {
                    next: [
                        next1,
                        sums[0].0.get(&row.vpn).copied().unwrap_or(0),
                        sums[1].0.get(&row.vpn).copied().unwrap_or(0),
                    ],
                    windows_after: (nw - 1 - t) as u32,
                    optimum_fast_next: opt,
                };
                w.push(&Row { accesses, ..row }, self.ends[t], &labels)?;
                total += 1;
            }
            now = after;
        }
        w.close()?;
        Ok(total)
    }
}

/// Whether each page of `w` (sorted by page) is among the `capacity` most accessed (ties to
/// the lower page number): the per-window bound's fast set.
fn top_pages(w: &[(u64, u32)], capacity: u64) -> Vec<bool> {
    if (w.len() as u64) <= capacity {
        return vec![true; w.len()];
    }
    let mut idx: Vec<usize> = (0..w.len()).collect();
    let c = capacity as usize;
    let mut set = vec![false; w.len()];
    if c == 0 {
        return set;
    }
    idx.select_nth_unstable_by(c - 1, |&x, &y| w[y].1.cmp(&w[x].1).then(w[x].0.cmp(&w[y].0)));
    for &i in &idx[..c] {
        set[i] = true;
    }
    set
}

struct CountsReader {
    r: BufReader<File>,
    next: usize,
    path: PathBuf,
}

impl CountsReader {
    fn window(&mut self, sizes: &[u64]) -> Result<Vec<(u64, u32)>> {
        let Some(&n) = sizes.get(self.next) else { return Ok(Vec::new()) };
        self.next += 1;
        let mut v = Vec::with_capacity(n as usize);
        let mut b = [0u8; 12];
        for _ in 0..n {
            self.r.read_exact(&mut b).map_err(|e| io(&self.path, e))?;
            v.push((
                u64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
                u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")),
            ));
        }
        Ok(v)
    }
}

struct Labels {
    next: [u64; 3],
    windows_after: u32,
    optimum_fast_next: bool,
}

/// The Parquet schema of `rows.parquet` (docs/formats.md "Dataset").
pub const SCHEMA: &str = "message dataset {
  required int32 window;
  required double t_end_s;
  required int64 page;
  required int64 abit_history;
  required int32 abit_windows;
  required int32 samples;
  required int64 samples_total;
  optional int32 region_nr_accesses;
  optional int64 region_bytes;
  optional int32 region_age;
  required int32 node;
  required int32 tier;
  required boolean huge;
  required int32 age_windows;
  optional int32 since_migration_windows;
  required int32 migrations;
  required int32 accesses;
  required int64 accesses_next_1;
  required int64 accesses_next_10;
  required int64 accesses_next_100;
  required int32 windows_after;
  required boolean optimum_fast_next;
}";

#[derive(Default)]
struct Cols {
    window: Vec<i32>,
    t_end: Vec<f64>,
    page: Vec<i64>,
    abits: Vec<i64>,
    abit_windows: Vec<i32>,
    samples: Vec<i32>,
    samples_total: Vec<i64>,
    region_nr: Vec<i32>,
    region_bytes: Vec<i64>,
    region_age: Vec<i32>,
    region_def: Vec<i16>,
    node: Vec<i32>,
    tier: Vec<i32>,
    huge: Vec<bool>,
    age: Vec<i32>,
    since_move: Vec<i32>,
    since_def: Vec<i16>,
    moves: Vec<i32>,
    accesses: Vec<i32>,
    next: [Vec<i64>; 3],
    after: Vec<i32>,
    opt: Vec<bool>,
}

struct ParquetOut {
    w: SerializedFileWriter<File>,
    c: Cols,
    rows: usize,
    group: usize,
    path: PathBuf,
}

impl ParquetOut {
    fn create(path: &Path, group: usize) -> Result<Self> {
        let f = File::create(path).map_err(|e| io(path, e))?;
        let schema = Arc::new(parse_message_type(SCHEMA).expect("valid schema"));
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("level 3")))
            .set_created_by(format!("tierlab {}", env!("CARGO_PKG_VERSION")))
            .build();
        let w = SerializedFileWriter::new(f, schema, Arc::new(props)).map_err(|e| io(path, e))?;
        Ok(ParquetOut { w, c: Cols::default(), rows: 0, group: group.max(1), path: path.to_path_buf() })
    }

    fn push(&mut self, r: &Row, t_end: f64, l: &Labels) -> Result<()> {
        let c = &mut self.c;
        c.window.push(r.window as i32);
        c.t_end.push(t_end);
        c.page.push(page_addr(r.vpn) as i64);
        c.abits.push(r.abits as i64);
        c.abit_windows.push(r.abits.count_ones() as i32);
        c.samples.push(r.samples.min(i32::MAX as u32) as i32);
        c.samples_total.push(r.samples_total as i64);
        if r.region_nr >= 0 {
            c.region_nr.push(r.region_nr);
            c.region_bytes.push(r.region_bytes as i64);
            c.region_age.push(r.region_age);
            c.region_def.push(1);
        } else {
            c.region_def.push(0);
        }
        c.node.push(if r.node == u8::MAX { -1 } else { r.node as i32 });
        c.tier.push(if r.tier == u8::MAX { -1 } else { r.tier as i32 });
        c.huge.push(r.huge);
        c.age.push(r.age as i32);
        if r.since_move >= 0 {
            c.since_move.push(r.since_move);
            c.since_def.push(1);
        } else {
            c.since_def.push(0);
        }
        c.moves.push(r.moves.min(i32::MAX as u32) as i32);
        c.accesses.push(r.accesses.min(i32::MAX as u32) as i32);
        for k in 0..3 {
            c.next[k].push(l.next[k] as i64);
        }
        c.after.push(l.windows_after as i32);
        c.opt.push(l.optimum_fast_next);
        self.rows += 1;
        if self.rows >= self.group {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let c = std::mem::take(&mut self.c);
        self.rows = 0;
        let path = self.path.clone();
        let e = |e: parquet::errors::ParquetError| io(&path, e);
        let mut rg = self.w.next_row_group().map_err(e)?;
        let mut k = 0;
        while let Some(mut col) = rg.next_column().map_err(e)? {
            match k {
                0 => col.typed::<Int32Type>().write_batch(&c.window, None, None),
                1 => col.typed::<DoubleType>().write_batch(&c.t_end, None, None),
                2 => col.typed::<Int64Type>().write_batch(&c.page, None, None),
                3 => col.typed::<Int64Type>().write_batch(&c.abits, None, None),
                4 => col.typed::<Int32Type>().write_batch(&c.abit_windows, None, None),
                5 => col.typed::<Int32Type>().write_batch(&c.samples, None, None),
                6 => col.typed::<Int64Type>().write_batch(&c.samples_total, None, None),
                7 => col.typed::<Int32Type>().write_batch(&c.region_nr, Some(&c.region_def), None),
                8 => col.typed::<Int64Type>().write_batch(&c.region_bytes, Some(&c.region_def), None),
                9 => col.typed::<Int32Type>().write_batch(&c.region_age, Some(&c.region_def), None),
                10 => col.typed::<Int32Type>().write_batch(&c.node, None, None),
                11 => col.typed::<Int32Type>().write_batch(&c.tier, None, None),
                12 => col.typed::<BoolType>().write_batch(&c.huge, None, None),
                13 => col.typed::<Int32Type>().write_batch(&c.age, None, None),
                14 => col.typed::<Int32Type>().write_batch(&c.since_move, Some(&c.since_def), None),
                15 => col.typed::<Int32Type>().write_batch(&c.moves, None, None),
                16 => col.typed::<Int32Type>().write_batch(&c.accesses, None, None),
                17 => col.typed::<Int64Type>().write_batch(&c.next[0], None, None),
                18 => col.typed::<Int64Type>().write_batch(&c.next[1], None, None),
                19 => col.typed::<Int64Type>().write_batch(&c.next[2], None, None),
                20 => col.typed::<Int32Type>().write_batch(&c.after, None, None),
                _ => col.typed::<BoolType>().write_batch(&c.opt, None, None),
            }
            .map_err(e)?;
            col.close().map_err(e)?;
            k += 1;
        }
        rg.close().map_err(e)?;
        Ok(())
    }

    fn close(mut self) -> Result<()> {
        self.flush()?;
        let path = self.path.clone();
        self.w.close().map_err(|e| io(&path, e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_round_trips_and_top_pages_breaks_ties_low() {
        let r = Row {
            window: 7,
            vpn: 0x1234_5678,
            abits: 0b1011,
            samples: 3,
            samples_total: 9,
            region_nr: -1,
            region_bytes: 0,
            region_age: 4,
            node: 1,
            tier: 1,
            huge: true,
            age: 5,
            since_move: -1,
            moves: 2,
            accesses: 0,
        };
        assert_eq!(Row::decode(&r.encode(), 0), r);
        let w = [(1, 5), (2, 9), (3, 5), (4, 1)];
        assert_eq!(top_pages(&w, 2), vec![true, true, false, false]);
        assert_eq!(top_pages(&w, 9), vec![true; 4]);
    }
}
