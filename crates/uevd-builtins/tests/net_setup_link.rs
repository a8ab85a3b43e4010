//! net_setup_link on fake sysfs trees with `.link` fixtures (every naming
//! policy and match key), on the lab guest's NICs against what udevd 252
//! stored for them, and on real interfaces in a private network namespace
//! (driver from ethtool, Kind=, the persistent MAC address it sets).

mod common;

use common::guest::{guest, E1000, VIRTIO_NET};
use common::*;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;
use uevd_builtins::net_setup_link::{NetSetupLink, Settings};
use uevd_builtins::{Builtin, Call, Failure, Properties};
use uevd_sysfs::Device;
use uevd_uevent::Action;

/// Debian udev 252's own files.
const DEFAULT_LINK: &str = "\
# SPDX-License-Identifier: MIT-0
[Match]
OriginalName=*

[Link]
NamePolicy=keep kernel database onboard slot path
AlternativeNamesPolicy=database onboard slot path
MACAddressPolicy=persistent
";
const USB_BY_MAC_LINK: &str = "[Match]\nPath=*-usb-*\n\n[Link]\nNamePolicy=mac\n";

/// The lab guest's /etc/machine-id.
const LAB_MACHINE_ID: &str = "0123456789abcdef0123456789abcdef";

/// `.link` directories (an /etc, a /run and a /lib) and what else the
/// builtin reads, all in a temporary directory.
struct Links {
    dir: tempfile::TempDir,
    cmdline: String,
}

