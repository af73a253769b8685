//! The frames no page occupies: the free list, and the *flex* frames the change buffer may
//! borrow. The last frames of the pool (from `flex_from` up) are flex frames: they are left
//! out of the memory I/O may pin (`frames_region`), so that a *retired* one's memory can go
//! back to the system while the change buffer uses it (`retire_flex_frames`).
//!
//! States of a frame: *free* (on the free list) → *occupied* (a page's: taken by a load or an
//! allocation, given back by eviction or a failed load) → free; a flex frame may also be
//! *retired* (memory given back, on the retired list) instead of free, from either: a free
//! one at once, an occupied one when eviction frees it. `check_invariants` asserts that no
//! frame is on both lists nor twice on one, and that only flex frames retire.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::frames::Frames;
use super::BufferPool;
use crate::error::PageId;

/// The frame lists and the counters derived from them.
#[derive(Debug)]
pub(super) struct FrameAlloc {
    lists: Mutex<FrameLists>,
    pool_pages: u64,
    /// Frames from this one up are flex frames.
    flex_from: u32,
    /// Flex frames retired (their memory given back, lent to the change buffer).
    retired_count: AtomicU64,
    /// Frames pages occupy (`pool_pages` less the free and the retired frames), readable
    /// without the lock.
    resident_count: AtomicU64,
}

#[derive(Debug, Default)]
struct FrameLists {
    free: Vec<u32>,
    retired: Vec<u32>,
    /// How many flex frames should be retired: freed flex frames retire until there are.
    want_retired: usize,
}

impl FrameAlloc {
    /// Every one of `pool_pages` frames free, none flex.
    pub(super) fn new(pool_pages: u64) -> Self {
        // Lowest frames first, so that a small working set touches little memory.
        let free = (0..pool_pages as u32).rev().collect();
        FrameAlloc {
            lists: Mutex::new(FrameLists { free, ..FrameLists::default() }),
            pool_pages,
            flex_from: pool_pages as u32,
            retired_count: AtomicU64::new(0),
            resident_count: AtomicU64::new(0),
        }
    }

    /// Makes the last `flex` frames flex frames (before the pool is shared).
    pub(super) fn set_flex_frames(&mut self, flex: u64) {
        self.flex_from = self.pool_pages.saturating_sub(flex) as u32;
    }

    /// The first flex frame: frames below it may be pinned by I/O.
    pub(super) fn flex_from(&self) -> u32 {
        self.flex_from
    }

    pub(super) fn resident(&self) -> u64 {
        self.resident_count.load(Ordering::Acquire)
    }

    pub(super) fn retired(&self) -> u64 {
        self.retired_count.load(Ordering::Acquire)
    }

    /// Takes a free frame, if any.
    pub(super) fn take(&self) -> Option<u32> {
        let mut lists = self.lists.lock().unwrap();
        let frame = lists.free.pop()?;
        self.count(&lists);
        Some(frame)
    }

    /// Puts frames no page occupies any more back on the free list (a flex frame retires
    /// instead while fewer are retired than wanted).
    pub(super) fn give(&self, frames: &Frames, given: impl IntoIterator<Item = u32>) {
        let mut lists = self.lists.lock().unwrap();
        for frame in given {
            if frame >= self.flex_from && lists.retired.len() < lists.want_retired {
                // Under the lock: nobody takes the frame meanwhile.
                frames.release(frame);
                lists.retired.push(frame);
            } else {
                lists.free.push(frame);
            }
        }
        self.count(&lists);
    }

    /// Wants `count` flex frames retired: free ones retire at once, the others as `give`
    /// gets them; retired ones beyond `count` go back on the free list.
    fn retire_flex(&self, frames: &Frames, count: usize) {
        let mut lists = self.lists.lock().unwrap();
        let raise = count > lists.want_retired;
        lists.want_retired = count;
        if raise {
            let mut i = 0;
            while i < lists.free.len() && lists.retired.len() < count {
                if lists.free[i] >= self.flex_from {
                    let frame = lists.free.swap_remove(i);
                    frames.release(frame);
                    lists.retired.push(frame);
                } else {
                    i += 1;
                }
            }
        }
        while lists.retired.len() > count {
            let frame = lists.retired.pop().expect("more than count");
            lists.free.push(frame);
        }
        self.count(&lists);
    }

