//! The pool's side of recovery: pages read ahead of the log's replay, and the replay's own
//! access to a page, which unlike a normal load accepts a page that fails its checksum (torn,
//! never written, or beyond the file) and lets the replay judge it.

use std::sync::atomic::{fence, Ordering};

use super::state::{EVICTED, LOCKED};
use super::{BufferPool, Interrupt};
use crate::error::{Error, PageId, Result};
use crate::format::page::{self, PageKind, OFFSET_KIND};

impl BufferPool {
    /// Reads page `page_id` into the pool ahead of recovery's replay, if it is on the file,
    /// not in memory, whole (its checksum holds) and not a free page; otherwise leaves it for
    /// `recover_page` to read and judge. Safe beside the replay and other read-aheads.
    pub fn read_ahead_for_recovery(&self, page_id: PageId) -> Result<()> {
        if page_id >= self.page_count() {
            return Ok(());
        }
        let now = self.table.load(page_id);
        if now.state() != EVICTED || !self.table.cas(page_id, now, now.with_state(LOCKED)) {
            return Ok(());
        }
        let frame = self.frame_for(page_id, now)?;
        fence(Ordering::Release);
        let memory = self.page_mut(page_id);
        let whole = self.file.read_page(page_id, memory).is_ok()
            && self.verify_read(memory, page_id).is_ok()
            && memory[OFFSET_KIND] != PageKind::Free as u8;
        if whole {
            // In memory it reads as valid, as a fresh read of it would (`recover_page`).
            self.resident.insert(page_id);
            self.unlock_exclusive(page_id, false);
        } else {
            self.table.store(page_id, now.bumped(EVICTED));
            self.give_frames([frame]);
        }
        Ok(())
    }

    /// For recovery: runs `apply` on page `page_id`'s bytes, loaded from disk if needed,
    /// with whether they passed their checksum (`false`: torn, never written, or beyond
    /// the file). If `apply` returns true the page becomes dirty. A page read whole (its
    /// checksum holds) whose structure fails the validator is `Error::Corrupt`: it was
    /// written so, and the log repairs only torn pages.
    pub fn recover_page(
        &self,
        page_id: PageId,
        apply: impl FnOnce(&mut [u8], bool) -> bool,
    ) -> Result<()> {
        let max_pages = self.table.max_pages();
        if page_id >= max_pages {
            return Err(Error::Corrupt {
                page: page_id,
                file: self.file.path().to_owned(),
                reason: format!("the log names a page beyond max_pages ({max_pages})"),
            });
        }
        if page_id >= self.page_count() {
            if self.writable {
                self.file.ensure_page(page_id)?;
            }
            self.page_ids.raise(page_id + 1);
        }
        loop {
            let now = self.table.load(page_id);
            if now.state() == EVICTED {
                if !self.table.cas(page_id, now, now.with_state(LOCKED)) {
                    continue;
                }
                let frame = self.frame_for(page_id, now)?;
                fence(Ordering::Release);
                let memory = self.page_mut(page_id);
                let valid = match self.file.read_page(page_id, memory) {
                    Ok(()) => page::verify(memory, page_id).is_ok(),
                    Err(_) => {
                        memory.fill(0);
                        false
                    }
                };
                if valid {
                    if let Err(reason) = self.validate_structure(memory) {
                        self.table.store(page_id, now.bumped(EVICTED));
                        self.give_frames([frame]);
                        let file = self.file.path().to_owned();
                        return Err(Error::Corrupt { page: page_id, file, reason });
                    }
                }
                if !valid {
                    // Not a page: a free kind keeps it from being written unless replayed.
                    memory[OFFSET_KIND] = PageKind::Free as u8;
                }
                self.resident.insert(page_id);
                let dirty = apply(memory, valid);
                self.unlock_exclusive(page_id, dirty);
                return Ok(());
            }
            match self.lock_exclusive_any(page_id) {
                Ok(mut guard) => {
                    let memory = self.page_mut(page_id);
                    let valid = memory[OFFSET_KIND] != PageKind::Free as u8;
                    if apply(memory, valid) {
                        guard.set_dirty(true);
                    }
                    return Ok(());
                }
                Err(Interrupt::Restart) | Err(Interrupt::Miss(_)) => std::thread::yield_now(),
                Err(Interrupt::Error(e)) => return Err(e),
            }
        }
    }
}
