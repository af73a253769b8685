//! The write-ahead log: every change is logged before the pages it touches can reach the
//! disk. `record` is the format of log records, `segment` the segment files and the sectors
//! that frame the log in them, `log` the pending bytes (appended, not yet written), group
//! commit and segment slots, `chain` the segments a recovery reads, `recover` how the log's
//! end is judged and the replay at open; checkpoints bound both (see `docs/design.md`).
//! The buffer pool learns the write-ahead rule from the log through `buffer::WriteAhead`,
//! which `Log` implements (`log.rs`).

pub mod chain;
pub mod commit;
pub mod log;
pub mod record;
pub mod recover;
pub mod segment;

pub use log::Log;
