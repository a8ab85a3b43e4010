//! net_id on every kind of interface it names. The expected names were
//! checked against systemd 252's udevadm on the same trees, under every
//! naming scheme (see oracle.rs).

mod common;

use common::net::*;
use common::*;
use uevd_builtins::Failure;

fn names(tree: &Tree, devpath: &str) -> Vec<String> {
    props("net_id", tree, devpath)
}

fn with_scheme(rest: &[&str]) -> Vec<String> {
    let mut v = vec!["ID_NET_NAMING_SCHEME=v252".to_string()];
    v.extend(rest.iter().map(|s| s.to_string()));
    v
}

#[test]
fn onboard_index_label_and_ports() {
    let t = pci_nics();
    assert_eq!(
        names(&t, ONBOARD),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx3c970eaabbcc",
            "ID_NET_NAME_ONBOARD=eno1d1",
            "ID_NET_LABEL_ONBOARD=Onboard LAN",
            "ID_NET_NAME_PATH=enp0s25d1",
        ])
    );
    // SMBIOS index 0, on a multi-function device (so "f6").
    assert_eq!(
        names(&t, SMBIOS),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx3c970eaabbcd",
            "ID_NET_NAME_ONBOARD=eno0",
            "ID_NET_NAME_PATH=enp0s31f6",
        ])
    );
    // An absurd index gives no onboard name, and a label with a control
    // character no label.
    assert_eq!(
        names(&t, BAD_INDEX),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx3c970eaabbce",
            "ID_NET_NAME_PATH=enp0s31f7"
        ])
    );
    assert_eq!(
        names(&t, PORTS),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx001b21000005",
            "ID_NET_NAME_PATH=enp3s0d2",
            "ID_NET_NAME_SLOT=ens12d2",
        ])
    );
    // A named port wins over the port number...
    assert_eq!(
        names(&t, PORTS_NAMED),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx001b21000006",
            "ID_NET_NAME_PATH=enp3s0np1",
            "ID_NET_NAME_SLOT=ens12np1",
        ])
    );
    // ...unless the name is not printable.
    assert_eq!(
        names(&t, PORTS_BAD_NAME),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx001b21000007",
            "ID_NET_NAME_PATH=enp3s0d4",
            "ID_NET_NAME_SLOT=ens12d4",
        ])
    );
}

#[test]
fn domains_functions_slots_and_bridges() {
    let t = pci_nics();
    assert_eq!(
        names(&t, DOMAIN_F0),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx001b21000001",
            "ID_NET_NAME_PATH=enP1p2s0f0",
            "ID_NET_NAME_SLOT=enP1s5f0",
        ])
    );
    assert_eq!(
        names(&t, DOMAIN_F1),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx001b21000002",
            "ID_NET_NAME_PATH=enP1p2s0f1",
            "ID_NET_NAME_SLOT=enP1s5f1",
        ])
    );
    // The slot belongs to the root port above: not used for a single
    // function, used for a multi-function device.
    assert_eq!(
        names(&t, BEHIND_BRIDGE),
        with_scheme(&["ID_NET_NAME_MAC=enx001b21000003", "ID_NET_NAME_PATH=enp4s0"])
    );
    assert_eq!(
        names(&t, BEHIND_BRIDGE_MF),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx001b21000004",
            "ID_NET_NAME_PATH=enp7s0f1",
            "ID_NET_NAME_SLOT=ens9f1",
        ])
    );
    assert_eq!(
        names(&t, ARI),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx001b21000008",
            "ID_NET_NAME_PATH=enp5s1f10"
        ])
    );
    // s390: the function id is the slot, and the domain is dropped there.
    assert_eq!(
        names(&t, S390_PCI),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx820000000321",
            "ID_NET_NAME_PATH=enP2p0s0",
            "ID_NET_NAME_SLOT=ens801",
        ])
    );
    // Random address: no MAC name. Slots "0" and "x1" are not slots.
    assert_eq!(
        names(&t, RANDOM_MAC),
        with_scheme(&["ID_NET_NAME_PATH=enp0s27"])
    );
}

