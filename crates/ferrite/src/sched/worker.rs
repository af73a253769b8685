//! A worker: one thread running Ferrite's own executor of cooperative tasks in one loop (seed
//! 000, section 3): run ready tasks → evict if free frames are short → submit all queued I/O
//! in one batch → reap completions → wake the tasks they belong to. A task that misses the
//! pool queues a read on its worker's own engine and yields; eviction and the write-back of
//! dirty victims run here too, on this worker's share of the clock (a slice of the resident
//! set, so workers never sweep the same pages). There are no other threads.
//!
//! The worker waits in the kernel when it has nothing to run: in the engine's reap while its
//! reads are in flight, on its inbox otherwise. It never spins on an empty queue.

#![allow(unsafe_code)] // handing frames of latched pages to the I/O engine

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use super::task::BoxedTask;
use crate::buffer::{BufferPool, StagedWrite, TierRead, WriteStart};
use crate::error::{Error, PageId};
use crate::format::page::PAGE_SIZE;
use crate::id_hash::PageMap;
use crate::io::{AlignedBlock, IoCompletion, IoEngine, IoKind, IoRequest, QueueError, SocketOp};
use crate::wal::Log;
use crate::worker_context;

/// Tag bit of a write; reads have it clear. The rest of a tag is the page id.
const TAG_WRITE: u64 = 1;

/// Tag bit of a raw transfer (`start_transfer`: a task's own buffer read or written, such
/// as an object's data); the rest of the tag is the transfer's number.
const TAG_RAW: u64 = 1 << 60;

/// Tag bit of a read or write of the second cache tier's block medium. A read's tag is
/// that of the page it loads; a write's (with `TAG_WRITE`) carries its number shifted by one.
const TAG_TIER: u64 = 1 << 58;

/// What other threads hand a worker: new tasks, wake-ups, the order to stop.
///
/// A worker waits in one of two places: on the condition variable when it has no I/O in
/// flight, or in its engine's reap while it has. In the second, a hand-off must reach it
/// through the kernel: the inbox writes its eventfd, on which the worker's engine keeps a
/// poll armed (`IoEngine::arm_wake`). Without it, a committer woken by the other worker's
/// log flush waits for one of this worker's reads or page writes to finish first, and may
/// miss the next group commit (docs/benchmarks.md, "Where the committers are when a flush
/// is taken").
#[derive(Debug, Default)]
pub struct Inbox {
    state: Mutex<InboxState>,
    wakeup: Condvar,
    /// The eventfd (non-blocking) written to wake the worker out of a wait in its engine;
    /// `None` if the system gave none.
    kick: Option<std::os::fd::OwnedFd>,
    /// Something was handed to the worker since it last took its inbox (set under `state`'s
    /// lock, cleared when the worker takes it): what an idle worker polls before it sleeps.
    posted: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct InboxState {
    spawned: Vec<BoxedTask>,
    woken: Vec<usize>,
    sleeping: bool,
    /// The worker waits in its engine, with the wake-up poll on `kick` armed.
    in_kernel: bool,
    /// `kick` was written and the worker has not drained it since: no need to write again.
    kicked: bool,
    shutdown: bool,
}

impl std::fmt::Debug for InboxState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxState")
            .field("spawned", &self.spawned.len())
            .field("woken", &self.woken.len())
            .field("shutdown", &self.shutdown)
            .finish()
    }
}

impl Inbox {
    pub fn new() -> Inbox {
        // SAFETY: plain system call; a valid descriptor is owned by the `OwnedFd` only.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let kick = (fd >= 0).then(|| unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) });
        Inbox { kick, ..Inbox::default() }
    }

    pub fn spawn(&self, task: BoxedTask) {
        let mut state = self.state.lock().unwrap();
        state.spawned.push(task);
        self.rouse(state);
    }

    fn wake(&self, task: usize) {
        let mut state = self.state.lock().unwrap();
        state.woken.push(task);
        self.rouse(state);
    }

    pub fn shut_down(&self) {
        let mut state = self.state.lock().unwrap();
        state.shutdown = true;
        self.rouse(state);
    }

    /// Gets the worker to look at its inbox: wakes it from the condition variable, or from
    /// its engine through the eventfd (once until the worker drains it).
    fn rouse(&self, mut state: std::sync::MutexGuard<'_, InboxState>) {
        self.posted.store(true, Ordering::Release);
        if state.sleeping {
            self.wakeup.notify_one();
            return;
        }
        if !state.in_kernel || state.kicked {
            return;
        }
        state.kicked = true;
        drop(state);
        if let Some(fd) = &self.kick {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live buffer to our own eventfd. It can only fail
            // when the counter is full, and then the worker is being woken anyway.
            unsafe { libc::write(std::os::fd::AsRawFd::as_raw_fd(fd), one.as_ptr().cast(), 8) };
        }
    }

    /// Before the worker waits in its engine with the wake-up armed: false if something
    /// arrived meanwhile (then it must not wait).
    fn enter_kernel(&self) -> bool {
        let mut state = self.state.lock().unwrap();
        if !state.spawned.is_empty() || !state.woken.is_empty() || state.shutdown {
            return false;
        }
        state.in_kernel = true;
        true
    }

    fn leave_kernel(&self) {
        self.state.lock().unwrap().in_kernel = false;
    }

    /// After the wake-up fired: empties the eventfd, so that the next write makes it
    /// readable again, and lets the next hand-off write it.
    fn drain_kick(&self) {
        if let Some(fd) = &self.kick {
            let mut count = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a live buffer; `EAGAIN` (already empty) is
            // fine.
            unsafe {
                libc::read(std::os::fd::AsRawFd::as_raw_fd(fd), count.as_mut_ptr().cast(), 8)
            };
        }
        self.state.lock().unwrap().kicked = false;
    }

    fn kick_fd(&self) -> Option<std::os::fd::RawFd> {
        self.kick.as_ref().map(std::os::fd::AsRawFd::as_raw_fd)
    }
}

struct TaskWaker {
    task: usize,
    inbox: Arc<Inbox>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.inbox.wake(self.task);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.inbox.wake(self.task);
    }
}

/// Where a worker's time goes, in nanoseconds, for `ferrite bench`.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Polling tasks: tree work, and the queuing of their reads.
    pub task_ns: AtomicU64,
    /// Sweeping the clock and evicting.
    pub evict_ns: AtomicU64,
    /// Handing queued I/O to the kernel.
    pub submit_ns: AtomicU64,
    /// Reaping completions and finishing loads and write-backs.
    pub complete_ns: AtomicU64,
    /// Waiting in the kernel with nothing to run: the waits that ended (read it with
    /// [`WorkerStats::idle_ns_now`], which adds the wait under way).
    pub idle_ns: AtomicU64,
    /// When the wait under way began, in nanoseconds since [`stats_epoch`] plus one; 0
    /// while the worker is not waiting.
    idle_since: AtomicU64,
    /// Page reads completed on this worker's ring.
    pub reads: AtomicU64,
    /// Page writes (write-backs) completed on this worker's ring.
    pub writes: AtomicU64,
    /// Page writes that failed or came back short (the page stays dirty in memory).
    pub write_errors: AtomicU64,
    /// Transfers of tasks' own buffers (an object's data) done through this worker's ring.
    pub transfers: AtomicU64,
    /// Socket operations (accepts, receives, sends) tasks made through this worker's ring.
    pub socket_ops: AtomicU64,
    /// Reads of the second cache tier's block medium through this worker's ring.
    pub tier_reads: AtomicU64,
    /// Writes of copies into the second cache tier's block medium through this ring.
    pub tier_writes: AtomicU64,
    /// Whether the engine took the pool's frames as registered (fixed) buffers.
    pub fixed_buffers: std::sync::atomic::AtomicBool,
}

