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
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.write_u64(u64::from_le_bytes(word.try_into().expect("eight bytes")));
        }
        // The last bytes, zero-padded, without the copy through memory (and call to memcpy)
        // a partial chunk took: hashing a transaction's 20-byte keys spent most time there.
        let tail = words.remainder();
        if !tail.is_empty() {
            let word = tail.iter().rev().fold(0u64, |word, &byte| word << 8 | u64::from(byte));
            self.write_u64(word);
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

    /// Bytes hash as their 8-byte little-endian words, the last one zero-padded.
    #[test]
    fn bytes_hash_as_zero_padded_words() {
        let bytes: Vec<u8> = (1..=21).collect();
        let mut by_bytes = IdHasher::default();
        by_bytes.write(&bytes);
        let mut by_words = IdHasher::default();
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            by_words.write_u64(u64::from_le_bytes(word));
        }
        assert_eq!(by_bytes.finish(), by_words.finish());
        let mut empty = IdHasher::default();
        empty.write(&[]);
        assert_eq!(empty.finish(), 0);
    }

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
