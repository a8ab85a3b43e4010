//! What one hardware database look-up costs here, against asking systemd's
//! `systemd-hwdb query` (a process per look-up, as a rule running it as a
//! program would), in one run on the same keys and the same `hwdb.bin`.
//!
//! ```text
//! uevd-hwdbbench [--hwdb FILE] [--systemd-hwdb PROGRAM] [--sources DIR]
//!                [--keys FILE] [--forks N]
//! ```
//!
//! Keys default to the modaliases the lab guests reported; `--keys` reads
//! one per line. Answers are compared too: a bench of wrong answers is no
//! bench.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};
use uevd_hwdb::{Config, Database};

struct Args {
    hwdb: PathBuf,
    tool: PathBuf,
    sources: Option<PathBuf>,
    keys: Option<PathBuf>,
    forks: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        hwdb: PathBuf::from("/var/cache/uevd-lab/hwdb.bin"),
        tool: PathBuf::from("/var/cache/uevd-lab/stage/bin/systemd-hwdb"),
        sources: Some(PathBuf::from(
            "/var/cache/uevd-lab/hwdb-root/lib/udev/hwdb.d",
        )),
        keys: None,
        forks: 600,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--hwdb" => a.hwdb = PathBuf::from(value()?),
            "--systemd-hwdb" => a.tool = PathBuf::from(value()?),
            "--sources" => a.sources = Some(PathBuf::from(value()?)),
            "--keys" => a.keys = Some(PathBuf::from(value()?)),
            "--forks" => a.forks = value()?.parse().map_err(|e| format!("--forks: {e}"))?,
            "-h" | "--help" => {
                return Err(
                    "usage: uevd-hwdbbench [--hwdb FILE] [--systemd-hwdb PROGRAM] [--sources DIR] [--keys FILE] [--forks N]"
                        .into(),
                )
            }
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    Ok(a)
}

fn lab_keys() -> Vec<String> {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab/out");
    let mut keys = std::collections::BTreeSet::new();
    if let Ok(dirs) = std::fs::read_dir(&out) {
        for d in dirs.flatten() {
            if let Ok(t) = std::fs::read_to_string(d.path().join("modaliases.txt")) {
                keys.extend(t.lines().filter(|l| !l.is_empty()).map(str::to_string));
            }
        }
    }
    keys.insert("usb:v1D6Bp0002:xHCI Host Controller".into());
    keys.insert("usb:v0627p0001:QEMU USB Keyboard".into());
    keys.into_iter().collect()
}

fn answer(db: &Database, key: &str) -> Vec<String> {
    db.lookup(key.as_bytes())
        .map(|v| uevd_text::lines(&v))
        .unwrap_or_default()
}

fn per(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e6 / n.max(1) as f64
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let keys: Vec<String> = match &args.keys {
        Some(f) => match std::fs::read_to_string(f) {
            Ok(t) => t
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect(),
            Err(e) => {
                eprintln!("{}: {e}", f.display());
                return ExitCode::FAILURE;
            }
        },
        None => lab_keys(),
    };
    if keys.is_empty() {
        eprintln!("no keys (give --keys FILE)");
        return ExitCode::FAILURE;
    }
    let config = Config {
        binaries: vec![args.hwdb.clone()],
        source_dirs: Vec::new(),
    };

    let t = Instant::now();
    let db = match Database::load(&config) {
        Ok(db) => db,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let open = t.elapsed();

    // Warm the pages a look-up touches, then time rounds over all keys
    // for at least a second.
    for k in &keys {
        let _ = db.lookup(k.as_bytes());
    }
    let mut lookups = 0usize;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(1) {
        for k in &keys {
            std::hint::black_box(db.lookup(std::hint::black_box(k.as_bytes())).ok());
        }
        lookups += keys.len();
    }
    let ours = t.elapsed();

    // The builtin's way in: the shared handle's staleness check included.
    let shared = uevd_hwdb::Shared::new(config.clone(), Duration::from_secs(3));
    let _ = shared.get();
    let t = Instant::now();
    let mut shared_lookups = 0usize;
    while t.elapsed() < Duration::from_millis(500) {
        for k in &keys {
            let db = shared.get().expect("loaded once already");
            std::hint::black_box(db.lookup(k.as_bytes()).ok());
        }
        shared_lookups += keys.len();
    }
    let via_shared = t.elapsed();

    let compile = args.sources.as_ref().filter(|d| d.is_dir()).map(|d| {
        let t = Instant::now();
        let compiled = Database::load(&Config {
            binaries: Vec::new(),
            source_dirs: vec![d.clone()],
        });
        (t.elapsed(), compiled.is_ok())
    });

    println!("keys: {} (first: {})", keys.len(), keys[0]);
    println!(
        "uevd open+validate hwdb.bin: {:.0} µs",
        open.as_secs_f64() * 1e6
    );
    if let Some((d, ok)) = compile {
        println!(
            "uevd compile hwdb.d sources: {:.0} ms{}",
            d.as_secs_f64() * 1e3,
            if ok { "" } else { " (failed)" }
        );
    }
    let ours_us = per(ours, lookups);
    println!("uevd look-up: {ours_us:.2} µs ({lookups} look-ups)");
    println!(
        "uevd look-up through the shared handle: {:.2} µs",
        per(via_shared, shared_lookups)
    );

    if !args.tool.exists() {
        println!(
            "systemd-hwdb: {} not found, no comparison",
            args.tool.display()
        );
        return ExitCode::SUCCESS;
    }
    let root = std::env::temp_dir().join(format!("uevd-hwdbbench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(root.join("lib/udev"));
    let hwdb_abs = std::fs::canonicalize(&args.hwdb).unwrap_or(args.hwdb.clone());
    let _ = std::os::unix::fs::symlink(&hwdb_abs, root.join("lib/udev/hwdb.bin"));
    let query = |key: &str| {
        Command::new(&args.tool)
            .arg("query")
            .arg("--root")
            .arg(&root)
            .arg(key)
            .output()
    };
    let mut mismatches = 0;
    let t = Instant::now();
    let mut forks = 0;
    'outer: loop {
        for k in &keys {
            if forks == args.forks {
                break 'outer;
            }
            match query(k) {
                Ok(out) => {
                    let theirs: Vec<String> = String::from_utf8_lossy(&out.stdout)
                        .lines()
                        .map(str::to_string)
                        .collect();
                    if forks < keys.len() && theirs != answer(&db, k) {
                        mismatches += 1;
                        eprintln!("differs: {k}");
                    }
                }
                Err(e) => {
                    eprintln!("{}: {e}", args.tool.display());
                    break 'outer;
                }
            }
            forks += 1;
        }
    }
    let theirs = t.elapsed();
    let _ = std::fs::remove_dir_all(&root);
    let theirs_us = per(theirs, forks);
    println!("systemd-hwdb query (forked): {theirs_us:.0} µs ({forks} runs)");
    println!(
        "ratio forked/uevd: {:.0}x; answers differing: {mismatches} of {}",
        theirs_us / ours_us,
        keys.len().min(forks)
    );
    if mismatches > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
