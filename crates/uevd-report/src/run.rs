//! One boot's worth of data, from a journal, a lab run directory or its
//! result.json, and the phase durations measured from it.

use crate::dmesg::{self, Dmesg};
use crate::journal::Journal;
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct Run {
    /// The run's name: its directory for lab runs, else the file's stem.
    pub name: String,
    pub path: PathBuf,
    /// The lab's result fields (all strings, as result.json has them).
    pub result: Option<BTreeMap<String, String>>,
    pub journal: Option<Journal>,
    pub dmesg: Option<Dmesg>,
}

fn invalid(path: &Path, msg: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {msg}", path.display()),
    )
}

fn read_result(path: &Path) -> io::Result<BTreeMap<String, String>> {
    let v: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(path)?).map_err(|e| invalid(path, e))?;
    let obj = v
        .as_object()
        .ok_or_else(|| invalid(path, "not a JSON object"))?;
    Ok(obj
        .iter()
        .map(|(k, v)| {
            let s = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), s)
        })
        .collect())
}

/// Reads a kernel log that need not be UTF-8 (`dmesg` passes on whatever
/// drivers print).
pub fn read_dmesg(path: &Path) -> io::Result<Dmesg> {
    use std::os::unix::fs::FileTypeExt;
    let bytes = if path == Path::new("-") {
        let mut b = Vec::new();
        io::Read::read_to_end(&mut io::stdin(), &mut b)?;
        b
    } else if fs::metadata(path)?.file_type().is_char_device() {
        read_kmsg(path)?
    } else {
        fs::read(path)?
    };
    Ok(dmesg::parse(&String::from_utf8_lossy(&bytes)))
}

/// The kernel's log buffer as it stands, from a /dev/kmsg-like device: one
/// record per read, oldest first, until nothing is left (a plain read would
/// wait for the next message forever).
fn read_kmsg(path: &Path) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let mut out = Vec::new();
    let mut record = vec![0u8; 8192];
    loop {
        match io::Read::read(&mut f, &mut record) {
            Ok(0) => break,
            Ok(n) => {
                out.extend_from_slice(&record[..n]);
                if record[n - 1] != b'\n' {
                    out.push(b'\n');
                }
            }
            // Overwritten while we read: the next record follows.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// The journal a path names: the path itself, or the timeline.jsonl or
/// timeline.txt of a run directory.
pub fn journal_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        for name in ["timeline.jsonl", "timeline.txt"] {
            let p = path.join(name);
            if p.exists() {
                return p;
            }
        }
        return path.join("timeline.jsonl");
    }
    path.to_path_buf()
}

impl Run {
    /// Loads a run from a lab run directory (result.json, timeline.txt or
    /// timeline.jsonl, dmesg.txt: whichever exist), a result.json (its
    /// directory), a journal or a kernel log.
    pub fn load(path: &Path) -> io::Result<Run> {
        let dir = if path.is_dir() {
            Some(path.to_path_buf())
        } else if path.file_name().is_some_and(|n| n == "result.json") {
            Some(path.parent().unwrap_or(Path::new(".")).to_path_buf())
        } else {
            None
        };
        if let Some(dir) = dir {
            return Run::load_dir(&dir);
        }
        let bytes = fs::read(path)?;
        let text = String::from_utf8_lossy(&bytes);
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        // "timeline.txt" says nothing; the run directory it sits in does.
        let name = match stem.as_str() {
            "timeline" | "dmesg" | "result" => path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map(file_name)
                .unwrap_or(stem),
            _ => stem,
        };
        let mut run = Run {
            name,
            path: path.to_path_buf(),
            result: None,
            journal: None,
            dmesg: None,
        };
        if Journal::looks_like(&text) {
            run.journal = Some(Journal::parse(&text).map_err(|e| invalid(path, e))?);
        } else if text.trim_start().starts_with('{') {
            run.result = Some(read_result(path)?);
        } else {
            let d = dmesg::parse(&text);
            if d.timed_lines == 0 {
                return Err(invalid(
                    path,
                    "neither a uevd journal, a lab result.json nor a kernel log",
                ));
            }
            run.dmesg = Some(d);
        }
        Ok(run)
    }

