//! Set-associative TLBs with true LRU replacement within a set.
//!
//! Each core has an L1 dTLB for 4 KiB pages, an L1 dTLB for 2 MiB pages, optionally an L1
//! dTLB for 1 GiB pages and a second-level TLB shared by the page sizes (Intel's STLB). Entries
//! cache the translation (here: the memory node) and whether the page is known dirty, so a
//! store hitting a clean entry sets the PTE's Dirty bit as hardware does.
//!
//! 1 GiB pages (`l1_1g_entries` > 0) have an L1 array of their own; the second level keeps
//! them in a separate array (`l2_1g_entries`, Intel's 1 GiB STLB), as the 2 MiB piece of the
//! page the access fell in (`l2_1g_splinter`, AMD's "smashing"; an L2 hit on such a piece
//! refills the L1 with the whole 1 GiB page) or not at all. Without an L1 1 GiB array a 1 GiB
//! page is cached as the 2 MiB page holding the address (the model before 1 GiB arrays).
//! INVLPG of any address of a 1 GiB page drops every entry that caches part of it.

use tierlab_core::param::params;
use tierlab_core::{
    PageSize, HUGE_1G_SHIFT, HUGE_1G_SIZE, HUGE_SHIFT, HUGE_SIZE, PAGE_64K_SHIFT, PAGE_64K_SIZE, PAGE_SHIFT,
    PAGE_SIZE,
};

/// Geometry of one core's TLBs. Defaults: a recent x86 core (L1 dTLB 64 entries 4-way for
/// 4 KiB, 32 entries 4-way for 2 MiB, 1536-entry 12-way STLB; see docs/engine.md, from
/// `cost-model.md`'s "typical TLB geometry"). A CPU preset (`machine.cpu`, [`super::cpu`])
/// sets every field the scenario does not give.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct TlbConfig {
    /// Entries of the L1 4 KiB dTLB.
    #[param(
        default = 64,
        range = "[0, 65536]",
        unit = "entries",
        sourced = "reference/cost-model.md, typical TLB geometry: L1 dTLB 64 entries (4 KiB) 4-way"
    )]
    pub l1_4k_entries: usize,
    /// Associativity of the L1 4 KiB dTLB.
    #[param(
        default = 4,
        range = "[1, 256]",
        unit = "ways",
        sourced = "reference/cost-model.md, typical TLB geometry: L1 dTLB 64 entries (4 KiB) 4-way"
    )]
    pub l1_4k_ways: usize,
    /// Entries of the L1 2 MiB dTLB.
    #[param(
        default = 32,
        range = "[0, 65536]",
        unit = "entries",
        sourced = "reference/cost-model.md, typical TLB geometry: 32 entries (2 MiB)"
    )]
    pub l1_2m_entries: usize,
    /// Associativity of the L1 2 MiB dTLB.
    #[param(
        default = 4,
        range = "[1, 256]",
        unit = "ways",
        sourced = "reference/page-walk-caches.md, suggested defaults: DTLB 32 x 4-way (2M)"
    )]
    pub l1_2m_ways: usize,
    /// Entries of the second-level TLB (0 = none).
    #[param(
        default = 1536,
        range = "[0, 65536]",
        unit = "entries",
        sourced = "reference/page-walk-caches.md, suggested defaults: STLB 1536 x 12-way (4K+2M)"
    )]
    pub l2_entries: usize,
    /// Associativity of the second-level TLB.
    #[param(
        default = 12,
        range = "[1, 256]",
        unit = "ways",
        sourced = "reference/page-walk-caches.md, suggested defaults: STLB 1536 x 12-way (4K+2M)"
    )]
    pub l2_ways: usize,
    /// Entries of the L1 1 GiB dTLB (0 = none: a 1 GiB page is cached as the 2 MiB page
    /// holding the address, in the 2 MiB arrays).
    #[param(
        default = 0,
        range = "[0, 65536]",
        unit = "entries",
        assumed = "none: the model before 1 GiB arrays (a 1 GiB page cached as its 2 MiB pieces); the CPU presets set it"
    )]
    pub l1_1g_entries: usize,
    /// Associativity of the L1 1 GiB dTLB.
    #[param(
        default = 4,
        range = "[1, 256]",
        unit = "ways",
        sourced = "reference/page-walk-caches.md: Skylake-SP CPUID, DTLB 1 GiB 4 entries 4-way"
    )]
    pub l1_1g_ways: usize,
    /// Entries of a second-level array for 1 GiB pages only (0 = none). Used only with an
    /// L1 1 GiB array.
    #[param(
        default = 0,
        range = "[0, 65536]",
        unit = "entries",
        assumed = "none, as the L1 1 GiB array; the CPU presets set it"
    )]
    pub l2_1g_entries: usize,
    /// Associativity of the second-level 1 GiB array.
    #[param(
        default = 4,
        range = "[1, 256]",
        unit = "ways",
        assumed = "as the L1 1 GiB array (unused while l2_1g_entries = 0)"
    )]
    pub l2_1g_ways: usize,
    /// The shared second-level TLB holds a 1 GiB page as the 2 MiB piece the access fell in
    /// ("smashed" into a 2 MiB entry; an L2 hit on it refills the L1 1 GiB array). Used only
    /// with an L1 1 GiB array and without a second-level 1 GiB array.
    #[param(default = false)]
    pub l2_1g_splinter: bool,
}

impl TlbConfig {
    /// Check the geometry; returns (field, problem) on error.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (name, e, w, allow_zero) in [
            ("l1_4k", self.l1_4k_entries, self.l1_4k_ways, false),
            ("l1_2m", self.l1_2m_entries, self.l1_2m_ways, false),
            ("l2", self.l2_entries, self.l2_ways, true),
            ("l1_1g", self.l1_1g_entries, self.l1_1g_ways, true),
            ("l2_1g", self.l2_1g_entries, self.l2_1g_ways, true),
        ] {
            if e == 0 && allow_zero {
                continue;
            }
            if e == 0 || w == 0 || e % w != 0 {
                let field = match name {
                    "l1_4k" => "machine.tlb.l1_4k_entries",
                    "l1_2m" => "machine.tlb.l1_2m_entries",
                    "l1_1g" => "machine.tlb.l1_1g_entries",
                    "l2_1g" => "machine.tlb.l2_1g_entries",
                    _ => "machine.tlb.l2_entries",
                };
                return Err((field, format!("{name}: {e} entries must be a positive multiple of {w} ways")));
            }
        }
        if self.l2_1g_splinter && self.l2_1g_entries > 0 {
            return Err((
                "machine.tlb.l2_1g_splinter",
                "the second level keeps 1 GiB pages either in their own array (l2_1g_entries > 0) or as 2 MiB pieces (l2_1g_splinter), not both".into(),
            ));
        }
        Ok(())
    }
}

const EMPTY: u64 = u64::MAX;

/// Unused slots after the last set's in [`SetAssoc`]'s tags and payloads, so that slot
/// `set * ways + w` is in range for any set and any nibble `w` (see the field `tags`).
const SLACK: usize = 16;

/// Associativities that keep a packed recency order ([`SetAssoc`]); outside this range,
/// age stamps.
const PACKED_WAYS: std::ops::RangeInclusive<usize> = 5..=16;

/// One set-associative array. Tags are page numbers (already shifted for the page size).
/// Replacement is true LRU within a set, an empty way taken before any valid one.
///
/// Two representations of the same order, chosen by associativity for speed (the
/// differential test against a naive LRU covers both):
/// - sets of 5 to 16 ways (an STLB) keep their recency order packed in one `u64`: nibble
///   `r` holds the way at recency rank `r` (0 = most recent), and empty ways always hold
///   the last ranks. A hit moves its way's nibble to rank 0, an insert takes the way at the
///   last rank (an empty one if any, else the least recent) and an invalidation moves its
///   way to the last rank: a few shifts and masks, however many ways;
/// - narrower sets (an L1 dTLB, where hits dominate) and wider ones (a fully associative
///   TLB) use per-way age stamps: a hit writes one stamp, and the victim of an insert is
///   the first way with the smallest stamp, empty ways having stamp 0.
#[derive(Clone, Debug)]
pub struct SetAssoc {
    sets: usize,
    ways: usize,
    /// `sets - 1` when `sets` is a power of two (the set is the low bits of the page
    /// number, as in hardware), else 0 and the set is the page number modulo `sets`.
    mask: usize,
    /// `sets` is a power of two (1 included): the set is `tag & mask`.
    pow2: bool,
    /// Tags and payloads by slot (`set * ways + way`), followed by [`SLACK`] unused slots.
    ///
    /// The access path indexes these vectors, `meta` and `stamps` without bounds checks
    /// (`get_unchecked`); every such index is proven in range where it is computed, from
    /// these invariants, set in [`SetAssoc::new`] (the vectors are never resized):
    /// `tags` and `data` have `sets * ways + SLACK` elements, `stamps` `sets * ways` (when
    /// used), `meta` `sets` (when used); a set number comes from [`SetAssoc::set_of`]
    /// (below `sets`), a way number is below `ways` or is a nibble (below 16 = `SLACK`).
    tags: Vec<u64>,
    data: Vec<u8>,
    /// Per set (when `ways` is in `PACKED_WAYS`; else empty): the packed recency order
    /// and the fingerprints ([`Meta`]), side by side: an STLB miss reads the fingerprints
    /// and its fill writes both, in one host cache line.
    meta: Vec<Meta>,
    /// The shift of the last rank's nibble (`4 * (ways - 1)`) and the mask of the `ways`
    /// nibbles of a packed order (the nibbles above are always zero).
    last_shift: u32,
    order_mask: u64,
    /// Age stamps per way (when `ways` is outside `PACKED_WAYS`; else empty) and their clock.
    stamps: Vec<u64>,
    tick: u64,
    /// Sets of 8 to 16 ways keep fingerprints ([`Meta::fps`]).
    has_fps: bool,
    /// The existing ways' bits of a [`bytes_equal`] mask (bits 0 .. `ways`).
    fp_ways: u32,
}

