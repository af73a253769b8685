//! The second cache tier: pages evicted from the pool kept in their on-disk form (checksum
//! included) on a faster medium than the disk, so that a miss of the pool can be a copy
//! instead of a device read. After "A volatile NVRAM cache inside WiredTiger" (NVCache): the
//! medium there was persistent memory, here any file that maps (a file in `/dev/shm`, CXL
//! memory exposed as a DAX file), optionally slowed by a spin per access to stand for a
//! medium slower than DRAM.
//!
//! **Where a page's copy is.** Each page id has one word in a table beside the translation
//! table (the same index, so finding a page's copy is one array access, no hash lookup):
//! `(slot + 1) << 32 | generation`, 0 for none. Each slot of the tier records the page it
//! holds and a generation, bumped before its bytes change. A copy is served only if the
//! slot still holds that page at that generation after the bytes were copied out (a
//! seqlock), and only once the page's checksum verified: a stale or torn copy is a miss,
//! never a wrong page.
//!
//! **What makes a copy stale.** Every change of a page: the pool drops its copy when a page
//! is marked dirty or freed (`invalidate`). A page promoted back to the pool keeps its copy,
//! so if it is evicted unchanged it re-enters the tier for nothing.
//!
//! **Admission.** Writes to the medium slow the reads beside them, and a workload the tier
//! cannot help pays them for nothing: an [`Admission`] policy decides whether an evicted page
//! is copied in. [`ObpAdmission`] keeps the overhead-bypass ratio, OBP = (pages inserted +
//! pages dropped) / pages looked up, under a limit over a sliding window of about a second,
//! with hysteresis (stop above `stop`, resume below `resume`), as NVCache does. Each worker
//! measures and decides for itself (a lane of its own, and one more for every thread that is
//! not a worker): its counters stay in its own cache lines, and a worker whose tasks the tier
//! cannot help stops admitting without stopping the others.
//!
//! **Volatile.** The tier is a cache: it is emptied at every open, recovery never reads it,
//! and `Db::check` reads around it (`worker_context::without_tier`): it verifies the disk.

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::vmem::VirtualRegion;
use crate::error::{Error, PageId, Result};
use crate::format::page::PAGE_SIZE;

/// How a tier admits evicted pages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TierAdmission {
    /// Every evicted page that has no copy yet.
    All,
    /// While the overhead-bypass ratio stays under `stop` (resuming below `resume`).
    Obp {
        /// Stop admitting above this ratio (0.10 by default).
        stop: f64,
        /// Admit again below this ratio (0.08 by default).
        resume: f64,
    },
    /// None (the tier then only serves what it holds: nothing).
    Never,
}

impl TierAdmission {
    /// OBP with the default limits: stop above 10 %, resume below 8 %.
    pub const DEFAULT: TierAdmission = TierAdmission::Obp { stop: 0.10, resume: 0.08 };
}

/// A second cache tier (`Options::tier`).
#[derive(Debug, Clone, PartialEq)]
pub struct TierOptions {
    /// A file (made if missing, and sized) or a device, mapped into memory.
    pub path: PathBuf,
    /// Bytes of the tier (whole pages are used).
    pub bytes: u64,
    /// Time added to every access of the medium, spent spinning: stands for a medium
    /// slower than the memory the file lives in (0: none).
    pub latency: Duration,
    /// Which evicted pages are copied in.
    pub admission: TierAdmission,
}

impl TierOptions {
    /// A tier of `bytes` at `path`, no added latency, OBP admission.
    pub fn new(path: impl Into<PathBuf>, bytes: u64) -> TierOptions {
        TierOptions {
            path: path.into(),
            bytes,
            latency: Duration::ZERO,
            admission: TierAdmission::DEFAULT,
        }
    }
}

/// What a tier did since open ([`crate::PoolStats::tier`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct TierStats {
    /// Slots (pages) the tier holds at most.
    pub slots: u64,
    /// Pool misses that looked in the tier.
    pub lookups: u64,
    /// Of those, served from it.
    pub hits: u64,
    /// Pages copied in.
    pub inserts: u64,
    /// Copies dropped because their page changed or was freed.
    pub invalidations: u64,
    /// Copies pushed out to make room.
    pub evictions: u64,
    /// Bytes written to the medium.
    pub bytes_written: u64,
    /// Evicted pages admission turned away.
    pub refused: u64,
    /// The overhead-bypass ratio of the last full window (about a second), the highest of
    /// the lanes' (each worker measures its own).
    pub obp: f64,
    /// The highest OBP of any full window of any lane since open.
    pub obp_max: f64,
    /// Full windows measured (every lane, one per 100 ms step of its sliding window).
    pub windows: u64,
    /// Of those, windows whose OBP passed the limit (`TierAdmission::Obp::stop`; 0.10 for
    /// the other policies, which only measure).
    pub windows_over: u64,
    /// Whether admission lets pages in now (on any lane).
    pub admitting: bool,
}

