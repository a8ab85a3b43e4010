//! The main loop: one thread reads the kernel, the control socket,
//! signals and node watches; a pool of workers runs the per-event
//! pipeline. Nothing here waits on an event's work.

use crate::config::Config;
use crate::control::{Client, Inbox, Incoming};
use crate::job::{Job, Source};
use crate::modules::record_module_loads;
use crate::pipeline::Processor;
use crate::rules::{apply_static_nodes, load_rules};
use crate::settle::{reply_when_settled, Drain};
use crate::signals::Signals;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use std::io;
use std::sync::Arc;
use std::time::Instant;
use uevd_control::{Listener, Reply, Request};
use uevd_db::{Database, QueueFlag};
use uevd_netlink::{Broadcaster, RateLimit, Received, UeventSocket};
use uevd_node::DevDir;
use uevd_queue::{EventKeys, WorkQueue};
use uevd_sysfs::Sysfs;
use uevd_timeline::{Journal, Tick};
use uevd_uevent::Action;

pub(crate) struct Daemon {
    control_path: std::path::PathBuf,
    pub(crate) sysfs: Sysfs,
    pub(crate) queue: WorkQueue<Job>,
    pub(crate) processor: Arc<Processor>,
    kernel: UeventSocket,
    started: Instant,
    overflows: u64,
    rejected: u64,
    rejected_log: RateLimit,
    rules_config: uevd_rules::Config,
    /// When the rules files were last compared with what is loaded.
    rules_checked: Tick,
    drain: Arc<Drain>,
    /// Control requests, read off the main loop.
    inbox: Inbox,
    /// udev's control socket, for udevadm.
    udev_control: Option<uevd_control::udev::Listener>,
    /// The varlink socket, for udevadm of systemd 258 and later.
    varlink: Option<uevd_control::varlink::Listener>,
    /// The log level the daemon started with (what `revert` returns to).
    log_level: uevd_control::Level,
    /// What the kernel command line's `root=` names: its events go first.
    pub(crate) root: Option<crate::RootDevice>,
    /// Devices whose `add` was restored from the daemon before: coldplug
    /// leaves them to it.
    pub(crate) restored_adds: crate::DevpathSet,
    /// The newest kernel SEQNUM restored: the kernel never sends it again,
    /// so a copy of it (or of an older one) is not processed twice.
    pub(crate) restored_seqnum: Option<u64>,
    /// Events restored from the daemon before.
    pub(crate) restored: u64,
    /// The queue's id of the last of them.
    pub(crate) restored_through: uevd_queue::EventId,
    /// Kernel events dropped as copies of restored ones, or of devices
    /// the read-mode coldplug queued from sysfs.
    duplicates: u64,
    /// What the read-mode coldplug queued, until the kernel socket is
    /// next read to the end.
    pub(crate) walked: Option<crate::walked::Walked>,
    /// Who asked to exit: answered once the queue is saved, so that an
    /// initramfs moves /run only when the daemon is done with it.
    exit_waiters: Vec<Client>,
}

/// How often changed rules files are looked for, at most.
const RULES_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3);

/// Has the C library keep what the daemon frees for its next events.
///
/// Every event allocates and frees a few dozen small blocks on its
/// worker's arena. By default glibc hands an arena's free top back to the
/// kernel once it exceeds 128 KiB (`madvise`), and the next events fault
/// the same pages in again, zeroed; and it sends blocks of 128 KiB and
/// more to `mmap` and `munmap` each time once the threshold stops
/// adapting. Each of those calls changes the process's page tables, which
/// every other thread's CPU must then flush. A daemon's memory peaks with
/// the coldplug and stays about there, so up to 32 MiB of free top stay
/// in place, and only blocks of 4 MiB and more are mapped apart.
fn keep_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets the allocator's parameters; it is called
    // before the daemon starts its other threads.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 4 << 20);
    }
}

