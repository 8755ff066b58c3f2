//! Exact ground truth: access counts per 4 KiB page per window.
//!
//! Counts live in chunks of 64 page counters reached through an open-addressing map that
//! holds only the chunks touched in the current window, so a window over a 5 TiB heap with
//! a 10 GB hot set costs memory for the hot set only. The range of pages the last window
//! touched most densely (up to 16 GiB of address space, when the window's counters fit in
//! the host's caches) is counted in a plain array instead: one compare and one increment per
//! access, no map, no per-core coalescing ([`GroundTruth::count_dense`]). At the end of a window the driver hands the closed window to
//! observers and reports ([`WindowTruth`]), then clears it.

/// A map from page number to count, open addressing with linear probing. Key and count
/// share a slot so a probe touches one cache line.
#[derive(Clone, Debug)]
pub struct CountMap {
    slots: Vec<(u64, u32)>,
    len: usize,
    mask: usize,
}

const EMPTY: u64 = u64::MAX;

/// Fibonacci hashing: spreads runs of consecutive page numbers over the table (a hash that
/// kept neighbours together would form long runs and degrade linear probing).
#[inline]
fn hash(k: u64) -> usize {
    (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) as usize
}

/// Chunks ahead of the one being added whose counters [`GroundTruth::apply_pending`]
/// prefetches (their map slots twice as far ahead).
const PREFETCH_CHUNKS: u64 = 4;

/// Slots of the per-core coalescing cache in front of the map.
pub const COALESCE_SLOTS: usize = 64;

/// Spills of a [`Coalescer`] held back before they reach the ground truth (a power of two).
const SPILL_DELAY: usize = 8;

/// A small direct-mapped cache of (page, pending count) in front of [`CountMap`]: pages a
/// core touches over and over (STREAM's three arrays in turn, a stencil's planes) are
/// counted here and reach the map only when evicted or when the window closes.
///
/// Counting a page whose counter is not in the host's caches waits for memory twice (the
/// map slot, then the counter): on a random working set of a gigabyte that was most of the
/// engine's time. So the counters are prefetched ahead of their use: a page entering the
/// coalescer prefetches its map slot (it is spilled tens of accesses later, usually), and an
/// evicted entry prefetches its counter and waits [`SPILL_DELAY`] spills in a small ring
/// before it is added. Counts are sums: when they are added changes nothing as long as
/// every one is added before the window closes ([`Coalescer::flush`] empties the ring).
#[derive(Clone, Debug)]
pub struct Coalescer {
    keys: [u64; COALESCE_SLOTS],
    vals: [u32; COALESCE_SLOTS],
    /// Evicted entries on their way to the ground truth (a page or a located counter, as
    /// [`GroundTruth::locate`] returns them; [`EMPTY`]: none), and the next slot to use.
    ring_keys: [u64; SPILL_DELAY],
    ring_vals: [u32; SPILL_DELAY],
    ring_pos: usize,
    /// Entries spilled in this window, and the accesses they carried: their ratio is what
    /// coalescing saved ([`Coalescer::end_window`]).
    spills: u64,
    spilled: u64,
    /// Accesses go straight to the ground truth (the coalescer saved nothing in a buffered
    /// window: every access was a new page), for `bypassed` windows so far.
    bypass: bool,
    bypassed: u32,
}

/// Windows a coalescer stays bypassed before it is tried again for one window.
const BYPASS_WINDOWS: u32 = 4;
/// Spills a window needs for its coalescing to be judged.
const BYPASS_MIN_SPILLS: u64 = 4096; // not a page size

impl Default for Coalescer {
    fn default() -> Self {
        Coalescer {
            keys: [EMPTY; COALESCE_SLOTS],
            vals: [0; COALESCE_SLOTS],
            ring_keys: [EMPTY; SPILL_DELAY],
            ring_vals: [0; SPILL_DELAY],
            ring_pos: 0,
            spills: 0,
            spilled: 0,
            bypass: false,
            bypassed: 0,
        }
    }
}

