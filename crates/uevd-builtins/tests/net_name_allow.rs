//! systemd 256's `ID_NET_NAME_ALLOW` and `ID_NET_NAME_ALLOW_<ATTRIBUTE>`:
//! which sysfs attributes net_id may make names of. The interface's own
//! come from the event, a PCI function's from its database record.

mod common;

use common::net::*;
use common::*;
use std::collections::HashMap;
use uevd_builtins::{Call, Env, Failure, Properties};

/// The event's properties, and the records of other devices by devpath.
#[derive(Default)]
struct World {
    event: HashMap<Vec<u8>, Vec<u8>>,
    records: HashMap<Vec<u8>, HashMap<Vec<u8>, Vec<u8>>>,
}

impl World {
    fn on_event(mut self, pairs: &[(&str, &str)]) -> World {
        for (k, v) in pairs {
            self.event
                .insert(k.as_bytes().to_vec(), v.as_bytes().to_vec());
        }
        self
    }

    fn on_record(mut self, devpath: &str, pairs: &[(&str, &str)]) -> World {
        let r = self.records.entry(devpath.as_bytes().to_vec()).or_default();
        for (k, v) in pairs {
            r.insert(k.as_bytes().to_vec(), v.as_bytes().to_vec());
        }
        self
    }
}

impl Env for World {
    fn property(&self, key: &[u8]) -> Option<&[u8]> {
        self.event.get(key).map(|v| v.as_slice())
    }

    fn record_property(&self, devpath: &[u8], key: &[u8]) -> Option<Vec<u8>> {
        self.records.get(devpath)?.get(key).cloned()
    }
}

fn net_id(tree: &Tree, devpath: &str, world: &World) -> Result<Vec<String>, Failure> {
    let b = uevd_builtins::find(b"net_id").expect("net_id exists");
    let args = vec![b"net_id".to_vec()];
    let dev = tree.device(devpath);
    let call = Call {
        device: &dev,
        args: &args,
        env: world,
        test: true,
    };
    let mut out = Properties::new();
    b.run(&call, &mut out).map(|()| lines(&out))
}

fn names(tree: &Tree, devpath: &str, world: &World) -> Vec<String> {
    net_id(tree, devpath, world).unwrap_or_else(|e| panic!("net_id on {devpath}: {e}"))
}

fn with_scheme(rest: &[&str]) -> Vec<String> {
    let mut v = vec!["ID_NET_NAMING_SCHEME=v252".to_string()];
    v.extend(rest.iter().map(|s| s.to_string()));
    v
}

const ONBOARD_PCI: &str = "/devices/pci0000:00/0000:00:19.0";

#[test]
fn nothing_set_changes_nothing() {
    let t = pci_nics();
    assert_eq!(
        names(&t, ONBOARD, &World::default()),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx3c970eaabbcc",
            "ID_NET_NAME_ONBOARD=eno1d1",
            "ID_NET_LABEL_ONBOARD=Onboard LAN",
            "ID_NET_NAME_PATH=enp0s25d1",
        ])
    );
}

#[test]
fn the_interfaces_own_attributes_are_denied_one_by_one() {
    let t = pci_nics();
    // No address: no MAC name, the others stay.
    let w = World::default().on_event(&[("ID_NET_NAME_ALLOW_ADDRESS", "0")]);
    assert_eq!(
        names(&t, ONBOARD, &w),
        with_scheme(&[
            "ID_NET_NAME_ONBOARD=eno1d1",
            "ID_NET_LABEL_ONBOARD=Onboard LAN",
            "ID_NET_NAME_PATH=enp0s25d1",
        ])
    );
    // A port name that may not be used falls back to the port number.
    let w = World::default().on_event(&[("ID_NET_NAME_ALLOW_PHYS_PORT_NAME", "false")]);
    assert_eq!(
        names(&t, PORTS_NAMED, &w),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx001b21000006",
            "ID_NET_NAME_PATH=enp3s0d3",
            "ID_NET_NAME_SLOT=ens12d3",
        ])
    );
    // A port number that may not be read leaves no PCI name at all...
    let w = World::default().on_event(&[("ID_NET_NAME_ALLOW_DEV_PORT", "no")]);
    assert_eq!(
        names(&t, PORTS, &w),
        with_scheme(&["ID_NET_NAME_MAC=enx001b21000005"])
    );
    // ...unless the port has a name.
    assert_eq!(
        names(&t, PORTS_NAMED, &w),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx001b21000006",
            "ID_NET_NAME_PATH=enp3s0np1",
            "ID_NET_NAME_SLOT=ens12np1",
        ])
    );
}

