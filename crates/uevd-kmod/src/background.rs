//! Loads that run on the loader's own threads.
//!
//! A module's init may sleep for seconds (hardware probes, crypto self
//! tests under emulation): if the event that asked for it waited, that
//! event's worker would sit idle while other devices queue behind it. The
//! event only asks; the load runs here, on threads sized for inits that
//! sleep, dependencies first as ever (those that do not need each other
//! side by side, load.rs), each module once however many ask.
//! Whoever must know that everything asked for is in (settle) waits for
//! the loader to be idle.
//!
//! No thread here waits for another's insertion: a request that needs a
//! module being inserted elsewhere is parked on it (load.rs) and queued
//! again when that insertion ends, so that five devices asking for one
//! slow driver hold one thread, not five, and unrelated drivers go on.
//!
//! What a load already under way needs comes first: a dependency handed
//! on by a driver's request, and a request coming back from being parked,
//! go to the front of the queue, not behind the drivers every device of a
//! coldplug asked for meanwhile. A driver's libraries then go in side by
//! side as soon as it is asked for, and the driver right after them; at
//! the back of the queue they waited until a thread was free, and the
//! driver's own thread reached each of them first, one after another.
//!
//! A device's driver is asked for twice in the daemon: ahead, when its
//! event arrives, and by its event's own rules. The second request of the
//! same device for the same name is answered by the first (noted in
//! `ahead` until the event is done): a module whose init fails is then not
//! inserted, and failed, twice for one event.
//!
//! The loader's threads run at a higher priority than the threads that
//! spawned them ([`LOAD_PRIORITY`]). A module's init probes its devices on
//! the thread that inserts it, and at boot those probes are what the rest
//! waits for: the devices they make, and the drivers those need in turn.
//! The events of devices already found can wait, since their drivers were
//! asked for when they arrived. A coldplug keeps every CPU busy, so the
//! share each side gets decides which finishes first.

use crate::load::{Loader, OnThread};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

#[derive(Default)]
struct State {
    queue: VecDeque<String>,
    /// What `queue` holds, so that a name asked for again by every device
    /// of a coldplug is found in O(1), not by a walk of the queue.
    queued: HashSet<String>,
    /// Taken from the queue and not finished (or parked): asked for again
    /// meanwhile, by another device of a coldplug, a name is not loaded a
    /// second time (a driver whose init fails would fail twice).
    running: HashSet<String>,
    /// Asked for and not finished: queued plus running.
    pending: usize,
    threads: usize,
    /// At most this many threads (0: [`default_threads`]).
    max_threads: usize,
    sleeping: usize,
    /// Device (its devpath) -> the name asked for ahead on its behalf.
    ahead: HashMap<Box<[u8]>, String>,
    /// The nice value of the first thread that asked for a load, which
    /// every loading thread raises itself above (once known).
    base_nice: Option<i32>,
}

/// How far above the process's other threads a loading thread's priority
/// is, in nice steps: five give it about three times their share of a
/// CPU. Raising a priority needs CAP_SYS_NICE (or RLIMIT_NICE): without
/// it the threads stay at the priority they were started with.
pub const LOAD_PRIORITY: i32 = 5;

/// Where new requests join the queue.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Behind everything asked for before: a device's driver.
    Back,
    /// Ahead of it: what a load under way needs.
    Front,
}

#[derive(Default)]
pub(crate) struct Background {
    state: Mutex<State>,
    work: Condvar,
    idle: Condvar,
    /// The loader these threads belong to, once one is started: a
    /// request sent on from outside them (unparked when a module goes
    /// live) may need a thread of its own while every one of them waits
    /// in the kernel.
    owner: std::sync::OnceLock<&'static Loader>,
}

/// Threads at most, by default: module inits mostly sleep (probes,
/// firmware, resets) or wait for the kernel's own locks, so a thread is
/// worth its stack whenever a module could go in; the loads of a boot are
/// a few dozen modules at once at most, each asked for once however many
/// devices ask. A cap below that held drivers whose dependencies were in
/// behind slow inits on every thread.
fn default_threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (16 * cpus).clamp(32, 128)
}

/// Sets the calling thread's nice value (Linux keeps one per thread).
fn raise_priority(nice: i32) {
    let tid = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(tid), nice) {
        log::debug!("module loading thread keeps its priority (nice {nice}: {e})");
    }
}

impl Background {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Loader {
    /// Starts loading each name or alias, with its dependencies, and
    /// returns at once. What fails is reported to the observer, as any
    /// load is. A name already waiting is not queued twice.
    pub fn load_in_background(&'static self, names_or_aliases: &[&str]) {
        let st = self.background.lock();
        self.queue_locked(st, names_or_aliases.iter().copied(), Place::Back);
    }

    /// At most `threads` loads in the background at once (at least one);
    /// the default suits module inits that sleep. Threads already running
    /// are kept.
    pub fn set_background_threads(&self, threads: usize) {
        self.background.lock().max_threads = threads.max(1);
    }

    /// Starts loading, in the background, the name each device's event
    /// asks for before the event itself gets to it; the event's own
    /// request ([`Loader::load_for_device`]) then finds it asked for.
    pub fn load_ahead(&'static self, requests: &[(&[u8], &str)]) {
        let mut st = self.background.lock();
        for (device, name) in requests {
            st.ahead.insert(Box::from(*device), (*name).to_owned());
        }
        self.queue_locked(st, requests.iter().map(|(_, name)| *name), Place::Back);
    }

