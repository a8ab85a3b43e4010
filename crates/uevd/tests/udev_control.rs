//! udev 252's own `udevadm control` and `udevadm settle`, and uevd started
//! as `systemd-udevd`, on the real kernel: what package scripts and
//! initramfs-tools run, talking to uevd through `/run/udev/control`.
//!
//! udevadm only knows the fixed path /run/udev/control, so it runs in a
//! mount namespace of its own where the lab's scratch run directory is
//! bind-mounted on /run. udevadm comes from `scripts/libudev-clients`;
//! without it a test says so and passes, unless UEVD_REQUIRE_CLIENTS is set.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use uevd_lab::{veth_pairs, Lab};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn uevd() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_uevd"))
}

/// udev 252's udevadm: installed, or unpacked by scripts/libudev-clients.
fn udevadm_252() -> Option<PathBuf> {
    let unpacked = std::env::var_os("UEVD_UDEV252")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/udev252/root"));
    let found = [
        PathBuf::from("/usr/bin/udevadm"),
        PathBuf::from("/bin/udevadm"),
        unpacked.join("bin/udevadm"),
        unpacked.join("usr/bin/udevadm"),
    ]
    .into_iter()
    .find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"252"))
    });
    if found.is_none() {
        let msg = "udevadm 252 not found: run scripts/libudev-clients";
        if std::env::var_os("UEVD_REQUIRE_CLIENTS").is_some() {
            panic!("{msg}");
        }
        eprintln!("skipped: {msg}");
    }
    found
}