impl Links {
    fn new() -> Links {
        let dir = tempfile::tempdir().unwrap();
        for d in ["etc", "run", "lib", "creds"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("machine-id"), format!("{LAB_MACHINE_ID}\n")).unwrap();
        Links {
            dir,
            cmdline: String::new(),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn add(&self, rel: &str, text: &str) -> &Self {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }

    /// The name a file has in ID_NET_LINK_FILE.
    fn shown(&self, rel: &str) -> String {
        std::fs::canonicalize(self.dir.path())
            .unwrap()
            .join(rel)
            .display()
            .to_string()
    }

    fn settings(&self) -> Settings {
        Settings {
            dirs: ["etc", "run", "lib"].iter().map(|d| self.path(d)).collect(),
            kernel: Some(false),
            machine_id: self.path("machine-id"),
            cmdline: Some(self.cmdline.clone().into_bytes()),
            credentials: Some(vec![self.path("creds")]),
            recheck: Duration::ZERO,
        }
    }

    fn builtin(&self) -> NetSetupLink {
        NetSetupLink::new(self.settings())
    }
}

fn env(pairs: &[(&str, &str)]) -> Props {
    let mut p = Props::default();
    for (k, v) in pairs {
        p.0.insert(k.as_bytes().to_vec(), v.as_bytes().to_vec());
    }
    p
}

fn call(
    b: &dyn Builtin,
    dev: &Rc<Device>,
    env: &Props,
    test: bool,
) -> Result<Vec<String>, Failure> {
    let args = vec![b"net_setup_link".to_vec()];
    let mut out = Properties::new();
    b.run(
        &Call {
            device: dev,
            args: &args,
            env,
            test,
        },
        &mut out,
    )
    .map(|()| lines(&out))
}

fn get(props: &[String], key: &str) -> Option<String> {
    props
        .iter()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
}

/// An Ethernet interface as the kernel shows it in sysfs.
fn iface(
    t: &mut Tree,
    parent: &str,
    name: &str,
    ifindex: u32,
    mac: &str,
    name_assign_type: u32,
) -> String {
    let dev = netdev(t, parent, name, ifindex, mac);
    t.attrs(
        &dev,
        &[
            ("name_assign_type", &name_assign_type.to_string()),
            ("flags", "0x1002"),
        ],
    );
    dev
}

const NIC_PCI: &str = "/devices/pci0000:00/0000:00:05.0";
const NIC: &str = "/devices/pci0000:00/0000:00:05.0/net/eth0";

/// One PCI NIC bound to e1000e, and a virtual interface.
fn tree() -> Tree {
    let mut t = Tree::new();
    t.node("/devices/pci0000:00");
    pci(&mut t, "/devices/pci0000:00", "0000:00:05.0", "0200", false);
    t.driver(NIC_PCI, "pci", "e1000e");
    iface(&mut t, NIC_PCI, "eth0", 2, "52:54:00:aa:bb:cc", 1);
    t
}

const NAMES: &[(&str, &str)] = &[
    ("ID_NET_NAME_MAC", "enx525400aabbcc"),
    ("ID_NET_NAME_PATH", "enp0s5"),
    ("ID_NET_NAME_SLOT", "ens5"),
    ("ID_NET_NAME_ONBOARD", "eno5"),
    ("ID_PATH", "pci-0000:00:05.0"),
];

fn name_with(
    links: &Links,
    t: &Tree,
    policy: &str,
    extra: &str,
    env_pairs: &[(&str, &str)],
) -> Option<String> {
    links.add(
        "lib/50-t.link",
        &format!("[Match]\nOriginalName=*\n[Link]\nNamePolicy={policy}\n{extra}"),
    );
    let out = call(&links.builtin(), &t.device(NIC), &env(env_pairs), true).unwrap();
    get(&out, "ID_NET_NAME")
}

#[test]
fn lab_guest_nics_get_what_udevd_stored() {
    let mut t = guest();
    t.driver("/devices/pci0000:00/0000:00:07.0", "pci", "e1000");
    for dev in [E1000, VIRTIO_NET] {
        t.attrs(dev, &[("name_assign_type", "1"), ("flags", "0x1002")]);
    }
    let links = Links::new();
    links
        .add("lib/73-usb-net-by-mac.link", USB_BY_MAC_LINK)
        .add("lib/99-default.link", DEFAULT_LINK);
    let b = links.builtin();
    // What the rules have run before net_setup_link: net_id (75-net-
    // description.rules) and path_id (80-net-setup-link.rules).
    let before = |dev: &str| {
        let mut e = Props::default();
        for name in ["net_id", "path_id"] {
            for (k, v) in run(name, &t.device(dev)).unwrap() {
                e.0.insert(k, v);
            }
        }
        e
    };
    let file = links.shown("lib/99-default.link");
    // db.txt: n2 and n3 of lab/out/e2e-udevd, with the file in /usr/lib.
    let nics = [
        (E1000, 2, "e1000", "ens7"),
        (VIRTIO_NET, 3, "virtio_net", "ens2"),
    ];
    let db = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab/out/e2e-udevd/db.txt");
    if let Ok(db) = std::fs::read_to_string(db) {
        for (_, ifindex, driver, name) in nics {
            let entry = db
                .split("==> ")
                .find(|e| e.starts_with(&format!("n{ifindex}\n")))
                .unwrap();
            assert!(
                entry.contains(&format!("\nE:ID_NET_DRIVER={driver}\n")),
                "{entry}"
            );
            assert!(
                entry.contains("\nE:ID_NET_LINK_FILE=/usr/lib/systemd/network/99-default.link\n")
            );
            assert!(
                entry.contains(&format!("\nE:ID_NET_NAME={name}\n")),
                "{entry}"
            );
        }
    }
    for (dev, _, driver, name) in nics {
        let out = call(&b, &t.device(dev), &before(dev), true).unwrap();
        assert_eq!(
            out,
            [
                format!("ID_NET_DRIVER={driver}"),
                format!("ID_NET_LINK_FILE={file}"),
                format!("ID_NET_NAME={name}"),
            ]
        );
    }
}

#[test]
fn lab_databases_agree_when_present() {
    // Every net_setup_link property udevd stored in the lab's runs, for
    // the interfaces this file can rebuild: the e2e guest's NICs above,
    // and the dummy interfaces of the netifs run (rebuilt from sysfs as
    // the kernel shows them; their driver comes from ethtool, see the
    // namespace test below).
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab/out");
    let Ok(db) = std::fs::read_to_string(root.join("netifs-n1000-udevd/db.txt")) else {
        println!("skipped: no lab results");
        return;
    };
    let t = Tree::new();
    let links = Links::new();
    links
        .add("lib/73-usb-net-by-mac.link", USB_BY_MAC_LINK)
        .add("lib/99-default.link", DEFAULT_LINK);
    let b = NetSetupLink::new(Settings {
        recheck: Duration::from_secs(3600),
        ..links.settings()
    });
    let file = links.shown("lib/99-default.link");
    let mut compared = 0;
    let mut entry: Option<(u32, Vec<String>)> = None;
    let mut entries = Vec::new();
    for line in db.lines().chain(std::iter::once("==> end")) {
        if let Some(key) = line.strip_prefix("==> ") {
            if let Some(e) = entry.take() {
                entries.push(e);
            }
            entry = key
                .strip_prefix('n')
                .and_then(|i| i.parse().ok())
                .map(|i| (i, Vec::new()));
        } else if let (Some((_, props)), Some(p)) = (entry.as_mut(), line.strip_prefix("E:")) {
            props.push(p.to_string());
        }
    }
    for (ifindex, props) in entries {
        let Some(name) = get(&props, "ID_NET_NAME") else {
            continue;
        };
        // Only what net_setup_link reads: a thousand full devices take
        // long to write on a slow disk.
        let dev = format!("/devices/virtual/net/{name}");
        let dir = t.path(&dev);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, value) in [
            ("uevent", format!("INTERFACE={name}\nIFINDEX={ifindex}\n")),
            ("type", "1\n".into()),
            ("name_assign_type", "1\n".into()),
            ("addr_assign_type", "1\n".into()),
        ] {
            std::fs::write(dir.join(file), value).unwrap();
        }
        let out = call(&b, &t.device(&dev), &Props::default(), true).unwrap();
        let theirs: Vec<String> = props
            .iter()
            .filter(|p| p.starts_with("ID_NET_LINK_FILE=") || p.starts_with("ID_NET_NAME="))
            .map(|p| p.replace("/usr/lib/systemd/network/99-default.link", &file))
            .collect();
        assert_eq!(out, theirs, "n{ifindex}");
        compared += 1;
    }
    assert_eq!(compared, 1000);
}

#[test]
fn keep_and_kernel_respect_how_the_kernel_named_it() {
    let links = Links::new();
    let mut t = tree();
    let p = "keep kernel slot";
    assert_eq!(name_with(&links, &t, p, "", NAMES).as_deref(), Some("ens5"));
    // NET_NAME_USER and NET_NAME_RENAMED: userspace named it, keep.
    for nat in ["3", "4"] {
        t.attrs(NIC, &[("name_assign_type", nat)]);
        assert_eq!(
            name_with(&links, &t, p, "", NAMES).as_deref(),
            Some("eth0"),
            "{nat}"
        );
        assert_eq!(
            name_with(&links, &t, "slot", "", NAMES).as_deref(),
            Some("ens5"),
            "{nat}"
        );
    }
    // NET_NAME_PREDICTABLE: the kernel's own name is stable, keep.
    t.attrs(NIC, &[("name_assign_type", "2")]);
    assert_eq!(name_with(&links, &t, p, "", NAMES).as_deref(), Some("eth0"));
    assert_eq!(
        name_with(&links, &t, "keep slot", "", NAMES).as_deref(),
        Some("ens5")
    );
    // Without the attribute udev takes NET_NAME_UNKNOWN.
    std::fs::remove_file(t.path(NIC).join("name_assign_type")).unwrap();
    assert_eq!(name_with(&links, &t, p, "", NAMES).as_deref(), Some("ens5"));
}

#[test]
fn schemes_before_v240_never_rename_what_userspace_named() {
    let mut links = Links::new();
    let mut t = tree();
    t.attrs(NIC, &[("name_assign_type", "3")]);
    links.cmdline = "quiet net.naming-scheme=v239".into();
    assert_eq!(
        name_with(&links, &t, "slot", "", NAMES).as_deref(),
        Some("eth0")
    );
    assert_eq!(
        name_with(&links, &t, "slot", "Name=lan0\n", NAMES).as_deref(),
        Some("eth0")
    );
    links.cmdline = "net.naming-scheme=v240".into();
    assert_eq!(
        name_with(&links, &t, "slot", "", NAMES).as_deref(),
        Some("ens5")
    );
}

#[test]
fn property_policies_in_order() {
    let links = Links::new();
    let t = tree();
    let n = |policy: &str, e: &[(&str, &str)]| name_with(&links, &t, policy, "", e);
    assert_eq!(
        n("database onboard slot path mac", NAMES).as_deref(),
        Some("eno5")
    );
    assert_eq!(n("slot onboard", NAMES).as_deref(), Some("ens5"));
    assert_eq!(n("path", NAMES).as_deref(), Some("enp0s5"));
    assert_eq!(n("mac", NAMES).as_deref(), Some("enx525400aabbcc"));
    let mut with_db = NAMES.to_vec();
    with_db.push(("ID_NET_NAME_FROM_DATABASE", "lan7"));
    assert_eq!(n("database onboard", &with_db).as_deref(), Some("lan7"));
    assert_eq!(n("onboard database", &with_db).as_deref(), Some("eno5"));
    // A name the kernel would refuse is skipped: too long, or a number.
    let bad = [
        ("ID_NET_NAME_ONBOARD", "eno123456789012345"),
        ("ID_NET_NAME_SLOT", "12"),
        ("ID_NET_NAME_PATH", "enp0s5"),
    ];
    assert_eq!(n("onboard slot path", &bad).as_deref(), Some("enp0s5"));
    // Unknown policies are dropped, the rest still apply.
    assert_eq!(n("bogus slot", NAMES).as_deref(), Some("ens5"));
}

#[test]
fn name_is_the_fallback_and_the_current_name_the_last_resort() {
    let mut links = Links::new();
    let t = tree();
    assert_eq!(
        name_with(&links, &t, "onboard", "Name=lan0\n", &[]).as_deref(),
        Some("lan0")
    );
    assert_eq!(
        name_with(&links, &t, "", "Name=lan0\n", NAMES).as_deref(),
        Some("lan0")
    );
    assert_eq!(
        name_with(&links, &t, "onboard", "", &[]).as_deref(),
        Some("eth0")
    );
    // An invalid Name= is ignored.
    assert_eq!(
        name_with(&links, &t, "", "Name=a:b\n", NAMES).as_deref(),
        Some("eth0")
    );
    // net.ifnames=0 turns the policies off, not Name=.
    links.cmdline = "net.ifnames=0".into();
    assert_eq!(
        name_with(&links, &t, "slot", "", NAMES).as_deref(),
        Some("eth0")
    );
    assert_eq!(
        name_with(&links, &t, "slot", "Name=lan0\n", NAMES).as_deref(),
        Some("lan0")
    );
    links.cmdline = "net.ifnames=1".into();
    assert_eq!(
        name_with(&links, &t, "slot", "", NAMES).as_deref(),
        Some("ens5")
    );
}

/// An interface named `wan!1` (the kernel allows a `!`; sysfs shows it as
/// is, and udev's device name turns it into `wan/1`) that no policy
/// renames keeps its INTERFACE name from scheme v258 on, and before that
/// got the device name, which the kernel would refuse.
#[test]
fn an_unrenamed_interface_keeps_its_interface_name_from_v258() {
    let mut links = Links::new();
    let mut t = tree();
    let dev = iface(&mut t, NIC_PCI, "wan!1", 3, "52:54:00:aa:bb:cd", 1);
    links.add(
        "lib/50-t.link",
        "[Match]\nOriginalName=*\n[Link]\nNamePolicy=onboard\n",
    );
    let name = |links: &Links| {
        let out = call(&links.builtin(), &t.device(&dev), &env(&[]), true).unwrap();
        get(&out, "ID_NET_NAME")
    };
    links.cmdline = "net.naming-scheme=v257".into();
    assert_eq!(name(&links).as_deref(), Some("wan/1"));
    links.cmdline = "net.naming-scheme=v258".into();
    assert_eq!(name(&links).as_deref(), Some("wan!1"));
    links.cmdline = String::new();
    assert_eq!(
        name(&links).as_deref(),
        Some("wan/1"),
        "the default is v252"
    );
}

#[test]
fn only_add_bind_and_move_are_configured() {
    let links = Links::new();
    links.add(
        "lib/50-t.link",
        "[Match]\nOriginalName=*\n[Link]\nNamePolicy=slot\n",
    );
    let t = tree();
    let b = links.builtin();
    let with = |action| {
        let event = t.sysfs().read_event(action, NIC.as_bytes()).unwrap();
        let dev = Rc::new(Device::from_event(&t.sysfs(), event));
        get(&call(&b, &dev, &env(NAMES), true).unwrap(), "ID_NET_NAME")
    };
    assert_eq!(with(Action::Add).as_deref(), Some("ens5"));
    assert_eq!(with(Action::Bind).as_deref(), Some("ens5"));
    // A move keeps the name it was given; a change does not rename.
    assert_eq!(with(Action::Move).as_deref(), Some("eth0"));
    assert_eq!(with(Action::Change).as_deref(), Some("eth0"));
}

/// Which file matches NIC (by its name in lib/), with the environment.
fn which(links: &Links, t: &Tree, dev: &str, e: &[(&str, &str)]) -> Option<String> {
    let out = call(&links.builtin(), &t.device(dev), &env(e), true).unwrap();
    get(&out, "ID_NET_LINK_FILE").map(|f| f.rsplit('/').next().unwrap().to_string())
}

fn only(links: &Links, match_section: &str) {
    for entry in std::fs::read_dir(links.path("lib")).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() {
            std::fs::remove_file(p).unwrap();
        }
    }
    links.add("lib/10-t.link", &format!("[Match]\n{match_section}\n"));
}

