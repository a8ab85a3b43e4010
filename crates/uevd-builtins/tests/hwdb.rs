//! The hardware database against systemd's own reader: every modalias the
//! lab guests reported and a sample of keys made from the patterns of the
//! hwdb text sources are looked up here and by `systemd-hwdb query` (252),
//! and the answers must be the same, properties and order. The sources
//! compiled here must answer like the `hwdb.bin` systemd compiled from
//! them.
//!
//! Needs the lab's files (see `hwdb-oracle.sh` to get them elsewhere):
//! `UEVD_HWDB_BIN` (default `/var/cache/uevd-lab/hwdb.bin`),
//! `UEVD_HWDB_SOURCES` (default: the lab's `lib/udev/hwdb.d`) and
//! `UEVD_SYSTEMD_HWDB` (default: the lab's or `/tmp/udev252`'s
//! `systemd-hwdb`). Skipped, with the reason printed, when they are absent.
//! `UEVD_HWDB_SAMPLE=N` compares about N keys from the sources instead of
//! 2,400.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use uevd_builtins::hwdb::{Config, Database};
use uevd_builtins::{Call, Failure, Properties};

fn first_existing(var: &str, defaults: &[&str]) -> Option<PathBuf> {
    if let Some(v) = std::env::var_os(var) {
        return Some(PathBuf::from(v)).filter(|p| p.exists());
    }
    defaults.iter().map(PathBuf::from).find(|p| p.exists())
}

struct Reference {
    bin: PathBuf,
    sources: PathBuf,
    tool: PathBuf,
}

fn reference() -> Option<Reference> {
    let bin = first_existing("UEVD_HWDB_BIN", &["/var/cache/uevd-lab/hwdb.bin"]);
    let sources = first_existing(
        "UEVD_HWDB_SOURCES",
        &[
            "/var/cache/uevd-lab/hwdb-root/lib/udev/hwdb.d",
            "/var/cache/uevd-lab/stage/lib/udev/hwdb.d",
        ],
    );
    let tool = first_existing(
        "UEVD_SYSTEMD_HWDB",
        &[
            "/var/cache/uevd-lab/stage/bin/systemd-hwdb",
            "/tmp/udev252/root/bin/systemd-hwdb",
        ],
    );
    match (bin, sources, tool) {
        (Some(bin), Some(sources), Some(tool)) => Some(Reference { bin, sources, tool }),
        (b, s, t) => {
            println!(
                "skipped: reference files missing (hwdb.bin: {:?}, sources: {:?}, systemd-hwdb: {:?}); see tests/hwdb-oracle.sh",
                b, s, t
            );
            None
        }
    }
}

type Answer = Vec<(String, String)>;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ours(db: &Database, key: &str) -> Answer {
    db.lookup(key.as_bytes())
        .unwrap()
        .into_iter()
        .map(|(k, v)| (text(k), text(v)))
        .collect()
}

/// `systemd-hwdb query` for many keys, two at a time.
fn theirs(tool: &Path, root: &Path, keys: &[String]) -> Vec<Answer> {
    let chunks: Vec<&[String]> = keys.chunks(keys.len().div_ceil(2).max(1)).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|key| {
                            let out = Command::new(tool)
                                .arg("query")
                                .arg("--root")
                                .arg(root)
                                .arg(key)
                                .env("SYSTEMD_LOG_LEVEL", "err")
                                .output()
                                .expect("systemd-hwdb runs");
                            String::from_utf8_lossy(&out.stdout)
                                .lines()
                                .filter_map(|l| l.split_once('='))
                                .map(|(k, v)| (k.to_string(), v.to_string()))
                                .collect()
                        })
                        .collect::<Vec<Answer>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// The modaliases every lab guest reported.
fn lab_modaliases() -> Vec<String> {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab/out");
    let mut set = BTreeSet::new();
    for name in ["boot-n100-udevd", "e2e-udevd"] {
        let file = out.join(name).join("modaliases.txt");
        if let Ok(t) = std::fs::read_to_string(&file) {
            set.extend(t.lines().filter(|l| !l.is_empty()).map(str::to_string));
        }
    }
    if let Ok(dirs) = std::fs::read_dir(&out) {
        for d in dirs.flatten() {
            if let Ok(t) = std::fs::read_to_string(d.path().join("modaliases.txt")) {
                set.extend(t.lines().filter(|l| !l.is_empty()).map(str::to_string));
            }
        }
    }
    // The guests' USB devices as the builtin looks them up (usb_device
    // has no modalias of its own).
    for k in [
        "usb:v1D6Bp0002:xHCI Host Controller",
        "usb:v1D6Bp0003:xHCI Host Controller",
        "usb:v0627p0001:QEMU USB Keyboard",
        "usb:v0627p0001:QEMU USB Tablet",
    ] {
        set.insert(k.to_string());
    }
    set.into_iter().collect()
}