/// The per-set state of a packed-order array ([`SetAssoc::meta`]).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
struct Meta {
    /// For sets of 8 to 16 ways: byte `w` is the [`fingerprint`] of way `w`'s tag, so that
    /// a lookup compares the full tags of the few ways whose fingerprint matches (usually
    /// none on a miss) instead of every way. Only a valid way's byte is meaningful (the full
    /// tag decides): an insert writes it, nothing else needs to.
    fps: [u8; 16],
    /// Packed recency order: nibble `r` holds the way at rank `r`.
    order: u64,
}

/// One byte of a tag's hash, kept per way by sets of 8 to 16 ways ([`SetAssoc`]).
#[inline(always)]
fn fingerprint(tag: u64) -> u8 {
    (tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
}

/// Bit `i` set for every byte `i` of `fps` equal to `fp`: the candidates whose full tags a
/// lookup compares. On x86-64, one SSE2 byte compare and a move of its byte mask (the
/// baseline of the architecture); elsewhere a loop over the bytes.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn bytes_equal(fps: [u8; 16], fp: u8) -> u32 {
    use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    // SAFETY: SSE2 is enabled at compile time (this function exists only then; it is part
    // of the x86-64 baseline); the load reads the 16 bytes of `fps` (unaligned: no
    // alignment needed).
    unsafe {
        let v = _mm_loadu_si128(fps.as_ptr().cast::<__m128i>());
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(fp as i8))) as u32
    }
}

/// See the x86-64 version.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline(always)]
fn bytes_equal(fps: [u8; 16], fp: u8) -> u32 {
    let mut m = 0u32;
    for (i, &b) in fps.iter().enumerate() {
        m |= ((b == fp) as u32) << i;
    }
    m
}

/// Payload bit: the page is known dirty.
pub const DIRTY: u8 = 0x80;

/// Every nibble set to 1.
const NIBBLE_ONES: u64 = 0x1111_1111_1111_1111;

/// Rank of way `w` in the packed order `order` (`w` occurs exactly once in it).
#[inline]
fn rank_of(order: u64, w: usize) -> u32 {
    // Nibbles equal to `w` become 0; the lowest zero nibble is found exactly (a borrow can
    // only flag nibbles above a true zero).
    let x = order ^ (w as u64).wrapping_mul(NIBBLE_ONES);
    let z = x.wrapping_sub(NIBBLE_ONES) & !x & (NIBBLE_ONES << 3);
    z.trailing_zeros() / 4
}

/// `order` with the nibble at rank `r` taken out and put at rank 0.
#[inline]
fn move_to_front(order: u64, r: u32) -> u64 {
    let sh = 4 * r;
    let w = (order >> sh) & 0xf;
    let below = order & ((1u64 << sh) - 1);
    let above = if sh + 4 >= 64 { 0 } else { order & !((1u64 << (sh + 4)) - 1) };
    above | (below << 4) | w
}

/// `order` (of `ways` nibbles) with the nibble at rank `r` moved to the last rank.
#[inline]
fn move_to_back(order: u64, r: u32, ways: usize) -> u64 {
    let sh = 4 * r;
    let last = 4 * (ways as u32 - 1);
    let w = (order >> sh) & 0xf;
    let below = order & ((1u64 << sh) - 1);
    let above = if sh + 4 >= 64 { 0 } else { order >> (sh + 4) };
    below | (above << sh) | (w << last)
}

/// The first way with the smallest stamp of an `N`-way set.
#[inline(always)]
fn oldest_way<const N: usize>(s: &[u64; N]) -> usize {
    if N == 4 {
        // A tournament (the first of equal stamps wins each round, as in the scan below):
        // three compares the compiler makes conditional moves, no branch to mispredict.
        let a = if s[1] < s[0] { 1 } else { 0 };
        let b = if s[3] < s[2] { 3 } else { 2 };
        return if s[b] < s[a] { b } else { a };
    }
    let mut victim = 0;
    for w in 1..N {
        if s[w] < s[victim] {
            victim = w;
        }
    }
    victim
}

/// [`oldest_way`] for any associativity.
#[inline]
fn oldest_way_any(stamps: &[u64]) -> usize {
    let mut victim = 0;
    for (w, &x) in stamps.iter().enumerate().skip(1) {
        if x < stamps[victim] {
            victim = w;
        }
    }
    victim
}

/// The way of a 4-way set holding `tag`, compared one way after the other (no iterator
/// state to maintain).
#[inline(always)]
fn way_of4(t: &[u64; 4], tag: u64) -> Option<usize> {
    if t[0] == tag {
        Some(0)
    } else if t[1] == tag {
        Some(1)
    } else if t[2] == tag {
        Some(2)
    } else if t[3] == tag {
        Some(3)
    } else {
        None
    }
}

impl SetAssoc {
    /// An empty array of `entries` entries with `ways` ways.
    pub fn new(entries: usize, ways: usize) -> Self {
        let sets = if entries == 0 { 0 } else { entries / ways };
        let pow2 = sets.is_power_of_two();
        let mask = if pow2 { sets - 1 } else { 0 };
        let packed = PACKED_WAYS.contains(&ways);
        SetAssoc {
            sets,
            ways,
            mask,
            pow2,
            tags: vec![EMPTY; entries + SLACK],
            data: vec![0; entries + SLACK],
            // Way w at rank w: any order of empty ways will do.
            meta: if packed {
                vec![Meta { fps: [0; 16], order: (0..ways as u64).fold(0, |o, w| o | (w << (4 * w))) }; sets]
            } else {
                Vec::new()
            },
            stamps: if packed { Vec::new() } else { vec![0; entries] },
            last_shift: 4 * (ways.max(1) as u32 - 1),
            order_mask: if ways >= 16 { u64::MAX } else { (1u64 << (4 * ways)) - 1 },
            tick: 0,
            has_fps: (8..=16).contains(&ways) && sets > 0,
            fp_ways: if (8..=16).contains(&ways) { (1u32 << ways) - 1 } else { 0 },
        }
    }

    /// True when the array has no entries at all.
    pub fn is_disabled(&self) -> bool {
        self.sets == 0
    }

    /// The set of `tag`, below `sets` (which must not be 0).
    #[inline]
    fn set_of(&self, tag: u64) -> usize {
        if self.pow2 {
            (tag as usize) & self.mask
        } else {
            (tag as usize) % self.sets
        }
    }

    /// Set and way of `tag`, the ways compared in order up to the first match.
    #[inline(always)]
    fn find_in_order(&self, tag: u64) -> Option<(usize, usize)> {
        if self.sets == 0 {
            return None;
        }
        let set = self.set_of(tag);
        let base = set * self.ways;
        // SAFETY: `set < sets`, so `base + ways <= sets * ways`, within `tags`.
        let tags = unsafe { self.tags.get_unchecked(base..base + self.ways) };
        if let Ok(t) = <&[u64; 4]>::try_from(tags) {
            // The usual L1 geometry, unrolled (no iterator state to maintain).
            return way_of4(t, tag).map(|w| (set, w));
        }
        tags.iter().position(|&t| t == tag).map(|w| (set, w))
    }

    /// The way of set `set` (below `sets`) of an array with fingerprints holding `tag`: the
    /// ways whose fingerprint matches, in order, their full tag deciding (a tag is cached at
    /// most once in its set, so the first full match is the only one).
    #[inline(always)]
    fn way_by_fingerprint(&self, set: usize, tag: u64) -> Option<usize> {
        debug_assert!(set < self.sets && self.has_fps);
        let base = set * self.ways;
        // SAFETY: `set < sets`, the length of `meta` (an array with fingerprints).
        let fps = unsafe { self.meta.get_unchecked(set).fps };
        let mut m = bytes_equal(fps, fingerprint(tag)) & self.fp_ways;
        while m != 0 {
            let w = m.trailing_zeros() as usize;
            // SAFETY: `set < sets` and `w < ways` (`fp_ways` has the first `ways` bits only):
            // the slot is within `tags`.
            if unsafe { *self.tags.get_unchecked(base + w) } == tag {
                return Some(w);
            }
            m &= m - 1;
        }
        None
    }

