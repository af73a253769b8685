/*
 * rocksdb_tier.cc: RocksDB's second cache tiers, which its C API (rocksdb/c.h, 7.8) lacks, as
 * plain C functions for src/rocksdb.rs.
 *
 * Two tiers under the block cache, both counted the same way:
 * - a secondary cache: RocksDB's CompressedSecondaryCache (rocksdb/cache.h), in DRAM, set as
 *   the LRU block cache's LRUCacheOptions::secondary_cache. Blocks the block cache evicts are
 *   offered to it; a block cache miss looks in it before reading the file.
 * - a persistent cache: NewPersistentCache (rocksdb/persistent_cache.h), RocksDB's block cache
 *   tier in files of a directory, set as BlockBasedTableOptions::persistent_cache. Every block
 *   read that misses the block cache looks in it first; a block read from the file goes in.
 *
 * Each tier is wrapped in a decorator that forwards every call and counts lookups, hits,
 * inserts and bytes into a frk_tier (frk_tier_counters reads them). The statistics tickers
 * every database now counts (rocksdb_stats.cc) have the tiers' hits
 * (rocksdb.secondary.cache.hits, rocksdb.persistent.cache.hit) but not what a tier stored or
 * refused; the decorators count all of it, at two relaxed atomic adds per call.
 *
 * Why this file relies on two of the C API's private struct layouts: the C API hands out a
 * block cache as a rocksdb_cache_t and takes table options as a
 * rocksdb_block_based_table_options_t, both opaque in c.h and defined in RocksDB's db/c.cc as a
 * struct with one member, `rep`. Building the whole table options and cache here instead
 * would mean reimplementing every C setter src/rocksdb.rs already calls, and the
 * rocksdb_options_t they end in is opaque just the same, so some layout is relied on either
 * way. The two definitions below copy c.cc's for the one version the #error admits; a
 * different RocksDB must be checked against its c.cc before the version test is widened.
 *
 * No C++ exception crosses into Rust: each function catches them and reports a message in
 * *errptr (malloc'ed, freed by the caller with rocksdb_free, like the C API's errors).
 */

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <rocksdb/c.h>
#include <rocksdb/cache.h>
#include <rocksdb/env.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/persistent_cache.h>
#include <rocksdb/secondary_cache.h>
#include <rocksdb/table.h>
#include <rocksdb/version.h>

#if ROCKSDB_MAJOR != 7 || ROCKSDB_MINOR != 8
#error "rocksdb_tier.cc copies struct layouts from RocksDB 7.8's db/c.cc: check them first"
#endif

using ROCKSDB_NAMESPACE::BlockBasedTableOptions;
using ROCKSDB_NAMESPACE::Cache;
using ROCKSDB_NAMESPACE::CompressedSecondaryCacheOptions;
using ROCKSDB_NAMESPACE::LRUCacheOptions;
using ROCKSDB_NAMESPACE::PerfLevel;
using ROCKSDB_NAMESPACE::PersistentCache;
using ROCKSDB_NAMESPACE::SecondaryCache;
using ROCKSDB_NAMESPACE::SecondaryCacheResultHandle;
using ROCKSDB_NAMESPACE::Slice;
using ROCKSDB_NAMESPACE::Status;

/* As RocksDB 7.8's db/c.cc defines them (see the top of this file). */
struct rocksdb_cache_t {
    std::shared_ptr<Cache> rep;
};
struct rocksdb_block_based_table_options_t {
    BlockBasedTableOptions rep;
};

/* What a tier did, cumulative; src/rocksdb.rs has the same #[repr(C)] struct. */
typedef struct {
    /* Block cache misses that looked in the tier. */
    uint64_t lookups;
    /* Of those, found there. */
    uint64_t hits;
    /* Blocks stored in the tier. */
    uint64_t inserts;
    /* Blocks offered to the tier and not stored: the secondary cache's first eviction of a
     * block leaves only a placeholder ("dummy") and stores the block at its second. */
    uint64_t refused;
    /* Bytes of the blocks stored. */
    uint64_t bytes_written;
} frk_tier_counters;
static_assert(sizeof(frk_tier_counters) == 5 * sizeof(uint64_t),
              "frk_tier_counters is five u64s, as src/sys/rocksdb.rs declares it");

namespace {

struct Counters {
    std::atomic<uint64_t> lookups{0};
    std::atomic<uint64_t> hits{0};
    std::atomic<uint64_t> inserts{0};
    std::atomic<uint64_t> refused{0};
    std::atomic<uint64_t> bytes_written{0};

