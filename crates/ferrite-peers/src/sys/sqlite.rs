//! The part of SQLite's C API (`sqlite3.h`, SQLite 3.40 on Debian 12) that `crate::sqlite`
//! uses: a connection, prepared statements and incremental BLOB I/O. Functions return
//! `SQLITE_OK` (0) or an error code; the connection's message is `sqlite3_errmsg`.

// Declaring foreign functions is unsafe code; calling them is confined to `crate::sqlite`.
#![allow(unsafe_code)]
// The C names, kept as spelled in the header so they can be grepped for.
#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_uchar, c_void};

#[repr(C)]
pub(crate) struct sqlite3 {
    _private: [u8; 0],
}

#[repr(C)]
pub(crate) struct sqlite3_stmt {
    _private: [u8; 0],
}

#[repr(C)]
pub(crate) struct sqlite3_blob {
    _private: [u8; 0],
}

// Result codes.
pub(crate) const SQLITE_OK: c_int = 0;
/// A row of a statement is ready (`sqlite3_step`).
pub(crate) const SQLITE_ROW: c_int = 100;
/// A statement ran to its end (`sqlite3_step`).
pub(crate) const SQLITE_DONE: c_int = 101;
/// A BLOB handle expired: its row was changed by something other than the handle.
pub(crate) const SQLITE_ABORT: c_int = 4;

// `sqlite3_open_v2` flags.
pub(crate) const SQLITE_OPEN_READWRITE: c_int = 0x0000_0002;
pub(crate) const SQLITE_OPEN_CREATE: c_int = 0x0000_0004;
/// Multi-thread mode for this connection: no mutex of its own; one thread at a time uses it.
pub(crate) const SQLITE_OPEN_NOMUTEX: c_int = 0x0000_8000;

/// `sqlite3_limit` category: the largest string or BLOB.
pub(crate) const SQLITE_LIMIT_LENGTH: c_int = 0;

// Linked by build.rs (`cargo:rustc-link-lib=sqlite3`).
extern "C" {
    pub(crate) fn sqlite3_libversion() -> *const c_char;
    /// 0 when the library was built without any thread safety (SQLITE_THREADSAFE=0).
    pub(crate) fn sqlite3_threadsafe() -> c_int;
    pub(crate) fn sqlite3_open_v2(
        filename: *const c_char,
        db: *mut *mut sqlite3,
        flags: c_int,
        vfs: *const c_char,
    ) -> c_int;
    /// Closes once every statement and BLOB handle of the connection is finalised/closed.
    pub(crate) fn sqlite3_close_v2(db: *mut sqlite3) -> c_int;
    pub(crate) fn sqlite3_errmsg(db: *mut sqlite3) -> *const c_char;
    pub(crate) fn sqlite3_errstr(code: c_int) -> *const c_char;
    pub(crate) fn sqlite3_busy_timeout(db: *mut sqlite3, ms: c_int) -> c_int;
    /// With `new_value` < 0: returns the limit without changing it.
    pub(crate) fn sqlite3_limit(db: *mut sqlite3, id: c_int, new_value: c_int) -> c_int;

    pub(crate) fn sqlite3_prepare_v2(
        db: *mut sqlite3,
        sql: *const c_char,
        bytes: c_int,
        stmt: *mut *mut sqlite3_stmt,
        tail: *mut *const c_char,
    ) -> c_int;
    pub(crate) fn sqlite3_bind_int64(stmt: *mut sqlite3_stmt, index: c_int, value: i64) -> c_int;
    pub(crate) fn sqlite3_step(stmt: *mut sqlite3_stmt) -> c_int;
    pub(crate) fn sqlite3_reset(stmt: *mut sqlite3_stmt) -> c_int;
    pub(crate) fn sqlite3_finalize(stmt: *mut sqlite3_stmt) -> c_int;
    pub(crate) fn sqlite3_column_int64(stmt: *mut sqlite3_stmt, column: c_int) -> i64;
    /// Valid until the statement is stepped, reset or finalised; null for NULL.
    pub(crate) fn sqlite3_column_text(stmt: *mut sqlite3_stmt, column: c_int) -> *const c_uchar;

    pub(crate) fn sqlite3_blob_open(
        db: *mut sqlite3,
        database: *const c_char,
        table: *const c_char,
        column: *const c_char,
        row: i64,
        flags: c_int,
        blob: *mut *mut sqlite3_blob,
    ) -> c_int;
    /// Closes unconditionally, even when it returns an error; a null handle is a no-op.
    pub(crate) fn sqlite3_blob_close(blob: *mut sqlite3_blob) -> c_int;
    pub(crate) fn sqlite3_blob_read(
        blob: *mut sqlite3_blob,
        out: *mut c_void,
        n: c_int,
        offset: c_int,
    ) -> c_int;
    pub(crate) fn sqlite3_blob_write(
        blob: *mut sqlite3_blob,
        data: *const c_void,
        n: c_int,
        offset: c_int,
    ) -> c_int;
}
