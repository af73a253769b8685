//! The log: records appended in memory, written and synced in groups (one write
//! and one `fdatasync` for every commit that waits meanwhile), laid over segment files that
//! are reused once a checkpoint no longer needs them (their format: `segment.rs`).
//!
//! States of the log's bytes: *pending* (appended, in `State::pending`) → *writing* (taken by
//! a flush in progress; at most `MAX_FLIGHTS` at once) → *durable* (written and synced, and
//! so is everything before: below `durable`). Every flush ends with a flush-end record naming
//! where it began and how far the log was durable when it began: a crash can only tear
//! bytes that were not durable, so a hole in bytes a later flush calls durable is damage
//! (`recover.rs`).
//!
//! States of a segment slot (a file `wal/NNNNNN.log`): *vacant* (no file) → *prepared* (the
//! file made at its full size, zero-filled and synced; header zero) → *in use* (header written
//! and synced before any sector: in `State::segments`) → *free* (wholly before the last
//! checkpoint's redo position: in `State::free_slots`, its header left as it was, its bytes
//! never read again) → in use again (a new header). A preparation that fails removes its
//! file and the slot is vacant again.
//!
//! After a failed write or sync the log is *failed*: nothing more is written, every waiter and
//! every later commit gets the error, until the database is reopened. A failed sync is never
//! retried as if it had succeeded.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};

use super::record::{encode_commit, encode_image, RecordWriter, KIND_FLUSH_END};
use super::segment::{
    capacity_of_body, encode_segment_header, file_bytes, frame_into, framed_len, segment_name,
    Segment, SegmentHeader, StreamReader, SEGMENT_HEADER_BYTES,
};
use crate::buffer::{PageChange, WriteAhead};
use crate::error::{Error, PageId, Result};
use crate::io::{BlockDevice, Storage};

/// Flushes in progress at once. One: measured on this project's machine, two flushes in
/// flight (the second group written and synced while the first waits) made smaller groups
/// and no more commits per second (docs/benchmarks.md). It must stay one while a flush
/// rewrites the first block of its own from the previous flush's last one: two writes of the
/// same block in flight could land in either order.
pub const MAX_FLIGHTS: usize = 1;
/// A finished flush's buffers larger than this are freed rather than kept for the next.
const KEPT_BUFFER_BYTES: usize = 16 << 20;
/// File bytes (header excluded) of the small segment made when a new segment is needed and no
/// prepared one is ready (the first of a new database, say).
pub const SMALL_SEGMENT_BYTES: u64 = 1 << 20;
/// After a segment preparation failed (a full disk, say), the helper tries again only after
/// this long.
const PREPARE_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Writes zeros over the first `bytes` of `device` and syncs them: past the page cache where
/// it can (O_DIRECT through a second descriptor of the file: no copy into the cache, nothing
/// to evict later). A device that is not a real file (a simulated disk) is grown instead,
/// which reads as zeros too.
fn zero_fill(device: &dyn BlockDevice, bytes: u64) -> std::io::Result<()> {
    if device.raw_fd().is_none() {
        device.allocate(bytes)?;
        return device.sync();
    }
    let direct = crate::io::FileDevice::open(device.path(), false, true).ok();
    let zeros = crate::io::AlignedBlock::zeroed(1 << 20);
    let mut at = 0;
    while at < bytes {
        let len = (bytes - at).min(zeros.len() as u64) as usize;
        let piece = &zeros.as_slice()[..len];
        match &direct {
            Some(direct) if len % crate::io::IO_ALIGN == 0 => direct.write_at(piece, at)?,
            _ => device.write_at(piece, at)?,
        }
        at += len as u64;
    }
    if let Some(direct) = &direct {
        direct.sync()?;
    }
    device.sync()
}

/// What runs before a flush writes the log (see `Log::set_before_flush`).
pub struct BeforeFlush(pub Box<dyn Fn() -> Result<()> + Send + Sync>);

impl std::fmt::Debug for BeforeFlush {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeforeFlush")
    }
}

/// Reads stream bytes `lsn..lsn + buf.len()` from `segments` (contiguous framed segments);
/// false if they are not all written there.
pub fn read_stream(segments: &[Segment], lsn: u64, buf: &mut [u8]) -> Result<bool> {
    let mut reader = StreamReader::new(segments, lsn);
    match reader.bytes(lsn, buf.len())? {
        Some(bytes) => {
            buf.copy_from_slice(bytes);
            Ok(true)
        }
        None => Ok(false),
    }
}

#[derive(Debug)]
struct State {
    /// Log bytes `pending_start..tail`, not yet taken by a flush.
    pending: Vec<u8>,
    pending_start: u64,
    tail: u64,
    /// Flushes in progress, oldest first: `(start, end, finished)`. The durable LSN moves to
    /// a flush's end once it and every older one finished.
    flights: std::collections::VecDeque<(u64, u64, bool)>,
    /// Segments holding log bytes a recovery may need, in log order; the last one is written
    /// (or, if the log reached its end, the next one is made before anything else).
    segments: Vec<Segment>,
    /// The log bytes from the start of `pending_start`'s block in its segment to `pending_start`
    /// (written by the last flush; the next one writes them again); `None` until the first
    /// flush after opening reads them back.
    carry: Option<Vec<u8>>,
    /// A `pending` buffer a finished flush gave back, empty, to be `pending` again: a flush
    /// takes the pending bytes by swapping the buffers, not by copying them.
    spare_pending: Vec<u8>,
    /// The framed sectors of a finished flush, to frame the next one into if large enough
    /// (a new buffer of a few hundred KiB costs its page faults on every flush).
    spare_sectors: Option<crate::io::AlignedBlock>,
    /// Slots whose files are no longer needed, to reuse.
    free_slots: Vec<u32>,
    /// Slot numbers below `next_slot` with no file (a preparation failed), to use again.
    vacant_slots: Vec<u32>,
    next_slot: u32,
    /// When a segment preparation last failed.
    prepare_failed: Option<std::time::Instant>,
    /// Holders of `hold_flushes`: no flush starts while any holds.
    held: usize,
}

