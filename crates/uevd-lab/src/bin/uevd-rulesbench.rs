//! The rules engine's cost per event.
//!
//! 1. Throughput: every device of this machine's sysfs (real `add` events,
//!    read from the devices' uevent files) through a whole rule set
//!    (default: udev's stock rules as the lab extracted them, else the
//!    machine's own), R rounds; events per second and µs per event.
//! 2. Scale in rules: the same events through 10 and through 1,000
//!    generated rules files of the usual shapes; µs per event side by side.
//!
//! Test mode: nothing is written, and programs (PROGRAM, IMPORT{program})
//! do not run, so that the figures are the engine's own.
//!
//! usage: uevd-rulesbench [--rules DIR]... [--rounds R]

use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;
use uevd_report::stats::{auto_bin, summarize};
use uevd_rules::{Config, Event, NoStore, Rules};
use uevd_sysfs::{walk_devices, Device, Sysfs};
use uevd_uevent::{Action, Uevent};

fn default_rules() -> Vec<PathBuf> {
    [
        "/var/cache/uevd-lab/stage/lib/udev/rules.d",
        "/usr/lib/udev/rules.d",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| p.is_dir())
    .take(1)
    .collect()
}

/// Rules files of the shapes stock rules have: a subsystem and name
/// match, a parent attribute, a property test, a GOTO over a block.
fn generated_rules(dir: &std::path::Path, files: usize) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for i in 0..files {
        let text = format!(
            "SUBSYSTEM==\"block\", KERNEL==\"zz{i}*\", ENV{{ID_GEN_{i}}}=\"1\"\n\
             SUBSYSTEM==\"net\", ACTION==\"add\", ATTR{{address}}==\"02:00:00:00:{a:02x}:{b:02x}\", NAME=\"gen{i}\"\n\
             SUBSYSTEM==\"usb\", ATTRS{{idVendor}}==\"{i:04x}\", MODE=\"0660\"\n\
             ACTION!=\"add\", GOTO=\"gen_{i}_end\"\n\
             KERNEL==\"ttyGEN{i}\", GROUP=\"20\", SYMLINK+=\"gen/{i}\"\n\
             ENV{{ID_GEN_MARK_{i}}}==\"1\", TAG+=\"gen\"\n\
             LABEL=\"gen_{i}_end\"\n",
            a = i / 256,
            b = i % 256
        );
        std::fs::write(dir.join(format!("{:05}-gen.rules", i)), text)?;
    }
    Ok(())
}

/// Every `rules.d` directory below `dir`.
fn rules_dirs_below(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            if p.file_name().is_some_and(|n| n == "rules.d") {
                out.push(p.clone());
            }
            rules_dirs_below(&p, out);
        }
    }
}

/// µs per event for each round of running `events` through `rules`.
fn rounds(rules: &Rules, sysfs: &Sysfs, events: &[Uevent], n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let start = Instant::now();
            for ev in events {
                let device = Rc::new(Device::from_event(sysfs, ev.clone()));
                let out = rules.apply(
                    Event {
                        device,
                        previous: None,
                        test: true,
                        trace: false,
                    },
                    &NoStore,
                );
                std::hint::black_box(out);
            }
            start.elapsed().as_secs_f64() * 1e6 / events.len().max(1) as f64
        })
        .collect()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut dirs = Vec::new();
    let mut n_rounds = 5;
    let mut i = 0;
    while i < args.len() {
        match (args[i].as_str(), args.get(i + 1)) {
            ("--rules", Some(d)) => dirs.push(PathBuf::from(d)),
            ("--rounds", Some(r)) => n_rounds = r.parse().unwrap_or(5),
            _ => {
                eprintln!("usage: uevd-rulesbench [--rules DIR]... [--rounds R]");
                return ExitCode::from(2);
            }
        }
        i += 2;
    }
    if dirs.is_empty() {
        dirs = default_rules();
    }
    let sysfs = Sysfs::new("/sys");
    let mut events = Vec::new();
    let walked = walk_devices(&sysfs, |v| {
        if let Ok(ev) = sysfs.read_event(Action::Add, v.devpath) {
            events.push(ev);
        }
    });
    if let Err(e) = walked {
        eprintln!("cannot read /sys: {e}");
        return ExitCode::from(1);
    }
    let base = Config {
        programs: false,
        ..Config::default()
    };
    println!("# uevd rules engine, {} real add events from /sys, {n_rounds} rounds, test mode, no programs", events.len());
    println!();
    println!("| rule set | files | rules | µs/event (median) | stddev | events/s |");
    println!("|---|---:|---:|---:|---:|---:|");
    let row = |name: &str, config: &Config| {
        let (rules, _) = Rules::load(config);
        // A first pass fills the per-kind line index and the page cache.
        rounds(&rules, &sysfs, &events, 1);
        let per = rounds(&rules, &sysfs, &events, n_rounds);
        let s = summarize(&per, auto_bin(&per)).expect("rounds ran");
        println!(
            "| {name} | {} | {} | {:.1} | {} | {:.0} |",
            rules.file_count(),
            rules.line_count(),
            s.median,
            s.stddev.map_or("-".into(), |sd| format!("{sd:.1}")),
            1e6 / s.median
        );
        s.median
    };
    if !dirs.is_empty() {
        let label = dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(" ");
        row(
            &label,
            &Config {
                dirs: dirs.clone(),
                ..base.clone()
            },
        );
    }
    // Every Debian package's rules at once, as scripts/rules-corpus
    // fetched them: the largest real rule set there is.
    let corpus = PathBuf::from(
        std::env::var_os("UEVD_RULES_CORPUS")
            .unwrap_or_else(|| "/var/cache/uevd-rules-corpus".into()),
    )
    .join("rules");
    let mut corpus_dirs = Vec::new();
    rules_dirs_below(&corpus, &mut corpus_dirs);
    if !corpus_dirs.is_empty() {
        corpus_dirs.sort();
        row(
            "Debian's rules corpus (scripts/rules-corpus)",
            &Config {
                dirs: corpus_dirs,
                ..base.clone()
            },
        );
    }
    let tmp = std::env::temp_dir().join(format!("uevd-rulesbench.{}", std::process::id()));
    let mut medians = Vec::new();
    for files in [10, 1000] {
        let dir = tmp.join(files.to_string());
        if let Err(e) = generated_rules(&dir, files) {
            eprintln!("{}: {e}", dir.display());
            return ExitCode::from(1);
        }
        medians.push(row(
            &format!("generated, {files} files"),
            &Config {
                dirs: vec![dir],
                ..base.clone()
            },
        ));
    }
    let _ = std::fs::remove_dir_all(&tmp);
    println!();
    println!(
        "1,000 files cost {:.2}x what 10 files cost per event (100x the rules).",
        medians[1] / medians[0]
    );
    ExitCode::SUCCESS
}
