//! `uevd builtin`: one builtin on one device, as `udevadm test-builtin`
//! runs it: in test mode, changing nothing, printing the properties it
//! would set. Given several devices, it runs on each in turn in one
//! process (what a probe of every disk costs without a process per disk).

use super::test::{db_id, DiskStore};
use crate::Roots;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use uevd_db::{Database, Record};
use uevd_rules::Store;
use uevd_sysfs::{Device, Sysfs};
use uevd_uevent::{Action, Properties};

#[derive(clap::Args, Debug)]
pub struct Options {
    /// The builtin's whole command line, its name first ("net_id",
    /// "hwdb --subsystem=pci", "btrfs ready /dev/sda").
    name: String,
    /// The device: its /sys path (/sys/class/net/eth0 works), devpath or
    /// /dev node; several are run one after another, each under a
    /// "# DEVPATH" line.
    #[arg(required = true, value_name = "DEVICE")]
    devices: Vec<PathBuf>,
    /// The action of the simulated event.
    #[arg(long, short = 'a', default_value = "add")]
    action: String,
    /// A property the event has (repeat for several), as rules would
    /// have set it before the builtin runs.
    #[arg(long = "property", short = 'p', value_name = "KEY=VALUE")]
    properties: Vec<String>,
    /// Read nothing from the database: neither the device's record (udev
    /// reads it, so builtins that look at earlier results find them) nor
    /// the records of other devices (net_id reads its parents').
    #[arg(long)]
    no_db: bool,
}

/// What the builtin sees, as in the daemon: the event's properties (the
/// device's own, then its record's, then those given on the command line,
/// later ones replacing earlier ones), the record the database holds for
/// the device, other devices' records, and the device directory.
struct Env<'a> {
    props: Properties,
    stored: Option<Record>,
    device: &'a Device,
    store: DiskStore,
    dev_root: Vec<u8>,
}

impl Env<'_> {
    fn set(&mut self, key: &[u8], value: &[u8]) {
        match self.props.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value.to_vec(),
            None => self.props.push((key.to_vec(), value.to_vec())),
        }
    }
}

fn lookup<'a>(props: &'a Properties, key: &[u8]) -> Option<&'a [u8]> {
    props
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_slice())
}

impl uevd_builtins::Env for Env<'_> {
    fn property(&self, key: &[u8]) -> Option<&[u8]> {
        lookup(&self.props, key)
    }

    fn stored_property(&self, key: &[u8]) -> Option<&[u8]> {
        lookup(&self.stored.as_ref()?.properties, key)
    }

    fn record_property(&self, devpath: &[u8], key: &[u8]) -> Option<Vec<u8>> {
        if devpath == self.device.devpath() {
            return self.stored_property(key).map(<[u8]>::to_vec);
        }
        let other = Device::from_devpath(self.device.sysfs(), devpath).ok()?;
        let record = self.store.record(&other)?;
        lookup(&record.properties, key).map(<[u8]>::to_vec)
    }

    fn dev_root(&self) -> &[u8] {
        &self.dev_root
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn show(v: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(v)
}

pub fn run(roots: &Roots, opts: Options) -> io::Result<ExitCode> {
    let args: Vec<Vec<u8>> = opts
        .name
        .split_ascii_whitespace()
        .map(|w| w.as_bytes().to_vec())
        .collect();
    let Some(name) = args.first() else {
        return Err(invalid("no builtin given".into()));
    };
    let Some(builtin) = uevd_builtins::find(name) else {
        let known: Vec<_> = uevd_builtins::names().collect();
        return Err(invalid(format!(
            "unknown builtin '{}' (uevd has: {})",
            show(name),
            known.join(", ")
        )));
    };
    let action = Action::from_bytes(opts.action.as_bytes())
        .ok_or_else(|| invalid(format!("unknown action '{}'", opts.action)))?;
    let mut failed = false;
    for path in &opts.devices {
        if opts.devices.len() > 1 {
            println!("# {}", path.display());
        }
        failed |= !run_one(roots, &opts, builtin, &args, action, path)?;
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs the builtin on one device; false if it failed.
fn run_one(
    roots: &Roots,
    opts: &Options,
    builtin: &dyn uevd_builtins::Builtin,
    args: &[Vec<u8>],
    action: Action,
    path: &std::path::Path,
) -> io::Result<bool> {
    let sysfs = Sysfs::new(&roots.sys);
    let devpath = super::info::locate(roots, path)?;
    let found = sysfs.device_at(&sysfs.syspath(&devpath)).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no device at {}", path.display()),
        )
    })?;
    let event = sysfs
        .read_event(action, found.devpath())
        .map_err(|e| io::Error::new(io::ErrorKind::NotFound, e.to_string()))?;
    let device = Rc::new(Device::from_event(&sysfs, event));

    let db = (!opts.no_db)
        .then(|| Database::open(roots.udev_dir()).ok())
        .flatten();
    let stored = db
        .as_ref()
        .and_then(|db| db.read(&db_id(&device)).ok().flatten());
    let mut env = Env {
        props: device
            .event()
            .iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect(),
        stored: None,
        device: &device,
        store: DiskStore(db),
        dev_root: roots.dev.as_os_str().as_bytes().to_vec(),
    };
    for (k, v) in stored.iter().flat_map(|r| &r.properties) {
        env.set(k, v);
    }
    env.stored = stored;
    for p in &opts.properties {
        let (k, v) = p
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| invalid(format!("'{p}' is not KEY=VALUE")))?;
        env.set(k.as_bytes(), v.as_bytes());
    }

    let mut out = Vec::new();
    let result = builtin.run(
        &uevd_builtins::Call {
            device: &device,
            args,
            env: &env,
            test: true,
        },
        &mut out,
    );
    let mut stdout = io::stdout().lock();
    // A removed property prints as `KEY=`, as udevadm test-builtin has it.
    for (k, v) in &out {
        let k = uevd_builtins::unset_key(k).unwrap_or(k);
        writeln!(stdout, "{}={}", show(k), show(v))?;
    }
    match result {
        Ok(()) => Ok(true),
        Err(e) => {
            ::log::error!("{}: {e}", opts.name);
            Ok(false)
        }
    }
}
