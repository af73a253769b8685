//! A cap on the requests per second this process may send to one block device, as a cloud
//! volume has (a general-purpose volume gives a few thousand to a few tens of thousands of
//! I/O operations per second, whatever the device under it could do): the process moves
//! into a child block-I/O cgroup of its own whose throttle limits the device's reads and
//! writes per second, and back out when the cap is dropped. Every store of a run is in this
//! process, so the cap holds each the same; the kernel queues the requests past it, so a
//! capped device also answers later, as a throttled volume does.
//!
//! cgroup v1 (`blkio.throttle.read_iops_device`, `write_iops_device`) or v2 (`io.max`
//! `riops=`/`wiops=`), whichever holds this process's block controller. A partition's
//! requests are throttled at its disk, which is the device the limits name. Only whole
//! requests are counted: a 4 KiB read and a 128 KiB one cost one each (cloud volumes count
//! large requests as several; that is not modelled).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Requests per second allowed to one device; `None` leaves that direction uncapped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IopsCap {
    pub read: Option<u64>,
    pub write: Option<u64>,
}

impl IopsCap {
    pub fn is_set(&self) -> bool {
        self.read.is_some() || self.write.is_some()
    }

    /// `reads 5,000/s and writes 5,000/s`, `reads 3,000/s (writes uncapped)`.
    pub fn describe(&self) -> String {
        let side = |cap: Option<u64>| match cap {
            Some(n) => format!("{}/s", crate::report::thousands(n)),
            None => "uncapped".into(),
        };
        format!("reads {}, writes {}", side(self.read), side(self.write))
    }
}

/// Tests that enter a capped group take this first: the group holds the whole process, so
/// two tests at once would move it out of each other's group.
#[cfg(test)]
pub(crate) static TEST_GROUP: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Which cgroup interface holds a controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    V1,
    V2,
}

/// Membership of a block-I/O cgroup that caps one device; leaving it (drop) moves the
/// process back and removes the group.
#[derive(Debug)]
pub struct DiskCap {
    group: PathBuf,
    parent: PathBuf,
    /// The device the limits name, `major:minor`, and its name (`vda`).
    pub device: String,
    pub device_name: String,
    pub cap: IopsCap,
}

/// This process's group, as a directory, for the controller named `controller_v1` in
/// cgroup v1 (a `cgroup` mount listing it); else its cgroup v2 group, if that offers
/// `controller_v2`. Also the memory cap's (`memcap.rs`, v1 only).
pub(crate) fn current_group(
    controller_v1: &str,
    controller_v2: &str,
) -> Option<(PathBuf, Version)> {
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    let cgroups = fs::read_to_string("/proc/self/cgroup").ok()?;
    let v1_root = mounts.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 3 && f[2] == "cgroup" && f[3].split(',').any(|o| o == controller_v1))
            .then(|| PathBuf::from(f[1]))
    });
    if let Some(root) = v1_root {
        let path = cgroups.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers.split(',').any(|c| c == controller_v1).then(|| path.to_owned())
        })?;
        let dir = root.join(path.trim_start_matches('/'));
        return dir.join("cgroup.procs").exists().then_some((dir, Version::V1));
    }
    let v2_root = mounts.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 2 && f[2] == "cgroup2").then(|| PathBuf::from(f[1]))
    })?;
    let path = cgroups.lines().find_map(|line| line.strip_prefix("0::"))?;
    let dir = v2_root.join(path.trim_start_matches('/'));
    let controllers = fs::read_to_string(dir.join("cgroup.controllers")).ok()?;
    controllers.split_whitespace().any(|c| c == controller_v2).then_some((dir, Version::V2))
}

/// The whole disk holding `path` (a partition's parent): `(major, minor, name)`.
pub fn disk_of(path: &Path) -> Result<(u64, u64, String), String> {
    let dev = fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let sys = fs::canonicalize(&sys).map_err(|_| {
        format!("{} is on device {major}:{minor}, not a block device", path.display())
    })?;
    // A partition's directory sits inside its disk's, and has a `partition` file.
    let disk = match sys.join("partition").exists() {
        true => sys.parent().map(Path::to_path_buf).unwrap_or(sys),
        false => sys,
    };
    let number =
        fs::read_to_string(disk.join("dev")).map_err(|e| format!("{}: {e}", disk.display()))?;
    let (major, minor) = number
        .trim()
        .split_once(':')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .ok_or_else(|| format!("{}/dev: not major:minor", disk.display()))?;
    let name = disk.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok((major, minor, name))
}

