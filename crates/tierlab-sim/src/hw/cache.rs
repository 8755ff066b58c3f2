//! A per-core data cache model: one set-associative level with LRU replacement (the last
//! private level, e.g. Knights Landing's L2), so events such as PEBS's L2_MISS_LOADS (the
//! McKernel driver's event) can be counted.
//!
//! Every access of a core (loads and stores: write-allocate) looks its 64-byte line up. Sets
//! are indexed by the line's offset within its 4 KiB page and, above that, by a hash of the
//! page number standing in for the physical page's colour: the real L2 is physically indexed
//! and physical pages are scattered, so arrays that start at the same virtual alignment do
//! not all collide in the same sets.
//!
//! Without a configuration the model is off: nothing is tracked and every access counts as
//! a miss for the miss-only event filter. The model is deterministic.

use tierlab_core::param::params;

use crate::units::ByteSize;

/// Geometry of the cache (`[machine.cache]`). Defaults: the L2 of a Knights Landing tile,
/// the PEBS seed paper's machine.
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct CacheConfig {
    /// Capacity.
    #[param(
        default = ByteSize(1 << 20),
        unit = "bytes",
        assumed = "1 MiB, the L2 of a Knights Landing tile (the PEBS seed paper's machine; the size is not in ../shared/reference)"
    )]
    pub size: ByteSize,
    /// Associativity.
    #[param(
        default = 16,
        range = "[1, 64]",
        unit = "ways",
        assumed = "16, the Knights Landing L2's (not in ../shared/reference)"
    )]
    pub ways: usize,
    /// Line size.
    #[param(default = ByteSize(64), unit = "bytes", assumed = "the x86 cache line")]
    pub line: ByteSize,
}

impl CacheConfig {
    /// Number of sets.
    pub fn sets(&self) -> u64 {
        self.size.0 / (self.line.0.max(1) * self.ways.max(1) as u64)
    }

    /// Check that the fields agree (each one's range is declared); returns (dotted field,
    /// problem).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let line = self.line.0;
        if !(line.is_power_of_two() && (8..=MAX_LINE).contains(&line)) {
            return Err(("machine.cache.line", format!("{line} must be a power of two in 8..={MAX_LINE}")));
        }
        let sets = self.sets();
        if sets == 0 || !sets.is_power_of_two() || sets * line * self.ways as u64 != self.size.0 {
            return Err((
                "machine.cache.size",
                format!(
                    "{} bytes must be line ({line}) x ways ({}) x a power-of-two number of sets",
                    self.size.0, self.ways
                ),
            ));
        }
        Ok(())
    }
}

const EMPTY: u64 = u64::MAX;
/// Largest cache line accepted, bytes.
pub const MAX_LINE: u64 = 4096; // not a page size

/// Event-mask bit (with bit 0 loads, bit 1 stores of the PEBS mask): count only accesses
/// that miss this cache.
pub const MISS_ONLY: u8 = 4;

/// One core's cache.
#[derive(Clone, Debug)]
pub struct Cache {
    /// Line tags per set, most recently used first (`EMPTY` = invalid way).
    tags: Vec<u64>,
    ways: usize,
    line_shift: u32,
    /// Set-index bits taken from the line's offset within its page.
    in_page_bits: u32,
    /// Mask of the set-index bits that come from the page colour.
    colour_mask: u64,
    enabled: bool,
    /// Accesses that hit.
    pub hits: u64,
    /// Accesses that missed.
    pub misses: u64,
    /// Loads that missed (the L2_MISS_LOADS count).
    pub load_misses: u64,
}

impl Default for Cache {
    fn default() -> Self {
        Cache::off()
    }
}

impl Cache {
    /// No cache model.
    pub fn off() -> Self {
        Cache {
            tags: Vec::new(),
            ways: 0,
            line_shift: 6,
            in_page_bits: 0,
            colour_mask: 0,
            enabled: false,
            hits: 0,
            misses: 0,
            load_misses: 0,
        }
    }

