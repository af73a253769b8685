//! Loads: reading an evicted page from disk into a frame, and the tasks that wait for a
//! read someone else started. A load moves the page `EVICTED -> LOADING`, gives it a frame,
//! reads and verifies it (checksum, own id and kind, then the validator's structural check),
//! and ends `-> UNLOCKED` with a new version, or back `-> EVICTED` (frame returned) if the
//! read or the check failed; either way every waiter is woken. A task that saw a page
//! `LOADING` waits until whoever moved it there moves it out, and only that wakes it: every
//! way out of `LOADING` goes through `LoadWaiters::wake`.
//!
//! Two ways in: `load`, blocking (threads off a worker), and `begin_load` + `finish_load`,
//! cut where the I/O happens so that a worker can queue the read on its engine and go on.

use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::task::Waker;

use super::state::{PageState, EVICTED, LOADING, LOCKED, UNLOCKED};
use super::BufferPool;
use crate::error::{Error, PageId, Result};
use crate::format::page::{self, PAGE_SIZE};
use crate::id_hash::PageMap;

/// Tasks waiting for a page that someone else (another worker, or a blocking thread) is
/// reading: woken when that read ends, however it ends. Sharded by page id; a load that
/// nobody waits for pays one atomic load.
#[derive(Debug, Default)]
pub(super) struct LoadWaiters {
    shards: [Mutex<PageMap<Vec<Waker>>>; 16],
    count: AtomicUsize,
}

impl LoadWaiters {
    fn shard(&self, page_id: PageId) -> &Mutex<PageMap<Vec<Waker>>> {
        &self.shards[(page_id % self.shards.len() as u64) as usize]
    }

    fn add(&self, page_id: PageId, waker: &Waker) {
        let mut shard = self.shard(page_id).lock().unwrap();
        shard.entry(page_id).or_default().push(waker.clone());
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// Wakes everyone waiting for `page_id`; the caller changed its state first.
    fn wake(&self, page_id: PageId) {
        // Pairs with the fence in `wait_for_load` (after `add`, before its re-check of the
        // state): either the waiter sees the new state, or this sees the waiter. A fence on
        // both sides, not the SeqCst load alone: the caller's store of the state is only a
        // release, and a load after it may be done before the store is seen by other cores
        // (x86's store buffer does it). The waiter then found the read still under way and
        // this found nobody waiting, and the task slept for good, both workers idle.
        fence(Ordering::SeqCst);
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        let wakers = self.shard(page_id).lock().unwrap().remove(&page_id);
        if let Some(wakers) = wakers {
            self.count.fetch_sub(wakers.len(), Ordering::SeqCst);
            wakers.into_iter().for_each(Waker::wake);
        }
    }
}

/// What [`BufferPool::begin_load`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadStart {
    /// The page is in memory (or became so meanwhile): nothing to do.
    Resident,
    /// The page is latched: someone is loading, evicting or changing it. Try again later.
    Busy,
    /// No frame is free: evict first, then try again.
    NoFrame,
    /// Someone else is reading the page: wait with [`BufferPool::wait_for_load`].
    Loading,
    /// The page is latched for this caller and has a frame: read it into
    /// [`BufferPool::frame_ptr`], then call [`BufferPool::finish_load`].
    Started,
}