/// The events an admission policy hears of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TierEvent {
    /// A pool miss looked in the tier.
    Lookup,
    /// A page was copied in.
    Insert,
    /// A copy was dropped (invalidated, or pushed out).
    Delete,
}

/// Decides whether an evicted page is copied into the tier. Calls name the caller's lane:
/// `1 + its worker's index` on a worker, 0 on any other thread (`worker_context::lane`);
/// a policy may decide per lane or for all.
pub trait Admission: Send + Sync + std::fmt::Debug {
    /// Whether to copy a page in now.
    fn admit(&self, lane: usize) -> bool;
    /// Hears of one event.
    fn note(&self, lane: usize, event: TierEvent);
    /// What the policy measured of OBP, where it measures it.
    fn measured(&self) -> Measured {
        Measured::default()
    }
    /// Whether it would admit on some lane now.
    fn admitting(&self) -> bool;
}

/// What an admission policy measured of the overhead-bypass ratio ([`TierStats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measured {
    /// The last full window's ratio, the highest of the lanes'.
    pub obp: f64,
    /// The highest of any full window so far.
    pub obp_max: f64,
    /// Full windows measured, and how many passed the limit.
    pub windows: u64,
    pub windows_over: u64,
}

/// The limit windows of a policy that only measures are counted against.
const MEASURED_LIMIT: f64 = 0.10;

/// [`TierAdmission::All`]: admits everything, and measures OBP per lane as `ObpAdmission`
/// would (to show what admitting everything costs).
#[derive(Debug)]
pub struct AdmitAll(Box<[Lane]>);

impl AdmitAll {
    /// For `lanes` lanes (workers + 1).
    pub fn new(lanes: usize) -> AdmitAll {
        AdmitAll(lanes_of(lanes, MEASURED_LIMIT))
    }
}

impl Admission for AdmitAll {
    fn admit(&self, _: usize) -> bool {
        true
    }
    fn note(&self, lane: usize, event: TierEvent) {
        lane_of(&self.0, lane).window.note(event, Instant::now());
    }
    fn measured(&self) -> Measured {
        measured(&self.0)
    }
    fn admitting(&self) -> bool {
        true
    }
}

/// [`TierAdmission::Never`].
#[derive(Debug, Default)]
pub struct AdmitNone;

impl Admission for AdmitNone {
    fn admit(&self, _: usize) -> bool {
        false
    }
    fn note(&self, _: usize, _: TierEvent) {}
    fn admitting(&self) -> bool {
        false
    }
}

/// One lane's window and decision, alone in its cache lines (the lanes' counters change on
/// every lookup of their workers).
#[derive(Debug)]
#[repr(align(128))]
pub struct Lane {
    window: ObpWindow,
    admitting: AtomicBool,
}

fn lanes_of(lanes: usize, limit: f64) -> Box<[Lane]> {
    (0..lanes.max(1))
        .map(|_| Lane { window: ObpWindow::new(limit), admitting: AtomicBool::new(true) })
        .collect()
}

/// The lane of a caller; lanes past the last (more workers than the tier was opened for)
/// share the last.
#[inline]
fn lane_of(lanes: &[Lane], lane: usize) -> &Lane {
    &lanes[lane.min(lanes.len() - 1)]
}

fn measured(lanes: &[Lane]) -> Measured {
    lanes.iter().fold(Measured::default(), |m, lane| {
        let w = lane.window.state.lock().unwrap();
        Measured {
            obp: m.obp.max(w.obp),
            obp_max: m.obp_max.max(w.obp_max),
            windows: m.windows + w.windows,
            windows_over: m.windows_over + w.windows_over,
        }
    })
}

/// Buckets of the sliding window, and how long each lasts: ten of 100 ms.
const BUCKETS: usize = 10;
const BUCKET: Duration = Duration::from_millis(100);

