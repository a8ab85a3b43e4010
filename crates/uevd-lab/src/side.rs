//! uevd and systemd-udevd side by side on the real kernel, in turn, each
//! in the same kind of scratch namespace with udev's stock rules.
//!
//! Each manager runs in the lab's network namespace and in a mount
//! namespace of its own whose /dev and /run are the lab's scratch tmpfs,
//! with the rules, helpers and .link files of an unpacked udev package
//! bound over /usr/lib/udev and /usr/lib/systemd/network, so that both see
//! the same rules and neither touches the machine's own /dev. Kernel
//! uevents are counted on a netlink socket of the bench's own in that
//! network namespace.

use crate::Lab;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Who manages the devices.
#[derive(Clone, PartialEq)]
pub enum Manager {
    /// A uevd binary and the name its column gets.
    Uevd(PathBuf, &'static str),
    Udevd,
}

impl Manager {
    pub fn name(&self) -> &'static str {
        match self {
            Manager::Uevd(_, name) => name,
            Manager::Udevd => "systemd-udevd",
        }
    }
}

/// An unpacked udev package: bin/udevadm, lib/udev, lib/systemd/network.
pub struct UdevRoot(pub PathBuf);

impl UdevRoot {
    /// `--udev-root DIR`, or where scripts/udev-package unpacks it.
    pub fn from_args(args: &[String]) -> UdevRoot {
        UdevRoot(
            crate::arg(args, "--udev-root")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/var/cache/uevd-lab/syscalls/root")),
        )
    }

    /// Fails with what to run when the package is not unpacked there.
    pub fn check(&self) -> io::Result<()> {
        for need in [self.0.join("bin/udevadm"), self.0.join("lib/udev/rules.d")] {
            if !need.exists() {
                return Err(io::Error::other(format!(
                    "{} missing: scripts/syscalls and scripts/native unpack Debian's udev there",
                    need.display()
                )));
            }
        }
        Ok(())
    }

    fn udevadm(&self) -> PathBuf {
        self.0.join("bin/udevadm")
    }
}

/// A mount namespace inside the lab in which /dev and /run are the lab's
/// scratch directories and udev's files are the unpacked package's.
pub struct Scratch {
    holder: Child,
}

impl Scratch {
    pub fn new(lab: &Lab, udev: &UdevRoot) -> io::Result<Scratch> {
        let r = lab.root().display().to_string();
        let u = udev.0.display().to_string();
        // /dev/null is bound in before the scratch /dev covers the real one;
        // rule programs and the managers' children need it.
        let script = format!(
            "set -e; touch '{r}/dev/null'; mount --bind /dev/null '{r}/dev/null'; \
             mount --rbind '{r}/dev' /dev; mount --bind '{r}/run' /run; \
             mount --bind '{u}/lib/udev' /usr/lib/udev; \
             mkdir -p /usr/lib/systemd/network; \
             mount --bind '{u}/lib/systemd/network' /usr/lib/systemd/network; \
             if [ -d /etc/udev ]; then mount -t tmpfs tmpfs /etc/udev; fi; \
             echo ready; exec sleep 1000000"
        );
        let holder = crate::hold_namespaces(lab.command("unshare"), &script)
            .map_err(|_| io::Error::other("could not set up the scratch namespace"))?;
        Ok(Scratch { holder })
    }

    pub fn ns(&self, kind: &str) -> io::Result<OwnedFd> {
        Ok(std::fs::File::open(format!("/proc/{}/ns/{kind}", self.holder.id()))?.into())
    }

    /// A path inside, seen from outside.
    pub fn outside(&self, inside: &str) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/root/{}",
            self.holder.id(),
            inside.trim_start_matches('/')
        ))
    }

    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> io::Result<Command> {
        let mut cmd = Command::new(program);
        crate::in_namespaces(&mut cmd, self.ns("net")?, self.ns("mnt")?);
        Ok(cmd)
    }

    pub fn run(&self, program: &Path, args: &[&str]) -> io::Result<()> {
        let out = self.command(program)?.args(args).output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "{} {args:?} failed: {}",
                program.display(),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// A manager running in a scratch namespace.
pub struct Running<'a> {
    pub child: Child,
    manager: &'a Manager,
    udev: &'a UdevRoot,
    scratch: &'a Scratch,
}

