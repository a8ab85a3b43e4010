//! USB devices for usb_id: mass storage named by SCSI inquiry data (disk,
//! CD, ATAPI, floppy), devices with missing, odd or oversized strings, and
//! broken descriptors.

use super::*;

pub const USB: &str = "/devices/pci0000:00/0000:00:14.0/usb1";

pub fn at(port: &str) -> String {
    format!("{USB}/{port}")
}

pub const STICK_DISK: &str =
    "/devices/pci0000:00/0000:00:14.0/usb1/1-3/1-3:1.0/host10/target10:0:0/10:0:0:0/block/sdj";
pub const STICK_CD: &str =
    "/devices/pci0000:00/0000:00:14.0/usb1/1-3/1-3:1.0/host10/target10:0:0/10:0:0:1/block/sr1";
pub const ATAPI_CD: &str =
    "/devices/pci0000:00/0000:00:14.0/usb1/1-4/1-4:1.0/host11/target11:0:0/11:0:0:0/block/sr0";
pub const FLOPPY: &str =
    "/devices/pci0000:00/0000:00:14.0/usb1/1-5/1-5:1.0/host12/target12:0:0/12:0:0:0/block/sdk";
pub const NO_MODEL: &str =
    "/devices/pci0000:00/0000:00:14.0/usb1/1-6/1-6:1.0/host13/target13:0:0/13:0:0:0/block/sdl";
pub const BLANK_VENDOR: &str =
    "/devices/pci0000:00/0000:00:14.0/usb1/1-7/1-7:1.0/host14/target14:0:0/14:0:0:0/block/sdm";

/// A LUN: number, SCSI type, vendor, model, block device name.
type Lun<'a> = (&'a str, &'a str, Option<&'a str>, Option<&'a str>, &'a str);

