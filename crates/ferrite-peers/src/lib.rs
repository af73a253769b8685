//! The peers `ferrite bench` compares Ferrite with: RocksDB, WiredTiger and LMDB, linked from
//! the system's libraries (Debian: librocksdb-dev, libwiredtiger-dev, liblmdb-dev) and wrapped
//! behind one small API, the same for the three: `open`, `get`, `put`, `put_batch`, `delete`,
//! `scan`, `flush`, `describe_config`. Each handle is `Send + Sync` and serves many threads.
//!
//! SQLite (libsqlite3-dev) is here for `bench objects` only, as a store of large objects
//! (`SqliteBlobs`: a table of BLOBs read and written in place), not behind that API: one
//! connection per thread, each `Send`.
//!
//! Transactions, for the workloads that need them (TPC-C): `Peer::begin` gives a
//! [`PeerTxn`] (get, put, delete, bounded scans both ways, commit; dropped, it rolls back) on
//! RocksDB opened with `PeerConfig::transactions` (an `OptimisticTransactionDB`, or a locking
//! `TransactionDB`: [`TxnMode`]) and on WiredTiger (snapshot isolation); `Peer::isolation` says in words what each guarantees.
//! LMDB offers none through this API.
//!
//! Keys are 1 to 511 bytes on all three (LMDB's default key limit; WiredTiger refuses empty
//! keys); values may be empty. `scan` from an empty start visits from the first key.
//!
//! The engines are behind the `link` feature, off by default: without it this crate is only
//! [`PeerConfig`] and [`PeerError`], compiles no C and links nothing, so the workspace builds
//! and tests on a machine without the libraries. To use them: `apt-get install librocksdb-dev
//! libwiredtiger-dev liblmdb-dev libsqlite3-dev`, then `cargo test -p ferrite-peers --features
//! link`.
//!
//! ```no_run
//! # #[cfg(feature = "link")] {
//! use ferrite_peers::{PeerConfig, RocksDb};
//!
//! let db = RocksDb::open("peer-data".as_ref(), &PeerConfig::default())?;
//! db.put(b"order-1", b"two apples")?;
//! let mut value = Vec::new();
//! assert!(db.get(b"order-1", &mut value)?);
//! # }
//! # Ok::<(), ferrite_peers::PeerError>(())
//! ```

mod config;
mod error;

#[cfg(feature = "link")]
mod dir;
#[cfg(feature = "link")]
mod lmdb;
#[cfg(feature = "link")]
mod peer;
#[cfg(feature = "link")]
mod rocksdb;
#[cfg(feature = "link")]
mod sqlite;
#[cfg(feature = "link")]
mod sys;
#[cfg(feature = "link")]
mod txn;
#[cfg(feature = "link")]
mod wiredtiger;

pub use config::{
    CacheFills, CacheLookups, MemoryUse, PeerConfig, PeerStats, PeerTier, PeerTierKind, TierUse,
    TxnMode,
};
pub use error::PeerError;

#[cfg(feature = "link")]
pub use lmdb::Lmdb;
#[cfg(feature = "link")]
pub use peer::Peer;
#[cfg(feature = "link")]
pub use rocksdb::{
    RocksDb, RocksDbTxn, ROCKSDB_OPTIMISTIC_ISOLATION, ROCKSDB_PESSIMISTIC_ISOLATION,
};
#[cfg(feature = "link")]
pub use sqlite::{SqliteBlobs, SqliteConfig};
#[cfg(feature = "link")]
pub use txn::PeerTxn;
#[cfg(feature = "link")]
pub use wiredtiger::{WiredTiger, WiredTigerTxn, WIREDTIGER_ISOLATION};
