//! Paging-structure caches (PSCs): per-core caches of upper page-table entries that let a
//! page walk skip the levels above the deepest cached entry (Intel SDM Vol. 3A, 4.10.3;
//! `../shared/reference/page-walk-caches.md`).
//!
//! Three caches, tagged by the linear-address bits of the entry they hold:
//! - the **PML4 cache** (PGD entries; tag = VA bits 47:39): a hit starts the walk at the PUD;
//! - the **PDPTE cache** (PUD entries; bits 47:30): a hit starts it at the PMD;
//! - the **PDE cache** (PMD entries; bits 47:21): a hit starts it at the PTE.
//!
//! The walker uses the deepest hit (PDE, then PDPTE, then PML4) and reads only the levels
//! below it; it sets the Accessed bit of exactly the entries it reads. The rules kept here
//! and by the walker ([`crate::hw::pagetable::PageTables::walk`]), each from SDM 4.10.3:
//! - an entry is cached only when it is present, references another paging structure (no
//!   entry for a PUD that maps a 1 GiB page or a PMD that maps a 2 MiB page), and its
//!   Accessed flag is 1 in memory (the walker sets it before caching: it is the entry it
//!   just read);
//! - a walk that starts from a cached entry does not read, and so does not set the Accessed
//!   flag of, the entries above it (a later clear of those flags goes unnoticed until the
//!   cached entry is gone: SDM 4.8 and 4.10.4.3);
//! - INVLPG invalidates **every** PSC entry (of the current PCID, the only one modelled),
//!   whatever its address; so does a full flush (a CR3 write); a shootdown's handler does
//!   one or the other on each target (SDM 4.10.4.1);
//! - a page fault invalidates the PSC entries that would be used for the faulting address
//!   (and its TLB entry) (SDM 4.10.4.1);
//! - replacement within a cache is LRU (an assumption: the SDM gives no policy).
//!
//! Sizes are parameters (`machine.psc`, set per CPU preset by `machine.cpu`): no vendor
//! publishes them for current server cores, so the defaults are the placeholders of
//! `page-walk-caches.md` (PML4 2, PDPTE 4, PDE 32 entries, fully associative), labelled as
//! such in `docs/engine.md`. A PSC is consulted only on a TLB miss, inside the walk.

use tierlab_core::param::params;
use tierlab_core::{HUGE_1G_SHIFT, HUGE_SHIFT};

use super::pagetable::{Level, LEVEL_SHIFT};

/// Entries of one paging-structure cache at most (slot numbers are `u16`).
const MAX_ENTRIES: usize = 1 << 12; // not a page size

/// Geometry of one core's paging-structure caches (`[machine.psc]`). A CPU preset
/// (`machine.cpu`) sets every size the scenario does not give.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct PscConfig {
    /// Whether the walker uses the caches at all (false: every walk reads from the PGD, the
    /// model before paging-structure caches).
    #[param(default = true)]
    pub enabled: bool,
    /// Entries of the PML4 (PGD-entry) cache; 0 = no such cache.
    #[param(
        default = 2,
        range = "[0, 65536]",
        unit = "entries",
        assumed = "placeholder of reference/page-walk-caches.md (no published size; PML4 2, PDPTE 4, PDE 32 entries, fully associative)"
    )]
    pub pml4_entries: usize,
    /// Ways of the PML4 cache (`= entries`: fully associative).
    #[param(
        default = 2,
        range = "[1, 256]",
        unit = "ways",
        assumed = "placeholder of reference/page-walk-caches.md (no published size; PML4 2, PDPTE 4, PDE 32 entries, fully associative)"
    )]
    pub pml4_ways: usize,
    /// Entries of the PDPTE (PUD-entry) cache; 0 = none.
    #[param(
        default = 4,
        range = "[0, 65536]",
        unit = "entries",
        assumed = "placeholder of reference/page-walk-caches.md (no published size; PML4 2, PDPTE 4, PDE 32 entries, fully associative)"
    )]
    pub pdpte_entries: usize,
    /// Ways of the PDPTE cache.
    #[param(
        default = 4,
        range = "[1, 256]",
        unit = "ways",
        assumed = "placeholder of reference/page-walk-caches.md (no published size; PML4 2, PDPTE 4, PDE 32 entries, fully associative)"
    )]
    pub pdpte_ways: usize,
    /// Entries of the PDE (PMD-entry) cache; 0 = none.
    #[param(
        default = 32,
        range = "[0, 65536]",
        unit = "entries",
        assumed = "placeholder of reference/page-walk-caches.md (no published size; PML4 2, PDPTE 4, PDE 32 entries, fully associative)"
    )]
    pub pde_entries: usize,
    /// Ways of the PDE cache.
    #[param(
        default = 32,
        range = "[1, 256]",
        unit = "ways",
        assumed = "placeholder of reference/page-walk-caches.md (no published size; PML4 2, PDPTE 4, PDE 32 entries, fully associative)"
    )]
    pub pde_ways: usize,
}

