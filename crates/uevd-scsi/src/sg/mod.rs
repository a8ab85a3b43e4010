//! What udev's helper programs need from a device node: SCSI commands
//! through `SG_IO` (the sg v3 header, and the bsg v4 one), and the few
//! plain ioctls (`HDIO_GET_IDENTITY`, the CD-ROM ones).
//!
//! The emulations talk to a [`Node`] rather than to a file descriptor so
//! that their logic can run against scripted devices (see `script`), which
//! is how truncated, contradictory or hostile replies get exercised.
//!
//! Every request is issued with the same fields (timeouts, flags, buffer
//! sizes) as the program it stands in for: a device that behaves
//! differently depending on them must answer both the same way.

pub(crate) mod getopt;
#[cfg(test)]
#[allow(dead_code)]
pub(crate) mod script;
pub(crate) mod sysfs;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

pub(crate) const SG_IO: u32 = 0x2285;
pub(crate) const HDIO_GET_IDENTITY: u32 = 0x030d;
pub(crate) const CDROM_GET_CAPABILITY: u32 = 0x5331;
pub(crate) const CDROM_DRIVE_STATUS: u32 = 0x5326;
pub(crate) const CDROM_CLEAR_OPTIONS: u32 = 0x5321;
pub(crate) const CDROM_LOCKDOOR: u32 = 0x5329;

const SG_DXFER_NONE: i32 = -1;
const SG_DXFER_FROM_DEV: i32 = -3;
const BSG_PROTOCOL_SCSI: u32 = 0;
const BSG_SUB_PROTOCOL_SCSI_CMD: u32 = 0;

/// One sg v3 (`struct sg_io_hdr`) command: what goes in, and what the
/// kernel reported back.
pub(crate) struct V3<'a> {
    pub cdb: &'a [u8],
    /// None: no data phase (`SG_DXFER_NONE`).
    pub data: Option<&'a mut [u8]>,
    /// Its length is `mx_sb_len`.
    pub sense: &'a mut [u8],
    pub timeout: u32,
    pub flags: u32,
    pub status: u8,
    pub masked_status: u8,
    pub msg_status: u8,
    pub sb_len_wr: u8,
    pub host_status: u16,
    pub driver_status: u16,
    pub resid: i32,
    pub info: u32,
}

impl<'a> V3<'a> {
    pub fn new(cdb: &'a [u8], data: Option<&'a mut [u8]>, sense: &'a mut [u8]) -> V3<'a> {
        V3 {
            cdb,
            data,
            sense,
            timeout: 0,
            flags: 0,
            status: 0,
            masked_status: 0,
            msg_status: 0,
            sb_len_wr: 0,
            host_status: 0,
            driver_status: 0,
            resid: 0,
            info: 0,
        }
    }

    /// Bytes the device actually returned, as far as the kernel knows.
    pub fn transferred(&self) -> usize {
        let len = self.data.as_ref().map_or(0, |d| d.len());
        transferred(len, self.resid)
    }
}

/// One bsg v4 (`struct sg_io_v4`) command with a data-in phase.
pub(crate) struct V4<'a> {
    pub cdb: &'a [u8],
    pub din: &'a mut [u8],
    /// Its length is `max_response_len`.
    pub response: &'a mut [u8],
    pub timeout: u32,
    pub device_status: u32,
    pub transport_status: u32,
    pub driver_status: u32,
    pub response_len: u32,
    pub din_resid: i32,
    pub info: u32,
}

impl<'a> V4<'a> {
    pub fn new(cdb: &'a [u8], din: &'a mut [u8], response: &'a mut [u8]) -> V4<'a> {
        V4 {
            cdb,
            din,
            response,
            timeout: 0,
            device_status: 0,
            transport_status: 0,
            driver_status: 0,
            response_len: 0,
            din_resid: 0,
            info: 0,
        }
    }

    pub fn transferred(&self) -> usize {
        transferred(self.din.len(), self.din_resid)
    }
}

fn transferred(len: usize, resid: i32) -> usize {
    match usize::try_from(resid) {
        Ok(r) => len.saturating_sub(r),
        Err(_) => len,
    }
}

/// A node's device number, and whether it is a block or character device
/// (which of `/sys/dev/block` and `/sys/dev/char` names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DevNum {
    pub block: bool,
    pub major: u32,
    pub minor: u32,
}

