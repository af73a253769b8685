//! Ferrite as a store: a tree of a database behind `KvStore` (`FerriteTree`: the blocking
//! API, for loads, `--direct-api` and the lookup benchmark), and the database and tree the
//! task runs use (`FerriteTasks`: operations through `Tree::*_async` on Ferrite's own workers,
//! so that a miss is a read queued on its worker while the other tasks go on, and a commit
//! waiting for its sync lets them go on too).
//!
//! Durability: `fill-sync` opens the database with `Durability::Sync` (a put returns once it
//! is durable); every other workload, and every load, with `Durability::None`, as the peers
//! run with their logs off.

use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use ferrite::{Db, Durability, Options, Tree};

use super::{
    DrainCounters, IoCounters, KvStore, LogCounters, OpenStore, StoreError, StoreMemory,
    TierCounters, WorkerTimes,
};
use crate::error::BenchError;
use crate::workloads::run::{RunConfig, TierConfig};

const TREE: &str = "bench";

/// A Ferrite database and its benchmark tree, owned.
pub type FerriteStore = FerriteTree<Arc<Db>>;

/// The database and tree a run's tasks work on.
#[derive(Debug, Clone)]
pub struct FerriteTasks {
    pub db: Arc<Db>,
    pub tree: Tree,
}

/// Opens Ferrite in `dir` for `config`: the pool is the run's cache, the workers and their
/// depth as asked, durable commits for `fill-sync` only.
pub fn open_ferrite(config: &RunConfig, dir: &Path) -> Result<OpenStore, BenchError> {
    let options = ferrite_options(config);
    let durability = options.durability;
    let db = Arc::new(Db::open(dir, options)?);
    let tree = db.tree(TREE)?;
    let store = FerriteStore::new(Arc::clone(&db), tree.clone()).with_durability(durability);
    if config.tasks_mode() {
        Ok(OpenStore::with_tasks(Box::new(store), FerriteTasks { db, tree }))
    } else {
        Ok(OpenStore::threads(Box::new(store)))
    }
}

/// The options Ferrite opens with for `config`: the pool is the run's cache, the workers and
/// their depth as asked, durable commits (`Durability::Sync`) for `fill-sync` only.
pub fn ferrite_options(config: &RunConfig) -> Options {
    let durability = if config.workload.durable() { Durability::Sync } else { Durability::None };
    let tasks_per_worker = config.task_count().div_ceil(config.workers.max(1));
    Options {
        pool_bytes: config.cache_mib << 20,
        direct_io: config.direct_io,
        create_if_missing: true,
        workers: if config.tasks_mode() { config.workers } else { 0 },
        // At least 2: a worker writes the log with a write linked to its sync, two entries
        // of its io_uring, which a ring of one cannot take (the worker panics on it).
        io_depth: tasks_per_worker.clamp(2, 4096),
        durability,
        change_buffer_bytes: config.change_buffer_mib.map(|mib| mib << 20),
        tier: config.tier.as_ref().map(TierConfig::options),
        ..Options::default()
    }
}

/// A tree of a Ferrite database, counting device reads from its buffer pool. `D` holds the
/// database: a borrow (`&Db`, the lookup benchmark) or a share (`Arc<Db>`, the comparison
/// workloads, which own their store).
#[derive(Debug)]
pub struct FerriteTree<D: Deref<Target = Db>> {
    db: D,
    tree: Tree,
    /// What the database was opened with, for `describe` (the `Db` does not say).
    durability: Option<Durability>,
}

impl<D: Deref<Target = Db>> FerriteTree<D> {
    pub fn new(db: D, tree: Tree) -> Self {
        FerriteTree { db, tree, durability: None }
    }

    /// Names the durability the database was opened with in `describe`.
    pub fn with_durability(self, durability: Durability) -> Self {
        FerriteTree { durability: Some(durability), ..self }
    }
}

impl<D: Deref<Target = Db> + Sync> KvStore for FerriteTree<D> {
    fn name(&self) -> &'static str {
        "ferrite"
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        Ok(self.tree.put(key, value)?)
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, StoreError> {
        let found = self.tree.get_with(key, |value| {
            out.clear();
            out.extend_from_slice(value);
        })?;
        Ok(found.is_some())
    }

