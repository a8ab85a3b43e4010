//! Fake sysfs trees laid out like the kernel's, for running builtins on
//! devices this machine does not have.
//!
//! Every link is relative, as in sysfs, so that a tree can also be mounted
//! over `/sys` and shown to the real udevadm (see `oracle.rs`).

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;
use uevd_builtins::{Call, Env, Failure, Properties};
use uevd_sysfs::{Device, Sysfs};

/// Subsystems that are buses (listed under /bus); the rest are classes.
const BUSES: &[&str] = &[
    "acpi",
    "ap",
    "bcma",
    "ccw",
    "ccwgroup",
    "hid",
    "iucv",
    "netdevsim",
    "pci",
    "platform",
    "pnp",
    "pseudo",
    "scm",
    "scsi",
    "serio",
    "spi",
    "usb",
    "vio",
    "virtio",
    "xen",
];

pub struct Tree {
    dir: tempfile::TempDir,
    /// Devices in the order they were made, for tests that try them all.
    pub devices: Vec<String>,
}

/// The path from directory `from` to `to`, both below the same root.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut rel = PathBuf::new();
    for _ in common..from.len() {
        rel.push(Component::ParentDir);
    }
    for c in &to[common..] {
        rel.push(c);
    }
    rel
}

impl Default for Tree {
    fn default() -> Self {
        Tree::new()
    }
}

impl Tree {
    pub fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        for d in ["devices", "bus", "class", "firmware"] {
            fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        Tree {
            dir,
            devices: Vec::new(),
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel.trim_start_matches('/'))
    }

    /// A symlink at `at` to `to`, both relative to the root.
    pub fn link(&mut self, at: &str, to: &str) -> &mut Self {
        let at = self.path(at);
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        let _ = fs::remove_file(&at);
        symlink(relative(at.parent().unwrap(), &self.path(to)), &at).unwrap();
        self
    }

    /// A directory that is a device without a subsystem (`pci0000:00`,
    /// `pseudo_0`, `ata1`).
    pub fn node(&mut self, devpath: &str) -> &mut Self {
        let dir = self.path(devpath);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("uevent"), "").unwrap();
        self
    }

    /// A device: its `uevent` file, its `subsystem` link and its entry in
    /// /bus/X/devices or /class/X.
    pub fn dev(&mut self, devpath: &str, subsystem: &str, uevent: &str) -> &mut Self {
        let dir = self.path(devpath);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("uevent"), uevent).unwrap();
        let name = devpath.rsplit('/').next().unwrap();
        if BUSES.contains(&subsystem) {
            fs::create_dir_all(self.path(&format!("bus/{subsystem}/devices"))).unwrap();
            self.link(&format!("{devpath}/subsystem"), &format!("bus/{subsystem}"));
            self.link(&format!("bus/{subsystem}/devices/{name}"), devpath);
        } else {
            fs::create_dir_all(self.path(&format!("class/{subsystem}"))).unwrap();
            self.link(
                &format!("{devpath}/subsystem"),
                &format!("class/{subsystem}"),
            );
            self.link(&format!("class/{subsystem}/{name}"), devpath);
        }
        self.devices.push(devpath.to_string());
        self
    }

    /// An attribute file (also below subdirectories: `capabilities/ev`).
    pub fn attr(&mut self, devpath: &str, name: &str, value: impl AsRef<[u8]>) -> &mut Self {
        let p = self.path(devpath).join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, value).unwrap();
        self
    }

    pub fn attrs(&mut self, devpath: &str, attrs: &[(&str, &str)]) -> &mut Self {
        for (k, v) in attrs {
            self.attr(devpath, k, format!("{v}\n"));
        }
        self
    }

    /// A `driver` link to /bus/BUS/drivers/NAME.
    pub fn driver(&mut self, devpath: &str, bus: &str, name: &str) -> &mut Self {
        let d = format!("bus/{bus}/drivers/{name}");
        fs::create_dir_all(self.path(&d)).unwrap();
        self.link(&format!("{devpath}/driver"), &d);
        self
    }

    pub fn sysfs(&self) -> Sysfs {
        Sysfs::new(self.root())
    }

    pub fn device(&self, devpath: &str) -> Rc<Device> {
        Rc::new(Device::from_devpath(&self.sysfs(), devpath.as_bytes()).unwrap())
    }
}

