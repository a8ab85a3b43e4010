//! Walks over sysfs in the order udev enumerates it: parents before
//! children, names sorted, symlinks never followed.

use crate::Sysfs;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::BorrowedFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// What a walk visits: a device's devpath, and its directory (open, when
/// the walk has it open).
pub struct Visit<'a> {
    pub devpath: &'a [u8],
    pub path: &'a Path,
    pub dir: Option<BorrowedFd<'a>>,
    /// The device's subsystem, when the walk knows it without reading its
    /// `subsystem` link: a device in a class's directory between devices
    /// (`.../0:0:0:0/block/sda`, `/devices/virtual/net/lo`) is of that
    /// class. The driver core makes such a directory for the devices of
    /// one class below one parent, names it after the class and puts
    /// nothing else in it.
    pub class: Option<&'a [u8]>,
}

fn sorted_subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort_unstable_by(|a, b| a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes()));
    dirs
}

/// A directory still to list: its name below an open parent (the top has
/// none), its path, and whether its parent is a device.
struct Pending {
    parent: Option<Arc<OwnedFd>>,
    path: PathBuf,
    in_device: bool,
    /// In a class's directory between devices: that class.
    class: Option<Rc<[u8]>>,
}

/// What one listing of a directory says: whether it is a device (it holds a
/// `uevent` file), whether that device is a network interface (it holds
/// `ifindex`), and its subdirectories, sorted.
struct Listing {
    device: bool,
    interface: bool,
    subdirs: Vec<Vec<u8>>,
    /// Symlinks, when asked for.
    links: Vec<Vec<u8>>,
}

/// Room for one `getdents64` call to return a whole device directory: a
/// SCSI disk's or a network interface's (about 40 entries of 24-40 bytes)
/// in one call, where a buffer grown from a few hundred bytes took three.
const LISTING_BUFFER: usize = 16 * 1024;

/// The largest record `getdents64` returns: its 19-byte header, a name of
/// 255 bytes and its NUL, rounded up to 8 bytes.
const LARGEST_RECORD: usize = 280;

/// The size of the record `getdents64` returns for a name of `len` bytes.
fn record_len(len: usize) -> usize {
    (19 + len + 1 + 7) & !7
}

/// `sysfs`'s magic number (`statfs(2)`).
const SYSFS_MAGIC: u64 = 0x6265_6572;

/// Whether `dir` is on sysfs, which fills a listing until the next entry
/// does not fit (kernfs's `readdir`): a listing that left room for the
/// largest entry then holds every entry left, and the call that would
/// only say so is not made. Under a thousand disks the walk lists some
/// fifteen thousand directories, and that call was one in seven of its
/// system calls.
fn on_sysfs(dir: BorrowedFd<'_>) -> bool {
    rustix::fs::fstatfs(dir).is_ok_and(|st| st.f_type as u64 == SYSFS_MAGIC)
}