/// The overhead-bypass ratio over a sliding window of `BUCKETS` buckets of `BUCKET` each:
/// the bucket filling now and the `BUCKETS - 1` before it.
#[derive(Debug)]
struct ObpWindow {
    /// Counts of the bucket filling now: lookups, inserts, deletes.
    lookups: AtomicU64,
    inserts: AtomicU64,
    deletes: AtomicU64,
    /// The sums of the closed buckets in the window (lookups, changes), for the check made
    /// every 64 events without the lock.
    closed_lookups: AtomicU64,
    closed_changes: AtomicU64,
    /// Events since the ratio was last looked at (it is, once per 64).
    since_check: AtomicU32,
    /// Full windows above this ratio are counted (`Window::windows_over`).
    limit: f64,
    state: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    /// Closed buckets, oldest first: (lookups, inserts + deletes).
    closed: std::collections::VecDeque<(u64, u64)>,
    /// The ratio of the last closed full window, and the highest so far.
    obp: f64,
    obp_max: f64,
    /// Full windows closed, and those above the limit.
    windows: u64,
    windows_over: u64,
}

impl ObpWindow {
    fn new(limit: f64) -> Self {
        ObpWindow {
            lookups: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            deletes: AtomicU64::new(0),
            closed_lookups: AtomicU64::new(0),
            closed_changes: AtomicU64::new(0),
            since_check: AtomicU32::new(0),
            limit,
            state: Mutex::new(Window {
                started: Instant::now(),
                closed: std::collections::VecDeque::with_capacity(BUCKETS),
                obp: 0.0,
                obp_max: 0.0,
                windows: 0,
                windows_over: 0,
            }),
        }
    }
}

/// `changes / lookups`; with no lookups there is nothing for the tier to serve, so changes
/// alone (a write-heavy spell) count as one lookup each.
fn ratio(lookups: u64, changes: u64) -> f64 {
    changes as f64 / lookups.max(changes).max(1) as f64
}

impl ObpWindow {
    /// Counts `event`. Once per 64 events, returns the ratio over the window as it is now
    /// (the bucket filling included, so that admission stops within 64 events of passing
    /// its limit, not a bucket later), closing the bucket first if its time is up.
    fn note(&self, event: TierEvent, now: Instant) -> Option<f64> {
        match event {
            TierEvent::Lookup => &self.lookups,
            TierEvent::Insert => &self.inserts,
            TierEvent::Delete => &self.deletes,
        }
        .fetch_add(1, Ordering::Relaxed);
        if self.since_check.fetch_add(1, Ordering::Relaxed) % 64 != 63 {
            return None;
        }
        if let Some(obp) = self.roll(now) {
            return Some(obp);
        }
        let lookups =
            self.closed_lookups.load(Ordering::Relaxed) + self.lookups.load(Ordering::Relaxed);
        let changes = self.closed_changes.load(Ordering::Relaxed)
            + self.inserts.load(Ordering::Relaxed)
            + self.deletes.load(Ordering::Relaxed);
        Some(ratio(lookups, changes))
    }

    /// Closes the bucket filling now if its time is up at `now` (and empty ones for an idle
    /// spell); returns the ratio of the window it ends.
    fn roll(&self, now: Instant) -> Option<f64> {
        let mut window = self.state.lock().unwrap();
        if now.duration_since(window.started) < BUCKET {
            return None;
        }
        let lookups = self.lookups.swap(0, Ordering::Relaxed);
        let changes =
            self.inserts.swap(0, Ordering::Relaxed) + self.deletes.swap(0, Ordering::Relaxed);
        // Buckets that passed with nothing counted (an idle spell) close empty.
        let elapsed = now.duration_since(window.started);
        let idle = ((elapsed.as_nanos() / BUCKET.as_nanos()) as usize).saturating_sub(1);
        for _ in 0..idle.min(BUCKETS) {
            window.closed.push_back((0, 0));
        }
        window.closed.push_back((lookups, changes));
        while window.closed.len() > BUCKETS {
            window.closed.pop_front();
        }
        window.started = now;
        let (lookups, changes) =
            window.closed.iter().fold((0, 0), |(l, c), &(bl, bc)| (l + bl, c + bc));
        let obp = ratio(lookups, changes);
        window.obp = obp;
        if window.closed.len() == BUCKETS {
            window.obp_max = window.obp_max.max(obp);
            window.windows += 1;
            window.windows_over += u64::from(obp > self.limit);
        }
        // The newest `BUCKETS - 1` closed buckets, with the one filling from now on, are
        // the window the checks between rolls look at.
        let older = window.closed.len().saturating_sub(BUCKETS - 1);
        let (recent_lookups, recent_changes) =
            window.closed.iter().skip(older).fold((0, 0), |(l, c), &(bl, bc)| (l + bl, c + bc));
        self.closed_lookups.store(recent_lookups, Ordering::Relaxed);
        self.closed_changes.store(recent_changes, Ordering::Relaxed);
        Some(obp)
    }
}

