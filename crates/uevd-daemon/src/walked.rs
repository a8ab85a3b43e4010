//! The kernel's own `add` for a device the read-mode coldplug had already
//! read and queued.
//!
//! While the coldplug walks sysfs, drivers load (the drivers of the first
//! devices start at once) and create devices of their own: sg makes one
//! for every SCSI device, virtio_pci its virtio devices. A device the walk
//! reaches after the driver made it is queued from its uevent file, and
//! the kernel's `add` for it, sent when it was made, arrives too. Both
//! describe one device: the second would be processed twice, rules,
//! probes and all. A kernel `add` numbered after the walk began, for a
//! device the walk queued and that has not gone since, is that copy.
//!
//! Every event numbered up to the walk's end is in the daemon's socket
//! once the walk is over (the kernel hands an event to its listeners as
//! it numbers it), so the daemon keeps this only until its next read of
//! the socket to the end.

use uevd_uevent::{Action, Uevent};

/// What the walk queued, and the kernel's uevent numbers around it.
pub(crate) struct Walked {
    /// /sys/kernel/uevent_seqnum before the walk: older events were sent
    /// before any device was read.
    since: u64,
    /// The same after the walk: newer events announce what came after
    /// and are kept.
    until: u64,
    devpaths: crate::DevpathSet,
}

/// What to do with a kernel event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Keep,
    /// A copy of a device the walk queued: not queued again.
    Copy,
}

impl Walked {
    pub(crate) fn new(since: u64, until: u64, devpaths: crate::DevpathSet) -> Walked {
        Walked {
            since,
            until,
            devpaths,
        }
    }

    pub(crate) fn check(&mut self, ev: &Uevent) -> Verdict {
        let Some(n) = ev.seqnum() else {
            return Verdict::Keep;
        };
        if n <= self.since || n > self.until {
            return Verdict::Keep;
        }
        match ev.action() {
            Action::Add if self.devpaths.remove(ev.devpath()) => Verdict::Copy,
            // Gone (or renamed) after the walk read it: what comes next for
            // that path is new.
            Action::Remove => {
                self.devpaths.remove(ev.devpath());
                Verdict::Keep
            }
            Action::Move => {
                if let Some(old) = ev.devpath_old() {
                    self.devpaths.remove(old);
                }
                self.devpaths.remove(ev.devpath());
                Verdict::Keep
            }
            _ => Verdict::Keep,
        }
    }
}

/// The kernel's uevent sequence number now, from sysfs.
pub(crate) fn kernel_seqnum(sysfs: &uevd_sysfs::Sysfs) -> Option<u64> {
    std::fs::read_to_string(sysfs.root().join("kernel/uevent_seqnum"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Verdict::{Copy, Keep};

    /// The walk: 100 before it, 200 after it, these devices queued.
    fn walked(devpaths: &[&str]) -> Walked {
        let devpaths = devpaths.iter().map(|d| Box::from(d.as_bytes())).collect();
        Walked::new(100, 200, devpaths)
    }

    /// Verdicts on events given as (action, devpath, seqnum, more).
    fn verdicts(w: &mut Walked, events: &[(&str, &str, u64, &str)]) -> Vec<Verdict> {
        events
            .iter()
            .map(|(action, devpath, seqnum, more)| {
                let text = format!(
                    "ACTION={action}\0DEVPATH={devpath}\0SUBSYSTEM=x\0SEQNUM={seqnum}\0{more}"
                );
                w.check(&Uevent::parse_properties(text.as_bytes()).unwrap())
            })
            .collect()
    }

    #[test]
    fn a_kernel_add_sent_during_the_walk_for_a_walked_device_is_a_copy_once() {
        let mut w = walked(&["/devices/h/sg0", "/devices/h/sg1"]);
        let got = verdicts(
            &mut w,
            &[
                ("add", "/devices/h/sg0", 150, ""),
                // Only once: a second add is the device's own.
                ("add", "/devices/h/sg0", 151, ""),
                // Not walked.
                ("add", "/devices/h/sg9", 152, ""),
                // Other actions for a walked device.
                ("bind", "/devices/h/sg1", 153, ""),
            ],
        );
        assert_eq!(got, [Copy, Keep, Keep, Keep]);
    }

    #[test]
    fn events_from_before_the_walk_and_after_it_are_kept() {
        let mut w = walked(&["/devices/h/sg0"]);
        let got = verdicts(
            &mut w,
            &[
                ("add", "/devices/h/sg0", 100, ""),
                ("add", "/devices/h/sg0", 201, ""),
                ("add", "/devices/h/sg0", 150, ""),
            ],
        );
        assert_eq!(got, [Keep, Keep, Copy]);
    }

    #[test]
    fn a_device_gone_or_renamed_after_the_walk_read_it_comes_back_as_new() {
        let mut w = walked(&["/devices/h/sg0", "/devices/v/net/eth0"]);
        let got = verdicts(
            &mut w,
            &[
                ("remove", "/devices/h/sg0", 150, ""),
                ("add", "/devices/h/sg0", 151, ""),
                (
                    "move",
                    "/devices/v/net/ens2",
                    160,
                    "DEVPATH_OLD=/devices/v/net/eth0\0",
                ),
                ("add", "/devices/v/net/eth0", 161, ""),
            ],
        );
        assert_eq!(got, [Keep, Keep, Keep, Keep]);
    }
}
