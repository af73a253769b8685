//! Helpers shared by the peers' tests.

use std::path::PathBuf;

/// A fresh directory under the temp dir, removed when dropped. It does not exist until the
/// store opened in it makes it.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `ferrite-peers-GROUP-TEST-PID` under the temp dir, emptied first.
    pub fn new(group: &str, test: &str) -> Self {
        let name = format!("ferrite-peers-{group}-{test}-{}", std::process::id());
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&path);
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