/// [`TierAdmission::Obp`]: admits while the overhead-bypass ratio stays under `stop`, and
/// again once it falls below `resume`; each lane measures and decides for itself.
#[derive(Debug)]
pub struct ObpAdmission {
    stop: f64,
    resume: f64,
    lanes: Box<[Lane]>,
}

impl ObpAdmission {
    /// Admits while the ratio stays at or under `stop`; stopped, admits again below `resume`.
    /// For `lanes` lanes (workers + 1).
    pub fn new(stop: f64, resume: f64, lanes: usize) -> ObpAdmission {
        ObpAdmission { stop, resume, lanes: lanes_of(lanes, stop) }
    }

    /// [`Admission::note`] at a given time (tests feed synthetic streams).
    pub fn note_at(&self, lane: usize, event: TierEvent, now: Instant) {
        let lane = lane_of(&self.lanes, lane);
        if let Some(obp) = lane.window.note(event, now) {
            self.decide(lane, obp);
        }
    }

    /// Closes the buckets of `lane` due at `now` (tests).
    pub fn roll_at(&self, lane: usize, now: Instant) {
        let lane = lane_of(&self.lanes, lane);
        if let Some(obp) = lane.window.roll(now) {
            self.decide(lane, obp);
        }
    }

    fn decide(&self, lane: &Lane, obp: f64) {
        let admitting = lane.admitting.load(Ordering::Relaxed);
        if admitting && obp > self.stop {
            lane.admitting.store(false, Ordering::Relaxed);
        } else if !admitting && obp < self.resume {
            lane.admitting.store(true, Ordering::Relaxed);
        }
    }
}

impl Admission for ObpAdmission {
    fn admit(&self, lane: usize) -> bool {
        lane_of(&self.lanes, lane).admitting.load(Ordering::Relaxed)
    }
    fn note(&self, lane: usize, event: TierEvent) {
        self.note_at(lane, event, Instant::now());
    }
    fn measured(&self) -> Measured {
        measured(&self.lanes)
    }
    fn admitting(&self) -> bool {
        self.lanes.iter().any(|lane| lane.admitting.load(Ordering::Relaxed))
    }
}

/// Counters of a tier, one set per lane (summed by `stats`).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Counters {
    lookups: AtomicU64,
    hits: AtomicU64,
    inserts: AtomicU64,
    invalidations: AtomicU64,
    evictions: AtomicU64,
    refused: AtomicU64,
}

/// A page's word in the tier's table: `(slot + 1) << 32 | generation`.
fn pack(slot: u64, generation: u32) -> u64 {
    (slot + 1) << 32 | generation as u64
}

fn unpack(word: u64) -> (u64, u32) {
    ((word >> 32) - 1, word as u32)
}

/// A second cache tier over a mapped file.
#[derive(Debug)]
pub struct Tier {
    /// The medium, mapped: `slots` pages.
    map: *mut u8,
    map_len: usize,
    _file: File,
    path: PathBuf,
    slots: u64,
    /// Per slot: the page it holds + 1 (0: none).
    owners: Box<[AtomicU64]>,
    /// Per slot: bumped before its bytes change.
    generations: Box<[AtomicU32]>,
    /// Per slot: read since the clock hand last passed (a second chance).
    referenced: Box<[AtomicBool]>,
    /// Per page id: where its copy is (`pack`), 0 for none.
    table: VirtualRegion,
    max_pages: u64,
    hand: Mutex<u64>,
    spin: Duration,
    admission: Box<dyn Admission>,
    counters: Box<[Counters]>,
}

// SAFETY: the mapping is plain shared memory; its bytes are only copied in by the holder of
// a slot (under the clock's mutex, after bumping the slot's generation) and copied out by
// readers that validate the generation afterwards (a seqlock); every other field is atomic
// or behind a mutex.
unsafe impl Send for Tier {}
// SAFETY: as above.
unsafe impl Sync for Tier {}

