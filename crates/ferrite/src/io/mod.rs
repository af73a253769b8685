//! How bytes reach the device. `file` is the page file opened for direct I/O, read and
//! written with blocking system calls; `engine` is the interface of the submission engines
//! (io_uring, AIO, psync, mmap) the workers use, one file each.

pub mod engine;
pub mod file;

pub use engine::{EngineKind, IoCompletion, IoEngine, IoKind, IoRequest, QueueError, IO_ALIGN};
pub use file::PageFile;