    /// Set and way of `tag` (no page number equals `EMPTY`).
    #[inline(always)]
    fn find(&self, tag: u64) -> Option<(usize, usize)> {
        // Narrow sets (L1 arrays, where hits dominate) stop at the first match; sets of 8 to
        // 16 ways (an STLB, where a miss would compare every way) compare the full tags of
        // the ways whose fingerprint matches (a tag is cached at most once in its set, so
        // the first full match is the only one); wider ones scan.
        // Fingerprints exist exactly for arrays with sets of 8 to 16 ways (none without sets).
        if !self.has_fps {
            return self.find_in_order(tag);
        }
        let set = self.set_of(tag);
        self.way_by_fingerprint(set, tag).map(|w| (set, w))
    }

    /// Make way `w` of `set` the most recent of the set (`set` and `w` as [`SetAssoc::find`]
    /// returns them: `set < sets`, `w < ways`).
    #[inline]
    fn touch(&mut self, set: usize, w: usize) {
        debug_assert!(set < self.sets && w < self.ways);
        if self.meta.is_empty() {
            self.tick += 1;
            // SAFETY: the caller's `set` and `w` come from `find` (`set < sets`, `w < ways`);
            // `stamps` has `sets * ways` elements when `meta` is empty.
            unsafe { *self.stamps.get_unchecked_mut(set * self.ways + w) = self.tick };
        } else {
            // SAFETY: `set < sets` (from `find`); `meta` has `sets` elements when not empty.
            let o = unsafe { &mut self.meta.get_unchecked_mut(set).order };
            let r = rank_of(*o, w);
            if r != 0 {
                *o = move_to_front(*o, r);
            }
        }
    }

    /// Look `tag` up; on a hit make it most recent and return its payload.
    #[inline(always)]
    pub fn lookup(&mut self, tag: u64) -> Option<u8> {
        let (set, w) = self.find(tag)?;
        self.touch(set, w);
        // SAFETY: `set < sets` and `w < ways` (from `find`): the slot is within `data`.
        Some(unsafe { *self.data.get_unchecked(set * self.ways + w) })
    }

    /// [`SetAssoc::lookup`] for a narrow, hit-dominated array (the L1 dTLB on the access
    /// path): the ways are compared in order up to the first match.
    #[inline(always)]
    pub fn lookup_narrow(&mut self, tag: u64) -> Option<u8> {
        let (set, w) = self.find_in_order(tag)?;
        self.touch(set, w);
        // SAFETY: `set < sets` and `w < ways` (from `find_in_order`): within `data`.
        Some(unsafe { *self.data.get_unchecked(set * self.ways + w) })
    }

    /// Whether `tag` is cached (no recency update).
    pub fn contains(&self, tag: u64) -> bool {
        self.find(tag).is_some()
    }

    /// Update the payload of a cached entry (no recency change).
    pub fn update(&mut self, tag: u64, data: u8) {
        if let Some((set, w)) = self.find(tag) {
            self.data[set * self.ways + w] = data;
        }
    }

    /// Insert `tag` as most recent (it must not be cached), evicting the least recent way
    /// (an empty way first). Returns the evicted tag.
    #[inline(always)]
    pub fn insert(&mut self, tag: u64, data: u8) -> Option<u64> {
        if self.sets == 0 {
            return None;
        }
        let set = self.set_of(tag);
        let base = set * self.ways;
        let w = if self.meta.is_empty() {
            // SAFETY: `set < sets`, so `base + ways <= sets * ways`, the length of `stamps`
            // when `meta` is empty.
            let stamps = unsafe { self.stamps.get_unchecked_mut(base..base + self.ways) };
            self.tick += 1;
            if let Ok(s) = <&mut [u64; 4]>::try_from(&mut *stamps) {
                // The usual L1 geometry: the victim's stamp is written without a bounds check.
                let victim = oldest_way::<4>(s);
                s[victim] = self.tick;
                victim
            } else {
                let victim = oldest_way_any(stamps);
                stamps[victim] = self.tick;
                victim
            }
        } else {
            // The way at the last rank moves to rank 0: every other nibble moves up one rank
            // (`move_to_front(o, ways - 1)`, nothing being above the last rank).
            // SAFETY: `set < sets`, the length of `meta` when not empty.
            let o = unsafe { &mut self.meta.get_unchecked_mut(set).order };
            let w = ((*o >> self.last_shift) & 0xf) as usize;
            debug_assert_eq!(*o & !self.order_mask, 0);
            *o = ((*o << 4) & self.order_mask) | w as u64;
            if self.has_fps {
                self.meta[set].fps[w] = fingerprint(tag);
            }
            w
        };
        debug_assert!(w < self.ways);
        let i = base + w;
        // SAFETY: `set < sets` and `w` is below `ways` (a victim of the stamps) or is a
        // nibble (below `SLACK`): `i < sets * ways + SLACK`, the length of `tags` and `data`.
        let old = unsafe { std::mem::replace(self.tags.get_unchecked_mut(i), tag) };
        // SAFETY: as above.
        unsafe { *self.data.get_unchecked_mut(i) = data };
        (old != EMPTY).then_some(old)
    }

    /// The usual L1 dTLB geometry: 4 ways (age stamps) and a power-of-two number of sets
    /// (at least one). The specialised paths of [`CoreTlb`] use it.
    fn is_4way_pow2(&self) -> bool {
        self.ways == 4 && self.pow2 && self.sets > 0 && self.meta.is_empty()
    }

    /// The usual STLB geometry: 8 to 16 ways (a packed order and fingerprints) and a
    /// power-of-two number of sets (at least one).
    fn is_fp_pow2(&self) -> bool {
        (8..=16).contains(&self.ways) && self.pow2 && self.sets > 0 && self.has_fps
    }

    /// [`SetAssoc::insert`] for an array with [`SetAssoc::is_4way_pow2`] (the evicted tag
    /// is not returned): no test of the geometry.
    #[inline(always)]
    fn insert_4way_pow2(&mut self, tag: u64, data: u8) {
        debug_assert!(self.is_4way_pow2());
        let base = ((tag as usize) & self.mask) * 4;
        // SAFETY: the set `tag & mask` is below `sets` (`mask = sets - 1`, `sets` a power of
        // two) and `ways` is 4, so `base + 4 <= sets * ways`, the length of `stamps` (the
        // array keeps stamps: `meta` is empty).
        let s = unsafe { &mut *self.stamps.as_mut_ptr().add(base).cast::<[u64; 4]>() };
        self.tick += 1;
        let i = base + oldest_way::<4>(s);
        // SAFETY: `i < sets * ways`, within `stamps`, `tags` and `data`.
        unsafe {
            *self.stamps.get_unchecked_mut(i) = self.tick;
            *self.tags.get_unchecked_mut(i) = tag;
            *self.data.get_unchecked_mut(i) = data;
        }
    }

    /// [`SetAssoc::lookup_narrow`] for an array with [`SetAssoc::is_4way_pow2`]: no test of
    /// the geometry.
    #[inline(always)]
    fn lookup_4way_pow2(&mut self, tag: u64) -> Option<u8> {
        debug_assert!(self.is_4way_pow2());
        let base = ((tag as usize) & self.mask) * 4;
        // SAFETY: the set `tag & mask` is below `sets` (`mask = sets - 1`) and `ways` is 4:
        // `base + 4 <= sets * ways`, within `tags`.
        let t = unsafe { &*self.tags.as_ptr().add(base).cast::<[u64; 4]>() };
        let w = way_of4(t, tag)?;
        self.tick += 1;
        // SAFETY: `base + w < sets * ways`, within `stamps` (the array keeps stamps) and `data`.
        unsafe {
            *self.stamps.get_unchecked_mut(base + w) = self.tick;
            Some(*self.data.get_unchecked(base + w))
        }
    }

    /// [`SetAssoc::insert`] for an array with [`SetAssoc::is_fp_pow2`] (the evicted tag is
    /// not returned): no test of the geometry.
    #[inline(always)]
    fn insert_fp_pow2(&mut self, tag: u64, data: u8) {
        debug_assert!(self.is_fp_pow2());
        let set = (tag as usize) & self.mask;
        // SAFETY: `set < sets` (`mask = sets - 1`), the length of `meta` (it
        // exists for 5 to 16 ways).
        let o = unsafe { &mut self.meta.get_unchecked_mut(set).order };
        let w = ((*o >> self.last_shift) & 0xf) as usize;
        debug_assert_eq!(*o & !self.order_mask, 0);
        *o = ((*o << 4) & self.order_mask) | w as u64;
        // SAFETY: as above; `w` is a nibble, below 16.
        unsafe { self.meta.get_unchecked_mut(set).fps[w & 0xf] = fingerprint(tag) };
        let i = set * self.ways + w;
        // SAFETY: `set < sets` and `w < 16 = SLACK`: `i < sets * ways + SLACK`, the length
        // of `tags` and `data`.
        unsafe {
            *self.tags.get_unchecked_mut(i) = tag;
            *self.data.get_unchecked_mut(i) = data;
        }
    }

