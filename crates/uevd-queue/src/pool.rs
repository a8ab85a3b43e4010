//! Worker threads around a [`DependencyQueue`]: one process, no fork per
//! event.
//!
//! Waking a thread costs more than processing a typical event, so the pool
//! wakes as few as it can: a batch of events wakes at most as many sleeping
//! workers as it has ready events, and a worker that finds more work than
//! it can take wakes the next. The thread that submits never processes an
//! event itself: any event may run a rule program that hangs until its
//! timeout, and the receiving thread must keep reading the kernel and
//! answering control requests meanwhile. Workers number from 1.

use crate::{DependencyQueue, EventId, EventKeys};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What became of an event a worker was given.
pub enum Outcome<T> {
    /// Processed (or failed for good): it leaves the queue.
    Done,
    /// Not processable yet: it goes back to the queue, deferred, and is
    /// tried again after `after` or when [`WorkQueue::retry_where`] picks
    /// it. Events that wait for it keep waiting.
    Retry { item: T, after: Duration },
}

impl<T> From<()> for Outcome<T> {
    fn from((): ()) -> Outcome<T> {
        Outcome::Done
    }
}

/// Processes one event on worker `worker`.
pub trait Handler<T>: Send + Sync + 'static {
    fn handle(&self, worker: usize, id: EventId, item: T) -> Outcome<T>;
}

impl<T, R, F> Handler<T> for F
where
    R: Into<Outcome<T>>,
    F: Fn(usize, EventId, T) -> R + Send + Sync + 'static,
{
    fn handle(&self, worker: usize, id: EventId, item: T) -> Outcome<T> {
        self(worker, id, item).into()
    }
}

/// What `settle` learns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    Done,
    TimedOut { pending: usize },
}

type BusyHook = Box<dyn Fn(bool) + Send + Sync>;

struct Inner<T> {
    queue: DependencyQueue<T>,
    shutdown: bool,
    /// The events settle callers wait for (each the last of theirs), with
    /// how many wait for each. An event's end wakes them only when it
    /// finishes the earliest wait: a settle running through a storm used
    /// to be woken (and to go back to sleep) at the end of every event.
    settle_targets: BTreeMap<EventId, usize>,
    /// How often a settle caller looked at the queue.
    #[cfg(test)]
    settle_looks: usize,
    /// Workers waiting for work that nobody has woken yet.
    sleeping: usize,
    /// Workers woken for ready work that have not taken the lock since:
    /// they will take that work, so it wakes nobody else. Without this,
    /// each event pushed while a woken worker was still on its way woke
    /// one more (the fourth of a burst woke four workers for one event),
    /// and the extras went back to sleep: two futex calls and two context
    /// switches each, for nothing.
    signaled: usize,
    /// No event starts while set (udev's "stop exec queue"); events are
    /// still queued and running ones finish.
    paused: bool,
    /// Events running at once, at most (udev's "children max").
    limit: usize,
    /// Worker threads started.
    workers: usize,
}

struct Shared<T> {
    inner: Mutex<Inner<T>>,
    work: Condvar,
    done: Condvar,
    /// Called, under the queue lock, when the queue turns busy (true) or
    /// idle (false): the place to keep /run/udev/queue in step.
    on_busy: BusyHook,
}

/// A dependency queue served by a pool of worker threads.
pub struct WorkQueue<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        WorkQueue {
            shared: self.shared.clone(),
        }
    }
}

