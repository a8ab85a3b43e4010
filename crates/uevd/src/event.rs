//! Processing one event: the node, its links, the database, the
//! announcement to libudev clients and the timeline record.
//!
//! Everything a device needs is derived from the event itself and from what
//! uevd remembers of the device; sysfs is read only when a decision needs
//! it. Nothing forks.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use uevd_db::{Database, DeviceId, Record};
use uevd_netlink::Broadcaster;
use uevd_node::{DevDir, Node, NodeKind, Permissions};
use uevd_queue::{DevKey, EventId, EventKeys};
use uevd_sysfs::{Device, Sysfs};
use uevd_timeline::{now, Entry, EventRecord, Journal, Step};
use uevd_uevent::{monitor, Action, Uevent};

/// Properties added to an event when it is announced as processed.
type Properties = Vec<(Vec<u8>, Vec<u8>)>;

/// What becomes of a device: decided by the kernel's defaults today, by
/// the rules when they run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub permissions: Permissions,
    /// Links below /dev to the device's node.
    pub links: Vec<Vec<u8>>,
    pub link_priority: i32,
    /// Properties recorded in the database (E: lines).
    pub properties: Properties,
    pub tags: Vec<Vec<u8>>,
    pub db_persist: bool,
}

/// What a processed event announces beyond the kernel's properties, in
/// udev's spelling. Failures on the way are reported beside it.
fn announced_properties(record: &Record) -> Properties {
    let mut out = vec![(
        b"USEC_INITIALIZED".to_vec(),
        record.usec_initialized.to_string().into_bytes(),
    )];
    out.extend(record.properties.iter().cloned());
    if !record.links.is_empty() {
        let devlinks: Vec<Vec<u8>> = record
            .links
            .iter()
            .map(|l| [&b"/dev/"[..], l].concat())
            .collect();
        out.push((b"DEVLINKS".to_vec(), devlinks.join(&b' ')));
    }
    let tag_list = |tags: &[Vec<u8>]| [&b":"[..], &tags.join(&b':'), b":"].concat();
    if !record.tags.is_empty() {
        out.push((b"TAGS".to_vec(), tag_list(&record.tags)));
    }
    if !record.current_tags.is_empty() {
        out.push((b"CURRENT_TAGS".to_vec(), tag_list(&record.current_tags)));
    }
    out
}

/// Where an event came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Kernel,
    Coldplug,
    Rescan,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Source::Kernel => "kernel",
            Source::Coldplug => "coldplug",
            Source::Rescan => "rescan",
        }
    }
}

/// An event waiting in the queue.
pub struct Job {
    pub event: Uevent,
    pub source: Source,
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

    /// What the queue orders this event by.
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

/// What uevd remembers about a device it has processed, so that neither
/// a change nor a remove has to read the database back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Known {
    pub id: DeviceId,
    pub subsystem: Box<[u8]>,
    pub devnum: Option<(u32, u32)>,
    pub ifindex: Option<u32>,
    pub devname: Option<Box<[u8]>>,
    pub record: Record,
    /// Whether the record is in the database (devices with nothing to say
    /// and no number or interface index have no file).
    pub stored: bool,
}

/// The state every worker shares.
pub struct Processor {
    pub sysfs: Sysfs,
    pub dev: DevDir,
    pub db: Database,
    broadcaster: Option<Broadcaster>,
    pub journal: Journal,
    known: Mutex<HashMap<Box<[u8]>, Known>>,
    /// Records found on disk at start that no event has claimed yet (left
    /// by an earlier run or the initramfs): only these are worth reading.
    unclaimed: Mutex<HashSet<DeviceId>>,
    pub processed: AtomicU64,
    pub failed: AtomicU64,
}

/// Times the steps of one event.
struct Clock {
    steps: Vec<Step>,
    mark: u64,
    enabled: bool,
}

impl Clock {
    fn new(enabled: bool) -> Clock {
        Clock {
            steps: Vec::new(),
            mark: if enabled { now() } else { 0 },
            enabled,
        }
    }

