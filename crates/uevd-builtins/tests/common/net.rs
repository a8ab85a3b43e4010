//! Network interfaces of every kind net_id names: onboard (ACPI and
//! SMBIOS), PCI path and hotplug slot (domains, multi-function, ARI,
//! bridges, s390 function ids), SR-IOV virtual functions, USB and BCMA
//! NICs, InfiniBand, WLAN, and the non-PCI buses (devicetree, s390 CCW,
//! POWER VIO, ACPI platform, netdevsim, Xen).

use super::*;

pub const ONBOARD: &str = "/devices/pci0000:00/0000:00:19.0/net/eth0";
pub const SMBIOS: &str = "/devices/pci0000:00/0000:00:1f.6/net/eth1";
pub const BAD_INDEX: &str = "/devices/pci0000:00/0000:00:1f.7/net/eth2";
pub const DOMAIN_F0: &str = "/devices/pci0001:00/0001:00:01.0/0001:02:00.0/net/eth3";
pub const DOMAIN_F1: &str = "/devices/pci0001:00/0001:00:01.0/0001:02:00.1/net/eth4";
pub const BEHIND_BRIDGE: &str = "/devices/pci0000:00/0000:00:1c.0/0000:04:00.0/net/eth5";
pub const BEHIND_BRIDGE_MF: &str = "/devices/pci0000:00/0000:00:1c.1/0000:07:00.1/net/eth6";
pub const PORTS: &str = "/devices/pci0000:00/0000:00:03.0/0000:03:00.0/net/eth7";
pub const PORTS_NAMED: &str = "/devices/pci0000:00/0000:00:03.0/0000:03:00.0/net/eth8";
pub const PORTS_BAD_NAME: &str = "/devices/pci0000:00/0000:00:03.0/0000:03:00.0/net/eth9";
pub const ARI: &str = "/devices/pci0000:00/0000:00:03.0/0000:05:01.2/net/eth10";
pub const PF: &str = "/devices/pci0000:00/0000:00:02.0/0000:06:00.0/net/eth11";
pub const VF: &str = "/devices/pci0000:00/0000:00:02.0/0000:06:10.2/net/eth12";
pub const USB_NIC: &str = "/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1.4/2-1.4:1.0/net/eth13";
pub const USB_NIC_CONFIG2: &str = "/devices/pci0000:00/0000:00:14.0/usb2/2-2/2-2:2.1/net/eth14";
pub const USB_WLAN: &str = "/devices/pci0000:00/0000:00:14.0/usb2/2-3/2-3:1.0/net/wlan0";
pub const BCMA_NIC: &str = "/devices/pci0000:00/0000:00:0d.0/bcma0:1/net/eth15";
pub const BCMA_CORE0_NIC: &str = "/devices/pci0000:00/0000:00:0d.0/bcma0:0/net/eth16";
pub const IB: &str = "/devices/pci0000:00/0000:00:1e.0/net/ib0";
pub const RANDOM_MAC: &str = "/devices/pci0000:00/0000:00:1b.0/net/eth17";
pub const S390_PCI: &str = "/devices/pci0002:00/0002:00:00.0/net/eth18";
pub const WWAN: &str = "/devices/pci0000:00/0000:00:1d.0/net/wwan0";

pub const DT_NIC: &str = "/devices/platform/soc/1c30000.ethernet/net/eth0";
pub const DT_NIC2: &str = "/devices/platform/soc/1c40000.ethernet/net/eth1";
pub const CCW: &str = "/devices/qeth/0.0.f5f0/net/eth2";
pub const CCW_ZERO: &str = "/devices/qeth/0.0.0000/net/eth3";
pub const VIO: &str = "/devices/vio/30000002/net/eth4";
pub const ACPI_PLATFORM: &str = "/devices/platform/HISI00C2:01/net/eth5";
pub const PNP_PLATFORM: &str = "/devices/platform/PNP0C02:00/net/eth6";
pub const NETDEVSIM: &str = "/devices/netdevsim1/net/eth7";
pub const XEN: &str = "/devices/vif-0/net/eth8";
pub const XEN_ZERO_PADDED: &str = "/devices/vif-01/net/eth9";
pub const VLAN: &str = "/devices/virtual/net/eth0.100";
pub const LOOPBACK: &str = "/devices/virtual/net/lo";
pub const SLIP: &str = "/devices/virtual/net/sl0";
pub const NO_IFINDEX: &str = "/devices/virtual/misc/tun";

