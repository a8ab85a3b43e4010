//! Device nodes and links under /dev.
//!
//! /dev is shared with every process on the machine, so nothing here
//! resolves a path the usual way: each directory is opened from the /dev
//! directory descriptor one component at a time with `O_NOFOLLOW`, names
//! are checked for `..`, and a node is identified by `fstat` on an `O_PATH`
//! descriptor before its owner or mode is changed. A symlink someone planted
//! in place of a directory or node is refused, never followed.
//!
//! With devtmpfs the kernel creates and removes nodes; uevd only applies
//! ownership and mode. Without it uevd creates the node with `mknod` and
//! removes it when the device goes.

mod claims;

pub use claims::{Claimant, LinkClaims, Links};

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{self as rfs, makedev, AtFlags, FileType, Gid, Mode, OFlags, Uid, CWD};
use rustix::io::Errno;
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Block or character device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Block,
    Char,
}

impl NodeKind {
    fn file_type(self) -> FileType {
        match self {
            NodeKind::Block => FileType::BlockDevice,
            NodeKind::Char => FileType::CharacterDevice,
        }
    }

    /// The directory of `MAJ:MIN` links: `block` or `char`.
    pub fn link_dir(self) -> &'static str {
        match self {
            NodeKind::Block => "block",
            NodeKind::Char => "char",
        }
    }
}

/// A device node to create or update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node<'a> {
    /// Name below /dev, as the kernel's DEVNAME (`sda`, `input/event0`).
    pub name: &'a [u8],
    pub kind: NodeKind,
    pub major: u32,
    pub minor: u32,
}

/// Owner, group and mode; `None` leaves that part alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Permissions {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub mode: Option<u32>,
}

/// What was done to a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeChange {
    Created,
    Updated,
    Unchanged,
    /// devtmpfs has no such node: the device is already gone.
    Missing,
}

/// A refusal or failure, with the name it concerns.
#[derive(Debug)]
pub struct NodeError {
    pub name: String,
    pub kind: NodeErrorKind,
}

#[derive(Debug)]
pub enum NodeErrorKind {
    /// `..`, an empty component or an absolute path.
    BadName,
    /// A symlink or other unexpected file stands where a directory or node
    /// should be.
    Planted,
    /// A file that is not a link already owns the link name.
    Occupied,
    Io(Errno),
}

/// The most of a name an error message shows: names come from uevents
/// and rules, and a 4 KiB one in every warning only buries the log.
const SHOWN_NAME_MAX: usize = 256;

/// `name`, cut to SHOWN_NAME_MAX bytes (at a character boundary) with
/// its full length said when it was cut.
fn shown(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() <= SHOWN_NAME_MAX {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut end = SHOWN_NAME_MAX;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}... ({} bytes)", &name[..end], name.len()))
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = shown(&self.name);
        match &self.kind {
            NodeErrorKind::BadName => write!(f, "refusing unsafe name '{name}'"),
            NodeErrorKind::Planted => write!(
                f,
                "refusing to follow '{name}': not the expected file (planted symlink?)"
            ),
            NodeErrorKind::Occupied => {
                write!(f, "'{name}' exists and is not a symlink; leaving it")
            }
            NodeErrorKind::Io(e) => write!(f, "{name}: {e}"),
        }
    }
}

impl std::error::Error for NodeError {}

impl From<NodeError> for io::Error {
    fn from(e: NodeError) -> io::Error {
        io::Error::other(e.to_string())
    }
}

type Result<T> = std::result::Result<T, NodeError>;

fn err(name: &[u8], kind: NodeErrorKind) -> NodeError {
    NodeError {
        name: String::from_utf8_lossy(name).into_owned(),
        kind,
    }
}

fn io_err(name: &[u8]) -> impl Fn(Errno) -> NodeError + '_ {
    move |e| err(name, NodeErrorKind::Io(e))
}

/// Splits a relative name into its components, refusing anything that
/// could leave /dev.
fn components(name: &[u8]) -> Result<Vec<&[u8]>> {
    let parts: Vec<&[u8]> = name.split(|&c| c == b'/').collect();
    let bad = name.is_empty()
        || name.contains(&0)
        || parts
            .iter()
            .any(|p| p.is_empty() || *p == b"." || *p == b"..");
    if bad {
        return Err(err(name, NodeErrorKind::BadName));
    }
    Ok(parts)
}

/// The target of a link at `link` pointing to `node`, both relative to
/// /dev: `disk/by-id/x` → `sda` gives `../../sda`.
pub fn relative_target(link: &[u8], node: &[u8]) -> Vec<u8> {
    let link_parts: Vec<&[u8]> = link.split(|&c| c == b'/').collect();
    let node_parts: Vec<&[u8]> = node.split(|&c| c == b'/').collect();
    let link_dirs = &link_parts[..link_parts.len().saturating_sub(1)];
    let common = link_dirs
        .iter()
        .zip(&node_parts[..node_parts.len().saturating_sub(1)])
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = Vec::new();
    for _ in common..link_dirs.len() {
        out.extend_from_slice(b"../");
    }
    out.extend_from_slice(&node_parts[common..].join(&b'/'));
    out
}