/// A string a glob matches: `*` empty or `filler`, `?` one byte, a class
/// its first member (or, negated, a byte it lacks).
fn concrete(pattern: &str, filler: &str) -> String {
    let p = pattern.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            b'*' => {
                out.extend_from_slice(filler.as_bytes());
                i += 1;
            }
            b'?' => {
                out.push(b'0');
                i += 1;
            }
            b'\\' if i + 1 < p.len() => {
                out.push(p[i + 1]);
                i += 2;
            }
            b'[' => {
                let close = p[i + 1..].iter().skip(1).position(|&c| c == b']');
                let Some(close) = close.map(|c| i + 2 + c) else {
                    out.push(b'[');
                    i += 1;
                    continue;
                };
                let body = &p[i + 1..close];
                let (neg, body) = match body.first() {
                    Some(b'!' | b'^') => (true, &body[1..]),
                    _ => (false, body),
                };
                if neg {
                    let c = b"Zz09Aa_-:~"
                        .iter()
                        .copied()
                        .find(|c| !body.contains(c))
                        .unwrap_or(b'#');
                    out.push(c);
                } else {
                    out.push(body.first().copied().unwrap_or(b'x'));
                }
                i = close + 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every match line of the sources, by file.
fn match_lines(dir: &Path) -> Vec<(String, Vec<String>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "hwdb"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let t = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
            let lines = t
                .lines()
                .filter(|l| !l.is_empty() && !l.starts_with([' ', '#', '\t']))
                .map(|l| l.split('#').next().unwrap().trim_end().to_string())
                .filter(|l| !l.is_empty())
                .collect();
            (f.file_name().unwrap().to_string_lossy().into_owned(), lines)
        })
        .collect()
}

/// At least `total` keys spread over every file: each file gets a share by
/// size, and never fewer than 40 (or all it has).
fn sample_keys(dir: &Path, total: usize) -> Vec<String> {
    let files = match_lines(dir);
    let all: usize = files.iter().map(|(_, l)| l.len()).sum();
    let mut keys = BTreeSet::new();
    for (_, lines) in &files {
        let want = (lines.len() * total / all.max(1)).max(40).min(lines.len());
        let step = (lines.len() / want.max(1)).max(1);
        for (n, l) in lines.iter().enumerate().step_by(step).take(want) {
            keys.insert(concrete(l, ""));
            // Every third pattern also with text where its stars are.
            if n % 3 == 0 {
                keys.insert(concrete(l, "0A:x*y"));
            }
        }
    }
    keys.into_iter().collect()
}

fn show(a: &Answer) -> String {
    a.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" | ")
}

#[test]
fn lookups_match_systemd_hwdb_252() {
    let Some(r) = reference() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("lib/udev")).unwrap();
    std::os::unix::fs::symlink(&r.bin, root.path().join("lib/udev/hwdb.bin")).unwrap();

    let config = Config {
        binaries: vec![r.bin.clone()],
        source_dirs: Vec::new(),
    };
    let db = Database::load(&config).unwrap();
    let compiled = Database::load(&Config {
        binaries: Vec::new(),
        source_dirs: vec![r.sources.clone()],
    })
    .unwrap();

    let lab = lab_modaliases();
    // UEVD_HWDB_SAMPLE asks for a bigger sample (a fork per key).
    let size = std::env::var("UEVD_HWDB_SAMPLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2400);
    let sample = sample_keys(&r.sources, size);
    let mut keys = lab.clone();
    keys.extend(sample.iter().cloned());
    let want = theirs(&r.tool, root.path(), &keys);

    let mut diffs = Vec::new();
    let mut compiled_diffs = Vec::new();
    let mut nonempty = 0;
    for (key, want) in keys.iter().zip(&want) {
        let got = ours(&db, key);
        if !want.is_empty() {
            nonempty += 1;
        }
        if &got != want {
            diffs.push(format!(
                "{key}\n  systemd: {}\n  uevd:    {}",
                show(want),
                show(&got)
            ));
        }
        let from_sources = ours(&compiled, key);
        if from_sources != got {
            compiled_diffs.push(format!(
                "{key}\n  hwdb.bin: {}\n  sources:  {}",
                show(&got),
                show(&from_sources)
            ));
        }
    }
    println!(
        "hwdb: {} keys ({} lab modaliases, {} from {} source patterns), {} with properties; {} differ from systemd-hwdb, {} differ between hwdb.bin and the compiled sources",
        keys.len(),
        lab.len(),
        sample.len(),
        match_lines(&r.sources).iter().map(|(_, l)| l.len()).sum::<usize>(),
        nonempty,
        diffs.len(),
        compiled_diffs.len()
    );
    for d in diffs.iter().chain(&compiled_diffs).take(20) {
        println!("{d}");
    }
    assert!(keys.len() >= 2000);
    assert!(
        diffs.is_empty(),
        "{} differences from systemd-hwdb",
        diffs.len()
    );
    assert!(
        compiled_diffs.is_empty(),
        "{} differences from the compiled sources",
        compiled_diffs.len()
    );
}