#[test]
fn a_denylist_by_default_and_an_allowlist_of_some() {
    let t = pci_nics();
    // Everything denied: not even the interface's type may be read.
    let w = World::default().on_event(&[("ID_NET_NAME_ALLOW", "0")]);
    assert!(matches!(net_id(&t, ONBOARD, &w), Err(Failure::Error(_))));
    // Denied but for what a MAC name is made of.
    let w = World::default().on_event(&[
        ("ID_NET_NAME_ALLOW", "0"),
        ("ID_NET_NAME_ALLOW_TYPE", "1"),
        ("ID_NET_NAME_ALLOW_IFLINK", "1"),
        ("ID_NET_NAME_ALLOW_ADDRESS", "1"),
        ("ID_NET_NAME_ALLOW_ADDR_ASSIGN_TYPE", "1"),
    ]);
    assert_eq!(
        names(&t, ONBOARD, &w),
        with_scheme(&["ID_NET_NAME_MAC=enx3c970eaabbcc"])
    );
    // Not a boolean: denied, with no fallback to ID_NET_NAME_ALLOW.
    let w = World::default().on_event(&[
        ("ID_NET_NAME_ALLOW", "1"),
        ("ID_NET_NAME_ALLOW_ADDRESS", "maybe"),
    ]);
    assert!(!names(&t, ONBOARD, &w)
        .iter()
        .any(|l| l.starts_with("ID_NET_NAME_MAC=")));
}

#[test]
fn a_pci_functions_attributes_follow_its_record_not_the_event() {
    let t = pci_nics();
    // On the event, the PCI function's index and label are not concerned.
    let w = World::default().on_event(&[
        ("ID_NET_NAME_ALLOW_ACPI_INDEX", "0"),
        ("ID_NET_NAME_ALLOW_INDEX", "0"),
        ("ID_NET_NAME_ALLOW_LABEL", "0"),
    ]);
    assert_eq!(
        names(&t, ONBOARD, &w),
        names(&t, ONBOARD, &World::default())
    );
    // In the function's record they are.
    let w = World::default().on_record(
        ONBOARD_PCI,
        &[
            ("ID_NET_NAME_ALLOW_ACPI_INDEX", "0"),
            ("ID_NET_NAME_ALLOW_INDEX", "0"),
        ],
    );
    assert_eq!(
        names(&t, ONBOARD, &w),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx3c970eaabbcc",
            "ID_NET_NAME_PATH=enp0s25d1",
        ])
    );
    let w = World::default().on_record(ONBOARD_PCI, &[("ID_NET_NAME_ALLOW_LABEL", "0")]);
    assert_eq!(
        names(&t, ONBOARD, &w),
        with_scheme(&[
            "ID_NET_NAME_MAC=enx3c970eaabbcc",
            "ID_NET_NAME_ONBOARD=eno1d1",
            "ID_NET_NAME_PATH=enp0s25d1",
        ])
    );
}

#[test]
fn a_hotplug_slot_address_follows_the_pci_buss_record() {
    let t = pci_nics();
    let all = names(&t, PORTS, &World::default());
    assert!(
        all.contains(&"ID_NET_NAME_SLOT=ens12d2".to_string()),
        "{all:?}"
    );
    let w = World::default().on_record("/bus/pci", &[("ID_NET_NAME_ALLOW_SLOTS/12/ADDRESS", "0")]);
    let denied = names(&t, PORTS, &w);
    assert!(
        !denied.iter().any(|l| l.starts_with("ID_NET_NAME_SLOT=")),
        "{denied:?}"
    );
    assert!(denied.contains(&"ID_NET_NAME_PATH=enp3s0d2".to_string()));
}
