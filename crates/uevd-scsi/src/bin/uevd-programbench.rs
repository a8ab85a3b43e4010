//! What answering `IMPORT{program}="scsi_id --export --whitelisted -d
//! $devnode"` in-process saves: per disk, the cost of uevd's scsi_id
//! against spawning udev 252's, and the ratio.
//!
//! Runs on scsi_debug disks: ones already there, or ones it loads (and
//! unloads) itself when root and the kernel has the module. Without
//! scsi_debug (or with `--emulated`) it falls back to scripted scsi_debug
//! disks answered by an LD_PRELOAD responder in both the program and this
//! process, and says so: then the kernel's SG_IO path is not measured.
//!
//! usage: uevd-programbench [--iterations N] [--disks N] [--emulated]
//!                          [--scsi-id PATH]

#[path = "../sg/script.rs"]
#[allow(dead_code)]
mod script;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use uevd_scsi::Properties;

const FAKEDEV_C: &str = include_str!("../sg/fakedev.c");
const SDEBUG: &str = "/sys/bus/pseudo/drivers/scsi_debug";
const CHILD_ENV: &str = "UEVD_PROGRAMBENCH_CHILD";

struct Options {
    iterations: usize,
    disks: usize,
    emulated: bool,
    scsi_id: Option<PathBuf>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        iterations: 300,
        disks: 4,
        emulated: false,
        scsi_id: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--iterations" => {
                o.iterations = value("--iterations")?.parse().map_err(|e| format!("{e}"))?
            }
            "--disks" => o.disks = value("--disks")?.parse().map_err(|e| format!("{e}"))?,
            "--emulated" => o.emulated = true,
            "--scsi-id" => o.scsi_id = Some(value("--scsi-id")?.into()),
            "-h" | "--help" => {
                println!(
                    "usage: uevd-programbench [--iterations N] [--disks N] [--emulated] [--scsi-id PATH]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    o.iterations = o.iterations.max(1);
    o.disks = o.disks.max(1);
    Ok(o)
}

fn find_scsi_id(given: Option<&Path>) -> Result<PathBuf, String> {
    let candidates: Vec<PathBuf> = match given {
        Some(p) => vec![p.to_path_buf()],
        None => [
            "/lib/udev/scsi_id",
            "/usr/lib/udev/scsi_id",
            "/tmp/udev252/root/lib/udev/scsi_id",
            "/tmp/udev252/root/usr/lib/udev/scsi_id",
        ]
        .iter()
        .map(PathBuf::from)
        .collect(),
    };
    candidates
        .into_iter()
        .find(|p| p.exists())
        .ok_or_else(|| "udev's scsi_id not found (--scsi-id PATH)".into())
}

/// scsi_debug's disk nodes, once they all exist.
fn scsi_debug_disks(want: usize) -> Vec<String> {
    for _ in 0..100 {
        let mut disks = Vec::new();
        let Ok(adapters) = std::fs::read_dir(SDEBUG) else {
            return disks;
        };
        for a in adapters.flatten() {
            for h in std::fs::read_dir(a.path()).into_iter().flatten().flatten() {
                for t in std::fs::read_dir(h.path()).into_iter().flatten().flatten() {
                    for lu in std::fs::read_dir(t.path()).into_iter().flatten().flatten() {
                        for b in std::fs::read_dir(lu.path().join("block"))
                            .into_iter()
                            .flatten()
                            .flatten()
                        {
                            disks.push(format!("/dev/{}", b.file_name().to_string_lossy()));
                        }
                    }
                }
            }
        }
        disks.sort();
        disks.dedup();
        if disks.len() >= want && disks.iter().all(|d| Path::new(d).exists()) {
            return disks;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Vec::new()
}

/// Unloads scsi_debug when dropped (only when this run loaded it).
struct Loaded;

impl Drop for Loaded {
    fn drop(&mut self) {
        for _ in 0..50 {
            if Command::new("modprobe")
                .args(["-r", "scsi_debug"])
                .status()
                .is_ok_and(|s| s.success())
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("warning: could not unload scsi_debug");
    }
}

fn try_load(disks: usize) -> Result<Loaded, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    if !Command::new("modinfo")
        .arg("scsi_debug")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Err("this kernel has no scsi_debug module".into());
    }
    let ok = Command::new("modprobe")
        .args(["scsi_debug", &format!("num_tgts={disks}"), "add_host=1"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return Err("modprobe scsi_debug failed".into());
    }
    Ok(Loaded)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn render(p: &Properties) -> String {
    uevd_text::lines(p).into_iter().map(|l| l + "\n").collect()
}

/// In emulated mode: how many requests one scsi_id call makes, and what
/// the responder itself costs per request (a request it has no answer
/// for still costs the lookup), so its share can be taken out.
fn responder_cost(dir: &Path, node: &str, run: &dyn Fn()) -> Option<(usize, Duration)> {
    use std::os::fd::AsRawFd;
    let log = dir.join("count.log");
    std::env::set_var("UEVD_FAKEDEV_LOG", &log);
    run();
    std::env::remove_var("UEVD_FAKEDEV_LOG");
    let requests = std::fs::read_to_string(&log).ok()?.lines().count();
    let f = std::fs::File::open(node).ok()?;
    let n = 2000;
    let t = Instant::now();
    for _ in 0..n {
        // SAFETY: an integer-argument request on an open descriptor; the
        // responder answers it without touching memory.
        unsafe { libc::ioctl(f.as_raw_fd(), 0x5326 as _, 0x7fff_ffff as libc::c_ulong) };
    }
    Some((requests, t.elapsed() / n))
}

/// Times both ways on each node and prints the table.
fn measure(
    scsi_id: &Path,
    nodes: &[String],
    iterations: usize,
    mode: &str,
    fake: Option<&Path>,
) -> Result<(), String> {
    let program = uevd_scsi::find(b"scsi_id").ok_or("no scsi_id emulation")?;
    println!("mode: {mode}");
    println!("real program: {}", scsi_id.display());
    println!("{iterations} calls per disk and way; median per call\n");
    println!(
        "{:<40} {:>14} {:>18} {:>8}",
        "disk", "uevd in-process", "spawn udev scsi_id", "ratio"
    );
    let (mut all_in, mut all_out) = (Vec::new(), Vec::new());
    let mut responder: Vec<(usize, Duration)> = Vec::new();
    for node in nodes {
        let args = ["--export", "--whitelisted", "-d", node.as_str()];
        let argv: Vec<Vec<u8>> = std::iter::once("scsi_id")
            .chain(args.iter().copied())
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let run_in = || {
            let mut out = Properties::new();
            program
                .run(&argv, false, &mut out)
                .map(|()| render(&out))
                .map_err(|e| format!("{e:?}"))
        };
        let run_out = || Command::new(scsi_id).args(args).output();
        // Both must agree before their costs mean anything.
        let mine = run_in().map_err(|e| format!("{node}: uevd: {e}"))?;
        let theirs = run_out().map_err(|e| format!("{node}: spawn: {e}"))?;
        if String::from_utf8_lossy(&theirs.stdout) != mine {
            return Err(format!("{node}: outputs differ; not timing"));
        }
        for _ in 0..5 {
            let _ = run_in();
            let _ = run_out();
        }
        let mut t_in = Vec::with_capacity(iterations);
        let mut t_out = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            let t = Instant::now();
            let _ = std::hint::black_box(run_in());
            t_in.push(t.elapsed());
            let t = Instant::now();
            let _ = std::hint::black_box(run_out());
            t_out.push(t.elapsed());
        }
        let (a, b) = (median(t_in.clone()), median(t_out.clone()));
        if let Some(dir) = fake {
            let run = || {
                let _ = run_in();
            };
            if let Some((n, per)) = responder_cost(dir, node, &run) {
                responder.push((n, per));
            }
        }
        all_in.extend(t_in);
        all_out.extend(t_out);
        println!(
            "{:<40} {:>12.1}µs {:>16.1}µs {:>7.1}x",
            node,
            a.as_secs_f64() * 1e6,
            b.as_secs_f64() * 1e6,
            b.as_secs_f64() / a.as_secs_f64()
        );
    }
    let (a, b) = (median(all_in), median(all_out));
    println!(
        "{:<40} {:>12.1}µs {:>16.1}µs {:>7.1}x",
        "all disks",
        a.as_secs_f64() * 1e6,
        b.as_secs_f64() * 1e6,
        b.as_secs_f64() / a.as_secs_f64()
    );
    if let Some(&(n, per)) = responder.first() {
        let per = responder.iter().map(|r| r.1).min().unwrap_or(per);
        let cost = per * n as u32;
        let rest = a.saturating_sub(cost);
        println!(
            "\nresponder: {n} requests per call at ~{:.1}µs each (~{:.1}µs per call); \
             uevd without it ~{:.1}µs, spawn without it ~{:.1}µs: ratio ~{:.0}x \
             before the kernel's own SG_IO time is added back",
            per.as_secs_f64() * 1e6,
            cost.as_secs_f64() * 1e6,
            rest.as_secs_f64() * 1e6,
            b.saturating_sub(cost).as_secs_f64() * 1e6,
            b.saturating_sub(cost).as_secs_f64() / rest.as_secs_f64().max(1e-9)
        );
    }
    Ok(())
}

/// Scripted scsi_debug disks behind the LD_PRELOAD responder: this
/// program runs again with it preloaded.
fn emulated(o: &Options, scsi_id: &Path, why: &str) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("uevd-programbench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("dev")).map_err(|e| e.to_string())?;
    let result = (|| {
        std::fs::write(dir.join("fakedev.c"), FAKEDEV_C).map_err(|e| e.to_string())?;
        let so = dir.join("fakedev.so");
        let cc = Command::new("cc")
            .args(["-O2", "-shared", "-fPIC", "-o"])
            .arg(&so)
            .arg(dir.join("fakedev.c"))
            .arg("-ldl")
            .status()
            .map_err(|e| format!("cc: {e}"))?;
        if !cc.success() {
            return Err("building the responder failed".to_string());
        }
        for t in 0..o.disks {
            let s = script::scsi_debug(0, t as u32, 0);
            std::fs::write(
                dir.join(format!("dev/sd{}", (b'a' + t as u8) as char)),
                s.to_bytes(),
            )
            .map_err(|e| e.to_string())?;
        }
        let st = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
            .args(std::env::args().skip(1))
            .env(CHILD_ENV, &dir)
            .env("UEVD_PROGRAMBENCH_WHY", why)
            .env("LD_PRELOAD", &so)
            .env("UEVD_FAKEDEV_DIR", dir.join("dev"))
            .arg("--scsi-id")
            .arg(scsi_id)
            .status()
            .map_err(|e| e.to_string())?;
        if !st.success() {
            return Err("the measuring run failed".to_string());
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("uevd-programbench: {e}");
            std::process::exit(2);
        }
    };
    let scsi_id = match find_scsi_id(o.scsi_id.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("uevd-programbench: {e}");
            std::process::exit(2);
        }
    };
    let result = if let Some(dir) = std::env::var_os(CHILD_ENV) {
        let dir = PathBuf::from(dir);
        let mut nodes: Vec<String> = std::fs::read_dir(dir.join("dev"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.path().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        nodes.sort();
        let why = std::env::var("UEVD_PROGRAMBENCH_WHY").unwrap_or_default();
        measure(
            &scsi_id,
            &nodes,
            o.iterations,
            &format!(
                "EMULATED scsi_debug disks ({why}): an LD_PRELOAD responder answers SG_IO \
                 in both the program and uevd; the kernel's SG_IO path is not measured"
            ),
            Some(&dir),
        )
    } else if o.emulated {
        emulated(&o, &scsi_id, "--emulated")
    } else {
        let present = scsi_debug_disks(1);
        if !present.is_empty() {
            measure(
                &scsi_id,
                &present,
                o.iterations,
                "scsi_debug disks already present",
                None,
            )
        } else {
            match try_load(o.disks) {
                Ok(loaded) => {
                    let disks = scsi_debug_disks(o.disks);
                    let r = if disks.is_empty() {
                        Err("scsi_debug loaded but no disks appeared".into())
                    } else {
                        measure(
                            &scsi_id,
                            &disks,
                            o.iterations,
                            "scsi_debug disks loaded for this run",
                            None,
                        )
                    };
                    drop(loaded);
                    r
                }
                Err(why) => {
                    println!("no scsi_debug disks: {why}; falling back to emulated disks");
                    emulated(&o, &scsi_id, &format!("no scsi_debug: {why}"))
                }
            }
        }
    };
    if let Err(e) = result {
        eprintln!("uevd-programbench: {e}");
        std::process::exit(1);
    }
}