impl PscConfig {
    /// Check the geometry; returns (field, problem) on error.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (field, e, w) in [
            ("machine.psc.pml4_entries", self.pml4_entries, self.pml4_ways),
            ("machine.psc.pdpte_entries", self.pdpte_entries, self.pdpte_ways),
            ("machine.psc.pde_entries", self.pde_entries, self.pde_ways),
        ] {
            if e == 0 {
                continue;
            }
            if w == 0 || e % w != 0 || w > 64 || e > MAX_ENTRIES {
                return Err((
                    field,
                    format!("{e} entries (at most {MAX_ENTRIES}) must be a positive multiple of the ways ({w}, at most 64)"),
                ));
            }
        }
        Ok(())
    }
}

/// Counters of one core's paging-structure caches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PscCounters {
    /// Walks that started from a cached entry, by the cache that held it: PML4, PDPTE, PDE.
    pub hits: [u64; 3],
    /// Walks that found no cached entry (they read the PGD).
    pub misses: u64,
    /// Invalidations of every entry (INVLPG, full flushes) that found something cached.
    pub flushes: u64,
    /// Page faults that invalidated the entries of their address.
    pub fault_invalidations: u64,
}

/// Index of each cache in [`PscCounters::hits`].
const PML4: usize = 0;
const PDPTE: usize = 1;
const PDE: usize = 2;

/// No tag equals this (tags are linear-address bits 47:21 at most).
const EMPTY: u64 = u64::MAX;

/// Slot and set numbers are below this mask's value plus one ([`MAX_ENTRIES`]).
const SLOT: usize = MAX_ENTRIES - 1;

/// Buckets of the lookup filter (a power of two).
const BUCKETS: usize = 1024;

/// A small set-associative array of tags with true LRU within each set, for the
/// paging-structure caches, built for a walk's lookups to cost O(1) even for a 32-way fully
/// associative PDE cache: each set keeps its ways in a circular doubly linked recency list
/// (most recent at the head, empty ways at the tail, the tail being the head's predecessor),
/// and a filter counts the cached tags per bucket (`tag % BUCKETS`) with a hint of the last
/// slot filled or hit in each bucket, so that a miss in an empty bucket and a hit on the
/// hinted slot need no scan. The list being circular, an insert (the tail way becomes the
/// most recent) only moves the head back one way, and so does a hit on the tail way.
#[derive(Clone, Debug)]
struct Lru {
    sets: usize,
    ways: usize,
    /// `sets == 1`: fully associative (the default geometry), the insert a walk's fill
    /// takes after one byte test.
    fa: bool,
    /// The arrays, in one allocation (a walk's lookups and inserts load one base address).
    s: Box<LruStore>,
    /// A tag at the head (most recent) of its set, or [`EMPTY`]: the last tag looked up
    /// with a hit or inserted. A lookup of it hits without changing anything (a walk in
    /// the same gigabyte as the previous one hits the PDPTE cache's most recent entry).
    mru: u64,
}

