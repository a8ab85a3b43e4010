//! The lab's QEMU guest (i440FX, Debian's 6.1 kernel): virtio net, blk and
//! scsi, e1000, AHCI, xHCI with a USB keyboard and tablet, i8042, the ACPI
//! power button, scsi_debug. Device names, numbers and attribute values
//! are the guest's, so that the builtins' output can be held against what
//! systemd-udevd 252 stored for it.

use super::*;

pub const PCI: &str = "/devices/pci0000:00";
pub const VIRTIO_NET: &str = "/devices/pci0000:00/0000:00:02.0/virtio0/net/eth0";
pub const E1000: &str = "/devices/pci0000:00/0000:00:07.0/net/eth1";
pub const VDA: &str = "/devices/pci0000:00/0000:00:03.0/virtio1/block/vda";
pub const VSCSI_HOST: &str = "/devices/pci0000:00/0000:00:04.0/virtio2/host2";
pub const VSCSI_DISK: &str =
    "/devices/pci0000:00/0000:00:04.0/virtio2/host2/target2:0:0/2:0:0:0/block/sdc";
pub const AHCI_DISK: &str =
    "/devices/pci0000:00/0000:00:08.0/ata1/host0/target0:0:0/0:0:0:0/block/sdb";
pub const DEBUG_DISK: &str = "/devices/pseudo_0/adapter0/host3/target3:0:0/3:0:0:0/block/sda";
pub const XHCI: &str = "/devices/pci0000:00/0000:00:09.0";
pub const USB1: &str = "/devices/pci0000:00/0000:00:09.0/usb1";
pub const USB2: &str = "/devices/pci0000:00/0000:00:09.0/usb2";
pub const KBD: &str = "/devices/pci0000:00/0000:00:09.0/usb1/1-1";
pub const KBD_IF: &str = "/devices/pci0000:00/0000:00:09.0/usb1/1-1/1-1:1.0";
pub const KBD_INPUT: &str =
    "/devices/pci0000:00/0000:00:09.0/usb1/1-1/1-1:1.0/0003:0627:0001.0001/input/input5";
pub const KBD_EVENT: &str =
    "/devices/pci0000:00/0000:00:09.0/usb1/1-1/1-1:1.0/0003:0627:0001.0001/input/input5/event3";
pub const TABLET: &str = "/devices/pci0000:00/0000:00:09.0/usb1/1-2";
pub const TABLET_INPUT: &str =
    "/devices/pci0000:00/0000:00:09.0/usb1/1-2/1-2:1.0/0003:0627:0001.0002/input/input6";
pub const TABLET_MOUSE: &str =
    "/devices/pci0000:00/0000:00:09.0/usb1/1-2/1-2:1.0/0003:0627:0001.0002/input/input6/mouse1";
pub const ATKBD: &str = "/devices/platform/i8042/serio0/input/input0";
pub const ATKBD_EVENT: &str = "/devices/platform/i8042/serio0/input/input0/event0";
pub const PSMOUSE: &str = "/devices/platform/i8042/serio1/input/input4";
pub const PCSPKR: &str = "/devices/platform/pcspkr/input/input3";
pub const PWRBTN: &str = "/devices/LNXSYSTM:00/LNXPWRBN:00/input/input2";
pub const PWRBTN_EVENT: &str = "/devices/LNXSYSTM:00/LNXPWRBN:00/input/input2/event1";

/// An event node below an input device. Its numbers are ones no real
/// machine uses, so that input_id's ioctl never reaches a real device.
fn event(tree: &mut Tree, parent: &str, name: &str) {
    let n: u32 = name.trim_start_matches("event").parse().unwrap();
    tree.dev(
        &format!("{parent}/{name}"),
        "input",
        &format!("MAJOR=13\nMINOR={}\nDEVNAME=input/event2{n}\n", 240 + n),
    );
}

