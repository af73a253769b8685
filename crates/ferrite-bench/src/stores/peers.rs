//! The peers behind `KvStore` (feature `peers`): RocksDB, WiredTiger and LMDB from
//! `ferrite-peers`, configured alike for the comparison:
//!
//! - the cache of every store is `--cache-mib` (Ferrite's pool, RocksDB's block cache,
//!   WiredTiger's cache); LMDB has none and reads through the OS page cache, which the runner
//!   caps by running LMDB in a memory cgroup of the cache's size plus the process's own
//!   needs (`memcap.rs`; where no cgroup can be made, its results say "NOT capped");
//! - O_DIRECT for data where the store supports it (RocksDB reads, flushes and compactions;
//!   WiredTiger data files), 4 KiB blocks/pages, RocksDB's bloom filters (10 bits per key);
//! - each store tuned as its own guide says for data larger than its cache: RocksDB with
//!   partitioned index and filters (4 KiB partitions, top levels pinned, index and filter
//!   blocks in the block cache's high-priority pool, every table file open), WiredTiger's
//!   sessions and cursors reused across operations, LMDB with `MDB_NORDAHEAD`. Each run's
//!   summary gives the KiB per device read and warns when a point workload read more than
//!   two 4 KiB blocks per device read, the sign of a store reading more than it needs;
//! - no write-ahead log on any store (Ferrite opens with `Durability::None`, the peers' logs
//!   are off) so that every store does the same work, except in `fill-sync`, the durability
//!   comparison: there every store syncs each commit before acknowledging it: RocksDB with
//!   its WAL on and `WriteOptions.sync`, WiredTiger with `log=(enabled=true)` and
//!   `transaction_sync=(enabled=true,method=fsync)`, LMDB without `MDB_NOSYNC`/
//!   `MDB_NOMETASYNC`, Ferrite with `Durability::Sync`.
//!
//! With `--tier` (RunConfig::tier), RocksDB gets a second cache tier under its block cache,
//! of the same size as Ferrite's: its secondary cache (`CompressedSecondaryCache`, in the
//! process's memory) or its persistent read cache (files in a directory, `--tier` used as
//! one: made for the run, and removed after it if it was not there), as `--rocksdb-tier`
//! says; its counters are the run's tier counters. WiredTiger and LMDB have no second tier
//! and refuse one.
//!
//! Before every measured run each store settles (`KvStore::settle`): pages written back,
//! RocksDB's memtable flushed and its key range compacted, so no run pays for the previous
//! run's (or the load's) background work. Every option each store was opened with is in its
//! `describe()`, printed with every run.

use std::path::{Path, PathBuf};

use ferrite_peers::{
    Lmdb, Peer, PeerConfig, PeerError, PeerTier, PeerTierKind, RocksDb, WiredTiger,
};

use super::{KvStore, OpenStore, StoreError, StoreKind, StoreMemory, TierCounters};
use crate::error::BenchError;
use crate::workloads::run::{RocksDbTier, RunConfig};

/// LMDB's map: the most it may ever hold (virtual: it costs nothing until used).
const LMDB_MAP_BYTES: u64 = 256 << 30;

/// A peer as a `KvStore`.
struct PeerStore {
    peer: Box<dyn Peer>,
    /// The tier directory made for it: removed after the peer closes (fields drop in order).
    _tier_dir: Option<MadeDir>,
}

/// A directory the bench made, removed with everything in it when dropped.
struct MadeDir(PathBuf);

impl Drop for MadeDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            eprintln!("warning: removing the tier directory {}: {e}", self.0.display());
        }
    }
}

fn boxed(e: PeerError) -> StoreError {
    Box::new(e)
}

impl KvStore for PeerStore {
    fn name(&self) -> &'static str {
        self.peer.name()
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.peer.put(key, value).map_err(boxed)
    }
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, StoreError> {
        self.peer.get(key, out).map_err(boxed)
    }
    fn scan(
        &self,
        start: &[u8],
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize, StoreError> {
        self.peer.scan(start, limit, visit).map_err(boxed)
    }
    fn put_batch(&self, entries: &[(&[u8], &[u8])]) -> Result<(), StoreError> {
        self.peer.put_batch(entries).map_err(boxed)
    }
    fn flush(&self) -> Result<(), StoreError> {
        self.peer.flush().map_err(boxed)
    }
    fn settle(&self) -> Result<(), StoreError> {
        self.peer.settle().map_err(boxed)
    }
    fn memory(&self) -> Option<StoreMemory> {
        let m = self.peer.memory()?;
        Some(StoreMemory { cache: m.cache, write_buffers: m.write_buffers })
    }
    fn describe(&self) -> String {
        // (For LMDB the runner adds whether its page cache was capped.)
        self.peer.describe_config()
    }
    /// RocksDB's tier: lookups, hits, blocks stored and their bytes, and blocks offered but
    /// kept only as a placeholder (`refused`). Not counted, so zero: blocks dropped as
    /// changed (`invalidations`: table files are immutable, a compaction's new blocks have
    /// new keys) and pushed out (`evictions`: RocksDB tells no one), so its `obp` counts
    /// inserts only.
    fn tier_counters(&self) -> Option<TierCounters> {
        let t = self.peer.tier()?;
        Some(TierCounters {
            lookups: t.lookups,
            hits: t.hits,
            inserts: t.inserts,
            bytes_written: t.bytes_written,
            refused: t.refused,
            ..TierCounters::default()
        })
    }
}

