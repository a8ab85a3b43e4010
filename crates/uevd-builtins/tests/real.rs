//! The builtins on this machine's real devices: the host's /sys, and
//! interfaces made in a private network namespace. Each test says so and
//! passes when the machine lacks what it needs.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use uevd_sysfs::{Device, Sysfs};

fn host() -> Sysfs {
    Sysfs::new("/sys")
}

fn device_at(sysfs: &Sysfs, path: &Path) -> Option<Rc<Device>> {
    sysfs.device_at(path).map(Rc::new)
}

fn entries(dir: &str) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn get(props: &[String], key: &str) -> Option<String> {
    props
        .iter()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
}

#[test]
fn host_pci_devices_are_named_by_their_address() {
    let sysfs = host();
    let devices = entries("/sys/bus/pci/devices");
    if devices.is_empty() {
        println!("skipped: no PCI devices in /sys");
        return;
    }
    for path in devices {
        let dev = device_at(&sysfs, &path).expect("PCI device readable");
        let name = String::from_utf8_lossy(dev.sysname()).into_owned();
        let p = lines(&run("path_id", &dev).expect("PCI devices have a path"));
        let id_path = get(&p, "ID_PATH").unwrap();
        // Bridges above are folded into the nearest PCI device; a platform
        // host bridge (on SoCs) may come before it.
        assert!(id_path.ends_with(&format!("pci-{name}")), "{id_path}");
        let tag = get(&p, "ID_PATH_TAG").unwrap();
        assert!(tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert!(tag.ends_with(&format!("pci-{}", name.replace([':', '.'], "_"))));
    }
}

#[test]
fn host_network_interfaces_get_mac_and_path_names() {
    let sysfs = host();
    let mut checked = 0;
    for path in entries("/sys/class/net") {
        let Some(dev) = device_at(&sysfs, &path) else {
            continue;
        };
        let attr = |n: &str| {
            std::fs::read_to_string(path.join(n))
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        let p = lines(&run("net_id", &dev).expect("net_id runs on interfaces"));
        let stacked = attr("iflink") != attr("ifindex");
        if stacked || attr("type") != "1" {
            continue;
        }
        assert_eq!(
            p.first().map(String::as_str),
            Some("ID_NET_NAMING_SCHEME=v252")
        );
        let mac = attr("address").replace(':', "");
        let want_mac =
            (attr("addr_assign_type") == "0" && mac.len() == 12).then(|| format!("enx{mac}"));
        assert_eq!(get(&p, "ID_NET_NAME_MAC"), want_mac, "{}", path.display());
        let on_pci = dev.ancestors().any(|d| d.subsystem() == Some(&b"pci"[..]));
        if on_pci {
            let path_name = get(&p, "ID_NET_NAME_PATH").unwrap_or_default();
            assert!(
                path_name.starts_with("enp") || path_name.starts_with("enP"),
                "{p:?}"
            );
        }
        checked += 1;
    }
    if checked == 0 {
        println!("skipped: no Ethernet interface in /sys/class/net");
    }
}

#[test]
fn host_block_devices_on_virtio_have_their_pci_path() {
    let sysfs = host();
    let mut checked = 0;
    for path in entries("/sys/class/block") {
        let Some(dev) = device_at(&sysfs, &path) else {
            continue;
        };
        let chain: Vec<_> = dev.ancestors().collect();
        let virtio = chain
            .iter()
            .position(|d| d.subsystem() == Some(&b"virtio"[..]));
        let Some(i) = virtio else { continue };
        let Some(pci) = chain
            .get(i + 1)
            .filter(|d| d.subsystem() == Some(&b"pci"[..]))
        else {
            continue;
        };
        if chain[..i]
            .iter()
            .any(|d| d.subsystem() == Some(&b"scsi"[..]))
        {
            continue;
        }
        let p = lines(&run("path_id", &dev).unwrap());
        let want = format!("pci-{}", String::from_utf8_lossy(pci.sysname()));
        assert!(get(&p, "ID_PATH").unwrap().ends_with(&want), "{p:?}");
        checked += 1;
    }
    if checked == 0 {
        println!("skipped: no virtio block device");
    }
}

#[test]
fn host_input_devices_are_classified() {
    let sysfs = host();
    let mut checked = 0;
    for path in entries("/sys/class/input") {
        let Some(dev) = device_at(&sysfs, &path) else {
            continue;
        };
        let p = lines(&run("input_id", &dev).unwrap());
        assert_eq!(
            p.first().map(String::as_str),
            Some("ID_INPUT=1"),
            "{}",
            path.display()
        );
        checked += 1;
    }
    if checked == 0 {
        println!("skipped: no input devices in /sys/class/input");
    }
}

#[test]
fn host_usb_devices_are_identified() {
    let sysfs = host();
    let mut checked = 0;
    for path in entries("/sys/bus/usb/devices") {
        let Some(dev) = device_at(&sysfs, &path) else {
            continue;
        };
        if dev.devtype() != Some(&b"usb_device"[..]) {
            continue;
        }
        let p = lines(&run("usb_id", &dev).unwrap());
        let id = std::fs::read_to_string(path.join("idVendor")).unwrap();
        assert_eq!(get(&p, "ID_USB_VENDOR_ID").unwrap(), id.trim());
        checked += 1;
    }
    if checked == 0 {
        println!("skipped: no USB devices");
    }
}

/// Interfaces that only exist in a namespace made for the test: a veth
/// pair is stacked (its link is its peer) and gets nothing, a TAP device
/// has a random address and no bus, so it gets only the scheme, loopback
/// is not Ethernet. Runs the child below in `unshare --net --mount`, with
/// a sysfs mounted from inside the namespace.
#[test]
fn interfaces_in_a_private_network_namespace() {
    if std::env::var_os("UEVD_NETNS_SYSFS").is_some() {
        return;
    }
    let have = |cmd: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {cmd}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !have("unshare") || !have("ip") {
        println!("skipped: needs unshare and ip");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let script = r#"
        ip link add uevd-v0 type veth peer name uevd-v1 || { echo "skip: no veth"; exit 0; }
        ip tuntap add uevd-t0 mode tap 2>/dev/null
        ip link add uevd-b0 type bridge 2>/dev/null
        ip link add uevd-x0 type vxlan id 42 dstport 4789 dev uevd-v0 2>/dev/null
        ip link set uevd-v0 up 2>/dev/null
        mount -t sysfs sysfs "$1" || { echo "skip: cannot mount sysfs"; exit 0; }
        exec "$2" --exact netns_child --nocapture --test-threads=1
    "#;
    let out = Command::new("unshare")
        .args(["--net", "--mount", "sh", "-c", script, "sh"])
        .arg(dir.path())
        .arg(&exe)
        .env("UEVD_NETNS_SYSFS", dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && stderr.contains("unshare failed") {
        println!("skipped: cannot make namespaces here ({})", stderr.trim());
        return;
    }
    if let Some(why) = stdout.lines().find(|l| l.starts_with("skip: ")) {
        println!("skipped: {}", &why[6..]);
        return;
    }
    assert!(
        out.status.success() && stdout.contains("netns: checked"),
        "{stdout}{stderr}"
    );
}

#[test]
fn netns_child() {
    let Some(root) = std::env::var_os("UEVD_NETNS_SYSFS") else {
        return;
    };
    let sysfs = Sysfs::new(PathBuf::from(root));
    let dev = |name: &str| device_at(&sysfs, &sysfs.root().join("class/net").join(name));
    let net_id = |name: &str| lines(&run("net_id", &dev(name).unwrap()).unwrap());
    assert!(net_id("uevd-v0").is_empty());
    assert!(net_id("uevd-v1").is_empty());
    assert!(net_id("lo").is_empty());
    if dev("uevd-t0").is_some() {
        assert_eq!(net_id("uevd-t0"), ["ID_NET_NAMING_SCHEME=v252"]);
    }
    // Virtual devices have no path.
    assert!(run("path_id", &dev("uevd-v0").unwrap()).is_err());
    link_attributes_are_the_files();
    println!("netns: checked");
}

/// Every device of this machine through both these builtins and udevadm,
/// when a udevadm of systemd 252 is at hand (UDEVADM, or on PATH).
#[test]
fn host_devices_agree_with_udevadm() {
    let udevadm = std::env::var("UDEVADM").unwrap_or_else(|_| "udevadm".into());
    let version = Command::new(&udevadm).arg("--version").output();
    let Ok(version) = version else {
        println!("skipped: no udevadm");
        return;
    };
    if String::from_utf8_lossy(&version.stdout).trim() != "252" {
        println!("skipped: udevadm is not systemd 252");
        return;
    }
    let mut devpaths = Vec::new();
    uevd_sysfs::walk_devices(&host(), |v| devpaths.push(v.devpath.to_vec())).unwrap();
    let mut script = String::new();
    for dp in &devpaths {
        let dp = String::from_utf8_lossy(dp);
        for b in ["path_id", "input_id", "usb_id", "net_id"] {
            script.push_str(&format!(
                "echo '== {b} {dp}'; SYSTEMD_LOG_LEVEL=emerg '{udevadm}' test-builtin {b} '/sys{dp}' 2>/dev/null; echo rc=$?\n"
            ));
        }
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), script).unwrap();
    let out = Command::new("sh").arg(file.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut blocks = text.split("== ").skip(1);
    let mut bad = Vec::new();
    for dp in &devpaths {
        let dev = Rc::new(Device::from_devpath(&host(), dp).unwrap());
        for b in ["path_id", "input_id", "usb_id", "net_id"] {
            let block = blocks.next().unwrap();
            let mut lines_ = block
                .lines()
                .skip(1)
                .map(str::to_string)
                .collect::<Vec<_>>();
            let rc = lines_.pop().unwrap();
            // hwdb lookups (net_id's ID_OUI_FROM_DATABASE) are hwdb's.
            lines_.retain(|l| !l.contains("_FROM_DATABASE="));
            let theirs = (rc == "rc=0").then_some(lines_);
            let ours = run(b, &dev).ok().map(|p| lines(&p));
            if ours != theirs {
                bad.push(format!(
                    "{b} {}: uevd {ours:?} udevadm {theirs:?}",
                    String::from_utf8_lossy(dp)
                ));
            }
        }
    }
    println!("compared {} devices with udevadm", devpaths.len());
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Every interface of the namespace: what the link message answers for an
/// attribute is what its sysfs file says. The namespace's sysfs is the one
/// rtnetlink speaks of, so the kernel is asked.
fn link_attributes_are_the_files() {
    let root = PathBuf::from(std::env::var_os("UEVD_NETNS_SYSFS").unwrap());
    let files = Sysfs::new(&root);
    let asked = Sysfs::new(&root).with_link_query(uevd_link_config::kernel::link_message);
    let mut seen = Vec::new();
    for path in entries(&root.join("class/net").to_string_lossy()) {
        let (Some(a), Some(f)) = (device_at(&asked, &path), device_at(&files, &path)) else {
            continue;
        };
        let message = a
            .link_message()
            .expect("an interface")
            .expect("the kernel answers");
        assert!(!message.is_empty());
        for name in ["type", "iflink", "address", "phys_port_name", "mtu"] {
            assert_eq!(
                a.sysattr(name.as_bytes()),
                f.sysattr(name.as_bytes()),
                "{} {name}",
                path.display()
            );
        }
        seen.push(String::from_utf8_lossy(a.sysname()).into_owned());
    }
    // Loopback, a veth pair (each the other's link), and what this kernel
    // could make of a tap, a bridge and a vxlan over uevd-v0.
    for name in ["lo", "uevd-v0", "uevd-v1"] {
        assert!(seen.iter().any(|s| s == name), "{seen:?}");
    }
    println!("link attributes of {seen:?} agree with their files");
}
