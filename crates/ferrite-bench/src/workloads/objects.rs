//! `bench objects`: fio-like I/O into large objects, after MixStore's method (fio over block
//! images at queue depth 32), on Ferrite's objects and on the stores it is measured against:
//! one file per object (`file`, the physical reference), RocksDB (4 KiB chunk values) and
//! SQLite (a table of BLOBs), all behind `stores::objects::ObjectStore`.
//!
//! A run:
//! 1. Setup, not measured: `--objects N` objects of `--object-mib M` MiB each, written whole,
//!    in order, 1 MiB at a time, with the content of version 0 (`objects/content.rs`), with
//!    the store's writes not synced; the store settles and closes. A data set left by an
//!    earlier `--keep` run of the same store, N and M is reused instead, if no write run
//!    touched it since (the record `ferrite-bench-objects` beside it says so; a write run
//!    removes it before it writes).
//! 2. The store opens again as the run asks (`--sync`: every write durable when it returns),
//!    and `--depth D` OS threads (D threads are queue depth D: the stores' calls block; for
//!    Ferrite, D tasks spread over its workers, each awaiting one call at a time, unless
//!    `--direct-api`) do one I/O of `--block` bytes after the other: a warm-up of min(S/5, 1 s) not counted,
//!    then `--seconds S` measured. Each operation goes to an object and a block-aligned
//!    offset chosen as `objects/offsets.rs` says (uniform for rand*, a sequential cursor per
//!    thread for seq*, threads owning disjoint 4 KiB units). A write writes new content
//!    (a new version of each piece, drawn outside the timed call); a read checks the header
//!    and tag of every 2 KiB piece it read against the setup's content.
//! 3. After a write run, each thread's last 64 writes (fewer for large blocks: 64 MiB in
//!    all) are read back and checked byte for byte (outside the measurement). The store closes; the bytes its files allocate are
//!    counted; the directory is removed unless `--keep`.
//!
//! Measured: operations and bytes per second, HdrHistogram latency of each call, the
//! process's CPU per operation, and the counters of the block device holding the data
//! (`/proc/diskstats`, the whole device's) over the measured window (and, for writes, the
//! settle after it: what the store deferred): reads, writes, KiB per
//! read, flushes. `write_amp` is the device's bytes written in the window over the bytes the
//! threads wrote in it (0 for read patterns; `-` where the device's counters cannot be read);
//! writes a store defers past the window (dirty pages, compactions) are not in it.
//! `space_amp` is the bytes the data directory's files allocate after the store closed
//! (`st_blocks × 512`, the benchmark's own two small files left out) over `N × M` MiB.

pub mod content;
pub mod offsets;
mod report;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ferrite::io::AlignedBlock;

use crate::error::BenchError;
use crate::gen::rng::Rng;
use crate::measure::cpu::CpuTime;
use crate::measure::diskstats::{Disk, DiskCounters};
use crate::measure::memcap::{evict_from_page_cache, MemoryCap};
use crate::measure::phase::{wait, MEASURE, STOP, WARMUP};
use crate::measure::progress::Progress;
use crate::runner::{self, AsyncOps, BlockingOps, Hdr, Ops, Pacing};
use crate::stores::objects::{
    self as stores, object_name, ObjectSession, ObjectStore, ObjectStoreKind, ObjectStoreOptions,
};
use crate::stores::StoreError;
use crate::workloads::io::Pattern;
use crate::workloads::run::{remove_bench_dir, short_hash, MARKER_FILE};
use content::Check;
use offsets::{Cursor, Layout};

pub use report::ObjectsReport;

/// The block sizes, by name: the smallest is a content piece, the largest fio's usual top.
pub const BLOCK_SIZES: [(&str, usize); 5] =
    [("2k", 2048), ("4k", 4096), ("16k", 16384), ("64k", 65536), ("256k", 262_144)];
