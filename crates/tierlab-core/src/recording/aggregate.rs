//! Streaming aggregation of the `accesses` table for `tierlab view`: per mapping, accesses,
//! touched pages, threads, first/last time, a (page block x time bin) heatmap and the
//! histogram of pages by accesses. Memory depends on the mappings' sizes and the heatmap,
//! not on the trace's length.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{AccessChunk, AccessCursor, AccessTable, Columns, Result};

const CHUNK: usize = 1 << 16;
const PAGE: u64 = 4096;

/// The set of touched 4 KiB pages of an address space, as bitmaps of 32768 pages each.
/// The bitmaps of the last few 128 MiB regions are found without a hash lookup: a thread
/// that walks several arrays at once (a triad's three) goes from one to the next at every
/// access.
pub struct PageSet {
    bits: Vec<Box<[u64; 512]>>,
    index: HashMap<u64, usize>,
    /// (region, bitmap) of the last regions used; `u64::MAX` is no region.
    cache: [(u64, usize); 4],
    next: usize,
    /// The last page added (`u64::MAX`: none; pages are below 2^52).
    last_page: u64,
}

impl Default for PageSet {
    fn default() -> Self {
        PageSet {
            bits: Vec::new(),
            index: HashMap::new(),
            cache: [(u64::MAX, 0); 4],
            next: 0,
            last_page: u64::MAX,
        }
    }
}

impl PageSet {
    /// Add the page holding `addr`.
    #[inline]
    pub fn insert(&mut self, addr: u64) {
        let page = addr >> 12;
        if page == self.last_page {
            return;
        }
        self.last_page = page;
        let key = page >> 15;
        let idx = match self.cache.iter().find(|c| c.0 == key) {
            Some(&(_, idx)) => idx,
            None => self.region(key),
        };
        let i = (page & 32767) as usize;
        self.bits[idx][i >> 6] |= 1 << (i & 63);
    }

    #[cold]
    fn region(&mut self, key: u64) -> usize {
        let PageSet { bits, index, .. } = self;
        let idx = *index.entry(key).or_insert_with(|| {
            bits.push(Box::new([0u64; 512]));
            bits.len() - 1
        });
        self.cache[self.next] = (key, idx);
        self.next = (self.next + 1) % self.cache.len();
        idx
    }

    /// Add every page of `other`.
    pub fn merge(&mut self, other: PageSet) {
        let PageSet { bits, index, .. } = other;
        let mut bits: Vec<Option<Box<[u64; 512]>>> = bits.into_iter().map(Some).collect();
        for (k, i) in index {
            let b = bits[i].take().expect("one bitmap per region");
            match self.index.get(&k) {
                Some(&mine) => self.bits[mine].iter_mut().zip(b.iter()).for_each(|(x, y)| *x |= y),
                None => {
                    self.bits.push(b);
                    self.index.insert(k, self.bits.len() - 1);
                }
            }
        }
        self.last_page = u64::MAX;
    }

    /// Maximal runs `(start, end)` (bytes) of touched pages, ascending, and the number of
    /// touched pages.
    pub fn runs(self) -> (Vec<(u64, u64)>, u64) {
        let mut keys: Vec<(u64, usize)> = self.index.iter().map(|(&k, &i)| (k, i)).collect();
        keys.sort_unstable();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut pages = 0u64;
        for (k, i) in keys {
            for (w, &word) in self.bits[i].iter().enumerate() {
                let mut x = word;
                while x != 0 {
                    let b = x.trailing_zeros() as u64;
                    x &= x - 1;
                    let start = ((k << 15) + (w as u64) * 64 + b) * PAGE;
                    pages += 1;
                    match runs.last_mut() {
                        Some(r) if r.1 == start => r.1 = start + PAGE,
                        _ => runs.push((start, start + PAGE)),
                    }
                }
            }
        }
        (runs, pages)
    }
}

