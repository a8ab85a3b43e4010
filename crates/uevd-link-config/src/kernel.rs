//! What net_setup_link asks the kernel, in the network namespace of the
//! calling thread: an interface's link attributes over rtnetlink
//! (RTM_GETLINK), its driver and permanent address over the ethtool ioctl,
//! and the two changes it makes: a MAC address (RTM_SETLINK) and
//! alternative names (RTM_NEWLINKPROP).
//!
//! Each thread keeps its sockets: a netlink socket costs the kernel a
//! port in its hash table and an RCU-deferred free, and net_setup_link runs
//! for every interface. A socket belongs to the network namespace it was
//! made in, so a thread that changes namespace must call
//! [`close_sockets`] first.

use super::words::HwAddr;
use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;
use uevd_sysfs::link::attributes as attrs;

const NETLINK_ROUTE: libc::c_int = 0;
const NETLINK_GENERIC: libc::c_int = 16;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const RTM_NEWLINKPROP: u16 = 108;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_PROP_LIST: u16 = 52;
const IFLA_ALT_IFNAME: u16 = 53;
const IFLA_PERM_ADDRESS: u16 = 54;
const IFLA_EXT_MASK: u16 = 29;
/// Leave counters out of the answer: IPv6's (some ninety, each summed over
/// every CPU) and a virtual function's; the interface's own stay in, up to
/// 6.1 at least. Nothing here reads them, and the loopback's answer is a
/// quarter shorter.
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;
const NLA_F_NESTED: u16 = 1 << 15;

pub const IFF_UP: u32 = 0x1;
pub const IFF_LOOPBACK: u32 = 0x8;

/// The kernel answers at once; this only bounds a wedged socket.
const TIMEOUT: Duration = Duration::from_secs(5);

/// An interface as RTM_GETLINK describes it.
#[derive(Clone, Debug, Default)]
pub struct LinkState {
    pub ifname: Vec<u8>,
    pub iftype: u16,
    pub flags: u32,
    pub kind: Option<Vec<u8>>,
    pub address: HwAddr,
    pub permanent_address: HwAddr,
    pub altnames: Vec<Vec<u8>>,
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

struct Message(Vec<u8>);

/// Where the sequence number sits in a netlink header.
const SEQ_AT: usize = 8;

impl Message {
    /// A request; a change (any kind but RTM_GETLINK) asks for an
    /// acknowledgement, the one answer that says it was made. A query's
    /// answer is the link itself (or an error): an acknowledgement after it
    /// would cost one more read for nothing.
    fn new(kind: u16, flags: u16, ifindex: u32) -> Message {
        let ack = if kind == RTM_GETLINK { 0 } else { NLM_F_ACK };
        let mut m = Vec::with_capacity(256);
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&(NLM_F_REQUEST | ack | flags).to_ne_bytes());
        // The sequence number, set when the message is sent.
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        // struct ifinfomsg: family, pad, type, index, flags, change.
        m.extend_from_slice(&[0, 0, 0, 0]);
        m.extend_from_slice(&(ifindex as i32).to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        Message(m)
    }

    fn attr(&mut self, kind: u16, payload: &[u8]) -> &mut Self {
        let len = 4 + payload.len();
        self.0.extend_from_slice(&(len as u16).to_ne_bytes());
        self.0.extend_from_slice(&kind.to_ne_bytes());
        self.0.extend_from_slice(payload);
        self.0.resize(align4(self.0.len()), 0);
        self
    }

    fn finish(mut self) -> Vec<u8> {
        let len = self.0.len() as u32;
        self.0[..4].copy_from_slice(&len.to_ne_bytes());
        self.0
    }
}

fn cstring(s: &[u8]) -> Vec<u8> {
    [s, &[0]].concat()
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

fn netlink_socket(protocol: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the fd is owned right away.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            protocol,
        )
    };
    if fd < 0 {
        return Err(last_error());
    }
    // SAFETY: fd was just created and is ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_nl is plain data; zero means "kernel picks a port".
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: addr is a valid sockaddr_nl of the size passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(last_error());
    }
    let tv = libc::timeval {
        tv_sec: TIMEOUT.as_secs() as libc::time_t,
        tv_usec: 0,
    };
    // SAFETY: tv is a valid timeval of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(last_error());
    }
    Ok(fd)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
}