    void add(std::atomic<uint64_t>& counter, uint64_t n) {
        counter.fetch_add(n, std::memory_order_relaxed);
    }
};

/*
 * The CompressedSecondaryCache, counted. Whether an Insert stored the block or only a dummy
 * it tells nobody but the thread's perf context (compressed_sec_cache_insert_real_count and
 * _dummy_count), which counts only at PerfLevel::kEnableCount or above: Insert raises this
 * thread's level for the call and puts it back after.
 */
class CountingSecondaryCache : public SecondaryCache {
  public:
    CountingSecondaryCache(std::shared_ptr<SecondaryCache> inner,
                           std::shared_ptr<Counters> counters)
        : inner_(std::move(inner)), counters_(std::move(counters)) {}

    const char* Name() const override { return "FerriteCountingSecondaryCache"; }

    Status Insert(const Slice& key, void* value, const Cache::CacheItemHelper* helper) override {
        const PerfLevel level = ROCKSDB_NAMESPACE::GetPerfLevel();
        if (level < PerfLevel::kEnableCount) {
            ROCKSDB_NAMESPACE::SetPerfLevel(PerfLevel::kEnableCount);
        }
        const ROCKSDB_NAMESPACE::PerfContext* perf = ROCKSDB_NAMESPACE::get_perf_context();
        const uint64_t real = perf->compressed_sec_cache_insert_real_count;
        const uint64_t dummy = perf->compressed_sec_cache_insert_dummy_count;
        Status s = inner_->Insert(key, value, helper);
        const uint64_t stored = perf->compressed_sec_cache_insert_real_count - real;
        counters_->add(counters_->inserts, stored);
        counters_->add(counters_->refused, perf->compressed_sec_cache_insert_dummy_count - dummy);
        if (stored > 0 && helper != nullptr && helper->size_cb != nullptr) {
            counters_->add(counters_->bytes_written, helper->size_cb(value));
        }
        if (level < PerfLevel::kEnableCount) {
            ROCKSDB_NAMESPACE::SetPerfLevel(level);
        }
        return s;
    }

    std::unique_ptr<SecondaryCacheResultHandle> Lookup(const Slice& key,
                                                       const Cache::CreateCallback& create_cb,
                                                       bool wait, bool advise_erase,
                                                       bool& is_in_sec_cache) override {
        auto handle = inner_->Lookup(key, create_cb, wait, advise_erase, is_in_sec_cache);
        counters_->add(counters_->lookups, 1);
        /* CompressedSecondaryCache answers synchronously: a handle is a hit, null a miss. */
        if (handle != nullptr) {
            counters_->add(counters_->hits, 1);
        }
        return handle;
    }

    bool SupportForceErase() const override { return inner_->SupportForceErase(); }
    void Erase(const Slice& key) override { inner_->Erase(key); }
    void WaitAll(std::vector<SecondaryCacheResultHandle*> handles) override {
        inner_->WaitAll(std::move(handles));
    }
    Status SetCapacity(size_t capacity) override { return inner_->SetCapacity(capacity); }
    Status GetCapacity(size_t& capacity) override { return inner_->GetCapacity(capacity); }
    std::string GetPrintableOptions() const override { return inner_->GetPrintableOptions(); }

  private:
    std::shared_ptr<SecondaryCache> inner_;
    std::shared_ptr<Counters> counters_;
};

/* The persistent cache, counted: its Lookup's status says hit or miss, and every Insert is
 * queued for its writer (whether the writer later drops one under pressure is not reported:
 * inserts counts what was offered). */
class CountingPersistentCache : public PersistentCache {
  public:
    CountingPersistentCache(std::shared_ptr<PersistentCache> inner,
                            std::shared_ptr<Counters> counters)
        : inner_(std::move(inner)), counters_(std::move(counters)) {}

    Status Insert(const Slice& key, const char* data, const size_t size) override {
        Status s = inner_->Insert(key, data, size);
        if (s.ok()) {
            counters_->add(counters_->inserts, 1);
            counters_->add(counters_->bytes_written, size);
        } else {
            counters_->add(counters_->refused, 1);
        }
        return s;
    }

    Status Lookup(const Slice& key, std::unique_ptr<char[]>* data, size_t* size) override {
        Status s = inner_->Lookup(key, data, size);
        counters_->add(counters_->lookups, 1);
        if (s.ok()) {
            counters_->add(counters_->hits, 1);
        }
        return s;
    }

