//! `replay`: replays a recorded access stream (a tierlab recording's `accesses` table).
//!
//! The recording is loaded by the caller (the Python package or the CLI) and handed over as
//! [`ReplayData`] through [`BuildCtx::replay`]. Recorded threads are ordered by ascending
//! `tid`; the `i`-th of them replays on simulated thread `i % threads`, each simulated thread
//! issuing its accesses in recorded order (accesses of recorded threads folded onto the same
//! simulated thread keep their recorded interleaving). `loop_count` replays the whole stream
//! that many times.
//!
//! Memory: the recorded mappings are mapped at their recorded addresses with
//! [`AddressSpace::mmap_fixed`], rounded out to whole pages and merged where they then
//! overlap. Accesses outside every recorded mapping (or all accesses, when the recording has
//! no mappings) are covered by 2 MiB-aligned extents derived from the addresses, merged,
//! named `[replay]`.

use super::{
    check_threads, Access, AccessKind, AddressSpace, BuildCtx, MapOptions, PageSize, Step, Workload,
    WorkloadParams,
};
use crate::error::{Location, Result, SimError};
use crate::stats::Stats;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A recorded access stream, column by column (row `i` of every column is one access).
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

/// Parameters of the `replay` workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayParams {
    /// The recording directory (loaded by the Python layer / CLI, which passes the data in
    /// `BuildCtx::replay`); relative to the scenario's folder.
    pub path: String,
    /// Simulated threads; absent (default) = one per distinct recorded tid, at most one per
    /// core. Recorded thread `i` (by ascending tid) runs on simulated thread `i % threads`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Times the whole stream is replayed. Default 1.
    #[serde(default = "default_loop_count")]
    pub loop_count: u32,
    /// Page size of the mappings: absent (default) = 4 KiB pages for ranges that are not
    /// 2 MiB-aligned (recorded mappings are only page-aligned) and the machine's default for
    /// the others; `"2MiB"` rounds every range out to 2 MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<PageSize>,
    /// Bulk-populate the mappings at setup (default false: faulted in on first touch).
    #[serde(default)]
    pub populate: bool,
}

fn default_loop_count() -> u32 {
    1
}

const BATCH: usize = 16_384;
const EXTENT: u64 = tierlab_core::HUGE_SIZE;

/// Merge sorted-by-start ranges `(start, end, name)` that overlap (or touch, when `touch`).
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

