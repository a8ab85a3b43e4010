//! Everything the daemon is told at start, as plain data: the command
//! line, a unit file or a test fills it in the same way.

use std::path::{Path, PathBuf};
use uevd_control::Level;

/// How coldplug learns about the devices that exist at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coldplug {
    /// Read each device's `uevent` file (what `mdev -s` does): the kernel
    /// sends nothing.
    Read,
    /// Write `add` into each `uevent` file and process what the kernel
    /// sends back (what `udevadm trigger` does).
    Trigger,
}

#[derive(Clone, Debug)]
pub struct Config {
    /// The sysfs mount.
    pub sys: PathBuf,
    /// The device directory.
    pub dev: PathBuf,
    /// The runtime directory: udev/ (database) and uevd/ (control socket,
    /// timeline) live below it.
    pub run: PathBuf,
    /// Where rules come from and how their programs run.
    pub rules: uevd_rules::Config,
    /// Fork, and let the parent return once events are being received.
    pub detach: bool,
    /// Process every existing device at start, as boot needs.
    pub coldplug: Option<Coldplug>,
    /// Worker threads; `None` sizes the pool to the machine.
    pub workers: Option<usize>,
    /// Netlink receive buffer in bytes.
    pub receive_buffer: usize,
    /// The timeline journal; `None` records nothing.
    pub timeline: Option<PathBuf>,
    /// Largest timeline journal, in bytes.
    pub timeline_max: u64,
    /// Which events' steps, builtins and rule lines the timeline times.
    pub timeline_steps: uevd_timeline::StepTiming,
    /// Where log messages go instead of stderr; with `detach` and no file,
    /// the kernel log.
    pub log_file: Option<PathBuf>,
    pub log_level: Level,
    /// Announce processed events to libudev clients (netlink group 2).
    pub broadcast: bool,
    /// The device the system boots from (the kernel command line's
    /// `root=`): the events that may be for it, and what they wait for, go
    /// first.
    pub root: Option<crate::RootDevice>,
    /// Announcements kept for clients that fell behind (`replay`); 0 keeps
    /// none.
    pub replay_events: usize,
}

impl Config {
    /// udev's defaults below the given roots; the timeline goes to
    /// RUN/uevd/timeline.jsonl.
    pub fn new(
        sys: impl Into<PathBuf>,
        dev: impl Into<PathBuf>,
        run: impl Into<PathBuf>,
    ) -> Config {
        let run = run.into();
        Config {
            sys: sys.into(),
            dev: dev.into(),
            timeline: Some(run.join("uevd").join("timeline.jsonl")),
            run,
            rules: uevd_rules::Config::default(),
            detach: false,
            coldplug: None,
            workers: None,
            receive_buffer: uevd_netlink::DEFAULT_RECEIVE_BUFFER,
            timeline_max: 256 << 20,
            timeline_steps: uevd_timeline::StepTiming::Auto,
            log_file: None,
            log_level: Level::Info,
            broadcast: true,
            root: None,
            replay_events: crate::announce::DEFAULT_REPLAY_EVENTS,
        }
    }

    /// The database and libudev's view of a running manager.
    pub fn udev_dir(&self) -> PathBuf {
        self.run.join("udev")
    }

    /// uevd's control socket.
    pub fn control(&self) -> PathBuf {
        control_socket(&self.run)
    }
}

/// Where the control socket of a daemon whose runtime directory is `run`
/// listens: clients and the daemon must agree on it.
pub fn control_socket(run: &Path) -> PathBuf {
    run.join("uevd").join("control")
}
