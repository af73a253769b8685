//! The stores `bench objects` measures, behind one trait: [`ObjectStore`] holds a fixed set of
//! large objects and hands out [`ObjectSession`]s, one per thread, that write and read bytes
//! at any offset of them. `ferrite` (`ferrite.rs`: a tree of Ferrite objects) and `file`
//! (`file.rs`: one file per object, the physical reference) are always built; `rocksdb` and
//! `sqlite` (`rocksdb.rs`, `sqlite.rs`) with the `peers` feature.
//!
//! Objects are numbered from 0 and named `obj-000001` (object 0) onwards; every object of a
//! run has the same size. The buffers handed to a session are aligned to 4 KiB (the file
//! store reads and writes them with `O_DIRECT`).

use std::path::Path;

use crate::error::BenchError;
use crate::stores::StoreError;

pub mod ferrite;
pub mod file;
#[cfg(feature = "peers")]
pub mod rocksdb;
#[cfg(feature = "peers")]
pub mod sqlite;

/// The stores `bench objects` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectStoreKind {
    Ferrite,
    File,
    RocksDb,
    /// RocksDB with its chunk values in blob files (integrated BlobDB).
    RocksDbBlob,
    Sqlite,
}

impl ObjectStoreKind {
    pub const ALL: [ObjectStoreKind; 5] = [
        ObjectStoreKind::Ferrite,
        ObjectStoreKind::File,
        ObjectStoreKind::RocksDb,
        ObjectStoreKind::RocksDbBlob,
        ObjectStoreKind::Sqlite,
    ];

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            ObjectStoreKind::Ferrite => "ferrite",
            ObjectStoreKind::File => "file",
            ObjectStoreKind::RocksDb => "rocksdb",
            ObjectStoreKind::RocksDbBlob => "rocksdb-blob",
            ObjectStoreKind::Sqlite => "sqlite",
        }
    }

    pub fn from_name(name: &str) -> Option<ObjectStoreKind> {
        ObjectStoreKind::ALL.into_iter().find(|s| s.name() == name)
    }

    /// `--store` of `bench objects`: a store's name, or a message listing them.
    pub fn parse(text: &str) -> Result<ObjectStoreKind, String> {
        ObjectStoreKind::from_name(text).ok_or_else(|| {
            format!("unknown store {text:?} (ferrite, file, rocksdb, rocksdb-blob, sqlite)")
        })
    }

    /// Whether this build can run the store (the peers need the `peers` feature).
    pub fn built_in(self) -> bool {
        matches!(self, ObjectStoreKind::Ferrite | ObjectStoreKind::File) || cfg!(feature = "peers")
    }
}

/// What a store is opened for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectStoreOptions {
    pub objects: u32,
    /// Bytes of every object.
    pub object_bytes: u64,
    /// Bytes per operation (the file store checks that `O_DIRECT` takes it).
    pub block_bytes: usize,
    /// Every write durable when it returns.
    pub sync: bool,
    /// The store's own cache, where it has one (Ferrite's pool, RocksDB's block cache).
    pub cache_bytes: u64,
    /// Ferrite: run the operations as tasks on the database's workers (its task API)
    /// rather than from threads through the blocking API. Other stores ignore it.
    pub tasks: bool,
}

/// A store of a fixed set of equally sized objects, shared by the threads of a run.
pub trait ObjectStore: Send + Sync {
    /// Short name for results (`store=file`).
    fn name(&self) -> &'static str;

    /// Every option the store was opened with, for the report.
    fn describe(&self) -> String;

    /// Makes object `object` exist at its full size where the store needs that before it
    /// is written (its content is then unspecified until written).
    fn create(&self, object: u32) -> Result<(), StoreError>;

    /// A handle for one thread's reads and writes.
    fn session(&self) -> Result<Box<dyn ObjectSession + '_>, StoreError>;

    /// Writes back everything buffered and finishes background work, so that a measurement
    /// starts from a settled store (run after the setup, outside any measurement).
    fn settle(&self) -> Result<(), StoreError>;

    /// Whether the store reads and writes its data with `O_DIRECT` (bypassing the page
    /// cache).
    fn direct_io(&self) -> bool;

    /// How the objects are laid out inside the store, where it says (Ferrite's extents and
    /// fragments).
    fn layout_note(&self) -> Option<String> {
        None
    }

    /// The database and tree whose workers run the operations as tasks, for a store opened
    /// with `tasks` that has them (Ferrite); `None`: the run's threads call the sessions.
    fn task_api(&self) -> Option<(&::ferrite::Db, &::ferrite::Tree)> {
        None
    }

    /// Closes the store, reporting what closing found.
    fn close(self: Box<Self>) -> Result<(), StoreError> {
        Ok(())
    }
}

/// One thread's reads and writes into the objects of a store.
pub trait ObjectSession: Send {
    /// Writes `bytes` at `offset` of object `object` (within its size).
    fn write_at(&mut self, object: u32, offset: u64, bytes: &[u8]) -> Result<(), StoreError>;

    /// Fills `buf` from `offset` of object `object` (within its size).
    fn read_at(&mut self, object: u32, offset: u64, buf: &mut [u8]) -> Result<(), StoreError>;
}

/// The name of object `object`: `obj-000001` for object 0.
pub fn object_name(object: u32) -> String {
    format!("obj-{:06}", u64::from(object) + 1)
}

/// Opens store `kind` in `dir` (which exists) for `options`.
pub fn open(
    kind: ObjectStoreKind,
    dir: &Path,
    options: &ObjectStoreOptions,
) -> Result<Box<dyn ObjectStore>, BenchError> {
    let store: Box<dyn ObjectStore> = match kind {
        ObjectStoreKind::Ferrite => Box::new(ferrite::FerriteObjects::open(dir, options)?),
        ObjectStoreKind::File => Box::new(file::FileObjects::open(dir, options)?),
        #[cfg(feature = "peers")]
        ObjectStoreKind::RocksDb => Box::new(rocksdb::RocksObjects::open(dir, options, false)?),
        #[cfg(feature = "peers")]
        ObjectStoreKind::RocksDbBlob => Box::new(rocksdb::RocksObjects::open(dir, options, true)?),
        #[cfg(feature = "peers")]
        ObjectStoreKind::Sqlite => Box::new(sqlite::SqliteObjects::open(dir, options)?),
        #[cfg(not(feature = "peers"))]
        peer => return Err(BenchError::Config(format!("{} is not built in", peer.name()))),
    };
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_peers_need_the_feature() {
        for kind in ObjectStoreKind::ALL {
            assert_eq!(ObjectStoreKind::parse(kind.name()), Ok(kind));
        }
        let e = ObjectStoreKind::parse("lmdb").unwrap_err();
        assert_eq!(e, "unknown store \"lmdb\" (ferrite, file, rocksdb, rocksdb-blob, sqlite)");
        assert!(ObjectStoreKind::File.built_in() && ObjectStoreKind::Ferrite.built_in());
        assert_eq!(ObjectStoreKind::Sqlite.built_in(), cfg!(feature = "peers"));
        assert_eq!(object_name(0), "obj-000001");
        assert_eq!(object_name(41), "obj-000042");
    }
}