#[test]
fn match_keys_on_the_interface() {
    let links = Links::new();
    let mut t = tree();
    let m = |links: &Links, t: &Tree, key: &str, e: &[(&str, &str)]| {
        only(links, key);
        which(links, t, NIC, e).is_some()
    };
    assert!(m(&links, &t, "OriginalName=eth*", &[]));
    assert!(m(&links, &t, "OriginalName=wlan0 eth0", &[]));
    assert!(!m(&links, &t, "OriginalName=!eth*", &[]));
    assert!(m(&links, &t, "OriginalName=!wlan*", &[]));
    assert!(m(&links, &t, "MACAddress=52:54:00:aa:bb:cc", &[]));
    assert!(m(
        &links,
        &t,
        "MACAddress=00:00:00:00:00:01 5254.00aa.bbcc",
        &[]
    ));
    assert!(!m(&links, &t, "MACAddress=52:54:00:aa:bb:cd", &[]));
    assert!(m(&links, &t, "Path=pci-0000:00:05.*", NAMES));
    assert!(!m(&links, &t, "Path=pci-0000:00:05.*", &[]));
    assert!(m(&links, &t, "Path=!*-usb-*", NAMES));
    assert!(m(&links, &t, "Path=!*-usb-*", &[]));
    assert!(!m(&links, &t, "Path=*-usb-*", NAMES));
    assert!(m(&links, &t, "Driver=e1000*", &[]));
    assert!(!m(&links, &t, "Driver=virtio_net", &[]));
    assert!(m(&links, &t, "Driver=!virtio_net", &[]));
    assert!(m(&links, &t, "Type=ether", &[]));
    assert!(!m(&links, &t, "Type=wlan", &[]));
    assert!(m(
        &links,
        &t,
        "Property=ID_PATH=pci-* ID_NET_NAME_SLOT=ens5",
        NAMES
    ));
    assert!(!m(&links, &t, "Property=ID_PATH=pci-* ID_BUS=usb", NAMES));
    assert!(m(&links, &t, "Property=!ID_BUS=usb", NAMES));
    assert!(m(&links, &t, "Property=\"ID_NET_NAME_SLOT=ens*\"", NAMES));
    // Every key must hold.
    assert!(m(
        &links,
        &t,
        "OriginalName=eth0\nDriver=e1000e\nType=ether",
        &[]
    ));
    assert!(!m(&links, &t, "OriginalName=eth0\nDriver=e1000", &[]));
    // Kind= comes from rtnetlink only: nothing here has one.
    assert!(!m(&links, &t, "Kind=*", &[]));
    assert!(m(&links, &t, "Kind=!veth", &[]));
    // So does the permanent address.
    assert!(!m(&links, &t, "PermanentMACAddress=52:54:00:aa:bb:cc", &[]));

    // DEVTYPE is the type when there is one.
    t.attr(NIC, "uevent", "INTERFACE=eth0\nIFINDEX=2\nDEVTYPE=wlan\n");
    assert!(m(&links, &t, "Type=wlan", &[]));
    assert!(!m(&links, &t, "Type=ether", &[]));

    // A [Match] section with nothing valid in it makes the file useless.
    assert!(!m(&links, &t, "Driver=", &[]));
    assert!(!m(&links, &t, "OriginalName=a/b", &[]));
}

