//! uevd's scsi_id, ata_id and cdrom_id held against udev 252's programs.
//!
//! Two ways to put both in front of the same device:
//!
//! - `scsi_debug_disks_match_udev`: real SCSI devices from the scsi_debug
//!   module (disks, then a CD-ROM), when this is root on a kernel that has
//!   the module and it is not in use. Loaded here, unloaded on the way out.
//! - `scripted_devices_match_udev`: scripted devices (`src/sg/script.rs`)
//!   answered by an LD_PRELOAD responder (`src/sg/fakedev.c`) in both the
//!   real program and a child of this test running uevd's emulation, so
//!   both get byte-identical replies. Besides models of the lab's devices
//!   (scsi_debug, QEMU virtio-scsi, AHCI and ATAPI), this covers hostile
//!   replies and a few hundred randomly generated devices. The ioctl each
//!   side issued are logged and compared as well.
//!
//! Each comparison is printed; any difference fails the test. A test that
//! cannot run here says why and passes.

#[path = "../src/sg/script.rs"]
#[allow(dead_code)]
mod script;

use script::*;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use uevd_scsi::{Properties, Stop};

const FAKEDEV_C: &str = include_str!("../src/sg/fakedev.c");

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Exit 0 with these lines.
    Printed(String),
    /// A non-zero exit.
    Failed(String),
    /// uevd handed the job to the program.
    Deferred(String),
}

fn render(props: &Properties) -> String {
    let mut s = String::new();
    for (k, v) in props {
        s.push_str(&String::from_utf8_lossy(k));
        s.push('=');
        s.push_str(&String::from_utf8_lossy(v));
        s.push('\n');
    }
    s
}

fn run_uevd(program: &str, args: &[String], test: bool) -> Outcome {
    let argv: Vec<Vec<u8>> = std::iter::once(program.to_string())
        .chain(args.iter().cloned())
        .map(String::into_bytes)
        .collect();
    let mut out = Properties::new();
    match uevd_scsi::find(program.as_bytes())
        .unwrap()
        .run(&argv, test, &mut out)
    {
        Ok(()) => Outcome::Printed(render(&out)),
        Err(Stop::Exit(code, why)) => {
            Outcome::Failed(format!("{program} would exit with status {code}: {why}"))
        }
        Err(Stop::Defer(why)) => Outcome::Deferred(format!("{program}: {why}")),
    }
}

/// [`run_uevd`] as the daemon runs a program for an event of the device at
/// `node`: the node open already and the device's sysfs directory open.
fn run_uevd_near(program: &str, args: &[String], test: bool, node: &str) -> Option<Outcome> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
    let meta = fs::metadata(node).ok()?;
    let block = meta.file_type().is_block_device();
    let (major, minor) = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
    let kind = if block { "block" } else { "char" };
    let dir = fs::File::open(format!("/sys/dev/{kind}/{major}:{minor}")).ok()?;
    let held = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(node)
        .ok()?;
    let argv: Vec<Vec<u8>> = std::iter::once(program.to_string())
        .chain(args.iter().cloned())
        .map(String::into_bytes)
        .collect();
    let near = uevd_scsi::Near {
        block,
        major,
        minor,
        dir: dir.as_fd(),
        node: Some((node.as_bytes(), held.as_fd())),
        scsi_device: None,
    };
    let mut out = Properties::new();
    let program = uevd_scsi::find(program.as_bytes()).unwrap();
    Some(match program.run_near(&argv, test, &mut out, near) {
        Ok(()) => Outcome::Printed(render(&out)),
        Err(Stop::Exit(code, why)) => Outcome::Failed(format!(
            "{} would exit with status {code}: {why}",
            program.name()
        )),
        Err(Stop::Defer(why)) => Outcome::Deferred(format!("{}: {why}", program.name())),
    })
}

fn run_real(path: &Path, args: &[String], env: &[(&str, String)]) -> Outcome {
    let mut cmd = Command::new(path);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    match out.status.code() {
        Some(0) => Outcome::Printed(stdout),
        Some(c) => Outcome::Failed(format!("exit {c}")),
        None => Outcome::Failed(format!("{}", out.status)),
    }
}

/// Where udev 252's programs are: $UEVD_UDEV_PROGRAMS, the system, or an
/// unpacked Debian package.
fn real_programs() -> Result<PathBuf, String> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("UEVD_UDEV_PROGRAMS") {
        dirs.push(d.into());
    }
    for d in [
        "/lib/udev",
        "/usr/lib/udev",
        "/tmp/udev252/root/lib/udev",
        "/tmp/udev252/root/usr/lib/udev",
    ] {
        dirs.push(d.into());
    }
    for d in dirs {
        let scsi_id = d.join("scsi_id");
        if !scsi_id.exists() || !d.join("ata_id").exists() || !d.join("cdrom_id").exists() {
            continue;
        }
        let Ok(v) = Command::new(&scsi_id).arg("--version").output() else {
            continue;
        };
        if String::from_utf8_lossy(&v.stdout).starts_with("252") {
            return Ok(d);
        }
    }
    Err("udev 252's scsi_id, ata_id and cdrom_id not found (set UEVD_UDEV_PROGRAMS)".into())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// One comparison: a program, its arguments (`{dev}` stands for the node)
/// and whether uevd runs it in test mode.
#[derive(Clone)]
struct Job {
    device: String,
    program: &'static str,
    args: Vec<String>,
    test: bool,
    /// uevd must defer (the program's behaviour is undefined or timing
    /// dependent there).
    must_defer: bool,
}

fn job(device: &str, program: &'static str, args: &[&str]) -> Job {
    Job {
        device: device.into(),
        program,
        args: args.iter().map(|s| s.to_string()).collect(),
        test: false,
        must_defer: false,
    }
}

impl Job {
    fn args_for(&self, node: &str) -> Vec<String> {
        self.args.iter().map(|a| a.replace("{dev}", node)).collect()
    }

    fn describe(&self, node: &str) -> String {
        let mut s = format!("{} {}", self.program, self.args_for(node).join(" "));
        if self.test {
            s.push_str(" (uevd in test mode)");
        }
        s
    }
}

/// Tallies and prints comparisons.
#[derive(Default)]
struct Report {
    same: usize,
    /// Of the identical ones: exit 0 with output, non-zero exit.
    printed: usize,
    failed: usize,
    /// Requests logged on the uevd side and found identical.
    requests: usize,
    deferred: BTreeMap<String, usize>,
    differences: Vec<String>,
    /// Per program: identical, deferred, different.
    by_program: BTreeMap<&'static str, [usize; 3]>,
}

fn is_lock_line(l: &str) -> bool {
    l.starts_with("ioctl 0x5321 ") || l.starts_with("ioctl 0x5329 ")
}