fn quoted(args: &[&str]) -> String {
    args.iter()
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs a shell script inside the lab, in a mount namespace of its own
/// where the lab's run directory is /run.
fn in_lab_run(lab: &Lab, script: &str) -> Output {
    let script = format!(
        "mount --bind '{}' /run && {script}",
        lab.root().join("run").display()
    );
    lab.command("unshare")
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(script)
        .output()
        .unwrap()
}

/// Runs udev 252's udevadm inside the lab, with a deadline: a udevadm that
/// waits for an answer that never comes must fail the test, not hang it.
fn udevadm(lab: &Lab, udevadm: &Path, args: &[&str]) -> Output {
    in_lab_run(
        lab,
        &format!("exec timeout 20 '{}' {}", udevadm.display(), quoted(args)),
    )
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn rules_count(lab: &Lab) -> String {
    lab.status(uevd())
        .unwrap()
        .into_iter()
        .find(|(k, _)| k == "rules")
        .map(|(_, v)| v)
        .unwrap_or_default()
}

fn wait_gone(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while path.exists() {
        assert!(Instant::now() < deadline, "{} stayed", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn udevadm_252_pings_reloads_and_sets_the_log_level() {
    let _s = serial();
    let Some(adm) = udevadm_252() else { return };
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &["--log-level", "info"]).unwrap();
    ok(
        udevadm(&lab, &adm, &["control", "--ping"]),
        "control --ping",
    );
    assert_eq!(rules_count(&lab), "0");
    std::fs::write(
        lab.rules_dir().join("50-reload.rules"),
        "SUBSYSTEM==\"net\", ENV{RELOADED}=\"1\"\n",
    )
    .unwrap();
    // The reload is done when udevadm returns: a package script triggers
    // right after it.
    ok(
        udevadm(&lab, &adm, &["control", "--reload"]),
        "control --reload",
    );
    assert_eq!(rules_count(&lab), "1");
    ok(
        udevadm(&lab, &adm, &["control", "--log-level=debug"]),
        "control --log-level=debug",
    );
    ok(
        udevadm(&lab, &adm, &["control", "--ping"]),
        "control --ping",
    );
    // Several requests in one call, tuning included.
    ok(
        udevadm(
            &lab,
            &adm,
            &[
                "control",
                "--children-max=2",
                "--property=FOO=bar",
                "--reload",
            ],
        ),
        "control with several requests",
    );
    let log = daemon.stop(&lab).unwrap();
    // Only logged at debug level: the level took effect.
    assert!(log.contains("udev control: ping"), "{log}");
    assert!(log.contains("children max 2"), "{log}");
    assert!(log.contains("property FOO=bar for every event"), "{log}");
}

#[test]
fn udevadm_252_stops_and_starts_the_exec_queue_and_settles() {
    let _s = serial();
    let Some(adm) = udevadm_252() else { return };
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    ok(
        udevadm(&lab, &adm, &["control", "--stop-exec-queue"]),
        "control --stop-exec-queue",
    );
    lab.ip_batch(&veth_pairs("q", 2)).unwrap();
    // Held back: a settle cannot finish.
    let out = lab.uevd(uevd(), &["settle", "--timeout", "1"]).unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(lab.db_ids().iter().all(|i| !i.starts_with('n')));
    ok(
        udevadm(&lab, &adm, &["control", "--start-exec-queue"]),
        "control --start-exec-queue",
    );
    // udev 252's settle pings the daemon through the socket first.
    ok(udevadm(&lab, &adm, &["settle", "--timeout=30"]), "settle");
    lab.settle(uevd()).unwrap();
    let nets = lab.db_ids().iter().filter(|i| i.starts_with('n')).count();
    assert_eq!(nets, 4, "{:?}", lab.db_ids());
    daemon.stop(&lab).unwrap();
}

#[test]
fn udevadm_252_exit_stops_uevd() {
    let _s = serial();
    let Some(adm) = udevadm_252() else { return };
    let lab = Lab::new().unwrap();
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    assert!(lab.run().join("udev/control").exists());
    ok(
        udevadm(&lab, &adm, &["control", "--exit"]),
        "control --exit",
    );
    wait_gone(&lab.run().join("uevd/control"));
    wait_gone(&lab.run().join("udev/control"));
    let log = daemon.kill();
    assert!(log.contains("exiting"), "{log}");
    // With no daemon, udevadm's ping fails and its settle has nothing to
    // wait for.
    assert!(!udevadm(&lab, &adm, &["control", "--ping"]).status.success());
    ok(udevadm(&lab, &adm, &["settle", "--timeout=5"]), "settle");
}

#[test]
fn started_as_systemd_udevd_the_way_initramfs_tools_does() {
    let _s = serial();
    let Some(adm) = udevadm_252() else { return };
    let lab = Lab::new().unwrap();
    let link = lab.root().join("systemd-udevd");
    std::os::unix::fs::symlink(uevd(), lab.outside(&link)).unwrap();
    let out = lab.command(&link).arg("--version").output().unwrap();
    assert_eq!(ok(out, "systemd-udevd --version"), "252\n");
    let out = lab.command(&link).arg("--bogus").output().unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "systemd-udevd: unrecognized option '--bogus'"
    );
    // The machine's rules stay out of the lab: empty rules directories
    // hide them, and /dev is the lab's scratch one.
    let script = format!(
        "mount --bind '{dev}' /dev && \
         for d in /etc/udev /usr/lib/udev /usr/local/lib/udev; do \
           [ -d $d ] && mount -t tmpfs tmpfs $d; done; \
         timeout 20 '{link}' --daemon --resolve-names=never || exit 1; \
         timeout 20 '{adm}' control --ping || exit 2; \
         timeout 20 '{adm}' control --exit || exit 3; \
         for i in $(seq 200); do [ -e /run/udev/control ] || exit 0; sleep 0.05; done; exit 4",
        dev = lab.root().join("dev").display(),
        link = link.display(),
        adm = adm.display(),
    );
    ok(
        in_lab_run(&lab, &script),
        "systemd-udevd --daemon, then udevadm",
    );
    assert!(!lab.run().join("uevd/control").exists());
}

/// What initramfs-tools does at the switch to the real root: `udevadm
/// control --exit` with events still queued (held back here by a stopped
/// exec queue, so that none can start). They are saved, not processed,
/// and the next daemon processes each exactly once.
#[test]
fn udevadm_252_exit_with_queued_events_hands_them_to_the_next_daemon() {
    let _s = serial();
    let Some(adm) = udevadm_252() else { return };
    let lab = Lab::new().unwrap();
    let journal =
        || uevd_timeline::read::Journal::load(&lab.run().join("uevd/timeline.jsonl")).unwrap();
    let net_adds = |j: &uevd_timeline::read::Journal| {
        let mut adds: Vec<String> = j
            .events
            .iter()
            .filter(|e| e.subsystem == "net" && e.action == "add")
            .map(|e| format!("{} {}", e.devpath, e.source))
            .collect();
        adds.sort();
        adds
    };
    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    ok(
        udevadm(&lab, &adm, &["control", "--stop-exec-queue"]),
        "control --stop-exec-queue",
    );
    lab.ip_batch(&veth_pairs("h", 10)).unwrap();
    // Queued, not started.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let st = lab.status(uevd()).unwrap();
        let pending = st.iter().find(|(k, _)| k == "pending").unwrap();
        if pending.1.parse::<u32>().unwrap() >= 20 {
            break;
        }
        assert!(Instant::now() < deadline, "{st:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    ok(
        udevadm(&lab, &adm, &["control", "--exit"]),
        "control --exit",
    );
    // udevadm 252 does not wait for an exit to be done (udevd may hang
    // up first); `uevd control --exit` does.
    wait_gone(&lab.run().join("uevd/control"));
    let log = daemon.stop(&lab).unwrap();
    assert!(lab.run().join("uevd/saved-events").exists(), "{log}");
    assert_eq!(net_adds(&journal()), Vec::<String>::new(), "{log}");

    let daemon = lab.start_uevd(uevd(), &[]).unwrap();
    lab.settle(uevd()).unwrap();
    let log = daemon.stop(&lab).unwrap();
    let mut want: Vec<String> = (0..10)
        .flat_map(|i| [format!("ha{i}"), format!("hb{i}")])
        .map(|n| format!("/devices/virtual/net/{n} restored"))
        .collect();
    want.sort();
    assert_eq!(net_adds(&journal()), want, "{log}");
    assert!(!lab.run().join("uevd/saved-events").exists());
    let nets = lab.db_ids().iter().filter(|i| i.starts_with('n')).count();
    assert_eq!(nets, 20, "{:?}", lab.db_ids());
}

/// Opens, in a child between fork and exec, the two sockets systemd's
/// systemd-udevd-kernel.socket and systemd-udevd-control.socket hold, and
/// puts them at descriptors 3 and 4 as socket activation passes them.
/// Returns -1 on the first failing call (the spawn then fails).
fn open_passed_sockets(control: &std::ffi::CStr) -> i32 {
    // SAFETY: plain system calls on descriptors this child owns; nothing
    // allocates.
    unsafe {
        let nl = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM,
            libc::NETLINK_KOBJECT_UEVENT,
        );
        if nl < 0 {
            return -1;
        }
        let mut sa: libc::sockaddr_nl = std::mem::zeroed();
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = 1;
        let len = std::mem::size_of::<libc::sockaddr_nl>() as u32;
        if libc::bind(nl, &sa as *const _ as *const libc::sockaddr, len) < 0 {
            return -1;
        }
        let one: libc::c_int = 1;
        libc::setsockopt(
            nl,
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            &one as *const _ as *const libc::c_void,
            4,
        );
        if nl != 3 && (libc::dup2(nl, 3) < 0 || libc::close(nl) < 0) {
            return -1;
        }
        let ctl = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0);
        if ctl < 0 {
            return -1;
        }
        let mut su: libc::sockaddr_un = std::mem::zeroed();
        su.sun_family = libc::AF_UNIX as u16;
        let path = control.to_bytes();
        if path.len() >= su.sun_path.len() {
            return -1;
        }
        for (d, s) in su.sun_path.iter_mut().zip(path) {
            *d = *s as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as u32;
        if libc::bind(ctl, &su as *const _ as *const libc::sockaddr, len) < 0
            || libc::listen(ctl, 16) < 0
        {
            return -1;
        }
        if ctl != 4 && (libc::dup2(ctl, 4) < 0 || libc::close(ctl) < 0) {
            return -1;
        }
        0
    }
}

/// Kernel uevent sockets (NETLINK_KOBJECT_UEVENT bound to the kernel's
/// group) in the lab's network namespace, from /proc/net/netlink.
fn kernel_uevent_sockets(lab: &Lab) -> usize {
    kernel_uevent_socket_inodes(lab).len()
}

fn kernel_uevent_socket_inodes(lab: &Lab) -> Vec<u64> {
    let table = lab.sh("cat /proc/net/netlink").unwrap();
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let kernel_group = f.len() > 3 && f[1] == "15" && f[3] == "00000001";
            kernel_group.then(|| f.last()?.parse().ok()).flatten()
        })
        .collect()
}

