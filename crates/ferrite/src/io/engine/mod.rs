//! How I/O is issued: one small interface (queue requests, submit them as one batch, reap
//! completions) over several submission engines, one file each (`psync.rs`, `uring.rs`,
//! `aio.rs`, `mmap.rs`). Each worker owns its own engine instance with its own channel to
//! every device: no I/O threads, no hand-off between threads.
//!
//! Requests name a device by its index in the device list the engine was opened with and an
//! offset in bytes on that device (where bytes live, striping included, is `io/device.rs`'s
//! business, not the engine's).

#![allow(unsafe_code)] // requests carry raw buffer pointers; see `IoEngine::queue`

pub mod aio;
pub mod block_engine;
pub mod mmap;
pub mod open;
pub mod psync;
pub(crate) mod request;
pub mod uring;

use std::fmt;
use std::io;

/// Which way a request moves bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    /// From the device into the buffer.
    Read,
    /// From the buffer to the device.
    Write,
}

/// One read or write of `len` bytes at `offset` of device `device`, to or from `buf`.
///
/// With direct I/O, `buf`, `offset` and `len` must be multiples of [`IO_ALIGN`]; engines refuse
/// misaligned requests in `queue` with [`QueueError::Misaligned`].
#[derive(Debug, Clone, Copy)]
pub struct IoRequest {
    /// A read or a write.
    pub kind: IoKind,
    /// Which device of the engine's list.
    pub device: usize,
    /// The byte offset in the device.
    pub offset: u64,
    /// The submitter's memory: valid for `len` bytes until the request completes.
    pub buf: *mut u8,
    /// Bytes to move.
    pub len: usize,
    /// Returned unchanged with the completion.
    pub tag: u64,
}

// SAFETY: a request is plain data; the memory it points at is the submitter's business
// (see `IoEngine::queue`).
unsafe impl Send for IoRequest {}

/// A finished request: its tag and the bytes moved, or the error. A read past the end of a
/// device moves fewer bytes than asked (0 entirely past it); that is not an error.
#[derive(Debug)]
pub struct IoCompletion {
    /// The request's tag.
    pub tag: u64,
    /// Bytes moved, or the error.
    pub result: io::Result<usize>,
}

/// Alignment of buffers, offsets and lengths for direct I/O, in bytes.
pub const IO_ALIGN: usize = 4096;

/// Why `queue` did not take a request.
#[derive(Debug)]
pub enum QueueError {
    /// `in_flight() == depth()`: submit and reap first.
    Full,
    /// Buffer, offset or length not a multiple of [`IO_ALIGN`] (direct I/O only).
    Misaligned,
    /// No device with that index.
    NoSuchDevice,
    /// The engine cannot do this kind of request (the caller falls back to blocking calls).
    Unsupported,
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueError::Full => write!(f, "the I/O queue is full"),
            QueueError::Misaligned => write!(
                f,
                "direct I/O needs buffers, offsets and lengths aligned to {IO_ALIGN} bytes"
            ),
            QueueError::NoSuchDevice => write!(f, "no device with that index"),
            QueueError::Unsupported => write!(f, "this engine does not take such requests"),
        }
    }
}

/// The engines Ferrite can issue I/O with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// `io_uring` (the default).
    IoUring,
    /// Linux AIO (`io_setup` / `io_submit` / `io_getevents`).
    Aio,
    /// Blocking `pread` / `pwrite`, one request at a time.
    Psync,
    /// Reads copied out of a shared memory mapping of the devices; writes with `pwrite`.
    Mmap,
}

impl EngineKind {
    /// Every engine (what `ferrite bench io --engine all` runs, in this order).
    pub const ALL: [EngineKind; 4] =
        [EngineKind::IoUring, EngineKind::Aio, EngineKind::Psync, EngineKind::Mmap];