/// The slots a log starts with, besides its segments (see [`Log::new`]).
#[derive(Debug, Default, Clone)]
pub struct Slots {
    /// Slots whose files may be reused (their segments are not needed).
    pub free: Vec<u32>,
    /// One past the highest slot with a file.
    pub next: u32,
}

/// Counters, for stats and benchmarks.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct LogCounters {
    /// Records appended since open (commits, page images, checkpoints; not flush ends).
    pub records: AtomicU64,
    /// Of those, page images (a page's first write-back after a checkpoint logs it whole).
    pub images: AtomicU64,
    /// The bytes of those images' records.
    pub image_bytes: AtomicU64,
    /// Checkpoints completed since open (their superblocks written).
    pub checkpoints: AtomicU64,
    /// Flushes finished since open: each one write (per segment it touches) and one sync.
    pub flushes: AtomicU64,
    /// Bytes those flushes wrote: the log bytes, each flush's first block again, padding.
    pub bytes_written: AtomicU64,
    /// Time flushes spent between being taken and being finished, in nanoseconds.
    pub flight_ns: AtomicU64,
}

/// The write-ahead log of one open database (see the module documentation).
#[derive(Debug)]
pub struct Log {
    storage: Arc<dyn Storage>,
    segment_bytes: u64,
    state: Mutex<State>,
    flush_done: Condvar,
    /// Every log byte below this is durable.
    durable: AtomicU64,
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    /// Tasks waiting for `durable` to reach their LSN, and how many.
    task_waiters: Mutex<Vec<(u64, Waker)>>,
    waiting_tasks: std::sync::atomic::AtomicUsize,
    /// Highest LSN a write-back asked to be made durable.
    requested: AtomicU64,
    /// Highest LSN a commit that does not wait asked to be written in the background
    /// (`request_background_flush`).
    background: AtomicU64,
    /// Whether workers flush the log in their loops (else a waiting task flushes itself).
    by_workers: AtomicBool,
    /// Run before every flush writes its bytes: makes durable what the records in it
    /// rely on but do not carry (object data written in place before its commit).
    before_flush: std::sync::OnceLock<BeforeFlush>,
    /// Workers running tasks right now: a worker leaves a flush to the last of them to
    /// finish its turn, so that one flush takes the commits of all.
    running_workers: std::sync::atomic::AtomicUsize,
    /// For stats and benchmarks.
    pub counters: LogCounters,
    /// Segment files written full of zeros ahead of use, by a helper thread: syncing log
    /// writes into them does not also allocate blocks (fio here: `fdatasync` after 8 KiB
    /// writes costs ~145 µs in a zeroed file, ~267 µs in a fallocated one, ~344 µs in a
    /// growing one; docs/benchmarks.md).
    spares: Spares,
    /// The helper preparing a spare; it returns the slot it failed to prepare, if it failed.
    preparer: Mutex<Option<std::thread::JoinHandle<std::result::Result<(), u32>>>>,
    /// Flushes write through `O_DIRECT | O_DSYNC` descriptors (no `fdatasync` after them):
    /// measured here under a read and write-back load, 330 µs per 8 KiB durable write
    /// against 450 µs for a buffered write and `fdatasync` (fio; docs/benchmarks.md).
    direct: bool,
}

/// Segment files ready for use: slot and open file.
type Spares = Arc<Mutex<Vec<(u32, Arc<dyn BlockDevice>)>>>;

/// A flush in progress: log bytes `start..end`, to be written into `segments` and synced.
#[derive(Debug)]
pub struct FlushJob {
    writes: Vec<LogWrite>,
    start: u64,
    taken: std::time::Instant,
    /// The pending buffer its bytes were framed from, for the log to use again.
    spent: Vec<u8>,
}

/// One write of a flush as a worker queues it: descriptor, file offset, bytes, and whether
/// an `fdatasync` must follow.
pub type LogPiece<'a> = (std::os::fd::RawFd, u64, &'a [u8], bool);

/// One block-aligned write of a flush, in one segment.
#[derive(Debug)]
struct LogWrite {
    segment: Segment,
    offset: u64,
    /// The framed sectors to write, whole blocks: the first `len` bytes (the buffer may be
    /// one of an earlier, longer flush).
    sectors: crate::io::AlignedBlock,
    len: usize,
}

/// A write of a flush before its framing: the stream's bytes from `block`, where a block of
/// `segment` begins: `head` then `body`.
struct Unframed {
    segment: Segment,
    block: u64,
    head: Vec<u8>,
    body: Vec<u8>,
    /// A buffer to frame into, if it is large enough.
    reuse: Option<crate::io::AlignedBlock>,
}

