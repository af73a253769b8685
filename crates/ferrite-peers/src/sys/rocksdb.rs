//! The part of RocksDB's C API (`rocksdb/c.h`, RocksDB 7.8) that `crate::rocksdb` uses.
//!
//! Errors come back through `errptr`: it must point at a null pointer before the call; after a
//! failed call it holds a `malloc`ed message, to be freed with `rocksdb_free`.

// Declaring foreign functions is unsafe code; calling them is confined to `crate::rocksdb`.
#![allow(unsafe_code)]
// The C names, kept as spelled in the header so they can be grepped for.
#![allow(non_camel_case_types, non_snake_case)]

use libc::{c_char, c_int, c_uchar, c_void, size_t};

/// Declares opaque C types: only ever behind raw pointers.
macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        #[repr(C)]
        pub(crate) struct $name {
            _private: [u8; 0],
        }
    )*};
}

opaque!(
    rocksdb_t,
    rocksdb_options_t,
    rocksdb_block_based_table_options_t,
    rocksdb_cache_t,
    rocksdb_filterpolicy_t,
    rocksdb_readoptions_t,
    rocksdb_writeoptions_t,
    rocksdb_writebatch_t,
    rocksdb_iterator_t,
    rocksdb_flushoptions_t,
    rocksdb_pinnableslice_t,
    rocksdb_optimistictransactiondb_t,
    rocksdb_optimistictransaction_options_t,
    rocksdb_transaction_t,
    rocksdb_snapshot_t,
    rocksdb_transactiondb_t,
    rocksdb_transactiondb_options_t,
    rocksdb_transaction_options_t,
    frk_tier,
    frk_write_buffer_manager,
    frk_statistics,
);

/// `rocksdb_no_compression` of the compression enum.
pub(crate) const ROCKSDB_NO_COMPRESSION: c_int = 0;
/// `rocksdb_block_based_table_index_type_two_level_index_search`: `kTwoLevelIndexSearch`, the
/// partitioned index.
pub(crate) const ROCKSDB_TWO_LEVEL_INDEX_SEARCH: c_int = 2;

