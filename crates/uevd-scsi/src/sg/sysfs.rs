//! The kernel's own copies of a SCSI device's INQUIRY data, so that an
//! INQUIRY the program would send can be answered without the device when
//! (and only when) the copy is exactly what the device would return.
//!
//! # What the kernel keeps (Linux 6.1; other versions noted)
//!
//! The directory is the `scsi_device`'s: `/sys/dev/{block,char}/M:m/device`
//! of the node opened (sd and sr disks, sg and the per-device bsg nodes all
//! link to it). Its attributes:
//!
//! * `inquiry`: the standard INQUIRY data from the scan, `scsi_probe_lun()`
//!   in drivers/scsi/scsi_scan.c. The first INQUIRY asks for 36 bytes (or
//!   the LLD's `sdev->inquiry_len`: usb-storage sets 36), a second one for
//!   `additional length + 5` (at most 255; capped to the LLD's length for
//!   pre-SPC-4 devices, to 36 with `BLIST_INQUIRY_36`). The buffer is zeroed
//!   before each try. The file holds `min(bytes asked, additional length +
//!   5)`, and never fewer than 36 (`scsi_add_lun()` copies at least 36).
//!   **But before storing it, the kernel rewrites the vendor (bytes 8..16),
//!   product (16..32) and revision (32..36) fields with
//!   `scsi_sanitize_inquiry_string()`: a NUL and every byte after it in the
//!   field, and every byte outside 0x20..=0x7e, become a space.** That is in
//!   every kernel version (still so in 6.x, with `INQUIRY_VENDOR_OFFSET`
//!   names). So a space in those fields may stand for a NUL (which ends
//!   scsi_id's C string) or a control or 8-bit byte (which
//!   `ID_VENDOR_ENC`/`ID_MODEL_ENC` would encode differently): the file is
//!   the device's answer only when none of bytes 8..36 is a space, which
//!   also proves the device transferred all 36 (zero fill would have become
//!   spaces). scsi_id reads nothing else of that buffer but byte 0 (the
//!   peripheral type, stored unchanged). Padded names ("Linux   ") are the
//!   norm, so in practice the standard INQUIRY still goes to the device.
//!
//! * `vpd_pg0`, `vpd_pg80`, `vpd_pg83` (and 89, b0, b1, b2, which scsi_id
//!   never asks for): `scsi_attach_vpd()` in drivers/scsi/scsi.c, at scan
//!   (`scsi_add_lun()`) and on rescan. Nothing is fetched unless
//!   `scsi_device_supports_vpd()`: `try_vpd_pages` (BLIST_TRY_VPD_PAGES), or
//!   `scsi_level >= SCSI_SPC_2` and not `skip_vpd_pages` (BLIST_SKIP_VPD_PAGES,
//!   and usb-storage sets it for every USB bridge). Page 0 is read first;
//!   then each of the cached pages that page 0 lists is read. A page is
//!   read by `scsi_get_vpd_buf()`: its size from a 4-byte header INQUIRY
//!   (`scsi_get_vpd_size()`, since 5.19; 255 with BLIST_NO_VPD_SIZE, and
//!   before 5.19 a first try with 255), then the page with exactly that
//!   allocation length (again, larger, if the page grew). It is kept only
//!   if the command succeeded, byte 1 is the page asked for and the page
//!   length (bytes 2..4) is not 0 (`scsi_vpd_inquiry()`); the file then
//!   holds exactly `page length + 4` bytes. `vpd_pg0` exists since 5.5
//!   (only when page 0 lists 0x00 itself, as SPC requires); `vpd_pg80` and
//!   `vpd_pg83` since 4.5, earlier kernels have none. A failed refetch on
//!   rescan keeps the old copy.
//!
//! # What the device would answer scsi_id
//!
//! scsi_id asks for 254 bytes (CDB byte 3 zero, byte 4 0xfe). A device
//! returns the first `min(allocation length, page length + 4)` bytes of
//! the same page (SPC: INQUIRY data is truncated to the allocation
//! length); scsi_id's buffer is zeroed before each command, so the rest
//! stays zero. An answer from a file is therefore its first
//! `min(254, len)` bytes, and is used only when:
//!
//! * the file is consistent with how the kernel stores a page: at least 4
//!   bytes, byte 1 the page code, `page length + 4` its exact size;
//! * the kernel's allocation length was a single byte (the file is at most
//!   255 bytes). An SPC-2 device only reads CDB byte 4 (byte 3 was
//!   reserved), so for a longer page it may have returned fewer bytes than
//!   the page length says, and the kernel's unzeroed buffer would then
//!   hold bytes the device never sent.
//!
//! Page 0 is answered from `vpd_pg0` only. Without it (kernels before 5.5,
//! or a page 0 that does not list itself) the cached 0x80 and 0x83 prove
//! that page 0 listed them, but not its length, its other entries, nor its
//! bytes 8..16, which scsi_id compares with the vendor to reject standard
//! INQUIRY data sent in place of page 0. So page 0 then goes to the device,
//! and the pages it leads to are still answered from their files.
//!
//! A command without such a file goes to the device exactly as before, on
//! its own: the others are still answered from the files. Each INQUIRY is
//! answered independently by a device, so mixing sources changes nothing.
//!
//! What this cannot see: a device whose pages changed since the kernel
//! last read them (the kernel rereads them on rescan), and a device that
//! transfers fewer bytes than its page length claims (the kernel does not
//! check the residue).