impl Unframed {
    /// The write, and the emptied `body` (to be a pending buffer again).
    fn frame(self) -> (LogWrite, Vec<u8>) {
        let len = framed_len(self.head.len() + self.body.len());
        let mut sectors = match self.reuse {
            Some(sectors) if sectors.len() >= len => sectors,
            // Rounded up, so that the next flushes of about this size fit in it.
            _ => crate::io::AlignedBlock::zeroed(len.next_power_of_two()),
        };
        let parts = [&self.head[..], &self.body[..]];
        let offset =
            frame_into(&self.segment, self.block, parts, &mut sectors.as_mut_slice()[..len]);
        let mut body = self.body;
        body.clear();
        (LogWrite { segment: self.segment, offset, sectors, len }, body)
    }
}

impl LogWrite {
    /// The framed bytes to write.
    fn bytes(&self) -> &[u8] {
        &self.sectors.as_slice()[..self.len]
    }

    /// Writes with a blocking call: durable on return.
    fn write_blocking(&self) -> Result<()> {
        let path = self.segment.device.path().display().to_string();
        let context =
            |what: &str, e| Error::io(format!("{what} the log {path} at {}", self.offset), e);
        match &self.segment.writer {
            Some(writer) => writer.write_at(self.bytes(), self.offset),
            None => self.segment.device.write_at(self.bytes(), self.offset),
        }
        .map_err(|e| context("writing", e))?;
        if self.segment.writer.is_none() {
            self.segment.device.sync().map_err(|e| context("syncing", e))?;
        }
        Ok(())
    }
}

impl FlushJob {
    /// The writes of this flush: `(descriptor, file offset, bytes, then_sync)`, one per
    /// segment it touches; `then_sync`: an `fdatasync` must follow the write (not for a
    /// write-through descriptor). `None` if a segment has no descriptor (then write it with
    /// `write_blocking`).
    pub fn pieces(&self) -> Option<Vec<LogPiece<'_>>> {
        self.writes
            .iter()
            .map(|w| {
                let bytes = w.bytes();
                match &w.segment.writer {
                    Some(writer) => Some((writer.raw_fd()?, w.offset, bytes, false)),
                    None => Some((w.segment.device.raw_fd()?, w.offset, bytes, true)),
                }
            })
            .collect()
    }

    /// Writes and syncs the flush with blocking calls.
    pub fn write_blocking(&self) -> Result<()> {
        self.writes.iter().try_for_each(LogWrite::write_blocking)
    }

    /// The log path, to name in errors.
    pub fn path(&self) -> String {
        let last = self.writes.last().map(|w| &w.segment.device);
        last.map(|d| d.path().display().to_string()).unwrap_or_default()
    }

    /// Bytes this flush writes (log bytes, the start of its first block again, padding).
    fn written_bytes(&self) -> u64 {
        self.writes.iter().map(|w| w.len as u64).sum()
    }
}

impl Log {
    /// The log continuing at `tail` (everything before it durable), over `segments`
    /// (contiguous; the last one holds `tail` or ends there; none for a new log), with the
    /// other slot files in `slots`.
    pub fn new(
        storage: Arc<dyn Storage>,
        segment_bytes: u64,
        segments: Vec<Segment>,
        slots: Slots,
        tail: u64,
        direct: bool,
    ) -> Log {
        debug_assert!(segments.last().is_none_or(|s| s.start <= tail && tail <= s.end()));
        let used: Vec<u32> = segments.iter().map(|s| s.slot).collect();
        let vacant_slots = (0..slots.next)
            .filter(|slot| !used.contains(slot) && !slots.free.contains(slot))
            .rev()
            .collect();
        let mut free_slots = slots.free;
        free_slots.sort_unstable_by(|a, b| b.cmp(a));
        Log {
            storage,
            segment_bytes,
            state: Mutex::new(State {
                pending: Vec::with_capacity(1 << 20),
                pending_start: tail,
                tail,
                flights: std::collections::VecDeque::new(),
                segments,
                carry: None,
                spare_pending: Vec::new(),
                spare_sectors: None,
                free_slots,
                vacant_slots,
                next_slot: slots.next,
                prepare_failed: None,
                held: 0,
            }),
            flush_done: Condvar::new(),
            durable: AtomicU64::new(tail),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            task_waiters: Mutex::new(Vec::new()),
            waiting_tasks: std::sync::atomic::AtomicUsize::new(0),
            requested: AtomicU64::new(0),
            background: AtomicU64::new(0),
            by_workers: AtomicBool::new(false),
            before_flush: std::sync::OnceLock::new(),
            running_workers: std::sync::atomic::AtomicUsize::new(0),
            counters: LogCounters::default(),
            spares: Arc::new(Mutex::new(Vec::new())),
            preparer: Mutex::new(None),
            direct,
        }
    }

    fn failure_error(&self) -> Error {
        let reason = self.failure.lock().unwrap().clone().unwrap_or_default();
        Error::LogFailed { reason }
    }

