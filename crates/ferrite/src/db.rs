//! The public API: a data directory (`Db`) holding named trees (`Tree`), each an ordered map
//! from byte-string keys to byte-string values, usable from many threads at once.
//!
//! On disk a data directory holds `pages.ferrite` (the page file) and `LOCK` (held with
//! `flock` while open). The catalog is itself a B+tree (tree id 0, root in the superblock)
//! mapping each tree's name to its root page and tree id.

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::btree::buffered::{entry_cost, ChangeBuffer};
use crate::btree::check::{self, PageMap, TreeReport};
use crate::btree::iter::{as_slice, key_range, Cursor};
use crate::btree::node::MAX_KEY_LEN;
use crate::btree::{run, with_scratch, BTree};
use crate::buffer::{AlignedPage, BufferPool, Interrupt, PoolStats};
use crate::error::{Error, PageId, Result};
use crate::io::PageFile;
use crate::options::Durability;
use crate::sched::{TaskHandle, WorkerStats, Workers};
use crate::store::page::{read_u64, PAGE_SIZE};
use crate::store::superblock::{Superblock, NO_CHECKPOINT, SUPERBLOCK_PAGES};
use crate::store::value::MAX_VALUE_LEN;
use crate::wal::commit::CommitLock;
use crate::wal::record::{encode_checkpoint, push_buffered, Checkpoint, RecordWriter, KIND_COMMIT};
use crate::wal::recover::RecoveryReport;
use crate::wal::Log;
use std::future::Future;

mod lock;
mod open;
mod txn;
pub use lock::LOCK_FILE_NAME;
pub use txn::Transaction;

/// The page file's name inside a data directory.
pub const PAGE_FILE_NAME: &str = "pages.ferrite";
/// In a data directory whose pages live on other devices: their list, one per line (the
/// superblock on the first device is the authority; this file tells a reader where to look).
pub const DEVICES_FILE_NAME: &str = "DEVICES";
/// Longest tree name, in bytes.
pub const MAX_TREE_NAME_LEN: usize = 255;

/// An open data directory. Cheap to share: clone the `Tree` handles it gives out, or wrap
/// it in an `Arc`. Closing writes every page back; dropping the last handle closes too.
#[derive(Debug)]
pub struct Db {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    dir: PathBuf,
    pool: Arc<BufferPool>,
    /// The task workers, if any were asked for; stopped at close.
    workers: Mutex<Option<Workers>>,
    /// The engine the workers use.
    engine: Mutex<Option<crate::io::EngineKind>>,
    catalog: BTree,
    /// The last superblock written; the next write bumps its sequence.
    superblock: Mutex<Superblock>,
    /// What is wrong with the other superblock copy, if it is damaged (for `check`); the
    /// next superblock write replaces that copy.
    superblock_damage: Mutex<Option<String>>,
    next_tree_id: AtomicU64,
    /// Serialises opening, creating and dropping trees (never taken by reads or writes of keys).
    catalog_lock: Mutex<()>,
    /// One "dropped" flag per tree with open handles, shared by those handles.
    dropped_flags: Mutex<HashMap<u64, Arc<AtomicBool>>>,
    closed: AtomicBool,
    read_only: bool,
    /// Holds the directory's lock; released at close even if handles live on.
    lock: Mutex<Option<lock::DirLock>>,
    /// The write-ahead log (`None` when opened read-only).
    log: Option<Arc<Log>>,
    commit_lock: CommitLock,
    durability: Durability,
    checkpoint_log_bytes: u64,
    /// Redo LSN of the last checkpoint.
    checkpoint_redo: AtomicU64,
    /// One checkpoint at a time.
    checkpoint_lock: Mutex<()>,
    checkpointing: AtomicBool,
    /// Puts into leaves not in memory, waiting for their leaves (`btree/buffered.rs`).
    buffer: Arc<ChangeBuffer>,
    /// Whether the pool was asked to lend its flex frames to the change buffer.
    buffer_lent: AtomicBool,
    /// Threads running a checkpoint, or flushing the log periodically; joined at close.
    helpers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    recovery: RecoveryReport,
    /// Where the page file and the log live.
    storage: Arc<dyn crate::io::Storage>,
}

/// Log bytes buffered before a commit that does not wait for the log writes them anyway.
const LOG_BUFFER_FLUSH_BYTES: u64 = 4 << 20;

/// Changes to one or more trees, committed all together or not at all ([`Db::write`]).
#[derive(Debug, Default, Clone)]
pub struct WriteBatch {
    ops: Vec<(Tree, BatchOp)>,
    durability: Option<Durability>,
}

#[derive(Debug, Clone)]
enum BatchOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

impl BatchOp {
    fn key(&self) -> &[u8] {
        let (BatchOp::Put(key, _) | BatchOp::Delete(key)) = self;
        key
    }
}

/// Applies `ops` in order, inside a commit.
fn apply_ops(ops: &[(Tree, BatchOp)]) -> Result<()> {
    for (tree, op) in ops {
        match op {
            BatchOp::Put(key, value) => tree.apply_put(key, value)?,
            BatchOp::Delete(key) => {
                tree.apply_delete(key)?;
            }
        }
    }
    Ok(())
}

/// [`apply_ops`] for a task.
async fn apply_ops_async(ops: &[(Tree, BatchOp)]) -> Result<()> {
    for (tree, op) in ops {
        match op {
            BatchOp::Put(key, value) => tree.apply_put_async(key, value).await?,
            BatchOp::Delete(key) => {
                tree.apply_delete_async(key).await?;
            }
        }
    }
    Ok(())
}

impl WriteBatch {
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds: set `key` of `tree` to `value`.
    pub fn put(&mut self, tree: &Tree, key: &[u8], value: &[u8]) -> &mut Self {
        self.ops.push((tree.clone(), BatchOp::Put(key.to_vec(), value.to_vec())));
        self
    }

    /// Adds: remove `key` from `tree`.
    pub fn delete(&mut self, tree: &Tree, key: &[u8]) -> &mut Self {
        self.ops.push((tree.clone(), BatchOp::Delete(key.to_vec())));
        self
    }

