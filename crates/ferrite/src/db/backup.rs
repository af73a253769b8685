//! Online backups (`Db::backup`): a copy of the data directory taken while commits go on,
//! which opens as the database was at one moment (every commit durable when the copy of the
//! log ended, and nothing after).
//!
//! The copy is a crash image made on purpose, and recovery is what makes it whole:
//!
//! 1. a checkpoint, then checkpoints held off (the checkpoint lock) until the end, so that
//!    the superblock keeps naming it and no log segment after its redo LSN is reused;
//! 2. the page file copied as it is, while pages are written back beside the copy: a page
//!    may be copied torn or old, and every page written since the checkpoint has a full
//!    image in the log after its redo LSN (the write-back rule), from which recovery
//!    repairs it;
//! 3. the log made durable up to its tail and its flushes held off (commits that wait for
//!    the log wait), so that every page copied has an LSN below the log's durable end; the
//!    segments holding the log from the checkpoint on are copied, then flushes go on;
//! 4. object data, which the log does not hold, copied again where a commit may have put
//!    it during the copy: every run allocated since step 1 began, and every run pending
//!    then. Runs freed meanwhile are not written again until the backup ends (the backup
//!    pins an epoch as a reader of extent maps does), so what the copy's maps point at is
//!    still there.
//!
//! Opening the copy recovers it: it replays the log from the checkpoint to the end copied.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{Db, PAGE_FILE_NAME};
use crate::error::{Error, Result};
use crate::format::page::PAGE_SIZE;
use crate::wal::segment::LOG_DIR_NAME;

/// What [`Db::backup`] copied.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct BackupReport {
    /// Bytes of the page file copied.
    pub page_file_bytes: u64,
    /// Bytes of log segment files copied.
    pub log_bytes: u64,
    /// Runs of object data copied again after the log (written during the copy).
    pub data_runs: u64,
    /// How far the log was durable when its copy was taken: the copy holds every commit
    /// below it.
    pub log_end: u64,
    /// Time taken, in seconds.
    pub seconds: f64,
}

impl Db {
    /// Copies the database into the new directory `target` while it stays open for reads
    /// and writes: the copy holds every commit made before the call and opens as the
    /// database was at one moment during it (its own recovery replays the log copied with
    /// it). `target` must not exist, or be an empty directory; on an error it is removed.
    ///
    /// Commits go on during the copy, but those that wait for the log wait while the log's
    /// segments are copied (the log written since the backup began), and no checkpoint runs
    /// until the backup ends. A database on striped devices or a simulated disk cannot be
    /// backed up this way ([`Error::NotSupported`]); nor can one from inside a task (it
    /// blocks).
    pub fn backup(&self, target: impl AsRef<Path>) -> Result<BackupReport> {
        self.backup_with_progress(target, |_, _| {})
    }

    /// [`Db::backup`], calling `progress(copied, total)` with the bytes of the page file
    /// copied so far, every 64 MiB and at the end (for a progress bar).
    pub fn backup_with_progress(
        &self,
        target: impl AsRef<Path>,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<BackupReport> {
        let target = target.as_ref();
        let shared = &self.shared;
        shared.check_open()?;
        if crate::sched::on_worker() {
            return Err(Error::BlockingWriteInTask);
        }
        let source = shared.dir.join(PAGE_FILE_NAME);
        let simulated = shared.pool.file().devices().is_none();
        if simulated || shared.dir.join(super::DEVICES_FILE_NAME).exists() || !source.is_file() {
            return Err(Error::NotSupported {
                reason: "a backup copies a data directory whose pages are in its own page \
                         file; copy the devices of a striped database while it is closed"
                    .into(),
            });
        }
        claim(target)?;
        let copied = self.copy_into(&source, target, &mut progress);
        if copied.is_err() {
            let _ = fs::remove_dir_all(target);
        }
        copied
    }

    fn copy_into(
        &self,
        source: &Path,
        target: &Path,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<BackupReport> {
        let shared = &self.shared;
        let start = Instant::now();
        let mut report = BackupReport::default();
        let log_dir = target.join(LOG_DIR_NAME);
        fs::create_dir(&log_dir)
            .map_err(|e| Error::io(format!("creating {}", log_dir.display()), e))?;
        let copy = target.join(PAGE_FILE_NAME);
        let Some(log) = &shared.log else {
            // Read-only: nothing changes the files while they are copied.
            report.page_file_bytes = copy_pages(source, &copy, progress)?;
            for name in list_segments(&shared.dir)? {
                report.log_bytes += copy_file(&shared.dir.join(&name), &target.join(&name))?;
            }
            sync_dir(target)?;
            report.seconds = start.elapsed().as_secs_f64();
            return Ok(report);
        };
        // 1. A checkpoint, and no other until the end.
        let _checkpoints = shared.checkpoint_lock.lock().unwrap();
        shared.checkpoint_held()?;
        let epoch = shared.object_space.begin_backup();
        let body = (|| {
            // 2. The page file, as it is.
            report.page_file_bytes = copy_pages(source, &copy, progress)?;
            // 3. The log, durable past every page copied, its files still.
            let (log_end, segments) = log.hold_flushes()?;
            let copied_log = (|| {
                let mut bytes = 0;
                for name in &segments {
                    bytes += copy_file(&shared.dir.join(name), &target.join(name))?;
                }
                // Pages allocated since the copy began lie past its end: the copy is as long
                // as the page file is now (recovery writes them from the log).
                let len = file_len(source)?;
                let file = open_rw(&copy)?;
                if file_len(&copy)? < len {
                    file.set_len(len)
                        .map_err(|e| Error::io(format!("growing {}", copy.display()), e))?;
                }
                Ok::<_, Error>(bytes)
            })();
            log.release_flushes();
            report.log_bytes = copied_log?;
            report.log_end = log_end;
            Ok::<_, Error>(())
        })();
        // 4. Object data written during the copy.
        let runs = shared.object_space.end_backup(epoch);
        body?;
        report.data_runs = runs.len() as u64;
        copy_runs(source, &copy, &runs)?;
        sync_dir(target)?;
        report.seconds = start.elapsed().as_secs_f64();
        Ok(report)
    }
}

/// Makes `target` a new, empty directory (an empty one is taken as it is).
fn claim(target: &Path) -> Result<()> {
    match fs::create_dir(target) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let empty = fs::read_dir(target).map(|mut d| d.next().is_none()).unwrap_or(false);
            match empty && target.is_dir() {
                true => Ok(()),
                false => Err(Error::NotSupported {
                    reason: format!(
                        "backing up into {}: it exists and is not an empty directory",
                        target.display()
                    ),
                }),
            }
        }
        Err(e) => Err(Error::io(format!("creating {}", target.display()), e)),
    }
}

