//! How bytes reach the device.
//!
//! - `device.rs`: where bytes live (one file or block device, or a RAID0 stripe over several,
//!   grown in preallocated steps);
//! - `page_file.rs`: the page file over those devices, read and written a page at a time by
//!   blocking system calls (direct I/O by default);
//! - `engine/`: the submission engines the workers use (io_uring, AIO, psync, mmap), one
//!   small interface, one instance per worker, and `open_engine` to make one of a kind;
//! - `storage.rs`: the seam the blocking paths (log, page file) open files through (tests put
//!   the simulated disk of `testing::sim` behind it), and `engine/block_engine.rs` the engine
//!   of a page file that lives on such a device;
//! - `aligned.rs`: memory aligned for direct I/O.
//!
//! `docs/io.md` tells the whole story.

pub mod aligned;
pub mod device;
pub mod engine;
pub mod page_file;
pub mod storage;

pub use aligned::{AlignedBlock, AlignedPage};
pub use device::{DeviceOptions, Devices, DEFAULT_CHUNK_BYTES, DEFAULT_GROW_BYTES};
pub use engine::block_engine::BlockEngine;
pub use engine::mmap::Mapping;
pub use engine::open::{open_best_engine, open_engine, open_engine_with, PREFERRED_ENGINES};
pub use engine::request::MAX_IO_DEPTH;
pub use engine::{
    EngineKind, IoCompletion, IoEngine, IoKind, IoRequest, QueueError, SocketOp, IO_ALIGN,
    SOCKET_TAG_LIMIT,
};
pub use page_file::PageFile;
pub use storage::{BlockDevice, DirStorage, FileDevice, Storage};