pub const DEFAULT_OBJECTS: u32 = 4;
/// 4 objects of 256 MiB: 1 GiB, 16 times the default cache.
pub const DEFAULT_OBJECT_MIB: u64 = 256;
pub const DEFAULT_BLOCK_BYTES: usize = 4096;
/// MixStore's queue depth.
pub const DEFAULT_DEPTH: usize = 32;
pub const DEFAULT_SECONDS: f64 = 20.0;
pub const DEFAULT_CACHE_MIB: u64 = 64;
pub const DEFAULT_SEED: u64 = 1;
pub const MAX_OBJECTS: u64 = 1 << 20;
/// Most threads (= queue depth).
pub const MAX_DEPTH: usize = 1024;
/// The most data a run may set up: 1 TiB (Ferrite's largest object, too).
pub const MAX_TOTAL_BYTES: u64 = ferrite::MAX_OBJECT_LEN;
/// Longest warm-up; it is otherwise a fifth of the measured time.
pub const MAX_WARMUP_SECONDS: f64 = 1.0;
/// Bytes per write of the setup.
const SETUP_CHUNK_BYTES: usize = 1 << 20;
/// Writes each thread remembers, to read back after a write run ...
const RECENT_WRITES: usize = 64;
/// ... as long as all threads' together are at most this many bytes (at least 4 each).
const RECENT_BYTES_MAX: usize = 64 << 20;
/// The record of a data set that holds the setup's content, for a later run to reuse.
pub const META_FILE: &str = "ferrite-bench-objects";

/// `--block`: one of [`BLOCK_SIZES`], by name or in bytes.
pub fn parse_block(text: &str) -> Result<usize, String> {
    let lower = text.to_ascii_lowercase();
    let lower = lower.strip_suffix("ib").unwrap_or(&lower);
    BLOCK_SIZES
        .iter()
        .find(|(name, bytes)| lower == *name || lower == bytes.to_string())
        .map(|&(_, bytes)| bytes)
        .ok_or_else(|| format!("block size {text:?} is not one of 2k, 4k, 16k, 64k, 256k"))
}

/// The name of a block size of [`BLOCK_SIZES`] (`4k`).
pub fn block_name(bytes: usize) -> &'static str {
    BLOCK_SIZES.iter().find(|&&(_, b)| b == bytes).map_or("other", |&(name, _)| name)
}

/// `--pattern`: randread, seqread, randwrite or seqwrite.
pub fn parse_pattern(text: &str) -> Result<Pattern, String> {
    Pattern::from_name(text)
        .ok_or_else(|| format!("unknown pattern {text:?} (randwrite, randread, seqwrite, seqread)"))
}

/// Everything a `bench objects` run is told.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectsConfig {
    pub store: ObjectStoreKind,
    pub pattern: Pattern,
    /// Bytes per operation: one of [`BLOCK_SIZES`].
    pub block_bytes: usize,
    pub objects: u32,
    /// MiB of each object.
    pub object_mib: u64,
    /// Threads (Ferrite: tasks), each one I/O at a time: the queue depth.
    pub depth: usize,
    /// Ferrite: the blocking API from `depth` threads instead of `depth` tasks on its
    /// workers.
    pub direct_api: bool,
    /// Measured seconds.
    pub seconds: f64,
    /// Every write durable when it returns.
    pub sync: bool,
    /// The data directory.
    pub dir: PathBuf,
    /// Keep the data directory (a later read run of the same data reuses it).
    pub keep: bool,
    /// The store's own cache (Ferrite's pool, RocksDB's block cache; SQLite: the page cache
    /// cap), MiB.
    pub cache_mib: u64,
    /// Seed of the offsets (thread `t` draws stream `t`).
    pub seed: u64,
    /// Append the result, as one JSON object, to this file.
    pub json: Option<PathBuf>,
    /// Each thread stops after this many measured operations (the run ends when the first
    /// one does): for tests, to bound a run's work.
    pub ops_per_thread: Option<u64>,
}

