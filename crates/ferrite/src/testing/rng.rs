//! The one random generator of the engine's tests: SplitMix64 (Steele, Lea, Flood 2014),
//! seeded, so that a failing seed replays the same draws. The simulated disk picks its faults
//! with it, the model and crash tests their operations.

/// The golden-ratio increment of SplitMix64.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
/// The denominator of [`Rng::chance`] (and of the simulated disk's fault rates).
pub const PER_MILLION: u32 = 1_000_000;

/// A SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// The generator whose first output is SplitMix64's first output for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (Lemire's multiply-shift). Panics if `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// An index into a collection of `len` items. Panics if `len` is 0.
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// True or false, evenly.
    pub fn coin(&mut self) -> bool {
        self.next_u64() >> 63 == 1
    }

    /// True with probability `per_million` / 10^6; draws nothing at 0 or at certainty.
    pub fn chance(&mut self, per_million: u32) -> bool {
        match per_million {
            0 => false,
            p if p >= PER_MILLION => true,
            p => self.below(u64::from(PER_MILLION)) < u64::from(p),
        }
    }

    /// `len` bytes of any value.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }

    /// `len` letters from the first `alphabet` of `a`, `b`, `c`, ...: few letters give many
    /// shared prefixes.
    pub fn letters(&mut self, len: usize, alphabet: u8) -> Vec<u8> {
        (0..len).map(|_| b'a' + self.below(u64::from(alphabet)) as u8).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_splitmix64() {
        let mut rng = Rng::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(rng.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn draws_stay_in_range() {
        let mut rng = Rng::new(42);
        assert!((0..10_000).all(|_| rng.below(7) < 7 && rng.index(3) < 3));
        assert_eq!(rng.below(1), 0);
        assert!(!rng.chance(0) && rng.chance(PER_MILLION));
        assert_eq!(rng.bytes(5).len(), 5);
        let letters = rng.letters(1000, 3);
        assert!(letters.iter().all(|b| (b'a'..=b'c').contains(b)));
        assert!([b'a', b'b', b'c'].iter().all(|c| letters.contains(c)));
        let coins = (0..1000).filter(|_| rng.coin()).count();
        assert!((400..600).contains(&coins), "{coins}");
    }

    #[test]
    #[should_panic(expected = "below(0)")]
    fn below_zero_panics() {
        Rng::new(1).below(0);
    }
}