// Linked by build.rs (`cargo:rustc-link-lib=rocksdb`).
extern "C" {
    pub(crate) fn rocksdb_options_create() -> *mut rocksdb_options_t;
    pub(crate) fn rocksdb_options_destroy(options: *mut rocksdb_options_t);
    pub(crate) fn rocksdb_options_set_create_if_missing(
        options: *mut rocksdb_options_t,
        v: c_uchar,
    );
    pub(crate) fn rocksdb_options_set_write_buffer_size(options: *mut rocksdb_options_t, v: size_t);
    pub(crate) fn rocksdb_options_set_level_compaction_dynamic_level_bytes(
        options: *mut rocksdb_options_t,
        v: c_uchar,
    );
    pub(crate) fn rocksdb_options_set_max_write_buffer_number(
        options: *mut rocksdb_options_t,
        v: c_int,
    );
    /// The memtable history a transaction database keeps for its conflict checks (0: none;
    /// a transaction database defaults it to `max_write_buffer_number` x `write_buffer_size`).
    pub(crate) fn rocksdb_options_set_max_write_buffer_size_to_maintain(
        options: *mut rocksdb_options_t,
        v: i64,
    );
    pub(crate) fn rocksdb_options_set_max_background_jobs(
        options: *mut rocksdb_options_t,
        v: c_int,
    );
    pub(crate) fn rocksdb_options_set_compression(options: *mut rocksdb_options_t, v: c_int);
    pub(crate) fn rocksdb_options_set_enable_blob_files(
        options: *mut rocksdb_options_t,
        v: c_uchar,
    );
    pub(crate) fn rocksdb_options_set_min_blob_size(options: *mut rocksdb_options_t, v: u64);
    pub(crate) fn rocksdb_options_set_blob_file_size(options: *mut rocksdb_options_t, v: u64);
    pub(crate) fn rocksdb_options_set_enable_blob_gc(options: *mut rocksdb_options_t, v: c_uchar);
    pub(crate) fn rocksdb_options_set_blob_gc_age_cutoff(options: *mut rocksdb_options_t, v: f64);
    pub(crate) fn rocksdb_options_set_max_open_files(options: *mut rocksdb_options_t, v: c_int);
    pub(crate) fn rocksdb_options_set_use_direct_reads(options: *mut rocksdb_options_t, v: c_uchar);
    pub(crate) fn rocksdb_options_set_use_direct_io_for_flush_and_compaction(
        options: *mut rocksdb_options_t,
        v: c_uchar,
    );
    /// Copies the table options into a new table factory (they can be destroyed after).
    pub(crate) fn rocksdb_options_set_block_based_table_factory(
        options: *mut rocksdb_options_t,
        table_options: *mut rocksdb_block_based_table_options_t,
    );

    pub(crate) fn rocksdb_block_based_options_create() -> *mut rocksdb_block_based_table_options_t;
    pub(crate) fn rocksdb_block_based_options_destroy(
        options: *mut rocksdb_block_based_table_options_t,
    );
    pub(crate) fn rocksdb_block_based_options_set_block_size(
        options: *mut rocksdb_block_based_table_options_t,
        block_size: size_t,
    );
    /// Takes ownership of `policy` (it must not be destroyed by the caller).
    pub(crate) fn rocksdb_block_based_options_set_filter_policy(
        options: *mut rocksdb_block_based_table_options_t,
        policy: *mut rocksdb_filterpolicy_t,
    );
    /// Shares `cache` (a `shared_ptr` copy): the caller still destroys its handle.
    pub(crate) fn rocksdb_block_based_options_set_block_cache(
        options: *mut rocksdb_block_based_table_options_t,
        cache: *mut rocksdb_cache_t,
    );
    pub(crate) fn rocksdb_block_based_options_set_cache_index_and_filter_blocks(
        options: *mut rocksdb_block_based_table_options_t,
        v: c_uchar,
    );
    pub(crate) fn rocksdb_block_based_options_set_cache_index_and_filter_blocks_with_high_priority(
        options: *mut rocksdb_block_based_table_options_t,
        v: c_uchar,
    );
    pub(crate) fn rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(
        options: *mut rocksdb_block_based_table_options_t,
        v: c_uchar,
    );
    pub(crate) fn rocksdb_block_based_options_set_pin_top_level_index_and_filter(
        options: *mut rocksdb_block_based_table_options_t,
        v: c_uchar,
    );
    /// One of the `rocksdb_block_based_table_index_type_*` values.
    pub(crate) fn rocksdb_block_based_options_set_index_type(
        options: *mut rocksdb_block_based_table_options_t,
        v: c_int,
    );
    pub(crate) fn rocksdb_block_based_options_set_partition_filters(
        options: *mut rocksdb_block_based_table_options_t,
        v: c_uchar,
    );
    pub(crate) fn rocksdb_block_based_options_set_metadata_block_size(
        options: *mut rocksdb_block_based_table_options_t,
        metadata_block_size: u64,
    );

    /// `NewLRUCache(capacity)` with its defaults: shards chosen by size, and (RocksDB 7.8,
    /// `rocksdb/cache.h`) `high_pri_pool_ratio` 0.5. The C API has no setter for the ratio.
    pub(crate) fn rocksdb_cache_create_lru(capacity: size_t) -> *mut rocksdb_cache_t;
    pub(crate) fn rocksdb_cache_destroy(cache: *mut rocksdb_cache_t);
    /// What the cache holds now, pinned entries (and charged dummies) included.
    pub(crate) fn rocksdb_cache_get_usage(cache: *mut rocksdb_cache_t) -> size_t;
    pub(crate) fn rocksdb_filterpolicy_create_bloom_full(
        bits_per_key: f64,
    ) -> *mut rocksdb_filterpolicy_t;

    pub(crate) fn rocksdb_readoptions_create() -> *mut rocksdb_readoptions_t;
    pub(crate) fn rocksdb_readoptions_destroy(options: *mut rocksdb_readoptions_t);
    pub(crate) fn rocksdb_writeoptions_create() -> *mut rocksdb_writeoptions_t;
    pub(crate) fn rocksdb_writeoptions_destroy(options: *mut rocksdb_writeoptions_t);
    pub(crate) fn rocksdb_writeoptions_set_sync(options: *mut rocksdb_writeoptions_t, v: c_uchar);
    pub(crate) fn rocksdb_writeoptions_disable_WAL(
        options: *mut rocksdb_writeoptions_t,
        disable: c_int,
    );
    pub(crate) fn rocksdb_flushoptions_create() -> *mut rocksdb_flushoptions_t;
    pub(crate) fn rocksdb_flushoptions_destroy(options: *mut rocksdb_flushoptions_t);
    pub(crate) fn rocksdb_flushoptions_set_wait(options: *mut rocksdb_flushoptions_t, v: c_uchar);

    pub(crate) fn rocksdb_open(
        options: *const rocksdb_options_t,
        name: *const c_char,
        errptr: *mut *mut c_char,
    ) -> *mut rocksdb_t;
    pub(crate) fn rocksdb_close(db: *mut rocksdb_t);
    pub(crate) fn rocksdb_put(
        db: *mut rocksdb_t,
        options: *const rocksdb_writeoptions_t,
        key: *const c_char,
        key_len: size_t,
        value: *const c_char,
        value_len: size_t,
        errptr: *mut *mut c_char,
    );
    pub(crate) fn rocksdb_delete(
        db: *mut rocksdb_t,
        options: *const rocksdb_writeoptions_t,
        key: *const c_char,
        key_len: size_t,
        errptr: *mut *mut c_char,
    );
    pub(crate) fn rocksdb_write(
        db: *mut rocksdb_t,
        options: *const rocksdb_writeoptions_t,
        batch: *mut rocksdb_writebatch_t,
        errptr: *mut *mut c_char,
    );
    /// Null (and no error) when the key is missing.
    pub(crate) fn rocksdb_get_pinned(
        db: *mut rocksdb_t,
        options: *const rocksdb_readoptions_t,
        key: *const c_char,
        key_len: size_t,
        errptr: *mut *mut c_char,
    ) -> *mut rocksdb_pinnableslice_t;
    pub(crate) fn rocksdb_pinnableslice_value(
        slice: *const rocksdb_pinnableslice_t,
        value_len: *mut size_t,
    ) -> *const c_char;
    pub(crate) fn rocksdb_pinnableslice_destroy(slice: *mut rocksdb_pinnableslice_t);
    pub(crate) fn rocksdb_flush(
        db: *mut rocksdb_t,
        options: *const rocksdb_flushoptions_t,
        errptr: *mut *mut c_char,
    );
    pub(crate) fn rocksdb_free(ptr: *mut c_void);
    /// 0 on success, -1 if the property is unknown or not an integer.
    pub(crate) fn rocksdb_property_int(
        db: *mut rocksdb_t,
        propname: *const c_char,
        out_val: *mut u64,
    ) -> c_int;
    pub(crate) fn rocksdb_compact_range(
        db: *mut rocksdb_t,
        start_key: *const c_char,
        start_key_len: size_t,
        limit_key: *const c_char,
        limit_key_len: size_t,
    );

    pub(crate) fn rocksdb_writebatch_create() -> *mut rocksdb_writebatch_t;
    pub(crate) fn rocksdb_writebatch_destroy(batch: *mut rocksdb_writebatch_t);
    pub(crate) fn rocksdb_writebatch_put(
        batch: *mut rocksdb_writebatch_t,
        key: *const c_char,
        key_len: size_t,
        value: *const c_char,
        value_len: size_t,
    );

    pub(crate) fn rocksdb_create_iterator(
        db: *mut rocksdb_t,
        options: *const rocksdb_readoptions_t,
    ) -> *mut rocksdb_iterator_t;
    pub(crate) fn rocksdb_iter_destroy(iter: *mut rocksdb_iterator_t);
    pub(crate) fn rocksdb_iter_seek(iter: *mut rocksdb_iterator_t, key: *const c_char, len: size_t);
    pub(crate) fn rocksdb_iter_valid(iter: *const rocksdb_iterator_t) -> c_uchar;
    pub(crate) fn rocksdb_iter_next(iter: *mut rocksdb_iterator_t);
    pub(crate) fn rocksdb_iter_key(
        iter: *const rocksdb_iterator_t,
        len: *mut size_t,
    ) -> *const c_char;
    pub(crate) fn rocksdb_iter_value(
        iter: *const rocksdb_iterator_t,
        len: *mut size_t,
    ) -> *const c_char;
    pub(crate) fn rocksdb_iter_get_error(iter: *const rocksdb_iterator_t, errptr: *mut *mut c_char);
}

