//! The udevadm commands of systemd 252–260 as uevd runs them, on scratch
//! trees: a sysfs made of plain files and directories, a /dev and a /run
//! of their own. Commands that write (trigger) write into the scratch
//! `uevent` files, where the test reads what was asked for.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn uevd() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_uevd"))
}

const PCI: &str = "/devices/pci0000:00/0000:00:02.0";
const VDA: &str = "/devices/pci0000:00/0000:00:02.0/block/vda";
const VDA1: &str = "/devices/pci0000:00/0000:00:02.0/block/vda/vda1";
const LO: &str = "/devices/virtual/net/lo";

/// A PCI device with a disk and its partition below it, a network
/// interface; the disk and the interface in the database, the disk
/// tagged; nodes for the disk and the partition.
struct Scratch {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let s = Scratch { _tmp: tmp, root };
        s.device("/devices/pci0000:00", None, "");
        s.device(PCI, Some(("bus", "pci")), "PCI_ID=1AF4:1042\n");
        s.device(
            VDA,
            Some(("class", "block")),
            "MAJOR=254\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n",
        );
        s.device(
            VDA1,
            Some(("class", "block")),
            "MAJOR=254\nMINOR=1\nDEVNAME=vda1\nDEVTYPE=partition\n",
        );
        s.device(LO, Some(("class", "net")), "INTERFACE=lo\nIFINDEX=1\n");
        std::fs::write(s.sys(LO).join("address"), "00:00:00:00:00:00\n").unwrap();
        std::fs::write(s.sys(VDA).join("size"), "2048\n").unwrap();
        let link = |target: &str, at: &str| {
            let at = s.root.join("sys").join(at);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(s.sys(target), at).unwrap();
        };
        link(VDA, "class/block/vda");
        link(VDA1, "class/block/vda1");
        link(LO, "class/net/lo");
        link(VDA, "dev/block/254:0");
        link(VDA1, "dev/block/254:1");
        let data = s.root.join("run/udev/data");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(
            data.join("b254:0"),
            "S:disk/by-id/virtio-a\nI:99\nE:ID_FS_TYPE=ext4\nG:systemd\nQ:systemd\nV:1\n",
        )
        .unwrap();
        std::fs::write(data.join("n1"), "I:5\nE:ID_NET_NAME=lo\nV:1\n").unwrap();
        let dev = s.root.join("dev");
        std::fs::create_dir_all(dev.join("disk/by-id")).unwrap();
        for (name, minor) in [("vda", 0), ("vda1", 1)] {
            let st = Command::new("mknod")
                .arg(dev.join(name))
                .args(["b", "254", &minor.to_string()])
                .status()
                .unwrap();
            assert!(st.success(), "making nodes needs root");
        }
        std::os::unix::fs::symlink("../../vda", dev.join("disk/by-id/virtio-a")).unwrap();
        std::fs::create_dir_all(s.root.join("rules")).unwrap();
        s
    }

    fn sys(&self, devpath: &str) -> PathBuf {
        self.root.join("sys").join(&devpath[1..])
    }

    fn device(&self, devpath: &str, subsystem: Option<(&str, &str)>, uevent: &str) {
        let dir = self.sys(devpath);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("uevent"), uevent).unwrap();
        if let Some((kind, name)) = subsystem {
            let sub = self.root.join("sys").join(kind).join(name);
            std::fs::create_dir_all(&sub).unwrap();
            std::os::unix::fs::symlink(&sub, dir.join("subsystem")).unwrap();
        }
    }

    fn path(&self, d: &str) -> String {
        self.root.join(d).display().to_string()
    }

    /// `uevd [roots] ARGS`.
    fn uevd(&self, args: &[&str]) -> Output {
        self.uevd_with(None, args)
    }

    /// `uevd [roots] ARGS` with `$SYSTEMD_PROC_CMDLINE` set to `cmdline`,
    /// or unset.
    fn uevd_with(&self, cmdline: Option<&str>, args: &[&str]) -> Output {
        let mut c = Command::new(uevd());
        match cmdline {
            Some(l) => c.env("SYSTEMD_PROC_CMDLINE", l),
            None => c.env_remove("SYSTEMD_PROC_CMDLINE"),
        };
        c.args(["--sys", &self.path("sys"), "--dev", &self.path("dev")])
            .args([
                "--run",
                &self.path("run"),
                "--rules-dir",
                &self.path("rules"),
            ])
            .args(args)
            .output()
            .unwrap()
    }

    /// The devpaths a dry-run trigger lists, in its order.
    fn chosen(&self, args: &[&str]) -> Vec<String> {
        self.chosen_with(None, args)
    }

    /// [`Scratch::chosen`] with a kernel command line.
    fn chosen_with(&self, cmdline: Option<&str>, args: &[&str]) -> Vec<String> {
        let out = self.uevd_with(cmdline, &[&["trigger", "--dry-run"], args].concat());
        assert!(out.status.success(), "{args:?}: {out:?}");
        let sys = self.path("sys");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.strip_prefix(&sys).unwrap_or(l).to_string())
            .collect()
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn trigger_matches_as_systemd_260_does() {
    let s = Scratch::new();
    assert_eq!(s.chosen(&[]), [PCI, VDA, VDA1, LO]);
    assert_eq!(s.chosen(&["--property-match=ID_FS_TYPE=ext*"]), [VDA]);
    // Several property matches: any one.
    assert_eq!(
        s.chosen(&["-p", "ID_FS_TYPE=xfs", "-p", "INTERFACE=lo"]),
        [LO]
    );
    assert_eq!(s.chosen(&["--tag-match=systemd"]), [VDA]);
    assert_eq!(
        s.chosen(&["-g", "systemd", "-g", "other"]),
        Vec::<String>::new()
    );
    assert_eq!(s.chosen(&["--initialized-match"]), [VDA, LO]);
    assert_eq!(s.chosen(&["--initialized-nomatch"]), [PCI, VDA1]);
    assert_eq!(s.chosen(&["--sysname-match=vda*"]), [VDA, VDA1]);
    assert_eq!(s.chosen(&["--subsystem-nomatch=block"]), [PCI, LO]);
    assert_eq!(s.chosen(&["--attr-nomatch=size"]), [PCI, VDA1, LO]);
    assert_eq!(s.chosen(&["--attr-match=address=00:*"]), [LO]);
    // A device named, by node, link, /sys path or class path: it and
    // what is below it.
    assert_eq!(s.chosen(&["/dev/vda"]), [VDA, VDA1]);
    assert_eq!(
        s.chosen(&["--name-match=/dev/disk/by-id/virtio-a"]),
        [VDA, VDA1]
    );
    assert_eq!(s.chosen(&["--name-match=vda1"]), [VDA1]);
    assert_eq!(s.chosen(&["/sys/class/net/lo"]), [LO]);
    assert_eq!(
        s.chosen(&["--parent-match", &format!("/sys{PCI}")]),
        [PCI, VDA, VDA1]
    );
    assert_eq!(
        s.chosen(&[
            "-b",
            &format!("/sys{PCI}"),
            "-s",
            "block",
            "--include-parents"
        ]),
        ["/devices/pci0000:00", PCI, VDA, VDA1]
    );
    assert_eq!(
        s.chosen(&["--prioritized-subsystem=net,block"]),
        [LO, PCI, VDA, VDA1]
    );
    let out = s.uevd(&["trigger", "-n", "/dev/nothing"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "Unknown device \"/dev/nothing\": No such device (looked at {}/nothing)",
            s.path("dev")
        )),
        "{err}"
    );
}

