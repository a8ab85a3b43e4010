//! The device model over sysfs.
//!
//! A [`Device`] is what one event is about: its identity comes from the event
//! (or from its `uevent` file when no event is at hand), everything else is
//! read from sysfs only when asked for and then remembered for the rest of
//! the event. The sysfs root is a parameter so that tests and scale
//! benchmarks can point it at a tree of their own.

use rustc_hash::FxHashMap;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use std::cell::{OnceCell, RefCell};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};
use uevd_uevent::{Action, ParseError, Uevent};

pub mod link;
mod names;
mod parents;
mod trigger;
mod walk;
pub use names::{
    escape_name, implicit_subsystem, kernel_event_subsystem, raw_sysname, sysname, sysnum,
    unescape_name,
};
use parents::Known;
pub use parents::ParentCache;
pub use trigger::{request_all, request_all_but, request_device, request_uevent, uevent_request};
pub use walk::{
    attribute_names, subsystem_devpaths, walk_devices, walk_devices_remembering, walk_subsystems,
    Visit,
};

/// A sysfs mount, usually `/sys`.
#[derive(Clone)]
pub struct Sysfs {
    root: PathBuf,
    /// Set for a daemon, which sees every event and so knows when a parent
    /// changes; one-shot commands read every parent afresh.
    parents: Option<Arc<ParentCache>>,
    /// Set where the mount shows the caller's own network namespace: then
    /// an interface's common attributes come from rtnetlink (see [`link`]).
    link_query: Option<link::LinkQuery>,
}

impl std::fmt::Debug for Sysfs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sysfs").field("root", &self.root).finish()
    }
}

impl Default for Sysfs {
    fn default() -> Self {
        Sysfs::new("/sys")
    }
}

impl Sysfs {
    pub fn new(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs {
            root: root.into(),
            parents: None,
            link_query: None,
        }
    }

    /// The same mount, with parent devices remembered across events (see
    /// [`ParentCache`]). Whoever uses it must call [`Sysfs::forget`] for
    /// every event it receives.
    pub fn with_parent_cache(mut self) -> Sysfs {
        self.parents = Some(Arc::default());
        self
    }

    /// The same mount, with the attributes of network interfaces that
    /// rtnetlink describes asked of the kernel with `query` (see [`link`]).
    /// Only for a mount of the caller's own network namespace.
    pub fn with_link_query(mut self, query: link::LinkQuery) -> Sysfs {
        self.link_query = Some(query);
        self
    }

    /// Drops what is remembered of the device at `devpath` and of every
    /// device below it: an event for it says that it changed or went.
    pub fn forget(&self, devpath: &[u8]) {
        if let Some(p) = &self.parents {
            p.forget(devpath);
        }
    }

    /// What an event received for a device changes in what is remembered.
    /// An event says that the device changed or went, and perhaps what is
    /// below it, so the device and every device below it are dropped;
    /// except when a driver was bound or unbound. Then the devices below are
    /// as they were, and the kernel's `bind` or `unbind` event carries what
    /// the device's `uevent` file now says, its driver included: the device
    /// is remembered as the event describes it, its attributes to be read
    /// afresh. That matters because reading a `uevent` file waits for the
    /// device's lock, which the kernel holds while it works below the
    /// device: a USB hub is locked while it enumerates its ports one after
    /// another, and every event of a device behind it that looks at the hub
    /// would wait for all of them.
    pub fn event_seen(&self, event: &Uevent) {
        let Some(p) = &self.parents else {
            return;
        };
        let devpath = event.devpath();
        if matches!(event.action(), Action::Add | Action::Remove | Action::Move) {
            // Its parent's directory has a subdirectory more or less.
            for moved in std::iter::once(devpath).chain(event.devpath_old()) {
                if let Some(core) = moved
                    .iter()
                    .rposition(|&c| c == b'/')
                    .and_then(|slash| p.device(&moved[..slash]))
                {
                    *core.listing.lock().unwrap_or_else(|e| e.into_inner()) = None;
                }
            }
        }
        match event.action() {
            Action::Bind | Action::Unbind => match as_read(event) {
                Some(read) => p.insert(devpath, Known::Device(Arc::new(Core::new(read)))),
                None => p.forget_one(devpath),
            },
            _ => p.forget(devpath),
        }
    }

    /// What an event processed changes in what is remembered. Its rules
    /// may have written attributes of the device, which children read, so
    /// all that is below it is dropped, and the device too; except after
    /// an `add`, whose event says all the device's `uevent` file would.
    /// Then the device is remembered as the event describes it (with no
    /// attribute read yet) among the recently added, unless its kind
    /// proved to have no children ([`parents::LEARNED_AFTER`]), and of
    /// what is below
    /// it only the devices are dropped, attributes being all the rules can
    /// have changed: its children's events follow, and find it, and the
    /// directories between it and them, without reading them again.
    pub fn event_processed(&self, event: &Uevent) {
        let Some(p) = &self.parents else {
            return;
        };
        let devpath = event.devpath();
        if event.action() != Action::Add || !devpath.starts_with(b"/devices/") {
            self.event_seen(event);
            return;
        }
        let subsystem = event.subsystem().unwrap_or_default();
        let Some(kind) = p.added(devpath, subsystem, event.devtype().unwrap_or_default()) else {
            return;
        };
        if let Some(read) = as_read(event) {
            p.insert_recent(devpath, Arc::new(Core::new(read)), kind);
        }
    }

