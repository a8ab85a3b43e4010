//! SIGTERM, SIGINT and SIGHUP as a descriptor the main loop polls.

use std::io;

/// SIGTERM and SIGINT, delivered through a descriptor the main loop polls,
/// so that the daemon stops the way `control --exit` stops it: running
/// events finished, the rest saved, journal written, sockets removed.
/// SIGHUP reloads, as `control --reload` does (systemd's `Type=notify-reload`
/// sends it for `systemctl reload`).
pub(crate) struct Signals {
    pub(crate) fd: rustix::fd::OwnedFd,
}

impl Signals {
    pub(crate) fn block() -> io::Result<Signals> {
        // SAFETY: plain libc calls on a local, initialised signal set.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGHUP);
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
    pub(crate) fn read(&self) -> Option<u32> {
        let mut info = [0u8; 128];
        match rustix::io::read(&self.fd, &mut info) {
            Ok(128) => Some(u32::from_ne_bytes([info[0], info[1], info[2], info[3]])),
            _ => None,
        }
    }
}
