//! usb_id on mass storage, odd strings and broken descriptors. The
//! expected values were checked against systemd 252's udevadm on the same
//! tree (see oracle.rs).

mod common;

use common::usb::*;
use common::*;
use uevd_builtins::Failure;

/// The value of one property.
fn get(props: &[String], key: &str) -> Option<String> {
    props
        .iter()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
}

#[test]
fn mass_storage_is_named_by_its_scsi_inquiry_data() {
    let t = usb();
    let p = props("usb_id", &t, STICK_DISK);
    assert_eq!(
        p,
        [
            "ID_BUS=usb",
            "ID_MODEL=DataTraveler_3.0",
            "ID_MODEL_ENC=DataTraveler\\x203.0",
            "ID_MODEL_ID=1666",
            "ID_SERIAL=Kingston_DataTraveler_3.0_E0D55EA573FEF3A0B9C3003E-0:0",
            "ID_SERIAL_SHORT=E0D55EA573FEF3A0B9C3003E",
            "ID_VENDOR=Kingston",
            "ID_VENDOR_ENC=Kingston",
            "ID_VENDOR_ID=0951",
            "ID_REVISION=PMAP",
            "ID_TYPE=disk",
            "ID_INSTANCE=0:0",
            "ID_USB_MODEL=DataTraveler_3.0",
            "ID_USB_MODEL_ENC=DataTraveler\\x203.0",
            "ID_USB_MODEL_ID=1666",
            "ID_USB_SERIAL=Kingston_DataTraveler_3.0_E0D55EA573FEF3A0B9C3003E-0:0",
            "ID_USB_SERIAL_SHORT=E0D55EA573FEF3A0B9C3003E",
            "ID_USB_VENDOR=Kingston",
            "ID_USB_VENDOR_ENC=Kingston",
            "ID_USB_VENDOR_ID=0951",
            "ID_USB_REVISION=PMAP",
            "ID_USB_TYPE=disk",
            "ID_USB_INSTANCE=0:0",
            "ID_USB_INTERFACES=:080650:",
            "ID_USB_INTERFACE_NUM=00",
            "ID_USB_DRIVER=usb-storage",
        ]
    );
    // A second LUN: its own inquiry data, type and instance; the padding
    // kept in the _ENC forms.
    let p = props("usb_id", &t, STICK_CD);
    assert_eq!(get(&p, "ID_VENDOR").unwrap(), "Generic");
    assert_eq!(get(&p, "ID_VENDOR_ENC").unwrap(), "Generic\\x20");
    assert_eq!(
        get(&p, "ID_MODEL_ENC").unwrap(),
        "CD-ROM\\x20Drive\\x20\\x20\\x20\\x20"
    );
    assert_eq!(get(&p, "ID_TYPE").unwrap(), "cd");
    assert_eq!(get(&p, "ID_INSTANCE").unwrap(), "0:1");
    assert_eq!(
        get(&p, "ID_SERIAL").unwrap(),
        "Generic_CD-ROM_Drive_E0D55EA573FEF3A0B9C3003E-0:1"
    );
    // ATAPI devices too.
    let p = props("usb_id", &t, ATAPI_CD);
    assert_eq!(
        get(&p, "ID_SERIAL").unwrap(),
        "HL-DT-ST_DVDRAM_GP65NB60_E0D55EA573FEF3A0B9C3003E-0:0"
    );
    assert_eq!(get(&p, "ID_TYPE").unwrap(), "cd");
}

#[test]
fn storage_without_scsi_identity_falls_back_to_usb_strings() {
    let t = usb();
    // UFI floppies are not asked: the USB strings name them.
    let p = props("usb_id", &t, FLOPPY);
    assert_eq!(get(&p, "ID_TYPE").unwrap(), "floppy");
    assert_eq!(get(&p, "ID_VENDOR").unwrap(), "Kingston");
    assert_eq!(get(&p, "ID_INSTANCE"), None);
    // The SCSI vendor is used even when the model is missing, and then
    // the type stays the interface's and there is no instance.
    let p = props("usb_id", &t, NO_MODEL);
    assert_eq!(get(&p, "ID_VENDOR").unwrap(), "SanDisk");
    assert_eq!(get(&p, "ID_VENDOR_ENC").unwrap(), "SanDisk\\x20");
    assert_eq!(get(&p, "ID_MODEL").unwrap(), "DataTraveler_3.0");
    assert_eq!(get(&p, "ID_TYPE").unwrap(), "scsi");
    assert_eq!(get(&p, "ID_INSTANCE"), None);
    assert_eq!(
        get(&p, "ID_SERIAL").unwrap(),
        "SanDisk_DataTraveler_3.0_E0D55EA573FEF3A0B9C3003E"
    );
    // An all-blank SCSI vendor falls back to the USB one, encoding too.
    let p = props("usb_id", &t, BLANK_VENDOR);
    assert_eq!(get(&p, "ID_VENDOR").unwrap(), "Kingston");
    assert_eq!(get(&p, "ID_VENDOR_ENC").unwrap(), "Kingston");
    assert_eq!(get(&p, "ID_MODEL").unwrap(), "Ultra");
}

