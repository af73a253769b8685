//! A tree's operations, each written once: as a future over the B+tree's restartable
//! attempts and the scheduler's one driver (`sched::run_async`: on a worker a miss is a
//! queued read and the task yields; elsewhere a blocking read). The blocking API runs the
//! same future on the calling thread (`sched::block_on`), so there is no blocking twin to
//! keep in step; a blocking write inside a task is refused (`Error::BlockingWriteInTask`:
//! it could wait for a commit or a flush that only its own worker would finish).
//!
//! Puts into leaves that are not in memory go to the change buffer (`change_buffer/`); every
//! other change of a key first removes it from there in the same commit, and a committer that
//! pushes the change buffer over what it may hold drains the next leaf of the sweep.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{check_key, check_value, Shared};
use crate::btree::node::Node;
use crate::btree::tree::Resume;
use crate::btree::{with_scratch, BTree, Scratch};
use crate::buffer::{Attempt, BufferPool, Interrupt};
use crate::change_buffer::entry_cost;
use crate::error::{Error, PageId, Result};
use crate::options::Durability;
use crate::sched::{block_on, go_on, run_async_with};

use super::object::{is_stub, needs_object};

/// A named tree: an ordered map from keys (1 to `MAX_KEY_LEN` bytes) to values (0 to
/// `MAX_VALUE_LEN` bytes). Handles are cheap to clone and `Send + Sync`.
#[derive(Debug, Clone)]
pub struct Tree {
    pub(super) shared: Arc<Shared>,
    pub(super) btree: BTree,
    pub(super) name: Arc<str>,
    /// Set when the tree is dropped: every later attempt fails with `TreeNotFound`.
    pub(super) dropped: Arc<AtomicBool>,
}

/// An error of an operation on tree `name` (root page `root`) as its caller sees it: "not
/// found" names the tree when it was dropped; when it was not, its root page is not a node
/// of it (the btree cannot tell a dropped tree from a damaged root): damage.
pub(super) fn tree_error(
    e: Error,
    name: &str,
    dropped: &AtomicBool,
    root: PageId,
    pool: &BufferPool,
) -> Error {
    match e {
        Error::TreeNotFound { .. } if dropped.load(Ordering::Acquire) => {
            Error::TreeNotFound { name: name.to_owned() }
        }
        Error::TreeNotFound { .. } => Error::Corrupt {
            page: root,
            file: pool.file().path().to_owned(),
            reason: format!("the root page of tree {name:?} is not a node of it"),
        },
        other => other,
    }
}

/// A leaf's finding as "in memory or not": a miss is `false`, not a read.
fn in_memory(found: Attempt<(PageId, u64)>) -> Attempt<bool> {
    match found {
        Ok(_) => Ok(true),
        Err(Interrupt::Miss(_)) => Ok(false),
        Err(other) => Err(other),
    }
}

/// A value as a read found it, and the leaf (page, version) that answered, if the answer
/// lies wholly in it ([`Tree::get_witnessed`]).
pub(super) type Witnessed = (Option<Vec<u8>>, Option<(PageId, u64)>);

/// A range of keys: its low and high bounds.
type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// The key range of the leaf that holds `key`, as bounds (`cursor::key_range`).
fn leaf_range(
    btree: BTree,
    pool: &BufferPool,
    key: &[u8],
    scratch: &mut Scratch,
) -> Attempt<KeyRange> {
    let page = &mut scratch.pages[0];
    btree.leaf_copy(pool, key, page)?;
    Ok(super::cursor::key_range(Node::new(page.bytes())))
}

impl Tree {
    /// The tree's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This tree's view of an error (see [`tree_error`]).
    pub(super) fn error(&self, e: Error) -> Error {
        tree_error(e, &self.name, &self.dropped, self.btree.root, &self.shared.pool)
    }

    /// Runs one attempt of this tree to its end with the one driver, naming the tree in a
    /// `TreeNotFound`. `in_commit`: the caller holds the commit lock, and does not give its
    /// worker's turn away after the operation (only a miss makes it wait).
    async fn run<T>(
        &self,
        in_commit: bool,
        mut attempt: impl FnMut(&BufferPool, &mut Scratch) -> Attempt<T>,
    ) -> Result<T> {
        self.shared.check_open()?;
        let pool = &self.shared.pool;
        let dropped = &self.dropped;
        run_async_with(pool, !in_commit, |scratch| {
            if dropped.load(Ordering::Acquire) {
                return Err(Interrupt::Error(Error::TreeNotFound { name: String::new() }));
            }
            attempt(pool, scratch)
        })
        .await
        .map_err(|e| self.error(e))
    }

