//! The perf ring buffer: walking the records between `data_tail` and `data_head` of a data
//! area (records may wrap around its end), and decoding the records the recorder uses.
//!
//! Everything here works on plain byte slices, so it is tested on synthetic buffers; the
//! session (`crate::session`) supplies the mmapped area and the head/tail words.

use std::fmt;

use crate::perf::{record, sample};

/// A ring whose records do not make sense (a header size of 0, or past the head).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingError {
    /// Position (ever-growing byte counter) of the bad header.
    pub position: u64,
    pub size: u16,
    /// Bytes left between that position and the head.
    pub available: u64,
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "corrupt perf ring buffer: record header at byte {} has size {} ({} bytes up to the head)",
            self.position, self.size, self.available
        )
    }
}

impl std::error::Error for RingError {}

/// Call `f` with every complete record in `data` (the data area, a power of two in size)
/// between positions `tail` and `head`. A record that wraps around the end of the area is
/// copied into `scratch` so `f` always sees it contiguous. Returns the new tail (`head`).
///
/// On a corrupt header the walk stops and the error says where; the caller should then
/// discard the rest (set the tail to the head).
pub fn for_each_record(
    data: &[u8],
    tail: u64,
    head: u64,
    scratch: &mut Vec<u8>,
    mut f: impl FnMut(&[u8]),
) -> Result<u64, RingError> {
    let size = data.len() as u64;
    debug_assert!(size.is_power_of_two());
    let mut pos = tail;
    while pos < head {
        let available = head - pos;
        if available < 8 {
            return Err(RingError { position: pos, size: 0, available });
        }
        let mut header = [0u8; 8];
        copy_out(data, pos, &mut header);
        let rec_size = u16::from_le_bytes([header[6], header[7]]);
        if rec_size < 8 || u64::from(rec_size) > available || u64::from(rec_size) > size {
            return Err(RingError { position: pos, size: rec_size, available });
        }
        let start = (pos & (size - 1)) as usize;
        let end = start + rec_size as usize;
        if end <= data.len() {
            f(&data[start..end]);
        } else {
            scratch.clear();
            scratch.resize(rec_size as usize, 0);
            copy_out(data, pos, scratch);
            f(scratch);
        }
        pos += u64::from(rec_size);
    }
    Ok(pos)
}

fn copy_out(data: &[u8], pos: u64, out: &mut [u8]) {
    let size = data.len();
    let start = (pos as usize) & (size - 1);
    let first = out.len().min(size - start);
    out[..first].copy_from_slice(&data[start..start + first]);
    let rest = out.len() - first;
    out[first..].copy_from_slice(&data[..rest]);
}

/// Little-endian reader over one record.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn u64(&mut self) -> Result<u64, ParseError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    fn u32(&mut self) -> Result<u32, ParseError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], ParseError> {
        if self.pos + n > self.buf.len() {
            return Err(ParseError {
                kind: 0,
                reason: format!("truncated at byte {} (needs {n} more)", self.pos),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
}

/// A record that could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub kind: u32,
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "perf record of type {}: {}", self.kind, self.reason)
    }
}

impl std::error::Error for ParseError {}

/// The `sample_id_all` trailer of non-sample records (fields present per `sample_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleId {
    pub pid: u32,
    pub tid: u32,
    pub time: Option<u64>,
    pub id: Option<u64>,
    pub cpu: Option<u32>,
}

fn trailer_len(sample_type: u64) -> usize {
    [sample::TID, sample::TIME, sample::ID, sample::STREAM_ID, sample::CPU, sample::IDENTIFIER]
        .iter()
        .filter(|b| sample_type & **b != 0)
        .count()
        * 8
}

