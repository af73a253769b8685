//! `ferrite backup` and `ferrite compact`: whole-directory work that never changes the source
//! until a verified replacement is ready.
//!
//! Both hold the source open read-only: readers share it, no writer can open it meanwhile,
//! and nothing in it changes (a directory not closed cleanly is recovered in memory). So its
//! files are one consistent state for as long as the command runs.
//! - `backup` runs the engine's backup (`Db::backup`, which also copies a database open for
//!   writing in a process of the library's own) into a new directory: the page file and the
//!   log segments a recovery needs, synced; then it checks the copy as `ferrite check` does.
//! - `compact` copies every entry, in key order, into a fresh directory beside the source
//!   (full leaves, no free pages), checks it, and swaps the two directories with one
//!   `renameat2(RENAME_EXCHANGE)`: a crash leaves the old or the new data at the path,
//!   whole, never a mix. Then it deletes the old.
//!
//! On any failure (a full disk, say) the partial target is removed and the source is as it
//! was.

// renameat2 (RENAME_EXCHANGE): std has no atomic swap of two directories.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use ferrite::{Db, Durability, WriteBatch};
use ferrite_bench::report::bytes;
use ferrite_bench::workloads::run::bytes_on_disk;
use ferrite_bench::Progress;

use crate::cli::{BackupArgs, CompactArgs, DbArgs};
use crate::common::{max_batch_entries, open, options, Access, CliError, Outcome, BATCH_BYTES};

/// Copies of this many bytes or more show their progress.
const PROGRESS_BYTES: u64 = 256 << 20;

pub fn backup(args: &BackupArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let source = open_source(&args.db, "backup")?;
    let target = &args.to;
    claim_new_dir(target, "backup")?;
    let mut progress: Option<Progress> = None;
    let shown = |done: u64, total: u64, progress: &mut Option<Progress>| {
        let bar = progress.get_or_insert_with(|| match total >= PROGRESS_BYTES {
            true => Progress::stderr("copying", "bytes", total),
            false => Progress::hidden(total),
        });
        bar.set(done);
    };
    // The engine's online backup (on this read-only open, a copy of files nothing changes).
    let copied = source
        .backup_with_progress(target, |done, total| shown(done, total, &mut progress))
        .map_err(CliError::from)
        .and_then(|report| {
            if let Some(mut bar) = progress.take() {
                bar.finish();
            }
            let checked = verify(target, &args.db)?;
            Ok((report.page_file_bytes + report.log_bytes, checked))
        });
    drop(source);
    match copied {
        Ok((size, entries)) => {
            writeln!(
                out,
                "backed up {} to {}: {} of files, {} entries, checked: no faults",
                args.db.dir.display(),
                target.display(),
                bytes(size),
                entries
            )?;
            out.flush()?;
            Ok(Outcome::Done)
        }
        Err(e) => Err(remove_partial(target, "backup", e)),
    }
}

pub fn compact(args: &CompactArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let source = open_source(&args.db, "compact")?;
    if let Some(name) = &args.tree {
        // Every tree is rewritten (they share the page file), but a name that is not there
        // is a mistake worth stopping for.
        source.open_tree(name)?;
    }
    let dir = &args.db.dir;
    let name = dir.file_name().ok_or_else(|| {
        CliError::Refused(format!("compact: {} names no directory", dir.display()))
    })?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let mut fresh_name = std::ffi::OsString::from(".");
    fresh_name.push(name);
    fresh_name.push(format!(".compacting-{}", std::process::id()));
    let fresh = parent.join(fresh_name);
    claim_new_dir(&fresh, "compact")?;
    let before = bytes_on_disk(dir);
    let rebuilt = rebuild(&source, &fresh, &args.db).and_then(|entries| {
        verify(&fresh, &args.db)?;
        sync_tree(&fresh)?;
        Ok(entries)
    });
    let entries = match rebuilt {
        Ok(entries) => entries,
        Err(e) => {
            drop(source);
            return Err(remove_partial(&fresh, "compact", e));
        }
    };
    // The swap happens while the source is still held: no writer can open either meanwhile.
    let after = bytes_on_disk(&fresh);
    if let Err(e) = exchange(dir, &fresh) {
        drop(source);
        return Err(remove_partial(&fresh, "compact", e));
    }
    drop(source);
    // `fresh` now holds the old data.
    let removed = fs::remove_dir_all(&fresh);
    writeln!(
        out,
        "compacted {}: {} -> {} on disk, {} entries rewritten in key order",
        dir.display(),
        bytes(before),
        bytes(after),
        entries
    )?;
    if let Err(e) = removed {
        writeln!(
            out,
            "the old files are left in {} (removing them failed: {e}); delete them",
            fresh.display()
        )?;
    }
    out.flush()?;
    Ok(Outcome::Done)
}

/// Opens the source read-only, refusing a directory whose pages live on other devices (its
/// files are not all in the directory).
fn open_source(db: &DbArgs, command: &str) -> Result<Db, CliError> {
    if db.dir.join(ferrite::DEVICES_FILE_NAME).exists() {
        return Err(CliError::Refused(format!(
            "{command}: {} keeps its pages on other devices ({}): copy those with their own tools",
            db.dir.display(),
            ferrite::DEVICES_FILE_NAME
        )));
    }
    Ok(open(db, Access::ReadOnly)?)
}

