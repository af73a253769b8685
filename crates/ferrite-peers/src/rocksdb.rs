//! RocksDB (the system's librocksdb, 7.8 on Debian 12) through its C API.

// Every method is a call into librocksdb through `crate::sys::rocksdb`.
#![allow(unsafe_code)]

use std::ffi::{c_char, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::sys::bytes;
use crate::sys::rocksdb::*;
use crate::{
    dir, CacheFills, CacheLookups, MemoryUse, PeerConfig, PeerError, PeerStats, PeerTier,
    PeerTierKind, TierUse, TxnMode,
};

const NAME: &str = "rocksdb";
const BLOCK_SIZE_BYTES: usize = 4096;
/// Size of the index and filter partitions (`metadata_block_size`): one 4 KiB read each, like
/// a data block.
const METADATA_BLOCK_BYTES: u64 = 4096;
const BLOOM_BITS_PER_KEY: f64 = 10.0;
/// The share of the block cache `NewLRUCache` reserves for high-priority entries (the index
/// and filter blocks here): its default in RocksDB 7.8 (`rocksdb/cache.h`), which
/// `rocksdb_cache_create_lru` uses and the C API cannot change. Printed, not set.
const HIGH_PRI_POOL_RATIO: f64 = 0.5;
const WRITE_BUFFER_BYTES: usize = 64 << 20;
/// With `memtables_in_cache`: the memtables' budget is the block cache's capacity divided by
/// this. RocksDB's guides name no ratio (its wiki's "Write Buffer Manager" only says that the
/// block cache's capacity then covers both), so this is ours: three quarters stay for blocks,
/// which reads need; the price on write-heavy runs (TPC-C) is memtables of an eighth of the
/// cache instead of 64 MiB, so more and smaller flushes and L0 files. The manager flushes the
/// active memtable when it passes 7/8 of the budget, or when everything passes the budget and
/// the active memtable holds half of it (`write_buffer_manager.h`).
const MEMTABLE_BUDGET_DIVISOR: usize = 4;
/// With `memtables_in_cache`: memtables per budget, `write_buffer_size` = budget / this, so an
/// active memtable and one being flushed fit in it; `max_write_buffer_number` is set to it
/// (RocksDB's default, 2), so the memtables do not outgrow the budget while flushes lag.
const MEMTABLES_PER_BUDGET: usize = 2;
const MEMTABLES_PER_BUDGET_I32: i32 = MEMTABLES_PER_BUDGET as i32;
/// RocksDB raises a smaller `write_buffer_size` to this (its sanitizing, 64 KiB): written out
/// so the printed size is the one in use.
const WRITE_BUFFER_MIN_BYTES: usize = 64 << 10;
const MAX_BACKGROUND_JOBS: i32 = 2;
/// Blob file size with BlobDB on (RocksDB's default, 256 MiB).
const BLOB_FILE_BYTES: u64 = 256 << 20;
/// Blob GC relocates blobs in the oldest quarter of blob files (RocksDB's default).
const BLOB_GC_AGE_CUTOFF: f64 = 0.25;
/// The persistent cache's `optimized_for_nvm`: its medium here is memory (a directory in
/// /dev/shm), not flash; on, RocksDB writes its files with direct I/O, 4 KiB at a time, 4
/// writes in flight (`NewPersistentCache` in RocksDB 7.8).
const PERSISTENT_CACHE_FOR_NVM: bool = true;
/// The persistent cache's file size, which `NewPersistentCache` leaves at its default
/// (`PersistentCacheConfig::cache_file_size`, in a header RocksDB does not install): it fills
/// one file at a time and evicts whole files, least recently used first. It also refuses a
/// capacity below one file, by an `assert` that aborts the process in Debian's build, so
/// `open` refuses that first.
const PERSISTENT_CACHE_FILE_BYTES: u64 = 100 << 20;
/// The tickers [`RocksDb::stats`] reads, by RocksDB's names (`TickersNameMap`,
/// `rocksdb/statistics.h`): block cache lookups that hit and missed, all blocks and by kind
/// (`hit` = `data.hit` + `index.hit` + `filter.hit`, the same for `miss`; blocks pinned outside
/// the cache, the top-level index and filter and L0's, are read without a lookup and counted in
/// neither), blocks added to the cache and their charge, and the bytes compactions read and
/// wrote and flushes wrote.
const TICKERS: [&CStr; 13] = [
    c"rocksdb.block.cache.hit",
    c"rocksdb.block.cache.miss",
    c"rocksdb.block.cache.data.hit",
    c"rocksdb.block.cache.data.miss",
    c"rocksdb.block.cache.index.hit",
    c"rocksdb.block.cache.index.miss",
    c"rocksdb.block.cache.filter.hit",
    c"rocksdb.block.cache.filter.miss",
    c"rocksdb.block.cache.add",
    c"rocksdb.block.cache.bytes.write",
    c"rocksdb.compact.read.bytes",
    c"rocksdb.compact.write.bytes",
    c"rocksdb.flush.write.bytes",
];

/// A RocksDB database: one column family, the options of [`RocksDb::open`].
#[derive(Debug)]
pub struct RocksDb {
    /// The database: ordinary reads and writes go through it, outside any transaction.
    /// With `transactions`, a handle on the transaction database `txn` (optimistic: its base
    /// database; pessimistic: the `TransactionDB` itself, whose writes lock their keys).
    db: NonNull<rocksdb_t>,
    /// With `transactions`: the transaction database and its transactions' options.
    txn: Option<TxnDb>,
    // Kept until after `rocksdb_close` (dropped after `Drop::drop` runs): the database holds
    // `shared_ptr`s to the cache and table factory, but keeping the handles costs nothing and
    // keeps the teardown order obvious.
    _options: Owned<rocksdb_options_t>,
    cache: Owned<rocksdb_cache_t>,
    /// With `memtables_in_cache`: the write buffer manager charging the memtables to `cache`.
    memtables: Option<Owned<frk_write_buffer_manager>>,
    /// The second tier's counters, when `open` was given one.
    tier: Option<Owned<frk_tier>>,
    /// The statistics the database counts its tickers in (`Options::statistics`).
    statistics: Owned<frk_statistics>,
    read: Owned<rocksdb_readoptions_t>,
    write: Owned<rocksdb_writeoptions_t>,
    description: String,
}

// SAFETY: a RocksDB `DB` is safe to use from many threads at once (RocksDB's documented
// contract for `DB` methods); the read/write option objects are only read after `open`, and the
// cache is internally synchronised. Nothing here is tied to the thread that opened it.
unsafe impl Send for RocksDb {}
// SAFETY: as for `Send`: every method takes `&self` and only calls thread-safe `DB` methods.
unsafe impl Sync for RocksDb {}

impl RocksDb {
    /// Opens (creating if missing) the database in `dir` as RocksDB's tuning guide advises for
    /// data much larger than its cache (wiki: "Partitioned Index Filters", "Block Cache",
    /// "Setup Options and Basic Tuning"):
    /// - block-based table, `block_size` 4096, an LRU block cache of `cache_bytes` with a
    ///   high-priority pool (`NewLRUCache`'s default `high_pri_pool_ratio`, 0.5 in 7.8);
    /// - full-key bloom filter, 10 bits per key (`rocksdb_filterpolicy_create_bloom_full`);
    /// - partitioned index and filters: `index_type` `kTwoLevelIndexSearch`,
    ///   `partition_filters`, `metadata_block_size` 4096, so a point read loads one 4 KiB
    ///   index partition and one filter partition, never a whole SST's index or filter;
    /// - `cache_index_and_filter_blocks` with `cache_index_and_filter_blocks_with_high_priority`
    ///   (the partitions are charged to the cache and evicted after the data blocks),
    ///   `pin_top_level_index_and_filter` (each SST's small top-level index stays in the
    ///   cache) and `pin_l0_filter_and_index_blocks_in_cache`;
    /// - `max_open_files` -1: every SST stays open, its top level pinned, none reopened;
    /// - `use_direct_reads` and `use_direct_io_for_flush_and_compaction` = `direct_io`;
    /// - `create_if_missing`, `write_buffer_size` 64 MiB, `max_background_jobs` 2, no compression,
    ///   `level_compaction_dynamic_level_bytes` on;
    /// - with `memtables_in_cache` (wiki: "Write Buffer Manager"): a `WriteBufferManager` of a
    ///   quarter of `cache_bytes` ([`MEMTABLE_BUDGET_DIVISOR`]) built with the block cache
    ///   (`cost_to_cache`, made by `csrc/rocksdb_memory.cc`), `write_buffer_size` half of that
    ///   budget, `max_write_buffer_number` 2 (with `transactions`, the memtable history kept for
    ///   conflict checks, `max_write_buffer_size_to_maintain`, the budget, as a transaction
    ///   database would default it): the memtables' memory, that history included, is charged
    ///   to the block cache as pinned dummy entries, and blocks are evicted to make room, so
    ///   both stay within `cache_bytes`;
    /// - write options: `disableWAL` = !`log`, `sync` = `sync` (RocksDB rejects sync without
    ///   the WAL, so that combination is refused here). Without the WAL, writes reach disk at
    ///   [`flush`](Self::flush), memtable switches, or close;
    /// - `statistics` = `CreateDBStatistics()` at `StatsLevel::kExceptHistogramOrTimers`:
    ///   tickers only (per-core counters, no histograms, no clock reads), read by
    ///   [`stats`](Self::stats); made by `csrc/rocksdb_stats.cc`, as the C API's
    ///   `rocksdb_options_enable_statistics` cannot set the level and its default also times
    ///   every call.
    ///
    /// With a `tier` (counted in [`tier`](Self::tier); made by `csrc/rocksdb_tier.cc`, as the
    /// C API has neither):
    /// - [`PeerTierKind::Secondary`]: the block cache (same capacity and pools) gets
    ///   `LRUCacheOptions::secondary_cache` = `NewCompressedSecondaryCache` of `tier.bytes`
    ///   with `compression_type` `kNoCompression` (RocksDB's default is LZ4, which trades CPU
    ///   for capacity; the benchmark's values are random bytes, which LZ4 cannot shrink, so it
    ///   would cost CPU on every insert and hit and save nothing), its other options RocksDB's
    ///   defaults; `lowest_used_cache_tier` stays `kNonVolatileBlockTier` (the default), so
    ///   every block cache miss looks there and blocks the block cache evicts go there (each
    ///   from its second eviction on: the first leaves a placeholder, RocksDB's admission);
    /// - [`PeerTierKind::Persistent`]: `BlockBasedTableOptions::persistent_cache` =
    ///   `NewPersistentCache(Env::Default(), tier.path, tier.bytes, no logger,
    ///   optimized_for_nvm = true)` (the directory made if missing): every block read from a
    ///   table file goes in, and every block cache miss looks there first. Its files are
    ///   100 MiB, filled one at a time and evicted whole (RocksDB's default, which its public
    ///   API cannot change), so it needs `tier.bytes` of at least 100 MiB, and holds between
    ///   `tier.bytes` less one file and `tier.bytes`.
    pub fn open(dir: &Path, config: &PeerConfig) -> Result<Self, PeerError> {
        if config.sync && !config.log {
            return Err(invalid("sync needs the write-ahead log (log = true)"));
        }
        let cache_bytes = usize::try_from(config.cache_bytes)
            .map_err(|_| invalid(format!("cache_bytes {} is too large", config.cache_bytes)))?;
        let path = dir::prepare(NAME, dir)?;

        let (cache, secondary) = block_cache(cache_bytes, config.tier.as_ref())?;
        let memtable_budget_bytes = cache_bytes / MEMTABLE_BUDGET_DIVISOR;
        let write_buffer_bytes = match config.memtables_in_cache {
            true => (memtable_budget_bytes / MEMTABLES_PER_BUDGET).max(WRITE_BUFFER_MIN_BYTES),
            false => WRITE_BUFFER_BYTES,
        };
        // SAFETY: (the whole block) each create function returns a fresh object we own (checked
        // non-null by `Owned::new`); setters only take those live objects. The filter policy's
        // ownership passes to the table options (`set_filter_policy` wraps it in a
        // `shared_ptr`), so it is not kept; the table options are copied into the options'
        // table factory, so they can be destroyed at the end of this block.
        let (options, persistent) = unsafe {
            let options = Owned::new(rocksdb_options_create(), rocksdb_options_destroy)?;
            let table = Owned::new(
                rocksdb_block_based_options_create(),
                rocksdb_block_based_options_destroy,
            )?;
            let persistent = match &config.tier {
                Some(tier) if tier.kind == PeerTierKind::Persistent => {
                    Some(set_persistent_cache(&table, tier)?)
                }
                _ => None,
            };
            rocksdb_block_based_options_set_block_size(table.ptr(), BLOCK_SIZE_BYTES);
            rocksdb_block_based_options_set_block_cache(table.ptr(), cache.ptr());
            let filter = rocksdb_filterpolicy_create_bloom_full(BLOOM_BITS_PER_KEY);
            if filter.is_null() {
                return Err(null_from("rocksdb_filterpolicy_create_bloom_full"));
            }
            rocksdb_block_based_options_set_filter_policy(table.ptr(), filter);
            rocksdb_block_based_options_set_index_type(table.ptr(), ROCKSDB_TWO_LEVEL_INDEX_SEARCH);
            rocksdb_block_based_options_set_partition_filters(table.ptr(), 1);
            rocksdb_block_based_options_set_metadata_block_size(table.ptr(), METADATA_BLOCK_BYTES);
            rocksdb_block_based_options_set_cache_index_and_filter_blocks(table.ptr(), 1);
            rocksdb_block_based_options_set_cache_index_and_filter_blocks_with_high_priority(
                table.ptr(),
                1,
            );
            rocksdb_block_based_options_set_pin_top_level_index_and_filter(table.ptr(), 1);
            rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(table.ptr(), 1);
            rocksdb_options_set_block_based_table_factory(options.ptr(), table.ptr());

            rocksdb_options_set_create_if_missing(options.ptr(), 1);
            rocksdb_options_set_max_open_files(options.ptr(), -1);
            rocksdb_options_set_use_direct_reads(options.ptr(), config.direct_io.into());
            rocksdb_options_set_use_direct_io_for_flush_and_compaction(
                options.ptr(),
                config.direct_io.into(),
            );
            rocksdb_options_set_write_buffer_size(options.ptr(), write_buffer_bytes);
            if config.memtables_in_cache {
                rocksdb_options_set_max_write_buffer_number(
                    options.ptr(),
                    MEMTABLES_PER_BUDGET_I32,
                );
                if config.transactions.is_some() {
                    // What a transaction database would default it to from the two setters
                    // above, written out: the history is charged to the cache like the rest.
                    rocksdb_options_set_max_write_buffer_size_to_maintain(
                        options.ptr(),
                        i64::try_from(memtable_budget_bytes).unwrap_or(i64::MAX),
                    );
                }
            }
            // Levels sized from the bottom up (RocksDB's recommended setting, the default from
            // 8.4): a full compaction (`settle`) leaves the data in the last level, with no
            // follow-up compactions to run during a measurement.
            rocksdb_options_set_level_compaction_dynamic_level_bytes(options.ptr(), 1);
            rocksdb_options_set_max_background_jobs(options.ptr(), MAX_BACKGROUND_JOBS);
            rocksdb_options_set_compression(options.ptr(), ROCKSDB_NO_COMPRESSION);
            if let Some(min) = config.blob_min_bytes {
                // Integrated BlobDB as its guide sets it for large values: separated into
                // blob files, their garbage collected by compactions.
                rocksdb_options_set_enable_blob_files(options.ptr(), 1);
                rocksdb_options_set_min_blob_size(options.ptr(), min);
                rocksdb_options_set_blob_file_size(options.ptr(), BLOB_FILE_BYTES);
                rocksdb_options_set_enable_blob_gc(options.ptr(), 1);
                rocksdb_options_set_blob_gc_age_cutoff(options.ptr(), BLOB_GC_AGE_CUTOFF);
            }
            (options, persistent)
        };
        // After the options' setters above: the shims check their copied layouts against them.
        let memtables = match config.memtables_in_cache {
            true => Some(set_write_buffer_manager(&options, &cache, memtable_budget_bytes)?),
            false => None,
        };
        let statistics = enable_ticker_statistics(&options)?;
        // SAFETY: fresh objects from their create functions; the setters take live objects.
        let (read, write) = unsafe {
            let read = Owned::new(rocksdb_readoptions_create(), rocksdb_readoptions_destroy)?;
            let write = Owned::new(rocksdb_writeoptions_create(), rocksdb_writeoptions_destroy)?;
            rocksdb_writeoptions_disable_WAL(write.ptr(), (!config.log).into());
            rocksdb_writeoptions_set_sync(write.ptr(), config.sync.into());
            (read, write)
        };

        let (db, txn) = match config.transactions {
            None => {
                let mut err = ptr::null_mut();
                // SAFETY: `options` is live, `path` NUL-terminated, `err` a null pointer to
                // fill in.
                let db = unsafe { rocksdb_open(options.ptr(), path.as_ptr(), &mut err) };
                check("rocksdb_open", err)?;
                (NonNull::new(db).ok_or_else(|| null_from("rocksdb_open"))?, None)
            }
            Some(TxnMode::Optimistic) => open_optimistic(&options, &path)?,
            Some(TxnMode::Pessimistic) => open_pessimistic(&options, &path)?,
        };

        let description = format!(
            "rocksdb: block-based table, block_size={BLOCK_SIZE_BYTES}, \
             block_cache=LRU {cache_bytes} B (high_pri_pool_ratio={HIGH_PRI_POOL_RATIO}, \
             the default), bloom filter {BLOOM_BITS_PER_KEY} bits/key (full), \
             index_type=kTwoLevelIndexSearch, partition_filters=true, \
             metadata_block_size={METADATA_BLOCK_BYTES}, cache_index_and_filter_blocks=true, \
             cache_index_and_filter_blocks_with_high_priority=true, \
             pin_top_level_index_and_filter=true, pin_l0_filter_and_index_blocks_in_cache=true, \
             max_open_files=-1, use_direct_reads={direct}, \
             use_direct_io_for_flush_and_compaction={direct}, create_if_missing=true, \
             write_buffer_size={write_buffer_bytes}{memtables}, \
             max_background_jobs={MAX_BACKGROUND_JOBS}, \
             level_compaction_dynamic_level_bytes=true, compression=none, disableWAL={no_wal}, \
             sync={sync}, statistics=CreateDBStatistics() at kExceptHistogramOrTimers (tickers \
             only){blob}{tier}{txn}",
            memtables = describe_memtables(config, cache_bytes, write_buffer_bytes),
            txn = match config.transactions {
                // `max_write_buffer_size_to_maintain`, the memtable history commits are
                // checked against, stays at what a transaction database defaults it to:
                // max_write_buffer_number x write_buffer_size (`advanced_options.h`).
                Some(TxnMode::Optimistic) => ", OptimisticTransactionDB (set_snapshot=true, \
                          max_write_buffer_size_to_maintain at its transaction default)"
                    .to_string(),
                Some(TxnMode::Pessimistic) => format!(
                    ", TransactionDB (pessimistic: TransactionDBOptions \
                     transaction_lock_timeout={LOCK_TIMEOUT_MS} ms, \
                     default_lock_timeout={LOCK_TIMEOUT_MS} ms, the rest the defaults; \
                     TransactionOptions set_snapshot=true, deadlock_detect=true, \
                     lock_timeout={LOCK_TIMEOUT_MS} ms; ordinary calls through the \
                     TransactionDB, its writes locking their keys)"
                ),
                None => String::new(),
            },
            blob = match config.blob_min_bytes {
                Some(min) => format!(
                    ", enable_blob_files=true, min_blob_size={min}, \
                     blob_file_size={BLOB_FILE_BYTES}, enable_blob_garbage_collection=true, \
                     blob_garbage_collection_age_cutoff={BLOB_GC_AGE_CUTOFF}, \
                     blob_compression_type=none"
                ),
                None => String::new(),
            },
            tier = config.tier.as_ref().map_or(String::new(), describe_tier),
            direct = config.direct_io,
            no_wal = !config.log,
            sync = config.sync,
        );
        let tier = secondary.or(persistent);
        Ok(RocksDb {
            db,
            txn,
            _options: options,
            cache,
            memtables,
            tier,
            statistics,
            read,
            write,
            description,
        })
    }

    /// "rocksdb".
    pub fn name(&self) -> &'static str {
        NAME
    }

    /// Copies the value of `key` into `out` (replacing its content); false if there is none.
    pub fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, PeerError> {
        let Some(slice) = self.get_pinned(key)? else { return Ok(false) };
        out.clear();
        out.extend_from_slice(slice.value());
        Ok(true)
    }

    /// Inserts or overwrites `key`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<(), PeerError> {
        let mut err = ptr::null_mut();
        // SAFETY: the database and write options are live; the slices outlive the call, which
        // copies them; `err` is a null pointer to fill in.
        unsafe {
            rocksdb_put(
                self.db.as_ptr(),
                self.write.ptr(),
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            );
        }
        check("rocksdb_put", err)
    }

    /// Inserts or overwrites every entry in one atomic `WriteBatch`.
    pub fn put_batch(&self, entries: &[(&[u8], &[u8])]) -> Result<(), PeerError> {
        // SAFETY: a fresh batch, owned and destroyed by `Owned`.
        let batch = unsafe { Owned::new(rocksdb_writebatch_create(), rocksdb_writebatch_destroy)? };
        for (key, value) in entries {
            // SAFETY: the batch is live; it copies the key and value.
            unsafe {
                rocksdb_writebatch_put(
                    batch.ptr(),
                    key.as_ptr().cast(),
                    key.len(),
                    value.as_ptr().cast(),
                    value.len(),
                );
            }
        }
        let mut err = ptr::null_mut();
        // SAFETY: database, write options and batch are live; `err` is a null pointer.
        unsafe { rocksdb_write(self.db.as_ptr(), self.write.ptr(), batch.ptr(), &mut err) };
        check("rocksdb_write", err)
    }

    /// Deletes `key`; true if it was there. RocksDB's delete does not say, so this reads the
    /// key first: the answer can be stale if another thread writes the same key meanwhile.
    pub fn delete(&self, key: &[u8]) -> Result<bool, PeerError> {
        let existed = self.get_pinned(key)?.is_some();
        let mut err = ptr::null_mut();
        // SAFETY: database and write options are live; the key outlives the call.
        unsafe {
            rocksdb_delete(
                self.db.as_ptr(),
                self.write.ptr(),
                key.as_ptr().cast(),
                key.len(),
                &mut err,
            );
        }
        check("rocksdb_delete", err)?;
        Ok(existed)
    }

    /// Visits up to `limit` entries with key >= `start`, in key order; returns how many.
    pub fn scan(
        &self,
        start: &[u8],
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize, PeerError> {
        // SAFETY: database and read options are live; the iterator is destroyed by `Owned`
        // (also if `visit` panics) before `self` can be dropped.
        let iter = unsafe {
            Owned::new(
                rocksdb_create_iterator(self.db.as_ptr(), self.read.ptr()),
                rocksdb_iter_destroy,
            )?
        };
        // SAFETY: live iterator; `seek` copies the key.
        unsafe { rocksdb_iter_seek(iter.ptr(), start.as_ptr().cast(), start.len()) };
        let mut visited = 0;
        // SAFETY: live iterator.
        while visited < limit && unsafe { rocksdb_iter_valid(iter.ptr()) } != 0 {
            let (mut key_len, mut value_len) = (0, 0);
            // SAFETY: the iterator is valid (checked above), so key and value point at
            // `key_len` / `value_len` bytes that stay put until the iterator moves, which is
            // after `visit` returns.
            unsafe {
                let key = rocksdb_iter_key(iter.ptr(), &mut key_len);
                let value = rocksdb_iter_value(iter.ptr(), &mut value_len);
                visit(bytes(key, key_len), bytes(value, value_len));
                rocksdb_iter_next(iter.ptr());
            }
            visited += 1;
        }
        let mut err = ptr::null_mut();
        // SAFETY: live iterator; `err` is a null pointer to fill in.
        unsafe { rocksdb_iter_get_error(iter.ptr(), &mut err) };
        check("rocksdb_iter_next", err)?;
        Ok(visited)
    }

    /// Flushes the memtable to an SST file and waits for it: everything written is on disk,
    /// with or without the WAL.
    pub fn flush(&self) -> Result<(), PeerError> {
        // SAFETY: fresh flush options, owned by `Owned`.
        let options =
            unsafe { Owned::new(rocksdb_flushoptions_create(), rocksdb_flushoptions_destroy)? };
        let mut err = ptr::null_mut();
        // SAFETY: database and flush options are live; `err` is a null pointer.
        unsafe {
            rocksdb_flushoptions_set_wait(options.ptr(), 1);
            rocksdb_flush(self.db.as_ptr(), options.ptr(), &mut err);
        }
        check("rocksdb_flush", err)
    }

    /// Flushes, then compacts the whole key range and waits for it: the LSM tree settled, no
    /// compaction debt left for a measurement to pay (after a load, or between runs).
    pub fn settle(&self) -> Result<(), PeerError> {
        self.flush()?;
        // SAFETY: a live database; null bounds mean the whole key range.
        unsafe { rocksdb_compact_range(self.db.as_ptr(), ptr::null(), 0, ptr::null(), 0) };
        Ok(())
    }

    /// The block cache's usage and the memtables' size now (`None` if RocksDB does not answer);
    /// memtables charged to the block cache (`memtables_in_cache`) are counted in
    /// `write_buffers` only.
    pub fn memory(&self) -> Option<MemoryUse> {
        let property = |name: &CStr| {
            let mut value = 0u64;
            // SAFETY: a live database, a NUL-terminated name, and a u64 to write to.
            let rc = unsafe { rocksdb_property_int(self.db.as_ptr(), name.as_ptr(), &mut value) };
            (rc == 0).then_some(value)
        };
        Some(MemoryUse {
            cache: property(c"rocksdb.block-cache-usage")?
                .saturating_sub(self.memtables_charge().unwrap_or(0)),
            write_buffers: property(c"rocksdb.size-all-mem-tables")?,
        })
    }

    /// Everything the block cache holds now: blocks, and with `memtables_in_cache` the
    /// memtables' charge ([`memtables_charge`](Self::memtables_charge)).
    pub fn block_cache_usage(&self) -> u64 {
        // SAFETY: a live cache, owned by `self`.
        unsafe { rocksdb_cache_get_usage(self.cache.ptr()) as u64 }
    }

    /// With `memtables_in_cache`: what the memtables take of the block cache now (the write
    /// buffer manager's dummy entries, 256 KiB each); `None` without.
    pub fn memtables_charge(&self) -> Option<u64> {
        let memtables = self.memtables.as_ref()?;
        // SAFETY: a live manager handle, destroyed only when `self` drops.
        Some(unsafe { frk_write_buffer_manager_cache_charge(memtables.ptr()) } as u64)
    }

    /// With `memtables_in_cache`: the memtables' memory as the write buffer manager counts it
    /// (their arenas' allocations, the history a transaction database keeps included until it
    /// is freed); `None` without.
    pub fn memtables_counted(&self) -> Option<u64> {
        let memtables = self.memtables.as_ref()?;
        // SAFETY: as in `memtables_charge`.
        Some(unsafe { frk_write_buffer_manager_memory_usage(memtables.ptr()) } as u64)
    }

    /// What the second cache tier did since `open`, if it has one.
    pub fn tier(&self) -> Option<TierUse> {
        let tier = self.tier.as_ref()?;
        let mut c = frk_tier_counters::default();
        // SAFETY: a live counters handle (destroyed only when `self` drops) and a struct of the
        // shim's layout (`frk_tier_counters`) to fill in.
        unsafe { frk_tier_counters_read(tier.ptr(), &mut c) };
        Some(TierUse {
            lookups: c.lookups,
            hits: c.hits,
            inserts: c.inserts,
            refused: c.refused,
            bytes_written: c.bytes_written,
        })
    }

    /// Its tickers ([`TICKERS`]) since `open`, under RocksDB's names; the cache's lookups are
    /// the block cache's hits + misses (data, index and filter blocks), its fills the blocks
    /// added to it after a miss and their charge (their size in memory, about the bytes read
    /// from the file for uncompressed blocks). Compactions read without filling the cache:
    /// their reads are in `rocksdb.compact.read.bytes` only.
    pub fn stats(&self) -> Result<PeerStats, PeerError> {
        let names: Vec<*const c_char> = TICKERS.iter().map(|n| n.as_ptr()).collect();
        let mut values = [0u64; TICKERS.len()];
        let mut err = ptr::null_mut();
        // SAFETY: a live statistics handle (destroyed only when `self` drops); `names` holds
        // `values.len()` NUL-terminated strings that outlive the call; `err` is a null pointer.
        unsafe {
            frk_statistics_tickers(
                self.statistics.ptr(),
                names.as_ptr(),
                values.as_mut_ptr(),
                values.len(),
                &mut err,
            )
        };
        check("frk_statistics_tickers", err)?;
        let counters: Vec<(&'static str, u64)> = TICKERS
            .iter()
            .zip(values)
            .map(|(name, value)| (name.to_str().expect("ASCII ticker names"), value))
            .collect();
        let [hits, misses, .., adds, add_bytes, _, _, _] = values;
        Ok(PeerStats {
            counters,
            cache: Some(CacheLookups {
                lookups: hits + misses,
                misses,
                counted: "block cache lookups (data, index and filter blocks): \
                          rocksdb.block.cache.hit + rocksdb.block.cache.miss",
            }),
            fills: Some(CacheFills {
                blocks: adds,
                bytes: add_bytes,
                counted: "blocks added to the block cache after a miss \
                          (rocksdb.block.cache.add) and their charge in memory \
                          (rocksdb.block.cache.bytes.write)",
            }),
        })
    }

    /// Every option `open` set, on one line.
    pub fn describe_config(&self) -> String {
        self.description.clone()
    }

    /// What its transactions guarantee, in words; `None` without `transactions`.
    pub fn isolation(&self) -> Option<&'static str> {
        match self.txn.as_ref()? {
            TxnDb::Optimistic { .. } => Some(ROCKSDB_OPTIMISTIC_ISOLATION),
            TxnDb::Pessimistic { .. } => Some(ROCKSDB_PESSIMISTIC_ISOLATION),
        }
    }

    /// The value of `key`, pinned in RocksDB's memory (no copy) until the slice is dropped.
    fn get_pinned(&self, key: &[u8]) -> Result<Option<PinnedSlice>, PeerError> {
        let mut err = ptr::null_mut();
        // SAFETY: database and read options are live; the key outlives the call.
        let slice = unsafe {
            rocksdb_get_pinned(
                self.db.as_ptr(),
                self.read.ptr(),
                key.as_ptr().cast(),
                key.len(),
                &mut err,
            )
        };
        check("rocksdb_get_pinned", err)?;
        Ok(NonNull::new(slice).map(PinnedSlice))
    }
}

