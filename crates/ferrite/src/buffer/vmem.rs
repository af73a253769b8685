//! Anonymous virtual memory: one large `MAP_NORESERVE` mapping whose pages cost physical
//! memory only once touched, and are given back with `madvise(MADV_DONTNEED)`.

#![allow(unsafe_code)]

use crate::error::{Error, Result};

/// An anonymous mapping of `len` bytes, zero-filled until written.
#[derive(Debug)]
pub struct VirtualRegion {
    base: *mut u8,
    len: usize,
    /// A pidfd of this process, for `process_madvise` (-1 where the kernel has none).
    pidfd: i32,
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
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) } as i32;
        Ok(VirtualRegion { base: base.cast(), len, pidfd })
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Gives the physical memory behind `[offset, offset + len)` back to the kernel; the
    /// range reads as zeros afterwards. The caller owns that range exclusively.
    pub fn discard(&self, offset: usize, len: usize) {
        assert!(offset + len <= self.len);
        // SAFETY: the range lies inside our mapping; the caller holds it exclusively.
        let rc = unsafe { libc::madvise(self.base.add(offset).cast(), len, libc::MADV_DONTNEED) };
        assert_eq!(rc, 0, "madvise(MADV_DONTNEED) failed: {}", std::io::Error::last_os_error());
    }
}

impl VirtualRegion {
    /// Gives back the memory of several ranges of `len` bytes at once: one
    /// `process_madvise` call, so the kernel flushes the other cores' TLBs once for the
    /// batch instead of once per page (each flush is an interrupt to every core, and in a
    /// virtual machine an exit to the hypervisor). Falls back to one `madvise` per range.
    pub fn discard_many(&self, offsets: &[usize], len: usize) {
        const MAX_BATCH: usize = 64;
        for chunk in offsets.chunks(MAX_BATCH) {
            let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_BATCH];
            for (slot, &offset) in iov.iter_mut().zip(chunk) {
                assert!(offset + len <= self.len);
                // SAFETY: in bounds of our mapping (checked above).
                slot.iov_base = unsafe { self.base.add(offset) }.cast();
                slot.iov_len = len;
            }
            let expected = (chunk.len() * len) as isize;
            let done = if self.pidfd >= 0 {
                // SAFETY: the iovecs describe ranges inside our own mapping, which the caller
                // holds exclusively; the kernel only drops their pages.
                unsafe {
                    libc::syscall(
                        libc::SYS_process_madvise,
                        self.pidfd,
                        iov.as_ptr(),
                        chunk.len(),
                        libc::MADV_DONTNEED,
                        0,
                    )
                }
            } else {
                -1
            };
            if done as isize != expected {
                for &offset in chunk {
                    self.discard(offset, len);
                }
            }
        }
    }
}

impl Drop for VirtualRegion {
    fn drop(&mut self) {
        if self.pidfd >= 0 {
            // SAFETY: we opened this descriptor and nothing else uses it.
            unsafe { libc::close(self.pidfd) };
        }
        // SAFETY: we created this mapping and nothing refers to it any more.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