/// What one pass over a table finds: rows, time range, threads, touched page runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Survey {
    /// Rows.
    pub rows: u64,
    /// Smallest and largest `time_ns` (0, 0 when empty).
    pub time_range: (u64, u64),
    /// Distinct thread ids.
    pub threads: u64,
    /// Runs of touched pages (bytes), ascending.
    pub runs: Vec<(u64, u64)>,
    /// Touched pages.
    pub pages: u64,
}

/// Threads a pass over a table uses: the cores this process may run on, at most 4 (the
/// passes read and decode Parquet pages; more threads than cores only contend).
pub fn pass_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(4)
}

/// Run `f` on each cursor, side by side (one thread each; in this thread when there is one).
fn side_by_side<T: Send>(
    cursors: Vec<AccessCursor>,
    f: impl Fn(AccessCursor) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    if cursors.len() <= 1 {
        return cursors.into_iter().map(&f).collect();
    }
    std::thread::scope(|sc| {
        let handles: Vec<_> = cursors.into_iter().map(|c| sc.spawn(|| f(c))).collect();
        handles.into_iter().map(|h| h.join().expect("a pass thread panicked")).collect()
    })
}

struct SurveyPart {
    rows: u64,
    lo: u64,
    hi: u64,
    tids: HashSet<u32>,
    set: PageSet,
}

fn survey_part(mut cur: AccessCursor) -> Result<SurveyPart> {
    let mut c = AccessChunk::default();
    let mut p = SurveyPart { rows: 0, lo: u64::MAX, hi: 0, tids: HashSet::new(), set: PageSet::default() };
    let mut last_tid = None;
    while cur.next_chunk(&mut c, CHUNK)? {
        p.rows += c.addr.len() as u64;
        for &t in &c.time {
            p.lo = p.lo.min(t);
            p.hi = p.hi.max(t);
        }
        for &t in &c.tid {
            if last_tid != Some(t) {
                p.tids.insert(t);
                last_tid = Some(t);
            }
        }
        for &a in &c.addr {
            p.set.insert(a);
        }
    }
    Ok(p)
}

/// One pass over `table`: rows, time range, threads and touched page runs; the `kind`
/// column is decoded too, so a value other than 0 or 1 (or a null anywhere) is an error
/// naming its part and row. Runs on [`pass_threads`] threads.
pub fn survey(table: &AccessTable) -> Result<Survey> {
    survey_with(table, pass_threads())
}

/// [`survey`] on at most `threads` threads (the result does not depend on it).
pub fn survey_with(table: &AccessTable, threads: usize) -> Result<Survey> {
    let cols = Columns { time: true, tid: true, addr: true, kind: true, size: false };
    let parts = side_by_side(table.split_cursors(cols, threads), survey_part)?;
    let mut all = SurveyPart { rows: 0, lo: u64::MAX, hi: 0, tids: HashSet::new(), set: PageSet::default() };
    for p in parts {
        all.rows += p.rows;
        all.lo = all.lo.min(p.lo);
        all.hi = all.hi.max(p.hi);
        all.tids.extend(p.tids);
        all.set.merge(p.set);
    }
    let rows = all.rows;
    let (runs, pages) = all.set.runs();
    Ok(Survey {
        rows,
        time_range: if rows == 0 { (0, 0) } else { (all.lo, all.hi) },
        threads: all.tids.len() as u64,
        runs,
        pages,
    })
}

/// A live piece of a mapping: addresses `[lo, hi)` during times `[t0, t1)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// First byte.
    pub lo: u64,
    /// End (exclusive).
    pub hi: u64,
    /// Mapped from.
    pub t0: u64,
    /// Until (exclusive).
    pub t1: u64,
    /// Index of the mapping in the `specs` given to [`aggregate`].
    pub mapping: usize,
}

/// Heatmap layout of a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapSpec {
    /// Address of its first page (page-aligned).
    pub base: u64,
    /// Pages in the mapping.
    pub pages: u64,
    /// Pages per heatmap row.
    pub group: u64,
}