/// Runs the device manager until asked to exit (control `exit`, SIGTERM,
/// SIGINT); running events are finished, and those not started yet are
/// saved for the next daemon, which restores them before anything else
/// (`saved.rs`).
pub fn run(config: Config) -> io::Result<()> {
    crate::set_log_level(config.log_level);
    keep_freed_memory();
    let opts = &config;
    // Bind everything before detaching, so that no event sent after the
    // parent returns is lost.
    // Sockets a service manager holds for the device manager come first.
    let passed = crate::activation::take();
    let kernel = match passed.kernel {
        Some(k) => k,
        None => UeventSocket::kernel(opts.receive_buffer).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot listen to kernel uevents: {e}"))
        })?,
    };
    let granted = kernel.receive_buffer().unwrap_or(0);
    let control_path = config.control();
    let control = Listener::bind(&control_path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", control_path.display())))?;
    // Files and nodes get exactly the modes uevd asks for.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
    let udev_dir = config.udev_dir();
    let db = Database::open(&udev_dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", udev_dir.display())))?;
    // libudev takes the existence of /run/udev/control to mean that a
    // device manager runs, and udevadm talks to it there.
    let udev_control = match passed.udev_control {
        Some(l) => Some(l),
        None => crate::udev_control::bind(&udev_dir.join("control")),
    };
    let varlink = crate::varlink::bind(&udev_dir.join(uevd_control::varlink::SOCKET_NAME));
    let dev = DevDir::open(&config.dev)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", config.dev.display())))?;
    let log_target = match &opts.log_file {
        Some(f) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(f)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", f.display())))?,
        ),
        None if opts.detach => std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/kmsg")
            .ok(),
        None => None,
    };
    let ready = if opts.detach { Some(detach()?) } else { None };
    if let Some(f) = &log_target {
        let _ = rustix::stdio::dup2_stderr(f);
    }
    // Before any thread starts, so that every thread inherits the mask.
    let signals = Signals::block()?;
    let drain = Arc::new(Drain::new()?);
    let inbox = Inbox::new()?;

    let timeline = &opts.timeline;
    let (journal, journal_writer) = match timeline {
        Some(p) => match Journal::create_timed(p, opts.timeline_max, opts.timeline_steps) {
            Ok((j, w)) => {
                if j.steps_every() > 1 {
                    log::info!(
                        "timeline: steps timed for one event in {} (a clock read is a system call here)",
                        j.steps_every()
                    );
                }
                (j, Some(w))
            }
            Err(e) => {
                log::warn!("no timeline journal: {}: {e}", p.display());
                (Journal::disabled(), None)
            }
        },
        None => (Journal::disabled(), None),
    };
    // Nothing after this fails. Every socket is bound: from now on an
    // event waits in the kernel socket, and a request in the control
    // socket's backlog, until the rules are loaded and they are read. So
    // whoever detached the daemon (an initramfs, a boot script) goes on
    // now, and its trigger walks sysfs while the rules load rather than
    // after. (A service manager hears READY=1 only once events are
    // processed, below.)
    if let Some(fd) = ready {
        signal_ready(fd);
        journal.mark("detached", "");
    }
    let broadcaster = if !opts.broadcast {
        None
    } else {
        match Broadcaster::new() {
            Ok(b) => Some(b),
            Err(e) => {
                log::warn!("cannot announce processed events: {e}");
                None
            }
        }
    };
    record_module_loads(&journal);
    let mut sysfs = Sysfs::new(&config.sys).with_parent_cache();
    if config.sys == std::path::Path::new("/sys") {
        // The kernel's own mount, of this network namespace.
        sysfs = sysfs.with_link_query(uevd_link_config::kernel::link_message);
    }
    let (records, tags) = crate::reconcile::remove_stale(&db, &sysfs);
    if records + tags > 0 {
        log::info!("removed {records} records and {tags} tag entries and link claims of devices that went while no manager ran");
    }
    let devtmpfs = dev.devtmpfs();
    let rules_config = config.rules.clone();
    let rules = load_rules(&rules_config);
    journal.mark("rules-loaded", rules.line_count().to_string());
    apply_static_nodes(&dev, &rules);
    let processor = Arc::new(Processor::new(
        sysfs.clone(),
        dev,
        db,
        broadcaster,
        journal.clone(),
        rules,
    ));
    processor.replay.set_capacity(opts.replay_events);
    let flag = QueueFlag::new(&udev_dir);
    flag.set(false);
    let queue: WorkQueue<Job> = WorkQueue::new(move |busy| flag.set(busy));
    let workers = opts.workers.unwrap_or_else(default_workers);
    let p = processor.clone();
    // Events of a whole disk someone else holds locked wait (locks.rs).
    let locks = crate::locks::DiskLocks::start(config.dev.clone(), &queue);
    let handles = queue.spawn_workers(workers, move |w: usize, id, job: Job| {
        locks.run(&p, w, id, job)
    });
    if let Some(root) = &config.root {
        log::info!("root device {root:?}: the events that may be for it go first");
    }
    log::info!(
        "listening: {workers} workers, receive buffer {granted} bytes, {} manages nodes",
        if devtmpfs { "devtmpfs" } else { "uevd" }
    );

    let mut d = Daemon {
        control_path,
        sysfs,
        queue: queue.clone(),
        processor,
        kernel,
        started: Instant::now(),
        overflows: 0,
        rejected: 0,
        rejected_log: RateLimit::new(10, std::time::Duration::from_secs(1)),
        rules_config,
        rules_checked: Tick::now(),
        drain,
        inbox,
        udev_control,
        varlink,
        log_level: config.log_level,
        root: config.root.clone(),
        restored_adds: Default::default(),
        restored_seqnum: None,
        restored: 0,
        restored_through: 0,
        duplicates: 0,
        walked: None,
        exit_waiters: Vec::new(),
    };
    crate::notify::ready();
    let saved_path = crate::saved::path(&config.run);
    d.restore(crate::saved::take(&saved_path));
    if let Some(how) = opts.coldplug {
        d.coldplug(how);
    }
    let result = d.serve(&control, &signals);
    // Asked to exit, udevd closes its control socket at once; a udevadm
    // that connects while the last events finish must not hang unanswered.
    d.udev_control = None;
    d.varlink = None;
    // What the kernel sent before the request is queued, then nothing more
    // starts: running events finish, the rest is handed on.
    if let Err(e) = d.drain_kernel() {
        log::warn!("reading uevents: {e}");
    }
    let running = queue.status().1;
    let mut saved = queue.shutdown_unstarted();
    log::info!(
        "exiting once {running} running events are done; {} not started are saved",
        saved.len()
    );
    for h in handles {
        let _ = h.join();
    }
    // What the last events made the kernel send (devices a driver found).
    saved.extend(d.read_remaining());
    match crate::saved::save(&saved_path, &saved) {
        Ok(()) if !saved.is_empty() => {
            journal.mark("saved", saved.len().to_string());
            log::info!("saved {} events to {}", saved.len(), saved_path.display());
        }
        Ok(()) => {}
        Err(e) => log::error!(
            "{}: {e}: {} queued events are lost",
            saved_path.display(),
            saved.len()
        ),
    }
    for waiter in std::mem::take(&mut d.exit_waiters) {
        waiter.reply(&Reply::Ok(String::new()));
    }
    journal.mark("exit", "");
    drop(d);
    drop(journal);
    if let Some(w) = journal_writer {
        if let Err(e) = w.finish() {
            log::warn!("timeline journal: {e}");
        }
    }
    result
}

