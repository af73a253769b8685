//! SQLite (the system's libsqlite3, 3.40 on Debian 12) as a store of large objects: one table
//! of BLOBs, one row per object preallocated with `zeroblob(len)`, read and written in place
//! through SQLite's incremental BLOB I/O (`sqlite3_blob_open`, `_read`, `_write`).
//!
//! A [`SqliteBlobs`] is one connection, used by one thread at a time (opened
//! `SQLITE_OPEN_NOMUTEX`): SQLite's advice for many threads is a connection each. Every
//! connection to the same file shares the database; SQLite runs one write transaction at a
//! time across them (a writer waits up to `busy_timeout_ms` for another to finish).
//!
//! Objects are rows of `objects(id INTEGER PRIMARY KEY, data BLOB NOT NULL)`; a row's size is
//! fixed when it is created (incremental BLOB I/O cannot change it) and is at most SQLite's
//! `SQLITE_LIMIT_LENGTH` (1,000,000,000 bytes unless the library was built otherwise).
//!
//! A BLOB larger than a page lives in a chain of overflow pages, each pointing to the next:
//! reaching offset X of a row means following the chain from its start. With
//! `auto_vacuum=INCREMENTAL` the database keeps pointer-map pages, from which SQLite finds the
//! next page of a chain without reading the page itself; SQLite's author recommends it for
//! exactly this (D. Richard Hipp on sqlite-users, 2013-03-07, "follow the linked list of
//! overflow pages without actually having to read each page in the chain"). Without it, a
//! 4 KiB write at a random offset of a 64 MiB BLOB read 22 MiB (measured).

// Every method is a call into libsqlite3 through `crate::sys::sqlite`.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ffi::{c_int, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::{self, NonNull};

use crate::sys::sqlite::*;
use crate::PeerError;

const NAME: &str = "sqlite";
/// The table of objects.
pub const TABLE: &str = "objects";
/// SQLite's page size here: its default, and the 4 KiB of every other store compared.
const PAGE_SIZE_BYTES: u32 = 4096;

/// How a connection is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteConfig {
    /// Each write is durable when it returns: `synchronous=FULL`, which in WAL mode syncs the
    /// WAL at every commit. Otherwise `synchronous=NORMAL`, WAL mode's recommended setting
    /// (the WAL is synced only at checkpoints: a crash may lose the last commits, never
    /// corrupt the database).
    pub sync: bool,
    /// This connection's page cache, in KiB (`PRAGMA cache_size=-N`; SQLite's default is
    /// 2000). Every connection has its own; the OS page cache sits below them all.
    pub cache_kib: u64,
    /// How long a writer waits for another connection's write transaction (`busy_timeout`).
    pub busy_timeout_ms: u32,
}

impl Default for SqliteConfig {
    fn default() -> Self {
        SqliteConfig { sync: false, cache_kib: 2000, busy_timeout_ms: 60_000 }
    }
}

/// One connection to a database of objects.
#[derive(Debug)]
pub struct SqliteBlobs {
    db: NonNull<sqlite3>,
    begin: Stmt,
    commit: Stmt,
    rollback: Stmt,
    insert: Stmt,
    length: Stmt,
    /// Read-only BLOB handles kept open, by row: an open handle keeps its row's list of
    /// overflow pages, so a read does not walk the row's page chain from its start. Closed
    /// before this connection writes (an open handle holds a read transaction whose snapshot
    /// would go stale).
    readers: HashMap<i64, Blob>,
    /// The largest BLOB this library accepts (`SQLITE_LIMIT_LENGTH`).
    max_blob_bytes: u64,
    description: String,
}

// SAFETY: opened with SQLITE_OPEN_NOMUTEX (multi-thread mode), a connection and its
// statements and BLOB handles may be used from any thread as long as no two threads use them
// at once; `&mut self` on every method that touches them makes sure of that. Not `Sync`.
unsafe impl Send for SqliteBlobs {}

