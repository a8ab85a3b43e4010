//! The event queue.
//!
//! Events run in parallel unless they touch the same device. An event waits
//! for every earlier, unfinished event
//! - on the same devpath, an ancestor devpath or a descendant devpath,
//! - with the same device number (block and character numbers apart),
//! - with the same network interface index,
//! - on the devpath it was moved or renamed from (DEVPATH_OLD).
//!
//! udevd finds these by comparing each queued event with every earlier one,
//! which costs O(n²) in a storm. Here every unfinished event is entered in
//! an index keyed by each prefix of its devpath, its device number and its
//! interface index, so that finding the latest earlier event an event
//! depends on costs O(depth · log n). A waiting event is parked on that one
//! event and looked at again only when it finishes.
//!
//! Urgent events (the device the system boots from, and what it needs)
//! leave the queue before ordinary ones that are ready at the same time,
//! and lend their urgency to every earlier event they wait for, so that
//! a parent queued behind thousands of unrelated events is not what keeps
//! them waiting. Urgency changes only which ready event goes first, never
//! whether an event may run: nothing overtakes an earlier event of its
//! device, a parent or a child. And it never starves the rest: after
//! [`URGENT_BURST`] urgent events in a row, the oldest ready ordinary
//! event goes next.
//!
//! An event that cannot be processed yet (its disk is locked by someone
//! else) is *deferred*: it leaves the workers but stays queued, so that
//! later events of its device still wait for it, and is tried again at a
//! given time or when asked ([`DependencyQueue::retry_where`]).

use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::Hash;
use std::time::Instant;

mod pool;
pub use pool::{Completion, Handler, Outcome, WorkQueue};

/// Urgent events started in a row, at most, while ordinary events are
/// ready: then one ordinary event goes. So an ordinary event is delayed by
/// at most this many urgent events for each ordinary one ahead of it.
pub const URGENT_BURST: usize = 4;

/// The queue's own event number: the order of arrival.
pub type EventId = u64;

/// A device number, with block and character devices apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DevKey {
    pub block: bool,
    pub major: u32,
    pub minor: u32,
}

/// What an event may conflict on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventKeys {
    pub devpath: Box<[u8]>,
    pub devpath_old: Option<Box<[u8]>>,
    pub devnum: Option<DevKey>,
    pub ifindex: Option<u32>,
    /// Goes before ordinary events, and makes what it waits for urgent.
    pub urgent: bool,
}

/// Each proper prefix of a devpath that ends before a `/`, then the devpath.
#[cfg(test)]
fn prefixes(devpath: &[u8]) -> impl Iterator<Item = &[u8]> {
    devpath
        .iter()
        .enumerate()
        .skip(1)
        .filter(|&(_, &c)| c == b'/')
        .map(move |(i, _)| &devpath[..i])
        .chain(std::iter::once(devpath))
}

/// The hash of each prefix [`prefixes`] names, in its order, from one
/// pass over the devpath: each byte is folded into a running hash, which
/// is read at every `/` after the first byte and at the end.
///
/// Prefixes are keyed by their hash alone, not by their bytes: a
/// collision between two different prefixes can only make one event wait
/// for another it need not (both enter and leave under the same key), never
/// let one run before an event it must follow, since equal prefixes always
/// hash alike. That wait costs nothing but order; a 64-bit hash makes it
/// rare. So no prefix is copied, and an event's keys are a few words.
fn prefix_hashes(devpath: &[u8], mut f: impl FnMut(u64, bool)) {
    // FxHash's constant: a byte-at-a-time fold of it mixes well enough
    // for keys nobody chooses to collide (a uevent's sender is the kernel).
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h: u64 = 0;
    for (i, &c) in devpath.iter().enumerate() {
        if c == b'/' && i > 0 {
            f(finish(h, i), false);
        }
        h = (h.rotate_left(5) ^ u64::from(c)).wrapping_mul(K);
    }
    f(finish(h, devpath.len()), true);
}