impl ObjectsConfig {
    /// The defaults for `store`.
    pub fn new(store: ObjectStoreKind) -> Self {
        ObjectsConfig {
            store,
            pattern: Pattern::RandWrite,
            block_bytes: DEFAULT_BLOCK_BYTES,
            objects: DEFAULT_OBJECTS,
            object_mib: DEFAULT_OBJECT_MIB,
            depth: DEFAULT_DEPTH,
            direct_api: false,
            seconds: DEFAULT_SECONDS,
            sync: false,
            dir: ObjectsConfig::default_dir(store),
            keep: false,
            cache_mib: DEFAULT_CACHE_MIB,
            seed: DEFAULT_SEED,
            json: None,
            ops_per_thread: None,
        }
    }

    /// Where `store`'s data lives when no `--dir` is given, beside the other workloads'.
    pub fn default_dir(store: ObjectStoreKind) -> PathBuf {
        PathBuf::from(format!("ferrite-data/bench-objects-{}", store.name()))
    }

    /// The warm-up before measuring: a fifth of the measured time, at most 1 s.
    pub fn warmup_seconds(&self) -> f64 {
        (self.seconds / 5.0).min(MAX_WARMUP_SECONDS)
    }

    pub fn object_bytes(&self) -> u64 {
        self.object_mib << 20
    }

    /// Bytes of all objects together.
    pub fn logical_bytes(&self) -> u64 {
        u64::from(self.objects) * self.object_bytes()
    }

    pub fn layout(&self) -> Layout {
        Layout {
            objects: self.objects,
            object_bytes: self.object_bytes(),
            block_bytes: self.block_bytes as u64,
        }
    }

    /// Whether the measured operations run as tasks on Ferrite's workers.
    pub fn tasks(&self) -> bool {
        self.store == ObjectStoreKind::Ferrite && !self.direct_api
    }

    /// What the store is opened with for the measurement (`setup`: for the setup, which
    /// writes unsynced from the calling thread).
    pub fn store_options(&self, setup: bool) -> ObjectStoreOptions {
        ObjectStoreOptions {
            objects: self.objects,
            object_bytes: self.object_bytes(),
            block_bytes: self.block_bytes,
            sync: self.sync && !setup,
            cache_bytes: self.cache_mib << 20,
            tasks: self.tasks() && !setup,
        }
    }

    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |reason: String| Err(BenchError::Config(reason));
        if !self.store.built_in() {
            return bad(format!(
                "--store {} needs a build with the peers: cargo build --release -p ferrite-cli \
                 --features peers (and the Debian packages librocksdb-dev libwiredtiger-dev \
                 liblmdb-dev libsqlite3-dev)",
                self.store.name()
            ));
        }
        if block_name(self.block_bytes) == "other" {
            return bad(format!(
                "block size {} is not one of 2k, 4k, 16k, 64k, 256k",
                self.block_bytes
            ));
        }
        if self.objects == 0 || u64::from(self.objects) > MAX_OBJECTS {
            return bad(format!(
                "the number of objects must be from 1 to {MAX_OBJECTS} (got {})",
                self.objects
            ));
        }
        if self.object_mib == 0 {
            return bad("objects must be at least 1 MiB (--object-mib)".into());
        }
        if self.object_mib > MAX_TOTAL_BYTES >> 20 || self.logical_bytes() > MAX_TOTAL_BYTES {
            return bad(format!(
                "{} objects of {} MiB are more than {} GiB in all",
                self.objects,
                self.object_mib,
                MAX_TOTAL_BYTES >> 30
            ));
        }
        if self.direct_api && self.store != ObjectStoreKind::Ferrite {
            return bad(format!(
                "--direct-api is for --store ferrite (store {} always runs from threads)",
                self.store.name()
            ));
        }
        if self.depth == 0 || self.depth > MAX_DEPTH {
            return bad(format!("depth {} is out of range (1 to {MAX_DEPTH})", self.depth));
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0 && self.seconds <= 1e6) {
            return bad(format!("{} seconds is out of range", self.seconds));
        }
        if self.cache_mib == 0 || self.cache_mib > 1 << 24 {
            return bad(format!("a cache of {} MiB is out of range", self.cache_mib));
        }
        if self.dir.as_os_str().is_empty() {
            return bad("the data directory path is empty".into());
        }
        let layout = self.layout();
        if !layout.fits(self.depth as u64) {
            return bad(format!(
                "{} objects of {} MiB hold {} units of {} KiB, fewer than the {} threads of \
                 --depth {} (each thread owns units of its own): more data or less depth",
                self.objects,
                self.object_mib,
                layout.units(),
                layout.unit_bytes() >> 10,
                self.depth,
                self.depth
            ));
        }
        Ok(())
    }

    /// Everything that decides what a run measures, as one canonical string.
    pub fn canonical(&self) -> String {
        format!(
            "workload=objects store={} pattern={} block={} objects={} object_mib={} depth={} \
             seconds={} sync={} cache_mib={} seed={}",
            self.store.name(),
            self.pattern.name(),
            self.block_bytes,
            self.objects,
            self.object_mib,
            self.depth,
            self.seconds,
            self.sync,
            self.cache_mib,
            self.seed
        ) + if self.direct_api { " direct_api=true" } else { "" }
    }

    /// A short hash of `canonical()`.
    pub fn hash(&self) -> String {
        short_hash(&self.canonical())
    }
}

