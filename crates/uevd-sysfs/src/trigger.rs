//! Asking the kernel to send an event again: a write of `ACTION [UUID
//! [KEY=VALUE...]]` into a device's `uevent` file makes the kernel emit that
//! event for the device, as if it had just happened.

use crate::walk::{walk_devices, walk_subsystems};
use crate::Sysfs;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;
use uevd_uevent::Action;

/// What to write into a `uevent` file to have the kernel send `action`
/// again: `ACTION [UUID [KEY=VALUE ...]]`. Variables ride only with a
/// UUID (the kernel takes the second word as one), and end up in the event
/// as `SYNTH_UUID=` and `SYNTH_ARG_KEY=VALUE`.
pub fn uevent_request(
    action: Action,
    uuid: Option<&str>,
    vars: &[(&str, &str)],
) -> io::Result<Vec<u8>> {
    let mut out = action.as_str().as_bytes().to_vec();
    match uuid {
        Some(u) => {
            out.push(b' ');
            out.extend_from_slice(u.as_bytes());
        }
        None if vars.is_empty() => {}
        None => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "uevent variables need a UUID before them",
            ))
        }
    }
    for (k, v) in vars {
        out.push(b' ');
        out.extend_from_slice(k.as_bytes());
        out.push(b'=');
        out.extend_from_slice(v.as_bytes());
    }
    Ok(out)
}

/// Asks the kernel to send `action` for the device (or module, bus,
/// driver) whose sysfs directory is `dir`. One write: the kernel reads the
/// whole request from a single call.
pub fn request_uevent(
    dir: &Path,
    action: Action,
    uuid: Option<&str>,
    vars: &[(&str, &str)],
) -> io::Result<()> {
    let request = uevent_request(action, uuid, vars)?;
    OpenOptions::new()
        .write(true)
        .open(dir.join("uevent"))?
        .write_all(&request)
}

/// Asks the kernel to resend `action` for the device in `dir`, when it is
/// one the kernel sends events for (it has a subsystem). True when asked.
pub fn request_device(dir: &Path, action: Action, uuid: Option<&str>) -> bool {
    dir.join("subsystem").exists() && request_uevent(dir, action, uuid, &[]).is_ok()
}

/// Asks the kernel to resend `action` for every device and subsystem (the
/// daemon's `--coldplug=trigger`). Returns how many were asked.
pub fn request_all(sysfs: &Sysfs, action: Action, uuid: Option<&str>) -> usize {
    request_all_but(sysfs, action, uuid, |_| false)
}

/// [`request_all`], less the devpaths `skip` names: first every device
/// (parents first), then the buses, bus drivers and kernel modules. The
/// devices are what load drivers and make nodes, and nothing of their
/// processing depends on the others' events (the read-mode coldplug reads
/// them in the same order). A device counts when it has a subsystem; a
/// bus, driver or module has none, only its `uevent` file, and counts all
/// the same: rules act on them too (60-block.rules turns on media polling
/// when the `block` module's add comes).
pub fn request_all_but(
    sysfs: &Sysfs,
    action: Action,
    uuid: Option<&str>,
    skip: impl Fn(&[u8]) -> bool,
) -> usize {
    let mut n = 0;
    let _ = walk_devices(sysfs, |v| {
        if !skip(v.devpath) && request_device(v.path, action, uuid) {
            n += 1;
        }
    });
    let _ = walk_subsystems(sysfs, |v| {
        if !skip(v.devpath) && request_uevent(v.path, action, uuid, &[]).is_ok() {
            n += 1;
        }
    });
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
        // A module has a uevent file and no subsystem link.
        std::fs::create_dir_all(root.join("module/block")).unwrap();
        std::fs::write(root.join("module/block/uevent"), b"").unwrap();
        let uuid = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";
        let asked = request_all(&Sysfs::new(root), Action::Add, Some(uuid));
        assert_eq!(asked, 3);
        assert_eq!(
            std::fs::read(root.join("module/block/uevent")).unwrap(),
            b"add 1b4e28ba-2fa1-11d2-883f-0016d3cca427"
        );
        let written = std::fs::read(root.join("devices/virtual/net/eth0/uevent")).unwrap();
        assert_eq!(written, b"add 1b4e28ba-2fa1-11d2-883f-0016d3cca427");
        // No subsystem: not a device the kernel would send an event for.
        assert!(std::fs::read(root.join("devices/platform/uevent"))
            .unwrap()
            .is_empty());
        // A regular file keeps what the first request wrote past the second's.
        std::fs::write(root.join("devices/virtual/net/lo/uevent"), b"").unwrap();
        let skipped = request_all_but(&Sysfs::new(root), Action::Change, None, |d| {
            d == b"/module/block"
        });
        assert_eq!(skipped, 2);
        assert_eq!(
            std::fs::read(root.join("module/block/uevent")).unwrap(),
            b"add 1b4e28ba-2fa1-11d2-883f-0016d3cca427"
        );
        assert_eq!(
            std::fs::read(root.join("devices/virtual/net/lo/uevent")).unwrap(),
            b"change"
        );
    }

    #[test]
    fn uevent_requests_in_the_kernels_format() {
        let r = |u, v: &[(&str, &str)]| uevent_request(Action::Change, u, v).unwrap();
        assert_eq!(r(None, &[]), b"change");
        assert_eq!(r(Some("1-2-3"), &[]), b"change 1-2-3");
        assert_eq!(
            r(Some("1-2-3"), &[("A", "b"), ("C", "d")]),
            b"change 1-2-3 A=b C=d"
        );
        assert!(uevent_request(Action::Add, None, &[("A", "b")]).is_err());
    }

    #[test]
    fn requests_go_into_the_uevent_file() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("uevent"), "").unwrap();
        request_uevent(tmp.path(), Action::Add, Some("u"), &[]).unwrap();
        assert_eq!(std::fs::read(tmp.path().join("uevent")).unwrap(), b"add u");
        let gone = tmp.path().join("gone");
        assert!(request_uevent(&gone, Action::Add, None, &[]).is_err());
    }
}
