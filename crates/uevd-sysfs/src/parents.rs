//! Parent devices remembered across events.
//!
//! A thousand disks behind one SCSI host, or every function of one PCI
//! device, walk the same ancestors on every event: rules ask for
//! `SUBSYSTEMS==`, `DRIVERS==` and `ATTRS{}` of each parent in turn, and
//! builtins climb to the bus. Read afresh per event, each of those parents
//! costs a `uevent` file, a `subsystem` link and an attribute file or two,
//! every lookup a walk of the whole path through sysfs. Kept here, a parent
//! is read once, and the directories between devices (`block`, `net`, ...)
//! are looked for once.
//!
//! What the kernel changes about a device it announces with an event for
//! that device, so an entry is good until an event for it or for one of its
//! ancestors arrives: [`ParentCache::forget`] is called then, when the event
//! is received (and again when it has been processed, since its rules may
//! write attributes), and drops the device and everything below it. A
//! driver bound or unbound changes the device alone, and its event says
//! all its `uevent` file would: the device is remembered as the event has
//! it ([`crate::Sysfs::event_seen`]).

use crate::Core;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// What one directory on the way up from a device turned out to be.
#[derive(Clone)]
pub(crate) enum Known {
    /// A directory between devices (no `uevent` file).
    NotADevice,
    /// A device, with what has been read of it so far.
    Device(Arc<Core>),
}

/// Ancestors seen so far, by devpath. Ordered so that a device and
/// everything below it form one range.
#[derive(Default)]
pub struct ParentCache {
    known: Mutex<BTreeMap<Box<[u8]>, Known>>,
}

impl ParentCache {
    pub(crate) fn get(&self, devpath: &[u8]) -> Option<Known> {
        self.lock().get(devpath).cloned()
    }

    pub(crate) fn insert(&self, devpath: &[u8], known: Known) {
        self.lock().insert(devpath.into(), known);
    }

    /// Drops `devpath` alone.
    pub(crate) fn forget_one(&self, devpath: &[u8]) {
        self.lock().remove(devpath);
    }

    /// Drops `devpath` and every entry below it.
    pub fn forget(&self, devpath: &[u8]) {
        if devpath.is_empty() {
            return;
        }
        let mut known = self.lock();
        // The keys that start with devpath sort together from devpath on
        // (so no end key has to be made for the range); among them,
        // siblings such as "sda-x" are not below it.
        let below = |k: &[u8]| {
            k.len() == devpath.len() || (k.len() > devpath.len() && k[devpath.len()] == b'/')
        };
        let gone: Vec<Box<[u8]>> = known
            .range::<[u8], _>((
                std::ops::Bound::Included(devpath),
                std::ops::Bound::Unbounded,
            ))
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(devpath))
            .filter(|k| below(k))
            .cloned()
            .collect();
        for k in gone {
            known.remove(&k);
        }
    }

    /// How many directories are remembered.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Box<[u8]>, Known>> {
        // A panic elsewhere while holding the lock leaves a map that is
        // still whole: entries are inserted and removed, never half-made.
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgetting_a_device_drops_it_and_what_is_below_it_only() {
        let cache = ParentCache::default();
        for dp in [
            "/devices/pci0",
            "/devices/pci0/host0",
            "/devices/pci0/host0/target0",
            "/devices/pci0/host0-x",
            "/devices/pci0/host00",
            "/devices/pci0/host0~",
            "/devices/pci0/host1",
        ] {
            cache.insert(dp.as_bytes(), Known::NotADevice);
        }
        cache.forget(b"/devices/pci0/host0");
        let left: Vec<String> = cache
            .lock()
            .keys()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
        assert_eq!(
            left,
            [
                "/devices/pci0",
                "/devices/pci0/host0-x",
                "/devices/pci0/host00",
                "/devices/pci0/host0~",
                "/devices/pci0/host1"
            ]
        );
        cache.forget(b"/devices/pci0");
        assert!(cache.is_empty());
        cache.forget(b"");
    }
}