/// The record a finished setup leaves, naming its data set.
fn meta_text(config: &ObjectsConfig) -> String {
    format!(
        "format=objects-1 store={} objects={} object_mib={}\n",
        config.store.name(),
        config.objects,
        config.object_mib
    )
}

/// Whether `dir` holds the setup's content of exactly this data set.
fn reusable(dir: &Path, config: &ObjectsConfig) -> bool {
    std::fs::read_to_string(dir.join(META_FILE)).is_ok_and(|text| text == meta_text(config))
}

fn io_error(context: String) -> impl FnOnce(std::io::Error) -> BenchError {
    move |source| BenchError::Io { context, source }
}

/// A verification failure at `offset` of `object`.
fn content_error(object: u32, offset: u64, len: usize, m: content::Mismatch) -> BenchError {
    BenchError::Content(format!("{len} bytes at offset {offset} of {}: {m}", object_name(object)))
}

/// A store's failure, saying which operation failed.
fn op_error(what: &str, object: u32, offset: u64, len: usize, e: StoreError) -> BenchError {
    let context = format!("{what} of {len} bytes at offset {offset} of {}", object_name(object));
    BenchError::Store(format!("{context}: {e}").into())
}

/// Runs `bench objects` as `config` says and returns its report (also appended to `--json`).
/// Progress goes to stderr when `show_progress`.
pub fn run(config: &ObjectsConfig, show_progress: bool) -> Result<ObjectsReport, BenchError> {
    config.validate()?;
    let dir = config.dir.as_path();
    let reused = reusable(dir, config);
    if !reused && dir.exists() {
        remove_bench_dir(dir)?;
    }
    std::fs::create_dir_all(dir).map_err(io_error(format!("creating {}", dir.display())))?;
    let setup_seconds = if reused { None } else { Some(set_up(config, show_progress)?) };
    if config.pattern.is_write() {
        // From the first write on, the data is no longer the setup's.
        match std::fs::remove_file(dir.join(META_FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io_error(format!("removing {}", dir.join(META_FILE).display()))(e))
            }
            _ => {}
        }
    }
    let (cap, cap_note) = page_cache_cap(config);
    let store = stores::open(config.store, dir, &config.store_options(false))?;
    let measured = measure(&*store, config, show_progress)?;
    // What the store deferred (Ferrite's merges and checkpoint, RocksDB's flush and
    // compaction, the files' sync) is written now, counted apart and in `write_amp`.
    let settle_written = if config.pattern.is_write() {
        let disk = Disk::of(dir);
        let before = disk.as_ref().and_then(Disk::counters);
        store.settle().map_err(BenchError::Store)?;
        let after = disk.as_ref().and_then(Disk::counters);
        match (before, after) {
            (Some(b), Some(a)) => Some(a.since(b).written_bytes),
            _ => None,
        }
    } else {
        Some(0)
    };
    let verified = if config.pattern.is_write() {
        Some(verify_written(&*store, config, &measured.recent)?)
    } else {
        None
    };
    let store_description = store.describe() + &cap_note;
    let direct_io = store.direct_io();
    let layout_note = store.layout_note();
    store.close().map_err(BenchError::Store)?;
    drop(cap);
    let report = ObjectsReport {
        config: config.clone(),
        store_description,
        direct_io,
        layout_note,
        setup_seconds,
        ops: measured.ops,
        bytes: measured.bytes,
        seconds: measured.seconds,
        warmup_seconds: measured.warmup_seconds,
        latency_ns: measured.latency_ns,
        cpu: measured.cpu,
        disk: measured.disk,
        settle_written,
        bytes_on_disk: store_bytes_on_disk(dir),
        verified,
    };
    if let Some(path) = &config.json {
        crate::workloads::run::append_json(path, &report.json())?;
    }
    if !config.keep {
        remove_bench_dir(dir)?;
    }
    Ok(report)
}

