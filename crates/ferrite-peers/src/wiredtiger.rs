//! WiredTiger (the system's libwiredtiger, 3.2.1 on Debian 12) through the C shim
//! `csrc/wt_shim.c`: one table of raw byte keys and values.
//!
//! A WiredTiger session (and its cursors) serves one thread at a time, so each handle keeps a
//! pool of sessions: a call takes one, uses it and puts it back. The pool grows to the most
//! threads that ever called at once, bounded by `session_max`.

// Every method is a call into the shim through `crate::sys::wiredtiger`.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, CStr, CString};
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::sys::bytes;
use crate::sys::wiredtiger::*;
use crate::{dir, CacheFills, CacheLookups, PeerConfig, PeerError, PeerStats};

const NAME: &str = "wiredtiger";
/// The table holding the data.
const TABLE_URI: &CStr = c"table:ferrite";
/// The most sessions, including WiredTiger's own threads (eviction, log, checkpoint).
const SESSION_MAX: u32 = 1024;
/// Eviction as WiredTiger's "Cache and eviction tuning" guide describes it, written out so that
/// every run prints it: background eviction keeps the cache at 80 % full and application
/// threads help only above 95 % (or above 20 % dirty; background work starts at 5 % dirty),
/// from one eviction thread up to eight. These are 3.2.1's own defaults, which the guide
/// suggests changing where application threads are pulled into eviction (latency spikes);
/// written out, every run's printed configuration says what eviction did.
const EVICTION: &str = "eviction=(threads_min=1,threads_max=8),eviction_target=80,\
                        eviction_trigger=95,eviction_dirty_target=5,eviction_dirty_trigger=20";
/// Row-store table of raw bytes, 4 KiB pages on disk (like the other engines and Ferrite), no
/// compression; an in-memory page is reconciled (written out) once it grows past 5 MB
/// (WiredTiger's default, clamped to [leaf_page_max, cache_size / 10]).
const TABLE_CONFIG: &str = "key_format=u,value_format=u,allocation_size=4KB,leaf_page_max=4KB,\
                            internal_page_max=4KB,memory_page_max=5MB,block_compressor=none";

/// The connection statistics [`WiredTiger::stats`] reads: (key, WiredTiger's description).
/// Pages requested from the cache are every page a cursor asked for (internal pages
/// included); pages read into the cache, the misses among them (and pages read by
/// WiredTiger's own threads); bytes, their in-memory size. Pages evicted by application
/// threads show a cache too small for its eviction threads to keep up.
const STATISTICS: [(c_int, &CStr); 6] = [
    (WT_STAT_CONN_CACHE_PAGES_REQUESTED, c"cache: pages requested from the cache"),
    (WT_STAT_CONN_CACHE_READ, c"cache: pages read into cache"),
    (WT_STAT_CONN_CACHE_BYTES_READ, c"cache: bytes read into cache"),
    (WT_STAT_CONN_CACHE_WRITE, c"cache: pages written from cache"),
    (WT_STAT_CONN_CACHE_BYTES_WRITE, c"cache: bytes written from cache"),
    (WT_STAT_CONN_CACHE_EVICTION_APP, c"cache: pages evicted by application threads"),
];

/// A WiredTiger database with one table.
#[derive(Debug)]
pub struct WiredTiger {
    conn: NonNull<WT_CONNECTION>,
    /// Sessions between calls, their cursors reset.
    idle_sessions: Mutex<Vec<Session>>,
    description: String,
}

// SAFETY: a WT_CONNECTION is thread-safe (WiredTiger's documented contract); sessions, which
// are not, are used by one thread at a time: each call takes one out of the pool.
unsafe impl Send for WiredTiger {}
// SAFETY: as for `Send`.
unsafe impl Sync for WiredTiger {}