/// The instant `WorkerStats::idle_since` counts from (the first use).
fn stats_epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl WorkerStats {
    /// The worker's idle time so far, the wait under way included: a worker asleep through
    /// a whole measured window shows it idle, not missing.
    pub fn idle_ns_now(&self) -> u64 {
        let ended = self.idle_ns.load(Ordering::Relaxed);
        match self.idle_since.load(Ordering::Acquire) {
            0 => ended,
            since => {
                let now = Instant::now().saturating_duration_since(stats_epoch()).as_nanos();
                ended + (now as u64).saturating_sub(since - 1)
            }
        }
    }

    /// Marks the start of a wait (`Some(at)`, the worker's clock) or its end (`None`).
    fn set_idle_since(&self, at: Option<Instant>) {
        let since =
            at.map_or(0, |at| at.saturating_duration_since(stats_epoch()).as_nanos() as u64 + 1);
        self.idle_since.store(since, Ordering::Release);
    }
}

/// A worker's I/O state, reachable from the tasks it runs through a thread-local.
pub(crate) struct WorkerIo {
    /// Declared before `pool`, so dropped first: it may have the pool's frames registered.
    engine: Box<dyn IoEngine>,
    pub pool: Arc<BufferPool>,
    /// Requests waiting for room in the engine's queue.
    backlog: VecDeque<IoRequest>,
    /// Reads this worker has in flight, with the tasks waiting for each.
    loads: PageMap<Vec<Waker>>,
    /// Loads that failed this round, with their error: every task that waited for one gets
    /// a copy when it runs next, then the entry goes (a later miss reads again).
    failed: PageMap<Error>,
    /// A task found no free frame: evict on the next round even above the watermark.
    evict_wanted: bool,
    /// Most reads in flight (and frames held for them) at once.
    load_limit: usize,
    /// Victims whose write-back finished in this round, evicted together after it.
    written: Vec<PageId>,
    /// The copies victims are written from, by page, while their writes are in flight.
    write_copies: PageMap<WriteCopy>,
    /// Tasks waiting for room under `load_limit`; each round wakes as many as there is room
    /// for (a woken task that no longer needs a read leaves its room to the next round).
    slot_waiters: VecDeque<Waker>,
    /// The log flush this worker has on its ring, if any.
    log_flight: Option<LogFlight>,
    /// The database's log, if it has one: this worker writes and syncs its flushes.
    log: Option<Arc<Log>>,
    stats: Arc<WorkerStats>,
    /// Raw transfers in flight or finished and not yet taken.
    raw: Flights<crate::io::AlignedBlock>,
    /// Socket operations in flight or finished and not yet taken (`net.rs`).
    net: Flights<Vec<u8>>,
    /// The second cache tier's block medium in the engine's list of files, if this worker
    /// reads and writes it through its ring.
    tier_device: Option<usize>,
    /// Loads reading the tier's copy of their page instead of the disk.
    tier_reads: PageMap<TierRead>,
    /// Writes of copies into the tier, by number.
    tier_writes: std::collections::HashMap<u64, StagedWrite>,
    next_tier_write: u64,
    /// Completions of tier reads held until the medium's added latency has passed.
    held: VecDeque<(Instant, IoCompletion)>,
}

/// Tag bit of socket operations (below the engine's `SOCKET_TAG_LIMIT`, above page tags).
const TAG_NET: u64 = 1 << 55;

/// A task's buffer handed to the worker for one operation on its ring: a read or write of
/// a device (`start_transfer`) or a socket call (`start_socket`). The worker owns the buffer
/// until the kernel is done with it, even if the task is dropped.
pub(crate) struct Flight<B> {
    buf: B,
    result: Option<std::io::Result<usize>>,
    waker: Option<Waker>,
    /// The task let go of it: the buffer goes when the operation completes.
    abandoned: bool,
}

/// The flights of one kind, by number (numbers below `limit`, reused after wrapping).
pub(crate) struct Flights<B> {
    map: std::collections::HashMap<u64, Flight<B>>,
    next: u64,
    limit: u64,
}

impl<B> Flights<B> {
    fn new(limit: u64) -> Self {
        Flights { map: std::collections::HashMap::new(), next: 0, limit }
    }

    /// The number the next flight gets (`insert` takes it).
    fn next_id(&self) -> u64 {
        self.next
    }

    /// Keeps `buf` as flight `id` (the number `next_id` gave) until it completes.
    fn insert(&mut self, id: u64, buf: B) {
        self.next = (id + 1) % self.limit;
        self.map.insert(id, Flight { buf, result: None, waker: None, abandoned: false });
    }

    /// The buffer and result of flight `id` once it completed; else `waker` is woken then.
    fn poll(&mut self, id: u64, waker: &Waker) -> Option<(B, std::io::Result<usize>)> {
        let flight = self.map.get_mut(&id).expect("a flight this worker started");
        if flight.result.is_none() {
            flight.waker = Some(waker.clone());
            return None;
        }
        let flight = self.map.remove(&id).expect("checked above");
        Some((flight.buf, flight.result.expect("checked above")))
    }

    /// The task of flight `id` let go of it; returns whether it is still in flight (its
    /// buffer then goes when it completes).
    fn abandon(&mut self, id: u64) -> bool {
        let Some(flight) = self.map.get_mut(&id) else { return false };
        match flight.result {
            Some(_) => {
                self.map.remove(&id);
                false
            }
            None => {
                flight.abandoned = true;
                true
            }
        }
    }

    /// Flight `id` completed with `result`: its task is woken (or, abandoned, it goes).
    fn complete(&mut self, id: u64, result: std::io::Result<usize>) {
        let Some(flight) = self.map.get_mut(&id) else { return };
        if flight.abandoned {
            self.map.remove(&id);
            return;
        }
        flight.result = Some(result);
        if let Some(waker) = flight.waker.take() {
            waker.wake();
        }
    }
}

/// A log flush written and synced through this worker's engine.
struct LogFlight {
    job: crate::wal::log::FlushJob,
    /// Pieces not yet completed.
    outstanding: usize,
    error: Option<Error>,
}

/// Tag bit of the write-and-sync requests of a log flush (page requests carry page ids,
/// below 2^47, shifted by one).
const TAG_LOG: u64 = 1 << 61;

/// What a task should do about a page it missed.
pub(crate) enum LoadStep {
    /// In memory now.
    Done,
    /// Being read by this worker: wait for it.
    Wait,
    /// Latched elsewhere: yield and try again.
    Retry,
    /// Being read by someone else (another worker): wait for that read.
    Elsewhere,
    /// This worker has as many reads in flight as it may, or no frame is free: wait for
    /// the next round's room.
    Full,
}

