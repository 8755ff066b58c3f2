//! A compact set of samples: what a simulated sampler hands over at the end of a run, in
//! memory bounded by a few bytes per sample.
//!
//! A [`Sample`] row is about 100 bytes (its event name is a `String` of its own); a run of
//! millions of samples would hold gigabytes as rows. A [`SampleSet`] keeps each sample's data
//! address (8 bytes) and event code (1 byte), and what a drain's samples share (time, thread,
//! CPU, drain index) once per drain. Rows are made on demand, a range at a time
//! ([`SampleSet::columns`]), so a writer streams them to a recording chunk by chunk.
//!
//! A set made with [`SampleSet::spilling`] keeps at most that many samples in memory: the
//! older ones go to an unlinked temporary file (9 bytes each), so a run's memory does not
//! grow with its samples (runs of samples stay in memory: one per drain).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::Sample;

/// Bytes per spilled sample: the address (little-endian) and the event code.
const SPILL_RECORD: usize = 9;

/// Spilled samples: an unlinked temporary file (nothing is left behind however the process
/// ends), samples `0..rows` of the set.
#[derive(Debug)]
struct Spill {
    file: File,
    rows: usize,
}

impl Spill {
    fn create() -> io::Result<Spill> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name =
            format!(".tierlab-samples-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(name);
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
        std::fs::remove_file(&path)?;
        Ok(Spill { file, rows: 0 })
    }

    fn append(&mut self, addr: &[u64], event: &[u8]) -> io::Result<()> {
        let mut buf = Vec::with_capacity(addr.len() * SPILL_RECORD);
        for (a, &e) in addr.iter().zip(event) {
            buf.extend_from_slice(&a.to_le_bytes());
            buf.push(e);
        }
        self.file.write_all_at(&buf, (self.rows * SPILL_RECORD) as u64)?;
        self.rows += addr.len();
        Ok(())
    }

    /// Samples `start..end` (within the spilled ones) appended to `addr` and `event`.
    fn read(&self, start: usize, end: usize, addr: &mut Vec<u64>, event: &mut Vec<u8>) -> io::Result<()> {
        const PIECE: usize = 1 << 16;
        let mut buf = vec![0u8; PIECE.min(end.saturating_sub(start)) * SPILL_RECORD];
        let mut i = start;
        while i < end {
            let j = (i + PIECE).min(end);
            let b = &mut buf[..(j - i) * SPILL_RECORD];
            self.file.read_exact_at(b, (i * SPILL_RECORD) as u64)?;
            for r in b.chunks_exact(SPILL_RECORD) {
                addr.push(u64::from_le_bytes(r[..8].try_into().expect("8 bytes")));
                event.push(r[8]);
            }
            i = j;
        }
        Ok(())
    }
}

/// What a run of consecutive samples shares (the samples of one drain, for PEBS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    time_ns: u64,
    tid: u32,
    cpu: u32,
    drain: u64,
    /// Index of its first sample.
    first: usize,
}

/// Samples in the compact form described in the module docs. Fields a model does not know
/// (`ip`, `weight`, `data_src`) are kept only when some sample has them.
#[derive(Debug, Default)]
pub struct SampleSet {
    runs: Vec<Run>,
    /// The samples after the spilled ones (all of them when nothing was spilled).
    addr: Vec<u64>,
    event: Vec<u8>,
    events: Vec<String>,
    /// `(ip, weight, data_src)` of every sample, when one is not zero (such a set is never
    /// spilled).
    extra: Option<Vec<[u64; 3]>>,
    spill: Option<Spill>,
    /// Samples kept in memory before they are spilled (0: never spilled).
    spill_rows: usize,
}

impl Clone for SampleSet {
    /// A copy held in memory (spilled samples read back).
    fn clone(&self) -> Self {
        let c = self.columns(0, self.len());
        SampleSet {
            runs: self.runs.clone(),
            addr: c.addr,
            event: c.event,
            events: self.events.clone(),
            extra: self.extra.clone(),
            spill: None,
            spill_rows: 0,
        }
    }
}

impl PartialEq for SampleSet {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self.runs == other.runs
            && self.events == other.events
            && self.extra == other.extra
            && self.columns(0, self.len()) == other.columns(0, other.len())
    }
}

impl Eq for SampleSet {}