/// Creates the store in `config.dir` and writes every object whole with version 0, unsynced;
/// then settles and closes it and records the data set. Returns the seconds it took.
fn set_up(config: &ObjectsConfig, show_progress: bool) -> Result<f64, BenchError> {
    let dir = config.dir.as_path();
    let start = Instant::now();
    let store = stores::open(config.store, dir, &config.store_options(true))?;
    // Marks the directory as the benchmark's as soon as the store made it (Ferrite refuses
    // to create a database in a directory holding other files), so that a later run may
    // remove it even if this one fails half way.
    std::fs::write(dir.join(MARKER_FILE), "made by `ferrite bench`, which removes it\n")
        .map_err(io_error(format!("marking {}", dir.display())))?;
    let total_mib = config.logical_bytes() >> 20;
    let mut progress = if show_progress {
        let label = format!("writing {} objects into {}", config.objects, config.store.name());
        Progress::stderr(&label, "MiB", total_mib)
    } else {
        Progress::hidden(total_mib)
    };
    let mut session = store.session().map_err(BenchError::Store)?;
    let mut chunk = AlignedBlock::zeroed(SETUP_CHUNK_BYTES);
    let object_bytes = config.object_bytes();
    let mut written = 0u64;
    for object in 0..config.objects {
        store.create(object).map_err(BenchError::Store)?;
        let mut offset = 0;
        while offset < object_bytes {
            let len = (object_bytes - offset).min(SETUP_CHUNK_BYTES as u64) as usize;
            let bytes = &mut chunk.as_mut_slice()[..len];
            content::fill(bytes, object, offset, 0);
            session
                .write_at(object, offset, bytes)
                .map_err(|e| op_error("setup write", object, offset, len, e))?;
            offset += len as u64;
            written += len as u64;
            progress.set(written >> 20);
        }
    }
    drop(session);
    store.settle().map_err(BenchError::Store)?;
    store.close().map_err(BenchError::Store)?;
    progress.finish();
    std::fs::write(dir.join(META_FILE), meta_text(config))
        .map_err(io_error(format!("recording the data set in {}", dir.display())))?;
    Ok(start.elapsed().as_secs_f64())
}

