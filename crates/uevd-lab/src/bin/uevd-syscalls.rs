//! System calls per event, uevd against systemd-udevd, on one workload.
//!
//! Each manager runs under `strace -f` in the lab's network namespace and
//! in a mount namespace of its own whose /dev and /run are the lab's
//! scratch tmpfs, with udev's stock rules, helpers and .link files bound
//! over /usr/lib/udev and /usr/lib/systemd/network for both. The workload
//! is N loop devices added, changed and removed, then N veth pairs added
//! and removed, each phase followed by the manager's own settle. Calls are
//! billed to a phase by their timestamp and divided by the number of
//! kernel uevents of that phase, counted on a netlink socket of our own.
//!
//! usage: uevd-syscalls [--uevd PATH] [--baseline PATH] [--udev-root DIR]
//!                      [--count N] [--runs R] [--only uevd|udevd] [--keep DIR]
//!
//! `--baseline` adds a column for another uevd binary (an earlier build),
//! run in turn with the others, for before/after figures from one run.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use uevd_lab::{arg, delete_veth_pairs, veth_pairs, Lab};

const PHASES: [&str; 5] = [
    "loop add",
    "loop change",
    "loop remove",
    "veth add",
    "veth remove",
];

fn usage() -> ExitCode {
    eprintln!(
        "usage: uevd-syscalls [--uevd PATH] [--baseline PATH] [--udev-root DIR] [--count N] \
         [--runs R] [--only uevd|udevd] [--keep DIR]"
    );
    ExitCode::from(2)
}

#[derive(Clone, PartialEq)]
enum Manager {
    Uevd(PathBuf, &'static str),
    Udevd,
}

impl Manager {
    fn name(&self) -> &'static str {
        match self {
            Manager::Uevd(_, name) => name,
            Manager::Udevd => "systemd-udevd",
        }
    }
}

struct Config {
    /// An unpacked udev package: bin/udevadm, lib/udev, lib/systemd/network.
    udev_root: PathBuf,
    count: usize,
    runs: usize,
    managers: Vec<Manager>,
    keep: Option<PathBuf>,
}

/// Calls and failures of one syscall name.
#[derive(Default, Clone, Copy)]
struct Tally {
    calls: u64,
    failed: u64,
}

/// What one manager did in one phase of one run.
#[derive(Default, Clone)]
struct PhaseCount {
    events: u64,
    by_name: BTreeMap<String, Tally>,
    /// Failures by "name errno".
    failures: BTreeMap<String, u64>,
}

impl PhaseCount {
    fn total(&self) -> Tally {
        self.by_name.values().fold(Tally::default(), |a, t| Tally {
            calls: a.calls + t.calls,
            failed: a.failed + t.failed,
        })
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return usage();
    }
    let me = std::env::current_exe().unwrap_or_default();
    let uevd = arg(&args, "--uevd")
        .map(PathBuf::from)
        .unwrap_or_else(|| me.with_file_name("uevd"));
    let mut managers = match arg(&args, "--only") {
        None => vec![Manager::Uevd(uevd, "uevd"), Manager::Udevd],
        Some("uevd") => vec![Manager::Uevd(uevd, "uevd")],
        Some("udevd") => vec![Manager::Udevd],
        Some(_) => return usage(),
    };
    if let Some(base) = arg(&args, "--baseline") {
        managers.insert(0, Manager::Uevd(PathBuf::from(base), "uevd baseline"));
    }
    let cfg = Config {
        udev_root: arg(&args, "--udev-root")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/cache/uevd-lab/syscalls/root")),
        count: arg(&args, "--count")
            .and_then(|c| c.parse().ok())
            .unwrap_or(20),
        runs: arg(&args, "--runs")
            .and_then(|c| c.parse().ok())
            .unwrap_or(3),
        managers,
        keep: arg(&args, "--keep").map(PathBuf::from),
    };
    match bench(&cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uevd-syscalls: {e}");
            ExitCode::from(1)
        }
    }
}

fn bench(cfg: &Config) -> io::Result<()> {
    for need in [
        cfg.udev_root.join("bin/udevadm"),
        cfg.udev_root.join("lib/udev/rules.d"),
    ] {
        if !need.exists() {
            return Err(io::Error::other(format!(
                "{} missing: scripts/syscalls unpacks Debian's udev there",
                need.display()
            )));
        }
    }
    // runs[manager][run][phase]
    let mut results: Vec<Vec<Vec<PhaseCount>>> = vec![Vec::new(); cfg.managers.len()];
    for run in 0..cfg.runs {
        for (m, manager) in cfg.managers.iter().enumerate() {
            eprintln!("run {} of {}: {}", run + 1, cfg.runs, manager.name());
            uevd_lab::wait_quiet(Duration::from_secs(10));
            results[m].push(one_run(cfg, manager, run)?);
        }
    }
    print_tables(cfg, &results);
    Ok(())
}

