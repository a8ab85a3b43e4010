//! `path_id`: a name for where a device sits in the hardware topology
//! (`pci-0000:00:09.0-usb-0:1:1.0`), for `/dev/disk/by-path` and friends.
//!
//! The walk goes from the device up to the root, and each bus it recognises
//! prepends its part. Some buses jump ahead (SCSI to its host, runs of USB
//! or PCI devices to the last one) so that the name holds one part per
//! level that matters; a handler that cannot make sense of its device ends
//! the walk, keeping what was built so far.

use crate::scan::{atollu, atou, sscanf};
use crate::{attr, set, skip_subsystem, subsystem_is, sysname, Builtin, Call, Failure, Properties};
use std::rc::Rc;
use uevd_sysfs::Device;

pub struct PathId;

impl Builtin for PathId {
    fn name(&self) -> &'static str {
        "path_id"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        let dev = call.device;
        let mut walk = Walk::default();
        let mut next = Some(dev.clone());
        while let Some(parent) = next {
            let Some(parent) = walk.step(dev, parent)? else {
                break;
            };
            next = parent.parent();
        }
        let Some(path) = walk.path else {
            return Err(Failure::NotApplicable(
                "no part of the path is known".into(),
            ));
        };
        // Without a known parent, two devices could end up with the same
        // name: udev prefers no name.
        if !walk.supported_parent {
            return Err(Failure::NotApplicable(
                "no parent bus with stable names".into(),
            ));
        }
        // Block devices on buses that do not expose a unique address would
        // get names that say nothing.
        if subsystem_is(dev, "block") && !walk.supported_transport {
            return Err(Failure::NotApplicable(
                "block device on an unknown transport".into(),
            ));
        }
        let tag = tag(&path);
        set(out, "ID_PATH", path);
        set(out, "ID_PATH_TAG", tag);
        if let Some(compat) = walk.compat {
            set(out, "ID_PATH_ATA_COMPAT", compat);
        }
        Ok(())
    }
}

/// ID_PATH made into a tag name: only alphanumerics and `-`, every other
/// run of bytes a single `_`, none at either end.
/// The subdirectories and symlinks of a directory not held as a device's
/// (names starting with '.' left out).
fn subdirs_and_links(dir: &std::path::Path) -> Vec<Box<[u8]>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir() || t.is_symlink()))
        .map(|e| {
            Box::<[u8]>::from(std::os::unix::ffi::OsStrExt::as_bytes(
                e.file_name().as_os_str(),
            ))
        })
        .filter(|n| !n.starts_with(b"."))
        .collect()
}

fn tag(path: &[u8]) -> Vec<u8> {
    let mut tag = Vec::with_capacity(path.len());
    for &c in path {
        if c.is_ascii_alphanumeric() || c == b'-' {
            tag.push(c);
        } else if !tag.is_empty() && tag.last() != Some(&b'_') {
            tag.push(b'_');
        }
    }
    while tag.last() == Some(&b'_') {
        tag.pop();
    }
    tag
}

