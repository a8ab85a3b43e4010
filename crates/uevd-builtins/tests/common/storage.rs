//! Storage transports path_id knows: Fibre Channel, SAS (direct, behind an
//! expander, wide ports), iSCSI, Hyper-V, NVMe (plain, multipath, fabrics),
//! cciss, tapes, FireWire, s390 buses, Xen, SPI and BCMA.

use super::*;

pub const FC_DISK: &str =
    "/devices/pci0000:00/0000:00:05.0/host4/rport-4:0-0/target4:0:0/4:0:0:1/block/sde";
pub const FC_BIG_LUN: &str =
    "/devices/pci0000:00/0000:00:05.0/host4/rport-4:0-0/target4:0:0/4:0:0:16384/block/sdf";
pub const FC_TAPE: &str =
    "/devices/pci0000:00/0000:00:05.0/host4/rport-4:0-0/target4:0:0/4:0:0:2/scsi_tape/st0";
pub const FC_NAMELESS_TAPE: &str =
    "/devices/pci0000:00/0000:00:05.0/host4/rport-4:0-0/target4:0:0/4:0:0:2/scsi_tape/nst";
pub const SAS_DISK: &str =
    "/devices/pci0000:00/0000:00:06.0/host5/port-5:0/end_device-5:0/target5:0:0/5:0:0:0/block/sdg";
pub const SAS_EXP_DISK: &str = "/devices/pci0000:00/0000:00:06.0/host5/port-5:1/expander-5:0/port-5:0:0/end_device-5:0:0/target5:0:1/5:0:1:0/block/sdh";
pub const SAS_WIDE_DISK: &str =
    "/devices/pci0000:00/0000:00:06.0/host5/port-5:2/end_device-5:2/target5:0:2/5:0:2:0/block/sdi";
pub const ISCSI_DISK: &str = "/devices/platform/host6/session1/target6:0:0/6:0:0:2/block/sdj";
pub const HYPERV_DISK: &str = "/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/f8b3781b-1e82-4818-a1c3-63d806ec15bb/host7/target7:0:0/7:0:0:0/block/sdk";
pub const NVME_DISK: &str = "/devices/pci0000:00/0000:00:0a.0/nvme/nvme1/nvme1n1";
pub const NVME_PART: &str = "/devices/pci0000:00/0000:00:0a.0/nvme/nvme1/nvme1n1/nvme1n1p1";
pub const NVME_MULTIPATH: &str = "/devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1";
pub const NVME_FABRICS: &str = "/devices/virtual/nvme-subsystem/nvme-subsys1/nvme2n1";
pub const CCISS_DISK: &str = "/devices/pci0000:00/0000:00:0c.0/cciss0/c0d3/block/cciss!c0d3";
pub const FIREWIRE_DISK: &str =
    "/devices/pci0000:00/0000:00:0e.0/fw0/fw0.0/host9/target9:0:0/9:0:0:0/block/sdl";
pub const DASD: &str = "/devices/css0/0.0.0000/0.0.0600/block/dasda";
pub const SCM: &str = "/devices/scm/0000000000000000/block/scma";
pub const XEN_DISK: &str = "/devices/vbd-51712/block/xvda";
pub const SPI_DEV: &str = "/devices/platform/soc/fe204000.spi/spi_master/spi0/spi0.1";
pub const BCMA_CORE: &str = "/devices/pci0000:00/0000:00:0d.0/bcma0:1";
pub const AP_CARD: &str = "/devices/ap/card00";
pub const AP_QUEUE: &str = "/devices/ap/card00/00.0005";

fn scsi_device(t: &mut Tree, target: &str, hctl: &str, block: Option<&str>) -> String {
    let sdev = format!("{target}/{hctl}");
    t.dev(&sdev, "scsi", "DEVTYPE=scsi_device\n").attrs(
        &sdev,
        &[
            ("vendor", "LIO-ORG"),
            ("model", "disk"),
            ("type", "0"),
            ("rev", "4.0"),
        ],
    );
    if let Some(b) = block {
        t.dev(
            &format!("{sdev}/block/{b}"),
            "block",
            &format!("DEVNAME={b}\nDEVTYPE=disk\nMAJOR=8\nMINOR=0\n"),
        );
    }
    sdev
}

