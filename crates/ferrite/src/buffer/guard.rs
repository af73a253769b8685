//! Latches on pages and the guards that hold them: optimistic reads (a version read before
//! and validated after a copy: the seqlock pattern), shared latches, and exclusive latches
//! released with a new version. The state word each of them moves is described in
//! `state.rs`. This is the path of every lookup: the small functions are `#[inline]` so that
//! they inline into the B+tree's attempts across modules.

use std::sync::atomic::{fence, Ordering};

use super::frames::FrameView;
use super::state::{EVICTED, LOADING, LOCKED, MARKED, SHARED_MAX, SHARED_MIN, UNLOCKED};
use super::{Attempt, BufferPool, Interrupt};
use crate::error::{PageId, Result};
use crate::format::page::{FLAG_DIRTY, OFFSET_FLAGS};
use crate::io::AlignedPage;

/// Spins on a latched page before an optimistic reader gives up and restarts.
const SPIN_LIMIT: u32 = 64;

impl BufferPool {
    /// Copies page `page_id` into `out` and returns the version it was copied at; the copy is
    /// consistent. `Miss` if the page is not in memory, `Restart` if it stays latched.
    pub fn read_copy(&self, page_id: PageId, out: &mut AlignedPage) -> Attempt<u64> {
        for _ in 0..=SPIN_LIMIT {
            let (version, view) = self.read_begin(page_id)?;
            view.copy(0, out.bytes_mut());
            if self.validate(page_id, version) {
                return Ok(version);
            }
            // A writer came between: copy again, a bounded number of times.
            std::hint::spin_loop();
        }
        Err(Interrupt::Restart)
    }

    /// Begins an optimistic read of page `page_id` in place: its version, and a view to copy
    /// a few bytes at a time from its frame. Whatever the view yields is only trustworthy
    /// once [`BufferPool::validate`] confirms the version. `Miss` if the page is not in
    /// memory, `Restart` if it stays latched.
    #[inline]
    pub fn read_begin(&self, page_id: PageId) -> Attempt<(u64, FrameView<'_>)> {
        if page_id >= self.page_count() {
            self.check_id(page_id)?;
        }
        let mut spins = 0;
        loop {
            let before = self.table.load(page_id);
            match before.state() {
                // Being read: the driver waits for that read instead of spinning here.
                EVICTED | LOADING => return Err(Interrupt::Miss(page_id)),
                MARKED => {
                    self.table.cas(page_id, before, before.with_state(UNLOCKED));
                    continue;
                }
                LOCKED => {
                    spins += 1;
                    if spins > SPIN_LIMIT {
                        return Err(Interrupt::Restart);
                    }
                    std::hint::spin_loop();
                    continue;
                }
                _ => {}
            }
            // The frame is read after the state (acquire): for this version it is the page's.
            let view = FrameView::new(&self.frames, self.table.frame(page_id));
            return Ok((before.version(), view));
        }
    }

    /// Prefetches page `page_id`'s entry in the translation table (a hint to the CPU's
    /// caches, `FrameView::prefetch`): the first step of bringing a page a descent goes to
    /// next into the caches; [`BufferPool::peek`] the second, once the entry has arrived.
    #[inline(always)]
    pub fn prefetch_entry(&self, page_id: PageId) {
        self.table.prefetch(page_id);
    }