    fn load_dir(dir: &Path) -> io::Result<Run> {
        let mut run = Run {
            name: file_name(&fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())),
            path: dir.to_path_buf(),
            result: None,
            journal: None,
            dmesg: None,
        };
        let result = dir.join("result.json");
        if result.exists() {
            run.result = Some(read_result(&result)?);
        }
        let journal = journal_path(dir);
        if journal.exists() {
            run.journal = Some(Journal::load(&journal)?);
        }
        let d = dir.join("dmesg.txt");
        if d.exists() {
            run.dmesg = Some(read_dmesg(&d)?);
        }
        if run.result.is_none() && run.journal.is_none() && run.dmesg.is_none() {
            return Err(invalid(
                dir,
                "no result.json, timeline.jsonl, timeline.txt or dmesg.txt",
            ));
        }
        Ok(run)
    }

    fn result_secs(&self, key: &str) -> Option<f64> {
        let v: f64 = self.result.as_ref()?.get(key)?.parse().ok()?;
        v.is_finite().then_some(v)
    }

    /// The run's measurements, in seconds, in the order reports show them.
    pub fn metrics(&self) -> Vec<Metric> {
        let mut out = Vec::new();
        let ns = |v: u64| v as f64 / 1e9;
        let mut push = |key: &str, value: Option<f64>| {
            if let Some(value) = value {
                out.push(Metric {
                    key: key.to_string(),
                    value,
                });
            }
        };
        let d = self.dmesg.as_ref();
        push(
            "kernel",
            self.result_secs("boot_s")
                .or_else(|| d.and_then(Dmesg::init_started).map(ns)),
        );
        push(
            "initramfs",
            d.and_then(Dmesg::unpack).map(|(s, e)| ns(e - s)),
        );
        if let Some(j) = &self.journal {
            let end = j.settle_done().unwrap_or(u64::MAX);
            let start = j.trigger_start();
            let last_arrival = j
                .events
                .iter()
                .map(|e| e.arrived)
                .filter(|&a| a <= end)
                .max();
            if let (Some(s), Some(a)) = (start, last_arrival) {
                push("trigger", Some(ns(a.saturating_sub(s))));
            }
            let first = j.events.iter().map(|e| e.arrived).min();
            let last = j.events.iter().map(|e| e.finished).max();
            if let (Some(f), Some(l)) = (first, last) {
                push("events", Some(ns(l.saturating_sub(f))));
            }
            push("settle", j.settle_wait().map(ns));
            if let (Some(s), Some(done)) = (start, j.settle_done()) {
                push("settled", Some(ns(done.saturating_sub(s))));
            }
            if !j.modules.is_empty() {
                push(
                    "modules",
                    Some(ns(j.modules.iter().map(|m| m.duration()).sum())),
                );
            }
        }
        push("module-init", d.and_then(Dmesg::module_init_total).map(ns));
        push("wall", self.result_secs("wall_s"));
        push("cpu", self.result_secs("cpu_s"));
        if let Some(j) = &self.journal {
            let mut subs: BTreeMap<&str, u64> = BTreeMap::new();
            let mut progs: BTreeMap<&str, u64> = BTreeMap::new();
            for e in &j.events {
                *subs.entry(e.subsystem.as_str()).or_default() += e.processing();
                for s in &e.steps {
                    if let Some(p) = s.program() {
                        *progs.entry(p).or_default() += s.duration();
                    }
                }
            }
            for (s, t) in subs {
                push(&format!("subsystem:{s}"), Some(ns(t)));
            }
            for (p, t) in progs {
                push(&format!("program:{p}"), Some(ns(t)));
            }
        }
        out
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    pub key: String,
    /// Seconds.
    pub value: f64,
}

/// What a metric key means, for tables.
pub fn metric_label(key: &str) -> String {
    match key {
        "kernel" => "kernel (boot to /init)".into(),
        "initramfs" => "initramfs unpacking".into(),
        "trigger" => "trigger (to last arrival)".into(),
        "events" => "event processing".into(),
        "settle" => "settle (request to done)".into(),
        "settled" => "trigger to settled".into(),
        "modules" => "module loading".into(),
        "module-init" => "module init (dmesg)".into(),
        "wall" => "lab wall_s".into(),
        "cpu" => "lab cpu_s".into(),
        k => match k.split_once(':') {
            Some(("subsystem", s)) => format!("subsystem {s}"),
            Some(("program", p)) => format!("program {p}"),
            _ => k.to_string(),
        },
    }
}