impl Coalescer {
    /// Count one access to `vpn`, spilling an evicted entry into `gt`.
    #[inline(always)]
    pub fn count(&mut self, vpn: u64, gt: &mut GroundTruth) {
        if self.bypass {
            gt.count(vpn, 1);
            return;
        }
        let slot = (vpn.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize;
        if self.keys[slot] == vpn {
            self.vals[slot] += 1;
            if self.vals[slot] == u32::MAX {
                gt.count(vpn, self.vals[slot]);
                self.vals[slot] = 0;
            }
        } else {
            if self.keys[slot] != EMPTY && self.vals[slot] > 0 {
                self.spills += 1;
                self.spilled += self.vals[slot] as u64;
                if gt.buffered {
                    // Buffered counts are applied in page order later: no counter to
                    // locate or prefetch now, the entry goes straight to the buffer.
                    gt.count(self.keys[slot], self.vals[slot]);
                } else {
                    self.spill(self.keys[slot], self.vals[slot], gt);
                }
            }
            self.keys[slot] = vpn;
            self.vals[slot] = 1;
            gt.prefetch_slot(vpn);
        }
    }

    /// Hand `n` accesses to `vpn` to `gt`, [`SPILL_DELAY`] spills later: its counter is
    /// located (when its chunk sits in its home slot) and prefetched now.
    #[inline(always)]
    fn spill(&mut self, vpn: u64, n: u32, gt: &mut GroundTruth) {
        let r = gt.locate(vpn);
        let i = self.ring_pos % SPILL_DELAY;
        self.ring_pos = (i + 1) % SPILL_DELAY;
        let (k, v) = (self.ring_keys[i], self.ring_vals[i]);
        self.ring_keys[i] = r;
        self.ring_vals[i] = n;
        if k != EMPTY {
            gt.count_located(k, v);
        }
    }

    /// Spill everything into `gt`.
    pub fn flush(&mut self, gt: &mut GroundTruth) {
        for i in 0..SPILL_DELAY {
            if self.ring_keys[i] != EMPTY {
                gt.count_located(self.ring_keys[i], self.ring_vals[i]);
            }
            self.ring_keys[i] = EMPTY;
            self.ring_vals[i] = 0;
        }
        for i in 0..COALESCE_SLOTS {
            if self.keys[i] != EMPTY && self.vals[i] > 0 {
                gt.count(self.keys[i], self.vals[i]);
            }
            self.keys[i] = EMPTY;
            self.vals[i] = 0;
        }
    }

    /// A window closed; `buffered`: the next one is buffered. Bypass the coalescer in the
    /// next window when the closed one was buffered too and coalescing saved almost nothing
    /// (fewer than one access in five found its page cached: a random walk over more pages
    /// than the coalescer holds), and try it again after [`BYPASS_WINDOWS`] windows. Counts
    /// are the same either way; only the work differs.
    pub fn end_window(&mut self, buffered: bool) {
        if self.bypass {
            self.bypassed += 1;
            self.bypass = buffered && self.bypassed < BYPASS_WINDOWS;
        } else {
            let useless = self.spills >= BYPASS_MIN_SPILLS && self.spilled * 4 < self.spills * 5;
            self.bypass = buffered && useless;
            self.bypassed = 0;
        }
        self.spills = 0;
        self.spilled = 0;
    }
}

/// Ask the host to bring the cache line at `p` closer (a hint: no effect on results, no
/// fault whatever the address).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch reads nothing the program sees and cannot fault (SSE, part of
        // the x86-64 baseline); `p` points into a live allocation anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

impl Default for CountMap {
    fn default() -> Self {
        Self::with_capacity(1024)
    }
}

impl CountMap {
    /// A map sized for about `n` keys.
    pub fn with_capacity(n: usize) -> Self {
        let cap = (n * 2).next_power_of_two().max(16);
        CountMap { slots: vec![(EMPTY, 0); cap], len: 0, mask: cap - 1 }
    }

