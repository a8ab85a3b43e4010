//! A lab on the real kernel: a private network namespace and mount
//! namespace in which tests and benchmarks create real devices (veth,
//! bridges, loop devices) and run uevd as their device manager, with a
//! scratch /dev and /run so that the machine's own are never touched.
//!
//! The namespaces are held by one `sleep` process; every command of the lab
//! joins them with `setns` before it runs. When the lab is dropped the
//! holder dies, and with it the namespace and every interface in it.

pub mod side;

use rustix::fd::AsFd;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Private namespaces with a scratch /dev and /run.
pub struct Lab {
    holder: Child,
    root: PathBuf,
    netns: File,
    mntns: File,
}

/// The value after `--name` in a lab tool's arguments.
pub fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// Makes `cmd` run in the given network and mount namespaces, in the
/// caller's directory (joining a mount namespace moves a process to its
/// root; relative paths must keep working).
pub fn in_namespaces(cmd: &mut Command, net: rustix::fd::OwnedFd, mnt: rustix::fd::OwnedFd) {
    let cwd = std::env::current_dir().ok().and_then(|d| {
        std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(d.as_os_str())).ok()
    });
    // SAFETY: the closure only makes system calls, which is allowed
    // between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            rustix::thread::move_into_link_name_space(
                net.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
            rustix::thread::move_into_link_name_space(
                mnt.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Mount),
            )?;
            if let Some(dir) = &cwd {
                let _ = rustix::process::chdir(dir.as_c_str());
            }
            Ok(())
        });
    }
}

/// Runs `unshare [its args] --mount --propagation private -- sh -c script`
/// and waits until the script prints `ready`: the namespaces exist and are
/// set up for as long as the returned process lives (the script's last
/// command keeps it alive).
pub fn hold_namespaces(mut unshare: Command, script: &str) -> io::Result<Child> {
    let mut holder = unshare
        .args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            script,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(holder.stdout.take().expect("piped")).read_line(&mut line)?;
    if line.trim() != "ready" {
        let _ = holder.kill();
        let _ = holder.wait();
        return Err(io::Error::other("the namespace script did not get ready"));
    }
    Ok(holder)
}

