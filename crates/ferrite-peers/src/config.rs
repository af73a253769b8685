//! What a benchmark asks of a peer engine; each engine's `open` documents how it maps these to
//! its own options.

use std::path::PathBuf;

/// The settings shared by the three peers. Each engine applies what it supports and says what
/// it did in its `describe_config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConfig {
    /// Memory for the engine's own cache of data pages: RocksDB's block cache, WiredTiger's
    /// `cache_size` (at least 1 MiB). LMDB has none: it reads through the OS page cache.
    pub cache_bytes: u64,
    /// Read and write data files with `O_DIRECT` where the engine supports it (RocksDB,
    /// WiredTiger; not LMDB, which is memory-mapped).
    pub direct_io: bool,
    /// Write-ahead log on. Off for loads and read-only runs: then writes are durable only after
    /// `flush` (RocksDB, WiredTiger). LMDB has no log and ignores this.
    pub log: bool,
    /// Each write is durable when it returns (the log synced; LMDB: the commit synced). Needs
    /// `log` on RocksDB and WiredTiger.
    pub sync: bool,
    /// LMDB's map size: the most the database can ever hold (ignored by the others).
    pub map_bytes: u64,
    /// RocksDB only: values of at least this many bytes go to blob files (integrated
    /// BlobDB, key-value separation, with blob garbage collection); `None`: every value in
    /// the LSM tree.
    pub blob_min_bytes: Option<u64>,
    /// RocksDB only: a second cache tier under the block cache (WiredTiger and LMDB refuse
    /// one); `None`: the block cache alone.
    pub tier: Option<PeerTier>,
    /// Open for transactions (`begin`), and which kind: RocksDB as an
    /// `OptimisticTransactionDB` or a (pessimistic, locking) `TransactionDB`; WiredTiger's
    /// sessions are transactional anyway (either mode: snapshot isolation); LMDB refuses.
    /// `None`: `begin` fails on RocksDB.
    pub transactions: Option<TxnMode>,
    /// RocksDB only: its memtables are charged to the block cache (a `WriteBufferManager`
    /// with `cost_to_cache`), so block cache and memtables together stay within `cache_bytes`,
    /// as WiredTiger's cache holds its dirty pages; off, the memtables (64 MiB each, two and
    /// more) come on top of it. WiredTiger and LMDB ignore it.
    pub memtables_in_cache: bool,
}

/// How RocksDB's transactions meet each other (its wiki, "Transactions"): checked at the
/// commit, or by locks taken as the transaction goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnMode {
    /// `OptimisticTransactionDB`: no locks; the commit fails if a key written or read for
    /// update changed since the transaction began. The wiki's choice for few conflicts.
    Optimistic,
    /// `TransactionDB`: every key written or read for update is locked until the end, with
    /// deadlock detection and a lock timeout. The wiki's choice under heavy concurrency and
    /// many conflicts (TPC-C's district and warehouse rows).
    Pessimistic,
}

impl TxnMode {
    /// `optimistic` or `pessimistic`.
    pub fn name(self) -> &'static str {
        match self {
            TxnMode::Optimistic => "optimistic",
            TxnMode::Pessimistic => "pessimistic",
        }
    }
}

/// A second cache tier under RocksDB's block cache: blocks the block cache evicts (or reads)
/// are kept there, and a block cache miss looks there before reading the table file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerTier {
    pub kind: PeerTierKind,
    /// `Persistent`: the directory its files go in, made if missing. `Secondary`: unused (the
    /// secondary cache is in the process's memory).
    pub path: PathBuf,
    /// Its capacity.
    pub bytes: u64,
}

/// Which of RocksDB's second tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerTierKind {
    /// `LRUCacheOptions::secondary_cache`: a `CompressedSecondaryCache` in DRAM, holding
    /// blocks the block cache evicted (each from its second eviction on).
    Secondary,
    /// `BlockBasedTableOptions::persistent_cache`: `NewPersistentCache`, a block cache in files
    /// of `PeerTier::path`, holding every block read from a table file.
    Persistent,
}

impl PeerTierKind {
    /// `secondary` or `persistent`.
    pub fn name(self) -> &'static str {
        match self {
            PeerTierKind::Secondary => "secondary",
            PeerTierKind::Persistent => "persistent",
        }
    }

    pub fn from_name(name: &str) -> Option<PeerTierKind> {
        [PeerTierKind::Secondary, PeerTierKind::Persistent].into_iter().find(|k| k.name() == name)
    }
}

impl Default for PeerConfig {
    /// A small, safe default for tests and examples: 64 MiB cache, buffered I/O, log on, no
    /// per-write sync, 1 GiB LMDB map.
    fn default() -> Self {
        PeerConfig {
            cache_bytes: 64 << 20,
            direct_io: false,
            log: true,
            sync: false,
            map_bytes: 1 << 30,
            blob_min_bytes: None,
            tier: None,
            transactions: None,
            memtables_in_cache: false,
        }
    }
}

/// What an engine holds of the data in its own memory now (`Peer::memory`), in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryUse {
    /// Its cache of data pages or blocks (RocksDB: `rocksdb.block-cache-usage`, less what the
    /// memtables are charged there with `PeerConfig::memtables_in_cache`, so that `cache` +
    /// `write_buffers` counts each byte once).
    pub cache: u64,
    /// Recent writes held beside the cache (RocksDB: its memtables, active and immutable,
    /// `rocksdb.size-all-mem-tables`).
    pub write_buffers: u64,
}

