//! Worker threads around a [`DependencyQueue`]: one process, no fork per
//! event.

use crate::{DependencyQueue, EventId, EventKeys};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Processes one event on a worker thread.
pub trait Handler<T>: Send + Sync + 'static {
    fn handle(&self, worker: usize, id: EventId, item: T);
}

impl<T, F: Fn(usize, EventId, T) + Send + Sync + 'static> Handler<T> for F {
    fn handle(&self, worker: usize, id: EventId, item: T) {
        self(worker, id, item)
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
    settle_waiters: usize,
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
                    settle_waiters: 0,
                }),
                work: Condvar::new(),
                done: Condvar::new(),
                on_busy: Box::new(on_busy),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        // A worker that panicked has already been reported; the queue
        // itself is consistent between calls, so keep going.
        self.shared.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues an event.
    pub fn push(&self, keys: EventKeys, item: T) -> EventId {
        let mut inner = self.lock();
        let was_empty = inner.queue.is_empty();
        let id = inner.queue.push(keys, item);
        if was_empty {
            (self.shared.on_busy)(true);
        }
        if inner.queue.ready_len() > 0 {
            self.shared.work.notify_one();
        }
        id
    }

    /// Starts `workers` threads running `handler`.
    pub fn spawn_workers<H: Handler<T>>(&self, workers: usize, handler: H) -> Vec<JoinHandle<()>> {
        let handler = Arc::new(handler);
        (0..workers.max(1))
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

    fn work<H: Handler<T>>(&self, worker: usize, handler: &H) {
        let mut inner = self.lock();
        loop {
            if let Some((id, item)) = inner.queue.next_ready() {
                drop(inner);
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    handler.handle(worker, id, item)
                }));
                if outcome.is_err() {
                    log_panic(id);
                }
                inner = self.lock();
                let released = inner.queue.complete(id);
                // This worker takes one released event itself next round.
                for _ in 1..released {
                    self.shared.work.notify_one();
                }
                if inner.queue.is_empty() {
                    (self.shared.on_busy)(false);
                }
                if inner.settle_waiters > 0 {
                    self.shared.done.notify_all();
                }
                continue;
            }
            if inner.shutdown && inner.queue.is_empty() {
                return;
            }
            inner = self
                .shared
                .work
                .wait(inner)
                .unwrap_or_else(|p| p.into_inner());
        }
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
        inner.settle_waiters += 1;
        let result = loop {
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
        inner.settle_waiters -= 1;
        result
    }

    /// Lets the workers finish what is queued, then stop.
    pub fn shutdown(&self) {
        self.lock().shutdown = true;
        self.shared.work.notify_all();
    }
}

fn log_panic(id: EventId) {
    eprintln!("uevd: internal error while processing event {id}; event skipped");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

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
        let handles = q.spawn_workers(
            4,
            move |_w: usize, _id: EventId, (dev, step): (usize, usize)| {
                std::thread::sleep(Duration::from_micros(50));
                seen.lock().unwrap().push((dev, step));
            },
        );
        let mut last = 0;
        for step in 0..20 {
            for dev in 0..10 {
                last = q.push(keys(format!("/devices/d{dev}")), (dev, step));
            }
        }
        assert_eq!(q.settle(last, Duration::from_secs(30)), Completion::Done);
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 200);
        for dev in 0..10 {
            let steps: Vec<_> = log.iter().filter(|e| e.0 == dev).map(|e| e.1).collect();
            assert_eq!(steps, (0..20).collect::<Vec<_>>());
        }
        assert_eq!(q.status(), (0, 0));
        assert!(busy_flips.load(Ordering::SeqCst) >= 2);
        q.shutdown();
        for h in handles {
            h.join().unwrap();
        }
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
}
