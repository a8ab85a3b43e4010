//! `uevd test` and `uevd verify`: the rules without the daemon.

use crate::Roots;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use uevd_db::{Database, DeviceId, Record};
use uevd_rules::{Rules, Severity};
use uevd_sysfs::{Device, Sysfs};
use uevd_uevent::Action;

#[derive(clap::Args, Debug)]
pub struct TestOptions {
    /// The action to simulate.
    #[arg(long, short = 'a', default_value = "add")]
    action: String,
    /// The device: a devpath (/devices/...) or its /sys path.
    devpath: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct VerifyOptions {
    /// Rules files to check (default: every file the daemon would load).
    files: Vec<PathBuf>,
}

fn db_id(dev: &Device) -> DeviceId {
    let subsystem = dev.subsystem().unwrap_or_default();
    DeviceId::new(&subsystem, dev.devpath(), dev.devnum(), dev.ifindex())
}

/// Parents' records, read from the database as the daemon left it.
struct DiskStore(Option<Database>);

impl uevd_rules::Store for DiskStore {
    fn record(&self, device: &Device) -> Option<Record> {
        self.0.as_ref()?.read(&db_id(device)).ok().flatten()
    }
}

fn print_diagnostics(diagnostics: &[uevd_rules::Diagnostic]) -> (usize, usize) {
    let errors = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    for d in diagnostics {
        eprintln!("{d}");
    }
    (errors, diagnostics.len() - errors)
}

fn show(v: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(v)
}

/// Runs the rules for one device and prints what they decide; changes
/// nothing.
pub fn test(roots: &Roots, opts: TestOptions) -> io::Result<ExitCode> {
    let action = Action::from_bytes(opts.action.as_bytes()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("unknown action '{}'", opts.action),
        )
    })?;
    let sysfs = Sysfs::new(&roots.sys);
    let given = opts.devpath.as_os_str().as_encoded_bytes();
    let devpath = match sysfs.devpath_of(&opts.devpath) {
        Some(d) => d,
        None => given.to_vec(),
    };
    let event = sysfs
        .read_event(action, &devpath)
        .map_err(|e| io::Error::new(io::ErrorKind::NotFound, e.to_string()))?;
    let device = Rc::new(Device::from_event(&sysfs, event));
    let (rules, diagnostics) = Rules::load(&roots.rules_config());
    print_diagnostics(&diagnostics);
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
    for (k, v) in &outcome.event_properties {
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

/// Checks rules files and reports every problem; exit status 1 if any
/// has an error.
pub fn verify(roots: &Roots, opts: VerifyOptions) -> io::Result<ExitCode> {
    let config = roots.rules_config();
    let files = if opts.files.is_empty() {
        uevd_rules::rule_files(&config.dirs)
    } else {
        opts.files
    };
    let mut texts = Vec::new();
    let mut unreadable = 0;
    for f in &files {
        match uevd_rules::read_rules_file(f) {
            Ok(t) => texts.push((f.display().to_string(), t)),
            Err(e) => {
                eprintln!("{}: {e}", f.display());
                unreadable += 1;
            }
        }
    }
    let named: Vec<(&str, &[u8])> = texts
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_slice()))
        .collect();
    let (rules, diagnostics) = Rules::from_texts(&named, &config);
    let (errors, warnings) = print_diagnostics(&diagnostics);
    println!(
        "{} files, {} rules: {} errors, {} warnings",
        texts.len(),
        rules.line_count(),
        errors + unreadable,
        warnings
    );
    Ok(if errors + unreadable > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