/// Heatmap columns: time bins `[t_lo + i * width, t_lo + (i + 1) * width)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bins {
    /// Start of the first bin.
    pub t_lo: u64,
    /// Width of a bin (at least 1).
    pub width: u64,
    /// Number of bins.
    pub cols: usize,
}

/// The aggregate of one mapping.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapAgg {
    /// Accesses assigned to it.
    pub accesses: u64,
    /// Pages with at least one access.
    pub pages_touched: u64,
    /// Distinct threads that accessed it.
    pub threads: u64,
    /// First and last access time.
    pub time_range: Option<(u64, u64)>,
    /// Heatmap, row-major: `rows x cols`, rows = ceil(pages / group).
    pub counts: Vec<u64>,
    /// Histogram: accesses per page -> pages with that many.
    pub hist: BTreeMap<u64, u64>,
}

enum PageCounts {
    Dense(Vec<u32>),
    Sparse(HashMap<u64, u64>),
}

/// Per-mapping aggregates of every access of `table` (accesses in no segment are counted in
/// the second value: unassigned). Runs on [`pass_threads`] threads while the per-page
/// counters of every thread fit in [`PARALLEL_PAGE_BYTES`].
pub fn aggregate(
    table: &AccessTable,
    segments: &[Segment],
    specs: &[MapSpec],
    bins: Bins,
) -> Result<(Vec<MapAgg>, u64)> {
    let dense: u64 = specs.iter().filter(|sp| sp.pages <= DENSE_PAGES).map(|sp| sp.pages * 4).sum();
    let threads =
        if dense.saturating_mul(pass_threads() as u64) <= PARALLEL_PAGE_BYTES { pass_threads() } else { 1 };
    aggregate_with(table, segments, specs, bins, threads)
}

/// Most bytes of per-page counters (4 bytes a page of every mapping, per thread) for which
/// [`aggregate`] runs on several threads.
pub const PARALLEL_PAGE_BYTES: u64 = 256 << 20;

/// Mappings of at most this many pages count their pages in an array, larger ones in a map.
const DENSE_PAGES: u64 = 1 << 24;

struct AggPart {
    aggs: Vec<MapAgg>,
    pages: Vec<PageCounts>,
    tids: Vec<HashSet<u32>>,
    unassigned: u64,
}

/// [`aggregate`] on at most `threads` threads (the result does not depend on it).
pub fn aggregate_with(
    table: &AccessTable,
    segments: &[Segment],
    specs: &[MapSpec],
    bins: Bins,
    threads: usize,
) -> Result<(Vec<MapAgg>, u64)> {
    // Elementary address intervals, each with the segments covering it.
    let mut cuts: Vec<u64> = segments.iter().flat_map(|s| [s.lo, s.hi]).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut cover: Vec<Vec<Segment>> = vec![Vec::new(); cuts.len().saturating_sub(1)];
    for s in segments {
        let i0 = cuts.partition_point(|&c| c < s.lo);
        let i1 = cuts.partition_point(|&c| c < s.hi);
        for c in &mut cover[i0..i1] {
            c.push(*s);
        }
    }
    let cols = Columns { time: true, tid: true, addr: true, kind: false, size: false };
    let parts = side_by_side(table.split_cursors(cols, threads), |cur| {
        aggregate_part(cur, &cuts, &cover, specs, bins)
    })?;
    let mut it = parts.into_iter();
    let Some(mut all) = it.next() else {
        return Ok((specs.iter().map(|_| MapAgg::default()).collect(), 0));
    };
    for p in it {
        all.unassigned += p.unassigned;
        for (m, g) in p.aggs.into_iter().enumerate() {
            let a = &mut all.aggs[m];
            a.accesses += g.accesses;
            a.time_range = match (a.time_range, g.time_range) {
                (Some((l0, h0)), Some((l1, h1))) => Some((l0.min(l1), h0.max(h1))),
                (x, y) => x.or(y),
            };
            a.counts.iter_mut().zip(g.counts).for_each(|(x, y)| *x += y);
        }
        for (mine, theirs) in all.pages.iter_mut().zip(p.pages) {
            match (mine, theirs) {
                (PageCounts::Dense(a), PageCounts::Dense(b)) => {
                    a.iter_mut().zip(b).for_each(|(x, y)| *x = x.saturating_add(y));
                }
                (PageCounts::Sparse(a), PageCounts::Sparse(b)) => {
                    for (k, v) in b {
                        *a.entry(k).or_insert(0) += v;
                    }
                }
                _ => unreachable!("the same mapping is counted the same way by every thread"),
            }
        }
        for (mine, theirs) in all.tids.iter_mut().zip(p.tids) {
            mine.extend(theirs);
        }
    }
    for (m, g) in all.aggs.iter_mut().enumerate() {
        g.threads = all.tids[m].len() as u64;
        let mut add = |n: u64| {
            if n > 0 {
                g.pages_touched += 1;
                *g.hist.entry(n).or_insert(0) += 1;
            }
        };
        match &all.pages[m] {
            PageCounts::Dense(v) => v.iter().for_each(|&n| add(u64::from(n))),
            PageCounts::Sparse(h) => h.values().for_each(|&n| add(n)),
        }
    }
    Ok((all.aggs, all.unassigned))
}