    /// Fails unless the log still accepts writes.
    pub fn check(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(self.failure_error());
        }
        Ok(())
    }

    /// Marks the log failed (the first reason sticks) and wakes every waiter.
    pub fn fail(&self, reason: String) {
        {
            let mut failure = self.failure.lock().unwrap();
            if failure.is_none() {
                *failure = Some(reason);
            }
        }
        self.failed.store(true, Ordering::Release);
        self.flush_done.notify_all();
        let waiters = std::mem::take(&mut *self.task_waiters.lock().unwrap());
        waiters.into_iter().for_each(|(_, w)| w.wake());
    }

    /// Appends a record (made by `RecordWriter`, header completed here); returns its LSN
    /// and the LSN just past it.
    pub fn append(&self, record: &mut [u8]) -> Result<(u64, u64)> {
        self.check()?;
        let mut state = self.state.lock().unwrap();
        let lsn = state.tail;
        RecordWriter::finish(record, lsn);
        state.pending.extend_from_slice(record);
        state.tail += record.len() as u64;
        self.counters.records.fetch_add(1, Ordering::Relaxed);
        Ok((lsn, state.tail))
    }

    /// The LSN the next record gets.
    pub fn tail(&self) -> u64 {
        self.state.lock().unwrap().tail
    }

    /// The log position below which every byte is durable.
    pub fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Whether bytes are pending that no flush has taken.
    pub fn has_unflushed(&self) -> bool {
        let state = self.state.lock().unwrap();
        state.tail > state.pending_start
    }

    /// Blocks until every log byte below `lsn` is durable, writing and syncing them itself
    /// unless another thread's flush covers them (group commit: one leader flushes what all
    /// waiting commits appended).
    pub fn flush(&self, lsn: u64) -> Result<()> {
        loop {
            if self.durable() >= lsn {
                return Ok(());
            }
            self.check()?;
            // Only that worker's loop could finish its ring's flush: blocking writes and
            // checkpoints are refused inside tasks, and write-backs skip the wait there.
            debug_assert!(
                !crate::worker_context::log_flush_in_flight(),
                "waiting for our own flush"
            );
            let mut state = self.state.lock().unwrap();
            // Wait while the bytes are all in flushes already, or no flush may start.
            while (lsn <= state.pending_start
                || state.flights.len() >= MAX_FLIGHTS
                || state.held > 0)
                && self.durable() < lsn
                && !self.failed.load(Ordering::Acquire)
            {
                state = self.flush_done.wait(state).unwrap();
            }
            if self.durable() >= lsn {
                return Ok(());
            }
            self.check()?;
            self.lead_flush(state)?;
        }
    }

    /// Takes the pending bytes (the caller holds the state lock and no flush is in
    /// progress), writes and syncs them, and publishes the new durable LSN.
    fn lead_flush(&self, state: std::sync::MutexGuard<'_, State>) -> Result<()> {
        let Some(job) = self.take_flush(state)? else { return Ok(()) };
        let result = self.before_flush().and_then(|()| job.write_blocking());
        self.finish_flush(job, result)
    }

    /// Sets what runs before every flush writes its bytes (once; see `before_flush`).
    pub fn set_before_flush(&self, hook: BeforeFlush) {
        let _ = self.before_flush.set(hook);
    }

    /// Runs the hook set by `set_before_flush`, if any: the caller of `start_flush` calls
    /// it before it writes the job's bytes (a failure fails the flush, and the log).
    pub fn before_flush(&self) -> Result<()> {
        match self.before_flush.get() {
            Some(hook) => (hook.0)(),
            None => Ok(()),
        }
    }

    /// Starts a flush of everything pending, to be written by the caller (a worker, on its
    /// ring: `FlushJob::pieces`) and ended with `finish_flush`; `None` if a flush is in
    /// progress, nothing waits, or the log failed.
    pub fn start_flush(&self) -> Option<FlushJob> {
        if self.failed.load(Ordering::Acquire) {
            return None;
        }
        let state = self.state.lock().unwrap();
        if state.flights.len() >= MAX_FLIGHTS || state.held > 0 {
            return None;
        }
        self.take_flush(state).ok().flatten()
    }

    /// Makes the log durable up to its tail, then holds off every flush until
    /// `release_flushes`, once those in progress ended: the segment files stop changing
    /// (an online backup copies them). Commits that wait for the log wait meanwhile.
    /// Returns how far the log is durable, and the names of the segment files holding it
    /// from the oldest a recovery needs (relative to the data directory).
    pub fn hold_flushes(&self) -> Result<(u64, Vec<String>)> {
        self.flush(self.tail())?;
        let mut state = self.state.lock().unwrap();
        state.held += 1;
        while !state.flights.is_empty() && !self.failed.load(Ordering::Acquire) {
            state = self.flush_done.wait(state).unwrap();
        }
        let names = state.segments.iter().map(|s| super::segment::segment_name(s.slot)).collect();
        drop(state);
        if let Err(e) = self.check() {
            self.release_flushes();
            return Err(e);
        }
        Ok((self.durable(), names))
    }

    /// Ends a `hold_flushes`: flushes start again, and the commits waiting for one go on.
    pub fn release_flushes(&self) {
        let mut state = self.state.lock().unwrap();
        state.held -= 1;
        drop(state);
        self.flush_done.notify_all();
        self.wake_tasks();
    }

    fn take_flush(&self, mut state: std::sync::MutexGuard<'_, State>) -> Result<Option<FlushJob>> {
        debug_assert!(state.flights.len() < MAX_FLIGHTS);
        if state.tail == state.pending_start {
            return Ok(None);
        }
        // Close the flush with a marker saying where it began, and below which the log was
        // durable then (recovery tells a torn tail from damage by it).
        let start = state.pending_start;
        let mut marker = RecordWriter::new(KIND_FLUSH_END);
        marker.u64(start);
        marker.u64(self.durable());
        let lsn = state.tail;
        RecordWriter::finish(&mut marker.bytes, lsn);
        state.pending.extend_from_slice(&marker.bytes);
        state.tail += marker.bytes.len() as u64;
        let end = state.tail;
        match self.block_writes(&mut state, start, end) {
            Ok(unframed) => {
                state.pending.clear();
                state.pending_start = end;
                self.prepare_spare(&mut state, end);
                state.flights.push_back((start, end, false));
                let taken = std::time::Instant::now();
                drop(state);
                // Framed (a checksum per sector) after the lock, which commits take to
                // append under the commit lock. No other flush starts before this one
                // ends (`MAX_FLIGHTS`), and the carry is already in place for it.
                let mut spent = Vec::new();
                let mut writes = Vec::with_capacity(unframed.len());
                for piece in unframed {
                    let (write, body) = piece.frame();
                    writes.push(write);
                    if body.capacity() > spent.capacity() {
                        spent = body;
                    }
                }
                Ok(Some(FlushJob { writes, start, taken, spent }))
            }
            Err(e) => {
                drop(state);
                self.fail(e.to_string());
                Err(e)
            }
        }
    }

    /// The writes of pending log bytes `start..end`, to be framed ([`Unframed::frame`]):
    /// whole blocks of sectors of each segment they fall in, beginning with what the last
    /// flush wrote of `start`'s block (the same bytes again: a torn rewrite leaves them
    /// intact sector by sector), sectors past `end` left zero. Leaves the new carry in
    /// `state`.
    fn block_writes(&self, state: &mut State, start: u64, end: u64) -> Result<Vec<Unframed>> {
        let segments = self.segments_for(state, start, end)?;
        let mut carry = match state.carry.take() {
            Some(carry) => carry,
            None => {
                // The first flush since opening: read the start of the block back.
                let block = segments[0].block_lsn(start);
                let mut carry = vec![0u8; (start - block) as usize];
                if !read_stream(&state.segments, block, &mut carry)? {
                    let segment = &segments[0];
                    return Err(Error::LogCorrupt {
                        path: segment.path().to_owned(),
                        offset: None,
                        lsn: Some(block),
                        reason: "the log's last block does not read back whole".into(),
                    });
                }
                carry
            }
        };
        let mut writes = Vec::with_capacity(segments.len());
        if let [_] = segments[..] {
            // One segment (nearly every flush): the pending buffer itself goes to the write,
            // and an empty one takes its place.
            let mut segment = segments.into_iter().next().expect("one segment");
            let block = segment.block_lsn(start);
            debug_assert_eq!(block + carry.len() as u64, start);
            debug_assert_eq!(state.pending.len() as u64, end - start);
            let spare = std::mem::take(&mut state.spare_pending);
            let body = std::mem::replace(&mut state.pending, spare);
            let next = if end < segment.end() {
                let cut = (segment.block_lsn(end) - block) as usize;
                match cut.checked_sub(carry.len()) {
                    Some(in_body) => body[in_body..].to_vec(),
                    None => [&carry[cut..], &body[..]].concat(),
                }
            } else {
                Vec::new()
            };
            self.open_writer(state, &mut segment);
            let reuse = state.spare_sectors.take();
            writes.push(Unframed { segment, block, head: carry, body, reuse });
            state.carry = Some(next);
            return Ok(writes);
        }
        for mut segment in segments {
            let from = start.max(segment.start);
            let to = end.min(segment.end());
            let mut bytes = if from == start { std::mem::take(&mut carry) } else { Vec::new() };
            let block = segment.block_lsn(from);
            debug_assert_eq!(block + bytes.len() as u64, from);
            bytes.extend_from_slice(&state.pending[(from - start) as usize..(to - start) as usize]);
            // The next flush starts with this segment's last partial block, unless the
            // segment is full (it then starts at the next one's first block).
            carry = if to < segment.end() {
                bytes[(segment.block_lsn(to) - block) as usize..].to_vec()
            } else {
                Vec::new()
            };
            self.open_writer(state, &mut segment);
            writes.push(Unframed { segment, block, head: bytes, body: Vec::new(), reuse: None });
        }
        state.carry = Some(carry);
        Ok(writes)
    }

    /// Opens the write-through descriptor of `segment` (and of its entry in `state`) if the
    /// log writes directly and it has none yet; a file system that refuses `O_DIRECT` keeps
    /// the buffered write and `fdatasync`.
    fn open_writer(&self, state: &mut State, segment: &mut Segment) {
        if !self.direct || segment.writer.is_some() || segment.device.raw_fd().is_none() {
            return;
        }
        let Ok(writer) = crate::io::FileDevice::open_write_through(segment.device.path()) else {
            return;
        };
        let writer = Some(Arc::new(writer));
        if let Some(entry) = state.segments.iter_mut().find(|s| s.slot == segment.slot) {
            entry.writer = writer.clone();
        }
        segment.writer = writer;
    }

    /// Ends a flush: on success its bytes are durable and waiters are woken; on failure
    /// the log is failed (a failed sync is never taken for a success).
    pub fn finish_flush(&self, mut job: FlushJob, result: Result<()>) -> Result<()> {
        let written = job.written_bytes();
        {
            let mut state = self.state.lock().unwrap();
            let flight = state.flights.iter_mut().find(|f| f.0 == job.start);
            flight.expect("a flush in progress").2 = result.is_ok();
            // Its buffers serve the next flushes (its writes ended: completed or failed),
            // unless a flush held back for long (a backup) made them outsized.
            let spent = std::mem::take(&mut job.spent);
            if spent.capacity() > state.spare_pending.capacity()
                && spent.capacity() <= KEPT_BUFFER_BYTES
            {
                state.spare_pending = spent;
            }
            let longest =
                std::mem::take(&mut job.writes).into_iter().max_by_key(|w| w.sectors.len());
            if let Some(write) = longest {
                let kept = state.spare_sectors.as_ref().map_or(0, |s| s.len());
                if write.sectors.len() > kept && write.sectors.len() <= KEPT_BUFFER_BYTES {
                    state.spare_sectors = Some(write.sectors);
                }
            }
            if result.is_ok() {
                while let Some(&(_, end, true)) = state.flights.front() {
                    state.flights.pop_front();
                    self.durable.store(end, Ordering::Release);
                }
            } else {
                // Failed: it stays, unfinished, so the durable LSN never passes it.
            }
        }
        match result {
            Ok(()) => {
                self.counters.flushes.fetch_add(1, Ordering::Relaxed);
                let flight = job.taken.elapsed().as_nanos() as u64;
                self.counters.flight_ns.fetch_add(flight, Ordering::Relaxed);
                self.counters.bytes_written.fetch_add(written, Ordering::Relaxed);
                self.flush_done.notify_all();
                self.wake_tasks();
                Ok(())
            }
            Err(e) => {
                self.fail(e.to_string());
                Err(e)
            }
        }
    }

    /// Whether a worker should start a flush: tasks wait for the log or a write-back asked
    /// for it, and no worker is running tasks (so that every commit of their turn joins the
    /// flush); or a commit that does not wait asked for one (`request_background_flush`),
    /// which nobody gains from holding back.
    pub fn flush_wanted(&self) -> bool {
        if self.failed.load(Ordering::Acquire) {
            return false;
        }
        let durable = self.durable();
        let waiting = self.waiting_tasks.load(Ordering::Acquire) > 0
            || self.requested.load(Ordering::Acquire) > durable;
        self.background.load(Ordering::Acquire) > durable
            || (waiting && self.running_workers.load(Ordering::Acquire) == 0)
    }

    /// A worker starts running its ready tasks (which may commit).
    pub fn worker_runs(&self) {
        self.running_workers.fetch_add(1, Ordering::AcqRel);
    }

    /// A worker's turn of running tasks ended.
    pub fn worker_ran(&self) {
        self.running_workers.fetch_sub(1, Ordering::AcqRel);
    }

    /// Asks the workers to make the log durable up to `lsn` soon (a write-back waits).
    pub fn request_flush(&self, lsn: u64) {
        self.requested.fetch_max(lsn, Ordering::AcqRel);
    }

    /// Asks the workers to write the log up to `lsn` at their next turn, whether or not
    /// others are running tasks: nobody waits for it, and writing it now keeps commits from
    /// finding so much pending that they must wait (`db/commit.rs`).
    pub fn request_background_flush(&self, lsn: u64) {
        self.background.fetch_max(lsn, Ordering::AcqRel);
    }

    /// From now on, tasks waiting for the log leave the flushing to the workers' loops.
    pub fn set_flushed_by_workers(&self) {
        self.by_workers.store(true, Ordering::Release);
    }

    /// Wakes every waiting task: those now durable finish, the others poll again and one of
    /// them leads the next flush (bytes appended during this flush still need one).
    fn wake_tasks(&self) {
        let waiters = {
            let mut waiters = self.task_waiters.lock().unwrap();
            // Under the lock: a task registering right after must be counted.
            self.waiting_tasks.store(0, Ordering::Release);
            std::mem::take(&mut *waiters)
        };
        waiters.into_iter().for_each(|(_, waker)| waker.wake());
    }

    /// The segments that log bytes `from..end` go to, adding segments as needed: up to and
    /// including one that starts at or after `end` (a stream that reaches a segment's end
    /// always has the next segment on disk, so that recovery can tell a missing one).
    fn segments_for(&self, state: &mut State, from: u64, end: u64) -> Result<Vec<Segment>> {
        while state.segments.last().is_none_or(|s| s.end() <= end) {
            let start = state.segments.last().map_or(from, |s| s.end());
            let segment = self.new_segment(state, start)?;
            state.segments.push(segment);
        }
        Ok(state.segments.iter().filter(|s| s.end() > from && s.start < end).cloned().collect())
    }

    /// Puts a segment starting at `start` in a slot: a free one (its file keeps its size), a
    /// prepared spare, or a new file (small, zero-filled now). Its header is written and
    /// synced before it is returned.
    fn new_segment(&self, state: &mut State, start: u64) -> Result<Segment> {
        let (slot, device, capacity) = if let Some(slot) = state.free_slots.pop() {
            let name = segment_name(slot);
            let opened = self.storage.open(&name, false);
            let device = match opened {
                Ok(Some(device)) => device,
                Ok(None) => {
                    // Gone (removed by hand?): the slot is vacant now.
                    state.vacant_slots.push(slot);
                    return self.new_segment(state, start);
                }
                Err(e) => {
                    state.free_slots.push(slot);
                    return Err(Error::io(format!("opening log segment {name}"), e));
                }
            };
            let body = device.len().unwrap_or(0).saturating_sub(SEGMENT_HEADER_BYTES);
            let capacity = capacity_of_body(body);
            if capacity < capacity_of_body(SMALL_SEGMENT_BYTES.min(self.segment_bytes)) {
                // Too small to be worth it (a truncated file): made anew below.
                self.prepare_file(&device, self.segment_bytes).map_err(|e| {
                    state.free_slots.push(slot);
                    Error::io(format!("preparing log segment {name}"), e)
                })?;
                (slot, device, capacity_of_body(self.segment_bytes))
            } else {
                (slot, device, capacity)
            }
        } else if let Some((slot, device)) = self.spares.lock().unwrap().pop() {
            (slot, device, capacity_of_body(self.segment_bytes))
        } else {
            // No spare ready: a small segment, zeroed now (a few ms), so that syncs into it
            // need no block allocation either; the helper prepares a full one meanwhile.
            let body = SMALL_SEGMENT_BYTES.min(self.segment_bytes);
            let slot = state.vacant_slots.pop().unwrap_or_else(|| {
                state.next_slot += 1;
                state.next_slot - 1
            });
            let device = self.make_file(slot, body).inspect_err(|_| {
                state.vacant_slots.push(slot);
            })?;
            (slot, device, capacity_of_body(body))
        };
        let name = segment_name(slot);
        let header = encode_segment_header(start, capacity);
        let written = device.write_at(&header, 0).and_then(|()| device.sync());
        if let Err(e) = written {
            // Nothing of it is in use: the slot stays free for a later try.
            state.free_slots.push(slot);
            return Err(Error::io(format!("writing the header of log segment {name}"), e));
        }
        Ok(Segment::new(slot, SegmentHeader { start, capacity }, device))
    }

    /// Creates slot `slot`'s file with `body` bytes of sectors, zero-filled and synced (its
    /// name too); on failure the file is removed again.
    fn make_file(&self, slot: u32, body: u64) -> Result<Arc<dyn BlockDevice>> {
        let name = segment_name(slot);
        let made = self.storage.open(&name, true).and_then(|device| {
            let device = device.expect("created");
            self.prepare_file(&device, body)?;
            self.storage.sync_names()?;
            Ok(device)
        });
        made.map_err(|e| {
            let _ = self.storage.remove(&name);
            Error::io(format!("preparing log segment {name}"), e)
        })
    }

    /// Zero-fills `device` for a segment of `body` bytes of sectors, header included.
    fn prepare_file(&self, device: &Arc<dyn BlockDevice>, body: u64) -> std::io::Result<()> {
        zero_fill(device.as_ref(), file_bytes(capacity_of_body(body)))
    }

    /// Once the log is a quarter into a segment with no reusable one behind, starts a helper
    /// thread writing the next segment file full of zeros (real files only: a simulated
    /// disk's draws must not depend on a thread's timing). A preparation that fails removes
    /// its file, and the next is tried only after `PREPARE_RETRY_AFTER`.
    fn prepare_spare(&self, state: &mut State, end: u64) {
        let Some(last) = state.segments.last() else { return };
        if !state.free_slots.is_empty()
            || last.device.raw_fd().is_none()
            || (end - last.start) * 4 < last.capacity
            || !self.spares.lock().unwrap().is_empty()
            || state.prepare_failed.is_some_and(|at| at.elapsed() < PREPARE_RETRY_AFTER)
        {
            return;
        }
        let mut preparer = self.preparer.lock().unwrap();
        if preparer.as_ref().is_some_and(|p| !p.is_finished()) {
            return;
        }
        if let Some(done) = preparer.take() {
            if let Ok(Err(slot)) = done.join() {
                state.vacant_slots.push(slot);
                state.prepare_failed = Some(std::time::Instant::now());
                return;
            }
        }
        let slot = state.vacant_slots.pop().unwrap_or_else(|| {
            state.next_slot += 1;
            state.next_slot - 1
        });
        let (storage, spares) = (Arc::clone(&self.storage), Arc::clone(&self.spares));
        let bytes = file_bytes(capacity_of_body(self.segment_bytes));
        let spawned =
            std::thread::Builder::new().name("ferrite-log-prep".into()).spawn(move || {
                let name = segment_name(slot);
                let made = storage.open(&name, true).and_then(|device| {
                    let device = device.expect("created");
                    zero_fill(device.as_ref(), bytes)?;
                    storage.sync_names()?;
                    Ok(device)
                });
                match made {
                    Ok(device) => {
                        spares.lock().unwrap().push((slot, device));
                        Ok(())
                    }
                    Err(_) => {
                        let _ = storage.remove(&name);
                        Err(slot)
                    }
                }
            });
        match spawned {
            Ok(handle) => *preparer = Some(handle),
            Err(_) => state.vacant_slots.push(slot),
        }
    }

    /// Waits for the helper thread preparing a segment, if any (at close).
    pub fn join_helpers(&self) {
        if let Some(preparer) = self.preparer.lock().unwrap().take() {
            let _ = preparer.join();
        }
    }

    /// Frees the segments wholly below `lsn` (a checkpoint made them unnecessary).
    pub fn release_before(&self, lsn: u64) {
        let mut state = self.state.lock().unwrap();
        while state.segments.len() > 1 && state.segments[0].end() <= lsn {
            let segment = state.segments.remove(0);
            state.free_slots.push(segment.slot);
        }
    }

    /// Segments in use and slot files existing.
    pub fn segment_usage(&self) -> (usize, u32) {
        let state = self.state.lock().unwrap();
        (state.segments.len(), state.next_slot)
    }

    /// Log bytes on disk that recovery may read: from the first segment in use to the tail.
    pub fn retained_bytes(&self) -> u64 {
        let state = self.state.lock().unwrap();
        state.segments.first().map_or(0, |s| state.tail - s.start)
    }

    /// A future that is ready once every log byte below `lsn` is durable. Flushing is done
    /// by whoever polls it first while no flush is in progress.
    pub fn wait_durable(self: &Arc<Self>, lsn: u64) -> DurableWait {
        DurableWait { log: Arc::clone(self), lsn }
    }

    fn register(&self, lsn: u64, waker: &Waker) {
        let mut waiters = self.task_waiters.lock().unwrap();
        waiters.push((lsn, waker.clone()));
        self.waiting_tasks.store(waiters.len(), Ordering::Release);
    }

    /// Starts a flush if none is in progress and bytes wait; used by polling waiters when
    /// no worker loop flushes (returns false: someone else flushes, wait to be woken).
    fn try_lead(&self) -> Result<bool> {
        if self.by_workers.load(Ordering::Acquire) && crate::worker_context::on_worker() {
            return Ok(false);
        }
        let state = self.state.lock().unwrap();
        if state.flights.len() >= MAX_FLIGHTS || state.tail == state.pending_start {
            return Ok(false);
        }
        self.lead_flush(state)?;
        Ok(true)
    }
}