impl WorkerIo {
    pub(crate) fn try_load(&mut self, page_id: PageId) -> Result<LoadStep, Error> {
        if self.loads.contains_key(&page_id) {
            return Ok(LoadStep::Wait);
        }
        // A read holds a frame from the moment it starts: bounding the reads bounds the
        // frames they take from the cache, so pages just read are not evicted before use.
        if self.loads.len() >= self.load_limit {
            return Ok(LoadStep::Full);
        }
        match self.pool.begin_load(page_id)? {
            crate::buffer::LoadStart::Resident => Ok(LoadStep::Done),
            crate::buffer::LoadStart::Busy => Ok(LoadStep::Retry),
            crate::buffer::LoadStart::Loading => Ok(LoadStep::Elsewhere),
            crate::buffer::LoadStart::NoFrame => {
                // Wait for the next round's eviction instead of spinning on the frame count:
                // the round hands out room to waiting tasks after it has evicted.
                self.evict_wanted = true;
                Ok(LoadStep::Full)
            }
            crate::buffer::LoadStart::Started => {
                self.loads.insert(page_id, Vec::new());
                // The tier first: its block medium through this ring, a mapped one (or a
                // block one this ring cannot reach) copied at once.
                if let Some(device) = self.tier_device {
                    if let Some(read) = self.pool.tier_read_start(page_id) {
                        self.tier_reads.insert(page_id, read);
                        self.backlog.push_back(IoRequest {
                            kind: IoKind::Read,
                            device,
                            offset: read.offset(),
                            buf: self.pool.frame_ptr(page_id),
                            len: PAGE_SIZE,
                            tag: TAG_TIER | page_id << 1,
                        });
                        return Ok(LoadStep::Wait);
                    }
                } else if self.pool.finish_from_tier(page_id) {
                    self.loads.remove(&page_id);
                    return Ok(LoadStep::Done);
                }
                self.read_from_disk(page_id);
                Ok(LoadStep::Wait)
            }
        }
    }

    /// The tier, if this worker reads and writes its block medium through its ring.
    fn tier_ring(&self) -> Option<&crate::buffer::Tier> {
        self.tier_device.and(self.pool.tier())
    }

    /// Queues the read of `page_id` from the disk into its frame (its load under way).
    fn read_from_disk(&mut self, page_id: PageId) {
        let (device, offset) = self.pool.file().locate(page_id);
        self.backlog.push_back(IoRequest {
            kind: IoKind::Read,
            device,
            offset,
            buf: self.pool.frame_ptr(page_id),
            len: PAGE_SIZE,
            tag: page_id << 1,
        });
    }

    /// Queues the writes of copies into the tier that evictions on this worker staged.
    fn start_tier_writes(&mut self) {
        let (Some(device), Some(tier)) = (self.tier_device, self.pool.tier()) else { return };
        for write in tier.take_staged() {
            let id = self.next_tier_write;
            self.next_tier_write = (id + 1) % (1 << 40);
            self.backlog.push_back(IoRequest {
                kind: IoKind::Write,
                device,
                offset: write.offset(),
                buf: write.buf.as_ptr().cast_mut(),
                len: PAGE_SIZE,
                tag: TAG_TIER | TAG_WRITE | id << 1,
            });
            // (The buffer is the heap block's: moving the write does not move it.)
            self.tier_writes.insert(id, write);
        }
    }

    /// Completes the held tier reads whose added latency has passed.
    fn release_held(&mut self) {
        if self.held.is_empty() {
            // (Most rounds: no tier, or nothing held. The clock costs a call.)
            return;
        }
        let now = Instant::now();
        while self.held.front().is_some_and(|(due, _)| *due <= now) {
            let (_, completion) = self.held.pop_front().expect("checked above");
            self.complete_tier(completion, true);
        }
    }