    /// The parent cache, if this mount has one.
    pub fn parent_cache(&self) -> Option<&ParentCache> {
        self.parents.as_deref()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of a device, from its devpath (`/devices/...`).
    pub fn syspath(&self, devpath: &[u8]) -> PathBuf {
        let mut p = self.root.clone().into_os_string().into_vec();
        p.extend_from_slice(devpath);
        PathBuf::from(OsString::from_vec(p))
    }

    /// The devpath of a directory below the root.
    pub fn devpath_of(&self, path: &Path) -> Option<Vec<u8>> {
        let rel = path.strip_prefix(&self.root).ok()?;
        let mut dp = b"/".to_vec();
        dp.extend_from_slice(rel.as_os_str().as_bytes());
        Some(dp)
    }

    /// Whether a devpath still names a device.
    pub fn exists(&self, devpath: &[u8]) -> bool {
        self.syspath(devpath).join("uevent").is_file()
    }

    /// The devpath of the nearest ancestor that is a device: directories
    /// between a device and its parent (`block`, `net`, ...) are not.
    pub fn parent_devpath(&self, devpath: &[u8]) -> Option<Vec<u8>> {
        self.parent_core(devpath).map(|(dp, _)| dp)
    }

    /// The nearest ancestor of `devpath` that is a device, as its own
    /// `uevent` file describes it: from the parent cache when there is one,
    /// so that an event's parent is not read again.
    pub fn parent_of(&self, devpath: &[u8]) -> Option<Device> {
        self.parent_core(devpath)
            .map(|(_, core)| Device::with_core(self, core))
    }

    /// The nearest ancestor of `devpath` that is a device, with what is
    /// known of it: from the parent cache when there is one.
    fn parent_core(&self, devpath: &[u8]) -> Option<(Vec<u8>, Arc<Core>)> {
        self.parent_core_from(devpath, None)
            .map(|(dp, core, _)| (dp, core))
    }

    /// [`Sysfs::parent_core`], climbing from `below`, the directory of
    /// `devpath` when it is open. A directory that has to be read is
    /// reached from the one below it by `..`, one path component for the
    /// kernel where the path from /sys is ten; sysfs lookups cannot take
    /// the kernel's lock-free walk, so each component costs. The directory
    /// of a parent read is returned with it, for its attributes.
    fn parent_core_from(
        &self,
        devpath: &[u8],
        below: Option<BorrowedFd<'_>>,
    ) -> Option<(Vec<u8>, Arc<Core>, Option<OwnedFd>)> {
        // The nearest open directory below `dp` (`below` until one is
        // opened here, none after a directory could not be), and how many
        // levels `dp` is above it.
        let mut opened: Option<OwnedFd> = None;
        let mut below = below;
        let mut up = 0usize;
        let mut dp = devpath;
        loop {
            match dp.iter().rposition(|&c| c == b'/') {
                Some(0) | None => return None,
                Some(i) => dp = &dp[..i],
            }
            up += 1;
            if never_a_device(dp) {
                continue;
            }
            if let Some(cache) = &self.parents {
                match cache.get(dp) {
                    Some(Known::NotADevice) => continue,
                    Some(Known::Device(core)) => return Some((dp.to_vec(), core, None)),
                    None => {}
                }
            }
            // An event that is made up rather than read (modules, buses,
            // drivers) is not below /devices: no directory to climb from.
            if kernel_event_subsystem(dp).is_some() {
                let event = if self.exists(dp) {
                    self.read_event(Action::Add, dp).ok()
                } else {
                    None
                };
                match event {
                    Some(event) => return Some(self.found(dp, event, None)),
                    None => {
                        self.not_a_device(dp);
                        continue;
                    }
                }
            }
            let from = opened.as_ref().map(|fd| fd.as_fd()).or(below);
            let dir = match from {
                Some(from) => {
                    rustix::fs::openat(from, "../".repeat(up).as_str(), DIR_FLAGS, Mode::empty())
                }
                None => rustix::fs::open(self.syspath(dp), DIR_FLAGS, Mode::empty()),
            };
            let dir = match dir {
                Ok(dir) => dir,
                Err(e) if e == rustix::io::Errno::NOENT || e == rustix::io::Errno::NOTDIR => {
                    self.not_a_device(dp);
                    opened = None;
                    below = None;
                    continue;
                }
                Err(_) => return None,
            };
            // Opening `uevent` is the test of a device, one call where a
            // stat before it made two.
            match self.read_event_in(dir.as_fd(), Action::Add, dp) {
                Ok(event) => return Some(self.found(dp, event, Some(dir))),
                Err(ReadError::Io(e))
                    if matches!(
                        e.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                    ) =>
                {
                    self.not_a_device(dp);
                    opened = Some(dir);
                    up = 0;
                }
                Err(_) => return None,
            }
        }
    }

    fn found(
        &self,
        dp: &[u8],
        event: Uevent,
        dir: Option<OwnedFd>,
    ) -> (Vec<u8>, Arc<Core>, Option<OwnedFd>) {
        let core = Arc::new(Core::new(event));
        if let Some(cache) = &self.parents {
            cache.insert(dp, Known::Device(core.clone()));
        }
        (dp.to_vec(), core, dir)
    }

    pub(crate) fn not_a_device(&self, dp: &[u8]) {
        if let Some(cache) = &self.parents {
            cache.insert(dp, Known::NotADevice);
        }
    }

    /// The subsystem of anything libudev calls a device: the `subsystem`
    /// link, or for a module, bus or driver outside `/devices`, which has
    /// none, the one its place implies ([`implicit_subsystem`]).
    pub fn subsystem_of(&self, devpath: &[u8]) -> Option<Vec<u8>> {
        link_basename(&self.syspath(devpath).join("subsystem")).or_else(|| {
            implicit_subsystem(devpath)
                .filter(|_| !devpath.starts_with(b"/devices/"))
                .map(<[u8]>::to_vec)
        })
    }

    /// `dev/block/MAJ:MIN` or `dev/char/MAJ:MIN`, the kernel's link from a
    /// device number to its device.
    pub fn devnum_link(&self, block: bool, (major, minor): (u32, u32)) -> PathBuf {
        let kind = if block { "block" } else { "char" };
        self.root
            .join("dev")
            .join(kind)
            .join(format!("{major}:{minor}"))
    }

    /// The devpath of a path below the root once every symlink in it is
    /// resolved: links such as `physfn` or `/sys/class/*/*` stand for the
    /// device directory they point at.
    pub fn resolve(&self, path: &Path) -> Option<Vec<u8>> {
        let real = fs::canonicalize(path).ok()?;
        let root = fs::canonicalize(&self.root).ok()?;
        let rel = real.strip_prefix(&root).ok()?;
        let mut devpath = b"/".to_vec();
        devpath.extend_from_slice(rel.as_os_str().as_bytes());
        Some(devpath)
    }

    /// The device a path below the root leads to, symlinks followed. Only
    /// directories below `/devices` with a `uevent` file are devices.
    pub fn device_at(&self, path: &Path) -> Option<Device> {
        let devpath = self.resolve(path)?;
        if !devpath.starts_with(b"/devices/") {
            return None;
        }
        Device::from_devpath(self, &devpath).ok()
    }

    /// Finds a device by subsystem and name the way udev's
    /// `sd_device_new_from_subsystem_sysname()` does (see
    /// [`Sysfs::path_by_subsystem_sysname`]): the first place that exists
    /// decides, even when it turns out not to be a device.
    pub fn device_by_subsystem_sysname(&self, subsystem: &[u8], sysname: &[u8]) -> Option<Device> {
        self.device_at(&self.path_by_subsystem_sysname(subsystem, sysname)?)
    }

    /// Where the device called `sysname` in `subsystem` lives in sysfs, if
    /// it exists: found without reading it, where udev looks (also for the
    /// rules' `[SUBSYSTEM/NAME]`). `subsystem` names a bus or class
    /// directory itself (`/bus/NAME`, `/class/NAME`); `module` is
    /// `/module/NAME`; `drivers` takes `BUS:DRIVER` (`/bus/BUS/drivers/DRIVER`,
    /// or the directory itself for `BUS:drivers`); anything else is the first
    /// of `/bus/SUBSYSTEM/devices/NAME`, `/class/SUBSYSTEM/NAME` and
    /// `/firmware/SUBSYSTEM/NAME`. A `/` in the name stands for the `!`
    /// sysfs uses.
    pub fn path_by_subsystem_sysname(&self, subsystem: &[u8], sysname: &[u8]) -> Option<PathBuf> {
        self.find_by_subsystem_sysname(subsystem, sysname)
            .map(|(path, _)| path)
    }

    /// [`Sysfs::path_by_subsystem_sysname`], with what the lookup found
    /// there (not following a last symlink): a caller that wants the
    /// entry's type or mode need not look again.
    pub fn find_by_subsystem_sysname(
        &self,
        subsystem: &[u8],
        sysname: &[u8],
    ) -> Option<(PathBuf, fs::Metadata)> {
        let bad = |s: &[u8]| {
            s.is_empty()
                || s.contains(&0)
                || s.split(|&c| c == b'/').any(|c| c == b"." || c == b"..")
        };
        if bad(subsystem) || bad(sysname) {
            return None;
        }
        let escaped = escape_name(sysname);
        let name = OsStr::from_bytes(&escaped);
        let candidates = match subsystem {
            b"subsystem" => vec![
                self.root.join("bus").join(name),
                self.root.join("class").join(name),
            ],
            b"module" => vec![self.root.join("module").join(name)],
            b"drivers" => {
                let colon = escaped.iter().position(|&c| c == b':')?;
                let (bus, driver) = (&escaped[..colon], &escaped[colon + 1..]);
                if driver.is_empty() {
                    return None;
                }
                let drivers = self
                    .root
                    .join("bus")
                    .join(OsStr::from_bytes(bus))
                    .join("drivers");
                vec![match driver {
                    b"drivers" => drivers,
                    _ => drivers.join(OsStr::from_bytes(driver)),
                }]
            }
            _ => {
                let subsystem = OsStr::from_bytes(subsystem);
                vec![
                    self.root
                        .join("bus")
                        .join(subsystem)
                        .join("devices")
                        .join(name),
                    self.root.join("class").join(subsystem).join(name),
                    self.root.join("firmware").join(subsystem).join(name),
                ]
            }
        };
        candidates
            .into_iter()
            .find_map(|p| fs::symlink_metadata(&p).ok().map(|m| (p, m)))
    }

    /// Builds the event the kernel would send for an existing device, by
    /// reading its `uevent` file and `subsystem` link: what coldplug and
    /// rescans use instead of asking the kernel to resend.
    pub fn read_event(&self, action: Action, devpath: &[u8]) -> Result<Uevent, ReadError> {
        if let Some(subsystem) = kernel_event_subsystem(devpath) {
            return Uevent::synthesize(action, devpath, Some(subsystem), b"", &[])
                .map_err(ReadError::Parse);
        }
        let dir = self.syspath(devpath);
        let uevent = read_attribute_file(&dir.join("uevent")).map_err(ReadError::Io)?;
        let subsystem = link_basename(&dir.join("subsystem"));
        Uevent::synthesize(action, devpath, subsystem.as_deref(), &uevent, &[])
            .map_err(ReadError::Parse)
    }

    /// [`Sysfs::read_event`] for a device whose directory is open (as a
    /// walk has it): each file is one path component for the kernel to
    /// look up, not the whole path from /sys.
    pub fn read_event_in(
        &self,
        dir: BorrowedFd<'_>,
        action: Action,
        devpath: &[u8],
    ) -> Result<Uevent, ReadError> {
        self.read_event_of_class(dir, action, devpath, None)
    }

    /// [`Sysfs::read_event_in`] for a device whose subsystem is known to
    /// be `class` when that is given (the walk found it in that class's
    /// directory, [`Visit::class`]): its `subsystem` link is not
    /// read.
    pub fn read_event_of_class(
        &self,
        dir: BorrowedFd<'_>,
        action: Action,
        devpath: &[u8],
        class: Option<&[u8]>,
    ) -> Result<Uevent, ReadError> {
        if let Some(subsystem) = kernel_event_subsystem(devpath) {
            return Uevent::synthesize(action, devpath, Some(subsystem), b"", &[])
                .map_err(ReadError::Parse);
        }
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let file = rustix::fs::openat(dir, "uevent", flags, Mode::empty())
            .map_err(|e| ReadError::Io(e.into()))?;
        let uevent = read_opened(file).map_err(ReadError::Io)?;
        let subsystem = match class {
            Some(class) => Some(class.to_vec()),
            None => link_basename_at(dir, OsStr::new("subsystem")),
        };
        Uevent::synthesize(action, devpath, subsystem.as_deref(), &uevent, &[])
            .map_err(ReadError::Parse)
    }
}

/// How a device's directory is held: for looking things up below it.
const DIR_FLAGS: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);

