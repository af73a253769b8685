//! The physical reference of `bench objects`: one file per object (`obj-000001.dat`, ...) in
//! the data directory, preallocated to the object's size with `fallocate`, read and written
//! with `pread`/`pwrite` at the operation's offset: what the device does for the objects with
//! no store in between. `O_DIRECT` (the buffers are 4 KiB aligned; a 2 KiB block needs a
//! device with 512-byte logical sectors, which ext4 on most disks has), and `O_DSYNC` with
//! `--sync` (each write durable when it returns, as fio's `--sync=1`).
//!
//! Where the file system refuses `O_DIRECT` (tmpfs; or a block smaller than the device's
//! logical sector) the files are opened buffered instead, and the description says so:
//! reads then come from the page cache.

// fallocate.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use ferrite::io::AlignedBlock;

use super::{object_name, ObjectSession, ObjectStore, ObjectStoreOptions};
use crate::error::BenchError;
use crate::stores::StoreError;

/// One file per object.
#[derive(Debug)]
pub struct FileObjects {
    files: Vec<File>,
    /// Opened with `O_DIRECT`.
    direct: bool,
    sync: bool,
    /// Why `O_DIRECT` or `fallocate` were not used, if they were not.
    notes: Vec<String>,
}

/// The file of object `object` in `dir`.
pub fn object_path(dir: &Path, object: u32) -> PathBuf {
    dir.join(format!("{}.dat", object_name(object)))
}

fn io_error(context: String) -> impl FnOnce(io::Error) -> BenchError {
    move |source| BenchError::Io { context, source }
}

fn open_file(path: &Path, direct: bool, sync: bool) -> io::Result<File> {
    let mut flags = 0;
    if direct {
        flags |= libc::O_DIRECT;
    }
    if sync {
        flags |= libc::O_DSYNC;
    }
    OpenOptions::new().read(true).write(true).create(true).custom_flags(flags).open(path)
}

/// Allocates `len` bytes of `file` (unwritten extents: they read as zeros until written).
fn preallocate(file: &File, len: u64) -> io::Result<()> {
    let len =
        libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: fallocate on an open descriptor with plain integer arguments; it changes the
    // file, never our memory.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl FileObjects {
    /// Opens (creating and preallocating where missing or short) the files of
    /// `options.objects` objects in `dir`.
    pub fn open(dir: &Path, options: &ObjectStoreOptions) -> Result<Self, BenchError> {
        let mut store =
            FileObjects { files: Vec::new(), direct: true, sync: options.sync, notes: Vec::new() };
        store.open_files(dir, options)?;
        if store.direct {
            // A read of one block where the data will be read: the file system and the
            // device take this size and alignment with O_DIRECT, or say EINVAL.
            let mut probe = AlignedBlock::zeroed(options.block_bytes);
            if let Err(e) = store.files[0].read_at(probe.as_mut_slice(), 0) {
                if e.raw_os_error() != Some(libc::EINVAL) {
                    return Err(io_error(format!("reading {}", object_path(dir, 0).display()))(e));
                }
                store.notes.push(format!(
                    "O_DIRECT refused {}-byte reads ({e}): buffered I/O instead, reads may come \
                     from the page cache",
                    options.block_bytes
                ));
                store.direct = false;
                store.files.clear();
                store.open_files(dir, options)?;
            }
        }
        Ok(store)
    }

    fn open_files(&mut self, dir: &Path, options: &ObjectStoreOptions) -> Result<(), BenchError> {
        for object in 0..options.objects {
            let path = object_path(dir, object);
            let file = match open_file(&path, self.direct, self.sync) {
                Err(e) if self.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                    self.notes.push(format!(
                        "the file system refused O_DIRECT ({e}): buffered I/O instead, reads \
                         may come from the page cache"
                    ));
                    self.direct = false;
                    self.files.clear();
                    return self.open_files(dir, options);
                }
                opened => opened.map_err(io_error(format!("opening {}", path.display())))?,
            };
            let len =
                file.metadata().map_err(io_error(format!("sizing {}", path.display())))?.len();
            if len < options.object_bytes {
                if let Err(e) = preallocate(&file, options.object_bytes) {
                    if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                        return Err(io_error(format!("preallocating {}", path.display()))(e));
                    }
                    if self.notes.iter().all(|n| !n.contains("fallocate")) {
                        self.notes.push(
                            "no fallocate on this file system: files are sparse \
                                         until the setup writes them"
                                .into(),
                        );
                    }
                    file.set_len(options.object_bytes)
                        .map_err(io_error(format!("sizing {}", path.display())))?;
                }
            }
            self.files.push(file);
        }
        Ok(())
    }

    fn file(&self, object: u32) -> Result<&File, StoreError> {
        self.files.get(object as usize).ok_or_else(|| format!("no object {object}").into())
    }
}