    /// A read or write of the tier's block medium finished. A read's completion is held
    /// until its added latency has passed (`released`: it has); then the page is in memory,
    /// or, the copy unusable, its load goes on with a read of the disk.
    fn complete_tier(&mut self, completion: IoCompletion, released: bool) {
        let tag = completion.tag & !TAG_TIER;
        let tier = self.pool.tier().expect("tier I/O only with a tier");
        if !released {
            let counter =
                if tag & TAG_WRITE != 0 { &self.stats.tier_writes } else { &self.stats.tier_reads };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        if tag & TAG_WRITE != 0 {
            let write = self.tier_writes.remove(&(tag >> 1)).expect("a write this worker started");
            let whole = matches!(completion.result, Ok(n) if n == PAGE_SIZE);
            tier.finish_staged(write, whole);
            return;
        }
        let page_id = tag >> 1;
        let read = *self.tier_reads.get(&page_id).expect("a tier read this worker started");
        if !released && !tier.latency().is_zero() {
            self.held.push_back((read.submitted + tier.latency(), completion));
            return;
        }
        self.tier_reads.remove(&page_id);
        if self.pool.finish_tier_load(page_id, &read, &completion.result) {
            for waker in self.loads.remove(&page_id).unwrap_or_default() {
                waker.wake();
            }
        } else {
            self.read_from_disk(page_id);
        }
    }

    /// Registers `waker` for the load of `page_id`; `None` once it has finished (with the
    /// error, for the first task to ask, if it failed).
    pub(crate) fn wait_load(
        &mut self,
        page_id: PageId,
        waker: &Waker,
    ) -> Option<Result<(), Error>> {
        if let Some(error) = self.failed.get(&page_id) {
            return Some(Err(error.duplicate()));
        }
        match self.loads.get_mut(&page_id) {
            Some(wakers) => {
                if !wakers.iter().any(|w| w.will_wake(waker)) {
                    wakers.push(waker.clone());
                }
                None
            }
            None => Some(Ok(())),
        }
    }

    /// Registers `waker` to run when a read finishes (after `LoadStep::Full`).
    pub(crate) fn wait_for_slot(&mut self, waker: &Waker) {
        self.slot_waiters.push_back(waker.clone());
    }

    /// Wakes as many tasks waiting for room as there is room.
    fn hand_out_slots(&mut self) {
        let room = self.load_limit.saturating_sub(self.loads.len());
        for _ in 0..room {
            match self.slot_waiters.pop_front() {
                Some(waker) => waker.wake(),
                None => break,
            }
        }
    }

    /// Moves the backlog into the engine's queue, as far as it has room.
    fn fill_queue(&mut self) {
        while let Some(request) = self.backlog.pop_front() {
            // SAFETY: reads target the frame of a page this worker latched in `try_load`;
            // writes come from the frame of a victim latched in `evict`. Nobody touches a
            // latched page's frame until its completion is reaped in `complete`. A raw
            // transfer's buffer is owned by `raw` until its completion is reaped.
            match unsafe { self.engine.queue(request) } {
                Ok(()) => {}
                Err(QueueError::Full) => {
                    self.backlog.push_front(request);
                    return;
                }
                Err(e) => panic!("the worker built a bad I/O request: {e}"),
            }
        }
    }

    /// Starts a log flush on this worker's ring if the log wants one and none is running;
    /// engines that cannot queue it (and simulated disks) write it with blocking calls.
    fn start_log_flush(&mut self) {
        if self.log_flight.is_some() {
            return;
        }
        let Some(log) = self.log.as_ref() else { return };
        if !log.flush_wanted() {
            return;
        }
        let Some(job) = log.start_flush() else { return };
        // (Object data written since the last flush is synced first, with a blocking call:
        // only a database that writes objects has any.)
        if let Err(e) = log.before_flush() {
            let _ = log.finish_flush(job, Err(e));
            return;
        }
        let queued = match job.pieces() {
            Some(pieces) => {
                let mut queued = 0;
                let mut error = None;
                for (i, (fd, offset, bytes, then_sync)) in pieces.iter().enumerate() {
                    // SAFETY: the bytes belong to `job`, kept in `log_flight` until every
                    // piece's completion is reaped; the segment's file stays open as long.
                    let result = unsafe {
                        self.engine.queue_write_sync(
                            *fd,
                            *offset,
                            bytes.as_ptr(),
                            bytes.len(),
                            TAG_LOG | i as u64,
                            *then_sync,
                        )
                    };
                    match result {
                        Ok(()) => queued += 1,
                        Err(e) => {
                            error = Some(e);
                            break;
                        }
                    }
                }
                match error {
                    None => Some((queued, None)),
                    Some(QueueError::Unsupported) if queued == 0 => None,
                    Some(e) => Some((
                        queued,
                        Some(Error::io(
                            format!("queueing a log write of {}", job.path()),
                            std::io::Error::other(e.to_string()),
                        )),
                    )),
                }
            }
            None => None,
        };
        match queued {
            Some((outstanding, error)) if outstanding > 0 => {
                worker_context::set_log_flush_in_flight(true);
                self.log_flight = Some(LogFlight { job, outstanding, error });
            }
            Some((_, error)) => {
                let _ = log.finish_flush(job, Err(error.expect("nothing queued: an error")));
            }
            None => {
                let result = job.write_blocking();
                let _ = log.finish_flush(job, result);
            }
        }
    }

    fn complete_log(&mut self, completion: IoCompletion) {
        let flight = self.log_flight.as_mut().expect("a log flush in flight");
        flight.outstanding -= 1;
        if let Err(e) = completion.result {
            let path = flight.job.path();
            flight.error.get_or_insert(Error::io(format!("writing and syncing the log {path}"), e));
        }
        if flight.outstanding > 0 {
            return;
        }
        let flight = self.log_flight.take().expect("checked above");
        worker_context::set_log_flush_in_flight(false);
        let log = self.log.as_ref().expect("a log");
        let result = match flight.error {
            Some(e) => Err(e),
            None => Ok(()),
        };
        let _ = log.finish_flush(flight.job, result);
    }

    /// Queues a transfer of `buf` at `offset` of device `device`; returns its number.
    fn start_raw(
        &mut self,
        kind: IoKind,
        device: usize,
        offset: u64,
        mut buf: crate::io::AlignedBlock,
    ) -> u64 {
        let id = self.raw.next_id();
        // (The buffer's memory is its own heap block: moving the block keeps the pointer.)
        let request = IoRequest {
            kind,
            device,
            offset,
            buf: buf.as_mut_slice().as_mut_ptr(),
            len: buf.len(),
            tag: TAG_RAW | id,
        };
        self.raw.insert(id, buf);
        self.backlog.push_back(request);
        id
    }

    /// Queues socket operation `kind` on `fd` with `buf` (a receive fills it, a send sends
    /// it); returns its number, or gives the buffer back with the engine's refusal.
    fn start_net(
        &mut self,
        kind: NetKind,
        fd: std::os::fd::RawFd,
        mut buf: Vec<u8>,
    ) -> std::result::Result<u64, (Vec<u8>, QueueError)> {
        let id = self.net.next_id();
        let op = match kind {
            NetKind::Accept => SocketOp::Accept { fd },
            NetKind::Recv(timeout) => {
                SocketOp::Recv { fd, buf: buf.as_mut_ptr(), len: buf.len(), timeout }
            }
            NetKind::Send => SocketOp::Send { fd, buf: buf.as_ptr(), len: buf.len() },
            NetKind::Sleep(duration) => SocketOp::Sleep { duration },
        };
        // SAFETY: the buffer's heap block moves into `net` with it (moving a `Vec` keeps its
        // pointer) and stays there, untouched, until the completion is reaped, even if the
        // task goes (`abandon_net`); the task keeps the socket open as long, or cancels.
        match unsafe { self.engine.queue_socket(op, TAG_NET | id) } {
            Ok(()) => {
                self.net.insert(id, buf);
                self.stats.socket_ops.fetch_add(1, Ordering::Relaxed);
                Ok(id)
            }
            Err(e) => Err((buf, e)),
        }
    }

    fn complete(&mut self, completion: IoCompletion) {
        let stats = Arc::clone(&self.stats);
        let stats = &*stats;
        if completion.tag & TAG_LOG != 0 {
            self.complete_log(completion);
            return;
        }
        if completion.tag & TAG_RAW != 0 {
            stats.transfers.fetch_add(1, Ordering::Relaxed);
            self.raw.complete(completion.tag & !TAG_RAW, completion.result);
            return;
        }
        if completion.tag & TAG_NET != 0 {
            self.net.complete(completion.tag & !TAG_NET, completion.result);
            return;
        }
        if completion.tag & TAG_TIER != 0 {
            self.complete_tier(completion, false);
            return;
        }
        let page_id = completion.tag >> 1;
        if completion.tag & TAG_WRITE == 0 {
            stats.reads.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = self.pool.finish_load(page_id, completion.result) {
                self.failed.insert(page_id, e);
            }
            for waker in self.loads.remove(&page_id).unwrap_or_default() {
                waker.wake();
            }
        } else {
            // (A one-page copy goes back to the thread's stash.)
            let (first, count) =
                self.write_copies.remove(&page_id).map_or((page_id, 1), |c| (c.first, c.count));
            let neighbours: Vec<PageId> =
                (first..first + count as PageId).filter(|&id| id != page_id).collect();
            match completion.result {
                Ok(bytes) if bytes == count * PAGE_SIZE => {
                    stats.writes.fetch_add(1, Ordering::Relaxed);
                    self.pool.note_write();
                    self.written.push(page_id);
                    self.pool.finish_neighbour_writes(&neighbours);
                }
                _ => {
                    // The pages stay in memory, dirty; the durability work decides what a
                    // failed write means for the database as a whole.
                    stats.write_errors.fetch_add(1, Ordering::Relaxed);
                    let reason = match &completion.result {
                        Ok(n) => format!(
                            "pages {first}..{}: short write of {n} bytes",
                            first + count as PageId
                        ),
                        Err(e) => format!("pages {first}..{}: {e}", first + count as PageId),
                    };
                    for id in neighbours {
                        self.pool.fail_write_back(id, reason.clone());
                    }
                    self.pool.fail_write_back(page_id, reason);
                }
            }
        }
    }
}

/// Dirty pages written in the same request as a victim, at most, on each side of it.
const NEIGHBOURS: u64 = 8;

/// What a victim's write-back writes from while it is in flight: its copy, alone or with
/// copies of dirty pages beside it on disk (`BufferPool::write_neighbour_start`), pages
/// `first..first + count` in order.
struct WriteCopy {
    block: AlignedBlock,
    first: PageId,
    count: usize,
}

impl WriteCopy {
    /// Victim `page_id`'s write, sealed into `copy`, with the dirty pages next to it on disk
    /// that are ready to go too (up to `NEIGHBOURS` on each side, in unbroken runs). A disk
    /// takes a few pages in one request for little more than the price of one (this
    /// project's VM disk: 4 KiB random writes at 46–54 k/s, 16 KiB at 36 k/s), and a cloud
    /// volume counts requests against its limit. TPC-C out of memory (4 warehouses, 40 MiB):
    /// write requests per transaction 3.10 → 2.52, pages written 3.05 → 3.41 (neighbours
    /// changed again before their own eviction are written twice), and with the disk's
    /// write requests capped at 20 k/s, 6.5 k → 8.0 k transactions per second
    /// (docs/benchmarks.md).
    fn with_neighbours(pool: &BufferPool, page_id: PageId, copy: AlignedBlock) -> WriteCopy {
        let (device, offset) = pool.file().locate(page_id);
        // A neighbour must lie right beside the victim on the same device (striped devices
        // split consecutive pages at chunk ends).
        let beside = |id: PageId| {
            let distance = id as i64 - page_id as i64;
            pool.file().locate(id)
                == (device, offset.wrapping_add_signed(distance * PAGE_SIZE as i64))
        };
        let take = |id: PageId| {
            if !beside(id) {
                return None;
            }
            let mut copy = AlignedBlock::reused(PAGE_SIZE);
            pool.write_neighbour_start(id, copy.as_mut_slice()).then_some(copy)
        };
        let below: Vec<AlignedBlock> =
            (1..=NEIGHBOURS.min(page_id)).map_while(|k| take(page_id - k)).collect();
        let above: Vec<AlignedBlock> = (1..=NEIGHBOURS).map_while(|k| take(page_id + k)).collect();
        if below.is_empty() && above.is_empty() {
            return WriteCopy { block: copy, first: page_id, count: 1 };
        }
        let count = below.len() + 1 + above.len();
        let mut block = AlignedBlock::reused(count * PAGE_SIZE);
        let pages = below.iter().rev().chain([&copy]).chain(&above);
        for (out, page) in block.as_mut_slice().chunks_mut(PAGE_SIZE).zip(pages) {
            out.copy_from_slice(page.as_slice());
        }
        WriteCopy { block, first: page_id - below.len() as PageId, count }
    }
}

thread_local! {
    static CURRENT: std::cell::RefCell<Option<WorkerIo>> = const { std::cell::RefCell::new(None) };
}

thread_local! {
    /// While a task is polled: the time its earlier polls took, in nanoseconds, and when
    /// this poll began (`task_run_ns`).
    static TASK_CLOCK: std::cell::Cell<Option<(u64, Instant)>> = const { std::cell::Cell::new(None) };
}

/// Nanoseconds the calling task has run on its worker so far: the time its polls took, not
/// the time it waited (for I/O, a lock, its turn) nor the worker's own phases between polls
/// (eviction, submitting, completions). `None` off a worker's task. A task may read it
/// before and after a piece of work to learn what that work cost the worker.
pub fn task_run_ns() -> Option<u64> {
    TASK_CLOCK.get().map(|(before, since)| before + since.elapsed().as_nanos() as u64)
}

thread_local! {
    /// Operations a task may still finish before it yields to the others (see `spend_budget`).
    static BUDGET: std::cell::Cell<u32> = const { std::cell::Cell::new(OPS_PER_TURN) };
}

/// Operations that finish without waiting before their task gives the worker back: a task
/// whose pages are all in memory would otherwise never yield, and starve the tasks behind it.
const OPS_PER_TURN: u32 = 32;

/// Counts one finished operation; true when the task should yield now.
pub(crate) fn spend_budget() -> bool {
    BUDGET.with(|budget| {
        let left = budget.get().saturating_sub(1);
        if left == 0 {
            budget.set(OPS_PER_TURN);
            true
        } else {
            budget.set(left);
            false
        }
    })
}

/// Runs `f` on the current worker's I/O state; `None` when not called from a worker task
/// (or while a blocking call hides it: `HideWorker`).
pub(crate) fn with_io<R>(f: impl FnOnce(&mut WorkerIo) -> R) -> Option<R> {
    if !worker_context::on_worker() {
        return None;
    }
    CURRENT.with(|cell| cell.borrow_mut().as_mut().map(f))
}

/// A task's operation on its worker's ring, of kind `K` ([`Transfer`], [`NetTransfer`]);
/// resolves to the buffer and what the call returned. Dropping it before then leaves the
/// buffer to the worker until the kernel is done with it.
pub(crate) struct InFlight<K: FlightKind> {
    id: u64,
    done: bool,
    kind: std::marker::PhantomData<K>,
}

impl<K: FlightKind> std::fmt::Debug for InFlight<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight").field("id", &self.id).field("done", &self.done).finish()
    }
}

