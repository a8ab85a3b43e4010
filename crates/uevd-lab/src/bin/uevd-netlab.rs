//! uevd-netlab: uevd on the real kernel in private namespaces.
//!
//! - `demo`: a few hundred veth and bridge interfaces with uevd as their
//!   device manager, then per-event latency and total time against the
//!   kernel alone.
//! - `bench`: N interfaces with no device manager (the floor) and with uevd
//!   until settle, side by side, for several N.
//! - `scale`: coldplug a generated sysfs of N devices; with `--contended`
//!   every device also claims one link, at three priorities.
//! - `forge`: send a uevent that does not come from the kernel (tests).
//! - `loop-add` / `loop-remove`: create or remove a loop block device.
//! - `budget`: what one event of each kind (net and block, add and
//!   remove) costs uevd under a rule set (default: udev's stock rules),
//!   from the journal, and what of it is rules, builtins and rule lines.

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use uevd_lab::side::median;
use uevd_lab::{arg, delete_veth_pairs, veth_pairs, wait_quiet, Lab};
use uevd_report::stats::{auto_bin, quantile, summarize};
use uevd_timeline::read::Journal;

fn usage() -> ExitCode {
    eprintln!(
        "usage: uevd-netlab demo [--uevd PATH] [--pairs N]\n       \
         uevd-netlab bench [--uevd PATH] [--counts N,N,...] [--runs R]\n       \
         uevd-netlab coldplug [--uevd PATH] [--counts N,N,...] [--runs R]\n       \
         uevd-netlab scale [--uevd PATH] [--counts N,N,...] [--contended]\n       \
         uevd-netlab forge --devpath P [--port N] [--uid U [--keep-net-admin]]\n       \
         uevd-netlab loop-add N | loop-remove N\n       \
         uevd-netlab budget [--uevd PATH] [--rules DIR] [--pairs N] [--loops N] [--runs R] [--journal FILE]"
    );
    ExitCode::from(2)
}

fn uevd_path(args: &[String]) -> PathBuf {
    if let Some(p) = arg(args, "--uevd") {
        return PathBuf::from(p);
    }
    // Next to this binary, as cargo builds them.
    let me = std::env::current_exe().unwrap_or_default();
    me.with_file_name("uevd")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        return usage();
    };
    let result = match cmd.as_str() {
        "demo" => demo(
            &uevd_path(&args),
            arg(&args, "--pairs")
                .and_then(|n| n.parse().ok())
                .unwrap_or(150),
        ),
        "bench" => bench(
            &uevd_path(&args),
            &counts(&args, "1000,10000"),
            arg(&args, "--runs")
                .and_then(|n| n.parse().ok())
                .unwrap_or(3),
        ),
        "coldplug" => coldplug(
            &uevd_path(&args),
            &counts(&args, "1000,10000"),
            arg(&args, "--runs")
                .and_then(|n| n.parse().ok())
                .unwrap_or(3),
        ),
        "scale" => scale(
            &uevd_path(&args),
            &counts(&args, "1000,10000,100000"),
            args.iter().any(|a| a == "--contended"),
        ),
        "forge" => forge(&args),
        "budget" => budget(&uevd_path(&args), &args),
        "loop-add" | "loop-remove" => {
            loop_ctl(cmd == "loop-add", args.get(1).and_then(|n| n.parse().ok()))
        }
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uevd-netlab: {e}");
            ExitCode::from(1)
        }
    }
}

fn counts(args: &[String], default: &str) -> Vec<usize> {
    arg(args, "--counts")
        .unwrap_or(default)
        .split(',')
        .filter_map(|n| n.parse().ok())
        .collect()
}

fn forge(args: &[String]) -> io::Result<()> {
    let devpath = arg(args, "--devpath").unwrap_or("/devices/virtual/block/forged");
    let port = arg(args, "--port").and_then(|p| p.parse().ok());
    if let Some(uid) = arg(args, "--uid").and_then(|u| u.parse().ok()) {
        // Optionally keep CAP_NET_ADMIN, without which the kernel itself
        // refuses to let the user send on this protocol.
        let keep = args.iter().any(|a| a == "--keep-net-admin");
        if keep {
            rustix::thread::set_keep_capabilities(true)?;
        }
        rustix::thread::set_thread_uid(rustix::process::Uid::from_raw(uid))?;
        if keep {
            use rustix::thread::{set_capabilities, CapabilitySet, CapabilitySets};
            let net_admin = CapabilitySet::NET_ADMIN;
            set_capabilities(
                None,
                CapabilitySets {
                    effective: net_admin,
                    permitted: net_admin,
                    inheritable: CapabilitySet::empty(),
                },
            )?;
        }
    }
    uevd_lab::forge_uevent(devpath, port)
}