/// SQLite reads through the OS page cache: like LMDB in the other workloads, it runs in a
/// memory cgroup of `--cache-mib` plus what the process needs of its own, its files evicted
/// from the page cache first. Not in unit tests (the cap would hold every test of the
/// process). Returns the cap (left when dropped) and a note for the description.
fn page_cache_cap(config: &ObjectsConfig) -> (Option<MemoryCap>, String) {
    if config.store != ObjectStoreKind::Sqlite || cfg!(test) {
        return (None, String::new());
    }
    // Per thread: its connection's page cache (2000 KiB), its buffer, and some slack.
    let per_thread = (2000 << 10) + 2 * config.block_bytes as u64 + (256 << 10);
    let headroom = (16 << 20) + config.depth as u64 * per_thread;
    let entered = MemoryCap::enter((config.cache_mib << 20) + headroom);
    evict_from_page_cache(&config.dir);
    match entered {
        Ok(cap) => {
            let note = format!(
                " [page cache capped: a memory cgroup of {} MiB, the cache plus {} MiB for the \
                 process's own memory (the connections' caches included)]",
                cap.limit_bytes >> 20,
                headroom >> 20
            );
            (Some(cap), note)
        }
        Err(reason) => (None, format!(" [page cache NOT capped ({reason})]")),
    }
}

/// A write a thread made, to read back after the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub object: u32,
    pub offset: u64,
    pub version: u32,
}

/// What a thread counted while measuring.
#[derive(Debug, Clone, Default)]
pub struct ObjectCounts {
    pub ops: u64,
    /// Bytes read or written.
    pub bytes: u64,
    /// The thread's last writes, oldest first (warm-up included): threads own their blocks,
    /// so the last write of a block here is the last write of that block.
    pub recent: Vec<Written>,
}

impl std::ops::AddAssign for ObjectCounts {
    fn add_assign(&mut self, other: ObjectCounts) {
        self.ops += other.ops;
        self.bytes += other.bytes;
        self.recent.extend(other.recent);
    }
}

/// One operation: where, and which version a write writes (0 for reads: the setup's).
#[derive(Debug, Clone, Copy)]
struct Op {
    object: u32,
    offset: u64,
    version: u32,
}

/// One thread's or task's operations, through `session`: a store's [`ObjectSession`] on a
/// thread, Ferrite's tree in a task.
struct ObjectOps<S> {
    session: S,
    cursor: Cursor,
    write: bool,
    /// The block written or read, 4 KiB aligned.
    buf: AlignedBlock,
    /// The version of this thread's next write (never 0, the setup's).
    next_version: u32,
    measuring: bool,
    ops_limit: Option<u64>,
    counts: ObjectCounts,
    recent: std::collections::VecDeque<Written>,
    /// The most writes `recent` holds.
    recent_max: usize,
}

/// Writes each of `depth` threads remembers to read back: [`RECENT_WRITES`], fewer where
/// they would be more than [`RECENT_BYTES_MAX`] in all, at least 4.
fn recent_per_thread(depth: usize, block_bytes: usize) -> usize {
    (RECENT_BYTES_MAX / depth / block_bytes).clamp(4, RECENT_WRITES)
}

impl<S> ObjectOps<S> {
    /// Stream `t` of `config.depth`, through `session`.
    fn new(config: &ObjectsConfig, t: u64, session: S) -> Self {
        let streams = config.depth as u64;
        let recent_max = recent_per_thread(config.depth, config.block_bytes);
        ObjectOps {
            session,
            cursor: Cursor::new(
                config.layout(),
                config.pattern.is_random(),
                t,
                streams,
                Rng::stream(config.seed, t),
            ),
            write: config.pattern.is_write(),
            buf: AlignedBlock::zeroed(config.block_bytes),
            next_version: 1,
            measuring: false,
            ops_limit: config.ops_per_thread,
            counts: ObjectCounts::default(),
            recent: std::collections::VecDeque::with_capacity(recent_max),
            recent_max,
        }
    }
}

impl<S> Ops for ObjectOps<S> {
    type Op = Op;
    type Outcome = Result<(), StoreError>;
    type Counts = ObjectCounts;

    fn next_op(&mut self) -> Option<Op> {
        if self.measuring && self.ops_limit.is_some_and(|limit| self.counts.ops >= limit) {
            return None;
        }
        let (object, offset) = self.cursor.next_block();
        let version = if self.write {
            let version = self.next_version;
            self.next_version = self.next_version.checked_add(1).unwrap_or(1);
            content::fill(self.buf.as_mut_slice(), object, offset, version);
            version
        } else {
            0
        };
        Some(Op { object, offset, version })
    }

