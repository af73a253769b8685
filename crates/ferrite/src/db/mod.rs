//! The public API and the upper engine: a data directory (`Db`) holding named trees
//! (`Tree`), each an ordered map from byte-string keys to byte-string values, usable from
//! many threads and from tasks at once. Every operation is written once, as a future over
//! the B+tree's attempts and the scheduler's one driver; the blocking API runs it on the
//! calling thread (`sched::block_on`).
//!
//! | file | what |
//! |---|---|
//! | `lifecycle.rs` | open in steps (recovery included), close |
//! | `lock.rs` | the directory lock |
//! | `engine.rs` | the state the handles share |
//! | `catalog.rs` | the catalog: create, open, drop trees |
//! | `tree.rs` | a tree's operations; change buffer drains |
//! | `commit.rs` | the commit protocol |
//! | `batch.rs` | write batches |
//! | `txn.rs` | transactions |
//! | `cursor.rs`, `iter.rs` | range scans |
//! | `checkpoint.rs` | checkpoints, superblock writes, the periodic flush |
//! | `check.rs` | `Db::check` |

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use crate::btree::node::MAX_KEY_LEN;
use crate::buffer::{BufferPool, PoolStats};
use crate::error::{Error, PageId, Result};
use crate::format::page::PAGE_SIZE;
use crate::io::AlignedPage;
use crate::io::PageFile;
use crate::sched::{TaskHandle, WorkerStats, Workers};
use crate::wal::Log;

mod backup;
mod batch;
mod catalog;
mod check;
mod checkpoint;
mod commit;
pub(crate) mod cursor;
mod engine;
mod intents;
mod iter;
mod lifecycle;
mod lock;
mod object;
mod recovery;
mod snapshot;
mod tree;
mod txn;

pub use backup::BackupReport;
pub use batch::WriteBatch;
pub use check::CheckReport;
use engine::Shared;
pub use iter::Iter;
pub use lock::LOCK_FILE_NAME;
#[doc(hidden)]
pub use object::fuzz_object_entry;
#[cfg(any(test, feature = "testing"))]
pub(crate) use object::set_merge_idle_wait;
pub use object::{
    ObjectReader, ObjectStat, ObjectWriter, ObjectsReport, ValueSlices, MAX_OBJECT_LEN,
};
pub use recovery::RecoveryReport;
pub use snapshot::Snapshot;
pub use tree::Tree;
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

/// Objects' fragments, merges and free space in an open database ([`Db::object_space_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectSpaceStats {
    /// Bytes of fragments not merged yet, in all objects.
    pub fragment_bytes: u64,
    /// Objects waiting for the background merge.
    pub merge_queue: u64,
    /// Blocks merges rewrote since open.
    pub merged_blocks: u64,
    /// Of those, blocks read from extents first (device reads no write made).
    pub merge_reads: u64,
    /// Object data pages freed but not reusable yet (their frees not durable, or a reader
    /// may still see them).
    pub limbo_pages: u64,
}

/// How much of the page file's budget (`Options::max_size_bytes`) is taken: what
/// [`Db::space_usage`] returns. Tree pages and object data have separate free lists while
/// the database is open (a page freed by one is reused by the same kind; a reopen pools
/// them), so each kind has its own room.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpaceUsage {
    /// Pages the budget allows.
    pub max_pages: u64,
    /// Page ids handed out so far (the page file's logical size).
    pub handed_out: u64,
    /// Of those, free for tree pages.
    pub free_tree_pages: u64,
    /// Of those, free (or soon free: waiting until no reader can see them) for object data.
    pub free_object_pages: u64,
}

impl SpaceUsage {
    /// Pages holding data.
    pub fn used_pages(&self) -> u64 {
        self.handed_out.saturating_sub(self.free_tree_pages + self.free_object_pages)
    }

    /// Pages tree pages can still take: never handed out, or free for them.
    pub fn room_for_trees(&self) -> u64 {
        self.max_pages.saturating_sub(self.handed_out) + self.free_tree_pages
    }

    /// Pages object data can still take.
    pub fn room_for_objects(&self) -> u64 {
        self.max_pages.saturating_sub(self.handed_out) + self.free_object_pages
    }
}

/// One tree's pages in the pool at a moment ([`Db::resident_by_tree`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResidentTree {
    /// The tree's name (an internal tree's in parentheses).
    pub name: String,
    /// Its pages in memory: nodes, and Value pages of its large values.
    pub pages: u64,
    /// Of them, the ones changed since they were last written (dirty).
    pub dirty: u64,
}

/// Numbers describing an open database ([`Db::stats`]).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DbStats {
    /// The buffer pool's counters.
    pub pool: PoolStats,
    /// Trees in the catalog.
    pub trees: usize,
    /// Bytes of the page file (or of its devices) as grown so far.
    pub file_bytes: u64,
    /// Snapshots alive ([`Db::snapshot`]).
    pub snapshots: u64,
    /// Bytes of page copies kept for them (at most `Options::snapshot_bytes`).
    pub snapshot_bytes: u64,
    /// Snapshots ended early since open, to keep within `Options::snapshot_bytes`.
    pub snapshots_expired: u64,
}

