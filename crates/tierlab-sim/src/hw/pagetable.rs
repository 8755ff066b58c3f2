//! 4-level x86-64-style radix page tables with Accessed and Dirty bits at every level.
//!
//! Levels: PGD (each entry spans 512 GiB), PUD (1 GiB), PMD (2 MiB), PTE (4 KiB). A PUD entry
//! may map a 1 GiB page and a PMD entry a 2 MiB page. A page walk (a TLB miss) sets the
//! Accessed bit of every entry it *reads*, as the x86 page walker does; the levels above a
//! hit in the core's paging-structure caches ([`super::psc`]) are not read, so their bits are
//! not set. On a store it also sets Dirty on the leaf (and, when `dirty_upper_levels` is on,
//! on the upper entries it reads too — x86 ignores D in non-leaf entries, so the default is
//! off). A TLB hit touches nothing: the TLB is modelled by the caller.
//!
//! # Representation (terabyte scale)
//! Upper tables are 512 child indices plus bitmaps for present/accessed/dirty/leaf. PTE
//! tables are three 512-bit bitmaps (present, accessed, dirty) plus the memory node of their
//! pages, kept as one byte per table while all pages share a node. A PMD entry may also be
//! *bulk-populated*: all 512 PTEs present on one node with Accessed/Dirty clear, stored in the
//! PMD entry itself; the PTE table is materialized only when a bit in it is set. A fully
//! populated 5 TiB heap is therefore ~12 MiB of PMD tables until it is touched, and ~200
//! bytes per touched 2 MiB after.

use super::psc::Psc;
use crate::error::{Result, SimError};
use tierlab_core::{
    bytes_of, pages_for, vpn, PageSize, HUGE_1G_SIZE, HUGE_MASK, HUGE_SIZE, PAGES_PER_HUGE, PAGE_SIZE,
};

/// Number of page-table levels.
pub const LEVELS: usize = 4;
/// Entries per table.
pub const ENTRIES: usize = 512; // not a page size: entries per table
/// Bit shift of the span of one entry at each level (PGD, PUD, PMD, PTE).
pub const LEVEL_SHIFT: [u32; LEVELS] = [39, 30, 21, 12];
/// Level names as used in stats and docs.
pub const LEVEL_NAMES: [&str; LEVELS] = ["pgd", "pud", "pmd", "pte"];
/// Highest virtual address + 1 (48-bit, 4-level).
pub const VA_LIMIT: u64 = 1 << 48;

/// A page-table level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Page global directory: 512 GiB per entry.
    Pgd = 0,
    /// Page upper directory: 1 GiB per entry.
    Pud = 1,
    /// Page middle directory: 2 MiB per entry (a 2 MiB page is a PMD leaf).
    Pmd = 2,
    /// Page table entry: 4 KiB.
    Pte = 3,
}

impl Level {
    /// All levels, top down.
    pub const ALL: [Level; 4] = [Level::Pgd, Level::Pud, Level::Pmd, Level::Pte];
    /// Bytes spanned by one entry of this level.
    pub fn span(self) -> u64 {
        1u64 << LEVEL_SHIFT[self as usize]
    }
    /// Index of `va`'s entry within its table at this level.
    #[inline]
    pub fn index(self, va: u64) -> usize {
        ((va >> LEVEL_SHIFT[self as usize]) & 511) as usize
    }
    /// The level's name (`pgd`, `pud`, `pmd`, `pte`).
    pub fn name(self) -> &'static str {
        LEVEL_NAMES[self as usize]
    }
    /// Parse a level name.
    pub fn from_name(s: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.name() == s)
    }
    /// The level of the leaf entry (the one with the page's Accessed and Dirty bits) of a page
    /// of `size`: PUD for 1 GiB, PMD for 2 MiB, else PTE.
    pub fn leaf_of(size: PageSize) -> Level {
        match size {
            PageSize::Huge1G => Level::Pud,
            PageSize::Huge2M => Level::Pmd,
            _ => Level::Pte,
        }
    }
}

const NONE: u32 = u32::MAX;

#[inline]
fn bit(b: &[u64; 8], i: usize) -> bool {
    (b[i >> 6] >> (i & 63)) & 1 != 0
}
#[inline]
fn set(b: &mut [u64; 8], i: usize) {
    b[i >> 6] |= 1 << (i & 63);
}
#[inline]
fn clr(b: &mut [u64; 8], i: usize) {
    b[i >> 6] &= !(1 << (i & 63));
}
/// No bit of `b` is set (no population count: the baseline x86-64 target has no
/// instruction for it, and a page fault asks this of its PTE table).
#[inline]
fn none(b: &[u64; 8]) -> bool {
    b.iter().fold(0, |a, &w| a | w) == 0
}

/// Flag bits of an upper-level entry (the rest, bits 0..27, hold the child table index, or
/// the node of a 2 MiB page or of a bulk-populated PTE range).
const P: u32 = 1 << 31; // present
const A: u32 = 1 << 30; // accessed
const D: u32 = 1 << 29; // dirty
const LEAF: u32 = 1 << 28; // PMD entry maps a 2 MiB page, PUD entry a 1 GiB page
const BULK_E: u32 = 1 << 27; // PMD entry: 512 present 4 KiB pages, bits clear, no PTE table
const IDX: u32 = (1 << 27) - 1;

/// An upper-level table (PGD, PUD or PMD): 512 packed entries, like hardware page-table
/// entries, so reading an entry touches one cache line.
#[derive(Clone)]
struct Upper {
    e: [u32; ENTRIES],
    /// Number of present entries.
    used: u32,
}

impl Upper {
    fn new() -> Self {
        Upper { e: [0; ENTRIES], used: 0 }
    }
}

/// A last-level (PTE) table.
#[derive(Clone)]
struct PteTable {
    present: [u64; 8],
    accessed: [u64; 8],
    dirty: [u64; 8],
    /// Node of every present page while they share one; `MIXED` when `nodes` is in use.
    node: u16,
    nodes: Option<Box<[u8; ENTRIES]>>,
}

const MIXED: u16 = u16::MAX;

impl PteTable {
    fn empty() -> Self {
        PteTable { present: [0; 8], accessed: [0; 8], dirty: [0; 8], node: 0, nodes: None }
    }
    fn full(node: u8) -> Self {
        PteTable { present: [!0; 8], accessed: [0; 8], dirty: [0; 8], node: node as u16, nodes: None }
    }
    #[inline]
    fn node_of(&self, i: usize) -> u8 {
        if self.node != MIXED {
            self.node as u8
        } else {
            self.nodes.as_ref().map(|n| n[i]).unwrap_or(0)
        }
    }
    fn set_node(&mut self, i: usize, node: u8, was_empty: bool) {
        if was_empty {
            self.node = node as u16;
            self.nodes = None;
            return;
        }
        if self.node == node as u16 {
            return;
        }
        if self.node != MIXED {
            let mut arr = Box::new([self.node as u8; ENTRIES]);
            arr[i] = node;
            self.nodes = Some(arr);
            self.node = MIXED;
        } else if let Some(arr) = self.nodes.as_mut() {
            arr[i] = node;
        }
    }
}

/// What a walk found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Translation {
    /// A 4 KiB page on `node`.
    Page4K { node: u8 },
    /// A 2 MiB page on `node`.
    Page2M { node: u8 },
    /// A 1 GiB page on `node`.
    Page1G { node: u8 },
    /// Nothing is mapped: a page fault.
    NotPresent,
}

/// Outcome of a walk: the translation, the first level read and how many levels were read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Walk {
    /// The translation found.
    pub translation: Translation,
    /// Levels read: from `start` down to the leaf (without paging-structure caches 4 for a
    /// 4 KiB page, 3 for 2 MiB, 2 for 1 GiB), or down to the entry that was not present.
    pub levels: u8,
    /// The first level read ([`Level::Pgd`] unless a paging-structure cache held an entry).
    pub start: Level,
}