/// A thread's rtnetlink socket, the number of its last request and a
/// buffer for replies.
struct Route {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

thread_local! {
    static ROUTE: RefCell<Option<Route>> = const { RefCell::new(None) };
    static IOCTL: RefCell<Option<OwnedFd>> = const { RefCell::new(None) };
}

/// Closes the calling thread's sockets; the next request opens new ones
/// (in the namespace the thread is in then).
pub fn close_sockets() {
    ROUTE.with(|r| r.borrow_mut().take());
    IOCTL.with(|r| r.borrow_mut().take());
}

/// The descriptors of the calling thread's sockets, if open.
#[cfg(test)]
fn thread_sockets() -> (Option<i32>, Option<i32>) {
    (
        ROUTE.with(|r| r.borrow().as_ref().map(|s| s.fd.as_raw_fd())),
        IOCTL.with(|r| r.borrow().as_ref().map(|f| f.as_raw_fd())),
    )
}

/// Sends one request and returns the RTM_NEWLINK it brought back (empty
/// for a plain acknowledgement).
fn call(request: Vec<u8>) -> io::Result<Vec<u8>> {
    ROUTE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(Route {
                fd: netlink_socket(NETLINK_ROUTE)?,
                seq: 0,
                buf: vec![0u8; 64 * 1024],
            });
        }
        let route = slot.as_mut().expect("just made");
        match exchange(route, request) {
            Ok(answer) => answer,
            // A socket left with a reply half read, or wedged, is not
            // reused.
            Err(e) => {
                *slot = None;
                Err(e)
            }
        }
    })
}

/// One request and its answer. The outer error is the socket's; the
/// inner one is the kernel's answer (the exchange is complete).
fn exchange(route: &mut Route, mut request: Vec<u8>) -> io::Result<io::Result<Vec<u8>>> {
    route.seq = route.seq.wrapping_add(1).max(1);
    let seq = route.seq;
    let acked = u16_at(&request, 6) & NLM_F_ACK != 0;
    request[SEQ_AT..SEQ_AT + 4].copy_from_slice(&seq.to_ne_bytes());
    let fd = &route.fd;
    // SAFETY: sockaddr_nl is plain data; all zeros is the kernel.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    loop {
        // SAFETY: request and kernel are valid for the lengths passed.
        let r = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                request.as_ptr().cast(),
                request.len(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r >= 0 {
            break;
        }
        let e = last_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let buf = &mut route.buf;
    let mut reply = Vec::new();
    loop {
        // SAFETY: sockaddr_nl is plain data for recvfrom to fill in.
        let mut from: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        let mut from_len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        // SAFETY: buf and from are valid for the lengths passed.
        let n = unsafe {
            libc::recvfrom(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC,
                (&mut from as *mut libc::sockaddr_nl).cast(),
                &mut from_len,
            )
        };
        if n < 0 {
            let e = last_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Err(io::ErrorKind::TimedOut.into()),
                _ => return Err(e),
            }
        }
        let n = n as usize;
        if n > buf.len() {
            return Err(io::Error::other("rtnetlink reply truncated"));
        }
        // Any process may send to our port; only the kernel's word counts.
        if from.nl_pid != 0 {
            continue;
        }
        let mut msgs = &buf[..n];
        while msgs.len() >= NLMSG_HDRLEN {
            let len = u32_at(msgs, 0) as usize;
            if len < NLMSG_HDRLEN || len > msgs.len() {
                break;
            }
            let kind = u16_at(msgs, 4);
            let reply_seq = u32_at(msgs, SEQ_AT);
            if reply_seq == seq {
                match kind {
                    NLMSG_ERROR if len >= NLMSG_HDRLEN + 4 => {
                        let code = u32_at(msgs, NLMSG_HDRLEN) as i32;
                        return Ok(if code == 0 {
                            Ok(reply)
                        } else {
                            Err(io::Error::from_raw_os_error(-code))
                        });
                    }
                    RTM_NEWLINK if !acked => return Ok(Ok(msgs[..len].to_vec())),
                    RTM_NEWLINK => reply = msgs[..len].to_vec(),
                    _ => {}
                }
            }
            msgs = &msgs[align4(len).min(msgs.len())..];
        }
    }
}

