//! The set of page ids in memory, for the clock to sweep: an open-addressing hash table
//! with linear probing, lock-free inserts and removals, sized at start-up to twice the pool.
//! It is touched on loads and evictions only, never on a hit.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::PageId;

const EMPTY: u64 = u64::MAX;
const TOMBSTONE: u64 = u64::MAX - 1;

#[derive(Debug)]
pub struct ResidentSet {
    slots: Box<[AtomicU64]>,
    mask: u64,
    clock_hand: AtomicU64,
}

fn hash(page_id: PageId) -> u64 {
    // Fibonacci hashing spreads sequential ids.
    page_id.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_right(29)
}

impl ResidentSet {
    /// A set that can hold at least `max_entries` ids.
    pub fn new(max_entries: u64) -> Self {
        let capacity = (max_entries * 2).next_power_of_two().max(64);
        let slots = (0..capacity).map(|_| AtomicU64::new(EMPTY)).collect();
        ResidentSet { slots, mask: capacity - 1, clock_hand: AtomicU64::new(0) }
    }

    pub fn capacity(&self) -> u64 {
        self.mask + 1
    }

    /// Adds an id that is not in the set (the caller holds the page's exclusive latch).
    pub fn insert(&self, page_id: PageId) {
        debug_assert!(page_id < TOMBSTONE);
        let mut at = hash(page_id) & self.mask;
        loop {
            let slot = &self.slots[at as usize];
            let current = slot.load(Ordering::Relaxed);
            if (current == EMPTY || current == TOMBSTONE)
                && slot
                    .compare_exchange(current, page_id, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
            assert_ne!(current, page_id, "page {page_id} inserted twice into the resident set");
            if current != EMPTY && current != TOMBSTONE {
                at = (at + 1) & self.mask;
            }
        }
    }

    /// Removes an id that is in the set (the caller holds the page's exclusive latch).
    pub fn remove(&self, page_id: PageId) {
        let mut at = hash(page_id) & self.mask;
        for _ in 0..=self.mask {
            let slot = &self.slots[at as usize];
            let current = slot.load(Ordering::Relaxed);
            if current == page_id {
                slot.store(TOMBSTONE, Ordering::Release);
                return;
            }
            assert_ne!(current, EMPTY, "page {page_id} missing from the resident set");
            at = (at + 1) & self.mask;
        }
        panic!("page {page_id} missing from the resident set");
    }

    /// Calls `visit` with the ids in the next `count` slots of the clock.
    pub fn sweep(&self, count: u64, mut visit: impl FnMut(PageId)) {
        let start = self.clock_hand.fetch_add(count, Ordering::Relaxed);
        for i in 0..count {
            let current = self.slots[((start + i) & self.mask) as usize].load(Ordering::Acquire);
            if current != EMPTY && current != TOMBSTONE {
                visit(current);
            }
        }
    }

    /// Calls `visit` with the ids in slots `start..start + count` (modulo the capacity): a
    /// clock hand kept by the caller, for eviction partitioned among workers.
    pub fn sweep_slots(&self, start: u64, count: u64, mut visit: impl FnMut(PageId)) {
        for i in 0..count {
            let current = self.slots[((start + i) & self.mask) as usize].load(Ordering::Acquire);
            if current != EMPTY && current != TOMBSTONE {
                visit(current);
            }
        }
    }

    /// Every id in the set (for tests and invariant checks; not consistent under concurrency).
    pub fn ids(&self) -> Vec<PageId> {
        let mut ids = Vec::new();
        for slot in self.slots.iter() {
            let current = slot.load(Ordering::Acquire);
            if current != EMPTY && current != TOMBSTONE {
                ids.push(current);
            }
        }
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_sweep() {
        let set = ResidentSet::new(100);
        for id in 0..100 {
            set.insert(id);
        }
        for id in (0..100).step_by(2) {
            set.remove(id);
        }
        for id in 1000..1050 {
            set.insert(id);
        }
        let mut seen = Vec::new();
        set.sweep(set.capacity(), |id| seen.push(id));
        seen.sort();
        let mut expected: Vec<u64> = (1..100).step_by(2).chain(1000..1050).collect();
        expected.sort();
        assert_eq!(seen, expected);
        assert_eq!(set.ids().len(), 100);
    }
}
