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
//!
//! An `add` says the same, so a device just added is remembered too
//! ([`crate::Sysfs::event_processed`]): its children's events come next
//! (they wait for it), and each would otherwise read again, for its first
//! climb, the `uevent` file and `subsystem` link that the add carried or
//! that the coldplug read a moment before. Most devices are never anyone's
//! parent, so such an entry is only kept while it is among the last
//! [`RECENT_KEPT`] added; a climb that finds it makes it a parent like the
//! others.

use crate::Core;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

/// What one directory on the way up from a device turned out to be.
#[derive(Clone)]
pub(crate) enum Known {
    /// A directory between devices (no `uevent` file).
    NotADevice,
    /// A device, with what has been read of it so far.
    Device(Arc<Core>),
}

/// How many devices just added are remembered before anyone climbed to
/// them. A child's event runs soon after its parent's: the coldplug reads
/// a parent's children right after it, and the kernel adds them right
/// after it; a few thousand events apart is far more than either.
pub const RECENT_KEPT: usize = 4096;

struct Entry {
    known: Known,
    /// Remembered because it was added, not yet climbed to.
    recent: bool,
}

#[derive(Default)]
struct Remembered {
    /// Ordered so that a device and everything below it form one range.
    known: BTreeMap<Box<[u8]>, Entry>,
    /// The recent entries, oldest first (some since forgotten or climbed
    /// to, which leaving them costs nothing).
    recent: VecDeque<Box<[u8]>>,
}

/// Ancestors seen so far, by devpath.
#[derive(Default)]
pub struct ParentCache {
    remembered: Mutex<Remembered>,
}

impl ParentCache {
    /// What is known of `devpath`, for a climb from below it: a device
    /// remembered as recently added is a parent from now on.
    pub(crate) fn get(&self, devpath: &[u8]) -> Option<Known> {
        let mut r = self.lock();
        let entry = r.known.get_mut(devpath)?;
        entry.recent = false;
        Some(entry.known.clone())
    }

    pub(crate) fn insert(&self, devpath: &[u8], known: Known) {
        let entry = Entry {
            known,
            recent: false,
        };
        self.lock().known.insert(devpath.into(), entry);
    }

    /// Remembers a device that was just added, as its event describes it,
    /// for as long as it is among the last [`RECENT_KEPT`] (unless a climb
    /// reaches it first).
    pub(crate) fn insert_recent(&self, devpath: &[u8], core: Arc<Core>) {
        let mut r = self.lock();
        let entry = Entry {
            known: Known::Device(core),
            recent: true,
        };
        r.known.insert(devpath.into(), entry);
        r.recent.push_back(devpath.into());
        while r.recent.len() > RECENT_KEPT {
            let Some(old) = r.recent.pop_front() else {
                break;
            };
            if r.known.get(&old).is_some_and(|e| e.recent) {
                r.known.remove(&old);
            }
        }
    }

    /// Drops `devpath` alone.
    pub(crate) fn forget_one(&self, devpath: &[u8]) {
        self.lock().known.remove(devpath);
    }

    /// Drops `devpath` and every entry below it.
    pub fn forget(&self, devpath: &[u8]) {
        self.forget_below(devpath, false);
    }

    /// Drops `devpath` and every device below it, keeping what is known of
    /// the directories between them: a device's attributes may change
    /// without an event (rules write them), its place in the tree does not.
    pub(crate) fn forget_devices(&self, devpath: &[u8]) {
        self.forget_below(devpath, true);
    }

    fn forget_below(&self, devpath: &[u8], keep_between: bool) {
        if devpath.is_empty() {
            return;
        }
        let known = &mut self.lock().known;
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
            .take_while(|(k, _)| k.starts_with(devpath))
            .filter(|(k, e)| below(k) && !(keep_between && matches!(e.known, Known::NotADevice)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            known.remove(&k);
        }
    }

    /// How many directories are remembered.
    pub fn len(&self) -> usize {
        self.lock().known.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Remembered> {
        // A panic elsewhere while holding the lock leaves a map that is
        // still whole: entries are inserted and removed, never half-made.
        self.remembered.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(devpath: &str) -> Arc<Core> {
        let text = format!("ACTION=add\0DEVPATH={devpath}\0SUBSYSTEM=scsi\0");
        Arc::new(Core::new(
            uevd_uevent::Uevent::parse_properties(text.as_bytes()).unwrap(),
        ))
    }

    #[test]
    fn devices_just_added_are_kept_a_while_unless_climbed_to() {
        let cache = ParentCache::default();
        // Whether an entry is there, and still only recent; without the
        // climb `get` would be.
        let peek = |dp: &str| cache.lock().known.get(dp.as_bytes()).map(|e| e.recent);
        let add = |dp: &str| cache.insert_recent(dp.as_bytes(), core(dp));
        add("/devices/a");
        add("/devices/b");
        cache.insert(b"/devices/p", Known::NotADevice);
        // A climb reached a: it is a parent from now on.
        assert!(matches!(cache.get(b"/devices/a"), Some(Known::Device(_))));
        assert_eq!(peek("/devices/a"), Some(false));
        for i in 0..RECENT_KEPT - 2 {
            add(&format!("/devices/c{i}"));
        }
        assert_eq!(peek("/devices/b"), Some(true), "among the last");
        // One more each time: the oldest recent entry goes, unless it was
        // climbed to.
        add("/devices/d0");
        assert_eq!(peek("/devices/a"), Some(false));
        add("/devices/d1");
        assert_eq!(peek("/devices/b"), None);
        assert_eq!(peek("/devices/c0"), Some(true));
        add("/devices/d2");
        assert_eq!(peek("/devices/c0"), None);
        assert_eq!(peek("/devices/c1"), Some(true));
        assert!(matches!(cache.get(b"/devices/p"), Some(Known::NotADevice)));
        assert_eq!(cache.lock().recent.len(), RECENT_KEPT);
        assert_eq!(cache.len(), RECENT_KEPT + 2, "the recent, a and p");
    }

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
            .known
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