/// A directory below /dev, or /dev itself.
enum Dir<'a> {
    Root(&'a OwnedFd),
    Sub(Arc<OwnedFd>),
}

impl Dir<'_> {
    fn fd(&self) -> &OwnedFd {
        match self {
            Dir::Root(fd) => fd,
            Dir::Sub(fd) => fd,
        }
    }
}

/// The /dev directory.
pub struct DevDir {
    path: PathBuf,
    fd: OwnedFd,
    devtmpfs: bool,
    unique: AtomicU64,
    pid: u32,
    /// Whether the kernel has openat2 (5.6 and later), until it says not.
    openat2: AtomicBool,
    /// Directories right below /dev opened before (`char`, `block`,
    /// `input`), by name, with the inode each was. Every node has its
    /// `char/M:m` or `block/M:m` link: one stat that finds the same
    /// directory under that name replaces an open and a close. A directory
    /// removed, replaced or made a symlink since is not that inode and is
    /// opened afresh, with every check. Deeper directories are not kept: a
    /// stat follows links on the way, and `openat2` takes them in one call.
    dirs: Mutex<KnownDirs>,
}

/// Open directories by name, with their device and inode numbers.
type KnownDirs = HashMap<Vec<u8>, (Arc<OwnedFd>, (u64, u64))>;

/// Directories kept open at most: rules can name a new one per device.
const DIRS_KEPT: usize = 64;

impl DevDir {
    /// Opens /dev (or a scratch directory standing in for it) and finds
    /// out whether the kernel manages its nodes (devtmpfs).
    pub fn open(path: impl Into<PathBuf>) -> io::Result<DevDir> {
        let path = path.into();
        let devtmpfs = is_devtmpfs(&path);
        DevDir::open_as(path, devtmpfs)
    }

    /// Opens a /dev whose nodes the kernel creates (`devtmpfs` true) or
    /// uevd creates, whatever the mount says: for a /dev populated by other
    /// means, and for tests.
    pub fn open_as(path: impl Into<PathBuf>, devtmpfs: bool) -> io::Result<DevDir> {
        let path = path.into();
        let fd = rfs::open(
            &path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(DevDir {
            path,
            fd,
            devtmpfs,
            unique: AtomicU64::new(0),
            pid: std::process::id(),
            openat2: AtomicBool::new(true),
            dirs: Mutex::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the kernel creates nodes here.
    pub fn devtmpfs(&self) -> bool {
        self.devtmpfs
    }

    /// Opens the directory holding `name`, creating missing directories
    /// when asked; returns it and the last component.
    fn parent<'n>(&self, name: &'n [u8], create: bool) -> Result<(Dir<'_>, &'n [u8])> {
        let parts = components(name)?;
        let (last, dirs) = parts.split_last().expect("components() is never empty");
        let &[top] = dirs else {
            return self.open_parent(name, last, dirs, create);
        };
        if let Some(fd) = self.known_dir(top) {
            return Ok((Dir::Sub(fd), *last));
        }
        let (dir, last) = self.open_parent(name, last, dirs, create)?;
        if let Dir::Sub(fd) = &dir {
            self.remember_dir(top.to_vec(), fd);
        }
        Ok((dir, last))
    }

    /// The directory `name` right below /dev opened before, if it is still
    /// there under that name: a stat that follows no link (the name is
    /// one component) and finds the same inode.
    fn known_dir(&self, path: &[u8]) -> Option<Arc<OwnedFd>> {
        let (fd, id) = self.known_dirs().get(path).cloned()?;
        match rfs::statat(&self.fd, path, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st)
                if FileType::from_raw_mode(st.st_mode) == FileType::Directory
                    && (st.st_dev, st.st_ino) == id =>
            {
                Some(fd)
            }
            _ => {
                self.known_dirs().remove(path);
                None
            }
        }
    }

    fn remember_dir(&self, path: Vec<u8>, fd: &Arc<OwnedFd>) {
        let Ok(st) = rfs::fstat(&**fd) else {
            return;
        };
        let mut dirs = self.known_dirs();
        if dirs.len() >= DIRS_KEPT {
            dirs.clear();
        }
        dirs.insert(path, (fd.clone(), (st.st_dev, st.st_ino)));
    }

    fn known_dirs(&self) -> MutexGuard<'_, KnownDirs> {
        self.dirs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`DevDir::parent`] by opening each directory, as if none were
    /// known.
    fn open_parent<'n>(
        &self,
        name: &'n [u8],
        last: &'n [u8],
        dirs: &[&[u8]],
        create: bool,
    ) -> Result<(Dir<'_>, &'n [u8])> {
        #[cfg(test)]
        tests::DIR_OPENS.with(|n| n.set(n.get() + 1));
        if dirs.len() > 1 {
            if let Some(found) =
                self.open_beneath(name, &name[..name.len() - last.len() - 1], create)
            {
                return found.map(|fd| (Dir::Sub(Arc::new(fd)), last));
            }
        }
        let mut dir = Dir::Root(&self.fd);
        for d in dirs {
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let next = match rfs::openat(dir.fd(), *d, flags, Mode::empty()) {
                Err(Errno::NOENT) if create => {
                    match rfs::mkdirat(dir.fd(), *d, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(err(name, NodeErrorKind::Io(e))),
                    }
                    rfs::openat(dir.fd(), *d, flags, Mode::empty())
                }
                other => other,
            };
            dir = Dir::Sub(Arc::new(next.map_err(|e| match e {
                Errno::LOOP | Errno::NOTDIR => err(name, NodeErrorKind::Planted),
                e => err(name, NodeErrorKind::Io(e)),
            })?));
        }
        Ok((dir, last))
    }