/// Where a metric key sorts: phases in boot order, then subsystems, then
/// programs.
pub fn metric_rank(key: &str) -> usize {
    const ORDER: [&str; 10] = [
        "kernel",
        "initramfs",
        "trigger",
        "events",
        "settle",
        "settled",
        "modules",
        "module-init",
        "wall",
        "cpu",
    ];
    ORDER.iter().position(|k| *k == key).unwrap_or_else(|| {
        if key.starts_with("subsystem:") {
            100
        } else if key.starts_with("program:") {
            200
        } else {
            300
        }
    })
}

/// The group a run belongs to when none is named: its name without a
/// trailing repeat number (`bench-disks-n100-uevd-r2` ->
/// `bench-disks-n100-uevd`).
pub fn default_group(name: &str) -> &str {
    if let Some(i) = name.rfind("-r") {
        let digits = &name[i + 2..];
        if i > 0 && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return &name[..i];
        }
    }
    name
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_running_kernels_log_is_read_to_its_end_without_waiting() {
        let kmsg = Path::new("/dev/kmsg");
        if !kmsg.exists() {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read_kmsg(kmsg).map(|b| b.len()));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("reading /dev/kmsg waited for new messages");
        assert!(got.unwrap() > 0, "the kernel has logged something");
    }
    use super::*;

    #[test]
    fn groups() {
        assert_eq!(
            default_group("bench-disks-n100-uevd-r2"),
            "bench-disks-n100-uevd"
        );
        assert_eq!(default_group("boot-n100-uevd"), "boot-n100-uevd");
        assert_eq!(default_group("-r1"), "-r1");
        assert_eq!(default_group("x-r"), "x-r");
    }

    #[test]
    fn metrics_of_a_lab_directory() {
        let dir = tempfile::tempdir().unwrap();
        let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        fs::copy(
            fx.join("boot-timeline.jsonl"),
            dir.path().join("timeline.txt"),
        )
        .unwrap();
        fs::copy(fx.join("dmesg-6.1-boot.txt"), dir.path().join("dmesg.txt")).unwrap();
        fs::write(
            dir.path().join("result.json"),
            r#"{"boot_s": "2.51", "wall_s": "0.642", "cpu_s": "0.61", "status": "ok"}"#,
        )
        .unwrap();
        let run = Run::load(&dir.path().join("result.json")).unwrap();
        let m: BTreeMap<String, f64> = run
            .metrics()
            .into_iter()
            .map(|m| (m.key, m.value))
            .collect();
        assert_eq!(m["kernel"], 2.51, "result.json wins over dmesg");
        assert!((m["initramfs"] - 0.461477).abs() < 1e-9);
        assert_eq!(m["wall"], 0.642);
        // settle-request 3.599414714 -> settle-done 3.602221024
        assert!((m["settle"] - 0.002806310).abs() < 1e-12);
        assert!(m["subsystem:module"] > 0.0);
        assert!(!m.contains_key("modules"));
        let keys: Vec<_> = run.metrics().into_iter().map(|m| m.key).collect();
        let mut sorted = keys.clone();
        sorted.sort_by_key(|k| metric_rank(k));
        assert_eq!(keys, sorted, "metrics come in report order");
    }

    #[test]
    fn single_files() {
        let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let j = Run::load(&fx.join("boot-timeline.jsonl")).unwrap();
        assert!(j.journal.is_some() && j.dmesg.is_none());
        assert_eq!(j.name, "boot-timeline");
        let d = Run::load(&fx.join("dmesg-6.1-boot.txt")).unwrap();
        let m = d.metrics();
        assert_eq!(m[0].key, "kernel");
        assert!((m[0].value - 2.405693).abs() < 1e-9);
        assert!(Run::load(&fx.join("README.md")).is_err());
    }
}
