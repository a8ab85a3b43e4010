//! The device the system boots from, as the kernel command line's `root=`
//! names it, and which events may be for it: those go first in the queue
//! (see `uevd-queue`), with every earlier event they wait for, so that the
//! root's node and links never wait behind thousands of unrelated events.
//!
//! What an event says is all that is looked at: no probe, no file read.
//! So a name the kernel puts in the uevent is matched exactly —
//! `/dev/sda2` (DEVNAME), `8:2` or the kernel's hex `0802` (MAJOR, MINOR),
//! `PARTLABEL=` (the partition's PARTNAME), `/dev/disk/by-diskseq/N`
//! (DISKSEQ) — while what only a probe can tell (`UUID=`, `LABEL=`,
//! `/dev/disk/by-id/...`, a device-mapper name) makes every disk and
//! partition a candidate. `PARTUUID=` is matched exactly where the kernel
//! puts PARTUUID in a partition's uevent (Linux 6.13 and later); on older
//! kernels (6.1 sends only PARTN and PARTNAME) every partition is a
//! candidate.

use std::collections::{BTreeSet, HashSet};
use std::os::unix::ffi::OsStrExt;
use uevd_sysfs::Sysfs;
use uevd_uevent::{Action, Uevent};

/// What `root=` names, as far as an event can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RootDevice {
    /// A node name below /dev (DEVNAME): `root=/dev/sda2`.
    Name(Vec<u8>),
    /// A device number: `root=8:2` or `root=0802`.
    Number(u32, u32),
    /// A GPT partition name (PARTNAME).
    PartLabel(Vec<u8>),
    /// A partition UUID, lower case; matched where the kernel sends it.
    PartUuid(Vec<u8>),
    /// A disk's sequence number (DISKSEQ), and maybe a partition number.
    DiskSeq(u64, Option<u32>),
    /// Only a probe can tell: every disk and partition.
    AnyBlock,
}

impl RootDevice {
    /// The device a `root=` value names; `None` for a root that is no
    /// local block device (`/dev/nfs`, `tmpfs`, `fstab`) or no value.
    pub fn parse(value: &str) -> Option<RootDevice> {
        let v = value.trim();
        if v.is_empty() {
            return None;
        }
        if let Some(u) = v.strip_prefix("PARTUUID=") {
            // With /PARTNROFF= the root is another partition of that disk.
            return Some(match u.contains('/') {
                true => RootDevice::AnyBlock,
                false => RootDevice::PartUuid(u.to_ascii_lowercase().into_bytes()),
            });
        }
        if let Some(l) = v.strip_prefix("PARTLABEL=") {
            return Some(RootDevice::PartLabel(l.as_bytes().to_vec()));
        }
        if let Some(path) = v.strip_prefix("/dev/") {
            return Self::parse_dev(path);
        }
        if matches!(v, "nfs" | "cifs" | "tmpfs" | "fstab" | "off") {
            return None;
        }
        if let Some((maj, min)) = v.split_once(':') {
            if let (Ok(maj), Ok(min)) = (maj.parse(), min.parse()) {
                return Some(RootDevice::Number(maj, min));
            }
            // dracut's live:CDLABEL=..., nbd:..., iscsi: and the like.
            return Some(RootDevice::AnyBlock);
        }
        if v.bytes().all(|b| b.is_ascii_hexdigit()) {
            // The kernel's old encoding: hex, new_decode_dev().
            let n = u32::from_str_radix(v, 16).ok()?;
            let major = (n & 0xfff00) >> 8;
            let minor = (n & 0xff) | ((n >> 12) & 0xfff00);
            return Some(RootDevice::Number(major, minor));
        }
        if v.contains('=') || v.contains('/') {
            // UUID=, LABEL=, gpt-auto's cousins, zfs=...: only a probe knows.
            return Some(RootDevice::AnyBlock);
        }
        match v {
            "gpt-auto" => Some(RootDevice::AnyBlock),
            // A bare node name, as initramfs scripts accept it.
            name => Some(RootDevice::Name(name.as_bytes().to_vec())),
        }
    }

    fn parse_dev(path: &str) -> Option<RootDevice> {
        if path == "nfs" || path.is_empty() {
            return None;
        }
        let Some(link) = path.strip_prefix("disk/") else {
            return Some(match path.contains('/') {
                // /dev/mapper/root, /dev/vg/lv: made from other disks.
                true => RootDevice::AnyBlock,
                false => RootDevice::Name(path.as_bytes().to_vec()),
            });
        };
        let (kind, name) = link.split_once('/')?;
        Some(match kind {
            "by-partuuid" => RootDevice::PartUuid(name.to_ascii_lowercase().into_bytes()),
            "by-partlabel" if !name.contains('\\') => {
                RootDevice::PartLabel(name.as_bytes().to_vec())
            }
            "by-diskseq" => {
                let (seq, part) = match name.split_once("-part") {
                    Some((s, p)) => (s, p.parse().ok()),
                    None => (name, None),
                };
                match seq.parse() {
                    Ok(seq) => RootDevice::DiskSeq(seq, part),
                    Err(_) => RootDevice::AnyBlock,
                }
            }
            _ => RootDevice::AnyBlock,
        })
    }