    /// This batch's durability, instead of the database's (`Options::durability`).
    pub fn durability(&mut self, durability: Durability) -> &mut Self {
        self.durability = Some(durability);
        self
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// A named tree: an ordered map from keys (1 to `MAX_KEY_LEN` bytes) to values (0 to
/// `MAX_VALUE_LEN` bytes). Handles are cheap to clone and `Send + Sync`.
#[derive(Debug, Clone)]
pub struct Tree {
    shared: Arc<Shared>,
    btree: BTree,
    name: Arc<str>,
    /// Set when the tree is dropped: every later attempt fails with `TreeNotFound`.
    dropped: Arc<AtomicBool>,
}

/// Numbers describing an open database.
#[derive(Debug, Clone)]
pub struct DbStats {
    pub pool: PoolStats,
    pub trees: usize,
    pub file_bytes: u64,
}

/// What [`Db::check`] verified.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    pub page_count: u64,
    pub free_pages: u64,
    pub catalog: TreeReport,
    pub trees: Vec<(String, TreeReport)>,
    /// Faults outside any one tree (page accounting, catalog entries, change buffer entries
    /// of no tree).
    pub faults: Vec<String>,
}

impl CheckReport {
    /// Every fault found, anywhere.
    pub fn all_faults(&self) -> Vec<String> {
        let mut all = self.faults.clone();
        all.extend(self.catalog.faults.iter().cloned());
        for (name, report) in &self.trees {
            all.extend(report.faults.iter().map(|f| format!("tree {name:?}: {f}")));
        }
        all
    }
    pub fn is_ok(&self) -> bool {
        self.all_faults().is_empty()
    }
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::KeyEmpty);
    }
    if key.len() > MAX_KEY_LEN {
        return Err(Error::KeyTooLarge { len: key.len(), max: MAX_KEY_LEN });
    }
    Ok(())
}

fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_LEN {
        return Err(Error::ValueTooLarge { len: value.len(), max: MAX_VALUE_LEN });
    }
    Ok(())
}

fn check_tree_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "names must not be empty"
    } else if name.len() > MAX_TREE_NAME_LEN {
        "names are at most 255 bytes"
    } else {
        return Ok(());
    };
    Err(Error::BadTreeName { name: name.to_owned(), reason })
}

fn not_a_database(path: &Path, reason: impl Into<String>) -> Error {
    Error::NotADatabase { path: path.to_owned(), reason: reason.into() }
}

fn encode_catalog_entry(tree: BTree) -> [u8; 16] {
    let mut entry = [0u8; 16];
    entry[..8].copy_from_slice(&tree.root.to_le_bytes());
    entry[8..].copy_from_slice(&tree.tree_id.to_le_bytes());
    entry
}

fn decode_catalog_entry(bytes: &[u8]) -> Option<BTree> {
    (bytes.len() == 16).then(|| BTree { root: read_u64(bytes, 0), tree_id: read_u64(bytes, 8) })
}

fn write_page_direct(file: &PageFile, page_id: PageId, fill: impl FnOnce(&mut [u8])) -> Result<()> {
    let mut buf = AlignedPage::zeroed();
    fill(buf.bytes_mut());
    file.write_page(page_id, buf.bytes())
}

fn read_page_direct(file: &PageFile, page_id: PageId) -> Result<AlignedPage> {
    let mut buf = AlignedPage::zeroed();
    file.read_page(page_id, buf.bytes_mut())?;
    Ok(buf)
}

impl Db {
    /// The data directory.
    pub fn path(&self) -> &Path {
        &self.shared.dir
    }

    /// Creates tree `name`; `Error::TreeExists` if it exists.
    pub fn create_tree(&self, name: &str) -> Result<Tree> {
        self.shared.check_writable()?;
        check_tree_name(name)?;
        let _guard = self.shared.catalog_lock.lock().unwrap();
        if self.shared.lookup_tree(name)?.is_some() {
            return Err(Error::TreeExists { name: name.to_owned() });
        }
        let pool = &self.shared.pool;
        let catalog = self.shared.catalog;
        let btree = self.shared.commit(self.shared.durability, || {
            let tree_id = self.shared.next_tree_id.fetch_add(1, Ordering::AcqRel);
            let btree = {
                let mut root = pool.allocate()?;
                let root_id = root.page_id();
                BTree::init_root(root.page_mut(), root_id, tree_id);
                BTree { root: root_id, tree_id }
            };
            let entry = encode_catalog_entry(btree);
            run(pool, |scratch| catalog.put(pool, name.as_bytes(), &entry, scratch))?;
            Ok(btree)
        })?;
        Ok(self.shared.handle(name, btree))
    }

    /// Opens tree `name`; `Error::TreeNotFound` if there is none.
    pub fn open_tree(&self, name: &str) -> Result<Tree> {
        self.shared.check_open()?;
        check_tree_name(name)?;
        let _guard = self.shared.catalog_lock.lock().unwrap();
        match self.shared.lookup_tree(name)? {
            Some(btree) => Ok(self.shared.handle(name, btree)),
            None => Err(Error::TreeNotFound { name: name.to_owned() }),
        }
    }

    /// Opens tree `name`, creating it if need be.
    pub fn tree(&self, name: &str) -> Result<Tree> {
        match self.open_tree(name) {
            Err(Error::TreeNotFound { .. }) => match self.create_tree(name) {
                Err(Error::TreeExists { .. }) => self.open_tree(name),
                other => other,
            },
            other => other,
        }
    }

    /// Removes tree `name` and frees its pages. Handles to it fail with `TreeNotFound` after.
    pub fn drop_tree(&self, name: &str) -> Result<()> {
        self.shared.check_writable()?;
        check_tree_name(name)?;
        let _guard = self.shared.catalog_lock.lock().unwrap();
        let Some(btree) = self.shared.lookup_tree(name)? else {
            return Err(Error::TreeNotFound { name: name.to_owned() });
        };
        let pool = &self.shared.pool;
        let catalog = self.shared.catalog;
        self.shared.commit(self.shared.durability, || {
            let (_, merge) = run(pool, |scratch| catalog.delete(pool, name.as_bytes(), scratch))?;
            if let Some(leaf) = merge {
                run(pool, |scratch| catalog.try_merge(pool, leaf, name.as_bytes(), scratch))?;
            }
            if let Some(flag) = self.shared.dropped_flags.lock().unwrap().remove(&btree.tree_id) {
                flag.store(true, Ordering::Release);
            }
            for key in self.shared.buffer.keys_of(btree.tree_id) {
                self.shared.buffer.stage_remove(btree.tree_id, &key);
            }
            self.shared.free_tree_pages(btree)
        })
    }

    /// The names of all trees, in order.
    pub fn tree_names(&self) -> Result<Vec<String>> {
        self.shared.check_open()?;
        Ok(self.shared.catalog_entries()?.into_iter().map(|(name, _)| name).collect())
    }

    pub fn stats(&self) -> Result<DbStats> {
        Ok(DbStats {
            pool: self.shared.pool.stats(),
            trees: self.tree_names()?.len(),
            file_bytes: self.shared.pool.file().size_pages() * PAGE_SIZE as u64,
        })
    }

