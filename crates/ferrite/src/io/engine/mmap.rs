//! The mmap engine (after "Getting Storage Engines Ready for Fast Storage Devices",
//! docs/references.md): reads are copies out of a shared read-only mapping of each
//! device (`MAP_SHARED`, `PROT_READ`), writes go through `pwrite`. Reads are performed by
//! `submit`, like psync's, and cost a `memcpy` when the page is resident and a page fault
//! otherwise; they always go through the page cache, whatever `O_DIRECT` says (mappings
//! ignore it). The mappings are advised `MADV_RANDOM` (page reads, no read-ahead).
//!
//! # The lock-free remap protocol
//! One [`Mapping`] of the devices is shared (`Arc`) by every engine instance on them. It has
//! two atomics: `resizing` (a resizer is at work) and `use_count` (readers copying out of
//! the mapping right now).
//!
//! - A **reader** increments `use_count`, then looks at `resizing`. If it is set, or the
//!   range lies beyond what is mapped (the device has grown since), it decrements and reads
//!   with `pread` instead. Otherwise it copies out of the mapping, then decrements.
//! - A **resizer** (`Mapping::remap`, called by `Devices::ensure_capacity` after growing the
//!   devices) sets `resizing` by compare-and-swap (one resizer at a time; another one waits
//!   its turn), waits until `use_count` drains to 0, replaces each mapping whose device size
//!   changed, and clears `resizing`.
//!
//! Both sides use sequentially consistent operations on the two atomics, so of a reader
//! that increments `use_count` while a resizer sets `resizing`, at least one sees the other:
//! either the reader sees the flag and backs off, or the resizer sees the reader and waits
//! for its decrement (which releases the copy). No reader ever copies from a mapping that is
//! being replaced, and readers never wait: while a resize is under way they use `pread`.
//!
//! Devices never shrink under Ferrite. A file truncated behind Ferrite's back would make a
//! copy from the mapping fault (`SIGBUS`), as it would in any mmap-based engine.

#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::psync;
use super::request::admit;
use super::{EngineKind, IoCompletion, IoEngine, IoKind, IoRequest, QueueError};
use crate::io::device::file_size;

/// One device's mapping: its address and length (null and 0 when the device is empty or
/// could not be mapped). Written only by a resizer holding `resizing` with no reader inside.
#[derive(Debug)]
struct Region {
    base: AtomicPtr<u8>,
    len: AtomicUsize,
}

/// Maps `file` whole, or returns (null, 0) for an empty one.
fn map_file(file: &File) -> io::Result<(*mut u8, usize)> {
    let size = file_size(file)?;
    let len = usize::try_from(size).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    if len == 0 {
        return Ok((ptr::null_mut(), 0));
    }
    // SAFETY: a fresh read-only shared mapping of an open descriptor; the kernel picks the
    // address, so no existing memory is affected.
    let base = unsafe {
        libc::mmap(ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0)
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: advice on the mapping just made; it changes no contents. Failure only costs
    // read-ahead, so it is ignored.
    unsafe { libc::madvise(base, len, libc::MADV_RANDOM) };
    Ok((base.cast(), len))
}

fn unmap(base: *mut u8, len: usize) {
    if !base.is_null() {
        // SAFETY: `base`/`len` is a whole mapping made by `map_file`, which no reader uses
        // any more (the caller is a resizer with `use_count` at 0, or the last owner).
        unsafe { libc::munmap(base.cast(), len) };
    }
}

/// Whether a read was served by the mapping or by the system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPath {
    /// Copied from the mapping.
    Mapped,
    /// Read with `pread` (past the mapping, or while it is being replaced).
    Pread,
}

/// The shared read-only mapping of a device list, with the remap protocol.
pub struct Mapping {
    files: Arc<[File]>,
    regions: Box<[Region]>,
    resizing: AtomicBool,
    use_count: AtomicUsize,
    remaps: AtomicU64,
}

impl fmt::Debug for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lens: Vec<usize> = (0..self.regions.len()).map(|i| self.mapped_len(i)).collect();
        f.debug_struct("Mapping")
            .field("mapped_lens", &lens)
            .field("remaps", &self.remaps())
            .finish_non_exhaustive()
    }
}

