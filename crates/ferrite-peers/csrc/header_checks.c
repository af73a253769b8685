/*
 * header_checks.c: ties the constants and layouts that the Rust declarations in src/sys/
 * copy from the engines' headers to the headers themselves. Nothing here runs; if a header disagrees with the Rust
 * side, the `link` build fails here instead of misbehaving at run time.
 */

#include <stddef.h>

#include <lmdb.h>
#include <rocksdb/c.h>
#include <sqlite3.h>
#include <wiredtiger.h>

/* src/sys/lmdb.rs */
_Static_assert(MDB_VERSION_MAJOR == 0 && MDB_VERSION_MINOR == 9, "written against LMDB 0.9");
_Static_assert(MDB_NOSYNC == 0x10000, "MDB_NOSYNC");
_Static_assert(MDB_RDONLY == 0x20000, "MDB_RDONLY");
_Static_assert(MDB_NOMETASYNC == 0x40000, "MDB_NOMETASYNC");
_Static_assert(MDB_NOTLS == 0x200000, "MDB_NOTLS");
_Static_assert(MDB_NORDAHEAD == 0x800000, "MDB_NORDAHEAD");
_Static_assert(MDB_SUCCESS == 0, "MDB_SUCCESS");
_Static_assert(MDB_NOTFOUND == -30798, "MDB_NOTFOUND");
_Static_assert(MDB_FIRST == 0, "MDB_FIRST");
_Static_assert(MDB_NEXT == 8, "MDB_NEXT");
_Static_assert(MDB_SET_RANGE == 17, "MDB_SET_RANGE");
_Static_assert(sizeof(MDB_cursor_op) == sizeof(int), "MDB_cursor_op is a C int");
_Static_assert(sizeof(MDB_dbi) == 4, "MDB_dbi is a c_uint");
_Static_assert(sizeof(mdb_mode_t) == 4, "mdb_mode_t is a c_uint");
_Static_assert(sizeof(MDB_val) == 2 * sizeof(void *), "MDB_val layout");
_Static_assert(offsetof(MDB_val, mv_size) == 0, "MDB_val.mv_size first");
_Static_assert(offsetof(MDB_val, mv_data) == sizeof(size_t), "MDB_val.mv_data second");

/* src/sys/rocksdb.rs */
_Static_assert(rocksdb_no_compression == 0, "rocksdb_no_compression");
_Static_assert(rocksdb_block_based_table_index_type_two_level_index_search == 2,
               "rocksdb_block_based_table_index_type_two_level_index_search");

/* src/sys/wiredtiger.rs */
_Static_assert(WT_NOTFOUND == -31803, "WT_NOTFOUND");
_Static_assert(WT_ROLLBACK == -31800, "WT_ROLLBACK");
_Static_assert(WT_STAT_CONN_CACHE_PAGES_REQUESTED == 1125,
               "WT_STAT_CONN_CACHE_PAGES_REQUESTED");
_Static_assert(WT_STAT_CONN_CACHE_READ == 1117, "WT_STAT_CONN_CACHE_READ");
_Static_assert(WT_STAT_CONN_CACHE_BYTES_READ == 1040, "WT_STAT_CONN_CACHE_BYTES_READ");
_Static_assert(WT_STAT_CONN_CACHE_WRITE == 1129, "WT_STAT_CONN_CACHE_WRITE");
_Static_assert(WT_STAT_CONN_CACHE_BYTES_WRITE == 1041, "WT_STAT_CONN_CACHE_BYTES_WRITE");
_Static_assert(WT_STAT_CONN_CACHE_EVICTION_APP == 1112, "WT_STAT_CONN_CACHE_EVICTION_APP");

/* src/sys/sqlite.rs */
_Static_assert(SQLITE_VERSION_NUMBER >= 3037000, "written against SQLite 3.40 (3.37 or later)");
_Static_assert(SQLITE_OK == 0, "SQLITE_OK");
_Static_assert(SQLITE_ABORT == 4, "SQLITE_ABORT");
_Static_assert(SQLITE_ROW == 100, "SQLITE_ROW");
_Static_assert(SQLITE_DONE == 101, "SQLITE_DONE");
_Static_assert(SQLITE_OPEN_READWRITE == 0x00000002, "SQLITE_OPEN_READWRITE");
_Static_assert(SQLITE_OPEN_CREATE == 0x00000004, "SQLITE_OPEN_CREATE");
_Static_assert(SQLITE_OPEN_NOMUTEX == 0x00008000, "SQLITE_OPEN_NOMUTEX");
_Static_assert(SQLITE_LIMIT_LENGTH == 0, "SQLITE_LIMIT_LENGTH");
_Static_assert(sizeof(sqlite3_int64) == 8, "sqlite3_int64 is an i64");
