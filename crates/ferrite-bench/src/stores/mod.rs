//! The stores the workloads measure, behind one trait: `KvStore` (a blocking, ordered
//! key-value store shared by the threads of a run) and the counters a store may keep (device
//! and cache, log, change buffer drains, worker time, memory). Ferrite (`ferrite.rs`) also
//! runs as tasks on its own workers; the peers (`peers.rs`, feature `peers`) are RocksDB,
//! WiredTiger and LMDB. `conformance.rs` checks any store against a model; tests use an
//! in-memory map (`mem`) so that workloads are tested without an engine. The stores of large
//! objects that `bench objects` measures are apart, in `objects/`, behind their own trait.

use std::path::Path;

use crate::error::BenchError;
use crate::report::ResultLine;
use crate::workloads::run::RunConfig;

pub mod conformance;
pub mod ferrite;
pub mod objects;
#[cfg(feature = "peers")]
pub mod peers;

pub use self::ferrite::{FerriteStore, FerriteTasks, FerriteTree};

/// The stores a comparison can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreKind {
    Ferrite,
    RocksDb,
    WiredTiger,
    Lmdb,
}

impl StoreKind {
    pub const ALL: [StoreKind; 4] =
        [StoreKind::Ferrite, StoreKind::RocksDb, StoreKind::WiredTiger, StoreKind::Lmdb];

    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Ferrite => "ferrite",
            StoreKind::RocksDb => "rocksdb",
            StoreKind::WiredTiger => "wiredtiger",
            StoreKind::Lmdb => "lmdb",
        }
    }

    pub fn from_name(name: &str) -> Option<StoreKind> {
        StoreKind::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether this build can run the store (the peers need the `peers` feature).
    pub fn built_in(self) -> bool {
        self == StoreKind::Ferrite || cfg!(feature = "peers")
    }
}

/// A store opened for a run: its blocking API, and Ferrite's workers when the run uses tasks.
pub struct OpenStore {
    kv: Box<dyn KvStore + Send + Sync>,
    tasks: Option<FerriteTasks>,
}

impl std::fmt::Debug for OpenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenStore").field("store", &self.kv.name()).finish_non_exhaustive()
    }
}

impl OpenStore {
    /// A store run from threads.
    pub fn threads(kv: Box<dyn KvStore + Send + Sync>) -> Self {
        OpenStore { kv, tasks: None }
    }

    /// Ferrite, run as tasks on its workers.
    pub fn with_tasks(kv: Box<dyn KvStore + Send + Sync>, tasks: FerriteTasks) -> Self {
        OpenStore { kv, tasks: Some(tasks) }
    }

    pub fn kv(&self) -> &dyn KvStore {
        &*self.kv
    }

    /// The database and tree the tasks run on, if the run uses tasks.
    pub fn tasks(&self) -> Option<&FerriteTasks> {
        self.tasks.as_ref()
    }
}

/// Opens the store `config` names in `dir`: Ferrite (with its workers unless `--direct-api`),
/// or a peer (with the `peers` feature).
pub fn open_store(config: &RunConfig, dir: &Path) -> Result<OpenStore, BenchError> {
    match config.store {
        StoreKind::Ferrite => self::ferrite::open_ferrite(config, dir),
        #[cfg(feature = "peers")]
        peer => self::peers::open(peer, config, dir),
        #[cfg(not(feature = "peers"))]
        peer => Err(BenchError::Config(format!("{} is not built in", peer.name()))),
    }
}

/// An error from a store, whatever the store.
pub type StoreError = Box<dyn std::error::Error + Send + Sync>;

/// Device and cache counters of a store, cumulative since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    /// Pages read from the device.
    pub reads: u64,
    /// Pages written to the device.
    pub writes: u64,
    /// Pages evicted from the cache.
    pub evictions: u64,
}

impl IoCounters {
    /// The counts between `earlier` and `self`.
    pub fn since(self, earlier: IoCounters) -> IoCounters {
        IoCounters {
            reads: self.reads.saturating_sub(earlier.reads),
            writes: self.writes.saturating_sub(earlier.writes),
            evictions: self.evictions.saturating_sub(earlier.evictions),
        }
    }
}