/// Ranges `(start, end)` of `extents` not covered by the sorted, disjoint `covered` ranges,
/// at `page` granularity.
fn subtract(extents: &[(u64, u64)], covered: &[(u64, u64, String)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(mut s, e) in extents {
        let first = covered.partition_point(|c| c.1 <= s);
        for c in &covered[first..] {
            if c.0 >= e {
                break;
            }
            if c.0 > s {
                out.push((s, c.0));
            }
            s = s.max(c.1);
            if s >= e {
                break;
            }
        }
        if s < e {
            out.push((s, e));
        }
    }
    out
}

impl ReplayParams {
    /// The ranges `(start, end, name)` to map for `data` (page-rounded recorded mappings plus
    /// derived extents), disjoint and ascending.
    pub fn plan_mappings(&self, data: &ReplayData) -> Vec<(u64, u64, String)> {
        let page = self.page_size.map_or(tierlab_core::PAGE_SIZE, |p| p.bytes());
        let given: Vec<(u64, u64, String)> = data
            .mappings
            .iter()
            .map(|(s, l, n)| (s / page * page, (s + l).saturating_add(page - 1) / page * page, n.clone()))
            .collect();
        let given = merge(given, false);
        // 2 MiB extents of every access outside the given mappings.
        let mut ext: Vec<u64> = Vec::new();
        let mut last = u64::MAX;
        // The given mapping that covered the previous access (accesses are local).
        let (mut cov_lo, mut cov_hi) = (1u64, 0u64);
        for &a in &data.addr {
            if a >= cov_lo && a < cov_hi {
                continue;
            }
            let e = a / EXTENT;
            if e == last {
                continue;
            }
            match covering(&given, a) {
                Some((lo, hi)) => (cov_lo, cov_hi) = (lo, hi),
                None => {
                    ext.push(e);
                    last = e;
                }
            }
        }
        ext.sort_unstable();
        ext.dedup();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for e in ext {
            let (s, end) = (e * EXTENT, (e * EXTENT).saturating_add(EXTENT));
            match runs.last_mut() {
                Some(r) if r.1 == s => r.1 = end,
                _ => runs.push((s, end)),
            }
        }
        let derived = subtract(&runs, &given);
        let mut all = given;
        all.extend(derived.into_iter().map(|(s, e)| (s, e, "[replay]".to_string())));
        all.sort_by_key(|r| r.0);
        all
    }
}

fn covering(ranges: &[(u64, u64, String)], a: u64) -> Option<(u64, u64)> {
    let i = ranges.partition_point(|r| r.1 <= a);
    (i < ranges.len() && ranges[i].0 <= a).then(|| (ranges[i].0, ranges[i].1))
}

impl WorkloadParams for ReplayParams {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        let f = &ctx.scenario_file;
        let Some(data) = ctx.replay.clone() else {
            return Err(SimError::config(
                f,
                "workload.path",
                "replay needs its recording loaded: run it through the tierlab Python package or CLI",
            ));
        };
        data.validate().map_err(|e| match e {
            SimError::Input { mut at, msg } => {
                at.file = self.path.clone();
                SimError::Input { at, msg }
            }
            other => other,
        })?;
        if self.loop_count == 0 {
            return Err(SimError::config(f, "workload.loop_count", "must be at least 1"));
        }
        let mut tids: Vec<u32> = data.tid.clone();
        tids.sort_unstable();
        tids.dedup();
        let threads = self.threads.unwrap_or_else(|| {
            let n = tids.len().max(1);
            if ctx.cores > 0 {
                n.min(ctx.cores)
            } else {
                n
            }
        });
        check_threads("replay", threads, ctx)?;
        let index = if threads == 1 {
            Vec::new()
        } else {
            if data.len() > u32::MAX as usize {
                return Err(SimError::config(
                    f,
                    "workload.threads",
                    "recordings of more than 2^32 accesses replay on one thread only",
                ));
            }
            let mut idx: Vec<Vec<u32>> = vec![Vec::new(); threads];
            for (i, t) in data.tid.iter().enumerate() {
                let rank = tids.binary_search(t).unwrap_or(0);
                idx[rank % threads].push(i as u32);
            }
            idx
        };
        let st = (0..threads).map(|_| ThreadState { pos: 0, round: 0, issued: 0 }).collect();
        Ok(Box::new(Replay { p: self.clone(), data, threads, index, st, discarded: 0 }))
    }
}

struct ThreadState {
    pos: usize,
    round: u32,
    issued: u64,
}

/// The `replay` workload.
pub struct Replay {
    p: ReplayParams,
    data: Arc<ReplayData>,
    threads: usize,
    /// Per simulated thread, the rows it replays (empty when there is one thread).
    index: Vec<Vec<u32>>,
    st: Vec<ThreadState>,
    discarded: u64,
}

#[inline]
fn access(addr: u64, kind: u8) -> Access {
    if kind == 0 {
        Access::read(addr)
    } else {
        Access::write(addr)
    }
}

impl Workload for Replay {
    fn threads(&self) -> usize {
        self.threads
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        for (s, e, name) in self.p.plan_mappings(&self.data) {
            let page_size = match self.p.page_size {
                Some(p) => Some(p),
                None if (s | e) & (EXTENT - 1) == 0 => None,
                None => Some(PageSize::Base4K),
            };
            let opts = MapOptions { name, page_size, populate: self.p.populate, thread: 0 };
            mem.mmap_fixed(s, e - s, opts)?;
        }
        Ok(())
    }

    fn next_batch(
        &mut self,
        t: usize,
        _now_ns: u64,
        out: &mut Vec<Access>,
        _mem: &mut dyn AddressSpace,
    ) -> Result<Step> {
        let d = &*self.data;
        let s = &mut self.st[t];
        let total = if self.threads == 1 { d.len() } else { self.index[t].len() };
        if s.round >= self.p.loop_count || total == 0 {
            return Ok(Step::Done);
        }
        let end = total.min(s.pos + BATCH);
        if self.threads == 1 {
            out.extend(d.addr[s.pos..end].iter().zip(&d.kind[s.pos..end]).map(|(&a, &k)| access(a, k)));
        } else {
            out.extend(
                self.index[t][s.pos..end].iter().map(|&i| access(d.addr[i as usize], d.kind[i as usize])),
            );
        }
        s.issued += (end - s.pos) as u64;
        s.pos = end;
        if s.pos == total {
            s.pos = 0;
            s.round += 1;
            if s.round >= self.p.loop_count {
                return Ok(Step::Done);
            }
        }
        Ok(Step::Continue)
    }

    fn discard(&mut self, _t: usize, unexecuted: &[Access]) {
        self.discarded += unexecuted.len() as u64;
    }

