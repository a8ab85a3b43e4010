//! NETLINK_KOBJECT_UEVENT sockets, and interface renaming over rtnetlink
//! (see [`rtnl`]).
//!
//! Group 1 carries the kernel's own uevents; group 2 carries events a device
//! manager has finished processing, in udev's monitor format. Anyone with
//! CAP_NET_ADMIN, and in older kernels anyone at all, can multicast into these
//! groups, so every message is checked: kernel events must come from port 0
//! with uid 0 credentials (CVE-2009-1185 was a udev that did not check), and
//! monitor messages must carry uid 0 credentials.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use rustix::net::netlink::{SocketAddrNetlink, KOBJECT_UEVENT};
use rustix::net::{
    bind, recvmsg, sendto, sockopt, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage,
    RecvFlags, ReturnFlags, SendFlags, SocketFlags, SocketType,
};
use std::fmt;
use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use uevd_uevent::{monitor, ParseError, Uevent, MAX_MESSAGE};

pub mod ratelimit;
pub mod rtnl;
pub use ratelimit::RateLimit;
pub use rtnl::{rename_interface, valid_interface_name};

/// The kernel's multicast group.
pub const GROUP_KERNEL: u32 = 1;
/// The group on which processed events are announced to libudev clients.
pub const GROUP_UDEV: u32 = 2;

/// The receive buffer udevd asks for, so that a boot-time storm fits.
pub const DEFAULT_RECEIVE_BUFFER: usize = 128 * 1024 * 1024;

/// Why a received message was dropped.
#[derive(Debug)]
pub enum Rejected {
    /// Not sent by the kernel (port id of the sender).
    NotFromKernel(u32),
    /// No credentials, or credentials of a user other than root.
    BadCredentials(Option<u32>),
    Truncated,
    Malformed(ParseError),
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejected::NotFromKernel(pid) => {
                write!(f, "sent by userspace port {pid}, not the kernel")
            }
            Rejected::BadCredentials(Some(uid)) => write!(f, "sent with uid {uid}, not root"),
            Rejected::BadCredentials(None) => write!(f, "sent without credentials"),
            Rejected::Truncated => write!(f, "truncated (larger than {MAX_MESSAGE} bytes)"),
            Rejected::Malformed(e) => write!(f, "malformed: {e}"),
        }
    }
}

/// What one receive produced.
#[derive(Debug)]
pub enum Received {
    Event(Uevent),
    Rejected(Rejected),
    /// The kernel could not queue messages for us: events were lost.
    Overflow,
    /// Nothing to read (non-blocking socket).
    WouldBlock,
}

/// Which kind of message a socket expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Kernel,
    Udev,
}

/// A uevent socket bound to one multicast group.
pub struct UeventSocket {
    fd: OwnedFd,
    source: Source,
    buf: Vec<u8>,
}

fn open(groups: u32, receive_buffer: Option<usize>) -> io::Result<OwnedFd> {
    let fd = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        Some(KOBJECT_UEVENT),
    )?;
    if let Some(size) = receive_buffer {
        // SO_RCVBUFFORCE needs CAP_NET_ADMIN; without it take what the
        // system limit allows rather than fail.
        if sockopt::set_socket_recv_buffer_size_force(&fd, size).is_err() {
            sockopt::set_socket_recv_buffer_size(&fd, size)?;
        }
    }
    sockopt::set_socket_passcred(&fd, true)?;
    bind(&fd, &SocketAddrNetlink::new(0, groups))?;
    Ok(fd)
}

impl UeventSocket {
    /// Listens to the kernel's uevents.
    pub fn kernel(receive_buffer: usize) -> io::Result<UeventSocket> {
        Ok(UeventSocket {
            fd: open(1 << (GROUP_KERNEL - 1), Some(receive_buffer))?,
            source: Source::Kernel,
            buf: vec![0; MAX_MESSAGE],
        })
    }

