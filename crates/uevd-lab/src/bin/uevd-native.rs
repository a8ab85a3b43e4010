//! What a device manager costs natively, uevd against systemd-udevd, side
//! by side in one run, on the host's real kernel with udev's stock rules.
//!
//! The workload: N loop devices added, each attached to an ext4 image of
//! its own (label, UUID) and announced again, detached and removed, then N veth pairs added
//! and removed; each phase followed by the manager's own settle. Each
//! manager runs in turn in a scratch namespace (uevd_lab::side); the same
//! workload runs once with no manager at all, the kernel's own cost.
//! Measured per phase: the manager's CPU (its process tree: threads,
//! workers, the programs its rules run), the whole machine's busy CPU,
//! and the wall time until settle returns; divided by the kernel uevents
//! of the phase, counted on a netlink socket of the bench's own. After
//! the attach phase each manager's links to the loop devices and their
//! database records are kept, and the two are compared at the end.
//!
//! usage: uevd-native [--uevd PATH] [--baseline PATH] [--udev-root DIR]
//!                    [--count N] [--runs R] [--only uevd|udevd] [--no-floor]

use std::collections::BTreeMap;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};
use uevd_lab::side::{
    self, loop_add_fresh, loop_ctl, loop_numbers, machine_busy_seconds, median, tree_cpu_seconds,
    Manager, Scratch, UdevRoot, Uevents,
};
use uevd_lab::{delete_veth_pairs, veth_pairs, Lab};

const PHASES: [&str; 6] = [
    "loop add",
    "attach",
    "detach",
    "loop remove",
    "veth add",
    "veth remove",
];

/// The phase after which what each manager made is compared.
const SNAPSHOT_AFTER: &str = "attach";

fn usage() -> ExitCode {
    eprintln!(
        "usage: uevd-native [--uevd PATH] [--baseline PATH] [--udev-root DIR] [--count N] \
         [--runs R] [--only uevd|udevd] [--no-floor]"
    );
    ExitCode::from(2)
}

/// A column of the table: a manager, or the kernel alone.
#[derive(Clone, PartialEq)]
enum Column {
    Manager(Manager),
    Floor,
}

impl Column {
    fn name(&self) -> &'static str {
        match self {
            Column::Manager(m) => m.name(),
            Column::Floor => "kernel only",
        }
    }
}

struct Config {
    udev: UdevRoot,
    count: usize,
    runs: usize,
    columns: Vec<Column>,
}

/// One phase of one run.
#[derive(Default, Clone, Copy)]
struct Phase {
    events: u64,
    wall: f64,
    manager_cpu: f64,
    machine_cpu: f64,
}

/// What a manager made of the loop devices: link -> target, and each
/// device's database record, less what differs between any two runs.
#[derive(Default, Clone, PartialEq)]
struct Made {
    links: BTreeMap<String, String>,
    records: BTreeMap<String, Vec<String>>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return usage();
    }
    let Some(managers) = side::managers(&args) else {
        return usage();
    };
    let mut columns: Vec<Column> = managers.into_iter().map(Column::Manager).collect();
    if !args.iter().any(|a| a == "--no-floor") {
        columns.push(Column::Floor);
    }
    let cfg = Config {
        udev: UdevRoot::from_args(&args),
        count: side::number(&args, "--count", 200),
        runs: side::number(&args, "--runs", 3),
        columns,
    };
    match bench(&cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uevd-native: {e}");
            ExitCode::FAILURE
        }
    }
}

