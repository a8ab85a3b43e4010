//! path_id on every transport it knows. The expected names were checked
//! against systemd 252's udevadm on the same trees (see oracle.rs).

mod common;

use common::storage::*;
use common::*;
use uevd_builtins::Failure;

fn path(tree: &Tree, devpath: &str) -> String {
    let p = props("path_id", tree, devpath);
    assert!(p[1].starts_with("ID_PATH_TAG="), "{p:?}");
    p[0].strip_prefix("ID_PATH=").unwrap().to_string()
}

#[test]
fn fibre_channel_luns_and_tapes() {
    let t = storage();
    assert_eq!(
        props("path_id", &t, FC_DISK),
        [
            "ID_PATH=pci-0000:00:05.0-fc-0x500a0982891b8dc5-lun-1",
            "ID_PATH_TAG=pci-0000_00_05_0-fc-0x500a0982891b8dc5-lun-1"
        ]
    );
    // LUNs past 255 are written in SAM form.
    assert_eq!(
        path(&t, FC_BIG_LUN),
        "pci-0000:00:05.0-fc-0x500a0982891b8dc5-lun-0x4000000000000000"
    );
    // Tape names add a rewind-mode letter only when udev's test of the
    // third/fourth character finds one; "st0" has a digit there.
    assert_eq!(
        path(&t, FC_TAPE),
        "pci-0000:00:05.0-fc-0x500a0982891b8dc5-lun-2"
    );
    assert_eq!(
        path(&t, FC_NAMELESS_TAPE),
        "pci-0000:00:05.0-fc-0x500a0982891b8dc5-lun-2-nst"
    );
}

#[test]
fn sas_direct_expander_and_wide_port() {
    let t = storage();
    assert_eq!(path(&t, SAS_DISK), "pci-0000:00:06.0-sas-phy3-lun-0");
    assert_eq!(
        path(&t, SAS_EXP_DISK),
        "pci-0000:00:06.0-sas-exp0x500605b0000272bf-phy7-lun-0"
    );
    assert_eq!(
        path(&t, SAS_WIDE_DISK),
        "pci-0000:00:06.0-sas-0x5000c500bbbbbbbb-lun-0"
    );
}

#[test]
fn iscsi_hyperv_and_firewire() {
    let t = storage();
    assert_eq!(
        props("path_id", &t, ISCSI_DISK),
        [
            "ID_PATH=ip-192.0.2.10:3260-iscsi-iqn.2003-01.org.linux-iscsi.host:sn.1234-lun-2",
            "ID_PATH_TAG=ip-192_0_2_10_3260-iscsi-iqn_2003-01_org_linux-iscsi_host_sn_1234-lun-2"
        ]
    );
    assert_eq!(
        path(&t, HYPERV_DISK),
        "acpi-VMBUS:00-vmbus-f8b3781b1e824818a1c363d806ec15bb-lun-0"
    );
    assert_eq!(
        props("path_id", &t, FIREWIRE_DISK),
        [
            "ID_PATH=pci-0000:00:0e.0-ieee1394-0x0001234567890abc:0:0",
            "ID_PATH_TAG=pci-0000_00_0e_0-ieee1394-0x0001234567890abc_0_0"
        ]
    );
}

#[test]
fn nvme_plain_multipath_and_fabrics() {
    let t = storage();
    assert_eq!(path(&t, NVME_DISK), "pci-0000:00:0a.0-nvme-1");
    // The multipath namespace is named through its controller's branch.
    assert_eq!(path(&t, NVME_MULTIPATH), "pci-0000:00:0b.0-nvme-2");
    // Fabrics controllers are virtual: no path.
    assert!(matches!(
        failure("path_id", &t, NVME_FABRICS),
        Failure::NotApplicable(_)
    ));
    // A partition has no nsid of its own, so no known transport (rules
    // import the disk's path instead).
    assert!(matches!(
        failure("path_id", &t, NVME_PART),
        Failure::NotApplicable(_)
    ));
}

#[test]
fn other_buses() {
    let t = storage();
    assert_eq!(path(&t, CCISS_DISK), "pci-0000:00:0c.0-cciss-disk3");
    assert_eq!(path(&t, DASD), "ccw-0.0.0600");
    assert_eq!(path(&t, SCM), "scm-0000000000000000");
    assert_eq!(path(&t, SPI_DEV), "platform-fe204000.spi-cs-1");
    assert_eq!(path(&t, BCMA_CORE), "pci-0000:00:0d.0-bcma-1");
    assert_eq!(path(&t, AP_CARD), "ap-CEX7C-0x92000000");
    assert_eq!(path(&t, AP_QUEUE), "ap-00.0005");
    // Xen is a known parent but not a transport: the bus device gets a
    // path, its disks do not.
    assert_eq!(path(&t, "/devices/vbd-51712"), "xen-vbd-51712");
    assert!(matches!(
        failure("path_id", &t, XEN_DISK),
        Failure::NotApplicable(_)
    ));
}

#[test]
fn handlers_that_give_up_keep_what_was_built() {
    let t = storage_broken();
    // The FC handler cannot find the target's port: the walk stops at the
    // SCSI device, before any part of the path is known.
    assert!(matches!(
        failure("path_id", &t, FC_DISK),
        Failure::NotApplicable(_)
    ));
    // The tape had named itself first, and FC marked the parent as known.
    assert_eq!(path(&t, FC_NAMELESS_TAPE), "nst");
    for dev in t.devices.clone() {
        let _ = run("path_id", &t.device(&dev));
    }
}
