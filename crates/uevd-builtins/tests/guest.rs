//! The lab guest's devices: the builtins must give what systemd-udevd 252
//! stored for them in that guest (lab/out/e2e-udevd/db.txt and net.txt).
//! Properties that rules add (ID_SERIAL=noserial, hwdb's *_FROM_DATABASE,
//! ID_NET_DRIVER, ...) are not the builtins' and not listed.

mod common;

use common::guest::*;
use common::*;

fn expect(builtin: &str, tree: &Tree, devpath: &str, want: &[&str]) {
    assert_eq!(
        props(builtin, tree, devpath),
        want,
        "{builtin} on {devpath}"
    );
}

#[test]
fn net_id_names_the_virtio_and_e1000_nics() {
    let t = guest();
    // n2 in the database, ens7 in net.txt.
    expect(
        "net_id",
        &t,
        E1000,
        &[
            "ID_NET_NAMING_SCHEME=v252",
            "ID_NET_NAME_MAC=enx525400123457",
            "ID_NET_NAME_PATH=enp0s7",
            "ID_NET_NAME_SLOT=ens7",
        ],
    );
    // n3: the virtio bus between the NIC and its PCI function is skipped.
    expect(
        "net_id",
        &t,
        VIRTIO_NET,
        &[
            "ID_NET_NAMING_SCHEME=v252",
            "ID_NET_NAME_MAC=enx525400123456",
            "ID_NET_NAME_PATH=enp0s2",
            "ID_NET_NAME_SLOT=ens2",
        ],
    );
}

#[test]
fn path_id_for_disks() {
    let t = guest();
    // b254:0
    expect(
        "path_id",
        &t,
        VDA,
        &["ID_PATH=pci-0000:00:03.0", "ID_PATH_TAG=pci-0000_00_03_0"],
    );
    // b67:48: host2 is rebased on the lowest host of the controller.
    expect(
        "path_id",
        &t,
        VSCSI_DISK,
        &[
            "ID_PATH=pci-0000:00:04.0-scsi-0:0:0:0",
            "ID_PATH_TAG=pci-0000_00_04_0-scsi-0_0_0_0",
        ],
    );
    // b67:32
    expect(
        "path_id",
        &t,
        AHCI_DISK,
        &[
            "ID_PATH=pci-0000:00:08.0-ata-1.0",
            "ID_PATH_TAG=pci-0000_00_08_0-ata-1_0",
            "ID_PATH_ATA_COMPAT=pci-0000:00:08.0-ata-1",
        ],
    );
    // scsi_debug's disks have no ID_PATH in the database: no known parent.
    assert!(matches!(
        failure("path_id", &t, DEBUG_DISK),
        uevd_builtins::Failure::NotApplicable(_)
    ));
}

#[test]
fn path_id_for_pci_usb_platform_acpi_and_serio() {
    let t = guest();
    for name in ["0000:00:00.0", "0000:00:01.1", "0000:00:09.0"] {
        let tag = name.replace([':', '.'], "_");
        expect(
            "path_id",
            &t,
            &format!("{PCI}/{name}"),
            &[
                &format!("ID_PATH=pci-{name}"),
                &format!("ID_PATH_TAG=pci-{tag}"),
            ],
        );
    }
    expect(
        "path_id",
        &t,
        USB1,
        &["ID_PATH=pci-0000:00:09.0", "ID_PATH_TAG=pci-0000_00_09_0"],
    );
    expect(
        "path_id",
        &t,
        &format!("{USB1}/1-0:1.0"),
        &[
            "ID_PATH=pci-0000:00:09.0-usb-0:0:1.0",
            "ID_PATH_TAG=pci-0000_00_09_0-usb-0_0_1_0",
        ],
    );
    expect(
        "path_id",
        &t,
        &format!("{USB2}/2-0:1.0"),
        &[
            "ID_PATH=pci-0000:00:09.0-usb-0:0:1.0",
            "ID_PATH_TAG=pci-0000_00_09_0-usb-0_0_1_0",
        ],
    );
    expect(
        "path_id",
        &t,
        KBD,
        &[
            "ID_PATH=pci-0000:00:09.0-usb-0:1",
            "ID_PATH_TAG=pci-0000_00_09_0-usb-0_1",
        ],
    );
    for dev in [KBD_INPUT, KBD_EVENT] {
        expect(
            "path_id",
            &t,
            dev,
            &[
                "ID_PATH=pci-0000:00:09.0-usb-0:1:1.0",
                "ID_PATH_TAG=pci-0000_00_09_0-usb-0_1_1_0",
            ],
        );
    }
    expect(
        "path_id",
        &t,
        TABLET_MOUSE,
        &[
            "ID_PATH=pci-0000:00:09.0-usb-0:2:1.0",
            "ID_PATH_TAG=pci-0000_00_09_0-usb-0_2_1_0",
        ],
    );
    for dev in [ATKBD, ATKBD_EVENT] {
        expect(
            "path_id",
            &t,
            dev,
            &[
                "ID_PATH=platform-i8042-serio-0",
                "ID_PATH_TAG=platform-i8042-serio-0",
            ],
        );
    }
    expect(
        "path_id",
        &t,
        PSMOUSE,
        &[
            "ID_PATH=platform-i8042-serio-1",
            "ID_PATH_TAG=platform-i8042-serio-1",
        ],
    );
    expect(
        "path_id",
        &t,
        PCSPKR,
        &["ID_PATH=platform-pcspkr", "ID_PATH_TAG=platform-pcspkr"],
    );
    for dev in [PWRBTN, PWRBTN_EVENT] {
        expect(
            "path_id",
            &t,
            dev,
            &["ID_PATH=acpi-LNXPWRBN:00", "ID_PATH_TAG=acpi-LNXPWRBN_00"],
        );
    }
    expect(
        "path_id",
        &t,
        "/devices/platform/alarmtimer.0.auto",
        &[
            "ID_PATH=platform-alarmtimer.0.auto",
            "ID_PATH_TAG=platform-alarmtimer_0_auto",
        ],
    );
    expect(
        "path_id",
        &t,
        "/devices/platform/QEMU0002:00",
        &[
            "ID_PATH=platform-QEMU0002:00",
            "ID_PATH_TAG=platform-QEMU0002_00",
        ],
    );
    // The PCI root itself has no subsystem and so no path.
    assert!(run("path_id", &t.device(PCI)).is_err());
}

