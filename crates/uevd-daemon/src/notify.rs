//! Tells a service manager that the daemon is ready (systemd's sd_notify
//! protocol), so that a `Type=notify` unit orders what needs /dev after
//! uevd really listens, not after it was merely started; and, for a
//! `Type=notify-reload` unit (systemd 253 and later, as udevd's own unit),
//! when a reload starts and when it is done.

use std::io;
use std::os::unix::net::UnixDatagram;

/// Sends `READY=1` to `$NOTIFY_SOCKET` when a service manager set it;
/// without one this does nothing. Also what ends a reload.
pub fn ready() {
    notify(b"READY=1", "ready");
}

/// Sends `RELOADING=1` with the time the reload starts on the monotonic
/// clock (`MONOTONIC_USEC`, which `Type=notify-reload` requires, so that
/// the manager can tell this reload from an earlier one); [`ready`]
/// follows once the reload is done.
pub fn reloading() {
    let message = reloading_message(monotonic_usec());
    notify(message.as_bytes(), "reloading");
}

fn reloading_message(usec: u64) -> String {
    format!("RELOADING=1\nMONOTONIC_USEC={usec}")
}

/// `CLOCK_MONOTONIC` in microseconds, as systemd's `now(CLOCK_MONOTONIC)`.
pub fn monotonic_usec() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64) * 1_000_000 + (t.tv_nsec as u64) / 1_000
}

fn notify(message: &[u8], what: &str) {
    if let Some(path) = std::env::var_os("NOTIFY_SOCKET") {
        if let Err(e) = send(path.as_encoded_bytes(), message) {
            log::warn!("cannot tell the service manager that uevd is {what}: {e}");
        }
    }
}

/// One datagram to a notification socket named as systemd names it: a
/// path, or `@name` for an abstract socket.
pub fn send(socket: &[u8], message: &[u8]) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let sock = UnixDatagram::unbound()?;
    match socket.first() {
        Some(b'/') => sock.send_to(message, std::ffi::OsStr::from_bytes(socket))?,
        Some(b'@') => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(&socket[1..])?;
            sock.send_to_addr(message, &addr)?
        }
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "NOTIFY_SOCKET is neither a path nor @abstract",
            ))
        }
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_and_abstract_sockets_get_the_message() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("notify");
        let server = UnixDatagram::bind(&path).unwrap();
        send(path.as_os_str().as_encoded_bytes(), b"READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("uevd-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let server = UnixDatagram::bind_addr(&addr).unwrap();
        send(format!("@{name}").as_bytes(), b"READY=1").unwrap();
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        assert!(send(b"relative", b"READY=1").is_err());
    }

    #[test]
    fn a_reload_names_its_start_on_the_monotonic_clock() {
        assert_eq!(
            reloading_message(12345),
            "RELOADING=1\nMONOTONIC_USEC=12345"
        );
        let (a, b) = (monotonic_usec(), monotonic_usec());
        assert!(a > 0 && b >= a);
    }
}