/// A store's write-ahead log, cumulative since it was opened (Ferrite's: `Log::counters`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogCounters {
    /// Log writes completed (each one write and its sync: one group commit).
    pub writes: u64,
    /// Records appended (commits, page images, checkpoints; not the flush-end marker each
    /// write closes with).
    pub records: u64,
    /// Bytes the log writes carried.
    pub bytes: u64,
    /// Nanoseconds the writes took, from being taken to being durable, summed.
    pub flight_ns: u64,
    /// Bytes of the records appended (the log's tail moved by this much; the writes may
    /// trail it by what no flush has taken yet).
    pub appended: u64,
    /// Page images appended: a page's first write-back after a checkpoint logs it whole.
    pub images: u64,
    /// The bytes of those images' records.
    pub image_bytes: u64,
    /// Checkpoints completed.
    pub checkpoints: u64,
}

impl LogCounters {
    /// The counts between `earlier` and `self`.
    pub fn since(self, earlier: LogCounters) -> LogCounters {
        LogCounters {
            writes: self.writes.saturating_sub(earlier.writes),
            records: self.records.saturating_sub(earlier.records),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            flight_ns: self.flight_ns.saturating_sub(earlier.flight_ns),
            appended: self.appended.saturating_sub(earlier.appended),
            images: self.images.saturating_sub(earlier.images),
            image_bytes: self.image_bytes.saturating_sub(earlier.image_bytes),
            checkpoints: self.checkpoints.saturating_sub(earlier.checkpoints),
        }
    }
}

/// A store's second cache tier, cumulative since it was opened (Ferrite's `Options::tier`),
/// but for the window gauges.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TierCounters {
    /// Cache misses that looked in the tier.
    pub lookups: u64,
    /// Of those, served from it.
    pub hits: u64,
    /// Pages copied in.
    pub inserts: u64,
    /// Copies dropped because their page changed or was freed.
    pub invalidations: u64,
    /// Copies pushed out to make room.
    pub evictions: u64,
    /// Bytes written to the tier's medium.
    pub bytes_written: u64,
    /// Pages not copied in: admission turned them away, or the frequency filter.
    pub refused: u64,
    /// Of those, the pages the frequency filter turned away (Ferrite).
    pub filtered: u64,
    /// Full OBP windows measured (about a second each, one per 100 ms step, per worker),
    /// and how many of them passed the admission's limit.
    pub windows: u64,
    pub windows_over: u64,
    /// A gauge: the OBP of the last full window (the worst worker's) when read.
    pub window_obp: f64,
    /// A gauge: the highest `window_obp` a run sampled while measuring (every 500 ms); 0 in
    /// counters read from the store.
    pub peak_window_obp: f64,
}

impl TierCounters {
    /// The counts between `earlier` and `self`.
    pub fn since(self, earlier: TierCounters) -> TierCounters {
        TierCounters {
            lookups: self.lookups.saturating_sub(earlier.lookups),
            hits: self.hits.saturating_sub(earlier.hits),
            inserts: self.inserts.saturating_sub(earlier.inserts),
            invalidations: self.invalidations.saturating_sub(earlier.invalidations),
            evictions: self.evictions.saturating_sub(earlier.evictions),
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
            refused: self.refused.saturating_sub(earlier.refused),
            filtered: self.filtered.saturating_sub(earlier.filtered),
            windows: self.windows.saturating_sub(earlier.windows),
            windows_over: self.windows_over.saturating_sub(earlier.windows_over),
            window_obp: self.window_obp,
            peak_window_obp: self.peak_window_obp.max(earlier.peak_window_obp),
        }
    }

    /// Misses of the tier (lookups it could not serve).
    pub fn misses(&self) -> u64 {
        self.lookups - self.hits.min(self.lookups)
    }

    /// The overhead-bypass ratio over these counts: (pages inserted + pages dropped) /
    /// pages looked up.
    pub fn obp(&self) -> f64 {
        (self.inserts + self.invalidations + self.evictions) as f64 / self.lookups.max(1) as f64
    }