    /// [`SetAssoc::lookup`] for an array with [`SetAssoc::is_fp_pow2`]: no test of the
    /// geometry.
    #[inline(always)]
    fn lookup_fp_pow2(&mut self, tag: u64) -> Option<u8> {
        debug_assert!(self.is_fp_pow2());
        let set = (tag as usize) & self.mask;
        let w = self.way_by_fingerprint(set, tag)?;
        self.touch(set, w);
        // SAFETY: `set < sets` and `w < ways`: the slot is within `data`.
        Some(unsafe { *self.data.get_unchecked(set * self.ways + w) })
    }

    /// Empty way `w` of `set`: it becomes the first to be refilled.
    #[inline]
    fn clear_way(&mut self, set: usize, w: usize) {
        let i = set * self.ways + w;
        self.tags[i] = EMPTY;
        if self.meta.is_empty() {
            self.stamps[i] = 0;
        } else {
            let o = self.meta[set].order;
            self.meta[set].order = move_to_back(o, rank_of(o, w), self.ways);
        }
    }

    /// Drop `tag` if present; returns whether it was.
    pub fn invalidate(&mut self, tag: u64) -> bool {
        match self.find(tag) {
            Some((set, w)) => {
                self.clear_way(set, w);
                true
            }
            None => false,
        }
    }

    /// Drop every entry.
    pub fn flush(&mut self) {
        self.tags.fill(EMPTY);
        self.stamps.fill(0);
    }

    /// Drop every entry whose tag lies in `[lo, hi)`; returns how many.
    pub fn invalidate_range(&mut self, lo: u64, hi: u64) -> usize {
        if hi.saturating_sub(lo) <= self.ways as u64 * 4 {
            return (lo..hi).filter(|&t| self.invalidate(t)).count();
        }
        let mut n = 0;
        for set in 0..self.sets {
            for w in 0..self.ways {
                let t = self.tags[set * self.ways + w];
                if t != EMPTY && t >= lo && t < hi {
                    self.clear_way(set, w);
                    n += 1;
                }
            }
        }
        n
    }

    /// Drop every entry whose tag lies in `[lo, hi)` and whose payload has a bit of `flag`;
    /// returns how many.
    pub fn invalidate_flagged(&mut self, lo: u64, hi: u64, flag: u8) -> usize {
        let mut n = 0;
        for set in 0..self.sets {
            for w in 0..self.ways {
                let i = set * self.ways + w;
                let t = self.tags[i];
                if t != EMPTY && t >= lo && t < hi && self.data[i] & flag != 0 {
                    self.clear_way(set, w);
                    n += 1;
                }
            }
        }
        n
    }

    /// Number of valid entries (the slack slots are always empty).
    pub fn occupancy(&self) -> usize {
        self.tags.iter().filter(|&&t| t != EMPTY).count()
    }
}

/// Result of a TLB lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbHit {
    /// Hit in an L1 array; payload; the page size of the entry.
    L1 {
        /// Payload (node and [`DIRTY`]).
        data: u8,
        /// Size of the cached page.
        size: PageSize,
    },
    /// Hit in the L2 (refilled into L1); payload; the page size of the entry.
    L2 {
        /// Payload (node and [`DIRTY`]).
        data: u8,
        /// Size of the cached page.
        size: PageSize,
    },
    /// Miss everywhere.
    Miss,
}

/// The node bits of an entry's payload (the rest is [`DIRTY`] and [`G1`]; nodes are fewer
/// than 64, `os::MAX_NODES`).
pub const NODE: u8 = 0x3f;
/// Payload bit of a 2 MiB entry of the shared L2 that caches a piece of a 1 GiB page
/// (`l2_1g_splinter`).
pub const G1: u8 = 0x40;

/// Tags of 2 MiB pages in the L2 TLB carry this bit (4 KiB tags are `va >> 12`).
const L2_HUGE: u64 = 1 << 63;
/// Tags of 64 KiB pages in the L2 TLB carry this bit.
const L2_64K: u64 = 1 << 62;
/// 2 MiB tags per 1 GiB.
const HUGE_PER_1G: u64 = HUGE_1G_SIZE / HUGE_SIZE;

/// `CoreTlb::cached`: a 2 MiB translation may be cached.
const HUGE_CACHED: u8 = 1;
/// `CoreTlb::cached`: a 64 KiB translation may be cached.
const K64_CACHED: u8 = 2;
/// `CoreTlb::cached`: a 1 GiB translation may be cached in a 1 GiB array.
const G1_CACHED: u8 = 4;
/// `CoreTlb::cached`: the arrays do not have the usual geometry (`CoreTlb::fast_4k` false);
/// set for the array's life, so that `cached == 0` says "4 KiB translations only, in the
/// usual geometry" with one test ([`CoreTlb::plain_4k`]).
const ODD_GEOMETRY: u8 = 0x80;
/// `CoreTlb::cached`: a TLB-miss sampler is on (`CoreTlb::set_sampled`): misses take the
/// general path, which tells the sampler.
const SAMPLED: u8 = 0x20;

/// How a core caches 1 GiB pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OneGig {
    /// No 1 GiB arrays: as the 2 MiB page holding the address (the model before them).
    As2M,
    /// An L1 1 GiB array; the L2 holds no 1 GiB translation.
    L1Only,
    /// L1 and a second-level 1 GiB array.
    Separate,
    /// L1; the shared L2 holds the 2 MiB piece (payload flag [`G1`]).
    Splinter,
}

/// One core's TLBs.
#[derive(Clone, Debug)]
pub struct CoreTlb {
    /// L1 for 4 KiB pages (tag = va >> 12).
    pub l1_4k: SetAssoc,
    /// L1 for 2 MiB pages (tag = va >> 21).
    pub l1_2m: SetAssoc,
    /// Second level, every size.
    pub l2: SetAssoc,
    /// Single-entry invalidations executed on this core.
    pub invalidations: u64,
    /// Full flushes executed on this core.
    pub flushes: u64,
    /// Which other sizes than 4 KiB may be cached ([`HUGE_CACHED`], [`K64_CACHED`],
    /// [`G1_CACHED`]): 4 KiB-only runs skip every other lookup with one test.
    cached: u8,
    /// Whether a 2 MiB entry may cache part of a 1 GiB page (INVLPG then drops the 2 MiB
    /// entries of the whole 1 GiB).
    g1_pieces: bool,
    one_gig: OneGig,
    /// The L1 4 KiB array has the usual geometry ([`SetAssoc::is_4way_pow2`]) and the L2
    /// the usual STLB one ([`SetAssoc::is_fp_pow2`]): a 4 KiB miss and fill take the
    /// specialised paths (the arrays are never replaced after construction).
    fast_4k: bool,
    /// The arrays of the rarer page sizes (out of line: the 4 KiB path does not touch them).
    pub rare: Box<RareArrays>,
}

/// A core's TLB arrays for 64 KiB and 1 GiB pages.
#[derive(Clone, Debug)]
pub struct RareArrays {
    /// L1 for 64 KiB pages (Knights Corner; tag = va >> 16); no entries on other CPUs.
    pub l1_64k: SetAssoc,
    /// L1 for 1 GiB pages (tag = va >> 30); no entries unless `l1_1g_entries` > 0.
    pub l1_1g: SetAssoc,
    /// Second level for 1 GiB pages only (tag = va >> 30); no entries unless `l2_1g_entries`.
    pub l2_1g: SetAssoc,
}

impl CoreTlb {
    /// TLBs of the given geometry (no 64 KiB array).
    pub fn new(c: &TlbConfig) -> Self {
        Self::with_64k(c, 0, 0)
    }

    /// TLBs of the given geometry with a 64 KiB L1 array of `entries` / `ways` (0 = none).
    pub fn with_64k(c: &TlbConfig, entries: usize, ways: usize) -> Self {
        let one_gig = if c.l1_1g_entries == 0 {
            OneGig::As2M
        } else if c.l2_1g_entries > 0 {
            OneGig::Separate
        } else if c.l2_1g_splinter && c.l2_entries > 0 {
            OneGig::Splinter
        } else {
            OneGig::L1Only
        };
        let (g1_l1, g1_l2) = match one_gig {
            OneGig::As2M => (0, 0),
            OneGig::Separate => (c.l1_1g_entries, c.l2_1g_entries),
            _ => (c.l1_1g_entries, 0),
        };
        let l1_4k = SetAssoc::new(c.l1_4k_entries, c.l1_4k_ways);
        let l2 = SetAssoc::new(c.l2_entries, c.l2_ways);
        let fast_4k = l1_4k.is_4way_pow2() && l2.is_fp_pow2();
        CoreTlb {
            fast_4k,
            l1_4k,
            l1_2m: SetAssoc::new(c.l1_2m_entries, c.l1_2m_ways),
            l2,
            rare: Box::new(RareArrays {
                l1_64k: SetAssoc::new(entries, ways.max(1)),
                l1_1g: SetAssoc::new(g1_l1, c.l1_1g_ways.max(1)),
                l2_1g: SetAssoc::new(g1_l2, c.l2_1g_ways.max(1)),
            }),
            invalidations: 0,
            flushes: 0,
            cached: if fast_4k { 0 } else { ODD_GEOMETRY },
            g1_pieces: false,
            one_gig,
        }
    }