    /// [`Loader::load_in_background`] for a device's event, less the name
    /// asked for ahead on its behalf.
    pub fn load_for_device(&'static self, device: &[u8], names_or_aliases: &[&str]) {
        let mut st = self.background.lock();
        // Only a request for that very name answers the note: a rule
        // naming another module leaves it for the one that loads MODALIAS.
        let answered = st
            .ahead
            .get(device)
            .is_some_and(|a| names_or_aliases.contains(&a.as_str()));
        let ahead = if answered {
            st.ahead.remove(device)
        } else {
            None
        };
        let names = names_or_aliases
            .iter()
            .copied()
            .filter(|n| ahead.as_deref() != Some(*n));
        self.queue_locked(st, names, Place::Back);
    }

    /// The device's event is done: what was asked for ahead for it no
    /// longer answers a later event's request.
    pub fn forget_ahead(&self, device: &[u8]) {
        let mut st = self.background.lock();
        if !st.ahead.is_empty() {
            st.ahead.remove(device);
        }
    }

    fn queue_locked<'n>(
        &'static self,
        mut st: std::sync::MutexGuard<'_, State>,
        names_or_aliases: impl Iterator<Item = &'n str>,
        place: Place,
    ) {
        let bg = &self.background;
        let _ = bg.owner.set(self);
        let mut front = Vec::new();
        for name in names_or_aliases {
            if st.running.contains(name) {
                continue;
            }
            if !st.queued.insert(name.to_owned()) {
                if place == Place::Front {
                    // Asked for before, by a device: now a load under way
                    // needs it.
                    if let Some(at) = st.queue.iter().position(|q| q == name) {
                        front.extend(st.queue.remove(at));
                    }
                }
                continue;
            }
            st.pending += 1;
            match place {
                Place::Back => st.queue.push_back(name.to_owned()),
                Place::Front => front.push(name.to_owned()),
            }
        }
        // In the order given, ahead of everything queued before.
        for name in front.into_iter().rev() {
            st.queue.push_front(name);
        }
        self.wake_locked(st);
    }

    /// Wakes sleeping threads for what is queued, and starts more where
    /// none sleeps, up to the limit.
    fn wake_locked(&'static self, mut st: std::sync::MutexGuard<'_, State>) {
        let bg = &self.background;
        let ready = st.queue.len();
        if st.sleeping >= ready {
            for _ in 0..ready {
                bg.work.notify_one();
            }
            return;
        }
        bg.work.notify_all();
        let max = match st.max_threads {
            0 => default_threads(),
            n => n,
        };
        let wanted = (ready - st.sleeping).min(max.saturating_sub(st.threads));
        // The first spawn is always asked for by a thread that is not one
        // of the loader's own (a loading thread only asks once one runs).
        let nice = *st
            .base_nice
            .get_or_insert_with(|| rustix::process::getpriority_process(None).unwrap_or(0))
            - LOAD_PRIORITY;
        for _ in 0..wanted {
            let spawned = std::thread::Builder::new()
                .name("modules".into())
                .spawn(move || {
                    raise_priority(nice);
                    self.background_thread()
                });
            match spawned {
                Ok(_) => st.threads += 1,
                Err(e) => {
                    log::warn!("cannot start a module loading thread: {e}");
                    break;
                }
            }
        }
        if st.threads == 0 {
            // No thread at all: load here rather than never.
            let names: Vec<String> = st.queue.drain(..).collect();
            st.queued.clear();
            st.pending -= names.len();
            drop(st);
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            self.load(&refs);
            bg.idle.notify_all();
        }
    }

    fn background_thread(&'static self) {
        let bg = &self.background;
        let spread = |names: &[&str]| {
            let st = bg.lock();
            self.queue_locked(st, names.iter().copied(), Place::Front);
        };
        let mut st = bg.lock();
        loop {
            if let Some(name) = st.queue.pop_front() {
                st.queued.remove(&name);
                st.running.insert(name.clone());
                drop(st);
                let on = OnThread {
                    request: &name,
                    spread: &spread,
                };
                let parked = self.load_one(&name, Some(on)).is_err();
                st = bg.lock();
                if parked {
                    // Still pending: it comes back through unpark.
                    continue;
                }
                st.running.remove(&name);
                st.pending -= 1;
                if st.pending == 0 {
                    bg.idle.notify_all();
                }
                continue;
            }
            st.sleeping += 1;
            st = bg.work.wait(st).unwrap_or_else(|e| e.into_inner());
            st.sleeping -= 1;
        }
    }

    /// Requests parked on a module whose insertion just ended: queued
    /// again, first in line, since what they waited for is in (they are
    /// still counted as pending).
    pub(crate) fn unpark(&self, requests: Vec<String>) {
        let bg = &self.background;
        let mut st = bg.lock();
        for r in requests.into_iter().rev() {
            st.queue.push_front(r);
        }
        match bg.owner.get() {
            Some(owner) => owner.wake_locked(st),
            None => bg.work.notify_all(),
        }
    }

    /// Counts an insertion as pending until the guard is dropped, apart
    /// from the request that made it (which may finish first).
    pub(crate) fn insertion_pending(&self) -> PendingInsertion<'_> {
        self.background.lock().pending += 1;
        PendingInsertion(&self.background)
    }

    /// Loads asked for in the background and not finished yet.
    pub fn background_pending(&self) -> usize {
        self.background.lock().pending
    }

    /// Waits until every background load has finished; false if the
    /// deadline came first.
    pub fn wait_background(&self, deadline: Instant) -> bool {
        let bg = &self.background;
        let mut st = bg.lock();
        while st.pending > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            st = bg
                .idle
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

/// An insertion settle waits for (see [`Loader::insertion_pending`]).
pub(crate) struct PendingInsertion<'a>(&'a Background);

impl Drop for PendingInsertion<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.pending -= 1;
        if st.pending == 0 {
            self.0.idle.notify_all();
        }
    }
}
