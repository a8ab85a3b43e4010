//! `uevd test`: the rules for one device, run without the daemon and
//! changing nothing.

use crate::Roots;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use uevd_db::{Database, DeviceId, Record};
use uevd_rules::Rules;
use uevd_sysfs::{Device, Sysfs};
use uevd_uevent::Action;

#[derive(clap::Args, Debug)]
pub struct Options {
    /// The action to simulate.
    #[arg(long, short = 'a', default_value = "add")]
    action: String,
    /// The device: a devpath (/devices/...), a /sys path (/sys/class/block/sda
    /// works) or a node under /dev.
    devpath: PathBuf,
}

/// The name of a device's record in the database.
pub(crate) fn db_id(dev: &Device) -> DeviceId {
    let subsystem = dev.subsystem().unwrap_or_default();
    DeviceId::new(subsystem, dev.devpath(), dev.devnum(), dev.ifindex())
}

/// Parents' records, read from the database as the daemon left it.
pub(crate) struct DiskStore(pub(crate) Option<Database>);

impl uevd_rules::Store for DiskStore {
    fn record(&self, device: &Device) -> Option<Record> {
        self.0.as_ref()?.read(&db_id(device)).ok().flatten()
    }
}

fn show(v: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(v)
}

/// Runs the rules for one device and prints what they decide; changes
/// nothing.
pub fn run(roots: &Roots, opts: Options) -> io::Result<ExitCode> {
    let action = Action::from_bytes(opts.action.as_bytes()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("unknown action '{}'", opts.action),
        )
    })?;
    let sysfs = Sysfs::new(&roots.sys);
    let devpath = super::info::locate(roots, &opts.devpath)?;
    let event = sysfs
        .read_event(action, &devpath)
        .map_err(|e| io::Error::new(io::ErrorKind::NotFound, e.to_string()))?;
    let device = Rc::new(Device::from_event(&sysfs, event));
    let (rules, diagnostics) = Rules::load(&roots.rules_config());
    super::verify::print_diagnostics(&diagnostics);
    let db = Database::open(roots.udev_dir()).ok();
    let previous = db
        .as_ref()
        .and_then(|db| db.read(&db_id(&device)).ok().flatten());
    let outcome = rules.apply(
        uevd_rules::Event {
            device: device.clone(),
            previous: previous.as_ref(),
            test: true,
            trace: true,
        },
        &DiskStore(db),
    );
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "# {} rules from {} files",
        rules.line_count(),
        rules.file_count()
    )?;
    for rule in &outcome.trace {
        writeln!(out, "# applied {rule}")?;
    }
    for w in &outcome.warnings {
        writeln!(out, "# warning: {w}")?;
    }
    for d in &outcome.dumps {
        writeln!(out, "# OPTIONS dump:")?;
        for line in d.lines() {
            writeln!(out, "#   {line}")?;
        }
    }
    for (k, v) in outcome.event_properties.iter(device.event()) {
        writeln!(out, "{}={}", show(k), show(v))?;
    }
    if !outcome.links.is_empty() {
        let links: Vec<String> = outcome
            .links
            .iter()
            .map(|l| format!("/dev/{}", show(l)))
            .collect();
        writeln!(out, "DEVLINKS={}", links.join(" "))?;
    }
    if !outcome.tags.is_empty() {
        let tags: Vec<_> = outcome.tags.iter().map(|t| show(t).into_owned()).collect();
        writeln!(out, "TAGS=:{}:", tags.join(":"))?;
    }
    if let Some(name) = &outcome.name {
        writeln!(out, "# name: {}", show(name))?;
    }
    let id = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    writeln!(
        out,
        "# owner: {} group: {} mode: {} link_priority: {}",
        id(outcome.uid),
        id(outcome.gid),
        outcome.mode.map_or("-".to_string(), |m| format!("{m:04o}")),
        outcome.link_priority
    )?;
    for r in &outcome.run {
        match r {
            uevd_rules::Run::Builtin(_, cmd) => writeln!(out, "run: builtin '{}'", show(cmd))?,
            uevd_rules::Run::Program(cmd) => writeln!(out, "run: '{}'", show(cmd))?,
        }
    }
    Ok(ExitCode::SUCCESS)
}