impl Drop for RocksDb {
    fn drop(&mut self) {
        // SAFETY: `db` came from `rocksdb_open` (or is a handle on `txn`, freed before `txn`
        // is closed) and is closed once, here; no iterator, pinned slice or transaction
        // outlives the `&self` borrow that made it (a transaction holds an `Arc` of this).
        // Without the WAL, RocksDB flushes the memtables on close (`avoid_flush_during_shutdown`
        // is off).
        unsafe {
            match &self.txn {
                None => rocksdb_close(self.db.as_ptr()),
                Some(TxnDb::Optimistic { db, .. }) => {
                    rocksdb_optimistictransactiondb_close_base_db(self.db.as_ptr());
                    rocksdb_optimistictransactiondb_close(db.as_ptr());
                }
                Some(TxnDb::Pessimistic { db, .. }) => {
                    frk_db_handle_free(self.db.as_ptr());
                    rocksdb_transactiondb_close(db.as_ptr());
                }
            }
        }
    }
}

/// The transaction database behind [`RocksDb`] opened with `transactions`, and the options
/// each of its transactions begins with.
#[derive(Debug)]
enum TxnDb {
    Optimistic {
        db: NonNull<rocksdb_optimistictransactiondb_t>,
        options: Owned<rocksdb_optimistictransaction_options_t>,
    },
    Pessimistic {
        db: NonNull<rocksdb_transactiondb_t>,
        options: Owned<rocksdb_transaction_options_t>,
    },
}