impl Mapping {
    /// Maps every device at its current size.
    pub(crate) fn new(files: Arc<[File]>) -> io::Result<Mapping> {
        let mut regions = Vec::with_capacity(files.len());
        for file in files.iter() {
            let mapped = map_file(file);
            let (base, len) = match mapped {
                Ok(region) => region,
                Err(e) => {
                    for region in &regions {
                        let Region { base, len } = region;
                        unmap(base.load(Ordering::Relaxed), len.load(Ordering::Relaxed));
                    }
                    return Err(e);
                }
            };
            regions.push(Region { base: AtomicPtr::new(base), len: AtomicUsize::new(len) });
        }
        Ok(Mapping {
            files,
            regions: regions.into(),
            resizing: AtomicBool::new(false),
            use_count: AtomicUsize::new(0),
            remaps: AtomicU64::new(0),
        })
    }

    /// Bytes of device `device` that are mapped.
    pub fn mapped_len(&self, device: usize) -> usize {
        self.regions[device].len.load(Ordering::Acquire)
    }

    /// Times `remap` has run.
    pub fn remaps(&self) -> u64 {
        self.remaps.load(Ordering::Relaxed)
    }

    /// Reads `len` bytes at `offset` of device `device` into `buf`: a copy out of the
    /// mapping, or a `pread` while a resize is under way or beyond the mapped size.
    ///
    /// # Safety
    /// `buf` must be valid for writing `len` bytes, and not accessed by anyone else during
    /// the call.
    pub unsafe fn read(
        &self,
        device: usize,
        offset: u64,
        buf: *mut u8,
        len: usize,
        direct: bool,
    ) -> (io::Result<usize>, ReadPath) {
        self.use_count.fetch_add(1, Ordering::SeqCst);
        if !self.resizing.load(Ordering::SeqCst) {
            let region = &self.regions[device];
            let base = region.base.load(Ordering::Acquire);
            let mapped = region.len.load(Ordering::Acquire) as u64;
            // (An empty read, or an unmapped device, takes the system call path: a copy
            // needs non-null pointers even for zero bytes.)
            let inside = offset.checked_add(len as u64).is_some_and(|end| end <= mapped);
            if inside && len > 0 && !base.is_null() {
                // SAFETY: `offset..offset + len` lies inside the live mapping at `base` (it
                // cannot be replaced while `use_count` counts us and `resizing` was clear
                // after we were counted); `buf` is valid for `len` bytes (our contract); a
                // mapping and a caller's buffer never overlap.
                unsafe { ptr::copy_nonoverlapping(base.add(offset as usize), buf, len) };
                // Release: the copy is done before a resizer can see the count drop.
                self.use_count.fetch_sub(1, Ordering::SeqCst);
                return (Ok(len), ReadPath::Mapped);
            }
        }
        self.use_count.fetch_sub(1, Ordering::SeqCst);
        let request = IoRequest { kind: IoKind::Read, device, offset, buf, len, tag: 0 };
        (psync::perform(&self.files[device], request, direct).result, ReadPath::Pread)
    }

    /// The resizer: replaces the mapping of every device whose size changed, without
    /// stopping readers (they use `pread` meanwhile).
    pub fn remap(&self) -> io::Result<()> {
        // The flag is also the resizers' lock: wait for another resizer to finish.
        while self
            .resizing
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            std::thread::yield_now();
        }
        // Readers counted before the flag was set finish their copy (microseconds); new ones
        // see the flag and go to pread.
        let mut spins = 0u32;
        while self.use_count.load(Ordering::SeqCst) != 0 {
            if spins < 100 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
        let mut result = Ok(());
        for (region, file) in self.regions.iter().zip(self.files.iter()) {
            let old_base = region.base.load(Ordering::Relaxed);
            let old_len = region.len.load(Ordering::Relaxed);
            match file_size(file) {
                Ok(size) if size == old_len as u64 => continue,
                Ok(_) => {}
                Err(e) => {
                    result = result.and(Err(e));
                    continue;
                }
            }
            unmap(old_base, old_len);
            let (base, len) = map_file(file).unwrap_or_else(|e| {
                result = Err(e);
                (ptr::null_mut(), 0)
            });
            region.base.store(base, Ordering::Relaxed);
            region.len.store(len, Ordering::Relaxed);
        }
        self.remaps.fetch_add(1, Ordering::Relaxed);
        // Releases the new regions to the readers that see the flag clear.
        self.resizing.store(false, Ordering::SeqCst);
        result
    }

