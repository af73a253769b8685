//! Where bytes live: one file or block device, or several striped RAID0-style by Ferrite
//! itself (the engine's own striping outruns Linux md: "What Modern NVMe Storage Can Do, and
//! How to Exploit It"), every device grown in large preallocated steps (few, batched
//! file-system metadata updates: "Getting Storage Engines Ready for Fast Storage Devices";
//! both in docs/references.md).
//!
//! # Layout
//! The logical byte space is cut into chunks of `chunk_bytes`; logical chunk `c` lives on
//! device `c % n` at device offset `(c / n) * chunk_bytes`:
//!
//! | logical chunk | 0 | 1 | 2 | 3 | 4 | 5 | ... |
//! |---------------|---|---|---|---|---|---|-----|
//! | device (n=3)  | 0 | 1 | 2 | 0 | 1 | 2 | ... |
//! | device chunk  | 0 | 0 | 0 | 1 | 1 | 1 | ... |
//!
//! A request never crosses a chunk when there are several devices ([`Devices::locate_range`]
//! refuses one that would); with one device the mapping is the identity and any range is
//! contiguous. The default chunk is 64 KiB ([`DEFAULT_CHUNK_BYTES`]): page reads (4 KiB) are
//! spread evenly whatever the chunk, and 64 KiB lets multi-page transfers up to 16 pages stay
//! one request on one device while a sequential run longer than that already alternates
//! devices (Linux md's 512 KiB default would keep a 100-page scan on one or two devices).
//!
//! # Growth
//! Files grow with `fallocate` (or `set_len` where the file system does not support it) to a
//! multiple of `grow_bytes` per device, so that growing is rare and each growth is one
//! metadata update. Block devices do not grow: asking for more than they hold is an error
//! that names the device and its size. Devices never shrink. When a shared mapping of the
//! devices exists (the mmap engine's), every growth remaps it with the lock-free protocol in
//! `mmap.rs`.
//!
//! This module knows nothing of pages or superblocks: the page file is built on it.

#![allow(unsafe_code)] // fallocate

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::engine::mmap::Mapping;
use super::engine::IO_ALIGN;
use crate::error::{Error, Result};

/// Chunk of the stripe when none is given: see the module documentation.
pub const DEFAULT_CHUNK_BYTES: u64 = 64 << 10;
/// Growth step per device when none is given.
pub const DEFAULT_GROW_BYTES: u64 = 64 << 20;

/// How to open a device list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceOptions {
    /// Open with `O_DIRECT`.
    pub direct: bool,
    /// Open for writing (and allow growth).
    pub writable: bool,
    /// Create files that do not exist (writable only).
    pub create: bool,
    /// Stripe chunk, a multiple of [`IO_ALIGN`].
    pub chunk_bytes: u64,
    /// Growth step per device, a multiple of `chunk_bytes`.
    pub grow_bytes: u64,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        DeviceOptions {
            direct: true,
            writable: true,
            create: false,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            grow_bytes: DEFAULT_GROW_BYTES,
        }
    }
}

impl DeviceOptions {
    fn check(&self) -> Result<()> {
        let align = IO_ALIGN as u64;
        if self.chunk_bytes == 0 || self.chunk_bytes % align != 0 {
            return Err(Error::BadOptions {
                reason: format!(
                    "stripe chunk of {} bytes: it must be a positive multiple of {IO_ALIGN}",
                    self.chunk_bytes
                ),
            });
        }
        if self.grow_bytes == 0 || self.grow_bytes % self.chunk_bytes != 0 {
            return Err(Error::BadOptions {
                reason: format!(
                    "growth step of {} bytes: it must be a positive multiple of the {}-byte chunk",
                    self.grow_bytes, self.chunk_bytes
                ),
            });
        }
        Ok(())
    }
}

/// One or more devices, striped.
#[derive(Debug)]
pub struct Devices {
    files: Arc<[File]>,
    paths: Vec<PathBuf>,
    block_device: Vec<bool>,
    /// Bytes each device holds; only grows, under `grow_lock`.
    sizes: Vec<AtomicU64>,
    options: DeviceOptions,
    grow_lock: Mutex<()>,
    mapping: OnceLock<Arc<Mapping>>,
}

/// The size of an open file or block device, in bytes (`metadata` says 0 for a block device;
/// seeking to its end does not).
pub(crate) fn file_size(file: &File) -> io::Result<u64> {
    let mut file = file;
    file.seek(SeekFrom::End(0))
}