/// Events run at once unless told otherwise: two per CPU, at least four.
/// More workers would hide more of a disk's latency behind other events,
/// but under emulation and on small CPUs they cost more than they hide:
/// with twelve workers on two CPUs (udevd's default) the lab's 1,000-disk
/// coldplug took more CPU and more time than with four, every worker
/// contending for the same CPUs and locks. Module loads, which sleep,
/// have threads of their own.
fn default_workers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus * 2).max(4)
}

/// Forks; the parent waits until the child says it is ready, then exits.
fn detach() -> io::Result<rustix::fd::OwnedFd> {
    let (read, write) = rustix::pipe::pipe()?;
    // SAFETY: no thread has been started yet, so the child is a complete
    // copy of a single-threaded process.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            drop(read);
            let _ = rustix::process::setsid();
            // Let go of the caller's terminal and pipes: whoever started us
            // may be waiting for them to close.
            if let Ok(null) = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")
            {
                let _ = rustix::stdio::dup2_stdin(&null);
                let _ = rustix::stdio::dup2_stdout(&null);
                let _ = rustix::stdio::dup2_stderr(&null);
            }
            Ok(write)
        }
        _ => {
            drop(write);
            let mut byte = [0u8; 1];
            let ok = matches!(rustix::io::read(&read, &mut byte), Ok(1));
            std::process::exit(if ok { 0 } else { 1 });
        }
    }
}

fn signal_ready(fd: rustix::fd::OwnedFd) {
    let _ = rustix::io::write(&fd, b"1");
}

