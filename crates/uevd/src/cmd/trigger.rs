//! `uevd trigger`: ask the kernel to resend events for existing devices.

use super::info::{Ctx, Hint};
use super::select::{self, Select};
use crate::Roots;
use clap::ValueEnum;
use std::collections::HashSet;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use uevd_control::{call, Reply, Request};
use uevd_daemon::RootDevice;
use uevd_sysfs::{link_basename, request_uevent, walk_devices, walk_subsystems, Sysfs};
use uevd_uevent::Action;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    Devices,
    Subsystems,
    All,
}

#[derive(clap::Args, Debug)]
pub struct Options {
    /// What to trigger: devices, subsystems (buses, drivers, modules) or
    /// all (devices first, then subsystems).
    #[arg(short = 't', long = "type", value_enum, default_value = "devices")]
    kind: Kind,
    /// The action to ask for.
    #[arg(short = 'c', long, default_value = "change")]
    action: Action,
    /// Only devices of these subsystems (patterns).
    #[arg(short = 's', long = "subsystem-match", value_name = "SUBSYSTEM")]
    subsystem_match: Vec<String>,
    /// Not devices of these subsystems (patterns).
    #[arg(short = 'S', long = "subsystem-nomatch", value_name = "SUBSYSTEM")]
    subsystem_nomatch: Vec<String>,
    /// Only devices whose name matches (patterns).
    #[arg(short = 'y', long = "sysname-match", value_name = "NAME")]
    sysname_match: Vec<String>,
    /// Only devices with this attribute, or this attribute value (pattern).
    #[arg(short = 'a', long = "attr-match", value_name = "ATTR[=VALUE]")]
    attr_match: Vec<String>,
    /// Not devices with this attribute (value).
    #[arg(short = 'A', long = "attr-nomatch", value_name = "ATTR[=VALUE]")]
    attr_nomatch: Vec<String>,
    /// Only devices with this property value (pattern); with several, any
    /// one.
    #[arg(short = 'p', long = "property-match", value_name = "KEY=VALUE")]
    property_match: Vec<String>,
    /// Only devices with this tag in the database; with several, all.
    #[arg(
        short = 'g',
        visible_short_alias = 'G',
        long = "tag-match",
        value_name = "TAG"
    )]
    tag_match: Vec<String>,
    /// This device (node, or a link to it, below /dev) and those below it.
    #[arg(long = "name-match", value_name = "NAME")]
    name_match: Vec<PathBuf>,
    /// This device (path below /sys) and those below it.
    #[arg(short = 'b', long = "parent-match", value_name = "SYSPATH")]
    parent_match: Vec<PathBuf>,
    /// Only devices the daemon has processed (with a database record).
    #[arg(long, conflicts_with = "initialized_nomatch")]
    initialized_match: bool,
    /// Only devices the daemon has not processed yet.
    #[arg(long)]
    initialized_nomatch: bool,
    /// Also the parents of the devices chosen, whatever the filters say.
    #[arg(long)]
    include_parents: bool,
    /// Devices of these subsystems, and their parents, first (comma-separated,
    /// in this order); "module", "subsystem" and "drivers" name the kernel's
    /// modules, buses and bus drivers, as udev calls their subsystems.
    #[arg(long, value_name = "SUBSYSTEM", value_delimiter = ',')]
    prioritized_subsystem: Vec<String>,
    /// Before triggering, wait until the daemon answers (at most SECONDS,
    /// default 5).
    #[arg(
        long,
        value_name = "SECONDS",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "5"
    )]
    wait_daemon: Option<f64>,
    /// List the devices instead of triggering them.
    #[arg(short = 'n', long)]
    dry_run: bool,
    /// Print each device's path.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// No progress line on a terminal (an initramfs's stderr is the
    /// console), and failures to trigger logged only at debug level.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Wait until the daemon has processed the triggered events.
    #[arg(short = 'w', long)]
    settle: bool,
    /// Give each event a UUID of its own and print it, one line per device.
    #[arg(long)]
    uuid: bool,
    /// Devices: paths below /sys, nodes below /dev, devpaths; each with
    /// the devices below it.
    devices: Vec<PathBuf>,
}