impl WiredTiger {
    /// Opens (creating if missing) the database in `dir` with the connection config
    /// `create,config_base=false,use_environment=false,cache_size=<cache_bytes>,session_max=1024,
    /// ` + [`EVICTION`] + `,log=(enabled=<log>),transaction_sync=(enabled=<sync>,method=fsync),
    /// statistics=(fast)`, plus
    /// `direct_io=[data]` when `direct_io` (data files only; the log stays buffered), and the
    /// table `table:ferrite` created with `key_format=u,value_format=u,
    /// allocation_size=4KB,leaf_page_max=4KB,internal_page_max=4KB,memory_page_max=5MB,
    /// block_compressor=none`.
    ///
    /// Sessions are opened with `isolation=snapshot`; puts and deletes are auto-commit
    /// transactions, `put_batch` is one explicit transaction. With `sync` every commit fsyncs
    /// the log (`transaction_sync`), so `sync` needs `log`. Without the log, writes are durable
    /// at [`flush`](Self::flush) (a checkpoint) or close (which checkpoints).
    /// `use_environment=false`: `WIREDTIGER_CONFIG` in the environment cannot change the run;
    /// `config_base=false`: no `WiredTiger.basecfg` is written or read, every open passes the
    /// whole config (3.2.1 also rejects its own basecfg when it holds `use_environment`).
    /// `statistics=(fast)`: the inexpensive statistics (MongoDB's default), which
    /// [`stats`](Self::stats) reads.
    ///
    /// A `tier` is refused: WiredTiger 3.2.1 has no second cache tier (its `block_cache`
    /// connection option came with later releases).
    pub fn open(dir: &Path, config: &PeerConfig) -> Result<Self, PeerError> {
        if config.tier.is_some() {
            return Err(PeerError::Invalid {
                engine: NAME,
                reason: "WiredTiger 3.2.1 has no second cache tier (no block_cache option)"
                    .to_string(),
            });
        }
        if config.sync && !config.log {
            return Err(PeerError::Invalid {
                engine: NAME,
                reason: "sync needs the write-ahead log (log = true)".to_string(),
            });
        }
        let path = dir::prepare(NAME, dir)?;
        let direct_io = if config.direct_io { ",direct_io=[data]" } else { "" };
        let conn_config = format!(
            "create,config_base=false,use_environment=false,cache_size={},session_max={SESSION_MAX},\
             {EVICTION},log=(enabled={}),transaction_sync=(enabled={},method=fsync),\
             statistics=(fast){direct_io}",
            config.cache_bytes, config.log, config.sync,
        );
        let c_conn_config = CString::new(conn_config.as_str()).expect("no NUL in the config");
        let c_table_config = CString::new(TABLE_CONFIG).expect("no NUL in the config");

        let mut conn = ptr::null_mut();
        // SAFETY: NUL-terminated strings that outlive the call; `conn` is an out pointer, null
        // on failure (the shim closes a half-opened connection itself).
        let rc = unsafe {
            fwt_open(
                path.as_ptr(),
                c_conn_config.as_ptr(),
                TABLE_URI.as_ptr(),
                c_table_config.as_ptr(),
                &mut conn,
            )
        };
        check("wiredtiger_open", rc)?;
        let conn = NonNull::new(conn).expect("fwt_open succeeded with a null connection");
        // SAFETY: `wiredtiger_version` returns a static NUL-terminated string.
        let version = unsafe { CStr::from_ptr(fwt_version()) }.to_string_lossy();
        let description = format!(
            "wiredtiger ({version}): wiredtiger_open \"{conn_config}\", table {} \"{TABLE_CONFIG}\", \
             sessions isolation=snapshot (pooled, one per concurrent caller), auto-commit \
             put/delete, one transaction per put_batch",
            TABLE_URI.to_string_lossy(),
        );
        Ok(WiredTiger { conn, idle_sessions: Mutex::new(Vec::new()), description })
    }

