//! The WiredTiger shim (`csrc/wt_shim.c`, over WiredTiger 3.2.1's `wiredtiger.h`): plain C
//! functions in place of WiredTiger's method tables and varargs. Handles are opaque; keys and
//! values are (pointer, length). Each function returns WiredTiger's code (0 is success); the
//! messages WiredTiger reported during the thread's last shim call are in `fwt_last_message`.

// Declaring foreign functions is unsafe code; calling them is confined to `crate::wiredtiger`.
#![allow(unsafe_code)]
// The C names, kept as spelled in the header so they can be grepped for.
#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_void, size_t};

#[repr(C)]
pub(crate) struct WT_CONNECTION {
    _private: [u8; 0],
}

#[repr(C)]
pub(crate) struct WT_SESSION {
    _private: [u8; 0],
}

#[repr(C)]
pub(crate) struct WT_CURSOR {
    _private: [u8; 0],
}

/// One entry of `fwt_put_batch`; the shim has the same struct (`fwt_entry`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct fwt_entry {
    pub(crate) key: *const c_void,
    pub(crate) key_len: size_t,
    pub(crate) value: *const c_void,
    pub(crate) value_len: size_t,
}

/// The item is not in the table (or the cursor moved past the last one).
pub(crate) const WT_NOTFOUND: c_int = -31803;
/// The operation met another transaction's update: roll the transaction back.
pub(crate) const WT_ROLLBACK: c_int = -31800;

// Connection statistics (`WT_STAT_CONN_*`, keys of a `statistics:` cursor), by the
// description WiredTiger gives each.
/// "cache: pages requested from the cache"
pub(crate) const WT_STAT_CONN_CACHE_PAGES_REQUESTED: c_int = 1125;
/// "cache: pages read into cache"
pub(crate) const WT_STAT_CONN_CACHE_READ: c_int = 1117;
/// "cache: bytes read into cache"
pub(crate) const WT_STAT_CONN_CACHE_BYTES_READ: c_int = 1040;
/// "cache: pages written from cache"
pub(crate) const WT_STAT_CONN_CACHE_WRITE: c_int = 1129;
/// "cache: bytes written from cache"
pub(crate) const WT_STAT_CONN_CACHE_BYTES_WRITE: c_int = 1041;
/// "cache: pages evicted by application threads"
pub(crate) const WT_STAT_CONN_CACHE_EVICTION_APP: c_int = 1112;

// The shim is compiled by build.rs into a static library; WiredTiger is linked after it.
extern "C" {
    /// `wiredtiger_version`: "WiredTiger 3.2.1: (August 27, 2019)".
    pub(crate) fn fwt_version() -> *const c_char;
    pub(crate) fn fwt_last_message() -> *const c_char;
    pub(crate) fn fwt_strerror(error: c_int) -> *const c_char;

    pub(crate) fn fwt_open(
        home: *const c_char,
        config: *const c_char,
        uri: *const c_char,
        table_config: *const c_char,
        conn: *mut *mut WT_CONNECTION,
    ) -> c_int;
    pub(crate) fn fwt_close(conn: *mut WT_CONNECTION) -> c_int;

    pub(crate) fn fwt_session_open(
        conn: *mut WT_CONNECTION,
        uri: *const c_char,
        session: *mut *mut WT_SESSION,
        rw: *mut *mut WT_CURSOR,
        del: *mut *mut WT_CURSOR,
    ) -> c_int;
    pub(crate) fn fwt_checkpoint(session: *mut WT_SESSION) -> c_int;

    pub(crate) fn fwt_get(
        cursor: *mut WT_CURSOR,
        key: *const c_void,
        key_len: size_t,
        value: *mut *const c_void,
        value_len: *mut size_t,
    ) -> c_int;
    pub(crate) fn fwt_put(
        cursor: *mut WT_CURSOR,
        key: *const c_void,
        key_len: size_t,
        value: *const c_void,
        value_len: size_t,
    ) -> c_int;
    pub(crate) fn fwt_remove(cursor: *mut WT_CURSOR, key: *const c_void, key_len: size_t) -> c_int;
    pub(crate) fn fwt_put_batch(
        session: *mut WT_SESSION,
        cursor: *mut WT_CURSOR,
        entries: *const fwt_entry,
        count: size_t,
    ) -> c_int;

    pub(crate) fn fwt_seek(cursor: *mut WT_CURSOR, key: *const c_void, key_len: size_t) -> c_int;
    pub(crate) fn fwt_next(cursor: *mut WT_CURSOR) -> c_int;
    pub(crate) fn fwt_current(
        cursor: *mut WT_CURSOR,
        key: *mut *const c_void,
        key_len: *mut size_t,
        value: *mut *const c_void,
        value_len: *mut size_t,
    ) -> c_int;
    pub(crate) fn fwt_reset(cursor: *mut WT_CURSOR) -> c_int;
    pub(crate) fn fwt_begin(session: *mut WT_SESSION, config: *const c_char) -> c_int;
    pub(crate) fn fwt_commit(session: *mut WT_SESSION) -> c_int;
    pub(crate) fn fwt_rollback(session: *mut WT_SESSION) -> c_int;
    pub(crate) fn fwt_txn_put(
        cursor: *mut WT_CURSOR,
        key: *const c_void,
        key_len: size_t,
        value: *const c_void,
        value_len: size_t,
    ) -> c_int;
    pub(crate) fn fwt_txn_remove(
        cursor: *mut WT_CURSOR,
        key: *const c_void,
        key_len: size_t,
    ) -> c_int;
    pub(crate) fn fwt_seek_before(
        cursor: *mut WT_CURSOR,
        key: *const c_void,
        key_len: size_t,
    ) -> c_int;
    pub(crate) fn fwt_prev(cursor: *mut WT_CURSOR) -> c_int;
    /// The connection statistics `keys[..count]` into `values[..count]`, each checked to be
    /// described as `names[i]` (else `EINVAL`).
    pub(crate) fn fwt_stats(
        session: *mut WT_SESSION,
        keys: *const c_int,
        names: *const *const c_char,
        values: *mut i64,
        count: size_t,
    ) -> c_int;
}
