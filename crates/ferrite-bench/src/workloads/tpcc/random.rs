//! The specification's random generators (clause 4.3.2 and 2.1.6): uniform integers in a
//! closed range, NURand with its constants, random strings, zip codes, last names and the
//! "ORIGINAL" data of items and stock, over the benchmark's seeded generator.

use crate::gen::Rng;

/// The A of NURand for customer last names, customer ids and item ids (clause 2.1.6).
pub const A_C_LAST: u32 = 255;
pub const A_C_ID: u32 = 1023;
pub const A_OL_I_ID: u32 = 8191;

/// The C constants of NURand: one set for the load, another for the runs (clause 2.1.6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NuRandC {
    pub c_last: u32,
    pub c_id: u32,
    pub ol_i_id: u32,
}

impl NuRandC {
    /// The load's constants, drawn (each in `0..=A`).
    pub fn for_load(rng: &mut Rng) -> NuRandC {
        NuRandC {
            c_last: uniform(rng, 0, A_C_LAST),
            c_id: uniform(rng, 0, A_C_ID),
            ol_i_id: uniform(rng, 0, A_OL_I_ID),
        }
    }

    /// The run's constants for a load made with `load`: C_LAST differs from the load's by a
    /// delta in 65..=119 other than 96 and 112 (clause 2.1.6.1); the other two are drawn.
    pub fn for_run(load: NuRandC, rng: &mut Rng) -> NuRandC {
        loop {
            let c_last = uniform(rng, 0, A_C_LAST);
            if run_c_last_valid(load.c_last, c_last) {
                return NuRandC {
                    c_last,
                    c_id: uniform(rng, 0, A_C_ID),
                    ol_i_id: uniform(rng, 0, A_OL_I_ID),
                };
            }
        }
    }
}

/// Whether a run's C for C_LAST may go with the load's (clause 2.1.6.1).
pub fn run_c_last_valid(load: u32, run: u32) -> bool {
    let delta = load.abs_diff(run);
    (65..=119).contains(&delta) && delta != 96 && delta != 112
}

/// A number drawn uniformly from `low..=high`.
pub fn uniform(rng: &mut Rng, low: u32, high: u32) -> u32 {
    debug_assert!(low <= high);
    low + rng.below(u64::from(high - low) + 1) as u32
}

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
pub fn nurand(rng: &mut Rng, a: u32, c: u32, x: u32, y: u32) -> u32 {
    let r = (uniform(rng, 0, a) | uniform(rng, x, y)) as u64;
    ((r + u64::from(c)) % u64::from(y - x + 1)) as u32 + x
}

/// A random a-string of `low..=high` characters (letters and digits).
pub fn a_string(rng: &mut Rng, low: usize, high: usize) -> Vec<u8> {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let len = uniform(rng, low as u32, high as u32) as usize;
    (0..len).map(|_| CHARS[rng.below(CHARS.len() as u64) as usize]).collect()
}

/// A random n-string of `low..=high` digits.
pub fn n_string(rng: &mut Rng, low: usize, high: usize) -> Vec<u8> {
    let len = uniform(rng, low as u32, high as u32) as usize;
    (0..len).map(|_| b'0' + rng.below(10) as u8).collect()
}

/// A zip code: 4 random digits and "11111" (clause 4.3.2.7).
pub fn zip(rng: &mut Rng) -> Vec<u8> {
    let mut z = n_string(rng, 4, 4);
    z.extend_from_slice(b"11111");
    z
}

/// The last name of number `n` in `0..=999`: the syllables of its three digits (clause
/// 4.3.2.3).
pub fn last_name(n: u32) -> Vec<u8> {
    const SYLLABLES: [&str; 10] =
        ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"];
    assert!(n <= 999, "last name number {n}");
    [n / 100, n / 10 % 10, n % 10].iter().flat_map(|&d| SYLLABLES[d as usize].bytes()).collect()
}