/// How many of the kernel uevent sockets process `pid` holds have no
/// socket filter: the ones that hear every device event. (The daemon's
/// own socket for module announcements has one, which lets nothing but
/// `add@/module/` through.) Each descriptor is borrowed with
/// pidfd_getfd and asked for its filter's length.
fn unfiltered_uevent_sockets(lab: &Lab, pid: u32) -> usize {
    let uevent = kernel_uevent_socket_inodes(lab);
    // SAFETY: plain system calls on descriptors this function owns.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    assert!(
        pidfd >= 0,
        "pidfd_open: {}",
        std::io::Error::last_os_error()
    );
    let mut unfiltered = 0;
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        let target = target.to_string_lossy().into_owned();
        let inode = target
            .strip_prefix("socket:[")
            .and_then(|t| t.strip_suffix(']'))
            .and_then(|t| t.parse::<u64>().ok());
        if !inode.is_some_and(|i| uevent.contains(&i)) {
            continue;
        }
        let number: i32 = entry.file_name().to_string_lossy().parse().unwrap();
        // SAFETY: as above; `len` is written by the kernel.
        unsafe {
            let fd = libc::syscall(libc::SYS_pidfd_getfd, pidfd, number, 0) as i32;
            assert!(fd >= 0, "pidfd_getfd: {}", std::io::Error::last_os_error());
            let mut len: libc::socklen_t = 0;
            // SO_GET_FILTER: the attach option's number, read back.
            let r = libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                std::ptr::null_mut(),
                &mut len,
            );
            libc::close(fd);
            if r == 0 && len == 0 {
                unfiltered += 1;
            }
        }
    }
    // SAFETY: closing a descriptor this function opened.
    unsafe { libc::close(pidfd) };
    unfiltered
}