fn loop_ctl(add: bool, n: Option<i32>) -> io::Result<()> {
    let n = n.ok_or_else(|| io::Error::other("which loop device?"))?;
    let n = u32::try_from(n).map_err(|_| io::Error::other("a loop number is not negative"))?;
    uevd_lab::loop_control(add, n)
}

/// Per-event latency (arrival to finish) in microseconds, from a journal.
fn latencies(journal: &Journal) -> Vec<f64> {
    journal
        .events
        .iter()
        .map(|e| (e.finished.saturating_sub(e.arrived)) as f64 / 1000.0)
        .collect()
}

fn demo(uevd: &Path, pairs: usize) -> io::Result<()> {
    let bridges = (pairs / 10).max(1);
    let mut create = veth_pairs("d", pairs);
    for b in 0..bridges {
        create.push(format!("link add dbr{b} type bridge"));
    }
    for i in 0..pairs {
        create.push(format!("link set da{i} master dbr{}", i % bridges));
    }
    let mut delete = delete_veth_pairs("d", pairs);
    for b in 0..bridges {
        delete.push(format!("link del dbr{b}"));
    }
    println!(
        "uevd demo: {pairs} veth pairs and {bridges} bridges in a private network and mount namespace,\n\
         created, enslaved and deleted; /dev and /run are scratch directories.\n"
    );

    let floor_lab = Lab::new()?;
    let floor = floor_lab.ip_batch(&create)? + floor_lab.ip_batch(&delete)?;
    drop(floor_lab);

    let lab = Lab::new()?;
    let daemon = lab.start_uevd(uevd, &[])?;
    wait_quiet(Duration::from_secs(60));
    let t = Instant::now();
    lab.ip_batch(&create)?;
    let created_ifaces = lab.interfaces()?.len();
    lab.ip_batch(&delete)?;
    lab.settle(uevd)?;
    let total = t.elapsed();
    let cpu = daemon.cpu_seconds()?;
    let rss = daemon.peak_rss_kib();
    let status = lab.status(uevd)?;
    daemon.stop(&lab)?;
    let journal = Journal::load(&lab.run().join("uevd/timeline.jsonl"))?;
    let kernel_events = journal
        .events
        .iter()
        .filter(|e| e.source == "kernel")
        .count();
    let errors = journal.events.iter().filter(|e| e.result != "ok").count();
    let lat_us = latencies(&journal);
    let lat = summarize(&lat_us, auto_bin(&lat_us)).ok_or_else(|| io::Error::other("no events"))?;
    let p99 = quantile(&lat_us, 0.99).unwrap_or(lat.max);
    println!("interfaces at the peak      {created_ifaces}");
    println!("events processed            {kernel_events} ({errors} failed)");
    println!(
        "per-event latency (µs)      mean {:.1}  median {:.1}  p99 {:.1}  max {:.1}",
        lat.mean, lat.median, p99, lat.max
    );
    println!("kernel alone (no manager)   {:.3} s", floor.as_secs_f64());
    println!(
        "with uevd, until settled    {:.3} s  ({:.2}× the kernel alone)",
        total.as_secs_f64(),
        total.as_secs_f64() / floor.as_secs_f64()
    );
    println!(
        "uevd CPU                    {:.3} s  ({:.1} µs per event), peak RSS {} KiB",
        cpu,
        cpu * 1e6 / kernel_events.max(1) as f64,
        rss
    );
    println!(
        "left behind                 {} database entries, queue {}",
        lab.db_ids().len(),
        if lab.run().join("udev/queue").exists() {
            "busy"
        } else {
            "empty"
        }
    );
    let pending = status
        .iter()
        .find(|(k, _)| k == "pending")
        .map(|(_, v)| v.as_str());
    if pending != Some("0") || errors > 0 || !lab.db_ids().is_empty() {
        return Err(io::Error::other("the demo did not end clean"));
    }
    Ok(())
}

struct Run {
    wall: Duration,
    cpu: f64,
    events: usize,
}

