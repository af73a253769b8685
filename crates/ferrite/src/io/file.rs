//! The page file: opened with `O_DIRECT` (unless told otherwise), grown in large preallocated
//! chunks (seed 001), read and written a page at a time through page-aligned buffers.

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::error::{Error, PageId, Result};
use crate::store::page::PAGE_SIZE;

/// A file of `PAGE_SIZE` pages.
#[derive(Debug)]
pub struct PageFile {
    file: File,
    path: PathBuf,
    direct: bool,
    /// Pages the file holds (allocated on disk), a multiple of the growth chunk.
    size_pages: AtomicU64,
    grow_chunk_pages: u64,
    grow_lock: Mutex<()>,
}

impl PageFile {
    /// Opens (creating if `create`) the file at `path`, for reading and, if `writable`,
    /// writing.
    pub fn open(
        path: &Path,
        create: bool,
        writable: bool,
        direct: bool,
        grow_chunk_bytes: u64,
    ) -> Result<Self> {
        let mut options = OpenOptions::new();
        options.read(true).write(writable).create(create && writable);
        if direct {
            options.custom_flags(libc::O_DIRECT);
        }
        let file = options.open(path).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::EINVAL) && direct {
                " (the file system refuses O_DIRECT; set Options::direct_io = false)"
            } else {
                ""
            };
            Error::io(format!("opening {}{hint}", path.display()), e)
        })?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("reading the size of {}", path.display()), e))?
            .len();
        Ok(PageFile {
            file,
            path: path.to_owned(),
            direct,
            size_pages: AtomicU64::new(len / PAGE_SIZE as u64),
            grow_chunk_pages: (grow_chunk_bytes / PAGE_SIZE as u64).max(1),
            grow_lock: Mutex::new(()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor, for the submission engines of the workers.
    pub fn raw_fd(&self) -> std::os::unix::io::RawFd {
        self.file.as_raw_fd()
    }

    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Pages the file holds on disk.
    pub fn size_pages(&self) -> u64 {
        self.size_pages.load(Ordering::Acquire)
    }

    /// Makes sure the file holds page `page_id`, growing it by whole chunks with
    /// `fallocate` so that the file system's metadata changes are few and batched.
    pub fn ensure_page(&self, page_id: PageId) -> Result<()> {
        if page_id < self.size_pages() {
            return Ok(());
        }
        let _guard = self.grow_lock.lock().unwrap();
        let size = self.size_pages();
        if page_id < size {
            return Ok(());
        }
        let chunk = self.grow_chunk_pages;
        let new_size = (page_id / chunk + 1) * chunk;
        let offset = (size * PAGE_SIZE as u64) as libc::off_t;
        let len = ((new_size - size) * PAGE_SIZE as u64) as libc::off_t;
        // SAFETY: fallocate only reads its integer arguments; the descriptor is open.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, offset, len) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
                self.file
                    .set_len(new_size * PAGE_SIZE as u64)
                    .map_err(|e| Error::io(format!("growing {}", self.path.display()), e))?;
            } else {
                return Err(Error::io(
                    format!("growing {} to {} pages", self.path.display(), new_size),
                    err,
                ));
            }
        }
        self.size_pages.store(new_size, Ordering::Release);
        Ok(())
    }

    fn check_buffer(&self, buf: &[u8]) -> Result<()> {
        if buf.len() != PAGE_SIZE || (self.direct && buf.as_ptr() as usize % PAGE_SIZE != 0) {
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
    /// file reads as zeros (its checksum then fails).
    pub fn read_page(&self, page_id: PageId, buf: &mut [u8]) -> Result<()> {
        self.check_buffer(buf)?;
        let offset = page_id * PAGE_SIZE as u64;
        let mut done = 0;
        while done < PAGE_SIZE {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => {
                    buf[done..].fill(0);
                    break;
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Error::io(
                        format!("reading page {page_id} of {}", self.path.display()),
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
        self.file
            .write_all_at(buf, page_id * PAGE_SIZE as u64)
            .map_err(|e| Error::io(format!("writing page {page_id} of {}", self.path.display()), e))
    }

    /// Makes every completed write durable.
    pub fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| Error::io(format!("syncing {}", self.path.display()), e))
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
