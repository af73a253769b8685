//! The Linux AIO engine: `io_setup` / `io_submit` / `io_getevents` / `io_destroy` through
//! raw system calls (there is no maintained crate, and libaio is only a thin wrapper over
//! them). One AIO context of `depth` events per engine instance; `submit` hands every queued
//! control block to the kernel with as few `io_submit` calls as it accepts; `reap(wait)`
//! sleeps in `io_getevents` for one event.
//!
//! `io_submit` may take only the first k blocks of a batch: the rest are offered again. When
//! it refuses the first block outright, `EAGAIN` (the kernel is short of resources) waits for
//! a completion and retries, `EINTR` retries, and any other error (a bad descriptor, an
//! alignment the device refuses) completes that request with the error.
//!
//! Linux performs AIO asynchronously only with `O_DIRECT`; on buffered files `io_submit`
//! does the I/O before returning (correct, merely synchronous).
//!
//! Dropping the engine waits for every request the kernel holds, then destroys the context.

#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use super::request::{admit, advance, Slots, Step};
use super::{EngineKind, IoCompletion, IoEngine, IoKind, IoRequest, QueueError};
use crate::error::{Error, Result};

/// `aio_context_t`: an opaque kernel handle.
type AioContext = libc::c_ulong;

const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;

/// The kernel's `struct iocb` (include/uapi/linux/aio_abi.h), 64 bytes.
///
/// | offset | size | field |
/// |--------|------|-------|
/// | 0  | 8 | `aio_data`: returned in the event (our slot index) |
/// | 8  | 4 | `aio_key` (little-endian order; swapped with the next on big-endian) |
/// | 12 | 4 | `aio_rw_flags` (`RWF_*`) |
/// | 16 | 2 | `aio_lio_opcode` (`IOCB_CMD_*`) |
/// | 18 | 2 | `aio_reqprio` |
/// | 20 | 4 | `aio_fildes` |
/// | 24 | 8 | `aio_buf` |
/// | 32 | 8 | `aio_nbytes` |
/// | 40 | 8 | `aio_offset` |
/// | 48 | 8 | `aio_reserved2` |
/// | 56 | 4 | `aio_flags` (`IOCB_FLAG_*`) |
/// | 60 | 4 | `aio_resfd` |
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Iocb {
    aio_data: u64,
    #[cfg(target_endian = "little")]
    aio_key: u32,
    aio_rw_flags: i32,
    #[cfg(target_endian = "big")]
    aio_key: u32,
    aio_lio_opcode: u16,
    aio_reqprio: i16,
    aio_fildes: u32,
    aio_buf: u64,
    aio_nbytes: u64,
    aio_offset: i64,
    aio_reserved2: u64,
    aio_flags: u32,
    aio_resfd: u32,
}

/// The kernel's `struct io_event`, 32 bytes: `data` is the block's `aio_data`, `obj` its
/// address, `res` the bytes moved or a negated errno.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

const _: () = assert!(std::mem::size_of::<Iocb>() == 64 && std::mem::size_of::<IoEvent>() == 32);

/// Pause after a round in which the kernel took nothing and nothing was in flight.
const STALL_PAUSE: Duration = Duration::from_micros(100);
const MAX_STALLS: u32 = 1_000;

fn syscall_result(rc: libc::c_long) -> io::Result<usize> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// A Linux AIO context and the requests it carries.
#[derive(Debug)]
pub struct AioEngine {
    context: AioContext,
    files: Arc<[File]>,
    direct: bool,
    depth: usize,
    slots: Slots,
    /// The control block of each slot's current transfer.
    iocbs: Vec<Iocb>,
    /// Slots whose control block waits for `io_submit`, in order.
    pending: VecDeque<u64>,
    /// Scratch: the addresses passed to `io_submit`.
    pointers: Vec<*mut Iocb>,
    /// Blocks the kernel holds (submitted, event not yet taken).
    in_kernel: usize,
    events: Vec<IoEvent>,
    /// Completions produced outside `reap` (refused blocks), not yet reaped.
    ready: VecDeque<IoCompletion>,
}

// SAFETY: `pointers` only ever points into `iocbs`, which the engine owns; the context is a
// kernel handle usable from any thread. Nothing is tied to the thread that made the engine.
unsafe impl Send for AioEngine {}

impl AioEngine {
    pub(crate) fn new(files: Arc<[File]>, direct: bool, depth: usize) -> Result<Self> {
        let mut context: AioContext = 0;
        let events = libc::c_long::try_from(depth).expect("depth checked by open_engine");
        // SAFETY: io_setup writes the new context into the variable we pass.
        let rc = unsafe { libc::syscall(libc::SYS_io_setup, events, &mut context) };
        syscall_result(rc).map_err(|e| {
            let hint = match e.raw_os_error() {
                Some(libc::EAGAIN) => "more AIO events than fs.aio-max-nr allows system-wide",
                Some(libc::ENOSYS) => "this kernel has no AIO",
                Some(libc::EPERM) => "AIO is disabled here (a seccomp filter, say)",
                _ => "the kernel refused",
            };
            Error::io(format!("setting up an AIO context of {depth} events ({hint})"), e)
        })?;
        Ok(AioEngine {
            context,
            files,
            direct,
            depth,
            slots: Slots::new(depth),
            iocbs: vec![Iocb::default(); depth],
            pending: VecDeque::with_capacity(depth),
            pointers: Vec::with_capacity(depth),
            in_kernel: 0,
            events: vec![IoEvent::default(); depth],
            ready: VecDeque::new(),
        })
    }