    /// A cold cache of geometry `cfg` (validated), or none.
    pub fn new(cfg: Option<&CacheConfig>) -> Self {
        let Some(cfg) = cfg else { return Cache::off() };
        let sets = cfg.sets();
        let line_shift = cfg.line.0.trailing_zeros();
        let set_bits = sets.trailing_zeros();
        let in_page_bits = set_bits.min(12u32.saturating_sub(line_shift));
        Cache {
            tags: vec![EMPTY; (sets as usize) * cfg.ways],
            ways: cfg.ways,
            line_shift,
            in_page_bits,
            colour_mask: (1u64 << (set_bits - in_page_bits)) - 1,
            enabled: true,
            hits: 0,
            misses: 0,
            load_misses: 0,
        }
    }

    /// Whether a cache is modelled.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Line size in bytes.
    pub fn line_bytes(&self) -> u64 {
        1 << self.line_shift
    }

    #[inline]
    fn set_of(&self, line: u64) -> usize {
        let in_page = line & ((1u64 << self.in_page_bits) - 1);
        let page = line >> (12 - self.line_shift.min(12));
        // The page's "colour": a fixed pseudo-random function of the page number.
        let mut h = page.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^= h >> 29;
        let colour = h & self.colour_mask;
        ((colour << self.in_page_bits) | in_page) as usize
    }

    /// Look `addr`'s line up and fill it on a miss (LRU victim). Returns true on a hit.
    /// A disabled cache returns false and keeps no state.
    #[inline]
    pub fn access(&mut self, addr: u64, write: bool) -> bool {
        if !self.enabled {
            return false;
        }
        let line = addr >> self.line_shift;
        let s = self.set_of(line) * self.ways;
        let set = &mut self.tags[s..s + self.ways];
        if set[0] == line {
            self.hits += 1;
            return true;
        }
        match set.iter().position(|&t| t == line) {
            Some(i) => {
                set[..=i].rotate_right(1);
                self.hits += 1;
                true
            }
            None => {
                set.rotate_right(1);
                set[0] = line;
                self.misses += 1;
                self.load_misses += !write as u64;
                false
            }
        }
    }

