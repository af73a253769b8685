//! Helpers for tests: temporary directories that clean up after themselves.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A fresh directory under the system's temporary directory, removed on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(label: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "ferrite-test-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("creating a temporary directory");
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Copies the files of data directory `from` into `to` (created) as a crash would leave
/// them: everything but the lock file, the log's `wal/` included. For tests that recover a
/// crash image of a database still open.
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