impl BufferPool {
    /// Reads page `page_id` from disk into the pool, blocking, unless it is there already;
    /// if another thread is reading it, waits for that read to end.
    pub fn load(&self, page_id: PageId) -> Result<()> {
        self.check_id(page_id)?;
        let mut now = self.table.load(page_id);
        while now.state() == LOADING {
            std::thread::yield_now();
            now = self.table.load(page_id);
        }
        if now.state() != EVICTED || !self.table.cas(page_id, now, now.with_state(LOADING)) {
            return Ok(());
        }
        let frame = match self.frame_for(page_id, now) {
            Ok(frame) => frame,
            Err(e) => {
                // Back to evicted (`frame_for`): whoever saw it loading meanwhile goes on.
                self.load_waiters.wake(page_id);
                return Err(e);
            }
        };
        self.note_loader(frame);
        let result = match self.fill_from_tier(page_id) {
            true => Ok(()),
            false => self.read_from_disk(page_id),
        };
        if let Err(e) = result {
            self.table.store(page_id, now.bumped(EVICTED));
            self.give_frames([frame]);
            self.load_waiters.wake(page_id);
            return Err(e);
        }
        self.resident.insert(page_id);
        self.table.store(page_id, now.bumped(UNLOCKED));
        self.load_waiters.wake(page_id);
        Ok(())
    }

    /// Fills the frame of page `page_id` (latched, loading) from the second tier if it holds
    /// a copy that verifies; false if it does not (read it from the disk).
    fn fill_from_tier(&self, page_id: PageId) -> bool {
        let Some(tier) = &self.tier else { return false };
        if crate::worker_context::bypassing_tier() {
            return false;
        }
        tier.read(page_id, self.page_mut(page_id)) && self.verify_tier_copy(page_id, tier)
    }

    /// Whether the tier's copy now in page `page_id`'s frame verifies as a disk read would;
    /// a damaged copy is dropped (the tier is only a cache, the disk has the page).
    fn verify_tier_copy(&self, page_id: PageId, tier: &super::Tier) -> bool {
        if self.verify_read(self.page_mut(page_id), page_id).is_err() {
            tier.invalidate(page_id);
            return false;
        }
        true
    }

    /// Ends a load whose frame now holds a verified copy from the tier: the page is in
    /// memory, and whoever waited for it goes on.
    fn loaded_from_tier(&self, page_id: PageId) {
        let now = self.table.load(page_id);
        debug_assert_eq!(now.state(), LOADING);
        self.resident.insert(page_id);
        self.table.store(page_id, now.bumped(UNLOCKED));
        self.load_waiters.wake(page_id);
    }

    /// Ends a load begun by `begin_load` from the second tier, if it holds the page: true
    /// when the page is in memory now (no read to issue).
    pub fn finish_from_tier(&self, page_id: PageId) -> bool {
        if !self.fill_from_tier(page_id) {
            return false;
        }
        self.loaded_from_tier(page_id);
        true
    }

    /// The copy of `page_id` a worker should read through its ring instead of the disk, for
    /// a load begun by `begin_load`: a block medium's, if the tier holds one (counted as a
    /// lookup). `None`: read the disk.
    pub fn tier_read_start(&self, page_id: PageId) -> Option<super::TierRead> {
        let tier = self.tier.as_ref()?;
        if !tier.is_block() || crate::worker_context::bypassing_tier() {
            return None;
        }
        tier.locate(page_id)
    }

    /// Ends a load whose ring read of the tier's copy `read` finished with `result`: true
    /// when the page is in memory now, verified; false when the copy could not be used
    /// (changed or pushed out meanwhile, damaged, a failed read) and the caller must read
    /// the disk instead (the page stays latched for that read).
    pub fn finish_tier_load(
        &self,
        page_id: PageId,
        read: &super::TierRead,
        result: &std::io::Result<usize>,
    ) -> bool {
        let Some(tier) = &self.tier else { return false };
        let whole = matches!(result, Ok(n) if *n == PAGE_SIZE);
        if !whole || !tier.read_done(page_id, read) || !self.verify_tier_copy(page_id, tier) {
            return false;
        }
        self.loaded_from_tier(page_id);
        true
    }