// newer_nics(): what the schemes of systemd 253-260 name.
pub const SOC_USB_NIC: &str = "/devices/platform/soc/xhci-hcd.0.auto/usb1/1-1/1-1:1.0/net/eth20";
pub const REPRESENTOR: &str = "/devices/pci0000:00/0000:00:04.0/0000:08:00.0/net/eth21";
pub const REPRESENTOR_PORT: &str = "/devices/pci0000:00/0000:00:04.0/0000:08:00.0/net/eth22";
pub const SUN: &str = "/devices/pci0000:00/0000:00:05.0/net/eth23";
pub const SUN_BEHIND_BRIDGE: &str = "/devices/pci0000:00/0000:00:06.0/0000:09:00.0/net/eth24";
pub const SUN_BEHIND_BRIDGE_MF: &str = "/devices/pci0000:00/0000:00:07.0/0000:0b:00.1/net/eth25";
pub const DT_PORT1: &str = "/devices/platform/soc/1c50000.switch/net/lan1";
pub const DT_PORT2: &str = "/devices/platform/soc/1c50000.switch/net/lan2";
pub const DT_WLAN: &str = "/devices/platform/soc/1c60000.wifi/net/wlan0";
pub const MCTP: &str = "/devices/virtual/net/mctpi2c0";