/// How long a pessimistic transaction (or a write outside one) waits for a key's lock before
/// giving up with `TimedOut` (a conflict here): RocksDB's own default for both, written out
/// so the printed configuration says it. Deadlocks are detected at once, without waiting.
const LOCK_TIMEOUT_MS: i64 = 1000;

/// Opens `path` as an `OptimisticTransactionDB`; returns its base database's handle (the
/// ordinary calls) and the transaction database.
fn open_optimistic(
    options: &Owned<rocksdb_options_t>,
    path: &CStr,
) -> Result<(NonNull<rocksdb_t>, Option<TxnDb>), PeerError> {
    let mut err = ptr::null_mut();
    // SAFETY: `options` is live, `path` NUL-terminated, `err` a null pointer to fill in.
    let otxn =
        unsafe { rocksdb_optimistictransactiondb_open(options.ptr(), path.as_ptr(), &mut err) };
    check("rocksdb_optimistictransactiondb_open", err)?;
    let otxn =
        NonNull::new(otxn).ok_or_else(|| null_from("rocksdb_optimistictransactiondb_open"))?;
    // SAFETY: (the block) `otxn` is open; the base handle it returns is freed by `Drop`
    // before `otxn` is closed. The options object is fresh and owned.
    unsafe {
        let base = rocksdb_optimistictransactiondb_get_base_db(otxn.as_ptr());
        let txn_options = Owned::new(
            rocksdb_optimistictransaction_options_create(),
            rocksdb_optimistictransaction_options_destroy,
        );
        let (base, txn_options) = match (NonNull::new(base), txn_options) {
            (Some(base), Ok(txn_options)) => (base, txn_options),
            (base_handle, failed) => {
                if base_handle.is_some() {
                    rocksdb_optimistictransactiondb_close_base_db(base);
                }
                rocksdb_optimistictransactiondb_close(otxn.as_ptr());
                return Err(failed
                    .err()
                    .unwrap_or_else(|| null_from("rocksdb_optimistictransactiondb_get_base_db")));
            }
        };
        // Reads see the transaction's first moment; its keys are checked against it.
        rocksdb_optimistictransaction_options_set_set_snapshot(txn_options.ptr(), 1);
        Ok((base, Some(TxnDb::Optimistic { db: otxn, options: txn_options })))
    }
}