    /// "wiredtiger".
    pub fn name(&self) -> &'static str {
        NAME
    }

    /// Copies the value of `key` into `out` (replacing its content); false if there is none.
    pub fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, PeerError> {
        let mut session = self.session()?;
        let (mut value, mut value_len) = (ptr::null(), 0);
        // SAFETY: the session's cursor is ours for this call; the key outlives the call;
        // `value`/`value_len` are out pointers.
        let rc = unsafe {
            fwt_get(session.rw(), key.as_ptr().cast(), key.len(), &mut value, &mut value_len)
        };
        if rc == WT_NOTFOUND {
            return Ok(false);
        }
        check("WT_CURSOR::search", rc)?;
        session.positioned = true;
        out.clear();
        // SAFETY: on success the value points into WiredTiger's memory until the cursor is
        // reset, which `session` does when dropped, after this copy.
        out.extend_from_slice(unsafe { bytes(value, value_len) });
        Ok(true)
    }

    /// Inserts or overwrites `key` (an auto-commit transaction).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<(), PeerError> {
        let session = self.session()?;
        // SAFETY: the cursor is ours for this call; key and value outlive the call (the shim
        // resets the cursor before returning, so WiredTiger keeps no pointer to them).
        let rc = unsafe {
            fwt_put(
                session.rw(),
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
            )
        };
        check("WT_CURSOR::insert", rc)
    }

    /// Inserts or overwrites every entry in one transaction. Very large batches can be rolled
    /// back by WiredTiger when the transaction's updates do not fit in the cache.
    pub fn put_batch(&self, entries: &[(&[u8], &[u8])]) -> Result<(), PeerError> {
        let items: Vec<fwt_entry> = entries
            .iter()
            .map(|(key, value)| fwt_entry {
                key: key.as_ptr().cast(),
                key_len: key.len(),
                value: value.as_ptr().cast(),
                value_len: value.len(),
            })
            .collect();
        let session = self.session()?;
        // SAFETY: session and cursor are ours for this call; `items` and the bytes it points
        // at outlive the call (the shim resets the cursor before returning).
        let rc = unsafe {
            fwt_put_batch(session.session.as_ptr(), session.rw(), items.as_ptr(), items.len())
        };
        check("WT_SESSION::commit_transaction", rc)
    }

    /// Deletes `key`; true if it was there.
    pub fn delete(&self, key: &[u8]) -> Result<bool, PeerError> {
        let session = self.session()?;
        // SAFETY: the overwrite=false cursor is ours for this call; the key outlives it.
        let rc = unsafe { fwt_remove(session.del.as_ptr(), key.as_ptr().cast(), key.len()) };
        if rc == WT_NOTFOUND {
            return Ok(false);
        }
        check("WT_CURSOR::remove", rc).map(|()| true)
    }

    /// Visits up to `limit` entries with key >= `start`, in key order; returns how many.
    pub fn scan(
        &self,
        start: &[u8],
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize, PeerError> {
        if limit == 0 {
            return Ok(0);
        }
        let mut session = self.session()?;
        // SAFETY: the cursor is ours for this call; `start` outlives the call.
        let mut rc = unsafe { fwt_seek(session.rw(), start.as_ptr().cast(), start.len()) };
        let mut visited = 0;
        while rc == 0 {
            session.positioned = true;
            let (mut key, mut key_len, mut value, mut value_len) = (ptr::null(), 0, ptr::null(), 0);
            // SAFETY: the cursor is positioned (rc == 0); the out pointers are ours.
            let current = unsafe {
                fwt_current(session.rw(), &mut key, &mut key_len, &mut value, &mut value_len)
            };
            check("WT_CURSOR::get_value", current)?;
            // SAFETY: key and value point into WiredTiger's memory until the cursor moves,
            // which is after `visit` returns.
            unsafe { visit(bytes(key, key_len), bytes(value, value_len)) };
            visited += 1;
            if visited == limit {
                return Ok(visited);
            }
            // SAFETY: the positioned cursor is ours.
            rc = unsafe { fwt_next(session.rw()) };
        }
        // The shim resets the cursor when it reports WT_NOTFOUND or an error.
        session.positioned = false;
        if rc == WT_NOTFOUND {
            return Ok(visited);
        }
        check("WT_CURSOR::next", rc).map(|()| visited)
    }

    /// Writes a checkpoint: everything written so far is in the data files.
    pub fn flush(&self) -> Result<(), PeerError> {
        let session = self.session()?;
        // SAFETY: the session is ours for this call.
        check("WT_SESSION::checkpoint", unsafe { fwt_checkpoint(session.session.as_ptr()) })
    }

    /// Its cache statistics ([`STATISTICS`]) since `open`, under WiredTiger's descriptions;
    /// the cache's lookups are the pages requested from it, its misses and fills the pages
    /// read into it (fills' bytes: `cache: bytes read into cache`, their size in memory).
    pub fn stats(&self) -> Result<PeerStats, PeerError> {
        let keys: Vec<c_int> = STATISTICS.iter().map(|&(key, _)| key).collect();
        let names: Vec<*const c_char> = STATISTICS.iter().map(|(_, name)| name.as_ptr()).collect();
        let mut values = [0i64; STATISTICS.len()];
        let session = self.session()?;
        // SAFETY: the session is ours for this call (the shim opens and closes its own
        // statistics cursor on it); `keys` and `names` hold `values.len()` entries, the names
        // NUL-terminated, all outliving the call.
        let rc = unsafe {
            fwt_stats(
                session.session.as_ptr(),
                keys.as_ptr(),
                names.as_ptr(),
                values.as_mut_ptr(),
                values.len(),
            )
        };
        check("WT_CURSOR::search (statistics:)", rc)?;
        // Counters are never negative; a value that were would read as 0.
        let values = values.map(|v| u64::try_from(v).unwrap_or(0));
        let counters = STATISTICS
            .iter()
            .zip(values)
            .map(|((_, name), value)| (name.to_str().expect("ASCII descriptions"), value))
            .collect();
        let [requested, read, bytes_read, ..] = values;
        Ok(PeerStats {
            counters,
            cache: Some(CacheLookups {
                lookups: requested,
                misses: read,
                counted: "pages requested from the cache (internal pages included) and pages \
                          read into it: 1 - cache: pages read into cache / cache: pages \
                          requested from the cache",
            }),
            fills: Some(CacheFills {
                blocks: read,
                bytes: bytes_read,
                counted: "pages read into the cache (cache: pages read into cache) and their \
                          size in memory (cache: bytes read into cache)",
            }),
        })
    }

    /// Every option `open` set, on one line.
    pub fn describe_config(&self) -> String {
        self.description.clone()
    }

    /// Begins a transaction, snapshot isolation, on a session of its own (back to the pool
    /// when the transaction ends).
    pub fn begin(self: &Arc<Self>) -> Result<WiredTigerTxn, PeerError> {
        let session = self.take_session()?;
        // SAFETY: the session is ours until given back; the config is NUL-terminated.
        let rc = unsafe { fwt_begin(session.session.as_ptr(), TXN_CONFIG.as_ptr()) };
        if let Err(e) = check("WT_SESSION::begin_transaction", rc) {
            self.lock_idle_sessions().push(session);
            return Err(e);
        }
        Ok(WiredTigerTxn { owner: Arc::clone(self), session: Some(session), committed: false })
    }

    /// A session for this call: an idle one from the pool, or a new one.
    fn session(&self) -> Result<PooledSession<'_>, PeerError> {
        let session = self.take_session()?;
        Ok(PooledSession { owner: self, inner: Some(session), positioned: false })
    }

    /// An idle session from the pool, or a new one; the caller gives it back.
    fn take_session(&self) -> Result<Session, PeerError> {
        let idle = self.lock_idle_sessions().pop();
        let session = match idle {
            Some(session) => session,
            None => {
                let (mut session, mut rw, mut del) =
                    (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
                // SAFETY: a live connection (thread-safe); the URI is NUL-terminated; out
                // pointers are ours, all null on failure.
                let rc = unsafe {
                    fwt_session_open(
                        self.conn.as_ptr(),
                        TABLE_URI.as_ptr(),
                        &mut session,
                        &mut rw,
                        &mut del,
                    )
                };
                check("WT_CONNECTION::open_session", rc)?;
                let null = "fwt_session_open succeeded with a null handle";
                Session {
                    session: NonNull::new(session).expect(null),
                    rw: NonNull::new(rw).expect(null),
                    del: NonNull::new(del).expect(null),
                }
            }
        };
        Ok(session)
    }

    fn lock_idle_sessions(&self) -> MutexGuard<'_, Vec<Session>> {
        // Sessions go back reset (see `PooledSession::drop`), so a panic elsewhere while the
        // lock was held leaves nothing inconsistent.
        self.idle_sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for WiredTiger {
    fn drop(&mut self) {
        // SAFETY: no session is in use (each lives within a `&self` call); closing the
        // connection closes every session and cursor, so the pool's pointers are dropped
        // without being used again.
        let rc = unsafe { fwt_close(self.conn.as_ptr()) };
        if let Err(e) = check("WT_CONNECTION::close", rc) {
            // Drop cannot return it; a failed close can lose the last writes, so say so.
            eprintln!("{e}");
        }
    }
}

/// A session and its two cursors on the table: `rw` overwrites on insert (get, put, scan),
/// `del` does not, so that remove reports a missing key.
#[derive(Debug)]
struct Session {
    session: NonNull<WT_SESSION>,
    rw: NonNull<WT_CURSOR>,
    del: NonNull<WT_CURSOR>,
}

// SAFETY: a WiredTiger session may move between threads as long as one thread uses it at a
// time, which the pool guarantees (a session is either in the pool or owned by one call).
unsafe impl Send for Session {}

/// A session taken from the pool for one call; back to the pool on drop, its cursor reset if
/// the call left it positioned (also when the call panicked in `visit`).
struct PooledSession<'a> {
    owner: &'a WiredTiger,
    /// Taken back by `drop`.
    inner: Option<Session>,
    /// The `rw` cursor may hold a position (a page pinned, a snapshot).
    positioned: bool,
}

