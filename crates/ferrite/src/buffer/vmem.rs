//! Anonymous virtual memory: one large `MAP_NORESERVE` mapping whose pages cost physical
//! memory only once touched (the buffer pool's frames and its translation table).

#![allow(unsafe_code)]

use crate::error::{Error, Result};

/// An anonymous mapping of `len` bytes, zero-filled until written.
#[derive(Debug)]
pub struct VirtualRegion {
    base: *mut u8,
    len: usize,
}

// SAFETY: the region is plain memory; every access to its contents is synchronised by the
// page-state words of the pool (or is an atomic access).
unsafe impl Send for VirtualRegion {}
// SAFETY: as above.
unsafe impl Sync for VirtualRegion {}

impl VirtualRegion {
    pub fn new(len: usize, what: &str) -> Result<Self> {
        // SAFETY: an anonymous private mapping with no fixed address touches no existing memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::io(
                format!("reserving {len} bytes of virtual memory for the {what}"),
                std::io::Error::last_os_error(),
            ));
        }
        Ok(VirtualRegion { base: base.cast(), len })
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }
}

impl Drop for VirtualRegion {
    fn drop(&mut self) {
        // SAFETY: we created this mapping and nothing refers to it any more.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