#[test]
fn match_keys_on_the_system() {
    let links = Links::new();
    let t = tree();
    let m = |key: &str| {
        only(&links, key);
        which(&links, &t, NIC, &[]).is_some()
    };
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let hostname = hostname.trim();
    assert!(m(&format!("Host={hostname}")));
    assert!(m(&format!("Host={}", hostname.to_uppercase())));
    assert!(!m(&format!("Host=!{hostname}")));
    assert!(m(&format!("Host={LAB_MACHINE_ID}")));
    assert!(m("Host=01234567-89ab-cdef-0123-456789abcdef"));
    assert!(!m("Host=00000000000000000000000000000001"));

    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let release = release.trim();
    assert!(m(&format!("KernelVersion={release}")));
    assert!(m("KernelVersion=>=2.6"));
    assert!(!m("KernelVersion=<2.6"));
    assert!(m("KernelVersion=!<2.6"));

    assert!(m("Architecture=native"));
    assert!(!m("Architecture=!native"));
    assert!(!m("Architecture=no-such-architecture"));

    // Exactly one of a condition and its negation holds.
    for c in [
        "Virtualization=yes",
        "Virtualization=vm",
        "Virtualization=container",
        "Firmware=uefi",
        "Firmware=device-tree",
    ] {
        let (k, v) = c.split_once('=').unwrap();
        assert_ne!(m(c), m(&format!("{k}=!{v}")), "{c}");
    }
    assert!(!m("Firmware=no-such-firmware"));
    assert!(!m("Firmware=smbios-field(bogus)"));
    assert!(
        !m("Firmware=!smbios-field(bogus)"),
        "an error fails, negated or not"
    );

    assert!(!m("Credential=wanted"));
    std::fs::write(links.path("creds/wanted"), "x").unwrap();
    assert!(m("Credential=wanted"));
    assert!(!m("Credential=../creds/wanted"));
}

#[test]
fn kernel_command_line_conditions() {
    let mut links = Links::new();
    let t = tree();
    links.cmdline = "root=/dev/vda1 quiet mine=\"a b\"".into();
    let m = |links: &Links, key: &str| {
        only(links, key);
        which(links, &t, NIC, &[]).is_some()
    };
    assert!(m(&links, "KernelCommandLine=quiet"));
    assert!(m(&links, "KernelCommandLine=root"));
    assert!(m(&links, "KernelCommandLine=root=/dev/vda1"));
    assert!(!m(&links, "KernelCommandLine=root=/dev/vda2"));
    assert!(m(&links, "KernelCommandLine=mine=a b"));
    assert!(!m(&links, "KernelCommandLine=roo"));
    assert!(m(&links, "KernelCommandLine=!splash"));
    // The last assignment of a condition replaces earlier ones.
    assert!(m(
        &links,
        "KernelCommandLine=splash\nKernelCommandLine=quiet"
    ));
    links.cmdline = String::new();
    assert!(!m(&links, "KernelCommandLine=quiet"));
}