    /// Offers page `page_id`, latched on its way out with its bytes as on disk, to the
    /// second tier (a freed page is not offered).
    pub(super) fn offer_to_tier(&self, page_id: PageId) {
        let Some(tier) = &self.tier else { return };
        let frame = self.table.frame(page_id) as usize;
        if self.scan_loaded.get(frame).is_some_and(|s| s.load(Ordering::Relaxed)) {
            return; // scans bypass the tier
        }
        let memory = self.page_mut(page_id);
        if memory[page::OFFSET_KIND] == page::PageKind::Free as u8
            || memory[page::OFFSET_FLAGS] & page::FLAG_DIRTY != 0
        {
            return;
        }
        tier.offer(page_id, memory);
    }

    fn read_from_disk(&self, page_id: PageId) -> Result<()> {
        let memory = self.page_mut(page_id);
        self.file.read_page(page_id, memory)?;
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        self.verify_read(memory, page_id)?;
        self.tag_read(memory);
        Ok(())
    }

    /// Verifies a page just read from disk, before anyone else sees it: checksum, own id and
    /// kind (`page::verify`), then its structure (`validator`).
    pub(super) fn verify_read(&self, memory: &[u8], page_id: PageId) -> Result<()> {
        page::verify(memory, page_id).and_then(|()| self.validate_structure(memory)).map_err(
            |reason| Error::Corrupt { page: page_id, file: self.file.path().to_owned(), reason },
        )
    }

    pub(super) fn validate_structure(&self, memory: &[u8]) -> std::result::Result<(), String> {
        self.validator.map_or(Ok(()), |validate| validate(memory))
    }

    /// Gives page `page_id`, which the caller moved out of state `now` (evicted), a frame;
    /// if none can be had, puts the page back as it was.
    pub(super) fn frame_for(&self, page_id: PageId, now: PageState) -> Result<u32> {
        match self.reserve_frame() {
            Ok(frame) => {
                self.table.set_frame(page_id, frame);
                Ok(frame)
            }
            Err(e) => {
                self.table.store(page_id, now.bumped(EVICTED));
                Err(e)
            }
        }
    }

    /// Begins loading `page_id` without waiting for anything.
    pub fn begin_load(&self, page_id: PageId) -> Result<LoadStart> {
        self.check_id(page_id)?;
        let now = self.table.load(page_id);
        match now.state() {
            EVICTED => {}
            LOADING => return Ok(LoadStart::Loading),
            LOCKED => return Ok(LoadStart::Busy),
            _ => return Ok(LoadStart::Resident),
        }
        // The frame before the state: a page is loading only while a read of it is coming,
        // whose end (`finish_load`) wakes whoever waits for it. Moved to loading and back for
        // want of a frame, it would let a task of another worker see it loading and wait for
        // a read nobody starts.
        let Some(frame) = self.frame_alloc.take() else {
            return Ok(LoadStart::NoFrame);
        };
        if !self.table.cas(page_id, now, now.with_state(LOADING)) {
            self.give_frames([frame]);
            return Ok(LoadStart::Busy);
        }
        self.table.set_frame(page_id, frame);
        self.note_loader(frame);
        Ok(LoadStart::Started)
    }

    /// The memory of page `page_id`, for I/O by the holder of its exclusive latch.
    pub fn frame_ptr(&self, page_id: PageId) -> *mut u8 {
        self.page_ptr(page_id)
    }

    /// Ends a load begun by `begin_load`, given how the read went: verifies the page and
    /// unlatches it, or gives its frame back and leaves it evicted.
    pub fn finish_load(&self, page_id: PageId, read: std::io::Result<usize>) -> Result<()> {
        let now = self.table.load(page_id);
        debug_assert_eq!(now.state(), LOADING);
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        let outcome = match read {
            Ok(bytes) => {
                let memory = self.page_mut(page_id);
                if bytes < PAGE_SIZE {
                    memory[bytes..].fill(0); // past the end of the file
                }
                let verified = self.verify_read(memory, page_id);
                if verified.is_ok() {
                    self.tag_read(memory);
                }
                verified
            }
            Err(e) => Err(Error::io(
                format!("reading page {page_id} of {}", self.file.path().display()),
                e,
            )),
        };
        let result = match outcome {
            Ok(()) => {
                self.resident.insert(page_id);
                self.table.store(page_id, now.bumped(UNLOCKED));
                Ok(())
            }
            Err(e) => {
                let frame = self.table.frame(page_id);
                self.table.store(page_id, now.bumped(EVICTED));
                self.give_frames([frame]);
                Err(e)
            }
        };
        self.load_waiters.wake(page_id);
        result
    }

