//! The state one open database shares between its handles (`Db`, `Tree`, `Iter`,
//! `Transaction`): the pool, the log, the workers, the catalog, the change buffer and the
//! locks that order commits and checkpoints.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::lock::DirLock;
use super::recovery::RecoveryReport;
use crate::btree::BTree;
use crate::buffer::BufferPool;
use crate::change_buffer::ChangeBuffer;
use crate::error::{Error, Result};
use crate::format::superblock::Superblock;
use crate::options::Durability;
use crate::sched::Workers;
use crate::wal::commit::CommitLock;
use crate::wal::Log;

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) dir: PathBuf,
    pub(super) pool: Arc<BufferPool>,
    /// The task workers, if any were asked for; stopped at close.
    pub(super) workers: Mutex<Option<Workers>>,
    /// The engine the workers use.
    pub(super) engine: Mutex<Option<crate::io::EngineKind>>,
    pub(super) catalog: BTree,
    /// The last superblock written; the next write bumps its sequence.
    pub(super) superblock: Mutex<Superblock>,
    /// What is wrong with the other superblock copy, if it is damaged (for `check`); the
    /// next superblock write replaces that copy.
    pub(super) superblock_damage: Mutex<Option<String>>,
    pub(super) next_tree_id: AtomicU64,
    /// Serialises opening, creating and dropping trees (never taken by reads or writes of keys).
    pub(super) catalog_lock: Mutex<()>,
    /// One "dropped" flag per tree with open handles, shared by those handles.
    pub(super) dropped_flags: Mutex<HashMap<u64, Arc<AtomicBool>>>,
    pub(super) closed: AtomicBool,
    pub(super) read_only: bool,
    /// Holds the directory's lock; released at close even if handles live on.
    pub(super) lock: Mutex<Option<DirLock>>,
    /// The write-ahead log (`None` when opened read-only).
    pub(super) log: Option<Arc<Log>>,
    pub(super) commit_lock: CommitLock,
    /// Keys running transactions read for update (`intents.rs`).
    pub(super) intents: super::intents::Intents,
    pub(super) durability: Durability,
    /// `Options::checkpoint_log_bytes` (`None`: the interval follows the pool and the data,
    /// `Options::checkpoint_interval_for`) and the pool's size.
    pub(super) checkpoint_interval: (Option<u64>, u64),
    /// Redo LSN of the last checkpoint.
    pub(super) checkpoint_redo: AtomicU64,
    /// One checkpoint at a time.
    pub(super) checkpoint_lock: Mutex<()>,
    pub(super) checkpointing: AtomicBool,
    /// Puts into leaves not in memory, waiting for their leaves (`change_buffer/`).
    pub(super) change_buffer: Arc<ChangeBuffer>,
    /// The snapshot plain scans took last, and the commit word it was taken at: a scan that
    /// finds the word unchanged (no commit began or ended since) shares it
    /// (`snapshot::Held::for_scan`).
    pub(super) scan_snapshot: Mutex<(u64, std::sync::Weak<super::snapshot::Held>)>,
    /// Threads running a checkpoint, or flushing the log periodically; joined at close.
    pub(super) helpers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    pub(super) recovery: RecoveryReport,
    /// Where the page file and the log live.
    pub(super) storage: Arc<dyn crate::io::Storage>,
    /// Objects' shared state (`object/space.rs`).
    pub(super) object_space: Arc<super::object::Space>,
    /// The objects tree, once known to exist.
    pub(super) objects_root: std::sync::OnceLock<(BTree, Arc<str>, Arc<AtomicBool>)>,
    /// Whether the objects tree exists: puts and deletes then look for a stub to free.
    pub(super) objects_in_use: AtomicBool,
}

impl Shared {
    pub(super) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    pub(super) fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }

    /// The log; `ReadOnly` when opened read-only.
    pub(super) fn log(&self) -> Result<&Arc<Log>> {
        self.log.as_ref().ok_or(Error::ReadOnly)
    }
}
