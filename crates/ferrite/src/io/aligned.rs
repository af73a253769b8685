//! Heap memory aligned for direct I/O: [`AlignedBlock`] of any length, the memory that
//! requests point at in tests, in `ferrite bench io`, and wherever whole-buffer ownership is
//! simpler than the pool's frames; and [`AlignedPage`], one page: the page copies optimistic
//! readers take out of the buffer pool, and pages read or written outside it.

#![allow(unsafe_code)]

use std::alloc::{self, Layout};
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

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len.max(IO_ALIGN), IO_ALIGN).expect("buffer size overflows")
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The start of the buffer, for a request. Use `as_mut_ptr` for reads into it.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points at `len` initialised (zeroed or written) bytes that we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with exactly this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
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
    pub fn zeroed() -> Self {
        AlignedPage(Box::new(RawPage([0; PAGE_SIZE])))
    }
    pub fn bytes(&self) -> &[u8] {
        &self.0 .0
    }
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
}
