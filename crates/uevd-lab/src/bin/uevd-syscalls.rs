//! System calls per event, uevd against systemd-udevd, on one workload.
//!
//! Each manager runs under `strace -f`, in turn, in a scratch namespace
//! with udev's stock rules (uevd_lab::side). The workload
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
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use uevd_lab::side::{
    self, loop_add_fresh, loop_ctl, loop_numbers, median, now, Manager, Scratch, UdevRoot, Uevents,
};
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

struct Config {
    udev: UdevRoot,
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
    let Some(managers) = side::managers(&args) else {
        return usage();
    };
    let cfg = Config {
        udev: UdevRoot::from_args(&args),
        count: side::number(&args, "--count", 20),
        runs: side::number(&args, "--runs", 3),
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
    cfg.udev.check()?;
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

fn one_run(cfg: &Config, manager: &Manager, run: usize) -> io::Result<Vec<PhaseCount>> {
    let lab = Lab::new()?;
    let scratch = Scratch::new(&lab, &cfg.udev)?;
    let trace = lab.root().join("trace");
    let strace: Vec<String> = ["strace", "-f", "-ttt", "-qq", "-o"]
        .iter()
        .map(|s| s.to_string())
        .chain([trace.display().to_string(), "--".into()])
        .collect();
    let running = side::start(
        &scratch,
        manager,
        &cfg.udev,
        &strace,
        &lab.root().join("manager.log"),
    )?;
    let uevents = Uevents::open(&scratch)?;
    let settle = || running.settle();
    settle()?;
    uevents.drain()?;
    let loops = loop_numbers(cfg.count);
    let mut bounds = Vec::new();
    let mut events = Vec::new();
    for phase in PHASES {
        let start = now();
        match phase {
            "loop add" => loops.clone().try_for_each(loop_add_fresh)?,
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
    running.stop()?;
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

/// One line of `strace -f -ttt`: "PID SECONDS.MICROS name(args) = ret",
/// the PID padded to a column (`3017  1796677035.315523 brk(NULL) = ...`).
/// A call split by another thread's is counted once, at its resumption.
fn parse_line(line: &str) -> Option<Call<'_>> {
    let (_pid, rest) = line.trim_start().split_once(' ')?;
    let (time, rest) = rest.trim_start().split_once(' ')?;
    let time: f64 = time.parse().ok()?;
    let rest = rest.trim_start();
    if rest.ends_with("<unfinished ...>") || rest.starts_with("+++") || rest.starts_with("---") {
        return None;
    }
    let name = if let Some(r) = rest.strip_prefix("<... ") {
        r.split(' ').next()?
    } else {
        rest.split('(').next()?
    };
    let ret = rest.rsplit_once(" = ")?.1;
    let errno = ret
        .strip_prefix("-1 ")
        .and_then(|e| e.split(' ').next())
        .filter(|e| e.starts_with('E'));
    Some(Call { time, name, errno })
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

    #[test]
    fn strace_pads_the_pid_to_a_column() {
        let c = parse_line("3017  1796677035.316208 brk(NULL)       = 0x558519d1c000").unwrap();
        assert_eq!((c.name, c.errno, c.time), ("brk", None, 1796677035.316208));
        let c = parse_line(
            "901   1796677035.5 statx(5, \"x\", AT_SYMLINK_NOFOLLOW, STATX_TYPE, 0x7ff) = -1 ENOENT (No such file or directory)",
        )
        .unwrap();
        assert_eq!((c.name, c.errno), ("statx", Some("ENOENT")));
    }
}