/// Starts `manager` in `scratch` with udev's stock rules, its output to
/// `log`, the command line prefixed with `wrap` (e.g. strace), and waits
/// until its control socket exists.
pub fn start<'a>(
    scratch: &'a Scratch,
    manager: &'a Manager,
    udev: &'a UdevRoot,
    wrap: &[String],
    log: &Path,
) -> io::Result<Running<'a>> {
    let out = std::fs::File::create(log)?;
    let rules = udev.0.join("lib/udev/rules.d");
    let rules_arg = rules.display().to_string();
    let (program, args, ready): (PathBuf, Vec<String>, &str) = match manager {
        Manager::Uevd(uevd, _) => (
            uevd.clone(),
            vec!["--rules-dir".into(), rules_arg, "daemon".into()],
            "run/uevd/control",
        ),
        Manager::Udevd => {
            // udevadm is systemd-udevd when called by that name.
            let udevd = udev.0.join("bin/systemd-udevd");
            if std::fs::symlink_metadata(&udevd).is_err() {
                std::os::unix::fs::symlink("udevadm", &udevd)?;
            }
            (udevd, Vec::new(), "run/udev/control")
        }
    };
    let mut cmd = match wrap.split_first() {
        Some((first, rest)) => {
            let mut c = scratch.command(first)?;
            c.args(rest).arg(&program);
            c
        }
        None => scratch.command(&program)?,
    };
    cmd.args(&args)
        .env("SYSTEMD_LOG_TARGET", "console")
        .env("SYSTEMD_LOG_LEVEL", "notice")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    let mut child = cmd.spawn()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !scratch.outside(ready).exists() {
        if Instant::now() > deadline || child.try_wait()?.is_some() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other(format!(
                "{} did not start: {}",
                manager.name(),
                std::fs::read_to_string(log).unwrap_or_default()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Running {
        child,
        manager,
        udev,
        scratch,
    })
}

impl Running<'_> {
    /// Returns when the manager has processed every event so far.
    pub fn settle(&self) -> io::Result<()> {
        let udevadm = self.udev.udevadm();
        let (prog, args): (&Path, &[&str]) = match self.manager {
            Manager::Uevd(uevd, _) => (uevd, &["settle", "--timeout", "300"]),
            Manager::Udevd => (&udevadm, &["settle", "--timeout=300"]),
        };
        // Twice, with a pause: udevadm's settle may be answered before
        // udevd has read the last uevent.
        self.scratch.run(prog, args)?;
        std::thread::sleep(Duration::from_millis(300));
        self.scratch.run(prog, args)
    }

    /// Asks the manager to exit and waits (30 s at most, then kills it).
    pub fn stop(mut self) -> io::Result<()> {
        match self.manager {
            Manager::Uevd(uevd, _) => self.scratch.run(uevd, &["control", "--exit"])?,
            Manager::Udevd => self
                .scratch
                .run(&self.udev.udevadm(), &["control", "--exit"])?,
        }
        crate::wait_or_kill(&mut self.child, Duration::from_secs(30))
    }
}

/// Kernel uevents seen in the lab's network namespace: loop devices are
/// announced to every namespace, veth interfaces only to their own.
pub struct Uevents {
    socket: std::sync::Mutex<uevd_netlink::UeventSocket>,
}

impl Uevents {
    pub fn open(scratch: &Scratch) -> io::Result<Uevents> {
        let net = scratch.ns("net")?;
        // A thread joins the namespace so that the socket is made in it;
        // the socket stays there, the rest of the process does not move.
        std::thread::spawn(move || -> io::Result<uevd_netlink::UeventSocket> {
            rustix::thread::move_into_link_name_space(
                net.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
            uevd_netlink::UeventSocket::kernel(64 << 20)
        })
        .join()
        .map_err(|_| io::Error::other("uevent listener thread panicked"))?
        .map(|s| Uevents {
            socket: std::sync::Mutex::new(s),
        })
    }

    /// How many uevents arrived since the last call.
    pub fn drain(&self) -> io::Result<u64> {
        let mut socket = self.socket.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        loop {
            match socket.recv()? {
                uevd_netlink::Received::WouldBlock => return Ok(n),
                uevd_netlink::Received::Overflow => {
                    return Err(io::Error::other(
                        "uevents lost: the receive buffer overflowed",
                    ))
                }
                _ => n += 1,
            }
        }
    }
}

/// Seconds since the epoch, as strace -ttt prints them.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Loop numbers out of the way of the machine's and of the tests'.
pub fn loop_numbers(count: usize) -> std::ops::Range<usize> {
    let base = 3000 + (std::process::id() as usize % 50) * 200;
    base..base + count
}

pub fn loop_ctl(add: bool, n: usize) -> io::Result<()> {
    let n = u32::try_from(n).map_err(|_| io::Error::other("loop number out of range"))?;
    crate::loop_control(add, n)
}

/// Adds loop device `n`, first removing one of that number that is left
/// over: from a run that stopped half way, or brought back by the kernel
/// itself, which makes a missing loop device again when a stale node of
/// it is opened (a manager's late open of a device being removed).
pub fn loop_add_fresh(n: usize) -> io::Result<()> {
    match loop_ctl(true, n) {
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
            loop_ctl(false, n)?;
            loop_ctl(true, n)
        }
        other => other,
    }
}