    fn scan(
        &self,
        start: &[u8],
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize, StoreError> {
        let mut visited = 0;
        for entry in self.tree.range(start..).take(limit) {
            let (key, value) = entry?;
            visit(&key, &value);
            visited += 1;
        }
        Ok(visited)
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(self.db.pool().flush_all()?)
    }

    fn io_counters(&self) -> Option<IoCounters> {
        let stats = self.db.pool().stats();
        Some(IoCounters { reads: stats.reads, writes: stats.writes, evictions: stats.evictions })
    }

    fn log_counters(&self) -> Option<LogCounters> {
        log_counters_of(&self.db)
    }

    fn drain_counters(&self) -> Option<DrainCounters> {
        let (drains, entries) = self.db.change_buffer_drains();
        (self.db.change_buffer_budget() > 0).then_some(DrainCounters { drains, entries })
    }

    fn tier_counters(&self) -> Option<TierCounters> {
        tier_counters_of(&self.db)
    }

    fn worker_times(&self) -> Option<WorkerTimes> {
        let stats = self.db.worker_stats();
        (!stats.is_empty()).then(|| WorkerTimes::of(&stats))
    }

    fn memory(&self) -> Option<StoreMemory> {
        Some(StoreMemory {
            // The frames the change buffer borrowed are its memory, not the cache's.
            cache: (self.db.pool().pool_pages() - self.db.pool().retired_frames()) * 4096,
            write_buffers: self.db.change_buffer().1,
        })
    }

    fn describe(&self) -> String {
        let workers = self.db.worker_count();
        let engine = self.db.engine().map_or("none".to_owned(), |e| e.name().to_owned());
        let durability = match self.durability {
            Some(Durability::Sync) => "durability=Sync (a write returns once durable)".to_owned(),
            Some(Durability::None) => "durability=None (writes not synced)".to_owned(),
            Some(other) => format!("durability={other:?}"),
            None => "durability not given".to_owned(),
        };
        format!(
            "ferrite: buffer pool {} MiB of 4 KiB frames, of which a change buffer (puts into \
             leaves not in memory) borrows up to {} MiB once puts need it, O_DIRECT unless \
             --no-direct, B+tree of 4 KiB nodes, {workers} workers ({engine}), {durability}",
            (self.db.pool().pool_pages() * 4096) >> 20,
            self.db.change_buffer_budget() >> 20
        )
    }
}

/// `db`'s second cache tier's counters, if it has one.
/// The counters of `db`'s log (`None`: opened read-only, no log).
pub fn log_counters_of(db: &Db) -> Option<LogCounters> {
    use std::sync::atomic::Ordering::Relaxed;
    let log = db.log()?;
    let c = &log.counters;
    Some(LogCounters {
        writes: c.flushes.load(Relaxed),
        records: c.records.load(Relaxed),
        bytes: c.bytes_written.load(Relaxed),
        flight_ns: c.flight_ns.load(Relaxed),
        appended: log.tail(),
        images: c.images.load(Relaxed),
        image_bytes: c.image_bytes.load(Relaxed),
        checkpoints: c.checkpoints.load(Relaxed),
    })
}

pub fn tier_counters_of(db: &Db) -> Option<TierCounters> {
    let t = db.pool().stats().tier?;
    Some(TierCounters {
        lookups: t.lookups,
        hits: t.hits,
        inserts: t.inserts,
        invalidations: t.invalidations,
        evictions: t.evictions,
        bytes_written: t.bytes_written,
        refused: t.refused,
        filtered: t.filtered,
        windows: t.windows,
        windows_over: t.windows_over,
        window_obp: t.obp,
        peak_window_obp: 0.0,
    })
}

/// How often `options` checkpoint, for the store's description: a set interval, or the
/// engine's rule (`Options::checkpoint_interval_for`).
pub fn checkpoint_description(options: &ferrite::Options) -> String {
    match options.checkpoint_log_bytes {
        Some(bytes) => format!("checkpoint_log_bytes={bytes} ({} MiB)", bytes >> 20),
        None => format!(
            "checkpoint_log_bytes=None (a checkpoint every max(pool, 2 x the data's pages) \
             of log, between {} MiB and {} MiB: {} MiB while the data is under half the pool)",
            ferrite::MIN_AUTO_CHECKPOINT_BYTES >> 20,
            ferrite::MAX_AUTO_CHECKPOINT_BYTES >> 20,
            options.checkpoint_interval() >> 20
        ),
    }
}

#[cfg(test)]
mod tests {
    /// The description names a set interval, or the rule and its least value by default.
    #[test]
    fn the_checkpoint_interval_is_described_as_set_or_as_the_rule() {
        let set = ferrite::Options { checkpoint_log_bytes: Some(64 << 20), ..Default::default() };
        assert_eq!(super::checkpoint_description(&set), "checkpoint_log_bytes=67108864 (64 MiB)");
        let auto = ferrite::Options { pool_bytes: 40 << 20, ..Default::default() };
        let text = super::checkpoint_description(&auto);
        assert!(text.contains("max(pool, 2 x the data's pages)"), "{text}");
        assert!(text.contains("between 256 MiB and 1024 MiB: 256 MiB while"), "{text}");
    }

