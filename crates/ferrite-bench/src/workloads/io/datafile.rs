//! The data file `bench io` reads and writes: created and filled with real data (not
//! preallocated space, which ext4 and others read back as zeros without touching the device),
//! reused when it is large enough, removed at the end unless `--keep`.
//!
//! Every 4 KiB block starts with [`MARKER`] and its block number, followed by incompressible
//! bytes; the write patterns write the same kind of blocks. A file is taken as the
//! benchmark's own, to extend, overwrite or remove, only if this run created it or its first
//! block carries the marker: pointing `--file` at someone else's file can read it, never
//! change or delete it. A block device is only ever read.

#![allow(unsafe_code)] // posix_fadvise

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ferrite::io::{AlignedBlock, IO_ALIGN};

use crate::error::BenchError;
use crate::gen::rng::mix64;
use crate::measure::progress::Progress;
use crate::workloads::datadir::{missing_parents, remove_created_parents};

/// The first bytes of every block of a data file.
pub const MARKER: &[u8; 32] = b"ferrite bench io data file v1\n\0\0";
const BLOCK: usize = IO_ALIGN;
/// Bytes written per call while filling.
const FILL_CHUNK: usize = 1 << 20;

/// A block of the data: the marker, the block number (little-endian), then bytes derived
/// from the seed-free mix of their position. The same for every file.
pub fn template() -> AlignedBlock {
    let mut buf = AlignedBlock::zeroed(BLOCK);
    let bytes = buf.as_mut_slice();
    bytes[..MARKER.len()].copy_from_slice(MARKER);
    for (i, word) in bytes[MARKER.len() + 8..].chunks_mut(8).enumerate() {
        let value = mix64(i as u64 + 1).to_le_bytes();
        word.copy_from_slice(&value[..word.len()]);
    }
    buf
}

/// Fills `blocks` (whole blocks) with the data of blocks `first_block..`.
pub fn fill_blocks(blocks: &mut [u8], template: &[u8], first_block: u64) {
    assert!(blocks.len() % BLOCK == 0 && template.len() == BLOCK);
    for (i, block) in blocks.chunks_exact_mut(BLOCK).enumerate() {
        block.copy_from_slice(template);
        let at = MARKER.len();
        block[at..at + 8].copy_from_slice(&(first_block + i as u64).to_le_bytes());
    }
}

fn io_error(context: String) -> impl FnOnce(io::Error) -> BenchError {
    move |source| BenchError::Io { context, source }
}

/// Whether the file at `path` starts with the marker.
pub fn carries_marker(path: &Path) -> bool {
    let mut head = [0u8; MARKER.len()];
    File::open(path).and_then(|mut f| f.read_exact(&mut head)).is_ok() && head == *MARKER
}

/// Drops the file's pages from the page cache (clean ones; dirty ones are written first by
/// the `sync_data` of whoever wrote them), so that a buffered or mmap run starts cold.
pub fn drop_cache(path: &Path) {
    if let Ok(file) = File::open(path) {
        // SAFETY: advice on an open descriptor; it changes no data. Failure only leaves
        // pages cached, which the summary's numbers would show.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
}

/// How the data file came to be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Origin {
    /// Created by this run and filled in `seconds`.
    Created { seconds: f64 },
    /// Existed, carried the marker, and was extended by `bytes` in `seconds`.
    Extended { bytes: u64, seconds: f64 },
    /// Existed, large enough.
    Reused,
    /// A block device, only read.
    BlockDevice,
}

/// What became of the data file at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileFate {
    Kept,
    Removed,
    Left(String),
}

/// The data file of a run.
#[derive(Debug)]
pub struct DataFile {
    pub path: PathBuf,
    /// Bytes the file (or device) holds.
    pub size_bytes: u64,
    pub origin: Origin,
    /// Created by this run or carrying the marker: ours to overwrite and remove.
    pub ours: bool,
    /// Parent directories this run created, innermost first.
    created_parents: Vec<PathBuf>,
}