impl Daemon {
    fn serve(&mut self, control: &Listener, signals: &Signals) -> io::Result<()> {
        loop {
            // On the stack: a wakeup costs no allocation.
            let processor = self.processor.clone();
            let drain = self.drain.clone();
            let watch = processor.watches.as_ref().map(|w| w.fd());
            let mut fds = [
                PollFd::new(&self.kernel, PollFlags::IN),
                PollFd::new(control.as_listener(), PollFlags::IN),
                PollFd::new(&signals.fd, PollFlags::IN),
                PollFd::new(&drain.wakeup, PollFlags::IN),
                PollFd::from_borrowed_fd(self.inbox.fd(), PollFlags::IN),
                match &watch {
                    Some(fd) => PollFd::from_borrowed_fd(*fd, PollFlags::IN),
                    // A descriptor asking for nothing: its result is ignored.
                    None => PollFd::new(&drain.wakeup, PollFlags::empty()),
                },
                match &self.udev_control {
                    Some(l) => PollFd::new(l, PollFlags::IN),
                    None => PollFd::new(&drain.wakeup, PollFlags::empty()),
                },
                match &self.varlink {
                    Some(l) => PollFd::new(l, PollFlags::IN),
                    None => PollFd::new(&drain.wakeup, PollFlags::empty()),
                },
            ];
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let ready = |i: usize| !fds[i].revents().is_empty();
            let (kernel_ready, control_ready, signalled) = (ready(0), ready(1), ready(2));
            let (drain_asked, requests) = (ready(3), ready(4));
            let written = watch.is_some() && ready(5);
            let udev_asked = self.udev_control.is_some() && ready(6);
            let varlink_asked = self.varlink.is_some() && ready(7);
            if drain_asked {
                self.drain_kernel()?;
                drain.finished();
            }
            if written {
                self.request_change_after_write();
            }
            if kernel_ready {
                self.drain_kernel()?;
            }
            if control_ready {
                self.inbox.accept_all(control);
            }
            if let (true, Some(l)) = (udev_asked, &self.udev_control) {
                crate::udev_control::accept_all(&self.inbox, l, &self.queue);
            }
            if let (true, Some(l)) = (varlink_asked, &self.varlink) {
                crate::varlink::accept_all(&self.inbox, l, self.log_level);
            }
            if requests {
                for incoming in self.inbox.take() {
                    if self.handle_control(incoming)? {
                        return Ok(());
                    }
                }
            }
            if signalled {
                while let Some(sig) = signals.read() {
                    if sig == libc::SIGHUP as u32 {
                        log::info!("received SIGHUP; reloading");
                        self.reload();
                        continue;
                    }
                    log::info!("received signal {sig}");
                    return Ok(());
                }
            }
        }
    }

    /// Reads what the kernel has queued for us, up to an empty socket or a
    /// report of lost events (true).
    fn read_batch(&mut self) -> io::Result<(Vec<(EventKeys, Job)>, bool)> {
        // Most reads of the socket dry find an event or two; a storm's
        // batches grow from here.
        let mut batch = Vec::with_capacity(8);
        loop {
            match self.kernel.recv()? {
                Received::Event(ev) => {
                    if let (Some(max), Some(n)) = (self.restored_seqnum, ev.seqnum()) {
                        if n <= max {
                            self.duplicates += 1;
                            log::debug!("SEQNUM {n} was restored already; not processed twice");
                            continue;
                        }
                    }
                    let copy = self
                        .walked
                        .as_mut()
                        .is_some_and(|w| w.check(&ev) == crate::walked::Verdict::Copy);
                    if copy {
                        self.duplicates += 1;
                        log::debug!(
                            "{}: queued by the coldplug already; its add not processed twice",
                            String::from_utf8_lossy(ev.devpath())
                        );
                        continue;
                    }
                    let job = Job::new(ev, Source::Kernel);
                    batch.push((job.keys(self.root.as_ref()), job));
                }
                Received::Rejected(why) => {
                    self.rejected += 1;
                    // Whoever forges events can send many: every one is
                    // counted, not every one is logged.
                    match self.rejected_log.check(Instant::now()) {
                        Some(0) => log::warn!("dropped a uevent: {why}"),
                        Some(held) => log::warn!(
                            "dropped a uevent: {why} ({held} more dropped and not shown)"
                        ),
                        None => {}
                    }
                }
                Received::Overflow => return Ok((batch, true)),
                Received::WouldBlock => return Ok((batch, false)),
            }
        }
    }

    /// What is left in the kernel socket, unqueued, for a daemon about to
    /// exit.
    fn read_remaining(&mut self) -> Vec<Job> {
        let mut jobs = Vec::new();
        loop {
            match self.read_batch() {
                Ok((batch, overflowed)) => {
                    jobs.extend(batch.into_iter().map(|(_, j)| j));
                    if !overflowed {
                        return jobs;
                    }
                    log::warn!("kernel uevents were lost while exiting");
                }
                Err(e) => {
                    log::warn!("reading uevents: {e}");
                    return jobs;
                }
            }
        }
    }

