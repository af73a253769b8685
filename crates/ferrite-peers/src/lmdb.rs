//! LMDB (the system's liblmdb, 0.9.24 on Debian 12): a copy-on-write B+tree in one memory map.

// Every method is a call into liblmdb through `crate::sys::lmdb`.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::{Mutex, MutexGuard, PoisonError};

use libc::c_int;

use crate::sys::bytes;
use crate::sys::lmdb::*;
use crate::{dir, PeerConfig, PeerError};

const NAME: &str = "lmdb";
/// Reader slots in the lock file: the most read transactions alive at once.
const MAX_READERS: u32 = 1024;
/// Permissions of `data.mdb` and `lock.mdb` when created.
const FILE_MODE: mdb_mode_t = 0o644;

/// An LMDB environment with its main (unnamed) database.
#[derive(Debug)]
pub struct Lmdb {
    env: NonNull<MDB_env>,
    dbi: MDB_dbi,
    /// Read transactions between uses, reset (holding no snapshot, but keeping their reader
    /// slot): `mdb_txn_renew` is cheaper than `mdb_txn_begin`. Grows to the most threads that
    /// ever read at once.
    idle_readers: Mutex<Vec<ReadTxn>>,
    description: String,
}

// SAFETY: the environment handle is thread-safe for beginning transactions; opened with
// MDB_NOTLS, read transactions are tied to their `MDB_txn` object rather than to a thread, so
// the pooled ones may move between threads, and a write transaction lives within one call on
// one thread. `dbi` is a plain number valid for the environment's life.
unsafe impl Send for Lmdb {}
// SAFETY: as for `Send`: each call uses its own transaction; the pool is behind a mutex.
unsafe impl Sync for Lmdb {}

impl Lmdb {
    /// Opens (creating if missing) the environment in `dir` (`data.mdb`, `lock.mdb`) with:
    /// - `mdb_env_set_mapsize(map_bytes)`: the most the database can ever hold (a sparse
    ///   reservation of address space, not memory); `mdb_env_set_maxreaders(1024)`;
    /// - `mdb_env_open` flags `MDB_NOTLS | MDB_NORDAHEAD`, plus `MDB_NOSYNC | MDB_NOMETASYNC`
    ///   unless `sync` (then every commit is durable when it returns; otherwise at
    ///   [`flush`](Self::flush), i.e. `mdb_env_sync`); file mode 0644;
    /// - one read transaction per get / scan (reset and renewed from a pool), one write
    ///   transaction per put / delete / put_batch (LMDB runs one writer at a time).
    ///
    /// Not applicable, so ignored: `log` (LMDB has no log: commits write the tree's new pages
    /// and a meta page), `cache_bytes` (no cache of its own: reads go through the memory map
    /// and the OS page cache) and `direct_io` (a memory map cannot bypass the page cache).
    /// Refused: a `tier` (LMDB has no cache to put a second tier under).
    pub fn open(dir: &Path, config: &PeerConfig) -> Result<Self, PeerError> {
        if config.tier.is_some() {
            return Err(PeerError::Invalid {
                engine: NAME,
                reason: "LMDB has no cache of its own to put a second tier under".to_string(),
            });
        }
        let map_bytes = usize::try_from(config.map_bytes).map_err(|_| PeerError::Invalid {
            engine: NAME,
            reason: format!("map_bytes {} is too large", config.map_bytes),
        })?;
        let path = dir::prepare(NAME, dir)?;
        let mut flags = MDB_NOTLS | MDB_NORDAHEAD;
        if !config.sync {
            flags |= MDB_NOSYNC | MDB_NOMETASYNC;
        }

        let mut env = ptr::null_mut();
        // SAFETY: `env` is an out pointer, filled in on success.
        check("mdb_env_create", unsafe { mdb_env_create(&mut env) })?;
        let env = NonNull::new(env).expect("mdb_env_create succeeded with a null environment");
        // Owns the environment until it is handed to `Lmdb`: closed on any error below.
        let mut lmdb =
            Lmdb { env, dbi: 0, idle_readers: Mutex::new(Vec::new()), description: String::new() };
        // SAFETY: a fresh, not yet opened environment: the settings are allowed now; `path`
        // is NUL-terminated.
        unsafe {
            check("mdb_env_set_mapsize", mdb_env_set_mapsize(env.as_ptr(), map_bytes))?;
            check("mdb_env_set_maxreaders", mdb_env_set_maxreaders(env.as_ptr(), MAX_READERS))?;
            check("mdb_env_open", mdb_env_open(env.as_ptr(), path.as_ptr(), flags, FILE_MODE))?;
        }
        let dbi = lmdb.write(|txn| {
            let mut dbi = 0;
            // SAFETY: a live write transaction; a null name is the main database, which
            // always exists.
            check("mdb_dbi_open", unsafe { mdb_dbi_open(txn, ptr::null(), 0, &mut dbi) })?;
            Ok(dbi)
        })?;

        // SAFETY: `mdb_version` returns a static NUL-terminated string; the out pointers may
        // be null.
        let version = unsafe {
            CStr::from_ptr(mdb_version(ptr::null_mut(), ptr::null_mut(), ptr::null_mut()))
        };
        let sync_flags = if config.sync { "" } else { "|MDB_NOSYNC|MDB_NOMETASYNC" };
        lmdb.dbi = dbi;
        lmdb.description = format!(
            "lmdb ({version}): flags=MDB_NOTLS|MDB_NORDAHEAD{sync_flags}, mapsize={map_bytes}, \
             maxreaders={MAX_READERS}, main database, read txn per get/scan (pooled, \
             reset/renewed), write txn per put/delete/put_batch; no log (log ignored), no own \
             cache (cache_bytes ignored: reads use the memory map and the OS page cache), \
             no direct I/O (a memory map cannot bypass the page cache: direct_io ignored)",
            version = version.to_string_lossy(),
        );
        Ok(lmdb)
    }