/// The first step of every public `*_async` call: refuses to run outside a task (or the
/// engine's own blocking calls), where a miss would block the thread of whatever executor
/// polls it.
#[inline]
fn in_task(call: &'static str) -> Result<()> {
    match crate::worker_context::may_run_futures() {
        true => Ok(()),
        false => Err(Error::NotInTask { call }),
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

/// A value longer than `MAX_VALUE_LEN` is stored as an object (`object/`).
fn check_value(value: &[u8]) -> Result<()> {
    if value.len() as u64 > MAX_OBJECT_LEN {
        return Err(Error::ValueTooLarge { len: value.len(), max: MAX_OBJECT_LEN as usize });
    }
    Ok(())
}

fn not_a_database(path: &Path, reason: impl Into<String>) -> Error {
    Error::NotADatabase { path: path.to_owned(), reason: reason.into() }
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

    /// Objects' fragments, merges and free space (see [`ObjectSpaceStats`]).
    pub fn object_space_stats(&self) -> ObjectSpaceStats {
        let space = &self.shared.object_space;
        let (fragment_bytes, merge_queue) = {
            let f = space.fragments();
            (f.bytes, f.queued.len() as u64)
        };
        ObjectSpaceStats {
            fragment_bytes,
            merge_queue,
            merged_blocks: space.merged_blocks(),
            merge_reads: space.merge_reads(),
            limbo_pages: space.limbo_pages(),
        }
    }

    /// Merges every object's fragments into whole blocks now, on this thread (the background
    /// merge does this lazily); returns the blocks merged.
    pub fn merge_fragments(&self) -> Result<u64> {
        self.shared.check_writable()?;
        if crate::sched::on_worker() {
            return Err(Error::BlockingWriteInTask);
        }
        let mut blocks = 0;
        let mut idle = 0;
        while self.shared.object_space.fragments().entries > 0 && idle < 100 {
            let _merging = self.shared.object_space.merge_lock();
            match self.shared.merge_oldest(None)? {
                // Raced by writers on every block it read: again.
                0 => idle += 1,
                bytes => blocks += bytes / PAGE_SIZE as u64,
            }
        }
        Ok(blocks)
    }

    /// How much of the page file's budget is taken, and the room left for each kind of
    /// page (cheap: three counters under their locks).
    pub fn space_usage(&self) -> SpaceUsage {
        let pool = &self.shared.pool;
        SpaceUsage {
            max_pages: pool.max_pages(),
            handed_out: pool.page_count(),
            free_tree_pages: pool.free_page_count(),
            free_object_pages: self.shared.object_space.free_page_count(),
        }
    }

    /// Pages the pool has read from disk since open, per tree: `(name, pages)` for every tree
    /// read from, most read first. The catalog is `(catalog)`, a tree of the engine's own
    /// (the objects' maps) its name in parentheses, and a tree dropped since it was read
    /// `(dropped tree N)`. For finding which data a workload's reads go to; a tree's
    /// [`Tree`] handles count nothing themselves.
    pub fn reads_by_tree(&self) -> Result<Vec<(String, u64)>> {
        self.shared.check_open()?;
        let mut names = self.names_by_tree_id()?;
        let mut reads: Vec<(String, u64)> = self
            .shared
            .pool
            .reads_by_tag()
            .into_iter()
            .map(|(id, pages)| (Self::take_name(&mut names, id), pages))
            .collect();
        reads.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(reads)
    }

    /// The pages in the pool now, per tree, most first: a census of where the pool's memory
    /// goes (names as in [`Db::reads_by_tree`]; pages of no tree, free pages and the free
    /// list's, under `(other)`). It reads each page's header without
    /// latching it or counting as a use, so it changes nothing the clock decides; pages
    /// latched at that moment are left out. Costs a look at every page in the pool.
    pub fn resident_by_tree(&self) -> Result<Vec<ResidentTree>> {
        self.shared.check_open()?;
        let mut names = self.names_by_tree_id()?;
        let mut census: Vec<ResidentTree> = self
            .shared
            .pool
            .resident_by_tag()
            .into_iter()
            .map(|(id, pages, dirty)| ResidentTree {
                name: match id {
                    Some(id) => Self::take_name(&mut names, id),
                    None => "(other)".to_owned(),
                },
                pages,
                dirty,
            })
            .collect();
        census.sort_by(|a, b| b.pages.cmp(&a.pages).then_with(|| a.name.cmp(&b.name)));
        Ok(census)
    }

    /// Every tree's name by its id, an internal tree's in parentheses, the catalog's too.
    fn names_by_tree_id(&self) -> Result<std::collections::HashMap<u64, String>> {
        let shared = &self.shared;
        let mut names: std::collections::HashMap<u64, String> = shared
            .catalog_entries()?
            .into_iter()
            .filter_map(|(name, tree)| {
                let name = match name.strip_prefix('\0') {
                    Some(internal) => format!("({internal})"),
                    None => name,
                };
                tree.map(|tree| (tree.tree_id, name))
            })
            .collect();
        names.insert(shared.catalog.tree_id, "(catalog)".to_owned());
        Ok(names)
    }

    /// Tree `id`'s name from `names` (taken out), or the name of a tree dropped since.
    fn take_name(names: &mut std::collections::HashMap<u64, String>, id: u64) -> String {
        names.remove(&id).unwrap_or_else(|| format!("(dropped tree {id})"))
    }

    /// The pool's counters, the number of trees and the page file's size.
    pub fn stats(&self) -> Result<DbStats> {
        let (snapshots, snapshot_bytes, snapshots_expired) = self.shared.pool.snapshot_stats();
        Ok(DbStats {
            pool: self.shared.pool.stats(),
            trees: self.tree_names()?.len(),
            file_bytes: self.shared.pool.file().size_pages() * PAGE_SIZE as u64,
            snapshots,
            snapshot_bytes,
            snapshots_expired,
        })
    }

    /// Starts a transaction over any trees of this database: reads that see its own
    /// writes, and a commit that applies the writes only if nothing it read changed
    /// meanwhile ([`Error::Conflict`] otherwise). See [`Transaction`].
    pub fn transaction(&self) -> Transaction {
        Transaction::new(Arc::clone(&self.shared))
    }

    /// Entries the change buffer holds (puts waiting for their leaves), and the bytes they
    /// count against its budget (`Options::change_buffer_bytes`).
    pub fn change_buffer(&self) -> (usize, u64) {
        (self.shared.change_buffer.len(), self.shared.change_buffer.bytes())
    }

    /// Drains of the change buffer since open (each moves the buffered entries of one leaf
    /// into it; `ChangeBuffer::next_victim` picks the leaf), and the entries they moved.
    pub fn change_buffer_drains(&self) -> (u64, u64) {
        self.shared.change_buffer.drain_counts()
    }

    /// The most the change buffer may hold, in bytes (0: off).
    pub fn change_buffer_budget(&self) -> u64 {
        self.shared.change_buffer.budget()
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
    ///
    /// ```
    /// use ferrite::{Db, Options};
    ///
    /// # let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options { workers: 1, ..Options::default() })?;
    /// let orders = db.tree("orders")?;
    /// orders.put("order-1", "two apples")?;
    /// let handle = db.spawn(async move {
    ///     // A page not in memory is a read queued on the worker's ring; the task yields.
    ///     orders.get_async("order-1").await
    /// })?;
    /// assert_eq!(handle.wait()?.as_deref(), Some(&b"two apples"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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

    /// Runs `future` as a task on worker `worker` (0 to [`Db::worker_count`] - 1), where
    /// [`Db::spawn`] takes the workers in turn: for callers that keep related tasks on one
    /// worker (a warehouse's terminals, whose transactions would otherwise meet each other's
    /// changes from the other worker). A worker past the last is refused.
    ///
    /// ```
    /// use ferrite::{Db, Options};
    ///
    /// # let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options { workers: 2, ..Options::default() })?;
    /// let handle = db.spawn_on(1, async { std::thread::current().name().map(str::to_owned) })?;
    /// assert_eq!(handle.wait().as_deref(), Some("ferrite-worker-1"));
    /// assert!(db.spawn_on(2, async {}).is_err()); // two workers: 0 and 1
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_on<F, T>(&self, worker: usize, future: F) -> Result<TaskHandle<T>>
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        self.shared.check_open()?;
        match self.shared.workers.lock().unwrap().as_ref() {
            Some(workers) if worker < workers.count() => Ok(workers.spawn_on(worker, future)),
            Some(workers) => Err(Error::BadOptions {
                reason: format!(
                    "spawn_on: worker {worker} does not exist (the database runs {})",
                    workers.count()
                ),
            }),
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

    /// Makes the database ready for tasks to write objects: makes its objects tree, if it
    /// has none, with a blocking commit (a task cannot make a tree). Values past
    /// [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN) and `write_at` from tasks need it once per
    /// database; the blocking API makes the tree itself.
    pub fn ready_objects(&self) -> Result<()> {
        self.shared.check_writable()?;
        if crate::sched::on_worker() {
            return Err(Error::BlockingWriteInTask);
        }
        self.shared.objects_tree(true).map(|_| ())
    }

    /// Where each worker's time went so far, for benchmarks.
    pub fn worker_stats(&self) -> Vec<Arc<WorkerStats>> {
        let workers = self.shared.workers.lock().unwrap();
        workers.as_ref().map(|w| w.stats().to_vec()).unwrap_or_default()
    }
}

// `Db`, `Tree` and `Iter` are shared across threads: keep it so.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Db>();
    assert_send_sync::<Tree>();
    assert_send_sync::<Iter>();
};
