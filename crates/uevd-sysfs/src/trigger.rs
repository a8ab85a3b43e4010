//! Asking the kernel to send an event again: a write of `ACTION [UUID
//! [KEY=VALUE...]]` into a device's `uevent` file makes the kernel emit that
//! event for the device, as if it had just happened.

use crate::walk::{walk_devices, walk_subsystems};
use crate::Sysfs;
use std::io::{self, Write};
use std::path::Path;

/// Writes `request` into the `uevent` file of the device directory `dir`.
pub fn write_uevent(dir: &Path, request: &[u8]) -> io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("uevent"))?
        .write_all(request)
}

/// Asks the kernel to resend `request` for every subsystem and device, in
/// udev's enumeration order. Returns how many were asked.
pub fn request_all(sysfs: &Sysfs, request: &[u8]) -> usize {
    let mut n = 0;
    let mut go = |path: &Path| {
        if path.join("subsystem").exists() && write_uevent(path, request).is_ok() {
            n += 1;
        }
    };
    let _ = walk_subsystems(sysfs, |v| go(v.path));
    let _ = walk_devices(sysfs, |v| go(v.path));
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_device_with_a_subsystem_is_asked_once() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("class/net")).unwrap();
        for d in [
            "devices/virtual/net/lo",
            "devices/virtual/net/eth0",
            "devices/platform",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
            std::fs::write(root.join(d).join("uevent"), b"").unwrap();
        }
        for d in ["devices/virtual/net/lo", "devices/virtual/net/eth0"] {
            std::os::unix::fs::symlink("../../../../class/net", root.join(d).join("subsystem"))
                .unwrap();
        }
        let asked = request_all(
            &Sysfs::new(root),
            b"add 1b4e28ba-2fa1-11d2-883f-0016d3cca427",
        );
        assert_eq!(asked, 2);
        let written = std::fs::read(root.join("devices/virtual/net/eth0/uevent")).unwrap();
        assert_eq!(written, b"add 1b4e28ba-2fa1-11d2-883f-0016d3cca427");
        // No subsystem: not a device the kernel would send an event for.
        assert!(std::fs::read(root.join("devices/platform/uevent"))
            .unwrap()
            .is_empty());
    }
}
