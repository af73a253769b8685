//! What tests use and the engine does not: the seeded random generator of every test (`rng`),
//! the simulated disk (`sim`: a [`Storage`] that crashes, tears and fails writes from a
//! seed), a tmpfs to fill up (`tmpfs`), the directory copy a crash would leave, and
//! — for the engine's own unit tests — the conformance suite every I/O engine passes and the
//! helpers that run attempts to their end. Compiled for tests, and for other crates' tests
//! with the `testing` feature.
//!
//! [`Storage`]: crate::io::Storage

#[cfg(test)]
mod attempts;
#[cfg(test)]
mod conformance;
pub mod rng;
pub mod seccomp;
pub mod sim;
pub mod tmpfs;

#[cfg(test)]
pub(crate) use attempts::{read_page, run, scan};
pub use rng::Rng;
pub use seccomp::refuse_syscalls_on_this_thread;
pub use sim::{SimDisk, SimFaults};
pub use tmpfs::Tmpfs;

use std::path::Path;

/// A waker that counts its wake-ups, for the unit tests of code that registers wakers.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct WakeCount(pub(crate) std::sync::atomic::AtomicUsize);

#[cfg(test)]
impl std::task::Wake for WakeCount {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Sets how long the idle merge of object fragments waits unwoken before it looks again, for
/// the whole process (250 ms by default): a test sets hours to show that a close wakes it.
pub fn set_merge_idle_wait(wait: std::time::Duration) {
    crate::db::set_merge_idle_wait(wait);
}

/// Copies the files of data directory `from` into `to` (created) as a crash would leave
/// them, the log's `wal/` included. For tests that recover a crash image of a database still
/// open.
pub fn copy_crash_image(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("creating the image's directory");
    for entry in std::fs::read_dir(from).expect("listing the data directory") {
        let entry = entry.expect("listing the data directory");
        if entry.file_type().expect("a file type").is_dir() {
            copy_crash_image(&entry.path(), &to.join(entry.file_name()));
        } else if entry.file_name() != crate::LOCK_FILE_NAME {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copying a file");
        }
    }
}