    /// Queues everything the kernel has sent; after lost events, rescans
    /// once the socket is empty, so the rescan sees the newest state.
    /// Asks the kernel for a change event for each watched device whose
    /// node was closed after a write, and for the partitions of a written
    /// disk: what they hold may be different now. A written disk's
    /// partitions are first brought in line with its table, only those
    /// that changed (partitions.rs); the kernel announces those itself.
    fn request_change_after_write(&mut self) {
        let Some(w) = &self.processor.watches else {
            return;
        };
        for devpath in w.written() {
            let dir = self.sysfs.syspath(&devpath);
            let mut targets = vec![dir.clone()];
            match self.sync_partitions(&devpath, &dir) {
                Some(unchanged) => targets.extend(unchanged),
                None => targets.extend(
                    crate::partitions::kernel_partitions(&dir)
                        .unwrap_or_default()
                        .into_iter()
                        .map(|p| p.dir),
                ),
            }
            for t in targets {
                if let Err(e) = uevd_sysfs::request_uevent(&t, Action::Change, None, &[]) {
                    log::debug!("{}: {e}", t.display());
                }
            }
        }
    }

    /// For a written disk that can have partitions: its partitions brought
    /// in line with its table, and those that stay as they were; None when
    /// that was not done (not such a disk, locked by someone, unreadable).
    fn sync_partitions(
        &self,
        devpath: &[u8],
        dir: &std::path::Path,
    ) -> Option<Vec<std::path::PathBuf>> {
        if !crate::partitions::partitionable(dir) {
            return None;
        }
        let event = self.sysfs.read_event(Action::Change, devpath).ok()?;
        let node =
            self.processor.dev.path().join(
                <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(event.devname()?),
            );
        match crate::partitions::sync(&node, dir) {
            Ok(synced) => {
                for op in &synced.done {
                    log::info!("{}: partition table: {op:?}", node.display());
                }
                for (op, e) in &synced.refused {
                    log::warn!("{}: partition table: {op:?} refused: {e}", node.display());
                }
                Some(synced.unchanged.into_iter().map(|p| p.dir).collect())
            }
            Err(e) => {
                log::debug!("{}: partitions not re-read: {e}", node.display());
                None
            }
        }
    }

    /// Reloads the rules when a rules file changed, looking at most every
    /// few seconds: a storm of events must not cost a stat per file each.
    fn reload_if_changed(&mut self) {
        if self.rules_checked.elapsed() < RULES_CHECK_INTERVAL {
            return;
        }
        self.rules_checked = Tick::now();
        if self.processor.rules().changed() {
            log::info!("rules files changed; reloading");
            self.reload();
        }
    }

    /// Loads the rules again; returns what was loaded. A service manager
    /// is told when the reload starts and when it is done, as
    /// `Type=notify-reload` wants (udevd does the same for every reload,
    /// asked for or not).
    fn reload(&mut self) -> String {
        crate::notify::reloading();
        let rules = load_rules(&self.rules_config);
        let summary = format!(
            "{} rules files, {} rules",
            rules.file_count(),
            rules.line_count()
        );
        self.processor.set_rules(rules);
        self.rules_checked = Tick::now();
        crate::notify::ready();
        summary
    }

    /// Queues events. What is remembered of their devices (as parents of
    /// others) is forgotten now: the kernel has changed them already.
    pub(crate) fn submit(&self, batch: Vec<(EventKeys, Job)>) {
        crate::modules::load_ahead(
            || self.processor.rules(),
            batch.iter().map(|(_, job)| &job.event),
        );
        for (_, job) in &batch {
            self.sysfs.event_seen(&job.event);
            if let Some(old) = job.event.devpath_old() {
                self.sysfs.forget(old);
            }
        }
        self.submit_read(batch);
    }

    /// Queues the `add`s the coldplug read from sysfs, drivers asked for
    /// ahead. A read is no news of a change: what is remembered of their
    /// devices, read by the same walk or since, stays.
    pub(crate) fn submit_read(&self, mut batch: Vec<(EventKeys, Job)>) {
        crate::job::stamp_arrival(
            self.processor.journal.enabled(),
            batch.iter_mut().map(|(_, j)| j),
        );
        self.queue.submit(batch);
    }

