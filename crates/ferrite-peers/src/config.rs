//! What a benchmark asks of a peer engine; each engine's `open` documents how it maps these to
//! its own options.

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
        }
    }
}

/// What an engine holds of the data in its own memory now (`Peer::memory`), in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryUse {
    /// Its cache of data pages or blocks (RocksDB: `rocksdb.block-cache-usage`).
    pub cache: u64,
    /// Recent writes held beside the cache (RocksDB: its memtables, active and immutable,
    /// `rocksdb.size-all-mem-tables`).
    pub write_buffers: u64,
}