    fn verify(&mut self, op: Op, outcome: Result<(), StoreError>) -> Result<(), BenchError> {
        let len = self.buf.len();
        let what = if self.write { "write" } else { "read" };
        outcome.map_err(|e| op_error(what, op.object, op.offset, len, e))?;
        if self.write {
            if self.recent.len() == self.recent_max {
                self.recent.pop_front();
            }
            self.recent.push_back(Written {
                object: op.object,
                offset: op.offset,
                version: op.version,
            });
        } else {
            content::check(self.buf.as_slice(), op.object, op.offset, 0, Check::Sampled)
                .map_err(|m| content_error(op.object, op.offset, len, m))?;
        }
        self.counts.ops += 1;
        self.counts.bytes += len as u64;
        Ok(())
    }

    fn start_measuring(&mut self) {
        self.counts = ObjectCounts::default();
        self.measuring = true;
    }

    fn counts(&self) -> ObjectCounts {
        ObjectCounts { recent: self.recent.iter().copied().collect(), ..self.counts.clone() }
    }
}

impl BlockingOps for ObjectOps<Box<dyn ObjectSession + '_>> {
    fn execute(&mut self, op: Op) -> Result<(), StoreError> {
        if self.write {
            self.session.write_at(op.object, op.offset, self.buf.as_slice())
        } else {
            self.session.read_at(op.object, op.offset, self.buf.as_mut_slice())
        }
    }
}

impl AsyncOps for ObjectOps<ferrite::Tree> {
    async fn execute(&mut self, op: Op) -> Result<(), StoreError> {
        let name = object_name(op.object);
        if self.write {
            Ok(self.session.write_at_async(name.as_bytes(), op.offset, self.buf.as_slice()).await?)
        } else {
            let buf = self.buf.as_mut_slice();
            match self.session.read_at_async(name.as_bytes(), op.offset, buf).await? {
                Some(n) if n == buf.len() => Ok(()),
                Some(n) => {
                    Err(format!("{name}: read {n} of {} bytes at offset {}", buf.len(), op.offset)
                        .into())
                }
                None => Err(format!("{name} is missing").into()),
            }
        }
    }
}

/// What the measured part found.
struct Measured {
    ops: u64,
    bytes: u64,
    seconds: f64,
    warmup_seconds: f64,
    latency_ns: Hdr,
    cpu: CpuTime,
    disk: Option<(String, DiskCounters)>,
    recent: Vec<Written>,
}

/// The measured window as the controlling thread saw it.
struct Window {
    warmup_seconds: f64,
    seconds: f64,
    cpu: CpuTime,
    disk: Option<(String, DiskCounters)>,
}

/// Runs the threads (or Ferrite's tasks): warm-up, then the measured window.
fn measure(
    store: &dyn ObjectStore,
    config: &ObjectsConfig,
    show_progress: bool,
) -> Result<Measured, BenchError> {
    let streams = config.depth as u64;
    let disk = Disk::of(&config.dir);
    let (window, tally) = if let Some((db, tree)) = store.task_api() {
        // Tasks on the workers, round robin; the calling thread keeps the time.
        let phase = std::sync::Arc::new(AtomicU8::new(WARMUP));
        let tasks = (0..streams).map(|t| ObjectOps::new(config, t, tree.clone()));
        let running = runner::spawn_tasks(db, tasks, Pacing::Closed, &phase)?;
        let window = control(config, &phase, disk.as_ref(), show_progress);
        (window, running.finish()?)
    } else {
        // Opened here, so that a store that cannot open them (SQLite's connections) fails
        // the run before it starts; each thread takes its own.
        let sessions = (0..streams)
            .map(|_| store.session().map(|s| Mutex::new(Some(s))))
            .collect::<Result<Vec<_>, _>>()
            .map_err(BenchError::Store)?;
        let make = |t: u64| {
            let session =
                sessions[t as usize].lock().unwrap().take().expect("one session per thread");
            ObjectOps::new(config, t, session)
        };
        let phase = AtomicU8::new(WARMUP);
        runner::on_threads(config.depth, &make, Pacing::Closed, &phase, || {
            control(config, &phase, disk.as_ref(), show_progress)
        })?
    };
    Ok(Measured {
        ops: tally.counts.ops,
        bytes: tally.counts.bytes,
        seconds: window.seconds,
        warmup_seconds: window.warmup_seconds,
        latency_ns: tally.latency_ns,
        cpu: window.cpu,
        disk: window.disk,
        recent: tally.counts.recent,
    })
}

