//! A benchmark's data directory: created on demand, kept with `--keep` for the next run to
//! reuse, otherwise removed at the end together with the parent directories the run created.
//!
//! Removal is careful: it happens only when the directory holds nothing but Ferrite's own
//! files (`pages.ferrite`, `LOCK`), and the caller asks for it only when every tree in it is
//! the benchmark's, so pointing `--db` at real data can never delete it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::BenchError;

/// The files a Ferrite data directory holds (the engine's lock file name is private).
const FERRITE_FILES: [&str; 4] = [
    ferrite::PAGE_FILE_NAME,
    ferrite::LOCK_FILE_NAME,
    ferrite::DEVICES_FILE_NAME,
    ferrite::LOG_DIR_NAME,
];

/// What became of the data directory at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirFate {
    /// Kept on request (`--keep`), for the next run to reuse.
    Kept,
    /// Removed.
    Removed,
    /// Left in place for the reason given.
    Left(String),
}

/// A benchmark's data directory, as found before the run.
#[derive(Debug)]
pub struct BenchDir {
    path: PathBuf,
    /// Absent or empty before the run.
    fresh: bool,
    /// Parents that did not exist before the run, innermost first.
    created_parents: Vec<PathBuf>,
}

impl BenchDir {
    /// Notes the state of `path` before the run creates anything.
    pub fn claim(path: &Path) -> Result<Self, BenchError> {
        let fresh = match fs::read_dir(path) {
            Ok(mut entries) => entries.next().is_none(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => true,
            // Not a directory, unreadable, ...: opening it will say what is wrong.
            Err(_) => false,
        };
        Ok(BenchDir { path: path.to_owned(), fresh, created_parents: missing_parents(path) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the directory was absent or empty before the run.
    pub fn is_fresh(&self) -> bool {
        self.fresh
    }

    /// Removes the directory if it holds only Ferrite's files, then the parents the run
    /// created if they are empty.
    pub fn remove(&self) -> DirFate {
        let entries = match fs::read_dir(&self.path) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return DirFate::Removed,
            Err(e) => return DirFate::Left(format!("listing it failed: {e}")),
        };
        for entry in entries {
            let name = match entry {
                Ok(entry) => entry.file_name(),
                Err(e) => return DirFate::Left(format!("listing it failed: {e}")),
            };
            if !FERRITE_FILES.iter().any(|f| name == *f) {
                return DirFate::Left(format!("it holds {name:?}, which is not Ferrite's"));
            }
        }
        if let Err(e) = fs::remove_dir_all(&self.path) {
            return DirFate::Left(format!("removing it failed: {e}"));
        }
        remove_created_parents(&self.created_parents);
        DirFate::Removed
    }
}

/// The parents of `path` that do not exist yet, nearest first: what creating `path` makes,
/// and so what the benchmark removes again after it (`remove_created_parents`).
pub fn missing_parents(path: &Path) -> Vec<PathBuf> {
    let mut missing = Vec::new();
    let mut parent = path.parent();
    while let Some(dir) = parent {
        if dir.as_os_str().is_empty() || dir.exists() {
            break;
        }
        missing.push(dir.to_owned());
        parent = dir.parent();
    }
    missing
}

/// Removes the parents `missing_parents` listed, nearest first, stopping at the first that is
/// not empty (something else was put there since).
pub fn remove_created_parents(parents: &[PathBuf]) {
    for dir in parents {
        if fs::remove_dir(dir).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    #[test]
    fn removes_ferrite_files_and_the_parents_it_created() {
        let tmp = TempDir::new().unwrap();
        let dir = tmp.path().join("a/b/data");
        let claimed = BenchDir::claim(&dir).unwrap();
        assert!(claimed.is_fresh());
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(ferrite::PAGE_FILE_NAME), b"pages").unwrap();
        fs::write(dir.join("LOCK"), b"").unwrap();
        assert_eq!(claimed.remove(), DirFate::Removed);
        assert!(!tmp.path().join("a").exists());
        assert!(tmp.path().exists());
    }

    #[test]
    fn keeps_parents_that_existed_and_directories_with_other_files() {
        let tmp = TempDir::new().unwrap();
        let dir = tmp.path().join("data");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("notes.txt"), b"mine").unwrap();
        let claimed = BenchDir::claim(&dir).unwrap();
        assert!(!claimed.is_fresh());
        assert!(matches!(claimed.remove(), DirFate::Left(reason) if reason.contains("notes.txt")));
        assert!(dir.join("notes.txt").exists());

        let empty = tmp.path().join("empty");
        fs::create_dir_all(&empty).unwrap();
        let claimed = BenchDir::claim(&empty).unwrap();
        assert!(claimed.is_fresh());
        assert_eq!(claimed.remove(), DirFate::Removed);
        assert!(tmp.path().exists());
    }
}