#[test]
fn trigger_sends_the_root_device_and_its_parents_first() {
    let s = Scratch::new();
    let listed = |cmdline: Option<&str>, args: &[&str]| s.chosen_with(cmdline, args);
    let net_first = ["--prioritized-subsystem=net", "--action=add"];
    assert_eq!(listed(None, &net_first), [LO, PCI, VDA, VDA1]);
    // root= names vda1: it and its parents before everything else.
    for root in [
        "root=/dev/vda1",
        "root=254:1",
        "quiet root=/dev/disk/by-partuuid/x root=vda1",
    ] {
        assert_eq!(
            listed(Some(root), &net_first),
            [PCI, VDA, VDA1, LO],
            "{root}"
        );
    }
    // Only a probe can tell: every disk and partition.
    assert_eq!(
        listed(Some("root=UUID=0a1b"), &net_first),
        [PCI, VDA, VDA1, LO]
    );
    // A root that is no device here, no root, or not an add: as walked.
    for cmdline in ["root=/dev/sdz", "root=tmpfs", "quiet"] {
        assert_eq!(listed(Some(cmdline), &net_first), [LO, PCI, VDA, VDA1]);
    }
    assert_eq!(
        listed(Some("root=/dev/vda1"), &["--prioritized-subsystem=net"]),
        [LO, PCI, VDA, VDA1]
    );
}