fn run_floor(pairs: usize) -> io::Result<Duration> {
    let lab = Lab::new()?;
    wait_quiet(Duration::from_secs(120));
    lab.ip_batch(&veth_pairs("v", pairs))
}

fn run_uevd(uevd: &Path, pairs: usize) -> io::Result<Run> {
    let lab = Lab::new()?;
    let daemon = lab.start_uevd(uevd, &[])?;
    wait_quiet(Duration::from_secs(120));
    let t = Instant::now();
    lab.ip_batch(&veth_pairs("v", pairs))?;
    lab.settle(uevd)?;
    let wall = t.elapsed();
    let cpu = daemon.cpu_seconds()?;
    daemon.stop(&lab)?;
    let journal = Journal::load(&lab.run().join("uevd/timeline.jsonl"))?;
    let expected = lab.interfaces()?.len() - 1; // not lo
    let in_db = lab.db_ids().iter().filter(|i| i.starts_with('n')).count();
    if in_db != expected {
        return Err(io::Error::other(format!(
            "{in_db} interfaces in the database, {expected} exist"
        )));
    }
    Ok(Run {
        wall,
        cpu,
        events: journal.events.len(),
    })
}

fn bench(uevd: &Path, counts: &[usize], runs: usize) -> io::Result<()> {
    println!("uevd netns benchmark: N interfaces (N/2 veth pairs) created by `ip -batch`, median of {runs} runs");
    println!("floor = the kernel alone, no listener; uevd = from the first `ip` command until `uevd settle` returns\n");
    println!(
        "{:>7} {:>8} {:>10} {:>10} {:>11} {:>9} {:>13}",
        "N", "events", "floor s", "uevd s", "uevd/floor", "uevd CPU s", "CPU µs/event"
    );
    let mut per_event = Vec::new();
    for &n in counts {
        let pairs = n / 2;
        let mut floors = Vec::new();
        let mut walls = Vec::new();
        let mut cpus = Vec::new();
        let mut events = 0;
        for _ in 0..runs {
            floors.push(run_floor(pairs)?.as_secs_f64());
            let r = run_uevd(uevd, pairs)?;
            walls.push(r.wall.as_secs_f64());
            cpus.push(r.cpu);
            events = r.events;
        }
        let (f, w, c) = (median(floors), median(walls), median(cpus));
        let us = c * 1e6 / events.max(1) as f64;
        per_event.push((n, us));
        println!(
            "{n:>7} {events:>8} {f:>10.3} {w:>10.3} {:>11.3} {c:>9.3} {us:>13.1}",
            w / f
        );
    }
    if let (Some(first), Some(last)) = (per_event.first(), per_event.last()) {
        if first.0 != last.0 {
            println!(
                "\nCPU per event at N={} is {:.2}× the cost at N={}",
                last.0,
                last.1 / first.1,
                first.0
            );
        }
    }
    Ok(())
}

/// Reads every device's `uevent` file, as `mdev -s` does: the least any
/// coldplug can cost. `sys` is the lab's sysfs, seen from outside.
fn read_walk(sys: &Path) -> io::Result<Duration> {
    let t = Instant::now();
    let sysfs = uevd_sysfs::Sysfs::new(sys);
    let mut bytes = 0;
    uevd_sysfs::walk_devices(&sysfs, |v| {
        bytes += std::fs::read(v.path.join("uevent")).map_or(0, |b| b.len());
    })?;
    std::hint::black_box(bytes);
    Ok(t.elapsed())
}