    pub(crate) fn drain_kernel(&mut self) -> io::Result<()> {
        self.reload_if_changed();
        let mut lost = false;
        loop {
            let (batch, overflowed) = self.read_batch()?;
            self.submit(batch);
            if !overflowed {
                break;
            }
            if !lost {
                log::warn!("kernel uevents were lost (receive buffer overrun); rescanning sysfs");
                self.processor
                    .journal
                    .mark("overflow", "receive buffer overrun");
            }
            lost = true;
            self.overflows += 1;
        }
        // Read to the end: whatever the coldplug's walk could have a copy
        // of is behind us (walked.rs).
        self.walked = None;
        if lost {
            self.rescan();
        }
        Ok(())
    }

    /// Serves one control request; true when asked to exit.
    fn handle_control(&mut self, incoming: Incoming) -> io::Result<bool> {
        let (conn, request) = incoming;
        let request = match request {
            Ok(Some(r)) => r,
            // Someone checking whether a daemon listens.
            Ok(None) => return Ok(false),
            Err(why) => {
                log::warn!("control request refused: {why}");
                conn.reply(&Reply::Error(why));
                return Ok(false);
            }
        };
        log::debug!("control: {request}");
        match request {
            Request::Ping => conn.reply(&Reply::Ok(String::new())),
            Request::Settle(timeout) => {
                // Everything the kernel sent before this request is in our
                // socket buffer now: queue it, then wait for all of it.
                self.drain_kernel()?;
                let last = self.queue.last_id();
                self.processor
                    .journal
                    .mark("settle-request", last.to_string());
                reply_when_settled(
                    conn,
                    self.queue.clone(),
                    self.processor.journal.clone(),
                    self.drain.clone(),
                    last,
                    timeout,
                );
            }
            Request::Reload => {
                let summary = self.reload();
                conn.reply(&Reply::Ok(summary))
            }
            Request::Revert => {
                let dropped = self.processor.clear_globals();
                let effective = self.queue.set_limit(0);
                crate::set_log_level(self.log_level);
                log::info!(
                    "control: reverted: {}at most {effective} events at once, log level {}",
                    if dropped { "properties dropped, " } else { "" },
                    self.log_level.as_str()
                );
                conn.reply(&Reply::Ok(String::new()));
            }
            Request::Exit => {
                self.exit_waiters.push(conn);
                return Ok(true);
            }
            Request::LogLevel(level) => {
                crate::set_log_level(level);
                conn.reply(&Reply::Ok(String::new()));
            }
            Request::StopExecQueue => {
                log::info!("control: events are queued but not started until told to start");
                self.queue.set_paused(true);
                conn.reply(&Reply::Ok(String::new()));
            }
            Request::StartExecQueue => {
                log::info!("control: starting queued events again");
                self.queue.set_paused(false);
                conn.reply(&Reply::Ok(String::new()));
            }
            Request::ChildrenMax(n) => {
                let effective = self.queue.set_limit(n);
                log::info!("control: children max {n}: at most {effective} events run at once");
                conn.reply(&Reply::Ok(effective.to_string()));
            }
            Request::Property(key, value) => {
                log::info!("control: property {key}={value} for every event");
                self.processor.set_global(key.as_bytes(), value.as_bytes());
                conn.reply(&Reply::Ok(String::new()));
            }
            Request::Replay(since) => {
                let (messages, gone, last) = self.processor.replay.since(since);
                match conn {
                    // Written off the main loop: a client may read slowly.
                    Client::Uevd(c) => {
                        std::thread::spawn(move || c.reply_replay(gone, last, &messages));
                    }
                    other => other.reply(&Reply::Error("replay is uevd's own request".into())),
                }
            }
            Request::Status => {
                let (pending, running) = self.queue.status();
                let p = &self.processor;
                conn.reply(&Reply::Ok(format!(
                    "pending={pending} running={running} children_max={} paused={} loading={} processed={} failed={} rejected={} overflows={} restored={} duplicates={} known={} links={} rules={} uptime_ms={} control={}",
                    self.queue.limit(),
                    u8::from(self.queue.paused()),
                    uevd_kmod::shared_if_open().map_or(0, |l| l.background_pending()),
                    p.processed.load(std::sync::atomic::Ordering::Relaxed),
                    p.failed.load(std::sync::atomic::Ordering::Relaxed),
                    self.rejected,
                    self.overflows,
                    self.restored,
                    self.duplicates,
                    p.known_count(),
                    p.claimed_links(),
                    p.rules().line_count(),
                    self.started.elapsed().as_millis(),
                    self.control_path.display(),
                )));
            }
        }
        Ok(false)
    }
}
