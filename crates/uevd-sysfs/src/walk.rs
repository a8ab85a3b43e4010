//! Walks over sysfs in the order udev enumerates it: parents before
//! children, names sorted, symlinks never followed.

use crate::Sysfs;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What a walk visits: a device's devpath, and its directory.
pub struct Visit<'a> {
    pub devpath: &'a [u8],
    pub path: &'a Path,
}

fn sorted_subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort_unstable_by(|a, b| a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes()));
    dirs
}

/// Visits every device below `/devices` (each directory with a `uevent`
/// file), parents first. Returns how many were visited.
pub fn walk_devices(sysfs: &Sysfs, mut visit: impl FnMut(Visit<'_>)) -> io::Result<usize> {
    let top = sysfs.root().join("devices");
    fs::metadata(&top)?;
    let mut count = 0;
    let mut stack = vec![top];
    while let Some(dir) = stack.pop() {
        if dir.join("uevent").is_file() {
            if let Some(devpath) = sysfs.devpath_of(&dir) {
                visit(Visit {
                    devpath: &devpath,
                    path: &dir,
                });
                count += 1;
            }
        }
        let mut children = sorted_subdirs(&dir);
        children.reverse();
        stack.extend(children);
    }
    Ok(count)
}

/// Visits the subsystem-level objects that `udevadm trigger
/// --type=subsystems` announces: buses (`/bus/*`), their drivers
/// (`/bus/*/drivers/*`) and kernel modules (`/module/*`), each one that has a
/// `uevent` file. Their devpaths are what the kernel reports for them.
pub fn walk_subsystems(sysfs: &Sysfs, mut visit: impl FnMut(Visit<'_>)) -> io::Result<usize> {
    let mut count = 0;
    let mut emit = |dir: &Path| {
        if dir.join("uevent").is_file() {
            if let Some(devpath) = sysfs.devpath_of(dir) {
                visit(Visit {
                    devpath: &devpath,
                    path: dir,
                });
                count += 1;
            }
        }
    };
    for module in sorted_subdirs(&sysfs.root().join("module")) {
        emit(&module);
    }
    for bus in sorted_subdirs(&sysfs.root().join("bus")) {
        emit(&bus);
        for driver in sorted_subdirs(&bus.join("drivers")) {
            emit(&driver);
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::fake_device;

    #[test]
    fn parents_come_before_children_and_links_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_device(root, "/devices/b", "x", "");
        fake_device(root, "/devices/a", "x", "");
        fake_device(root, "/devices/a/child", "x", "");
        fs::create_dir_all(root.join("devices/a/not-a-device/grandchild")).unwrap();
        fs::write(root.join("devices/a/not-a-device/grandchild/uevent"), "").unwrap();
        std::os::unix::fs::symlink(root.join("devices"), root.join("devices/a/loop")).unwrap();
        let mut seen = Vec::new();
        let n = walk_devices(&Sysfs::new(root), |v| {
            seen.push(String::from_utf8(v.devpath.to_vec()).unwrap())
        })
        .unwrap();
        assert_eq!(
            seen,
            [
                "/devices/a",
                "/devices/a/child",
                "/devices/a/not-a-device/grandchild",
                "/devices/b"
            ]
        );
        assert_eq!(n, 4);
    }
}
