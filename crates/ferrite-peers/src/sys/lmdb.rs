//! The part of LMDB's C API (`lmdb.h`, LMDB 0.9.24 on Debian 12) that `crate::lmdb` uses.
//! Functions return 0 (`MDB_SUCCESS`) or an error code for `mdb_strerror`.

// Declaring foreign functions is unsafe code; calling them is confined to `crate::lmdb`.
#![allow(unsafe_code)]
// The C names, kept as spelled in the header so they can be grepped for.
#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_uint, c_void, size_t};

#[repr(C)]
pub(crate) struct MDB_env {
    _private: [u8; 0],
}

#[repr(C)]
pub(crate) struct MDB_txn {
    _private: [u8; 0],
}

#[repr(C)]
pub(crate) struct MDB_cursor {
    _private: [u8; 0],
}

/// A database handle inside an environment.
pub(crate) type MDB_dbi = c_uint;

/// `mdb_mode_t` is `mode_t` on POSIX.
pub(crate) type mdb_mode_t = c_uint;

/// A key or value: `{ size_t mv_size; void *mv_data; }`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct MDB_val {
    pub(crate) mv_size: size_t,
    pub(crate) mv_data: *mut c_void,
}

// Environment flags (mdb_env_open).
/// Don't fsync after commit.
pub(crate) const MDB_NOSYNC: c_uint = 0x10000;
/// Read only (here: for read transactions, mdb_txn_begin).
pub(crate) const MDB_RDONLY: c_uint = 0x20000;
/// Don't fsync the meta page after commit.
pub(crate) const MDB_NOMETASYNC: c_uint = 0x40000;
/// Tie reader slots to transaction objects, not threads.
pub(crate) const MDB_NOTLS: c_uint = 0x200000;
/// No readahead on the memory map.
pub(crate) const MDB_NORDAHEAD: c_uint = 0x800000;

// Return codes.
pub(crate) const MDB_SUCCESS: c_int = 0;
/// Key/data pair not found (EOF).
pub(crate) const MDB_NOTFOUND: c_int = -30798;

// `MDB_cursor_op`, a C enum (int).
pub(crate) type MDB_cursor_op = c_int;
pub(crate) const MDB_FIRST: MDB_cursor_op = 0;
pub(crate) const MDB_NEXT: MDB_cursor_op = 8;
/// Position at the first key greater than or equal to the given key.
pub(crate) const MDB_SET_RANGE: MDB_cursor_op = 17;

// Linked by build.rs (`cargo:rustc-link-lib=lmdb`).
extern "C" {
    pub(crate) fn mdb_version(
        major: *mut c_int,
        minor: *mut c_int,
        patch: *mut c_int,
    ) -> *const c_char;
    /// A static string (or `strerror`'s) for an error code.
    pub(crate) fn mdb_strerror(err: c_int) -> *const c_char;

    pub(crate) fn mdb_env_create(env: *mut *mut MDB_env) -> c_int;
    pub(crate) fn mdb_env_set_mapsize(env: *mut MDB_env, size: size_t) -> c_int;
    pub(crate) fn mdb_env_set_maxreaders(env: *mut MDB_env, readers: c_uint) -> c_int;
    pub(crate) fn mdb_env_open(
        env: *mut MDB_env,
        path: *const c_char,
        flags: c_uint,
        mode: mdb_mode_t,
    ) -> c_int;
    pub(crate) fn mdb_env_sync(env: *mut MDB_env, force: c_int) -> c_int;
    pub(crate) fn mdb_env_close(env: *mut MDB_env);

    pub(crate) fn mdb_txn_begin(
        env: *mut MDB_env,
        parent: *mut MDB_txn,
        flags: c_uint,
        txn: *mut *mut MDB_txn,
    ) -> c_int;
    pub(crate) fn mdb_txn_commit(txn: *mut MDB_txn) -> c_int;
    pub(crate) fn mdb_txn_abort(txn: *mut MDB_txn);
    pub(crate) fn mdb_txn_reset(txn: *mut MDB_txn);
    pub(crate) fn mdb_txn_renew(txn: *mut MDB_txn) -> c_int;

    pub(crate) fn mdb_dbi_open(
        txn: *mut MDB_txn,
        name: *const c_char,
        flags: c_uint,
        dbi: *mut MDB_dbi,
    ) -> c_int;
    pub(crate) fn mdb_get(
        txn: *mut MDB_txn,
        dbi: MDB_dbi,
        key: *mut MDB_val,
        data: *mut MDB_val,
    ) -> c_int;
    pub(crate) fn mdb_put(
        txn: *mut MDB_txn,
        dbi: MDB_dbi,
        key: *mut MDB_val,
        data: *mut MDB_val,
        flags: c_uint,
    ) -> c_int;
    pub(crate) fn mdb_del(
        txn: *mut MDB_txn,
        dbi: MDB_dbi,
        key: *mut MDB_val,
        data: *mut MDB_val,
    ) -> c_int;

    pub(crate) fn mdb_cursor_open(
        txn: *mut MDB_txn,
        dbi: MDB_dbi,
        cursor: *mut *mut MDB_cursor,
    ) -> c_int;
    pub(crate) fn mdb_cursor_get(
        cursor: *mut MDB_cursor,
        key: *mut MDB_val,
        data: *mut MDB_val,
        op: MDB_cursor_op,
    ) -> c_int;
    pub(crate) fn mdb_cursor_close(cursor: *mut MDB_cursor);
}