/// Opens `path` as a (pessimistic) `TransactionDB`; returns a handle on it for the ordinary
/// calls (`csrc/rocksdb_txn.cc`: the C API has no other way to compact it) and the
/// transaction database. Transactions take a snapshot at their start (`set_snapshot`), detect
/// deadlocks and wait at most [`LOCK_TIMEOUT_MS`] for a lock.
fn open_pessimistic(
    options: &Owned<rocksdb_options_t>,
    path: &CStr,
) -> Result<(NonNull<rocksdb_t>, Option<TxnDb>), PeerError> {
    // SAFETY: (the block) fresh option objects, owned; the setters take live objects. The
    // database copies its `TransactionDBOptions` at the open, so they are dropped after it.
    let (db_options, txn_options) = unsafe {
        let db_options = Owned::new(
            rocksdb_transactiondb_options_create(),
            rocksdb_transactiondb_options_destroy,
        )?;
        rocksdb_transactiondb_options_set_transaction_lock_timeout(
            db_options.ptr(),
            LOCK_TIMEOUT_MS,
        );
        rocksdb_transactiondb_options_set_default_lock_timeout(db_options.ptr(), LOCK_TIMEOUT_MS);
        let txn_options =
            Owned::new(rocksdb_transaction_options_create(), rocksdb_transaction_options_destroy)?;
        rocksdb_transaction_options_set_set_snapshot(txn_options.ptr(), 1);
        rocksdb_transaction_options_set_deadlock_detect(txn_options.ptr(), 1);
        rocksdb_transaction_options_set_lock_timeout(txn_options.ptr(), LOCK_TIMEOUT_MS);
        (db_options, txn_options)
    };
    let mut err = ptr::null_mut();
    // SAFETY: both option objects are live, `path` NUL-terminated, `err` a null pointer.
    let txn_db = unsafe {
        rocksdb_transactiondb_open(options.ptr(), db_options.ptr(), path.as_ptr(), &mut err)
    };
    check("rocksdb_transactiondb_open", err)?;
    let txn_db = NonNull::new(txn_db).ok_or_else(|| null_from("rocksdb_transactiondb_open"))?;
    // SAFETY: an open TransactionDB; the handle is freed by `Drop` before it is closed.
    let db = unsafe { frk_transactiondb_as_db(txn_db.as_ptr()) };
    let Some(db) = NonNull::new(db) else {
        // SAFETY: opened above, used by nothing else yet.
        unsafe { rocksdb_transactiondb_close(txn_db.as_ptr()) };
        return Err(null_from("frk_transactiondb_as_db"));
    };
    Ok((db, Some(TxnDb::Pessimistic { db: txn_db, options: txn_options })))
}

