//! `btrfs ready DEVNODE`: argument checks, a missing or unusable control
//! device, and the kernel's answer for real multi-device filesystems on
//! loop devices (when this machine has btrfs, loop devices and
//! mkfs.btrfs; skipped otherwise).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use uevd_builtins::btrfs::Btrfs;
use uevd_builtins::{Builtin, Call, Failure, Properties};
use uevd_sysfs::Device;

fn disk() -> (Tree, Rc<Device>) {
    let mut t = Tree::new();
    let dev = "/devices/virtual/block/loop0";
    t.dev(
        dev,
        "block",
        "MAJOR=7\nMINOR=0\nDEVNAME=loop0\nDEVTYPE=disk\n",
    );
    let d = t.device(dev);
    (t, d)
}

fn ready(b: &dyn Builtin, dev: &Rc<Device>, args: &[&str]) -> Result<Vec<String>, Failure> {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    let mut out = Properties::new();
    b.run(
        &Call {
            device: dev,
            args: &args,
            env: &Props::default(),
            test: true,
        },
        &mut out,
    )
    .map(|()| lines(&out))
}

#[test]
fn arguments_are_checked() {
    let (_t, dev) = disk();
    let b = Btrfs::with_control("/nonexistent/btrfs-control");
    for args in [
        &["btrfs"][..],
        &["btrfs", "ready"],
        &["btrfs", "scan", "/dev/loop0"],
        &["btrfs", "ready", "/dev/loop0", "x"],
    ] {
        assert!(
            matches!(ready(&b, &dev, args), Err(Failure::Error(_))),
            "{args:?}"
        );
    }
}

#[test]
fn without_the_btrfs_module_nothing_is_ready() {
    let (_t, dev) = disk();
    let b = Btrfs::with_control("/nonexistent/btrfs-control");
    assert_eq!(
        ready(&b, &dev, &["btrfs", "ready", "/dev/loop0"]).unwrap(),
        ["ID_BTRFS_READY=0"]
    );
}

#[test]
fn a_control_device_that_cannot_be_used_fails() {
    let (_t, dev) = disk();
    let dir = tempfile::tempdir().unwrap();
    // A directory cannot be opened for writing.
    let b = Btrfs::with_control(dir.path());
    assert!(matches!(
        ready(&b, &dev, &["btrfs", "ready", "/dev/loop0"]),
        Err(Failure::NotApplicable(_))
    ));
    // A file does not know the ioctl.
    let file = dir.path().join("btrfs-control");
    std::fs::write(&file, "").unwrap();
    let b = Btrfs::with_control(&file);
    assert!(matches!(
        ready(&b, &dev, &["btrfs", "ready", "/dev/loop0"]),
        Err(Failure::NotApplicable(_))
    ));
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn sh(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Loop devices attached for a test, detached (and forgotten by btrfs)
/// when it ends.
struct Loops(Vec<String>);

impl Loops {
    fn attach(&mut self, image: &Path) -> Result<String, String> {
        let dev = sh("losetup", &["-f", "--show", image.to_str().unwrap()])?;
        self.0.push(dev.clone());
        Ok(dev)
    }
}

impl Drop for Loops {
    fn drop(&mut self) {
        for dev in &self.0 {
            let _ = sh("btrfs", &["device", "scan", "--forget", dev]);
            let _ = sh("losetup", &["-d", dev]);
        }
    }
}

fn image(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::File::create(&p)
        .unwrap()
        .set_len(128 << 20)
        .unwrap();
    p
}

#[test]
fn the_kernel_says_when_every_device_is_there() {
    let control = Path::new("/dev/btrfs-control");
    let usable = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(control)
        .is_ok();
    if !usable
        || !have("mkfs.btrfs")
        || !have("losetup")
        || !Path::new("/dev/loop-control").exists()
    {
        println!("skipped: needs /dev/btrfs-control, loop devices, losetup and mkfs.btrfs");
        return;
    }
    let (_t, dev) = disk();
    let b = uevd_builtins::find(b"btrfs").unwrap();
    // Something that is no block device: the kernel refuses the question.
    assert!(matches!(
        ready(b, &dev, &["btrfs", "ready", "/dev/null"]),
        Err(Failure::NotApplicable(_))
    ));

    let dir = tempfile::tempdir().unwrap();
    let one = image(dir.path(), "one.img");
    let (a, c) = (image(dir.path(), "a.img"), image(dir.path(), "c.img"));
    let mkfs = |imgs: &[&Path]| {
        let mut args = vec!["-q", "-f", "-d", "single", "-m", "single"];
        args.extend(imgs.iter().map(|p| p.to_str().unwrap()));
        sh("mkfs.btrfs", &args)
    };
    if let Err(e) = mkfs(&[&one]).and_then(|_| mkfs(&[&a, &c])) {
        println!("skipped: mkfs.btrfs failed: {e}");
        return;
    }
    let mut loops = Loops(Vec::new());
    let Ok(single) = loops.attach(&one) else {
        println!("skipped: no free loop device");
        return;
    };
    assert_eq!(
        ready(b, &dev, &["btrfs", "ready", &single]).unwrap(),
        ["ID_BTRFS_READY=1"]
    );
    // Half of a two-device filesystem is not ready; with the other half
    // it is, whichever device asks.
    let first = loops.attach(&a).unwrap();
    assert_eq!(
        ready(b, &dev, &["btrfs", "ready", &first]).unwrap(),
        ["ID_BTRFS_READY=0"]
    );
    let second = loops.attach(&c).unwrap();
    assert_eq!(
        ready(b, &dev, &["btrfs", "ready", &second]).unwrap(),
        ["ID_BTRFS_READY=1"]
    );
    assert_eq!(
        ready(b, &dev, &["btrfs", "ready", &first]).unwrap(),
        ["ID_BTRFS_READY=1"]
    );
}