    /// Updates the counters of resident and retired frames (under the lock).
    fn count(&self, lists: &FrameLists) {
        let unoccupied = (lists.free.len() + lists.retired.len()) as u64;
        debug_assert!(unoccupied <= self.pool_pages);
        self.retired_count.store(lists.retired.len() as u64, Ordering::Release);
        self.resident_count.store(self.pool_pages - unoccupied, Ordering::Release);
    }

    /// Panics unless the lists agree with themselves; marks each listed frame's `owner`
    /// `PageId::MAX` (for the pool's check of the frames pages occupy).
    pub(super) fn check_invariants(&self, owner: &mut [Option<PageId>]) {
        let lists = self.lists.lock().unwrap();
        for &frame in lists.free.iter().chain(&lists.retired) {
            assert!(
                owner[frame as usize].replace(PageId::MAX).is_none(),
                "frame {frame} twice free (or retired)"
            );
        }
        assert!(lists.retired.iter().all(|&f| f >= self.flex_from), "a retired frame not flex");
    }
}

/// Frames as the rest of the engine sees them: flex frames lent to the change buffer, the
/// memory I/O may pin, and whether frames run short.
impl BufferPool {
    /// Makes the last `flex` frames flex frames (see `alloc.rs`); before the pool is shared.
    pub fn with_flex_frames(mut self, flex: u64) -> Self {
        self.frame_alloc.set_flex_frames(flex);
        self
    }

    /// Frames the change buffer may borrow.
    pub fn flex_frames(&self) -> u64 {
        self.pool_pages - u64::from(self.frame_alloc.flex_from())
    }

    /// Flex frames retired now: their memory is the change buffer's.
    pub fn retired_frames(&self) -> u64 {
        self.frame_alloc.retired()
    }

    /// Asks for `count` flex frames (at most all) to be retired: free ones retire at once,
    /// the others as eviction frees them; retired ones beyond `count` go back on the free
    /// list. A retired frame's memory is given back to the system (`MADV_DONTNEED`).
    pub fn retire_flex_frames(&self, count: u64) {
        let count = count.min(self.flex_frames()) as usize;
        self.frame_alloc.retire_flex(&self.frames, count);
    }

    /// The frames' memory that I/O may pin (`IoEngine::register_memory`): every frame but
    /// the flex frames. It stays mapped for the pool's lifetime.
    pub fn frames_region(&self) -> (*mut u8, usize) {
        self.frames.region(self.frame_alloc.flex_from())
    }

    /// Whether fewer than `headroom` frames are free.
    pub fn frames_short(&self, headroom: u64) -> bool {
        self.frame_alloc.resident() + self.frame_alloc.retired() + headroom >= self.pool_pages
    }

    /// Puts frames no page occupies any more back (see [`FrameAlloc::give`]).
    pub(super) fn give_frames(&self, given: impl IntoIterator<Item = u32>) {
        // The next page in a frame given back starts cold (`evict.rs`, `Heat`).
        let heat = &self.heat;
        let given = given.into_iter().inspect(|&frame| {
            if let Some(heat) = heat.get(frame as usize) {
                heat.store(0, std::sync::atomic::Ordering::Relaxed);
            }
        });
        if self.scan_loaded.is_empty() {
            self.frame_alloc.give(&self.frames, given);
            return;
        }
        // The next page in a frame given back is no scan's until a scan loads it.
        let scan_loaded = &self.scan_loaded;
        let cleared = given.into_iter().inspect(|&frame| {
            if let Some(loaded) = scan_loaded.get(frame as usize) {
                loaded.store(false, std::sync::atomic::Ordering::Relaxed);
            }
        });
        self.frame_alloc.give(&self.frames, cleared);
    }
}
