//! Tells a service manager that the daemon is ready (systemd's sd_notify
//! protocol), so that a `Type=notify` unit orders what needs /dev after
//! uevd really listens, not after it was merely started.

use std::io;
use std::os::unix::net::UnixDatagram;

/// Sends `READY=1` to `$NOTIFY_SOCKET` when a service manager set it;
/// without one this does nothing.
pub fn ready() {
    if let Some(path) = std::env::var_os("NOTIFY_SOCKET") {
        if let Err(e) = send(path.as_encoded_bytes(), b"READY=1") {
            log::warn!("cannot tell the service manager that uevd is ready: {e}");
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
}