#[test]
fn sr_iov_virtual_functions_take_the_physical_names() {
    let t = pci_nics();
    assert_eq!(
        names(&t, PF),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx001b21000009",
            "ID_NET_NAME_ONBOARD=eno3",
            "ID_NET_LABEL_ONBOARD=Port 3",
            "ID_NET_NAME_PATH=enp6s0",
        ])
    );
    assert_eq!(
        names(&t, VF),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx020000000001",
            "ID_NET_NAME_ONBOARD=eno3v1",
            "ID_NET_NAME_PATH=enp6s0v1",
        ])
    );
}

#[test]
fn usb_bcma_infiniband_wlan_wwan() {
    let t = pci_nics();
    assert_eq!(
        names(&t, USB_NIC),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx00e04c680001",
            "ID_NET_NAME_PATH=enp0s20u1u4"
        ])
    );
    assert_eq!(
        names(&t, USB_NIC_CONFIG2),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx00e04c680002",
            "ID_NET_NAME_PATH=enp0s20u2c2i1"
        ])
    );
    assert_eq!(
        names(&t, USB_WLAN),
        with_scheme(&[
            "ID_NET_NAME_MAC=wlx00e04c810001",
            "ID_NET_NAME_PATH=wlp0s20u3"
        ])
    );
    assert_eq!(
        names(&t, BCMA_NIC),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx001018000001",
            "ID_NET_NAME_PATH=enp0s13b1"
        ])
    );
    assert_eq!(
        names(&t, BCMA_CORE0_NIC),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx001018000002",
            "ID_NET_NAME_PATH=enp0s13"
        ])
    );
    // 20-byte addresses make no MAC name; the port comes from dev_id.
    assert_eq!(names(&t, IB), with_scheme(&["ID_NET_NAME_PATH=ibp0s30d1"]));
    assert_eq!(
        names(&t, WWAN),
        with_scheme(&[
            "ID_NET_NAME_MAC=wwx00a0c6000001",
            "ID_NET_NAME_PATH=wwp0s29"
        ])
    );
}

#[test]
fn devicetree_ccw_vio_platform_netdevsim_xen() {
    let t = other_nics();
    assert_eq!(
        names(&t, DT_NIC),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx02abcd000001",
            "ID_NET_NAME_ONBOARD=end0"
        ])
    );
    // The alias is compared as a path: doubled and trailing slashes match.
    assert_eq!(
        names(&t, DT_NIC2),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx02abcd000002",
            "ID_NET_NAME_ONBOARD=end1"
        ])
    );
    assert_eq!(
        names(&t, CCW),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx02000000f5f0",
            "ID_NET_NAME_PATH=encf5f0"
        ])
    );
    assert_eq!(
        names(&t, CCW_ZERO),
        with_scheme(&["ID_NET_NAME_MAC=enx020000000000", "ID_NET_NAME_PATH=enc0"])
    );
    assert_eq!(
        names(&t, VIO),
        with_scheme(&["ID_NET_NAME_MAC=enxbad04a9c4c02", "ID_NET_NAME_SLOT=env2"])
    );
    assert_eq!(
        names(&t, ACPI_PLATFORM),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx00182d000001",
            "ID_NET_NAME_PATH=enahisic2i1"
        ])
    );
    assert_eq!(
        names(&t, PNP_PLATFORM),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx00182d000002",
            "ID_NET_NAME_PATH=enapnpc02i0"
        ])
    );
    assert_eq!(
        names(&t, NETDEVSIM),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx929b00000001",
            "ID_NET_NAME_PATH=eni1np0"
        ])
    );
    assert_eq!(
        names(&t, XEN),
        with_scheme(&["ID_NET_NAME_MAC=enx00163e000001", "ID_NET_NAME_SLOT=enX0"])
    );
    // "vif-01" is not a number udev accepts.
    assert_eq!(
        names(&t, XEN_ZERO_PADDED),
        with_scheme(&["ID_NET_NAME_MAC=enx00163e000002"])
    );
}

