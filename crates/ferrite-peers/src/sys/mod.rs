//! The engines' C functions, declared by hand from their headers (no bindgen). Only
//! declarations live here, and one helper; the safe wrappers are `crate::{rocksdb, wiredtiger,
//! lmdb, sqlite}`. The constants copied from the headers are checked against them by
//! `csrc/header_checks.c`.

// `bytes` builds a slice from a C pointer.
#![allow(unsafe_code)]

pub(crate) mod lmdb;
pub(crate) mod rocksdb;
pub(crate) mod sqlite;
pub(crate) mod wiredtiger;

/// `len` bytes at `data`, which may be null or dangling when `len` is 0 (C libraries return
/// empty items that way; `slice::from_raw_parts` wants a non-null, aligned pointer even then).
///
/// # Safety
/// When `len > 0`, `data` points at `len` readable bytes that stay unchanged for `'a`.
pub(crate) unsafe fn bytes<'a, T>(data: *const T, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(data.cast(), len) }
}