/// A tier's counters as `frk_tier_counters_read` fills them (`frk_tier_counters` in
/// `csrc/rocksdb_tier.cc`, which says what each counts).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct frk_tier_counters {
    pub(crate) lookups: u64,
    pub(crate) hits: u64,
    pub(crate) inserts: u64,
    pub(crate) refused: u64,
    pub(crate) bytes_written: u64,
}

// Optimistic transactions (`rocksdb/utilities/optimistic_transaction_db.h` through c.h).
extern "C" {
    pub(crate) fn rocksdb_optimistictransactiondb_open(
        options: *const rocksdb_options_t,
        name: *const c_char,
        errptr: *mut *mut c_char,
    ) -> *mut rocksdb_optimistictransactiondb_t;
    /// A new handle on the base database (freed by `close_base_db`, which leaves the
    /// database open).
    pub(crate) fn rocksdb_optimistictransactiondb_get_base_db(
        otxn_db: *mut rocksdb_optimistictransactiondb_t,
    ) -> *mut rocksdb_t;
    pub(crate) fn rocksdb_optimistictransactiondb_close_base_db(base_db: *mut rocksdb_t);
    pub(crate) fn rocksdb_optimistictransactiondb_close(
        otxn_db: *mut rocksdb_optimistictransactiondb_t,
    );
    pub(crate) fn rocksdb_optimistictransaction_options_create(
    ) -> *mut rocksdb_optimistictransaction_options_t;
    pub(crate) fn rocksdb_optimistictransaction_options_destroy(
        options: *mut rocksdb_optimistictransaction_options_t,
    );
    pub(crate) fn rocksdb_optimistictransaction_options_set_set_snapshot(
        options: *mut rocksdb_optimistictransaction_options_t,
        v: c_uchar,
    );
    pub(crate) fn rocksdb_optimistictransaction_begin(
        otxn_db: *mut rocksdb_optimistictransactiondb_t,
        write_options: *const rocksdb_writeoptions_t,
        otxn_options: *const rocksdb_optimistictransaction_options_t,
        old_txn: *mut rocksdb_transaction_t,
    ) -> *mut rocksdb_transaction_t;
    pub(crate) fn rocksdb_transaction_get_snapshot(
        txn: *mut rocksdb_transaction_t,
    ) -> *const rocksdb_snapshot_t;
    pub(crate) fn rocksdb_readoptions_set_snapshot(
        options: *mut rocksdb_readoptions_t,
        snapshot: *const rocksdb_snapshot_t,
    );
    pub(crate) fn rocksdb_transaction_get_pinned(
        txn: *mut rocksdb_transaction_t,
        options: *const rocksdb_readoptions_t,
        key: *const c_char,
        klen: size_t,
        errptr: *mut *mut c_char,
    ) -> *mut rocksdb_pinnableslice_t;
    pub(crate) fn rocksdb_transaction_get_pinned_for_update(
        txn: *mut rocksdb_transaction_t,
        options: *const rocksdb_readoptions_t,
        key: *const c_char,
        klen: size_t,
        exclusive: c_uchar,
        errptr: *mut *mut c_char,
    ) -> *mut rocksdb_pinnableslice_t;
    pub(crate) fn rocksdb_transaction_put(
        txn: *mut rocksdb_transaction_t,
        key: *const c_char,
        klen: size_t,
        val: *const c_char,
        vlen: size_t,
        errptr: *mut *mut c_char,
    );
    pub(crate) fn rocksdb_transaction_delete(
        txn: *mut rocksdb_transaction_t,
        key: *const c_char,
        klen: size_t,
        errptr: *mut *mut c_char,
    );
    pub(crate) fn rocksdb_transaction_create_iterator(
        txn: *mut rocksdb_transaction_t,
        options: *const rocksdb_readoptions_t,
    ) -> *mut rocksdb_iterator_t;
    pub(crate) fn rocksdb_transaction_commit(
        txn: *mut rocksdb_transaction_t,
        errptr: *mut *mut c_char,
    );
    pub(crate) fn rocksdb_transaction_rollback(
        txn: *mut rocksdb_transaction_t,
        errptr: *mut *mut c_char,
    );
    pub(crate) fn rocksdb_transaction_destroy(txn: *mut rocksdb_transaction_t);
    pub(crate) fn rocksdb_iter_seek_for_prev(
        iter: *mut rocksdb_iterator_t,
        key: *const c_char,
        len: size_t,
    );
    pub(crate) fn rocksdb_iter_seek_to_last(iter: *mut rocksdb_iterator_t);
    pub(crate) fn rocksdb_iter_prev(iter: *mut rocksdb_iterator_t);
}

