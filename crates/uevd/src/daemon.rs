//! The daemon: one thread reads the kernel and the control socket, a pool
//! of workers processes events.

use crate::event::{Job, Known, Processor, Source};
use crate::Roots;
use clap::ValueEnum;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use std::collections::HashSet;
use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use uevd_control::{Listener, Reply, Request};
use uevd_db::{Database, QueueFlag};
use uevd_netlink::{Broadcaster, Received, UeventSocket, DEFAULT_RECEIVE_BUFFER};
use uevd_node::DevDir;
use uevd_queue::{Completion, EventKeys, WorkQueue};
use uevd_sysfs::{walk_devices, walk_subsystems, Sysfs};
use uevd_timeline::Journal;
use uevd_uevent::Action;

/// How `--coldplug` learns about existing devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Coldplug {
    /// Read each device's `uevent` file (what `mdev -s` does): the kernel
    /// sends nothing.
    Read,
    /// Write `add` into each `uevent` file and process what the kernel
    /// sends back (what `udevadm trigger` does).
    Trigger,
}

#[derive(clap::Args, Debug)]
pub struct Options {
    /// Detach once ready to receive events.
    #[arg(long)]
    daemon: bool,
    /// Process every existing device at start, as boot needs.
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "read", value_name = "HOW")]
    coldplug: Option<Coldplug>,
    /// Worker threads (default: 2 per CPU, at least 4).
    #[arg(long, alias = "children-max", value_name = "N")]
    workers: Option<usize>,
    /// Netlink receive buffer in bytes.
    #[arg(long, default_value_t = DEFAULT_RECEIVE_BUFFER, value_name = "BYTES")]
    receive_buffer: usize,
    /// Timeline journal (default: RUN/uevd/timeline.jsonl); "none" disables.
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
    /// Largest timeline journal, in bytes.
    #[arg(long, default_value_t = 256 << 20, value_name = "BYTES")]
    timeline_max: u64,
    /// Append log messages to this file instead of stderr (with --daemon
    /// the default is the kernel log, /dev/kmsg).
    #[arg(long, value_name = "FILE")]
    log_file: Option<PathBuf>,
    /// error, warning, info or debug.
    #[arg(long, default_value = "info", value_parser = crate::parse_level)]
    log_level: uevd_control::Level,
    /// Do not announce processed events to libudev clients (netlink group 2).
    #[arg(long)]
    no_broadcast: bool,
}

struct Daemon {
    roots: Roots,
    sysfs: Sysfs,
    queue: WorkQueue<Job>,
    processor: Arc<Processor>,
    kernel: UeventSocket,
    started: Instant,
    overflows: u64,
    rejected: u64,
    rules_config: uevd_rules::Config,
    /// When the rules files were last compared with what is loaded.
    rules_checked: Instant,
    drain: Arc<Drain>,
}

/// A settle waiting in its own thread asks the main loop to read the
/// kernel socket once more: a driver that an event loaded makes the kernel
/// send new events (the devices it found) before that event ends, and
/// settle must wait for those too, as udevadm settle does.
struct Drain {
    wakeup: rustix::fd::OwnedFd,
    done: std::sync::Mutex<u64>,
    cond: std::sync::Condvar,
}