/// The peer options of a run: the log on and synced per commit for `fill-sync`, off for
/// every other workload; the run's tier, of `--rocksdb-tier`'s kind.
pub fn peer_config(config: &RunConfig) -> PeerConfig {
    let durable = config.workload.durable();
    PeerConfig {
        cache_bytes: config.cache_mib << 20,
        direct_io: config.direct_io,
        log: durable,
        sync: durable,
        map_bytes: LMDB_MAP_BYTES,
        blob_min_bytes: None,
        tier: config.tier.as_ref().map(|tier| PeerTier {
            kind: match tier.rocksdb {
                RocksDbTier::Secondary => PeerTierKind::Secondary,
                RocksDbTier::Persistent => PeerTierKind::Persistent,
            },
            path: tier.path.clone(),
            bytes: tier.mib << 20,
        }),
        transactions: None,
        memtables_in_cache: false,
    }
}

/// Opens peer `kind` in `dir` for a run.
pub fn open(kind: StoreKind, config: &RunConfig, dir: &Path) -> Result<OpenStore, BenchError> {
    let options = peer_config(config);
    if options.tier.is_some() && kind != StoreKind::RocksDb {
        return Err(BenchError::Config(format!(
            "--tier: {} has no second cache tier (ferrite and rocksdb have)",
            kind.name()
        )));
    }
    let made = match &options.tier {
        Some(tier) if tier.kind == PeerTierKind::Persistent => tier_dir(&tier.path)?,
        _ => None,
    };
    let err = |e: PeerError| BenchError::Store(Box::new(e));
    let peer: Box<dyn Peer> = match kind {
        StoreKind::RocksDb => Box::new(RocksDb::open(dir, &options).map_err(err)?),
        StoreKind::WiredTiger => Box::new(WiredTiger::open(dir, &options).map_err(err)?),
        StoreKind::Lmdb => Box::new(Lmdb::open(dir, &options).map_err(err)?),
        StoreKind::Ferrite => unreachable!("Ferrite is not a peer"),
    };
    Ok(OpenStore::threads(Box::new(PeerStore { peer, _tier_dir: made })))
}

