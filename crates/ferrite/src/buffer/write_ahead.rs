//! The write-ahead rule, as the buffer pool needs it: what it asks of a log before a dirty
//! page may reach the disk, and how a commit's captured changes become a record. The log
//! (`wal::Log`) implements it; the pool knows no log record and imports nothing of `wal/`.
//!
//! The rule (`write_back.rs`): a logged page is written only once the log is durable past
//! its last change and, after each checkpoint, past a full image of it (so that a write torn
//! by a crash can be repaired); a page a commit in progress changed is not written at all
//! until that commit's record is appended.

use std::fmt::Debug;

use super::capture::PageChange;
use crate::error::{PageId, Result};

/// A write-ahead log, seen from the buffer pool.
pub trait WriteAhead: Send + Sync + Debug {
    /// Appends the full image of page `page_id`, whose bytes are `page` (its content is as
    /// of the LSN in its header); returns the image record's LSN.
    fn append_image(&self, page_id: PageId, page: &[u8]) -> Result<u64>;

    /// The commit record of `changes` (in the order captured), with the tree id counter
    /// `next_tree_id`: the caller may append more to it, then appends it.
    fn encode_commit(&self, next_tree_id: u64, changes: &[PageChange<'_>]) -> Vec<u8>;

    /// Every log byte below this LSN is durable.
    fn durable(&self) -> u64;

    /// Makes the log durable below `lsn`, blocking.
    fn flush(&self, lsn: u64) -> Result<()>;

    /// A page write failed: the log refuses writes from now on, with `reason`.
    fn fail(&self, reason: String);
}