    /// "lmdb".
    pub fn name(&self) -> &'static str {
        NAME
    }

    /// Copies the value of `key` into `out` (replacing its content); false if there is none.
    pub fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, PeerError> {
        self.read(|txn| {
            let mut key = val(key);
            let mut value = val(&[]);
            // SAFETY: a live read transaction and this environment's dbi; `key` points at the
            // caller's bytes for the call.
            match unsafe { mdb_get(txn, self.dbi, &mut key, &mut value) } {
                MDB_NOTFOUND => Ok(false),
                rc => {
                    check("mdb_get", rc)?;
                    out.clear();
                    // SAFETY: on success `value` points into the map, valid until the
                    // transaction ends (after this closure).
                    out.extend_from_slice(unsafe { bytes(value.mv_data, value.mv_size) });
                    Ok(true)
                }
            }
        })
    }

    /// Inserts or overwrites `key` in its own write transaction.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<(), PeerError> {
        self.write(|txn| self.put_in(txn, key, value))
    }

    /// Inserts or overwrites every entry in one write transaction.
    pub fn put_batch(&self, entries: &[(&[u8], &[u8])]) -> Result<(), PeerError> {
        self.write(|txn| entries.iter().try_for_each(|(key, value)| self.put_in(txn, key, value)))
    }

    /// Deletes `key`; true if it was there.
    pub fn delete(&self, key: &[u8]) -> Result<bool, PeerError> {
        self.write(|txn| {
            let mut key = val(key);
            // SAFETY: a live write transaction; a null data pointer deletes the key's one
            // value (the database has no duplicates).
            match unsafe { mdb_del(txn, self.dbi, &mut key, ptr::null_mut()) } {
                MDB_NOTFOUND => Ok(false),
                rc => check("mdb_del", rc).map(|()| true),
            }
        })
    }

    /// Visits up to `limit` entries with key >= `start`, in key order, from one snapshot;
    /// returns how many.
    pub fn scan(
        &self,
        start: &[u8],
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize, PeerError> {
        self.read(|txn| {
            let mut cursor = ptr::null_mut();
            // SAFETY: a live read transaction; `cursor` is an out pointer.
            check("mdb_cursor_open", unsafe { mdb_cursor_open(txn, self.dbi, &mut cursor) })?;
            let cursor = Cursor(cursor);
            // LMDB rejects empty keys, so an empty start is "from the first key".
            let mut op = if start.is_empty() { MDB_FIRST } else { MDB_SET_RANGE };
            let mut key = val(start);
            let mut value = val(&[]);
            let mut visited = 0;
            while visited < limit {
                // SAFETY: a live cursor; for MDB_SET_RANGE `key` points at `start` for the
                // call; afterwards LMDB overwrites `key` and `value` with the entry found.
                match unsafe { mdb_cursor_get(cursor.0, &mut key, &mut value, op) } {
                    MDB_NOTFOUND => break,
                    rc => check("mdb_cursor_get", rc)?,
                }
                // SAFETY: both point into the map, valid until the transaction ends (after
                // this closure).
                unsafe {
                    visit(bytes(key.mv_data, key.mv_size), bytes(value.mv_data, value.mv_size))
                };
                visited += 1;
                op = MDB_NEXT;
            }
            Ok(visited)
        })
    }

    /// `mdb_env_sync(force)`: everything committed is on disk (needed when opened without
    /// `sync`).
    pub fn flush(&self) -> Result<(), PeerError> {
        // SAFETY: a live environment.
        check("mdb_env_sync", unsafe { mdb_env_sync(self.env.as_ptr(), 1) })
    }

    /// Every option `open` set, on one line, with what LMDB cannot do.
    pub fn describe_config(&self) -> String {
        self.description.clone()
    }

    fn put_in(&self, txn: *mut MDB_txn, key: &[u8], value: &[u8]) -> Result<(), PeerError> {
        let (mut key, mut value) = (val(key), val(value));
        // SAFETY: a live write transaction; `key` and `value` point at the caller's bytes,
        // which LMDB copies into the map.
        check("mdb_put", unsafe { mdb_put(txn, self.dbi, &mut key, &mut value, 0) })
    }

    /// Runs `f` in a read transaction from the pool (renewed: a fresh snapshot), then resets it
    /// and returns it to the pool, also when `f` fails or panics.
    fn read<R>(
        &self,
        f: impl FnOnce(*mut MDB_txn) -> Result<R, PeerError>,
    ) -> Result<R, PeerError> {
        let idle = self.lock_idle_readers().pop();
        let txn = match idle {
            Some(txn) => {
                // SAFETY: a reset read transaction of this environment.
                if let Err(e) = check("mdb_txn_renew", unsafe { mdb_txn_renew(txn.0.as_ptr()) }) {
                    // SAFETY: aborting frees a transaction in any state; it is not used after.
                    unsafe { mdb_txn_abort(txn.0.as_ptr()) };
                    return Err(e);
                }
                txn
            }
            None => {
                let mut txn = ptr::null_mut();
                // SAFETY: a live environment; `txn` is an out pointer.
                let rc = unsafe {
                    mdb_txn_begin(self.env.as_ptr(), ptr::null_mut(), MDB_RDONLY, &mut txn)
                };
                check("mdb_txn_begin", rc)?;
                ReadTxn(NonNull::new(txn).expect("mdb_txn_begin succeeded with a null transaction"))
            }
        };
        let ptr = txn.0.as_ptr();
        let _active = ActiveRead { lmdb: self, txn: Some(txn) };
        f(ptr)
    }

    /// Runs `f` in a new write transaction, committed if `f` succeeds and aborted otherwise.
    fn write<R>(
        &self,
        f: impl FnOnce(*mut MDB_txn) -> Result<R, PeerError>,
    ) -> Result<R, PeerError> {
        let mut txn = ptr::null_mut();
        // SAFETY: a live environment; `txn` is an out pointer. LMDB blocks here while another
        // thread's write transaction is open.
        check("mdb_txn_begin", unsafe {
            mdb_txn_begin(self.env.as_ptr(), ptr::null_mut(), 0, &mut txn)
        })?;
        let result = f(txn);
        match result {
            // SAFETY: commit frees the transaction, whether it succeeds or not.
            Ok(value) => check("mdb_txn_commit", unsafe { mdb_txn_commit(txn) }).map(|()| value),
            Err(e) => {
                // SAFETY: a live transaction, freed here and not used after.
                unsafe { mdb_txn_abort(txn) };
                Err(e)
            }
        }
    }

    fn lock_idle_readers(&self) -> MutexGuard<'_, Vec<ReadTxn>> {
        // The pool only holds reset transactions: one left behind by a panic is still sound.
        self.idle_readers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Lmdb {
    fn drop(&mut self) {
        // SAFETY: no transaction is active (each lives within a `&self` call), so the pooled
        // ones are all reset: abort frees them; then the environment is closed, once.
        unsafe {
            for txn in self.lock_idle_readers().drain(..) {
                mdb_txn_abort(txn.0.as_ptr());
            }
            mdb_env_close(self.env.as_ptr());
        }
    }
}

/// A read-only transaction of the environment, reset (no snapshot) while in the pool.
#[derive(Debug)]
struct ReadTxn(NonNull<MDB_txn>);

// SAFETY: with MDB_NOTLS a read transaction is not tied to the thread that began it.
unsafe impl Send for ReadTxn {}

/// A renewed read transaction in use; reset and returned to the pool on drop.
struct ActiveRead<'a> {
    lmdb: &'a Lmdb,
    txn: Option<ReadTxn>,
}

