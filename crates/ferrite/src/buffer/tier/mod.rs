//! The second cache tier: pages evicted from the pool kept in their on-disk form (checksum
//! included) on a faster medium than the disk, so that a miss of the pool can be a copy
//! instead of a device read. After "A volatile NVRAM cache inside WiredTiger" (NVCache): the
//! medium there was persistent memory. Here it is one of two kinds ([`TierMedium`]):
//!
//! - **Mapped** (byte-addressable: a file in `/dev/shm`, CXL memory or persistent memory as
//!   a DAX file): copied in and out with loads and stores, optionally slowed by a spin per
//!   access to stand for a medium slower than DRAM.
//! - **Block** (a faster SSD, or a file on one): read and written a page at a time through
//!   the worker's own ring, like the disk, so a worker waiting on the tier goes on with its
//!   other tasks; off a worker, with blocking reads and writes. An added latency holds each
//!   completion until that long after its submission.
//!
//! **Block writes are staged.** An evicted page's frame is reused at once, so a worker
//! copies the page into a buffer of its own and writes it from there. Until the write
//! completes the page's word says *pending*: no reader is sent to the slot, and the slot
//! cannot be pushed out or reused. If the page changes meanwhile, the invalidation clears
//! the word, and the completed write finds it cleared and frees the slot instead of
//! publishing a stale copy.
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
//! **Frequency filter.** On top of admission, an evicted page takes an occupied slot only
//! if it was looked up more often lately than the page whose copy the clock would push out,
//! and at least twice (`frequency.rs`, after TinyLFU); a free slot takes any page. Once the
//! tier is full, a page read once lately costs no write, and copies that serve hits stay.
//! `TierFilter::Off` turns it off (the ablation).
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

mod admission;
mod frequency;

pub use admission::{Admission, AdmitAll, AdmitNone, Measured, ObpAdmission, TierEvent};

use self::frequency::Frequency;
use super::vmem::VirtualRegion;
use crate::error::{Error, PageId, Result};
use crate::format::page::PAGE_SIZE;
use crate::io::AlignedBlock;

/// What a tier's medium is, and so how it is accessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TierMedium {
    /// Byte-addressable memory: the file is mapped, and pages are copied with loads and
    /// stores (`/dev/shm`, CXL memory, persistent memory as a DAX file).
    #[default]
    Mapped,
    /// A block device, or a file on one: pages are read and written through the workers'
    /// rings (blocking calls off a worker), with `O_DIRECT` where the file allows it.
    Block,
}

impl TierMedium {
    /// `mapped` or `block`.
    pub fn name(self) -> &'static str {
        match self {
            TierMedium::Mapped => "mapped",
            TierMedium::Block => "block",
        }
    }
}

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

/// Whether an evicted page must have been looked up more often lately than the copy it
/// would push out (`TierOptions::filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TierFilter {
    /// It must (after TinyLFU): the default.
    #[default]
    Frequency,
    /// Admission alone decides.
    Off,
}

impl TierFilter {
    /// `frequency` or `off`.
    pub fn name(self) -> &'static str {
        match self {
            TierFilter::Frequency => "frequency",
            TierFilter::Off => "off",
        }
    }
}

/// A second cache tier (`Options::tier`).
#[derive(Debug, Clone, PartialEq)]
pub struct TierOptions {
    /// A file (made if missing, and sized) or a device.
    pub path: PathBuf,
    /// Bytes of the tier (whole pages are used).
    pub bytes: u64,
    /// Time added to every access of the medium (0: none): a mapped medium spins that long
    /// per access; a block medium holds each completion until that long after submission
    /// (blocking calls spin). Stands for a medium slower than the one the file is on.
    pub latency: Duration,
    /// Which evicted pages are copied in.
    pub admission: TierAdmission,
    /// How the medium is accessed: mapped (the default) or block.
    pub medium: TierMedium,
    /// Whether a copy pushes another out only if its page was looked up more often.
    pub filter: TierFilter,
}