    /// Only 4 KiB translations can be cached, the arrays have the usual geometry and no
    /// TLB-miss sampler is on: a miss in the L1 4 KiB array may go straight to
    /// [`CoreTlb::lookup_l2_4k_plain`] and a walk's 4 KiB translation to
    /// [`CoreTlb::fill_4k_plain`].
    #[inline(always)]
    pub fn plain_4k(&self) -> bool {
        self.cached == 0
    }

    /// The arrays have the usual geometry (4-way L1 4 KiB sets, an STLB of 8 to 16 ways, a
    /// power-of-two number of sets in both): [`CoreTlb::lookup_l1_4k_usual`] may be used.
    pub fn usual_geometry(&self) -> bool {
        self.fast_4k
    }

    /// A TLB-miss sampler is on (or off): [`CoreTlb::plain_4k`] no longer holds (holds again).
    pub fn set_sampled(&mut self, on: bool) {
        if on {
            self.cached |= SAMPLED;
        } else {
            self.cached &= !SAMPLED;
        }
    }

    /// [`CoreTlb::lookup_l1_4k`] in the usual geometry ([`CoreTlb::usual_geometry`]), without
    /// its test.
    #[inline(always)]
    pub fn lookup_l1_4k_usual(&mut self, va: u64) -> Option<u8> {
        debug_assert!(self.fast_4k);
        self.l1_4k.lookup_4way_pow2(va >> PAGE_SHIFT)
    }

    /// The L2 lookup of a 4 KiB page under [`CoreTlb::plain_4k`] (after an L1 miss); a hit
    /// is refilled into the L1. The same as [`CoreTlb::lookup_after_l1_4k_miss`] then.
    #[inline(always)]
    pub fn lookup_l2_4k_plain(&mut self, va: u64) -> Option<u8> {
        debug_assert!(self.plain_4k() && self.fast_4k);
        let d = self.l2.lookup_fp_pow2(va >> PAGE_SHIFT)?;
        self.l1_4k.insert_4way_pow2(va >> PAGE_SHIFT, d);
        Some(d)
    }

    /// [`CoreTlb::fill`] of a 4 KiB page in the usual geometry (`fast_4k`, which
    /// [`CoreTlb::plain_4k`] implies).
    #[inline(always)]
    pub fn fill_4k_plain(&mut self, va: u64, data: u8) {
        debug_assert!(self.fast_4k);
        self.l1_4k.insert_4way_pow2(va >> PAGE_SHIFT, data);
        self.l2.insert_fp_pow2(va >> PAGE_SHIFT, data);
    }

    /// Look `va` up in the L1 4 KiB array only (the ways compared in order up to the first
    /// match; a hit becomes the most recent of its set).
    #[inline(always)]
    pub fn lookup_l1_4k(&mut self, va: u64) -> Option<u8> {
        if self.fast_4k {
            self.l1_4k.lookup_4way_pow2(va >> PAGE_SHIFT)
        } else {
            self.l1_4k.lookup_narrow(va >> PAGE_SHIFT)
        }
    }

    /// Look `va` up in L1 (every size), then L2.
    #[inline(always)]
    pub fn lookup(&mut self, va: u64) -> TlbHit {
        if let Some(d) = self.lookup_l1_4k(va) {
            return TlbHit::L1 { data: d, size: PageSize::Base4K };
        }
        self.lookup_after_l1_4k_miss(va)
    }

    /// [`CoreTlb::lookup`] for a caller that already looked `va` up in the L1 4 KiB array
    /// and missed (a miss changes nothing, so this is the same lookup without repeating it).
    #[inline(always)]
    pub fn lookup_after_l1_4k_miss(&mut self, va: u64) -> TlbHit {
        let cached = self.cached;
        if cached != 0 {
            if cached & HUGE_CACHED != 0 {
                if let Some(d) = self.l1_2m.lookup(va >> HUGE_SHIFT) {
                    return TlbHit::L1 { data: d, size: PageSize::Huge2M };
                }
            }
            if cached & K64_CACHED != 0 {
                if let Some(d) = self.rare.l1_64k.lookup(va >> PAGE_64K_SHIFT) {
                    return TlbHit::L1 { data: d, size: PageSize::Knc64K };
                }
            }
            if cached & G1_CACHED != 0 {
                if let Some(d) = self.rare.l1_1g.lookup(va >> HUGE_1G_SHIFT) {
                    return TlbHit::L1 { data: d, size: PageSize::Huge1G };
                }
                if let Some(d) = self.rare.l2_1g.lookup(va >> HUGE_1G_SHIFT) {
                    self.rare.l1_1g.insert(va >> HUGE_1G_SHIFT, d);
                    return TlbHit::L2 { data: d, size: PageSize::Huge1G };
                }
            }
        }
        if self.fast_4k {
            if let Some(d) = self.l2.lookup_fp_pow2(va >> PAGE_SHIFT) {
                self.l1_4k.insert_4way_pow2(va >> PAGE_SHIFT, d);
                return TlbHit::L2 { data: d, size: PageSize::Base4K };
            }
        } else {
            if self.l2.is_disabled() {
                return TlbHit::Miss;
            }
            if let Some(d) = self.l2.lookup(va >> PAGE_SHIFT) {
                self.l1_4k.insert(va >> PAGE_SHIFT, d);
                return TlbHit::L2 { data: d, size: PageSize::Base4K };
            }
        }
        if cached != 0 {
            return self.lookup_l2_other(va, cached);
        }
        TlbHit::Miss
    }

    /// The L2 lookups of the sizes other than 4 KiB (after an L2 4 KiB miss).
    #[inline(never)]
    fn lookup_l2_other(&mut self, va: u64, cached: u8) -> TlbHit {
        if cached & HUGE_CACHED != 0 {
            if let Some(d) = self.l2.lookup((va >> HUGE_SHIFT) | L2_HUGE) {
                if d & G1 != 0 && self.one_gig == OneGig::Splinter {
                    // A piece of a 1 GiB page: the L1 gets the whole page back.
                    let d = d & !G1;
                    self.cached |= G1_CACHED;
                    self.rare.l1_1g.insert(va >> HUGE_1G_SHIFT, d);
                    return TlbHit::L2 { data: d, size: PageSize::Huge1G };
                }
                self.l1_2m.insert(va >> HUGE_SHIFT, d);
                return TlbHit::L2 { data: d, size: PageSize::Huge2M };
            }
        }
        if cached & K64_CACHED != 0 {
            if let Some(d) = self.l2.lookup((va >> PAGE_64K_SHIFT) | L2_64K) {
                self.rare.l1_64k.insert(va >> PAGE_64K_SHIFT, d);
                return TlbHit::L2 { data: d, size: PageSize::Knc64K };
            }
        }
        TlbHit::Miss
    }

    /// Fill after a walk (a 4 KiB page inline, the other sizes out of line).
    #[inline(always)]
    pub fn fill(&mut self, va: u64, size: PageSize, data: u8) {
        if size == PageSize::Base4K {
            if self.fast_4k {
                self.l1_4k.insert_4way_pow2(va >> PAGE_SHIFT, data);
                self.l2.insert_fp_pow2(va >> PAGE_SHIFT, data);
            } else {
                self.l1_4k.insert(va >> PAGE_SHIFT, data);
                self.l2.insert(va >> PAGE_SHIFT, data);
            }
        } else {
            self.fill_other(va, size, data);
        }
    }

    /// [`CoreTlb::fill`] of a page other than 4 KiB.
    #[inline(never)]
    fn fill_other(&mut self, va: u64, size: PageSize, data: u8) {
        match size {
            PageSize::Base4K => unreachable!("CoreTlb::fill inserts 4 KiB pages itself"),
            PageSize::Huge2M => {
                self.cached |= HUGE_CACHED;
                self.l1_2m.insert(va >> HUGE_SHIFT, data);
                self.l2.insert((va >> HUGE_SHIFT) | L2_HUGE, data);
            }
            PageSize::Knc64K => {
                self.cached |= K64_CACHED;
                self.rare.l1_64k.insert(va >> PAGE_64K_SHIFT, data);
                self.l2.insert((va >> PAGE_64K_SHIFT) | L2_64K, data);
            }
            PageSize::Huge1G => self.fill_1g(va, data),
        }
    }

    #[cold]
    fn fill_1g(&mut self, va: u64, data: u8) {
        if self.one_gig == OneGig::As2M {
            // No 1 GiB arrays: cache it as the 2 MiB page holding `va` (flagged as a piece).
            self.cached |= HUGE_CACHED;
            self.g1_pieces = true;
            self.l1_2m.insert(va >> HUGE_SHIFT, data | G1);
            self.l2.insert((va >> HUGE_SHIFT) | L2_HUGE, data | G1);
            return;
        }
        self.cached |= G1_CACHED;
        self.rare.l1_1g.insert(va >> HUGE_1G_SHIFT, data);
        match self.one_gig {
            OneGig::Separate => {
                self.rare.l2_1g.insert(va >> HUGE_1G_SHIFT, data);
            }
            OneGig::Splinter => {
                self.cached |= HUGE_CACHED;
                self.g1_pieces = true;
                self.l2.insert((va >> HUGE_SHIFT) | L2_HUGE, data | G1);
            }
            OneGig::L1Only | OneGig::As2M => {}
        }
    }

