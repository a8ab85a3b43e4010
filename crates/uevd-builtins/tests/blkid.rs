//! uevd's blkid against util-linux's own (`/usr/sbin/blkid`, 2.38 on
//! Debian bookworm), on images made by Debian's real tools.
//!
//! Two comparisons per image: the NAME=value pairs, byte for byte, with
//! `blkid -p -d -o export` (what libblkid found, in its order); and the
//! udev properties with `blkid -p -o udev`, less what udev's builtin does
//! not export and with TYPE and VERSION unencoded, as udev leaves them.
//! Partitions are compared on loop devices, where the builtin itself runs
//! on the kernel's sysfs and /dev.
//!
//! A missing tool skips its images with the reason printed;
//! UEVD_REQUIRE_BLKID_TOOLS=1 turns that into a failure.
//! `scripts/blkid-tools` installs them.

mod common;

use common::Props;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::rc::Rc;
use uevd_builtins::blkid::{self, Options};
use uevd_builtins::{Call, Failure, Properties};
use uevd_sysfs::{Device, Sysfs};

type Pairs = Vec<(String, Vec<u8>)>;

fn required() -> bool {
    std::env::var_os("UEVD_REQUIRE_BLKID_TOOLS").is_some_and(|v| v == "1")
}

fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    found
}

/// Whether every tool is there; if not, says why the caller skips (or
/// fails, when the tools are required).
fn have(what: &str, tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| find_tool(t).is_none())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let msg = format!("{what}: skipped, missing {missing:?} (scripts/blkid-tools installs them)");
    assert!(!required(), "{msg}");
    eprintln!("{msg}");
    false
}

fn run(tool: &str, args: &[&str]) {
    run_input(tool, args, "");
}