fn stick(t: &mut Tree, port: &str, subclass: u8, luns: &[Lun<'_>]) {
    let dev = at(port);
    usb_device(
        t,
        &dev,
        ("0951", "1666"),
        Some("Kingston"),
        Some("DataTraveler 3.0"),
        Some("E0D55EA573FEF3A0B9C3003E"),
        &[(8, subclass, 0x50)],
    );
    let intf = format!("{dev}/{port}:1.0");
    usb_interface(t, &intf, (8, subclass, 0x50), Some("usb-storage"));
    let n: u32 = port.rsplit('-').next().unwrap().parse().unwrap();
    let host = format!("{intf}/host{}", n + 7);
    t.dev(&host, "scsi", "DEVTYPE=scsi_host\n");
    let target = format!("{host}/target{}:0:0", n + 7);
    t.dev(&target, "scsi", "DEVTYPE=scsi_target\n");
    for (lun, kind, vendor, model, block) in luns {
        let sdev = format!("{target}/{}:0:0:{lun}", n + 7);
        t.dev(&sdev, "scsi", "DEVTYPE=scsi_device\nDRIVER=sd\n")
            .attrs(&sdev, &[("type", kind), ("rev", "PMAP")]);
        if let Some(v) = vendor {
            t.attr(&sdev, "vendor", format!("{v}\n"));
        }
        if let Some(m) = model {
            t.attr(&sdev, "model", format!("{m}\n"));
        }
        t.dev(
            &format!("{sdev}/block/{block}"),
            "block",
            &format!("DEVTYPE=disk\nDEVNAME={block}\n"),
        );
    }
}

pub fn usb() -> Tree {
    let mut t = Tree::new();
    t.node("/devices/pci0000:00");
    pci(&mut t, "/devices/pci0000:00", "0000:00:14.0", "0c03", false);
    usb_device(
        &mut t,
        USB,
        ("1d6b", "0002"),
        Some("Linux 6.1.0 xhci-hcd"),
        Some("xHCI Host Controller"),
        Some("0000:00:14.0"),
        &[(9, 0, 0)],
    );

    // SCSI transparent (subclass 6): a disk and a CD on two LUNs.
    stick(
        &mut t,
        "1-3",
        6,
        &[
            ("0", "0", Some("Kingston"), Some("DataTraveler 3.0"), "sdj"),
            ("1", "5", Some("Generic "), Some("CD-ROM Drive    "), "sr1"),
        ],
    );
    // ATAPI (subclass 2) and UFI floppy (subclass 4).
    stick(
        &mut t,
        "1-4",
        2,
        &[("0", "5", Some("HL-DT-ST"), Some("DVDRAM GP65NB60 "), "sr0")],
    );
    stick(
        &mut t,
        "1-5",
        4,
        &[("0", "0", Some("TEAC    "), Some("FD-05PUB        "), "sdk")],
    );
    // SCSI data missing in part: model, and a vendor that is all blanks.
    stick(
        &mut t,
        "1-6",
        6,
        &[("0", "0", Some("SanDisk "), None, "sdl")],
    );
    stick(
        &mut t,
        "1-7",
        6,
        &[("0", "0", Some("        "), Some("Ultra           "), "sdm")],
    );

    // No strings at all.
    usb_device(
        &mut t,
        &at("1-8"),
        ("abcd", "1234"),
        None,
        None,
        None,
        &[(3, 0, 0)],
    );
    usb_interface(&mut t, &at("1-8/1-8:1.0"), (3, 0, 0), None);
    // Serials udev will not use: a comma, a byte above 0x7f.
    usb_device(
        &mut t,
        &at("1-9"),
        ("046d", "c52b"),
        Some("Logitech"),
        Some("USB Receiver"),
        Some("AB,12"),
        &[(3, 1, 1)],
    );
    usb_device(
        &mut t,
        &at("1-10"),
        ("046d", "c52b"),
        Some("Logitech"),
        Some("USB Receiver"),
        Some("AB\u{e9}12"),
        &[(3, 1, 1)],
    );
    // Long and non-ASCII strings, blanks to collapse, characters to replace.
    let long = "Very Long Manufacturer Name Incorporated International Holdings Group Ltd";
    usb_device(
        &mut t,
        &at("1-11"),
        ("1234", "5678"),
        Some(long),
        Some("  Üñíçødé  Dévîce / v2\u{7f} "),
        Some(" SN 42 "),
        &[(0x0e, 1, 0), (0x0e, 2, 0), (1, 1, 0)],
    );
    usb_interface(&mut t, &at("1-11/1-11:1.0"), (0x0e, 1, 0), Some("uvcvideo"));
    usb_interface(&mut t, &at("1-11/1-11:1.3"), (0xff, 0, 0), None);
    t.attrs(&at("1-11/1-11:1.3"), &[("bInterfaceNumber", "03")]);
    // Blank product string: the model is empty, not the product id.
    usb_device(
        &mut t,
        &at("1-12"),
        ("1234", "0001"),
        Some("Maker"),
        Some("   "),
        None,
        &[(7, 1, 2)],
    );
    usb_interface(&mut t, &at("1-12/1-12:1.0"), (7, 1, 2), Some("usblp"));

    // Descriptors: corrupt after the first interface, too short, repeated.
    usb_device(
        &mut t,
        &at("1-13"),
        ("1234", "0002"),
        None,
        None,
        None,
        &[(3, 1, 1), (3, 0, 0)],
    );
    let mut d = usb_descriptors(&[(3, 1, 1), (3, 0, 0)]);
    let second = 18 + 9 + 25;
    d[second] = 200;
    t.attr(&at("1-13"), "descriptors", d);
    usb_device(&mut t, &at("1-14"), ("1234", "0003"), None, None, None, &[]);
    t.attr(
        &at("1-14"),
        "descriptors",
        [18u8, 1, 0, 2, 0, 0, 0, 64, 0, 0],
    );
    usb_device(
        &mut t,
        &at("1-15"),
        ("1234", "0004"),
        None,
        None,
        None,
        &[(3, 1, 1), (3, 1, 1), (3, 0, 0), (3, 1, 1)],
    );

    // Broken: an interface without a class, a device without idVendor.
    usb_device(
        &mut t,
        &at("1-16"),
        ("1234", "0005"),
        None,
        None,
        None,
        &[(3, 0, 0)],
    );
    usb_interface(&mut t, &at("1-16/1-16:1.0"), (3, 0, 0), None);
    std::fs::remove_file(t.path(&format!("{}/bInterfaceClass", at("1-16/1-16:1.0")))).unwrap();
    usb_device(
        &mut t,
        &at("1-17"),
        ("1234", "0006"),
        None,
        None,
        None,
        &[(3, 0, 0)],
    );
    std::fs::remove_file(t.path(&format!("{}/idVendor", at("1-17")))).unwrap();
    usb_interface(&mut t, &at("1-17/1-17:1.0"), (3, 0, 0), None);

    // What the rules run usb_id on: devices below the interfaces.
    for (dev, subsystem) in [
        ("1-8/1-8:1.0/0003:ABCD:1234.0001", "hid"),
        ("1-11/1-11:1.0/video4linux/video0", "video4linux"),
        ("1-11/1-11:1.3/ttyUSB0", "usb-serial"),
        ("1-12/1-12:1.0/usbmisc/lp0", "usbmisc"),
        ("1-16/1-16:1.0/0003:1234:0005.0009", "hid"),
        ("1-17/1-17:1.0/0003:1234:0006.000A", "hid"),
    ] {
        t.dev(&at(dev), subsystem, "");
    }
    t
}
