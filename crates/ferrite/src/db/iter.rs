//! Scans: `Tree::range`'s iterator and `Tree::scan_async`, both driving a `Cursor`
//! (`cursor.rs`) with the scheduler's one driver: a leaf to load is an attempt run by
//! `sched::run_async`, a Value page to load a `sched::load_page`. The iterator steps through
//! a loaded leaf without the driver (nothing to wait for there) and runs the driver, under
//! `block_on`, only when the cursor needs a page.

use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::cursor::{Cursor, Step};
use super::tree::tree_error;
use super::{check_key, Shared, Tree};
use crate::buffer::BufferPool;
use crate::error::{Error, PageId, Result};
use crate::sched::{block_on, load_page, run_async};

/// Loads the page the cursor needs next (a leaf, or a Value page), with the one driver.
/// `failed`: the Value page whose load failed last (a page freed under the scan fails once;
/// twice in a row it is really broken).
async fn load(
    cursor: &mut Cursor,
    pool: &BufferPool,
    step: &Step,
    failed: &mut Option<PageId>,
) -> Result<()> {
    match *step {
        Step::Leaf => run_async(pool, |scratch| cursor.load_attempt(pool, scratch)).await,
        Step::Page(page) => match load_page(pool, page).await {
            Ok(()) => {
                *failed = None;
                Ok(())
            }
            Err(e) if *failed == Some(page) => Err(e),
            Err(_) => {
                *failed = Some(page);
                Ok(())
            }
        },
        Step::Entry(..) | Step::Done => Ok(()),
    }
}

/// An iterator over a range of one tree (see [`Tree::range`]). Each item is a `Result`:
/// reading the next leaf can fail like any read.
#[derive(Debug)]
pub struct Iter {
    shared: Arc<Shared>,
    name: Arc<str>,
    dropped: Arc<AtomicBool>,
    cursor: Cursor,
    btree: crate::btree::BTree,
    root: PageId,
    failed: bool,
}

/// The cursor's next entry, on the calling thread: through a loaded leaf without the driver
/// (nothing to wait for there), with it (under `block_on`) only to load a page. `live` is
/// asked before each step (is the database open, the tree not dropped?).
pub(super) fn next_blocking(
    cursor: &mut Cursor,
    pool: &BufferPool,
    mut live: impl FnMut() -> Result<()>,
) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut failed_load = None;
    loop {
        live()?;
        let step = cursor.next_in_leaf(pool)?;
        match step {
            Step::Entry(key, value) => return Ok(Some((key, value))),
            Step::Done => return Ok(None),
            Step::Leaf | Step::Page(_) => block_on(load(cursor, pool, &step, &mut failed_load))?,
        }
    }
}

impl Iter {
    fn step(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let (shared, dropped) = (&self.shared, &self.dropped);
        next_blocking(&mut self.cursor, &shared.pool, || {
            shared.check_open()?;
            if dropped.load(Ordering::Acquire) {
                return Err(Error::TreeNotFound { name: String::new() });
            }
            Ok(())
        })
    }
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        // An object's stub is followed: its value is read whole (blocking reads).
        let step = self.step().and_then(|entry| match entry {
            Some((key, value)) if super::object::is_stub(&value) => {
                let tree = Tree {
                    shared: Arc::clone(&self.shared),
                    btree: self.btree,
                    name: Arc::clone(&self.name),
                    dropped: Arc::clone(&self.dropped),
                };
                Ok(Some((key, tree.follow_stub(value)?)))
            }
            other => Ok(other),
        });
        match step {
            Ok(entry) => entry.map(Ok),
            Err(e) => {
                self.failed = true;
                let pool = &self.shared.pool;
                Some(Err(tree_error(e, &self.name, &self.dropped, self.root, pool)))
            }
        }
    }
}

impl Tree {
    /// The entries whose keys lie in `range`, in ascending key order.
    pub fn range<'k, R: RangeBounds<&'k [u8]>>(&self, range: R) -> Iter {
        self.scan(range, false)
    }

    /// The entries whose keys lie in `range`, in descending key order.
    pub fn range_rev<'k, R: RangeBounds<&'k [u8]>>(&self, range: R) -> Iter {
        self.scan(range, true)
    }

