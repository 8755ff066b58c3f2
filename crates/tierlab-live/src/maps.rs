//! Mapping history: which ranges of the target's address space were mapped when.
//!
//! Two sources feed one [`Tracker`]:
//! - perf's `MMAP2` records (exact time, for every `mmap` and `brk` growth: `mmap_data`), and
//! - snapshots of `/proc/PID/maps` taken at every drain and at least every few milliseconds
//!   ("diffs"): perf reports no unmapping, so an unmapped range is found missing from the next
//!   snapshot. Its time is therefore an upper bound: the unmap happened between the previous
//!   snapshot and this one (the recorder stores the largest such gap in the metadata). A
//!   range that appears without an `MMAP2` record (`mremap` moves, `shmat`) is dated at the
//!   previous snapshot, a lower bound.
//!
//! Why this is sound for assigning samples: a sample's address is mapped at its time, so it
//! lies in a mapping that is live then. Every map is dated exactly or early, and a mapping
//! replaced by a new one over the same addresses ends at the new mapping's (exact) time, so a
//! sample is never assigned to a mapping that was not live, except when a range is unmapped and
//! mapped again by a call perf does not report (`mremap` onto it) within one snapshot interval.
//!
//! Mappings are kept when at least `min_len` bytes long (adjacent entries of `/proc/PID/maps`
//! with the same name count as one); unmaps are recorded for every part of a kept mapping.
//!
//! The history comes out as rows of the recording's `mappings` table: core's
//! [`MappingEvent`], with times in the caller's clock.

use std::collections::BTreeMap;

use tierlab_core::{MappingEvent, MappingEventKind};

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub name: String,
}

/// Parse `/proc/PID/maps` text. Lines that do not parse are skipped (the kernel's format is
/// fixed; a partial last line can only come from a racing exit).
pub fn parse_maps(text: &str) -> Vec<Vma> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut fields = line.splitn(6, ' ');
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else { continue };
        let Some((a, b)) = range.split_once('-') else { continue };
        let (Ok(start), Ok(end)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else { continue };
        let _offset = fields.next();
        let _dev = fields.next();
        let _inode = fields.next();
        let name = fields.next().unwrap_or("").trim_start().to_string();
        if end > start {
            out.push(Vma { start, end, perms: perms.to_string(), name: normalize_name(&name) });
        }
    }
    out
}

/// One spelling for anonymous memory: `[anon]` (perf says `//anon`, `/proc` says nothing).
pub fn normalize_name(name: &str) -> String {
    match name {
        "" | "//anon" => "[anon]".to_string(),
        n => n.to_string(),
    }
}