pub fn pci_nics() -> Tree {
    let mut t = Tree::new();
    let root = "/devices/pci0000:00";
    t.node(root);
    let p = |t: &mut Tree, parent: &str, name: &str, class: &str, mf: bool| {
        pci(t, parent, name, class, mf)
    };

    // ACPI _DSM index and label; SMBIOS index 0 (allowed since v240).
    let dev = p(&mut t, root, "0000:00:19.0", "0200", false);
    t.attrs(&dev, &[("acpi_index", "1"), ("label", "Onboard LAN")]);
    netdev(&mut t, &dev, "eth0", 2, "3c:97:0e:aa:bb:cc");
    t.attrs(ONBOARD, &[("dev_port", "1")]);
    let dev = p(&mut t, root, "0000:00:1f.6", "0200", true);
    t.attrs(&dev, &[("index", "0")]);
    netdev(&mut t, &dev, "eth1", 3, "3c:97:0e:aa:bb:cd");
    // VMware's index: too large to be real.
    let dev = p(&mut t, root, "0000:00:1f.7", "0200", true);
    t.attrs(
        &dev,
        &[("acpi_index", "16777215"), ("label", "bad\u{7}label")],
    );
    netdev(&mut t, &dev, "eth2", 4, "3c:97:0e:aa:bb:ce");

    // A second PCI domain, a two-function card with a hotplug slot.
    t.node("/devices/pci0001:00");
    let bridge = p(&mut t, "/devices/pci0001:00", "0001:00:01.0", "0604", false);
    let dev = p(&mut t, &bridge, "0001:02:00.0", "0200", true);
    netdev(&mut t, &dev, "eth3", 5, "00:1b:21:00:00:01");
    let dev = p(&mut t, &bridge, "0001:02:00.1", "0200", true);
    netdev(&mut t, &dev, "eth4", 6, "00:1b:21:00:00:02");

    // Hotplug slots that belong to PCIe root ports (bridges).
    let bridge = p(&mut t, root, "0000:00:1c.0", "0604", false);
    let dev = p(&mut t, &bridge, "0000:04:00.0", "0200", false);
    netdev(&mut t, &dev, "eth5", 7, "00:1b:21:00:00:03");
    let bridge = p(&mut t, root, "0000:00:1c.1", "0604", true);
    let dev = p(&mut t, &bridge, "0000:07:00.1", "0200", true);
    netdev(&mut t, &dev, "eth6", 8, "00:1b:21:00:00:04");

    // One function, several ports: numbered, named, and a name udev
    // refuses (control character).
    let bridge = p(&mut t, root, "0000:00:03.0", "0604", false);
    let dev = p(&mut t, &bridge, "0000:03:00.0", "0200", false);
    netdev(&mut t, &dev, "eth7", 9, "00:1b:21:00:00:05");
    t.attrs(PORTS, &[("dev_port", "2")]);
    netdev(&mut t, &dev, "eth8", 10, "00:1b:21:00:00:06");
    t.attrs(PORTS_NAMED, &[("dev_port", "3"), ("phys_port_name", "p1")]);
    netdev(&mut t, &dev, "eth9", 11, "00:1b:21:00:00:07");
    t.attrs(
        PORTS_BAD_NAME,
        &[("dev_port", "4"), ("phys_port_name", "p\u{1}")],
    );
    // ARI: slot and function make one function number.
    let dev = p(&mut t, &bridge, "0000:05:01.2", "0200", false);
    t.attrs(&dev, &[("ari_enabled", "1")]);
    netdev(&mut t, &dev, "eth10", 12, "00:1b:21:00:00:08");

    // SR-IOV: a physical function and its virtual function 1.
    let bridge = p(&mut t, root, "0000:00:02.0", "0604", false);
    let pf = p(&mut t, &bridge, "0000:06:00.0", "0200", false);
    t.attrs(&pf, &[("acpi_index", "3"), ("label", "Port 3")]);
    netdev(&mut t, &pf, "eth11", 13, "00:1b:21:00:00:09");
    let vf0 = p(&mut t, &bridge, "0000:06:10.0", "0200", false);
    let vf1 = p(&mut t, &bridge, "0000:06:10.2", "0200", false);
    t.link(&format!("{pf}/virtfn0"), &vf0)
        .link(&format!("{pf}/virtfn1"), &vf1)
        .link(&format!("{pf}/virtfnx"), &vf1)
        .link(&format!("{vf0}/physfn"), &pf)
        .link(&format!("{vf1}/physfn"), &pf);
    netdev(&mut t, &vf1, "eth12", 14, "02:00:00:00:00:01");

    // USB NICs below an xHCI; one is a WLAN.
    let xhci = p(&mut t, root, "0000:00:14.0", "0c03", false);
    let usb2 = format!("{xhci}/usb2");
    usb_device(
        &mut t,
        &usb2,
        ("1d6b", "0003"),
        None,
        None,
        None,
        &[(9, 0, 0)],
    );
    usb_device(
        &mut t,
        &format!("{usb2}/2-1"),
        ("05e3", "0626"),
        None,
        None,
        None,
        &[(9, 0, 0)],
    );
    usb_device(
        &mut t,
        &format!("{usb2}/2-1/2-1.4"),
        ("0bda", "8153"),
        None,
        None,
        None,
        &[(0xff, 0xff, 0)],
    );
    usb_interface(
        &mut t,
        &format!("{usb2}/2-1/2-1.4/2-1.4:1.0"),
        (0xff, 0xff, 0),
        Some("r8152"),
    );
    netdev(
        &mut t,
        &format!("{usb2}/2-1/2-1.4/2-1.4:1.0"),
        "eth13",
        15,
        "00:e0:4c:68:00:01",
    );
    usb_device(
        &mut t,
        &format!("{usb2}/2-2"),
        ("0bda", "8153"),
        None,
        None,
        None,
        &[(2, 6, 0)],
    );
    usb_interface(
        &mut t,
        &format!("{usb2}/2-2/2-2:2.1"),
        (0x0a, 0, 0),
        Some("cdc_ether"),
    );
    netdev(
        &mut t,
        &format!("{usb2}/2-2/2-2:2.1"),
        "eth14",
        16,
        "00:e0:4c:68:00:02",
    );
    usb_device(
        &mut t,
        &format!("{usb2}/2-3"),
        ("0bda", "8179"),
        None,
        None,
        None,
        &[(0xff, 0xff, 0xff)],
    );
    usb_interface(
        &mut t,
        &format!("{usb2}/2-3/2-3:1.0"),
        (0xff, 0xff, 0xff),
        Some("r8188eu"),
    );
    netdev(
        &mut t,
        &format!("{usb2}/2-3/2-3:1.0"),
        "wlan0",
        17,
        "00:e0:4c:81:00:01",
    );
    t.attr(
        USB_WLAN,
        "uevent",
        "DEVTYPE=wlan\nINTERFACE=wlan0\nIFINDEX=17\n",
    );

    // Broadcom BCMA cores on a PCI card.
    let card = p(&mut t, root, "0000:00:0d.0", "0280", false);
    t.dev(&format!("{card}/bcma0:1"), "bcma", "")
        .dev(&format!("{card}/bcma0:0"), "bcma", "");
    netdev(
        &mut t,
        &format!("{card}/bcma0:1"),
        "eth15",
        18,
        "00:10:18:00:00:01",
    );
    netdev(
        &mut t,
        &format!("{card}/bcma0:0"),
        "eth16",
        19,
        "00:10:18:00:00:02",
    );

    // InfiniBand: 20-byte address, port number in dev_id on old kernels.
    let dev = p(&mut t, root, "0000:00:1e.0", "0207", false);
    netdev(
        &mut t,
        &dev,
        "ib0",
        20,
        "80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:bc:de",
    );
    t.attrs(IB, &[("type", "32"), ("dev_port", "0"), ("dev_id", "1")]);

    // A NIC whose address is random, and a WWAN modem.
    let dev = p(&mut t, root, "0000:00:1b.0", "0200", false);
    netdev(&mut t, &dev, "eth17", 21, "8a:2b:3c:4d:5e:6f");
    t.attrs(RANDOM_MAC, &[("addr_assign_type", "1")]);
    let dev = p(&mut t, root, "0000:00:1d.0", "0200", false);
    netdev(&mut t, &dev, "wwan0", 22, "00:a0:c6:00:00:01");
    t.attr(
        WWAN,
        "uevent",
        "DEVTYPE=wwan\nINTERFACE=wwan0\nIFINDEX=22\n",
    );

    // s390 PCI: the function id names the slot directly.
    t.node("/devices/pci0002:00");
    let dev = p(&mut t, "/devices/pci0002:00", "0002:00:00.0", "0200", false);
    t.attrs(&dev, &[("function_id", "0x00000321")]);
    netdev(&mut t, &dev, "eth18", 23, "82:00:00:00:03:21");

    // The hotplug slots firmware announces.
    for (slot, addr) in [
        ("5", "0001:02:00"),
        ("9", "0000:00:1c"),
        ("10", "0000:0a:00"),
        ("12", "0000:03:00"),
        ("0", "0000:00:1b"),
        ("x1", "0000:00:1b"),
    ] {
        t.attr(
            "/bus/pci/slots",
            &format!("{slot}/address"),
            format!("{addr}\n"),
        );
    }
    fs::create_dir_all(t.path("bus/pci/slots/00000321")).unwrap();
    t
}