impl SqliteBlobs {
    /// Opens (creating if missing) the database file `file`, with:
    /// - `SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX`, `busy_timeout`;
    /// - `page_size=4096` and `auto_vacuum=INCREMENTAL` (both take effect when the file is
    ///   created: the pointer map lets a BLOB's overflow chain be followed without reading
    ///   it, see the module's notes), `journal_mode=WAL`, `synchronous=FULL` with `sync`
    ///   (every commit durable), else `NORMAL`; `cache_size=-cache_kib`;
    ///   `wal_autocheckpoint` left at its default (1000 pages);
    /// - the table `objects(id INTEGER PRIMARY KEY, data BLOB NOT NULL)`, created if missing.
    pub fn open(file: &Path, config: &SqliteConfig) -> Result<Self, PeerError> {
        // SAFETY: a plain query of how the library was built.
        if unsafe { sqlite3_threadsafe() } == 0 {
            return Err(invalid("the system's libsqlite3 was built without thread safety"));
        }
        let path = CString::new(file.as_os_str().as_bytes())
            .map_err(|_| invalid(format!("the path {} holds a NUL byte", file.display())))?;
        let mut db = ptr::null_mut();
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
        // SAFETY: `path` is NUL-terminated, `db` an out pointer; a null VFS is the default.
        let rc = unsafe { sqlite3_open_v2(path.as_ptr(), &mut db, flags, ptr::null()) };
        let Some(db) = NonNull::new(db) else {
            return Err(engine_error("sqlite3_open_v2", rc, "out of memory".into()));
        };
        if rc != SQLITE_OK {
            // SAFETY: a connection handle from a failed open holds the message.
            let message = unsafe { message_of(db) };
            // SAFETY: closed once, after the message was copied.
            unsafe { sqlite3_close_v2(db.as_ptr()) };
            return Err(engine_error("sqlite3_open_v2", rc, message));
        }
        let timeout = c_int::try_from(config.busy_timeout_ms).unwrap_or(c_int::MAX);
        // SAFETY: a live connection.
        unsafe { sqlite3_busy_timeout(db.as_ptr(), timeout) };
        // Owns the connection from here on: closed by `Conn`'s drop on any error below.
        let conn = Conn(db);
        conn.execute(&format!("PRAGMA page_size={PAGE_SIZE_BYTES}"))?;
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")?;
        let journal = conn.query_text("PRAGMA journal_mode=WAL")?;
        if !journal.eq_ignore_ascii_case("wal") {
            return Err(invalid(format!("journal_mode=WAL refused: the mode is {journal}")));
        }
        let synchronous = if config.sync { "FULL" } else { "NORMAL" };
        conn.execute(&format!("PRAGMA synchronous={synchronous}"))?;
        conn.execute(&format!("PRAGMA cache_size=-{}", config.cache_kib))?;
        conn.execute(&format!(
            "CREATE TABLE IF NOT EXISTS {TABLE}(id INTEGER PRIMARY KEY, data BLOB NOT NULL)"
        ))?;
        let page_size = conn.query_int("PRAGMA page_size")?;
        let autocheckpoint = conn.query_int("PRAGMA wal_autocheckpoint")?;
        let auto_vacuum = match conn.query_int("PRAGMA auto_vacuum")? {
            0 => "NONE".to_owned(),
            1 => "FULL".to_owned(),
            2 => "INCREMENTAL (pointer map: overflow chains followed without reading them)"
                .to_owned(),
            other => other.to_string(),
        };
        // SAFETY: a live connection; a negative value only reads the limit.
        let max_blob_bytes = unsafe { sqlite3_limit(db.as_ptr(), SQLITE_LIMIT_LENGTH, -1) };
        // SAFETY: a static NUL-terminated string owned by the library.
        let version = unsafe { CStr::from_ptr(sqlite3_libversion()) }.to_string_lossy();
        let description = format!(
            "sqlite {version}: table {TABLE}(id INTEGER PRIMARY KEY, data BLOB NOT NULL), one \
             row per object preallocated with zeroblob(len), incremental BLOB I/O \
             (sqlite3_blob_read/write); page_size={page_size}, journal_mode=wal, \
             synchronous={synchronous}, wal_autocheckpoint={autocheckpoint}, \
             auto_vacuum={auto_vacuum}, cache_size=-{cache} (KiB, per connection), \
             busy_timeout={timeout} ms, SQLITE_OPEN_NOMUTEX (a connection per thread); a \
             write is BEGIN IMMEDIATE, sqlite3_blob_open (read-write), sqlite3_blob_write, \
             sqlite3_blob_close, COMMIT; reads keep a read-only BLOB handle per object open \
             per connection",
            cache = config.cache_kib,
        );
        let begin = conn.prepare("BEGIN IMMEDIATE")?;
        let commit = conn.prepare("COMMIT")?;
        let rollback = conn.prepare("ROLLBACK")?;
        let insert = conn.prepare(&format!(
            "INSERT OR REPLACE INTO {TABLE}(id, data) VALUES (?1, zeroblob(?2))"
        ))?;
        let length = conn.prepare(&format!("SELECT length(data) FROM {TABLE} WHERE id = ?1"))?;
        Ok(SqliteBlobs {
            db: conn.release(),
            begin,
            commit,
            rollback,
            insert,
            length,
            readers: HashMap::new(),
            max_blob_bytes: u64::try_from(max_blob_bytes).unwrap_or(0),
            description,
        })
    }