/// The arrays of an [`Lru`]. Those indexed by slot or set have the fixed size
/// [`MAX_ENTRIES`] and are indexed modulo it (slots and sets are below it): the walk's
/// accesses need no bounds checks.
#[derive(Clone, Debug)]
struct LruStore {
    /// Tags by slot (`set * ways + way`; the first `sets * ways` are used).
    tags: [u64; MAX_ENTRIES],
    /// Previous and next way of each slot in its set's circular recency list.
    links: [[u8; 2]; MAX_ENTRIES],
    /// Head (most recent) way of each set; its predecessor is the tail (least recent).
    heads: [u8; MAX_ENTRIES],
    /// Cached tags per bucket (fixed size: indexing by `tag % BUCKETS` needs no bounds
    /// check) and the hint of each bucket.
    count: [u16; BUCKETS],
    hint: [u16; BUCKETS],
}

impl Lru {
    fn new(entries: usize, ways: usize) -> Self {
        let sets = if entries == 0 { 0 } else { entries / ways };
        assert!(sets * ways <= MAX_ENTRIES, "validated PSC geometry");
        let mut l = Lru {
            sets,
            ways,
            fa: sets == 1,
            s: Box::new(LruStore {
                tags: [EMPTY; MAX_ENTRIES],
                links: [[0; 2]; MAX_ENTRIES],
                heads: [0; MAX_ENTRIES],
                count: [0; BUCKETS],
                hint: [0; BUCKETS],
            }),
            mru: EMPTY,
        };
        l.flush();
        l
    }

    fn is_disabled(&self) -> bool {
        self.sets == 0
    }

    #[inline(always)]
    fn set_of(&self, tag: u64) -> usize {
        if self.sets == 1 {
            0
        } else {
            tag as usize % self.sets
        }
    }

    /// Set and way of slot `i` (a fully associative cache, the usual case, needs no
    /// division).
    #[inline(always)]
    fn set_way(&self, i: usize) -> (usize, usize) {
        if self.sets == 1 {
            (0, i)
        } else {
            (i / self.ways, i % self.ways)
        }
    }

    /// Slot (index into `tags`) holding `tag`, if cached (an array without sets caches
    /// nothing: every bucket count is 0).
    #[inline(always)]
    fn slot(&self, tag: u64) -> Option<usize> {
        let b = tag as usize & (BUCKETS - 1);
        if self.s.count[b] == 0 {
            return None;
        }
        let h = self.s.hint[b] as usize;
        if self.s.tags[h & SLOT] == tag {
            return Some(h);
        }
        self.scan(tag)
    }

    /// [`Lru::slot`] past its filter and hint: compare the ways of the set. Out of line: a
    /// walk's lookup keeps its registers (the scan inlined, the usual miss path saved and
    /// restored five values around it).
    #[cold]
    #[inline(never)]
    fn scan(&self, tag: u64) -> Option<usize> {
        let base = if self.sets == 1 { 0 } else { self.set_of(tag) * self.ways };
        self.s.tags[base..base + self.ways].iter().position(|&t| t == tag).map(|w| base + w)
    }

    /// Move way `w` of the set whose first slot is `base`, neither its head nor its tail,
    /// to just before the head `h` (the tail position): unlinked from its place, linked
    /// between the tail and the head.
    #[inline(always)]
    fn move_before_head(&mut self, base: usize, w: usize, h: usize) {
        let [p, n] = self.s.links[(base + w) & SLOT];
        self.s.links[(base + p as usize) & SLOT][1] = n;
        self.s.links[(base + n as usize) & SLOT][0] = p;
        let t = self.s.links[(base + h) & SLOT][0];
        self.s.links[(base + w) & SLOT] = [t, h as u8];
        self.s.links[(base + t as usize) & SLOT][1] = w as u8;
        self.s.links[(base + h) & SLOT][0] = w as u8;
    }