pub fn other_nics() -> Tree {
    let mut t = Tree::new();
    // Devicetree: the parent's firmware node is what an alias points to.
    t.node("/devices/platform")
        .dev("/devices/platform/soc", "platform", "")
        .dev(
            "/devices/platform/soc/1c30000.ethernet",
            "platform",
            "DRIVER=dwmac-sun8i\n",
        )
        .dev(
            "/devices/platform/soc/1c40000.ethernet",
            "platform",
            "DRIVER=dwmac-sun8i\n",
        );
    let base = "firmware/devicetree/base";
    for node in ["soc/ethernet@1c30000", "soc/ethernet@1c40000"] {
        fs::create_dir_all(t.path(&format!("{base}/{node}"))).unwrap();
    }
    t.link(
        "/devices/platform/soc/1c30000.ethernet/of_node",
        &format!("{base}/soc/ethernet@1c30000"),
    )
    .link(
        "/devices/platform/soc/1c40000.ethernet/of_node",
        &format!("{base}/soc/ethernet@1c40000"),
    )
    .attr(
        &format!("/{base}/aliases"),
        "ethernet0",
        b"/soc/ethernet@1c30000\0",
    )
    .attr(
        &format!("/{base}/aliases"),
        "ethernet1",
        b"/soc//ethernet@1c40000/\0",
    )
    .attr(
        &format!("/{base}/aliases"),
        "serial0",
        b"/soc/serial@1c28000\0",
    );
    netdev(
        &mut t,
        "/devices/platform/soc/1c30000.ethernet",
        "eth0",
        2,
        "02:ab:cd:00:00:01",
    );
    netdev(
        &mut t,
        "/devices/platform/soc/1c40000.ethernet",
        "eth1",
        3,
        "02:ab:cd:00:00:02",
    );

    // s390 CCW groups.
    t.node("/devices/qeth")
        .dev("/devices/qeth/0.0.f5f0", "ccwgroup", "DRIVER=qeth\n")
        .dev("/devices/qeth/0.0.0000", "ccwgroup", "DRIVER=qeth\n");
    netdev(
        &mut t,
        "/devices/qeth/0.0.f5f0",
        "eth2",
        4,
        "02:00:00:00:f5:f0",
    );
    netdev(
        &mut t,
        "/devices/qeth/0.0.0000",
        "eth3",
        5,
        "02:00:00:00:00:00",
    );

    // IBM POWER virtual Ethernet.
    t.node("/devices/vio")
        .dev("/devices/vio/30000002", "vio", "DRIVER=ibmveth\n");
    netdev(
        &mut t,
        "/devices/vio/30000002",
        "eth4",
        6,
        "ba:d0:4a:9c:4c:02",
    );

    // ARM64 ACPI platform NICs, ACPI and PNP ids.
    t.dev("/devices/platform/HISI00C2:01", "platform", "DRIVER=hns\n")
        .dev("/devices/platform/PNP0C02:00", "platform", "");
    netdev(
        &mut t,
        "/devices/platform/HISI00C2:01",
        "eth5",
        7,
        "00:18:2d:00:00:01",
    );
    netdev(
        &mut t,
        "/devices/platform/PNP0C02:00",
        "eth6",
        8,
        "00:18:2d:00:00:02",
    );

    // netdevsim and Xen netfront.
    t.dev("/devices/netdevsim1", "netdevsim", "");
    netdev(
        &mut t,
        "/devices/netdevsim1",
        "eth7",
        9,
        "92:9b:00:00:00:01",
    );
    t.attrs(NETDEVSIM, &[("phys_port_name", "p0")]);
    t.dev("/devices/vif-0", "xen", "DRIVER=vif\n")
        .dev("/devices/vif-01", "xen", "DRIVER=vif\n");
    netdev(&mut t, "/devices/vif-0", "eth8", 10, "00:16:3e:00:00:01");
    netdev(&mut t, "/devices/vif-01", "eth9", 11, "00:16:3e:00:00:02");

    // Virtual interfaces: a VLAN (stacked), loopback, SLIP.
    netdev(
        &mut t,
        "/devices/virtual",
        "eth0.100",
        12,
        "3c:97:0e:aa:bb:cc",
    );
    t.attrs(VLAN, &[("iflink", "2")]);
    netdev(&mut t, "/devices/virtual", "lo", 1, "00:00:00:00:00:00");
    t.attrs(LOOPBACK, &[("type", "772")]);
    netdev(&mut t, "/devices/virtual", "sl0", 13, "");
    t.attrs(SLIP, &[("type", "256")]);
    t.dev(NO_IFINDEX, "misc", "MAJOR=10\nMINOR=200\nDEVNAME=net/tun\n");
    t
}

