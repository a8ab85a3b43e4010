//! Control requests are read off the main loop: a client that connects
//! and then says nothing (or says it slowly) must not keep the daemon from
//! reading the kernel. The main loop only accepts; a short-lived thread per
//! connection reads the request and hands it back through a channel and an
//! eventfd that the main loop polls. Requests are then served in the main
//! loop, in arrival order, as before. Requests read off udev's own socket
//! (`udev_control.rs`) and the varlink socket (`varlink.rs`) come through
//! the same inbox.

use rustix::event::{eventfd, EventfdFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, SyncSender};
use std::sync::Arc;
use uevd_control::{Connection, Listener, Reply, Request};

/// Who asked, and where the answer goes.
pub(crate) enum Client {
    /// A client of uevd's own socket: the reply is written to it.
    Uevd(Connection),
    /// A request read off udev's socket or the varlink socket: its reader
    /// thread waits for the reply before it reads the next one, so that
    /// the client learns that everything was done only once it was.
    Waiting(SyncSender<Reply>),
    /// A varlink call answered by the main loop itself, so that the
    /// answer is written before the daemon exits (an exit's).
    Varlink(crate::varlink::Answer),
}

impl Client {
    pub(crate) fn reply(self, reply: &Reply) {
        match self {
            Client::Uevd(conn) => conn.reply(reply),
            Client::Waiting(tx) => {
                let _ = tx.send(reply.clone());
            }
            Client::Varlink(answer) => answer.send(reply),
        }
    }
}

/// A client and what reading its request gave: `Ok(None)` is a peer that
/// closed without asking (a liveness probe).
pub(crate) type Incoming = (Client, Result<Option<Request>, String>);

/// A reader thread's way to hand a request to the main loop.
#[derive(Clone)]
pub(crate) struct Handoff {
    tx: Sender<Incoming>,
    wakeup: Arc<OwnedFd>,
}

impl Handoff {
    pub(crate) fn send(&self, incoming: Incoming) {
        let _ = self.tx.send(incoming);
        let _ = rustix::io::write(&*self.wakeup, &1u64.to_ne_bytes());
    }

    /// Hands a request to the main loop and waits until it has been
    /// served; `None` when the main loop has gone (the daemon is exiting).
    pub(crate) fn ask(&self, request: Request) -> Option<Reply> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.send((Client::Waiting(tx), Ok(Some(request))));
        rx.recv().ok()
    }
}

/// Connections being read at once, at most; more are turned away rather
/// than letting a flood of idle clients start threads without end.
const MAX_READERS: usize = 32;

pub(crate) struct Inbox {
    tx: Sender<Incoming>,
    rx: Receiver<Incoming>,
    wakeup: Arc<OwnedFd>,
    readers: Arc<AtomicUsize>,
}

impl Inbox {
    pub(crate) fn new() -> io::Result<Inbox> {
        let (tx, rx) = channel();
        Ok(Inbox {
            tx,
            rx,
            wakeup: Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?),
            readers: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Readable when requests wait in [`Inbox::take`].
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.wakeup.as_fd()
    }

    /// Accepts every pending connection and starts reading each.
    pub(crate) fn accept_all(&self, listener: &Listener) {
        self.accept_each(
            "control",
            || listener.accept(),
            |conn| conn.reply(&Reply::Error("busy: too many clients".into())),
            |mut conn, handoff| {
                let request = conn.request();
                handoff.send((Client::Uevd(conn), request));
            },
        );
    }

    /// Accepts every connection waiting on one of the daemon's sockets
    /// (`accept` says WouldBlock when none is left) and reads each on a
    /// thread of its own with `read`, while fewer than [`MAX_READERS`]
    /// run; past that a connection gets `turned_away` instead. A peer
    /// the socket refuses (not root) is skipped.
    pub(crate) fn accept_each<C: Send + 'static>(
        &self,
        name: &'static str,
        mut accept: impl FnMut() -> io::Result<C>,
        turned_away: impl Fn(C),
        read: impl Fn(C, &Handoff) + Clone + Send + 'static,
    ) {
        loop {
            let conn = match accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    log::warn!("{name} socket: {e}");
                    continue;
                }
                Err(e) => {
                    log::warn!("{name} socket: {e}");
                    return;
                }
            };
            if !self.reserve_reader(name) {
                turned_away(conn);
                continue;
            }
            let read = read.clone();
            self.start_reader(name, move |handoff| read(conn, handoff));
        }
    }

    /// Counts one more reader, unless too many run already (false).
    pub(crate) fn reserve_reader(&self, name: &str) -> bool {
        if self.readers.fetch_add(1, Ordering::AcqRel) >= MAX_READERS {
            self.readers.fetch_sub(1, Ordering::AcqRel);
            log::warn!("{name} socket: too many clients at once; one turned away");
            return false;
        }
        true
    }

    /// Runs `read` on a thread of its own, once [`Inbox::reserve_reader`]
    /// said yes.
    pub(crate) fn start_reader(&self, name: &str, read: impl FnOnce(&Handoff) + Send + 'static) {
        let handoff = Handoff {
            tx: self.tx.clone(),
            wakeup: self.wakeup.clone(),
        };
        let readers = self.readers.clone();
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                read(&handoff);
                readers.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            self.readers.fetch_sub(1, Ordering::AcqRel);
            log::warn!("{name} socket: cannot start a reader: {e}");
        }
    }

    /// The requests read so far, oldest first.
    pub(crate) fn take(&self) -> Vec<Incoming> {
        let mut counter = [0u8; 8];
        let _ = rustix::io::read(&*self.wakeup, &mut counter);
        self.rx.try_iter().collect()
    }
}
