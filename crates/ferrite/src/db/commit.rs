//! The commit protocol (see `docs/design.md`, "Commits"): one commit applies at a time under
//! the commit lock while the pool captures every page it changes; its record is appended (it
//! gives the pages their LSN, and the change buffer's staged changes apply); the lock is
//! released; then the commit waits for the log as its durability asks. Written once, as a
//! future: a task waiting for the lock or the log yields, a thread (`block_on`) parks.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Db, Shared};
use crate::error::{Error, Result};
use crate::options::Durability;
use crate::wal::record::{push_buffered, RecordWriter, KIND_COMMIT};

/// Log bytes buffered before a commit that does not wait for the log writes them anyway.
const LOG_PENDING_FLUSH_BYTES: u64 = 4 << 20;

impl Db {
    /// Makes every commit made so far durable, whatever durability it was made with: the
    /// log is written and synced up to its end, as a [`Durability::Sync`] commit waits for
    /// it (sharing the write and the sync with commits waiting meanwhile). With
    /// `Durability::None` or `Periodic` commits, this is the point after which a crash
    /// loses none of them. Cheap when nothing is pending: no write and no sync then.
    /// Fails if the database is read-only ([`Error::ReadOnly`]), closed, or its log failed
    /// ([`Error::LogFailed`]: the commits not yet durable may be lost).
    ///
    /// ```
    /// use ferrite::{Db, Durability, Options};
    ///
    /// # let dir = tempfile::tempdir()?;
    /// let options = Options { durability: Durability::None, ..Options::default() };
    /// # let options = Options { workers: 0, pool_bytes: 16 << 20, ..options };
    /// let db = Db::open(dir.path(), options)?;
    /// let events = db.tree("events")?;
    /// for i in 0..1000u32 {
    ///     events.put(i.to_be_bytes(), "something happened")?; // returns at once
    /// }
    /// db.flush()?; // all 1000 are durable now, after one write and one sync of the log
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn flush(&self) -> Result<()> {
        self.shared.blocking_write(self.flush_async())
    }

    /// [`Db::flush`] as a future (for tasks: waiting for the log yields).
    pub async fn flush_async(&self) -> Result<()> {
        crate::db::in_task("Db::flush_async")?;
        let shared = &self.shared;
        shared.check_writable()?;
        let log = shared.log()?;
        log.check()?;
        shared.wait_durable(log.tail(), Durability::Sync).await
    }
}

impl Shared {
    /// Runs the blocking form of a write: refused inside a task (it could wait for a commit
    /// or a flush that only its own worker would finish), else `future` on this thread.
    pub(super) fn blocking_write<T>(
        &self,
        future: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        if crate::sched::on_worker() {
            return Err(Error::BlockingWriteInTask);
        }
        crate::sched::block_on(future)
    }

    /// Runs `body` as one commit: its changes are captured, logged as one record, and the
    /// call returns once they are as durable as `durability` asks. The caller checked that
    /// the database is open and writable.
    pub(super) async fn commit<T>(
        self: &Arc<Self>,
        durability: Durability,
        body: impl AsyncFnOnce() -> Result<T>,
    ) -> Result<T> {
        let log = self.log()?;
        log.check()?;
        let guard = self.commit_lock.lock_async().await;
        let (value, end) = self.commit_locked(guard, body).await?;
        self.wait_durable(end, durability).await?;
        if !self.closed.load(Ordering::Acquire) {
            self.maybe_checkpoint();
        }
        Ok(value)
    }

    /// The part of [`Shared::commit`] under the commit lock (`guard`, released here): runs
    /// `body`, appends the record. Returns its value and the log position that must be
    /// durable for it.
    pub(super) async fn commit_locked<T>(
        self: &Arc<Self>,
        guard: crate::wal::commit::CommitGuard<'_>,
        body: impl AsyncFnOnce() -> Result<T>,
    ) -> Result<(T, u64)> {
        self.pool.begin_capture();
        let outcome = crate::buffer::in_commit(body()).await;
        // Object data the commit freed waits until its record is durable (`object/space.rs`).
        let freed = match self.objects_in_use.load(Ordering::Acquire) {
            true => self.object_space.take_staged(),
            // (No object, nothing staged: no lock on every commit of a plain database.)
            false => Vec::new(),
        };
        let ended = self.end_commit(outcome);
        // Every commit counts, changed or failed (snapshots: `buffer/versions.rs`).
        self.pool.end_commit();
        if let Ok((_, end)) = &ended {
            self.object_space.retire(&freed, *end);
        }
        drop(guard);
        if self.objects_in_use.load(Ordering::Acquire) {
            self.pass_object_turn();
        }
        ended
    }

    /// Ends the capture of a commit whose changes were `outcome`: appends its record and
    /// gives its pages the record's LSN. Returns the LSN the log must reach for it to be
    /// durable (for a commit that changed nothing, the log's tail: it is durable once every
    /// commit before it is). A commit that failed after changing pages leaves changes no
    /// record describes: the log is failed, the database must be reopened.
    pub(super) fn end_commit<T>(&self, outcome: Result<T>) -> Result<(T, u64)> {
        let log = self.log()?;
        // The commit's changes to the change buffer: logged with its pages, applied once
        // logged (a failed commit's are dropped: the change buffer never saw them).
        let buffered = self.change_buffer.take_staged();
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
            None if buffered.is_empty() => return Ok((value, log.tail())),
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
        // The change buffer first: readers wait for the pages until they are stamped, so
        // none finds a key gone from the buffer and the leaf's change still hidden.
        if !buffered.is_empty() {
            let versioning = self.pool.commit_versioning().map(|n| (n, self.pool.snapshot_seqs()));
            self.change_buffer.apply(&buffered, versioning);
        }
        self.pool.stamp(&pages, lsn);
        Ok((value, end))
    }

    /// Waits until the log is durable up to `end` if `durability` asks (or the
    /// log's pending bytes grew past `LOG_PENDING_FLUSH_BYTES`).
    pub(super) async fn wait_durable(&self, end: u64, durability: Durability) -> Result<()> {
        let log = self.log()?;
        match durability {
            Durability::Sync => log.wait_durable(end).await,
            _ if end.saturating_sub(log.durable()) > LOG_PENDING_FLUSH_BYTES => {
                log.wait_durable(end).await
            }
            _ => Ok(()),
        }
    }
}
