//! The seam between Ferrite and where its bytes live, for the blocking paths: a
//! [`BlockDevice`] is one file (or block device) read and written at offsets and synced; a
//! [`Storage`] opens the named files of a data directory (the page file, the log segments).
//! The real ones are [`FileDevice`] and [`DirStorage`]; tests put `testing::sim`'s simulated
//! disk behind the same traits, so the engine can be crashed, torn and failed from a seed.
//!
//! The submission engines (`engine/`) work on real file descriptors; a page file on a
//! simulated disk is driven by `BlockEngine`, through these traits.

#![allow(unsafe_code)] // fcntl

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One file of bytes, read and written at offsets.
pub trait BlockDevice: Send + Sync + fmt::Debug {
    /// Reads up to `buf.len()` bytes at `offset`; fewer only where the device ends.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Writes all of `buf` at `offset`, growing the device if it ends before.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// Makes every write so far durable (`fdatasync`). After an error, nothing is known
    /// about the writes since the last successful sync: callers must not retry as if it had
    /// succeeded.
    fn sync(&self) -> io::Result<()>;

    /// The device's size in bytes.
    fn len(&self) -> io::Result<u64>;

    /// Whether the device holds no bytes.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Preallocates the device up to `len` bytes (never shrinks it).
    fn allocate(&self, len: u64) -> io::Result<()>;

    /// The path to name in messages.
    fn path(&self) -> &Path;

    /// The open file's descriptor, for I/O queued on a worker's engine (`None`: only the
    /// methods above reach it, as for a simulated disk).
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
}

/// The named files of one data directory.
pub trait Storage: Send + Sync + fmt::Debug {
    /// Opens file `name` (a path relative to the directory, `/`-separated), creating it if
    /// `create`; `Ok(None)` when it does not exist and `create` is false.
    fn open(&self, name: &str, create: bool) -> io::Result<Option<Arc<dyn BlockDevice>>>;

    /// Removes file `name` if it exists.
    fn remove(&self, name: &str) -> io::Result<()>;

    /// Makes the creation and removal of files durable (`fsync` of the directories).
    fn sync_names(&self) -> io::Result<()>;

    /// The names (relative, `/`-separated, `dir/…`) of the files in directory `dir`, sorted;
    /// none if the directory does not exist.
    fn list(&self, dir: &str) -> io::Result<Vec<String>>;

    /// The path of file `name`, to name in messages.
    fn path(&self, name: &str) -> PathBuf;
}

/// A real file, read and written with `pread` / `pwrite`.
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    path: PathBuf,
}

impl FileDevice {
    /// Opens `path` for reading and writing (created if `create`), buffered (`O_DIRECT`
    /// only when `direct`).
    pub fn open(path: &Path, create: bool, direct: bool) -> io::Result<FileDevice> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(create);
        let file = open_regular(&mut options, path, if direct { libc::O_DIRECT } else { 0 })?;
        Ok(FileDevice { file, path: path.to_owned() })
    }

    /// Opens an existing `path` for reading only.
    pub fn open_read_only(path: &Path) -> io::Result<FileDevice> {
        let file = open_regular(OpenOptions::new().read(true), path, 0)?;
        Ok(FileDevice { file, path: path.to_owned() })
    }

    /// Opens an existing file to write through: `O_DIRECT | O_DSYNC`, so that a write is
    /// durable when it returns (buffers, offsets and lengths aligned to `IO_ALIGN`).
    pub fn open_write_through(path: &Path) -> io::Result<FileDevice> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
            .open(path)?;
        Ok(FileDevice { file, path: path.to_owned() })
    }
}

impl BlockDevice for FileDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        if self.len()? >= len {
            return Ok(());
        }
        self.file.set_len(len)
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        Some(self.file.as_raw_fd())
    }
}

/// Opens `path` with `options` and `flags`, never blocking (a FIFO in a file's place would
/// block the open until a peer came), and refuses anything but a regular file.
pub fn open_regular(options: &mut OpenOptions, path: &Path, flags: i32) -> io::Result<File> {
    let file = options.custom_flags(flags | libc::O_NONBLOCK).open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    // O_NONBLOCK means nothing for a regular file's reads and writes; clear it all the same.
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor `file` owns, with integer arguments only.
    unsafe {
        let status = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        if status >= 0 {
            libc::fcntl(file.as_raw_fd(), libc::F_SETFL, status & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}

/// The files of a directory on the real file system.
#[derive(Debug)]
pub struct DirStorage {
    dir: PathBuf,
    /// Files are opened read-only and never created (a read-only open: it also works on
    /// read-only media).
    read_only: bool,
}

impl DirStorage {
    /// The files of directory `dir`, to read and write.
    pub fn new(dir: &Path) -> DirStorage {
        DirStorage { dir: dir.to_owned(), read_only: false }
    }

    /// The directory's files for reading only.
    pub fn read_only(dir: &Path) -> DirStorage {
        DirStorage { dir: dir.to_owned(), read_only: true }
    }
}

impl Storage for DirStorage {
    fn open(&self, name: &str, create: bool) -> io::Result<Option<Arc<dyn BlockDevice>>> {
        let path = self.dir.join(name);
        if self.read_only && create {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} cannot be created: the storage is read-only", path.display()),
            ));
        }
        if create {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
        }
        let opened = if self.read_only {
            FileDevice::open_read_only(&path)
        } else {
            FileDevice::open(&path, create, false)
        };
        match opened {
            Ok(device) => Ok(Some(Arc::new(device))),
            Err(e) if e.kind() == io::ErrorKind::NotFound && !create => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        match std::fs::remove_file(self.dir.join(name)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn sync_names(&self) -> io::Result<()> {
        let mut dirs = vec![self.dir.clone()];
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    dirs.push(entry.path());
                }
            }
        }
        for dir in dirs {
            File::open(&dir)?.sync_all()?;
        }
        Ok(())
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let entries = match std::fs::read_dir(self.dir.join(dir)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(format!("{dir}/{name}"));
            }
        }
        names.sort();
        Ok(names)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_storage_opens_writes_reads_and_removes() {
        let dir = tempfile::TempDir::with_prefix("storage").unwrap();
        let storage = DirStorage::new(dir.path());
        assert!(storage.open("wal/a.log", false).unwrap().is_none());
        let device = storage.open("wal/a.log", true).unwrap().unwrap();
        device.write_at(b"hello", 10).unwrap();
        device.sync().unwrap();
        assert_eq!(device.len().unwrap(), 15);
        let mut buf = [0u8; 20];
        assert_eq!(device.read_at(&mut buf, 8).unwrap(), 7);
        assert_eq!(&buf[2..7], b"hello");
        device.allocate(100).unwrap();
        assert_eq!(device.len().unwrap(), 100);
        storage.sync_names().unwrap();
        storage.remove("wal/a.log").unwrap();
        storage.remove("wal/a.log").unwrap();
        assert!(storage.open("wal/a.log", false).unwrap().is_none());
    }
}
