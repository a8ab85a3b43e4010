//! udev's own control socket, `/run/udev/control`, for the `udevadm
//! control` and `udevadm settle` that distributions ship (package scripts
//! reload rules and initramfs scripts stop the daemon through it). The wire
//! format is in `uevd_control::udev`.
//!
//! As for uevd's own socket, the main loop only accepts; a thread per
//! connection reads its messages. Requests the daemon already serves
//! (ping, reload, exit, log level) go through the inbox to the main loop,
//! and the thread waits for each to be done before it reads the next: the
//! client takes the connection's close as "all done". Queue tuning (stop
//! and start, children max) is the queue's own business and is done from
//! the thread.

use crate::control::{Handoff, Inbox};
use crate::job::Job;
use std::path::Path;
use std::time::Duration;
use uevd_control::udev::{Connection, Listener, Message};
use uevd_control::{Level, Reply, Request};
use uevd_queue::WorkQueue;

/// How long a client may stay silent before it is hung up on; udevadm
/// sends all its messages at once.
const IDLE: Duration = Duration::from_secs(10);

/// Binds the socket; without it libudev clients think no device manager
/// runs, so a failure is worth a warning but not worth stopping for.
pub(crate) fn bind(path: &Path) -> Option<Listener> {
    match Listener::bind(path) {
        Ok(l) => Some(l),
        Err(e) => {
            log::warn!("{}: {e}", path.display());
            None
        }
    }
}

/// Accepts every waiting connection and starts reading each.
pub(crate) fn accept_all(inbox: &Inbox, listener: &Listener, queue: &WorkQueue<Job>) {
    let queue = queue.clone();
    // Turned away, the connection closes, which is all udev's protocol
    // can say.
    inbox.accept_each(
        "udev control",
        || listener.accept(),
        drop,
        move |conn, handoff| serve(conn, handoff, &queue),
    );
}

/// A syslog priority as uevd's levels.
pub(crate) fn level(priority: i32) -> Option<Level> {
    Some(match priority {
        0..=3 => Level::Error,
        4 => Level::Warn,
        5 | 6 => Level::Info,
        7 => Level::Debug,
        _ => return None,
    })
}

/// Serves one client's messages in order, until its end message, its
/// close or an exit request.
fn serve(mut conn: Connection, handoff: &Handoff, queue: &WorkQueue<Job>) {
    loop {
        let message = match conn.receive(IDLE) {
            Ok(Some(Ok(m))) => m,
            // As udevd does: a client that speaks nonsense is hung up on.
            Ok(Some(Err(e))) => {
                log::warn!("udev control: {e}; closing the connection");
                return;
            }
            Ok(None) => return,
            Err(e) => {
                log::warn!("udev control: {e}");
                return;
            }
        };
        log::debug!("udev control: {message}");
        match message {
            Message::End => return,
            Message::Ping => ask(handoff, Request::Ping),
            Message::Reload => ask(handoff, Request::Reload),
            Message::Exit => {
                ask(handoff, Request::Exit);
                return;
            }
            Message::LogLevel(p) => match level(p) {
                Some(l) => ask(handoff, Request::LogLevel(l)),
                None => log::warn!("udev control: log level {p} is not a syslog priority"),
            },
            Message::StopExecQueue => {
                log::info!("udev control: events are queued but not started until told to start");
                queue.set_paused(true);
            }
            Message::StartExecQueue => {
                log::info!("udev control: starting queued events again");
                queue.set_paused(false);
            }
            Message::ChildrenMax(n) => match usize::try_from(n) {
                Ok(n) => {
                    let effective = queue.set_limit(n);
                    log::info!(
                        "udev control: children max {n}: at most {effective} events run at once"
                    );
                }
                Err(_) => log::warn!("udev control: children max {n} is negative; ignored"),
            },
            // Added to every event from now on, as udevd does.
            Message::SetEnv(kv) => {
                let kv = String::from_utf8_lossy(&kv).into_owned();
                match kv.split_once('=') {
                    Some((k, v)) if !k.is_empty() => {
                        ask(handoff, Request::Property(k.to_string(), v.to_string()))
                    }
                    _ => log::warn!("udev control: property '{kv}' is not KEY=VALUE"),
                }
            }
        }
    }
}

/// Hands a request to the main loop and waits until it has been served.
/// When the main loop has gone (the daemon is exiting), the connection
/// closes with the process.
fn ask(handoff: &Handoff, request: Request) {
    let what = request.to_string();
    if let Some(Reply::Error(e)) = handoff.ask(request) {
        log::warn!("udev control: {what}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syslog_priorities_map_onto_uevds_levels() {
        assert_eq!(level(0), Some(Level::Error));
        assert_eq!(level(3), Some(Level::Error));
        assert_eq!(level(4), Some(Level::Warn));
        assert_eq!(level(6), Some(Level::Info));
        assert_eq!(level(7), Some(Level::Debug));
        assert_eq!(level(8), None);
        assert_eq!(level(-1), None);
    }
}
