//! An event waiting in the queue, and what the queue orders it by.

use crate::RootDevice;
use std::time::Instant;
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

/// Stamps the jobs of a batch about to be queued with one clock read:
/// events read or synthesised in one go enter the queue together, and a
/// clock read per event costs a system call where the clock has no vDSO.
/// Nothing is read when no timeline records it.
pub fn stamp_arrival<'a>(timed: bool, jobs: impl Iterator<Item = &'a mut Job>) {
    if timed {
        let at = now();
        jobs.for_each(|j| j.arrived = at);
    }
}

pub struct Job {
    pub event: Uevent,
    pub source: Source,
    /// When it was queued (boottime ns), for the timeline: stamped by
    /// [`stamp_arrival`] for a whole batch at once.
    pub arrived: u64,
    /// The whole disk (its node name) someone else held locked when the
    /// event was tried, and since when: it waits for the lock to go.
    pub locked: Option<(Box<[u8]>, Instant)>,
}

impl Job {
    pub fn new(event: Uevent, source: Source) -> Job {
        Job {
            event,
            source,
            arrived: 0,
            locked: None,
        }
    }

    /// What the queue orders this event by: events for one device, its
    /// parents and children, its number and its interface index run in
    /// arrival order. One that may be for the root device is urgent.
    pub fn keys(&self, root: Option<&RootDevice>) -> EventKeys {
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
            urgent: root.is_some_and(|r| r.is_candidate(ev)),
        }
    }
}
