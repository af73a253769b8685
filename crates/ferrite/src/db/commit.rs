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

/// Log bytes buffered before a commit that does not wait for the log waits for it anyway.
const LOG_PENDING_FLUSH_BYTES: u64 = 4 << 20;

/// Log bytes buffered before a commit that does not wait for the log asks the workers to
/// write them, without waiting: the log is written in the background, so that commits
/// rarely find `LOG_PENDING_FLUSH_BYTES` pending and wait.
const LOG_BACKGROUND_FLUSH_BYTES: u64 = LOG_PENDING_FLUSH_BYTES / 4;

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
        let unfinished = Unfinished(self);
        let outcome = crate::buffer::in_commit(body()).await;
        std::mem::forget(unfinished);
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

    /// Ends the capture of a commit whose body did not end: it panicked (a task's panic is
    /// caught by its worker, which goes on), or its future was dropped while it waited. What
    /// it changed no record describes: as for a commit that failed after changing pages,
    /// the log fails. Either way the capture ends, so that the next commit (which the
    /// commit lock, released as the unwinding drops its guard, lets in) starts clean.
    fn end_unfinished_commit(&self) {
        if self.pool.abandon_capture() {
            if let Ok(log) = self.log() {
                let reason = "a commit stopped midway (it panicked, or its future was \
                              dropped) after changing pages";
                log.fail(reason.into());
            }
        }
        drop(self.change_buffer.take_staged());
        if self.objects_in_use.load(Ordering::Acquire) {
            drop(self.object_space.take_staged());
        }
        self.pool.end_commit();
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
    /// log's pending bytes grew past `LOG_PENDING_FLUSH_BYTES`); past
    /// `LOG_BACKGROUND_FLUSH_BYTES`, asks for a flush without waiting.
    pub(super) async fn wait_durable(&self, end: u64, durability: Durability) -> Result<()> {
        let log = self.log()?;
        if durability == Durability::Sync {
            return log.wait_durable(end).await;
        }
        let pending = end.saturating_sub(log.durable());
        if pending > LOG_PENDING_FLUSH_BYTES {
            return log.wait_durable(end).await;
        }
        if pending > LOG_BACKGROUND_FLUSH_BYTES {
            log.request_background_flush(end);
        }
        Ok(())
    }
}

/// Armed while a commit's body runs under the commit lock (forgotten once it returns): its
/// drop means the body stopped midway ([`Shared::end_unfinished_commit`]).
struct Unfinished<'a>(&'a Shared);

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        self.0.end_unfinished_commit();
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    use crate::{Db, Durability, Error, Options};

    fn open(dir: &std::path::Path, workers: usize) -> Db {
        let options = Options { workers, pool_bytes: 16 << 20, ..Options::default() };
        Db::open(dir, options).unwrap()
    }

    /// After a commit that stopped midway having changed a page: the next commit fails at
    /// once (it would otherwise log the stopped one's changes as its own, or wait), reads of
    /// the page fail, and a reopen recovers what was committed before.
    fn check_after_stopped_commit(db: Db, dir: &std::path::Path) {
        // (On a thread of its own: without the fix the next commit waited for ever.)
        let (done, finished) = std::sync::mpsc::channel();
        let dir = dir.to_path_buf();
        std::thread::spawn(move || {
            check_stopped(db, &dir);
            done.send(()).unwrap();
        });
        let waited = finished.recv_timeout(std::time::Duration::from_secs(60));
        assert!(waited.is_ok(), "the checks after the stopped commit failed or hung");
    }

    fn check_stopped(db: Db, dir: &std::path::Path) {
        let tree = db.tree("t").unwrap();
        let next = tree.put("b", "2");
        assert!(matches!(next, Err(Error::LogFailed { .. })), "{next:?}");
        assert!(tree.get("a").is_err(), "a page the stopped commit changed is not read");
        drop(tree);
        drop(db);
        let db = open(dir, 0);
        let tree = db.tree("t").unwrap();
        assert_eq!(tree.get("a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(tree.get("c").unwrap(), None, "the stopped commit's change is gone");
    }

    #[test]
    fn a_commit_that_panics_fails_the_log_instead_of_leaking_into_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path(), 1);
        let tree = db.tree("t").unwrap();
        tree.put("a", "1").unwrap();
        let shared = Arc::clone(&db.shared);
        let in_task = tree.clone();
        let task = db
            .spawn(async move {
                let body = async || -> crate::Result<()> {
                    in_task.apply_put(b"c", b"3").await?;
                    panic!("a bug inside a commit");
                };
                shared.commit(Durability::None, body).await
            })
            .unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task.wait()));
        assert!(panicked.is_err(), "the task's panic reaches its handle");
        drop(tree);
        check_after_stopped_commit(db, dir.path());
    }

    #[test]
    fn a_commit_dropped_midway_fails_the_log_and_frees_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path(), 0);
        let tree = db.tree("t").unwrap();
        tree.put("a", "1").unwrap();
        {
            let body = async || -> crate::Result<()> {
                tree.apply_put(b"c", b"3").await?;
                std::future::pending::<()>().await;
                Ok(())
            };
            let mut commit = std::pin::pin!(db.shared.commit(Durability::None, body));
            let polled = commit.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            assert!(matches!(polled, Poll::Pending));
            // Dropped here, holding the commit lock with a page changed.
        }
        drop(tree);
        check_after_stopped_commit(db, dir.path());
    }
}
