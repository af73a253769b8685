/*
 * rocksdb_stats.cc: RocksDB's statistics at the tickers-only level, which its C API
 * (rocksdb/c.h, 7.8) cannot ask for, as plain C functions for src/rocksdb.rs.
 *
 * rocksdb_options_enable_statistics sets Options::statistics to CreateDBStatistics() at its
 * default level, kExceptDetailedTimers: histograms and timers too (a clock read around every
 * Get and Write), which a benchmark would pay for on every call. Its counters, the tickers, are
 * all the peer's sanity checks need (block cache hits and misses, compaction bytes), so this
 * sets the level to kExceptHistogramOrTimers: tickers only, each an add to a per-core counter.
 * Tickers are read by their names in RocksDB's own TickersNameMap ("rocksdb.block.cache.miss"),
 * so the names src/rocksdb.rs prints are RocksDB's and no enum value is copied here.
 *
 * Like rocksdb_memory.cc this copies the private layout of rocksdb_options_t from RocksDB 7.8's
 * db/c.cc (an Options `rep`); the #error admits that one version only, and
 * frk_options_enable_ticker_statistics compares fields read through the copied layout with the
 * C API's getters before it writes anything.
 *
 * No C++ exception crosses into Rust: each function catches them and reports a message in
 * *errptr (malloc'ed, freed by the caller with rocksdb_free, like the C API's errors).
 */

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include <rocksdb/c.h>
#include <rocksdb/options.h>
#include <rocksdb/statistics.h>
#include <rocksdb/version.h>

#if ROCKSDB_MAJOR != 7 || ROCKSDB_MINOR != 8
#error "rocksdb_stats.cc copies a struct layout from RocksDB 7.8's db/c.cc: check it first"
#endif

/* As RocksDB 7.8's db/c.cc defines it (see the top of this file). */
struct rocksdb_options_t {
    ROCKSDB_NAMESPACE::Options rep;
};

/* The statistics object, shared with the Options (and the database opened with them):
 * readable until frk_statistics_destroy, whether or not the database outlives it. */
struct frk_statistics {
    std::shared_ptr<ROCKSDB_NAMESPACE::Statistics> rep;
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
 * Sets options' statistics to CreateDBStatistics() at StatsLevel kExceptHistogramOrTimers
 * (tickers only). Returns a handle on it (free with frk_statistics_destroy), or null and
 * *errptr, with options unchanged.
 */
frk_statistics* frk_options_enable_ticker_statistics(rocksdb_options_t* options, char** errptr) {
    try {
        if (options == nullptr) {
            set_error(errptr, "frk_options_enable_ticker_statistics: null options");
            return nullptr;
        }
        /* The copied layout, checked against the C API's own accessors. */
        if (options->rep.write_buffer_size != rocksdb_options_get_write_buffer_size(options) ||
            options->rep.max_write_buffer_number !=
                rocksdb_options_get_max_write_buffer_number(options) ||
            options->rep.max_open_files != rocksdb_options_get_max_open_files(options)) {
            set_error(errptr, "rocksdb_options_t is not laid out as rocksdb_stats.cc assumes "
                              "(RocksDB 7.8's db/c.cc)");
            return nullptr;
        }
        auto statistics = ROCKSDB_NAMESPACE::CreateDBStatistics();
        statistics->set_stats_level(ROCKSDB_NAMESPACE::StatsLevel::kExceptHistogramOrTimers);
        auto handle = std::make_unique<frk_statistics>();
        handle->rep = statistics;
        options->rep.statistics = std::move(statistics);
        return handle.release();
    } catch (const std::exception& e) {
        set_error(errptr, e.what());
        return nullptr;
    }
}

/*
 * The tickers named in names[0..count) into values[0..count), cumulative since the database
 * opened. Returns 0, or -1 and *errptr if a name is not one of RocksDB's tickers (values
 * then undefined).
 */
int frk_statistics_tickers(const frk_statistics* statistics, const char* const* names,
                           uint64_t* values, size_t count, char** errptr) {
    try {
        for (size_t i = 0; i < count; ++i) {
            bool found = false;
            for (const auto& ticker : ROCKSDB_NAMESPACE::TickersNameMap) {
                if (ticker.second == names[i]) {
                    values[i] = statistics->rep->getTickerCount(ticker.first);
                    found = true;
                    break;
                }
            }
            if (!found) {
                set_error(errptr, std::string("no RocksDB ticker is named ") + names[i]);
                return -1;
            }
        }
        return 0;
    } catch (const std::exception& e) {
        set_error(errptr, e.what());
        return -1;
    }
}

void frk_statistics_destroy(frk_statistics* statistics) { delete statistics; }

} /* extern "C" */