    /// The directory `dirs` (`disk/by-id`) in one call where the kernel
    /// can refuse a symlink anywhere on the way itself (openat2 with
    /// RESOLVE_NO_SYMLINKS): an open and a close fewer per directory than
    /// the walk. `None` when the walk must do it: a directory is missing
    /// and is to be made, or the kernel has no openat2.
    fn open_beneath(&self, name: &[u8], dirs: &[u8], create: bool) -> Option<Result<OwnedFd>> {
        if !self.openat2.load(Ordering::Relaxed) {
            return None;
        }
        // No O_NOFOLLOW: with O_PATH it would open a symlink in the last
        // place instead of refusing it.
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let resolve = rfs::ResolveFlags::NO_SYMLINKS | rfs::ResolveFlags::BENEATH;
        match rfs::openat2(&self.fd, dirs, flags, Mode::empty(), resolve) {
            Ok(fd) => Some(Ok(fd)),
            Err(Errno::LOOP | Errno::NOTDIR) => Some(Err(err(name, NodeErrorKind::Planted))),
            // Nothing to make: the walk would only find the same hole.
            Err(Errno::NOENT) if !create => Some(Err(err(name, NodeErrorKind::Io(Errno::NOENT)))),
            // Old kernels, and sandboxes that filter what they do not know.
            Err(Errno::NOSYS | Errno::PERM) => {
                self.openat2.store(false, Ordering::Relaxed);
                None
            }
            Err(_) => None,
        }
    }

