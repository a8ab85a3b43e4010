//! Reading ahead for blkid: when a disk or partition is announced, the
//! places its probe will read are asked of the disk at once, on a thread
//! of their own, while the event waits in the queue. A disk answers after
//! its own latency (a seek, a jiffy for scsi_debug); at a coldplug of a
//! thousand disks those waits then overlap instead of each holding a
//! worker, and the probe finds the blocks in the page cache.
//!
//! Only plain disks are read ahead: not removable media (opening them can
//! spin up a drive or wait for a tray), not floppies, optical drives or
//! stacked and network devices (device-mapper and md devices can be
//! suspended, nbd waits for a server), whose reads may block.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use uevd_uevent::{Action, Uevent};

/// Names whose devices are never read ahead.
const NOT_READ_AHEAD: &[&[u8]] = &[
    b"sr", b"fd", b"dm-", b"md", b"drbd", b"nbd", b"zram", b"ram", b"loop", b"rbd",
];

struct Request {
    node: PathBuf,
    /// The whole disk's `removable` attribute.
    removable: PathBuf,
}

pub(crate) struct Prefetcher {
    tx: Option<mpsc::Sender<Request>>,
    dev: PathBuf,
    sys: PathBuf,
}

impl Prefetcher {
    pub(crate) fn start(dev: &Path, sys: &Path) -> Prefetcher {
        let (tx, rx) = mpsc::channel::<Request>();
        let spawned = std::thread::Builder::new()
            .name("prefetch".into())
            .spawn(move || {
                for r in rx {
                    if std::fs::read(&r.removable).is_ok_and(|v| v.trim_ascii() == b"0") {
                        uevd_blkid::prefetch_device(&r.node);
                    }
                }
            });
        Prefetcher {
            tx: spawned.is_ok().then_some(tx),
            dev: dev.to_path_buf(),
            sys: sys.to_path_buf(),
        }
    }

    /// Reads ahead for the event's device if it is a plain disk or one of
    /// its partitions being added or changed.
    pub(crate) fn offer(&self, ev: &Uevent) {
        let Some(tx) = &self.tx else { return };
        if let Some((node, removable)) = wanted(ev) {
            let _ = tx.send(Request {
                node: self.dev.join(std::ffi::OsStr::from_bytes(node)),
                removable: self.sys.join(std::ffi::OsStr::from_bytes(&removable[1..])),
            });
        }
    }
}

/// The node below /dev and the devpath of the whole disk's `removable`
/// attribute, for an event worth reading ahead for.
fn wanted(ev: &Uevent) -> Option<(&[u8], Vec<u8>)> {
    if !matches!(ev.action(), Action::Add | Action::Change) || ev.subsystem() != Some(b"block") {
        return None;
    }
    let name = ev.devname()?;
    if NOT_READ_AHEAD.iter().any(|p| name.starts_with(p)) || name.contains(&b'/') {
        return None;
    }
    let devpath = ev.devpath();
    let disk = match ev.devtype()? {
        b"disk" => devpath,
        b"partition" => &devpath[..devpath.iter().rposition(|&c| c == b'/')?],
        _ => return None,
    };
    Some((name, [disk, b"/removable"].concat()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(action: &str, devpath: &str, props: &str) -> Uevent {
        let text =
            format!("ACTION={action}\0DEVPATH={devpath}\0SUBSYSTEM=block\0SEQNUM=1\0{props}");
        Uevent::parse_properties(text.as_bytes()).unwrap()
    }

    #[test]
    fn plain_disks_and_their_partitions_are_read_ahead_on_add_and_change() {
        let disk = "/devices/pci0/host0/target0:0:0/0:0:0:0/block/sda";
        let ev = event("add", disk, "DEVNAME=sda\0DEVTYPE=disk\0");
        let (node, removable) = wanted(&ev).unwrap();
        assert_eq!(node, b"sda");
        assert_eq!(removable, format!("{disk}/removable").into_bytes());
        let part = event(
            "change",
            &format!("{disk}/sda1"),
            "DEVNAME=sda1\0DEVTYPE=partition\0",
        );
        let (node, removable) = wanted(&part).unwrap();
        assert_eq!(node, b"sda1");
        assert_eq!(removable, format!("{disk}/removable").into_bytes());
    }

    #[test]
    fn media_stacked_devices_and_other_events_are_not() {
        for (action, name, devtype) in [
            ("remove", "sda", "disk"),
            ("add", "sr0", "disk"),
            ("add", "fd0", "disk"),
            ("add", "dm-0", "disk"),
            ("add", "md127", "disk"),
            ("add", "nbd0", "disk"),
            ("add", "loop3", "disk"),
            ("add", "sdb", "other"),
        ] {
            let ev = event(
                action,
                &format!("/devices/virtual/block/{name}"),
                &format!("DEVNAME={name}\0DEVTYPE={devtype}\0"),
            );
            assert!(wanted(&ev).is_none(), "{action} {name} {devtype}");
        }
    }

    /// On the real kernel: a loop device's blocks are in the page cache
    /// after a read-ahead (mincore of a mapping of the device says so).
    #[test]
    fn a_read_ahead_fills_the_page_cache() {
        let Ok(img) = tempfile::NamedTempFile::new() else {
            return;
        };
        img.as_file().set_len(4 << 20).unwrap();
        let out = std::process::Command::new("losetup")
            .args(["-f", "--show"])
            .arg(img.path())
            .output();
        let Ok(out) = out else { return };
        if !out.status.success() {
            println!("skipped: no loop device here");
            return;
        }
        let node = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let detach = || {
            let _ = std::process::Command::new("losetup")
                .arg("-d")
                .arg(&node)
                .status();
        };
        // Drop what reading the partition table cached.
        let f = std::fs::File::open(&node).unwrap();
        use std::os::unix::io::AsRawFd;
        // SAFETY: advice on our own descriptor.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let cached = |f: &std::fs::File| -> usize {
            let len = 4 << 20;
            // SAFETY: a read-only shared mapping of the device, unmapped below.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    f.as_raw_fd(),
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED);
            let mut vec = vec![0u8; len / 4096];
            // SAFETY: vec has one byte per page of the mapping.
            unsafe { libc::mincore(p, len, vec.as_mut_ptr()) };
            // SAFETY: the mapping made above.
            unsafe { libc::munmap(p, len) };
            vec.iter().filter(|&&b| b & 1 == 1).count()
        };
        let before = cached(&f);
        uevd_blkid::prefetch_device(&node);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut after = cached(&f);
        while after <= before && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            after = cached(&f);
        }
        detach();
        assert!(
            after > before,
            "pages cached: {before} before, {after} after"
        );
    }
}
