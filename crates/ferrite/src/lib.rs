//! Ferrite: an ordered key-value storage engine that stays at the speed of the SSD when the
//! data is many times larger than memory.
//!
//! ```no_run
//! use ferrite::{Db, Options};
//!
//! let db = Db::open("my-data", Options::default())?;
//! let orders = db.tree("orders")?;
//! orders.put("order-1", "two apples")?;
//! assert_eq!(orders.get("order-1")?.as_deref(), Some(&b"two apples"[..]));
//! for entry in orders.prefix("order-") {
//!     let (key, value) = entry?;
//!     println!("{key:?} = {value:?}");
//! }
//! db.close()?;
//! # Ok::<(), ferrite::Error>(())
//! ```

// Every public item is documented: the engine's layers (`btree`, `buffer`, `wal`, …) too,
// which are public for the tools, the benchmarks and the fuzzers.
#![deny(missing_docs)]

pub mod btree;
pub mod buffer;
pub mod change_buffer;
mod db;
pub mod dump;
pub mod error;
pub mod format;
mod id_hash;
pub mod io;
mod options;
pub mod sched;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod wal;
mod worker_context;

pub use btree::node::MAX_KEY_LEN;
pub use buffer::{PoolStats, TierAdmission, TierFilter, TierMedium, TierOptions, TierStats};
#[doc(hidden)]
pub use db::fuzz_object_entry;
pub use db::{
    BackupReport, CheckReport, Db, DbStats, Iter, ObjectReader, ObjectSpaceStats, ObjectStat,
    ObjectWriter, ObjectsReport, RecoveryReport, ResidentTree, Snapshot, SpaceUsage, Transaction,
    Tree, ValueSlices, WriteBatch, DEVICES_FILE_NAME, LOCK_FILE_NAME, MAX_OBJECT_LEN,
    MAX_TREE_NAME_LEN, PAGE_FILE_NAME,
};
pub use error::{Error, PageId, Result};
pub use format::value::MAX_VALUE_LEN;
pub use options::{
    Durability, Options, MAX_AUTO_CHECKPOINT_BYTES, MAX_CHANGE_BUFFER_BYTES,
    MIN_AUTO_CHECKPOINT_BYTES, MIN_POOL_PAGES,
};
pub use wal::recover::LogReport;
pub use wal::segment::LOG_DIR_NAME;