/// The builtin's walk, against what udevd 252 stored in the lab guest's
/// database for the same devices (`lab/out/e2e-udevd/db.txt`).
#[test]
fn builtin_walk_gives_what_udevd_stored() {
    let Some(r) = reference() else {
        return;
    };
    let db = Database::load(&Config {
        binaries: vec![r.bin],
        source_dirs: Vec::new(),
    })
    .unwrap();
    const HOST: &str = "/devices/pci0000:00/0000:00:00.0";
    const XHCI: &str = "/devices/pci0000:00/0000:00:09.0";
    const HUB: &str = "/devices/pci0000:00/0000:00:09.0/usb2";
    const HUB_IF: &str = "/devices/pci0000:00/0000:00:09.0/usb2/2-0:1.0";
    const KBD: &str = "/devices/pci0000:00/0000:00:09.0/usb2/2-1";
    const KBD_IF: &str = "/devices/pci0000:00/0000:00:09.0/usb2/2-1/2-1:1.0";
    const KBD_INPUT: &str = "/devices/pci0000:00/0000:00:09.0/usb2/2-1/2-1:1.0/input/input5";
    let mut t = common::Tree::new();
    t.dev(
        HOST,
        "pci",
        "MODALIAS=pci:v00008086d00001237sv00001AF4sd00001100bc06sc00i00\n",
    )
    .dev(
        XHCI,
        "pci",
        "MODALIAS=pci:v00001B36d0000000Dsv00001AF4sd00001100bc0Csc03i30\n",
    )
    .dev(HUB, "usb", "DEVTYPE=usb_device\n")
    .attrs(
        HUB,
        &[
            ("idVendor", "1d6b"),
            ("idProduct", "0003"),
            ("product", "xHCI Host Controller"),
        ],
    )
    .dev(
        HUB_IF,
        "usb",
        "DEVTYPE=usb_interface\nMODALIAS=usb:v1D6Bp0003d0601dc09dsc00dp03ic09isc00ip00in00\n",
    )
    .dev(KBD, "usb", "DEVTYPE=usb_device\n")
    .attrs(
        KBD,
        &[
            ("idVendor", "0627"),
            ("idProduct", "0001"),
            ("product", "QEMU USB Keyboard"),
        ],
    )
    .dev(
        KBD_IF,
        "usb",
        "DEVTYPE=usb_interface\nMODALIAS=usb:v0627p0001d0000dc00dsc00dp00ic03isc01ip01in00\n",
    )
    .dev(KBD_INPUT, "input", "PRODUCT=3/627/1/111\n");

    let host = [
        "ID_PCI_CLASS_FROM_DATABASE=Bridge",
        "ID_PCI_SUBCLASS_FROM_DATABASE=Host bridge",
        "ID_VENDOR_FROM_DATABASE=Intel Corporation",
        "ID_MODEL_FROM_DATABASE=440FX - 82441FX PMC [Natoma] (Qemu virtual machine)",
    ];
    let hub_if = [
        "ID_USB_CLASS_FROM_DATABASE=Hub",
        "ID_VENDOR_FROM_DATABASE=Linux Foundation",
        "ID_AUTOSUSPEND=1",
        "ID_MODEL_FROM_DATABASE=3.0 root hub",
    ];
    let kbd = [
        "ID_VENDOR_FROM_DATABASE=Adomax Technology Co., Ltd",
        "ID_MODEL_FROM_DATABASE=QEMU Tablet",
    ];
    let cases: &[(&str, &str, Option<&str>, &[&str])] = &[
        // The event device's own MODALIAS comes from the event.
        (
            HOST,
            "hwdb --subsystem=pci",
            Some("pci:v00008086d00001237sv00001AF4sd00001100bc06sc00i00"),
            &host,
        ),
        (
            HUB_IF,
            "hwdb --subsystem=usb",
            Some("usb:v1D6Bp0003d0601dc09dsc00dp03ic09isc00ip00in00"),
            &hub_if,
        ),
        // A usb_device has none: vendor, product and name.
        (
            HUB,
            "hwdb --subsystem=usb",
            None,
            &[
                "ID_VENDOR_FROM_DATABASE=Linux Foundation",
                "ID_AUTOSUSPEND=1",
                "ID_MODEL_FROM_DATABASE=3.0 root hub",
            ],
        ),
        // Up from an input device to the first USB device with a match.
        (KBD_INPUT, "hwdb --subsystem=usb", None, &kbd),
        (
            KBD_INPUT,
            "hwdb --subsystem=usb --filter=ID_MODEL*",
            None,
            &["ID_MODEL_FROM_DATABASE=QEMU Tablet"],
        ),
        // Up to the PCI controller when asked for pci.
        (
            KBD_INPUT,
            "hwdb --subsystem=pci --filter=*_FROM_DATABASE",
            None,
            &[
                "ID_PCI_CLASS_FROM_DATABASE=Serial bus controller",
                "ID_PCI_SUBCLASS_FROM_DATABASE=USB controller",
                "ID_PCI_INTERFACE_FROM_DATABASE=XHCI",
                "ID_VENDOR_FROM_DATABASE=Red Hat, Inc.",
                "ID_MODEL_FROM_DATABASE=QEMU XHCI Host Controller",
            ],
        ),
        // An explicit key, with a prefix, quoted as rules write it.
        (
            KBD_INPUT,
            "hwdb --lookup-prefix=usb: 'v1D6Bp0003:xHCI Host Controller'",
            None,
            &hub_if[1..],
        ),
        (
            KBD_INPUT,
            "hwdb --device=/sys/devices/pci0000:00/0000:00:00.0",
            None,
            &host,
        ),
        (KBD_INPUT, "hwdb --device=+usb:2-0:1.0", None, &hub_if),
    ];
    for (devpath, cmd, modalias, want) in cases {
        let dev = t.device(devpath);
        let mut env = common::Props::default();
        if let Some(m) = modalias {
            env.0.insert(b"MODALIAS".to_vec(), m.as_bytes().to_vec());
        }
        let got = run_hwdb(&db, &dev, cmd, &env).unwrap_or_else(|e| panic!("{devpath} {cmd}: {e}"));
        assert_eq!(common::lines(&got), *want, "{devpath} {cmd}");
    }
    // Nothing found: not applicable, and nothing added.
    for (devpath, cmd) in [
        (KBD_INPUT, "hwdb --subsystem=block"),
        (KBD_INPUT, "hwdb no:such:modalias"),
        (KBD_INPUT, "hwdb --subsystem=usb --filter=NOTHING*"),
    ] {
        let dev = t.device(devpath);
        let r = run_hwdb(&db, &dev, cmd, &common::Props::default());
        assert!(matches!(r, Err(Failure::NotApplicable(_))), "{cmd}: {r:?}");
    }
}

