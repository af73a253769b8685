//! The page allocator: which page ids are in use. Ids below `next` have been handed out at
//! least once (the file's logical size in pages); freed ones wait on the free list to be
//! handed out again. A new page gets a frame, zeros (unless it is reused while resident and
//! no commit is captured) and an exclusive latch; a freed one is marked free in memory,
//! never written again, and its id goes back on the list.

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Mutex;

use super::guard::ExclusiveGuard;
use super::state::{EVICTED, LOCKED, MARKED, UNLOCKED};
use super::{BufferPool, Interrupt};
use crate::error::{Error, PageId, Result};
use crate::format::page::{PageKind, OFFSET_FLAGS, OFFSET_KIND};

/// At most this many page ids are kept for commits under way ([`BufferPool::reserve_pages`]):
/// enough for a commit of a few hundred keys to split its way through a full database.
const COMMIT_RESERVE_PAGES: u64 = 64;

/// The allocator's state.
#[derive(Debug)]
pub(super) struct PageIds {
    /// Page ids below this have been handed out at least once.
    next: AtomicU64,
    free: Mutex<Vec<PageId>>,
}

impl PageIds {
    /// `page_count` ids handed out, of which `free` are free.
    pub(super) fn new(page_count: u64, free: Vec<PageId>) -> Self {
        PageIds { next: AtomicU64::new(page_count), free: Mutex::new(free) }
    }

    /// Page ids handed out so far.
    #[inline]
    pub(super) fn count(&self) -> u64 {
        self.next.load(Ordering::Acquire)
    }

    /// Raises the count to at least `count` (recovery meeting a page past the end).
    pub(super) fn raise(&self, count: u64) {
        self.next.fetch_max(count, Ordering::AcqRel);
    }

    fn push_free(&self, page_id: PageId) {
        self.free.lock().unwrap().push(page_id);
    }

    pub(super) fn free_count(&self) -> usize {
        self.free.lock().unwrap().len()
    }
}

impl BufferPool {
    /// Page ids handed out so far: the file's logical size in pages.
    #[inline]
    pub fn page_count(&self) -> u64 {
        self.page_ids.count()
    }

    /// Page ids on the free list: freed pages a tree's next allocation reuses.
    pub fn free_page_count(&self) -> u64 {
        self.page_ids.free_count() as u64
    }

    /// Page ids the database may hand out at most (`Options::max_size_bytes`).
    pub fn max_pages(&self) -> u64 {
        self.table.max_pages()
    }

    /// Replaces the free list (after it was rebuilt by walking every tree).
    pub fn set_free_pages(&self, free: Vec<PageId>) {
        *self.page_ids.free.lock().unwrap() = free;
    }

    /// The free tree pages (a copy of the free list).
    pub fn free_pages(&self) -> Vec<PageId> {
        self.page_ids.free.lock().unwrap().clone()
    }

    /// Sets the allocator's state (after recovery): page count and free pages. A writable
    /// file grows to hold them; a read-only one stays as it is (pages past its end exist only
    /// in memory, from the log).
    pub fn set_allocation(&self, page_count: u64, free: Vec<PageId>) -> Result<()> {
        if page_count > 0 && self.writable {
            self.file.ensure_page(page_count - 1)?;
        }
        self.page_ids.next.store(page_count, Ordering::Release);
        *self.page_ids.free.lock().unwrap() = free;
        Ok(())
    }

    /// Pages kept for commits that already changed pages: a commit that fails after
    /// changing pages fails the log (nothing can undo its changes), so a commit's first
    /// allocation, and object data, leave this many page ids unused.
    pub fn reserve_pages(&self) -> u64 {
        (self.table.max_pages() / 8).min(COMMIT_RESERVE_PAGES)
    }

    /// Page ids still to be had: never handed out, or free.
    fn room(&self, free_listed: usize) -> u64 {
        self.table.max_pages().saturating_sub(self.page_ids.count()) + free_listed as u64
    }

    /// Whether the ids never handed out alone leave more than the reserve: the common case,
    /// answered without the free list's lock.
    fn roomy(&self) -> bool {
        self.table.max_pages().saturating_sub(self.page_ids.count()) > self.reserve_pages()
    }

    /// Whether the running commit may dig into the reserve: it changed pages already (or
    /// none is running).
    fn may_use_reserve(&self) -> bool {
        !self.capturing() || self.captured_changes()
    }

    /// Fails with `DatabaseFull` unless `pages` page ids are to be had beyond the reserve:
    /// for a commit about to make changes that may need that many new pages (a batch),
    /// before it changes any.
    pub fn ensure_room(&self, pages: u64) -> Result<()> {
        if self.room(self.page_ids.free_count()) < pages + self.reserve_pages() {
            return Err(Error::DatabaseFull { max_pages: self.table.max_pages() });
        }
        Ok(())
    }