    /// "sqlite".
    pub fn name(&self) -> &'static str {
        NAME
    }

    /// The largest object this library accepts, in bytes.
    pub fn max_blob_bytes(&self) -> u64 {
        self.max_blob_bytes
    }

    /// Makes row `row` an object of `len` zero bytes (replacing any it was), in a
    /// transaction of its own.
    pub fn create(&mut self, row: i64, len: u64) -> Result<(), PeerError> {
        if len > self.max_blob_bytes {
            return Err(invalid(format!(
                "an object of {len} bytes is above SQLite's largest BLOB, {} bytes \
                 (SQLITE_LIMIT_LENGTH)",
                self.max_blob_bytes
            )));
        }
        self.readers.clear();
        let insert = self.insert.0.as_ptr();
        // SAFETY: a live statement of this connection; parameters 1 and 2 exist.
        unsafe {
            self.check("sqlite3_bind_int64", sqlite3_bind_int64(insert, 1, row))?;
            self.check("sqlite3_bind_int64", sqlite3_bind_int64(insert, 2, len as i64))?;
        }
        self.step_done(insert, "INSERT")
    }

    /// The length of row `row`'s object, if there is such a row.
    pub fn len(&mut self, row: i64) -> Result<Option<u64>, PeerError> {
        let stmt = self.length.0.as_ptr();
        // SAFETY: a live statement of this connection; parameter 1 exists.
        unsafe { self.check("sqlite3_bind_int64", sqlite3_bind_int64(stmt, 1, row))? };
        // SAFETY: as above; the column is read while the statement is on its row, then the
        // statement is reset.
        let (rc, len) = unsafe {
            let rc = sqlite3_step(stmt);
            let len = (rc == SQLITE_ROW).then(|| sqlite3_column_int64(stmt, 0));
            sqlite3_reset(stmt);
            (rc, len)
        };
        match rc {
            SQLITE_ROW | SQLITE_DONE => Ok(len.map(|n| n as u64)),
            rc => Err(self.error("SELECT length", rc)),
        }
    }

    /// Writes `bytes` at `offset` of row `row`'s object, which must hold them (an object
    /// never grows), in one transaction: durable when it returns with `sync`.
    pub fn write_at(&mut self, row: i64, offset: u64, bytes: &[u8]) -> Result<(), PeerError> {
        let (offset, n) = blob_range(offset, bytes.len())?;
        self.readers.clear();
        self.step_done(self.begin.0.as_ptr(), "BEGIN IMMEDIATE")?;
        let written = self.open_blob(row, true).and_then(|blob| {
            // SAFETY: a live read-write handle; `bytes` holds `n` readable bytes.
            let rc =
                unsafe { sqlite3_blob_write(blob.0.as_ptr(), bytes.as_ptr().cast(), n, offset) };
            self.check("sqlite3_blob_write", rc)?;
            // SAFETY: the handle is closed here, once (`into_raw` keeps `Blob`'s drop from
            // closing it again).
            let rc = unsafe { sqlite3_blob_close(blob.into_raw()) };
            self.check("sqlite3_blob_close", rc)
        });
        let committed = written.and_then(|()| self.step_done(self.commit.0.as_ptr(), "COMMIT"));
        if committed.is_err() {
            // Undo what is left of the transaction (nothing, if the failed COMMIT already
            // rolled it back: then this fails, harmlessly).
            let _ = self.step_done(self.rollback.0.as_ptr(), "ROLLBACK");
        }
        committed
    }

    /// Reads `buf.len()` bytes at `offset` of row `row`'s object, which must hold them.
    pub fn read_at(&mut self, row: i64, offset: u64, buf: &mut [u8]) -> Result<(), PeerError> {
        let (offset, n) = blob_range(offset, buf.len())?;
        for retry in [false, true] {
            if !self.readers.contains_key(&row) {
                let blob = self.open_blob(row, false)?;
                self.readers.insert(row, blob);
            }
            let blob = self.readers[&row].0.as_ptr();
            // SAFETY: a live read-only handle; `buf` holds `n` writable bytes.
            let rc = unsafe { sqlite3_blob_read(blob, buf.as_mut_ptr().cast(), n, offset) };
            match rc {
                SQLITE_OK => return Ok(()),
                // The row was changed by another statement since the handle opened: open a
                // new one, once.
                SQLITE_ABORT if !retry => {
                    self.readers.remove(&row);
                }
                rc => return Err(self.error("sqlite3_blob_read", rc)),
            }
        }
        unreachable!("the second attempt returns")
    }

    /// Copies the WAL into the database file and empties it (`wal_checkpoint(TRUNCATE)`);
    /// fails if another connection's transaction kept it from finishing.
    pub fn checkpoint(&mut self) -> Result<(), PeerError> {
        self.readers.clear();
        let conn = Conn(self.db);
        let busy = conn.query_int("PRAGMA wal_checkpoint(TRUNCATE)");
        conn.release();
        match busy? {
            0 => Ok(()),
            _ => Err(invalid("wal_checkpoint(TRUNCATE) could not finish: a connection is busy")),
        }
    }

    /// Every setting `open` made, on one line.
    pub fn describe_config(&self) -> String {
        self.description.clone()
    }

    fn open_blob(&self, row: i64, write: bool) -> Result<Blob, PeerError> {
        let mut blob = ptr::null_mut();
        // SAFETY: a live connection, NUL-terminated names, an out pointer.
        let rc = unsafe {
            sqlite3_blob_open(
                self.db.as_ptr(),
                c"main".as_ptr(),
                c"objects".as_ptr(),
                c"data".as_ptr(),
                row,
                c_int::from(write),
                &mut blob,
            )
        };
        if rc != SQLITE_OK {
            // SAFETY: null or a handle to close (the header: always safe to close).
            unsafe { sqlite3_blob_close(blob) };
            return Err(self.error("sqlite3_blob_open", rc));
        }
        let blob = NonNull::new(blob).ok_or_else(|| invalid("sqlite3_blob_open gave null"))?;
        Ok(Blob(blob))
    }

    /// Steps `stmt` to its end and resets it.
    fn step_done(&self, stmt: *mut sqlite3_stmt, what: &'static str) -> Result<(), PeerError> {
        // SAFETY: a live statement of this connection.
        let rc = unsafe {
            let rc = sqlite3_step(stmt);
            sqlite3_reset(stmt);
            rc
        };
        match rc {
            SQLITE_DONE | SQLITE_ROW => Ok(()),
            rc => Err(self.error(what, rc)),
        }
    }

    fn check(&self, call: &'static str, rc: c_int) -> Result<(), PeerError> {
        if rc == SQLITE_OK {
            Ok(())
        } else {
            Err(self.error(call, rc))
        }
    }

    fn error(&self, call: &'static str, rc: c_int) -> PeerError {
        // SAFETY: a live connection.
        let message = unsafe { message_of(self.db) };
        engine_error(call, rc, message)
    }
}

