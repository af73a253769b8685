//! Device counters from `/proc/diskstats` for the block device that holds a path, so that a
//! run can report device reads, writes and cache flushes per operation whatever the store
//! (peers do not count their I/O the way Ferrite's pool does, and the page cache hides some of
//! it). A flush is what an `fsync`/`fdatasync` sends a device with a volatile write cache, so
//! flushes per operation show how many commits share a sync.
//!
//! A line of `/proc/diskstats` (the kernel's `Documentation/admin-guide/iostats.rst`), as
//! whitespace-separated columns:
//!
//! | column | meaning                                        |
//! |--------|------------------------------------------------|
//! | 0, 1   | major, minor device number                     |
//! | 2      | device name                                    |
//! | 3      | reads completed                                |
//! | 5      | sectors read (512 bytes)                       |
//! | 7      | writes completed                               |
//! | 9      | sectors written (512 bytes)                    |
//! | 18     | flush requests completed (kernels from 5.5 on) |

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Cumulative counters of one block device (or, from `since`, their growth over a window).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskCounters {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub written_bytes: u64,
    /// Cache flushes completed; `None` where the kernel does not count them (before 5.5).
    pub flushes: Option<u64>,
}

impl DiskCounters {
    /// KiB the device read per read it completed (sectors read over reads completed): about 4
    /// for a store that reads one 4 KiB block at a time, more where reads are merged or a
    /// store reads larger blocks. 0 when it completed no read.
    pub fn read_kib_per_read(&self) -> f64 {
        if self.reads == 0 {
            return 0.0;
        }
        self.read_bytes as f64 / self.reads as f64 / 1024.0
    }

    /// Bytes the device read per read it completed (sectors read × 512 over reads completed),
    /// rounded: 4096 for a store that reads one 4 KiB block at a time. 0 when it completed no
    /// read.
    pub fn bytes_per_read(&self) -> u64 {
        match self.reads {
            0 => 0,
            reads => (self.read_bytes as f64 / reads as f64).round() as u64,
        }
    }

    pub fn since(self, earlier: DiskCounters) -> DiskCounters {
        DiskCounters {
            reads: self.reads.saturating_sub(earlier.reads),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            writes: self.writes.saturating_sub(earlier.writes),
            written_bytes: self.written_bytes.saturating_sub(earlier.written_bytes),
            flushes: self.flushes.zip(earlier.flushes).map(|(now, then)| now.saturating_sub(then)),
        }
    }
}

/// The device holding `path`, named as in `/proc/diskstats`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    pub name: String,
    major: u64,
    minor: u64,
}

impl Disk {
    /// The block device of the file system holding `path`, if `/proc/diskstats` lists it.
    pub fn of(path: &Path) -> Option<Disk> {
        let dev = fs::metadata(path).ok()?.dev();
        let (major, minor) = (libc_major(dev), libc_minor(dev));
        let text = fs::read_to_string("/proc/diskstats").ok()?;
        text.lines().find_map(|line| {
            let (m, n, name, _) = parse_line(line)?;
            (m == major && n == minor).then(|| Disk { name: name.to_owned(), major, minor })
        })
    }

    /// Its counters now.
    pub fn counters(&self) -> Option<DiskCounters> {
        let text = fs::read_to_string("/proc/diskstats").ok()?;
        text.lines().find_map(|line| {
            let (m, n, _, counters) = parse_line(line)?;
            (m == self.major && n == self.minor).then_some(counters)
        })
    }
}

fn libc_major(dev: u64) -> u64 {
    ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff)
}

fn libc_minor(dev: u64) -> u64 {
    ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff)
}

/// `major minor name reads merged sectors ms writes merged sectors ms ...` (the table above).
fn parse_line(line: &str) -> Option<(u64, u64, &str, DiskCounters)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 10 {
        return None;
    }
    let n = |i: usize| fields[i].parse::<u64>().ok();
    let counters = DiskCounters {
        reads: n(3)?,
        read_bytes: n(5)? * 512,
        writes: n(7)?,
        written_bytes: n(9)? * 512,
        flushes: fields.get(18).and_then(|f| f.parse::<u64>().ok()),
    };
    Some((n(0)?, n(1)?, fields[2], counters))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_diskstats_line() {
        let line = " 253       0 vda 1234 5 8000 100 77 3 1600 50 0 120 150 0 0 0 0";
        let (major, minor, name, c) = parse_line(line).unwrap();
        assert_eq!((major, minor, name), (253, 0, "vda"));
        assert_eq!(
            c,
            DiskCounters {
                reads: 1234,
                read_bytes: 8000 * 512,
                writes: 77,
                written_bytes: 1600 * 512,
                flushes: None,
            }
        );
        assert!(parse_line("garbage").is_none());
        // Kernels from 5.5 on add flush requests (column 18) and the time they took.
        let line = " 254 0 vda 23 1 2182 30 19 2 2878 69 0 58 31 4082 64 5019 51 112476 7347";
        let (_, _, name, c) = parse_line(line).unwrap();
        assert_eq!((name, c.writes, c.flushes), ("vda", 19, Some(112_476)));
        let earlier = DiskCounters { flushes: Some(112_000), ..c };
        assert_eq!(c.since(earlier).flushes, Some(476));
        assert_eq!(c.since(DiskCounters::default()).flushes, None);
    }

    #[test]
    fn read_size_is_bytes_read_over_reads_completed() {
        let line = " 254 0 vda 1000 0 8000 0 0 0 0 0 0 0 0";
        let (_, _, _, c) = parse_line(line).unwrap();
        // 8000 sectors of 512 bytes in 1000 reads: 4 KiB each.
        assert_eq!(c.read_kib_per_read(), 4.0);
        assert_eq!(c.bytes_per_read(), 4096);
        let merged = DiskCounters { reads: 100, read_bytes: 100 * 70 * 1024, ..c };
        assert_eq!(merged.read_kib_per_read(), 70.0);
        assert_eq!(merged.bytes_per_read(), 70 * 1024);
        assert_eq!(
            DiskCounters { reads: 3, read_bytes: 3 * 512 + 1024, ..c }.bytes_per_read(),
            853
        );
        assert_eq!(DiskCounters::default().read_kib_per_read(), 0.0, "no reads, no size");
        assert_eq!(DiskCounters::default().bytes_per_read(), 0, "no reads, no size");
    }

    #[test]
    fn finds_the_device_of_the_temporary_directory_when_there_is_one() {
        // Containers may hide the device (overlay file systems): then there is none, and
        // reports say so instead of printing zeros.
        if let Some(disk) = Disk::of(&std::env::temp_dir()) {
            let before = disk.counters().unwrap();
            let after = disk.counters().unwrap();
            assert!(after.reads >= before.reads, "{}", disk.name);
        }
    }
}