/// Counters of page-table operations.
#[derive(Clone, Debug, Default)]
pub struct PageTableStats {
    /// PTE tables materialized from bulk-populated PMD entries.
    pub materialized: u64,
}

/// The page tables of one address space.
pub struct PageTables {
    uppers: Vec<Upper>,
    free_uppers: Vec<u32>,
    ptes: Vec<PteTable>,
    free_ptes: Vec<u32>,
    /// Set D on upper levels too on stores.
    pub dirty_upper_levels: bool,
    /// Bumped whenever an upper-level bit is cleared or the tree's shape changes: a cached
    /// walk path recorded at an older epoch must be re-walked.
    pub epoch: u64,
    /// Counters.
    pub stats: PageTableStats,
    present_4k: u64,
    present_2m: u64,
    present_1g: u64,
}

impl Default for PageTables {
    fn default() -> Self {
        Self::new()
    }
}

/// Cached result of the upper part of a walk (a software memo of the simulator, not a
/// hardware structure: the hardware's are the paging-structure caches): valid while `epoch`
/// equals [`PageTables::epoch`]. It finds the PMD table of the last walk's 1 GiB region (the
/// table every walk in that region reads; a random walk within 1 GiB finds it too) without
/// reading the upper tables, and, when the walk that recorded it read and set the
/// PGD and PUD entries (`upper_set`), lets a later walk that reads them too skip re-setting
/// bits known to be set (the epoch moves whenever an upper bit is cleared).
#[derive(Clone, Copy, Debug)]
pub struct WalkMemo {
    /// `va >> 30` of the cached PMD table (the PUD entry that points to it).
    pub key: u64,
    /// PMD table index.
    pub pmd: u32,
    /// Epoch at which it was recorded.
    pub epoch: u64,
    /// Whether the walk that recorded it was a store (upper D set when configured).
    pub dirty: bool,
    /// Whether that walk read (and set the bits of) the PGD and PUD entries.
    pub upper_set: bool,
}

impl WalkMemo {
    /// An empty memo.
    pub const EMPTY: WalkMemo =
        WalkMemo { key: u64::MAX, pmd: NONE, epoch: u64::MAX, dirty: false, upper_set: false };
}

impl PageTables {
    /// Empty page tables (one PGD).
    pub fn new() -> Self {
        PageTables {
            uppers: vec![Upper::new()],
            free_uppers: Vec::new(),
            ptes: Vec::new(),
            free_ptes: Vec::new(),
            dirty_upper_levels: false,
            epoch: 0,
            stats: PageTableStats::default(),
            present_4k: 0,
            present_2m: 0,
            present_1g: 0,
        }
    }

    fn alloc_upper(&mut self) -> u32 {
        if let Some(i) = self.free_uppers.pop() {
            self.uppers[i as usize] = Upper::new();
            i
        } else {
            self.uppers.push(Upper::new());
            (self.uppers.len() - 1) as u32
        }
    }

    fn alloc_pte(&mut self, t: PteTable) -> u32 {
        if let Some(i) = self.free_ptes.pop() {
            self.ptes[i as usize] = t;
            i
        } else {
            self.ptes.push(t);
            (self.ptes.len() - 1) as u32
        }
    }

    /// Number of present 4 KiB pages.
    pub fn present_4k(&self) -> u64 {
        self.present_4k
    }
    /// Number of present 2 MiB pages.
    pub fn present_2m(&self) -> u64 {
        self.present_2m
    }
    /// Number of present 1 GiB pages.
    pub fn present_1g(&self) -> u64 {
        self.present_1g
    }
    /// Upper tables and PTE tables allocated (for memory accounting).
    pub fn tables(&self) -> (usize, usize) {
        (self.uppers.len() - self.free_uppers.len(), self.ptes.len() - self.free_ptes.len())
    }
    /// Approximate bytes used by the page-table structures.
    pub fn heap_bytes(&self) -> usize {
        self.uppers.len() * std::mem::size_of::<Upper>()
            + self.ptes.len() * std::mem::size_of::<PteTable>()
            + self.ptes.iter().filter(|p| p.nodes.is_some()).count() * ENTRIES
    }

    /// Index of the PMD table covering `va`, creating PGD/PUD/PMD tables when `create`
    /// (None when a 1 GiB page maps `va`).
    fn pmd_table(&mut self, va: u64, create: bool) -> Option<u32> {
        let mut t = 0u32;
        for level in [Level::Pgd, Level::Pud] {
            let i = level.index(va);
            let e = self.uppers[t as usize].e[i];
            if e & (P | LEAF) == P | LEAF {
                return None;
            }
            t = if e & P == 0 {
                if !create {
                    return None;
                }
                let n = self.alloc_upper();
                let u = &mut self.uppers[t as usize];
                u.e[i] = P | n;
                u.used += 1;
                n
            } else {
                e & IDX
            };
        }
        Some(t)
    }

    fn pmd_table_ro(&self, va: u64) -> Option<u32> {
        let mut t = 0u32;
        for level in [Level::Pgd, Level::Pud] {
            let e = self.uppers[t as usize].e[level.index(va)];
            if e & P == 0 || e & LEAF != 0 {
                return None;
            }
            t = e & IDX;
        }
        Some(t)
    }

    /// Make the PMD entry `i` of table `pmd` point at a real PTE table (materializing a bulk
    /// entry); None when it is not present or maps a 2 MiB page.
    fn pte_table(&mut self, pmd: u32, i: usize) -> Option<u32> {
        let e = self.uppers[pmd as usize].e[i];
        if e & P == 0 || e & LEAF != 0 {
            return None;
        }
        if e & BULK_E != 0 {
            let node = (e & 0xff) as u8;
            let idx = self.alloc_pte(PteTable::full(node));
            let u = &mut self.uppers[pmd as usize];
            u.e[i] = (e & (P | A | D)) | idx;
            self.stats.materialized += 1;
            return Some(idx);
        }
        Some(e & IDX)
    }

    /// The PUD table covering `va` (creating it when `create`) and the PUD entry's index.
    fn pud_table(&mut self, va: u64, create: bool) -> Option<(u32, usize)> {
        let i = Level::Pgd.index(va);
        let e = self.uppers[0].e[i];
        let t = if e & P == 0 {
            if !create {
                return None;
            }
            let n = self.alloc_upper();
            let u = &mut self.uppers[0];
            u.e[i] = P | n;
            u.used += 1;
            n
        } else {
            e & IDX
        };
        Some((t, Level::Pud.index(va)))
    }

    /// Map a 1 GiB page at `va` (1 GiB aligned) on `node`. Returns false if the PUD entry was
    /// already in use.
    pub fn map_1g(&mut self, va: u64, node: u8) -> bool {
        debug_assert_eq!(va & (HUGE_1G_SIZE - 1), 0);
        let (t, i) = self.pud_table(va, true).expect("create");
        let u = &mut self.uppers[t as usize];
        if u.e[i] & P != 0 {
            return false;
        }
        u.e[i] = P | LEAF | node as u32;
        u.used += 1;
        self.present_1g += 1;
        true
    }

    /// Map one 4 KiB page at `va` on `node`. Returns false if it was already present.
    pub fn map_4k(&mut self, va: u64, node: u8) -> bool {
        let pmd = self.pmd_table(va, true).expect("4 KiB page inside a 1 GiB mapping");
        self.map_4k_in(pmd, va, node)
    }

    /// [`PageTables::map_4k`] after a walk for `va` that faulted (the page fault's mapping):
    /// the walk's `memo` names the PMD table when the walk reached it (a fault at the PTE
    /// or PMD level), and the upper levels need not be walked again.
    pub fn map_4k_after_walk(&mut self, memo: &WalkMemo, va: u64, node: u8) -> bool {
        if memo.key == va >> LEVEL_SHIFT[Level::Pud as usize] && memo.epoch == self.epoch {
            self.map_4k_in(memo.pmd, va, node)
        } else {
            self.map_4k(va, node)
        }
    }