fn parse_trailer(rec: &[u8], sample_type: u64) -> SampleId {
    let n = trailer_len(sample_type);
    let mut sid = SampleId::default();
    if rec.len() < 8 + n {
        return sid;
    }
    let mut c = Cursor { buf: rec, pos: rec.len() - n };
    // The reads cannot fail: the length was checked above.
    if sample_type & sample::TID != 0 {
        sid.pid = c.u32().unwrap_or(0);
        sid.tid = c.u32().unwrap_or(0);
    }
    if sample_type & sample::TIME != 0 {
        sid.time = c.u64().ok();
    }
    if sample_type & sample::ID != 0 {
        sid.id = c.u64().ok();
    }
    if sample_type & sample::STREAM_ID != 0 {
        let _ = c.u64();
    }
    if sample_type & sample::CPU != 0 {
        sid.cpu = c.u32().ok();
        let _ = c.u32();
    }
    if sample_type & sample::IDENTIFIER != 0 {
        sid.id = c.u64().ok();
    }
    sid
}

/// A decoded `PERF_RECORD_SAMPLE` as the kernel wrote it (fields absent from the sample type
/// are 0 / empty). [`RawSample::row`] turns it into a row of the recording's `samples` table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawSample {
    pub id: u64,
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub addr: u64,
    pub cpu: u32,
    pub weight: u64,
    pub data_src: u64,
    pub phys_addr: u64,
    /// `PERF_SAMPLE_RAW` payload (tracepoint data), if any.
    pub raw: Vec<u8>,
}

impl RawSample {
    /// The recording's row for this sample: core's [`tierlab_core::Sample`], its time made
    /// relative to `t0` (the recording's start in the sample clock), named `event`, delivered by
    /// drain `drain`.
    pub fn row(&self, t0: u64, event: &str, drain: u64) -> tierlab_core::Sample {
        tierlab_core::Sample {
            time_ns: self.time.saturating_sub(t0),
            tid: self.tid,
            cpu: self.cpu,
            addr: self.addr,
            ip: self.ip,
            weight: self.weight,
            data_src: self.data_src,
            event: event.to_string(),
            drain,
        }
    }
}