/// Adds or removes loop device `n` through /dev/loop-control. A removal
/// waits up to five seconds while the device is busy: any device manager
/// on the machine (the host's udevd, another test's uevd: uevents reach
/// them all) may hold a new device open for a moment to probe it.
pub fn loop_control(add: bool, n: u32) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match loop_control_once(add, n) {
            Err(e)
                if !add && e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn loop_control_once(add: bool, n: u32) -> io::Result<()> {
    let ctl = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/loop-control")?;
    const LOOP_CTL_ADD: u64 = 0x4C80;
    const LOOP_CTL_REMOVE: u64 = 0x4C81;
    let req = if add { LOOP_CTL_ADD } else { LOOP_CTL_REMOVE };
    // SAFETY: both requests take an integer argument, no pointer.
    let r = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&ctl),
            req as _,
            n as libc::c_long,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Lab {
    /// Creates the namespaces. Needs root.
    pub fn new() -> io::Result<Lab> {
        let root =
            std::env::temp_dir().join(format!("uevd-lab.{}.{}", std::process::id(), uevd_nanos()));
        std::fs::create_dir_all(root.join("rules.d"))?;
        let script = format!(
            "set -e; mount -t sysfs sysfs /sys; \
             for d in dev run; do mkdir -p '{r}'/$d; mount -t tmpfs -o mode=755 tmpfs '{r}'/$d; done; \
             ip link set lo up; echo ready; exec sleep 1000000",
            r = root.display()
        );
        let mut unshare = Command::new("unshare");
        unshare.args(["--net"]);
        let holder = hold_namespaces(unshare, &script)
            .map_err(|_| io::Error::other("could not create the lab namespaces (root needed)"))?;
        let ns = |kind: &str| File::open(format!("/proc/{}/ns/{kind}", holder.id()));
        let (netns, mntns) = (ns("net")?, ns("mnt")?);
        Ok(Lab {
            holder,
            root,
            netns,
            mntns,
        })
    }

    /// The scratch /dev, as seen from outside the lab.
    pub fn dev(&self) -> PathBuf {
        self.outside(&self.root.join("dev"))
    }

    /// The scratch /run, as seen from outside the lab.
    pub fn run(&self) -> PathBuf {
        self.outside(&self.root.join("run"))
    }

    /// A path inside the lab's mount namespace, reachable from outside
    /// through the holder's root.
    pub fn outside(&self, inside: &Path) -> PathBuf {
        let rel = inside.strip_prefix("/").unwrap_or(inside);
        PathBuf::from(format!("/proc/{}/root", self.holder.id())).join(rel)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A command that runs inside the lab.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        let net = self.netns.try_clone().expect("dup netns fd");
        let mnt = self.mntns.try_clone().expect("dup mntns fd");
        in_namespaces(&mut cmd, net.into(), mnt.into());
        cmd
    }

    /// Runs a shell script inside the lab; fails if it fails.
    pub fn sh(&self, script: &str) -> io::Result<String> {
        let out = self.command("sh").args(["-c", script]).output()?;
        check(&out, script)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Feeds `ip -batch` with one command per line; returns how long the
    /// kernel took.
    pub fn ip_batch(&self, lines: &[String]) -> io::Result<Duration> {
        let file = self.root.join(format!("batch.{}", uevd_nanos()));
        let mut f = File::create(&file)?;
        for l in lines {
            writeln!(f, "{l}")?;
        }
        drop(f);
        let t = Instant::now();
        let out = self.command("ip").arg("-batch").arg(&file).output()?;
        let took = t.elapsed();
        let _ = std::fs::remove_file(&file);
        check(&out, "ip -batch")?;
        Ok(took)
    }

    /// Network interfaces in the lab, by ifindex.
    pub fn interfaces(&self) -> io::Result<Vec<(u32, String)>> {
        let out = self.sh("for i in /sys/class/net/*; do echo $(cat $i/ifindex) ${i##*/}; done")?;
        Ok(out
            .lines()
            .filter_map(|l| {
                let (i, n) = l.split_once(' ')?;
                Some((i.parse().ok()?, n.to_string()))
            })
            .collect())
    }

    /// Starts uevd's daemon in the foreground inside the lab, logging to a
    /// file.
    pub fn start_uevd(&self, uevd: &Path, args: &[&str]) -> io::Result<Daemon> {
        self.start_uevd_with(uevd, &[], args)
    }

    /// Like [`Lab::start_uevd`], with global options (`--sys`) first.
    pub fn start_uevd_with(
        &self,
        uevd: &Path,
        global: &[&str],
        args: &[&str],
    ) -> io::Result<Daemon> {
        self.start_uevd_env(uevd, &[], global, args)
    }

    /// Like [`Lab::start_uevd_with`], with environment variables
    /// (`SYSTEMD_PROC_CMDLINE` stands for the kernel command line).
    pub fn start_uevd_env(
        &self,
        uevd: &Path,
        env: &[(&str, &str)],
        global: &[&str],
        args: &[&str],
    ) -> io::Result<Daemon> {
        let log = self.root.join(format!("uevd.{}.log", uevd_nanos()));
        let child = self
            .command(uevd)
            .envs(env.iter().copied())
            .args(self.uevd_roots())
            .args(global)
            .arg("daemon")
            .args(args)
            .stdin(Stdio::null())
            .stdout(File::create(&log)?)
            .stderr(File::create(&log)?)
            .spawn()?;
        // Started once its sockets accept connections: a socket's file
        // appears at bind(), a moment before listen(). udev's control
        // socket is bound just after uevd's own.
        let control = self.run().join("uevd/control");
        let udev_control = self.run().join("udev/control");
        // uevd's socket is a stream socket, udev's a SOCK_SEQPACKET one.
        let accepts = |p: &Path, kind: rustix::net::SocketType| {
            let Ok(addr) = rustix::net::SocketAddrUnix::new(p) else {
                return false;
            };
            rustix::net::socket(rustix::net::AddressFamily::UNIX, kind, None)
                .is_ok_and(|fd| rustix::net::connect(&fd, &addr).is_ok())
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut control_ready: Option<Instant> = None;
        loop {
            if control_ready.is_none() && accepts(&control, rustix::net::SocketType::STREAM) {
                control_ready = Some(Instant::now());
            }
            if let Some(t) = control_ready {
                // A daemon that cannot bind udev's socket still runs.
                if accepts(&udev_control, rustix::net::SocketType::SEQPACKET)
                    || t.elapsed() > Duration::from_secs(2)
                {
                    break;
                }
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "uevd did not start: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(Daemon {
            child,
            log,
            uevd: uevd.to_path_buf(),
        })
    }

    /// `--dev`, `--run` pointing at the scratch directories, and
    /// `--rules-dir` at the lab's own rules (empty unless a test writes
    /// some), so that the machine's rules never run on the lab's devices.
    pub fn uevd_roots(&self) -> Vec<String> {
        vec![
            "--dev".into(),
            self.root.join("dev").display().to_string(),
            "--run".into(),
            self.root.join("run").display().to_string(),
            "--rules-dir".into(),
            self.rules_dir().display().to_string(),
        ]
    }

    /// The rules directory uevd reads in the lab.
    pub fn rules_dir(&self) -> PathBuf {
        self.root.join("rules.d")
    }

    /// Runs a uevd subcommand (trigger, settle, control ...) in the lab.
    pub fn uevd(&self, uevd: &Path, args: &[&str]) -> io::Result<Output> {
        self.command(uevd)
            .args(self.uevd_roots())
            .args(args)
            .output()
    }

    /// Waits until uevd has processed everything.
    pub fn settle(&self, uevd: &Path) -> io::Result<()> {
        let out = self.uevd(uevd, &["settle", "--timeout", "300"])?;
        check(&out, "uevd settle")
    }

    /// uevd's `control --status`, as key/value pairs.
    pub fn status(&self, uevd: &Path) -> io::Result<Vec<(String, String)>> {
        let out = self.uevd(uevd, &["control", "--status"])?;
        check(&out, "uevd control --status")?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|kv| {
                kv.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
            })
            .collect())
    }

    /// Database entries (file names under /run/udev/data).
    pub fn db_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_dir(self.run().join("udev/data"))
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
        // The tmpfs mounts lived in the lab's mount namespace only.
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A running uevd daemon.
pub struct Daemon {
    child: Child,
    log: PathBuf,
    uevd: PathBuf,
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// User plus system CPU seconds so far, with the threads.
    pub fn cpu_seconds(&self) -> io::Result<f64> {
        cpu_seconds(self.pid())
    }

    /// Peak resident memory in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0)
    }

    /// Stops it through its control socket and waits.
    pub fn stop(mut self, lab: &Lab) -> io::Result<String> {
        let _ = lab.uevd(&self.uevd, &["control", "--exit"]);
        wait_or_kill(&mut self.child, Duration::from_secs(30))?;
        Ok(self.log())
    }

    /// Kills it without warning.
    pub fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.log()
    }

    pub fn signal(&self, sig: rustix::process::Signal) -> io::Result<()> {
        let pid =
            rustix::process::Pid::from_raw(self.pid() as i32).ok_or(io::ErrorKind::InvalidInput)?;
        Ok(rustix::process::kill_process(pid, sig)?)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for a process asked to exit; kills it if it is still there after
/// `patience`.
pub fn wait_or_kill(child: &mut Child, patience: Duration) -> io::Result<()> {
    let deadline = Instant::now() + patience;
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.wait();
    Ok(())
}

/// CPU seconds of a process (all threads, not children).
pub fn cpu_seconds(pid: u32) -> io::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    Ok(ticks / clock_ticks())
}

fn clock_ticks() -> f64 {
    rustix::param::clock_ticks_per_second() as f64
}

fn check(out: &Output, what: &str) -> io::Result<()> {
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

fn uevd_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// `ip` commands that create `pairs` veth pairs named `<prefix>a<i>` and
/// `<prefix>b<i>`.
pub fn veth_pairs(prefix: &str, pairs: usize) -> Vec<String> {
    (0..pairs)
        .map(|i| format!("link add {prefix}a{i} type veth peer name {prefix}b{i}"))
        .collect()
}

/// `ip` commands that delete them again (the peer goes with each).
pub fn delete_veth_pairs(prefix: &str, pairs: usize) -> Vec<String> {
    (0..pairs)
        .map(|i| format!("link del {prefix}a{i}"))
        .collect()
}

/// Sends a uevent that did not come from the kernel: multicast to the
/// kernel group from a userspace port (as root), or unicast to `port`.
pub fn forge_uevent(devpath: &str, port: Option<u32>) -> io::Result<()> {
    use rustix::net::netlink::{SocketAddrNetlink, KOBJECT_UEVENT};
    use rustix::net::{sendto, AddressFamily, SendFlags, SocketType};
    let fd = rustix::net::socket(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        Some(KOBJECT_UEVENT),
    )?;
    let msg = format!(
        "add@{devpath}\0ACTION=add\0DEVPATH={devpath}\0SUBSYSTEM=block\0MAJOR=8\0MINOR=0\0DEVNAME=sda\0SEQNUM=999999\0"
    );
    let dest = match port {
        Some(p) => SocketAddrNetlink::new(p, 0),
        None => SocketAddrNetlink::new(0, 1),
    };
    sendto(&fd, msg.as_bytes(), SendFlags::empty(), &dest)?;
    Ok(())
}

/// Builds a sysfs-shaped tree of `n` character devices below `root`, for
/// scale tests only (real tests use the real sysfs): devices
/// `/devices/fake/busB/fakeN`, 1000 to a bus, each with a `uevent` file and
/// a `subsystem` link.
pub fn fake_sysfs(root: &Path, n: usize) -> io::Result<()> {
    let class = root.join("class/fake");
    std::fs::create_dir_all(&class)?;
    for i in 0..n {
        let dir = root.join(format!("devices/fake/bus{}/fake{i}", i / 1000));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(
            dir.join("uevent"),
            format!("MAJOR=240\nMINOR={i}\nDEVNAME=fake/fake{i}\nDEVMODE=0660\n"),
        )?;
        std::os::unix::fs::symlink("../../../../class/fake", dir.join("subsystem"))?;
    }
    Ok(())
}

/// Busy and total jiffies of all CPUs.
pub(crate) fn cpu_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().sum();
    let idle = v.get(3)? + v.get(4).unwrap_or(&0);
    Some((total - idle, total))
}

/// Waits until the machine is nearly idle: a lab that was just dropped
/// leaves the kernel tearing its namespace down in the background (for
/// thousands of interfaces, seconds of work), which would be billed to
/// whatever is measured next.
pub fn wait_quiet(max: Duration) {
    let deadline = Instant::now() + max;
    while Instant::now() < deadline {
        let Some((b0, t0)) = cpu_jiffies() else {
            return;
        };
        std::thread::sleep(Duration::from_millis(250));
        let Some((b1, t1)) = cpu_jiffies() else {
            return;
        };
        if t1 > t0 && (b1 - b0) * 100 / (t1 - t0) < 10 {
            return;
        }
    }
}
