//! Key choosers for the workloads: uniform, zipfian (YCSB's generator, after Gray et al.,
//! "Quickly generating billion-record synthetic databases", SIGMOD 1994) and "latest" (zipfian
//! over recency, YCSB workload D).
//!
//! The zipfian generator draws rank `r` in `0..n` with probability proportional to
//! `1 / (r + 1)^theta`. YCSB scrambles ranks through a hash so that the hot keys are spread
//! over the key space instead of sitting together in the first pages; `Zipf::scrambled` does
//! the same (a bijection on `0..n`, so every key stays reachable and the skew is unchanged).

use crate::gen::rng::Rng;

/// YCSB's default skew.
pub const YCSB_THETA: f64 = 0.99;

/// A zipfian distribution over `0..n`, sampled exactly by rejection-inversion (Hörmann and
/// Derflinger, "Rejection-inversion to generate variates from monotone discrete
/// distributions", 1996): O(1) per draw, no table. (YCSB's own generator, after Gray et al.,
/// is an approximation whose rank 2 comes out ~20 % too often; the test below would catch it.)
#[derive(Debug, Clone)]
pub struct Zipf {
    n: u64,
    theta: f64,
    zeta_n: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
    scramble: bool,
}

/// `sum_{i=1..=n} 1 / i^theta`. Exact below a million terms; above, the sum of the first
/// million plus the Euler-Maclaurin estimate of the tail (relative error far below 1e-9).
pub fn zeta(n: u64, theta: f64) -> f64 {
    const EXACT: u64 = 1_000_000;
    let exact_to = n.min(EXACT);
    let mut sum: f64 = (1..=exact_to).map(|i| (i as f64).powf(-theta)).sum();
    if n > EXACT {
        let (a, b) = (EXACT as f64, n as f64);
        let integral = (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta);
        let ends = 0.5 * (b.powf(-theta) - a.powf(-theta));
        let slope = theta / 12.0 * (a.powf(-theta - 1.0) - b.powf(-theta - 1.0));
        sum += integral + ends + slope;
    }
    sum
}

/// `(exp(x) - 1) / x`, accurate near 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + x * 0.25))
    }
}

/// `ln(1 + x) / x`, accurate near 0.
fn ln1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