/// Creates `dir`, which must not exist (an empty directory is taken as it is).
fn claim_new_dir(dir: &Path, command: &str) -> Result<(), CliError> {
    match fs::read_dir(dir).map(|mut entries| entries.next().is_some()) {
        Ok(true) => Err(CliError::Refused(format!(
            "{command}: {} exists and is not empty: give a new directory",
            dir.display()
        ))),
        Ok(false) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(|e| io_error("creating", dir, e))
        }
        Err(e) => Err(io_error("reading", dir, e)),
    }
}

/// fsyncs every file and directory under `dir`, and `dir` itself.
fn sync_tree(dir: &Path) -> Result<(), CliError> {
    for entry in fs::read_dir(dir).map_err(|e| io_error("reading", dir, e))? {
        let path = entry.map_err(|e| io_error("reading", dir, e))?.path();
        if path.is_dir() {
            sync_tree(&path)?;
        } else {
            fs::File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(|e| io_error("syncing", &path, e))?;
        }
    }
    fs::File::open(dir).and_then(|f| f.sync_all()).map_err(|e| io_error("syncing", dir, e))
}

/// Copies every entry of every tree of `source` into a new database at `fresh`, in key
/// order, closes it cleanly (a checkpoint: every page written and synced), and cuts its
/// page file after its last page. Returns the entries copied.
fn rebuild(source: &Db, fresh: &Path, db: &DbArgs) -> Result<u64, CliError> {
    let names = source.tree_names()?;
    // Small log segments and frequent checkpoints: the copy's log is a few MiB when it is
    // done, not the hundreds a load of the whole data would leave preallocated.
    let options = ferrite::Options {
        durability: Durability::None,
        log_segment_bytes: 4 << 20,
        checkpoint_log_bytes: Some(16 << 20),
        ..options(db, Access::Create)
    };
    let target = Db::open(fresh, options)?;
    let max_entries = max_batch_entries(db);
    let mut copied = 0u64;
    let result = (|| -> Result<(), CliError> {
        for name in &names {
            let (from, to) = (source.open_tree(name)?, target.tree(name)?);
            let mut batch = WriteBatch::new();
            let (mut entries, mut bytes) = (0usize, 0usize);
            for entry in from.iter() {
                let (key, value) = entry?;
                if entries >= max_entries || bytes + key.len() + value.len() > BATCH_BYTES {
                    target.write(&std::mem::take(&mut batch))?;
                    (entries, bytes) = (0, 0);
                }
                (entries, bytes) = (entries + 1, bytes + key.len() + value.len());
                batch.put(&to, &key, &value);
                copied += 1;
            }
            if entries > 0 {
                target.write(&batch)?;
            }
        }
        Ok(())
    })();
    let pages = target.stats().map(|stats| stats.pool.page_count);
    let closed = target.close();
    result?;
    closed?;
    // The page file grows in large preallocated steps; past its last page (pages are
    // numbered from 0) the copy needs nothing until it grows again.
    let pages = pages?;
    let page_file = fresh.join(ferrite::PAGE_FILE_NAME);
    fs::OpenOptions::new()
        .write(true)
        .open(&page_file)
        .and_then(|file| file.set_len(pages * 4096))
        .map_err(|e| io_error("trimming", &page_file, e))?;
    Ok(copied)
}

/// Opens `dir` read-only and checks it as `ferrite check` does; returns its entries.
fn verify(dir: &Path, db: &DbArgs) -> Result<u64, CliError> {
    let copy = DbArgs { dir: dir.to_owned(), ..db.clone() };
    let copy = open(&copy, Access::ReadOnly)?;
    let report = copy.check();
    // The users' trees (the report also walks Ferrite's own, such as the objects' tree).
    let names = copy.tree_names();
    copy.close()?;
    let (report, names) = (report?, names?);
    let faults = report.all_faults();
    if !faults.is_empty() {
        return Err(CliError::Refused(format!(
            "the copy in {} does not check clean ({} faults, the first: {})",
            dir.display(),
            faults.len(),
            faults[0]
        )));
    }
    let users = report.trees.iter().filter(|(name, _)| names.contains(name));
    Ok(users.map(|(_, tree)| tree.keys + tree.buffered).sum())
}

/// Swaps the directories at `a` and `b` in one step (both must exist, on one file system).
fn exchange(a: &Path, b: &Path) -> Result<(), CliError> {
    let path = |p: &Path| CString::new(p.as_os_str().as_bytes()).expect("a path has no NUL");
    let (ca, cb) = (path(a), path(b));
    // SAFETY: two valid NUL-terminated paths, relative to the working directory.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(CliError::Refused(format!(
            "swapping {} with the compacted copy {}: {e}",
            a.display(),
            b.display()
        )));
    }
    let parent = a.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::File::open(parent).and_then(|f| f.sync_all()).map_err(|e| io_error("syncing", parent, e))
}

/// Removes the partial `dir` a failed `command` left, and says so with the error.
fn remove_partial(dir: &Path, command: &str, error: CliError) -> CliError {
    let cleanup = match fs::remove_dir_all(dir) {
        Ok(()) => format!("the partial {} was removed", dir.display()),
        // (The engine's backup removes its own partial copy.)
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            format!("the partial {} was removed", dir.display())
        }
        Err(e) => format!("removing the partial {} failed too ({e}): delete it", dir.display()),
    };
    CliError::Refused(format!("{command}: {error}; the source is unchanged, and {cleanup}"))
}

fn io_error(what: &str, path: &Path, e: io::Error) -> CliError {
    CliError::Refused(format!("{what} {}: {e}", path.display()))
}
