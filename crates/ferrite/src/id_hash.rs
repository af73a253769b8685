//! A hasher for maps keyed by page ids: one multiply, where the standard SipHash costs tens
//! of nanoseconds per lookup on the worker's hot path (a map access or two per read). Page
//! ids are not attacker-chosen keys; the multiply spreads sequential ids over the table.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::error::PageId;

/// Hashes one `u64` with a Fibonacci multiply; other inputs are folded in eight bytes at a time.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A map from page ids.
pub type PageMap<V> = HashMap<PageId, V, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_spread_and_maps_work() {
        let mut map = PageMap::default();
        for id in 0..10_000u64 {
            map.insert(id, id * 2);
        }
        assert!((0..10_000u64).all(|id| map[&id] == id * 2));
        let mut buckets = [0u32; 64];
        for id in 0..6_400u64 {
            let mut hasher = IdHasher::default();
            hasher.write_u64(id);
            buckets[(hasher.finish() >> 58) as usize] += 1;
        }
        assert!(buckets.iter().all(|&n| (50..=150).contains(&n)), "{buckets:?}");
    }
}