    /// [`PageTables::map_4k`] in PMD table `pmd` (the one covering `va`).
    fn map_4k_in(&mut self, pmd: u32, va: u64, node: u8) -> bool {
        let i = Level::Pmd.index(va);
        let e = self.uppers[pmd as usize].e[i];
        assert!(e & LEAF == 0, "4 KiB page inside a 2 MiB mapping");
        let pte_idx = if e & P == 0 {
            let idx = self.alloc_pte(PteTable::empty());
            let u = &mut self.uppers[pmd as usize];
            u.e[i] = P | idx;
            u.used += 1;
            idx
        } else if e & BULK_E == 0 {
            e & IDX
        } else {
            self.pte_table(pmd, i).expect("pte table")
        };
        let p = &mut self.ptes[pte_idx as usize];
        let j = Level::Pte.index(va);
        if bit(&p.present, j) {
            return false;
        }
        let was_empty = none(&p.present);
        set(&mut p.present, j);
        clr(&mut p.accessed, j);
        clr(&mut p.dirty, j);
        p.set_node(j, node, was_empty);
        self.present_4k += 1;
        true
    }

    /// Map a 2 MiB page at `va` (2 MiB aligned) on `node`. Returns false if the PMD entry was
    /// already in use.
    pub fn map_2m(&mut self, va: u64, node: u8) -> bool {
        debug_assert_eq!(va & HUGE_MASK, 0);
        let Some(pmd) = self.pmd_table(va, true) else { return false };
        let i = Level::Pmd.index(va);
        let u = &mut self.uppers[pmd as usize];
        if u.e[i] & P != 0 {
            return false;
        }
        u.e[i] = P | LEAF | node as u32;
        u.used += 1;
        self.present_2m += 1;
        true
    }

    /// Bulk-populate a whole 2 MiB-aligned range of 4 KiB pages on `node` without touching
    /// bits: each fully covered, empty PMD entry becomes a bulk entry (no PTE table). Returns
    /// the number of pages newly made present. Partial PMD spans at the ends are mapped page
    /// by page.
    pub fn populate_4k(&mut self, start: u64, end: u64, node: u8) -> u64 {
        let mut va = start;
        let mut made = 0;
        while va < end {
            let pmd_start = va & !HUGE_MASK;
            let pmd_end = pmd_start + HUGE_SIZE;
            if va == pmd_start && pmd_end <= end {
                let pmd = self.pmd_table(va, true).expect("4 KiB pages inside a 1 GiB mapping");
                let i = Level::Pmd.index(va);
                let u = &mut self.uppers[pmd as usize];
                if u.e[i] & P == 0 {
                    u.e[i] = P | BULK_E | node as u32;
                    u.used += 1;
                    self.present_4k += PAGES_PER_HUGE;
                    made += PAGES_PER_HUGE;
                    va = pmd_end;
                    continue;
                }
            }
            let stop = pmd_end.min(end);
            while va < stop {
                if self.map_4k(va, node) {
                    made += 1;
                }
                va += PAGE_SIZE;
            }
        }
        made
    }

    /// Unmap every page in `[start, end)` (page-aligned). Returns the (node, 4 KiB pages) freed
    /// per node through `freed`. Empty tables are released.
    pub fn unmap_range(&mut self, start: u64, end: u64, freed: &mut dyn FnMut(u8, u64)) {
        let mut va = start;
        while va < end {
            if let Some((t, i)) = self.pud_table(va, false) {
                let e = self.uppers[t as usize].e[i];
                if e & (P | LEAF) == P | LEAF {
                    // A 1 GiB page goes as a whole.
                    freed((e & 0xff) as u8, PageSize::Huge1G.base_pages());
                    self.present_1g -= 1;
                    let u = &mut self.uppers[t as usize];
                    u.e[i] = 0;
                    u.used -= 1;
                    va = PageSize::Huge1G.base(va) + HUGE_1G_SIZE;
                    continue;
                }
            }
            let pmd_start = va & !HUGE_MASK;
            let pmd_end = pmd_start + HUGE_SIZE;
            let stop = pmd_end.min(end);
            if let Some(pmd) = self.pmd_table_ro(va) {
                let i = Level::Pmd.index(va);
                let e = self.uppers[pmd as usize].e[i];
                if e & P != 0 {
                    if e & LEAF != 0 {
                        freed((e & 0xff) as u8, PAGES_PER_HUGE);
                        self.present_2m -= 1;
                        self.clear_pmd_entry(pmd, i);
                    } else if e & BULK_E != 0 && va == pmd_start && stop == pmd_end {
                        freed((e & 0xff) as u8, PAGES_PER_HUGE);
                        self.present_4k -= PAGES_PER_HUGE;
                        self.clear_pmd_entry(pmd, i);
                    } else {
                        let pt = self.pte_table(pmd, i).expect("pte");
                        let mut v = va;
                        while v < stop {
                            let j = Level::Pte.index(v);
                            let p = &mut self.ptes[pt as usize];
                            if bit(&p.present, j) {
                                let n = p.node_of(j);
                                clr(&mut p.present, j);
                                clr(&mut p.accessed, j);
                                clr(&mut p.dirty, j);
                                freed(n, 1);
                                self.present_4k -= 1;
                            }
                            v += PAGE_SIZE;
                        }
                        if none(&self.ptes[pt as usize].present) {
                            self.free_ptes.push(pt);
                            self.clear_pmd_entry(pmd, i);
                        }
                    }
                }
            }
            va = stop;
        }
        self.epoch += 1;
        self.release_empty_uppers(start, end);
    }

    fn clear_pmd_entry(&mut self, pmd: u32, i: usize) {
        let u = &mut self.uppers[pmd as usize];
        u.e[i] = 0;
        u.used -= 1;
    }

    fn release_empty_uppers(&mut self, start: u64, end: u64) {
        // Walk the PUD-level spans of the range and free empty PMD and PUD tables.
        let mut va = start & !((1 << 30) - 1);
        while va < end {
            let pgd_i = Level::Pgd.index(va);
            let pe = self.uppers[0].e[pgd_i];
            if pe & P != 0 {
                let pud_t = pe & IDX;
                let pud_i = Level::Pud.index(va);
                let ue = self.uppers[pud_t as usize].e[pud_i];
                if ue & (P | LEAF) == P && self.uppers[(ue & IDX) as usize].used == 0 {
                    self.free_uppers.push(ue & IDX);
                    let u = &mut self.uppers[pud_t as usize];
                    u.e[pud_i] = 0;
                    u.used -= 1;
                }
                if self.uppers[pud_t as usize].used == 0 {
                    self.free_uppers.push(pud_t);
                    let u = &mut self.uppers[0];
                    u.e[pgd_i] = 0;
                    u.used -= 1;
                }
            }
            va += 1 << 30;
        }
    }

