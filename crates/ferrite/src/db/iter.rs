//! Scans: `Tree::range`'s iterator and `Tree::scan_async`, both driving a `Cursor`
//! (`cursor.rs`) with the scheduler's one driver: a leaf to load is an attempt run by
//! `sched::run_async`, a Value page to load a `sched::load_page`. The iterator steps through
//! a loaded leaf without the driver (nothing to wait for there) and runs the driver, under
//! `block_on`, only when the cursor needs a page.

use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::cursor::{Cursor, Step};
use super::snapshot::Held;
use super::tree::tree_error;
use super::{check_key, Shared, Tree};
use crate::buffer::BufferPool;
use crate::error::{Error, PageId, Result};
use crate::sched::{block_on, load_page, run_async_with};

/// Loads the page the cursor needs next (a leaf, or a Value page), with the one driver.
/// `failed`: the Value page whose load failed last (a page freed under the scan fails once;
/// twice in a row it is really broken). `in_commit`: the caller holds the commit lock, and
/// does not give its worker's turn away after the load (only a miss makes it wait).
async fn load(
    cursor: &mut Cursor,
    pool: &BufferPool,
    step: &Step,
    failed: &mut Option<PageId>,
    in_commit: bool,
) -> Result<()> {
    // What a scan brings into the pool does not go on to the second cache tier.
    crate::worker_context::scan_loads(async {
        match *step {
            Step::Leaf => {
                run_async_with(pool, !in_commit, |scratch| cursor.load_attempt(pool, scratch)).await
            }
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
    })
    .await
}

/// An iterator over a range of one tree (see [`Tree::range`]). Each item is a `Result`:
/// reading the next leaf can fail like any read. Double-ended: `next_back` walks the same
/// range from its other end (a second cursor, made at its first call), and the two ends
/// never hand out the same entry.
#[derive(Debug)]
pub struct Iter {
    shared: Arc<Shared>,
    name: Arc<str>,
    dropped: Arc<AtomicBool>,
    cursor: Cursor,
    /// The cursor of `next_back`, once asked for.
    back: Option<Cursor>,
    /// The range and the direction of `next`, to make `back` from.
    bounds: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    reverse: bool,
    /// The last keys handed out by `next` and by `next_back`: each end stops at the other's.
    front_last: Option<Vec<u8>>,
    back_last: Option<Vec<u8>>,
    btree: crate::btree::BTree,
    root: PageId,
    /// An error was returned, or the ends met: nothing more.
    failed: bool,
    /// An error to return first (a snapshot's scan of a tree it cannot read).
    pending: Option<Error>,
    /// The snapshot the scan reads, held while it runs (`None`: the tree as it is).
    snapshot: Option<Arc<Held>>,
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
            Step::Leaf | Step::Page(_) => {
                block_on(load(cursor, pool, &step, &mut failed_load, false))?
            }
        }
    }
}

