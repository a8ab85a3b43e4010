//! The device database, in the format libudev reads.
//!
//! `/run/udev/data/<id>` holds, for each processed device, the lines
//! `S:` (a link below /dev), `L:` (link priority), `I:` (initialisation time
//! in CLOCK_MONOTONIC microseconds), `E:` (a property set by rules), `G:`
//! (every tag the device ever had), `Q:` (current tags) and `V:1`. A device
//! with a device number or an interface index gets a file even when it has
//! nothing to say (an empty one: libudev takes its existence to mean the
//! device is initialised); other devices get one only when they have
//! something to say. `/run/udev/tags/<tag>/<id>` indexes devices by tag.
//! Files are written to a temporary name and renamed, so a reader never
//! sees half a record.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use uevd_uevent::Properties;

/// The identity of a device in the database.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId(String);

impl DeviceId {
    /// `b8:0` / `c4:64` for devices with a number, `n3` for network
    /// interfaces, `+subsystem:sysname` for the rest, and
    /// `+drivers:<bus>:<driver>` for drivers.
    pub fn new(
        subsystem: &[u8],
        devpath: &[u8],
        devnum: Option<(u32, u32)>,
        ifindex: Option<u32>,
    ) -> DeviceId {
        // Every event makes one: built by hand, core::fmt costs more than
        // the few bytes.
        if let Some((major, minor)) = devnum.filter(|&(major, _)| major > 0) {
            let mut id = String::with_capacity(24);
            id.push(if subsystem == b"block" { 'b' } else { 'c' });
            id.push_str(itoa::Buffer::new().format(major));
            id.push(':');
            id.push_str(itoa::Buffer::new().format(minor));
            return DeviceId(id);
        }
        if let Some(i) = ifindex.filter(|&i| i > 0) {
            let mut id = String::with_capacity(12);
            id.push('n');
            id.push_str(itoa::Buffer::new().format(i));
            return DeviceId(id);
        }
        let mut parts = devpath.rsplit(|&c| c == b'/');
        let sysname = parts.next().unwrap_or_default();
        let mut id = String::with_capacity(subsystem.len() + sysname.len() + 2);
        id.push('+');
        id.push_str(&uevd_uevent::text(subsystem));
        if subsystem == b"drivers" {
            // /bus/<bus>/drivers/<driver>
            let _drivers = parts.next();
            id.push(':');
            id.push_str(&uevd_uevent::text(parts.next().unwrap_or_default()));
        }
        id.push(':');
        id.push_str(&uevd_uevent::text(sysname));
        DeviceId(id)
    }