pub fn storage() -> Tree {
    let mut t = Tree::new();
    t.node("/devices/pci0000:00");
    for name in [
        "0000:00:05.0",
        "0000:00:06.0",
        "0000:00:0a.0",
        "0000:00:0b.0",
        "0000:00:0c.0",
        "0000:00:0d.0",
        "0000:00:0e.0",
    ] {
        pci(&mut t, "/devices/pci0000:00", name, "0104", false);
    }

    // Fibre Channel: the target's fc_transport device has the port name.
    let host = "/devices/pci0000:00/0000:00:05.0/host4";
    let rport = format!("{host}/rport-4:0-0");
    let target = format!("{rport}/target4:0:0");
    t.dev(host, "scsi", "DEVTYPE=scsi_host\n")
        .node(&rport)
        .dev(
            &format!("{rport}/fc_remote_ports/rport-4:0-0"),
            "fc_remote_ports",
            "",
        )
        .dev(&target, "scsi", "DEVTYPE=scsi_target\n")
        .dev(
            &format!("{target}/fc_transport/target4:0:0"),
            "fc_transport",
            "",
        )
        .attrs(
            &format!("{target}/fc_transport/target4:0:0"),
            &[("port_name", "0x500a0982891b8dc5")],
        );
    scsi_device(&mut t, &target, "4:0:0:1", Some("sde"));
    scsi_device(&mut t, &target, "4:0:0:16384", Some("sdf"));
    let tape = scsi_device(&mut t, &target, "4:0:0:2", None);
    t.dev(
        &format!("{tape}/scsi_tape/st0"),
        "scsi_tape",
        "MAJOR=9\nMINOR=0\nDEVNAME=st0\n",
    )
    .dev(
        &format!("{tape}/scsi_tape/nst"),
        "scsi_tape",
        "MAJOR=9\nMINOR=128\nDEVNAME=nst\n",
    );

    // SAS: a disk on its own phy, one behind an expander, one on a wide port.
    let host = "/devices/pci0000:00/0000:00:06.0/host5";
    t.dev(host, "scsi", "DEVTYPE=scsi_host\n");
    let sas_port = |t: &mut Tree, port: &str, phys: &str| {
        let name = port.rsplit('/').next().unwrap().to_string();
        t.node(port)
            .dev(&format!("{port}/sas_port/{name}"), "sas_port", "")
            .attrs(&format!("{port}/sas_port/{name}"), &[("num_phys", phys)]);
    };
    let end_device = |t: &mut Tree, dev: &str, phy: &str, addr: &str| {
        let name = dev.rsplit('/').next().unwrap().to_string();
        t.node(dev)
            .dev(&format!("{dev}/sas_device/{name}"), "sas_device", "")
            .attrs(
                &format!("{dev}/sas_device/{name}"),
                &[("phy_identifier", phy), ("sas_address", addr)],
            );
    };
    sas_port(&mut t, &format!("{host}/port-5:0"), "1");
    end_device(
        &mut t,
        &format!("{host}/port-5:0/end_device-5:0"),
        "3",
        "0x5000c50012345678",
    );
    let target = format!("{host}/port-5:0/end_device-5:0/target5:0:0");
    t.dev(&target, "scsi", "DEVTYPE=scsi_target\n");
    scsi_device(&mut t, &target, "5:0:0:0", Some("sdg"));

    sas_port(&mut t, &format!("{host}/port-5:1"), "4");
    let exp = format!("{host}/port-5:1/expander-5:0");
    end_device(&mut t, &exp, "0", "0x500605b0000272bf");
    sas_port(&mut t, &format!("{exp}/port-5:0:0"), "1");
    end_device(
        &mut t,
        &format!("{exp}/port-5:0:0/end_device-5:0:0"),
        "7",
        "0x5000c500aaaaaaaa",
    );
    let target = format!("{exp}/port-5:0:0/end_device-5:0:0/target5:0:1");
    t.dev(&target, "scsi", "DEVTYPE=scsi_target\n");
    scsi_device(&mut t, &target, "5:0:1:0", Some("sdh"));

    sas_port(&mut t, &format!("{host}/port-5:2"), "4");
    end_device(
        &mut t,
        &format!("{host}/port-5:2/end_device-5:2"),
        "0",
        "0x5000c500bbbbbbbb",
    );
    let target = format!("{host}/port-5:2/end_device-5:2/target5:0:2");
    t.dev(&target, "scsi", "DEVTYPE=scsi_target\n");
    scsi_device(&mut t, &target, "5:0:2:0", Some("sdi"));

    // iSCSI: session and connection devices carry target and portal.
    t.node("/devices/platform");
    let host = "/devices/platform/host6";
    let session = format!("{host}/session1");
    t.dev(host, "scsi", "DEVTYPE=scsi_host\n")
        .node(&session)
        .dev(
            &format!("{session}/iscsi_session/session1"),
            "iscsi_session",
            "",
        )
        .attrs(
            &format!("{session}/iscsi_session/session1"),
            &[("targetname", "iqn.2003-01.org.linux-iscsi.host:sn.1234")],
        )
        .node(&format!("{session}/connection1:0"))
        .dev(
            &format!("{session}/connection1:0/iscsi_connection/connection1:0"),
            "iscsi_connection",
            "",
        )
        .attrs(
            &format!("{session}/connection1:0/iscsi_connection/connection1:0"),
            &[
                ("persistent_address", "192.0.2.10"),
                ("persistent_port", "3260"),
            ],
        )
        .dev(
            &format!("{session}/target6:0:0"),
            "scsi",
            "DEVTYPE=scsi_target\n",
        );
    scsi_device(
        &mut t,
        &format!("{session}/target6:0:0"),
        "6:0:0:2",
        Some("sdj"),
    );

    // Hyper-V: the VMBus device's GUID, braces and dashes dropped.
    let vmbus = "/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/f8b3781b-1e82-4818-a1c3-63d806ec15bb";
    t.dev("/devices/LNXSYSTM:00", "acpi", "")
        .dev("/devices/LNXSYSTM:00/LNXSYBUS:00", "acpi", "")
        .dev("/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00", "acpi", "")
        .dev(
            "/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00",
            "acpi",
            "",
        )
        .dev(vmbus, "vmbus", "")
        .attrs(
            vmbus,
            &[("device_id", "{f8b3781b-1e82-4818-a1c3-63d806ec15bb}")],
        )
        .dev(&format!("{vmbus}/host7"), "scsi", "DEVTYPE=scsi_host\n")
        .dev(
            &format!("{vmbus}/host7/target7:0:0"),
            "scsi",
            "DEVTYPE=scsi_target\n",
        );
    scsi_device(
        &mut t,
        &format!("{vmbus}/host7/target7:0:0"),
        "7:0:0:0",
        Some("sdk"),
    );

    // NVMe, plain and multipath; a fabrics controller is virtual.
    t.dev(
        "/devices/pci0000:00/0000:00:0a.0/nvme/nvme1",
        "nvme",
        "MAJOR=240\nMINOR=1\nDEVNAME=nvme1\n",
    )
    .dev(NVME_DISK, "block", "DEVTYPE=disk\nDEVNAME=nvme1n1\n")
    .attrs(NVME_DISK, &[("nsid", "1")])
    .dev(
        NVME_PART,
        "block",
        "DEVTYPE=partition\nDEVNAME=nvme1n1p1\nPARTN=1\n",
    )
    .dev("/devices/pci0000:00/0000:00:0b.0/nvme/nvme0", "nvme", "")
    .dev(
        "/devices/virtual/nvme-subsystem/nvme-subsys0",
        "nvme-subsystem",
        "",
    )
    .dev(NVME_MULTIPATH, "block", "DEVTYPE=disk\n")
    .attrs(NVME_MULTIPATH, &[("nsid", "2")])
    .dev("/devices/virtual/nvme-fabrics/ctl/nvme2", "nvme", "")
    .dev(
        "/devices/virtual/nvme-subsystem/nvme-subsys1",
        "nvme-subsystem",
        "",
    )
    .dev(NVME_FABRICS, "block", "DEVTYPE=disk\n")
    .attrs(NVME_FABRICS, &[("nsid", "1")]);

    // cciss: disk number from the c<controller>d<disk> name.
    t.node("/devices/pci0000:00/0000:00:0c.0/cciss0")
        .dev("/devices/pci0000:00/0000:00:0c.0/cciss0/c0d3", "cciss", "")
        .dev(CCISS_DISK, "block", "DEVTYPE=disk\nDEVNAME=cciss/c0d3\n");

    // FireWire SBP-2: the unit's ieee1394_id, and the SCSI levels skipped.
    t.dev("/devices/pci0000:00/0000:00:0e.0/fw0", "firewire", "")
        .dev("/devices/pci0000:00/0000:00:0e.0/fw0/fw0.0", "firewire", "")
        .dev(
            "/devices/pci0000:00/0000:00:0e.0/fw0/fw0.0/host9",
            "scsi",
            "DEVTYPE=scsi_host\n",
        )
        .dev(
            "/devices/pci0000:00/0000:00:0e.0/fw0/fw0.0/host9/target9:0:0",
            "scsi",
            "DEVTYPE=scsi_target\n",
        );
    let sdev = scsi_device(
        &mut t,
        "/devices/pci0000:00/0000:00:0e.0/fw0/fw0.0/host9/target9:0:0",
        "9:0:0:0",
        Some("sdl"),
    );
    t.attrs(&sdev, &[("ieee1394_id", "0001234567890abc:0:0")]);

    // s390 channel and storage class memory, Xen block devices.
    t.dev("/devices/css0", "css", "")
        .dev("/devices/css0/0.0.0000", "css", "")
        .dev(
            "/devices/css0/0.0.0000/0.0.0600",
            "ccw",
            "DRIVER=dasd-eckd\n",
        )
        .dev(DASD, "block", "DEVTYPE=disk\n")
        .node("/devices/scm")
        .dev("/devices/scm/0000000000000000", "scm", "")
        .dev(SCM, "block", "DEVTYPE=disk\n")
        .dev("/devices/vbd-51712", "xen", "DRIVER=vbd\n")
        .dev(XEN_DISK, "block", "DEVTYPE=disk\n");

    // SPI: the chip select, below a platform controller.
    t.dev("/devices/platform/soc", "platform", "")
        .dev("/devices/platform/soc/fe204000.spi", "platform", "")
        .dev(
            "/devices/platform/soc/fe204000.spi/spi_master/spi0",
            "spi_master",
            "",
        )
        .dev(SPI_DEV, "spi", "MODALIAS=spi:spidev\n");

    // BCMA core on a PCI card; s390 crypto adapter and queue.
    t.dev(BCMA_CORE, "bcma", "");
    t.node("/devices/ap")
        .dev(AP_CARD, "ap", "DEVTYPE=ap_card\n")
        .attrs(
            AP_CARD,
            &[("type", "CEX7C"), ("ap_functions", "0x92000000")],
        )
        .dev(AP_QUEUE, "ap", "DEVTYPE=ap_queue\n");
    t
}