/// The records the recorder acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Sample(RawSample),
    /// `MMAP` or `MMAP2`: a mapping appeared.
    Mmap {
        pid: u32,
        tid: u32,
        addr: u64,
        len: u64,
        pgoff: u64,
        prot: u32,
        flags: u32,
        filename: String,
        sid: SampleId,
    },
    /// Records the kernel dropped because the ring was full.
    Lost {
        id: u64,
        lost: u64,
        sid: SampleId,
    },
    /// Samples the PMU dropped (PEBS / IBS internal loss).
    LostSamples {
        lost: u64,
        sid: SampleId,
    },
    /// The kernel capped the sample rate (`perf_event_max_sample_rate`).
    Throttle {
        time: u64,
        id: u64,
        sid: SampleId,
    },
    Unthrottle {
        time: u64,
        id: u64,
        sid: SampleId,
    },
    Comm {
        pid: u32,
        tid: u32,
        comm: String,
        exec: bool,
        sid: SampleId,
    },
    Exit {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
        time: u64,
        sid: SampleId,
    },
    Fork {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
        time: u64,
        sid: SampleId,
    },
    /// Any other record type.
    Other {
        kind: u32,
    },
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Decode one record. `id_sample_type` is the sample type shared by every event of the ring
/// (it fixes the `sample_id_all` trailer); `sample_type_of(id)` gives the sample type of the
/// event a sample came from (every event must include `PERF_SAMPLE_IDENTIFIER`, which comes
/// first in a sample).
pub fn parse_record(
    rec: &[u8],
    id_sample_type: u64,
    sample_type_of: impl Fn(u64) -> Option<u64>,
) -> Result<Record, ParseError> {
    let mut c = Cursor { buf: rec, pos: 0 };
    let kind = c.u32()?;
    let misc = (c.u32()? & 0xffff) as u16;
    let err = |e: ParseError| ParseError { kind, reason: e.reason };
    let body_end = rec.len().saturating_sub(trailer_len(id_sample_type));
    match kind {
        record::SAMPLE => {
            parse_sample(&mut c, id_sample_type, sample_type_of).map(Record::Sample).map_err(err)
        }
        record::MMAP | record::MMAP2 => {
            let sid = parse_trailer(rec, id_sample_type);
            let pid = c.u32().map_err(err)?;
            let tid = c.u32().map_err(err)?;
            let addr = c.u64().map_err(err)?;
            let len = c.u64().map_err(err)?;
            let pgoff = c.u64().map_err(err)?;
            let (mut prot, mut flags) = (0, 0);
            if kind == record::MMAP2 {
                // maj, min, ino, ino_generation (or the build id): 24 bytes.
                c.take(24).map_err(err)?;
                prot = c.u32().map_err(err)?;
                flags = c.u32().map_err(err)?;
            }
            let name = rec.get(c.pos..body_end.max(c.pos)).unwrap_or(&[]);
            Ok(Record::Mmap { pid, tid, addr, len, pgoff, prot, flags, filename: c_string(name), sid })
        }
        record::LOST => {
            let id = c.u64().map_err(err)?;
            let lost = c.u64().map_err(err)?;
            Ok(Record::Lost { id, lost, sid: parse_trailer(rec, id_sample_type) })
        }
        record::LOST_SAMPLES => {
            let lost = c.u64().map_err(err)?;
            Ok(Record::LostSamples { lost, sid: parse_trailer(rec, id_sample_type) })
        }
        record::THROTTLE | record::UNTHROTTLE => {
            let time = c.u64().map_err(err)?;
            let id = c.u64().map_err(err)?;
            let _stream = c.u64().map_err(err)?;
            let sid = parse_trailer(rec, id_sample_type);
            Ok(if kind == record::THROTTLE {
                Record::Throttle { time, id, sid }
            } else {
                Record::Unthrottle { time, id, sid }
            })
        }
        record::COMM => {
            let pid = c.u32().map_err(err)?;
            let tid = c.u32().map_err(err)?;
            let name = rec.get(c.pos..body_end.max(c.pos)).unwrap_or(&[]);
            Ok(Record::Comm {
                pid,
                tid,
                comm: c_string(name),
                exec: misc & record::MISC_COMM_EXEC != 0,
                sid: parse_trailer(rec, id_sample_type),
            })
        }
        record::EXIT | record::FORK => {
            let pid = c.u32().map_err(err)?;
            let ppid = c.u32().map_err(err)?;
            let tid = c.u32().map_err(err)?;
            let ptid = c.u32().map_err(err)?;
            let time = c.u64().map_err(err)?;
            let sid = parse_trailer(rec, id_sample_type);
            Ok(if kind == record::EXIT {
                Record::Exit { pid, ppid, tid, ptid, time, sid }
            } else {
                Record::Fork { pid, ppid, tid, ptid, time, sid }
            })
        }
        other => Ok(Record::Other { kind: other }),
    }
}