impl Iter {
    /// The next entry of the front cursor, or (`back`) of the back one, made on first use.
    fn step(&mut self, back: bool) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let (shared, dropped) = (&self.shared, &self.dropped);
        let cursor = match back {
            false => &mut self.cursor,
            true => self.back.get_or_insert_with(|| {
                let (lower, upper) = self.bounds.clone();
                let cursor = Cursor::new(self.btree, lower, upper, !self.reverse)
                    .with_change_buffer(Arc::clone(&shared.change_buffer));
                match &self.snapshot {
                    Some(held) => cursor.at(held.seq()),
                    None => cursor,
                }
            }),
        };
        let entry = next_blocking(cursor, &shared.pool, || {
            shared.check_open()?;
            if dropped.load(Ordering::Acquire) {
                return Err(Error::TreeNotFound { name: String::new() });
            }
            Ok(())
        })?;
        if let Some(held) = &self.snapshot {
            held.check()?;
        }
        Ok(entry)
    }

    /// Makes the iterator return `e` first, then nothing.
    pub(super) fn fail_with(&mut self, e: Error) {
        self.pending = Some(e);
    }

    /// The next entry from the front (`back` false) or the back, unless it is one the other
    /// end handed out already (then the ends have met, and the iterator is done).
    fn produce(&mut self, back: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if self.failed {
            return None;
        }
        if let Some(e) = self.pending.take() {
            self.failed = true;
            return Some(Err(e));
        }
        // An object's stub is followed: its value is read whole (blocking reads).
        let step = self.step(back).and_then(|entry| match entry {
            Some((key, value))
                if super::object::is_stub(&value)
                    && self.snapshot.as_ref().is_some_and(|held| !held.implicit()) =>
            {
                let held = self.snapshot.as_ref().expect("checked");
                Ok(Some((key, held.follow_stub(&value)?)))
            }
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
            Ok(Some((key, value))) => {
                // The front walks in the direction of `next` (ascending unless `reverse`).
                let ascending = back == self.reverse;
                let (mine, theirs) = match back {
                    false => (&mut self.front_last, &self.back_last),
                    true => (&mut self.back_last, &self.front_last),
                };
                let met = theirs.as_ref().is_some_and(|other| match ascending {
                    true => key >= *other,
                    false => key <= *other,
                });
                if met {
                    self.failed = true;
                    return None;
                }
                // Kept for the other end (its buffer reused: no allocation per entry).
                match mine {
                    Some(last) => {
                        last.clear();
                        last.extend_from_slice(&key);
                    }
                    None => *mine = Some(key.clone()),
                }
                Some(Ok((key, value)))
            }
            Ok(None) => {
                self.failed = true;
                None
            }
            Err(e) => {
                self.failed = true;
                let pool = &self.shared.pool;
                Some(Err(tree_error(e, &self.name, &self.dropped, self.root, pool)))
            }
        }
    }
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.produce(false)
    }
}

impl DoubleEndedIterator for Iter {
    /// The entry at the range's other end: the largest key not handed out yet (the smallest
    /// for a [`Tree::range_rev`] iterator).
    fn next_back(&mut self) -> Option<Self::Item> {
        self.produce(true)
    }
}