#[test]
fn conflicting_devicetree_aliases_name_nothing() {
    let t = dt_conflict();
    for (dev, mac) in [
        ("/devices/platform/ethernet@0/net/eth0", "enx02abcd000001"),
        ("/devices/platform/ethernet@1/net/eth1", "enx02abcd000002"),
    ] {
        assert_eq!(
            names(&t, dev),
            with_scheme(&[&format!("ID_NET_NAME_MAC={mac}")])
        );
    }
}

#[test]
fn virtual_and_foreign_interfaces() {
    let t = other_nics();
    // Stacked devices and non-Ethernet types succeed with nothing.
    assert_eq!(names(&t, VLAN), Vec::<String>::new());
    assert_eq!(names(&t, LOOPBACK), Vec::<String>::new());
    assert_eq!(names(&t, SLIP), with_scheme(&[]));
    assert!(matches!(
        failure("net_id", &t, NO_IFINDEX),
        Failure::NotApplicable(_)
    ));
    let mut t = other_nics();
    std::fs::remove_file(t.path(&format!("{VLAN}/iflink"))).unwrap();
    assert!(matches!(failure("net_id", &t, VLAN), Failure::Error(_)));
    t.attrs(VLAN, &[("iflink", "twelve")]);
    assert!(matches!(failure("net_id", &t, VLAN), Failure::Error(_)));
}

#[test]
fn names_that_do_not_fit_are_dropped() {
    let t = long_names();
    // 127 bytes fit an alternative name; one more does not.
    let q = "q".repeat(120);
    assert_eq!(
        names(&t, PORTS),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx001b21000005",
            &format!("ID_NET_NAME_PATH=enp3s0n{q}"),
            &format!("ID_NET_NAME_SLOT=ens12n{q}"),
        ])
    );
    assert_eq!(
        names(&t, PORTS_NAMED),
        with_scheme(&["ID_NET_NAME_MAC=enx001b21000006"])
    );
    let label = format!("ID_NET_LABEL_ONBOARD={}", "L".repeat(127));
    assert!(names(&t, ONBOARD).contains(&label));
    assert!(!names(&t, SMBIOS)
        .iter()
        .any(|l| l.starts_with("ID_NET_LABEL_ONBOARD=")));
}