fn aggregate_part(
    mut cur: AccessCursor,
    cuts: &[u64],
    cover: &[Vec<Segment>],
    specs: &[MapSpec],
    bins: Bins,
) -> Result<AggPart> {
    let mut aggs: Vec<MapAgg> = specs
        .iter()
        .map(|sp| MapAgg {
            counts: vec![0; (sp.pages.div_ceil(sp.group.max(1)) as usize) * bins.cols],
            ..Default::default()
        })
        .collect();
    let mut pages: Vec<PageCounts> = specs
        .iter()
        .map(|sp| {
            if sp.pages <= DENSE_PAGES {
                PageCounts::Dense(vec![0; sp.pages as usize])
            } else {
                PageCounts::Sparse(HashMap::new())
            }
        })
        .collect();
    let mut tids: Vec<HashSet<u32>> = vec![HashSet::new(); specs.len()];
    let mut last_tid: Vec<Option<u32>> = vec![None; specs.len()];
    let mut unassigned = 0u64;
    let mut c = AccessChunk::default();
    let mut hint = 0usize;
    let width = bins.width.max(1);
    while cur.next_chunk(&mut c, CHUNK)? {
        for i in 0..c.addr.len() {
            let (a, t) = (c.addr[i], c.time[i]);
            if !(hint < cover.len() && cuts[hint] <= a && a < cuts[hint + 1]) {
                let k = cuts.partition_point(|&x| x <= a);
                if k == 0 || k >= cuts.len() {
                    unassigned += 1;
                    continue;
                }
                hint = k - 1;
            }
            let Some(seg) = cover[hint].iter().find(|s| s.t0 <= t && t < s.t1) else {
                unassigned += 1;
                continue;
            };
            let m = seg.mapping;
            let sp = &specs[m];
            let g = &mut aggs[m];
            g.accesses += 1;
            g.time_range = Some(match g.time_range {
                Some((lo, hi)) => (lo.min(t), hi.max(t)),
                None => (t, t),
            });
            let page = (a - sp.base) / PAGE;
            let row = (page / sp.group.max(1)) as usize;
            let col = ((t.saturating_sub(bins.t_lo)) / width).min(bins.cols as u64 - 1) as usize;
            if let Some(x) = g.counts.get_mut(row * bins.cols + col) {
                *x += 1;
            }
            match &mut pages[m] {
                PageCounts::Dense(v) => {
                    if let Some(x) = v.get_mut(page as usize) {
                        *x = x.saturating_add(1);
                    }
                }
                PageCounts::Sparse(h) => *h.entry(page).or_insert(0) += 1,
            }
            let tid = c.tid[i];
            if last_tid[m] != Some(tid) {
                tids[m].insert(tid);
                last_tid[m] = Some(tid);
            }
        }
    }
    Ok(AggPart { aggs, pages, tids, unassigned })
}
