//! The change buffer's policy: how much it may hold (what the pool's flex frames lent to it
//! hold, up to its budget), when it asks the pool for those frames, and which leaf the next
//! drain takes (the sweep, `ChangeBuffer::next_victim`, with each leaf's upper bound read
//! from its parent).

use std::sync::atomic::Ordering;

use super::ChangeBuffer;
use crate::btree::{with_scratch, BTree};
use crate::buffer::BufferPool;
use crate::format::page::PAGE_SIZE;

impl ChangeBuffer {
    /// The bytes the buffer may hold now: what the flex frames lent to it hold, at most its
    /// budget. Its memory comes out of the pool's frames only as it fills.
    pub fn allowed(&self, pool: &BufferPool) -> u64 {
        (pool.retired_frames() * PAGE_SIZE as u64).min(self.budget())
    }

    /// Whether the buffer holds more than it may: time to drain.
    pub fn over_budget(&self, pool: &BufferPool) -> bool {
        self.bytes() > self.allowed(pool)
    }

    /// Before the buffer takes a put of `cost` bytes: if it does not fit in the frames lent
    /// to it, the flex frames are asked for (they retire as eviction frees them; a drain
    /// keeps the buffer within what they hold meanwhile). A flex frame whose page eviction
    /// never frees is not lent.
    pub fn make_room(&self, pool: &BufferPool, cost: u64) {
        // Asked once per open: after that, every put gets here for a load and nothing more.
        if !self.lent.load(Ordering::Acquire) && self.bytes() + cost > self.allowed(pool) {
            self.lend_frames(pool);
        }
    }

    /// Asks the pool for every flex frame for the buffer (once: they stay lent until the
    /// database is closed).
    pub fn lend_frames(&self, pool: &BufferPool) {
        if !self.lent.load(Ordering::Acquire) && !self.lent.swap(true, Ordering::AcqRel) {
            pool.retire_flex_frames(pool.flex_frames());
        }
    }

    /// The next drain's victim (a tree and a buffered key of it), the sweep moved past its
    /// leaf, whose upper bound the leaf's parent gives (in memory, as inner nodes are;
    /// without it, the sweep moves past the victim alone).
    pub fn next_drain(&self, pool: &BufferPool) -> Option<(BTree, Vec<u8>)> {
        self.next_victim(|btree, key| {
            with_scratch(|scratch| {
                let page = &mut scratch.pages[0];
                // A few tries past restarts; a miss (a parent not in memory) gives up.
                (0..4).find_map(|_| btree.leaf_upper_bound(pool, key, page).ok())
            })
        })
    }
}
