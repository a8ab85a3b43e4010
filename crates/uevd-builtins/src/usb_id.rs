//! `usb_id`: vendor, model, serial and type of a USB device, for
//! `/dev/disk/by-id`, `/dev/input/by-id` and friends.
//!
//! Mass storage that speaks SCSI (or ATAPI) is named after its SCSI inquiry
//! data, which is what identifies the medium; everything else after the
//! USB descriptors' strings, falling back to the numeric ids.

use crate::scan::{atoi, atou, sscanf};
use crate::text::{c_str, encode_devnode_name, sanitize, Bounded};
use crate::{attr, set, Builtin, Call, Failure, Properties};
use uevd_sysfs::Device;

pub struct UsbId;

/// udev's buffer sizes for these strings; values are cut to fit.
const ID_LEN: usize = 64 - 1;
const ENC_SIZE: usize = 256;
const SERIAL_LEN: usize = 512 - 1;
const SERIAL_SIZE: usize = 256;
const INTERFACES_SIZE: usize = 512;

/// The interface class, as a word for ID_TYPE.
fn interface_type(class: u32) -> &'static str {
    match class {
        1 => "audio",
        3 => "hid",
        6 => "media",
        7 => "printer",
        8 => "storage",
        9 => "hub",
        0x0e => "video",
        _ => "generic",
    }
}

/// The mass storage subclass: ID_TYPE, and the number that decides whether
/// SCSI inquiry data names the device.
fn mass_storage_type(subclass: &[u8]) -> (&'static str, i32) {
    let Some(n) = atoi(subclass) else {
        return ("generic", 0);
    };
    let name = match n {
        1 => "rbc",
        2 => "atapi",
        3 => "tape",
        4 => "floppy",
        6 => "scsi",
        _ => "generic",
    };
    (name, n)
}

fn scsi_type(t: &[u8]) -> &'static str {
    match atou(t, 0) {
        Some(0 | 0xe) => "disk",
        Some(1) => "tape",
        Some(4 | 7 | 0xf) => "optical",
        Some(5) => "cd",
        _ => "generic",
    }
}

/// `:ccsspp:` for every distinct interface class/subclass/protocol in the
/// device's descriptors. As in udev: one read of the `descriptors` file
/// (sysfs hands out one page per read), a list cut short where the data
/// turns out to be corrupt, and nothing if the file is short.
fn interfaces(usb: &Device) -> Vec<u8> {
    // Read into spare capacity: the kernel fills what it has (a few
    // hundred bytes for most devices), and zeroing 64 KiB first for each
    // USB device's events would be work the read does not need.
    let mut buf = Vec::with_capacity(18 + 65535);
    if let Ok(f) = std::fs::File::open(usb.syspath().join("descriptors")) {
        while let Err(rustix::io::Errno::INTR) =
            rustix::io::read(&f, rustix::buffer::spare_capacity(&mut buf))
        {}
    }
    let size = buf.len();
    if size < 18 {
        return Vec::new();
    }
    const IF_DESC_LEN: usize = 9;
    const USB_DT_INTERFACE: u8 = 0x04;
    let mut list = Vec::new();
    let mut pos = 0;
    while pos + IF_DESC_LEN < size && list.len() + 7 < INTERFACES_SIZE - 2 {
        let desc = &buf[pos..pos + IF_DESC_LEN];
        let len = usize::from(desc[0]);
        if len < 3 {
            break;
        }
        if len > size - IF_DESC_LEN {
            return list;
        }
        pos += len;
        if desc[1] != USB_DT_INTERFACE {
            continue;
        }
        let entry = format!(":{:02x}{:02x}{:02x}", desc[5], desc[6], desc[7]).into_bytes();
        if list.windows(entry.len()).any(|w| w == entry.as_slice()) {
            continue;
        }
        list.extend_from_slice(&entry);
    }
    if !list.is_empty() {
        list.push(b':');
    }
    list
}

#[derive(Default)]
struct Ids {
    vendor: Vec<u8>,
    vendor_enc: Vec<u8>,
    model: Vec<u8>,
    model_enc: Vec<u8>,
    revision: Vec<u8>,
    serial: Vec<u8>,
    kind: &'static str,
    instance: Vec<u8>,
}