    /// Whether `tag` is cached; a hit becomes the most recent of its set.
    #[inline(always)]
    fn lookup(&mut self, tag: u64) -> bool {
        if tag == self.mru {
            return true;
        }
        let Some(i) = self.slot(tag) else { return false };
        // A fully associative array (the default geometry) has one set: no division.
        let (set, w, base) = if self.sets == 1 {
            (0, i, 0)
        } else {
            let (set, w) = self.set_way(i);
            (set, w, set * self.ways)
        };
        let h = self.s.heads[set & SLOT] as usize;
        if h != w {
            // The tail becomes the head by moving the head back one way; another way is
            // first moved to the tail position.
            if self.s.links[(base + h) & SLOT][0] as usize != w {
                self.move_before_head(base, w, h);
            }
            self.s.heads[set & SLOT] = w as u8;
        }
        self.s.hint[tag as usize & (BUCKETS - 1)] = i as u16;
        self.mru = tag;
        true
    }

    /// Whether `tag` is cached (no recency update).
    fn contains(&self, tag: u64) -> bool {
        self.sets != 0 && self.slot(tag).is_some()
    }

    /// Insert `tag` (not cached) as the most recent of its set, evicting the least recent
    /// (the tail, which becomes the head: the head moves back one way).
    #[inline(always)]
    fn insert(&mut self, tag: u64) {
        debug_assert!(!self.contains(tag));
        if self.sets == 1 {
            return self.insert_fa(tag);
        }
        let set = self.set_of(tag);
        let base = set * self.ways;
        let h = self.s.heads[set & SLOT] as usize;
        let w = self.s.links[(base + h) & SLOT][0];
        self.s.heads[set & SLOT] = w;
        self.replace((base + w as usize) & SLOT, tag);
    }

    /// [`Lru::insert`] into a fully associative array (one set): the ways are the slots.
    #[inline(always)]
    fn insert_fa(&mut self, tag: u64) {
        debug_assert!(self.sets == 1 && !self.contains(tag));
        // A way is a `u8`, below `MAX_ENTRIES`: the fixed-size arrays need no mask.
        let h = self.s.heads[0];
        let w = self.s.links[h as usize][0];
        self.s.heads[0] = w;
        self.replace(w as usize, tag);
    }

    /// The end of an insert: slot `i` (below [`MAX_ENTRIES`]), now the head of its set,
    /// gets `tag` (the filter and the hint follow).
    #[inline(always)]
    fn replace(&mut self, i: usize, tag: u64) {
        let i = i & SLOT;
        let old = self.s.tags[i];
        if old != EMPTY {
            self.s.count[old as usize & (BUCKETS - 1)] -= 1;
        }
        self.s.tags[i] = tag;
        let b = tag as usize & (BUCKETS - 1);
        self.s.count[b] += 1;
        self.s.hint[b] = i as u16;
        self.mru = tag;
    }

    /// Drop `tag` if cached (its way becomes the least recent, empty).
    #[inline(always)]
    fn invalidate(&mut self, tag: u64) {
        if self.sets == 0 {
            return;
        }
        if let Some(i) = self.slot(tag) {
            if tag == self.mru {
                self.mru = EMPTY;
            }
            let (set, w) = self.set_way(i);
            self.s.tags[i & SLOT] = EMPTY;
            self.s.count[tag as usize & (BUCKETS - 1)] -= 1;
            let h = self.s.heads[set & SLOT] as usize;
            if h == w {
                // The head becomes the tail: the next way becomes the head.
                self.s.heads[set & SLOT] = self.s.links[i & SLOT][1];
            } else if self.s.links[(set * self.ways + h) & SLOT][0] as usize != w {
                self.move_before_head(set * self.ways, w, h);
            }
        }
    }

    /// Empty every set (ways in order 0, 1, ... from the head).
    fn flush(&mut self) {
        self.mru = EMPTY;
        self.s.tags[..self.sets * self.ways].fill(EMPTY);
        self.s.count.fill(0);
        for set in 0..self.sets {
            let base = set * self.ways;
            for w in 0..self.ways {
                let prev = (w + self.ways - 1) % self.ways;
                let next = (w + 1) % self.ways;
                self.s.links[base + w] = [prev as u8, next as u8];
            }
            self.s.heads[set & SLOT] = 0;
        }
    }

