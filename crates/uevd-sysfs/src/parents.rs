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
//! [`RECENT_KEPT`] added, and a kind of device (subsystem and devtype) of
//! which [`LEARNED_AFTER`] were added and none climbed to is no longer
//! remembered; a climb that finds an entry makes it a parent like the
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

/// How many devices of one kind (subsystem and devtype) are remembered as
/// they are added before, none of them having been climbed to, the kind
/// is taken for one that has no children: network interfaces, partitions,
/// a disk's `bsg` node. Remembering those costs every event a copy of it
/// and the map's upkeep for nothing.
pub const LEARNED_AFTER: u32 = 64;

struct Entry {
    known: Known,
    /// Remembered because it was added, not yet climbed to: its kind.
    recent: Option<usize>,
}

/// What adds of one kind of device taught.
struct Kind {
    subsystem: Box<[u8]>,
    devtype: Box<[u8]>,
    added: u32,
    climbed: u32,
}

#[derive(Default)]
struct Remembered {
    /// Ordered so that a device and everything below it form one range.
    known: BTreeMap<Box<[u8]>, Entry>,
    /// The recent entries, oldest first (some since forgotten or climbed
    /// to, which leaving them costs nothing).
    recent: VecDeque<Box<[u8]>>,
    kinds: Vec<Kind>,
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
        let r = &mut *self.lock();
        let entry = r.known.get_mut(devpath)?;
        if let Some(kind) = entry.recent.take() {
            r.kinds[kind].climbed += 1;
        }
        Some(entry.known.clone())
    }

    /// The device remembered at `devpath`, if one is; unlike
    /// [`ParentCache::get`] this is no climb to it.
    pub(crate) fn device(&self, devpath: &[u8]) -> Option<Arc<Core>> {
        match &self.lock().known.get(devpath)?.known {
            Known::Device(core) => Some(core.clone()),
            Known::NotADevice => None,
        }
    }

    pub(crate) fn insert(&self, devpath: &[u8], known: Known) {
        let entry = Entry {
            known,
            recent: None,
        };
        self.lock().known.insert(devpath.into(), entry);
    }

    /// Remembers a device that was just added, as its event describes it,
    /// for as long as it is among the last [`RECENT_KEPT`] (unless a climb
    /// reaches it first). `kind` is from [`ParentCache::added`].
    pub(crate) fn insert_recent(&self, devpath: &[u8], core: Arc<Core>, kind: usize) {
        let r = &mut *self.lock();
        if let Some(k) = r.kinds.get_mut(kind) {
            k.added = k.added.saturating_add(1);
        }
        let entry = Entry {
            known: Known::Device(core),
            recent: Some(kind),
        };
        r.known.insert(devpath.into(), entry);
        r.recent.push_back(devpath.into());
        while r.recent.len() > RECENT_KEPT {
            let Some(old) = r.recent.pop_front() else {
                break;
            };
            if r.known.get(&old).is_some_and(|e| e.recent.is_some()) {
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
        forget_below(&mut self.lock().known, devpath, false);
    }

    /// What an `add` of `devpath` processed changes, under one lock (every
    /// worker takes it once per event, and once more, in
    /// [`ParentCache::insert_recent`], for a device worth remembering: its
    /// copy is made between the two, outside the lock). The devices below it are dropped,
    /// and what is known of the directories between them kept: rules may
    /// have written attributes, which do not move anything in the tree.
    /// Returns the device's kind if a device of that kind just added is
    /// worth remembering for children (see [`LEARNED_AFTER`]), for
    /// [`ParentCache::insert_recent`].
    pub(crate) fn added(&self, devpath: &[u8], subsystem: &[u8], devtype: &[u8]) -> Option<usize> {
        let r = &mut *self.lock();
        forget_below(&mut r.known, devpath, true);
        kind_wanted(&mut r.kinds, subsystem, devtype)
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

fn forget_below(known: &mut BTreeMap<Box<[u8]>, Entry>, devpath: &[u8], keep_between: bool) {
    if devpath.is_empty() {
        return;
    }
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

/// The kind's index among those seen, if a device of that kind just added
/// is worth remembering.
fn kind_wanted(kinds: &mut Vec<Kind>, subsystem: &[u8], devtype: &[u8]) -> Option<usize> {
    let i = match kinds
        .iter()
        .position(|k| *k.subsystem == *subsystem && *k.devtype == *devtype)
    {
        Some(i) => i,
        None => {
            kinds.push(Kind {
                subsystem: subsystem.into(),
                devtype: devtype.into(),
                added: 0,
                climbed: 0,
            });
            kinds.len() - 1
        }
    };
    let kind = &kinds[i];
    (kind.climbed > 0 || kind.added < LEARNED_AFTER).then_some(i)
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
        let peek = |dp: &str| {
            let r = cache.lock();
            r.known.get(dp.as_bytes()).map(|e| e.recent.is_some())
        };
        let add = |dp: &str| {
            let kind = cache
                .added(dp.as_bytes(), b"scsi", b"")
                .expect("climbed to");
            cache.insert_recent(dp.as_bytes(), core(dp), kind)
        };
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
    fn a_kind_never_climbed_to_is_no_longer_remembered() {
        let cache = ParentCache::default();
        let mut added = 0;
        let net = |i: u32| format!("/devices/virtual/net/dummy{i}");
        while let Some(kind) = cache.added(net(added).as_bytes(), b"net", b"") {
            let dp = net(added);
            cache.insert_recent(dp.as_bytes(), core(&dp), kind);
            added += 1;
            assert!(added <= LEARNED_AFTER, "learned by now");
        }
        assert_eq!(added, LEARNED_AFTER);
        assert_eq!(
            cache.len(),
            LEARNED_AFTER as usize,
            "those stay until evicted"
        );
        // Another kind is still tried; one climb keeps it remembered.
        for i in 0..LEARNED_AFTER * 2 {
            let dp = format!("/devices/host0/target0:0:{i}/0:0:{i}:0");
            let kind = cache.added(dp.as_bytes(), b"scsi", b"scsi_device");
            cache.insert_recent(dp.as_bytes(), core(&dp), kind.expect("a parent kind"));
            if i == LEARNED_AFTER - 1 {
                assert!(cache.get(dp.as_bytes()).is_some());
            }
        }
        assert!(cache
            .added(b"/devices/virtual/net/x", b"net", b"")
            .is_none());
        let wlan = cache.added(b"/devices/virtual/net/w", b"net", b"wlan");
        assert!(wlan.is_some(), "devtype is part of the kind");
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