    /// The name used on the command line and in results: `io_uring`, `aio`, `psync`, `mmap`.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::IoUring => "io_uring",
            EngineKind::Aio => "aio",
            EngineKind::Psync => "psync",
            EngineKind::Mmap => "mmap",
        }
    }

    /// The engine of that [`name`](EngineKind::name), if any.
    pub fn from_name(name: &str) -> Option<EngineKind> {
        EngineKind::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

/// A submission engine: one per worker thread.
pub trait IoEngine: Send {
    /// Which engine this is.
    fn kind(&self) -> EngineKind;

    /// Most requests in flight (queued, submitted, not yet reaped) at once.
    fn depth(&self) -> usize;

    /// How many files requests may name (`IoRequest::device` below it), where the engine
    /// reads and writes a list of files; `None` for engines that serve something else (a
    /// mapping, a custom device).
    fn file_count(&self) -> Option<usize> {
        None
    }

    /// Requests queued or submitted and not yet reaped.
    fn in_flight(&self) -> usize;

    /// Queues `request` for the next [`IoEngine::submit`].
    ///
    /// # Safety
    /// `request.buf` must be valid for `request.len` bytes (writable for reads) and must not
    /// be touched by anyone else until the request's completion has been reaped.
    unsafe fn queue(&mut self, request: IoRequest) -> Result<(), QueueError>;

    /// Submits everything queued, as one batch where the engine allows (one system call for
    /// io_uring and AIO). Returns how many requests it submitted.
    fn submit(&mut self) -> io::Result<usize>;

    /// Moves finished requests into `out` and returns how many. With `wait`, blocks until at
    /// least one request finishes, unless none is in flight.
    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<usize>;

    /// Tells the engine that most requests will use buffers inside `base..base + len` (the
    /// buffer pool's frames), so that it can prepare that memory once instead of per request
    /// (io_uring registers it as fixed buffers: the kernel then neither walks the page table
    /// nor pins pages per request). Returns whether the engine did anything; requests work
    /// the same either way, inside the region or not. The default does nothing.
    ///
    /// # Safety
    /// The region must stay mapped, and must not be unmapped or remapped, for as long as
    /// the engine lives.
    unsafe fn register_memory(&mut self, base: *mut u8, len: usize) -> bool {
        let _ = (base, len);
        false
    }

    /// Arms a wake-up on `fd`, an eventfd another thread writes to when it hands this
    /// engine's thread work: a [`IoEngine::reap`] that waits returns (with whatever else
    /// completed, possibly nothing) once `fd` is readable, instead of sleeping on until its
    /// own I/O finishes. One-shot: after it fired ([`IoEngine::take_wake`]), the caller
    /// drains `fd` and arms it again. Returns false if the engine cannot (the default); its
    /// waits then end only with its own completions. Already armed: does nothing, true.
    fn arm_wake(&mut self, fd: std::os::fd::RawFd) -> bool {
        let _ = fd;
        false
    }

    /// Whether the armed wake-up fired since the last call (it is then no longer armed).
    fn take_wake(&mut self) -> bool {
        false
    }

    /// Queues a write of `len` bytes from `buf` at `offset` of the open file `fd` (any file,
    /// not one of the devices), followed, if `then_sync`, by an `fdatasync` of it: one
    /// completion with `tag`, once both are done (`Ok(len)`; a short write is an error), or
    /// with the first error. The write-ahead log goes out this way, on the worker's own
    /// ring (without the sync when `fd` was opened `O_DSYNC`: the write itself is durable
    /// when it completes). Engines that cannot queue it refuse with
    /// `QueueError::Unsupported` (the default); callers then write with blocking calls.
    ///
    /// # Safety
    /// `buf` must stay valid and untouched, and `fd` open, until the completion is reaped.
    unsafe fn queue_write_sync(
        &mut self,
        fd: std::os::fd::RawFd,
        offset: u64,
        buf: *const u8,
        len: usize,
        tag: u64,
        then_sync: bool,
    ) -> Result<(), QueueError> {
        let _ = (fd, offset, buf, len, tag, then_sync);
        Err(QueueError::Unsupported)
    }

    /// Queues `op` on a socket: one completion with `tag` (below [`SOCKET_TAG_LIMIT`]) when
    /// it is done, with what the call returned (an accept's new descriptor, the bytes a
    /// receive or a send moved; 0 from a receive: the peer closed). A socket operation may
    /// wait for the network as long as it likes; it does not count against `depth`. Engines
    /// that cannot queue it refuse with `QueueError::Unsupported` (the default); callers
    /// then make the blocking call.
    ///
    /// # Safety
    /// A receive's buffer must stay valid and untouched, a send's valid, and the socket
    /// open, until the completion is reaped (or the operation was cancelled and its
    /// completion reaped: see [`IoEngine::cancel_socket`]).
    unsafe fn queue_socket(&mut self, op: SocketOp, tag: u64) -> Result<(), QueueError> {
        let _ = (op, tag);
        Err(QueueError::Unsupported)
    }

    /// Asks the kernel to end the socket operation `tag` early (its completion then carries
    /// an error, `ECANCELED` most often, unless it finished first). Nothing if it is not in
    /// flight.
    fn cancel_socket(&mut self, tag: u64) {
        let _ = tag;
    }
}

/// Tags of socket operations are below this (the engine keeps the bits above for itself).
pub const SOCKET_TAG_LIMIT: u64 = 1 << 56;

/// One operation on a socket (`IoEngine::queue_socket`).
#[derive(Debug, Clone, Copy)]
pub enum SocketOp {
    /// Accepts a connection on the listening socket `fd` (the new one is close-on-exec).
    Accept {
        /// The listening socket.
        fd: std::os::fd::RawFd,
    },
    /// Receives at most `len` bytes into `buf`; with a `timeout`, fails with `ECANCELED`
    /// if nothing arrived within it.
    Recv {
        /// The connected socket.
        fd: std::os::fd::RawFd,
        /// The submitter's memory: valid for `len` bytes until the operation completes.
        buf: *mut u8,
        /// Most bytes to receive.
        len: usize,
        /// How long to wait for bytes, if not for ever.
        timeout: Option<std::time::Duration>,
    },
    /// Sends at most `len` bytes from `buf` (`MSG_NOSIGNAL`: a closed peer is an error, not
    /// a signal).
    Send {
        /// The connected socket.
        fd: std::os::fd::RawFd,
        /// The submitter's memory: valid for `len` bytes until the operation completes.
        buf: *const u8,
        /// Most bytes to send.
        len: usize,
    },
    /// A timer: completes after `duration` (with `ETIME`, as io_uring's timeouts do; no
    /// socket, no memory). For tasks that wait for time to pass without blocking a worker.
    Sleep {
        /// How long to wait.
        duration: std::time::Duration,
    },
}

// SAFETY: an operation is plain data; the memory it points at is the submitter's business
// (see `IoEngine::queue_socket`).
unsafe impl Send for SocketOp {}

/// Reads each `(device, offset, buffer)` of `reads` in full through `engine`, keeping as
/// many in flight as the engine takes, and returns once every one is done. On an error it
/// still waits for every request in flight before returning (the kernel may write into
/// their buffers until then); a short read is an error (`UnexpectedEof`).
pub fn read_all(
    engine: &mut dyn IoEngine,
    reads: &mut [(usize, u64, &mut [u8])],
) -> io::Result<()> {
    let mut next = 0;
    let mut done = 0;
    let mut failed: Option<io::Error> = None;
    let mut completions = Vec::new();
    while done < next || (next < reads.len() && failed.is_none()) {
        while next < reads.len() && failed.is_none() {
            let (device, offset, buf) = &mut reads[next];
            let request = IoRequest {
                kind: IoKind::Read,
                device: *device,
                offset: *offset,
                buf: buf.as_mut_ptr(),
                len: buf.len(),
                tag: next as u64,
            };
            // SAFETY: the buffer is borrowed from `reads` for this whole call, and the call
            // returns only once every queued request has been reaped.
            match unsafe { engine.queue(request) } {
                Ok(()) => next += 1,
                Err(QueueError::Full) => break,
                Err(e) => failed = Some(io::Error::other(format!("queueing a read: {e:?}"))),
            }
        }
        if let Err(e) = engine.submit() {
            failed.get_or_insert(e);
        }
        if done == next {
            continue;
        }
        completions.clear();
        if let Err(e) = engine.reap(&mut completions, true) {
            // Nothing can be waited for any more: the buffers must outlive the requests.
            if engine.in_flight() > 0 {
                panic!("reaping reads failed with {} in flight: {e}", engine.in_flight());
            }
            return Err(e);
        }
        for completion in completions.drain(..) {
            done += 1;
            let want = reads[completion.tag as usize].2.len();
            match completion.result {
                Ok(n) if n == want => {}
                Ok(n) => {
                    let short = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("a read of {want} bytes returned {n}"),
                    );
                    failed.get_or_insert(short);
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