impl Tree {
    /// The entries whose keys lie in `range`, in ascending key order. The bounds are any
    /// byte strings (`&[u8]`, `Vec<u8>`, `&str`, `String`, …). A range whose key type the
    /// compiler cannot tell names it: `..`, and ranges of references such as `&vec..` or
    /// `(Bound<&[u8]>, Bound<&[u8]>)`, as in `tree.range::<&[u8], _>(..)` ([`Tree::iter`]
    /// and [`Tree::iter_rev`] are every entry).
    ///
    /// The iterator reads the tree as it was when it was made (a snapshot of its own, held
    /// until it is dropped), so every batch and transaction is in it whole or not at all,
    /// however many leaves it crosses; values stored as objects are read as they are now.
    /// Commits keep copies of the pages they change while it lives: an iterator left open
    /// while writers change more than `Options::snapshot_bytes` of pages ends with
    /// [`Error::SnapshotTooOld`]. (Stepped inside a task, it reads each leaf as it is when
    /// reached: use [`Tree::scan_async`] there.)
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let options = ferrite::Options { workers: 0, pool_bytes: 16 << 20, ..Default::default() };
    /// # let db = ferrite::Db::open(dir.path(), options)?;
    /// let words = db.tree("words")?;
    /// for word in ["apple", "kiwi", "mango", "pear"] {
    ///     words.put(word, word.len().to_string())?;
    /// }
    /// let keys = |iter: ferrite::Iter| -> ferrite::Result<Vec<Vec<u8>>> {
    ///     iter.map(|entry| entry.map(|(key, _)| key)).collect()
    /// };
    /// assert_eq!(keys(words.range("b".."m"))?, [b"kiwi".to_vec()]);
    /// assert_eq!(keys(words.range("kiwi"..="mango"))?, [b"kiwi".to_vec(), b"mango".to_vec()]);
    /// assert_eq!(keys(words.range(b"n".to_vec()..))?, [b"pear".to_vec()]);
    /// assert_eq!(keys(words.range_rev::<&[u8], _>(..))?.len(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn range<K, R>(&self, range: R) -> Iter
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        self.scan(owned_bound(range.start_bound()), owned_bound(range.end_bound()), false)
    }

    /// The entries whose keys lie in `range`, in descending key order (see [`Tree::range`]).
    pub fn range_rev<K, R>(&self, range: R) -> Iter
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        self.scan(owned_bound(range.start_bound()), owned_bound(range.end_bound()), true)
    }

    /// Every entry, in ascending key order.
    pub fn iter(&self) -> Iter {
        self.scan(Bound::Unbounded, Bound::Unbounded, false)
    }

    /// Every entry, in descending key order.
    pub fn iter_rev(&self) -> Iter {
        self.scan(Bound::Unbounded, Bound::Unbounded, true)
    }

    /// The entries whose keys start with `prefix`, in ascending key order (an empty prefix:
    /// every entry).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let options = ferrite::Options { workers: 0, pool_bytes: 16 << 20, ..Default::default() };
    /// # let db = ferrite::Db::open(dir.path(), options)?;
    /// let users = db.tree("users")?;
    /// users.put("user:1:name", "Ada")?;
    /// users.put("user:1:mail", "ada@example.org")?;
    /// users.put("user:2:name", "Grace")?;
    /// let ada: Vec<_> = users.prefix("user:1:").collect::<ferrite::Result<_>>()?;
    /// assert_eq!(ada.len(), 2);
    /// assert_eq!(ada[0], (b"user:1:mail".to_vec(), b"ada@example.org".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let (lower, upper) = prefix_bounds(prefix.as_ref());
        self.scan(lower, upper, false)
    }

    /// The entries whose keys start with `prefix`, in descending key order.
    pub fn prefix_rev(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let (lower, upper) = prefix_bounds(prefix.as_ref());
        self.scan(lower, upper, true)
    }

    /// The entry with the smallest key, if the tree has any.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let options = ferrite::Options { workers: 0, pool_bytes: 16 << 20, ..Default::default() };
    /// # let db = ferrite::Db::open(dir.path(), options)?;
    /// let queue = db.tree("queue")?;
    /// assert_eq!(queue.first()?, None);
    /// queue.put(7u64.to_be_bytes(), "seven")?;
    /// queue.put(3u64.to_be_bytes(), "three")?;
    /// assert_eq!(queue.first()?, Some((3u64.to_be_bytes().to_vec(), b"three".to_vec())));
    /// assert_eq!(queue.last()?, Some((7u64.to_be_bytes().to_vec(), b"seven".to_vec())));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn first(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter().next().transpose()
    }

    /// The entry with the largest key, if the tree has any.
    pub fn last(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter_rev().next().transpose()
    }

    /// An iterator over the keys between `lower` and `upper`: what every scan above builds.
    fn scan(&self, lower: Bound<Vec<u8>>, upper: Bound<Vec<u8>>, reverse: bool) -> Iter {
        let snapshot = Held::for_scan(&self.shared, true);
        self.scan_at(lower, upper, reverse, snapshot)
    }

    /// [`Tree::scan`] through `snapshot`, if any (else each leaf as it is when reached).
    pub(super) fn scan_at(
        &self,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        reverse: bool,
        snapshot: Option<Arc<Held>>,
    ) -> Iter {
        let cursor = Cursor::new(self.btree, lower.clone(), upper.clone(), reverse)
            .with_change_buffer(Arc::clone(&self.shared.change_buffer));
        let cursor = match &snapshot {
            Some(held) => cursor.at(held.seq()),
            None => cursor,
        };
        Iter {
            shared: Arc::clone(&self.shared),
            name: Arc::clone(&self.name),
            dropped: Arc::clone(&self.dropped),
            cursor,
            back: None,
            bounds: (lower, upper),
            reverse,
            front_last: None,
            back_last: None,
            btree: self.btree,
            root: self.btree.root,
            failed: false,
            pending: None,
            snapshot,
        }
    }

    /// Visits up to `limit` entries with keys `>= start`, in ascending order, as a task: each
    /// leaf, and each Value page of a value stored out of line, is read like a miss of
    /// `get_async` (a queued read on a worker, the task yielding). Returns how many entries
    /// it visited. `visit` gets the key and value as borrowed bytes (no allocation per
    /// entry). An object's value is read whole first, with blocking reads. The scan reads
    /// the tree as it was when it began (a snapshot of its own, as [`Tree::range`]).
    pub async fn scan_async(
        &self,
        start: impl AsRef<[u8]>,
        limit: usize,
        mut visit: impl FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        crate::db::in_task("Tree::scan_async")?;
        let visit = |key: &[u8], value: Option<&[u8]>| visit(key, value.unwrap_or_default());
        self.scan_inner(start.as_ref(), limit, true, visit).await
    }

    /// [`Tree::scan_async`] that does not read values stored as objects (past
    /// [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN)): `visit` gets `None` for them, and reads
    /// only leaves (and Value pages). For sweeps over keys that look at small values only.
    pub async fn scan_leaves_async(
        &self,
        start: impl AsRef<[u8]>,
        limit: usize,
        visit: impl FnMut(&[u8], Option<&[u8]>),
    ) -> Result<usize> {
        crate::db::in_task("Tree::scan_leaves_async")?;
        self.scan_inner(start.as_ref(), limit, false, visit).await
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
        // One moment for the whole scan, however many leaves it crosses.
        let snapshot = Held::for_scan(&self.shared, false);
        if let Some(held) = &snapshot {
            cursor = cursor.at(held.seq());
        }
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
                load(&mut cursor, pool, &Step::Leaf, &mut failed_load, false)
                    .await
                    .map_err(named)?;
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
                load(&mut cursor, pool, &Step::Page(value_page), &mut failed_load, false)
                    .await
                    .map_err(named)?;
            }
        }
        if let Some(held) = &snapshot {
            held.check()?;
        }
        Ok(visited)
    }
}