impl Ids {
    /// Vendor, model, type and revision from the SCSI device below a mass
    /// storage interface. Stops at the first thing missing, keeping what
    /// it already set; the USB strings fill in the rest.
    fn fill_from_scsi(&mut self, dev: &Device) -> Option<()> {
        let scsi = dev.parent_with_subsystem(b"scsi", Some(b"scsi_device"))?;
        let hctl = sscanf(&crate::sysname(&scsi), "%d:%d:%d:%d");
        if hctl.len() != 4 {
            return None;
        }
        let vendor = attr(&scsi, "vendor")?;
        self.vendor_enc = encode_devnode_name(&vendor, ENC_SIZE);
        self.vendor = sanitize(&vendor, ID_LEN);
        let model = attr(&scsi, "model")?;
        self.model_enc = encode_devnode_name(&model, ENC_SIZE);
        self.model = sanitize(&model, ID_LEN);
        self.kind = scsi_type(&attr(&scsi, "type")?);
        self.revision = sanitize(&attr(&scsi, "rev")?, ID_LEN);
        // Some devices report the same identity for every LUN.
        self.instance = format!("{}:{}", hctl[2].int(), hctl[3].int()).into_bytes();
        Some(())
    }
}

impl Builtin for UsbId {
    fn name(&self) -> &'static str {
        "usb_id"
    }

    fn run(&self, call: &Call<'_>, out: &mut Properties) -> Result<(), Failure> {
        let dev = call.device;
        let mut ids = Ids::default();
        let mut ifnum = None;
        let mut driver = None;
        let packed;
        let usb = if dev.devtype() == Some(b"usb_device") {
            packed = interfaces(dev);
            dev.clone()
        } else {
            let Some(interface) = dev.parent_with_subsystem(b"usb", Some(b"usb_interface")) else {
                return Err(Failure::NotApplicable(
                    "no USB interface above the device".into(),
                ));
            };
            ifnum = attr(&interface, "bInterfaceNumber");
            driver = attr(&interface, "driver");
            let class = attr(&interface, "bInterfaceClass")
                .ok_or_else(|| Failure::Error("USB interface has no bInterfaceClass".into()))?;
            let class = atou(&class, 16).ok_or_else(|| {
                Failure::Error(format!(
                    "bad bInterfaceClass '{}'",
                    String::from_utf8_lossy(&class)
                ))
            })?;
            let mut protocol = 0;
            if class == 8 {
                if let Some(subclass) = attr(&interface, "bInterfaceSubClass") {
                    (ids.kind, protocol) = mass_storage_type(&subclass);
                }
            } else {
                ids.kind = interface_type(class);
            }
            let Some(usb) = interface.parent_with_subsystem(b"usb", Some(b"usb_device")) else {
                return Err(Failure::NotApplicable(
                    "no USB device above the interface".into(),
                ));
            };
            packed = interfaces(&usb);
            // SCSI transparent or ATAPI: the inquiry data names the medium.
            if protocol == 6 || protocol == 2 {
                let _ = ids.fill_from_scsi(dev);
            }
            usb
        };

        let missing = |what: &str| Failure::Error(format!("USB device has no {what}"));
        let vendor_id = attr(&usb, "idVendor").ok_or_else(|| missing("idVendor"))?;
        let product_id = attr(&usb, "idProduct").ok_or_else(|| missing("idProduct"))?;
        if ids.vendor.is_empty() {
            let v = attr(&usb, "manufacturer").unwrap_or_else(|| vendor_id.clone());
            ids.vendor_enc = encode_devnode_name(&v, ENC_SIZE);
            ids.vendor = sanitize(&v, ID_LEN);
        }
        if ids.model.is_empty() {
            let m = attr(&usb, "product").unwrap_or_else(|| product_id.clone());
            ids.model_enc = encode_devnode_name(&m, ENC_SIZE);
            ids.model = sanitize(&m, ID_LEN);
        }
        if ids.revision.is_empty() {
            if let Some(rev) = attr(&usb, "bcdDevice") {
                ids.revision = sanitize(&rev, ID_LEN);
            }
        }
        if ids.serial.is_empty() {
            // Serials with control characters, non-ASCII or commas are
            // not used; Windows ignores them too.
            if let Some(s) = attr(&usb, "serial") {
                if c_str(&s)
                    .iter()
                    .all(|&c| (0x20..=0x7f).contains(&c) && c != b',')
                {
                    ids.serial = sanitize(&s, SERIAL_LEN);
                }
            }
        }
        let mut serial = Bounded::new(SERIAL_SIZE);
        serial.push(&ids.vendor).push("_").push(&ids.model);
        if !ids.serial.is_empty() {
            serial.push("_").push(&ids.serial);
        }
        if !ids.instance.is_empty() {
            serial.push("-").push(&ids.instance);
        }
        let serial = serial.into_vec();

        // When another builtin or rule already identified the bus (ata_id,
        // scsi_id), its ID_* win and only the ID_USB_* copies are set.
        if call.env.property(b"ID_BUS").is_none() {
            set(out, "ID_BUS", "usb");
            set(out, "ID_MODEL", ids.model.clone());
            set(out, "ID_MODEL_ENC", ids.model_enc.clone());
            set(out, "ID_MODEL_ID", product_id.clone());
            set(out, "ID_SERIAL", serial.clone());
            if !ids.serial.is_empty() {
                set(out, "ID_SERIAL_SHORT", ids.serial.clone());
            }
            set(out, "ID_VENDOR", ids.vendor.clone());
            set(out, "ID_VENDOR_ENC", ids.vendor_enc.clone());
            set(out, "ID_VENDOR_ID", vendor_id.clone());
            set(out, "ID_REVISION", ids.revision.clone());
            if !ids.kind.is_empty() {
                set(out, "ID_TYPE", ids.kind);
            }
            if !ids.instance.is_empty() {
                set(out, "ID_INSTANCE", ids.instance.clone());
            }
        }
        set(out, "ID_USB_MODEL", ids.model);
        set(out, "ID_USB_MODEL_ENC", ids.model_enc);
        set(out, "ID_USB_MODEL_ID", product_id);
        set(out, "ID_USB_SERIAL", serial);
        if !ids.serial.is_empty() {
            set(out, "ID_USB_SERIAL_SHORT", ids.serial);
        }
        set(out, "ID_USB_VENDOR", ids.vendor);
        set(out, "ID_USB_VENDOR_ENC", ids.vendor_enc);
        set(out, "ID_USB_VENDOR_ID", vendor_id);
        set(out, "ID_USB_REVISION", ids.revision);
        if !ids.kind.is_empty() {
            set(out, "ID_USB_TYPE", ids.kind);
        }
        if !ids.instance.is_empty() {
            set(out, "ID_USB_INSTANCE", ids.instance);
        }
        if !packed.is_empty() {
            set(out, "ID_USB_INTERFACES", packed);
        }
        if let Some(n) = ifnum {
            set(out, "ID_USB_INTERFACE_NUM", n);
        }
        if let Some(d) = driver {
            set(out, "ID_USB_DRIVER", d);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_follow_the_class_codes() {
        assert_eq!(interface_type(3), "hid");
        assert_eq!(interface_type(2), "generic");
        assert_eq!(interface_type(0xff), "generic");
        assert_eq!(interface_type(0x0e), "video");
        assert_eq!(mass_storage_type(b"06"), ("scsi", 6));
        assert_eq!(mass_storage_type(b"02"), ("atapi", 2));
        assert_eq!(mass_storage_type(b"05"), ("generic", 5));
        // The subclass is parsed as C would "06" but "08" is not octal.
        assert_eq!(mass_storage_type(b"08"), ("generic", 0));
        assert_eq!(scsi_type(b"0"), "disk");
        assert_eq!(scsi_type(b"14"), "disk");
        assert_eq!(scsi_type(b"5"), "cd");
        assert_eq!(scsi_type(b"7"), "optical");
        assert_eq!(scsi_type(b"1"), "tape");
        assert_eq!(scsi_type(b"x"), "generic");
    }
}