fn bench(cfg: &Config) -> io::Result<()> {
    cfg.udev.check()?;
    let images = tempdir()?;
    eprintln!("making {} ext4 images", cfg.count);
    let images_list = make_images(&images, cfg.count)?;
    // runs[column][run][phase]
    let mut results: Vec<Vec<Vec<Phase>>> = vec![Vec::new(); cfg.columns.len()];
    let mut made: Vec<Option<Made>> = vec![None; cfg.columns.len()];
    for run in 0..cfg.runs {
        for (c, column) in cfg.columns.iter().enumerate() {
            eprintln!("run {} of {}: {}", run + 1, cfg.runs, column.name());
            uevd_lab::wait_quiet(Duration::from_secs(10));
            let (phases, m) = one_run(cfg, column, &images_list)?;
            results[c].push(phases);
            if made[c].is_none() {
                made[c] = m;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&images);
    print_tables(cfg, &results);
    compare(cfg, &made);
    Ok(())
}

fn tempdir() -> io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("uevd-native.{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// One small ext4 image per loop device, each with its own label and UUID.
fn make_images(dir: &Path, count: usize) -> io::Result<Vec<PathBuf>> {
    (0..count)
        .map(|i| {
            let path = dir.join(format!("img{i}"));
            let uuid = format!("6e617469-7665-4000-8000-{i:012x}");
            let out = Command::new("mke2fs")
                .args(["-q", "-F", "-t", "ext4", "-L"])
                .arg(format!("native{i}"))
                .args(["-U", &uuid])
                .arg(&path)
                .arg("2M")
                .output()?;
            if !out.status.success() {
                return Err(io::Error::other(format!(
                    "mke2fs failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
            Ok(path)
        })
        .collect()
}

const LOOP_SET_FD: libc::c_ulong = 0x4C00;
const LOOP_CLR_FD: libc::c_ulong = 0x4C01;

/// Attaches loop device `n` to `image`, or detaches it.
fn loop_bind(n: usize, image: Option<&Path>) -> io::Result<()> {
    let dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/dev/loop{n}"))?;
    // SAFETY: LOOP_SET_FD takes a file descriptor, LOOP_CLR_FD nothing;
    // neither takes a pointer.
    let r = unsafe {
        match image {
            Some(image) => {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(image)?;
                libc::ioctl(dev.as_raw_fd(), LOOP_SET_FD as _, file.as_raw_fd())
            }
            None => libc::ioctl(dev.as_raw_fd(), LOOP_CLR_FD as _, 0),
        }
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What devtmpfs does for the machine's /dev, for the scratch /dev: the
/// node of a new loop device, root's and private until the manager's
/// rules say otherwise. systemd-udevd creates no nodes; uevd finds this
/// one in place as it would under devtmpfs.
fn devtmpfs_node(scratch: &Scratch, n: usize) -> io::Result<()> {
    let dev = std::fs::read_to_string(format!("/sys/class/block/loop{n}/dev"))?;
    let (major, minor) = dev
        .trim()
        .split_once(':')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .ok_or_else(|| io::Error::other(format!("loop{n}: bad dev {dev:?}")))?;
    let path = scratch.outside(&format!("/dev/loop{n}"));
    match rustix::fs::mknodat(
        rustix::fs::CWD,
        &path,
        rustix::fs::FileType::BlockDevice,
        rustix::fs::Mode::from_raw_mode(0o600),
        rustix::fs::makedev(major, minor),
    ) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The machine's /dev/loopN appears shortly after the kernel adds the
/// device (devtmpfs); and a loop device the manager still holds open is
/// not removed at once. Either is retried for a while.
fn retry(what: impl Fn() -> io::Result<()>) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match what() {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn one_run(
    cfg: &Config,
    column: &Column,
    images: &[PathBuf],
) -> io::Result<(Vec<Phase>, Option<Made>)> {
    let lab = Lab::new()?;
    let scratch = Scratch::new(&lab, &cfg.udev)?;
    let running = match column {
        Column::Manager(m) => Some(side::start(
            &scratch,
            m,
            &cfg.udev,
            &[],
            &lab.root().join("manager.log"),
        )?),
        Column::Floor => None,
    };
    let pid = running.as_ref().map(|r| r.child.id());
    let settle = || running.as_ref().map_or(Ok(()), |r| r.settle());
    let uevents = Uevents::open(&scratch)?;
    settle()?;
    uevents.drain()?;
    let loops = loop_numbers(cfg.count);
    let mut phases = Vec::new();
    let mut made = None;
    for phase in PHASES {
        let cpu0 = pid.map_or(0.0, tree_cpu_seconds);
        let busy0 = machine_busy_seconds();
        let start = Instant::now();
        match phase {
            "loop add" => loops.clone().try_for_each(|n| {
                loop_add_fresh(n)?;
                devtmpfs_node(&scratch, n)
            })?,
            // The kernel announces the attached device before it has
            // set its size: a manager quick to look finds it empty. The
            // change asked for after (as `udevadm trigger` would) is seen
            // with the image in place by every manager.
            "attach" => loops.clone().zip(images).try_for_each(|(n, img)| {
                retry(|| loop_bind(n, Some(img)))?;
                std::fs::write(format!("/sys/class/block/loop{n}/uevent"), "change")
            })?,
            "detach" => loops.clone().try_for_each(|n| loop_bind(n, None))?,
            "loop remove" => loops.clone().try_for_each(|n| {
                retry(|| loop_ctl(false, n))?;
                let _ = std::fs::remove_file(scratch.outside(&format!("/dev/loop{n}")));
                Ok::<(), io::Error>(())
            })?,
            "veth add" => {
                lab.ip_batch(&veth_pairs("n", cfg.count))?;
            }
            "veth remove" => {
                lab.ip_batch(&delete_veth_pairs("n", cfg.count))?;
            }
            _ => unreachable!(),
        }
        settle()?;
        let wall = start.elapsed().as_secs_f64();
        // With nobody listening, the kernel's work is done when the
        // workload returns; a moment for its deferred work to show.
        if running.is_none() {
            std::thread::sleep(Duration::from_millis(300));
        }
        phases.push(Phase {
            events: uevents.drain()?,
            wall,
            manager_cpu: pid.map_or(0.0, tree_cpu_seconds) - cpu0,
            machine_cpu: machine_busy_seconds() - busy0,
        });
        if phase == SNAPSHOT_AFTER && running.is_some() {
            made = Some(snapshot(&scratch, loops.clone())?);
        }
    }
    if let Some(r) = running {
        r.stop()?;
    }
    Ok((phases, made))
}

/// Lines of a database record that differ between any two runs.
const VOLATILE: [&str; 5] = [
    "I:",
    "V:",
    "E:USEC_INITIALIZED=",
    "E:DISKSEQ=",
    "S:disk/by-diskseq/",
];

fn snapshot(scratch: &Scratch, loops: std::ops::Range<usize>) -> io::Result<Made> {
    let mut made = Made::default();
    let names: Vec<String> = loops.map(|n| format!("loop{n}")).collect();
    let disk = scratch.outside("/dev/disk");
    let mut stack = vec![disk.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path)?.display().to_string();
                let name = target.rsplit('/').next().unwrap_or("");
                let rel = path.strip_prefix(&disk).unwrap_or(&path);
                // by-diskseq names differ between any two runs.
                if names.iter().any(|n| n == name) && !rel.starts_with("by-diskseq") {
                    made.links.insert(format!("disk/{}", rel.display()), target);
                }
            }
        }
    }
    for name in &names {
        let dev = std::fs::read_to_string(format!("/sys/class/block/{name}/dev"))?;
        let record = scratch.outside(&format!("/run/udev/data/b{}", dev.trim()));
        let text = std::fs::read_to_string(&record).unwrap_or_default();
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| !VOLATILE.iter().any(|v| l.starts_with(v)))
            .map(str::to_owned)
            .collect();
        lines.sort();
        made.records.insert(name.clone(), lines);
    }
    Ok(made)
}

fn per_event(x: f64, events: u64) -> f64 {
    if events == 0 {
        0.0
    } else {
        x / events as f64
    }
}

/// One figure of a phase.
type Measure = dyn Fn(&Phase) -> f64;

fn print_tables(cfg: &Config, results: &[Vec<Vec<Phase>>]) {
    println!(
        "{} loop devices (ext4) and {} veth pairs, udev's stock rules, median of {} runs",
        cfg.count, cfg.count, cfg.runs
    );
    let med = |c: usize, p: usize, f: &dyn Fn(&Phase) -> f64| -> f64 {
        median(results[c].iter().map(|r| f(&r[p])).collect())
    };
    let udevd = cfg
        .columns
        .iter()
        .position(|c| *c == Column::Manager(Manager::Udevd));
    let tables: [(&str, &Measure); 3] = [
        (
            "manager CPU per event, ms (its processes: threads, workers, programs)",
            &|p| per_event(p.manager_cpu * 1e3, p.events),
        ),
        (
            "machine CPU per event, ms (every CPU busy, kernel included)",
            &|p| per_event(p.machine_cpu * 1e3, p.events),
        ),
        ("wall until settle, s", &|p| p.wall),
    ];
    for (title, f) in tables {
        println!("\n{title}");
        print!("{:<12} {:>7}", "phase", "events");
        for c in &cfg.columns {
            print!(" {:>16}", c.name());
        }
        if udevd.is_some() {
            print!(" {:>12}", "uevd/udevd");
        }
        println!();
        let mut sums = vec![0.0; cfg.columns.len()];
        for (p, phase) in PHASES.iter().enumerate() {
            let events = med(0, p, &|x| x.events as f64);
            print!("{phase:<12} {events:>7}");
            for (c, sum) in sums.iter_mut().enumerate() {
                let v = med(c, p, f);
                *sum += v * if title.starts_with("wall") {
                    1.0
                } else {
                    events
                };
                print!(" {v:>16.3}");
            }
            if let (Some(u), Some(me)) = (udevd, uevd_column(cfg)) {
                let (a, b) = (med(me, p, f), med(u, p, f));
                print!(" {:>12}", ratio(a, b));
            }
            println!();
        }
        let events: f64 = (0..PHASES.len())
            .map(|p| med(0, p, &|x| x.events as f64))
            .sum();
        print!("{:<12} {:>7}", "all", events);
        for sum in &sums {
            let v = if title.starts_with("wall") {
                *sum
            } else {
                sum / events.max(1.0)
            };
            print!(" {v:>16.3}");
        }
        if let (Some(u), Some(me)) = (udevd, uevd_column(cfg)) {
            print!(" {:>12}", ratio(sums[me], sums[u]));
        }
        println!();
    }
}

fn uevd_column(cfg: &Config) -> Option<usize> {
    cfg.columns
        .iter()
        .position(|c| matches!(c, Column::Manager(Manager::Uevd(_, "uevd"))))
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.3}x", a / b)
    } else {
        "-".into()
    }
}

/// Prints whether every manager made what the first one made.
fn compare(cfg: &Config, made: &[Option<Made>]) {
    let mut columns = cfg
        .columns
        .iter()
        .zip(made)
        .filter_map(|(c, m)| Some((c.name(), m.as_ref()?)));
    let Some((first, reference)) = columns.next() else {
        return;
    };
    println!(
        "\nafter '{SNAPSHOT_AFTER}': {first} made {} links to the loop devices and {} records",
        reference.links.len(),
        reference.records.values().filter(|r| !r.is_empty()).count()
    );
    for (name, m) in columns {
        if m == reference {
            println!("{name}: identical links and database records");
            continue;
        }
        let mut diffs: Vec<String> = Vec::new();
        for (link, target) in &reference.links {
            match m.links.get(link) {
                Some(t) if t == target => {}
                Some(t) => diffs.push(format!("{link}: {first} -> {target}, {name} -> {t}")),
                None => diffs.push(format!("{link}: only {first}'s")),
            }
        }
        for link in m.links.keys().filter(|l| !reference.links.contains_key(*l)) {
            diffs.push(format!("{link}: only {name}'s"));
        }
        for (dev, lines) in &reference.records {
            let other = m.records.get(dev).cloned().unwrap_or_default();
            for l in lines.iter().filter(|l| !other.contains(l)) {
                diffs.push(format!("{dev}: only {first}'s {l}"));
            }
            for l in other.iter().filter(|l| !lines.contains(l)) {
                diffs.push(format!("{dev}: only {name}'s {l}"));
            }
        }
        println!("{name}: {} differences", diffs.len());
        // The first few of links and of records alike.
        let (links, records): (Vec<&String>, Vec<&String>) =
            diffs.iter().partition(|d| d.starts_with("disk/"));
        for d in links.iter().take(10).chain(records.iter().take(20)) {
            println!("  {d}");
        }
    }
}
