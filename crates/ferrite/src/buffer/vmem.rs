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

    /// Asks the kernel to back the region with huge pages (transparent huge pages, where
    /// the system allows them: `madvise` mode is the common default). The pool reads its
    /// frames and translation entries at random: with 4 KiB pages nearly every node a
    /// lookup visits costs a walk of the page tables as well as its cache misses (perf,
    /// TPC-C in memory: a tenth of the batched lookups' time sat on the prefetch of a
    /// node's first line, where only a TLB miss stalls). A hint: refused, the region keeps
    /// small pages and works the same.
    pub fn prefer_huge_pages(&self) {
        // SAFETY: the range is this mapping; MADV_HUGEPAGE changes how it is backed, never
        // its contents.
        unsafe { libc::madvise(self.base.cast(), self.len, libc::MADV_HUGEPAGE) };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The region asks for huge pages: the kernel lists the advice (`hg`) among the flags of
    /// the mapping that holds it.
    #[test]
    fn a_region_preferring_huge_pages_is_advised_so() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            // A kernel without transparent huge pages refuses the hint: nothing to check.
            return;
        }
        let region = VirtualRegion::new(8 << 20, "test region").unwrap();
        region.prefer_huge_pages();
        let base = region.base() as usize;
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        // A mapping's lines start with its range, `start-end` in hex; its flags come last.
        let holds_base = |line: &str| {
            let range = line.split_whitespace().next().unwrap_or_default();
            let Some((start, end)) = range.split_once('-') else { return false };
            let parse = |hex| usize::from_str_radix(hex, 16).ok();
            matches!((parse(start), parse(end)), (Some(s), Some(e)) if s <= base && base < e)
        };
        let flags = smaps
            .lines()
            .skip_while(|line| !holds_base(line))
            .find(|line| line.starts_with("VmFlags"))
            .unwrap_or_else(|| panic!("no mapping holds {base:x}"));
        assert!(flags.split_whitespace().any(|flag| flag == "hg"), "{flags}");
    }
}