    /// Walks the catalog and every tree, verifying checksums, structure and page accounting
    /// (each page used once or free, none lost). Meant for a database nobody is changing.
    pub fn check(&self) -> Result<CheckReport> {
        self.shared.check_open()?;
        let pool = &self.shared.pool;
        let page_count = pool.page_count();
        let mut pages = PageMap::new(page_count);
        let mut report = CheckReport { page_count, ..CheckReport::default() };
        for id in SUPERBLOCK_PAGES {
            pages.claim(id, check::USED);
        }
        if let Some(damage) = self.shared.superblock_damage.lock().unwrap().clone() {
            report.faults.push(damage);
        }
        report.catalog = check::check_tree(pool, self.shared.catalog, &mut pages);
        let mut buffered = self.shared.buffer.counts_by_tree();
        match self.shared.catalog_entries() {
            Ok(entries) => {
                for (name, entry) in entries {
                    match entry {
                        Some(btree) => {
                            let mut tree_report = check::check_tree(pool, btree, &mut pages);
                            tree_report.buffered =
                                buffered.remove(&btree.tree_id).unwrap_or_default();
                            report.trees.push((name, tree_report));
                        }
                        None => report.faults.push(format!("catalog entry {name:?} is malformed")),
                    }
                }
            }
            Err(e) => report.faults.push(format!("reading the catalog failed: {e}")),
        }
        for (tree_id, entries) in buffered {
            report.faults.push(format!(
                "the change buffer holds {entries} entries of tree id {tree_id}, which no \
                 catalog entry names"
            ));
        }
        let free = pool.free_pages();
        report.free_pages = free.len() as u64;
        for id in free {
            if let Some(fault) = pages.claim(id, check::FREE) {
                report.faults.push(fault);
            }
        }
        for id in pages.lost() {
            report.faults.push(format!("page {id} is neither in use nor free (lost)"));
        }
        Ok(report)
    }

    /// After an unclean shutdown: every page no tree reaches is free.
    /// Lets running tasks finish, writes every page back and marks the directory cleanly
    /// closed. Dropping the `Db` does the same, reporting a failure on stderr.
    pub fn close(self) -> Result<()> {
        self.shared.close()
    }

    /// Applies every change of `batch` (to any trees of this database) as one commit: after
    /// a crash, all of them or none. Returns once the batch is as durable as its durability
    /// (or the database's) asks.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        let shared = &self.shared;
        shared.check_batch(batch)?;
        let durability = batch.durability.unwrap_or(shared.durability);
        for (tree, op) in &batch.ops {
            tree.prefetch(op.key());
        }
        shared.commit(durability, || apply_ops(&batch.ops))
    }

    /// Starts a transaction over any trees of this database: reads that see its own
    /// writes, and a commit that applies the writes only if nothing it read changed
    /// meanwhile ([`Error::Conflict`] otherwise). See [`Transaction`].
    pub fn transaction(&self) -> Transaction {
        Transaction::new(Arc::clone(&self.shared))
    }

    /// [`Db::write`] as a future (for tasks: waiting for the commit lock or the log yields).
    pub async fn write_async(&self, batch: &WriteBatch) -> Result<()> {
        let shared = &self.shared;
        shared.check_batch(batch)?;
        let durability = batch.durability.unwrap_or(shared.durability);
        for (tree, op) in &batch.ops {
            tree.prefetch_async(op.key()).await;
        }
        let guard = shared.begin_commit_async().await?;
        let outcome = apply_ops_async(&batch.ops).await;
        let (value, end) = shared.end_commit(outcome)?;
        drop(guard);
        shared.after_commit_async(end, durability).await?;
        Ok(value)
    }

    /// Writes every changed page and a checkpoint record, so that recovery starts from here
    /// and older log segments are reused. Runs on its own when the log grew by
    /// `Options::checkpoint_log_bytes`.
    pub fn checkpoint(&self) -> Result<()> {
        self.shared.check_writable()?;
        if crate::sched::on_worker() {
            // It takes the commit lock blocking, which a task of this worker may hold.
            return Err(Error::BlockingWriteInTask);
        }
        self.shared.checkpoint()
    }

    /// Gives the database up as a crash would (for tests on a simulated disk, crashed just
    /// before): the workers stop, nothing more is written, the directory lock is released.
    #[doc(hidden)]
    pub fn abandon(self) {
        let workers = self.shared.workers.lock().unwrap().take();
        self.shared.closed.store(true, Ordering::Release);
        if let Some(mut workers) = workers {
            workers.shut_down();
        }
        for helper in std::mem::take(&mut *self.shared.helpers.lock().unwrap()) {
            let _ = helper.join();
        }
        if let Some(log) = &self.shared.log {
            log.join_helpers();
        }
        self.shared.lock.lock().unwrap().take();
    }

    /// Verifies the log (read-only): every record a recovery would replay, from the last
    /// checkpoint's redo position to the end. `None` if the directory has no log yet.
    pub fn check_log(&self) -> Result<Option<crate::wal::recover::LogReport>> {
        self.shared.check_open()?;
        let checkpoint_lsn = self.shared.superblock.lock().unwrap().checkpoint_lsn;
        if checkpoint_lsn == NO_CHECKPOINT {
            return Ok(None);
        }
        crate::wal::recover::check_log(self.shared.storage.as_ref(), checkpoint_lsn).map(Some)
    }

    /// Entries the change buffer holds (puts waiting for their leaves), and the bytes they
    /// count against its budget (`Options::change_buffer_bytes`).
    pub fn change_buffer(&self) -> (usize, u64) {
        (self.shared.buffer.len(), self.shared.buffer.bytes())
    }

    /// Drains of the change buffer since open (each moves the buffered entries of one leaf
    /// into it; `ChangeBuffer::next_victim` picks the leaf), and the entries they moved.
    pub fn change_buffer_drains(&self) -> (u64, u64) {
        self.shared.buffer.drain_counts()
    }

    /// The most the change buffer may hold, in bytes (0: off).
    pub fn change_buffer_budget(&self) -> u64 {
        self.shared.buffer.budget()
    }

    /// What recovery did when this database was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.shared.recovery
    }

    /// The write-ahead log, for tools and benchmarks (`None` when opened read-only).
    #[doc(hidden)]
    pub fn log(&self) -> Option<&Arc<Log>> {
        self.shared.log.as_ref()
    }

    /// The buffer pool, for benchmarks and tools.
    #[doc(hidden)]
    pub fn pool(&self) -> &BufferPool {
        &self.shared.pool
    }

    /// Runs `future` as a task on one of the workers (see `Options::workers`); the handle
    /// is a future of its output, or blocks for it with `wait()`. Inside the task, the
    /// `*_async` calls of `Tree` turn misses into queued reads instead of blocking.
    pub fn spawn<F, T>(&self, future: F) -> Result<TaskHandle<T>>
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        self.shared.check_open()?;
        match self.shared.workers.lock().unwrap().as_ref() {
            Some(workers) => Ok(workers.spawn(future)),
            None => Err(Error::NoWorkers),
        }
    }

    /// The engine the workers issue their I/O with (after any fallback), if there are workers.
    pub fn engine(&self) -> Option<crate::io::EngineKind> {
        *self.shared.engine.lock().unwrap()
    }

    /// How many workers run tasks.
    pub fn worker_count(&self) -> usize {
        self.shared.workers.lock().unwrap().as_ref().map_or(0, Workers::count)
    }

    /// Where each worker's time went so far, for benchmarks.
    pub fn worker_stats(&self) -> Vec<Arc<WorkerStats>> {
        let workers = self.shared.workers.lock().unwrap();
        workers.as_ref().map(|w| w.stats().to_vec()).unwrap_or_default()
    }
}

