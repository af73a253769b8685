//! The directory lock: the data directory itself, held with `flock` on a descriptor of it
//! while a `Db` has it open: exclusively by a writable open, shared by read-only ones (any
//! number of readers together, never beside a writer). A refused open names the processes
//! that hold the lock (from `/proc/locks`).
//!
//! Locking the directory rather than a file in it means a reader creates nothing (it works
//! on read-only media, and leaves a directory that is not a database as it found it), and
//! no file in the directory can stand in the lock's way (a FIFO named like the lock file
//! would block its open). Earlier versions locked a file named `LOCK`; one left in a
//! directory is harmless and ignored.

#![allow(unsafe_code)] // flock

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The lock file earlier versions kept in a data directory (ignored now).
pub const LOCK_FILE_NAME: &str = "LOCK";

/// A held directory lock; released when dropped.
#[derive(Debug)]
pub struct DirLock {
    _dir: File,
}

impl DirLock {
    /// Takes the lock of `dir`: exclusive for a writer, shared for a reader; while another
    /// holder keeps it, tries again until `wait` has passed, then fails with `Error::Locked`.
    pub fn acquire(dir: &Path, exclusive: bool, wait: Duration) -> Result<DirLock> {
        let file = File::open(dir)
            .map_err(|e| Error::io(format!("opening {} to lock it", dir.display()), e))?;
        let operation = if exclusive { libc::LOCK_EX } else { libc::LOCK_SH };
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            // SAFETY: flock only takes the descriptor, which stays open as long as `file`.
            let rc = unsafe { libc::flock(file.as_raw_fd(), operation | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(DirLock { _dir: file });
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(Error::io(format!("locking {}", dir.display()), err));
            }
            if started.elapsed() >= wait {
                return Err(Error::Locked { path: dir.to_owned(), by: holders(&file) });
            }
            std::thread::sleep(pause.min(wait.saturating_sub(started.elapsed())));
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

impl Drop for DirLock {
    /// Gives the lock up before the descriptor closes. Closing alone frees it only once
    /// every copy of the descriptor is closed, and a child process another thread forks
    /// holds a copy until it execs: a `Db` closed at that moment kept its directory locked,
    /// and the next open, in this process or another, was refused (`Error::Locked` by
    /// "another holder"; regression: the CLI's `dump_and_load_round_trip_any_bytes_in_text_and_hex`,
    /// beside tests that run the binary, failed once in three runs of the suite).
    fn drop(&mut self) {
        // SAFETY: flock only takes the descriptor, open until `_dir` drops after this.
        unsafe { libc::flock(self._dir.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Who holds `file`'s lock, as `/proc/locks` tells: "process 123 (writing)", or "processes
/// 4, 5 (reading)"; "another holder" where it does not say.
fn holders(file: &File) -> String {
    use std::os::unix::fs::MetadataExt;
    let Ok(metadata) = file.metadata() else { return "another holder".into() };
    let (major, minor) = (libc::major(metadata.dev()), libc::minor(metadata.dev()));
    let inode = metadata.ino();
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
        return "another holder".into();
    };
    let (mut writers, mut readers) = (Vec::new(), Vec::new());
    for line in locks.lines() {
        if let Some((pid, writing)) = holder_of(line, major, minor, inode) {
            let list = if writing { &mut writers } else { &mut readers };
            if !list.contains(&pid) {
                list.push(pid);
            }
        }
    }
    let name = |pids: &[u32], how: &str| {
        let listed: Vec<String> = pids.iter().map(u32::to_string).collect();
        let noun = if pids.len() == 1 { "process" } else { "processes" };
        // What the first holder runs, so the user knows which program to ask or stop.
        match pids.first().and_then(|&pid| command_line(pid)) {
            Some(command) => format!("{noun} {} ({how}: {command})", listed.join(", ")),
            None => format!("{noun} {} ({how})", listed.join(", ")),
        }
    };
    match (writers.is_empty(), readers.is_empty()) {
        (false, _) => name(&writers, "writing"),
        (true, false) => name(&readers, "reading"),
        (true, true) => "another holder".into(),
    }
}

/// Process `pid`'s command line (its arguments joined by spaces, at most 120 characters),
/// if it can be read.
fn command_line(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let line = args.join(" ");
    match line.chars().count() {
        0 => None,
        n if n > 120 => Some(line.chars().take(119).collect::<String>() + "…"),
        _ => Some(line),
    }
}

/// A `/proc/locks` line's holder of a flock on the file `major:minor:inode`: its pid, and
/// whether it holds it exclusively. Lines look like
/// `1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF` (device numbers in hex); a line for
/// a waiter (`1: -> FLOCK …`) is not a holder.
fn holder_of(line: &str, major: u32, minor: u32, inode: u64) -> Option<(u32, bool)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [_, "FLOCK", _, mode, pid, file, ..] = fields[..] else { return None };
    let mut parts = file.split(':');
    let (maj, min, ino) = (parts.next()?, parts.next()?, parts.next()?);
    let same = u32::from_str_radix(maj, 16).ok()? == major
        && u32::from_str_radix(min, 16).ok()? == minor
        && ino.parse::<u64>().ok()? == inode;
    same.then(|| Some((pid.parse().ok()?, mode == "WRITE"))).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    #[test]
    fn readers_share_and_a_writer_is_refused_naming_this_process() {
        let dir = TempDir::with_prefix("dir-lock").unwrap();
        let wait = Duration::ZERO;
        let first = DirLock::acquire(dir.path(), false, wait).unwrap();
        let second = DirLock::acquire(dir.path(), false, wait).unwrap();
        let Err(Error::Locked { by, .. }) = DirLock::acquire(dir.path(), true, wait) else {
            panic!("a writer beside readers")
        };
        let me = std::process::id().to_string();
        assert!(by.contains(&me) && by.contains("reading"), "{by}");
        drop((first, second));
        let writer = DirLock::acquire(dir.path(), true, wait).unwrap();
        let Err(Error::Locked { by, .. }) = DirLock::acquire(dir.path(), false, wait) else {
            panic!("a reader beside a writer")
        };
        assert!(by.contains(&me) && by.contains("writing"), "{by}");
        // Waiting: the lock is given up meanwhile.
        let released = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(writer);
        });
        DirLock::acquire(dir.path(), false, Duration::from_secs(10)).unwrap();
        released.join().unwrap();
    }

    /// A lock given up while a forked child still holds a copy of its descriptor (the child
    /// has not exec'd yet) is free at once: the next open is not refused.
    #[test]
    fn a_lock_given_up_is_free_though_a_forked_child_holds_its_descriptor() {
        let dir = TempDir::with_prefix("dir-lock-fork").unwrap();
        let writer = DirLock::acquire(dir.path(), true, Duration::ZERO).unwrap();
        // SAFETY: the child only sleeps and exits (async-signal-safe calls), touching
        // nothing the other threads of this process may have held at the fork.
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork failed");
        if child == 0 {
            // SAFETY: in the child, async-signal-safe calls only; it never returns here.
            unsafe {
                libc::sleep(3);
                libc::_exit(0);
            }
        }
        drop(writer);
        let again = DirLock::acquire(dir.path(), true, Duration::ZERO);
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(child, &mut status, 0) };
        again.expect("the lock was given up; the child's copy of the descriptor must not hold it");
    }

    #[test]
    fn proc_locks_lines_are_read_for_this_file_only() {
        let line = "3: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF";
        assert_eq!(holder_of(line, 0xfd, 1, 1_234_567), Some((4242, true)));
        assert_eq!(holder_of(line, 0xfd, 1, 1_234_568), None);
        let shared = "4: FLOCK  ADVISORY  READ 77 08:10:99 0 EOF";
        assert_eq!(holder_of(shared, 8, 16, 99), Some((77, false)));
        assert_eq!(holder_of("5: -> FLOCK  ADVISORY  WRITE 1 08:10:99 0 EOF", 8, 16, 99), None);
        assert_eq!(holder_of("6: POSIX  ADVISORY  WRITE 1 08:10:99 0 EOF", 8, 16, 99), None);
    }

    #[test]
    fn a_fifo_named_lock_is_no_obstacle_and_readers_create_nothing() {
        let dir = TempDir::with_prefix("dir-lock-fifo").unwrap();
        let path =
            std::ffi::CString::new(dir.path().join(LOCK_FILE_NAME).to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path only.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
        for exclusive in [true, false] {
            drop(DirLock::acquire(dir.path(), exclusive, Duration::ZERO).unwrap());
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only the FIFO");
    }
}