#[test]
fn input_id_classifies_keyboards_mice_and_buttons() {
    let t = guest();
    let keyboard = ["ID_INPUT=1", "ID_INPUT_KEY=1", "ID_INPUT_KEYBOARD=1"];
    // input0 / c13:64, input5 / c13:68: full keyboards.
    for dev in [ATKBD, ATKBD_EVENT, KBD_INPUT, KBD_EVENT] {
        expect("input_id", &t, dev, &keyboard);
    }
    // input4 / c13:32 and input6 / c13:33: a PS/2 mouse and the absolute
    // USB tablet, which udev counts as a mouse.
    for dev in [PSMOUSE, TABLET_INPUT, TABLET_MOUSE] {
        expect("input_id", &t, dev, &["ID_INPUT=1", "ID_INPUT_MOUSE=1"]);
    }
    // input2: the power button has a key but is no keyboard.
    expect(
        "input_id",
        &t,
        PWRBTN_EVENT,
        &["ID_INPUT=1", "ID_INPUT_KEY=1"],
    );
    // input3: the PC speaker is an input device with neither.
    expect("input_id", &t, PCSPKR, &["ID_INPUT=1"]);
    // Not an input device: success, nothing set.
    expect("input_id", &t, VDA, &[]);
}

fn usb_props(
    model: &str,
    model_id: &str,
    serial: &str,
    vendor: &str,
    vendor_id: &str,
    rev: &str,
) -> Vec<String> {
    let enc = |s: &str| s.replace(' ', "\\x20");
    let under = |s: &str| s.replace(' ', "_");
    let full = format!("{}_{}_{serial}", under(vendor), under(model));
    let mut v = Vec::new();
    for prefix in ["ID_", "ID_USB_"] {
        if prefix == "ID_" {
            v.push("ID_BUS=usb".to_string());
        }
        v.extend([
            format!("{prefix}MODEL={}", under(model)),
            format!("{prefix}MODEL_ENC={}", enc(model)),
            format!("{prefix}MODEL_ID={model_id}"),
            format!("{prefix}SERIAL={full}"),
            format!("{prefix}SERIAL_SHORT={serial}"),
            format!("{prefix}VENDOR={}", under(vendor)),
            format!("{prefix}VENDOR_ENC={}", enc(vendor)),
            format!("{prefix}VENDOR_ID={vendor_id}"),
            format!("{prefix}REVISION={rev}"),
        ]);
    }
    v
}

#[test]
fn usb_id_for_hid_interfaces_and_usb_devices() {
    let t = guest();
    // input5 / c13:68: through the interface, with type, number and driver.
    let mut want = usb_props(
        "QEMU USB Keyboard",
        "0001",
        "68284-0000:00:09.0-1",
        "QEMU",
        "0627",
        "0000",
    );
    want.insert(10, "ID_TYPE=hid".into());
    want.extend([
        "ID_USB_TYPE=hid".into(),
        "ID_USB_INTERFACES=:030101:".into(),
        "ID_USB_INTERFACE_NUM=00".into(),
        "ID_USB_DRIVER=usbhid".into(),
    ]);
    assert_eq!(props("usb_id", &t, KBD_INPUT), want);
    assert_eq!(props("usb_id", &t, KBD_EVENT), want);

    // c13:33: the tablet's mouse node.
    let mut want = usb_props(
        "QEMU USB Tablet",
        "0001",
        "28754-0000:00:09.0-2",
        "QEMU",
        "0627",
        "0000",
    );
    want.insert(10, "ID_TYPE=hid".into());
    want.extend([
        "ID_USB_TYPE=hid".into(),
        "ID_USB_INTERFACES=:030000:".into(),
        "ID_USB_INTERFACE_NUM=00".into(),
        "ID_USB_DRIVER=usbhid".into(),
    ]);
    assert_eq!(props("usb_id", &t, TABLET_MOUSE), want);

    // c189:1: the device itself, so no interface type, number or driver.
    let mut want = usb_props(
        "QEMU USB Keyboard",
        "0001",
        "68284-0000:00:09.0-1",
        "QEMU",
        "0627",
        "0000",
    );
    want.push("ID_USB_INTERFACES=:030101:".into());
    assert_eq!(props("usb_id", &t, KBD), want);

    // c189:0 and c189:128: the root hubs, named by the kernel.
    for (hub, id) in [(USB1, "0002"), (USB2, "0003")] {
        let mut want = usb_props(
            "xHCI Host Controller",
            id,
            "0000:00:09.0",
            "Linux 6.1.0-56-amd64 xhci-hcd",
            "1d6b",
            "0601",
        );
        want.push("ID_USB_INTERFACES=:090000:".into());
        assert_eq!(props("usb_id", &t, hub), want);
    }

    // Not below USB.
    for dev in [ATKBD, VDA, XHCI] {
        assert!(matches!(
            failure("usb_id", &t, dev),
            uevd_builtins::Failure::NotApplicable(_)
        ));
    }
}
