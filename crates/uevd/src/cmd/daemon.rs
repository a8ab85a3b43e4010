//! `uevd daemon`: the device manager, configured from the command line.

use crate::Roots;
use clap::ValueEnum;
use std::io;
use std::path::PathBuf;
use std::process::ExitCode;
use uevd_netlink::DEFAULT_RECEIVE_BUFFER;

/// How `--coldplug` learns about existing devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Coldplug {
    /// Read each device's `uevent` file (what `mdev -s` does): the kernel
    /// sends nothing.
    Read,
    /// Write `add` into each `uevent` file and process what the kernel
    /// sends back (what `udevadm trigger` does).
    Trigger,
}

#[derive(clap::Args, Debug)]
pub struct Options {
    /// Detach once ready to receive events.
    #[arg(long)]
    daemon: bool,
    /// Process every existing device at start, as boot needs.
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "read", value_name = "HOW")]
    coldplug: Option<Coldplug>,
    /// Worker threads (default: 2 per CPU, at least 4).
    #[arg(long, alias = "children-max", value_name = "N")]
    workers: Option<usize>,
    /// Netlink receive buffer in bytes.
    #[arg(long, default_value_t = DEFAULT_RECEIVE_BUFFER, value_name = "BYTES")]
    receive_buffer: usize,
    /// Timeline journal (default: RUN/uevd/timeline.jsonl); "none" disables.
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
    /// Largest timeline journal, in bytes.
    #[arg(long, default_value_t = 256 << 20, value_name = "BYTES")]
    timeline_max: u64,
    /// Which events have their steps, builtins and rule lines timed: all,
    /// one in N on each worker, or auto (all where reading the clock is
    /// cheap, one in 8 where it is a system call).
    #[arg(long, default_value = "auto", value_name = "auto|all|N")]
    timeline_steps: uevd_timeline::StepTiming,
    /// Append log messages to this file instead of stderr (with --daemon
    /// the default is the kernel log, /dev/kmsg).
    #[arg(long, value_name = "FILE")]
    log_file: Option<PathBuf>,
    /// error, warning, info or debug (default: info, or what udev.conf's
    /// udev_log or the kernel command line's udev.log_level say).
    #[arg(long, value_parser = crate::parse_level)]
    log_level: Option<uevd_control::Level>,
    /// Do not announce processed events to libudev clients (netlink group 2).
    #[arg(long)]
    no_broadcast: bool,
    /// Processed events kept for monitor clients that fell behind
    /// (`uevd monitor` asks for them); 0 keeps none.
    #[arg(long, default_value_t = uevd_daemon::DEFAULT_REPLAY_EVENTS, value_name = "N")]
    replay_events: usize,
    /// Seconds a rule program (PROGRAM, IMPORT{program}, RUN) may run
    /// before it is killed.
    #[arg(long, value_name = "SECONDS")]
    event_timeout: Option<u64>,
}

pub fn run(roots: &Roots, opts: Options) -> io::Result<ExitCode> {
    let mut config = uevd_daemon::Config::new(&roots.sys, &roots.dev, &roots.run);
    config.rules = roots.rules_config();
    // udev.conf and the kernel command line first: options given here win.
    let settings = uevd_daemon::Settings::system();
    for w in &settings.warnings {
        log::warn!("{w}");
    }
    for note in settings.apply(&mut config) {
        log::info!("{note}");
    }
    if let Some(r) = &roots.resolve_names {
        config.rules.resolve_names = r != "never";
    }
    if let Some(s) = opts.event_timeout {
        config.rules.exec_timeout = std::time::Duration::from_secs(s);
    }
    config.detach = opts.daemon;
    config.coldplug = opts.coldplug.map(|c| match c {
        Coldplug::Read => uevd_daemon::Coldplug::Read,
        Coldplug::Trigger => uevd_daemon::Coldplug::Trigger,
    });
    if opts.workers.is_some() {
        config.workers = opts.workers;
    }
    config.receive_buffer = opts.receive_buffer;
    match opts.timeline {
        Some(p) if p.as_os_str() == "none" => config.timeline = None,
        Some(p) => config.timeline = Some(p),
        None => {}
    }
    config.timeline_max = opts.timeline_max;
    config.timeline_steps = opts.timeline_steps;
    config.log_file = opts.log_file;
    if let Some(level) = opts.log_level {
        config.log_level = level;
    }
    config.broadcast = !opts.no_broadcast;
    config.replay_events = opts.replay_events;
    uevd_daemon::run(config).map(|()| ExitCode::SUCCESS)
}