    fn occupancy(&self) -> usize {
        self.s.tags.iter().filter(|&&t| t != EMPTY).count()
    }
}

/// One core's paging-structure caches.
#[derive(Clone, Debug)]
pub struct Psc {
    caches: [Lru; 3],
    on: bool,
    /// Something may be cached (a flush of empty caches is free).
    live: bool,
    /// Counters.
    pub c: PscCounters,
}

/// The tag of `va` in cache `k` (PML4: bits 47:39, PDPTE: 47:30, PDE: 47:21).
#[inline(always)]
fn tag(va: u64, k: usize) -> u64 {
    match k {
        PML4 => va >> LEVEL_SHIFT[0],
        PDPTE => va >> HUGE_1G_SHIFT,
        _ => va >> HUGE_SHIFT,
    }
}

impl Psc {
    /// Empty caches of the given geometry.
    pub fn new(c: &PscConfig) -> Self {
        let arr = |e: usize, w: usize| Lru::new(if c.enabled { e } else { 0 }, w.max(1));
        Psc {
            caches: [
                arr(c.pml4_entries, c.pml4_ways),
                arr(c.pdpte_entries, c.pdpte_ways),
                arr(c.pde_entries, c.pde_ways),
            ],
            on: c.enabled && (c.pml4_entries + c.pdpte_entries + c.pde_entries) > 0,
            live: false,
            c: PscCounters::default(),
        }
    }

    /// Whether any cache exists.
    pub fn enabled(&self) -> bool {
        self.on
    }

    /// The first level a walk for `va` must read: [`Level::Pte`] after a PDE-cache hit,
    /// [`Level::Pmd`] after a PDPTE-cache hit, [`Level::Pud`] after a PML4-cache hit, else
    /// [`Level::Pgd`]. The deepest hit wins; a hit makes its entry the most recent.
    #[inline(always)]
    pub fn lookup(&mut self, va: u64) -> Level {
        // Unrolled: the deepest cache first. (Empty caches miss: no test of `live` here.)
        let [pml4, pdpte, pde] = &mut self.caches;
        let (k, start) = if pde.lookup(tag(va, PDE)) {
            (PDE, Level::Pte)
        } else if pdpte.lookup(tag(va, PDPTE)) {
            (PDPTE, Level::Pmd)
        } else if pml4.lookup(tag(va, PML4)) {
            (PML4, Level::Pud)
        } else {
            self.c.misses += 1;
            return Level::Pgd;
        };
        self.c.hits[k] += 1;
        start
    }

    /// The walk read the entry of `level` for `va`, present and referencing a table (never
    /// a leaf), and set its Accessed flag: cache it (PGD entry -> PML4 cache, PUD entry ->
    /// PDPTE cache, PMD entry -> PDE cache). A PTE is never cached here.
    #[inline(always)]
    pub fn fill(&mut self, va: u64, level: Level) {
        // Without caches (`on` false) every array has no sets: the test below returns.
        let k = match level {
            Level::Pgd => PML4,
            Level::Pud => PDPTE,
            Level::Pmd => PDE,
            Level::Pte => return,
        };
        let a = &mut self.caches[k];
        // The walk fills only levels below its deepest hit, so the entry is never cached.
        if a.fa {
            // Fully associative, the default geometry: tested first.
            a.insert_fa(tag(va, k));
        } else if a.is_disabled() {
            return;
        } else {
            a.insert(tag(va, k));
        }
        self.live = true;
    }

    /// Drop every entry (INVLPG of any address, a CR3 write, a full flush).
    #[inline]
    pub fn flush(&mut self) {
        if !self.live {
            return;
        }
        for a in &mut self.caches {
            a.flush();
        }
        self.live = false;
        self.c.flushes += 1;
    }

    /// A page fault at `va`: drop the entries that would be used to translate it.
    #[inline]
    pub fn invalidate_va(&mut self, va: u64) {
        if !self.live {
            return;
        }
        self.c.fault_invalidations += 1;
        for k in [PML4, PDPTE, PDE] {
            self.caches[k].invalidate(tag(va, k));
        }
    }

