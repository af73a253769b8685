//! Snapshots (`Db::snapshot`): reads of every tree as the database was at one moment, while
//! commits go on. A snapshot is a commit number, taken without a lock (`buffer/versions.rs`
//! says how); the pool keeps the old versions of the pages later commits change, and the
//! change buffer its old entries, for as long as a snapshot may read them. Plain scans read
//! through one of their own (`Tree::range` and the others, `Tree::scan_async`).

use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::iter::{owned_bound, prefix_bounds};
use super::object::FragmentLogAt;
use super::{check_key, Db, Iter, Shared, Tree};
use crate::buffer::SnapshotState;
use crate::error::{Error, Result};
use crate::sched::{block_on, run_async};

/// A consistent view of every tree of a database as of the moment it was taken: reads
/// through it see every commit made before and nothing of any made since, whole batches
/// and transactions included, however many keys and trees they span. Writers are not held
/// back: a commit that changes a page a snapshot may still read first keeps a copy of it,
/// until the snapshot is dropped.
///
/// Copies are bounded by `Options::snapshot_bytes`: a commit that would keep more ends the
/// oldest snapshots first, whose reads then fail with [`Error::SnapshotTooOld`]. Values
/// stored as objects (longer than [`crate::MAX_VALUE_LEN`], or written with `write_at`) are
/// read as they were too: while a snapshot lives, the data pages of objects rewritten,
/// truncated or deleted after it are not reused (the database grows by what they hold).
/// Inside a task, reading an object through a snapshot is refused ([`Error::NotSupported`]).
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # let options = ferrite::Options { workers: 0, pool_bytes: 16 << 20, ..Default::default() };
/// # let db = ferrite::Db::open(dir.path(), options)?;
/// let accounts = db.tree("accounts")?;
/// accounts.put("alice", 100u64.to_be_bytes())?;
/// accounts.put("bob", 0u64.to_be_bytes())?;
/// let before = db.snapshot()?;
/// // A transfer: both keys change in one batch.
/// let mut batch = ferrite::WriteBatch::new();
/// batch.put(&accounts, "alice", 60u64.to_be_bytes());
/// batch.put(&accounts, "bob", 40u64.to_be_bytes());
/// db.write(&batch)?;
/// // The snapshot still sees both balances from before the transfer.
/// let balance = |v: Option<Vec<u8>>| u64::from_be_bytes(v.unwrap().try_into().unwrap());
/// assert_eq!(balance(before.get(&accounts, "alice")?), 100);
/// let total: u64 = before.iter(&accounts).map(|e| e.map(|(_, v)| balance(Some(v)))).sum::<ferrite::Result<u64>>()?;
/// assert_eq!(total, 100);
/// assert_eq!(balance(accounts.get("bob")?), 40);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Snapshot {
    held: Arc<Held>,
}

/// A snapshot's hold on its old versions, released when the last handle (the snapshot, or
/// an iterator made from it) is dropped.
#[derive(Debug)]
pub(super) struct Held {
    shared: Arc<Shared>,
    state: Arc<SnapshotState>,
    /// Taken by a plain scan for itself: objects are read as they are now.
    implicit: bool,
    /// The epoch of freed object data pinned (not for a plain scan's): no data page freed
    /// after the snapshot is written again while it lives (`object/at.rs`).
    epoch: Option<u64>,
    /// The fragment log as of the snapshot, read on its first object read.
    fragment_log: Mutex<Option<Arc<FragmentLogAt>>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(epoch) = self.epoch {
            self.shared.object_space.unpin_epoch(epoch);
        }
        self.shared.pool.release_snapshot(&self.state);
        if self.shared.change_buffer.has_old() {
            self.shared.change_buffer.collect_old(self.shared.pool.oldest_snapshot());
        }
    }
}

impl Held {
    /// The commit number the snapshot sees up to.
    pub(super) fn seq(&self) -> u64 {
        self.state.seq
    }

    /// `Ok` unless the snapshot was ended early, in which case what was read through it may
    /// be wrong: asked after every read.
    pub(super) fn check(&self) -> Result<()> {
        match self.state.expired() {
            false => Ok(()),
            true => Err(Error::SnapshotTooOld {
                seq: self.state.seq,
                limit_bytes: self.shared.pool.snapshot_limit(),
            }),
        }
    }

