//! Checkpoints (see `docs/design.md`, "Checkpoints"): every dirty page written back, then a
//! checkpoint record, then the superblock pointed at it, so that recovery starts there and
//! older log segments are reused; started on a thread of its own once the log grew by
//! `Options::checkpoint_log_bytes` (by default, the larger of the pool and twice the data).
//! Also the superblock's writes and the periodic log flush.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{write_page_direct, Db, Shared};
use crate::error::{Error, Result};
use crate::format::page::PAGE_SIZE;
use crate::format::superblock::Superblock;
use crate::wal::record::{encode_checkpoint, Checkpoint};

impl Db {
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
}

impl Shared {
    /// Starts a checkpoint on a thread of its own once the log grew enough since the last.
    pub(super) fn maybe_checkpoint(self: &Arc<Self>) {
        let Some(log) = &self.log else { return };
        let since = log.tail().saturating_sub(self.checkpoint_redo.load(Ordering::Acquire));
        if since < self.checkpoint_interval() || self.checkpointing.swap(true, Ordering::AcqRel) {
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

    /// Bytes to log between checkpoints now (`Options::checkpoint_interval_for` the pages
    /// the file holds).
    pub(super) fn checkpoint_interval(&self) -> u64 {
        let (set, pool_bytes) = self.checkpoint_interval;
        set.unwrap_or_else(|| {
            let data_bytes = self.pool.page_count() * PAGE_SIZE as u64;
            crate::options::auto_checkpoint_interval(pool_bytes, data_bytes)
        })
    }

    /// Writes every dirty page, then a checkpoint record, then points the superblock at it;
    /// log segments before its redo LSN are then free to reuse. Commits go on meanwhile:
    /// they are held only while the redo LSN and the allocator's state are read.
    pub(super) fn checkpoint(&self) -> Result<()> {
        let _one = self.checkpoint_lock.lock().unwrap();
        self.checkpoint_held()
    }

    /// [`Shared::checkpoint`] for the holder of the checkpoint lock.
    pub(super) fn checkpoint_held(&self) -> Result<()> {
        let log = self.log()?;
        log.check()?;
        let pool = &self.pool;
        let (epoch, mut snapshot) = {
            let _commit = self.commit_lock.lock();
            // The redo LSN before the epoch: an image counted for this epoch follows it.
            let redo_lsn = log.tail();
            let epoch = pool.start_epoch();
            // Object data pages free, in limbo, or allocated for a commit to come are free
            // after a crash; read with the page count, none of them halfway through an
            // allocation (object data is allocated outside the commit lock).
            let (page_count, free) = self.object_space.with_free_pages(|object_free| {
                (pool.page_count(), [pool.free_pages(), object_free].concat())
            });
            let snapshot = Checkpoint {
                redo_lsn,
                page_count,
                next_tree_id: self.next_tree_id.load(Ordering::Acquire),
                catalog_root: self.catalog.root,
                free,
                buffered: Vec::new(),
            };
            (epoch, snapshot)
        };
        if self.objects_in_use.load(Ordering::Acquire) {
            self.pass_object_turn();
        }
        // The change buffer is copied after the redo LSN is fixed, without the commit lock
        // (`ChangeBuffer::snapshot` says why that is enough).
        snapshot.buffered = self.change_buffer.snapshot();
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
        log.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The body of the periodic flush thread (`Durability::Periodic`).
    pub(super) fn flush_periodically(&self, interval: std::time::Duration) {
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

    /// Writes the next superblock (the other copy: a torn write never loses both), changed
    /// by `update`, and syncs the page file.
    pub(super) fn write_superblock(&self, update: impl FnOnce(&mut Superblock)) -> Result<()> {
        let mut sb = self.superblock.lock().unwrap();
        let mut next = sb.clone();
        next.sequence += 1;
        update(&mut next);
        let file = self.pool.file();
        write_page_direct(file, next.page_id(), |page| next.encode(page))?;
        file.sync()?;
        *sb = next;
        // The copy written is the one that was damaged, if one was (see `lifecycle.rs`).
        self.superblock_damage.lock().unwrap().take();
        Ok(())
    }
}