fn parse_sample(
    c: &mut Cursor<'_>,
    default_type: u64,
    sample_type_of: impl Fn(u64) -> Option<u64>,
) -> Result<RawSample, ParseError> {
    let mut s = RawSample::default();
    let mut st = default_type;
    if st & sample::IDENTIFIER != 0 {
        s.id = c.u64()?;
        st = sample_type_of(s.id).unwrap_or(default_type);
    }
    if st & sample::IP != 0 {
        s.ip = c.u64()?;
    }
    if st & sample::TID != 0 {
        s.pid = c.u32()?;
        s.tid = c.u32()?;
    }
    if st & sample::TIME != 0 {
        s.time = c.u64()?;
    }
    if st & sample::ADDR != 0 {
        s.addr = c.u64()?;
    }
    if st & sample::ID != 0 {
        s.id = c.u64()?;
    }
    if st & sample::STREAM_ID != 0 {
        c.u64()?;
    }
    if st & sample::CPU != 0 {
        s.cpu = c.u32()?;
        c.u32()?;
    }
    if st & sample::PERIOD != 0 {
        c.u64()?;
    }
    const UNSUPPORTED: u64 =
        sample::READ | sample::CALLCHAIN | sample::BRANCH_STACK | sample::REGS_USER | sample::STACK_USER;
    if st & UNSUPPORTED != 0 {
        return Err(ParseError {
            kind: record::SAMPLE,
            reason: format!("sample type {st:#x} not supported"),
        });
    }
    if st & sample::RAW != 0 {
        let n = c.u32()? as usize;
        s.raw = c.take(n)?.to_vec();
    }
    if st & sample::WEIGHT != 0 {
        s.weight = c.u64()?;
    }
    if st & sample::DATA_SRC != 0 {
        s.data_src = c.u64()?;
    }
    if st & sample::TRANSACTION != 0 {
        c.u64()?;
    }
    if st & sample::PHYS_ADDR != 0 {
        s.phys_addr = c.u64()?;
    }
    Ok(s)
}

/// Builders of raw records, as the kernel writes them (for tests of this crate and of users).
pub mod synth {
    use super::*;

    fn header(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let size = 8 + body.len();
        assert!(size.is_multiple_of(8) && size <= u16::MAX as usize, "record size {size}");
        let mut v = Vec::with_capacity(size);
        v.extend_from_slice(&kind.to_le_bytes());
        v.extend_from_slice(&misc.to_le_bytes());
        v.extend_from_slice(&(size as u16).to_le_bytes());
        v.extend_from_slice(body);
        v
    }

    /// The `sample_id_all` trailer for sample type TID|TIME|CPU|IDENTIFIER.
    pub fn trailer(pid: u32, tid: u32, time: u64, cpu: u32, id: u64) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&pid.to_le_bytes());
        v.extend_from_slice(&tid.to_le_bytes());
        v.extend_from_slice(&time.to_le_bytes());
        v.extend_from_slice(&cpu.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
        v
    }

    /// A sample of type IDENTIFIER|IP|TID|TIME|ADDR|CPU [|WEIGHT|DATA_SRC].
    #[allow(clippy::too_many_arguments)]
    pub fn sample(
        id: u64,
        ip: u64,
        pid: u32,
        tid: u32,
        time: u64,
        addr: u64,
        cpu: u32,
        weight_src: Option<(u64, u64)>,
    ) -> Vec<u8> {
        let mut b = Vec::new();
        for w in [id, ip] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&tid.to_le_bytes());
        b.extend_from_slice(&time.to_le_bytes());
        b.extend_from_slice(&addr.to_le_bytes());
        b.extend_from_slice(&cpu.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        if let Some((w, s)) = weight_src {
            b.extend_from_slice(&w.to_le_bytes());
            b.extend_from_slice(&s.to_le_bytes());
        }
        header(record::SAMPLE, 2, &b)
    }

    pub fn lost(id: u64, lost: u64, trailer: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&lost.to_le_bytes());
        b.extend_from_slice(trailer);
        header(record::LOST, 0, &b)
    }

    pub fn throttle(unthrottle: bool, time: u64, id: u64, trailer: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        for w in [time, id, id] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(trailer);
        header(if unthrottle { record::UNTHROTTLE } else { record::THROTTLE }, 0, &b)
    }

    pub fn mmap2(pid: u32, tid: u32, addr: u64, len: u64, filename: &str, trailer: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&tid.to_le_bytes());
        for w in [addr, len, 0] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&[0u8; 24]);
        b.extend_from_slice(&3u32.to_le_bytes()); // PROT_READ|PROT_WRITE
        b.extend_from_slice(&0x22u32.to_le_bytes()); // MAP_PRIVATE|MAP_ANONYMOUS
        let mut name = filename.as_bytes().to_vec();
        name.push(0);
        while !name.len().is_multiple_of(8) {
            name.push(0);
        }
        b.extend_from_slice(&name);
        b.extend_from_slice(trailer);
        header(record::MMAP2, 2, &b)
    }

    pub fn comm(pid: u32, tid: u32, comm: &str, exec: bool, trailer: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&tid.to_le_bytes());
        let mut name = comm.as_bytes().to_vec();
        name.push(0);
        while !name.len().is_multiple_of(8) {
            name.push(0);
        }
        b.extend_from_slice(&name);
        b.extend_from_slice(trailer);
        header(record::COMM, if exec { record::MISC_COMM_EXEC } else { 0 }, &b)
    }

    pub fn exit(pid: u32, tid: u32, time: u64, trailer: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        for w in [pid, pid, tid, tid] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&time.to_le_bytes());
        b.extend_from_slice(trailer);
        header(record::EXIT, 0, &b)
    }

    /// A ring data area of `size` bytes holding `records` from position `start` (records wrap
    /// around the end). Returns the area and the head position.
    pub fn ring(size: usize, start: u64, records: &[Vec<u8>]) -> (Vec<u8>, u64) {
        let mut data = vec![0xAAu8; size];
        let mut pos = start;
        for r in records {
            for (i, b) in r.iter().enumerate() {
                data[((pos + i as u64) as usize) & (size - 1)] = *b;
            }
            pos += r.len() as u64;
        }
        assert!(pos - start <= size as u64, "records overflow the ring");
        (data, pos)
    }
}