/// The log as the buffer pool sees it: write-backs follow the write-ahead rule through
/// these (the pool knows no log record).
impl WriteAhead for Log {
    fn append_image(&self, page_id: PageId, page: &[u8]) -> Result<u64> {
        let mut record = encode_image(page_id, page);
        let (lsn, _) = self.append(&mut record)?;
        self.counters.images.fetch_add(1, Ordering::Relaxed);
        self.counters.image_bytes.fetch_add(record.len() as u64, Ordering::Relaxed);
        Ok(lsn)
    }

    fn encode_commit(&self, next_tree_id: u64, changes: &[PageChange<'_>]) -> Vec<u8> {
        encode_commit(next_tree_id, changes)
    }

    fn durable(&self) -> u64 {
        Log::durable(self)
    }

    fn flush(&self, lsn: u64) -> Result<()> {
        Log::flush(self, lsn)
    }

    fn fail(&self, reason: String) {
        Log::fail(self, reason)
    }
}

/// See [`Log::wait_durable`].
#[derive(Debug)]
pub struct DurableWait {
    log: Arc<Log>,
    lsn: u64,
}

impl Future for DurableWait {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let log = &self.log;
        loop {
            if log.durable() >= self.lsn {
                return Poll::Ready(Ok(()));
            }
            if let Err(e) = log.check() {
                return Poll::Ready(Err(e));
            }
            log.register(self.lsn, cx.waker());
            // Re-check after registering: a flush may have finished in between.
            if log.durable() >= self.lsn {
                return Poll::Ready(Ok(()));
            }
            match log.try_lead() {
                Ok(true) => continue,
                Ok(false) => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::DirStorage;
    use tempfile::TempDir;

    /// Appends records of assorted sizes, flushing after each batch; checks that every write
    /// is whole blocks at a block offset, and that every record reads back as appended.
    fn append_and_flush(log: &Log, seed: u64, batches: usize, kept: &mut Vec<(u64, Vec<u8>)>) {
        let mut x = seed;
        for _ in 0..batches {
            for _ in 0..1 + x % 7 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let mut record = RecordWriter::new(super::super::record::KIND_COMMIT);
                let len = (x >> 33) % 9_000;
                record.bytes.extend((0..len).map(|i| (i as u8) ^ (x as u8)));
                let (lsn, _) = log.append(&mut record.bytes).unwrap();
                kept.push((lsn, record.bytes));
            }
            let job = log.start_flush().expect("bytes to flush");
            for write in &job.writes {
                let block = crate::io::IO_ALIGN as u64;
                assert_eq!(write.offset % block, 0, "write at {}", write.offset);
                assert_eq!(write.sectors.len() as u64 % block, 0);
            }
            let result = job.write_blocking();
            log.finish_flush(job, result).unwrap();
        }
        let state = log.state.lock().unwrap();
        for (lsn, bytes) in kept.iter() {
            let mut back = vec![0u8; bytes.len()];
            assert!(read_stream(&state.segments, *lsn, &mut back).unwrap());
            assert!(back == *bytes, "record at {lsn} reads back changed");
        }
    }

    #[test]
    fn block_aligned_flushes_keep_every_record_across_segments_and_reopening() {
        let dir = TempDir::with_prefix("log-blocks").unwrap();
        let storage: Arc<dyn Storage> = Arc::new(DirStorage::new(dir.path()));
        let mut kept = Vec::new();
        let log = Log::new(Arc::clone(&storage), 1 << 20, Vec::new(), Slots::default(), 0, true);
        // About 3 MiB: the small first segment fills, then 1 MiB segments follow.
        append_and_flush(&log, 1, 120, &mut kept);
        let (segments, slots, tail) = {
            let state = log.state.lock().unwrap();
            assert!(state.segments.len() >= 2, "the flushes crossed no segment boundary");
            (state.segments.clone(), state.next_slot, state.tail)
        };
        log.join_helpers();
        drop(log);
        // As after recovery: the next flush reads the start of its block back first.
        let segments = segments.into_iter().map(|s| Segment { writer: None, ..s }).collect();
        let slots = Slots { free: Vec::new(), next: slots };
        let log = Log::new(storage, 1 << 20, segments, slots, tail, true);
        append_and_flush(&log, 2, 40, &mut kept);
        log.join_helpers();
    }
}
