//! Helpers shared by the peers' tests.

use std::path::PathBuf;

use ferrite::testing::Rng;

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

/// Key `i`: its number, big-endian (keys sort as their numbers).
#[allow(dead_code)] // (Not every test file writes numbered keys.)
pub fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// The value of key `i`, `len` bytes (at least 8): its number, then bytes drawn from it, so
/// a value read back names its key and a wrong one is seen.
#[allow(dead_code)]
pub fn value(i: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(i);
    let mut v = i.to_le_bytes().to_vec();
    v.extend((8..len).map(|_| rng.index(256) as u8));
    v
}
