//! Cost of identifying a device: uevd's in-process prober against forking
//! util-linux's `blkid -p -o udev`, image by image.
//!
//! ```text
//! uevd-blkidbench [--runs N] IMAGE...     # time both on each image
//! uevd-blkidbench --show IMAGE...         # print uevd's NAME=value pairs
//! ```

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use uevd_blkid::{probe_path, Options};

fn usage() -> ! {
    eprintln!("usage: uevd-blkidbench [--runs N] IMAGE... | --show IMAGE...");
    std::process::exit(2)
}

fn show(images: &[PathBuf]) {
    for img in images {
        println!("== {}", img.display());
        match probe_path(img, &Options::default()) {
            Ok(values) => {
                for (name, value) in values {
                    println!("{name}={}", String::from_utf8_lossy(&value));
                }
            }
            Err(e) => println!("error: {e}"),
        }
    }
}

/// The median of `runs` timings of `f`.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut runs = 50usize;
    let mut images = Vec::new();
    let mut show_only = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--runs" => {
                runs = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| usage())
            }
            "--show" => show_only = true,
            "-h" | "--help" => usage(),
            _ => images.push(PathBuf::from(a)),
        }
    }
    if images.is_empty() {
        usage();
    }
    if show_only {
        show(&images);
        return;
    }
    let blkid = ["/usr/sbin/blkid", "/sbin/blkid"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    println!(
        "{:<28} {:>12} {:>14} {:>8}",
        "image", "uevd (µs)", "blkid -p (µs)", "ratio"
    );
    let (mut total_uevd, mut total_blkid) = (Duration::ZERO, Duration::ZERO);
    for img in &images {
        let uevd = median(runs, || {
            let _ = std::hint::black_box(probe_path(img, &Options::default()));
        });
        total_uevd += uevd;
        let name = img.file_name().map_or_else(
            || img.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        match blkid {
            Some(bin) => {
                let forked = median(runs.min(20), || {
                    let _ = Command::new(bin)
                        .args(["-p", "-o", "udev"])
                        .arg(img)
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status();
                });
                total_blkid += forked;
                println!(
                    "{:<28} {:>12.1} {:>14.1} {:>7.0}x",
                    name,
                    uevd.as_secs_f64() * 1e6,
                    forked.as_secs_f64() * 1e6,
                    forked.as_secs_f64() / uevd.as_secs_f64().max(1e-9)
                );
            }
            None => println!(
                "{:<28} {:>12.1} {:>14} {:>8}",
                name,
                uevd.as_secs_f64() * 1e6,
                "-",
                "-"
            ),
        }
    }
    if blkid.is_some() {
        println!(
            "{:<28} {:>12.1} {:>14.1} {:>7.0}x",
            "all images",
            total_uevd.as_secs_f64() * 1e6,
            total_blkid.as_secs_f64() * 1e6,
            total_blkid.as_secs_f64() / total_uevd.as_secs_f64().max(1e-9)
        );
    }
}