/// Coldplug of N existing interfaces: reading uevent files against asking
/// the kernel to resend, with the kernel-only floors beside them.
fn coldplug(uevd: &Path, counts: &[usize], runs: usize) -> io::Result<()> {
    println!("coldplug of N existing interfaces (N/2 veth pairs), median of {runs} runs");
    println!("trigger floor = writing `add` into every uevent file with nobody listening;");
    println!("read floor = reading every uevent file; uevd = from start until settle returns\n");
    println!(
        "{:>7} {:>13} {:>10} {:>11} {:>14} {:>12}",
        "N", "trigger floor", "read floor", "uevd read", "uevd trigger", "read/trigger"
    );
    for &n in counts {
        let lab = Lab::new()?;
        lab.ip_batch(&veth_pairs("c", n / 2))?;
        let (mut tf, mut rf, mut ur, mut ut) = (vec![], vec![], vec![], vec![]);
        for _ in 0..runs {
            let t = Instant::now();
            let out = lab.uevd(uevd, &["trigger", "--type", "all", "--action", "add"])?;
            if !out.status.success() {
                return Err(io::Error::other("trigger failed"));
            }
            tf.push(t.elapsed().as_secs_f64());
            rf.push(read_walk(&lab.outside(Path::new("/sys")))?.as_secs_f64());
            for (how, into) in [("read", &mut ur), ("trigger", &mut ut)] {
                let _ = std::fs::remove_dir_all(lab.run().join("udev"));
                wait_quiet(Duration::from_secs(60));
                let t = Instant::now();
                let d = lab.start_uevd(uevd, &["--coldplug", how, "--timeline", "none"])?;
                lab.settle(uevd)?;
                into.push(t.elapsed().as_secs_f64());
                d.stop(&lab)?;
            }
        }
        let (tf, rf, ur, ut) = (median(tf), median(rf), median(ur), median(ut));
        println!(
            "{n:>7} {tf:>13.3} {rf:>10.3} {ur:>11.3} {ut:>14.3} {:>12.2}",
            ur / ut
        );
    }
    Ok(())
}

/// Coldplug over a fake sysfs tree of N character devices (node, link and
/// database entry each), to show the cost per device does not grow with N.
/// Every fake device wants /dev/fake/contended; names ending in an odd
/// digit at priority 1, in 5 at priority 2, the rest at 0.
const CONTENDED_RULES: &str = "SUBSYSTEM==\"fake\", SYMLINK+=\"fake/contended\"\n\
SUBSYSTEM==\"fake\", KERNEL==\"*[13579]\", OPTIONS+=\"link_priority=1\"\n\
SUBSYSTEM==\"fake\", KERNEL==\"*5\", OPTIONS+=\"link_priority=2\"\n";

fn scale(uevd: &Path, counts: &[usize], contended: bool) -> io::Result<()> {
    println!("coldplug over a fake sysfs of N character devices: node, MAJ:MIN link and database entry each");
    if contended {
        println!("and one link that every device claims (3 priorities): the owner changes hands N/5 times or more");
    }
    println!();
    println!(
        "{:>8} {:>10} {:>10} {:>11} {:>12} {:>13}",
        "N", "read floor", "uevd s", "uevd/floor", "uevd CPU s", "CPU µs/device"
    );
    let mut first: Option<f64> = None;
    for &n in counts {
        let lab = Lab::new()?;
        if contended {
            std::fs::write(lab.rules_dir().join("50-contended.rules"), CONTENDED_RULES)?;
        }
        let sys_inside = lab.root().join("run/fakesys");
        uevd_lab::fake_sysfs(&lab.outside(&sys_inside), n)?;
        let sys = sys_inside.display().to_string();
        wait_quiet(Duration::from_secs(60));
        let floor = read_walk(&lab.outside(&sys_inside))?.as_secs_f64();
        let t = Instant::now();
        let d = lab.start_uevd_with(
            uevd,
            &["--sys", &sys],
            &["--coldplug", "--timeline", "none"],
        )?;
        lab.settle(uevd)?;
        let wall = t.elapsed().as_secs_f64();
        let cpu = d.cpu_seconds()?;
        d.stop(&lab)?;
        let made = std::fs::read_dir(lab.dev().join("fake"))?
            .flatten()
            .filter(|e| e.file_name() != "contended")
            .count();
        if contended {
            let owner = std::fs::read_link(lab.dev().join("fake/contended"))?;
            if !owner.to_string_lossy().ends_with('5') {
                return Err(io::Error::other(format!(
                    "the contended link went to {} instead of a priority-2 device",
                    owner.display()
                )));
            }
        }
        if made != n {
            return Err(io::Error::other(format!(
                "{made} nodes made for {n} devices"
            )));
        }
        let per = cpu * 1e6 / n as f64;
        println!(
            "{n:>8} {floor:>10.3} {wall:>10.3} {:>11.2} {cpu:>12.3} {per:>13.1}",
            wall / floor
        );
        match first {
            None => first = Some(per),
            Some(f) => println!(
                "{:>8} CPU per device is {:.2}× the first row's",
                "",
                per / f
            ),
        }
    }
    Ok(())
}

/// udev's stock rules as the lab extracted them, else the machine's.
fn stock_rules() -> PathBuf {
    let lab = Path::new("/var/cache/uevd-lab/stage/lib/udev/rules.d");
    if lab.is_dir() {
        lab.to_path_buf()
    } else {
        PathBuf::from("/usr/lib/udev/rules.d")
    }
}

