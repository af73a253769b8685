//! The page file: pages laid over the devices (`device.rs`: one file, or several striped
//! RAID0 by Ferrite), opened with `O_DIRECT` unless told otherwise, grown in large
//! preallocated chunks (docs/references.md: "Getting Storage Engines Ready for Fast Storage
//! Devices"), read and written a page at a time through page-aligned
//! buffers by blocking system calls. The workers reach the same devices through their own
//! engines (`open_engine` on [`PageFile::devices`]).
//!
//! A page file can also live on one [`BlockDevice`] ([`PageFile::open_on`]): tests put a
//! simulated disk (`testing::sim`) there to crash it and fail its I/O. Such a file has no
//! real devices for the workers' engines ([`PageFile::devices`] is `None`; it brings its own,
//! a `BlockEngine` on the device: [`PageFile::own_engine`]), is never direct, and grows by
//! `allocate` in steps of whole pages.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::device::{DeviceOptions, Devices, DEFAULT_CHUNK_BYTES};
use super::storage::BlockDevice;
use crate::error::{Error, PageId, Result};
use crate::format::page::PAGE_SIZE;

/// Pages `0..` over one or more devices.
#[derive(Debug)]
pub struct PageFile {
    backing: Backing,
    /// The first device's path, to name in messages.
    path: PathBuf,
}

/// Where the pages live.
#[derive(Debug)]
enum Backing {
    /// Real files or block devices, striped when several.
    Devices(Devices),
    /// One device behind the [`BlockDevice`] seam.
    Block(BlockBacking),
}

/// A page file on one [`BlockDevice`]: page `p` at byte `p * PAGE_SIZE`.
#[derive(Debug)]
struct BlockBacking {
    device: Arc<dyn BlockDevice>,
    writable: bool,
    /// Growth step, a positive multiple of the page size.
    grow_bytes: u64,
    /// Bytes the device holds (as far as this file knows); only grows, under `grow_lock`.
    size_bytes: AtomicU64,
    grow_lock: Mutex<()>,
}

impl BlockBacking {
    fn size_bytes(&self) -> u64 {
        self.size_bytes.load(Ordering::Acquire)
    }

    /// Makes bytes `0..needed_bytes` exist, allocating a multiple of the growth step.
    fn ensure_capacity(&self, needed_bytes: u64) -> Result<()> {
        if needed_bytes <= self.size_bytes() {
            return Ok(());
        }
        if !self.writable {
            return Err(Error::ReadOnly);
        }
        let _guard = self.grow_lock.lock().unwrap_or_else(PoisonError::into_inner);
        if needed_bytes <= self.size_bytes() {
            return Ok(());
        }
        let target = needed_bytes.div_ceil(self.grow_bytes) * self.grow_bytes;
        self.device.allocate(target).map_err(|e| {
            Error::io(format!("growing {} to {target} bytes", self.device.path().display()), e)
        })?;
        self.size_bytes.store(target, Ordering::Release);
        Ok(())
    }
}

