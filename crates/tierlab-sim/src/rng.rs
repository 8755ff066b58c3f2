//! Deterministic random numbers.
//!
//! Every random choice in a simulation flows from the scenario's one seed through
//! [`derive`], which mixes the seed with a component name and an index (thread, core) so
//! that components draw independent streams and adding a component never shifts another's
//! stream. The generator is xoshiro256** seeded by SplitMix64: fast, and defined here so the
//! numbers never change with a dependency's version.

/// SplitMix64 step, used for seeding and hashing.
#[inline]
pub fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A stable 64-bit hash of a string (FNV-1a), for deriving streams by name.
pub fn hash_str(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// The seed of stream (`name`, `index`) under scenario seed `seed`.
pub fn derive(seed: u64, name: &str, index: u64) -> u64 {
    let mut x = seed ^ hash_str(name).rotate_left(17) ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
    splitmix64(&mut x);
    splitmix64(&mut x)
}

/// xoshiro256** generator.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator seeded from one 64-bit value.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let s = [splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x)];
        Rng { s }
    }

    /// A generator for stream (`name`, `index`) of scenario seed `seed`.
    pub fn derived(seed: u64, name: &str, index: u64) -> Self {
        Rng::new(derive(seed, name, index))
    }

    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, n)` (Lemire's multiply-shift; `n` > 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    #[inline]
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::derived(42, "workload", 0);
        let mut b = Rng::derived(42, "workload", 0);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn streams_differ_by_seed_name_and_index() {
        let first = |s, n, i| Rng::derived(s, n, i).next_u64();
        assert_ne!(first(1, "a", 0), first(2, "a", 0));
        assert_ne!(first(1, "a", 0), first(1, "b", 0));
        assert_ne!(first(1, "a", 0), first(1, "a", 1));
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut r = Rng::new(7);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            let v = r.below(10);
            counts[v as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }
}
