//! The per-event pipeline: how one uevent becomes a node, its links, a
//! database record, an announcement to libudev clients and a timeline
//! record.
//!
//! ```text
//! uevent ─ rules (builtins, programs) ─ rename ─ node ─ links ─ database ─ RUN ─ broadcast ─ timeline
//! ```
//!
//! Everything a device needs is derived from the event itself and from what
//! uevd remembers of the device; sysfs is read only when a decision needs
//! it. Nothing forks.

use crate::announce::announced_properties;
use crate::job::Job;
use crate::watch::Watches;
use rustc_hash::FxHashMap;
use std::os::unix::ffi::OsStrExt;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use uevd_db::{Database, DeviceId, Record};
use uevd_netlink::Broadcaster;
use uevd_node::{Claimant, DevDir, Links, Node, NodeKind, Permissions};
use uevd_queue::EventId;
use uevd_rules::Rules;
use uevd_sysfs::{Device, Sysfs};
use uevd_timeline::{
    now, BuiltinRecord, Entry, EventRecord, Journal, LineRecord, ProgramRecord, Step, ThreadTimes,
};
use uevd_uevent::{Action, Uevent};
use uevd_uevent::{Properties, PropertyList};

/// What uevd remembers about a device it has processed, so that neither
/// a change nor a remove has to read the database back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Known {
    pub id: DeviceId,
    pub subsystem: Box<[u8]>,
    pub devnum: Option<(u32, u32)>,
    pub ifindex: Option<u32>,
    pub devname: Option<Box<[u8]>>,
    /// Shared, so that an event reads what the last one left without
    /// copying it.
    pub record: Arc<Record>,
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
    /// The last announcements, for clients that fell behind.
    pub replay: crate::announce::Replay,
    pub journal: Journal,
    rules: RwLock<Arc<Rules>>,
    /// Who owns each link that more than one device may want.
    links: Links,
    /// Nodes the rules asked to watch for writes (OPTIONS+="watch").
    pub watches: Option<Watches>,
    /// What was made for each device, by devpath (the kernel's names,
    /// hashed with Fx: nobody who could aim collisions chooses them).
    known: Mutex<FxHashMap<Box<[u8]>, Known>>,
    /// Records found on disk at start that no event has claimed yet (left
    /// by an earlier run or the initramfs): only these are worth reading.
    /// Asked of every event of a device not known yet: Fx-hashed, the
    /// ids being the kernel's numbers and names.
    unclaimed: Mutex<rustc_hash::FxHashSet<DeviceId>>,
    pub processed: AtomicU64,
    pub failed: AtomicU64,
    /// Properties every event gets before its rules run (`udevadm control
    /// --property=KEY=VALUE`), in the order they were set.
    globals: RwLock<Vec<(Vec<u8>, Vec<u8>)>>,
}

/// Times the steps of one event.
struct Clock {
    steps: Vec<Step>,
    programs: Vec<ProgramRecord>,
    builtins: Vec<BuiltinRecord>,
    slow_lines: Vec<LineRecord>,
    mark: u64,
    enabled: bool,
    /// The thread's CPU time at the last step's end, for an event whose
    /// thread times are counted; each step then records its CPU too.
    cpu_mark: Option<u64>,
    step_cpu: Vec<u64>,
}

impl Clock {
    /// Steps start at `start`, the event's start, and at `cpu_start` of
    /// the thread's CPU time when that is counted.
    fn new(enabled: bool, start: u64, cpu_start: Option<u64>) -> Clock {
        Clock {
            steps: Vec::new(),
            programs: Vec::new(),
            builtins: Vec::new(),
            slow_lines: Vec::new(),
            mark: start,
            enabled,
            cpu_mark: cpu_start.filter(|_| enabled),
            step_cpu: Vec::new(),
        }
    }

    /// Which programs and builtins the rules ran, and the lines that
    /// took long.
    fn rules(&mut self, outcome: &mut uevd_rules::Outcome) {
        if self.enabled {
            self.programs
                .extend(outcome.programs.iter().map(|p| ProgramRecord {
                    name: p.name.clone(),
                    in_process: p.in_process,
                    start: p.start,
                    duration: p.duration,
                }));
            self.builtins.append(&mut outcome.builtins);
            self.slow_lines.append(&mut outcome.slow_lines);
        }
    }