/// What an engine's second cache tier did (`Peer::tier`), cumulative since it opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierUse {
    /// Block cache misses that looked in the tier.
    pub lookups: u64,
    /// Of those, found there.
    pub hits: u64,
    /// Blocks stored in it (the persistent cache: offered to its writer).
    pub inserts: u64,
    /// Blocks offered and not stored (the secondary cache keeps only a placeholder at a
    /// block's first eviction; the persistent cache's insert failed).
    pub refused: u64,
    /// Bytes of the blocks stored.
    pub bytes_written: u64,
}

/// Counters an engine keeps of its own work (`Peer::stats`), cumulative since it opened, so
/// that a benchmark can check the engine did what its configuration meant it to (a cache that
/// hits, no compaction storm): each under the engine's own name for it, as its documentation
/// spells it; and, where the engine counts them, the two ratios a reader checks first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerStats {
    /// (the engine's name for the counter, its value), in the engine's order.
    pub counters: Vec<(&'static str, u64)>,
    /// Lookups in the engine's cache, and how many of them missed.
    pub cache: Option<CacheLookups>,
    /// Blocks (pages) the engine brought into its cache from its files, and their bytes.
    pub fills: Option<CacheFills>,
}

/// Lookups in an engine's cache and, of those, misses (`PeerStats::cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLookups {
    pub lookups: u64,
    pub misses: u64,
    /// What is counted, from which of the engine's counters, in words.
    pub counted: &'static str,
}

/// Blocks (pages) brought into an engine's cache and their bytes (`PeerStats::fills`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheFills {
    pub blocks: u64,
    pub bytes: u64,
    /// What is counted, from which of the engine's counters, in words.
    pub counted: &'static str,
}

impl PeerStats {
    /// The counter named `name`, if the engine keeps it.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.counters.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
    }

    /// What grew since `earlier` (a snapshot of the same engine): each counter less its value
    /// then (a counter `earlier` lacks counts from 0; none goes below 0).
    pub fn since(&self, earlier: &PeerStats) -> PeerStats {
        PeerStats {
            counters: self
                .counters
                .iter()
                .map(|&(name, now)| (name, now.saturating_sub(earlier.get(name).unwrap_or(0))))
                .collect(),
            cache: self.cache.map(|now| {
                let then = earlier.cache.map_or((0, 0), |c| (c.lookups, c.misses));
                CacheLookups {
                    lookups: now.lookups.saturating_sub(then.0),
                    misses: now.misses.saturating_sub(then.1),
                    counted: now.counted,
                }
            }),
            fills: self.fills.map(|now| {
                let then = earlier.fills.map_or((0, 0), |f| (f.blocks, f.bytes));
                CacheFills {
                    blocks: now.blocks.saturating_sub(then.0),
                    bytes: now.bytes.saturating_sub(then.1),
                    counted: now.counted,
                }
            }),
        }
    }

    /// The share of cache lookups that hit, 1 − misses / lookups, within [0, 1] (an engine may
    /// count a miss its lookups do not: WiredTiger's reads into the cache by its own threads);
    /// `None` without lookups.
    pub fn cache_hit_ratio(&self) -> Option<f64> {
        let cache = self.cache.filter(|c| c.lookups > 0)?;
        Some((1.0 - cache.misses as f64 / cache.lookups as f64).clamp(0.0, 1.0))
    }

    /// Bytes per block (page) brought into the cache; `None` without any.
    pub fn bytes_per_fill(&self) -> Option<f64> {
        let fills = self.fills.filter(|f| f.blocks > 0)?;
        Some(fills.bytes as f64 / fills.blocks as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(hits: u64, misses: u64) -> PeerStats {
        PeerStats {
            counters: vec![("hit", hits), ("miss", misses)],
            cache: Some(CacheLookups { lookups: hits + misses, misses, counted: "test" }),
            fills: Some(CacheFills { blocks: misses, bytes: misses * 4096, counted: "test" }),
        }
    }

    #[test]
    fn a_window_is_the_growth_of_every_counter() {
        let window = stats(130, 40).since(&stats(100, 20));
        assert_eq!(
            (window.get("hit"), window.get("miss"), window.get("other")),
            (Some(30), Some(20), None)
        );
        assert_eq!(window.cache.map(|c| (c.lookups, c.misses)), Some((50, 20)));
        assert_eq!(window.cache_hit_ratio(), Some(0.6));
        assert_eq!(window.bytes_per_fill(), Some(4096.0));
        // A counter that went back (it cannot, but a reopened engine's would) stays at 0.
        assert_eq!(stats(1, 1).since(&stats(5, 5)).get("hit"), Some(0));
    }

    #[test]
    fn ratios_need_something_counted() {
        assert_eq!(stats(0, 0).cache_hit_ratio(), None);
        assert_eq!(stats(0, 0).bytes_per_fill(), None);
        assert_eq!(PeerStats::default().cache_hit_ratio(), None);
        // More misses than lookups (another thread's reads): clamped to 0.
        let odd = PeerStats {
            cache: Some(CacheLookups { lookups: 10, misses: 12, counted: "test" }),
            ..PeerStats::default()
        };
        assert_eq!(odd.cache_hit_ratio(), Some(0.0));
    }
}
