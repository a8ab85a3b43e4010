//! The device model over sysfs.
//!
//! A [`Device`] is what one event is about: its identity comes from the event
//! (or from its `uevent` file when no event is at hand), everything else is
//! read from sysfs only when asked for and then remembered for the rest of
//! the event. The sysfs root is a parameter so that tests and scale
//! benchmarks can point it at a tree of their own.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use uevd_uevent::{Action, ParseError, Uevent};

mod walk;
pub use walk::{walk_devices, walk_subsystems, Visit};

/// A sysfs mount, usually `/sys`.
#[derive(Clone, Debug)]
pub struct Sysfs {
    root: PathBuf,
}

impl Default for Sysfs {
    fn default() -> Self {
        Sysfs::new("/sys")
    }
}

impl Sysfs {
    pub fn new(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
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

    /// Builds the event the kernel would send for an existing device, by
    /// reading its `uevent` file and `subsystem` link: what coldplug and
    /// rescans use instead of asking the kernel to resend.
    pub fn read_event(&self, action: Action, devpath: &[u8]) -> Result<Uevent, ReadError> {
        let dir = self.syspath(devpath);
        let uevent = fs::read(dir.join("uevent")).map_err(ReadError::Io)?;
        let subsystem = link_basename(&dir.join("subsystem"));
        Uevent::synthesize(action, devpath, subsystem.as_deref(), &uevent, &[])
            .map_err(ReadError::Parse)
    }
}

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

/// Attribute values read during one event; `None` for absent attributes.
type AttrCache = RefCell<HashMap<Box<[u8]>, Option<Rc<[u8]>>>>;

/// A device as one event sees it.
pub struct Device {
    sysfs: Sysfs,
    event: Uevent,
    /// Built on first use: most events never look at sysfs.
    syspath: std::cell::OnceCell<PathBuf>,
    attrs: AttrCache,
    parent: RefCell<Option<Option<Rc<Device>>>>,
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
        Device {
            syspath: std::cell::OnceCell::new(),
            sysfs: sysfs.clone(),
            event,
            attrs: RefCell::default(),
            parent: RefCell::default(),
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
        &self.event
    }

    pub fn devpath(&self) -> &[u8] {
        self.event.devpath()
    }

    pub fn devpath_os(&self) -> &OsStr {
        self.event.devpath_os()
    }

    pub fn syspath(&self) -> &Path {
        self.syspath
            .get_or_init(|| self.sysfs.syspath(self.event.devpath()))
    }

    pub fn sysname(&self) -> &[u8] {
        self.event.sysname()
    }

    /// The trailing number of the name (`sda1` → `1`), as udev's `%n`.
    pub fn sysnum(&self) -> Option<&[u8]> {
        let name = self.sysname();
        let digits = name.iter().rev().take_while(|c| c.is_ascii_digit()).count();
        (digits > 0 && digits < name.len()).then(|| &name[name.len() - digits..])
    }

    pub fn subsystem(&self) -> Option<Vec<u8>> {
        match self.event.subsystem() {
            Some(s) => Some(s.to_vec()),
            None => link_basename(&self.syspath().join("subsystem")),
        }
    }

    /// The driver bound now, read from the event or the `driver` link.
    pub fn driver(&self) -> Option<Vec<u8>> {
        match self.event.driver() {
            Some(d) => Some(d.to_vec()),
            None => link_basename(&self.syspath().join("driver")),
        }
    }

    pub fn devtype(&self) -> Option<&[u8]> {
        self.event.devtype()
    }

    pub fn devnum(&self) -> Option<(u32, u32)> {
        self.event.devnum()
    }

    pub fn is_block(&self) -> bool {
        self.event.is_block()
    }

    pub fn ifindex(&self) -> Option<u32> {
        self.event.ifindex()
    }

    /// The node name below /dev, as the kernel named it.
    pub fn devname(&self) -> Option<&[u8]> {
        self.event.devname()
    }

    /// A sysfs attribute, read once per event. Trailing newlines are
    /// dropped, as udev does.
    pub fn attr(&self, name: &[u8]) -> Option<Rc<[u8]>> {
        if name.is_empty() || name.split(|&c| c == b'/').any(|c| c == b"..") {
            return None;
        }
        if let Some(v) = self.attrs.borrow().get(name) {
            return v.clone();
        }
        let path = self.syspath().join(OsStr::from_bytes(name));
        let value = fs::read(path).ok().map(|mut v| {
            while v.last() == Some(&b'\n') {
                v.pop();
            }
            Rc::<[u8]>::from(v)
        });
        self.attrs.borrow_mut().insert(name.into(), value.clone());
        value
    }

    /// The nearest ancestor that is a device (has a `uevent` file).
    pub fn parent(&self) -> Option<Rc<Device>> {
        if let Some(p) = self.parent.borrow().as_ref() {
            return p.clone();
        }
        let mut dp = self.devpath();
        let found = loop {
            match dp.iter().rposition(|&c| c == b'/') {
                Some(0) | None => break None,
                Some(i) => dp = &dp[..i],
            }
            if self.sysfs.exists(dp) {
                break Device::from_devpath(&self.sysfs, dp).ok().map(Rc::new);
            }
        };
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
        assert_eq!(dev.subsystem().as_deref(), Some(&b"block"[..]));
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
    fn sysnum_is_the_trailing_number() {
        let sysfs = Sysfs::new("/nonexistent");
        let ev =
            Uevent::synthesize(Action::Add, b"/devices/x/sda12", Some(b"block"), b"", &[]).unwrap();
        assert_eq!(Device::from_event(&sysfs, ev).sysnum(), Some(&b"12"[..]));
    }
}