impl Drop for SqliteBlobs {
    fn drop(&mut self) {
        self.readers.clear();
        // SAFETY: the connection is closed once, here. `sqlite3_close_v2` lets the
        // statements still open (the fields, finalised when they drop right after this)
        // finish first: the connection is freed with the last of them.
        unsafe { sqlite3_close_v2(self.db.as_ptr()) };
    }
}

/// A connection being set up: closed on drop unless released.
struct Conn(NonNull<sqlite3>);

impl Conn {
    fn prepare(&self, sql: &str) -> Result<Stmt, PeerError> {
        let text = CString::new(sql).map_err(|_| invalid("SQL with a NUL byte"))?;
        let mut stmt = ptr::null_mut();
        // SAFETY: a live connection, NUL-terminated SQL (-1: up to the NUL), an out pointer.
        let rc = unsafe {
            sqlite3_prepare_v2(self.0.as_ptr(), text.as_ptr(), -1, &mut stmt, ptr::null_mut())
        };
        if rc != SQLITE_OK {
            // SAFETY: a live connection.
            return Err(engine_error("sqlite3_prepare_v2", rc, unsafe { message_of(self.0) }));
        }
        NonNull::new(stmt).map(Stmt).ok_or_else(|| invalid(format!("{sql:?} is empty")))
    }