    /// A walk for `va` through page tables whose every upper entry is present and whose leaf
    /// is at `leaf` (PTE for 4 KiB and 64 KiB pages, PMD for 2 MiB, PUD for 1 GiB): look up,
    /// fill the caches with the entries read, and return the first level read and the
    /// number of levels read. For memory backends without radix page tables.
    #[inline]
    pub fn walk_present(&mut self, va: u64, leaf: Level) -> (Level, u8) {
        let start = if self.on { self.lookup(va) } else { Level::Pgd };
        // A PDE-cache hit cannot serve a walk whose leaf is above the PTE (no such entry is
        // cached for a leaf PMD or PUD); clamp for safety.
        let start = start.min(leaf);
        for l in Level::ALL {
            if l >= start && l < leaf {
                self.fill(va, l);
            }
        }
        (start, leaf as u8 - start as u8 + 1)
    }

    /// Cached entries per cache (PML4, PDPTE, PDE).
    pub fn occupancy(&self) -> [usize; 3] {
        [self.caches[0].occupancy(), self.caches[1].occupancy(), self.caches[2].occupancy()]
    }

    /// Whether the cache for `level` (Pgd = PML4 cache, Pud = PDPTE, Pmd = PDE) holds the
    /// entry used for `va` (no recency update).
    pub fn holds(&self, va: u64, level: Level) -> bool {
        let k = match level {
            Level::Pgd => PML4,
            Level::Pud => PDPTE,
            Level::Pmd => PDE,
            Level::Pte => return false,
        };
        self.caches[k].contains(tag(va, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const MIB2: u64 = 2 << 20;

    #[test]
    fn deepest_hit_wins_and_fills_are_per_level() {
        let mut p = Psc::new(&PscConfig::default());
        let va = 0x7f00_0000_0000;
        assert_eq!(p.lookup(va), Level::Pgd);
        p.fill(va, Level::Pgd);
        assert_eq!(p.lookup(va), Level::Pud, "PML4 hit");
        p.fill(va, Level::Pud);
        assert_eq!(p.lookup(va + MIB2), Level::Pmd, "PDPTE hit, other 2 MiB");
        p.fill(va, Level::Pmd);
        assert_eq!(p.lookup(va + 8), Level::Pte, "PDE hit");
        assert_eq!(p.lookup(va + GIB), Level::Pud, "another GiB in the same 512 GiB");
        assert_eq!(p.c.hits, [2, 1, 1]);
        assert_eq!(p.c.misses, 1);
    }

    #[test]
    fn flush_and_fault_invalidation() {
        let mut p = Psc::new(&PscConfig::default());
        let (a, b) = (0x10_0000_0000u64, 0x10_4000_0000u64);
        // As a walk does: fill only the levels below the deepest hit (a and b share their
        // PGD entry, 512 GiB).
        for va in [a, b] {
            let start = p.lookup(va);
            for l in [Level::Pgd, Level::Pud, Level::Pmd] {
                if l >= start {
                    p.fill(va, l);
                }
            }
        }
        assert_eq!(p.occupancy(), [1, 2, 2]);
        p.invalidate_va(a);
        assert!(!p.holds(a, Level::Pmd) && !p.holds(a, Level::Pud) && !p.holds(a, Level::Pgd));
        assert!(p.holds(b, Level::Pmd) && p.holds(b, Level::Pud));
        p.flush();
        assert_eq!(p.occupancy(), [0, 0, 0]);
        assert_eq!(p.lookup(b), Level::Pgd);
    }

    #[test]
    fn lru_replacement_within_a_cache() {
        let cfg = PscConfig { pde_entries: 2, pde_ways: 2, ..PscConfig::default() };
        let mut p = Psc::new(&cfg);
        let base = 0x4000_0000u64;
        p.fill(base, Level::Pmd);
        p.fill(base + MIB2, Level::Pmd);
        assert_eq!(p.lookup(base), Level::Pte); // base most recent
        p.fill(base + 2 * MIB2, Level::Pmd); // evicts base + 2 MiB
        assert!(p.holds(base, Level::Pmd));
        assert!(!p.holds(base + MIB2, Level::Pmd));
    }

    #[test]
    fn disabled_caches_never_hit() {
        let mut p = Psc::new(&PscConfig { enabled: false, ..PscConfig::default() });
        p.fill(0, Level::Pmd);
        assert_eq!(p.lookup(0), Level::Pgd);
        assert_eq!(p.walk_present(0, Level::Pte), (Level::Pgd, 4));
        assert_eq!(p.walk_present(0, Level::Pte), (Level::Pgd, 4));
    }

    #[test]
    fn walk_present_reads_below_the_hit() {
        let mut p = Psc::new(&PscConfig::default());
        assert_eq!(p.walk_present(0x5000_0000, Level::Pte), (Level::Pgd, 4));
        assert_eq!(p.walk_present(0x5000_1000, Level::Pte), (Level::Pte, 1));
        assert_eq!(p.walk_present(0x5040_0000, Level::Pte), (Level::Pmd, 2));
        // 2 MiB leaves: no PDE entry is created for them.
        assert_eq!(p.walk_present(0x9000_0000, Level::Pmd), (Level::Pud, 2));
        assert!(!p.holds(0x9000_0000, Level::Pmd));
        assert_eq!(p.walk_present(0x9000_0000, Level::Pmd), (Level::Pmd, 1));
        // 1 GiB leaves: no PDPTE entry.
        assert_eq!(p.walk_present(0x80_0000_0000, Level::Pud), (Level::Pgd, 2));
        assert!(!p.holds(0x80_0000_0000, Level::Pud));
        assert_eq!(p.walk_present(0x80_4000_0000, Level::Pud), (Level::Pud, 1));
    }

    /// Differential test of one array against a naive LRU (a recency-ordered list per set):
    /// hits anywhere in the order, inserts, invalidations and flushes, in set-associative
    /// and fully associative geometries.
    #[test]
    fn lru_matches_naive_lru() {
        for (entries, ways) in [(32, 32), (8, 1), (12, 3), (16, 4), (8, 2), (6, 6)] {
            let sets = entries / ways;
            let mut fast = Lru::new(entries, ways);
            let mut naive: Vec<Vec<u64>> = vec![Vec::new(); sets];
            let mut rng = crate::rng::Rng::new(11);
            let universe = entries as u64 * 3;
            for step in 0..20_000 {
                let tag = rng.below(universe);
                let set = &mut naive[(tag % sets as u64) as usize];
                match rng.below(20) {
                    0 => {
                        fast.flush();
                        naive.iter_mut().for_each(Vec::clear);
                    }
                    1..=3 => {
                        fast.invalidate(tag);
                        set.retain(|&t| t != tag);
                    }
                    _ => {
                        let hit = fast.lookup(tag);
                        let pos = set.iter().position(|&t| t == tag);
                        assert_eq!(hit, pos.is_some(), "{entries}/{ways} step {step}: lookup {tag}");
                        if let Some(p) = pos {
                            set.remove(p);
                        } else {
                            fast.insert(tag);
                            set.truncate(ways - 1);
                        }
                        set.insert(0, tag);
                    }
                }
                if step % 64 == 0 {
                    for t in 0..universe {
                        let want = naive[(t % sets as u64) as usize].contains(&t);
                        assert_eq!(fast.contains(t), want, "{entries}/{ways} step {step}: tag {t}");
                    }
                }
            }
        }
    }

    #[test]
    fn geometry_is_validated() {
        assert!(PscConfig::default().validate().is_ok());
        let bad = PscConfig { pde_entries: 10, pde_ways: 4, ..PscConfig::default() };
        assert_eq!(bad.validate().unwrap_err().0, "machine.psc.pde_entries");
        assert!(PscConfig { pde_entries: 0, ..PscConfig::default() }.validate().is_ok());
    }
}