#[test]
fn files_are_ordered_by_name_and_earlier_directories_mask_later_ones() {
    let links = Links::new();
    let t = tree();
    links
        .add("lib/99-default.link", DEFAULT_LINK)
        .add(
            "lib/50-nic.link",
            "[Match]\nDriver=e1000e\n[Link]\nName=lan0\n",
        )
        .add(
            "run/60-other.link",
            "[Match]\nDriver=virtio_net\n[Link]\nName=virt0\n",
        );
    let b = links.builtin();
    let out = || call(&b, &t.device(NIC), &env(NAMES), true).unwrap();
    assert_eq!(
        get(&out(), "ID_NET_LINK_FILE"),
        Some(links.shown("lib/50-nic.link"))
    );
    assert_eq!(get(&out(), "ID_NET_NAME").as_deref(), Some("lan0"));
    // /run hides the file of the same name in /lib.
    links.add(
        "run/50-nic.link",
        "[Match]\nDriver=e1000e\n[Link]\nName=lan1\n",
    );
    assert_eq!(
        get(&out(), "ID_NET_LINK_FILE"),
        Some(links.shown("run/50-nic.link"))
    );
    assert_eq!(get(&out(), "ID_NET_NAME").as_deref(), Some("lan1"));
    // An empty file in /etc, or one linked to /dev/null, hides it too.
    links.add("etc/50-nic.link", "");
    assert_eq!(
        get(&out(), "ID_NET_LINK_FILE"),
        Some(links.shown("lib/99-default.link"))
    );
    std::fs::remove_file(links.path("etc/50-nic.link")).unwrap();
    std::os::unix::fs::symlink("/dev/null", links.path("etc/50-nic.link")).unwrap();
    assert_eq!(get(&out(), "ID_NET_NAME").as_deref(), Some("eno5"));
    // A name sorting first wins, whatever its directory.
    links.add(
        "lib/10-first.link",
        "[Match]\nOriginalName=eth0\n[Link]\nName=first0\n",
    );
    assert_eq!(get(&out(), "ID_NET_NAME").as_deref(), Some("first0"));
    // A file with a syntax error is left out entirely, as is one without a
    // usable [Match] section.
    links.add(
        "lib/10-first.link",
        "[Match\nOriginalName=eth0\n[Link]\nName=first0\n",
    );
    links.add("lib/11-nomatch.link", "[Link]\nName=nomatch0\n");
    links.add(
        "lib/12-x.link",
        "[Match]\nOriginalName=eth0\n[Link]\nName=x0\n",
    );
    assert_eq!(get(&out(), "ID_NET_NAME").as_deref(), Some("x0"));
    // Hidden files and other suffixes are not configuration.
    links.add(
        "lib/.05-hidden.link",
        "[Match]\nOriginalName=*\n[Link]\nName=hidden0\n",
    );
    links.add(
        "lib/05-x.link.bak",
        "[Match]\nOriginalName=*\n[Link]\nName=bak0\n",
    );
    assert_eq!(get(&out(), "ID_NET_NAME").as_deref(), Some("x0"));
}

#[test]
fn drop_ins_extend_a_file_from_any_directory() {
    let links = Links::new();
    let t = tree();
    links.add("lib/99-default.link", DEFAULT_LINK);
    let b = links.builtin();
    let name = || {
        get(
            &call(&b, &t.device(NIC), &env(NAMES), true).unwrap(),
            "ID_NET_NAME",
        )
    };
    assert_eq!(name().as_deref(), Some("eno5"));
    links.add(
        "etc/99-default.link.d/10-path.conf",
        "[Link]\nNamePolicy=path\n",
    );
    assert_eq!(name().as_deref(), Some("enp0s5"));
    // Read in order of their names: 20 after 10.
    links.add(
        "lib/99-default.link.d/20-mac.conf",
        "[Link]\nNamePolicy=mac\n",
    );
    assert_eq!(name().as_deref(), Some("enx525400aabbcc"));
    // Masked by a same-named drop-in in an earlier directory.
    links.add("run/99-default.link.d/20-mac.conf", "");
    assert_eq!(name().as_deref(), Some("enp0s5"));
    // A drop-in can add to [Match] lists.
    links.add(
        "lib/99-default.link.d/30-match.conf",
        "[Match]\nDriver=virtio_net\n",
    );
    assert_eq!(name(), None);
}

#[test]
fn loopback_unmatched_and_wrong_calls() {
    let links = Links::new();
    links.add("lib/99-default.link", DEFAULT_LINK);
    let b = links.builtin();
    let mut t = tree();
    let lo = "/devices/virtual/net/lo";
    t.dev(lo, "net", "INTERFACE=lo\nIFINDEX=1\n").attrs(
        lo,
        &[
            ("type", "772"),
            ("flags", "0x9"),
            ("address", "00:00:00:00:00:00"),
        ],
    );
    // .link files never apply to the loopback interface.
    assert_eq!(
        call(&b, &t.device(lo), &Props::default(), true).unwrap(),
        Vec::<String>::new()
    );
    // No file matching: only the driver.
    links.add("lib/99-default.link", "[Match]\nDriver=virtio_net\n");
    assert_eq!(
        call(&b, &t.device(NIC), &Props::default(), true).unwrap(),
        ["ID_NET_DRIVER=e1000e"]
    );
    // Arguments are refused, as is a device without an interface index.
    let args = vec![b"net_setup_link".to_vec(), b"x".to_vec()];
    let mut out = Properties::new();
    let r = b.run(
        &Call {
            device: &t.device(NIC),
            args: &args,
            env: &Props::default(),
            test: true,
        },
        &mut out,
    );
    assert!(matches!(r, Err(Failure::Error(_))));
    assert!(matches!(
        call(&b, &t.device(NIC_PCI), &Props::default(), true),
        Err(Failure::Error(_))
    ));
    // The registered builtin is this one, with the system's directories.
    assert_eq!(
        uevd_builtins::find(b"net_setup_link").unwrap().name(),
        "net_setup_link"
    );
}