// Pessimistic transactions (`rocksdb/utilities/transaction_db.h` through c.h). The
// transactions themselves are `rocksdb_transaction_t`, as above.
extern "C" {
    pub(crate) fn rocksdb_transactiondb_options_create() -> *mut rocksdb_transactiondb_options_t;
    pub(crate) fn rocksdb_transactiondb_options_destroy(
        options: *mut rocksdb_transactiondb_options_t,
    );
    /// The lock timeout, ms, of a write outside a transaction (`default_lock_timeout`).
    pub(crate) fn rocksdb_transactiondb_options_set_default_lock_timeout(
        options: *mut rocksdb_transactiondb_options_t,
        default_lock_timeout: i64,
    );
    /// The default lock timeout, ms, of transactions (`transaction_lock_timeout`).
    pub(crate) fn rocksdb_transactiondb_options_set_transaction_lock_timeout(
        options: *mut rocksdb_transactiondb_options_t,
        txn_lock_timeout: i64,
    );
    pub(crate) fn rocksdb_transactiondb_open(
        options: *const rocksdb_options_t,
        txn_db_options: *const rocksdb_transactiondb_options_t,
        name: *const c_char,
        errptr: *mut *mut c_char,
    ) -> *mut rocksdb_transactiondb_t;
    pub(crate) fn rocksdb_transactiondb_close(txn_db: *mut rocksdb_transactiondb_t);
    pub(crate) fn rocksdb_transaction_options_create() -> *mut rocksdb_transaction_options_t;
    pub(crate) fn rocksdb_transaction_options_destroy(options: *mut rocksdb_transaction_options_t);
    pub(crate) fn rocksdb_transaction_options_set_set_snapshot(
        options: *mut rocksdb_transaction_options_t,
        v: c_uchar,
    );
    pub(crate) fn rocksdb_transaction_options_set_deadlock_detect(
        options: *mut rocksdb_transaction_options_t,
        v: c_uchar,
    );
    /// Ms a lock request waits before `TimedOut` (negative: forever).
    pub(crate) fn rocksdb_transaction_options_set_lock_timeout(
        options: *mut rocksdb_transaction_options_t,
        lock_timeout: i64,
    );
    pub(crate) fn rocksdb_transaction_begin(
        txn_db: *mut rocksdb_transactiondb_t,
        write_options: *const rocksdb_writeoptions_t,
        txn_options: *const rocksdb_transaction_options_t,
        old_txn: *mut rocksdb_transaction_t,
    ) -> *mut rocksdb_transaction_t;
}

