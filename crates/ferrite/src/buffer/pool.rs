//! The buffer pool: a fixed array of `pool_pages` frames, and a translation table indexed by
//! page id (after vmcache, Leis et al. SIGMOD 2023, whose page-state array it keeps), so that
//! translating a page id to its memory is one array access, never a hash lookup. Each entry
//! holds the page-state word (`state.rs`), which latches and versions the page, and the frame
//! the page occupies while it is in memory. Whoever runs short of free frames evicts a batch
//! with the clock, writing dirty victims first, and puts their frames back on the free list.
//!
//! Why frames and not vmcache's one mapping per page id with `madvise(MADV_DONTNEED)` on
//! eviction: without the exmap kernel module, every eviction then costs an unmap and a TLB
//! shootdown, and every read into a page's address a page fault that allocates and zeroes
//! memory before the device can write it. Measured on the out-of-memory lookup benchmark,
//! that was about 30 % of all CPU (docs/benchmarks.md). Frames stay mapped: a read lands in
//! memory that is already there, and eviction is a few stores.
//!
//! Racy reads: optimistic readers copy a page with a plain memory copy and then check that its
//! version did not move (the seqlock pattern); they never hold a Rust reference into a page
//! another thread may be writing. Exclusive holders write through `&mut [u8]` under the latch.

#![allow(unsafe_code)]

use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Waker;

use super::aligned::AlignedPage;
use super::capture::{encode_image, Capture};
use super::resident::ResidentSet;
use super::state::{PageState, EVICTED, LOADING, LOCKED, MARKED, SHARED_MAX, SHARED_MIN, UNLOCKED};
use super::vmem::VirtualRegion;
use super::{Attempt, Interrupt};
use crate::error::{Error, PageId, Result};
use crate::format::page::{self, PageKind, FLAG_DIRTY, OFFSET_FLAGS, OFFSET_KIND, PAGE_SIZE};
use crate::id_hash::PageMap;
use crate::io::PageFile;
use crate::wal::Log;

/// `Slot::log_state` bit: changed by the commit in progress.
const PINNED: u32 = 1 << 31;
/// `Slot::log_state` bit: a copy of the page is being written by a checkpoint, without the
/// page's latch; until it is on disk, the page is not evicted nor written again.
const WRITING: u32 = 1 << 30;
/// `Slot::log_state` bits of the epoch.
const EPOCH_MASK: u32 = WRITING - 1;

/// Most victims chosen per eviction round.
const EVICT_BATCH: usize = 64;

/// Victims per eviction round for a pool of `pool_pages`: up to 64, but a small fraction of
/// the pool, so that a round never throws out pages that were just read for a waiting user.
pub fn evict_batch_size(pool_pages: u64) -> usize {
    (pool_pages as usize / 16).clamp(1, EVICT_BATCH)
}
/// Threads writing pages back in `flush_all` (checkpoints): writes in flight at once.
const FLUSH_THREADS: usize = 8;
/// Fruitless eviction rounds, and time since the first, before a frame is given up for.
const EXHAUSTED_ROUNDS: u32 = 10_000;
const EXHAUSTED_AFTER: std::time::Duration = std::time::Duration::from_secs(1);
/// Pages `flush_all` prepares together: their images appended, then one wait for the log.
const FLUSH_GROUP: usize = 64;
/// Spins on a latched page before an optimistic reader gives up and restarts.
const SPIN_LIMIT: u32 = 64;

/// A structural check of a page just read from disk, run once its checksum, id and kind
/// passed (`format::page::verify`): `Err` says what is wrong. The buffer manager knows no
/// format above the common header, so the layer that does supplies it
/// (`BufferPool::with_page_validator`; `Db::open` installs `btree::node::validate_page`).
pub type PageValidator = fn(&[u8]) -> std::result::Result<(), String>;

/// Counters, for `ferrite stats` and the benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub pool_pages: u64,
    pub resident_pages: u64,
    pub page_count: u64,
    pub free_pages: u64,
    pub reads: u64,
    pub writes: u64,
    pub evictions: u64,
}

#[derive(Debug, Default)]
struct Counters {
    reads: AtomicU64,
    writes: AtomicU64,
    evictions: AtomicU64,
}

/// One entry of the translation table: the page-state word and, while the page is in
/// memory, its frame. Both in one cache line, so a hit costs one miss at most.
#[repr(C, align(16))]
struct Slot {
    state: AtomicU64,
    frame: AtomicU32,
    /// Bits 0..31: the checkpoint epoch in which the log last got a full image of the page
    /// (0: never since open); a logged page is written back only if it has one from an
    /// epoch not older than the last completed checkpoint, so that a torn write can be
    /// repaired. Bit 31 (`PINNED`): a commit in progress changed the page; it is not
    /// written until the commit's record is logged (its bytes, LSN field included, may be
    /// anything meanwhile). Bit 30 (`WRITING`): a checkpoint is writing a copy of it.
    log_state: AtomicU32,
}

/// The pool of frames and the page allocator over one page file.
#[derive(Debug)]
pub struct BufferPool {
    frames: VirtualRegion,
    slots: VirtualRegion,
    max_pages: u64,
    pool_pages: u64,
    resident: ResidentSet,
    /// Frames pages occupy (`pool_pages` less the free and the retired frames), readable
    /// without the lock.
    resident_count: AtomicU64,
    free_frames: Mutex<FreeFrames>,
    /// Frames from this one up are *flex* frames, which the change buffer may borrow: they
    /// are left out of `frames_region` (never pinned by a registration), so that a retired
    /// one's memory can go back to the system (`retire_flex_frames`).
    flex_from: u32,
    /// Flex frames retired (their memory given back, lent to the change buffer).
    retired_count: AtomicU64,
    file: PageFile,
    /// Whether pages may be written: a read-only pool keeps dirty pages (a replay's) in
    /// memory for good.
    writable: bool,
    /// Checks the structure of every page read from disk, if set.
    validator: Option<PageValidator>,
    /// Page ids below this have been handed out at least once.
    next_page: AtomicU64,
    free: Mutex<Vec<PageId>>,
    counters: Counters,
    load_waiters: LoadWaiters,
    /// The write-ahead log, once the database attached it: write-backs then follow its
    /// rules (the log first, a page image after each checkpoint).
    log: OnceLock<Arc<Log>>,
    /// The changes of the commit in progress (see `capture.rs`).
    capture: Mutex<Capture>,
    capturing: AtomicBool,
    /// Checkpoint epochs: the last one started and the last one completed.
    epoch_started: AtomicU32,
    epoch_completed: AtomicU32,
}

/// The frames no page occupies: free ones, and flex frames retired for the change buffer.
#[derive(Debug, Default)]
struct FreeFrames {
    free: Vec<u32>,
    retired: Vec<u32>,
    /// How many flex frames should be retired: freed flex frames retire until there are.
    want_retired: usize,
}

/// What `write_back_start` decided for a victim.
#[derive(Debug, Clone, Copy)]
pub enum WriteStart {
    Clean,
    /// Write these `PAGE_SIZE` bytes, then `finish_evict_many`.
    Write(*const u8),
    /// Not now (`abort_evict` it): after the log is durable up to the LSN, or (`None`) after
    /// the commit that changed it is logged.
    Later(Option<u64>),
}

/// What a dirty page needs before it may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteCheck {
    /// Clean or free: nothing to write.
    Clean,
    Ready,
    /// The log must be durable up to this LSN first (`Log::flush`).
    LogFirst(u64),
    /// A commit in progress changed it: not before its record is logged.
    Pinned,
}