/// An open device node.
pub(crate) trait Node {
    /// What the node is, if it is a device node at all.
    fn devnum(&self) -> Option<DevNum> {
        None
    }
    fn sg_v3(&mut self, io: &mut V3<'_>) -> io::Result<()>;
    fn sg_v4(&mut self, io: &mut V4<'_>) -> io::Result<()>;
    /// An ioctl whose argument is a number; returns the ioctl's value.
    fn ioctl_int(&mut self, request: u32, arg: u64) -> io::Result<i32>;
    /// An ioctl that fills `buf` (its whole size is the kernel's struct).
    fn ioctl_buf(&mut self, request: u32, buf: &mut [u8]) -> io::Result<i32>;
}

/// Block device majors whose nodes refused an SG_IO v4 header with
/// EINVAL. The block layer's SG_IO takes v3 headers only (`sg_io()`
/// refuses any other `interface_id`, in every kernel version), so a
/// driver that refused once refuses on every node. scsi_id tries v4 first
/// on each run and ata_id on each command; once a major refused, their v4
/// tries get the kernel's answer without asking it (see [`Remembering`]).
/// Character majors are not kept: bsg takes v4, and a dynamic major may go
/// to another driver.
#[derive(Default)]
pub(crate) struct V4Refusals(std::sync::Mutex<Vec<u32>>);

impl V4Refusals {
    pub const fn new() -> V4Refusals {
        V4Refusals(std::sync::Mutex::new(Vec::new()))
    }

    fn majors(&self) -> std::sync::MutexGuard<'_, Vec<u32>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn refused(&self, node: DevNum) -> bool {
        node.block && self.majors().contains(&node.major)
    }

    fn note(&self, node: DevNum) {
        if node.block {
            let mut m = self.majors();
            if !m.contains(&node.major) {
                m.push(node.major);
            }
        }
    }
}

/// A node whose v4 refusals are remembered across runs, and whose device
/// number is looked up once.
pub(crate) struct Remembering {
    node: Box<dyn Node>,
    refusals: &'static V4Refusals,
    devnum: std::cell::OnceCell<Option<DevNum>>,
}

impl Remembering {
    pub fn new(node: Box<dyn Node>, refusals: &'static V4Refusals) -> Remembering {
        Remembering {
            node,
            refusals,
            devnum: std::cell::OnceCell::new(),
        }
    }
}

impl Node for Remembering {
    fn devnum(&self) -> Option<DevNum> {
        *self.devnum.get_or_init(|| self.node.devnum())
    }

    fn sg_v3(&mut self, io: &mut V3<'_>) -> io::Result<()> {
        self.node.sg_v3(io)
    }

    fn sg_v4(&mut self, io: &mut V4<'_>) -> io::Result<()> {
        let devnum = self.devnum();
        if devnum.is_some_and(|d| self.refusals.refused(d)) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let r = self.node.sg_v4(io);
        if let (Err(e), Some(d)) = (&r, devnum) {
            if e.raw_os_error() == Some(libc::EINVAL) {
                self.refusals.note(d);
            }
        }
        r
    }

    fn ioctl_int(&mut self, request: u32, arg: u64) -> io::Result<i32> {
        self.node.ioctl_int(request, arg)
    }

    fn ioctl_buf(&mut self, request: u32, buf: &mut [u8]) -> io::Result<i32> {
        self.node.ioctl_buf(request, buf)
    }
}

/// The block and character majors that refused SG_IO v4, for every node
/// the programs open.
static REFUSALS: V4Refusals = V4Refusals::new();

/// Opens device nodes the way the programs do.
pub(crate) trait Open {
    fn open(&self, path: &[u8]) -> io::Result<Box<dyn Node>>;
    /// Where sysfs is, for the kernel's copies of what devices answered
    /// (see `sysfs`); None: ask the devices.
    fn sysfs(&self) -> Option<&Path> {
        None
    }
    /// The `scsi_device` directory behind the node numbered `dev`, for
    /// those copies; None if it is not a SCSI device or there is no sysfs.
    fn scsi_device_dir(&self, dev: DevNum) -> Option<Dir<'_>> {
        sysfs::device_dir(self.sysfs()?, dev).map(Dir::Opened)
    }
}