    /// Holds the flag as a resizer would, so tests can watch readers back off.
    #[cfg(test)]
    pub(crate) fn set_resizing_for_test(&self, resizing: bool) {
        self.resizing.store(resizing, Ordering::SeqCst);
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        for region in self.regions.iter_mut() {
            unmap(*region.base.get_mut(), *region.len.get_mut());
        }
    }
}

/// Reads out of the shared mapping, writes with `pwrite`.
#[derive(Debug)]
pub struct MmapEngine {
    mapping: Arc<Mapping>,
    direct: bool,
    depth: usize,
    queued: VecDeque<IoRequest>,
    done: VecDeque<IoCompletion>,
    mapped_reads: u64,
    pread_reads: u64,
}

impl MmapEngine {
    pub(crate) fn new(mapping: Arc<Mapping>, direct: bool, depth: usize) -> Self {
        MmapEngine {
            mapping,
            direct,
            depth,
            queued: VecDeque::with_capacity(depth),
            done: VecDeque::with_capacity(depth),
            mapped_reads: 0,
            pread_reads: 0,
        }
    }

    /// Reads served by the mapping and by `pread` so far.
    pub fn read_paths(&self) -> (u64, u64) {
        (self.mapped_reads, self.pread_reads)
    }
}

impl IoEngine for MmapEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Mmap
    }

    fn depth(&self) -> usize {
        self.depth
    }

    fn in_flight(&self) -> usize {
        self.queued.len() + self.done.len()
    }

    unsafe fn queue(&mut self, request: IoRequest) -> Result<(), QueueError> {
        let devices = self.mapping.regions.len();
        admit(&request, self.in_flight(), self.depth, devices, self.direct)?;
        self.queued.push_back(request);
        Ok(())
    }

    fn submit(&mut self) -> io::Result<usize> {
        let submitted = self.queued.len();
        while let Some(request) = self.queued.pop_front() {
            let result = match request.kind {
                IoKind::Read => {
                    let IoRequest { device, offset, buf, len, .. } = request;
                    // SAFETY: the request's buffer is valid and ours until reaped
                    // (`IoEngine::queue`'s contract).
                    let (result, path) =
                        unsafe { self.mapping.read(device, offset, buf, len, self.direct) };
                    match path {
                        ReadPath::Mapped => self.mapped_reads += 1,
                        ReadPath::Pread => self.pread_reads += 1,
                    }
                    result
                }
                IoKind::Write => {
                    let file = &self.mapping.files[request.device];
                    psync::perform(file, request, self.direct).result
                }
            };
            self.done.push_back(IoCompletion { tag: request.tag, result });
        }
        Ok(submitted)
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<usize> {
        if wait && self.done.is_empty() && !self.queued.is_empty() {
            self.submit()?;
        }
        let reaped = self.done.len();
        out.extend(self.done.drain(..));
        Ok(reaped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::device::{DeviceOptions, Devices};
    use crate::io::AlignedBlock;
    use std::os::unix::fs::FileExt;
    use std::path::PathBuf;
    use std::sync::atomic::AtomicBool;
    use tempfile::TempDir;

    const BLOCK: usize = 4096;

    /// The byte at `offset` of the test device: depends on the block and the position.
    fn byte_at(offset: u64) -> u8 {
        ((offset / BLOCK as u64) as u8).wrapping_mul(31) ^ (offset as u8)
    }

    fn fill(path: &std::path::Path, blocks: u64) {
        let data: Vec<u8> = (0..blocks * BLOCK as u64).map(byte_at).collect();
        std::fs::write(path, data).unwrap();
    }

    fn devices(path: PathBuf) -> Devices {
        let options = DeviceOptions {
            direct: false,
            chunk_bytes: BLOCK as u64,
            grow_bytes: 4 * BLOCK as u64,
            ..Default::default()
        };
        Devices::open(&[path], &options).unwrap()
    }

    fn read(mapping: &Mapping, offset: u64, len: usize) -> (Vec<u8>, ReadPath) {
        let mut buf = AlignedBlock::zeroed(len);
        // SAFETY: `buf` is ours and `len` bytes long.
        let (result, path) = unsafe { mapping.read(0, offset, buf.as_mut_ptr(), len, false) };
        let n = result.unwrap();
        (buf.as_slice()[..n].to_vec(), path)
    }

    #[test]
    fn readers_back_off_while_resizing_and_beyond_the_mapping() {
        let dir = TempDir::with_prefix("mmap-backoff").unwrap();
        let path = dir.path().join("dev");
        fill(&path, 4);
        let devices = devices(path.clone());
        let mapping = devices.mapping().unwrap();
        assert_eq!(mapping.mapped_len(0), 4 * BLOCK);
        let expected = |offset: u64, len: usize| -> Vec<u8> {
            (offset..offset + len as u64).map(byte_at).collect()
        };
        assert_eq!(read(&mapping, 4096, 8192), (expected(4096, 8192), ReadPath::Mapped));
        mapping.set_resizing_for_test(true);
        assert_eq!(read(&mapping, 4096, 8192), (expected(4096, 8192), ReadPath::Pread));
        mapping.set_resizing_for_test(false);
        // The file grows behind the mapping: the new bytes come by pread until a remap.
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let more: Vec<u8> = (4 * BLOCK as u64..6 * BLOCK as u64).map(byte_at).collect();
        file.write_all_at(&more, 4 * BLOCK as u64).unwrap();
        assert_eq!(read(&mapping, 4 * 4096, 4096), (expected(4 * 4096, 4096), ReadPath::Pread));
        // A read across the end is short, past it empty.
        assert_eq!(read(&mapping, 5 * 4096, 8192).0.len(), 4096);
        assert_eq!(read(&mapping, 9 * 4096, 4096).0.len(), 0);
        mapping.remap().unwrap();
        assert_eq!(mapping.mapped_len(0), 6 * BLOCK);
        assert_eq!(read(&mapping, 4 * 4096, 4096), (expected(4 * 4096, 4096), ReadPath::Mapped));
        assert_eq!(mapping.remaps(), 1);
    }

    #[test]
    fn growth_through_the_devices_remaps() {
        let dir = TempDir::with_prefix("mmap-grow").unwrap();
        let path = dir.path().join("dev");
        fill(&path, 4);
        let devices = devices(path);
        let mapping = devices.mapping().unwrap();
        devices.ensure_capacity(6 * BLOCK as u64).unwrap();
        assert_eq!(mapping.remaps(), 1);
        assert_eq!(mapping.mapped_len(0), 8 * BLOCK, "grown to the 4-block step");
        // The preallocated space reads as zeros through the mapping.
        let (bytes, path) = read(&mapping, 7 * 4096, 4096);
        assert_eq!(path, ReadPath::Mapped);
        assert!(bytes.iter().all(|&b| b == 0));
    }

    #[test]
    fn reads_stay_correct_while_another_thread_remaps() {
        let dir = TempDir::with_prefix("mmap-race").unwrap();
        let path = dir.path().join("dev");
        let blocks = 64u64;
        fill(&path, blocks);
        let devices = devices(path.clone());
        let mapping = devices.mapping().unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let readers: Vec<_> = (0..2u64)
                .map(|t| {
                    let (mapping, stop) = (&mapping, &stop);
                    scope.spawn(move || {
                        let mut paths = [0u64; 2];
                        let mut i = t;
                        // Once the remapping stops, reads must come from the mapping again.
                        while !stop.load(Ordering::Relaxed)
                            || paths[0] + paths[1] < 1000
                            || paths[0] == 0
                        {
                            let block = i * 7 % blocks;
                            let (bytes, path) = read(mapping, block * 4096, 4096);
                            let expected: Vec<u8> =
                                (block * 4096..(block + 1) * 4096).map(byte_at).collect();
                            assert_eq!(bytes, expected, "block {block}");
                            paths[usize::from(path == ReadPath::Pread)] += 1;
                            i += 1;
                        }
                        paths
                    })
                })
                .collect();
            // Grow the file behind the mapping and remap, over and over.
            let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            for round in 0..200u64 {
                file.set_len((blocks + 1 + round % 3) * BLOCK as u64).unwrap();
                mapping.remap().unwrap();
            }
            stop.store(true, Ordering::Relaxed);
            for reader in readers {
                let paths = reader.join().unwrap();
                assert!(paths[0] > 0, "some reads came from the mapping: {paths:?}");
            }
        });
        assert_eq!(mapping.remaps(), 200);
    }
}