    /// PEBS event counting for one access: 1 when the access is a counted event under
    /// `mask` (bit 0 loads, bit 1 stores, [`MISS_ONLY`]: only misses of this cache), else 0.
    /// Looks the access up in the cache when one is modelled (its state follows every
    /// access, sampled or not).
    #[inline]
    pub fn pebs_event(&mut self, addr: u64, write: bool, mask: u8) -> u64 {
        let ev = (mask >> write as u8) & 1;
        if !self.enabled {
            return ev as u64;
        }
        let hit = self.access(addr, write) as u8;
        (ev & !((mask >> 2) & hit)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(size: u64, ways: usize) -> Cache {
        let cfg = CacheConfig { size: ByteSize(size), ways, line: ByteSize(64) };
        cfg.validate().unwrap();
        Cache::new(Some(&cfg))
    }

    /// Reference: a naive LRU with per-line timestamps, same set function.
    struct Naive {
        sets: Vec<Vec<(u64, u64)>>,
        ways: usize,
        clock: u64,
    }

    impl Naive {
        fn access(&mut self, set: usize, line: u64) -> bool {
            self.clock += 1;
            let s = &mut self.sets[set];
            if let Some(e) = s.iter_mut().find(|e| e.0 == line) {
                e.1 = self.clock;
                return true;
            }
            if s.len() == self.ways {
                let (i, _) = s.iter().enumerate().min_by_key(|(_, e)| e.1).unwrap();
                s.remove(i);
            }
            s.push((line, self.clock));
            false
        }
    }

    #[test]
    fn knl_geometry_and_validation() {
        let c = CacheConfig::default();
        assert_eq!(c.sets(), 1024);
        c.validate().unwrap();
        let bad = |size: u64, ways: usize, line: u64| {
            CacheConfig { size: ByteSize(size), ways, line: ByteSize(line) }.validate().unwrap_err().0
        };
        assert_eq!(bad(1 << 20, 16, 48), "machine.cache.line");
        // The associativity's range is declared (checked when a scenario loads).
        let ways =
            tierlab_core::param::find(<CacheConfig as tierlab_core::param::Declared>::fields(), "ways");
        let ways = ways.and_then(|f| f.range).unwrap();
        assert!(!ways.contains(0.0) && ways.contains(64.0) && !ways.contains(65.0));
        assert_eq!(bad(3 << 19, 16, 64), "machine.cache.size");
        assert_eq!(bad(512, 16, 64), "machine.cache.size");
    }

    #[test]
    fn lines_hit_after_the_first_touch() {
        let mut c = cache(32 << 10, 8);
        assert!(!c.access(0x1000, false));
        for off in 1..64 {
            assert!(c.access(0x1000 + off, off % 2 == 0), "same line");
        }
        assert!(!c.access(0x1040, true), "next line");
        assert_eq!((c.hits, c.misses, c.load_misses), (63, 2, 1));
    }

    #[test]
    fn a_working_set_that_fits_hits_and_a_stream_twice_the_size_always_misses() {
        let mut c = cache(64 << 10, 16);
        let fit: Vec<u64> = (0..(48u64 << 10) / 64).map(|k| 0x10_0000 + k * 64).collect();
        for &a in &fit {
            c.access(a, false);
        }
        let m0 = c.misses;
        // Colour hashing may overload a few sets; a 75%-full cache still keeps nearly all.
        for &a in &fit {
            c.access(a, false);
        }
        assert!(c.misses - m0 < fit.len() as u64 / 20, "{} re-misses", c.misses - m0);
        // LRU thrashes on a cyclic stream larger than the cache: every access misses.
        let mut c = cache(64 << 10, 16);
        for _ in 0..3 {
            for k in 0..(256u64 << 10) / 64 {
                c.access(0x4000_0000 + k * 64, false);
            }
        }
        assert_eq!(c.hits, 0);
    }

    #[test]
    fn matches_a_naive_lru_reference() {
        let mut c = cache(16 << 10, 4);
        let mut n = Naive { sets: vec![Vec::new(); 64], ways: 4, clock: 0 };
        let mut rng = crate::rng::Rng::new(5);
        for i in 0..200_000u64 {
            // A mix of a hot region, a stream and random lines over 1 MiB.
            let addr = match i % 3 {
                0 => rng.below(8 << 10),
                1 => (i * 64) % (512 << 10),
                _ => rng.below(1 << 20),
            };
            let line = addr >> 6;
            let want = n.access(c.set_of(line), line);
            assert_eq!(c.access(addr, false), want, "access {i} at {addr:#x}");
        }
        assert!(c.hits > 10_000 && c.misses > 10_000);
    }

    #[test]
    fn pebs_event_filters_misses_only_when_asked() {
        let mut off = Cache::off();
        assert!(!off.enabled());
        assert_eq!(off.pebs_event(0, false, 0b001), 1);
        assert_eq!(off.pebs_event(0, true, 0b001), 0);
        assert_eq!(off.pebs_event(0, true, 0b010), 1);
        assert_eq!(off.pebs_event(0, false, 0), 0);
        let mut c = cache(32 << 10, 8);
        let loads_missing = 0b001 | MISS_ONLY;
        assert_eq!(c.pebs_event(0x2000, false, loads_missing), 1, "cold miss");
        assert_eq!(c.pebs_event(0x2008, false, loads_missing), 0, "hit");
        assert_eq!(c.pebs_event(0x2008, false, 0b001), 1, "all loads count hits too");
        assert_eq!(c.pebs_event(0x3000, true, loads_missing), 0, "a store is not a load");
        assert_eq!(c.pebs_event(0x3000, false, 0), 0, "sampling off");
        assert_eq!(c.hits + c.misses, 5, "every access looked up");
    }

    #[test]
    fn colours_spread_page_aligned_arrays_over_sets() {
        let c = cache(1 << 20, 16);
        // Line 0 of 64 different pages: with virtual indexing they would share one set.
        let mut sets: Vec<usize> = (0..64u64).map(|p| c.set_of((p << 12) >> 6)).collect();
        sets.sort_unstable();
        sets.dedup();
        assert!(sets.len() >= 12, "{} distinct sets of 16 colours", sets.len());
        // Lines within one page use consecutive sets.
        assert_eq!(c.set_of(1) - c.set_of(0), 1);
    }
}
