//! `uevd hwdb` against systemd's own hwdb tool, `systemd-hwdb` 252 from
//! Debian's udev package: the database `uevd hwdb --update` writes must
//! answer `systemd-hwdb query` exactly as `uevd hwdb --test` answers, and
//! as the database systemd-hwdb compiles from the same sources answers
//! both of them; `udevadm hwdb --update`'s format (`--compat`) likewise.
//!
//! Where systemd-hwdb is looked for, the first that runs and says
//! "systemd 252":
//! * `UEVD_SYSTEMD_HWDB`, when set;
//! * installed: `/usr/bin/systemd-hwdb`, `/bin/systemd-hwdb`;
//! * unpacked (never installed) from Debian's udev package by
//!   `scripts/libudev-clients` into `$UEVD_UDEV252/bin` (default
//!   `/tmp/udev252/root/bin`), which `scripts/test` runs first;
//! * the lab's copies: `/var/cache/uevd-lab/syscalls/root/bin`
//!   (`scripts/syscalls`) and `/var/cache/uevd-lab/stage/bin`
//!   (`lab/build-guest`).
//!
//! Without it the tests say so and pass, unless UEVD_REQUIRE_CLIENTS is
//! set. Debian's real sources are compiled as well when present (next to
//! the tool found, in /usr/lib/udev/hwdb.d or /lib/udev/hwdb.d, or the
//! lab's copy).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

fn uevd() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_uevd"))
}

fn is_252(tool: &Path) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success() && o.stdout.starts_with(b"systemd 252 "))
}

/// Debian's systemd-hwdb 252, from where the project's scripts put it.
fn systemd_hwdb() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("UEVD_SYSTEMD_HWDB") {
        candidates.push(p.into());
    }
    let unpacked = std::env::var_os("UEVD_UDEV252")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/udev252/root"));
    candidates.extend(
        [
            "/usr/bin/systemd-hwdb",
            "/bin/systemd-hwdb",
            &format!("{}/bin/systemd-hwdb", unpacked.display()),
            &format!("{}/usr/bin/systemd-hwdb", unpacked.display()),
            "/var/cache/uevd-lab/syscalls/root/bin/systemd-hwdb",
            "/var/cache/uevd-lab/stage/bin/systemd-hwdb",
        ]
        .map(PathBuf::from),
    );
    let found = candidates.iter().find(|p| is_252(p)).cloned();
    if found.is_none() {
        let msg = format!(
            "no systemd-hwdb 252 that runs (run scripts/libudev-clients, or set UEVD_SYSTEMD_HWDB); tried {candidates:?}"
        );
        if std::env::var_os("UEVD_REQUIRE_CLIENTS").is_some() {
            panic!("{msg}");
        }
        eprintln!("skipped: {msg}");
    }
    found
}