    /// The frame page `page_id` occupies if it is in memory now, for prefetching only: no
    /// latch and no version, so its bytes may be anything, and the page may leave the
    /// frame at once. What a reader trusts comes from [`BufferPool::read_begin`].
    #[inline(always)]
    pub fn peek(&self, page_id: PageId) -> Option<FrameView<'_>> {
        if page_id >= self.table.max_pages() {
            return None;
        }
        match self.table.load_relaxed(page_id).state() {
            EVICTED | LOADING => None,
            _ => Some(FrameView::new(&self.frames, self.table.frame(page_id))),
        }
    }

    /// Whether page `page_id` is still at `version` (nobody changed it since a copy).
    #[inline(always)]
    pub fn validate(&self, page_id: PageId, version: u64) -> bool {
        // Reads of the page's bytes before this point must not move past the version check
        // (the seqlock reader's fence; free on x86).
        fence(Ordering::Acquire);
        let now = self.table.load_relaxed(page_id);
        // (A snapshot's copy of an old version never changes: `versions.rs`.)
        now.version() == version && now.readable() || version == super::IMAGE_VERSION
    }

    /// Whether page `page_id`, read at `version` some time ago, is still at it and in memory:
    /// nobody changed, evicted or freed it since (each of those moves the version on). A
    /// snapshot's image (`IMAGE_VERSION`) is never such evidence: it is not the live page.
    #[inline]
    pub fn unchanged_since(&self, page_id: PageId, version: u64) -> bool {
        let now = self.table.load(page_id);
        version != super::IMAGE_VERSION && now.version() == version && now.readable()
    }

    /// Latches page `page_id` exclusively if it is still at `version` (an upgrade from an
    /// optimistic read); `Restart` otherwise.
    #[inline(always)]
    pub fn lock_exclusive(&self, page_id: PageId, version: u64) -> Attempt<ExclusiveGuard<'_>> {
        let now = self.table.load(page_id);
        if now.version() != version || !matches!(now.state(), UNLOCKED | MARKED) {
            return Err(Interrupt::Restart);
        }
        if !self.table.cas(page_id, now, now.with_state(LOCKED)) {
            return Err(Interrupt::Restart);
        }
        // Writes under the latch must not become visible before the latch (seqlock writer).
        fence(Ordering::Release);
        Ok(ExclusiveGuard::new(self, page_id, false))
    }

    /// Latches page `page_id` exclusively whatever its version, waiting a little for other
    /// holders; `Miss` if it is not in memory.
    pub fn lock_exclusive_any(&self, page_id: PageId) -> Attempt<ExclusiveGuard<'_>> {
        self.check_id(page_id)?;
        let mut spins = 0;
        loop {
            let now = self.table.load(page_id);
            match now.state() {
                EVICTED | LOADING => return Err(Interrupt::Miss(page_id)),
                UNLOCKED | MARKED => {
                    if self.table.cas(page_id, now, now.with_state(LOCKED)) {
                        fence(Ordering::Release);
                        return Ok(ExclusiveGuard::new(self, page_id, false));
                    }
                }
                _ => {
                    spins += 1;
                    if spins > SPIN_LIMIT {
                        return Err(Interrupt::Restart);
                    }
                    std::hint::spin_loop();
                }
            }
        }
    }

    /// Latches page `page_id` shared; `Miss` if it is not in memory.
    pub fn lock_shared(&self, page_id: PageId) -> Attempt<SharedGuard<'_>> {
        self.check_id(page_id)?;
        let mut spins = 0;
        loop {
            let now = self.table.load(page_id);
            let next = match now.state() {
                EVICTED | LOADING => return Err(Interrupt::Miss(page_id)),
                UNLOCKED | MARKED => SHARED_MIN,
                s if (SHARED_MIN..SHARED_MAX).contains(&s) => s + 1,
                _ => 0,
            };
            if next != 0 && self.table.cas(page_id, now, now.with_state(next)) {
                return Ok(SharedGuard { pool: self, page_id });
            }
            spins += 1;
            if spins > SPIN_LIMIT {
                return Err(Interrupt::Restart);
            }
            std::hint::spin_loop();
        }
    }

    #[inline(always)]
    pub(super) fn unlock_shared(&self, page_id: PageId) {
        loop {
            let now = self.table.load(page_id);
            debug_assert!(now.shared(), "page {page_id} not shared-latched");
            let next = if now.state() == SHARED_MIN { UNLOCKED } else { now.state() - 1 };
            if self.table.cas(page_id, now, now.with_state(next)) {
                return;
            }
        }
    }

    #[inline(always)]
    pub(super) fn unlock_exclusive(&self, page_id: PageId, dirty: bool) {
        if dirty {
            // Changed: a copy in the second tier is stale now.
            if let Some(tier) = &self.tier {
                tier.invalidate(page_id);
            }
        }
        self.table.release_exclusive(page_id, |frame| {
            if dirty {
                self.frames.set_bits(frame, OFFSET_FLAGS, FLAG_DIRTY);
            }
        });
    }

    /// Latches page `page_id` exclusively, yielding while others hold it (a blocking
    /// thread's way: checkpoints); `None` if it is not in memory.
    pub(super) fn latch_resident(&self, page_id: PageId) -> Result<Option<ExclusiveGuard<'_>>> {
        loop {
            match self.lock_exclusive_any(page_id) {
                Ok(guard) => return Ok(Some(guard)),
                Err(Interrupt::Restart) => std::thread::yield_now(),
                Err(Interrupt::Miss(_)) => return Ok(None),
                Err(Interrupt::Error(e)) => return Err(e),
            }
        }
    }
}