/// Tasks waiting for a page that someone else (another worker, or a blocking thread) is
/// reading: woken when that read ends, however it ends. Sharded by page id; a load that
/// nobody waits for pays one atomic load.
#[derive(Debug, Default)]
struct LoadWaiters {
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
        // SeqCst pairs with `add` + the re-check in `wait_for_load`: either the waiter sees
        // the new state, or this sees the waiter.
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

impl BufferPool {
    /// A pool of `pool_pages` frames over `file`, addressing up to `max_pages` page ids, of
    /// which `page_count` are in use or free (`free`).
    pub fn new(
        file: PageFile,
        pool_pages: u64,
        max_pages: u64,
        page_count: u64,
        free: Vec<PageId>,
    ) -> Result<Self> {
        assert!(page_count <= max_pages);
        if pool_pages == 0 || pool_pages > u32::MAX as u64 {
            return Err(Error::BadOptions {
                reason: format!(
                    "a pool of {pool_pages} pages: it needs between 1 and {} frames",
                    u32::MAX
                ),
            });
        }
        let frames = VirtualRegion::new(pool_pages as usize * PAGE_SIZE, "buffer pool frames")?;
        let slots = VirtualRegion::new(
            max_pages as usize * std::mem::size_of::<Slot>(),
            "page translation table",
        )?;
        // Lowest frames first, so that a small working set touches little memory.
        let free_frames = (0..pool_pages as u32).rev().collect();
        Ok(BufferPool {
            frames,
            slots,
            max_pages,
            pool_pages,
            resident: ResidentSet::new(pool_pages + 64),
            resident_count: AtomicU64::new(0),
            free_frames: Mutex::new(FreeFrames { free: free_frames, ..FreeFrames::default() }),
            flex_from: pool_pages as u32,
            retired_count: AtomicU64::new(0),
            writable: file.is_writable(),
            file,
            validator: None,
            next_page: AtomicU64::new(page_count),
            free: Mutex::new(free),
            counters: Counters::default(),
            load_waiters: LoadWaiters::default(),
            log: OnceLock::new(),
            capture: Mutex::new(Capture::default()),
            capturing: AtomicBool::new(false),
            epoch_started: AtomicU32::new(1),
            epoch_completed: AtomicU32::new(1),
        })
    }

    pub fn file(&self) -> &PageFile {
        &self.file
    }

    pub fn pool_pages(&self) -> u64 {
        self.pool_pages
    }

    /// Makes the last `flex` frames flex frames (see `flex_from`); before the pool is shared.
    pub fn with_flex_frames(mut self, flex: u64) -> Self {
        self.flex_from = self.pool_pages.saturating_sub(flex) as u32;
        self
    }

    /// Has every page read from disk checked by `validator` too (before the pool is shared):
    /// a page that fails is `Error::Corrupt`, as one that fails its checksum.
    pub fn with_page_validator(mut self, validator: PageValidator) -> Self {
        self.validator = Some(validator);
        self
    }

    /// Frames the change buffer may borrow.
    pub fn flex_frames(&self) -> u64 {
        self.pool_pages - u64::from(self.flex_from)
    }

    /// Flex frames retired now: their memory is the change buffer's.
    pub fn retired_frames(&self) -> u64 {
        self.retired_count.load(Ordering::Acquire)
    }

    /// Asks for `count` flex frames (at most all) to be retired: free ones retire at once,
    /// the others as eviction frees them; retired ones beyond `count` go back on the free
    /// list. A retired frame's memory is given back to the system (`MADV_DONTNEED`).
    pub fn retire_flex_frames(&self, count: u64) {
        let count = count.min(self.flex_frames()) as usize;
        let mut frames = self.free_frames.lock().unwrap();
        let raise = count > frames.want_retired;
        frames.want_retired = count;
        if raise {
            let mut i = 0;
            while i < frames.free.len() && frames.retired.len() < count {
                if frames.free[i] >= self.flex_from {
                    let frame = frames.free.swap_remove(i);
                    self.release_frame(frame);
                    frames.retired.push(frame);
                } else {
                    i += 1;
                }
            }
        }
        while frames.retired.len() > count {
            let frame = frames.retired.pop().expect("more than count");
            frames.free.push(frame);
        }
        self.count_frames(&frames);
    }

    /// Gives a retired frame's memory back to the system (under the free-frames lock: nobody
    /// takes the frame meanwhile). The frame reads as zeros until it is written again.
    fn release_frame(&self, frame: u32) {
        // SAFETY: `frame` lies inside the frames mapping, is no page's (it was free), and no
        // I/O targets it; MADV_DONTNEED on a private anonymous mapping only drops its
        // contents. Failing, it keeps its memory: nothing to undo.
        unsafe {
            libc::madvise(
                self.frames.base().add(frame as usize * PAGE_SIZE).cast(),
                PAGE_SIZE,
                libc::MADV_DONTNEED,
            );
        }
    }

    /// Updates the counters of resident and retired frames (under the free-frames lock).
    fn count_frames(&self, frames: &FreeFrames) {
        let unoccupied = (frames.free.len() + frames.retired.len()) as u64;
        debug_assert!(unoccupied <= self.pool_pages);
        self.retired_count.store(frames.retired.len() as u64, Ordering::Release);
        self.resident_count.store(self.pool_pages - unoccupied, Ordering::Release);
    }

    /// The frames' memory that I/O may pin (`IoEngine::register_memory`): every frame but
    /// the flex frames. It stays mapped for the pool's lifetime.
    pub fn frames_region(&self) -> (*mut u8, usize) {
        (self.frames.base(), self.flex_from as usize * PAGE_SIZE)
    }

    /// Page ids handed out so far: the file's logical size in pages.
    pub fn page_count(&self) -> u64 {
        self.next_page.load(Ordering::Acquire)
    }

    /// Replaces the free list (after it was rebuilt by walking every tree).
    pub fn set_free_pages(&self, free: Vec<PageId>) {
        *self.free.lock().unwrap() = free;
    }

    pub fn free_pages(&self) -> Vec<PageId> {
        self.free.lock().unwrap().clone()
    }

    pub fn stats(&self) -> PoolStats {
        PoolStats {
            pool_pages: self.pool_pages,
            resident_pages: self.resident_count.load(Ordering::Relaxed),
            page_count: self.page_count(),
            free_pages: self.free.lock().unwrap().len() as u64,
            reads: self.counters.reads.load(Ordering::Relaxed),
            writes: self.counters.writes.load(Ordering::Relaxed),
            evictions: self.counters.evictions.load(Ordering::Relaxed),
        }
    }

    fn check_id(&self, page_id: PageId) -> Result<()> {
        if page_id >= self.page_count() {
            return Err(Error::Corrupt {
                page: page_id,
                file: self.file.path().to_owned(),
                reason: format!("page id beyond the end of the data ({} pages)", self.page_count()),
            });
        }
        Ok(())
    }

    fn slot(&self, page_id: PageId) -> &Slot {
        assert!(page_id < self.max_pages);
        // SAFETY: the slots region holds `max_pages` zero-initialised `Slot`s (two u64s each;
        // all-zero is a valid `Slot`: evicted, frame 0), suitably aligned (mmap returns
        // page-aligned memory), and is only ever accessed atomically.
        unsafe { &*(self.slots.base() as *const Slot).add(page_id as usize) }
    }

    fn state(&self, page_id: PageId) -> &AtomicU64 {
        &self.slot(page_id).state
    }

    /// Gives latched page `page_id` the frame `frame`.
    fn set_frame(&self, page_id: PageId, frame: u32) {
        self.slot(page_id).frame.store(frame, Ordering::Relaxed);
    }

    fn frame_of(&self, page_id: PageId) -> u32 {
        self.slot(page_id).frame.load(Ordering::Relaxed)
    }

    /// Takes a free frame, if any.
    fn take_frame(&self) -> Option<u32> {
        let mut frames = self.free_frames.lock().unwrap();
        let frame = frames.free.pop()?;
        self.count_frames(&frames);
        Some(frame)
    }

    /// Puts frames no page occupies any more back on the free list (a flex frame retires
    /// instead while fewer are retired than wanted).
    fn give_frames(&self, given: impl IntoIterator<Item = u32>) {
        let mut frames = self.free_frames.lock().unwrap();
        for frame in given {
            if frame >= self.flex_from && frames.retired.len() < frames.want_retired {
                self.release_frame(frame);
                frames.retired.push(frame);
            } else {
                frames.free.push(frame);
            }
        }
        self.count_frames(&frames);
    }

