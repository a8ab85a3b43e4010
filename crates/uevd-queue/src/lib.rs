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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;

mod pool;
pub use pool::{Completion, Handler, WorkQueue};

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
}

/// Each proper prefix of a devpath that ends before a `/`, then the devpath.
fn prefixes(devpath: &[u8]) -> impl Iterator<Item = &[u8]> {
    devpath
        .iter()
        .enumerate()
        .skip(1)
        .filter(|&(_, &c)| c == b'/')
        .map(move |(i, _)| &devpath[..i])
        .chain(std::iter::once(devpath))
}

struct IdIndex<K: Hash + Eq>(HashMap<K, BTreeSet<EventId>>);

impl<K: Hash + Eq> Default for IdIndex<K> {
    fn default() -> Self {
        IdIndex(HashMap::new())
    }
}

impl<K: Hash + Eq> IdIndex<K> {
    fn insert(&mut self, key: K, id: EventId) {
        self.0.entry(key).or_default().insert(id);
    }

    fn remove<Q>(&mut self, key: &Q, id: EventId)
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(set) = self.0.get_mut(key) {
            set.remove(&id);
            if set.is_empty() {
                self.0.remove(key);
            }
        }
    }

    /// The latest event before `id` under `key`.
    fn latest_before<Q>(&self, key: &Q, id: EventId) -> Option<EventId>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.0.get(key)?.range(..id).next_back().copied()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Unfinished events, indexed by what they may conflict on.
#[derive(Default)]
pub struct DependencyIndex {
    /// Events at a devpath or below it, by each prefix.
    subtree: IdIndex<Box<[u8]>>,
    /// Events at exactly a devpath.
    exact: IdIndex<Box<[u8]>>,
    devnum: IdIndex<DevKey>,
    ifindex: IdIndex<u32>,
}

impl DependencyIndex {
    fn paths(keys: &EventKeys) -> impl Iterator<Item = &[u8]> {
        std::iter::once(&*keys.devpath).chain(keys.devpath_old.as_deref())
    }

    pub fn insert(&mut self, id: EventId, keys: &EventKeys) {
        for path in Self::paths(keys) {
            for p in prefixes(path) {
                self.subtree.insert(p.into(), id);
            }
            self.exact.insert(path.into(), id);
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
            for p in prefixes(path) {
                self.subtree.remove(p, id);
            }
            self.exact.remove(path, id);
        }
        if let Some(d) = keys.devnum {
            self.devnum.remove(&d, id);
        }
        if let Some(i) = keys.ifindex {
            self.ifindex.remove(&i, id);
        }
    }

    /// The latest unfinished event before `id` that the event must wait
    /// for, if any.
    pub fn blocker(&self, id: EventId, keys: &EventKeys) -> Option<EventId> {
        let mut found: Option<EventId> = None;
        let mut consider = |b: Option<EventId>| found = found.max(b);
        for path in Self::paths(keys) {
            // Same devpath or a descendant.
            consider(self.subtree.latest_before(path, id));
            // An ancestor (prefixes() ends with the path itself: skip it).
            let mut ancestors = prefixes(path).peekable();
            while let Some(p) = ancestors.next() {
                if ancestors.peek().is_some() {
                    consider(self.exact.latest_before(p, id));
                }
            }
        }
        if let Some(d) = keys.devnum {
            consider(self.devnum.latest_before(&d, id));
        }
        if let Some(i) = keys.ifindex {
            consider(self.ifindex.latest_before(&i, id));
        }
        found
    }

    pub fn is_empty(&self) -> bool {
        self.subtree.is_empty()
            && self.exact.is_empty()
            && self.devnum.is_empty()
            && self.ifindex.is_empty()
    }
}

enum State<T> {
    Waiting,
    Ready(T),
    Running,
}

struct Entry<T> {
    keys: EventKeys,
    state: State<T>,
    /// Payload held while waiting.
    parked: Option<T>,
}

/// The ordering logic, without threads: events go in with [`push`], come
/// out in arrival order as soon as nothing earlier blocks them with
/// [`next_ready`], and release their dependants with [`complete`].
///
/// [`push`]: DependencyQueue::push
/// [`next_ready`]: DependencyQueue::next_ready
/// [`complete`]: DependencyQueue::complete
pub struct DependencyQueue<T> {
    entries: BTreeMap<EventId, Entry<T>>,
    index: DependencyIndex,
    ready: BTreeSet<EventId>,
    waiters: HashMap<EventId, Vec<EventId>>,
    next_id: EventId,
    running: usize,
}

impl<T> Default for DependencyQueue<T> {
    fn default() -> Self {
        DependencyQueue {
            entries: BTreeMap::new(),
            index: DependencyIndex::default(),
            ready: BTreeSet::new(),
            waiters: HashMap::new(),
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
        let mut entry = Entry {
            keys,
            state: State::Waiting,
            parked: None,
        };
        match blocker {
            Some(b) => {
                entry.parked = Some(payload);
                self.waiters.entry(b).or_default().push(id);
            }
            None => {
                entry.state = State::Ready(payload);
                self.ready.insert(id);
            }
        }
        self.entries.insert(id, entry);
        id
    }

    /// Takes the earliest event that may run now.
    pub fn next_ready(&mut self) -> Option<(EventId, T)> {
        let id = self.ready.pop_first()?;
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
        let Some(entry) = self.entries.remove(&id) else {
            return 0;
        };
        if matches!(entry.state, State::Running) {
            self.running -= 1;
        }
        self.index.remove(id, &entry.keys);
        let mut released = 0;
        for w in self.waiters.remove(&id).unwrap_or_default() {
            let Some(waiting) = self.entries.get_mut(&w) else {
                continue;
            };
            match self.index.blocker(w, &waiting.keys) {
                Some(b) => self.waiters.entry(b).or_default().push(w),
                None => {
                    if let Some(payload) = waiting.parked.take() {
                        waiting.state = State::Ready(payload);
                        self.ready.insert(w);
                        released += 1;
                    }
                }
            }
        }
        released
    }

    /// Takes every event that has not started (waiting or ready) out of
    /// the queue, in arrival order; running events stay until completed.
    /// What a daemon about to exit hands on to the next one.
    pub fn take_unstarted(&mut self) -> Vec<(EventId, T)> {
        let ids: Vec<EventId> = self
            .entries
            .iter()
            .filter(|(_, e)| !matches!(e.state, State::Running))
            .map(|(&id, _)| id)
            .collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(entry) = self.entries.remove(&id) else {
                continue;
            };
            self.index.remove(id, &entry.keys);
            self.ready.remove(&id);
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
        self.ready.len()
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
        self.entries.keys().next().copied()
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

    #[test]
    fn prefixes_are_component_boundaries() {
        let p: Vec<_> = prefixes(b"/devices/a/b").collect();
        assert_eq!(p, [&b"/devices"[..], b"/devices/a", b"/devices/a/b"]);
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
