//! udev's own control protocol, served on `/run/udev/control` so that the
//! `udevadm control` and `udevadm settle` that distributions ship talk to
//! uevd unchanged.
//!
//! The facts this rests on, from systemd 252's `src/udev/udev-ctrl.[ch]`:
//!
//! - The socket is `AF_UNIX`, `SOCK_SEQPACKET`, at the fixed path
//!   `/run/udev/control`; a client's messages are read one connection at a
//!   time, and the daemon refuses a peer that is not uid 0.
//! - Every message is one packet of exactly 280 bytes, in the host's byte
//!   order: a 16-byte version string (`udev-252`, informative only), the
//!   magic `0xdead1dea` as an unsigned int, the type as an int, then a
//!   256-byte value that is either an int (at its start) or a
//!   NUL-terminated string.
//! - Types: 0 ends a client's messages, 1 log level (a syslog priority),
//!   2 stop and 3 start the exec queue, 4 reload, 5 set a global property
//!   (`KEY=value`, or `KEY=` to remove it), 6 children max, 7 ping, 8 exit.
//! - Nothing is ever written back. udevadm sends its requests, then the
//!   end message, and waits until the daemon closes the connection: that
//!   close is the answer, and it must come only once every request was
//!   handled (a reload must be done when `udevadm control --reload`
//!   returns). After an exit request udevadm waits for nothing.
//!
//! Packets come from other processes, so parsing never trusts a length,
//! a type or a terminator.

use rustix::fd::{AsFd, OwnedFd};
use rustix::net::{
    sockopt, AddressFamily, RecvFlags, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};
use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where udevadm looks for the daemon; it cannot be told otherwise.
pub const PATH: &str = "/run/udev/control";

/// Marks a packet as udev's control protocol.
pub const MAGIC: u32 = 0xdead_1dea;

/// The size of every packet.
pub const WIRE_SIZE: usize = VALUE_OFFSET + VALUE_SIZE;

const VERSION_SIZE: usize = 16;
const MAGIC_OFFSET: usize = VERSION_SIZE;
const TYPE_OFFSET: usize = MAGIC_OFFSET + 4;
const VALUE_OFFSET: usize = TYPE_OFFSET + 4;
const VALUE_SIZE: usize = 256;

/// What uevd writes in the version field of the packets it sends (the
/// daemon ignores the field, as udevd does).
const VERSION: &[u8] = b"udev-252";

/// One request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// The client has sent everything; closing the connection answers.
    End,
    /// A syslog priority, 0 (emerg) to 7 (debug).
    LogLevel(i32),
    StopExecQueue,
    StartExecQueue,
    Reload,
    /// `KEY=value` sets a property for every event, `KEY=` removes it.
    SetEnv(Vec<u8>),
    ChildrenMax(i32),
    Ping,
    Exit,
}

/// Why a packet was not a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    Size(usize),
    Magic(u32),
    Type(i32),
    /// A string value with no terminating NUL within the value field.
    Unterminated,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Size(n) => write!(f, "message of {n} bytes, not {WIRE_SIZE}"),
            WireError::Magic(m) => write!(f, "message magic {m:#010x} is not udev's"),
            WireError::Type(t) => write!(f, "unknown message type {t}"),
            WireError::Unterminated => f.write_str("property is not NUL-terminated"),
        }
    }
}

fn int_at(bytes: &[u8], at: usize) -> [u8; 4] {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    word
}

impl Message {
    fn type_number(&self) -> i32 {
        match self {
            Message::End => 0,
            Message::LogLevel(_) => 1,
            Message::StopExecQueue => 2,
            Message::StartExecQueue => 3,
            Message::Reload => 4,
            Message::SetEnv(_) => 5,
            Message::ChildrenMax(_) => 6,
            Message::Ping => 7,
            Message::Exit => 8,
        }
    }

    /// Reads one packet as received.
    pub fn parse(bytes: &[u8]) -> Result<Message, WireError> {
        if bytes.len() != WIRE_SIZE {
            return Err(WireError::Size(bytes.len()));
        }
        let magic = u32::from_ne_bytes(int_at(bytes, MAGIC_OFFSET));
        if magic != MAGIC {
            return Err(WireError::Magic(magic));
        }
        let value = &bytes[VALUE_OFFSET..];
        let int = i32::from_ne_bytes(int_at(value, 0));
        Ok(match i32::from_ne_bytes(int_at(bytes, TYPE_OFFSET)) {
            0 => Message::End,
            1 => Message::LogLevel(int),
            2 => Message::StopExecQueue,
            3 => Message::StartExecQueue,
            4 => Message::Reload,
            5 => {
                let end = value
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or(WireError::Unterminated)?;
                Message::SetEnv(value[..end].to_vec())
            }
            6 => Message::ChildrenMax(int),
            7 => Message::Ping,
            8 => Message::Exit,
            t => return Err(WireError::Type(t)),
        })
    }

