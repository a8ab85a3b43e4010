//! Whatever sysfs holds, the builtins return properties or a failure and
//! never panic: every attribute they read is filled with arbitrary bytes.

mod common;

use common::*;
use proptest::prelude::*;

/// Attributes the builtins read, with the devices that carry them.
const ATTRS: &[(&str, &[&str])] = &[
    (
        "/devices/pci0000:00/0000:00:14.0",
        &[
            "acpi_index",
            "index",
            "label",
            "ari_enabled",
            "function_id",
            "modalias",
            "config",
        ],
    ),
    (
        "/devices/pci0000:00/0000:00:14.0/usb1/1-1",
        &[
            "idVendor",
            "idProduct",
            "manufacturer",
            "product",
            "serial",
            "bcdDevice",
            "descriptors",
        ],
    ),
    (
        "/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0",
        &["bInterfaceClass", "bInterfaceSubClass", "bInterfaceNumber"],
    ),
    (
        "/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/host0/target0:0:0/0:0:0:0",
        &["vendor", "model", "type", "rev", "ieee1394_id"],
    ),
    (
        "/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/net/eth0",
        &[
            "address",
            "addr_assign_type",
            "iflink",
            "type",
            "dev_port",
            "dev_id",
            "phys_port_name",
        ],
    ),
    (
        "/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/input/input0",
        &[
            "capabilities/ev",
            "capabilities/key",
            "capabilities/abs",
            "capabilities/rel",
            "properties",
            "id/bustype",
        ],
    ),
];

fn tree(values: &[Vec<u8>]) -> Tree {
    let mut t = Tree::new();
    let usb = "/devices/pci0000:00/0000:00:14.0/usb1";
    t.node("/devices/pci0000:00");
    pci(&mut t, "/devices/pci0000:00", "0000:00:14.0", "0c03", false);
    usb_device(
        &mut t,
        usb,
        ("1d6b", "0002"),
        None,
        None,
        None,
        &[(9, 0, 0)],
    );
    usb_device(
        &mut t,
        &format!("{usb}/1-1"),
        ("1234", "5678"),
        None,
        None,
        None,
        &[(8, 6, 0x50)],
    );
    let intf = format!("{usb}/1-1/1-1:1.0");
    usb_interface(&mut t, &intf, (8, 6, 0x50), Some("usb-storage"));
    t.dev(&format!("{intf}/host0"), "scsi", "DEVTYPE=scsi_host\n")
        .dev(
            &format!("{intf}/host0/target0:0:0"),
            "scsi",
            "DEVTYPE=scsi_target\n",
        )
        .dev(
            &format!("{intf}/host0/target0:0:0/0:0:0:0"),
            "scsi",
            "DEVTYPE=scsi_device\n",
        )
        .dev(
            &format!("{intf}/host0/target0:0:0/0:0:0:0/block/sda"),
            "block",
            "DEVTYPE=disk\n",
        );
    netdev(&mut t, &intf, "eth0", 2, "00:11:22:33:44:55");
    input(&mut t, &format!("{intf}/input/input0"), "0003", &[]);
    t.dev(
        &format!("{intf}/input/input0/event251"),
        "input",
        "MAJOR=13\nMINOR=251\nDEVNAME=input/event251\n",
    );
    let mut v = values.iter().cycle();
    for (dev, names) in ATTRS {
        for name in *names {
            t.attr(dev, name, v.next().unwrap());
        }
    }
    t
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        "[0-9a-fx: .-]{0,40}".prop_map(String::into_bytes),
        proptest::collection::vec(
            prop_oneof![Just(b' '), Just(b'f'), Just(b'0'), Just(0xc3u8)],
            0..200
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn builtins_never_panic(values in proptest::collection::vec(value(), 1..40)) {
        let t = tree(&values);
        for dev in &t.devices {
            for b in uevd_builtins::names() {
                let _ = run(b, &t.device(dev));
            }
        }
    }
}