/// What RocksDB's optimistic transactions here guarantee, for a benchmark to print.
pub const ROCKSDB_OPTIMISTIC_ISOLATION: &str = "optimistic transactions \
    (OptimisticTransactionDB, set_snapshot): reads see the transaction's first moment; at the \
    commit, every key it wrote or read for update must not have changed since then, else the \
    commit fails (Busy); plain reads and range scans are not checked (no phantom protection)";

/// What RocksDB's pessimistic transactions here guarantee, for a benchmark to print.
pub const ROCKSDB_PESSIMISTIC_ISOLATION: &str = "pessimistic transactions (TransactionDB, \
    set_snapshot, deadlock detection, 1 s lock timeout): every key written or read for update \
    is locked until the commit and must not have changed since the transaction's first moment \
    (else Busy), so those keys are serialized; plain reads see that first moment unlocked; \
    range scans take no locks and are not checked (phantoms and write skew through scanned \
    ranges possible): snapshot isolation with locking writes, not fully serializable";

impl RocksDb {
    /// Begins a transaction (the database must have been opened with `transactions`); it
    /// keeps the database open while it lives.
    pub fn begin(self: &Arc<Self>) -> Result<RocksDbTxn, PeerError> {
        let (txn, call) = match &self.txn {
            None => return Err(invalid("transactions need PeerConfig::transactions")),
            // SAFETY: the database and option objects are live; a fresh transaction comes
            // back (no old one is reused).
            Some(TxnDb::Optimistic { db, options }) => unsafe {
                let txn = rocksdb_optimistictransaction_begin(
                    db.as_ptr(),
                    self.write.ptr(),
                    options.ptr(),
                    ptr::null_mut(),
                );
                (txn, "rocksdb_optimistictransaction_begin")
            },
            // SAFETY: as above.
            Some(TxnDb::Pessimistic { db, options }) => unsafe {
                let txn = rocksdb_transaction_begin(
                    db.as_ptr(),
                    self.write.ptr(),
                    options.ptr(),
                    ptr::null_mut(),
                );
                (txn, "rocksdb_transaction_begin")
            },
        };
        let txn = NonNull::new(txn).ok_or_else(|| null_from(call))?;
        // SAFETY: a fresh read options object, owned; the snapshot belongs to the transaction,
        // which outlives the read options (they are dropped first, see `RocksDbTxn`).
        let read = unsafe {
            let read = Owned::new(rocksdb_readoptions_create(), rocksdb_readoptions_destroy);
            let read = match read {
                Ok(read) => read,
                Err(e) => {
                    rocksdb_transaction_destroy(txn.as_ptr());
                    return Err(e);
                }
            };
            rocksdb_readoptions_set_snapshot(
                read.ptr(),
                rocksdb_transaction_get_snapshot(txn.as_ptr()),
            );
            read
        };
        Ok(RocksDbTxn { read, txn, _db: Arc::clone(self) })
    }
}