impl Tree {
    /// Up to `limit` entries with keys between `lower` and `upper`, ascending (descending
    /// with `reverse`), values whole (an object's read through its stub): the range reads of
    /// transactions. Misses are read as a task reads them (queued on a worker, blocking
    /// elsewhere).
    ///
    /// Each leaf is read as it is when reached, never through a snapshot: a leaf a commit
    /// in progress changed is waited for (or, for that commit's own validation, read with
    /// its changes), so every entry is committed, but two leaves may show different
    /// moments. A transaction needs no more: its commit reads the range again under the
    /// commit lock and fails if anything in it differs. (A snapshot cost every commit a copy
    /// of each page it changed while any scan was under way: on TPC-C, with Delivery's and
    /// Stock-Level's scans, nearly always.)
    ///
    /// `in_commit`: the caller holds the commit lock (a transaction's validation), and does
    /// not give its worker's turn away after each leaf: every other commit would wait
    /// meanwhile. (Until 2026-11-29 it did: measured in memory, TPC-C, a quarter of the
    /// waits for the commit lock were for a holder that had yielded on its own worker.)
    pub(super) async fn collect_range(
        &self,
        lower: &Bound<Vec<u8>>,
        upper: &Bound<Vec<u8>>,
        reverse: bool,
        limit: usize,
        in_commit: bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let collected = self.collect_range_witnessed(lower, upper, reverse, limit, in_commit);
        Ok(collected.await?.0)
    }