    /// The value of `key`, if present.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let options = ferrite::Options { workers: 0, pool_bytes: 16 << 20, ..Default::default() };
    /// # let db = ferrite::Db::open(dir.path(), options)?;
    /// let fruit = db.tree("fruit")?;
    /// fruit.put("apple", "red")?;
    /// assert_eq!(fruit.get("apple")?, Some(b"red".to_vec()));
    /// assert_eq!(fruit.get(b"pear")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_with_bytes(key.as_ref(), |value| value.to_vec())
    }

    /// [`Tree::get`] as a future: on a worker, a miss queues a read and yields.
    pub async fn get_async(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        crate::db::in_task("Tree::get_async")?;
        self.get_with_bytes_async(key.as_ref(), |value| value.to_vec()).await
    }

    /// Calls `read` with the value of `key` (without copying it out), if present.
    pub fn get_with<R>(
        &self,
        key: impl AsRef<[u8]>,
        read: impl FnMut(&[u8]) -> R,
    ) -> Result<Option<R>> {
        self.get_with_bytes(key.as_ref(), read)
    }

    /// [`Tree::get_with`] of a borrowed key: the one body every key type shares (each
    /// public call taking `impl AsRef<[u8]>` is a thin wrapper over such a twin, so that
    /// the engine is compiled once, not once per key type).
    ///
    /// The lookup's first attempt runs right here: in memory it is the whole lookup, and
    /// the driver (`block_on` of the rest, as `get_with_bytes_async` runs it) comes in only
    /// when it missed a page or restarted. Building and polling the future for every lookup
    /// cost 6 % more instructions per in-memory lookup (callgrind).
    fn get_with_bytes<R>(&self, key: &[u8], mut read: impl FnMut(&[u8]) -> R) -> Result<Option<R>> {
        loop {
            let mut stub = None;
            let found = self.get_raw_with(key, |value| match is_stub(value) {
                true => {
                    stub = Some(value.to_vec());
                    None
                }
                false => Some(read(value)),
            })?;
            let Some(stub) = stub else { return Ok(found.flatten()) };
            let value = self.follow_stub(stub.clone());
            if self.get_raw_with(key, |now| now == &stub[..])? == Some(true) {
                return value.map(|v| Some(read(&v)));
            }
            // Replaced while its data was read: read the key again (`still_holds`).
        }
    }

    /// The whole value of an object, given its stub.
    pub(super) fn follow_stub(&self, stub: Vec<u8>) -> Result<Vec<u8>> {
        match self.classify(stub)? {
            super::object::Stored::Object { id, len } => self.read_whole_object(id, len),
            _ => unreachable!("a stub"),
        }
    }

    /// `key`'s value as stored (an object's stub is not followed).
    pub(super) fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_raw_with(key, |value| value.to_vec())
    }

    /// [`Tree::get_with`] without following an object's stub.
    fn get_raw_with<R>(&self, key: &[u8], mut read: impl FnMut(&[u8]) -> R) -> Result<Option<R>> {
        if let Some(done) = self.read_first(key, &mut read) {
            return done;
        }
        let mut resume = Resume::default();
        let mut attempt = self.lookup(key, &mut read, &mut resume);
        match with_scratch(&mut attempt) {
            Ok(value) => Ok(value),
            first => block_on(go_on(&self.shared.pool, true, attempt, first)),
        }
        .map_err(|e| self.error(e))
    }

    /// [`Tree::get_with`] as a future.
    pub async fn get_with_async<R>(
        &self,
        key: impl AsRef<[u8]>,
        read: impl FnMut(&[u8]) -> R,
    ) -> Result<Option<R>> {
        crate::db::in_task("Tree::get_with_async")?;
        self.get_with_bytes_async(key.as_ref(), read).await
    }

    /// [`Tree::get_with_async`] of a borrowed key.
    ///
    /// `still_holds`: a reader that followed a stub reads the key again once it has the
    /// object's data, and keeps the data only if the key still holds that stub (an object
    /// id is never reused). A put that replaced the object meanwhile deleted its extents,
    /// and the reader may have found none (a sparse object: zeros) or read pages freed and
    /// reused since; it starts over. A failed read of the data counts only if the key still
    /// holds the stub: otherwise it too may come from the replacement.
    async fn get_with_bytes_async<R>(
        &self,
        key: &[u8],
        mut read: impl FnMut(&[u8]) -> R,
    ) -> Result<Option<R>> {
        loop {
            let mut stub = None;
            let found = self
                .read(false, key, |value| match is_stub(value) {
                    true => {
                        stub = Some(value.to_vec());
                        None
                    }
                    false => Some(read(value)),
                })
                .await?;
            let Some(stub) = stub else { return Ok(found.flatten()) };
            let super::object::Stored::Object { id, len } = self.classify(stub.clone())? else {
                unreachable!("a stub")
            };
            // (On a worker, the object's data is read through its ring.)
            let value = self.read_whole_object_async(id, len).await;
            if self.read(false, key, |now| now == &stub[..]).await? == Some(true) {
                return value.map(|v| Some(read(&v)));
            }
            // Replaced while its data was read: read the key again (`still_holds`).
        }
    }

    /// The value of `key` for the holder of the commit lock (a transaction's validation).
    pub(super) async fn get_in_commit(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.read(true, key, |value| value.to_vec()).await? {
            Some(value) if is_stub(&value) => self.follow_stub(value).map(Some),
            other => Ok(other),
        }
    }

    /// [`Tree::get_async`] for a transaction's read, with the leaf that answered it and the
    /// leaf's version then, when the answer lies wholly in that leaf (see [`Resume::leaf`]):
    /// while the leaf keeps that version and the change buffer holds nothing for the key
    /// ([`Tree::unchanged_since`]), the key's value is the same, and the commit need not
    /// read it again. A value from the change buffer, an object's or one on a Value page of
    /// its own has no such leaf.
    pub(super) async fn get_witnessed(&self, key: &[u8]) -> Result<Witnessed> {
        if let Some(done) = self.read_first(key, &mut |value: &[u8]| value.to_vec()) {
            return done.map(|value| (value, None));
        }
        let mut resume = Resume::default();
        let mut read = |value: &[u8]| value.to_vec();
        let attempt = self.lookup(key, &mut read, &mut resume);
        let found =
            run_async_with(&self.shared.pool, true, attempt).await.map_err(|e| self.error(e))?;
        match found {
            Some(value) if is_stub(&value) => Ok((self.get_async(key).await?, None)),
            found => Ok((found, resume.leaf())),
        }
    }

    /// [`Tree::get_witnessed`] of many rows at once, `(tree, key)` each, the trees all of
    /// the database whose pool is `pool`: the leaves not in memory are read with their reads
    /// in flight together (`sched::load_together`), each lookup going on from the page it
    /// missed. A row this cannot answer (an error, an object's stub, too many restarts) is
    /// `None`, for the caller to read alone, which meets the error or follows the stub.
    pub(super) async fn get_witnessed_many(
        pool: &BufferPool,
        rows: &[(&Tree, &[u8])],
    ) -> Vec<Option<Witnessed>> {
        let mut found: Vec<Option<Witnessed>> = vec![None; rows.len()];
        // Whether the row's tree must still be read; the change buffer answers first.
        let mut unread = vec![false; rows.len()];
        for (i, &(tree, key)) in rows.iter().enumerate() {
            match tree.read_first(key, &mut |value: &[u8]| value.to_vec()) {
                Some(Ok(value)) => found[i] = Some((value, None)),
                Some(Err(_)) => {}
                None => unread[i] = true,
            }
        }
        let mut resumes = vec![Resume::default(); rows.len()];
        // The descents in memory go down together, their cache misses in flight at once
        // (`btree::together`); each lookup then ends at the leaf its descent reached. (Off
        // a worker `load_together` makes no lookups: the rows are read alone.)
        if !crate::sched::on_worker() {
            return found;
        }
        let descents: Vec<_> = rows
            .iter()
            .zip(&unread)
            .map(|(&(tree, key), &unread)| {
                (unread && !tree.dropped.load(Ordering::Acquire)).then_some((tree.btree, key))
            })
            .collect();
        crate::btree::together::descend_together(pool, &descents, &mut resumes);
        crate::sched::load_together(pool, rows.len(), |i, scratch| {
            if !unread[i] {
                return Ok(());
            }
            let (tree, key) = rows[i];
            let mut read = |value: &[u8]| value.to_vec();
            let value = tree.lookup(key, &mut read, &mut resumes[i])(scratch)?;
            unread[i] = false;
            if !value.as_deref().is_some_and(is_stub) {
                found[i] = Some((value, resumes[i].leaf()));
            }
            Ok(())
        })
        .await;
        found
    }

    /// Whether `key`'s value is the one a read of it found in `leaf` (its page and version,
    /// from [`Tree::get_witnessed`]): the leaf is unchanged since, and the change buffer holds
    /// nothing for the key (a put there leaves the leaf as it is). False when it cannot tell.
    pub(super) fn unchanged_since(&self, key: &[u8], (page, version): (PageId, u64)) -> bool {
        self.shared.pool.unchanged_since(page, version)
            && self.shared.change_buffer.get(self.btree.tree_id, key).is_none()
    }

    /// Whether the part of a range a scan's witness vouched for certainly holds what the
    /// scan found ([`Tree::collect_range_witnessed`]): the leaf keeps its version and the
    /// change buffer holds nothing of this tree (false: scan it again to tell).
    pub(super) fn range_unchanged_since(&self, (page, version): (PageId, u64)) -> bool {
        self.shared.pool.unchanged_since(page, version)
            && !self.shared.change_buffer.holds_tree(self.btree.tree_id)
    }

    /// `key`'s value as stored (an object's stub is not followed), as a future: on a
    /// worker, a miss queues a read and yields.
    pub(super) async fn stored_async(&self, key: &[u8]) -> Result<super::object::Stored> {
        match self.read(false, key, |value| value.to_vec()).await? {
            None => Ok(super::object::Stored::Absent),
            Some(value) => self.classify(value),
        }
    }

    pub(super) async fn stored_in_commit(&self, key: &[u8]) -> Result<super::object::Stored> {
        match self.read(true, key, |value| value.to_vec()).await? {
            None => Ok(super::object::Stored::Absent),
            Some(value) => self.classify(value),
        }
    }

    async fn read<R>(
        &self,
        in_commit: bool,
        key: &[u8],
        mut read: impl FnMut(&[u8]) -> R,
    ) -> Result<Option<R>> {
        if let Some(done) = self.read_first(key, &mut read) {
            return done;
        }
        let mut resume = Resume::default();
        let attempt = self.lookup(key, &mut read, &mut resume);
        run_async_with(&self.shared.pool, !in_commit, attempt).await.map_err(|e| self.error(e))
    }

    /// What a read of `key` knows before the tree: a bad key, a closed database or dropped
    /// tree, or the change buffer's value (the newest) — `None` if the tree must be read.
    fn read_first<R>(
        &self,
        key: &[u8],
        read: &mut impl FnMut(&[u8]) -> R,
    ) -> Option<Result<Option<R>>> {
        let checked = check_key(key).and_then(|()| self.shared.check_open());
        match checked.and_then(|()| self.buffered(key)) {
            Err(e) => Some(Err(e)),
            Ok(Some(value)) => Some(Ok(Some(read(&value)))),
            Ok(None) => None,
        }
    }

    /// One attempt of a lookup of `key` in the tree (its leaf's value, given to `read`).
    fn lookup<'a, R>(
        &'a self,
        key: &'a [u8],
        read: &'a mut impl FnMut(&[u8]) -> R,
        resume: &'a mut Resume,
    ) -> impl FnMut(&mut Scratch) -> Attempt<Option<R>> + 'a {
        let (btree, pool, dropped) = (self.btree, &*self.shared.pool, &*self.dropped);
        move |scratch| {
            if dropped.load(Ordering::Acquire) {
                return Err(Interrupt::Error(Error::TreeNotFound { name: String::new() }));
            }
            btree.get_resuming(pool, key, scratch, read, resume, true)
        }
    }

    /// The value the change buffer holds for `key` (the newest, if any).
    fn buffered(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(Error::TreeNotFound { name: self.name.to_string() });
        }
        Ok(self.shared.change_buffer.get(self.btree.tree_id, key))
    }

    /// Inserts `key` with `value`, or overwrites its value. A value longer than
    /// `MAX_VALUE_LEN` becomes an object (see [`Tree::put_from`]). Durable when it returns
    /// as the database's [`Durability`] asks (`Options::durability`).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let options = ferrite::Options { workers: 0, pool_bytes: 16 << 20, ..Default::default() };
    /// # let db = ferrite::Db::open(dir.path(), options)?;
    /// let orders = db.tree("orders")?;
    /// orders.put(b"order-1", b"two apples")?; // byte strings,
    /// orders.put("order-2", "a pear")?; // text,
    /// orders.put(vec![b'o', b'3'], String::from("plums"))?; // owned bytes or text
    /// assert_eq!(orders.get("order-2")?.as_deref(), Some(&b"a pear"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_bytes(key.as_ref(), value.as_ref())
    }

    /// [`Tree::put`] of borrowed bytes.
    fn put_bytes(&self, key: &[u8], value: &[u8]) -> Result<()> {
        if needs_object(value.len() as u64, value) {
            check_value(value)?;
            if crate::sched::on_worker() {
                return Err(Error::BlockingWriteInTask);
            }
            return self.put_stream(key, &mut &value[..]).map(|_| ());
        }
        self.shared.blocking_write(self.put_bytes_async(key, value))
    }

    /// [`Tree::put`] as a future (waiting for the commit lock or the log yields). A value
    /// that must be an object has its data written through the worker's ring before the
    /// commit; a task cannot write a database's first object (`Error::NotSupported`: see
    /// [`Db::ready_objects`](crate::Db::ready_objects)).
    pub async fn put_async(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        crate::db::in_task("Tree::put_async")?;
        self.put_bytes_async(key.as_ref(), value.as_ref()).await
    }

    /// [`Tree::put_async`] of borrowed bytes.
    async fn put_bytes_async(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.shared.check_writable()?;
        check_key(key)?;
        check_value(value)?;
        if needs_object(value.len() as u64, value) {
            return self.put_object_async(key, value).await;
        }
        let shared = &self.shared;
        // With objects in the database, a put must see the value it replaces (a stub's
        // object is freed in the same commit): no change buffer.
        let objects = shared.objects_in_use.load(Ordering::Acquire);
        if !objects && shared.change_buffer.enabled() && !self.leaf_in_memory(key).await? {
            shared.change_buffer.make_room(&shared.pool, entry_cost(key, value));
            shared
                .commit(shared.durability, async || {
                    shared.change_buffer.stage_put(self.btree, key, value);
                    Ok(())
                })
                .await?;
            if shared.change_buffer.over_budget(&shared.pool) {
                shared.drain_next().await?;
            }
            return Ok(());
        }
        if objects || !shared.change_buffer.enabled() {
            // (With the change buffer on, the leaf and its path were just found in memory.)
            self.prefetch(key).await;
        }
        shared.commit(shared.durability, async || self.apply_put(key, value).await).await
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.shared.blocking_write(self.delete_bytes_async(key.as_ref()))
    }

    /// [`Tree::delete`] as a future.
    pub async fn delete_async(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        crate::db::in_task("Tree::delete_async")?;
        self.delete_bytes_async(key.as_ref()).await
    }

    /// [`Tree::delete_async`] of a borrowed key.
    async fn delete_bytes_async(&self, key: &[u8]) -> Result<bool> {
        self.shared.check_writable()?;
        check_key(key)?;
        self.prefetch(key).await;
        let shared = &self.shared;
        shared.commit(shared.durability, async || self.apply_delete(key).await).await
    }

    /// Changes the value of `key` in place, atomically (no reader sees half of the change);
    /// the value keeps its length. Returns whether `key` was present.
    pub fn update(&self, key: impl AsRef<[u8]>, change: impl FnOnce(&mut [u8])) -> Result<bool> {
        self.shared.blocking_write(self.update_bytes_async(key.as_ref(), change))
    }

    /// [`Tree::update`] as a future.
    pub async fn update_async(
        &self,
        key: impl AsRef<[u8]>,
        change: impl FnOnce(&mut [u8]),
    ) -> Result<bool> {
        crate::db::in_task("Tree::update_async")?;
        self.update_bytes_async(key.as_ref(), change).await
    }

    /// [`Tree::update_async`] of a borrowed key.
    async fn update_bytes_async(&self, key: &[u8], change: impl FnOnce(&mut [u8])) -> Result<bool> {
        self.shared.check_writable()?;
        check_key(key)?;
        let btree = self.btree;
        let mut change = Some(change);
        self.prefetch(key).await;
        let shared = &self.shared;
        shared
            .commit(shared.durability, async || {
                if shared.objects_in_use.load(Ordering::Acquire)
                    && matches!(
                        self.stored_in_commit(key).await?,
                        super::object::Stored::Object { .. }
                    )
                {
                    return Err(Error::NotSupported {
                        reason: "update changes small values in place; an object is changed \
                                 with write_at"
                            .into(),
                    });
                }
                // A buffered value goes into its leaf first, to be changed there.
                if let Some(value) = shared.change_buffer.stage_remove(btree.tree_id, key) {
                    self.run(true, |pool, scratch| btree.put(pool, key, &value, scratch)).await?;
                }
                self.run(true, |pool, scratch| btree.update(pool, key, &mut change, scratch)).await
            })
            .await
    }

    /// Whether the leaf whose range holds `key` is in the pool (without reading it): if not,
    /// a put of `key` goes to the change buffer.
    async fn leaf_in_memory(&self, key: &[u8]) -> Result<bool> {
        let btree = self.btree;
        self.run(false, |pool, _| in_memory(btree.locate_leaf(pool, key))).await
    }

    /// Reads the path to `key`'s leaf into the pool before a commit takes the commit lock,
    /// so that the commit (which holds it) seldom waits for a read. Errors are left for the
    /// commit itself to meet. (The tree itself: not answered by the change buffer.)
    pub(super) async fn prefetch(&self, key: &[u8]) {
        let btree = self.btree;
        let _ = self
            .run(false, |pool, scratch| btree.get(pool, key, scratch, &mut |_: &[u8]| ()))
            .await;
    }

    /// [`Tree::get_async`] of many keys: their values, in the same order. The leaves not in
    /// memory are read with their reads in flight together, so the task waits about one
    /// read's time instead of one per key, and the device sees them as one deep queue.
    /// Each value is as a `get_async` of its key would have found it at some moment of the
    /// call (not one moment for all: a snapshot or a transaction gives that).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let options = ferrite::Options { workers: 1, pool_bytes: 16 << 20, ..Default::default() };
    /// # let db = ferrite::Db::open(dir.path(), options)?;
    /// let stock = db.tree("stock")?;
    /// stock.put(4242u32.to_be_bytes(), "12 left")?;
    /// let task = db.spawn(async move {
    ///     stock.get_many_async(&[17u32, 4_242, 90_001].map(u32::to_be_bytes)).await
    /// })?;
    /// assert_eq!(task.wait()?, [None, Some(b"12 left".to_vec()), None]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn get_many_async<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        crate::db::in_task("Tree::get_many_async")?;
        let rows: Vec<(&Tree, &[u8])> = keys.iter().map(|key| (self, key.as_ref())).collect();
        let found = match rows.len() > 1 {
            true => Tree::get_witnessed_many(&self.shared.pool, &rows).await,
            false => vec![None; rows.len()],
        };
        let mut values = Vec::with_capacity(keys.len());
        for (found, (_, key)) in found.into_iter().zip(rows) {
            values.push(match found {
                Some((value, _)) => value,
                // Not answered together: an error to meet, or an object to follow.
                None => self.get_with_bytes_async(key, |value| value.to_vec()).await?,
            });
        }
        Ok(values)
    }

    /// Loads the leaf `key` belongs in, before a commit that changes it, unless page `last`
    /// (the leaf the previous key of a batch went to) is that leaf and in memory. Returns the
    /// leaf, for the next key; `None` if the descent failed (the commit then meets the error).
    pub(super) async fn prefetch_leaf(&self, key: &[u8], last: Option<PageId>) -> Option<PageId> {
        let btree = self.btree;
        if let Some(leaf) = last {
            if btree.resident_leaf_holds(&self.shared.pool, leaf, key) {
                return Some(leaf);
            }
        }
        self.run(false, |pool, _| btree.leaf_for(pool, key)).await.ok()
    }

    /// The leaf for `key` if it is in memory, without loading anything: `Ok(None)` if it, or
    /// a node on the path to it, is not (a put of the key can then go to the change buffer,
    /// as [`Tree::put_async`]'s does). Leaf `last` is tried first, as in `prefetch_leaf`.
    pub(super) async fn resident_leaf_for(
        &self,
        key: &[u8],
        last: Option<PageId>,
    ) -> Result<Option<PageId>> {
        let btree = self.btree;
        if let Some(leaf) = last {
            if btree.resident_leaf_holds(&self.shared.pool, leaf, key) {
                return Ok(Some(leaf));
            }
        }
        self.run(false, |pool, _| match btree.leaf_for(pool, key) {
            Ok(leaf) => Ok(Some(leaf)),
            Err(Interrupt::Miss(_)) => Ok(None),
            Err(other) => Err(other),
        })
        .await
    }

    /// The put itself, inside a commit (the key leaves the change buffer, if there; an
    /// object it held is freed).
    pub(super) async fn apply_put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.apply_put_near(key, value, None).await.map(drop)
    }

    /// [`Tree::apply_put`] trying leaf `near` first ([`BTree::put_near`]); returns the leaf
    /// the entry went into.
    pub(super) async fn apply_put_near(
        &self,
        key: &[u8],
        value: &[u8],
        near: Option<PageId>,
    ) -> Result<PageId> {
        let replaced = self.replaced_object(key).await?;
        let btree = self.btree;
        self.shared.change_buffer.stage_remove(btree.tree_id, key);
        let leaf = self.run(true, |pool, scratch| btree.put_near(pool, key, value, scratch, near));
        let leaf = leaf.await?;
        self.free_replaced(replaced).await?;
        Ok(leaf)
    }

    /// [`Tree::apply_put`] of a value that replaces no object (the caller knows).
    pub(super) async fn apply_put_raw(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let btree = self.btree;
        self.shared.change_buffer.stage_remove(btree.tree_id, key);
        self.run(true, |pool, scratch| btree.put(pool, key, value, scratch)).await
    }

    /// Inside a commit that replaces or deletes `key`: the object it holds, if any.
    async fn replaced_object(&self, key: &[u8]) -> Result<Option<u64>> {
        if !self.shared.objects_in_use.load(Ordering::Acquire) {
            return Ok(None);
        }
        match self.stored_in_commit(key).await? {
            super::object::Stored::Object { id, .. } => Ok(Some(id)),
            _ => Ok(None),
        }
    }

    /// Frees the object a put or delete replaced, once the key no longer holds it: a reader
    /// that still has its stub and finds its extents gone then finds the key changed too
    /// (`still_holds`, in `get_with_async`), and reads again.
    async fn free_replaced(&self, replaced: Option<u64>) -> Result<()> {
        match replaced {
            Some(id) => self.shared.free_object(id).await,
            None => Ok(()),
        }
    }

    /// The delete itself, inside a commit. A key in the change buffer leaves it (and was
    /// present); an object it held is freed.
    pub(super) async fn apply_delete(&self, key: &[u8]) -> Result<bool> {
        let replaced = self.replaced_object(key).await?;
        let removed = self.apply_delete_raw(key).await?;
        self.free_replaced(replaced).await?;
        Ok(removed)
    }

    /// [`Tree::apply_delete`] of a key that holds no object (the caller knows).
    pub(super) async fn apply_delete_raw(&self, key: &[u8]) -> Result<bool> {
        let btree = self.btree;
        let buffered = self.shared.change_buffer.stage_remove(btree.tree_id, key).is_some();
        let (removed, merge) =
            self.run(true, |pool, scratch| btree.delete(pool, key, scratch)).await?;
        if let Some(leaf) = merge {
            self.run(true, |pool, scratch| btree.try_merge(pool, leaf, key, scratch)).await?;
        }
        Ok(removed || buffered)
    }
}

