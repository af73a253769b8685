//! Small ext4 file systems for tests that cut the power (`powercut.rs`): a sparse image file,
//! loop-mounted in a temporary directory, shut down on demand the way a power cut would stop
//! it (`Image::cut`), and always unmounted and detached again, also when a test fails.
//!
//! Needs root, loop devices, `mkfs.ext4` (e2fsprogs), `mount`, `umount` and `losetup`
//! (mount); [`missing_prerequisite`] says which is lacking.

#![allow(unsafe_code)] // two system calls: `geteuid`, and the ext4 shutdown `ioctl`

use std::cell::Cell;
use std::ffi::OsStr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::TempDir;

/// The image: a sparse file, so only what is written takes space.
pub const IMAGE_BYTES: u64 = 256 << 20;
/// How long an unmount is retried (busy while a killed writer's files are being released).
const UNMOUNT_PATIENCE: Duration = Duration::from_secs(10);
/// `_IOR('X', 125, __u32)`, from the kernel's `fs/ext4/ext4.h`.
const EXT4_IOC_SHUTDOWN: u32 = 0x8004_587D;
/// Shut down without flushing the journal: what was not committed to it is lost.
const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;

/// Where a tool lives: on the `PATH`, or in the system directories a non-login root shell
/// may lack.
fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Why ext4 images cannot be made and mounted here, if they cannot.
pub fn missing_prerequisite() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (mounting a loop device needs it)".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no loop devices (/dev/loop-control is missing)".into());
    }
    for (name, package) in
        [("mkfs.ext4", "e2fsprogs"), ("mount", "mount"), ("umount", "mount"), ("losetup", "mount")]
    {
        if tool(name).is_none() {
            return Some(format!("{name} is missing (apt-get install {package})"));
        }
    }
    None
}

