//! `uevd process`: events for the given devices run through the daemon's
//! own pipeline, one after another, without a daemon: nodes, links (with
//! priorities and handover), database, tags and RUN programs, as udev's
//! `test-udev` does. What rules tests and scripts use to see the real
//! result on a scratch `--sys`/`--dev`/`--run`.

use crate::Roots;
use std::io;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use uevd_daemon::{Job, Processor, Source};
use uevd_db::Database;
use uevd_node::DevDir;
use uevd_sysfs::Sysfs;
use uevd_timeline::Journal;
use uevd_uevent::Action;

#[derive(clap::Args, Debug)]
pub struct Options {
    /// The action of every event.
    #[arg(long, short = 'a', default_value = "add")]
    action: String,
    /// The devices, in the order their events run: devpaths (/devices/...),
    /// /sys paths or nodes under /dev.
    #[arg(required = true)]
    devices: Vec<PathBuf>,
}

pub fn run(roots: &Roots, opts: Options) -> io::Result<ExitCode> {
    let action = Action::from_bytes(opts.action.as_bytes()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("unknown action '{}'", opts.action),
        )
    })?;
    let sysfs = Sysfs::new(&roots.sys);
    let mut events = Vec::with_capacity(opts.devices.len());
    for d in &opts.devices {
        let devpath = super::info::locate(roots, d)?;
        let event = sysfs
            .read_event(action, &devpath)
            .map_err(|e| io::Error::new(io::ErrorKind::NotFound, e.to_string()))?;
        events.push(event);
    }
    let (rules, diagnostics) = uevd_rules::Rules::load(&roots.rules_config());
    super::verify::print_diagnostics(&diagnostics);
    let udev_dir = roots.udev_dir();
    let db = Database::open(&udev_dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", udev_dir.display())))?;
    let dev = DevDir::open(&roots.dev)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", roots.dev.display())))?;
    let processor = Processor::new(sysfs, dev, db, None, Journal::disabled(), rules);
    for (id, event) in (1..).zip(events) {
        processor.process(1, id, Job::new(event, Source::Kernel));
    }
    let failed = processor.failed.load(Ordering::Relaxed);
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