#[test]
fn trigger_uuid_gives_each_event_its_own() {
    let s = Scratch::new();
    let out = s.uevd(&["trigger", "--action=add", "--uuid", "-y", "vda*"]);
    assert!(out.status.success(), "{out:?}");
    let uuids: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(uuids.len(), 2);
    assert_ne!(uuids[0], uuids[1]);
    for (devpath, uuid) in [VDA, VDA1].iter().zip(&uuids) {
        let written = std::fs::read_to_string(s.sys(devpath).join("uevent")).unwrap();
        assert!(written.starts_with(&format!("add {uuid}")), "{written}");
    }
}

#[test]
fn trigger_wait_daemon_names_the_socket_it_tried() {
    let s = Scratch::new();
    let out = s.uevd(&["trigger", "--wait-daemon=0.2", "-n"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "no daemon answered on {}/uevd/control",
            s.path("run")
        )),
        "{err}"
    );
}

#[test]
fn info_prints_json_and_filters_the_database_export() {
    let s = Scratch::new();
    let out = s.uevd(&["info", "--json=short", "/dev/disk/by-id/virtio-a"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("{\"SYSNAME\":\"vda\",\"DEVICE_ID\":\"b254:0\",\"DEVPATH\":\""),
        "{text}"
    );
    assert!(
        text.contains("\"DEVLINKS\":\"/dev/disk/by-id/virtio-a\""),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1);
    let out = s.uevd(&[
        "info",
        "--export-db",
        "--json=short",
        "--subsystem-match=block",
        "--initialized-nomatch",
    ]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("\"SYSNAME\":\"vda1\",\"SYSNUM\":\"1\""),
        "{text}"
    );
    let out = s.uevd(&["info", "-e", "--parent-match=/sys/class/block/vda"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let paths: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("P: ")).collect();
    assert_eq!(paths, [VDA, VDA1]);
}

#[test]
fn cat_prints_the_rules_in_effect_in_udevs_order() {
    let s = Scratch::new();
    let etc = s.root.join("img/etc/udev/rules.d");
    let lib = s.root.join("img/usr/lib/udev/rules.d");
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("50-a.rules"), "# from lib\nKERNEL==\"a\"\n").unwrap();
    std::fs::write(lib.join("60-b.rules"), "KERNEL==\"b\"\n").unwrap();
    std::fs::write(etc.join("50-a.rules"), "# local\n\nKERNEL==\"local\"\n").unwrap();
    std::os::unix::fs::symlink("/dev/null", etc.join("60-b.rules")).unwrap();
    std::fs::write(lib.join("70-c.rules"), "KERNEL==\"c\"\n").unwrap();
    std::fs::create_dir_all(s.root.join("img/etc/udev/udev.conf.d")).unwrap();
    std::fs::write(s.root.join("img/etc/udev/udev.conf"), "udev_log=info\n").unwrap();
    std::fs::write(
        s.root.join("img/etc/udev/udev.conf.d/10-x.conf"),
        "# tuned\nchildren_max=4\n",
    )
    .unwrap();
    let img = s.path("img");
    let cat = |args: &[&str]| {
        let out = Command::new(uevd()).arg("cat").args(args).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let root = format!("--root={img}");
    assert_eq!(
        cat(&[&root]),
        format!(
            "# {img}/etc/udev/rules.d/50-a.rules\n# local\n\nKERNEL==\"local\"\n\n\
             # {img}/usr/lib/udev/rules.d/70-c.rules\nKERNEL==\"c\"\n"
        )
    );
    assert_eq!(
        cat(&[&root, "--tldr", "70-c.rules", "50-a.rules"]),
        format!(
            "# {img}/usr/lib/udev/rules.d/70-c.rules\nKERNEL==\"c\"\n\n\
             # {img}/etc/udev/rules.d/50-a.rules\nKERNEL==\"local\"\n"
        )
    );
    assert_eq!(
        cat(&[&root, "--config", "--tldr"]),
        format!(
            "# {img}/etc/udev/udev.conf\nudev_log=info\n\n\
             # {img}/etc/udev/udev.conf.d/10-x.conf\nchildren_max=4\n"
        )
    );
    let out = Command::new(uevd())
        .args(["cat", &root, "99-none.rules"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("99-none.rules: no such rules file in"));
}

impl Scratch {
    fn spawn(&self, args: &[&str]) -> std::process::Child {
        Command::new(uevd())
            .args(["--sys", &self.path("sys"), "--dev", &self.path("dev")])
            .args(["--run", &self.path("run")])
            .args(args)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }
}

/// Waits for a child for at most `secs`; its exit status.
fn finish(mut child: std::process::Child, secs: u64) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("still waiting after {secs}s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn wait_returns_once_the_device_is_initialized_or_removed() {
    let s = Scratch::new();
    // Already in the database: at once, through the link too.
    let out = s.uevd(&[
        "wait",
        "--timeout=5",
        "/dev/disk/by-id/virtio-a",
        "/sys/class/net/lo",
    ]);
    assert!(out.status.success(), "{out:?}");
    // vda1 has no record yet.
    let out = s.uevd(&["wait", "--timeout=0.2", "/dev/vda1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("timed out waiting for devices to be initialized: /dev/vda1"),
        "{out:?}"
    );
    let out = s.uevd(&["wait", "--timeout=0.2", "--initialized=no", "/dev/vda1"]);
    assert!(out.status.success(), "{out:?}");
    let out = s.uevd(&["settle", "--device=/dev/vda1", "--timeout=0.2"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // The record appears while it waits; --settle with no daemon running
    // has no queue to wait for.
    let waiting = s.spawn(&["wait", "--timeout=10", "--settle", "/dev/vda1"]);
    let settling = s.spawn(&["settle", "--device=/sys/class/block/vda1", "--timeout=10"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::write(s.root.join("run/udev/data/b254:1"), "I:7\nV:1\n").unwrap();
    assert!(finish(waiting, 5).success());
    assert!(finish(settling, 5).success());
    // Removed: the interface goes while it waits.
    let removing = s.spawn(&["wait", "--removed", "--timeout=10", "/sys/class/net/lo"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::remove_dir_all(s.sys(LO)).unwrap();
    assert!(finish(removing, 5).success());
}

/// Whole disks of this machine (and its loop devices) as (major, minor):
/// a scratch node can be opened only with a driver behind it.
fn host_disks() -> Vec<(u32, u32)> {
    let Ok(rd) = std::fs::read_dir("/sys/class/block") else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| !e.path().join("partition").exists())
        .filter_map(|e| {
            let dev = std::fs::read_to_string(e.path().join("dev")).ok()?;
            let (ma, mi) = dev.trim().split_once(':')?;
            Some((ma.parse().ok()?, mi.parse().ok()?))
        })
        .collect()
}

#[test]
fn lock_holds_the_whole_disk_while_the_command_runs() {
    let s = Scratch::new();
    // A partition and a link both stand for the whole disk, once.
    let out = s.uevd(&[
        "lock",
        "--print",
        "-d",
        "/dev/vda1",
        "--device=/dev/disk/by-id/virtio-a",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{}/vda\n", s.path("dev"))
    );
    let out = s.uevd(&["lock", "--print", "-d", &s.path("sys")]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("not a block device"), "{out:?}");
    // A node this sandbox lets us open, for one of the machine's disks.
    let node = s.root.join("dev/hostdisk");
    let found = host_disks().into_iter().find(|&(major, minor)| {
        let _ = std::fs::remove_file(&node);
        let made = Command::new("mknod")
            .arg(&node)
            .args(["b", &major.to_string(), &minor.to_string()])
            .status()
            .is_ok_and(|st| st.success());
        made && std::fs::File::open(&node).is_ok()
    });
    let Some((major, minor)) = found else {
        eprintln!("skipped locking: no block device can be opened here");
        return;
    };
    let devpath = "/devices/virtual/block/hostdisk";
    s.device(
        devpath,
        Some(("class", "block")),
        &format!("MAJOR={major}\nMINOR={minor}\nDEVNAME=hostdisk\nDEVTYPE=disk\n"),
    );
    let link = s.root.join(format!("sys/dev/block/{major}:{minor}"));
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(s.sys(devpath), &link).unwrap();
    let node = node.display().to_string();
    let marker = s.root.join("holding");
    let holder = s.spawn(&[
        "lock",
        "-d",
        &node,
        "--",
        "sh",
        "-c",
        &format!("touch {}; sleep 1", marker.display()),
    ]);
    let started = std::time::Instant::now();
    while !marker.exists() {
        assert!(started.elapsed().as_secs() < 5, "the command never ran");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = s.uevd(&["lock", "--timeout=0", "-d", &node, "true"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr(&out).contains("locked by someone else"), "{out:?}");
    assert!(finish(holder, 5).success());
    // Released: the command runs and its exit status is ours.
    let out = s.uevd(&["lock", "--timeout=0", "-d", &node, "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

#[test]
fn control_without_a_daemon_names_the_socket_it_tried() {
    let s = Scratch::new();
    let out = s.uevd(&["control", "--ping"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "no daemon is listening on {}/uevd/control",
            s.path("run")
        )),
        "{err}"
    );
    // Someone other than root is turned away by the socket's directory.
    let dir = s.root.join("run/uevd");
    std::fs::create_dir_all(&dir).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(dir.join("control")).unwrap();
    let mut perms = std::fs::metadata(&s.root).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&s.root, perms).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(uevd())
        .args(["--run", &s.path("run"), "control", "--ping"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "not allowed to talk to the daemon on {}/uevd/control",
            s.path("run")
        )),
        "{err}"
    );
}

#[test]
fn control_holds_the_queue_back_and_gives_events_properties() {
    use uevd_lab::{veth_pairs, Lab};
    let lab = Lab::new().unwrap();
    std::fs::write(
        lab.rules_dir().join("50-global.rules"),
        "SUBSYSTEM==\"net\", ENV{UEVD_GLOBAL}==\"on air\", ENV{SAW_GLOBAL}=\"1\"\n",
    )
    .unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    let control = |args: &[&str]| {
        let out = lab.uevd(uevd(), &[&["control"], args].concat()).unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    control(&[
        "--stop-exec-queue",
        "--property=UEVD_GLOBAL=on air",
        "-t",
        "5",
    ]);
    lab.ip_batch(&veth_pairs("cq", 1)).unwrap();
    // Held back: settle times out.
    let out = lab.uevd(uevd(), &["settle", "--timeout=0.5"]).unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    control(&["--start-exec-queue", "--children-max=1"]);
    lab.settle(uevd()).unwrap();
    let ifindex = lab
        .interfaces()
        .unwrap()
        .into_iter()
        .find(|(_, n)| n == "cqa0")
        .map(|(i, _)| i)
        .expect("cqa0");
    let record = std::fs::read_to_string(lab.run().join(format!("udev/data/n{ifindex}"))).unwrap();
    assert!(record.contains("E:SAW_GLOBAL=1"), "{record}");
    daemon.stop(&lab).unwrap();
}