impl Report {
    fn compare(
        &mut self,
        what: &str,
        job: &Job,
        real: &Outcome,
        uevd: &Outcome,
        logs: Option<(&str, &str)>,
        quiet: bool,
    ) {
        let mut problem = None;
        match (real, uevd) {
            (_, Outcome::Deferred(why)) => {
                self.by_program.entry(job.program).or_default()[1] += 1;
                println!("[deferred] {what}: {why}");
                let key = why
                    .split(':')
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(":")
                    .chars()
                    .filter(|c| !c.is_ascii_digit())
                    .collect::<String>();
                *self.deferred.entry(key).or_default() += 1;
                return;
            }
            (Outcome::Printed(a), Outcome::Printed(b)) if a == b => {}
            (Outcome::Failed(_), Outcome::Failed(_)) => {}
            _ => problem = Some(format!("udev: {real:?}\n  uevd: {uevd:?}")),
        }
        if problem.is_none() && job.must_defer {
            problem = Some(format!("uevd answered where it must defer: {uevd:?}"));
        }
        if let (None, Some((real_log, uevd_log))) = (&problem, logs) {
            let expected: Vec<&str> = real_log
                .lines()
                .filter(|l| !(job.test && is_lock_line(l)))
                .collect();
            let got: Vec<&str> = uevd_log.lines().collect();
            if expected != got {
                problem = Some(format!(
                    "same output, different requests\n  udev: {expected:?}\n  uevd: {got:?}"
                ));
            } else {
                self.requests += got.len();
            }
        }
        match problem {
            None => {
                self.by_program.entry(job.program).or_default()[0] += 1;
                self.same += 1;
                match real {
                    Outcome::Printed(_) => self.printed += 1,
                    _ => self.failed += 1,
                }
                if !quiet {
                    let summary = match real {
                        Outcome::Printed(s) => format!("{} properties", s.lines().count()),
                        other => format!("{other:?}"),
                    };
                    println!("[same] {what}: {summary}");
                }
            }
            Some(p) => {
                self.by_program.entry(job.program).or_default()[2] += 1;
                println!("[DIFF] {what}\n  {p}");
                self.differences.push(format!("{what}\n  {p}"));
            }
        }
    }

    fn finish(&self, name: &str) {
        println!(
            "{name}: {} identical ({} printed, {} failed alike; {} requests compared), \
             {} deferred to the program, {} different",
            self.same,
            self.printed,
            self.failed,
            self.requests,
            self.deferred.values().sum::<usize>(),
            self.differences.len()
        );
        for (program, [same, deferred, different]) in &self.by_program {
            println!("  {program}: {same} identical, {deferred} deferred, {different} different");
        }
        for (why, n) in &self.deferred {
            println!("  deferred {n}x: {why}");
        }
        assert!(
            self.differences.is_empty(),
            "{} differences:\n{}",
            self.differences.len(),
            self.differences.join("\n")
        );
    }
}

// ---------------------------------------------------------------------
// Scripted devices through the LD_PRELOAD responder.