// RocksDB's cache tiers, from the C++ shim `csrc/rocksdb_tier.cc`, compiled by build.rs.
extern "C" {
    /// An LRU block cache of `capacity_bytes` over a CompressedSecondaryCache of
    /// `secondary_bytes`; its counters in `*tier`. Null and `*errptr` on failure.
    pub(crate) fn frk_cache_create_lru_with_secondary(
        capacity_bytes: size_t,
        secondary_bytes: size_t,
        tier: *mut *mut frk_tier,
        errptr: *mut *mut c_char,
    ) -> *mut rocksdb_cache_t;
    /// Sets the table options' persistent cache to one in the existing directory `dir`; its
    /// counters in `*tier`. 0, or -1 and `*errptr`.
    pub(crate) fn frk_table_set_persistent_cache(
        table: *mut rocksdb_block_based_table_options_t,
        dir: *const c_char,
        bytes: u64,
        optimized_for_nvm: c_uchar,
        tier: *mut *mut frk_tier,
        errptr: *mut *mut c_char,
    ) -> c_int;
    /// A new `rocksdb_t` handle on the `TransactionDB` itself (a `DB`): the C API's ordinary
    /// calls (`rocksdb_get_pinned`, `rocksdb_put`, `rocksdb_write`, `rocksdb_flush`,
    /// `rocksdb_compact_range`, ...) then go through it, its writes taking the keys' locks.
    /// Freed by `frk_db_handle_free`, which leaves the database open. Null if `txn_db` is.
    pub(crate) fn frk_transactiondb_as_db(txn_db: *mut rocksdb_transactiondb_t) -> *mut rocksdb_t;
    /// Frees a handle of `frk_transactiondb_as_db` (not the database).
    pub(crate) fn frk_db_handle_free(db: *mut rocksdb_t);
    pub(crate) fn frk_tier_counters_read(tier: *const frk_tier, out: *mut frk_tier_counters);
    pub(crate) fn frk_tier_destroy(tier: *mut frk_tier);
}