impl Shared {
    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// A handle on `btree`; the caller holds the catalog lock.
    fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }

    /// Every catalog entry: name and tree (`None` when malformed).
    fn catalog_entries(&self) -> Result<Vec<(String, Option<BTree>)>> {
        let mut cursor = Cursor::new(self.catalog, Bound::Unbounded, Bound::Unbounded, false);
        let mut entries = Vec::new();
        while let Some((key, value)) = cursor.next(&self.pool).map_err(|e| self.catalog_error(e))? {
            let name = String::from_utf8_lossy(&key).into_owned();
            entries.push((name, decode_catalog_entry(&value)));
        }
        Ok(entries)
    }

    /// An error reading the catalog: the catalog is never dropped, so where a tree would be
    /// "not found" (its root is not a node of it) the catalog's root page is damaged.
    fn catalog_error(&self, e: Error) -> Error {
        match e {
            Error::TreeNotFound { .. } => Error::Corrupt {
                page: self.catalog.root,
                file: self.pool.file().path().to_owned(),
                reason: "the catalog's root page is not a node of the catalog".into(),
            },
            e => e,
        }
    }

    fn handle(self: &Arc<Self>, name: &str, btree: BTree) -> Tree {
        let mut flags = self.dropped_flags.lock().unwrap();
        let dropped = Arc::clone(flags.entry(btree.tree_id).or_default());
        Tree { shared: Arc::clone(self), btree, name: name.into(), dropped }
    }

    fn lookup_tree(&self, name: &str) -> Result<Option<BTree>> {
        let pool = &self.pool;
        let catalog = self.catalog;
        let entry = run(pool, |scratch| {
            catalog.get(pool, name.as_bytes(), scratch, &mut |bytes: &[u8]| bytes.to_vec())
        })
        .map_err(|e| self.catalog_error(e))?;
        match entry {
            None => Ok(None),
            Some(bytes) => decode_catalog_entry(&bytes).map(Some).ok_or_else(|| Error::Corrupt {
                page: catalog.root,
                file: pool.file().path().to_owned(),
                reason: format!("catalog entry for {name:?} is malformed"),
            }),
        }
    }

    /// Frees every page of a tree already removed from the catalog, root first, so that
    /// handles still in use fail cleanly instead of reading reused pages.
    fn free_tree_pages(&self, btree: BTree) -> Result<()> {
        use crate::btree::node::{Node, Payload};
        let pool = &self.pool;
        let mut pending = vec![btree.root];
        while let Some(page_id) = pending.pop() {
            let copy = check::read_page(pool, page_id)?;
            let node = Node::new(copy.bytes());
            if node.tree_id() != btree.tree_id {
                return Err(check::corrupt(pool, page_id, "not a node of the dropped tree".into()));
            }
            if node.is_leaf() {
                for slot in 0..node.count() {
                    if let Payload::OutOfLine(value_page) = node.value(slot) {
                        pool.free_by_id(value_page)?;
                    }
                }
            } else {
                pending.extend((0..=node.count()).map(|i| node.child(i)));
            }
            pool.free_by_id(page_id)?;
        }
        Ok(())
    }

    fn log(&self) -> Result<&Arc<Log>> {
        self.log.as_ref().ok_or(Error::ReadOnly)
    }

    fn check_batch(&self, batch: &WriteBatch) -> Result<()> {
        self.check_writable()?;
        self.log()?.check()?;
        // Every page a commit changes stays in the pool until its record is logged (a change
        // pins its leaf, perhaps a Value page and a split's pages): a quarter of the pool
        // per change leaves room for the reads the changes need meanwhile.
        let pool_pages = self.pool.pool_pages();
        let max_ops = (pool_pages / 4).max(1) as usize;
        if batch.ops.len() > max_ops {
            return Err(Error::BatchTooLarge { ops: batch.ops.len(), max_ops, pool_pages });
        }
        for (tree, op) in &batch.ops {
            if !std::ptr::eq(Arc::as_ptr(&tree.shared), self) {
                return Err(Error::BadOptions {
                    reason: format!(
                        "tree {:?} of the batch belongs to another database",
                        tree.name
                    ),
                });
            }
            if tree.dropped.load(Ordering::Acquire) {
                return Err(Error::TreeNotFound { name: tree.name.to_string() });
            }
            match op {
                BatchOp::Put(key, value) => {
                    check_key(key)?;
                    check_value(value)?;
                }
                BatchOp::Delete(key) => check_key(key)?,
            }
        }
        Ok(())
    }

    /// Runs `body` as one commit (blocking): its changes are captured, logged as one record,
    /// and (with `Durability::Sync`) synced before returning.
    fn commit<T>(
        self: &Arc<Self>,
        durability: Durability,
        body: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        self.check_writable()?;
        if crate::sched::on_worker() {
            // Blocking a worker on the commit lock or the log could wait for a task or a
            // flush that only this worker runs.
            return Err(Error::BlockingWriteInTask);
        }
        let log = self.log()?;
        log.check()?;
        let guard = self.commit_lock.lock();
        self.pool.begin_capture();
        let (value, end) = self.end_commit(body())?;
        drop(guard);
        if let Some(end) = end {
            match durability {
                Durability::Sync => log.flush(end)?,
                _ if end.saturating_sub(log.durable()) > LOG_BUFFER_FLUSH_BYTES => {
                    log.flush(end)?
                }
                _ => {}
            }
        }
        self.maybe_checkpoint();
        Ok(value)
    }

    /// Takes the commit lock for a task and starts capturing.
    async fn begin_commit_async(&self) -> Result<crate::wal::commit::CommitGuard<'_>> {
        self.check_writable()?;
        self.log()?.check()?;
        let guard = self.commit_lock.lock_async().await;
        self.pool.begin_capture();
        Ok(guard)
    }

    /// Ends the capture of a commit whose changes were `outcome`: appends its record and
    /// gives its pages the record's LSN. Returns the LSN the log must reach for it to be
    /// durable (for a commit that changed nothing, the log's tail: it is durable once every
    /// commit before it is). A commit that failed after changing pages leaves
    /// changes no record describes: the log is failed, the database must be reopened.
    fn end_commit<T>(&self, outcome: Result<T>) -> Result<(T, Option<u64>)> {
        let log = self.log()?;
        // The commit's changes to the change buffer: logged with its pages, applied once
        // logged (a failed commit's are dropped: the buffer never saw them).
        let buffered = self.buffer.take_staged();
        let value = match outcome {
            Ok(value) => value,
            Err(e) => {
                if self.pool.abandon_capture() {
                    log.fail(format!("a commit failed after changing pages: {e}"));
                }
                return Err(e);
            }
        };
        let next_tree_id = self.next_tree_id.load(Ordering::Acquire);
        let (record, pages) = match self.pool.finish_capture(next_tree_id) {
            Some(captured) => captured,
            // Nothing changed; a commit that waits still waits for every commit before it.
            None if buffered.is_empty() => return Ok((value, Some(log.tail()))),
            None => {
                let mut w = RecordWriter::new(KIND_COMMIT);
                w.u64(next_tree_id);
                w.u32(0);
                (w.bytes, Vec::new())
            }
        };
        let mut w = RecordWriter { bytes: record };
        push_buffered(&mut w, &buffered);
        let (lsn, end) = log.append(&mut w.bytes)?;
        self.pool.stamp(&pages, lsn);
        self.buffer.apply(&buffered);
        Ok((value, Some(end)))
    }

    async fn after_commit_async(
        self: &Arc<Self>,
        end: Option<u64>,
        durability: Durability,
    ) -> Result<()> {
        let log = self.log()?;
        if let Some(end) = end {
            match durability {
                Durability::Sync => log.wait_durable(end).await?,
                _ if end.saturating_sub(log.durable()) > LOG_BUFFER_FLUSH_BYTES => {
                    log.wait_durable(end).await?
                }
                _ => {}
            }
        }
        self.maybe_checkpoint();
        Ok(())
    }

    /// The bytes the change buffer may hold now: what the flex frames lent to it hold, at
    /// most its budget. Its memory comes out of the pool's frames only as it fills.
    fn buffer_allowed(&self) -> u64 {
        (self.pool.retired_frames() * PAGE_SIZE as u64).min(self.buffer.budget())
    }

    /// Whether the change buffer holds more than it may: time to drain.
    fn buffer_over_budget(&self) -> bool {
        self.buffer.bytes() > self.buffer_allowed()
    }

    /// Before the change buffer takes a put of `cost` bytes: if it does not fit in the
    /// frames lent to the buffer, the flex frames are asked for (they retire as eviction
    /// frees them; a drain keeps the buffer within what they hold meanwhile). A flex frame
    /// whose page eviction never frees is not lent.
    fn buffer_makes_room(&self, cost: u64) {
        // Asked once per open: after that, every put gets here for a load and nothing more.
        if !self.buffer_lent.load(Ordering::Acquire)
            && self.buffer.bytes() + cost > self.buffer_allowed()
        {
            self.lend_frames_to_buffer();
        }
    }

    /// Asks the pool for every flex frame for the change buffer (once: they stay lent until
    /// the database is closed).
    fn lend_frames_to_buffer(&self) {
        if !self.buffer_lent.load(Ordering::Acquire)
            && !self.buffer_lent.swap(true, Ordering::AcqRel)
        {
            self.pool.retire_flex_frames(self.pool.flex_frames());
        }
    }

    /// Drains the change buffer's next victim (`ChangeBuffer::next_victim`: the sweep)
    /// into its leaf, for a committer that pushed the buffer over its budget: the leaf is
    /// read outside the commit lock, then its buffered entries are put into it in one
    /// commit that needs no sync (the puts it moves are durable already).
    fn drain_next(self: &Arc<Self>) -> Result<()> {
        match self.next_victim() {
            Some(victim) => self.drain(victim),
            None => Ok(()),
        }
    }

    /// Drains the leaf of `victim` (a tree and a key in the buffer); see `drain_next`.
    fn drain(self: &Arc<Self>, (btree, key): (BTree, Vec<u8>)) -> Result<()> {
        let pool = &self.pool;
        let _ = run(pool, |scratch| btree.get(pool, &key, scratch, &mut |_: &[u8]| ()));
        let drained = self.commit(Durability::None, || {
            // Under the commit lock: a victim that left the buffer meanwhile (drained,
            // changed, or its tree dropped) leaves nothing to do.
            if self.buffer.get(btree.tree_id, &key).is_none() {
                return Ok(0);
            }
            let (low, high) = run(pool, |scratch| leaf_range(btree, pool, &key, scratch))?;
            let entries = self.buffer.range(btree.tree_id, as_slice(&low), as_slice(&high));
            for (key, value) in &entries {
                self.buffer.stage_remove(btree.tree_id, key);
                run(pool, |scratch| btree.put(pool, key, value, scratch))?;
            }
            Ok(entries.len())
        })?;
        self.buffer.count_drain(drained);
        Ok(())
    }

    /// [`Shared::drain_next`] for a task.
    async fn drain_next_async(self: &Arc<Self>) -> Result<()> {
        match self.next_victim() {
            Some(victim) => self.drain_async(victim).await,
            None => Ok(()),
        }
    }

    /// [`Shared::drain`] for a task.
    async fn drain_async(self: &Arc<Self>, (btree, key): (BTree, Vec<u8>)) -> Result<()> {
        let pool = &self.pool;
        let _ = crate::sched::run_async_with(pool, true, |scratch| {
            btree.get(pool, &key, scratch, &mut |_: &[u8]| ())
        })
        .await;
        let guard = self.begin_commit_async().await?;
        let outcome = async {
            // Under the commit lock: a victim that left the buffer meanwhile (drained,
            // changed, or its tree dropped) leaves nothing to do.
            if self.buffer.get(btree.tree_id, &key).is_none() {
                return Ok(0);
            }
            let (low, high) = crate::sched::run_async_with(pool, false, |scratch| {
                leaf_range(btree, pool, &key, scratch)
            })
            .await?;
            let entries = self.buffer.range(btree.tree_id, as_slice(&low), as_slice(&high));
            for (key, value) in &entries {
                self.buffer.stage_remove(btree.tree_id, key);
                crate::sched::run_async_with(pool, false, |scratch| {
                    btree.put(pool, key, value, scratch)
                })
                .await?;
            }
            Ok(entries.len())
        }
        .await;
        let (drained, end) = self.end_commit(outcome)?;
        drop(guard);
        self.buffer.count_drain(drained);
        self.after_commit_async(end, Durability::None).await
    }

    /// The change buffer's next victim, the sweep moved past its leaf (whose upper bound
    /// the leaf's parent gives, in memory as inner nodes are; without it, past the victim).
    fn next_victim(&self) -> Option<(BTree, Vec<u8>)> {
        let pool = &self.pool;
        self.buffer.next_victim(|btree, key| {
            with_scratch(|scratch| {
                let page = &mut scratch.pages[0];
                // A few tries past restarts; a miss (a parent not in memory) gives up.
                (0..4).find_map(|_| btree.leaf_upper_bound(pool, key, page).ok())
            })
        })
    }

    /// Starts a checkpoint on a thread of its own once the log grew enough since the last.
    fn maybe_checkpoint(self: &Arc<Self>) {
        let Some(log) = &self.log else { return };
        let since = log.tail().saturating_sub(self.checkpoint_redo.load(Ordering::Acquire));
        if since < self.checkpoint_log_bytes || self.checkpointing.swap(true, Ordering::AcqRel) {
            return;
        }
        let shared = Arc::clone(self);
        let spawned =
            std::thread::Builder::new().name("ferrite-checkpoint".into()).spawn(move || {
                if let Err(e) = shared.checkpoint() {
                    if let Some(log) = &shared.log {
                        log.fail(format!("a checkpoint failed: {e}"));
                    }
                }
                shared.checkpointing.store(false, Ordering::Release);
            });
        match spawned {
            Ok(handle) => {
                let mut helpers = self.helpers.lock().unwrap();
                helpers.retain(|h| !h.is_finished());
                helpers.push(handle);
            }
            Err(_) => self.checkpointing.store(false, Ordering::Release),
        }
    }

    /// Writes every dirty page, then a checkpoint record, then points the superblock at it;
    /// log segments before its redo LSN are then free to reuse. Commits go on meanwhile:
    /// they are held only while the redo LSN and the allocator's state are read.
    fn checkpoint(&self) -> Result<()> {
        let _one = self.checkpoint_lock.lock().unwrap();
        let log = self.log()?;
        log.check()?;
        let pool = &self.pool;
        let (epoch, mut snapshot) = {
            let _commit = self.commit_lock.lock();
            // The redo LSN before the epoch: an image counted for this epoch follows it.
            let redo_lsn = log.tail();
            let epoch = pool.start_epoch();
            let snapshot = Checkpoint {
                redo_lsn,
                page_count: pool.page_count(),
                next_tree_id: self.next_tree_id.load(Ordering::Acquire),
                catalog_root: self.catalog.root,
                free: pool.free_pages(),
                buffered: Vec::new(),
            };
            (epoch, snapshot)
        };
        // The change buffer is copied after the redo LSN is fixed, without the commit lock
        // (`ChangeBuffer::snapshot` says why that is enough).
        snapshot.buffered = self.buffer.snapshot();
        pool.flush_all()?;
        let mut record = encode_checkpoint(&snapshot);
        let (lsn, end) = log.append(&mut record)?;
        log.flush(end)?;
        let written = self.write_superblock(|sb| {
            sb.checkpoint_lsn = lsn;
            sb.page_count = snapshot.page_count;
            sb.next_tree_id = snapshot.next_tree_id;
        });
        if let Err(e) = written {
            log.fail(format!("writing the superblock failed: {e}"));
            return Err(e);
        }
        pool.complete_epoch(epoch);
        log.release_before(snapshot.redo_lsn);
        self.checkpoint_redo.store(snapshot.redo_lsn, Ordering::Release);
        Ok(())
    }

    /// Puts every entry of the change buffer into its leaf, a few hundred per commit (blocking
    /// reads: at close, after the workers stopped).
    fn drain_all(&self) -> Result<()> {
        if self.log.is_none() {
            return Ok(());
        }
        // Each commit pins the pages it changes until its record is appended.
        let per_commit = (self.pool.pool_pages() / 8).clamp(1, 256) as usize;
        while !self.buffer.is_empty() {
            let entries = self.buffer.first(per_commit);
            let _guard = self.commit_lock.lock();
            self.pool.begin_capture();
            let outcome = entries.iter().try_for_each(|(tree, key, value)| {
                let Some(tree) = tree else {
                    return Err(Error::Corrupt {
                        page: 0,
                        file: self.dir.clone(),
                        reason: "the change buffer holds a key of a tree the catalog lacks".into(),
                    });
                };
                self.buffer.stage_remove(tree.tree_id, key);
                run(&self.pool, |scratch| tree.put(&self.pool, key, value, scratch))
            });
            self.end_commit(outcome)?;
        }
        Ok(())
    }

    /// The body of the periodic flush thread (`Durability::Periodic`).
    fn flush_periodically(&self, interval: std::time::Duration) {
        let step = interval.min(std::time::Duration::from_millis(10));
        let mut last = std::time::Instant::now();
        while !self.closed.load(Ordering::Acquire) {
            std::thread::sleep(step);
            if last.elapsed() < interval {
                continue;
            }
            last = std::time::Instant::now();
            if let Some(log) = &self.log {
                if log.has_unflushed() && log.flush(log.tail()).is_err() {
                    return;
                }
            }
        }
    }

    fn close(&self) -> Result<()> {
        // Tasks finish (their trees still usable) and their I/O completes before anything
        // is written back.
        let workers = self.workers.lock().unwrap().take();
        if let Some(mut workers) = workers {
            workers.shut_down();
        }
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if self.read_only {
            self.lock.lock().unwrap().take();
            return Ok(());
        }
        for helper in std::mem::take(&mut *self.helpers.lock().unwrap()) {
            let _ = helper.join();
        }
        // Every buffered put goes into its leaf: a closed directory needs no log.
        self.drain_all()?;
        // A last checkpoint writes every page back: the next open replays nothing.
        self.checkpoint()?;
        if let Some(log) = &self.log {
            log.join_helpers();
        }
        self.write_superblock(|sb| sb.clean = true)?;
        self.lock.lock().unwrap().take();
        Ok(())
    }

    /// Writes the next superblock (the other copy: a torn write never loses both), changed
    /// by `update`, and syncs the page file.
    fn write_superblock(&self, update: impl FnOnce(&mut Superblock)) -> Result<()> {
        let mut sb = self.superblock.lock().unwrap();
        let mut next = sb.clone();
        next.sequence += 1;
        update(&mut next);
        let file = self.pool.file();
        write_page_direct(file, next.page_id(), |page| next.encode(page))?;
        file.sync()?;
        *sb = next;
        // The copy written is the one that was damaged, if one was (see `open.rs`).
        self.superblock_damage.lock().unwrap().take();
        Ok(())
    }
}