    /// Walk for `va` as the hardware does on a TLB miss, with the core's paging-structure
    /// caches `psc`: start below the deepest cached entry, set Accessed on every entry read
    /// (and Dirty on the leaf for a store), cache the non-leaf entries read, and on a
    /// not-present entry (a page fault) drop the cached entries of `va` (SDM 4.10.4.1).
    /// `memo` is the simulator's shortcut to the PMD table of the last walk.
    #[inline(always)]
    pub fn walk(&mut self, va: u64, write: bool, memo: &mut WalkMemo, psc: &mut Psc) -> Walk {
        let key = va >> LEVEL_SHIFT[Level::Pud as usize];
        let upper_dirty = write && self.dirty_upper_levels;
        // The bits a walk sets on an upper entry and on a leaf (computed where used: the
        // usual walk sets only the PMD entry's).
        let ubits = |upper_dirty: bool| A | if upper_dirty { D } else { 0 };
        let start = psc.lookup(va);
        let lv = |l: Level| l as u8 - start as u8 + 1;
        let fault = |psc: &mut Psc, l: Level| {
            psc.invalidate_va(va);
            Walk { translation: Translation::NotPresent, levels: lv(l).max(1), start }
        };
        let memo_ok = memo.key == key && memo.epoch == self.epoch;
        // The start level first (in a register; the memo is in memory).
        let pmd = if start >= Level::Pmd && memo_ok {
            memo.pmd
        } else if memo_ok && start == Level::Pgd && memo.upper_set && (memo.dirty || !upper_dirty) {
            // The PGD and PUD entries are read; their bits are known set since the memo was
            // recorded (clearing one moves the epoch): only the caches are filled.
            psc.fill(va, Level::Pgd);
            psc.fill(va, Level::Pud);
            memo.pmd
        } else {
            let mut t = 0usize;
            for level in [Level::Pgd, Level::Pud] {
                let i = level.index(va);
                let e = &mut self.uppers[t].e[i];
                if *e & P == 0 {
                    *memo = WalkMemo::EMPTY;
                    return fault(psc, level);
                }
                if *e & LEAF != 0 {
                    // A 1 GiB page (a PUD leaf): never cached in the PSCs, so a walk for it
                    // starts at the PUD at the deepest.
                    *e |= ubits(write);
                    let start = start.min(level);
                    let levels = level as u8 - start as u8 + 1;
                    return Walk {
                        translation: Translation::Page1G { node: (*e & 0xff) as u8 },
                        levels,
                        start,
                    };
                }
                if level >= start {
                    *e |= ubits(upper_dirty);
                    psc.fill(va, level);
                }
                t = (*e & IDX) as usize;
            }
            *memo = WalkMemo {
                key,
                pmd: t as u32,
                epoch: self.epoch,
                dirty: upper_dirty,
                upper_set: start == Level::Pgd,
            };
            t as u32
        };
        let i = Level::Pmd.index(va);
        let e = &mut self.uppers[pmd as usize].e[i];
        if *e & P == 0 {
            return fault(psc, Level::Pmd);
        }
        if *e & LEAF != 0 {
            *e |= ubits(write);
            return Walk {
                translation: Translation::Page2M { node: (*e & 0xff) as u8 },
                levels: lv(Level::Pmd),
                start,
            };
        }
        if start <= Level::Pmd {
            *e |= ubits(upper_dirty);
            psc.fill(va, Level::Pmd);
        }
        let pt = if *e & BULK_E != 0 { self.pte_table(pmd, i).expect("bulk") } else { *e & IDX };
        debug_assert!((pt as usize) < self.ptes.len());
        // SAFETY: a present PMD entry that is neither a leaf nor a bulk entry holds the index
        // of a PTE table (only `map_4k` and `pte_table` write one, from `alloc_pte`), and
        // `ptes` never shrinks (freed tables are reused through `free_ptes`).
        let p = unsafe { self.ptes.get_unchecked_mut(pt as usize) };
        let j = Level::Pte.index(va);
        if !bit(&p.present, j) {
            return fault(psc, Level::Pte);
        }
        set(&mut p.accessed, j);
        if write {
            set(&mut p.dirty, j);
        }
        Walk { translation: Translation::Page4K { node: p.node_of(j) }, levels: lv(Level::Pte), start }
    }

    /// Set the leaf Dirty bit of a present page (a store hitting a clean TLB entry).
    pub fn set_dirty(&mut self, va: u64) {
        if let Some((t, i)) = self.giant_entry(va) {
            self.uppers[t as usize].e[i] |= D;
            return;
        }
        if let Some(pmd) = self.pmd_table_ro(va) {
            let i = Level::Pmd.index(va);
            let e = self.uppers[pmd as usize].e[i];
            if e & P == 0 {
                return;
            }
            if e & LEAF != 0 {
                self.uppers[pmd as usize].e[i] |= D;
                return;
            }
            if let Some(pt) = self.pte_table(pmd, i) {
                let j = Level::Pte.index(va);
                if bit(&self.ptes[pt as usize].present, j) {
                    set(&mut self.ptes[pt as usize].dirty, j);
                }
            }
        }
    }

    /// Locate the entry of `va` at `level`: (upper?, table index, entry index), or None
    /// when a table on the way is missing or the entry is not present. A PTE under a bulk
    /// entry is reported with table index `NONE` (present, bits clear).
    fn locate(&self, va: u64, level: Level) -> Option<(bool, u32, usize)> {
        let mut t = 0u32;
        for l in [Level::Pgd, Level::Pud, Level::Pmd] {
            let i = l.index(va);
            let e = self.uppers[t as usize].e[i];
            if e & P == 0 {
                return None;
            }
            if l == level {
                return Some((true, t, i));
            }
            if l == Level::Pud && e & LEAF != 0 {
                return None; // no PMD or PTE level under a 1 GiB page
            }
            if l == Level::Pmd {
                if e & LEAF != 0 {
                    return None; // no PTE level under a 2 MiB page
                }
                if e & BULK_E != 0 {
                    return Some((false, NONE, Level::Pte.index(va)));
                }
                let c = e & IDX;
                let j = Level::Pte.index(va);
                if !bit(&self.ptes[c as usize].present, j) {
                    return None;
                }
                return Some((false, c, j));
            }
            t = e & IDX;
        }
        None
    }

    /// Whether the entry of `va` at `level` is present.
    pub fn is_present(&self, va: u64, level: Level) -> bool {
        self.locate(va, level).is_some()
    }

    /// The PUD table and entry index of the 1 GiB page mapping `va`, if one does.
    fn giant_entry(&self, va: u64) -> Option<(u32, usize)> {
        let pe = self.uppers[0].e[Level::Pgd.index(va)];
        if pe & P == 0 {
            return None;
        }
        let t = pe & IDX;
        let i = Level::Pud.index(va);
        (self.uppers[t as usize].e[i] & (P | LEAF) == P | LEAF).then_some((t, i))
    }

    /// Whether `va` is mapped by a 1 GiB page.
    pub fn is_giant(&self, va: u64) -> bool {
        self.giant_entry(va).is_some()
    }

    /// The size of the page mapping `va` (None: not present).
    pub fn page_size_of(&self, va: u64) -> Option<PageSize> {
        if self.is_giant(va) {
            Some(PageSize::Huge1G)
        } else if self.is_huge(va) {
            Some(PageSize::Huge2M)
        } else if self.is_present(va, Level::Pte) {
            Some(PageSize::Base4K)
        } else {
            None
        }
    }

    /// Whether `va` is mapped by a 2 MiB page.
    pub fn is_huge(&self, va: u64) -> bool {
        match self.locate(va, Level::Pmd) {
            Some((true, t, i)) => self.uppers[t as usize].e[i] & LEAF != 0,
            _ => false,
        }
    }

    /// Test the Accessed bit of `va`'s entry at `level` (false when not present).
    pub fn test_accessed(&self, va: u64, level: Level) -> bool {
        match self.locate(va, level) {
            Some((true, t, i)) => self.uppers[t as usize].e[i] & A != 0,
            Some((false, NONE, _)) => false,
            Some((false, t, j)) => bit(&self.ptes[t as usize].accessed, j),
            None => false,
        }
    }

    /// Test the Dirty bit of `va`'s entry at `level`.
    pub fn test_dirty(&self, va: u64, level: Level) -> bool {
        match self.locate(va, level) {
            Some((true, t, i)) => self.uppers[t as usize].e[i] & D != 0,
            Some((false, NONE, _)) => false,
            Some((false, t, j)) => bit(&self.ptes[t as usize].dirty, j),
            None => false,
        }
    }

    /// Clear the Accessed bit of `va`'s entry at `level`; returns its previous value. The
    /// caller decides whether to flush TLBs (see `Machine::clear_accessed`).
    pub fn test_and_clear_accessed(&mut self, va: u64, level: Level) -> bool {
        match self.locate(va, level) {
            Some((true, t, i)) => {
                let e = &mut self.uppers[t as usize].e[i];
                let was = *e & A != 0;
                *e &= !A;
                // Cached walk paths skip PGD/PUD bits only; a PMD bit is set by every walk.
                if was && level < Level::Pmd {
                    self.epoch += 1;
                }
                was
            }
            Some((false, NONE, _)) => false,
            Some((false, t, j)) => {
                let p = &mut self.ptes[t as usize];
                let was = bit(&p.accessed, j);
                clr(&mut p.accessed, j);
                was
            }
            None => false,
        }
    }

