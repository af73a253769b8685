//! What a TPC-C run needs of the store it measures beyond `TpccStore` (`Engine`): how the
//! load is settled, where the terminals run, and what the store counts. `run.rs` is written
//! once over it; Ferrite's side is here (`FerriteEngine`: terminals as tasks on its
//! workers, the pool's and the workers' counters), the peers' in `peer.rs` (terminals on
//! threads, their own counters from `Peer::stats`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ferrite::{Db, Durability, Options};
use ferrite_peers::PeerStats;

use super::report::Tally;
use super::run::TpccConfig;
use super::store::FerriteTpcc;
use crate::error::BenchError;
use crate::stores::ferrite::{checkpoint_description, log_counters_of};
use crate::stores::{LogCounters, WorkerTimes};

/// One terminal's loop, as a run hands it to an engine.
pub type TerminalFuture = Pin<Box<dyn Future<Output = Result<Tally, BenchError>> + Send>>;

/// A started terminal: waits for its end and gives its tally.
pub type Running = Box<dyn FnOnce() -> Result<Tally, BenchError> + Send>;

/// What the store counts of its own work, at one moment (a window is two of them).
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// The pool's page reads and writes (Ferrite).
    pub pool: Option<(u64, u64)>,
    /// The log's writes, page images and checkpoints (Ferrite).
    pub log: Option<LogCounters>,
    /// The workers' time by activity (Ferrite).
    pub workers: Option<WorkerTimes>,
    /// Per worker, nanoseconds spent running tasks (Ferrite; empty for the peers).
    pub task_ns: Vec<u64>,
    /// The pool's page reads per tree since open, `(tree, pages)` (Ferrite's
    /// `Db::reads_by_tree`; empty for the peers).
    pub reads_by_tree: Vec<(String, u64)>,
    /// The store's own counters under its own names (the peers': `Peer::stats`, RocksDB's
    /// tickers, WiredTiger's cache statistics); `None` for Ferrite, whose pool counts the
    /// pages it reads and writes (`pool`) but not its hits.
    pub store: Option<PeerStats>,
}

/// A store opened for a run.
pub trait Engine {
    type Store: super::store::TpccStore + Clone;

    fn store(&self) -> &Self::Store;

    /// Every option it was opened with, on one line.
    fn describe(&self) -> String;

    /// After the load: everything written is on disk, background work done.
    fn settle(&self) -> Result<(), BenchError>;

    /// The workers terminals are placed on, if it has any; `None`: each terminal gets a
    /// thread of its own.
    fn workers(&self) -> Option<usize>;

    /// Starts `terminal` (on `worker`, below `workers()`, where there are workers).
    fn start(&self, worker: usize, terminal: TerminalFuture) -> Result<Running, BenchError>;

    fn counters(&self) -> Counters;

    /// The pages its cache holds now per tree, `(tree, pages, dirty)`, most first (Ferrite's
    /// `Db::resident_by_tree`, a look at every page in the pool, so taken once, after the
    /// window); empty where the store does not say.
    fn resident_by_tree(&self) -> Vec<(String, u64, u64)> {
        Vec::new()
    }

    /// What opening the store had to do first (a recovery), in words; `None` if it does not
    /// say.
    fn recovery(&self) -> Option<String> {
        None
    }
}

/// Ferrite opened for a run: the database and its tables.
#[derive(Debug)]
pub struct FerriteEngine {
    db: Arc<Db>,
    store: FerriteTpcc,
    description: String,
}

impl FerriteEngine {
    /// Opens (making it if missing) the database in `config.dir`: a pool of `cache_mib`, the
    /// run's workers, the default I/O depth (reads in flight per worker: a transaction's
    /// prefetch puts up to a dozen in flight at once); commits `Durability::Sync` with
    /// `--sync`, else the database's `Durability::None`.
    pub fn open(config: &TpccConfig) -> Result<FerriteEngine, BenchError> {
        let options = Options {
            pool_bytes: config.cache_mib << 20,
            direct_io: config.direct_io,
            create_if_missing: true,
            workers: config.workers,
            durability: Durability::None,
            checkpoint_log_bytes: config.checkpoint_bytes,
            ..Options::default()
        };
        let description = format!(
            "ferrite: pool_bytes={} ({} MiB), workers={}, io_depth={}, direct_io={}, \
             {}, change buffer {} KiB of the pool (blind puts of transactions into leaves \
             out of memory: {} KiB of it), commits {}",
            options.pool_bytes,
            config.cache_mib,
            options.workers,
            options.io_depth,
            options.direct_io,
            checkpoint_description(&options),
            options.change_buffer_budget() >> 10,
            options.transaction_buffer_bytes() >> 10,
            match config.sync {
                true => "Durability::Sync",
                false => "Durability::None",
            }
        );
        let db = Arc::new(Db::open(&config.dir, options)?);
        let durability = config.sync.then_some(Durability::Sync);
        let store = FerriteTpcc::new(Arc::clone(&db), durability)
            .map_err(|e| BenchError::Content(format!("tpcc: {e}")))?;
        Ok(FerriteEngine { db, store, description })
    }
}

impl Engine for FerriteEngine {
    type Store = FerriteTpcc;

    fn store(&self) -> &FerriteTpcc {
        &self.store
    }

    fn describe(&self) -> String {
        self.description.clone()
    }

    fn settle(&self) -> Result<(), BenchError> {
        Ok(self.db.flush()?)
    }

    fn workers(&self) -> Option<usize> {
        Some(self.db.worker_count().max(1))
    }

    fn start(&self, worker: usize, terminal: TerminalFuture) -> Result<Running, BenchError> {
        let handle = self.db.spawn_on(worker, terminal)?;
        Ok(Box::new(move || handle.wait()))
    }

    fn recovery(&self) -> Option<String> {
        let r = self.db.recovery_report();
        Some(match r.closed_cleanly {
            true => "it had been closed cleanly".to_owned(),
            false => format!(
                "recovered: {} log records replayed, {} page changes applied, {} torn bytes cut, \
                 in {}",
                r.records,
                r.pages_applied,
                r.torn_bytes,
                crate::report::duration(r.duration.as_secs_f64())
            ),
        })
    }

    fn counters(&self) -> Counters {
        let pool = self.db.pool().stats();
        let stats = self.db.worker_stats();
        Counters {
            pool: Some((pool.reads, pool.writes)),
            log: log_counters_of(&self.db),
            workers: Some(WorkerTimes::of(&stats)),
            task_ns: stats.iter().map(|s| s.task_ns.load(Ordering::Relaxed)).collect(),
            // (A count for the summary: a failure to read the catalog shows as none.)
            reads_by_tree: self.db.reads_by_tree().unwrap_or_default(),
            store: None,
        }
    }

    fn resident_by_tree(&self) -> Vec<(String, u64, u64)> {
        // (A count for the summary: a failure to read the catalog shows as none.)
        let census = self.db.resident_by_tree().unwrap_or_default();
        census.into_iter().map(|tree| (tree.name, tree.pages, tree.dirty)).collect()
    }
}