impl DiskCap {
    /// Moves this process into a new child cgroup whose throttle caps the disk holding
    /// `path` at `cap`.
    pub fn enter(path: &Path, cap: IopsCap) -> Result<DiskCap, String> {
        let (major, minor, device_name) = disk_of(path)?;
        let device = format!("{major}:{minor}");
        let (parent, version) = current_group("blkio", "io").ok_or(
            "this process has no block-I/O cgroup controller (cgroup v1 blkio or v2 io) \
             to throttle the disk with",
        )?;
        let group = parent.join(format!("ferrite-bench-disk-{}", std::process::id()));
        let shown = group.display().to_string();
        let err = |what: &str, e: std::io::Error| format!("{what} {shown}: {e}");
        if !group.exists() {
            fs::create_dir(&group).map_err(|e| err("creating", e))?;
        }
        let entered = DiskCap { group, parent, device, device_name, cap };
        match version {
            Version::V1 => {
                let limits = [("read", cap.read), ("write", cap.write)];
                for (side, limit) in limits {
                    let Some(limit) = limit else { continue };
                    let file = entered.group.join(format!("blkio.throttle.{side}_iops_device"));
                    fs::write(&file, format!("{} {limit}", entered.device))
                        .map_err(|e| err(&format!("capping {side}s of {}", entered.device), e))?;
                }
            }
            Version::V2 => {
                let mut line = entered.device.clone();
                let sides = [("riops", cap.read), ("wiops", cap.write)];
                for (key, limit) in sides {
                    line += &format!(" {key}={}", limit.map_or("max".into(), |n| n.to_string()));
                }
                fs::write(entered.group.join("io.max"), line)
                    .map_err(|e| err(&format!("capping {}", entered.device), e))?;
            }
        }
        fs::write(entered.group.join("cgroup.procs"), std::process::id().to_string())
            .map_err(|e| err("joining", e))?;
        Ok(entered)
    }

    /// What the run's disk is: `vda (254:0), reads 5,000/s, writes 5,000/s (block cgroup
    /// throttle)`.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}) capped at {} by a block-I/O cgroup throttle",
            self.device_name,
            self.device,
            self.cap.describe()
        )
    }
}

impl Drop for DiskCap {
    fn drop(&mut self) {
        let _ = fs::write(self.parent.join("cgroup.procs"), std::process::id().to_string());
        // Empty now (this process was its only member).
        let _ = fs::remove_dir(&self.group);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_describes_each_side() {
        let both = IopsCap { read: Some(5_000), write: Some(20_000) };
        assert_eq!(both.describe(), "reads 5,000/s, writes 20,000/s");
        let reads = IopsCap { read: Some(3_000), write: None };
        assert_eq!(reads.describe(), "reads 3,000/s, writes uncapped");
        assert!(!IopsCap::default().is_set());
    }

    /// The disk of a path is a whole disk: its `dev` names it, and no partition file.
    #[test]
    fn the_disk_of_a_path_is_a_whole_disk() {
        let dir = tempfile::tempdir().unwrap();
        match disk_of(dir.path()) {
            Ok((major, minor, name)) => {
                let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
                assert!(!sys.join("partition").exists(), "{name} is a partition");
                assert!(!name.is_empty());
            }
            // tmpfs, overlay: no block device under the path.
            Err(reason) => eprintln!("no disk here: {reason}"),
        }
    }

    /// Where the machine allows it, a capped group is entered, holds the limit, and is left.
    #[test]
    fn entering_and_leaving_a_capped_group() {
        let _alone = TEST_GROUP.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let cap = IopsCap { read: Some(1_000_000), write: None };
        match DiskCap::enter(dir.path(), cap) {
            Ok(entered) => {
                let procs = fs::read_to_string(entered.group.join("cgroup.procs")).unwrap();
                let me = std::process::id().to_string();
                assert!(procs.lines().any(|p| p == me), "this process is in the group");
                let v1 = entered.group.join("blkio.throttle.read_iops_device");
                let limits = fs::read_to_string(&v1)
                    .or_else(|_| fs::read_to_string(entered.group.join("io.max")))
                    .unwrap();
                assert!(limits.contains(&entered.device), "{limits}");
                assert!(limits.contains("1000000"), "{limits}");
                let group = entered.group.clone();
                drop(entered);
                assert!(!group.exists(), "the group is removed");
            }
            Err(reason) => eprintln!("no disk cap here: {reason}"),
        }
    }
}
