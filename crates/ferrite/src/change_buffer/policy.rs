//! The change buffer's policy: how much it may hold (what the pool's flex frames lent to it
//! hold, up to its budget), when it asks the pool for those frames, and which leaf the next
//! drain takes (the sweep, `ChangeBuffer::next_victim`, with each leaf's upper bound read
//! from its parent).

use std::sync::atomic::Ordering;

use super::ChangeBuffer;
use crate::btree::{with_scratch, BTree};
use crate::buffer::BufferPool;
use crate::format::page::PAGE_SIZE;

/// Blind puts of transactions fill at most this fraction of the budget. A transaction's put
/// of a key it did not read, whose leaf is out of memory, waits in the buffer as a
/// `Tree::put`'s does; but such puts are mostly inserts no one reads until their leaf is read
/// anyway (an index entry at a random place), and the frames a large buffer takes are worth more
/// to the pool. TPC-C, 4 warehouses in 40 MiB (the budget a quarter of it, 10 MiB): device
/// reads per transaction 5.04 without buffering them, 4.73–4.79 with the buffer limited to
/// 128 KiB–1 MiB, 4.91 at 2 MiB and 6.22 at the whole 10 MiB (docs/benchmarks.md).
pub const TRANSACTION_SHARE: u64 = 16;

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

    /// Before a transaction's commit buffers blind puts of `cost` bytes in all (see
    /// `Transaction::commit_async`): whether they fit in the share of the budget that such
    /// puts may fill, a `TRANSACTION_SHARE`th. Its frames are lent for that share alone
    /// (unless every flex frame is lent already), so that the pool keeps the rest.
    pub fn room_for_transaction(&self, pool: &BufferPool, cost: u64) -> bool {
        let share = self.budget() / TRANSACTION_SHARE;
        let want = self.bytes() + cost;
        if want > share {
            return false;
        }
        if want > self.allowed(pool) && !self.lent.load(Ordering::Acquire) {
            let frames = share.div_ceil(PAGE_SIZE as u64);
            if self.lent_for_transactions.fetch_max(frames, Ordering::AcqRel) < frames {
                pool.retire_flex_frames(frames);
            }
        }
        true
    }

    /// Whether, after a transaction buffered puts, a drain should follow: the buffer holds
    /// more than it may, or more than three quarters of the transactions' share (without
    /// drains of their own the share would fill and stay full: frames lent for it hold more
    /// than the share, so the buffer is never over its budget).
    pub fn transaction_share_full(&self, pool: &BufferPool) -> bool {
        let share = self.budget() / TRANSACTION_SHARE;
        self.over_budget(pool) || self.bytes() > share / 4 * 3
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
