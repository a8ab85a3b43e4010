//! `uevd process` runs events through the daemon's pipeline on scratch
//! trees: nodes, links with priorities and handover, database and RUN, as
//! udev's test-udev does. Making nodes needs root, as the project's tests
//! have.

use std::path::{Path, PathBuf};
use std::process::Command;

fn uevd() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_uevd"))
}

fn fake_block(sys: &Path, name: &str, minor: u32) {
    let dir = sys.join("devices/virtual/block").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("uevent"),
        format!("MAJOR=7\nMINOR={minor}\nDEVNAME={name}\nDEVTYPE=disk\n"),
    )
    .unwrap();
    std::fs::create_dir_all(sys.join("class/block")).unwrap();
    std::os::unix::fs::symlink("../../../../class/block", dir.join("subsystem")).unwrap();
}

struct Scratch {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Scratch {
    fn new(rules: &str) -> Scratch {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        for d in ["sys", "dev", "run", "rules"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let rules = rules.replace("{RAN}", &root.join("ran").display().to_string());
        std::fs::write(root.join("rules/50-test.rules"), rules).unwrap();
        fake_block(&root.join("sys"), "loop7", 7);
        fake_block(&root.join("sys"), "loop8", 8);
        Scratch { _tmp: tmp, root }
    }

    fn process(&self, action: &str, devices: &[&str]) -> std::process::Output {
        let r = |d: &str| self.root.join(d).display().to_string();
        Command::new(uevd())
            .args(["--sys", &r("sys"), "--dev", &r("dev"), "--run", &r("run")])
            .args(["--rules-dir", &r("rules"), "process", "--action", action])
            .args(devices)
            .output()
            .unwrap()
    }

    fn link(&self, name: &str) -> Option<PathBuf> {
        std::fs::read_link(self.root.join("dev").join(name)).ok()
    }
}

#[test]
fn events_make_nodes_links_and_records_and_hand_links_over() {
    assert!(
        rustix::process::geteuid().is_root(),
        "making nodes needs root"
    );
    let s = Scratch::new(concat!(
        "KERNEL==\"loop7\", SYMLINK+=\"disk/by-label/boot\", OPTIONS+=\"link_priority=10\"\n",
        "KERNEL==\"loop8\", SYMLINK+=\"disk/by-label/boot\"\n",
        "KERNEL==\"loop*\", ENV{ID_SEEN}=\"%k\", RUN+=\"/bin/sh -c 'echo $env{ACTION} %k >> {RAN}'\"\n",
    ));
    let out = s.process(
        "add",
        &[
            "/devices/virtual/block/loop8",
            "/devices/virtual/block/loop7",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    assert!(s.root.join("dev/loop7").exists() && s.root.join("dev/loop8").exists());
    assert_eq!(s.link("disk/by-label/boot"), Some("../../loop7".into()));
    let record = std::fs::read_to_string(s.root.join("run/udev/data/b7:8")).unwrap();
    assert!(record.contains("E:ID_SEEN=loop8\n"), "{record}");
    // A second invocation knows the claims the first left on disk.
    let out = s.process("remove", &["/devices/virtual/block/loop7"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(s.link("disk/by-label/boot"), Some("../../loop8".into()));
    assert!(!s.root.join("run/udev/data/b7:7").exists());
    assert!(!s.root.join("dev/loop7").exists());
    let ran = std::fs::read_to_string(s.root.join("ran")).unwrap();
    assert_eq!(ran, "add loop8\nadd loop7\nremove loop7\n");
}

#[test]
fn a_device_that_does_not_exist_is_an_error() {
    let s = Scratch::new("");
    let out = s.process("add", &["/devices/virtual/block/nothing"]);
    assert!(!out.status.success());
}

#[test]
fn builtin_runs_on_several_devices_in_one_process() {
    let s = Scratch::new("");
    let r = |d: &str| s.root.join(d).display().to_string();
    let out = Command::new(uevd())
        .args(["--sys", &r("sys"), "--dev", &r("dev"), "--run", &r("run")])
        .args(["builtin", "path_id"])
        .args([
            "/devices/virtual/block/loop7",
            "/devices/virtual/block/loop8",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // path_id finds no path for a virtual device: it fails on each, and
    // says so once per device, each under its own header.
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        [
            "# /devices/virtual/block/loop7",
            "# /devices/virtual/block/loop8"
        ],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1));
    let one = Command::new(uevd())
        .args(["--sys", &r("sys"), "--dev", &r("dev"), "--run", &r("run")])
        .args(["builtin", "path_id", "/devices/virtual/block/loop7"])
        .output()
        .unwrap();
    assert!(one.stdout.is_empty(), "no header for a single device");
}

/// An Ethernet function at 0000:00:19.0 with an ACPI index, and its
/// interface eth0.
fn fake_onboard_nic(sys: &Path) -> &'static str {
    let write = |rel: &str, text: &str| {
        let path = sys.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let link = |rel: &str, to: &str| std::os::unix::fs::symlink(to, sys.join(rel)).unwrap();
    let pci = "devices/pci0000:00/0000:00:19.0";
    write("devices/pci0000:00/uevent", "");
    write(
        &format!("{pci}/uevent"),
        "PCI_CLASS=20000\nPCI_SLOT_NAME=0000:00:19.0\n",
    );
    write(&format!("{pci}/acpi_index"), "1\n");
    write(&format!("{pci}/label"), "Onboard LAN\n");
    std::fs::create_dir_all(sys.join("bus/pci/devices")).unwrap();
    link(&format!("{pci}/subsystem"), "../../../bus/pci");
    let eth = format!("{pci}/net/eth0");
    write(&format!("{eth}/uevent"), "INTERFACE=eth0\nIFINDEX=2\n");
    let attrs = [
        ("ifindex", "2"),
        ("iflink", "2"),
        ("type", "1"),
        ("dev_port", "0"),
        ("dev_id", "0x0"),
        ("address", "3c:97:0e:aa:bb:cc"),
        ("addr_assign_type", "0"),
    ];
    for (k, v) in attrs {
        write(&format!("{eth}/{k}"), &format!("{v}\n"));
    }
    std::fs::create_dir_all(sys.join("class/net")).unwrap();
    link(&format!("{eth}/subsystem"), "../../../../../class/net");
    "/devices/pci0000:00/0000:00:19.0/net/eth0"
}

/// `uevd builtin` gives a builtin the database as the daemon does: net_id
/// (systemd 256) reads ID_NET_NAME_ALLOW_* from the PCI function's record,
/// and --no-db reads no record at all.
#[test]
fn builtin_reads_other_devices_records() {
    let s = Scratch::new("");
    let r = |d: &str| s.root.join(d).display().to_string();
    let nic = fake_onboard_nic(&s.root.join("sys"));
    let net_id = |extra: &[&str]| {
        let out = Command::new(uevd())
            .args(["--sys", &r("sys"), "--dev", &r("dev"), "--run", &r("run")])
            .args(["builtin", "net_id", nic])
            .args(extra)
            .env("NET_NAMING_SCHEME", "v252")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let onboard = "ID_NET_NAME_ONBOARD=eno1\n";
    assert!(net_id(&[]).contains(onboard), "{}", net_id(&[]));
    let data = s.root.join("run/udev/data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        data.join("+pci:0000:00:19.0"),
        "E:ID_NET_NAME_ALLOW_ACPI_INDEX=0\n",
    )
    .unwrap();
    let denied = net_id(&[]);
    assert!(!denied.contains("ID_NET_NAME_ONBOARD"), "{denied}");
    assert!(denied.contains("ID_NET_NAME_PATH=enp0s25\n"), "{denied}");
    assert!(net_id(&["--no-db"]).contains(onboard));
}

/// `udevadm verify` (uevd run under that name) checks the rules below
/// `--root`, reports style issues and fails on them unless `--no-style`.
#[test]
fn udevadm_verify_reads_rules_below_root() {
    let tmp = tempfile::tempdir().unwrap();
    let udevadm = tmp.path().join("udevadm");
    std::os::unix::fs::symlink(uevd(), &udevadm).unwrap();
    let root = tmp.path().join("image");
    let dir = root.join("etc/udev/rules.d");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("10-a.rules"), "KERNEL==\"a\",ENV{X}=\"1\"\n").unwrap();
    let run = |args: &[&str]| Command::new(&udevadm).args(args).output().unwrap();
    let root_arg = format!("--root={}", root.display());
    let out = run(&["verify", &root_arg]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("10-a.rules:1:13: style: whitespace after comma is expected"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 files, 1 rules: 0 errors"));
    let out = run(&[
        "verify",
        "-N",
        "never",
        &root_arg,
        "--no-style",
        "--no-summary",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
}