/// Why a device could not be read from sysfs.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    Parse(ParseError),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => e.fmt(f),
            ReadError::Parse(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ReadError {}

/// The last component of a symlink's target (`subsystem` → `net`).
pub fn link_basename(link: &Path) -> Option<Vec<u8>> {
    let target = fs::read_link(link).ok()?;
    Some(target.file_name()?.as_bytes().to_vec())
}

/// Attribute values read so far; `None` for absent attributes. Shared
/// with other events when the device is a remembered parent. The names
/// are the rules' and the builtins' (a few dozen per device), hashed with
/// Fx: SipHash's resistance to chosen collisions buys nothing there.
type AttrCache = Mutex<FxHashMap<Box<[u8]>, Option<Arc<[u8]>>>>;

/// sysfs attributes are small; anything larger is not an attribute (udev
/// refuses files above 4 MiB the same way).
const SYSATTR_MAX: u64 = 4 * 1024 * 1024 - 1;

/// A sysfs text attribute is at most a page; one byte more tells a full
/// page from a longer file.
const ONE_READ: usize = 4096 + 1;

/// The contents of an attribute file, up to one byte past
/// [`SYSATTR_MAX`]. sysfs hands over a text attribute in one read, as udev
/// relies on: a short first read is the whole value, and asking again for
/// the end of file (or for the size first, as `fs::read` does) would cost
/// a call per attribute. Only a full buffer (a binary attribute, or a
/// larger file) is read on.
fn read_attribute_file(path: &Path) -> io::Result<Vec<u8>> {
    read_opened(fs::File::open(path)?.into())
}

/// `name` below `dir`, as udev joins an attribute name to a device's
/// path: leading slashes are separators, not a root.
fn relative(name: &[u8]) -> &OsStr {
    let start = name.iter().position(|&c| c != b'/').unwrap_or(name.len());
    OsStr::from_bytes(&name[start..])
}

/// The first read lands on the stack: the value is then allocated at its
/// own size, a few bytes, where a page-sized buffer per attribute was the
/// allocator's slow path (larger than its per-thread caches) every time.
fn read_opened(fd: OwnedFd) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut page = [std::mem::MaybeUninit::<u8>::uninit(); ONE_READ];
    let mut value = loop {
        match rustix::io::read(&fd, &mut page[..]) {
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
            Ok((read, _)) => break read.to_vec(),
        }
    };
    let n = value.len();
    if n == ONE_READ {
        fs::File::from(fd)
            .take(SYSATTR_MAX + 1 - n as u64)
            .read_to_end(&mut value)?;
    }
    Ok(value)
}

/// The last component of the target of the link `name` below `dir`.
fn link_basename_at(dir: BorrowedFd<'_>, name: &OsStr) -> Option<Vec<u8>> {
    let target = rustix::fs::readlinkat(dir, name, Vec::new()).ok()?;
    let target = target.as_bytes();
    let end = target.iter().rposition(|&c| c != b'/')? + 1;
    let start = target[..end]
        .iter()
        .rposition(|&c| c == b'/')
        .map_or(0, |i| i + 1);
    match &target[start..end] {
        b"." | b".." => None,
        base => Some(base.to_vec()),
    }
}

/// [`read_sysattr`] for the attribute `name` of the device directory
/// `dir`: one lookup of one component instead of a walk of the whole path,
/// and the file's type and mode from the open descriptor.
fn read_sysattr_at(dir: BorrowedFd<'_>, name: &[u8]) -> Option<Vec<u8>> {
    let rel = relative(name);
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK;
    let fd = match rustix::fs::openat(dir, rel, flags, Mode::empty()) {
        Ok(fd) => fd,
        // O_NOFOLLOW refuses a symlink with ELOOP.
        Err(rustix::io::Errno::LOOP) => {
            return match name {
                b"driver" | b"subsystem" | b"module" => link_basename_at(dir, rel),
                _ => None,
            }
        }
        Err(_) => return None,
    };
    let st = rustix::fs::fstat(&fd).ok()?;
    let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
    if kind == rustix::fs::FileType::Directory || st.st_mode & 0o400 == 0 {
        return None;
    }
    let mut value = read_opened(fd).ok()?;
    if value.len() as u64 > SYSATTR_MAX {
        return None;
    }
    while matches!(value.last(), Some(b'\n' | b'\r')) {
        value.pop();
    }
    Some(value)
}

/// Reads one attribute file with udev's rules (`sd_device_get_sysattr_value`):
/// a symlink is a value only for `driver`, `subsystem` and `module` (the last
/// component of its target); directories and files without a read bit are
/// not attributes; trailing `\n` and `\r` are dropped.
pub fn read_sysattr(path: &Path, name: &[u8]) -> Option<Vec<u8>> {
    use std::os::unix::fs::PermissionsExt;
    let meta = fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() {
        return match name {
            b"driver" | b"subsystem" | b"module" => link_basename(path),
            _ => None,
        };
    }
    if meta.is_dir() || meta.permissions().mode() & 0o400 == 0 {
        return None;
    }
    let mut value = read_attribute_file(path).ok()?;
    if value.len() as u64 > SYSATTR_MAX {
        return None;
    }
    while matches!(value.last(), Some(b'\n' | b'\r')) {
        value.pop();
    }
    Some(value)
}

/// Directories the driver core makes that are never devices: `/devices`,
/// `/devices/virtual`, and below it the class directories that group
/// class devices without a parent (`/devices/virtual/net`). Every virtual
/// device's parent walk passes them, and looking for their `uevent` file
/// is a failing stat each, on every event.
fn never_a_device(devpath: &[u8]) -> bool {
    match devpath.strip_prefix(b"/devices") {
        Some(b"") => true,
        Some(rest) => match rest.strip_prefix(b"/virtual") {
            Some(b"") => true,
            Some(class) => class.len() > 1 && class[0] == b'/' && !class[1..].contains(&b'/'),
            None => false,
        },
        None => false,
    }
}

/// The event a read of the device's `uevent` file would make, from a
/// kernel event that carries the same properties (`add`, `bind`,
/// `unbind`). An event asked for by writing to `uevent` may also carry
/// `SYNTH_UUID` and `SYNTH_ARG_*`, which the file never holds.
fn as_read(event: &Uevent) -> Option<Uevent> {
    let kept = || event.iter().filter(|(k, _)| !k.starts_with(b"SYNTH_"));
    let mut properties = Vec::with_capacity(kept().map(|(k, v)| k.len() + v.len() + 2).sum());
    for (k, v) in kept() {
        properties.extend_from_slice(k);
        properties.push(b'=');
        properties.extend_from_slice(v);
        properties.push(0);
    }
    Uevent::synthesize(
        Action::Add,
        event.devpath(),
        event.subsystem(),
        &properties,
        &[],
    )
    .ok()
}

/// What is known of a device: its identity and the attributes read so
/// far. One per event for the event's own device; for a parent, possibly
/// shared by every event below it (see [`ParentCache`]).
pub(crate) struct Core {
    event: Uevent,
    attrs: AttrCache,
    /// Kept apart from `attrs`: the two read symlinks differently.
    sysattrs: AttrCache,
    /// Read once: rules ask for a parent's driver and subsystem again on
    /// every line with DRIVERS== or SUBSYSTEMS==.
    subsystem: OnceLock<Option<Vec<u8>>>,
    driver: OnceLock<Option<Vec<u8>>>,
    /// Its directory's subdirectories and links, once listed; dropped
    /// when a device below it comes or goes ([`Sysfs::event_seen`]).
    listing: Mutex<Option<Names>>,
}

/// Names in a directory, shared.
pub type Names = Arc<[Box<[u8]>]>;

impl Core {
    fn new(event: Uevent) -> Core {
        Core {
            event,
            attrs: AttrCache::default(),
            sysattrs: AttrCache::default(),
            subsystem: OnceLock::new(),
            driver: OnceLock::new(),
            listing: Mutex::default(),
        }
    }
}

fn cached(cache: &AttrCache, name: &[u8]) -> Option<Option<Arc<[u8]>>> {
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(name)
        .cloned()
}

fn remember(cache: &AttrCache, name: &[u8], value: Option<Arc<[u8]>>) {
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(name.into(), value);
}

/// A device as one event sees it.
pub struct Device {
    sysfs: Sysfs,
    core: Arc<Core>,
    /// Built on first use: most events never look at sysfs.
    syspath: OnceCell<PathBuf>,
    /// The device's directory, opened on first use: attributes, links and
    /// the driver are then looked up from it, one path component each.
    dir: OnceCell<Option<Arc<OwnedFd>>>,
    /// For a parent remembered from an earlier event, the directory of the
    /// device it was climbed to from and how many levels up it is: its own
    /// directory is then `../` that many times from there, where its path
    /// from /sys is some ten components for the kernel to look up.
    below: Option<(Arc<OwnedFd>, usize)>,
    parent: RefCell<Option<Option<Rc<Device>>>>,
    /// A network interface's RTM_NEWLINK (or the errno the kernel
    /// answered), asked for when first needed.
    link: RefCell<Option<Result<Arc<[u8]>, i32>>>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("devpath", &self.devpath_os())
            .finish()
    }
}

impl Device {
    pub fn from_event(sysfs: &Sysfs, event: Uevent) -> Device {
        Device::with_core(sysfs, Arc::new(Core::new(event)))
    }

