//! Sockets a service manager opened for the daemon and passed on (systemd's
//! socket activation: `LISTEN_PID`, `LISTEN_FDS`, descriptors from 3 on).
//!
//! systemd-udevd's units hold two of them: `systemd-udevd-kernel.socket`
//! (the kernel's uevents, with a large receive buffer, open from early boot
//! on and kept across restarts of the daemon) and
//! `systemd-udevd-control.socket` (`/run/udev/control`). When uevd's unit
//! names them in `Sockets=`, uevd takes them over instead of opening its
//! own, so that no event is lost while the daemon starts or restarts.

use rustix::fd::{BorrowedFd, FromRawFd, OwnedFd};
use uevd_control::udev::Listener;
use uevd_netlink::UeventSocket;

/// The first descriptor passed (SD_LISTEN_FDS_START).
const FIRST_FD: i32 = 3;

/// What was passed, sorted by kind; either may be missing.
#[derive(Default)]
pub(crate) struct Passed {
    pub kernel: Option<UeventSocket>,
    pub udev_control: Option<Listener>,
}

/// Takes the passed sockets, if the variables name this process, and
/// removes the variables so that programs run by rules do not see them.
/// A descriptor of another kind is closed with a warning.
pub(crate) fn take() -> Passed {
    let fds = listen_fds(
        std::env::var("LISTEN_PID").ok().as_deref(),
        std::env::var("LISTEN_FDS").ok().as_deref(),
        std::process::id(),
    );
    for v in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        std::env::remove_var(v);
    }
    let mut passed = Passed::default();
    for fd in fds {
        // SAFETY: the service manager passed these descriptors to this
        // process, and nothing else in it has taken them (checked open by
        // listen_fds, taken once here).
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let fd = match UeventSocket::kernel_from_fd(fd) {
            Ok(s) if passed.kernel.is_none() => {
                log::info!("listening to kernel uevents on the socket the service manager passed");
                passed.kernel = Some(s);
                continue;
            }
            Ok(_) => {
                log::warn!("a second kernel uevent socket was passed; closing it");
                continue;
            }
            Err((fd, _)) => fd,
        };
        match Listener::from_fd(fd) {
            Ok(l) if passed.udev_control.is_none() => {
                log::info!(
                    "answering udevadm on {}, passed by the service manager",
                    l.path().display()
                );
                passed.udev_control = Some(l);
            }
            Ok(l) => log::warn!(
                "a second control socket {} was passed; closing it",
                l.path().display()
            ),
            Err((_, e)) => {
                log::warn!("a passed descriptor is neither uevd's kind of socket ({e}); closing it")
            }
        }
    }
    passed
}

/// The passed descriptors that are open: none unless `LISTEN_PID` is this
/// process and `LISTEN_FDS` a count.
fn listen_fds(pid: Option<&str>, count: Option<&str>, me: u32) -> Vec<i32> {
    if pid.and_then(|p| p.parse::<u32>().ok()) != Some(me) {
        return Vec::new();
    }
    let Some(n) = count.and_then(|n| n.parse::<i32>().ok()) else {
        return Vec::new();
    };
    (FIRST_FD..FIRST_FD.saturating_add(n.clamp(0, 1024)))
        .filter(|&fd| {
            // SAFETY: only asks whether the descriptor number is open.
            rustix::io::fcntl_getfd(unsafe { BorrowedFd::borrow_raw(fd) }).is_ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::listen_fds;

    #[test]
    fn only_for_this_process() {
        // fd 0-2 are open in a test; 3.. need not be, so count 0.
        assert!(listen_fds(Some("1"), Some("2"), 2).is_empty());
        assert!(listen_fds(None, Some("2"), 2).is_empty());
        assert!(listen_fds(Some("2"), None, 2).is_empty());
        assert!(listen_fds(Some("2"), Some("x"), 2).is_empty());
        assert!(listen_fds(Some("2"), Some("0"), 2).is_empty());
        assert!(listen_fds(Some("2"), Some("-4"), 2).is_empty());
    }
}
