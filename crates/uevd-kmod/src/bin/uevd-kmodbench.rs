//! How much a module look-up costs in uevd against forking kmod's modprobe
//! for it, as udev setups without a kmod builtin do.
//!
//! uevd-kmodbench [-d ROOT] [-S VERSION] [-C CONFIG]... [--sample N]
//!
//! Resolves every alias of modules.alias (lookup plus the full probe list,
//! what `modprobe --show-depends` computes) in-process, then runs kmod's
//! `modprobe --show-depends` and `modprobe -R` once per alias for an evenly
//! spread sample, and prints the per-look-up cost of each and the ratios.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use uevd_kmod::{show_depends, Resolver, ResolverOptions};

struct Args {
    root: String,
    version: String,
    config: Vec<PathBuf>,
    sample: usize,
}

fn usage() -> ! {
    eprintln!("usage: uevd-kmodbench [-d ROOT] [-S VERSION] [-C CONFIG]... [--sample N]");
    std::process::exit(2);
}

fn args() -> Args {
    let mut a = Args {
        root: String::new(),
        version: uevd_kmod::running_release(),
        config: Vec::new(),
        sample: 1000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "-d" | "--dirname" => a.root = val(),
            "-S" | "--set-version" => a.version = val(),
            "-C" | "--config" => a.config.push(PathBuf::from(val())),
            "--sample" => a.sample = val().parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    a
}

fn per(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e6 / n.max(1) as f64
}

fn main() {
    let a = args();
    let dirname = format!("{}/lib/modules/{}", a.root, a.version);
    let t = Instant::now();
    let r = Resolver::new(&ResolverOptions {
        dirname: Some(PathBuf::from(&dirname)),
        config: if a.config.is_empty() {
            None
        } else {
            Some(a.config.clone())
        },
        ..ResolverOptions::default()
    })
    .unwrap_or_else(|e| {
        eprintln!("uevd-kmodbench: {e}");
        std::process::exit(1);
    });
    let open = t.elapsed();
    let text =
        std::fs::read_to_string(Path::new(&dirname).join("modules.alias")).unwrap_or_else(|e| {
            eprintln!("uevd-kmodbench: {dirname}/modules.alias: {e}");
            std::process::exit(1);
        });
    let mut aliases: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("alias ")?.split_whitespace().next())
        .collect();
    aliases.dedup();
    if aliases.is_empty() {
        eprintln!("uevd-kmodbench: no aliases in {dirname}/modules.alias");
        std::process::exit(1);
    }

    // In-process: look-up only, then look-up with the probe list, twice
    // over so the second pass measures warm page cache and caches.
    let mut lookup_only = Duration::MAX;
    let mut full = Duration::MAX;
    let mut modules = 0usize;
    for _ in 0..2 {
        let t = Instant::now();
        for al in &aliases {
            modules += r.lookup(al).map(|l| l.len()).unwrap_or(0);
        }
        lookup_only = lookup_only.min(t.elapsed());
        let t = Instant::now();
        for al in &aliases {
            let _ = std::hint::black_box(show_depends(&r, al, None, false));
        }
        full = full.min(t.elapsed());
    }
    modules /= 2;

    // kmod: one fork+exec per alias, for a spread-out sample.
    let step = (aliases.len() / a.sample.max(1)).max(1);
    let sample: Vec<&str> = aliases.iter().step_by(step).copied().collect();
    let modprobe = ["/usr/sbin/modprobe", "/sbin/modprobe"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let run = |mode: &str| -> Option<Duration> {
        let modprobe = modprobe?;
        let t = Instant::now();
        for al in &sample {
            let mut c = Command::new(modprobe);
            c.arg(mode).arg("-d").arg(&a.root).arg("-S").arg(&a.version);
            for conf in &a.config {
                c.arg("-C").arg(conf);
            }
            c.arg(al).stdout(Stdio::null()).stderr(Stdio::null());
            c.status().ok()?;
        }
        Some(t.elapsed())
    };
    let kmod_show = run("--show-depends");
    let kmod_resolve = run("-R");

    println!("module directory      {dirname}");
    println!(
        "aliases               {} (resolving to {modules} modules)",
        aliases.len()
    );
    println!("uevd open + config    {:.0} us", open.as_secs_f64() * 1e6);
    println!(
        "uevd lookup           {:.2} us per alias",
        per(lookup_only, aliases.len())
    );
    println!(
        "uevd lookup + deps    {:.2} us per alias (show-depends)",
        per(full, aliases.len())
    );
    match (kmod_show, kmod_resolve) {
        (Some(show), Some(resolve)) => {
            let show = per(show, sample.len());
            let resolve = per(resolve, sample.len());
            println!(
                "kmod modprobe -D fork {show:.0} us per alias ({} sampled)",
                sample.len()
            );
            println!(
                "kmod modprobe -R fork {resolve:.0} us per alias ({} sampled)",
                sample.len()
            );
            println!(
                "ratio                 {:.0}x (-D vs lookup + deps), {:.0}x (-R vs lookup)",
                show / per(full, aliases.len()),
                resolve / per(lookup_only, aliases.len())
            );
        }
        _ => println!("kmod's modprobe not found: no comparison"),
    }
}