/// Devicetree aliases that contradict each other: `ethernet` and
/// `ethernet0` both mean index 0.
pub fn dt_conflict() -> Tree {
    let mut t = Tree::new();
    t.node("/devices/platform")
        .dev("/devices/platform/ethernet@0", "platform", "")
        .dev("/devices/platform/ethernet@1", "platform", "");
    let base = "firmware/devicetree/base";
    fs::create_dir_all(t.path(&format!("{base}/ethernet@0"))).unwrap();
    fs::create_dir_all(t.path(&format!("{base}/ethernet@1"))).unwrap();
    t.link(
        "/devices/platform/ethernet@0/of_node",
        &format!("{base}/ethernet@0"),
    )
    .link(
        "/devices/platform/ethernet@1/of_node",
        &format!("{base}/ethernet@1"),
    )
    .attr(&format!("/{base}/aliases"), "ethernet", b"/ethernet@0\0")
    .attr(&format!("/{base}/aliases"), "ethernet0", b"/ethernet@1\0");
    netdev(
        &mut t,
        "/devices/platform/ethernet@0",
        "eth0",
        2,
        "02:ab:cd:00:00:01",
    );
    netdev(
        &mut t,
        "/devices/platform/ethernet@1",
        "eth1",
        3,
        "02:ab:cd:00:00:02",
    );
    t
}

