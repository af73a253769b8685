//! How bytes reach the device. `file` is the page file opened for direct I/O, read and
//! written with blocking system calls; `engine` is the interface of the submission engines
//! (io_uring, AIO, psync, mmap) the workers use, one file each.
//! `device` is where bytes live (one device or a RAID0 stripe, grown in preallocated steps);
//! `open` makes an engine of a given kind on a device list; `docs/io.md` tells the whole story.
//! `blockdev` is the seam the blocking paths (log, page file) open files through (tests put
//! the simulated disk of `testing::sim` behind it), and `block_engine` the engine of a page
//! file that lives on such a device.

pub mod aio;
pub mod block_engine;
pub mod blockdev;
pub mod buf;
pub mod device;
pub mod engine;
pub mod file;
pub mod mmap;
pub mod open;
pub mod psync;
mod request;
pub mod uring;

pub use block_engine::BlockEngine;
pub use blockdev::{BlockDevice, DirStorage, FileDevice, Storage};
pub use buf::AlignedBuf;
pub use device::{DeviceOptions, Devices, DEFAULT_CHUNK_BYTES, DEFAULT_GROW_BYTES};
pub use engine::{EngineKind, IoCompletion, IoEngine, IoKind, IoRequest, QueueError, IO_ALIGN};
pub use file::PageFile;
pub use mmap::Mapping;
pub use open::open_engine;
pub use request::MAX_IO_DEPTH;