/// A directory opened for the call, or one the caller holds open.
pub(crate) enum Dir<'a> {
    Opened(OwnedFd),
    Held(BorrowedFd<'a>),
}

impl Dir<'_> {
    pub(crate) fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Dir::Opened(fd) => fd.as_fd(),
            Dir::Held(fd) => *fd,
        }
    }
}

/// The device an event is for, whose node a program is likely to open:
/// its number, its directory in sysfs, open already, and its node, when
/// that is open already too (path, descriptor opened read-only and
/// non-blocking, as the programs open it).
#[derive(Clone, Copy)]
pub struct Near<'a> {
    pub block: bool,
    pub major: u32,
    pub minor: u32,
    pub dir: BorrowedFd<'a>,
    pub node: Option<(&'a [u8], BorrowedFd<'a>)>,
    /// The directory of the `scsi_device` the device belongs to, when the
    /// event has it open and knows it for one (its parent, of the `scsi`
    /// bus): what its `device` link leads to, without the lookups.
    pub scsi_device: Option<BorrowedFd<'a>>,
}

/// [`System`], which finds what it can of the event's own device from
/// what the event has open: its node (a block device's open and release
/// are the driver's work, a SCSI disk's a command's worth of it), and its
/// `scsi_device` directory from the event's directory, one component
/// away, where the path through `/sys/dev` is two symlinks and some twenty
/// components.
pub(crate) struct SystemNear<'a>(pub Near<'a>);

impl Open for SystemNear<'_> {
    fn open(&self, path: &[u8]) -> io::Result<Box<dyn Node>> {
        match self.0.node {
            Some((node, fd)) if node == crate::text::c_str(path) => {
                let node = Box::new(FdNode(fd.try_clone_to_owned()?));
                Ok(Box::new(Remembering::new(node, &REFUSALS)))
            }
            _ => System.open(path),
        }
    }

    fn sysfs(&self) -> Option<&Path> {
        System.sysfs()
    }

    fn scsi_device_dir(&self, dev: DevNum) -> Option<Dir<'_>> {
        let near = self.0;
        if (near.block, near.major, near.minor) == (dev.block, dev.major, dev.minor) {
            match near.scsi_device {
                Some(held) => Some(Dir::Held(held)),
                None => sysfs::device_dir_below(near.dir).map(Dir::Opened),
            }
        } else {
            sysfs::device_dir(self.sysfs()?, dev).map(Dir::Opened)
        }
    }
}

/// The real thing: `open(path, O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_NOCTTY)`.
pub(crate) struct System;

impl Open for System {
    fn open(&self, path: &[u8]) -> io::Result<Box<dyn Node>> {
        let path = CString::new(crate::text::c_str(path))?;
        // SAFETY: `path` is a valid NUL-terminated string for the call.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nobody else.
        let node = Box::new(FdNode(unsafe { OwnedFd::from_raw_fd(fd) }));
        Ok(Box::new(Remembering::new(node, &REFUSALS)))
    }

    fn sysfs(&self) -> Option<&Path> {
        Some(Path::new("/sys"))
    }
}

struct FdNode(OwnedFd);

#[repr(C)]
struct SgIoHdr {
    interface_id: libc::c_int,
    dxfer_direction: libc::c_int,
    cmd_len: libc::c_uchar,
    mx_sb_len: libc::c_uchar,
    iovec_count: libc::c_ushort,
    dxfer_len: libc::c_uint,
    dxferp: *mut libc::c_void,
    cmdp: *const libc::c_uchar,
    sbp: *mut libc::c_uchar,
    timeout: libc::c_uint,
    flags: libc::c_uint,
    pack_id: libc::c_int,
    usr_ptr: *mut libc::c_void,
    status: libc::c_uchar,
    masked_status: libc::c_uchar,
    msg_status: libc::c_uchar,
    sb_len_wr: libc::c_uchar,
    host_status: libc::c_ushort,
    driver_status: libc::c_ushort,
    resid: libc::c_int,
    duration: libc::c_uint,
    info: libc::c_uint,
}