impl PooledSession<'_> {
    fn rw(&self) -> *mut WT_CURSOR {
        self.inner.as_ref().expect("session taken").rw.as_ptr()
    }
}

impl std::ops::Deref for PooledSession<'_> {
    type Target = Session;

    fn deref(&self) -> &Session {
        self.inner.as_ref().expect("session taken")
    }
}

impl Drop for PooledSession<'_> {
    fn drop(&mut self) {
        let Some(session) = self.inner.take() else { return };
        if self.positioned {
            // SAFETY: the cursor is ours until pushed back below. A failed reset leaves
            // nothing for us to undo: the next operation repositions the cursor anyway.
            let _ = unsafe { fwt_reset(session.rw.as_ptr()) };
        }
        self.owner.lock_idle_sessions().push(session);
    }
}

/// The transactions' configuration.
const TXN_CONFIG: &CStr = c"isolation=snapshot";

/// What WiredTiger's transactions here guarantee, for a benchmark to print.
pub const WIREDTIGER_ISOLATION: &str = "snapshot isolation (begin_transaction \
    \"isolation=snapshot\"): reads see the transaction's first moment; a write to a key another \
    transaction changed since fails (WT_ROLLBACK) and the transaction is rolled back; keys read \
    and ranges scanned are not checked (write skew and phantoms possible)";

