//! A tiny deterministic random number generator (SplitMix64) for workloads: seeded, so that
//! a run with the same seed draws the same keys, and free of dependencies.
//!
//! SplitMix64 (Steele, Lea, Flood 2014; the seeder of `java.util.SplittableRandom` and of
//! the xoshiro family) passes BigCrush, costs an add and a mix per draw, and splits into
//! independent streams cheaply, which is all a benchmark needs.

/// The golden-ratio increment of SplitMix64.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's finaliser: a bijective mix of 64 bits (every input bit affects every output
/// bit). Also handy to derive data from an index.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// The generator whose first output is SplitMix64's first output for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// Stream `index` of `seed`: one per thread, so that threads draw different sequences and
    /// a run is reproducible from its seed and thread count.
    pub fn stream(seed: u64, index: u64) -> Self {
        Rng::new(mix64(seed ^ mix64(index.wrapping_add(1).wrapping_mul(GAMMA))))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix64(self.state)
    }

    /// A number uniformly drawn from `0..n` (Lemire's multiply-shift: the bias, at most
    /// `n / 2^64`, is far below anything a benchmark can see). Panics if `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "Rng::below(0)");
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_splitmix64() {
        // The reference implementation's first outputs for seed 0.
        let mut rng = Rng::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(rng.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn same_seed_same_sequence_and_streams_differ() {
        let draw = |mut rng: Rng| (0..8).map(|_| rng.next_u64()).collect::<Vec<_>>();
        assert_eq!(draw(Rng::stream(7, 0)), draw(Rng::stream(7, 0)));
        assert_ne!(draw(Rng::stream(7, 0)), draw(Rng::stream(7, 1)));
        assert_ne!(draw(Rng::stream(7, 0)), draw(Rng::stream(8, 0)));
    }

    #[test]
    fn below_stays_in_range_and_is_roughly_uniform() {
        let mut rng = Rng::new(42);
        let mut buckets = [0u32; 10];
        let draws = 200_000;
        for _ in 0..draws {
            let x = rng.below(10);
            buckets[x as usize] += 1;
        }
        for count in buckets {
            let expected = draws / 10;
            assert!(count.abs_diff(expected) < expected / 20, "{buckets:?}");
        }
        assert_eq!(rng.below(1), 0);
        let big = u64::MAX - 1;
        assert!((0..1000).all(|_| rng.below(big) < big));
    }

    #[test]
    #[should_panic(expected = "below(0)")]
    fn below_zero_panics() {
        Rng::new(1).below(0);
    }
}
