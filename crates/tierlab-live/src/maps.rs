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
//! with the same name count as one; the default keeps every mapping); unmaps are recorded for
//! every part of a kept mapping.
//!
//! One row per mapping: a mapping that **grows** is reported as one `map` event of its new,
//! whole range, with no `unmap` before it (readers extend the live mapping of the same name it
//! covers or touches, see `python/tierlab/view/history.py`). Growth is a named mapping's range
//! extended ([heap] by `brk`, [stack], a file's next segment), or an anonymous mapping merged by
//! the kernel with a neighbour smaller than [`GROW_MAX`]; a larger anonymous neighbour is a new
//! mapping of its own. A mapping replaced (a new map over it) is unmapped first, then mapped.
//!
//! Page sizes: snapshots may read `/proc/PID/smaps` instead of `maps`
//! ([`parse_smaps`]); [`Tracker::on_page_sizes`] turns each mapping's `KernelPageSize` and
//! huge-page bytes (`AnonHugePages` + `ShmemPmdMapped` + `FilePmdMapped`) into
//! [`PageSizes`] observations, so a reader can tell which samples touched huge pages.
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

/// A new anonymous range merged with a kept anonymous neighbour is growth of that neighbour
/// when smaller than this (a heap arena growing), a mapping of its own otherwise.
pub const GROW_MAX: u64 = 4 << 20;

/// Page sizes seen in a mapping (from `/proc/PID/smaps`): `kernel_page_size` (hugetlbfs
/// mappings have 2 MiB or 1 GiB) and the bytes of it mapped by huge pages (THP).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageSizes {
    pub time_ns: u64,
    pub start: u64,
    pub end: u64,
    pub name: String,
    pub kernel_page_size: u64,
    pub huge_bytes: u64,
}

/// One entry of `/proc/PID/smaps`: the mapping and its page-size fields (bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmapsEntry {
    pub vma: Vma,
    pub kernel_page_size: u64,
    pub huge_bytes: u64,
}