    /// An id as read from a file name.
    pub fn from_name(name: &str) -> Option<DeviceId> {
        let valid = !name.is_empty()
            && !name.contains('/')
            && !name.starts_with('.')
            && matches!(name.as_bytes()[0], b'b' | b'c' | b'n' | b'+');
        valid.then(|| DeviceId(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the database remembers about one device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// Links, relative to /dev.
    pub links: Vec<Vec<u8>>,
    pub link_priority: i32,
    /// CLOCK_MONOTONIC microseconds of the first processing.
    pub usec_initialized: u64,
    /// Properties set by rules and builtins, in order.
    pub properties: Properties,
    /// Every tag the device has had.
    pub tags: Vec<Vec<u8>>,
    /// Tags the last event set.
    pub current_tags: Vec<Vec<u8>>,
    /// Kept across the switch from initramfs to the real root.
    pub persist: bool,
}

impl Record {
    /// Whether the record says anything beyond the device's existence.
    pub fn has_info(&self) -> bool {
        !self.links.is_empty()
            || self.link_priority != 0
            || !self.properties.is_empty()
            || !self.tags.is_empty()
            || !self.current_tags.is_empty()
    }

    /// Whether the device gets a database file: one with something to
    /// say, or with a node or an interface index (libudev reads an existing
    /// file as "initialised").
    pub fn needs_file(&self, has_node: bool, has_ifindex: bool) -> bool {
        self.has_info() || has_node || has_ifindex
    }

    /// The file's contents. Links are only recorded for devices with a
    /// node, as udev does.
    pub fn encode(&self, has_node: bool) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.has_info() {
            return out;
        }
        let mut line = |tag: &[u8], parts: &[&[u8]]| {
            out.extend_from_slice(tag);
            for p in parts {
                out.extend_from_slice(p);
            }
            out.push(b'\n');
        };
        if has_node {
            for l in &self.links {
                line(b"S:", &[l]);
            }
            if self.link_priority != 0 {
                line(b"L:", &[self.link_priority.to_string().as_bytes()]);
            }
        }
        if self.usec_initialized > 0 {
            line(b"I:", &[self.usec_initialized.to_string().as_bytes()]);
        }
        for (k, v) in &self.properties {
            line(b"E:", &[k, b"=", v]);
        }
        for t in &self.tags {
            line(b"G:", &[t]);
        }
        for t in &self.current_tags {
            line(b"Q:", &[t]);
        }
        line(b"V:", &[b"1"]);
        out
    }

    /// Parses a database file. A line that cannot be understood is an
    /// error naming its line number; unknown line types are skipped, as
    /// libudev skips them.
    pub fn decode(data: &[u8]) -> Result<Record, DecodeError> {
        let mut r = Record::default();
        for (n, line) in data.split(|&c| c == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let err = |what| DecodeError { line: n + 1, what };
            if line.len() < 2 || line[1] != b':' {
                return Err(err("expected X:value"));
            }
            let value = &line[2..];
            match line[0] {
                b'S' => r.links.push(value.to_vec()),
                b'L' => {
                    r.link_priority = std::str::from_utf8(value)
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .ok_or(err("link priority is not a number"))?
                }
                b'I' => {
                    r.usec_initialized = std::str::from_utf8(value)
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .ok_or(err("initialisation time is not a number"))?
                }
                b'E' => {
                    let eq = value
                        .iter()
                        .position(|&c| c == b'=')
                        .filter(|&i| i > 0)
                        .ok_or(err("property without KEY="))?;
                    r.properties
                        .push((value[..eq].to_vec(), value[eq + 1..].to_vec()));
                }
                b'G' => r.tags.push(value.to_vec()),
                b'Q' => r.current_tags.push(value.to_vec()),
                _ => {}
            }
        }
        Ok(r)
    }
}

/// A database file that could not be parsed.
#[derive(Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub line: usize,
    pub what: &'static str,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for DecodeError {}

/// A database below a run directory, usually `/run/udev`.
pub struct Database {
    root: PathBuf,
    data: PathBuf,
    tags: PathBuf,
    unique: AtomicU64,
    pid: u32,
    /// Permission bits the process umask lets through at creation.
    umask_kept: u32,
    /// None for a database opened to read: writes are refused.
    data_fd: Option<rustix::fd::OwnedFd>,
}

impl Database {
    /// Opens (and creates) the database directories.
    pub fn open(root: impl Into<PathBuf>) -> io::Result<Database> {
        let root = root.into();
        let data = root.join("data");
        let tags = root.join("tags");
        for dir in [&root, &data, &tags] {
            fs::create_dir_all(dir)?;
        }
        let data_fd = rustix::fs::open(
            &data,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        Ok(Database {
            data,
            tags,
            root,
            unique: AtomicU64::new(0),
            pid: std::process::id(),
            umask_kept: current_umask_kept(),
            data_fd: Some(data_fd),
        })
    }

    /// Opens a database to read it, as libudev clients do: nothing is
    /// created, a missing directory reads as an empty database, and writes
    /// fail. For tools that must not leave a trace (`uevd info` runs
    /// without a daemon, possibly on another root).
    pub fn open_read_only(root: impl Into<PathBuf>) -> Database {
        let root = root.into();
        Database {
            data: root.join("data"),
            tags: root.join("tags"),
            root,
            unique: AtomicU64::new(0),
            pid: std::process::id(),
            umask_kept: 0,
            data_fd: None,
        }
    }

    fn data_fd(&self) -> io::Result<&rustix::fd::OwnedFd> {
        self.data_fd.as_ref().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{}: opened read-only", self.root.display()),
            )
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn path(&self, id: &DeviceId) -> PathBuf {
        self.data.join(&id.0)
    }

    /// Writes a device's record (or removes it, for a device with nothing
    /// to say and no number or interface index).
    pub fn write(
        &self,
        id: &DeviceId,
        record: &Record,
        has_node: bool,
        has_ifindex: bool,
    ) -> io::Result<()> {
        if !record.needs_file(has_node, has_ifindex) {
            return self.remove(id);
        }
        let contents = record.encode(has_node);
        let mode = if record.persist { 0o1644 } else { 0o644 };
        self.write_atomically(&id.0, &contents, mode)
    }

    /// [`Database::write`], unless the file already holds `record`:
    /// `before` is the record the device had, as last written or read.
    /// Events that change nothing (a second coldplug after the initramfs,
    /// `udevadm trigger` on a settled system, a `change` that finds what
    /// `add` found) then cost one lookup instead of a file made and
    /// renamed. The lookup keeps a record someone removed from being left
    /// out. Returns whether the file was written.
    pub fn write_unless_unchanged(
        &self,
        id: &DeviceId,
        before: Option<&Record>,
        record: &Record,
        has_node: bool,
        has_ifindex: bool,
    ) -> io::Result<bool> {
        if before == Some(record) && record.needs_file(has_node, has_ifindex) && self.is_file(&id.0)
        {
            return Ok(false);
        }
        self.write(id, record, has_node, has_ifindex)?;
        Ok(true)
    }

    /// Whether `data/<name>` is a regular file.
    fn is_file(&self, name: &str) -> bool {
        let Ok(data_fd) = self.data_fd() else {
            return false;
        };
        rustix::fs::statat(data_fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_file())
    }

    /// Writes `data/<name>` through a temporary file and a rename, relative
    /// to the open data directory (no path walk per write).
    fn write_atomically(&self, name: &str, contents: &[u8], mode: u32) -> io::Result<()> {
        use rustix::fs::{openat, renameat, unlinkat, AtFlags, Mode, OFlags};
        let data_fd = self.data_fd()?;
        let n = self.unique.fetch_add(1, Ordering::Relaxed);
        let tmp = format!(".#{name}.{}.{n}", self.pid);
        let result = (|| {
            let fd = openat(
                data_fd,
                tmp.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(mode),
            )?;
            let mut f = File::from(fd);
            if !contents.is_empty() {
                f.write_all(contents)?;
            }
            // The umask may have taken bits away; usually it has not, and
            // checking costs less than an unconditional chmod.
            if mode & !0o1000 & !self.umask_kept != 0 || mode & 0o1000 != 0 {
                f.set_permissions(fs::Permissions::from_mode(mode))?;
            }
            drop(f);
            renameat(data_fd, tmp.as_str(), data_fd, name)?;
            Ok(())
        })();
        if result.is_err() {
            let _ = unlinkat(data_fd, tmp.as_str(), AtFlags::empty());
        }
        result
    }

    /// Reads a device's record; `Ok(None)` when there is none.
    pub fn read(&self, id: &DeviceId) -> Result<Option<Record>, ReadError> {
        let path = self.path(id);
        let data = match fs::read(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ReadError::Io(path, e)),
        };
        let mut record = Record::decode(&data).map_err(|e| ReadError::Corrupt(path.clone(), e))?;
        record.persist = fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o1000 != 0)
            .unwrap_or(false);
        Ok(Some(record))
    }

    /// Removes a device's record.
    pub fn remove(&self, id: &DeviceId) -> io::Result<()> {
        match rustix::fs::unlinkat(self.data_fd()?, id.0.as_str(), rustix::fs::AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Brings `/run/udev/tags` in line: tags in `old` but not in `new` are
    /// dropped, tags in `new` are indexed.
    pub fn index_tags(&self, id: &DeviceId, old: &[Vec<u8>], new: &[Vec<u8>]) -> io::Result<()> {
        self.data_fd()?;
        for t in old.iter().filter(|t| !new.contains(t)) {
            if let Some(dir) = self.tag_dir(t) {
                remove_if_exists(&dir.join(&id.0))?;
            }
        }
        for t in new.iter().filter(|t| !old.contains(t)) {
            let Some(dir) = self.tag_dir(t) else { continue };
            let file = dir.join(&id.0);
            let created = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o444)
                .open(&file);
            match created {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    fs::create_dir_all(&dir)?;
                    File::create(&file)?;
                    fs::set_permissions(&file, fs::Permissions::from_mode(0o444))?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The ids of devices carrying a tag.
    pub fn tagged(&self, tag: &[u8]) -> Vec<DeviceId> {
        let Some(dir) = self.tag_dir(tag) else {
            return Vec::new();
        };
        fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .filter_map(|e| DeviceId::from_name(e.file_name().to_str()?))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every (tag, device) pair in the tag index.
    pub fn tag_index(&self) -> Vec<(Vec<u8>, DeviceId)> {
        let mut out = Vec::new();
        let Ok(tags) = fs::read_dir(&self.tags) else {
            return out;
        };
        for tag in tags.filter_map(Result::ok) {
            let name = tag.file_name().as_bytes().to_vec();
            if let Ok(ids) = fs::read_dir(tag.path()) {
                out.extend(
                    ids.filter_map(Result::ok)
                        .filter_map(|e| DeviceId::from_name(e.file_name().to_str()?))
                        .map(|id| (name.clone(), id)),
                );
            }
        }
        out
    }

    /// Every device id with a record.
    pub fn ids(&self) -> Vec<DeviceId> {
        fs::read_dir(&self.data)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .filter_map(|e| DeviceId::from_name(e.file_name().to_str()?))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn tag_dir(&self, tag: &[u8]) -> Option<PathBuf> {
        let ok = !tag.is_empty() && !tag.contains(&b'/') && tag != b"." && tag != b"..";
        ok.then(|| self.tags.join(std::ffi::OsStr::from_bytes(tag)))
    }
}

/// The bits the umask keeps, read without changing it for long.
fn current_umask_kept() -> u32 {
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
    rustix::process::umask(old);
    0o7777 & !old.as_raw_mode()
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Why a record could not be read.
#[derive(Debug)]
pub enum ReadError {
    Io(PathBuf, io::Error),
    Corrupt(PathBuf, DecodeError),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            ReadError::Corrupt(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for ReadError {}

/// `/run/udev/queue`: present exactly while events are pending.
pub struct QueueFlag {
    path: PathBuf,
}

impl QueueFlag {
    pub fn new(run_udev: &Path) -> QueueFlag {
        QueueFlag {
            path: run_udev.join("queue"),
        }
    }

    pub fn set(&self, busy: bool) {
        let result = if busy {
            File::create(&self.path).map(drop)
        } else {
            remove_if_exists(&self.path)
        };
        if let Err(e) = result {
            eprintln!("uevd: cannot update {}: {e}", self.path.display());
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Removes database files and the tag and link indexes that point at
/// them, keeping what rules marked db_persist (the sticky bit), as
/// udevadm does when the initramfs hands over to the real root.
pub fn cleanup(udev_dir: &Path) {
    let data = udev_dir.join("data");
    let data_exists = data.is_dir();
    cleanup_dir(&data, 0o1000, 1);
    let keep =
        |name: &std::ffi::OsStr| data_exists && fs::symlink_metadata(data.join(name)).is_ok();
    for index in ["links", "tags"] {
        let Ok(rd) = fs::read_dir(udev_dir.join(index)) else {
            continue;
        };
        for e in rd.filter_map(Result::ok) {
            let path = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if let Ok(inner) = fs::read_dir(&path) {
                    for f in inner.filter_map(Result::ok) {
                        if !keep(&f.file_name()) {
                            let _ = fs::remove_file(f.path());
                        }
                    }
                }
                // Stays when a kept record still has an entry in it.
                let _ = fs::remove_dir(&path);
            } else {
                let _ = fs::remove_file(&path);
            }
        }
    }
    cleanup_dir(&udev_dir.join("static_node-tags"), 0, 2);
    // watch/ is the daemon's to clear: it may be running.
}

/// Removes what is in `dir` down to `depth` levels, except entries with a
/// mode bit of `keep_mask`; directories go only if emptied.
fn cleanup_dir(dir: &Path, keep_mask: u32, depth: u32) {
    if depth == 0 {
        return;
    }
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.filter_map(Result::ok) {
        let path = e.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.permissions().mode() & keep_mask != 0 {
            continue;
        }
        if meta.is_dir() {
            cleanup_dir(&path, keep_mask, depth - 1);
            let _ = fs::remove_dir(&path);
        } else {
            let _ = fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp_db() -> (tempfile::TempDir, Database) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path()).unwrap();
        (dir, db)
    }

    fn inode(db: &Database, id: &DeviceId) -> u64 {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(db.path(id)).unwrap().ino()
    }

    #[test]
    fn an_unchanged_record_is_not_written_again() {
        let (_dir, db) = tmp_db();
        let id = DeviceId::new(
            b"block",
            b"/devices/virtual/block/loop0",
            Some((7, 0)),
            None,
        );
        let record = Record {
            properties: vec![(b"ID_FS_TYPE".to_vec(), b"ext4".to_vec())],
            links: vec![b"disk/by-uuid/x".to_vec()],
            usec_initialized: 5,
            ..Record::default()
        };
        assert!(db
            .write_unless_unchanged(&id, None, &record, true, false)
            .unwrap());
        let first = inode(&db, &id);
        // The same again: the file stays the one written (a rewrite is a
        // new file renamed over it).
        assert!(!db
            .write_unless_unchanged(&id, Some(&record), &record, true, false)
            .unwrap());
        assert_eq!(inode(&db, &id), first);
        // Changed: written.
        let mut changed = record.clone();
        changed.properties[0].1 = b"vfat".to_vec();
        assert!(db
            .write_unless_unchanged(&id, Some(&record), &changed, true, false)
            .unwrap());
        assert_ne!(inode(&db, &id), first);
        assert_eq!(db.read(&id).unwrap().unwrap(), changed);
        // Unchanged, but someone removed the file: written again.
        fs::remove_file(db.path(&id)).unwrap();
        assert!(db
            .write_unless_unchanged(&id, Some(&changed), &changed, true, false)
            .unwrap());
        assert_eq!(db.read(&id).unwrap().unwrap(), changed);
        // Kept across the initramfs now: the mode changes, so it is written.
        let mut kept = changed.clone();
        kept.persist = true;
        assert!(db
            .write_unless_unchanged(&id, Some(&changed), &kept, true, false)
            .unwrap());
        assert!(db.read(&id).unwrap().unwrap().persist);
    }

    #[test]
    fn an_unchanged_record_that_needs_no_file_removes_it() {
        let (_dir, db) = tmp_db();
        let id = DeviceId::new(b"pci", b"/devices/pci0000:00/0000:00:01.0", None, None);
        let record = Record {
            properties: vec![(b"A".to_vec(), b"1".to_vec())],
            ..Record::default()
        };
        db.write(&id, &record, false, false).unwrap();
        let empty = Record::default();
        assert!(db
            .write_unless_unchanged(&id, Some(&empty), &empty, false, false)
            .unwrap());
        assert!(!db.path(&id).exists());
    }

    #[test]
    fn ids_follow_udev() {
        assert_eq!(
            DeviceId::new(b"block", b"/devices/x/sda", Some((8, 0)), None).as_str(),
            "b8:0"
        );
        assert_eq!(
            DeviceId::new(b"input", b"/devices/x/event0", Some((13, 64)), None).as_str(),
            "c13:64"
        );
        assert_eq!(
            DeviceId::new(b"net", b"/devices/virtual/net/lo", None, Some(1)).as_str(),
            "n1"
        );
        assert_eq!(
            DeviceId::new(b"pci", b"/devices/pci0000:00/0000:00:01.0", None, None).as_str(),
            "+pci:0000:00:01.0"
        );
        assert_eq!(
            DeviceId::new(b"drivers", b"/bus/pci/drivers/e1000", None, None).as_str(),
            "+drivers:pci:e1000"
        );
        assert_eq!(
            DeviceId::new(b"mem", b"/devices/virtual/mem/x", Some((0, 5)), None).as_str(),
            "+mem:x"
        );
    }

    #[test]
    fn write_read_round_trip_and_lines_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let db = Database::open(tmp.path()).unwrap();
        let id = DeviceId::new(b"block", b"/devices/sda", Some((8, 0)), None);
        let rec = Record {
            links: vec![b"disk/by-id/a".to_vec(), b"disk/by-path/b".to_vec()],
            link_priority: -10,
            usec_initialized: 1234,
            properties: vec![(b"ID_FS_TYPE".to_vec(), b"ext4".to_vec())],
            tags: vec![b"systemd".to_vec()],
            current_tags: vec![b"systemd".to_vec()],
            persist: true,
        };
        db.write(&id, &rec, true, false).unwrap();
        let text = fs::read_to_string(db.path(&id)).unwrap();
        assert_eq!(
            text,
            "S:disk/by-id/a\nS:disk/by-path/b\nL:-10\nI:1234\nE:ID_FS_TYPE=ext4\nG:systemd\nQ:systemd\nV:1\n"
        );
        let mode = fs::metadata(db.path(&id)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o1644);
        assert_eq!(db.read(&id).unwrap(), Some(rec));
        let leftovers: Vec<_> = fs::read_dir(tmp.path().join("data")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind");
    }

    #[test]
    fn empty_devices_get_an_empty_file_only_with_a_number_or_ifindex() {
        let tmp = tempfile::tempdir().unwrap();
        let db = Database::open(tmp.path()).unwrap();
        let net = DeviceId::new(b"net", b"/devices/virtual/net/v0", None, Some(9));
        db.write(&net, &Record::default(), false, true).unwrap();
        assert_eq!(fs::read(db.path(&net)).unwrap(), b"");
        let pci = DeviceId::new(b"pci", b"/devices/p", None, None);
        fs::write(db.path(&pci), "stale").unwrap();
        db.write(&pci, &Record::default(), false, false).unwrap();
        assert!(!db.path(&pci).exists());
        assert_eq!(
            fs::metadata(db.path(&net)).unwrap().permissions().mode() & 0o7777,
            0o644
        );
    }

    #[test]
    fn corrupt_records_are_reported_with_their_line() {
        let tmp = tempfile::tempdir().unwrap();
        let db = Database::open(tmp.path()).unwrap();
        let id = DeviceId::from_name("n3").unwrap();
        fs::write(db.path(&id), "S:x\nL:high\n").unwrap();
        match db.read(&id) {
            Err(ReadError::Corrupt(_, e)) => assert_eq!(e.line, 2),
            other => panic!("{other:?}"),
        }
        fs::write(db.path(&id), "garbage").unwrap();
        assert!(db.read(&id).is_err());
    }

    #[test]
    fn tags_are_indexed_and_unindexed() {
        let tmp = tempfile::tempdir().unwrap();
        let db = Database::open(tmp.path()).unwrap();
        let id = DeviceId::from_name("c13:64").unwrap();
        db.index_tags(
            &id,
            &[],
            &[b"seat".to_vec(), b"uaccess".to_vec(), b"../x".to_vec()],
        )
        .unwrap();
        assert_eq!(db.tagged(b"seat"), vec![id.clone()]);
        db.index_tags(
            &id,
            &[b"seat".to_vec(), b"uaccess".to_vec()],
            &[b"uaccess".to_vec()],
        )
        .unwrap();
        assert!(db.tagged(b"seat").is_empty());
        assert_eq!(db.tagged(b"uaccess"), vec![id]);
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = Record::decode(&data);
        }
    }

    #[test]
    fn a_read_only_database_reads_creates_nothing_and_refuses_writes() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("udev");
        let id = DeviceId::new(b"block", b"/devices/x/sda", Some((8, 0)), None);
        let ro = Database::open_read_only(&root);
        assert!(matches!(ro.read(&id), Ok(None)));
        assert!(ro.ids().is_empty() && ro.tagged(b"systemd").is_empty());
        let record = Record {
            tags: vec![b"systemd".to_vec()],
            ..Record::default()
        };
        let err = ro.write(&id, &record, true, false).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(
            ro.index_tags(&id, &[], &record.tags).unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
        assert!(ro.remove(&id).is_err());
        assert!(!root.exists(), "nothing created");

        let rw = Database::open(&root).unwrap();
        rw.write(&id, &record, true, false).unwrap();
        rw.index_tags(&id, &[], &record.tags).unwrap();
        assert_eq!(ro.read(&id).unwrap().unwrap().tags, record.tags);
        assert_eq!(ro.path(&id), rw.path(&id));
        assert_eq!(ro.tagged(b"systemd"), vec![id]);
    }

    #[test]
    fn cleanup_keeps_persistent_records_and_their_index_entries() {
        let tmp = tempfile::tempdir().unwrap();
        let u = tmp.path();
        for d in [
            "data/dir",
            "links/L1",
            "links/L2",
            "tags/t1",
            "tags/t2",
            "static_node-tags/s1/sub",
            "watch",
        ] {
            fs::create_dir_all(u.join(d)).unwrap();
        }
        for f in [
            "data/b8:0",
            "data/c1:1",
            "data/.tmp",
            "data/dir/x",
            "links/L1/b8:0",
            "links/L1/c1:1",
            "links/L2/c1:1",
            "links/stray",
            "tags/t1/b8:0",
            "tags/t2/c1:1",
            "static_node-tags/s1/node",
            "static_node-tags/s1/sub/deep",
            "static_node-tags/f",
            "watch/5",
            "queue",
        ] {
            fs::write(u.join(f), "").unwrap();
        }
        fs::set_permissions(u.join("data/b8:0"), fs::Permissions::from_mode(0o1644)).unwrap();
        cleanup(u);
        let mut left: Vec<String> = walk(u);
        left.sort();
        assert_eq!(
            left,
            [
                "data",
                "data/b8:0",
                "data/dir",
                "data/dir/x",
                "links",
                "links/L1",
                "links/L1/b8:0",
                "queue",
                "static_node-tags",
                "static_node-tags/s1",
                "static_node-tags/s1/sub",
                "static_node-tags/s1/sub/deep",
                "tags",
                "tags/t1",
                "tags/t1/b8:0",
                "watch",
                "watch/5",
            ]
        );
    }

    fn walk(root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap().filter_map(Result::ok) {
                let p = e.path();
                out.push(p.strip_prefix(root).unwrap().display().to_string());
                if e.file_type().unwrap().is_dir() {
                    stack.push(p);
                }
            }
        }
        out
    }
}
