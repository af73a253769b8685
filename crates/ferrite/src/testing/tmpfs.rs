//! A tmpfs mounted for one test (a file system that fills up on purpose), unmounted when
//! dropped. Mounting needs root (or the capability): elsewhere [`Tmpfs::mount`] returns
//! `None` and says on stderr that the test skips that part.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs; see the module documentation.
#[derive(Debug)]
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it: `2m`, `200m`) at `path`
    /// (made if missing).
    pub fn mount(path: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(path).expect("making the mount point");
        let options = format!("size={size}");
        let mounted =
            Command::new("mount").args(["-t", "tmpfs", "-o", &options, "tmpfs"]).arg(path).output();
        let o = match mounted {
            Ok(o) => o,
            Err(e) => {
                eprintln!("skipping: cannot run mount: {e}");
                return None;
            }
        };
        if !o.status.success() {
            let why = String::from_utf8_lossy(&o.stderr);
            eprintln!("skipping: cannot mount a tmpfs (needs root): {}", why.trim());
            return None;
        }
        Some(Tmpfs(path.to_owned()))
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Changes its size.
    pub fn resize(&self, size: &str) {
        let options = format!("remount,size={size}");
        let o = Command::new("mount").args(["-o", &options]).arg(&self.0).output().unwrap();
        assert!(o.status.success(), "remounting: {}", String::from_utf8_lossy(&o.stderr));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