/// A WiredTiger transaction on a session of its own: its writes stay in it until
/// [`commit`](crate::PeerTxn::commit); dropped uncommitted, it is rolled back. After a
/// [`PeerError::Conflict`] it can only be dropped.
#[derive(Debug)]
pub struct WiredTigerTxn {
    /// Open while the transaction lives.
    owner: Arc<WiredTiger>,
    /// Back to the pool when the transaction ends.
    session: Option<Session>,
    committed: bool,
}

impl WiredTigerTxn {
    fn session(&self) -> &Session {
        self.session.as_ref().expect("the session stays until drop")
    }
}

impl crate::PeerTxn for WiredTigerTxn {
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>, _for_update: bool) -> Result<bool, PeerError> {
        let cursor = self.session().rw.as_ptr();
        let (mut value, mut value_len) = (ptr::null(), 0);
        // SAFETY: the cursor is this transaction's; the key outlives the call.
        let rc =
            unsafe { fwt_get(cursor, key.as_ptr().cast(), key.len(), &mut value, &mut value_len) };
        if rc == WT_NOTFOUND {
            return Ok(false);
        }
        check_txn("WT_CURSOR::search", rc)?;
        out.clear();
        // SAFETY: the value points into WiredTiger's memory until the reset below.
        out.extend_from_slice(unsafe { bytes(value, value_len) });
        // SAFETY: the positioned cursor is ours.
        check("WT_CURSOR::reset", unsafe { fwt_reset(cursor) })?;
        Ok(true)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), PeerError> {
        let cursor = self.session().rw.as_ptr();
        // SAFETY: the cursor is this transaction's; key and value outlive the call (the shim
        // resets the cursor before returning).
        let rc = unsafe {
            fwt_txn_put(cursor, key.as_ptr().cast(), key.len(), value.as_ptr().cast(), value.len())
        };
        check_txn("WT_CURSOR::insert", rc)
    }

    fn delete(&mut self, key: &[u8]) -> Result<(), PeerError> {
        let cursor = self.session().del.as_ptr();
        // SAFETY: the overwrite=false cursor is this transaction's; the key outlives the call.
        let rc = unsafe { fwt_txn_remove(cursor, key.as_ptr().cast(), key.len()) };
        if rc == WT_NOTFOUND {
            return Ok(());
        }
        check_txn("WT_CURSOR::remove", rc)
    }

    fn scan(
        &mut self,
        lower: &[u8],
        upper: Option<&[u8]>,
        limit: usize,
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize, PeerError> {
        if limit == 0 {
            return Ok(0);
        }
        let cursor = self.session().rw.as_ptr();
        let upper_bytes = upper.unwrap_or_default();
        // SAFETY: the cursor is this transaction's; the keys outlive the calls.
        let mut rc = unsafe {
            match reverse {
                false => fwt_seek(cursor, lower.as_ptr().cast(), lower.len()),
                true => fwt_seek_before(cursor, upper_bytes.as_ptr().cast(), upper_bytes.len()),
            }
        };
        let mut visited = 0;
        while rc == 0 {
            let (mut key, mut key_len, mut value, mut value_len) = (ptr::null(), 0, ptr::null(), 0);
            // SAFETY: the cursor is positioned (rc == 0); the out pointers are ours.
            let current =
                unsafe { fwt_current(cursor, &mut key, &mut key_len, &mut value, &mut value_len) };
            if let Err(e) = check_txn("WT_CURSOR::get_value", current) {
                // SAFETY: the positioned cursor is ours.
                unsafe { fwt_reset(cursor) };
                return Err(e);
            }
            // SAFETY: key and value point into WiredTiger's memory until the cursor moves,
            // which is after `visit` returns.
            let (key, value) = unsafe { (bytes(key, key_len), bytes(value, value_len)) };
            let inside = key >= lower && upper.is_none_or(|upper| key < upper);
            if !inside {
                break;
            }
            visit(key, value);
            visited += 1;
            if visited == limit {
                break;
            }
            // SAFETY: the positioned cursor is ours.
            rc = unsafe {
                match reverse {
                    false => fwt_next(cursor),
                    true => fwt_prev(cursor),
                }
            };
        }
        if rc == 0 {
            // Stopped while positioned: let the page go.
            // SAFETY: the positioned cursor is ours.
            check("WT_CURSOR::reset", unsafe { fwt_reset(cursor) })?;
            return Ok(visited);
        }
        // The shim resets the cursor when it reports WT_NOTFOUND or an error.
        if rc == WT_NOTFOUND {
            return Ok(visited);
        }
        check_txn("WT_CURSOR::next", rc).map(|()| visited)
    }

    fn commit(mut self: Box<Self>) -> Result<(), PeerError> {
        // SAFETY: the session is this transaction's, in a transaction begun by `begin`.
        let rc = unsafe { fwt_commit(self.session().session.as_ptr()) };
        // Committed or (on failure) rolled back by WiredTiger: nothing for `Drop` to undo.
        self.committed = true;
        check_txn("WT_SESSION::commit_transaction", rc)
    }
}