    /// A start time for [`Clock::builtin`]; no clock read when disabled.
    fn start(&self) -> u64 {
        if self.enabled {
            now()
        } else {
            0
        }
    }

    /// A RUN{builtin} that began at `start` and has just ended; returns
    /// its end, where whatever runs next begins.
    fn builtin(&mut self, name: &'static str, start: u64) -> u64 {
        if !self.enabled {
            return 0;
        }
        let end = now();
        self.builtins.push(BuiltinRecord {
            name,
            via: uevd_timeline::Via::Run,
            start,
            duration: end.saturating_sub(start),
        });
        end
    }

    fn step(&mut self, name: &'static str) {
        if self.enabled {
            self.step_ended(name, now());
        }
    }

    /// A step that ended at `ended` when that was read, now otherwise.
    fn end_step(&mut self, name: &'static str, ended: Option<u64>) {
        match ended {
            Some(t) => self.step_ended(name, t),
            None => self.step(name),
        }
    }

    /// A step whose end was read already (as the end of the last thing it
    /// ran).
    fn step_ended(&mut self, name: &'static str, end: u64) {
        if self.enabled {
            self.steps.push(Step {
                name,
                start: self.mark,
                duration: end.saturating_sub(self.mark),
            });
            self.mark = end;
            if let Some(before) = self.cpu_mark {
                let cpu = uevd_timeline::thread_cpu_ns();
                self.step_cpu.push(cpu.saturating_sub(before));
                self.cpu_mark = Some(cpu);
            }
        }
    }

    /// The thread's times at the event's end, from `start`: a timed
    /// event ends with its last step, whose CPU time was just read;
    /// another ends now.
    fn used_since(&self, start: ThreadTimes) -> ThreadTimes {
        let end = match self.cpu_mark {
            Some(cpu) if !self.step_cpu.is_empty() => ThreadTimes::with_cpu(cpu),
            _ => ThreadTimes::now(),
        };
        end.since(start)
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
        rules: Rules,
    ) -> Processor {
        let unclaimed = Mutex::new(db.ids().into_iter().collect());
        // Who claims which link survives a restart there, as with udevd.
        let links = Links::on_disk(&db.root().join("links"), &dev).unwrap_or_else(|e| {
            log::warn!(
                "link claims kept in memory only: {}: {e}",
                db.root().join("links").display()
            );
            Links::default()
        });
        Processor {
            sysfs,
            dev,
            db,
            unclaimed,
            broadcaster,
            replay: Default::default(),
            journal,
            rules: RwLock::new(Arc::new(rules)),
            links,
            watches: match Watches::new() {
                Ok(w) => Some(w),
                Err(e) => {
                    log::warn!("cannot watch nodes for writes (inotify): {e}");
                    None
                }
            },
            known: Mutex::default(),
            processed: AtomicU64::new(0),
            globals: RwLock::new(Vec::new()),
            failed: AtomicU64::new(0),
        }
    }