    /// Add `n` to the count of `key`.
    #[inline]
    pub fn add(&mut self, key: u64, n: u32) {
        let mut i = hash(key) & self.mask;
        loop {
            let s = &mut self.slots[i];
            if s.0 == key {
                s.1 = s.1.saturating_add(n);
                return;
            }
            if s.0 == EMPTY {
                *s = (key, n);
                self.len += 1;
                if self.len * 2 > self.slots.len() {
                    self.grow();
                }
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        let cap = old.len() * 2;
        self.slots = vec![(EMPTY, 0); cap];
        self.mask = cap - 1;
        self.len = 0;
        for (k, v) in old {
            if k != EMPTY {
                self.add(k, v);
            }
        }
    }

    /// The value of `key`, inserting `make()` first when absent.
    #[inline]
    pub fn get_or_insert(&mut self, key: u64, make: impl FnOnce() -> u32) -> u32 {
        let mut i = hash(key) & self.mask;
        loop {
            let s = self.slots[i];
            if s.0 == key {
                return s.1;
            }
            if s.0 == EMPTY {
                let v = make();
                self.slots[i] = (key, v);
                self.len += 1;
                if self.len * 2 > self.slots.len() {
                    self.grow();
                }
                return v;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Hint the processor to fetch the home slot of `key` into the cache.
    #[inline(always)]
    fn prefetch(&self, key: u64) {
        prefetch(self.slots.as_ptr().wrapping_add(hash(key) & self.mask));
    }

    /// The chunk index of `key` when it sits in its home slot flagged [`TOUCHED`] (the
    /// ground truth's fast case).
    #[inline(always)]
    fn touched_in_home(&self, key: u64) -> Option<usize> {
        match self.slots.get(hash(key) & self.mask) {
            Some(&(k, v)) if k == key && v & TOUCHED != 0 => Some((v & !TOUCHED) as usize),
            _ => None,
        }
    }

    /// Set the bits `bits` in the value of `key` (present).
    fn or_value(&mut self, key: u64, bits: u32) {
        let mut i = hash(key) & self.mask;
        loop {
            let s = &mut self.slots[i];
            if s.0 == key {
                s.1 |= bits;
                return;
            }
            debug_assert!(s.0 != EMPTY, "or_value of an absent key");
            i = (i + 1) & self.mask;
        }
    }

    /// Count of `key` (0 when absent).
    pub fn get(&self, key: u64) -> u32 {
        let mut i = hash(key) & self.mask;
        loop {
            let s = self.slots[i];
            if s.0 == key {
                return s.1;
            }
            if s.0 == EMPTY {
                return 0;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// All (key, count) pairs in unspecified order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.slots.iter().filter(|s| s.0 != EMPTY).copied()
    }

    /// Remove everything, keeping the allocation when it is not oversized.
    pub fn clear(&mut self) {
        if self.slots.len() > 4 * (self.len * 2).next_power_of_two().max(1024) {
            *self = Self::with_capacity(self.len);
        } else {
            self.slots.fill((EMPTY, 0));
            self.len = 0;
        }
    }
}

/// One closed window of ground truth.
#[derive(Clone, Debug, Default)]
pub struct WindowTruth {
    /// Window index from 0.
    pub index: u64,
    /// Start, simulated ns.
    pub start_ns: u64,
    /// End, simulated ns.
    pub end_ns: u64,
    /// (page number, accesses) of every page touched, sorted by page number.
    pub pages: Vec<(u64, u32)>,
}

impl WindowTruth {
    /// Total accesses in the window.
    pub fn accesses(&self) -> u64 {
        self.pages.iter().map(|p| p.1 as u64).sum()
    }
    /// Pages accessed at least `threshold` times.
    pub fn hot_pages(&self, threshold: u32) -> impl Iterator<Item = u64> + '_ {
        self.pages.iter().filter(move |p| p.1 >= threshold).map(|p| p.0)
    }
}

/// Pages per counter chunk.
const CHUNK: usize = 64;

/// Flag of a located counter ([`GroundTruth::locate`]; page numbers are below 2^52).
const LOCATED: u64 = 1 << 62;

/// The ground-truth recorder of the current window.
///
/// Counters live in chunks of 64 pages found through a small map keyed by `page / 64`, so a
/// random access costs one probe in a table of chunks (tens of thousands of entries for a
/// 10 GB hot set, cache resident) and one counter increment, and memory follows the pages
/// touched, not the address space. Chunks untouched for a whole window are recycled.
#[derive(Clone, Debug, Default)]
pub struct GroundTruth {
    /// Accesses not yet applied: `(page << COUNT_BITS) | count`, partitioned by page range
    /// and applied a range at a time when full or at the window's end
    /// ([`GroundTruth::apply_pending`]).
    pending: Vec<u64>,
    scratch: Vec<u64>,
    /// [`partition_by_page`]'s bucket ends and the per-page sums of a dense bucket (all zero
    /// between uses).
    ends: Vec<usize>,
    dense: Vec<u64>,
    /// Chunk key (`page / 64`) -> chunk index, [`TOUCHED`] set once the chunk is counted
    /// in the current window.
    map: CountMap,
    chunks: Vec<[u32; CHUNK]>,
    keys: Vec<u64>,
    touched_list: Vec<u32>,
    free: Vec<u32>,
    /// Buffer accesses (large working sets) rather than counting them at once (small ones,
    /// whose counters stay in cache). Re-decided at every window end.
    buffered: bool,
    /// The dense region of this window: the counters of pages `region_base ..
    /// region_base + region.len()`, indexed directly (no map, no coalescer). Chosen at every
    /// window end from the pages the window touched ([`GroundTruth::choose_region`]); empty
    /// in the first window. All zero outside a window's counting.
    region: Vec<u32>,
    region_base: u64,
    /// Accesses counted over the whole run, but those in the dense region of the current
    /// window ([`GroundTruth::total_accesses`] adds them).
    total_accesses: u64,
    /// The page list of a window the driver is done with ([`GroundTruth::recycle`]), reused
    /// by the next [`GroundTruth::close`]: a hot set of gigabytes lists millions of pages per
    /// window, and a new list each time would be new memory the host must map and zero.
    spare_pages: Vec<(u64, u32)>,
}

/// Pages the dense region spans at most (2^22: 16 MiB of counters, 16 GiB of address space).
const REGION_MAX_PAGES: u64 = 1 << 22;
/// The dense region's chunks hold at least one touched chunk (of the last window) per
/// `REGION_DENSITY` (so it costs at most that many times the memory of the chunks it
/// replaces).
const REGION_DENSITY: u64 = 4;

/// Live chunks above which accesses are buffered and sorted (16 Ki chunks = 1 Mi pages,
/// 4 MiB of counters: beyond that the counters stop fitting in cache).
const DIRECT_MAX_CHUNKS: usize = 16 << 10;

/// Flag of a chunk index in [`GroundTruth`]'s map: the chunk is counted in the current
/// window (in `touched_list`). With it, an access to a chunk already counted in the window
/// costs one probe of its home slot and one increment ([`GroundTruth::add_now`]).
const TOUCHED: u32 = 1 << 31;

/// Bits of a pending entry holding the count.
const COUNT_BITS: u32 = 28;
/// Pending entries buffered before they are applied (32 MiB).
const PENDING_MAX: usize = 4 << 20;

/// Pages a bucket of [`partition_by_page`] spans at least (2^14: 256 chunks of counters,
/// 64 KiB, and their map slots stay in cache while the bucket is applied).
const BUCKET_PAGE_BITS: u32 = 14;
/// Buckets of [`partition_by_page`] at most (2^10: the scatter writes to as many places at
/// once, few enough for the host's caches and TLB).
const MAX_BUCKET_BITS: u32 = 10;
/// Buckets of at most 2^16 pages may be summed in a dense array (512 KiB at most).
const DENSE_MAX_BITS: u32 = 16;

/// Partition `v` by page into buckets of consecutive page ranges (one counting pass and one
/// scatter pass into `out`): bucket `(page - lo) >> shift` for the returned `(lo, shift)`,
/// `lo` a multiple of 2^[`BUCKET_PAGE_BITS`], the buckets in order; `ends` receives each
/// bucket's end offset in `out`. When the pages span one bucket, `out` is `v`.
fn partition_by_page(v: &mut Vec<u64>, out: &mut Vec<u64>, ends: &mut Vec<usize>) -> (u64, u32) {
    ends.clear();
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for &x in v.iter() {
        let k = x >> COUNT_BITS;
        lo = lo.min(k);
        hi = hi.max(k);
    }
    lo &= !((1u64 << BUCKET_PAGE_BITS) - 1);
    let span_bits = 64 - hi.saturating_sub(lo).leading_zeros();
    if span_bits <= BUCKET_PAGE_BITS {
        std::mem::swap(v, out);
        ends.push(out.len());
        return (lo, BUCKET_PAGE_BITS);
    }
    let shift = BUCKET_PAGE_BITS.max(span_bits - MAX_BUCKET_BITS);
    let buckets = (((hi - lo) >> shift) + 1) as usize;
    let mut starts = vec![0usize; buckets + 1];
    for &x in v.iter() {
        starts[(((x >> COUNT_BITS) - lo) >> shift) as usize + 1] += 1;
    }
    for b in 0..buckets {
        starts[b + 1] += starts[b];
    }
    ends.extend_from_slice(&starts[1..]);
    // Every slot is written below: only a change of length writes zeros first.
    out.resize(v.len(), 0);
    for &x in v.iter() {
        let b = (((x >> COUNT_BITS) - lo) >> shift) as usize;
        out[starts[b]] = x;
        starts[b] += 1;
    }
    (lo, shift)
}

impl GroundTruth {
    /// Count one access to `vpn` when it lies in the window's dense region (true); else
    /// leave it to the caller (false), who counts it with [`GroundTruth::count`] (usually
    /// through a core's [`Coalescer`]). One compare and one increment: the access path's
    /// common case on a working set that fills its address range.
    #[inline(always)]
    pub fn count_dense(&mut self, vpn: u64) -> bool {
        self.add_dense(vpn, 1)
    }

    /// Hint the host to fetch the dense-region counter of `vpn` (an access a few ahead).
    #[inline(always)]
    pub fn prefetch_dense(&self, vpn: u64) {
        let p = self.region.as_ptr().wrapping_add(vpn.wrapping_sub(self.region_base) as usize);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch reads nothing the program sees and never faults, whatever the
        // address (one outside the region, a page without a counter, is wasted).
        unsafe {
            std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }

    /// Add `n` to the dense-region counter of `vpn` when it has one (true).
    #[inline(always)]
    fn add_dense(&mut self, vpn: u64, n: u32) -> bool {
        match self.region.get_mut(vpn.wrapping_sub(self.region_base) as usize) {
            Some(c) => {
                *c = c.saturating_add(n);
                true
            }
            None => false,
        }
    }

    /// Whether the current window buffers its accesses (else counts them at once).
    pub fn is_buffered(&self) -> bool {
        self.buffered
    }

    /// Accesses counted over the whole run.
    pub fn total_accesses(&self) -> u64 {
        self.total_accesses + self.region.iter().map(|&c| c as u64).sum::<u64>()
    }

    /// Count `n` accesses to page `vpn` (applied lazily, see [`GroundTruth::close`]).
    #[inline(always)]
    pub fn count(&mut self, vpn: u64, n: u32) {
        if self.add_dense(vpn, n) {
            return;
        }
        if !self.buffered {
            self.total_accesses += n as u64;
            self.add_now(vpn, n);
            return;
        }
        self.push_pending(vpn, n);
    }

    /// Buffer `n` accesses to `vpn`, [`GroundTruth::count`] of a buffered window (its common
    /// case inline: a count that fits one entry and a buffer with room; the rest is
    /// [`GroundTruth::count_buffered`]).
    #[inline(always)]
    fn push_pending(&mut self, vpn: u64, n: u32) {
        if n < (1 << COUNT_BITS) && self.pending.len() + 1 < PENDING_MAX {
            self.pending.push((vpn << COUNT_BITS) | n as u64);
            self.total_accesses += n as u64;
        } else {
            self.count_buffered(vpn, n);
        }
    }

    /// [`GroundTruth::push_pending`] of a count too large for one entry or into a full
    /// buffer (which it then applies).
    #[inline(never)]
    fn count_buffered(&mut self, vpn: u64, mut n: u32) {
        const MAXC: u32 = (1 << COUNT_BITS) - 1;
        while n > MAXC {
            self.pending.push((vpn << COUNT_BITS) | MAXC as u64);
            n -= MAXC;
        }
        self.pending.push((vpn << COUNT_BITS) | n as u64);
        self.total_accesses += n as u64;
        if self.pending.len() >= PENDING_MAX {
            self.apply_pending();
        }
    }

    /// Apply buffered accesses to the counters, a range of pages at a time: the accesses are
    /// partitioned into buckets of consecutive pages ([`partition_by_page`]). A bucket dense
    /// enough (at least one access per four pages of its range, a range of at most 2^16
    /// pages) is summed per page in a small array first and added in page order, one map
    /// lookup per chunk; a sparse one is added access by access, its counters and map slots
    /// staying in cache. Either way no access costs a cache miss of its own, and the counts
    /// do not depend on the order they are added in.
    fn apply_pending(&mut self) {
        let mut pending = std::mem::take(&mut self.pending);
        let mut parted = std::mem::take(&mut self.scratch);
        let mut ends = std::mem::take(&mut self.ends);
        let mut dense = std::mem::take(&mut self.dense);
        let (lo, shift) = partition_by_page(&mut pending, &mut parted, &mut ends);
        let range = 1usize << shift;
        let mut start = 0;
        for (b, &end) in ends.iter().enumerate() {
            let bucket = &parted[start..end];
            start = end;
            if shift <= DENSE_MAX_BITS && bucket.len() * 4 >= range {
                dense.resize(range, 0);
                let base = lo + ((b as u64) << shift);
                for &x in bucket {
                    dense[((x >> COUNT_BITS) - base) as usize] += x & ((1 << COUNT_BITS) - 1);
                }
                // `base` and `range` are multiples of CHUNK (lo is aligned to 2^14 pages):
                // the sums go to the counters a chunk at a time, one map lookup each. The
                // map's slots are hashed, so each chunk's lookup and counters would be a
                // cache miss: they are prefetched some chunks ahead (the slot further, the
                // counters, found through the then cached slot, nearer).
                let key0 = base / CHUNK as u64;
                for (j, sums) in dense.chunks_exact_mut(CHUNK).enumerate() {
                    let key = key0 + j as u64;
                    self.map.prefetch(key + 2 * PREFETCH_CHUNKS);
                    if let Some(i) = self.map.touched_in_home(key + PREFETCH_CHUNKS) {
                        prefetch(self.chunks.as_ptr().wrapping_add(i));
                    }
                    if sums.iter().fold(0, |a, &d| a | d) == 0 {
                        continue;
                    }
                    let chunk = self.chunk_of(key);
                    for (c, d) in chunk.iter_mut().zip(sums.iter_mut()) {
                        *c = c.saturating_add((*d).min(u32::MAX as u64) as u32);
                        *d = 0;
                    }
                }
            } else {
                for &x in bucket {
                    self.add_now(x >> COUNT_BITS, (x & ((1 << COUNT_BITS) - 1)) as u32);
                }
            }
        }
        pending.clear();
        self.pending = pending;
        self.scratch = parted;
        self.ends = ends;
        self.dense = dense;
    }

    /// Prefetch the map slot where a chunk of `vpn` is looked up first (when counting
    /// directly; a buffered access is not looked up).
    #[inline(always)]
    pub fn prefetch_slot(&self, vpn: u64) {
        if !self.buffered {
            self.map.prefetch(vpn / CHUNK as u64);
        }
    }

    /// Where the counter of `vpn` is, prefetched: [`LOCATED`] with the counter's chunk
    /// index times [`CHUNK`] plus its place in the chunk when the chunk, counted in this
    /// window, sits in its home slot of the map (as [`GroundTruth::add_now`] finds it);
    /// else `vpn` itself. For [`GroundTruth::count_located`] before the window closes
    /// (chunks are recycled only when it does); the coalescer uses it for windows counted
    /// directly (a buffered one has nothing to prefetch).
    #[inline(always)]
    pub fn locate(&self, vpn: u64) -> u64 {
        if let Some(idx) = self.map.touched_in_home(vpn / CHUNK as u64) {
            if let Some(chunk) = self.chunks.get(idx) {
                let j = (vpn % CHUNK as u64) as usize;
                prefetch(&chunk[j]);
                return LOCATED | (idx * CHUNK + j) as u64;
            }
        }
        vpn
    }

    /// Count `n` accesses to what [`GroundTruth::locate`] returned (in this window).
    #[inline(always)]
    pub fn count_located(&mut self, r: u64, n: u32) {
        if r & LOCATED != 0 {
            let i = (r & !LOCATED) as usize;
            if let Some(chunk) = self.chunks.get_mut(i / CHUNK) {
                self.total_accesses += n as u64;
                let c = &mut chunk[i % CHUNK];
                *c = c.saturating_add(n);
                return;
            }
        }
        self.count(r, n);
    }

    /// Add `n` to the counter of page `vpn`. The common case, a chunk already counted in
    /// this window sitting in its home slot of the map, is inline; the rest is
    /// [`GroundTruth::add_now_slow`].
    #[inline(always)]
    fn add_now(&mut self, vpn: u64, n: u32) {
        if let Some(idx) = self.map.touched_in_home(vpn / CHUNK as u64) {
            if let Some(chunk) = self.chunks.get_mut(idx) {
                let c = &mut chunk[(vpn % CHUNK as u64) as usize];
                *c = c.saturating_add(n);
                return;
            }
        }
        self.add_now_slow(vpn, n);
    }

    /// The counters of chunk `key` (pages `key * CHUNK ..`), made and marked touched in
    /// this window if need be, for a caller that adds to them.
    #[inline]
    fn chunk_of(&mut self, key: u64) -> &mut [u32; CHUNK] {
        let i = match self.map.touched_in_home(key) {
            Some(i) => i,
            None => self.touch_chunk(key),
        };
        &mut self.chunks[i]
    }

    /// [`GroundTruth::add_now`] for a chunk not yet counted in this window or not in its
    /// home slot: find or make the chunk, mark it touched, count.
    #[cold]
    #[inline(never)]
    fn add_now_slow(&mut self, vpn: u64, n: u32) {
        let idx = self.touch_chunk(vpn / CHUNK as u64);
        let c = &mut self.chunks[idx][(vpn % CHUNK as u64) as usize];
        *c = c.saturating_add(n);
    }

    /// Find or make chunk `key` and mark it touched in this window; its index.
    fn touch_chunk(&mut self, key: u64) -> usize {
        let chunks = &mut self.chunks;
        let keys = &mut self.keys;
        let free = &mut self.free;
        let v = self.map.get_or_insert(key, || {
            if let Some(i) = free.pop() {
                keys[i as usize] = key;
                i
            } else {
                chunks.push([0; CHUNK]);
                keys.push(key);
                let i = (chunks.len() - 1) as u32;
                assert!(i < TOUCHED, "ground truth: more than 2^31 chunks of counters");
                i
            }
        });
        let idx = (v & !TOUCHED) as usize;
        if v & TOUCHED == 0 {
            self.map.or_value(key, TOUCHED);
            self.touched_list.push(idx as u32);
            if self.touched_list.len() > DIRECT_MAX_CHUNKS {
                self.buffered = true;
            }
        }
        idx
    }

    /// Give back a closed window's page list once nothing reads it any more: the next
    /// [`GroundTruth::close`] fills the same allocation.
    pub fn recycle(&mut self, w: WindowTruth) {
        if w.pages.capacity() > self.spare_pages.capacity() {
            self.spare_pages = w.pages;
        }
    }

    /// Always buffer and sort (normally chosen by working-set size); for tests.
    pub fn set_buffered(&mut self, on: bool) {
        self.buffered = on;
    }

    /// Pages currently holding counters (for memory accounting).
    pub fn chunk_count(&self) -> usize {
        self.chunks.len() - self.free.len()
    }

    /// Move the dense region's counts to `pages` (in page order) and its touched chunks'
    /// keys to `keys`, leaving its counters zero.
    fn drain_region(&mut self, pages: &mut Vec<(u64, u32)>, keys: &mut Vec<u64>) {
        let base = self.region_base;
        // The sum in a local and each chunk zeroed at once (not a read-modify-write of the
        // total and a store per page).
        let mut total = 0u64;
        for (k, c) in self.region.chunks_exact_mut(CHUNK).enumerate() {
            if c.iter().fold(0, |a, &v| a | v) == 0 {
                continue;
            }
            let key0 = base + (k * CHUNK) as u64;
            keys.push(key0 / CHUNK as u64);
            // Every page is written after the last kept one, which moves on past a counted
            // page only: no branch and no capacity test per page.
            pages.reserve(CHUNK);
            let spare = &mut pages.spare_capacity_mut()[..CHUNK];
            let mut n = 0usize;
            for (j, &v) in c.iter().enumerate() {
                spare[n & (CHUNK - 1)].write((key0 + j as u64, v));
                n += usize::from(v > 0);
                total += v as u64;
            }
            // SAFETY: the first `n` slots after the length were written (`n <= CHUNK`, a
            // slot being overwritten only while it is not kept).
            unsafe { pages.set_len(pages.len() + n) };
            c.fill(0);
        }
        self.total_accesses += total;
    }

    /// The next window's dense region, from the chunk keys (sorted) the closed window
    /// touched: the range of at most [`REGION_MAX_PAGES`] pages holding the most touched
    /// chunks, at least one per [`REGION_DENSITY`] of its chunks (none when no range is
    /// that dense). A guess from the past: an access outside it is counted the usual way.
    /// None either when the window touched more chunks than stay in the host's caches
    /// ([`DIRECT_MAX_CHUNKS`]): counting each access in place would then wait for memory,
    /// and buffering them all ([`GroundTruth::apply_pending`]) is faster.
    fn choose_region(&mut self, keys: &[u64]) {
        let keys = if keys.len() <= DIRECT_MAX_CHUNKS { keys } else { &[] };
        let max_chunks = REGION_MAX_PAGES / CHUNK as u64;
        let (mut best, mut best_n) = ((0u64, 0u64), 0usize);
        let mut i = 0;
        for j in 0..keys.len() {
            while keys[j] - keys[i] >= max_chunks {
                i += 1;
            }
            let n = j - i + 1;
            let span = keys[j] - keys[i] + 1;
            if n > best_n && n as u64 * REGION_DENSITY >= span {
                best = (keys[i], span);
                best_n = n;
            }
        }
        let (key, span) = best;
        let len = (span * CHUNK as u64) as usize;
        if len != self.region.len() {
            // Only a change of size reallocates; the counters are all zero here.
            self.region = vec![0; len];
        }
        self.region_base = key * CHUNK as u64;
    }

    /// Close the current window: return it sorted and start a new one.
    pub fn close(&mut self, index: u64, start_ns: u64, end_ns: u64) -> WindowTruth {
        self.apply_pending();
        let mut order: Vec<(u64, u32)> =
            self.touched_list.iter().map(|&i| (self.keys[i as usize], i)).collect();
        order.sort_unstable();
        let mut pages = std::mem::take(&mut self.spare_pages);
        pages.clear();
        pages.reserve(order.len() * 8);
        // The dense region's pages go between the chunks below it and those above (no
        // chunk is counted inside it: its pages never reach the map in this window).
        let region_key = self.region_base / CHUNK as u64;
        let below = order.partition_point(|&(key, _)| key < region_key);
        let mut keys = Vec::with_capacity(order.len() + self.region.len() / CHUNK);
        for (n, &(key, i)) in order.iter().enumerate() {
            if n == below {
                self.drain_region(&mut pages, &mut keys);
            }
            keys.push(key);
            let c = &mut self.chunks[i as usize];
            for (j, v) in c.iter_mut().enumerate() {
                if *v > 0 {
                    pages.push((key * CHUNK as u64 + j as u64, *v));
                    *v = 0;
                }
            }
        }
        if below == order.len() {
            self.drain_region(&mut pages, &mut keys);
        }
        self.choose_region(&keys);
        // Recycle chunks untouched in this window: rebuild the map from the touched ones.
        if self.map.len() > order.len() {
            let live: Vec<bool> = {
                let mut l = vec![false; self.chunks.len()];
                for &(_, i) in &order {
                    l[i as usize] = true;
                }
                l
            };
            let mut map = CountMap::with_capacity(order.len().max(512)); // not a page size
            for &(key, i) in &order {
                map.get_or_insert(key, || i);
            }
            self.free.clear();
            for (i, alive) in live.iter().enumerate() {
                if !alive {
                    self.free.push(i as u32);
                }
            }
            self.map = map;
        } else {
            // Every chunk of the map was touched: keep the map, clear the flags.
            for s in self.map.slots.iter_mut() {
                if s.0 != EMPTY {
                    s.1 &= !TOUCHED;
                }
            }
        }
        self.buffered = order.len() > DIRECT_MAX_CHUNKS;
        self.touched_list.clear();
        WindowTruth { index, start_ns, end_ns, pages }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn countmap_matches_hashmap() {
        let mut m = CountMap::with_capacity(4);
        let mut r = HashMap::new();
        let mut x = 12345u64;
        for _ in 0..100_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let k = (x >> 40) % 5000;
            m.add(k, 1);
            *r.entry(k).or_insert(0u32) += 1;
        }
        assert_eq!(m.len(), r.len());
        for (k, v) in &r {
            assert_eq!(m.get(*k), *v);
        }
        let total: u64 = m.iter().map(|(_, v)| v as u64).sum();
        assert_eq!(total, 100_000);
        m.clear();
        assert!(m.is_empty());
        assert_eq!(m.get(3), 0);
    }

    #[test]
    fn window_close_sorts_and_resets() {
        let mut g = GroundTruth::default();
        g.count(9, 2);
        g.count(3, 1);
        g.count(9, 1);
        let w = g.close(0, 0, 1000);
        assert_eq!(w.pages, vec![(3, 1), (9, 3)]);
        assert_eq!(w.accesses(), 4);
        assert_eq!(w.hot_pages(2).collect::<Vec<_>>(), vec![9]);
        g.recycle(w);
        assert_eq!(g.close(1, 1000, 2000).pages, vec![]);
        assert_eq!(g.total_accesses(), 4);
    }

    /// Differential test of the chunked recorder against a HashMap, over several windows.
    #[test]
    fn chunked_counts_match_hashmap_across_windows() {
        for buffered in [false, true] {
            // Shifting windows recycle chunks (the map is rebuilt); windows over the same
            // range keep the map and only clear its touched flags.
            for shift in [7_000, 0] {
                // Dense (50,000 accesses over 20,000 pages) and sparse (over 20 M pages)
                // buckets when buffered.
                for spread in [1, 1_000] {
                    chunked_case(buffered, shift, spread);
                }
            }
        }
    }

    fn chunked_case(buffered: bool, shift: u64, spread: u64) {
        let mut g = GroundTruth::default();
        g.set_buffered(buffered);
        let mut x = 77u64;
        for w in 0..5u64 {
            let mut r: HashMap<u64, u32> = HashMap::new();
            for _ in 0..50_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                // Windows touch shifting, partly overlapping ranges.
                let k = ((x >> 35) % 20_000) * spread + w * shift;
                g.count(k, 1);
                *r.entry(k).or_insert(0) += 1;
            }
            let win = g.close(w, 0, 1);
            g.set_buffered(buffered);
            // A dense window gives the next one a dense region (which a shifted window
            // overlaps in part): both ways of counting are compared below.
            assert_eq!(!g.region.is_empty(), spread == 1, "window {w}");
            let mut expect: Vec<(u64, u32)> = r.into_iter().collect();
            expect.sort_unstable();
            assert_eq!(win.pages, expect, "window {w}");
            // As the driver does: the list comes back and the next window refills it.
            if w % 2 == 0 {
                g.recycle(win);
            }
        }
        if spread == 1 {
            assert!(g.chunk_count() <= 20_000 / 64 + 2);
        }
    }

    #[test]
    fn dense_region_follows_the_working_set() {
        let mut g = GroundTruth::default();
        // Window 0: pages 1000..11000 every other page (dense), plus a far page.
        for p in (1000..11_000).step_by(2) {
            g.count(p, 1);
        }
        g.count(1 << 40, 5);
        assert!(!g.count_dense(1000), "no region in the first window");
        g.count(1000, 1);
        let w = g.close(0, 0, 1);
        assert_eq!(w.pages.len(), 5001);
        assert_eq!(w.pages[0], (1000, 2));
        // The next window's region spans the dense range (chunk-aligned), not the far page.
        assert!(g.region_base <= 1000 && g.region_base + g.region.len() as u64 >= 11_000);
        assert!(g.region.len() as u64 <= REGION_MAX_PAGES);
        assert!(g.count_dense(5000) && !g.count_dense(1 << 40));
        g.count(1 << 40, 1);
        g.count(20_000, 3); // outside the region: counted in a chunk
        g.count(5000, 2); // inside: counted in the region
        assert_eq!(g.total_accesses(), 5000 + 5 + 1 + 1 + 1 + 3 + 2);
        let w = g.close(1, 1, 2);
        assert_eq!(w.pages, vec![(5000, 3), (20_000, 3), (1 << 40, 1)]);
        assert_eq!(g.total_accesses(), 5000 + 5 + 1 + 1 + 1 + 3 + 2);
        assert!(g.region.iter().all(|&c| c == 0));
    }

    #[test]
    fn sparse_pages_get_no_dense_region() {
        let mut g = GroundTruth::default();
        // One page per 1000 chunks: no range of more than one chunk is dense enough.
        for k in 0..100u64 {
            g.count(k * 64_000, 1);
        }
        g.close(0, 0, 1);
        assert!(g.region.len() <= CHUNK, "region of {} pages", g.region.len());
        // Dense, but more chunks than stay in cache: buffered, no region.
        for p in 0..(DIRECT_MAX_CHUNKS as u64 + 1) * CHUNK as u64 {
            g.count(p, 1);
        }
        g.close(1, 1, 2);
        assert!(g.region.is_empty());
    }

    /// A 64-bit LCG step (test keys).
    fn lcg(x: u64) -> u64 {
        x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407)
    }

    /// A window's (page, count) list.
    type Pages = Vec<(u64, u32)>;

    /// Count `keys` through the coalescer `c` into `g`, close window `w`, and return its
    /// pages with the counts a HashMap expects.
    fn count_through(
        c: &mut Coalescer,
        g: &mut GroundTruth,
        w: u64,
        keys: impl Iterator<Item = u64>,
    ) -> (Pages, Pages) {
        let mut r = HashMap::new();
        for k in keys {
            c.count(k, g);
            *r.entry(k).or_insert(0u32) += 1;
        }
        c.flush(g);
        let win = g.close(w, 0, 1);
        let mut expect: Pages = r.into_iter().collect();
        expect.sort_unstable();
        (win.pages, expect)
    }

    #[test]
    fn coalescer_is_bypassed_only_when_useless_and_counts_stay_exact() {
        // Random pages over 2^22 (more than the coalescer holds), buffered windows: after a
        // window in which nothing coalesced, the next ones bypass it, then it is tried again.
        // Sequential runs of one page coalesce: never bypassed. Every window is exact.
        for (random, want) in [(true, [false, true, true, true, true, false]), (false, [false; 6])] {
            let mut g = GroundTruth::default();
            let mut c = Coalescer::default();
            let mut x = 9u64;
            let mut seen = Vec::new();
            for w in 0..6u64 {
                g.set_buffered(true);
                seen.push(c.bypass);
                let keys = (0..50_000u64).map(|i| {
                    x = lcg(x);
                    if random {
                        (x >> 30) % (1 << 22)
                    } else {
                        (w * 50_000 + i) / 8
                    }
                });
                let (pages, expect) = count_through(&mut c, &mut g, w, keys);
                c.end_window(true);
                assert_eq!(pages, expect, "random {random}, window {w}");
            }
            assert_eq!(seen, want, "random {random}");
        }
        // A window that is not buffered turns the bypass off.
        let mut c = Coalescer { bypass: true, ..Coalescer::default() };
        c.end_window(false);
        assert!(!c.bypass);
    }

    #[test]
    fn partition_keeps_every_entry_in_its_page_range() {
        for spread in [1u64 << 10, 1 << 20, 1 << 40] {
            let mut x = 3u64;
            let mut v: Vec<u64> = (0..100_000)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (((x >> 20) % spread + 5) << COUNT_BITS) | (x & 7)
                })
                .collect();
            let before = v.clone();
            let (mut out, mut ends) = (Vec::new(), Vec::new());
            let (lo, shift) = partition_by_page(&mut v, &mut out, &mut ends);
            assert_eq!(*ends.last().unwrap(), out.len());
            assert!(ends.len() <= 1 << MAX_BUCKET_BITS, "{spread}: {} buckets", ends.len());
            assert!(shift >= BUCKET_PAGE_BITS && lo % (1 << BUCKET_PAGE_BITS) == 0);
            // Bucket b holds exactly the pages of [lo + b << shift, lo + (b + 1) << shift).
            let mut start = 0;
            for (b, &end) in ends.iter().enumerate() {
                for e in &out[start..end] {
                    assert_eq!(((e >> COUNT_BITS) - lo) >> shift, b as u64, "{spread}");
                }
                start = end;
            }
            let (mut a, mut e) = (out.clone(), before);
            a.sort_unstable();
            e.sort_unstable();
            assert_eq!(a, e, "{spread}: same multiset");
        }
    }

    #[test]
    fn coalescer_is_exact() {
        // Direct and buffered counting, a few chunks and many (the delayed spills of the
        // coalescer are located counters or pages), over windows: every count arrives.
        for (buffered, range) in [(false, 300u64), (true, 300), (false, 1 << 20), (true, 1 << 20)] {
            let mut g = GroundTruth::default();
            g.set_buffered(buffered);
            let mut c = Coalescer::default();
            let mut x = 5u64;
            for w in 0..3 {
                let keys = (0..100_000).map(|_| {
                    x = lcg(x);
                    (x >> 40) % range
                });
                let (pages, expect) = count_through(&mut c, &mut g, w, keys);
                g.set_buffered(buffered);
                assert_eq!(pages, expect, "buffered {buffered}, range {range}, window {w}");
            }
            assert_eq!(g.total_accesses(), 300_000);
        }
    }
}
