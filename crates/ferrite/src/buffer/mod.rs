//! The buffer manager: a bounded pool of 4 KiB frames over a virtual-memory page table
//! (the vmcache approach), page-state words with version latches, and clock eviction run
//! inline by whoever runs short of frames.

mod aligned;
pub mod capture;
mod pool;
mod resident;
mod state;
mod vmem;

pub use aligned::AlignedPage;
pub use pool::{
    evict_batch_size, BufferPool, ExclusiveGuard, FrameView, LoadStart, PageValidator, PoolStats,
    SharedGuard, WriteCheck, WriteStart,
};
pub use state::PageState;

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
