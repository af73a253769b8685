//! The engine of a page file that lives on a [`BlockDevice`] rather than on real devices
//! (`PageFile::open_on`, a storage given in `Options::storage`; tests put a simulated disk
//! there): the workers' requests go through the device's own `read_at` / `write_at`, one at a
//! time, so that every request meets whatever the device does — its faults, crashes and
//! capacity included.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::sync::Arc;

use super::request::{admit, MAX_IO_DEPTH};
use super::{EngineKind, IoCompletion, IoEngine, IoKind, IoRequest, QueueError};
use crate::error::{Error, Result};
use crate::io::storage::BlockDevice;

/// A synchronous submission engine over one [`BlockDevice`] (device index 0): `submit`
/// performs the queued requests in order, `reap` hands out their completions. It has no
/// alignment rules (nothing is direct) and reports itself as [`EngineKind::Psync`], the
/// engine it imitates.
pub struct BlockEngine {
    device: Arc<dyn BlockDevice>,
    depth: usize,
    queued: VecDeque<IoRequest>,
    done: VecDeque<IoCompletion>,
}

impl fmt::Debug for BlockEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockEngine")
            .field("device", &self.device.path())
            .field("depth", &self.depth)
            .field("in_flight", &self.in_flight())
            .finish_non_exhaustive()
    }
}

impl BlockEngine {
    /// An engine on `device` with room for `depth` requests in flight (1 to
    /// [`MAX_IO_DEPTH`], as `open_engine` checks).
    pub fn new(device: Arc<dyn BlockDevice>, depth: usize) -> Result<BlockEngine> {
        if depth == 0 || depth > MAX_IO_DEPTH {
            return Err(Error::BadOptions {
                reason: format!("I/O depth {depth} is out of range (1 to {MAX_IO_DEPTH})"),
            });
        }
        Ok(BlockEngine {
            device,
            depth,
            queued: VecDeque::with_capacity(depth),
            done: VecDeque::with_capacity(depth),
        })
    }

    /// Performs `request`: every byte, a read up to the end of the device, or the error.
    #[allow(unsafe_code)] // the request's raw buffer
    fn perform(&self, request: &IoRequest) -> io::Result<usize> {
        if request.len == 0 {
            return Ok(0);
        }
        match request.kind {
            IoKind::Read => {
                // SAFETY: `request.buf` is valid and writable for `request.len` bytes and
                // untouched by anyone else until the completion is reaped (the contract of
                // `IoEngine::queue`, which took this request); the slice dies before that.
                let buf = unsafe { std::slice::from_raw_parts_mut(request.buf, request.len) };
                self.device.read_at(buf, request.offset)
            }
            IoKind::Write => {
                // SAFETY: as above; a write only reads the buffer.
                let buf = unsafe { std::slice::from_raw_parts(request.buf, request.len) };
                self.device.write_at(buf, request.offset).map(|()| request.len)
            }
        }
    }
}

#[allow(unsafe_code)] // `IoEngine::queue` is an unsafe method
impl IoEngine for BlockEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Psync
    }

    fn depth(&self) -> usize {
        self.depth
    }

    fn in_flight(&self) -> usize {
        self.queued.len() + self.done.len()
    }

    unsafe fn queue(&mut self, request: IoRequest) -> Result<(), QueueError> {
        admit(&request, self.in_flight(), self.depth, 1, false)?;
        self.queued.push_back(request);
        Ok(())
    }

    fn submit(&mut self) -> io::Result<usize> {
        let submitted = self.queued.len();
        while let Some(request) = self.queued.pop_front() {
            let result = self.perform(&request);
            self.done.push_back(IoCompletion { tag: request.tag, result });
        }
        Ok(submitted)
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<usize> {
        // Requests queued and never submitted would otherwise never finish.
        if wait && self.done.is_empty() && !self.queued.is_empty() {
            self.submit()?;
        }
        let reaped = self.done.len();
        out.extend(self.done.drain(..));
        Ok(reaped)
    }
}