    use super::*;
    use crate::stores::conformance::check_store;
    use crate::stores::{open_store, StoreKind};
    use crate::workloads::run::run;
    use crate::workloads::ycsb::{Distribution, Workload};
    use std::time::{Duration, Instant};
    use tempfile::TempDir;

    #[test]
    fn the_change_buffer_option_reaches_the_engine() {
        let mut config = RunConfig::new(Workload::Ycsb('c'), StoreKind::Ferrite);
        assert_eq!(ferrite_options(&config).change_buffer_bytes, None);
        config.change_buffer_mib = Some(8);
        assert_eq!(ferrite_options(&config).change_buffer_bytes, Some(8 << 20));
        config.change_buffer_mib = Some(0);
        let options = ferrite_options(&config);
        assert_eq!(options.pool_pages(), (64 << 20) / 4096, "0: every MiB a frame");
    }

    fn tiny(workload: Workload, dir: &TempDir) -> RunConfig {
        RunConfig {
            dir: dir.path().join("bench-ferrite"),
            records: 3000,
            cache_mib: 1,
            seconds: 0.3,
            threads: 3,
            workers: 2,
            tasks: 8,
            ceiling: false,
            ..RunConfig::new(workload, StoreKind::Ferrite)
        }
    }

    #[test]
    fn ferrite_conforms_through_the_store_trait() {
        let dir = TempDir::new().unwrap();
        let config = RunConfig { direct_api: true, ..tiny(Workload::Lookup, &dir) };
        let store = open_ferrite(&config, dir.path()).unwrap();
        check_store(store.kv(), 7, 4000);
    }

    /// Every workload runs on Ferrite as tasks and through the blocking API, verifying every
    /// value it reads, and reports operations of the kinds its mix has.
    #[test]
    fn every_workload_runs_as_tasks_and_as_threads() {
        let dir = TempDir::new().unwrap();
        let json = dir.path().join("runs.jsonl");
        for workload in Workload::ALL {
            for direct_api in [false, true] {
                let config = RunConfig {
                    direct_api,
                    keep: true,
                    json: Some(json.clone()),
                    // (2 MiB, not tiny's 1: with 256 frames, ycsb-d through tasks once ran
                    // out of frames under the parallel test suite on 2 cores; see
                    // `BufferPool::reserve_frame`. This test is about the workloads.)
                    cache_mib: 2,
                    ..tiny(workload, &dir)
                };
                let report = run(&config, &open_store, false)
                    .unwrap_or_else(|e| panic!("{workload} (direct {direct_api}): {e}"));
                let c = report.counts;
                assert!(c.total() > 0, "{workload}: no operations");
                match workload {
                    Workload::Lookup | Workload::Ycsb('c') => assert_eq!(c.total(), c.reads),
                    Workload::FillSequential | Workload::FillRandom | Workload::FillSync => {
                        assert_eq!(c.total(), c.inserts)
                    }
                    Workload::Ycsb('e') => assert!(c.scans > 0 && c.scanned > 0),
                    Workload::Ycsb('f') => assert!(c.rmws > 0 && c.reads > 0),
                    _ => {}
                }
                let line = report.result_line();
                assert_eq!(line.get("store"), Some("ferrite"));
                assert_eq!(line.get("workload"), Some(workload.name().as_str()));
                assert!(line.get("ops_per_s").is_some());
            }
        }
        let lines = std::fs::read_to_string(&json).unwrap();
        assert_eq!(lines.lines().count(), 2 * Workload::ALL.len());
        assert!(lines.lines().all(|l| l.starts_with("{\"store\":\"ferrite\"") && l.ends_with('}')));
    }

    #[test]
    fn a_fill_inserts_every_key_once_and_stops() {
        let dir = TempDir::new().unwrap();
        for workload in [Workload::FillSequential, Workload::FillRandom] {
            let config = RunConfig { records: 2000, seconds: 60.0, ..tiny(workload, &dir) };
            let start = Instant::now();
            let report = run(&config, &open_store, false).unwrap();
            assert_eq!(report.counts.inserts, 2000, "{workload}");
            assert!(start.elapsed() < Duration::from_secs(30), "the fill ended when done");
        }
    }