/// A small deterministic generator for the random devices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// Text the way devices fill identification fields, odd bytes
    /// included: padding, UTF-8, invalid UTF-8, escapes, separators.
    fn text(&mut self, len: usize) -> Vec<u8> {
        const POOL: &[&[u8]] = &[
            b"A",
            b"b",
            b"Z",
            b"0",
            b"7",
            b" ",
            b" ",
            b"  ",
            b"-",
            b"_",
            b".",
            b"/",
            b"=",
            b"\\",
            b"x",
            b"\\x2f",
            b"#",
            b"+",
            b":",
            b"@",
            b"\xc3\xa9",
            b"\xe2\x82\xac",
            b"\xff",
            b"\x80",
            b"\t",
            b"\x01",
            b"\x7f",
            b"\"",
            b"'",
            b"$",
            b"%",
        ];
        let mut v = Vec::new();
        while v.len() < len {
            let piece: &[u8] = self.pick::<&[u8]>(POOL);
            v.extend_from_slice(piece);
        }
        v.truncate(len);
        if self.chance(5) && len > 0 {
            let i = self.below(len as u64) as usize;
            v[i] = 0;
        }
        v
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// A reply that sometimes goes wrong in one of the ways devices do.
fn flaky(rng: &mut Rng, good: Reply) -> Reply {
    match rng.below(40) {
        0 => Reply::check(sense_fixed(ILLEGAL_REQUEST, 0x24, 0)),
        1 => Reply::check(sense_desc(ILLEGAL_REQUEST, 0x20, 0, &[])),
        2 => Reply::check(sense_fixed(UNIT_ATTENTION, 0x29, 0)),
        3 => Reply::check(sense_fixed(RECOVERED_ERROR, 0x17, 1)).with_data(good.data),
        4 => Reply {
            host: DID_TRANSPORT_DISRUPTED,
            ..Reply::default()
        },
        5 => Reply {
            status: 0x08,
            ..Reply::default()
        },
        6 => Reply::fail(libc::EIO),
        7 => {
            let n = rng.below(good.data.len() as u64 + 1) as usize;
            Reply::data(good.data[..n].to_vec())
        }
        _ => good,
    }
}

fn random_scsi(rng: &mut Rng) -> Script {
    let mut s = Script::new();
    if rng.chance(85) {
        s.block_node();
    }
    let ptype = *rng.pick(&[0u8, 0, 0, 0, 5, 1, 0xe, 0x14, 0x1f]);
    let vendor = rng.text(8);
    let product = rng.text(16);
    let rev = rng.text(4);
    let std = std_inquiry(ptype, &vendor, &product, &rev);
    let std = flaky(rng, Reply::data(std));
    s.both(&[0x12, 0x00], std);

    let mut pages: Vec<u8> = vec![0x00];
    for p in [0x80u8, 0x83, 0x86, 0xb0] {
        if rng.chance(70) {
            pages.push(p);
        }
    }
    if rng.chance(10) {
        pages.push(0x83);
    }
    if rng.chance(10) {
        pages.reverse();
    }
    let p0 = if rng.chance(5) {
        // Standard INQUIRY data where page 0 should be.
        std_inquiry(ptype, &vendor, &product, &rev)
    } else {
        vpd(ptype, 0x00, &pages)
    };
    s.both(&[0x12, 0x01, 0x00], flaky(rng, Reply::data(p0)));

    let serial_len = *rng.pick(&[0usize, 5, 8, 12, 20, 40, 200, 231, 232]);
    let serial = rng.text(serial_len);
    let mut p80 = vpd(ptype, 0x80, &serial);
    if rng.chance(5) {
        p80[1] = 0x81;
    }
    s.both(&[0x12, 0x01, 0x80], flaky(rng, Reply::data(p80)));

    let mut p83 = Vec::new();
    for _ in 0..rng.below(6) {
        let code_set = *rng.pick(&[1u8, 1, 2, 2, 3, 0x61, 0x52]);
        let assoc = *rng.pick(&[0x00u8, 0x00, 0x10, 0x20, 0x30, 0x80, 0x90]);
        let kind = *rng.pick(&[0u8, 1, 2, 3, 3, 3, 4, 5, 5, 8]);
        let len = *rng.pick(&[0usize, 1, 4, 8, 8, 12, 16, 16, 20, 40]);
        let mut id = if code_set & 0xf == 2 {
            rng.text(len)
        } else {
            rng.bytes(len)
        };
        if kind == 3 && !id.is_empty() && code_set & 0xf == 1 {
            id[0] = (*rng.pick(&[2u8, 3, 5, 6]) << 4) | (id[0] & 0xf);
        }
        p83.extend(designator(code_set, assoc | kind, &id));
    }
    let mut page = vpd(ptype, 0x83, &p83);
    page.truncate(254);
    if rng.chance(8) {
        // An EMC-style SCSI-2 page: the WWN right after the header.
        page = vec![ptype, 0x83, 0, 16];
        page.extend(rng.bytes(16));
        page[6] |= 1;
    }
    if rng.chance(5) {
        let n = page.len().saturating_sub(4) as u16 + rng.below(16) as u16;
        page[2..4].copy_from_slice(&n.to_be_bytes());
    }
    s.both(&[0x12, 0x01, 0x83], flaky(rng, Reply::data(page)));
    s.both(
        &[0x12, 0x01],
        Reply::check(sense_fixed(ILLEGAL_REQUEST, 0x24, 0)),
    );
    s.otherwise_invalid_opcode();
    s
}

fn random_identify(rng: &mut Rng) -> Identify {
    let mut id = Identify::new();
    for w in 0..256 {
        if rng.chance(30) {
            id.word(w, rng.next() as u16);
        }
    }
    let serial_len = *rng.pick(&[0usize, 7, 20]);
    let serial = rng.text(serial_len);
    let fw = rng.text(8);
    let model_len = *rng.pick(&[13usize, 40]);
    let model = rng.text(model_len);
    id.string(10, 20, &serial)
        .string(23, 8, &fw)
        .string(27, 40, &model);
    if rng.chance(50) {
        id.word(
            0,
            *rng.pick(&[0x0040u16, 0x85c0, 0x8580, 0x81c0, 0x848a, 0x844a, 0x8780]),
        );
    }
    if rng.chance(50) {
        id.word(108, 0x5000 | (rng.next() as u16 & 0x0fff));
    }
    if rng.chance(30) {
        id.word(217, *rng.pick(&[0u16, 1, 0x400, 0x401, 5400, 7200, 0xffff]));
    }
    if rng.chance(30) {
        id.word(76, *rng.pick(&[0u16, 0xffff, 2, 4, 6, 0x100]));
    }
    id
}

fn random_ata(rng: &mut Rng) -> Script {
    let id = random_identify(rng);
    let mut s = Script::new();
    if rng.chance(85) {
        s.block_node();
    }
    let ptype = *rng.pick(&[0u8, 0, 0, 0x14, 5, 5, 1]);
    let inq = std_inquiry(ptype, b"ATA     ", &id.hdio()[54..70], &id.hdio()[46..50]);
    s.both(&[0x12, 0x00], flaky(rng, Reply::data(inq)));
    let sense = match rng.below(5) {
        0 => sense_fixed(RECOVERED_ERROR, 0, 0x1d),
        1 => sense_fixed(ILLEGAL_REQUEST, 0x20, 0),
        2 => Vec::new(),
        _ => sense_desc(RECOVERED_ERROR, 0, 0x1d, &ata_return_descriptor()),
    };
    let data = if rng.chance(10) {
        vec![0u8; 512]
    } else {
        id.0.to_vec()
    };
    let pt = if rng.chance(80) {
        Reply::check(sense).with_data(data)
    } else {
        Reply::data(data)
    };
    s.both(&[0xa1], pt.clone());
    s.both(&[0x85], pt);
    if rng.chance(70) {
        s.ioctl(HDIO_GET_IDENTITY, Reply::data(random_identify(rng).hdio()));
    } else {
        s.ioctl(HDIO_GET_IDENTITY, Reply::fail(libc::EINVAL));
    }
    s.otherwise_invalid_opcode();
    s
}

fn random_drive(rng: &mut Rng) -> Script {
    let known: &[u16] = &[
        0x01, 0x02, 0x03, 0x04, 0x05, 0x08, 0x09, 0x0a, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
        0x17, 0x18, 0x1a, 0x1b, 0x20, 0x21, 0x22, 0x2a, 0x2b, 0x40, 0x41, 0x42, 0x43, 0x50, 0x51,
        0x52, 0x53, 0x58, 0x5a, 0x5b, 0x5c, 0x5d, 0x77, 0xffff,
    ];
    let profiles: Vec<u16> = (0..rng.below(12)).map(|_| *rng.pick(known)).collect();
    let current = if rng.chance(30) { 0 } else { *rng.pick(known) };
    let mut d = Drive::writer(current, None);
    d.profiles = if rng.chance(15) { None } else { Some(profiles) };
    d.asc_no_config = *rng.pick(&[0x20u8, 0x24, 0x25]);
    d.capability = rng.next() as i32 & 0x3fffff;
    d.status = *rng.pick(&[4, 4, 1, 2, 3, 0]);
    if rng.chance(80) {
        let mut info = disc_info(
            rng.below(4) as u8,
            rng.chance(30),
            rng.below(3) as u16,
            rng.below(300) as u16,
            rng.below(300) as u16,
        );
        if rng.chance(20) {
            info = rng.bytes(34);
            info[0] = 0;
            info[1] = 32;
        }
        d.disc_info = Some(info);
    }
    let n = rng.below(5);
    d.tracks = (0..n)
        .map(|i| {
            (
                *rng.pick(&[0x10u8, 0x14, 0x04, 0x00]),
                i as u8 + 1,
                i as u32 * 1000,
            )
        })
        .collect();
    d.sessions = rng.below(4) as u8;
    d.last_session_start = rng.below(400000) as u32;
    if rng.chance(50) {
        let mut b = vec![0u8; 32 * 2048];
        if rng.chance(50) {
            let at = *rng.pick(&[0usize, 100, 32768 + 5, 40000]);
            b[at] = 1;
        }
        d.blocks = Some(b);
    }
    if rng.chance(50) {
        d.dvd_structure = Some(vec![0, 6, 0, 0, *rng.pick(&[0u8, 2]), 0, 0, 0]);
    }
    if rng.chance(50) {
        d.format_capacities = Some(vec![
            0,
            0,
            0,
            *rng.pick(&[8u8, 16, 17, 24]),
            0,
            0,
            0,
            0,
            rng.below(4) as u8,
            0,
            0,
            0,
        ]);
    }
    let mut s = d.script();
    if rng.chance(10) {
        // A GET CONFIGURATION header that claims more than it returns.
        let mut header = vec![0u8; 8];
        header[3] = 200;
        header[7] = current as u8;
        s.rules.insert(
            1,
            Rule {
                kind: Kind::V3,
                request: 0,
                prefix: vec![0x46],
                reply: Reply::data(header),
            },
        );
    }
    s
}

/// A VPD page 0x83 whose declared length runs past the 254 bytes the
/// program asked for, with no usable designator before the end.
fn long_page83() -> Script {
    let mut s = scsi_debug(0, 3, 0);
    let mut p83 = Vec::new();
    while p83.len() < 240 {
        p83.extend(designator(0x01, 0x24, &[0; 12]));
    }
    let mut page = vpd(0, 0x83, &p83);
    page[2..4].copy_from_slice(&300u16.to_be_bytes());
    page.truncate(254);
    s.rules.insert(
        1,
        Rule {
            kind: Kind::V3,
            request: 0,
            prefix: vec![0x12, 0x01, 0x83],
            reply: Reply::data(page),
        },
    );
    s
}

fn with_page(mut s: Script, page: u8, reply: Reply) -> Script {
    s.rules.insert(
        1,
        Rule {
            kind: Kind::V3,
            request: 0,
            prefix: vec![0x12, 0x01, page],
            reply,
        },
    );
    s
}

fn with_rule(mut s: Script, prefix: &[u8], reply: Reply) -> Script {
    s.rules.insert(
        1,
        Rule {
            kind: Kind::V3,
            request: 0,
            prefix: prefix.to_vec(),
            reply,
        },
    );
    s
}

/// Hand-made devices, each probing one corner of the programs.
fn corner_devices() -> Vec<(String, Script, Vec<&'static str>)> {
    let mut v: Vec<(String, Script, Vec<&'static str>)> = Vec::new();
    let scsi = vec!["scsi_id"];
    let all = vec!["scsi_id", "ata_id", "cdrom_id"];
    v.push(("sdebug_t17".into(), scsi_debug(0, 17, 0), all.clone()));
    v.push(("sdebug_h2_t1".into(), scsi_debug(2, 1, 0), scsi.clone()));
    v.push(("sdebug_cd".into(), scsi_debug(0, 0, 5), all.clone()));
    v.push(("virtio_scsi".into(), qemu_virtio_scsi("vsd"), all.clone()));
    v.push((
        "ahci".into(),
        libata_disk(&Identify::qemu_hd("QM00005"), true),
        all.clone(),
    ));
    v.push((
        "ahci_fixed_sense".into(),
        libata_disk(&Identify::qemu_hd("QM00007"), false),
        all.clone(),
    ));
    // bsg-style node: v4 headers answered.
    let mut bsg = scsi_debug(0, 5, 0);
    bsg.rules.remove(0);
    let mut v4: Vec<Rule> = bsg
        .rules
        .iter()
        .filter(|r| r.kind == Kind::V3)
        .cloned()
        .map(|mut r| {
            r.kind = Kind::V4;
            r
        })
        .collect();
    v4.append(&mut bsg.rules);
    bsg.rules = v4;
    v.push(("bsg_node".into(), bsg, scsi.clone()));
    // An sg character node: the sg driver rejects v4 headers with ENOSYS.
    let mut sg = scsi_debug(0, 6, 0);
    sg.rules[0] = Rule {
        kind: Kind::V4,
        request: 0,
        prefix: vec![],
        reply: Reply::fail(libc::ENOSYS),
    };
    v.push(("sg_char_node".into(), sg, all.clone()));
    // NAA 6 with vendor extension, EUI-64, T10 only, ASCII NAA, NUL in it.
    let naa6: Vec<u8> = [
        0x60, 0x05, 0x07, 0x68, 0x01, 0x80, 0x80, 0x2a, 0xe8, 0, 0, 0, 0, 0, 0, 0x1f,
    ]
    .to_vec();
    v.push((
        "naa6_ext".into(),
        with_page(
            scsi_debug(0, 1, 0),
            0x83,
            Reply::data(vpd(
                0,
                0x83,
                &[
                    designator(0x01, 0x03, &naa6),
                    designator(0x01, 0x15, &[0, 0, 0, 7]),
                ]
                .concat(),
            )),
        ),
        scsi.clone(),
    ));
    v.push((
        "eui64".into(),
        with_page(
            scsi_debug(0, 1, 0),
            0x83,
            Reply::data(vpd(
                0,
                0x83,
                &designator(
                    0x01,
                    0x02,
                    &[0x00, 0x25, 0x38, 0xb1, 0x71, 0xb0, 0x2e, 0x46],
                ),
            )),
        ),
        scsi.clone(),
    ));
    v.push((
        "t10_only".into(),
        with_page(
            scsi_debug(0, 1, 0),
            0x83,
            Reply::data(vpd(
                0,
                0x83,
                &designator(0x02, 0x01, b"IET     VIRTUAL-DISK    lun 1  "),
            )),
        ),
        scsi.clone(),
    ));
    v.push((
        "naa_ascii".into(),
        with_page(
            scsi_debug(0, 1, 0),
            0x83,
            Reply::data(vpd(
                0,
                0x83,
                &designator(0x02, 0x03, b"600a0b8000\x00abcdefghijklmn opq"),
            )),
        ),
        scsi.clone(),
    ));
    // Vendor with a NUL: vendor-specific designators and page 0x80 both
    // refuse to prepend it.
    let mut odd = qemu_virtio_scsi("vsd");
    odd.rules.insert(
        1,
        Rule {
            kind: Kind::V3,
            request: 0,
            prefix: vec![0x12, 0x00],
            reply: Reply::data(std_inquiry(0, b"AB\0DEFGH", b"MODEL           ", b"1.0 ")),
        },
    );
    odd = with_page(odd, 0x00, Reply::data(vpd(0, 0, &[0x00, 0x83, 0x80])));
    odd = with_page(odd, 0x80, Reply::data(vpd(0, 0x80, b"  SER 1  ")));
    v.push(("vendor_nul".into(), odd, scsi.clone()));
    v.push((
        "usn_control".into(),
        with_page(
            scsi_debug(0, 1, 0),
            0x80,
            Reply::data(vpd(0, 0x80, b"AB\x01CD")),
        ),
        scsi.clone(),
    ));
    v.push((
        "usn_utf8_spaces".into(),
        with_page(
            scsi_debug(0, 1, 0),
            0x80,
            Reply::data(vpd(0, 0x80, "  WD-caf\u{e9} 42  ".as_bytes())),
        ),
        scsi.clone(),
    ));
    v.push((
        "usn_231".into(),
        with_page(
            scsi_debug(0, 1, 0),
            0x80,
            Reply::data(vpd(0, 0x80, &[b'7'; 231])),
        ),
        scsi.clone(),
    ));
    v.push((
        "usn_232".into(),
        with_page(
            scsi_debug(0, 1, 0),
            0x80,
            Reply::data(vpd(0, 0x80, &[b'7'; 232])),
        ),
        scsi.clone(),
    ));
    v.push((
        "no_vpd".into(),
        with_rule(
            scsi_debug(0, 1, 0),
            &[0x12, 0x01],
            Reply::check(sense_fixed(ILLEGAL_REQUEST, 0x24, 0)),
        ),
        scsi.clone(),
    ));
    v.push((
        "unit_attention".into(),
        with_rule(
            scsi_debug(0, 1, 0),
            &[0x12, 0x00],
            Reply::check(sense_fixed(UNIT_ATTENTION, 0x29, 0)),
        ),
        all.clone(),
    ));
    v.push((
        "recovered".into(),
        with_rule(
            scsi_debug(0, 1, 0),
            &[0x12, 0x00],
            Reply::check(sense_fixed(RECOVERED_ERROR, 0x17, 1)).with_data(std_inquiry(
                0,
                b"REC     ",
                b"OVERED          ",
                b"1234",
            )),
        ),
        scsi.clone(),
    ));
    v.push((
        "retry_83".into(),
        with_page(
            scsi_debug(0, 1, 0),
            0x83,
            Reply {
                host: DID_TRANSPORT_DISRUPTED,
                ..Reply::default()
            },
        ),
        scsi.clone(),
    ));
    v.push((
        "desc_sense".into(),
        with_rule(
            scsi_debug(0, 1, 0),
            &[0x12, 0x01],
            Reply::check(sense_desc(ILLEGAL_REQUEST, 0x24, 0, &[])),
        ),
        scsi.clone(),
    ));
    v.push((
        "short_inquiry".into(),
        with_rule(
            scsi_debug(0, 1, 0),
            &[0x12, 0x00],
            Reply::data(vec![0u8, 0, 5, 2, 31]),
        ),
        scsi.clone(),
    ));
    v.push((
        "page0_dup83".into(),
        with_page(
            with_page(
                scsi_debug(0, 1, 0),
                0x00,
                Reply::data(vpd(0, 0, &[0x83, 0x00, 0x83, 0x80])),
            ),
            0x83,
            Reply::data(vpd(0, 0x84, &[])),
        ),
        scsi.clone(),
    ));
    v.push((
        "page0_is_std".into(),
        with_page(
            scsi_debug(0, 1, 0),
            0x00,
            Reply::data(std_inquiry(0, b"Linux   ", b"scsi_debug      ", b"0191")),
        ),
        scsi.clone(),
    ));
    v.push((
        "tgtgroups".into(),
        with_page(
            scsi_debug(0, 1, 0),
            0x83,
            Reply::data(vpd(
                0,
                0x83,
                &[
                    designator(0x61, 0x95, &[0, 0, 0x12, 0x34]),
                    designator(0x01, 0x05, &[0, 0, 0, 9]),
                    designator(0x01, 0x25, &[0, 0, 0, 8]),
                ]
                .concat(),
            )),
        ),
        scsi.clone(),
    ));
    let mut emc = vec![0u8, 0x83, 0, 16];
    emc.extend_from_slice(&[
        0x60, 0x06, 0x04, 0x80, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde,
    ]);
    v.push((
        "pre_spc3".into(),
        with_page(scsi_debug(0, 1, 0), 0x83, Reply::data(emc)),
        scsi.clone(),
    ));
    let mut long_emc = vec![0u8, 0x83, 0, 200];
    long_emc.extend(vec![0x11; 200]);
    long_emc[6] = 0x11;
    v.push((
        "pre_spc3_long".into(),
        with_page(scsi_debug(0, 1, 0), 0x83, Reply::data(long_emc)),
        scsi.clone(),
    ));
    v.push((
        "eperm".into(),
        with_rule(scsi_debug(0, 1, 0), &[0x12], Reply::fail(libc::EPERM)),
        scsi.clone(),
    ));
    // ATA: every feature flag, an SSD, a PATA disk, ATAPI, odd strings.
    let mut f = Identify::qemu_hd("WD-WCC4N1234567");
    f.string(27, 40, b"WDC WD40EFRX-68N32N0")
        .word(82, 0x746b)
        .word(83, 0x7f69 | (1 << 9) | (1 << 5) | (1 << 3) | 1)
        .word(85, 0x7469)
        .word(86, 0xbc41 | (1 << 9) | (1 << 3))
        .word(89, 0x01f4)
        .word(90, 0x01f4)
        .word(91, 0x80fe)
        .word(94, 0x80fe)
        .word(128, 0x0139)
        .word(76, 0x070e)
        .word(217, 5400)
        .word(108, 0x5001)
        .word(109, 0x4ee6)
        .word(110, 0x5a1b)
        .word(111, 0x2c3d);
    v.push(("ata_features".into(), libata_disk(&f, true), vec!["ata_id"]));
    let mut ssd = Identify::qemu_hd("S3Z9NB0K123456X ");
    ssd.string(27, 40, b"  Samsung SSD 860 EVO 500GB")
        .word(217, 1)
        .word(76, 0xffff)
        .word(0, 0x848a);
    v.push(("ata_ssd".into(), libata_disk(&ssd, false), vec!["ata_id"]));
    let mut nos = Identify::qemu_hd("");
    nos.string(27, 40, "caf\u{e9} = disk \\x41".as_bytes())
        .word(76, 0)
        .word(83, 0x4004);
    v.push((
        "ata_no_serial".into(),
        libata_disk(&nos, true),
        vec!["ata_id"],
    ));
    let mut zero = libata_disk(&Identify::qemu_hd("QM1"), true);
    zero = with_rule(
        zero,
        &[0xa1],
        Reply::check(sense_fixed(RECOVERED_ERROR, 0, 0x1d)).with_data(vec![0u8; 512]),
    );
    v.push(("ata_zero_identify".into(), zero, vec!["ata_id"]));
    let mut nodesc = libata_disk(&Identify::qemu_hd("QM2"), true);
    nodesc = with_rule(nodesc, &[0xa1], Reply::data(f.0.to_vec()));
    v.push(("ata_no_descriptor".into(), nodesc, vec!["ata_id"]));
    let mut atapi = Identify::qemu_hd("QM00003");
    atapi.word(0, 0x85c0).string(27, 40, b"QEMU DVD-ROM");
    let mut cd = Drive::qemu_dvd_rom(true).script();
    cd = with_rule(
        cd,
        &[0x85],
        Reply::check(sense_desc(
            RECOVERED_ERROR,
            0,
            0x1d,
            &ata_return_descriptor(),
        ))
        .with_data(atapi.0.to_vec()),
    );
    v.push(("atapi_cd".into(), cd, all.clone()));
    // Optical drives and media.
    v.push((
        "qemu_cd_empty".into(),
        Drive::qemu_dvd_rom(false).script(),
        all.clone(),
    ));
    let mut blank = Drive::writer(0x1a, Some(disc_info(2, true, 1, 1, 1)));
    blank.blocks = Some(vec![0u8; 32 * 2048]);
    v.push(("dvd_plus_rw_blank".into(), blank.script(), vec!["cdrom_id"]));
    let mut used = Drive::writer(0x1a, Some(disc_info(2, true, 1, 1, 1)));
    let mut b = vec![0u8; 32 * 2048];
    b[32768 + 1] = b'C';
    used.blocks = Some(b);
    used.tracks = vec![(0x14, 1, 0)];
    v.push(("dvd_plus_rw_iso".into(), used.script(), vec!["cdrom_id"]));
    let mut ram = Drive::writer(0x12, Some(disc_info(3, true, 1, 1, 1)));
    ram.dvd_structure = Some(vec![0, 6, 0, 0, 0, 0, 0, 0]);
    ram.format_capacities = Some(vec![0, 0, 0, 16, 0, 0x22, 0x3e, 0x60, 2, 0, 8, 0]);
    ram.blocks = Some(vec![0u8; 32 * 2048]);
    v.push(("dvd_ram".into(), ram.script(), vec!["cdrom_id"]));
    let mut ro = Drive::writer(0x13, Some(disc_info(1, true, 1, 1, 1)));
    ro.tracks = vec![(0x14, 1, 0)];
    v.push(("dvd_rw_ro_appendable".into(), ro.script(), vec!["cdrom_id"]));
    let mut multi = Drive::writer(0x09, Some(disc_info(1, false, 2, 3, 3)));
    multi.tracks = vec![(0x10, 1, 0), (0x10, 2, 20000), (0x14, 3, 40000)];
    multi.sessions = 2;
    multi.last_session_start = 40000;
    v.push(("cd_r_multisession".into(), multi.script(), vec!["cdrom_id"]));
    let mut old = Drive::writer(0, Some(disc_info(0, true, 1, 1, 1)));
    old.profiles = None;
    old.asc_no_config = 0x20;
    old.status = 4;
    v.push(("pre_mmc2_cdrw".into(), old.script(), vec!["cdrom_id"]));
    let mut old2 = Drive::writer(0, None);
    old2.profiles = None;
    old2.asc_no_config = 0x24;
    old2.capability = CDC_BASICS | CDC_CD_R;
    v.push(("pre_mmc2_nodisc".into(), old2.script(), vec!["cdrom_id"]));
    let mut bd = Drive::writer(0x41, Some(disc_info(1, false, 1, 1, 1)));
    bd.tracks = vec![(0x14, 1, 0)];
    v.push(("bd_r_srm".into(), bd.script(), vec!["cdrom_id"]));
    v.push((
        "mrw_profile".into(),
        Drive::writer(0x5b, None).script(),
        vec!["cdrom_id"],
    ));
    let mut trunc = Drive::qemu_dvd_rom(true).script();
    trunc = with_rule(
        trunc,
        &[0x46],
        Reply::data(vec![0, 0, 0, 100, 0, 0, 0, 8, 0, 0, 3, 8, 0, 8, 1, 0]),
    );
    v.push(("config_truncated".into(), trunc, vec!["cdrom_id"]));
    v
}

/// Jobs that must defer (device, program, an argument they have): the
/// program would read memory the device never wrote, overflow a buffer,
/// or was refused an ioctl uevd cannot judge.
const MUST_DEFER: &[(&str, &str, &str)] = &[
    ("long_page83", "scsi_id", ""),
    ("pre_spc3_long", "scsi_id", "pre-spc3-83"),
    ("eperm", "scsi_id", ""),
    ("config_truncated", "cdrom_id", ""),
];

fn jobs_for(device: &str, program: &'static str, full: bool) -> Vec<Job> {
    let mut v = Vec::new();
    match program {
        "scsi_id" => {
            v.push(job(
                device,
                program,
                &["--export", "--whitelisted", "-d", "{dev}"],
            ));
            if full {
                for a in [
                    &["--export", "--whitelisted", "--page=0x80", "-d", "{dev}"][..],
                    &["-x", "-g", "-p", "0x83", "{dev}"],
                    &[
                        "--export",
                        "--whitelisted",
                        "--page=pre-spc3-83",
                        "--device",
                        "{dev}",
                    ],
                    &["-gxu", "--sg-version=3", "-d{dev}"],
                    &["{dev}", "--exp", "--white", "-s", "4"],
                ] {
                    v.push(job(device, program, a));
                }
            }
        }
        "ata_id" => {
            v.push(job(device, program, &["--export", "{dev}"]));
            if full {
                v.push(job(device, program, &["{dev}", "-x", "--bogus"]));
            }
        }
        _ => {
            v.push(job(device, program, &["--lock-media", "{dev}"]));
            let mut t = job(device, program, &["--lock-media", "{dev}"]);
            t.test = true;
            v.push(t);
            if full {
                v.push(job(device, program, &["{dev}"]));
                v.push(job(device, program, &["-d", "-l", "-u", "{dev}"]));
                v.push(job(device, program, &["--eject-media", "{dev}"]));
            }
        }
    }
    for j in &mut v {
        let args = j.args.join(" ");
        j.must_defer = MUST_DEFER
            .iter()
            .any(|&(d, p, a)| d == device && p == program && args.contains(a));
    }
    v
}

/// Option handling, config files and failure exits, on one device.
fn option_jobs(dir: &Path) -> Vec<Job> {
    let conf = |name: &str, text: &str| {
        let p = dir.join(name);
        fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let c1 = conf(
        "by-vendor.conf",
        "# comment\n\n  VENDOR=Linux, MODEL=scsi_debug, OPTIONS=-g -p 0x80\nOPTIONS=-b\n",
    );
    let c2 = conf(
        "quoted.conf",
        "vendor=\"Linux\",options=\"--whitelisted --page=0x80\"\n",
    );
    let c3 = conf("blacklist.conf", "VENDOR=Linux,OPTIONS=--blacklisted\n");
    let c4 = conf("broken.conf", "MODEL=x,OPTIONS=-g\n");
    let c5 = conf(
        "escaped.conf",
        "VENDOR=Li\\nux,OPTIONS=-g\nVENDOR=Lin,MODEL=scsi,OPTIONS=-g -p pre-spc3-83\n",
    );
    let c6 = conf("bad-page.conf", "VENDOR=Linux,OPTIONS=-p 0x81 -g\n");
    let d = "sdebug_t17";
    let mut v = Vec::new();
    for a in [
        vec!["--export", "-d", "{dev}"],
        vec!["--export", "--whitelisted", "--page=0x99", "-d", "{dev}"],
        vec!["--export", "--whitelisted", "-s", "5", "-d", "{dev}"],
        vec!["--export", "--whitelisted"],
        vec!["--export", "--whitelisted", "--ver", "-d", "{dev}"],
        vec!["--export", "--whitelisted", "-d", "/nonexistent/sdz"],
        vec!["--export", "--whitelisted", "-d", "{dev}", "--", "-b"],
        vec!["--export", "--blacklisted", "--whitelisted", "-d", "{dev}"],
        vec!["--export", "--whitelisted", "-b", "-d", "{dev}"],
        vec!["--whitelisted", "-d", "{dev}"],
        vec!["--export", "--config", &c1, "-d", "{dev}"],
        vec!["--export", "-f", &c2, "-d", "{dev}"],
        vec!["--export", "-g", "-f", &c3, "-d", "{dev}"],
        vec!["--export", "-g", "-f", &c4, "-d", "{dev}"],
        vec!["--export", "-f", &c5, "-d", "{dev}"],
        vec!["--export", "-f", &c6, "-d", "{dev}"],
    ] {
        v.push(job(d, "scsi_id", &a));
    }
    for a in [
        vec!["--export"],
        vec!["--export", "/nonexistent/sdz"],
        vec!["{dev}"],
        vec!["-x", "--help", "{dev}"],
    ] {
        v.push(job(d, "ata_id", &a));
    }
    for a in [
        vec![],
        vec!["/nonexistent/sr9"],
        vec!["--bogus", "{dev}"],
        vec!["--unlock-media", "{dev}"],
        vec!["-e", "{dev}"],
        vec!["{dev}", "--lock", "--debug"],
    ] {
        v.push(job("qemu_cd_empty", "cdrom_id", &a));
    }
    v
}

/// Lines the lab's udevd stored for these devices (lab/out/*/db.txt):
/// the real programs must print them for the models to be faithful.
const LAB: &[(&str, &str, &str)] = &[
    (
        "sdebug_t17",
        "scsi_id",
        "ID_SCSI=1\nID_VENDOR=Linux\nID_VENDOR_ENC=Linux\\x20\\x20\\x20\nID_MODEL=scsi_debug\n\
         ID_MODEL_ENC=scsi_debug\\x20\\x20\\x20\\x20\\x20\\x20\nID_REVISION=0191\nID_TYPE=disk\n\
         ID_SERIAL=33333333000004a38\nID_SERIAL_SHORT=3333333000004a38\nID_WWN=0x3333333000004a38\n\
         ID_WWN_WITH_EXTENSION=0x3333333000004a38\nID_TARGET_PORT=100\nID_SCSI_SERIAL=19000\n",
    ),
    (
        "virtio_scsi",
        "scsi_id",
        "ID_SCSI=1\nID_VENDOR=QEMU\nID_VENDOR_ENC=QEMU\\x20\\x20\\x20\\x20\nID_MODEL=QEMU_HARDDISK\n\
         ID_MODEL_ENC=QEMU\\x20HARDDISK\\x20\\x20\\x20\nID_REVISION=2.5+\nID_TYPE=disk\n\
         ID_SERIAL=0QEMU_QEMU_HARDDISK_vsd\nID_SERIAL_SHORT=vsd\n",
    ),
    (
        "ahci",
        "ata_id",
        "ID_ATA=1\nID_TYPE=disk\nID_BUS=ata\nID_MODEL=QEMU_HARDDISK\nID_MODEL_ENC=QEMU\\x20HARDDISK\
         \\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20\
         \\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20\\x20\nID_REVISION=2.5+\nID_SERIAL=QEMU_HARDDISK_QM00005\n\
         ID_SERIAL_SHORT=QM00005\nID_ATA_WRITE_CACHE=1\nID_ATA_WRITE_CACHE_ENABLED=1\n\
         ID_ATA_FEATURE_SET_SMART=1\nID_ATA_FEATURE_SET_SMART_ENABLED=1\nID_ATA_SATA=1\n",
    ),
];

fn build_fakedev(dir: &Path) -> Result<PathBuf, String> {
    let src = dir.join("fakedev.c");
    fs::write(&src, FAKEDEV_C).map_err(|e| e.to_string())?;
    let so = dir.join("fakedev.so");
    let out = Command::new("cc")
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src)
        .arg("-ldl")
        .output()
        .map_err(|e| format!("no C compiler to build the responder: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building the responder failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(so)
}

fn encode_job(j: &Job, node: &str) -> String {
    format!(
        "{}\t{}\t{}\n",
        j.program,
        u8::from(j.test),
        j.args_for(node).join("\u{1f}")
    )
}

fn encode_outcome(o: &Outcome) -> String {
    match o {
        Outcome::Printed(s) => format!("printed\n{s}"),
        Outcome::Failed(s) => format!("failed\n{s}"),
        Outcome::Deferred(s) => format!("deferred\n{s}"),
    }
}

fn decode_outcome(s: &str) -> Outcome {
    let (kind, rest) = s.split_once('\n').unwrap_or((s, ""));
    match kind {
        "printed" => Outcome::Printed(rest.into()),
        "failed" => Outcome::Failed(rest.into()),
        _ => Outcome::Deferred(rest.into()),
    }
}

/// The uevd side of `scripted_devices_match_udev`, run in a child process
/// that has the responder preloaded. Does nothing when run directly.
#[test]
fn emulated_child() {
    let Some(dir) = std::env::var_os("UEVD_PROGRAMS_CHILD") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let jobs = fs::read_to_string(dir.join("jobs")).unwrap();
    for (i, line) in jobs.lines().enumerate() {
        let mut f = line.splitn(3, '\t');
        let program = f.next().unwrap().to_string();
        let test = f.next().unwrap() == "1";
        let args: Vec<String> = f
            .next()
            .unwrap()
            .split('\u{1f}')
            .filter(|a| !a.is_empty())
            .map(String::from)
            .collect();
        let program: &'static str = match program.as_str() {
            "scsi_id" => "scsi_id",
            "ata_id" => "ata_id",
            _ => "cdrom_id",
        };
        std::env::set_var("UEVD_FAKEDEV_LOG", dir.join(format!("log/{i}.uevd")));
        let out = run_uevd(program, &args, test);
        fs::write(dir.join(format!("out/{i}")), encode_outcome(&out)).unwrap();
    }
}

#[test]
fn scripted_devices_match_udev() {
    let programs = match real_programs() {
        Ok(p) => p,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let so = match build_fakedev(dir) {
        Ok(so) => so,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let devs = dir.join("dev");
    fs::create_dir_all(&devs).unwrap();
    fs::create_dir_all(dir.join("log")).unwrap();
    fs::create_dir_all(dir.join("out")).unwrap();

    let mut devices: Vec<(String, Script, Vec<&'static str>, bool)> = corner_devices()
        .into_iter()
        .map(|(n, s, p)| (n, s, p, true))
        .collect();
    devices.push(("long_page83".into(), long_page83(), vec!["scsi_id"], false));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..150 {
        devices.push((
            format!("rand_scsi_{i}"),
            random_scsi(&mut rng),
            vec!["scsi_id"],
            i % 3 == 0,
        ));
    }
    for i in 0..100 {
        devices.push((
            format!("rand_ata_{i}"),
            random_ata(&mut rng),
            vec!["ata_id"],
            false,
        ));
    }
    for i in 0..100 {
        devices.push((
            format!("rand_drive_{i}"),
            random_drive(&mut rng),
            vec!["cdrom_id"],
            i % 4 == 0,
        ));
    }

    let mut jobs = Vec::new();
    for (name, script, progs, full) in &devices {
        fs::write(devs.join(name), script.to_bytes()).unwrap();
        for p in progs {
            jobs.extend(jobs_for(name, p, *full));
        }
    }
    jobs.extend(option_jobs(dir));

    let node = |j: &Job| devs.join(&j.device).to_string_lossy().into_owned();
    let env = |i: usize| {
        vec![
            ("LD_PRELOAD", so.to_string_lossy().into_owned()),
            ("UEVD_FAKEDEV_DIR", devs.to_string_lossy().into_owned()),
            (
                "UEVD_FAKEDEV_LOG",
                dir.join(format!("log/{i}.real"))
                    .to_string_lossy()
                    .into_owned(),
            ),
        ]
    };
    let real: Vec<Outcome> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| run_real(&programs.join(j.program), &j.args_for(&node(j)), &env(i)))
        .collect();

    let list: String = jobs.iter().map(|j| encode_job(j, &node(j))).collect();
    fs::write(dir.join("jobs"), list).unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "emulated_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("UEVD_PROGRAMS_CHILD", dir)
        .env("LD_PRELOAD", &so)
        .env("UEVD_FAKEDEV_DIR", &devs)
        .output()
        .unwrap();
    assert!(
        child.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&child.stderr)
    );

    let mut report = Report::default();
    for (i, j) in jobs.iter().enumerate() {
        let uevd = decode_outcome(&fs::read_to_string(dir.join(format!("out/{i}"))).unwrap());
        let real_log = fs::read_to_string(dir.join(format!("log/{i}.real"))).unwrap_or_default();
        let uevd_log = fs::read_to_string(dir.join(format!("log/{i}.uevd"))).unwrap_or_default();
        let what = format!("{}: {}", j.device, j.describe("DEV"));
        let quiet = j.device.starts_with("rand_");
        report.compare(
            &what,
            j,
            &real[i],
            &uevd,
            Some((&real_log, &uevd_log)),
            quiet,
        );
    }

    // The models against what the lab's udevd recorded.
    for (device, program, expected) in LAB {
        let j = jobs
            .iter()
            .position(|j| j.device == *device && j.program == *program)
            .unwrap();
        let got = &real[j];
        let want = Outcome::Printed(expected.to_string());
        println!(
            "[lab] {device} {program}: udev 252 on the model {} the lab's database",
            if *got == want {
                "reproduces"
            } else {
                "DIFFERS FROM"
            }
        );
        assert_eq!(
            *got, want,
            "model {device} does not reproduce the lab's {program} output"
        );
    }
    report.finish("scripted devices");
}

// ---------------------------------------------------------------------
// scsi_debug.

/// Unloads scsi_debug when dropped.
struct Module;

impl Drop for Module {
    fn drop(&mut self) {
        for _ in 0..50 {
            let ok = Command::new("modprobe")
                .args(["-r", "scsi_debug"])
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        eprintln!("warning: could not unload scsi_debug");
    }
}

const SDEBUG: &str = "/sys/bus/pseudo/drivers/scsi_debug";

fn load_scsi_debug(params: &[&str]) -> Result<Module, String> {
    let st = Command::new("modprobe")
        .arg("scsi_debug")
        .args(params)
        .status()
        .map_err(|e| format!("modprobe: {e}"))?;
    if !st.success() {
        return Err(format!("modprobe scsi_debug {} failed", params.join(" ")));
    }
    Ok(Module)
}

/// scsi_debug's logical units: (H:C:T:L, block node, sg node, bsg node).
fn scsi_debug_units(want: usize) -> Vec<(String, String, Option<String>, Option<String>)> {
    for _ in 0..100 {
        let mut units = Vec::new();
        for host in fs::read_dir(SDEBUG).into_iter().flatten().flatten() {
            let hp = host.path();
            let Ok(hosts) = fs::read_dir(&hp) else {
                continue;
            };
            for h in hosts
                .flatten()
                .filter(|h| h.file_name().to_string_lossy().starts_with("host"))
            {
                for t in fs::read_dir(h.path()).into_iter().flatten().flatten() {
                    if !t.file_name().to_string_lossy().starts_with("target") {
                        continue;
                    }
                    for lu in fs::read_dir(t.path()).into_iter().flatten().flatten() {
                        let hctl = lu.file_name().to_string_lossy().into_owned();
                        if !hctl.contains(':') {
                            continue;
                        }
                        let first = |sub: &str| {
                            fs::read_dir(lu.path().join(sub))
                                .ok()?
                                .flatten()
                                .next()
                                .map(|e| e.file_name().to_string_lossy().into_owned())
                        };
                        let Some(block) = first("block") else {
                            continue;
                        };
                        let sg = first("scsi_generic").map(|n| format!("/dev/{n}"));
                        let bsg = Some(format!("/dev/bsg/{hctl}"));
                        units.push((hctl, format!("/dev/{block}"), sg, bsg));
                    }
                }
            }
        }
        let ready = units.len() >= want && units.iter().all(|u| Path::new(&u.1).exists());
        if ready {
            units.sort();
            return units;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Vec::new()
}

fn compare_on_node(report: &mut Report, programs: &Path, j: &Job, node: &str) {
    let args = j.args_for(node);
    let real = run_real(&programs.join(j.program), &args, &[]);
    let uevd = run_uevd(j.program, &args, j.test);
    // Run for an event of the node (sharing its open node and sysfs
    // directory), the program says the same.
    if let Some(near) = run_uevd_near(j.program, &args, j.test, node) {
        assert_eq!(near, uevd, "{} for an event of the node", j.describe(node));
    }
    report.compare(&j.describe(node), j, &real, &uevd, None, false);
}

#[test]
fn scsi_debug_disks_match_udev() {
    let programs = match real_programs() {
        Ok(p) => p,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    if !is_root() {
        println!("skipped: loading scsi_debug needs root");
        return;
    }
    if Path::new(SDEBUG).exists() {
        println!("skipped: scsi_debug is already loaded (in use by someone else)");
        return;
    }
    let info = Command::new("modinfo").arg("scsi_debug").output();
    if !info.is_ok_and(|o| o.status.success()) {
        println!("skipped: this kernel has no scsi_debug module (modinfo scsi_debug fails)");
        return;
    }
    let mut report = Report::default();
    {
        let module = match load_scsi_debug(&["num_tgts=2", "add_host=1"]) {
            Ok(m) => m,
            Err(why) => {
                println!("skipped: {why}");
                return;
            }
        };
        let units = scsi_debug_units(2);
        assert!(!units.is_empty(), "scsi_debug loaded but no disks appeared");
        for (hctl, block, sg, bsg) in &units {
            println!("scsi_debug {hctl}: {block} {sg:?} {bsg:?}");
            let mut nodes = vec![block.clone()];
            nodes.extend(sg.iter().filter(|p| Path::new(p).exists()).cloned());
            nodes.extend(bsg.iter().filter(|p| Path::new(p).exists()).cloned());
            for (k, node) in nodes.iter().enumerate() {
                for j in jobs_for("scsi_debug", "scsi_id", k == 0) {
                    compare_on_node(&mut report, &programs, &j, node);
                }
            }
            for j in jobs_for("scsi_debug", "ata_id", true) {
                compare_on_node(&mut report, &programs, &j, block);
            }
            let j = job("scsi_debug", "cdrom_id", &["{dev}"]);
            compare_on_node(&mut report, &programs, &j, block);
        }
        drop(module);
    }
    {
        let module = match load_scsi_debug(&["ptype=5", "num_tgts=1", "add_host=1"]) {
            Ok(m) => m,
            Err(why) => {
                println!("no CD-ROM run: {why}");
                report.finish("scsi_debug");
                return;
            }
        };
        let units = scsi_debug_units(1);
        for (hctl, block, _, _) in &units {
            println!("scsi_debug {hctl} (ptype=5): {block}");
            // Ejecting would change the device between the two runs.
            for j in jobs_for("scsi_debug_cd", "cdrom_id", true)
                .into_iter()
                .filter(|j| !j.args.iter().any(|a| a == "--eject-media"))
                .chain(jobs_for("scsi_debug_cd", "scsi_id", false))
                .chain(jobs_for("scsi_debug_cd", "ata_id", false))
            {
                compare_on_node(&mut report, &programs, &j, block);
            }
        }
        drop(module);
    }
    report.finish("scsi_debug");
}