impl Zipf {
    /// Ranks `0..n`, rank 0 the most popular; `theta` in (0, 1).
    pub fn new(n: u64, theta: f64) -> Self {
        assert!(n > 0, "a zipfian distribution needs at least one item");
        assert!(theta > 0.0 && theta < 1.0, "theta must lie in (0, 1)");
        let mut z = Zipf {
            n,
            theta,
            zeta_n: zeta(n, theta),
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
            scramble: false,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(n as f64 + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// The same skew with ranks mapped to items by a bijection of `0..n`, so that popular
    /// items are spread over the key space (as YCSB's scrambled zipfian does).
    pub fn scrambled(n: u64, theta: f64) -> Self {
        Zipf { scramble: true, ..Zipf::new(n, theta) }
    }

    pub fn n(&self) -> u64 {
        self.n
    }

    /// The probability of rank `rank` (for tests and reports).
    pub fn probability(&self, rank: u64) -> f64 {
        ((rank + 1) as f64).powf(-self.theta) / self.zeta_n
    }

    fn h(&self, x: f64) -> f64 {
        (-self.theta * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        expm1_over_x((1.0 - self.theta) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.theta)).max(-1.0);
        (ln1p_over_x(t) * x).exp()
    }

    /// A rank (0 most popular), unscrambled.
    pub fn rank(&self, rng: &mut Rng) -> u64 {
        loop {
            let unit = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let u = self.h_integral_n + unit * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            let kf = k as f64;
            if kf - x <= self.s || u >= self.h_integral(kf + 0.5) - self.h(kf) {
                return k - 1;
            }
        }
    }

    /// An item in `0..n`.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let rank = self.rank(rng);
        if self.scramble {
            permute(rank, self.n)
        } else {
            rank
        }
    }
}

/// A bijection of `0..n` that scatters neighbours: a permutation of the next power of two,
/// applied again to values that land outside `0..n` until they fall in (cycle walking).
pub fn permute(x: u64, n: u64) -> u64 {
    debug_assert!(x < n);
    if n <= 2 {
        return x;
    }
    let bits = 64 - (n - 1).leading_zeros();
    let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let mut v = x;
    loop {
        v = scatter(v, bits, mask);
        if v < n {
            return v;
        }
    }
}

/// A bijection of `0..=mask` (mask = 2^bits - 1): multiplications by odd constants and
/// xor-shifts, each invertible modulo 2^bits.
fn scatter(v: u64, bits: u32, mask: u64) -> u64 {
    let shift = (bits / 2).max(1);
    let mut v = v.wrapping_mul(0x9E37_79B9_7F4A_7C15) & mask;
    v ^= v >> shift;
    v = v.wrapping_mul(0xBF58_476D_1CE4_E5B9) & mask;
    v ^= v >> shift;
    v.wrapping_add(0x94D0_49BB_1331_11EB) & mask
}

/// Chooses which key an operation touches.
#[derive(Debug, Clone)]
pub enum KeyChooser {
    /// Uniform over `0..n`.
    Uniform,
    /// Scrambled zipfian over `0..n`.
    Zipfian(Zipf),
    /// Zipfian over recency: the newest key most often (YCSB D).
    Latest(Zipf),
}

impl KeyChooser {
    /// A key in `0..n` (`n` grows as inserts land; the zipfians were built for the initial
    /// count and follow the growth as YCSB's do: by shifting, for latest, and by clamping).
    pub fn choose(&self, rng: &mut Rng, n: u64) -> u64 {
        match self {
            KeyChooser::Uniform => rng.below(n.max(1)),
            KeyChooser::Zipfian(z) => z.sample(rng).min(n.saturating_sub(1)),
            KeyChooser::Latest(z) => {
                let newest = n.saturating_sub(1);
                newest - z.rank(rng).min(newest)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeta_matches_the_exact_sum_and_its_tail_estimate() {
        let exact: f64 = (1..=2000u64).map(|i| (i as f64).powf(-0.99)).sum();
        assert!((zeta(2000, 0.99) - exact).abs() < 1e-9);
        // Above the exact part: compare with a direct sum over 3 M terms.
        let direct: f64 = (1..=3_000_000u64).map(|i| (i as f64).powf(-0.99)).sum();
        assert!((zeta(3_000_000, 0.99) - direct).abs() / direct < 1e-9);
    }

    /// The skew is what it claims: observed frequencies of the top ranks match the formula,
    /// and the top 1 % of ranks take the share the distribution gives them.
    #[test]
    fn zipfian_frequencies_match_the_distribution() {
        let n = 100_000;
        let zipf = Zipf::new(n, YCSB_THETA);
        let mut rng = Rng::new(7);
        let draws = 2_000_000u64;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            counts[zipf.rank(&mut rng) as usize] += 1;
        }
        for rank in [0u64, 1, 2, 9, 99] {
            let expected = zipf.probability(rank) * draws as f64;
            let got = counts[rank as usize] as f64;
            assert!(
                (got - expected).abs() < 0.05 * expected + 50.0,
                "rank {rank}: {got} vs {expected}"
            );
        }
        let top: u64 = counts[..1000].iter().sum();
        let expected_top: f64 = (0..1000).map(|r| zipf.probability(r)).sum::<f64>() * draws as f64;
        assert!((top as f64 - expected_top).abs() < 0.02 * expected_top, "{top} vs {expected_top}");
    }

    #[test]
    fn scrambling_is_a_bijection_and_keeps_the_skew() {
        for n in [1u64, 2, 3, 10, 1000, 4097, 65_536] {
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = permute(x, n);
                assert!(y < n && !seen[y as usize], "n {n}: {x} -> {y}");
                seen[y as usize] = true;
            }
        }
        let n = 10_000;
        let plain = Zipf::new(n, YCSB_THETA);
        let scrambled = Zipf::scrambled(n, YCSB_THETA);
        let (mut a, mut b) = (Rng::new(3), Rng::new(3));
        let mut hot = 0;
        for _ in 0..100_000 {
            let rank = plain.rank(&mut a);
            assert_eq!(scrambled.sample(&mut b), permute(rank, n));
            hot += u64::from(rank == 0);
        }
        assert!(hot > 5_000, "rank 0 is hot: {hot}");
        // Hot items are not all at the start of the key space.
        assert!(permute(0, n) != 0 || permute(1, n) != 1);
    }

    #[test]
    fn uniform_covers_every_key_and_runs_replay_from_a_seed() {
        let chooser = KeyChooser::Uniform;
        let mut rng = Rng::new(11);
        let n = 1000;
        let mut seen = vec![false; n as usize];
        for _ in 0..20_000 {
            seen[chooser.choose(&mut rng, n) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "every key drawn");
        let zipf = KeyChooser::Zipfian(Zipf::scrambled(n, YCSB_THETA));
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..100).map(|_| zipf.choose(&mut rng, n)).collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }

    #[test]
    fn latest_prefers_the_newest_keys() {
        let chooser = KeyChooser::Latest(Zipf::new(1000, YCSB_THETA));
        let mut rng = Rng::new(2);
        let draws: Vec<u64> = (0..10_000).map(|_| chooser.choose(&mut rng, 5000)).collect();
        assert!(draws.iter().all(|&k| k < 5000));
        let newest = draws.iter().filter(|&&k| k >= 4990).count();
        assert!(newest > 3000, "{newest} of 10000 among the 10 newest");
    }
}