use super::DevNum;
#[cfg(test)]
use rustix::fd::AsFd;
use rustix::fd::{BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use std::path::Path;

/// scsi_id's allocation length.
pub(crate) const ALLOC: usize = 254;

/// The kernel's copies for one device, as read when the device was opened.
#[derive(Default, Debug, Clone)]
pub(crate) struct Cached {
    pub inquiry: Option<Vec<u8>>,
    pub pg0: Option<Vec<u8>>,
    pub pg80: Option<Vec<u8>>,
    pub pg83: Option<Vec<u8>>,
}

/// The `scsi_device` directory behind a node, if it is one, opened once:
/// its files are then each one path component for the kernel to look up.
/// Reached through `/sys/dev/{block,char}/M:m`, the directory is some
/// twenty components and two symlinks away, and sysfs lookups cannot take
/// the kernel's lock-free path walk.
pub(crate) fn device_dir(root: &Path, dev: DevNum) -> Option<OwnedFd> {
    let kind = if dev.block { "block" } else { "char" };
    let path = root
        .join("dev")
        .join(kind)
        .join(format!("{}:{}", dev.major, dev.minor))
        .join("device");
    scsi_only(rustix::fs::open(&path, DIR_FLAGS, Mode::empty()).ok()?)
}

/// [`device_dir`] from the node's own directory in sysfs, open already:
/// its `device` link is one component away.
pub(crate) fn device_dir_below(node_dir: BorrowedFd<'_>) -> Option<OwnedFd> {
    scsi_only(rustix::fs::openat(node_dir, "device", DIR_FLAGS, Mode::empty()).ok()?)
}

const DIR_FLAGS: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);

fn scsi_only(dir: OwnedFd) -> Option<OwnedFd> {
    // Only SCSI devices are answered for: the link says which bus.
    let bus = rustix::fs::readlinkat(&dir, "subsystem", Vec::new()).ok()?;
    if bus.as_bytes().rsplit(|&c| c == b'/').next() != Some(b"scsi") {
        return None;
    }
    Some(dir)
}