    /// Mark the cached translation of `va` dirty.
    pub fn mark_dirty(&mut self, va: u64, size: PageSize, data: u8) {
        match size {
            PageSize::Base4K => {
                self.l1_4k.update(va >> PAGE_SHIFT, data);
                self.l2.update(va >> PAGE_SHIFT, data);
            }
            PageSize::Huge2M => {
                self.l1_2m.update(va >> HUGE_SHIFT, data);
                self.l2.update((va >> HUGE_SHIFT) | L2_HUGE, data);
            }
            PageSize::Huge1G => match self.one_gig {
                OneGig::As2M => {
                    self.l1_2m.update(va >> HUGE_SHIFT, data | G1);
                    self.l2.update((va >> HUGE_SHIFT) | L2_HUGE, data | G1);
                }
                _ => {
                    self.rare.l1_1g.update(va >> HUGE_1G_SHIFT, data);
                    self.rare.l2_1g.update(va >> HUGE_1G_SHIFT, data);
                    if self.one_gig == OneGig::Splinter {
                        self.l2.update((va >> HUGE_SHIFT) | L2_HUGE, data | G1);
                    }
                }
            },
            PageSize::Knc64K => {
                self.rare.l1_64k.update(va >> PAGE_64K_SHIFT, data);
                self.l2.update((va >> PAGE_64K_SHIFT) | L2_64K, data);
            }
        }
    }

    /// Whether any level caches a translation for `va`.
    pub fn caches(&self, va: u64) -> bool {
        self.l1_4k.contains(va >> PAGE_SHIFT)
            || self.l1_2m.contains(va >> HUGE_SHIFT)
            || (self.cached & K64_CACHED != 0 && self.rare.l1_64k.contains(va >> PAGE_64K_SHIFT))
            || self.rare.l1_1g.contains(va >> HUGE_1G_SHIFT)
            || self.l2.contains(va >> PAGE_SHIFT)
            || self.l2.contains((va >> HUGE_SHIFT) | L2_HUGE)
            || self.l2.contains((va >> PAGE_64K_SHIFT) | L2_64K)
            || self.rare.l2_1g.contains(va >> HUGE_1G_SHIFT)
    }

    /// INVLPG: drop the translation of the page containing `va` (any size).
    pub fn invalidate(&mut self, va: u64) {
        self.invalidations += 1;
        self.l1_4k.invalidate(va >> PAGE_SHIFT);
        self.l1_2m.invalidate(va >> HUGE_SHIFT);
        self.l2.invalidate(va >> PAGE_SHIFT);
        self.l2.invalidate((va >> HUGE_SHIFT) | L2_HUGE);
        if self.cached & K64_CACHED != 0 {
            self.rare.l1_64k.invalidate(va >> PAGE_64K_SHIFT);
            self.l2.invalidate((va >> PAGE_64K_SHIFT) | L2_64K);
        }
        if self.cached & G1_CACHED != 0 {
            self.rare.l1_1g.invalidate(va >> HUGE_1G_SHIFT);
            self.rare.l2_1g.invalidate(va >> HUGE_1G_SHIFT);
        }
        if self.g1_pieces {
            // `va` may lie in a 1 GiB page cached as 2 MiB pieces elsewhere in its 1 GiB.
            let lo = (va >> HUGE_1G_SHIFT) * HUGE_PER_1G;
            self.l1_2m.invalidate_flagged(lo, lo + HUGE_PER_1G, G1);
            self.l2.invalidate_flagged(lo | L2_HUGE, (lo + HUGE_PER_1G) | L2_HUGE, G1);
        }
    }

    /// Drop every translation within `[start, end)`.
    pub fn invalidate_range(&mut self, start: u64, end: u64) {
        self.invalidations += 1;
        self.l1_4k.invalidate_range(start >> PAGE_SHIFT, end.div_ceil(PAGE_SIZE));
        self.l1_2m.invalidate_range(start >> HUGE_SHIFT, end.div_ceil(HUGE_SIZE));
        self.l2.invalidate_range(start >> PAGE_SHIFT, end.div_ceil(PAGE_SIZE));
        self.l2.invalidate_range((start >> HUGE_SHIFT) | L2_HUGE, end.div_ceil(HUGE_SIZE) | L2_HUGE);
        if self.cached & K64_CACHED != 0 {
            self.rare.l1_64k.invalidate_range(start >> PAGE_64K_SHIFT, end.div_ceil(PAGE_64K_SIZE));
            self.l2
                .invalidate_range((start >> PAGE_64K_SHIFT) | L2_64K, end.div_ceil(PAGE_64K_SIZE) | L2_64K);
        }
        let (lo, hi) = (start >> HUGE_1G_SHIFT, end.div_ceil(HUGE_1G_SIZE));
        if self.cached & G1_CACHED != 0 {
            self.rare.l1_1g.invalidate_range(lo, hi);
            self.rare.l2_1g.invalidate_range(lo, hi);
        }
        if self.g1_pieces {
            // Pieces of a 1 GiB page that overlaps the range, wherever they lie in it.
            let (lo, hi) = (lo * HUGE_PER_1G, hi * HUGE_PER_1G);
            self.l1_2m.invalidate_flagged(lo, hi, G1);
            self.l2.invalidate_flagged(lo | L2_HUGE, hi | L2_HUGE, G1);
        }
    }

    /// Drop everything.
    pub fn flush(&mut self) {
        self.flushes += 1;
        self.cached &= ODD_GEOMETRY | SAMPLED;
        self.g1_pieces = false;
        self.l1_4k.flush();
        self.l1_2m.flush();
        self.rare.l1_64k.flush();
        self.rare.l1_1g.flush();
        self.l2.flush();
        self.rare.l2_1g.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_within_a_set() {
        let mut t = SetAssoc::new(8, 2); // 4 sets x 2 ways
        t.insert(0, 0);
        t.insert(4, 0); // same set (0)
        assert!(t.lookup(0).is_some()); // 0 most recent
        t.insert(8, 0); // evicts 4
        assert!(t.contains(0) && t.contains(8) && !t.contains(4));
    }

    /// Differential test against a naive LRU (a recency-ordered list per set).
    #[test]
    fn matches_naive_lru() {
        for (entries, ways) in
            [(64, 4), (1536, 12), (24, 3), (8, 8), (16, 16), (30, 10), (32, 32), (40, 20), (6, 1)]
        {
            let sets = entries / ways;
            let mut fast = SetAssoc::new(entries, ways);
            // The specialised lookup and insert of the usual L1 and STLB geometries, on a
            // copy fed the same lookups and inserts (no invalidations: they have none).
            let mut spec = SetAssoc::new(entries, ways);
            let (l1_like, l2_like) = (spec.is_4way_pow2(), spec.is_fp_pow2());
            let mut spec_naive: Vec<Vec<u64>> = vec![Vec::new(); sets];
            let mut naive: Vec<Vec<u64>> = vec![Vec::new(); sets];
            let mut x = 99u64;
            for _ in 0..50_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let tag = (x >> 33) % (entries as u64 * 3);
                let set = &mut naive[(tag % sets as u64) as usize];
                let hit_naive = if let Some(p) = set.iter().position(|&t| t == tag) {
                    set.remove(p);
                    set.insert(0, tag);
                    true
                } else {
                    set.insert(0, tag);
                    set.truncate(ways);
                    false
                };
                let hit_fast = fast.lookup(tag).is_some();
                if !hit_fast {
                    fast.insert(tag, 0);
                }
                assert_eq!(hit_fast, hit_naive, "{entries}/{ways} tag {tag}");
                if l1_like || l2_like {
                    let set = &mut spec_naive[(tag % sets as u64) as usize];
                    let want = set.iter().position(|&t| t == tag).map(|p| set.remove(p));
                    set.insert(0, tag);
                    set.truncate(ways);
                    let data = (tag % 251) as u8;
                    let got = if l1_like { spec.lookup_4way_pow2(tag) } else { spec.lookup_fp_pow2(tag) };
                    assert_eq!(got.is_some(), want.is_some(), "specialised {entries}/{ways} tag {tag}");
                    match got {
                        Some(d) => assert_eq!(d, data, "specialised {entries}/{ways} payload of {tag}"),
                        None if l1_like => spec.insert_4way_pow2(tag, data),
                        None => spec.insert_fp_pow2(tag, data),
                    }
                }
                if (x >> 7).is_multiple_of(97) {
                    let victim = (x >> 13) % (entries as u64 * 3);
                    fast.invalidate(victim);
                    for s in naive.iter_mut() {
                        s.retain(|&t| t != victim);
                    }
                }
                if (x >> 9).is_multiple_of(1009) {
                    // A range wide enough for the whole-array pass.
                    let lo = (x >> 17) % (entries as u64 * 3);
                    let hi = lo + ways as u64 * 4 + 1 + (x >> 40) % (entries as u64);
                    let want: usize =
                        naive.iter().map(|s| s.iter().filter(|&&t| t >= lo && t < hi).count()).sum();
                    assert_eq!(fast.invalidate_range(lo, hi), want, "{entries}/{ways} range {lo}..{hi}");
                    for s in naive.iter_mut() {
                        s.retain(|&t| t < lo || t >= hi);
                    }
                }
                if (x >> 11).is_multiple_of(4001) {
                    // A flush leaves the fingerprints of the emptied ways behind: harmless.
                    fast.flush();
                    naive.iter_mut().for_each(Vec::clear);
                }
                let occupied: usize = naive.iter().map(|s| s.len()).sum();
                assert_eq!(fast.occupancy(), occupied);
            }
        }
    }