    fn load_state(&self, page_id: PageId) -> PageState {
        PageState(self.state(page_id).load(Ordering::Acquire))
    }

    fn cas_state(&self, page_id: PageId, from: PageState, to: PageState) -> bool {
        self.state(page_id)
            .compare_exchange(from.0, to.0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// The memory of the frame page `page_id` occupies (or last occupied: optimistic readers
    /// may see a stale frame, and then fail their version check).
    fn page_ptr(&self, page_id: PageId) -> *mut u8 {
        let frame = self.frame_of(page_id) as u64;
        assert!(frame < self.pool_pages);
        // SAFETY: in bounds of the frames region, checked above.
        unsafe { self.frames.base().add(frame as usize * PAGE_SIZE) }
    }

    /// The page's memory. Only for holders of its exclusive or shared latch.
    #[allow(clippy::mut_from_ref)]
    fn page_mut(&self, page_id: PageId) -> &mut [u8] {
        // SAFETY: the caller holds the page's exclusive latch (or a shared latch and only
        // reads), so no other thread writes these bytes while the slice lives; optimistic
        // readers only copy them and validate the version afterwards.
        unsafe { std::slice::from_raw_parts_mut(self.page_ptr(page_id), PAGE_SIZE) }
    }

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
    pub fn read_begin(&self, page_id: PageId) -> Attempt<(u64, FrameView<'_>)> {
        if page_id >= self.page_count() {
            self.check_id(page_id)?;
        }
        let mut spins = 0;
        loop {
            let before = self.load_state(page_id);
            match before.state() {
                // Being read: the driver waits for that read instead of spinning here.
                EVICTED | LOADING => return Err(Interrupt::Miss(page_id)),
                MARKED => {
                    self.cas_state(page_id, before, before.with_state(UNLOCKED));
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
            let view = FrameView { ptr: self.page_ptr(page_id), _pool: std::marker::PhantomData };
            return Ok((before.version(), view));
        }
    }

    /// Whether page `page_id` is still at `version` (nobody changed it since a copy).
    pub fn validate(&self, page_id: PageId, version: u64) -> bool {
        // Reads of the page's bytes before this point must not move past the version check
        // (the seqlock reader's fence; free on x86).
        fence(Ordering::Acquire);
        let now = PageState(self.state(page_id).load(Ordering::Relaxed));
        now.version() == version && now.readable()
    }

    /// Latches page `page_id` exclusively if it is still at `version` (an upgrade from an
    /// optimistic read); `Restart` otherwise.
    pub fn lock_exclusive(&self, page_id: PageId, version: u64) -> Attempt<ExclusiveGuard<'_>> {
        let now = self.load_state(page_id);
        if now.version() != version || !matches!(now.state(), UNLOCKED | MARKED) {
            return Err(Interrupt::Restart);
        }
        if !self.cas_state(page_id, now, now.with_state(LOCKED)) {
            return Err(Interrupt::Restart);
        }
        // Writes under the latch must not become visible before the latch (seqlock writer).
        fence(Ordering::Release);
        Ok(ExclusiveGuard { pool: self, page_id, dirty: false })
    }

    /// Latches page `page_id` exclusively whatever its version, waiting a little for other
    /// holders; `Miss` if it is not in memory.
    pub fn lock_exclusive_any(&self, page_id: PageId) -> Attempt<ExclusiveGuard<'_>> {
        self.check_id(page_id)?;
        let mut spins = 0;
        loop {
            let now = self.load_state(page_id);
            match now.state() {
                EVICTED | LOADING => return Err(Interrupt::Miss(page_id)),
                UNLOCKED | MARKED => {
                    if self.cas_state(page_id, now, now.with_state(LOCKED)) {
                        fence(Ordering::Release);
                        return Ok(ExclusiveGuard { pool: self, page_id, dirty: false });
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
            let now = self.load_state(page_id);
            let next = match now.state() {
                EVICTED | LOADING => return Err(Interrupt::Miss(page_id)),
                UNLOCKED | MARKED => SHARED_MIN,
                s if (SHARED_MIN..SHARED_MAX).contains(&s) => s + 1,
                _ => 0,
            };
            if next != 0 && self.cas_state(page_id, now, now.with_state(next)) {
                return Ok(SharedGuard { pool: self, page_id });
            }
            spins += 1;
            if spins > SPIN_LIMIT {
                return Err(Interrupt::Restart);
            }
            std::hint::spin_loop();
        }
    }

    fn unlock_shared(&self, page_id: PageId) {
        loop {
            let now = self.load_state(page_id);
            debug_assert!(now.shared(), "page {page_id} not shared-latched");
            let next = if now.state() == SHARED_MIN { UNLOCKED } else { now.state() - 1 };
            if self.cas_state(page_id, now, now.with_state(next)) {
                return;
            }
        }
    }

    fn unlock_exclusive(&self, page_id: PageId, dirty: bool) {
        if dirty {
            self.page_mut(page_id)[OFFSET_FLAGS] |= FLAG_DIRTY;
        }
        let now = self.load_state(page_id);
        debug_assert_eq!(now.state(), LOCKED, "page {page_id} not latched");
        self.state(page_id).store(now.bumped(UNLOCKED).0, Ordering::Release);
    }

    /// Reads page `page_id` from disk into the pool, blocking, unless it is there already;
    /// if another thread is reading it, waits for that read to end.
    pub fn load(&self, page_id: PageId) -> Result<()> {
        self.check_id(page_id)?;
        let mut now = self.load_state(page_id);
        while now.state() == LOADING {
            std::thread::yield_now();
            now = self.load_state(page_id);
        }
        if now.state() != EVICTED || !self.cas_state(page_id, now, now.with_state(LOADING)) {
            return Ok(());
        }
        let frame = self.frame_for(page_id, now)?;
        let result = self.read_from_disk(page_id);
        if let Err(e) = result {
            self.state(page_id).store(now.bumped(EVICTED).0, Ordering::Release);
            self.give_frames([frame]);
            self.load_waiters.wake(page_id);
            return Err(e);
        }
        self.resident.insert(page_id);
        self.state(page_id).store(now.bumped(UNLOCKED).0, Ordering::Release);
        self.load_waiters.wake(page_id);
        Ok(())
    }

    fn read_from_disk(&self, page_id: PageId) -> Result<()> {
        let memory = self.page_mut(page_id);
        self.file.read_page(page_id, memory)?;
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        self.verify_read(memory, page_id)
    }

    /// Verifies a page just read from disk, before anyone else sees it: checksum, own id and
    /// kind (`page::verify`), then its structure (`validator`).
    fn verify_read(&self, memory: &[u8], page_id: PageId) -> Result<()> {
        page::verify(memory, page_id).and_then(|()| self.validate_structure(memory)).map_err(
            |reason| Error::Corrupt { page: page_id, file: self.file.path().to_owned(), reason },
        )
    }

    fn validate_structure(&self, memory: &[u8]) -> std::result::Result<(), String> {
        self.validator.map_or(Ok(()), |validate| validate(memory))
    }

    /// Gives page `page_id`, which the caller moved out of state `now` (evicted), a frame;
    /// if none can be had, puts the page back as it was.
    fn frame_for(&self, page_id: PageId, now: PageState) -> Result<u32> {
        match self.reserve_frame() {
            Ok(frame) => {
                self.set_frame(page_id, frame);
                Ok(frame)
            }
            Err(e) => {
                self.state(page_id).store(now.bumped(EVICTED).0, Ordering::Release);
                Err(e)
            }
        }
    }

    /// Takes a free frame, evicting when none is left. Gives up with `PoolExhausted` only
    /// after `EXHAUSTED_ROUNDS` fruitless rounds *and* `EXHAUSTED_AFTER`: on a loaded machine
    /// the holders of the latches may be off the CPU for longer than ten thousand yields take
    /// (a test failed so, with 256 frames, under the parallel test suite on 2 cores).
    fn reserve_frame(&self) -> Result<u32> {
        let mut idle_rounds = 0;
        let mut idle_since = None;
        loop {
            if let Some(frame) = self.take_frame() {
                return Ok(frame);
            }
            if self.evict_batch()? == 0 {
                idle_rounds += 1;
                let since = *idle_since.get_or_insert_with(std::time::Instant::now);
                if idle_rounds > EXHAUSTED_ROUNDS && since.elapsed() >= EXHAUSTED_AFTER {
                    return Err(Error::PoolExhausted { pool_pages: self.pool_pages });
                }
                std::thread::yield_now();
            }
        }
    }

    /// One round of the clock: marks unmarked pages, and evicts up to a batch of pages that
    /// stayed marked since the hand last passed, writing the dirty ones first. Returns how
    /// many pages it evicted.
    pub fn evict_batch(&self) -> Result<usize> {
        let mut victims = [0 as PageId; EVICT_BATCH];
        let batch = evict_batch_size(self.pool_pages);
        let mut found = 0;
        let mut swept = 0;
        // One pass of the hand at most: a page marked now is only evicted if it is still
        // untouched when the hand comes round again (second chance).
        let limit = self.resident.capacity();
        while found < batch && swept < limit {
            self.resident.sweep(64, |page_id| {
                let now = self.load_state(page_id);
                match now.state() {
                    MARKED if found < batch => {
                        victims[found] = page_id;
                        found += 1;
                    }
                    UNLOCKED => {
                        self.cas_state(page_id, now, now.with_state(MARKED));
                    }
                    _ => {}
                }
            });
            swept += 64;
        }
        let mut latched = Vec::with_capacity(found);
        let mut failure = None;
        for &page_id in &victims[..found] {
            let now = self.load_state(page_id);
            if now.state() != MARKED || !self.cas_state(page_id, now, now.with_state(LOCKED)) {
                continue;
            }
            fence(Ordering::Release);
            if failure.is_none() {
                match self.write_back(page_id) {
                    Ok(true) => {
                        latched.push(page_id);
                        continue;
                    }
                    Ok(false) => {}
                    Err(e) => failure = Some(e),
                }
            }
            // After a failed write, the rest of the batch stays in memory.
            self.state(page_id).store(now.bumped(UNLOCKED).0, Ordering::Release);
        }
        // `finish_evict_many` counts the evictions.
        self.finish_evict_many(&latched);
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(latched.len())
    }

    /// Writes a latched page if it is dirty, forcing the log first (blocking); returns
    /// false if the page must stay (a commit in progress changed it). On failure the page
    /// stays dirty.
    fn write_back(&self, page_id: PageId) -> Result<bool> {
        match self.write_check(page_id)? {
            WriteCheck::Clean => return Ok(true),
            WriteCheck::Pinned => return Ok(false),
            // A worker whose own ring carries the log's flush cannot wait for it here.
            WriteCheck::LogFirst(_) if crate::sched::log_flush_in_flight() => return Ok(false),
            WriteCheck::LogFirst(lsn) => self.log.get().expect("a log").flush(lsn)?,
            WriteCheck::Ready => {}
        }
        let memory = self.page_mut(page_id);
        page::seal(memory);
        if let Err(e) = self.file.write_page(page_id, memory) {
            memory[OFFSET_FLAGS] |= FLAG_DIRTY;
            self.note_write_failed(e.to_string());
            return Err(e);
        }
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// For a latched page: what it needs before it may be written. Appends the page's
    /// image to the log if it has none since the last completed checkpoint.
    pub fn write_check(&self, page_id: PageId) -> Result<WriteCheck> {
        if self.slot(page_id).log_state.load(Ordering::Acquire) & WRITING != 0 {
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
        let slot = self.slot(page_id);
        let state = slot.log_state.load(Ordering::Acquire);
        if state & PINNED != 0 {
            return Ok(WriteCheck::Pinned);
        }
        // The log must be durable past the page's last change, and past its image.
        let mut needed = page::lsn_of(memory);
        if state & EPOCH_MASK < self.epoch_completed.load(Ordering::Acquire) {
            // Read the epoch before appending: an image is counted for a checkpoint only if
            // it follows that checkpoint's redo LSN (see `Shared::checkpoint`). The page keeps
            // its LSN: the image says which content it holds.
            let epoch = self.epoch_started.load(Ordering::Acquire);
            let mut record = encode_image(page_id, memory);
            let (image_lsn, _) = log.append(&mut record)?;
            set_epoch(&slot.log_state, epoch);
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
                            let mut copy = AlignedPage::zeroed();
                            for group in chunk.chunks(FLUSH_GROUP) {
                                self.log_ahead_of(group)?;
                                for &page_id in group {
                                    if !self.write_copy(page_id, &mut copy)? {
                                        pinned.lock().unwrap().push(page_id);
                                    }
                                }
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

    /// Latches page `page_id` exclusively, yielding while others hold it (a blocking
    /// thread's way: checkpoints); `None` if it is not in memory.
    fn latch_resident(&self, page_id: PageId) -> Result<Option<ExclusiveGuard<'_>>> {
        loop {
            match self.lock_exclusive_any(page_id) {
                Ok(guard) => return Ok(Some(guard)),
                Err(Interrupt::Restart) => std::thread::yield_now(),
                Err(Interrupt::Miss(_)) => return Ok(None),
                Err(Interrupt::Error(e)) => return Err(e),
            }
        }
    }

    /// `flush_all`'s write of one page: false if a commit in progress has it pinned.
    fn write_copy(&self, page_id: PageId, copy: &mut AlignedPage) -> Result<bool> {
        let mut waited_for_log = false;
        loop {
            let Some(guard) = self.latch_resident(page_id)? else { return Ok(true) };
            match self.write_check(page_id)? {
                WriteCheck::Clean => return Ok(true),
                WriteCheck::Pinned => return Ok(false),
                WriteCheck::LogFirst(lsn) if !waited_for_log => {
                    // Wait for the log unlatched, then look again; a page changed again
                    // meanwhile is waited for latched the second time (no endless chase).
                    drop(guard);
                    self.log.get().expect("a log").flush(lsn)?;
                    waited_for_log = true;
                    continue;
                }
                WriteCheck::LogFirst(lsn) => self.log.get().expect("a log").flush(lsn)?,
                WriteCheck::Ready => {}
            }
            let memory = self.page_mut(page_id);
            page::seal(memory);
            copy.bytes_mut().copy_from_slice(memory);
            let log_state = &self.slot(page_id).log_state;
            log_state.fetch_or(WRITING, Ordering::AcqRel);
            drop(guard);
            let written = self.file.write_page(page_id, copy.bytes());
            if let Err(e) = written {
                // The page is dirty again (under its latch), and the database refuses writes.
                if let Ok(Some(_guard)) = self.latch_resident(page_id) {
                    self.page_mut(page_id)[OFFSET_FLAGS] |= FLAG_DIRTY;
                }
                log_state.fetch_and(!WRITING, Ordering::AcqRel);
                self.note_write_failed(e.to_string());
                return Err(e);
            }
            log_state.fetch_and(!WRITING, Ordering::AcqRel);
            self.counters.writes.fetch_add(1, Ordering::Relaxed);
            return Ok(true);
        }
    }

    /// A new page, zero-filled unless it is a reused one, latched exclusively and dirty.
    pub fn allocate(&self) -> Result<ExclusiveGuard<'_>> {
        let reused = self.free.lock().unwrap().pop();
        let page_id = match reused {
            Some(id) => id,
            None => {
                let id = self.next_page.fetch_add(1, Ordering::AcqRel);
                if id >= self.max_pages {
                    self.next_page.fetch_sub(1, Ordering::AcqRel);
                    return Err(Error::DatabaseFull { max_pages: self.max_pages });
                }
                // The workers write pages back through their own engines: the devices must
                // hold the page before its first write-back.
                if let Err(e) = self.file.ensure_page(id) {
                    self.free.lock().unwrap().push(id);
                    return Err(e);
                }
                id
            }
        };
        loop {
            let now = self.load_state(page_id);
            match now.state() {
                EVICTED => {
                    if !self.cas_state(page_id, now, now.with_state(LOCKED)) {
                        continue;
                    }
                    let frame = match self.reserve_frame() {
                        Ok(frame) => frame,
                        Err(e) => {
                            self.state(page_id).store(now.bumped(EVICTED).0, Ordering::Release);
                            self.free.lock().unwrap().push(page_id);
                            return Err(e);
                        }
                    };
                    self.set_frame(page_id, frame);
                    fence(Ordering::Release);
                    // The frame still holds whatever page used it last.
                    self.page_mut(page_id).fill(0);
                    self.resident.insert(page_id);
                    self.note_new(page_id);
                    return Ok(ExclusiveGuard { pool: self, page_id, dirty: true });
                }
                UNLOCKED | MARKED => {
                    if self.cas_state(page_id, now, now.with_state(LOCKED)) {
                        fence(Ordering::Release);
                        if self.capturing.load(Ordering::Acquire) {
                            // Logged against a zeroed page: start from one.
                            self.page_mut(page_id).fill(0);
                        }
                        self.note_new(page_id);
                        return Ok(ExclusiveGuard { pool: self, page_id, dirty: true });
                    }
                }
                _ => std::thread::yield_now(),
            }
        }
    }

    /// Frees a latched page: it is marked free in memory, never written again, and its id
    /// goes back to the allocator.
    pub fn free(&self, mut guard: ExclusiveGuard<'_>) {
        let page_id = guard.page_id;
        let memory = guard.page_mut();
        memory[OFFSET_KIND] = PageKind::Free as u8;
        memory[OFFSET_FLAGS] = 0;
        guard.dirty = false;
        drop(guard);
        self.note_freed(page_id);
        self.free.lock().unwrap().push(page_id);
    }

    /// Frees page `page_id`, in memory or not, without reading it.
    pub fn free_by_id(&self, page_id: PageId) -> Result<()> {
        loop {
            let now = self.load_state(page_id);
            if now.state() == EVICTED {
                if self.cas_state(page_id, now, now.bumped(EVICTED)) {
                    self.note_freed(page_id);
                    self.free.lock().unwrap().push(page_id);
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

    /// Panics unless the pool's bookkeeping agrees with itself (quiescent pools only).
    pub fn check_invariants(&self) {
        let ids = self.resident.ids();
        let count = self.resident_count.load(Ordering::Acquire);
        assert_eq!(ids.len() as u64, count, "resident set and resident count disagree");
        assert!(count <= self.pool_pages, "more pages resident than the pool holds");
        let mut owner = vec![None; self.pool_pages as usize];
        let frames = self.free_frames.lock().unwrap();
        for &frame in frames.free.iter().chain(&frames.retired) {
            assert!(
                owner[frame as usize].replace(PageId::MAX).is_none(),
                "frame {frame} twice free (or retired)"
            );
        }
        assert!(frames.retired.iter().all(|&f| f >= self.flex_from), "a retired frame not flex");
        drop(frames);
        for &id in &ids {
            let frame = self.frame_of(id) as usize;
            if let Some(other) = owner[frame].replace(id) {
                panic!("frame {frame} held by page {id} and by {other} (MAX: the free list)");
            }
            let state = self.load_state(id);
            assert!(state.is_resident(), "page {id} in the resident set but evicted");
            assert!(
                matches!(state.state(), UNLOCKED | MARKED),
                "page {id} still latched: state {}",
                state.state()
            );
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

/// The asynchronous paths the workers use: the same state machine as `load` and
/// `evict_batch`, cut where the I/O happens so that the worker can queue it and go on.
impl BufferPool {
    /// Begins loading `page_id` without waiting for anything.
    pub fn begin_load(&self, page_id: PageId) -> Result<LoadStart> {
        self.check_id(page_id)?;
        let now = self.load_state(page_id);
        match now.state() {
            EVICTED => {}
            LOADING => return Ok(LoadStart::Loading),
            LOCKED => return Ok(LoadStart::Busy),
            _ => return Ok(LoadStart::Resident),
        }
        if !self.cas_state(page_id, now, now.with_state(LOADING)) {
            return Ok(LoadStart::Busy);
        }
        let Some(frame) = self.take_frame() else {
            // Nothing changed: put the word back as it was.
            self.state(page_id).store(now.0, Ordering::Release);
            return Ok(LoadStart::NoFrame);
        };
        self.set_frame(page_id, frame);
        Ok(LoadStart::Started)
    }

    /// The memory of page `page_id`, for I/O by the holder of its exclusive latch.
    pub fn frame_ptr(&self, page_id: PageId) -> *mut u8 {
        self.page_ptr(page_id)
    }

    /// Ends a load begun by `begin_load`, given how the read went: verifies the page and
    /// unlatches it, or gives its frame back and leaves it evicted.
    pub fn finish_load(&self, page_id: PageId, read: std::io::Result<usize>) -> Result<()> {
        let now = self.load_state(page_id);
        debug_assert_eq!(now.state(), LOADING);
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        let outcome = match read {
            Ok(bytes) => {
                let memory = self.page_mut(page_id);
                if bytes < PAGE_SIZE {
                    memory[bytes..].fill(0); // past the end of the file
                }
                self.verify_read(memory, page_id)
            }
            Err(e) => Err(Error::io(
                format!("reading page {page_id} of {}", self.file.path().display()),
                e,
            )),
        };
        let result = match outcome {
            Ok(()) => {
                self.resident.insert(page_id);
                self.state(page_id).store(now.bumped(UNLOCKED).0, Ordering::Release);
                Ok(())
            }
            Err(e) => {
                let frame = self.frame_of(page_id);
                self.state(page_id).store(now.bumped(EVICTED).0, Ordering::Release);
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
        // Re-checked after registering: a read that ended before this saw our waker or
        // left a state we see now. A stale registration only costs a spurious wake-up.
        self.load_state(page_id).state() == LOADING
    }

    /// Whether fewer than `headroom` frames are free.
    pub fn frames_short(&self, headroom: u64) -> bool {
        self.resident_count.load(Ordering::Acquire) + self.retired_frames() + headroom
            >= self.pool_pages
    }

    /// Slots in the resident set, for callers that keep their own clock hand.
    pub fn clock_slots(&self) -> u64 {
        self.resident.capacity()
    }

    /// One sweep of a caller's clock hand over slots `start..start + count`: marks unmarked
    /// pages and latches (exclusively) up to `max` pages that stayed marked, into `victims`.
    /// Each victim then goes to `write_back_start` and `finish_evict_many` (or `abort_evict`).
    pub fn pick_victims(&self, start: u64, count: u64, max: usize, victims: &mut Vec<PageId>) {
        self.resident.sweep_slots(start, count, |page_id| {
            if victims.len() >= max {
                return;
            }
            let now = self.load_state(page_id);
            match now.state() {
                MARKED if self.cas_state(page_id, now, now.with_state(LOCKED)) => {
                    fence(Ordering::Release);
                    victims.push(page_id);
                }
                UNLOCKED => {
                    self.cas_state(page_id, now, now.with_state(MARKED));
                }
                _ => {}
            }
        });
    }

    /// For a latched victim: whether it must be written before its frame is reused (then
    /// it is sealed and its memory returned), or must wait for the log or its commit.
    pub fn write_back_start(&self, page_id: PageId) -> WriteStart {
        match self.write_check(page_id) {
            Ok(WriteCheck::Clean) => WriteStart::Clean,
            Ok(WriteCheck::Ready) => {
                let memory = self.page_mut(page_id);
                page::seal(memory);
                WriteStart::Write(memory.as_ptr())
            }
            Ok(WriteCheck::LogFirst(lsn)) => WriteStart::Later(Some(lsn)),
            Ok(WriteCheck::Pinned) | Err(_) => WriteStart::Later(None),
        }
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

    /// Evicts latched victims whose contents are on disk, putting their frames back on the
    /// free list in one batch.
    pub fn finish_evict_many(&self, page_ids: &[PageId]) {
        if page_ids.is_empty() {
            return;
        }
        let mut frames = [0u32; EVICT_BATCH];
        for chunk in page_ids.chunks(EVICT_BATCH) {
            for (frame, &page_id) in frames.iter_mut().zip(chunk) {
                let now = self.load_state(page_id);
                debug_assert_eq!(now.state(), LOCKED);
                *frame = self.frame_of(page_id);
                self.resident.remove(page_id);
                // From here on optimistic readers of the page fail their version check, so
                // its frame may go to another page.
                self.state(page_id).store(now.bumped(EVICTED).0, Ordering::Release);
            }
            self.give_frames(frames[..chunk.len()].iter().copied());
        }
        self.counters.evictions.fetch_add(page_ids.len() as u64, Ordering::Relaxed);
    }

    /// Gives up evicting a latched victim (its write failed): it stays, dirty.
    pub fn abort_evict(&self, page_id: PageId) {
        self.unlock_exclusive(page_id, true);
    }
}

/// The write-ahead log's side of the pool: capturing a commit's changes, checkpoint
/// epochs, and applying records at recovery.
impl BufferPool {
    /// Attaches the log: from now on write-backs follow its rules.
    pub fn attach_log(&self, log: Arc<Log>) {
        assert!(self.log.set(log).is_ok(), "a log is attached already");
    }

    pub fn log(&self) -> Option<&Arc<Log>> {
        self.log.get()
    }

    /// Starts capturing a commit's changes (the caller holds the commit lock).
    pub fn begin_capture(&self) {
        debug_assert!(self.capture.lock().unwrap().is_empty());
        self.capturing.store(true, Ordering::Release);
    }

    fn note_change(&self, page_id: PageId) {
        let memory = self.page_mut(page_id);
        if self.capture.lock().unwrap().note_change(page_id, memory) {
            self.slot(page_id).log_state.fetch_or(PINNED, Ordering::AcqRel);
        }
    }

    fn note_new(&self, page_id: PageId) {
        if !self.capturing.load(Ordering::Acquire) {
            return;
        }
        self.capture.lock().unwrap().note_new(page_id);
        // Logged whole: counts as an image for the current epoch.
        let epoch = self.epoch_started.load(Ordering::Acquire);
        let log_state = &self.slot(page_id).log_state;
        set_epoch(log_state, epoch);
        log_state.fetch_or(PINNED, Ordering::AcqRel);
    }

    fn note_freed(&self, page_id: PageId) {
        if self.capturing.load(Ordering::Acquire) {
            self.capture.lock().unwrap().note_freed(page_id);
        }
    }

    /// Ends the capture: the commit record of what changed (`None` if nothing did), and the
    /// pages to stamp with its LSN once appended (`stamp`).
    pub fn finish_capture(&self, next_tree_id: u64) -> Option<(Vec<u8>, Vec<PageId>)> {
        self.capturing.store(false, Ordering::Release);
        let mut capture = self.capture.lock().unwrap();
        if capture.is_empty() {
            return None;
        }
        // The pages are pinned (not written, not evicted while dirty) and only this commit
        // changes them, so their bytes are stable here.
        let record = capture.encode(next_tree_id, |id| &*self.page_mut(id));
        let pages = capture.kept_pages().collect();
        capture.clear();
        Some((record, pages))
    }

    /// Gives the pages a commit changed its record's LSN, which unpins them.
    pub fn stamp(&self, pages: &[PageId], lsn: u64) {
        for &page_id in pages {
            loop {
                match self.lock_exclusive_any(page_id) {
                    Ok(guard) => {
                        page::set_lsn(self.page_mut(page_id), lsn);
                        self.slot(page_id).log_state.fetch_and(!PINNED, Ordering::AcqRel);
                        drop(guard);
                        break;
                    }
                    Err(Interrupt::Restart) => std::hint::spin_loop(),
                    Err(e) => panic!("page {page_id}, pinned by its commit, is gone: {e:?}"),
                }
            }
        }
    }

    /// Abandons the capture of a commit that failed half-way: its pages stay pinned (they
    /// hold changes no record describes), so nothing of it can reach the disk; the caller
    /// fails the log, and the database must be reopened.
    pub fn abandon_capture(&self) -> bool {
        self.capturing.store(false, Ordering::Release);
        let mut capture = self.capture.lock().unwrap();
        let changed = !capture.is_empty();
        capture.clear();
        changed
    }

    /// Starts a checkpoint epoch; returns it. The caller read the checkpoint's redo LSN
    /// before: an image counted for this epoch was appended after it.
    pub fn start_epoch(&self) -> u32 {
        self.epoch_started.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The checkpoint of `epoch` is on disk: later write-backs need images from it on.
    pub fn complete_epoch(&self, epoch: u32) {
        self.epoch_completed.fetch_max(epoch, Ordering::AcqRel);
    }

    /// Sets the allocator's state (after recovery): page count and free pages. A writable
    /// file grows to hold them; a read-only one stays as it is (pages past its end exist only
    /// in memory, from the log).
    pub fn set_allocation(&self, page_count: u64, free: Vec<PageId>) -> Result<()> {
        if page_count > 0 && self.writable {
            self.file.ensure_page(page_count - 1)?;
        }
        self.next_page.store(page_count, Ordering::Release);
        *self.free.lock().unwrap() = free;
        Ok(())
    }

    /// Reads page `page_id` into the pool ahead of recovery's replay, if it is on the file,
    /// not in memory, whole (its checksum holds) and not a free page; otherwise leaves it for
    /// `recover_page` to read and judge. Safe beside the replay and other read-aheads.
    pub fn read_ahead_for_recovery(&self, page_id: PageId) -> Result<()> {
        if page_id >= self.next_page.load(Ordering::Acquire) {
            return Ok(());
        }
        let now = self.load_state(page_id);
        if now.state() != EVICTED || !self.cas_state(page_id, now, now.with_state(LOCKED)) {
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
            self.state(page_id).store(now.bumped(EVICTED).0, Ordering::Release);
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
        if page_id >= self.max_pages {
            return Err(Error::Corrupt {
                page: page_id,
                file: self.file.path().to_owned(),
                reason: format!("the log names a page beyond max_pages ({})", self.max_pages),
            });
        }
        if page_id >= self.next_page.load(Ordering::Acquire) {
            if self.writable {
                self.file.ensure_page(page_id)?;
            }
            self.next_page.fetch_max(page_id + 1, Ordering::AcqRel);
        }
        loop {
            let now = self.load_state(page_id);
            if now.state() == EVICTED {
                if !self.cas_state(page_id, now, now.with_state(LOCKED)) {
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
                        self.state(page_id).store(now.bumped(EVICTED).0, Ordering::Release);
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
                        guard.dirty = true;
                    }
                    return Ok(());
                }
                Err(Interrupt::Restart) | Err(Interrupt::Miss(_)) => std::thread::yield_now(),
                Err(Interrupt::Error(e)) => return Err(e),
            }
        }
    }
}

/// A page in memory, read in place by an optimistic reader a few bytes at a time (see
/// [`BufferPool::read_begin`]): the bytes may be torn by a concurrent writer, or belong to
/// another page if this one was evicted meanwhile, until the version is validated. The frame
/// itself stays mapped for the pool's lifetime, so every copy is from valid memory.
#[derive(Debug, Clone, Copy)]
pub struct FrameView<'a> {
    ptr: *const u8,
    _pool: std::marker::PhantomData<&'a BufferPool>,
}

impl FrameView<'_> {
    /// Copies the page's bytes `offset..offset + out.len()` into `out`, clamped to the page;
    /// returns how many bytes it copied.
    #[inline]
    pub fn copy(&self, offset: usize, out: &mut [u8]) -> usize {
        let len = out.len().min(PAGE_SIZE.saturating_sub(offset));
        // SAFETY: `offset..offset + len` lies inside the frame (clamped above), the frame
        // stays mapped while the pool lives (the view borrows it), and `out` is ours. A
        // concurrent writer may change the bytes while they are copied (the seqlock
        // pattern): the reader discards them unless the version check passes.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(offset), out.as_mut_ptr(), len) };
        len
    }

    /// The `N` bytes at `offset` (zeros for those past the page's end). Inlined to a few
    /// moves, where `copy` of a variable length is a call to `memmove`: the lookup path reads
    /// headers, slots and short keys this way.
    #[inline]
    pub fn array<const N: usize>(&self, offset: usize) -> [u8; N] {
        if offset.checked_add(N).is_some_and(|end| end <= PAGE_SIZE) {
            // SAFETY: `offset..offset + N` lies inside the frame (checked above), which stays
            // mapped while the pool lives; `read_unaligned` has no alignment needs. The bytes
            // may be torn by a writer (seqlock pattern: the caller validates the version).
            unsafe { std::ptr::read_unaligned(self.ptr.add(offset).cast::<[u8; N]>()) }
        } else {
            let mut out = [0u8; N];
            self.copy(offset, &mut out);
            out
        }
    }

    /// The little-endian u16 at `offset` (0 past the page's end).
    #[inline]
    pub fn u16_at(&self, offset: usize) -> u16 {
        u16::from_le_bytes(self.array(offset))
    }

    /// The little-endian u64 at `offset` (bytes past the page's end read as 0).
    #[inline]
    pub fn u64_at(&self, offset: usize) -> u64 {
        u64::from_le_bytes(self.array(offset))
    }
}

/// An exclusive latch on a page in memory. Released (with a new version) on drop.
#[derive(Debug)]
pub struct ExclusiveGuard<'a> {
    pool: &'a BufferPool,
    page_id: PageId,
    dirty: bool,
}

impl ExclusiveGuard<'_> {
    pub fn page_id(&self) -> PageId {
        self.page_id
    }
    pub fn page(&self) -> &[u8] {
        self.pool.page_mut(self.page_id)
    }
    /// The page, to change: it will be written back before its frame is reused.
    pub fn page_mut(&mut self) -> &mut [u8] {
        self.dirty = true;
        if self.pool.capturing.load(Ordering::Acquire) {
            self.pool.note_change(self.page_id);
        }
        self.pool.page_mut(self.page_id)
    }
}

impl Drop for ExclusiveGuard<'_> {
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
    pub fn page_id(&self) -> PageId {
        self.page_id
    }
    pub fn page(&self) -> &[u8] {
        self.pool.page_mut(self.page_id)
    }
}

impl Drop for SharedGuard<'_> {
    fn drop(&mut self) {
        self.pool.unlock_shared(self.page_id);
    }
}

/// Sets the epoch bits of a `Slot::log_state`, keeping its flags.
fn set_epoch(log_state: &AtomicU32, epoch: u32) {
    debug_assert_eq!(epoch & !EPOCH_MASK, 0, "epoch {epoch} overflows its bits");
    let _ = log_state
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| Some(now & !EPOCH_MASK | epoch));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::page::{init_header, read_u64, write_u64};
    use tempfile::TempDir;

    fn pool(dir: &TempDir, pool_pages: u64) -> BufferPool {
        let file = PageFile::open(&dir.path().join("pages"), true, true, true, 1 << 20).unwrap();
        BufferPool::new(file, pool_pages, 4096, 0, Vec::new()).unwrap()
    }

    /// Allocates `count` leaves, the n-th holding n at byte 100; returns their ids.
    fn new_leaves(pool: &BufferPool, count: u64) -> Vec<PageId> {
        (0..count)
            .map(|n| {
                let mut guard = pool.allocate().unwrap();
                let id = guard.page_id();
                init_header(guard.page_mut(), PageKind::Leaf, id);
                write_u64(guard.page_mut(), 100, n);
                id
            })
            .collect()
    }

    fn read(pool: &BufferPool, page_id: PageId) -> AlignedPage {
        let mut copy = AlignedPage::zeroed();
        loop {
            match pool.read_copy(page_id, &mut copy) {
                Ok(_) => return copy,
                Err(Interrupt::Miss(id)) => pool.load(id).unwrap(),
                Err(Interrupt::Restart) => std::thread::yield_now(),
                Err(Interrupt::Error(e)) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn pages_survive_eviction_and_come_back_verified() {
        let dir = TempDir::with_prefix("pool").unwrap();
        let pool = pool(&dir, 16);
        let mut ids = Vec::new();
        for n in 0..200u64 {
            let mut guard = pool.allocate().unwrap();
            let id = guard.page_id();
            let page = guard.page_mut();
            init_header(page, PageKind::Leaf, id);
            write_u64(page, 100, n * 7);
            ids.push(id);
        }
        let stats = pool.stats();
        assert!(stats.resident_pages <= 16);
        assert!(stats.evictions >= 184 && stats.writes >= 184, "{stats:?}");
        for (n, &id) in ids.iter().enumerate() {
            assert_eq!(read_u64(read(&pool, id).bytes(), 100), n as u64 * 7);
        }
        pool.check_invariants();
    }

    /// Flex frames: kept out of the registrable region, retired at once when free and
    /// otherwise as eviction frees them (their pages written back first, still readable),
    /// and given back when fewer are wanted; the pool then holds pages in the others only.
    #[test]
    fn flex_frames_retire_when_freed_and_come_back_when_no_longer_wanted() {
        let dir = TempDir::with_prefix("pool-flex").unwrap();
        let pool = pool(&dir, 16).with_flex_frames(4);
        assert_eq!(pool.flex_frames(), 4);
        assert_eq!(pool.frames_region().1, 12 * PAGE_SIZE, "flex frames are never pinned");
        pool.retire_flex_frames(2);
        assert_eq!(pool.retired_frames(), 2, "free flex frames retire at once");
        pool.check_invariants();
        let ids = new_leaves(&pool, 14);
        assert!(pool.frames_short(1), "14 pages and 2 retired frames fill 16");
        pool.retire_flex_frames(9);
        assert_eq!(pool.retired_frames(), 2, "no flex frame was free");
        while pool.retired_frames() < 4 {
            pool.evict_batch().unwrap();
        }
        assert!(pool.stats().resident_pages <= 12);
        pool.check_invariants();
        for (n, &id) in ids.iter().enumerate() {
            assert_eq!(read_u64(read(&pool, id).bytes(), 100), n as u64, "page {id}");
        }
        assert_eq!(pool.retired_frames(), 4, "loads never take a retired frame");
        pool.check_invariants();
        pool.retire_flex_frames(1);
        assert_eq!(pool.retired_frames(), 1, "given back at once");
        let more = new_leaves(&pool, 20);
        for (n, &id) in more.iter().enumerate() {
            assert_eq!(read_u64(read(&pool, id).bytes(), 100), n as u64, "page {id}");
        }
        assert_eq!(pool.retired_frames(), 1);
        pool.check_invariants();
    }

    /// Regression: with every frame latched by a thread kept off the CPU for a while, an
    /// allocation gave up with `PoolExhausted` after 10,000 yields, which a loaded machine
    /// runs through in milliseconds. It now waits at least `EXHAUSTED_AFTER`.
    #[test]
    fn a_frame_latched_for_a_while_is_waited_for_not_given_up() {
        let dir = TempDir::with_prefix("pool-latched").unwrap();
        let pool = pool(&dir, 16);
        new_leaves(&pool, 16);
        std::thread::scope(|scope| {
            let (latched, wait) = std::sync::mpsc::channel();
            let pool = &pool;
            scope.spawn(move || {
                // Every resident page, so that no frame is free while they are held.
                let resident = pool.resident.ids();
                let guards: Vec<_> =
                    resident.iter().filter_map(|&id| pool.lock_exclusive_any(id).ok()).collect();
                latched.send(guards.len()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(300));
                drop(guards);
            });
            assert_eq!(wait.recv().unwrap(), 16, "every frame latched");
            let started = std::time::Instant::now();
            let guard = pool.allocate().expect("a frame once the latches go");
            assert!(started.elapsed() >= std::time::Duration::from_millis(250));
            drop(guard);
        });
        // A pool that stays latched is still reported, after the wait.
        let resident = pool.resident.ids();
        let guards: Vec<_> =
            resident.iter().filter_map(|&id| pool.lock_exclusive_any(id).ok()).collect();
        assert_eq!(guards.len(), 16, "every frame latched");
        let started = std::time::Instant::now();
        assert!(matches!(pool.allocate(), Err(Error::PoolExhausted { pool_pages: 16 })));
        assert!(started.elapsed() >= EXHAUSTED_AFTER);
    }

    #[test]
    fn versions_move_on_every_exclusive_release() {
        let dir = TempDir::with_prefix("pool-version").unwrap();
        let pool = pool(&dir, 16);
        let id = new_leaves(&pool, 1)[0];
        let mut copy = AlignedPage::zeroed();
        let v1 = pool.read_copy(id, &mut copy).unwrap();
        assert!(pool.validate(id, v1));
        drop(pool.lock_exclusive(id, v1).unwrap());
        assert!(!pool.validate(id, v1), "an exclusive release bumps the version");
        assert!(matches!(pool.lock_exclusive(id, v1), Err(Interrupt::Restart)));
        let v2 = pool.read_copy(id, &mut copy).unwrap();
        let shared = pool.lock_shared(id).unwrap();
        let also = pool.lock_shared(id).unwrap();
        assert!(pool.validate(id, v2), "shared latches leave the version alone");
        assert!(matches!(pool.lock_exclusive(id, v2), Err(Interrupt::Restart)));
        drop((shared, also));
        drop(pool.lock_exclusive(id, v2).unwrap());
        pool.check_invariants();
    }

    #[test]
    fn freed_pages_are_reused_and_never_written() {
        let dir = TempDir::with_prefix("pool-free").unwrap();
        let pool = pool(&dir, 16);
        let guard = pool.allocate().unwrap();
        let id = guard.page_id();
        pool.free(guard);
        assert_eq!(pool.free_pages(), vec![id]);
        let again = pool.allocate().unwrap();
        assert_eq!(again.page_id(), id);
        drop(again);
        pool.free_by_id(id).unwrap();
        for _ in 0..40 {
            let mut g = pool.allocate().unwrap();
            let gid = g.page_id();
            init_header(g.page_mut(), PageKind::Leaf, gid);
        }
        assert!(pool.stats().writes <= 40, "the free page was not written");
        pool.check_invariants();
    }

    /// Regression: readers of a page another thread is reading used to spin on its latch
    /// for the whole read (a third of the CPU with 2 workers x 128 tasks). Now they see a
    /// miss, and tasks wait for that read to end and are woken by it.
    #[test]
    fn readers_of_a_page_being_loaded_wait_for_the_load() {
        use std::sync::atomic::AtomicUsize;
        use std::sync::Arc;
        use std::task::Wake;

        struct Count(AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let dir = TempDir::with_prefix("pool-loading").unwrap();
        let pool = pool(&dir, 16);
        let ids = new_leaves(&pool, 40);
        pool.flush_all().unwrap();
        let id = *ids.iter().find(|&&id| !pool.load_state(id).is_resident()).unwrap();
        while pool.begin_load(id).unwrap() == LoadStart::NoFrame {
            pool.evict_batch().unwrap();
        }
        let mut copy = AlignedPage::zeroed();
        assert!(matches!(pool.read_copy(id, &mut copy), Err(Interrupt::Miss(m)) if m == id));
        assert!(matches!(pool.read_begin(id), Err(Interrupt::Miss(m)) if m == id));
        assert_eq!(pool.begin_load(id).unwrap(), LoadStart::Loading);
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        assert!(pool.wait_for_load(id, &waker), "the read is still under way");
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        // The read "completes": the frame gets the page's bytes, then the load ends.
        let mut image = AlignedPage::zeroed();
        pool.file().read_page(id, image.bytes_mut()).unwrap();
        // SAFETY: the page is latched for this load; the frame is ours until finish_load.
        unsafe {
            std::ptr::copy_nonoverlapping(image.bytes().as_ptr(), pool.frame_ptr(id), PAGE_SIZE)
        };
        pool.finish_load(id, Ok(PAGE_SIZE)).unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "the waiter was woken");
        assert!(!pool.wait_for_load(id, &waker), "no read under way any more");
        let n = ids.iter().position(|&x| x == id).unwrap() as u64;
        assert_eq!(read_u64(read(&pool, id).bytes(), 100), n);
        pool.check_invariants();
    }

    /// A page that passes its checksum but not the validator is `Error::Corrupt` wherever it
    /// is read from disk, and stays out of the pool: blocking loads, a worker's loads,
    /// recovery's read-ahead (which leaves it for the replay) and recovery's reads.
    #[test]
    fn a_page_the_validator_refuses_is_corrupt_on_every_read_path() {
        static REFUSED: AtomicU64 = AtomicU64::new(u64::MAX);
        fn refuse(page: &[u8]) -> std::result::Result<(), String> {
            if page::page_id_of(page) == REFUSED.load(Ordering::Relaxed) {
                return Err("refused by the validator".into());
            }
            Ok(())
        }
        let dir = TempDir::with_prefix("pool-validator").unwrap();
        let pool = pool(&dir, 16).with_page_validator(refuse);
        let ids = new_leaves(&pool, 40);
        pool.flush_all().unwrap();
        let id = *ids.iter().find(|&&id| !pool.load_state(id).is_resident()).unwrap();
        REFUSED.store(id, Ordering::Relaxed);
        let refused = |result: Result<()>| match result {
            Err(Error::Corrupt { page, reason, .. }) => {
                assert_eq!(page, id);
                assert!(reason.contains("refused by the validator"), "{reason}");
            }
            other => panic!("expected a corruption error, got {other:?}"),
        };
        refused(pool.load(id));
        assert!(!pool.load_state(id).is_resident());
        while pool.begin_load(id).unwrap() == LoadStart::NoFrame {
            pool.evict_batch().unwrap();
        }
        let mut image = AlignedPage::zeroed();
        pool.file().read_page(id, image.bytes_mut()).unwrap();
        // SAFETY: the page is latched for this load; the frame is ours until finish_load.
        unsafe {
            std::ptr::copy_nonoverlapping(image.bytes().as_ptr(), pool.frame_ptr(id), PAGE_SIZE)
        };
        refused(pool.finish_load(id, Ok(PAGE_SIZE)));
        assert!(!pool.load_state(id).is_resident());
        pool.read_ahead_for_recovery(id).unwrap();
        assert!(!pool.load_state(id).is_resident(), "left for the replay to judge");
        refused(pool.recover_page(id, |_, _| panic!("a refused page is not replayed into")));
        assert!(!pool.load_state(id).is_resident());
        pool.check_invariants();
        // The others read as before.
        let other = *ids.iter().find(|&&other| other != id).unwrap();
        pool.load(other).unwrap();
        pool.recover_page(other, |_, valid| {
            assert!(valid);
            false
        })
        .unwrap();
    }

    #[test]
    fn a_page_beyond_the_data_is_corrupt_not_a_crash() {
        let dir = TempDir::with_prefix("pool-range").unwrap();
        let pool = pool(&dir, 16);
        let mut copy = AlignedPage::zeroed();
        assert!(matches!(
            pool.read_copy(99, &mut copy),
            Err(Interrupt::Error(Error::Corrupt { page: 99, .. }))
        ));
    }
}