    /// The database the snapshot is of.
    pub(super) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The fragment log of `objects` as of the snapshot, read once.
    pub(super) fn fragment_log(self: &Arc<Self>, objects: &Tree) -> Result<Arc<FragmentLogAt>> {
        let mut slot = self.fragment_log.lock().unwrap();
        if let Some(log) = &*slot {
            return Ok(Arc::clone(log));
        }
        let log = Arc::new(FragmentLogAt::read(self, objects)?);
        *slot = Some(Arc::clone(&log));
        Ok(log)
    }

    /// `key`'s value in `tree` as stored at the snapshot (an object's stub is not followed).
    pub(super) async fn get_raw(&self, tree: &Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (shared, seq) = (&self.shared, self.seq());
        // A snapshot that ends with a commit running reads once it ended.
        let pool = &*shared.pool;
        run_async(pool, |_| match pool.snapshot_ready(seq) {
            true => Ok(()),
            false => Err(crate::buffer::Interrupt::Restart),
        })
        .await?;
        let value = match shared.change_buffer.get_at(tree.btree.tree_id, key, seq) {
            Some(value) => Some(value),
            None => {
                let (btree, pool) = (tree.btree, &*shared.pool);
                let dropped = &tree.dropped;
                run_async(pool, |scratch| {
                    if dropped.load(Ordering::Acquire) {
                        let gone = Error::TreeNotFound { name: String::new() };
                        return Err(crate::buffer::Interrupt::Error(gone));
                    }
                    btree.get_at(pool, key, seq, scratch, &mut |value: &[u8]| value.to_vec())
                })
                .await
                .map_err(|e| tree.error(e))?
            }
        };
        self.check()?;
        Ok(value)
    }

    /// The value an object's stub met through the snapshot names, as of the snapshot.
    pub(super) fn follow_stub(self: &Arc<Self>, stub: &[u8]) -> Result<Vec<u8>> {
        if crate::sched::on_worker() {
            return Err(Error::NotSupported {
                reason: "reading a value stored as an object through a snapshot inside a task \
                         (its reads block); read it through Snapshot::get from a thread"
                    .into(),
            });
        }
        super::object::read_object_at(self, stub)
    }
}

impl Held {
    /// A snapshot of `shared` as of now; `implicit`: a plain scan's own.
    pub(super) fn take(shared: &Arc<Shared>, implicit: bool) -> Held {
        // Pinned before the moment is taken: every run a later commit frees is then freed
        // after the pin.
        let epoch = (!implicit).then(|| shared.object_space.pin_epoch());
        Held {
            shared: Arc::clone(shared),
            state: shared.pool.take_snapshot(),
            implicit,
            epoch,
            fragment_log: Mutex::new(None),
        }
    }

    /// Whether a plain scan took it for itself (then it follows objects as they are now).
    pub(super) fn implicit(&self) -> bool {
        self.implicit
    }

    /// The snapshot a plain scan reads through, unless its reads must not wait for the
    /// commit in progress (a snapshot's first read may): the commit's own scans, those of a
    /// reader holding a lock the commit may wait for, and blocking scans inside a task,
    /// whose wait could need their own worker's loop. Those read each leaf as it is when
    /// reached.
    pub(super) fn for_scan(shared: &Arc<Shared>, blocking: bool) -> Option<Arc<Held>> {
        if crate::buffer::reads_must_not_wait() || (blocking && crate::sched::on_worker()) {
            return None;
        }
        // Scans that start with no commit begun or ended in between see the same moment:
        // they share one snapshot (taking and ending one costs locks).
        let mut last = shared.scan_snapshot.lock().unwrap();
        let word = shared.pool.commit_word();
        if last.0 == word {
            // (Not one ended early: its reads fail.)
            if let Some(held) = last.1.upgrade().filter(|held| !held.state.expired()) {
                return Some(held);
            }
        }
        let held = Arc::new(Held::take(shared, true));
        *last = (held.state.word, Arc::downgrade(&held));
        Some(held)
    }
}

