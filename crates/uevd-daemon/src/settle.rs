//! Settling: a `settle` request waits, in its own thread, until every
//! event queued before it is done and every driver those events asked for
//! is loaded, and then until the kernel socket has been read dry once more
//! with nothing new: the drivers add devices, and settle must wait for
//! them too, as udevadm settle does.

use std::io;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use uevd_control::Reply;
use uevd_queue::{Completion, WorkQueue};
use uevd_timeline::Journal;

use crate::control::Client;
use crate::job::Job;

/// A settle waiting in its own thread asks the main loop to read the
/// kernel socket once more: a driver that an event loaded makes the kernel
/// send new events (the devices it found) before that event ends, and
/// settle must wait for those too, as udevadm settle does.
pub(crate) struct Drain {
    pub(crate) wakeup: rustix::fd::OwnedFd,
    done: Mutex<u64>,
    cond: Condvar,
}

impl Drain {
    pub(crate) fn new() -> io::Result<Drain> {
        Ok(Drain {
            wakeup: rustix::event::eventfd(
                0,
                rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
            )?,
            done: Mutex::new(0),
            cond: Condvar::new(),
        })
    }

    /// Asks for a drain; true once one that started after the request
    /// has finished, false at the deadline.
    fn request_and_wait(&self, deadline: Instant) -> bool {
        let before = *self.done.lock().unwrap_or_else(|p| p.into_inner());
        let _ = rustix::io::write(&self.wakeup, &1u64.to_ne_bytes());
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        while *done == before {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            done = self
                .cond
                .wait_timeout(done, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }

    /// The main loop's side: called after it read the socket dry.
    pub(crate) fn finished(&self) {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.wakeup, &mut buf);
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.cond.notify_all();
    }
}

/// Answers `conn` once every event up to `last` is done and a drain of
/// the kernel socket found nothing new, or at the timeout.
pub(crate) fn reply_when_settled(
    conn: Client,
    queue: WorkQueue<Job>,
    journal: Journal,
    drain: Arc<Drain>,
    last: uevd_queue::EventId,
    timeout: Duration,
) {
    std::thread::spawn(move || {
        let deadline = Instant::now() + timeout;
        let mut last = last;
        // Until a wait ends with nothing new read from the kernel: what
        // the events loaded may have added devices.
        let reply = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match queue.settle(last, left) {
                Completion::TimedOut { pending } => break Reply::Timeout(pending),
                Completion::Done => {}
            }
            // Drivers the events asked for load on the loader's threads;
            // what they find arrives as new events, read by the drain.
            if let Some(loader) = uevd_kmod::shared_if_open() {
                if !loader.wait_background(deadline) {
                    break Reply::Timeout(queue.status().0 + loader.background_pending());
                }
            }
            if !drain.request_and_wait(deadline) {
                break Reply::Timeout(queue.status().0);
            }
            let now_last = queue.last_id();
            if now_last == last {
                break Reply::Ok(String::new());
            }
            last = now_last;
        };
        journal.mark("settle-done", reply.to_string());
        // Whoever settled may read the journal next.
        journal.flush();
        conn.reply(&reply);
    });
}