/// Adjacent entries with the same name merged (a file's segments, a stack and its guard).
pub fn coalesce(vmas: &[Vma]) -> Vec<(u64, u64, String)> {
    let mut out: Vec<(u64, u64, String)> = Vec::new();
    for v in vmas {
        match out.last_mut() {
            Some(last) if last.1 == v.start && last.2 == v.name => last.1 = v.end,
            _ => out.push((v.start, v.end, v.name.clone())),
        }
    }
    out
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Kept {
    end: u64,
    name: String,
    /// Dated exactly (an MMAP2 record) rather than found by a snapshot.
    exact: bool,
}

/// The mapping history builder. Feed it records and snapshots; take its rows with
/// [`Tracker::take_events`].
#[derive(Debug, Default)]
pub struct Tracker {
    min_len: u64,
    kept: BTreeMap<u64, Kept>,
    last_snapshot: Option<u64>,
    events: Vec<MappingEvent>,
    /// Largest interval between two snapshots (the bound on an unmap's time error).
    pub max_snapshot_gap_ns: u64,
    pub snapshots: u64,
}

impl Tracker {
    pub fn new(min_len: u64) -> Self {
        Tracker { min_len, ..Default::default() }
    }

    /// Events produced so far (drained).
    pub fn take_events(&mut self) -> Vec<MappingEvent> {
        std::mem::take(&mut self.events)
    }

    /// The kept mappings live now: (start, end, name).
    pub fn live(&self) -> Vec<(u64, u64, String)> {
        self.kept.iter().map(|(s, k)| (*s, k.end, k.name.clone())).collect()
    }

    /// Remove `[start, end)` from the kept set, recording an unmap for every part removed.
    fn cut(&mut self, time_ns: u64, start: u64, end: u64) {
        let overlapping: Vec<(u64, Kept)> = self
            .kept
            .range(..end)
            .filter(|(s, k)| **s < end && k.end > start)
            .map(|(s, k)| (*s, k.clone()))
            .collect();
        for (s, k) in overlapping {
            self.kept.remove(&s);
            let (lo, hi) = (s.max(start), k.end.min(end));
            self.events.push(MappingEvent {
                time_ns,
                event: MappingEventKind::Unmap,
                start: lo,
                length: hi - lo,
                name: k.name.clone(),
            });
            if s < lo {
                self.kept.insert(s, Kept { end: lo, ..k.clone() });
            }
            if hi < k.end {
                self.kept.insert(hi, Kept { end: k.end, ..k });
            }
        }
    }

    fn insert(&mut self, time_ns: u64, start: u64, end: u64, name: &str, exact: bool) {
        self.cut(time_ns, start, end);
        self.kept.insert(start, Kept { end, name: name.to_string(), exact });
        self.events.push(MappingEvent {
            time_ns,
            event: MappingEventKind::Map,
            start,
            length: end - start,
            name: name.to_string(),
        });
    }

    /// An `MMAP2` record: `[start, start+len)` was mapped at `time_ns` (exact).
    pub fn on_mmap(&mut self, time_ns: u64, start: u64, len: u64, name: &str) {
        let end = start.saturating_add(len);
        let name = normalize_name(name);
        if len < self.min_len {
            // Too small to keep, but it replaces whatever kept mapping it lands on.
            self.cut(time_ns, start, end);
            return;
        }
        if let Some(k) = self.kept.get_mut(&start) {
            if k.end == end && !k.exact {
                // Already found by a snapshot that raced with this record: now dated exactly.
                k.exact = true;
                return;
            }
        }
        // The kernel merges a new anonymous mapping with an adjacent one and reports the
        // merged range: when it holds kept mappings whole and the rest is large enough to keep,
        // the rest is the new mapping and the kept ones live on.
        let inside: Vec<(u64, u64)> = self
            .kept
            .range(..end)
            .filter(|(s, k)| **s < end && k.end > start)
            .map(|(s, k)| (*s, k.end))
            .collect();
        if !inside.is_empty() && inside.iter().all(|&(s, e)| s >= start && e <= end) {
            let mut gaps = Vec::new();
            let mut pos = start;
            for &(s, e) in &inside {
                if s > pos {
                    gaps.push((pos, s));
                }
                pos = pos.max(e);
            }
            if pos < end {
                gaps.push((pos, end));
            }
            if !gaps.is_empty() && gaps.iter().all(|&(a, b)| b - a >= self.min_len) {
                for (a, b) in gaps {
                    self.insert(time_ns, a, b, &name, true);
                }
                return;
            }
        }
        self.insert(time_ns, start, end, &name, true);
    }

    /// `exec` replaced the address space: every kept mapping ends.
    pub fn on_exec(&mut self, time_ns: u64) {
        self.cut(time_ns, 0, u64::MAX);
    }

    /// The mappings present when recording starts (attaching to a running process).
    pub fn initial(&mut self, time_ns: u64, vmas: &[Vma]) {
        for (s, e, name) in coalesce(vmas) {
            if e - s >= self.min_len {
                self.insert(time_ns, s, e, &name, true);
            }
        }
        self.last_snapshot = Some(time_ns);
    }

    /// A snapshot of `/proc/PID/maps` taken at `time_ns`, after every record up to then was
    /// fed: ranges gone are unmapped (dated now, an upper bound); ranges new and unreported
    /// are mapped (dated at the previous snapshot, a lower bound).
    pub fn on_snapshot(&mut self, time_ns: u64, vmas: &[Vma]) {
        let prev = self.last_snapshot.unwrap_or(time_ns);
        self.max_snapshot_gap_ns = self.max_snapshot_gap_ns.max(time_ns.saturating_sub(prev));
        self.snapshots += 1;
        let ranges = coalesce(vmas);
        // Coverage of the address space now.
        let mut covered: Vec<(u64, u64)> = Vec::new();
        for (s, e, _) in &ranges {
            match covered.last_mut() {
                Some(last) if last.1 >= *s => last.1 = last.1.max(*e),
                _ => covered.push((*s, *e)),
            }
        }
        // 1. Parts of kept mappings no longer covered were unmapped.
        let kept: Vec<(u64, u64)> = self.kept.iter().map(|(s, k)| (*s, k.end)).collect();
        for (ks, ke) in kept {
            let mut pos = ks;
            for &(cs, ce) in covered.iter().filter(|(cs, ce)| *ce > ks && *cs < ke) {
                if cs > pos {
                    self.cut(time_ns, pos, cs.min(ke));
                }
                pos = pos.max(ce);
            }
            if pos < ke {
                self.cut(time_ns, pos, ke);
            }
        }
        // 2. Large unreported ranges: the parts of a range that no kept mapping covers.
        for (s, e, name) in ranges {
            if e - s < self.min_len {
                continue;
            }
            let mut gaps = Vec::new();
            let mut pos = s;
            for (ks, k) in self.kept.range(..e) {
                if k.end > pos && *ks < e {
                    if *ks > pos {
                        gaps.push((pos, *ks));
                    }
                    pos = pos.max(k.end);
                }
            }
            if pos < e {
                gaps.push((pos, e));
            }
            for (gs, ge) in gaps {
                if ge - gs >= self.min_len {
                    self.insert(prev, gs, ge, &name, false);
                }
            }
        }
        self.last_snapshot = Some(time_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierlab_core::PAGE_SIZE;

    const MIB: u64 = 1 << 20;

    fn vma(start: u64, end: u64, name: &str) -> Vma {
        Vma { start, end, perms: "rw-p".into(), name: normalize_name(name) }
    }

    fn ev(t: u64, map: bool, start: u64, length: u64, name: &str) -> MappingEvent {
        let event = if map { MappingEventKind::Map } else { MappingEventKind::Unmap };
        MappingEvent { time_ns: t, event, start, length, name: name.into() }
    }

    #[test]
    fn parses_proc_maps() {
        let text = "55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1234    /usr/bin/my prog\n\
                    7f0000000000-7f0000800000 rw-p 00000000 00:00 0 \n\
                    7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n\
                    garbage line\n";
        let v = parse_maps(text);
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].name, "/usr/bin/my prog");
        assert_eq!(v[0].perms, "r--p");
        assert_eq!(
            (v[1].start, v[1].end, v[1].name.as_str()),
            (0x7f00_0000_0000, 0x7f00_0080_0000, "[anon]")
        );
        assert_eq!(v[2].name, "[stack]");
    }

    #[test]
    fn small_mappings_are_filtered() {
        let mut t = Tracker::new(4 * MIB);
        t.on_mmap(10, 0x1000_0000, MIB, "//anon");
        t.on_mmap(11, 0x2000_0000, 8 * MIB, "//anon");
        assert_eq!(t.take_events(), vec![ev(11, true, 0x2000_0000, 8 * MIB, "[anon]")]);
    }

    #[test]
    fn snapshot_finds_unmaps_and_partial_unmaps() {
        let mut t = Tracker::new(4 * MIB);
        t.initial(0, &[]);
        t.on_mmap(10, 0x1000_0000, 8 * MIB, "//anon");
        t.on_mmap(20, 0x2000_0000, 16 * MIB, "//anon");
        t.take_events();
        // The first is gone; the second lost its middle 4 MiB.
        t.on_snapshot(
            50,
            &[
                vma(0x2000_0000, 0x2000_0000 + 6 * MIB, ""),
                vma(0x2000_0000 + 10 * MIB, 0x2000_0000 + 16 * MIB, ""),
            ],
        );
        assert_eq!(
            t.take_events(),
            vec![
                ev(50, false, 0x1000_0000, 8 * MIB, "[anon]"),
                ev(50, false, 0x2000_0000 + 6 * MIB, 4 * MIB, "[anon]")
            ]
        );
        assert_eq!(t.live().len(), 2);
        assert_eq!(t.max_snapshot_gap_ns, 50);
        // Nothing changes: no events.
        t.on_snapshot(
            60,
            &[
                vma(0x2000_0000, 0x2000_0000 + 6 * MIB, ""),
                vma(0x2000_0000 + 10 * MIB, 0x2000_0000 + 16 * MIB, ""),
            ],
        );
        assert!(t.take_events().is_empty());
    }

    #[test]
    fn new_mapping_over_a_kept_one_replaces_it_exactly() {
        let mut t = Tracker::new(4 * MIB);
        t.on_mmap(10, 0x1000_0000, 8 * MIB, "//anon");
        t.on_mmap(30, 0x1000_0000, 8 * MIB, "/data/file");
        assert_eq!(
            t.take_events(),
            vec![
                ev(10, true, 0x1000_0000, 8 * MIB, "[anon]"),
                ev(30, false, 0x1000_0000, 8 * MIB, "[anon]"),
                ev(30, true, 0x1000_0000, 8 * MIB, "/data/file"),
            ]
        );
        // A small mapping punched into a kept one unmaps that part.
        t.on_mmap(40, 0x1000_0000 + MIB, PAGE_SIZE, "//anon");
        assert_eq!(t.take_events(), vec![ev(40, false, 0x1000_0000 + MIB, PAGE_SIZE, "/data/file")]);
        assert_eq!(t.live().len(), 2);
    }

    #[test]
    fn unreported_growth_is_dated_at_the_previous_snapshot() {
        let mut t = Tracker::new(4 * MIB);
        t.initial(5, &[vma(0x500_0000, 0x500_0000 + MIB, "[heap]")]);
        assert!(t.take_events().is_empty());
        t.on_snapshot(40, &[vma(0x500_0000, 0x500_0000 + 6 * MIB, "[heap]")]);
        assert_eq!(t.take_events(), vec![ev(5, true, 0x500_0000, 6 * MIB, "[heap]")]);
        // The MMAP2 record of the same range arriving late is not a new mapping.
        t.on_mmap(41, 0x500_0000, 6 * MIB, "[heap]");
        assert!(t.take_events().is_empty());
        // But a second MMAP2 of the same range is (munmap + mmap between snapshots).
        t.on_mmap(42, 0x500_0000, 6 * MIB, "[heap]");
        assert_eq!(t.take_events().len(), 2);
    }

    #[test]
    fn merged_neighbours_stay_separate_mappings() {
        let mut t = Tracker::new(4 * MIB);
        t.on_mmap(10, 0x1000_0000, 48 * MIB, "//anon");
        // A new 8 MiB buffer right below it; the kernel reports the merged 56 MiB area.
        t.on_mmap(20, 0x1000_0000 - 8 * MIB, 56 * MIB, "//anon");
        assert_eq!(
            t.take_events(),
            vec![
                ev(10, true, 0x1000_0000, 48 * MIB, "[anon]"),
                ev(20, true, 0x1000_0000 - 8 * MIB, 8 * MIB, "[anon]")
            ]
        );
        // A small extension (heap growth) replaces the kept mapping by the grown one.
        t.on_mmap(30, 0x1000_0000 - 8 * MIB, 56 * MIB + 65536, "//anon");
        let e = t.take_events();
        assert_eq!(e.last().unwrap(), &ev(30, true, 0x1000_0000 - 8 * MIB, 56 * MIB + 65536, "[anon]"));
        assert_eq!(t.live().len(), 1);
    }

    #[test]
    fn small_neighbours_do_not_redate_a_kept_mapping() {
        let mut t = Tracker::new(4 * MIB);
        t.initial(0, &[]);
        t.on_mmap(10, 0x1000_0000, 8 * MIB, "//anon");
        t.take_events();
        // The kernel shows it merged with a small anonymous neighbour.
        t.on_snapshot(20, &[vma(0x1000_0000 - 65536, 0x1000_0000 + 8 * MIB, "")]);
        assert!(t.take_events().is_empty());
        // A large unreported neighbour is a mapping of its own.
        t.on_snapshot(30, &[vma(0x1000_0000, 0x1000_0000 + 16 * MIB, "")]);
        assert_eq!(t.take_events(), vec![ev(20, true, 0x1000_0000 + 8 * MIB, 8 * MIB, "[anon]")]);
    }

    #[test]
    fn coalesced_segments_count_together_and_exec_ends_everything() {
        let mut t = Tracker::new(4 * MIB);
        let lib = [
            vma(0x7000_0000, 0x7000_0000 + 2 * MIB, "/lib.so"),
            vma(0x7000_0000 + 2 * MIB, 0x7000_0000 + 5 * MIB, "/lib.so"),
        ];
        t.initial(0, &lib);
        assert_eq!(t.take_events(), vec![ev(0, true, 0x7000_0000, 5 * MIB, "/lib.so")]);
        t.on_exec(99);
        assert_eq!(t.take_events(), vec![ev(99, false, 0x7000_0000, 5 * MIB, "/lib.so")]);
        assert!(t.live().is_empty());
    }
}