/// A binary attribute's whole content (under 4 KiB; longer is not used).
/// kernfs hands a binary attribute's content, up to a page, to a single
/// read (`memory_read_from_buffer()` on the kernel's copy), so a read that
/// returns less than it asked for has reached the end.
fn read_attr(dir: BorrowedFd<'_>, name: &str) -> Option<Vec<u8>> {
    const PAGE: usize = 4096;
    let fd = rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    // Read into spare capacity: four of these per SCSI disk event, and a
    // zeroed page each is work the read overwrites.
    let mut buf = Vec::with_capacity(PAGE);
    let asked = buf.capacity();
    let n = loop {
        match rustix::io::read(&fd, rustix::buffer::spare_capacity(&mut buf)) {
            Ok(n) => break n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    };
    (n < asked).then_some(buf)
}

impl Cached {
    /// Reads the attributes of the device behind `dev` under sysfs `root`.
    #[cfg(test)]
    pub fn load(root: &Path, dev: DevNum) -> Cached {
        match device_dir(root, dev) {
            Some(dir) => Cached::read(dir.as_fd()),
            None => Cached::default(),
        }
    }

    /// Reads the attributes in a `scsi_device` directory.
    pub fn read(dir: BorrowedFd<'_>) -> Cached {
        Cached {
            inquiry: read_attr(dir, "inquiry"),
            pg0: read_attr(dir, "vpd_pg0"),
            pg80: read_attr(dir, "vpd_pg80"),
            pg83: read_attr(dir, "vpd_pg83"),
        }
    }

    /// What the device would return to `INQUIRY evpd page` with scsi_id's
    /// allocation length, when the kernel's copy proves it.
    pub fn answer(&self, evpd: u8, page: u8) -> Option<&[u8]> {
        match (evpd, page) {
            (0, 0) => standard(self.inquiry.as_deref()?),
            (1, 0x00) => vpd_page(self.pg0.as_deref()?, 0x00),
            (1, 0x80) => vpd_page(self.pg80.as_deref()?, 0x80),
            (1, 0x83) => vpd_page(self.pg83.as_deref()?, 0x83),
            _ => None,
        }
    }
}

fn standard(inq: &[u8]) -> Option<&[u8]> {
    if inq.len() < 36 || inq[8..36].contains(&b' ') {
        return None;
    }
    Some(&inq[..inq.len().min(ALLOC)])
}

fn vpd_page(p: &[u8], page: u8) -> Option<&[u8]> {
    if p.len() < 4 || p.len() > 255 || p[1] != page {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([p[2], p[3]]));
    if len == 0 || len + 4 != p.len() {
        return None;
    }
    Some(&p[..p.len().min(ALLOC)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(code: u8, payload: usize) -> Vec<u8> {
        let mut p = vec![0, code];
        p.extend_from_slice(&(payload as u16).to_be_bytes());
        p.extend((0..payload).map(|i| i as u8));
        p
    }

    #[test]
    fn vpd_pages_are_truncated_to_the_allocation_length() {
        let c = Cached {
            pg83: Some(page(0x83, 251)),
            pg80: Some(page(0x80, 20)),
            ..Cached::default()
        };
        assert_eq!(c.answer(1, 0x83).unwrap().len(), 254);
        assert_eq!(c.answer(1, 0x80).unwrap().len(), 24);
        assert!(c.answer(1, 0x00).is_none());
        assert!(c.answer(1, 0xb0).is_none());
    }

    #[test]
    fn inconsistent_or_long_pages_are_not_used() {
        let long = Cached {
            pg83: Some(page(0x83, 252)),
            ..Cached::default()
        };
        assert!(long.answer(1, 0x83).is_none());
        let mut wrong_len = page(0x80, 10);
        wrong_len.push(0);
        let mut wrong_code = page(0x80, 10);
        wrong_code[1] = 0x83;
        for p in [wrong_len, wrong_code, page(0x80, 0), vec![0, 0x80]] {
            let c = Cached {
                pg80: Some(p),
                ..Cached::default()
            };
            assert!(c.answer(1, 0x80).is_none());
        }
    }

    #[test]
    fn standard_inquiry_only_without_sanitized_bytes() {
        let mut inq = vec![0u8; 36];
        inq[8..36].copy_from_slice(b"VENDOR01PRODUCT_NAME_16CREV1");
        let c = Cached {
            inquiry: Some(inq.clone()),
            ..Cached::default()
        };
        assert_eq!(c.answer(0, 0), Some(&inq[..]));
        inq[15] = b' ';
        let c = Cached {
            inquiry: Some(inq),
            ..Cached::default()
        };
        assert!(c.answer(0, 0).is_none());
    }

    #[test]
    fn the_device_directory_is_looked_up_once_for_all_its_files() {
        use std::os::unix::fs::symlink;
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let sdev = r.join("devices/host0/target0:0:0/0:0:0:0");
        std::fs::create_dir_all(sdev.join("block/sda")).unwrap();
        std::fs::create_dir_all(r.join("bus/scsi")).unwrap();
        std::fs::create_dir_all(r.join("dev/block")).unwrap();
        symlink("../../../../bus/scsi", sdev.join("subsystem")).unwrap();
        symlink("../../../0:0:0:0", sdev.join("block/sda/device")).unwrap();
        symlink(
            "../../devices/host0/target0:0:0/0:0:0:0/block/sda",
            r.join("dev/block/8:0"),
        )
        .unwrap();
        let pg83 = page(0x83, 20);
        std::fs::write(sdev.join("vpd_pg83"), &pg83).unwrap();
        std::fs::write(sdev.join("vpd_pg80"), page(0x80, 8)).unwrap();
        let num = DevNum {
            block: true,
            major: 8,
            minor: 0,
        };
        let dir = device_dir(r, num).expect("a scsi device");
        // Once open, the files are found from the directory: the way there
        // is not walked again, so its going away changes nothing.
        std::fs::remove_file(r.join("dev/block/8:0")).unwrap();
        assert_eq!(read_attr(dir.as_fd(), "vpd_pg83"), Some(pg83));
        assert!(read_attr(dir.as_fd(), "vpd_pg0").is_none());
        // A whole page may be cut short: not taken as the device's answer.
        std::fs::write(sdev.join("vpd_pg89"), [0u8; 4096]).unwrap();
        assert!(read_attr(dir.as_fd(), "vpd_pg89").is_none());
        std::fs::write(sdev.join("vpd_pg89"), [7u8; 4095]).unwrap();
        assert_eq!(read_attr(dir.as_fd(), "vpd_pg89"), Some(vec![7u8; 4095]));
        assert!(Cached::load(r, num).pg80.is_none(), "the link is gone");
        symlink(
            "../../devices/host0/target0:0:0/0:0:0:0/block/sda",
            r.join("dev/block/8:0"),
        )
        .unwrap();
        let c = Cached::load(r, num);
        assert_eq!(c.answer(1, 0x83).map(<[u8]>::len), Some(24));
        assert_eq!(c.answer(1, 0x80).map(<[u8]>::len), Some(12));
        assert!(c.inquiry.is_none() && c.pg0.is_none());
    }

    #[test]
    fn the_event_devices_scsi_directory_is_one_component_from_its_own() {
        use super::super::{Near, Open, SystemNear};
        use std::os::unix::fs::symlink;
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let sdev = r.join("devices/host0/target0:0:0/0:0:0:0");
        let disk = sdev.join("block/sda");
        std::fs::create_dir_all(&disk).unwrap();
        std::fs::create_dir_all(r.join("bus/scsi")).unwrap();
        symlink("../../../../bus/scsi", sdev.join("subsystem")).unwrap();
        symlink("../../../0:0:0:0", disk.join("device")).unwrap();
        std::fs::write(sdev.join("vpd_pg80"), page(0x80, 8)).unwrap();
        // No /sys/dev under this root: only the event's directory leads
        // to the device.
        let node_dir = std::fs::File::open(&disk).unwrap();
        let near = Near {
            block: true,
            major: 8,
            minor: 0,
            dir: node_dir.as_fd(),
            node: None,
            scsi_device: None,
        };
        let num = |major, block| DevNum {
            block,
            major,
            minor: 0,
        };
        let system = SystemNear(near);
        let dir = system
            .scsi_device_dir(num(8, true))
            .expect("the event's node");
        let c = Cached::read(dir.as_fd());
        assert_eq!(c.answer(1, 0x80).map(<[u8]>::len), Some(12));
        // Another node, or a character device of the same number, is not
        // the event's: looked up through /sys/dev as before.
        assert!(device_dir(r, num(8, true)).is_none());
        for other in [num(9, true), num(8, false)] {
            let found = system.scsi_device_dir(other).is_some();
            let real = device_dir(Path::new("/sys"), other);
            assert_eq!(found, real.is_some());
        }
        // A device that is not SCSI has no copies to answer from.
        std::fs::remove_file(sdev.join("subsystem")).unwrap();
        symlink("../../../../bus/scsi", sdev.join("other")).unwrap();
        assert!(SystemNear(near).scsi_device_dir(num(8, true)).is_none());
    }

    /// The `scsi_device` directory the event holds answers for its own
    /// node, and only for it: no link is read, nothing is opened.
    #[test]
    fn the_scsi_directory_the_event_holds_is_used_as_it_is() {
        use super::super::{Near, Open, SystemNear};
        let root = tempfile::tempdir().unwrap();
        let sdev = root.path().join("0:0:0:0");
        std::fs::create_dir_all(sdev.join("block/sda")).unwrap();
        std::fs::write(sdev.join("vpd_pg80"), page(0x80, 8)).unwrap();
        // Neither a `device` link nor a `subsystem` one: only what the
        // event holds can lead to the copies.
        let node_dir = std::fs::File::open(sdev.join("block/sda")).unwrap();
        let held = std::fs::File::open(&sdev).unwrap();
        let near = Near {
            block: true,
            major: 8,
            minor: 0,
            dir: node_dir.as_fd(),
            node: None,
            scsi_device: Some(held.as_fd()),
        };
        let num = |major| DevNum {
            block: true,
            major,
            minor: 0,
        };
        let system = SystemNear(near);
        let dir = system.scsi_device_dir(num(8)).expect("held");
        assert_eq!(
            Cached::read(dir.as_fd()).answer(1, 0x80).map(<[u8]>::len),
            Some(12)
        );
        drop(dir);
        assert!(rustix::fs::fstat(&held).is_ok(), "still the event's");
        let other = system.scsi_device_dir(num(9)).is_some();
        assert_eq!(other, device_dir(Path::new("/sys"), num(9)).is_some());
    }

    #[test]
    fn the_events_node_open_already_is_shared_not_opened_again() {
        use super::super::{Near, Open, SystemNear};
        let root = tempfile::tempdir().unwrap();
        let held = std::fs::File::create(root.path().join("held")).unwrap();
        let dir = std::fs::File::open(root.path()).unwrap();
        let near = Near {
            block: true,
            major: 8,
            minor: 0,
            dir: dir.as_fd(),
            node: Some((b"/dev/nowhere/sdq", held.as_fd())),
            scsi_device: None,
        };
        // The path names nothing on disk: only the node held can answer.
        let node = SystemNear(near).open(b"/dev/nowhere/sdq").expect("shared");
        assert!(node.devnum().is_none(), "a regular file, as held");
        let err = SystemNear(near).open(b"/dev/nowhere/sdr").err().unwrap();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        drop(node);
        // Closing the program's copy leaves the event's open.
        assert!(rustix::fs::fstat(&held).is_ok());
    }
}
