//! SQLite as a store of objects for `bench objects` (feature `peers`): one table of BLOBs in
//! `objects.sqlite`, one row per object (row id = object + 1) preallocated with
//! `zeroblob(len)`, written and read in place with incremental BLOB I/O
//! (`ferrite_peers::SqliteBlobs`). Each thread has a connection of its own, as SQLite advises;
//! WAL mode, `synchronous=FULL` with `--sync` (every commit durable), `NORMAL` otherwise
//! (WAL mode's recommended setting); `auto_vacuum=INCREMENTAL`, whose pointer map lets SQLite
//! reach an offset of a large BLOB without reading its chain of overflow pages.
//!
//! SQLite runs one write transaction at a time. The writers here take turns on a mutex of
//! this process before they begin one: without it they would poll SQLite's lock, sleeping
//! between tries (its busy handler), and the run would measure those sleeps.
//!
//! SQLite cannot bypass the OS page cache: the runner caps this process's memory, page cache
//! included, where it can (see `workloads::objects`), as it does for LMDB.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use ferrite_peers::{PeerError, SqliteBlobs, SqliteConfig};

use super::{ObjectSession, ObjectStore, ObjectStoreOptions};
use crate::error::BenchError;
use crate::stores::StoreError;

/// The database file in the data directory.
pub const FILE: &str = "objects.sqlite";

/// A database of objects, and the connection the setup and `settle` use.
#[derive(Debug)]
pub struct SqliteObjects {
    file: PathBuf,
    config: SqliteConfig,
    object_bytes: u64,
    main: Mutex<SqliteBlobs>,
    /// Held by a thread for its whole write transaction.
    writer: Mutex<()>,
}

fn store_error(e: PeerError) -> BenchError {
    BenchError::Store(Box::new(e))
}

fn row(object: u32) -> i64 {
    i64::from(object) + 1
}

impl SqliteObjects {
    pub fn open(dir: &Path, options: &ObjectStoreOptions) -> Result<Self, BenchError> {
        let file = dir.join(FILE);
        let config = SqliteConfig { sync: options.sync, ..SqliteConfig::default() };
        let main = SqliteBlobs::open(&file, &config).map_err(store_error)?;
        if options.object_bytes > main.max_blob_bytes() {
            return Err(BenchError::Config(format!(
                "objects of {} MiB are larger than SQLite's largest BLOB ({} bytes, \
                 SQLITE_LIMIT_LENGTH): lower --object-mib",
                options.object_bytes >> 20,
                main.max_blob_bytes()
            )));
        }
        Ok(SqliteObjects {
            file,
            config,
            object_bytes: options.object_bytes,
            main: Mutex::new(main),
            writer: Mutex::new(()),
        })
    }

    fn main(&self) -> std::sync::MutexGuard<'_, SqliteBlobs> {
        self.main.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ObjectStore for SqliteObjects {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn direct_io(&self) -> bool {
        false
    }

    fn describe(&self) -> String {
        format!(
            "{}; {FILE}, row id = object + 1; writers take turns on an in-process mutex before \
             BEGIN IMMEDIATE (SQLite runs one write transaction at a time); no O_DIRECT (SQLite \
             reads and writes through the OS page cache)",
            self.main().describe_config()
        )
    }

    fn create(&self, object: u32) -> Result<(), StoreError> {
        Ok(self.main().create(row(object), self.object_bytes)?)
    }

    fn session(&self) -> Result<Box<dyn ObjectSession + '_>, StoreError> {
        let conn = SqliteBlobs::open(&self.file, &self.config)?;
        Ok(Box::new(SqliteSession { conn, writer: &self.writer }))
    }

    fn settle(&self) -> Result<(), StoreError> {
        Ok(self.main().checkpoint()?)
    }
}

struct SqliteSession<'a> {
    conn: SqliteBlobs,
    writer: &'a Mutex<()>,
}

impl ObjectSession for SqliteSession<'_> {
    fn write_at(&mut self, object: u32, offset: u64, bytes: &[u8]) -> Result<(), StoreError> {
        let _turn = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(self.conn.write_at(row(object), offset, bytes)?)
    }

    fn read_at(&mut self, object: u32, offset: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        Ok(self.conn.read_at(row(object), offset, buf)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    #[test]
    fn rows_are_preallocated_and_written_in_place_from_sessions() {
        let dir = TempDir::new().unwrap();
        let options = ObjectStoreOptions {
            objects: 2,
            object_bytes: 1 << 20,
            block_bytes: 4096,
            sync: true,
            cache_bytes: 0,
            tasks: false,
        };
        let store = SqliteObjects::open(dir.path(), &options).unwrap();
        assert!(store.describe().contains("synchronous=FULL"), "{}", store.describe());
        store.create(0).unwrap();
        store.create(1).unwrap();
        let mut a = store.session().unwrap();
        let mut b = store.session().unwrap();
        a.write_at(1, 8192, &[3u8; 4096]).unwrap();
        let mut buf = vec![0u8; 8192];
        b.read_at(1, 4096, &mut buf).unwrap();
        assert_eq!(&buf[..4096], &[0u8; 4096][..]);
        assert_eq!(&buf[4096..], &[3u8; 4096][..]);
        assert!(b.read_at(2, 0, &mut buf).is_err(), "no object 2");
        drop((a, b));
        store.settle().unwrap();
        let too_big = ObjectStoreOptions { object_bytes: 2 << 30, ..options };
        let e = SqliteObjects::open(dir.path(), &too_big).unwrap_err().to_string();
        assert!(e.contains("lower --object-mib"), "{e}");
    }
}
