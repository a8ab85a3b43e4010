//! BSD locks on whole disks: a tool that partitions or formats a disk
//! (`udevadm lock`, `uevd lock`, systemd-repart, mkfs, sfdisk) holds
//! `flock(LOCK_EX)` on its whole-disk node so that the device manager does
//! not probe the disk half-written. As udevd does (udev-worker.c), before
//! an event runs uevd takes `flock(LOCK_SH|LOCK_NB)` on the whole disk of
//! a disk or partition event, holds it while the event runs (so that a
//! tool taking the lock waits for uevd), and when someone else holds it
//! puts the event back: deferred, so that later events of the disk and
//! its partitions keep waiting behind it while every other device's
//! events flow.
//!
//! Which events: every action but `remove`, of block devices that are
//! disks or partitions, except device-mapper (`dm-*`), md (`md*`) and DRBD
//! (`drbd*`) devices, whose own tools lock otherwise (udevd's exceptions).
//! A node that cannot be opened (no medium, gone) is not waited for.
//!
//! The event is tried again when the disk's node is closed (inotify
//! `IN_CLOSE_WRITE | IN_CLOSE_NOWRITE`: the lock holder closing it is what
//! releases the lock), and every 200 ms in case that was missed; after 3
//! minutes it is skipped with a warning, as udevd skips it. A disk found
//! locked keeps one descriptor open in uevd until the lock is taken, so
//! that trying again opens and closes nothing (a close of uevd's own
//! would look like the holder's).

