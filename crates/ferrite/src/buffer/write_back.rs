//! Write-back: dirty pages written to the page file, by eviction (a blocking thread's round
//! of victims, runs of consecutive pages in one write: `write_run`; or the workers'
//! `write_back_start`, one victim each, with the dirty pages beside it that are ready at
//! once in the same write: `write_neighbour_start`) and by checkpoints in batches
//! (`flush_all`). Every write first passes `write_check`, which applies the write-ahead rule
//! of the attached log (`write_ahead.rs`): a logged page waits for the log to be durable past
//! its last change and, once per checkpoint epoch, past a full image of it appended here; a
//! page a commit in progress changed (`PINNED`) or a checkpoint is writing (`WRITING`) waits.
//!
//! Checkpoint epochs: a checkpoint starts an epoch (`start_epoch`) after reading its redo
//! LSN, and completes it once it is on disk (`complete_epoch`); a page whose last image is
//! from an older epoch than the last completed one gets a new image before its next write.

use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;

use super::page_table::{set_epoch, EPOCH_MASK, PINNED, WRITING};
use super::state::{LOCKED, MARKED, UNLOCKED};
use super::write_ahead::WriteAhead;
use super::BufferPool;
use crate::error::{PageId, Result};
use crate::format::page::{self, PageKind, FLAG_DIRTY, OFFSET_FLAGS, OFFSET_KIND, PAGE_SIZE};
use crate::io::AlignedBlock;

/// Threads writing pages back in `flush_all` (checkpoints): writes in flight at once.
const FLUSH_THREADS: usize = 8;
/// Pages `flush_all` prepares together: their images appended, then one wait for the log.
const FLUSH_GROUP: usize = 64;

/// Checkpoint epochs: the last one started and the last one completed.
#[derive(Debug)]
pub(super) struct Epochs {
    pub(super) started: AtomicU32,
    completed: AtomicU32,
}

impl Default for Epochs {
    fn default() -> Self {
        Epochs { started: AtomicU32::new(1), completed: AtomicU32::new(1) }
    }
}

/// What `copy_for_write` did with a page.
enum Copied {
    Clean,
    Pinned,
    /// Copied, sealed, and marked `WRITING`.
    ToWrite,
}

/// What `write_back_start` decided for a victim.
#[derive(Debug, Clone, Copy)]
pub enum WriteStart {
    /// Nothing to write: evict it.
    Clean,
    /// Its image is in the caller's copy and it is no longer latched: write the copy, then
    /// `finish_write_back` (or `fail_write_back`).
    Write,
    /// Not now (`abort_evict` it): after the log is durable up to the LSN, or (`None`) after
    /// the commit that changed it is logged.
    Later(Option<u64>),
}

/// What a dirty page needs before it may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteCheck {
    /// Clean or free: nothing to write.
    Clean,
    /// It may be written now.
    Ready,
    /// The log must be durable up to this LSN first (`WriteAhead::flush`).
    LogFirst(u64),
    /// A commit in progress changed it: not before its record is logged.
    Pinned,
}

impl BufferPool {
    /// Attaches the log: from now on write-backs follow its rules.
    pub fn attach_log(&self, log: Arc<impl WriteAhead + 'static>) {
        let log: Arc<dyn WriteAhead> = log;
        assert!(self.log.set(log).is_ok(), "a log is attached already");
    }

    pub(super) fn attached_log(&self) -> &dyn WriteAhead {
        &**self.log.get().expect("a log")
    }