    fn step(&mut self, name: &'static str) {
        if self.enabled {
            let t = now();
            self.steps.push(Step {
                name,
                start: self.mark,
                duration: t - self.mark,
            });
            self.mark = t;
        }
    }
}

fn parse_octal(v: &[u8]) -> Option<u32> {
    u32::from_str_radix(std::str::from_utf8(v).ok()?, 8).ok()
}

fn parse_dec(v: &[u8]) -> Option<u32> {
    std::str::from_utf8(v).ok()?.parse().ok()
}

impl Processor {
    pub fn new(
        sysfs: Sysfs,
        dev: DevDir,
        db: Database,
        broadcaster: Option<Broadcaster>,
        journal: Journal,
    ) -> Processor {
        let unclaimed = Mutex::new(db.ids().into_iter().collect());
        Processor {
            sysfs,
            dev,
            db,
            unclaimed,
            broadcaster,
            journal,
            known: Mutex::default(),
            processed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<Box<[u8]>, Known>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many devices uevd knows now.
    pub fn known_count(&self) -> usize {
        self.known().len()
    }

    /// Devices processed and not removed, by devpath: what a rescan
    /// compares sysfs with.
    pub fn known_devices(&self) -> HashMap<Box<[u8]>, Known> {
        self.known().clone()
    }

    /// Processes one event on worker `worker`.
    pub fn process(&self, worker: usize, id: EventId, job: Job) {
        let started = now();
        let mut clock = Clock::new(self.journal.enabled());
        let device = Device::from_event(&self.sysfs, job.event);
        let result = match device.event().action() {
            Action::Remove => self.remove(&device, &mut clock),
            _ => self.update(&device, &mut clock),
        };
        let (announce, errors) = result;
        let error = (!errors.is_empty()).then(|| errors.join("; "));
        if let Some(e) = &error {
            self.failed.fetch_add(1, Ordering::Relaxed);
            log::warn!(
                "{} {}: {e}",
                device.event().action(),
                device.devpath_os().to_string_lossy()
            );
        }
        // The device exists (or went) whatever failed on the way: clients
        // hear about it either way.
        if let Some(b) = &self.broadcaster {
            self.announce(b, &device, &announce);
            clock.step("broadcast");
        }
        self.processed.fetch_add(1, Ordering::Relaxed);
        if self.journal.enabled() {
            let ev = device.event();
            self.journal.record(Entry::Event(EventRecord {
                id,
                seqnum: ev.seqnum(),
                action: ev.action().as_str(),
                devpath: device.devpath_os().to_string_lossy().into_owned(),
                subsystem: String::from_utf8_lossy(ev.subsystem().unwrap_or_default()).into_owned(),
                source: job.source.as_str(),
                synth_uuid: ev
                    .synth_uuid()
                    .map(|u| String::from_utf8_lossy(u).into_owned()),
                worker,
                arrived: job.arrived,
                started,
                finished: now(),
                steps: clock.steps,
                error,
            }));
        }
    }

    fn node_of(dev: &Device) -> Option<Node<'_>> {
        let (major, minor) = dev.devnum()?;
        Some(Node {
            name: dev.devname()?,
            kind: if dev.is_block() {
                NodeKind::Block
            } else {
                NodeKind::Char
            },
            major,
            minor,
        })
    }

    /// What should become of a device. With no rules the kernel decides:
    /// its DEVUID, DEVGID and DEVMODE for a node uevd creates itself
    /// (devtmpfs has applied them already), no links, properties or tags.
    fn decide(&self, dev: &Device) -> Outcome {
        let mut outcome = Outcome::default();
        if !self.dev.devtmpfs() {
            let ev = dev.event();
            outcome.permissions = Permissions {
                uid: Some(ev.get(b"DEVUID").and_then(parse_dec).unwrap_or(0)),
                gid: Some(ev.get(b"DEVGID").and_then(parse_dec).unwrap_or(0)),
                mode: Some(ev.get(b"DEVMODE").and_then(parse_octal).unwrap_or(0o600)),
            };
        }
        outcome
    }

    fn device_id(dev: &Device) -> DeviceId {
        let subsystem = dev.event().subsystem().unwrap_or_default();
        DeviceId::new(subsystem, dev.devpath(), dev.devnum(), dev.ifindex())
    }

    /// What uevd knew of a device: from memory, or after a restart from
    /// the database.
    fn previous(&self, devpath: &[u8], id: &DeviceId) -> Option<Record> {
        if let Some(k) = self.known().get(devpath) {
            return k.stored.then(|| k.record.clone());
        }
        let on_disk = self
            .unclaimed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if !on_disk {
            return None;
        }
        match self.db.read(id) {
            Ok(r) => r,
            Err(e) => {
                log::warn!("{e}; the record will be rewritten");
                None
            }
        }
    }

    /// add, change, move, bind, unbind, online, offline.
    fn update(&self, dev: &Device, clock: &mut Clock) -> (Properties, Vec<String>) {
        let id = Self::device_id(dev);
        let ev = dev.event();
        // A renamed device keeps what uevd knew of it under its old path.
        let moved = match (ev.action(), ev.devpath_old()) {
            (Action::Move, Some(old)) => self.known().remove(old),
            _ => None,
        };
        let previous = match moved {
            Some(k) => {
                if k.id != id && k.stored {
                    let _ = self.db.remove(&k.id);
                }
                k.stored.then_some(k.record)
            }
            None => self.previous(dev.devpath(), &id),
        };
        let outcome = self.decide(dev);
        clock.step("device");
        let node = Self::node_of(dev);
        let mut errors = Vec::new();
        let mut links = outcome.links;
        links.sort();
        links.dedup();
        if let Some(node) = &node {
            if let Err(e) = self.dev.apply_node(node, outcome.permissions) {
                errors.push(e.to_string());
            }
            clock.step("node");
            let devnum_link = DevDir::devnum_link(node);
            for l in std::iter::once(&devnum_link).chain(&links) {
                if let Err(e) = self.dev.link(l, node.name) {
                    errors.push(e.to_string());
                }
            }
            if let Some(prev) = &previous {
                for stale in prev.links.iter().filter(|l| !links.contains(l)) {
                    if let Err(e) = self.dev.unlink(stale, node.name) {
                        errors.push(e.to_string());
                    }
                }
            }
            clock.step("links");
        }
        let usec = previous
            .as_ref()
            .map(|p| p.usec_initialized)
            .filter(|&u| u > 0)
            .unwrap_or_else(uevd_timeline::monotonic_usec);
        let had_record = previous.is_some();
        let old_tags = previous.map(|p| p.tags).unwrap_or_default();
        // G: keeps every tag the device ever had; Q: what this event set.
        let mut tags = old_tags.clone();
        for t in &outcome.tags {
            if !tags.contains(t) {
                tags.push(t.clone());
            }
        }
        let record = Record {
            links,
            link_priority: outcome.link_priority,
            usec_initialized: usec,
            properties: outcome.properties,
            tags,
            current_tags: outcome.tags,
            persist: outcome.db_persist,
        };
        let has_ifindex = dev.ifindex().is_some();
        // A device with nothing to record and no record before: no file.
        let stored = record.needs_file(node.is_some(), has_ifindex);
        let nothing_to_do = !stored && !had_record;
        if !nothing_to_do {
            if let Err(e) = self.db.write(&id, &record, node.is_some(), has_ifindex) {
                errors.push(format!("database {id}: {e}"));
            }
        }
        if old_tags != record.tags {
            if let Err(e) = self.db.index_tags(&id, &old_tags, &record.tags) {
                errors.push(format!("tags {id}: {e}"));
            }
        }
        clock.step("db");
        let announce = announced_properties(&record);
        self.known().insert(
            dev.devpath().into(),
            Known {
                id,
                subsystem: ev.subsystem().unwrap_or_default().into(),
                devnum: dev.devnum(),
                ifindex: dev.ifindex(),
                devname: dev.devname().map(Into::into),
                stored,
                record,
            },
        );
        (announce, errors)
    }

    fn remove(&self, dev: &Device, clock: &mut Clock) -> (Properties, Vec<String>) {
        let id = Self::device_id(dev);
        let known = self.known().remove(dev.devpath());
        let previous = match known {
            Some(k) => k.stored.then_some(k.record),
            None => self.previous(dev.devpath(), &id),
        };
        clock.step("device");
        let mut errors = Vec::new();
        if let Some(node) = Self::node_of(dev) {
            let mut links = previous
                .as_ref()
                .map(|p| p.links.clone())
                .unwrap_or_default();
            links.push(DevDir::devnum_link(&node));
            for l in &links {
                if let Err(e) = self.dev.unlink(l, node.name) {
                    errors.push(e.to_string());
                }
            }
            clock.step("links");
            if let Err(e) = self.dev.remove_node(&node) {
                errors.push(e.to_string());
            }
            clock.step("node");
        }
        if let Some(prev) = &previous {
            if let Err(e) = self.db.index_tags(&id, &prev.tags, &[]) {
                errors.push(format!("tags {id}: {e}"));
            }
        }
        // No record remembered and none left on disk: no file to remove.
        if previous.as_ref().is_some_and(|p| !p.persist) {
            if let Err(e) = self.db.remove(&id) {
                errors.push(format!("database {id}: {e}"));
            }
        }
        clock.step("db");
        (Vec::new(), errors)
    }

    /// Tells libudev clients the event is processed.
    fn announce(&self, b: &Broadcaster, dev: &Device, extra: &[(Vec<u8>, Vec<u8>)]) {
        let ev = dev.event();
        let mut props = ev.to_nulstr();
        if ev.seqnum().is_none() {
            // Synthesised events carry no kernel seqnum; libudev rejects an
            // event without one.
            props.extend_from_slice(b"SEQNUM=1\0");
        }
        for (k, v) in extra {
            props.extend_from_slice(k);
            props.push(b'=');
            props.extend_from_slice(v);
            props.push(0);
        }
        let tags = extra
            .iter()
            .find(|(k, _)| k == b"TAGS")
            .map(|(_, v)| {
                v.split(|&c| c == b':')
                    .filter(|t| !t.is_empty())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let msg = monitor::encode(&props, ev.subsystem(), ev.devtype(), tags);
        if let Err(e) = b.send(&msg) {
            log::debug!(
                "cannot announce {}: {e}",
                dev.devpath_os().to_string_lossy()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_spell_links_and_tags_as_udev_does() {
        let record = Record {
            links: vec![b"disk/by-id/a".to_vec(), b"cdrom".to_vec()],
            usec_initialized: 42,
            properties: vec![(b"ID_X".to_vec(), b"1".to_vec())],
            tags: vec![b"seat".to_vec(), b"uaccess".to_vec()],
            current_tags: vec![b"uaccess".to_vec()],
            ..Record::default()
        };
        let p = announced_properties(&record);
        let get = |k: &[u8]| p.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
        assert_eq!(get(b"USEC_INITIALIZED"), Some(b"42".to_vec()));
        assert_eq!(get(b"ID_X"), Some(b"1".to_vec()));
        assert_eq!(
            get(b"DEVLINKS"),
            Some(b"/dev/disk/by-id/a /dev/cdrom".to_vec())
        );
        assert_eq!(get(b"TAGS"), Some(b":seat:uaccess:".to_vec()));
        assert_eq!(get(b"CURRENT_TAGS"), Some(b":uaccess:".to_vec()));
        let bare = announced_properties(&Record {
            usec_initialized: 1,
            ..Record::default()
        });
        assert_eq!(bare.len(), 1);
    }
}