/// SipHash-2-4, written again here so that the test does not take the
/// builtin's word for it.
fn siphash(data: &[u8], key: [u8; 16]) -> u64 {
    let k0 = u64::from_le_bytes(key[..8].try_into().unwrap());
    let k1 = u64::from_le_bytes(key[8..].try_into().unwrap());
    let (mut v0, mut v1, mut v2, mut v3) = (
        k0 ^ 0x736f6d6570736575,
        k1 ^ 0x646f72616e646f6d,
        k0 ^ 0x6c7967656e657261,
        k1 ^ 0x7465646279746573,
    );
    let sip = |v0: &mut u64, v1: &mut u64, v2: &mut u64, v3: &mut u64, m: u64| {
        *v3 ^= m;
        for _ in 0..2 {
            *v0 = v0.wrapping_add(*v1);
            *v1 = v1.rotate_left(13) ^ *v0;
            *v0 = v0.rotate_left(32);
            *v2 = v2.wrapping_add(*v3);
            *v3 = v3.rotate_left(16) ^ *v2;
            *v0 = v0.wrapping_add(*v3);
            *v3 = v3.rotate_left(21) ^ *v0;
            *v2 = v2.wrapping_add(*v1);
            *v1 = v1.rotate_left(17) ^ *v2;
            *v2 = v2.rotate_left(32);
        }
        *v0 ^= m;
    };
    let mut padded = data.to_vec();
    while padded.len() % 8 != 7 {
        padded.push(0);
    }
    padded.push(data.len() as u8);
    for c in padded.chunks(8) {
        sip(
            &mut v0,
            &mut v1,
            &mut v2,
            &mut v3,
            u64::from_le_bytes(c.try_into().unwrap()),
        );
    }
    v2 ^= 0xff;
    // Four finishing rounds: two blocks of zeros mix nothing in.
    sip(&mut v0, &mut v1, &mut v2, &mut v3, 0);
    sip(&mut v0, &mut v1, &mut v2, &mut v3, 0);
    v0 ^ v1 ^ v2 ^ v3
}