    /// The packet for this request. A property longer than the value field
    /// is cut to fit, keeping its terminator.
    pub fn encode(&self) -> [u8; WIRE_SIZE] {
        let mut packet = [0u8; WIRE_SIZE];
        packet[..VERSION.len()].copy_from_slice(VERSION);
        packet[MAGIC_OFFSET..TYPE_OFFSET].copy_from_slice(&MAGIC.to_ne_bytes());
        packet[TYPE_OFFSET..VALUE_OFFSET].copy_from_slice(&self.type_number().to_ne_bytes());
        let value = &mut packet[VALUE_OFFSET..];
        match self {
            Message::LogLevel(n) | Message::ChildrenMax(n) => {
                value[..4].copy_from_slice(&n.to_ne_bytes())
            }
            Message::SetEnv(kv) => {
                let kv = &kv[..kv.len().min(VALUE_SIZE - 1)];
                let end = kv.iter().position(|&b| b == 0).unwrap_or(kv.len());
                value[..end].copy_from_slice(&kv[..end]);
            }
            _ => {}
        }
        packet
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Message::End => f.write_str("end of messages"),
            Message::LogLevel(n) => write!(f, "log level {n}"),
            Message::StopExecQueue => f.write_str("stop exec queue"),
            Message::StartExecQueue => f.write_str("start exec queue"),
            Message::Reload => f.write_str("reload"),
            Message::SetEnv(kv) => write!(f, "set env {}", String::from_utf8_lossy(kv)),
            Message::ChildrenMax(n) => write!(f, "children max {n}"),
            Message::Ping => f.write_str("ping"),
            Message::Exit => f.write_str("exit"),
        }
    }
}

fn seqpacket() -> io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// The daemon's end of `/run/udev/control`.
pub struct Listener {
    fd: OwnedFd,
    path: PathBuf,
    /// Bound by this process (and removed when dropped), or passed on by a
    /// service manager, which keeps the path for the next daemon.
    owned: bool,
}