#[repr(C)]
#[derive(Default)]
struct SgIoV4 {
    guard: i32,
    protocol: u32,
    subprotocol: u32,
    request_len: u32,
    request: u64,
    request_tag: u64,
    request_attr: u32,
    request_priority: u32,
    request_extra: u32,
    max_response_len: u32,
    response: u64,
    dout_iovec_count: u32,
    dout_xfer_len: u32,
    din_iovec_count: u32,
    din_xfer_len: u32,
    dout_xferp: u64,
    din_xferp: u64,
    timeout: u32,
    flags: u32,
    usr_ptr: u64,
    spare_in: u32,
    driver_status: u32,
    transport_status: u32,
    device_status: u32,
    retry_delay: u32,
    info: u32,
    duration: u32,
    response_len: u32,
    din_resid: i32,
    dout_resid: i32,
    generated_tag: u64,
    spare_out: u32,
    padding: u32,
}

const _: () = assert!(std::mem::size_of::<SgIoV4>() == 160);
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<SgIoHdr>() == 88);

fn len_u32(n: usize) -> io::Result<u32> {
    u32::try_from(n).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

impl Node for FdNode {
    fn devnum(&self) -> Option<DevNum> {
        // SAFETY: an all-zero `stat` is a valid value to be overwritten.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the descriptor is open and `st` is a valid out-pointer.
        if unsafe { libc::fstat(self.0.as_raw_fd(), &mut st) } < 0 {
            return None;
        }
        let block = match st.st_mode & libc::S_IFMT {
            libc::S_IFBLK => true,
            libc::S_IFCHR => false,
            _ => return None,
        };
        Some(DevNum {
            block,
            major: libc::major(st.st_rdev),
            minor: libc::minor(st.st_rdev),
        })
    }

    fn sg_v3(&mut self, io: &mut V3<'_>) -> io::Result<()> {
        let (direction, len, ptr) = match io.data.as_deref_mut() {
            Some(d) if !d.is_empty() => (SG_DXFER_FROM_DEV, len_u32(d.len())?, d.as_mut_ptr()),
            _ => (SG_DXFER_NONE, 0, std::ptr::null_mut()),
        };
        let mut hdr = SgIoHdr {
            interface_id: b'S' as libc::c_int,
            dxfer_direction: direction,
            cmd_len: u8::try_from(io.cdb.len())
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
            mx_sb_len: u8::try_from(io.sense.len()).unwrap_or(u8::MAX),
            iovec_count: 0,
            dxfer_len: len,
            dxferp: ptr.cast(),
            cmdp: io.cdb.as_ptr(),
            sbp: io.sense.as_mut_ptr(),
            timeout: io.timeout,
            flags: io.flags,
            pack_id: 0,
            usr_ptr: std::ptr::null_mut(),
            status: 0,
            masked_status: 0,
            msg_status: 0,
            sb_len_wr: 0,
            host_status: 0,
            driver_status: 0,
            resid: 0,
            duration: 0,
            info: 0,
        };
        // SAFETY: every pointer in `hdr` refers to a live buffer of the
        // length given next to it, borrowed mutably for the call.
        let r = unsafe { libc::ioctl(self.0.as_raw_fd(), SG_IO as _, &mut hdr as *mut SgIoHdr) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        io.status = hdr.status;
        io.masked_status = hdr.masked_status;
        io.msg_status = hdr.msg_status;
        io.sb_len_wr = hdr.sb_len_wr;
        io.host_status = hdr.host_status;
        io.driver_status = hdr.driver_status;
        io.resid = hdr.resid;
        io.info = hdr.info;
        Ok(())
    }

    fn sg_v4(&mut self, io: &mut V4<'_>) -> io::Result<()> {
        let mut hdr = SgIoV4 {
            guard: b'Q' as i32,
            protocol: BSG_PROTOCOL_SCSI,
            subprotocol: BSG_SUB_PROTOCOL_SCSI_CMD,
            request_len: len_u32(io.cdb.len())?,
            request: io.cdb.as_ptr() as u64,
            max_response_len: len_u32(io.response.len())?,
            response: io.response.as_mut_ptr() as u64,
            din_xfer_len: len_u32(io.din.len())?,
            din_xferp: io.din.as_mut_ptr() as u64,
            timeout: io.timeout,
            ..SgIoV4::default()
        };
        // SAFETY: as for sg_v3; the addresses are carried as integers, as
        // the v4 header defines them.
        let r = unsafe { libc::ioctl(self.0.as_raw_fd(), SG_IO as _, &mut hdr as *mut SgIoV4) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        io.device_status = hdr.device_status;
        io.transport_status = hdr.transport_status;
        io.driver_status = hdr.driver_status;
        io.response_len = hdr.response_len;
        io.din_resid = hdr.din_resid;
        io.info = hdr.info;
        Ok(())
    }

    fn ioctl_int(&mut self, request: u32, arg: u64) -> io::Result<i32> {
        // SAFETY: the requests passed here take an integer argument.
        let r = unsafe { libc::ioctl(self.0.as_raw_fd(), request as _, arg as libc::c_ulong) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r)
    }

    fn ioctl_buf(&mut self, request: u32, buf: &mut [u8]) -> io::Result<i32> {
        // SAFETY: the caller sizes `buf` to the struct the request fills.
        let r = unsafe { libc::ioctl(self.0.as_raw_fd(), request as _, buf.as_mut_ptr()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r)
    }
}

/// How an emulation ends when it does not produce properties.
#[derive(Debug)]
pub enum Stop {
    /// The emulation cannot tell what the program would do: run it.
    Defer(String),
    /// The program would exit with this (non-zero) status and print nothing
    /// worth importing.
    Exit(i32, String),
}

/// An ioctl refused for lack of privilege says nothing about the device:
/// the program, run with its own credentials, may fare differently.
pub(crate) fn defer_if_denied(e: &io::Error) -> Result<(), Stop> {
    match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => Err(Stop::Defer(format!("ioctl not permitted: {e}"))),
        _ => Ok(()),
    }
}

/// A fixed-size C buffer whose bytes past what the device returned are
/// unknown (stack garbage in the program): reading one means the program's
/// behaviour cannot be predicted.
pub(crate) struct Known<'a> {
    pub buf: &'a [u8],
    pub valid: usize,
    pub what: &'static str,
}

impl Known<'_> {
    pub fn at(&self, i: usize) -> Result<u8, Stop> {
        if i < self.valid.min(self.buf.len()) {
            Ok(self.buf[i])
        } else {
            Err(Stop::Defer(format!(
                "{} read at byte {i}, past the {} the device returned",
                self.what, self.valid
            )))
        }
    }

    pub fn be16(&self, i: usize) -> Result<u16, Stop> {
        Ok(u16::from_be_bytes([self.at(i)?, self.at(i + 1)?]))
    }

    pub fn be32(&self, i: usize) -> Result<u32, Stop> {
        Ok(u32::from_be_bytes([
            self.at(i)?,
            self.at(i + 1)?,
            self.at(i + 2)?,
            self.at(i + 3)?,
        ]))
    }
}

/// C's `strlen` within a buffer; None if it has no NUL.
pub(crate) fn strlen(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&c| c == 0)
}