/// Mixes the length in, so that a prefix and a longer path that folded to
/// the same state stay apart.
fn finish(h: u64, len: usize) -> u64 {
    (h ^ len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Unfinished events by key. Devpath prefixes are keyed by their hash
/// ([`prefix_hashes`]), numbers by themselves, all hashed with Fx rather
/// than SipHash: they are not chosen by anyone who could aim collisions at
/// the daemon (a uevent's sender is the kernel).
struct IdIndex<K: Hash + Eq>(FxHashMap<K, Ids>);

/// The unfinished events under one key, oldest first.
///
/// Most keys (most devpaths and their deeper prefixes) hold a single
/// event, which is kept inline: entering and leaving it allocates nothing.
/// More than one are a sorted deque: an event is entered when it is
/// queued, so ids come in increasing order and entering one is a push at
/// the back; and events finish about in the order they came, so most
/// leave from near the front. A sorted deque does both in constant time
/// where a B-tree set walks and rebalances nodes.
enum Ids {
    One(EventId),
    Many(VecDeque<EventId>),
}

impl Ids {
    fn insert(&mut self, id: EventId) {
        match self {
            Ids::One(x) if *x == id => {}
            Ids::One(x) => {
                let (a, b) = if *x < id { (*x, id) } else { (id, *x) };
                *self = Ids::Many(VecDeque::from([a, b]));
            }
            Ids::Many(ids) => match ids.back() {
                Some(&last) if last >= id => {
                    let at = ids.partition_point(|&x| x < id);
                    if ids.get(at) != Some(&id) {
                        ids.insert(at, id);
                    }
                }
                _ => ids.push_back(id),
            },
        }
    }

    /// Takes `id` out; true when none are left.
    fn remove(&mut self, id: EventId) -> bool {
        match self {
            Ids::One(x) => *x == id,
            Ids::Many(ids) => {
                if let Ok(at) = ids.binary_search(&id) {
                    ids.remove(at);
                }
                ids.is_empty()
            }
        }
    }

    /// The latest id before `id`.
    fn latest_before(&self, id: EventId) -> Option<EventId> {
        match self {
            Ids::One(x) => (*x < id).then_some(*x),
            Ids::Many(ids) => {
                let at = ids.partition_point(|&x| x < id);
                at.checked_sub(1).map(|i| ids[i])
            }
        }
    }
}

impl<K: Hash + Eq> Default for IdIndex<K> {
    fn default() -> Self {
        IdIndex(FxHashMap::default())
    }
}

impl<K: Hash + Eq + Copy> IdIndex<K> {
    fn insert(&mut self, key: K, id: EventId) {
        match self.0.entry(key) {
            std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().insert(id),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(Ids::One(id));
            }
        }
    }

    fn remove(&mut self, key: K, id: EventId) {
        if let Some(ids) = self.0.get_mut(&key) {
            if ids.remove(id) {
                self.0.remove(&key);
            }
        }
    }

    /// The latest event before `id` under `key`.
    fn latest_before(&self, key: K, id: EventId) -> Option<EventId> {
        self.0.get(&key)?.latest_before(id)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Unfinished events, indexed by what they may conflict on.
#[derive(Default)]
pub struct DependencyIndex {
    /// Events at a devpath or below it, by the hash of each prefix.
    subtree: IdIndex<u64>,
    /// Events at exactly a devpath, by its hash.
    exact: IdIndex<u64>,
    devnum: IdIndex<DevKey>,
    ifindex: IdIndex<u32>,
}

impl DependencyIndex {
    fn paths(keys: &EventKeys) -> impl Iterator<Item = &[u8]> {
        std::iter::once(&*keys.devpath).chain(keys.devpath_old.as_deref())
    }

    pub fn insert(&mut self, id: EventId, keys: &EventKeys) {
        for path in Self::paths(keys) {
            prefix_hashes(path, |h, whole| {
                self.subtree.insert(h, id);
                if whole {
                    self.exact.insert(h, id);
                }
            });
        }
        if let Some(d) = keys.devnum {
            self.devnum.insert(d, id);
        }
        if let Some(i) = keys.ifindex {
            self.ifindex.insert(i, id);
        }
    }

    pub fn remove(&mut self, id: EventId, keys: &EventKeys) {
        for path in Self::paths(keys) {
            prefix_hashes(path, |h, whole| {
                self.subtree.remove(h, id);
                if whole {
                    self.exact.remove(h, id);
                }
            });
        }
        if let Some(d) = keys.devnum {
            self.devnum.remove(d, id);
        }
        if let Some(i) = keys.ifindex {
            self.ifindex.remove(i, id);
        }
    }

    /// The latest unfinished event before `id` that the event must wait
    /// for, if any.
    pub fn blocker(&self, id: EventId, keys: &EventKeys) -> Option<EventId> {
        let mut found: Option<EventId> = None;
        self.each_blocker(id, keys, |b| found = found.max(Some(b)));
        found
    }

    /// For each thing the event conflicts on (its devpath and subtree,
    /// each ancestor, its number, its index), the latest unfinished event
    /// before `id` there. The same event may come more than once.
    pub fn each_blocker(&self, id: EventId, keys: &EventKeys, mut f: impl FnMut(EventId)) {
        let mut consider = |b: Option<EventId>| {
            if let Some(b) = b {
                f(b)
            }
        };
        for path in Self::paths(keys) {
            prefix_hashes(path, |h, whole| {
                if whole {
                    // Same devpath or a descendant.
                    consider(self.subtree.latest_before(h, id));
                } else {
                    // An ancestor.
                    consider(self.exact.latest_before(h, id));
                }
            });
        }
        if let Some(d) = keys.devnum {
            consider(self.devnum.latest_before(d, id));
        }
        if let Some(i) = keys.ifindex {
            consider(self.ifindex.latest_before(i, id));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.subtree.is_empty()
            && self.exact.is_empty()
            && self.devnum.is_empty()
            && self.ifindex.is_empty()
    }
}

enum State<T> {
    /// Parked on an earlier event it conflicts with.
    Waiting,
    Ready(T),
    Running,
    /// Tried and put back: not runnable until retried.
    Deferred,
}

struct Entry<T> {
    keys: EventKeys,
    state: State<T>,
    /// Payload held while waiting or deferred.
    parked: Option<T>,
    urgent: bool,
}

/// The ordering logic, without threads: events go in with [`push`], come
/// out in arrival order as soon as nothing earlier blocks them with
/// [`next_ready`], and release their dependants with [`complete`].
///
/// [`push`]: DependencyQueue::push
/// [`next_ready`]: DependencyQueue::next_ready
/// [`complete`]: DependencyQueue::complete
pub struct DependencyQueue<T> {
    /// By id, hashed: an entry is a few hundred bytes, which a B-tree
    /// moves about as its nodes fill and empty.
    entries: FxHashMap<EventId, Entry<T>>,
    /// No unfinished event is older: the oldest one, while there is any.
    /// Ids come in order and mostly finish in order, so keeping it costs
    /// a lookup or two per event.
    oldest: EventId,
    index: DependencyIndex,
    /// Ready ordinary events.
    ready: BTreeSet<EventId>,
    /// Ready urgent events.
    urgent: BTreeSet<EventId>,
    /// Urgent events started since the last ordinary one.
    streak: usize,
    /// Deferred events and when to try them again.
    deferred: BTreeMap<EventId, Instant>,
    waiters: FxHashMap<EventId, Vec<EventId>>,
    next_id: EventId,
    running: usize,
}

impl<T> Default for DependencyQueue<T> {
    fn default() -> Self {
        DependencyQueue {
            entries: FxHashMap::default(),
            oldest: 1,
            index: DependencyIndex::default(),
            ready: BTreeSet::new(),
            urgent: BTreeSet::new(),
            streak: 0,
            deferred: BTreeMap::new(),
            waiters: FxHashMap::default(),
            next_id: 1,
            running: 0,
        }
    }
}

impl<T> DependencyQueue<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues an event; returns its id.
    pub fn push(&mut self, keys: EventKeys, payload: T) -> EventId {
        let id = self.next_id;
        self.next_id += 1;
        self.index.insert(id, &keys);
        let blocker = self.index.blocker(id, &keys);
        let urgent = keys.urgent;
        let mut entry = Entry {
            keys,
            state: State::Waiting,
            parked: None,
            urgent,
        };
        match blocker {
            Some(b) => {
                entry.parked = Some(payload);
                self.waiters.entry(b).or_default().push(id);
            }
            None => {
                entry.state = State::Ready(payload);
                self.ready_set(urgent).insert(id);
            }
        }
        if urgent && blocker.is_some() {
            self.boost_blockers(id, &entry.keys);
        }
        if self.entries.is_empty() {
            self.oldest = id;
        }
        self.entries.insert(id, entry);
        id
    }

    fn ready_set(&mut self, urgent: bool) -> &mut BTreeSet<EventId> {
        if urgent {
            &mut self.urgent
        } else {
            &mut self.ready
        }
    }

    /// Makes urgent every event that `id` (with `keys`) waits for, and
    /// what those wait for, transitively. Each event is made urgent once.
    fn boost_blockers(&mut self, id: EventId, keys: &EventKeys) {
        let mut todo = Vec::new();
        self.index.each_blocker(id, keys, |b| todo.push(b));
        while let Some(id) = todo.pop() {
            let Some(e) = self.entries.get_mut(&id) else {
                continue;
            };
            if e.urgent {
                continue;
            }
            e.urgent = true;
            match e.state {
                State::Ready(_) => {
                    if self.ready.remove(&id) {
                        self.urgent.insert(id);
                    }
                }
                State::Waiting => self.index.each_blocker(id, &e.keys, |b| todo.push(b)),
                // Running, or deferred (urgent when retried).
                State::Running | State::Deferred => {}
            }
        }
    }

    /// Takes the event that may run now and should go first: the earliest
    /// urgent one, unless [`URGENT_BURST`] urgent ones went in a row while
    /// ordinary ones were ready; then the earliest ordinary one.
    pub fn next_ready(&mut self) -> Option<(EventId, T)> {
        let take_urgent =
            !self.urgent.is_empty() && (self.ready.is_empty() || self.streak < URGENT_BURST);
        let id = if take_urgent {
            self.streak += 1;
            self.urgent.pop_first()?
        } else {
            self.streak = 0;
            self.ready.pop_first()?
        };
        let entry = self.entries.get_mut(&id)?;
        match std::mem::replace(&mut entry.state, State::Running) {
            State::Ready(payload) => {
                self.running += 1;
                Some((id, payload))
            }
            _ => unreachable!("ready set holds only ready events"),
        }
    }

    /// Marks an event finished; events that were waiting only for it become
    /// ready. Returns how many became ready.
    pub fn complete(&mut self, id: EventId) -> usize {
        let Some(entry) = self.take_entry(id) else {
            return 0;
        };
        match entry.state {
            State::Running => self.running -= 1,
            State::Ready(_) => {
                self.ready.remove(&id);
                self.urgent.remove(&id);
            }
            State::Deferred => {
                self.deferred.remove(&id);
            }
            State::Waiting => {}
        }
        self.index.remove(id, &entry.keys);
        let mut released = 0;
        for w in self.waiters.remove(&id).unwrap_or_default() {
            let Some(waiting) = self.entries.get_mut(&w) else {
                continue;
            };
            match self.index.blocker(w, &waiting.keys) {
                Some(b) => {
                    self.waiters.entry(b).or_default().push(w);
                    if waiting.urgent {
                        let keys = waiting.keys.clone();
                        self.boost_blockers(w, &keys);
                    }
                }
                None => {
                    if let Some(payload) = waiting.parked.take() {
                        waiting.state = State::Ready(payload);
                        let urgent = waiting.urgent;
                        self.ready_set(urgent).insert(w);
                        released += 1;
                    }
                }
            }
        }
        released
    }

    /// Puts a running event back, not to run again before `until` or
    /// [`retry_where`](Self::retry_where): it stays queued, so what waits
    /// for it keeps waiting.
    pub fn defer(&mut self, id: EventId, payload: T, until: Instant) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        if matches!(entry.state, State::Running) {
            self.running -= 1;
        }
        entry.state = State::Deferred;
        entry.parked = Some(payload);
        self.deferred.insert(id, until);
    }

    fn undefer(&mut self, id: EventId) -> bool {
        let Some(entry) = self.entries.get_mut(&id) else {
            return false;
        };
        let Some(payload) = entry.parked.take() else {
            return false;
        };
        entry.state = State::Ready(payload);
        let urgent = entry.urgent;
        self.ready_set(urgent).insert(id);
        true
    }

    /// Makes ready the deferred events whose time has come; returns how
    /// many.
    pub fn retry_due(&mut self, now: Instant) -> usize {
        let due: Vec<EventId> = self
            .deferred
            .iter()
            .filter(|&(_, &t)| t <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in &due {
            self.deferred.remove(id);
            self.undefer(*id);
        }
        due.len()
    }

    /// Makes ready at once the deferred events whose payload `pick`s;
    /// returns how many.
    pub fn retry_where(&mut self, mut pick: impl FnMut(&T) -> bool) -> usize {
        let chosen: Vec<EventId> = self
            .deferred
            .keys()
            .copied()
            .filter(|id| {
                self.entries
                    .get(id)
                    .and_then(|e| e.parked.as_ref())
                    .is_some_and(&mut pick)
            })
            .collect();
        for id in &chosen {
            self.deferred.remove(id);
            self.undefer(*id);
        }
        chosen.len()
    }

    /// When the earliest deferred event is due, if any is deferred.
    pub fn next_retry(&self) -> Option<Instant> {
        self.deferred.values().min().copied()
    }

    /// Deferred events.
    pub fn deferred_len(&self) -> usize {
        self.deferred.len()
    }

    /// Takes every event that has not started (waiting or ready) out of
    /// the queue, in arrival order; running events stay until completed.
    /// What a daemon about to exit hands on to the next one.
    pub fn take_unstarted(&mut self) -> Vec<(EventId, T)> {
        let mut ids: Vec<EventId> = self
            .entries
            .iter()
            .filter(|(_, e)| !matches!(e.state, State::Running))
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(entry) = self.take_entry(id) else {
                continue;
            };
            self.index.remove(id, &entry.keys);
            self.ready.remove(&id);
            self.urgent.remove(&id);
            self.deferred.remove(&id);
            let payload = match entry.state {
                State::Ready(p) => Some(p),
                _ => entry.parked,
            };
            if let Some(p) = payload {
                out.push((id, p));
            }
        }
        // Only running events can still be waited on, and nothing waits.
        self.waiters.clear();
        out
    }

    /// Events not yet finished (waiting, ready or running).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn running(&self) -> usize {
        self.running
    }

    pub fn ready_len(&self) -> usize {
        self.ready.len() + self.urgent.len()
    }

    /// The id the next pushed event will get.
    pub fn next_id(&self) -> EventId {
        self.next_id
    }

    /// Whether every event up to and including `id` has finished.
    pub fn done_through(&self, id: EventId) -> bool {
        self.oldest().is_none_or(|o| o > id)
    }

    /// The oldest unfinished event.
    pub fn oldest(&self) -> Option<EventId> {
        (!self.entries.is_empty()).then_some(self.oldest)
    }

    /// Takes an entry out, moving [`DependencyQueue::oldest`] on past the
    /// ids that are gone when it was the oldest.
    fn take_entry(&mut self, id: EventId) -> Option<Entry<T>> {
        let entry = self.entries.remove(&id)?;
        if id == self.oldest {
            while self.oldest < self.next_id && !self.entries.contains_key(&self.oldest) {
                self.oldest += 1;
            }
        }
        Some(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(devpath: &str) -> EventKeys {
        EventKeys {
            devpath: devpath.as_bytes().into(),
            ..Default::default()
        }
    }

    fn drain_ready<T>(q: &mut DependencyQueue<T>) -> Vec<EventId> {
        std::iter::from_fn(|| q.next_ready().map(|(id, _)| id)).collect()
    }

    /// One key's events against a B-tree set: the same answers whatever
    /// the order of entries and removals, from one event held inline to
    /// many in a deque and back to none (the key gone).
    #[test]
    fn ids_answer_as_an_ordered_set_does() {
        let mut index = IdIndex::<u64>::default();
        let mut model = BTreeSet::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = 1;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 8 {
                // Mostly new ids at the back, as queueing enters them.
                0..=3 => {
                    index.insert(7, next);
                    model.insert(next);
                    next += 1;
                }
                // Now and then one out of order, or one already there.
                4 => {
                    let id = x % (next + 8);
                    index.insert(7, id);
                    model.insert(id);
                }
                // Removals: the oldest, or anywhere (often everything, so
                // that a single event and none come up often).
                5 => {
                    if let Some(&first) = model.first() {
                        index.remove(7, first);
                        model.remove(&first);
                    }
                }
                6 if model.len() > 3 => {
                    for id in std::mem::take(&mut model) {
                        index.remove(7, id);
                    }
                }
                _ => {
                    let id = x % (next + 1);
                    index.remove(7, id);
                    model.remove(&id);
                }
            }
            let probe = (x >> 20) % (next + 2);
            assert_eq!(
                index.latest_before(7, probe),
                model.range(..probe).next_back().copied(),
                "step {step}, before {probe}"
            );
            assert_eq!(index.is_empty(), model.is_empty(), "step {step}");
        }
    }

    #[test]
    fn prefixes_are_component_boundaries() {
        let p: Vec<_> = prefixes(b"/devices/a/b").collect();
        assert_eq!(p, [&b"/devices"[..], b"/devices/a", b"/devices/a/b"]);
    }

    /// One hash per prefix, the last for the whole path; a prefix shared
    /// by two paths hashes alike in both, and different ones apart.
    #[test]
    fn prefix_hashes_are_the_prefixes_hashes() {
        let hashes = |p: &[u8]| {
            let mut v = Vec::new();
            prefix_hashes(p, |h, whole| v.push((h, whole)));
            v
        };
        let paths: [&[u8]; 5] = [
            b"/devices/pci0000:00/0000:00:01.0/host0/target0:0:0/0:0:0:0/block/sda",
            b"/devices/pci0000:00/0000:00:01.0/host0/target0:0:0/0:0:0:0/block/sdb",
            b"/devices/virtual/net/lo",
            b"/devices/virtual/net/lo0",
            b"/d",
        ];
        let mut seen = std::collections::HashMap::new();
        for p in paths {
            let h = hashes(p);
            let names: Vec<_> = prefixes(p).collect();
            assert_eq!(h.len(), names.len());
            assert!(h[..h.len() - 1].iter().all(|&(_, whole)| !whole));
            assert!(h[h.len() - 1].1);
            for ((h, _), name) in h.into_iter().zip(names) {
                if let Some(other) = seen.insert(h, name) {
                    assert_eq!(other, name, "two prefixes with one hash");
                }
            }
        }
        // Every distinct prefix of the five paths has a hash of its own.
        let distinct: std::collections::BTreeSet<_> =
            paths.iter().flat_map(|p| prefixes(p)).collect();
        assert_eq!(seen.len(), distinct.len());
    }

    #[test]
    fn independent_events_run_together() {
        let mut q = DependencyQueue::new();
        q.push(keys("/devices/virtual/net/a"), ());
        q.push(keys("/devices/virtual/net/b"), ());
        assert_eq!(drain_ready(&mut q), [1, 2]);
    }

    #[test]
    fn child_waits_for_parent_and_parent_for_child() {
        let mut q = DependencyQueue::new();
        q.push(keys("/devices/pci/usb1"), ());
        q.push(keys("/devices/pci/usb1/1-1"), ());
        q.push(keys("/devices/pci/usb1-other"), ());
        assert_eq!(drain_ready(&mut q), [1, 3], "usb1-other is no child");
        q.complete(1);
        assert_eq!(drain_ready(&mut q), [2]);

        let mut q = DependencyQueue::new();
        q.push(keys("/devices/pci/usb1/1-1"), ());
        q.push(keys("/devices/pci/usb1"), ());
        assert_eq!(drain_ready(&mut q), [1]);
        q.complete(1);
        assert_eq!(drain_ready(&mut q), [2]);
    }

    #[test]
    fn same_devnum_ifindex_and_old_path_serialize() {
        let mut q = DependencyQueue::new();
        let dev = DevKey {
            block: true,
            major: 8,
            minor: 0,
        };
        q.push(
            EventKeys {
                devnum: Some(dev),
                ..keys("/devices/a/sda")
            },
            (),
        );
        q.push(
            EventKeys {
                devnum: Some(dev),
                ..keys("/devices/b/sda")
            },
            (),
        );
        q.push(
            EventKeys {
                devnum: Some(DevKey {
                    block: false,
                    ..dev
                }),
                ..keys("/devices/c/chr")
            },
            (),
        );
        q.push(
            EventKeys {
                ifindex: Some(4),
                ..keys("/devices/virtual/net/eth0")
            },
            (),
        );
        q.push(
            EventKeys {
                ifindex: Some(4),
                devpath_old: Some(b"/devices/virtual/net/eth0"[..].into()),
                ..keys("/devices/virtual/net/lan0")
            },
            (),
        );
        q.push(keys("/devices/virtual/net/eth0"), ());
        assert_eq!(drain_ready(&mut q), [1, 3, 4]);
        q.complete(4);
        assert_eq!(drain_ready(&mut q), [5]);
        q.complete(5);
        assert_eq!(drain_ready(&mut q), [6]);
        q.complete(1);
        assert_eq!(drain_ready(&mut q), [2]);
    }

    #[test]
    fn a_chain_on_one_device_wakes_one_event_at_a_time() {
        let mut q = DependencyQueue::new();
        for _ in 0..1000 {
            q.push(keys("/devices/virtual/net/x"), ());
        }
        for id in 1..=1000 {
            assert_eq!(drain_ready(&mut q), [id]);
            // Each completion releases exactly the next event: no rescans.
            assert_eq!(q.complete(id), usize::from(id < 1000));
        }
        assert!(q.is_empty());
        assert!(q.index.is_empty());
    }

    #[test]
    fn done_through_tracks_the_oldest_unfinished_event() {
        let mut q = DependencyQueue::new();
        q.push(keys("/devices/a"), ());
        q.push(keys("/devices/b"), ());
        drain_ready(&mut q);
        q.complete(2);
        assert!(!q.done_through(2));
        assert!(!q.done_through(1));
        q.complete(1);
        assert!(q.done_through(2));
    }

    fn urgent(devpath: &str) -> EventKeys {
        EventKeys {
            urgent: true,
            ..keys(devpath)
        }
    }

    #[test]
    fn an_urgent_event_lends_its_urgency_to_the_parents_it_waits_for() {
        let mut q = DependencyQueue::new();
        for n in 0..100 {
            q.push(keys(&format!("/devices/virtual/net/v{n}")), ());
        }
        let host = q.push(keys("/devices/pci/host0"), ());
        let disk = q.push(keys("/devices/pci/host0/block/sda"), ());
        for n in 100..200 {
            q.push(keys(&format!("/devices/virtual/net/v{n}")), ());
        }
        let part = q.push(urgent("/devices/pci/host0/block/sda/sda2"), ());
        // The host goes first, ahead of 100 earlier ordinary events; the
        // disk and partition wait for it as ever.
        assert_eq!(q.next_ready().unwrap().0, host);
        assert_eq!(q.next_ready().unwrap().0, 1, "then the ordinary ones");
        q.complete(host);
        assert_eq!(q.next_ready().unwrap().0, disk);
        q.complete(disk);
        assert_eq!(q.next_ready().unwrap().0, part);
        let rest = drain_ready(&mut q);
        assert_eq!(rest.len(), 199);
        assert!(rest.windows(2).all(|w| w[0] < w[1]), "arrival order");
    }

    #[test]
    fn urgency_follows_every_event_waited_for_and_never_reorders_a_device() {
        let mut q = DependencyQueue::new();
        let dev = DevKey {
            block: true,
            major: 8,
            minor: 2,
        };
        q.push(keys("/devices/virtual/net/x"), ());
        // An old event on the same number, elsewhere; then a parent.
        let old = q.push(
            EventKeys {
                devnum: Some(dev),
                ..keys("/devices/old/sda2")
            },
            (),
        );
        let parent = q.push(keys("/devices/pci/sda"), ());
        q.push(keys("/devices/virtual/net/y"), ());
        let first = q.push(keys("/devices/pci/sda/sda2"), ());
        let root = q.push(
            EventKeys {
                devnum: Some(dev),
                ..urgent("/devices/pci/sda/sda2")
            },
            (),
        );
        // Both the parent and the other device with that number were
        // made urgent, and the earlier event of the device itself.
        let mut got = [q.next_ready().unwrap().0, q.next_ready().unwrap().0];
        got.sort();
        assert_eq!(got, [old, parent]);
        q.complete(parent);
        assert_eq!(q.next_ready().unwrap().0, first, "first: urgent now");
        q.complete(first);
        assert!(
            q.next_ready().is_some_and(|(id, _)| id != root),
            "the root still waits for the old event"
        );
        q.complete(old);
        assert_eq!(q.next_ready().unwrap().0, root);
    }

    #[test]
    fn urgent_events_never_starve_ordinary_ones() {
        let mut q = DependencyQueue::new();
        for n in 0..100 {
            q.push(keys(&format!("/devices/o{n}")), ());
        }
        for n in 0..1000 {
            q.push(urgent(&format!("/devices/u{n}")), ());
        }
        let order = drain_ready(&mut q);
        // Every ordinary event goes after at most URGENT_BURST urgent ones
        // per ordinary one before it.
        for k in 0..100u64 {
            let at = order.iter().position(|&id| id == k + 1).unwrap();
            assert!(at <= (k as usize + 1) * (URGENT_BURST + 1), "{k} at {at}");
        }
        assert_eq!(&order[..URGENT_BURST + 1], &[101, 102, 103, 104, 1]);
        // With nothing ordinary ready, urgent ones go one after another,
        // and an ordinary one that comes goes next.
        let mut q = DependencyQueue::new();
        for n in 0..10 {
            q.push(urgent(&format!("/devices/u{n}")), ());
        }
        for _ in 0..8 {
            q.next_ready().unwrap();
        }
        let late = q.push(keys("/devices/late"), ());
        assert_eq!(q.next_ready().unwrap().0, late);
    }

    #[test]
    fn a_deferred_event_holds_its_device_until_retried() {
        let mut q = DependencyQueue::new();
        let t0 = Instant::now();
        let a = q.push(keys("/devices/loop1"), "a");
        let (id, item) = q.next_ready().unwrap();
        assert_eq!(id, a);
        q.defer(id, item, t0 + std::time::Duration::from_millis(200));
        let later = q.push(keys("/devices/loop1"), "later");
        let other = q.push(keys("/devices/loop2"), "other");
        assert_eq!(drain_ready(&mut q), [other]);
        q.complete(other);
        assert_eq!((q.running(), q.deferred_len()), (0, 1));
        assert_eq!(q.retry_due(t0), 0);
        assert!(!q.done_through(a), "settle waits for it");
        assert_eq!(q.retry_due(t0 + std::time::Duration::from_millis(200)), 1);
        let (id, item) = q.next_ready().unwrap();
        assert_eq!((id, item), (a, "a"));
        q.defer(id, item, t0 + std::time::Duration::from_secs(60));
        assert_eq!(q.retry_where(|i| *i == "nothing"), 0);
        assert_eq!(q.retry_where(|i| *i == "a"), 1);
        assert_eq!(drain_ready(&mut q), [a]);
        q.complete(a);
        assert_eq!(drain_ready(&mut q), [later]);
        q.complete(later);
        assert!(q.is_empty() && q.index.is_empty());
    }

    #[test]
    fn unstarted_events_are_taken_in_order_and_running_ones_stay() {
        let mut q = DependencyQueue::new();
        q.push(keys("/devices/a"), 'a');
        q.push(keys("/devices/a/child"), 'c');
        q.push(keys("/devices/b"), 'b');
        q.push(keys("/devices/a"), 'A');
        // 1 runs; 3 is ready; 2 and 4 wait on 1.
        assert_eq!(q.next_ready(), Some((1, 'a')));
        let taken = q.take_unstarted();
        assert_eq!(taken, [(2, 'c'), (3, 'b'), (4, 'A')]);
        assert_eq!((q.len(), q.running(), q.ready_len()), (1, 1, 0));
        assert_eq!(q.complete(1), 0, "nothing taken comes back");
        assert!(q.is_empty());
        assert!(q.index.is_empty());
        // The queue goes on as new.
        q.push(keys("/devices/a"), 'n');
        assert_eq!(q.next_ready(), Some((5, 'n')));
    }
}