/// Properties of the event so far.
#[derive(Default)]
pub struct Props(pub HashMap<Vec<u8>, Vec<u8>>);

impl Env for Props {
    fn property(&self, key: &[u8]) -> Option<&[u8]> {
        self.0.get(key).map(|v| v.as_slice())
    }
}

/// Runs a builtin on a device with an empty environment.
pub fn run(builtin: &str, dev: &Rc<Device>) -> Result<Properties, Failure> {
    run_env(builtin, dev, &Props::default())
}

pub fn run_env(builtin: &str, dev: &Rc<Device>, env: &Props) -> Result<Properties, Failure> {
    let b = uevd_builtins::find(builtin.as_bytes()).expect("builtin exists");
    let args = vec![builtin.as_bytes().to_vec()];
    let call = Call {
        device: dev,
        args: &args,
        env,
        test: true,
    };
    let mut out = Properties::new();
    b.run(&call, &mut out).map(|()| out)
}

/// Properties as `KEY=VALUE` lines, the way udev's database and `udevadm
/// test-builtin` show them.
pub fn lines(props: &Properties) -> Vec<String> {
    uevd_text::lines(props)
}

/// The properties a builtin sets, as lines; panics on failure.
pub fn props(builtin: &str, tree: &Tree, devpath: &str) -> Vec<String> {
    match run(builtin, &tree.device(devpath)) {
        Ok(p) => lines(&p),
        Err(e) => panic!("{builtin} on {devpath}: {e}"),
    }
}

/// The builtin's failure; panics if it succeeded.
pub fn failure(builtin: &str, tree: &Tree, devpath: &str) -> Failure {
    match run(builtin, &tree.device(devpath)) {
        Ok(p) => panic!("{builtin} on {devpath} succeeded: {:?}", lines(&p)),
        Err(e) => e,
    }
}

/// A PCI config space header: vendor, device, and the header type byte
/// whose top bit marks a multi-function device.
pub fn pci_config(multifunction: bool) -> Vec<u8> {
    let mut c = vec![0u8; 256];
    c[0..4].copy_from_slice(&[0x86, 0x80, 0x0e, 0x10]);
    c[14] = if multifunction { 0x80 } else { 0 };
    c
}

/// A PCI function below `parent` (a `pciDDDD:BB` node or a bridge).
pub fn pci(tree: &mut Tree, parent: &str, name: &str, class: &str, multifunction: bool) -> String {
    let devpath = format!("{parent}/{name}");
    let modalias = format!(
        "pci:v00008086d0000100Esv00001AF4sd00001100bc{}sc{}i00",
        &class[0..2],
        &class[2..4]
    );
    tree.dev(
        &devpath,
        "pci",
        &format!("PCI_CLASS={class}00\nPCI_SLOT_NAME={name}\nMODALIAS={modalias}\n"),
    )
    .attr(&devpath, "config", pci_config(multifunction))
    .attrs(&devpath, &[("modalias", &modalias), ("vendor", "0x8086")]);
    devpath
}

/// A network interface below a device.
pub fn netdev(tree: &mut Tree, parent: &str, name: &str, ifindex: u32, mac: &str) -> String {
    let devpath = format!("{parent}/net/{name}");
    tree.dev(
        &devpath,
        "net",
        &format!("INTERFACE={name}\nIFINDEX={ifindex}\n"),
    )
    .attrs(
        &devpath,
        &[
            ("address", mac),
            ("addr_assign_type", "0"),
            ("iflink", &ifindex.to_string()),
            ("ifindex", &ifindex.to_string()),
            ("type", "1"),
            ("dev_port", "0"),
            ("dev_id", "0x0"),
        ],
    );
    devpath
}

