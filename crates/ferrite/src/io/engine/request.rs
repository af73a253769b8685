//! What every submission engine shares: the admission checks of `queue`, the table of
//! requests in flight (one slot each, its index travelling through the kernel as the
//! request's user data), and the rule that turns one transfer's result into either the
//! request's completion or a follow-up transfer of what is left.
//!
//! A request may need more than one transfer: the kernel moves at most `MAX_PIECE_BYTES` in
//! one call, a buffered read or write may stop short, and `EINTR` / `EAGAIN` ask for a retry.
//! Engines hide all of that: a request completes once, with every byte moved, or with fewer
//! only when a read reaches the end of the device.
//!
//! Slot states: *free* (on the free list) → *in flight* (`Slots::insert`, the request and the
//! bytes moved so far; one transfer queued or in the kernel at any time) → *free* again
//! (`Slots::remove`, when its completion is produced).

use std::io;

use super::{IoCompletion, IoKind, IoRequest, QueueError, IO_ALIGN};

/// Most bytes one transfer moves: Linux's `MAX_RW_COUNT` (2 GiB less a page), which every
/// read and write system call caps at, rounded to the direct-I/O alignment.
pub(crate) const MAX_PIECE_BYTES: usize = 0x7fff_f000;
const _: () = assert!(MAX_PIECE_BYTES % IO_ALIGN == 0);

/// Retries of one transfer after `EINTR` / `EAGAIN` before its error is reported.
const MAX_RETRIES: u32 = 16;

/// Most requests in flight per engine instance: io_uring's largest submission queue
/// (`IORING_MAX_ENTRIES`).
pub const MAX_IO_DEPTH: usize = 32_768;

/// Checks a request against an engine's limits, in the order `queue` reports them: a full
/// queue, an unknown device, then (direct I/O only) alignment.
pub(crate) fn admit(
    request: &IoRequest,
    in_flight: usize,
    depth: usize,
    devices: usize,
    direct: bool,
) -> Result<(), QueueError> {
    if in_flight >= depth {
        return Err(QueueError::Full);
    }
    if request.device >= devices {
        return Err(QueueError::NoSuchDevice);
    }
    if direct
        && (request.buf as usize % IO_ALIGN != 0
            || request.offset % IO_ALIGN as u64 != 0
            || request.len % IO_ALIGN != 0)
    {
        return Err(QueueError::Misaligned);
    }
    Ok(())
}

/// One request in flight.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    pub request: IoRequest,
    /// Bytes moved by the transfers finished so far.
    pub done: usize,
    /// `EINTR` / `EAGAIN` retries of the current transfer.
    pub retries: u32,
}

impl Slot {
    /// The next transfer: where, from or to which address, and how many bytes.
    pub fn piece(&self) -> Piece {
        let left = self.request.len - self.done;
        Piece {
            offset: self.request.offset + self.done as u64,
            // `wrapping_add` keeps the pointer arithmetic free of `unsafe`; `done` never
            // exceeds `len`, so the pointer stays inside the caller's buffer.
            buf: self.request.buf.wrapping_add(self.done),
            len: left.min(MAX_PIECE_BYTES),
        }
    }
}

/// One transfer of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    pub offset: u64,
    pub buf: *mut u8,
    pub len: usize,
}

/// What follows a transfer.
#[derive(Debug)]
pub(crate) enum Step {
    /// The request is finished: hand this completion out and free the slot.
    Complete(IoCompletion),
    /// Issue `Slot::piece()` next.
    Continue,
}

/// Applies the result of one transfer of `slot` (`Ok(bytes)` or the error): the rules that
/// make short transfers and interrupted calls invisible to the caller.
pub(crate) fn advance(slot: &mut Slot, result: io::Result<usize>, direct: bool) -> Step {
    let request = slot.request;
    let complete = |result| Step::Complete(IoCompletion { tag: request.tag, result });
    match result {
        Err(e)
            if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock)
                && slot.retries < MAX_RETRIES =>
        {
            slot.retries += 1;
            Step::Continue
        }
        Err(e) => complete(Err(e)),
        // Nothing moved: a read is at the end of the device; a write cannot go on.
        Ok(0) if request.len > slot.done => match request.kind {
            IoKind::Read => complete(Ok(slot.done)),
            IoKind::Write => complete(Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "the device took no bytes of a write",
            ))),
        },
        Ok(n) => {
            slot.done += n.min(request.len - slot.done);
            slot.retries = 0;
            if slot.done == request.len {
                return complete(Ok(slot.done));
            }
            // A direct read moves whole blocks except at the end of the file: a transfer
            // that ends off the alignment has reached the end (and a follow-up at an
            // unaligned offset would be refused).
            if direct && request.kind == IoKind::Read && slot.done % IO_ALIGN != 0 {
                return complete(Ok(slot.done));
            }
            Step::Continue
        }
    }
}

/// The requests in flight, by slot index.
#[derive(Debug)]
pub(crate) struct Slots {
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
}

impl Slots {
    pub fn new(depth: usize) -> Self {
        assert!(depth > 0 && depth <= MAX_IO_DEPTH, "depth {depth}");
        Slots { slots: vec![None; depth], free: (0..depth as u32).rev().collect() }
    }