#[cfg(test)]
mod tests {
    use super::synth::*;
    use super::*;
    use crate::events::{BASE_SAMPLE_TYPE, MEMORY_SAMPLE_TYPE};
    use tierlab_core::PAGE_SIZE;

    const ID_TYPE: u64 = sample::IDENTIFIER | sample::TID | sample::TIME | sample::CPU;

    fn decode_all(data: &[u8], tail: u64, head: u64, types: &[(u64, u64)]) -> Vec<Record> {
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        let new_tail = for_each_record(data, tail, head, &mut scratch, |r| {
            out.push(
                parse_record(r, ID_TYPE, |id| types.iter().find(|(i, _)| *i == id).map(|(_, t)| *t)).unwrap(),
            )
        })
        .unwrap();
        assert_eq!(new_tail, head);
        out
    }

    #[test]
    fn samples_decode_in_order() {
        let recs: Vec<Vec<u8>> = (0..5)
            .map(|i| sample(7, 0x401000 + i, 42, 43, 1000 + i, 0x7f00_0000_0000 + i * PAGE_SIZE, 1, None))
            .collect();
        let (data, head) = ring(1024, 0, &recs);
        let out = decode_all(&data, 0, head, &[(7, BASE_SAMPLE_TYPE)]);
        assert_eq!(out.len(), 5);
        for (i, r) in out.iter().enumerate() {
            let Record::Sample(s) = r else { panic!("{r:?}") };
            assert_eq!((s.id, s.pid, s.tid, s.cpu), (7, 42, 43, 1));
            assert_eq!(s.time, 1000 + i as u64);
            assert_eq!(s.addr, 0x7f00_0000_0000 + i as u64 * PAGE_SIZE);
            assert_eq!(s.ip, 0x401000 + i as u64);
        }
    }

