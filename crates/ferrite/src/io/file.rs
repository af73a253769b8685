//! The page file: pages laid over the devices (`device.rs`: one file, or several striped
//! RAID0 by Ferrite), opened with `O_DIRECT` unless told otherwise, grown in large
//! preallocated chunks (seed 001), read and written a page at a time through page-aligned
//! buffers by blocking system calls. The workers reach the same devices through their own
//! engines (`open_engine` on [`PageFile::devices`]).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::device::{DeviceOptions, Devices, DEFAULT_CHUNK_BYTES};
use crate::error::{Error, PageId, Result};
use crate::store::page::PAGE_SIZE;

/// Pages `0..` over one or more devices.
#[derive(Debug)]
pub struct PageFile {
    devices: Devices,
    /// The first device's path, to name in messages.
    path: PathBuf,
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
        Ok(PageFile { devices, path: paths[0].clone() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The devices, for the workers' engines.
    pub fn devices(&self) -> &Devices {
        &self.devices
    }

    pub fn is_direct(&self) -> bool {
        self.devices.is_direct()
    }

    /// Pages the devices hold from page 0 without a gap.
    pub fn size_pages(&self) -> u64 {
        self.devices.capacity_bytes() / PAGE_SIZE as u64
    }

    /// Where page `page_id` lives: (device index, byte offset on that device).
    pub fn locate(&self, page_id: PageId) -> (usize, u64) {
        self.devices.locate(page_id * PAGE_SIZE as u64)
    }

    /// Makes sure the devices hold page `page_id`, growing them by whole chunks.
    pub fn ensure_page(&self, page_id: PageId) -> Result<()> {
        if page_id < self.size_pages() {
            return Ok(());
        }
        self.devices.ensure_capacity((page_id + 1) * PAGE_SIZE as u64)
    }

    fn check_buffer(&self, buf: &[u8]) -> Result<()> {
        if buf.len() != PAGE_SIZE || (self.is_direct() && buf.as_ptr() as usize % PAGE_SIZE != 0) {
            return Err(Error::io(
                format!("accessing {}", self.path.display()),
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
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
        let file = &self.devices.files()[device];
        let mut done = 0;
        while done < PAGE_SIZE {
            match file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => {
                    buf[done..].fill(0);
                    break;
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Error::io(
                        format!("reading page {page_id} of {}", self.devices.describe()),
                        e,
                    ))
                }
            }
        }
        Ok(())
    }

    /// Writes `buf` (one sealed page, page-aligned) as page `page_id`.
    pub fn write_page(&self, page_id: PageId, buf: &[u8]) -> Result<()> {
        self.check_buffer(buf)?;
        self.ensure_page(page_id)?;
        let (device, offset) = self.locate(page_id);
        self.devices.files()[device].write_all_at(buf, offset).map_err(|e| {
            Error::io(format!("writing page {page_id} of {}", self.devices.describe()), e)
        })
    }

    /// Makes every completed write durable.
    pub fn sync(&self) -> Result<()> {
        self.devices.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::AlignedPage;

    #[test]
    fn write_read_and_grow_in_chunks() {
        let dir = crate::test_util::TempDir::new("file");
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
    fn misaligned_buffers_are_refused() {
        let dir = crate::test_util::TempDir::new("file-misaligned");
        let file =
            PageFile::open(&dir.path().join("pages"), true, true, true, PAGE_SIZE as u64).unwrap();
        let mut big = vec![0u8; 2 * PAGE_SIZE];
        let start = if big.as_ptr() as usize % PAGE_SIZE == 0 { 1 } else { 0 };
        let err = file.read_page(0, &mut big[start..start + PAGE_SIZE]).unwrap_err();
        assert!(err.to_string().contains("page-aligned"), "{err}");
    }
}