    /// A new page, zero-filled unless it is a reused one, latched exclusively and dirty.
    pub fn allocate(&self) -> Result<ExclusiveGuard<'_>> {
        // (Racy against other allocations: the reserve is a margin, not an exact count.)
        if !self.roomy()
            && self.room(self.page_ids.free_count()) <= self.reserve_pages()
            && !self.may_use_reserve()
        {
            return Err(Error::DatabaseFull { max_pages: self.table.max_pages() });
        }
        let reused = self.page_ids.free.lock().unwrap().pop();
        let page_id = match reused {
            Some(id) => id,
            None => {
                let id = self.page_ids.next.fetch_add(1, Ordering::AcqRel);
                let max_pages = self.table.max_pages();
                if id >= max_pages {
                    self.page_ids.next.fetch_sub(1, Ordering::AcqRel);
                    return Err(Error::DatabaseFull { max_pages });
                }
                // The workers write pages back through their own engines: the devices must
                // hold the page before its first write-back.
                if let Err(e) = self.file.ensure_page(id) {
                    self.page_ids.push_free(id);
                    return Err(e);
                }
                id
            }
        };
        loop {
            let now = self.table.load(page_id);
            match now.state() {
                EVICTED => {
                    if !self.table.cas(page_id, now, now.with_state(LOCKED)) {
                        continue;
                    }
                    let frame = match self.reserve_frame() {
                        Ok(frame) => frame,
                        Err(e) => {
                            self.table.store(page_id, now.bumped(EVICTED));
                            self.page_ids.push_free(page_id);
                            return Err(e);
                        }
                    };
                    self.table.set_frame(page_id, frame);
                    fence(Ordering::Release);
                    // The frame still holds whatever page used it last.
                    self.page_mut(page_id).fill(0);
                    self.resident.insert(page_id);
                    self.note_new(page_id);
                    return Ok(ExclusiveGuard::new(self, page_id, true));
                }
                UNLOCKED | MARKED => {
                    if self.table.cas(page_id, now, now.with_state(LOCKED)) {
                        fence(Ordering::Release);
                        if self.capturing() {
                            // Logged against a zeroed page: start from one.
                            self.page_mut(page_id).fill(0);
                        }
                        self.note_new(page_id);
                        return Ok(ExclusiveGuard::new(self, page_id, true));
                    }
                }
                _ => std::thread::yield_now(),
            }
        }
    }

    /// A run of `pages` new page ids for object data, taken past the end (never from the free
    /// list: a page freed by a commit whose record is not durable yet may still be needed by
    /// a recovery, and object data is written in place before its commit). The devices are
    /// grown to hold them. The pages get no frames: object data bypasses the pool.
    pub fn allocate_run(&self, pages: u64) -> Result<PageId> {
        assert!(pages > 0);
        let first = self.page_ids.next.fetch_add(pages, Ordering::AcqRel);
        // (Object data never takes the commits' reserve.)
        let max_pages = self.table.max_pages();
        let limit = max_pages.saturating_sub(self.reserve_pages());
        if first + pages > limit {
            // Ids past the end were never used: give them back as free pages unless later
            // ones were handed out meanwhile.
            let end = first + pages;
            if self
                .page_ids
                .next
                .compare_exchange(end, first, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                for id in first..end.min(max_pages) {
                    self.page_ids.push_free(id);
                }
            }
            return Err(Error::DatabaseFull { max_pages });
        }
        if let Err(e) = self.file.ensure_page(first + pages - 1) {
            for id in first..first + pages {
                self.page_ids.push_free(id);
            }
            return Err(e);
        }
        Ok(first)
    }

    /// Drops page `page_id` from memory if it is there, without writing it: recovery meeting
    /// a page that became object data (whatever node it was is gone; a write-back of the
    /// node would overwrite the data).
    pub fn discard(&self, page_id: PageId) -> Result<()> {
        if self.table.load(page_id).state() == EVICTED {
            return Ok(());
        }
        let free = self.page_ids.free_count();
        self.free_by_id(page_id)?;
        // `free_by_id` listed it as free; recovery sets the allocator's state afterwards, so
        // the list is only kept tidy here.
        let mut list = self.page_ids.free.lock().unwrap();
        if list.len() > free && list.last() == Some(&page_id) {
            list.pop();
        }
        Ok(())
    }

    /// Frees a latched page: it is marked free in memory, never written again, and its id
    /// goes back to the allocator.
    pub fn free(&self, mut guard: ExclusiveGuard<'_>) {
        let page_id = guard.page_id();
        let memory = guard.page_mut();
        memory[OFFSET_KIND] = PageKind::Free as u8;
        memory[OFFSET_FLAGS] = 0;
        guard.set_dirty(false);
        drop(guard);
        self.note_freed(page_id);
        self.page_ids.push_free(page_id);
    }

    /// Frees page `page_id`, in memory or not, without reading it.
    pub fn free_by_id(&self, page_id: PageId) -> Result<()> {
        loop {
            let now = self.table.load(page_id);
            if now.state() == EVICTED {
                if self.versions.imaging() && self.capturing() {
                    // A snapshot may still read it: keep its bytes, from the file (freed,
                    // it is never written again).
                    let mut before = crate::io::AlignedPage::zeroed();
                    self.file.read_page(page_id, before.bytes_mut())?;
                    self.keep_image(page_id, before.bytes());
                }
                if self.table.cas(page_id, now, now.bumped(EVICTED)) {
                    self.note_freed(page_id);
                    self.page_ids.push_free(page_id);
                    return Ok(());
                }
                continue;
            }
            match self.lock_exclusive_any(page_id) {
                Ok(guard) => {
                    self.free(guard);
                    return Ok(());
                }
                Err(Interrupt::Miss(_)) | Err(Interrupt::Restart) => std::thread::yield_now(),
                Err(Interrupt::Error(e)) => return Err(e),
            }
        }
    }
}