    /// Every entry, in ascending key order.
    pub fn iter(&self) -> Iter {
        self.scan::<(Bound<&[u8]>, Bound<&[u8]>)>((Bound::Unbounded, Bound::Unbounded), false)
    }

    fn scan<'k, R: RangeBounds<&'k [u8]>>(&self, range: R, reverse: bool) -> Iter {
        let lower = to_owned_bound(range.start_bound().cloned());
        let upper = to_owned_bound(range.end_bound().cloned());
        Iter {
            shared: Arc::clone(&self.shared),
            name: Arc::clone(&self.name),
            dropped: Arc::clone(&self.dropped),
            cursor: Cursor::new(self.btree, lower, upper, reverse)
                .with_change_buffer(Arc::clone(&self.shared.change_buffer)),
            btree: self.btree,
            root: self.btree.root,
            failed: false,
        }
    }

    /// Visits up to `limit` entries with keys `>= start`, in ascending order, as a task: each
    /// leaf, and each Value page of a value stored out of line, is read like a miss of
    /// `get_async` (a queued read on a worker, the task yielding). Returns how many entries
    /// it visited. `visit` gets the key and value as borrowed bytes (no allocation per
    /// entry). An object's value is read whole first, with blocking reads.
    pub async fn scan_async(
        &self,
        start: &[u8],
        limit: usize,
        mut visit: impl FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        self.scan_inner(start, limit, true, |key, value| visit(key, value.unwrap_or_default()))
            .await
    }

    /// [`Tree::scan_async`] that does not read values stored as objects (past
    /// [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN)): `visit` gets `None` for them, and reads
    /// only leaves (and Value pages). For sweeps over keys that look at small values only.
    pub async fn scan_leaves_async(
        &self,
        start: &[u8],
        limit: usize,
        visit: impl FnMut(&[u8], Option<&[u8]>),
    ) -> Result<usize> {
        self.scan_inner(start, limit, false, visit).await
    }

    async fn scan_inner(
        &self,
        start: &[u8],
        limit: usize,
        follow_objects: bool,
        mut visit: impl FnMut(&[u8], Option<&[u8]>),
    ) -> Result<usize> {
        // An empty start scans from the first key.
        if !start.is_empty() {
            check_key(start)?;
        }
        let named = |e: Error| self.error(e);
        let mut cursor =
            Cursor::new(self.btree, Bound::Included(start.to_vec()), Bound::Unbounded, false)
                .with_change_buffer(Arc::clone(&self.shared.change_buffer));
        let pool = &self.shared.pool;
        let mut visited = 0;
        let mut key = Vec::new();
        let mut failed_load = None;
        let stub_failed = std::sync::Mutex::new(None);
        let mut visit = |key: &[u8], value: &[u8]| {
            if !super::object::is_stub(value) {
                return visit(key, Some(value));
            }
            if !follow_objects {
                return visit(key, None);
            }
            match self.follow_stub(value.to_vec()) {
                Ok(whole) => visit(key, Some(&whole)),
                Err(e) => {
                    stub_failed.lock().unwrap().get_or_insert(e);
                }
            }
        };
        while visited < limit {
            self.shared.check_open()?;
            if self.dropped.load(Ordering::Acquire) {
                return Err(Error::TreeNotFound { name: self.name.to_string() });
            }
            if cursor.needs_leaf() {
                load(&mut cursor, pool, &Step::Leaf, &mut failed_load).await.map_err(named)?;
            }
            if cursor.is_done() {
                break;
            }
            let (n, missing) =
                cursor.visit_in_leaf(pool, limit - visited, &mut key, &mut visit).map_err(named)?;
            visited += n;
            if let Some(e) = stub_failed.lock().unwrap().take() {
                return Err(e);
            }
            if let Some(value_page) = missing {
                // Loaded as a queued read, never a blocking one on the worker.
                load(&mut cursor, pool, &Step::Page(value_page), &mut failed_load)
                    .await
                    .map_err(named)?;
            }
        }
        Ok(visited)
    }
}

fn to_owned_bound(bound: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match bound {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}