impl DataFile {
    /// Makes sure `path` holds at least `wanted_bytes` of data (a multiple of 4 KiB) that
    /// the run may use; `write` says whether the pattern writes.
    pub fn prepare(
        path: &Path,
        wanted_bytes: u64,
        write: bool,
        direct: bool,
        show_progress: bool,
    ) -> Result<DataFile, BenchError> {
        assert!(wanted_bytes > 0 && wanted_bytes % BLOCK as u64 == 0);
        let shown = path.display();
        let mut created_parents = Vec::new();
        let (existing, block_device) = match fs::metadata(path) {
            Ok(m) if m.file_type().is_block_device() => (true, true),
            Ok(m) if m.is_file() => (true, false),
            Ok(_) => {
                return Err(BenchError::Config(format!(
                    "{shown} is neither a regular file nor a block device"
                )))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => (false, false),
            Err(e) => return Err(io_error(format!("inspecting {shown}"))(e)),
        };
        if block_device {
            if write {
                return Err(BenchError::Config(format!(
                    "{shown} is a block device: bench io only reads block devices (use a read \
                     pattern)"
                )));
            }
            let size_bytes = device_size(path)?;
            return Ok(DataFile {
                path: path.to_owned(),
                size_bytes,
                origin: Origin::BlockDevice,
                ours: false,
                created_parents,
            });
        }
        if !existing {
            created_parents = missing_parents(path);
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                fs::create_dir_all(dir).map_err(io_error(format!("creating {}", dir.display())))?;
            }
        }
        let ours = !existing || carries_marker(path);
        let size_bytes =
            if existing { fs::metadata(path).map(|m| m.len()).unwrap_or(0) } else { 0 };
        let mut file = DataFile {
            path: path.to_owned(),
            size_bytes,
            origin: Origin::Reused,
            ours,
            created_parents,
        };
        if !ours && (write || size_bytes < wanted_bytes) {
            let why = if write { "overwrite" } else { "extend" };
            return Err(BenchError::Config(format!(
                "{shown} exists and is not a bench io data file: refusing to {why} it (remove \
                 it, or point --file elsewhere{})",
                if write { "" } else { ", or lower --size-mib to its size" }
            )));
        }
        if size_bytes < wanted_bytes {
            // Extend from the last whole block (a torn tail from an interrupted fill is
            // rewritten).
            let from = size_bytes / BLOCK as u64 * BLOCK as u64;
            let start = Instant::now();
            file.fill(from, wanted_bytes, direct, show_progress)?;
            let seconds = start.elapsed().as_secs_f64();
            file.origin = if existing {
                Origin::Extended { bytes: wanted_bytes - from, seconds }
            } else {
                Origin::Created { seconds }
            };
            file.size_bytes = wanted_bytes;
        }
        Ok(file)
    }

    /// Writes the data of bytes `from..to` (whole blocks), then makes it durable and drops
    /// it from the cache.
    fn fill(
        &self,
        from: u64,
        to: u64,
        direct: bool,
        show_progress: bool,
    ) -> Result<(), BenchError> {
        let shown = self.path.display();
        let mut options = OpenOptions::new();
        options.write(true).create(true);
        if direct {
            options.custom_flags(libc::O_DIRECT);
        }
        let out = options.open(&self.path).map_err(io_error(format!("opening {shown}")))?;
        let template = template();
        let mut chunk = AlignedBlock::zeroed(FILL_CHUNK);
        let total_mib = (to - from).div_ceil(1 << 20);
        let mut progress = if show_progress {
            Progress::stderr("filling the data file", "MiB", total_mib)
        } else {
            Progress::hidden(total_mib)
        };
        let mut offset = from;
        while offset < to {
            let len = (to - offset).min(FILL_CHUNK as u64) as usize;
            let bytes = &mut chunk.as_mut_slice()[..len];
            fill_blocks(bytes, template.as_slice(), offset / BLOCK as u64);
            out.write_all_at(bytes, offset)
                .map_err(io_error(format!("filling {shown} at byte {offset}")))?;
            offset += len as u64;
            progress.set((offset - from) >> 20);
        }
        out.sync_data().map_err(io_error(format!("syncing {shown}")))?;
        progress.finish();
        drop_cache(&self.path);
        Ok(())
    }

    /// Writes block 0 again (after fio wrote its own data over it), so that the file stays
    /// recognisably the benchmark's.
    pub fn restamp(&self) -> Result<(), BenchError> {
        if !self.ours {
            return Ok(());
        }
        let shown = self.path.display();
        let file = OpenOptions::new()
            .write(true)
            .open(&self.path)
            .map_err(io_error(format!("opening {shown}")))?;
        let mut block = template();
        fill_blocks(block.as_mut_slice(), template().as_slice(), 0);
        file.write_all_at(block.as_slice(), 0)
            .and_then(|()| file.sync_data())
            .map_err(io_error(format!("rewriting the first block of {shown}")))
    }