/// I_DATA and S_DATA: an a-string of 26..=50 characters, in 10 % of rows with "ORIGINAL" at
/// a random position (clause 4.3.3.1).
pub fn data_maybe_original(rng: &mut Rng) -> Vec<u8> {
    let mut data = a_string(rng, 26, 50);
    if rng.below(10) == 0 {
        let at = rng.below((data.len() - 8) as u64 + 1) as usize;
        data[at..at + 8].copy_from_slice(b"ORIGINAL");
    }
    data
}

/// A random permutation of `1..=n` (Fisher-Yates).
pub fn permutation(rng: &mut Rng, n: u32) -> Vec<u32> {
    let mut all: Vec<u32> = (1..=n).collect();
    for i in (1..all.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        all.swap(i, j);
    }
    all
}

/// A warehouse other than `home` among `1..=warehouses` (which must be at least 2).
pub fn other_warehouse(rng: &mut Rng, home: u16, warehouses: u16) -> u16 {
    debug_assert!(warehouses > 1);
    let w = uniform(rng, 1, u32::from(warehouses) - 1) as u16;
    if w >= home {
        w + 1
    } else {
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = Rng::new(1);
        let c = NuRandC::for_load(&mut rng);
        let mut hits = vec![0u32; 1001];
        for _ in 0..100_000 {
            let x = nurand(&mut rng, A_C_LAST, c.c_last, 0, 999);
            assert!(x <= 999);
            hits[x as usize] += 1;
            let id = nurand(&mut rng, A_C_ID, c.c_id, 1, 3000);
            assert!((1..=3000).contains(&id));
            let item = nurand(&mut rng, A_OL_I_ID, c.ol_i_id, 1, 100_000);
            assert!((1..=100_000).contains(&item));
            let small = nurand(&mut rng, A_OL_I_ID, c.ol_i_id, 1, 30);
            assert!((1..=30).contains(&small));
        }
        // Skewed, not uniform: the most drawn name is far above the mean of 100.
        assert!(*hits.iter().max().unwrap() > 300, "{:?}", hits.iter().max());
    }

    #[test]
    fn run_constants_keep_the_delta_rule() {
        let mut rng = Rng::new(2);
        for _ in 0..1000 {
            let load = NuRandC::for_load(&mut rng);
            assert!(load.c_last <= A_C_LAST && load.c_id <= A_C_ID && load.ol_i_id <= A_OL_I_ID);
            let run = NuRandC::for_run(load, &mut rng);
            let delta = load.c_last.abs_diff(run.c_last);
            assert!((65..=119).contains(&delta) && delta != 96 && delta != 112, "{delta}");
        }
        assert!(!run_c_last_valid(0, 96) && !run_c_last_valid(200, 88) && run_c_last_valid(0, 65));
    }

    #[test]
    fn generators_stay_in_the_specs_ranges() {
        let mut rng = Rng::new(3);
        let mut originals = 0;
        for _ in 0..10_000 {
            let s = a_string(&mut rng, 8, 16);
            assert!((8..=16).contains(&s.len()) && s.iter().all(u8::is_ascii_alphanumeric));
            let z = zip(&mut rng);
            assert!(z.len() == 9 && z.ends_with(b"11111") && z.iter().all(u8::is_ascii_digit));
            let d = data_maybe_original(&mut rng);
            assert!((26..=50).contains(&d.len()));
            originals += usize::from(d.windows(8).any(|w| w == b"ORIGINAL"));
            let x = uniform(&mut rng, 5, 15);
            assert!((5..=15).contains(&x));
            let o = other_warehouse(&mut rng, 3, 5);
            assert!((1..=5).contains(&o) && o != 3);
        }
        assert!((800..1200).contains(&originals), "{originals} of 10,000 ORIGINAL");
        assert_eq!(last_name(0), b"BARBARBAR");
        assert_eq!(last_name(371), b"PRICALLYOUGHT");
        let mut p = permutation(&mut rng, 3000);
        p.sort_unstable();
        assert_eq!(p, (1..=3000).collect::<Vec<_>>());
    }
}