/// Runs `tool` with `args`: its stderr as the error if it fails.
fn run(tool_name: &str, args: &[&OsStr]) -> Result<String, String> {
    let program = tool(tool_name).ok_or_else(|| format!("{tool_name} is missing"))?;
    let output = Command::new(&program)
        .args(args)
        .output()
        .map_err(|e| format!("running {}: {e}", program.display()))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{tool_name} {:?}: {}: {}",
            args,
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// An ext4 image file and its mount point; unmounted and detached when dropped.
#[derive(Debug)]
pub struct Image {
    /// Holds the image and the mount point; removed once the image is unmounted.
    _dir: TempDir,
    image: PathBuf,
    mount: PathBuf,
    /// Unmounts that had to be tried again (busy).
    pub unmount_retries: Cell<u64>,
}

impl Image {
    /// An image in a new temporary directory named after `label` (see
    /// [`clean_up_after_killed_runs`]); not made yet.
    pub fn new(label: &str) -> Image {
        // (The name `clean_up_after_killed_runs` looks for: label, then this process's id.)
        let prefix = format!("ferrite-test-{label}-{}-", std::process::id());
        let base = TempDir::with_prefix(prefix).unwrap();
        let image = base.path().join("ext4.img");
        let mount = base.path().join("mnt");
        std::fs::create_dir(&mount).expect("creating the mount point");
        Image { _dir: base, image, mount, unmount_retries: Default::default() }
    }

    /// The mount point.
    pub fn mount_point(&self) -> &Path {
        &self.mount
    }

    /// Makes a fresh file system of [`IMAGE_BYTES`] (the image must not be mounted).
    pub fn format(&self) -> Result<(), String> {
        assert!(!self.is_mounted(), "formatting a mounted image");
        let file = std::fs::File::create(&self.image).map_err(|e| format!("the image: {e}"))?;
        file.set_len(IMAGE_BYTES).map_err(|e| format!("the image: {e}"))?;
        drop(file);
        run("mkfs.ext4", &["-q".as_ref(), "-F".as_ref(), self.image.as_os_str()]).map(drop)
    }

    /// Mounts the image on a loop device that detaches itself at unmount.
    pub fn mount(&self) -> Result<(), String> {
        let args = ["-t", "ext4", "-o", "loop"].map(OsStr::new);
        let mut args = args.to_vec();
        args.extend([self.image.as_os_str(), self.mount.as_os_str()]);
        run("mount", &args).map(drop)
    }

    /// Whether the mount point has a file system mounted (this process's view).
    pub fn is_mounted(&self) -> bool {
        let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else { return false };
        // Field 5 is the mount point (spaces escaped as \040; ours have none).
        let mount = self.mount.to_string_lossy();
        mounts.lines().any(|line| line.split(' ').nth(4) == Some(&*mount))
    }

    /// Unmounts, retrying with a short backoff while the file system is busy (the killed
    /// child's files may take a moment to be released).
    pub fn unmount(&self) -> Result<(), String> {
        if !self.is_mounted() {
            return Ok(());
        }
        let started = Instant::now();
        let mut backoff = Duration::from_millis(1);
        loop {
            match run("umount", &[self.mount.as_os_str()]) {
                Ok(_) => return Ok(()),
                Err(e) if started.elapsed() > UNMOUNT_PATIENCE || !self.is_mounted() => {
                    return Err(e)
                }
                Err(_) => {
                    self.unmount_retries.set(self.unmount_retries.get() + 1);
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_millis(100));
                }
            }
        }
    }

    /// The power cut: shuts the file system down without flushing its journal. Every later
    /// write or sync on it fails; what it had not yet sent to the device is lost.
    pub fn cut(&self) -> std::io::Result<()> {
        let dir = std::fs::File::open(&self.mount)?;
        let flags: u32 = EXT4_GOING_FLAGS_NOLOGFLUSH;
        // SAFETY: EXT4_IOC_SHUTDOWN reads one u32 through its argument, which points at
        // `flags`, alive for the call; `dir` is an open descriptor on the file system.
        let result =
            unsafe { libc::ioctl(dir.as_raw_fd(), EXT4_IOC_SHUTDOWN as _, &flags as *const u32) };
        if result == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Detaches any loop device still backing the image (`mount -o loop` sets its devices to
    /// detach at unmount, so normally there are none).
    fn detach_loops(&self) {
        let Ok(listed) = run("losetup", &["-j".as_ref(), self.image.as_os_str()]) else { return };
        for line in listed.lines() {
            if let Some((device, _)) = line.split_once(':') {
                if let Err(e) = run("losetup", &["-d".as_ref(), device.as_ref()]) {
                    eprintln!("ext4: detaching {device}: {e}");
                }
            }
        }
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        if self.is_mounted() {
            if let Err(e) = self.unmount() {
                eprintln!("ext4: {e}; unmounting lazily");
                let _ = run("umount", &["-l".as_ref(), self.mount.as_os_str()]);
            }
        }
        // `_dir` removes the directory once this is done.
        self.detach_loops();
    }
}

/// Undoes what an earlier run of a test using images labelled `label` left behind when it
/// was killed (no guard runs then): mounts and loop devices of its images, found by the
/// temporary directory's name, which holds the process id, and only where that process is
/// gone.
pub fn clean_up_after_killed_runs(label: &str) {
    let prefix = std::env::temp_dir().join(format!("ferrite-test-{label}-"));
    let prefix = prefix.to_string_lossy().into_owned();
    let left_behind = |path: &str| -> Option<PathBuf> {
        let rest = path.strip_prefix(&prefix)?;
        let pid: u32 = rest.split('-').next()?.parse().ok()?;
        let dir = PathBuf::from(format!("{prefix}{}", rest.split('/').next()?));
        (!Path::new(&format!("/proc/{pid}")).exists()).then_some(dir)
    };
    let mut dirs = Vec::new();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for mount in mounts.lines().filter_map(|line| line.split(' ').nth(4)) {
        if let Some(dir) = left_behind(mount) {
            println!("ext4: unmounting {mount}, left by a run that was killed");
            if run("umount", &[mount.as_ref()]).is_err() {
                let _ = run("umount", &["-l".as_ref(), mount.as_ref()]);
            }
            dirs.push(dir);
        }
    }
    let listed = ["-l", "-n", "-O", "NAME,BACK-FILE"].map(OsStr::new);
    for line in run("losetup", &listed).unwrap_or_default().lines() {
        let Some((device, file)) = line.split_once(' ') else { continue };
        if let Some(dir) = left_behind(file.trim()) {
            println!("ext4: detaching {device}, left by a run that was killed");
            let _ = run("losetup", &["-d".as_ref(), device.as_ref()]);
            dirs.push(dir);
        }
    }
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}