/// The number after `--name`, or `default`.
pub fn number(args: &[String], name: &str, default: usize) -> usize {
    crate::arg(args, name)
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// CPU seconds (user + system) of a process and every process below it,
/// living or reaped: its own threads', what it has reaped of its
/// children, and each living descendant's the same way. A manager's
/// workers and the programs its rules run are billed to it.
pub fn tree_cpu_seconds(pid: u32) -> f64 {
    let mut total = 0.0;
    let mut stack = vec![pid];
    while let Some(p) = stack.pop() {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
        let f: Vec<&str> = after.split_whitespace().collect();
        // utime, stime, cutime, cstime (fields 14 to 17 of proc(5)).
        total += (11..=14)
            .filter_map(|i| f.get(i).and_then(|v| v.parse::<f64>().ok()))
            .sum::<f64>();
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) {
            for t in tasks.flatten() {
                if let Ok(children) = std::fs::read_to_string(t.path().join("children")) {
                    stack.extend(
                        children
                            .split_whitespace()
                            .filter_map(|c| c.parse::<u32>().ok()),
                    );
                }
            }
        }
    }
    total / rustix::param::clock_ticks_per_second() as f64
}

/// Busy CPU seconds of the whole machine so far (all CPUs).
pub fn machine_busy_seconds() -> f64 {
    crate::cpu_jiffies().map_or(0.0, |(busy, _)| {
        busy as f64 / rustix::param::clock_ticks_per_second() as f64
    })
}

/// The managers a side-by-side tool's arguments ask for: uevd (`--uevd
/// PATH`, else the `uevd` beside the tool) and systemd-udevd, or one of
/// them (`--only uevd|udevd`), and an earlier uevd first (`--baseline
/// PATH`). None for an `--only` it does not know.
pub fn managers(args: &[String]) -> Option<Vec<Manager>> {
    let me = std::env::current_exe().unwrap_or_default();
    let uevd = crate::arg(args, "--uevd")
        .map(PathBuf::from)
        .unwrap_or_else(|| me.with_file_name("uevd"));
    let mut managers = match crate::arg(args, "--only") {
        None => vec![Manager::Uevd(uevd, "uevd"), Manager::Udevd],
        Some("uevd") => vec![Manager::Uevd(uevd, "uevd")],
        Some("udevd") => vec![Manager::Udevd],
        Some(_) => return None,
    };
    if let Some(base) = crate::arg(args, "--baseline") {
        managers.insert(0, Manager::Uevd(PathBuf::from(base), "uevd baseline"));
    }
    Some(managers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_tree_is_billed_for_its_children() {
        let before = tree_cpu_seconds(std::process::id());
        // A child that burns CPU, still running when measured.
        let mut child = Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 5",
            ])
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut after = before;
        while Instant::now() < deadline {
            after = tree_cpu_seconds(std::process::id());
            if after >= before + 0.05 {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(after >= before + 0.05, "{before} -> {after}");
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    /// A loop device of the number a run wants, left by an earlier run,
    /// is replaced rather than stopping the run with EEXIST.
    #[test]
    fn a_loop_device_left_over_is_replaced() {
        // SAFETY: reading the effective user id.
        if unsafe { libc::geteuid() } != 0 || !Path::new("/dev/loop-control").exists() {
            eprintln!("skipped: loop devices need root and /dev/loop-control");
            return;
        }
        // Out of the benchmarks' range (3000 + 200 * (pid % 50) + count).
        let n = 14_000 + std::process::id() as usize % 500;
        let _ = loop_ctl(false, n);
        loop_ctl(true, n).unwrap();
        let again = loop_ctl(true, n).unwrap_err();
        assert_eq!(again.raw_os_error(), Some(libc::EEXIST));
        let fresh = loop_add_fresh(n);
        let removed = loop_ctl(false, n);
        fresh.unwrap();
        removed.unwrap();
        assert!(!Path::new(&format!("/sys/block/loop{n}")).exists());
    }
}
