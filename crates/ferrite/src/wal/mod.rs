//! The write-ahead log: every change is logged before the pages it touches can reach the
//! disk. `record` is the format of log records, `log` the buffer, group commit and segment
//! files, `recover` the replay at open; checkpoints bound both (see `docs/design.md`).

pub mod commit;
pub mod log;
pub mod record;
pub mod recover;

pub use log::Log;