/// A USB device descriptor set: the device descriptor, one configuration,
/// and an interface descriptor (plus a class and an endpoint descriptor)
/// for each (class, subclass, protocol).
pub fn usb_descriptors(interfaces: &[(u8, u8, u8)]) -> Vec<u8> {
    let mut d = vec![
        18, 1, 0x00, 0x02, 0, 0, 0, 64, 0x27, 0x06, 0x01, 0x00, 0, 0, 1, 2, 3, 1,
    ];
    d.extend_from_slice(&[9, 2, 34, 0, interfaces.len() as u8, 1, 0, 0xa0, 50]);
    for (i, &(class, sub, proto)) in interfaces.iter().enumerate() {
        d.extend_from_slice(&[9, 4, i as u8, 0, 1, class, sub, proto, 0]);
        d.extend_from_slice(&[9, 0x21, 0x11, 0x01, 0, 1, 0x22, 63, 0]);
        d.extend_from_slice(&[7, 5, 0x81, 3, 8, 0, 7]);
    }
    d
}

/// A USB device (`1-1`) with the attributes the kernel gives it.
#[allow(clippy::too_many_arguments)]
pub fn usb_device(
    tree: &mut Tree,
    devpath: &str,
    ids: (&str, &str),
    manufacturer: Option<&str>,
    product: Option<&str>,
    serial: Option<&str>,
    interfaces: &[(u8, u8, u8)],
) {
    tree.dev(
        devpath,
        "usb",
        &format!(
            "DEVTYPE=usb_device\nDRIVER=usb\nPRODUCT={}/{}/0\nTYPE=0/0/0\nBUSNUM=001\nDEVNUM=002\nDEVNAME=bus/usb/001/002\nMAJOR=189\nMINOR=1\n",
            ids.0, ids.1
        ),
    )
    .attrs(devpath, &[("idVendor", ids.0), ("idProduct", ids.1), ("bcdDevice", "0000")])
    .attr(devpath, "descriptors", usb_descriptors(interfaces));
    for (k, v) in [
        ("manufacturer", manufacturer),
        ("product", product),
        ("serial", serial),
    ] {
        if let Some(v) = v {
            tree.attr(devpath, k, format!("{v}\n"));
        }
    }
}

/// A USB interface (`1-1:1.0`) of class/subclass/protocol, bound to a driver.
pub fn usb_interface(tree: &mut Tree, devpath: &str, class: (u8, u8, u8), driver: Option<&str>) {
    tree.dev(devpath, "usb", "DEVTYPE=usb_interface\n").attrs(
        devpath,
        &[
            ("bInterfaceClass", &format!("{:02x}", class.0)),
            ("bInterfaceSubClass", &format!("{:02x}", class.1)),
            ("bInterfaceProtocol", &format!("{:02x}", class.2)),
            ("bInterfaceNumber", "00"),
            ("bAlternateSetting", " 0"),
        ],
    );
    if let Some(d) = driver {
        tree.driver(devpath, "usb", d);
    }
}

/// An input device with capability bitmaps as the kernel prints them.
pub fn input(tree: &mut Tree, devpath: &str, bustype: &str, caps: &[(&str, &str)]) {
    tree.dev(devpath, "input", "PRODUCT=3/627/1/110\nNAME=\"test\"\n")
        .attrs(
            devpath,
            &[
                ("id/bustype", bustype),
                ("id/vendor", "0627"),
                ("id/product", "0001"),
                ("id/version", "0110"),
            ],
        );
    let mut have = vec![];
    for (k, v) in caps {
        let name = if *k == "properties" {
            k.to_string()
        } else {
            format!("capabilities/{k}")
        };
        tree.attr(devpath, &name, format!("{v}\n"));
        have.push(name);
    }
    for k in ["ev", "abs", "rel", "key", "msc", "led", "snd", "ff", "sw"] {
        let name = format!("capabilities/{k}");
        if !have.contains(&name) {
            tree.attr(devpath, &name, "0\n");
        }
    }
    if !have.iter().any(|h| h == "properties") {
        tree.attr(devpath, "properties", "0\n");
    }
}

pub mod guest;
pub mod inputs;
pub mod net;
pub mod storage;
pub mod usb;