impl Db {
    /// A snapshot of every tree as of now (see [`Snapshot`]): it never waits. If a commit
    /// is being applied, the snapshot includes it, and its first read waits until it ended.
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.shared.check_open()?;
        Ok(Snapshot { held: Arc::new(Held::take(&self.shared, false)) })
    }

    /// [`Db::snapshot`], for symmetry with the other calls of tasks (it never waits).
    pub async fn snapshot_async(&self) -> Result<Snapshot> {
        crate::db::in_task("Db::snapshot_async")?;
        self.snapshot()
    }
}

impl Snapshot {
    /// The number of commits the snapshot sees (commits are numbered from 1 since the
    /// database was opened; only those that changed something count).
    pub fn seq(&self) -> u64 {
        self.held.seq()
    }

    /// The value of `key` in `tree` as of the snapshot. Inside a task use
    /// [`Snapshot::get_async`]: this call is refused there ([`Error::NotSupported`]), since
    /// it may wait for a commit that only its own worker can finish.
    pub fn get(&self, tree: &Tree, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        if crate::sched::on_worker() {
            return Err(blocking_in_task());
        }
        block_on(self.get_bytes(tree, key.as_ref()))
    }

    /// [`Snapshot::get`] as a future (a page to read from the disk is waited for by
    /// yielding).
    pub async fn get_async(&self, tree: &Tree, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        crate::db::in_task("Snapshot::get_async")?;
        self.get_bytes(tree, key.as_ref()).await
    }

    async fn get_bytes(&self, tree: &Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        self.check_tree(tree)?;
        match self.held.get_raw(tree, key).await? {
            Some(value) if super::object::is_stub(&value) => {
                self.held.follow_stub(&value).map(Some)
            }
            other => Ok(other),
        }
    }

    /// The entries of `tree` whose keys lie in `range`, in ascending key order, as of the
    /// snapshot (see [`Tree::range`] for the bounds).
    pub fn range<K, R>(&self, tree: &Tree, range: R) -> Iter
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let (lower, upper) = (owned_bound(range.start_bound()), owned_bound(range.end_bound()));
        self.scan(tree, lower, upper, false)
    }

    /// [`Snapshot::range`] in descending key order.
    pub fn range_rev<K, R>(&self, tree: &Tree, range: R) -> Iter
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let (lower, upper) = (owned_bound(range.start_bound()), owned_bound(range.end_bound()));
        self.scan(tree, lower, upper, true)
    }

    /// Every entry of `tree` as of the snapshot, in ascending key order.
    pub fn iter(&self, tree: &Tree) -> Iter {
        self.scan(tree, Bound::Unbounded, Bound::Unbounded, false)
    }

    /// Every entry of `tree` as of the snapshot, in descending key order.
    pub fn iter_rev(&self, tree: &Tree) -> Iter {
        self.scan(tree, Bound::Unbounded, Bound::Unbounded, true)
    }

    /// The entries of `tree` whose keys start with `prefix`, as of the snapshot.
    pub fn prefix(&self, tree: &Tree, prefix: impl AsRef<[u8]>) -> Iter {
        let (lower, upper) = prefix_bounds(prefix.as_ref());
        self.scan(tree, lower, upper, false)
    }

    fn scan(
        &self,
        tree: &Tree,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        reverse: bool,
    ) -> Iter {
        let mut iter = tree.scan_at(lower, upper, reverse, Some(Arc::clone(&self.held)));
        if let Err(e) = self.check_tree(tree) {
            iter.fail_with(e);
        } else if crate::sched::on_worker() {
            iter.fail_with(blocking_in_task());
        }
        iter
    }

    /// `tree` must be of the snapshot's database.
    fn check_tree(&self, tree: &Tree) -> Result<()> {
        self.held.shared.check_open()?;
        if !Arc::ptr_eq(&tree.shared, &self.held.shared) {
            return Err(Error::NotSupported {
                reason: format!("tree {:?} is of another database than the snapshot", tree.name()),
            });
        }
        Ok(())
    }
}

/// A blocking read through a snapshot, inside a task.
fn blocking_in_task() -> Error {
    Error::NotSupported {
        reason: "a blocking read through a snapshot inside a task; use Snapshot::get_async, or \
                 read it from a thread"
            .into(),
    }
}