/// A random version 4 UUID, which the kernel attaches to the events as
/// SYNTH_UUID so that whoever listens can tell them from others.
///
/// It only has to be unlikely to repeat, not secret: early in boot the
/// kernel's random pool is not ready yet, and a blocking getrandom() then
/// spends a second or more of CPU gathering entropy (measured in the lab:
/// 1.03 s of system time for one trigger). GRND_INSECURE never waits.
pub fn new_uuid() -> String {
    use rustix::rand::{getrandom, GetRandomFlags};
    let mut b = [0u8; 16];
    let filled = getrandom(&mut b, GetRandomFlags::INSECURE)
        .or_else(|_| getrandom(&mut b, GetRandomFlags::NONBLOCK))
        .is_ok_and(|n| n == b.len());
    if !filled {
        let t = uevd_timeline::now().to_le_bytes();
        b[..8].copy_from_slice(&t);
        b[8..12].copy_from_slice(&std::process::id().to_le_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

fn selection(o: &Options, ctx: &Ctx) -> io::Result<Select> {
    let mut parent = Vec::new();
    for d in &o.devices {
        parent.push(ctx.find(d, Hint::Any)?);
    }
    for n in &o.name_match {
        parent.push(ctx.find(n, Hint::Dev)?);
    }
    for p in &o.parent_match {
        parent.push(ctx.find(p, Hint::Sys)?);
    }
    let matches = select::Matches {
        subsystem: &o.subsystem_match,
        subsystem_not: &o.subsystem_nomatch,
        sysname: &o.sysname_match,
        attr: &o.attr_match,
        attr_not: &o.attr_nomatch,
        property: &o.property_match,
        tag: &o.tag_match,
        initialized: o.initialized_match,
        not_initialized: o.initialized_nomatch,
    };
    Select::new(matches, parent, false).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// Waits until the daemon answers a ping, for at most `seconds`.
fn wait_daemon(roots: &Roots, seconds: f64) -> io::Result<()> {
    let path = roots.control();
    let deadline = Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match call(&path, &Request::Ping, left.max(Duration::from_millis(100))) {
            Ok(Reply::Ok(_)) => return Ok(()),
            Ok(_) | Err(_) if !left.is_zero() => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no daemon answered on {} within {seconds}s", path.display()),
                ))
            }
        }
    }
}

/// One thing to trigger.
struct Target {
    devpath: Vec<u8>,
    dir: PathBuf,
    chosen: bool,
}

/// The devpaths of a device's ancestors, nearest last.
fn ancestors(devpath: &[u8]) -> impl Iterator<Item = &[u8]> {
    devpath
        .iter()
        .enumerate()
        .filter(|&(i, &c)| c == b'/' && i > 0)
        .map(move |(i, _)| &devpath[..i])
}

/// The devices chosen, each with its rank: the position in `prioritized`
/// of its own subsystem or of a chosen device's below it, else
/// `prioritized.len()`; in the walk's order (parents first).
fn ranked_devices(
    devices: Vec<Target>,
    include_parents: bool,
    prioritized: &[String],
) -> Vec<(usize, Target)> {
    let mut devices = devices;
    if include_parents {
        let wanted: HashSet<Vec<u8>> = devices
            .iter()
            .filter(|t| t.chosen)
            .flat_map(|t| ancestors(&t.devpath).map(<[u8]>::to_vec))
            .collect();
        for t in &mut devices {
            t.chosen |= wanted.contains(&t.devpath);
        }
    }
    let devices: Vec<Target> = devices.into_iter().filter(|t| t.chosen).collect();
    let mut rank = vec![prioritized.len(); devices.len()];
    if !prioritized.is_empty() {
        let index: std::collections::HashMap<&[u8], usize> = devices
            .iter()
            .enumerate()
            .map(|(i, t)| (t.devpath.as_slice(), i))
            .collect();
        for t in &devices {
            let subsystem = link_basename(&t.dir.join("subsystem")).unwrap_or_default();
            let Some(r) = rank_in(prioritized, &subsystem) else {
                continue;
            };
            for dp in ancestors(&t.devpath).chain(std::iter::once(t.devpath.as_slice())) {
                if let Some(&j) = index.get(dp) {
                    rank[j] = rank[j].min(r);
                }
            }
        }
    }
    rank.into_iter().zip(devices).collect()
}

/// Where `subsystem` stands in `--prioritized-subsystem`, if it does.
fn rank_in(prioritized: &[String], subsystem: &[u8]) -> Option<usize> {
    prioritized.iter().position(|p| p.as_bytes() == subsystem)
}

/// The subsystem udev gives a subsystem-level entry of sysfs (its kernel
/// module, bus or bus driver), for `--prioritized-subsystem`.
fn entry_subsystem(devpath: &[u8]) -> &'static [u8] {
    if devpath.starts_with(b"/module/") {
        b"module"
    } else if devpath.split(|&c| c == b'/').nth(3) == Some(b"drivers") {
        b"drivers"
    } else {
        b"subsystem"
    }
}

