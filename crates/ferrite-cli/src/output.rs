//! Standard output, made to report why it cannot be written. Rust's runtime reopens a closed
//! descriptor 1 on /dev/null before `main` runs, and `io::Stdout` takes EBADF for success, so
//! `ferrite get … >&-` printed nowhere and exited 0. Here: whether descriptor 1 was open
//! when the process started (looked at before the runtime's start-up), and standard output
//! as a `File` on a duplicate of it, whose writes report every error.

#![allow(unsafe_code)] // the start-up hook and its fcntl

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// Descriptor 1 was closed when the process started.
static CLOSED_AT_START: AtomicBool = AtomicBool::new(false);

/// Looks at descriptor 1 before Rust's start-up code replaces a closed one: the C library
/// runs the executable's `.init_array` functions before `main`, and the runtime's start-up
/// runs from `main`.
extern "C" fn note_closed_stdout() {
    // SAFETY: fcntl(F_GETFD) reads the descriptor's flags; it takes and touches no memory.
    let closed = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1;
    CLOSED_AT_START.store(closed, Ordering::Relaxed);
}

#[used]
#[link_section = ".init_array"]
static NOTE_CLOSED_STDOUT: extern "C" fn() = note_closed_stdout;

/// Standard output, or why nothing can be written to it: closed when the process started,
/// not open for writing, or refusing writes (/dev/full).
pub fn stdout() -> io::Result<File> {
    if CLOSED_AT_START.load(Ordering::Relaxed) {
        return Err(io::Error::other("standard output is closed"));
    }
    let mut file = File::from(io::stdout().as_fd().try_clone_to_owned()?);
    // An empty write: Linux checks that the descriptor is open for writing before it looks
    // at the length (EBADF for one opened read-only), /dev/full refuses even that, and a
    // pipe or a regular file take it as nothing.
    match file.write(&[]) {
        Ok(_) => Ok(file),
        Err(e) if e.raw_os_error() == Some(libc::EBADF) => {
            Err(io::Error::other(format!("standard output is not open for writing: {e}")))
        }
        Err(e) => Err(e),
    }
}