/// The storage tree with pieces missing or misnamed, where handlers give
/// up half way.
pub fn storage_broken() -> Tree {
    let mut t = storage();
    // The FC target has lost its transport device.
    std::fs::remove_file(t.path("class/fc_transport/target4:0:0")).unwrap();
    // A SCSI device whose name is not H:C:T:L, and odd names elsewhere.
    t.dev(
        &format!("{}/odd", SAS_DISK.rsplit_once("/5:0:0:0").unwrap().0),
        "scsi",
        "DEVTYPE=scsi_device\n",
    )
    .dev("/devices/x", "usb", "DEVTYPE=usb_interface\n")
    .dev("/devices/x/-", "usb", "DEVTYPE=usb_device\n")
    .dev("/devices/x/-/\u{e9}:", "scsi", "DEVTYPE=scsi_device\n")
    .dev("/devices/x/bcma", "bcma", "")
    .dev("/devices/x/cciss", "cciss", "")
    .dev("/devices/x/serio", "serio", "")
    .dev("/devices/x/spi", "spi", "")
    .dev("/devices/x/nvme", "nvme", "")
    .dev("/devices/x/ata1/1:2", "scsi", "DEVTYPE=scsi_device\n")
    .dev(
        "/devices/x/ata2/host0/0:0:0:0",
        "scsi",
        "DEVTYPE=scsi_device\n",
    )
    .dev("/devices/x/vmbus_1/host0", "scsi", "DEVTYPE=scsi_host\n")
    .dev(
        "/devices/x/vmbus_1/host0/0:0:0:0",
        "scsi",
        "DEVTYPE=scsi_device\n",
    )
    .dev(
        "/devices/x/rport-1/0:0:0:0",
        "scsi",
        "DEVTYPE=scsi_device\n",
    )
    .dev(
        "/devices/x/end_device-1/0:0:0:0",
        "scsi",
        "DEVTYPE=scsi_device\n",
    )
    .dev(
        "/devices/x/session1/0:0:0:0",
        "scsi",
        "DEVTYPE=scsi_device\n",
    )
    .dev("/devices/platform/bad/serio", "serio", "");
    t
}