impl Drop for ActiveRead<'_> {
    fn drop(&mut self) {
        if let Some(txn) = self.txn.take() {
            // SAFETY: an active read transaction; reset ends its snapshot and keeps the handle
            // (and reader slot) for `mdb_txn_renew`.
            unsafe { mdb_txn_reset(txn.0.as_ptr()) };
            self.lmdb.lock_idle_readers().push(txn);
        }
    }
}

/// A cursor of a read transaction, closed on drop (read-only cursors must be closed
/// explicitly, before or after their transaction ends).
struct Cursor(*mut MDB_cursor);

impl Drop for Cursor {
    fn drop(&mut self) {
        // SAFETY: from `mdb_cursor_open`, closed once.
        unsafe { mdb_cursor_close(self.0) };
    }
}

/// An `MDB_val` over `bytes`. LMDB never writes through `mv_data` of an input value.
fn val(bytes: &[u8]) -> MDB_val {
    MDB_val { mv_size: bytes.len(), mv_data: bytes.as_ptr().cast_mut().cast() }
}

fn check(call: &'static str, rc: c_int) -> Result<(), PeerError> {
    if rc == MDB_SUCCESS {
        return Ok(());
    }
    // SAFETY: `mdb_strerror` returns a NUL-terminated string: a static one for LMDB's codes,
    // libc's `strerror` text for system errors.
    let message = unsafe { CStr::from_ptr(mdb_strerror(rc)) }.to_string_lossy().into_owned();
    Err(PeerError::Engine { engine: NAME, call, code: Some(rc), message })
}