impl Listener {
    /// Binds the socket, replacing whatever is at `path`, as udevd does:
    /// the path is udev's, and whoever manages devices owns it.
    pub fn bind(path: &Path) -> io::Result<Listener> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let fd = seqpacket()?;
        rustix::net::bind(&fd, &SocketAddrUnix::new(path)?)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        rustix::net::listen(&fd, 16)?;
        // The main loop accepts until nothing waits.
        rustix::io::ioctl_fionbio(&fd, true)?;
        Ok(Listener {
            fd,
            path: path.to_path_buf(),
            owned: true,
        })
    }

    /// Takes over a listening socket that a service manager bound and
    /// passed on (systemd's `systemd-udevd-control.socket`:
    /// `ListenSequentialPacket=/run/udev/control`). Anything but a bound
    /// AF_UNIX SOCK_SEQPACKET socket is refused (and given back). The path
    /// stays when the listener is dropped: the service manager holds the
    /// socket for the next daemon.
    pub fn from_fd(fd: OwnedFd) -> Result<Listener, (OwnedFd, io::Error)> {
        let path = (|| {
            if sockopt::socket_domain(&fd)? != AddressFamily::UNIX
                || sockopt::socket_type(&fd)? != SocketType::SEQPACKET
            {
                return Ok(None);
            }
            let addr = SocketAddrUnix::try_from(rustix::net::getsockname(&fd)?);
            Ok::<_, rustix::io::Errno>(addr.ok().and_then(|a| {
                a.path()
                    .map(|p| PathBuf::from(OsStr::from_bytes(p.to_bytes())))
            }))
        })();
        let path = match path {
            Ok(Some(p)) => p,
            Ok(None) => {
                let e = io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not a SOCK_SEQPACKET socket bound to a path",
                );
                return Err((fd, e));
            }
            Err(e) => return Err((fd, e.into())),
        };
        let setup = rustix::io::ioctl_fionbio(&fd, true)
            .and_then(|()| rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::CLOEXEC));
        if let Err(e) = setup {
            return Err((fd, e.into()));
        }
        Ok(Listener {
            fd,
            path,
            owned: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts one waiting connection (`WouldBlock` when none waits) from
    /// root; anyone else is closed on at once.
    pub fn accept(&self) -> io::Result<Connection> {
        let fd = rustix::net::accept_with(&self.fd, SocketFlags::CLOEXEC)?;
        let cred = sockopt::socket_peercred(&fd)?;
        if !cred.uid.is_root() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "udev control: refused a client of uid {}",
                    cred.uid.as_raw()
                ),
            ));
        }
        Ok(Connection { fd })
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> rustix::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if self.owned {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// One client, root. Dropping it closes the connection, which is what the
/// client waits for.
pub struct Connection {
    fd: OwnedFd,
}

impl Connection {
    /// The next request; `None` once the client has closed, or has said
    /// nothing for `idle`.
    pub fn receive(&mut self, idle: Duration) -> io::Result<Option<Result<Message, WireError>>> {
        sockopt::set_socket_timeout(&self.fd, sockopt::Timeout::Recv, Some(idle))?;
        // One byte more than a packet: a longer one shows as too long
        // instead of being silently cut to size.
        let mut buf = [0u8; WIRE_SIZE + 1];
        loop {
            match rustix::net::recv(&self.fd, &mut buf[..], RecvFlags::empty()) {
                Ok((0, _)) => return Ok(None),
                Ok((n, _)) => return Ok(Some(Message::parse(&buf[..n]))),
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::AGAIN) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Sends `messages` as udevadm does, then waits for the daemon to close
/// the connection (unless the last request was an exit), at most
/// `timeout`.
pub fn send(path: &Path, messages: &[Message], timeout: Duration) -> io::Result<()> {
    let fd = seqpacket()?;
    rustix::net::connect(&fd, &SocketAddrUnix::new(path)?)?;
    for m in messages {
        rustix::net::send(&fd, &m.encode(), SendFlags::empty())?;
    }
    if messages.last() == Some(&Message::Exit) {
        return Ok(());
    }
    rustix::net::send(&fd, &Message::End.encode(), SendFlags::empty())?;
    sockopt::set_socket_timeout(&fd, sockopt::Timeout::Recv, Some(timeout))?;
    let mut byte = [0u8; 1];
    match rustix::net::recv(&fd, &mut byte[..], RecvFlags::empty()) {
        Ok((0, _)) => Ok(()),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the daemon wrote on udev's control socket",
        )),
        Err(rustix::io::Errno::AGAIN) => Err(io::ErrorKind::TimedOut.into()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_the_wire_format() {
        for m in [
            Message::End,
            Message::LogLevel(7),
            Message::StopExecQueue,
            Message::StartExecQueue,
            Message::Reload,
            Message::SetEnv(b"DEBUG=1".to_vec()),
            Message::SetEnv(b"DEBUG=".to_vec()),
            Message::ChildrenMax(-1),
            Message::Ping,
            Message::Exit,
        ] {
            let packet = m.encode();
            assert_eq!(packet.len(), 280);
            assert!(packet.starts_with(b"udev-252\0"));
            assert_eq!(Message::parse(&packet), Ok(m));
        }
    }

    #[test]
    fn the_layout_is_udevs() {
        let p = Message::ChildrenMax(5).encode();
        assert_eq!(&p[16..20], &0xdead_1deau32.to_ne_bytes());
        assert_eq!(&p[20..24], &6i32.to_ne_bytes());
        assert_eq!(&p[24..28], &5i32.to_ne_bytes());
        let p = Message::SetEnv(b"A=b".to_vec()).encode();
        assert_eq!(&p[24..28], b"A=b\0");
    }

    #[test]
    fn bad_packets_are_refused_not_trusted() {
        let good = Message::Ping.encode();
        assert_eq!(Message::parse(&good[..279]), Err(WireError::Size(279)));
        assert_eq!(Message::parse(&[]), Err(WireError::Size(0)));
        let mut long = good.to_vec();
        long.push(0);
        assert_eq!(Message::parse(&long), Err(WireError::Size(281)));
        let mut bad = good;
        bad[16] ^= 1;
        assert!(matches!(Message::parse(&bad), Err(WireError::Magic(_))));
        let mut bad = good;
        bad[20..24].copy_from_slice(&9i32.to_ne_bytes());
        assert_eq!(Message::parse(&bad), Err(WireError::Type(9)));
        bad[20..24].copy_from_slice(&(-1i32).to_ne_bytes());
        assert_eq!(Message::parse(&bad), Err(WireError::Type(-1)));
        let mut env = Message::SetEnv(Vec::new()).encode();
        env[24..].fill(b'x');
        assert_eq!(Message::parse(&env), Err(WireError::Unterminated));
    }

    #[test]
    fn an_overlong_property_is_cut_and_stays_terminated() {
        let p = Message::SetEnv(vec![b'k'; 1000]).encode();
        match Message::parse(&p) {
            Ok(Message::SetEnv(kv)) => assert_eq!(kv.len(), 255),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_byte_string_parses_or_is_refused() {
        // A cheap stand-in for the fuzzer: mutations of valid packets and
        // random lengths never panic.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let mut p = Message::SetEnv(b"K=v".to_vec()).encode().to_vec();
            let at = (next() % 280) as usize;
            p[at] = next() as u8;
            p[TYPE_OFFSET] = (next() % 10) as u8;
            p.truncate(270 + (next() % 20) as usize);
            let _ = Message::parse(&p);
        }
    }

    #[test]
    fn a_client_waits_until_the_daemon_closes() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("control");
        let listener = Listener::bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let server = std::thread::spawn(move || {
            let mut conn = loop {
                match listener.accept() {
                    Ok(c) => break c,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    Err(e) => return Err(e.to_string()),
                }
            };
            let mut got = Vec::new();
            while let Some(m) = conn.receive(Duration::from_secs(5)).unwrap() {
                let m = m.map_err(|e| e.to_string())?;
                if m == Message::End {
                    break;
                }
                got.push(m);
            }
            Ok(got)
        });
        let sent = [Message::Reload, Message::LogLevel(7)];
        let result = send(&path, &sent, Duration::from_secs(5));
        let served = server.join().unwrap();
        if rustix::process::geteuid().is_root() {
            result.unwrap();
            assert_eq!(served.unwrap(), sent);
        } else {
            assert!(served.unwrap_err().contains("refused"));
        }
    }
}
