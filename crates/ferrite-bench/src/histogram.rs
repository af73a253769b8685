//! A latency histogram with logarithmic buckets: exact below 16, then 16 linear buckets per
//! power of two, so a percentile is off by at most 1/16 (6.25 %) of its value. Fixed size
//! (976 counters), no allocation when recording; merge one per thread at the end.

/// Linear buckets per power of two (and the values below which buckets are exact).
const SUB_BUCKETS: u64 = 16;
const SUB_BITS: u32 = SUB_BUCKETS.trailing_zeros();
/// Buckets for every `u64`: 16 exact ones, then 16 per power of two from 2^4 to 2^63.
const BUCKETS: usize = (SUB_BUCKETS * (64 - SUB_BITS as u64 + 1)) as usize;

const _: () = assert!(SUB_BUCKETS.is_power_of_two() && BUCKETS == 976);

/// Counts of recorded values (nanoseconds, by convention) in logarithmic buckets.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

/// The bucket holding `value`.
fn bucket_of(value: u64) -> usize {
    if value < SUB_BUCKETS {
        return value as usize;
    }
    let exponent = 63 - value.leading_zeros(); // >= SUB_BITS
    let sub = (value >> (exponent - SUB_BITS)) & (SUB_BUCKETS - 1);
    ((u64::from(exponent - SUB_BITS + 1)) * SUB_BUCKETS + sub) as usize
}

/// The smallest value and the width of bucket `index`.
fn bucket_range(index: usize) -> (u64, u64) {
    let index = index as u64;
    if index < SUB_BUCKETS {
        return (index, 1);
    }
    let shift = (index / SUB_BUCKETS - 1) as u32; // exponent - SUB_BITS
    let sub = index % SUB_BUCKETS;
    ((SUB_BUCKETS + sub) << shift, 1 << shift)
}

impl Histogram {
    pub fn new() -> Self {
        Histogram { counts: Box::new([0; BUCKETS]), count: 0, sum: 0, min: u64::MAX, max: 0 }
    }

    pub fn record(&mut self, value: u64) {
        self.counts[bucket_of(value)] += 1;
        self.count += 1;
        self.sum += u128::from(value);
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    /// Adds every value recorded in `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine += theirs;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The smallest value recorded (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }

    /// The largest value recorded (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The mean of the values recorded (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        self.sum as f64 / self.count as f64
    }

    /// The value below or at which `percent` % of the recorded values lie (the value of rank
    /// `ceil(percent / 100 * count)`), within 1/16 of its value: the middle of its bucket,
    /// clamped to the smallest and largest values recorded; the smallest and largest ranks
    /// are exact. 0 when empty.
    pub fn percentile(&self, percent: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let percent = percent.clamp(0.0, 100.0);
        let rank = ((percent / 100.0 * self.count as f64).ceil() as u64).clamp(1, self.count);
        // The extremes are known exactly.
        if rank == 1 {
            return self.min;
        }
        if rank == self.count {
            return self.max;
        }
        let mut seen = 0u64;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                let (low, width) = bucket_range(index);
                return (low + (width - 1) / 2).clamp(self.min, self.max);
            }
        }
        unreachable!("the counts add up to self.count")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut values = vec![0u64, 1, 15, 16, 17, 31, 32, 33, 1000, 1 << 40, u64::MAX];
        values.extend((0..2000).map(|i| i * 37));
        for v in values {
            let index = bucket_of(v);
            assert!(index < BUCKETS, "{v}");
            let (low, width) = bucket_range(index);
            assert!(low <= v && v - low < width, "{v} in bucket {index} = {low}+{width}");
            // Relative width at most 1/16.
            assert!(width == 1 || width * SUB_BUCKETS <= low, "{v}");
        }
        for index in 1..BUCKETS {
            let (low, _) = bucket_range(index);
            let (prev_low, prev_width) = bucket_range(index - 1);
            assert_eq!(prev_low + prev_width, low, "bucket {index}");
        }
    }

    #[test]
    fn percentiles_of_a_uniform_range() {
        let mut h = Histogram::new();
        for v in 1..=10_000u64 {
            h.record(v);
        }
        assert_eq!(h.count(), 10_000);
        for (p, exact) in [(50.0, 5_000.0), (90.0, 9_000.0), (99.0, 9_900.0), (99.9, 9_990.0)] {
            let got = h.percentile(p) as f64;
            assert!((got - exact).abs() <= exact / 16.0, "p{p}: {got} vs {exact}");
        }
        assert_eq!(h.percentile(100.0), 10_000);
        assert_eq!(h.percentile(0.0), 1);
        assert_eq!(h.min(), 1);
        assert_eq!(h.max(), 10_000);
        assert!((h.mean() - 5_000.5).abs() < 1e-9);
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::new();
        for v in [3, 3, 3, 7, 9] {
            h.record(v);
        }
        assert_eq!(h.percentile(50.0), 3);
        assert_eq!(h.percentile(60.0), 3);
        assert_eq!(h.percentile(80.0), 7);
        assert_eq!(h.percentile(99.0), 9);
    }

    #[test]
    fn a_skewed_distribution_has_a_long_tail() {
        let mut h = Histogram::new();
        for _ in 0..990 {
            h.record(2_000);
        }
        for _ in 0..10 {
            h.record(1_000_000);
        }
        assert!(h.percentile(50.0).abs_diff(2_000) <= 2_000 / 16);
        assert!(h.percentile(99.0).abs_diff(2_000) <= 2_000 / 16);
        assert!(h.percentile(99.5).abs_diff(1_000_000) <= 1_000_000 / 16);
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        let mut all = Histogram::new();
        for v in 0..5_000u64 {
            let v = v * v % 100_003;
            if v % 3 == 0 {
                a.record(v)
            } else {
                b.record(v)
            }
            all.record(v);
        }
        a.merge(&b);
        assert_eq!(a.count(), all.count());
        assert_eq!(a.min(), all.min());
        assert_eq!(a.max(), all.max());
        for p in [1.0, 50.0, 99.0, 99.99] {
            assert_eq!(a.percentile(p), all.percentile(p));
        }
    }

    #[test]
    fn empty_histogram_reports_zeros() {
        let h = Histogram::new();
        assert_eq!((h.count(), h.min(), h.max(), h.percentile(50.0)), (0, 0, 0, 0));
        assert_eq!(h.mean(), 0.0);
        let mut merged = Histogram::new();
        merged.merge(&h);
        assert_eq!(merged.min(), 0);
    }
}