/// The log's segment files in `dir`, as names relative to it.
fn list_segments(dir: &Path) -> Result<Vec<String>> {
    let log_dir = dir.join(LOG_DIR_NAME);
    let entries = match fs::read_dir(&log_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("listing {}", log_dir.display()), e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("listing {}", log_dir.display()), e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if crate::wal::segment::slot_of_name(&name).is_some() {
            names.push(format!("{LOG_DIR_NAME}/{name}"));
        }
    }
    names.sort();
    Ok(names)
}

/// Copies file `from` to `to` (made anew) and syncs it; returns the bytes copied.
fn copy_file(from: &Path, to: &Path) -> Result<u64> {
    // `copy_file_range` underneath: in the kernel, and sparse where the file is.
    let bytes = fs::copy(from, to)
        .map_err(|e| Error::io(format!("copying {} to {}", from.display(), to.display()), e))?;
    open_rw(to)?.sync_all().map_err(|e| Error::io(format!("syncing {}", to.display()), e))?;
    Ok(bytes)
}

/// Copies page file `from` to `to` (made anew) a piece at a time, calling `progress`, and
/// syncs it; returns the bytes copied.
fn copy_pages(from: &Path, to: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<u64> {
    const PIECE: u64 = 64 << 20;
    let fail = |what: &str, path: &Path, e| Error::io(format!("{what} {}", path.display()), e);
    let source = fs::File::open(from).map_err(|e| fail("opening", from, e))?;
    let total = source.metadata().map_err(|e| fail("reading", from, e))?.len();
    let mut copy = fs::File::create(to).map_err(|e| fail("creating", to, e))?;
    let mut done = 0;
    progress(0, total);
    loop {
        // `copy_file_range` underneath (std's `io::copy` between files).
        let n = io::copy(&mut (&source).take(PIECE), &mut copy)
            .map_err(|e| Error::io(format!("copying {} to {}", from.display(), to.display()), e))?;
        if n == 0 {
            break;
        }
        done += n;
        progress(done, total.max(done));
    }
    copy.sync_all().map_err(|e| fail("syncing", to, e))?;
    Ok(done)
}

/// Copies the pages of `runs` from page file `from` into page file `to`, in place, and
/// syncs it.
fn copy_runs(from: &Path, to: &Path, runs: &[(u64, u64)]) -> Result<()> {
    if runs.is_empty() {
        return Ok(());
    }
    let source =
        fs::File::open(from).map_err(|e| Error::io(format!("opening {}", from.display()), e))?;
    let copy = open_rw(to)?;
    let mut buf = vec![0u8; 64 * PAGE_SIZE];
    for &(first, pages) in runs {
        let (mut at, end) = (first * PAGE_SIZE as u64, (first + pages) * PAGE_SIZE as u64);
        while at < end {
            let n = ((end - at) as usize).min(buf.len());
            source
                .read_exact_at(&mut buf[..n], at)
                .map_err(|e| Error::io(format!("reading {} at {at}", from.display()), e))?;
            copy.write_all_at(&buf[..n], at)
                .map_err(|e| Error::io(format!("writing {} at {at}", to.display()), e))?;
            at += n as u64;
        }
    }
    copy.sync_all().map_err(|e| Error::io(format!("syncing {}", to.display()), e))
}

fn open_rw(path: &Path) -> Result<fs::File> {
    fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))
}

fn file_len(path: &Path) -> Result<u64> {
    fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))
}

/// Syncs directory `dir` and its log directory (the names of the files made in them).
fn sync_dir(dir: &Path) -> Result<()> {
    for path in [dir.join(LOG_DIR_NAME), dir.to_path_buf(), parent_of(dir)] {
        fs::File::open(&path)
            .and_then(|f| f.sync_all())
            .map_err(|e| Error::io(format!("syncing {}", path.display()), e))?;
    }
    Ok(())
}

fn parent_of(dir: &Path) -> PathBuf {
    match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