fn parse_maps_line(line: &str) -> Option<Vma> {
    let mut fields = line.splitn(6, ' ');
    let (Some(range), Some(perms)) = (fields.next(), fields.next()) else { return None };
    let (a, b) = range.split_once('-')?;
    let (Ok(start), Ok(end)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else { return None };
    if perms.len() != 4 {
        return None;
    }
    let _offset = fields.next()?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let name = fields.next().unwrap_or("").trim_start().to_string();
    (end > start).then(|| Vma { start, end, perms: perms.to_string(), name: normalize_name(&name) })
}

/// Parse `/proc/PID/smaps` text: every mapping (as [`parse_maps`] would) with its
/// `KernelPageSize` and huge-page bytes. Lines that do not parse are skipped.
pub fn parse_smaps(text: &str) -> Vec<SmapsEntry> {
    let mut out: Vec<SmapsEntry> = Vec::new();
    for line in text.lines() {
        if let Some(vma) = parse_maps_line(line) {
            out.push(SmapsEntry { vma, kernel_page_size: tierlab_core::PAGE_SIZE, huge_bytes: 0 });
            continue;
        }
        let Some(last) = out.last_mut() else { continue };
        let Some((key, value)) = line.split_once(':') else { continue };
        let kib = value.trim().strip_suffix("kB").and_then(|v| v.trim().parse::<u64>().ok());
        let Some(bytes) = kib.map(|k| k.saturating_mul(1024)) else { continue };
        match key {
            "KernelPageSize" => last.kernel_page_size = bytes,
            "AnonHugePages" | "ShmemPmdMapped" | "FilePmdMapped" => {
                last.huge_bytes = last.huge_bytes.saturating_add(bytes)
            }
            _ => {}
        }
    }
    out
}

/// Parse `/proc/PID/maps` text. Lines that do not parse are skipped (the kernel's format is
/// fixed; a partial last line can only come from a racing exit).
pub fn parse_maps(text: &str) -> Vec<Vma> {
    text.lines().filter_map(parse_maps_line).collect()
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
    /// When it was mapped, or last grew.
    since: u64,
}

/// The mapping history builder. Feed it records and snapshots; take its rows with
/// [`Tracker::take_events`].
#[derive(Debug, Default)]
pub struct Tracker {
    min_len: u64,
    kept: BTreeMap<u64, Kept>,
    last_snapshot: Option<u64>,
    events: Vec<MappingEvent>,
    /// Page sizes reported so far per range: (kernel page size, huge bytes).
    page_sizes_seen: BTreeMap<(u64, u64), (u64, u64)>,
    page_size_events: Vec<PageSizes>,
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

    /// Page-size observations produced so far (drained).
    pub fn take_page_sizes(&mut self) -> Vec<PageSizes> {
        std::mem::take(&mut self.page_size_events)
    }

    /// A `/proc/PID/smaps` reading: every mapping with larger pages than 4 KiB (hugetlbfs) or
    /// huge-page bytes (THP) is reported, once per range and again when it has more.
    pub fn on_page_sizes(&mut self, time_ns: u64, entries: &[SmapsEntry]) {
        for e in entries {
            if e.kernel_page_size <= tierlab_core::PAGE_SIZE && e.huge_bytes == 0 {
                continue;
            }
            let key = (e.vma.start, e.vma.end);
            let seen = self.page_sizes_seen.get(&key).copied().unwrap_or((0, 0));
            if e.kernel_page_size <= seen.0 && e.huge_bytes <= seen.1 {
                continue;
            }
            let now = (seen.0.max(e.kernel_page_size), seen.1.max(e.huge_bytes));
            self.page_sizes_seen.insert(key, now);
            self.page_size_events.push(PageSizes {
                time_ns,
                start: e.vma.start,
                end: e.vma.end,
                name: e.vma.name.clone(),
                kernel_page_size: now.0,
                huge_bytes: now.1,
            });
        }
    }

    /// Kept mappings overlapping `[start, end)`, or touching it when `touching`.
    fn near(&self, start: u64, end: u64, touching: bool) -> Vec<(u64, Kept)> {
        self.kept
            .range(..end.saturating_add(u64::from(touching)))
            .filter(|(s, k)| if touching { k.end >= start } else { k.end > start && **s < end })
            .map(|(s, k)| (*s, k.clone()))
            .collect()
    }

    /// The kept mappings `near` and `[start, end)` become one mapping: their union, reported
    /// as one `map` event of the whole range (growth: no unmap).
    fn grow(&mut self, time_ns: u64, start: u64, end: u64, near: &[(u64, Kept)], name: &str, exact: bool) {
        let lo = near.iter().map(|(s, _)| *s).min().unwrap_or(start).min(start);
        let hi = near.iter().map(|(_, k)| k.end).max().unwrap_or(end).max(end);
        if let [(s, k)] = near {
            if *s == lo && k.end == hi {
                if *s == start && k.end == end {
                    // The same range mapped again (munmap + mmap between two snapshots).
                    self.insert(time_ns, start, end, name, exact);
                }
                // Else a range inside a mapping of its own name (mprotect, a file's segment
                // in its reservation): the same mapping, nothing new.
                return;
            }
        }
        // Dated no earlier than the mappings it extends (a snapshot dates growth early).
        let time_ns = near.iter().map(|(_, k)| k.since).max().unwrap_or(0).max(time_ns);
        for (s, _) in near {
            self.kept.remove(s);
        }
        self.kept.insert(lo, Kept { end: hi, name: name.to_string(), exact, since: time_ns });
        self.events.push(MappingEvent {
            time_ns,
            event: MappingEventKind::Map,
            start: lo,
            length: hi - lo,
            name: name.to_string(),
        });
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
        self.kept.insert(start, Kept { end, name: name.to_string(), exact, since: time_ns });
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
        if end <= start {
            return; // empty, or past the end of the address space: not a mapping
        }
        let mut name = normalize_name(name);
        // perf may name the brk area `//anon` (its first extension, or when it grows): the
        // heap starting at the same address is one mapping, named [heap].
        if name == "[anon]" && self.kept.get(&start).is_some_and(|k| k.name == "[heap]") {
            name = "[heap]".to_string();
        }
        if name == "[heap]" {
            if let Some(k) = self.kept.get_mut(&start).filter(|k| k.name == "[anon]") {
                k.name = name.clone();
            }
        }
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
        // A named mapping growing, or a segment of a file next to the file's others: one
        // mapping, when everything it overlaps or touches has its name.
        if name != "[anon]" {
            let near = self.near(start, end, true);
            if !near.is_empty() && near.iter().all(|(_, k)| k.name == name) {
                self.grow(time_ns, start, end, &near, &name, true);
                return;
            }
        }
        // Inside one kept anonymous mapping (mprotect of part of it): the same mapping.
        let inside: Vec<(u64, Kept)> = self.near(start, end, false);
        if let [(s, k)] = inside.as_slice() {
            if k.name == name && *s <= start && end <= k.end && (*s, k.end) != (start, end) {
                return;
            }
        }
        // The kernel merges a new anonymous mapping with an adjacent one and reports the
        // merged range: when it holds kept mappings whole, the rest is a new mapping if large
        // (three `bytearray(8 << 20)` are three mappings), else growth of the kept one.
        if !inside.is_empty() && inside.iter().all(|(s, k)| *s >= start && k.end <= end) {
            let mut gaps = Vec::new();
            let mut pos = start;
            for (s, k) in &inside {
                if *s > pos {
                    gaps.push((pos, *s));
                }
                pos = pos.max(k.end);
            }
            if pos < end {
                gaps.push((pos, end));
            }
            let large = self.min_len.max(GROW_MAX);
            if !gaps.is_empty() && gaps.iter().all(|&(a, b)| b - a >= large) {
                for (a, b) in gaps {
                    self.insert(time_ns, a, b, &name, true);
                }
                return;
            }
            if inside.iter().all(|(_, k)| k.name == name) {
                // Each small rest grows the kept mapping it touches (the one below it, else
                // the one above): the others stay mappings of their own.
                for (a, b) in gaps {
                    let next = self.near(a, b, true);
                    let below = next.iter().find(|(_, k)| k.end == a);
                    let above = next.iter().find(|(s, _)| *s == b);
                    if let Some(n) = below.or(above).cloned() {
                        self.grow(time_ns, a, b, &[n], &name, true);
                    }
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
        // 2. Unreported ranges: the parts of a range that no kept mapping covers. A part
        // touching a kept mapping of the same name is that mapping grown (a stack); else a
        // part large enough to keep is a new mapping.
        for (s, e, name) in ranges {
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
                let near = self.near(gs, ge, true);
                let grows = !near.is_empty()
                    && near.iter().all(|(_, k)| k.name == name)
                    && (name != "[anon]" || ge - gs < self.min_len.max(GROW_MAX));
                if grows {
                    self.grow(prev, gs, ge, &near, &name, false);
                } else if ge - gs >= self.min_len {
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
        // A small extension (heap growth) grows the mapping it touches, in one event.
        t.on_mmap(30, 0x1000_0000 - 8 * MIB, 56 * MIB + 65536, "//anon");
        assert_eq!(t.take_events(), vec![ev(30, true, 0x1000_0000, 48 * MIB + 65536, "[anon]")]);
        assert_eq!(t.live().len(), 2);
    }

    #[test]
    fn small_neighbours_grow_a_kept_mapping_without_redating_it() {
        let mut t = Tracker::new(4 * MIB);
        t.initial(0, &[]);
        t.on_mmap(10, 0x1000_0000, 8 * MIB, "//anon");
        t.take_events();
        // The kernel shows it merged with a small anonymous neighbour: the same mapping grown,
        // dated no earlier than its map.
        t.on_snapshot(20, &[vma(0x1000_0000 - 65536, 0x1000_0000 + 8 * MIB, "")]);
        assert_eq!(t.take_events(), vec![ev(10, true, 0x1000_0000 - 65536, 8 * MIB + 65536, "[anon]")]);
        assert_eq!(t.live().len(), 1);
        // A large unreported neighbour is a mapping of its own; the small part gone is unmapped.
        t.on_snapshot(30, &[vma(0x1000_0000, 0x1000_0000 + 16 * MIB, "")]);
        assert_eq!(
            t.take_events(),
            vec![
                ev(30, false, 0x1000_0000 - 65536, 65536, "[anon]"),
                ev(20, true, 0x1000_0000 + 8 * MIB, 8 * MIB, "[anon]")
            ]
        );
    }

    #[test]
    fn one_mapping_per_growing_heap_stack_and_file() {
        let mut t = Tracker::new(0);
        t.initial(0, &[]);
        // brk growth: MMAP2 of the whole heap each time: one event per growth, no unmap.
        t.on_mmap(10, 0x500_0000, 0x21000, "[heap]");
        t.on_mmap(20, 0x500_0000, 0x42000, "[heap]");
        assert_eq!(
            t.take_events(),
            vec![ev(10, true, 0x500_0000, 0x21000, "[heap]"), ev(20, true, 0x500_0000, 0x42000, "[heap]")]
        );
        // perf names the first extension of a heap `//anon`, the next ones [heap]: one mapping.
        t.on_mmap(21, 0x900_0000, 0x10000, "//anon");
        t.on_mmap(22, 0x900_0000, 0x20000, "[heap]");
        t.on_mmap(23, 0x900_0000, 0x30000, "//anon");
        assert_eq!(
            t.take_events(),
            vec![
                ev(21, true, 0x900_0000, 0x10000, "[anon]"),
                ev(22, true, 0x900_0000, 0x20000, "[heap]"),
                ev(23, true, 0x900_0000, 0x30000, "[heap]")
            ]
        );
        // A file's segments, the first a reservation of the whole: one mapping.
        t.on_mmap(30, 0x7000_0000, 0x35000, "/lib/ld.so");
        t.on_mmap(31, 0x7000_1000, 0x26000, "/lib/ld.so");
        t.on_mmap(32, 0x7003_5000, 0x2000, "/lib/ld.so");
        assert_eq!(
            t.take_events(),
            vec![
                ev(30, true, 0x7000_0000, 0x35000, "/lib/ld.so"),
                ev(32, true, 0x7000_0000, 0x37000, "/lib/ld.so")
            ]
        );
        // The stack grows down, seen by a snapshot.
        t.on_mmap(40, 0x7ff0_0000, 0x21000, "[stack]");
        t.take_events();
        let now = [
            vma(0x500_0000, 0x504_2000, "[heap]"),
            vma(0x900_0000, 0x903_0000, "[heap]"),
            vma(0x7000_0000, 0x7003_7000, "/lib/ld.so"),
            vma(0x7fef_0000, 0x7ff2_1000, "[stack]"),
        ];
        t.on_snapshot(50, &now);
        assert_eq!(t.take_events(), vec![ev(40, true, 0x7fef_0000, 0x31000, "[stack]")]);
        assert_eq!(t.live().len(), 4);
        // mprotect of part of an anonymous mapping does not make a new one.
        t.on_mmap(60, 0x1000_0000, 64 * MIB, "//anon");
        t.on_mmap(61, 0x1000_0000, 0x21000, "//anon");
        assert_eq!(t.take_events(), vec![ev(60, true, 0x1000_0000, 64 * MIB, "[anon]")]);
    }

    #[test]
    fn smaps_page_sizes() {
        let text = "7f0000000000-7f0020000000 rw-p 00000000 00:00 0 \n\
                    Size:             524288 kB\n\
                    KernelPageSize:        4 kB\n\
                    AnonHugePages:    522240 kB\n\
                    7f1000000000-7f1000400000 rw-s 00000000 00:0f 77   /dev/hugepages/x\n\
                    KernelPageSize:     2048 kB\n\
                    AnonHugePages:         0 kB\n\
                    7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0    [stack]\n\
                    KernelPageSize:        4 kB\n\
                    AnonHugePages:         0 kB\n";
        let e = parse_smaps(text);
        assert_eq!(e.len(), 3);
        assert_eq!((e[0].kernel_page_size, e[0].huge_bytes), (4096, 522240 * 1024));
        assert_eq!((e[1].kernel_page_size, e[1].huge_bytes), (2 * MIB, 0));
        assert_eq!(e[2].vma.name, "[stack]");
        let mut t = Tracker::new(0);
        t.on_page_sizes(5, &e);
        let p = t.take_page_sizes();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].start, p[0].huge_bytes), (0x7f00_0000_0000, 522240 * 1024));
        // Reported again only when it grows.
        t.on_page_sizes(6, &e);
        assert!(t.take_page_sizes().is_empty());
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