impl ObjectStore for FileObjects {
    fn name(&self) -> &'static str {
        "file"
    }

    fn direct_io(&self) -> bool {
        self.direct
    }

    fn describe(&self) -> String {
        let mut flags = vec![if self.direct { "O_DIRECT" } else { "buffered" }];
        if self.sync {
            flags.push("O_DSYNC (each write durable when it returns)");
        }
        let mut text = format!(
            "file: one file per object (obj-NNNNNN.dat), preallocated with fallocate, \
             pwrite/pread at the block's offset, {}",
            flags.join(" + ")
        );
        for note in &self.notes {
            text.push_str(&format!(" [{note}]"));
        }
        text
    }

    fn create(&self, object: u32) -> Result<(), StoreError> {
        // Created and preallocated at open.
        self.file(object).map(|_| ())
    }

    fn session(&self) -> Result<Box<dyn ObjectSession + '_>, StoreError> {
        Ok(Box::new(FileSession { store: self }))
    }

    fn settle(&self) -> Result<(), StoreError> {
        for file in &self.files {
            file.sync_data()?;
        }
        Ok(())
    }
}

/// The files are shared: `pread`/`pwrite` need no per-thread state.
struct FileSession<'a> {
    store: &'a FileObjects,
}

impl ObjectSession for FileSession<'_> {
    fn write_at(&mut self, object: u32, offset: u64, bytes: &[u8]) -> Result<(), StoreError> {
        Ok(self.store.file(object)?.write_all_at(bytes, offset)?)
    }

    fn read_at(&mut self, object: u32, offset: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        Ok(self.store.file(object)?.read_exact_at(buf, offset)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    /// Files are preallocated to the object size, written and read at any aligned offset,
    /// and found again by a second open.
    #[test]
    fn files_are_preallocated_written_and_read_in_place() {
        let dir = TempDir::new().unwrap();
        let options = ObjectStoreOptions {
            objects: 2,
            object_bytes: 1 << 20,
            block_bytes: 2048,
            sync: true,
            cache_bytes: 0,
            tasks: false,
        };
        let store = FileObjects::open(dir.path(), &options).unwrap();
        assert!(store.describe().contains("O_DSYNC"), "{}", store.describe());
        for object in 0..2 {
            let meta = std::fs::metadata(object_path(dir.path(), object)).unwrap();
            assert_eq!(meta.len(), 1 << 20);
        }
        let mut block = AlignedBlock::zeroed(2048);
        block.as_mut_slice().fill(5);
        let mut session = store.session().unwrap();
        session.write_at(1, 6144, block.as_slice()).unwrap();
        drop(session);
        store.settle().unwrap();
        drop(store);
        let store =
            FileObjects::open(dir.path(), &ObjectStoreOptions { sync: false, ..options }).unwrap();
        let mut session = store.session().unwrap();
        let mut read = AlignedBlock::zeroed(2048);
        session.read_at(1, 6144, read.as_mut_slice()).unwrap();
        assert_eq!(read.as_slice(), block.as_slice());
        session.read_at(1, 4096, read.as_mut_slice()).unwrap();
        assert!(read.as_slice().iter().all(|&b| b == 0), "preallocated space reads as zeros");
        assert!(session.read_at(2, 0, read.as_mut_slice()).is_err(), "no object 2");
    }
}