    /// Runs `sql` to its end, ignoring any rows.
    fn execute(&self, sql: &str) -> Result<(), PeerError> {
        let stmt = self.prepare(sql)?;
        loop {
            // SAFETY: a live statement.
            match unsafe { sqlite3_step(stmt.0.as_ptr()) } {
                SQLITE_ROW => continue,
                SQLITE_DONE => return Ok(()),
                // SAFETY: a live connection.
                rc => return Err(engine_error("sqlite3_step", rc, unsafe { message_of(self.0) })),
            }
        }
    }

    /// The first column of the first row `sql` returns, as text.
    fn query_text(&self, sql: &str) -> Result<String, PeerError> {
        let stmt = self.prepare(sql)?;
        // SAFETY: a live statement; the text is copied while the statement is on its row.
        unsafe {
            match sqlite3_step(stmt.0.as_ptr()) {
                SQLITE_ROW => {
                    let text = sqlite3_column_text(stmt.0.as_ptr(), 0);
                    Ok(if text.is_null() {
                        String::new()
                    } else {
                        CStr::from_ptr(text.cast()).to_string_lossy().into_owned()
                    })
                }
                rc => Err(engine_error(sql_call(sql), rc, message_of(self.0))),
            }
        }
    }

    /// The first column of the first row `sql` returns, as an integer.
    fn query_int(&self, sql: &str) -> Result<i64, PeerError> {
        let stmt = self.prepare(sql)?;
        // SAFETY: a live statement; the column is read while it is on its row.
        unsafe {
            match sqlite3_step(stmt.0.as_ptr()) {
                SQLITE_ROW => Ok(sqlite3_column_int64(stmt.0.as_ptr(), 0)),
                rc => Err(engine_error(sql_call(sql), rc, message_of(self.0))),
            }
        }
    }

    /// Hands the connection on without closing it.
    fn release(self) -> NonNull<sqlite3> {
        let db = self.0;
        std::mem::forget(self);
        db
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // SAFETY: the connection is owned here and closed once (statements prepared from it
        // and still alive make this a deferred close, see `SqliteBlobs::drop`).
        unsafe { sqlite3_close_v2(self.0.as_ptr()) };
    }
}

/// A prepared statement, finalised on drop.
#[derive(Debug)]
struct Stmt(NonNull<sqlite3_stmt>);

impl Drop for Stmt {
    fn drop(&mut self) {
        // SAFETY: from `sqlite3_prepare_v2`, finalised once.
        unsafe { sqlite3_finalize(self.0.as_ptr()) };
    }
}

/// An open BLOB handle, closed on drop.
#[derive(Debug)]
struct Blob(NonNull<sqlite3_blob>);

impl Blob {
    /// The handle, no longer closed on drop.
    fn into_raw(self) -> *mut sqlite3_blob {
        let raw = self.0.as_ptr();
        std::mem::forget(self);
        raw
    }
}