    /// [`Tree::collect_range`], with the leaf (page, version) that answered the whole scan
    /// when one did ([`Cursor::witness`]; never for an object's value): while it keeps that
    /// version and the change buffer stays empty ([`Tree::range_unchanged_since`]), the part
    /// of the range up to the last entry returned (to the range's end, if fewer than `limit`
    /// came back) holds the same entries.
    pub(super) async fn collect_range_witnessed(
        &self,
        lower: &Bound<Vec<u8>>,
        upper: &Bound<Vec<u8>>,
        reverse: bool,
        limit: usize,
        in_commit: bool,
    ) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, Option<(PageId, u64)>)> {
        let named = |e: Error| self.error(e);
        let mut cursor = Cursor::new(self.btree, lower.clone(), upper.clone(), reverse)
            .with_change_buffer(Arc::clone(&self.shared.change_buffer));
        let pool = &self.shared.pool;
        let mut failed_load = None;
        let mut entries = Vec::new();
        let mut stubs = false;
        while entries.len() < limit {
            self.shared.check_open()?;
            if self.dropped.load(Ordering::Acquire) {
                return Err(Error::TreeNotFound { name: self.name.to_string() });
            }
            match cursor.next_in_leaf(pool).map_err(named)? {
                Step::Entry(key, value) if super::object::is_stub(&value) => {
                    stubs = true;
                    entries.push((key, self.follow_stub(value)?));
                }
                Step::Entry(key, value) => entries.push((key, value)),
                Step::Done => break,
                step => load(&mut cursor, pool, &step, &mut failed_load, in_commit)
                    .await
                    .map_err(named)?,
            }
        }
        let witness = cursor.witness().filter(|_| !stubs);
        Ok((entries, witness))
    }
}

/// A bound of any key type as owned bytes (the cursor keeps its bounds).
pub(super) fn owned_bound<K: AsRef<[u8]> + ?Sized>(bound: Bound<&K>) -> Bound<Vec<u8>> {
    bound.map(|key| key.as_ref().to_vec())
}