    /// The summary's account of the tier's use, in one line.
    pub fn describe(&self) -> String {
        let peak = match self.peak_window_obp {
            0.0 => String::new(),
            peak => format!(", highest window sampled {peak:.3}"),
        };
        let filtered = match self.filtered {
            0 => String::new(),
            n => format!(" ({} by the frequency filter)", crate::report::thousands(n)),
        };
        format!(
            "{} hits of {} lookups ({:.1} %), {} copied in ({}), {} dropped as changed, {} \
             pushed out, {} refused{filtered}; OBP {:.3} over the run, {} of {} windows over \
             the limit{peak}",
            crate::report::thousands(self.hits),
            crate::report::thousands(self.lookups),
            100.0 * self.hits as f64 / self.lookups.max(1) as f64,
            crate::report::thousands(self.inserts),
            crate::report::bytes(self.bytes_written),
            crate::report::thousands(self.invalidations),
            crate::report::thousands(self.evictions),
            crate::report::thousands(self.refused),
            self.obp(),
            self.windows_over,
            self.windows,
        )
    }

    /// The result line's fields of the tier's use (always there, zeros without a tier:
    /// scripts read them): `tier_hits tier_misses obp tier_write_mib`.
    pub fn use_fields(&self, line: ResultLine) -> ResultLine {
        line.int("tier_hits", self.hits)
            .int("tier_misses", self.misses())
            .real("obp", self.obp(), 3)
            .real("tier_write_mib", self.bytes_written as f64 / (1 << 20) as f64, 1)
    }

    /// The result line's fields of the OBP windows: `obp_windows obp_windows_over`.
    pub fn window_fields(&self, line: ResultLine) -> ResultLine {
        line.int("obp_windows", self.windows).int("obp_windows_over", self.windows_over)
    }
}

/// A store's change buffer drains, cumulative since it was opened (Ferrite's: each drain
/// moves the buffered puts of one leaf into it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrainCounters {
    pub drains: u64,
    /// Buffered entries the drains moved into their leaves.
    pub entries: u64,
}

impl DrainCounters {
    /// The counts between `earlier` and `self`.
    pub fn since(self, earlier: DrainCounters) -> DrainCounters {
        DrainCounters {
            drains: self.drains.saturating_sub(earlier.drains),
            entries: self.entries.saturating_sub(earlier.entries),
        }
    }
}

/// Where a store's workers spent their time, summed over them, in nanoseconds, cumulative
/// since the store was opened (Ferrite's `WorkerStats`: polling tasks, evicting, submitting
/// I/O, reaping completions, waiting with nothing to do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerTimes {
    pub task: u64,
    pub evict: u64,
    pub submit: u64,
    pub complete: u64,
    pub idle: u64,
}

impl WorkerTimes {
    /// The sums over `stats`, now.
    pub fn of(stats: &[std::sync::Arc<::ferrite::sched::WorkerStats>]) -> WorkerTimes {
        use std::sync::atomic::Ordering::Relaxed;
        let mut t = WorkerTimes::default();
        for s in stats {
            t.task += s.task_ns.load(Relaxed);
            t.evict += s.evict_ns.load(Relaxed);
            t.submit += s.submit_ns.load(Relaxed);
            t.complete += s.complete_ns.load(Relaxed);
            t.idle += s.idle_ns_now();
        }
        t
    }

    /// The times between `earlier` and `self`.
    pub fn since(self, earlier: WorkerTimes) -> WorkerTimes {
        WorkerTimes {
            task: self.task.saturating_sub(earlier.task),
            evict: self.evict.saturating_sub(earlier.evict),
            submit: self.submit.saturating_sub(earlier.submit),
            complete: self.complete.saturating_sub(earlier.complete),
            idle: self.idle.saturating_sub(earlier.idle),
        }
    }

    /// All of it, idle included.
    pub fn total(&self) -> u64 {
        self.task + self.evict + self.submit + self.complete + self.idle
    }
}

/// What a store holds of the data in its own memory, in bytes (`KvStore::memory`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreMemory {
    /// Its cache of pages or blocks: Ferrite's buffer pool (all of it: its frames are
    /// allocated when the database opens, and hold its dirty pages too), RocksDB's block cache
    /// usage.
    pub cache: u64,
    /// Recent writes held beside the cache: Ferrite's change buffer (its budget taken from
    /// the pool's memory), RocksDB's memtables, active and immutable.
    pub write_buffers: u64,
}

impl StoreMemory {
    pub fn total(&self) -> u64 {
        self.cache + self.write_buffers
    }

