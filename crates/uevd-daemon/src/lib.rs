//! The device manager: kernel uevents in; nodes, links, the udev database,
//! loaded drivers, announcements to libudev clients and a timeline out.
//!
//! ```text
//! netlink ─ manager (main loop) ─ queue ─ workers: pipeline ─ node / links / database / broadcast / timeline
//!              │                                      └─ rules ─ builtins, programs, modules
//!              ├─ coldplug, rescan after lost events
//!              ├─ control sockets (uevd's, udev's, varlink), settle
//!              └─ node watches (OPTIONS+="watch")
//! ```
//!
//! The main loop ([`run`]) only reads and queues; everything an event
//! costs happens on a worker, in [`pipeline`]. The daemon is configured by
//! a plain [`Config`], so the command line, a unit or a test start it the
//! same way. `docs/design.md` explains the data flow and its budget.

mod activation;
mod announce;
mod coldplug;
mod config;
mod control;
mod job;
mod locks;
mod manager;
mod modules;
pub mod notify;
mod partitions;
pub mod pipeline;
mod probe_ahead;
mod reconcile;
mod rootdev;
mod rules;
mod saved;
pub mod settings;
mod settle;
mod signals;
mod udev_control;
mod varlink;
mod walked;
mod watch;

pub use announce::DEFAULT_REPLAY_EVENTS;
pub use config::{control_socket, Coldplug, Config};
pub use job::{Job, Source};
pub use manager::run;
pub use pipeline::{Known, Processor};
pub use rootdev::{boot_critical, RootDevice};
pub use settings::Settings;
pub use uevd_uevent::Properties;
pub use watch::Watches;

use uevd_control::Level;

/// Devpaths, as a set: the kernel's names, hashed with Fx (nobody who
/// could aim collisions at the daemon chooses them), as the queue and
/// the known devices are. A coldplug puts every device in one.
pub(crate) type DevpathSet = rustc_hash::FxHashSet<Box<[u8]>>;

/// Sets how much the daemon logs, now and whenever `control --log-level`
/// asks. Messages go through the `log` facade; whoever installed the
/// logger decides where they end up.
pub fn set_log_level(level: Level) {
    log::set_max_level(match level {
        Level::Error => log::LevelFilter::Error,
        Level::Warn => log::LevelFilter::Warn,
        Level::Info => log::LevelFilter::Info,
        Level::Debug => log::LevelFilter::Debug,
    });
}