    /// Writes the latched, checked pages `pages` (consecutive ids from `first`, each `Ready`
    /// by [`BufferPool::write_check`] and past the log's wait) with one write: sealed, copied
    /// into one aligned buffer. On failure every page stays dirty and the pool notes it.
    pub(super) fn write_run(&self, first: PageId, pages: &[PageId]) -> Result<()> {
        if let [page_id] = pages {
            // One page: written from its frame, as `write_back` does.
            let memory = self.page_mut(*page_id);
            page::seal(memory);
            if let Err(e) = self.file.write_page(*page_id, memory) {
                memory[OFFSET_FLAGS] |= FLAG_DIRTY;
                self.note_write_failed(e.to_string());
                return Err(e);
            }
            self.counters.writes.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let mut run = AlignedBlock::reused(pages.len() * PAGE_SIZE);
        for (&page_id, out) in pages.iter().zip(run.as_mut_slice().chunks_mut(PAGE_SIZE)) {
            let memory = self.page_mut(page_id);
            page::seal(memory);
            out.copy_from_slice(memory);
        }
        if let Err(e) = self.file.write_pages(first, run.as_slice()) {
            for &page_id in pages {
                self.page_mut(page_id)[OFFSET_FLAGS] |= FLAG_DIRTY;
            }
            self.note_write_failed(e.to_string());
            return Err(e);
        }
        self.counters.writes.fetch_add(pages.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// For a latched page: what it needs before it may be written. Appends the page's
    /// image to the log if it has none since the last completed checkpoint.
    pub fn write_check(&self, page_id: PageId) -> Result<WriteCheck> {
        let log_state = self.table.log_state(page_id);
        if log_state.load(Ordering::Acquire) & WRITING != 0 {
            // Its frame must stay until the checkpoint's copy is on disk (a reader would
            // load the older page), and another write could land before that copy.
            return Ok(WriteCheck::Pinned);
        }
        let memory = self.page_mut(page_id);
        if memory[OFFSET_FLAGS] & FLAG_DIRTY == 0 || memory[OFFSET_KIND] == PageKind::Free as u8 {
            return Ok(WriteCheck::Clean);
        }
        if !self.writable {
            // A read-only open's replay keeps its changes in memory, never written.
            return Ok(WriteCheck::Pinned);
        }
        let Some(log) = self.log.get() else { return Ok(WriteCheck::Ready) };
        if !page::is_logged(page::kind_of(memory)) {
            return Ok(WriteCheck::Ready);
        }
        let state = log_state.load(Ordering::Acquire);
        if state & PINNED != 0 {
            return Ok(WriteCheck::Pinned);
        }
        // The log must be durable past the page's last change, and past its image.
        let mut needed = page::lsn_of(memory);
        if state & EPOCH_MASK < self.epochs.completed.load(Ordering::Acquire) {
            // Read the epoch before appending: an image is counted for a checkpoint only if
            // it follows that checkpoint's redo LSN (see `Shared::checkpoint`). The page keeps
            // its LSN: the image says which content it holds.
            let epoch = self.epochs.started.load(Ordering::Acquire);
            let image_lsn = log.append_image(page_id, memory)?;
            set_epoch(log_state, epoch);
            needed = needed.max(image_lsn);
        }
        if needed >= log.durable() {
            return Ok(WriteCheck::LogFirst(needed + 1));
        }
        Ok(WriteCheck::Ready)
    }

    /// Writes every page dirty in memory (blocking; pages a commit in progress changed are
    /// waited for), then syncs the file. Runs beside the workers and commits (checkpoints):
    /// a page is latched only to check it and copy it, never across a write or a wait for
    /// the log, so commits seldom find a page latched by it.
    pub fn flush_all(&self) -> Result<()> {
        let mut ids = self.resident.ids();
        ids.sort_unstable();
        // Several writes in flight on real devices (a simulated disk's draws must not depend
        // on threads, so it gets one).
        let threads = if self.file.devices().is_some() { FLUSH_THREADS } else { 1 };
        while !ids.is_empty() {
            let share = ids.len().div_ceil(threads).max(1);
            let pinned = std::sync::Mutex::new(Vec::new());
            let outcome: Result<()> = std::thread::scope(|scope| {
                let runs: Vec<_> = ids
                    .chunks(share)
                    .map(|chunk| {
                        let pinned = &pinned;
                        scope.spawn(move || -> Result<()> {
                            let mut run = AlignedBlock::zeroed(FLUSH_GROUP * PAGE_SIZE);
                            for group in chunk.chunks(FLUSH_GROUP) {
                                self.log_ahead_of(group)?;
                                let stuck = self.write_group(group, &mut run)?;
                                pinned.lock().unwrap().extend(stuck);
                            }
                            Ok(())
                        })
                    })
                    .collect();
                runs.into_iter().try_for_each(|run| run.join().expect("a flush thread panicked"))
            });
            outcome?;
            let mut pinned = pinned.into_inner().unwrap();
            if !pinned.is_empty() {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            pinned.sort_unstable();
            ids = pinned;
        }
        self.file.sync()
    }

    /// Before `flush_all` writes `pages`: appends the images they need and waits, once, for
    /// the log to be durable past them all (rather than one log flush per page).
    fn log_ahead_of(&self, pages: &[PageId]) -> Result<()> {
        let Some(log) = self.log.get() else { return Ok(()) };
        let mut needed = 0;
        for &page_id in pages {
            let Some(_guard) = self.latch_resident(page_id)? else { continue };
            if let WriteCheck::LogFirst(lsn) = self.write_check(page_id)? {
                needed = needed.max(lsn);
            }
        }
        if needed > 0 {
            log.flush(needed)?;
        }
        Ok(())
    }

    /// `flush_all`'s writes of `group` (ascending page ids): each dirty page is copied
    /// (sealed) into `run` under its latch and marked `WRITING`, and every run of consecutive
    /// pages goes out in one write. Returns the pages a commit in progress has pinned.
    fn write_group(&self, group: &[PageId], run: &mut AlignedBlock) -> Result<Vec<PageId>> {
        let mut pinned = Vec::new();
        // The pages copied into `run` and not written yet: consecutive, from `run_pages[0]`.
        let mut run_pages: Vec<PageId> = Vec::with_capacity(group.len());
        for &page_id in group {
            if run_pages.last().is_some_and(|&last| last + 1 != page_id) {
                self.write_copied(&run_pages, run)?;
                run_pages.clear();
            }
            let slot = run_pages.len() * PAGE_SIZE;
            let copy = &mut run.as_mut_slice()[slot..slot + PAGE_SIZE];
            let copied = self.copy_for_write(page_id, copy).inspect_err(|_| {
                // The pages copied before stay unwritten: dirty again, no longer `WRITING`.
                self.unmark_copied(&run_pages);
            })?;
            match copied {
                Copied::Clean => {}
                Copied::Pinned => pinned.push(page_id),
                Copied::ToWrite => run_pages.push(page_id),
            }
        }
        self.write_copied(&run_pages, run)?;
        Ok(pinned)
    }

    /// Copies page `page_id`, sealed, into `copy` and marks it `WRITING` (until
    /// `write_copied`), unless it is clean or pinned by a commit in progress.
    fn copy_for_write(&self, page_id: PageId, copy: &mut [u8]) -> Result<Copied> {
        let mut waited_for_log = false;
        loop {
            let Some(guard) = self.latch_resident(page_id)? else { return Ok(Copied::Clean) };
            match self.write_check(page_id)? {
                WriteCheck::Clean => return Ok(Copied::Clean),
                WriteCheck::Pinned => return Ok(Copied::Pinned),
                WriteCheck::LogFirst(lsn) if !waited_for_log => {
                    // Wait for the log unlatched, then look again; a page changed again
                    // meanwhile is waited for latched the second time (no endless chase).
                    drop(guard);
                    self.attached_log().flush(lsn)?;
                    waited_for_log = true;
                    continue;
                }
                WriteCheck::LogFirst(lsn) => self.attached_log().flush(lsn)?,
                WriteCheck::Ready => {}
            }
            self.seal_into(page_id, copy);
            return Ok(Copied::ToWrite);
        }
    }

    /// Writes the pages `pages` (consecutive) copied into `run` by `copy_for_write`, in one
    /// write, and clears their `WRITING` marks. On failure they are dirty again and the pool
    /// refuses writes.
    fn write_copied(&self, pages: &[PageId], run: &AlignedBlock) -> Result<()> {
        let Some(&first) = pages.first() else { return Ok(()) };
        let written = self.file.write_pages(first, &run.as_slice()[..pages.len() * PAGE_SIZE]);
        if let Err(e) = written {
            self.unmark_copied(pages);
            self.note_write_failed(e.to_string());
            return Err(e);
        }
        for &page_id in pages {
            self.table.log_state(page_id).fetch_and(!WRITING, Ordering::AcqRel);
        }
        self.counters.writes.fetch_add(pages.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Seals latched page `page_id` (which marks it clean), copies it into `copy` and marks
    /// it `WRITING` until the copy's write ends: the copy is what goes to disk, and no other
    /// write of the page starts meanwhile. Checkpoints (`copy_for_write`) and the workers'
    /// evictions (`write_back_start`) both write this way.
    fn seal_into(&self, page_id: PageId, copy: &mut [u8]) {
        let memory = self.page_mut(page_id);
        page::seal(memory);
        copy.copy_from_slice(memory);
        self.table.log_state(page_id).fetch_or(WRITING, Ordering::AcqRel);
    }

    /// Pages `copy_for_write` copied (and sealed: marked clean) that will not be written
    /// after all: dirty again (under their latches), and no longer `WRITING`.
    fn unmark_copied(&self, pages: &[PageId]) {
        for &page_id in pages {
            if let Ok(Some(_guard)) = self.latch_resident(page_id) {
                self.page_mut(page_id)[OFFSET_FLAGS] |= FLAG_DIRTY;
            }
            self.table.log_state(page_id).fetch_and(!WRITING, Ordering::AcqRel);
        }
    }

    /// For a latched victim: whether it must be written before its frame is reused, or
    /// must wait for the log or its commit (`Later`: the caller aborts the eviction).
    ///
    /// A victim to write is written from a copy, as a checkpoint writes (`copy_for_write`):
    /// sealed into `copy`, marked `WRITING` (no other write of it starts until this one
    /// ends), and unlatched at once, still marked by the clock. While the write is in flight
    /// the page serves readers and writers as any other; when it lands,
    /// [`BufferPool::finish_write_back`] evicts it only if nothing touched it meanwhile. So
    /// a victim that turns out to be wanted costs no wait and no read (the cooling stage of
    /// LeanStore's replacement). Before, a victim stayed latched for its whole write: on TPC-C
    /// out of memory (4 warehouses, a 40 MiB pool, the VM disk) with other builds sharing
    /// the two cores, readers spun on such pages until they gave up, about 58 times per
    /// transaction in an instrumented run, and commits waited on them holding the commit
    /// lock. (On a quiet machine the change moved throughput within the noise.)
    pub fn write_back_start(&self, page_id: PageId, copy: &mut [u8]) -> WriteStart {
        match self.write_check(page_id) {
            Ok(WriteCheck::Clean) => WriteStart::Clean,
            Ok(WriteCheck::Ready) => {
                self.seal_into(page_id, copy);
                // A new version: the seal changed bytes of the frame under the latch.
                let now = self.table.load(page_id);
                debug_assert_eq!(now.state(), LOCKED, "page {page_id}: a latched victim");
                self.table.store(page_id, now.bumped(MARKED));
                WriteStart::Write
            }
            Ok(WriteCheck::LogFirst(lsn)) => WriteStart::Later(Some(lsn)),
            Ok(WriteCheck::Pinned) | Err(_) => WriteStart::Later(None),
        }
    }

    /// Starts writing dirty page `page_id` in the same request as a victim beside it on disk
    /// (the workers' eviction, `sched/worker.rs`): if it is in memory, free to latch at once,
    /// dirty, and ready to write without a wait (`write_check`: its log durable, no commit
    /// or other write on it), it is sealed into `copy` (clean from now on), marked
    /// `WRITING`, and unlatched with its clock mark as it was; true. It stays in memory: only
    /// its write comes early, in a request that costs a disk little more than one page's.
    /// Otherwise it is left as it was (an image `write_check` appended stays logged);
    /// false. Once the write lands: [`BufferPool::finish_neighbour_writes`], or
    /// [`BufferPool::fail_write_back`] if it failed.
    pub fn write_neighbour_start(&self, page_id: PageId, copy: &mut [u8]) -> bool {
        if page_id >= self.page_count() {
            return false;
        }
        let now = self.table.load(page_id);
        if !matches!(now.state(), UNLOCKED | MARKED)
            || !self.table.cas(page_id, now, now.with_state(LOCKED))
        {
            return false;
        }
        fence(Ordering::Release);
        if !matches!(self.write_check(page_id), Ok(WriteCheck::Ready)) {
            // Nothing of the page changed: the same version.
            self.table.store(page_id, now);
            return false;
        }
        self.seal_into(page_id, copy);
        // A new version: the seal changed bytes of the frame under the latch.
        self.table.store(page_id, now.bumped(now.state()));
        true
    }

    /// The writes [`BufferPool::write_neighbour_start`] began for `pages` landed: they are
    /// on disk and no longer `WRITING`; they stay in memory, clean unless changed since.
    pub fn finish_neighbour_writes(&self, pages: &[PageId]) {
        for &page_id in pages {
            self.table.log_state(page_id).fetch_and(!WRITING, Ordering::AcqRel);
        }
        self.counters.writes.fetch_add(pages.len() as u64, Ordering::Relaxed);
    }

    /// The writes `write_back_start` began for `pages` landed: each is evicted (its frame
    /// freed) if it is still marked and clean, that is if nobody read, changed or latched it
    /// while it was written; otherwise it stays, clean unless changed.
    pub fn finish_write_back(&self, pages: &[PageId]) {
        let mut evict = Vec::with_capacity(pages.len());
        for &page_id in pages {
            self.table.log_state(page_id).fetch_and(!WRITING, Ordering::AcqRel);
            let now = self.table.load(page_id);
            if now.state() != MARKED || !self.table.cas(page_id, now, now.with_state(LOCKED)) {
                continue;
            }
            fence(Ordering::Release);
            let memory = self.page_mut(page_id);
            let pinned = self.table.log_state(page_id).load(Ordering::Acquire) & PINNED != 0;
            if memory[OFFSET_FLAGS] & FLAG_DIRTY == 0 && !pinned {
                evict.push(page_id);
            } else {
                // Changed since its copy (and marked again since): a later round's victim.
                self.table.store(page_id, now);
            }
        }
        self.finish_evict_many(&evict);
    }

    /// The write `write_back_start` began for `page_id` failed: the page is dirty again (the
    /// seal marked it clean) and may be written later; the pool notes the failure.
    pub fn fail_write_back(&self, page_id: PageId, reason: String) {
        self.unmark_copied(&[page_id]);
        self.note_write_failed(reason);
    }

    /// A page write failed: the database refuses writes from now on (what reached the disk
    /// is unknown, and the page's frame cannot be trusted to be written later).
    pub fn note_write_failed(&self, reason: String) {
        if let Some(log) = self.log.get() {
            log.fail(format!("a page write failed: {reason}"));
        }
    }

    /// Counts a write-back that finished.
    pub fn note_write(&self) {
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
    }

    /// Starts a checkpoint epoch; returns it. The caller read the checkpoint's redo LSN
    /// before: an image counted for this epoch was appended after it.
    pub fn start_epoch(&self) -> u32 {
        self.epochs.started.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The checkpoint of `epoch` is on disk: later write-backs need images from it on.
    pub fn complete_epoch(&self, epoch: u32) {
        self.epochs.completed.fetch_max(epoch, Ordering::AcqRel);
    }
}