/// udevadm 252 next to the systemd-hwdb found, if it runs.
fn udevadm_beside(tool: &Path) -> Option<PathBuf> {
    let u = tool.with_file_name("udevadm");
    // Not uevd under udevadm's name.
    let uevd_itself = std::fs::canonicalize(&u).is_ok_and(|c| {
        c.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("uevd"))
    });
    let runs = Command::new(&u)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success() && o.stdout.starts_with(b"252"));
    (runs && !uevd_itself).then_some(u)
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A few records: globs, a file in /etc hiding the one of the same name in
/// udev's directory, a later file overriding an earlier one's property
/// through another pattern, a masked file, and lines both tools ignore.
fn small_sources(root: &Path) {
    let lib = root.join("lib/udev/hwdb.d");
    let etc = root.join("etc/udev/hwdb.d");
    write(
        &lib.join("10-base.hwdb"),
        "# vendors and models\n\
         usb:v1234p*\n \
         ID_VENDOR_FROM_DATABASE=Base Vendor\n \
         ID_MODEL_FROM_DATABASE=Generic\n\
         \n\
         usb:v1234p5678*\n \
         ID_MODEL_FROM_DATABASE=Specific Model\n\
         \n\
         usb:v1234p56??*\n\
         usb:v9999*\n \
         ID_CLASS=multi # trailing comment\n \
         EXTRA=x  \n\
         \n\
         pci:v*d*sv*sd*bc03*\n \
         ID_PCI_CLASS_FROM_DATABASE=Display\n\
         \n\
         evdev:name:*Keyboard*:dmi:*\n \
         KEYBOARD_KEY_81=mute\n  \
         KEYBOARD_KEY_82=volumedown\n\
         \n\
         pci:v0000[12]*\n \
         ID_BRACKET=1\n\
         \n\
         record:without:properties\n\
         \n \
         stray=1\n \
         NOEQ\n",
    );
    write(
        &lib.join("20-override.hwdb"),
        "usb:v1234p5678*\n ID_MODEL_FROM_DATABASE=Hidden by /etc\n",
    );
    write(
        &etc.join("20-override.hwdb"),
        "usb:v1234p5678*\n ID_MODEL_FROM_DATABASE=From /etc\n",
    );
    write(
        &etc.join("30-late.hwdb"),
        "usb:v1234*\n ID_VENDOR_FROM_DATABASE=Late Vendor\n\n\
         pci:v00008086*\n ID_PCI_CLASS_FROM_DATABASE=Late class\n\n\
         usb:v1234p5678d0001\n ID_MODEL_FROM_DATABASE=Exact\n",
    );
    write(&lib.join("05-masked.hwdb"), "usb:v*\n MASKED=1\n");
    std::os::unix::fs::symlink("/dev/null", etc.join("05-masked.hwdb")).unwrap();
    write(
        &root.join("lib/udev/hwdb.d/notes.txt"),
        "usb:v*\n NOT_HWDB=1\n",
    );
}

const SMALL_KEYS: &[&str] = &[
    "usb:v1234p5678d0001",
    "usb:v1234p5678d0002dc00",
    "usb:v1234p56ABd0000",
    "usb:v1234p0001",
    "usb:v1234",
    "usb:v9999p0000",
    "usb:v0001p0001",
    "pci:v00008086d00001234sv00000000sd00000000bc03sc00i00",
    "pci:v00001002d00006780sv00000000sd00000000bc03sc00i00",
    "pci:v00002000d0000",
    "evdev:name:AT Translated Set 2 Keyboard:phys:isa0060/serio0/input0:ev:120013:dmi:bvnX:",
    "record:without:properties",
    "nothing:at:all",
];

/// Modaliases from the real sources: about `want` match lines made
/// concrete (`*` dropped, `?` as `0`), and a few of real hardware.
fn real_keys(dir: &Path, want: usize) -> Vec<String> {
    let mut patterns = Vec::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hwdb"))
        .collect();
    names.sort();
    for p in names {
        let text = std::fs::read(&p).unwrap();
        for line in String::from_utf8_lossy(&text).lines() {
            if line.is_empty() || line.starts_with([' ', '#']) || line.contains('[') {
                continue;
            }
            patterns.push(line.replace('*', "").replace('?', "0"));
        }
    }
    let step = (patterns.len() / want.max(1)).max(1);
    let mut keys: Vec<String> = patterns.into_iter().step_by(step).collect();
    keys.extend(
        [
            "usb:v046DpC52Bd1201dc00dsc00dp00ic03isc01ip01in00",
            "usb:v1D6Bp0002d0601dc09dsc00dp01ic09isc00ip00in00",
            "pci:v00008086d00001237sv00001AF4sd00001100bc06sc00i00",
            "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00",
            "acpi:PNP0A03:",
            "OUI:001B21",
            "evdev:input:b0011v0001p0001eAB41-e0,1,4,11,14,k71,72,73,74,75,76,77,79,7A,7B,7C,7D,7E,7F,80,8C,8E,8F,9B,9C,9D,9E,9F,A3,A4,A5,A6,AC,AD,B7,B8,B9,D9,E2,ram4,l0,1,2,sfw",
            "evdev:atkbd:dmi:bvnLENOVO:bvrN2HET:bd01/01/2020:svnLENOVO:pn20XW:pvrThinkPadX1Carbon:rvnLENOVO:rn20XW:",
            "mouse:usb:v046dpc52b:name:Logitech USB Receiver:",
        ]
        .map(String::from),
    );
    keys
}