    /// Clear the Dirty bit of `va`'s entry at `level`; returns its previous value.
    pub fn test_and_clear_dirty(&mut self, va: u64, level: Level) -> bool {
        match self.locate(va, level) {
            Some((true, t, i)) => {
                let e = &mut self.uppers[t as usize].e[i];
                let was = *e & D != 0;
                *e &= !D;
                if was && level < Level::Pmd {
                    self.epoch += 1;
                }
                was
            }
            Some((false, NONE, _)) => false,
            Some((false, t, j)) => {
                let p = &mut self.ptes[t as usize];
                let was = bit(&p.dirty, j);
                clr(&mut p.dirty, j);
                was
            }
            None => false,
        }
    }

    /// Node of the page mapping `va`, if present.
    pub fn node_of(&self, va: u64) -> Option<u8> {
        if let Some((t, i)) = self.giant_entry(va) {
            return Some((self.uppers[t as usize].e[i] & 0xff) as u8);
        }
        let pmd = self.pmd_table_ro(va)?;
        let i = Level::Pmd.index(va);
        let e = self.uppers[pmd as usize].e[i];
        if e & P == 0 {
            return None;
        }
        if e & (LEAF | BULK_E) != 0 {
            return Some((e & 0xff) as u8);
        }
        let p = &self.ptes[(e & IDX) as usize];
        let j = Level::Pte.index(va);
        bit(&p.present, j).then(|| p.node_of(j))
    }

    /// Where a run of the address space starting at `va` that holds no present page off
    /// `node` ends (clamped to `end`), when the table structure shows one at once: a missing
    /// PUD or PMD table (1 GiB), a missing PMD entry, a bulk entry, a 2 MiB page or a PTE
    /// table whose pages are all on `node` (to the end of the 2 MiB), a 1 GiB page on
    /// `node`. None: look page by page. A page-by-page walk that skips the pages on `node`
    /// and the absent ones visits nothing in the run, so it may jump to its end.
    pub fn skip_node_run(&self, va: u64, end: u64, node: u8) -> Option<u64> {
        const GIB: u64 = 1 << 30;
        let gib_end = (va & !(GIB - 1)) + GIB;
        let pe = self.uppers[0].e[Level::Pgd.index(va)];
        if pe & P == 0 {
            let pgd_span = Level::Pgd.span();
            return Some(((va & !(pgd_span - 1)) + pgd_span).min(end));
        }
        let pud = (pe & IDX) as usize;
        let ue = self.uppers[pud].e[Level::Pud.index(va)];
        if ue & P == 0 {
            return Some(gib_end.min(end));
        }
        if ue & LEAF != 0 {
            return ((ue & 0xff) as u8 == node).then_some(gib_end.min(end));
        }
        let pmd = (ue & IDX) as usize;
        let me = self.uppers[pmd].e[Level::Pmd.index(va)];
        let chunk_end = ((va & !HUGE_MASK) + HUGE_SIZE).min(end);
        if me & P == 0 {
            return Some(chunk_end);
        }
        if me & (LEAF | BULK_E) != 0 {
            return ((me & 0xff) as u8 == node).then_some(chunk_end);
        }
        let t = &self.ptes[(me & IDX) as usize];
        (t.node != MIXED && t.node as u8 == node).then_some(chunk_end)
    }

    /// Change the node of the present page at `va` (page migration). Returns the old node.
    pub fn set_node(&mut self, va: u64, node: u8) -> Result<u8> {
        let missing = || SimError::runtime(format!("migrate: {va:#x} not mapped"));
        if let Some((t, i)) = self.giant_entry(va) {
            let e = self.uppers[t as usize].e[i];
            self.uppers[t as usize].e[i] = (e & !0xff) | node as u32;
            return Ok((e & 0xff) as u8);
        }
        let pmd = self.pmd_table_ro(va).ok_or_else(missing)?;
        let i = Level::Pmd.index(va);
        let e = self.uppers[pmd as usize].e[i];
        if e & P == 0 {
            return Err(missing());
        }
        if e & LEAF != 0 {
            self.uppers[pmd as usize].e[i] = (e & !0xff) | node as u32;
            return Ok((e & 0xff) as u8);
        }
        let pt = self.pte_table(pmd, i).expect("pte");
        let p = &mut self.ptes[pt as usize];
        let j = Level::Pte.index(va);
        if !bit(&p.present, j) {
            return Err(missing());
        }
        let old = p.node_of(j);
        p.set_node(j, node, false);
        Ok(old)
    }