fn prepend(path: &mut Option<Vec<u8>>, part: impl AsRef<[u8]>) {
    let mut new = part.as_ref().to_vec();
    if let Some(old) = path.take() {
        new.push(b'-');
        new.extend_from_slice(&old);
    }
    *path = Some(new);
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// What a handler gives back: the device the walk continues above, or
/// None to stop.
type Next = Option<Rc<Device>>;

#[derive(Default)]
struct Walk {
    path: Option<Vec<u8>>,
    /// The old `by-path/...-ata-N` name, started by the ATA handler.
    compat: Option<Vec<u8>>,
    supported_transport: bool,
    supported_parent: bool,
}

impl Walk {
    /// A bus whose devices are named by their sysfs name.
    fn named(&mut self, parent: &Rc<Device>, bus: &str, transport: bool) -> Next {
        let part = cat(&[bus.as_bytes(), b"-", &sysname(parent)]);
        prepend(&mut self.path, &part);
        if self.compat.is_some() {
            prepend(&mut self.compat, &part);
        }
        self.supported_parent = true;
        self.supported_transport |= transport;
        Some(skip_subsystem(parent, bus))
    }

    fn step(&mut self, dev: &Rc<Device>, parent: Rc<Device>) -> Result<Next, Failure> {
        let Some(subsystem) = parent.subsystem().map(<[u8]>::to_vec) else {
            return Ok(Some(parent));
        };
        Ok(match subsystem.as_slice() {
            b"scsi_tape" => {
                self.scsi_tape(&parent);
                Some(parent)
            }
            b"scsi" => {
                self.supported_transport = true;
                self.scsi(parent)
            }
            b"cciss" => {
                self.supported_transport = true;
                self.cciss(&parent)
            }
            b"usb" => {
                self.supported_transport = true;
                self.usb(parent)
            }
            b"bcma" => {
                self.supported_transport = true;
                let core = sscanf(&sysname(&parent), "bcma%*u:%u");
                match core.first() {
                    Some(core) => {
                        prepend(&mut self.path, format!("bcma-{}", core.uint()));
                        Some(parent)
                    }
                    None => None,
                }
            }
            b"serio" => match parent.sysnum() {
                Some(n) => {
                    prepend(&mut self.path, cat(&[b"serio-", n]));
                    Some(skip_subsystem(&parent, "serio"))
                }
                None => Some(parent),
            },
            b"pci" => self.named(&parent, "pci", false),
            b"platform" => self.named(&parent, "platform", true),
            b"acpi" => self.named(&parent, "acpi", false),
            b"xen" => self.named(&parent, "xen", false),
            b"scm" => self.named(&parent, "scm", true),
            b"ccw" => self.named(&parent, "ccw", true),
            b"ccwgroup" => self.named(&parent, "ccwgroup", true),
            b"iucv" => self.named(&parent, "iucv", true),
            b"virtio" => {
                self.supported_transport = true;
                Some(skip_subsystem(&parent, "virtio"))
            }
            b"ap" => {
                self.supported_transport = true;
                self.supported_parent = true;
                match (attr(&parent, "type"), attr(&parent, "ap_functions")) {
                    (Some(t), Some(f)) => prepend(&mut self.path, cat(&[b"ap-", &t, b"-", &f])),
                    _ => prepend(&mut self.path, cat(&[b"ap-", &sysname(&parent)])),
                }
                Some(skip_subsystem(&parent, "ap"))
            }
            b"nvme" | b"nvme-subsystem" => {
                // The namespace id is the event device's, whichever level
                // of the NVMe stack the walk is at.
                let Some(nsid) = attr(dev, "nsid") else {
                    return Ok(Some(parent));
                };
                let part = cat(&[b"nvme-", &nsid]);
                prepend(&mut self.path, &part);
                if self.compat.is_some() {
                    prepend(&mut self.compat, &part);
                }
                // A multipath namespace continues from its controller, in
                // another branch of the tree.
                let mut at = parent;
                if subsystem == b"nvme-subsystem" {
                    at = real_nvme_parent(dev)?;
                }
                self.supported_parent = true;
                self.supported_transport = true;
                Some(skip_subsystem(&at, "nvme"))
            }
            b"spi" => match parent.sysnum() {
                Some(n) => {
                    prepend(&mut self.path, cat(&[b"cs-", n]));
                    Some(skip_subsystem(&parent, "spi"))
                }
                None => Some(parent),
            },
            _ => Some(parent),
        })
    }

    /// Tape devices name their rewind mode, but only as the first part.
    fn scsi_tape(&mut self, dev: &Device) {
        if self.path.is_some() {
            return;
        }
        let name = sysname(dev);
        // udev looks up the byte after the prefix in "lma" with strchr(),
        // which also finds the terminating NUL: a bare "st" matches.
        let mode = |i: usize| {
            let c = name.get(i).copied().unwrap_or(0);
            b"lma\0".contains(&c).then_some(c)
        };
        if name.starts_with(b"nst") {
            if let Some(c) = mode(3) {
                prepend(&mut self.path, cat(&[b"nst", &[c][..(c != 0) as usize]]));
            }
        } else if name.starts_with(b"st") {
            if let Some(c) = mode(2) {
                prepend(&mut self.path, cat(&[b"st", &[c][..(c != 0) as usize]]));
            }
        }
    }

    fn scsi(&mut self, parent: Rc<Device>) -> Next {
        if parent.devtype() != Some(b"scsi_device") {
            return Some(parent);
        }
        if let Some(id) = attr(&parent, "ieee1394_id") {
            prepend(&mut self.path, cat(&[b"ieee1394-0x", &id]));
            self.supported_parent = true;
            return Some(skip_subsystem(&parent, "scsi"));
        }
        // The transport has no subsystem of its own in sysfs; its class
        // devices only show in the path.
        let devpath = parent.devpath();
        let has = |s: &[u8]| devpath.windows(s.len()).any(|w| w == s);
        if has(b"/rport-") {
            self.supported_parent = true;
            return self.fibre_channel(parent);
        }
        if has(b"/end_device-") {
            self.supported_parent = true;
            return self.sas(parent);
        }
        if has(b"/session") {
            self.supported_parent = true;
            return self.iscsi(parent);
        }
        if has(b"/ata") {
            return self.ata(parent);
        }
        if has(b"/vmbus_") {
            return self.hyperv(parent, 37);
        }
        if has(b"/VMBUS") {
            return self.hyperv(parent, 38);
        }
        self.scsi_default(parent)
    }

    fn fibre_channel(&mut self, parent: Rc<Device>) -> Next {
        let target = parent.parent_with_subsystem(b"scsi", Some(b"scsi_target"))?;
        let fc = parent
            .sysfs()
            .device_by_subsystem_sysname(b"fc_transport", &sysname(&target))?;
        let port = attr(&fc, "port_name")?;
        let lun = lun(&parent);
        prepend(&mut self.path, cat(&[b"fc-", &port, b"-", &lun]));
        Some(parent)
    }

    fn sas_wide_port(&mut self, parent: Rc<Device>) -> Next {
        let target = parent.parent_with_subsystem(b"scsi", Some(b"scsi_target"))?;
        let end_device = target.parent()?;
        let sas = parent
            .sysfs()
            .device_by_subsystem_sysname(b"sas_device", &sysname(&end_device))?;
        let address = attr(&sas, "sas_address")?;
        let lun = lun(&parent);
        prepend(&mut self.path, cat(&[b"sas-", &address, b"-", &lun]));
        Some(parent)
    }

    fn sas(&mut self, parent: Rc<Device>) -> Next {
        let sysfs = parent.sysfs().clone();
        let target = parent.parent_with_subsystem(b"scsi", Some(b"scsi_target"))?;
        let end_device = target.parent()?;
        let target_sas = sysfs.device_by_subsystem_sysname(b"sas_device", &sysname(&end_device))?;
        let port = end_device.parent()?;
        let port_sas = sysfs.device_by_subsystem_sysname(b"sas_port", &sysname(&port))?;
        let phys = attr(&port_sas, "num_phys")?;
        if phys != b"1" {
            return self.sas_wide_port(parent);
        }
        let phy = attr(&target_sas, "phy_identifier")?;
        // The port hangs off either the HBA or an expander; only an
        // expander is a sas_device with an address of its own.
        let expander = port.parent()?;
        let mut address = None;
        if let Some(exp) = sysfs.device_by_subsystem_sysname(b"sas_device", &sysname(&expander)) {
            address = Some(attr(&exp, "sas_address")?);
        }
        let lun = lun(&parent);
        let part = match address {
            Some(a) => cat(&[b"sas-exp", &a, b"-phy", &phy, b"-", &lun]),
            None => cat(&[b"sas-phy", &phy, b"-", &lun]),
        };
        prepend(&mut self.path, part);
        Some(parent)
    }

    fn iscsi(&mut self, parent: Rc<Device>) -> Next {
        let mut session = parent.clone();
        loop {
            session = session.parent()?;
            if sysname(&session).starts_with(b"session") {
                break;
            }
        }
        let sysfs = parent.sysfs().clone();
        let session_dev =
            sysfs.device_by_subsystem_sysname(b"iscsi_session", &sysname(&session))?;
        let target = attr(&session_dev, "targetname")?;
        let num = session.sysnum()?;
        let conn_name = cat(&[b"connection", num, b":0"]);
        let conn = sysfs.device_by_subsystem_sysname(b"iscsi_connection", &conn_name)?;
        let addr = attr(&conn, "persistent_address")?;
        let port = attr(&conn, "persistent_port")?;
        let lun = lun(&parent);
        prepend(
            &mut self.path,
            cat(&[b"ip-", &addr, b":", &port, b"-iscsi-", &target, b"-", &lun]),
        );
        Some(parent)
    }

    fn ata(&mut self, parent: Rc<Device>) -> Next {
        let hctl = sscanf(&sysname(&parent), "%u:%u:%u:%u");
        if hctl.len() != 4 {
            return None;
        }
        let (bus, target) = (hctl[1].uint(), hctl[2].uint());
        let host = parent.parent_with_subsystem(b"scsi", Some(b"scsi_host"))?;
        let port_dev = host.parent()?;
        let port = parent
            .sysfs()
            .device_by_subsystem_sysname(b"ata_port", &sysname(&port_dev))?;
        let port_no = attr(&port, "port_no")?;
        let link = if bus != 0 {
            // Behind a port multiplier.
            format!(".{bus}.0")
        } else {
            format!(".{target}")
        };
        prepend(&mut self.path, cat(&[b"ata-", &port_no, link.as_bytes()]));
        prepend(&mut self.compat, cat(&[b"ata-", &port_no]));
        Some(parent)
    }

    fn hyperv(&mut self, parent: Rc<Device>, guid_len: usize) -> Next {
        let host = parent.parent_with_subsystem(b"scsi", Some(b"scsi_host"))?;
        let vmbus = host.parent()?;
        let guid = attr(&vmbus, "device_id")?;
        if guid.len() < guid_len || guid[0] != b'{' || guid[guid_len - 1] != b'}' {
            return None;
        }
        let guid: Vec<u8> = guid[1..guid_len - 1]
            .iter()
            .copied()
            .filter(|&c| c != b'-')
            .collect();
        let lun = lun(&parent);
        prepend(&mut self.path, cat(&[b"vmbus-", &guid, b"-", &lun]));
        Some(parent)
    }

    fn scsi_default(&mut self, parent: Rc<Device>) -> Next {
        let host = parent.parent_with_subsystem(b"scsi", Some(b"scsi_host"))?;
        let hctl = sscanf(&sysname(&parent), "%d:%d:%d:%d");
        if hctl.len() != 4 {
            return None;
        }
        // udev rebases the host number on the lowest host of the same
        // controller; it says itself this is racy, but the names depend
        // on it. The controller's directory, its subdirectories and links
        // named hostN: listed once for all the disks behind it while the
        // controller is remembered.
        let controller = host.parent().filter(|c| {
            host.devpath()
                .strip_prefix(c.devpath())
                .is_some_and(|rest| rest.first() == Some(&b'/') && !rest[1..].contains(&b'/'))
        });
        let names: uevd_sysfs::Names = match controller.and_then(|c| c.subdirs_and_links()) {
            Some(names) => names,
            None => subdirs_and_links(host.syspath().parent()?).into(),
        };
        let mut base: i32 = -1;
        for name in names.iter().filter(|n| n.starts_with(b"host")) {
            let Some(n) = atou(&name[4..], 10) else {
                continue;
            };
            if base == -1 || (n as i32) < base {
                base = n as i32;
            }
        }
        if base == -1 {
            return Some(host);
        }
        let h = hctl[0].int().wrapping_sub(base);
        prepend(
            &mut self.path,
            format!(
                "scsi-{h}:{}:{}:{}",
                hctl[1].int(),
                hctl[2].int(),
                hctl[3].int()
            ),
        );
        Some(host)
    }

    fn cciss(&mut self, parent: &Rc<Device>) -> Next {
        let cd = sscanf(&sysname(parent), "c%ud%u%*s");
        if cd.len() != 2 {
            return None;
        }
        prepend(&mut self.path, format!("cciss-disk{}", cd[1].uint()));
        Some(skip_subsystem(parent, "cciss"))
    }

    fn usb(&mut self, parent: Rc<Device>) -> Next {
        if !matches!(
            parent.devtype(),
            Some(b"usb_interface") | Some(b"usb_device")
        ) {
            return Some(parent);
        }
        let name = sysname(&parent);
        let Some(dash) = name.iter().position(|&c| c == b'-') else {
            return Some(parent);
        };
        // The bus number is not stable across boots; the port chain after
        // it is, so udev always writes bus 0.
        prepend(&mut self.path, cat(&[b"usb-0:", &name[dash + 1..]]));
        Some(skip_subsystem(&parent, "usb"))
    }
}

/// The LUN part of SCSI transport names. Linux LUNs are 32 bits; beyond
/// 255 udev writes them in the SAM addressing form. When the number is not
/// there, udev formats a NULL pointer, which glibc prints as "(null)".
fn lun(dev: &Device) -> Vec<u8> {
    let Some(lun) = dev.sysnum().and_then(|n| atollu(n, 10)) else {
        return b"(null)".to_vec();
    };
    if lun < 256 {
        format!("lun-{lun}").into_bytes()
    } else {
        format!(
            "lun-0x{:04x}{:04x}00000000",
            lun & 0xffff,
            (lun >> 16) & 0xffff
        )
        .into_bytes()
    }
}

/// For a namespace of a multipath NVMe subsystem, the controller it is
/// reached through (`nvme0n1` → `nvme0`). Fabrics controllers are virtual
/// and have no path.
fn real_nvme_parent(dev: &Device) -> Result<Rc<Device>, Failure> {
    let name = sysname(dev);
    let Some(rest) = name.strip_prefix(b"nvme") else {
        return Err(Failure::NotApplicable("not an NVMe namespace".into()));
    };
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    let ctrl = &name[..4 + digits];
    let Some(nvme) = dev.sysfs().device_by_subsystem_sysname(b"nvme", ctrl) else {
        return Err(Failure::Error(format!(
            "no NVMe controller {}",
            String::from_utf8_lossy(ctrl)
        )));
    };
    if nvme.devpath().starts_with(b"/devices/virtual/") {
        return Err(Failure::NotApplicable("NVMe controller is virtual".into()));
    }
    Ok(Rc::new(nvme))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_keep_alphanumerics_and_dashes() {
        assert_eq!(
            tag(b"pci-0000:00:09.0-usb-0:1:1.0"),
            b"pci-0000_00_09_0-usb-0_1_1_0"
        );
        assert_eq!(tag(b"acpi-LNXPWRBN:00"), b"acpi-LNXPWRBN_00");
        assert_eq!(tag(b"::a..b::"), b"a_b");
        assert_eq!(tag("x\u{e9}y".as_bytes()), b"x_y");
        assert_eq!(
            tag(b"platform-alarmtimer.0.auto"),
            b"platform-alarmtimer_0_auto"
        );
    }

    #[test]
    fn prepend_joins_with_dashes() {
        let mut p = None;
        prepend(&mut p, "b");
        prepend(&mut p, "a");
        assert_eq!(p.as_deref(), Some(&b"a-b"[..]));
    }
}