    #[test]
    fn usual_geometries_take_the_specialised_4k_paths() {
        assert!(CoreTlb::new(&TlbConfig::default()).fast_4k);
        let small = TlbConfig { l1_4k_entries: 8, l1_4k_ways: 2, ..TlbConfig::default() };
        assert!(!CoreTlb::new(&small).fast_4k);
        let odd_sets = TlbConfig { l2_entries: 1200, l2_ways: 12, ..TlbConfig::default() };
        assert!(!CoreTlb::new(&odd_sets).fast_4k);
        let no_l2 = TlbConfig { l2_entries: 0, ..TlbConfig::default() };
        assert!(!CoreTlb::new(&no_l2).fast_4k);
    }

    #[test]
    fn plain_4k_holds_until_another_size_is_cached_and_again_after_a_flush() {
        let mut t = CoreTlb::new(&TlbConfig::default());
        assert!(t.plain_4k());
        t.fill(0x1000, PageSize::Base4K, 1);
        assert!(t.plain_4k());
        // The plain L2 lookup finds the L2 entry and refills the L1 as the full lookup does.
        t.l1_4k.flush();
        assert_eq!(t.lookup_l2_4k_plain(0x1000), Some(1));
        assert_eq!(t.lookup_l1_4k(0x1000), Some(1));
        t.fill(0x4000_0000, PageSize::Huge2M, 2);
        assert!(!t.plain_4k(), "a 2 MiB translation is cached: every array must be looked up");
        t.flush();
        assert!(t.plain_4k());
        t.set_sampled(true);
        assert!(!t.plain_4k(), "a TLB-miss sampler is on: misses take the general path");
        t.flush();
        assert!(!t.plain_4k(), "a flush does not turn the sampler off");
        t.set_sampled(false);
        assert!(t.plain_4k());
        for odd in [
            TlbConfig { l1_4k_entries: 8, l1_4k_ways: 2, ..TlbConfig::default() },
            TlbConfig { l2_entries: 0, ..TlbConfig::default() },
        ] {
            let mut t = CoreTlb::new(&odd);
            assert!(!t.plain_4k(), "{odd:?}");
            t.flush();
            assert!(!t.plain_4k(), "a flush keeps the geometry's mark: {odd:?}");
        }
    }

    #[test]
    fn l2_refills_l1() {
        let mut c = CoreTlb::new(&TlbConfig::default());
        c.fill(0x1000, PageSize::Base4K, 3);
        // Evict from L1 by filling its set (16 sets x 4 ways): same set every 16 pages.
        for k in 1..=4u64 {
            c.fill(0x1000 + k * 16 * 4096, PageSize::Base4K, 0);
        }
        assert!(!c.l1_4k.contains(1));
        assert_eq!(c.lookup(0x1000), TlbHit::L2 { data: 3, size: PageSize::Base4K });
        assert_eq!(c.lookup(0x1000), TlbHit::L1 { data: 3, size: PageSize::Base4K });
    }

    #[test]
    fn invalidate_one_and_range() {
        let mut c = CoreTlb::new(&TlbConfig::default());
        c.fill(0x1000, PageSize::Base4K, 0);
        c.fill(0x20_0000, PageSize::Huge2M, 0);
        c.invalidate(0x1000);
        assert!(!c.caches(0x1000));
        assert!(c.caches(0x20_0000 + 5));
        c.invalidate_range(0x20_0000, 0x40_0000);
        assert!(!c.caches(0x20_0000));
    }

    #[test]
    fn geometry_is_validated() {
        let bad = TlbConfig { l1_4k_entries: 10, ..TlbConfig::default() };
        assert!(bad.validate().is_err());
        assert!(TlbConfig::default().validate().is_ok());
    }

    fn with_1g(l2_1g_entries: usize, splinter: bool) -> TlbConfig {
        TlbConfig {
            l1_1g_entries: 4,
            l1_1g_ways: 4,
            l2_1g_entries,
            l2_1g_splinter: splinter,
            ..TlbConfig::default()
        }
    }

    const G: u64 = HUGE_1G_SIZE;

    #[test]
    fn one_gig_hits_after_fill_and_invlpg_anywhere_evicts_it() {
        for cfg in [with_1g(16, false), with_1g(0, true), with_1g(0, false), TlbConfig::default()] {
            let mut c = CoreTlb::new(&cfg);
            let va = 3 * G + 5 * HUGE_SIZE + 123;
            c.fill(va, PageSize::Huge1G, 1);
            let want_size = if cfg.l1_1g_entries > 0 { PageSize::Huge1G } else { PageSize::Huge2M };
            let TlbHit::L1 { data, size } = c.lookup(va) else { panic!("{cfg:?}: no L1 hit") };
            assert_eq!((data & NODE, size), (1, want_size), "{cfg:?}");
            if cfg.l1_1g_entries > 0 {
                // Anywhere in the 1 GiB page hits the one entry.
                assert_eq!(c.lookup(3 * G + G - 1), TlbHit::L1 { data: 1, size: PageSize::Huge1G });
            }
            assert!(c.caches(va));
            // INVLPG of another address of the same 1 GiB page (another 2 MiB piece) evicts it.
            c.invalidate(3 * G + 500 * HUGE_SIZE);
            assert!(!c.caches(va), "{cfg:?}");
            assert_eq!(c.lookup(va), TlbHit::Miss);
            // A range touching the page's last byte evicts it too; a flush too.
            c.fill(va, PageSize::Huge1G, 1);
            c.invalidate_range(4 * G - 4096, 4 * G);
            assert!(!c.caches(va), "{cfg:?}");
            c.fill(va, PageSize::Huge1G, 1);
            c.flush();
            assert!(!c.caches(va));
        }
    }

    /// The preset's rule for a 1 GiB page missing the L1: a separate L2 array refills the
    /// L1 with the page; the splintered L2 holds only the 2 MiB piece the walk was for (AMD),
    /// and refills the L1 with the whole page; without L2 entries it walks again.
    #[test]
    fn one_gig_in_the_second_level_follows_the_rule() {
        // L1 1 GiB array: 4 entries, one set; five pages evict the first.
        let evict = |c: &mut CoreTlb| {
            for k in 1..=4u64 {
                c.fill(k * G, PageSize::Huge1G, 0);
            }
        };
        let va = 8 * G; // set 0 of a 4-way, 1-set array like every other page
        let mut sep = CoreTlb::new(&with_1g(16, false));
        sep.fill(va, PageSize::Huge1G, 2);
        evict(&mut sep);
        assert!(!sep.rare.l1_1g.contains(va >> HUGE_1G_SHIFT));
        assert_eq!(sep.lookup(va + 7 * HUGE_SIZE), TlbHit::L2 { data: 2, size: PageSize::Huge1G });
        assert_eq!(sep.lookup(va + 9 * HUGE_SIZE), TlbHit::L1 { data: 2, size: PageSize::Huge1G });

        let mut spl = CoreTlb::new(&with_1g(0, true));
        spl.fill(va, PageSize::Huge1G, 2);
        evict(&mut spl);
        // Another 2 MiB piece of the page: not in the L2 (only the walked piece is).
        assert_eq!(spl.lookup(va + 7 * HUGE_SIZE), TlbHit::Miss);
        assert_eq!(spl.lookup(va + 5), TlbHit::L2 { data: 2, size: PageSize::Huge1G });
        assert_eq!(spl.lookup(va + 7 * HUGE_SIZE), TlbHit::L1 { data: 2, size: PageSize::Huge1G });

        let mut l1 = CoreTlb::new(&with_1g(0, false));
        l1.fill(va, PageSize::Huge1G, 2);
        evict(&mut l1);
        assert_eq!(l1.lookup(va), TlbHit::Miss);
    }

    #[test]
    fn one_gig_geometry_is_validated() {
        assert!(with_1g(16, false).validate().is_ok());
        assert_eq!(with_1g(16, true).validate().unwrap_err().0, "machine.tlb.l2_1g_splinter");
        let bad = TlbConfig { l1_1g_entries: 6, l1_1g_ways: 4, ..TlbConfig::default() };
        assert_eq!(bad.validate().unwrap_err().0, "machine.tlb.l1_1g_entries");
    }

