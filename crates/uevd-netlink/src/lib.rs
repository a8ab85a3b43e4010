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

/// A uevent socket bound to `groups`. A `prefix` filter is attached
/// before the socket is bound, so that nothing else is ever queued on it.
fn open(
    groups: u32,
    receive_buffer: Option<usize>,
    prefix: Option<&[u8; 12]>,
) -> io::Result<OwnedFd> {
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
    if let Some(prefix) = prefix {
        attach_prefix_filter(&fd, prefix)?;
    }
    bind(&fd, &SocketAddrNetlink::new(0, groups))?;
    Ok(fd)
}

impl UeventSocket {
    /// Listens to the kernel's uevents.
    pub fn kernel(receive_buffer: usize) -> io::Result<UeventSocket> {
        Ok(UeventSocket {
            fd: open(1 << (GROUP_KERNEL - 1), Some(receive_buffer), None)?,
            source: Source::Kernel,
            buf: vec![0; MAX_MESSAGE],
        })
    }

    /// Listens to the kernel's announcements that a module is live
    /// (`add@/module/NAME`, sent once its init has returned) and to nothing
    /// else: a filter attached to the socket makes the kernel drop every
    /// other uevent before queueing it, so that this socket costs nothing
    /// per device event. Messages that pass are checked as any kernel
    /// event is.
    pub fn kernel_module_announcements() -> io::Result<UeventSocket> {
        Ok(UeventSocket {
            fd: open(1 << (GROUP_KERNEL - 1), None, Some(MODULE_ADD_PREFIX))?,
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
            fd: open(1 << (GROUP_UDEV - 1), Some(receive_buffer), None)?,
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

/// How a kernel uevent announcing a live module begins: the kernel's
/// message starts with `ACTION@DEVPATH`, and modules live under /module.
const MODULE_ADD_PREFIX: &[u8; 12] = b"add@/module/";

/// Attaches a classic BPF filter that accepts a message only if it begins
/// with `prefix` (whole 32-bit words, compared as the kernel's absolute
/// loads read them, in network byte order).
fn attach_prefix_filter(fd: &impl AsFd, prefix: &[u8; 12]) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let words = prefix.chunks_exact(4).collect::<Vec<_>>();
    let mut program = Vec::with_capacity(2 * words.len() + 2);
    for (i, word) in words.iter().enumerate() {
        let value = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        // On a mismatch, jump over the remaining checks and the accept.
        let to_reject = (2 * (words.len() - i - 1) + 1) as u8;
        program.push(libc::sock_filter {
            code: BPF_LD_W_ABS,
            jt: 0,
            jf: 0,
            k: (4 * i) as u32,
        });
        program.push(libc::sock_filter {
            code: BPF_JEQ_K,
            jt: 0,
            jf: to_reject,
            k: value,
        });
    }
    program.push(libc::sock_filter {
        code: BPF_RET_K,
        jt: 0,
        jf: 0,
        k: u32::MAX,
    });
    program.push(libc::sock_filter {
        code: BPF_RET_K,
        jt: 0,
        jf: 0,
        k: 0,
    });
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: `fprog` points at `program`, which outlives the call; the
    // kernel copies the program and keeps no pointer to it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
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
        Ok(Broadcaster {
            fd: open(0, None, None)?,
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;

    #[test]
    fn the_module_filter_lets_through_only_module_announcements() {
        let (tx, rx) = UnixDatagram::pair().unwrap();
        attach_prefix_filter(&rx, MODULE_ADD_PREFIX).unwrap();
        rx.set_nonblocking(true).unwrap();
        let sent: [&[u8]; 6] = [
            b"change@/module/loop\0ACTION=change\0",
            b"add@/devices/virtual/block/loop0\0ACTION=add\0",
            b"add@/module/loop\0ACTION=add\0DEVPATH=/module/loop\0",
            b"add@/modul",
            b"remove@/module/loop\0",
            b"add@/module/virtio_pci\0ACTION=add\0",
        ];
        for m in sent {
            tx.send(m).unwrap();
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        while let Ok(n) = rx.recv(&mut buf) {
            got.push(buf[..n].to_vec());
        }
        assert_eq!(got, [sent[2].to_vec(), sent[5].to_vec()]);
    }

    #[test]
    fn a_module_announcement_socket_opens_as_root() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let socket = UeventSocket::kernel_module_announcements().unwrap();
        assert_eq!(socket.source, Source::Kernel);
    }
}