fn c_string(b: &[u8]) -> Vec<u8> {
    crate::text::c_str(b).to_vec()
}

/// The kernel's RTM_NEWLINK for the interface with that index, or the
/// errno it answered; a [`uevd_sysfs::link::LinkQuery`].
pub fn link_message(ifindex: u32) -> Result<Vec<u8>, i32> {
    call(link_query(ifindex)).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

/// The RTM_GETLINK for an interface index, counters left out.
fn link_query(ifindex: u32) -> Vec<u8> {
    let mut m = Message::new(RTM_GETLINK, 0, ifindex);
    m.attr(IFLA_EXT_MASK, &RTEXT_FILTER_SKIP_STATS.to_ne_bytes());
    m.finish()
}

/// The interface with that index. ENODEV when there is none.
pub fn get_link(ifindex: u32) -> io::Result<LinkState> {
    parse_link(link_message(ifindex).map_err(io::Error::from_raw_os_error))
}

/// The link an answer to RTM_GETLINK ([`link_message`]) describes.
/// ENODEV when there is none.
pub fn parse_link(answer: Result<impl AsRef<[u8]>, io::Error>) -> io::Result<LinkState> {
    let reply = match answer {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            return Err(io::Error::from_raw_os_error(libc::ENODEV))
        }
        r => r?,
    };
    let reply = reply.as_ref();
    if reply.len() < NLMSG_HDRLEN + IFINFOMSG_LEN {
        return Err(io::Error::from_raw_os_error(libc::ENODEV));
    }
    let info = &reply[NLMSG_HDRLEN..];
    let mut link = LinkState {
        iftype: u16_at(info, 2),
        flags: u32_at(info, 8),
        ..LinkState::default()
    };
    for (kind, payload) in attrs(&info[IFINFOMSG_LEN..]) {
        match kind {
            IFLA_IFNAME => link.ifname = c_string(payload),
            IFLA_ADDRESS => link.address = HwAddr(payload.to_vec()),
            IFLA_PERM_ADDRESS => link.permanent_address = HwAddr(payload.to_vec()),
            IFLA_LINKINFO => {
                for (k, v) in attrs(payload) {
                    if k == IFLA_INFO_KIND {
                        link.kind = Some(c_string(v));
                    }
                }
            }
            IFLA_PROP_LIST => {
                for (k, v) in attrs(payload) {
                    if k == IFLA_ALT_IFNAME {
                        link.altnames.push(c_string(v));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(link)
}

/// Sets the interface's hardware address.
pub fn set_address(ifindex: u32, address: &HwAddr) -> io::Result<()> {
    let mut m = Message::new(RTM_SETLINK, 0, ifindex);
    m.attr(IFLA_ADDRESS, &address.0);
    call(m.finish()).map(drop)
}

/// Adds alternative names to the interface.
pub fn add_altnames(ifindex: u32, names: &[Vec<u8>]) -> io::Result<()> {
    let mut list = Message(Vec::new());
    for n in names {
        list.attr(IFLA_ALT_IFNAME, &cstring(n));
    }
    let mut m = Message::new(RTM_NEWLINKPROP, NLM_F_EXCL | NLM_F_CREATE, ifindex);
    m.attr(IFLA_PROP_LIST | NLA_F_NESTED, &list.0);
    call(m.finish()).map(drop)
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GDRVINFO: u32 = 0x3;
const ETHTOOL_GPERMADDR: u32 = 0x20;

#[repr(C)]
struct IfReq {
    name: [u8; 16],
    data: *mut libc::c_void,
    _rest: [u8; 16],
}

#[repr(C)]
struct DrvInfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

#[repr(C)]
struct PermAddr {
    cmd: u32,
    size: u32,
    data: [u8; HwAddr::MAX_LEN],
}

/// A socket to aim ioctls at; any family will do, the kernel routes
/// SIOCETHTOOL by interface name.
fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd >= 0 {
        // SAFETY: fd was just created and is ours.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    netlink_socket(NETLINK_GENERIC)
}

fn ethtool(ifname: &[u8], data: *mut libc::c_void) -> io::Result<()> {
    IOCTL.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(ioctl_socket()?);
        }
        ethtool_on(slot.as_ref().expect("just made"), ifname, data)
    })
}

fn ethtool_on(fd: &OwnedFd, ifname: &[u8], data: *mut libc::c_void) -> io::Result<()> {
    let mut req = IfReq {
        name: [0; 16],
        data,
        _rest: [0; 16],
    };
    let n = ifname.len().min(15);
    req.name[..n].copy_from_slice(&ifname[..n]);
    // SAFETY: req is a valid ifreq whose data points at the command
    // structure the caller owns for the duration of the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut req as *mut IfReq) };
    if r < 0 {
        return Err(last_error());
    }
    Ok(())
}

/// The driver's name as ethtool reports it (not always the module name).
pub fn driver(ifname: &[u8]) -> io::Result<Vec<u8>> {
    // SAFETY: DrvInfo is plain data.
    let mut info: DrvInfo = unsafe { std::mem::zeroed() };
    info.cmd = ETHTOOL_GDRVINFO;
    ethtool(ifname, (&mut info as *mut DrvInfo).cast())?;
    let d = c_string(&info.driver);
    if d.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENODATA));
    }
    Ok(d)
}

