//! The blocking engine: `pread` / `pwrite`, one request at a time, performed by `submit`;
//! their completions wait for `reap`. It gives no device parallelism of its own (a thread
//! waits for each request in turn); it is the baseline the asynchronous engines are measured
//! against, and the path where nothing else is available.

#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::sync::Arc;

use super::request::{admit, advance, Piece, Slot, Step};
use super::{EngineKind, IoCompletion, IoEngine, IoKind, IoRequest, QueueError};

/// One `pread` or `pwrite` of `piece` on `file`.
pub(crate) fn transfer(file: &File, kind: IoKind, piece: Piece) -> io::Result<usize> {
    let offset = libc::off_t::try_from(piece.offset)
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fd = file.as_raw_fd();
    let rc = match kind {
        // SAFETY: `piece.buf` is valid and writable for `piece.len` bytes: it lies inside the
        // buffer of a queued request, which the submitter keeps valid and untouched until its
        // completion is reaped (`IoEngine::queue`'s contract).
        IoKind::Read => unsafe { libc::pread(fd, piece.buf.cast(), piece.len, offset) },
        // SAFETY: as above; a write only reads the buffer.
        IoKind::Write => unsafe { libc::pwrite(fd, piece.buf.cast(), piece.len, offset) },
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// Performs `request` on `file` to its end: every byte, or a read up to the end of the file,
/// or the first error.
pub(crate) fn perform(file: &File, request: IoRequest, direct: bool) -> IoCompletion {
    let mut slot = Slot { request, done: 0, retries: 0 };
    loop {
        let result = transfer(file, request.kind, slot.piece());
        if let Step::Complete(completion) = advance(&mut slot, result, direct) {
            return completion;
        }
    }
}

/// Blocking `pread` / `pwrite`.
#[derive(Debug)]
pub struct PsyncEngine {
    files: Arc<[File]>,
    direct: bool,
    depth: usize,
    queued: VecDeque<IoRequest>,
    done: VecDeque<IoCompletion>,
}

impl PsyncEngine {
    pub(crate) fn new(files: Arc<[File]>, direct: bool, depth: usize) -> Self {
        PsyncEngine {
            files,
            direct,
            depth,
            queued: VecDeque::with_capacity(depth),
            done: VecDeque::with_capacity(depth),
        }
    }
}

impl IoEngine for PsyncEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Psync
    }

    fn file_count(&self) -> Option<usize> {
        Some(self.files.len())
    }

    fn depth(&self) -> usize {
        self.depth
    }

    fn in_flight(&self) -> usize {
        self.queued.len() + self.done.len()
    }

    unsafe fn queue(&mut self, request: IoRequest) -> Result<(), QueueError> {
        admit(&request, self.in_flight(), self.depth, self.files.len(), self.direct)?;
        self.queued.push_back(request);
        Ok(())
    }

    fn submit(&mut self) -> io::Result<usize> {
        let submitted = self.queued.len();
        while let Some(request) = self.queued.pop_front() {
            let completion = perform(&self.files[request.device], request, self.direct);
            self.done.push_back(completion);
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