impl<T: Send + 'static> WorkQueue<T> {
    pub fn new(on_busy: impl Fn(bool) + Send + Sync + 'static) -> WorkQueue<T> {
        WorkQueue {
            shared: Arc::new(Shared {
                inner: Mutex::new(Inner {
                    queue: DependencyQueue::new(),
                    shutdown: false,
                    settle_targets: BTreeMap::new(),
                    #[cfg(test)]
                    settle_looks: 0,
                    sleeping: 0,
                    signaled: 0,
                    paused: false,
                    limit: usize::MAX,
                    workers: 0,
                }),
                work: Condvar::new(),
                done: Condvar::new(),
                on_busy: Box::new(on_busy),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        // A handler that panicked has been caught and reported; the queue
        // itself is consistent between calls, so keep going.
        self.shared.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues one event for the workers.
    pub fn push(&self, keys: EventKeys, item: T) -> EventId {
        let mut inner = self.lock();
        let id = self.enqueue(&mut inner, keys, item);
        self.wake_for(&mut inner);
        id
    }

    fn enqueue(&self, inner: &mut Inner<T>, keys: EventKeys, item: T) -> EventId {
        if inner.queue.is_empty() {
            (self.shared.on_busy)(true);
        }
        inner.queue.push(keys, item)
    }

    /// Whether a worker may start one more event now.
    fn may_start(inner: &Inner<T>) -> bool {
        !inner.paused && inner.queue.running() < inner.limit
    }

    /// Wakes as many sleeping workers as there is ready work for, less
    /// those woken already and still on their way.
    fn wake_for(&self, inner: &mut Inner<T>) {
        if !Self::may_start(inner) {
            return;
        }
        let room = inner.limit - inner.queue.running();
        let wanted = inner.queue.ready_len().min(room);
        let wake = wanted.saturating_sub(inner.signaled).min(inner.sleeping);
        for _ in 0..wake {
            self.shared.work.notify_one();
        }
        inner.sleeping -= wake;
        inner.signaled += wake;
    }

    /// A worker back from waiting: it was either one of those signaled
    /// (any of them, as the condition variable picks) or woke by itself
    /// (a time-out, a broadcast, a spurious wake-up) and still counts as
    /// sleeping. Either way each worker that wakes takes one off.
    fn awake(inner: &mut Inner<T>) {
        if inner.signaled > 0 {
            inner.signaled -= 1;
        } else {
            inner.sleeping -= 1;
        }
    }

    /// Queues a batch of events, as read from the kernel in one go,
    /// waking only as many workers as the batch makes ready.
    pub fn submit(&self, batch: Vec<(EventKeys, T)>) {
        let mut inner = self.lock();
        for (keys, item) in batch {
            self.enqueue(&mut inner, keys, item);
        }
        self.wake_for(&mut inner);
    }

    fn run(&self, handler: &dyn Handler<T>, worker: usize, id: EventId, item: T) -> Outcome<T> {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            handler.handle(worker, id, item)
        }));
        outcome.unwrap_or_else(|_| {
            eprintln!("uevd: internal error while processing event {id}; event skipped");
            Outcome::Done
        })
    }

    /// Marks an event done and passes on what that makes ready.
    fn finish(&self, inner: &mut Inner<T>, id: EventId) {
        inner.queue.complete(id);
        if inner.queue.is_empty() {
            (self.shared.on_busy)(false);
        }
        if let Some(&first) = inner.settle_targets.keys().next() {
            if inner.queue.done_through(first) {
                self.shared.done.notify_all();
            }
        }
    }

    /// Starts `workers` threads running `handler`. Call once.
    pub fn spawn_workers<H: Handler<T>>(&self, workers: usize, handler: H) -> Vec<JoinHandle<()>> {
        let handler: Arc<dyn Handler<T>> = Arc::new(handler);
        self.lock().workers = workers.max(1);
        (1..=workers.max(1))
            .map(|n| {
                let this = self.clone();
                let handler = handler.clone();
                std::thread::Builder::new()
                    .name(format!("worker{n}"))
                    .spawn(move || this.work(n, &*handler))
                    .expect("spawning a worker thread")
            })
            .collect()
    }

    fn work(&self, worker: usize, handler: &dyn Handler<T>) {
        let mut inner = self.lock();
        loop {
            if inner.queue.deferred_len() > 0 {
                if inner.shutdown {
                    // At exit a deferred event gets one last try; if it
                    // still cannot be processed, it is dropped.
                    inner.queue.retry_where(|_| true);
                } else {
                    inner.queue.retry_due(Instant::now());
                }
            }
            let next = if Self::may_start(&inner) {
                inner.queue.next_ready()
            } else {
                None
            };
            if let Some((id, item)) = next {
                // More ready than this worker can take: hand some on.
                self.wake_for(&mut inner);
                drop(inner);
                let outcome = self.run(handler, worker, id, item);
                inner = self.lock();
                match outcome {
                    Outcome::Retry { item, after } if !inner.shutdown => {
                        inner.queue.defer(id, item, Instant::now() + after);
                        // A sleeper keeps the time (this worker may be busy
                        // with a long event when it comes).
                        self.shared.work.notify_one();
                    }
                    Outcome::Retry { .. } => {
                        eprintln!("uevd: event {id} dropped at exit: its device is still locked");
                        self.finish(&mut inner, id);
                    }
                    Outcome::Done => self.finish(&mut inner, id),
                }
                continue;
            }
            if inner.shutdown && inner.queue.is_empty() {
                // Let the others see the shutdown too.
                self.shared.work.notify_all();
                return;
            }
            inner.sleeping += 1;
            inner = match inner.queue.next_retry() {
                Some(at) => {
                    let wait = at.saturating_duration_since(Instant::now());
                    self.shared
                        .work
                        .wait_timeout(inner, wait)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self
                    .shared
                    .work
                    .wait(inner)
                    .unwrap_or_else(|p| p.into_inner()),
            };
            Self::awake(&mut inner);
        }
    }

    /// Tries again at once the deferred events whose item `pick`s (their
    /// device was unlocked, say). Returns how many.
    pub fn retry_where(&self, pick: impl FnMut(&T) -> bool) -> usize {
        let mut inner = self.lock();
        let n = inner.queue.retry_where(pick);
        if n > 0 {
            self.wake_for(&mut inner);
        }
        n
    }

    /// The id of the last event queued so far (0 if none).
    pub fn last_id(&self) -> EventId {
        self.lock().queue.next_id() - 1
    }

    /// Unfinished and running events.
    pub fn status(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.queue.len(), inner.queue.running())
    }

    /// Waits until every event up to `id` has finished.
    pub fn settle(&self, id: EventId, timeout: Duration) -> Completion {
        let deadline = Instant::now() + timeout;
        let mut inner = self.lock();
        *inner.settle_targets.entry(id).or_default() += 1;
        let result = loop {
            #[cfg(test)]
            {
                inner.settle_looks += 1;
            }
            if inner.queue.done_through(id) {
                break Completion::Done;
            }
            let now = Instant::now();
            if now >= deadline {
                break Completion::TimedOut {
                    pending: inner.queue.len(),
                };
            }
            inner = self
                .shared
                .done
                .wait_timeout(inner, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        };
        if let Some(n) = inner.settle_targets.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                inner.settle_targets.remove(&id);
            }
        }
        result
    }

    /// Stops (true) or resumes (false) starting events. Queued events
    /// wait; settle waits for them too.
    pub fn set_paused(&self, paused: bool) {
        self.lock().paused = paused;
        self.shared.work.notify_all();
    }

    /// Runs at most `limit` events at once (0: as many as there are
    /// workers). Workers are started once, so a limit above their number
    /// gives their number; the limit in effect is returned.
    pub fn set_limit(&self, limit: usize) -> usize {
        let mut inner = self.lock();
        inner.limit = if limit == 0 { usize::MAX } else { limit };
        let effective = inner.limit.min(inner.workers.max(1));
        drop(inner);
        self.shared.work.notify_all();
        effective
    }

    /// How many events may run at once now: the limit set, or the number
    /// of workers when that is fewer.
    pub fn limit(&self) -> usize {
        let inner = self.lock();
        inner.limit.min(inner.workers.max(1))
    }

    /// Whether starting events is stopped ([`WorkQueue::set_paused`]).
    pub fn paused(&self) -> bool {
        self.lock().paused
    }

    /// Stops starting events and takes out every one not started yet, in
    /// arrival order; the workers finish what runs, then stop (join
    /// them). Nothing taken has run or will run here.
    pub fn shutdown_unstarted(&self) -> Vec<T> {
        let mut inner = self.lock();
        inner.shutdown = true;
        inner.paused = false;
        let taken = inner.queue.take_unstarted();
        if !taken.is_empty() && inner.queue.is_empty() {
            (self.shared.on_busy)(false);
        }
        drop(inner);
        self.shared.work.notify_all();
        self.shared.done.notify_all();
        taken.into_iter().map(|(_, item)| item).collect()
    }

    /// Lets the workers finish what is queued, then stop; a paused queue
    /// resumes, or it would never finish.
    pub fn shutdown(&self) {
        let mut inner = self.lock();
        inner.shutdown = true;
        inner.paused = false;
        drop(inner);
        self.shared.work.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A settle waiting for one slow event is not woken by the many other
    /// events that end meanwhile, only by the end of its own.
    #[test]
    fn settle_wakes_when_its_events_are_done_not_at_every_event() {
        let q: WorkQueue<u32> = WorkQueue::new(|_| {});
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let g = gate.clone();
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        let handles = q.spawn_workers(2, move |_w: usize, _id: EventId, n: u32| {
            if n == 0 {
                drop(g.lock().unwrap());
            }
            d.fetch_add(1, Ordering::SeqCst);
        });
        q.submit(vec![(keys("/devices/slow".into()), 0)]);
        let slow = q.last_id();
        let waiter = {
            let q = q.clone();
            std::thread::spawn(move || q.settle(slow, Duration::from_secs(30)))
        };
        while q.lock().settle_targets.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
        for n in 1..=50 {
            q.push(keys(format!("/devices/fast{n}")), n);
        }
        while done.load(Ordering::SeqCst) < 50 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(held);
        assert_eq!(waiter.join().unwrap(), Completion::Done);
        let looks = q.lock().settle_looks;
        assert!(looks <= 3, "settle looked {looks} times");
        assert!(q.lock().settle_targets.is_empty());
        q.shutdown();
        for h in handles {
            h.join().unwrap();
        }
    }

    /// Events pushed one at a time into a queue with four sleeping
    /// workers: each wakes one worker, not one more than the last did.
    #[test]
    fn a_worker_on_its_way_is_not_woken_again() {
        let q: WorkQueue<u32> = WorkQueue::new(|_| {});
        q.lock().sleeping = 4;
        for n in 0..3 {
            q.push(keys(format!("/devices/d{n}")), n);
        }
        let state = |q: &WorkQueue<u32>| {
            let inner = q.lock();
            (inner.sleeping, inner.signaled)
        };
        assert_eq!(state(&q), (1, 3));
        // One of them is up; the others still count as coming.
        WorkQueue::awake(&mut q.lock());
        assert_eq!(state(&q), (1, 2));
        // Four ready, two workers coming and one up: the last sleeper goes.
        q.push(keys("/devices/d3".into()), 3);
        assert_eq!(state(&q), (0, 3));
        // Every worker that wakes takes one off, however it woke.
        for _ in 0..3 {
            WorkQueue::awake(&mut q.lock());
        }
        assert_eq!(state(&q), (0, 0));
        q.lock().sleeping = 1;
        WorkQueue::<u32>::awake(&mut q.lock());
        assert_eq!(state(&q), (0, 0));
    }

    fn keys(devpath: String) -> EventKeys {
        EventKeys {
            devpath: devpath.into_bytes().into(),
            ..Default::default()
        }
    }

    #[test]
    fn workers_run_in_parallel_but_keep_order_per_device() {
        let busy_flips = Arc::new(AtomicUsize::new(0));
        let flips = busy_flips.clone();
        let q: WorkQueue<(usize, usize)> = WorkQueue::new(move |_| {
            flips.fetch_add(1, Ordering::SeqCst);
        });
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        let active = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (a, p) = (active.clone(), peak.clone());
        let handles = q.spawn_workers(
            4,
            move |w: usize, _id: EventId, (dev, step): (usize, usize)| {
                let now = a.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_micros(200));
                seen.lock().unwrap().push((dev, step, w));
                a.fetch_sub(1, Ordering::SeqCst);
            },
        );
        let batch: Vec<_> = (0..20)
            .flat_map(|step| {
                (0..10).map(move |dev| (keys(format!("/devices/d{dev}")), (dev, step)))
            })
            .collect();
        q.submit(batch);
        let last = q.last_id();
        assert_eq!(q.settle(last, Duration::from_secs(30)), Completion::Done);
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 200);
        for dev in 0..10 {
            let steps: Vec<_> = log.iter().filter(|e| e.0 == dev).map(|e| e.1).collect();
            assert_eq!(steps, (0..20).collect::<Vec<_>>());
        }
        assert!(
            peak.load(Ordering::SeqCst) > 1,
            "independent events overlapped"
        );
        assert!(log.iter().all(|e| e.2 >= 1), "a batch goes to the pool");
        assert_eq!(q.status(), (0, 0));
        assert!(busy_flips.load(Ordering::SeqCst) >= 2);
        q.shutdown();
        for h in handles {
            h.join().unwrap();
        }
    }

    #[test]
    fn submit_never_runs_an_event_and_a_hung_one_stalls_only_its_device() {
        let q: WorkQueue<u32> = WorkQueue::new(|_| {});
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let ran_on = Arc::new(Mutex::new(Vec::new()));
        let (g, r) = (gate.clone(), ran_on.clone());
        let _h = q.spawn_workers(2, move |w: usize, _id: EventId, n: u32| {
            r.lock().unwrap().push((n, w, std::thread::current().id()));
            if n == 1 {
                // A rule program that hangs.
                drop(g.lock().unwrap());
            }
        });
        q.submit(vec![(keys("/devices/hung".into()), 1)]);
        // Returned although event 1 cannot finish; another device's event
        // is processed meanwhile, and one for the hung device waits.
        q.submit(vec![
            (keys("/devices/other".into()), 2),
            (keys("/devices/hung".into()), 3),
        ]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ran_on.lock().unwrap().iter().any(|e| e.0 == 2) {
            assert!(Instant::now() < deadline, "event 2 waited for the hung one");
            std::thread::sleep(Duration::from_millis(1));
        }
        // The hung event runs, the one behind it on its device waits.
        while q.status() != (2, 1) {
            assert!(Instant::now() < deadline, "status {:?}", q.status());
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(held);
        assert_eq!(
            q.settle(q.last_id(), Duration::from_secs(10)),
            Completion::Done
        );
        let me = std::thread::current().id();
        let ran = ran_on.lock().unwrap().clone();
        assert_eq!(ran.len(), 3);
        assert!(ran.iter().all(|&(_, w, t)| w >= 1 && t != me), "{ran:?}");
    }

    #[test]
    fn settle_times_out_and_a_panicking_handler_does_not_wedge_the_queue() {
        let q: WorkQueue<u32> = WorkQueue::new(|_| {});
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let g = gate.clone();
        let _h = q.spawn_workers(1, move |_w: usize, _id: EventId, n: u32| {
            let _g = g.lock();
            if n == 0 {
                panic!("handler failure");
            }
        });
        q.push(keys("/devices/a".into()), 0);
        let last = q.push(keys("/devices/a".into()), 1);
        assert_eq!(
            q.settle(last, Duration::from_millis(50)),
            Completion::TimedOut { pending: 2 }
        );
        drop(held);
        assert_eq!(q.settle(last, Duration::from_secs(10)), Completion::Done);
    }

    #[test]
    fn a_paused_queue_starts_nothing_and_a_limit_caps_what_runs() {
        let q: WorkQueue<u32> = WorkQueue::new(|_| {});
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (r, m) = (running.clone(), most.clone());
        let handles = q.spawn_workers(4, move |_w: usize, _id: EventId, _n: u32| {
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(5));
            r.fetch_sub(1, Ordering::SeqCst);
        });
        q.set_paused(true);
        let mut last = 0;
        for n in 0..8 {
            last = q.push(keys(format!("/devices/d{n}")), n);
        }
        assert_eq!(
            q.settle(last, Duration::from_millis(50)),
            Completion::TimedOut { pending: 8 }
        );
        assert_eq!(q.set_limit(2), 2);
        assert_eq!(q.set_limit(100), 4);
        assert_eq!(q.limit(), 4);
        q.set_limit(2);
        q.set_paused(false);
        assert_eq!(q.settle(last, Duration::from_secs(10)), Completion::Done);
        assert!(most.load(Ordering::SeqCst) <= 2);
        // A shutdown finishes what a pause held back.
        q.set_paused(true);
        q.push(keys("/devices/late".into()), 9);
        q.shutdown();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(q.status(), (0, 0));
    }

    #[test]
    fn a_retried_event_comes_back_later_and_others_flow_meanwhile() {
        let q: WorkQueue<(u32, u32)> = WorkQueue::new(|_| {});
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        let handles = q.spawn_workers(2, move |_w: usize, _id: EventId, (n, tries): (u32, u32)| {
            seen.lock().unwrap().push((n, tries));
            if n == 1 && tries < 3 {
                return Outcome::Retry {
                    item: (n, tries + 1),
                    after: Duration::from_millis(20),
                };
            }
            Outcome::Done
        });
        let t = Instant::now();
        q.push(keys("/devices/locked".into()), (1, 0));
        q.push(keys("/devices/locked/part".into()), (2, 0));
        q.push(keys("/devices/free".into()), (3, 0));
        let last = q.last_id();
        assert_eq!(q.settle(last, Duration::from_secs(10)), Completion::Done);
        assert!(t.elapsed() >= Duration::from_millis(60));
        let log = log.lock().unwrap().clone();
        let at = |e| log.iter().position(|&x| x == e).unwrap();
        assert!(at((3, 0)) < at((1, 3)), "{log:?}");
        assert!(at((1, 3)) < at((2, 0)), "the child waited: {log:?}");
        assert_eq!(log.len(), 6);
        // Asked to retry now, it does not wait for its time.
        q.push(keys("/devices/locked".into()), (1, 2));
        while q.status() != (1, 0) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let t = Instant::now();
        std::thread::sleep(Duration::from_millis(1));
        q.retry_where(|_| true);
        assert_eq!(
            q.settle(q.last_id(), Duration::from_secs(10)),
            Completion::Done
        );
        assert!(t.elapsed() < Duration::from_millis(20) || cfg!(miri));
        q.shutdown();
        for h in handles {
            h.join().unwrap();
        }
    }

    #[test]
    fn a_shutdown_hands_back_what_has_not_started_and_finishes_what_runs() {
        let q: WorkQueue<u32> = WorkQueue::new(|_| {});
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let ran = Arc::new(Mutex::new(Vec::new()));
        let (g, r) = (gate.clone(), ran.clone());
        let handles = q.spawn_workers(1, move |_w: usize, _id: EventId, n: u32| {
            r.lock().unwrap().push(n);
            drop(g.lock().unwrap());
            Outcome::Done
        });
        for n in 0..5 {
            q.push(keys(format!("/devices/d{n}")), n);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while ran.lock().unwrap().is_empty() {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(1));
        }
        let taken = q.shutdown_unstarted();
        drop(held);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*ran.lock().unwrap(), [0]);
        assert_eq!(taken, [1, 2, 3, 4]);
        assert_eq!(q.status(), (0, 0));
    }
}
