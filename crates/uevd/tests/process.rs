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