/// systemd's persistent address: the hash of machine id and name, unicast
/// and locally administered.
fn expected_mac(machine_id: &str, name: &str) -> String {
    let key = [
        0xd3, 0x1e, 0x48, 0xfa, 0x90, 0xfe, 0x4b, 0x4c, 0x9d, 0xaf, 0xd5, 0xd7, 0xa1, 0xb1, 0x2e,
        0x8a,
    ];
    let mut input: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&machine_id[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    input.extend_from_slice(name.as_bytes());
    let mut mac = siphash(&input, key).to_le_bytes();
    mac[0] = (mac[0] & 0xfe) | 0x02;
    mac[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[test]
fn the_test_s_siphash_is_siphash() {
    let key: [u8; 16] = std::array::from_fn(|i| i as u8);
    let msg: Vec<u8> = (0..15).collect();
    assert_eq!(siphash(&[], key), 0x726fdb47dd0e0e31);
    assert_eq!(siphash(&msg, key), 0xa129ca6149be45e5);
    // And udevd in the lab guest gave dummy0 this address.
    assert_eq!(expected_mac(LAB_MACHINE_ID, "dummy0"), "ce:86:03:8c:2e:db");
}

mod netns {
    //! Real interfaces, each test on a thread of its own with a private
    //! network namespace and a private mount namespace in which a sysfs
    //! of that network namespace is mounted over /sys.

    use super::*;
    use std::process::Command;

    pub fn in_private_netns<T: Send + 'static>(
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        std::thread::spawn(move || {
            // SAFETY: unshare only affects this thread's namespaces and fs
            // attributes (mount namespaces come with their own).
            if unsafe { libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWNS) } != 0 {
                eprintln!(
                    "skipped: cannot make namespaces: {}",
                    std::io::Error::last_os_error()
                );
                return None;
            }
            let mount = |src: &str, dst: &str, fstype: &str, flags: libc::c_ulong| {
                let c = |s: &str| std::ffi::CString::new(s).unwrap();
                let (src, dst, fstype) = (c(src), c(dst), c(fstype));
                // SAFETY: all strings are NUL-terminated and outlive the call.
                unsafe {
                    libc::mount(
                        src.as_ptr(),
                        dst.as_ptr(),
                        fstype.as_ptr(),
                        flags,
                        std::ptr::null(),
                    )
                }
            };
            // Nothing mounted here may reach the host's namespace.
            if mount("none", "/", "", libc::MS_REC | libc::MS_PRIVATE) != 0
                || mount("sysfs", "/sys", "sysfs", 0) != 0
            {
                eprintln!(
                    "skipped: cannot mount a sysfs: {}",
                    std::io::Error::last_os_error()
                );
                return None;
            }
            Some(f())
        })
        .join()
        .unwrap()
    }

    pub fn ip(args: &[&str]) -> Result<String, String> {
        let out = Command::new("ip")
            .args(args)
            .output()
            .expect("cannot run ip (iproute2)");
        if out.status.success() {
            Ok(String::from_utf8(out.stdout).unwrap())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// A dummy interface, or a veth pair where the kernel lacks dummy.
    /// Returns the driver ethtool reports for it.
    pub fn add(name: &str) -> &'static str {
        if ip(&["link", "add", name, "type", "dummy"]).is_ok() {
            return "dummy";
        }
        ip(&[
            "link",
            "add",
            name,
            "type",
            "veth",
            "peer",
            "name",
            &format!("{name}p"),
        ])
        .unwrap();
        "veth"
    }

    pub fn device(name: &str) -> Rc<Device> {
        let sysfs = uevd_sysfs::Sysfs::new("/sys");
        Rc::new(
            sysfs
                .device_at(&Path::new("/sys/class/net").join(name))
                .unwrap(),
        )
    }

    pub fn mac(name: &str) -> String {
        std::fs::read_to_string(format!("/sys/class/net/{name}/address"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// The kernel's settings as the builtin uses them on the system.
    pub fn settings(links: &Links) -> Settings {
        Settings {
            kernel: None,
            ..links.settings()
        }
    }
}

#[test]
fn the_machine_id_is_read_once_it_exists() {
    netns::in_private_netns(|| {
        let links = Links::new();
        links.add("lib/99-default.link", DEFAULT_LINK);
        let b = NetSetupLink::new(netns::settings(&links));
        let id = links.path("machine-id");
        std::fs::remove_file(&id).unwrap();
        netns::add("dummy0");
        let before = netns::mac("dummy0");
        // No machine id yet: no persistent address, and nothing kept.
        let _ = call(&b, &netns::device("dummy0"), &Props::default(), false);
        assert_eq!(netns::mac("dummy0"), before);
        std::fs::write(&id, format!("{LAB_MACHINE_ID}\n")).unwrap();
        netns::add("dummy1");
        call(&b, &netns::device("dummy1"), &Props::default(), false).unwrap();
        assert_eq!(netns::mac("dummy1"), expected_mac(LAB_MACHINE_ID, "dummy1"));
        // Read once: like udevd's workers, not again for every interface.
        std::fs::write(&id, "fedcba9876543210fedcba9876543210\n").unwrap();
        netns::add("dummy2");
        call(&b, &netns::device("dummy2"), &Props::default(), false).unwrap();
        assert_eq!(netns::mac("dummy2"), expected_mac(LAB_MACHINE_ID, "dummy2"));
    });
}

#[test]
fn real_interfaces_get_udevd_s_properties_and_persistent_mac() {
    netns::in_private_netns(|| {
        let links = Links::new();
        links
            .add("lib/73-usb-net-by-mac.link", USB_BY_MAC_LINK)
            .add("lib/99-default.link", DEFAULT_LINK);
        let b = NetSetupLink::new(netns::settings(&links));
        let file = links.shown("lib/99-default.link");
        for name in ["dummy0", "dummy1", "dummy10", "dummy999"] {
            let driver = netns::add(name);
            let before = netns::mac(name);
            let dev = netns::device(name);
            // Test mode: the properties, and nothing changed.
            let out = call(&b, &dev, &Props::default(), true).unwrap();
            assert_eq!(
                out,
                [
                    format!("ID_NET_DRIVER={driver}"),
                    format!("ID_NET_LINK_FILE={file}"),
                    format!("ID_NET_NAME={name}"),
                ]
            );
            assert_eq!(netns::mac(name), before);
            // For real: the persistent address, which for these names is
            // what udevd gave the lab guest's dummies (same machine id).
            let out2 = call(&b, &netns::device(name), &Props::default(), false).unwrap();
            assert_eq!(out2, out);
            assert_eq!(
                netns::mac(name),
                expected_mac(LAB_MACHINE_ID, name),
                "{name}"
            );
            assert_eq!(
                std::fs::read_to_string(format!("/sys/class/net/{name}/addr_assign_type"))
                    .unwrap()
                    .trim(),
                "3"
            );
            // Now set by userspace: left alone.
            let again = call(&b, &netns::device(name), &Props::default(), false).unwrap();
            assert_eq!(again, out);
            assert_eq!(netns::mac(name), expected_mac(LAB_MACHINE_ID, name));
        }
        // With names from net_id, the most stable one is hashed instead
        // (udevadm 252 gives this interface the same address).
        netns::add("slot0");
        let names = env(&[("ID_NET_NAME_PATH", "enp0s5"), ("ID_NET_NAME_SLOT", "ens5")]);
        call(&b, &netns::device("slot0"), &names, false).unwrap();
        assert_eq!(netns::mac("slot0"), expected_mac(LAB_MACHINE_ID, "ens5"));
        assert_eq!(netns::mac("slot0"), "52:d1:a2:ad:24:b0");
        let lab =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab/out/netifs-n1000-udevd/net.txt");
        if let Ok(net) = std::fs::read_to_string(lab) {
            for name in ["dummy0", "dummy1", "dummy10", "dummy999"] {
                let line = net
                    .lines()
                    .find(|l| l.split(' ').next() == Some(name))
                    .unwrap();
                assert_eq!(
                    line.split(' ').nth(1),
                    Some(netns::mac(name).as_str()),
                    "{name}"
                );
            }
        }
    });
}

#[test]
fn real_interfaces_up_or_permanent_keep_their_address() {
    netns::in_private_netns(|| {
        let links = Links::new();
        links.add("lib/99-default.link", DEFAULT_LINK);
        let b = NetSetupLink::new(netns::settings(&links));
        netns::add("up0");
        netns::ip(&["link", "set", "up0", "up"]).unwrap();
        let before = netns::mac("up0");
        call(&b, &netns::device("up0"), &Props::default(), false).unwrap();
        assert_eq!(netns::mac("up0"), before);
        // MACAddressPolicy=random leaves a random address alone, and
        // MACAddressPolicy=none with MACAddress= sets that one.
        netns::add("rnd0");
        let before = netns::mac("rnd0");
        links.add(
            "lib/10-rnd.link",
            "[Match]\nOriginalName=rnd0\n[Link]\nMACAddressPolicy=random\n",
        );
        call(&b, &netns::device("rnd0"), &Props::default(), false).unwrap();
        assert_eq!(netns::mac("rnd0"), before);
        links.add(
            "lib/10-rnd.link",
            "[Match]\nOriginalName=rnd0\n[Link]\nMACAddressPolicy=none\nMACAddress=03:11:22:33:44:55\n",
        );
        call(&b, &netns::device("rnd0"), &Props::default(), false).unwrap();
        // The multicast bit is cleared, as systemd does.
        assert_eq!(netns::mac("rnd0"), "02:11:22:33:44:55");
    });
}

#[test]
fn real_interfaces_match_on_kind_driver_and_permanent_address_and_get_altnames() {
    netns::in_private_netns(|| {
        let links = Links::new();
        let b = NetSetupLink::new(netns::settings(&links));
        let driver = netns::add("kind0");
        let m = |key: &str| {
            only(&links, key);
            let out = call(&b, &netns::device("kind0"), &Props::default(), true).unwrap();
            get(&out, "ID_NET_LINK_FILE").is_some()
        };
        assert!(m(&format!("Kind={driver}")));
        assert!(!m("Kind=bridge"));
        assert!(m(&format!("Driver={driver}")));
        // Virtual interfaces have no permanent address: ethtool says zeros.
        assert!(m("PermanentMACAddress=00:00:00:00:00:00"));
        assert!(m(&format!("MACAddress={}", netns::mac("kind0"))));
        assert!(m("Type=ether"));

        // Alternative names: every candidate but the name it is about to
        // take (which the kernel would then refuse as taken).
        only(&links, "OriginalName=kind0\n[Link]\nNamePolicy=slot\nAlternativeNamesPolicy=slot path mac\nAlternativeName=kind-alt");
        let names = env(&[
            ("ID_NET_NAME_SLOT", "ens99"),
            ("ID_NET_NAME_PATH", "enp0s99"),
        ]);
        let out = call(&b, &netns::device("kind0"), &names, true).unwrap();
        assert_eq!(get(&out, "ID_NET_NAME").as_deref(), Some("ens99"));
        assert!(!netns::ip(&["link", "show", "kind0"])
            .unwrap()
            .contains("altname"));
        call(&b, &netns::device("kind0"), &names, false).unwrap();
        let shown = netns::ip(&["link", "show", "kind0"]).unwrap();
        assert!(shown.contains("altname enp0s99"), "{shown}");
        assert!(shown.contains("altname kind-alt"), "{shown}");
        assert!(!shown.contains("altname ens99"), "{shown}");
        // Names it already has are not asked for again.
        call(&b, &netns::device("kind0"), &names, false).unwrap();
        // The rename the rules then do succeeds.
        netns::ip(&["link", "set", "kind0", "name", "ens99"]).unwrap();
    });
}

/// The event's properties, and the database record from before it.
struct WithRecord {
    now: Props,
    stored: Props,
}

impl uevd_builtins::Env for WithRecord {
    fn property(&self, key: &[u8]) -> Option<&[u8]> {
        self.now.0.get(key).map(|v| v.as_slice())
    }
    fn stored_property(&self, key: &[u8]) -> Option<&[u8]> {
        self.stored.0.get(key).map(|v| v.as_slice())
    }
}

#[test]
fn link_files_set_and_import_udev_properties() {
    let t = tree();
    let links = Links::new();
    links.add(
        "lib/50-t.link",
        concat!(
            "[Match]\nOriginalName=*\n[Link]\nNamePolicy=path\n",
            "Property=ID_NET_MANAGED_BY=io.systemd.Network ID_NET_AUTO_LINK_LOCAL_ONLY=1\n",
            "Property=ID_KERNEL=%v \"ID_LITERAL=100%%\" ID_UNKNOWN=%Z\n",
            "ImportProperty=ID_KEPT ID_ABSENT\n",
        ),
    );
    let env = WithRecord {
        now: env(NAMES),
        stored: env(&[("ID_KEPT", "from-db"), ("ID_OTHER", "x")]),
    };
    let args = vec![b"net_setup_link".to_vec()];
    for action in [Action::Add, Action::Change] {
        let mut out = Properties::new();
        let event = t.sysfs().read_event(action, NIC.as_bytes()).unwrap();
        let dev = Rc::new(Device::from_event(&t.sysfs(), event));
        links
            .builtin()
            .run(
                &Call {
                    device: &dev,
                    args: &args,
                    env: &env,
                    test: true,
                },
                &mut out,
            )
            .unwrap();
        let out = lines(&out);
        assert_eq!(
            get(&out, "ID_NET_MANAGED_BY").as_deref(),
            Some("io.systemd.Network"),
            "{action:?}: {out:?}"
        );
        assert_eq!(
            get(&out, "ID_NET_AUTO_LINK_LOCAL_ONLY").as_deref(),
            Some("1")
        );
        assert_eq!(get(&out, "ID_KEPT").as_deref(), Some("from-db"));
        assert_eq!(get(&out, "ID_ABSENT"), None);
        assert_eq!(get(&out, "ID_OTHER"), None);
        // Specifiers, expanded from the running system when the file is read.
        assert_eq!(
            get(&out, "ID_KERNEL").as_deref(),
            Some(String::from_utf8_lossy(uevd_host::kernel_release()).as_ref())
        );
        assert_eq!(get(&out, "ID_LITERAL").as_deref(), Some("100%"));
        assert_eq!(get(&out, "ID_UNKNOWN"), None);
    }
}

/// `UnsetProperty=` (systemd 256) removes names from the event, after
/// `ImportProperty=` and `Property=`: a name both set and unset ends up
/// unset; the builtin's own properties come after and stay.
#[test]
fn link_files_unset_udev_properties() {
    let t = tree();
    let links = Links::new();
    links.add(
        "lib/50-t.link",
        concat!(
            "[Match]\nOriginalName=*\n[Link]\nNamePolicy=path\n",
            "Property=ID_SET=1 ID_BOTH=2\n",
            "UnsetProperty=ID_BOTH ID_FROM_RULES ID_NET_LINK_FILE\n",
        ),
    );
    let out = call(&links.builtin(), &t.device(NIC), &env(NAMES), true).unwrap();
    assert!(out.contains(&"ID_SET=1".to_string()), "{out:?}");
    // An unset shows as `KEY=`, as udevadm test-builtin prints it.
    assert!(out.contains(&"ID_BOTH=".to_string()), "{out:?}");
    assert!(out.contains(&"ID_FROM_RULES=".to_string()), "{out:?}");
    // The builtin's own come after the unsets, and stay.
    let last_file = out
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("ID_NET_LINK_FILE="));
    assert!(
        last_file.is_some_and(|f| f.ends_with("50-t.link")),
        "{out:?}"
    );
    assert_eq!(get(&out, "ID_NET_NAME").as_deref(), Some("enp0s5"));
}