/// The bounds of the keys that start with `prefix`: from `prefix` itself up to, excluded,
/// the first key past every key it starts: `prefix` with its last byte that is not 0xff
/// incremented and the bytes after it dropped. A prefix of 0xff bytes only (or an empty
/// one) has no key past it: unbounded above.
pub(super) fn prefix_bounds(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let lower = match prefix.is_empty() {
        true => Bound::Unbounded,
        false => Bound::Included(prefix.to_vec()),
    };
    let upper = match prefix.iter().rposition(|&byte| byte != 0xff) {
        Some(last) => {
            let mut past = prefix[..=last].to_vec();
            past[last] += 1;
            Bound::Excluded(past)
        }
        None => Bound::Unbounded,
    };
    (lower, upper)
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use crate::{Db, Options};

    /// How many times a future was polled before it finished: 1 if it never yielded.
    struct Polls<F> {
        future: Pin<Box<F>>,
        polls: u32,
    }

    impl<F: Future> Future for Polls<F> {
        type Output = (F::Output, u32);

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            self.polls += 1;
            let polls = self.polls;
            self.future.as_mut().poll(cx).map(|out| (out, polls))
        }
    }

    /// A range read for a commit's validation (`in_commit`) never gives its worker's turn
    /// away over leaves in memory: the commit lock is held then, and every other commit
    /// would wait for this worker's other tasks. A transaction's own scan does, once its
    /// turn is spent (both read the same 60-odd leaves, more than a turn's operations).
    #[test]
    fn a_range_read_in_a_commit_keeps_the_worker_and_a_scan_shares_it() {
        let dir = tempfile::TempDir::with_prefix("collect-range-turn").unwrap();
        let options = Options { workers: 1, pool_bytes: 32 << 20, ..Options::default() };
        let db = Db::open(dir.path(), options).unwrap();
        let tree = db.tree("t").unwrap();
        for i in 0..4000u32 {
            tree.put(i.to_be_bytes(), [7u8; 60]).unwrap();
        }
        let polls = db
            .spawn(async move {
                let (lower, upper) = (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
                let mut polls = [0; 2];
                for (at, in_commit) in [(0, true), (1, false)] {
                    let read = tree.collect_range(&lower, &upper, false, usize::MAX, in_commit);
                    let (entries, n) = Polls { future: Box::pin(read), polls: 0 }.await;
                    assert_eq!(entries.unwrap().len(), 4000);
                    polls[at] = n;
                }
                polls
            })
            .unwrap()
            .wait();
        assert_eq!(polls[0], 1, "the commit's range read yielded");
        assert!(polls[1] > 1, "the scan never shared its turn: the test proves nothing");
    }

    /// A scan answered by one leaf names it and its version ([`Tree::collect_range_witnessed`]),
    /// the leaf that holds the range's keys; a scan over two leaves or more, or one that
    /// read a value off its leaf, names none. The leaf vouches for the range until it
    /// changes ([`Tree::range_unchanged_since`]).
    #[test]
    fn a_scan_answered_by_one_leaf_names_it_and_no_other_scan_does() {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let dir = tempfile::TempDir::with_prefix("collect-range-witness").unwrap();
        let options = Options { workers: 1, pool_bytes: 32 << 20, ..Options::default() };
        let db = Db::open(dir.path(), options).unwrap();
        let tree = db.tree("t").unwrap();
        let key = |i: u32| (i * 2).to_be_bytes().to_vec();
        for i in 0..4000u32 {
            tree.put(key(i), [7u8; 60]).unwrap();
        }
        db.spawn(async move {
            let leaf_of = async |k: &[u8]| tree.get_witnessed(k).await.unwrap().1.unwrap();
            // A few keys within one leaf, up to a bound excluded.
            let (lower, upper) = (Included(key(100)), Excluded(key(103)));
            let (entries, witness) = tree
                .collect_range_witnessed(&lower, &upper, false, usize::MAX, false)
                .await
                .unwrap();
            assert_eq!(entries.len(), 3);
            let leaf = witness.expect("one leaf answered");
            assert_eq!(leaf, leaf_of(&key(100)).await);
            assert_eq!(leaf, leaf_of(&key(103)).await, "the range's end lies in the leaf");
            assert!(tree.range_unchanged_since(leaf));
            // Reverse, and cut short by a limit.
            let read = tree.collect_range_witnessed(&lower, &upper, true, 2, false);
            assert_eq!(read.await.unwrap().1, Some(leaf));
            // Where two leaves meet: the scan reads both, and names neither.
            let mut boundary = None;
            for i in 0..3999u32 {
                if leaf_of(&key(i)).await.0 != leaf_of(&key(i + 1)).await.0 {
                    boundary = Some(i);
                    break;
                }
            }
            let i = boundary.expect("4000 rows fill more than one leaf");
            let (lower, upper) = (Included(key(i)), Included(key(i + 1)));
            let (entries, witness) = tree
                .collect_range_witnessed(&lower, &upper, false, usize::MAX, false)
                .await
                .unwrap();
            assert_eq!((entries.len(), witness), (2, None));
            let whole = tree.collect_range_witnessed(&Unbounded, &Unbounded, false, 10_000, false);
            assert_eq!(whole.await.unwrap().1, None);
            // A value on a Value page of its own: its leaf does not vouch for it.
            tree.put_async(key(101), vec![9u8; 3000]).await.unwrap();
            assert!(!tree.range_unchanged_since(leaf), "a put into the leaf changes it");
            let (lower, upper) = (Included(key(100)), Excluded(key(103)));
            let (entries, witness) = tree
                .collect_range_witnessed(&lower, &upper, false, usize::MAX, false)
                .await
                .unwrap();
            assert_eq!((entries[1].1.len(), witness), (3000, None));
        })
        .unwrap()
        .wait();
    }
}
