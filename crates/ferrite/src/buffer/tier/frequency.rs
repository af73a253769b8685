//! How often pages were looked up in the tier lately: the tier's frequency filter. After
//! "TinyLFU: A Highly Efficient Cache Admission Policy" (Einziger, Friedman, Manes): an
//! evicted page takes an occupied slot only if its page was looked up more often, lately,
//! than the page whose copy the clock would push out for it (and at least twice: the floor
//! is the tier's, `MIN_LOOKUPS_TO_REPLACE`). A copy that keeps serving hits is then not
//! pushed out by one that never will.
//!
//! The counts are estimates, kept in a counting sketch: four 8-bit counters per page id,
//! picked by a hash within one cache line, in an array of 32 counters per slot of the tier
//! (32 bytes per 4 KiB of tier, outside the pool: 1 MiB for a tier of 128 MiB); a page's
//! count is the least of its four. A lookup raises the least one(s) only (a conservative
//! update: collisions inflate less). So that the counts follow the workload as it changes,
//! every counter is halved after each ten lookups per slot (TinyLFU's reset; each lane
//! halves after its own count of them, so the lanes together halve at that rate).
//!
//! The sketch is sized for the pages a sample can look up, up to ten per slot. Measured
//! on YCSB-C (4.6 M keys, 64 MiB pool, 128 MiB tier, OBP admission), with two counters per
//! page anywhere in the array: 2 counters per slot held the tier's hits at 32.6 % of its
//! lookups, below the 37 % without the filter (collisions made the counts noise); 8 gave
//! 40.2 %, 16 41.1 %, 32 41.5–42.0 %, 64 42.1 %. Four counters in one line, at 32 per
//! slot: 42.1 %.
//!
//! Counters are read and written with relaxed atomics and no read-modify-write: two lanes
//! raising one counter at once may count once, and a halving may lose a raise made during
//! it. Each only makes an estimate a little lower; no copy is ever served or trusted on
//! the strength of a count.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::PageId;

/// Lookups per slot between halvings (TinyLFU's sample is ten times the cache's size).
const SAMPLE_PER_SLOT: u64 = 10;

/// Counters per slot of the tier (rounded up to a power of two in all).
const COUNTERS_PER_SLOT: u64 = 32;

/// Counters per line: a page's four counters lie in one line of 64 bytes, so a lookup
/// touches one cache line of the sketch.
const LINE: usize = 64;

/// One cache line of counters.
#[derive(Debug)]
#[repr(align(64))]
struct Line([AtomicU8; LINE]);

/// Estimated lookups of each page since about the last `SAMPLE_PER_SLOT × slots` lookups.
#[derive(Debug)]
pub(super) struct Frequency {
    lines: Box<[Line]>,
    /// log2 of the lines' number.
    bits: u32,
    /// Lookups a lane counts between halvings (each lane halves after its own).
    period: u64,
}

impl Frequency {
    /// For a tier of `slots` slots.
    pub(super) fn new(slots: u64) -> Frequency {
        let counters = (COUNTERS_PER_SLOT * slots).next_power_of_two().max(1024);
        let lines = counters / LINE as u64;
        Frequency {
            lines: (0..lines).map(|_| Line(std::array::from_fn(|_| AtomicU8::new(0)))).collect(),
            bits: lines.trailing_zeros(),
            period: (SAMPLE_PER_SLOT * slots).max(1),
        }
    }

    /// The four counters of `page_id`: a line picked by the top bits of a mixed hash
    /// (SplitMix64's finalizer), and four places in it by its low 24 bits.
    #[inline]
    fn counters(&self, page_id: PageId) -> [&AtomicU8; 4] {
        let mut z = page_id.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let line = &self.lines[if self.bits == 0 { 0 } else { (z >> (64 - self.bits)) as usize }];
        std::array::from_fn(|i| &line.0[(z >> (6 * i)) as usize % LINE])
    }

