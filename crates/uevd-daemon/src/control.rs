//! Control requests are read off the main loop: a client that connects
//! and then says nothing (or says it slowly) must not keep the daemon from
//! reading the kernel. The main loop only accepts; a short-lived thread per
//! connection reads the request and hands it back through a channel and an
//! eventfd that the main loop polls. Requests are then served in the main
//! loop, in arrival order, as before.

use rustix::event::{eventfd, EventfdFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use uevd_control::{Connection, Listener, Reply, Request};

/// A connection and what reading its request gave: `Ok(None)` is a peer
/// that closed without asking (a liveness probe).
pub(crate) type Incoming = (Connection, Result<Option<Request>, String>);

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
        loop {
            let conn = match listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    log::warn!("control socket: {e}");
                    return;
                }
            };
            if self.readers.fetch_add(1, Ordering::AcqRel) >= MAX_READERS {
                self.readers.fetch_sub(1, Ordering::AcqRel);
                log::warn!("control socket: too many clients at once; one turned away");
                conn.reply(&Reply::Error("busy: too many clients".into()));
                continue;
            }
            let (tx, wakeup, readers) =
                (self.tx.clone(), self.wakeup.clone(), self.readers.clone());
            let spawned = std::thread::Builder::new()
                .name("control".into())
                .spawn(move || {
                    let mut conn = conn;
                    let request = conn.request();
                    let _ = tx.send((conn, request));
                    let _ = rustix::io::write(&*wakeup, &1u64.to_ne_bytes());
                    readers.fetch_sub(1, Ordering::AcqRel);
                });
            if let Err(e) = spawned {
                self.readers.fetch_sub(1, Ordering::AcqRel);
                log::warn!("control socket: cannot start a reader: {e}");
            }
        }
    }

    /// The requests read so far, oldest first.
    pub(crate) fn take(&self) -> Vec<Incoming> {
        let mut counter = [0u8; 8];
        let _ = rustix::io::read(&*self.wakeup, &mut counter);
        self.rx.try_iter().collect()
    }
}