impl Drop for WiredTigerTxn {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else { return };
        if !self.committed {
            // SAFETY: the session is ours, in a transaction; a failed rollback leaves nothing
            // for us to do (WiredTiger ends the transaction anyway).
            let _ = unsafe { fwt_rollback(session.session.as_ptr()) };
        }
        self.owner.lock_idle_sessions().push(session);
    }
}

/// [`check`] for transactions: `WT_ROLLBACK` is a conflict with another transaction.
fn check_txn(call: &'static str, rc: c_int) -> Result<(), PeerError> {
    match check(call, rc) {
        Err(PeerError::Engine { message, code: Some(WT_ROLLBACK), .. }) => {
            Err(PeerError::Conflict { engine: NAME, call, message })
        }
        other => other,
    }
}

/// Turns a WiredTiger return code into a result, with the messages WiredTiger reported during
/// the call (read on the same thread, right after it).
fn check(call: &'static str, rc: c_int) -> Result<(), PeerError> {
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: both return NUL-terminated strings: a static one, and this thread's message
    // buffer, which only this thread's next shim call changes.
    let (text, detail) = unsafe {
        (
            CStr::from_ptr(fwt_strerror(rc)).to_string_lossy().into_owned(),
            CStr::from_ptr(fwt_last_message()).to_string_lossy().into_owned(),
        )
    };
    let message = if detail.is_empty() { text } else { format!("{text}: {detail}") };
    Err(PeerError::Engine { engine: NAME, call, code: Some(rc), message })
}