fn open_one(path: &Path, options: &DeviceOptions) -> Result<(File, bool, u64)> {
    let opening = || format!("opening {}", path.display());
    // Anything but a regular file or a block device is refused before the open: opening a
    // FIFO waits for a writer (forever), and with O_DIRECT the kernel refuses a directory or a
    // character device with EINVAL, which would say nothing of what the path is. (A path
    // that cannot be looked at is left to the open, whose error says why.)
    if let Ok(metadata) = std::fs::metadata(path) {
        if let Some(what) = unsupported_kind(&metadata.file_type()) {
            return Err(Error::io(opening(), unsupported(what)));
        }
    }
    let mut open = OpenOptions::new();
    open.read(true).write(options.writable).create(options.create && options.writable);
    if options.direct {
        open.custom_flags(libc::O_DIRECT);
    }
    let file = open.open(path).map_err(|e| {
        let hint = if refuses_direct(path, options, &e) {
            " (the file system refuses O_DIRECT; open without direct I/O)"
        } else {
            ""
        };
        Error::io(format!("{}{hint}", opening()), e)
    })?;
    let metadata =
        file.metadata().map_err(|e| Error::io(format!("inspecting {}", path.display()), e))?;
    let block = metadata.file_type().is_block_device();
    // Checked again on the open file: the path may have changed since it was looked at.
    if let Some(what) = unsupported_kind(&metadata.file_type()) {
        return Err(Error::io(opening(), unsupported(what)));
    }
    let size = file_size(&file).map_err(|e| Error::io(format!("sizing {}", path.display()), e))?;
    Ok((file, block, size))
}

/// What a file of type `file_type` is, if it is neither a regular file nor a block device.
fn unsupported_kind(file_type: &std::fs::FileType) -> Option<&'static str> {
    if file_type.is_file() || file_type.is_block_device() {
        None
    } else if file_type.is_dir() {
        Some("a directory")
    } else if file_type.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if file_type.is_socket() {
        Some("a socket")
    } else if file_type.is_char_device() {
        Some("a character device")
    } else {
        Some("of an unknown file type")
    }
}

fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {what}, not a regular file or a block device"),
    )
}

/// Whether `failed`, the error of opening `path` with `options`, is the file system refusing
/// O_DIRECT: EINVAL, and the same open without O_DIRECT succeeds on a regular file or block
/// device. (EINVAL has other causes, and O_DIRECT is the likely one only then.)
fn refuses_direct(path: &Path, options: &DeviceOptions, failed: &io::Error) -> bool {
    if !options.direct || failed.raw_os_error() != Some(libc::EINVAL) {
        return false;
    }
    // Not O_CREAT: had the failed open created the file, it exists now. O_NONBLOCK: a FIFO
    // put there since the look above must not make this wait.
    let plain = OpenOptions::new()
        .read(true)
        .write(options.writable)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
    plain.and_then(|file| file.metadata()).is_ok_and(|m| unsupported_kind(&m.file_type()).is_none())
}

/// Grows `file` from `from` to `to` bytes, preallocating the space.
fn grow_file(file: &File, from: u64, to: u64) -> io::Result<()> {
    let offset = libc::off_t::try_from(from).map_err(|_| io::ErrorKind::InvalidInput)?;
    let len = libc::off_t::try_from(to - from).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: fallocate reads only its integer arguments; the descriptor is open.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
        return file.set_len(to);
    }
    Err(err)
}

impl Devices {
    /// Opens the devices at `paths`, in stripe order.
    pub fn open(paths: &[PathBuf], options: &DeviceOptions) -> Result<Devices> {
        options.check()?;
        if paths.is_empty() {
            return Err(Error::BadOptions { reason: "no device given".into() });
        }
        let mut files = Vec::with_capacity(paths.len());
        let mut block_device = Vec::with_capacity(paths.len());
        let mut sizes = Vec::with_capacity(paths.len());
        for path in paths {
            let (file, block, size) = open_one(path, options)?;
            files.push(file);
            block_device.push(block);
            sizes.push(AtomicU64::new(size));
        }
        Ok(Devices {
            files: files.into(),
            paths: paths.to_vec(),
            block_device,
            sizes,
            options: options.clone(),
            grow_lock: Mutex::new(()),
            mapping: OnceLock::new(),
        })
    }

    /// Number of devices.
    pub fn count(&self) -> usize {
        self.files.len()
    }