/// Whether RTM_NEWLINK names the permanent address whenever it is not all
/// zeros (IFLA_PERM_ADDRESS, Linux 5.6 and later). Then its absence means
/// an address of zeros as long as the current one, which is what ethtool
/// would report: asking it would cost a call per interface for nothing.
pub fn reports_permanent_address() -> bool {
    static ANSWER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ANSWER.get_or_init(|| release_at_least(uevd_host::kernel_release(), (5, 6)))
}

/// Whether a kernel release ("6.1.0-56-amd64") is at least `major.minor`.
fn release_at_least(release: &[u8], (major, minor): (u32, u32)) -> bool {
    let mut parts = release.split(|c| !c.is_ascii_digit()).map(|p| {
        std::str::from_utf8(p)
            .ok()
            .and_then(|p| p.parse::<u32>().ok())
    });
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(a), Some(b)) => (a, b) >= (major, minor),
        _ => false,
    }
}

/// The address the hardware came with, for kernels that do not put it in
/// RTM_NEWLINK.
pub fn permanent_address(ifname: &[u8]) -> io::Result<HwAddr> {
    let mut pa = PermAddr {
        cmd: ETHTOOL_GPERMADDR,
        size: HwAddr::MAX_LEN as u32,
        data: [0; HwAddr::MAX_LEN],
    };
    ethtool(ifname, (&mut pa as *mut PermAddr).cast())?;
    match pa.size as usize {
        0 => Err(io::Error::from_raw_os_error(libc::ENODATA)),
        n if n > HwAddr::MAX_LEN => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        n => Ok(HwAddr(pa.data[..n].to_vec())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_described() {
        // Index 1 is the loopback interface in every network namespace.
        let lo = match get_link(1) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("skipped: no rtnetlink here: {e}");
                return;
            }
        };
        assert_eq!(lo.ifname, b"lo");
        assert_eq!(lo.iftype, 772);
        assert_ne!(lo.flags & IFF_LOOPBACK, 0);
        assert_eq!(lo.address, HwAddr(vec![0; 6]));
        assert!(driver(b"lo").is_err());
        assert_eq!(
            get_link(0x7fff_fff0).unwrap_err().raw_os_error(),
            Some(libc::ENODEV)
        );
        // The answer leaves counters out (IPv6's at least): shorter than
        // the whole one.
        let lean = link_message(1).unwrap();
        let whole = call(Message::new(RTM_GETLINK, 0, 1).finish()).unwrap();
        eprintln!("lo: {} bytes against {}", lean.len(), whole.len());
        assert!(lean.len() < whole.len());
    }

    #[test]
    fn releases_are_compared_by_major_and_minor() {
        assert!(release_at_least(b"6.1.0-56-amd64", (5, 6)));
        assert!(release_at_least(b"5.6.0", (5, 6)));
        assert!(release_at_least(b"5.10", (5, 6)));
        assert!(!release_at_least(b"5.4.0-150-generic", (5, 6)));
        assert!(!release_at_least(b"4.19.0", (5, 6)));
        assert!(!release_at_least(b"", (5, 6)));
        assert!(!release_at_least(b"x", (5, 6)));
    }

    #[test]
    fn one_socket_serves_a_thread_and_is_reopened_after_closing() {
        if get_link(1).is_err() {
            eprintln!("skipped: no rtnetlink here");
            return;
        }
        let _ = driver(b"lo");
        // The thread's own sockets, not the process's descriptor count,
        // which the tests running beside this one change.
        let first = thread_sockets();
        assert!(first.0.is_some() && first.1.is_some(), "{first:?}");
        for _ in 0..50 {
            assert_eq!(get_link(1).unwrap().ifname, b"lo");
            let _ = driver(b"lo");
            assert_eq!(thread_sockets(), first, "the same sockets serve every call");
        }
        close_sockets();
        assert_eq!(thread_sockets(), (None, None), "closed");
        assert_eq!(get_link(1).unwrap().ifname, b"lo");
        assert!(thread_sockets().0.is_some(), "reopened");
        // A kernel's "no" leaves the socket fit for the next question.
        assert!(get_link(0x7fff_fff0).is_err());
        assert_eq!(get_link(1).unwrap().ifname, b"lo");
    }

    #[test]
    fn messages_are_laid_out_for_the_kernel() {
        let mut m = Message::new(RTM_SETLINK, 0, 7);
        m.attr(IFLA_ADDRESS, &[1, 2, 3, 4, 5, 6]);
        let b = m.finish();
        assert_eq!(b.len(), 16 + 16 + 12);
        assert_eq!(u32_at(&b, 0) as usize, b.len());
        assert_eq!(u16_at(&b, 4), RTM_SETLINK);
        assert_eq!(u16_at(&b, 6), NLM_F_REQUEST | NLM_F_ACK);
        assert_eq!(u32_at(&b, 20), 7);
        // A query is answered by the link alone, no acknowledgement, and
        // without its counters.
        let q = link_query(7);
        assert_eq!(u16_at(&q, 6), NLM_F_REQUEST);
        assert_eq!(
            attrs(&q[32..]).collect::<Vec<_>>(),
            vec![(IFLA_EXT_MASK, &8u32.to_ne_bytes()[..])]
        );
        assert_eq!(
            attrs(&b[32..]).collect::<Vec<_>>(),
            vec![(IFLA_ADDRESS, &[1u8, 2, 3, 4, 5, 6][..])]
        );
        assert_eq!(std::mem::size_of::<IfReq>(), 40);
        assert_eq!(std::mem::size_of::<DrvInfo>(), 196);
    }
}