    fn report_stats(&self, out: &mut Stats) {
        out.set("workload.accesses", self.st.iter().map(|s| s.issued).sum::<u64>() - self.discarded);
        out.set("workload.recorded_accesses", self.data.len());
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
            duration_ns: 0,
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
    fn needs_loaded_data() {
        let c = BuildCtx { replay: None, ..ctx(sample()) };
        let e = params("path = \"rec\"").build(&c).err().unwrap().to_string();
        assert!(e.contains("replay needs its recording loaded"), "{e}");
    }

    #[test]
    fn mappings_rounded_merged_and_derived() {
        let mut w = params("path = \"rec\"").build(&ctx(sample())).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let got: Vec<(u64, u64, String)> =
            mem.maps.iter().map(|m| (m.start, m.len, m.opts.name.clone())).collect();
        assert_eq!(
            got,
            vec![
                (0x1000_0000, 0x3000, "heap".to_string()),
                (0x5000_0000, 0x20_0000, "[replay]".to_string()),
                (0x7f00_0000_0000, 0x1000, "stack".to_string()),
            ]
        );
        assert_eq!(mem.find("heap").opts.page_size, Some(PageSize::Base4K));
        assert_eq!(mem.find("[replay]").opts.page_size, None);
        // Overlaps after rounding are merged; no mappings = derived extents only.
        let d = ReplayData {
            addr: vec![0x20_0100, 0x20_0100, 0x3f_ffff, 0x40_0000, 0x90_0000],
            tid: vec![1; 5],
            kind: vec![0; 5],
            mappings: vec![],
        };
        let plan = params("path = \"r\"").plan_mappings(&d);
        assert_eq!(
            plan,
            vec![
                (0x20_0000, 0x60_0000, "[replay]".to_string()),
                (0x80_0000, 0xa0_0000, "[replay]".to_string())
            ]
        );
        let d = ReplayData {
            addr: vec![0x1000, 0x3000, 0x30_0000],
            tid: vec![1; 3],
            kind: vec![0; 3],
            mappings: vec![(0x1000, 0x800, "a".into()), (0x1800, 0x10, "b".into())],
        };
        let plan = params("path = \"r\"").plan_mappings(&d);
        assert_eq!(
            plan,
            vec![
                (0x0, 0x1000, "[replay]".to_string()),
                (0x1000, 0x2000, "a+b".to_string()),
                (0x2000, 0x40_0000, "[replay]".to_string()),
            ]
        );
    }

    #[test]
    fn replays_in_order_per_thread_and_folds() {
        let d = sample();
        // Three tids: 10 -> thread 0, 20 -> thread 1, 30 -> thread 2.
        let mut w = params("path = \"rec\"\nloop_count = 2").build(&ctx(d.clone())).unwrap();
        assert_eq!(w.threads(), 3);
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let mut per: Vec<Vec<Access>> = vec![Vec::new(); 3];
        drive(w.as_mut(), &mut mem, 1, 0, |t, _, a| per[t].push(*a));
        let rows = |idx: &[usize]| -> Vec<Access> {
            let one: Vec<Access> = idx.iter().map(|&i| access(d.addr[i], d.kind[i])).collect();
            [one.clone(), one].concat()
        };
        assert_eq!(per[0], rows(&[1, 3, 5]));
        assert_eq!(per[1], rows(&[2]));
        assert_eq!(per[2], rows(&[0, 4]));
        assert!(per.iter().flatten().all(|a| mem.contains(a.addr)));
        // Folded onto two threads: tid 30 (rank 2) joins tid 10 on thread 0.
        let mut w = params("path = \"rec\"\nthreads = 2").build(&ctx(d.clone())).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let mut per: Vec<Vec<Access>> = vec![Vec::new(); 2];
        drive(w.as_mut(), &mut mem, 1, 0, |t, _, a| per[t].push(*a));
        let one = |idx: &[usize]| idx.iter().map(|&i| access(d.addr[i], d.kind[i])).collect::<Vec<_>>();
        assert_eq!(per[0], one(&[0, 1, 3, 4, 5]));
        assert_eq!(per[1], one(&[2]));
        // One thread: the whole stream in order.
        let mut w = params("path = \"rec\"\nthreads = 1").build(&ctx(d.clone())).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let mut all = Vec::new();
        drive(w.as_mut(), &mut mem, 1, 0, |_, _, a| all.push(*a));
        assert_eq!(all, one(&[0, 1, 2, 3, 4, 5]));
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
}