/// A mount namespace inside the lab in which /dev and /run are the lab's
/// scratch directories and udev's files are the unpacked package's.
struct Scratch {
    holder: Child,
}

impl Scratch {
    fn new(lab: &Lab, udev_root: &Path) -> io::Result<Scratch> {
        let r = lab.root().display().to_string();
        let u = udev_root.display().to_string();
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
        let holder = uevd_lab::hold_namespaces(lab.command("unshare"), &script)
            .map_err(|_| io::Error::other("could not set up the scratch namespace"))?;
        Ok(Scratch { holder })
    }

    fn ns(&self, kind: &str) -> io::Result<OwnedFd> {
        Ok(std::fs::File::open(format!("/proc/{}/ns/{kind}", self.holder.id()))?.into())
    }

    /// A path inside, seen from outside.
    fn outside(&self, inside: &str) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/root/{}",
            self.holder.id(),
            inside.trim_start_matches('/')
        ))
    }

    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> io::Result<Command> {
        let mut cmd = Command::new(program);
        uevd_lab::in_namespaces(&mut cmd, self.ns("net")?, self.ns("mnt")?);
        Ok(cmd)
    }

    fn run(&self, program: &Path, args: &[&str]) -> io::Result<()> {
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

/// Kernel uevents seen in the lab's network namespace: loop devices are
/// announced to every namespace, veth interfaces only to their own.
struct Uevents {
    fd: OwnedFd,
}

impl Uevents {
    fn open(scratch: &Scratch) -> io::Result<Uevents> {
        let net = scratch.ns("net")?;
        // A thread joins the namespace so that the socket is made in it;
        // the socket stays there, the rest of the process does not move.
        std::thread::spawn(move || -> io::Result<OwnedFd> {
            use rustix::net::netlink::{SocketAddrNetlink, KOBJECT_UEVENT};
            use rustix::net::{AddressFamily, SocketFlags, SocketType};
            rustix::thread::move_into_link_name_space(
                net.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )?;
            let fd = rustix::net::socket_with(
                AddressFamily::NETLINK,
                SocketType::DGRAM,
                SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
                Some(KOBJECT_UEVENT),
            )?;
            let _ = rustix::net::sockopt::set_socket_recv_buffer_size_force(&fd, 64 << 20);
            rustix::net::bind(&fd, &SocketAddrNetlink::new(0, 1))?;
            Ok(fd)
        })
        .join()
        .map_err(|_| io::Error::other("uevent listener thread panicked"))?
        .map(|fd| Uevents { fd })
    }

    /// How many uevents arrived since the last call.
    fn drain(&self) -> io::Result<u64> {
        let mut buf = vec![0u8; 64 << 10];
        let mut n = 0;
        loop {
            match rustix::net::recv(&self.fd, &mut buf[..], rustix::net::RecvFlags::empty()) {
                Ok(_) => n += 1,
                Err(rustix::io::Errno::AGAIN) => return Ok(n),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn loop_ctl(add: bool, n: usize) -> io::Result<()> {
    let n = u32::try_from(n).map_err(|_| io::Error::other("loop number out of range"))?;
    uevd_lab::loop_control(add, n)
}

/// Loop numbers out of the way of the machine's and of the tests'.
fn loop_numbers(count: usize) -> std::ops::Range<usize> {
    let base = 3000 + (std::process::id() as usize % 50) * 200;
    base..base + count
}

fn one_run(cfg: &Config, manager: &Manager, run: usize) -> io::Result<Vec<PhaseCount>> {
    let lab = Lab::new()?;
    let scratch = Scratch::new(&lab, &cfg.udev_root)?;
    let trace = lab.root().join("trace");
    let trace_arg = trace.display().to_string();
    let log = std::fs::File::create(lab.root().join("manager.log"))?;
    let udevadm = cfg.udev_root.join("bin/udevadm");
    let rules = cfg.udev_root.join("lib/udev/rules.d");
    let rules_arg = rules.display().to_string();
    let mut strace = scratch.command("strace")?;
    strace
        .args(["-f", "-ttt", "-qq", "-o", &trace_arg, "--"])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    let ready = match manager {
        Manager::Uevd(uevd, _) => {
            strace.arg(uevd).args(["--rules-dir", &rules_arg, "daemon"]);
            "run/uevd/control"
        }
        Manager::Udevd => {
            // udevadm is systemd-udevd when called by that name.
            let udevd = cfg.udev_root.join("bin/systemd-udevd");
            if std::fs::symlink_metadata(&udevd).is_err() {
                std::os::unix::fs::symlink("udevadm", &udevd)?;
            }
            strace
                .arg(&udevd)
                .env("SYSTEMD_LOG_TARGET", "console")
                .env("SYSTEMD_LOG_LEVEL", "notice");
            "run/udev/control"
        }
    };
    let mut child = strace.spawn()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !scratch.outside(ready).exists() {
        if Instant::now() > deadline || child.try_wait()?.is_some() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other(format!(
                "{} did not start: {}",
                manager.name(),
                std::fs::read_to_string(lab.root().join("manager.log")).unwrap_or_default()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let uevents = Uevents::open(&scratch)?;
    let settle = || -> io::Result<()> {
        let (prog, args): (&Path, &[&str]) = match manager {
            Manager::Uevd(uevd, _) => (uevd, &["settle", "--timeout", "300"]),
            Manager::Udevd => (&udevadm, &["settle", "--timeout=300"]),
        };
        // Twice, with a pause: udevadm's settle may be answered before
        // udevd has read the last uevent.
        scratch.run(prog, args)?;
        std::thread::sleep(Duration::from_millis(300));
        scratch.run(prog, args)
    };
    settle()?;
    uevents.drain()?;
    let loops = loop_numbers(cfg.count);
    let mut bounds = Vec::new();
    let mut events = Vec::new();
    for phase in PHASES {
        let start = now();
        match phase {
            "loop add" => loops.clone().try_for_each(|n| loop_ctl(true, n))?,
            "loop change" => loops.clone().try_for_each(|n| {
                std::fs::write(
                    format!("/sys/devices/virtual/block/loop{n}/uevent"),
                    "change",
                )
            })?,
            "loop remove" => loops.clone().try_for_each(|n| loop_ctl(false, n))?,
            "veth add" => {
                lab.ip_batch(&veth_pairs("s", cfg.count))?;
            }
            "veth remove" => {
                lab.ip_batch(&delete_veth_pairs("s", cfg.count))?;
            }
            _ => unreachable!(),
        }
        settle()?;
        bounds.push((start, now()));
        events.push(uevents.drain()?);
    }
    match manager {
        Manager::Uevd(uevd, _) => scratch.run(uevd, &["control", "--exit"])?,
        Manager::Udevd => scratch.run(&udevadm, &["control", "--exit"])?,
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.wait();
    let text = std::fs::read_to_string(&trace)?;
    if let Some(keep) = &cfg.keep {
        std::fs::create_dir_all(keep)?;
        let name = format!("{}.{}.strace", manager.name().replace(' ', "-"), run + 1);
        std::fs::write(keep.join(name), &text)?;
    }
    let mut counts = vec![PhaseCount::default(); PHASES.len()];
    for (c, e) in counts.iter_mut().zip(&events) {
        c.events = *e;
    }
    for line in text.lines() {
        let Some(call) = parse_line(line) else {
            continue;
        };
        let Some(p) = bounds
            .iter()
            .position(|&(s, e)| call.time >= s && call.time < e)
        else {
            continue;
        };
        let t = counts[p].by_name.entry(call.name.to_string()).or_default();
        t.calls += 1;
        if let Some(errno) = call.errno {
            t.failed += 1;
            *counts[p]
                .failures
                .entry(format!("{} {errno}", call.name))
                .or_default() += 1;
        }
    }
    Ok(counts)
}

struct Call<'a> {
    time: f64,
    name: &'a str,
    errno: Option<&'a str>,
}

/// One line of `strace -f -ttt`: "PID SECONDS.MICROS name(args) = ret".
/// A call split by another thread's is counted once, at its resumption.
fn parse_line(line: &str) -> Option<Call<'_>> {
    let mut it = line.splitn(3, ' ');
    let _pid = it.next()?;
    let time: f64 = it.next()?.parse().ok()?;
    let rest = it.next()?.trim_start();
    if rest.ends_with("<unfinished ...>") || rest.starts_with("+++") || rest.starts_with("---") {
        return None;
    }
    let name = if let Some(r) = rest.strip_prefix("<... ") {
        r.split(' ').next()?
    } else {
        rest.split('(').next()?
    };
    let ret = rest.rsplit_once(") = ")?.1;
    let errno = ret
        .strip_prefix("-1 ")
        .and_then(|e| e.split(' ').next())
        .filter(|e| e.starts_with('E'));
    Some(Call { time, name, errno })
}

fn median(mut v: Vec<f64>) -> f64 {
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

fn per_event(x: u64, events: u64) -> f64 {
    if events == 0 {
        0.0
    } else {
        x as f64 / events as f64
    }
}

fn print_tables(cfg: &Config, results: &[Vec<Vec<PhaseCount>>]) {
    let names: Vec<&str> = cfg.managers.iter().map(|m| m.name()).collect();
    println!(
        "system calls per uevent, {} loop devices and {} veth pairs, median of {} runs \
         (calls / failed)",
        cfg.count, cfg.count, cfg.runs
    );
    print!("{:<12} {:>7}", "phase", "events");
    for n in &names {
        print!(" {:>22}", n);
    }
    println!();
    for (p, phase) in PHASES.iter().enumerate() {
        let events = median(
            results[0]
                .iter()
                .map(|r| r[p].events as f64)
                .collect::<Vec<_>>(),
        );
        print!("{:<12} {:>7}", phase, events);
        for runs in results {
            let calls = median(
                runs.iter()
                    .map(|r| per_event(r[p].total().calls, r[p].events))
                    .collect(),
            );
            let failed = median(
                runs.iter()
                    .map(|r| per_event(r[p].total().failed, r[p].events))
                    .collect(),
            );
            print!(" {:>22}", format!("{calls:.1} / {failed:.1}"));
        }
        println!();
    }
    for (p, phase) in PHASES.iter().enumerate() {
        println!("\n{phase}: top system calls per event (calls / failed)");
        // The union of each manager's ten most frequent, most frequent first.
        let mut rows: BTreeMap<String, f64> = BTreeMap::new();
        let med = |runs: &Vec<Vec<PhaseCount>>, name: &str, failed: bool| -> f64 {
            median(
                runs.iter()
                    .map(|r| {
                        let t = r[p].by_name.get(name).copied().unwrap_or_default();
                        per_event(if failed { t.failed } else { t.calls }, r[p].events)
                    })
                    .collect(),
            )
        };
        for runs in results {
            let mut all: Vec<(String, f64)> = runs
                .iter()
                .flat_map(|r| r[p].by_name.keys().cloned())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .map(|n| {
                    let v = med(runs, &n, false);
                    (n, v)
                })
                .collect();
            all.sort_by(|a, b| b.1.total_cmp(&a.1));
            for (n, v) in all.into_iter().take(10) {
                let e = rows.entry(n).or_default();
                *e = e.max(v);
            }
        }
        let mut rows: Vec<(String, f64)> = rows.into_iter().collect();
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
        print!("  {:<20}", "syscall");
        for n in &names {
            print!(" {:>16}", n);
        }
        println!();
        for (name, _) in rows {
            print!("  {:<20}", name);
            for runs in results {
                let c = med(runs, &name, false);
                let f = med(runs, &name, true);
                print!(" {:>16}", format!("{c:.2} / {f:.2}"));
            }
            println!();
        }
        for (m, runs) in results.iter().enumerate() {
            let mut fails: BTreeMap<String, u64> = BTreeMap::new();
            for r in runs {
                for (k, v) in &r[p].failures {
                    *fails.entry(k.clone()).or_default() += v;
                }
            }
            let mut fails: Vec<(String, u64)> = fails.into_iter().collect();
            fails.sort_by_key(|b| std::cmp::Reverse(b.1));
            let events: u64 = runs.iter().map(|r| r[p].events).sum();
            let list: Vec<String> = fails
                .iter()
                .take(6)
                .map(|(k, v)| format!("{k} {:.2}", per_event(*v, events)))
                .collect();
            if !list.is_empty() {
                println!("  failing, {}: {}", names[m], list.join(", "));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_line;

    #[test]
    fn strace_lines() {
        let c = parse_line("12 1700000000.000100 openat(3, \"x\", O_RDONLY) = -1 ENOENT (No such file or directory)").unwrap();
        assert_eq!((c.name, c.errno), ("openat", Some("ENOENT")));
        assert!(parse_line("12 1700000000.000100 read(3,  <unfinished ...>").is_none());
        let c = parse_line("13 1700000000.000200 <... read resumed>\"ab\", 2) = 2").unwrap();
        assert_eq!((c.name, c.errno), ("read", None));
        assert!(parse_line("12 1700000000.000300 +++ exited with 0 +++").is_none());
        let c =
            parse_line("12 1.5 symlinkat(\"../a\", 4, \"b\") = -1 EEXIST (File exists)").unwrap();
        assert_eq!(
            (c.name, c.errno, c.time),
            ("symlinkat", Some("EEXIST"), 1.5)
        );
    }
}