/// A RocksDB transaction: its writes stay in it until [`commit`](crate::PeerTxn::commit);
/// dropped uncommitted, it is rolled back.
#[derive(Debug)]
pub struct RocksDbTxn {
    /// Read options set to the transaction's snapshot (a pointer they never follow once the
    /// transaction is destroyed, in `Drop`, before they are).
    read: Owned<rocksdb_readoptions_t>,
    txn: NonNull<rocksdb_transaction_t>,
    /// Open while the transaction lives (dropped last).
    _db: Arc<RocksDb>,
}

impl RocksDbTxn {
    fn pinned(&mut self, key: &[u8], for_update: bool) -> Result<Option<PinnedSlice>, PeerError> {
        let mut err = ptr::null_mut();
        // SAFETY: transaction and read options are live; the key outlives the call.
        let slice = unsafe {
            match for_update {
                true => rocksdb_transaction_get_pinned_for_update(
                    self.txn.as_ptr(),
                    self.read.ptr(),
                    key.as_ptr().cast(),
                    key.len(),
                    1,
                    &mut err,
                ),
                false => rocksdb_transaction_get_pinned(
                    self.txn.as_ptr(),
                    self.read.ptr(),
                    key.as_ptr().cast(),
                    key.len(),
                    &mut err,
                ),
            }
        };
        check_txn("rocksdb_transaction_get_pinned", err)?;
        Ok(NonNull::new(slice).map(PinnedSlice))
    }
}

