//! Processing one event: the node, its links, the database, the
//! announcement to libudev clients and the timeline record.
//!
//! Everything a device needs is derived from the event itself and from what
//! uevd remembers of the device; sysfs is read only when a decision needs
//! it. Nothing forks.

use std::collections::HashMap;
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
}

/// The state every worker shares.
pub struct Processor {
    pub sysfs: Sysfs,
    pub dev: DevDir,
    pub db: Database,
    broadcaster: Option<Broadcaster>,
    pub journal: Journal,
    known: Mutex<HashMap<Box<[u8]>, Known>>,
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
        Processor {
            sysfs,
            dev,
            db,
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
        let (error, announce) = match result {
            Ok(props) => (None, Some(props)),
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                log::warn!(
                    "{} {}: {e}",
                    device.event().action(),
                    device.devpath_os().to_string_lossy()
                );
                (Some(e), None)
            }
        };
        if let (Some(b), Some(extra)) = (&self.broadcaster, announce) {
            self.announce(b, &device, &extra);
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

    /// Owner, group and mode with no rules: the kernel's own DEVUID,
    /// DEVGID and DEVMODE. devtmpfs has applied those already, so only a
    /// node uevd creates itself needs them.
    fn permissions(&self, dev: &Device) -> Permissions {
        if self.dev.devtmpfs() {
            return Permissions::default();
        }
        let ev = dev.event();
        Permissions {
            uid: Some(ev.get(b"DEVUID").and_then(parse_dec).unwrap_or(0)),
            gid: Some(ev.get(b"DEVGID").and_then(parse_dec).unwrap_or(0)),
            mode: Some(ev.get(b"DEVMODE").and_then(parse_octal).unwrap_or(0o600)),
        }
    }

    fn device_id(dev: &Device) -> DeviceId {
        let subsystem = dev.event().subsystem().unwrap_or_default();
        DeviceId::new(subsystem, dev.devpath(), dev.devnum(), dev.ifindex())
    }

    /// What uevd knew of a device: from memory, or after a restart from
    /// the database.
    fn previous(&self, devpath: &[u8], id: &DeviceId) -> Option<Record> {
        if let Some(k) = self.known().get(devpath) {
            return Some(k.record.clone());
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
    fn update(&self, dev: &Device, clock: &mut Clock) -> Result<Properties, String> {
        let id = Self::device_id(dev);
        let ev = dev.event();
        // A renamed device keeps what uevd knew of it under its old path.
        let moved = match (ev.action(), ev.devpath_old()) {
            (Action::Move, Some(old)) => self.known().remove(old),
            _ => None,
        };
        let previous = match moved {
            Some(k) => {
                if k.id != id {
                    let _ = self.db.remove(&k.id);
                }
                Some(k.record)
            }
            None => self.previous(dev.devpath(), &id),
        };
        clock.step("device");
        let node = Self::node_of(dev);
        let mut errors = Vec::new();
        let mut links: Vec<Vec<u8>> = Vec::new();
        if let Some(node) = &node {
            if let Err(e) = self.dev.apply_node(node, self.permissions(dev)) {
                errors.push(e.to_string());
            }
            clock.step("node");
            let devnum_link = DevDir::devnum_link(node);
            if let Err(e) = self.dev.link(&devnum_link, node.name) {
                errors.push(e.to_string());
            }
            // Rules will add their links here; stale ones go.
            if let Some(prev) = &previous {
                for stale in prev.links.iter().filter(|l| !links.contains(l)) {
                    if let Err(e) = self.dev.unlink(stale, node.name) {
                        errors.push(e.to_string());
                    }
                }
            }
            for l in &links {
                if let Err(e) = self.dev.link(l, node.name) {
                    errors.push(e.to_string());
                }
            }
            clock.step("links");
        }
        links.sort();
        let usec = previous
            .as_ref()
            .map(|p| p.usec_initialized)
            .filter(|&u| u > 0)
            .unwrap_or_else(uevd_timeline::monotonic_usec);
        let record = Record {
            links,
            usec_initialized: usec,
            ..Record::default()
        };
        let old_tags = previous
            .as_ref()
            .map(|p| p.tags.clone())
            .unwrap_or_default();
        if let Err(e) = self
            .db
            .write(&id, &record, node.is_some(), dev.ifindex().is_some())
        {
            errors.push(format!("database {id}: {e}"));
        }
        if old_tags != record.tags {
            if let Err(e) = self.db.index_tags(&id, &old_tags, &record.tags) {
                errors.push(format!("tags {id}: {e}"));
            }
        }
        clock.step("db");
        let mut announce = vec![(b"USEC_INITIALIZED".to_vec(), usec.to_string().into_bytes())];
        if !record.links.is_empty() {
            let devlinks: Vec<Vec<u8>> = record
                .links
                .iter()
                .map(|l| [&b"/dev/"[..], l].concat())
                .collect();
            announce.push((b"DEVLINKS".to_vec(), devlinks.join(&b' ')));
        }
        self.known().insert(
            dev.devpath().into(),
            Known {
                id,
                subsystem: ev.subsystem().unwrap_or_default().into(),
                devnum: dev.devnum(),
                ifindex: dev.ifindex(),
                devname: dev.devname().map(Into::into),
                record,
            },
        );
        if errors.is_empty() {
            Ok(announce)
        } else {
            Err(errors.join("; "))
        }
    }

    fn remove(&self, dev: &Device, clock: &mut Clock) -> Result<Properties, String> {
        let id = Self::device_id(dev);
        let known = self.known().remove(dev.devpath());
        let previous = match known {
            Some(k) => Some(k.record),
            None => self.db.read(&id).ok().flatten(),
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
        if !previous.as_ref().is_some_and(|p| p.persist) {
            if let Err(e) = self.db.remove(&id) {
                errors.push(format!("database {id}: {e}"));
            }
        }
        clock.step("db");
        if errors.is_empty() {
            Ok(Vec::new())
        } else {
            Err(errors.join("; "))
        }
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
        let msg = monitor::encode(&props, ev.subsystem(), ev.devtype(), []);
        if let Err(e) = b.send(&msg) {
            log::debug!(
                "cannot announce {}: {e}",
                dev.devpath_os().to_string_lossy()
            );
        }
    }
}