impl<K: FlightKind> InFlight<K> {
    fn new(id: u64) -> Self {
        InFlight { id, done: false, kind: std::marker::PhantomData }
    }
}

/// Which flights of the worker an [`InFlight`] is one of.
pub(crate) trait FlightKind {
    type Buf;
    fn flights(io: &mut WorkerIo) -> &mut Flights<Self::Buf>;
    /// A flight given up while still in flight: what else must happen.
    fn abandoned(_io: &mut WorkerIo, _id: u64) {}
}

/// A read or write of a task's own buffer on a device ([`start_transfer`]).
pub(crate) enum RawKind {}
/// A socket call ([`start_socket`]).
pub(crate) enum SocketKind {}

impl FlightKind for RawKind {
    type Buf = crate::io::AlignedBlock;
    fn flights(io: &mut WorkerIo) -> &mut Flights<Self::Buf> {
        &mut io.raw
    }
}

impl FlightKind for SocketKind {
    type Buf = Vec<u8>;
    fn flights(io: &mut WorkerIo) -> &mut Flights<Self::Buf> {
        &mut io.net
    }
    /// A receive may otherwise wait for its peer for ever, and take its next bytes.
    fn abandoned(io: &mut WorkerIo, id: u64) {
        io.engine.cancel_socket(TAG_NET | id);
    }
}

/// A read or write of a task's own buffer through its worker's ring.
pub(crate) type Transfer = InFlight<RawKind>;
/// A socket call through the worker's ring.
pub(crate) type NetTransfer = InFlight<SocketKind>;

impl<K: FlightKind> std::future::Future for InFlight<K> {
    type Output = (K::Buf, std::io::Result<usize>);

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let id = self.id;
        match with_io(|io| K::flights(io).poll(id, cx.waker())).expect("polled on its worker") {
            Some(done) => {
                self.done = true;
                Poll::Ready(done)
            }
            None => Poll::Pending,
        }
    }
}

impl<K: FlightKind> Unpin for InFlight<K> {}