fn uevd_test(root: &Path, key: &str) -> String {
    run(Command::new(uevd())
        .arg("hwdb")
        .arg(format!("--root={}", root.display()))
        .arg(format!("--test={key}")))
}

fn systemd_query(tool: &Path, root: &Path, key: &str) -> String {
    run(Command::new(tool)
        .arg(format!("--root={}", root.display()))
        .arg("query")
        .arg(key))
}

fn copy_tree(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

/// Compiles `sources` (a tree with etc/ and lib/) four ways, each in a
/// root of its own: uevd (version 2 and version 1 entries), systemd-hwdb,
/// and udevadm hwdb when it runs; then every key must get the same answer
/// from every database through both readers. Returns how many keys had
/// an answer.
fn compare(tool: &Path, sources: &Path, keys: &[String]) -> usize {
    let base = tempfile::tempdir().unwrap();
    let root = |name: &str| {
        let r = base.path().join(name);
        std::fs::create_dir_all(&r).unwrap();
        copy_tree(sources, &r);
        r
    };
    let ours = root("uevd");
    let ours_compat = root("uevd-compat");
    let theirs = root("systemd");
    run(Command::new(uevd())
        .arg("hwdb")
        .arg("--update")
        .arg(format!("--root={}", ours.display())));
    run(Command::new(uevd())
        .args(["hwdb", "-u", "--compat", "-r"])
        .arg(&ours_compat));
    run(Command::new(tool)
        .arg(format!("--root={}", theirs.display()))
        .arg("update"));
    let roots = vec![ours.clone(), theirs.clone()];
    let mut compat_roots = vec![ours_compat.clone()];
    if let Some(udevadm) = udevadm_beside(tool) {
        let r = root("udevadm");
        run(Command::new(udevadm)
            .args(["hwdb", "--update"])
            .arg(format!("--root={}", r.display())));
        compat_roots.push(r);
    } else {
        eprintln!(
            "note: no udevadm 252 beside {}; --compat compared with systemd-hwdb's reader only",
            tool.display()
        );
    }

    for r in roots.iter().chain(&compat_roots) {
        let bin = r.join("etc/udev/hwdb.bin");
        let meta = std::fs::metadata(&bin).unwrap();
        assert_eq!(
            meta.permissions().mode() & 0o7777,
            0o444,
            "{}",
            bin.display()
        );
        assert!(meta.size() > 80);
    }
    // Version 2 entries from uevd and systemd-hwdb, version 1 from uevd
    // --compat and udevadm.
    let value_size = |r: &Path| {
        let b = std::fs::read(r.join("etc/udev/hwdb.bin")).unwrap();
        u64::from_le_bytes(b[48..56].try_into().unwrap())
    };
    assert!(roots.iter().all(|r| value_size(r) == 32));
    assert!(compat_roots.iter().all(|r| value_size(r) == 16));

    let mut answered = 0;
    for key in keys {
        let reference = systemd_query(tool, &theirs, key);
        answered += usize::from(!reference.is_empty());
        for r in &roots {
            assert_eq!(
                systemd_query(tool, r, key),
                reference,
                "systemd-hwdb on {}: {key}",
                r.display()
            );
            assert_eq!(
                uevd_test(r, key),
                reference,
                "uevd on {}: {key}",
                r.display()
            );
        }
        // Version 1: readers agree with each other (the answer may differ
        // from version 2's where a later file overrides through another
        // pattern).
        let reference = systemd_query(tool, &compat_roots[0], key);
        for r in &compat_roots {
            assert_eq!(
                systemd_query(tool, r, key),
                reference,
                "systemd-hwdb on {}: {key}",
                r.display()
            );
            assert_eq!(
                uevd_test(r, key),
                reference,
                "uevd on {}: {key}",
                r.display()
            );
        }
    }
    answered
}

#[test]
fn uevd_and_systemd_hwdb_agree_on_a_small_database() {
    let Some(tool) = systemd_hwdb() else { return };
    let sources = tempfile::tempdir().unwrap();
    small_sources(sources.path());
    let keys: Vec<String> = SMALL_KEYS.iter().map(|k| k.to_string()).collect();
    let answered = compare(&tool, sources.path(), &keys);
    assert!(answered >= 8, "{answered}");

    // What the records mean, read back by uevd.
    let root = tempfile::tempdir().unwrap();
    copy_tree(sources.path(), root.path());
    let out = Command::new(uevd())
        .args(["hwdb", "--update", "--strict", "--root"])
        .arg(root.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ignored lines are not errors, even with --strict"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (line, what) in [
        (25, "property expected"),
        (26, "match expected"),
        (27, "match expected"),
    ] {
        assert!(
            stderr.contains(&format!("10-base.hwdb:{line}: {what}")),
            "{line}: {stderr}"
        );
    }
    let mut got: Vec<String> = uevd_test(root.path(), "usb:v1234p5678d0002")
        .lines()
        .map(String::from)
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            "EXTRA=x",
            "ID_CLASS=multi",
            "ID_MODEL_FROM_DATABASE=From /etc",
            "ID_VENDOR_FROM_DATABASE=Late Vendor"
        ]
    );
}