    /// Like [`DevDir::parent`] without creating anything; `None` when a
    /// directory on the way does not exist.
    fn existing_parent<'n>(&self, name: &'n [u8]) -> Result<Option<(Dir<'_>, &'n [u8])>> {
        match self.parent(name, false) {
            Ok(p) => Ok(Some(p)),
            Err(NodeError {
                kind: NodeErrorKind::Io(Errno::NOENT),
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn tmp_name(&self, base: &[u8]) -> Vec<u8> {
        let n = self.unique.fetch_add(1, Ordering::Relaxed);
        let mut t = b".#uevd.".to_vec();
        t.extend_from_slice(format!("{}.{n}.", self.pid).as_bytes());
        t.extend_from_slice(base);
        t
    }

    /// Makes sure the node exists (creating it without devtmpfs) and has
    /// the requested permissions.
    pub fn apply_node(&self, node: &Node<'_>, perms: Permissions) -> Result<NodeChange> {
        let name = node.name;
        let (dir, base) = self.parent(name, !self.devtmpfs)?;
        let dir = dir.fd();
        let want = makedev(node.major, node.minor);
        let mode = perms.mode.map(|m| m & 0o7777);
        // Most nodes are as they should be already (devtmpfs made them,
        // or an earlier event or run set them): one stat by name says so,
        // without the descriptor a change is made through. Nothing is
        // done on what it says; a change goes through the checked path.
        if let Ok(st) = rfs::statat(dir, base, AtFlags::SYMLINK_NOFOLLOW) {
            let ours =
                FileType::from_raw_mode(st.st_mode) == node.kind.file_type() && st.st_rdev == want;
            if ours && !needs_change(&st, perms) {
                return Ok(NodeChange::Unchanged);
            }
        }
        let mut change = NodeChange::Unchanged;
        let (fd, st) = match self.open_node(dir, base, node) {
            Ok(found) => found,
            Err(Errno::NOENT) if self.devtmpfs => return Ok(NodeChange::Missing),
            Err(Errno::NOENT) => {
                let m = Mode::from_raw_mode(mode.unwrap_or(0o600));
                match rfs::mknodat(dir, base, node.kind.file_type(), m, want) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(err(name, NodeErrorKind::Io(e))),
                }
                change = NodeChange::Created;
                self.open_node(dir, base, node).map_err(io_err(name))?
            }
            Err(Errno::STALE) if !self.devtmpfs => {
                // A node of another type or number: replace it atomically.
                let tmp = self.tmp_name(base);
                let m = Mode::from_raw_mode(mode.unwrap_or(0o600));
                rfs::mknodat(dir, &tmp[..], node.kind.file_type(), m, want)
                    .map_err(io_err(name))?;
                if let Err(e) = rfs::renameat(dir, &tmp[..], dir, base) {
                    let _ = rfs::unlinkat(dir, &tmp[..], AtFlags::empty());
                    return Err(err(name, NodeErrorKind::Io(e)));
                }
                change = NodeChange::Created;
                self.open_node(dir, base, node).map_err(io_err(name))?
            }
            Err(Errno::STALE) => return Err(err(name, NodeErrorKind::Planted)),
            Err(e) => return Err(err(name, NodeErrorKind::Io(e))),
        };
        if set_permissions(&fd, &st, dir, base, perms).map_err(io_err(name))? {
            change = change.max_with(NodeChange::Updated);
        }
        Ok(change)
    }

    /// Sets owner, group and mode of a node that exists without a device
    /// event naming it (`OPTIONS+="static_node="`). Only a device node is
    /// changed; a missing one is not an error.
    pub fn apply_static(&self, name: &[u8], perms: Permissions) -> Result<NodeChange> {
        let Some((dir, base)) = self.existing_parent(name)? else {
            return Ok(NodeChange::Missing);
        };
        let dir = dir.fd();
        let fd = match rfs::openat(
            dir,
            base,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(NodeChange::Missing),
            Err(e) => return Err(err(name, NodeErrorKind::Io(e))),
        };
        let st = rfs::fstat(&fd).map_err(io_err(name))?;
        let kind = FileType::from_raw_mode(st.st_mode);
        if kind != FileType::CharacterDevice && kind != FileType::BlockDevice {
            return Err(err(name, NodeErrorKind::Planted));
        }
        let changed = set_permissions(&fd, &st, dir, base, perms).map_err(io_err(name))?;
        Ok(if changed {
            NodeChange::Updated
        } else {
            NodeChange::Unchanged
        })
    }

    /// Opens a node by O_PATH without following links and checks it is the
    /// expected device. `ESTALE` means something else is there.
    fn open_node(
        &self,
        dir: &OwnedFd,
        base: &[u8],
        node: &Node<'_>,
    ) -> std::result::Result<(OwnedFd, rfs::Stat), Errno> {
        #[cfg(test)]
        tests::NODE_OPENS.with(|n| n.set(n.get() + 1));
        let fd = rfs::openat(
            dir,
            base,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let st = rfs::fstat(&fd)?;
        let ok = FileType::from_raw_mode(st.st_mode) == node.kind.file_type()
            && st.st_rdev == makedev(node.major, node.minor);
        if ok {
            Ok((fd, st))
        } else {
            Err(Errno::STALE)
        }
    }

    /// Removes a node uevd created, if it is still the device's node. With
    /// devtmpfs the kernel has already removed it.
    pub fn remove_node(&self, node: &Node<'_>) -> Result<bool> {
        if self.devtmpfs {
            return Ok(false);
        }
        let Some((dir, base)) = self.existing_parent(node.name)? else {
            return Ok(false);
        };
        let dir = dir.fd();
        match self.open_node(dir, base, node) {
            Ok(_) => {
                rfs::unlinkat(dir, base, AtFlags::empty()).map_err(io_err(node.name))?;
                self.prune_dirs(node.name);
                Ok(true)
            }
            Err(Errno::NOENT) | Err(Errno::STALE) => Ok(false),
            Err(e) => Err(err(node.name, NodeErrorKind::Io(e))),
        }
    }

    /// Points `link` (relative to /dev) at `node`. Replaces an existing
    /// link atomically; refuses to replace anything that is not a link.
    pub fn link(&self, link: &[u8], node: &[u8]) -> Result<NodeChange> {
        self.link_expecting(link, node, false)
    }

    /// [`DevDir::link`] for a caller that knows whether the link is
    /// probably there already (the device's last event made it): then
    /// reading it first settles the common case in one call, where trying
    /// to create it first would fail with EEXIST and read it anyway. A new
    /// link is created first for the same reason. A wrong guess costs one
    /// call, never a different result.
    pub fn link_expecting(&self, link: &[u8], node: &[u8], exists: bool) -> Result<NodeChange> {
        components(node)?;
        let (dir, base) = self.parent(link, true)?;
        let dir = dir.fd();
        let target = relative_target(link, node);
        let create = || match rfs::symlinkat(&target[..], dir, base) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => Ok(false),
            Err(e) => Err(err(link, NodeErrorKind::Io(e))),
        };
        // Creating never replaces: an existing name is read before any
        // decision to replace it.
        if !exists && create()? {
            return Ok(NodeChange::Created);
        }
        match rfs::readlinkat(dir, base, Vec::new()) {
            Ok(current) if current.as_bytes() == target => return Ok(NodeChange::Unchanged),
            Ok(_) => {}
            Err(Errno::NOENT) if exists => {
                if create()? {
                    return Ok(NodeChange::Created);
                }
            }
            Err(Errno::NOENT) => {}
            Err(Errno::INVAL) => return Err(err(link, NodeErrorKind::Occupied)),
            Err(e) => return Err(err(link, NodeErrorKind::Io(e))),
        }
        let tmp = self.tmp_name(base);
        rfs::symlinkat(&target[..], dir, &tmp[..]).map_err(io_err(link))?;
        // Check again right before the rename: never replace a non-link.
        let occupied = matches!(
            rfs::statat(dir, base, AtFlags::SYMLINK_NOFOLLOW),
            Ok(st) if FileType::from_raw_mode(st.st_mode) != FileType::Symlink
        );
        if occupied {
            let _ = rfs::unlinkat(dir, &tmp[..], AtFlags::empty());
            return Err(err(link, NodeErrorKind::Occupied));
        }
        if let Err(e) = rfs::renameat(dir, &tmp[..], dir, base) {
            let _ = rfs::unlinkat(dir, &tmp[..], AtFlags::empty());
            return Err(err(link, NodeErrorKind::Io(e)));
        }
        Ok(NodeChange::Created)
    }

    /// Removes `link` if it still points at `node` (another device may
    /// have taken it over), then any directories it leaves empty.
    pub fn unlink(&self, link: &[u8], node: &[u8]) -> Result<bool> {
        let Some((dir, base)) = self.existing_parent(link)? else {
            return Ok(false);
        };
        let dir = dir.fd();
        match rfs::readlinkat(dir, base, Vec::new()) {
            Ok(current) if current.as_bytes() == relative_target(link, node) => {
                rfs::unlinkat(dir, base, AtFlags::empty()).map_err(io_err(link))?;
                self.prune_dirs(link);
                Ok(true)
            }
            Ok(_) | Err(Errno::NOENT) | Err(Errno::INVAL) => Ok(false),
            Err(e) => Err(err(link, NodeErrorKind::Io(e))),
        }
    }

    /// Removes the now empty directories a name lived in (`disk/by-id`),
    /// but never the `char` and `block` directories every device uses.
    fn prune_dirs(&self, name: &[u8]) {
        let mut dirs: Vec<&[u8]> = name.split(|&c| c == b'/').collect();
        dirs.pop();
        while !dirs.is_empty() {
            if dirs.len() == 1 && matches!(dirs[0], b"char" | b"block") {
                return;
            }
            let path = dirs.join(&b'/');
            if rfs::unlinkat(&self.fd, &path[..], AtFlags::REMOVEDIR).is_err() {
                return;
            }
            dirs.pop();
        }
    }

    /// Where the `MAJ:MIN` link of a device goes: `block/8:0`.
    pub fn devnum_link(node: &Node<'_>) -> Vec<u8> {
        format!("{}/{}:{}", node.kind.link_dir(), node.major, node.minor).into_bytes()
    }
}

impl NodeChange {
    fn max_with(self, other: NodeChange) -> NodeChange {
        if self == NodeChange::Created {
            self
        } else {
            other
        }
    }
}

/// Whether owner, group or mode differ from what is asked.
fn needs_change(st: &rfs::Stat, perms: Permissions) -> bool {
    perms.uid.is_some_and(|u| u != st.st_uid)
        || perms.gid.is_some_and(|g| g != st.st_gid)
        || perms
            .mode
            .is_some_and(|m| st.st_mode & 0o7777 != m & 0o7777)
}

/// Changes what differs of owner, group and mode on an O_PATH node;
/// true if anything changed.
fn set_permissions(
    fd: &OwnedFd,
    st: &rfs::Stat,
    dir: &OwnedFd,
    base: &[u8],
    perms: Permissions,
) -> std::result::Result<bool, Errno> {
    let mut changed = false;
    let uid_change = perms.uid.filter(|&u| u != st.st_uid);
    let gid_change = perms.gid.filter(|&g| g != st.st_gid);
    if uid_change.is_some() || gid_change.is_some() {
        rfs::chownat(
            fd,
            "",
            uid_change.map(Uid::from_raw),
            gid_change.map(Gid::from_raw),
            AtFlags::EMPTY_PATH,
        )?;
        changed = true;
    }
    if let Some(mode) = perms.mode.map(|m| m & 0o7777) {
        if st.st_mode & 0o7777 != mode {
            chmod_fd(fd, dir, base, mode)?;
            changed = true;
        }
    }
    Ok(changed)
}

/// chmod through an O_PATH descriptor. The kernel has no fchmod for those
/// before fchmodat2 (6.6), so go through /proc/self/fd, which resolves to
/// the very inode that was checked; without /proc (very early boot), fall
/// back to the name, which the caller has just verified.
fn chmod_fd(fd: &OwnedFd, dir: &OwnedFd, base: &[u8], mode: u32) -> std::result::Result<(), Errno> {
    let mode = Mode::from_raw_mode(mode);
    match rfs::chmodat(fd.as_fd(), "", mode, AtFlags::EMPTY_PATH) {
        Ok(()) => return Ok(()),
        Err(Errno::INVAL) | Err(Errno::NOSYS) | Err(Errno::OPNOTSUPP) | Err(Errno::BADF) => {}
        Err(e) => return Err(e),
    }
    let proc_path = format!("/proc/self/fd/{}", rustix::fd::AsRawFd::as_raw_fd(fd));
    match rfs::chmodat(CWD, proc_path.as_str(), mode, AtFlags::empty()) {
        Ok(()) => Ok(()),
        Err(Errno::NOENT) => rfs::chmodat(dir, base, mode, AtFlags::empty()),
        Err(e) => Err(e),
    }
}

/// Whether `path` is a devtmpfs mount point.
fn is_devtmpfs(path: &Path) -> bool {
    let Ok(canon) = std::fs::canonicalize(path) else {
        return false;
    };
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    // Fields: id parent maj:min root mountpoint options ... - fstype source
    let mut result = false;
    for line in mounts.lines() {
        let mut fields = line.split(' ');
        let mount_point = fields.nth(4).map(unescape_mountinfo);
        let fstype = line.split(" - ").nth(1).and_then(|r| r.split(' ').next());
        if mount_point.as_deref() == Some(canon.as_os_str().as_encoded_bytes()) {
            // The last mount on a point is the one visible.
            result = fstype == Some("devtmpfs");
        }
    }
    result
}

fn unescape_mountinfo(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt, PermissionsExt};

    thread_local! {
        pub(super) static NODE_OPENS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        pub(super) static DIR_OPENS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn node(name: &[u8]) -> Node<'_> {
        Node {
            name,
            kind: NodeKind::Char,
            major: 1,
            minor: 3,
        }
    }

    fn root() -> bool {
        rustix::process::geteuid().is_root()
    }

    #[test]
    fn an_overlong_name_is_cut_short_in_messages() {
        let long = "é".repeat(3000);
        let e = err(long.as_bytes(), NodeErrorKind::BadName);
        let m = e.to_string();
        assert!(m.len() < 300, "{} bytes", m.len());
        assert!(m.contains("... (6000 bytes)"), "{m}");
        assert_eq!(e.name.len(), 6000);
        let e = err(b"fake/ok", NodeErrorKind::Occupied);
        assert_eq!(
            e.to_string(),
            "'fake/ok' exists and is not a symlink; leaving it"
        );
    }

    #[test]
    fn relative_targets() {
        assert_eq!(relative_target(b"disk/by-id/x", b"sda"), b"../../sda");
        assert_eq!(relative_target(b"block/8:0", b"sda"), b"../sda");
        assert_eq!(relative_target(b"cdrom", b"sr0"), b"sr0");
        assert_eq!(
            relative_target(b"input/by-path/k", b"input/event0"),
            b"../event0"
        );
        assert_eq!(
            relative_target(b"snd/by-id/k", b"input/event0"),
            b"../../input/event0"
        );
    }

    #[test]
    fn unsafe_names_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dev = DevDir::open(tmp.path()).unwrap();
        for bad in [&b"../etc/x"[..], b"/etc/x", b"a//b", b"", b"a/./b"] {
            assert!(matches!(
                dev.link(bad, b"null"),
                Err(NodeError {
                    kind: NodeErrorKind::BadName,
                    ..
                })
            ));
        }
    }

    #[test]
    fn a_wrong_guess_about_a_link_changes_nothing_but_the_order() {
        let tmp = tempfile::tempdir().unwrap();
        let dev = DevDir::open(tmp.path()).unwrap();
        let read = |l: &str| std::fs::read_link(tmp.path().join(l)).unwrap();
        for exists in [false, true] {
            let l = if exists {
                b"by-id/x".as_slice()
            } else {
                b"by-id/y"
            };
            let name = std::str::from_utf8(l).unwrap();
            assert_eq!(
                dev.link_expecting(l, b"sda", exists).unwrap(),
                NodeChange::Created
            );
            assert_eq!(read(name), Path::new("../sda"));
            for guess in [false, true] {
                assert_eq!(
                    dev.link_expecting(l, b"sda", guess).unwrap(),
                    NodeChange::Unchanged
                );
            }
            assert_eq!(
                dev.link_expecting(l, b"sdb", exists).unwrap(),
                NodeChange::Created
            );
            assert_eq!(read(name), Path::new("../sdb"));
        }
        std::fs::write(tmp.path().join("by-id/file"), "").unwrap();
        for guess in [false, true] {
            assert!(matches!(
                dev.link_expecting(b"by-id/file", b"sda", guess),
                Err(NodeError {
                    kind: NodeErrorKind::Occupied,
                    ..
                })
            ));
        }
    }

    #[test]
    fn links_are_created_replaced_and_removed_with_their_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let dev = DevDir::open(tmp.path()).unwrap();
        assert!(!dev.devtmpfs());
        assert_eq!(
            dev.link(b"disk/by-id/a", b"sda").unwrap(),
            NodeChange::Created
        );
        assert_eq!(
            dev.link(b"disk/by-id/a", b"sda").unwrap(),
            NodeChange::Unchanged
        );
        let t = std::fs::read_link(tmp.path().join("disk/by-id/a")).unwrap();
        assert_eq!(t, Path::new("../../sda"));
        assert_eq!(
            dev.link(b"disk/by-id/a", b"sdb").unwrap(),
            NodeChange::Created
        );
        assert!(
            !dev.unlink(b"disk/by-id/a", b"sda").unwrap(),
            "taken over by sdb"
        );
        assert!(dev.unlink(b"disk/by-id/a", b"sdb").unwrap());
        assert!(
            !tmp.path().join("disk").exists(),
            "empty directories pruned"
        );
        let dots: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert!(dots.is_empty(), "no temporary files left: {dots:?}");
    }

    fn assert_planted(r: Result<NodeChange>, link: &[u8]) {
        assert!(
            matches!(
                r,
                Err(NodeError {
                    kind: NodeErrorKind::Planted,
                    ..
                })
            ),
            "{}: {r:?}",
            String::from_utf8_lossy(link)
        );
    }

    #[test]
    fn a_directory_opened_before_is_taken_again_only_while_it_is_still_there() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let dev = DevDir::open(tmp.path()).unwrap();
        let opens = || DIR_OPENS.with(|n| n.get());
        dev.link(b"char/1:3", b"null").unwrap();
        dev.link(b"disk/by-id/a", b"sda").unwrap();
        let before = opens();
        dev.link(b"char/1:5", b"zero").unwrap();
        dev.link(b"disk/by-id/b", b"sdb").unwrap();
        assert_eq!(opens(), before + 1, "char was opened again");
        assert_eq!(
            std::fs::read_link(tmp.path().join("disk/by-id/b")).unwrap(),
            Path::new("../../sdb")
        );
        // Gone and made again: the new one gets the link.
        std::fs::remove_dir_all(tmp.path().join("char")).unwrap();
        std::fs::create_dir(tmp.path().join("char")).unwrap();
        dev.link(b"char/1:7", b"full").unwrap();
        assert!(tmp.path().join("char/1:7").is_symlink());
        // Replaced by a symlink, at the end or on the way: refused.
        std::fs::remove_dir_all(tmp.path().join("char")).unwrap();
        symlink(outside.path(), tmp.path().join("char")).unwrap();
        std::fs::rename(tmp.path().join("disk"), outside.path().join("disk")).unwrap();
        symlink(outside.path().join("disk"), tmp.path().join("disk")).unwrap();
        for link in [&b"char/1:8"[..], b"disk/by-id/c"] {
            assert_planted(dev.link(link, b"sdc"), link);
        }
        assert!(!outside.path().join("1:8").exists());
        assert!(!outside.path().join("disk/by-id/c").exists());
    }

    #[test]
    fn planted_symlinks_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let dev = DevDir::open(tmp.path()).unwrap();
        symlink(outside.path(), tmp.path().join("disk")).unwrap();
        assert_planted(dev.link(b"disk/by-id/a", b"sda"), b"disk/by-id/a");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        // The same for the last directory on the way, and deeper down.
        std::fs::remove_file(tmp.path().join("disk")).unwrap();
        std::fs::create_dir_all(tmp.path().join("disk/by-path")).unwrap();
        symlink(outside.path(), tmp.path().join("disk/by-id")).unwrap();
        symlink(outside.path(), tmp.path().join("disk/by-path/deep")).unwrap();
        for link in [&b"disk/by-id/a"[..], b"disk/by-path/deep/x/a"] {
            assert_planted(dev.link(link, b"sda"), link);
        }
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        // Directories that are really there are taken in one step.
        dev.link(b"disk/by-path/pci-0/a", b"sda").unwrap();
        dev.link(b"disk/by-path/pci-0/b", b"sda").unwrap();
        assert_eq!(
            std::fs::read_link(tmp.path().join("disk/by-path/pci-0/b")).unwrap(),
            Path::new("../../../sda")
        );
        // A regular file where a link should go stays.
        std::fs::write(tmp.path().join("cdrom"), "mine").unwrap();
        assert!(matches!(
            dev.link(b"cdrom", b"sr0"),
            Err(NodeError {
                kind: NodeErrorKind::Occupied,
                ..
            })
        ));
        assert_eq!(std::fs::read(tmp.path().join("cdrom")).unwrap(), b"mine");
        // A symlink planted where the node goes is not chmod-ed through.
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        symlink(&victim, tmp.path().join("planted")).unwrap();
        let perms = Permissions {
            mode: Some(0o666),
            ..Default::default()
        };
        if root() {
            // Replaced by the real node, the victim untouched.
            assert_eq!(
                dev.apply_node(&node(b"planted"), perms).unwrap(),
                NodeChange::Created
            );
            let m = std::fs::symlink_metadata(tmp.path().join("planted")).unwrap();
            assert!(m.file_type().is_char_device());
        } else {
            assert!(dev.apply_node(&node(b"planted"), perms).is_err());
        }
        let vm = std::fs::metadata(&victim).unwrap();
        assert_eq!(vm.permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn with_devtmpfs_nodes_are_only_adjusted_never_made_or_removed() {
        if !root() {
            eprintln!("skipped: mknod needs root");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dev = DevDir::open_as(tmp.path(), true).unwrap();
        let n = node(b"null0");
        let perms = Permissions {
            uid: Some(0),
            gid: Some(5),
            mode: Some(0o620),
        };
        // The kernel has not made it (the device is already gone): leave it.
        assert_eq!(dev.apply_node(&n, perms).unwrap(), NodeChange::Missing);
        assert!(std::fs::symlink_metadata(tmp.path().join("null0")).is_err());
        // The kernel made it: only owner and mode change.
        rfs::mknodat(
            CWD,
            tmp.path().join("null0").as_path(),
            FileType::CharacterDevice,
            Mode::from_raw_mode(0o600),
            makedev(1, 3),
        )
        .unwrap();
        assert_eq!(dev.apply_node(&n, perms).unwrap(), NodeChange::Updated);
        let m = std::fs::symlink_metadata(tmp.path().join("null0")).unwrap();
        assert_eq!((m.gid(), m.mode() & 0o7777), (5, 0o620));
        // A node of another device under that name is not uevd's to touch.
        let other = Node {
            minor: 9,
            ..n.clone()
        };
        assert!(matches!(
            dev.apply_node(&other, perms),
            Err(NodeError {
                kind: NodeErrorKind::Planted,
                ..
            })
        ));
        // Removal is the kernel's job.
        assert!(!dev.remove_node(&n).unwrap());
        assert!(tmp.path().join("null0").exists());
    }

    #[test]
    fn nodes_are_made_owned_and_removed() {
        if !root() {
            eprintln!("skipped: mknod needs root");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dev = DevDir::open(tmp.path()).unwrap();
        let n = node(b"sub/null0");
        let perms = Permissions {
            uid: Some(5),
            gid: Some(6),
            mode: Some(0o660),
        };
        assert_eq!(dev.apply_node(&n, perms).unwrap(), NodeChange::Created);
        let m = std::fs::symlink_metadata(tmp.path().join("sub/null0")).unwrap();
        assert!(m.file_type().is_char_device());
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (5, 6, 0o660));
        assert_eq!(m.rdev(), makedev(1, 3));
        // A node as asked is only looked at; one to change is opened, so
        // that the change reaches the very inode checked.
        let opens = || NODE_OPENS.with(|n| n.get());
        let before = opens();
        assert_eq!(dev.apply_node(&n, perms).unwrap(), NodeChange::Unchanged);
        assert_eq!(opens(), before);
        let perms2 = Permissions {
            mode: Some(0o600),
            ..perms
        };
        assert_eq!(dev.apply_node(&n, perms2).unwrap(), NodeChange::Updated);
        assert_eq!(opens(), before + 1);
        // Another device's number at the same name is not removed.
        let other = Node {
            minor: 5,
            ..n.clone()
        };
        assert!(!dev.remove_node(&other).unwrap());
        assert!(dev.remove_node(&n).unwrap());
        assert!(!tmp.path().join("sub").exists());
    }
}
