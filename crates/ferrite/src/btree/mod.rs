//! The B+tree: node layout (`node`), in-place node reads for lookups (`probe`), restartable
//! operations (`tree`), descents of several keys at once (`together`) and the structural
//! checker (`check`). Everything here is an attempt that knows nothing of I/O: it ends with
//! its result or an `Interrupt` (a page to load, a restart); the one driver that runs
//! attempts to their end is the scheduler's (`sched::run_async`).

pub mod check;
pub mod node;
pub mod probe;
pub mod scratch;
pub mod together;
pub mod tree;

pub use scratch::{with_scratch, Scratch};
pub use tree::BTree;