#[test]
fn uevd_and_systemd_hwdb_agree_on_debians_database() {
    let Some(tool) = systemd_hwdb() else { return };
    let bin_root = tool.parent().and_then(Path::parent).map(Path::to_path_buf);
    let candidates = [
        bin_root.map(|r| r.join("lib/udev/hwdb.d")),
        Some(PathBuf::from("/usr/lib/udev/hwdb.d")),
        Some(PathBuf::from("/lib/udev/hwdb.d")),
        Some(PathBuf::from(
            "/var/cache/uevd-lab/hwdb-root/lib/udev/hwdb.d",
        )),
    ];
    let Some(real) = candidates
        .into_iter()
        .flatten()
        .find(|d| d.join("60-keyboard.hwdb").exists())
    else {
        eprintln!("skipped: no Debian hwdb.d found");
        return;
    };
    let sources = tempfile::tempdir().unwrap();
    let lib = sources.path().join("lib/udev");
    std::fs::create_dir_all(&lib).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(&real)
        .arg(lib.join("hwdb.d"))
        .status()
        .unwrap();
    assert!(st.success());
    let want = std::env::var("UEVD_HWDB_SAMPLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let keys = real_keys(&real, want);
    let answered = compare(&tool, sources.path(), &keys);
    eprintln!(
        "{} keys from {}, {answered} with properties",
        keys.len(),
        real.display()
    );
    assert!(answered * 2 > keys.len(), "{answered} of {}", keys.len());
}

/// `--strict` fails where systemd-hwdb's does: on a source not wholly
/// read (here a line over 1 MiB), not on the lines it ignores; the
/// database is written either way.
#[test]
fn strict_fails_where_systemd_hwdb_fails() {
    let Some(tool) = systemd_hwdb() else { return };
    let status = |root: &Path, ours: bool| {
        let mut cmd = if ours {
            let mut c = Command::new(uevd());
            c.args(["hwdb", "--update", "--strict"]);
            c
        } else {
            let mut c = Command::new(&tool);
            c.args(["update", "--strict"]);
            c
        };
        let out = cmd
            .arg(format!("--root={}", root.display()))
            .output()
            .unwrap();
        let bin = root.join("etc/udev/hwdb.bin");
        let written = bin.exists();
        let _ = std::fs::remove_file(&bin);
        (out.status.code(), written)
    };
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("lib/udev/hwdb.d/10-a.hwdb");
    write(&file, "a\n A=1\n\nb\n NOEQ\n\n stray\n");
    assert_eq!(status(root.path(), true), (Some(0), true));
    assert_eq!(status(root.path(), false), (Some(0), true));
    let long = format!(
        "a\n A=1\n\nb\n B={}\n\nc\n C=1\n",
        "x".repeat(1024 * 1024 + 10)
    );
    write(&file, &long);
    assert_eq!(status(root.path(), false), (Some(1), true));
    assert_eq!(status(root.path(), true), (Some(1), true));
}