/// Processing time (finished - started) per event kind, and its rules
/// step and builtins, in microseconds.
#[derive(Default)]
struct Kind {
    processing: Vec<f64>,
    rules: f64,
    builtins: f64,
}

fn budget(uevd: &Path, args: &[String]) -> io::Result<()> {
    let rules = arg(args, "--rules").map_or_else(stock_rules, PathBuf::from);
    let num = |name: &str, default: usize| {
        arg(args, name)
            .and_then(|n| n.parse().ok())
            .unwrap_or(default)
    };
    let (pairs, loops, runs) = (num("--pairs", 500), num("--loops", 100), num("--runs", 3));
    let first_loop = 3000 + (std::process::id() % 1000) as i32;
    let me = std::env::current_exe()?;
    let mut kinds: std::collections::BTreeMap<(String, String), Kind> = Default::default();
    let mut cpu_per_event = Vec::new();
    for run in 0..runs {
        let lab = Lab::new()?;
        for e in std::fs::read_dir(&rules)? {
            let e = e?;
            if e.file_name().to_string_lossy().ends_with(".rules") {
                std::fs::copy(e.path(), lab.rules_dir().join(e.file_name()))?;
            }
        }
        // The budget adds up every event's rules step and builtins.
        let daemon = lab.start_uevd(uevd, &["--timeline-steps", "all"])?;
        wait_quiet(Duration::from_secs(60));
        lab.ip_batch(&veth_pairs("b", pairs))?;
        for i in 0..loops as i32 {
            let out = lab
                .command(&me)
                .args(["loop-add", &(first_loop + i).to_string()])
                .output()?;
            if !out.status.success() {
                return Err(io::Error::other(format!(
                    "loop-add: {}",
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
        }
        lab.settle(uevd)?;
        lab.ip_batch(&delete_veth_pairs("b", pairs))?;
        for i in 0..loops as i32 {
            lab.command(&me)
                .args(["loop-remove", &(first_loop + i).to_string()])
                .output()?;
        }
        lab.settle(uevd)?;
        let cpu = daemon.cpu_seconds()?;
        daemon.stop(&lab)?;
        let path = lab.run().join("uevd/timeline.jsonl");
        let journal = Journal::load(&path)?;
        cpu_per_event.push(cpu * 1e6 / journal.events.len().max(1) as f64);
        for e in &journal.events {
            let k = kinds
                .entry((e.subsystem.clone(), e.action.clone()))
                .or_default();
            k.processing
                .push(e.finished.saturating_sub(e.started) as f64 / 1000.0);
            k.rules += e
                .steps
                .iter()
                .filter(|s| s.0 == "rules")
                .map(|s| s.2 as f64 / 1000.0)
                .sum::<f64>();
            k.builtins += e.builtins.iter().map(|b| b.3 as f64 / 1000.0).sum::<f64>();
        }
        if run + 1 == runs {
            if let Some(keep) = arg(args, "--journal") {
                std::fs::copy(&path, keep)?;
            }
        }
    }
    println!(
        "uevd per-event budget: {pairs} veth pairs and {loops} loop devices added and removed, \
         rules from {}, {runs} runs",
        rules.display()
    );
    println!("processing = finished - started, from the journal; µs\n");
    println!(
        "{:<10} {:<7} {:>7} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9}",
        "subsystem", "action", "events", "mean", "median", "p99", "max", "rules", "builtins"
    );
    for ((subsystem, action), k) in &kinds {
        let Some(s) = summarize(&k.processing, auto_bin(&k.processing)) else {
            continue;
        };
        let p99 = quantile(&k.processing, 0.99).unwrap_or(s.max);
        let total: f64 = k.processing.iter().sum();
        println!(
            "{subsystem:<10} {action:<7} {:>7} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>6.0}% {:>8.0}%",
            s.n,
            s.mean,
            s.median,
            p99,
            s.max,
            k.rules * 100.0 / total.max(f64::MIN_POSITIVE),
            k.builtins * 100.0 / total.max(f64::MIN_POSITIVE),
        );
    }
    if let Some(c) = summarize(&cpu_per_event, auto_bin(&cpu_per_event)) {
        println!(
            "\nuevd CPU per event (all threads, the daemon's whole life): median {:.1} µs over {runs} runs",
            c.median
        );
    }
    Ok(())
}