/// Waits out the warm-up, opens the measured window (the device's and the process's
/// counters), shows the time measured so far, and closes it after `config.seconds` or when
/// the threads stopped.
fn control(
    config: &ObjectsConfig,
    phase: &AtomicU8,
    disk: Option<&Disk>,
    show_progress: bool,
) -> Window {
    let warmup_start = Instant::now();
    wait(phase, Duration::from_secs_f64(config.warmup_seconds()));
    let warmup_seconds = warmup_start.elapsed().as_secs_f64();
    let disk_before = disk.and_then(Disk::counters);
    let cpu_before = CpuTime::now();
    let _ = phase.compare_exchange(WARMUP, MEASURE, Ordering::AcqRel, Ordering::Acquire);
    let start = Instant::now();
    let measure = Duration::from_secs_f64(config.seconds);
    let total_ms = measure.as_millis() as u64;
    let mut progress = if show_progress {
        let label = format!(
            "{} {} on {}",
            config.pattern.name(),
            block_name(config.block_bytes),
            config.store.name()
        );
        Progress::stderr(&label, "ms", total_ms)
    } else {
        Progress::hidden(total_ms)
    };
    loop {
        let left = measure.saturating_sub(start.elapsed());
        if left.is_zero() || phase.load(Ordering::Acquire) == STOP {
            break;
        }
        wait(phase, left.min(Duration::from_millis(500)));
        progress.set((start.elapsed().as_millis() as u64).min(total_ms));
    }
    phase.store(STOP, Ordering::Release);
    let seconds = start.elapsed().as_secs_f64();
    let cpu = CpuTime::now().since(cpu_before);
    let disk = disk.and_then(|d| {
        let after = d.counters()?;
        Some((d.name.clone(), after.since(disk_before?)))
    });
    progress.finish();
    Window { warmup_seconds, seconds, cpu, disk }
}

/// Reads back the last write of every block in `recent` and checks it byte for byte;
/// returns how many blocks it checked.
fn verify_written(
    store: &dyn ObjectStore,
    config: &ObjectsConfig,
    recent: &[Written],
) -> Result<u64, BenchError> {
    // Later writes of a block replace earlier ones (each thread's list is oldest first, and
    // no two threads write one block).
    let latest: BTreeMap<(u32, u64), u32> =
        recent.iter().map(|w| ((w.object, w.offset), w.version)).collect();
    let mut session = store.session().map_err(BenchError::Store)?;
    let mut buf = AlignedBlock::zeroed(config.block_bytes);
    for (&(object, offset), &version) in &latest {
        session
            .read_at(object, offset, buf.as_mut_slice())
            .map_err(|e| op_error("read back", object, offset, buf.len(), e))?;
        content::check(buf.as_slice(), object, offset, version, Check::Full)
            .map_err(|m| content_error(object, offset, buf.len(), m))?;
    }
    Ok(latest.len() as u64)
}

/// Bytes the store's files allocate under `dir` (`st_blocks × 512`), the benchmark's own
/// marker and record left out.
pub fn store_bytes_on_disk(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let own: u64 = [MARKER_FILE, META_FILE]
        .iter()
        .filter_map(|name| std::fs::metadata(dir.join(name)).ok())
        .map(|m| m.blocks() * 512)
        .sum();
    crate::workloads::run::bytes_on_disk(dir).saturating_sub(own)
}

#[cfg(test)]
mod tests;
