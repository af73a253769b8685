//! How often pages were looked up in the tier lately: the tier's frequency filter. After
//! "TinyLFU: A Highly Efficient Cache Admission Policy" (Einziger, Friedman, Manes): an
//! evicted page takes an occupied slot only if its page was looked up more often, lately,
//! than the page whose copy the clock would push out for it (and at least twice: the floor
//! is the tier's, `MIN_LOOKUPS_TO_REPLACE`). A copy that keeps serving hits is then not
//! pushed out by one that never will.
//!
//! The counts are estimates, kept in a counting sketch: four 8-bit counters per page id,
//! picked by a hash within one cache line, in 32 bytes per slot of the tier (lines of 62
//! counters; 1 MiB for a tier of 128 MiB, outside the pool); a page's
//! count is the least of its four. A lookup raises the least one(s) only (a conservative
//! update: collisions inflate less). So that the counts follow the workload as it changes,
//! every counter is halved after each ten lookups per slot (TinyLFU's reset; each lane
//! halves after its own count of them, so the lanes together halve at that rate). A
//! halving bumps an epoch; each line (62 counters and the epoch it is up to date with)
//! takes its halvings when next touched, so every count is as if all were halved at once,
//! and no lookup waits for a pass over the sketch. (Halving a line at a time instead, as a
//! cursor going round, put the candidate's and the victim's counts at different ages: the
//! filter turned away a third as many pages, and the tier served 40.5 % of its lookups
//! against 41.5–42 %.)
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

use std::sync::atomic::{AtomicU16, AtomicU64, AtomicU8, Ordering};

use crate::error::PageId;

/// Lookups per slot between halvings (TinyLFU's sample is ten times the cache's size).
const SAMPLE_PER_SLOT: u64 = 10;

/// Bytes of sketch per slot of the tier (rounded up to a power of two in all; 62 of each
/// line's 64 are counters).
const BYTES_PER_SLOT: u64 = 32;

/// Counters per line: a page's four counters lie in one line of 64 bytes (with the line's
/// epoch), so a lookup touches one cache line of the sketch.
const LINE: usize = 62;

/// One cache line of counters, and the epoch they were last halved to.
#[derive(Debug)]
#[repr(C, align(64))]
struct Line {
    counters: [AtomicU8; LINE],
    /// The sketch's epoch (its low 16 bits) the counters are up to date with.
    epoch: AtomicU16,
}

/// Estimated lookups of each page since about the last `SAMPLE_PER_SLOT × slots` lookups.
#[derive(Debug)]
pub(super) struct Frequency {
    lines: Box<[Line]>,
    /// log2 of the lines' number.
    bits: u32,
    /// Lookups a lane counts between halvings (each lane halves after its own).
    period: u64,
    /// Halvings so far. A halving only bumps it; each line catches up when next touched
    /// (`Frequency::catch_up`), so no lookup waits for a pass over the whole sketch
    /// (1 MiB for a tier of 128 MiB, 256 MiB for one of 32 GiB).
    epoch: AtomicU64,
}

impl Frequency {
    /// For a tier of `slots` slots.
    pub(super) fn new(slots: u64) -> Frequency {
        let lines = (BYTES_PER_SLOT * slots).next_power_of_two().max(1024) / 64;
        let line = || Line {
            counters: std::array::from_fn(|_| AtomicU8::new(0)),
            epoch: AtomicU16::new(0),
        };
        Frequency {
            lines: (0..lines).map(|_| line()).collect(),
            bits: lines.trailing_zeros(),
            period: (SAMPLE_PER_SLOT * slots).max(1),
            epoch: AtomicU64::new(0),
        }
    }

    /// The line of `page_id` and its four counters there: a line picked by the top bits of
    /// a mixed hash (SplitMix64's finalizer), four places in it by its low 24 bits.
    #[inline]
    fn counters(&self, page_id: PageId) -> (&Line, [&AtomicU8; 4]) {
        let mut z = page_id.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let line = &self.lines[if self.bits == 0 { 0 } else { (z >> (64 - self.bits)) as usize }];
        (line, std::array::from_fn(|i| &line.counters[(z >> (6 * i)) as usize % 64 % LINE]))
    }

    /// How many halvings `line` has yet to take, as of now.
    #[inline]
    fn lag(&self, line: &Line) -> (u16, u16) {
        let now = self.epoch.load(Ordering::Relaxed) as u16;
        (now, now.wrapping_sub(line.epoch.load(Ordering::Relaxed)))
    }

    /// Brings `line` up to the sketch's epoch: its counters halved once per halving since
    /// it was last touched (whoever moves its epoch does it; another lane touching the line
    /// meanwhile may see it un-halved for that moment).
    #[inline]
    fn catch_up(&self, line: &Line) {
        let (now, lag) = self.lag(line);
        if lag == 0 {
            return;
        }
        let then = now.wrapping_sub(lag);
        if line.epoch.compare_exchange(then, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            for counter in &line.counters {
                let count = counter.load(Ordering::Relaxed);
                if count != 0 {
                    counter.store(count.checked_shr(lag.into()).unwrap_or(0), Ordering::Relaxed);
                }
            }
        }
    }

    /// Counts a lookup of `page_id`, the `nth` (from 1) its lane counted: every `period`
    /// of them, halves every counter first (bumps the epoch).
    #[inline]
    pub(super) fn record(&self, page_id: PageId, nth: u64) {
        if nth % self.period == 0 {
            self.epoch.fetch_add(1, Ordering::Relaxed);
        }
        let (line, counters) = self.counters(page_id);
        self.catch_up(line);
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

    /// The estimated lookups of `page_id` lately: the least of its four counters (halved
    /// as many times as its line has yet to be).
    #[inline]
    pub(super) fn estimate(&self, page_id: PageId) -> u8 {
        let (line, counters) = self.counters(page_id);
        let least = counters.into_iter().map(|c| c.load(Ordering::Relaxed)).min().expect("four");
        least.checked_shr(self.lag(line).1.into()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::rng::Rng;

    #[test]
    fn counts_follow_lookups_and_halve_after_the_sample() {
        // 1,024 slots: 32 KiB of sketch, halved every 10,240 lookups of the one lane.
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

    /// A line takes the halvings it missed when next touched, all of them: as if every
    /// counter had been halved at each period's end.
    #[test]
    fn a_line_untouched_for_periods_takes_its_halvings_late() {
        let f = Frequency::new(1024);
        let mut nth = 0;
        let mut look = |page: PageId, times: u64| {
            for _ in 0..times {
                nth += 1;
                f.record(page, nth);
            }
        };
        look(3, 8);
        assert_eq!(f.estimate(3), 8);
        // Two periods of lookups of another page (in another line): page 3's line is not
        // touched, yet its estimate is halved twice.
        let (line_of_3, _) = f.counters(3);
        let (line_of_other, _) = f.counters(77);
        assert!(!std::ptr::eq(line_of_3, line_of_other));
        look(77, 2 * 10_240);
        assert_eq!(f.estimate(3), 2);
        look(3, 1);
        assert_eq!(f.estimate(3), 3, "caught up, then counted");
        // Eight halvings or more empty a counter.
        look(77, 9 * 10_240);
        assert_eq!(f.estimate(3), 0);
        look(3, 1);
        assert_eq!(f.estimate(3), 1);
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