/// Everything chosen, in the order to trigger it: the prioritized
/// subsystems first, one after another (a device with its parents, a
/// subsystem entry on its own), then the other devices, then the other
/// subsystem entries. Devices go before the buses, drivers and modules:
/// nothing of a device's processing depends on their events, and the
/// devices are what load drivers and make nodes, so with `--type=all` a
/// boot's first drivers start without waiting behind a few hundred
/// announcements of buses and modules (the daemon's own coldplug reads
/// them in the same order).
fn sequence(
    subsystems: Vec<Target>,
    devices: Vec<Target>,
    include_parents: bool,
    prioritized: &[String],
) -> Vec<Target> {
    let mut ranked = ranked_devices(devices, include_parents, prioritized);
    for t in subsystems.into_iter().filter(|t| t.chosen) {
        let rank =
            rank_in(prioritized, entry_subsystem(&t.devpath)).unwrap_or(prioritized.len() + 1);
        ranked.push((rank, t));
    }
    // Stable: the walk's order within one rank, devices before entries.
    ranked.sort_by_key(|(r, _)| *r);
    ranked.into_iter().map(|(_, t)| t).collect()
}

/// The root device `root=` names on the kernel command line, when it can
/// name a device of `roots.sys`: the kernel's, or any with
/// `$SYSTEMD_PROC_CMDLINE` set.
fn root_from_cmdline(roots: &Roots) -> Option<RootDevice> {
    if roots.sys != Path::new("/sys") && std::env::var_os("SYSTEMD_PROC_CMDLINE").is_none() {
        return None;
    }
    let line = std::str::from_utf8(uevd_host::proc_cmdline()?).ok()?;
    RootDevice::from_cmdline_words(line.split_ascii_whitespace())
}

/// Writes the requests, counting what failed.
struct Sender<'a> {
    o: &'a Options,
    shared_uuid: String,
    failed: usize,
    out: std::io::StdoutLock<'static>,
}

impl Sender<'_> {
    fn send(&mut self, t: &Target) {
        let o = self.o;
        if o.dry_run || o.verbose {
            let _ = writeln!(self.out, "{}", t.dir.display());
        }
        if o.dry_run {
            return;
        }
        let uuid = if o.uuid {
            new_uuid()
        } else {
            self.shared_uuid.clone()
        };
        let mut sent = request_uevent(&t.dir, o.action, Some(&uuid), &[]);
        if sent
            .as_ref()
            .is_err_and(|e| e.raw_os_error() == Some(libc::EINVAL))
        {
            // Old kernels do not take a UUID: ask plainly.
            sent = request_uevent(&t.dir, o.action, None, &[]);
        }
        match sent {
            Ok(()) if o.uuid => {
                let _ = writeln!(self.out, "{uuid}");
            }
            Ok(()) => {}
            // Gone meanwhile: nothing to trigger.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                log::debug!("{}: {e}", String::from_utf8_lossy(&t.devpath))
            }
            Err(e) => {
                self.failed += 1;
                let what = format!("{}/uevent: {e}", t.dir.display());
                if o.quiet {
                    log::debug!("{what}");
                } else {
                    log::warn!("{what}");
                }
            }
        }
    }
}