    fn with_core(sysfs: &Sysfs, core: Arc<Core>) -> Device {
        Device {
            sysfs: sysfs.clone(),
            core,
            syspath: OnceCell::new(),
            dir: OnceCell::new(),
            below: None,
            parent: RefCell::default(),
            link: RefCell::default(),
        }
    }

    /// Reads a device that exists now.
    pub fn from_devpath(sysfs: &Sysfs, devpath: &[u8]) -> Result<Device, ReadError> {
        Ok(Device::from_event(
            sysfs,
            sysfs.read_event(Action::Add, devpath)?,
        ))
    }

    pub fn event(&self) -> &Uevent {
        &self.core.event
    }

    pub fn devpath(&self) -> &[u8] {
        self.core.event.devpath()
    }

    pub fn devpath_os(&self) -> &OsStr {
        self.core.event.devpath_os()
    }

    pub fn syspath(&self) -> &Path {
        self.syspath
            .get_or_init(|| self.sysfs.syspath(self.core.event.devpath()))
    }

    /// The device's directory in sysfs (`O_PATH`), for what is looked up
    /// below it; `None` once the device is gone.
    pub fn directory(&self) -> Option<BorrowedFd<'_>> {
        self.dir()
    }

    /// The device's directory; `None` once the device is gone.
    fn dir(&self) -> Option<BorrowedFd<'_>> {
        self.dir
            .get_or_init(|| {
                let dir = match &self.below {
                    Some((below, up)) => rustix::fs::openat(
                        below,
                        "../".repeat(*up).as_str(),
                        DIR_FLAGS,
                        Mode::empty(),
                    ),
                    None => rustix::fs::open(self.syspath(), DIR_FLAGS, Mode::empty()),
                };
                dir.ok().map(Arc::new)
            })
            .as_deref()
            .map(|fd| fd.as_fd())
    }

    /// The mode of what `rel`, a path relative to the device's directory,
    /// leads to (symlinks followed, as stat(2); empty for the directory
    /// itself); `None` when nothing is there. Looked up from the open
    /// directory, not walked from the root.
    pub fn stat_below(&self, rel: &[u8]) -> Option<u32> {
        let flags = if rel.is_empty() {
            rustix::fs::AtFlags::EMPTY_PATH
        } else {
            rustix::fs::AtFlags::empty()
        };
        let st = rustix::fs::statat(self.dir()?, OsStr::from_bytes(rel), flags).ok()?;
        Some(st.st_mode)
    }

    pub fn sysname(&self) -> &[u8] {
        self.core.event.sysname()
    }

    /// The trailing number of the name (`sda1` → `1`), as udev's `%n`.
    pub fn sysnum(&self) -> Option<&[u8]> {
        sysnum(self.sysname())
    }

    pub fn subsystem(&self) -> Option<&[u8]> {
        if let Some(s) = self.core.event.subsystem() {
            return Some(s);
        }
        self.core
            .subsystem
            .get_or_init(|| link_basename_at(self.dir()?, OsStr::new("subsystem")))
            .as_deref()
    }

    /// The names of the subdirectories and symlinks of the device's
    /// directory, sorted. Read once while the device is remembered (a
    /// thousand disks behind one controller ask for its listing once, not
    /// once each), and again after a device below it came or went.
    pub fn subdirs_and_links(&self) -> Option<Names> {
        let mut listing = self.core.listing.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(names) = &*listing {
            return Some(names.clone());
        }
        let names: Names = walk::subdirs_and_links(self.dir()?).ok()?.into();
        *listing = Some(names.clone());
        Some(names)
    }

    /// The driver bound, read from the event or the `driver` link, once
    /// per event.
    pub fn driver(&self) -> Option<&[u8]> {
        if let Some(d) = self.core.event.driver() {
            return Some(d);
        }
        self.core
            .driver
            .get_or_init(|| link_basename_at(self.dir()?, OsStr::new("driver")))
            .as_deref()
    }

    pub fn devtype(&self) -> Option<&[u8]> {
        self.core.event.devtype()
    }

    pub fn devnum(&self) -> Option<(u32, u32)> {
        self.core.event.devnum()
    }

    pub fn is_block(&self) -> bool {
        self.core.event.is_block()
    }

    pub fn ifindex(&self) -> Option<u32> {
        self.core.event.ifindex()
    }

    /// The node name below /dev, as the kernel named it.
    pub fn devname(&self) -> Option<&[u8]> {
        self.core.event.devname()
    }

    /// A sysfs attribute, read once per event (once per parent between
    /// its events, for a remembered parent). Trailing newlines are
    /// dropped, as udev does.
    pub fn attr(&self, name: &[u8]) -> Option<Arc<[u8]>> {
        if name.is_empty() || name.contains(&0) || name.split(|&c| c == b'/').any(|c| c == b"..") {
            return None;
        }
        if let Some(v) = cached(&self.core.attrs, name) {
            return v;
        }
        let value = self.dir().and_then(|dir| {
            let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK;
            let fd = rustix::fs::openat(dir, relative(name), flags, Mode::empty()).ok()?;
            let mut v = read_opened(fd).ok()?;
            while v.last() == Some(&b'\n') {
                v.pop();
            }
            Some(Arc::<[u8]>::from(v))
        });
        remember(&self.core.attrs, name, value.clone());
        value
    }

    /// The sysfs mount this device was read from.
    pub fn sysfs(&self) -> &Sysfs {
        &self.sysfs
    }

    /// A sysfs attribute as udev's builtins and rules see it (see
    /// [`read_sysattr`]), read once per event. Unlike [`Device::attr`],
    /// `driver`, `subsystem` and `module` give the name their link points
    /// to, and other symlinks are not attributes.
    pub fn sysattr(&self, name: &[u8]) -> Option<Arc<[u8]>> {
        if name.is_empty() || name.contains(&0) || name.split(|&c| c == b'/').any(|c| c == b"..") {
            return None;
        }
        if let Some(v) = cached(&self.core.sysattrs, name) {
            return v;
        }
        let value = match self.sysattr_from_link(name) {
            Some(v) => v.map(Arc::<[u8]>::from),
            None => self
                .dir()
                .and_then(|dir| read_sysattr_at(dir, name))
                .map(Arc::<[u8]>::from),
        };
        remember(&self.core.sysattrs, name, value.clone());
        value
    }

    /// The attribute from the interface's RTM_NEWLINK, when the mount asks
    /// the kernel and the message answers for the file (see [`link`]).
    fn sysattr_from_link(&self, name: &[u8]) -> Option<Option<Vec<u8>>> {
        if !link::serves(name) {
            return None;
        }
        let message = self.link_message()?.ok()?;
        link::value(&message, self.ifindex()?, self.sysname(), name)
    }

    /// What the kernel answered to RTM_GETLINK for this interface: the
    /// RTM_NEWLINK its attributes came from, asked for once per event and
    /// again after [`Device::link_changed`], or the errno. `None` where the
    /// mount does not ask the kernel (see [`Sysfs::with_link_query`]), or
    /// for a device that is not a network interface.
    pub fn link_message(&self) -> Option<Result<Arc<[u8]>, i32>> {
        let query = self.sysfs.link_query?;
        if self.core.event.subsystem() != Some(b"net") {
            return None;
        }
        let ifindex = self.ifindex().filter(|&i| i > 0)?;
        Some(
            self.link
                .borrow_mut()
                .get_or_insert_with(|| query(ifindex).map(Arc::from))
                .clone(),
        )
    }

    /// Says that the interface may have changed (its address was set, a
    /// program ran, an attribute was written): attributes not read yet, and
    /// [`Device::link_message`], come from a new RTM_NEWLINK. Those read
    /// already keep their value for the rest of the event, as any
    /// attribute does.
    pub fn link_changed(&self) {
        self.link.borrow_mut().take();
    }

    /// The device a link or directory below this one leads to, such as a
    /// PCI virtual function's `physfn`.
    pub fn child(&self, suffix: &[u8]) -> Option<Device> {
        if suffix.is_empty() || suffix.split(|&c| c == b'/').any(|c| c == b"..") {
            return None;
        }
        self.sysfs
            .device_at(&self.syspath().join(OsStr::from_bytes(suffix)))
    }

    /// The nearest ancestor (not this device) in `subsystem`, and of
    /// `devtype` when one is given.
    pub fn parent_with_subsystem(
        &self,
        subsystem: &[u8],
        devtype: Option<&[u8]>,
    ) -> Option<Rc<Device>> {
        let mut next = self.parent();
        while let Some(dev) = next {
            let devtype_matches = match devtype {
                None => true,
                Some(t) => dev.devtype() == Some(t),
            };
            if devtype_matches && dev.subsystem() == Some(subsystem) {
                return Some(dev);
            }
            next = dev.parent();
        }
        None
    }

    /// The nearest ancestor that is a device (has a `uevent` file).
    pub fn parent(&self) -> Option<Rc<Device>> {
        if let Some(p) = self.parent.borrow().as_ref() {
            return p.clone();
        }
        let below = self.dir.get().and_then(Option::as_ref);
        let found = self
            .sysfs
            .parent_core_from(self.devpath(), below.map(|fd| fd.as_fd()))
            .map(|(dp, core, dir)| {
                let mut parent = Device::with_core(&self.sysfs, core);
                match (dir, below) {
                    (Some(dir), _) => {
                        let _ = parent.dir.set(Some(Arc::new(dir)));
                    }
                    (None, Some(below)) => {
                        let up = self.devpath()[dp.len()..]
                            .iter()
                            .filter(|&&c| c == b'/')
                            .count();
                        parent.below = Some((below.clone(), up));
                    }
                    (None, None) => {}
                }
                Rc::new(parent)
            });
        *self.parent.borrow_mut() = Some(found.clone());
        found
    }

    /// This device and its ancestors, nearest first.
    pub fn ancestors(self: &Rc<Self>) -> impl Iterator<Item = Rc<Device>> {
        std::iter::successors(Some(self.clone()), |d| d.parent())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    pub(crate) fn fake_device(root: &Path, devpath: &str, subsystem: &str, uevent: &str) {
        let dir = root.join(&devpath[1..]);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("uevent"), uevent).unwrap();
        let class = root.join("class").join(subsystem);
        fs::create_dir_all(&class).unwrap();
        symlink(&class, dir.join("subsystem")).unwrap();
    }

    /// A SCSI device at `sdev` with its disk `sda`; returns the disk's
    /// devpath.
    fn fake_scsi_disk(root: &Path, sdev: &str) -> String {
        let disk = format!("{sdev}/block/sda");
        fake_device(root, sdev, "scsi", "DEVTYPE=scsi_device\n");
        fake_device(root, &disk, "block", "DEVNAME=sda\nDEVTYPE=disk\n");
        disk
    }

    #[test]
    fn an_event_read_through_the_open_directory_is_the_one_read_by_path() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_device(
            root,
            "/devices/virtual/net/v0",
            "net",
            "INTERFACE=v0\nIFINDEX=7\n",
        );
        let sysfs = Sysfs::new(root);
        let dp = b"/devices/virtual/net/v0";
        let dir = fs::File::open(root.join("devices/virtual/net/v0")).unwrap();
        let by_path = sysfs.read_event(Action::Add, dp).unwrap();
        let in_dir = sysfs.read_event_in(dir.as_fd(), Action::Add, dp).unwrap();
        assert_eq!(by_path.to_nulstr(), in_dir.to_nulstr());
        assert_eq!(in_dir.subsystem(), Some(&b"net"[..]));
        assert_eq!(in_dir.get(b"IFINDEX"), Some(&b"7"[..]));
        let gone = fs::File::open(root.join("devices/virtual")).unwrap();
        assert!(sysfs
            .read_event_in(gone.as_fd(), Action::Add, b"/devices/virtual")
            .is_err());
    }

    /// A controller's listing is read once for the disks behind it, and
    /// read again once a host below it is added or removed.
    #[test]
    fn a_remembered_devices_listing_is_read_again_after_a_child_comes() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let controller = "/devices/pci0/0000:00:05.0";
        fake_device(root, controller, "pci", "DRIVER=ahci\n");
        for host in ["host2", "host3"] {
            fake_device(
                root,
                &format!("{controller}/{host}"),
                "scsi",
                "DEVTYPE=scsi_host\n",
            );
        }
        let sysfs = Sysfs::new(root).with_parent_cache();
        let host_of = |n: u32| {
            let dp = format!("{controller}/host{n}");
            Rc::new(Device::from_devpath(&sysfs, dp.as_bytes()).unwrap())
        };
        let names = |d: &Device| -> Vec<String> {
            d.subdirs_and_links()
                .unwrap()
                .iter()
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .filter(|n| n != "subsystem")
                .collect()
        };
        let first = host_of(2).parent().unwrap();
        assert_eq!(names(&first), ["host2", "host3"]);
        // A third host appears; until its event comes, the listing the
        // controller's other children share stays as it was.
        fake_device(
            root,
            &format!("{controller}/host1"),
            "scsi",
            "DEVTYPE=scsi_host\n",
        );
        let again = host_of(3).parent().unwrap();
        assert_eq!(names(&again), ["host2", "host3"]);
        let add = Uevent::parse_properties(
            format!("ACTION=add\0DEVPATH={controller}/host1\0SUBSYSTEM=scsi\0").as_bytes(),
        )
        .unwrap();
        sysfs.event_seen(&add);
        let after = host_of(3).parent().unwrap();
        assert_eq!(names(&after), ["host1", "host2", "host3"]);
    }

    thread_local! {
        /// What the fake kernel below answers for interface 7, and how
        /// often it was asked since the last `kernel_says`.
        static LINK: RefCell<(Option<Vec<u8>>, u32)> = const { RefCell::new((None, 0)) };
    }

    const ENODEV: i32 = 19;

    fn fake_query(ifindex: u32) -> Result<Vec<u8>, i32> {
        LINK.with(|l| {
            let mut l = l.borrow_mut();
            l.1 += 1;
            l.0.clone().filter(|_| ifindex == 7).ok_or(ENODEV)
        })
    }

    fn asked() -> u32 {
        LINK.with(|l| l.borrow().1)
    }

    fn kernel_says(message: Option<Vec<u8>>) {
        LINK.with(|l| *l.borrow_mut() = (message, 0));
    }

    #[test]
    fn an_interfaces_common_attributes_come_from_one_link_message() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let dp = "/devices/virtual/net/v0";
        fake_device(root, dp, "net", "INTERFACE=v0\nIFINDEX=7\n");
        // The files say otherwise, to tell where each value came from.
        for (name, value) in [
            ("type", "9"),
            ("iflink", "9"),
            ("address", "file"),
            ("mtu", "1500"),
        ] {
            fs::write(root.join(&dp[1..]).join(name), format!("{value}\n")).unwrap();
        }
        let message = |address: &[u8]| {
            link::tests::message(
                7,
                1,
                &[(3, b"v0\0"), (5, &6u32.to_ne_bytes()), (1, address)],
            )
        };
        kernel_says(Some(message(&[2, 0, 0, 0, 0, 1])));
        let sysfs = Sysfs::new(root).with_link_query(fake_query);
        let dev = Device::from_devpath(&sysfs, dp.as_bytes()).unwrap();
        let get = |d: &Device, n: &str| d.sysattr(n.as_bytes()).map(|v| v.to_vec());
        assert_eq!(get(&dev, "type").as_deref(), Some(&b"1"[..]));
        assert_eq!(get(&dev, "iflink").as_deref(), Some(&b"6"[..]));
        assert_eq!(get(&dev, "phys_port_name"), None);
        assert_eq!(asked(), 1, "one message for every attribute");
        // What the message does not describe is read from its file.
        assert_eq!(get(&dev, "mtu").as_deref(), Some(&b"1500"[..]));
        // After a change, what was read stays; what was not is asked anew.
        kernel_says(Some(message(&[2, 0, 0, 0, 0, 2])));
        dev.link_changed();
        assert_eq!(get(&dev, "type").as_deref(), Some(&b"1"[..]));
        assert_eq!(asked(), 0);
        assert_eq!(
            get(&dev, "address").as_deref(),
            Some(&b"02:00:00:00:00:02"[..])
        );
        assert_eq!(asked(), 1);

        // No answer, another interface's answer, or a mount that does not
        // ask: the files.
        for (message, query) in [
            (None, Some(fake_query as link::LinkQuery)),
            (
                Some(link::tests::message(7, 1, &[(3, b"v1\0")])),
                Some(fake_query),
            ),
            (Some(message(&[2, 0, 0, 0, 0, 1])), None),
        ] {
            kernel_says(message);
            let mut sysfs = Sysfs::new(root);
            sysfs.link_query = query;
            let dev = Device::from_devpath(&sysfs, dp.as_bytes()).unwrap();
            assert_eq!(get(&dev, "type").as_deref(), Some(&b"9"[..]));
            assert_eq!(get(&dev, "address").as_deref(), Some(&b"file"[..]));
        }
        // Only interfaces are asked about.
        kernel_says(Some(message(&[2, 0, 0, 0, 0, 1])));
        let other = "/devices/virtual/misc/m0";
        fake_device(root, other, "misc", "IFINDEX=7\n");
        fs::write(root.join(&other[1..]).join("type"), "5\n").unwrap();
        let sysfs = Sysfs::new(root).with_link_query(fake_query);
        let dev = Device::from_devpath(&sysfs, other.as_bytes()).unwrap();
        assert_eq!(get(&dev, "type").as_deref(), Some(&b"5"[..]));
        assert_eq!(asked(), 0);
    }

    #[test]
    fn reads_identity_attributes_and_parents() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_device(
            root,
            "/devices/pci0/0000:00:01.0",
            "pci",
            "PCI_ID=1AF4:1000\n",
        );
        fake_device(
            root,
            "/devices/pci0/0000:00:01.0/virtio0/block/vda",
            "block",
            "MAJOR=254\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n",
        );
        fs::write(root.join("devices/pci0/0000:00:01.0/vendor"), "0x1af4\n").unwrap();
        let sysfs = Sysfs::new(root);
        let dev = Rc::new(
            Device::from_devpath(&sysfs, b"/devices/pci0/0000:00:01.0/virtio0/block/vda").unwrap(),
        );
        assert_eq!(dev.subsystem(), Some(&b"block"[..]));
        assert_eq!(dev.devnum(), Some((254, 0)));
        assert_eq!(dev.devname(), Some(&b"vda"[..]));
        assert_eq!(dev.sysnum(), None);
        let chain: Vec<_> = dev.ancestors().map(|d| d.devpath().to_vec()).collect();
        assert_eq!(
            chain,
            vec![
                b"/devices/pci0/0000:00:01.0/virtio0/block/vda".to_vec(),
                b"/devices/pci0/0000:00:01.0".to_vec()
            ]
        );
        let pci = dev.parent().unwrap();
        assert_eq!(pci.attr(b"vendor").as_deref(), Some(&b"0x1af4"[..]));
        // Cached: a change on disk is not seen within the same event.
        fs::write(root.join("devices/pci0/0000:00:01.0/vendor"), "0x8086\n").unwrap();
        assert_eq!(pci.attr(b"vendor").as_deref(), Some(&b"0x1af4"[..]));
        assert_eq!(pci.attr(b"../../etc/passwd"), None);
        assert_eq!(pci.attr(b"missing"), None);
    }

    #[test]
    fn parents_are_remembered_across_events_until_forgotten() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let host = "/devices/pci0/0000:00:01.0/host0";
        fake_device(root, "/devices/pci0/0000:00:01.0", "pci", "");
        fake_device(root, host, "scsi", "DEVTYPE=scsi_host\n");
        let disk = format!("{host}/target0/0:0:0:0/block/sda");
        fake_device(root, &format!("{host}/target0/0:0:0:0"), "scsi", "");
        fake_device(root, &disk, "block", "DEVNAME=sda\n");
        let vendor = root.join(&host[1..]).join("vendor");
        fs::write(&vendor, "ATA\n").unwrap();
        let event = |sysfs: &Sysfs| {
            let ev = sysfs.read_event(Action::Add, disk.as_bytes()).unwrap();
            Rc::new(Device::from_event(sysfs, ev))
        };
        let host_of = |dev: &Rc<Device>| {
            dev.ancestors()
                .find(|d| d.devpath() == host.as_bytes())
                .unwrap()
        };
        let cached = Sysfs::new(root).with_parent_cache();
        let plain = Sysfs::new(root);
        assert_eq!(
            host_of(&event(&cached)).sysattr(b"vendor").as_deref(),
            Some(&b"ATA"[..])
        );
        assert_eq!(
            host_of(&event(&plain)).sysattr(b"vendor").as_deref(),
            Some(&b"ATA"[..])
        );
        // "block" below the SCSI device is looked for once, and remembered
        // as no device.
        let known = cached.parent_cache().unwrap().len();
        assert_eq!(known, 5, "0:0:0:0, block, target0, host0, 0000:00:01.0");

        fs::write(&vendor, "QEMU\n").unwrap();
        // A later event sees the parent as it was read...
        assert_eq!(
            host_of(&event(&cached)).sysattr(b"vendor").as_deref(),
            Some(&b"ATA"[..])
        );
        // ...which a one-shot reader never does...
        assert_eq!(
            host_of(&event(&plain)).sysattr(b"vendor").as_deref(),
            Some(&b"QEMU"[..])
        );
        // ...until an event for the parent, or one of its ancestors, says
        // that it changed.
        cached.forget(b"/devices/pci0/0000:00:01.0");
        assert_eq!(cached.parent_cache().unwrap().len(), 0);
        assert_eq!(
            host_of(&event(&cached)).sysattr(b"vendor").as_deref(),
            Some(&b"QEMU"[..])
        );
        // Forgetting the disk itself leaves its parents.
        cached.forget(disk.as_bytes());
        assert_eq!(cached.parent_cache().unwrap().len(), 5);
        plain.forget(disk.as_bytes());
    }

    #[test]
    fn a_device_just_added_is_its_childrens_parent_as_its_event_said() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let sdev = "/devices/pci0/0000:00:01.0/host0/target0:0:0/0:0:0:0";
        fake_device(root, "/devices/pci0/0000:00:01.0", "pci", "");
        let disk = fake_scsi_disk(root, sdev);
        let sysfs = Sysfs::new(root).with_parent_cache();
        let parent_of_disk = || {
            let ev = sysfs.read_event(Action::Add, disk.as_bytes()).unwrap();
            Device::from_event(&sysfs, ev).parent().unwrap()
        };
        let event = |action: &str, extra: &str| {
            let text = format!(
                "ACTION={action}\0DEVPATH={sdev}\0SUBSYSTEM=scsi\0SEQNUM=7\0DEVTYPE=scsi_device\0{extra}"
            );
            Uevent::parse_properties(text.as_bytes()).unwrap()
        };

        // Asked for by `udevadm trigger`: the kernel adds SYNTH_UUID.
        sysfs.event_processed(&event("add", "SYNTH_UUID=0\0"));
        // The file is not read again for the disk's event.
        let uevent = root.join(&sdev[1..]).join("uevent");
        fs::write(&uevent, "DEVTYPE=changed\n").unwrap();
        let parent = parent_of_disk();
        assert_eq!(parent.devpath(), sdev.as_bytes());
        assert_eq!(parent.event().get(b"DEVTYPE"), Some(&b"scsi_device"[..]));
        assert_eq!(parent.event().get(b"SYNTH_UUID"), None, "never in the file");
        assert_eq!(parent.event().get(b"SEQNUM"), None);
        assert_eq!(parent.subsystem(), Some(&b"scsi"[..]));

        // Any other event processed drops it, and it is read afresh.
        sysfs.event_processed(&event("change", ""));
        assert_eq!(
            parent_of_disk().event().get(b"DEVTYPE"),
            Some(&b"changed"[..])
        );

        // A removal forgets it too: the next climb finds no device there.
        fs::write(&uevent, "DEVTYPE=scsi_device\n").unwrap();
        sysfs.event_processed(&event("add", ""));
        sysfs.event_processed(&event("remove", ""));
        fs::remove_file(&uevent).unwrap();
        assert_eq!(parent_of_disk().devpath(), b"/devices/pci0/0000:00:01.0");

        // Without a parent cache nothing is remembered.
        let plain = Sysfs::new(root);
        plain.event_processed(&event("add", ""));
        let ev = plain.read_event(Action::Add, disk.as_bytes()).unwrap();
        let parent = Device::from_event(&plain, ev).parent().unwrap();
        assert_eq!(parent.devpath(), b"/devices/pci0/0000:00:01.0");
    }

    #[test]
    fn a_walk_notes_the_directories_between_devices_and_an_add_keeps_them() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let sdev = "/devices/pci0/host0/target0:0:0/0:0:0:0";
        fake_device(root, "/devices/pci0", "pci", "");
        let disk = fake_scsi_disk(root, sdev);
        let sysfs = Sysfs::new(root).with_parent_cache();
        let mut seen = Vec::new();
        walk_devices_remembering(&sysfs, |v| seen.push(v.devpath.to_vec())).unwrap();
        assert_eq!(seen.len(), 3);
        // What the listing showed is what a climb would have found: `block`
        // (and `host0`, `target0:0:0` above the device) are not devices.
        let noted = |dp: &str| {
            matches!(
                sysfs.parent_cache().unwrap().get(dp.as_bytes()),
                Some(parents::Known::NotADevice)
            )
        };
        assert!(noted(&format!("{sdev}/block")));
        assert!(noted("/devices/pci0/host0/target0:0:0"));
        assert!(!noted("/devices"), "the top is never climbed to");
        fake_device(root, "/devices/virtual/net/lo", "net", "INTERFACE=lo\n");
        let again = Sysfs::new(root).with_parent_cache();
        walk_devices_remembering(&again, |_| {}).unwrap();
        assert!(
            again
                .parent_cache()
                .unwrap()
                .get(b"/devices/virtual/net")
                .is_none(),
            "a class directory of virtual devices is known without a note"
        );
        assert!(!noted(sdev));
        // The device above `block` is added: the rules of its event may
        // have written its attributes, not made `block` a device.
        let add = format!("ACTION=add\0DEVPATH={sdev}\0SUBSYSTEM=scsi\0DEVTYPE=scsi_device\0");
        sysfs.event_processed(&Uevent::parse_properties(add.as_bytes()).unwrap());
        // A climb from the disk takes neither for a device, nor reads them.
        fs::write(root.join(&sdev[1..]).join("block/uevent"), "").unwrap();
        fs::remove_file(root.join(&sdev[1..]).join("uevent")).unwrap();
        let ev = sysfs.read_event(Action::Add, disk.as_bytes()).unwrap();
        let parent = Device::from_event(&sysfs, ev).parent().unwrap();
        assert_eq!(parent.devpath(), sdev.as_bytes());
        // A walk without remembering notes nothing.
        let plain = Sysfs::new(root).with_parent_cache();
        walk_devices(&plain, |_| {}).unwrap();
        assert!(plain.parent_cache().unwrap().is_empty());
    }

    #[test]
    fn a_remembered_parent_is_opened_from_the_directory_climbed_from() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let sdev = "/devices/pci0/host0/0:0:0:0";
        let disk = fake_scsi_disk(root, sdev);
        fs::write(root.join(&sdev[1..]).join("vendor"), "ATA\n").unwrap();
        let sysfs = Sysfs::new(root).with_parent_cache();
        let disk_event = || {
            let ev = sysfs.read_event(Action::Add, disk.as_bytes()).unwrap();
            Rc::new(Device::from_event(&sysfs, ev))
        };
        // The first event reads the parent; the next finds it remembered.
        assert!(disk_event().parent().is_some());
        let dev = disk_event();
        assert_eq!(dev.attr(b"removable"), None, "the disk's directory is open");
        // Moved away under its path from /sys, the parent is still two
        // levels above the disk's open directory.
        fs::rename(root.join("devices/pci0"), root.join("devices/pci1")).unwrap();
        let parent = dev.parent().unwrap();
        assert_eq!(parent.devpath(), sdev.as_bytes());
        assert_eq!(parent.sysattr(b"vendor").as_deref(), Some(&b"ATA"[..]));
    }

    #[test]
    fn a_driver_bound_keeps_what_is_below_and_the_device_as_its_event_says() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let pci = "/devices/pci0000:00/0000:00:09.0";
        let hub = format!("{pci}/usb1");
        let port = format!("{hub}/1-1");
        fake_device(root, pci, "pci", "PCI_ID=1B36:000D\n");
        fake_device(root, &hub, "usb", "DEVTYPE=usb_device\nBUSNUM=001\n");
        fake_device(root, &port, "usb", "DEVTYPE=usb_device\nBUSNUM=001\n");
        let sysfs = Sysfs::new(root).with_parent_cache();
        let event_of_port = || {
            let ev = sysfs.read_event(Action::Add, port.as_bytes()).unwrap();
            Rc::new(Device::from_event(&sysfs, ev))
        };
        let ancestors = |dev: &Rc<Device>| -> Vec<(String, Option<Vec<u8>>)> {
            dev.ancestors()
                .skip(1)
                .map(|d| {
                    let driver = d.event().get(b"DRIVER").map(<[u8]>::to_vec);
                    (String::from_utf8_lossy(d.devpath()).into_owned(), driver)
                })
                .collect()
        };
        assert_eq!(ancestors(&event_of_port()).len(), 2, "hub, PCI device");
        let known = sysfs.parent_cache().unwrap().len();

        // xhci binds to the PCI device: the kernel's event says what its
        // uevent file now says.
        let bind = format!(
            "ACTION=bind\0DEVPATH={pci}\0SUBSYSTEM=pci\0SEQNUM=9\0DRIVER=xhci_hcd\0PCI_ID=1B36:000D\0"
        );
        sysfs.event_seen(&Uevent::parse_properties(bind.as_bytes()).unwrap());
        assert_eq!(
            sysfs.parent_cache().unwrap().len(),
            known,
            "the hub is kept"
        );
        // The hub is locked while it enumerates its ports, and neither it
        // nor the PCI device is read again for the port's next event.
        fs::remove_file(root.join(&hub[1..]).join("uevent")).unwrap();
        fs::remove_file(root.join(&pci[1..]).join("uevent")).unwrap();
        let seen = ancestors(&event_of_port());
        assert_eq!(seen[0], (hub.clone(), None));
        assert_eq!(seen[1], (pci.to_string(), Some(b"xhci_hcd".to_vec())));
        let remembered = event_of_port().parent().unwrap().parent().unwrap();
        assert_eq!(remembered.event().action(), Action::Add);
        assert_eq!(remembered.event().get(b"SEQNUM"), None);
        assert_eq!(remembered.subsystem(), Some(&b"pci"[..]));

        // Any other event of the PCI device drops it and what is below it.
        let change = format!("ACTION=change\0DEVPATH={pci}\0SUBSYSTEM=pci\0SEQNUM=10\0");
        sysfs.event_seen(&Uevent::parse_properties(change.as_bytes()).unwrap());
        assert!(sysfs.parent_cache().unwrap().len() < known);
    }

    #[test]
    fn attribute_names_are_relative_to_the_device() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_device(root, "/devices/pci0/0000:00:04.0", "pci", "");
        let dir = root.join("devices/pci0/0000:00:04.0");
        fs::create_dir(dir.join("queue")).unwrap();
        fs::write(dir.join("queue/rotational"), "1\n").unwrap();
        let dev = Device::from_devpath(&Sysfs::new(root), b"/devices/pci0/0000:00:04.0").unwrap();
        assert_eq!(dev.sysattr(b"queue/rotational").as_deref(), Some(&b"1"[..]));
        // udev joins the name to the device's path: a leading slash is a
        // separator, never the root of the file system.
        assert_eq!(
            dev.sysattr(b"/queue/rotational").as_deref(),
            Some(&b"1"[..])
        );
        assert_eq!(dev.attr(b"//queue/rotational").as_deref(), Some(&b"1"[..]));
        assert_eq!(dev.attr(b"/etc/hostname"), None);
        assert_eq!(dev.sysattr(b"a\0b"), None);
    }

    #[test]
    fn driver_core_directories_are_never_devices() {
        for dp in ["/devices", "/devices/virtual", "/devices/virtual/net"] {
            assert!(never_a_device(dp.as_bytes()), "{dp}");
        }
        for dp in [
            "/devices/virtual/net/lo",
            "/devices/platform",
            "/devices/virtualx",
            "/devices/virtual/",
            "/devicesx",
        ] {
            assert!(!never_a_device(dp.as_bytes()), "{dp}");
        }
    }

    #[test]
    fn parents_are_climbed_to_from_the_open_directory_below_them() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_device(root, "/devices/pci0", "pci", "PCI_ID=1:2\n");
        fake_device(root, "/devices/pci0/host0", "scsi", "DEVTYPE=scsi_host\n");
        fs::write(root.join("devices/pci0/host0/proc_name"), "lab\n").unwrap();
        // `block` between the disk and its host is not a device.
        fake_device(
            root,
            "/devices/pci0/host0/block/sda",
            "block",
            "MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\n",
        );
        fs::write(root.join("devices/pci0/host0/block/sda/removable"), "0\n").unwrap();
        for sysfs in [Sysfs::new(root), Sysfs::new(root).with_parent_cache()] {
            let disk =
                Rc::new(Device::from_devpath(&sysfs, b"/devices/pci0/host0/block/sda").unwrap());
            assert_eq!(disk.attr(b"removable").as_deref(), Some(&b"0"[..]));
            // The path from the root moves; the disk's directory, open,
            // still leads to its parents, which are read through it.
            fs::rename(root.join("devices/pci0"), root.join("devices/pci9")).unwrap();
            let host = disk.parent().expect("the host, above the block directory");
            assert_eq!(host.devpath(), b"/devices/pci0/host0");
            assert_eq!(host.subsystem(), Some(&b"scsi"[..]));
            assert_eq!(host.devtype(), Some(&b"scsi_host"[..]));
            assert_eq!(host.attr(b"proc_name").as_deref(), Some(&b"lab"[..]));
            let names: Vec<Vec<u8>> = disk.ancestors().map(|d| d.devpath().to_vec()).collect();
            assert_eq!(
                names,
                [
                    &b"/devices/pci0/host0/block/sda"[..],
                    b"/devices/pci0/host0",
                    b"/devices/pci0"
                ]
            );
            fs::rename(root.join("devices/pci9"), root.join("devices/pci0")).unwrap();
        }
        // Without an open directory, the parent is looked up from the root.
        let sysfs = Sysfs::new(root);
        let disk = Device::from_devpath(&sysfs, b"/devices/pci0/host0/block/sda").unwrap();
        assert_eq!(disk.parent().unwrap().devpath(), b"/devices/pci0/host0");
        assert!(sysfs.parent_of(b"/devices/pci0/host0/block/sda").is_some());
        fs::remove_dir_all(root.join("devices/pci0/host0")).unwrap();
        assert_eq!(
            sysfs.parent_devpath(b"/devices/pci0/host0/block/sda"),
            Some(b"/devices/pci0".to_vec())
        );
    }

    #[test]
    fn paths_below_a_device_are_looked_up_from_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_device(root, "/devices/pci0/host0", "scsi", "DEVTYPE=scsi_host\n");
        fake_device(
            root,
            "/devices/pci0/host0/block/sda",
            "block",
            "DEVNAME=sda\n",
        );
        let sda = root.join("devices/pci0/host0/block/sda");
        fs::write(sda.join("whole_disk"), "").unwrap();
        fs::create_dir(sda.join("queue")).unwrap();
        fs::write(sda.join("queue/rotational"), "1\n").unwrap();
        symlink("../..", sda.join("device")).unwrap();
        let sysfs = Sysfs::new(root);
        let disk = Device::from_devpath(&sysfs, b"/devices/pci0/host0/block/sda").unwrap();
        let mode = |rel: &[u8]| disk.stat_below(rel).map(|m| m & 0o170000);
        assert_eq!(mode(b"whole_disk"), Some(0o100000));
        assert_eq!(mode(b"queue/rotational"), Some(0o100000));
        assert_eq!(mode(b"queue"), Some(0o040000));
        // Symlinks are followed, `..` climbs, as a stat of the whole path.
        assert_eq!(mode(b"device/uevent"), Some(0o100000));
        assert_eq!(mode(b"../../uevent"), Some(0o100000));
        assert_eq!(mode(b"missing"), None);
        assert_eq!(mode(b""), Some(0o040000));
        // Found from the open directory, not walked from the root again.
        fs::rename(root.join("devices/pci0"), root.join("devices/pci1")).unwrap();
        assert_eq!(mode(b"whole_disk"), Some(0o100000));
    }

    #[test]
    fn attributes_longer_than_a_page_are_read_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_device(root, "/devices/pci0/0000:00:03.0", "pci", "");
        let dir = root.join("devices/pci0/0000:00:03.0");
        let long: Vec<u8> = (0..10_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        fs::write(dir.join("long"), &long).unwrap();
        fs::write(dir.join("page"), vec![b'x'; 4097]).unwrap();
        let dev = Device::from_devpath(&Sysfs::new(root), b"/devices/pci0/0000:00:03.0").unwrap();
        assert_eq!(dev.sysattr(b"long").as_deref(), Some(&long[..]));
        assert_eq!(dev.attr(b"long").as_deref(), Some(&long[..]));
        assert_eq!(dev.sysattr(b"page").map(|v| v.len()), Some(4097));
    }

    #[test]
    fn parents_subsystems_and_number_links() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_device(root, "/devices/pci0/0000:00:01.0", "pci", "");
        fake_device(root, "/devices/pci0/0000:00:01.0/net/eth0", "net", "");
        fs::create_dir_all(root.join("module/loop")).unwrap();
        fs::create_dir_all(root.join("bus/pci/drivers/e1000")).unwrap();
        let sysfs = Sysfs::new(root);
        assert_eq!(
            sysfs.parent_devpath(b"/devices/pci0/0000:00:01.0/net/eth0"),
            Some(b"/devices/pci0/0000:00:01.0".to_vec())
        );
        assert_eq!(sysfs.parent_devpath(b"/devices/pci0/0000:00:01.0"), None);
        assert_eq!(sysfs.parent_devpath(b"/devices"), None);
        assert_eq!(sysfs.parent_devpath(b""), None);
        let sub = |dp: &[u8]| sysfs.subsystem_of(dp);
        assert_eq!(
            sub(b"/devices/pci0/0000:00:01.0/net/eth0"),
            Some(b"net".to_vec())
        );
        assert_eq!(sub(b"/module/loop"), Some(b"module".to_vec()));
        assert_eq!(sub(b"/bus/pci"), Some(b"subsystem".to_vec()));
        assert_eq!(sub(b"/bus/pci/drivers/e1000"), Some(b"drivers".to_vec()));
        // Below /devices only the link counts.
        assert_eq!(sub(b"/devices/pci0/drivers"), None);
        assert_eq!(sysfs.devnum_link(true, (8, 1)), root.join("dev/block/8:1"));
        assert_eq!(sysfs.devnum_link(false, (1, 3)), root.join("dev/char/1:3"));
    }

    #[test]
    fn sysattr_follows_udev_rules_for_links_directories_and_newlines() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_device(root, "/devices/pci0/0000:00:02.0", "pci", "DRIVER=e1000\n");
        let dir = root.join("devices/pci0/0000:00:02.0");
        fs::create_dir_all(root.join("bus/pci/drivers/e1000")).unwrap();
        symlink(root.join("bus/pci/drivers/e1000"), dir.join("driver")).unwrap();
        fs::write(dir.join("label"), "Onboard\r\n\n").unwrap();
        fs::write(dir.join("plain"), "x\n").unwrap();
        symlink(dir.join("plain"), dir.join("alias")).unwrap();
        fs::create_dir(dir.join("power")).unwrap();
        fs::write(dir.join("store_only"), "1").unwrap();
        fs::set_permissions(dir.join("store_only"), fs::Permissions::from_mode(0o200)).unwrap();
        let dev = Device::from_devpath(&Sysfs::new(root), b"/devices/pci0/0000:00:02.0").unwrap();
        assert_eq!(dev.sysattr(b"driver").as_deref(), Some(&b"e1000"[..]));
        assert_eq!(dev.sysattr(b"subsystem").as_deref(), Some(&b"pci"[..]));
        assert_eq!(dev.sysattr(b"label").as_deref(), Some(&b"Onboard"[..]));
        assert_eq!(dev.sysattr(b"alias"), None);
        assert_eq!(dev.attr(b"alias").as_deref(), Some(&b"x"[..]));
        assert_eq!(dev.sysattr(b"power"), None);
        assert_eq!(dev.sysattr(b"store_only"), None);
        assert_eq!(dev.sysattr(b"../x"), None);
        assert_eq!(dev.sysattr(b""), None);
        assert_eq!(dev.sysfs().root(), root);
    }

    #[test]
    fn finds_devices_by_subsystem_and_name_and_through_links() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let host = "/devices/pci0/0000:00:08.0/ata1/host0";
        fake_device(root, "/devices/pci0/0000:00:08.0", "pci", "");
        fake_device(root, "/devices/pci0/0000:00:08.0/ata1", "ata", "");
        fake_device(
            root,
            "/devices/pci0/0000:00:08.0/ata1/ata_port/ata1",
            "ata_port",
            "",
        );
        fake_device(root, host, "scsi", "DEVTYPE=scsi_host\n");
        fake_device(
            root,
            &format!("{host}/target0:0:0"),
            "scsi",
            "DEVTYPE=scsi_target\n",
        );
        let sdev = format!("{host}/target0:0:0/0:0:0:0");
        fake_device(root, &sdev, "scsi", "DEVTYPE=scsi_device\n");
        fs::create_dir_all(root.join("class/ata_port")).unwrap();
        symlink(
            "../../devices/pci0/0000:00:08.0/ata1/ata_port/ata1",
            root.join("class/ata_port/ata1"),
        )
        .unwrap();
        let sysfs = Sysfs::new(root);
        let port = sysfs
            .device_by_subsystem_sysname(b"ata_port", b"ata1")
            .unwrap();
        assert_eq!(
            port.devpath(),
            b"/devices/pci0/0000:00:08.0/ata1/ata_port/ata1"
        );
        assert!(sysfs
            .device_by_subsystem_sysname(b"ata_port", b"ata2")
            .is_none());
        assert!(sysfs
            .device_by_subsystem_sysname(b"ata_port", b"..")
            .is_none());
        assert!(sysfs.device_by_subsystem_sysname(b"", b"ata1").is_none());
        // The places udev gives subsystems, modules and drivers.
        fs::create_dir_all(root.join("module/sg")).unwrap();
        fs::create_dir_all(root.join("class/module/ghost")).unwrap();
        fs::create_dir_all(root.join("bus/scsi/drivers/sd")).unwrap();
        let at = |s: &[u8], n: &[u8]| sysfs.path_by_subsystem_sysname(s, n);
        assert_eq!(at(b"module", b"sg"), Some(root.join("module/sg")));
        assert_eq!(at(b"module", b"ghost"), None);
        assert_eq!(at(b"subsystem", b"scsi"), Some(root.join("bus/scsi")));
        assert_eq!(
            at(b"subsystem", b"ata_port"),
            Some(root.join("class/ata_port"))
        );
        assert_eq!(
            at(b"drivers", b"scsi:sd"),
            Some(root.join("bus/scsi/drivers/sd"))
        );
        assert_eq!(
            at(b"drivers", b"scsi:drivers"),
            Some(root.join("bus/scsi/drivers"))
        );
        assert_eq!(at(b"drivers", b"scsi:"), None);
        assert_eq!(at(b"drivers", b"sd"), None);

        let dev = Device::from_devpath(&sysfs, sdev.as_bytes()).unwrap();
        let found = dev
            .parent_with_subsystem(b"scsi", Some(b"scsi_host"))
            .unwrap();
        assert_eq!(found.devpath(), host.as_bytes());
        let nearest = dev.parent_with_subsystem(b"scsi", None).unwrap();
        assert_eq!(nearest.sysname(), b"target0:0:0");
        assert!(dev.parent_with_subsystem(b"usb", None).is_none());

        // A link from one device to another, as a virtual function's physfn.
        let ata = Device::from_devpath(&sysfs, b"/devices/pci0/0000:00:08.0/ata1").unwrap();
        symlink("..", root.join("devices/pci0/0000:00:08.0/ata1/up")).unwrap();
        assert_eq!(
            ata.child(b"up").unwrap().devpath(),
            b"/devices/pci0/0000:00:08.0"
        );
        assert_eq!(ata.child(b"host0").unwrap().devpath(), host.as_bytes());
        assert!(ata.child(b"missing").is_none());
        assert!(ata.child(b"../..").is_none());
        assert_eq!(
            sysfs.resolve(&root.join("class/ata_port/ata1")).as_deref(),
            Some(&b"/devices/pci0/0000:00:08.0/ata1/ata_port/ata1"[..])
        );
    }

    #[test]
    fn sysnum_is_the_trailing_number() {
        let sysfs = Sysfs::new("/nonexistent");
        let ev =
            Uevent::synthesize(Action::Add, b"/devices/x/sda12", Some(b"block"), b"", &[]).unwrap();
        assert_eq!(Device::from_event(&sysfs, ev).sysnum(), Some(&b"12"[..]));
    }
}