/// C's `strncmp(a, b, n) == 0` where both are within their buffers (a
/// missing byte reads as NUL).
pub(crate) fn strneq(a: &[u8], b: &[u8], n: usize) -> bool {
    for i in 0..n {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        if x != y {
            return false;
        }
        if x == 0 {
            return true;
        }
    }
    true
}

/// A property value as `printf("%s\n")` would write it must stay on its
/// line: a value with a newline would make the program's output parse into
/// something else.
pub(crate) fn one_line(key: &str, value: &[u8]) -> Result<(), Stop> {
    if value.contains(&b'\n') {
        return Err(Stop::Defer(format!("{key} holds a newline")));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod mock {
    //! A scripted device standing in for the kernel, with the semantics
    //! of the LD_PRELOAD responder the differential tests use.

    use super::script::{Kind, Script};
    use super::*;
    use crate::Properties;
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::rc::Rc;

    /// Runs an emulation with `script` as the only device, at `node`:
    /// what it returned and the requests it made.
    pub fn run_on(
        node: &str,
        script: Script,
        run: impl FnOnce(&Devices, &mut Properties) -> Result<(), Stop>,
    ) -> (Result<Properties, Stop>, Vec<String>) {
        let mut devs = Devices::default();
        devs.nodes.insert(node.as_bytes().to_vec(), script);
        let mut out = Properties::new();
        let r = run(&devs, &mut out).map(|()| out);
        let log = devs.log.borrow().clone();
        (r, log)
    }

    /// Paths to scripts; every request is appended to `log`.
    #[derive(Default, Clone)]
    pub struct Devices {
        pub nodes: HashMap<Vec<u8>, Script>,
        /// Device numbers of nodes (others are not device nodes).
        pub devnums: HashMap<Vec<u8>, DevNum>,
        /// A fake sysfs root.
        pub sysfs: Option<std::path::PathBuf>,
        pub log: Rc<RefCell<Vec<String>>>,
        /// How many times a node was opened.
        pub opens: Rc<RefCell<usize>>,
        /// Kept across runs, as the daemon keeps them.
        pub v4_refusals: Option<&'static V4Refusals>,
    }

    impl Open for Devices {
        fn open(&self, path: &[u8]) -> io::Result<Box<dyn Node>> {
            *self.opens.borrow_mut() += 1;
            let Some(s) = self.nodes.get(path) else {
                return Err(io::Error::from_raw_os_error(libc::ENOENT));
            };
            let node = Box::new(Scripted {
                script: s.clone(),
                devnum: self.devnums.get(path).copied(),
                log: self.log.clone(),
            });
            Ok(match self.v4_refusals {
                Some(r) => Box::new(Remembering::new(node, r)),
                None => node,
            })
        }

        fn sysfs(&self) -> Option<&Path> {
            self.sysfs.as_deref()
        }
    }

    struct Scripted {
        script: Script,
        devnum: Option<DevNum>,
        log: Rc<RefCell<Vec<String>>>,
    }

    fn err(errno: i32) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(errno))
    }

    impl Node for Scripted {
        fn devnum(&self) -> Option<DevNum> {
            self.devnum
        }

        fn sg_v3(&mut self, io: &mut V3<'_>) -> io::Result<()> {
            let len = io.data.as_ref().map_or(0, |d| d.len());
            self.log.borrow_mut().push(script::log_v3(
                io.cdb,
                len,
                io.data.is_some() && len > 0,
                io.timeout,
                io.flags,
                io.sense.len(),
            ));
            let Some(r) = self.script.find(Kind::V3, io.cdb, 0) else {
                return err(libc::ENOTTY);
            };
            if r.errno != 0 {
                return err(r.errno);
            }
            let n = r.data.len().min(len);
            if let Some(d) = io.data.as_deref_mut() {
                d[..n].copy_from_slice(&r.data[..n]);
            }
            let s = r.sense.len().min(io.sense.len());
            io.sense[..s].copy_from_slice(&r.sense[..s]);
            io.status = r.status as u8;
            io.masked_status = (r.status as u8 >> 1) & 0x7f;
            io.msg_status = 0;
            io.sb_len_wr = s as u8;
            io.host_status = r.host as u16;
            io.driver_status = r.driver as u16;
            io.resid = r.resid.unwrap_or((len - n) as i32);
            io.info = u32::from(r.status != 0 || r.host != 0 || r.driver != 0);
            Ok(())
        }

        fn sg_v4(&mut self, io: &mut V4<'_>) -> io::Result<()> {
            let len = io.din.len();
            self.log
                .borrow_mut()
                .push(script::log_v4(io.cdb, len, io.timeout, io.response.len()));
            let Some(r) = self.script.find(Kind::V4, io.cdb, 0) else {
                return err(libc::ENOTTY);
            };
            if r.errno != 0 {
                return err(r.errno);
            }
            let n = r.data.len().min(len);
            io.din[..n].copy_from_slice(&r.data[..n]);
            let s = r.sense.len().min(io.response.len());
            io.response[..s].copy_from_slice(&r.sense[..s]);
            io.device_status = r.status;
            io.transport_status = r.host;
            io.driver_status = r.driver;
            io.response_len = s as u32;
            io.din_resid = r.resid.unwrap_or((len - n) as i32);
            io.info = u32::from(r.status != 0 || r.host != 0 || r.driver != 0);
            Ok(())
        }

        fn ioctl_int(&mut self, request: u32, arg: u64) -> io::Result<i32> {
            self.log
                .borrow_mut()
                .push(script::log_ioctl(request, Some(arg)));
            let Some(r) = self.script.find(Kind::Ioctl, &[], request) else {
                return Err(io::Error::from_raw_os_error(libc::ENOTTY));
            };
            if r.errno != 0 {
                return Err(io::Error::from_raw_os_error(r.errno));
            }
            Ok(r.ret)
        }

        fn ioctl_buf(&mut self, request: u32, buf: &mut [u8]) -> io::Result<i32> {
            self.log.borrow_mut().push(script::log_ioctl(request, None));
            let Some(r) = self.script.find(Kind::Ioctl, &[], request) else {
                return Err(io::Error::from_raw_os_error(libc::ENOTTY));
            };
            if r.errno != 0 {
                return Err(io::Error::from_raw_os_error(r.errno));
            }
            let n = r.data.len().min(buf.len());
            buf[..n].copy_from_slice(&r.data[..n]);
            Ok(r.ret)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Refuses v4 headers as a block device does; counts what reaches it.
    struct Refusing {
        devnum: DevNum,
        v4: std::rc::Rc<std::cell::Cell<usize>>,
        stats: std::rc::Rc<std::cell::Cell<usize>>,
    }

    impl Node for Refusing {
        fn devnum(&self) -> Option<DevNum> {
            self.stats.set(self.stats.get() + 1);
            Some(self.devnum)
        }
        fn sg_v3(&mut self, _: &mut V3<'_>) -> io::Result<()> {
            Ok(())
        }
        fn sg_v4(&mut self, _: &mut V4<'_>) -> io::Result<()> {
            self.v4.set(self.v4.get() + 1);
            Err(io::Error::from_raw_os_error(libc::EINVAL))
        }
        fn ioctl_int(&mut self, _: u32, _: u64) -> io::Result<i32> {
            Ok(0)
        }
        fn ioctl_buf(&mut self, _: u32, _: &mut [u8]) -> io::Result<i32> {
            Ok(0)
        }
    }

    #[test]
    fn a_block_major_that_refused_v4_is_not_asked_again_on_any_node() {
        let refusals: &'static V4Refusals = Box::leak(Box::default());
        let (v4, stats) = (std::rc::Rc::default(), std::rc::Rc::default());
        let node = |block, major| {
            Remembering::new(
                Box::new(Refusing {
                    devnum: DevNum {
                        block,
                        major,
                        minor: 0,
                    },
                    v4: std::rc::Rc::clone(&v4),
                    stats: std::rc::Rc::clone(&stats),
                }),
                refusals,
            )
        };
        let ask = |n: &mut Remembering| {
            let (mut din, mut response) = ([0u8; 8], [0u8; 8]);
            let e = n.sg_v4(&mut V4::new(&[0x12], &mut din, &mut response));
            assert_eq!(e.unwrap_err().raw_os_error(), Some(libc::EINVAL));
        };
        // ata_id's commands each try v4: only the first reaches the kernel,
        // on this node and on the next of the major.
        let mut sda = node(true, 8);
        for _ in 0..3 {
            ask(&mut sda);
        }
        ask(&mut node(true, 8));
        assert_eq!(v4.get(), 1);
        // The device number is looked up once per node.
        assert_eq!(stats.get(), 2);
        // Another major, and character nodes, are asked.
        ask(&mut node(true, 65));
        ask(&mut node(false, 8));
        ask(&mut node(false, 8));
        assert_eq!(v4.get(), 4);
    }

    #[test]
    fn programs_are_found_by_file_name() {
        for name in ["scsi_id", "ata_id", "cdrom_id"] {
            assert_eq!(crate::find(name.as_bytes()).unwrap().name(), name);
            let path = format!("/usr/lib/udev/{name}");
            assert_eq!(crate::find(path.as_bytes()).unwrap().name(), name);
        }
        assert!(crate::find(b"scsi_id.sh").is_none());
        assert!(crate::find(b"usb_id").is_none());
        assert!(crate::find(b"").is_none());
    }

    #[test]
    fn known_buffers_refuse_bytes_never_returned() {
        let buf = [1u8, 2, 3, 4];
        let k = Known {
            buf: &buf,
            valid: 3,
            what: "t",
        };
        assert_eq!(k.be16(1).ok(), Some(0x0203));
        assert!(k.at(3).is_err());
        assert!(k.be32(0).is_err());
        let k = Known {
            buf: &buf,
            valid: 99,
            what: "t",
        };
        assert!(k.at(4).is_err());
        assert_eq!(transferred(10, 4), 6);
        assert_eq!(transferred(10, 40), 0);
        assert_eq!(transferred(10, -3), 10);
    }
}