// RocksDB's write buffer manager, from the C++ shim `csrc/rocksdb_memory.cc`.
extern "C" {
    /// Sets the options' `write_buffer_manager` to `WriteBufferManager(buffer_bytes, cache,
    /// allow_stall = false)`: memtables flushed as their memory nears `buffer_bytes`, all of it
    /// charged to `cache` (shared, a `shared_ptr` copy). A handle on the manager, or null and
    /// `*errptr` (also when the copied layouts do not match the C API's getters).
    pub(crate) fn frk_options_set_write_buffer_manager(
        options: *mut rocksdb_options_t,
        cache: *mut rocksdb_cache_t,
        buffer_bytes: size_t,
        errptr: *mut *mut c_char,
    ) -> *mut frk_write_buffer_manager;
    /// The memory the memtables' arenas hold now, as the manager counts it.
    pub(crate) fn frk_write_buffer_manager_memory_usage(
        manager: *const frk_write_buffer_manager,
    ) -> size_t;
    /// What the manager's dummy entries take of the block cache now.
    pub(crate) fn frk_write_buffer_manager_cache_charge(
        manager: *const frk_write_buffer_manager,
    ) -> size_t;
    /// Frees the handle (the options and database keep their own reference).
    pub(crate) fn frk_write_buffer_manager_destroy(manager: *mut frk_write_buffer_manager);
}

// RocksDB's statistics at the tickers-only level, from the C++ shim `csrc/rocksdb_stats.cc`.
extern "C" {
    /// Sets the options' `statistics` to `CreateDBStatistics()` at `kExceptHistogramOrTimers`
    /// (tickers only). A handle on it, or null and `*errptr` (also when the copied layout
    /// does not match the C API's getters).
    pub(crate) fn frk_options_enable_ticker_statistics(
        options: *mut rocksdb_options_t,
        errptr: *mut *mut c_char,
    ) -> *mut frk_statistics;
    /// The tickers named `names[..count]` (RocksDB's names, `rocksdb.block.cache.miss`) into
    /// `values[..count]`. 0, or -1 and `*errptr` when a name is not a ticker's.
    pub(crate) fn frk_statistics_tickers(
        statistics: *const frk_statistics,
        names: *const *const c_char,
        values: *mut u64,
        count: size_t,
        errptr: *mut *mut c_char,
    ) -> c_int;
    /// Frees the handle (the options and database keep their own reference).
    pub(crate) fn frk_statistics_destroy(statistics: *mut frk_statistics);
}
