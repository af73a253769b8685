//! Running an attempt to its end on the calling thread (the scheduler's one driver under
//! `block_on`), reading a consistent copy of a page, scanning a tree: what the engine's own
//! unit tests share.

use crate::btree::Scratch;
use crate::buffer::{Attempt, BufferPool};
use crate::error::{PageId, Result};
use crate::io::AlignedPage;

/// Runs `attempt` until it finishes, loading missing pages with blocking reads.
pub fn run<T>(pool: &BufferPool, attempt: impl FnMut(&mut Scratch) -> Attempt<T>) -> Result<T> {
    crate::sched::block_on(crate::sched::run_async(pool, attempt))
}

/// A consistent copy of page `page_id`, loading it if need be (which verifies it).
pub fn read_page(pool: &BufferPool, page_id: PageId) -> Result<AlignedPage> {
    let mut copy = AlignedPage::zeroed();
    run(pool, |_| pool.read_copy(page_id, &mut copy))?;
    Ok(copy)
}

/// Every key of `tree`, in order (`reverse`: descending), or the first error.
pub fn scan(pool: &BufferPool, tree: crate::btree::BTree, reverse: bool) -> Result<Vec<Vec<u8>>> {
    use crate::db::cursor::{Cursor, Step};
    use std::ops::Bound::Unbounded;
    let mut cursor = Cursor::new(tree, Unbounded, Unbounded, reverse);
    let mut keys = Vec::new();
    loop {
        match cursor.next_in_leaf(pool)? {
            Step::Entry(key, _) => keys.push(key),
            Step::Done => return Ok(keys),
            Step::Leaf => run(pool, |scratch| cursor.load_attempt(pool, scratch))?,
            Step::Page(page) => pool.load(page)?,
        }
    }
}