impl Drop for Blob {
    fn drop(&mut self) {
        // SAFETY: from `sqlite3_blob_open`, closed once.
        unsafe { sqlite3_blob_close(self.0.as_ptr()) };
    }
}

/// The connection's last error message.
///
/// # Safety
/// `db` is a live connection.
unsafe fn message_of(db: NonNull<sqlite3>) -> String {
    // SAFETY: the caller's promise; the message is owned by the connection and copied.
    unsafe { CStr::from_ptr(sqlite3_errmsg(db.as_ptr())) }.to_string_lossy().into_owned()
}

/// `offset` and `len` as the `int`s of the BLOB calls.
fn blob_range(offset: u64, len: usize) -> Result<(c_int, c_int), PeerError> {
    let end = offset.checked_add(len as u64).filter(|&end| end <= c_int::MAX as u64);
    match end {
        Some(_) => Ok((offset as c_int, len as c_int)),
        None => Err(invalid(format!("{len} bytes at offset {offset} lie past 2 GiB"))),
    }
}

fn sql_call(sql: &str) -> &'static str {
    if sql.starts_with("PRAGMA") {
        "PRAGMA"
    } else {
        "sqlite3_step"
    }
}

fn engine_error(call: &'static str, rc: c_int, message: String) -> PeerError {
    let message = if message.is_empty() {
        // SAFETY: a static string for any code.
        unsafe { CStr::from_ptr(sqlite3_errstr(rc)) }.to_string_lossy().into_owned()
    } else {
        message
    };
    PeerError::Engine { engine: NAME, call, code: Some(rc), message }
}

fn invalid(reason: impl Into<String>) -> PeerError {
    PeerError::Invalid { engine: NAME, reason: reason.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(test: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir()
            .join(format!("ferrite-peers-sqlite-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Objects are created with their size, written and read in place from two connections,
    /// survive a checkpoint and a reopen, and refuse writes past their end.
    #[test]
    fn blobs_are_written_and_read_in_place_across_connections() {
        let dir = temp("in-place");
        let file = dir.join("objects.sqlite");
        let config = SqliteConfig { sync: true, ..SqliteConfig::default() };
        let mut a = SqliteBlobs::open(&file, &config).unwrap();
        assert!(a.describe_config().contains("synchronous=FULL"), "{}", a.describe_config());
        assert!(a.describe_config().contains("auto_vacuum=INCREMENTAL"), "{}", a.describe_config());
        a.create(1, 1 << 20).unwrap();
        a.create(2, 8192).unwrap();
        assert_eq!(a.len(1).unwrap(), Some(1 << 20));
        assert_eq!(a.len(3).unwrap(), None);
        let mut b = SqliteBlobs::open(&file, &config).unwrap();
        let mut buf = vec![0xffu8; 4096];
        b.read_at(1, 500_000, &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == 0), "a new object reads as zeros");
        a.write_at(1, 500_000, &[7u8; 4096]).unwrap();
        // `b`'s open handle on row 1 reads its snapshot from before the write; a new
        // connection sees the commit.
        drop(b);
        let mut b = SqliteBlobs::open(&file, &config).unwrap();
        b.read_at(1, 500_000, &mut buf).unwrap();
        assert_eq!(buf, vec![7u8; 4096]);
        b.write_at(2, 4096, &[9u8; 4096]).unwrap();
        assert!(a.write_at(2, 6000, &[1u8; 4096]).is_err(), "past the end of the object");
        assert!(b.read_at(2, 8000, &mut buf).is_err());
        drop(b);
        a.checkpoint().unwrap();
        drop(a);
        let mut c = SqliteBlobs::open(&file, &SqliteConfig::default()).unwrap();
        assert!(c.describe_config().contains("synchronous=NORMAL"));
        c.read_at(2, 4096, &mut buf).unwrap();
        assert_eq!(buf, vec![9u8; 4096]);
        let err = c.create(3, c.max_blob_bytes() + 1).unwrap_err().to_string();
        assert!(err.contains("SQLITE_LIMIT_LENGTH"), "{err}");
        drop(c);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