    /// A naive model of a core's TLBs: every array a list of LRU-ordered sets of (tag, page
    /// range, payload, piece-of-1-GiB); invalidations drop every entry whose page range
    /// contains the address (or meets the range).
    struct NaiveCore {
        /// (name, sets, ways) per array: l1_4k, l1_2m, l1_1g, l2, l2_1g.
        arrays: Vec<(usize, Vec<Vec<NaiveEntry>>)>,
        mode: &'static str,
    }

    #[derive(Clone, Copy, Debug)]
    struct NaiveEntry {
        tag: u64,
        lo: u64,
        hi: u64,
        data: u8,
        piece: bool,
    }

    const A4K: usize = 0;
    const A2M: usize = 1;
    const A1G: usize = 2;
    const AL2: usize = 3;
    const AL2G: usize = 4;

    impl NaiveCore {
        fn new(c: &TlbConfig) -> Self {
            let mode = if c.l1_1g_entries == 0 {
                "as2m"
            } else if c.l2_1g_entries > 0 {
                "separate"
            } else if c.l2_1g_splinter {
                "splinter"
            } else {
                "l1"
            };
            let arr = |e: usize, w: usize| (w, vec![Vec::new(); if e == 0 { 0 } else { e / w }]);
            NaiveCore {
                arrays: vec![
                    arr(c.l1_4k_entries, c.l1_4k_ways),
                    arr(c.l1_2m_entries, c.l1_2m_ways),
                    arr(c.l1_1g_entries, c.l1_1g_ways),
                    arr(c.l2_entries, c.l2_ways),
                    arr(if mode == "separate" { c.l2_1g_entries } else { 0 }, c.l2_1g_ways),
                ],
                mode,
            }
        }

        /// Tag of an array (L2 tags carry the size bit, as the model's).
        fn find(&mut self, a: usize, tag: u64) -> Option<NaiveEntry> {
            let sets = &mut self.arrays[a].1;
            if sets.is_empty() {
                return None;
            }
            let n = sets.len();
            let s = &mut sets[(tag % n as u64) as usize];
            let i = s.iter().position(|e| e.tag == tag)?;
            let e = s.remove(i);
            s.insert(0, e);
            Some(e)
        }

        fn put(&mut self, a: usize, e: NaiveEntry) {
            let (ways, sets) = &mut self.arrays[a];
            if sets.is_empty() {
                return;
            }
            let n = sets.len();
            let s = &mut sets[(e.tag % n as u64) as usize];
            s.insert(0, e);
            s.truncate(*ways);
        }

        fn lookup(&mut self, va: u64) -> TlbHit {
            let l2h = |t: u64| t | L2_HUGE;
            if let Some(e) = self.find(A4K, va >> 12) {
                return TlbHit::L1 { data: e.data, size: PageSize::Base4K };
            }
            if let Some(e) = self.find(A2M, va >> 21) {
                return TlbHit::L1 { data: e.data, size: PageSize::Huge2M };
            }
            if let Some(e) = self.find(A1G, va >> 30) {
                return TlbHit::L1 { data: e.data, size: PageSize::Huge1G };
            }
            if let Some(e) = self.find(AL2G, va >> 30) {
                self.put(A1G, NaiveEntry { tag: va >> 30, ..e });
                return TlbHit::L2 { data: e.data, size: PageSize::Huge1G };
            }
            if let Some(e) = self.find(AL2, va >> 12) {
                self.put(A4K, e);
                return TlbHit::L2 { data: e.data, size: PageSize::Base4K };
            }
            if let Some(e) = self.find(AL2, l2h(va >> 21)) {
                if e.piece && self.mode == "splinter" {
                    self.put(A1G, NaiveEntry { tag: va >> 30, piece: false, ..e });
                    return TlbHit::L2 { data: e.data, size: PageSize::Huge1G };
                }
                self.put(A2M, NaiveEntry { tag: va >> 21, ..e });
                return TlbHit::L2 { data: e.data, size: PageSize::Huge2M };
            }
            TlbHit::Miss
        }

        fn fill(&mut self, va: u64, size: PageSize, data: u8) {
            let lo = size.base(va);
            let hi = lo + size.bytes();
            let e = |tag, piece| NaiveEntry { tag, lo, hi, data, piece };
            match size {
                PageSize::Base4K => {
                    self.put(A4K, e(va >> 12, false));
                    self.put(AL2, e(va >> 12, false));
                }
                PageSize::Huge2M => {
                    self.put(A2M, e(va >> 21, false));
                    self.put(AL2, e((va >> 21) | L2_HUGE, false));
                }
                _ => match self.mode {
                    "as2m" => {
                        self.put(A2M, e(va >> 21, true));
                        self.put(AL2, e((va >> 21) | L2_HUGE, true));
                    }
                    m => {
                        self.put(A1G, e(va >> 30, false));
                        if m == "separate" {
                            self.put(AL2G, e(va >> 30, false));
                        } else if m == "splinter" {
                            self.put(AL2, e((va >> 21) | L2_HUGE, true));
                        }
                    }
                },
            }
        }

        fn drop_if(&mut self, f: impl Fn(&NaiveEntry) -> bool) {
            for (_, sets) in &mut self.arrays {
                for s in sets.iter_mut() {
                    s.retain(|e| !f(e));
                }
            }
        }

        fn occupancy(&self) -> usize {
            self.arrays.iter().map(|(_, s)| s.iter().map(Vec::len).sum::<usize>()).sum()
        }
    }

    /// Differential test with 4 KiB, 2 MiB and 1 GiB pages against the naive model, for
    /// every way of caching 1 GiB pages: lookups, fills, INVLPG, range invalidations and
    /// flushes, checked after every operation.
    #[test]
    fn core_tlb_matches_naive_with_1g_pages() {
        let small = TlbConfig {
            l1_4k_entries: 8,
            l1_4k_ways: 2,
            l1_2m_entries: 4,
            l1_2m_ways: 2,
            l2_entries: 24,
            l2_ways: 6,
            l1_1g_entries: 2,
            l1_1g_ways: 2,
            l2_1g_entries: 0,
            l2_1g_ways: 2,
            l2_1g_splinter: false,
        };
        let cfgs = [
            TlbConfig { l1_1g_entries: 0, ..small.clone() },
            small.clone(),
            TlbConfig { l2_1g_entries: 4, ..small.clone() },
            TlbConfig { l2_1g_splinter: true, ..small.clone() },
        ];
        // The address space: GiB 0-3 are 1 GiB pages, GiB 4 holds 2 MiB pages, GiB 5 4 KiB
        // pages (a few of each, so that lookups hit).
        let page_of = |va: u64| match va / G {
            0..=3 => PageSize::Huge1G,
            4 => PageSize::Huge2M,
            _ => PageSize::Base4K,
        };
        for cfg in cfgs {
            let mut fast = CoreTlb::new(&cfg);
            let mut naive = NaiveCore::new(&cfg);
            let mut rng = crate::rng::Rng::new(11);
            let pick = |rng: &mut crate::rng::Rng| match rng.below(3) {
                0 => rng.below(4) * G + rng.below(16) * HUGE_SIZE + rng.below(HUGE_SIZE),
                1 => 4 * G + rng.below(12) * HUGE_SIZE + rng.below(HUGE_SIZE),
                _ => 5 * G + rng.below(40) * PAGE_SIZE + rng.below(PAGE_SIZE),
            };
            for i in 0..30_000u32 {
                match rng.below(100) {
                    0..=2 => {
                        let va = pick(&mut rng);
                        fast.invalidate(va);
                        naive.drop_if(|e| e.lo <= va && va < e.hi);
                    }
                    3 => {
                        let (a, b) = (pick(&mut rng), pick(&mut rng));
                        let (s, e) = (a.min(b), a.max(b) + 1);
                        fast.invalidate_range(s, e);
                        naive.drop_if(|x| x.lo < e && s < x.hi);
                    }
                    4 => {
                        if rng.below(10) == 0 {
                            fast.flush();
                            naive.drop_if(|_| true);
                        }
                    }
                    _ => {
                        let va = pick(&mut rng);
                        let data = (va / G) as u8 & NODE;
                        let got = fast.lookup(va);
                        let want = naive.lookup(va);
                        let strip = |h: TlbHit| match h {
                            TlbHit::L1 { data, size } => TlbHit::L1 { data: data & NODE, size },
                            TlbHit::L2 { data, size } => TlbHit::L2 { data: data & NODE, size },
                            TlbHit::Miss => TlbHit::Miss,
                        };
                        assert_eq!(strip(got), strip(want), "{cfg:?}: op {i} at {va:#x}");
                        if got == TlbHit::Miss {
                            fast.fill(va, page_of(va), data);
                            naive.fill(va, page_of(va), data);
                        }
                    }
                }
                let occ = fast.l1_4k.occupancy()
                    + fast.l1_2m.occupancy()
                    + fast.rare.l1_1g.occupancy()
                    + fast.l2.occupancy()
                    + fast.rare.l2_1g.occupancy();
                assert_eq!(occ, naive.occupancy(), "{cfg:?}: op {i}");
            }
        }
    }
}
