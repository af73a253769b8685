//! The buffer manager: a bounded pool of 4 KiB frames over a virtual-memory page table
//! (the vmcache approach), page-state words with version latches, and clock eviction run
//! inline by whoever runs short of frames. `pool.rs` composes the components below and lists
//! what each is for. The pool follows the write-ahead rule through the [`WriteAhead`] trait,
//! which the log implements: nothing here depends on `wal/`.

mod alloc;
mod capture;
mod evict;
mod frames;
mod guard;
mod load;
mod page_alloc;
mod page_table;
mod pool;
mod recovery;
mod resident;
mod state;
mod tier;
mod versions;
mod vmem;
mod write_ahead;
mod write_back;

pub use capture::{in_commit, read_uncommitted, reads_must_not_wait, PageChange};
pub use evict::evict_batch_size;
pub use frames::FrameView;
pub use guard::{ExclusiveGuard, SharedGuard};
pub use load::LoadStart;
pub use pool::{BufferPool, PageValidator, PoolStats, RESIDENT_HEADER};
pub use state::PageState;
pub use tier::{
    Admission, AdmitAll, AdmitNone, Measured, ObpAdmission, StagedWrite, Tier, TierAdmission,
    TierEvent, TierFilter, TierMedium, TierOptions, TierRead, TierStats,
};
pub(crate) use versions::due_through;
pub use versions::{SnapshotState, IMAGE_VERSION};
pub use write_ahead::WriteAhead;
pub use write_back::{WriteCheck, WriteStart};

/// Why an operation could not finish now. The B+tree's operations return it and are re-run
/// from the start by their driver (the blocking API, or later a task) once it is handled.
#[derive(Debug)]
pub enum Interrupt {
    /// A page the operation needs is not in memory: load it, then restart.
    Miss(crate::PageId),
    /// A latch was taken or a version changed: restart (after a short back-off).
    Restart,
    /// A real error: give up and report it.
    Error(crate::Error),
}

impl From<crate::Error> for Interrupt {
    fn from(error: crate::Error) -> Self {
        Interrupt::Error(error)
    }
}

/// The result of one attempt at an operation.
pub type Attempt<T> = std::result::Result<T, Interrupt>;