    /// The root device named by the last `root=` of a kernel command line
    /// (words after `--` are init's, not the kernel's).
    pub fn from_cmdline_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Option<RootDevice> {
        let mut found = None;
        for w in words {
            if w == "--" {
                break;
            }
            if let Some(v) = w.strip_prefix("root=") {
                found = Some(v);
            }
        }
        found.and_then(RootDevice::parse)
    }

    /// Whether the event may be for the root device: a disk or partition
    /// that is not going away, and matches as far as its uevent tells.
    pub fn is_candidate(&self, ev: &Uevent) -> bool {
        if ev.action() == Action::Remove || ev.subsystem() != Some(b"block") {
            return false;
        }
        let partition = match ev.devtype() {
            Some(b"partition") => true,
            Some(b"disk") => false,
            _ => return false,
        };
        match self {
            RootDevice::Name(n) => ev.devname() == Some(n.as_slice()),
            RootDevice::Number(maj, min) => ev.devnum() == Some((*maj, *min)),
            RootDevice::PartLabel(l) => partition && ev.get(b"PARTNAME") == Some(l.as_slice()),
            RootDevice::PartUuid(u) => {
                partition
                    && ev
                        .get(b"PARTUUID")
                        .is_none_or(|p| p.eq_ignore_ascii_case(u))
            }
            RootDevice::DiskSeq(seq, part) => match (partition, part) {
                (false, _) => {
                    ev.get_str("DISKSEQ").and_then(|s| s.parse::<u64>().ok()) == Some(*seq)
                }
                // A partition carries its number, not its disk's sequence.
                (true, Some(p)) => ev.get_str("PARTN").and_then(|s| s.parse().ok()) == Some(*p),
                (true, None) => false,
            },
            RootDevice::AnyBlock => true,
        }
    }
}

