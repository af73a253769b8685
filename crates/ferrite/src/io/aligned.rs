//! Heap memory aligned for direct I/O: [`AlignedBlock`] of any length, the memory that
//! requests point at in tests, in `ferrite bench io`, and wherever whole-buffer ownership is
//! simpler than the pool's frames; and [`AlignedPage`], one page: the page copies optimistic
//! readers take out of the buffer pool, and pages read or written outside it.
//!
//! One-page blocks are the transfer buffers of small object reads and writes, allocated and
//! dropped once per I/O on the workers. [`AlignedBlock::reused`] takes one from a small
//! per-thread stash that dropped ones return to: no allocator call and no zeroing on that
//! path (the caller overwrites every byte).

#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::cell::RefCell;
use std::fmt;
use std::ptr::NonNull;

use super::engine::IO_ALIGN;
use crate::format::page::PAGE_SIZE;

/// `len` bytes, zeroed, starting at a multiple of [`IO_ALIGN`].
pub struct AlignedBlock {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer owns its memory exclusively, like a `Box<[u8]>`.
unsafe impl Send for AlignedBlock {}
// SAFETY: shared access only reads (`as_slice`); writing needs `&mut self`.
unsafe impl Sync for AlignedBlock {}

impl AlignedBlock {
    /// A zeroed buffer of `len` bytes (at least one byte is allocated).
    pub fn zeroed(len: usize) -> Self {
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size (`layout` rounds 0 up to one block).
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(ptr) else { alloc::handle_alloc_error(layout) };
        AlignedBlock { ptr, len }
    }

    /// A buffer of `len` bytes whose contents are unspecified (zeros or what an earlier
    /// user left: initialised bytes, never uninitialised memory); for callers that overwrite
    /// all of it. A one-page buffer comes from this thread's stash when it has one.
    pub fn reused(len: usize) -> Self {
        if len == STASHED_LEN {
            let taken = STASH.try_with(|stash| stash.borrow_mut().blocks.pop()).ok().flatten();
            if let Some(ptr) = taken {
                return AlignedBlock { ptr, len };
            }
        }
        Self::zeroed(len)
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len.max(IO_ALIGN), IO_ALIGN).expect("buffer size overflows")
    }

    /// Bytes in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The start of the buffer, for a request. Use `as_mut_ptr` for reads into it.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The start of the buffer, for a request that writes into it (a read).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The buffer's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points at `len` initialised (zeroed or written) bytes that we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The buffer's bytes, to change.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBlock {
    fn drop(&mut self) {
        if self.len == STASHED_LEN {
            let ptr = self.ptr;
            // (`try_with` fails only while the thread's locals are being destroyed.)
            let kept = STASH.try_with(|stash| stash.borrow_mut().keep(ptr)).unwrap_or(false);
            if kept {
                return;
            }
        }
        // SAFETY: allocated in `zeroed` with exactly this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

/// The length of the blocks the stash keeps: one page.
const STASHED_LEN: usize = PAGE_SIZE;

/// At most this many blocks wait in a thread's stash (256 KiB); more are freed. A worker
/// has about its queue depth of small transfers in flight.
const STASH_MAX: usize = 64;

/// Dropped one-page blocks of this thread, each allocated by `AlignedBlock::zeroed` with
/// `layout(STASHED_LEN)` and owned by the stash alone.
struct Stash {
    blocks: Vec<NonNull<u8>>,
}

impl Stash {
    fn keep(&mut self, ptr: NonNull<u8>) -> bool {
        if self.blocks.len() >= STASH_MAX {
            return false;
        }
        self.blocks.push(ptr);
        true
    }
}

impl Drop for Stash {
    fn drop(&mut self) {
        for ptr in self.blocks.drain(..) {
            // SAFETY: each was allocated with this layout and is owned by the stash alone.
            unsafe { alloc::dealloc(ptr.as_ptr(), AlignedBlock::layout(STASHED_LEN)) }
        }
    }
}

thread_local! {
    static STASH: RefCell<Stash> = const { RefCell::new(Stash { blocks: Vec::new() }) };
}

impl fmt::Debug for AlignedBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBlock").field("len", &self.len).finish()
    }
}

#[repr(C, align(4096))]
struct RawPage([u8; PAGE_SIZE]);

const _: () = assert!(std::mem::align_of::<RawPage>() >= IO_ALIGN);

/// One page-aligned page of memory.
pub struct AlignedPage(Box<RawPage>);

impl AlignedPage {
    /// A page of zeros.
    pub fn zeroed() -> Self {
        AlignedPage(Box::new(RawPage([0; PAGE_SIZE])))
    }
    /// The page's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0 .0
    }
    /// The page's bytes, to change.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.0 .0
    }
}

impl fmt::Debug for AlignedPage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AlignedPage")
    }
}

impl Default for AlignedPage {
    fn default() -> Self {
        Self::zeroed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_writable() {
        for len in [0, 1, 4096, 3 * 4096 + 5] {
            let mut buf = AlignedBlock::zeroed(len);
            assert_eq!(buf.as_ptr() as usize % IO_ALIGN, 0);
            assert_eq!(buf.len(), len);
            assert!(buf.as_slice().iter().all(|&b| b == 0));
            buf.as_mut_slice().fill(7);
            assert!(buf.as_slice().iter().all(|&b| b == 7));
        }
    }

    #[test]
    fn reused_blocks_come_back_from_the_stash() {
        let mut first = AlignedBlock::reused(PAGE_SIZE);
        assert_eq!(first.as_ptr() as usize % IO_ALIGN, 0);
        first.as_mut_slice().fill(9);
        let address = first.as_ptr();
        drop(first);
        // The same memory, with what its last user left in it.
        let again = AlignedBlock::reused(PAGE_SIZE);
        assert_eq!(again.as_ptr(), address);
        assert!(again.as_slice().iter().all(|&b| b == 9));
        // `zeroed` never hands out stashed memory.
        drop(again);
        let fresh = AlignedBlock::zeroed(PAGE_SIZE);
        assert!(fresh.as_slice().iter().all(|&b| b == 0));
        // Other lengths are not stashed; the stash is bounded.
        let blocks: Vec<_> = (0..STASH_MAX + 10).map(|_| AlignedBlock::zeroed(PAGE_SIZE)).collect();
        drop(blocks);
        assert_eq!(STASH.with(|s| s.borrow().blocks.len()), STASH_MAX);
        let odd = AlignedBlock::reused(3 * PAGE_SIZE);
        assert!(odd.as_slice().iter().all(|&b| b == 0));
    }
}
