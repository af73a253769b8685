/*
 * rocksdb_txn.cc: what RocksDB's C API (rocksdb/c.h, 7.8) lacks for a pessimistic
 * TransactionDB, as plain C functions for src/rocksdb.rs.
 *
 * The C API opens a TransactionDB (rocksdb_transactiondb_open) and offers get, put, write,
 * delete, iterators, flush and properties on it, but no compact_range, and, unlike the
 * optimistic one (rocksdb_optimistictransactiondb_get_base_db), no rocksdb_t handle to use the
 * ordinary calls with. A TransactionDB is a DB (a StackableDB over the base database), so
 * frk_transactiondb_as_db hands out a rocksdb_t whose rep is the TransactionDB itself: every
 * rocksdb_* call src/rocksdb.rs already makes then works on it, through the TransactionDB's
 * overrides (its Put, Delete and Write take the keys' locks, as rocksdb_transactiondb_put
 * would) or, for what it does not override (Get, NewIterator, Flush, CompactRange,
 * GetIntProperty), straight to the base database.
 *
 * Like rocksdb_tier.cc this copies two private struct layouts of RocksDB 7.8's db/c.cc
 * (rocksdb_t and rocksdb_transactiondb_t, each a struct with one pointer, `rep`); the #error
 * admits that one version only.
 */

#include <rocksdb/c.h>
#include <rocksdb/db.h>
#include <rocksdb/utilities/transaction_db.h>
#include <rocksdb/version.h>

#if ROCKSDB_MAJOR != 7 || ROCKSDB_MINOR != 8
#error "rocksdb_txn.cc copies struct layouts from RocksDB 7.8's db/c.cc: check them first"
#endif

/* As RocksDB 7.8's db/c.cc defines them (see the top of this file). */
struct rocksdb_t {
    ROCKSDB_NAMESPACE::DB* rep;
};
struct rocksdb_transactiondb_t {
    ROCKSDB_NAMESPACE::TransactionDB* rep;
};

extern "C" {

/* A new handle on txn_db as a DB; free it with frk_db_handle_free before closing txn_db. */
rocksdb_t* frk_transactiondb_as_db(rocksdb_transactiondb_t* txn_db) {
    if (txn_db == nullptr) {
        return nullptr;
    }
    return new rocksdb_t{txn_db->rep};
}

/* Frees the handle only: the database stays open (rocksdb_transactiondb_close closes it). */
void frk_db_handle_free(rocksdb_t* db) { delete db; }

} /* extern "C" */