    /// Visit the PTE-level Accessed bits of the 4 KiB pages in `[start, end)`, 64 pages at a
    /// time: `f(va_of_first_page_of_word, present_mask, accessed_mask)`; when `clear`, the
    /// Accessed bits are cleared after the visit. Bulk entries report present pages with
    /// no Accessed bits and are not materialized. 2 MiB leaves are skipped.
    pub fn scan_pte_accessed(&mut self, start: u64, end: u64, clear: bool, f: &mut dyn FnMut(u64, u64, u64)) {
        let mut va = start & !(bytes_of(64) - 1);
        while va < end {
            let pmd_start = va & !HUGE_MASK;
            let pmd_end = pmd_start + HUGE_SIZE;
            let Some(pmd) = self.pmd_table_ro(va) else {
                va = (va | ((1 << 30) - 1)) + 1;
                continue;
            };
            let i = Level::Pmd.index(va);
            let e = self.uppers[pmd as usize].e[i];
            if e & P == 0 || e & LEAF != 0 {
                va = pmd_end;
                continue;
            }
            let bulk = e & BULK_E != 0;
            let c = e & IDX;
            let stop = pmd_end.min(end);
            while va < stop {
                let w = Level::Pte.index(va) >> 6;
                let mut mask = !0u64;
                if va < start {
                    mask &= !0u64 << vpn(start - va);
                }
                let word_end = va + bytes_of(64);
                if word_end > end {
                    let keep = pages_for(end - va);
                    mask &= if keep >= 64 { !0 } else { (1u64 << keep) - 1 };
                }
                if bulk {
                    f(va, mask, 0);
                } else {
                    let p = &mut self.ptes[c as usize];
                    let pres = p.present[w] & mask;
                    let acc = p.accessed[w] & mask;
                    f(va, pres, acc);
                    if clear {
                        p.accessed[w] &= !mask;
                    }
                }
                va = word_end;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::psc::PscConfig;

    /// No paging-structure caches: every walk reads from the PGD.
    fn no_psc() -> Psc {
        Psc::new(&PscConfig { enabled: false, ..PscConfig::default() })
    }

    #[test]
    fn skip_node_run_skips_only_what_a_page_walk_would_skip() {
        // Bulk ranges, materialized PTE tables (uniform and mixed), 2 MiB and 1 GiB pages,
        // holes; for random ranges and nodes, the pages off the node seen by a page-by-page
        // walk that jumps over every run `skip_node_run` reports are those of a plain walk.
        let mut pt = PageTables::new();
        let base = 0x7f00_0000_0000u64;
        pt.populate_4k(base, base + 64 * HUGE_SIZE, 1);
        pt.populate_4k(base + 64 * HUGE_SIZE, base + 96 * HUGE_SIZE, 0);
        for k in 0..40u64 {
            pt.map_2m(base + (100 + k) * HUGE_SIZE, (k % 2) as u8);
        }
        pt.map_1g(base + 4 * HUGE_1G_SIZE, 1);
        let mut rng = crate::rng::Rng::new(11);
        for _ in 0..3000 {
            let va = base + rng.below(96 * 512) * PAGE_SIZE;
            let n = rng.below(2) as u8;
            if rng.below(3) == 0 {
                pt.set_node(va, n).unwrap();
            } else {
                pt.map_4k(va, n); // materializes or adds to a table (no-op when present)
            }
        }
        let walk = |pt: &PageTables, start: u64, end: u64, node: u8, skip: bool| -> Vec<u64> {
            let mut out = Vec::new();
            let mut va = start;
            while va < end {
                if skip {
                    if let Some(next) = pt.skip_node_run(va, end, node) {
                        assert!(next > va && next <= end);
                        va = next;
                        continue;
                    }
                }
                let Some(size) = pt.page_size_of(va) else {
                    va = (va & !(PAGE_SIZE - 1)) + PAGE_SIZE;
                    continue;
                };
                let b = size.base(va);
                if pt.node_of(b) != Some(node) {
                    out.push(b);
                }
                va = b + size.bytes();
            }
            out
        };
        let mut seen = 0;
        for k in 0..300 {
            let span = if k % 2 == 0 { 150 * 512 } else { 6 * 512 * 512 };
            let a = base + rng.below(span) * PAGE_SIZE;
            let b = a + rng.below(100 * 512) * PAGE_SIZE + PAGE_SIZE;
            let node = rng.below(2) as u8;
            let want = walk(&pt, a, b, node, false);
            seen += want.len();
            assert_eq!(walk(&pt, a, b, node, true), want, "{a:#x}..{b:#x} node {node}");
        }
        assert!(seen > 100_000, "the ranges cover mapped pages: {seen}");
    }

    #[test]
    fn walk_sets_accessed_at_every_level() {
        let mut pt = PageTables::new();
        let va = 0x7f00_1234_5000;
        pt.map_4k(va, 0);
        for l in Level::ALL {
            assert!(!pt.test_accessed(va, l), "{l:?} set before any walk");
        }
        let mut memo = WalkMemo::EMPTY;
        let mut psc = no_psc();
        let w = pt.walk(va, false, &mut memo, &mut psc);
        assert_eq!(w.translation, Translation::Page4K { node: 0 });
        for l in Level::ALL {
            assert!(pt.test_accessed(va, l), "{l:?} not set by walk");
            assert!(!pt.test_dirty(va, l), "{l:?} dirty after a load");
        }
        pt.walk(va, true, &mut memo, &mut psc);
        assert!(pt.test_dirty(va, Level::Pte));
        assert!(!pt.test_dirty(va, Level::Pmd), "x86 default: no D on non-leaf entries");
    }

    #[test]
    fn memo_does_not_hide_cleared_upper_bits() {
        let mut pt = PageTables::new();
        let va = 0x4000_0000;
        pt.map_4k(va, 0);
        pt.map_4k(va + 4096, 0);
        let mut memo = WalkMemo::EMPTY;
        let mut psc = no_psc();
        pt.walk(va, false, &mut memo, &mut psc);
        assert!(pt.test_and_clear_accessed(va, Level::Pud));
        assert!(!pt.test_accessed(va, Level::Pud));
        pt.walk(va + 4096, false, &mut memo, &mut psc);
        assert!(pt.test_accessed(va, Level::Pud), "walk under a cached path must re-set PUD");
    }

    #[test]
    fn a_fault_maps_through_the_walks_memo_only_while_it_holds() {
        let mut pt = PageTables::new();
        let va = 0x4000_0000;
        pt.map_4k(va, 0);
        let mut memo = WalkMemo::EMPTY;
        let mut psc = no_psc();
        // A walk that faults at the PTE level leaves the memo naming the PMD table.
        let w = pt.walk(va + 4096, false, &mut memo, &mut psc);
        assert_eq!(w.translation, Translation::NotPresent);
        assert!(pt.map_4k_after_walk(&memo, va + 4096, 2));
        assert_eq!(
            pt.walk(va + 4096, false, &mut memo, &mut psc).translation,
            Translation::Page4K { node: 2 }
        );
        // In another 2 MiB of the same gigabyte: a new PTE table under the memo's PMD table.
        assert!(pt.map_4k_after_walk(&memo, va + (2 << 20), 1));
        assert_eq!(pt.node_of(va + (2 << 20)), Some(1));
        // A memo of another gigabyte, or one outdated by an unmap, is not used.
        assert!(pt.map_4k_after_walk(&memo, 0x8000_0000, 3));
        assert_eq!(pt.node_of(0x8000_0000), Some(3));
        pt.unmap_range(va, va + (1 << 30), &mut |_, _| {});
        assert!(pt.map_4k_after_walk(&memo, va, 1));
        assert_eq!(pt.node_of(va), Some(1));
        assert_eq!(pt.node_of(va + 4096), None);
        assert!(!pt.map_4k_after_walk(&memo, va, 1), "already present");
    }

    #[test]
    fn bulk_populate_is_lazy_and_correct() {
        let mut pt = PageTables::new();
        let start = 1u64 << 40;
        let len = 64u64 << 30; // 64 GiB
        let made = pt.populate_4k(start, start + len, 1);
        assert_eq!(made, len / 4096);
        assert_eq!(pt.tables().1, 0, "no PTE table materialized");
        assert_eq!(pt.node_of(start + 12345 * 4096), Some(1));
        assert!(!pt.test_accessed(start + 4096, Level::Pte));
        let mut memo = WalkMemo::EMPTY;
        let mut psc = no_psc();
        let w = pt.walk(start + 4096 * 7, true, &mut memo, &mut psc);
        assert_eq!(w.translation, Translation::Page4K { node: 1 });
        assert_eq!(pt.tables().1, 1);
        assert!(pt.test_accessed(start + 4096 * 7, Level::Pte));
        assert!(!pt.test_accessed(start + 4096 * 8, Level::Pte));
        assert!(pt.test_dirty(start + 4096 * 7, Level::Pte));
    }

    #[test]
    fn huge_pages_walk_three_levels() {
        let mut pt = PageTables::new();
        let va = 0x20_0000 * 5;
        pt.map_2m(va, 0);
        let mut memo = WalkMemo::EMPTY;
        let mut psc = no_psc();
        let w = pt.walk(va + 12345, true, &mut memo, &mut psc);
        assert_eq!(w.translation, Translation::Page2M { node: 0 });
        assert_eq!(w.levels, 3);
        assert!(pt.test_accessed(va, Level::Pmd));
        assert!(pt.test_dirty(va, Level::Pmd));
        assert!(pt.is_huge(va));
    }

    #[test]
    fn unmap_frees_and_reports_nodes() {
        let mut pt = PageTables::new();
        pt.populate_4k(0x4000_0000, 0x4000_0000 + (4 << 20) + 8192, 2);
        let mut freed = 0;
        pt.unmap_range(0x4000_0000, 0x4000_0000 + (4 << 20) + 8192, &mut |n, c| {
            assert_eq!(n, 2);
            freed += c
        });
        assert_eq!(freed, 1024 + 2);
        assert_eq!(pt.present_4k(), 0);
        let mut memo = WalkMemo::EMPTY;
        let mut psc = no_psc();
        assert_eq!(pt.walk(0x4000_0000, false, &mut memo, &mut psc).translation, Translation::NotPresent);
        assert_eq!(pt.tables(), (1, 0));
    }

    #[test]
    fn scan_reports_and_clears() {
        let mut pt = PageTables::new();
        let base = 0x1000_0000u64;
        for k in 0..100 {
            pt.map_4k(base + k * 4096, 0);
        }
        let mut memo = WalkMemo::EMPTY;
        let mut psc = no_psc();
        for k in [3u64, 50, 99] {
            pt.walk(base + k * 4096, false, &mut memo, &mut psc);
        }
        let mut seen = Vec::new();
        let mut present = 0;
        pt.scan_pte_accessed(base, base + 100 * 4096, true, &mut |va, p, a| {
            present += p.count_ones();
            for b in 0..64 {
                if a >> b & 1 == 1 {
                    seen.push((va - base) / 4096 + b);
                }
            }
        });
        assert_eq!(present, 100);
        assert_eq!(seen, vec![3, 50, 99]);
        assert!(!pt.test_accessed(base + 3 * 4096, Level::Pte));
    }

    #[test]
    fn mixed_nodes_in_one_table() {
        let mut pt = PageTables::new();
        pt.map_4k(0x1000, 0);
        pt.map_4k(0x2000, 3);
        assert_eq!(pt.node_of(0x1000), Some(0));
        assert_eq!(pt.node_of(0x2000), Some(3));
        assert_eq!(pt.set_node(0x1000, 1).unwrap(), 0);
        assert_eq!(pt.node_of(0x1000), Some(1));
    }

    // ---- paging-structure caches (SDM Vol. 3A 4.8, 4.10.3, 4.10.4.1) ----

    fn with_psc() -> Psc {
        Psc::new(&PscConfig::default())
    }

    /// The Accessed bits of `va`'s entries, top down.
    fn a_bits(pt: &PageTables, va: u64) -> [bool; 4] {
        Level::ALL.map(|l| pt.test_accessed(va, l))
    }

    fn clear_all(pt: &mut PageTables, va: u64) {
        for l in Level::ALL {
            pt.test_and_clear_accessed(va, l);
        }
    }

    #[test]
    fn psc_deepest_hit_reads_and_sets_only_the_levels_below() {
        let mut pt = PageTables::new();
        let va = 0x7f00_1234_5000;
        for k in 0..4 {
            pt.map_4k(va + k * PAGE_SIZE, 0);
        }
        pt.map_4k(va + HUGE_SIZE, 0); // next 2 MiB, same 1 GiB
        pt.map_4k(va + HUGE_1G_SIZE, 0); // next 1 GiB, same 512 GiB
        let (mut memo, mut psc) = (WalkMemo::EMPTY, with_psc());
        // A cold walk reads all four levels and caches the PGD, PUD and PMD entries.
        let w = pt.walk(va, false, &mut memo, &mut psc);
        assert_eq!((w.start, w.levels), (Level::Pgd, 4));
        assert!(psc.holds(va, Level::Pgd) && psc.holds(va, Level::Pud) && psc.holds(va, Level::Pmd));
        // Clear every bit (no flush, as Linux does): a walk for another 4 KiB page of the same
        // 2 MiB hits the PDE cache and reads, and sets, the PTE only.
        clear_all(&mut pt, va);
        let w = pt.walk(va + PAGE_SIZE, false, &mut memo, &mut psc);
        assert_eq!((w.start, w.levels), (Level::Pte, 1));
        assert_eq!(a_bits(&pt, va + PAGE_SIZE), [false, false, false, true]);
        // The next 2 MiB: a PDPTE-cache hit reads the PMD and PTE entries.
        let w = pt.walk(va + HUGE_SIZE, false, &mut memo, &mut psc);
        assert_eq!((w.start, w.levels), (Level::Pmd, 2));
        assert_eq!(a_bits(&pt, va + HUGE_SIZE), [false, false, true, true]);
        // The next 1 GiB: a PML4-cache hit reads PUD, PMD, PTE; the PGD bit stays clear.
        let w = pt.walk(va + HUGE_1G_SIZE, false, &mut memo, &mut psc);
        assert_eq!((w.start, w.levels), (Level::Pud, 3));
        assert_eq!(a_bits(&pt, va + HUGE_1G_SIZE), [false, true, true, true]);
        assert_eq!(psc.c.hits, [1, 1, 1]);
        assert_eq!(psc.c.misses, 1);
        // Without caches the same sequence sets every level every time.
        let mut off = no_psc();
        clear_all(&mut pt, va);
        let w = pt.walk(va + 2 * PAGE_SIZE, false, &mut memo, &mut off);
        assert_eq!((w.start, w.levels), (Level::Pgd, 4));
        assert_eq!(a_bits(&pt, va + 2 * PAGE_SIZE), [true; 4]);
    }

    #[test]
    fn psc_never_caches_leaf_entries() {
        let mut pt = PageTables::new();
        let (v2m, v1g) = (0x40_0020_0000u64, 0x80_4000_0000u64);
        assert!(pt.map_2m(v2m, 0));
        assert!(pt.map_1g(v1g, 1));
        let (mut memo, mut psc) = (WalkMemo::EMPTY, with_psc());
        let w = pt.walk(v2m + 12345, false, &mut memo, &mut psc);
        assert_eq!((w.translation, w.start, w.levels), (Translation::Page2M { node: 0 }, Level::Pgd, 3));
        assert!(!psc.holds(v2m, Level::Pmd), "no PDE-cache entry for a PDE that maps a 2 MiB page");
        assert!(psc.holds(v2m, Level::Pud));
        // Again: the PDPTE cache serves it, the leaf PMD is read (and its bit set) each time.
        pt.test_and_clear_accessed(v2m, Level::Pmd);
        let w = pt.walk(v2m + 7 * PAGE_SIZE, false, &mut memo, &mut psc);
        assert_eq!((w.start, w.levels), (Level::Pmd, 1));
        assert!(pt.test_accessed(v2m, Level::Pmd));
        let w = pt.walk(v1g + 99 * HUGE_SIZE, true, &mut memo, &mut psc);
        assert_eq!((w.translation, w.start, w.levels), (Translation::Page1G { node: 1 }, Level::Pgd, 2));
        assert!(!psc.holds(v1g, Level::Pud), "no PDPTE-cache entry for a PDPTE that maps 1 GiB");
        assert!(pt.test_accessed(v1g, Level::Pud) && pt.test_dirty(v1g, Level::Pud));
        let w = pt.walk(v1g, false, &mut memo, &mut psc);
        assert_eq!((w.start, w.levels), (Level::Pud, 1), "a PML4-cache hit, then the leaf PUD");
        assert_eq!(pt.page_size_of(v1g + 5), Some(PageSize::Huge1G));
        assert_eq!(pt.node_of(v1g + HUGE_1G_SIZE - 1), Some(1));
        let mut freed = 0;
        pt.unmap_range(v1g, v1g + HUGE_1G_SIZE, &mut |_, n| freed += n);
        assert_eq!((freed, pt.present_1g()), (PageSize::Huge1G.base_pages(), 0));
    }

    #[test]
    fn psc_flush_makes_the_next_walk_read_every_level() {
        let mut pt = PageTables::new();
        let va = 0x7f00_0000_0000u64;
        pt.map_4k(va, 0);
        pt.map_4k(va + PAGE_SIZE, 0);
        let (mut memo, mut psc) = (WalkMemo::EMPTY, with_psc());
        pt.walk(va, false, &mut memo, &mut psc);
        clear_all(&mut pt, va);
        // An INVLPG (of any address) or a CR3 write empties every PSC (SDM 4.10.4.1; the
        // Hardware calls are tested in `os`): the walk for the second page reads from the
        // PGD and sets the three upper bits and its own PTE's.
        psc.flush();
        assert_eq!(psc.occupancy(), [0, 0, 0]);
        let w = pt.walk(va + PAGE_SIZE, false, &mut memo, &mut psc);
        assert_eq!((w.start, w.levels), (Level::Pgd, 4));
        assert_eq!(a_bits(&pt, va), [true, true, true, false]);
        assert_eq!(psc.c.flushes, 1);
    }

    #[test]
    fn psc_fault_drops_the_entries_of_its_address() {
        let mut pt = PageTables::new();
        let (va, b) = (0x7f00_0000_0000u64, 0x10_0000_0000u64);
        pt.map_4k(va, 0);
        pt.map_4k(b, 0);
        let (mut memo, mut psc) = (WalkMemo::EMPTY, with_psc());
        pt.walk(va, false, &mut memo, &mut psc);
        pt.walk(b, false, &mut memo, &mut psc);
        // A page fault under va's PDE: the walk starts at the PTE, finds it not present and
        // drops the PML4, PDPTE and PDE entries of that address; b's entries stay.
        let w = pt.walk(va + PAGE_SIZE, false, &mut memo, &mut psc);
        assert_eq!((w.translation, w.start, w.levels), (Translation::NotPresent, Level::Pte, 1));
        for l in [Level::Pgd, Level::Pud, Level::Pmd] {
            assert!(!psc.holds(va, l), "{l:?} entry kept after a fault");
            assert!(psc.holds(b, l), "{l:?} entry of another address dropped");
        }
        assert_eq!(psc.c.fault_invalidations, 1);
        // After the fault is handled the retry reads from the PGD again.
        pt.map_4k(va + PAGE_SIZE, 0);
        clear_all(&mut pt, va);
        let w = pt.walk(va + PAGE_SIZE, false, &mut memo, &mut psc);
        assert_eq!((w.start, w.levels), (Level::Pgd, 4));
        assert_eq!(a_bits(&pt, va), [true, true, true, false]);
        // A fault at the PMD level (nothing mapped in that 2 MiB): three levels read.
        let w = pt.walk(va + 5 * HUGE_SIZE, false, &mut memo, &mut psc);
        assert_eq!((w.translation, w.start, w.levels), (Translation::NotPresent, Level::Pmd, 1));
    }

    /// A naive model of the walker with paging-structure caches: Accessed bits in a map keyed
    /// by (level, address bits of the entry), fully associative LRU caches as vectors (most
    /// recent last), every rule written out directly.
    struct Naive {
        mapped: std::collections::HashMap<u64, PageSize>,
        abit: std::collections::HashSet<(usize, u64)>,
        caches: [Vec<u64>; 3],
        sizes: [usize; 3],
    }

    impl Naive {
        fn key(va: u64, l: Level) -> u64 {
            va >> LEVEL_SHIFT[l as usize]
        }
        /// The page mapping `va`: (its base, size).
        fn page(&self, va: u64) -> Option<PageSize> {
            [PageSize::Base4K, PageSize::Huge2M, PageSize::Huge1G]
                .into_iter()
                .find(|s| self.mapped.get(&s.base(va)) == Some(s))
        }
        /// Whether the entry of `va` at `l` is present (something is mapped below it).
        fn present(&self, va: u64, l: Level) -> bool {
            let span = l.span();
            self.mapped.iter().any(|(&b, s)| {
                let e = b + s.bytes();
                b < (va & !(span - 1)) + span && e > va & !(span - 1)
            }) && match (l, self.page(va)) {
                (Level::Pte, Some(PageSize::Base4K)) => true,
                (Level::Pte, _) => false,
                (Level::Pmd, Some(PageSize::Huge1G)) => false,
                _ => true,
            }
        }
        fn leaf(&self, va: u64) -> Level {
            match self.page(va) {
                Some(PageSize::Huge1G) => Level::Pud,
                Some(PageSize::Huge2M) => Level::Pmd,
                _ => Level::Pte,
            }
        }
        fn walk(&mut self, va: u64) -> (Translation, Level, u8) {
            // Deepest hit first: PDE (k 2), PDPTE (1), PML4 (0); a hit becomes most recent.
            let mut start = Level::Pgd;
            for k in [2usize, 1, 0] {
                let t = Self::key(va, Level::ALL[k]);
                if let Some(p) = self.caches[k].iter().position(|&x| x == t) {
                    self.caches[k].remove(p);
                    self.caches[k].push(t);
                    start = Level::ALL[k + 1];
                    break;
                }
            }
            let leaf = self.leaf(va);
            for l in Level::ALL.into_iter().filter(|&l| l >= start) {
                if !self.present(va, l) {
                    for k in 0..3 {
                        let t = Self::key(va, Level::ALL[k]);
                        self.caches[k].retain(|&x| x != t);
                    }
                    return (Translation::NotPresent, start, (l as u8 - start as u8 + 1).max(1));
                }
                self.abit.insert((l as usize, Self::key(va, l)));
                if l == leaf {
                    let t = match leaf {
                        Level::Pud => Translation::Page1G { node: 0 },
                        Level::Pmd => Translation::Page2M { node: 0 },
                        _ => Translation::Page4K { node: 0 },
                    };
                    return (t, start, l as u8 - start as u8 + 1);
                }
                let k = l as usize;
                let t = Self::key(va, l);
                if !self.caches[k].contains(&t) && self.sizes[k] > 0 {
                    if self.caches[k].len() == self.sizes[k] {
                        self.caches[k].remove(0);
                    }
                    self.caches[k].push(t);
                }
            }
            unreachable!()
        }
    }

    #[test]
    fn psc_walker_matches_a_naive_model() {
        for sizes in [[2usize, 4, 32], [1, 2, 3]] {
            let cfg = PscConfig {
                pml4_entries: sizes[0],
                pml4_ways: sizes[0],
                pdpte_entries: sizes[1],
                pdpte_ways: sizes[1],
                pde_entries: sizes[2],
                pde_ways: sizes[2],
                ..PscConfig::default()
            };
            let mut psc = Psc::new(&cfg);
            let mut memo = WalkMemo::EMPTY;
            let mut pt = PageTables::new();
            let mut nv = Naive {
                mapped: Default::default(),
                abit: Default::default(),
                caches: Default::default(),
                sizes,
            };
            // Candidate addresses: 2 PGD entries x 3 PUD entries x 6 PMD entries x 4 pages.
            let mut cands = Vec::new();
            for g in [0x7f00_0000_0000u64, 0x10_0000_0000] {
                for u in 0..3u64 {
                    for d in 0..6u64 {
                        for p in 0..4u64 {
                            cands.push(g + u * HUGE_1G_SIZE + d * HUGE_SIZE + p * 3 * PAGE_SIZE);
                        }
                    }
                }
            }
            // A 2 MiB page and a 1 GiB page among them.
            let (v2m, v1g) = (0x7f00_0000_0000 + 7 * HUGE_SIZE, 0x10_0000_0000 + 4 * HUGE_1G_SIZE);
            pt.map_2m(v2m, 0);
            nv.mapped.insert(v2m, PageSize::Huge2M);
            pt.map_1g(v1g, 0);
            nv.mapped.insert(v1g, PageSize::Huge1G);
            cands.extend([v2m + 3 * PAGE_SIZE, v1g + 9 * HUGE_SIZE]);
            let mut rng = crate::rng::Rng::new(7);
            for step in 0..20_000 {
                let va = cands[rng.below(cands.len() as u64) as usize];
                match rng.below(100) {
                    0..=59 => {
                        let w = pt.walk(va, false, &mut memo, &mut psc);
                        let n = nv.walk(va);
                        let w = (w.translation, w.start, w.levels);
                        assert_eq!(w, n, "step {step}: walk {va:#x}");
                        if w.0 == Translation::NotPresent && rng.below(2) == 0 {
                            // Handle the fault: map the 4 KiB page.
                            pt.map_4k(va, 0);
                            nv.mapped.insert(va, PageSize::Base4K);
                        }
                    }
                    60..=94 => {
                        let l = Level::ALL[rng.below(4) as usize];
                        let was = pt.test_and_clear_accessed(va, l);
                        let nwas = nv.present(va, l) && nv.abit.remove(&(l as usize, Naive::key(va, l)));
                        assert_eq!(was, nwas, "step {step}: clear {l:?} of {va:#x}");
                    }
                    _ => {
                        psc.flush();
                        nv.caches = Default::default();
                    }
                }
            }
            for &va in &cands {
                for l in Level::ALL {
                    let n = nv.present(va, l) && nv.abit.contains(&(l as usize, Naive::key(va, l)));
                    assert_eq!(pt.test_accessed(va, l), n, "{va:#x} {l:?}");
                }
            }
            assert!(psc.c.hits.iter().all(|&h| h > 0), "{:?}", psc.c);
        }
    }
}
