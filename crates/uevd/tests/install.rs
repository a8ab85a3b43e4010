//! `scripts/install` into a scratch DESTDIR: every file where the layout
//! says, with its mode, the links pointing at uevd, paths inside service
//! files filled in; a reinstall with fewer integrations drops the others;
//! `--uninstall` leaves nothing behind. A file install did not make is
//! never overwritten.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install")
}

fn install(destdir: &Path, extra: &[&str]) -> std::process::Output {
    Command::new("bash")
        .arg(script())
        .arg(format!("--destdir={}", destdir.display()))
        .arg(format!("--bin={}", env!("CARGO_BIN_EXE_uevd")))
        .arg(format!("--gen={}", env!("CARGO_BIN_EXE_uevd-gen")))
        .args(extra)
        .output()
        .unwrap()
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn all_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn install_reinstall_and_uninstall_into_a_destdir() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let out = install(
        d,
        &[
            "--prefix=/usr",
            "--with=systemd,openrc,runit,s6,initramfs-tools,dracut,mkinitcpio",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let bin = d.join("usr/bin/uevd");
    assert_eq!(mode(&bin), 0o755);
    assert_eq!(
        std::fs::metadata(&bin).unwrap().size(),
        std::fs::metadata(env!("CARGO_BIN_EXE_uevd"))
            .unwrap()
            .size()
    );
    for name in ["udevadm", "systemd-udevd"] {
        let link = d.join("usr/lib/uevd").join(name);
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            Path::new("../../bin/uevd")
        );
        assert_eq!(
            std::fs::canonicalize(&link).unwrap(),
            std::fs::canonicalize(&bin).unwrap()
        );
    }
    let files_0644 = [
        "usr/share/man/man1/uevd.1",
        "usr/share/man/man1/uevd-daemon.1",
        "usr/share/man/man1/uevd-trigger.1",
        "usr/share/bash-completion/completions/uevd",
        "usr/share/zsh/site-functions/_uevd",
        "usr/share/fish/vendor_completions.d/uevd.fish",
        "usr/lib/systemd/system/uevd.service",
        "usr/lib/systemd/system/uevd-trigger.service",
        "usr/lib/systemd/system/uevd-settle.service",
        "usr/lib/initcpio/install/uevd",
        "usr/lib/initcpio/hooks/uevd",
        "etc/s6/sv/uevd/type",
    ];
    let files_0755 = [
        "etc/init.d/uevd",
        "etc/sv/uevd/run",
        "etc/s6/sv/uevd/run",
        "etc/initramfs-tools/hooks/uevd",
        "etc/initramfs-tools/scripts/init-top/uevd",
        "etc/initramfs-tools/scripts/init-bottom/uevd",
        "usr/lib/dracut/modules.d/90uevd/module-setup.sh",
    ];
    for f in files_0644 {
        assert_eq!(mode(&d.join(f)), 0o644, "{f}");
    }
    for f in files_0755 {
        assert_eq!(mode(&d.join(f)), 0o755, "{f}");
    }
    // Generated from the command tree: every subcommand has its page and
    // the completions know the options.
    let man = std::fs::read_to_string(d.join("usr/share/man/man1/uevd-daemon.1")).unwrap();
    assert!(man.contains("coldplug"), "{man}");
    let bash =
        std::fs::read_to_string(d.join("usr/share/bash-completion/completions/uevd")).unwrap();
    assert!(bash.contains("--coldplug") && bash.contains("settle"));
    // Paths inside service files are the installed ones; no placeholder left.
    let unit = std::fs::read_to_string(d.join("usr/lib/systemd/system/uevd.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/bin/uevd daemon"), "{unit}");
    assert!(unit.contains("Type=notify"));
    for f in all_files(d) {
        if f.is_file() && !f.is_symlink() && f != bin {
            let text = std::fs::read(&f).unwrap();
            assert!(
                !text
                    .windows(2)
                    .any(|w| w == b"@B" || w == b"@L" || w == b"@S"),
                "placeholder left in {}",
                f.display()
            );
        }
    }

    // Installing again with only systemd removes what is no longer asked for.
    let out = install(d, &["--prefix=/usr", "--with=systemd"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(d.join("usr/lib/systemd/system/uevd.service").exists());
    assert!(!d.join("etc/init.d/uevd").exists());
    assert!(bin.exists());

    // A file that is not uevd's stays, and the install says why it stops.
    std::fs::write(d.join("usr/lib/uevd/keep"), "mine").unwrap();
    std::fs::remove_file(d.join("usr/lib/uevd/udevadm")).unwrap();
    std::fs::write(d.join("usr/lib/uevd/udevadm"), "another package's").unwrap();
    let manifest = d.join("usr/share/uevd/install-manifest");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("f /usr/lib/uevd/udevadm\n", "")).unwrap();
    let out = install(d, &["--prefix=/usr", "--with=systemd"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not uevd's"));
    assert_eq!(
        std::fs::read_to_string(d.join("usr/lib/uevd/udevadm")).unwrap(),
        "another package's"
    );
    std::fs::remove_file(d.join("usr/lib/uevd/udevadm")).unwrap();
    std::fs::write(&manifest, text).unwrap();

    let out = Command::new("bash")
        .arg(script())
        .arg(format!("--destdir={}", d.display()))
        .args(["--prefix=/usr", "--uninstall"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Only the stranger's file (and the directories holding it) remain.
    let left: Vec<PathBuf> = all_files(d)
        .into_iter()
        .map(|p| p.strip_prefix(d).unwrap().to_path_buf())
        .collect();
    assert_eq!(
        left,
        ["usr", "usr/lib", "usr/lib/uevd", "usr/lib/uevd/keep"].map(PathBuf::from),
        "{left:?}"
    );
    std::fs::remove_file(d.join("usr/lib/uevd/keep")).unwrap();
    let out = install(d, &["--with=none"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new("bash")
        .arg(script())
        .arg(format!("--destdir={}", d.display()))
        .arg("--uninstall")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        all_files(d).iter().all(|p| p.is_dir()),
        "{:?}",
        all_files(d)
    );
}

/// The README's switch-over on an installed tree, offline: `systemctl
/// --root=DESTDIR enable` of uevd's three units (with the default
/// /usr/local prefix, which systemd reads units from) must make udev's unit
/// names point at uevd's and hook them into sysinit.target, and uevd's unit
/// must take over udev's two sockets (`Sockets=`), which systemd passes to
/// whatever systemd-udevd.service names. `lab/systemd-boot` boots the
/// result. Skipped where systemctl is missing.
/// The naming scheme a build defaults to is checked before anything is
/// built or written; a prebuilt binary keeps its own, and the install
/// says how to keep the system's names instead.
#[test]
fn the_naming_scheme_is_checked_and_a_prebuilt_binary_keeps_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("root");
    let out = install(&d, &["--naming-scheme=v25x7"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--naming-scheme=v25x7: not auto"));
    assert!(!d.exists(), "nothing written");
    let out = install(&d, &["--naming-scheme=v257"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("boot with net.naming-scheme=v257"),
        "{out:?}"
    );
}

#[test]
fn systemctl_enable_makes_udevs_names_mean_uevds_units() {
    let Ok(v) = Command::new("systemctl").arg("--version").output() else {
        eprintln!("skipped: no systemctl");
        return;
    };
    assert!(v.status.success());
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let out = install(d, &["--with=systemd"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let units = d.join("usr/local/lib/systemd/system");
    let unit = std::fs::read_to_string(units.join("uevd.service")).unwrap();
    assert!(
        unit.lines()
            .any(|l| l == "Sockets=systemd-udevd-control.socket systemd-udevd-kernel.socket"),
        "{unit}"
    );
    assert!(
        unit.contains("ExecStart=/usr/local/bin/uevd daemon"),
        "{unit}"
    );
    let out = Command::new("systemctl")
        .arg(format!("--root={}", d.display()))
        .args([
            "enable",
            "uevd.service",
            "uevd-trigger.service",
            "uevd-settle.service",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let etc = d.join("etc/systemd/system");
    let target = |name: &str| -> PathBuf {
        std::fs::read_link(etc.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    for (alias, unit) in [
        ("systemd-udevd.service", "uevd.service"),
        ("udev.service", "uevd.service"),
        ("systemd-udev-trigger.service", "uevd-trigger.service"),
        ("systemd-udev-settle.service", "uevd-settle.service"),
        ("sysinit.target.wants/uevd.service", "uevd.service"),
        (
            "sysinit.target.wants/uevd-trigger.service",
            "uevd-trigger.service",
        ),
    ] {
        assert_eq!(
            target(alias),
            Path::new("/usr/local/lib/systemd/system").join(unit),
            "{alias}"
        );
    }
    // Nothing of udev's is masked: its sockets stay for uevd.
    for f in all_files(&etc) {
        if let Ok(t) = std::fs::read_link(&f) {
            assert_ne!(t, Path::new("/dev/null"), "{} is masked", f.display());
        }
    }
}
