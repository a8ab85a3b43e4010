//! An event waiting in the queue, and what the queue orders it by.

use uevd_queue::{DevKey, EventKeys};
use uevd_timeline::now;
use uevd_uevent::Uevent;

/// Where an event came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Kernel,
    Coldplug,
    Rescan,
    /// Saved by the daemon before this one, which exited before starting
    /// it, or what the kernel did meanwhile to a device it names.
    Restored,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Kernel => "kernel",
            Source::Coldplug => "coldplug",
            Source::Rescan => "rescan",
            Source::Restored => "restored",
        }
    }
}

pub struct Job {
    pub event: Uevent,
    pub source: Source,
    /// When it was read or synthesised (boottime ns), for the timeline.
    pub arrived: u64,
}

impl Job {
    pub fn new(event: Uevent, source: Source) -> Job {
        Job {
            event,
            source,
            arrived: now(),
        }
    }

    /// What the queue orders this event by: events for one device, its
    /// parents and children, its number and its interface index run in
    /// arrival order.
    pub fn keys(&self) -> EventKeys {
        let ev = &self.event;
        EventKeys {
            devpath: ev.devpath().into(),
            devpath_old: ev.devpath_old().map(Into::into),
            devnum: ev.devnum().map(|(major, minor)| DevKey {
                block: ev.is_block(),
                major,
                minor,
            }),
            ifindex: ev.ifindex(),
        }
    }
}