impl TierOptions {
    /// A mapped tier of `bytes` at `path`, no added latency, OBP admission, the frequency
    /// filter.
    pub fn new(path: impl Into<PathBuf>, bytes: u64) -> TierOptions {
        TierOptions {
            path: path.into(),
            bytes,
            latency: Duration::ZERO,
            admission: TierAdmission::DEFAULT,
            medium: TierMedium::Mapped,
            filter: TierFilter::Frequency,
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
    /// Evicted pages not copied in: admission turned them away, or the frequency filter.
    pub refused: u64,
    /// Of those, the pages the frequency filter turned away (looked up no more often than
    /// the copy they would have pushed out).
    pub filtered: u64,
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
    filtered: AtomicU64,
}

/// A page's word in the tier's table: `(slot + 1) << 32 | generation`.
fn pack(slot: u64, generation: u32) -> u64 {
    (slot + 1) << 32 | generation as u64
}

fn unpack(word: u64) -> (u64, u32) {
    (((word & !PENDING) >> 32) - 1, word as u32)
}

/// Set in a page's word while its copy is being written (block media): readers miss.
const PENDING: u64 = 1 << 63;

/// The frequency filter's floor: a page looked up fewer times than this lately (about the
/// last ten lookups per slot) pushes no copy out, however seldom that copy was read. A page
/// seen once is most of a scan's and of a uniform workload's: with a floor of 1, a tier of
/// 16 MiB under uniform lookups took as many copies as without the filter (each newer than
/// the copy it pushed out, whose count had been halved away).
const MIN_LOOKUPS_TO_REPLACE: u8 = 2;

/// Slots above this are refused (the top bit of a page's word is `PENDING`).
const MAX_SLOTS: u64 = 1 << 30;

/// A copy being written to a block medium from a worker's ring (`Tier::take_staged`).
#[derive(Debug)]
pub struct StagedWrite {
    /// The page it is a copy of.
    pub page_id: PageId,
    slot: u64,
    generation: u32,
    /// The page's bytes, as on disk.
    pub buf: AlignedBlock,
}

impl StagedWrite {
    /// Where the copy goes in the tier's file.
    pub fn offset(&self) -> u64 {
        self.slot * PAGE_SIZE as u64
    }
}

/// A read of a copy from a block medium through a worker's ring (`Tier::locate`).
#[derive(Debug, Clone, Copy)]
pub struct TierRead {
    slot: u64,
    generation: u32,
    /// When it was submitted: its completion is held until `submitted + latency`.
    pub submitted: Instant,
}

impl TierRead {
    /// Where the copy is in the tier's file.
    pub fn offset(&self) -> u64 {
        self.slot * PAGE_SIZE as u64
    }
}

/// How the tier reaches its medium.
#[derive(Debug)]
enum Access {
    /// Mapped: `len` bytes at `base`.
    Mapped { base: *mut u8, len: usize },
    /// Through the file; `direct`: opened with `O_DIRECT`.
    Block { direct: bool },
}

/// Per lane: whether its thread stages block writes for its ring, and what it staged.
#[derive(Debug, Default)]
struct Outbox {
    rings: AtomicBool,
    staged: Mutex<Vec<StagedWrite>>,
    /// Buffers of finished writes, for the next ones.
    spare: Mutex<Vec<AlignedBlock>>,
}

/// A second cache tier.
#[derive(Debug)]
pub struct Tier {
    /// The medium: `slots` pages.
    access: Access,
    file: File,
    path: PathBuf,
    slots: u64,
    /// Per slot: the page it holds + 1 (0: none).
    owners: Box<[AtomicU64]>,
    /// Per slot: bumped before its bytes change.
    generations: Box<[AtomicU32]>,
    /// Per slot: read since the clock hand last passed (a second chance).
    referenced: Box<[AtomicBool]>,
    /// Per slot: a staged write to it is in flight (the clock passes it by).
    writing: Box<[AtomicBool]>,
    /// Staged writes in flight, at most half the slots.
    staged: AtomicU64,
    outboxes: Box<[Outbox]>,
    /// Per page id: where its copy is (`pack`), 0 for none.
    table: VirtualRegion,
    max_pages: u64,
    hand: Mutex<u64>,
    latency: Duration,
    admission: Box<dyn Admission>,
    /// The frequency filter's counts (`TierFilter::Frequency`).
    frequency: Option<Frequency>,
    counters: Box<[Counters]>,
}

// SAFETY: a mapping is plain shared memory; its bytes are only copied in by the holder of
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
        if slots > MAX_SLOTS {
            return Err(Error::BadOptions {
                reason: format!("a tier of {} bytes: at most {MAX_SLOTS} pages", options.bytes),
            });
        }
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
        let open = |flags: i32| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(flags)
                .open(path)
        };
        let (file, direct) = match options.medium {
            TierMedium::Mapped => (open(0), false),
            // Direct I/O where the file system has it (tmpfs may not: then buffered).
            TierMedium::Block => match open(libc::O_DIRECT) {
                Ok(file) => (Ok(file), true),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => (open(0), false),
                Err(e) => (Err(e), true),
            },
        };
        let file = file.map_err(|e| Error::io(what("opening"), e))?;
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
        let access = match options.medium {
            TierMedium::Mapped => {
                // SAFETY: a shared mapping of `map_len` bytes of a file we hold open; nothing
                // else in this process maps it.
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
                Access::Mapped { base: map.cast(), len: map_len }
            }
            TierMedium::Block => Access::Block { direct },
        };
        let admission: Box<dyn Admission> = match options.admission {
            TierAdmission::All => Box::new(AdmitAll::new(lanes)),
            TierAdmission::Never => Box::new(AdmitNone),
            TierAdmission::Obp { stop, resume } => Box::new(ObpAdmission::new(stop, resume, lanes)),
        };
        Ok(Tier {
            access,
            file,
            path: path.to_owned(),
            slots,
            owners: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            generations: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            referenced: (0..slots).map(|_| AtomicBool::new(false)).collect(),
            writing: (0..slots).map(|_| AtomicBool::new(false)).collect(),
            staged: AtomicU64::new(0),
            outboxes: (0..lanes).map(|_| Outbox::default()).collect(),
            table: VirtualRegion::new(max_pages as usize * 8, "tier's page table")?,
            max_pages,
            hand: Mutex::new(0),
            latency: options.latency,
            admission,
            frequency: (options.filter == TierFilter::Frequency).then(|| Frequency::new(slots)),
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

    /// The calling thread's lane and its counters.
    #[inline]
    fn lane(&self) -> (usize, &Counters) {
        let lane = crate::worker_context::lane().min(self.counters.len() - 1);
        (lane, &self.counters[lane])
    }

    /// The medium's added latency, spent spinning (a blocking access, or any access of a
    /// mapped medium).
    fn wait_medium(&self) {
        if self.latency.is_zero() {
            return;
        }
        let until = Instant::now() + self.latency;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    /// Copies slot `slot` into `out`, a page (aligned, for direct I/O): from the mapping,
    /// or a read of the file. False if the read failed.
    fn copy_out(&self, slot: u64, out: &mut [u8]) -> bool {
        debug_assert!(slot < self.slots && out.len() == PAGE_SIZE);
        match self.access {
            Access::Mapped { base, .. } => {
                // SAFETY: `slot < slots`, so the page lies inside the mapping, and `out` is a
                // page; the bytes may be changing under the copy if the slot is being
                // reused, which the caller's generation check after it detects.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        base.add(slot as usize * PAGE_SIZE),
                        out.as_mut_ptr(),
                        PAGE_SIZE,
                    )
                };
                true
            }
            Access::Block { .. } => {
                use std::os::unix::fs::FileExt;
                self.file.read_exact_at(out, slot * PAGE_SIZE as u64).is_ok()
            }
        }
    }

    /// Copies `page` into slot `slot`, which the caller holds (under the clock's mutex,
    /// its generation bumped). False if the write failed.
    fn copy_in(&self, slot: u64, page: &[u8]) -> bool {
        debug_assert!(slot < self.slots && page.len() == PAGE_SIZE);
        match self.access {
            Access::Mapped { base, .. } => {
                // SAFETY: the slot lies inside the mapping; readers of its old contents check
                // the generation bumped by the caller after they copy, and throw it away.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        page.as_ptr(),
                        base.add(slot as usize * PAGE_SIZE),
                        PAGE_SIZE,
                    )
                };
                true
            }
            Access::Block { .. } => {
                use std::os::unix::fs::FileExt;
                self.file.write_all_at(page, slot * PAGE_SIZE as u64).is_ok()
            }
        }
    }

    /// Whether the tier holds a copy of `page_id` (it may be stale until `read` checks it).
    pub fn holds(&self, page_id: PageId) -> bool {
        self.entry(page_id).load(Ordering::Acquire) != 0
    }

    /// Where the copy of `page_id` is, counting a lookup: its slot and generation if the
    /// tier holds a written copy. The caller reads it and then asks [`Tier::read_done`]
    /// whether what it read is still that copy.
    fn find(&self, page_id: PageId, lane: usize, counters: &Counters) -> Option<(u64, u32)> {
        let nth = counters.lookups.fetch_add(1, Ordering::Relaxed) + 1;
        self.admission.note(lane, TierEvent::Lookup);
        if let Some(frequency) = &self.frequency {
            frequency.record(page_id, nth);
        }
        let entry = self.entry(page_id);
        let word = entry.load(Ordering::Acquire);
        if word == 0 || word & PENDING != 0 {
            return None;
        }
        let (slot, generation) = unpack(word);
        if self.generations[slot as usize].load(Ordering::Acquire) != generation
            || self.owners[slot as usize].load(Ordering::Acquire) != page_id + 1
        {
            // Pushed out meanwhile.
            let _ = entry.compare_exchange(word, 0, Ordering::AcqRel, Ordering::Relaxed);
            return None;
        }
        Some((slot, generation))
    }

    /// Whether slot `slot` still held `page_id` at `generation` once its bytes were read
    /// (the seqlock's second check); counts the hit.
    fn still_held(&self, page_id: PageId, slot: u64, generation: u32, counters: &Counters) -> bool {
        fence(Ordering::Acquire);
        if self.generations[slot as usize].load(Ordering::Relaxed) != generation
            || self.owners[slot as usize].load(Ordering::Relaxed) != page_id + 1
        {
            return false;
        }
        self.referenced[slot as usize].store(true, Ordering::Relaxed);
        counters.hits.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Copies page `page_id` into `out` if the tier holds it (a blocking read on a block
    /// medium); the caller verifies the page's checksum before trusting it (and calls
    /// `invalidate` if it fails).
    pub fn read(&self, page_id: PageId, out: &mut [u8]) -> bool {
        debug_assert_eq!(out.len(), PAGE_SIZE);
        let (lane, counters) = self.lane();
        let Some((slot, generation)) = self.find(page_id, lane, counters) else { return false };
        self.wait_medium();
        self.copy_out(slot, out) && self.still_held(page_id, slot, generation, counters)
    }

    /// The copy of `page_id` to read through a worker's ring (a block medium), if the tier
    /// holds one; counts the lookup.
    pub fn locate(&self, page_id: PageId) -> Option<TierRead> {
        let (lane, counters) = self.lane();
        let (slot, generation) = self.find(page_id, lane, counters)?;
        Some(TierRead { slot, generation, submitted: Instant::now() })
    }

    /// Whether the bytes a ring read of `read` brought in are still the copy of `page_id`
    /// (else they are thrown away and the disk is read); counts the hit.
    pub fn read_done(&self, page_id: PageId, read: &TierRead) -> bool {
        let (_, counters) = self.lane();
        self.still_held(page_id, read.slot, read.generation, counters)
    }

    /// Offers page `page_id`, whose bytes `page` are as on disk (aligned, for direct I/O),
    /// on its way out of the pool: copied in unless the tier holds it already (unchanged
    /// since: it re-enters for free) or admission refuses. On a block medium, a worker
    /// whose ring writes for it ([`Tier::attach_ring`]) stages the write ([`StagedWrite`]);
    /// anyone else writes at once. The caller holds the page's latch.
    pub fn offer(&self, page_id: PageId, page: &[u8]) {
        debug_assert_eq!(page.len(), PAGE_SIZE);
        let entry = self.entry(page_id);
        if entry.load(Ordering::Acquire) != 0 {
            return;
        }
        let (lane, counters) = self.lane();
        let outbox = &self.outboxes[lane];
        let stage =
            matches!(self.access, Access::Block { .. }) && outbox.rings.load(Ordering::Relaxed);
        // Staged writes in flight hold their slots: at most half of them, so that the
        // clock always finds one to take.
        if !self.admission.admit(lane)
            || (stage && self.staged.load(Ordering::Relaxed) >= self.slots / 2)
        {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut hand = self.hand.lock().unwrap();
        let Some(slot) = self.take_slot(&mut hand, page_id, lane, counters) else {
            drop(hand);
            counters.filtered.fetch_add(1, Ordering::Relaxed);
            counters.refused.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let generation = self.generations[slot as usize].fetch_add(1, Ordering::AcqRel) + 1;
        self.owners[slot as usize].store(page_id + 1, Ordering::Release);
        fence(Ordering::Release);
        if stage {
            self.writing[slot as usize].store(true, Ordering::Release);
            self.staged.fetch_add(1, Ordering::Relaxed);
            entry.store(pack(slot, generation) | PENDING, Ordering::Release);
            drop(hand);
            // Admission hears of the copy now, when it decided, not when the write lands: a
            // ring's writes complete after a delay, and a controller that heard of them late
            // would let a burst past its limit.
            self.admission.note(lane, TierEvent::Insert);
            let spare = outbox.spare.lock().unwrap().pop();
            let mut buf = spare.unwrap_or_else(|| AlignedBlock::zeroed(PAGE_SIZE));
            buf.as_mut_slice().copy_from_slice(page);
            outbox.staged.lock().unwrap().push(StagedWrite { page_id, slot, generation, buf });
            return;
        }
        self.wait_medium();
        let written = self.copy_in(slot, page);
        fence(Ordering::Release);
        if !written {
            // A failed write of a cache: the page is simply not in it.
            self.owners[slot as usize].store(0, Ordering::Release);
            return;
        }
        drop(hand);
        entry.store(pack(slot, generation), Ordering::Release);
        counters.inserts.fetch_add(1, Ordering::Relaxed);
        self.admission.note(lane, TierEvent::Insert);
    }

    /// From now on, offers made on the calling thread's lane on a block medium are staged
    /// for its worker's ring to write ([`Tier::take_staged`], [`Tier::finish_staged`]).
    pub fn attach_ring(&self) {
        let (lane, _) = self.lane();
        self.outboxes[lane].rings.store(true, Ordering::Relaxed);
    }

    /// The calling worker's ring writes no more (it is stopping): what it staged and did
    /// not write is dropped.
    pub fn detach_ring(&self) {
        let (lane, _) = self.lane();
        self.outboxes[lane].rings.store(false, Ordering::Relaxed);
        for write in self.take_staged() {
            self.finish_staged(write, false);
        }
    }

    /// The writes offers staged on the calling thread's lane, for its ring to write.
    pub fn take_staged(&self) -> Vec<StagedWrite> {
        let (lane, _) = self.lane();
        std::mem::take(&mut *self.outboxes[lane].staged.lock().unwrap())
    }

    /// A staged write finished (`written`: all of it, successfully): the copy is published,
    /// unless its page changed meanwhile (the invalidation cleared its word) or the write
    /// failed; then the slot is freed.
    pub fn finish_staged(&self, write: StagedWrite, written: bool) {
        let (lane, counters) = self.lane();
        let StagedWrite { page_id, slot, generation, buf } = write;
        let entry = self.entry(page_id);
        let pending = pack(slot, generation) | PENDING;
        let published = written
            && entry
                .compare_exchange(
                    pending,
                    pack(slot, generation),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok();
        if !published {
            let _ = entry.compare_exchange(pending, 0, Ordering::AcqRel, Ordering::Relaxed);
            self.free_slot(slot, generation, page_id);
        }
        self.writing[slot as usize].store(false, Ordering::Release);
        self.staged.fetch_sub(1, Ordering::Relaxed);
        if published {
            counters.inserts.fetch_add(1, Ordering::Relaxed);
        }
        let mut spare = self.outboxes[lane].spare.lock().unwrap();
        if spare.len() < 64 {
            spare.push(buf);
        }
    }

    /// Whether the medium is a block one (read and written through the workers' rings).
    pub fn is_block(&self) -> bool {
        matches!(self.access, Access::Block { .. })
    }

    /// The tier's file, as the tier reads and writes it (blocking calls).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The tier's file opened again, for a worker's ring to read and write (a block
    /// medium): a description of its own, so that the ring, which the kernel may tear down
    /// after the database closed, never holds the tier's lock.
    pub fn open_for_ring(&self) -> Result<File> {
        let direct =
            if matches!(self.access, Access::Block { direct: true }) { libc::O_DIRECT } else { 0 };
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(direct)
            .open(&self.path)
            .map_err(|e| Error::io(format!("opening the tier {} again", self.path.display()), e))
    }

    /// The added latency of each access.
    pub fn latency(&self) -> Duration {
        self.latency
    }

    /// The medium, in words: its kind, and whether a block one is read with direct I/O.
    pub fn describe(&self) -> String {
        match self.access {
            Access::Mapped { .. } => format!("{} (mapped)", self.path.display()),
            Access::Block { direct: true } => format!("{} (block, O_DIRECT)", self.path.display()),
            Access::Block { direct: false } => {
                format!("{} (block, buffered: no O_DIRECT there)", self.path.display())
            }
        }
    }

    /// A slot for a copy of `page_id`: an empty one, or the first the clock finds unread
    /// since it last passed (and not being written), whose copy is pushed out; `None` if the
    /// frequency filter keeps that copy (its page was looked up at least as often as
    /// `page_id`: the hand moves past it, so the next offer meets the next copy).
    fn take_slot(
        &self,
        hand: &mut u64,
        page_id: PageId,
        lane: usize,
        counters: &Counters,
    ) -> Option<u64> {
        loop {
            let slot = *hand;
            *hand = (*hand + 1) % self.slots;
            if self.writing[slot as usize].load(Ordering::Acquire) {
                continue;
            }
            let owner = self.owners[slot as usize].load(Ordering::Acquire);
            if owner == 0 {
                return Some(slot);
            }
            if self.referenced[slot as usize].swap(false, Ordering::Relaxed) {
                continue;
            }
            if let Some(frequency) = &self.frequency {
                let wanted = frequency.estimate(page_id);
                if wanted < MIN_LOOKUPS_TO_REPLACE || wanted <= frequency.estimate(owner - 1) {
                    return None;
                }
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
            return Some(slot);
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
        let (lane, counters) = self.lane();
        counters.invalidations.fetch_add(1, Ordering::Relaxed);
        self.admission.note(lane, TierEvent::Delete);
        if word & PENDING != 0 {
            // Its write is in flight: the slot is freed when it completes.
            return;
        }
        let (slot, generation) = unpack(word);
        self.free_slot(slot, generation, page_id);
    }

    /// Frees `slot`, which held `page_id` at `generation`, for the next copy (unless it was
    /// reused meanwhile).
    fn free_slot(&self, slot: u64, generation: u32, page_id: PageId) {
        let _hand = self.hand.lock().unwrap();
        if self.generations[slot as usize].load(Ordering::Acquire) == generation {
            let _ = self.owners[slot as usize].compare_exchange(
                page_id + 1,
                0,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
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
            filtered: sum(|c| &c.filtered),
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
        if let Access::Mapped { base, len } = self.access {
            // SAFETY: we created this mapping and nothing refers to it any more.
            unsafe { libc::munmap(base.cast(), len) };
        }
        // The file's lock given up before it closes: a child process another thread forked
        // holds a copy of the descriptor until it execs, and closing alone would leave the
        // tier locked until then (as the directory lock did, `db/lock.rs`).
        // SAFETY: flock only takes the descriptor, open until `file` drops after this.
        unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mapped tier of `slots` slots, without the frequency filter (the clock alone).
    fn tier(dir: &Path, slots: u64, admission: TierAdmission) -> Tier {
        tier_filtered(dir, slots, admission, TierFilter::Off)
    }

    fn tier_filtered(dir: &Path, slots: u64, admission: TierAdmission, filter: TierFilter) -> Tier {
        let options = TierOptions {
            admission,
            filter,
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

    /// With the frequency filter, a page never looked up does not push out a copy; one
    /// looked up more often than the copy the clock reaches does, and copies read more
    /// often than it stay. Without it, the same offers push copies out.
    #[test]
    fn the_frequency_filter_keeps_copies_read_more_often() {
        for filter in [TierFilter::Frequency, TierFilter::Off] {
            let dir = tempfile::tempdir().unwrap();
            let tier = tier_filtered(dir.path(), 16, TierAdmission::All, filter);
            let mut out = page(0);
            // Free slots take any page.
            for id in 0..16 {
                tier.offer(id, &page(id as u8));
            }
            assert_eq!(tier.stats().inserts, 16);
            // Pages 0..8 read five times each.
            for _ in 0..5 {
                for id in 0..8 {
                    assert!(tier.read(id, &mut out) && out == page(id as u8));
                }
            }
            // 40 pages never looked up.
            for id in 100..140 {
                tier.offer(id, &page(id as u8));
            }
            let held = |tier: &Tier, ids: std::ops::Range<u64>| {
                ids.filter(|&id| tier.read(id, &mut page(0))).count()
            };
            let stats = tier.stats();
            match filter {
                TierFilter::Frequency => {
                    assert_eq!((stats.filtered, stats.refused, stats.evictions), (40, 40, 0));
                    assert_eq!(stats.inserts, 16);
                }
                TierFilter::Off => {
                    assert_eq!((stats.filtered, stats.refused), (0, 0));
                    assert_eq!(stats.evictions, 40);
                    continue;
                }
            }
            // Page 300 missed once: below the floor, it pushes out nothing, not even a copy
            // never read.
            assert!(!tier.read(300, &mut out));
            for _ in 0..16 {
                tier.offer(300, &page(255));
            }
            assert!(!tier.read(300, &mut out));
            assert_eq!((tier.stats().filtered, tier.stats().evictions), (56, 0));
            // Page 200 missed three times: it pushes out a copy read less (one of 8..16),
            // never one of the pages read five times. Each offer meets the next copy the
            // clock reaches: offered until it is in (at most once around).
            for _ in 0..3 {
                assert!(!tier.read(200, &mut out));
            }
            for _ in 0..16 {
                tier.offer(200, &page(200));
            }
            assert!(tier.read(200, &mut out) && out == page(200));
            assert_eq!(held(&tier, 0..8), 8, "the copies read most stay");
            assert_eq!(held(&tier, 8..16), 7);
            assert_eq!(tier.stats().evictions, 1);
        }
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

    fn aligned(fill: u8) -> AlignedBlock {
        let mut page = AlignedBlock::zeroed(PAGE_SIZE);
        page.as_mut_slice().fill(fill);
        page
    }

    /// A block medium: blocking offers and reads go through the file; a ring's offers are
    /// staged, invisible until their write is finished, and a page changed while its write
    /// was in flight is not published (its slot is freed instead).
    #[test]
    fn a_block_medium_stages_writes_and_never_publishes_a_changed_page() {
        let dir = tempfile::tempdir().unwrap();
        let options = TierOptions {
            admission: TierAdmission::All,
            medium: TierMedium::Block,
            ..TierOptions::new(dir.path().join("tier"), 16 * PAGE_SIZE as u64)
        };
        let tier = Tier::open(&options, 1024, 1).unwrap();
        assert!(tier.is_block() && tier.describe().contains("block"), "{}", tier.describe());
        let mut out = aligned(0);
        tier.offer(1, aligned(1).as_slice());
        assert!(tier.read(1, out.as_mut_slice()) && out.as_slice() == aligned(1).as_slice());
        // This thread's offers are staged from now on.
        tier.attach_ring();
        tier.offer(2, aligned(2).as_slice());
        tier.offer(3, aligned(3).as_slice());
        assert!(tier.holds(2) && tier.locate(2).is_none(), "pending: no reader is sent there");
        let staged = tier.take_staged();
        assert_eq!(staged.iter().map(|w| w.page_id).collect::<Vec<_>>(), [2, 3]);
        tier.invalidate(3); // page 3 changed while its write was in flight
        for write in staged {
            use std::os::unix::fs::FileExt;
            tier.file().write_all_at(write.buf.as_slice(), write.offset()).unwrap();
            tier.finish_staged(write, true);
        }
        let read = tier.locate(2).expect("published");
        assert!(tier.read_done(2, &read));
        assert!(tier.read(2, out.as_mut_slice()) && out.as_slice() == aligned(2).as_slice());
        assert!(!tier.holds(3) && !tier.read(3, out.as_mut_slice()), "never published");
        // A failed write publishes nothing either; what was staged and never written is
        // dropped when the ring detaches.
        tier.offer(4, aligned(4).as_slice());
        tier.offer(5, aligned(5).as_slice());
        let mut staged = tier.take_staged();
        tier.finish_staged(staged.remove(0), false);
        tier.offer(6, aligned(6).as_slice());
        tier.detach_ring();
        for page in [4, 6] {
            assert!(!tier.holds(page), "page {page}");
        }
        assert_eq!(tier.staged.load(Ordering::Relaxed), 1, "page 5's write is still out");
        tier.finish_staged(staged.remove(0), false);
        // Every slot but the two published copies' is free for the clock again.
        let held = tier.owners.iter().filter(|o| o.load(Ordering::Relaxed) != 0).count();
        assert_eq!(held, 2);
        assert!(tier.writing.iter().all(|w| !w.load(Ordering::Relaxed)));
        assert_eq!(tier.stats().inserts, 2);
    }
}
