//! The frame memory: `pool_pages` frames of `PAGE_SIZE` bytes in one anonymous mapping
//! (`vmem.rs`) that stays mapped for the pool's lifetime, so that a read lands in memory
//! that is already there and eviction is a few stores (see `pool.rs` for why frames, not
//! vmcache's one mapping per page id). Which page a frame holds is the page table's
//! business (`page_table.rs`), which frames are free the allocator's (`alloc.rs`).
//!
//! Racy reads: [`FrameView`] lets an optimistic reader copy bytes out of a frame that a
//! writer may be changing (the seqlock pattern) without ever holding a Rust reference into
//! it; the reader trusts the bytes only once the page's version is validated.

#![allow(unsafe_code)]

use super::vmem::VirtualRegion;
use crate::error::Result;
use crate::format::page::PAGE_SIZE;

/// The frames' memory.
#[derive(Debug)]
pub(super) struct Frames {
    region: VirtualRegion,
    count: u64,
}

impl Frames {
    /// `count` frames, zero-filled; memory is taken only as they are touched.
    pub(super) fn new(count: u64) -> Result<Self> {
        let region = VirtualRegion::new(count as usize * PAGE_SIZE, "buffer pool frames")?;
        region.prefer_huge_pages();
        Ok(Frames { region, count })
    }

    /// The start of frame `frame`.
    #[inline(always)]
    pub(super) fn ptr(&self, frame: u32) -> *mut u8 {
        assert!(u64::from(frame) < self.count);
        // SAFETY: in bounds of the frames region, checked above.
        unsafe { self.region.base().add(frame as usize * PAGE_SIZE) }
    }

    /// Sets `bits` in byte `offset` of frame `frame`, whose page the caller holds the
    /// exclusive latch of.
    #[inline(always)]
    pub(super) fn set_bits(&self, frame: u32, offset: usize, bits: u8) {
        assert!(offset < PAGE_SIZE);
        // SAFETY: in bounds of the frame (checked here and by `ptr`); the caller's latch
        // keeps other writers away, and optimistic readers only copy the byte.
        unsafe { *self.ptr(frame).add(offset) |= bits };
    }

    /// The memory of frames `0..count` (for registration with an I/O engine).
    pub(super) fn region(&self, count: u32) -> (*mut u8, usize) {
        assert!(u64::from(count) <= self.count);
        (self.region.base(), count as usize * PAGE_SIZE)
    }

    /// Gives frame `frame`'s memory back to the system; it reads as zeros until it is
    /// written again. The caller makes sure nobody uses the frame meanwhile (it is no
    /// page's, and no I/O targets it).
    pub(super) fn release(&self, frame: u32) {
        // SAFETY: `frame` lies inside the frames mapping (`ptr` checks), is no page's and no
        // I/O targets it (the caller's promise); MADV_DONTNEED on a private anonymous
        // mapping only drops its contents. Failing, it keeps its memory: nothing to undo.
        unsafe { libc::madvise(self.ptr(frame).cast(), PAGE_SIZE, libc::MADV_DONTNEED) };
    }
}

/// A page in memory, read in place by an optimistic reader a few bytes at a time (see
/// [`BufferPool::read_begin`](super::BufferPool::read_begin)): the bytes may be torn by a
/// concurrent writer, or belong to another page if this one was evicted meanwhile, until the
/// version is validated. The frame itself stays mapped for the pool's lifetime, so every copy
/// is from valid memory.
#[derive(Debug, Clone, Copy)]
pub struct FrameView<'a> {
    ptr: *const u8,
    _frames: std::marker::PhantomData<&'a Frames>,
}

impl<'a> FrameView<'a> {
    /// A view of frame `frame` of `frames`.
    #[inline(always)]
    pub(super) fn new(frames: &'a Frames, frame: u32) -> Self {
        FrameView { ptr: frames.ptr(frame), _frames: std::marker::PhantomData }
    }

    /// Copies the page's bytes `offset..offset + out.len()` into `out`, clamped to the page;
    /// returns how many bytes it copied.
    #[inline]
    pub fn copy(&self, offset: usize, out: &mut [u8]) -> usize {
        let len = out.len().min(PAGE_SIZE.saturating_sub(offset));
        // SAFETY: `offset..offset + len` lies inside the frame (clamped above), the frame
        // stays mapped while the pool lives (the view borrows it), and `out` is ours. A
        // concurrent writer may change the bytes while they are copied (the seqlock
        // pattern): the reader discards them unless the version check passes.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(offset), out.as_mut_ptr(), len) };
        len
    }

    /// The `N` bytes at `offset` (zeros for those past the page's end). Inlined to a few
    /// moves, where `copy` of a variable length is a call to `memmove`: the lookup path reads
    /// headers, slots and short keys this way.
    #[inline]
    pub fn array<const N: usize>(&self, offset: usize) -> [u8; N] {
        if offset.checked_add(N).is_some_and(|end| end <= PAGE_SIZE) {
            // SAFETY: `offset..offset + N` lies inside the frame (checked above), which stays
            // mapped while the pool lives; `read_unaligned` has no alignment needs. The bytes
            // may be torn by a writer (seqlock pattern: the caller validates the version).
            unsafe { std::ptr::read_unaligned(self.ptr.add(offset).cast::<[u8; N]>()) }
        } else {
            let mut out = [0u8; N];
            self.copy(offset, &mut out);
            out
        }
    }

    /// Asks the CPU to bring the cache line holding byte `offset` of the frame (clamped to
    /// the page) into its caches, without waiting: a hint for a read soon after. Descents
    /// of several keys at once (`btree/together.rs`) issue these for the nodes they go to
    /// next, so that the keys' memory misses overlap instead of following one another.
    #[inline(always)]
    pub fn prefetch(&self, offset: usize) {
        prefetch_line(self.ptr.wrapping_add(offset.min(PAGE_SIZE - 1)));
    }

    /// The little-endian u16 at `offset` (0 past the page's end).
    #[inline]
    pub fn u16_at(&self, offset: usize) -> u16 {
        u16::from_le_bytes(self.array(offset))
    }

    /// The little-endian u64 at `offset` (bytes past the page's end read as 0).
    #[inline]
    pub fn u64_at(&self, offset: usize) -> u64 {
        u64::from_le_bytes(self.array(offset))
    }
}

/// Prefetches the cache line holding `ptr` (a hint; nothing on targets without one).
#[inline(always)]
pub(super) fn prefetch_line(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache: it never faults, whatever the address, and
    // reads nothing the program sees.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(ptr.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}