fn scsi_disk(tree: &mut Tree, host: &str, hctl: &str, disk: &str, vendor: &str, model: &str) {
    let (h, rest) = hctl.split_once(':').unwrap();
    let (c, rest) = rest.split_once(':').unwrap();
    let (t, _) = rest.split_once(':').unwrap();
    let target = format!("{host}/target{h}:{c}:{t}");
    let sdev = format!("{target}/{hctl}");
    tree.dev(&target, "scsi", "DEVTYPE=scsi_target\n")
        .dev(
            &sdev,
            "scsi",
            "DEVTYPE=scsi_device\nDRIVER=sd\nMODALIAS=scsi:t-0x00\n",
        )
        .attrs(
            &sdev,
            &[
                ("vendor", vendor),
                ("model", model),
                ("type", "0"),
                ("rev", "2.5+"),
            ],
        )
        .dev(
            &format!("{sdev}/block/{disk}"),
            "block",
            &format!("MAJOR=8\nMINOR=0\nDEVNAME={disk}\nDEVTYPE=disk\nDISKSEQ=9\n"),
        );
}

pub fn guest() -> Tree {
    let mut t = Tree::new();
    t.node(PCI);
    for (name, class, multi) in [
        ("0000:00:00.0", "0600", false),
        ("0000:00:01.0", "0601", true),
        ("0000:00:01.1", "0101", true),
        ("0000:00:01.3", "0680", true),
        ("0000:00:02.0", "0200", false),
        ("0000:00:03.0", "0100", false),
        ("0000:00:04.0", "0100", false),
        ("0000:00:07.0", "0200", false),
        ("0000:00:08.0", "0106", false),
        ("0000:00:09.0", "0c03", false),
    ] {
        pci(&mut t, PCI, name, class, multi);
    }
    // ACPI PCI hotplug announces a slot for each device number.
    fs::create_dir_all(t.path("bus/pci/slots")).unwrap();
    for slot in 1..32 {
        t.attr(
            "/bus/pci/slots",
            &format!("{slot}/address"),
            format!("0000:00:{slot:02x}\n"),
        );
    }

    t.dev(
        "/devices/pci0000:00/0000:00:02.0/virtio0",
        "virtio",
        "DRIVER=virtio_net\nMODALIAS=virtio:d00000001v00001AF4\n",
    );
    netdev(
        &mut t,
        "/devices/pci0000:00/0000:00:02.0/virtio0",
        "eth0",
        3,
        "52:54:00:12:34:56",
    );
    netdev(
        &mut t,
        "/devices/pci0000:00/0000:00:07.0",
        "eth1",
        2,
        "52:54:00:12:34:57",
    );

    t.dev(
        "/devices/pci0000:00/0000:00:03.0/virtio1",
        "virtio",
        "DRIVER=virtio_blk\n",
    )
    .dev(
        VDA,
        "block",
        "MAJOR=254\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\nDISKSEQ=61\n",
    );

    t.dev(
        "/devices/pci0000:00/0000:00:04.0/virtio2",
        "virtio",
        "DRIVER=virtio_scsi\n",
    )
    .dev(VSCSI_HOST, "scsi", "DEVTYPE=scsi_host\n")
    .dev(&format!("{VSCSI_HOST}/scsi_host/host2"), "scsi_host", "");
    scsi_disk(
        &mut t,
        VSCSI_HOST,
        "2:0:0:0",
        "sdc",
        "QEMU",
        "QEMU HARDDISK",
    );

    let ata = "/devices/pci0000:00/0000:00:08.0/ata1";
    t.node(ata)
        .dev(&format!("{ata}/ata_port/ata1"), "ata_port", "")
        .attrs(&format!("{ata}/ata_port/ata1"), &[("port_no", "1")])
        .node(&format!("{ata}/link1"))
        .dev(&format!("{ata}/host0"), "scsi", "DEVTYPE=scsi_host\n");
    scsi_disk(
        &mut t,
        &format!("{ata}/host0"),
        "0:0:0:0",
        "sdb",
        "ATA",
        "QEMU HARDDISK",
    );

    t.node("/devices/pseudo_0")
        .dev(
            "/devices/pseudo_0/adapter0",
            "pseudo",
            "DRIVER=scsi_debug\n",
        )
        .dev(
            "/devices/pseudo_0/adapter0/host3",
            "scsi",
            "DEVTYPE=scsi_host\n",
        );
    scsi_disk(
        &mut t,
        "/devices/pseudo_0/adapter0/host3",
        "3:0:0:0",
        "sda",
        "Linux",
        "scsi_debug",
    );

    let hcd = Some("Linux 6.1.0-56-amd64 xhci-hcd");
    usb_device(
        &mut t,
        USB1,
        ("1d6b", "0002"),
        hcd,
        Some("xHCI Host Controller"),
        Some("0000:00:09.0"),
        &[(9, 0, 0)],
    );
    usb_device(
        &mut t,
        USB2,
        ("1d6b", "0003"),
        hcd,
        Some("xHCI Host Controller"),
        Some("0000:00:09.0"),
        &[(9, 0, 0)],
    );
    for usb in [USB1, USB2] {
        t.attrs(usb, &[("bcdDevice", "0601")]);
        let bus = &usb[usb.len() - 1..];
        usb_interface(
            &mut t,
            &format!("{usb}/{bus}-0:1.0"),
            (9, 0, 0),
            Some("hub"),
        );
    }
    usb_device(
        &mut t,
        KBD,
        ("0627", "0001"),
        Some("QEMU"),
        Some("QEMU USB Keyboard"),
        Some("68284-0000:00:09.0-1"),
        &[(3, 1, 1)],
    );
    usb_interface(&mut t, KBD_IF, (3, 1, 1), Some("usbhid"));
    t.dev(
        &format!("{KBD_IF}/0003:0627:0001.0001"),
        "hid",
        "DRIVER=hid-generic\n",
    );
    input(
        &mut t,
        KBD_INPUT,
        "0003",
        &[
            ("ev", "120013"),
            (
                "key",
                "1000000000007 ff9f207ac14057ff febeffdfffefffff fffffffffffffffe",
            ),
            ("msc", "10"),
            ("led", "1f"),
        ],
    );
    event(&mut t, KBD_INPUT, "event3");
    usb_device(
        &mut t,
        TABLET,
        ("0627", "0001"),
        Some("QEMU"),
        Some("QEMU USB Tablet"),
        Some("28754-0000:00:09.0-2"),
        &[(3, 0, 0)],
    );
    usb_interface(
        &mut t,
        &format!("{TABLET}/1-2:1.0"),
        (3, 0, 0),
        Some("usbhid"),
    );
    t.dev(
        &format!("{TABLET}/1-2:1.0/0003:0627:0001.0002"),
        "hid",
        "DRIVER=hid-generic\n",
    );
    input(
        &mut t,
        TABLET_INPUT,
        "0003",
        &[
            ("ev", "1f"),
            ("key", "70000 0 0 0 0"),
            ("rel", "900"),
            ("abs", "3"),
            ("msc", "10"),
        ],
    );
    event(&mut t, TABLET_INPUT, "event4");
    t.dev(
        TABLET_MOUSE,
        "input",
        "MAJOR=13\nMINOR=33\nDEVNAME=input/mouse1\n",
    );

    t.dev(
        "/devices/platform/i8042",
        "platform",
        "DRIVER=i8042\nMODALIAS=platform:i8042\n",
    )
    .dev(
        "/devices/platform/i8042/serio0",
        "serio",
        "DRIVER=atkbd\nSERIO_TYPE=06\n",
    )
    .dev(
        "/devices/platform/i8042/serio1",
        "serio",
        "DRIVER=psmouse\nSERIO_TYPE=01\n",
    );
    input(
        &mut t,
        ATKBD,
        "0011",
        &[
            ("ev", "120013"),
            (
                "key",
                "402000000 3803078f800d001 feffffdfffefffff fffffffffffffffe",
            ),
            ("msc", "10"),
            ("led", "7"),
        ],
    );
    event(&mut t, ATKBD, "event0");
    input(
        &mut t,
        PSMOUSE,
        "0011",
        &[("ev", "7"), ("key", "1f0000 0 0 0 0"), ("rel", "143")],
    );
    t.dev("/devices/platform/pcspkr", "platform", "DRIVER=pcspkr\n");
    input(&mut t, PCSPKR, "0010", &[("ev", "40001"), ("snd", "6")]);
    t.dev(
        "/devices/platform/alarmtimer.0.auto",
        "platform",
        "DRIVER=alarmtimer\n",
    )
    .dev("/devices/platform/QEMU0002:00", "platform", "");

    t.dev("/devices/LNXSYSTM:00", "acpi", "MODALIAS=acpi:LNXSYSTM:\n")
        .dev(
            "/devices/LNXSYSTM:00/LNXPWRBN:00",
            "acpi",
            "DRIVER=button\n",
        );
    input(
        &mut t,
        PWRBTN,
        "0019",
        &[("ev", "3"), ("key", "10000000000000 0")],
    );
    event(&mut t, PWRBTN, "event1");
    t
}