    /// The devices' paths, in stripe order.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Whether they were opened with `O_DIRECT`.
    pub fn is_direct(&self) -> bool {
        self.options.direct
    }

    /// Whether they were opened for writing.
    pub fn is_writable(&self) -> bool {
        self.options.writable
    }

    /// Bytes per stripe chunk.
    pub fn chunk_bytes(&self) -> u64 {
        self.options.chunk_bytes
    }

    /// Whether device `index` is a block device (which never grows).
    pub fn is_block_device(&self, index: usize) -> bool {
        self.block_device[index]
    }

    /// The descriptors, in device order: request `device` fields index this list.
    pub fn raw_fds(&self) -> Vec<RawFd> {
        self.files.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// The open files, shared with the engines so that a descriptor stays open while an
    /// engine may still use it.
    pub(crate) fn files(&self) -> &Arc<[File]> {
        &self.files
    }

    /// Bytes device `index` holds.
    pub fn size_bytes(&self, index: usize) -> u64 {
        self.sizes[index].load(Ordering::Acquire)
    }

    /// Where logical byte `logical_offset` lives: (device index, offset on that device).
    pub fn locate(&self, logical_offset: u64) -> (usize, u64) {
        let chunk_bytes = self.options.chunk_bytes;
        let n = self.count() as u64;
        let chunk = logical_offset / chunk_bytes;
        ((chunk % n) as usize, (chunk / n) * chunk_bytes + logical_offset % chunk_bytes)
    }

    /// As [`Devices::locate`], for `len` bytes from `logical_offset`, which must lie in one
    /// chunk when there are several devices.
    pub fn locate_range(&self, logical_offset: u64, len: u64) -> Result<(usize, u64)> {
        let chunk_bytes = self.options.chunk_bytes;
        if self.count() > 1 && logical_offset % chunk_bytes + len > chunk_bytes {
            return Err(Error::io(
                format!("locating {len} bytes at logical offset {logical_offset}"),
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("the range crosses a {chunk_bytes}-byte stripe chunk"),
                ),
            ));
        }
        Ok(self.locate(logical_offset))
    }

    /// Logical bytes addressable from 0 without a gap: up to the first byte whose device
    /// does not hold it (a device may end inside a chunk: a file not grown by Ferrite).
    pub fn capacity_bytes(&self) -> u64 {
        let chunk_bytes = self.options.chunk_bytes;
        let n = self.count() as u64;
        (0..self.count())
            .map(|i| {
                let size = self.size_bytes(i);
                let whole_chunks = size / chunk_bytes;
                (whole_chunks * n + i as u64) * chunk_bytes + size % chunk_bytes
            })
            .min()
            .expect("at least one device")
    }

    /// Bytes device `index` must hold for logical bytes `0..logical_bytes` to exist.
    fn needed_on(&self, index: usize, logical_bytes: u64) -> u64 {
        let chunk_bytes = self.options.chunk_bytes;
        let n = self.count() as u64;
        let chunks = logical_bytes.div_ceil(chunk_bytes);
        let i = index as u64;
        let on_device = if chunks > i { (chunks - i).div_ceil(n) } else { 0 };
        on_device * chunk_bytes
    }

    /// Makes logical bytes `0..logical_bytes` exist on the devices, growing each file to a
    /// multiple of the growth step; a block device that is too small is an error.
    pub fn ensure_capacity(&self, logical_bytes: u64) -> Result<()> {
        if logical_bytes <= self.capacity_bytes() {
            return Ok(());
        }
        if !self.options.writable {
            return Err(Error::ReadOnly);
        }
        let _guard = self.grow_lock.lock().unwrap_or_else(|poison| poison.into_inner());
        let mut grew = false;
        for index in 0..self.count() {
            let needed = self.needed_on(index, logical_bytes);
            let size = self.size_bytes(index);
            if needed <= size {
                continue;
            }
            let path = self.paths[index].display();
            if self.block_device[index] {
                return Err(Error::io(
                    format!("growing block device {path} to {needed} bytes: it holds {size}"),
                    io::Error::from_raw_os_error(libc::ENOSPC),
                ));
            }
            let target = needed.div_ceil(self.options.grow_bytes) * self.options.grow_bytes;
            grow_file(&self.files[index], size, target)
                .map_err(|e| Error::io(format!("growing {path} to {target} bytes"), e))?;
            self.sizes[index].store(target, Ordering::Release);
            grew = true;
        }
        if grew {
            if let Some(mapping) = self.mapping.get() {
                mapping.remap().map_err(|e| Error::io("remapping the devices after growth", e))?;
            }
        }
        Ok(())
    }

