//! The translation table: one entry per page id, holding the page-state word (`state.rs`),
//! the frame the page occupies while it is in memory, and its write-back bits. Translating a
//! page id is one array access, never a hash lookup (after vmcache, Leis et al. SIGMOD 2023,
//! whose page-state array it keeps). The table is one anonymous mapping sized for
//! `max_pages` ids at start-up (`vmem.rs`): only the entries of pages ever used cost memory.
//!
//! | entry field  | size | meaning                                                        |
//! |--------------|------|----------------------------------------------------------------|
//! | `state`      | 8    | page-state word: latch state and version (`state.rs`)          |
//! | `frame`      | 4    | the frame the page occupies (meaningful while it is resident)  |
//! | `log_state`  | 4    | bits 0..30: checkpoint epoch of its last logged image;         |
//! |              |      | bit 29 `VERSIONED`, bit 30 `WRITING`, bit 31 `PINNED` (below)   |
//!
//! Every function here is on the path of every page access: all are `#[inline(always)]`
//! (they are a few instructions each, and inline into the B+tree's attempts).

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::state::{PageState, LOCKED, UNLOCKED};
use super::vmem::VirtualRegion;
use crate::error::{PageId, Result};

/// `Slot::log_state` bit: changed by the commit in progress (`capture.rs`).
pub(super) const PINNED: u32 = 1 << 31;
/// `Slot::log_state` bit: a copy of the page is being written by a checkpoint, without the
/// page's latch; until it is on disk, the page is not evicted nor written again.
pub(super) const WRITING: u32 = 1 << 30;
/// `Slot::log_state` bit: the page has old versions kept for snapshots (`versions.rs`).
pub(super) const VERSIONED: u32 = 1 << 29;
/// `Slot::log_state` bits of the epoch.
pub(super) const EPOCH_MASK: u32 = VERSIONED - 1;

/// One entry of the translation table: the page-state word and, while the page is in
/// memory, its frame. Both in one cache line, so a hit costs one miss at most.
#[repr(C, align(16))]
pub(super) struct Slot {
    state: AtomicU64,
    frame: AtomicU32,
    /// Bits 0..29 (`EPOCH_MASK`): the checkpoint epoch in which the log last got a full
    /// image of the page (0: never since open); a logged page is written back only if it
    /// has one from an epoch not older than the last completed checkpoint, so that a torn
    /// write can be repaired. Bit 31 (`PINNED`): a commit in progress changed the page; it is not
    /// written until the commit's record is logged (its bytes, LSN field included, may be
    /// anything meanwhile). Bit 30 (`WRITING`): a checkpoint is writing a copy of it. Bit 29
    /// (`VERSIONED`): old versions of it are kept for snapshots (`versions.rs`).
    log_state: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 16);

/// The table of `max_pages` entries, all zero at first (every page evicted).
#[derive(Debug)]
pub(super) struct PageTable {
    slots: VirtualRegion,
    max_pages: u64,
}

impl PageTable {
    pub(super) fn new(max_pages: u64) -> Result<Self> {
        let slots = VirtualRegion::new(
            max_pages as usize * std::mem::size_of::<Slot>(),
            "page translation table",
        )?;
        slots.prefer_huge_pages();
        Ok(PageTable { slots, max_pages })
    }

    /// Page ids the table can translate.
    #[inline(always)]
    pub(super) fn max_pages(&self) -> u64 {
        self.max_pages
    }

    #[inline(always)]
    fn slot(&self, page_id: PageId) -> &Slot {
        assert!(page_id < self.max_pages);
        // SAFETY: the slots region holds `max_pages` zero-initialised `Slot`s (two u64s each;
        // all-zero is a valid `Slot`: evicted, frame 0), suitably aligned (mmap returns
        // page-aligned memory), and is only ever accessed atomically.
        unsafe { &*(self.slots.base() as *const Slot).add(page_id as usize) }
    }

    /// Prefetches the page's entry ([`super::frames::prefetch_line`]).
    #[inline(always)]
    pub(super) fn prefetch(&self, page_id: PageId) {
        if page_id < self.max_pages {
            // (In bounds: `slot`'s region.)
            let at = page_id as usize * std::mem::size_of::<Slot>();
            super::frames::prefetch_line(self.slots.base().wrapping_add(at));
        }
    }

    /// The page's state word (acquire: for this state, the frame and the bytes are seen).
    #[inline(always)]
    pub(super) fn load(&self, page_id: PageId) -> PageState {
        PageState(self.slot(page_id).state.load(Ordering::Acquire))
    }

    /// The page's state word with no ordering (the seqlock reader's re-check, after its
    /// own fence).
    #[inline(always)]
    pub(super) fn load_relaxed(&self, page_id: PageId) -> PageState {
        PageState(self.slot(page_id).state.load(Ordering::Relaxed))
    }

    /// Moves the page from state `from` to `to` if it is still in `from`.
    #[inline(always)]
    pub(super) fn cas(&self, page_id: PageId, from: PageState, to: PageState) -> bool {
        self.slot(page_id)
            .state
            .compare_exchange(from.0, to.0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Sets the page's state (release), by the holder of its latch.
    #[inline(always)]
    pub(super) fn store(&self, page_id: PageId, to: PageState) {
        self.slot(page_id).state.store(to.0, Ordering::Release);
    }

    /// Releases the exclusive latch on page `page_id` with a new version, after running
    /// `before_release` with the page's frame (to mark the page dirty). One lookup of the
    /// entry for both: this runs at every exclusive guard's drop.
    #[inline(always)]
    pub(super) fn release_exclusive(&self, page_id: PageId, before_release: impl FnOnce(u32)) {
        let slot = self.slot(page_id);
        before_release(slot.frame.load(Ordering::Relaxed));
        let now = PageState(slot.state.load(Ordering::Acquire));
        debug_assert_eq!(now.state(), LOCKED, "page {page_id} not latched");
        slot.state.store(now.bumped(UNLOCKED).0, Ordering::Release);
    }

    /// The frame page `page_id` occupies (or last occupied: optimistic readers may see a
    /// stale frame, and then fail their version check).
    #[inline(always)]
    pub(super) fn frame(&self, page_id: PageId) -> u32 {
        self.slot(page_id).frame.load(Ordering::Relaxed)
    }

    /// Gives latched page `page_id` the frame `frame`.
    #[inline(always)]
    pub(super) fn set_frame(&self, page_id: PageId, frame: u32) {
        self.slot(page_id).frame.store(frame, Ordering::Relaxed);
    }

    /// The page's write-back bits and image epoch (`PINNED`, `WRITING`, `EPOCH_MASK`).
    #[inline(always)]
    pub(super) fn log_state(&self, page_id: PageId) -> &AtomicU32 {
        &self.slot(page_id).log_state
    }
}

/// Sets the epoch bits of a `Slot::log_state`, keeping its flags.
pub(super) fn set_epoch(log_state: &AtomicU32, epoch: u32) {
    debug_assert_eq!(epoch & !EPOCH_MASK, 0, "epoch {epoch} overflows its bits");
    let _ = log_state
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| Some(now & !EPOCH_MASK | epoch));
}