    /// fill-sync: 4 committers as tasks and as threads insert every key of a small fill;
    /// the store, reopened, holds each with its value; the result line says what ran.
    #[test]
    fn a_sync_fill_commits_every_key_it_acknowledges() {
        let dir = TempDir::new().unwrap();
        let json = dir.path().join("runs.jsonl");
        for direct_api in [false, true] {
            let config = RunConfig {
                records: 1500,
                seconds: 60.0,
                committers: 4,
                direct_api,
                json: Some(json.clone()),
                ..tiny(Workload::FillSync, &dir)
            };
            assert_eq!(config.task_count(), 4);
            assert_eq!(config.thread_count(), 4);
            let start = Instant::now();
            let report = run(&config, &open_store, false).unwrap();
            assert!(start.elapsed() < Duration::from_secs(30), "the fill ended when done");
            assert_eq!(report.counts.inserts, 1500, "direct {direct_api}");
            assert_eq!(report.counts.total(), 1500);
            assert_eq!(report.verified.map(|(keys, _)| keys), Some(1500));
            assert!(report.store_description.contains("durability=Sync"));
            let line = report.result_line();
            assert_eq!(line.get("store"), Some("ferrite"));
            assert_eq!(line.get("workload"), Some("fill-sync"));
            assert_eq!(line.get("committers"), Some("4"));
            assert_eq!(line.get("sync"), Some("1"));
            assert_eq!(line.get("verified"), Some("1500"));
            assert_eq!(line.get("ops"), Some("1500"));
            for field in ["ops_per_s", "p50_us", "p99_us", "p999_us", "cpu_us_per_op"] {
                assert!(line.get(field).is_some(), "{field} in {line}");
            }
            let (mode, threads, tasks) =
                if direct_api { ("threads", "4", "0") } else { ("tasks", "0", "4") };
            assert_eq!(line.get("mode"), Some(mode));
            assert_eq!(line.get("threads"), Some(threads));
            assert_eq!(line.get("tasks"), Some(tasks));
            assert!(report.summary().contains("4 committers"));
            assert!(!config.data_dir().exists(), "a fill's directory is removed");
        }
        let lines = std::fs::read_to_string(&json).unwrap();
        assert_eq!(lines.lines().count(), 2);
        assert!(lines
            .lines()
            .all(|l| l.contains("\"workload\":\"fill-sync\"") && l.contains("\"committers\":4")));
    }

    /// A sync fill bounded by time rather than by its key count reads back exactly the keys
    /// it acknowledged.
    #[test]
    fn a_sync_fill_stopped_by_the_clock_verifies_what_it_acknowledged() {
        let dir = TempDir::new().unwrap();
        for direct_api in [false, true] {
            let config = RunConfig {
                records: 50_000_000,
                seconds: 0.2,
                committers: 4,
                direct_api,
                cache_mib: 8,
                ..tiny(Workload::FillSync, &dir)
            };
            let report = run(&config, &open_store, false).unwrap();
            let inserts = report.counts.inserts;
            assert!(inserts > 0 && inserts < config.records);
            assert_eq!(report.verified.map(|(keys, _)| keys), Some(inserts));
        }
    }

    /// Every other workload opens Ferrite without syncing (as the peers run without logs).
    #[test]
    fn only_the_sync_fill_syncs() {
        let dir = TempDir::new().unwrap();
        for workload in [Workload::FillRandom, Workload::Ycsb('a'), Workload::FillSync] {
            let config = tiny(workload, &dir);
            let store = open_ferrite(&config, &dir.path().join(workload.name())).unwrap();
            let described = store.kv().describe();
            let want = if workload.durable() { "durability=Sync" } else { "durability=None" };
            assert!(described.contains(want), "{workload}: {described}");
        }
    }

    #[test]
    fn open_loop_offers_about_the_rate_asked() {
        let dir = TempDir::new().unwrap();
        for direct_api in [false, true] {
            let config = RunConfig {
                rate: Some(2000.0),
                seconds: 1.0,
                direct_api,
                distribution: Distribution::Uniform,
                ..tiny(Workload::Ycsb('c'), &dir)
            };
            let report = run(&config, &open_store, false).unwrap();
            let rate = report.ops_per_s();
            assert!((1200.0..2800.0).contains(&rate), "direct {direct_api}: {rate} ops/s");
            assert_eq!(report.result_line().get("loop"), Some("open"));
        }
    }
}