fn run_input(tool: &str, args: &[&str], input: &str) {
    use std::io::Write;
    let bin = find_tool(tool).unwrap_or_else(|| panic!("{tool} not found"));
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{tool} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A sparse file of `size` bytes.
fn image(dir: &Path, name: &str, size: u64) -> PathBuf {
    let p = dir.join(name);
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(size).unwrap();
    p
}

fn patch(path: &Path, at: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, at).unwrap();
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[derive(Debug, PartialEq)]
enum Answer {
    Pairs(Pairs),
    Ambivalent,
}

fn pairs(text: &[u8]) -> Pairs {
    text.split(|&c| c == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| {
            let eq = l.iter().position(|&c| c == b'=')?;
            Some((
                String::from_utf8_lossy(&l[..eq]).into_owned(),
                l[eq + 1..].to_vec(),
            ))
        })
        .filter(|(k, _)| k != "DEVNAME")
        .collect()
}

/// util-linux's answer: exit status 8 is "ambivalent", 2 "nothing".
fn blkid(format: &str, dev: &Path) -> Answer {
    let mut args = vec!["-p", "-o", format];
    if format == "export" {
        // Values as they are, not escaped for a shell.
        args.push("-d");
    }
    let out = Command::new(find_tool("blkid").unwrap())
        .args(&args)
        .arg(dev)
        .output()
        .unwrap();
    match out.status.code() {
        Some(8) => Answer::Ambivalent,
        Some(0) | Some(2) => Answer::Pairs(pairs(&out.stdout)),
        c => panic!(
            "blkid {dev:?} exited {c:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

fn unhex(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'\\' && v.get(i + 1) == Some(&b'x') && i + 3 < v.len() {
            if let Ok(b) =
                u8::from_str_radix(std::str::from_utf8(&v[i + 2..i + 4]).unwrap_or("zz"), 16)
            {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(v[i]);
        i += 1;
    }
    out
}

/// What udev 252's builtin exports, from what `blkid -o udev` prints:
/// udev has no names for SEC_TYPE, BLOCK_SIZE, LABEL_FATBOOT, LOGUUID,
/// EXT_JOURNAL, SUBSYSTEM, and passes TYPE and VERSION on unencoded.
fn udev_view(p: Pairs) -> Pairs {
    const KEPT: &[&str] = &[
        "ID_FS_TYPE",
        "ID_FS_USAGE",
        "ID_FS_VERSION",
        "ID_FS_UUID",
        "ID_FS_UUID_ENC",
        "ID_FS_UUID_SUB",
        "ID_FS_UUID_SUB_ENC",
        "ID_FS_LABEL",
        "ID_FS_LABEL_ENC",
        "ID_PART_TABLE_TYPE",
        "ID_PART_TABLE_UUID",
        "ID_FS_SYSTEM_ID",
        "ID_FS_PUBLISHER_ID",
        "ID_FS_APPLICATION_ID",
        "ID_FS_BOOT_SYSTEM_ID",
        "ID_FS_VOLUME_ID",
        "ID_FS_LOGICAL_VOLUME_ID",
        "ID_FS_VOLUME_SET_ID",
        "ID_FS_DATA_PREPARER_ID",
    ];
    p.into_iter()
        .filter(|(k, _)| KEPT.contains(&k.as_str()) || k.starts_with("ID_PART_ENTRY_"))
        .map(|(k, v)| match k.as_str() {
            "ID_FS_TYPE" | "ID_FS_VERSION" => {
                let raw = unhex(&v);
                (k, raw)
            }
            _ => (k, v),
        })
        .collect()
}

fn show(p: &[(String, Vec<u8>)]) -> String {
    p.iter()
        .map(|(k, v)| format!("{k}={}\n", String::from_utf8_lossy(v)))
        .collect()
}

fn props_pairs(props: &Properties) -> Pairs {
    props
        .iter()
        .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.clone()))
        .collect()
}

/// uevd's prober on an image file against blkid's, both ways; returns
/// the TYPE or PTTYPE found, for the summary.
fn check(path: &Path) -> String {
    let ours = blkid::probe_path(path, &Options::default());
    let theirs = blkid("export", path);
    let name = path.file_name().unwrap().to_string_lossy();
    match (&ours, &theirs) {
        (Err(blkid::Error::Ambivalent), Answer::Ambivalent) => {
            eprintln!("blkid {name}: ambivalent, as in util-linux");
            return "ambivalent".into();
        }
        (Ok(values), Answer::Pairs(expected)) => {
            let got: Pairs = values
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            assert_eq!(
                show(&got),
                show(expected),
                "{name}: NAME=value pairs differ from blkid -p -o export"
            );
            let mut props = Properties::new();
            blkid::udev_properties(values, &mut props);
            let Answer::Pairs(udev) = blkid("udev", path) else {
                unreachable!()
            };
            assert_eq!(
                show(&props_pairs(&props)),
                show(&udev_view(udev)),
                "{name}: udev properties differ from blkid -p -o udev"
            );
        }
        _ => panic!("{name}: uevd says {ours:?}, util-linux says {theirs:?}"),
    }
    let ours = ours.unwrap();
    let what = ours
        .iter()
        .filter(|(k, _)| *k == "TYPE" || *k == "PTTYPE")
        .map(|(k, v)| format!("{k}={}", String::from_utf8_lossy(v)))
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!(
        "blkid {name}: identical ({})",
        if what.is_empty() { "nothing" } else { &what }
    );
    what
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn ext_family() {
    if !have("ext", &["blkid", "mke2fs", "tune2fs"]) {
        return;
    }
    let d = tmp();
    let img = image(d.path(), "ext2.img", 8 << 20);
    run(
        "mke2fs",
        &["-q", "-F", "-t", "ext2", "-L", "my ext2", s(&img)],
    );
    assert_eq!(check(&img), "TYPE=ext2");
    let img = image(d.path(), "ext3.img", 8 << 20);
    run("mke2fs", &["-q", "-F", "-t", "ext3", "-L", "e3", s(&img)]);
    assert_eq!(check(&img), "TYPE=ext3");
    let img = image(d.path(), "ext4.img", 64 << 20);
    run(
        "mke2fs",
        &["-q", "-F", "-t", "ext4", "-L", "lbl/ä *", s(&img)],
    );
    assert_eq!(check(&img), "TYPE=ext4");
    let img = image(d.path(), "ext4-nolabel.img", 32 << 20);
    run(
        "mke2fs",
        &[
            "-q",
            "-F",
            "-t",
            "ext4",
            "-O",
            "^metadata_csum,^64bit",
            s(&img),
        ],
    );
    check(&img);
    let img = image(d.path(), "ext4dev.img", 32 << 20);
    run("mke2fs", &["-q", "-F", "-t", "ext4", s(&img)]);
    run("tune2fs", &["-E", "test_fs", s(&img)]);
    assert_eq!(check(&img), "TYPE=ext4dev");
    let img = image(d.path(), "jbd.img", 8 << 20);
    run(
        "mke2fs",
        &["-q", "-F", "-O", "journal_dev", "-L", "jrnl", s(&img)],
    );
    assert_eq!(check(&img), "TYPE=jbd");
}

#[test]
fn xfs_and_btrfs() {
    if have("xfs", &["blkid", "mkfs.xfs"]) {
        let d = tmp();
        let img = image(d.path(), "xfs.img", 320 << 20);
        run("mkfs.xfs", &["-q", "-f", "-L", "xfslbl", s(&img)]);
        assert_eq!(check(&img), "TYPE=xfs");
        let img = image(d.path(), "xfs-4k.img", 320 << 20);
        run("mkfs.xfs", &["-q", "-f", "-s", "size=4096", s(&img)]);
        check(&img);
    }
    if have("btrfs", &["blkid", "mkfs.btrfs"]) {
        let d = tmp();
        let img = image(d.path(), "btrfs.img", 128 << 20);
        run("mkfs.btrfs", &["-q", "-f", "-L", "btr fs", s(&img)]);
        assert_eq!(check(&img), "TYPE=btrfs");
    }
}

#[test]
fn fat_family() {
    if !have("vfat", &["blkid", "mkfs.fat"]) {
        return;
    }
    let d = tmp();
    for (bits, size, label) in [
        ("12", 1u64 << 20, "FAT12LBL"),
        ("16", 32 << 20, "F16 L"),
        ("32", 64 << 20, "FAT32"),
    ] {
        let img = image(d.path(), &format!("fat{bits}.img"), size);
        run("mkfs.fat", &["-F", bits, "-n", label, s(&img)]);
        assert_eq!(check(&img), "TYPE=vfat");
    }
    let img = image(d.path(), "fat32-nolabel.img", 40 << 20);
    run("mkfs.fat", &["-F", "32", "-i", "0", s(&img)]);
    check(&img);
    // The root directory's label entry deleted: only the boot sector's
    // copy is left (LABEL_FATBOOT, which udev does not export).
    let img = image(d.path(), "fat16-deleted-label.img", 32 << 20);
    run("mkfs.fat", &["-F", "16", "-n", "GONE", s(&img)]);
    let bs = std::fs::read(&img).unwrap();
    let u16at = |o: usize| u64::from(u16::from_le_bytes([bs[o], bs[o + 1]]));
    let root = (u16at(14) + u64::from(bs[16]) * u16at(22)) * u16at(11);
    patch(&img, root, b"\xe5");
    check(&img);
}

#[test]
fn exfat_and_ntfs() {
    if have("exfat", &["blkid", "mkfs.exfat"]) {
        let d = tmp();
        let img = image(d.path(), "exfat.img", 16 << 20);
        run("mkfs.exfat", &["-L", "exlbl", s(&img)]);
        // libblkid 2.38 takes exFAT's boot sector for an empty DOS
        // partition table as well.
        assert_eq!(check(&img), "TYPE=exfat PTTYPE=dos");
        let img = image(d.path(), "exfat-unicode.img", 16 << 20);
        run("mkfs.exfat", &["-L", "Ünï cödé", s(&img)]);
        check(&img);
    }
    if have("ntfs", &["blkid", "mkntfs"]) {
        let d = tmp();
        let img = image(d.path(), "ntfs.img", 16 << 20);
        run("mkntfs", &["-q", "-F", "-Q", "-L", "Windows Ü", s(&img)]);
        assert_eq!(check(&img), "TYPE=ntfs");
    }
}

#[test]
fn swap_and_hibernation() {
    if !have("swap", &["blkid", "mkswap"]) {
        return;
    }
    let d = tmp();
    let img = image(d.path(), "swap.img", 8 << 20);
    run(
        "mkswap",
        &[
            "-L",
            "swp",
            "-U",
            "6eb9ceb7-a798-442d-acc9-0d188a94d60f",
            s(&img),
        ],
    );
    assert_eq!(check(&img), "TYPE=swap");
    let img = image(d.path(), "swap-nolabel.img", 8 << 20);
    run("mkswap", &[s(&img)]);
    check(&img);
    // A hibernation image keeps the swap header and changes the magic.
    let susp = d.path().join("swsuspend.img");
    std::fs::copy(d.path().join("swap.img"), &susp).unwrap();
    patch(&susp, 0xff6, b"S1SUSPEND");
    assert_eq!(check(&susp), "TYPE=swsuspend");
    let v0 = d.path().join("swap-v0.img");
    std::fs::copy(d.path().join("swap.img"), &v0).unwrap();
    patch(&v0, 0xff6, b"SWAP-SPACE");
    check(&v0);
}

#[test]
fn iso9660_joliet_and_hybrid() {
    let d = tmp();
    let tree = d.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("file"), "x").unwrap();
    if have("iso9660", &["blkid", "genisoimage"]) {
        let img = d.path().join("joliet.iso");
        run(
            "genisoimage",
            &["-quiet", "-J", "-V", "ISO Label", "-o", s(&img), s(&tree)],
        );
        assert_eq!(check(&img), "TYPE=iso9660");
        let img = d.path().join("joliet-unicode.iso");
        run(
            "genisoimage",
            &[
                "-quiet",
                "-J",
                "-input-charset",
                "utf-8",
                "-V",
                "Ünïcödé label",
                "-o",
                s(&img),
                s(&tree),
            ],
        );
        check(&img);
        let img = d.path().join("plain.iso");
        run(
            "genisoimage",
            &["-quiet", "-V", "plain", "-o", s(&img), s(&tree)],
        );
        check(&img);
    }
    if have("iso9660 (xorriso)", &["blkid", "xorriso"]) {
        let img = d.path().join("ids.iso");
        run(
            "xorriso",
            &[
                "-as",
                "mkisofs",
                "-quiet",
                "-V",
                "EFI_ISO",
                "-appid",
                "My App",
                "-publisher",
                "Pub lisher",
                "-p",
                "Prep",
                "-volset",
                "VSet",
                "-sysid",
                "SYS",
                "-J",
                "-o",
                s(&img),
                s(&tree),
            ],
        );
        check(&img);
        let img = d.path().join("eltorito.iso");
        run(
            "xorriso",
            &[
                "-as",
                "mkisofs",
                "-quiet",
                "-V",
                "BOOT",
                "-b",
                "file",
                "-no-emul-boot",
                "-o",
                s(&img),
                s(&tree),
            ],
        );
        check(&img);
        // A hybrid image: ISO 9660 may share the device with its MBR.
        let img = d.path().join("hybrid.iso");
        run(
            "xorriso",
            &[
                "-as",
                "mkisofs",
                "-quiet",
                "-V",
                "HYBRID",
                "-J",
                "-partition_offset",
                "16",
                "--protective-msdos-label",
                "-o",
                s(&img),
                s(&tree),
            ],
        );
        assert_eq!(check(&img), "TYPE=iso9660 PTTYPE=dos");
    }
}

#[test]
fn luks_and_squashfs() {
    if have("luks", &["blkid", "cryptsetup"]) {
        let d = tmp();
        let fast = ["--pbkdf-force-iterations", "1000", "--key-file", "-", "-q"];
        let img = image(d.path(), "luks1.img", 16 << 20);
        let mut args = vec!["luksFormat", "--type", "luks1"];
        args.extend(fast);
        args.push(s(&img));
        run_input("cryptsetup", &args, "pw");
        assert_eq!(check(&img), "TYPE=crypto_LUKS");
        let img = image(d.path(), "luks2.img", 32 << 20);
        let mut args = vec![
            "luksFormat",
            "--type",
            "luks2",
            "--pbkdf",
            "pbkdf2",
            "--label",
            "my label",
            "--subsystem",
            "sub",
        ];
        args.extend(fast);
        args.push(s(&img));
        run_input("cryptsetup", &args, "pw");
        assert_eq!(check(&img), "TYPE=crypto_LUKS");
        // The first header gone: the second one still names the container.
        patch(&img, 0, b"XXXXXX");
        assert_eq!(check(&img), "TYPE=crypto_LUKS");
    }
    if have("squashfs", &["blkid", "mksquashfs"]) {
        let d = tmp();
        let tree = d.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        std::fs::write(tree.join("file"), "x").unwrap();
        let img = d.path().join("sq.img");
        run("mksquashfs", &[s(&tree), s(&img), "-quiet", "-noappend"]);
        assert_eq!(check(&img), "TYPE=squashfs");
        // The same superblock claiming version 3: libblkid's other name.
        let old = d.path().join("sq3.img");
        std::fs::copy(&img, &old).unwrap();
        patch(&old, 28, &[3, 0, 1, 0]);
        assert_eq!(check(&old), "TYPE=squashfs3");
    }
}

/// An MD 1.x superblock as mdadm writes it (with its checksum), for
/// kernels without the MD driver, where mdadm cannot create arrays.
fn md1(path: &Path, size: u64, version: &str, name: &[u8]) {
    let off = match version {
        "1.0" => (size & !0xfff) - 0x2000,
        "1.1" => 0,
        _ => 0x1000,
    };
    let mut sb = vec![0u8; 256 + 2 * 2];
    sb[0..4].copy_from_slice(&0xa92b_4efcu32.to_le_bytes());
    sb[4..8].copy_from_slice(&1u32.to_le_bytes());
    for (i, b) in sb[16..32].iter_mut().enumerate() {
        *b = 0x10 + i as u8;
    }
    sb[32..32 + name.len()].copy_from_slice(name);
    sb[72..76].copy_from_slice(&1u32.to_le_bytes());
    sb[80..88].copy_from_slice(&((size >> 9) - 64).to_le_bytes());
    sb[144..152].copy_from_slice(&(off >> 9).to_le_bytes());
    for (i, b) in sb[168..184].iter_mut().enumerate() {
        *b = 0xa0 + i as u8;
    }
    sb[220..224].copy_from_slice(&2u32.to_le_bytes());
    let sum: u64 = sb
        .chunks(4)
        .map(|w| u64::from(u32::from_le_bytes(w.try_into().unwrap())))
        .sum();
    let csum = ((sum & 0xffff_ffff) + (sum >> 32)) as u32;
    sb[216..220].copy_from_slice(&csum.to_le_bytes());
    image(
        path.parent().unwrap(),
        path.file_name().unwrap().to_str().unwrap(),
        size,
    );
    patch(path, off, &sb);
}

/// An MD 0.90 superblock, 64 KiB-aligned at the end, in either byte order.
fn md090(path: &Path, size: u64, big_endian: bool) {
    let off = (size & !0xffff) - 0x10000;
    let words: [u32; 16] = [
        0xa92b_4efc,
        0,
        90,
        0,
        0,
        0x1122_3344,
        0,
        1,
        ((off >> 10) - 4) as u32,
        2,
        2,
        0,
        0,
        0x5566_7788,
        0x99aa_bbcc,
        0xddee_ff00,
    ];
    let sb: Vec<u8> = words
        .iter()
        .flat_map(|w| {
            if big_endian {
                w.to_be_bytes()
            } else {
                w.to_le_bytes()
            }
        })
        .collect();
    image(
        path.parent().unwrap(),
        path.file_name().unwrap().to_str().unwrap(),
        size,
    );
    patch(path, off, &sb);
}

#[test]
fn raid_members() {
    if !have("md", &["blkid"]) {
        return;
    }
    // mdadm needs the kernel's MD driver to write a superblock; where
    // there is none the test writes the superblocks itself, and blkid
    // stays the judge.
    let d = tmp();
    for v in ["1.0", "1.1", "1.2"] {
        let img = d.path().join(format!("md{v}.img"));
        md1(&img, 16 << 20, v, b"host:md0");
        assert_eq!(check(&img), "TYPE=linux_raid_member");
    }
    let img = d.path().join("md1.2-spaces.img");
    md1(&img, 16 << 20, "1.2", b"  name  ");
    check(&img);
    for be in [false, true] {
        let img = d
            .path()
            .join(format!("md0.90-{}.img", if be { "be" } else { "le" }));
        md090(&img, 16 << 20, be);
        assert_eq!(check(&img), "TYPE=linux_raid_member");
    }
    if Path::new("/proc/mdstat").exists() {
        eprintln!("md: the kernel has MD, but images are still written by the test");
    } else {
        eprintln!("md: no MD driver in this kernel; superblocks written by the test");
    }
}

#[test]
fn ambivalent_signatures_give_nothing() {
    if !have("ambivalent", &["blkid", "mke2fs", "mkfs.fat"]) {
        return;
    }
    let d = tmp();
    let img = image(d.path(), "ext4-and-fat.img", 32 << 20);
    run("mke2fs", &["-q", "-F", "-t", "ext4", s(&img)]);
    let fat = image(d.path(), "fat.img", 32 << 20);
    run("mkfs.fat", &["-F", "16", s(&fat)]);
    // ext leaves its first KiB alone: a FAT boot sector fits there.
    patch(&img, 0, &std::fs::read(&fat).unwrap()[..512]);
    assert_eq!(check(&img), "ambivalent");
}

/// A loop device over an image, detached (with any partitions added to
/// it) when dropped.
struct Loop {
    dev: String,
    partitions: bool,
}

impl Loop {
    fn attach(img: &Path) -> Option<Loop> {
        let out = Command::new(find_tool("losetup")?)
            .args(["-f", "-P", "--show"])
            .arg(img)
            .output()
            .ok()?;
        if !out.status.success() {
            let msg = format!(
                "loop devices: skipped, losetup failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(!required(), "{msg}");
            eprintln!("{msg}");
            return None;
        }
        Some(Loop {
            dev: String::from_utf8(out.stdout).unwrap().trim().to_string(),
            partitions: false,
        })
    }

    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }

    /// The kernel's partition devices, added by partx where the kernel
    /// has no parser for the table.
    fn partitions(&mut self) -> Vec<String> {
        let sys = format!("/sys/block/{}", self.name());
        let name = self.name().to_string();
        let list = || -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(&sys)
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| {
                            n.starts_with(&name)
                                && Path::new(&sys).join(n).join("partition").exists()
                        })
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            v
        };
        if list().is_empty() {
            run("partx", &["-a", &self.dev]);
            self.partitions = true;
        }
        list()
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        if self.partitions {
            let _ = Command::new("partx").args(["-d", &self.dev]).status();
        }
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// The builtin on a block device of this machine, as udev runs it.
fn builtin_on(devpath: &str, env: &Props) -> Result<Properties, Failure> {
    let sysfs = Sysfs::new("/sys");
    let dev = Rc::new(Device::from_devpath(&sysfs, devpath.as_bytes()).unwrap());
    let b = uevd_builtins::find(b"blkid").unwrap();
    let args = vec![b"blkid".to_vec()];
    let call = Call {
        device: &dev,
        args: &args,
        env,
        test: true,
    };
    let mut out = Properties::new();
    b.run(&call, &mut out).map(|()| out)
}

/// The builtin on `/dev/NAME` against `blkid -p -o udev /dev/NAME`.
fn check_node(disk: &str, name: &str) -> Pairs {
    let devpath = if name == disk {
        format!("/devices/virtual/block/{disk}")
    } else {
        format!("/devices/virtual/block/{disk}/{name}")
    };
    let node = PathBuf::from(format!("/dev/{name}"));
    for _ in 0..50 {
        if node.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let ours = builtin_on(&devpath, &Props::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let Answer::Pairs(theirs) = blkid("udev", &node) else {
        panic!("{name}: ambivalent")
    };
    assert_eq!(
        show(&props_pairs(&ours)),
        show(&udev_view(theirs)),
        "{name}: builtin differs from blkid -p -o udev"
    );
    let ours = props_pairs(&ours);
    eprintln!("blkid /dev/{name}: identical\n{}", show(&ours));
    ours
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn loop_ready(what: &str) -> bool {
    if !have(
        what,
        &[
            "blkid", "losetup", "partx", "sfdisk", "mke2fs", "mkfs.fat", "mkswap",
        ],
    ) {
        return false;
    }
    if !is_root() || !Path::new("/dev/loop-control").exists() {
        let msg = format!("{what}: skipped, loop devices need root and /dev/loop-control");
        assert!(!required(), "{msg}");
        eprintln!("{msg}");
        return false;
    }
    true
}

fn value<'a>(p: &'a Pairs, key: &str) -> Option<&'a str> {
    p.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| std::str::from_utf8(v).unwrap())
}

#[test]
fn gpt_partitions_on_a_loop_device() {
    if !loop_ready("gpt") {
        return;
    }
    let d = tmp();
    let img = image(d.path(), "gpt.img", 64 << 20);
    run_input(
        "sfdisk",
        &["-q", s(&img)],
        "label: gpt\nlabel-id: 0E5B6B0E-3F38-4E64-9A3C-6B1C2DC3E7A1\n\
         size=16M, type=L, name=\"root part\", uuid=5D6E1F2A-1B2C-4D3E-8F40-112233445566\n\
         size=8M, type=U, name=\"EFI System\"\n\
         size=4M, type=S, attrs=\"RequiredPartition GUID:60,63\"\n\
         size=4M, type=L\n",
    );
    check(&img);
    let Some(mut lo) = Loop::attach(&img) else {
        return;
    };
    let parts = lo.partitions();
    assert_eq!(parts.len(), 4, "{parts:?}");
    run(
        "mke2fs",
        &[
            "-q",
            "-F",
            "-t",
            "ext4",
            "-L",
            "rootfs",
            &format!("/dev/{}", parts[0]),
        ],
    );
    run("mkfs.fat", &["-n", "ESP", &format!("/dev/{}", parts[1])]);
    run("mkswap", &["-L", "sw", &format!("/dev/{}", parts[2])]);
    let disk = lo.name().to_string();
    let whole = check_node(&disk, &disk);
    assert_eq!(value(&whole, "ID_PART_TABLE_TYPE"), Some("gpt"));
    for p in &parts {
        let props = check_node(&disk, p);
        assert_eq!(value(&props, "ID_PART_ENTRY_SCHEME"), Some("gpt"), "{p}");
    }
    // udev passes the root partition it was told about on to the
    // partition whose entry has that UUID.
    let mut env = Props::default();
    env.0.insert(
        b"ID_PART_GPT_AUTO_ROOT_UUID".to_vec(),
        b"5d6e1f2a-1b2c-4d3e-8f40-112233445566".to_vec(),
    );
    let props = props_pairs(
        &builtin_on(&format!("/devices/virtual/block/{disk}/{}", parts[0]), &env).unwrap(),
    );
    assert_eq!(value(&props, "ID_PART_GPT_AUTO_ROOT"), Some("1"));
}

#[test]
fn dos_partitions_on_a_loop_device() {
    if !loop_ready("dos") {
        return;
    }
    let d = tmp();
    let img = image(d.path(), "mbr.img", 64 << 20);
    run_input(
        "sfdisk",
        &["-q", s(&img)],
        "label: dos\nlabel-id: 0x02165e71\nsize=8M, type=83, bootable\nsize=8M, type=82\n\
         type=5\nsize=4M, type=83\nsize=4M, type=c\n",
    );
    check(&img);
    let Some(mut lo) = Loop::attach(&img) else {
        return;
    };
    let parts = lo.partitions();
    assert_eq!(parts.len(), 5, "{parts:?}");
    run(
        "mke2fs",
        &[
            "-q",
            "-F",
            "-t",
            "ext2",
            "-L",
            "boot",
            &format!("/dev/{}", parts[0]),
        ],
    );
    run("mkswap", &[&format!("/dev/{}", parts[1])]);
    run(
        "mkfs.fat",
        &["-n", "LOGICAL", &format!("/dev/{}", parts[4])],
    );
    let disk = lo.name().to_string();
    check_node(&disk, &disk);
    for p in &parts {
        check_node(&disk, p);
    }
    // The extended partition, its first logical partition.
    let ext = check_node(&disk, &parts[2]);
    assert_eq!(value(&ext, "ID_PART_ENTRY_TYPE"), Some("0x5"));
    let logical = check_node(&disk, &parts[3]);
    assert_eq!(value(&logical, "ID_PART_ENTRY_NUMBER"), Some("5"));
    assert_eq!(value(&logical, "ID_PART_ENTRY_UUID"), Some("02165e71-05"));
    let boot = check_node(&disk, &parts[0]);
    assert_eq!(value(&boot, "ID_PART_ENTRY_FLAGS"), Some("0x80"));
}

#[test]
fn floppy_sized_disks() {
    if !loop_ready("floppy") {
        return;
    }
    let d = tmp();
    // A partitioned floppy-sized disk shows its table only.
    let img = image(d.path(), "small-dos.img", 1 << 20);
    run_input(
        "sfdisk",
        &["-q", s(&img)],
        "label: dos\nsize=512K, type=83\n",
    );
    let Some(lo) = Loop::attach(&img) else { return };
    let disk = lo.name().to_string();
    let props = check_node(&disk, &disk);
    assert_eq!(value(&props, "ID_PART_TABLE_TYPE"), Some("dos"));
    drop(lo);
    // An unpartitioned floppy is its filesystem.
    let img = image(d.path(), "floppy.img", 1440 << 10);
    run("mkfs.fat", &["-F", "12", "-n", "FLOPPY", s(&img)]);
    let Some(lo) = Loop::attach(&img) else { return };
    let disk = lo.name().to_string();
    let props = check_node(&disk, &disk);
    assert_eq!(value(&props, "ID_FS_TYPE"), Some("vfat"));
}

#[test]
fn lvm_physical_volume() {
    if !loop_ready("lvm") || !have("lvm", &["pvcreate"]) {
        return;
    }
    let d = tmp();
    let img = image(d.path(), "lvm.img", 16 << 20);
    {
        // pvcreate only writes to block devices; the image keeps the label.
        let Some(lo) = Loop::attach(&img) else { return };
        let out = Command::new(find_tool("pvcreate").unwrap())
            .args([
                "-q",
                "--config",
                "devices{obtain_device_list_from_udev=0 use_devicesfile=0} activation{udev_sync=0 udev_rules=0}",
                &lo.dev,
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pvcreate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let disk = lo.name().to_string();
        check_node(&disk, &disk);
    }
    assert_eq!(check(&img), "TYPE=LVM2_member");
    // A DOS table written over the PV's first sector wins over it.
    run_input(
        "sfdisk",
        &["-q", "--wipe", "never", s(&img)],
        "label: dos\nsize=4M, type=83\n",
    );
    assert_eq!(check(&img), "PTTYPE=dos");
}

#[test]
fn builtin_finds_nodes_under_uevd_dev_root() {
    if !have("dev root", &["blkid", "mke2fs"]) {
        return;
    }
    let d = tmp();
    let img = image(d.path(), "img0", 16 << 20);
    run(
        "mke2fs",
        &["-q", "-F", "-t", "ext4", "-L", "moved", s(&img)],
    );
    let mut tree = common::Tree::new();
    let devpath = "/devices/virtual/block/img0";
    tree.dev(
        devpath,
        "block",
        "MAJOR=7\nMINOR=99\nDEVNAME=img0\nDEVTYPE=disk\n",
    );
    let dev = tree.device(devpath);
    let mut env = Props::default();
    env.0.insert(
        b"UEVD_DEV_ROOT".to_vec(),
        d.path().as_os_str().as_encoded_bytes().to_vec(),
    );
    let props = common::run_env("blkid", &dev, &env).unwrap();
    let Answer::Pairs(theirs) = blkid("udev", &img) else {
        unreachable!()
    };
    assert_eq!(show(&props_pairs(&props)), show(&udev_view(theirs)));
    assert_eq!(value(&props_pairs(&props), "ID_FS_LABEL"), Some("moved"));
    // A node that is gone: nothing, and no failure (udev ignores it).
    std::fs::remove_file(&img).unwrap();
    assert_eq!(
        common::run_env("blkid", &dev, &env).unwrap(),
        Properties::new()
    );
    // --offset, as rules pass it for filesystems inside a container.
    let img = image(d.path(), "img0", 32 << 20);
    run(
        "mke2fs",
        &[
            "-q",
            "-F",
            "-t",
            "ext4",
            "-L",
            "inner",
            "-E",
            "offset=1048576",
            s(&img),
            "16M",
        ],
    );
    let args = vec![b"blkid".to_vec(), b"--offset=1048576".to_vec()];
    let call = Call {
        device: &dev,
        args: &args,
        env: &env,
        test: true,
    };
    let mut props = Properties::new();
    uevd_builtins::find(b"blkid")
        .unwrap()
        .run(&call, &mut props)
        .unwrap();
    let out = Command::new(find_tool("blkid").unwrap())
        .args(["-p", "-o", "udev", "-O", "1048576"])
        .arg(&img)
        .output()
        .unwrap();
    assert_eq!(
        show(&props_pairs(&props)),
        show(&udev_view(pairs(&out.stdout)))
    );
    assert_eq!(value(&props_pairs(&props), "ID_FS_LABEL"), Some("inner"));
}

#[test]
fn a_probe_readied_ahead_reads_through_the_node_opened_then() {
    if !loop_ready("read ahead") {
        return;
    }
    let d = tmp();
    let img = image(d.path(), "ahead.img", 16 << 20);
    run(
        "mke2fs",
        &["-q", "-F", "-t", "ext4", "-L", "ahead", s(&img)],
    );
    let Some(lo) = Loop::attach(&img) else {
        return;
    };
    // The loop device's node again, in a device directory of the test's
    // own, where it can be removed.
    use std::os::unix::fs::MetadataExt;
    let rdev = std::fs::metadata(&lo.dev).unwrap().rdev();
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let root = tmp();
    let node = root.path().join("ahead0");
    let make_node = || {
        let c = std::ffi::CString::new(node.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path; mknod has no other preconditions.
        assert_eq!(
            unsafe { libc::mknod(c.as_ptr(), libc::S_IFBLK | 0o600, rdev) },
            0
        );
    };
    let mut tree = common::Tree::new();
    let devpath = "/devices/virtual/block/ahead0";
    tree.dev(
        devpath,
        "block",
        &format!("MAJOR={major}\nMINOR={minor}\nDEVNAME=ahead0\nDEVTYPE=disk\n"),
    );
    let dev = tree.device(devpath);
    let mut env = Props::default();
    env.0.insert(
        b"UEVD_DEV_ROOT".to_vec(),
        root.path().as_os_str().as_encoded_bytes().to_vec(),
    );
    let label = |props: &Properties| value(&props_pairs(props), "ID_FS_LABEL").map(String::from);

    // Readied with its reads started, the node then removed: the builtin
    // probes through the node opened ahead.
    make_node();
    blkid::read_ahead(node.clone(), None, true);
    std::fs::remove_file(&node).unwrap();
    let props = common::run_env("blkid", &dev, &env).unwrap();
    assert_eq!(label(&props).as_deref(), Some("ahead"));
    assert!(blkid::end_read_ahead(), "the rules probed the node");
    // Once ended, a probe opens the node itself: gone, nothing is found.
    assert_eq!(
        common::run_env("blkid", &dev, &env).unwrap(),
        Properties::new()
    );

    // Readied without reads: nothing is opened ahead, and the end says
    // whether a probe came.
    make_node();
    blkid::read_ahead(node.clone(), None, false);
    assert!(!blkid::end_read_ahead(), "no probe came");
    blkid::read_ahead(node.clone(), None, false);
    std::fs::remove_file(&node).unwrap();
    assert_eq!(
        common::run_env("blkid", &dev, &env).unwrap(),
        Properties::new()
    );
    assert!(blkid::end_read_ahead(), "a probe came");

    // A node open already (as a lock opens it) is used as it is.
    make_node();
    let held = std::fs::File::open(&node).unwrap();
    std::fs::remove_file(&node).unwrap();
    blkid::read_ahead(node.clone(), Some(std::os::fd::AsFd::as_fd(&held)), true);
    let props = common::run_env("blkid", &dev, &env).unwrap();
    assert_eq!(label(&props).as_deref(), Some("ahead"));
    assert!(blkid::end_read_ahead());
}