    #[test]
    fn records_wrapping_around_the_end() {
        // 72-byte samples in a 512-byte ring starting near the end: several straddle the end,
        // including one whose header itself is split.
        let size = 512;
        for start in [450u64, 506, 508, 512 + 476, (1 << 40) + 3 * 8] {
            let recs: Vec<Vec<u8>> =
                (0..4).map(|i| sample(1, 0, 1, 2, i, 0x1000 * (i + 1), 0, Some((i + 10, 0x42)))).collect();
            let (data, head) = ring(size, start, &recs);
            let out = decode_all(&data, start, head, &[(1, MEMORY_SAMPLE_TYPE)]);
            let addrs: Vec<u64> = out
                .iter()
                .map(|r| match r {
                    Record::Sample(s) => {
                        assert_eq!(s.data_src, 0x42);
                        s.addr
                    }
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(addrs, vec![0x1000, 0x2000, 0x3000, 0x4000], "start {start}");
        }
    }

    #[test]
    fn lost_throttle_mmap_comm_exit() {
        let t = trailer(10, 11, 5000, 1, 7);
        let recs = vec![
            lost(7, 123, &t),
            throttle(false, 6000, 7, &t),
            throttle(true, 7000, 7, &t),
            mmap2(10, 11, 0x7f12_3400_0000, 8 << 20, "//anon", &t),
            comm(10, 11, "prog", true, &t),
            exit(10, 12, 9000, &t),
        ];
        let (data, head) = ring(1024, 1000, &recs);
        let out = decode_all(&data, 1000, head, &[(7, BASE_SAMPLE_TYPE)]);
        let sid = SampleId { pid: 10, tid: 11, time: Some(5000), id: Some(7), cpu: Some(1) };
        assert_eq!(out[0], Record::Lost { id: 7, lost: 123, sid });
        assert_eq!(out[1], Record::Throttle { time: 6000, id: 7, sid });
        assert_eq!(out[2], Record::Unthrottle { time: 7000, id: 7, sid });
        match &out[3] {
            Record::Mmap { addr, len, filename, sid: s, prot, .. } => {
                assert_eq!((*addr, *len, filename.as_str(), *prot), (0x7f12_3400_0000, 8 << 20, "//anon", 3));
                assert_eq!(*s, sid);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(out[4], Record::Comm { pid: 10, tid: 11, comm: "prog".into(), exec: true, sid });
        assert_eq!(out[5], Record::Exit { pid: 10, ppid: 10, tid: 12, ptid: 12, time: 9000, sid });
    }

    #[test]
    fn corrupt_header_is_reported_not_followed() {
        let mut recs = vec![sample(1, 0, 1, 2, 3, 4, 0, None)];
        let mut bad = sample(1, 0, 1, 2, 3, 4, 0, None);
        bad[6] = 0;
        bad[7] = 0; // size 0: would loop forever if followed
        recs.push(bad);
        let (data, head) = ring(512, 0, &recs);
        let mut n = 0;
        let err = for_each_record(&data, 0, head, &mut Vec::new(), |_| n += 1).unwrap_err();
        assert_eq!(n, 1);
        assert_eq!(err.size, 0);
        assert_eq!(err.position, recs[0].len() as u64);
        assert!(err.to_string().contains("corrupt perf ring buffer"));
        // A size running past the head is also refused.
        let (data, head) = ring(512, 0, &[sample(1, 0, 1, 2, 3, 4, 0, None)]);
        assert!(for_each_record(&data, 0, head - 8, &mut Vec::new(), |_| {}).is_err());
    }

    #[test]
    fn empty_ring_and_unknown_records() {
        let (data, head) = ring(256, 64, &[]);
        assert_eq!(for_each_record(&data, 64, head, &mut Vec::new(), |_| panic!()).unwrap(), 64);
        let mut other = vec![0u8; 16];
        other[0] = 99;
        other[6] = 16;
        assert_eq!(parse_record(&other, ID_TYPE, |_| None).unwrap(), Record::Other { kind: 99 });
    }

    #[test]
    fn truncated_sample_is_an_error() {
        let mut s = sample(1, 0, 1, 2, 3, 4, 0, None);
        s.truncate(24);
        s[6] = 24;
        let e = parse_record(&s, ID_TYPE, |_| Some(BASE_SAMPLE_TYPE)).unwrap_err();
        assert_eq!(e.kind, record::SAMPLE);
        assert!(e.to_string().contains("truncated"), "{e}");
    }
}