impl Tier {
    /// Opens the tier `options` describes for page ids below `max_pages`, measured and
    /// admitted per worker for `workers` workers: the file is made (or a device opened),
    /// sized and mapped; whatever it held is ignored.
    pub fn open(options: &TierOptions, max_pages: u64, workers: usize) -> Result<Tier> {
        let lanes = workers + 1;
        let slots = options.bytes / PAGE_SIZE as u64;
        if slots < 16 {
            return Err(Error::BadOptions {
                reason: format!(
                    "a tier of {} bytes: it needs at least 16 pages ({} bytes)",
                    options.bytes,
                    16 * PAGE_SIZE
                ),
            });
        }
        let path = &options.path;
        let what = |doing: &str| format!("{doing} the tier {}", path.display());
        // Readable by this user only: it holds the database's pages.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(|e| Error::io(what("opening"), e))?;
        // One database per tier: another's copies would carry valid checksums and page ids,
        // and this one's generations would not see them change.
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(Error::BadOptions {
                    reason: format!(
                        "the tier {} is in use by another open database (each needs its own)",
                        path.display()
                    ),
                });
            }
            return Err(Error::io(what("locking"), e));
        }
        let map_len = (slots * PAGE_SIZE as u64) as usize;
        let metadata = file.metadata().map_err(|e| Error::io(what("reading the size of"), e))?;
        if metadata.is_file() && metadata.len() < map_len as u64 {
            file.set_len(map_len as u64).map_err(|e| Error::io(what("sizing"), e))?;
        }
        // SAFETY: a shared mapping of `map_len` bytes of a file we hold open; nothing else in
        // this process maps it.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(Error::io(what("mapping"), std::io::Error::last_os_error()));
        }
        let admission: Box<dyn Admission> = match options.admission {
            TierAdmission::All => Box::new(AdmitAll::new(lanes)),
            TierAdmission::Never => Box::new(AdmitNone),
            TierAdmission::Obp { stop, resume } => Box::new(ObpAdmission::new(stop, resume, lanes)),
        };
        Ok(Tier {
            map: map.cast(),
            map_len,
            _file: file,
            path: path.to_owned(),
            slots,
            owners: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            generations: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            referenced: (0..slots).map(|_| AtomicBool::new(false)).collect(),
            table: VirtualRegion::new(max_pages as usize * 8, "tier's page table")?,
            max_pages,
            hand: Mutex::new(0),
            spin: options.latency,
            admission,
            counters: (0..lanes).map(|_| Counters::default()).collect(),
        })
    }

    /// The file or device the tier lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    #[inline(always)]
    fn entry(&self, page_id: PageId) -> &AtomicU64 {
        assert!(page_id < self.max_pages);
        // SAFETY: the table holds `max_pages` zero-initialised u64s (0: no copy), aligned
        // (mmap returns page-aligned memory), and is only ever accessed atomically.
        unsafe { &*(self.table.base() as *const AtomicU64).add(page_id as usize) }
    }

    fn slot_ptr(&self, slot: u64) -> *mut u8 {
        debug_assert!(slot < self.slots);
        // SAFETY: `slot < slots`, so the page lies inside the mapping.
        unsafe { self.map.add(slot as usize * PAGE_SIZE) }
    }

    /// The calling thread's lane and its counters.
    #[inline]
    fn lane(&self) -> (usize, &Counters) {
        let lane = crate::worker_context::lane().min(self.counters.len() - 1);
        (lane, &self.counters[lane])
    }

    /// The medium's added latency, per access.
    fn access(&self) {
        if self.spin.is_zero() {
            return;
        }
        let until = Instant::now() + self.spin;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    /// Whether the tier holds a copy of `page_id` (it may be stale until `read` checks it).
    pub fn holds(&self, page_id: PageId) -> bool {
        self.entry(page_id).load(Ordering::Acquire) != 0
    }

    /// Copies page `page_id` into `out` if the tier holds it; the caller verifies the
    /// page's checksum before trusting it (and calls `invalidate` if it fails).
    pub fn read(&self, page_id: PageId, out: &mut [u8]) -> bool {
        debug_assert_eq!(out.len(), PAGE_SIZE);
        let (lane, counters) = self.lane();
        counters.lookups.fetch_add(1, Ordering::Relaxed);
        self.admission.note(lane, TierEvent::Lookup);
        let entry = self.entry(page_id);
        let word = entry.load(Ordering::Acquire);
        if word == 0 {
            return false;
        }
        let (slot, generation) = unpack(word);
        let owner = &self.owners[slot as usize];
        let current = &self.generations[slot as usize];
        if current.load(Ordering::Acquire) != generation
            || owner.load(Ordering::Acquire) != page_id + 1
        {
            // Pushed out meanwhile.
            let _ = entry.compare_exchange(word, 0, Ordering::AcqRel, Ordering::Relaxed);
            return false;
        }
        self.access();
        // SAFETY: the slot's page lies inside the mapping and `out` is a page; the bytes
        // may be changing under the copy if the slot is being reused, which the generation
        // check after it detects (the copy is then thrown away).
        unsafe { std::ptr::copy_nonoverlapping(self.slot_ptr(slot), out.as_mut_ptr(), PAGE_SIZE) };
        fence(Ordering::Acquire);
        if current.load(Ordering::Relaxed) != generation {
            return false;
        }
        self.referenced[slot as usize].store(true, Ordering::Relaxed);
        counters.hits.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Offers page `page_id`, whose bytes `page` are as on disk, on its way out of the pool:
    /// copied in unless the tier holds it already (unchanged since: it re-enters for free)
    /// or admission refuses. The caller holds the page's latch.
    pub fn offer(&self, page_id: PageId, page: &[u8]) {
        debug_assert_eq!(page.len(), PAGE_SIZE);
        let entry = self.entry(page_id);
        if entry.load(Ordering::Acquire) != 0 {
            return;
        }
        let (lane, counters) = self.lane();
        if !self.admission.admit(lane) {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut hand = self.hand.lock().unwrap();
        let slot = self.take_slot(&mut hand, lane, counters);
        let generation = self.generations[slot as usize].fetch_add(1, Ordering::AcqRel) + 1;
        self.owners[slot as usize].store(page_id + 1, Ordering::Release);
        fence(Ordering::Release);
        self.access();
        // SAFETY: the slot lies inside the mapping; readers of its old contents check the
        // generation bumped above after they copy, and throw their copy away.
        unsafe { std::ptr::copy_nonoverlapping(page.as_ptr(), self.slot_ptr(slot), PAGE_SIZE) };
        fence(Ordering::Release);
        drop(hand);
        entry.store(pack(slot, generation), Ordering::Release);
        counters.inserts.fetch_add(1, Ordering::Relaxed);
        self.admission.note(lane, TierEvent::Insert);
    }

    /// A slot for a new copy: an empty one, or the first the clock finds unread since it
    /// last passed, whose copy is pushed out.
    fn take_slot(&self, hand: &mut u64, lane: usize, counters: &Counters) -> u64 {
        loop {
            let slot = *hand;
            *hand = (*hand + 1) % self.slots;
            let owner = self.owners[slot as usize].load(Ordering::Acquire);
            if owner == 0 {
                return slot;
            }
            if self.referenced[slot as usize].swap(false, Ordering::Relaxed) {
                continue;
            }
            // Push the copy out: its page's word no longer points here.
            let generation = self.generations[slot as usize].load(Ordering::Acquire);
            let _ = self.entry(owner - 1).compare_exchange(
                pack(slot, generation),
                0,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
            self.owners[slot as usize].store(0, Ordering::Release);
            counters.evictions.fetch_add(1, Ordering::Relaxed);
            self.admission.note(lane, TierEvent::Delete);
            return slot;
        }
    }

    /// Drops the copy of `page_id`, if any: the page changed or was freed.
    #[inline]
    pub fn invalidate(&self, page_id: PageId) {
        let entry = self.entry(page_id);
        if entry.load(Ordering::Relaxed) == 0 {
            return;
        }
        let word = entry.swap(0, Ordering::AcqRel);
        if word == 0 {
            return;
        }
        let (slot, generation) = unpack(word);
        // The slot is free for the next copy, unless it was reused meanwhile.
        let _hand = self.hand.lock().unwrap();
        if self.generations[slot as usize].load(Ordering::Acquire) == generation {
            let _ = self.owners[slot as usize].compare_exchange(
                page_id + 1,
                0,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
        let (lane, counters) = self.lane();
        counters.invalidations.fetch_add(1, Ordering::Relaxed);
        self.admission.note(lane, TierEvent::Delete);
    }

    /// What the tier did since open.
    pub fn stats(&self) -> TierStats {
        let sum = |counter: fn(&Counters) -> &AtomicU64| -> u64 {
            self.counters.iter().map(|c| counter(c).load(Ordering::Relaxed)).sum()
        };
        let measured = self.admission.measured();
        let inserts = sum(|c| &c.inserts);
        TierStats {
            slots: self.slots,
            lookups: sum(|c| &c.lookups),
            hits: sum(|c| &c.hits),
            inserts,
            invalidations: sum(|c| &c.invalidations),
            evictions: sum(|c| &c.evictions),
            bytes_written: inserts * PAGE_SIZE as u64,
            refused: sum(|c| &c.refused),
            obp: measured.obp,
            obp_max: measured.obp_max,
            windows: measured.windows,
            windows_over: measured.windows_over,
            admitting: self.admission.admitting(),
        }
    }
}

impl Drop for Tier {
    fn drop(&mut self) {
        // SAFETY: we created this mapping and nothing refers to it any more.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tier(dir: &Path, slots: u64, admission: TierAdmission) -> Tier {
        let options = TierOptions {
            admission,
            ..TierOptions::new(dir.join("tier"), slots * PAGE_SIZE as u64)
        };
        Tier::open(&options, 1024, 1).unwrap()
    }

    fn page(fill: u8) -> Vec<u8> {
        vec![fill; PAGE_SIZE]
    }

    #[test]
    fn copies_are_served_until_changed_or_pushed_out() {
        let dir = tempfile::tempdir().unwrap();
        let tier = tier(dir.path(), 16, TierAdmission::All);
        let mut out = page(0);
        assert!(!tier.read(3, &mut out), "empty at first");
        tier.offer(3, &page(3));
        assert!(tier.read(3, &mut out) && out == page(3));
        // Offered again unchanged: nothing is written.
        tier.offer(3, &page(99));
        assert!(tier.read(3, &mut out) && out == page(3));
        assert_eq!(tier.stats().inserts, 1);
        // Changed: the copy goes, and the next offer is the new bytes.
        tier.invalidate(3);
        assert!(!tier.read(3, &mut out));
        tier.offer(3, &page(4));
        assert!(tier.read(3, &mut out) && out == page(4));
        // 40 more pages through 16 slots: the oldest unread copies are pushed out, and
        // every copy still listed is its own page.
        for id in 100..140 {
            tier.offer(id, &page(id as u8));
        }
        let mut held = 0;
        for id in (100..140).chain([3]) {
            if tier.read(id, &mut out) {
                assert_eq!(out, page(id as u8), "page {id}");
                held += 1;
            }
        }
        assert!((8..=16).contains(&held), "{held} copies held");
        let stats = tier.stats();
        assert!(stats.evictions >= 24, "{stats:?}");
        assert_eq!(stats.invalidations, 1);
    }

    #[test]
    fn never_admits_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let tier = tier(dir.path(), 16, TierAdmission::Never);
        tier.offer(1, &page(1));
        assert!(!tier.read(1, &mut page(0)));
        assert_eq!((tier.stats().inserts, tier.stats().refused), (0, 1));
    }

    #[test]
    fn a_tier_serves_one_database_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let first = tier(dir.path(), 16, TierAdmission::All);
        let options = TierOptions::new(dir.path().join("tier"), 16 * PAGE_SIZE as u64);
        let second = Tier::open(&options, 1024, 1);
        assert!(
            matches!(&second, Err(Error::BadOptions { reason }) if reason.contains("in use")),
            "{second:?}"
        );
        drop(first);
        assert!(Tier::open(&options, 1024, 1).is_ok(), "free again once the first is closed");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("tier")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_tier_too_small_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let options = TierOptions::new(dir.path().join("tier"), 15 * PAGE_SIZE as u64);
        assert!(matches!(Tier::open(&options, 16, 1), Err(Error::BadOptions { .. })));
    }

    /// The controller against synthetic streams: a stream the tier helps (few inserts per
    /// lookup) keeps it admitting; one it cannot help (an insert per lookup) stops it within
    /// a window, and it resumes once the ratio falls below the lower mark.
    #[test]
    fn obp_stops_above_its_limit_and_resumes_below_the_lower_mark() {
        let obp = ObpAdmission::new(0.10, 0.08, 1);
        let start = Instant::now();
        let mut now = start;
        let mut feed = |lookups: u64, changes: u64, buckets: u32, obp: &ObpAdmission| {
            for _ in 0..buckets {
                for _ in 0..lookups {
                    obp.note_at(0, TierEvent::Lookup, now);
                }
                for _ in 0..changes {
                    obp.note_at(0, TierEvent::Insert, now);
                }
                now += BUCKET;
                obp.roll_at(0, now);
            }
        };
        // 5 % for two seconds: admitting.
        feed(1000, 50, 20, &obp);
        assert!(obp.admit(0));
        assert!((obp.measured().obp - 0.05).abs() < 0.01, "{:?}", obp.measured());
        // A cache-hostile spell: one change per lookup. Admission stops within a window.
        feed(1000, 1000, 3, &obp);
        assert!(!obp.admit(0), "{:?}", obp.measured());
        // 9 %: between the marks, it stays stopped (hysteresis).
        feed(1000, 90, 20, &obp);
        assert!(!obp.admit(0), "{:?}", obp.measured());
        // 7 %: it resumes.
        feed(1000, 70, 20, &obp);
        assert!(obp.admit(0), "{:?}", obp.measured());
        let measured = obp.measured();
        assert!(measured.obp_max > 0.3, "the hostile window is the highest: {measured:?}");
        // Windows are counted from the tenth bucket on, one per bucket: 63 buckets fed, 54
        // full windows. Those over 10 % are the ones holding a hostile bucket (the three
        // hostile buckets enter them one at a time, and leave after ten).
        assert_eq!(measured.windows, 54, "{measured:?}");
        assert!((10..=13).contains(&measured.windows_over), "{measured:?}");
    }

    /// Admission stops within the bucket in which the ratio passes its limit (checked every
    /// 64 events), not a bucket later: a burst of copies cannot fill a whole bucket.
    #[test]
    fn obp_stops_inside_the_bucket_that_passes_the_limit() {
        let obp = ObpAdmission::new(0.10, 0.08, 1);
        let mut now = Instant::now();
        for _ in 0..BUCKETS {
            for i in 0..1000 {
                obp.note_at(
                    0,
                    if i % 25 == 0 { TierEvent::Insert } else { TierEvent::Lookup },
                    now,
                );
            }
            now += BUCKET;
            obp.roll_at(0, now);
        }
        assert!(obp.admit(0));
        // One copy per lookup from here, all inside one bucket.
        let mut copies = 0;
        while obp.admit(0) {
            obp.note_at(0, TierEvent::Lookup, now);
            obp.note_at(0, TierEvent::Insert, now);
            copies += 1;
            assert!(copies < 2_000, "still admitting after {copies} copies");
        }
        // The window's other buckets hold 8,640 lookups and 360 copies: the limit is passed
        // after about 560 more copies (and lookups), checked every 64 events.
        assert!((300..1_000).contains(&copies), "stopped after {copies} copies");
    }

    /// Each lane decides for itself: a worker whose misses the tier cannot help stops
    /// admitting, and the worker beside it, whose misses it helps, goes on.
    #[test]
    fn obp_is_measured_and_decided_per_lane() {
        let obp = ObpAdmission::new(0.10, 0.08, 3);
        let mut now = Instant::now();
        for _ in 0..2 * BUCKETS {
            for i in 0..1000 {
                // Lane 1: one copy per 50 lookups. Lane 2: a copy per lookup.
                obp.note_at(
                    1,
                    if i % 50 == 0 { TierEvent::Insert } else { TierEvent::Lookup },
                    now,
                );
                obp.note_at(2, TierEvent::Lookup, now);
                obp.note_at(2, TierEvent::Insert, now);
            }
            now += BUCKET;
            obp.roll_at(1, now);
            obp.roll_at(2, now);
        }
        assert!(obp.admit(1) && !obp.admit(2));
        assert!(obp.admit(0), "a lane that saw nothing admits");
        assert!(!obp.admit(7), "lanes past the last share the last");
        let measured = obp.measured();
        assert!((measured.obp - 1.0).abs() < 1e-9, "the worst lane's: {measured:?}");
        // Lane 2's windows are all over the limit, lane 1's none.
        assert_eq!((measured.windows, measured.windows_over), (22, 11), "{measured:?}");
    }
}