pub fn run(roots: &Roots, o: Options) -> io::Result<ExitCode> {
    if let Some(seconds) = o.wait_daemon {
        wait_daemon(roots, seconds)?;
    }
    let ctx = Ctx::new(roots);
    let sysfs = Sysfs::new(&roots.sys);
    let select = selection(&o, &ctx)?;
    let mut sender = Sender {
        o: &o,
        shared_uuid: new_uuid(),
        failed: 0,
        out: std::io::stdout().lock(),
    };
    // The devices root= may name, and their parents, go before the walk of
    // everything else has even started, as the daemon's coldplug queues
    // them: the root's add is among the first events instead of waiting
    // its turn behind thousands of others.
    let mut sent_first: HashSet<Vec<u8>> = HashSet::new();
    if o.action == Action::Add && matches!(o.kind, Kind::Devices | Kind::All) {
        if let Some(root) = root_from_cmdline(roots) {
            for devpath in uevd_daemon::boot_critical(&sysfs, &root) {
                let dir = sysfs.syspath(&devpath);
                if select.accepts(&ctx, &devpath, &dir) {
                    let t = Target {
                        devpath: devpath.into_vec(),
                        dir,
                        chosen: true,
                    };
                    sender.send(&t);
                    sent_first.insert(t.devpath);
                }
            }
        }
    }
    let mut subsystems: Vec<Target> = Vec::new();
    let mut devices: Vec<Target> = Vec::new();
    let collect = |list: &mut Vec<Target>, v: uevd_sysfs::Visit<'_>| {
        list.push(Target {
            devpath: v.devpath.to_vec(),
            dir: v.path.to_path_buf(),
            chosen: select.accepts(&ctx, v.devpath, v.path),
        })
    };
    if matches!(o.kind, Kind::Subsystems | Kind::All) {
        walk_subsystems(&sysfs, |v| collect(&mut subsystems, v))?;
    }
    if matches!(o.kind, Kind::Devices | Kind::All) {
        walk_devices(&sysfs, |v| collect(&mut devices, v))?;
    }
    let targets: Vec<Target> = sequence(
        subsystems,
        devices,
        o.include_parents,
        &o.prioritized_subsystem,
    )
    .into_iter()
    .filter(|t| !sent_first.contains(&t.devpath))
    .collect();
    let progress =
        std::io::stderr().is_terminal() && !o.dry_run && !o.verbose && !o.uuid && !o.quiet;
    let total = targets.len();
    for (i, t) in targets.iter().enumerate() {
        sender.send(t);
        if progress && (i % 256 == 0 || i + 1 == total) {
            eprint!("\rtriggered {}/{total}", i + 1);
        }
    }
    let failed = sender.failed;
    drop(sender);
    if progress {
        eprintln!();
    }
    if o.settle && !o.dry_run {
        return super::settle::wait(roots, Duration::from_secs(120));
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4() {
        let u = new_uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"));
        assert_ne!(u, new_uuid());
    }

    #[test]
    fn parents_come_first_and_prioritized_subsystems_before_the_rest() {
        let a: Vec<&[u8]> = ancestors(b"/devices/a/b/c").collect();
        assert_eq!(a, [&b"/devices"[..], b"/devices/a", b"/devices/a/b"]);
        let t = |p: &str, chosen| Target {
            devpath: p.as_bytes().to_vec(),
            dir: PathBuf::from("/nonexistent"),
            chosen,
        };
        let picked = sequence(
            Vec::new(),
            vec![
                t("/devices/a", false),
                t("/devices/a/b", true),
                t("/devices/c", true),
            ],
            true,
            &[],
        );
        let paths: Vec<&[u8]> = picked.iter().map(|t| t.devpath.as_slice()).collect();
        assert_eq!(paths, [&b"/devices/a"[..], b"/devices/a/b", b"/devices/c"]);
    }

    #[test]
    fn with_type_all_devices_go_before_buses_drivers_and_modules_unless_prioritized() {
        let t = |p: &str| Target {
            devpath: p.as_bytes().to_vec(),
            dir: PathBuf::from("/nonexistent"),
            chosen: true,
        };
        let entries = || {
            vec![
                t("/bus/pci"),
                t("/bus/pci/drivers/e1000"),
                t("/module/e1000"),
            ]
        };
        let devices = || {
            vec![
                t("/devices/pci0000:00"),
                t("/devices/pci0000:00/0000:00:02.0"),
            ]
        };
        let paths = |v: Vec<Target>| -> Vec<String> {
            v.into_iter()
                .map(|t| String::from_utf8(t.devpath).unwrap())
                .collect()
        };
        assert_eq!(
            paths(sequence(entries(), devices(), false, &[])),
            [
                "/devices/pci0000:00",
                "/devices/pci0000:00/0000:00:02.0",
                "/bus/pci",
                "/bus/pci/drivers/e1000",
                "/module/e1000"
            ]
        );
        // What Debian's systemd-udev-trigger.service asks for: modules
        // first, then the devices; buses and drivers last.
        let debian: Vec<String> = ["module", "block", "tpmrm", "net", "tty", "input"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            paths(sequence(entries(), devices(), false, &debian)),
            [
                "/module/e1000",
                "/devices/pci0000:00",
                "/devices/pci0000:00/0000:00:02.0",
                "/bus/pci",
                "/bus/pci/drivers/e1000"
            ]
        );
        let drivers_first: Vec<String> = vec!["drivers".into(), "subsystem".into()];
        assert_eq!(
            paths(sequence(entries(), devices(), false, &drivers_first))[..2],
            ["/bus/pci/drivers/e1000", "/bus/pci"]
        );
    }
}
