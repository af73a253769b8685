/*
 * rocksdb_memory.cc: RocksDB's WriteBufferManager, which its C API (rocksdb/c.h, 7.8) lacks,
 * as plain C functions for src/rocksdb.rs.
 *
 * RocksDB's block cache holds blocks read from table files; its memtables (recent writes) are
 * on top of it unless a WriteBufferManager built with the block cache ("cost_to_cache", wiki:
 * "Write Buffer Manager", "Memory usage in RocksDB") charges them to it: for the memory its
 * memtables' arenas allocate, it inserts pinned dummy entries of the same size into the block
 * cache, which evicts blocks to make room. Block cache + memtables then share one capacity.
 *
 * Like rocksdb_tier.cc and rocksdb_txn.cc this copies two private struct layouts of RocksDB
 * 7.8's db/c.cc (rocksdb_options_t, an Options `rep`; rocksdb_cache_t, a shared_ptr<Cache>
 * `rep`); the #error admits that one version only, and frk_options_set_write_buffer_manager
 * compares a few fields read through the copied layouts with the C API's getters before it
 * writes anything, so a mismatched layout is an error, not a corrupted Options.
 *
 * No C++ exception crosses into Rust: each function catches them and reports a message in
 * *errptr (malloc'ed, freed by the caller with rocksdb_free, like the C API's errors).
 */

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include <rocksdb/c.h>
#include <rocksdb/cache.h>
#include <rocksdb/options.h>
#include <rocksdb/version.h>
#include <rocksdb/write_buffer_manager.h>

#if ROCKSDB_MAJOR != 7 || ROCKSDB_MINOR != 8
#error "rocksdb_memory.cc copies struct layouts from RocksDB 7.8's db/c.cc: check them first"
#endif

/* As RocksDB 7.8's db/c.cc defines them (see the top of this file). */
struct rocksdb_options_t {
    ROCKSDB_NAMESPACE::Options rep;
};
struct rocksdb_cache_t {
    std::shared_ptr<ROCKSDB_NAMESPACE::Cache> rep;
};

/* The manager, shared with the Options (and the database opened with them): readable until
 * frk_write_buffer_manager_destroy, whether or not the database outlives it. */
struct frk_write_buffer_manager {
    std::shared_ptr<ROCKSDB_NAMESPACE::WriteBufferManager> rep;
};

namespace {

void set_error(char** errptr, const std::string& message) {
    if (errptr != nullptr) {
        *errptr = strdup(message.c_str());
    }
}

} // namespace

extern "C" {

/*
 * Sets options' write_buffer_manager to WriteBufferManager(buffer_bytes, the block cache
 * `cache`, allow_stall = false): memtables are flushed when their memory nears buffer_bytes,
 * and every byte of it is charged to cache. Writes are never stalled by it (RocksDB's default):
 * its stall waits for the memory to fall below buffer_bytes, which a TransactionDB's flushed
 * memtables kept for conflict checking may hold up.
 * Returns a handle on the manager (free with frk_write_buffer_manager_destroy), or null and
 * *errptr, with options unchanged.
 */
frk_write_buffer_manager* frk_options_set_write_buffer_manager(rocksdb_options_t* options,
                                                               rocksdb_cache_t* cache,
                                                               size_t buffer_bytes,
                                                               char** errptr) {
    try {
        if (options == nullptr || cache == nullptr || cache->rep == nullptr) {
            set_error(errptr, "frk_options_set_write_buffer_manager: null options or cache");
            return nullptr;
        }
        /* The copied layouts, checked against the C API's own accessors. */
        if (options->rep.write_buffer_size != rocksdb_options_get_write_buffer_size(options) ||
            options->rep.max_write_buffer_number !=
                rocksdb_options_get_max_write_buffer_number(options) ||
            cache->rep->GetCapacity() != rocksdb_cache_get_capacity(cache)) {
            set_error(errptr, "rocksdb_options_t or rocksdb_cache_t is not laid out as "
                              "rocksdb_memory.cc assumes (RocksDB 7.8's db/c.cc)");
            return nullptr;
        }
        auto manager = std::make_shared<ROCKSDB_NAMESPACE::WriteBufferManager>(
            buffer_bytes, cache->rep, /*allow_stall=*/false);
        auto handle = std::make_unique<frk_write_buffer_manager>();
        handle->rep = manager;
        options->rep.write_buffer_manager = std::move(manager);
        return handle.release();
    } catch (const std::exception& e) {
        set_error(errptr, e.what());
        return nullptr;
    }
}

/* The memory the memtables' arenas hold now (active, immutable and kept), as the manager
 * counts it. */
size_t frk_write_buffer_manager_memory_usage(const frk_write_buffer_manager* manager) {
    return manager->rep->memory_usage();
}

/* What the manager's dummy entries take of the block cache now (a multiple of their size,
 * 256 KiB in 7.8, at least the memory it counts). */
size_t frk_write_buffer_manager_cache_charge(const frk_write_buffer_manager* manager) {
    return manager->rep->dummy_entries_in_cache_usage();
}

void frk_write_buffer_manager_destroy(frk_write_buffer_manager* manager) { delete manager; }

} /* extern "C" */
