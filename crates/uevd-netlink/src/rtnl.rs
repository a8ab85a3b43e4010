//! Link changes over rtnetlink (NETLINK_ROUTE): renaming network interfaces
//! for `NAME=` on net devices.

use rustix::io::Errno;
use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::{
    bind, recvfrom, sendto, sockopt, AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType,
};
use std::io;
use std::time::Duration;

/// IFNAMSIZ, including the terminating NUL.
const IFNAMSIZ: usize = 16;

const RTM_SETLINK: u16 = 19;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const IFLA_IFNAME: u16 = 3;

const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const RTA_HDRLEN: usize = 4;

/// The kernel answers a link request before sendto() returns; this only
/// keeps a kernel bug from hanging a worker forever.
const ACK_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether the kernel would accept `name` for an interface (its
/// dev_valid_name()): 1 to 15 bytes, not "." or "..", and no '/', ':',
/// whitespace or NUL.
pub fn valid_interface_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() < IFNAMSIZ
        && name != b"."
        && name != b".."
        && !name.iter().any(|&c| {
            matches!(
                c,
                b'/' | b':' | 0 | b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'
            )
        })
}

fn align4(len: usize) -> usize {
    (len + 3) & !3
}

/// An RTM_SETLINK request for `ifindex` carrying IFLA_IFNAME.
fn setlink_name_request(ifindex: u32, name: &[u8], seq: u32) -> Vec<u8> {
    let rta_len = RTA_HDRLEN + name.len() + 1;
    let total = NLMSG_HDRLEN + IFINFOMSG_LEN + align4(rta_len);
    let mut msg = Vec::with_capacity(total);
    // struct nlmsghdr; the port id is left to the kernel.
    msg.extend_from_slice(&(total as u32).to_ne_bytes());
    msg.extend_from_slice(&RTM_SETLINK.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    msg.extend_from_slice(&seq.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    // struct ifinfomsg: family AF_UNSPEC, no flag changes.
    msg.extend_from_slice(&[0, 0]);
    msg.extend_from_slice(&0u16.to_ne_bytes());
    msg.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    // struct rtattr with the NUL-terminated name.
    msg.extend_from_slice(&(rta_len as u16).to_ne_bytes());
    msg.extend_from_slice(&IFLA_IFNAME.to_ne_bytes());
    msg.extend_from_slice(name);
    msg.resize(total, 0);
    msg
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap())
}

/// Looks for the answer to `seq` in one datagram: `Some(Ok)` for an ack,
/// `Some(Err)` for a nack, `None` if it is not there.
fn find_ack(mut buf: &[u8], seq: u32) -> Option<io::Result<()>> {
    while buf.len() >= NLMSG_HDRLEN {
        let len = u32_at(buf, 0) as usize;
        if len < NLMSG_HDRLEN || len > buf.len() {
            return Some(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "malformed rtnetlink reply",
            )));
        }
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if kind == NLMSG_ERROR && u32_at(buf, 8) == seq {
            if len < NLMSG_HDRLEN + 4 {
                return Some(Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "short rtnetlink error message",
                )));
            }
            let error = u32_at(buf, NLMSG_HDRLEN) as i32;
            return Some(if error == 0 {
                Ok(())
            } else {
                Err(io::Error::from_raw_os_error(-error))
            });
        }
        buf = &buf[align4(len).min(buf.len())..];
    }
    None
}