impl Shared {
    /// Drains the change buffer's next victim (the sweep: `ChangeBuffer::next_drain`) into
    /// its leaf, for a committer that pushed the change buffer over what it may hold: the leaf is
    /// read outside the commit lock, then its buffered entries are put into it in one commit
    /// that needs no sync (the puts it moves are durable already).
    pub(super) async fn drain_next(self: &Arc<Self>) -> Result<()> {
        let Some((btree, key)) = self.change_buffer.next_drain(&self.pool) else { return Ok(()) };
        let pool = &self.pool;
        let _ = run_async_with(pool, true, |scratch| {
            btree.get(pool, &key, scratch, &mut |_: &[u8]| ())
        })
        .await;
        let drained = self
            .commit(Durability::None, async || {
                // Under the commit lock: a victim that left the change buffer meanwhile (drained,
                // changed, or its tree dropped) leaves nothing to do.
                if self.change_buffer.get(btree.tree_id, &key).is_none() {
                    return Ok(0);
                }
                let (low, high) =
                    run_async_with(pool, false, |scratch| leaf_range(btree, pool, &key, scratch))
                        .await?;
                let entries = self.change_buffer.range(
                    btree.tree_id,
                    super::cursor::as_slice(&low),
                    super::cursor::as_slice(&high),
                );
                for (key, value) in &entries {
                    self.change_buffer.stage_remove(btree.tree_id, key);
                    run_async_with(pool, false, |scratch| btree.put(pool, key, value, scratch))
                        .await?;
                }
                Ok(entries.len())
            })
            .await?;
        self.change_buffer.count_drain(drained);
        Ok(())
    }