impl crate::PeerTxn for RocksDbTxn {
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>, for_update: bool) -> Result<bool, PeerError> {
        let Some(slice) = self.pinned(key, for_update)? else { return Ok(false) };
        out.clear();
        out.extend_from_slice(slice.value());
        Ok(true)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), PeerError> {
        let mut err = ptr::null_mut();
        // SAFETY: the transaction is live; it copies key and value.
        unsafe {
            rocksdb_transaction_put(
                self.txn.as_ptr(),
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            );
        }
        check_txn("rocksdb_transaction_put", err)
    }

    fn delete(&mut self, key: &[u8]) -> Result<(), PeerError> {
        let mut err = ptr::null_mut();
        // SAFETY: the transaction is live; it copies the key.
        unsafe {
            rocksdb_transaction_delete(self.txn.as_ptr(), key.as_ptr().cast(), key.len(), &mut err)
        };
        check_txn("rocksdb_transaction_delete", err)
    }

    fn scan(
        &mut self,
        lower: &[u8],
        upper: Option<&[u8]>,
        limit: usize,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize, PeerError> {
        // SAFETY: transaction and read options are live; the iterator (which sees the
        // transaction's own writes) is destroyed by `Owned` before either.
        let iter = unsafe {
            Owned::new(
                rocksdb_transaction_create_iterator(self.txn.as_ptr(), self.read.ptr()),
                rocksdb_iter_destroy,
            )?
        };
        // SAFETY: (the block) a live iterator; seeks copy their keys. Once valid, key and value
        // point at bytes that stay put until the iterator moves, after `visit` returns.
        unsafe {
            match (reverse, upper) {
                (false, _) => rocksdb_iter_seek(iter.ptr(), lower.as_ptr().cast(), lower.len()),
                (true, None) => rocksdb_iter_seek_to_last(iter.ptr()),
                (true, Some(upper)) => {
                    rocksdb_iter_seek_for_prev(iter.ptr(), upper.as_ptr().cast(), upper.len())
                }
            }
            let mut visited = 0;
            while visited < limit && rocksdb_iter_valid(iter.ptr()) != 0 {
                let (mut key_len, mut value_len) = (0, 0);
                let key = bytes(rocksdb_iter_key(iter.ptr(), &mut key_len), key_len);
                let below_upper = upper.is_none_or(|upper| key < upper);
                if reverse && !below_upper {
                    // `seek_for_prev` lands on `upper` itself when it exists: excluded.
                    rocksdb_iter_prev(iter.ptr());
                    continue;
                }
                if !below_upper || key < lower {
                    break;
                }
                let value = bytes(rocksdb_iter_value(iter.ptr(), &mut value_len), value_len);
                visit(key, value);
                visited += 1;
                match reverse {
                    false => rocksdb_iter_next(iter.ptr()),
                    true => rocksdb_iter_prev(iter.ptr()),
                }
            }
            let mut err = ptr::null_mut();
            rocksdb_iter_get_error(iter.ptr(), &mut err);
            check_txn("rocksdb_iter_next", err)?;
            Ok(visited)
        }
    }

    fn commit(self: Box<Self>) -> Result<(), PeerError> {
        let mut err = ptr::null_mut();
        // SAFETY: the transaction is live; `Drop` destroys it afterwards (a committed or
        // failed transaction is only destroyed; rolling it back then is harmless).
        unsafe { rocksdb_transaction_commit(self.txn.as_ptr(), &mut err) };
        check_txn("rocksdb_transaction_commit", err)
    }
}

impl Drop for RocksDbTxn {
    fn drop(&mut self) {
        let mut err = ptr::null_mut();
        // SAFETY: the transaction is live and destroyed once, here. Rolling back a committed
        // transaction does nothing; an error of it is RocksDB's to free and ours to ignore
        // (nothing more can be undone).
        unsafe {
            rocksdb_transaction_rollback(self.txn.as_ptr(), &mut err);
            if !err.is_null() {
                rocksdb_free(err.cast());
            }
            rocksdb_transaction_destroy(self.txn.as_ptr());
        }
    }
}

// SAFETY: a RocksDB transaction may be used from any thread, one at a time (`&mut self`).
unsafe impl Send for RocksDbTxn {}

/// [`check`] for transactions: RocksDB's `Busy` (another transaction changed a key since
/// the snapshot, or a deadlock), `TimedOut` (a lock not granted in time, pessimistic) and
/// `TryAgain` (it could no longer tell) are conflicts.
fn check_txn(call: &'static str, err: *mut c_char) -> Result<(), PeerError> {
    match check(call, err) {
        Err(PeerError::Engine { message, .. })
            if message.starts_with("Resource busy")
                || message.starts_with("Operation timed out")
                || message.starts_with("Operation failed. Try again") =>
        {
            Err(PeerError::Conflict { engine: NAME, call, message })
        }
        other => other,
    }
}

/// The block cache of `open`: LRU, over a secondary cache when `tier` is one (with its
/// counters).
fn block_cache(
    cache_bytes: usize,
    tier: Option<&PeerTier>,
) -> Result<(Owned<rocksdb_cache_t>, Option<Owned<frk_tier>>), PeerError> {
    let secondary_bytes = match tier {
        Some(tier) if tier.kind == PeerTierKind::Secondary => usize::try_from(tier.bytes)
            .map_err(|_| invalid(format!("tier bytes {} is too large", tier.bytes)))?,
        _ => {
            // SAFETY: a fresh cache, owned by `Owned`.
            let cache = unsafe {
                Owned::new(rocksdb_cache_create_lru(cache_bytes), rocksdb_cache_destroy)?
            };
            return Ok((cache, None));
        }
    };
    let (mut counters, mut err) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: `counters` and `err` are null pointers for the shim to fill in.
    let cache = unsafe {
        frk_cache_create_lru_with_secondary(cache_bytes, secondary_bytes, &mut counters, &mut err)
    };
    check("frk_cache_create_lru_with_secondary", err)?;
    // SAFETY: on success both are fresh objects we own, with these destroy functions.
    unsafe {
        Ok((
            Owned::new(cache, rocksdb_cache_destroy)?,
            Some(Owned::new(counters, frk_tier_destroy)?),
        ))
    }
}