    bool IsCompressed() override { return inner_->IsCompressed(); }
    StatsType Stats() override { return inner_->Stats(); }
    std::string GetPrintableOptions() const override { return inner_->GetPrintableOptions(); }
    uint64_t NewId() override { return inner_->NewId(); }

  private:
    std::shared_ptr<PersistentCache> inner_;
    std::shared_ptr<Counters> counters_;
};

void set_error(char** errptr, const std::string& message) {
    if (errptr != nullptr) {
        *errptr = strdup(message.c_str());
    }
}

} // namespace

/* A tier's counters, shared with its decorator: valid until frk_tier_destroy, whether or not
 * the cache outlives it. */
struct frk_tier {
    std::shared_ptr<Counters> counters;
};

extern "C" {

/*
 * An LRU block cache of capacity_bytes, as rocksdb_cache_create_lru makes it
 * (NewLRUCache's defaults: shards by size, no strict limit, high_pri_pool_ratio 0.5), over a
 * CompressedSecondaryCache of secondary_bytes with compression_type kNoCompression (its other
 * options RocksDB's defaults). Returns the cache, to free with rocksdb_cache_destroy, and in
 * *tier its counters, to free with frk_tier_destroy; null and *errptr on failure.
 */
rocksdb_cache_t* frk_cache_create_lru_with_secondary(size_t capacity_bytes,
                                                     size_t secondary_bytes, frk_tier** tier,
                                                     char** errptr) {
    try {
        CompressedSecondaryCacheOptions secondary_options;
        secondary_options.capacity = secondary_bytes;
        secondary_options.compression_type = ROCKSDB_NAMESPACE::kNoCompression;
        std::shared_ptr<SecondaryCache> secondary =
            ROCKSDB_NAMESPACE::NewCompressedSecondaryCache(secondary_options);
        if (secondary == nullptr) {
            set_error(errptr, "NewCompressedSecondaryCache returned null");
            return nullptr;
        }
        auto counters = std::make_shared<Counters>();
        LRUCacheOptions options;
        options.capacity = capacity_bytes;
        options.secondary_cache =
            std::make_shared<CountingSecondaryCache>(std::move(secondary), counters);
        std::shared_ptr<Cache> cache = ROCKSDB_NAMESPACE::NewLRUCache(options);
        if (cache == nullptr) {
            set_error(errptr, "NewLRUCache returned null");
            return nullptr;
        }
        auto handle = std::make_unique<rocksdb_cache_t>();
        handle->rep = std::move(cache);
        *tier = new frk_tier{std::move(counters)};
        return handle.release();
    } catch (const std::exception& e) {
        set_error(errptr, e.what());
        return nullptr;
    }
}

/*
 * Sets table's persistent_cache to a NewPersistentCache in the existing directory dir of
 * bytes (its files made there), optimized_for_nvm as given; the default Env and no logger.
 * Returns 0 and its counters in *tier (free with frk_tier_destroy), or -1 and *errptr.
 */
int frk_table_set_persistent_cache(rocksdb_block_based_table_options_t* table, const char* dir,
                                   uint64_t bytes, unsigned char optimized_for_nvm,
                                   frk_tier** tier, char** errptr) {
    try {
        std::shared_ptr<PersistentCache> cache;
        Status s = ROCKSDB_NAMESPACE::NewPersistentCache(ROCKSDB_NAMESPACE::Env::Default(), dir,
                                                         bytes, nullptr, optimized_for_nvm != 0,
                                                         &cache);
        if (!s.ok()) {
            set_error(errptr, s.ToString());
            return -1;
        }
        auto counters = std::make_shared<Counters>();
        table->rep.persistent_cache =
            std::make_shared<CountingPersistentCache>(std::move(cache), counters);
        *tier = new frk_tier{std::move(counters)};
        return 0;
    } catch (const std::exception& e) {
        set_error(errptr, e.what());
        return -1;
    }
}

/* The counts so far (each read on its own: a snapshot of a tier in use is not atomic). */
void frk_tier_counters_read(const frk_tier* tier, frk_tier_counters* out) {
    const Counters& c = *tier->counters;
    out->lookups = c.lookups.load(std::memory_order_relaxed);
    out->hits = c.hits.load(std::memory_order_relaxed);
    out->inserts = c.inserts.load(std::memory_order_relaxed);
    out->refused = c.refused.load(std::memory_order_relaxed);
    out->bytes_written = c.bytes_written.load(std::memory_order_relaxed);
}

void frk_tier_destroy(frk_tier* tier) { delete tier; }

} /* extern "C" */