use crate::job::Job;
use crate::pipeline::Processor;
use crate::probe_ahead::ProbeAhead;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{flock, inotify, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uevd_queue::{EventId, Outcome, WorkQueue};
use uevd_uevent::{Action, Uevent};

/// How often a deferred event is tried again without a close to go by.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(200);
/// How long an event waits for a lock at most; then it is skipped.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(180);

pub(crate) struct DiskLocks {
    dev: PathBuf,
    /// Whole disks found locked: a descriptor kept open to try again with.
    locked: Mutex<HashMap<Box<[u8]>, Arc<OwnedFd>>>,
    /// Watches for a close of a locked disk's node.
    inotify: Option<OwnedFd>,
    watched: Mutex<HashMap<i32, Box<[u8]>>>,
    /// A disk's probe, started when its event starts.
    probe_ahead: ProbeAhead,
}

/// What trying to lock an event's whole disk gave.
enum Lock {
    /// Not a disk or partition event, or no node to lock.
    NotNeeded,
    /// Held (shared) until dropped.
    Held(Arc<OwnedFd>),
    /// Someone else holds it: the whole disk's node name.
    Busy(Box<[u8]>),
}

impl DiskLocks {
    /// Locks below `dev`; when the disk is unlocked, deferred events are
    /// tried again on `queue` (by a thread of its own).
    pub fn start(dev: PathBuf, queue: &WorkQueue<Job>) -> Arc<DiskLocks> {
        let inotify = inotify::init(inotify::CreateFlags::CLOEXEC)
            .map_err(|e| {
                log::warn!(
                    "no inotify for locked disks ({e}); trying them every {RETRY_INTERVAL:?}"
                )
            })
            .ok();
        let locks = Arc::new(DiskLocks {
            dev,
            locked: Mutex::new(HashMap::new()),
            inotify,
            watched: Mutex::new(HashMap::new()),
            probe_ahead: ProbeAhead::default(),
        });
        if locks.inotify.is_some() {
            let (l, q) = (locks.clone(), queue.clone());
            let spawned = std::thread::Builder::new()
                .name("disk-locks".into())
                .spawn(move || l.watch_closes(&q));
            if let Err(e) = spawned {
                log::warn!(
                    "no thread for locked disks ({e}); trying them every {RETRY_INTERVAL:?}"
                );
            }
        }
        locks
    }

    /// Runs an event on worker `worker` with its whole disk locked, or
    /// puts it back while someone else holds the lock.
    pub fn run(&self, p: &Processor, worker: usize, id: EventId, mut job: Job) -> Outcome<Job> {
        let lock = match whole_disk(p, &job.event) {
            Some(disk) => self.try_lock(disk),
            None => {
                if job.event.action() == Action::Remove {
                    self.forget(&job.event);
                }
                Lock::NotNeeded
            }
        };
        match lock {
            Lock::Busy(disk) => {
                let since = job.locked.as_ref().map_or_else(Instant::now, |l| l.1);
                if since.elapsed() < LOCK_TIMEOUT {
                    if job.locked.is_none() {
                        log::debug!(
                            "{}: {} is locked by another process; the event waits",
                            String::from_utf8_lossy(job.event.devpath()),
                            String::from_utf8_lossy(&disk)
                        );
                    }
                    self.watch(&disk);
                    job.locked = Some((disk, since));
                    return Outcome::Retry {
                        item: job,
                        after: RETRY_INTERVAL,
                    };
                }
                log::warn!(
                    "{}: {} has been locked by another process for more than {LOCK_TIMEOUT:?}; skipping the {} event",
                    String::from_utf8_lossy(job.event.devpath()),
                    String::from_utf8_lossy(&disk),
                    job.event.action().as_str()
                );
                p.failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Outcome::Done
            }
            held => {
                // Only under uevd's lock: no tool is writing the disk, and
                // device-mapper, md and DRBD devices (which may be
                // suspended) are not read ahead.
                let readied = match &held {
                    Lock::Held(fd) => self.probe_ahead.begin(&job.event, &self.dev, fd.as_fd()),
                    _ => None,
                };
                p.process(worker, id, job);
                drop(readied);
                drop(held);
                Outcome::Done
            }
        }
    }

    fn try_lock(&self, disk: Box<[u8]>) -> Lock {
        let kept = self.table().get(&disk).cloned();
        let fd = match kept {
            Some(fd) => fd,
            None => {
                let path = self.dev.join(std::ffi::OsStr::from_bytes(&disk));
                let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
                match rustix::fs::open(&path, flags | OFlags::NOFOLLOW, Mode::empty()) {
                    Ok(fd) => Arc::new(fd),
                    Err(e) => {
                        log::debug!("{}: {e}; not locked", path.display());
                        return Lock::NotNeeded;
                    }
                }
            }
        };
        match flock(&*fd, FlockOperation::NonBlockingLockShared) {
            Ok(()) => {
                // Taken: the descriptor closes when the last event using
                // it is done, which releases uevd's lock.
                self.table().remove(&disk);
                Lock::Held(fd)
            }
            Err(Errno::WOULDBLOCK) => {
                self.table().entry(disk.clone()).or_insert(fd);
                Lock::Busy(disk)
            }
            Err(e) => {
                log::debug!("flock {}: {e}; not locked", String::from_utf8_lossy(&disk));
                self.table().remove(&disk);
                Lock::NotNeeded
            }
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<Box<[u8]>, Arc<OwnedFd>>> {
        self.locked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A disk that went: its kept descriptor goes too.
    fn forget(&self, ev: &Uevent) {
        if let Some(name) = ev.devname() {
            let mut locked = self.table();
            if !locked.is_empty() {
                locked.remove(name);
            }
        }
    }

    fn watch(&self, disk: &[u8]) {
        let Some(fd) = &self.inotify else {
            return;
        };
        let path = self.dev.join(std::ffi::OsStr::from_bytes(disk));
        let flags = inotify::WatchFlags::CLOSE_WRITE
            | inotify::WatchFlags::CLOSE_NOWRITE
            | inotify::WatchFlags::ONESHOT
            | inotify::WatchFlags::DONT_FOLLOW;
        match inotify::add_watch(fd, &path, flags) {
            Ok(wd) => {
                let mut w = self.watched.lock().unwrap_or_else(|e| e.into_inner());
                w.insert(wd, disk.into());
            }
            Err(e) => log::debug!("inotify {}: {e}", path.display()),
        }
    }

    /// Tries again, at once, the events of each locked disk whose node is
    /// closed.
    fn watch_closes(&self, queue: &WorkQueue<Job>) {
        let Some(fd) = &self.inotify else {
            return;
        };
        let mut buf = [std::mem::MaybeUninit::uninit(); 4096];
        let mut reader = inotify::Reader::new(fd, &mut buf);
        loop {
            let ev = match reader.next() {
                Ok(ev) => ev,
                Err(Errno::INTR) => continue,
                Err(e) => {
                    log::warn!("watching locked disks: {e}; trying them every {RETRY_INTERVAL:?}");
                    return;
                }
            };
            let wd = ev.wd();
            let closed = ev
                .events()
                .intersects(inotify::ReadFlags::CLOSE_WRITE | inotify::ReadFlags::CLOSE_NOWRITE);
            let disk = {
                let mut w = self.watched.lock().unwrap_or_else(|e| e.into_inner());
                if closed || ev.events().contains(inotify::ReadFlags::IGNORED) {
                    // One-shot: the watch is gone either way.
                    w.remove(&wd)
                } else {
                    None
                }
            };
            if let (true, Some(disk)) = (closed, disk) {
                queue.retry_where(|job| job.locked.as_ref().is_some_and(|l| l.0 == disk));
            }
        }
    }
}

/// The node name of the whole disk an event should lock, if any.
fn whole_disk(p: &Processor, ev: &Uevent) -> Option<Box<[u8]>> {
    if ev.action() == Action::Remove || ev.subsystem() != Some(b"block") {
        return None;
    }
    let sysname = ev.sysname();
    if [&b"dm-"[..], b"md", b"drbd"]
        .iter()
        .any(|p| sysname.starts_with(p))
    {
        return None;
    }
    match ev.devtype() {
        Some(b"disk") => ev.devname().map(Into::into),
        Some(b"partition") => {
            let disk = p.sysfs.parent_of(ev.devpath())?;
            disk.devname().map(Into::into)
        }
        _ => None,
    }
}