    /// Registers `waker` to be woken when the read of `page_id` under way ends (see
    /// [`LoadStart::Loading`]). Returns false, registering nothing that matters, when that
    /// read has ended already: the caller goes on at once.
    pub fn wait_for_load(&self, page_id: PageId, waker: &Waker) -> bool {
        self.load_waiters.add(page_id, waker);
        fence(Ordering::SeqCst);
        // Re-checked after registering (the fence pairs with the one in `LoadWaiters::wake`):
        // a read that ended before this saw our waker or left a state we see now. A stale
        // registration only costs a spurious wake-up.
        self.table.load(page_id).state() == LOADING
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, AtomicUsize};
    use std::sync::Arc;

    use super::*;

    use crate::testing::WakeCount as Count;

    /// Waits until `at` reaches `round`, spinning, then yielding (the other thread may
    /// share this core).
    fn wait_until(at: &AtomicU64, round: u64) -> u64 {
        let mut spins = 0;
        loop {
            let now = at.load(Ordering::Acquire);
            if now >= round {
                return now;
            }
            if spins < 1000 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Regression: `wake` read the count of waiters right after its caller's (release)
    /// store of the page's new state, and a core may do that read before the store is seen
    /// by the others (x86's store buffer does). A waiter that registered meanwhile then saw
    /// the read still under way and the waker saw no waiter: the waiter slept for good,
    /// both workers idle (as `tasks.rs`'s I/O error test once hung). Here the two race
    /// round after round, as `finish_load` and `wait_for_load` do, on a state word of
    /// their own; without the fence in `wake`, most runs lose a few waiters.
    #[test]
    fn a_waiter_that_saw_the_read_under_way_is_woken_when_it_ends() {
        const PAGE: PageId = 7;
        let waiters = LoadWaiters::default();
        let state = AtomicU64::new(0); // the round whose read has ended
        let (go, done) = (AtomicU64::new(0), AtomicU64::new(0));
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let registered = AtomicU64::new(0);
        let (mut lost, mut rounds) = (0, 0);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for round in 1.. {
                    if wait_until(&go, round) == u64::MAX {
                        return;
                    }
                    // `wait_for_load`: register, then check the read is still under way.
                    waiters.add(PAGE, &waker);
                    fence(Ordering::SeqCst);
                    let waiting = state.load(Ordering::Acquire) < round;
                    registered.store(u64::from(waiting), Ordering::Relaxed);
                    done.store(round, Ordering::Release);
                }
            });
            let began = std::time::Instant::now();
            while rounds < 200_000 && began.elapsed() < std::time::Duration::from_secs(2) {
                rounds += 1;
                let before = count.0.load(Ordering::SeqCst);
                go.store(rounds, Ordering::Release);
                // The read ends a little later each round, so that the waiter registers
                // at every moment of the wake.
                for _ in 0..rounds % 32 {
                    std::hint::spin_loop();
                }
                // `finish_load`: the new state, then the waiters.
                state.store(rounds, Ordering::Release);
                waiters.wake(PAGE);
                wait_until(&done, rounds);
                if registered.load(Ordering::Relaxed) == 1
                    && count.0.load(Ordering::SeqCst) == before
                {
                    lost += 1;
                }
                // A registration that found the read over is stale: clear it for the next
                // round, as the page's next load would.
                waiters.wake(PAGE);
            }
            go.store(u64::MAX, Ordering::Release);
        });
        assert_eq!(lost, 0, "waiters never woken in {rounds} rounds");
    }
}