impl Drain {
    fn new() -> io::Result<Drain> {
        Ok(Drain {
            wakeup: rustix::event::eventfd(
                0,
                rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
            )?,
            done: std::sync::Mutex::new(0),
            cond: std::sync::Condvar::new(),
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
    fn finished(&self) {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.wakeup, &mut buf);
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.cond.notify_all();
    }
}

/// How often changed rules files are looked for, at most.
const RULES_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3);

/// Every module the `kmod` builtin loads goes to the timeline. The loader
/// is opened now (the index files are only mapped) so that the first
/// driver of the boot does not wait for it.
fn record_module_loads(journal: &Journal) {
    match uevd_kmod::shared(Path::new("/"), None) {
        Ok(loader) => {
            let journal = journal.clone();
            loader.set_observer(Box::new(move |r| {
                if journal.enabled() {
                    journal.record(uevd_timeline::Entry::Module(uevd_timeline::ModuleRecord {
                        name: r.module.to_string(),
                        start: r.start_ns,
                        end: r.end_ns,
                        result: uevd_builtins::kmod::describe(r.result),
                    }));
                }
                match r.result {
                    Err(e) if e.is_not_applicable() => {
                        log::debug!("module {}: {e}", r.module)
                    }
                    Err(e) => log::warn!("loading module {}: {e}", r.module),
                    Ok(_) => {}
                }
            }));
        }
        Err(e) => log::info!("no kernel modules to load: {e}"),
    }
}

/// Loads the rules, logging every problem with its place.
fn load_rules(config: &uevd_rules::Config) -> uevd_rules::Rules {
    let (rules, diagnostics) = uevd_rules::Rules::load(config);
    for d in &diagnostics {
        let place = format!("{}:{}:{}", d.file, d.at.line, d.at.column);
        match d.severity {
            uevd_rules::Severity::Error => log::error!("{place}: {}", d.message),
            uevd_rules::Severity::Warning => log::warn!("{place}: {}", d.message),
        }
    }
    log::info!(
        "{} rules from {} files",
        rules.line_count(),
        rules.file_count()
    );
    rules
}

/// Gives the nodes `OPTIONS+="static_node=..."` names their owner, group
/// and mode before any event: they exist (devtmpfs, or made by hand)
/// without a device behind them until first opened.
fn apply_static_nodes(dev: &DevDir, rules: &uevd_rules::Rules) {
    for node in rules.static_nodes() {
        if let Err(e) = dev.apply_static(
            &node.name,
            uevd_node::Permissions {
                uid: node.uid,
                gid: node.gid,
                mode: node.mode,
            },
        ) {
            log::debug!("static node {}: {e}", String::from_utf8_lossy(&node.name));
        }
    }
}

pub fn run(roots: &Roots, opts: Options) -> io::Result<ExitCode> {
    crate::log::set_level(opts.log_level);
    // Bind everything before detaching, so that no event sent after the
    // parent returns is lost.
    let kernel = UeventSocket::kernel(opts.receive_buffer)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen to kernel uevents: {e}")))?;
    let granted = kernel.receive_buffer().unwrap_or(0);
    let control = Listener::bind(&roots.control())
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", roots.control().display())))?;
    // Files and nodes get exactly the modes uevd asks for.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
    let udev_dir = roots.udev_dir();
    let db = Database::open(&udev_dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", udev_dir.display())))?;
    // libudev takes the existence of /run/udev/control to mean that a
    // device manager runs.
    let udev_control = bind_udev_control(&udev_dir.join("control"));
    let dev = DevDir::open(&roots.dev)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", roots.dev.display())))?;
    let log_target = match &opts.log_file {
        Some(f) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(f)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", f.display())))?,
        ),
        None if opts.daemon => std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/kmsg")
            .ok(),
        None => None,
    };
    let ready = if opts.daemon { Some(detach()?) } else { None };
    if let Some(f) = &log_target {
        let _ = rustix::stdio::dup2_stderr(f);
    }
    // Before any thread starts, so that every thread inherits the mask.
    let signals = Signals::block()?;

    let timeline = match &opts.timeline {
        Some(p) if p.as_os_str() == "none" => None,
        Some(p) => Some(p.clone()),
        None => Some(roots.uevd_dir().join("timeline.jsonl")),
    };
    let (journal, journal_writer) = match &timeline {
        Some(p) => match Journal::create(p, opts.timeline_max) {
            Ok((j, w)) => (j, Some(w)),
            Err(e) => {
                log::warn!("no timeline journal: {}: {e}", p.display());
                (Journal::disabled(), None)
            }
        },
        None => (Journal::disabled(), None),
    };
    let broadcaster = if opts.no_broadcast {
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
    let sysfs = Sysfs::new(&roots.sys);
    let devtmpfs = dev.devtmpfs();
    let rules_config = roots.rules_config();
    let rules = load_rules(&rules_config);
    apply_static_nodes(&dev, &rules);
    let processor = Arc::new(Processor::new(
        sysfs.clone(),
        dev,
        db,
        broadcaster,
        journal.clone(),
        rules,
    ));
    let flag = QueueFlag::new(&udev_dir);
    flag.set(false);
    let queue: WorkQueue<Job> = WorkQueue::new(move |busy| flag.set(busy));
    let workers = opts.workers.unwrap_or_else(default_workers);
    let p = processor.clone();
    let handles = queue.spawn_workers(workers, move |w: usize, id, job: Job| p.process(w, id, job));
    log::info!(
        "listening: {workers} workers, receive buffer {granted} bytes, {} manages nodes",
        if devtmpfs { "devtmpfs" } else { "uevd" }
    );

    let mut d = Daemon {
        roots: roots.clone(),
        sysfs,
        queue: queue.clone(),
        processor,
        kernel,
        started: Instant::now(),
        overflows: 0,
        rejected: 0,
        rules_config,
        rules_checked: Instant::now(),
        drain: Arc::new(Drain::new()?),
    };
    if let Some(fd) = ready {
        signal_ready(fd);
    }
    if let Some(how) = opts.coldplug {
        d.coldplug(how);
    }
    let result = d.serve(&control, &signals);
    log::info!("exiting once {} queued events are done", queue.status().0);
    queue.shutdown();
    for h in handles {
        let _ = h.join();
    }
    journal.mark("exit", "");
    drop(d);
    drop(journal);
    if let Some(w) = journal_writer {
        if let Err(e) = w.finish() {
            log::warn!("timeline journal: {e}");
        }
    }
    if udev_control.is_some() {
        let _ = std::fs::remove_file(udev_dir.join("control"));
    }
    result.map(|()| ExitCode::SUCCESS)
}

fn default_workers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus * 2).max(4)
}

