//! `uevd trigger`: ask the kernel to resend events for existing devices.

use crate::Roots;
use clap::ValueEnum;
use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use uevd_db::{Database, DeviceId};
use uevd_glob::Pattern;
use uevd_sysfs::{
    implicit_subsystem, link_basename, request_uevent, walk_devices, walk_subsystems, Sysfs,
};
use uevd_uevent::Action;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    Devices,
    Subsystems,
    All,
}

#[derive(clap::Args, Debug)]
pub struct Options {
    /// What to trigger: devices, subsystems (buses, drivers, modules) or all.
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
    /// Only devices with this tag in the database.
    #[arg(short = 'G', long = "tag-match", value_name = "TAG")]
    tag_match: Vec<String>,
    /// List the devices instead of triggering them.
    #[arg(short = 'n', long)]
    dry_run: bool,
    /// Print each device's path.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Wait until the daemon has processed the triggered events.
    #[arg(short = 'w', long)]
    settle: bool,
    /// Print the synthetic UUID the events carry.
    #[arg(long)]
    uuid: bool,
    /// No progress line on a terminal (an initramfs's stderr is the
    /// console); failures are still logged.
    #[arg(short = 'q', long)]
    quiet: bool,
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

struct Filter {
    subsystem: Vec<Pattern>,
    subsystem_not: Vec<Pattern>,
    sysname: Vec<Pattern>,
    attr: Vec<(String, Option<Pattern>)>,
    attr_not: Vec<(String, Option<Pattern>)>,
    tagged: Option<std::collections::HashSet<DeviceId>>,
}

fn attr_spec(s: &str) -> (String, Option<Pattern>) {
    match s.split_once('=') {
        Some((k, v)) => (k.to_string(), Some(Pattern::new(v.as_bytes()))),
        None => (s.to_string(), None),
    }
}

fn attr_matches(dir: &Path, (name, value): &(String, Option<Pattern>)) -> bool {
    if name.contains("..") {
        return false;
    }
    match std::fs::read(dir.join(name)) {
        Ok(mut v) => {
            while v.last() == Some(&b'\n') {
                v.pop();
            }
            value.as_ref().is_none_or(|p| p.matches(&v))
        }
        Err(_) => false,
    }
}

impl Filter {
    fn new(o: &Options, roots: &Roots) -> io::Result<Filter> {
        let pats = |v: &[String]| v.iter().map(|s| Pattern::new(s.as_bytes())).collect();
        let tagged = if o.tag_match.is_empty() {
            None
        } else {
            let db = Database::open(roots.udev_dir())?;
            // A device must carry every tag asked for.
            let mut sets = o.tag_match.iter().map(|t| {
                db.tagged(t.as_bytes())
                    .into_iter()
                    .collect::<std::collections::HashSet<_>>()
            });
            let first = sets.next().unwrap_or_default();
            Some(sets.fold(first, |acc, s| acc.intersection(&s).cloned().collect()))
        };
        Ok(Filter {
            subsystem: pats(&o.subsystem_match),
            subsystem_not: pats(&o.subsystem_nomatch),
            sysname: pats(&o.sysname_match),
            attr: o.attr_match.iter().map(|s| attr_spec(s)).collect(),
            attr_not: o.attr_nomatch.iter().map(|s| attr_spec(s)).collect(),
            tagged,
        })
    }

    fn accepts(&self, sysfs: &Sysfs, devpath: &[u8], dir: &Path) -> bool {
        let Some(subsystem) = implicit_subsystem(devpath)
            .map(<[u8]>::to_vec)
            .or_else(|| link_basename(&dir.join("subsystem")))
        else {
            return false;
        };
        if !self.subsystem.is_empty() && !self.subsystem.iter().any(|p| p.matches(&subsystem)) {
            return false;
        }
        if self.subsystem_not.iter().any(|p| p.matches(&subsystem)) {
            return false;
        }
        let sysname = devpath.rsplit(|&c| c == b'/').next().unwrap_or_default();
        if !self.sysname.is_empty() && !self.sysname.iter().any(|p| p.matches(sysname)) {
            return false;
        }
        if !self.attr.iter().all(|a| attr_matches(dir, a)) {
            return false;
        }
        if self.attr_not.iter().any(|a| attr_matches(dir, a)) {
            return false;
        }
        if let Some(tagged) = &self.tagged {
            let Ok(ev) = sysfs.read_event(Action::Add, devpath) else {
                return false;
            };
            let id = DeviceId::new(&subsystem, devpath, ev.devnum(), ev.ifindex());
            if !tagged.contains(&id) {
                return false;
            }
        }
        true
    }
}

pub fn run(roots: &Roots, o: Options) -> io::Result<ExitCode> {
    let sysfs = Sysfs::new(&roots.sys);
    let filter = Filter::new(&o, roots)?;
    let mut targets: Vec<(Vec<u8>, std::path::PathBuf)> = Vec::new();
    let mut collect = |v: uevd_sysfs::Visit<'_>| {
        if filter.accepts(&sysfs, v.devpath, v.path) {
            targets.push((v.devpath.to_vec(), v.path.to_path_buf()));
        }
    };
    if matches!(o.kind, Kind::Subsystems | Kind::All) {
        walk_subsystems(&sysfs, &mut collect)?;
    }
    if matches!(o.kind, Kind::Devices | Kind::All) {
        walk_devices(&sysfs, &mut collect)?;
    }
    let uuid = new_uuid();
    if o.uuid {
        println!("{uuid}");
    }
    let progress = std::io::stderr().is_terminal() && !o.dry_run && !o.verbose && !o.quiet;
    let total = targets.len();
    let mut failed = 0;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for (i, (devpath, dir)) in targets.iter().enumerate() {
        if o.dry_run || o.verbose {
            let _ = writeln!(out, "{}", dir.display());
        }
        if o.dry_run {
            continue;
        }
        if let Err(e) = request_uevent(dir, o.action, Some(&uuid), &[]) {
            // Old kernels do not take a UUID: ask plainly.
            let plain = e.raw_os_error() == Some(libc::EINVAL)
                && request_uevent(dir, o.action, None, &[]).is_ok();
            if !plain {
                failed += 1;
                log::warn!("{}: {e}", String::from_utf8_lossy(devpath));
            }
        }
        if progress && (i % 256 == 0 || i + 1 == total) {
            eprint!("\rtriggered {}/{total}", i + 1);
        }
    }
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
}