impl<K: FlightKind> Drop for InFlight<K> {
    fn drop(&mut self) {
        if !self.done {
            let id = self.id;
            // (A worker's tasks are dropped on it: its state is there.)
            let _ = with_io(|io| {
                if K::flights(io).abandon(id) {
                    K::abandoned(io, id);
                }
            });
        }
    }
}

/// Queues a read into (or a write from) `buf` at `offset` of device `device` on the current
/// worker's ring, submitted with the worker's next batch; `Err(buf)` when not on a worker
/// (the caller makes a blocking call instead).
pub(crate) fn start_transfer(
    kind: IoKind,
    device: usize,
    offset: u64,
    buf: crate::io::AlignedBlock,
) -> Result<Transfer, crate::io::AlignedBlock> {
    if !worker_context::on_worker() {
        return Err(buf);
    }
    CURRENT.with(|cell| match cell.borrow_mut().as_mut() {
        Some(io) => Ok(Transfer::new(io.start_raw(kind, device, offset, buf))),
        None => Err(buf),
    })
}

/// Which socket operation (`start_socket`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NetKind {
    Accept,
    /// With a timeout, or none.
    Recv(Option<std::time::Duration>),
    Send,
    /// A timer (no socket).
    Sleep(std::time::Duration),
}

/// Why `start_socket` did not queue an operation.
#[derive(Debug)]
pub(crate) enum NetRefusal {
    /// Not on a worker, or its engine queues no socket operations: make the blocking call.
    Blocking,
    /// The ring is full for now: yield and try again.
    Full,
}

/// Hands socket operation `kind` on `fd` and `buf` to the calling task's worker, for its
/// next submission; gives `buf` back if it cannot.
pub(crate) fn start_socket(
    kind: NetKind,
    fd: std::os::fd::RawFd,
    buf: Vec<u8>,
) -> std::result::Result<NetTransfer, (Vec<u8>, NetRefusal)> {
    if !worker_context::on_worker() {
        return Err((buf, NetRefusal::Blocking));
    }
    CURRENT.with(|cell| match cell.borrow_mut().as_mut() {
        Some(io) => match io.start_net(kind, fd, buf) {
            Ok(id) => Ok(NetTransfer::new(id)),
            Err((buf, QueueError::Full)) => Err((buf, NetRefusal::Full)),
            Err((buf, _)) => Err((buf, NetRefusal::Blocking)),
        },
        None => Err((buf, NetRefusal::Blocking)),
    })
}

/// Hides this thread's worker I/O state (if it is a worker's) until dropped: whatever runs
/// meanwhile is not on a worker (`worker_context::on_worker`) and loads with blocking reads
/// (see `block_on`).
pub(crate) struct HideWorker {
    was: bool,
    was_hidden: bool,
    was_blocking: bool,
}

impl HideWorker {
    #[inline]
    pub(crate) fn new() -> HideWorker {
        let was = worker_context::set_on_worker(false);
        let was_hidden = match was {
            true => worker_context::set_hidden(true),
            false => worker_context::in_blocking_call_on_worker(),
        };
        let was_blocking = worker_context::set_blocking(true);
        HideWorker { was, was_hidden, was_blocking }
    }
}

impl Drop for HideWorker {
    #[inline]
    fn drop(&mut self) {
        worker_context::set_on_worker(self.was);
        if self.was {
            worker_context::set_hidden(self.was_hidden);
        }
        worker_context::set_blocking(self.was_blocking);
    }
}

/// A task slot: the future, and the waker that requeues it.
struct Slot {
    future: Option<BoxedTask>,
    waker: Waker,
    queued: bool,
    /// Nanoseconds the task's polls have taken so far (`task_run_ns`).
    run_ns: u64,
}

/// Everything one worker thread owns.
pub struct Worker {
    index: usize,
    count: usize,
    inbox: Arc<Inbox>,
    stats: Arc<WorkerStats>,
    slots: Vec<Slot>,
    free_slots: Vec<usize>,
    ready: VecDeque<usize>,
    live: usize,
    clock_hand: u64,
    /// A second hand over the whole clock, for when this worker's part has nothing to give.
    steal_hand: u64,
    evict_batch: usize,
    /// The longest the worker polls its inbox before it sleeps (`Options::idle_spin`).
    idle_spin: std::time::Duration,
    /// How long its next poll lasts (`idle_spell_ended`).
    poll: std::time::Duration,
}

impl Worker {
    pub fn new(
        index: usize,
        count: usize,
        inbox: Arc<Inbox>,
        stats: Arc<WorkerStats>,
        idle_spin: std::time::Duration,
    ) -> Self {
        Worker {
            index,
            count,
            inbox,
            stats,
            slots: Vec::new(),
            free_slots: Vec::new(),
            ready: VecDeque::new(),
            live: 0,
            clock_hand: 0,
            steal_hand: 0,
            evict_batch: 64, // set from the pool in `run`
            idle_spin,
            poll: idle_spin,
        }
    }