fn bind_udev_control(path: &Path) -> Option<UnixDatagram> {
    let _ = std::fs::remove_file(path);
    match UnixDatagram::bind(path) {
        Ok(s) => Some(s),
        Err(e) => {
            log::warn!("{}: {e}", path.display());
            None
        }
    }
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
            let processor = self.processor.clone();
            let watch_fd = processor.watches.as_ref().map(|w| w.fd());
            let drain = self.drain.clone();
            let mut fds = vec![
                PollFd::new(&self.kernel, PollFlags::IN),
                PollFd::new(control.as_listener(), PollFlags::IN),
                PollFd::new(&signals.fd, PollFlags::IN),
                PollFd::new(&drain.wakeup, PollFlags::IN),
            ];
            if let Some(fd) = &watch_fd {
                fds.push(PollFd::from_borrowed_fd(*fd, PollFlags::IN));
            }
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let ready = |i: usize| !fds[i].revents().is_empty();
            let (kernel_ready, control_ready, signalled) = (ready(0), ready(1), ready(2));
            let drain_asked = ready(3);
            let written = fds.len() > 4 && ready(4);
            drop(fds);
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
            if control_ready && self.handle_control(control)? {
                return Ok(());
            }
            if signalled {
                if let Some(sig) = signals.read() {
                    log::info!("received signal {sig}");
                    return Ok(());
                }
            }
        }
    }

    /// Reads what the kernel has queued for us, up to an empty socket or a
    /// report of lost events (true).
    fn read_batch(&mut self) -> io::Result<(Vec<(EventKeys, Job)>, bool)> {
        let mut batch = Vec::new();
        loop {
            match self.kernel.recv()? {
                Received::Event(ev) => {
                    let job = Job::new(ev, Source::Kernel);
                    batch.push((job.keys(), job));
                }
                Received::Rejected(why) => {
                    self.rejected += 1;
                    log::warn!("dropped a uevent: {why}");
                }
                Received::Overflow => return Ok((batch, true)),
                Received::WouldBlock => return Ok((batch, false)),
            }
        }
    }

    /// Queues everything the kernel has sent; after lost events, rescans
    /// once the socket is empty, so the rescan sees the newest state.
    /// Asks the kernel for a change event for each watched device whose
    /// node was closed after a write, and for the partitions of a written
    /// disk: what they hold may be different now.
    fn request_change_after_write(&mut self) {
        let Some(w) = &self.processor.watches else {
            return;
        };
        for devpath in w.written() {
            let dir = self.sysfs.syspath(&devpath);
            let mut targets = vec![dir.clone()];
            if let Ok(entries) = std::fs::read_dir(&dir) {
                for e in entries.flatten() {
                    if e.path().join("partition").exists() {
                        targets.push(e.path());
                    }
                }
            }
            for t in targets {
                if let Err(e) = uevd_sysfs::request_uevent(&t, Action::Change, None, &[]) {
                    log::debug!("{}: {e}", t.display());
                }
            }
        }
    }

    /// Reloads the rules when a rules file changed, looking at most every
    /// few seconds: a storm of events must not cost a stat per file each.
    fn reload_if_changed(&mut self) {
        if self.rules_checked.elapsed() < RULES_CHECK_INTERVAL {
            return;
        }
        self.rules_checked = Instant::now();
        if self.processor.rules().changed() {
            log::info!("rules files changed; reloading");
            self.processor.set_rules(load_rules(&self.rules_config));
        }
    }

    fn drain_kernel(&mut self) -> io::Result<()> {
        self.reload_if_changed();
        let mut lost = false;
        loop {
            let (batch, overflowed) = self.read_batch()?;
            self.queue.submit(batch);
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
        if lost {
            self.rescan();
        }
        Ok(())
    }

    /// Processes every existing device, parents first.
    fn coldplug(&mut self, how: Coldplug) {
        let journal = self.processor.journal.clone();
        journal.mark("coldplug-start", format!("{how:?}").to_lowercase());
        let t = Instant::now();
        let count = match how {
            Coldplug::Read => self.synthesize_all(Source::Coldplug, &HashSet::new()),
            Coldplug::Trigger => {
                let n = crate::trigger::write_all(&self.sysfs, Action::Add, None);
                if let Err(e) = self.drain_kernel() {
                    log::warn!("reading uevents: {e}");
                }
                n
            }
        };
        log::info!(
            "coldplug ({how:?}) queued {count} devices in {:?}",
            t.elapsed()
        );
        journal.mark("coldplug-end", count.to_string());
    }

    /// Queues a synthesised `add` for every device in sysfs whose devpath
    /// is not in `skip`. Returns how many were queued.
    fn synthesize_all(&self, source: Source, skip: &HashSet<Box<[u8]>>) -> usize {
        // Handed over in chunks: the workers start while the walk goes on,
        // and are woken once per chunk rather than once per device.
        const CHUNK: usize = 256;
        let mut queued = 0;
        let mut batch = Vec::with_capacity(CHUNK);
        let mut push = |devpath: &[u8]| {
            if skip.contains(devpath) {
                return;
            }
            match self.sysfs.read_event(Action::Add, devpath) {
                Ok(ev) if ev.subsystem().is_some() => {
                    let job = Job::new(ev, source);
                    batch.push((job.keys(), job));
                    queued += 1;
                    if batch.len() == CHUNK {
                        self.queue
                            .submit(std::mem::replace(&mut batch, Vec::with_capacity(CHUNK)));
                    }
                }
                Ok(_) => {}
                // Gone since the directory was listed, or unreadable.
                Err(e) => log::debug!("{}: {e}", String::from_utf8_lossy(devpath)),
            }
        };
        if let Err(e) = walk_subsystems(&self.sysfs, |v| push(v.devpath)) {
            log::warn!("walking subsystems: {e}");
        }
        if let Err(e) = walk_devices(&self.sysfs, |v| push(v.devpath)) {
            log::warn!("walking devices: {e}");
        }
        self.queue.submit(batch);
        queued
    }

    /// After lost events: add what appeared, remove what went, leave alone
    /// what uevd already knows as it is.
    fn rescan(&mut self) {
        let journal = self.processor.journal.clone();
        journal.mark("rescan-start", "");
        let t = Instant::now();
        let known = self.processor.known_devices();
        let mut unchanged: HashSet<Box<[u8]>> = HashSet::new();
        let mut present: HashSet<Box<[u8]>> = HashSet::new();
        let _ = walk_devices(&self.sysfs, |v| {
            present.insert(v.devpath.into());
        });
        let _ = walk_subsystems(&self.sysfs, |v| {
            present.insert(v.devpath.into());
        });
        for (devpath, k) in &known {
            if present.contains(devpath) && still_same(&self.sysfs, devpath, k) {
                unchanged.insert(devpath.clone());
            }
        }
        let added = self.synthesize_all(Source::Rescan, &unchanged);
        let mut removed = 0;
        for (devpath, k) in known.iter().filter(|(p, _)| !present.contains(*p)) {
            if let Some(ev) = removal_event(devpath, k) {
                let job = Job::new(ev, Source::Rescan);
                self.queue.push(job.keys(), job);
                removed += 1;
            }
        }
        log::info!(
            "rescan queued {added} adds and {removed} removes in {:?}",
            t.elapsed()
        );
        journal.mark("rescan-end", format!("added={added} removed={removed}"));
    }

    /// Serves one control connection; true when asked to exit.
    fn handle_control(&mut self, control: &Listener) -> io::Result<bool> {
        let mut conn = match control.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => {
                log::warn!("control socket: {e}");
                return Ok(false);
            }
        };
        let request = match conn.request() {
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
                let queue = self.queue.clone();
                let journal = self.processor.journal.clone();
                let drain = self.drain.clone();
                journal.mark("settle-request", last.to_string());
                std::thread::spawn(move || {
                    let deadline = Instant::now() + timeout;
                    let mut last = last;
                    // Until a wait ends with nothing new read from the
                    // kernel: what the events loaded may have added devices.
                    let reply = loop {
                        let left = deadline.saturating_duration_since(Instant::now());
                        match queue.settle(last, left) {
                            Completion::TimedOut { pending } => break Reply::Timeout(pending),
                            Completion::Done => {}
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
            Request::Reload => {
                let rules = load_rules(&self.rules_config);
                let summary = format!(
                    "{} rules files, {} rules",
                    rules.file_count(),
                    rules.line_count()
                );
                self.processor.set_rules(rules);
                self.rules_checked = Instant::now();
                conn.reply(&Reply::Ok(summary))
            }
            Request::Exit => {
                conn.reply(&Reply::Ok(String::new()));
                return Ok(true);
            }
            Request::LogLevel(level) => {
                crate::log::set_level(level);
                conn.reply(&Reply::Ok(String::new()));
            }
            Request::Status => {
                let (pending, running) = self.queue.status();
                let p = &self.processor;
                conn.reply(&Reply::Ok(format!(
                    "pending={pending} running={running} processed={} failed={} rejected={} overflows={} known={} links={} rules={} uptime_ms={} control={}",
                    p.processed.load(std::sync::atomic::Ordering::Relaxed),
                    p.failed.load(std::sync::atomic::Ordering::Relaxed),
                    self.rejected,
                    self.overflows,
                    p.known_count(),
                    p.claimed_links(),
                    p.rules().line_count(),
                    self.started.elapsed().as_millis(),
                    self.roots.control().display(),
                )));
            }
        }
        Ok(false)
    }
}

/// Whether a known device still has the number and interface index uevd
/// processed it with (a device removed and re-added while events were lost
/// may not).
fn still_same(sysfs: &Sysfs, devpath: &[u8], k: &Known) -> bool {
    match sysfs.read_event(Action::Add, devpath) {
        Ok(ev) => ev.devnum() == k.devnum && ev.ifindex() == k.ifindex,
        Err(_) => false,
    }
}

/// The `remove` the kernel would have sent for a device that is gone.
fn removal_event(devpath: &[u8], k: &Known) -> Option<uevd_uevent::Uevent> {
    let mut file = Vec::new();
    if let Some((major, minor)) = k.devnum {
        file.extend_from_slice(format!("MAJOR={major}\nMINOR={minor}\n").as_bytes());
    }
    if let Some(name) = &k.devname {
        file.extend_from_slice(b"DEVNAME=");
        file.extend_from_slice(name);
        file.push(b'\n');
    }
    if let Some(i) = k.ifindex {
        file.extend_from_slice(format!("IFINDEX={i}\n").as_bytes());
    }
    uevd_uevent::Uevent::synthesize(Action::Remove, devpath, Some(&k.subsystem), &file, &[]).ok()
}

/// SIGTERM and SIGINT, delivered through a descriptor the main loop polls,
/// so that the daemon stops the way `control --exit` stops it: queued
/// events finished, journal written, sockets removed.
struct Signals {
    fd: rustix::fd::OwnedFd,
}

impl Signals {
    fn block() -> io::Result<Signals> {
        // SAFETY: plain libc calls on a local, initialised signal set.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(Signals {
                fd: rustix::fd::FromRawFd::from_raw_fd(fd),
            })
        }
    }

    /// The signal received, if any.
    fn read(&self) -> Option<u32> {
        let mut info = [0u8; 128];
        match rustix::io::read(&self.fd, &mut info) {
            Ok(128) => Some(u32::from_ne_bytes([info[0], info[1], info[2], info[3]])),
            _ => None,
        }
    }
}
