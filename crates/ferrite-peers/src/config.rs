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
