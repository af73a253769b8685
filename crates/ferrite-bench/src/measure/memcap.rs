//! A cap on the memory this process may use, page cache included, for the stores that cannot
//! bypass the page cache (LMDB reads through `mmap`): the process moves into a child memory
//! cgroup (v1) of its own with `memory.limit_in_bytes` set, and back out when the cap is
//! dropped. Without a cgroup v1 memory controller, or without the right to make a child
//! group, there is no cap and the caller says so in its results.
//!
//! Pages already in the page cache stay charged to the group they were read in: the caller
//! evicts the store's files from the page cache (`evict_from_page_cache`) after entering, so
//! that every page the run reads is read under the cap.

use std::fs;
use std::path::{Path, PathBuf};

/// Membership of a capped memory cgroup; leaving it (drop) moves the process back.
#[derive(Debug)]
pub struct MemoryCap {
    group: PathBuf,
    parent: PathBuf,
    pub limit_bytes: u64,
}

/// This process's memory cgroup (v1), as a directory.
fn current_group() -> Option<PathBuf> {
    use super::diskcap::{current_group, Version};
    // ("-": v2's memory controller takes other limits; not looked for.)
    current_group("memory", "-").and_then(|(dir, version)| (version == Version::V1).then_some(dir))
}

impl MemoryCap {
    /// Moves this process into a new child memory cgroup limited to `limit_bytes`.
    pub fn enter(limit_bytes: u64) -> Result<MemoryCap, String> {
        let parent = current_group().ok_or("no cgroup v1 memory controller for this process")?;
        let group = parent.join(format!("ferrite-bench-{}", std::process::id()));
        let shown = group.display().to_string();
        let err = |what: &str, e: std::io::Error| format!("{what} {shown}: {e}");
        if !group.exists() {
            fs::create_dir(&group).map_err(|e| err("creating", e))?;
        }
        let cap = MemoryCap { group, parent, limit_bytes };
        fs::write(cap.group.join("memory.limit_in_bytes"), limit_bytes.to_string())
            .map_err(|e| err("limiting", e))?;
        fs::write(cap.group.join("cgroup.procs"), std::process::id().to_string())
            .map_err(|e| err("joining", e))?;
        Ok(cap)
    }

    /// Bytes charged to the group now.
    pub fn usage_bytes(&self) -> Option<u64> {
        fs::read_to_string(self.group.join("memory.usage_in_bytes")).ok()?.trim().parse().ok()
    }
}

impl Drop for MemoryCap {
    fn drop(&mut self) {
        let _ = fs::write(self.parent.join("cgroup.procs"), std::process::id().to_string());
        // Empty now (this process was its only member); its charges go to the parent.
        let _ = fs::remove_dir(&self.group);
    }
}

/// Drops the clean pages of every file under `dir` from the page cache (dirty ones are
/// written first by the caller's flush), so that later reads go to the device.
pub fn evict_from_page_cache(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            evict_from_page_cache(&path);
        } else if let Ok(file) = fs::File::open(&path) {
            let _ = file.sync_all();
            advise_dontneed(&file);
        }
    }
}

#[allow(unsafe_code)]
fn advise_dontneed(file: &fs::File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: posix_fadvise only reads its arguments; the descriptor is open for the call.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the machine allows it, a capped group is entered and left again.
    #[test]
    fn entering_and_leaving_a_capped_group() {
        let before = current_group();
        // Generous: the other tests of this binary run meanwhile, in the same group.
        match MemoryCap::enter(16 << 30) {
            Ok(cap) => {
                assert_eq!(current_group().as_deref(), Some(cap.group.as_path()));
                assert!(cap.usage_bytes().is_some());
                drop(cap);
                assert_eq!(current_group(), before, "back in the original group");
            }
            Err(reason) => eprintln!("no memory cap here: {reason}"),
        }
    }
}