/// Rows `start..end` of a [`SampleSet`], column by column (the recording format's `samples`
/// table, `event` as an index into [`SampleSet::events`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SampleColumns {
    /// Time in nanoseconds.
    pub time_ns: Vec<u64>,
    /// Thread.
    pub tid: Vec<u32>,
    /// CPU.
    pub cpu: Vec<u32>,
    /// Data address.
    pub addr: Vec<u64>,
    /// Instruction pointer (0: unknown).
    pub ip: Vec<u64>,
    /// Latency weight (0: unknown).
    pub weight: Vec<u64>,
    /// Data-source word (0: unknown).
    pub data_src: Vec<u64>,
    /// Event, as an index into the set's event names.
    pub event: Vec<u8>,
    /// Drain index.
    pub drain: Vec<u64>,
}

impl SampleSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty set whose event codes name `events` (for [`SampleSet::push_code`]).
    pub fn with_events(events: Vec<String>) -> Self {
        assert!(events.len() <= 256, "a sample set has at most 256 event names");
        SampleSet { events, ..Self::default() }
    }

    /// This set, spilling its samples to a temporary file once `rows` of them are in memory
    /// (see the module docs). A set whose file cannot be made or written keeps its samples in
    /// memory (and says so once on stderr).
    pub fn spilling(mut self, rows: usize) -> Self {
        self.spill_rows = rows;
        self
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.spilled() + self.addr.len()
    }

    /// Whether there is no sample.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Samples written to the temporary file.
    pub fn spilled(&self) -> usize {
        self.spill.as_ref().map_or(0, |s| s.rows)
    }

    fn maybe_spill(&mut self) {
        if self.spill_rows == 0 || self.addr.len() < self.spill_rows || self.extra.is_some() {
            return;
        }
        let res = match self.spill.as_mut() {
            Some(s) => s.append(&self.addr, &self.event),
            None => Spill::create().and_then(|mut s| {
                s.append(&self.addr, &self.event)?;
                self.spill = Some(s);
                Ok(())
            }),
        };
        match res {
            Ok(()) => {
                self.addr.clear();
                self.event.clear();
            }
            Err(e) => {
                eprintln!(
                    "tierlab: cannot spill samples to {} ({e}): keeping them in memory",
                    std::env::temp_dir().display()
                );
                self.spill_rows = 0;
            }
        }
    }

    /// Addresses and event codes of samples `start..end` (in range).
    fn addr_event(&self, start: usize, end: usize) -> io::Result<(Vec<u64>, Vec<u8>)> {
        let cut = self.spilled();
        let mut addr = Vec::with_capacity(end - start);
        let mut event = Vec::with_capacity(end - start);
        if let Some(s) = &self.spill {
            if start < cut {
                s.read(start, end.min(cut), &mut addr, &mut event)?;
            }
        }
        let (a, b) = (start.max(cut) - cut, end.max(cut) - cut);
        addr.extend_from_slice(&self.addr[a..b]);
        event.extend_from_slice(&self.event[a..b]);
        Ok((addr, event))
    }

    /// The event names, by code.
    pub fn events(&self) -> &[String] {
        &self.events
    }

    /// Bytes held (capacity, not length: what the process has allocated).
    pub fn heap_bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<Run>()
            + self.addr.capacity() * 8
            + self.event.capacity()
            + self.extra.as_ref().map_or(0, |e| e.capacity() * 24)
    }

    fn event_code(&mut self, name: &str) -> u8 {
        if let Some(i) = self.events.iter().position(|e| e == name) {
            return i as u8;
        }
        assert!(self.events.len() < 256, "a sample set has at most 256 event names");
        self.events.push(name.to_string());
        (self.events.len() - 1) as u8
    }

    /// Start a run of samples sharing `time_ns`, `tid`, `cpu` and `drain` (the next
    /// [`SampleSet::push`]es belong to it).
    pub fn start_run(&mut self, time_ns: u64, tid: u32, cpu: u32, drain: u64) {
        let first = self.len();
        if self.runs.last().is_some_and(|r| r.first == first) {
            self.runs.pop(); // an empty run: replaced
        }
        self.runs.push(Run { time_ns, tid, cpu, drain, first });
    }

    /// Add a sample of event `event` at `addr` to the current run.
    pub fn push(&mut self, addr: u64, event: &str) {
        let code = self.event_code(event);
        self.push_code(addr, code);
    }

    /// Add a sample at `addr` whose event is `events()[code]` to the current run.
    pub fn push_code(&mut self, addr: u64, code: u8) {
        assert!(!self.runs.is_empty(), "SampleSet::push before start_run");
        assert!((code as usize) < self.events.len(), "event code {code} names no event");
        self.addr.push(addr);
        self.event.push(code);
        if let Some(extra) = self.extra.as_mut() {
            extra.push([0; 3]);
        }
        self.maybe_spill();
    }

    /// Add a sample of event code `code` at `addr`, in the current run if it shares its time,
    /// thread, CPU and drain, else in a new one.
    pub fn push_at(&mut self, time_ns: u64, tid: u32, cpu: u32, drain: u64, addr: u64, code: u8) {
        let same = self
            .runs
            .last()
            .is_some_and(|r| (r.time_ns, r.tid, r.cpu, r.drain) == (time_ns, tid, cpu, drain));
        if !same {
            self.start_run(time_ns, tid, cpu, drain);
        }
        self.push_code(addr, code);
    }

    /// The drain index of the last sample, if any.
    pub fn last_drain(&self) -> Option<u64> {
        let n = self.len();
        self.runs.iter().rev().find(|r| r.first < n).map(|r| r.drain)
    }

    /// Add one row (a run of its own unless it shares the current run's time, thread, CPU
    /// and drain).
    pub fn push_row(&mut self, s: &Sample) {
        let same = self
            .runs
            .last()
            .is_some_and(|r| (r.time_ns, r.tid, r.cpu, r.drain) == (s.time_ns, s.tid, s.cpu, s.drain));
        if !same {
            self.start_run(s.time_ns, s.tid, s.cpu, s.drain);
        }
        self.push(s.addr, &s.event);
        if s.ip != 0 || s.weight != 0 || s.data_src != 0 {
            let n = self.len();
            let extra = self.extra.get_or_insert_with(|| vec![[0; 3]; n]);
            extra[n - 1] = [s.ip, s.weight, s.data_src];
        }
    }

    /// A set from its parts: `runs` of `(time_ns, tid, cpu, drain, first sample)` in order of
    /// their first sample (the first at 0), every sample's `addr` and `event` code, and the
    /// event names the codes index.
    pub fn from_parts(
        runs: impl IntoIterator<Item = (u64, u32, u32, u64, usize)>,
        addr: Vec<u64>,
        event: Vec<u8>,
        events: Vec<String>,
    ) -> Self {
        assert_eq!(addr.len(), event.len(), "one event code per address");
        let mut set = SampleSet { addr, event, events, ..Self::default() };
        for (time_ns, tid, cpu, drain, first) in runs {
            if set.runs.last().is_some_and(|r| r.first == first) {
                set.runs.pop();
            }
            set.runs.push(Run { time_ns, tid, cpu, drain, first });
        }
        assert!(set.addr.is_empty() || set.runs.first().is_some_and(|r| r.first == 0), "runs start at 0");
        assert!(set.event.iter().all(|&c| (c as usize) < set.events.len()), "event codes name events");
        set
    }

    /// A set holding `rows`.
    pub fn from_rows(rows: impl IntoIterator<Item = Sample>) -> Self {
        let mut set = Self::new();
        for s in rows {
            set.push_row(&s);
        }
        set
    }

    /// Rows `start..end` (clamped to the set) as columns. Panics only if spilled samples
    /// cannot be read back from their temporary file ([`SampleSet::try_column`] returns the
    /// error).
    pub fn columns(&self, start: usize, end: usize) -> SampleColumns {
        let end = end.min(self.len());
        let start = start.min(end);
        let n = end - start;
        let (addr, event) = self.addr_event(start, end).expect("reading spilled samples back");
        let mut c = SampleColumns {
            time_ns: Vec::with_capacity(n),
            tid: Vec::with_capacity(n),
            cpu: Vec::with_capacity(n),
            addr,
            ip: Vec::with_capacity(n),
            weight: Vec::with_capacity(n),
            data_src: Vec::with_capacity(n),
            event,
            drain: Vec::with_capacity(n),
        };
        if n == 0 {
            return c;
        }
        // The run holding `start`: the last one whose first sample is at or before it.
        let mut k = self.runs.partition_point(|r| r.first <= start) - 1;
        let mut i = start;
        while i < end {
            let r = self.runs[k];
            let run_end = self.runs.get(k + 1).map_or(self.len(), |next| next.first).min(end);
            let m = run_end - i;
            c.time_ns.resize(c.time_ns.len() + m, r.time_ns);
            c.tid.resize(c.tid.len() + m, r.tid);
            c.cpu.resize(c.cpu.len() + m, r.cpu);
            c.drain.resize(c.drain.len() + m, r.drain);
            i = run_end;
            k += 1;
        }
        match &self.extra {
            Some(extra) => {
                for e in &extra[start..end] {
                    c.ip.push(e[0]);
                    c.weight.push(e[1]);
                    c.data_src.push(e[2]);
                }
            }
            None => {
                c.ip.resize(n, 0);
                c.weight.resize(n, 0);
                c.data_src.resize(n, 0);
            }
        }
        c
    }

    /// One column of rows `start..end` (clamped): `time_ns`, `tid`, `cpu`, `addr`, `ip`,
    /// `weight`, `data_src`, `drain` as u64 values, `event` as codes; `None` for another name.
    /// Only that column is made (a writer streaming the set holds one column of one chunk
    /// beside what it writes). Panics only where [`SampleSet::columns`] does.
    pub fn column(&self, name: &str, start: usize, end: usize) -> Option<Vec<u64>> {
        self.try_column(name, start, end).expect("reading spilled samples back")
    }

    /// [`SampleSet::column`], with the error of reading spilled samples back.
    pub fn try_column(&self, name: &str, start: usize, end: usize) -> io::Result<Option<Vec<u64>>> {
        let end = end.min(self.len());
        let start = start.min(end);
        let n = end - start;
        let per_run = |f: &dyn Fn(&Run) -> u64| {
            let mut out = Vec::with_capacity(n);
            if n > 0 {
                let mut k = self.runs.partition_point(|r| r.first <= start) - 1;
                let mut i = start;
                while i < end {
                    let r = &self.runs[k];
                    let run_end = self.runs.get(k + 1).map_or(self.len(), |next| next.first).min(end);
                    out.resize(out.len() + (run_end - i), f(r));
                    i = run_end;
                    k += 1;
                }
            }
            out
        };
        let extra = |j: usize| match &self.extra {
            Some(e) => e[start..end].iter().map(|x| x[j]).collect(),
            None => vec![0; n],
        };
        Ok(Some(match name {
            "time_ns" => per_run(&|r| r.time_ns),
            "tid" => per_run(&|r| u64::from(r.tid)),
            "cpu" => per_run(&|r| u64::from(r.cpu)),
            "drain" => per_run(&|r| r.drain),
            "addr" => self.addr_event(start, end)?.0,
            "event" => self.addr_event(start, end)?.1.into_iter().map(u64::from).collect(),
            "ip" => extra(0),
            "weight" => extra(1),
            "data_src" => extra(2),
            _ => return Ok(None),
        }))
    }

    /// Every sample as a row (for small sets and tests).
    pub fn rows(&self) -> Vec<Sample> {
        let c = self.columns(0, self.len());
        (0..self.len())
            .map(|i| Sample {
                time_ns: c.time_ns[i],
                tid: c.tid[i],
                cpu: c.cpu[i],
                addr: c.addr[i],
                ip: c.ip[i],
                weight: c.weight[i],
                data_src: c.data_src[i],
                event: self.events[c.event[i] as usize].clone(),
                drain: c.drain[i],
            })
            .collect()
    }

    /// One row per drain: `(time_ns, cpu, drain, records)` of the first run of each drain
    /// index, records counted over all its runs, in drain order.
    pub fn drains(&self) -> Vec<(u64, u32, u64, u64)> {
        let mut out: Vec<(u64, u32, u64, u64)> = Vec::new();
        let mut order: Vec<usize> = (0..self.runs.len()).collect();
        order.sort_by_key(|&k| (self.runs[k].drain, k));
        for k in order {
            let r = self.runs[k];
            let n = (self.runs.get(k + 1).map_or(self.len(), |next| next.first) - r.first) as u64;
            if n == 0 {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.2 == r.drain => last.3 += n,
                _ => out.push((r.time_ns, r.cpu, r.drain, n)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(time_ns: u64, cpu: u32, addr: u64, event: &str, drain: u64) -> Sample {
        Sample { time_ns, tid: cpu, cpu, addr, ip: 0, weight: 0, data_src: 0, event: event.into(), drain }
    }

    #[test]
    fn rows_round_trip_and_ranges_match_the_rows() {
        let rows = vec![
            row(10, 0, 0x1000, "mem-loads", 0),
            row(10, 0, 0x2000, "mem-stores", 0),
            row(20, 1, 0x3000, "mem-loads", 1),
            row(30, 0, 0x4000, "mem-loads", 2),
            row(30, 0, 0x5000, "mem-loads", 2),
            Sample { ip: 7, weight: 3, data_src: 9, ..row(40, 1, 0x6000, "mem-stores", 3) },
        ];
        let set = SampleSet::from_rows(rows.clone());
        assert_eq!(set.len(), 6);
        assert_eq!(set.rows(), rows);
        assert_eq!(set.events(), ["mem-loads", "mem-stores"]);
        for start in 0..=6 {
            for end in start..=7 {
                let c = set.columns(start, end);
                let want = &rows[start..end.min(6)];
                assert_eq!(c.addr, want.iter().map(|r| r.addr).collect::<Vec<_>>(), "{start}..{end}");
                assert_eq!(c.time_ns, want.iter().map(|r| r.time_ns).collect::<Vec<_>>());
                assert_eq!(c.drain, want.iter().map(|r| r.drain).collect::<Vec<_>>());
                assert_eq!(c.ip, want.iter().map(|r| r.ip).collect::<Vec<_>>());
            }
        }
        assert_eq!(set.drains(), vec![(10, 0, 0, 2), (20, 1, 1, 1), (30, 0, 2, 2), (40, 1, 3, 1)]);
        for start in 0..=6 {
            for end in start..=7 {
                let c = set.columns(start, end);
                let u = |v: &[u32]| v.iter().map(|&x| u64::from(x)).collect::<Vec<u64>>();
                assert_eq!(set.column("time_ns", start, end), Some(c.time_ns.clone()));
                assert_eq!(set.column("cpu", start, end), Some(u(&c.cpu)));
                assert_eq!(set.column("drain", start, end), Some(c.drain.clone()));
                assert_eq!(set.column("weight", start, end), Some(c.weight.clone()));
                assert_eq!(
                    set.column("event", start, end),
                    Some(c.event.iter().map(|&e| u64::from(e)).collect())
                );
            }
        }
        assert_eq!(set.column("nope", 0, 1), None);
    }

    #[test]
    fn a_sample_costs_nine_bytes() {
        let mut set = SampleSet::new();
        for d in 0..1000u64 {
            set.start_run(d * 100, 0, 0, d);
            for i in 0..1000u64 {
                set.push((d * 1000 + i) << 12, "pebs-model");
            }
        }
        assert_eq!(set.len(), 1_000_000);
        let per = set.heap_bytes() as f64 / set.len() as f64;
        assert!(per < 12.0, "{per} bytes per sample");
    }

    #[test]
    fn a_spilling_set_keeps_a_bounded_number_in_memory_and_reads_the_same() {
        let events = vec!["loads".to_string(), "stores".to_string()];
        let mut spilled = SampleSet::with_events(events.clone()).spilling(7);
        let mut whole = SampleSet::with_events(events);
        for d in 0..13u64 {
            for set in [&mut spilled, &mut whole] {
                set.start_run(d * 10, d as u32 % 3, 0, d);
                for i in 0..(d % 5) {
                    set.push_code((d << 20) + (i << 12), (i % 2) as u8);
                }
            }
        }
        assert_eq!(spilled.len(), whole.len());
        assert!(spilled.spilled() > 0 && spilled.addr.len() < 7, "{}", spilled.addr.len());
        for start in 0..=whole.len() {
            for end in start..=whole.len() + 1 {
                assert_eq!(spilled.columns(start, end), whole.columns(start, end), "{start}..{end}");
                assert_eq!(spilled.column("event", start, end), whole.column("event", start, end));
            }
        }
        assert_eq!(spilled.drains(), whole.drains());
        assert!(spilled == whole && spilled.clone() == whole);
    }

    #[test]
    fn empty_runs_are_dropped() {
        let mut set = SampleSet::new();
        set.start_run(1, 0, 0, 0);
        set.start_run(2, 0, 0, 1);
        set.push(0x1000, "e");
        assert_eq!(set.drains(), vec![(2, 0, 1, 1)]);
        assert!(SampleSet::new().columns(0, 10).addr.is_empty());
    }
}