/// The devpaths of the block devices in `sysfs` that may be the root
/// device, and of each of their ancestors that is a device, parents first:
/// what a coldplug sends or queues before everything else. A root named
/// by its node or number is looked up directly; one only a probe can
/// tell (`UUID=`, `LABEL=`) makes every disk and partition a candidate.
pub fn boot_critical(sysfs: &Sysfs, root: &RootDevice) -> Vec<Box<[u8]>> {
    let direct = match root {
        RootDevice::Name(name) if !name.contains(&b'/') => Some(
            sysfs
                .root()
                .join("class/block")
                .join(std::ffi::OsStr::from_bytes(name)),
        ),
        RootDevice::Number(major, minor) => Some(sysfs.devnum_link(true, (*major, *minor))),
        _ => None,
    };
    let paths: Vec<std::path::PathBuf> = match direct {
        Some(p) if p.exists() => vec![p],
        _ => match std::fs::read_dir(sysfs.root().join("class/block")) {
            Ok(entries) => entries.flatten().map(|e| e.path()).collect(),
            Err(_) => return Vec::new(),
        },
    };
    let mut found: BTreeSet<Box<[u8]>> = BTreeSet::new();
    // Ancestors already looked at: a thousand disks share a few hosts.
    let mut looked_at: HashSet<Vec<u8>> = HashSet::new();
    for path in paths {
        let Ok(real) = std::fs::canonicalize(&path) else {
            continue;
        };
        let Some(devpath) = sysfs.devpath_of(&real) else {
            continue;
        };
        match sysfs.read_event(Action::Add, &devpath) {
            Ok(ev) if root.is_candidate(&ev) => {}
            _ => continue,
        }
        // Each ancestor that is a device (has a uevent file), then it.
        for (i, _) in devpath
            .iter()
            .enumerate()
            .filter(|&(i, &c)| i > 0 && c == b'/')
        {
            let p = &devpath[..i];
            if looked_at.insert(p.to_vec()) && sysfs.syspath(p).join("uevent").is_file() {
                found.insert(p.into());
            }
        }
        found.insert(devpath.into());
    }
    // A devpath sorts before every devpath below it.
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(action: Action, devpath: &str, uevent: &str) -> Uevent {
        Uevent::synthesize(
            action,
            devpath.as_bytes(),
            Some(b"block"),
            uevent.as_bytes(),
            &[],
        )
        .unwrap()
    }

    #[test]
    fn root_forms_as_the_kernel_and_initramfs_take_them() {
        let p = RootDevice::parse;
        assert_eq!(p("/dev/sda2"), Some(RootDevice::Name(b"sda2".to_vec())));
        assert_eq!(
            p("nvme0n1p2"),
            Some(RootDevice::Name(b"nvme0n1p2".to_vec()))
        );
        assert_eq!(p("8:2"), Some(RootDevice::Number(8, 2)));
        assert_eq!(p("0802"), Some(RootDevice::Number(8, 2)));
        assert_eq!(p("fe01"), Some(RootDevice::Number(254, 1)));
        // new_decode_dev: minor bits above 255 sit above the major's.
        assert_eq!(p("103100"), Some(RootDevice::Number(0x31, 0x100)));
        assert_eq!(
            p("PARTUUID=ABCD-01"),
            Some(RootDevice::PartUuid(b"abcd-01".to_vec()))
        );
        assert_eq!(
            p("PARTUUID=abcd-01/PARTNROFF=1"),
            Some(RootDevice::AnyBlock)
        );
        assert_eq!(
            p("PARTLABEL=root"),
            Some(RootDevice::PartLabel(b"root".to_vec()))
        );
        assert_eq!(p("UUID=1234-5678"), Some(RootDevice::AnyBlock));
        assert_eq!(p("LABEL=rootfs"), Some(RootDevice::AnyBlock));
        assert_eq!(p("/dev/disk/by-uuid/1234"), Some(RootDevice::AnyBlock));
        assert_eq!(
            p("/dev/disk/by-partuuid/AB-02"),
            Some(RootDevice::PartUuid(b"ab-02".to_vec()))
        );
        assert_eq!(
            p("/dev/disk/by-partlabel/root"),
            Some(RootDevice::PartLabel(b"root".to_vec()))
        );
        assert_eq!(
            p("/dev/disk/by-diskseq/7"),
            Some(RootDevice::DiskSeq(7, None))
        );
        assert_eq!(
            p("/dev/disk/by-diskseq/7-part2"),
            Some(RootDevice::DiskSeq(7, Some(2)))
        );
        assert_eq!(p("/dev/mapper/root"), Some(RootDevice::AnyBlock));
        assert_eq!(p("live:CDLABEL=x"), Some(RootDevice::AnyBlock));
        assert_eq!(p("gpt-auto"), Some(RootDevice::AnyBlock));
        for none in ["", "/dev/nfs", "tmpfs", "fstab"] {
            assert_eq!(p(none), None, "{none}");
        }
        let words = "ro root=/dev/sda1 quiet root=UUID=x -- root=/dev/sdb".split(' ');
        assert_eq!(
            RootDevice::from_cmdline_words(words),
            Some(RootDevice::AnyBlock)
        );
        assert_eq!(RootDevice::from_cmdline_words("quiet".split(' ')), None);
    }

    #[test]
    fn candidates_are_matched_from_the_uevent_alone() {
        let disk = ev(
            Action::Add,
            "/devices/pci/block/sda",
            "MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\nDISKSEQ=7\n",
        );
        let part = ev(
            Action::Add,
            "/devices/pci/block/sda/sda2",
            "MAJOR=8\nMINOR=2\nDEVNAME=sda2\nDEVTYPE=partition\nPARTN=2\nPARTNAME=root\n",
        );
        let newer = ev(
            Action::Change,
            "/devices/pci/block/sda/sda2",
            "MAJOR=8\nMINOR=2\nDEVNAME=sda2\nDEVTYPE=partition\nPARTN=2\nPARTUUID=ab-02\n",
        );
        let gone = ev(
            Action::Remove,
            "/devices/pci/block/sda/sda2",
            "MAJOR=8\nMINOR=2\nDEVNAME=sda2\nDEVTYPE=partition\n",
        );
        let net = Uevent::synthesize(
            Action::Add,
            b"/devices/virtual/net/eth0",
            Some(b"net"),
            b"INTERFACE=eth0\nIFINDEX=2\n",
            &[],
        )
        .unwrap();
        let c = |r: &str, e: &Uevent| RootDevice::parse(r).unwrap().is_candidate(e);
        assert!(c("/dev/sda2", &part) && !c("/dev/sda2", &disk));
        assert!(c("8:2", &part) && c("0802", &newer) && !c("8:2", &disk));
        assert!(c("PARTLABEL=root", &part) && !c("PARTLABEL=boot", &part));
        assert!(c("PARTUUID=AB-02", &newer) && !c("PARTUUID=cd-01", &newer));
        assert!(c("PARTUUID=cd-01", &part), "no PARTUUID in 6.1's uevent");
        assert!(!c("PARTUUID=ab-02", &disk));
        assert!(c("/dev/disk/by-diskseq/7", &disk) && !c("/dev/disk/by-diskseq/8", &disk));
        assert!(c("/dev/disk/by-diskseq/7-part2", &part));
        assert!(c("UUID=x", &disk) && c("UUID=x", &part));
        assert!(!c("UUID=x", &gone) && !c("UUID=x", &net) && !c("/dev/sda2", &gone));
    }
}