/// Reads `buf.len()` bytes at `offset` with `read_at`, which moves fewer only at the end of
/// the device (0 past it) or when interrupted; bytes past the end read as zeros.
fn read_full(
    buf: &mut [u8],
    offset: u64,
    mut read_at: impl FnMut(&mut [u8], u64) -> io::Result<usize>,
) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => {
                buf[done..].fill(0);
                break;
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl PageFile {
    /// Opens (creating if `create`) the single file at `path`, for reading and, if
    /// `writable`, writing.
    pub fn open(
        path: &Path,
        create: bool,
        writable: bool,
        direct: bool,
        grow_chunk_bytes: u64,
    ) -> Result<Self> {
        PageFile::open_striped(
            &[path.to_owned()],
            create,
            writable,
            direct,
            grow_chunk_bytes,
            DEFAULT_CHUNK_BYTES,
        )
    }

    /// Opens the devices at `paths`, striped in that order by chunks of `chunk_bytes`.
    pub fn open_striped(
        paths: &[PathBuf],
        create: bool,
        writable: bool,
        direct: bool,
        grow_chunk_bytes: u64,
        chunk_bytes: u64,
    ) -> Result<Self> {
        let grow = grow_chunk_bytes.div_ceil(chunk_bytes).max(1) * chunk_bytes;
        let options = DeviceOptions {
            direct,
            writable,
            create: create && writable,
            chunk_bytes,
            grow_bytes: grow,
        };
        let devices = Devices::open(paths, &options)?;
        Ok(PageFile { backing: Backing::Devices(devices), path: paths[0].clone() })
    }

    /// The page file on `device`, for reading and, if `writable`, writing; it grows in steps
    /// of `grow_chunk_bytes` rounded up to whole pages.
    pub fn open_on(
        device: Arc<dyn BlockDevice>,
        writable: bool,
        grow_chunk_bytes: u64,
    ) -> Result<PageFile> {
        let path = device.path().to_owned();
        let size_bytes =
            device.len().map_err(|e| Error::io(format!("sizing {}", path.display()), e))?;
        let page_bytes = PAGE_SIZE as u64;
        let backing = BlockBacking {
            device,
            writable,
            grow_bytes: grow_chunk_bytes.div_ceil(page_bytes).max(1) * page_bytes,
            size_bytes: AtomicU64::new(size_bytes),
            grow_lock: Mutex::new(()),
        };
        Ok(PageFile { backing: Backing::Block(backing), path })
    }

    /// The page file's path (its first device's), to name in errors.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The real devices, for the workers' engines; `None` for a page file on a
    /// [`BlockDevice`] ([`PageFile::open_on`]).
    pub fn devices(&self) -> Option<&Devices> {
        match &self.backing {
            Backing::Devices(devices) => Some(devices),
            Backing::Block(_) => None,
        }
    }

    /// The device of a page file opened with [`PageFile::open_on`]; `None` on real devices.
    pub fn block_device(&self) -> Option<&Arc<dyn BlockDevice>> {
        match &self.backing {
            Backing::Devices(_) => None,
            Backing::Block(block) => Some(&block.device),
        }
    }

    /// The engine a page file on a [`BlockDevice`] brings for the workers (a
    /// [`BlockEngine`](super::BlockEngine) with room for `depth` requests); `None` on real
    /// devices, whose engine the options choose.
    pub fn own_engine(&self, depth: usize) -> Option<Result<Box<dyn super::IoEngine>>> {
        let device = self.block_device()?;
        Some(super::BlockEngine::new(Arc::clone(device), depth).map(|engine| Box::new(engine) as _))
    }

    /// Whether pages are read and written with `O_DIRECT` (never on a [`BlockDevice`]).
    pub fn is_direct(&self) -> bool {
        match &self.backing {
            Backing::Devices(devices) => devices.is_direct(),
            Backing::Block(_) => false,
        }
    }

    /// Whether pages may be written (and the devices grown).
    pub fn is_writable(&self) -> bool {
        match &self.backing {
            Backing::Devices(devices) => devices.is_writable(),
            Backing::Block(block) => block.writable,
        }
    }

    /// Pages the devices hold from page 0 without a gap.
    pub fn size_pages(&self) -> u64 {
        let bytes = match &self.backing {
            Backing::Devices(devices) => devices.capacity_bytes(),
            Backing::Block(block) => block.size_bytes(),
        };
        bytes / PAGE_SIZE as u64
    }

    /// Where page `page_id` lives: (device index, byte offset on that device).
    pub fn locate(&self, page_id: PageId) -> (usize, u64) {
        let offset = page_id * PAGE_SIZE as u64;
        match &self.backing {
            Backing::Devices(devices) => devices.locate(offset),
            Backing::Block(_) => (0, offset),
        }
    }

    /// Makes sure the devices hold page `page_id`, growing them by whole chunks.
    pub fn ensure_page(&self, page_id: PageId) -> Result<()> {
        if page_id < self.size_pages() {
            return Ok(());
        }
        let needed_bytes = (page_id + 1) * PAGE_SIZE as u64;
        match &self.backing {
            Backing::Devices(devices) => devices.ensure_capacity(needed_bytes),
            Backing::Block(block) => block.ensure_capacity(needed_bytes),
        }
    }

    /// The device paths, for messages.
    fn describe(&self) -> String {
        match &self.backing {
            Backing::Devices(devices) => devices.describe(),
            Backing::Block(_) => self.path.display().to_string(),
        }
    }

    fn check_buffer(&self, buf: &[u8]) -> Result<()> {
        if buf.len() != PAGE_SIZE || (self.is_direct() && buf.as_ptr() as usize % PAGE_SIZE != 0) {
            return Err(Error::io(
                format!("accessing {}", self.path.display()),
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "page buffers must be one page long and page-aligned",
                ),
            ));
        }
        Ok(())
    }

    /// Reads page `page_id` into `buf` (one page, page-aligned). A page past the end of the
    /// devices reads as zeros (its checksum then fails).
    pub fn read_page(&self, page_id: PageId, buf: &mut [u8]) -> Result<()> {
        self.check_buffer(buf)?;
        let (device, offset) = self.locate(page_id);
        let result = match &self.backing {
            Backing::Devices(devices) => {
                let file = &devices.files()[device];
                read_full(buf, offset, |buf, offset| file.read_at(buf, offset))
            }
            Backing::Block(block) => {
                read_full(buf, offset, |buf, offset| block.device.read_at(buf, offset))
            }
        };
        result.map_err(|e| Error::io(format!("reading page {page_id} of {}", self.describe()), e))
    }

    /// Writes `buf` (one sealed page, page-aligned) as page `page_id`.
    pub fn write_page(&self, page_id: PageId, buf: &[u8]) -> Result<()> {
        self.check_buffer(buf)?;
        if let Backing::Block(block) = &self.backing {
            if !block.writable {
                return Err(Error::ReadOnly);
            }
        }
        self.ensure_page(page_id)?;
        let (device, offset) = self.locate(page_id);
        let result = match &self.backing {
            Backing::Devices(devices) => devices.files()[device].write_all_at(buf, offset),
            Backing::Block(block) => block.device.write_at(buf, offset),
        };
        result.map_err(|e| Error::io(format!("writing page {page_id} of {}", self.describe()), e))
    }

    /// Checks a buffer of whole pages for `read_pages` / `write_pages`.
    fn check_run_buffer(&self, buf: &[u8]) -> Result<()> {
        if buf.is_empty()
            || buf.len() % PAGE_SIZE != 0
            || (self.is_direct() && buf.as_ptr() as usize % PAGE_SIZE != 0)
        {
            return Err(Error::io(
                format!("accessing {}", self.path.display()),
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "run buffers must hold whole pages and be page-aligned",
                ),
            ));
        }
        Ok(())
    }

    /// The pieces of the run of pages `first..first + pages` that lie contiguously on one
    /// device: `(device, device offset, byte offset in the run, bytes)`. One piece on a
    /// single device; striped, a piece never crosses a chunk.
    pub(crate) fn run_pieces(
        &self,
        first: PageId,
        bytes: usize,
    ) -> Vec<(usize, u64, usize, usize)> {
        let mut pieces: Vec<(usize, u64, usize, usize)> = Vec::new();
        let mut at = 0;
        while at < bytes {
            let (device, offset) = self.locate(first + (at / PAGE_SIZE) as u64);
            match pieces.last_mut() {
                Some(last) if last.0 == device && last.1 + last.3 as u64 == offset => {
                    last.3 += PAGE_SIZE
                }
                _ => pieces.push((device, offset, at, PAGE_SIZE)),
            }
            at += PAGE_SIZE;
        }
        pieces
    }

    /// Reads the run of pages from `first` into `buf` (whole pages, page-aligned), with as
    /// few system calls as the devices allow (one on a single device). Pages past the end
    /// of the devices read as zeros.
    pub fn read_pages(&self, first: PageId, buf: &mut [u8]) -> Result<()> {
        self.check_run_buffer(buf)?;
        for (device, offset, at, len) in self.run_pieces(first, buf.len()) {
            let piece = &mut buf[at..at + len];
            let result = match &self.backing {
                Backing::Devices(devices) => {
                    let file = &devices.files()[device];
                    read_full(piece, offset, |buf, offset| file.read_at(buf, offset))
                }
                Backing::Block(block) => {
                    read_full(piece, offset, |buf, offset| block.device.read_at(buf, offset))
                }
            };
            result.map_err(|e| {
                let pages = buf.len() / PAGE_SIZE;
                Error::io(format!("reading pages {first}+{pages} of {}", self.describe()), e)
            })?;
        }
        Ok(())
    }

    /// Writes `buf` (whole pages, page-aligned) as the run of pages from `first`.
    pub fn write_pages(&self, first: PageId, buf: &[u8]) -> Result<()> {
        self.check_run_buffer(buf)?;
        if let Backing::Block(block) = &self.backing {
            if !block.writable {
                return Err(Error::ReadOnly);
            }
        }
        let pages = (buf.len() / PAGE_SIZE) as u64;
        self.ensure_page(first + pages - 1)?;
        for (device, offset, at, len) in self.run_pieces(first, buf.len()) {
            let piece = &buf[at..at + len];
            let result = match &self.backing {
                Backing::Devices(devices) => devices.files()[device].write_all_at(piece, offset),
                Backing::Block(block) => block.device.write_at(piece, offset),
            };
            result.map_err(|e| {
                Error::io(format!("writing pages {first}+{pages} of {}", self.describe()), e)
            })?;
        }
        Ok(())
    }

    /// Makes every completed write durable.
    pub fn sync(&self) -> Result<()> {
        match &self.backing {
            Backing::Devices(devices) => devices.sync(),
            Backing::Block(block) => block
                .device
                .sync()
                .map_err(|e| Error::io(format!("syncing {}", self.path.display()), e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::AlignedPage;

    #[test]
    fn write_read_and_grow_in_chunks() {
        let dir = tempfile::TempDir::with_prefix("file").unwrap();
        let path = dir.path().join("pages");
        let file = PageFile::open(&path, true, true, true, 16 * PAGE_SIZE as u64).unwrap();
        assert_eq!(file.size_pages(), 0);
        let mut page = AlignedPage::zeroed();
        page.bytes_mut()[0] = 0xab;
        file.write_page(3, page.bytes()).unwrap();
        assert_eq!(file.size_pages(), 16);
        file.write_page(17, page.bytes()).unwrap();
        assert_eq!(file.size_pages(), 32);
        let mut back = AlignedPage::zeroed();
        file.read_page(3, back.bytes_mut()).unwrap();
        assert_eq!(back.bytes()[0], 0xab);
        file.read_page(1000, back.bytes_mut()).unwrap();
        assert!(back.bytes().iter().all(|&b| b == 0));
    }

    #[test]
    fn runs_of_pages_are_written_and_read_whole() {
        let dir = tempfile::TempDir::with_prefix("file-runs").unwrap();
        let file =
            PageFile::open(&dir.path().join("pages"), true, true, true, 4 * PAGE_SIZE as u64)
                .unwrap();
        let mut run = crate::io::AlignedBlock::zeroed(5 * PAGE_SIZE);
        for (i, b) in run.as_mut_slice().iter_mut().enumerate() {
            *b = (i / PAGE_SIZE) as u8 + 1;
        }
        file.write_pages(3, run.as_slice()).unwrap();
        assert!(file.size_pages() >= 8);
        let mut back = crate::io::AlignedBlock::zeroed(7 * PAGE_SIZE);
        file.read_pages(2, back.as_mut_slice()).unwrap();
        let back = back.as_slice();
        assert!(back[..PAGE_SIZE].iter().all(|&b| b == 0), "page 2 was never written");
        assert_eq!(&back[PAGE_SIZE..6 * PAGE_SIZE], run.as_slice());
        assert!(back[6 * PAGE_SIZE..].iter().all(|&b| b == 0), "page 8 was never written");
        let mut odd = crate::io::AlignedBlock::zeroed(2 * PAGE_SIZE);
        let err = file.read_pages(0, &mut odd.as_mut_slice()[..PAGE_SIZE + 1]).unwrap_err();
        assert!(err.to_string().contains("whole pages"), "{err}");
    }

    #[test]
    fn misaligned_buffers_are_refused() {
        let dir = tempfile::TempDir::with_prefix("file-misaligned").unwrap();
        let file =
            PageFile::open(&dir.path().join("pages"), true, true, true, PAGE_SIZE as u64).unwrap();
        let mut big = vec![0u8; 2 * PAGE_SIZE];
        let start = if big.as_ptr() as usize % PAGE_SIZE == 0 { 1 } else { 0 };
        let err = file.read_page(0, &mut big[start..start + PAGE_SIZE]).unwrap_err();
        assert!(err.to_string().contains("page-aligned"), "{err}");
    }

    #[test]
    fn a_page_file_on_a_block_device_grows_in_page_steps() {
        let dir = tempfile::TempDir::with_prefix("file-on-device").unwrap();
        let device =
            super::super::FileDevice::open(&dir.path().join("pages"), true, false).unwrap();
        let file = PageFile::open_on(Arc::new(device), true, PAGE_SIZE as u64 + 1).unwrap();
        assert!(file.devices().is_none() && !file.is_direct());
        assert!(file.block_device().is_some());
        let mut page = vec![0u8; PAGE_SIZE];
        page[7] = 0x5a;
        file.write_page(2, &page).unwrap();
        assert_eq!(file.size_pages(), 4, "grown to a multiple of two pages");
        file.sync().unwrap();
        let mut back = vec![1u8; PAGE_SIZE];
        file.read_page(2, &mut back).unwrap();
        assert_eq!(back, page);
        file.read_page(9, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0));
        assert_eq!(
            std::fs::metadata(dir.path().join("pages")).unwrap().len(),
            4 * PAGE_SIZE as u64
        );
    }
}