    /// Takes over a kernel uevent socket that a service manager opened and
    /// passed on (systemd's `systemd-udevd-kernel.socket`: `ListenNetlink=
    /// kobject-uevent 1`, with its large receive buffer). Events the kernel
    /// sent while no daemon ran, or while the previous one restarted, are
    /// waiting in it. Anything but a NETLINK_KOBJECT_UEVENT socket is
    /// refused (and given back).
    pub fn kernel_from_fd(fd: OwnedFd) -> Result<UeventSocket, (OwnedFd, io::Error)> {
        let is_uevent = sockopt::socket_domain(&fd) == Ok(AddressFamily::NETLINK)
            && sockopt::socket_protocol(&fd) == Ok(Some(KOBJECT_UEVENT));
        if !is_uevent {
            let e = io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a NETLINK_KOBJECT_UEVENT socket",
            );
            return Err((fd, e));
        }
        // The kernel socket's sender check needs the credentials; the main
        // loop never blocks on it; programs that rules start do not get it.
        let setup = sockopt::set_socket_passcred(&fd, true)
            .and_then(|()| rustix::io::ioctl_fionbio(&fd, true))
            .and_then(|()| rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::CLOEXEC));
        if let Err(e) = setup {
            return Err((fd, e.into()));
        }
        Ok(UeventSocket {
            fd,
            source: Source::Kernel,
            buf: vec![0; MAX_MESSAGE],
        })
    }

    /// Listens to processed events announced by a device manager.
    pub fn udev_monitor(receive_buffer: usize) -> io::Result<UeventSocket> {
        Ok(UeventSocket {
            fd: open(1 << (GROUP_UDEV - 1), Some(receive_buffer))?,
            source: Source::Udev,
            buf: vec![0; MAX_MESSAGE],
        })
    }

    /// The receive buffer the kernel actually granted.
    pub fn receive_buffer(&self) -> io::Result<usize> {
        Ok(sockopt::socket_recv_buffer_size(&self.fd)?)
    }

    /// Receives one message and checks who sent it.
    pub fn recv(&mut self) -> io::Result<Received> {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmCredentials(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [IoSliceMut::new(&mut self.buf)];
        let msg = match recvmsg(&self.fd, &mut iov, &mut control, RecvFlags::empty()) {
            Ok(m) => m,
            Err(Errno::AGAIN) => return Ok(Received::WouldBlock),
            Err(Errno::NOBUFS) => return Ok(Received::Overflow),
            Err(Errno::INTR) => return Ok(Received::WouldBlock),
            Err(e) => return Err(e.into()),
        };
        let uid = control.drain().find_map(|c| match c {
            RecvAncillaryMessage::ScmCredentials(cred) => Some(cred.uid.as_raw()),
            _ => None,
        });
        let sender = msg
            .address
            .and_then(|a| SocketAddrNetlink::try_from(a).ok())
            .map(|a| a.pid());
        if msg.flags.contains(ReturnFlags::TRUNC) {
            return Ok(Received::Rejected(Rejected::Truncated));
        }
        if self.source == Source::Kernel && sender != Some(0) {
            return Ok(Received::Rejected(Rejected::NotFromKernel(
                sender.unwrap_or(u32::MAX),
            )));
        }
        if uid != Some(0) {
            return Ok(Received::Rejected(Rejected::BadCredentials(uid)));
        }
        let bytes = &self.buf[..msg.bytes];
        let parsed = match self.source {
            Source::Kernel => Uevent::parse_kernel(bytes),
            Source::Udev => monitor::decode(bytes),
        };
        Ok(match parsed {
            Ok(ev) => Received::Event(ev),
            Err(e) => Received::Rejected(Rejected::Malformed(e)),
        })
    }
}

impl AsFd for UeventSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Announces processed events on netlink group 2.
pub struct Broadcaster {
    fd: OwnedFd,
}

impl Broadcaster {
    pub fn new() -> io::Result<Broadcaster> {
        Ok(Broadcaster { fd: open(0, None)? })
    }

    /// Sends one encoded monitor message. Having no listener is not an error.
    pub fn send(&self, message: &[u8]) -> io::Result<()> {
        self.send_to_group(message, GROUP_UDEV)
    }

    /// Sends raw bytes to any group (the kernel-format rebroadcast that
    /// libudev-zero clients read uses other groups).
    pub fn send_to_group(&self, message: &[u8], group: u32) -> io::Result<()> {
        let dest = SocketAddrNetlink::new(0, 1 << (group - 1));
        match sendto(&self.fd, message, SendFlags::empty(), &dest) {
            Ok(_) | Err(Errno::CONNREFUSED) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Waits until `fd` is readable or `timeout` passes; true if readable.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Option<std::time::Duration>) -> io::Result<bool> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let ts = timeout.map(|t| Timespec {
        tv_sec: t.as_secs() as i64,
        tv_nsec: t.subsec_nanos() as i64,
    });
    loop {
        match poll(&mut fds, ts.as_ref()) {
            Ok(n) => return Ok(n > 0),
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}