    /// Makes every completed write on every device durable.
    pub fn sync(&self) -> Result<()> {
        for (file, path) in self.files.iter().zip(&self.paths) {
            file.sync_data().map_err(|e| Error::io(format!("syncing {}", path.display()), e))?;
        }
        Ok(())
    }

    /// The shared read-only mapping of the devices (for the mmap engine), created on first
    /// use; every engine opened on these devices shares it.
    pub fn mapping(&self) -> Result<Arc<Mapping>> {
        if let Some(mapping) = self.mapping.get() {
            return Ok(Arc::clone(mapping));
        }
        let mapping = Mapping::new(Arc::clone(&self.files))
            .map_err(|e| Error::io(format!("mapping {}", self.describe()), e))?;
        // Two threads may race here; the loser's mapping is dropped (unmapped) unused.
        let _ = self.mapping.set(Arc::new(mapping));
        Ok(Arc::clone(self.mapping.get().expect("set above")))
    }

    /// The device paths, for messages.
    pub fn describe(&self) -> String {
        let paths: Vec<String> = self.paths.iter().map(|p| p.display().to_string()).collect();
        paths.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    fn open(dir: &TempDir, n: usize, chunk_bytes: u64, grow_bytes: u64) -> Devices {
        let paths: Vec<PathBuf> = (0..n).map(|i| dir.path().join(format!("dev{i}"))).collect();
        let options = DeviceOptions { create: true, chunk_bytes, grow_bytes, ..Default::default() };
        Devices::open(&paths, &options).unwrap()
    }

    #[test]
    fn locate_stripes_chunks_round_robin() {
        let dir = TempDir::with_prefix("devices-locate").unwrap();
        let devices = open(&dir, 3, 8192, 8192);
        assert_eq!(devices.locate(0), (0, 0));
        assert_eq!(devices.locate(8191), (0, 8191));
        assert_eq!(devices.locate(8192), (1, 0));
        assert_eq!(devices.locate(2 * 8192 + 4096), (2, 4096));
        assert_eq!(devices.locate(3 * 8192), (0, 8192));
        assert_eq!(devices.locate(7 * 8192 + 1), (1, 2 * 8192 + 1));
        assert_eq!(devices.locate_range(4096, 4096).unwrap(), (0, 4096));
        let err = devices.locate_range(4096, 8192).unwrap_err();
        assert!(err.to_string().contains("crosses a 8192-byte stripe chunk"), "{err}");
        let single = open(&dir, 1, 8192, 8192);
        assert_eq!(single.locate_range(4096, 1 << 20).unwrap(), (0, 4096));
        assert_eq!(single.locate(123_456), (0, 123_456));
    }

    #[test]
    fn growth_is_per_device_in_steps_and_capacity_follows() {
        let dir = TempDir::with_prefix("devices-grow").unwrap();
        let devices = open(&dir, 3, 4096, 2 * 4096);
        assert_eq!(devices.capacity_bytes(), 0);
        // Logical chunks 0..4: devices 0, 1, 2, 0 → device 0 needs 2 chunks, 1 and 2 one each;
        // all round up to the 2-chunk step.
        devices.ensure_capacity(4 * 4096).unwrap();
        for i in 0..3 {
            assert_eq!(devices.size_bytes(i), 2 * 4096, "device {i}");
            let on_disk = std::fs::metadata(&devices.paths()[i]).unwrap().len();
            assert_eq!(on_disk, 2 * 4096);
        }
        assert_eq!(devices.capacity_bytes(), 6 * 4096);
        devices.ensure_capacity(6 * 4096).unwrap();
        assert_eq!(devices.size_bytes(0), 2 * 4096, "no growth when it fits");
        devices.ensure_capacity(6 * 4096 + 1).unwrap();
        assert_eq!(
            (0..3).map(|i| devices.size_bytes(i)).collect::<Vec<_>>(),
            [4 * 4096, 2 * 4096, 2 * 4096]
        );
        assert_eq!(devices.capacity_bytes(), 7 * 4096);
        devices.sync().unwrap();
    }

    #[test]
    fn bad_options_and_read_only_growth_are_refused() {
        let dir = TempDir::with_prefix("devices-options").unwrap();
        let path = vec![dir.path().join("d")];
        for bad in [
            DeviceOptions { chunk_bytes: 1000, ..Default::default() },
            DeviceOptions { grow_bytes: 4096, chunk_bytes: 8192, ..Default::default() },
        ] {
            let err = Devices::open(&path, &bad).unwrap_err();
            assert!(matches!(err, Error::BadOptions { .. }), "{err}");
        }
        assert!(matches!(
            Devices::open(&[], &DeviceOptions::default()),
            Err(Error::BadOptions { .. })
        ));
        let missing = Devices::open(&path, &DeviceOptions::default()).unwrap_err();
        assert!(missing.to_string().contains("opening"), "{missing}");
        std::fs::write(&path[0], vec![1u8; 8192]).unwrap();
        let read_only = Devices::open(
            &path,
            &DeviceOptions {
                writable: false,
                chunk_bytes: 4096,
                grow_bytes: 4096,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(read_only.capacity_bytes(), 8192);
        assert!(read_only.ensure_capacity(4096).is_ok());
        assert!(matches!(read_only.ensure_capacity(8193), Err(Error::ReadOnly)));
        // A file that ends inside a chunk holds what it holds.
        std::fs::write(&path[0], vec![1u8; 3 * 4096]).unwrap();
        let options = DeviceOptions {
            writable: false,
            chunk_bytes: 8192,
            grow_bytes: 8192,
            ..Default::default()
        };
        let partial = Devices::open(&path, &options).unwrap();
        assert_eq!(partial.capacity_bytes(), 3 * 4096);
    }

    fn read_only_direct() -> DeviceOptions {
        DeviceOptions { writable: false, direct: true, ..Default::default() }
    }

    /// The error of opening `path` alone with `options`, as text.
    fn open_error(path: &Path, options: &DeviceOptions) -> String {
        match Devices::open(&[path.to_owned()], options) {
            Ok(_) => panic!("{} opened", path.display()),
            Err(e) => e.to_string(),
        }
    }

    /// The O_DIRECT hint only when O_DIRECT is what the file system refuses; every other
    /// failure says what the path is or what the open found.
    #[test]
    fn open_errors_say_what_the_path_is() {
        let dir = TempDir::with_prefix("devices-open-errors").unwrap();
        let writable_direct = DeviceOptions::default();
        // A directory: EINVAL read-only with O_DIRECT, EISDIR writable.
        for options in [read_only_direct(), writable_direct.clone()] {
            let e = open_error(dir.path(), &options);
            assert!(e.contains("it is a directory, not a regular file"), "{e}");
            assert!(!e.contains("O_DIRECT"), "{e}");
        }
        let missing = dir.path().join("missing");
        for options in [read_only_direct(), writable_direct.clone()] {
            let e = open_error(&missing, &options);
            assert!(e.contains("No such file or directory") && !e.contains("O_DIRECT"), "{e}");
        }
        // A FIFO: refused at once (opening it read-only would wait for a writer).
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `name` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        for options in [read_only_direct(), writable_direct.clone()] {
            let e = open_error(&fifo, &options);
            assert!(e.contains("it is a FIFO (named pipe)") && !e.contains("O_DIRECT"), "{e}");
        }
        let e = open_error(Path::new("/dev/null"), &read_only_direct());
        assert!(e.contains("it is a character device") && !e.contains("O_DIRECT"), "{e}");
        // Permissions: root reads and writes anything, so only another user can see this.
        let locked = dir.path().join("locked");
        std::fs::write(&locked, vec![0u8; 4096]).unwrap();
        std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o000))
            .unwrap();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            eprintln!("skipping the permission case: running as root");
        } else {
            let e = open_error(&locked, &writable_direct);
            assert!(e.contains("Permission denied") && !e.contains("O_DIRECT"), "{e}");
        }
        // A regular file on a file system without O_DIRECT (procfs): the hint, and the same
        // file opens without direct I/O.
        let proc_file = Path::new("/proc/self/stat");
        if std::fs::metadata(proc_file).is_ok_and(|m| m.is_file()) {
            let e = open_error(proc_file, &read_only_direct());
            assert!(e.contains("the file system refuses O_DIRECT"), "{e}");
            let buffered = DeviceOptions { direct: false, ..read_only_direct() };
            // (It may still fail later, sizing a file whose end cannot be sought.)
            if let Err(e) = Devices::open(&[proc_file.to_owned()], &buffered) {
                assert!(!e.to_string().contains("opening"), "{e}");
            }
        } else {
            eprintln!("skipping the refused O_DIRECT case: no /proc");
        }
    }
}