    /// Removes the file (and the directories this run created, if empty) unless `keep`,
    /// when it is the benchmark's.
    pub fn finish(self, keep: bool) -> FileFate {
        if self.origin == Origin::BlockDevice {
            return FileFate::Left("a block device".into());
        }
        if keep {
            return FileFate::Kept;
        }
        if !self.ours || !carries_marker(&self.path) {
            return FileFate::Left("it is not a bench io data file".into());
        }
        if let Err(e) = fs::remove_file(&self.path) {
            return FileFate::Left(format!("removing it failed: {e}"));
        }
        remove_created_parents(&self.created_parents);
        FileFate::Removed
    }
}

/// The size of a block device (or any file), by seeking to its end.
fn device_size(path: &Path) -> Result<u64, BenchError> {
    use std::io::{Seek, SeekFrom};
    let mut file = File::open(path).map_err(io_error(format!("opening {}", path.display())))?;
    file.seek(SeekFrom::End(0)).map_err(io_error(format!("sizing {}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    #[test]
    fn blocks_carry_the_marker_and_their_number() {
        let template = template();
        let mut blocks = vec![0u8; 3 * BLOCK];
        fill_blocks(&mut blocks, template.as_slice(), 41);
        for (i, block) in blocks.chunks(BLOCK).enumerate() {
            assert_eq!(&block[..32], MARKER);
            assert_eq!(u64::from_le_bytes(block[32..40].try_into().unwrap()), 41 + i as u64);
            assert_eq!(block[40..], template.as_slice()[40..]);
        }
        assert!(template.as_slice()[40..].iter().filter(|&&b| b == 0).count() < 100);
    }

    #[test]
    fn created_extended_reused_and_removed_with_the_parents_it_made() {
        let tmp = TempDir::new().unwrap();
        let path = tmp.path().join("a/b/data.dat");
        let file = DataFile::prepare(&path, 8 * BLOCK as u64, false, true, false).unwrap();
        assert!(matches!(file.origin, Origin::Created { .. }) && file.ours);
        assert_eq!(fs::metadata(&path).unwrap().len(), 8 * BLOCK as u64);
        assert!(carries_marker(&path));
        assert_eq!(file.finish(true), FileFate::Kept);
        let file = DataFile::prepare(&path, 8 * BLOCK as u64, true, true, false).unwrap();
        assert_eq!(file.origin, Origin::Reused);
        // Someone tore the tail: extension rewrites the last partial block.
        let raw = OpenOptions::new().write(true).open(&path).unwrap();
        raw.set_len(8 * BLOCK as u64 + 100).unwrap();
        let file = DataFile::prepare(&path, 12 * BLOCK as u64, false, false, false).unwrap();
        assert!(
            matches!(file.origin, Origin::Extended { bytes, .. } if bytes == 4 * BLOCK as u64),
            "{:?}",
            file.origin
        );
        let data = fs::read(&path).unwrap();
        assert_eq!(data.len(), 12 * BLOCK);
        assert_eq!(u64::from_le_bytes(data[8 * BLOCK + 32..8 * BLOCK + 40].try_into().unwrap()), 8);
        file.restamp().unwrap();
        // A new prepare of a file that exists does not own its parents; this one removes only
        // the file. The first one would have removed a/ and a/b/ too.
        assert_eq!(file.finish(false), FileFate::Removed);
        assert!(!path.exists() && tmp.path().join("a/b").exists());
    }

    #[test]
    fn other_files_are_read_but_never_changed_or_removed() {
        let tmp = TempDir::new().unwrap();
        let path = tmp.path().join("precious");
        fs::write(&path, vec![7u8; 4 * BLOCK]).unwrap();
        let read = DataFile::prepare(&path, 4 * BLOCK as u64, false, false, false).unwrap();
        assert!(!read.ours);
        assert!(matches!(read.finish(false), FileFate::Left(_)));
        for (wanted, write) in [(4, true), (8, false)] {
            let err =
                DataFile::prepare(&path, wanted * BLOCK as u64, write, false, false).unwrap_err();
            assert!(err.to_string().contains("not a bench io data file"), "{err}");
        }
        assert_eq!(fs::read(&path).unwrap(), vec![7u8; 4 * BLOCK]);
        let dir = DataFile::prepare(tmp.path(), 4096, false, false, false).unwrap_err();
        assert!(dir.to_string().contains("neither a regular file"), "{dir}");
    }
}