fn run_hwdb(
    db: &Database,
    dev: &Rc<uevd_sysfs::Device>,
    cmd: &str,
    env: &common::Props,
) -> Result<Properties, Failure> {
    let args: Vec<Vec<u8>> = cmd
        .split_whitespace()
        .map(|w| w.as_bytes().to_vec())
        .collect();
    let call = Call {
        device: dev,
        args: &args,
        env,
        test: true,
    };
    let mut out = Properties::new();
    uevd_builtins::hwdb::run_with(db, &call, &mut out).map(|()| out)
}

/// Cut and scribbled-over copies of the real database: errors that name an
/// offset inside the file, never a panic.
#[test]
fn damaged_copies_of_the_real_database_fail_cleanly() {
    let Some(r) = reference() else {
        return;
    };
    let full = std::fs::read(&r.bin).unwrap();
    let keys = lab_modaliases();
    let (mut rejected, mut failed_lookups, mut answered) = (0, 0, 0);
    let mut check = |bytes: Vec<u8>| {
        let len = bytes.len() as u64;
        match uevd_builtins::hwdb::Trie::from_vec(bytes) {
            Err(e) => {
                assert!(e.offset <= len.max(80), "{e}");
                rejected += 1;
            }
            Ok(t) => {
                for k in &keys {
                    match t.lookup(k.as_bytes()) {
                        Ok(_) => answered += 1,
                        Err(e) => {
                            assert!(!e.what.is_empty());
                            failed_lookups += 1;
                        }
                    }
                }
            }
        }
    };
    let n = full.len();
    for cut in [0, 7, 79, 80, 81, 4096, n / 3, n / 2, n - 1] {
        let mut b = full[..cut].to_vec();
        check(b.clone());
        // The same cut with the recorded size made to agree.
        if b.len() >= 24 {
            b[16..24].copy_from_slice(&(cut as u64).to_le_bytes());
            check(b);
        }
    }
    // Scribbles: a few bytes set to random values, anywhere.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..150 {
        let mut b = full.clone();
        for _ in 0..8 {
            let at = (next() % n as u64) as usize;
            b[at] = next() as u8;
        }
        check(b);
    }
    println!(
        "damaged databases: {rejected} rejected when opened, {failed_lookups} look-ups failed with an offset, {answered} answered"
    );
    assert!(rejected > 0 && failed_lookups + answered > 0);
}