/// Each naming scheme, in a child process whose environment selects it,
/// as NET_NAMING_SCHEME does for udevd.
#[test]
fn older_naming_schemes() {
    if std::env::var_os("UEVD_SCHEME_CHILD").is_some() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for scheme in [
        "v238", "v240", "v247", "v249", "v250", "v251", ":v243", "bogus", "v253", "v254", "v255",
        "v257", "v258", "v259", "v260", "latest",
    ] {
        let out = std::process::Command::new(&exe)
            .args(["--exact", "scheme_child", "--nocapture", "--test-threads=1"])
            .env("NET_NAMING_SCHEME", scheme)
            .env("UEVD_SCHEME_CHILD", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scheme {scheme}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn scheme_child() {
    let Ok(scheme) = std::env::var("NET_NAMING_SCHEME") else {
        return;
    };
    if std::env::var_os("UEVD_SCHEME_CHILD").is_none() {
        return;
    }
    let t = pci_nics();
    let o = other_nics();
    let n = |tree: &Tree, dev: &str| names(tree, dev);
    let has = |v: &[String], l: &str| v.iter().any(|x| x == l);
    let name = scheme.trim_start_matches(':');
    // An unknown name leaves the build's default.
    let built = option_env!("UEVD_DEFAULT_NET_NAMING_SCHEME").unwrap_or("v252");
    let name = match name {
        "bogus" => built,
        other => other,
    };
    let name = if name == "latest" { "v260" } else { name };
    let nn = newer_nics();
    let newer = |dev: &str| names(&nn, dev);
    let flags_since = |v: u32| name[1..].parse::<u32>().unwrap() >= v;
    let onboard = n(&t, ONBOARD);
    assert_eq!(onboard[0], format!("ID_NET_NAMING_SCHEME={name}"));
    match name {
        "v238" => {
            // No index 0, no ARI, no "v" names for VFs, no InfiniBand,
            // labels with the type prefix.
            assert!(!has(&n(&t, SMBIOS), "ID_NET_NAME_ONBOARD=eno0"));
            assert!(has(&n(&t, ARI), "ID_NET_NAME_PATH=enp5s1f2"));
            assert!(has(&n(&t, VF), "ID_NET_NAME_PATH=enp6s16f2"));
            assert!(n(&t, IB).is_empty());
            assert!(has(&onboard, "ID_NET_LABEL_ONBOARD=enOnboard LAN"));
            // Before v247 a bridge's slot names whatever is behind it.
            assert!(has(&n(&t, BEHIND_BRIDGE), "ID_NET_NAME_SLOT=ens9"));
        }
        "v240" => {
            assert!(has(&n(&t, SMBIOS), "ID_NET_NAME_ONBOARD=eno0"));
            assert!(has(&n(&t, IB), "ID_NET_NAME_PATH=ibp0s30d1"));
            assert!(has(&onboard, "ID_NET_LABEL_ONBOARD=enOnboard LAN"));
            assert!(
                n(&o, NETDEVSIM).len() == 2,
                "no netdevsim names before v243"
            );
        }
        "v243" => {
            assert!(has(&onboard, "ID_NET_LABEL_ONBOARD=Onboard LAN"));
            assert!(has(&n(&o, NETDEVSIM), "ID_NET_NAME_PATH=eni1np0"));
        }
        "v247" => {
            // Bridge slots are never used, even for multi-function cards.
            assert!(!n(&t, BEHIND_BRIDGE).iter().any(|l| l.contains("SLOT")));
            assert!(!n(&t, BEHIND_BRIDGE_MF).iter().any(|l| l.contains("SLOT")));
            // No s390 function ids yet.
            assert!(!n(&t, S390_PCI).iter().any(|l| l.contains("SLOT")));
        }
        "v249" => {
            assert!(has(&n(&t, S390_PCI), "ID_NET_NAME_SLOT=ens801"));
            assert!(!has(&n(&o, XEN), "ID_NET_NAME_SLOT=enX0"));
        }
        "v250" => {
            assert!(has(&n(&o, XEN), "ID_NET_NAME_SLOT=enX0"));
            assert!(!n(&t, BEHIND_BRIDGE_MF).iter().any(|l| l.contains("SLOT")));
        }
        "v251" => {
            assert!(has(&n(&t, BEHIND_BRIDGE_MF), "ID_NET_NAME_SLOT=ens9f1"));
            assert!(!has(&n(&o, DT_NIC), "ID_NET_NAME_ONBOARD=end0"));
        }
        "v252" => {
            assert!(has(&n(&o, DT_NIC), "ID_NET_NAME_ONBOARD=end0"));
        }
        "v253" | "v254" | "v255" | "v257" | "v258" | "v259" | "v260" => {}
        other => panic!("unexpected scheme {other}"),
    }
    if name.len() == 4 && flags_since(252) {
        newer_schemes(name, &newer, &|dev| n(&t, dev));
    }
}

/// What each scheme after v252 changed, on the interfaces it concerns
/// (systemd.net-naming-scheme(7)); each also keeps the others' names.
fn newer_schemes(
    name: &str,
    newer: &dyn Fn(&str) -> Vec<String>,
    older_tree: &dyn Fn(&str) -> Vec<String>,
) {
    let since = |v: u32| name[1..].parse::<u32>().unwrap() >= v;
    let scheme = format!("ID_NET_NAMING_SCHEME={name}");
    let expect = |rest: &[&str]| {
        let mut v = vec![scheme.clone()];
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    };
    // v253: a USB NIC on a host controller that is not on PCI.
    let usb: &[&str] = if since(253) {
        &["ID_NET_NAME_MAC=enx00e04c680020", "ID_NET_NAME_PATH=enu1"]
    } else {
        &["ID_NET_NAME_MAC=enx00e04c680020"]
    };
    assert_eq!(newer(SOC_USB_NIC), expect(usb));
    // v254: an SR-IOV representor's port name becomes "r<VF>"; other port
    // names stay.
    let repr = if since(254) {
        "ID_NET_NAME_PATH=enp8s0r3"
    } else {
        "ID_NET_NAME_PATH=enp8s0npf0vf3"
    };
    assert_eq!(
        newer(REPRESENTOR),
        expect(&["ID_NET_NAME_MAC=enx001b21000021", repr])
    );
    assert_eq!(
        newer(REPRESENTOR_PORT),
        expect(&[
            "ID_NET_NAME_MAC=enx001b21000022",
            "ID_NET_NAME_PATH=enp8s0np0"
        ])
    );
    // v255: a bridge's hotplug slot names no function behind it again,
    // multi-function or not.
    let mf_slot = older_tree(BEHIND_BRIDGE_MF)
        .iter()
        .any(|l| l == "ID_NET_NAME_SLOT=ens9f1");
    assert_eq!(mf_slot, !since(255), "{name}");
    // v257: the slot firmware numbers (ACPI _SUN); a root port's number
    // only for a multi-function card behind it.
    let sun: &[&str] = if since(257) {
        &[
            "ID_NET_NAME_MAC=enx001b21000023",
            "ID_NET_NAME_PATH=enp0s5",
            "ID_NET_NAME_SLOT=ens7",
        ]
    } else {
        &["ID_NET_NAME_MAC=enx001b21000023", "ID_NET_NAME_PATH=enp0s5"]
    };
    assert_eq!(newer(SUN), expect(sun));
    assert_eq!(
        newer(SUN_BEHIND_BRIDGE),
        expect(&["ID_NET_NAME_MAC=enx001b21000024", "ID_NET_NAME_PATH=enp9s0"])
    );
    let sun_mf: &[&str] = if since(257) {
        &[
            "ID_NET_NAME_MAC=enx001b21000025",
            "ID_NET_NAME_PATH=enp11s0f1",
            "ID_NET_NAME_SLOT=ens9f1",
        ]
    } else {
        &[
            "ID_NET_NAME_MAC=enx001b21000025",
            "ID_NET_NAME_PATH=enp11s0f1",
        ]
    };
    assert_eq!(newer(SUN_BEHIND_BRIDGE_MF), expect(sun_mf));
    // v257: switch ports whose own devicetree nodes have aliases.
    for (dev, mac, onboard) in [
        (
            DT_PORT1,
            "ID_NET_NAME_MAC=enx02abcd000026",
            "ID_NET_NAME_ONBOARD=end2",
        ),
        (
            DT_PORT2,
            "ID_NET_NAME_MAC=enx02abcd000027",
            "ID_NET_NAME_ONBOARD=end3",
        ),
    ] {
        let want: Vec<&str> = if since(257) {
            vec![mac, onboard]
        } else {
            vec![mac]
        };
        assert_eq!(newer(dev), expect(&want));
    }
    // v259: WLAN devicetree names, from "wifiN" aliases.
    let wlan: &[&str] = if since(259) {
        &[
            "ID_NET_NAME_MAC=wlx02abcd000028",
            "ID_NET_NAME_ONBOARD=wld0",
        ]
    } else {
        &["ID_NET_NAME_MAC=wlx02abcd000028"]
    };
    assert_eq!(newer(DT_WLAN), expect(wlan));
    // v260: MCTP interfaces are named at all ("mc"; this one has nothing
    // to name it by but the scheme).
    let mctp = if since(260) { expect(&[]) } else { Vec::new() };
    assert_eq!(newer(MCTP), mctp);
}

/// Without a scheme asked for, uevd names as udev 252 does.
#[test]
fn the_default_scheme_is_udev_252s() {
    // A build that names another default is tested by the scheme it names.
    if std::env::var_os("NET_NAMING_SCHEME").is_some()
        || option_env!("UEVD_DEFAULT_NET_NAMING_SCHEME").is_some()
    {
        return;
    }
    let t = newer_nics();
    assert_eq!(
        names(&t, SOC_USB_NIC),
        with_scheme(&["ID_NET_NAME_MAC=enx00e04c680020"])
    );
    assert_eq!(
        names(&t, SUN),
        with_scheme(&["ID_NET_NAME_MAC=enx001b21000023", "ID_NET_NAME_PATH=enp0s5"])
    );
}