/// Renames the interface with index `ifindex` to `new_name`, in the network
/// namespace of the calling thread.
///
/// An invalid name (see [`valid_interface_name`]) or ifindex 0 fails with
/// EINVAL without asking the kernel. Otherwise the kernel's answer is
/// returned as it is: ENODEV for no such interface, EEXIST for a name in
/// use, EPERM without CAP_NET_ADMIN, and EBUSY for an interface that is up,
/// but only before Linux 6.2: later kernels rename it. udev 252 leaves an
/// interface that is up alone (it checks IFF_UP first), so a caller that
/// wants the same must check the interface's flags before calling this.
pub fn rename_interface(ifindex: u32, new_name: &[u8]) -> io::Result<()> {
    if !valid_interface_name(new_name) || ifindex == 0 || ifindex > i32::MAX as u32 {
        return Err(Errno::INVAL.into());
    }
    // Protocol 0 is NETLINK_ROUTE.
    let fd = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        None,
    )?;
    bind(&fd, &SocketAddrNetlink::new(0, 0))?;
    sockopt::set_socket_timeout(&fd, sockopt::Timeout::Recv, Some(ACK_TIMEOUT))?;

    // A fresh socket sees only answers to its own requests.
    let seq = 1;
    let request = setlink_name_request(ifindex, new_name, seq);
    let kernel = SocketAddrNetlink::new(0, 0);
    loop {
        match sendto(&fd, &request, SendFlags::empty(), &kernel) {
            Ok(_) => break,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }

    let mut buf = vec![0u8; 8192];
    loop {
        let (bytes, _, from) = match recvfrom(&fd, &mut buf[..], RecvFlags::empty()) {
            Ok(r) => r,
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return Err(Errno::TIMEDOUT.into()),
            Err(e) => return Err(e.into()),
        };
        // Any process may send to our port; only the kernel's word counts.
        let from_kernel = from
            .and_then(|a| SocketAddrNetlink::try_from(a).ok())
            .is_some_and(|a| a.pid() == 0);
        if !from_kernel {
            continue;
        }
        if let Some(result) = find_ack(&buf[..bytes], seq) {
            return result;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in [
            &b"eth0"[..],
            b"a",
            b"enp0s31f6",
            b"123456789012345",
            b"wl-x_y.z",
            b"\xc3\xa9",
        ] {
            assert!(valid_interface_name(ok), "{ok:?}");
        }
        for bad in [
            &b""[..],
            b"1234567890123456",
            b".",
            b"..",
            b"a/b",
            b"a:1",
            b"a b",
            b"a\tb",
            b"a\nb",
            b"a\x0bb",
            b"a\x0cb",
            b"a\rb",
            b"a\0b",
        ] {
            assert!(!valid_interface_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn request_layout() {
        let msg = setlink_name_request(7, b"lan0", 42);
        // 16 header + 16 ifinfomsg + rtattr of 4 + "lan0\0" padded to 12.
        assert_eq!(msg.len(), 44);
        assert_eq!(u32_at(&msg, 0), 44);
        assert_eq!(u16::from_ne_bytes([msg[4], msg[5]]), RTM_SETLINK);
        assert_eq!(
            u16::from_ne_bytes([msg[6], msg[7]]),
            NLM_F_REQUEST | NLM_F_ACK
        );
        assert_eq!(u32_at(&msg, 8), 42);
        assert_eq!(u32_at(&msg, 20), 7);
        assert_eq!(u16::from_ne_bytes([msg[32], msg[33]]), 9);
        assert_eq!(u16::from_ne_bytes([msg[34], msg[35]]), IFLA_IFNAME);
        assert_eq!(&msg[36..44], b"lan0\0\0\0\0");
    }

    fn error_message(seq: u32, error: i32) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&36u32.to_ne_bytes());
        m.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&error.to_ne_bytes());
        m.extend_from_slice(&[0; 16]);
        m
    }

    #[test]
    fn acks_and_nacks() {
        assert!(matches!(find_ack(&error_message(1, 0), 1), Some(Ok(()))));
        let nack = find_ack(&error_message(1, -libc_enodev()), 1)
            .unwrap()
            .unwrap_err();
        assert_eq!(nack.raw_os_error(), Some(libc_enodev()));
        assert!(find_ack(&error_message(2, 0), 1).is_none());
        // Two messages in one datagram: the second is ours.
        let mut both = error_message(5, -1);
        both.extend(error_message(1, 0));
        assert!(matches!(find_ack(&both, 1), Some(Ok(()))));
        assert!(find_ack(&[0; 8], 1).is_none());
        assert!(matches!(
            find_ack(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 1),
            Some(Err(_))
        ));
    }

    fn libc_enodev() -> i32 {
        Errno::NODEV.raw_os_error()
    }

    #[test]
    fn refused_before_asking_the_kernel() {
        assert_eq!(
            rename_interface(1, b"a/b").unwrap_err().raw_os_error(),
            Some(Errno::INVAL.raw_os_error())
        );
        assert_eq!(
            rename_interface(0, b"ok0").unwrap_err().raw_os_error(),
            Some(Errno::INVAL.raw_os_error())
        );
    }
}