    /// Runs the loop until shut down and every task has finished.
    pub fn run(
        mut self,
        pool: Arc<BufferPool>,
        log: Option<Arc<Log>>,
        mut engine: Box<dyn IoEngine>,
    ) {
        let (frames, frames_len) = pool.frames_region();
        // SAFETY: the frames stay mapped while the pool lives, and this worker holds the
        // pool until after its engine is dropped (`WorkerIo` drops `engine` first).
        let registered = unsafe { engine.register_memory(frames, frames_len) };
        self.stats.fixed_buffers.store(registered, Ordering::Relaxed);
        // Reads in flight hold frames: leave most of this worker's share of the pool to the
        // pages the tasks are using.
        let share = pool.pool_pages() as usize / self.count;
        let load_limit = engine.depth().min(share / 4).max(1);
        // A block medium of the tier is the file after the devices in the engine's list,
        // where the engine was opened with it (`open_engine_with`).
        let tier_device = pool.tier().filter(|tier| tier.is_block()).and_then(|_| {
            let devices = pool.file().devices()?.count();
            (engine.file_count() == Some(devices + 1)).then_some(devices)
        });
        self.evict_batch = crate::buffer::evict_batch_size(pool.pool_pages());
        CURRENT.with(|cell| {
            *cell.borrow_mut() = Some(WorkerIo {
                load_limit,
                written: Vec::new(),
                write_copies: PageMap::default(),
                slot_waiters: VecDeque::new(),
                log_flight: None,
                stats: Arc::clone(&self.stats),
                pool,
                engine,
                backlog: VecDeque::new(),
                loads: PageMap::default(),
                failed: PageMap::default(),
                evict_wanted: false,
                log: log.clone(),
                raw: Flights::new(TAG_RAW),
                net: Flights::new(TAG_NET),
                tier_device,
                tier_reads: PageMap::default(),
                tier_writes: std::collections::HashMap::new(),
                next_tier_write: 0,
                held: VecDeque::new(),
            })
        });
        worker_context::set_on_worker(true);
        worker_context::set_lane(self.index + 1);
        with_io(|io| io.tier_ring().map(|tier| tier.attach_ring()));
        let mut completions = Vec::new();
        let mut clock = Instant::now();
        loop {
            let shutdown = self.intake();
            if let Some(log) = &log {
                log.worker_runs();
            }
            self.run_ready();
            if let Some(log) = &log {
                log.worker_ran();
            }
            with_io(|io| io.failed.clear());
            clock = self.charge(&self.stats.task_ns, clock);
            // A phase that had nothing to do is not timed (a clock read costs about as much
            // as such a phase); its moment goes to the next phase timed.
            if self.evict() {
                clock = self.charge(&self.stats.evict_ns, clock);
            }
            let (in_flight, backlog, holding, submitted, awaited) = with_io(|io| {
                io.hand_out_slots();
                io.start_tier_writes();
                io.fill_queue();
                io.start_log_flush();
                let submitted = match io.engine.submit() {
                    Ok(submitted) => submitted,
                    Err(e) => panic!("submitting I/O failed: {e}"),
                };
                // Page reads that tasks wait for: their completions end the worker's wait,
                // which polling would only make cost more CPU (out of memory, 3-4 % fewer
                // transactions and 9 % more CPU per transaction in TPC-C, 2026-12-07).
                let awaited = !io.loads.is_empty();
                let (in_flight, held) = (io.engine.in_flight(), !io.held.is_empty());
                (in_flight, io.backlog.len(), held, submitted, awaited)
            })
            .expect("worker I/O state");
            if submitted > 0 {
                clock = self.charge(&self.stats.submit_ns, clock);
            }
            let mut idle = self.ready.is_empty() && !self.has_woken();
            if in_flight > 0 || holding {
                // Out of work with no page read in flight (writes, the log's, timers, sockets):
                // polls for a hand-off or a completion a while first.
                let spell = (idle && !holding && !awaited).then_some(clock);
                let mut poll_timed_out = false;
                if spell.is_some() {
                    self.stats.set_idle_since(Some(clock));
                    let (polled, timed_out) = self.poll_inbox(|| {
                        let reaped = with_io(|io| io.engine.reap(&mut completions, false));
                        // (An error is met again by the reap below.)
                        reaped.expect("worker I/O state").map_or(true, |n| n > 0)
                    });
                    self.stats.set_idle_since(None);
                    clock = self.charge(&self.stats.idle_ns, clock);
                    idle = !polled;
                    poll_timed_out = timed_out;
                }
                // Waiting in the kernel: with the wake-up armed, hand-offs from other threads
                // end the wait (`Inbox`); without it, only this worker's completions do.
                // Completions held for the tier's added latency are polled for instead, as
                // a device's poll queue would be.
                let armed = idle
                    && !holding
                    && self
                        .inbox
                        .kick_fd()
                        .is_some_and(|fd| with_io(|io| io.engine.arm_wake(fd)) == Some(true));
                let wait = idle && !holding && (!armed || self.inbox.enter_kernel());
                if wait {
                    self.stats.set_idle_since(Some(clock));
                }
                let reaped =
                    with_io(|io| io.engine.reap(&mut completions, wait)).expect("worker I/O state");
                if armed {
                    self.inbox.leave_kernel();
                }
                reaped.unwrap_or_else(|e| panic!("reaping I/O failed: {e}"));
                if with_io(|io| io.engine.take_wake()) == Some(true) {
                    self.inbox.drain_kick();
                }
                if wait {
                    // (Ended before it is charged: a reader meanwhile may miss the wait, never
                    // count it twice.)
                    self.stats.set_idle_since(None);
                    clock = self.charge(&self.stats.idle_ns, clock);
                }
                if let Some(start) = spell {
                    self.idle_spell_ended(clock - start, poll_timed_out);
                }
                with_io(|io| {
                    for completion in completions.drain(..) {
                        io.complete(completion);
                    }
                    io.release_held();
                    if !io.written.is_empty() {
                        io.pool.finish_write_back(&io.written);
                        io.written.clear();
                    }
                });
                clock = self.charge(&self.stats.complete_ns, clock);
            } else if idle && backlog == 0 {
                if shutdown && self.live == 0 {
                    break;
                }
                self.stats.set_idle_since(Some(clock));
                let (polled, timed_out) = self.poll_inbox(|| false);
                if !polled {
                    self.sleep();
                }
                self.stats.set_idle_since(None);
                let start = clock;
                clock = self.charge(&self.stats.idle_ns, clock);
                self.idle_spell_ended(clock - start, timed_out);
            }
        }
        with_io(|io| io.tier_ring().map(|tier| tier.detach_ring()));
        worker_context::set_on_worker(false);
        worker_context::set_lane(0);
        CURRENT.with(|cell| cell.borrow_mut().take());
    }

    fn charge(&self, counter: &AtomicU64, since: Instant) -> Instant {
        let now = Instant::now();
        counter.fetch_add((now - since).as_nanos() as u64, Ordering::Relaxed);
        now
    }

    fn has_woken(&self) -> bool {
        !self.inbox.state.lock().unwrap().woken.is_empty()
    }

    /// Takes new tasks and wake-ups from the inbox; returns whether shutdown was ordered.
    fn intake(&mut self) -> bool {
        let (spawned, woken, shutdown) = {
            let mut state = self.inbox.state.lock().unwrap();
            self.inbox.posted.store(false, Ordering::Relaxed);
            (std::mem::take(&mut state.spawned), std::mem::take(&mut state.woken), state.shutdown)
        };
        for future in spawned {
            let id = match self.free_slots.pop() {
                Some(id) => id,
                None => {
                    let id = self.slots.len();
                    let waker = Waker::from(Arc::new(TaskWaker {
                        task: id,
                        inbox: Arc::clone(&self.inbox),
                    }));
                    self.slots.push(Slot { future: None, waker, queued: false, run_ns: 0 });
                    id
                }
            };
            self.slots[id].future = Some(future);
            self.slots[id].queued = true;
            self.slots[id].run_ns = 0;
            self.ready.push_back(id);
            self.live += 1;
        }
        for id in woken {
            if let Some(slot) = self.slots.get_mut(id) {
                if slot.future.is_some() && !slot.queued {
                    slot.queued = true;
                    self.ready.push_back(id);
                }
            }
        }
        shutdown
    }

    /// Polls every task that was ready when the round began, once.
    fn run_ready(&mut self) {
        // One clock read per poll: each poll ends where the next begins.
        let mut clock = Instant::now();
        for _ in 0..self.ready.len() {
            let Some(id) = self.ready.pop_front() else { break };
            let slot = &mut self.slots[id];
            slot.queued = false;
            let Some(mut future) = slot.future.take() else { continue };
            let waker = slot.waker.clone();
            let mut cx = Context::from_waker(&waker);
            TASK_CLOCK.set(Some((slot.run_ns, clock)));
            let poll = future.as_mut().poll(&mut cx);
            TASK_CLOCK.set(None);
            let now = Instant::now();
            self.slots[id].run_ns += (now - clock).as_nanos() as u64;
            clock = now;
            match poll {
                Poll::Ready(()) => {
                    self.free_slots.push(id);
                    self.live -= 1;
                }
                Poll::Pending => self.slots[id].future = Some(future),
            }
        }
    }