impl Drop for Db {
    /// Dropping the `Db` closes it (tree handles still alive then fail with `Closed`).
    fn drop(&mut self) {
        if let Err(e) = self.shared.close() {
            eprintln!("ferrite: closing {} failed: {e}", self.shared.dir.display());
        }
    }
}

/// A leaf's finding as "in memory or not": a miss is `false`, not a read.
fn in_memory(found: crate::buffer::Attempt<(PageId, u64)>) -> crate::buffer::Attempt<bool> {
    match found {
        Ok(_) => Ok(true),
        Err(Interrupt::Miss(_)) => Ok(false),
        Err(other) => Err(other),
    }
}

/// A range of keys: its low and high bounds.
type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// The key range of the leaf that holds `key`, as bounds (`iter::key_range`).
fn leaf_range(
    btree: BTree,
    pool: &BufferPool,
    key: &[u8],
    scratch: &mut crate::btree::Scratch,
) -> crate::buffer::Attempt<KeyRange> {
    let page = &mut scratch.pages[0];
    btree.leaf_copy(pool, key, page)?;
    Ok(key_range(crate::btree::node::Node::new(page.bytes())))
}

fn to_owned_bound(bound: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match bound {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// An error of an operation on tree `name` (root page `root`) as its caller sees it: "not
/// found" names the tree when it was dropped; when it was not, its root page is not a node
/// of it (the btree cannot tell a dropped tree from a damaged root): damage.
fn tree_error(
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

impl Tree {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This tree's view of an error (see [`tree_error`]).
    fn error(&self, e: Error) -> Error {
        tree_error(e, &self.name, &self.dropped, self.btree.root, &self.shared.pool)
    }

    /// Runs one operation to its end, naming this tree in a `TreeNotFound`.
    fn run<T>(
        &self,
        mut attempt: impl FnMut(&BufferPool, &mut crate::btree::Scratch) -> crate::buffer::Attempt<T>,
    ) -> Result<T> {
        self.shared.check_open()?;
        let pool = &self.shared.pool;
        let dropped = &self.dropped;
        run(pool, |scratch| {
            if dropped.load(Ordering::Acquire) {
                return Err(Interrupt::Error(Error::TreeNotFound { name: String::new() }));
            }
            attempt(pool, scratch)
        })
        .map_err(|e| self.error(e))
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |value| value.to_vec())
    }

    /// Calls `read` with the value of `key` (without copying it out), if present.
    pub fn get_with<R>(&self, key: &[u8], mut read: impl FnMut(&[u8]) -> R) -> Result<Option<R>> {
        check_key(key)?;
        if let Some(value) = self.buffered(key)? {
            return Ok(Some(read(&value)));
        }
        let btree = self.btree;
        let mut resume = crate::btree::tree::Resume::default();
        self.run(|pool, scratch| btree.get_resuming(pool, key, scratch, &mut read, &mut resume))
    }

    /// Inserts `key` with `value`, or overwrites its value.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.shared.check_writable()?;
        check_key(key)?;
        check_value(value)?;
        let shared = &self.shared;
        if shared.buffer.enabled() && !self.leaf_in_memory(key)? {
            shared.buffer_makes_room(entry_cost(key, value));
            shared.commit(shared.durability, || {
                shared.buffer.stage_put(self.btree, key, value);
                Ok(())
            })?;
            if shared.buffer_over_budget() {
                shared.drain_next()?;
            }
            return Ok(());
        }
        if !shared.buffer.enabled() {
            // (With the buffer on, the leaf and its path were just found in memory.)
            self.prefetch(key);
        }
        shared.commit(shared.durability, || self.apply_put(key, value))
    }

    /// The value the change buffer holds for `key` (the newest, if any).
    fn buffered(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(Error::TreeNotFound { name: self.name.to_string() });
        }
        Ok(self.shared.buffer.get(self.btree.tree_id, key))
    }

    /// Whether the leaf whose range holds `key` is in the pool (without reading it): if not,
    /// a put of `key` goes to the change buffer.
    fn leaf_in_memory(&self, key: &[u8]) -> Result<bool> {
        let btree = self.btree;
        self.run(|pool, _| in_memory(btree.locate_leaf(pool, key)))
    }

    async fn leaf_in_memory_async(&self, key: &[u8]) -> Result<bool> {
        let btree = self.btree;
        self.run_async(|pool, _| in_memory(btree.locate_leaf(pool, key))).await
    }

    /// The put itself, inside a commit (the key leaves the change buffer, if there).
    fn apply_put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let btree = self.btree;
        self.shared.buffer.stage_remove(btree.tree_id, key);
        self.run(|pool, scratch| btree.put(pool, key, value, scratch))
    }

    /// The delete itself, inside a commit. A key in the change buffer leaves it (and was
    /// present).
    fn apply_delete(&self, key: &[u8]) -> Result<bool> {
        let btree = self.btree;
        let buffered = self.shared.buffer.stage_remove(btree.tree_id, key).is_some();
        let (removed, merge) = self.run(|pool, scratch| btree.delete(pool, key, scratch))?;
        if let Some(leaf) = merge {
            self.run(|pool, scratch| btree.try_merge(pool, leaf, key, scratch))?;
        }
        Ok(removed || buffered)
    }

    /// Reads the path to `key`'s leaf into the pool before a commit takes the commit lock,
    /// so that the commit (which holds it) seldom waits for a read. Errors are left for the
    /// commit itself to meet. (The tree itself: not answered by the change buffer.)
    fn prefetch(&self, key: &[u8]) {
        let btree = self.btree;
        let _ = self.run(|pool, scratch| btree.get(pool, key, scratch, &mut |_: &[u8]| ()));
    }

    async fn prefetch_async(&self, key: &[u8]) {
        let btree = self.btree;
        let _ =
            self.run_async(|pool, scratch| btree.get(pool, key, scratch, &mut |_: &[u8]| ())).await;
    }

    async fn apply_put_async(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let btree = self.btree;
        self.shared.buffer.stage_remove(btree.tree_id, key);
        self.run_in_commit(|pool, scratch| btree.put(pool, key, value, scratch)).await
    }

    async fn apply_delete_async(&self, key: &[u8]) -> Result<bool> {
        let btree = self.btree;
        let buffered = self.shared.buffer.stage_remove(btree.tree_id, key).is_some();
        let (removed, merge) =
            self.run_in_commit(|pool, scratch| btree.delete(pool, key, scratch)).await?;
        if let Some(leaf) = merge {
            self.run_in_commit(|pool, scratch| btree.try_merge(pool, leaf, key, scratch)).await?;
        }
        Ok(removed || buffered)
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.shared.check_writable()?;
        check_key(key)?;
        self.prefetch(key);
        self.shared.commit(self.shared.durability, || self.apply_delete(key))
    }

    /// Changes the value of `key` in place, atomically (no reader sees half of the change);
    /// the value keeps its length. Returns whether `key` was present.
    pub fn update(&self, key: &[u8], change: impl FnOnce(&mut [u8])) -> Result<bool> {
        self.shared.check_writable()?;
        check_key(key)?;
        let btree = self.btree;
        let mut change = Some(change);
        self.prefetch(key);
        self.shared.commit(self.shared.durability, || {
            // A buffered value goes into its leaf first, to be changed there.
            if let Some(value) = self.shared.buffer.stage_remove(btree.tree_id, key) {
                self.run(|pool, scratch| btree.put(pool, key, &value, scratch))?;
            }
            self.run(|pool, scratch| btree.update(pool, key, &mut change, scratch))
        })
    }

    /// [`Tree::get`] as a future: on a worker, a miss queues a read and yields.
    pub async fn get_async(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with_async(key, |value| value.to_vec()).await
    }

    /// [`Tree::get_with`] as a future.
    pub async fn get_with_async<R>(
        &self,
        key: &[u8],
        mut read: impl FnMut(&[u8]) -> R,
    ) -> Result<Option<R>> {
        check_key(key)?;
        if let Some(value) = self.buffered(key)? {
            return Ok(Some(read(&value)));
        }
        let btree = self.btree;
        let mut resume = crate::btree::tree::Resume::default();
        self.run_async(|pool, scratch| {
            btree.get_resuming(pool, key, scratch, &mut read, &mut resume)
        })
        .await
    }

    /// The value of `key`, read by a task holding the commit lock (see `run_in_commit`).
    async fn get_in_commit(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(value) = self.buffered(key)? {
            return Ok(Some(value));
        }
        let btree = self.btree;
        let mut resume = crate::btree::tree::Resume::default();
        let mut read = |value: &[u8]| value.to_vec();
        self.run_in_commit(|pool, scratch| {
            btree.get_resuming(pool, key, scratch, &mut read, &mut resume)
        })
        .await
    }

    /// [`Tree::put`] as a future.
    pub async fn put_async(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.shared.check_writable()?;
        check_key(key)?;
        check_value(value)?;
        let shared = &self.shared;
        if shared.buffer.enabled() && !self.leaf_in_memory_async(key).await? {
            shared.buffer_makes_room(entry_cost(key, value));
            let guard = shared.begin_commit_async().await?;
            shared.buffer.stage_put(self.btree, key, value);
            let (_, end) = shared.end_commit(Ok(()))?;
            drop(guard);
            shared.after_commit_async(end, shared.durability).await?;
            if shared.buffer_over_budget() {
                shared.drain_next_async().await?;
            }
            return Ok(());
        }
        if !shared.buffer.enabled() {
            // (With the buffer on, the leaf and its path were just found in memory.)
            self.prefetch_async(key).await;
        }
        let guard = shared.begin_commit_async().await?;
        let outcome = self.apply_put_async(key, value).await;
        let (value, end) = shared.end_commit(outcome)?;
        drop(guard);
        shared.after_commit_async(end, shared.durability).await?;
        Ok(value)
    }

    /// [`Tree::delete`] as a future.
    pub async fn delete_async(&self, key: &[u8]) -> Result<bool> {
        self.shared.check_writable()?;
        check_key(key)?;
        let shared = &self.shared;
        self.prefetch_async(key).await;
        let guard = shared.begin_commit_async().await?;
        let outcome = self.apply_delete_async(key).await;
        let (removed, end) = shared.end_commit(outcome)?;
        drop(guard);
        shared.after_commit_async(end, shared.durability).await?;
        Ok(removed)
    }

    /// [`Tree::update`] as a future.
    pub async fn update_async(&self, key: &[u8], change: impl FnOnce(&mut [u8])) -> Result<bool> {
        self.shared.check_writable()?;
        check_key(key)?;
        let btree = self.btree;
        let mut change = Some(change);
        let shared = &self.shared;
        self.prefetch_async(key).await;
        let guard = shared.begin_commit_async().await?;
        let outcome = async {
            // A buffered value goes into its leaf first, to be changed there.
            if let Some(value) = shared.buffer.stage_remove(btree.tree_id, key) {
                self.run_in_commit(|pool, scratch| btree.put(pool, key, &value, scratch)).await?;
            }
            self.run_in_commit(|pool, scratch| btree.update(pool, key, &mut change, scratch)).await
        }
        .await;
        let (updated, end) = shared.end_commit(outcome)?;
        drop(guard);
        shared.after_commit_async(end, shared.durability).await?;
        Ok(updated)
    }

    async fn run_async<T>(
        &self,
        attempt: impl FnMut(&BufferPool, &mut crate::btree::Scratch) -> crate::buffer::Attempt<T>,
    ) -> Result<T> {
        self.run_async_with(true, attempt).await
    }

    /// [`Tree::run_async`] for a task holding the commit lock: it does not give its
    /// worker's turn away after the operation (only a miss makes it wait).
    async fn run_in_commit<T>(
        &self,
        attempt: impl FnMut(&BufferPool, &mut crate::btree::Scratch) -> crate::buffer::Attempt<T>,
    ) -> Result<T> {
        self.run_async_with(false, attempt).await
    }

    async fn run_async_with<T>(
        &self,
        share_turn: bool,
        mut attempt: impl FnMut(&BufferPool, &mut crate::btree::Scratch) -> crate::buffer::Attempt<T>,
    ) -> Result<T> {
        self.shared.check_open()?;
        let pool = &self.shared.pool;
        let dropped = &self.dropped;
        crate::sched::run_async_with(pool, share_turn, |scratch| {
            if dropped.load(Ordering::Acquire) {
                return Err(Interrupt::Error(Error::TreeNotFound { name: String::new() }));
            }
            attempt(pool, scratch)
        })
        .await
        .map_err(|e| self.error(e))
    }

    /// Visits up to `limit` entries with keys `>= start`, in ascending order, as a task: each
    /// leaf, and each Value page of a value stored out of line, is read like a miss of
    /// `get_async` (a queued read on a worker, the task yielding). Returns how many entries
    /// it visited.
    pub async fn scan_async(
        &self,
        start: &[u8],
        limit: usize,
        mut visit: impl FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        // An empty start scans from the first key.
        if !start.is_empty() {
            check_key(start)?;
        }
        let named = |e: Error| self.error(e);
        let mut cursor =
            Cursor::new(self.btree, Bound::Included(start.to_vec()), Bound::Unbounded, false)
                .with_buffer(Arc::clone(&self.shared.buffer));
        let pool = &self.shared.pool;
        let mut visited = 0;
        let mut key = Vec::new();
        while visited < limit {
            self.shared.check_open()?;
            if self.dropped.load(Ordering::Acquire) {
                return Err(Error::TreeNotFound { name: self.name.to_string() });
            }
            cursor.fill_async(pool).await.map_err(named)?;
            if cursor.is_done() {
                break;
            }
            let (n, missing) =
                cursor.visit_in_leaf(pool, limit - visited, &mut key, &mut visit).map_err(named)?;
            visited += n;
            if let Some(value_page) = missing {
                // Loaded as a queued read, never a blocking one on the worker.
                crate::sched::load_page(pool, value_page).await?;
            }
        }
        Ok(visited)
    }

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
                .with_buffer(Arc::clone(&self.shared.buffer)),
            root: self.btree.root,
            failed: false,
        }
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
    root: PageId,
    failed: bool,
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let result = self.shared.check_open().and_then(|()| {
            if self.dropped.load(Ordering::Acquire) {
                return Err(Error::TreeNotFound { name: String::new() });
            }
            self.cursor.next(&self.shared.pool)
        });
        match result {
            Ok(entry) => entry.map(Ok),
            Err(e) => {
                self.failed = true;
                let pool = &self.shared.pool;
                Some(Err(tree_error(e, &self.name, &self.dropped, self.root, pool)))
            }
        }
    }
}

// `Db`, `Tree` and `Iter` are shared across threads: keep it so.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Db>();
    assert_send_sync::<Tree>();
    assert_send_sync::<Iter>();
};
