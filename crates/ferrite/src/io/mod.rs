//! How bytes reach the device. `file` is the page file opened for direct I/O, read and
//! written with blocking system calls; the asynchronous engines (io_uring, AIO, mmap) join it
//! here as one file each.

pub mod file;

pub use file::PageFile;