/// An exclusive latch on a page in memory. Released (with a new version) on drop.
#[derive(Debug)]
pub struct ExclusiveGuard<'a> {
    pool: &'a BufferPool,
    page_id: PageId,
    dirty: bool,
}

impl<'a> ExclusiveGuard<'a> {
    /// The guard of a latch the caller just took; `dirty`: the page is marked dirty on release.
    #[inline(always)]
    pub(super) fn new(pool: &'a BufferPool, page_id: PageId, dirty: bool) -> Self {
        ExclusiveGuard { pool, page_id, dirty }
    }

    /// Whether the page is marked dirty on release (a freed page is not; recovery's
    /// replay decides).
    #[inline]
    pub(super) fn set_dirty(&mut self, dirty: bool) {
        self.dirty = dirty;
    }

    /// The latched page's id.
    #[inline(always)]
    pub fn page_id(&self) -> PageId {
        self.page_id
    }

    /// The page, to read.
    #[inline(always)]
    pub fn page(&self) -> &[u8] {
        self.pool.page_mut(self.page_id)
    }

    /// The page, to change: it will be written back before its frame is reused.
    #[inline(always)]
    pub fn page_mut(&mut self) -> &mut [u8] {
        self.dirty = true;
        if self.pool.capturing() {
            self.pool.note_change(self.page_id);
        }
        self.pool.page_mut(self.page_id)
    }

    /// Changes the page through `change`, which writes only inside the ranges it notes in
    /// its second argument (`Some` while a commit captures changes, `None` otherwise): the
    /// commit logs those ranges, with no copy of the page before and no diff after, which
    /// `page_mut` costs. Where a range is missing, recovery loses that change: debug builds
    /// check every tracked page against a copy at the commit's end
    /// (`Capture::changes`).
    #[inline]
    pub fn change_tracked<R>(
        &mut self,
        change: impl FnOnce(&mut [u8], Option<&mut Vec<(u16, u16)>>) -> R,
    ) -> R {
        self.dirty = true;
        if !self.pool.capturing() {
            return change(self.pool.page_mut(self.page_id), None);
        }
        let mut written = Vec::new();
        if self.pool.notes_after_change(self.page_id) {
            let result = change(self.pool.page_mut(self.page_id), Some(&mut written));
            self.pool.note_tracked_change(self.page_id, written);
            return result;
        }
        self.pool.note_tracked(self.page_id);
        let result = change(self.pool.page_mut(self.page_id), Some(&mut written));
        self.pool.note_written(self.page_id, &written);
        result
    }
}

impl Drop for ExclusiveGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.pool.unlock_exclusive(self.page_id, self.dirty);
    }
}

/// A shared latch on a page in memory.
#[derive(Debug)]
pub struct SharedGuard<'a> {
    pool: &'a BufferPool,
    page_id: PageId,
}

impl SharedGuard<'_> {
    /// The latched page's id.
    #[inline(always)]
    pub fn page_id(&self) -> PageId {
        self.page_id
    }

    /// The page (no writer changes it while the latch is held).
    #[inline(always)]
    pub fn page(&self) -> &[u8] {
        self.pool.page_mut(self.page_id)
    }
}

impl Drop for SharedGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.pool.unlock_shared(self.page_id);
    }
}