    /// The larger of two samples, by their total.
    pub fn peak(a: Option<StoreMemory>, b: Option<StoreMemory>) -> Option<StoreMemory> {
        match (a, b) {
            (Some(a), Some(b)) => Some(if b.total() > a.total() { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

/// An ordered key-value store as a workload uses it, shared by all worker threads.
pub trait KvStore: Sync {
    /// Short name for result lines (`store=ferrite`).
    fn name(&self) -> &'static str;

    /// Inserts `key` with `value`, or overwrites its value.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError>;

    /// Copies the value of `key` into `out` (replacing what it held); returns whether the key
    /// was found (`out` is then unspecified when it was not).
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, StoreError>;

    /// Visits up to `limit` entries with keys `>= start` in key order; returns how many.
    fn scan(
        &self,
        start: &[u8],
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize, StoreError>;

    /// Writes several entries, as one batch where the store has them (loads use it).
    fn put_batch(&self, entries: &[(&[u8], &[u8])]) -> Result<(), StoreError> {
        entries.iter().try_for_each(|(key, value)| self.put(key, value))
    }

    /// Finishes the store's background work (writes every page back; RocksDB also compacts
    /// its whole key range), so that a measurement starts from a settled store instead of
    /// paying for what came before it. Runs before every measured run, outside it.
    fn settle(&self) -> Result<(), StoreError> {
        self.flush()
    }

    /// Every option the store was opened with, for the report.
    fn describe(&self) -> String {
        String::new()
    }

    /// Writes everything buffered back to the device, so that measuring starts from a
    /// clean cache rather than paying for the load's writes.
    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Device and cache counters so far, if the store keeps them.
    fn io_counters(&self) -> Option<IoCounters> {
        None
    }

    /// Write-ahead log counters so far, if the store has a log and counts them.
    fn log_counters(&self) -> Option<LogCounters> {
        None
    }

    /// Change buffer drains so far, if the store has a change buffer.
    fn drain_counters(&self) -> Option<DrainCounters> {
        None
    }

    /// Its second cache tier's counters so far, if it has one.
    fn tier_counters(&self) -> Option<TierCounters> {
        None
    }

    /// Its worker threads' time so far, if it runs its own workers and counts it.
    fn worker_times(&self) -> Option<WorkerTimes> {
        None
    }

    /// What it holds in memory now, if it says.
    fn memory(&self) -> Option<StoreMemory> {
        None
    }
}

#[cfg(test)]
pub(crate) mod mem {
    //! An in-memory store for testing workloads, with an injectable fault.

    use super::{IoCounters, KvStore, StoreError};
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::RwLock;

    #[derive(Debug, Default)]
    pub struct MemStore {
        map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
        gets: AtomicU64,
        /// Each get of this key reads a flipped byte.
        pub corrupt_key: Option<Vec<u8>>,
        /// Each get of this key fails.
        pub failing_key: Option<Vec<u8>>,
    }

    impl MemStore {
        pub fn len(&self) -> usize {
            self.map.read().unwrap().len()
        }
        pub fn remove(&self, key: &[u8]) {
            self.map.write().unwrap().remove(key);
        }
    }

    impl KvStore for MemStore {
        fn name(&self) -> &'static str {
            "memory"
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
            self.map.write().unwrap().insert(key.to_vec(), value.to_vec());
            Ok(())
        }
        fn scan(
            &self,
            start: &[u8],
            limit: usize,
            visit: &mut dyn FnMut(&[u8], &[u8]),
        ) -> Result<usize, StoreError> {
            let map = self.map.read().unwrap();
            let mut n = 0;
            for (key, value) in map.range(start.to_vec()..).take(limit) {
                visit(key, value);
                n += 1;
            }
            Ok(n)
        }
        fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, StoreError> {
            self.gets.fetch_add(1, Ordering::Relaxed);
            if self.failing_key.as_deref() == Some(key) {
                return Err("injected failure".into());
            }
            let map = self.map.read().unwrap();
            let Some(value) = map.get(key) else { return Ok(false) };
            out.clear();
            out.extend_from_slice(value);
            if self.corrupt_key.as_deref() == Some(key) {
                out[100] ^= 0x40;
            }
            Ok(true)
        }
        /// Pretends every tenth get reads the device (and evicts a page).
        fn io_counters(&self) -> Option<IoCounters> {
            let reads = self.gets.load(Ordering::Relaxed) / 10;
            Some(IoCounters { reads, writes: 0, evictions: reads })
        }
    }
}