/// Names at and past the 127 bytes an alternative name can have.
pub fn long_names() -> Tree {
    let mut t = pci_nics();
    t.attrs(PORTS_NAMED, &[("phys_port_name", &"p".repeat(130))]);
    t.attrs(PORTS, &[("phys_port_name", &"q".repeat(120))]);
    t.attrs(
        "/devices/pci0000:00/0000:00:19.0",
        &[("label", &"L".repeat(127))],
    );
    t.attrs(
        "/devices/pci0000:00/0000:00:1f.6",
        &[("label", &"M".repeat(128))],
    );
    t
}

/// Interfaces the schemes after v252 name differently: a USB NIC on a
/// system-on-chip's host controller (no PCI), SR-IOV representors, slots
/// numbered by firmware (`firmware_node/sun`), a switch whose ports have
/// devicetree nodes of their own, a devicetree WLAN and an MCTP interface.
pub fn newer_nics() -> Tree {
    let mut t = Tree::new();
    t.node("/devices/platform")
        .dev("/devices/platform/soc", "platform", "")
        .dev(
            "/devices/platform/soc/xhci-hcd.0.auto",
            "platform",
            "DRIVER=xhci-hcd\n",
        );
    let usb1 = "/devices/platform/soc/xhci-hcd.0.auto/usb1";
    usb_device(
        &mut t,
        usb1,
        ("1d6b", "0002"),
        None,
        None,
        None,
        &[(9, 0, 0)],
    );
    let nic = format!("{usb1}/1-1");
    usb_device(
        &mut t,
        &nic,
        ("0bda", "8153"),
        None,
        None,
        None,
        &[(0xff, 0xff, 0)],
    );
    let intf = format!("{nic}/1-1:1.0");
    usb_interface(&mut t, &intf, (0xff, 0xff, 0), Some("r8152"));
    netdev(&mut t, &intf, "eth20", 20, "00:e0:4c:68:00:20");

    let root = "/devices/pci0000:00";
    t.node(root);
    // A switchdev NIC's representor of VF 3, and one of its uplink ports.
    let bridge = pci(&mut t, root, "0000:00:04.0", "0604", false);
    let dev = pci(&mut t, &bridge, "0000:08:00.0", "0200", false);
    netdev(&mut t, &dev, "eth21", 21, "00:1b:21:00:00:21");
    t.attrs(REPRESENTOR, &[("phys_port_name", "pf0vf3")]);
    netdev(&mut t, &dev, "eth22", 22, "00:1b:21:00:00:22");
    t.attrs(REPRESENTOR_PORT, &[("phys_port_name", "p0")]);
    // ACPI _SUN on the function itself, and on root ports: the port's
    // number names a multi-function card behind it, not a single one.
    let dev = pci(&mut t, root, "0000:00:05.0", "0200", false);
    t.attrs(&dev, &[("firmware_node/sun", "7")]);
    netdev(&mut t, &dev, "eth23", 23, "00:1b:21:00:00:23");
    let bridge = pci(&mut t, root, "0000:00:06.0", "0604", false);
    t.attrs(&bridge, &[("firmware_node/sun", "8")]);
    let dev = pci(&mut t, &bridge, "0000:09:00.0", "0200", false);
    netdev(&mut t, &dev, "eth24", 24, "00:1b:21:00:00:24");
    let bridge = pci(&mut t, root, "0000:00:07.0", "0604", false);
    t.attrs(&bridge, &[("firmware_node/sun", "9")]);
    let dev = pci(&mut t, &bridge, "0000:0b:00.1", "0200", true);
    netdev(&mut t, &dev, "eth25", 25, "00:1b:21:00:00:25");
    fs::create_dir_all(t.path("bus/pci/slots")).unwrap();

    // Devicetree: switch ports with nodes of their own, and a WLAN.
    let base = "firmware/devicetree/base";
    let switch = "/devices/platform/soc/1c50000.switch";
    let wifi = "/devices/platform/soc/1c60000.wifi";
    t.dev(switch, "platform", "DRIVER=mv88e6085\n")
        .dev(wifi, "platform", "DRIVER=brcmfmac\n");
    for node in [
        "soc/switch@1c50000",
        "soc/switch@1c50000/ports/port@1",
        "soc/switch@1c50000/ports/port@2",
        "soc/wifi@1c60000",
    ] {
        fs::create_dir_all(t.path(&format!("{base}/{node}"))).unwrap();
    }
    netdev(&mut t, switch, "lan1", 26, "02:ab:cd:00:00:26");
    netdev(&mut t, switch, "lan2", 27, "02:ab:cd:00:00:27");
    netdev(&mut t, wifi, "wlan0", 28, "02:ab:cd:00:00:28");
    t.attr(
        DT_WLAN,
        "uevent",
        "DEVTYPE=wlan\nINTERFACE=wlan0\nIFINDEX=28\n",
    );
    t.link(
        &format!("{switch}/of_node"),
        &format!("{base}/soc/switch@1c50000"),
    )
    .link(
        &format!("{DT_PORT1}/of_node"),
        &format!("{base}/soc/switch@1c50000/ports/port@1"),
    )
    .link(
        &format!("{DT_PORT2}/of_node"),
        &format!("{base}/soc/switch@1c50000/ports/port@2"),
    )
    .link(
        &format!("{wifi}/of_node"),
        &format!("{base}/soc/wifi@1c60000"),
    );
    let aliases = format!("/{base}/aliases");
    t.attr(&aliases, "ethernet2", b"/soc/switch@1c50000/ports/port@1\0")
        .attr(&aliases, "ethernet3", b"/soc/switch@1c50000/ports/port@2\0")
        .attr(&aliases, "wifi0", b"/soc/wifi@1c60000\0");

    // MCTP over I2C: ARPHRD_MCTP, a one-byte address.
    netdev(&mut t, "/devices/virtual", "mctpi2c0", 29, "");
    t.attrs(MCTP, &[("type", "290"), ("address", "00")]);
    t
}