/// The persistent cache's directory `path`, made if missing (then returned, to be removed
/// after the run); a file there is refused rather than replaced.
fn tier_dir(path: &Path) -> Result<Option<MadeDir>, BenchError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Ok(None),
        Ok(_) => Err(BenchError::Config(format!(
            "--tier {}: RocksDB's persistent cache needs a directory there, and it is a file \
             (remove it, or give another path)",
            path.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(path).map_err(|source| BenchError::Io {
                context: format!("creating the tier directory {}", path.display()),
                source,
            })?;
            Ok(Some(MadeDir(path.to_path_buf())))
        }
        Err(source) => {
            Err(BenchError::Io { context: format!("reading {}", path.display()), source })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::conformance::check_store;
    use crate::stores::open_store;
    use crate::workloads::run::run;
    use crate::workloads::ycsb::Workload;
    use tempfile::TempDir;

    /// Each peer passes the same conformance check as Ferrite, through the same trait.
    #[test]
    fn every_peer_conforms() {
        for kind in [StoreKind::RocksDb, StoreKind::WiredTiger, StoreKind::Lmdb] {
            let dir = TempDir::new().unwrap();
            let config = RunConfig { direct_io: false, ..RunConfig::new(Workload::Lookup, kind) };
            let store = open(kind, &config, dir.path()).unwrap();
            check_store(store.kv(), 11, 3000);
        }
    }

    /// fill-sync opens every peer with its log on and synced per commit; 4 committer
    /// threads insert every key of a small fill, and the reopened store holds each.
    #[test]
    fn a_sync_fill_runs_on_every_peer_with_its_log_synced() {
        for kind in [StoreKind::RocksDb, StoreKind::WiredTiger, StoreKind::Lmdb] {
            let dir = TempDir::new().unwrap();
            let config = RunConfig {
                dir: dir.path().join("bench-peer"),
                records: 400,
                seconds: 60.0,
                committers: 4,
                ceiling: false,
                direct_io: false,
                ..RunConfig::new(Workload::FillSync, kind)
            };
            let options = peer_config(&config);
            assert!(options.log && options.sync, "{}", kind.name());
            let report = run(&config, &open_store, false)
                .unwrap_or_else(|e| panic!("fill-sync on {}: {e}", kind.name()));
            assert_eq!(report.counts.inserts, 400, "{}", kind.name());
            assert_eq!(report.verified.map(|(keys, _)| keys), Some(400));
            let line = report.result_line();
            assert_eq!(line.get("workload"), Some("fill-sync"));
            assert_eq!((line.get("committers"), line.get("threads")), (Some("4"), Some("4")));
            let synced = match kind {
                StoreKind::RocksDb => "disableWAL=false, sync=true",
                StoreKind::WiredTiger => "transaction_sync=(enabled=true,method=fsync)",
                _ => "flags=MDB_NOTLS|MDB_NORDAHEAD,",
            };
            assert!(report.store_description.contains(synced), "{}", report.store_description);
        }
        let config = RunConfig::new(Workload::FillRandom, StoreKind::RocksDb);
        let options = peer_config(&config);
        assert!(!options.log && !options.sync, "other workloads run without the peers' logs");
    }

    /// `--tier` becomes RocksDB's tier of `--rocksdb-tier`'s kind and size; the persistent
    /// cache's directory is made for the store and removed after it; WiredTiger and LMDB
    /// refuse a tier, naming themselves.
    #[test]
    fn a_tier_goes_to_rocksdb_only() {
        use crate::workloads::run::TierConfig;
        let dir = TempDir::new().unwrap();
        let tier_dir = dir.path().join("tier");
        let tier = |rocksdb| TierConfig {
            path: tier_dir.clone(),
            mib: 100,
            latency_ns: 0,
            admission: ferrite::TierAdmission::DEFAULT,
            filter: ferrite::TierFilter::Frequency,
            medium: ferrite::TierMedium::Mapped,
            rocksdb,
        };
        for (kind, peer_kind) in [
            (RocksDbTier::Secondary, PeerTierKind::Secondary),
            (RocksDbTier::Persistent, PeerTierKind::Persistent),
        ] {
            let config = RunConfig {
                direct_io: false,
                tier: Some(tier(kind)),
                ..RunConfig::new(Workload::Lookup, StoreKind::RocksDb)
            };
            let expected = PeerTier { kind: peer_kind, path: tier_dir.clone(), bytes: 100 << 20 };
            assert_eq!(peer_config(&config).tier, Some(expected));
            let store = open(StoreKind::RocksDb, &config, &dir.path().join("db")).unwrap();
            assert_eq!(tier_dir.is_dir(), kind == RocksDbTier::Persistent);
            assert!(store.kv().tier_counters().is_some());
            drop(store);
            assert!(!tier_dir.exists());
        }
        for kind in [StoreKind::WiredTiger, StoreKind::Lmdb] {
            let config = RunConfig {
                tier: Some(tier(RocksDbTier::Secondary)),
                ..RunConfig::new(Workload::Lookup, kind)
            };
            let e = open(kind, &config, &dir.path().join(kind.name())).unwrap_err();
            assert!(e.to_string().contains(&format!("{} has no second cache tier", kind.name())));
        }
    }

    /// The workloads run on every peer and verify what they read.
    #[test]
    fn workloads_run_on_every_peer() {
        for kind in [StoreKind::RocksDb, StoreKind::WiredTiger, StoreKind::Lmdb] {
            let dir = TempDir::new().unwrap();
            for workload in
                [Workload::Lookup, Workload::Ycsb('a'), Workload::Ycsb('e'), Workload::FillRandom]
            {
                let config = RunConfig {
                    dir: dir.path().join("bench-peer"),
                    records: 3000,
                    cache_mib: 8,
                    seconds: 0.3,
                    threads: 2,
                    keep: true,
                    ceiling: false,
                    direct_io: false,
                    ..RunConfig::new(workload, kind)
                };
                let report = run(&config, &open_store, false)
                    .unwrap_or_else(|e| panic!("{workload} on {}: {e}", kind.name()));
                assert!(report.counts.total() > 0, "{workload} on {}", kind.name());
                assert_eq!(report.result_line().get("store"), Some(kind.name()));
            }
        }
    }
}