    /// Fills slot `index`'s control block for its next transfer and queues it.
    fn prepare(&mut self, index: u64) {
        let slot = self.slots.get_mut(index);
        let piece = slot.piece();
        let fd = self.files[slot.request.device].as_raw_fd();
        self.iocbs[index as usize] = Iocb {
            aio_data: index,
            aio_lio_opcode: match slot.request.kind {
                IoKind::Read => IOCB_CMD_PREAD,
                IoKind::Write => IOCB_CMD_PWRITE,
            },
            aio_fildes: fd as u32,
            aio_buf: piece.buf as u64,
            aio_nbytes: piece.len as u64,
            // An offset past i64::MAX wraps negative; the kernel refuses it with EINVAL.
            aio_offset: piece.offset as i64,
            ..Iocb::default()
        };
        self.pending.push_back(index);
    }

    /// Takes the events the kernel has posted, waiting for at least `min` of them.
    fn collect(&mut self, out: &mut Vec<IoCompletion>, min: usize) -> io::Result<()> {
        if self.in_kernel == 0 {
            return Ok(());
        }
        let mut zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        let timeout: *mut libc::timespec = if min == 0 { &mut zero } else { std::ptr::null_mut() };
        let max = self.in_kernel.min(self.events.len());
        let taken = loop {
            // SAFETY: `events` has room for `max` events; `timeout` is null (wait) or points
            // at a live timespec; the context is ours.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_io_getevents,
                    self.context,
                    min as libc::c_long,
                    max as libc::c_long,
                    self.events.as_mut_ptr(),
                    timeout,
                )
            };
            match syscall_result(rc) {
                Ok(n) => break n,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        };
        self.in_kernel -= taken;
        let events = std::mem::take(&mut self.events);
        for &IoEvent { data: index, res, .. } in &events[..taken] {
            let result = if res < 0 {
                Err(io::Error::from_raw_os_error(-res as i32))
            } else {
                Ok(res as usize)
            };
            match advance(self.slots.get_mut(index), result, self.direct) {
                Step::Complete(completion) => {
                    self.slots.remove(index);
                    out.push(completion);
                }
                Step::Continue => self.prepare(index),
            }
        }
        self.events = events;
        Ok(())
    }
}

impl IoEngine for AioEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Aio
    }

    fn file_count(&self) -> Option<usize> {
        Some(self.files.len())
    }

    fn depth(&self) -> usize {
        self.depth
    }

    fn in_flight(&self) -> usize {
        self.slots.used() + self.ready.len()
    }

    unsafe fn queue(&mut self, request: IoRequest) -> Result<(), QueueError> {
        admit(&request, self.in_flight(), self.depth, self.files.len(), self.direct)?;
        let index = self.slots.insert(request);
        self.prepare(u64::from(index));
        Ok(())
    }

    fn submit(&mut self) -> io::Result<usize> {
        let mut submitted = 0;
        let mut stalls = 0;
        while !self.pending.is_empty() {
            self.pointers.clear();
            let base = self.iocbs.as_mut_ptr();
            // `wrapping_add` stays inside `iocbs`: every pending index is a slot index.
            self.pointers.extend(self.pending.iter().map(|&i| base.wrapping_add(i as usize)));
            // SAFETY: `pointers` holds `pointers.len()` addresses of initialised control
            // blocks in `iocbs` (the kernel copies them during the call); each points at a
            // request buffer its submitter keeps valid until the completion is reaped.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_io_submit,
                    self.context,
                    self.pointers.len() as libc::c_long,
                    self.pointers.as_mut_ptr(),
                )
            };
            match syscall_result(rc) {
                Ok(n) if n > 0 => {
                    // A partial submit took the first n; the rest go round again.
                    self.pending.drain(..n);
                    self.in_kernel += n;
                    submitted += n;
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Ok(_) | Err(_) if stalls >= MAX_STALLS => {
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        "the kernel keeps refusing to take AIO submissions",
                    ));
                }
                Ok(_) => {
                    stalls += 1;
                    std::thread::sleep(STALL_PAUSE);
                }
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    stalls += 1;
                    if self.in_kernel > 0 {
                        let mut taken = Vec::new();
                        self.collect(&mut taken, 1)?;
                        self.ready.extend(taken);
                    } else {
                        std::thread::sleep(STALL_PAUSE);
                    }
                }
                Err(e) => {
                    // The first pending block is refused: its request ends with the error.
                    let index = self.pending.pop_front().expect("pending is not empty");
                    let slot = self.slots.remove(index);
                    self.ready.push_back(IoCompletion { tag: slot.request.tag, result: Err(e) });
                }
            }
        }
        Ok(submitted)
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<usize> {
        let start = out.len();
        loop {
            out.extend(self.ready.drain(..));
            let block = wait && out.len() == start && self.pending.is_empty();
            self.collect(out, usize::from(block))?;
            if !self.pending.is_empty() {
                // Follow-up transfers, and anything queued and never submitted.
                self.submit()?;
                out.extend(self.ready.drain(..));
            }
            if wait && out.len() == start && self.in_flight() > 0 {
                continue;
            }
            break;
        }
        Ok(out.len() - start)
    }
}

impl Drop for AioEngine {
    fn drop(&mut self) {
        let mut sink = Vec::new();
        while self.in_kernel > 0 {
            sink.clear();
            if self.collect(&mut sink, 1).is_err() {
                break;
            }
        }
        // SAFETY: the context is ours and no longer used.
        unsafe { libc::syscall(libc::SYS_io_destroy, self.context) };
    }
}