    /// Counts a lookup of `page_id`, the `nth` (from 1) its lane counted: every `period`
    /// of them, halves every counter first.
    #[inline]
    pub(super) fn record(&self, page_id: PageId, nth: u64) {
        if nth % self.period == 0 {
            self.halve();
        }
        let counters = self.counters(page_id);
        let counts = counters.map(|c| c.load(Ordering::Relaxed));
        let least = counts.into_iter().min().expect("four");
        if least == u8::MAX {
            return;
        }
        // Only the counters at the estimate rise: the others already count more (other
        // pages' lookups in them).
        for (counter, count) in counters.into_iter().zip(counts) {
            if count == least {
                counter.store(least + 1, Ordering::Relaxed);
            }
        }
    }

    /// The estimated lookups of `page_id` lately: the least of its four counters.
    #[inline]
    pub(super) fn estimate(&self, page_id: PageId) -> u8 {
        let counters = self.counters(page_id);
        counters.into_iter().map(|c| c.load(Ordering::Relaxed)).min().expect("four")
    }

    /// Halves every counter (one pass over 32 bytes per slot: 1 MiB for a tier of
    /// 128 MiB), on the worker whose lookup ends the period: its task waits that pass out,
    /// once per ten lookups per slot of its own.
    fn halve(&self) {
        for counter in self.lines.iter().flat_map(|line| line.0.iter()) {
            let count = counter.load(Ordering::Relaxed);
            if count != 0 {
                counter.store(count / 2, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::rng::Rng;

    #[test]
    fn counts_follow_lookups_and_halve_after_the_sample() {
        // 1,024 slots: 32,768 counters, halved every 10,240 lookups of the one lane.
        let f = Frequency::new(1024);
        assert_eq!(f.period, 10_240);
        let mut nth = 0;
        let mut look = |page: PageId| {
            nth += 1;
            f.record(page, nth);
        };
        for _ in 0..7 {
            look(3);
        }
        look(4);
        assert!(f.estimate(3) >= 7, "never below the lookups: {}", f.estimate(3));
        assert!(f.estimate(4) >= 1);
        assert!(f.estimate(3) > f.estimate(4));
        // Many other pages, fewer than a sample's worth of lookups: estimates only rise.
        let mut rng = Rng::new(7);
        for _ in 0..10_000 {
            look(1_000 + rng.below(100_000));
        }
        assert!(f.estimate(3) >= 7);
        // The sample's end halves every counter: page 3's count falls below what it was.
        let before = f.estimate(3);
        for _ in 0..300 {
            look(1_000 + rng.below(100_000));
        }
        assert!(f.estimate(3) <= before / 2 + 1, "{} after {before}", f.estimate(3));
    }

    #[test]
    fn hot_pages_outrank_cold_ones_among_many() {
        // 4,096 slots, 100,000 pages: the 64 looked up 40 times each estimate higher than
        // nearly every page looked up once, whatever the collisions.
        let f = Frequency::new(4096);
        let mut rng = Rng::new(11);
        let mut nth = 0;
        for round in 0..40 {
            for hot in 0..64u64 {
                nth += 1;
                f.record(hot * 7_919, nth);
            }
            for _ in 0..500 {
                nth += 1;
                f.record(1_000_000 + rng.below(100_000) + round, nth);
            }
        }
        assert!(nth < f.period, "no halving in this test");
        let hot_min = (0..64u64).map(|hot| f.estimate(hot * 7_919)).min().unwrap();
        assert!(hot_min >= 40, "a hot page's estimate: {hot_min}");
        let cold_over = (0..2_000u64).filter(|&p| f.estimate(2_000_000 + p) >= hot_min).count();
        assert!(cold_over < 20, "{cold_over} of 2,000 unseen pages estimate as hot");
    }

    #[test]
    fn a_counter_saturates_instead_of_wrapping() {
        let f = Frequency::new(16);
        for nth in 1..=300 {
            // Past the period (160) once: halved then, and still rising after.
            f.record(9, nth);
        }
        assert!(f.estimate(9) >= 140, "{}", f.estimate(9));
        let g = Frequency::new(1 << 20);
        for nth in 1..=1_000 {
            g.record(9, nth);
        }
        assert_eq!(g.estimate(9), u8::MAX);
    }
}