#[cfg(test)]
thread_local! {
    /// `getdents64` calls made by this thread's listings, for tests.
    static LISTING_CALLS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Lists an open directory into `buf`. The entries' types come with the
/// listing (sysfs, like most file systems, fills them in), so no file is
/// looked up on its own. With `short_is_whole` (the directory is on
/// sysfs, [`on_sysfs`]) a listing that left room for another entry is
/// taken for the end.
fn list(dir: BorrowedFd<'_>, buf: &mut Vec<u8>, short_is_whole: bool) -> Listing {
    list_with(dir, buf, short_is_whole, false)
}

fn list_with(dir: BorrowedFd<'_>, buf: &mut Vec<u8>, short_is_whole: bool, links: bool) -> Listing {
    let mut listing = Listing {
        device: false,
        interface: false,
        subdirs: Vec::new(),
        links: Vec::new(),
    };
    // RawDir may skip a few bytes to align the buffer.
    let room = buf.capacity().saturating_sub(8);
    let mut entries = RawDir::new(dir, buf.spare_capacity_mut());
    let mut filled = 0;
    #[cfg(test)]
    LISTING_CALLS.with(|c| c.set(c.get() + 1));
    while let Some(Ok(e)) = entries.next() {
        let name = e.file_name().to_bytes();
        filled += record_len(name.len());
        if name != b"." && name != b".." {
            let kind = match e.file_type() {
                FileType::Unknown => {
                    rustix::fs::statat(dir, e.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                        .map_or(FileType::Unknown, |st| FileType::from_raw_mode(st.st_mode))
                }
                kind => kind,
            };
            match kind {
                FileType::Directory => listing.subdirs.push(name.to_vec()),
                FileType::Symlink if links => listing.links.push(name.to_vec()),
                FileType::RegularFile if name == b"uevent" => listing.device = true,
                FileType::RegularFile if name == b"ifindex" => listing.interface = true,
                _ => {}
            }
        }
        if entries.is_buffer_empty() {
            if short_is_whole && filled + LARGEST_RECORD <= room {
                break;
            }
            filled = 0;
            #[cfg(test)]
            LISTING_CALLS.with(|c| c.set(c.get() + 1));
        }
    }
    listing.subdirs.sort_unstable();
    listing
}

/// The names of the subdirectories and symlinks of a device's directory
/// (held as `O_PATH`), sorted: what path_id reads of a SCSI host's parent.
/// On sysfs a directory that fits one listing takes one call.
pub(crate) fn subdirs_and_links(dir: BorrowedFd<'_>) -> io::Result<Vec<Box<[u8]>>> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, ".", flags, Mode::empty())?;
    let mut buf = Vec::with_capacity(LISTING_BUFFER);
    let listing = list_with(fd.as_fd(), &mut buf, on_sysfs(fd.as_fd()), true);
    let mut names: Vec<Box<[u8]>> = listing
        .subdirs
        .into_iter()
        .chain(listing.links)
        .map(Vec::into_boxed_slice)
        .collect();
    names.sort_unstable();
    Ok(names)
}

/// The attribute groups and kernel objects the driver core, the block
/// layer and the network core put in every device's (or every block
/// device's, every interface's) directory. The
/// driver core places a child device in its parent's directory or in a
/// class directory there, never in one of these, and each holds many
/// entries: listing them was more than half of a walk's directories (a
/// SCSI disk has 31 directories, of which 8 are `power` and 10 belong to
/// its block device; an interface with one queue each way has 6, of which
/// 4 are its queues and counters).
struct Groups {
    /// `power` is in every device's directory when the kernel has power
    /// management (`/sys/power`): no child can then have that name.
    power: bool,
}

/// What a block device's directory holds besides its partitions. Both of
/// the first two are there for every disk and partition, and only there.
const BLOCK_GROUPS: [&[u8]; 6] = [
    b"holders",
    b"slaves",
    b"queue",
    b"mq",
    b"integrity",
    b"trace",
];

/// What the network core puts in every interface's directory: its queues
/// (a kobject per receive and transmit queue, up to hundreds on a server
/// NIC, each listed in turn) and its counters. An interface has both, and
/// `ifindex`.
const NET_GROUPS: [&[u8]; 2] = [b"queues", b"statistics"];

impl Groups {
    fn of(sysfs: &Sysfs) -> Groups {
        Groups {
            power: sysfs.root().join("power").is_dir(),
        }
    }

    /// The subdirectories of a device's directory that may hold devices.
    fn prune(&self, listing: &mut Listing) {
        let subdirs = &mut listing.subdirs;
        let has = |name: &[u8]| subdirs.binary_search_by(|d| d[..].cmp(name)).is_ok();
        let block = has(b"holders") && has(b"slaves");
        let net = listing.interface && has(b"queues") && has(b"statistics");
        let power = self.power;
        subdirs.retain(|d| {
            !(power && d == b"power"
                || block && BLOCK_GROUPS.contains(&&d[..])
                || net && NET_GROUPS.contains(&&d[..]))
        });
    }
}

/// Visits every device below `/devices` (each directory with a `uevent`
/// file), parents first. Returns how many were visited.
///
/// Each directory is opened relative to its parent's open descriptor (one
/// path component for the kernel to look up, not the whole path from
/// /sys) and listed once: four system calls a directory. A device's
/// attribute groups ([`Groups`]) are not listed at all.
pub fn walk_devices(sysfs: &Sysfs, visit: impl FnMut(Visit<'_>)) -> io::Result<usize> {
    walk(sysfs, false, visit)
}

/// [`walk_devices`], noting in the parent cache (if `sysfs` has one) each
/// directory between a device and its parent (`block`, `net`, ...) that
/// the walk found: the events of the devices below it would each look for
/// a `uevent` file there, for their first climb, that the listing already
/// showed is not there.
pub fn walk_devices_remembering(sysfs: &Sysfs, visit: impl FnMut(Visit<'_>)) -> io::Result<usize> {
    walk(sysfs, true, visit)
}

fn walk(sysfs: &Sysfs, remember: bool, mut visit: impl FnMut(Visit<'_>)) -> io::Result<usize> {
    let remember = remember && sysfs.parent_cache().is_some();
    let mut noted: Vec<u8> = Vec::new();
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let top = sysfs.root().join("devices");
    let virtual_dir = top.join("virtual");
    let groups = Groups::of(sysfs);
    let mut count = 0;
    let mut buf = Vec::with_capacity(LISTING_BUFFER);
    let mut short_is_whole = None;
    // What /sys/class lists: a directory between devices named as one of
    // them is that class's.
    let classes: Vec<Vec<u8>> = sorted_subdirs(&sysfs.root().join("class"))
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.as_bytes().to_vec()))
        .collect();
    let mut stack = vec![Pending {
        parent: None,
        path: top,
        in_device: false,
        class: None,
    }];
    while let Some(Pending {
        parent,
        path,
        in_device,
        class,
    }) = stack.pop()
    {
        // Only the top has no open parent.
        let at_top = parent.is_none();
        let opened = match &parent {
            Some(p) => match path.file_name() {
                Some(name) => rustix::fs::openat(p, name, flags, Mode::empty()),
                None => continue,
            },
            None => rustix::fs::open(&path, flags, Mode::empty()),
        };
        drop(parent);
        let fd = match opened {
            Ok(fd) => fd,
            // The top must be there; anything below may have gone since
            // its parent was listed.
            Err(e) if at_top => return Err(e.into()),
            Err(_) => continue,
        };
        let short_is_whole = *short_is_whole.get_or_insert_with(|| on_sysfs(fd.as_fd()));
        let mut listing = list(fd.as_fd(), &mut buf, short_is_whole);
        if at_top {
            // PCI host bridges first: behind them are the controllers
            // (storage, network, USB) whose drivers' probes are the
            // longest chains of a boot, and the sooner their devices are
            // seen, the sooner those drivers start loading. Firmware
            // (ACPI) devices, which sort before them, rarely need one.
            listing
                .subdirs
                .sort_by_key(|name| !name.starts_with(b"pci"));
        }
        if listing.device {
            groups.prune(&mut listing);
            if let Some(devpath) = sysfs.devpath_of(&path) {
                if remember && !in_device {
                    note_between(sysfs, &devpath, &mut noted);
                }
                visit(Visit {
                    devpath: &devpath,
                    path: &path,
                    dir: Some(fd.as_fd()),
                    class: class.as_deref(),
                });
                count += 1;
            }
        }
        if listing.subdirs.is_empty() {
            continue;
        }
        // A directory that is no device, below one that is (or below the
        // virtual devices' directory), named as a class: its devices are
        // of that class.
        let glue = (!listing.device && (in_device || path.parent() == Some(&virtual_dir)))
            .then(|| path.file_name().map(OsStrExt::as_bytes))
            .flatten()
            .filter(|name| classes.binary_search_by(|c| c[..].cmp(name)).is_ok())
            .map(Rc::<[u8]>::from);
        let dir = Arc::new(fd);
        for name in listing.subdirs.into_iter().rev() {
            stack.push(Pending {
                parent: Some(dir.clone()),
                path: path.join(std::ffi::OsStr::from_bytes(&name)),
                in_device: listing.device,
                class: glue.clone(),
            });
        }
    }
    Ok(count)
}

/// Notes the directory holding `devpath`, which is not a device, unless a
/// climb knows it without asking (`/devices`, `/devices/virtual/<class>`)
/// or it was the last noted (the interfaces in
/// `virtual/net` come one after another).
fn note_between(sysfs: &Sysfs, devpath: &[u8], noted: &mut Vec<u8>) {
    let Some(slash) = devpath.iter().rposition(|&c| c == b'/') else {
        return;
    };
    let between = &devpath[..slash];
    // What a climb never asks the cache about needs no note.
    if crate::never_a_device(between) || between == &noted[..] {
        return;
    }
    sysfs.not_a_device(between);
    noted.clear();
    noted.extend_from_slice(between);
}

/// Visits the subsystem-level objects that `udevadm trigger
/// --type=subsystems` announces: buses (`/bus/*`), their drivers
/// (`/bus/*/drivers/*`) and kernel modules (`/module/*`), each one that has a
/// `uevent` file. Their devpaths are what the kernel reports for them.
pub fn walk_subsystems(sysfs: &Sysfs, mut visit: impl FnMut(Visit<'_>)) -> io::Result<usize> {
    let mut count = 0;
    let mut emit = |dir: &Path| {
        if dir.join("uevent").is_file() {
            if let Some(devpath) = sysfs.devpath_of(dir) {
                visit(Visit {
                    devpath: &devpath,
                    path: dir,
                    dir: None,
                    class: None,
                });
                count += 1;
            }
        }
    };
    for module in sorted_subdirs(&sysfs.root().join("module")) {
        emit(&module);
    }
    for bus in sorted_subdirs(&sysfs.root().join("bus")) {
        emit(&bus);
        for driver in sorted_subdirs(&bus.join("drivers")) {
            emit(&driver);
        }
    }
    Ok(count)
}

/// What libudev enumerates as subsystems, in its order: modules, then each
/// bus followed by its `drivers` directory (when it has drivers) and the
/// drivers. Unlike [`walk_subsystems`] a `uevent` file is not asked for:
/// `drivers` directories have none and are listed all the same.
pub fn subsystem_devpaths(sysfs: &Sysfs) -> Vec<Vec<u8>> {
    let names = |dir: &Path| -> Vec<Vec<u8>> {
        sorted_subdirs(dir)
            .iter()
            .filter_map(|p| Some(p.file_name()?.as_bytes().to_vec()))
            .collect()
    };
    let root = sysfs.root();
    let mut found = Vec::new();
    for m in names(&root.join("module")) {
        found.push([&b"/module/"[..], &m].concat());
    }
    for bus in names(&root.join("bus")) {
        let devpath = [&b"/bus/"[..], &bus].concat();
        let drivers = names(&sysfs.syspath(&devpath).join("drivers"));
        found.push(devpath.clone());
        if !drivers.is_empty() {
            found.push([&devpath[..], b"/drivers"].concat());
        }
        for drv in drivers {
            found.push([&devpath[..], b"/drivers/", &drv].concat());
        }
    }
    found
}

/// The attribute files of the device in `dir`, with those in its
/// subdirectories (`power/control`) but not those of child devices (a
/// subdirectory with a `uevent` file), in no particular order. Files with
/// no read or write bit for their owner are not attributes; symlinks are
/// listed, whatever they point to.
pub fn attribute_names(dir: &Path) -> Vec<Vec<u8>> {
    use std::os::unix::fs::PermissionsExt;
    let mut names = Vec::new();
    let mut pending: Vec<Vec<u8>> = vec![Vec::new()];
    while let Some(sub) = pending.pop() {
        let here = dir.join(std::ffi::OsStr::from_bytes(&sub));
        if !sub.is_empty() && here.join("uevent").exists() {
            continue;
        }
        let Ok(rd) = fs::read_dir(&here) else {
            continue;
        };
        for e in rd.filter_map(Result::ok) {
            let Ok(ft) = e.file_type() else { continue };
            let mut name = sub.clone();
            if !name.is_empty() {
                name.push(b'/');
            }
            name.extend_from_slice(e.file_name().as_bytes());
            if ft.is_dir() {
                pending.push(name);
            } else if ft.is_file() || ft.is_symlink() {
                let mode = e.metadata().map(|m| m.permissions().mode()).unwrap_or(0);
                if ft.is_symlink() || mode & 0o600 != 0 {
                    names.push(name);
                }
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::fake_device;

    #[test]
    fn parents_come_before_children_and_links_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_device(root, "/devices/b", "x", "");
        fake_device(root, "/devices/a", "x", "");
        fake_device(root, "/devices/a/child", "x", "");
        fs::create_dir_all(root.join("devices/a/not-a-device/grandchild")).unwrap();
        fs::write(root.join("devices/a/not-a-device/grandchild/uevent"), "").unwrap();
        std::os::unix::fs::symlink(root.join("devices"), root.join("devices/a/loop")).unwrap();
        let mut seen = Vec::new();
        let n = walk_devices(&Sysfs::new(root), |v| {
            seen.push(String::from_utf8(v.devpath.to_vec()).unwrap())
        })
        .unwrap();
        assert_eq!(
            seen,
            [
                "/devices/a",
                "/devices/a/child",
                "/devices/a/not-a-device/grandchild",
                "/devices/b"
            ]
        );
        assert_eq!(n, 4);
    }

    /// A decoy device is planted in each group a walk must not list; the
    /// kernel never puts one there, so finding it means the group was read.
    #[test]
    fn attribute_groups_of_devices_are_not_listed() {
        let walk = |root: &Path| {
            let mut seen = Vec::new();
            walk_devices(&Sysfs::new(root), |v| {
                seen.push(String::from_utf8(v.devpath.to_vec()).unwrap())
            })
            .unwrap();
            seen
        };
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_device(root, "/devices/host", "x", "");
        fake_device(root, "/devices/host/power/decoy", "x", "");
        fake_device(root, "/devices/host/block/sda", "block", "");
        fake_device(root, "/devices/host/block/sda/sda1", "block", "");
        for group in ["holders", "slaves", "queue", "mq", "integrity", "trace"] {
            fake_device(
                root,
                &format!("/devices/host/block/sda/{group}/decoy"),
                "x",
                "",
            );
        }
        // Only in a block device (with holders and slaves) are these groups.
        for name in ["queue", "mq", "integrity", "trace"] {
            fake_device(root, &format!("/devices/host/{name}"), "x", "");
        }
        // Not a device: below it, every directory is listed.
        fake_device(root, "/devices/system/power/decoy", "x", "");
        // Without power management a device's child may be named power.
        let all = walk(root);
        assert!(all.contains(&"/devices/host/power/decoy".to_string()));
        fs::create_dir_all(root.join("power")).unwrap();
        let pruned = walk(root);
        let mut expected: Vec<String> = all
            .iter()
            .filter(|d| !d.starts_with("/devices/host/power/"))
            .filter(|d| !(d.starts_with("/devices/host/block/sda/") && d.ends_with("/decoy")))
            .cloned()
            .collect();
        assert_eq!(pruned, expected);
        // What is left: the disk and its partition, the device's children
        // named like a block device's groups, and all below a non-device.
        expected
            .retain(|d| d.starts_with("/devices/host/block") || d.starts_with("/devices/system"));
        assert_eq!(
            expected,
            [
                "/devices/host/block/sda",
                "/devices/host/block/sda/sda1",
                "/devices/system/power/decoy"
            ]
        );
        assert!(pruned.contains(&"/devices/host/queue".to_string()));
        // A block device's groups are never listed, power management or not.
        assert!(!all
            .iter()
            .any(|d| d.starts_with("/devices/host/block/sda/") && d.ends_with("/decoy")));
        assert_eq!(all.len(), pruned.len() + 1);
    }

    /// An interface's queues and counters are not listed; a directory of
    /// those names in anything that is not an interface still is.
    #[test]
    fn an_interfaces_queues_and_counters_are_not_listed() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let walk = || {
            let mut seen = Vec::new();
            walk_devices(&Sysfs::new(root), |v| {
                seen.push(String::from_utf8(v.devpath.to_vec()).unwrap())
            })
            .unwrap();
            seen
        };
        for dev in ["/devices/virtual/net/eth0", "/devices/pci0/usb0"] {
            fake_device(root, dev, "x", "");
            for sub in ["queues/rx-0/decoy", "queues/tx-0/decoy", "statistics/decoy"] {
                fake_device(root, &format!("{dev}/{sub}"), "x", "");
            }
        }
        fake_device(root, "/devices/virtual/net/eth0/child", "x", "");
        // Not an interface yet: every decoy is found.
        let all = walk();
        assert_eq!(all.len(), 9, "{all:?}");
        fs::write(root.join("devices/virtual/net/eth0/ifindex"), "2\n").unwrap();
        let pruned = walk();
        let expected: Vec<&String> = all
            .iter()
            .filter(|d| !(d.starts_with("/devices/virtual/net/eth0/") && d.ends_with("/decoy")))
            .collect();
        assert_eq!(pruned.iter().collect::<Vec<_>>(), expected);
        assert_eq!(pruned.len(), 6);
        assert!(pruned.contains(&"/devices/virtual/net/eth0/child".to_string()));
        assert!(pruned.contains(&"/devices/pci0/usb0/queues/rx-0/decoy".to_string()));
    }

    /// A directory of thousands of entries is listed whole, through a
    /// buffer that holds a few hundred at a time.
    #[test]
    fn a_directory_larger_than_one_listing_is_read_to_the_end() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let n = 2000;
        for i in 0..n {
            fake_device(root, &format!("/devices/virtual/net/dummy{i}"), "net", "");
        }
        let mut seen = 0;
        walk_devices(&Sysfs::new(root), |_| seen += 1).unwrap();
        assert_eq!(seen, n);
    }

    /// On this machine's sysfs, a directory is listed with one
    /// `getdents64` call when it fits the buffer, and to its end through a
    /// buffer that holds only a few entries at a time; elsewhere (a tree on
    /// tmpfs) the end is asked for, as before.
    #[test]
    fn a_sysfs_listing_that_fits_takes_one_call() {
        fn names(dir: &Path) -> Vec<Vec<u8>> {
            let mut v: Vec<Vec<u8>> = fs::read_dir(dir)
                .unwrap()
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.file_name().as_bytes().to_vec())
                .collect();
            v.sort();
            v
        }
        fn calls(dir: &Path, buffer: usize, short_is_whole: bool) -> (usize, Vec<Vec<u8>>) {
            let fd =
                rustix::fs::open(dir, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
            let mut buf = Vec::with_capacity(buffer);
            LISTING_CALLS.with(|c| c.set(0));
            let listing = list(fd.as_fd(), &mut buf, short_is_whole);
            (LISTING_CALLS.with(|c| c.get()), listing.subdirs)
        }
        let module = Path::new("/sys/module");
        if !module.is_dir() {
            return;
        }
        let fd =
            rustix::fs::open(module, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        assert!(on_sysfs(fd.as_fd()));
        let all = names(module);
        assert!(all.len() > 20, "{}", all.len());
        assert_eq!(calls(module, LISTING_BUFFER, true), (1, all.clone()));
        assert_eq!(calls(module, LISTING_BUFFER, false), (2, all.clone()));
        // A few entries at a time: read on until a call returns nothing
        // or leaves room.
        let (n, got) = calls(module, 512, true);
        assert_eq!(got, all);
        assert!(n > 3, "{n}");

        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("a")).unwrap();
        let fd = rustix::fs::open(
            tmp.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        assert!(!on_sysfs(fd.as_fd()));
    }

    #[test]
    fn only_a_regular_uevent_file_makes_a_device() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_device(root, "/devices/real", "x", "");
        fs::create_dir_all(root.join("devices/dir-named-uevent/uevent")).unwrap();
        fs::create_dir_all(root.join("devices/linked")).unwrap();
        std::os::unix::fs::symlink(
            root.join("devices/real/uevent"),
            root.join("devices/linked/uevent"),
        )
        .unwrap();
        let mut seen = Vec::new();
        walk_devices(&Sysfs::new(root), |v| seen.push(v.devpath.to_vec())).unwrap();
        assert_eq!(seen, [b"/devices/real".to_vec()]);
        assert!(walk_devices(&Sysfs::new(root.join("none")), |_| {}).is_err());
    }

    /// On this machine's sysfs: exactly the directories below
    /// /sys/devices with a regular `uevent` file, parents first, as a
    /// plain recursive walk by path finds them (in name order, PCI host
    /// bridges first), and every device behind a PCI host bridge before
    /// any other.
    #[test]
    fn the_real_sysfs_walk_finds_what_a_walk_by_path_finds() {
        fn by_path(dir: &Path, out: &mut Vec<PathBuf>) {
            if fs::symlink_metadata(dir.join("uevent")).is_ok_and(|m| m.is_file()) {
                out.push(dir.to_path_buf());
            }
            let Ok(rd) = fs::read_dir(dir) else { return };
            let mut subdirs: Vec<PathBuf> = rd
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect();
            subdirs.sort();
            if dir == Path::new("/sys/devices") {
                subdirs.sort_by_key(|d| !d.file_name().unwrap().as_bytes().starts_with(b"pci"));
            }
            for d in subdirs {
                by_path(&d, out);
            }
        }
        let sys = Path::new("/sys");
        if !sys.join("devices").is_dir() {
            return;
        }
        let mut expected = Vec::new();
        by_path(&sys.join("devices"), &mut expected);
        let mut seen = Vec::new();
        walk_devices(&Sysfs::new(sys), |v| seen.push(v.path.to_path_buf())).unwrap();
        // Devices may come and go meanwhile; this machine's are few and
        // settled.
        assert_eq!(seen, expected);
        assert!(seen.len() > 10, "{}", seen.len());
        let behind_pci = |p: &PathBuf| {
            p.strip_prefix("/sys/devices")
                .ok()
                .and_then(|rest| rest.iter().next())
                .is_some_and(|top| top.as_bytes().starts_with(b"pci"))
        };
        let pci = seen.iter().filter(|p| behind_pci(p)).count();
        assert!(
            seen[..pci].iter().all(behind_pci),
            "PCI devices are walked first: {:?}",
            &seen[..pci.min(5)]
        );
    }

    /// Where the walk names a device's class without reading its link, the
    /// link says the same; and it names one for most class devices.
    #[test]
    fn the_class_a_walk_names_is_what_the_subsystem_link_says() {
        let sys = Path::new("/sys");
        if !sys.join("devices/virtual").is_dir() {
            return;
        }
        let (mut named, mut classed) = (0, 0);
        walk_devices(&Sysfs::new(sys), |v| {
            let link = fs::read_link(v.path.join("subsystem")).ok();
            let linked = link
                .as_ref()
                .and_then(|l| l.file_name())
                .map(|n| n.as_bytes());
            let of_a_class = link
                .as_ref()
                .is_some_and(|l| l.parent().and_then(Path::file_name) == Some("class".as_ref()));
            if let Some(class) = v.class {
                assert_eq!(Some(class), linked, "{}", v.path.display());
                named += 1;
            }
            classed += usize::from(of_a_class);
        })
        .unwrap();
        // Class devices directly below another device of their class
        // (a disk's partitions) are the ones read from their link.
        assert!(named > 0 && named * 2 > classed, "{named} of {classed}");
    }

    /// The walk names the class of a device in a class's directory between
    /// devices, and of none other: not of a device below a device, not of
    /// one in a directory that no class is called.
    #[test]
    fn a_device_in_a_class_directory_is_of_that_class() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for class in ["block", "net"] {
            fs::create_dir_all(root.join("class").join(class)).unwrap();
        }
        let device = |rel: &str| {
            let d = root.join("devices").join(rel);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("uevent"), "").unwrap();
        };
        device("pci0/host0");
        device("pci0/host0/block/sda");
        device("pci0/host0/block/sda/sda1");
        device("pci0/host0/other/x");
        device("virtual/net/lo");
        fs::create_dir_all(root.join("devices/virtual/other")).unwrap();
        device("virtual/other/y");
        let mut classes = Vec::new();
        walk_devices(&Sysfs::new(root), |v| {
            classes.push((
                String::from_utf8_lossy(v.devpath).into_owned(),
                v.class.map(|c| String::from_utf8_lossy(c).into_owned()),
            ))
        })
        .unwrap();
        classes.sort();
        let want = |d: &str, c: Option<&str>| (d.to_string(), c.map(str::to_string));
        assert_eq!(
            classes,
            [
                want("/devices/pci0/host0", None),
                want("/devices/pci0/host0/block/sda", Some("block")),
                want("/devices/pci0/host0/block/sda/sda1", None),
                want("/devices/pci0/host0/other/x", None),
                want("/devices/virtual/net/lo", Some("net")),
                want("/devices/virtual/other/y", None),
            ]
        );
    }

    #[test]
    fn subsystems_in_libudev_order() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for d in [
            "module/zram",
            "module/loop",
            "bus/virtio/drivers/virtio_net",
            "bus/pci/drivers/e1000",
            "bus/pci/drivers/ahci",
            "bus/isa",
        ] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::create_dir_all(root.join("bus/isa/drivers")).unwrap();
        let found: Vec<String> = subsystem_devpaths(&Sysfs::new(root))
            .into_iter()
            .map(|d| String::from_utf8(d).unwrap())
            .collect();
        assert_eq!(
            found,
            [
                "/module/loop",
                "/module/zram",
                "/bus/isa",
                "/bus/pci",
                "/bus/pci/drivers",
                "/bus/pci/drivers/ahci",
                "/bus/pci/drivers/e1000",
                "/bus/virtio",
                "/bus/virtio/drivers",
                "/bus/virtio/drivers/virtio_net",
            ]
        );
        assert!(subsystem_devpaths(&Sysfs::new(root.join("nowhere"))).is_empty());
    }

    #[test]
    fn attributes_of_a_device_and_its_subdirectories_but_not_its_children() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake_device(root, "/devices/a", "x", "");
        fake_device(root, "/devices/a/child", "x", "");
        let dir = root.join("devices/a");
        fs::create_dir_all(dir.join("power")).unwrap();
        fs::write(dir.join("power/control"), "auto").unwrap();
        fs::write(dir.join("vendor"), "1").unwrap();
        fs::write(dir.join("no_bits"), "1").unwrap();
        fs::set_permissions(dir.join("no_bits"), fs::Permissions::from_mode(0o044)).unwrap();
        fs::write(dir.join("store_only"), "1").unwrap();
        fs::set_permissions(dir.join("store_only"), fs::Permissions::from_mode(0o200)).unwrap();
        std::os::unix::fs::symlink("nowhere", dir.join("dangling")).unwrap();
        let mut names: Vec<String> = attribute_names(&dir)
            .into_iter()
            .map(|n| String::from_utf8(n).unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "dangling",
                "power/control",
                "store_only",
                "subsystem",
                "uevent",
                "vendor"
            ]
        );
    }
}