    /// The rules in force; an event keeps the set it started with.
    pub fn rules(&self) -> Arc<Rules> {
        self.rules.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Sets a property for every event from now on; an empty value
    /// removes it.
    pub fn set_global(&self, key: &[u8], value: &[u8]) {
        let mut g = self.globals.write().unwrap_or_else(|p| p.into_inner());
        g.retain(|(k, _)| k != key);
        if !value.is_empty() {
            g.push((key.to_vec(), value.to_vec()));
        }
    }

    /// Drops every property set for every event; true if there were any.
    pub fn clear_globals(&self) -> bool {
        let mut g = self.globals.write().unwrap_or_else(|p| p.into_inner());
        let had = !g.is_empty();
        g.clear();
        had
    }

    /// The event with the global properties in it (they win over the
    /// kernel's of the same name, as in udevd), and whether there were any.
    fn with_globals(&self, event: Uevent) -> (Uevent, bool) {
        let g = self.globals.read().unwrap_or_else(|p| p.into_inner());
        if g.is_empty() {
            return (event, false);
        }
        let mut buf = Vec::new();
        let mut push = |k: &[u8], v: &[u8]| {
            buf.extend_from_slice(k);
            buf.push(b'=');
            buf.extend_from_slice(v);
            buf.push(0);
        };
        for (k, v) in event.iter() {
            if !g.iter().any(|(gk, _)| gk == k) {
                push(k, v);
            }
        }
        for (k, v) in g.iter() {
            push(k, v);
        }
        (Uevent::parse_properties(&buf).unwrap_or(event), true)
    }

    /// Puts new rules in force for the events that start from now on.
    pub fn set_rules(&self, rules: Rules) {
        *self.rules.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(rules);
    }

    fn known(&self) -> std::sync::MutexGuard<'_, FxHashMap<Box<[u8]>, Known>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many links have a claim.
    pub fn claimed_links(&self) -> usize {
        self.links.len()
    }

    /// How many devices uevd knows now.
    pub fn known_count(&self) -> usize {
        self.known().len()
    }

    /// Devices processed and not removed, by devpath: what a rescan
    /// compares sysfs with.
    pub fn known_devices(&self) -> FxHashMap<Box<[u8]>, Known> {
        self.known().clone()
    }

    /// Processes one event on worker `worker`.
    pub fn process(&self, worker: usize, id: EventId, job: Job) {
        let started = if self.journal.enabled() { now() } else { 0 };
        // Its steps are timed when the journal samples this one: where a
        // clock read is a system call, not every event's are.
        let sample = self.journal.sample();
        let timed = sample.steps;
        let times_at_start = sample.cpu.then(ThreadTimes::now);
        let mut clock = Clock::new(timed, started, times_at_start.map(|t| t.cpu));
        // A driver's binding is remembered in the parent cache as the
        // kernel told it, without the global properties.
        let bound =
            matches!(job.event.action(), Action::Bind | Action::Unbind).then(|| job.event.clone());
        let (event, globals) = self.with_globals(job.event);
        let device = Rc::new(Device::from_event(&self.sysfs, event));
        let result = match device.event().action() {
            Action::Remove => self.remove(&device, &mut clock),
            _ => self.update(&device, &mut clock),
        };
        // Its rules may have written attributes that children read; an
        // add is remembered as its event says, for the children next,
        // unless the event also holds global properties (which a parent
        // read from sysfs would not).
        match &bound {
            Some(bound) => self.sysfs.event_seen(bound),
            None if globals => self.sysfs.event_seen(device.event()),
            None => self.sysfs.event_processed(device.event()),
        }
        if device.event().action() == Action::Add {
            crate::modules::event_done(device.devpath());
        }
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
            crate::announce::announce(b, &self.replay, &device, &announce);
            clock.step("broadcast");
        }
        self.processed.fetch_add(1, Ordering::Relaxed);
        let used = times_at_start.map(|t| clock.used_since(t));
        if self.journal.enabled() {
            let ev = device.event();
            self.journal.record(Entry::Event(EventRecord {
                id,
                seqnum: ev.seqnum(),
                action: ev.action().as_str(),
                devpath: uevd_uevent::text(device.devpath()),
                subsystem: uevd_uevent::text(ev.subsystem().unwrap_or_default()),
                source: job.source.as_str(),
                synth_uuid: ev.synth_uuid().map(uevd_uevent::text),
                worker,
                arrived: job.arrived,
                started,
                // The last step ended when the event did.
                finished: if clock.steps.is_empty() {
                    now()
                } else {
                    clock.mark
                },
                steps: clock.steps,
                programs: clock.programs,
                builtins: clock.builtins,
                slow_lines: clock.slow_lines,
                error,
                untimed: !timed,
                used,
                step_cpu: clock.step_cpu,
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

    /// Owner, group and mode of a node, as udevd applies them: what the
    /// rules set, else what the kernel asked for (DEVUID, DEVGID,
    /// DEVMODE); a group without a mode makes the mode 0660. What neither
    /// says is left as it is, so an event whose rules skip the node (a
    /// `bind`, say) does not undo what its `add` set.
    fn permissions(dev: &Device, rules: &uevd_rules::Outcome) -> Permissions {
        let ev = dev.event();
        let uid = rules.uid.or_else(|| ev.get(b"DEVUID").and_then(parse_dec));
        let gid = rules.gid.or_else(|| ev.get(b"DEVGID").and_then(parse_dec));
        let mode = rules
            .mode
            // The kernel's mode is for permissions only: a setuid, setgid
            // or sticky bit on a device node is never what it means.
            .or_else(|| ev.get(b"DEVMODE").and_then(parse_octal).map(|m| m & 0o777))
            .or_else(|| gid.filter(|&g| g > 0).map(|_| 0o660));
        Permissions { uid, gid, mode }
    }

    /// Moves the device's links from `old` to `new`, owner by owner.
    fn update_links(
        &self,
        me: &Claimant,
        old: &[Vec<u8>],
        new: &[Vec<u8>],
        priority: i32,
        errors: &mut Vec<String>,
    ) {
        let failed = self.links.update(&self.dev, me, old, new, priority);
        errors.extend(failed.iter().map(ToString::to_string));
    }

    fn device_id(dev: &Device) -> DeviceId {
        let subsystem = dev.event().subsystem().unwrap_or_default();
        DeviceId::new(subsystem, dev.devpath(), dev.devnum(), dev.ifindex())
    }

    /// What uevd knew of a device: from memory, or after a restart from
    /// the database.
    fn previous(&self, devpath: &[u8], id: &DeviceId) -> Option<Arc<Record>> {
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
            Ok(r) => r.map(Arc::new),
            Err(e) => {
                log::warn!("{e}; the record will be rewritten");
                // Gone now, so that a removal before any rewrite leaves
                // nothing stale behind.
                let _ = self.db.remove(id);
                None
            }
        }
    }

    /// Gives a new interface the name NAME= asked for, as udev 252 does:
    /// on add only, and not while the interface is up (the kernel would
    /// allow it since 6.2, but programs that saw the old name would not
    /// expect it to change under them). Returns the new name.
    fn rename_interface(
        &self,
        dev: &Device,
        outcome: &uevd_rules::Outcome,
        errors: &mut Vec<String>,
    ) -> Option<Vec<u8>> {
        let (Some(ifindex), Some(name)) = (dev.ifindex(), &outcome.name) else {
            return None;
        };
        if dev.event().action() != Action::Add || name.as_slice() == dev.sysname() {
            return None;
        }
        let up = dev
            .attr(b"flags")
            .and_then(|f| {
                let f = std::str::from_utf8(&f)
                    .ok()?
                    .trim()
                    .trim_start_matches("0x")
                    .to_owned();
                u32::from_str_radix(&f, 16).ok()
            })
            .is_some_and(|f| f & 1 != 0);
        let old = String::from_utf8_lossy(dev.sysname()).into_owned();
        let new = String::from_utf8_lossy(name).into_owned();
        if up {
            errors.push(format!("interface {old} is up; not renaming it to {new}"));
            return None;
        }
        match uevd_netlink::rename_interface(ifindex, name) {
            Ok(()) => {
                log::info!("renamed network interface {old} to {new}");
                Some(name.clone())
            }
            Err(e) => {
                errors.push(format!("renaming network interface {old} to {new}: {e}"));
                None
            }
        }
    }

    /// Runs what RUN asked for, with the event's properties as the
    /// programs' environment. Returns when the last ended, if it was
    /// timed: the run step's end unless more follows.
    ///
    /// The first starts where the step before ended (only the
    /// announcement's properties were gathered since, in memory), and each
    /// timed one where the one before it ended, so that one RUN{builtin}
    /// costs one clock read, not three.
    fn run_programs(
        &self,
        rules: &Rules,
        dev: &Rc<Device>,
        outcome: &uevd_rules::Outcome,
        env: &PropertyList,
        clock: &mut Clock,
        errors: &mut Vec<String>,
    ) -> Option<u64> {
        // What programs and RUN builtins see, copied out once for them all.
        let env: Properties = env.to_properties(dev.event());
        let mut ended = Some(clock.mark);
        for r in &outcome.run {
            let start = ended.take().unwrap_or_else(|| clock.start());
            if let Err(e) = rules.run(r, dev, &env) {
                errors.push(format!("RUN: {e}"));
            }
            if let uevd_rules::Run::Builtin(name, _) = r {
                // A builtin uevd lacks ran nothing: no time to show.
                if uevd_builtins::find(name.as_bytes()).is_some() {
                    ended = Some(clock.builtin(name, start));
                }
            }
        }
        ended
    }

    /// What the rules in force decide for the device; the rules are
    /// returned too, for the RUN programs they asked for.
    fn run_rules(
        &self,
        dev: &Rc<Device>,
        previous: Option<&Record>,
        clock: &Clock,
    ) -> (Arc<Rules>, uevd_rules::Outcome) {
        let rules = self.rules();
        let outcome = rules.apply_timed(
            uevd_rules::Event {
                device: dev.clone(),
                previous,
                test: false,
                trace: false,
            },
            self,
            clock.enabled,
        );
        (rules, outcome)
    }

    /// The rules step of an event, timed: what the rules decided, with
    /// their warnings taken out as the event's first errors.
    fn rules_step(
        &self,
        dev: &Rc<Device>,
        previous: Option<&Record>,
        clock: &mut Clock,
    ) -> (Arc<Rules>, uevd_rules::Outcome, Vec<String>) {
        clock.step("device");
        let (rules, mut outcome) = self.run_rules(dev, previous, clock);
        clock.step("rules");
        clock.rules(&mut outcome);
        let errors = std::mem::take(&mut outcome.warnings);
        (rules, outcome, errors)
    }

    /// add, change, move, bind, unbind, online, offline.
    fn update(&self, dev: &Rc<Device>, clock: &mut Clock) -> (PropertyList, Vec<String>) {
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
        let (rules, mut outcome, mut errors) = self.rules_step(dev, previous.as_deref(), clock);
        let renamed = self.rename_interface(dev, &outcome, &mut errors);
        let node = Self::node_of(dev);
        let mut links = std::mem::take(&mut outcome.links);
        links.sort();
        links.dedup();
        let old_links: &[Vec<u8>] = previous.as_deref().map_or(&[], |p| &p.links);
        if let Some(node) = &node {
            let perms = Self::permissions(dev, &outcome);
            match self.dev.apply_node(node, perms) {
                Ok(change) => log::debug!(
                    "{} {}: node {} {change:?}, {perms:?}",
                    ev.action(),
                    dev.devpath_os().to_string_lossy(),
                    String::from_utf8_lossy(node.name)
                ),
                Err(e) => errors.push(e.to_string()),
            }
            clock.step("node");
            // Made by the device's earlier events, unless this is its first.
            let made_before = previous.is_some() || ev.action() != Action::Add;
            if let Err(e) =
                self.dev
                    .link_expecting(&DevDir::devnum_link(node), node.name, made_before)
            {
                errors.push(e.to_string());
            }
            let me = Claimant {
                key: id.as_str().as_bytes().into(),
                node: node.name.into(),
            };
            self.update_links(&me, old_links, &links, outcome.link_priority, &mut errors);
            clock.step("links");
            if let Some(w) = &self.watches {
                // Each event states it again, as in udev: a rule that no
                // longer says "watch" ends the watch.
                if outcome.watch == Some(true) {
                    let path = self.dev.path().join(std::ffi::OsStr::from_bytes(node.name));
                    if let Err(e) = w.watch(&path, dev.devpath()) {
                        errors.push(format!("watching {}: {e}", path.display()));
                    }
                } else {
                    w.unwatch(dev.devpath());
                }
            }
        }
        let usec = previous
            .as_ref()
            .map(|p| p.usec_initialized)
            .filter(|&u| u > 0)
            .unwrap_or_else(uevd_timeline::monotonic_usec);
        let had_record = previous.is_some();
        let old_tags: &[Vec<u8>] = previous.as_deref().map_or(&[], |p| &p.tags);
        // G: keeps every tag the device ever had; Q: what this event set.
        let mut tags = old_tags.to_vec();
        for t in &outcome.tags {
            if !tags.contains(t) {
                tags.push(t.clone());
            }
        }
        let record = Record {
            links,
            link_priority: outcome.link_priority,
            usec_initialized: usec,
            properties: std::mem::take(&mut outcome.properties),
            tags,
            current_tags: std::mem::take(&mut outcome.tags),
            persist: outcome.db_persist,
        };
        let has_ifindex = dev.ifindex().is_some();
        // A device with nothing to record and no record before: no file.
        let stored = record.needs_file(node.is_some(), has_ifindex);
        let nothing_to_do = !stored && !had_record;
        let runs = !outcome.run.is_empty();
        // systemd 256: while RUN programs run the record says
        // ID_PROCESSING=1; it is written again without it after them.
        // Builtins (a module load handed to the loader) are done within
        // the event's own time, as every step before them: a record that
        // says so for that long would cost a second write per event with
        // a MODALIAS and tell a reader nothing.
        let runs_programs = outcome
            .run
            .iter()
            .any(|r| matches!(r, uevd_rules::Run::Program(_)));
        if runs_programs {
            let mut busy = record.clone();
            busy.properties
                .push((b"ID_PROCESSING".to_vec(), b"1".to_vec()));
            if let Err(e) = self.db.write(&id, &busy, node.is_some(), has_ifindex) {
                errors.push(format!("database {id}: {e}"));
            }
        } else if !nothing_to_do {
            let written = self.db.write_unless_unchanged(
                &id,
                previous.as_deref(),
                &record,
                node.is_some(),
                has_ifindex,
            );
            if let Err(e) = written {
                errors.push(format!("database {id}: {e}"));
            }
        }
        if old_tags != record.tags {
            if let Err(e) = self.db.index_tags(&id, old_tags, &record.tags) {
                errors.push(format!("tags {id}: {e}"));
            }
        }
        clock.step("db");
        let mut announce = std::mem::take(&mut outcome.event_properties);
        if let Some(new) = renamed {
            announce.replace_all(ev, b"INTERFACE", &new);
        }
        for (k, v) in announced_properties(&record) {
            announce.push(k, v);
        }
        if runs {
            let ended = self.run_programs(&rules, dev, &outcome, &announce, clock, &mut errors);
            if runs_programs {
                // A device with nothing to record is left with no file.
                if let Err(e) = self.db.write(&id, &record, node.is_some(), has_ifindex) {
                    errors.push(format!("database {id}: {e}"));
                }
                clock.step("run");
            } else {
                clock.end_step("run", ended);
            }
        }
        self.known().insert(
            dev.devpath().into(),
            Known {
                id,
                subsystem: ev.subsystem().unwrap_or_default().into(),
                devnum: dev.devnum(),
                ifindex: dev.ifindex(),
                devname: dev.devname().map(Into::into),
                stored,
                record: Arc::new(record),
            },
        );
        (announce, errors)
    }

    fn remove(&self, dev: &Rc<Device>, clock: &mut Clock) -> (PropertyList, Vec<String>) {
        let id = Self::device_id(dev);
        let known = self.known().remove(dev.devpath());
        let previous = match known {
            Some(k) => k.stored.then_some(k.record),
            None => self.previous(dev.devpath(), &id),
        };
        let (rules, mut outcome, mut errors) = self.rules_step(dev, previous.as_deref(), clock);
        if let Some(w) = &self.watches {
            w.unwatch(dev.devpath());
        }
        if let Some(node) = Self::node_of(dev) {
            let old_links: &[Vec<u8>] = previous.as_deref().map_or(&[], |p| &p.links);
            let me = Claimant {
                key: id.as_str().as_bytes().into(),
                node: node.name.into(),
            };
            self.update_links(&me, old_links, &[], 0, &mut errors);
            if let Err(e) = self.dev.unlink(&DevDir::devnum_link(&node), node.name) {
                errors.push(e.to_string());
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
        // A removal is announced with the tags and links the device had,
        // so that clients filtering by tag see it go.
        let mut announce = std::mem::take(&mut outcome.event_properties);
        if let Some(prev) = &previous {
            for (k, v) in announced_properties(prev) {
                announce.push(k, v);
            }
        }
        if !outcome.run.is_empty() {
            let ended = self.run_programs(&rules, dev, &outcome, &announce, clock, &mut errors);
            clock.end_step("run", ended);
        }
        (announce, errors)
    }
}

/// What the rules see of a device's parents: what uevd remembers of
/// them, or what the database holds for one processed before a restart.
impl uevd_rules::Store for Processor {
    fn record(&self, device: &Device) -> Option<Record> {
        if let Some(k) = self.known().get(device.devpath()) {
            return k.stored.then(|| Record::clone(&k.record));
        }
        let id = Self::device_id(device);
        let on_disk = self
            .unclaimed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&id);
        if on_disk {
            self.db.read(&id).ok().flatten()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod globals_tests {
    use super::*;

    /// A processor without rules over empty trees in `tmp`.
    fn processor(tmp: &std::path::Path, sysfs: impl FnOnce(Sysfs) -> Sysfs) -> Processor {
        for d in ["sys/class", "dev", "run/udev"] {
            std::fs::create_dir_all(tmp.join(d)).unwrap();
        }
        Processor::new(
            sysfs(Sysfs::new(tmp.join("sys"))),
            DevDir::open(tmp.join("dev")).unwrap(),
            Database::open(tmp.join("run/udev")).unwrap(),
            None,
            Journal::disabled(),
            Rules::empty(),
        )
    }

    #[test]
    fn a_device_added_is_remembered_for_its_children_unless_globals_joined_it() {
        let tmp = tempfile::tempdir().unwrap();
        let p = processor(tmp.path(), Sysfs::with_parent_cache);
        let devpath = "/devices/pci0/host0";
        let dir = tmp.path().join("sys").join(&devpath[1..]);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(tmp.path().join("sys/class/scsi")).unwrap();
        std::fs::write(dir.join("uevent"), "DEVTYPE=scsi_host\n").unwrap();
        std::os::unix::fs::symlink("../../class/scsi", dir.join("subsystem")).unwrap();
        let add = || {
            let ev = p.sysfs.read_event(Action::Add, devpath.as_bytes()).unwrap();
            p.process(0, 1, Job::new(ev, crate::job::Source::Kernel));
        };
        let remembered = || p.sysfs.parent_cache().unwrap().len();
        add();
        assert_eq!(remembered(), 1);
        p.set_global(b"FOO", b"mine");
        add();
        assert_eq!(remembered(), 0, "a parent read from sysfs has no FOO");
    }

    #[test]
    fn global_properties_join_every_event_and_win_over_the_kernels() {
        let tmp = tempfile::tempdir().unwrap();
        let p = processor(tmp.path(), |s| s);
        let ev = || {
            Uevent::parse_properties(b"ACTION=add\0DEVPATH=/devices/x\0SUBSYSTEM=net\0FOO=kernel\0")
                .unwrap()
        };
        assert_eq!(p.with_globals(ev()).0.get(b"FOO"), Some(&b"kernel"[..]));
        p.set_global(b"FOO", b"mine");
        p.set_global(b"BAR", b"a b");
        let e = p.with_globals(ev()).0;
        assert_eq!(e.get(b"FOO"), Some(&b"mine"[..]));
        assert_eq!(e.get(b"BAR"), Some(&b"a b"[..]));
        assert_eq!(e.devpath(), b"/devices/x");
        p.set_global(b"FOO", b"");
        let e = p.with_globals(ev()).0;
        assert_eq!(e.get(b"FOO"), Some(&b"kernel"[..]));
        assert_eq!(e.get(b"BAR"), Some(&b"a b"[..]));
        assert!(p.clear_globals());
        assert_eq!(p.with_globals(ev()).0.get(b"BAR"), None);
        assert!(!p.clear_globals());
    }
}