    /// Slots in use.
    pub fn used(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Takes a free slot for `request`; the caller has checked that one is free.
    pub fn insert(&mut self, request: IoRequest) -> u32 {
        let index = self.free.pop().expect("a free slot: admit() checked the depth");
        let slot = &mut self.slots[index as usize];
        debug_assert!(slot.is_none());
        *slot = Some(Slot { request, done: 0, retries: 0 });
        index
    }

    /// The slot `index`, which must be in use (an index the kernel hands back that is not
    /// ours is a broken invariant).
    pub fn get_mut(&mut self, index: u64) -> &mut Slot {
        self.slots
            .get_mut(index as usize)
            .and_then(Option::as_mut)
            .unwrap_or_else(|| panic!("completion for slot {index}, which is not in flight"))
    }

    pub fn remove(&mut self, index: u64) -> Slot {
        let slot = self.slots[index as usize].take().expect("removing a slot in flight");
        self.free.push(index as u32);
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kind: IoKind, len: usize) -> IoRequest {
        IoRequest { kind, device: 0, offset: 8192, buf: std::ptr::null_mut(), len, tag: 7 }
    }

    fn slot(kind: IoKind, len: usize) -> Slot {
        Slot { request: request(kind, len), done: 0, retries: 0 }
    }

    #[test]
    fn admission_order_and_alignment() {
        let mut r = request(IoKind::Read, 4096);
        r.buf = 4096 as *mut u8;
        assert!(admit(&r, 0, 1, 1, true).is_ok());
        assert!(matches!(admit(&r, 1, 1, 1, true), Err(QueueError::Full)));
        r.device = 1;
        assert!(matches!(admit(&r, 0, 1, 1, true), Err(QueueError::NoSuchDevice)));
        r.device = 0;
        for bad in [
            IoRequest { buf: 4097 as *mut u8, ..r },
            IoRequest { offset: 100, ..r },
            IoRequest { len: 100, ..r },
        ] {
            assert!(matches!(admit(&bad, 0, 1, 1, true), Err(QueueError::Misaligned)));
            assert!(admit(&bad, 0, 1, 1, false).is_ok());
        }
    }

    #[test]
    fn short_transfers_continue_and_reads_stop_at_the_end() {
        let mut s = slot(IoKind::Read, 3 * 4096);
        assert!(matches!(advance(&mut s, Ok(4096), true), Step::Continue));
        assert_eq!(s.piece(), Piece { offset: 12288, buf: 4096 as *mut u8, len: 8192 });
        match advance(&mut s, Ok(100), true) {
            Step::Complete(c) => assert_eq!((c.tag, c.result.unwrap()), (7, 4196)),
            other => panic!("{other:?}"),
        }
        // Buffered: an unaligned short read goes on until the end says 0.
        let mut s = slot(IoKind::Read, 3 * 4096);
        assert!(matches!(advance(&mut s, Ok(100), false), Step::Continue));
        match advance(&mut s, Ok(0), false) {
            Step::Complete(c) => assert_eq!(c.result.unwrap(), 100),
            other => panic!("{other:?}"),
        }
        let mut w = slot(IoKind::Write, 4096);
        match advance(&mut w, Ok(0), true) {
            Step::Complete(c) => assert_eq!(c.result.unwrap_err().kind(), io::ErrorKind::WriteZero),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn interrupted_transfers_are_retried_a_bounded_number_of_times() {
        let mut s = slot(IoKind::Write, 4096);
        for _ in 0..MAX_RETRIES {
            let e = io::Error::from_raw_os_error(libc::EINTR);
            assert!(matches!(advance(&mut s, Err(e), true), Step::Continue));
        }
        let e = io::Error::from_raw_os_error(libc::EAGAIN);
        assert!(matches!(advance(&mut s, Err(e), true), Step::Complete(_)));
        let mut s = slot(IoKind::Read, 4096);
        let e = io::Error::from_raw_os_error(libc::EIO);
        match advance(&mut s, Err(e), true) {
            Step::Complete(c) => assert_eq!(c.result.unwrap_err().raw_os_error(), Some(libc::EIO)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn huge_requests_go_in_pieces() {
        let mut s = slot(IoKind::Read, MAX_PIECE_BYTES + 8192);
        assert_eq!(s.piece().len, MAX_PIECE_BYTES);
        assert!(matches!(advance(&mut s, Ok(MAX_PIECE_BYTES), true), Step::Continue));
        assert_eq!(s.piece().len, 8192);
    }

    #[test]
    fn slots_are_reused() {
        let mut slots = Slots::new(2);
        let a = slots.insert(request(IoKind::Read, 1));
        let b = slots.insert(request(IoKind::Read, 2));
        assert_ne!(a, b);
        assert_eq!(slots.used(), 2);
        assert_eq!(slots.remove(u64::from(a)).request.len, 1);
        assert_eq!(slots.used(), 1);
        assert_eq!(slots.insert(request(IoKind::Write, 3)), a);
        assert_eq!(slots.get_mut(u64::from(b)).request.len, 2);
    }
}