    /// Puts every entry of the change buffer into its leaf, a few hundred per commit (at
    /// close, after the workers stopped: a closed directory needs no log).
    pub(super) async fn drain_all(self: &Arc<Self>) -> Result<()> {
        if self.log.is_none() {
            return Ok(());
        }
        // Each commit pins the pages it changes until its record is logged.
        let per_commit = (self.pool.pool_pages() / 8).clamp(1, 256) as usize;
        let pool = &self.pool;
        while !self.change_buffer.is_empty() {
            let entries = self.change_buffer.first(per_commit);
            self.commit(Durability::None, async || {
                for (tree, key, value) in &entries {
                    let Some(tree) = tree else {
                        return Err(Error::Corrupt {
                            page: 0,
                            file: self.dir.clone(),
                            reason: "the change buffer holds a key of a tree the catalog lacks"
                                .into(),
                        });
                    };
                    self.change_buffer.stage_remove(tree.tree_id, key);
                    run_async_with(pool, false, |scratch| tree.put(pool, key, value, scratch))
                        .await?;
                }
                Ok(())
            })
            .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use crate::{Db, Options};

    /// The lookups of a multi-key read (`load_together`) whose pages are on disk start the
    /// reads of every key's next page in one round and wait once per level of the tree, not
    /// once per key: the descents run in whole rounds (keys 0 to n - 1, again and again),
    /// one round per level read and a last one that finds every leaf in memory. Each page
    /// is read once, and the reads that follow read nothing.
    #[test]
    fn a_multi_key_read_reads_the_pages_of_its_keys_together() {
        let dir = tempfile::TempDir::with_prefix("multi-key-read").unwrap();
        let options = || Options { workers: 1, pool_bytes: 32 << 20, ..Options::default() };
        let db = Db::open(dir.path(), options()).unwrap();
        let tree = db.tree("t").unwrap();
        for i in 0..4000u32 {
            tree.put(i.to_be_bytes(), [7u8; 100]).unwrap();
        }
        db.close().unwrap();

        let db = Db::open(dir.path(), options()).unwrap();
        let tree = db.tree("t").unwrap();
        // Keys 400 apart: each in a leaf of its own (a leaf holds about 35 of them).
        let keys: Vec<[u8; 4]> = (0..10u32).map(|i| (i * 400).to_be_bytes()).collect();
        let n = keys.len();
        let before = db.stats().unwrap().pool.reads;
        let (calls, tree) = db
            .spawn(async move {
                let mut calls = Vec::new();
                let pool = &tree.shared.pool;
                crate::sched::load_together(pool, n, |i, _| {
                    calls.push(i);
                    tree.btree.leaf_for(pool, &keys[i]).map(drop)
                })
                .await;
                (calls, tree)
            })
            .unwrap()
            .wait();
        let read = db.stats().unwrap().pool.reads - before;
        let rounds: Vec<&[usize]> = calls.chunks(n).collect();
        let whole: Vec<usize> = (0..n).collect();
        assert!(rounds.iter().all(|round| *round == whole), "descents out of rounds: {calls:?}");
        // The root (one read for all the keys), then the ten leaves, then all in memory.
        assert_eq!(rounds.len(), 3, "{calls:?}");
        assert_eq!(read, 1 + n as u64);

        let read_again = db
            .spawn(async move {
                for i in 0..10u32 {
                    assert_eq!(
                        tree.get_async((i * 400).to_be_bytes()).await.unwrap().unwrap(),
                        [7; 100]
                    );
                }
            })
            .map(|task| task.wait());
        assert!(read_again.is_ok());
        assert_eq!(
            db.stats().unwrap().pool.reads - before,
            1 + n as u64,
            "a read after the prefetch"
        );
    }

    /// `get_many_async` of a tree and of a transaction: off a task refused; values in the
    /// order asked (absent keys `None`, a key asked twice answered twice); the transaction's
    /// own writes first; its reads validated at the commit like `get_async`'s; a tree of
    /// another database refused. Out of memory (a reopened database), each leaf is read
    /// once.
    #[test]
    fn get_many_reads_as_get_does() {
        let dir = tempfile::TempDir::with_prefix("get-many").unwrap();
        let other_dir = tempfile::TempDir::with_prefix("get-many-other").unwrap();
        let options = || Options { workers: 1, pool_bytes: 16 << 20, ..Options::default() };
        let db = Db::open(dir.path(), options()).unwrap();
        let tree = db.tree("t").unwrap();
        for i in 0..4000u32 {
            tree.put(i.to_be_bytes(), i.to_le_bytes()).unwrap();
        }
        db.close().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        let other = Db::open(other_dir.path(), options()).unwrap();
        let (tree, foreign) = (db.tree("t").unwrap(), other.tree("t").unwrap());

        // Polled on this thread, as another executor would.
        let off_task = {
            let mut future = std::pin::pin!(tree.get_many_async(&[b"a"]));
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            future.as_mut().poll(&mut cx)
        };
        assert!(
            matches!(off_task, std::task::Poll::Ready(Err(crate::Error::NotInTask { .. }))),
            "{off_task:?}"
        );

        let before = db.stats().unwrap().pool.reads;
        let keys: Vec<[u8; 4]> = [0u32, 1000, 5000, 2000, 1000].map(u32::to_be_bytes).into();
        let expected: Vec<Option<Vec<u8>>> = [Some(0u32), Some(1000), None, Some(2000), Some(1000)]
            .map(|v| v.map(|v| v.to_le_bytes().to_vec()))
            .into();
        let (found, tree) = db
            .spawn(async move { (tree.get_many_async(&keys).await.unwrap(), tree) })
            .unwrap()
            .wait();
        assert_eq!(found, expected);
        // The root and the leaves of 0, 1000, 2000 and of where 5000 would be: one read each.
        assert_eq!(db.stats().unwrap().pool.reads - before, 5);

        let mut txn = db.transaction();
        txn.put(&tree, 7u32.to_be_bytes(), b"mine").unwrap();
        let (txn, tree, outcome) = db
            .spawn(async move {
                let mut txn = txn;
                let foreign = txn.get_many_async(&[(&foreign, b"a")]).await.map(drop);
                let rows = [7u32, 8, 3000].map(|k| (&tree, k.to_be_bytes()));
                let found = txn.get_many_for_update_async(&rows).await.unwrap();
                (txn, tree, (foreign, found))
            })
            .unwrap()
            .wait();
        assert!(matches!(outcome.0, Err(crate::Error::BadOptions { .. })), "{:?}", outcome.0);
        let values = [&b"mine"[..], &8u32.to_le_bytes(), &3000u32.to_le_bytes()];
        assert_eq!(outcome.1, values.map(|v| Some(v.to_vec())));
        // A row read together changed before the commit: the commit fails.
        tree.put(3000u32.to_be_bytes(), b"changed").unwrap();
        let commit = db.spawn(async move { txn.commit_async().await }).unwrap().wait();
        assert!(matches!(commit, Err(crate::Error::Conflict { .. })), "{commit:?}");
    }

    /// A transaction's `get_many_async` of rows it wrote, edited, read before, asks for
    /// twice, and has not touched: each answered as `get_async` would answer it (its own
    /// write; the tree's value under its edit; what it read before, though the tree changed
    /// since; the same value twice), and the commit validates the rows read there.
    #[test]
    fn a_transactions_get_many_answers_each_kind_of_row_as_get_does() {
        let dir = tempfile::TempDir::with_prefix("get-many-txn").unwrap();
        let options = Options { workers: 1, pool_bytes: 16 << 20, ..Options::default() };
        let db = Db::open(dir.path(), options).unwrap();
        let tree = db.tree("t").unwrap();
        for i in 0..4000u32 {
            tree.put(i.to_be_bytes(), i.to_le_bytes()).unwrap();
        }
        let mut txn = db.transaction();
        txn.put(&tree, 7u32.to_be_bytes(), b"mine").unwrap();
        txn.write_at(&tree, 9u32.to_be_bytes(), 0, b"X").unwrap();
        assert_eq!(txn.get(&tree, 10u32.to_be_bytes()).unwrap(), Some(10u32.to_le_bytes().into()));
        tree.put(10u32.to_be_bytes(), b"moved").unwrap();
        let (txn, found) = db
            .spawn(async move {
                let mut txn = txn;
                let rows = [7u32, 9, 10, 11, 2500, 11, 5000].map(|k| (&tree, k.to_be_bytes()));
                let found = txn.get_many_async(&rows).await.unwrap();
                (txn, found)
            })
            .unwrap()
            .wait();
        let mut edited = 9u32.to_le_bytes();
        edited[0] = b'X';
        let expected = [
            Some(b"mine".to_vec()),
            Some(edited.to_vec()),
            Some(10u32.to_le_bytes().to_vec()),
            Some(11u32.to_le_bytes().to_vec()),
            Some(2500u32.to_le_bytes().to_vec()),
            Some(11u32.to_le_bytes().to_vec()),
            None,
        ];
        assert_eq!(found, expected);
        // The key read before changed since: the commit fails, as it would after `get`.
        // (Blocking: a commit with a `write_at` is not made in a task.)
        let commit = txn.commit();
        assert!(matches!(commit, Err(crate::Error::Conflict { .. })), "{commit:?}");
    }

    /// `get_many_async` of more keys than a small pool has frames for reads in flight (a
    /// worker reads at most a quarter of its share of the pool at once): the rounds meet
    /// a full worker and wait for room, the keys they leave are read alone, and every
    /// answer is right.
    #[test]
    fn get_many_in_a_small_pool_answers_every_key() {
        let dir = tempfile::TempDir::with_prefix("get-many-small").unwrap();
        let options = || Options { workers: 1, pool_bytes: 64 * 4096, ..Options::default() };
        let db = Db::open(dir.path(), options()).unwrap();
        let tree = db.tree("t").unwrap();
        for i in 0..20_000u32 {
            tree.put(i.to_be_bytes(), i.to_le_bytes()).unwrap();
        }
        db.close().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        let tree = db.tree("t").unwrap();
        // 200 keys over the whole tree (and past its end), most in leaves of their own.
        let keys: Vec<[u8; 4]> = (0..200u32).map(|i| (i * 997 % 20_500).to_be_bytes()).collect();
        let found = db.spawn(async move { tree.get_many_async(&keys).await }).unwrap().wait();
        let expected: Vec<Option<Vec<u8>>> = (0..200u32)
            .map(|i| i * 997 % 20_500)
            .map(|k| (k < 20_000).then(|| k.to_le_bytes().to_vec()))
            .collect();
        assert_eq!(found.unwrap(), expected);
        assert!(db.stats().unwrap().pool.evictions > 0, "the pool never filled: proves little");
    }
}