#[test]
fn devices_with_missing_or_odd_strings() {
    let t = usb();
    // No strings: the numeric ids stand in; no serial, no short serial.
    let p = props("usb_id", &t, &at("1-8/1-8:1.0/0003:ABCD:1234.0001"));
    assert_eq!(get(&p, "ID_VENDOR").unwrap(), "abcd");
    assert_eq!(get(&p, "ID_MODEL").unwrap(), "1234");
    assert_eq!(get(&p, "ID_SERIAL").unwrap(), "abcd_1234");
    assert_eq!(get(&p, "ID_SERIAL_SHORT"), None);
    assert_eq!(get(&p, "ID_USB_SERIAL_SHORT"), None);
    assert_eq!(get(&p, "ID_USB_DRIVER"), None, "interface without a driver");
    // Serials with a comma or a non-ASCII byte are not used.
    for dev in ["1-9", "1-10"] {
        let p = props("usb_id", &t, &at(dev));
        assert_eq!(get(&p, "ID_SERIAL").unwrap(), "Logitech_USB_Receiver");
        assert_eq!(get(&p, "ID_SERIAL_SHORT"), None);
    }
    // Blanks collapsed, unsafe characters replaced, UTF-8 kept, the
    // vendor cut at 63 bytes; the _ENC form is never cut here.
    let p = props("usb_id", &t, &at("1-11/1-11:1.0/video4linux/video0"));
    assert_eq!(get(&p, "ID_MODEL").unwrap(), "Üñíçødé_Dévîce___v2_");
    assert_eq!(
        get(&p, "ID_MODEL_ENC").unwrap(),
        "\\x20\\x20Üñíçødé\\x20\\x20Dévîce\\x20\\x2f\\x20v2\\x7f\\x20"
    );
    assert_eq!(
        get(&p, "ID_VENDOR").unwrap(),
        "Very_Long_Manufacturer_Name_Incorporated_International_Holdings"
    );
    assert_eq!(
        get(&p, "ID_VENDOR_ENC").unwrap(),
        "Very\\x20Long\\x20Manufacturer\\x20Name\\x20Incorporated\\x20International\\x20Holdings\\x20Group\\x20Ltd"
    );
    assert_eq!(get(&p, "ID_SERIAL_SHORT").unwrap(), "SN_42");
    assert_eq!(get(&p, "ID_TYPE").unwrap(), "video");
    assert_eq!(get(&p, "ID_USB_DRIVER").unwrap(), "uvcvideo");
    assert_eq!(
        get(&p, "ID_USB_INTERFACES").unwrap(),
        ":0e0100:0e0200:010100:"
    );
    // A vendor-specific interface is "generic"; its number is its own.
    let p = props("usb_id", &t, &at("1-11/1-11:1.3/ttyUSB0"));
    assert_eq!(get(&p, "ID_TYPE").unwrap(), "generic");
    assert_eq!(get(&p, "ID_USB_INTERFACE_NUM").unwrap(), "03");
    // A blank product leaves the model empty rather than falling back.
    let p = props("usb_id", &t, &at("1-12/1-12:1.0/usbmisc/lp0"));
    assert_eq!(get(&p, "ID_MODEL").unwrap(), "");
    assert_eq!(get(&p, "ID_SERIAL").unwrap(), "Maker_");
    assert_eq!(get(&p, "ID_TYPE").unwrap(), "printer");
}

#[test]
fn interface_lists_from_descriptors() {
    let t = usb();
    let list = |dev: &str| get(&props("usb_id", &t, &at(dev)), "ID_USB_INTERFACES");
    // Corrupt after the first interface: the list so far, unterminated.
    assert_eq!(list("1-13").unwrap(), ":030101");
    // Too short to hold a device descriptor: no list.
    assert_eq!(list("1-14"), None);
    // Repeated interfaces appear once.
    assert_eq!(list("1-15").unwrap(), ":030101:030000:");
}

#[test]
fn broken_devices_fail() {
    let t = usb();
    assert!(matches!(
        failure("usb_id", &t, &at("1-16/1-16:1.0/0003:1234:0005.0009")),
        Failure::Error(_)
    ));
    assert!(matches!(
        failure("usb_id", &t, &at("1-17/1-17:1.0/0003:1234:0006.000A")),
        Failure::Error(_)
    ));
    assert!(matches!(
        failure("usb_id", &t, "/devices/pci0000:00/0000:00:14.0"),
        Failure::NotApplicable(_)
    ));
}

#[test]
fn an_existing_id_bus_keeps_the_generic_properties() {
    let t = usb();
    let mut env = Props::default();
    env.0.insert(b"ID_BUS".to_vec(), b"ata".to_vec());
    let p = lines(&run_env("usb_id", &t.device(STICK_DISK), &env).unwrap());
    assert!(p.iter().all(|l| l.starts_with("ID_USB_")), "{p:?}");
    assert_eq!(
        get(&p, "ID_USB_SERIAL").unwrap(),
        "Kingston_DataTraveler_3.0_E0D55EA573FEF3A0B9C3003E-0:0"
    );
    assert_eq!(get(&p, "ID_USB_TYPE").unwrap(), "disk");
    assert_eq!(p.len(), 14);
}