    /// Evicts a batch from this worker's part of the clock when free frames run short:
    /// clean victims at once, dirty ones once their write-back (queued here) completes, if
    /// untouched meanwhile. Returns whether it swept (false: no frames wanted).
    fn evict(&mut self) -> bool {
        let (index, count, batch) = (self.index as u64, self.count as u64, self.evict_batch);
        let mut hand = self.clock_hand;
        let mut steal_hand = self.steal_hand;
        let swept = with_io(|io| {
            let headroom = (batch as u64).min(io.pool.pool_pages() / 4).max(1);
            if !io.evict_wanted && !io.pool.frames_short(headroom) {
                return false;
            }
            io.evict_wanted = false;
            let slots = io.pool.clock_slots();
            let (low, high) = (slots * index / count, slots * (index + 1) / count);
            let span = (high - low).max(1);
            let mut victims = Vec::with_capacity(batch);
            let mut swept = 0;
            // One pass at most per round: a page marked now is only evicted if it is still
            // untouched when this hand comes round again (second chance).
            while victims.len() < batch && swept < span {
                let step = 64.min(span - hand % span);
                io.pool.pick_victims(low + hand % span, step, batch, &mut victims);
                hand = (hand + step) % span;
                swept += step;
            }
            if victims.is_empty() && count > 1 {
                // Nothing to give in this worker's part (its pages may all sit in the parts
                // of idle workers): move the second hand, over the whole clock, instead.
                let mut swept = 0;
                while victims.len() < batch && swept < slots {
                    let step = 64.min(slots - steal_hand % slots);
                    io.pool.pick_victims(steal_hand % slots, step, batch, &mut victims);
                    steal_hand = (steal_hand + step) % slots;
                    swept += step;
                }
            }
            let mut clean = Vec::with_capacity(victims.len());
            let mut log_needed = 0;
            for page_id in victims {
                let mut copy = AlignedBlock::reused(PAGE_SIZE);
                match io.pool.write_back_start(page_id, copy.as_mut_slice()) {
                    WriteStart::Clean => clean.push(page_id),
                    WriteStart::Later(lsn) => {
                        log_needed = log_needed.max(lsn.unwrap_or(0));
                        io.pool.abort_evict(page_id);
                    }
                    WriteStart::Write => {
                        let (device, offset) = io.pool.file().locate(page_id);
                        let copy = WriteCopy::with_neighbours(&io.pool, page_id, copy);
                        let before = page_id - copy.first;
                        io.backlog.push_back(IoRequest {
                            kind: IoKind::Write,
                            device,
                            offset: offset - before * PAGE_SIZE as u64,
                            // (The block's heap memory: moving the block does not move it.)
                            buf: copy.block.as_ptr().cast_mut(),
                            len: copy.count * PAGE_SIZE,
                            tag: (page_id << 1) | TAG_WRITE,
                        });
                        io.write_copies.insert(page_id, copy);
                    }
                }
            }
            io.pool.finish_evict_many(&clean);
            if log_needed > 0 {
                // Dirty pages wait for the log: this or another worker flushes it next.
                if let Some(log) = &io.log {
                    log.request_flush(log_needed);
                }
            }
            true
        });
        self.clock_hand = hand;
        self.steal_hand = steal_hand;
        swept == Some(true)
    }

    /// Polls the inbox, and `completed` (whether I/O finished), for up to `poll`; returns
    /// whether something arrived, and whether the poll ran its whole length for nothing.
    /// (In memory a worker runs out of work mostly while its tasks wait for the commit lock
    /// that the other worker holds for some microseconds.)
    fn poll_inbox(&self, mut completed: impl FnMut() -> bool) -> (bool, bool) {
        if self.poll.is_zero() {
            return (false, false);
        }
        let start = Instant::now();
        loop {
            // (A clock read per 64 looks: it costs about as much as the looks.)
            for _ in 0..64 {
                if self.inbox.posted.load(Ordering::Acquire) {
                    return (true, false);
                }
                std::hint::spin_loop();
            }
            if completed() {
                return (true, false);
            }
            if start.elapsed() >= self.poll {
                return (false, true);
            }
        }
    }

    /// Sets the next poll's length once the worker has work again, `spell` after it ran out
    /// (the poll and the wait after it): the whole `idle_spin` when another thread handed it
    /// work within that (what a poll catches); half the last after a poll that ran its
    /// length for nothing, and none once that is under 2 µs; else as it was (the worker's
    /// own completions end its waits anyway). So a worker whose work comes far apart, as a
    /// server's at a low rate, stops spending CPU on polls: a paced `bench serve` at 5,000
    /// requests/s took 62 µs of server CPU per request with a fixed 50 µs poll, against
    /// 18–21 µs without one (2026-12-07).
    fn idle_spell_ended(&mut self, spell: std::time::Duration, poll_timed_out: bool) {
        let handed = self.inbox.posted.load(Ordering::Acquire);
        if handed && spell <= self.idle_spin {
            self.poll = self.idle_spin;
        } else if poll_timed_out {
            self.poll = match self.poll < std::time::Duration::from_micros(2) {
                true => std::time::Duration::ZERO,
                false => self.poll / 2,
            };
        }
    }

    /// Waits on the inbox until something arrives.
    fn sleep(&self) {
        let mut state = self.inbox.state.lock().unwrap();
        state.sleeping = true;
        while state.spawned.is_empty() && state.woken.is_empty() && !state.shutdown {
            state = self.inbox.wakeup.wait(state).unwrap();
        }
        state.sleeping = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The poll's length follows what ended the worker's idle spells: a hand-off soon after
    /// restores it whole, each poll that ran its length for nothing halves it (to none under
    /// 2 µs), and a spell that its own completion ended leaves it as it was.
    #[test]
    fn the_poll_shrinks_when_it_catches_nothing_and_comes_back_with_hand_offs() {
        let spin = Duration::from_micros(50);
        let inbox = Arc::new(Inbox::new());
        let mut worker = Worker::new(0, 1, Arc::clone(&inbox), Arc::default(), spin);
        assert_eq!(worker.poll, spin);
        let long = Duration::from_millis(1);
        worker.idle_spell_ended(long, true);
        assert_eq!(worker.poll, spin / 2);
        worker.idle_spell_ended(Duration::from_micros(10), false);
        assert_eq!(worker.poll, spin / 2, "a spell its own completion ended changes nothing");
        for _ in 0..10 {
            worker.idle_spell_ended(long, true);
        }
        assert_eq!(worker.poll, Duration::ZERO, "halved to nothing");
        assert_eq!(worker.poll_inbox(|| panic!("no poll at all")), (false, false));
        // Work handed over long after the worker went to sleep: no poll would have caught it.
        inbox.wake(7);
        worker.idle_spell_ended(long, false);
        assert_eq!(worker.poll, Duration::ZERO);
        // Handed over soon: the poll comes back whole, and sees the hand-off at once.
        worker.idle_spell_ended(Duration::from_micros(20), false);
        assert_eq!(worker.poll, spin);
        assert_eq!(worker.poll_inbox(|| false), (true, false));
        inbox.state.lock().unwrap().woken.clear();
        inbox.posted.store(false, Ordering::Relaxed);
        let (found, timed_out) = worker.poll_inbox(|| false);
        assert!(!found && timed_out, "nothing handed over: the poll runs its length");
    }
}
