//! The write-ahead log: every change is logged before the pages it touches can reach the
//! disk. `record` is the format of log records, `segment` the segment files and the sectors
//! that frame the log in them, `log` the buffer, group commit and segment slots, `chain` the
//! segments a recovery reads, `recover` how the log's end is judged and the replay at open;
//! checkpoints bound both (see `docs/design.md`).

pub mod chain;
pub mod commit;
pub mod log;
pub mod record;
pub mod recover;
pub mod segment;

pub use log::Log;