/// Gives `options` a write buffer manager of `budget_bytes` charging the memtables to `cache`;
/// returns a handle on it.
fn set_write_buffer_manager(
    options: &Owned<rocksdb_options_t>,
    cache: &Owned<rocksdb_cache_t>,
    budget_bytes: usize,
) -> Result<Owned<frk_write_buffer_manager>, PeerError> {
    let mut err = ptr::null_mut();
    // SAFETY: live options and cache; `err` is a null pointer for the shim to fill in. The
    // options share the manager and the manager the cache (`shared_ptr`s).
    let manager = unsafe {
        frk_options_set_write_buffer_manager(options.ptr(), cache.ptr(), budget_bytes, &mut err)
    };
    check("frk_options_set_write_buffer_manager", err)?;
    // SAFETY: on success a fresh handle we own.
    unsafe { Owned::new(manager, frk_write_buffer_manager_destroy) }
}

/// Gives `options` statistics counting tickers only; returns a handle on them.
fn enable_ticker_statistics(
    options: &Owned<rocksdb_options_t>,
) -> Result<Owned<frk_statistics>, PeerError> {
    let mut err = ptr::null_mut();
    // SAFETY: live options; `err` is a null pointer for the shim to fill in. The options share
    // the statistics (a `shared_ptr`), and the database opened with them.
    let statistics = unsafe { frk_options_enable_ticker_statistics(options.ptr(), &mut err) };
    check("frk_options_enable_ticker_statistics", err)?;
    // SAFETY: on success a fresh handle we own.
    unsafe { Owned::new(statistics, frk_statistics_destroy) }
}

/// Gives `table` a persistent cache in `tier.path` (made if missing); returns its counters.
fn set_persistent_cache(
    table: &Owned<rocksdb_block_based_table_options_t>,
    tier: &PeerTier,
) -> Result<Owned<frk_tier>, PeerError> {
    if tier.bytes < PERSISTENT_CACHE_FILE_BYTES {
        return Err(invalid(format!(
            "the persistent cache needs at least {} MiB (one of its cache files), not {} B",
            PERSISTENT_CACHE_FILE_BYTES >> 20,
            tier.bytes
        )));
    }
    std::fs::create_dir_all(&tier.path).map_err(|source| PeerError::Io {
        engine: NAME,
        context: format!("creating the persistent cache's directory {}", tier.path.display()),
        source,
    })?;
    let dir = CString::new(tier.path.as_os_str().as_bytes())
        .map_err(|_| invalid(format!("a NUL byte in {}", tier.path.display())))?;
    let (mut counters, mut err) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: live table options; a NUL-terminated path; `counters` and `err` are null
    // pointers for the shim to fill in. The table options share the cache (`shared_ptr`).
    unsafe {
        frk_table_set_persistent_cache(
            table.ptr(),
            dir.as_ptr(),
            tier.bytes,
            PERSISTENT_CACHE_FOR_NVM.into(),
            &mut counters,
            &mut err,
        )
    };
    check("frk_table_set_persistent_cache", err)?;
    // SAFETY: on success a fresh counters object we own.
    unsafe { Owned::new(counters, frk_tier_destroy) }
}

/// With `memtables_in_cache`, the memtables' options as `describe_config` prints them, after
/// `write_buffer_size`: how the budget is split.
fn describe_memtables(
    config: &PeerConfig,
    cache_bytes: usize,
    write_buffer_bytes: usize,
) -> String {
    if !config.memtables_in_cache {
        return String::new();
    }
    let budget_bytes = cache_bytes / MEMTABLE_BUDGET_DIVISOR;
    let history = match config.transactions {
        Some(_) => format!(
            ", max_write_buffer_size_to_maintain={budget_bytes} (the memtable history kept for \
             conflict checks, charged to the block cache too)"
        ),
        None => String::new(),
    };
    format!(
        ", max_write_buffer_number={MEMTABLES_PER_BUDGET}, write_buffer_manager={budget_bytes} B \
         charged to the block cache (cost_to_cache, allow_stall=false: memtables of \
         {write_buffer_bytes} B flushed as they near a quarter of the block cache, their memory \
         taken from it, block cache + memtables within {cache_bytes} B){history}"
    )
}

/// The tier's options as `describe_config` prints them.
fn describe_tier(tier: &PeerTier) -> String {
    match tier.kind {
        PeerTierKind::Secondary => format!(
            ", secondary_cache=CompressedSecondaryCache {} B (compression_type=kNoCompression, \
             its other options the defaults), lowest_used_cache_tier=kNonVolatileBlockTier",
            tier.bytes
        ),
        PeerTierKind::Persistent => format!(
            ", persistent_cache=NewPersistentCache(path={}, size={} B, \
             optimized_for_nvm={PERSISTENT_CACHE_FOR_NVM}, cache_file_size={} B, the default)",
            tier.path.display(),
            tier.bytes,
            PERSISTENT_CACHE_FILE_BYTES
        ),
    }
}

/// A value pinned by `rocksdb_get_pinned`, released on drop.
struct PinnedSlice(NonNull<rocksdb_pinnableslice_t>);

impl PinnedSlice {
    fn value(&self) -> &[u8] {
        let mut len = 0;
        // SAFETY: the slice is live until `self` drops, and its bytes with it.
        unsafe { bytes(rocksdb_pinnableslice_value(self.0.as_ptr(), &mut len), len) }
    }
}

impl Drop for PinnedSlice {
    fn drop(&mut self) {
        // SAFETY: from `rocksdb_get_pinned`, destroyed once.
        unsafe { rocksdb_pinnableslice_destroy(self.0.as_ptr()) };
    }
}

/// A RocksDB object owned by Rust: destroyed with its destroy function on drop.
struct Owned<T> {
    ptr: NonNull<T>,
    destroy: unsafe extern "C" fn(*mut T),
}

impl<T> Owned<T> {
    /// Takes ownership of `ptr`, fresh from a create function; a null is reported as an error.
    ///
    /// # Safety
    /// `ptr` is null or owned by nobody else, and `destroy` is its destroy function.
    unsafe fn new(ptr: *mut T, destroy: unsafe extern "C" fn(*mut T)) -> Result<Self, PeerError> {
        let ptr = NonNull::new(ptr).ok_or_else(|| null_from("a rocksdb_*_create function"))?;
        Ok(Owned { ptr, destroy })
    }

    fn ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: we own the object (see `new`) and destroy it once.
        unsafe { (self.destroy)(self.ptr.as_ptr()) };
    }
}

impl<T> std::fmt::Debug for Owned<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:p}", self.ptr)
    }
}

/// Turns RocksDB's `errptr` into a result, freeing the message.
fn check(call: &'static str, err: *mut c_char) -> Result<(), PeerError> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null `errptr` holds a NUL-terminated message `malloc`ed by RocksDB; it is
    // copied, then freed once with `rocksdb_free`.
    let message = unsafe {
        let message = CStr::from_ptr(err).to_string_lossy().into_owned();
        rocksdb_free(err.cast());
        message
    };
    Err(PeerError::Engine { engine: NAME, call, code: None, message })
}

fn null_from(call: &'static str) -> PeerError {
    let message = "returned a null pointer without an error message".to_string();
    PeerError::Engine { engine: NAME, call, code: None, message }
}

fn invalid(reason: impl Into<String>) -> PeerError {
    PeerError::Invalid { engine: NAME, reason: reason.into() }
}