/// Under systemd, uevd's unit names udev's two sockets in `Sockets=`:
/// systemd opens them early (the kernel one with a 128 MiB buffer, which
/// keeps events while the daemon starts or restarts) and passes them
/// (`LISTEN_PID`, `LISTEN_FDS`, descriptors 3 and 4). uevd must take them
/// over: no kernel socket of its own, udevadm answered on the passed
/// control socket, events received through the passed one, and the
/// control socket's path left to the service manager when uevd exits.
#[test]
fn takes_over_the_sockets_systemd_passes() {
    use std::os::unix::process::CommandExt;
    let _s = serial();
    let Some(adm) = udevadm_252() else { return };
    let lab = Lab::new().unwrap();
    assert_eq!(kernel_uevent_sockets(&lab), 0);
    let udev_dir = lab.run().join("udev");
    std::fs::create_dir_all(&udev_dir).unwrap();
    let control_inside = lab.root().join("run/udev/control");
    let control = std::ffi::CString::new(control_inside.as_os_str().as_encoded_bytes()).unwrap();
    let log = lab.root().join("uevd-activated.log");
    let mut cmd = lab.command("sh");
    cmd.arg("-c")
        .arg("LISTEN_PID=$$ LISTEN_FDS=2 LISTEN_FDNAMES=kernel:control exec \"$0\" \"$@\"")
        .arg(uevd())
        .args(lab.uevd_roots())
        .args(["daemon", "--log-level", "info"])
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(lab.outside(&log)).unwrap())
        .stderr(std::fs::File::create(lab.outside(&log)).unwrap());
    // SAFETY: open_passed_sockets only makes system calls.
    unsafe {
        cmd.pre_exec(move || match open_passed_sockets(&control) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        });
    }
    let mut child = cmd.spawn().unwrap();
    let own_control = lab.run().join("uevd/control");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !own_control.exists() {
        assert!(
            Instant::now() < deadline,
            "uevd did not start: {}",
            std::fs::read_to_string(lab.outside(&log)).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let log_text = || std::fs::read_to_string(lab.outside(&log)).unwrap_or_default();
    // One kernel socket in the namespace hears device events: the passed
    // one, which uevd holds. (Besides it, uevd may hold a socket of its
    // own that a filter keeps to module announcements.)
    assert_eq!(
        unfiltered_uevent_sockets(&lab, child.id()),
        1,
        "{}",
        log_text()
    );
    assert!(kernel_uevent_sockets(&lab) <= 2, "{}", log_text());
    ok(
        udevadm(&lab, &adm, &["control", "--ping"]),
        "control --ping on the passed socket",
    );
    // Events come in through the passed kernel socket.
    lab.ip_batch(&veth_pairs("act", 1)).unwrap();
    lab.settle(uevd()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while lab.db_ids().iter().filter(|i| i.starts_with('n')).count() < 2 {
        assert!(
            Instant::now() < deadline,
            "no events processed: {:?} {}",
            lab.db_ids(),
            log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    ok(
        lab.uevd(uevd(), &["control", "--exit"]).unwrap(),
        "control --exit",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "uevd did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
    let text = log_text();
    assert!(text.contains("passed by the service manager"), "{text}");
    // The service manager still holds /run/udev/control for the next daemon.
    assert!(lab.run().join("udev/control").exists(), "{text}");
}
